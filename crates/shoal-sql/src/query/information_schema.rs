//! information_schema: the SQL-standard catalog views that JDBC, BI tools and ORMs read,
//! generated from Shoal's catalog like pg_catalog, with PostgreSQL 15's columns. Their types
//! are what clients see from PostgreSQL: its domains resolve to their base types in a result
//! description, so identifiers (`sql_identifier`) are `name`, character data and yes/no
//! (`character_data`, `yes_or_no`) are `varchar` and numbers (`cardinal_number`) `integer`.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::{
    Catalog, ConstraintDef, ConstraintKind, ConstraintTiming, ForeignKeyAction, RelationKind,
    TableDef,
};
use shoal_storage::catalog_privileges::{role_name, AclItem, ObjectClass, Privileges, PUBLIC};
use shoal_storage::types::DataType;

use crate::query::pg_catalog::{i32v, null_text, s, TableBuilder};
use crate::query::scope::PlanScope;
use crate::types::{format_type, oid};

/// The one database's name, information_schema's `*_catalog` columns.
const DATABASE: &str = "postgres";

/// A view column's type.
#[derive(Clone, Copy)]
enum Col {
    /// `sql_identifier`: a `name`.
    Ident,
    /// `character_data` and `yes_or_no`: a `varchar`.
    Chars,
    /// `cardinal_number`: an `integer`.
    Number,
}
use Col::{Chars, Ident, Number};

pub fn table(scope: &Arc<PlanScope>, name: &str) -> Option<Arc<dyn TableProvider>> {
    let catalog = scope.engine.catalog.read();
    Some(match name {
        "tables" => tables(&catalog),
        "columns" => columns(&catalog),
        "schemata" => schemata(&catalog),
        "table_constraints" => table_constraints(&catalog),
        "key_column_usage" => key_column_usage(&catalog),
        "constraint_column_usage" => constraint_column_usage(&catalog),
        "referential_constraints" => referential_constraints(&catalog),
        "check_constraints" => check_constraints(&catalog),
        "views" => views(&catalog),
        "sequences" => sequences(&catalog),
        "table_privileges" => table_privileges(scope, &catalog, false),
        "role_table_grants" => table_privileges(scope, &catalog, true),
        "column_privileges" => column_privileges(scope, &catalog),
        _ => return None,
    })
}

/// A view's table with its columns typed as PostgreSQL's.
fn view(columns: &[(&str, Col)]) -> TableBuilder {
    let arrow: Vec<(&str, ArrowType)> = columns
        .iter()
        .map(|(n, c)| {
            let t = match c {
                Number => ArrowType::Int32,
                Ident | Chars => ArrowType::Utf8,
            };
            (*n, t)
        })
        .collect();
    columns
        .iter()
        .fold(TableBuilder::new(&arrow), |b, (n, c)| match c {
            Ident => b.with_pg_type(n, oid::NAME),
            Chars => b.with_pg_type(n, oid::VARCHAR),
            Number => b,
        })
}

fn int(v: Option<i32>) -> ScalarValue {
    v.map_or(ScalarValue::Int32(None), i32v)
}

fn opt(v: Option<&str>) -> ScalarValue {
    v.map_or_else(null_text, s)
}

fn yes_no(v: bool) -> ScalarValue {
    s(if v { "YES" } else { "NO" })
}

fn tables(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = view(&[
        ("table_catalog", Ident),
        ("table_schema", Ident),
        ("table_name", Ident),
        ("table_type", Chars),
        ("self_referencing_column_name", Ident),
        ("reference_generation", Chars),
        ("user_defined_type_catalog", Ident),
        ("user_defined_type_schema", Ident),
        ("user_defined_type_name", Ident),
        ("is_insertable_into", Chars),
        ("is_typed", Chars),
        ("commit_action", Chars),
    ]);
    let relations = catalog
        .tables
        .values()
        .map(|table| (&table.schema, &table.name, "BASE TABLE", true))
        .chain(
            catalog
                .views
                .values()
                .map(|v| (&v.schema, &v.name, "VIEW", false)),
        );
    for (schema, name, kind, insertable) in relations {
        t.row(vec![
            s(DATABASE),
            s(schema),
            s(name),
            s(kind),
            null_text(),
            null_text(),
            null_text(),
            null_text(),
            null_text(),
            yes_no(insertable),
            s("NO"),
            null_text(),
        ]);
    }
    t.build()
}

/// information_schema's name of a column's type: arrays are `ARRAY`, enums `USER-DEFINED`,
/// the rest the type's name without its modifiers.
fn standard_type_name(t: &DataType) -> String {
    match t {
        DataType::Enum(_) => "USER-DEFINED".into(),
        DataType::Array(_) => "ARRAY".into(),
        DataType::Numeric { .. } => "numeric".into(),
        DataType::Varchar(_) => "character varying".into(),
        DataType::Char(_) => "character".into(),
        t => format_type(t),
    }
}

/// pg_type.typname of a column's type (`int4`, `_int4` for its arrays, an enum's name).
fn udt_name(t: &DataType) -> String {
    match t {
        DataType::Enum(e) => e.name.clone(),
        DataType::Array(element) => format!("_{}", udt_name(element)),
        t => {
            let type_oid = crate::types::pg_type_of(t).0;
            crate::query::pg_catalog::BUILTIN_TYPES
                .iter()
                .find(|b| b.0 == type_oid)
                .map_or("text", |b| b.1)
                .to_string()
        }
    }
}

/// numeric_precision, its radix and numeric_scale of a column's type.
fn numeric_facets(t: &DataType) -> (Option<i32>, Option<i32>, Option<i32>) {
    match t {
        DataType::Int16 => (Some(16), Some(2), Some(0)),
        DataType::Int32 => (Some(32), Some(2), Some(0)),
        DataType::Int64 => (Some(64), Some(2), Some(0)),
        DataType::Float32 => (Some(24), Some(2), None),
        DataType::Float64 => (Some(53), Some(2), None),
        DataType::Numeric {
            precision: Some(p),
            scale,
        } => (Some(*p as i32), Some(10), Some(scale.unwrap_or(0) as i32)),
        DataType::Numeric {
            precision: None, ..
        } => (None, Some(10), None),
        _ => (None, None, None),
    }
}

/// The fractional digits of a date/time column's seconds (Shoal keeps microseconds).
fn datetime_precision(t: &DataType) -> Option<i32> {
    match t {
        DataType::Date => Some(0),
        DataType::Time | DataType::Timestamp | DataType::TimestampTz | DataType::Interval => {
            Some(6)
        }
        _ => None,
    }
}

fn columns(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = view(&[
        ("table_catalog", Ident),
        ("table_schema", Ident),
        ("table_name", Ident),
        ("column_name", Ident),
        ("ordinal_position", Number),
        ("column_default", Chars),
        ("is_nullable", Chars),
        ("data_type", Chars),
        ("character_maximum_length", Number),
        ("character_octet_length", Number),
        ("numeric_precision", Number),
        ("numeric_precision_radix", Number),
        ("numeric_scale", Number),
        ("datetime_precision", Number),
        ("interval_type", Chars),
        ("interval_precision", Number),
        ("character_set_catalog", Ident),
        ("character_set_schema", Ident),
        ("character_set_name", Ident),
        ("collation_catalog", Ident),
        ("collation_schema", Ident),
        ("collation_name", Ident),
        ("domain_catalog", Ident),
        ("domain_schema", Ident),
        ("domain_name", Ident),
        ("udt_catalog", Ident),
        ("udt_schema", Ident),
        ("udt_name", Ident),
        ("scope_catalog", Ident),
        ("scope_schema", Ident),
        ("scope_name", Ident),
        ("maximum_cardinality", Number),
        ("dtd_identifier", Ident),
        ("is_self_referencing", Chars),
        ("is_identity", Chars),
        ("identity_generation", Chars),
        ("identity_start", Chars),
        ("identity_increment", Chars),
        ("identity_maximum", Chars),
        ("identity_minimum", Chars),
        ("identity_cycle", Chars),
        ("is_generated", Chars),
        ("generation_expression", Chars),
        ("is_updatable", Chars),
    ]);
    for table in catalog.tables.values() {
        for (i, c) in table.columns.iter().enumerate() {
            let max_length = match c.data_type {
                DataType::Varchar(Some(n)) | DataType::Char(n) => Some(n as i32),
                _ => None,
            };
            // Four bytes a character at most in UTF-8; text's limit is 1 GB.
            let octet_length = match c.data_type {
                DataType::Varchar(Some(n)) | DataType::Char(n) => Some(n as i32 * 4),
                DataType::Varchar(None) | DataType::Text => Some(1 << 30),
                _ => None,
            };
            let (precision, radix, scale) = numeric_facets(&c.data_type);
            let udt_schema = match &c.data_type {
                DataType::Enum(e) => catalog.types.get(&e.oid).map(|d| d.schema.as_str()),
                _ => None,
            }
            .unwrap_or("pg_catalog");
            let sequence = c
                .identity
                .as_ref()
                .and_then(|id| catalog.sequences.get(&id.sequence));
            let identity_facet = |f: fn(&shoal_storage::catalog::SequenceDef) -> String| {
                sequence.map_or_else(null_text, |q| s(&f(q)))
            };
            t.row(vec![
                s(DATABASE),
                s(&table.schema),
                s(&table.name),
                s(&c.name),
                i32v(i as i32 + 1),
                // An identity column's values come from its sequence, not a default.
                match (&c.default_sql, &c.identity) {
                    (Some(d), None) => s(&crate::query::pg_catalog::default_text(d, &c.data_type)),
                    _ => null_text(),
                },
                yes_no(!c.not_null),
                s(&standard_type_name(&c.data_type)),
                int(max_length),
                int(octet_length),
                int(precision),
                int(radix),
                int(scale),
                int(datetime_precision(&c.data_type)),
                null_text(),
                int(None),
                null_text(),
                null_text(),
                null_text(),
                null_text(),
                null_text(),
                null_text(),
                null_text(),
                null_text(),
                null_text(),
                s(DATABASE),
                s(udt_schema),
                s(&udt_name(&c.data_type)),
                null_text(),
                null_text(),
                null_text(),
                int(None),
                s(&(i + 1).to_string()),
                s("NO"),
                yes_no(c.identity.is_some()),
                match &c.identity {
                    Some(id) if id.always => s("ALWAYS"),
                    Some(_) => s("BY DEFAULT"),
                    None => null_text(),
                },
                identity_facet(|q| q.start.to_string()),
                identity_facet(|q| q.increment.to_string()),
                identity_facet(|q| q.max_value.to_string()),
                identity_facet(|q| q.min_value.to_string()),
                if c.identity.is_some() {
                    yes_no(sequence.is_some_and(|q| q.cycle))
                } else {
                    s("NO")
                },
                s("NEVER"),
                null_text(),
                s("YES"),
            ]);
        }
    }
    t.build()
}

fn schemata(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = view(&[
        ("catalog_name", Ident),
        ("schema_name", Ident),
        ("schema_owner", Ident),
        ("default_character_set_catalog", Ident),
        ("default_character_set_schema", Ident),
        ("default_character_set_name", Ident),
        ("sql_path", Chars),
    ]);
    for sch in catalog.schemas.values() {
        t.row(vec![
            s(DATABASE),
            s(&sch.name),
            s("postgres"),
            null_text(),
            null_text(),
            null_text(),
            null_text(),
        ]);
    }
    t.build()
}

/// PostgreSQL lists each NOT NULL column as a CHECK constraint named after the OIDs of its
/// schema and table and the column's number.
fn not_null_constraint_name(catalog: &Catalog, table: &TableDef, column: usize) -> String {
    let namespace = catalog.schemas.get(&table.schema).map_or(0, |s| s.oid);
    format!("{namespace}_{}_{}_not_null", table.oid, column + 1)
}

fn constraint_type(c: &ConstraintDef) -> &'static str {
    match c.kind {
        ConstraintKind::PrimaryKey { .. } => "PRIMARY KEY",
        ConstraintKind::Unique { .. } => "UNIQUE",
        ConstraintKind::Check { .. } => "CHECK",
        ConstraintKind::ForeignKey { .. } => "FOREIGN KEY",
    }
}

fn table_constraints(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = view(&[
        ("constraint_catalog", Ident),
        ("constraint_schema", Ident),
        ("constraint_name", Ident),
        ("table_catalog", Ident),
        ("table_schema", Ident),
        ("table_name", Ident),
        ("constraint_type", Chars),
        ("is_deferrable", Chars),
        ("initially_deferred", Chars),
        ("enforced", Chars),
        ("nulls_distinct", Chars),
    ]);
    for table in catalog.tables.values() {
        let named = table
            .constraints
            .iter()
            .map(|c| (c.name.clone(), constraint_type(c), c));
        for (name, kind, c) in named {
            let nulls_distinct = match c.kind {
                ConstraintKind::Unique { .. } => s("YES"),
                _ => null_text(),
            };
            let timing = match c.kind {
                ConstraintKind::ForeignKey { timing, .. } => timing,
                _ => ConstraintTiming::NotDeferrable,
            };
            t.row(constraint_row(table, &name, kind, timing, nulls_distinct));
        }
        for (i, _) in table.columns.iter().enumerate().filter(|(_, c)| c.not_null) {
            let name = not_null_constraint_name(catalog, table, i);
            let timing = ConstraintTiming::NotDeferrable;
            t.row(constraint_row(table, &name, "CHECK", timing, null_text()));
        }
    }
    t.build()
}

fn constraint_row(
    table: &TableDef,
    name: &str,
    kind: &str,
    timing: ConstraintTiming,
    nulls_distinct: ScalarValue,
) -> Vec<ScalarValue> {
    vec![
        s(DATABASE),
        s(&table.schema),
        s(name),
        s(DATABASE),
        s(&table.schema),
        s(&table.name),
        s(kind),
        yes_no(timing.deferrable()),
        yes_no(timing == ConstraintTiming::Deferred),
        s("YES"),
        nulls_distinct,
    ]
}

/// The columns of the unique constraint (primary key first) a foreign key references.
fn referenced_constraint<'a>(
    referenced: &'a TableDef,
    ref_columns: &[usize],
) -> Option<&'a ConstraintDef> {
    let mut sorted = ref_columns.to_vec();
    sorted.sort_unstable();
    let same = |columns: &[usize]| {
        let mut c = columns.to_vec();
        c.sort_unstable();
        c == sorted
    };
    referenced.constraints.iter().find(|c| match &c.kind {
        ConstraintKind::PrimaryKey { columns, .. } | ConstraintKind::Unique { columns, .. } => {
            same(columns)
        }
        _ => false,
    })
}

fn key_column_usage(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = view(&[
        ("constraint_catalog", Ident),
        ("constraint_schema", Ident),
        ("constraint_name", Ident),
        ("table_catalog", Ident),
        ("table_schema", Ident),
        ("table_name", Ident),
        ("column_name", Ident),
        ("ordinal_position", Number),
        ("position_in_unique_constraint", Number),
    ]);
    for table in catalog.tables.values() {
        for c in &table.constraints {
            let (columns, positions_in_unique): (&[usize], Vec<Option<i32>>) = match &c.kind {
                ConstraintKind::PrimaryKey { columns, .. }
                | ConstraintKind::Unique { columns, .. } => (columns, vec![None; columns.len()]),
                ConstraintKind::ForeignKey {
                    columns,
                    ref_table,
                    ref_columns,
                    ..
                } => {
                    // Where each referenced column stands in the referenced key.
                    let key = catalog
                        .tables
                        .get(ref_table)
                        .and_then(|r| referenced_constraint(r, ref_columns))
                        .and_then(|k| match &k.kind {
                            ConstraintKind::PrimaryKey { columns, .. }
                            | ConstraintKind::Unique { columns, .. } => Some(columns.clone()),
                            _ => None,
                        });
                    let positions = ref_columns
                        .iter()
                        .map(|rc| {
                            key.as_ref()
                                .and_then(|k| k.iter().position(|kc| kc == rc))
                                .map(|p| p as i32 + 1)
                        })
                        .collect();
                    (columns, positions)
                }
                ConstraintKind::Check { .. } => continue,
            };
            for (i, (column, in_unique)) in columns.iter().zip(positions_in_unique).enumerate() {
                t.row(vec![
                    s(DATABASE),
                    s(&table.schema),
                    s(&c.name),
                    s(DATABASE),
                    s(&table.schema),
                    s(&table.name),
                    s(&table.columns[*column].name),
                    i32v(i as i32 + 1),
                    int(in_unique),
                ]);
            }
        }
    }
    t.build()
}

/// For each constraint, the columns it constrains: a foreign key's are those of the table it
/// references, a CHECK's those its expression names.
fn constraint_column_usage(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = view(&[
        ("table_catalog", Ident),
        ("table_schema", Ident),
        ("table_name", Ident),
        ("column_name", Ident),
        ("constraint_catalog", Ident),
        ("constraint_schema", Ident),
        ("constraint_name", Ident),
    ]);
    for table in catalog.tables.values() {
        for c in &table.constraints {
            let (used_table, columns) = match &c.kind {
                ConstraintKind::PrimaryKey { columns, .. }
                | ConstraintKind::Unique { columns, .. } => (table, columns.clone()),
                ConstraintKind::ForeignKey {
                    ref_table,
                    ref_columns,
                    ..
                } => match catalog.tables.get(ref_table) {
                    Some(referenced) => (referenced, ref_columns.clone()),
                    None => continue,
                },
                ConstraintKind::Check { expr_sql } => {
                    (table, crate::ddl::columns_named_in(table, expr_sql))
                }
            };
            for column in columns {
                t.row(vec![
                    s(DATABASE),
                    s(&used_table.schema),
                    s(&used_table.name),
                    s(&used_table.columns[column].name),
                    s(DATABASE),
                    s(&table.schema),
                    s(&c.name),
                ]);
            }
        }
    }
    t.build()
}

fn referential_constraints(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = view(&[
        ("constraint_catalog", Ident),
        ("constraint_schema", Ident),
        ("constraint_name", Ident),
        ("unique_constraint_catalog", Ident),
        ("unique_constraint_schema", Ident),
        ("unique_constraint_name", Ident),
        ("match_option", Chars),
        ("update_rule", Chars),
        ("delete_rule", Chars),
    ]);
    let rule = |a: &ForeignKeyAction| match a {
        ForeignKeyAction::NoAction => "NO ACTION",
        ForeignKeyAction::Restrict => "RESTRICT",
        ForeignKeyAction::Cascade => "CASCADE",
        ForeignKeyAction::SetNull => "SET NULL",
        ForeignKeyAction::SetDefault => "SET DEFAULT",
    };
    for table in catalog.tables.values() {
        for c in &table.constraints {
            let ConstraintKind::ForeignKey {
                ref_table,
                ref_columns,
                on_delete,
                on_update,
                ..
            } = &c.kind
            else {
                continue;
            };
            let referenced = catalog.tables.get(ref_table);
            let key = referenced.and_then(|r| referenced_constraint(r, ref_columns));
            t.row(vec![
                s(DATABASE),
                s(&table.schema),
                s(&c.name),
                s(DATABASE),
                opt(referenced.map(|r| r.schema.as_str())),
                opt(key.map(|k| k.name.as_str())),
                s("NONE"),
                s(rule(on_update)),
                s(rule(on_delete)),
            ]);
        }
    }
    t.build()
}

fn check_constraints(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = view(&[
        ("constraint_catalog", Ident),
        ("constraint_schema", Ident),
        ("constraint_name", Ident),
        ("check_clause", Chars),
    ]);
    for table in catalog.tables.values() {
        for c in &table.constraints {
            if let ConstraintKind::Check { expr_sql } = &c.kind {
                t.row(vec![
                    s(DATABASE),
                    s(&table.schema),
                    s(&c.name),
                    s(&format!("(({expr_sql}))")),
                ]);
            }
        }
        for (i, c) in table.columns.iter().enumerate().filter(|(_, c)| c.not_null) {
            t.row(vec![
                s(DATABASE),
                s(&table.schema),
                s(&not_null_constraint_name(catalog, table, i)),
                s(&format!("{} IS NOT NULL", c.name)),
            ]);
        }
    }
    t.build()
}

fn views(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = view(&[
        ("table_catalog", Ident),
        ("table_schema", Ident),
        ("table_name", Ident),
        ("view_definition", Chars),
        ("check_option", Chars),
        ("is_updatable", Chars),
        ("is_insertable_into", Chars),
        ("is_trigger_updatable", Chars),
        ("is_trigger_deletable", Chars),
        ("is_trigger_insertable_into", Chars),
    ]);
    for v in catalog.views.values() {
        t.row(vec![
            s(DATABASE),
            s(&v.schema),
            s(&v.name),
            s(&crate::dml::restore_locking_syntax(&v.query_sql)),
            s("NONE"),
            s("NO"),
            s("NO"),
            s("NO"),
            s("NO"),
            s("NO"),
        ]);
    }
    t.build()
}

/// The privileges an acl gives, one row per grantor, grantee and privilege, as the privilege
/// views show them: only rows the current role can see (it acts as the grantor or the grantee,
/// or the grantee is PUBLIC); `roles_only` leaves PUBLIC's out. Grantable: held with the
/// grant option, or by the object's owner.
struct AclRows<'a> {
    catalog: &'a Catalog,
    me: Option<shoal_storage::catalog::Oid>,
    roles_only: bool,
}

/// The privileges of tables and columns, by name, in the order PostgreSQL lists them.
const TABLE_PRIVILEGE_NAMES: [(Privileges, &str); 7] = [
    (Privileges::INSERT, "INSERT"),
    (Privileges::SELECT, "SELECT"),
    (Privileges::UPDATE, "UPDATE"),
    (Privileges::DELETE, "DELETE"),
    (Privileges::TRUNCATE, "TRUNCATE"),
    (Privileges::REFERENCES, "REFERENCES"),
    (Privileges::TRIGGER, "TRIGGER"),
];

impl AclRows<'_> {
    fn new<'a>(scope: &PlanScope, catalog: &'a Catalog, roles_only: bool) -> AclRows<'a> {
        AclRows {
            catalog,
            me: catalog.role_named(&scope.current_role()).map(|r| r.oid),
            roles_only,
        }
    }

    /// (grantor, grantee, privilege, grantable) for each privilege of `acl` within `of`.
    fn rows(
        &self,
        acl: &[AclItem],
        owner: shoal_storage::catalog::Oid,
        of: Privileges,
    ) -> Vec<(String, String, &'static str, bool)> {
        let catalog = self.catalog;
        let sees = |role| {
            self.me
                .is_some_and(|me| catalog.has_privileges_of_role(me, role))
        };
        let mut out = Vec::new();
        for item in acl {
            let public = item.grantee == PUBLIC;
            let visible = sees(item.grantor) || (!public && sees(item.grantee)) || public;
            if !visible || (self.roles_only && public) {
                continue;
            }
            let grantee = match public {
                true => "PUBLIC".to_string(),
                false => role_name(catalog, item.grantee),
            };
            let owners = !public && catalog.has_privileges_of_role(item.grantee, owner);
            for (p, privilege) in TABLE_PRIVILEGE_NAMES {
                if of.contains(p) && item.privileges.contains(p) {
                    let grantable = owners || item.grant_options.contains(p);
                    let grantor = role_name(catalog, item.grantor);
                    out.push((grantor, grantee.clone(), privilege, grantable));
                }
            }
        }
        out
    }
}

/// The tables and views, with their kind.
fn relations(catalog: &Catalog) -> Vec<(shoal_storage::catalog::Oid, &str, &str, RelationKind)> {
    catalog
        .tables
        .values()
        .map(|t| {
            (
                t.oid,
                t.schema.as_str(),
                t.name.as_str(),
                RelationKind::Table,
            )
        })
        .chain(catalog.views.values().map(|v| {
            (
                v.oid,
                v.schema.as_str(),
                v.name.as_str(),
                RelationKind::View,
            )
        }))
        .collect()
}

/// table_privileges (and role_table_grants, the same rows without PUBLIC's): one row per
/// privilege a grantor gave a grantee on a table or view, the owner's own included.
fn table_privileges(
    scope: &PlanScope,
    catalog: &Catalog,
    roles_only: bool,
) -> Arc<dyn TableProvider> {
    let mut t = view(&[
        ("grantor", Ident),
        ("grantee", Ident),
        ("table_catalog", Ident),
        ("table_schema", Ident),
        ("table_name", Ident),
        ("privilege_type", Chars),
        ("is_grantable", Chars),
        ("with_hierarchy", Chars),
    ]);
    let acl_rows = AclRows::new(scope, catalog, roles_only);
    for (oid, schema, name, kind) in relations(catalog) {
        let object = (ObjectClass::Relation, oid);
        let acl = catalog.effective_acl(object, Some(kind));
        let all = Privileges::all_for(ObjectClass::Relation, Some(kind));
        for (grantor, grantee, privilege, grantable) in
            acl_rows.rows(&acl, catalog.owner_of(object), all)
        {
            t.row(vec![
                s(&grantor),
                s(&grantee),
                s(DATABASE),
                s(schema),
                s(name),
                s(privilege),
                yes_no(grantable),
                yes_no(privilege == "SELECT"),
            ]);
        }
    }
    t.build()
}

/// column_privileges: one row per privilege a grantor gave a grantee on a column, through
/// the column's own acl or its table's.
fn column_privileges(scope: &PlanScope, catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = view(&[
        ("grantor", Ident),
        ("grantee", Ident),
        ("table_catalog", Ident),
        ("table_schema", Ident),
        ("table_name", Ident),
        ("column_name", Ident),
        ("privilege_type", Chars),
        ("is_grantable", Chars),
    ]);
    let acl_rows = AclRows::new(scope, catalog, false);
    for (oid, schema, name, kind) in relations(catalog) {
        let object = (ObjectClass::Relation, oid);
        let owner = catalog.owner_of(object);
        let ownership = catalog.ownership(object);
        let table_rows = acl_rows.rows(
            &catalog.effective_acl(object, Some(kind)),
            owner,
            Privileges::COLUMN,
        );
        for column in catalog.relation_column_names(oid) {
            let mut rows = table_rows.clone();
            if let Some(acl) = ownership.columns.get(&column) {
                for row in acl_rows.rows(acl, owner, Privileges::COLUMN) {
                    if !rows.contains(&row) {
                        rows.push(row);
                    }
                }
            }
            for (grantor, grantee, privilege, grantable) in rows {
                t.row(vec![
                    s(&grantor),
                    s(&grantee),
                    s(DATABASE),
                    s(schema),
                    s(name),
                    s(&column),
                    s(privilege),
                    yes_no(grantable),
                ]);
            }
        }
    }
    t.build()
}

fn sequences(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = view(&[
        ("sequence_catalog", Ident),
        ("sequence_schema", Ident),
        ("sequence_name", Ident),
        ("data_type", Chars),
        ("numeric_precision", Number),
        ("numeric_precision_radix", Number),
        ("numeric_scale", Number),
        ("start_value", Chars),
        ("minimum_value", Chars),
        ("maximum_value", Chars),
        ("increment", Chars),
        ("cycle_option", Chars),
    ]);
    // An identity column's sequence is internal to it, and PostgreSQL leaves it out.
    let identity_sequences: Vec<u32> = catalog
        .tables
        .values()
        .flat_map(|t| t.columns.iter().filter_map(|c| c.identity.as_ref()))
        .map(|id| id.sequence)
        .collect();
    for seq in catalog
        .sequences
        .values()
        .filter(|q| !identity_sequences.contains(&q.oid))
    {
        let (precision, radix, scale) = numeric_facets(&seq.data_type);
        t.row(vec![
            s(DATABASE),
            s(&seq.schema),
            s(&seq.name),
            s(&format_type(&seq.data_type)),
            int(precision),
            int(radix),
            int(scale),
            s(&seq.start.to_string()),
            s(&seq.min_value.to_string()),
            s(&seq.max_value.to_string()),
            s(&seq.increment.to_string()),
            yes_no(seq.cycle),
        ]);
    }
    t.build()
}
