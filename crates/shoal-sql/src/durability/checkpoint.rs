//! Checkpoints: every table's rows as of one snapshot, written in parallel while writers go on,
//! so recovery loads them instead of replaying the whole log, and the log before them can go.
//!
//! The cut: while no record can be appended, take the log position of the oldest commit that is
//! still stamping (or the log's end) as P, then take the snapshot. Every commit record before
//! P belongs to a commit the snapshot sees; records after P are replayed. The catalog image is
//! read after P, so it holds every DDL logged before P. Replay starts earlier than P when a
//! transaction not in the snapshot logged records ahead of its commit (column segments, row
//! changes of a large transaction): from the first of them, with every other record before P
//! skipped, as the checkpoint holds its effect (the manifest keeps both positions).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shoal_storage::column::row_id;
use shoal_storage::{ColumnTable, Database, IsolationLevel, RowTable, Snapshot};
use shoal_wal::{Lsn, TablePart, WalError};

use super::{wal_error, CatalogLock, Durability};
use crate::error::SqlError;

/// Tables smaller than this are written by one thread.
const PARALLEL_TABLE_ROWS_MIN: usize = 100_000;

#[derive(Debug)]
pub struct CheckpointReport {
    pub id: u64,
    pub start_lsn: Lsn,
    pub rows: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    pub removed_segments: usize,
}

/// How many checkpoints were written and the time they took, as pg_stat_bgwriter counts them:
/// `timed` the ones the server started (after `--checkpoint-interval-s` or
/// `--checkpoint-log-mb`), `requested` the CHECKPOINT commands.
#[derive(Debug, Default)]
pub struct CheckpointCounters {
    pub timed: AtomicU64,
    pub requested: AtomicU64,
    /// Milliseconds spent writing them (files synced included).
    pub write_time_ms: AtomicU64,
}

impl CheckpointCounters {
    fn count(&self, kind: &AtomicU64, report: &Result<CheckpointReport, SqlError>) {
        if let Ok(r) = report {
            kind.fetch_add(1, Ordering::Relaxed);
            self.write_time_ms
                .fetch_add(r.elapsed.as_millis() as u64, Ordering::Relaxed);
        }
    }
}

/// Keeps the current checkpoint and the log after it from being deleted while an online
/// backup copies them; dropped (the backup's end, or its session's), it lets them go.
pub struct BackupPin {
    durability: Arc<Durability>,
}

impl Drop for BackupPin {
    fn drop(&mut self) {
        self.durability
            .backups_running
            .fetch_sub(1, Ordering::AcqRel);
    }
}

impl Durability {
    /// Pins the files an online backup copies (see `BackupPin`). Waits for a checkpoint that
    /// is being written, which decided before the pin whether to delete the older files.
    pub fn pin_for_backup(self: &Arc<Self>) -> BackupPin {
        let _no_checkpoint_running = self.checkpoint_running.lock();
        self.backups_running.fetch_add(1, Ordering::AcqRel);
        BackupPin {
            durability: self.clone(),
        }
    }

    /// Writes a checkpoint and removes the log it covers. Blocks: call it off the async
    /// runtime.
    pub fn checkpoint(
        &self,
        db: &Arc<Database>,
        catalog: &CatalogLock,
    ) -> Result<CheckpointReport, SqlError> {
        let _one_at_a_time = self.checkpoint_running.lock();
        let report = self.checkpoint_locked(db, catalog);
        self.checkpoints.count(&self.checkpoints.requested, &report);
        report
    }

    /// The automatic checkpoint: writes one only if it is still due once no other checkpoint
    /// runs. A CHECKPOINT command that ran meanwhile (say, right after a bulk load) has
    /// covered the log that made it due, and a second full image would only take the cores
    /// from the queries.
    pub fn checkpoint_if_due(
        &self,
        db: &Arc<Database>,
        catalog: &CatalogLock,
        since_last: Duration,
    ) -> Result<Option<CheckpointReport>, SqlError> {
        let _one_at_a_time = self.checkpoint_running.lock();
        if !self.checkpoint_due(since_last) {
            return Ok(None);
        }
        let report = self.checkpoint_locked(db, catalog);
        self.checkpoints.count(&self.checkpoints.timed, &report);
        report.map(Some)
    }

    /// Under `checkpoint_running`.
    fn checkpoint_locked(
        &self,
        db: &Arc<Database>,
        catalog: &CatalogLock,
    ) -> Result<CheckpointReport, SqlError> {
        let report = self.checkpoint_now(db, catalog);
        // Writing the checkpoint buffered every table's image; give that memory back.
        crate::allocator::release_free_memory();
        report
    }

    fn checkpoint_now(
        &self,
        db: &Arc<Database>,
        catalog: &CatalogLock,
    ) -> Result<CheckpointReport, SqlError> {
        let started = Instant::now();
        let (bounds, txn, log_end) = self.wal.with_append_lock(|next_lsn| {
            let bounds = db.replay_bounds(next_lsn);
            let mut txn = db.begin(IsolationLevel::RepeatableRead);
            db.statement_snapshot(&mut txn);
            (bounds, txn, next_lsn)
        });
        // Commits released early are visible before they are durable: the checkpoint holds only
        // commits whose records are on disk, so a crash cannot bring back one the log lost.
        // A dropped batch held only commits that were never made visible (nothing released
        // early is dropped), so only a broken log stops the checkpoint.
        if let Err(e @ WalError::Broken(_)) = self.wal.wait_flushed_blocking(log_end) {
            db.rollback(txn);
            return Err(wal_error(e));
        }
        self.write_at_cut(db, catalog, (bounds.start, bounds.covered), txn, started)
    }

    /// A standby's checkpoint (a member of a replication group applying its primary's log):
    /// `take_cut`, called with no checkpoint running, stops applying and returns where replay
    /// must start, what the database covers (both LSNs of the applied log), and a
    /// transaction whose snapshot sees exactly that.
    pub(crate) fn checkpoint_standby(
        &self,
        db: &Arc<Database>,
        catalog: &CatalogLock,
        take_cut: impl FnOnce() -> (Lsn, Lsn, shoal_storage::Transaction),
    ) -> Result<CheckpointReport, SqlError> {
        let _one_at_a_time = self.checkpoint_running.lock();
        let started = Instant::now();
        let (start_lsn, covered_lsn, txn) = take_cut();
        let report = self.write_at_cut(db, catalog, (start_lsn, covered_lsn), txn, started);
        self.checkpoints.count(&self.checkpoints.requested, &report);
        crate::allocator::release_free_memory();
        report
    }

    /// Writes the checkpoint of `txn`'s snapshot, which holds the log up to `covered_lsn` and
    /// needs it replayed from `start_lsn` (see the module's comment).
    fn write_at_cut(
        &self,
        db: &Arc<Database>,
        catalog: &CatalogLock,
        (start_lsn, covered_lsn): (Lsn, Lsn),
        mut txn: shoal_storage::Transaction,
        started: Instant,
    ) -> Result<CheckpointReport, SqlError> {
        let snapshot = db.statement_snapshot(&mut txn);
        let (image, tables, column_tables) = {
            let c = catalog.read();
            let tables: Vec<Arc<RowTable>> = c
                .tables
                .keys()
                .filter_map(|oid| db.table(*oid as u64))
                .collect();
            let column_tables: Vec<Arc<ColumnTable>> = c
                .tables
                .keys()
                .filter_map(|oid| db.column_table(*oid as u64))
                .collect();
            (c.to_image(), tables, column_tables)
        };
        let threads = self.options.checkpoint_threads.max(1);
        let mut parts: Vec<TablePart<'_>> = Vec::new();
        for table in &tables {
            let n = if table.row_count_estimate() >= PARALLEL_TABLE_ROWS_MIN {
                threads
            } else {
                1
            };
            // The heap is split after the snapshot is taken: every row it sees is in a chunk.
            for (part, slice) in table.heap_parts(n).into_iter().enumerate() {
                let table = table.clone();
                parts.push(TablePart {
                    table: table.id(),
                    part: part as u32,
                    produce: Box::new(move |sink| {
                        let mut result = Ok(());
                        table.scan_heap_part(&snapshot, &slice, |row, data| {
                            result = sink(row.row_id(), data);
                            result.is_ok()
                        });
                        result
                    }),
                });
            }
        }
        for table in &column_tables {
            parts.extend(column_table_parts(table, snapshot, threads));
        }
        // An online backup copies the checkpoint that was current when it began and the log
        // from there: both stay until it ends (see `pin_for_backup`).
        let backup_running = self.backups_running.load(Ordering::Acquire) > 0;
        let info = shoal_wal::write_checkpoint_keeping(
            &self.data_dir,
            start_lsn,
            covered_lsn,
            &image,
            parts,
            threads,
            backup_running,
        )
        .map_err(wal_error)?;
        db.rollback(txn);
        self.last_checkpoint_lsn.store(start_lsn, Ordering::Release);
        let removed_segments = match backup_running {
            true => 0,
            false => self.wal.remove_segments_before(start_lsn).map_err(|e| {
                SqlError::new("58030", format!("could not remove old log segments: {e}"))
            })?,
        };
        Ok(CheckpointReport {
            id: info.id,
            start_lsn,
            rows: info.rows,
            bytes: info.bytes,
            elapsed: started.elapsed(),
            removed_segments,
        })
    }
}

/// A column table's checkpoint parts: each segment visible to `snapshot` as one entry (its Arrow
/// IPC image under the row id of its first row), followed by one empty entry per row deleted
/// as of the snapshot (see `recovery::load_column_entry`). Segments are dealt round-robin over
/// up to `threads` parts; a segment and its deletes stay in one part, which loads in order.
fn column_table_parts(
    table: &Arc<ColumnTable>,
    snapshot: Snapshot,
    threads: usize,
) -> Vec<TablePart<'static>> {
    let segments: Vec<_> = table
        .segments()
        .into_iter()
        .filter(|s| s.visible_to(&snapshot))
        .collect();
    let n = if table.row_count_estimate() >= PARALLEL_TABLE_ROWS_MIN {
        threads.min(segments.len()).max(1)
    } else {
        1
    };
    let segments = Arc::new(segments);
    (0..n)
        .map(|part| {
            let segments = segments.clone();
            TablePart {
                table: table.id(),
                part: part as u32,
                produce: Box::new(move |sink| {
                    for segment in segments.iter().skip(part).step_by(n) {
                        let image = segment.image();
                        sink(row_id(segment.no, 0), &image)?;
                        if let Some(mask) = segment.live_mask(&snapshot) {
                            for offset in (0..mask.len()).filter(|&i| !mask.value(i)) {
                                sink(row_id(segment.no, offset as u32), &[])?;
                            }
                        }
                    }
                    Ok(())
                }),
            }
        })
        .collect()
}
