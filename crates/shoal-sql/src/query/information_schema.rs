//! information_schema: the SQL-standard catalog views that JDBC, BI tools and ORMs read,
//! generated from Shoal's catalog like pg_catalog.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::ConstraintKind;
use shoal_storage::types::DataType;

use crate::query::pg_catalog::{i32v, null_text, s, TableBuilder};
use crate::query::scope::PlanScope;
use crate::types::format_type;

const T: ArrowType = ArrowType::Utf8;
const I32: ArrowType = ArrowType::Int32;

pub fn table(scope: &Arc<PlanScope>, name: &str) -> Option<Arc<dyn TableProvider>> {
    let catalog = scope.engine.catalog.read();
    Some(match name {
        "tables" => {
            let mut t = TableBuilder::new(&[
                ("table_catalog", T),
                ("table_schema", T),
                ("table_name", T),
                ("table_type", T),
                ("is_insertable_into", T),
                ("is_typed", T),
            ]);
            for table in catalog.tables.values() {
                t.row(vec![
                    s("postgres"),
                    s(&table.schema),
                    s(&table.name),
                    s("BASE TABLE"),
                    s("YES"),
                    s("NO"),
                ]);
            }
            for view in catalog.views.values() {
                t.row(vec![
                    s("postgres"),
                    s(&view.schema),
                    s(&view.name),
                    s("VIEW"),
                    s("NO"),
                    s("NO"),
                ]);
            }
            t.build()
        }
        "columns" => {
            let mut t = TableBuilder::new(&[
                ("table_catalog", T),
                ("table_schema", T),
                ("table_name", T),
                ("column_name", T),
                ("ordinal_position", I32),
                ("column_default", T),
                ("is_nullable", T),
                ("data_type", T),
                ("character_maximum_length", I32),
                ("numeric_precision", I32),
                ("numeric_scale", I32),
                ("udt_name", T),
                ("is_identity", T),
                ("identity_generation", T),
            ]);
            for table in catalog.tables.values() {
                for (i, c) in table.columns.iter().enumerate() {
                    let data_type = match &c.data_type {
                        DataType::Enum(_) => "USER-DEFINED".to_string(),
                        t => format_type(t).split('(').next().unwrap_or("").to_string(),
                    };
                    let max_len = match c.data_type {
                        DataType::Varchar(Some(n)) | DataType::Char(n) => i32v(n as i32),
                        _ => datafusion::common::ScalarValue::Int32(None),
                    };
                    let (precision, scale) = match &c.data_type {
                        DataType::Int16 => (i32v(16), i32v(0)),
                        DataType::Int32 => (i32v(32), i32v(0)),
                        DataType::Int64 => (i32v(64), i32v(0)),
                        DataType::Numeric {
                            precision: Some(p),
                            scale,
                        } => (i32v(*p as i32), i32v(scale.unwrap_or(0) as i32)),
                        _ => (
                            datafusion::common::ScalarValue::Int32(None),
                            datafusion::common::ScalarValue::Int32(None),
                        ),
                    };
                    let enum_name = match &c.data_type {
                        DataType::Enum(e) => catalog.types.get(&e.oid).map(|d| d.name.as_str()),
                        _ => None,
                    };
                    let udt = crate::query::pg_catalog::BUILTIN_TYPES
                        .iter()
                        .find(|t| t.0 == crate::types::pg_type_of(&c.data_type).0)
                        .map(|t| t.1)
                        .or(enum_name)
                        .unwrap_or("text");
                    t.row(vec![
                        s("postgres"),
                        s(&table.schema),
                        s(&table.name),
                        s(&c.name),
                        i32v(i as i32 + 1),
                        c.default_sql
                            .as_deref()
                            .map(|d| s(&crate::query::pg_catalog::default_text(d, &c.data_type)))
                            .unwrap_or_else(null_text),
                        s(if c.not_null { "NO" } else { "YES" }),
                        s(&data_type),
                        max_len,
                        precision,
                        scale,
                        s(udt),
                        s(if c.identity.is_some() { "YES" } else { "NO" }),
                        match &c.identity {
                            Some(id) if id.always => s("ALWAYS"),
                            Some(_) => s("BY DEFAULT"),
                            None => null_text(),
                        },
                    ]);
                }
            }
            t.build()
        }
        "schemata" => {
            let mut t =
                TableBuilder::new(&[("catalog_name", T), ("schema_name", T), ("schema_owner", T)]);
            for sch in catalog.schemas.values() {
                t.row(vec![s("postgres"), s(&sch.name), s("postgres")]);
            }
            t.build()
        }
        "table_constraints" => {
            let mut t = TableBuilder::new(&[
                ("constraint_catalog", T),
                ("constraint_schema", T),
                ("constraint_name", T),
                ("table_schema", T),
                ("table_name", T),
                ("constraint_type", T),
            ]);
            for table in catalog.tables.values() {
                for c in &table.constraints {
                    let kind = match c.kind {
                        ConstraintKind::PrimaryKey { .. } => "PRIMARY KEY",
                        ConstraintKind::Unique { .. } => "UNIQUE",
                        ConstraintKind::Check { .. } => "CHECK",
                        ConstraintKind::ForeignKey { .. } => "FOREIGN KEY",
                    };
                    t.row(vec![
                        s("postgres"),
                        s(&table.schema),
                        s(&c.name),
                        s(&table.schema),
                        s(&table.name),
                        s(kind),
                    ]);
                }
            }
            t.build()
        }
        "views" => {
            let mut t = TableBuilder::new(&[
                ("table_catalog", T),
                ("table_schema", T),
                ("table_name", T),
                ("view_definition", T),
            ]);
            for v in catalog.views.values() {
                t.row(vec![
                    s("postgres"),
                    s(&v.schema),
                    s(&v.name),
                    s(&crate::dml::restore_locking_syntax(&v.query_sql)),
                ]);
            }
            t.build()
        }
        "sequences" => {
            let mut t = TableBuilder::new(&[
                ("sequence_catalog", T),
                ("sequence_schema", T),
                ("sequence_name", T),
                ("data_type", T),
            ]);
            for seq in catalog.sequences.values() {
                t.row(vec![
                    s("postgres"),
                    s(&seq.schema),
                    s(&seq.name),
                    s(&format_type(&seq.data_type)),
                ]);
            }
            t.build()
        }
        _ => return None,
    })
}
