//! INTERSECT ALL and EXCEPT ALL with PostgreSQL's multiset meaning: a row that appears m times
//! on the left and n times on the right appears min(m, n) times in INTERSECT ALL and
//! max(m - n, 0) times in EXCEPT ALL. DataFusion plans both as a plain semi or anti join, which
//! keeps all m copies (or drops all of them). Numbering the copies of each distinct row on both
//! sides (row_number() partitioned by every column) and joining on the number too makes the
//! k-th copy on the left meet the k-th copy on the right, which gives exactly those counts.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, NullEquality, Result as DfResult};
use datafusion::functions_window::expr_fn::row_number;
use datafusion::logical_expr::{
    Expr, ExprFunctionExt, Join, JoinType, LogicalPlan, LogicalPlanBuilder,
};

const LEFT_COPY_COLUMN: &str = "__shoal_left_copy";
const RIGHT_COPY_COLUMN: &str = "__shoal_right_copy";

/// Rewrites every INTERSECT ALL / EXCEPT ALL join in `plan`.
pub fn count_copies(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Join(join) if is_all_set_operation(&join) => {
            Ok(Transformed::yes(number_copies(join)?))
        }
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
}

/// The join DataFusion builds for `INTERSECT ALL` / `EXCEPT ALL`: semi or anti, on every
/// column, NULLs equal, no filter. (The distinct forms put a Distinct on the left; joins the
/// user writes never compare NULLs as equal at this stage.)
fn is_all_set_operation(join: &Join) -> bool {
    matches!(join.join_type, JoinType::LeftSemi | JoinType::LeftAnti)
        && join.null_equality == NullEquality::NullEqualsNull
        && join.filter.is_none()
        && !join.null_aware
        && !matches!(join.left.as_ref(), LogicalPlan::Distinct(_))
        && join.on.len() == join.left.schema().fields().len()
}

fn number_copies(join: Join) -> DfResult<LogicalPlan> {
    let output: Vec<Expr> = join
        .left
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    let mut left_keys = Vec::with_capacity(join.on.len() + 1);
    let mut right_keys = Vec::with_capacity(join.on.len() + 1);
    for (l, r) in &join.on {
        let (Expr::Column(l), Expr::Column(r)) = (l, r) else {
            return Ok(LogicalPlan::Join(join));
        };
        left_keys.push(l.clone());
        right_keys.push(r.clone());
    }
    left_keys.push(Column::from_name(LEFT_COPY_COLUMN));
    right_keys.push(Column::from_name(RIGHT_COPY_COLUMN));
    let left = numbered(join.left, LEFT_COPY_COLUMN)?;
    let right = numbered(join.right, RIGHT_COPY_COLUMN)?;
    LogicalPlanBuilder::from(left)
        .join_detailed(
            right,
            join.join_type,
            (left_keys, right_keys),
            None,
            NullEquality::NullEqualsNull,
        )?
        .project(output)?
        .build()
}

/// `plan` with a column `name` numbering the copies of each distinct row from 1.
fn numbered(plan: Arc<LogicalPlan>, name: &str) -> DfResult<LogicalPlan> {
    let columns: Vec<Expr> = plan
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    let copy = row_number().partition_by(columns).build()?.alias(name);
    LogicalPlanBuilder::from(Arc::unwrap_or_clone(plan))
        .window(vec![copy])?
        .build()
}
