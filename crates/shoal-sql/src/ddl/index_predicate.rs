//! The WHERE clause of a partial unique index, compiled for storage. Storage keeps a unique
//! partial index like any other, but only for the rows the clause accepts; it asks through a
//! `RowPredicate`, which evaluates the clause here with DataFusion on a one-row batch. The
//! clause is compiled without a session (recovery rebuilds these indexes before any session
//! exists), so it may use DataFusion's and Shoal's built-in functions but nothing that needs a
//! session or a snapshot, which PostgreSQL forbids in index predicates anyway (IMMUTABLE only).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::DFSchema;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::physical_expr::PhysicalExpr;
use shoal_storage::catalog::{IndexDef as CatalogIndexDef, TableDef};
use shoal_storage::types::{DataType, Value};
use shoal_storage::RowPredicate;

use crate::error::{code, SqlError, SqlResult};
use crate::query::pg_errors::from_datafusion;

/// Compiles `sql` (a partial index's WHERE clause) over the columns of `def`.
pub fn compile(def: &TableDef, sql: &str) -> SqlResult<RowPredicate> {
    let schema = crate::query::provider::table_schema(def);
    let df_schema = DFSchema::try_from(schema.as_ref().clone()).map_err(from_datafusion)?;
    let mut state = SessionStateBuilder::new().with_default_features().build();
    state.config_mut().options_mut().sql_parser.dialect =
        datafusion::common::config::Dialect::PostgreSQL;
    // PostgreSQL allows only immutable functions in an index predicate, so no session zone.
    let zone = crate::timezone::SessionZone::default();
    crate::query::builtins::register(&mut state, &zone);
    let expr = state
        .create_logical_expr(sql, &df_schema)
        .map_err(from_datafusion)?;
    let physical = state
        .create_physical_expr(expr, &df_schema)
        .map_err(from_datafusion)?;
    let result_type = physical.data_type(&schema).map_err(from_datafusion)?;
    if result_type != ArrowType::Boolean && result_type != ArrowType::Null {
        return Err(SqlError::new(
            code::DATATYPE_MISMATCH,
            format!(
                "argument of WHERE must be type boolean, not type {}",
                crate::dml::pg_type_name_of_arrow(&result_type)
            ),
        ));
    }
    let types = def.column_types();
    // Evaluating a row of NULLs once surfaces clauses that cannot run at all now, at CREATE
    // INDEX, rather than as rows silently left out of the index.
    evaluate(&physical, &schema, &types, &vec![Value::Null; types.len()])?;
    Ok(RowPredicate(Arc::new(move |row: &[Value]| {
        // A clause that fails on a row leaves the row out of the index, as NULL does.
        evaluate(&physical, &schema, &types, row).unwrap_or(false)
    })))
}

fn evaluate(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &datafusion::arrow::datatypes::SchemaRef,
    types: &[DataType],
    row: &[Value],
) -> SqlResult<bool> {
    let arrays: Vec<ArrayRef> = row
        .iter()
        .zip(types)
        .map(|(v, t)| crate::types::scalar_from_value(v, t).to_array())
        .collect::<Result<_, _>>()
        .map_err(from_datafusion)?;
    let batch = RecordBatch::try_new(schema.clone(), arrays)?;
    let out = expr
        .evaluate(&batch)
        .and_then(|v| v.into_array(1))
        .map_err(from_datafusion)?;
    Ok(match out.data_type() {
        ArrowType::Boolean => out.is_valid(0) && out.as_boolean().value(0),
        _ => false,
    })
}

/// The storage index for a catalog index, if storage keeps one: not for expression indexes or
/// non-unique partial ones, which live in the catalog only (queries scan the table anyway).
pub fn storage_index(
    idx: &CatalogIndexDef,
    table: &TableDef,
) -> SqlResult<Option<shoal_storage::IndexDef>> {
    if idx.columns.is_empty() || (idx.predicate_sql.is_some() && !idx.unique) {
        return Ok(None);
    }
    let predicate = match &idx.predicate_sql {
        Some(sql) => Some(compile(table, sql)?),
        None => None,
    };
    Ok(Some(shoal_storage::IndexDef {
        id: idx.oid as u64,
        name: idx.name.clone(),
        columns: idx.columns.clone(),
        unique: idx.unique,
        predicate,
    }))
}
