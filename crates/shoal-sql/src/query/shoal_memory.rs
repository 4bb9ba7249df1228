//! `pg_catalog.shoal_memory`: how much RAM each table holds, for users sizing a server. One
//! row per table with its live row count (as the statement's snapshot sees it), the bytes its
//! rows and its indexes hold, and the bytes per live row. The same estimates answer
//! `pg_relation_size`, `pg_indexes_size` and `pg_total_relation_size`. Building the view walks
//! every table, so it costs a scan of the database: a tool for people, not for hot paths. The
//! rows are computed when the view is scanned, not when a statement using it is planned, so a
//! prepared statement sees the data as of each execution.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::{AccessMethod, Oid};
use shoal_storage::{Database, TableMemory};

use crate::query::pg_catalog::{i64v, s, TableBuilder};
use crate::query::scope::PlanScope;

/// The memory of table `oid`, row or column; None if there is no such table. Column tables
/// have no indexes: all their memory is rows.
pub fn table_memory(db: &Database, oid: Oid) -> Option<TableMemory> {
    if let Some(table) = db.table(oid as u64) {
        return Some(table.memory());
    }
    let table = db.column_table(oid as u64)?;
    Some(TableMemory {
        rows_bytes: table.memory_bytes(),
        index_bytes: 0,
    })
}

const COLUMNS: &[(&str, ArrowType)] = &[
    ("schemaname", ArrowType::Utf8),
    ("tablename", ArrowType::Utf8),
    ("kind", ArrowType::Utf8),
    ("live_rows", ArrowType::Int64),
    ("rows_bytes", ArrowType::Int64),
    ("index_bytes", ArrowType::Int64),
    ("total_bytes", ArrowType::Int64),
    ("bytes_per_row", ArrowType::Int64),
];

pub fn shoal_memory(scope: &Arc<PlanScope>) -> Arc<dyn TableProvider> {
    let scope = scope.clone();
    crate::query::pg_catalog::live_view(move || memory_rows(&scope))
}

/// The view's rows as the statement's snapshot sees the tables.
fn memory_rows(scope: &PlanScope) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(COLUMNS);
    let snapshot = scope.snapshot();
    let db = &scope.engine.db;
    // Copied out so the catalog lock is not held while the tables are walked.
    let tables: Vec<_> = scope
        .engine
        .catalog
        .read_recursive()
        .tables
        .values()
        .cloned()
        .collect();
    for table in tables {
        let (kind, live_rows) = match table.access_method {
            AccessMethod::Heap => (
                "heap",
                db.table(table.oid as u64)
                    .map(|t| t.live_row_count(&snapshot)),
            ),
            AccessMethod::Columnar => (
                "columnar",
                db.column_table(table.oid as u64)
                    .map(|t| t.live_row_count(&snapshot)),
            ),
        };
        let (Some(live_rows), Some(memory)) = (live_rows, table_memory(db, table.oid)) else {
            continue;
        };
        let per_row = match live_rows {
            0 => ScalarValue::Int64(None),
            n => i64v((memory.total_bytes() / n) as i64),
        };
        t.row(vec![
            s(&table.schema),
            s(&table.name),
            s(kind),
            i64v(live_rows as i64),
            i64v(memory.rows_bytes as i64),
            i64v(memory.index_bytes as i64),
            i64v(memory.total_bytes() as i64),
            per_row,
        ]);
    }
    t.build()
}
