//! A constant column on the NULL-extended side of an outer join is not constant in the join's
//! rows: it is NULL where the join found no match. DataFusion's physical planning still takes
//! it for constant and leaves it out of sorts (`ORDER BY k, s, s2` over
//! `... FULL JOIN (SELECT k, 'q' AS s2 ...)` sorted by k and s only, so NULL and 'q' came in
//! any order). The literals that such a side's projections select go through `maybe_null`
//! with a column of the projection's input beside them, which DataFusion does not see as a
//! constant.

use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{Expr, JoinType, LogicalPlan};

use crate::query::subquery_nullable::maybe_null_call;

/// Rewrites the nullable inputs of every outer join in `plan`.
pub fn unfold_nullable_constants(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| {
        let LogicalPlan::Join(mut join) = node else {
            return Ok(Transformed::no(node));
        };
        let (left, right) = match join.join_type {
            JoinType::Left => (false, true),
            JoinType::Right => (true, false),
            JoinType::Full => (true, true),
            _ => return Ok(Transformed::no(LogicalPlan::Join(join))),
        };
        let mut transformed = false;
        for (side, nullable) in [(&mut join.left, left), (&mut join.right, right)] {
            if nullable {
                let input = std::sync::Arc::unwrap_or_clone(side.clone());
                let rewritten = literals_unfolded(input)?;
                transformed |= rewritten.transformed;
                *side = std::sync::Arc::new(rewritten.data);
            }
        }
        Ok(Transformed::new_transformed(
            LogicalPlan::Join(join),
            transformed,
        ))
    })
    .data()
}

/// Down the chain of projections, aliases and filters at the top of a join input (where a
/// literal stays a constant of the input), the literal select-list items.
fn literals_unfolded(plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    match plan {
        LogicalPlan::Projection(_) | LogicalPlan::SubqueryAlias(_) | LogicalPlan::Filter(_) => {
            let is_projection = matches!(plan, LogicalPlan::Projection(_));
            let mut plan = plan.map_children(literals_unfolded)?;
            let any_column = plan.data.inputs()[0]
                .schema()
                .columns()
                .into_iter()
                .next()
                .map(Expr::Column);
            if let Some(column) = any_column.filter(|_| is_projection) {
                plan = plan.transform_data(|p| {
                    p.map_expressions(|e| match e {
                        Expr::Alias(mut alias) if matches!(*alias.expr, Expr::Literal(..)) => {
                            alias.expr =
                                Box::new(maybe_null_call(vec![*alias.expr, column.clone()]));
                            Ok(Transformed::yes(Expr::Alias(alias)))
                        }
                        other => Ok(Transformed::no(other)),
                    })
                })?;
            }
            // The fields of a rewritten projection, and of the nodes above it, become nullable.
            match plan.transformed {
                true => plan.map_data(|p| p.recompute_schema()),
                false => Ok(plan),
            }
        }
        other => Ok(Transformed::no(other)),
    }
}
