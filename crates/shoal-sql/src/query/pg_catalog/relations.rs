//! The catalog tables of relations: pg_namespace (schemas), pg_class (tables, indexes,
//! sequences and views), the pg_tables and pg_views views over them, pg_sequence, and a
//! sequence read as a relation of its own.

use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::{AccessMethod, Catalog, ConstraintKind, SequenceDef};

use super::{
    b, f32v, i16v, i32v, i64v, namespace_oid, null_text, o, s, TableBuilder, BOOL, BTREE_AM_OID,
    COLUMNAR_AM_OID, F32, HEAP_AM_OID, I16, I32, I64, OID, T,
};
use crate::query::scope::PlanScope;
use shoal_storage::catalog_privileges::{
    acl_items_text, acl_text, role_name, ObjectClass, ObjectRef,
};

/// An object's acl column: aclitem[] as text, NULL while it has the default privileges.
pub(super) fn acl(catalog: &Catalog, object: ObjectRef) -> ScalarValue {
    match acl_text(catalog, object) {
        Some(text) => s(&text),
        None => null_text(),
    }
}
use crate::types::pg_type_of;

pub(super) fn pg_namespace(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("nspname", T),
        ("nspowner", OID),
        ("nspacl", T),
    ]);
    for sch in catalog.schemas.values() {
        let object = (ObjectClass::Schema, sch.oid);
        // The public schema starts with USAGE for PUBLIC, which acldefault does not give: its
        // acl is shown, as in PostgreSQL, rather than NULL (pg_dump would revoke it).
        let acl = match sch.oid {
            shoal_storage::catalog::PUBLIC_NAMESPACE_OID => s(&acl_items_text(
                catalog,
                &catalog.effective_acl(object, None),
            )),
            _ => acl(catalog, object),
        };
        t.row(vec![
            o(sch.oid),
            s(&sch.name),
            o(catalog.owner_of(object)),
            acl,
        ]);
    }
    t.build()
}

pub(super) fn pg_class(scope: &Arc<PlanScope>, catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("relname", T),
        ("relnamespace", OID),
        ("reltype", OID),
        ("reloftype", OID),
        ("relowner", OID),
        ("relam", OID),
        ("relfilenode", OID),
        ("reltablespace", OID),
        ("relpages", I32),
        ("reltuples", F32),
        ("relallvisible", I32),
        ("reltoastrelid", OID),
        ("relhasindex", BOOL),
        ("relisshared", BOOL),
        ("relpersistence", T),
        ("relkind", T),
        ("relnatts", I16),
        ("relchecks", I16),
        ("relhasrules", BOOL),
        ("relhastriggers", BOOL),
        ("relhassubclass", BOOL),
        ("relrowsecurity", BOOL),
        ("relforcerowsecurity", BOOL),
        ("relispopulated", BOOL),
        ("relreplident", T),
        ("relispartition", BOOL),
        ("relrewrite", OID),
        ("relfrozenxid", OID),
        ("relminmxid", OID),
        ("relacl", T),
        ("reloptions", T),
        ("relpartbound", T),
    ]);
    // PostgreSQL enforces foreign keys with triggers on both tables, and psql lists a table's
    // foreign keys (and those referencing it) only when relhastriggers says so.
    let mut has_triggers: std::collections::HashSet<u32> = catalog
        .tables
        .values()
        .flat_map(|t| {
            t.constraints.iter().filter_map(move |c| match &c.kind {
                ConstraintKind::ForeignKey { ref_table, .. } => Some([t.oid, *ref_table]),
                _ => None,
            })
        })
        .flatten()
        .collect();
    has_triggers.extend(
        catalog
            .tables
            .values()
            .filter(|t| !t.triggers.is_empty())
            .map(|t| t.oid),
    );
    let mut add = |oid_: u32,
                   name: &str,
                   ns: u32,
                   kind: &str,
                   am: u32,
                   natts: i16,
                   has_index: bool,
                   checks: i16,
                   tuples: f32,
                   options: ScalarValue,
                   owner: u32,
                   acl: ScalarValue| {
        t.row(vec![
            o(oid_),
            s(name),
            o(ns),
            o(0),
            o(0),
            o(owner),
            o(am),
            o(oid_),
            o(0),
            i32v(0),
            f32v(tuples),
            i32v(0),
            o(0),
            b(has_index),
            b(false),
            s("p"),
            s(kind),
            i16v(natts),
            i16v(checks),
            b(false),
            b(has_triggers.contains(&oid_)),
            b(false),
            b(false),
            b(false),
            b(true),
            s("d"),
            b(false),
            o(0),
            o(0),
            o(0),
            acl,
            options,
            null_text(),
        ]);
    };
    let owner = |oid: u32| catalog.owner_of((ObjectClass::Relation, oid));
    let relacl = |oid: u32| acl(catalog, (ObjectClass::Relation, oid));
    for table in catalog.tables.values() {
        let has_index = catalog.indexes.values().any(|i| i.table == table.oid);
        let checks = table
            .constraints
            .iter()
            .filter(|c| matches!(c.kind, ConstraintKind::Check { .. }))
            .count() as i16;
        let db = &scope.engine.db;
        let (rows, am) = match table.access_method {
            AccessMethod::Heap => (
                db.table(table.oid as u64)
                    .map(|t| t.row_count_estimate() as f32),
                HEAP_AM_OID,
            ),
            AccessMethod::Columnar => (
                db.column_table(table.oid as u64)
                    .map(|t| t.row_count_estimate() as f32),
                COLUMNAR_AM_OID,
            ),
        };
        let rows = rows.unwrap_or(0.0);
        let options = if table.options.is_empty() {
            null_text()
        } else {
            s(&format!("{{{}}}", table.options.join(",")))
        };
        add(
            table.oid,
            &table.name,
            namespace_oid(catalog, &table.schema),
            "r",
            am,
            table.columns.len() as i16,
            has_index,
            checks,
            rows,
            options,
            owner(table.oid),
            relacl(table.oid),
        );
    }
    for index in catalog.indexes.values() {
        add(
            index.oid,
            &index.name,
            namespace_oid(catalog, &index.schema),
            "i",
            BTREE_AM_OID,
            index.columns.len() as i16,
            false,
            0,
            0.0,
            null_text(),
            owner(index.table),
            null_text(),
        );
    }
    for seq in catalog.sequences.values() {
        add(
            seq.oid,
            &seq.name,
            namespace_oid(catalog, &seq.schema),
            "S",
            0,
            3,
            false,
            0,
            1.0,
            null_text(),
            owner(seq.oid),
            relacl(seq.oid),
        );
    }
    for view in catalog.views.values() {
        add(
            view.oid,
            &view.name,
            namespace_oid(catalog, &view.schema),
            "v",
            0,
            view.column_names.len() as i16,
            false,
            0,
            0.0,
            null_text(),
            owner(view.oid),
            relacl(view.oid),
        );
    }
    t.build()
}

pub(super) fn pg_tables(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("schemaname", T),
        ("tablename", T),
        ("tableowner", T),
        ("tablespace", T),
        ("hasindexes", BOOL),
        ("hasrules", BOOL),
        ("hastriggers", BOOL),
        ("rowsecurity", BOOL),
    ]);
    for table in catalog.tables.values() {
        let has_index = catalog.indexes.values().any(|i| i.table == table.oid);
        t.row(vec![
            s(&table.schema),
            s(&table.name),
            s(&role_name(
                catalog,
                catalog.owner_of((ObjectClass::Relation, table.oid)),
            )),
            null_text(),
            b(has_index),
            b(false),
            b(false),
            b(false),
        ]);
    }
    t.build()
}

/// pg_statio_all_tables and pg_statio_user_tables: block reads and hits of each table, its
/// indexes and TOAST. Shoal keeps rows in memory, without a buffer pool or TOAST: its tables
/// read no blocks, the counters are 0 and the TOAST ones NULL, as for a table without TOAST.
/// Clients join these views to pg_description for table comments (Sequelize's describeTable).
pub(super) fn pg_statio_tables(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("relid", OID),
        ("schemaname", T),
        ("relname", T),
        ("heap_blks_read", I64),
        ("heap_blks_hit", I64),
        ("idx_blks_read", I64),
        ("idx_blks_hit", I64),
        ("toast_blks_read", I64),
        ("toast_blks_hit", I64),
        ("tidx_blks_read", I64),
        ("tidx_blks_hit", I64),
    ]);
    let no_toast = || ScalarValue::Int64(None);
    for table in catalog.tables.values() {
        let has_index = catalog.indexes.values().any(|i| i.table == table.oid);
        let index_blocks = || if has_index { i64v(0) } else { no_toast() };
        t.row(vec![
            o(table.oid),
            s(&table.schema),
            s(&table.name),
            i64v(0),
            i64v(0),
            index_blocks(),
            index_blocks(),
            no_toast(),
            no_toast(),
            no_toast(),
            no_toast(),
        ]);
    }
    t.build()
}

/// pg_default_acl: what ALTER DEFAULT PRIVILEGES set, per role, schema (0: every schema) and
/// kind of object.
pub(super) fn pg_default_acl(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("defaclrole", OID),
        ("defaclnamespace", OID),
        ("defaclobjtype", T),
        ("defaclacl", T),
    ]);
    for d in &catalog.default_acls {
        let items: Vec<String> = d
            .acl
            .iter()
            .map(|i| shoal_storage::catalog_privileges::aclitem_text(catalog, i))
            .collect();
        t.row(vec![
            o(0),
            o(d.role),
            o(d.schema.unwrap_or(0)),
            s(d.kind.letter()),
            s(&format!("{{{}}}", items.join(","))),
        ]);
    }
    t.build()
}

pub(super) fn pg_views(scope: &PlanScope, catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("schemaname", T),
        ("viewname", T),
        ("viewowner", T),
        ("definition", T),
    ]);
    for v in catalog.views.values() {
        t.row(vec![
            s(&v.schema),
            s(&v.name),
            s(&role_name(
                catalog,
                catalog.owner_of((ObjectClass::Relation, v.oid)),
            )),
            s(&crate::query::view_definition::view_definition(scope, v)),
        ]);
    }
    t.build()
}

pub(super) fn pg_sequence(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("seqrelid", OID),
        ("seqtypid", OID),
        ("seqstart", I64),
        ("seqincrement", I64),
        ("seqmax", I64),
        ("seqmin", I64),
        ("seqcache", I64),
        ("seqcycle", BOOL),
    ]);
    for seq in catalog.sequences.values() {
        t.row(vec![
            o(seq.oid),
            o(pg_type_of(&seq.data_type).0),
            i64v(seq.start),
            i64v(seq.increment),
            i64v(seq.max_value),
            i64v(seq.min_value),
            i64v(1),
            b(seq.cycle),
        ]);
    }
    t.build()
}

/// A sequence read as a relation (`SELECT * FROM seq`): last_value, log_cnt, is_called.
pub fn sequence_relation(seq: &Arc<SequenceDef>) -> Arc<dyn TableProvider> {
    use std::sync::atomic::Ordering;
    let mut t = TableBuilder::new(&[("last_value", I64), ("log_cnt", I64), ("is_called", BOOL)]);
    t.row(vec![
        i64v(seq.state.last_value.load(Ordering::Acquire)),
        i64v(0),
        b(seq.state.is_called.load(Ordering::Acquire)),
    ]);
    t.build()
}

/// pg_depend: the dependencies clients look for, which are a sequence's on the column that
/// owns it (serial: deptype 'a'; identity: 'i'). SQLAlchemy and psql find a serial column's
/// sequence through it.
const PG_CLASS: u32 = 1259;
const PG_REWRITE: u32 = 2618;

/// pg_rewrite: the `_RETURN` rule of each view, under the view's own OID (a rule is told from
/// its view by the catalog it is in, as pg_dump tells objects apart: by tableoid and oid).
pub(super) fn pg_rewrite(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("rulename", T),
        ("ev_class", OID),
        ("ev_type", T),
        ("ev_enabled", T),
        ("is_instead", BOOL),
        ("ev_qual", T),
        ("ev_action", T),
    ])
    .with_pg_type("ev_type", crate::types::oid::CHAR)
    .with_pg_type("ev_enabled", crate::types::oid::CHAR);
    for view in catalog.views.values() {
        t.row(vec![
            o(view.oid),
            s("_RETURN"),
            o(view.oid),
            s("1"),
            s("O"),
            b(true),
            s("<>"),
            null_text(),
        ]);
    }
    t.build()
}

pub(super) fn pg_depend(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("classid", OID),
        ("objid", OID),
        ("objsubid", I32),
        ("refclassid", OID),
        ("refobjid", OID),
        ("refobjsubid", I32),
        ("deptype", T),
    ]);
    // A view is its `_RETURN` rule (see pg_rewrite), which depends on what the view reads:
    // pg_dump orders views after their tables by these.
    for view in catalog.views.values() {
        t.row(vec![
            o(PG_REWRITE),
            o(view.oid),
            i32v(0),
            o(PG_CLASS),
            o(view.oid),
            i32v(0),
            s("i"),
        ]);
        for read in &view.depends_on {
            t.row(vec![
                o(PG_REWRITE),
                o(view.oid),
                i32v(0),
                o(PG_CLASS),
                o(*read),
                i32v(0),
                s("n"),
            ]);
        }
    }
    // A column default depends on its column and on the sequence it draws from: pg_dump
    // sets a serial column's default after creating the sequence the column owns.
    const PG_ATTRDEF: u32 = 2604;
    for table in catalog.tables.values() {
        for (i, c) in table.columns.iter().enumerate() {
            let (Some(default), None) = (&c.default_sql, &c.identity) else {
                continue;
            };
            let attrdef = super::columns::attrdef_oid(table.oid, i);
            t.row(vec![
                o(PG_ATTRDEF),
                o(attrdef),
                i32v(0),
                o(PG_CLASS),
                o(table.oid),
                i32v(i as i32 + 1),
                s("a"),
            ]);
            if let Some(sequence) = nextval_sequence(catalog, &table.schema, default) {
                t.row(vec![
                    o(PG_ATTRDEF),
                    o(attrdef),
                    i32v(0),
                    o(PG_CLASS),
                    o(sequence),
                    i32v(0),
                    s("n"),
                ]);
            }
        }
    }
    for seq in catalog.sequences.values() {
        let Some((table_oid, column)) = seq.owned_by else {
            continue;
        };
        let identity = catalog
            .tables
            .get(&table_oid)
            .and_then(|table| table.columns.get(column))
            .is_some_and(|c| c.identity.is_some());
        t.row(vec![
            o(PG_CLASS),
            o(seq.oid),
            i32v(0),
            o(PG_CLASS),
            o(table_oid),
            i32v(column as i32 + 1),
            s(if identity { "i" } else { "a" }),
        ]);
    }
    t.build()
}

/// The sequence a default `nextval('name')` draws from, looked up in `schema` when unqualified.
fn nextval_sequence(catalog: &Catalog, schema: &str, default: &str) -> Option<u32> {
    let start = default.find("nextval('")? + "nextval('".len();
    let name = &default[start..start + default[start..].find('\'')?];
    let (schema, name) = match name.split_once('.') {
        Some((schema, name)) => (schema, name),
        None => (schema, name),
    };
    match catalog.lookup(schema, name) {
        Some((shoal_storage::catalog::RelationKind::Sequence, oid)) => Some(oid),
        _ => None,
    }
}
