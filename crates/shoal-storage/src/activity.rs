//! Counters of what statements do with each table and index: scans, rows read, rows written.
//! They answer pg_stat_user_tables and pg_stat_user_indexes. Counted where the rows are read
//! and written, so every path (plans, the fast path, COPY, foreign key checks) is counted
//! once, while the server's own reads (checkpoints) and recovery's replay are not.
//!
//! A counter every statement bumps would bounce one cache line between all cores, so each
//! set of counters is striped: a thread adds to its own stripe, and a reader sums them. The
//! counters start at zero when the server starts.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stripes per set of counters: enough that the threads of a many-core server rarely share one.
const STRIPES: usize = 16;

/// A stripe on a cache line (two, for the adjacent-line prefetcher) of its own.
#[repr(align(128))]
#[derive(Default)]
struct Padded<T>(T);

/// `T` once per stripe; each thread adds to one.
pub struct Striped<T> {
    stripes: Box<[Padded<T>]>,
}

impl<T: Default> Default for Striped<T> {
    fn default() -> Self {
        Striped {
            stripes: (0..STRIPES).map(|_| Padded::default()).collect(),
        }
    }
}

impl<T> Striped<T> {
    /// This thread's stripe.
    pub fn local(&self) -> &T {
        static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
        }
        &self.stripes[STRIPE.with(|s| *s)].0
    }

    /// The total of one counter over the stripes.
    pub fn sum(&self, field: impl Fn(&T) -> &AtomicU64) -> u64 {
        self.stripes
            .iter()
            .map(|s| field(&s.0).load(Ordering::Relaxed))
            .sum()
    }
}

pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

#[derive(Default)]
pub(crate) struct TableCounters {
    seq_scan: AtomicU64,
    seq_tup_read: AtomicU64,
    idx_scan: AtomicU64,
    idx_tup_fetch: AtomicU64,
    n_tup_ins: AtomicU64,
    n_tup_upd: AtomicU64,
    n_tup_del: AtomicU64,
}

/// A table's counters, as pg_stat_user_tables names them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TableActivity {
    /// Whole-table scans started.
    pub seq_scan: u64,
    /// Live rows those scans read.
    pub seq_tup_read: u64,
    /// Index scans (range scans and point lookups) over any of the table's indexes.
    pub idx_scan: u64,
    /// Live rows those index scans fetched.
    pub idx_tup_fetch: u64,
    pub n_tup_ins: u64,
    pub n_tup_upd: u64,
    pub n_tup_del: u64,
}

impl Striped<TableCounters> {
    pub(crate) fn seq_scan(&self, rows_read: u64) {
        let c = self.local();
        add(&c.seq_scan, 1);
        add(&c.seq_tup_read, rows_read);
    }

    pub(crate) fn idx_scan(&self, rows_fetched: u64) {
        let c = self.local();
        add(&c.idx_scan, 1);
        add(&c.idx_tup_fetch, rows_fetched);
    }

    pub(crate) fn inserted(&self, rows: u64) {
        add(&self.local().n_tup_ins, rows);
    }

    pub(crate) fn updated(&self) {
        add(&self.local().n_tup_upd, 1);
    }

    pub(crate) fn deleted(&self) {
        add(&self.local().n_tup_del, 1);
    }

    pub(crate) fn total(&self) -> TableActivity {
        TableActivity {
            seq_scan: self.sum(|c| &c.seq_scan),
            seq_tup_read: self.sum(|c| &c.seq_tup_read),
            idx_scan: self.sum(|c| &c.idx_scan),
            idx_tup_fetch: self.sum(|c| &c.idx_tup_fetch),
            n_tup_ins: self.sum(|c| &c.n_tup_ins),
            n_tup_upd: self.sum(|c| &c.n_tup_upd),
            n_tup_del: self.sum(|c| &c.n_tup_del),
        }
    }
}

#[derive(Default)]
pub(crate) struct IndexCounters {
    idx_scan: AtomicU64,
    idx_tup_read: AtomicU64,
    idx_tup_fetch: AtomicU64,
}

/// An index's counters, as pg_stat_user_indexes names them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IndexActivity {
    pub idx_scan: u64,
    /// Index entries the scans looked at (entries of old versions included).
    pub idx_tup_read: u64,
    /// Live rows the scans returned.
    pub idx_tup_fetch: u64,
}

impl Striped<IndexCounters> {
    pub(crate) fn scan(&self, entries_read: u64, rows_fetched: u64) {
        let c = self.local();
        add(&c.idx_scan, 1);
        add(&c.idx_tup_read, entries_read);
        add(&c.idx_tup_fetch, rows_fetched);
    }

    pub(crate) fn total(&self) -> IndexActivity {
        IndexActivity {
            idx_scan: self.sum(|c| &c.idx_scan),
            idx_tup_read: self.sum(|c| &c.idx_tup_read),
            idx_tup_fetch: self.sum(|c| &c.idx_tup_fetch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up() {
        let table = std::sync::Arc::new(Striped::<TableCounters>::default());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let table = table.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        table.seq_scan(3);
                        table.inserted(2);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let total = table.total();
        assert_eq!((total.seq_scan, total.seq_tup_read), (8000, 24000));
        assert_eq!(total.n_tup_ins, 16000);
        assert_eq!(total.idx_scan, 0);
    }
}
