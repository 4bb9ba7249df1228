//! Writes to column tables. Inserted rows become new segments of the statement's own (see
//! `shoal_storage::column`); UPDATE and DELETE first take the table's write lock, then find their
//! targets with DataFusion (the scan adds each row's id), then delete them and, for UPDATE,
//! append the new versions as segments. Column tables have no indexes, so there is no unique
//! or foreign-key checking to do; NOT NULL and CHECK constraints are checked per row. All of
//! them yield every 1024 rows and after each segment stored, as row-table writes do, so a big
//! one does not hold up the other connections of its connection's thread.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StringArray, UInt64Array};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Accumulator;
use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog::TableDef;
use shoal_storage::catalog_triggers::{TriggerEvent, TriggerTiming};
use shoal_storage::column::SEGMENT_MAX_ROWS;
use shoal_storage::types::Value;
use shoal_storage::{ColumnStats, ColumnTable, StorageError, Transaction};

use super::{
    assignment_columns, batch_rows, finish_dml, qualified, quote_ident, run_sql_query, table_alias,
};
use crate::constraints;
use crate::error::{SqlError, SqlResult};
use crate::query::provider::{table_schema, ROW_POSITION_COLUMN};
use crate::routines::trigger::Triggers;
use crate::session::{Session, StatementResult};
use crate::timezone::TimeZone;
use crate::types::array_from_values;

/// Min, max and null count of each column of a segment's batch, for scan pruning.
pub fn segment_stats(batch: &RecordBatch) -> SqlResult<Vec<ColumnStats>> {
    batch.columns().iter().map(column_stats).collect()
}

/// Min, max and null count of one column of a segment. Text takes a path of its own: the
/// general one compares every value with a call to `memcmp`, which costs more than anything
/// else in a bulk load of a wide table.
pub fn column_stats(array: &ArrayRef) -> SqlResult<ColumnStats> {
    if let datafusion::arrow::datatypes::DataType::Dictionary(_, value_type) = array.data_type() {
        // Stats are of the plain values (what pruning compares with).
        let plain = datafusion::arrow::compute::cast(array, value_type)?;
        return column_stats(&plain);
    }
    if let Some(text) = array.as_any().downcast_ref::<StringArray>() {
        let (min, max) = text_min_max(text);
        return Ok(ColumnStats {
            min: Arc::new(StringArray::from(vec![min])),
            max: Arc::new(StringArray::from(vec![max])),
            null_count: array.null_count(),
        });
    }
    let one = |acc: &mut dyn Accumulator| -> SqlResult<ArrayRef> {
        acc.update_batch(std::slice::from_ref(array))?;
        Ok(acc.evaluate()?.to_array()?)
    };
    let min = one(&mut MinAccumulator::try_new(array.data_type())?)?;
    let max = one(&mut MaxAccumulator::try_new(array.data_type())?)?;
    Ok(ColumnStats {
        min,
        max,
        null_count: array.null_count(),
    })
}

/// The smallest and largest value in byte order (PostgreSQL's "C" collation, and what the
/// general min/max gives), None when all are NULL. Values are compared by their first eight
/// bytes as a big-endian number first, which settles most comparisons without a call.
fn text_min_max(text: &StringArray) -> (Option<&str>, Option<&str>) {
    let mut values = text.iter().flatten().map(|v| (PrefixKey::of(v), v));
    let Some(first) = values.next() else {
        return (None, None);
    };
    let (mut min, mut max) = (first, first);
    for v in values {
        if PrefixKey::order(v, min).is_lt() {
            min = v;
        }
        if PrefixKey::order(v, max).is_gt() {
            max = v;
        }
    }
    (Some(min.1), Some(max.1))
}

/// A text value's first eight bytes as a big-endian number (zero-padded): a smaller key
/// means a smaller value, and for values of up to eight bytes the key and the length decide.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct PrefixKey(u64);

impl PrefixKey {
    fn of(s: &str) -> Self {
        let mut prefix = [0u8; 8];
        let n = s.len().min(8);
        prefix[..n].copy_from_slice(&s.as_bytes()[..n]);
        PrefixKey(u64::from_be_bytes(prefix))
    }

    fn order((ka, a): (PrefixKey, &str), (kb, b): (PrefixKey, &str)) -> std::cmp::Ordering {
        // Equal keys of short values: one is the other plus NUL bytes, so the shorter is less.
        ka.cmp(&kb)
            .then_with(|| match a.len() <= 8 && b.len() <= 8 {
                true => a.len().cmp(&b.len()),
                false => a.cmp(b),
            })
    }
}

/// The most array bytes a segment that INSERT or UPDATE makes holds; rows narrower than 64 bytes
/// fill `SEGMENT_MAX_ROWS` first. A segment's image is one redo record, which a replication
/// group sends a follower in one append, to be on its disk within the heartbeat interval.
const SEGMENT_BYTES_MAX: usize = 4 << 20;

/// Builds one segment from rows of the table's types (at most `SEGMENT_MAX_ROWS`).
fn segment_batch(def: &TableDef, rows: &[Vec<Value>]) -> SqlResult<RecordBatch> {
    debug_assert!(rows.len() <= SEGMENT_MAX_ROWS);
    let arrays: Vec<ArrayRef> = def
        .columns
        .iter()
        .enumerate()
        .map(|(c, col)| array_from_values(&col.data_type, rows.iter().map(|r| &r[c])))
        .collect();
    Ok(RecordBatch::try_new(table_schema(def), arrays)?)
}

/// Appends rows (already checked against the table's constraints) as new segments of at most
/// `SEGMENT_MAX_ROWS` rows and about `SEGMENT_BYTES_MAX` bytes.
fn append_rows(
    txn: &mut Transaction,
    def: &TableDef,
    table: &Arc<ColumnTable>,
    rows: &[Vec<Value>],
) -> SqlResult<()> {
    let mut rows_per_segment = SEGMENT_MAX_ROWS;
    let mut rest = rows;
    while !rest.is_empty() {
        let take = rest.len().min(rows_per_segment);
        let segment = segment_batch(def, &rest[..take])?;
        let bytes = segment.get_array_memory_size();
        if bytes > SEGMENT_BYTES_MAX && take > 1 {
            // Wide rows: fewer per segment from here on (strictly fewer, so this ends).
            rows_per_segment = (take * SEGMENT_BYTES_MAX / bytes).clamp(1, take - 1);
            continue;
        }
        let stats = segment_stats(&segment)?;
        table.append(txn, segment, stats)?;
        rest = &rest[take..];
    }
    Ok(())
}

/// Rows a statement with row triggers writes to a column table one at a time. They are
/// appended a segment at a time, except that a BEFORE ROW trigger sees the rows written before
/// its own, as PostgreSQL's do: `before_trigger` appends what is pending first.
pub(crate) struct RowAppender<'a> {
    def: &'a TableDef,
    table: &'a Arc<ColumnTable>,
    pending: Vec<Vec<Value>>,
    /// The table has BEFORE ROW triggers for the statement's event.
    before_row_triggers: bool,
}

impl<'a> RowAppender<'a> {
    pub fn new(def: &'a TableDef, table: &'a Arc<ColumnTable>, triggers: &Triggers) -> Self {
        RowAppender {
            def,
            table,
            pending: Vec::new(),
            before_row_triggers: triggers.has_before_row(),
        }
    }

    /// Called before the BEFORE ROW triggers of the next row fire.
    pub fn before_trigger(&mut self, txn: &mut Transaction) -> SqlResult<()> {
        match self.before_row_triggers {
            true => self.flush(txn),
            false => Ok(()),
        }
    }

    pub fn push(&mut self, txn: &mut Transaction, row: Vec<Value>) -> SqlResult<()> {
        self.pending.push(row);
        match self.pending.len() >= SEGMENT_MAX_ROWS {
            true => self.flush(txn),
            false => Ok(()),
        }
    }

    pub fn flush(&mut self, txn: &mut Transaction) -> SqlResult<()> {
        append_rows(
            txn,
            self.def,
            self.table,
            &std::mem::take(&mut self.pending),
        )
    }
}

/// An INSERT into a column table with triggers: each row goes through the BEFORE ROW triggers
/// (which may change or skip it) and the table's constraints, then the AFTER triggers fire
/// for the rows written. Returns how many rows were stored, and the rows if `keep_rows`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn insert_batches_with_triggers(
    session: &mut Session,
    txn: &mut Transaction,
    def: &TableDef,
    table: &Arc<ColumnTable>,
    batches: &[RecordBatch],
    zone: &TimeZone,
    triggers: &Triggers,
    keep_rows: bool,
) -> SqlResult<(usize, Vec<Vec<Value>>)> {
    triggers
        .statement(session, txn, TriggerTiming::Before)
        .await?;
    let mut appender = RowAppender::new(def, table, triggers);
    let (mut stored, mut kept, mut after_rows) = (0, Vec::new(), Vec::new());
    for (i, row) in batch_rows(batches, def, 0, zone)?.into_iter().enumerate() {
        super::yield_between_rows(i).await;
        appender.before_trigger(txn)?;
        let Some(row) = triggers.before_row(session, txn, None, Some(row)).await? else {
            continue;
        };
        constraints::check_row(session, txn, def, &row).await?;
        if triggers.keeps_rows() {
            after_rows.push((None, Some(row.clone())));
        }
        if keep_rows {
            kept.push(row.clone());
        }
        appender.push(txn, row)?;
        stored += 1;
    }
    appender.flush(txn)?;
    triggers.after_statement(session, txn, after_rows).await?;
    Ok((stored, kept))
}

/// Stores an INSERT's result `batches` as new segments of full size, checking each segment's
/// rows against the table's constraints first. Rows are converted a result batch at a time and
/// a segment is built and appended as soon as it is full, with a yield after each step: a big
/// INSERT ... SELECT does not hold up the other connections of this one's thread. Returns how
/// many rows were stored, and the rows themselves if `keep_rows` (for RETURNING).
pub(super) async fn insert_batches(
    session: &Session,
    txn: &mut Transaction,
    def: &TableDef,
    table: &Arc<ColumnTable>,
    batches: &[RecordBatch],
    zone: &TimeZone,
    keep_rows: bool,
) -> SqlResult<(usize, Vec<Vec<Value>>)> {
    let (mut stored, mut kept) = (0, Vec::new());
    let mut pending: Vec<Vec<Value>> = Vec::new();
    for (i, batch) in batches.iter().enumerate() {
        pending.extend(batch_rows(std::slice::from_ref(batch), def, 0, zone)?);
        tokio::task::yield_now().await;
        let last_batch = i + 1 == batches.len();
        while pending.len() >= SEGMENT_MAX_ROWS || (last_batch && !pending.is_empty()) {
            let rest = pending.split_off(pending.len().min(SEGMENT_MAX_ROWS));
            let rows = std::mem::replace(&mut pending, rest);
            constraints::check_rows(session, txn, def, &rows)
                .await
                .map_err(|(_, e)| e)?;
            append_rows(txn, def, table, &rows)?;
            stored += rows.len();
            if keep_rows {
                kept.extend(rows);
            }
            tokio::task::yield_now().await;
        }
    }
    Ok((stored, kept))
}

/// Takes the table's write lock, waiting for the transaction that holds it, and then a fresh
/// statement snapshot (READ COMMITTED; REPEATABLE READ keeps its own), so the statement sees
/// every change the previous holder committed.
async fn lock_for_write(
    session: &Session,
    txn: &mut Transaction,
    table: &Arc<ColumnTable>,
) -> SqlResult<shoal_storage::Snapshot> {
    loop {
        match table.lock_for_write(txn) {
            Ok(()) => break,
            Err(StorageError::WouldBlock { holder }) => {
                session.wait_for_row_holder(txn, holder).await?
            }
            Err(e) => return Err(e.into()),
        }
    }
    // The previous holder released the lock once stamped; its commit may not be under the
    // stable watermark yet (an earlier commit still stamping). Wait for it, briefly.
    let db = &session.engine.db;
    while db.stable_ts() < table.last_delete_ts() {
        tokio::task::yield_now().await;
    }
    let snap = db.statement_snapshot(txn);
    *session.scope.snapshot.lock() = snap;
    Ok(snap)
}

/// Runs the target query of an UPDATE/DELETE: row id first, then every column of the table
/// (the old row), then `extra`.
async fn targets(
    session: &Session,
    def: &TableDef,
    alias: &str,
    extra: &[String],
    selection: Option<&ast::Expr>,
) -> SqlResult<Vec<RecordBatch>> {
    let mut sql = format!("SELECT {}.{}", quote_ident(alias), ROW_POSITION_COLUMN);
    for c in &def.columns {
        sql.push_str(&format!(
            ", {}.{}",
            quote_ident(alias),
            quote_ident(&c.name)
        ));
    }
    for (i, e) in extra.iter().enumerate() {
        sql.push_str(&format!(", {e} AS \"__shoal_extra_{i}\""));
    }
    sql.push_str(&format!(
        " FROM {} AS {}",
        qualified(def),
        quote_ident(alias)
    ));
    if let Some(s) = selection {
        sql.push_str(&format!(" WHERE {s}"));
    }
    let capture = Arc::new(parking_lot::Mutex::new(Vec::new()));
    *session.scope.dml_capture.lock() = vec![(def.oid, capture)];
    let result = run_sql_query(session, &sql).await;
    session.scope.dml_capture.lock().clear();
    result
}

fn row_ids(b: &RecordBatch) -> &UInt64Array {
    b.column(0)
        .as_any()
        .downcast_ref::<UInt64Array>()
        .expect("row id column")
}

/// TRUNCATE of a column table: deletes every row visible to the statement (transactional, as
/// TRUNCATE of a row table is in Shoal).
pub async fn delete_all_rows(
    session: &Session,
    txn: &mut Transaction,
    def: &TableDef,
    table: &Arc<ColumnTable>,
) -> SqlResult<()> {
    let snap = lock_for_write(session, txn, table).await?;
    let batches = targets(session, def, &def.name, &[], None).await?;
    let mut done = 0;
    for b in &batches {
        for r in 0..b.num_rows() {
            super::yield_between_rows(done).await;
            done += 1;
            table.delete(txn, &snap, row_ids(b).value(r))?;
        }
    }
    Ok(())
}

pub async fn delete(
    session: &mut Session,
    txn: &mut Transaction,
    del: &ast::Delete,
    def: Arc<TableDef>,
    table: Arc<ColumnTable>,
    alias: Option<String>,
) -> SqlResult<StatementResult> {
    if del.using.is_some() {
        return Err(SqlError::unsupported("DELETE ... USING on a column table"));
    }
    let alias = alias.unwrap_or_else(|| def.name.clone());
    let triggers = Triggers::of(&def, TriggerEvent::Delete, &[]);
    if let Some(t) = &triggers {
        t.statement(session, txn, TriggerTiming::Before).await?;
    }
    let snap = lock_for_write(session, txn, &table).await?;
    let batches = targets(session, &def, &alias, &[], del.selection.as_ref()).await?;
    let (mut written, mut done, mut after_rows) = (Vec::new(), 0, Vec::new());
    for b in &batches {
        let rows = batch_rows(
            std::slice::from_ref(b),
            &def,
            1,
            session.settings.time_zone(),
        )?;
        for (r, row) in rows.into_iter().enumerate() {
            super::yield_between_rows(done).await;
            done += 1;
            if let Some(t) = &triggers {
                let kept = t.before_row(session, txn, Some(&row), None).await?;
                if kept.is_none() {
                    continue;
                }
            }
            if table.delete(txn, &snap, row_ids(b).value(r))? {
                if triggers.as_ref().is_some_and(Triggers::keeps_rows) {
                    after_rows.push((Some(row.clone()), None));
                }
                written.push(row);
            }
        }
    }
    if let Some(t) = &triggers {
        t.after_statement(session, txn, after_rows).await?;
    }
    finish_dml(
        session,
        &def.columns,
        &alias,
        "DELETE",
        written,
        del.returning.as_deref(),
        None,
    )
    .await
}

pub async fn update(
    session: &mut Session,
    txn: &mut Transaction,
    upd: &ast::Update,
    def: Arc<TableDef>,
    table: Arc<ColumnTable>,
) -> SqlResult<StatementResult> {
    if upd.from.is_some() {
        return Err(SqlError::unsupported("UPDATE ... FROM on a column table"));
    }
    let (_, alias) = table_alias(&upd.table)?;
    let alias = alias.unwrap_or_else(|| def.name.clone());
    let assignments = assignment_columns(&def, &upd.assignments)?;
    let set_columns: Vec<String> = assignments
        .iter()
        .map(|(c, _)| def.columns[*c].name.clone())
        .collect();
    let triggers = Triggers::of(&def, TriggerEvent::Update, &set_columns);
    if let Some(t) = &triggers {
        return update_with_triggers(session, txn, upd, &def, &table, &alias, t).await;
    }
    let snap = lock_for_write(session, txn, &table).await?;
    let batches = update_targets(session, &def, &alias, upd, &assignments).await?;
    let (mut written, mut done) = (Vec::new(), 0);
    for (b, rows) in &batches {
        for (r, (_, row)) in rows.iter().enumerate() {
            super::yield_between_rows(done).await;
            done += 1;
            constraints::check_row(session, txn, &def, row).await?;
            if table.delete(txn, &snap, row_ids(b).value(r))? {
                written.push(row.clone());
            }
        }
    }
    for segment_rows in written.chunks(SEGMENT_MAX_ROWS) {
        append_rows(txn, &def, &table, segment_rows)?;
        tokio::task::yield_now().await;
    }
    finish_dml(
        session,
        &def.columns,
        &alias,
        "UPDATE",
        written,
        upd.returning.as_deref(),
        None,
    )
    .await
}

/// The rows an UPDATE of a column table finds, per target batch: (old row, new row).
type UpdateTargets = Vec<(RecordBatch, Vec<(Vec<Value>, Vec<Value>)>)>;

async fn update_targets(
    session: &Session,
    def: &TableDef,
    alias: &str,
    upd: &ast::Update,
    assignments: &[(usize, String)],
) -> SqlResult<UpdateTargets> {
    let extra: Vec<String> = assignments.iter().map(|(_, e)| e.clone()).collect();
    let batches = targets(session, def, alias, &extra, upd.selection.as_ref()).await?;
    let width = def.columns.len();
    let zone = session.settings.time_zone();
    let mut found = Vec::with_capacity(batches.len());
    for b in batches {
        let old_rows = batch_rows(std::slice::from_ref(&b), def, 1, zone)?;
        let mut rows: Vec<(Vec<Value>, Vec<Value>)> =
            old_rows.into_iter().map(|r| (r.clone(), r)).collect();
        for (i, (col, _)) in assignments.iter().enumerate() {
            let c = &def.columns[*col];
            let values =
                super::column_values(b.column(1 + width + i), &c.data_type, &c.name, zone)?;
            for ((_, row), v) in rows.iter_mut().zip(values) {
                row[*col] = v;
            }
        }
        found.push((b, rows));
    }
    Ok(found)
}

/// An UPDATE of a column table with triggers: the statement triggers around it, each row
/// through the BEFORE ROW triggers (which may change or skip it), the AFTER triggers for the
/// rows written.
async fn update_with_triggers(
    session: &mut Session,
    txn: &mut Transaction,
    upd: &ast::Update,
    def: &TableDef,
    table: &Arc<ColumnTable>,
    alias: &str,
    triggers: &Triggers,
) -> SqlResult<StatementResult> {
    let assignments = assignment_columns(def, &upd.assignments)?;
    triggers
        .statement(session, txn, TriggerTiming::Before)
        .await?;
    let snap = lock_for_write(session, txn, table).await?;
    let batches = update_targets(session, def, alias, upd, &assignments).await?;
    let mut appender = RowAppender::new(def, table, triggers);
    let (mut written, mut done, mut after_rows) = (Vec::new(), 0, Vec::new());
    for (b, rows) in batches {
        for (r, (old, new)) in rows.into_iter().enumerate() {
            super::yield_between_rows(done).await;
            done += 1;
            appender.before_trigger(txn)?;
            let Some(new) = triggers
                .before_row(session, txn, Some(&old), Some(new))
                .await?
            else {
                continue;
            };
            constraints::check_row(session, txn, def, &new).await?;
            if !table.delete(txn, &snap, row_ids(&b).value(r))? {
                continue;
            }
            if triggers.keeps_rows() {
                after_rows.push((Some(old), Some(new.clone())));
            }
            written.push(new.clone());
            appender.push(txn, new)?;
        }
    }
    appender.flush(txn)?;
    triggers.after_statement(session, txn, after_rows).await?;
    finish_dml(
        session,
        &def.columns,
        alias,
        "UPDATE",
        written,
        upd.returning.as_deref(),
        None,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text path gives what the general min/max accumulators give.
    #[test]
    fn text_stats_match_the_general_path() {
        let general = |a: &ArrayRef| -> (ArrayRef, ArrayRef) {
            let one = |acc: &mut dyn Accumulator| {
                acc.update_batch(std::slice::from_ref(a)).unwrap();
                acc.evaluate().unwrap().to_array().unwrap()
            };
            (
                one(&mut MinAccumulator::try_new(a.data_type()).unwrap()),
                one(&mut MaxAccumulator::try_new(a.data_type()).unwrap()),
            )
        };
        let cases: Vec<Vec<Option<&str>>> = vec![
            vec![None, None],
            vec![Some("")],
            vec![Some("b"), None, Some("a"), Some("a\0"), Some("")],
            vec![Some("a\0"), Some("a"), Some("a\0\0")],
            vec![
                Some("Manhattan"),
                Some("Manhattam"),
                Some("Manhattan!"),
                Some("Bronx"),
            ],
            vec![
                Some("0101000020E61000AB"),
                Some("0101000020E61000AA"),
                Some("0101000020E6"),
            ],
            vec![Some("ü"), Some("z"), Some("zz"), Some("\u{7f}")],
        ];
        for values in cases {
            let a: ArrayRef = Arc::new(StringArray::from(values.clone()));
            let stats = column_stats(&a).unwrap();
            let (min, max) = general(&a);
            assert_eq!(stats.min.as_ref(), min.as_ref(), "min of {values:?}");
            assert_eq!(stats.max.as_ref(), max.as_ref(), "max of {values:?}");
            assert_eq!(stats.null_count, a.null_count());
        }
    }
}
