//! Indexes of a row table: concurrent ordered maps from memcomparable key bytes to row handles
//! (`ordered_entries`: a sorted run plus a skiplist of recent entries), and for unique indexes a
//! hash map for point lookups. Every entry's map key is the encoded index key followed by the row's hidden id (big-endian),
//! so non-unique keys get distinct entries, unique keys can briefly have several (NULL keys, old
//! versions, uncommitted inserts) and all entries of one key value form one byte-prefix range.
//! Entries of old versions stay until GC: readers recheck the visible version's key. A small
//! array of striped mutexes serializes "check for a duplicate, then add the entry" per key (and
//! GC's "check the entry is stale, then remove it"), which is what makes unique checks atomic.

use std::borrow::Borrow;
use std::cmp::Ordering;

use std::hash::BuildHasher;
use std::ops::Bound;
use std::sync::Arc;

use hashbrown::HashTable;
use parking_lot::{Mutex, MutexGuard, RwLock};

use crate::ordered_entries::{OrderedEntries, RunBuilder};
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
}

/// Rows per full key, sharded so lookups on different keys rarely touch the same lock. An entry
/// is the key's 64-bit hash and the row handle, not the key itself: 16 bytes instead of ~50, the
/// difference between this map costing ~100 and ~20 bytes per row. The price is that a lookup
/// returns candidates, which the caller must recheck against the row's key (it does anyway:
/// entries of old versions stay until GC), and that two keys with the same hash share a probe.
struct PointMap {
    hasher: foldhash::fast::RandomState,
    shards: Box<[RwLock<PointShard>]>,
}

/// foldhash rather than std's SipHash: hashing the key is a good part of a point lookup, and
/// the per-map random seed still keeps crafted keys from colliding on purpose.
type PointShard = HashTable<PointEntry>;

struct PointEntry {
    key_hash: u64,
    row: RowRef,
}

impl PointMap {
    fn new() -> PointMap {
        PointMap {
            hasher: foldhash::fast::RandomState::default(),
            shards: (0..POINT_SHARDS)
                .map(|_| RwLock::new(PointShard::new()))
                .collect(),
        }
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The table picks buckets with the hash's low bits and tags them with its top 7, so the
    /// shard comes from bits in between, which neither uses.
    fn shard(&self, key_hash: u64) -> &RwLock<PointShard> {
        &self.shards[self.shard_no(key_hash)]
    }

    fn shard_no(&self, key_hash: u64) -> usize {
        (key_hash >> 40) as usize % self.shards.len()
    }

    fn add(&self, key: &[u8], row: &RowRef) {
        let key_hash = self.hash(key);
        let mut shard = self.shard(key_hash).write();
        let present = shard
            .iter_hash(key_hash)
            .any(|e| e.key_hash == key_hash && RowRef::ptr_eq(&e.row, row));
        if !present {
            let entry = PointEntry {
                key_hash,
                row: row.clone(),
            };
            shard.insert_unique(key_hash, entry, |e| e.key_hash);
        }
    }

    fn remove(&self, key: &[u8], row: &RowRef) {
        let key_hash = self.hash(key);
        let mut shard = self.shard(key_hash).write();
        if let Ok(entry) = shard.find_entry(key_hash, |e| {
            e.key_hash == key_hash && RowRef::ptr_eq(&e.row, row)
        }) {
            entry.remove();
        }
        // Give memory back once GC has emptied most of a shard; shrinking only at a quarter
        // keeps a shard that shrinks and regrows from rehashing on every few removals.
        let (len, capacity) = (shard.len(), shard.capacity());
        if len < capacity / 4 {
            shard.shrink_to(len * 2, |e| e.key_hash);
        }
    }

    /// Adds entries known to be absent (a checkpoint's rows), grouped by shard so each shard's
    /// lock is taken once per block instead of once per row, and with no probe for a present
    /// entry. `entries` holds (key hash, row) and is left empty. The handles move into the map
    /// rather than being cloned and dropped: by now the rows are out of cache, and touching each
    /// one's reference count twice cost a quarter of this function.
    fn load(&self, entries: &mut Vec<(u64, RowRef)>) {
        entries.sort_unstable_by_key(|&(key_hash, _)| self.shard_no(key_hash));
        let mut rest = entries.drain(..).peekable();
        while let Some((key_hash, row)) = rest.next() {
            let shard_no = self.shard_no(key_hash);
            let mut shard = self.shards[shard_no].write();
            shard.insert_unique(key_hash, PointEntry { key_hash, row }, |e| e.key_hash);
            while let Some((key_hash, row)) =
                rest.next_if(|&(key_hash, _)| self.shard_no(key_hash) == shard_no)
            {
                shard.insert_unique(key_hash, PointEntry { key_hash, row }, |e| e.key_hash);
            }
        }
    }

    /// Makes room for `entries` more entries spread evenly over the shards, so that loading a
    /// checkpoint does not rehash every shard a dozen times on the way up.
    fn reserve(&self, entries: usize) {
        let per_shard = entries.div_ceil(self.shards.len());
        for shard in self.shards.iter() {
            shard.write().reserve(per_shard, |e| e.key_hash);
        }
    }

    /// Rows that may have an entry under `key`: every row that has one, and rarely others.
    fn candidate_rows(&self, key: &[u8], out: &mut Vec<RowRef>) {
        let key_hash = self.hash(key);
        let shard = self.shard(key_hash).read();
        out.extend(
            shard
                .iter_hash(key_hash)
                .filter(|e| e.key_hash == key_hash)
                .map(|e| e.row.clone()),
        );
    }

    fn clear(&self) {
        for shard in self.shards.iter() {
            *shard.write() = PointShard::new();
        }
    }

    fn allocation_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.read().allocation_size()).sum()
    }
}

const POINT_SHARDS: usize = 64;

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
    /// sorts a whole block into the ordered entries and adds it to the point map shard by shard.
    pub(crate) fn load_entry(&self, key: &[u8], row: &RowRef, pending: &mut LoadBuffer) {
        pending.ordered.push(key, row.clone());
        if let Some(p) = &self.point {
            pending.point.push((p.hash(key), row.clone()));
        }
    }

    /// Adds the entries `load_entry` left in `pending`, which it leaves empty.
    pub(crate) fn flush_loaded(&self, pending: &mut LoadBuffer) {
        let ordered = std::mem::replace(&mut pending.ordered, RunBuilder::with_capacity(0, 0));
        self.entries.stage(ordered);
        if let Some(p) = &self.point {
            p.load(&mut pending.point);
        }
        debug_assert!(
            pending.point.is_empty(),
            "point entries of an index without a point map"
        );
    }

    /// Makes room for `rows` more entries before a checkpoint load.
    pub(crate) fn reserve(&self, rows: usize) {
        if let Some(p) = &self.point {
            p.reserve(rows);
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
        let mut values = Vec::with_capacity(self.def.columns.len());
        let mut buf = Vec::with_capacity(key.len());
        self.row_key(types, row, &mut values, &mut buf);
        buf == key && self.covers(types, row)
    }

    /// Whether the encoded row belongs in this index: always, unless the index is partial.
    pub(crate) fn covers(&self, types: &[DataType], row: &[u8]) -> bool {
        match &self.def.predicate {
            None => true,
            Some(p) => (p.0)(&row_codec::decode_all(types, row)),
        }
    }
}

/// Index entries of a bulk load on their way in (see `Index::load_entry`).
pub(crate) struct LoadBuffer {
    ordered: RunBuilder,
    point: Vec<(u64, RowRef)>,
}

impl LoadBuffer {
    pub(crate) fn new() -> LoadBuffer {
        LoadBuffer {
            ordered: RunBuilder::with_capacity(0, 0),
            point: Vec::new(),
        }
    }
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
