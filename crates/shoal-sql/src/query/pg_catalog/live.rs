//! Catalog views of server state that changes from one execution to the next (the backends
//! of pg_stat_activity, the memory of shoal_memory): their rows are made when the view is scanned, not when a statement
//! that reads it is planned, so a prepared statement sees the state as of each execution.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::Result as DfResult;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

/// Makes the view's rows, as a table of the view's schema, or fails the scan.
type Rows = Box<dyn Fn() -> DfResult<Arc<dyn TableProvider>> + Send + Sync>;

/// A view whose rows `rows` makes at each scan.
pub fn live_view(
    rows: impl Fn() -> Arc<dyn TableProvider> + Send + Sync + 'static,
) -> Arc<dyn TableProvider> {
    let schema = rows().schema();
    live_view_of(schema, rows)
}

/// `live_view` for rows that are costly to make: `schema` is given rather than taken from a
/// first making of them.
pub fn live_view_of(
    schema: SchemaRef,
    rows: impl Fn() -> Arc<dyn TableProvider> + Send + Sync + 'static,
) -> Arc<dyn TableProvider> {
    fallible_live_view_of(schema, move || Ok(rows()))
}

/// `live_view_of` for rows whose making may fail: the failure is the scan's error (a
/// function with an effect, such as pg_backup_stop, that runs when its rows are read).
pub fn fallible_live_view_of(
    schema: SchemaRef,
    rows: impl Fn() -> DfResult<Arc<dyn TableProvider>> + Send + Sync + 'static,
) -> Arc<dyn TableProvider> {
    Arc::new(LiveView {
        schema,
        rows: Box::new(rows),
    })
}

struct LiveView {
    schema: SchemaRef,
    rows: Rows,
}

impl std::fmt::Debug for LiveView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveView").finish_non_exhaustive()
    }
}

#[async_trait]
impl TableProvider for LiveView {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let rows = (self.rows)()?;
        debug_assert_eq!(rows.schema(), self.schema, "a live view keeps its columns");
        rows.scan(state, projection, filters, limit).await
    }
}
