//! `x [NOT] IN (subquery)` with PostgreSQL's three-valued answer: true when a row equals x,
//! else NULL when a comparison was NULL (x is NULL and the subquery has rows, or a row is NULL),
//! else false. DataFusion gets this right only where NULL and false mean the same: it plans an IN
//! at the top of a WHERE as a semi join, one inside a larger condition as a mark join whose mark
//! is never NULL (right under AND and OR, wrong under NOT or IS NULL), a top-level NOT IN as a
//! null-aware anti join (which it can only build for an uncorrelated subquery compared with a
//! column) and refuses one in a select list. Everywhere else the IN is rewritten as
//! `CASE WHEN EXISTS (rows = x) THEN true WHEN x IS NULL AND EXISTS (rows) THEN NULL WHEN
//! EXISTS (rows IS NULL) THEN NULL ELSE false END`, EXISTS that DataFusion plans as mark joins in a filter and as counts
//! elsewhere (see `scalar_subquery`).

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Column, DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::{Exists, InSubquery};
use datafusion::logical_expr::utils::{conjunction, split_conjunction_owned};
use datafusion::logical_expr::{
    lit, when, BinaryExpr, Expr, LogicalPlan, LogicalPlanBuilder, Operator, Subquery,
};

use crate::error::{code, SqlError};
use crate::query::functions::sql_error;

/// Rewrites every IN (subquery) of `plan` whose NULL answer DataFusion would lose.
pub fn three_valued_in_subqueries(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| {
        if !node.expressions().iter().any(has_in_subquery) {
            return Ok(Transformed::no(node));
        }
        let inputs = node.inputs();
        let [input] = inputs.as_slice() else {
            // A join condition: DataFusion refuses a subquery there, so nothing can go wrong.
            return Ok(Transformed::no(node));
        };
        let input = Arc::clone(input.schema());
        match node {
            LogicalPlan::Filter(mut filter) => {
                let predicate = filter_predicate(filter.predicate, &input)?;
                filter.predicate = predicate.data;
                Ok(Transformed::new_transformed(
                    LogicalPlan::Filter(filter),
                    predicate.transformed,
                ))
            }
            other => other.map_expressions(|e| every_in_subquery(e, &input)),
        }
    })
    .data()
}

fn has_in_subquery(e: &Expr) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::InSubquery(_))))
        .expect("visiting an expression cannot fail")
}

/// A filter keeps a row only when its condition is true, so an IN reached from the top through
/// AND and OR alone can be false where it is NULL; a NOT IN can at the top of the conjunction
/// when DataFusion's anti join is null-aware.
fn filter_predicate(predicate: Expr, input: &DFSchema) -> DfResult<Transformed<Expr>> {
    let mut transformed = false;
    let mut conjuncts = Vec::new();
    for conjunct in split_conjunction_owned(predicate) {
        let kept = match &conjunct {
            Expr::InSubquery(in_sq) if in_sq.negated => anti_join_is_null_aware(in_sq),
            Expr::Not(inner) => {
                matches!(inner.as_ref(), Expr::InSubquery(in_sq) if !in_sq.negated && anti_join_is_null_aware(in_sq))
            }
            _ => false,
        };
        let conjunct = if kept {
            Transformed::no(conjunct)
        } else {
            under_and_or(conjunct, input)?
        };
        transformed |= conjunct.transformed;
        conjuncts.push(conjunct.data);
    }
    let predicate = conjunction(conjuncts).expect("a filter has a condition");
    Ok(Transformed::new_transformed(predicate, transformed))
}

/// DataFusion builds the null-aware anti join from an equality between x and the subquery's
/// column; that needs x to read the outer row and the subquery not to (with a correlation it
/// has two join keys and fails, "null_aware anti join only supports single column join key"),
/// and with a constant x it builds a nested loop join that is not null-aware.
fn anti_join_is_null_aware(in_sq: &InSubquery) -> bool {
    let reads_own_columns = in_sq
        .expr
        .exists(|e| Ok(matches!(e, Expr::Column(_))))
        .expect("visiting an expression cannot fail");
    reads_own_columns && in_sq.subquery.outer_ref_columns.is_empty()
}

fn under_and_or(e: Expr, input: &DFSchema) -> DfResult<Transformed<Expr>> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::And | Operator::Or) =>
        {
            let left = under_and_or(*left, input)?;
            let right = under_and_or(*right, input)?;
            let transformed = left.transformed || right.transformed;
            let e = Expr::BinaryExpr(BinaryExpr::new(
                Box::new(left.data),
                op,
                Box::new(right.data),
            ));
            Ok(Transformed::new_transformed(e, transformed))
        }
        Expr::InSubquery(in_sq) if !in_sq.negated => Ok(Transformed::no(Expr::InSubquery(in_sq))),
        other => every_in_subquery(other, input),
    }
}

fn every_in_subquery(e: Expr, input: &DFSchema) -> DfResult<Transformed<Expr>> {
    e.transform_up(|e| match e {
        Expr::InSubquery(in_sq) => Ok(Transformed::yes(three_valued(in_sq, input)?)),
        other => Ok(Transformed::no(other)),
    })
}

/// The NULL answer is asked of two uncorrelated EXISTS (the set has rows; it has a NULL), as
/// DataFusion decorrelates a count only over an equality with the outer row.
fn three_valued(in_sq: InSubquery, input: &DFSchema) -> DfResult<Expr> {
    let InSubquery {
        expr,
        subquery,
        negated,
    } = in_sq;
    let x = *expr;
    let outer_x = as_outer_reference(x.clone(), input)?;
    let rows = Arc::unwrap_or_clone(subquery.subquery);
    let (qualifier, field) = rows.schema().qualified_field(0);
    let element = Expr::Column(Column::new(qualifier.cloned(), field.name()));
    let spans = &subquery.spans;
    let equal = exists_where(rows.clone(), Some(element.clone().eq(outer_x)), spans)?;
    let any_row = exists_where(rows.clone(), None, spans)?;
    let null_row = exists_where(rows, Some(element.is_null()), spans)?;
    let unknown = lit(ScalarValue::Boolean(None));
    let value = when(equal, lit(true))
        .when(x.is_null().and(any_row), unknown.clone())
        .when(null_row, unknown)
        .otherwise(lit(false))?;
    Ok(if negated { !value } else { value })
}

fn exists_where(
    rows: LogicalPlan,
    condition: Option<Expr>,
    spans: &datafusion::common::Spans,
) -> DfResult<Expr> {
    let plan = match condition {
        Some(condition) => LogicalPlanBuilder::from(rows).filter(condition)?.build()?,
        None => rows,
    };
    Ok(Expr::Exists(Exists::new(
        Subquery {
            outer_ref_columns: plan.all_out_ref_exprs(),
            subquery: Arc::new(plan),
            spans: spans.clone(),
        },
        false,
    )))
}

/// x moves into the subqueries, where its columns are the outer row's. DataFusion decorrelates
/// one level only, so an x that already reads a query further out, or holds a subquery, is
/// refused.
fn as_outer_reference(x: Expr, input: &DFSchema) -> DfResult<Expr> {
    x.transform_up(|e| match e {
        Expr::Column(c) => {
            let (_, field) = input.qualified_field_from_column(&c)?;
            let field = Arc::clone(field);
            Ok(Transformed::yes(Expr::OuterReferenceColumn(field, c)))
        }
        Expr::OuterReferenceColumn(..)
        | Expr::ScalarSubquery(_)
        | Expr::Exists(_)
        | Expr::InSubquery(_) => Err(sql_error(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            "IN (subquery) whose left operand reads an outer query or holds a subquery is not supported where its result can be NULL",
        ))),
        other => Ok(Transformed::no(other)),
    })
    .data()
}
