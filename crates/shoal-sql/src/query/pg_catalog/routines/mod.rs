//! The functions and operators Shoal answers, as pg_proc and pg_operator list them: clients
//! such as SQLsmith build their queries from these tables, so each row is one Shoal runs.
//! The rows are PostgreSQL 15's built-in functions and binary operators over the scalar types
//! Shoal has, kept where Shoal gave PostgreSQL's answer for the same call (checked against a
//! PostgreSQL 15 server); their OIDs, names and types are PostgreSQL's. Functions that return
//! sets, window functions and those over types Shoal lacks are not listed.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, Field};
use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::PG_CATALOG_NAMESPACE_OID;

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

pub(super) fn pg_proc() -> Arc<dyn TableProvider> {
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
    ]);
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
