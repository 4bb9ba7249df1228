//! PostgreSQL gives a quoted literal the type `unknown` until its context decides: in
//! `SELECT 1 UNION SELECT '2'` the column is an integer, and `SELECT 3.4 UNION SELECT 'foo'`
//! fails (22P02) reading 'foo' as a number. DataFusion types the literal as text and then
//! makes the whole column text, which answers with the wrong type (or accepts 'foo'). This
//! analyzer rule runs before DataFusion's type coercion and casts a set operation's bare string
//! literals to the type its other branches give the column.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{cast, Expr, LogicalPlan, Projection, Union};
use datafusion::optimizer::AnalyzerRule;

#[derive(Debug, Default)]
pub struct UnknownLiterals;

impl AnalyzerRule for UnknownLiterals {
    fn name(&self) -> &str {
        "shoal_unknown_literals"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| match node {
            LogicalPlan::Union(union) => resolve_union(union),
            other => Ok(Transformed::no(other)),
        })
        .data()
    }
}

/// Whether `e` (under its alias) is a string literal as written, the `unknown` of PostgreSQL.
fn is_unknown_literal(e: &Expr) -> bool {
    match e {
        Expr::Alias(alias) => is_unknown_literal(&alias.expr),
        Expr::Literal(ScalarValue::Utf8(Some(_)), _) => true,
        _ => false,
    }
}

/// The expressions of a branch that is a projection (the SELECT list of one side).
fn projection_exprs(plan: &LogicalPlan) -> Option<&[Expr]> {
    match plan {
        LogicalPlan::Projection(p) => Some(&p.expr),
        _ => None,
    }
}

fn resolve_union(union: Union) -> DfResult<Transformed<LogicalPlan>> {
    let columns = union.schema.fields().len();
    let mut inputs: Vec<LogicalPlan> = union.inputs.iter().map(|i| (**i).clone()).collect();
    let mut changed = false;
    for column in 0..columns {
        let unknown: Vec<bool> = inputs
            .iter()
            .map(|i| projection_exprs(i).is_some_and(|e| is_unknown_literal(&e[column])))
            .collect();
        // The type of the first branch whose column is not a bare literal decides.
        let Some(decided) = inputs
            .iter()
            .zip(&unknown)
            .find(|(_, unknown)| !**unknown)
            .map(|(i, _)| i.schema().field(column).data_type().clone())
        else {
            continue;
        };
        if decided.is_null() || matches!(decided, datafusion::arrow::datatypes::DataType::Utf8) {
            continue;
        }
        for (input, _) in inputs.iter_mut().zip(&unknown).filter(|(_, u)| **u) {
            let LogicalPlan::Projection(projection) = input else {
                continue;
            };
            let mut exprs = projection.expr.clone();
            let (name, literal) = match &exprs[column] {
                Expr::Alias(alias) => (Some(alias.name.clone()), (*alias.expr).clone()),
                other => (None, other.clone()),
            };
            let name = name.unwrap_or_else(|| exprs[column].schema_name().to_string());
            exprs[column] = cast(literal, decided.clone()).alias(name);
            *input = LogicalPlan::Projection(Projection::try_new(exprs, projection.input.clone())?);
            changed = true;
        }
    }
    if !changed {
        return Ok(Transformed::no(LogicalPlan::Union(union)));
    }
    let inputs = inputs.into_iter().map(Arc::new).collect();
    Ok(Transformed::yes(LogicalPlan::Union(
        Union::try_new_with_loose_types(inputs)?,
    )))
}
