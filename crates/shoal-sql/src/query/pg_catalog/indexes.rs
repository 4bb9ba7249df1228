//! The catalog tables of indexes: pg_index and the pg_indexes view, and `index_definition`,
//! the CREATE INDEX text that pg_indexes and pg_get_indexdef show.

use std::sync::Arc;

use datafusion::datasource::TableProvider;
use shoal_storage::catalog::Catalog;

use datafusion::arrow::datatypes::{DataType as ArrowType, Field};
use datafusion::common::ScalarValue;
use shoal_storage::types::DataType;

use super::{b, i16v, null_text, o, s, TableBuilder, BOOL, I16, OID, T};
use crate::types::oid;

fn int2vector(values: impl IntoIterator<Item = i16>) -> ScalarValue {
    let values: Vec<ScalarValue> = values.into_iter().map(i16v).collect();
    ScalarValue::List(ScalarValue::new_list_nullable(&values, &I16))
}

fn oidvector(values: impl IntoIterator<Item = u32>) -> ScalarValue {
    let values: Vec<ScalarValue> = values.into_iter().map(o).collect();
    ScalarValue::List(ScalarValue::new_list_nullable(&values, &OID))
}

fn list_of(element: ArrowType) -> ArrowType {
    ArrowType::List(Arc::new(Field::new_list_field(element, true)))
}

/// The default btree operator class of a column type, as PostgreSQL 15 numbers them.
fn default_btree_opclass(t: &DataType) -> u32 {
    match t {
        DataType::Bool => 10003,
        DataType::Int16 => 1979,
        DataType::Int32 => 1978,
        DataType::Int64 => 3124,
        DataType::Float32 => 10012,
        DataType::Float64 => 3123,
        DataType::Numeric { .. } => 3125,
        DataType::Text | DataType::Varchar(_) => 3126,
        DataType::Char(_) => 10004,
        DataType::Bytea => 10006,
        DataType::Date => 3122,
        DataType::Time => 10038,
        DataType::Timestamp => 3128,
        DataType::TimestampTz => 3127,
        DataType::Interval => 10022,
        DataType::Uuid => 10065,
        DataType::Jsonb => 10088,
        DataType::Array(_) => 10000,
        _ => 0,
    }
}

/// The collation of a key column: the default one (100) for the string types, none (0) else.
fn key_collation(t: &DataType) -> u32 {
    match t {
        DataType::Text | DataType::Varchar(_) | DataType::Char(_) => 100,
        _ => 0,
    }
}

pub(super) fn pg_index(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("indexrelid", OID),
        ("indrelid", OID),
        ("indnatts", I16),
        ("indnkeyatts", I16),
        ("indisunique", BOOL),
        ("indnullsnotdistinct", BOOL),
        ("indisprimary", BOOL),
        ("indisexclusion", BOOL),
        ("indimmediate", BOOL),
        ("indisclustered", BOOL),
        ("indisvalid", BOOL),
        ("indcheckxmin", BOOL),
        ("indisready", BOOL),
        ("indislive", BOOL),
        ("indisreplident", BOOL),
        ("indkey", list_of(I16)),
        ("indcollation", list_of(OID)),
        ("indclass", list_of(OID)),
        ("indoption", list_of(I16)),
        ("indexprs", T),
        ("indpred", T),
    ])
    .with_pg_type("indkey", oid::INT2VECTOR)
    .with_pg_type("indcollation", oid::OIDVECTOR)
    .with_pg_type("indclass", oid::OIDVECTOR)
    .with_pg_type("indoption", oid::INT2VECTOR);
    for index in catalog.indexes.values() {
        let n = index.columns.len().max(index.key_sql.len()) as i16;
        // A key part that is an expression is column 0, its type unknown here.
        let key_types: Vec<Option<&DataType>> = match catalog.tables.get(&index.table) {
            Some(table) if !index.columns.is_empty() => index
                .columns
                .iter()
                .map(|c| table.columns.get(*c).map(|col| &col.data_type))
                .collect(),
            _ => vec![None; n as usize],
        };
        let keys: Vec<i16> = if index.columns.is_empty() {
            vec![0; n as usize]
        } else {
            index.columns.iter().map(|c| *c as i16 + 1).collect()
        };
        t.row(vec![
            o(index.oid),
            o(index.table),
            i16v(n),
            i16v(n),
            b(index.unique),
            b(false),
            b(index.primary),
            b(false),
            b(true),
            b(false),
            b(true),
            b(false),
            b(true),
            b(true),
            b(false),
            int2vector(keys),
            oidvector(key_types.iter().map(|t| t.map_or(0, key_collation))),
            oidvector(key_types.iter().map(|t| t.map_or(0, default_btree_opclass))),
            int2vector(key_types.iter().map(|_| 0)),
            null_text(),
            null_text(),
        ]);
    }
    t.build()
}

pub fn index_definition(catalog: &Catalog, index_oid: u32) -> Option<String> {
    let index = catalog.indexes.get(&index_oid)?;
    let table = catalog.tables.get(&index.table)?;
    let keys = index_keys(catalog, index_oid)?;
    let predicate = index
        .predicate_sql
        .as_ref()
        .map(|p| format!(" WHERE ({p})"))
        .unwrap_or_default();
    Some(format!(
        "CREATE {}INDEX {} ON {}.{} USING btree ({}){predicate}",
        if index.unique { "UNIQUE " } else { "" },
        index.name,
        table.schema,
        table.name,
        keys.join(", ")
    ))
}

/// The index's key parts as SQL: column keys by the columns' current names (they may have
/// been renamed); expression keys as written.
fn index_keys(catalog: &Catalog, index_oid: u32) -> Option<Vec<&str>> {
    let index = catalog.indexes.get(&index_oid)?;
    let table = catalog.tables.get(&index.table)?;
    Some(if index.columns.is_empty() {
        index.key_sql.iter().map(String::as_str).collect()
    } else {
        index
            .columns
            .iter()
            .map(|c| table.columns[*c].name.as_str())
            .collect()
    })
}

/// `pg_get_indexdef(index, n, ...)` with n > 0: the definition of key part n alone (what
/// psql's `\d INDEX` shows per column).
pub fn index_key_definition(catalog: &Catalog, index_oid: u32, key_no: usize) -> Option<String> {
    let keys = index_keys(catalog, index_oid)?;
    keys.get(key_no.checked_sub(1)?).map(|k| k.to_string())
}

pub(super) fn pg_indexes(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("schemaname", T),
        ("tablename", T),
        ("indexname", T),
        ("tablespace", T),
        ("indexdef", T),
    ]);
    for index in catalog.indexes.values() {
        if let Some(table) = catalog.tables.get(&index.table) {
            t.row(vec![
                s(&table.schema),
                s(&table.name),
                s(&index.name),
                null_text(),
                s(&index_definition(catalog, index.oid).unwrap_or_default()),
            ]);
        }
    }
    t.build()
}
