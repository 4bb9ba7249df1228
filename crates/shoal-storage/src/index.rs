//! Indexes of a row table: concurrent ordered maps from memcomparable key bytes to row handles
//! (`ordered_entries`: a sorted run plus a skiplist of recent entries), and for unique indexes a
//! hash map for point lookups. Every entry's map key is the encoded index key followed by the row's hidden id (big-endian),
//! so non-unique keys get distinct entries, unique keys can briefly have several (NULL keys, old
//! versions, uncommitted inserts) and all entries of one key value form one byte-prefix range.
//! Entries of old versions stay until GC: readers recheck the visible version's key. A small
//! array of striped mutexes serializes "check for a duplicate, then add the entry" per key (and
//! GC's "check the entry is stale, then remove it"), which is what makes unique checks atomic.

use std::borrow::Borrow;
use std::cell::Cell;
use std::cmp::Ordering;

use std::ops::Bound;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::ordered_entries::{Direction, OrderedEntries, RunBuilder};
use crate::point_map::PointMap;
use crate::table::RowRef;
use crate::types::{DataType, Value};
use crate::{key_codec, row_codec, IndexId};

/// Bytes of the row id suffix of every entry key.
pub(crate) const ROW_ID_BYTES: usize = 8;
const KEY_STRIPES: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDef {
    pub id: IndexId,
    pub name: String,
    /// Column positions in the table, in key order.
    pub columns: Vec<usize>,
    pub unique: bool,
    /// Partial indexes only: the rows the index holds. A row outside it has no entry, so it
    /// never conflicts in a unique index.
    pub predicate: Option<RowPredicate>,
}

/// The WHERE clause of a partial index. Storage does not evaluate SQL: the SQL layer compiles
/// the clause into this test of a whole decoded row.
#[derive(Clone)]
pub struct RowPredicate(pub Arc<dyn Fn(&[Value]) -> bool + Send + Sync>);

impl std::fmt::Debug for RowPredicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RowPredicate")
    }
}

/// Two predicates are the same only if they are the same compiled clause.
impl PartialEq for RowPredicate {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for RowPredicate {}

pub(crate) struct Index {
    pub def: IndexDef,
    /// Every entry, ordered: range scans, unique checks, GC.
    pub entries: OrderedEntries,
    stripes: Box<[Mutex<()>]>,
    /// Unique indexes only: the same entries hashed by key, for point lookups. A skiplist
    /// lookup over a million keys chases ~20 pointers (a cache miss each); this takes ~2.
    point: Option<PointMap>,
    /// Scans of this index, for pg_stat_user_indexes.
    pub activity: crate::activity::Striped<crate::activity::IndexCounters>,
}

fn key_hash(key: &[u8]) -> u64 {
    // FNV-1a: keys are short; this only has to spread them.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Index {
    pub(crate) fn new(def: IndexDef) -> Index {
        let point = def.unique.then(PointMap::new);
        Index {
            def,
            entries: OrderedEntries::new(),
            stripes: (0..KEY_STRIPES).map(|_| Mutex::new(())).collect(),
            point,
            activity: Default::default(),
        }
    }

    /// Adds the entry (key, row) unless present; returns whether it was added. Call under the
    /// key's stripe lock.
    pub(crate) fn add_entry(&self, key: &[u8], row: &RowRef) -> Option<EntryKey> {
        let entry = entry_key(key, row.row_id());
        if self.entries.contains(entry.as_bytes()) {
            return None;
        }
        self.entries.insert(entry.clone(), row.clone());
        if let Some(p) = &self.point {
            p.add(key, row);
        }
        Some(entry)
    }

    /// Adds the entry (key, row) of a row known to have no entry with this key yet (a bulk
    /// load): no probe for an existing entry. It waits in `pending` for `flush_loaded`, which
    /// sorts a whole block into the ordered entries and stages it for the point map.
    pub(crate) fn load_entry(&self, key: &[u8], row: &RowRef, pending: &mut LoadBuffer) {
        pending.ordered.push(key, row.clone());
        if let Some(p) = &self.point {
            if pending.point.is_empty() {
                pending.point.reserve(pending.block_entries);
            }
            pending.point.push((p.hash(key), row.clone()));
        }
    }

    /// Adds the entries `load_entry` left in `pending`, which it leaves empty.
    pub(crate) fn flush_loaded(&self, pending: &mut LoadBuffer) {
        let next = run_for_block(pending.block_entries);
        self.entries
            .stage(std::mem::replace(&mut pending.ordered, next));
        if let Some(p) = &self.point {
            p.load(&mut pending.point);
        }
        debug_assert!(
            pending.point.is_empty(),
            "point entries of an index without a point map"
        );
    }

    /// Inserts the point-map entries loads staged, on up to `threads` threads (lookups would
    /// do it on first use, on one).
    pub(crate) fn fold_staged_points(&self, threads: usize) {
        if let Some(p) = &self.point {
            p.fold_staged(threads);
        }
    }

    /// Removes the entry with this entry key (key + row id), if present.
    pub(crate) fn remove_entry(&self, entry: &[u8]) -> bool {
        match self.entries.remove(entry) {
            Some(row) => {
                if let Some(p) = &self.point {
                    p.remove(key_part(entry), &row);
                }
                true
            }
            None => false,
        }
    }

    /// Calls `f` with each entry (key + row id, row) within the bounds, in key order, until it
    /// returns false.
    pub(crate) fn for_each_entry(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        f: impl FnMut(&[u8], &RowRef) -> bool,
    ) {
        self.entries.for_each(lower, upper, f)
    }

    /// How many entries lie within the bounds, counted up to `enough`.
    pub(crate) fn count_range_up_to(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        enough: usize,
    ) -> usize {
        self.entries.count_range_up_to(lower, upper, enough)
    }

    /// Entries in the index, about.
    pub(crate) fn len_estimate(&self) -> usize {
        self.entries.len_estimate()
    }

    /// `for_each_entry` in either key order.
    pub(crate) fn walk_entries(
        &self,
        direction: Direction,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        f: impl FnMut(&[u8], &RowRef) -> bool,
    ) {
        self.entries.walk(direction, lower, upper, f)
    }

    pub(crate) fn clear(&self) {
        self.entries.clear();
        if let Some(p) = &self.point {
            p.clear();
        }
    }

    /// Unique indexes: every row with an entry under exactly `key`, and rarely another row
    /// whose key hashes the same (check each row's key). False if this index has no point map.
    pub(crate) fn point_candidates(&self, key: &[u8], out: &mut Vec<RowRef>) -> bool {
        match &self.point {
            Some(p) => {
                p.candidate_rows(key, out);
                true
            }
            None => false,
        }
    }

    /// Bytes the point map's tables hold (0 without one).
    pub(crate) fn point_map_bytes(&self) -> usize {
        self.point.as_ref().map_or(0, PointMap::allocation_bytes)
    }

    /// The stripe lock for one key value (encoded, without row id).
    pub(crate) fn lock_key(&self, key: &[u8]) -> MutexGuard<'_, ()> {
        self.stripes[(key_hash(key) % KEY_STRIPES as u64) as usize].lock()
    }

    /// Encodes this index's key of an encoded row into `out` (cleared first) and returns
    /// whether any key column is NULL (NULL keys never conflict: NULLS DISTINCT).
    pub(crate) fn row_key(
        &self,
        types: &[DataType],
        row: &[u8],
        values: &mut Vec<Value>,
        out: &mut Vec<u8>,
    ) -> bool {
        values.clear();
        out.clear();
        row_codec::decode_into(types, row, &self.def.columns, values);
        key_codec::encode_key_into(values, out);
        values.iter().any(Value::is_null)
    }

    /// Whether the encoded row has exactly this key (and belongs in the index at all).
    pub(crate) fn row_has_key(&self, types: &[DataType], row: &[u8], key: &[u8]) -> bool {
        let matches = with_key_scratch(|s| {
            self.row_key(types, row, &mut s.values, &mut s.key);
            s.key == key
        });
        matches && self.covers(types, row)
    }

    /// Whether the encoded row belongs in this index: always, unless the index is partial.
    pub(crate) fn covers(&self, types: &[DataType], row: &[u8]) -> bool {
        match &self.def.predicate {
            None => true,
            Some(p) => (p.0)(&row_codec::decode_all(types, row)),
        }
    }
}

/// Buffers for decoding rows' index keys, reused by a thread's point lookups, updates and GC
/// checks: each needs a few (the values, the encoded key, the candidate rows), and allocating
/// and freeing them on every call was several malloc/free pairs per pgbench statement.
#[derive(Default)]
pub(crate) struct KeyScratch {
    pub values: Vec<Value>,
    pub key: Vec<u8>,
    pub other_key: Vec<u8>,
    pub rows: Vec<RowRef>,
}

thread_local! {
    static KEY_SCRATCH: Cell<KeyScratch> = const {
        Cell::new(KeyScratch {
            values: Vec::new(),
            key: Vec::new(),
            other_key: Vec::new(),
            rows: Vec::new(),
        })
    };
}

/// Key buffers above this capacity are freed rather than kept for the next call, so one huge
/// text key does not stay allocated on a thread for good.
const SCRATCH_KEEP_BYTES: usize = 64 << 10;

/// Runs `f` with this thread's `KeyScratch`. A nested call (from inside `f`) gets empty buffers
/// of its own, so no two callers share one. The buffers come back empty of values and rows, so
/// the scratch keeps no row or string alive, only capacity.
pub(crate) fn with_key_scratch<R>(f: impl FnOnce(&mut KeyScratch) -> R) -> R {
    let mut scratch = KEY_SCRATCH.take();
    let result = f(&mut scratch);
    scratch.values.clear();
    scratch.rows.clear();
    for buf in [&mut scratch.key, &mut scratch.other_key] {
        if buf.capacity() > SCRATCH_KEEP_BYTES {
            *buf = Vec::new();
        }
    }
    KEY_SCRATCH.set(scratch);
    result
}

/// Index entries of a bulk load on their way in (see `Index::load_entry`).
pub(crate) struct LoadBuffer {
    ordered: RunBuilder,
    /// Point-map entries waiting for `flush_loaded`; `load_rows` lends it a reused buffer.
    pub(crate) point: Vec<(u64, RowRef)>,
    block_entries: usize,
}

impl LoadBuffer {
    pub(crate) fn new() -> LoadBuffer {
        LoadBuffer::for_blocks_of(0)
    }

    /// A buffer for blocks of about `entries` entries, sized once per block rather than grown
    /// by doubling.
    pub(crate) fn for_blocks_of(entries: usize) -> LoadBuffer {
        LoadBuffer {
            ordered: run_for_block(entries),
            point: Vec::new(),
            block_entries: entries,
        }
    }
}

/// A load block's run buffer, sized for `entries` entries of an integer key (5 or 9 bytes).
fn run_for_block(entries: usize) -> RunBuilder {
    RunBuilder::with_capacity(entries, entries * 9)
}

/// Entry keys up to this many bytes live inside the skiplist node. A lookup compares keys at
/// ~20 nodes; a boxed key would add a cache miss to each comparison.
const ENTRY_KEY_INLINE_BYTES: usize = 30;

/// An index entry's map key: encoded index key + row id, inline when short.
#[derive(Clone, Debug)]
pub(crate) enum EntryKey {
    Inline {
        len: u8,
        bytes: [u8; ENTRY_KEY_INLINE_BYTES],
    },
    Boxed(Box<[u8]>),
}

impl EntryKey {
    pub(crate) fn new(key: &[u8]) -> EntryKey {
        if key.len() <= ENTRY_KEY_INLINE_BYTES {
            let mut bytes = [0; ENTRY_KEY_INLINE_BYTES];
            bytes[..key.len()].copy_from_slice(key);
            EntryKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            EntryKey::Boxed(key.into())
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            EntryKey::Inline { len, bytes } => &bytes[..*len as usize],
            EntryKey::Boxed(b) => b,
        }
    }
}

impl Borrow<[u8]> for EntryKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl std::hash::Hash for EntryKey {
    // Must agree with the borrowed byte slice's hash, which point lookups search by.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl PartialEq for EntryKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for EntryKey {}

impl PartialOrd for EntryKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for EntryKey {
    // Must agree with the order of the borrowed byte slices, which range scans search by.
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

pub(crate) fn entry_key(key: &[u8], row_id: u64) -> EntryKey {
    let mut k = [0u8; ENTRY_KEY_INLINE_BYTES + ROW_ID_BYTES];
    if key.len() <= ENTRY_KEY_INLINE_BYTES - ROW_ID_BYTES {
        k[..key.len()].copy_from_slice(key);
        k[key.len()..key.len() + ROW_ID_BYTES].copy_from_slice(&row_id.to_be_bytes());
        return EntryKey::new(&k[..key.len() + ROW_ID_BYTES]);
    }
    let mut v = Vec::with_capacity(key.len() + ROW_ID_BYTES);
    v.extend_from_slice(key);
    v.extend_from_slice(&row_id.to_be_bytes());
    EntryKey::Boxed(v.into_boxed_slice())
}

/// The index key part of an entry key.
pub(crate) fn key_part(entry_key: &[u8]) -> &[u8] {
    debug_assert!(entry_key.len() >= ROW_ID_BYTES);
    &entry_key[..entry_key.len() - ROW_ID_BYTES]
}

/// Honest estimate of one skiplist entry: node header, the key (inline, or boxed plus its
/// allocation), the row handle, a tower of ~1.33 levels, and the allocator's rounding.
pub(crate) fn entry_memory_bytes(entry_key_len: usize) -> usize {
    const NODE_BYTES: usize = 8 /* refs+height */ + std::mem::size_of::<EntryKey>() + 8 /* value */ + 16 /* tower */;
    let boxed = if entry_key_len > ENTRY_KEY_INLINE_BYTES {
        (entry_key_len + 16).next_multiple_of(16)
    } else {
        0
    };
    (NODE_BYTES + 8).next_multiple_of(16) + boxed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call nested in another's (a lookup inside a lookup's callback) gets buffers of its
    /// own, and the outer call's are intact afterwards and come back without values.
    #[test]
    fn nested_scratch_users_do_not_share_buffers() {
        with_key_scratch(|outer| {
            outer.key.extend_from_slice(b"outer");
            outer
                .values
                .push(Value::Text("kept only during the call".into()));
            with_key_scratch(|inner| {
                assert!(inner.key.is_empty() && inner.values.is_empty());
                inner.key.extend_from_slice(b"inner");
            });
            assert_eq!(outer.key, b"outer");
            assert_eq!(outer.values.len(), 1);
        });
        with_key_scratch(|again| {
            assert!(again.values.is_empty(), "values must not outlive the call");
            assert!(again.rows.is_empty());
            assert!(again.key.capacity() >= 5, "the key buffer is reused");
            again.key.resize(SCRATCH_KEEP_BYTES + 1, 0);
        });
        with_key_scratch(|after_huge| {
            assert_eq!(after_huge.key.capacity(), 0, "a huge buffer is not kept");
        });
    }
}
