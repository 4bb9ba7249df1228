//! pg_catalog: the system tables psql, pgbench and drivers query, generated on demand from
//! Shoal's catalog as small in-memory Arrow tables. Only what clients ask for is filled in;
//! columns that have no meaning in Shoal carry PostgreSQL's defaults.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, Schema};
use datafusion::catalog::MemTable;
use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::{
    AccessMethod, Catalog, ConstraintKind, SequenceDef, PG_CATALOG_NAMESPACE_OID,
};

use crate::query::scope::PlanScope;
use crate::types::{format_type, oid, pg_type_of};

/// Builds a table from column definitions and rows of scalars.
pub struct TableBuilder {
    fields: Vec<Field>,
    rows: Vec<Vec<ScalarValue>>,
}

impl TableBuilder {
    pub fn new(columns: &[(&str, ArrowType)]) -> Self {
        TableBuilder {
            fields: columns
                .iter()
                .map(|(n, t)| Field::new(*n, t.clone(), true))
                .collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, values: Vec<ScalarValue>) {
        debug_assert_eq!(
            values.len(),
            self.fields.len(),
            "row width matches the table"
        );
        self.rows.push(values);
    }

    pub fn build(self) -> Arc<dyn TableProvider> {
        let schema = Arc::new(Schema::new(self.fields));
        let columns: Vec<ArrayRef> = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                if self.rows.is_empty() {
                    datafusion::arrow::array::new_empty_array(f.data_type())
                } else {
                    let scalars = self.rows.iter().map(|r| {
                        r[i].cast_to(f.data_type())
                            .unwrap_or_else(|_| ScalarValue::try_from(f.data_type()).unwrap())
                    });
                    ScalarValue::iter_to_array(scalars).expect("scalars of one type")
                }
            })
            .collect();
        let batch = RecordBatch::try_new(schema.clone(), columns).expect("columns match schema");
        Arc::new(MemTable::try_new(schema, vec![vec![batch]]).expect("batch matches schema"))
    }
}

pub fn s(v: &str) -> ScalarValue {
    ScalarValue::Utf8(Some(v.to_string()))
}
pub fn o(v: u32) -> ScalarValue {
    ScalarValue::UInt32(Some(v))
}
pub fn i16v(v: i16) -> ScalarValue {
    ScalarValue::Int16(Some(v))
}
pub fn i32v(v: i32) -> ScalarValue {
    ScalarValue::Int32(Some(v))
}
pub fn i64v(v: i64) -> ScalarValue {
    ScalarValue::Int64(Some(v))
}
pub fn b(v: bool) -> ScalarValue {
    ScalarValue::Boolean(Some(v))
}
pub fn null_text() -> ScalarValue {
    ScalarValue::Utf8(None)
}
pub fn f32v(v: f32) -> ScalarValue {
    ScalarValue::Float32(Some(v))
}

const T: ArrowType = ArrowType::Utf8;
const OID: ArrowType = ArrowType::UInt32;
const BOOL: ArrowType = ArrowType::Boolean;
const I16: ArrowType = ArrowType::Int16;
const I32: ArrowType = ArrowType::Int32;
const I64: ArrowType = ArrowType::Int64;
const F32: ArrowType = ArrowType::Float32;

/// The owner role of every object (Shoal has one role for now).
pub const SUPERUSER_OID: u32 = 10;
pub const DATABASE_OID: u32 = 5;
const HEAP_AM_OID: u32 = 2;
const BTREE_AM_OID: u32 = 403;
/// Shoal's column table access method (outside PostgreSQL's built-in OIDs, below user OIDs).
const COLUMNAR_AM_OID: u32 = 9300;

pub fn table(scope: &Arc<PlanScope>, name: &str) -> Option<Arc<dyn TableProvider>> {
    let catalog = scope.engine.catalog.read();
    Some(match name {
        "pg_namespace" => pg_namespace(&catalog),
        "pg_class" => pg_class(scope, &catalog),
        "pg_attribute" => pg_attribute(&catalog),
        "pg_type" => pg_type(),
        "pg_index" => pg_index(&catalog),
        "pg_constraint" => pg_constraint(&catalog),
        "pg_database" => pg_database(),
        "pg_roles" | "pg_user" | "pg_authid" => pg_roles(name),
        "pg_am" => pg_am(),
        "pg_tables" => pg_tables(&catalog),
        "pg_views" => pg_views(&catalog),
        "pg_indexes" => pg_indexes(&catalog),
        "pg_attrdef" => pg_attrdef(&catalog),
        "pg_sequence" => pg_sequence(&catalog),
        "pg_settings" => pg_settings(scope),
        "shoal_memory" => crate::query::shoal_memory::shoal_memory(scope),
        "pg_description" => TableBuilder::new(&[
            ("objoid", OID),
            ("classoid", OID),
            ("objsubid", I32),
            ("description", T),
        ])
        .build(),
        "pg_inherits" => TableBuilder::new(&[
            ("inhrelid", OID),
            ("inhparent", OID),
            ("inhseqno", I32),
            ("inhdetachpending", BOOL),
        ])
        .build(),
        "pg_tablespace" => {
            let mut t = TableBuilder::new(&[("oid", OID), ("spcname", T), ("spcowner", OID)]);
            t.row(vec![o(1663), s("pg_default"), o(SUPERUSER_OID)]);
            t.row(vec![o(1664), s("pg_global"), o(SUPERUSER_OID)]);
            t.build()
        }
        "pg_collation" => {
            TableBuilder::new(&[("oid", OID), ("collname", T), ("collnamespace", OID)]).build()
        }
        "pg_extension" => TableBuilder::new(&[
            ("oid", OID),
            ("extname", T),
            ("extversion", T),
            ("extnamespace", OID),
        ])
        .build(),
        "pg_proc" => TableBuilder::new(&[
            ("oid", OID),
            ("proname", T),
            ("pronamespace", OID),
            ("prokind", T),
            ("prorettype", OID),
            ("proargtypes", T),
        ])
        .build(),
        "pg_trigger" => TableBuilder::new(&[
            ("oid", OID),
            ("tgrelid", OID),
            ("tgname", T),
            ("tgisinternal", BOOL),
            ("tgenabled", T),
        ])
        .build(),
        "pg_policy" => {
            TableBuilder::new(&[("oid", OID), ("polname", T), ("polrelid", OID)]).build()
        }
        "pg_rewrite" => {
            TableBuilder::new(&[("oid", OID), ("rulename", T), ("ev_class", OID)]).build()
        }
        "pg_statistic_ext" => {
            TableBuilder::new(&[("oid", OID), ("stxrelid", OID), ("stxname", T)]).build()
        }
        "pg_publication" => TableBuilder::new(&[("oid", OID), ("pubname", T)]).build(),
        "pg_foreign_table" => TableBuilder::new(&[("ftrelid", OID), ("ftserver", OID)]).build(),
        _ => return None,
    })
}

fn namespace_oid(catalog: &Catalog, schema: &str) -> u32 {
    catalog.schemas.get(schema).map(|s| s.oid).unwrap_or(0)
}

fn pg_namespace(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("nspname", T),
        ("nspowner", OID),
        ("nspacl", T),
    ]);
    for sch in catalog.schemas.values() {
        t.row(vec![
            o(sch.oid),
            s(&sch.name),
            o(SUPERUSER_OID),
            null_text(),
        ]);
    }
    t.build()
}

fn pg_class(scope: &Arc<PlanScope>, catalog: &Catalog) -> Arc<dyn TableProvider> {
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
    let mut add = |oid_: u32,
                   name: &str,
                   ns: u32,
                   kind: &str,
                   am: u32,
                   natts: i16,
                   has_index: bool,
                   checks: i16,
                   tuples: f32,
                   options: ScalarValue| {
        t.row(vec![
            o(oid_),
            s(name),
            o(ns),
            o(0),
            o(0),
            o(SUPERUSER_OID),
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
            b(false),
            b(false),
            b(false),
            b(false),
            b(true),
            s("d"),
            b(false),
            o(0),
            o(0),
            o(0),
            null_text(),
            options,
            null_text(),
        ]);
    };
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
        );
    }
    t.build()
}

fn pg_attribute(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("attrelid", OID),
        ("attname", T),
        ("atttypid", OID),
        ("attstattarget", I32),
        ("attlen", I16),
        ("attnum", I16),
        ("attndims", I32),
        ("atttypmod", I32),
        ("attnotnull", BOOL),
        ("atthasdef", BOOL),
        ("atthasmissing", BOOL),
        ("attidentity", T),
        ("attgenerated", T),
        ("attisdropped", BOOL),
        ("attislocal", BOOL),
        ("attinhcount", I32),
        ("attcollation", OID),
        ("attcompression", T),
        ("attstorage", T),
        ("attalign", T),
        ("attacl", T),
        ("attoptions", T),
    ]);
    for table in catalog.tables.values() {
        for (i, c) in table.columns.iter().enumerate() {
            let (type_oid, typmod) = pg_type_of(&c.data_type);
            let identity = match &c.identity {
                Some(id) if id.always => "a",
                Some(_) => "d",
                None => "",
            };
            let collation = if matches!(type_oid, oid::TEXT | oid::VARCHAR | oid::BPCHAR) {
                100
            } else {
                0
            };
            t.row(vec![
                o(table.oid),
                s(&c.name),
                o(type_oid),
                i32v(-1),
                i16v(-1),
                i16v(i as i16 + 1),
                i32v(0),
                i32v(typmod),
                b(c.not_null),
                b(c.default_sql.is_some()),
                b(false),
                s(identity),
                s(""),
                b(false),
                b(true),
                i32v(0),
                o(collation),
                s(""),
                s("p"),
                s("i"),
                null_text(),
                null_text(),
            ]);
        }
    }
    for index in catalog.indexes.values() {
        if let Some(table) = catalog.tables.get(&index.table) {
            for (i, col) in index.columns.iter().enumerate() {
                let c = &table.columns[*col];
                let (type_oid, typmod) = pg_type_of(&c.data_type);
                t.row(vec![
                    o(index.oid),
                    s(&c.name),
                    o(type_oid),
                    i32v(-1),
                    i16v(-1),
                    i16v(i as i16 + 1),
                    i32v(0),
                    i32v(typmod),
                    b(false),
                    b(false),
                    b(false),
                    s(""),
                    s(""),
                    b(false),
                    b(true),
                    i32v(0),
                    o(0),
                    s(""),
                    s("p"),
                    s("i"),
                    null_text(),
                    null_text(),
                ]);
            }
        }
    }
    t.build()
}

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
    (oid::BOOL_ARRAY, "_bool", -1, "A"),
    (oid::INT2_ARRAY, "_int2", -1, "A"),
    (oid::INT4_ARRAY, "_int4", -1, "A"),
    (oid::INT8_ARRAY, "_int8", -1, "A"),
    (oid::TEXT_ARRAY, "_text", -1, "A"),
    (oid::FLOAT8_ARRAY, "_float8", -1, "A"),
];

fn pg_type() -> Arc<dyn TableProvider> {
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
    ]);
    for (type_oid, name, len, category) in BUILTIN_TYPES {
        let elem = match *type_oid {
            oid::BOOL_ARRAY => oid::BOOL,
            oid::INT2_ARRAY => oid::INT2,
            oid::INT4_ARRAY => oid::INT4,
            oid::INT8_ARRAY => oid::INT8,
            oid::TEXT_ARRAY => oid::TEXT,
            oid::FLOAT8_ARRAY => oid::FLOAT8,
            _ => 0,
        };
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
            s("-"),
            o(elem),
            o(0),
            s(&format!("{name}in")),
            s(&format!("{name}out")),
            s(&format!("{name}recv")),
            s(&format!("{name}send")),
            b(false),
            o(0),
            i32v(-1),
            i32v(0),
            o(if *category == "S" { 100 } else { 0 }),
            null_text(),
        ]);
    }
    t.build()
}

fn int2vector(cols: &[usize]) -> String {
    cols.iter()
        .map(|c| (c + 1).to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

fn pg_index(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("indexrelid", OID),
        ("indrelid", OID),
        ("indnatts", I16),
        ("indnkeyatts", I16),
        ("indisunique", BOOL),
        ("indnullsnotdistinct", BOOL),
        ("indisprimary", BOOL),
        ("indisexclusion", BOOL),
        ("indimmediate", BOOL),
        ("indisclustered", BOOL),
        ("indisvalid", BOOL),
        ("indcheckxmin", BOOL),
        ("indisready", BOOL),
        ("indislive", BOOL),
        ("indisreplident", BOOL),
        ("indkey", T),
        ("indcollation", T),
        ("indclass", T),
        ("indoption", T),
        ("indexprs", T),
        ("indpred", T),
    ]);
    for index in catalog.indexes.values() {
        let n = index.columns.len().max(index.key_sql.len()) as i16;
        t.row(vec![
            o(index.oid),
            o(index.table),
            i16v(n),
            i16v(n),
            b(index.unique),
            b(false),
            b(index.primary),
            b(false),
            b(true),
            b(false),
            b(true),
            b(false),
            b(true),
            b(true),
            b(false),
            s(&int2vector(&index.columns)),
            s(""),
            s(""),
            s(""),
            null_text(),
            null_text(),
        ]);
    }
    t.build()
}

pub fn constraint_definition(catalog: &Catalog, table_oid: u32, kind: &ConstraintKind) -> String {
    let table = catalog.tables.get(&table_oid);
    let names = |oid_: u32, cols: &[usize]| -> String {
        let t = catalog.tables.get(&oid_);
        cols.iter()
            .map(|c| t.map(|t| t.columns[*c].name.clone()).unwrap_or_default())
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
            ..
        } => {
            let ref_name = catalog
                .tables
                .get(ref_table)
                .map(|t| t.name.clone())
                .unwrap_or_default();
            let _ = table;
            format!(
                "FOREIGN KEY ({}) REFERENCES {}({})",
                names(table_oid, columns),
                ref_name,
                names(*ref_table, ref_columns)
            )
        }
    }
}

fn pg_constraint(catalog: &Catalog) -> Arc<dyn TableProvider> {
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

fn pg_database() -> Arc<dyn TableProvider> {
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

fn pg_roles(name: &str) -> Arc<dyn TableProvider> {
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

fn pg_am() -> Arc<dyn TableProvider> {
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

fn pg_tables(catalog: &Catalog) -> Arc<dyn TableProvider> {
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
            s("postgres"),
            null_text(),
            b(has_index),
            b(false),
            b(false),
            b(false),
        ]);
    }
    t.build()
}

fn pg_views(catalog: &Catalog) -> Arc<dyn TableProvider> {
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
            s("postgres"),
            s(&v.query_sql),
        ]);
    }
    t.build()
}

pub fn index_definition(catalog: &Catalog, index_oid: u32) -> Option<String> {
    let index = catalog.indexes.get(&index_oid)?;
    let table = catalog.tables.get(&index.table)?;
    // Column keys take the columns' current names (they may have been renamed); expression
    // indexes keep their keys as text.
    let keys: Vec<&str> = if index.columns.is_empty() {
        index.key_sql.iter().map(String::as_str).collect()
    } else {
        index
            .columns
            .iter()
            .map(|c| table.columns[*c].name.as_str())
            .collect()
    };
    let predicate = index
        .predicate_sql
        .as_ref()
        .map(|p| format!(" WHERE ({p})"))
        .unwrap_or_default();
    Some(format!(
        "CREATE {}INDEX {} ON {}.{} USING btree ({}){predicate}",
        if index.unique { "UNIQUE " } else { "" },
        index.name,
        table.schema,
        table.name,
        keys.join(", ")
    ))
}

fn pg_indexes(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("schemaname", T),
        ("tablename", T),
        ("indexname", T),
        ("tablespace", T),
        ("indexdef", T),
    ]);
    for index in catalog.indexes.values() {
        if let Some(table) = catalog.tables.get(&index.table) {
            t.row(vec![
                s(&table.schema),
                s(&table.name),
                s(&index.name),
                null_text(),
                s(&index_definition(catalog, index.oid).unwrap_or_default()),
            ]);
        }
    }
    t.build()
}

fn pg_attrdef(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[("oid", OID), ("adrelid", OID), ("adnum", I16), ("adbin", T)]);
    for table in catalog.tables.values() {
        for (i, c) in table.columns.iter().enumerate() {
            if let Some(d) = &c.default_sql {
                t.row(vec![
                    o(table.oid * 1000 + i as u32),
                    o(table.oid),
                    i16v(i as i16 + 1),
                    s(d),
                ]);
            }
        }
    }
    t.build()
}

fn pg_sequence(catalog: &Catalog) -> Arc<dyn TableProvider> {
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

fn pg_settings(scope: &Arc<PlanScope>) -> Arc<dyn TableProvider> {
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

/// `format_type(oid, typmod)` for the types Shoal knows.
pub fn format_type_oid(type_oid: u32, typmod: i32) -> Option<String> {
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
            .find(|t| t.0 == type_oid)
            .map(|t| t.1)?,
    };
    Some(base.to_string())
}

#[allow(dead_code)]
fn _uses(t: &shoal_storage::types::DataType) -> String {
    format_type(t)
}
