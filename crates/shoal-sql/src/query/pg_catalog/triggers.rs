//! pg_trigger, and the definition text pg_get_triggerdef (psql's `\d TABLE`) prints.

use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::{Catalog, TableDef};
use shoal_storage::catalog_triggers::{TriggerDef, TriggerEvent, TriggerTiming};

use super::{b, i16v, null_text, o, s};

/// PostgreSQL's tgtype bits.
const ROW: i16 = 1;
const BEFORE: i16 = 2;
const INSERT: i16 = 4;
const DELETE: i16 = 8;
const UPDATE: i16 = 16;
const TRUNCATE: i16 = 32;

pub(super) fn pg_trigger(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let columns = super::empty::columns_of("pg_trigger").expect("pg_trigger's columns are listed");
    let mut t = super::empty::declared_table(columns);
    for def in catalog.tables.values() {
        for trigger in &def.triggers {
            let mut tgtype = 0;
            if trigger.for_each_row {
                tgtype |= ROW;
            }
            if trigger.timing == TriggerTiming::Before {
                tgtype |= BEFORE;
            }
            for e in &trigger.events {
                tgtype |= match e {
                    TriggerEvent::Insert => INSERT,
                    TriggerEvent::Delete => DELETE,
                    TriggerEvent::Update => UPDATE,
                    TriggerEvent::Truncate => TRUNCATE,
                };
            }
            let attnums: Vec<ScalarValue> = trigger
                .update_columns
                .iter()
                .filter_map(|c| def.column_index(c))
                .map(|i| i16v(i as i16 + 1))
                .collect();
            let args: Vec<u8> = trigger
                .args
                .iter()
                .flat_map(|a| a.bytes().chain(std::iter::once(0)))
                .collect();
            t.row(vec![
                o(trigger.oid),
                o(def.oid),
                o(0),
                s(&trigger.name),
                o(trigger.function),
                i16v(tgtype),
                s(if trigger.enabled { "O" } else { "D" }),
                b(false),
                o(0),
                o(0),
                o(0),
                b(false),
                b(false),
                i16v(trigger.args.len() as i16),
                ScalarValue::List(ScalarValue::new_list_nullable(
                    &attnums,
                    &datafusion::arrow::datatypes::DataType::Int16,
                )),
                ScalarValue::Binary(Some(args)),
                match &trigger.when_sql {
                    Some(w) => s(w),
                    None => null_text(),
                },
                null_text(),
                null_text(),
            ]);
        }
    }
    t.build()
}

/// `pg_get_triggerdef(oid [, pretty])`: the CREATE TRIGGER that makes the trigger again; the
/// table is schema-qualified unless `pretty`.
pub fn trigger_definition(catalog: &Catalog, oid: u32, pretty: bool) -> Option<String> {
    let (def, trigger): (&Arc<TableDef>, &TriggerDef) = catalog
        .tables
        .values()
        .find_map(|d| d.triggers.iter().find(|t| t.oid == oid).map(|t| (d, t)))?;
    let quote = crate::query::functions::quote_ident_if_needed;
    let mut events = Vec::new();
    for (event, word) in [
        (TriggerEvent::Insert, "INSERT"),
        (TriggerEvent::Delete, "DELETE"),
        (TriggerEvent::Update, "UPDATE"),
        (TriggerEvent::Truncate, "TRUNCATE"),
    ] {
        if !trigger.events.contains(&event) {
            continue;
        }
        if event == TriggerEvent::Update && !trigger.update_columns.is_empty() {
            let cols: Vec<String> = trigger.update_columns.iter().map(|c| quote(c)).collect();
            events.push(format!("UPDATE OF {}", cols.join(", ")));
        } else {
            events.push(word.to_string());
        }
    }
    let table = match pretty {
        true => quote(&def.name),
        false => format!("{}.{}", quote(&def.schema), quote(&def.name)),
    };
    let function = catalog
        .routines
        .get(&trigger.function)
        .map(|r| quote(&r.name))
        .unwrap_or_else(|| trigger.function.to_string());
    let when = trigger
        .when_sql
        .as_ref()
        .map(|w| format!(" WHEN ({w})"))
        .unwrap_or_default();
    let args: Vec<String> = trigger
        .args
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', "''")))
        .collect();
    Some(format!(
        "CREATE TRIGGER {} {} {} ON {table} FOR EACH {}{when} EXECUTE FUNCTION {function}({})",
        quote(&trigger.name),
        match trigger.timing {
            TriggerTiming::Before => "BEFORE",
            TriggerTiming::After => "AFTER",
        },
        events.join(" OR "),
        if trigger.for_each_row {
            "ROW"
        } else {
            "STATEMENT"
        },
        args.join(", ")
    ))
}
