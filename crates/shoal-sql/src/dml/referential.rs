//! Foreign-key actions (ON DELETE CASCADE / SET NULL / SET DEFAULT) on the referencing rows.
//!
//! A table without triggers is acted on at once, from inside the checks of the row whose
//! deletion causes it. Those checks hold the session shared, but a trigger function runs
//! statements of its own and needs it to itself; so an action on a table with triggers waits in
//! the session's queue (`PendingActions`) until the deleting statement has deleted its rows,
//! and is then run with its table's triggers fired, as one DELETE or UPDATE of its own. This
//! is also when PostgreSQL runs them: its foreign-key actions are AFTER ROW triggers on the
//! referenced table, each running one statement on the referencing one.

use std::sync::Arc;

use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use parking_lot::Mutex;
use shoal_storage::catalog::TableDef;
use shoal_storage::catalog_triggers::{TriggerEvent, TriggerTiming};
use shoal_storage::table::RowTable;
use shoal_storage::{Snapshot, Transaction};

use super::modify::{
    delete_one, find_targets, row_positions, target_query_sql, update_one, Modification, Targets,
};
use crate::constraints;
use crate::error::{SqlError, SqlResult};
use crate::routines::trigger::{Triggers, WrittenRow};
use crate::session::Session;

/// A foreign key's action on a table with triggers, waiting for the end of the statement
/// whose deletions caused it (see the module comment).
pub struct PendingAction {
    def: Arc<TableDef>,
    /// The columns SET NULL / SET DEFAULT assigns and their values; none for CASCADE.
    assignments: Vec<(usize, String)>,
    /// Which rows: the referencing columns equal to the deleted key, as SQL.
    selection: String,
    crosscheck: Option<Snapshot>,
}

/// The session's actions waiting to run, oldest first. A statement runs those queued after
/// the length it found when it began (its `mark`), so a trigger's statement does not take
/// the actions of the statement that fired it.
#[derive(Default)]
pub struct PendingActions(Mutex<Vec<PendingAction>>);

impl PendingActions {
    pub fn mark(&self) -> usize {
        self.0.lock().len()
    }

    /// Drops what a failed statement queued after `mark`.
    pub fn forget_after(&self, mark: usize) {
        self.0.lock().truncate(mark);
    }

    fn take_next(&self, mark: usize) -> Option<PendingAction> {
        let mut queue = self.0.lock();
        (queue.len() > mark).then(|| queue.remove(mark))
    }
}

/// A foreign key's ON DELETE action on the rows of `def` that `selection` (an SQL condition)
/// finds: they are deleted when `assignments` is empty (CASCADE), otherwise the assigned columns
/// are set (SET NULL / SET DEFAULT). The rows go through the same checks as a user's DELETE or
/// UPDATE, so actions chain through further foreign keys. With `crosscheck` (REPEATABLE READ),
/// a row that snapshot does not see is a serialization failure. On a table with triggers the
/// action is queued (see the module comment).
pub async fn referential_action(
    session: &Session,
    txn: &mut Transaction,
    def: &Arc<TableDef>,
    (assignments, selection): (&[(usize, String)], &str),
    crosscheck: Option<Snapshot>,
) -> SqlResult<()> {
    let action = PendingAction {
        def: def.clone(),
        assignments: assignments.to_vec(),
        selection: selection.to_string(),
        crosscheck,
    };
    if def.triggers.iter().any(|t| t.enabled) {
        session.pending_actions.0.lock().push(action);
        return Ok(());
    }
    act(session, txn, &action, None).await.map(drop)
}

/// Runs the actions queued since `mark`, and those they queue in turn, firing the triggers of
/// the tables they change. Each reads the newest committed rows, as the immediate ones do.
///
/// The triggers fire in PostgreSQL's order for the statements its foreign-key actions run:
/// the BEFORE triggers as the rows are written; a table's BEFORE STATEMENT triggers once, at
/// its first action; the AFTER ROW triggers of every action after all the actions, in the
/// order the rows were written; and a table's AFTER STATEMENT triggers once, in the place of
/// its last action.
pub async fn run_pending_actions(
    session: &mut Session,
    txn: &mut Transaction,
    mark: usize,
) -> SqlResult<()> {
    // The triggers of each (table, event) acted on, and the AFTER events in order.
    let mut acted: Vec<Triggers> = Vec::new();
    let mut after: Vec<AfterEvent> = Vec::new();
    while let Some(action) = session.pending_actions.take_next(mark) {
        let (event, set_columns) = match action.assignments.is_empty() {
            true => (TriggerEvent::Delete, Vec::new()),
            false => (
                TriggerEvent::Update,
                action
                    .assignments
                    .iter()
                    .map(|(c, _)| action.def.columns[*c].name.clone())
                    .collect(),
            ),
        };
        let triggers = Triggers::of(&action.def, event, &set_columns);
        let at = match &triggers {
            Some(t) => match acted.iter().position(|a| a.same_target(t)) {
                Some(at) => Some(at),
                None => {
                    t.statement(session, txn, TriggerTiming::Before).await?;
                    acted.extend(triggers);
                    Some(acted.len() - 1)
                }
            },
            None => None,
        };
        let latest = constraints::latest_snapshot(session, txn);
        let statement_snap = std::mem::replace(&mut *session.scope.snapshot.lock(), latest);
        let written = act(&mut *session, txn, &action, at.map(|at| &acted[at])).await;
        *session.scope.snapshot.lock() = statement_snap;
        if let Some(at) = at {
            after.extend(written?.into_iter().map(|row| AfterEvent::Row(at, row)));
            after.retain(|e| !matches!(e, AfterEvent::Statement(a) if *a == at));
            after.push(AfterEvent::Statement(at));
        } else {
            written?;
        }
    }
    // The transition tables of each (table, event): all the rows its actions wrote.
    let mut transitions = Vec::with_capacity(acted.len());
    for (at, triggers) in acted.iter().enumerate() {
        let rows: Vec<WrittenRow> = after
            .iter()
            .filter_map(|e| match e {
                AfterEvent::Row(a, row) if *a == at => Some(row.clone()),
                _ => None,
            })
            .collect();
        transitions.push(triggers.transition(&rows)?);
    }
    for event in after {
        match event {
            AfterEvent::Row(at, row) => {
                acted[at]
                    .after_rows(session, txn, vec![row], transitions[at].as_ref())
                    .await?
            }
            AfterEvent::Statement(at) => {
                acted[at]
                    .after_statement_triggers(session, txn, transitions[at].as_ref())
                    .await?
            }
        }
    }
    Ok(())
}

/// An AFTER trigger event of the actions, by the index of its triggers.
enum AfterEvent {
    Row(usize, WrittenRow),
    Statement(usize),
}

/// Deletes or updates the rows the action finds. With `triggers` (which needs the session to
/// itself, see `Fire`), their BEFORE ROW triggers fire for each row, and the rows written
/// are returned for the AFTER ROW ones.
async fn act(
    session: impl Fire<'_>,
    txn: &mut Transaction,
    action: &PendingAction,
    triggers: Option<&Triggers>,
) -> SqlResult<Vec<WrittenRow>> {
    let mut session = session;
    let def = &action.def;
    let table = row_table(session.shared(), def)?;
    let selection = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&action.selection)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| SqlError::internal(format!("referential action condition: {e}")))?;
    let m = Modification {
        zone: session.shared().settings.time_zone().clone(),
        def,
        table: &table,
        alias: &def.name,
        assignments: &action.assignments,
        row_calls: &[],
        from: &[],
        selection: Some(&selection),
        returning: &[],
    };
    let sql = target_query_sql(def, &def.name, &m.extra_columns(), &[], m.selection);
    let (batches, handles) = find_targets(session.shared(), def, &sql, Targets::Action).await?;
    let snap = session.shared().scope.snapshot();
    let mut written = Vec::new();
    let mut rows_seen = 0;
    for b in &batches {
        let positions = row_positions(b);
        let new_values = m.new_values(b, 1)?;
        for r in 0..b.num_rows() {
            super::yield_between_rows(rows_seen).await;
            rows_seen += 1;
            let handle = &handles[positions.value(r) as usize];
            let Some(old) = table.read(handle, &snap) else {
                continue;
            };
            if action
                .crosscheck
                .is_some_and(|cs| table.read(handle, &cs).is_none())
            {
                return Err(constraints::serialization_failure());
            }
            let new = (!action.assignments.is_empty()).then(|| {
                let mut row = old.clone();
                for (i, (col, _)) in action.assignments.iter().enumerate() {
                    row[*col] = new_values[i][r].clone();
                }
                row
            });
            let updating = new.is_some();
            let new = match (triggers, session.exclusive()) {
                (Some(t), Some(s)) => match t.before_row(s, txn, Some(&old), new).await? {
                    Some(row) => updating.then_some(row),
                    None => continue,
                },
                _ => new,
            };
            let s = session.shared();
            let done = match new {
                None => delete_one(s, txn, &m, handle, snap, old.clone(), Vec::new())
                    .await?
                    .map(|_| (Some(old), None)),
                Some(row) => update_one(s, txn, &m, handle, snap, row, Vec::new())
                    .await?
                    .map(|(row, _)| (Some(old), Some(row))),
            };
            if let (Some(row), Some(t)) = (done, triggers) {
                if t.keeps_rows() {
                    written.push(row);
                }
            }
        }
    }
    Ok(written)
}

/// The session an action runs with: shared while the deleting row's checks run (no triggers),
/// or its own (to fire triggers).
trait Fire<'s> {
    fn shared(&self) -> &Session;
    fn exclusive(&mut self) -> Option<&mut Session>;
}

impl<'s> Fire<'s> for &'s Session {
    fn shared(&self) -> &Session {
        self
    }
    fn exclusive(&mut self) -> Option<&mut Session> {
        None
    }
}

impl<'s> Fire<'s> for &'s mut Session {
    fn shared(&self) -> &Session {
        self
    }
    fn exclusive(&mut self) -> Option<&mut Session> {
        Some(self)
    }
}

fn row_table(session: &Session, def: &TableDef) -> SqlResult<Arc<RowTable>> {
    session
        .engine
        .db
        .table(def.oid as u64)
        .ok_or_else(|| SqlError::undefined_table(&def.name))
}
