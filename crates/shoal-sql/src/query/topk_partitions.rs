//! `ORDER BY ... LIMIT` over partitions whose sort keys differ, such as the branches of a
//! UNION ALL that each select a different constant. DataFusion sorts each partition by the key
//! without the columns constant in that partition (`ORDER BY z, y` becomes a per-partition sort
//! by y under a merge by z, y), but the per-partition TopKs share one threshold: once one
//! branch's k-th row has y = 1, the other branch drops its row (z = 1, y = 1) as "not below
//! y = 1", though it comes first. Sorting every partition by the merge's whole key keeps the
//! shared threshold meaningful for all of them (a constant column costs a comparison).

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::Result as DfResult;
use datafusion::physical_expr::projection::update_expr;
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::execution_plan::replace_children_if_necessary;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::ExecutionPlan;

/// Appended after DataFusion's physical optimizer rules, which shorten the keys.
#[derive(Debug, Default)]
pub struct TopKWholeKey;

impl PhysicalOptimizerRule for TopKWholeKey {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(merge) = node.downcast_ref::<SortPreservingMergeExec>() else {
                return Ok(Transformed::no(node));
            };
            let Some(input) = with_whole_key(merge.input(), merge.expr().clone())? else {
                return Ok(Transformed::no(node));
            };
            let merge =
                SortPreservingMergeExec::new(merge.expr().clone(), input).with_fetch(merge.fetch());
            Ok(Transformed::yes(Arc::new(merge) as Arc<dyn ExecutionPlan>))
        })
        .data()
    }

    fn name(&self) -> &str {
        "shoal_topk_whole_key"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The merge's input with its partitioned TopK sorting by `key` (the merge's key, followed
/// down through the projections between them), or None if it already does or there is none.
fn with_whole_key(
    plan: &Arc<dyn ExecutionPlan>,
    key: LexOrdering,
) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(sort) = plan.downcast_ref::<SortExec>() {
        if sort.fetch().is_none() || !sort.preserve_partitioning() || sort.expr() == &key {
            return Ok(None);
        }
        let sort = SortExec::new(key, Arc::clone(sort.input()))
            .with_preserve_partitioning(true)
            .with_fetch(sort.fetch());
        return Ok(Some(Arc::new(sort)));
    }
    let Some(projection) = plan.downcast_ref::<ProjectionExec>() else {
        return Ok(None);
    };
    let mut below = Vec::new();
    for sort_expr in key.iter() {
        let Some(expr) = update_expr(&sort_expr.expr, projection.expr(), true)? else {
            return Ok(None);
        };
        below.push(PhysicalSortExpr::new(expr, sort_expr.options));
    }
    let Some(key) = LexOrdering::new(below) else {
        return Ok(None);
    };
    match with_whole_key(projection.input(), key)? {
        Some(input) => Ok(Some(replace_children_if_necessary(
            Arc::clone(plan),
            vec![input],
        )?)),
        None => Ok(None),
    }
}
