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
//! (`load`), each block grouped by shard while it is still in cache, and `fold_staged` later
//! hands each shard its stretch of every block, groups those by where their bucket is, and
//! inserts them in that order, which walks each table from one end to the other.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};

use hashbrown::HashTable;
use parking_lot::{Mutex, RwLock};

use crate::table::RowRef;

const POINT_SHARDS: usize = 64;

pub(crate) struct PointMap {
    /// foldhash rather than std's SipHash: hashing the key is a good part of a point lookup,
    /// and the per-map random seed still keeps crafted keys from colliding on purpose.
    hasher: foldhash::fast::RandomState,
    /// Sharded so lookups on different keys rarely touch the same lock.
    shards: Box<[RwLock<PointShard>]>,
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

/// A bulk load's block of entries, grouped by shard: shard `s`'s entries are
/// `entries[starts[s]..starts[s + 1]]`. The fold takes them out, leaving `None`.
struct StagedBlock {
    entries: Vec<Option<Entry>>,
    starts: Vec<usize>,
}

struct PointEntry {
    key_hash: u64,
    row: RowRef,
}

impl PointMap {
    pub(crate) fn new() -> PointMap {
        PointMap {
            hasher: foldhash::fast::RandomState::default(),
            shards: (0..POINT_SHARDS)
                .map(|_| RwLock::new(PointShard::new()))
                .collect(),
            staged: Mutex::new(Vec::new()),
            staged_entries: AtomicUsize::new(0),
            fold_lock: Mutex::new(()),
        }
    }

    pub(crate) fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The table picks buckets with the hash's low bits and tags them with its top 7, so the
    /// shard comes from bits in between, which neither uses.
    fn shard_no(key_hash: u64) -> usize {
        // The constant, not `shards.len()`: a modulo by a power of two known at compile time
        // is a mask, where one by a run-time length was a division per entry of every load.
        (key_hash >> 40) as usize % POINT_SHARDS
    }

    fn shard(&self, key_hash: u64) -> &RwLock<PointShard> {
        &self.shards[PointMap::shard_no(key_hash)]
    }

    pub(crate) fn add(&self, key: &[u8], row: &RowRef) {
        self.fold_staged(1);
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

    pub(crate) fn remove(&self, key: &[u8], row: &RowRef) {
        self.fold_staged(1);
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

    /// Rows that may have an entry under `key`: every row that has one, and rarely others.
    pub(crate) fn candidate_rows(&self, key: &[u8], out: &mut Vec<RowRef>) {
        self.fold_staged(1);
        let key_hash = self.hash(key);
        let shard = self.shard(key_hash).read();
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
                POINT_SHARDS,
                PointMap::shard_no,
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
        // Each shard's stretch of every block...
        let mut pieces: Vec<Vec<&mut [Option<Entry>]>> = (0..POINT_SHARDS)
            .map(|_| Vec::with_capacity(blocks.len()))
            .collect();
        for block in blocks.iter_mut() {
            let mut rest = &mut block.entries[..];
            for (shard_no, shard_pieces) in pieces.iter_mut().enumerate() {
                let len = block.starts[shard_no + 1] - block.starts[shard_no];
                let (stretch, tail) = rest.split_at_mut(len);
                if !stretch.is_empty() {
                    shard_pieces.push(stretch);
                }
                rest = tail;
            }
        }
        // ...goes to whichever thread is free; each thread reuses one buffer for its shards.
        let work = Mutex::new(pieces.into_iter().enumerate());
        let fill = || {
            let (mut ordered, mut starts) = (Vec::new(), Vec::new());
            while let Some((shard_no, shard_pieces)) = work.lock().next() {
                self.fill_shard(shard_no, shard_pieces, &mut ordered, &mut starts);
            }
        };
        let threads = threads.clamp(1, POINT_SHARDS);
        std::thread::scope(|s| {
            for _ in 1..threads {
                s.spawn(fill);
            }
            fill();
        });
    }

    /// Inserts one shard's staged entries (a piece of each block), in bucket order; `ordered`
    /// and `starts` are the calling thread's buffers for grouping them.
    fn fill_shard(
        &self,
        shard_no: usize,
        pieces: Vec<&mut [Option<Entry>]>,
        ordered: &mut Vec<Option<Entry>>,
        starts: &mut Vec<usize>,
    ) {
        let count: usize = pieces.iter().map(|p| p.len()).sum();
        if count == 0 {
            return;
        }
        let mut shard = self.shards[shard_no].write();
        shard.reserve(count, |e| e.key_hash);
        // hashbrown starts a key's probe at bucket `hash & (buckets - 1)`, and a table of
        // `capacity` has capacity / 7 * 8 buckets, a power of two. Grouping the entries by
        // the 1/256th of the table their bucket is in makes the inserts walk the table front
        // to back, each group within a few kilobytes.
        let buckets = (shard.capacity() / 7 * 8).next_power_of_two() as u64;
        let shift = buckets.trailing_zeros().saturating_sub(8);
        let bucket_group = |h: u64| ((h & (buckets - 1)) >> shift) as usize;
        group_entries(pieces, 256, bucket_group, ordered, starts);
        for (key_hash, row) in ordered.drain(..).flatten() {
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

/// Where `group_entries` takes entries from: a block being staged (which it empties), or a
/// shard's stretch of a staged block (whose slots it empties).
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
            let total: usize = map.shards.iter().map(|s| s.read().len()).sum();
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
