//! Garbage collection of dead versions. A version whose end is a commit timestamp at or below
//! the oldest snapshot any transaction can still read at (the horizon) is unlinked from its
//! chain; a row whose versions are all dead (deleted, or an insert rolled back) leaves the heap;
//! an index entry whose key no remaining version of its row has is removed. Passes are bounded
//! (a budget of rows and entries per step, with a cursor to resume), so the background thread
//! never holds a table for long. Reclamation is safe against concurrent readers because readers
//! only ever hold `Arc`s of row bytes and chains, never borrowed pointers into a chain.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::database::Database;
use crate::index::{key_part, Index};
use crate::table::{RowRef, RowTable};
use crate::txn::CommitTs;
use crate::types::DataType;

/// What a GC pass reclaimed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcStats {
    pub versions_freed: usize,
    pub rows_freed: usize,
    pub index_entries_freed: usize,
    /// Column-table segments dropped whole (see `ColumnTable::remove_dead_segments`).
    pub segments_freed: usize,
}

/// What garbage collection reclaimed since the server started, for monitoring.
#[derive(Debug, Default)]
pub struct GcTotals {
    pub versions_freed: AtomicU64,
    pub rows_freed: AtomicU64,
    pub index_entries_freed: AtomicU64,
    pub segments_freed: AtomicU64,
}

impl GcTotals {
    fn add(&self, s: &GcStats) {
        self.versions_freed
            .fetch_add(s.versions_freed as u64, Ordering::Relaxed);
        self.rows_freed
            .fetch_add(s.rows_freed as u64, Ordering::Relaxed);
        self.index_entries_freed
            .fetch_add(s.index_entries_freed as u64, Ordering::Relaxed);
        self.segments_freed
            .fetch_add(s.segments_freed as u64, Ordering::Relaxed);
    }
}

/// Where the next GC step of a table resumes: heap chunk, then each index from a key; and
/// what the pass has seen so far.
#[derive(Default)]
pub(crate) struct GcCursor {
    chunk: usize,
    index: usize,
    key: Option<Box<[u8]>>,
    /// This pass met a row that is not settled (an older or uncommitted version, a row lock,
    /// a row gone) or removed an index entry: the next pass may have work.
    found_work: bool,
    /// The last whole pass found no work. With no write since (`RowTable::gc_dirty`), every
    /// row still has one committed live version and every index entry is used, so another
    /// pass would only burn CPU: a 10M-row table costs a core 1-2% when swept forever.
    last_pass_idle: bool,
}

impl GcCursor {
    fn at_pass_start(&self) -> bool {
        self.chunk == 0 && self.index == 0 && self.key.is_none()
    }
}

/// Rows plus index entries one background step may visit per table.
const BACKGROUND_BUDGET_PER_TABLE: usize = 50_000;

impl RowTable {
    /// Visits at most about `budget` rows/entries from the cursor; returns true when this step
    /// finished a whole pass over the table (the cursor is then back at the start).
    pub(crate) fn gc_step(&self, horizon: CommitTs, budget: usize, stats: &mut GcStats) -> bool {
        let shape = self.shape.read_recursive();
        let mut cursor = self.gc_cursor.lock();
        if cursor.at_pass_start() {
            // Before the pass looks at any row: a write from here on marks the next pass.
            self.gc_dirty.swap(false, Ordering::AcqRel);
            cursor.found_work = false;
        }
        let mut work = 0;
        let chunks = self.heap.chunks();
        while cursor.chunk < chunks.len() {
            if work >= budget {
                return false;
            }
            let (visited, settled) = prune_chunk(&chunks[cursor.chunk], horizon, stats);
            work += visited;
            cursor.found_work |= !settled;
            cursor.chunk += 1;
        }
        if cursor.index == 0 && cursor.key.is_none() {
            self.heap.drop_empty_chunks();
        }
        while cursor.index < shape.indexes.len() {
            let idx = &shape.indexes[cursor.index];
            let start = cursor.key.take();
            let freed_before = stats.index_entries_freed;
            let resume = sweep_index(idx, &shape.types, start, budget.saturating_sub(work), stats);
            cursor.found_work |= stats.index_entries_freed != freed_before;
            match resume {
                Some(resume) => {
                    cursor.key = Some(resume);
                    return false;
                }
                None => cursor.index += 1,
            }
        }
        *cursor = GcCursor {
            last_pass_idle: !cursor.found_work,
            ..GcCursor::default()
        };
        true
    }

    /// Abandons the pass under way; the next step starts a whole new one, and the table is not
    /// idle until that pass ends. For VACUUM, and wherever the table's indexes or rows change
    /// under the cursor (an index added or dropped shifts the cursor's index position;
    /// TRUNCATE; a rewrite): call those with the shape write-locked, which orders it against
    /// `gc_step` (shape, then cursor).
    pub(crate) fn reset_gc_cursor(&self) {
        *self.gc_cursor.lock() = GcCursor::default();
    }

    /// The background GC skips this table: its last pass found nothing left to do, and no
    /// insert, update or delete came since that pass started.
    pub fn gc_is_idle(&self) -> bool {
        let cursor = self.gc_cursor.lock();
        cursor.last_pass_idle && cursor.at_pass_start() && !self.gc_dirty.load(Ordering::Acquire)
    }
}

/// Prunes every chain of a heap chunk and drops emptied rows; returns the rows visited and
/// whether every row was settled (one committed live version, nothing pruned or dropped).
fn prune_chunk(
    chunk: &crate::table::HeapChunk,
    horizon: CommitTs,
    stats: &mut GcStats,
) -> (usize, bool) {
    let mut rows = chunk.lock();
    let before = rows.len();
    let mut settled = true;
    rows.retain(|chain| {
        let mut st = chain.state.lock();
        let freed = st.prune(horizon);
        stats.versions_freed += freed;
        settled &= freed == 0 && st.is_settled();
        st.head().is_some()
    });
    stats.rows_freed += before - rows.len();
    (before, settled)
}

/// Removes stale entries from `start` on; returns the key to resume from if the budget ran out.
fn sweep_index(
    idx: &Index,
    types: &[DataType],
    start: Option<Box<[u8]>>,
    budget: usize,
    stats: &mut GcStats,
) -> Option<Box<[u8]>> {
    let lower = start.as_deref().map_or(Bound::Unbounded, Bound::Included);
    let (mut visited, mut resume) = (0, None);
    idx.for_each_entry(lower, Bound::Unbounded, |entry, row| {
        if visited >= budget {
            resume = Some(entry.into());
            return false;
        }
        visited += 1;
        let key = key_part(entry);
        if entry_is_used(idx, types, row, key) {
            return true;
        }
        // Recheck under the key's stripe: a writer adds a version and its entry under it.
        let _stripe = idx.lock_key(key);
        if !entry_is_used(idx, types, row, key) && idx.remove_entry(entry) {
            stats.index_entries_freed += 1;
        }
        true
    });
    if resume.is_none() {
        // A whole pass over this index is done: a good moment to fold its recent entries
        // into the sorted run (and drop the entries this pass removed from it).
        idx.entries.merge_if_due();
    }
    resume
}

impl RowTable {
    /// Removes the entries an index scan walked past whose rows are dead to every snapshot, so
    /// the next scan does not walk them again: a queue popped from its head (Redis's LPOP, a
    /// job table's `ORDER BY id LIMIT 1` delete) would otherwise walk every entry popped since
    /// the last GC pass, each time. As `sweep_index` does, a version is pruned only below the
    /// oldest snapshot still open, and an entry removed only when no remaining version has its
    /// key.
    pub(crate) fn prune_dead_entries(
        &self,
        idx: &Index,
        types: &[DataType],
        unseen: Vec<(Box<[u8]>, RowRef)>,
    ) {
        // The horizon now (as the GC thread publishes it): the queue's entries were deleted
        // moments ago, after the last GC step's horizon.
        let horizon = self.shared.oldest_active_snapshot();
        self.shared
            .gc_horizon_ts
            .fetch_max(horizon, Ordering::Relaxed);
        for (entry, chain) in unseen {
            let key = key_part(&entry);
            let _stripe = idx.lock_key(key);
            chain.lock_state().prune(horizon);
            if !entry_is_used(idx, types, &chain, key) {
                idx.remove_entry(&entry);
            }
        }
    }
}

fn entry_is_used(idx: &Index, types: &[DataType], chain: &RowRef, key: &[u8]) -> bool {
    let st = chain.lock_state();
    let used = st
        .versions()
        .any(|v| idx.row_has_key(types, chain.bytes(&v.data), key));
    used
}

impl Database {
    /// A full GC pass over every table (VACUUM).
    pub fn vacuum(&self) -> GcStats {
        let horizon = self.publish_gc_horizon();
        let mut stats = GcStats::default();
        for table in self.tables() {
            table.reset_gc_cursor();
            while !table.gc_step(horizon, usize::MAX, &mut stats) {}
        }
        self.remove_dead_segments(horizon, &mut stats);
        self.gc_totals().add(&stats);
        stats
    }

    fn remove_dead_segments(&self, horizon: CommitTs, stats: &mut GcStats) {
        for table in self.column_tables() {
            stats.segments_freed += table.remove_dead_segments(horizon);
        }
    }

    /// One bounded background step over every table that may have work (the GC thread's
    /// step, run every `interval_ms` of `start_background_gc`).
    pub fn background_gc_step(&self) -> GcStats {
        let horizon = self.publish_gc_horizon();
        let mut stats = GcStats::default();
        for table in self.tables() {
            if !table.gc_is_idle() {
                table.gc_step(horizon, BACKGROUND_BUDGET_PER_TABLE, &mut stats);
            }
        }
        self.remove_dead_segments(horizon, &mut stats);
        self.gc_totals().add(&stats);
        stats
    }

    /// Row tables the background GC has work in (written since their last pass, or whose last
    /// pass left versions an open snapshot still needed): the collector's backlog.
    pub fn gc_backlog_tables(&self) -> usize {
        self.tables().iter().filter(|t| !t.gc_is_idle()).count()
    }

    fn publish_gc_horizon(&self) -> CommitTs {
        let horizon = self.oldest_active_snapshot();
        self.shared()
            .gc_horizon_ts
            .fetch_max(horizon, Ordering::Relaxed);
        horizon
    }

    /// Runs a bounded GC step every `interval_ms` on a std thread until the database is dropped.
    pub fn start_background_gc(self: &Arc<Self>, interval_ms: u64) -> std::thread::JoinHandle<()> {
        let db: Weak<Database> = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("shoal-gc".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(interval_ms));
                let Some(db) = db.upgrade() else { return };
                db.background_gc_step();
            })
            .expect("spawn GC thread")
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use super::*;
    use crate::index::IndexDef;
    use crate::txn::IsolationLevel;
    use crate::types::Value;

    fn entries(t: &RowTable, pos: usize) -> usize {
        let mut n = 0;
        t.shape.read().indexes[pos].for_each_entry(Bound::Unbounded, Bound::Unbounded, |_, _| {
            n += 1;
            true
        });
        n
    }

    /// Dropping an index before the one a pass is sweeping shifts the cursor's position; the
    /// pass must start over, not end early and call the table idle with a stale entry left.
    #[test]
    fn an_index_dropped_mid_pass_restarts_the_pass() {
        let db = Database::new();
        let t = db.create_table(1, vec![DataType::Int32, DataType::Int64]);
        for (id, column) in [(10, 0), (11, 0), (12, 1)] {
            t.add_index(IndexDef {
                id,
                name: format!("i{id}"),
                columns: vec![column],
                unique: id == 10,
                predicate: None,
            })
            .unwrap();
        }
        let rows = 60_000;
        let mut txn = db.begin(IsolationLevel::ReadCommitted);
        for id in 0..rows {
            t.insert(&mut txn, &[Value::Int32(id), Value::Int64(id.into())])
                .unwrap();
        }
        db.commit(txn).unwrap();
        while !t.gc_is_idle() {
            db.background_gc_step();
        }
        // A rolled-back update leaves index 2 an entry for a key no version has, at its end.
        let mut txn = db.begin(IsolationLevel::ReadCommitted);
        let snap = db.statement_snapshot(&mut txn);
        let (row, _) = t.index_get(10, &snap, &[Value::Int32(5)]).unwrap().unwrap();
        t.update(
            &mut txn,
            &row,
            &snap,
            &[Value::Int32(5), Value::Int64(1 << 40)],
        )
        .unwrap();
        db.rollback(txn);
        assert_eq!(entries(&t, 2), rows as usize + 1);
        // Step until the pass is partway through index 2, then drop index 1.
        loop {
            db.background_gc_step();
            let cursor = t.gc_cursor.lock();
            if cursor.index == 2 && cursor.key.is_some() {
                break;
            }
            assert!(!cursor.at_pass_start(), "the pass ended before index 2");
        }
        t.drop_index(11).unwrap();
        let mut steps = 0;
        while !t.gc_is_idle() {
            db.background_gc_step();
            steps += 1;
            assert!(steps < 20, "GC did not go idle");
        }
        assert_eq!(entries(&t, 1), rows as usize, "the stale entry was swept");
    }
}
