//! `ALTER TABLE t SET ACCESS METHOD heap | columnar`: rebuilds a table in the other storage
//! under the same oid, so views, sequences and grants that name it keep working.
//!
//! The rows are read with a query (the committed rows and the statement's own), turned into the
//! new layout, and logged as a table image before the catalog change: recovery installs the
//! image when it meets the catalog record (see `durability::recovery`), so a crash leaves either
//! the old table or the new one. Like Shoal's other DDL it takes effect at once rather than at
//! commit; it is therefore refused inside a transaction block, where a ROLLBACK could not undo it.
//! Writers in other sessions are not waited for: a row table with changes of another session
//! that the copy lacks (not committed yet, or committed after the read) is not rebuilt (55P03,
//! `close_and_log_rebuild`); a column table being rebuilt into a row table is not checked.

use std::sync::Arc;

use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::record_batch::RecordBatch;
use shoal_storage::catalog::{AccessMethod, ConstraintKind, Oid, TableDef};
use shoal_storage::column::{row_id as segment_row_id, segment_to_ipc, SEGMENT_MAX_ROWS};
use shoal_storage::row_codec;
use shoal_storage::types::Value;

use crate::dml::column::segment_stats;
use crate::dml::{column_values, qualified};
use crate::error::{code, SqlError, SqlResult};
use crate::query::provider::table_schema;
use crate::session::Session;
use crate::timezone::TimeZone;

/// Parses the method name of `SET ACCESS METHOD`.
pub(super) fn access_method_named(name: &str) -> SqlResult<AccessMethod> {
    match name.to_ascii_lowercase().as_str() {
        "heap" => Ok(AccessMethod::Heap),
        "columnar" => Ok(AccessMethod::Columnar),
        other => Err(SqlError::new(
            code::UNDEFINED_OBJECT,
            format!("access method \"{other}\" does not exist"),
        )),
    }
}

/// Converts table `oid` to `method` (nothing to do if it already is one).
pub(super) async fn set_access_method(
    session: &mut Session,
    oid: Oid,
    method: AccessMethod,
) -> SqlResult<()> {
    let def = table_def(session, oid)?;
    if def.access_method == method {
        return Ok(());
    }
    if session.statement_in_block() {
        return Err(SqlError::new(
            code::ACTIVE_SQL_TRANSACTION,
            "ALTER TABLE ... SET ACCESS METHOD cannot run inside a transaction block",
        ));
    }
    if method == AccessMethod::Columnar {
        check_columnar_can_hold(session, &def)?;
    }
    let batches = read_rows(session, &def).await?;
    let engine = session.engine.clone();
    let db = &engine.db;
    let mut new_def = (*def).clone();
    new_def.access_method = method;
    match method {
        AccessMethod::Columnar => {
            let segments = segments_of(&def, &batches)?;
            let images: Vec<(u64, Vec<u8>)> = segments
                .iter()
                .enumerate()
                .map(|(no, (batch, stats))| {
                    (segment_row_id(no as u32, 0), segment_to_ipc(batch, stats))
                })
                .collect();
            super::close_and_log_rebuild(
                session,
                &def,
                images.iter().map(|(id, b)| (*id, &b[..])),
            )?;
            // Storage and catalog change together under the catalog lock, so no statement sees
            // the new definition over the old storage.
            let mut catalog = engine.catalog.write();
            db.drop_table(oid as u64);
            let table = db.create_column_table(oid as u64, table_schema(&def));
            for (no, (batch, stats)) in segments.into_iter().enumerate() {
                table.load_segment(no as u32, batch, stats)?;
            }
            catalog.replace_table(new_def)?;
        }
        AccessMethod::Heap => {
            let types = def.column_types();
            let rows = encoded_rows(&def, &batches)?;
            super::close_and_log_rebuild(session, &def, rows.iter().map(|(id, r)| (*id, &r[..])))?;
            let mut catalog = engine.catalog.write();
            db.drop_table(oid as u64);
            let table = db.create_table(oid as u64, types);
            let refs: Vec<(u64, &[u8])> = rows.iter().map(|(id, r)| (*id, &r[..])).collect();
            for block in refs.chunks(4096) {
                table.load_rows(block);
            }
            catalog.replace_table(new_def)?;
        }
    }
    Ok(())
}

fn table_def(session: &Session, oid: Oid) -> SqlResult<Arc<TableDef>> {
    session
        .engine
        .catalog
        .read()
        .tables
        .get(&oid)
        .cloned()
        .ok_or_else(|| SqlError::internal("table vanished"))
}

/// Column tables have no indexes yet, so no keys, and nothing may reference them.
fn check_columnar_can_hold(session: &Session, def: &TableDef) -> SqlResult<()> {
    let catalog = session.engine.catalog.read();
    let keyed = def.constraints.iter().any(|c| {
        matches!(
            c.kind,
            ConstraintKind::PrimaryKey { .. }
                | ConstraintKind::Unique { .. }
                | ConstraintKind::ForeignKey { .. }
        )
    });
    if keyed
        || !catalog.table_indexes(def.oid).is_empty()
        || !catalog.referencing_foreign_keys(def.oid).is_empty()
    {
        return Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            format!(
                "cannot make \"{}\" a column table: column tables do not support indexes, \
                 PRIMARY KEY, UNIQUE or FOREIGN KEY constraints yet",
                def.name
            ),
        ));
    }
    Ok(())
}

/// Every row the statement sees, as batches in the table's column order.
async fn read_rows(session: &Session, def: &TableDef) -> SqlResult<Vec<RecordBatch>> {
    let stmt = crate::session::parse_sql(&format!("SELECT * FROM {}", qualified(def)))?
        .pop()
        .expect("one statement");
    let plan = crate::query::plan_statement(session.state(), &session.scope, stmt).await?;
    crate::query::execute_plan(session.state(), plan, None).await
}

/// The rows cut into segments of at most `SEGMENT_MAX_ROWS`, with their pruning statistics.
fn segments_of(
    def: &TableDef,
    batches: &[RecordBatch],
) -> SqlResult<Vec<(RecordBatch, Vec<shoal_storage::ColumnStats>)>> {
    let schema = table_schema(def);
    let all = concat_batches(&schema, batches)?;
    let mut segments = Vec::new();
    let mut offset = 0;
    while offset < all.num_rows() {
        let len = SEGMENT_MAX_ROWS.min(all.num_rows() - offset);
        // A copy rather than a slice, so each segment owns exactly its rows' memory.
        let piece = concat_batches(&schema, &[all.slice(offset, len)])?;
        let stats = segment_stats(&piece)?;
        segments.push((piece, stats));
        offset += len;
    }
    Ok(segments)
}

/// The rows in the row store's encoding, with fresh row ids.
fn encoded_rows(def: &TableDef, batches: &[RecordBatch]) -> SqlResult<Vec<(u64, Box<[u8]>)>> {
    let types = def.column_types();
    let mut rows = Vec::new();
    for batch in batches {
        let columns: Vec<Vec<Value>> = def
            .columns
            .iter()
            .enumerate()
            // Every column keeps its type, so no value goes through a zone.
            .map(|(i, c)| column_values(batch.column(i), &c.data_type, &c.name, &TimeZone::utc()))
            .collect::<SqlResult<_>>()?;
        for r in 0..batch.num_rows() {
            let values: Vec<Value> = columns.iter().map(|c| c[r].clone()).collect();
            rows.push((rows.len() as u64, row_codec::encode(&types, &values)));
        }
    }
    Ok(rows)
}
