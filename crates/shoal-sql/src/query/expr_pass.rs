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

/// A Sort node with each ORDER BY key that `key` gives a replacement for sorted by that
/// replacement instead (the key of a type whose values do not sort as their Arrow type does);
/// any other node as it is.
pub fn replace_sort_keys(
    plan: LogicalPlan,
    key: impl Fn(&Expr, &DFSchema) -> Option<Expr>,
) -> Transformed<LogicalPlan> {
    let LogicalPlan::Sort(sort) = plan else {
        return Transformed::no(plan);
    };
    let schema = sort.input.schema().clone();
    let mut changed = false;
    let expr = sort
        .expr
        .into_iter()
        .map(|sort_expr| match key(&sort_expr.expr, &schema) {
            Some(replacement) => {
                changed = true;
                datafusion::logical_expr::SortExpr {
                    expr: replacement,
                    ..sort_expr
                }
            }
            None => sort_expr,
        })
        .collect();
    let plan = LogicalPlan::Sort(datafusion::logical_expr::Sort {
        expr,
        input: sort.input,
        fetch: sort.fetch,
    });
    match changed {
        true => Transformed::yes(plan),
        false => Transformed::no(plan),
    }
}
