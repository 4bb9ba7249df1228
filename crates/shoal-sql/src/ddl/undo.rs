//! Transactional DDL: ROLLBACK undoes the DDL of its transaction, as in PostgreSQL.
//!
//! DDL changes the catalog and storage when it runs (other sessions see it then, as they see
//! no uncommitted row). Before a DDL statement runs, `DdlMark::capture` keeps a copy of the
//! catalog (maps of shared definitions, so cheap) and of the storage registry; afterwards
//! `DdlMark::finish` keeps what the statement changed: the catalog objects it touched, as they
//! were (`Catalog::changes_since`), and the storage of the tables it dropped, rows and indexes
//! intact. The session's `DdlUndoLog` holds these until the transaction ends: COMMIT forgets
//! them, ROLLBACK (or ROLLBACK TO SAVEPOINT, or a commit that fails) hands them to `undo`,
//! which puts the objects back and brings storage in line: tables created are dropped, tables
//! dropped come back with their rows, tables rebuilt (ALTER COLUMN TYPE, and DROP COLUMN in a
//! block) get their old storage back, columns added are cut off again, indexes follow the
//! restored catalog.
//!
//! Statements that change the catalog run one at a time (`Engine::ddl_statement`, taken by
//! `Session::execute_statement` around the mark, so a statement canceled half-way is still
//! recorded), so one statement's changes never include another session's.
//!
//! The undo is logged like any DDL: the rows of every table that comes back, then the restored
//! catalog image, so recovery ends where the rollback did. Unlike PostgreSQL, Shoal takes no
//! locks on the objects a block's DDL touched, so other sessions may have built on them before
//! the rollback: an object changed again since, a name taken since, or a table with added
//! columns that another open transaction is writing is left as it is (with a warning in the
//! server log) rather than destroying their work. Not covered: a crash while the block is
//! still open keeps the DDL it ran so far (the catalog is logged when the DDL runs), and SET
//! ACCESS METHOD, which rewrites a table's rows in place, is refused inside a transaction
//! block.

use std::collections::HashMap;
use std::sync::Arc;

use shoal_storage::catalog::{AccessMethod, Catalog, Oid};
use shoal_storage::catalog_undo::{CatalogObject, ObjectKey, PriorObject};
use shoal_storage::column::row_id as segment_row_id;
use shoal_storage::{ColumnTable, CommitTs, RowTable, Snapshot, TableId};

use crate::engine::Engine;
use crate::error::{SqlError, SqlResult};

/// The catalog and the storage registry before a DDL statement.
pub(crate) struct DdlMark {
    /// The newest commit before the statement: a rebuilt table with a commit after it holds
    /// another session's rows.
    ts: CommitTs,
    catalog: Catalog,
    row_tables: HashMap<TableId, Arc<RowTable>>,
    column_tables: HashMap<TableId, Arc<ColumnTable>>,
}

/// What one DDL statement changed, kept to undo it.
pub(crate) struct DdlUndo {
    changes: Vec<PriorObject>,
    /// Each changed object as the statement left it (None: dropped), to see at undo time
    /// whether another session changed it since.
    after: Vec<Option<CatalogObject>>,
    /// Storage of the tables the statement dropped.
    dropped_row_tables: Vec<Arc<RowTable>>,
    dropped_column_tables: Vec<Arc<ColumnTable>>,
    /// Row tables the statement rebuilt under the same id, as they were, with the mark's ts.
    replaced_row_tables: Vec<(Arc<RowTable>, CommitTs)>,
}

impl DdlMark {
    pub(crate) fn capture(engine: &Engine) -> DdlMark {
        let by_id = |t: &Arc<RowTable>| (t.id(), t.clone());
        DdlMark {
            ts: engine.db.newest_commit_ts(),
            catalog: engine.catalog.read().clone(),
            row_tables: engine.db.tables().iter().map(by_id).collect(),
            column_tables: engine
                .db
                .column_tables()
                .into_iter()
                .map(|t| (t.id(), t))
                .collect(),
        }
    }

    /// The tables, views, sequences and schemas created since the capture.
    pub(crate) fn created(
        &self,
        engine: &Engine,
    ) -> Vec<shoal_storage::catalog_privileges::ObjectRef> {
        use shoal_storage::catalog_privileges::ObjectClass;
        let catalog = engine.catalog.read();
        catalog
            .changes_since(&self.catalog)
            .into_iter()
            .filter(|c| c.before.is_none())
            .filter_map(|c| match c.key {
                ObjectKey::Table(oid) | ObjectKey::View(oid) | ObjectKey::Sequence(oid) => {
                    Some((ObjectClass::Relation, oid))
                }
                ObjectKey::Schema(name) => catalog
                    .schemas
                    .get(&name)
                    .map(|s| (ObjectClass::Schema, s.oid)),
                _ => None,
            })
            .collect()
    }

    /// What changed since the capture; None when the statement changed nothing.
    pub(crate) fn finish(self, engine: &Engine) -> Option<DdlUndo> {
        let catalog = engine.catalog.read();
        let changes = catalog.changes_since(&self.catalog);
        if changes.is_empty() {
            return None;
        }
        let after = changes.iter().map(|c| catalog.object(&c.key)).collect();
        drop(catalog);
        let replaced_row_tables = self
            .row_tables
            .values()
            .filter(|t| {
                engine
                    .db
                    .table(t.id())
                    .is_some_and(|now| !Arc::ptr_eq(&now, t))
            })
            .map(|t| (t.clone(), self.ts))
            .collect();
        Some(DdlUndo {
            replaced_row_tables,
            dropped_row_tables: gone(self.row_tables, |id| engine.db.table(id).is_some()),
            dropped_column_tables: gone(self.column_tables, |id| {
                engine.db.column_table(id).is_some()
            }),
            changes,
            after,
        })
    }
}

/// The tables of a registry copy that storage no longer has.
fn gone<T>(tables: HashMap<TableId, Arc<T>>, exists: impl Fn(TableId) -> bool) -> Vec<Arc<T>> {
    tables
        .into_iter()
        .filter(|(id, _)| !exists(*id))
        .map(|(_, t)| t)
        .collect()
}

/// A session's DDL since its transaction began, with its savepoints' places in it.
#[derive(Default)]
pub(crate) struct DdlUndoLog {
    statements: Vec<DdlUndo>,
    /// Savepoint name and how many statements came before it.
    savepoints: Vec<(String, usize)>,
}

impl DdlUndoLog {
    pub(crate) fn push(&mut self, undo: DdlUndo) {
        self.statements.push(undo);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.statements.is_empty()
    }

    /// The transaction ended: everything, to undo (rollback) or forget (commit).
    pub(crate) fn take_all(&mut self) -> Vec<DdlUndo> {
        self.savepoints.clear();
        std::mem::take(&mut self.statements)
    }

    pub(crate) fn savepoint(&mut self, name: &str) {
        self.savepoints
            .push((name.to_string(), self.statements.len()));
    }

    /// RELEASE: the savepoint and those after it go; their DDL stays in the transaction.
    pub(crate) fn release(&mut self, name: &str) {
        if let Some(pos) = self.savepoints.iter().rposition(|(n, _)| n == name) {
            self.savepoints.truncate(pos);
        }
    }

    /// ROLLBACK TO: the DDL after the savepoint, to undo; the savepoint itself stays.
    pub(crate) fn take_after(&mut self, name: &str) -> Vec<DdlUndo> {
        let Some(pos) = self.savepoints.iter().rposition(|(n, _)| n == name) else {
            return Vec::new();
        };
        let since = self.savepoints[pos].1;
        self.savepoints.truncate(pos + 1);
        self.statements.split_off(since)
    }
}

/// Undoes `statements` (in the order they ran), newest first. Call after the transaction's row
/// changes were rolled back. A change another session built on since (the object changed
/// again, its name taken, rows in flight in a table whose added column would be cut off) is
/// left as it is, with a warning in the server log: undoing it would destroy their work.
pub(crate) fn undo(engine: &Engine, statements: Vec<DdlUndo>) -> SqlResult<()> {
    if statements.is_empty() {
        return Ok(());
    }
    let (mut kept, mut target) = undoable_changes(engine, &statements, &[]);
    let mut skipped_tables = restore_rebuilt_tables(engine, &statements, &target)?;
    if !skipped_tables.is_empty() {
        (kept, target) = undoable_changes(engine, &statements, &skipped_tables);
    }
    // Columns an ADD COLUMN added are cut off first; a table another transaction is writing
    // keeps them, and its definition with them.
    for &oid in &touched_tables(&engine.catalog.read(), &kept) {
        let (Some(def), Some(table)) = (target.tables.get(&oid), engine.db.table(oid as TableId))
        else {
            continue;
        };
        let wanted = def.column_types();
        let have = table.types();
        if have.len() > wanted.len() && have[..wanted.len()] == wanted[..] {
            // Indexes the restored catalog lacks go first: one may be on a column cut off.
            // (Only the block's own: they go with its catalog changes even if the cut does not
            // happen.)
            let keep: Vec<_> = storage_indexes(&target, oid).iter().map(|w| w.id).collect();
            table.retain_indexes(&keep);
            if table.cut_columns(wanted.clone())? {
                engine.log_table_rewrite(&table)?;
            } else {
                tracing::warn!(
                    "rollback: table \"{}\" keeps its added columns: another transaction is writing to it",
                    def.name
                );
                skipped_tables.push(oid);
            }
        }
    }
    if !skipped_tables.is_empty() {
        (kept, target) = undoable_changes(engine, &statements, &skipped_tables);
    }
    let touched = touched_tables(&engine.catalog.read(), &kept);
    let mut dropped_rows: HashMap<TableId, Arc<RowTable>> = HashMap::new();
    let mut dropped_columns: HashMap<TableId, Arc<ColumnTable>> = HashMap::new();
    for s in &statements {
        for t in &s.dropped_row_tables {
            dropped_rows.insert(t.id(), t.clone());
        }
        for t in &s.dropped_column_tables {
            dropped_columns.insert(t.id(), t.clone());
        }
    }
    // Storage that comes back, and its rows in the log, before the catalog that names it:
    // recovery installs a logged table image when the next catalog record has the table.
    for &oid in &touched {
        let Some(def) = target.tables.get(&oid) else {
            continue;
        };
        let id = oid as TableId;
        match def.access_method {
            AccessMethod::Heap => {
                if engine.db.table(id).is_none() {
                    let table = dropped_rows.remove(&id).ok_or_else(|| {
                        SqlError::internal(format!("no storage to restore table {oid}"))
                    })?;
                    engine.db.restore_table(table.clone());
                    engine.log_table_rewrite(&table)?;
                    continue;
                }
                let table = engine.db.table(id).expect("checked");
                if table.types() != def.column_types() {
                    return Err(SqlError::internal(format!(
                        "cannot restore the columns of table {}",
                        def.name
                    )));
                }
            }
            AccessMethod::Columnar => {
                if engine.db.column_table(id).is_none() {
                    let table = dropped_columns.remove(&id).ok_or_else(|| {
                        SqlError::internal(format!("no storage to restore table {oid}"))
                    })?;
                    engine.db.restore_column_table(table.clone());
                    log_column_table(engine, &table)?;
                }
            }
        }
    }
    {
        let mut catalog = engine.catalog.write();
        for changes in &kept {
            catalog.restore(changes);
        }
    }
    // Storage the restored catalog no longer has, and indexes as it has them.
    let mut unbuilt: Vec<(Oid, Oid)> = Vec::new();
    let catalog = engine.catalog.read();
    for &oid in &touched {
        let id = oid as TableId;
        if !catalog.tables.contains_key(&oid) {
            engine.db.drop_table(id);
            continue;
        }
        let Some(table) = engine.db.table(id) else {
            continue;
        };
        // Rows other sessions committed meanwhile may collide: the table stays usable without
        // the index (and its constraint) rather than failing the rollback.
        for (w, e) in table.set_indexes(storage_indexes(&catalog, oid)) {
            tracing::warn!("rollback: index {} not rebuilt: {e}", w.name);
            unbuilt.push((oid, w.id as Oid));
        }
    }
    drop(catalog);
    if !unbuilt.is_empty() {
        forget_unbuilt_indexes(engine, &unbuilt)?;
    }
    Ok(())
}

/// Puts back the storage of the tables the statements rebuilt (the oldest, from before the
/// first rebuild), and logs it; also when the block dropped the rebuilt table afterwards. A
/// table stays as it is, with its definition (returned), when another session wrote to it
/// since the first rebuild (any commit after it, or one under way: undoing would lose it), or
/// when the catalog the rollback restores does not describe the old storage (another
/// session's DDL on the table since).
fn restore_rebuilt_tables(
    engine: &Engine,
    statements: &[DdlUndo],
    target: &Catalog,
) -> SqlResult<Vec<Oid>> {
    let mut oldest: HashMap<TableId, (Arc<RowTable>, CommitTs)> = HashMap::new();
    for s in statements {
        for (table, ts) in &s.replaced_row_tables {
            oldest.entry(table.id()).or_insert((table.clone(), *ts));
        }
    }
    let mut skipped = Vec::new();
    for (id, (old, ts)) in oldest {
        let oid = id as Oid;
        // A table the block created: the restored catalog has none, and its storage goes.
        let Some(def) = target.tables.get(&oid) else {
            continue;
        };
        let current = engine.db.table(id);
        // The rolled back transaction's own versions are undone by now.
        let written = engine.db.table_written_since(id, ts)
            || current
                .as_ref()
                .is_some_and(|t| !t.close_for_rebuild(&Snapshot { ts, txn: 0 }));
        // The old storage may hold columns an ADD COLUMN of the block added: cut off later.
        if written || !old.types().starts_with(&def.column_types()) {
            tracing::warn!(
                "rollback: table \"{}\" keeps its rebuilt rows: another session has changed it since",
                def.name
            );
            skipped.push(oid);
            continue;
        }
        if current.is_some() {
            engine.db.drop_table(id);
        }
        engine.db.restore_table(old.clone());
        engine.log_table_rewrite(&old)?;
    }
    Ok(skipped)
}

/// Takes indexes a rollback could not rebuild out of the catalog, with the PRIMARY KEY or
/// UNIQUE constraint they back: the catalog must not promise what storage does not enforce.
fn forget_unbuilt_indexes(engine: &Engine, unbuilt: &[(Oid, Oid)]) -> SqlResult<()> {
    use shoal_storage::catalog::ConstraintKind;
    let mut catalog = engine.catalog.write();
    for &(table_oid, index_oid) in unbuilt {
        catalog.remove_index(index_oid);
        let Some(def) = catalog.tables.get(&table_oid).cloned() else {
            continue;
        };
        let mut def = (*def).clone();
        def.constraints.retain(|c| {
            !matches!(
                c.kind,
                ConstraintKind::PrimaryKey { index, .. } | ConstraintKind::Unique { index, .. }
                    if index == index_oid
            )
        });
        catalog.replace_table(def)?;
    }
    Ok(())
}

/// The storage indexes `catalog` wants on table `oid`.
fn storage_indexes(catalog: &Catalog, oid: Oid) -> Vec<shoal_storage::IndexDef> {
    let Some(def) = catalog.tables.get(&oid) else {
        return Vec::new();
    };
    catalog
        .table_indexes(oid)
        .iter()
        .filter_map(|i| super::index_predicate::storage_index(i, def).ok().flatten())
        .collect()
}

/// The changes to undo, newest statement first, without those that would overwrite another
/// session's DDL (or touch `skipped_tables`), and the catalog they give.
fn undoable_changes(
    engine: &Engine,
    statements: &[DdlUndo],
    skipped_tables: &[Oid],
) -> (Vec<Vec<PriorObject>>, Catalog) {
    let mut target = engine.catalog.read().clone();
    let mut kept = Vec::new();
    for s in statements.iter().rev() {
        let (undoable, conflicting) = target.undoable(&s.changes, &s.after);
        for c in &conflicting {
            tracing::warn!(
                "rollback: {:?} left as it is: changed by another session since",
                c.key
            );
        }
        let undoable: Vec<PriorObject> = undoable
            .into_iter()
            .filter(|c| !concerns_skipped_table(c, skipped_tables, &target))
            .collect();
        target.restore(&undoable);
        kept.push(undoable);
    }
    (kept, target)
}

/// Whether undoing `change` would touch a table left as it is (`skipped`): the table itself,
/// one of its indexes, or a table whose foreign key references it (DROP COLUMN shifted its
/// referenced positions).
fn concerns_skipped_table(change: &PriorObject, skipped: &[Oid], current: &Catalog) -> bool {
    if skipped.is_empty() {
        return false;
    }
    match (&change.key, &change.before) {
        (ObjectKey::Table(oid), _) if skipped.contains(oid) => true,
        (ObjectKey::Table(_), Some(CatalogObject::Table(def))) => def.constraints.iter().any(|c| {
            matches!(&c.kind, shoal_storage::catalog::ConstraintKind::ForeignKey { ref_table, .. }
                if skipped.contains(ref_table))
        }),
        (ObjectKey::Index(_), Some(CatalogObject::Index(def))) => skipped.contains(&def.table),
        (ObjectKey::Index(oid), None) => current
            .indexes
            .get(oid)
            .is_some_and(|def| skipped.contains(&def.table)),
        _ => false,
    }
}

/// Tables whose storage an undo may change: those the changes name, and the tables of the
/// indexes they change.
fn touched_tables(current: &Catalog, kept: &[Vec<PriorObject>]) -> Vec<Oid> {
    let mut oids = Vec::new();
    for changes in kept {
        for change in changes {
            let oid = match (&change.key, &change.before) {
                (ObjectKey::Table(oid), _) => Some(*oid),
                (ObjectKey::Index(_), Some(CatalogObject::Index(i))) => Some(i.table),
                (ObjectKey::Index(oid), _) => current.indexes.get(oid).map(|i| i.table),
                _ => None,
            };
            oids.extend(oid);
        }
    }
    oids.sort_unstable();
    oids.dedup();
    oids
}

/// Logs a restored column table's committed content: each segment's image, then the rows
/// deleted in it, as a checkpoint stores them.
fn log_column_table(engine: &Engine, table: &ColumnTable) -> SqlResult<()> {
    let all_committed = Snapshot {
        ts: shoal_storage::CommitTs::MAX >> 1,
        txn: 0,
    };
    let mut entries: Vec<(u64, Vec<u8>)> = Vec::new();
    for segment in table.segments() {
        if !segment.visible_to(&all_committed) {
            continue;
        }
        entries.push((segment_row_id(segment.no, 0), segment.image()));
        if let Some(mask) = segment.live_mask(&all_committed) {
            for offset in (0..mask.len()).filter(|&i| !mask.value(i)) {
                entries.push((segment_row_id(segment.no, offset as u32), Vec::new()));
            }
        }
    }
    engine.log_table_image(table.id(), entries.iter().map(|(id, b)| (*id, &b[..])))
}
