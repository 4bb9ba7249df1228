//! UPDATE and DELETE: a generated query finds the target rows (their handles, through the
//! table scan's row capture) and, for UPDATE, computes the new values; each row is then written
//! through the storage API, re-evaluated on its newest version when READ COMMITTED finds it
//! changed by a concurrent commit.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{Array, UInt64Array};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast;
use parking_lot::Mutex;
use shoal_storage::catalog::{Oid, TableDef};
use shoal_storage::table::{RowRef, RowTable, WriteOutcome};
use shoal_storage::types::Value;
use shoal_storage::{Snapshot, StorageError, Transaction};

use super::{
    assignment_columns, column_values, finish_dml, qualified, quote_ident, resolve_store,
    returning, row_as_values_sql, run_sql_query, run_target_query, table_alias,
    unique_violation_named, TableStore,
};
use crate::constraints;
use crate::error::{SqlError, SqlResult};
use crate::interrupt::RowWait;
use crate::query::provider::{RowCapture, ROW_POSITION_COLUMN};
use crate::routines::per_row::RowCall;
use crate::routines::trigger::{Triggers, WrittenRow};
use crate::session::{Session, StatementResult};
use crate::timezone::TimeZone;
use shoal_storage::catalog_triggers::{TriggerEvent, TriggerTiming};

/// The SELECT that finds an UPDATE/DELETE's target rows: row position first, then `extra`.
pub(super) fn target_query_sql(
    def: &TableDef,
    alias: &str,
    extra: &[String],
    from: &[ast::TableWithJoins],
    selection: Option<&ast::Expr>,
) -> String {
    let mut sql = format!("SELECT {}.{}", quote_ident(alias), ROW_POSITION_COLUMN);
    push_extra_columns(&mut sql, extra);
    sql.push_str(&format!(
        " FROM {} AS {}",
        qualified(def),
        quote_ident(alias)
    ));
    for f in from {
        sql.push_str(&format!(", {f}"));
    }
    if let Some(s) = selection {
        sql.push_str(&format!(" WHERE {s}"));
    }
    sql
}

/// Appends `extra` to a SELECT list. Each expression gets a name of its own, since DataFusion
/// refuses two output columns of the same name (`SET a = 1, b = 1`); the statement's result
/// columns are named elsewhere. A `rel.*` item keeps its columns' names.
fn push_extra_columns(sql: &mut String, extra: &[String]) {
    for (i, e) in extra.iter().enumerate() {
        sql.push_str(", ");
        sql.push_str(e);
        if e != "*" && !e.ends_with(".*") {
            sql.push_str(&format!(" AS \"__shoal_extra_{i}\""));
        }
    }
}

/// Runs the target query with the table's scan capturing row handles.
pub(super) async fn find_targets(
    session: &Session,
    def: &TableDef,
    sql: &str,
    whose: Targets,
) -> SqlResult<(Vec<RecordBatch>, Vec<RowRef>)> {
    let (batches, mut rows) = find_rows(session, &[def.oid], sql, whose).await?;
    Ok((batches, rows.pop().expect("one table's rows")))
}

/// Whose rows a target query finds, which decides whether its plan may be kept.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Targets {
    /// The statement's own: its query is the same text at every execution.
    Statement,
    /// A foreign key action's, whose query has the referenced key's values written in.
    Action,
}

/// Runs `sql` with the scans of the tables `oids` capturing row handles: the row position
/// column of a scan of `oids[i]` indexes the i-th vector returned (a table scanned twice, a
/// self-join, records into one vector).
pub(super) async fn find_rows(
    session: &Session,
    oids: &[Oid],
    sql: &str,
    whose: Targets,
) -> SqlResult<(Vec<RecordBatch>, Vec<Vec<RowRef>>)> {
    let captures: Vec<(Oid, RowCapture)> = oids
        .iter()
        .map(|oid| (*oid, Arc::new(Mutex::new(Vec::new()))))
        .collect();
    *session.scope.dml_capture.lock() = captures.clone();
    let result = match whose {
        Targets::Statement => run_target_query(session, sql).await,
        Targets::Action => run_sql_query(session, sql).await,
    };
    session.scope.dml_capture.lock().clear();
    let batches = result?;
    let rows = captures
        .iter()
        .map(|(_, c)| std::mem::take(&mut *c.lock()))
        .collect();
    Ok((batches, rows))
}

/// One UPDATE or DELETE: the target table and the parts of the statement that decide which
/// rows it writes and how, kept together so that a READ COMMITTED re-check can run them again.
pub(super) struct Modification<'a> {
    pub def: &'a TableDef,
    pub table: &'a RowTable,
    pub alias: &'a str,
    /// UPDATE's SET: each column and the SQL of its new value. Empty for DELETE.
    pub assignments: &'a [(usize, String)],
    /// The SET values that are calls to run for each row, by assignment: the target query
    /// gives their arguments, after everything else (see `routines::per_row`).
    pub row_calls: &'a [(usize, RowCall)],
    /// UPDATE's FROM or DELETE's USING.
    pub from: &'a [ast::TableWithJoins],
    pub selection: Option<&'a ast::Expr>,
    /// With FROM/USING, the RETURNING items as computed in the target query (see
    /// `returning::over_join`); empty otherwise.
    pub returning: &'a [String],
    /// The session's time zone, for the new values' conversions.
    pub zone: TimeZone,
}

impl Modification<'_> {
    /// The target query's columns after the row position: SET values, then RETURNING items.
    pub(super) fn extra_columns(&self) -> Vec<String> {
        let mut extra: Vec<String> = self
            .assignments
            .iter()
            .enumerate()
            .map(|(i, (_, e))| match self.row_call(i) {
                // Set as each row is written.
                Some(_) => "NULL".to_string(),
                None => e.clone(),
            })
            .collect();
        extra.extend(self.returning.iter().cloned());
        for (_, call) in self.row_calls {
            extra.extend(call.args_sql.iter().cloned());
        }
        extra
    }

    fn row_call(&self, assignment: usize) -> Option<&RowCall> {
        self.row_calls
            .iter()
            .find(|(i, _)| *i == assignment)
            .map(|(_, c)| c)
    }

    /// The target batch's columns of the per-row calls' arguments: the last ones.
    fn row_call_columns(&self) -> usize {
        self.row_calls.iter().map(|(_, c)| c.args_sql.len()).sum()
    }

    /// Sets the values of the SET columns that are per-row calls in `row` (row `r` of target
    /// batch `b`), calling each function.
    async fn run_row_calls(
        &self,
        session: &mut Session,
        txn: &mut Transaction,
        b: &RecordBatch,
        r: usize,
        row: &mut [Value],
    ) -> SqlResult<()> {
        let mut first = b.num_columns() - self.row_call_columns();
        for (i, call) in self.row_calls {
            let n = call.args_sql.len();
            let col = self.assignments[*i].0;
            let t = &self.def.columns[col].data_type;
            row[col] = call
                .run(session, txn, &b.columns()[first..first + n], r, t)
                .await?;
            first += n;
        }
        Ok(())
    }

    /// New values of the assigned columns, one vector per assignment, from the columns that
    /// follow the first `skip` columns of a target or re-check batch.
    pub(super) fn new_values(&self, b: &RecordBatch, skip: usize) -> SqlResult<Vec<Vec<Value>>> {
        let mut out = Vec::with_capacity(self.assignments.len());
        for (i, (col, _)) in self.assignments.iter().enumerate() {
            let c = &self.def.columns[*col];
            out.push(column_values(
                b.column(skip + i),
                &c.data_type,
                &c.name,
                &self.zone,
            )?);
        }
        Ok(out)
    }

    /// The RETURNING values of row `r` of a target or re-check batch: all its columns after
    /// the SET values (a wildcard item gives several).
    fn returned(&self, b: &RecordBatch, skip: usize, r: usize) -> SqlResult<Vec<ScalarValue>> {
        if self.returning.is_empty() {
            return Ok(Vec::new());
        }
        let first = skip + self.assignments.len();
        (first..b.num_columns() - self.row_call_columns())
            .map(|c| Ok(ScalarValue::try_from_array(b.column(c), r)?))
            .collect()
    }
}

/// The FROM list of an UPDATE.
pub(super) fn update_from(upd: &ast::Update) -> Vec<ast::TableWithJoins> {
    match &upd.from {
        Some(ast::UpdateTableFromKind::AfterSet(f))
        | Some(ast::UpdateTableFromKind::BeforeSet(f)) => f.clone(),
        None => vec![],
    }
}

/// The written rows and, with FROM/USING, their RETURNING values.
#[derive(Default)]
struct Written {
    rows: Vec<Vec<Value>>,
    returned: Vec<Vec<ScalarValue>>,
}

impl Written {
    fn push(&mut self, (row, returned): (Vec<Value>, Vec<ScalarValue>)) {
        self.rows.push(row);
        self.returned.push(returned);
    }

    async fn finish(
        self,
        session: &Session,
        m: &Modification<'_>,
        tag: &'static str,
        items: Option<&[ast::SelectItem]>,
    ) -> SqlResult<StatementResult> {
        match items {
            Some(items) if !m.from.is_empty() => {
                returning::finish_joined(session, m, tag, items, self.returned).await
            }
            _ => {
                finish_dml(
                    session,
                    &m.def.columns,
                    m.alias,
                    tag,
                    self.rows,
                    items,
                    None,
                )
                .await
            }
        }
    }
}

pub async fn update(
    session: &mut Session,
    txn: &mut Transaction,
    upd: ast::Update,
) -> SqlResult<StatementResult> {
    if let Some(done) = Box::pin(super::instead::update(session, txn, &upd)).await? {
        return Ok(done);
    }
    let upd = super::view::update_onto_table(session, upd)?;
    let (name, alias) = table_alias(&upd.table)?;
    let (def, table) = match resolve_store(session, &name)? {
        (def, TableStore::Row(table)) => (def, table),
        (def, TableStore::Column(table)) => {
            return super::column::update(session, txn, &upd, def, table).await
        }
    };
    let alias = alias.unwrap_or_else(|| def.name.clone());
    let assignments = assignment_columns(&def, &upd.assignments)?;
    let mut row_calls = Vec::new();
    if !session.engine.catalog.read().routines.is_empty() {
        for (i, (_, value)) in assignments.iter().enumerate() {
            if let Some(call) = RowCall::of(session, value)? {
                row_calls.push((i, call));
            }
        }
    }
    let from = update_from(&upd);
    let returning = match &upd.returning {
        Some(items) if !from.is_empty() => {
            returning::over_join(&def, &alias, items, &assignments, &from)?
        }
        _ => Vec::new(),
    };
    let m = Modification {
        zone: session.settings.time_zone().clone(),
        def: &def,
        table: &table,
        alias: &alias,
        assignments: &assignments,
        row_calls: &row_calls,
        from: &from,
        selection: upd.selection.as_ref(),
        returning: &returning,
    };
    let set_columns: Vec<String> = assignments
        .iter()
        .map(|(c, _)| def.columns[*c].name.clone())
        .collect();
    let triggers = Triggers::of(&def, TriggerEvent::Update, &set_columns);
    if let Some(t) = &triggers {
        t.statement(session, txn, TriggerTiming::Before).await?;
    }
    let mut after_rows: Vec<WrittenRow> = Vec::new();
    let sql = target_query_sql(&def, &alias, &m.extra_columns(), &from, m.selection);
    let (batches, handles) = find_targets(session, &def, &sql, Targets::Statement).await?;
    let snap = session.scope.snapshot();
    let mut written = Written::default();
    let mut seen = HashSet::new();
    let mut rows_seen = 0;
    for b in &batches {
        let positions = row_positions(b);
        let new_values = m.new_values(b, 1)?;
        for r in 0..b.num_rows() {
            super::yield_between_rows(rows_seen).await;
            rows_seen += 1;
            let handle = &handles[positions.value(r) as usize];
            if !seen.insert(handle.row_id()) {
                continue; // UPDATE ... FROM joining several rows: the first one wins, as in PostgreSQL.
            }
            let Some(mut row) = table.read(handle, &snap) else {
                continue;
            };
            let old = triggers.as_ref().map(|_| row.clone());
            for (i, (col, _)) in assignments.iter().enumerate() {
                row[*col] = new_values[i][r].clone();
            }
            if !m.row_calls.is_empty() {
                Box::pin(m.run_row_calls(session, txn, b, r, &mut row)).await?;
            }
            if let (Some(t), Some(old)) = (&triggers, &old) {
                match t.before_row(session, txn, Some(old), Some(row)).await? {
                    Some(changed) => row = changed,
                    None => continue,
                }
            }
            let returned = m.returned(b, 1, r)?;
            if let Some(done) = update_one(session, txn, &m, handle, snap, row, returned).await? {
                if triggers.as_ref().is_some_and(Triggers::keeps_rows) {
                    after_rows.push((old, Some(done.0.clone())));
                }
                written.push(done);
            }
        }
    }
    if let Some(t) = &triggers {
        t.after_statement(session, txn, after_rows).await?;
    }
    written
        .finish(session, &m, "UPDATE", upd.returning.as_deref())
        .await
}

pub(super) fn row_positions(b: &RecordBatch) -> &UInt64Array {
    b.column(0)
        .as_any()
        .downcast_ref::<UInt64Array>()
        .expect("position column")
}

/// Writes one updated row; on a concurrent change re-evaluates the statement on the newest
/// version. Returns the row written and its RETURNING values, or None when it was skipped.
pub(super) async fn update_one(
    session: &Session,
    txn: &mut Transaction,
    m: &Modification<'_>,
    handle: &RowRef,
    mut snap: Snapshot,
    mut row: Vec<Value>,
    mut returned: Vec<ScalarValue>,
) -> SqlResult<Option<(Vec<Value>, Vec<ScalarValue>)>> {
    let def = m.def;
    let has_foreign_keys = constraints::has_foreign_keys(session, def);
    let mut waiting = RowWait::default();
    loop {
        // The version replaced: for the foreign keys on either side of the table.
        let old = if has_foreign_keys {
            m.table.read(handle, &snap)
        } else {
            None
        };
        constraints::check_row_with(session, def, &row, true).await?;
        match m.table.update(txn, handle, &snap, &row) {
            Ok(WriteOutcome::Done) => {
                // After the write, as PostgreSQL's check: the row may reference itself.
                constraints::check_foreign_keys(session, txn, def, &row, old.as_deref()).await?;
                if let Some(old) = old {
                    constraints::check_update_references(session, txn, def, &old, &row).await?;
                }
                return Ok(Some((row, returned)));
            }
            Ok(WriteOutcome::Changed { newest: None, .. }) => return Ok(None),
            Ok(WriteOutcome::Changed {
                newest: Some(newest),
                newest_snapshot,
            }) => {
                // READ COMMITTED: re-evaluate WHERE and SET on the newest committed version.
                let Some(again) = reevaluate(session, m, &newest).await? else {
                    return Ok(None);
                };
                (row, returned) = again;
                snap = newest_snapshot;
            }
            Err(StorageError::WouldBlock { holder }) => {
                waiting.wait(session, txn, handle, holder).await?
            }
            Err(StorageError::UniqueViolation {
                index_name,
                key_columns,
                key,
            }) => {
                let zone = session.settings.time_zone();
                let e = unique_violation_named(def, &index_name, &key_columns, &key, zone);
                return Err(e);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Re-runs the statement's WHERE, SET and joined RETURNING for one row version in place of
/// the target table: the new row and its RETURNING values, or None when it no longer
/// qualifies.
pub(super) async fn reevaluate(
    session: &Session,
    m: &Modification<'_>,
    newest: &[Value],
) -> SqlResult<Option<(Vec<Value>, Vec<ScalarValue>)>> {
    // A SET value that calls a function for each row cannot be called here (the re-check
    // holds the session shared): the update fails as REPEATABLE READ's would.
    if !m.row_calls.is_empty() {
        return Err(constraints::serialization_failure());
    }
    let mut sql = String::from("SELECT TRUE");
    push_extra_columns(&mut sql, &m.extra_columns());
    sql.push_str(&format!(
        " FROM {}",
        row_as_values_sql(&m.def.columns, newest, m.alias)
    ));
    for f in m.from {
        sql.push_str(&format!(", {f}"));
    }
    if let Some(s) = m.selection {
        sql.push_str(&format!(" WHERE {s}"));
    }
    sql.push_str(" LIMIT 1");
    let batches = run_sql_query(session, &sql).await?;
    let Some(b) = batches.iter().find(|b| b.num_rows() > 0) else {
        return Ok(None);
    };
    let b = b.slice(0, 1);
    let mut row = newest.to_vec();
    for (i, mut values) in m.new_values(&b, 1)?.into_iter().enumerate() {
        row[m.assignments[i].0] = values.remove(0);
    }
    Ok(Some((row, m.returned(&b, 1, 0)?)))
}

pub async fn delete(
    session: &mut Session,
    txn: &mut Transaction,
    del: ast::Delete,
) -> SqlResult<StatementResult> {
    // The foreign-key actions this statement's deletions queue (see `dml::referential`).
    let mark = session.pending_actions.mark();
    let done = delete_rows(session, txn, del, mark).await;
    if done.is_err() {
        session.pending_actions.forget_after(mark);
    }
    done
}

async fn delete_rows(
    session: &mut Session,
    txn: &mut Transaction,
    del: ast::Delete,
    mark: usize,
) -> SqlResult<StatementResult> {
    if let Some(done) = Box::pin(super::instead::delete(session, txn, &del)).await? {
        return Ok(done);
    }
    let del = super::view::delete_onto_table(session, del)?;
    let tables = match &del.from {
        ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
    };
    let target = tables
        .first()
        .ok_or_else(|| SqlError::syntax("DELETE needs a table"))?;
    let (name, alias) = table_alias(target)?;
    let (def, table) = match resolve_store(session, &name)? {
        (def, TableStore::Row(table)) => (def, table),
        (def, TableStore::Column(table)) => {
            return super::column::delete(session, txn, &del, def, table, alias).await
        }
    };
    let alias = alias.unwrap_or_else(|| def.name.clone());
    let using = del.using.clone().unwrap_or_default();
    let returning = match &del.returning {
        Some(items) if !using.is_empty() => returning::over_join(&def, &alias, items, &[], &using)?,
        _ => Vec::new(),
    };
    let m = Modification {
        zone: session.settings.time_zone().clone(),
        def: &def,
        table: &table,
        alias: &alias,
        assignments: &[],
        row_calls: &[],
        from: &using,
        selection: del.selection.as_ref(),
        returning: &returning,
    };
    let triggers = Triggers::of(&def, TriggerEvent::Delete, &[]);
    if let Some(t) = &triggers {
        t.statement(session, txn, TriggerTiming::Before).await?;
    }
    let mut after_rows: Vec<WrittenRow> = Vec::new();
    let sql = target_query_sql(&def, &alias, &m.extra_columns(), &using, m.selection);
    let (batches, handles) = find_targets(session, &def, &sql, Targets::Statement).await?;
    let snap = session.scope.snapshot();
    let mut written = Written::default();
    let mut seen = HashSet::new();
    let mut rows_seen = 0;
    for b in &batches {
        let positions = row_positions(b);
        for r in 0..b.num_rows() {
            super::yield_between_rows(rows_seen).await;
            rows_seen += 1;
            let handle = &handles[positions.value(r) as usize];
            if !seen.insert(handle.row_id()) {
                continue;
            }
            let Some(old) = table.read(handle, &snap) else {
                continue;
            };
            if let Some(t) = &triggers {
                if t.before_row(session, txn, Some(&old), None)
                    .await?
                    .is_none()
                {
                    continue;
                }
            }
            let kept_old = triggers.as_ref().map(|_| old.clone());
            let returned = m.returned(b, 1, r)?;
            if let Some(done) = delete_one(session, txn, &m, handle, snap, old, returned).await? {
                if triggers.as_ref().is_some_and(Triggers::keeps_rows) {
                    after_rows.push((kept_old, None));
                }
                written.push(done);
            }
        }
    }
    Box::pin(super::run_pending_actions(session, txn, mark)).await?;
    if let Some(t) = &triggers {
        t.after_statement(session, txn, after_rows).await?;
    }
    written
        .finish(session, &m, "DELETE", del.returning.as_deref())
        .await
}

/// Deletes one row; on a concurrent change re-checks the WHERE on the newest version. Returns
/// the row deleted and its RETURNING values, or None when it was skipped.
pub(super) async fn delete_one(
    session: &Session,
    txn: &mut Transaction,
    m: &Modification<'_>,
    handle: &RowRef,
    mut snap: Snapshot,
    mut old: Vec<Value>,
    mut returned: Vec<ScalarValue>,
) -> SqlResult<Option<(Vec<Value>, Vec<ScalarValue>)>> {
    let mut waiting = RowWait::default();
    loop {
        match m.table.delete(txn, handle, &snap) {
            Ok(WriteOutcome::Done) => {
                // After the delete: see `constraints::foreign_key` for why not before.
                constraints::check_delete_references(session, txn, m.def, &old).await?;
                return Ok(Some((old, returned)));
            }
            Ok(WriteOutcome::Changed { newest: None, .. }) => return Ok(None),
            Ok(WriteOutcome::Changed {
                newest: Some(newest),
                newest_snapshot,
            }) => {
                // READ COMMITTED: delete the newest version if it still qualifies.
                let Some((_, again)) = reevaluate(session, m, &newest).await? else {
                    return Ok(None);
                };
                returned = again;
                old = newest;
                snap = newest_snapshot;
            }
            Err(StorageError::WouldBlock { holder }) => {
                waiting.wait(session, txn, handle, holder).await?
            }
            Err(e) => return Err(e.into()),
        }
    }
}
