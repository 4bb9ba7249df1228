//! The catalog tables of indexes: pg_index and the pg_indexes view, and `index_definition`,
//! the CREATE INDEX text that pg_indexes and pg_get_indexdef show.

use std::sync::Arc;

use datafusion::datasource::TableProvider;
use shoal_storage::catalog::Catalog;

use super::{b, i16v, null_text, o, s, TableBuilder, BOOL, I16, OID, T};

fn int2vector(cols: &[usize]) -> String {
    cols.iter()
        .map(|c| (c + 1).to_string())
        .collect::<Vec<_>>()
        .join(" ")
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
        ("indkey", T),
        ("indcollation", T),
        ("indclass", T),
        ("indoption", T),
        ("indexprs", T),
        ("indpred", T),
    ]);
    for index in catalog.indexes.values() {
        let n = index.columns.len().max(index.key_sql.len()) as i16;
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
            s(&int2vector(&index.columns)),
            s(""),
            s(""),
            s(""),
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
