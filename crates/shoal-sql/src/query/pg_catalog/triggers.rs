//! pg_trigger, and the definition text pg_get_triggerdef (psql's `\d TABLE`) prints.

use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::Catalog;
use shoal_storage::catalog_triggers::{TriggerDef, TriggerEvent, TriggerTiming};

use super::{b, i16v, null_text, o, s};

/// PostgreSQL's tgtype bits.
const ROW: i16 = 1;
const BEFORE: i16 = 2;
const INSERT: i16 = 4;
const DELETE: i16 = 8;
const UPDATE: i16 = 16;
const TRUNCATE: i16 = 32;
const INSTEAD: i16 = 64;

/// Every relation's triggers: (relation OID, schema, name, its triggers, its column names).
fn with_triggers(catalog: &Catalog) -> Vec<(u32, &str, &str, &[TriggerDef], Vec<&str>)> {
    let tables = catalog.tables.values().map(|d| {
        let columns = d.columns.iter().map(|c| c.name.as_str()).collect();
        (
            d.oid,
            d.schema.as_str(),
            d.name.as_str(),
            &d.triggers[..],
            columns,
        )
    });
    let views = catalog.views.values().map(|v| {
        let columns = v.column_names.iter().map(String::as_str).collect();
        (
            v.oid,
            v.schema.as_str(),
            v.name.as_str(),
            &v.triggers[..],
            columns,
        )
    });
    tables.chain(views).filter(|r| !r.3.is_empty()).collect()
}

pub(super) fn pg_trigger(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let columns = super::empty::columns_of("pg_trigger").expect("pg_trigger's columns are listed");
    let mut t = super::empty::declared_table(columns);
    for (relation, _, _, triggers, columns) in with_triggers(catalog) {
        for trigger in triggers {
            let mut tgtype = 0;
            if trigger.for_each_row {
                tgtype |= ROW;
            }
            match trigger.timing {
                TriggerTiming::Before => tgtype |= BEFORE,
                TriggerTiming::InsteadOf => tgtype |= INSTEAD,
                TriggerTiming::After => {}
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
                .filter_map(|c| columns.iter().position(|n| n == c))
                .map(|i| i16v(i as i16 + 1))
                .collect();
            let args: Vec<u8> = trigger
                .args
                .iter()
                .flat_map(|a| a.bytes().chain(std::iter::once(0)))
                .collect();
            t.row(vec![
                o(trigger.oid),
                o(relation),
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
                trigger.old_table.as_deref().map_or_else(null_text, s),
                trigger.new_table.as_deref().map_or_else(null_text, s),
            ]);
        }
    }
    t.build()
}

/// `pg_get_triggerdef(oid [, pretty])`: the CREATE TRIGGER that makes the trigger again; the
/// table is schema-qualified unless `pretty`.
pub fn trigger_definition(catalog: &Catalog, oid: u32, pretty: bool) -> Option<String> {
    let relations = with_triggers(catalog);
    let ((_, schema, name, _, _), trigger) = relations
        .iter()
        .find_map(|r| r.3.iter().find(|t| t.oid == oid).map(|t| (r, t)))?;
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
        true => quote(name),
        false => format!("{}.{}", quote(schema), quote(name)),
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
    let mut referencing = String::new();
    for (word, name) in [("OLD", &trigger.old_table), ("NEW", &trigger.new_table)] {
        if let Some(name) = name {
            if referencing.is_empty() {
                referencing.push_str(" REFERENCING");
            }
            referencing.push_str(&format!(" {word} TABLE AS {}", quote(name)));
        }
    }
    Some(format!(
        "CREATE TRIGGER {} {} {} ON {table}{referencing} FOR EACH {}{when} EXECUTE FUNCTION {function}({})",
        quote(&trigger.name),
        match trigger.timing {
            TriggerTiming::Before => "BEFORE",
            TriggerTiming::After => "AFTER",
            TriggerTiming::InsteadOf => "INSTEAD OF",
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
