//! The types Shoal has, as PostgreSQL names and numbers them: the pg_type table and
//! `format_type_oid`, the text of format_type(oid, typmod).

use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::{Catalog, PG_CATALOG_NAMESPACE_OID};

use super::{b, i16v, i32v, null_text, o, s, TableBuilder, BOOL, I16, I32, OID, SUPERUSER_OID, T};
use crate::types::oid;

/// The built-in types Shoal has, with PostgreSQL's OIDs and names.
pub const BUILTIN_TYPES: &[(u32, &str, i16, &str)] = &[
    (oid::BOOL, "bool", 1, "B"),
    (oid::BYTEA, "bytea", -1, "U"),
    (oid::CHAR, "char", 1, "S"),
    (oid::NAME, "name", 64, "S"),
    (oid::INT8, "int8", 8, "N"),
    (oid::INT2, "int2", 2, "N"),
    (oid::INT4, "int4", 4, "N"),
    (oid::REGPROC, "regproc", 4, "N"),
    (oid::TEXT, "text", -1, "S"),
    (oid::OID, "oid", 4, "N"),
    (oid::FLOAT4, "float4", 4, "N"),
    (oid::FLOAT8, "float8", 8, "N"),
    (oid::UNKNOWN, "unknown", -2, "X"),
    (oid::BPCHAR, "bpchar", -1, "S"),
    (oid::VARCHAR, "varchar", -1, "S"),
    (oid::DATE, "date", 4, "D"),
    (oid::TIME, "time", 8, "D"),
    (oid::TIMESTAMP, "timestamp", 8, "D"),
    (oid::TIMESTAMPTZ, "timestamptz", 8, "D"),
    (oid::INTERVAL, "interval", 16, "T"),
    (oid::NUMERIC, "numeric", -1, "N"),
    (oid::REGCLASS, "regclass", 4, "N"),
    (oid::REGTYPE, "regtype", 4, "N"),
    (oid::UUID, "uuid", 16, "U"),
    (oid::JSON, "json", -1, "U"),
    (oid::JSONB, "jsonb", -1, "U"),
    (oid::BOOL_ARRAY, "_bool", -1, "A"),
    (oid::INT2_ARRAY, "_int2", -1, "A"),
    (oid::INT4_ARRAY, "_int4", -1, "A"),
    (oid::INT8_ARRAY, "_int8", -1, "A"),
    (oid::TEXT_ARRAY, "_text", -1, "A"),
    (oid::FLOAT8_ARRAY, "_float8", -1, "A"),
];

/// Pseudo-types: no value has them, but clients look them up by name (SQLsmith stops
/// without `internal` and `anyarray`).
const PSEUDO_TYPES: &[(u32, &str)] = &[
    (2249, "record"),
    (2275, "cstring"),
    (2276, "any"),
    (2277, "anyarray"),
    (2278, "void"),
    (2279, "trigger"),
    (2281, "internal"),
    (2283, "anyelement"),
];

pub(super) fn pg_type(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("typname", T),
        ("typnamespace", OID),
        ("typowner", OID),
        ("typlen", I16),
        ("typbyval", BOOL),
        ("typtype", T),
        ("typcategory", T),
        ("typispreferred", BOOL),
        ("typisdefined", BOOL),
        ("typdelim", T),
        ("typrelid", OID),
        ("typsubscript", T),
        ("typelem", OID),
        ("typarray", OID),
        ("typinput", T),
        ("typoutput", T),
        ("typreceive", T),
        ("typsend", T),
        ("typnotnull", BOOL),
        ("typbasetype", OID),
        ("typtypmod", I32),
        ("typndims", I32),
        ("typcollation", OID),
        ("typdefault", T),
        ("typalign", T),
        ("typstorage", T),
        ("typacl", T),
    ]);
    let array_types = oid::ARRAY_TYPES.iter().filter_map(|(element, array)| {
        let name = BUILTIN_TYPES.iter().find(|t| t.0 == *element)?.1;
        Some((*array, format!("_{name}"), -1i16, "A"))
    });
    let types = BUILTIN_TYPES
        .iter()
        .filter(|t| crate::types::array_element_oid(t.0).is_none())
        .map(|(o, name, len, category)| (*o, name.to_string(), *len, *category))
        .chain(array_types);
    for (type_oid, name, len, category) in types {
        let (type_oid, name, len, category) = (&type_oid, &name, &len, &category);
        let elem = crate::types::array_element_oid(*type_oid).unwrap_or(0);
        let typarray = oid::array_of(*type_oid).unwrap_or(0);
        t.row(vec![
            o(*type_oid),
            s(name),
            o(PG_CATALOG_NAMESPACE_OID),
            o(SUPERUSER_OID),
            i16v(*len),
            b(*len > 0 && *len <= 8),
            s("b"),
            s(category),
            b(false),
            b(true),
            s(","),
            o(0),
            s(if elem != 0 {
                "array_subscript_handler"
            } else {
                "-"
            }),
            o(elem),
            o(typarray),
            s(&io_function(name, elem, "in")),
            s(&io_function(name, elem, "out")),
            s(&io_function(name, elem, "recv")),
            s(&io_function(name, elem, "send")),
            b(false),
            o(0),
            i32v(-1),
            i32v(0),
            o(if *category == "S" { 100 } else { 0 }),
            null_text(),
            s(alignment(*len)),
            s(storage_of(*type_oid)),
            null_text(),
        ]);
    }
    for (type_oid, name) in PSEUDO_TYPES {
        t.row(pseudo_type_row(*type_oid, name));
    }
    for def in catalog.types.values() {
        let namespace = catalog.schemas.get(&def.schema).map_or(0, |n| n.oid);
        t.row(enum_type_row(
            def.oid,
            &def.name,
            namespace,
            0,
            def.array_oid,
        ));
        t.row(enum_type_row(
            def.array_oid,
            &format!("_{}", def.name),
            namespace,
            def.oid,
            0,
        ));
    }
    t.build()
}

/// The pg_type row of a user-defined enum type (`element` 0), or of the array type of one.
fn enum_type_row(
    type_oid: u32,
    name: &str,
    namespace: u32,
    element: u32,
    array: u32,
) -> Vec<ScalarValue> {
    let is_array = element != 0;
    let io = |which: &str| match is_array {
        true => format!("array_{which}"),
        false => format!("enum_{which}"),
    };
    vec![
        o(type_oid),
        s(name),
        o(namespace),
        o(SUPERUSER_OID),
        i16v(if is_array { -1 } else { 4 }),
        b(!is_array),
        s(if is_array { "b" } else { "e" }),
        s(if is_array { "A" } else { "E" }),
        b(false),
        b(true),
        s(","),
        o(0),
        s(if is_array {
            "array_subscript_handler"
        } else {
            "-"
        }),
        o(element),
        o(array),
        s(&io("in")),
        s(&io("out")),
        s(&io("recv")),
        s(&io("send")),
        b(false),
        o(0),
        i32v(-1),
        i32v(0),
        o(0),
        null_text(),
        s("i"),
        s(storage_of(type_oid)),
        null_text(),
    ]
}

/// pg_enum: every label of every enum type, with its sort order.
pub(super) fn pg_enum(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("enumtypid", OID),
        (
            "enumsortorder",
            datafusion::arrow::datatypes::DataType::Float32,
        ),
        ("enumlabel", T),
    ]);
    for def in catalog.types.values() {
        for label in &def.labels {
            t.row(vec![
                o(label.oid),
                o(def.oid),
                ScalarValue::Float32(Some(label.sort_order)),
                s(&label.label),
            ]);
        }
    }
    t.build()
}

/// The user-defined type `type_oid` (or the array type of one), as format_type prints it.
pub fn format_user_type(catalog: &Catalog, type_oid: u32) -> Option<String> {
    catalog.types.values().find_map(|def| {
        let name = match def.schema.as_str() {
            "public" => def.name.clone(),
            schema => format!("{schema}.{}", def.name),
        };
        match type_oid {
            o if o == def.oid => Some(name),
            o if o == def.array_oid => Some(format!("{name}[]")),
            _ => None,
        }
    })
}

/// A type's input, output, receive or send function: `int4in`, or `array_in` for arrays.
fn io_function(name: &str, element: u32, which: &str) -> String {
    if element != 0 {
        format!("array_{which}")
    } else {
        format!("{name}{which}")
    }
}

fn pseudo_type_row(type_oid: u32, name: &str) -> Vec<ScalarValue> {
    let len = if name == "cstring" { -2 } else { 4 };
    vec![
        o(type_oid),
        s(name),
        o(PG_CATALOG_NAMESPACE_OID),
        o(SUPERUSER_OID),
        i16v(len),
        b(len > 0),
        s("p"),
        s("P"),
        b(false),
        b(true),
        s(","),
        o(0),
        s("-"),
        o(0),
        o(0),
        s(&format!("{name}_in")),
        s(&format!("{name}_out")),
        s("-"),
        s("-"),
        b(false),
        o(0),
        i32v(-1),
        i32v(0),
        o(0),
        null_text(),
        s(alignment(len)),
        s("p"),
        null_text(),
    ]
}

/// pg_type.typstorage of a built-in type (and pg_attribute.attstorage of a column of it):
/// fixed-length types are `plain`, numeric `main`, other variable-length types `extended`.
pub(super) fn storage_of(type_oid: u32) -> &'static str {
    if type_oid == oid::NUMERIC {
        return "m";
    }
    match BUILTIN_TYPES.iter().find(|t| t.0 == type_oid) {
        Some(t) if t.2 > 0 => "p",
        _ if crate::types::array_element_oid(type_oid).is_none() && type_oid >= 16384 => "p",
        _ => "x",
    }
}

/// pg_type.typalign of a type `len` bytes long (-1: variable length, aligned as int4).
fn alignment(len: i16) -> &'static str {
    match len {
        1 => "c",
        2 => "s",
        8 => "d",
        _ => "i",
    }
}

/// `format_type(oid, typmod)` for the types Shoal knows.
pub fn format_type_oid(type_oid: u32, typmod: i32) -> Option<String> {
    if let Some(element) = crate::types::array_element_oid(type_oid) {
        return Some(format!("{}[]", format_type_oid(element, typmod)?));
    }
    let base = match type_oid {
        oid::NUMERIC if typmod >= 4 => {
            let m = typmod - 4;
            return Some(format!("numeric({},{})", (m >> 16) & 0xffff, m & 0xffff));
        }
        oid::VARCHAR if typmod >= 4 => return Some(format!("character varying({})", typmod - 4)),
        oid::BPCHAR if typmod >= 4 => return Some(format!("character({})", typmod - 4)),
        oid::BOOL => "boolean",
        oid::INT2 => "smallint",
        oid::INT4 => "integer",
        oid::INT8 => "bigint",
        oid::FLOAT4 => "real",
        oid::FLOAT8 => "double precision",
        oid::NUMERIC => "numeric",
        oid::TEXT => "text",
        oid::VARCHAR => "character varying",
        oid::BPCHAR => "character",
        oid::BYTEA => "bytea",
        oid::DATE => "date",
        oid::TIME => "time without time zone",
        oid::TIMESTAMP => "timestamp without time zone",
        oid::TIMESTAMPTZ => "timestamp with time zone",
        oid::INTERVAL => "interval",
        oid::UUID => "uuid",
        oid::OID => "oid",
        oid::NAME => "name",
        oid::CHAR => "\"char\"",
        oid::REGCLASS => "regclass",
        oid::REGTYPE => "regtype",
        _ => BUILTIN_TYPES
            .iter()
            .map(|t| (t.0, t.1))
            .chain(PSEUDO_TYPES.iter().copied())
            .find(|t| t.0 == type_oid)
            .map(|t| t.1)?,
    };
    Some(base.to_string())
}
