//! What recovery does to row tables: load a checkpoint's rows (committed, visible to every
//! snapshot, from several threads at once) and replay the redo log's changes, which name rows
//! by their hidden row id. Replay is idempotent per row — an insert of a row that exists
//! overwrites it, a change to a row that is gone is skipped or becomes an insert — because the
//! log replayed after a checkpoint may start a little before the checkpoint's snapshot.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::StorageError;
use crate::index::LoadBuffer;
use crate::row_slab::SlabCursor;
use crate::table::{InsertOutcome, RowChain, RowRef, RowTable, WriteOutcome};
use crate::txn::{CommitTs, Transaction};

/// The commit timestamp loaded checkpoint rows carry: before every commit after recovery.
pub const RECOVERED_TS: CommitTs = 1;

/// How long `finish_load` took for each kind of index structure; the two run at once.
#[derive(Clone, Copy, Debug, Default)]
pub struct IndexFoldTimes {
    pub ordered_runs: Duration,
    pub point_maps: Duration,
}

/// A loading thread's per-block buffers, kept from one block to the next. A checkpoint block's
/// buffers are hundreds of kilobytes, above malloc's mmap threshold, so fresh ones were mapped,
/// faulted in page by page and unmapped again for every block.
struct LoadScratch {
    /// Where the thread's loaded rows are cut from (see `row_slab.rs`). A thread that loads
    /// keeps its last, partly cut slab and the unused rest of its reservation (address space
    /// only, up to 30 MiB) until it exits; recovery's loading threads exit when the load is
    /// done.
    slab: SlabCursor,
    /// The block's new rows, on their way to the heap.
    chains: Vec<RowRef>,
    /// The block's point-map entries, on their way to the map (which empties it).
    point: Vec<(u64, RowRef)>,
}

/// What a thread keeps between loads; a bigger buffer (a lazy load of a whole table on a
/// connection's thread) is given back.
const LOAD_SCRATCH_KEEP_ROWS: usize = 64 * 1024;

impl LoadScratch {
    fn trim(&mut self) {
        debug_assert!(self.chains.is_empty() && self.point.is_empty());
        if self.chains.capacity() > LOAD_SCRATCH_KEEP_ROWS {
            self.chains = Vec::new();
        }
        if self.point.capacity() > LOAD_SCRATCH_KEEP_ROWS {
            self.point = Vec::new();
        }
    }
}

thread_local! {
    static LOAD_SCRATCH: std::cell::RefCell<LoadScratch> = const {
        std::cell::RefCell::new(LoadScratch {
            slab: SlabCursor::new(),
            chains: Vec::new(),
            point: Vec::new(),
        })
    };
}

impl RowTable {
    /// Adds a committed row with this id and content, visible to every snapshot, to the heap
    /// and every index. Checkpoint rows are known to be unique, so keys are not checked. Safe
    /// to call from several threads at once; not while transactions use the table.
    pub fn load_row(&self, row_id: u64, data: &[u8]) {
        self.load_rows(&[(row_id, data)]);
    }

    /// `load_row` for many rows at once (a checkpoint block): the table's locks are taken once
    /// per call, not once per row.
    pub fn load_rows(&self, rows: &[(u64, &[u8])]) {
        let shape = self.shape.read_recursive();
        LOAD_SCRATCH.with_borrow_mut(|scratch| {
            let chains = &mut scratch.chains;
            let slab = &mut scratch.slab;
            chains.extend(rows.iter().map(|&(row_id, data)| {
                RowRef::new_in(RowChain::new(row_id, RECOVERED_TS), data, slab)
            }));
            let mut pending = LoadBuffer::for_blocks_of(rows.len());
            pending.point = std::mem::take(&mut scratch.point);
            let (mut values, mut key) = (Vec::new(), Vec::new());
            for idx in &shape.indexes {
                for (chain, &(_, data)) in chains.iter().zip(rows) {
                    if !idx.covers(&shape.types, data) {
                        continue;
                    }
                    idx.row_key(&shape.types, data, &mut values, &mut key);
                    idx.load_entry(&key, chain, &mut pending);
                }
                idx.flush_loaded(&mut pending);
            }
            scratch.point = std::mem::take(&mut pending.point);
            if let Some(max_row_id) = rows.iter().map(|&(row_id, _)| row_id).max() {
                self.next_row_id
                    .fetch_max(max_row_id + 1, Ordering::Relaxed);
            }
            self.heap.append_many(chains.drain(..));
            scratch.trim();
        });
    }

    /// Sorts what `load_rows` handed the indexes into their ordered runs and point maps now,
    /// on up to `threads` threads, rather than at the first lookup (call once a load is done,
    /// so recovery's time includes it). Returns how long each of the two folds took.
    pub fn finish_load(&self, threads: usize) -> IndexFoldTimes {
        let shape = self.shape.read_recursive();
        let indexes = &shape.indexes;
        if indexes.is_empty() {
            return IndexFoldTimes::default();
        }
        std::thread::scope(|s| {
            // A run's sort is one job; the point maps' shards are many small ones, so they
            // fill the other threads and then this one.
            let runs = s.spawn(|| {
                let started = Instant::now();
                indexes.iter().for_each(|i| i.entries.fold_staged());
                started.elapsed()
            });
            let started = Instant::now();
            indexes.iter().for_each(|i| i.fold_staged_points(threads));
            let point_maps = started.elapsed();
            IndexFoldTimes {
                ordered_runs: runs.join().expect("an ordered-run fold panicked"),
                point_maps,
            }
        })
    }

    /// Every row handle by its hidden id, for replay (built once per table that the log
    /// touches).
    pub fn rows_by_id(&self) -> HashMap<u64, RowRef> {
        let mut rows = HashMap::new();
        for chunk in self.heap.chunks() {
            for chain in chunk.lock().iter() {
                if chain.state.lock().head().is_some() {
                    rows.insert(chain.row_id(), chain.clone());
                }
            }
        }
        rows
    }

    /// Replays an insert (or an update of a row the replay has not seen) inside `txn`, keeping
    /// the logged row id.
    pub fn redo_insert(
        &self,
        txn: &mut Transaction,
        row_id: u64,
        data: &[u8],
    ) -> Result<RowRef, StorageError> {
        let shape = self.shape.read_recursive();
        self.next_row_id.fetch_max(row_id + 1, Ordering::Relaxed);
        match self.insert_encoded(&shape, txn, row_id, data)? {
            InsertOutcome::Inserted(row) => Ok(row),
            InsertOutcome::Conflict { .. } => Err(StorageError::CommitFailed(format!(
                "replaying the log: row {row_id} of table {} collides with an existing key",
                self.id()
            ))),
        }
    }

    /// Replays an update: the row's content becomes `data`.
    pub fn redo_update(
        &self,
        txn: &mut Transaction,
        row: &RowRef,
        data: &[u8],
    ) -> Result<(), StorageError> {
        let values = self.decode_row(data);
        let snap = self.shared.statement_snapshot(txn);
        match self.update_version(txn, row, &snap, &values)? {
            WriteOutcome::Done => Ok(()),
            other => Err(replay_conflict(self, row, other)),
        }
    }

    /// Replays a delete.
    pub fn redo_delete(&self, txn: &mut Transaction, row: &RowRef) -> Result<(), StorageError> {
        let snap = self.shared.statement_snapshot(txn);
        match self.delete_version(txn, row, &snap)? {
            WriteOutcome::Done => Ok(()),
            other => Err(replay_conflict(self, row, other)),
        }
    }
}

/// Replay runs alone, so a row it writes can only be in its way if the log is inconsistent.
fn replay_conflict(table: &RowTable, row: &RowRef, outcome: WriteOutcome) -> StorageError {
    StorageError::CommitFailed(format!(
        "replaying the log: row {} of table {} is not writable ({outcome:?})",
        row.row_id(),
        table.id()
    ))
}
