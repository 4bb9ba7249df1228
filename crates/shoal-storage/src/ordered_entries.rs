//! The ordered half of an index: every entry (encoded key + row id) in key order. Most entries
//! live in a sorted run: the keys packed end to end in one byte array, the row handles in a
//! parallel array, no per-entry allocation, ~13 bytes per entry of a one-integer key against
//! ~80 for a skiplist node. Recent inserts go to a concurrent skiplist (the delta), which a
//! merge folds into a new run once it is a fair fraction of the run's size (GC steps call
//! `merge_if_due`). Bulk paths (building an index over a table, loading a checkpoint) sort
//! their entries and build the run directly, which is much faster than a skiplist insert per
//! row.
//!
//! Concurrency. Readers take a consistent view — the run, the delta being merged (if any) and
//! the current delta — as one `Arc`, and walk the three in key order. A merge first freezes the
//! current delta (new inserts go to a fresh one), builds the new run from the old run and the
//! frozen delta, then publishes it. Inserts hold the view's read lock, so none lands in a delta
//! after it froze. Removing an entry of the run only sets its tombstone bit; removals of run
//! entries and merges take `merge_lock`, so a merge never copies an entry being removed.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use crossbeam_skiplist::SkipMap;
use parking_lot::{Mutex, RwLock};

use crate::index::{entry_memory_bytes, EntryKey, ROW_ID_BYTES};
use crate::table::RowRef;

mod block_merge;
mod run_builder;
use block_merge::fold_runs;
pub(crate) use run_builder::RunBuilder;
#[cfg(test)]
use run_builder::MAX_PILES;

/// A delta smaller than this is never merged: merging copies the whole run.
const MERGE_MIN_DELTA_ENTRIES: usize = 16_384;
/// A delta is merged once it holds 1/MERGE_DELTA_FRACTION of the run's entries, so each entry
/// is copied about this many times per doubling of the index: cheap, and the delta stays small.
const MERGE_DELTA_FRACTION: usize = 8;

/// Entries in key order, with their row handles.
pub(crate) struct OrderedEntries {
    view: RwLock<Arc<View>>,
    merge_lock: Mutex<()>,
    /// Sorted runs of entries a bulk load handed over (a block each, or a run per stretch of
    /// one) that the view's run does not hold yet (see `stage`).
    staged: Mutex<Vec<SortedRun>>,
    /// Runs in `staged`, counted down only once the view holds them: while it is not 0 a
    /// reader folds first (or waits for the fold under way), so it never reads a view that
    /// misses a block a finished load staged.
    staged_runs: AtomicUsize,
}

/// An entry's (key, row id), ordered as `cmp_entries` orders them.
#[derive(PartialEq, Eq)]
struct EntryOrder<'a>(&'a [u8], u64);

impl Ord for EntryOrder<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_entries(self.0, self.1, other.0, other.1)
    }
}

impl PartialOrd for EntryOrder<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

struct View {
    run: Arc<SortedRun>,
    /// The delta a merge is folding into the next run.
    frozen: Option<Arc<SkipMap<EntryKey, RowRef>>>,
    delta: Arc<SkipMap<EntryKey, RowRef>>,
}

impl View {
    fn empty() -> View {
        View {
            run: Arc::new(SortedRun::default()),
            frozen: None,
            delta: Arc::new(SkipMap::new()),
        }
    }
}

/// Sorted, immutable entries: entry `i` is key `key(i)` (the index key, without the row id)
/// and row `rows[i]`, ordered by (key, row id). Removed entries keep their slot with a
/// tombstone bit set until the next merge drops them.
#[derive(Default)]
pub(crate) struct SortedRun {
    key_bytes: Vec<u8>,
    layout: KeyLayout,
    rows: Vec<RowRef>,
    tombstones: Vec<AtomicU64>,
    removed: AtomicUsize,
}

/// Where each key lies in `key_bytes`. Indexes on fixed-width types (integers, uuid, dates)
/// have keys of one length, which need no offsets at all.
enum KeyLayout {
    Fixed(usize),
    /// `ends[i]` is where key `i` ends.
    Varying(Vec<u64>),
}

impl Default for KeyLayout {
    fn default() -> Self {
        KeyLayout::Fixed(0)
    }
}

impl KeyLayout {
    /// Where key `i` starts in the key bytes (for `i` = the number of keys: where they end).
    fn start(&self, i: usize) -> usize {
        match self {
            KeyLayout::Fixed(w) => i * w,
            KeyLayout::Varying(ends) => match i {
                0 => 0,
                i => ends[i - 1] as usize,
            },
        }
    }

    fn key<'a>(&self, key_bytes: &'a [u8], i: usize) -> &'a [u8] {
        match self {
            KeyLayout::Fixed(w) => &key_bytes[i * w..(i + 1) * w],
            KeyLayout::Varying(ends) => &key_bytes[self.start(i)..ends[i] as usize],
        }
    }
}

impl SortedRun {
    fn len(&self) -> usize {
        self.rows.len()
    }

    fn key(&self, i: usize) -> &[u8] {
        self.layout.key(&self.key_bytes, i)
    }

    fn is_removed(&self, i: usize) -> bool {
        self.tombstones[i / 64].load(AtomicOrdering::Relaxed) & (1 << (i % 64)) != 0
    }

    fn live_len(&self) -> usize {
        self.len() - self.removed.load(AtomicOrdering::Relaxed)
    }

    /// Order of entry `i` against the entry-key bytes `probe` (key + row id, or any prefix).
    fn cmp_at(&self, i: usize, probe: &[u8]) -> Ordering {
        cmp_entry(self.key(i), || self.rows[i].row_id(), probe)
    }

    /// Index one past the last entry within the upper bound (as `in_upper` decides).
    fn upper_index(&self, upper: Bound<&[u8]>) -> usize {
        match upper {
            Bound::Unbounded => self.len(),
            Bound::Included(p) => self.partition_point(|i| self.cmp_at(i, p) != Ordering::Greater),
            Bound::Excluded(p) => self.partition_point(|i| self.cmp_at(i, p) == Ordering::Less),
        }
    }

    /// Index of the first entry at or after the bound.
    fn lower_index(&self, lower: Bound<&[u8]>) -> usize {
        match lower {
            Bound::Unbounded => 0,
            Bound::Included(p) => self.partition_point(|i| self.cmp_at(i, p) == Ordering::Less),
            Bound::Excluded(p) => self.partition_point(|i| self.cmp_at(i, p) != Ordering::Greater),
        }
    }

    fn partition_point(&self, before: impl Fn(usize) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn find(&self, entry: &[u8]) -> Option<usize> {
        let i = self.lower_index(Bound::Included(entry));
        (i < self.len() && self.cmp_at(i, entry) == Ordering::Equal).then_some(i)
    }

    /// Entry `i` as (key, row id), for comparing.
    fn entry(&self, i: usize) -> EntryOrder<'_> {
        EntryOrder(self.key(i), self.rows[i].row_id())
    }

    fn memory_bytes(&self) -> usize {
        let offsets = match &self.layout {
            KeyLayout::Fixed(_) => 0,
            KeyLayout::Varying(ends) => ends.capacity() * 8,
        };
        self.key_bytes.capacity()
            + offsets
            + self.rows.capacity() * std::mem::size_of::<RowRef>()
            + self.tombstones.capacity() * 8
    }
}

/// Order of two entries (key, row id) as their entry-key bytes `key ++ row id (big-endian)`
/// compare, which is the skiplist's order.
fn cmp_entries(key_a: &[u8], id_a: u64, key_b: &[u8], id_b: u64) -> Ordering {
    if key_a.len() == key_b.len() {
        return key_a.cmp(key_b).then(id_a.cmp(&id_b));
    }
    let (a, b) = (id_a.to_be_bytes(), id_b.to_be_bytes());
    key_a.iter().chain(&a).cmp(key_b.iter().chain(&b))
}

/// Lexicographic order of the entry key `key ++ row_id (big-endian)` against `probe`, reading
/// the row id (a pointer chase) only when the key alone does not decide.
fn cmp_entry(key: &[u8], row_id: impl Fn() -> u64, probe: &[u8]) -> Ordering {
    let n = key.len().min(probe.len());
    match key[..n].cmp(&probe[..n]) {
        Ordering::Equal => {}
        other => return other,
    }
    if probe.len() <= key.len() {
        // The probe is a prefix of the key (or the key itself, without row id).
        return if probe.len() == key.len() + ROW_ID_BYTES {
            Ordering::Equal
        } else {
            Ordering::Greater
        };
    }
    let rest = &probe[key.len()..];
    let id = row_id().to_be_bytes();
    let m = rest.len().min(ROW_ID_BYTES);
    id[..m].cmp(&rest[..m]).then(ROW_ID_BYTES.cmp(&rest.len()))
}

fn in_upper(entry: &[u8], upper: Bound<&[u8]>) -> bool {
    match upper {
        Bound::Unbounded => true,
        Bound::Included(u) => entry <= u,
        Bound::Excluded(u) => entry < u,
    }
}

fn in_lower(entry: &[u8], lower: Bound<&[u8]>) -> bool {
    match lower {
        Bound::Unbounded => true,
        Bound::Included(l) => entry >= l,
        Bound::Excluded(l) => entry > l,
    }
}

/// The order a walk visits entries in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Ascending key order.
    Forward,
    /// Descending key order.
    Backward,
}

/// One source of the merged walk: yields (entry key, row) in the walk's order.
struct Cursor<'a, 'b> {
    source: Source<'a, 'b>,
    /// The entry at the cursor, materialized (key + row id).
    current: Option<(Vec<u8>, RowRef)>,
}

type DeltaRange<'a, 'b> =
    crossbeam_skiplist::map::Range<'a, [u8], (Bound<&'b [u8]>, Bound<&'b [u8]>), EntryKey, RowRef>;

enum Source<'a, 'b> {
    /// Forward: `next` is the next entry to visit. Backward: `next` is one past it.
    Run {
        run: &'a SortedRun,
        next: usize,
    },
    Delta(DeltaRange<'a, 'b>),
}

impl Cursor<'_, '_> {
    /// Moves to the next entry within the bounds in `direction`, or to none.
    fn advance(&mut self, direction: Direction, lower: Bound<&[u8]>, upper: Bound<&[u8]>) {
        let mut buf = self.current.take().map(|(b, _)| b).unwrap_or_default();
        buf.clear();
        match &mut self.source {
            Source::Run { run, next } => {
                let at = match direction {
                    Direction::Forward => {
                        while *next < run.len() && run.is_removed(*next) {
                            *next += 1;
                        }
                        (*next < run.len()).then(|| {
                            *next += 1;
                            *next - 1
                        })
                    }
                    Direction::Backward => {
                        while *next > 0 && run.is_removed(*next - 1) {
                            *next -= 1;
                        }
                        (*next > 0).then(|| {
                            *next -= 1;
                            *next
                        })
                    }
                };
                if let Some(i) = at {
                    let row = &run.rows[i];
                    buf.extend_from_slice(run.key(i));
                    buf.extend_from_slice(&row.row_id().to_be_bytes());
                    if in_upper(&buf, upper) && in_lower(&buf, lower) {
                        self.current = Some((buf, row.clone()));
                    }
                }
            }
            Source::Delta(range) => {
                let e = match direction {
                    Direction::Forward => range.next(),
                    Direction::Backward => range.next_back(),
                };
                if let Some(e) = e {
                    buf.extend_from_slice(e.key().as_bytes());
                    self.current = Some((buf, e.value().clone()));
                }
            }
        }
    }
}

impl OrderedEntries {
    pub(crate) fn new() -> OrderedEntries {
        OrderedEntries {
            view: RwLock::new(Arc::new(View::empty())),
            merge_lock: Mutex::new(()),
            staged: Mutex::new(Vec::new()),
            staged_runs: AtomicUsize::new(0),
        }
    }

    fn view(&self) -> Arc<View> {
        self.fold_staged();
        self.view.read().clone()
    }

    /// Whether the entry (key + row id) is present.
    pub(crate) fn contains(&self, entry: &[u8]) -> bool {
        let view = self.view();
        view.delta.contains_key(entry)
            || view.frozen.as_ref().is_some_and(|f| f.contains_key(entry))
            || view
                .run
                .find(entry)
                .is_some_and(|i| !view.run.is_removed(i))
    }

    /// Adds an entry the caller checked is absent (under the key's stripe lock).
    pub(crate) fn insert(&self, entry: EntryKey, row: RowRef) {
        self.fold_staged();
        // The read lock keeps a merge from freezing this delta while the entry goes in.
        let view = self.view.read();
        view.delta.insert(entry, row);
    }

    /// Removes the entry; returns its row if it was present.
    pub(crate) fn remove(&self, entry: &[u8]) -> Option<RowRef> {
        self.fold_staged();
        {
            let view = self.view.read();
            let removed = view.delta.remove(entry).map(|e| e.value().clone());
            if removed.is_some() {
                return removed;
            }
        }
        let _merge = self.merge_lock.lock();
        let view = self.view.read().clone();
        debug_assert!(view.frozen.is_none(), "a frozen delta outside a merge");
        let removed = view.delta.remove(entry).map(|e| e.value().clone());
        if removed.is_some() {
            return removed;
        }
        let run = &view.run;
        let i = run.find(entry)?;
        let bit = 1u64 << (i % 64);
        let before = run.tombstones[i / 64].fetch_or(bit, AtomicOrdering::Relaxed);
        if before & bit != 0 {
            return None;
        }
        run.removed.fetch_add(1, AtomicOrdering::Relaxed);
        Some(run.rows[i].clone())
    }

    /// Removes every entry.
    pub(crate) fn clear(&self) {
        let _merge = self.merge_lock.lock();
        let dropped = std::mem::take(&mut *self.staged.lock()).len();
        *self.view.write() = Arc::new(View::empty());
        self.staged_runs.fetch_sub(dropped, AtomicOrdering::Release);
    }

    /// Calls `f` with each entry (key + row id) within the bounds, in order, until it returns
    /// false. Entries added or removed meanwhile may or may not be visited.
    pub(crate) fn for_each(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        f: impl FnMut(&[u8], &RowRef) -> bool,
    ) {
        self.walk(Direction::Forward, lower, upper, f)
    }

    /// `for_each` in either direction.
    pub(crate) fn walk(
        &self,
        direction: Direction,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        mut f: impl FnMut(&[u8], &RowRef) -> bool,
    ) {
        let view = self.view();
        let mut cursors: Vec<Cursor<'_, '_>> = Vec::with_capacity(3);
        cursors.push(Cursor {
            source: Source::Delta(view.delta.range((lower, upper))),
            current: None,
        });
        if let Some(frozen) = &view.frozen {
            cursors.push(Cursor {
                source: Source::Delta(frozen.range((lower, upper))),
                current: None,
            });
        }
        cursors.push(Cursor {
            source: Source::Run {
                run: &view.run,
                next: match direction {
                    Direction::Forward => view.run.lower_index(lower),
                    Direction::Backward => view.run.upper_index(upper),
                },
            },
            current: None,
        });
        for c in &mut cursors {
            c.advance(direction, lower, upper);
        }
        // The entry each step visits: the smallest of the cursors' going forward, the
        // largest going backward.
        let comes_first = |a: &[u8], b: &[u8]| match direction {
            Direction::Forward => a < b,
            Direction::Backward => a > b,
        };
        loop {
            let mut first: Option<usize> = None;
            for (i, c) in cursors.iter().enumerate() {
                if let Some((key, _)) = &c.current {
                    if first.is_none_or(|s| {
                        comes_first(key, &cursors[s].current.as_ref().expect("current").0)
                    }) {
                        first = Some(i);
                    }
                }
            }
            let Some(s) = first else { return };
            let (key, row) = cursors[s].current.as_ref().expect("current");
            if !f(key, row) {
                return;
            }
            // The sources are disjoint; should an entry ever sit in two, visit it once.
            let key = key.clone();
            for c in &mut cursors {
                if c.current.as_ref().is_some_and(|(k, _)| *k == key) {
                    c.advance(direction, lower, upper);
                }
            }
        }
    }

    /// How many entries lie within the bounds, counted up to `enough` (the count stops
    /// there): the sorted run's by two binary searches (removed ones counted until the next
    /// merge), the deltas' by walking their range. For choosing between an index and a scan.
    pub(crate) fn count_range_up_to(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        enough: usize,
    ) -> usize {
        let view = self.view();
        let run = &view.run;
        let mut within = run
            .upper_index(upper)
            .saturating_sub(run.lower_index(lower));
        for delta in std::iter::once(&view.delta).chain(view.frozen.as_ref()) {
            for _ in delta.range::<[u8], _>((lower, upper)) {
                if within >= enough {
                    return within;
                }
                within += 1;
            }
        }
        within
    }

    /// Entries, removed ones of the run counted until the next merge (walks nothing).
    pub(crate) fn len_estimate(&self) -> usize {
        let view = self.view();
        view.run.len() + view.delta.len() + view.frozen.as_ref().map_or(0, |f| f.len())
    }

    /// Entries, removed ones not counted (walks nothing: a few atomics).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        let view = self.view();
        view.run.live_len() + view.delta.len() + view.frozen.as_ref().map_or(0, |f| f.len())
    }

    /// Estimate of the memory the entries take: the run's arrays plus skiplist nodes.
    pub(crate) fn memory_bytes(&self) -> usize {
        let view = self.view();
        let delta_bytes = |d: &SkipMap<EntryKey, RowRef>| {
            d.iter()
                .map(|e| entry_memory_bytes(e.key().as_bytes().len()))
                .sum::<usize>()
        };
        view.run.memory_bytes()
            + delta_bytes(&view.delta)
            + view.frozen.as_deref().map_or(0, delta_bytes)
    }

    /// Hands over entries of rows known to have none yet (a bulk load). They are folded into
    /// the run by the next access to this index.
    pub(crate) fn stage(&self, entries: RunBuilder) {
        if entries.is_empty() {
            return;
        }
        // Sorted here, on the loading thread while the block is still in its cache and other
        // threads load other blocks; the fold then only has to merge.
        let runs = entries.into_sorted_runs();
        // Counted under the lock, so a fold that takes the runs also finds them counted.
        let mut staged = self.staged.lock();
        self.staged_runs
            .fetch_add(runs.len(), AtomicOrdering::Release);
        staged.extend(runs);
    }

    /// Folds staged entries into the run.
    pub(crate) fn fold_staged(&self) {
        if self.staged_runs.load(AtomicOrdering::Acquire) == 0 {
            return;
        }
        let _merge = self.merge_lock.lock();
        let staged = std::mem::take(&mut *self.staged.lock());
        if staged.is_empty() {
            return;
        }
        let blocks = staged.len();
        let current = self.view.read().clone();
        let run = fold_runs(staged, &current.run);
        {
            let mut view = self.view.write();
            *view = Arc::new(View {
                run: Arc::new(run),
                frozen: None,
                delta: view.delta.clone(),
            });
        }
        self.staged_runs.fetch_sub(blocks, AtomicOrdering::Release);
    }

    /// Folds the delta into the run if it has grown past its share (or the run has many
    /// tombstones); returns whether it did. Called by GC steps, off the write path.
    pub(crate) fn merge_if_due(&self) -> bool {
        let due = |v: &View| {
            let run_live = v.run.live_len();
            let delta = v.delta.len();
            let removed = v.run.len() - run_live;
            (delta >= MERGE_MIN_DELTA_ENTRIES && delta * MERGE_DELTA_FRACTION >= run_live)
                || (removed >= MERGE_MIN_DELTA_ENTRIES
                    && removed * MERGE_DELTA_FRACTION >= run_live)
        };
        if !due(&self.view()) {
            return false;
        }
        self.merge();
        true
    }

    /// Folds the delta into the run now.
    pub(crate) fn merge(&self) {
        let _merge = self.merge_lock.lock();
        let frozen = {
            let mut view = self.view.write();
            let frozen = view.delta.clone();
            *view = Arc::new(View {
                run: view.run.clone(),
                frozen: Some(frozen.clone()),
                delta: Arc::new(SkipMap::new()),
            });
            frozen
        };
        let current = self.view.read().clone();
        let run = merge_delta(&current.run, &frozen);
        let mut view = self.view.write();
        *view = Arc::new(View {
            run: Arc::new(run),
            frozen: None,
            delta: view.delta.clone(),
        });
    }
}

/// Merges a run (its live entries) and a frozen delta into one new run.
fn merge_delta(run: &SortedRun, delta: &SkipMap<EntryKey, RowRef>) -> SortedRun {
    let mut b = RunBuilder::with_capacity(
        run.live_len() + delta.len(),
        run.key_bytes.len() + delta.len() * 8,
    );
    let mut next = 0;
    let mut delta_entries = delta.iter().peekable();
    loop {
        while next < run.len() && run.is_removed(next) {
            next += 1;
        }
        let run_head = (next < run.len()).then(|| (run.key(next), run.rows[next].row_id()));
        let delta_first = delta_entries.peek().is_some_and(|e| {
            let (key, id) = split_entry(e.key().as_bytes());
            run_head.is_none_or(|(rk, rid)| cmp_entries(key, id, rk, rid).is_lt())
        });
        if delta_first {
            let e = delta_entries.next().expect("peeked");
            b.push(split_entry(e.key().as_bytes()).0, e.value().clone());
        } else if run_head.is_some() {
            b.push(run.key(next), run.rows[next].clone());
            next += 1;
        } else {
            break;
        }
    }
    b.finish()
}

/// (key, row id) of an entry key.
fn split_entry(entry: &[u8]) -> (&[u8], u64) {
    let (key, id) = entry.split_at(entry.len() - ROW_ID_BYTES);
    (
        key,
        u64::from_be_bytes(id.try_into().expect("8-byte row id")),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicU64;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::index::entry_key;
    use crate::table::RowChain;

    pub(super) fn row(id: u64) -> RowRef {
        RowRef::new(RowChain::new(id, 1), &[])
    }

    /// Every entry's key (without the row id) and row id, in order.
    fn keys_and_ids(entries: &OrderedEntries) -> Vec<(Vec<u8>, u64)> {
        all(entries)
            .into_iter()
            .map(|(entry, id)| (entry[..entry.len() - ROW_ID_BYTES].to_vec(), id))
            .collect()
    }

    pub(super) fn all(entries: &OrderedEntries) -> Vec<(Vec<u8>, u64)> {
        let mut out = Vec::new();
        entries.for_each(Bound::Unbounded, Bound::Unbounded, |k, r| {
            out.push((k.to_vec(), r.row_id()));
            true
        });
        out
    }

    /// Random inserts, removals, bulk loads and merges, against a BTreeMap of entry keys. Keys
    /// vary in length and some are prefixes of others, where (key, row id) order and the
    /// entry-key byte order differ.
    #[test]
    fn matches_a_model_under_random_operations() {
        let mut rng = StdRng::seed_from_u64(7);
        let entries = OrderedEntries::new();
        let mut model: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        let mut next_id = 1u64;
        for step in 0..4000 {
            match rng.random_range(0..100) {
                0..60 => {
                    let len = rng.random_range(0..4);
                    let key: Vec<u8> = (0..len).map(|_| rng.random_range(0..3u8)).collect();
                    let id = next_id;
                    next_id += 1;
                    let e = entry_key(&key, id);
                    assert!(!entries.contains(e.as_bytes()));
                    model.insert(e.as_bytes().to_vec(), id);
                    entries.insert(e, row(id));
                }
                60..80 if !model.is_empty() => {
                    let pick = rng.random_range(0..model.len());
                    let e = model.keys().nth(pick).expect("picked").clone();
                    let id = model.remove(&e).expect("present");
                    assert_eq!(entries.remove(&e).map(|r| r.row_id()), Some(id));
                    assert!(entries.remove(&e).is_none(), "removed twice");
                    assert!(!entries.contains(&e));
                }
                80..90 => {
                    let mut b = RunBuilder::with_capacity(0, 0);
                    for _ in 0..rng.random_range(0..20) {
                        let len = rng.random_range(0..4);
                        let key: Vec<u8> = (0..len).map(|_| rng.random_range(0..3u8)).collect();
                        let id = next_id;
                        next_id += 1;
                        model.insert(entry_key(&key, id).as_bytes().to_vec(), id);
                        b.push(&key, row(id));
                    }
                    entries.stage(b);
                }
                _ => entries.merge(),
            }
            if step % 97 == 0 {
                let want: Vec<(Vec<u8>, u64)> =
                    model.iter().map(|(k, &id)| (k.clone(), id)).collect();
                assert_eq!(all(&entries), want, "after step {step}");
                assert_eq!(entries.len(), model.len());
                // Backward walks over the run, the delta and bounds that fall inside keys.
                for (lo, hi) in [
                    (vec![], vec![9]),
                    (vec![1], vec![2, 1]),
                    (vec![0, 2], vec![2]),
                ] {
                    let mut got = Vec::new();
                    let (lower, upper) = (Bound::Excluded(&lo[..]), Bound::Included(&hi[..]));
                    entries.walk(Direction::Backward, lower, upper, |k, r| {
                        got.push((k.to_vec(), r.row_id()));
                        true
                    });
                    let want: Vec<(Vec<u8>, u64)> = model
                        .range::<[u8], _>((lower, upper))
                        .rev()
                        .map(|(k, &id)| (k.clone(), id))
                        .collect();
                    assert_eq!(got, want, "backward {lo:?}..={hi:?} after step {step}");
                }
            }
        }
        // Bounded walks agree with the model's ranges, prefix bounds included.
        entries.merge();
        for lo in [vec![], vec![0], vec![1], vec![1, 2], vec![2, 2, 2]] {
            for hi in [vec![1], vec![2, 0], vec![3]] {
                if lo > hi {
                    continue;
                }
                let mut got = Vec::new();
                entries.for_each(Bound::Included(&lo), Bound::Excluded(&hi), |k, _| {
                    got.push(k.to_vec());
                    true
                });
                let want: Vec<Vec<u8>> = model
                    .range::<Vec<u8>, _>((Bound::Included(&lo), Bound::Excluded(&hi)))
                    .map(|(k, _)| k.clone())
                    .collect();
                assert_eq!(got, want, "range {lo:?}..{hi:?}");
            }
        }
    }

    /// Blocks of fixed-width keys in random order, with many equal keys whose row ids come in
    /// random order too, fold into (key, row id) order: at the widths that sort packed into a
    /// u128 (up to 12 bytes, with the 12th byte in play) and past them.
    #[test]
    fn unsorted_fixed_width_blocks_sort_by_key_then_row_id() {
        let mut rng = StdRng::seed_from_u64(11);
        for width in [1usize, 5, 12, 13] {
            let entries = OrderedEntries::new();
            let mut want: Vec<(Vec<u8>, u64)> = Vec::new();
            let mut ids: Vec<u64> = (1..=3000).collect();
            for i in (1..ids.len()).rev() {
                ids.swap(i, rng.random_range(0..=i));
            }
            for block in ids.chunks(700) {
                let mut b = RunBuilder::with_capacity(0, 0);
                for &id in block {
                    let mut key = vec![0u8; width];
                    key[0] = rng.random_range(0..4u8);
                    key[width - 1] = rng.random_range(0..4u8);
                    want.push((key.clone(), id));
                    b.push(&key, row(id));
                }
                entries.stage(b);
            }
            want.sort();
            assert_eq!(keys_and_ids(&entries), want, "width {width}");
        }
    }

    /// Fixed-width keys (a one-integer index) take no offsets, and a merged run holds them in
    /// well under the ~80 bytes of a skiplist node per entry.
    #[test]
    fn fixed_width_keys_are_compact() {
        let entries = OrderedEntries::new();
        let mut b = RunBuilder::with_capacity(0, 0);
        for id in (1..=100_000u64).rev() {
            b.push(&(id as u32).to_be_bytes(), row(id));
        }
        entries.stage(b);
        assert_eq!(entries.len(), 100_000);
        let bytes = entries.memory_bytes();
        assert!(bytes < 100_000 * 14, "{bytes} bytes for 100000 entries");
        let first = all(&entries).first().cloned().expect("entries");
        assert_eq!(first.1, 1, "sorted by key");
    }

    /// A load's blocks arrive in any order from several threads: disjoint ones are put in
    /// order, overlapping ones merged, and the run comes out sorted either way.
    #[test]
    fn staged_blocks_fold_into_one_sorted_run() {
        let block = |ids: &mut dyn Iterator<Item = u64>| {
            let mut b = RunBuilder::with_capacity(0, 0);
            for id in ids {
                b.push(&(id as u32).to_be_bytes(), row(id));
            }
            b
        };
        for overlapping in [false, true] {
            let entries = OrderedEntries::new();
            if overlapping {
                entries.stage(block(&mut (0..300).step_by(2)));
                entries.stage(block(&mut (1..300).step_by(2)));
            } else {
                entries.stage(block(&mut (200..300)));
                entries.stage(block(&mut (0..100)));
                entries.stage(block(&mut (100..200)));
            }
            let ids: Vec<u64> = all(&entries).into_iter().map(|(_, id)| id).collect();
            assert_eq!(
                ids,
                (0..300).collect::<Vec<u64>>(),
                "overlapping: {overlapping}"
            );
        }
    }

    /// A block made of a few ascending sequences (a table several clients filled at once),
    /// one after the other or interleaved, is staged as a run per sequence; one of more
    /// sequences is sorted whole. Either way the blocks, which overlap each other, fold into
    /// one sorted run, for keys of one width and of several.
    #[test]
    fn blocks_of_few_ascending_sequences_are_dealt_and_fold_sorted() {
        // Client `c`'s `n`th key: the client counting down (later clients' keys come first),
        // then `n`; with `varying`, 0-2 bytes more.
        let key = |varying: bool, client: u64, n: u64| -> Vec<u8> {
            let mut k = vec![200 - client as u8];
            k.extend_from_slice(&(n as u16).to_be_bytes());
            k.resize(if varying { 3 + (n % 3) as usize } else { 4 }, 0xEE);
            k
        };
        for (varying, interleaved) in [(false, false), (false, true), (true, true)] {
            for clients in [1u64, 2, 3, MAX_PILES as u64, MAX_PILES as u64 + 1] {
                let entries = OrderedEntries::new();
                let mut want: Vec<(Vec<u8>, u64)> = Vec::new();
                // Each block takes the next 50 keys of every client, client after client or
                // each client's next key in turn.
                for block_no in 0..6u64 {
                    let ns = block_no * 50..(block_no + 1) * 50;
                    let order: Vec<(u64, u64)> = match interleaved {
                        false => (0..clients)
                            .flat_map(|c| ns.clone().map(move |n| (c, n)))
                            .collect(),
                        true => ns.flat_map(|n| (0..clients).map(move |c| (c, n))).collect(),
                    };
                    let mut b = RunBuilder::with_capacity(0, 0);
                    for (client, n) in order {
                        let (k, id) = (key(varying, client, n), client * 1_000_000 + n);
                        want.push((k.clone(), id));
                        b.push(&k, row(id));
                    }
                    let piles = b.ascending_piles(MAX_PILES).map(|(_, piles)| piles);
                    match clients as usize <= MAX_PILES {
                        true => assert_eq!(piles, Some(clients as usize)),
                        false => assert_eq!(piles, None, "{clients} clients"),
                    }
                    entries.stage(b);
                }
                want.sort();
                let got = keys_and_ids(&entries);
                assert_eq!(got, want, "varying {varying}, {clients} clients");
            }
        }
    }

    /// While one thread inserts and another merges over and over, an entry that was in before
    /// a walk began is always visited by it: a merge never hides entries.
    #[test]
    fn walks_see_every_entry_added_before_them_during_merges() {
        let entries = Arc::new(OrderedEntries::new());
        let published = Arc::new(AtomicU64::new(0));
        const N: u64 = 60_000;
        std::thread::scope(|s| {
            s.spawn(|| {
                for id in 1..=N {
                    entries.insert(entry_key(&id.to_be_bytes(), id), row(id));
                    published.store(id, AtomicOrdering::Release);
                }
            });
            s.spawn(|| {
                while published.load(AtomicOrdering::Acquire) < N {
                    entries.merge();
                }
            });
            s.spawn(|| loop {
                let before = published.load(AtomicOrdering::Acquire);
                let mut seen = 0u64;
                entries.for_each(Bound::Unbounded, Bound::Unbounded, |_, r| {
                    if r.row_id() <= before {
                        seen += 1;
                    }
                    true
                });
                assert_eq!(seen, before, "a walk missed entries added before it");
                if before == N {
                    break;
                }
            });
        });
        assert_eq!(entries.len(), N as usize);
    }
}
