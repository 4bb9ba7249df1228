//! Merging a column table's small segments. Every inserting statement appends segments of its
//! own, so a table fed by single-row INSERTs holds one segment per row, and a segment's fixed
//! costs (an Arrow array and a min/max pair per column, the MVCC stamps) dwarf one row: ~7 KB of
//! memory per row and scans that walk thousands of tiny batches. Segments that UPDATE and
//! DELETE have emptied to half or less are merged the same way, so their deleted rows' memory
//! comes back instead of staying until every row of the segment is gone. A merge is an ordinary
//! transaction: it copies the live rows of a run of small segments into one new segment and
//! deletes them from the old ones. Snapshots taken before it commits see the old rows, later ones
//! the new; the redo log records it like any other write, and GC drops the emptied segments once
//! no snapshot can see them (`ColumnTable::remove_dead_segments`).
//!
//! Like any delete, the merge makes a REPEATABLE READ transaction that started before it and
//! then writes one of the moved rows fail with 40001. It runs in the background once a table
//! has `BACKGROUND_MERGE_SEGMENTS` small segments or one half-deleted segment (rare enough that
//! this stays rare), and on VACUUM for any two small segments or one half-deleted; it skips a
//! table whose write lock another transaction holds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::BooleanArray;
use datafusion::arrow::compute::{concat_batches, filter_record_batch};
use datafusion::arrow::record_batch::RecordBatch;
use shoal_storage::column::{row_id, SEGMENT_MAX_ROWS};
use shoal_storage::{ColumnTable, Database, IsolationLevel, Segment, StorageError};

use super::column::segment_stats;
use crate::error::SqlResult;

/// Segments with fewer rows than this are merged.
pub const SMALL_SEGMENT_ROWS: usize = 4096;
/// The background merges a table once it has this many small segments (~2 MB of overhead).
pub const BACKGROUND_MERGE_SEGMENTS: usize = 256;
/// VACUUM merges any run of at least this many.
pub const VACUUM_MERGE_SEGMENTS: usize = 2;
/// How long a merge waits for the previous holder of the table's lock to become visible.
const STABLE_WAIT_MAX: Duration = Duration::from_secs(1);

/// What one merge did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MergeReport {
    pub segments_merged: usize,
    pub rows_moved: usize,
}

/// Merges runs of small segments of every column table that has at least `min_segments` of
/// them (at most one new segment per table per call). Tables whose write lock is taken, or
/// that are dropped meanwhile, are skipped.
pub fn merge_small_segments(db: &Arc<Database>, min_segments: usize) -> SqlResult<MergeReport> {
    let mut total = MergeReport::default();
    for table in db.column_tables() {
        let r = match merge_table(db, &table, min_segments) {
            // Dropped meanwhile (StorageError::TableDropped): nothing left to merge.
            Err(e) if e.code == "42P01" => MergeReport::default(),
            other => other?,
        };
        total.segments_merged += r.segments_merged;
        total.rows_moved += r.rows_moved;
    }
    Ok(total)
}

/// Whether a segment is at least half deleted by committed deletes, but not wholly (GC drops
/// those once no snapshot sees them).
fn is_half_deleted(segment: &Segment) -> bool {
    let deleted = segment.deleted_rows();
    deleted * 2 >= segment.rows() && deleted < segment.rows()
}

/// Merges the oldest small or half-deleted segments of `table` into one new segment (up to
/// `SEGMENT_MAX_ROWS` rows), if it has at least `min_segments` small ones or one half-deleted.
fn merge_table(
    db: &Arc<Database>,
    table: &Arc<ColumnTable>,
    min_segments: usize,
) -> SqlResult<MergeReport> {
    let segments = table.segments();
    let small_count = segments
        .iter()
        .filter(|s| s.rows() < SMALL_SEGMENT_ROWS)
        .count();
    let half_deleted = segments.iter().any(|s| is_half_deleted(s));
    drop(segments);
    if small_count < min_segments.max(2) && !half_deleted {
        return Ok(MergeReport::default());
    }
    let mut txn = db.begin(IsolationLevel::ReadCommitted);
    match table.lock_for_write(&mut txn) {
        Ok(()) => {}
        // Someone is writing the table: try again on the next pass.
        Err(StorageError::WouldBlock { .. }) => return Ok(MergeReport::default()),
        Err(e) => return Err(e.into()),
    }
    // As for any writer that deletes: the previous holder's deletes must be under the
    // watermark before the snapshot is taken (see `dml::column::lock_for_write`).
    let waited = Instant::now();
    while db.stable_ts() < table.last_delete_ts() {
        if waited.elapsed() > STABLE_WAIT_MAX {
            return Ok(MergeReport::default());
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let snap = db.statement_snapshot(&mut txn);
    let mut picked: Vec<(Arc<Segment>, Option<BooleanArray>, RecordBatch)> = Vec::new();
    let mut rows = 0;
    for segment in table.segments() {
        let candidate = segment.rows() < SMALL_SEGMENT_ROWS || is_half_deleted(&segment);
        if !candidate || !segment.visible_to(&snap) {
            continue;
        }
        let mask = segment.live_mask(&snap);
        let live = match &mask {
            None => segment.plain_batch(),
            Some(mask) => filter_record_batch(&segment.plain_batch(), mask)?,
        };
        if live.num_rows() == 0 {
            continue; // Nothing to move; GC drops it once it is dead for everyone.
        }
        if rows + live.num_rows() > SEGMENT_MAX_ROWS {
            break;
        }
        rows += live.num_rows();
        picked.push((segment, mask, live));
    }
    // One segment alone is worth rewriting only to drop its deleted rows.
    let worth_it = match picked.as_slice() {
        [] => false,
        [(one, _, _)] => is_half_deleted(one),
        _ => true,
    };
    if !worth_it {
        return Ok(MergeReport::default());
    }
    let merged = concat_batches(&table.plain_schema(), picked.iter().map(|(_, _, b)| b))?;
    debug_assert_eq!(merged.num_rows(), rows);
    let stats = segment_stats(&merged)?;
    table.append_rewritten(&mut txn, merged, stats)?;
    for (segment, mask, _) in &picked {
        for offset in 0..segment.rows() as u32 {
            if mask.as_ref().is_none_or(|m| m.value(offset as usize)) {
                table.delete(&mut txn, &snap, row_id(segment.no, offset))?;
            }
        }
    }
    db.commit(txn)?;
    Ok(MergeReport {
        segments_merged: picked.len(),
        rows_moved: rows,
    })
}
