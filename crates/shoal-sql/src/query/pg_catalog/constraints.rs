//! The pg_constraint catalog table and `constraint_definition`, the text of a constraint as
//! pg_constraint and pg_get_constraintdef show it.

use std::sync::Arc;

use datafusion::datasource::TableProvider;
use shoal_storage::catalog::{Catalog, ConstraintKind, ForeignKeyAction};

use crate::query::functions::quote_ident_if_needed;

use super::{b, i32v, namespace_oid, null_text, o, s, TableBuilder, BOOL, I32, OID, T};

pub fn constraint_definition(catalog: &Catalog, table_oid: u32, kind: &ConstraintKind) -> String {
    let table = catalog.tables.get(&table_oid);
    let names = |oid_: u32, cols: &[usize]| -> String {
        let t = catalog.tables.get(&oid_);
        cols.iter()
            .map(|c| {
                t.map(|t| quote_ident_if_needed(&t.columns[*c].name))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match kind {
        ConstraintKind::PrimaryKey { columns, .. } => {
            format!("PRIMARY KEY ({})", names(table_oid, columns))
        }
        ConstraintKind::Unique { columns, .. } => format!("UNIQUE ({})", names(table_oid, columns)),
        ConstraintKind::Check { expr_sql } => format!("CHECK (({expr_sql}))"),
        ConstraintKind::ForeignKey {
            columns,
            ref_table,
            ref_columns,
            on_delete,
            on_update,
        } => {
            let ref_name = catalog
                .tables
                .get(ref_table)
                .map(|t| quote_ident_if_needed(&t.name))
                .unwrap_or_default();
            let _ = table;
            // PostgreSQL shows the actions other than NO ACTION, ON UPDATE first.
            let action = |a: &ForeignKeyAction| match a {
                ForeignKeyAction::NoAction => None,
                ForeignKeyAction::Restrict => Some("RESTRICT"),
                ForeignKeyAction::Cascade => Some("CASCADE"),
                ForeignKeyAction::SetNull => Some("SET NULL"),
                ForeignKeyAction::SetDefault => Some("SET DEFAULT"),
            };
            let mut actions = String::new();
            if let Some(a) = action(on_update) {
                actions.push_str(&format!(" ON UPDATE {a}"));
            }
            if let Some(a) = action(on_delete) {
                actions.push_str(&format!(" ON DELETE {a}"));
            }
            format!(
                "FOREIGN KEY ({}) REFERENCES {}({}){actions}",
                names(table_oid, columns),
                ref_name,
                names(*ref_table, ref_columns)
            )
        }
    }
}

pub(super) fn pg_constraint(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("conname", T),
        ("connamespace", OID),
        ("contype", T),
        ("condeferrable", BOOL),
        ("condeferred", BOOL),
        ("convalidated", BOOL),
        ("conrelid", OID),
        ("contypid", OID),
        ("conindid", OID),
        ("conparentid", OID),
        ("confrelid", OID),
        ("confupdtype", T),
        ("confdeltype", T),
        ("confmatchtype", T),
        ("conislocal", BOOL),
        ("coninhcount", I32),
        ("connoinherit", BOOL),
        ("conkey", T),
        ("confkey", T),
        ("conbin", T),
        ("consrc", T),
    ]);
    for table in catalog.tables.values() {
        for c in &table.constraints {
            let (contype, index, ref_table, key, fkey) = match &c.kind {
                ConstraintKind::PrimaryKey { columns, index } => {
                    ("p", *index, 0, columns.clone(), vec![])
                }
                ConstraintKind::Unique { columns, index } => {
                    ("u", *index, 0, columns.clone(), vec![])
                }
                ConstraintKind::Check { .. } => ("c", 0, 0, vec![], vec![]),
                ConstraintKind::ForeignKey {
                    columns,
                    ref_table,
                    ref_columns,
                    ..
                } => ("f", 0, *ref_table, columns.clone(), ref_columns.clone()),
            };
            let arr = |cols: &[usize]| {
                if cols.is_empty() {
                    null_text()
                } else {
                    s(&format!(
                        "{{{}}}",
                        cols.iter()
                            .map(|c| (c + 1).to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    ))
                }
            };
            let src = constraint_definition(catalog, table.oid, &c.kind);
            t.row(vec![
                o(c.oid),
                s(&c.name),
                o(namespace_oid(catalog, &table.schema)),
                s(contype),
                b(false),
                b(false),
                b(true),
                o(table.oid),
                o(0),
                o(index),
                o(0),
                o(ref_table),
                s("a"),
                s("a"),
                s("s"),
                b(true),
                i32v(0),
                b(false),
                arr(&key),
                arr(&fkey),
                s(&src),
                s(&src),
            ]);
        }
    }
    t.build()
}
