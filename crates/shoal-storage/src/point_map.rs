//! A unique index's hash map for point lookups: rows by the 64-bit hash of their full key.
//!
//! An entry is the key's hash and the row handle, not the key itself: 16 bytes instead of ~50,
//! the difference between this map costing ~100 and ~20 bytes per row. The price is that a
//! lookup returns candidates, which the caller must recheck against the row's key (it does
//! anyway: entries of old versions stay until GC), and that two keys with the same hash share
//! a probe.
//!
//! Bulk loads (a checkpoint, an index build) do not insert as they go. Each row's bucket is a
//! random place in a table of hundreds of megabytes, so an insert per row costs a cache miss
//! or two: a fifth of a checkpoint load's time. Loads stage their blocks of entries instead
//! (`load`), each block grouped by shard group while it is still in cache, and `fold_staged`
//! later hands each group its stretch of every block, groups those by shard and by where their
//! bucket is, and inserts them in that order, which walks each table from one end to the other.
//!
//! The map is `POINT_GROUPS` groups of `subshards` shards each (1 to `SUBSHARDS_MAX`). A hash table's bucket count is
//! a power of two and it holds at most 7/8 of it, so with a fixed number of shards a table's
//! fill after a load is luck: 33.8M rows in 64 shards fill 50% of their buckets, 1.1 GB where
//! 0.6 GB would do, and on a VM where fresh memory is the slow part of a restart that is a
//! tenth of it. A fold into an empty map first picks how many shards a group gets, for the
//! fullest tables the staged entries allow (`subshards_for`).

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};

use hashbrown::HashTable;
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::table::RowRef;

/// Groups of shards; staged blocks are grouped by these, whatever the shards per group.
const POINT_GROUPS: usize = 64;
/// Shards per group at most: enough for tables at least 60% full for any entry count from
/// 200K up (16 would add two points to that), while an empty map's locks and table headers,
/// allocated for every shard up front, stay at 20 KiB per unique index.
const SUBSHARDS_MAX: usize = 8;
/// The shard field: 24 bits of the hash, above the bits a table's bucket index uses and below
/// the top 7 it tags buckets with (`PointMap::shard_no`).
const SHARD_FIELD_SHIFT: u32 = 32;
const SHARD_FIELD_BITS: u32 = 24;
const GROUP_SHIFT: u32 = SHARD_FIELD_BITS - POINT_GROUPS.trailing_zeros();

pub(crate) struct PointMap {
    /// foldhash rather than std's SipHash: hashing the key is a good part of a point lookup,
    /// and the per-map random seed still keeps crafted keys from colliding on purpose.
    hasher: foldhash::fast::RandomState,
    /// Sharded so lookups on different keys rarely touch the same lock. The first
    /// `POINT_GROUPS * subshards` are in use; the rest are empty.
    shards: Box<[RwLock<PointShard>]>,
    /// Shards per group (1 to `SUBSHARDS_MAX`). Changed only by a fold into an empty map, under
    /// the write locks of every shard in use; a reader or writer that took a shard's lock
    /// checks it again and starts over if it changed (`read_shard`, `write_shard`).
    subshards: AtomicUsize,
    /// Bulk loads' blocks of entries, not yet in `shards`.
    staged: Mutex<Vec<StagedBlock>>,
    /// How many entries `staged` holds, counted down only once they are in their shard: while
    /// it is 0 no entry waits, so lookups skip the fold with one atomic load.
    staged_entries: AtomicUsize,
    /// One fold at a time: a lookup that finds entries staged waits for the fold under way.
    fold_lock: Mutex<()>,
}

type PointShard = HashTable<PointEntry>;

/// A staged entry: the key's hash and the row.
type Entry = (u64, RowRef);

/// A bulk load's block of entries, grouped by shard group: group `g`'s entries are
/// `entries[starts[g]..starts[g + 1]]`. The fold takes them out, leaving `None`.
struct StagedBlock {
    entries: Vec<Option<Entry>>,
    starts: Vec<usize>,
}

struct PointEntry {
    key_hash: u64,
    row: RowRef,
}

/// Buckets of a hashbrown table that was asked for room for `entries` (hashbrown's own rule:
/// a table of `buckets` holds 7/8 of them, small tables aside).
fn buckets_for(entries: usize) -> usize {
    if entries < 8 {
        if entries < 4 {
            4
        } else {
            8
        }
    } else {
        (entries * 8).div_ceil(7).next_power_of_two()
    }
}

/// Buckets in all of the tables `entries` take with `subshards` shards per group, each table
/// asked for its share plus a margin for the spread of a random split.
fn planned_buckets(entries: usize, subshards: usize) -> usize {
    let shards = POINT_GROUPS * subshards;
    let mean = entries.div_ceil(shards);
    // A shard's count is binomial; four standard deviations over the mean covers every shard
    // of every map but about one in ten thousand, which then grows its table.
    let margin = 4 * (mean as f64).sqrt() as usize + 16;
    shards * buckets_for(mean + margin)
}

/// Shards per group for a map about to hold `entries`: the count with the fewest planned
/// buckets (the fewest shards among equals).
fn subshards_for(entries: usize) -> usize {
    (1..=SUBSHARDS_MAX)
        .min_by_key(|&m| (planned_buckets(entries, m), m))
        .expect("at least one choice")
}

impl PointMap {
    pub(crate) fn new() -> PointMap {
        PointMap {
            hasher: foldhash::fast::RandomState::default(),
            shards: (0..POINT_GROUPS * SUBSHARDS_MAX)
                .map(|_| RwLock::new(PointShard::new()))
                .collect(),
            subshards: AtomicUsize::new(1),
            staged: Mutex::new(Vec::new()),
            staged_entries: AtomicUsize::new(0),
            fold_lock: Mutex::new(()),
        }
    }

    pub(crate) fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The table picks buckets with the hash's low bits and tags them with its top 7, so the
    /// shard comes from bits in between, which neither uses. A group is the field's top bits,
    /// and its `subshards` shards split the group's range of the field evenly, so a shard
    /// always lies in its group: shard / subshards == group.
    fn shard_no(key_hash: u64, subshards: usize) -> usize {
        let field = (key_hash >> SHARD_FIELD_SHIFT) as usize & ((1 << SHARD_FIELD_BITS) - 1);
        (field * subshards) >> GROUP_SHIFT
    }

    fn group_no(key_hash: u64) -> usize {
        PointMap::shard_no(key_hash, 1)
    }

    /// The shard of `key_hash`, locked with `lock` under the layout it was found with.
    fn locked_shard<'a, G>(
        &'a self,
        key_hash: u64,
        lock: impl Fn(&'a RwLock<PointShard>) -> G,
    ) -> G {
        loop {
            let subshards = self.subshards.load(Ordering::Acquire);
            let shard = lock(&self.shards[PointMap::shard_no(key_hash, subshards)]);
            if self.subshards.load(Ordering::Acquire) == subshards {
                return shard;
            }
        }
    }

    fn read_shard(&self, key_hash: u64) -> RwLockReadGuard<'_, PointShard> {
        self.locked_shard(key_hash, RwLock::read)
    }

    fn write_shard(&self, key_hash: u64) -> RwLockWriteGuard<'_, PointShard> {
        self.locked_shard(key_hash, RwLock::write)
    }

    pub(crate) fn add(&self, key: &[u8], row: &RowRef) {
        self.fold_staged(1);
        let key_hash = self.hash(key);
        let mut shard = self.write_shard(key_hash);
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

    pub(crate) fn remove(&self, key: &[u8], row: &RowRef) {
        self.fold_staged(1);
        let key_hash = self.hash(key);
        let mut shard = self.write_shard(key_hash);
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

    /// Rows that may have an entry under `key`: every row that has one, and rarely others.
    pub(crate) fn candidate_rows(&self, key: &[u8], out: &mut Vec<RowRef>) {
        self.fold_staged(1);
        let key_hash = self.hash(key);
        let shard = self.read_shard(key_hash);
        out.extend(
            shard
                .iter_hash(key_hash)
                .filter(|e| e.key_hash == key_hash)
                .map(|e| e.row.clone()),
        );
    }

    /// Stages entries known to be absent from the map (a bulk load's block), (key hash, row)
    /// each, and leaves `entries` empty (its capacity kept for the next block). The handles
    /// move: by now the rows are out of cache, and touching each one's reference count twice
    /// cost a quarter of a load's inserts. Safe to call from several threads at once.
    pub(crate) fn load(&self, entries: &mut Vec<Entry>) {
        let count = entries.len();
        if count > 0 {
            // Grouped here, on the loading thread and while the block is in cache, rather than
            // all blocks at once at the fold (where that pass took a third of the fold).
            let mut block = StagedBlock {
                entries: Vec::new(),
                starts: Vec::new(),
            };
            group_entries(
                vec![entries],
                POINT_GROUPS,
                PointMap::group_no,
                &mut block.entries,
                &mut block.starts,
            );
            // Counted under the lock, so a fold that takes the block also finds it counted.
            let mut staged = self.staged.lock();
            staged.push(block);
            self.staged_entries.fetch_add(count, Ordering::Release);
        }
    }

    /// Moves the staged entries into their shards, on up to `threads` threads. Lookups call it
    /// first, so they never miss a loaded entry; a load calls it with all cores when it is done.
    pub(crate) fn fold_staged(&self, threads: usize) {
        if self.staged_entries.load(Ordering::Acquire) == 0 {
            return;
        }
        let _fold = self.fold_lock.lock();
        let mut blocks = std::mem::take(&mut *self.staged.lock());
        let count: usize = blocks.iter().map(|b| b.entries.len()).sum();
        self.choose_layout(count);
        // Each group's stretch of every block...
        let mut pieces: Vec<Vec<&mut [Option<Entry>]>> = (0..POINT_GROUPS)
            .map(|_| Vec::with_capacity(blocks.len()))
            .collect();
        for block in blocks.iter_mut() {
            let mut rest = &mut block.entries[..];
            for (group_no, group_pieces) in pieces.iter_mut().enumerate() {
                let len = block.starts[group_no + 1] - block.starts[group_no];
                let (stretch, tail) = rest.split_at_mut(len);
                if !stretch.is_empty() {
                    group_pieces.push(stretch);
                }
                rest = tail;
            }
        }
        // ...goes to whichever thread is free; each thread reuses its buffers for its groups.
        share_out(
            threads.clamp(1, POINT_GROUPS),
            pieces.into_iter().enumerate(),
            |buffers: &mut FillBuffers, (group_no, group_pieces)| {
                self.fill_group(group_no, group_pieces, buffers)
            },
        );
    }

    /// Before a fold of `count` entries: if the map is empty, gives each group the shards
    /// `subshards_for(count)` picks. Called under `fold_lock`.
    fn choose_layout(&self, count: usize) {
        if count == 0 {
            return;
        }
        let subshards = subshards_for(count);
        let current = self.subshards.load(Ordering::Acquire);
        if subshards == current {
            return;
        }
        // Every shard in use, write-locked in order (a thread holds at most one shard lock
        // otherwise): no add or lookup is under way, and any waiting one sees the new layout
        // once it has its lock. The first shard that holds entries ends it.
        let mut in_use = Vec::with_capacity(POINT_GROUPS * current);
        for shard in &self.shards[..POINT_GROUPS * current] {
            let shard = shard.write();
            if !shard.is_empty() {
                return;
            }
            in_use.push(shard);
        }
        self.subshards.store(subshards, Ordering::Release);
    }

    /// Inserts one group's staged entries (a piece of each block) into its shards, each shard
    /// in bucket order.
    fn fill_group(
        &self,
        group_no: usize,
        pieces: Vec<&mut [Option<Entry>]>,
        buffers: &mut FillBuffers,
    ) {
        let count: usize = pieces.iter().map(|p| p.len()).sum();
        if count == 0 {
            return;
        }
        let subshards = self.subshards.load(Ordering::Acquire);
        let first_shard = group_no * subshards;
        // The group's shards, locked in order; the layout cannot change during a fold.
        let mut shards: Vec<_> = self.shards[first_shard..first_shard + subshards]
            .iter()
            .map(|s| s.write())
            .collect();
        let FillBuffers {
            ordered,
            starts,
            shard_counts,
        } = buffers;
        shard_counts.clear();
        shard_counts.resize(subshards, 0);
        for key_hash in pieces.iter().flat_map(|p| p.key_hashes()) {
            shard_counts[PointMap::shard_no(key_hash, subshards) - first_shard] += 1;
        }
        // hashbrown starts a key's probe at bucket `hash & (buckets - 1)`, and a table of
        // `capacity` has capacity / 7 * 8 buckets, a power of two. Grouping each shard's
        // entries by the 1/256th of its table their bucket is in makes the inserts walk the
        // table front to back, each group within a few kilobytes.
        let bucket_shifts: Vec<(u64, u32)> = shards
            .iter_mut()
            .zip(shard_counts.iter())
            .map(|(shard, &n)| {
                shard.reserve(n, |e| e.key_hash);
                let buckets = (shard.capacity() / 7 * 8).next_power_of_two() as u64;
                (buckets, buckets.trailing_zeros().saturating_sub(8))
            })
            .collect();
        let sort_group = |h: u64| {
            let shard = PointMap::shard_no(h, subshards) - first_shard;
            let (buckets, shift) = bucket_shifts[shard];
            shard * 256 + ((h & (buckets - 1)) >> shift) as usize
        };
        group_entries(pieces, subshards * 256, sort_group, ordered, starts);
        for (key_hash, row) in ordered.drain(..).flatten() {
            let shard = &mut shards[PointMap::shard_no(key_hash, subshards) - first_shard];
            shard.insert_unique(key_hash, PointEntry { key_hash, row }, |e| e.key_hash);
        }
        self.staged_entries.fetch_sub(count, Ordering::Release);
    }

    pub(crate) fn clear(&self) {
        let _fold = self.fold_lock.lock();
        let dropped: usize = std::mem::take(&mut *self.staged.lock())
            .iter()
            .map(|b| b.entries.len())
            .sum();
        self.staged_entries.fetch_sub(dropped, Ordering::Release);
        for shard in self.shards.iter() {
            *shard.write() = PointShard::new();
        }
    }

    pub(crate) fn allocation_bytes(&self) -> usize {
        self.fold_staged(1);
        self.shards.iter().map(|s| s.read().allocation_size()).sum()
    }
}

/// A fold thread's buffers, reused from one group to the next.
#[derive(Default)]
struct FillBuffers {
    ordered: Vec<Option<Entry>>,
    starts: Vec<usize>,
    shard_counts: Vec<usize>,
}

/// Where `group_entries` takes entries from: a block being staged (which it empties), or a
/// group's stretch of a staged block (whose slots it empties).
trait EntrySource {
    fn key_hashes(&self) -> impl Iterator<Item = u64> + '_;
    fn take_entries(self) -> impl Iterator<Item = Entry>;
}

impl EntrySource for &mut Vec<Entry> {
    fn key_hashes(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter().map(|e| e.0)
    }
    fn take_entries(self) -> impl Iterator<Item = Entry> {
        self.drain(..)
    }
}

impl EntrySource for &mut [Option<Entry>] {
    fn key_hashes(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter()
            .map(|e| e.as_ref().expect("each entry grouped once").0)
    }
    fn take_entries(self) -> impl Iterator<Item = Entry> {
        self.iter_mut()
            .map(|e| e.take().expect("each entry grouped once"))
    }
}

/// Calls `work` with every item of `items` on up to `threads` threads, each taking the next
/// item when it is done with one, with scratch space of its own.
fn share_out<T: Send, S: Default>(
    threads: usize,
    items: impl Iterator<Item = T> + Send,
    work: impl Fn(&mut S, T) + Sync,
) {
    let queue = Mutex::new(items);
    let worker = || {
        let mut scratch = S::default();
        loop {
            // Not `while let`: the queue's guard would live through the loop's body, and one
            // thread at a time would work (the point map's fill once did:
            // bench/coldstart/README.md, "The primary key's hash maps").
            let Some(item) = queue.lock().next() else {
                break;
            };
            work(&mut scratch, item);
        }
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(worker);
        }
        worker();
    });
}

/// A counting sort of `sources`' entries by `group(key hash)` (below `groups`) into `out`, and
/// where each group starts into `starts` (with the end as a last element); both are cleared
/// first. Two passes over the hashes and one move per entry, where a sort would compare each
/// entry ~log n times.
fn group_entries<S: EntrySource>(
    sources: Vec<S>,
    groups: usize,
    group: impl Fn(u64) -> usize,
    out: &mut Vec<Option<Entry>>,
    starts: &mut Vec<usize>,
) {
    starts.clear();
    starts.resize(groups + 1, 0);
    for key_hash in sources.iter().flat_map(|s| s.key_hashes()) {
        starts[group(key_hash) + 1] += 1;
    }
    for g in 1..=groups {
        starts[g] += starts[g - 1];
    }
    let mut next = starts.clone();
    out.clear();
    out.resize_with(starts[groups], || None);
    for entry in sources.into_iter().flat_map(S::take_entries) {
        let g = group(entry.0);
        out[next[g]] = Some(entry);
        next[g] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row_chain::RowChain;

    fn row(id: u64) -> RowRef {
        RowRef::new(RowChain::new(id, 1), &id.to_be_bytes())
    }

    fn lookup(map: &PointMap, id: u64) -> Vec<u64> {
        let mut out = Vec::new();
        map.candidate_rows(&id.to_be_bytes(), &mut out);
        out.iter().map(|r| r.row_id()).collect()
    }

    /// Loads from several threads, then lookups with and without an explicit fold: every
    /// staged entry is found once, and adds and removes after a load see the loaded entries.
    #[test]
    fn staged_entries_are_found_before_and_after_the_fold() {
        for fold_threads in [0, 1, 3] {
            let map = PointMap::new();
            std::thread::scope(|s| {
                for part in 0..4u64 {
                    let map = &map;
                    s.spawn(move || {
                        for block in 0..5u64 {
                            let base = part * 10_000 + block * 2_000;
                            let mut entries: Vec<(u64, RowRef)> = (base..base + 2_000)
                                .map(|id| (map.hash(&id.to_be_bytes()), row(id)))
                                .collect();
                            map.load(&mut entries);
                            assert!(entries.is_empty());
                        }
                    });
                }
            });
            assert_eq!(map.staged_entries.load(Ordering::Relaxed), 40_000);
            if fold_threads > 0 {
                map.fold_staged(fold_threads);
                assert_eq!(map.staged_entries.load(Ordering::Relaxed), 0);
            }
            for id in (0..40_000).step_by(97) {
                assert_eq!(lookup(&map, id), vec![id], "fold on {fold_threads} threads");
            }
            assert!(lookup(&map, 40_000).is_empty());
            let total = entry_count(&map);
            assert_eq!(total, 40_000);
            let extra = row(50_000);
            map.add(&50_000u64.to_be_bytes(), &extra);
            assert_eq!(lookup(&map, 50_000), vec![50_000]);
            let mut found = Vec::new();
            map.candidate_rows(&7u64.to_be_bytes(), &mut found);
            map.remove(&7u64.to_be_bytes(), &found[0]);
            assert!(lookup(&map, 7).is_empty());
        }
    }

    fn staged(map: &PointMap, ids: std::ops::Range<u64>) {
        let mut entries: Vec<(u64, RowRef)> = ids
            .map(|id| (map.hash(&id.to_be_bytes()), row(id)))
            .collect();
        map.load(&mut entries);
    }

    fn entry_count(map: &PointMap) -> usize {
        map.shards.iter().map(|s| s.read().len()).sum()
    }

    /// Buckets of every shard's table (a table of `capacity` has capacity / 7 * 8).
    fn buckets(map: &PointMap) -> usize {
        map.shards
            .iter()
            .map(|s| (s.read().capacity() / 7 * 8).next_power_of_two())
            .filter(|&b| b > 1)
            .sum()
    }

    /// For any entry count from 200K up, the layout chosen fills at least 60% of the buckets
    /// (one shard per group fills as little as 43.75%).
    #[test]
    fn layouts_fill_most_buckets() {
        let mut count = 200_000;
        while count < 60_000_000 {
            let subshards = subshards_for(count);
            assert!((1..=SUBSHARDS_MAX).contains(&subshards));
            let fill = count as f64 / planned_buckets(count, subshards) as f64;
            assert!(
                fill >= 0.6,
                "{count} entries: {subshards} shards per group fill {fill}"
            );
            count += count / 37;
        }
    }

    /// Two threads work on two items at once: the first waits (up to 10 s) until the second is
    /// inside `work` too. It fails if the queue's lock is held while an item is worked on.
    #[test]
    fn shared_out_items_are_worked_on_at_once() {
        // (threads inside `work` now, most at once)
        let inside = Mutex::new((0usize, 0usize));
        let arrived = parking_lot::Condvar::new();
        share_out(2, 0..2, |_: &mut (), _item: i32| {
            let mut now = inside.lock();
            now.0 += 1;
            now.1 = now.1.max(now.0);
            arrived.notify_all();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while now.1 < 2 && !arrived.wait_until(&mut now, deadline).timed_out() {}
            now.0 -= 1;
        });
        assert_eq!(inside.lock().1, 2, "both items in `work` at once");
    }

    /// A load into an empty map picks its layout from the staged count; the tables then hold
    /// the entries at the fill the choice predicted, every entry is found, and a later load
    /// into the (now non-empty) map keeps the layout.
    #[test]
    fn a_fold_into_an_empty_map_sizes_its_shards() {
        let map = PointMap::new();
        // 64 shards would hold these at 48% of 32,768 buckets each.
        staged(&map, 0..1_000_000);
        map.fold_staged(2);
        let subshards = map.subshards.load(Ordering::Relaxed);
        assert_eq!(subshards, subshards_for(1_000_000));
        assert!(subshards > 1);
        let fill = 1_000_000.0 / buckets(&map) as f64;
        assert!(fill > 0.7, "fill {fill}");
        for shard_no in POINT_GROUPS * subshards..map.shards.len() {
            assert!(
                map.shards[shard_no].read().is_empty(),
                "shard {shard_no} unused"
            );
        }
        staged(&map, 1_000_000..1_100_000);
        map.fold_staged(1);
        assert_eq!(map.subshards.load(Ordering::Relaxed), subshards);
        for id in (0..1_100_000).step_by(1_009) {
            assert_eq!(lookup(&map, id), vec![id]);
        }
        let total = entry_count(&map);
        assert_eq!(total, 1_100_000);
    }

    /// Adds and a load into an empty map at once, started at different moments: whichever
    /// comes first (an add, and the map keeps its layout; or the fold, and the adds wait for it),
    /// every added and every loaded key is found afterwards, once. The narrow case of an add
    /// already past its fold check when the layout changes is the next test's.
    #[test]
    fn adds_during_a_layout_change_are_found() {
        for attempt in 0..20u64 {
            let map = PointMap::new();
            let added: Vec<RowRef> = (0..200u64).map(|i| row(1_000_000 + i)).collect();
            std::thread::scope(|s| {
                s.spawn(|| {
                    for r in &added {
                        map.add(&r.row_id().to_be_bytes(), r);
                    }
                });
                s.spawn(|| {
                    // The load starts while the adds run, earlier or later by attempt; an add
                    // that finds entries staged folds them itself, layout choice and all.
                    for _ in 0..attempt {
                        std::thread::yield_now();
                    }
                    staged(&map, 0..300_000);
                    map.fold_staged(2);
                });
            });
            for r in &added {
                assert_eq!(
                    lookup(&map, r.row_id()),
                    vec![r.row_id()],
                    "attempt {attempt}"
                );
            }
            for id in (0..300_000).step_by(997) {
                assert_eq!(lookup(&map, id), vec![id]);
            }
            let total = entry_count(&map);
            assert_eq!(total, 300_200);
        }
    }

    /// An add that picked its shard under one layout and waits for that shard's lock while a
    /// fold changes the layout puts its entry where the new layout looks for it. Without the
    /// re-check after the lock, the entry would sit in a shard no lookup reads.
    #[test]
    fn an_add_waiting_on_a_shard_sees_a_layout_change() {
        let map = PointMap::new();
        let new_layout = subshards_for(1_000_000);
        // A key whose shard differs between the two layouts.
        let id = (0u64..)
            .find(|id| {
                let h = map.hash(&id.to_be_bytes());
                PointMap::shard_no(h, 1) != PointMap::shard_no(h, new_layout)
            })
            .expect("some key moves");
        let key_hash = map.hash(&id.to_be_bytes());
        let added = row(id);
        std::thread::scope(|s| {
            // Held as `choose_layout` holds it, while the add blocks on it.
            let held = map.shards[PointMap::shard_no(key_hash, 1)].write();
            let adder = s.spawn(|| map.add(&id.to_be_bytes(), &added));
            std::thread::sleep(std::time::Duration::from_millis(100));
            map.subshards.store(new_layout, Ordering::Release);
            drop(held);
            adder.join().expect("the add finishes");
        });
        assert_eq!(lookup(&map, id), vec![id]);
        assert_eq!(
            map.shards[PointMap::shard_no(key_hash, new_layout)]
                .read()
                .len(),
            1
        );
    }

    #[test]
    fn clear_drops_staged_entries_too() {
        let map = PointMap::new();
        let mut entries: Vec<(u64, RowRef)> = (0..100u64)
            .map(|id| (map.hash(&id.to_be_bytes()), row(id)))
            .collect();
        map.load(&mut entries);
        map.clear();
        assert_eq!(map.staged_entries.load(Ordering::Relaxed), 0);
        assert!(lookup(&map, 5).is_empty());
        assert_eq!(map.allocation_bytes(), 0);
    }
}
