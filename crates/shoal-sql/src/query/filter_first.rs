//! Filters run before the projection above them. DataFusion's projection pushdown swaps a
//! projection that narrows its input below the filter under it when the filter reads only
//! columns the projection passes on: `SELECT y, a / x FROM t WHERE y % 3 <> 0` then divides
//! for every row, and a row the WHERE clause drops can raise 22012 (PostgreSQL evaluates the
//! select list only for rows that pass). This rule, appended after DataFusion's, swaps them
//! back where the projection computes anything more than columns and the filter reads only
//! columns it passes on (the shape that swap leaves).

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::Result as DfResult;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::ExecutionPlan;

#[derive(Debug, Default)]
pub struct FilterFirst;

impl PhysicalOptimizerRule for FilterFirst {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(filter) = node.downcast_ref::<FilterExec>() else {
                return Ok(Transformed::no(node));
            };
            let Some(projection) = filter.input().downcast_ref::<ProjectionExec>() else {
                return Ok(Transformed::no(node));
            };
            let computes = projection
                .expr()
                .iter()
                .any(|p| p.expr.downcast_ref::<Column>().is_none());
            if filter.projection().is_some() || !computes {
                return Ok(Transformed::no(node));
            }
            // Only a filter over columns the projection passes on moves: a filter over a
            // computed column (`WHERE q > 1` over `a / x AS q`, or over random()) stays above.
            let exprs = projection.expr();
            let mut reads_computed = false;
            filter.predicate().apply(|e| {
                if let Some(c) = e.downcast_ref::<Column>() {
                    reads_computed |= exprs[c.index()].expr.downcast_ref::<Column>().is_none();
                }
                Ok(TreeNodeRecursion::Continue)
            })?;
            if reads_computed {
                return Ok(Transformed::no(node));
            }
            // The predicate reads the projection's outputs; below it, their inputs.
            let predicate = Arc::clone(filter.predicate()).transform_up(|e| {
                match e.downcast_ref::<Column>() {
                    Some(c) => Ok(Transformed::yes(Arc::clone(&exprs[c.index()].expr))),
                    None => Ok(Transformed::no(e)),
                }
            })?;
            let below: Arc<dyn ExecutionPlan> = Arc::new(FilterExec::try_new(
                predicate.data,
                Arc::clone(projection.input()),
            )?);
            let swapped = ProjectionExec::try_new(exprs.to_vec(), below)?;
            Ok(Transformed::yes(Arc::new(swapped) as Arc<dyn ExecutionPlan>))
        })
        .data()
    }

    fn name(&self) -> &str {
        "shoal_filter_first"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
