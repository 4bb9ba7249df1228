//! Correlated scalar subqueries in a join's ON condition. PostgreSQL evaluates them like any
//! other expression of the condition; DataFusion accepts correlated scalar subqueries only in
//! a projection, a filter or an aggregate. GORM reads a column's comment with one:
//! `LEFT JOIN pg_description pd ON pd.objoid = (SELECT oid FROM pg_class WHERE relname =
//! c.table_name ...)`.
//!
//! A subquery whose outer columns all come from one side of the join is a value of that side's
//! rows: this analyzer rule computes it in a projection over that side, under a column name of
//! its own, compares with that column in the condition, and drops the column again above the
//! join. The subquery then sits in a projection, where DataFusion's decorrelation (or
//! `correlated.rs`, per row) runs it. A subquery reading both sides stays as it is and is
//! refused as before.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Column, DFSchema, Result as DfResult};
use datafusion::logical_expr::{Expr, Join, LogicalPlan, Projection};
use datafusion::optimizer::AnalyzerRule;

/// Name of the column a moved subquery's values get (numbered per join).
const MOVED_COLUMN: &str = "__shoal_join_subquery";

#[derive(Debug, Default)]
pub struct JoinSubqueries;

impl AnalyzerRule for JoinSubqueries {
    fn name(&self) -> &str {
        "shoal_join_subqueries"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| match node {
            LogicalPlan::Join(join) if join.filter.as_ref().is_some_and(has_scalar_subquery) => {
                move_subqueries(join)
            }
            other => Ok(Transformed::no(other)),
        })
        .data()
    }
}

fn has_scalar_subquery(e: &Expr) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::ScalarSubquery(_))))
        .unwrap_or(false)
}

/// Which side of the join a subquery's outer columns all come from.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Left,
    Right,
}

fn side_of(subquery: &Expr, left: &DFSchema, right: &DFSchema) -> Option<Side> {
    let Expr::ScalarSubquery(s) = subquery else {
        return None;
    };
    let columns: Vec<&Column> = s
        .outer_ref_columns
        .iter()
        .filter_map(|e| match e {
            Expr::OuterReferenceColumn(_, c) => Some(c),
            _ => None,
        })
        .collect();
    if columns.is_empty() || columns.len() != s.outer_ref_columns.len() {
        return None;
    }
    if columns.iter().all(|c| left.has_column(c)) {
        Some(Side::Left)
    } else if columns.iter().all(|c| right.has_column(c)) {
        Some(Side::Right)
    } else {
        None
    }
}

fn move_subqueries(join: Join) -> DfResult<Transformed<LogicalPlan>> {
    let original_schema = join.schema.clone();
    let filter = join.filter.clone().expect("checked by the caller");
    let (left_schema, right_schema) = (join.left.schema().clone(), join.right.schema().clone());
    let mut moved: Vec<(Side, Expr, String)> = Vec::new();
    let new_filter = filter
        .transform_down(|e| {
            let Some(side) = side_of(&e, &left_schema, &right_schema) else {
                return Ok(Transformed::no(e));
            };
            let name = format!("{MOVED_COLUMN}_{}", moved.len());
            moved.push((side, e, name.clone()));
            Ok(Transformed::yes(Expr::Column(Column::new_unqualified(
                name,
            ))))
        })?
        .data;
    if moved.is_empty() {
        return Ok(Transformed::no(LogicalPlan::Join(join)));
    }
    let with_moved = |input: Arc<LogicalPlan>, side: Side| -> DfResult<Arc<LogicalPlan>> {
        let extra: Vec<Expr> = moved
            .iter()
            .filter(|(s, _, _)| *s == side)
            .map(|(_, e, name)| e.clone().alias(name))
            .collect();
        if extra.is_empty() {
            return Ok(input);
        }
        let mut exprs: Vec<Expr> = input
            .schema()
            .columns()
            .into_iter()
            .map(Expr::Column)
            .collect();
        exprs.extend(extra);
        Ok(Arc::new(LogicalPlan::Projection(Projection::try_new(
            exprs, input,
        )?)))
    };
    let left = with_moved(join.left, Side::Left)?;
    let right = with_moved(join.right, Side::Right)?;
    let joined = LogicalPlan::Join(Join::try_new(
        left,
        right,
        join.on,
        Some(new_filter),
        join.join_type,
        join.join_constraint,
        join.null_equality,
        join.null_aware,
    )?);
    // The join's own columns, without the moved ones.
    let columns: Vec<Expr> = original_schema
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    Ok(Transformed::yes(LogicalPlan::Projection(
        Projection::try_new(columns, Arc::new(joined))?,
    )))
}
