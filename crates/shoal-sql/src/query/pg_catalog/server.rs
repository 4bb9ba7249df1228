//! The catalog tables of the server rather than of a schema: pg_database (Shoal's one
//! database), pg_roles with pg_user and pg_authid (its one role), pg_am (the table and index
//! access methods), pg_settings (the session's settings) and pg_prepared_statements (its
//! PREPAREd statements).

use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;

use datafusion::arrow::datatypes::DataType as ArrowType;

use super::{
    b, i32v, i64v, null_text, o, s, TableBuilder, BOOL, BTREE_AM_OID, COLUMNAR_AM_OID,
    DATABASE_OID, HEAP_AM_OID, I32, I64, OID, SUPERUSER_OID, T,
};
use crate::query::scope::PlanScope;

pub(super) fn pg_database() -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("datname", T),
        ("datdba", OID),
        ("encoding", I32),
        ("datlocprovider", T),
        ("datistemplate", BOOL),
        ("datallowconn", BOOL),
        ("datconnlimit", I32),
        ("datcollate", T),
        ("datctype", T),
        ("daticulocale", T),
        ("datcollversion", T),
        ("datacl", T),
        ("dattablespace", OID),
    ]);
    t.row(vec![
        o(DATABASE_OID),
        s("postgres"),
        o(SUPERUSER_OID),
        i32v(6),
        s("c"),
        b(false),
        b(true),
        i32v(-1),
        s("C.UTF-8"),
        s("C.UTF-8"),
        null_text(),
        null_text(),
        null_text(),
        o(1663),
    ]);
    t.build()
}

pub(super) fn pg_roles(name: &str) -> Arc<dyn TableProvider> {
    let name_col = if name == "pg_user" {
        "usename"
    } else {
        "rolname"
    };
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        (name_col, T),
        ("rolsuper", BOOL),
        ("rolinherit", BOOL),
        ("rolcreaterole", BOOL),
        ("rolcreatedb", BOOL),
        ("rolcanlogin", BOOL),
        ("rolreplication", BOOL),
        ("rolconnlimit", I32),
        ("rolpassword", T),
        ("rolvaliduntil", T),
        ("rolbypassrls", BOOL),
        ("rolconfig", T),
        ("usesysid", OID),
        ("usesuper", BOOL),
        ("usecreatedb", BOOL),
    ]);
    t.row(vec![
        o(SUPERUSER_OID),
        s("postgres"),
        b(true),
        b(true),
        b(true),
        b(true),
        b(true),
        b(true),
        i32v(-1),
        s("********"),
        null_text(),
        b(true),
        null_text(),
        o(SUPERUSER_OID),
        b(true),
        b(true),
    ]);
    t.build()
}

pub(super) fn pg_am() -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[("oid", OID), ("amname", T), ("amhandler", T), ("amtype", T)]);
    t.row(vec![
        o(HEAP_AM_OID),
        s("heap"),
        s("heap_tableam_handler"),
        s("t"),
    ]);
    t.row(vec![o(BTREE_AM_OID), s("btree"), s("bthandler"), s("i")]);
    t.row(vec![
        o(COLUMNAR_AM_OID),
        s("columnar"),
        s("columnar_tableam_handler"),
        s("t"),
    ]);
    t.build()
}

pub(super) fn pg_settings(scope: &Arc<PlanScope>) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("name", T),
        ("setting", T),
        ("unit", T),
        ("category", T),
        ("short_desc", T),
        ("extra_desc", T),
        ("context", T),
        ("vartype", T),
        ("source", T),
        ("min_val", T),
        ("max_val", T),
        ("enumvals", T),
        ("boot_val", T),
        ("reset_val", T),
        ("sourcefile", T),
        ("sourceline", I32),
        ("pending_restart", BOOL),
    ]);
    let settings = scope.settings.lock();
    let mut names: Vec<&String> = settings.keys().collect();
    names.sort();
    for name in names {
        let v = &settings[name];
        t.row(vec![
            s(name),
            s(v),
            null_text(),
            s("Shoal"),
            s(""),
            null_text(),
            s("user"),
            s("string"),
            s("default"),
            null_text(),
            null_text(),
            null_text(),
            s(v),
            s(v),
            null_text(),
            ScalarValue::Int32(None),
            b(false),
        ]);
    }
    t.build()
}

/// pg_prepared_statements: the session's SQL-level prepared statements (PREPARE).
pub(super) fn pg_prepared_statements(scope: &Arc<PlanScope>) -> Arc<dyn TableProvider> {
    let timestamptz = ArrowType::Timestamp(
        datafusion::arrow::datatypes::TimeUnit::Microsecond,
        Some("UTC".into()),
    );
    let type_names = ArrowType::List(Arc::new(
        datafusion::arrow::datatypes::Field::new_list_field(T, true),
    ));
    let mut t = TableBuilder::new(&[
        ("name", T),
        ("statement", T),
        ("prepare_time", timestamptz),
        ("parameter_types", type_names),
        ("from_sql", BOOL),
        ("generic_plans", I64),
        ("custom_plans", I64),
    ]);
    let sql_level = scope.prepared_statements.lock().clone();
    let protocol = scope.protocol_statements.lock().clone();
    let all = sql_level
        .iter()
        .map(|(name, p)| (name, p, true))
        .chain(protocol.iter().map(|(name, p)| (name, p, false)));
    for (name, p, from_sql) in all {
        let types: Vec<ScalarValue> = p
            .prepared
            .param_oids
            .iter()
            .map(|oid| s(&super::format_type_oid(*oid, -1).unwrap_or_else(|| oid.to_string())))
            .collect();
        t.row(vec![
            s(name),
            s(&p.text),
            ScalarValue::TimestampMicrosecond(Some(p.prepared_at_micros), Some("UTC".into())),
            ScalarValue::List(ScalarValue::new_list_nullable(&types, &T)),
            b(from_sql),
            i64v(0),
            i64v(0),
        ]);
    }
    t.build()
}

/// pg_cursors: the session's open SQL cursors (DECLARE).
pub(super) fn pg_cursors(scope: &Arc<PlanScope>) -> Arc<dyn TableProvider> {
    let timestamptz = ArrowType::Timestamp(
        datafusion::arrow::datatypes::TimeUnit::Microsecond,
        Some("UTC".into()),
    );
    let mut t = TableBuilder::new(&[
        ("name", T),
        ("statement", T),
        ("is_holdable", BOOL),
        ("is_binary", BOOL),
        ("is_scrollable", BOOL),
        ("creation_time", timestamptz),
    ]);
    for (name, c) in scope.cursors.lock().iter() {
        t.row(vec![
            s(name),
            s(&c.text),
            b(c.holdable),
            b(false),
            b(c.scrollable),
            ScalarValue::TimestampMicrosecond(Some(c.declared_at_micros), Some("UTC".into())),
        ]);
    }
    t.build()
}
