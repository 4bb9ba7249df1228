//! FOREIGN KEY checks in both directions, and the row locks that make them hold under
//! concurrency.
//!
//! A row written to a referencing table must reference an existing row. It is found through
//! the referenced table's unique index and locked FOR KEY SHARE until the writer ends, as
//! PostgreSQL's `SELECT 1 FROM parent WHERE key = $1 FOR KEY SHARE`. That lock is what keeps a
//! DELETE of the referenced row, or an UPDATE of its key, from committing while the
//! referencing transaction (whose row it cannot see) is open: the delete waits for it.
//!
//! A row deleted from a referenced table (or whose key changes) must not be referenced. That is
//! checked after the row's write, so the writer holds the row and every transaction that had
//! locked it as a reference has ended, and against the newest committed rows rather than the
//! statement's snapshot, since those transactions may have committed after it. PostgreSQL's
//! RI queries do the same: a new snapshot in READ COMMITTED, and in REPEATABLE READ a
//! serialization failure when only the newest rows hold a reference.

use std::sync::Arc;

use shoal_storage::catalog::{ConstraintDef, ConstraintKind, ForeignKeyAction, TableDef};
use shoal_storage::table::{RowLockMode, WriteOutcome};
use shoal_storage::types::{DataType, Value};
use shoal_storage::{Snapshot, StorageError, Transaction};

use super::{key_text, literal, query_bool};
use crate::error::{code, SqlError, SqlResult};
use crate::session::Session;
use crate::types::{arrow_type, scalar_from_value, value_from_array};

/// A snapshot of `txn` that sees every transaction that has ended (and `txn`'s own writes):
/// in particular the ones whose lock on a row `txn` has waited for.
pub fn latest_snapshot(session: &Session, txn: &Transaction) -> Snapshot {
    Snapshot {
        ts: session.engine.db.newest_commit_ts(),
        txn: txn.id(),
    }
}

/// The snapshot a REPEATABLE READ or SERIALIZABLE transaction reads at; None in READ
/// COMMITTED.
fn transaction_snapshot(session: &Session, txn: &mut Transaction) -> Option<Snapshot> {
    txn.isolation()
        .keeps_snapshot()
        .then(|| session.engine.db.statement_snapshot(txn))
}

/// Runs `work` (the session's SQL) with the plan scope reading at `snap` instead of the
/// statement's snapshot.
async fn with_snapshot<T>(
    session: &Session,
    snap: Snapshot,
    work: impl std::future::Future<Output = T>,
) -> T {
    let statement_snap = std::mem::replace(&mut *session.scope.snapshot.lock(), snap);
    let out = work.await;
    *session.scope.snapshot.lock() = statement_snap;
    out
}

/// The referencing side: `row`, about to be written to `child` by `txn`, must have its
/// `columns` in a row of `target`'s `ref_columns` (none of them NULL: the caller skips those).
pub(super) async fn check_reference(
    session: &Session,
    txn: &mut Transaction,
    (child, constraint, columns): (&TableDef, &str, &[usize]),
    (target, ref_columns): (&TableDef, &[usize]),
    row: &[Value],
) -> SqlResult<()> {
    let present = match lock_referenced_row(session, txn, child, columns, target, ref_columns, row)
        .await?
    {
        Some(present) => present,
        None => reference_present_by_query(session, txn, columns, target, ref_columns, row).await?,
    };
    if present {
        return Ok(());
    }
    let (names, vals) = key_text(child, columns, row, session.settings.time_zone());
    Err(SqlError::new(
        code::FOREIGN_KEY_VIOLATION,
        format!(
            "insert or update on table \"{}\" violates foreign key constraint \"{constraint}\"",
            child.name
        ),
    )
    .with_table(&child.schema, &child.name)
    .with_constraint(constraint)
    .with_detail(format!(
        "Key ({names})=({vals}) is not present in table \"{}\".",
        target.name
    )))
}

/// Finds the referenced row by `target`'s unique index on `ref_columns` and locks it for
/// `txn`: Some(true) when it exists (and is now locked), Some(false) when it does not, None
/// when `target` has no such index in storage (a column table), for the caller to query.
async fn lock_referenced_row(
    session: &Session,
    txn: &mut Transaction,
    child: &TableDef,
    columns: &[usize],
    target: &TableDef,
    ref_columns: &[usize],
    row: &[Value],
) -> SqlResult<Option<bool>> {
    let Some(table) = session.engine.db.table(target.oid as u64) else {
        return Ok(None);
    };
    let Some((index, key_order)) = referenced_index(session, target, ref_columns) else {
        return Ok(None);
    };
    // The key in the index's column order and the referenced columns' types.
    let mut key = Vec::with_capacity(key_order.len());
    for &k in &key_order {
        let from = &child.columns[columns[k]].data_type;
        let to = &target.columns[ref_columns[k]].data_type;
        match key_value(&row[columns[k]], from, to) {
            Some(v) => key.push(v),
            // Out of the referenced column's range: no row can have it.
            None => return Ok(Some(false)),
        }
    }
    // READ COMMITTED looks at the newest rows, as a new snapshot would; REPEATABLE READ at its
    // own (a referenced row changed since then is a serialization failure, from the lock).
    let mut snap = transaction_snapshot(session, txn).unwrap_or(latest_snapshot(session, txn));
    loop {
        let referenced = match table.index_get(index, &snap, &key) {
            Ok(Some((referenced, _))) => referenced,
            Ok(None) => return Ok(Some(false)),
            // Dropped since the catalog was read: the query does without it.
            Err(StorageError::NoSuchIndex(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match table.lock_row(txn, &referenced, &snap, RowLockMode::KeyShare) {
            Ok(WriteOutcome::Done) => return Ok(Some(true)),
            // Changed or deleted after `snap`: look the key up again as of the change.
            Ok(WriteOutcome::Changed {
                newest_snapshot, ..
            }) => snap = newest_snapshot,
            Err(StorageError::WouldBlock { holder }) => {
                session.wait_for_row_holder(txn, holder).await?;
                snap = latest_snapshot(session, txn);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// A unique index of `target` in storage on exactly `ref_columns` (in any order): its id, and
/// for each of its key columns the position in `ref_columns`.
fn referenced_index(
    session: &Session,
    target: &TableDef,
    ref_columns: &[usize],
) -> Option<(u64, Vec<usize>)> {
    let indexes = session.engine.catalog.read().table_indexes(target.oid);
    indexes.iter().find_map(|idx| {
        // Partial and expression indexes live in the catalog only.
        if !idx.unique || idx.predicate_sql.is_some() || idx.columns.len() != ref_columns.len() {
            return None;
        }
        let order: Option<Vec<usize>> = idx
            .columns
            .iter()
            .map(|c| ref_columns.iter().position(|r| r == c))
            .collect();
        Some((idx.oid as u64, order?))
    })
}

/// `v`, a value of type `from`, as a value of type `to` (a foreign key may reference a
/// column of another type, such as an integer column a bigint one); None when it does not fit.
fn key_value(v: &Value, from: &DataType, to: &DataType) -> Option<Value> {
    if from == to {
        return Some(v.clone());
    }
    let cast = |v: &Value, from: &DataType, to: &DataType| {
        let array = scalar_from_value(v, from)
            .cast_to(&arrow_type(to))
            .ok()?
            .to_array()
            .ok()?;
        value_from_array(&array, 0, to).ok()
    };
    // Only an exact conversion: 1.5 must not find the key 2 of a numeric(10,0) column.
    let converted = cast(v, from, to)?;
    (cast(&converted, to, from)? == *v).then_some(converted)
}

/// The reference check as a query, for a referenced table without an index in storage: sees
/// the same rows as `lock_referenced_row` but locks none.
async fn reference_present_by_query(
    session: &Session,
    txn: &mut Transaction,
    columns: &[usize],
    target: &TableDef,
    ref_columns: &[usize],
    row: &[Value],
) -> SqlResult<bool> {
    let key = |i: usize| &row[columns[i]];
    let (sql, _) = key_query(target, ref_columns, (target, ref_columns), key);
    let snap = transaction_snapshot(session, txn).unwrap_or(latest_snapshot(session, txn));
    Ok(with_snapshot(session, snap, query_bool(session, &sql)).await? == Some(true))
}

/// A query whether `table` has a row whose `columns` hold the key `key(0)`, `key(1)`, ...,
/// a key of `parent`'s `ref_columns` (the literals get those columns' types), and its WHERE
/// condition alone.
fn key_query<'v>(
    table: &TableDef,
    columns: &[usize],
    (parent, ref_columns): (&TableDef, &[usize]),
    key: impl Fn(usize) -> &'v Value,
) -> (String, String) {
    let conds: Vec<String> = columns
        .iter()
        .zip(ref_columns)
        .enumerate()
        .map(|(i, (c, rc))| {
            let value = literal(parent, *rc, key(i));
            format!("\"{}\" = {value}", table.columns[*c].name)
        })
        .collect();
    let condition = conds.join(" AND ");
    let sql = format!(
        "SELECT TRUE FROM {} WHERE {condition} LIMIT 1",
        crate::dml::qualified(table)
    );
    (sql, condition)
}

/// `old`, a row of `def`, has just been deleted by `txn`: rows that reference it are deleted
/// or changed by their foreign key's ON DELETE action, or, with NO ACTION / RESTRICT, make the
/// delete fail.
pub async fn check_delete_references(
    session: &Session,
    txn: &mut Transaction,
    def: &TableDef,
    old: &[Value],
) -> SqlResult<()> {
    let referencing = referencing_keys(session, def);
    // Boxed, as `check_reference` is (see `super::check_foreign_keys`).
    Box::pin(check_references(session, txn, def, referencing, old, false)).await
}

/// The foreign keys of other tables (and this one) that reference `def`.
fn referencing_keys(session: &Session, def: &TableDef) -> Vec<(Arc<TableDef>, ConstraintDef)> {
    session
        .engine
        .catalog
        .read()
        .referencing_foreign_keys(def.oid)
}

/// `old`, a row of `def`, has just been replaced by `new_row` in `txn`: if that changed a
/// referenced key, the rows that referenced it must not be left pointing at nothing.
pub async fn check_update_references(
    session: &Session,
    txn: &mut Transaction,
    def: &TableDef,
    old: &[Value],
    new_row: &[Value],
) -> SqlResult<()> {
    // Only the keys the update changed: rows referencing a key it left alone still have it.
    let mut changed = referencing_keys(session, def);
    changed.retain(|(_, c)| match &c.kind {
        ConstraintKind::ForeignKey { ref_columns, .. } => {
            ref_columns.iter().any(|rc| old[*rc] != new_row[*rc])
        }
        _ => false,
    });
    if changed.is_empty() {
        return Ok(());
    }
    Box::pin(check_references(session, txn, def, changed, old, true)).await
}

/// Rows that reference `old` by one of the keys `referencing` (a row of `def` just deleted,
/// or whose key an UPDATE changed when `updating`): apply their foreign key's action, or fail
/// when it is NO ACTION / RESTRICT.
async fn check_references(
    session: &Session,
    txn: &mut Transaction,
    def: &TableDef,
    referencing: Vec<(Arc<TableDef>, ConstraintDef)>,
    old: &[Value],
    updating: bool,
) -> SqlResult<()> {
    for (child, constraint) in referencing {
        let ConstraintKind::ForeignKey {
            columns,
            ref_columns,
            on_delete,
            on_update,
            ..
        } = &constraint.kind
        else {
            continue;
        };
        if ref_columns.iter().any(|c| old[*c].is_null()) {
            continue;
        }
        let action = if updating { on_update } else { on_delete };
        if *action == ForeignKeyAction::NoAction
            && session.scope.deferred_constraints.lock().defer_referenced(
                child.oid,
                &constraint,
                old,
            )
        {
            continue;
        }
        let key = |i: usize| &old[ref_columns[i]];
        let (sql, selection) = key_query(&child, columns, (def, ref_columns), key);
        let latest = latest_snapshot(session, txn);
        // An action on a table with triggers runs whether or not it finds rows, as
        // PostgreSQL's does: its statement triggers fire either way.
        let acts_with_triggers = !updating
            && *action != ForeignKeyAction::NoAction
            && *action != ForeignKeyAction::Restrict
            && child.triggers.iter().any(|t| t.enabled);
        if !acts_with_triggers
            && with_snapshot(session, latest, query_bool(session, &sql)).await? != Some(true)
        {
            continue;
        }
        // REPEATABLE READ: every referencing row must be one the transaction's snapshot sees
        // (PostgreSQL's crosscheck snapshot), else acting on it, or failing because of it,
        // would rest on a commit the transaction cannot see.
        let crosscheck = transaction_snapshot(session, txn);
        match action {
            ForeignKeyAction::NoAction | ForeignKeyAction::Restrict => {
                if let Some(snap) = crosscheck {
                    if with_snapshot(session, snap, query_bool(session, &sql)).await? != Some(true)
                    {
                        return Err(serialization_failure());
                    }
                }
            }
            _ if updating => {
                return Err(SqlError::unsupported(
                    "ON UPDATE CASCADE / SET NULL / SET DEFAULT actions",
                ))
            }
            _ => {
                let assignments = action_assignments(&child, columns, *action);
                // The action deletes or updates rows that may themselves be referenced, so
                // this recursion is boxed.
                let act = Box::pin(crate::dml::referential_action(
                    session,
                    txn,
                    &child,
                    (&assignments, &selection),
                    crosscheck,
                ));
                with_snapshot(session, latest, act).await?;
                continue;
            }
        }
        return Err(still_referenced(
            session,
            def,
            &child,
            &constraint.name,
            ref_columns,
            old,
        ));
    }
    Ok(())
}

/// The error for a row of `def` deleted (or re-keyed) while `child` still references its
/// key `old[ref_columns]` by foreign key `constraint`.
pub(super) fn still_referenced(
    session: &Session,
    def: &TableDef,
    child: &TableDef,
    constraint: &str,
    ref_columns: &[usize],
    old: &[Value],
) -> SqlError {
    let (names, vals) = key_text(def, ref_columns, old, session.settings.time_zone());
    SqlError::new(
        code::FOREIGN_KEY_VIOLATION,
        format!(
            "update or delete on table \"{}\" violates foreign key constraint \"{constraint}\" on table \"{}\"",
            def.name, child.name
        ),
    )
    .with_detail(format!(
        "Key ({names})=({vals}) is still referenced from table \"{}\".",
        child.name
    ))
    .with_table(&child.schema, &child.name)
    .with_constraint(constraint)
}

/// Whether `table` has a row, among the newest committed ones and `txn`'s own, whose
/// `columns` hold the key `key(0)`, `key(1)`, ... (values of `typed_by`'s `typed_columns`).
pub(super) async fn key_present<'v>(
    session: &Session,
    txn: &Transaction,
    (table, columns): (&TableDef, &[usize]),
    typed_by: (&TableDef, &[usize]),
    key: impl Fn(usize) -> &'v Value,
) -> SqlResult<bool> {
    let (sql, _) = key_query(table, columns, typed_by, key);
    let latest = latest_snapshot(session, txn);
    Ok(with_snapshot(session, latest, query_bool(session, &sql)).await? == Some(true))
}

pub fn serialization_failure() -> SqlError {
    SqlError::new(
        code::SERIALIZATION_FAILURE,
        "could not serialize access due to concurrent update",
    )
}

/// The columns a SET NULL or SET DEFAULT action assigns, with the SQL of their new value; none
/// for CASCADE, which deletes the referencing rows.
fn action_assignments(
    child: &TableDef,
    columns: &[usize],
    action: ForeignKeyAction,
) -> Vec<(usize, String)> {
    let value = |col: usize| match action {
        ForeignKeyAction::SetDefault => crate::dml::default_expr_sql(child, col),
        _ => "NULL".to_string(),
    };
    match action {
        ForeignKeyAction::SetNull | ForeignKeyAction::SetDefault => {
            columns.iter().map(|&c| (c, value(c))).collect()
        }
        _ => Vec::new(),
    }
}
