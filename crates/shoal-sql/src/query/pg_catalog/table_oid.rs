//! The `tableoid` system column of the system catalogs: the OID of the catalog a row comes
//! from. pg_dump reads it from every catalog to name the class of each object it dumps (and
//! matches it with pg_description.classoid and pg_depend.classid). Shoal's catalogs are built
//! without it; `with_table_oid` adds it as a constant last column, to the catalogs of a
//! statement that names it (`names_tableoid`): as a system column it is not part of `*`.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::ExecutionPlan;

/// Whether `stmt` names a column `tableoid` anywhere.
pub fn names_tableoid(stmt: &datafusion::sql::sqlparser::ast::Statement) -> bool {
    use datafusion::sql::sqlparser::ast::{visit_expressions, Expr as SqlExpr};
    let is_tableoid =
        |i: &datafusion::sql::sqlparser::ast::Ident| i.value.eq_ignore_ascii_case("tableoid");
    visit_expressions(stmt, |e| match e {
        SqlExpr::Identifier(i) if is_tableoid(i) => std::ops::ControlFlow::Break(()),
        SqlExpr::CompoundIdentifier(parts) if parts.last().is_some_and(is_tableoid) => {
            std::ops::ControlFlow::Break(())
        }
        _ => std::ops::ControlFlow::Continue(()),
    })
    .is_break()
}

/// `catalog` with a `tableoid` column whose value is `table_oid` in every row.
pub(super) fn with_table_oid(
    catalog: Arc<dyn TableProvider>,
    table_oid: u32,
) -> Arc<dyn TableProvider> {
    let inner_schema = catalog.schema();
    let mut fields: Vec<Field> = inner_schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(
        Field::new("tableoid", ArrowType::UInt32, false).with_metadata(
            [(
                crate::types::PG_TYPE_METADATA_KEY.to_string(),
                crate::types::oid::OID.to_string(),
            )]
            .into(),
        ),
    );
    Arc::new(WithTableOid {
        schema: Arc::new(Schema::new_with_metadata(
            fields,
            inner_schema.metadata().clone(),
        )),
        catalog,
        table_oid,
    })
}

#[derive(Debug)]
struct WithTableOid {
    schema: SchemaRef,
    catalog: Arc<dyn TableProvider>,
    table_oid: u32,
}

#[async_trait]
impl TableProvider for WithTableOid {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        self.catalog.table_type()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let table_oid_at = self.schema.fields().len() - 1;
        let wanted: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let inner_projection: Vec<usize> = wanted
            .iter()
            .copied()
            .filter(|&i| i != table_oid_at)
            .collect();
        let input = self
            .catalog
            .scan(state, Some(&inner_projection), &[], limit)
            .await?;
        let mut next_inner = 0;
        let exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = wanted
            .iter()
            .map(|&i| {
                let name = self.schema.field(i).name().clone();
                if i == table_oid_at {
                    // With the column's metadata (its PostgreSQL type), so the scan's schema is
                    // the one the logical plan has.
                    let metadata = datafusion::common::metadata::FieldMetadata::from(
                        self.schema.field(i).metadata().clone(),
                    );
                    let oid: Arc<dyn PhysicalExpr> = Arc::new(Literal::new_with_metadata(
                        ScalarValue::UInt32(Some(self.table_oid)),
                        Some(metadata),
                    ));
                    (oid, name)
                } else {
                    let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new(&name, next_inner));
                    next_inner += 1;
                    (column, name)
                }
            })
            .collect();
        Ok(Arc::new(ProjectionExec::try_new(exprs, input)?))
    }
}
