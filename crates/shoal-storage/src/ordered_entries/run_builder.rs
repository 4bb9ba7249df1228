//! Building a sorted run: a bulk load's staging buffer (entries pushed in any order, sorted
//! or dealt into runs once per block) and a merge's output (entries pushed in order).

use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, AtomicUsize};

use super::{cmp_entries, KeyLayout, SortedRun};
use crate::table::RowRef;

/// Most ascending sequences a staged block is dealt into (`RunBuilder::into_sorted_runs`);
/// one that needs more is sorted. Two clients filling a table make blocks of two.
pub(super) const MAX_PILES: usize = 8;

/// Keys up to this many bytes sort packed with their position (32 bits) in one u128.
const PACKED_KEY_BYTES: usize = 12;

/// Collects entries (key without row id, row) and turns them into a run: a bulk load's
/// staging buffer, and the output of a merge (which pushes in order).
pub(crate) struct RunBuilder {
    key_bytes: Vec<u8>,
    /// Fixed while every key pushed so far has one width (the first key's), as an integer
    /// key's do: then no offsets are kept at all, 8 bytes an entry saved in every load.
    layout: KeyLayout,
    rows: Vec<RowRef>,
}

impl RunBuilder {
    pub(crate) fn with_capacity(entries: usize, key_bytes: usize) -> RunBuilder {
        RunBuilder {
            key_bytes: Vec::with_capacity(key_bytes),
            layout: KeyLayout::Fixed(0),
            rows: Vec::with_capacity(entries),
        }
    }

    /// Makes room in the layout for keys of `width` bytes (None: of several widths).
    fn fit_layout(&mut self, width: Option<usize>) {
        match (&self.layout, width) {
            (KeyLayout::Varying(_), _) => {}
            (KeyLayout::Fixed(_), Some(width)) if self.rows.is_empty() => {
                self.layout = KeyLayout::Fixed(width)
            }
            (&KeyLayout::Fixed(w), Some(width)) if w == width => {}
            (&KeyLayout::Fixed(w), _) => {
                let mut ends = Vec::with_capacity(self.rows.capacity());
                ends.extend((1..=self.rows.len()).map(|i| (i * w) as u64));
                self.layout = KeyLayout::Varying(ends);
            }
        }
    }

    pub(crate) fn push(&mut self, key: &[u8], row: RowRef) {
        self.fit_layout(Some(key.len()));
        self.key_bytes.extend_from_slice(key);
        if let KeyLayout::Varying(ends) = &mut self.layout {
            ends.push(self.key_bytes.len() as u64);
        }
        self.rows.push(row);
    }

    /// Appends the entries `range` of `run`, whose handles `rows` yields (the run's own
    /// `rows` may have been moved out): their keys in one copy.
    pub(super) fn extend_from_run(
        &mut self,
        run: &SortedRun,
        range: std::ops::Range<usize>,
        rows: impl IntoIterator<Item = RowRef>,
    ) {
        if range.is_empty() {
            return;
        }
        self.fit_layout(match run.layout {
            KeyLayout::Fixed(w) => Some(w),
            KeyLayout::Varying(_) => None,
        });
        let (from, to) = (run.layout.start(range.start), run.layout.start(range.end));
        // A key ending at `e` in the run ends at `e - from + base` here.
        let (from_u64, base) = (from as u64, self.key_bytes.len() as u64);
        self.key_bytes.extend_from_slice(&run.key_bytes[from..to]);
        if let KeyLayout::Varying(ends) = &mut self.layout {
            match &run.layout {
                KeyLayout::Fixed(w) => ends.extend(
                    (range.start + 1..=range.end).map(|i| (i * w) as u64 - from_u64 + base),
                ),
                KeyLayout::Varying(run_ends) => {
                    ends.extend(run_ends[range.clone()].iter().map(|&e| e - from_u64 + base))
                }
            }
        }
        let before = self.rows.len();
        self.rows.extend(rows);
        debug_assert_eq!(self.rows.len() - before, range.len(), "a handle per entry");
    }

    /// Entries pushed so far.
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn key(&self, i: usize) -> &[u8] {
        self.layout.key(&self.key_bytes, i)
    }

    fn entry_cmp(&self, a: usize, b: usize) -> Ordering {
        let (key_a, key_b) = (self.key(a), self.key(b));
        if key_a.len() == key_b.len() {
            // As `cmp_entries`, but the row ids (a pointer chase each, a cache miss in a big
            // load) are read only when the keys are equal: a unique key's load never does.
            return key_a
                .cmp(key_b)
                .then_with(|| self.rows[a].row_id().cmp(&self.rows[b].row_id()));
        }
        cmp_entries(key_a, self.rows[a].row_id(), key_b, self.rows[b].row_id())
    }

    /// The run of the entries pushed in any order: an ordered input is only checked, anything
    /// else sorted once (`sort_order`).
    pub(super) fn sorted(self) -> SortedRun {
        if self.in_order() {
            return self.finish();
        }
        self.sort_all()
    }

    /// The entries pushed in any order as sorted runs, for a bulk load to stage. Entries in
    /// order are one run as they are. Entries that a few ascending sequences make up, one
    /// after the other or interleaved, are dealt into a run per sequence, which the fold
    /// merges as it merges the load's blocks, instead of being sorted: a checkpoint block of a
    /// table that several clients filled at once holds rows of each client's batch, often
    /// alternating, and sorting those blocks was ~6% of such a table's restart
    /// (bench/coldstart/README.md, "Index entries"). Anything else is sorted once.
    pub(super) fn into_sorted_runs(self) -> Vec<SortedRun> {
        match self.ascending_piles(MAX_PILES) {
            None => vec![self.sort_all()],
            Some((_, 1)) => vec![self.finish()],
            Some((pile_of, piles)) => self.deal(&pile_of, piles),
        }
    }

    /// Deals the entries, in push order, into at most `max` piles that each stay in entry
    /// order: an entry goes on the first pile whose last entry is not above it, or starts a new
    /// one. Returns each entry's pile and the number of piles; None if `max` are not enough.
    pub(super) fn ascending_piles(&self, max: usize) -> Option<(Vec<u8>, usize)> {
        assert!(max <= u8::MAX as usize + 1, "a pile number is a byte");
        // Each pile's last entry.
        let mut last: Vec<usize> = Vec::with_capacity(max);
        let mut pile_of = Vec::with_capacity(self.rows.len());
        for i in 0..self.rows.len() {
            let fits = |&l: &usize| self.entry_cmp(l, i) != Ordering::Greater;
            let pile = match last.iter().position(fits) {
                Some(pile) => pile,
                None if last.len() < max => {
                    last.push(i);
                    last.len() - 1
                }
                None => return None,
            };
            last[pile] = i;
            pile_of.push(pile as u8);
        }
        Some((pile_of, last.len().max(1)))
    }

    /// One run per pile: entry `i` goes to run `pile_of[i]`, in push order.
    fn deal(self, pile_of: &[u8], piles: usize) -> Vec<SortedRun> {
        let n = self.rows.len();
        debug_assert_eq!(pile_of.len(), n);
        let mut entries = vec![0usize; piles];
        for &pile in pile_of {
            entries[pile as usize] += 1;
        }
        let key_bytes_per_entry = self.key_bytes.len().div_ceil(n.max(1));
        let mut builders: Vec<RunBuilder> = entries
            .iter()
            .map(|&m| RunBuilder::with_capacity(m, m * key_bytes_per_entry))
            .collect();
        let RunBuilder {
            key_bytes,
            layout,
            rows,
        } = self;
        // Handles are moved, not cloned: a clone and a drop would touch every row's count.
        for ((i, row), &pile) in rows.into_iter().enumerate().zip(pile_of) {
            builders[pile as usize].push(layout.key(&key_bytes, i), row);
        }
        builders.into_iter().map(RunBuilder::finish).collect()
    }

    /// The run of the entries sorted once.
    fn sort_all(self) -> SortedRun {
        let n = self.rows.len();
        let order = self.sort_order();
        let mut b = RunBuilder::with_capacity(n, self.key_bytes.len());
        let RunBuilder {
            key_bytes,
            layout,
            rows,
        } = self;
        // Move the handles (an `Option<RowRef>` is one pointer, so this reuses the vector):
        // a clone and a drop would touch every row's count, a cache miss each in a big load.
        let mut rows: Vec<Option<RowRef>> = rows.into_iter().map(Some).collect();
        for &i in &order {
            let row = rows[i as usize].take().expect("each entry once");
            b.push(layout.key(&key_bytes, i as usize), row);
        }
        b.finish()
    }

    fn in_order(&self) -> bool {
        (1..self.rows.len()).all(|i| self.entry_cmp(i - 1, i) != Ordering::Greater)
    }

    /// The entries' positions in entry order.
    fn sort_order(&self) -> Vec<u32> {
        let n = self.rows.len();
        assert!(n <= u32::MAX as usize, "a run of over 4G entries");
        let width = match self.fixed_width() {
            Some(width) if width <= PACKED_KEY_BYTES => width,
            _ => {
                let mut order: Vec<u32> = (0..n as u32).collect();
                order.sort_by(|&a, &b| self.entry_cmp(a as usize, b as usize));
                return order;
            }
        };
        // Keys of one width up to 12 bytes (integer keys, dates, short codes) compare as
        // big-endian numbers. Sorting (key, position) packed in a u128 moves 16 bytes per entry
        // through a cache-friendly sort instead of comparing keys through the offsets array.
        let mut packed: Vec<u128> = (0..n)
            .map(|i| {
                let mut bytes = [0u8; 16];
                bytes[..width].copy_from_slice(self.key(i));
                (u128::from_be_bytes(bytes)) | i as u128
            })
            .collect();
        packed.sort_unstable();
        let key_of = |p: u128| p >> 32;
        let mut order: Vec<u32> = packed.iter().map(|&p| p as u32).collect();
        // Equal keys go by row id, which only a pointer chase reads: sort just those stretches
        // (a unique key has none, bar the old versions of a row).
        let mut start = 0;
        while start < n {
            let mut end = start + 1;
            while end < n && key_of(packed[end]) == key_of(packed[start]) {
                end += 1;
            }
            if end - start > 1 {
                order[start..end].sort_by(|&a, &b| self.entry_cmp(a as usize, b as usize));
            }
            start = end;
        }
        order
    }

    /// The width of every key, if they all have one.
    fn fixed_width(&self) -> Option<usize> {
        match self.layout {
            KeyLayout::Fixed(width) => Some(width),
            KeyLayout::Varying(_) => None,
        }
    }

    /// The run of the entries, pushed in order.
    pub(super) fn finish(self) -> SortedRun {
        let n = self.rows.len();
        let mut layout = self.layout;
        if let KeyLayout::Varying(ends) = &mut layout {
            ends.shrink_to_fit();
        }
        let mut key_bytes = self.key_bytes;
        key_bytes.shrink_to_fit();
        let mut rows = self.rows;
        rows.shrink_to_fit();
        SortedRun {
            key_bytes,
            layout,
            tombstones: (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            rows,
            removed: AtomicUsize::new(0),
        }
    }
}
