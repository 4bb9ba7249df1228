//! The functions and operators Shoal answers, as pg_proc and pg_operator list them: clients
//! such as SQLsmith build their queries from these tables, so each row is one Shoal runs.
//! The rows are PostgreSQL 15's built-in functions and binary operators over the scalar types
//! Shoal has, kept where Shoal gave PostgreSQL's answer for the same call (checked against a
//! PostgreSQL 15 server); their OIDs, names and types are PostgreSQL's. Functions that return
//! sets, window functions and those over types Shoal lacks are not listed.

use shoal_storage::catalog_privileges::ObjectClass;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, Field};
use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::{Catalog, PG_CATALOG_NAMESPACE_OID};
use shoal_storage::catalog_functions::{ArgMode, RoutineKind, RoutineReturn, Volatility};

use super::{b, i16v, null_text, o, s, TableBuilder, I16, OID, SUPERUSER_OID, T};

mod builtin_functions;
mod builtin_operators;

pub(super) use builtin_functions::FUNCTIONS;
use builtin_functions::OPERATOR_FUNCTIONS;
use builtin_operators::OPERATORS;

/// PostgreSQL's language of built-in functions (pg_language "internal").
const INTERNAL_LANGUAGE_OID: u32 = 12;

#[derive(Clone, Copy)]
pub(super) enum Kind {
    Function,
    Aggregate,
}

/// A pg_proc row: OID, name, kind, result type and argument types.
type Function = (u32, &'static str, Kind, u32, &'static [u32]);

/// A pg_operator row: OID, name, left and right operand types, result type, commutator and
/// negator (0 when not listed here) and the function that implements it.
type Operator = (u32, &'static str, u32, u32, u32, u32, u32, &'static str);

/// PostgreSQL's OID of the language plpgsql (given by initdb; 13563 in PostgreSQL 15).
pub const PLPGSQL_LANGUAGE_OID: u32 = 13563;
const SQL_LANGUAGE_OID: u32 = 14;

/// pg_proc: the built-in functions, then the routines users created.
pub(super) fn pg_proc(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let list = |t: ArrowType| ArrowType::List(Arc::new(Field::new_list_field(t, true)));
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("proname", T),
        ("pronamespace", OID),
        ("proowner", OID),
        ("prolang", OID),
        ("prokind", T),
        ("proretset", ArrowType::Boolean),
        ("pronargs", I16),
        ("prorettype", OID),
        ("proargtypes", oid_vector()),
        ("proacl", T),
        ("prosrc", T),
        ("probin", T),
        ("provolatile", T),
        ("proisstrict", ArrowType::Boolean),
        ("prosecdef", ArrowType::Boolean),
        ("proleakproof", ArrowType::Boolean),
        ("proparallel", T),
        ("pronargdefaults", I16),
        ("proallargtypes", list(OID)),
        ("proargmodes", list(T)),
        ("proargnames", list(T)),
        ("proconfig", list(T)),
        ("provariadic", OID),
        ("prosupport", OID),
        ("procost", ArrowType::Float32),
        ("prorows", ArrowType::Float32),
    ]);
    let no_list = |t: &ArrowType| ScalarValue::new_null_list(t.clone(), true, 1);
    for &(proc_oid, name, kind, result, args) in FUNCTIONS {
        let kind = match kind {
            Kind::Function => "f",
            Kind::Aggregate => "a",
        };
        t.row(vec![
            o(proc_oid),
            s(name),
            o(PG_CATALOG_NAMESPACE_OID),
            o(SUPERUSER_OID),
            o(INTERNAL_LANGUAGE_OID),
            s(kind),
            b(false),
            i16v(args.len() as i16),
            o(result),
            oids(args),
            null_text(),
            s(name),
            null_text(),
            s("i"),
            b(true),
            b(false),
            b(false),
            s("s"),
            i16v(0),
            no_list(&OID),
            no_list(&T),
            no_list(&T),
            no_list(&T),
            o(0),
            o(0),
            ScalarValue::Float32(Some(1.0)),
            ScalarValue::Float32(Some(0.0)),
        ]);
    }
    for r in catalog.routines.values() {
        let oid_of = |t: &shoal_storage::types::DataType| crate::types::pg_type_of(t).0;
        let inputs: Vec<u32> = r.input_types().into_iter().map(oid_of).collect();
        let (result, set) = match &r.returns {
            RoutineReturn::Void => (crate::types::oid::VOID, false),
            RoutineReturn::Scalar(t) => (oid_of(t), false),
            RoutineReturn::SetOf(t) => (oid_of(t), true),
            RoutineReturn::Table(_) => (crate::types::oid::RECORD, true),
            RoutineReturn::Record(_) => (crate::types::oid::RECORD, false),
            RoutineReturn::Trigger => (crate::types::oid::TRIGGER, false),
        };
        let result = match r.kind {
            RoutineKind::Procedure => crate::types::oid::VOID,
            RoutineKind::Function => result,
        };
        // proallargtypes, proargmodes and proargnames list OUT parameters (and TABLE columns)
        // too; PostgreSQL leaves the first two NULL when every parameter is IN.
        let mut all: Vec<(u32, &str, Option<String>)> = r
            .args
            .iter()
            .map(|a| {
                let mode = match a.mode {
                    ArgMode::In => "i",
                    ArgMode::Out => "o",
                    ArgMode::InOut => "b",
                    ArgMode::Variadic => "v",
                };
                (oid_of(&a.data_type), mode, a.name.clone())
            })
            .collect();
        if let RoutineReturn::Table(cols) = &r.returns {
            all.extend(cols.iter().map(|(n, t)| (oid_of(t), "t", Some(n.clone()))));
        }
        let only_inputs = all.iter().all(|a| a.1 == "i");
        let texts = |v: Vec<String>| {
            let values: Vec<ScalarValue> = v.into_iter().map(|x| s(&x)).collect();
            ScalarValue::List(ScalarValue::new_list_nullable(&values, &T))
        };
        let (all_types, modes) = match only_inputs {
            true => (no_list(&OID), no_list(&T)),
            false => (
                oids(&all.iter().map(|a| a.0).collect::<Vec<_>>()),
                texts(all.iter().map(|a| a.1.to_string()).collect()),
            ),
        };
        let names = match all.iter().any(|a| a.2.is_some()) {
            true => texts(
                all.iter()
                    .map(|a| a.2.clone().unwrap_or_default())
                    .collect(),
            ),
            false => no_list(&T),
        };
        let config = match r.config.is_empty() {
            true => no_list(&T),
            false => texts(r.config.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        };
        let language = match r.language.as_str() {
            "plpgsql" => PLPGSQL_LANGUAGE_OID,
            _ => SQL_LANGUAGE_OID,
        };
        // A body written as RETURN or BEGIN ATOMIC is kept parsed (prosqlbody), not as prosrc.
        let source = match crate::routines::body_form(r) {
            crate::routines::BodyForm::Quoted => r.body.clone(),
            _ => String::new(),
        };
        t.row(vec![
            o(r.oid),
            s(&r.name),
            o(catalog.schemas.get(&r.schema).map(|s| s.oid).unwrap_or(0)),
            o(catalog.owner_of((ObjectClass::Function, r.oid))),
            o(language),
            s(match r.kind {
                RoutineKind::Function => "f",
                RoutineKind::Procedure => "p",
            }),
            b(set),
            i16v(inputs.len() as i16),
            o(result),
            oids(&inputs),
            super::relations::acl(catalog, (ObjectClass::Function, r.oid)),
            s(&source),
            null_text(),
            s(match r.volatility {
                Volatility::Immutable => "i",
                Volatility::Stable => "s",
                Volatility::Volatile => "v",
            }),
            b(r.strict),
            b(r.security_definer),
            b(false),
            s("u"),
            i16v(r.args.iter().filter(|a| a.default_sql.is_some()).count() as i16),
            all_types,
            modes,
            names,
            config,
            // provariadic: the variadic parameter's element type.
            o(r.args
                .iter()
                .find(|a| a.mode == ArgMode::Variadic)
                .and_then(|a| match &a.data_type {
                    shoal_storage::types::DataType::Array(element) => Some(oid_of(element)),
                    _ => None,
                })
                .unwrap_or(0)),
            o(0),
            ScalarValue::Float32(Some(100.0)),
            ScalarValue::Float32(Some(if set { 1000.0 } else { 0.0 })),
        ]);
    }
    t.build()
}

pub(super) fn pg_operator() -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("oprname", T),
        ("oprnamespace", OID),
        ("oprowner", OID),
        ("oprkind", T),
        ("oprcanmerge", ArrowType::Boolean),
        ("oprcanhash", ArrowType::Boolean),
        ("oprleft", OID),
        ("oprright", OID),
        ("oprresult", OID),
        ("oprcom", OID),
        ("oprnegate", OID),
        ("oprcode", T),
    ]);
    for &(op_oid, name, left, right, result, commutator, negator, code) in OPERATORS {
        t.row(vec![
            o(op_oid),
            s(name),
            o(PG_CATALOG_NAMESPACE_OID),
            o(SUPERUSER_OID),
            s("b"),
            b(false),
            b(false),
            o(left),
            o(right),
            o(result),
            o(commutator),
            o(negator),
            s(code),
        ]);
    }
    t.build()
}

/// proargtypes is an oidvector in PostgreSQL; here an array of OIDs, so that
/// `unnest(proargtypes)` lists the argument types.
fn oid_vector() -> ArrowType {
    ArrowType::List(Arc::new(Field::new_list_field(OID, true)))
}

fn oids(values: &[u32]) -> ScalarValue {
    let values: Vec<ScalarValue> = values.iter().map(|&v| o(v)).collect();
    ScalarValue::List(ScalarValue::new_list_nullable(&values, &OID))
}

/// The OID of the built-in function `name` (regproc input), if Shoal knows it.
pub fn function_oid(name: &str) -> Option<u32> {
    let name = name.strip_prefix("pg_catalog.").unwrap_or(name);
    FUNCTIONS
        .iter()
        .find(|f| f.1 == name)
        .map(|f| f.0)
        .or_else(|| OPERATOR_FUNCTIONS.iter().find(|f| f.0 == name).map(|f| f.1))
}
