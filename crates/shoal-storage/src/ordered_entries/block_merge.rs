//! Folding a bulk load's staged blocks into one sorted run. Each block was sorted when it was
//! staged. Blocks that overlap only a few deep, or whose entries come in long stretches of
//! consecutive keys (a table filled in key order, or by interleaved insert streams, however
//! many blocks one of their batches spans), are merged a stretch at a time; when deep overlap
//! turns out to move short stretches, the merge stops, and what it left is sorted and put
//! after what it merged.

use std::cmp::Ordering;

use super::{cmp_entries, RunBuilder, SortedRun};
use crate::table::RowRef;

/// A sorted block being merged: its keys, and the handles of its entries not yet moved out.
struct MergeBlock {
    /// The block's keys; its handles are in `rows`.
    keys: SortedRun,
    rows: std::vec::IntoIter<RowRef>,
    len: usize,
    /// The first entry not yet moved out.
    next: usize,
}

impl MergeBlock {
    fn new(mut run: SortedRun) -> MergeBlock {
        let rows = std::mem::take(&mut run.rows);
        MergeBlock {
            len: rows.len(),
            keys: run,
            rows: rows.into_iter(),
            next: 0,
        }
    }

    fn is_done(&self) -> bool {
        self.next == self.len
    }

    /// Entries not moved out yet.
    fn remaining(&self) -> usize {
        self.len - self.next
    }

    /// Bytes of the keys not moved out yet.
    fn remaining_key_bytes(&self) -> usize {
        self.keys.layout.start(self.len) - self.keys.layout.start(self.next)
    }

    /// The row id of entry `i`, one not moved out yet.
    fn row_id(&self, i: usize) -> u64 {
        self.rows.as_slice()[i - self.next].row_id()
    }

    /// Order of entry `i` against `other`'s head, reading row ids (a pointer chase each) only
    /// when the keys alone do not decide.
    fn cmp_with_head(&self, i: usize, other: &MergeBlock) -> Ordering {
        let (key, other_key) = (self.keys.key(i), other.keys.key(other.next));
        if key.len() == other_key.len() {
            return key
                .cmp(other_key)
                .then_with(|| self.row_id(i).cmp(&other.row_id(other.next)));
        }
        cmp_entries(key, self.row_id(i), other_key, other.row_id(other.next))
    }

    fn head_cmp(&self, other: &MergeBlock) -> Ordering {
        self.cmp_with_head(self.next, other)
    }

    /// The end of the stretch from `next` of entries below `other`'s head.
    fn end_below_head_of(&self, other: &MergeBlock) -> usize {
        let (mut lo, mut hi) = (self.next, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.cmp_with_head(mid, other).is_lt() {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Moves the entries from `next` to `end` to the end of `out`.
    fn move_to(&mut self, end: usize, out: &mut RunBuilder) {
        debug_assert!(self.next < end && end <= self.len);
        let n = end - self.next;
        out.extend_from_run(&self.keys, self.next..end, self.rows.by_ref().take(n));
        self.next = end;
    }

    /// Moves every entry not moved out yet to the end of `out`.
    fn move_rest(mut self, out: &mut RunBuilder) {
        if !self.is_done() {
            self.move_to(self.len, out);
        }
    }
}

/// One run of `staged` (a load's sorted blocks, owned) and `current` (shared with readers). A
/// load into an empty index merges its blocks (`merge_blocks`); otherwise everything is sorted
/// once, and when the blocks interleave too finely for the merge to pay, what it left.
pub(super) fn fold_runs(mut staged: Vec<SortedRun>, current: &SortedRun) -> SortedRun {
    staged.retain(|b| b.len() > 0);
    if current.len() == 0 {
        return match merge_blocks(staged) {
            Ok(run) => run,
            Err(GaveUp { mut merged, rest }) => {
                // The merge moves entries in order, so all it merged comes before all it left:
                // only the rest is sorted, and goes after.
                let mut rest = sort_together(rest, &SortedRun::default());
                let rows = std::mem::take(&mut rest.rows);
                merged.extend_from_run(&rest, 0..rows.len(), rows);
                merged.finish()
            }
        };
    }
    sort_together(staged.into_iter().map(MergeBlock::new).collect(), current)
}

/// One run of what is left of `pieces` and the live entries of `current`, sorted once.
fn sort_together(pieces: Vec<MergeBlock>, current: &SortedRun) -> SortedRun {
    let entries = pieces.iter().map(MergeBlock::remaining).sum::<usize>() + current.live_len();
    let key_bytes = pieces
        .iter()
        .map(MergeBlock::remaining_key_bytes)
        .sum::<usize>()
        + current.key_bytes.len();
    let mut all = RunBuilder::with_capacity(entries, key_bytes);
    for i in (0..current.len()).filter(|&i| !current.is_removed(i)) {
        all.push(current.key(i), current.rows[i].clone());
    }
    for piece in pieces {
        piece.move_rest(&mut all);
    }
    all.sorted()
}

/// What a merge that gave up hands back: the entries it merged, in order, with room for the
/// rest, and the blocks it did not finish.
struct GaveUp {
    merged: RunBuilder,
    rest: Vec<MergeBlock>,
}

/// Staged blocks are merged, whatever their stretches, while no key is covered by more than
/// this many of them: the heap of blocks stays small and in cache.
const MERGE_MAX_DEPTH: usize = 64;

/// Deeper overlap is merged while the stretches moved stay at least this long on average: two
/// insert streams of batches of a million consecutive keys leave blocks that each overlap
/// hundreds of others, but each block moves in two stretches. An index on a column the load's
/// row order does not follow moves an entry per stretch, a heap operation (a few cache misses
/// among thousands of blocks) each, where a sort of the whole is cheaper.
const MERGE_MIN_MEAN_STRETCH: usize = 64;

/// How many entries a deep merge moves before it judges its stretches.
const MERGE_JUDGE_AFTER_ENTRIES: usize = 1 << 16;

/// A binary min-heap of block numbers, in the order `less` gives them (passed to every call:
/// the order is their blocks' current heads, which move as the merge goes).
struct BlockHeap(Vec<usize>);

impl BlockHeap {
    fn peek(&self) -> Option<usize> {
        self.0.first().copied()
    }

    fn push(&mut self, block: usize, less: impl Fn(usize, usize) -> bool) {
        let heap = &mut self.0;
        heap.push(block);
        let mut i = heap.len() - 1;
        while i > 0 && less(heap[i], heap[(i - 1) / 2]) {
            heap.swap(i, (i - 1) / 2);
            i = (i - 1) / 2;
        }
    }

    fn pop(&mut self, less: impl Fn(usize, usize) -> bool) -> Option<usize> {
        let heap = &mut self.0;
        let last = heap.len().checked_sub(1)?;
        heap.swap(0, last);
        let top = heap.pop();
        let mut i = 0;
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if l < heap.len() && less(heap[l], heap[least]) {
                least = l;
            }
            if r < heap.len() && less(heap[r], heap[least]) {
                least = r;
            }
            if least == i {
                return top;
            }
            heap.swap(i, least);
            i = least;
        }
    }
}

/// The most blocks any one key falls within (by their first and last entries): a sweep of
/// the blocks by first entry, holding those whose last entry is not yet passed in a heap by
/// that last entry. Sorts `blocks` by first entry.
fn overlap_depth(blocks: &mut [SortedRun]) -> usize {
    blocks.sort_by(|a, b| a.entry(0).cmp(&b.entry(0)));
    let last = |b: usize| blocks[b].entry(blocks[b].len() - 1);
    let mut open = BlockHeap(Vec::new());
    let mut depth = 0;
    for (i, block) in blocks.iter().enumerate() {
        while open.peek().is_some_and(|b| last(b) < block.entry(0)) {
            open.pop(|x, y| last(x) < last(y));
        }
        open.push(i, |x, y| last(x) < last(y));
        depth = depth.max(open.0.len());
    }
    depth
}

/// Merges sorted blocks into one run, or gives up, handing back what it merged and what it
/// left, when they interleave too finely for a merge to pay.
///
/// A load's blocks are stretches of the table, so an index that follows the table's row order
/// gets disjoint blocks, and one whose rows were inserted by interleaved streams (a parallel
/// `INSERT ... SELECT`, or several clients inserting batches of keys from one sequence) gets
/// blocks that overlap others. The merge keeps the blocks in a heap by their next entry and
/// moves, from the lowest, the whole stretch below the next lowest at once (a binary search):
/// disjoint blocks are simply concatenated, and batches of consecutive keys move a batch (or
/// the part of it in one block) at a time.
fn merge_blocks(mut blocks: Vec<SortedRun>) -> Result<SortedRun, GaveUp> {
    if blocks.len() == 1 {
        return Ok(blocks.pop().expect("one block"));
    }
    let deep = overlap_depth(&mut blocks) > MERGE_MAX_DEPTH;
    let entries = blocks.iter().map(SortedRun::len).sum();
    let key_bytes = blocks.iter().map(|b| b.key_bytes.len()).sum();
    let mut out = RunBuilder::with_capacity(entries, key_bytes);
    let mut blocks: Vec<MergeBlock> = blocks.into_iter().map(MergeBlock::new).collect();
    let mut heads = BlockHeap(Vec::with_capacity(blocks.len()));
    for b in 0..blocks.len() {
        heads.push(b, |x, y| blocks[x].head_cmp(&blocks[y]).is_lt());
    }
    let mut stretches = 0usize;
    while let Some(b) = heads.pop(|x, y| blocks[x].head_cmp(&blocks[y]).is_lt()) {
        let end = match heads.peek() {
            None => blocks[b].len,
            // At least one entry: the lowest head is not above the next (equal entries cannot
            // occur, but must not stop the merge either).
            Some(next) => blocks[b]
                .end_below_head_of(&blocks[next])
                .max(blocks[b].next + 1),
        };
        stretches += 1;
        blocks[b].move_to(end, &mut out);
        if !blocks[b].is_done() {
            heads.push(b, |x, y| blocks[x].head_cmp(&blocks[y]).is_lt());
        }
        let moved = out.len();
        if deep && moved >= MERGE_JUDGE_AFTER_ENTRIES && stretches * MERGE_MIN_MEAN_STRETCH > moved
        {
            return Err(GaveUp {
                merged: out,
                rest: blocks.into_iter().filter(|b| !b.is_done()).collect(),
            });
        }
    }
    debug_assert_eq!(out.len(), entries);
    Ok(out.finish())
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::super::tests::{all, row};
    use super::super::{KeyLayout, OrderedEntries};
    use super::*;

    /// Sorted blocks of `width`-byte keys holding `ids`, `per_block` a block, as `stage` leaves
    /// them.
    fn sorted_blocks(ids: &[u64], per_block: usize, width: usize) -> Vec<SortedRun> {
        ids.chunks(per_block)
            .map(|chunk| {
                let mut b = RunBuilder::with_capacity(0, 0);
                for &id in chunk {
                    // With `width` 0, keys of 4 to 6 bytes, in the order of the ids.
                    let key = match width {
                        0 => [&id.to_be_bytes()[4..], &[0xff, 0xff][..id as usize % 3]].concat(),
                        w => id.to_be_bytes()[8 - w..].to_vec(),
                    };
                    b.push(&key, row(id));
                }
                b.sorted()
            })
            .collect()
    }

    fn run_entries(run: &SortedRun) -> Vec<(Vec<u8>, u64)> {
        (0..run.len())
            .map(|i| (run.key(i).to_vec(), run.rows[i].row_id()))
            .collect()
    }

    /// A table filled by a parallel `INSERT ... SELECT` holds batches of consecutive ids a
    /// little out of order, so the blocks a load stages overlap their neighbours: they are
    /// merged, not sorted, and come out in entry order. Blocks that overlap deeper than
    /// `MERGE_MAX_DEPTH` with short stretches are given up on and sorted.
    #[test]
    fn interleaved_blocks_merge_and_finely_interleaved_deep_ones_are_sorted() {
        let mut rng = StdRng::seed_from_u64(3);
        for (window, width) in [(1usize, 4usize), (4, 4), (4, 0), (6, 8)] {
            // 160 batches of 37 ids, shuffled within windows of `window` batches.
            let mut batches: Vec<u64> = (0..160).collect();
            for w in batches.chunks_mut(window) {
                for i in (1..w.len()).rev() {
                    w.swap(i, rng.random_range(0..=i));
                }
            }
            let ids: Vec<u64> = batches.iter().flat_map(|b| b * 37..b * 37 + 37).collect();
            let blocks = sorted_blocks(&ids, 100, width);
            let mut want: Vec<(Vec<u8>, u64)> = blocks.iter().flat_map(run_entries).collect();
            want.sort_by(|a, b| cmp_entries(&a.0, a.1, &b.0, b.1));
            let Ok(run) = merge_blocks(blocks) else {
                panic!("batches shuffled in windows of {window} were not merged");
            };
            assert_eq!(run_entries(&run), want, "window {window}, width {width}");
        }
        // Every block spans the whole key range: deeper overlap than `MERGE_MAX_DEPTH`, and
        // stretches of an entry or two, so the merge gives up once it has judged them.
        let n = 200_000u64;
        assert!(n as usize > 2 * MERGE_JUDGE_AFTER_ENTRIES);
        let mut ids: Vec<u64> = (0..n).collect();
        let mut rng = StdRng::seed_from_u64(5);
        for i in (1..ids.len()).rev() {
            ids.swap(i, rng.random_range(0..=i));
        }
        // Keys of one width (no offsets) and of several (offsets), both cut part way.
        for width in [4, 0] {
            let blocks = sorted_blocks(&ids, 2_000, width);
            let mut want: Vec<(Vec<u8>, u64)> = blocks.iter().flat_map(run_entries).collect();
            want.sort_by(|a, b| cmp_entries(&a.0, a.1, &b.0, b.1));
            let Err(GaveUp { merged, rest }) = merge_blocks(blocks) else {
                panic!("100 blocks spanning every key were merged (width {width})");
            };
            assert_eq!(rest.len(), 100, "every block handed back unfinished");
            let merged_entries = merged.len();
            assert!(merged_entries >= MERGE_JUDGE_AFTER_ENTRIES);
            let left: usize = rest.iter().map(MergeBlock::remaining).sum();
            assert_eq!(merged_entries + left, ids.len(), "no entry lost or doubled");
            let run = fold_runs(sorted_blocks(&ids, 2_000, width), &SortedRun::default());
            assert_eq!(run_entries(&run), want, "width {width}");
        }
        let entries = OrderedEntries::new();
        for block in ids.chunks(2_000) {
            let mut b = RunBuilder::with_capacity(0, 0);
            for &id in block {
                b.push(&(id as u32).to_be_bytes(), row(id));
            }
            entries.stage(b);
        }
        let got: Vec<u64> = all(&entries).into_iter().map(|(_, id)| id).collect();
        assert_eq!(got, (0..n).collect::<Vec<u64>>(), "sorted instead");
    }

    /// Two clients each inserting batches of 40,000 consecutive keys at the same time: their
    /// rows alternate in the table 50 at a time, so every block holds two stretches far apart
    /// and overlaps the 160 blocks of its pair of batches (deeper than `MERGE_MAX_DEPTH`). The
    /// stretches are long, so they are merged, and come out in order.
    #[test]
    fn blocks_of_concurrent_batch_inserts_merge() {
        const BATCH: u64 = 40_000;
        const CHUNK: u64 = 50;
        let mut ids = Vec::new();
        for pair in 0..4u64 {
            let (a, b) = (2 * pair * BATCH, (2 * pair + 1) * BATCH);
            for chunk in (0..BATCH).step_by(CHUNK as usize) {
                ids.extend(a + chunk..a + chunk + CHUNK);
                ids.extend(b + chunk..b + chunk + CHUNK);
            }
        }
        let mut blocks = sorted_blocks(&ids, 500, 8);
        assert!(overlap_depth(&mut blocks) > MERGE_MAX_DEPTH);
        let Ok(run) = merge_blocks(blocks) else {
            panic!("blocks of two concurrent batch inserts were not merged");
        };
        let got: Vec<u64> = run_entries(&run).into_iter().map(|(_, id)| id).collect();
        assert_eq!(got, (0..8 * BATCH).collect::<Vec<u64>>());
    }

    /// Two insert streams taking turns over batches of consecutive keys, one lagging 20
    /// batches behind: every block holds keys far apart and overlaps dozens of others, and
    /// the merge still puts them in order.
    #[test]
    fn blocks_of_lagging_streams_merge() {
        const BATCH: u64 = 50;
        let mut batches = Vec::new();
        for k in 0..60u64 {
            batches.push(2 * k);
            if k >= 20 {
                batches.push(2 * (k - 20) + 1);
            }
        }
        batches.extend((40..60).map(|k| 2 * k + 1));
        let ids: Vec<u64> = batches
            .iter()
            .flat_map(|b| b * BATCH..(b + 1) * BATCH)
            .collect();
        let blocks = sorted_blocks(&ids, 45, 8);
        let Ok(run) = merge_blocks(blocks) else {
            panic!("blocks of lagging streams were not merged");
        };
        let got: Vec<u64> = run_entries(&run).into_iter().map(|(_, id)| id).collect();
        assert_eq!(got, (0..120 * BATCH).collect::<Vec<u64>>());
    }

    /// A builder keeps no offsets while its keys have one width, and switches to offsets when a
    /// key of another width arrives, by a push or by a stretch of another run; merged blocks of
    /// one width and of several come out right either way.
    #[test]
    fn builders_switch_from_one_key_width_to_offsets() {
        let block = |entries: &[(&[u8], u64)]| {
            let mut b = RunBuilder::with_capacity(0, 0);
            for &(key, id) in entries {
                b.push(key, row(id));
            }
            b.sorted()
        };
        let fixed_a = block(&[(b"aa", 1), (b"ab", 2), (b"ba", 3)]);
        let mixed = block(&[(b"a", 4), (b"abc", 5), (b"b", 6), (b"bb", 7)]);
        let fixed_c = block(&[(b"bbb", 8), (b"bbc", 9), (b"cc0", 10)]);
        assert_eq!(fixed_a.layout.start(3), 6, "no offsets for one width");
        assert!(matches!(mixed.layout, KeyLayout::Varying(_)));
        let mut want: Vec<(Vec<u8>, u64)> = [&fixed_a, &mixed, &fixed_c]
            .into_iter()
            .flat_map(run_entries)
            .collect();
        want.sort_by(|a, b| cmp_entries(&a.0, a.1, &b.0, b.1));
        let Ok(run) = merge_blocks(vec![fixed_c, mixed, fixed_a]) else {
            panic!("three blocks were not merged");
        };
        assert_eq!(run_entries(&run), want);
        // Two blocks of 2-byte keys merge into a run without offsets.
        let Ok(run) = merge_blocks(vec![
            block(&[(b"ca", 12), (b"cb", 13)]),
            block(&[(b"aa", 1), (b"cc", 14)]),
        ]) else {
            panic!("two blocks were not merged");
        };
        assert!(matches!(run.layout, KeyLayout::Fixed(2)));
        assert_eq!(
            run_entries(&run).iter().map(|e| e.1).collect::<Vec<_>>(),
            [1, 12, 13, 14]
        );
    }
}
