//! The walk shared by Shoal's expression-rewriting analyzer rules (PostgreSQL arithmetic,
//! char(n) arguments, the session's wall clock): every expression of every plan node, subqueries
//! included, rewritten bottom-up against the schema of the node's inputs, keeping the names the
//! expressions had so column names in results do not change.

use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{DFSchema, Result as DfResult};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{Expr, LogicalPlan};

/// Applies `rewrite` to every sub-expression of `plan`, bottom-up.
pub fn rewrite_expressions_up(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> DfResult<Transformed<Expr>>,
) -> DfResult<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| rewrite_node(node, &rewrite))
        .data()
}

/// `rewrite` applied bottom-up to each expression of `node`, against the schema of its inputs,
/// the expressions keeping their names.
fn rewrite_node(
    node: LogicalPlan,
    rewrite: &impl Fn(Expr, &DFSchema) -> DfResult<Transformed<Expr>>,
) -> DfResult<Transformed<LogicalPlan>> {
    let schema = merge_schema(&node.inputs());
    let names = NamePreserver::new(&node);
    node.map_expressions(|e| {
        let saved = names.save(&e);
        e.transform_up(|sub| rewrite(sub, &schema))
            .map(|t| t.update_data(|e| saved.restore(e)))
    })
}

/// As `rewrite_expressions_up`, over `plan`'s own nodes only: `rewrite` decides what to do with
/// the subqueries it meets (their outer references are scoped by the node that holds them).
/// A node whose expressions changed gets its schema again.
pub fn rewrite_own_expressions_up(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> DfResult<Transformed<Expr>>,
) -> DfResult<LogicalPlan> {
    plan.transform_up(|node| {
        let node = rewrite_node(node, &rewrite)?;
        if node.transformed {
            node.map_data(|n| n.recompute_schema())
        } else {
            Ok(node)
        }
    })
    .data()
}
