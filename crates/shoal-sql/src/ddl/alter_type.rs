//! `ALTER TABLE t ALTER COLUMN c [SET DATA] TYPE newtype [USING expr]`: rewrites every row with
//! the column converted, as PostgreSQL does.
//!
//! Without USING the column converts only through an assignment cast (integer to bigint,
//! anything to text); otherwise PostgreSQL asks for USING (42804). The new values come from a
//! query over the table (so USING may use any column and any function) and are stored with
//! INSERT's assignment rules, which report bad values as PostgreSQL does (22P02, 22003, 22001).
//! Everything is computed and checked (NOT NULL, unique indexes) before anything changes, so a
//! failure leaves the table as it was. The table is then rebuilt under the same oid the way
//! `SET ACCESS METHOD` rebuilds one: its image is logged before the catalog change, so a crash
//! leaves either the old table or the new one. It fails (55P03) rather than lose a change
//! another session has not committed yet or committed after the rows were read
//! (`close_and_log_rebuild`). Inside a transaction block, ROLLBACK puts the old table back
//! (`undo`); the block must not have changed rows of the table before (their redo names rows
//! of the old table).

use std::collections::HashSet;

use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog::{Oid, TableDef};
use shoal_storage::types::{DataType, Value};
use shoal_storage::{key_codec, row_codec};

use super::index_predicate::storage_index;
use crate::dml::{column_values, qualified};
use crate::error::{code, SqlError, SqlResult};
use crate::session::Session;
use crate::types::format_type;

/// Rows loaded into the rebuilt table per call.
const LOAD_ROWS_PER_BLOCK: usize = 4096;

pub(super) async fn alter_column_type(
    session: &Session,
    txn: &shoal_storage::Transaction,
    def: &TableDef,
    pos: usize,
    data_type: &ast::DataType,
    using: Option<&ast::Expr>,
) -> SqlResult<()> {
    let new_type = super::column_type(session, data_type)?;
    let column = def.columns[pos].name.clone();
    let old_type = &def.columns[pos].data_type;
    if using.is_none() && !assignment_cast_exists(old_type, &new_type) {
        return Err(SqlError::new(
            code::DATATYPE_MISMATCH,
            format!(
                "column \"{column}\" cannot be cast automatically to type {}",
                format_type(&new_type)
            ),
        )
        .with_hint(format!(
            "You might need to specify \"USING {column}::{}\".",
            format_type(&new_type)
        )));
    }
    // The transaction's own row changes are logged at its commit, naming rows as the old
    // table numbers them; the rebuilt table numbers them anew, so replay could not apply them.
    if txn.writes_table(def.oid as u64) {
        return Err(SqlError::unsupported(
            "ALTER TABLE ... ALTER COLUMN ... TYPE of a table the same transaction has changed rows of",
        ));
    }
    let mut new_def = def.clone();
    new_def.columns[pos].data_type = new_type;
    let rows = converted_rows(session, def, &new_def, pos, using).await?;
    check_unique_indexes(session, &new_def, &rows)?;
    install(session, &new_def, &rows)
}

/// Every row the statement sees, with the column converted to its new type.
async fn converted_rows(
    session: &Session,
    def: &TableDef,
    new_def: &TableDef,
    pos: usize,
    using: Option<&ast::Expr>,
) -> SqlResult<Vec<Vec<Value>>> {
    let column = &new_def.columns[pos];
    let expr = match using {
        Some(e) => e.to_string(),
        None => crate::dml::quote_ident(&column.name),
    };
    let sql = format!(
        "SELECT *, ({expr}) AS \"shoal new value\" FROM {}",
        qualified(def)
    );
    let batches = crate::query::run_generated_sql(session.state(), &session.scope, &sql).await?;
    let zone = session.settings.time_zone();
    let mut rows = Vec::new();
    for batch in &batches {
        let mut columns: Vec<Vec<Value>> = def
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| column_values(batch.column(i), &c.data_type, &c.name, zone))
            .collect::<SqlResult<_>>()?;
        columns[pos] = column_values(
            batch.column(def.columns.len()),
            &column.data_type,
            &column.name,
            zone,
        )?;
        for r in 0..batch.num_rows() {
            let row: Vec<Value> = columns.iter().map(|c| c[r].clone()).collect();
            if column.not_null && row[pos].is_null() {
                return Err(SqlError::new(
                    code::NOT_NULL_VIOLATION,
                    format!(
                        "column \"{}\" of relation \"{}\" contains null values",
                        column.name, def.name
                    ),
                ));
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The unique indexes must still hold for the converted values (two reals may round to one
/// integer); PostgreSQL reports it as rebuilding the index.
fn check_unique_indexes(
    session: &Session,
    new_def: &TableDef,
    rows: &[Vec<Value>],
) -> SqlResult<()> {
    let indexes = session.engine.catalog.read().table_indexes(new_def.oid);
    for idx in indexes.iter().filter(|i| i.unique) {
        let Some(storage) = storage_index(idx, new_def)? else {
            continue;
        };
        let mut seen = HashSet::new();
        for row in rows {
            let key: Vec<Value> = storage.columns.iter().map(|c| row[*c].clone()).collect();
            if key.iter().any(Value::is_null)
                || storage.predicate.as_ref().is_some_and(|p| !(p.0)(row))
            {
                continue;
            }
            if !seen.insert(key_codec::encode_key(&key)) {
                return Err(crate::dml::duplicate_index_key(
                    new_def,
                    &idx.name,
                    &storage.columns,
                    &key,
                    session.settings.time_zone(),
                ));
            }
        }
    }
    Ok(())
}

/// Logs the new image, then swaps storage and catalog together under the catalog lock, so no
/// statement sees the new definition over the old rows.
fn install(session: &Session, new_def: &TableDef, rows: &[Vec<Value>]) -> SqlResult<()> {
    let oid: Oid = new_def.oid;
    let types = new_def.column_types();
    let encoded: Vec<(u64, Box<[u8]>)> = rows
        .iter()
        .enumerate()
        .map(|(id, r)| (id as u64, row_codec::encode(&types, r)))
        .collect();
    let engine = session.engine.clone();
    super::close_and_log_rebuild(
        session,
        new_def,
        encoded.iter().map(|(id, r)| (*id, &r[..])),
    )?;
    let mut catalog = engine.catalog.write();
    let indexes = catalog.table_indexes(oid);
    engine.db.drop_table(oid as u64);
    let table = engine.db.create_table(oid as u64, types);
    for idx in &indexes {
        if let Some(storage) = storage_index(idx, new_def)? {
            table.add_index(storage)?;
        }
    }
    let refs: Vec<(u64, &[u8])> = encoded.iter().map(|(id, r)| (*id, &r[..])).collect();
    for block in refs.chunks(LOAD_ROWS_PER_BLOCK) {
        table.load_rows(block);
    }
    catalog.replace_table(new_def.clone())?;
    Ok(())
}

/// Whether PostgreSQL converts a column of type `from` to `to` without USING: through an
/// implicit or assignment cast. Numbers convert among themselves, dates and timestamps among
/// themselves, and every type to a string type; a string converts to nothing else.
fn assignment_cast_exists(from: &DataType, to: &DataType) -> bool {
    let textual =
        |t: &DataType| matches!(t, DataType::Text | DataType::Varchar(_) | DataType::Char(_));
    let numeric = |t: &DataType| {
        matches!(
            t,
            DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Float32
                | DataType::Float64
                | DataType::Numeric { .. }
        )
    };
    let datetime = |t: &DataType| {
        matches!(
            t,
            DataType::Date | DataType::Timestamp | DataType::TimestampTz
        )
    };
    textual(to)
        || from == to
        || (numeric(from) && numeric(to))
        || (datetime(from) && datetime(to))
        || std::mem::discriminant(from) == std::mem::discriminant(to)
}
