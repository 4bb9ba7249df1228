//! TRUNCATE: empties tables inside the statement's transaction, following foreign keys when
//! CASCADE asks for it and resetting owned sequences for RESTART IDENTITY.

use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog::Oid;
use shoal_storage::{StorageError, Transaction};

use shoal_storage::catalog_triggers::{TriggerEvent, TriggerTiming};

use crate::error::{code, SqlError, SqlResult};
use crate::routines::trigger::Triggers;
use crate::session::{Session, StatementResult};

/// TRUNCATE deletes every visible row inside the transaction, so it is undone by ROLLBACK as in
/// PostgreSQL; storage's instant `truncate` is not transactional. CASCADE extends the set with
/// every table that references it; RESTART IDENTITY resets the tables' owned sequences (not
/// undone by ROLLBACK, a gap: PostgreSQL's reset is transactional).
pub(super) async fn truncate(
    session: &mut Session,
    txn: &mut Transaction,
    t: &ast::Truncate,
) -> SqlResult<StatementResult> {
    let mut tables = Vec::new();
    let mut column_tables = Vec::new();
    for target in &t.table_names {
        match crate::dml::resolve_store(session, &target.name)? {
            (def, crate::dml::TableStore::Row(table)) => tables.push((def, table)),
            (def, crate::dml::TableStore::Column(table)) => column_tables.push((def, table)),
        }
    }
    for (def, table) in &column_tables {
        session.scope.note_read(table.id());
        crate::dml::column::delete_all_rows(session, txn, def, table).await?;
    }
    let cascade = matches!(t.cascade, Some(ast::CascadeOption::Cascade));
    let mut i = 0;
    while i < tables.len() {
        let def = tables[i].0.clone();
        let referencing = session
            .engine
            .catalog
            .read()
            .referencing_foreign_keys(def.oid);
        for (child, _) in referencing {
            if tables.iter().any(|(d, _)| d.oid == child.oid) {
                continue;
            }
            if !cascade {
                return Err(SqlError::new(
                    code::FEATURE_NOT_SUPPORTED,
                    "cannot truncate a table referenced in a foreign key constraint",
                )
                .with_detail(format!(
                    "Table \"{}\" references \"{}\".",
                    child.name, def.name
                ))
                .with_hint(format!(
                    "Truncate table \"{}\" at the same time, or use TRUNCATE ... CASCADE.",
                    child.name
                )));
            }
            let table = session
                .engine
                .db
                .table(child.oid as u64)
                .ok_or_else(|| SqlError::undefined_table(&child.name))?;
            tables.push((child, table));
        }
        i += 1;
    }
    // As PostgreSQL: every table's BEFORE TRUNCATE triggers, then the truncation, then the
    // AFTER TRUNCATE ones, in the order the tables were named (those CASCADE adds last).
    let triggers: Vec<Triggers> = tables
        .iter()
        .filter_map(|(def, _)| Triggers::of(def, TriggerEvent::Truncate, &[]))
        .collect();
    for t in &triggers {
        t.statement(session, txn, TriggerTiming::Before).await?;
    }
    for (_, table) in &tables {
        delete_all_rows(session, txn, table).await?;
    }
    for t in &triggers {
        t.statement(session, txn, TriggerTiming::After).await?;
    }
    if matches!(t.identity, Some(ast::TruncateIdentityOption::Restart)) {
        let catalog = session.engine.catalog.read();
        for seq in catalog.sequences.values() {
            let truncated = |owner: Oid| {
                tables.iter().any(|(d, _)| d.oid == owner)
                    || column_tables.iter().any(|(d, _)| d.oid == owner)
            };
            if matches!(seq.owned_by, Some((owner, _)) if truncated(owner)) {
                seq.set_value(seq.start, false);
                session.engine.log_sequence(seq);
            }
        }
    }
    Ok(StatementResult::command("TRUNCATE TABLE"))
}

/// Deletes every row visible to the statement, waiting for rows other transactions hold.
async fn delete_all_rows(
    session: &Session,
    txn: &mut Transaction,
    table: &shoal_storage::RowTable,
) -> SqlResult<()> {
    let snap = session.scope.snapshot();
    session.scope.note_read(table.id());
    let mut rows = Vec::new();
    table.scan(&snap, |row, _| {
        rows.push(row.clone());
        true
    });
    for row in rows {
        let mut row_snap = snap.clone();
        loop {
            match table.delete(txn, &row, &row_snap) {
                Ok(shoal_storage::WriteOutcome::Done) => break,
                Ok(shoal_storage::WriteOutcome::Changed { newest: None, .. }) => break,
                Ok(shoal_storage::WriteOutcome::Changed {
                    newest_snapshot, ..
                }) => row_snap = newest_snapshot,
                Err(StorageError::WouldBlock { holder }) => {
                    session.wait_for_row_holder(txn, holder).await?
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}
