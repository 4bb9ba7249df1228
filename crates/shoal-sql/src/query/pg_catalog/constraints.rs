//! The pg_constraint catalog table and `constraint_definition`, the text of a constraint as
//! pg_constraint and pg_get_constraintdef show it.

use std::sync::Arc;

use datafusion::datasource::TableProvider;
use shoal_storage::catalog::{Catalog, ConstraintKind, ConstraintTiming, ForeignKeyAction};

use crate::query::functions::quote_ident_if_needed;

use datafusion::arrow::datatypes::{DataType as ArrowType, Field};
use datafusion::common::ScalarValue;

use super::{b, i16v, i32v, namespace_oid, o, s, TableBuilder, BOOL, I32, OID, T};

/// A constraint as pg_get_constraintdef prints it; `visible` says whether the search path finds
/// a relation by its bare name (a referenced table that it does not is named with its schema).
pub fn constraint_definition(
    catalog: &Catalog,
    table_oid: u32,
    kind: &ConstraintKind,
    visible: &dyn Fn(u32) -> bool,
) -> String {
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
            timing,
        } => {
            let ref_name = catalog
                .tables
                .get(ref_table)
                .map(|t| match visible(t.oid) {
                    true => quote_ident_if_needed(&t.name),
                    false => format!(
                        "{}.{}",
                        quote_ident_if_needed(&t.schema),
                        quote_ident_if_needed(&t.name)
                    ),
                })
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
            match timing {
                ConstraintTiming::NotDeferrable => {}
                ConstraintTiming::Immediate => actions.push_str(" DEFERRABLE"),
                ConstraintTiming::Deferred => actions.push_str(" DEFERRABLE INITIALLY DEFERRED"),
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
        ("conkey", int2_list()),
        ("confkey", int2_list()),
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
                ConstraintKind::Check { expr_sql } => (
                    "c",
                    0,
                    0,
                    crate::ddl::columns_named_in(table, expr_sql),
                    vec![],
                ),
                ConstraintKind::ForeignKey {
                    columns,
                    ref_table,
                    ref_columns,
                    ..
                } => ("f", 0, *ref_table, columns.clone(), ref_columns.clone()),
            };
            // Column numbers, from 1; NULL where the constraint names no columns.
            let arr = |cols: &[usize]| {
                if cols.is_empty() {
                    ScalarValue::try_from(&int2_list()).expect("a NULL list")
                } else {
                    let numbers: Vec<ScalarValue> =
                        cols.iter().map(|c| i16v(*c as i16 + 1)).collect();
                    ScalarValue::List(ScalarValue::new_list_nullable(&numbers, &ArrowType::Int16))
                }
            };
            // pg_constraint's action codes; a space where the constraint is no foreign key.
            let action = |a: Option<&ForeignKeyAction>| match a {
                None => " ",
                Some(ForeignKeyAction::NoAction) => "a",
                Some(ForeignKeyAction::Restrict) => "r",
                Some(ForeignKeyAction::Cascade) => "c",
                Some(ForeignKeyAction::SetNull) => "n",
                Some(ForeignKeyAction::SetDefault) => "d",
            };
            let (on_update, on_delete, timing) = match &c.kind {
                ConstraintKind::ForeignKey {
                    on_update,
                    on_delete,
                    timing,
                    ..
                } => (Some(on_update), Some(on_delete), *timing),
                _ => (None, None, ConstraintTiming::NotDeferrable),
            };
            let src = constraint_definition(catalog, table.oid, &c.kind, &|_| true);
            t.row(vec![
                o(c.oid),
                s(&c.name),
                o(namespace_oid(catalog, &table.schema)),
                s(contype),
                b(timing.deferrable()),
                b(timing == ConstraintTiming::Deferred),
                b(true),
                o(table.oid),
                o(0),
                o(index),
                o(0),
                o(ref_table),
                s(action(on_update)),
                s(action(on_delete)),
                s(if on_update.is_some() { "s" } else { " " }),
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

/// An `int2[]` column (pg_constraint.conkey).
fn int2_list() -> ArrowType {
    ArrowType::List(Arc::new(Field::new_list_field(ArrowType::Int16, true)))
}
