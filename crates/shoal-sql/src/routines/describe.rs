//! A routine's definition as text, as PostgreSQL's catalog functions print it:
//! `pg_get_functiondef` (psql's `\sf`), `pg_get_function_arguments`,
//! `pg_get_function_identity_arguments` and `pg_get_function_result` (psql's `\df`).

use shoal_storage::catalog_functions::{
    ArgMode, RoutineDef, RoutineKind, RoutineReturn, Volatility,
};

use super::BodyForm;
use crate::query::functions::quote_ident_if_needed as quote;
use crate::types::format_type;

/// The input parameters' types, separated by `separator` (`DROP FUNCTION f(integer,integer)`).
pub fn identity_types(def: &RoutineDef, separator: &str) -> String {
    def.args
        .iter()
        .filter(|a| a.mode != ArgMode::Out)
        .map(|a| format_type(&a.data_type))
        .collect::<Vec<_>>()
        .join(separator)
}

fn argument(a: &shoal_storage::catalog_functions::RoutineArg, with_default: bool) -> String {
    let mut s = String::new();
    match a.mode {
        ArgMode::In => {}
        ArgMode::Out => s.push_str("OUT "),
        ArgMode::InOut => s.push_str("INOUT "),
        ArgMode::Variadic => s.push_str("VARIADIC "),
    }
    if let Some(n) = &a.name {
        s.push_str(&quote(n));
        s.push(' ');
    }
    s.push_str(&format_type(&a.data_type));
    if let (true, Some(d)) = (with_default, &a.default_sql) {
        s.push_str(" DEFAULT ");
        s.push_str(d);
    }
    s
}

/// `pg_get_function_arguments`: every parameter with its mode, name, type and default.
/// RETURNS TABLE columns are listed by `result_type`, not here.
/// `name(type, ...)`, as PostgreSQL's messages name a routine among others.
pub fn signature(def: &RoutineDef) -> String {
    format!("{}({})", def.name, identity_types(def, ", "))
}

pub fn arguments(def: &RoutineDef) -> String {
    def.args
        .iter()
        .map(|a| argument(a, true))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `pg_get_function_identity_arguments`: the parameters without their defaults (OUT ones
/// too, as PostgreSQL 14 and later print them).
pub fn identity_arguments(def: &RoutineDef) -> String {
    def.args
        .iter()
        .map(|a| argument(a, false))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `pg_get_function_result`.
pub fn result_type(def: &RoutineDef) -> String {
    match &def.returns {
        RoutineReturn::Void => "void".into(),
        RoutineReturn::Trigger => "trigger".into(),
        RoutineReturn::Scalar(t) => format_type(t),
        RoutineReturn::SetOf(t) => format!("SETOF {}", format_type(t)),
        RoutineReturn::Record(_) => "record".into(),
        RoutineReturn::Table(cols) => format!(
            "TABLE({})",
            cols.iter()
                .map(|(n, t)| format!("{} {}", quote(n), format_type(t)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `pg_get_functiondef`: the CREATE OR REPLACE statement that makes the routine again.
pub fn functiondef(def: &RoutineDef) -> String {
    let kind = match def.kind {
        RoutineKind::Function => "FUNCTION",
        RoutineKind::Procedure => "PROCEDURE",
    };
    let mut s = format!(
        "CREATE OR REPLACE {kind} {}.{}({})\n",
        quote(&def.schema),
        quote(&def.name),
        arguments(def)
    );
    if def.kind == RoutineKind::Function {
        s.push_str(&format!(" RETURNS {}\n", result_type(def)));
    }
    s.push_str(&format!(" LANGUAGE {}\n", def.language));
    let mut options = Vec::new();
    match def.volatility {
        Volatility::Immutable => options.push("IMMUTABLE"),
        Volatility::Stable => options.push("STABLE"),
        Volatility::Volatile => {}
    }
    if def.strict {
        options.push("STRICT");
    }
    if def.security_definer {
        options.push("SECURITY DEFINER");
    }
    if !options.is_empty() {
        s.push_str(&format!(" {}\n", options.join(" ")));
    }
    for (name, value) in &def.config {
        s.push_str(&format!(" SET {name} TO '{}'\n", value.replace('\'', "''")));
    }
    match super::body_form(def) {
        BodyForm::Return | BodyForm::Atomic => {
            s.push_str(def.body.trim());
            s.push('\n');
        }
        BodyForm::Quoted => {
            let tag = match def.kind {
                RoutineKind::Function => "$function$",
                RoutineKind::Procedure => "$procedure$",
            };
            s.push_str(&format!("AS {tag}{}{tag}\n", def.body));
        }
    }
    s
}

/// The user routine a regproc or regprocedure text names (`f`, `schema.f`,
/// `f(integer,text)`), or an OID's text; None if none, or if a bare name has overloads.
pub fn find(
    catalog: &shoal_storage::catalog::Catalog,
    lookup_schemas: &[String],
    key: &str,
) -> Option<std::sync::Arc<RoutineDef>> {
    if let Ok(oid) = key.trim().parse::<u32>() {
        return catalog.routines.get(&oid).cloned();
    }
    let (name, args) = match key.split_once('(') {
        Some((n, rest)) => (n.trim(), Some(rest.trim_end_matches(')').replace(' ', ""))),
        None => (key.trim(), None),
    };
    let (schema, name) = crate::query::functions::parse_qualified_name(name);
    let schemas = match schema {
        Some(s) => vec![s],
        None => lookup_schemas.to_vec(),
    };
    let mut found = schemas
        .iter()
        .flat_map(|s| catalog.routines_named(s, &name))
        .filter(|r| {
            args.as_ref()
                .is_none_or(|a| identity_types(r, ",").replace(' ', "") == *a)
        });
    let first = found.next()?.clone();
    match found.next() {
        Some(_) => None,
        None => Some(first),
    }
}
