//! `x IN (e1, e2, ...)` whose list reads the row becomes `x = e1 OR x = e2 ...` (and NOT IN
//! `x <> e1 AND ...`), which is how PostgreSQL defines it. DataFusion's physical IN list takes a
//! list for constant when it evaluates on an empty batch, and some expressions over columns do:
//! a CASE with several WHENs (what `COALESCE(a, a, 3)` simplifies to) gives its ELSE value for
//! no rows, so `5 IN (COALESCE(a, a, 3), 7)` compared every row with {3, 7}. Lists of constants
//! keep DataFusion's set lookup.

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::optimizer::analyzer::AnalyzerRule;

use crate::query::expr_pass::rewrite_expressions_up;

/// Runs after type coercion, so the list's elements already have x's type and the comparisons
/// need no new casts.
#[derive(Debug, Default)]
pub struct InListOverColumns;

impl AnalyzerRule for InListOverColumns {
    fn name(&self) -> &str {
        "pg_in_list_over_columns"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        rewrite_expressions_up(plan, |e, _| Ok(as_comparisons(e)))
    }
}

fn as_comparisons(e: Expr) -> Transformed<Expr> {
    let Expr::InList(InList {
        expr,
        list,
        negated,
    }) = e
    else {
        return Transformed::no(e);
    };
    if !list.iter().any(reads_row) {
        return Transformed::no(Expr::InList(InList::new(expr, list, negated)));
    }
    let comparisons = list.into_iter().map(|element| match negated {
        true => expr.as_ref().clone().not_eq(element),
        false => expr.as_ref().clone().eq(element),
    });
    let combined = comparisons
        .reduce(|all, c| if negated { all.and(c) } else { all.or(c) })
        .expect("a list that reads the row is not empty");
    Transformed::yes(combined)
}

fn reads_row(e: &Expr) -> bool {
    e.exists(|e| {
        Ok(matches!(
            e,
            Expr::Column(_) | Expr::OuterReferenceColumn(..) | Expr::ScalarSubquery(_)
        ))
    })
    .expect("visiting an expression cannot fail")
}
