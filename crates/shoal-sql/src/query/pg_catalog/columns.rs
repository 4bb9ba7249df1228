//! The catalog tables of columns: pg_attribute (the columns of tables, and the key columns of
//! indexes) and pg_attrdef (column defaults).

use std::sync::Arc;

use datafusion::datasource::TableProvider;
use shoal_storage::catalog::Catalog;
use shoal_storage::catalog_privileges::column_acl_text;
use shoal_storage::types::DataType;

use super::{b, i16v, i32v, null_text, o, s, TableBuilder, BOOL, I16, I32, OID, T};
use crate::types::{oid, pg_type_of};

pub(super) fn pg_attribute(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("attrelid", OID),
        ("attname", T),
        ("atttypid", OID),
        ("attstattarget", I32),
        ("attlen", I16),
        ("attnum", I16),
        ("attndims", I32),
        ("atttypmod", I32),
        ("attnotnull", BOOL),
        ("atthasdef", BOOL),
        ("atthasmissing", BOOL),
        ("attidentity", T),
        ("attgenerated", T),
        ("attisdropped", BOOL),
        ("attislocal", BOOL),
        ("attinhcount", I32),
        ("attcollation", OID),
        ("attcompression", T),
        ("attstorage", T),
        ("attalign", T),
        ("attacl", T),
        ("attoptions", super::text_list()),
        ("attmissingval", T),
    ]);
    for table in catalog.tables.values() {
        for (i, c) in table.columns.iter().enumerate() {
            let (type_oid, typmod) = pg_type_of(&c.data_type);
            let identity = match &c.identity {
                Some(id) if id.always => "a",
                Some(_) => "d",
                None => "",
            };
            let collation = if matches!(type_oid, oid::TEXT | oid::VARCHAR | oid::BPCHAR) {
                100
            } else {
                0
            };
            t.row(vec![
                o(table.oid),
                s(&c.name),
                o(type_oid),
                i32v(-1),
                i16v(-1),
                i16v(i as i16 + 1),
                i32v(0),
                i32v(typmod),
                b(c.not_null),
                // An identity column's values come from its sequence, not from a default.
                b(c.default_sql.is_some() && c.identity.is_none()),
                b(false),
                s(identity),
                s(""),
                b(false),
                b(true),
                i32v(0),
                o(collation),
                s(""),
                s(super::types::storage_of(type_oid)),
                s("i"),
                column_acl_text(catalog, table.oid, &c.name).map_or_else(null_text, |a| s(&a)),
                null_text(),
                null_text(),
            ]);
        }
    }
    for index in catalog.indexes.values() {
        if let Some(table) = catalog.tables.get(&index.table) {
            for (i, col) in index.columns.iter().enumerate() {
                let c = &table.columns[*col];
                let (type_oid, typmod) = pg_type_of(&c.data_type);
                t.row(vec![
                    o(index.oid),
                    s(&c.name),
                    o(type_oid),
                    i32v(-1),
                    i16v(-1),
                    i16v(i as i16 + 1),
                    i32v(0),
                    i32v(typmod),
                    b(false),
                    b(false),
                    b(false),
                    s(""),
                    s(""),
                    b(false),
                    b(true),
                    i32v(0),
                    o(0),
                    s(""),
                    s(super::types::storage_of(type_oid)),
                    s("i"),
                    null_text(),
                    null_text(),
                    null_text(),
                ]);
            }
        }
    }
    t.build()
}

pub(super) fn pg_attrdef(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[("oid", OID), ("adrelid", OID), ("adnum", I16), ("adbin", T)]);
    for table in catalog.tables.values() {
        for (i, c) in table.columns.iter().enumerate() {
            if let (Some(d), None) = (&c.default_sql, &c.identity) {
                t.row(vec![
                    o(attrdef_oid(table.oid, i)),
                    o(table.oid),
                    i16v(i as i16 + 1),
                    s(&default_text(d, &c.data_type)),
                ]);
            }
        }
    }
    t.build()
}

/// The OID of the default of column `index` of `table` in pg_attrdef.
pub(super) fn attrdef_oid(table: u32, index: usize) -> u32 {
    table.wrapping_mul(1000).wrapping_add(index as u32)
}

/// A column default as PostgreSQL shows it (pg_get_expr of pg_attrdef.adbin,
/// information_schema.columns.column_default): the expression as stored, with a constant
/// written as PostgreSQL deparses it. A number keeps its literal's type (int4, int8 past int4,
/// numeric with a point), a quoted literal takes the column's; a non-negative int4, a
/// non-negative numeric with a point and a boolean show bare, the rest quoted with a cast
/// (`'anon'::character varying`, `'-1'::integer`, `'5'::bigint`). nextval's argument shows as
/// a regclass; an operator expression in parentheses.
pub fn default_text(default_sql: &str, column_type: &DataType) -> String {
    use datafusion::sql::sqlparser::ast::{Expr, UnaryOperator, Value};
    let parsed = datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql(default_sql)
    .and_then(|mut p| p.parse_expr());
    let Ok(expr) = parsed else {
        return default_sql.to_string();
    };
    let number_type = |text: &str| {
        if text.parse::<i32>().is_ok() {
            DataType::Int32
        } else if text.parse::<i64>().is_ok() {
            DataType::Int64
        } else {
            DataType::Numeric {
                precision: None,
                scale: None,
            }
        }
    };
    let (value, value_type) = match &expr {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(text) => (text.clone(), column_type.clone()),
            Value::Number(text, _) => (text.clone(), number_type(text)),
            _ => return default_sql.to_string(),
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: inner,
        } => match inner.as_ref() {
            Expr::Value(v) => match &v.value {
                Value::Number(text, _) => {
                    let text = format!("-{text}");
                    let t = number_type(&text);
                    (text, t)
                }
                _ => return default_sql.to_string(),
            },
            _ => return default_sql.to_string(),
        },
        Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("nextval") => {
            let text = expr.to_string();
            return match text.strip_suffix("')") {
                Some(head) if !text.contains("::") => format!("{head}'::regclass)"),
                _ => text,
            };
        }
        Expr::BinaryOp { .. } => return format!("({default_sql})"),
        _ => return default_sql.to_string(),
    };
    constant_text(&value, &value_type)
}

/// A constant of type `t` as PostgreSQL deparses it (see `default_text`).
fn constant_text(value: &str, t: &DataType) -> String {
    let negative = value.starts_with('-');
    match t {
        DataType::Int32 if !negative && value.parse::<i32>().is_ok() => return value.to_string(),
        DataType::Numeric { .. }
            if !negative && value.parse::<f64>().is_ok() && value.contains(['.', 'e', 'E']) =>
        {
            return value.to_string()
        }
        DataType::Bool => match value.to_ascii_lowercase().as_str() {
            "t" | "true" | "yes" | "on" | "1" => return "true".to_string(),
            "f" | "false" | "no" | "off" | "0" => return "false".to_string(),
            _ => {}
        },
        _ => {}
    }
    // format_type without a typmod, as the constant has none (char is bpchar then).
    let label = match t {
        DataType::Char(_) => "bpchar".to_string(),
        t => crate::query::pg_catalog::format_type_oid(pg_type_of(t).0, -1)
            .unwrap_or_else(|| "text".to_string()),
    };
    format!("'{}'::{label}", value.replace('\'', "''"))
}
