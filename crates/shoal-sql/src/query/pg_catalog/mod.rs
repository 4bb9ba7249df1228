//! pg_catalog: the system tables psql, pgbench and drivers query, generated on demand from
//! Shoal's catalog as small in-memory Arrow tables. Only what clients ask for is filled in;
//! columns that have no meaning in Shoal carry PostgreSQL's defaults. This module has the
//! table builder and `table`, which picks a table by name; the tables themselves are grouped
//! by what they describe: relations (`relations`), their columns (`columns`), indexes
//! (`indexes`), constraints (`constraints`), types (`types`), functions and operators
//! (`routines`) and the server's database, role, access methods and settings (`server`).

mod columns;
mod constraints;
mod empty;
mod extensions;
mod indexes;
mod live;
pub use live::{fallible_live_view_of, live_view, live_view_of};
mod relations;
mod routines;
mod server;
mod statistics;
mod table_oid;
mod triggers;
pub use triggers::trigger_definition;
mod types;

pub use columns::default_text;
pub use constraints::constraint_definition;
pub use indexes::{index_definition, index_key_definition};
pub use relations::sequence_relation;
pub use routines::function_oid;
pub use types::{format_type_oid, format_user_type, BUILTIN_TYPES};

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, Schema};
use datafusion::catalog::MemTable;
use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::Catalog;

use crate::query::scope::PlanScope;
use crate::types::format_type;
use columns::{pg_attrdef, pg_attribute};
use constraints::pg_constraint;
use indexes::{pg_index, pg_indexes};
use relations::{
    pg_class, pg_depend, pg_namespace, pg_sequence, pg_statio_tables, pg_tables, pg_views,
};
use routines::{pg_operator, pg_proc};
use server::{
    pg_am, pg_auth_members, pg_cursors, pg_database, pg_hba_file_rules, pg_locks,
    pg_prepared_statements, pg_roles, pg_settings, pg_stat_activity,
};
use types::pg_type;

/// Builds a table from column definitions and rows of scalars.
pub struct TableBuilder {
    fields: Vec<Field>,
    rows: Vec<Vec<ScalarValue>>,
}

/// The catalog columns of PostgreSQL's one-byte `"char"` type, declared as such (clients such
/// as asyncpg read a `"char"` as bytes, not as a string).
const CHAR_COLUMNS: &[&str] = &[
    "typtype",
    "typcategory",
    "typdelim",
    "typalign",
    "typstorage",
    "relkind",
    "relpersistence",
    "relreplident",
    "attalign",
    "attstorage",
    "attidentity",
    "attgenerated",
    "contype",
    "confupdtype",
    "confdeltype",
    "confmatchtype",
    "prokind",
    "provolatile",
    "proparallel",
    "oprkind",
    "amtype",
    "deptype",
];

/// The catalog columns of PostgreSQL's `name` type (identifiers), declared as such: clients
/// tell `name` from `text` (Sequelize parses an `array_agg(attname)`, a `name[]`, itself).
/// information_schema's identifiers are `sql_identifier`, a domain clients see as text.
const NAME_COLUMNS: &[&str] = &[
    "amname",
    "attname",
    "collname",
    "conname",
    "datname",
    "enumlabel",
    "extname",
    "indexname",
    "nspname",
    "opcname",
    "oprname",
    "polname",
    "proname",
    "pubname",
    "relname",
    "rolname",
    "rulename",
    "schemaname",
    "spcname",
    "stxname",
    "tablename",
    "tableowner",
    "tgname",
    "typname",
    "usename",
    "viewname",
    "viewowner",
];

impl TableBuilder {
    pub fn new(columns: &[(&str, ArrowType)]) -> Self {
        let builder = TableBuilder {
            fields: columns
                .iter()
                .map(|(n, t)| Field::new(*n, t.clone(), true))
                .collect(),
            rows: Vec::new(),
        };
        let builder = CHAR_COLUMNS.iter().fold(builder, |b, column| {
            b.with_pg_type(column, crate::types::oid::CHAR)
        });
        NAME_COLUMNS.iter().fold(builder, |b, column| {
            b.with_pg_type(column, crate::types::oid::NAME)
        })
    }

    /// Declares `column`'s PostgreSQL type where its Arrow type does not say it (the catalogs'
    /// int2vector and oidvector columns are lists).
    pub fn with_pg_type(mut self, column: &str, type_oid: u32) -> Self {
        for f in self.fields.iter_mut().filter(|f| f.name() == column) {
            *f = f.clone().with_metadata(
                [(
                    crate::types::PG_TYPE_METADATA_KEY.to_string(),
                    type_oid.to_string(),
                )]
                .into(),
            );
        }
        self
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

/// Whether PostgreSQL has a built-in function of this name (one Shoal lists in pg_proc).
pub fn is_builtin_function(name: &str) -> bool {
    static NAMES: std::sync::LazyLock<std::collections::HashSet<&'static str>> =
        std::sync::LazyLock::new(|| routines::FUNCTIONS.iter().map(|f| f.1).collect());
    NAMES.contains(name)
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

/// An array column (`"char"[]`, `text[]`) of a catalog Shoal keeps empty.
fn text_list() -> ArrowType {
    ArrowType::List(Arc::new(Field::new_list_field(T, true)))
}

/// The owner role of every object (Shoal has one role for now).
pub const SUPERUSER_OID: u32 = 10;
pub const DATABASE_OID: u32 = 5;
const HEAP_AM_OID: u32 = 2;
const BTREE_AM_OID: u32 = 403;
/// Shoal's column table access method (outside PostgreSQL's built-in OIDs, below user OIDs).
const COLUMNAR_AM_OID: u32 = 9300;

/// pg_extension's OID (pg_description.classoid of an extension's comment).
const PG_EXTENSION_OID: u32 = 3079;

/// The system catalogs by their PostgreSQL OIDs, which `'pg_catalog.pg_class'::regclass`
/// gives (clients compare pg_description.classoid and pg_depend.classid with them).
pub const SYSTEM_CATALOG_OIDS: &[(&str, u32)] = &[
    ("pg_type", 1247),
    ("pg_enum", 3501),
    ("pg_attribute", 1249),
    ("pg_proc", 1255),
    ("pg_class", 1259),
    ("pg_authid", 1260),
    ("pg_database", 1262),
    ("pg_sequence", 2224),
    ("pg_am", 2601),
    ("pg_attrdef", 2604),
    ("pg_constraint", 2606),
    ("pg_depend", 2608),
    ("pg_description", 2609),
    ("pg_index", 2610),
    ("pg_inherits", 2611),
    ("pg_namespace", 2615),
    ("pg_trigger", 2620),
    ("pg_extension", PG_EXTENSION_OID),
    ("pg_collation", 3456),
    ("pg_default_acl", 826),
    ("pg_tablespace", 1213),
    ("pg_foreign_server", 1417),
    ("pg_foreign_data_wrapper", 2328),
    ("pg_amop", 2602),
    ("pg_amproc", 2603),
    ("pg_cast", 2605),
    ("pg_conversion", 2607),
    ("pg_language", 2612),
    ("pg_opclass", 2616),
    ("pg_operator", 2617),
    ("pg_rewrite", 2618),
    ("pg_opfamily", 2753),
    ("pg_largeobject_metadata", 2995),
    ("pg_foreign_table", 3118),
    ("pg_policy", 3256),
    ("pg_partitioned_table", 3350),
    ("pg_statistic_ext", 3381),
    ("pg_init_privs", 3394),
    ("pg_event_trigger", 3466),
    ("pg_range", 3541),
    ("pg_transform", 3576),
    ("pg_shseclabel", 3592),
    ("pg_db_role_setting", 2964),
    ("pg_seclabel", 3596),
    ("pg_ts_dict", 3600),
    ("pg_ts_parser", 3601),
    ("pg_ts_config", 3602),
    ("pg_ts_template", 3764),
    ("pg_subscription", 6100),
    ("pg_publication", 6104),
    ("pg_publication_rel", 6106),
    ("pg_publication_namespace", 6237),
];

pub fn table(scope: &Arc<PlanScope>, name: &str) -> Option<Arc<dyn TableProvider>> {
    let table = catalog_table(scope, name)?;
    let wants_tableoid = scope
        .wants_tableoid
        .load(std::sync::atomic::Ordering::Relaxed);
    Some(match SYSTEM_CATALOG_OIDS.iter().find(|(n, _)| *n == name) {
        Some((_, table_oid)) if wants_tableoid => table_oid::with_table_oid(table, *table_oid),
        _ => table,
    })
}

pub use table_oid::names_tableoid;

fn catalog_table(scope: &Arc<PlanScope>, name: &str) -> Option<Arc<dyn TableProvider>> {
    let catalog = scope.engine.catalog.read();
    Some(match name {
        "pg_namespace" => pg_namespace(&catalog),
        "pg_class" => pg_class(scope, &catalog),
        "pg_attribute" => pg_attribute(&catalog),
        "pg_type" => pg_type(&catalog),
        "pg_enum" => types::pg_enum(&catalog),
        "pg_index" => pg_index(&catalog),
        "pg_constraint" => pg_constraint(&catalog),
        "pg_database" => pg_database(&catalog),
        "pg_roles" | "pg_user" | "pg_authid" => pg_roles(name, &catalog),
        "pg_auth_members" => pg_auth_members(&catalog),
        "pg_am" => pg_am(),
        "pg_tables" => pg_tables(&catalog),
        "pg_views" => pg_views(scope, &catalog),
        "pg_default_acl" => relations::pg_default_acl(&catalog),
        // Every table is a user table: the system catalogs are not tables in Shoal.
        "pg_statio_all_tables" | "pg_statio_user_tables" => pg_statio_tables(&catalog),
        "pg_indexes" => pg_indexes(&catalog),
        "pg_attrdef" => pg_attrdef(&catalog),
        "pg_sequence" => pg_sequence(&catalog),
        "pg_depend" => pg_depend(&catalog),
        "pg_rewrite" => relations::pg_rewrite(&catalog),
        "pg_description" => {
            let mut t = TableBuilder::new(&[
                ("objoid", OID),
                ("classoid", OID),
                ("objsubid", I32),
                ("description", T),
            ]);
            for (&(class, object, column), text) in &catalog.comments {
                if catalog.comment_target_exists((class, object, column)) {
                    t.row(vec![o(object), o(class), i32v(column), s(text)]);
                }
            }
            for (object, text) in extensions::extension_descriptions(&catalog) {
                t.row(vec![o(object), o(PG_EXTENSION_OID), i32v(0), s(text)]);
            }
            t.build()
        }
        "pg_settings" => pg_settings(scope),
        "pg_prepared_statements" => pg_prepared_statements(scope),
        "pg_cursors" => pg_cursors(scope),
        "pg_hba_file_rules" => {
            let scope = scope.clone();
            live::live_view(move || pg_hba_file_rules(&scope))
        }
        "pg_locks" => {
            let scope = scope.clone();
            live::live_view(move || pg_locks(&scope))
        }
        "pg_stat_database"
        | "pg_stat_all_tables"
        | "pg_stat_user_tables"
        | "pg_stat_all_indexes"
        | "pg_stat_user_indexes"
        | "pg_statio_all_indexes"
        | "pg_statio_user_indexes"
        | "pg_stat_database_conflicts"
        | "pg_stat_bgwriter"
        | "pg_stat_wal"
        | "pg_stat_archiver"
        | "pg_stat_replication"
        | "pg_stat_wal_receiver"
        | "pg_replication_slots" => statistics::view(scope, name),
        "pg_stat_activity" => {
            let scope = scope.clone();
            live::live_view(move || pg_stat_activity(&scope))
        }
        "shoal_memory" => crate::query::shoal_memory::shoal_memory(scope),
        "pg_tablespace" => {
            let mut t = TableBuilder::new(&[
                ("oid", OID),
                ("spcname", T),
                ("spcowner", OID),
                ("spcacl", text_list()),
                ("spcoptions", text_list()),
            ]);
            for (oid, name) in [(1663, "pg_default"), (1664, "pg_global")] {
                t.row(vec![
                    o(oid),
                    s(name),
                    o(SUPERUSER_OID),
                    ScalarValue::List(ScalarValue::new_list_nullable(&[], &T)),
                    ScalarValue::List(ScalarValue::new_list_nullable(&[], &T)),
                ]);
            }
            t.build()
        }
        "pg_language" => server::pg_language(),
        "pg_extension" => extensions::pg_extension(&catalog),
        "pg_available_extensions" => extensions::pg_available_extensions(&catalog),
        "pg_proc" => pg_proc(&catalog),
        "pg_trigger" => triggers::pg_trigger(&catalog),
        "pg_operator" => pg_operator(),
        other => empty::empty_catalog(other)?,
    })
}

fn namespace_oid(catalog: &Catalog, schema: &str) -> u32 {
    catalog.schemas.get(schema).map(|s| s.oid).unwrap_or(0)
}

#[allow(dead_code)]
fn _uses(t: &shoal_storage::types::DataType) -> String {
    format_type(t)
}
