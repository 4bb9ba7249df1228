//! PostgreSQL gives a quoted literal the type `unknown` until its context decides: in
//! `SELECT 1 UNION SELECT '2'` the column is an integer, and `SELECT 3.4 UNION SELECT 'foo'`
//! fails (22P02) reading 'foo' as a number. DataFusion types the literal as text and then
//! makes the whole column text, which answers with the wrong type (or accepts 'foo'). This
//! analyzer rule runs before DataFusion's type coercion and casts a set operation's bare string
//! literals to the type its other branches give the column. It also reads a string literal
//! compared with a boolean (`flag = 't'`, `flag IN ('yes', 'no')`, as drivers' simple protocol
//! writes parameters, or `CASE flag WHEN 't' THEN ...`) as a boolean, with PostgreSQL's input
//! rules; DataFusion finds no common type for the two and fails. And a quoted argument of COALESCE, GREATEST, LEAST and NULLIF
//! is a date or time when another argument is one (`COALESCE(a_timestamptz, '1970-01-01Z')`),
//! where DataFusion finds no common type either: the statement's rewrite wraps such an argument
//! in `shoal_sibling_typed(literal, sibling)`, which plans with the sibling's type, and this
//! rule casts the literal to it (or unwraps it) before anything runs.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{
    cast, lit, BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, Projection,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Union, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::query::expr_pass::rewrite_expressions_up;

#[derive(Debug, Default)]
pub struct UnknownLiterals;

/// The function that stands for a quoted argument typed by its sibling until this rule runs.
pub const SIBLING_TYPED: &str = "shoal_sibling_typed";

/// `shoal_sibling_typed(literal, sibling)`: of the sibling's type, for planning only; this rule
/// replaces every call before execution.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SiblingTyped {
    signature: Signature,
}

impl SiblingTyped {
    pub fn udf() -> ScalarUDF {
        ScalarUDF::new_from_impl(SiblingTyped {
            signature: Signature::any(2, Volatility::Immutable),
        })
    }
}

impl ScalarUDFImpl for SiblingTyped {
    fn name(&self) -> &str {
        SIBLING_TYPED
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(args[1].clone())
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Err(datafusion::error::DataFusionError::Internal(format!(
            "{SIBLING_TYPED} runs only until the analyzer replaces it"
        )))
    }
}

impl AnalyzerRule for UnknownLiterals {
    fn name(&self) -> &str {
        "shoal_unknown_literals"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let plan = plan
            .transform_up_with_subqueries(|node| match node {
                LogicalPlan::Union(union) => resolve_union(union),
                other => Ok(Transformed::no(other)),
            })
            .data()?;
        rewrite_expressions_up(plan, boolean_literals)
    }
}

/// A string literal as written, the `unknown` of PostgreSQL, with its text.
fn unknown_text(e: &Expr) -> Option<&str> {
    match e {
        Expr::Literal(ScalarValue::Utf8(Some(s)), _) => Some(s),
        _ => None,
    }
}

fn is_boolean(e: &Expr, schema: &DFSchema) -> bool {
    matches!(e.get_type(schema), Ok(ArrowType::Boolean))
}

/// The string literal read as a boolean (`'t'`, `'yes'`, `'1'`...), or its 22P02.
fn boolean_literal(text: &str) -> DfResult<Expr> {
    let value = crate::pgtext::parse_bool(text).map_err(crate::query::functions::sql_error)?;
    Ok(lit(value))
}

fn boolean_literals(e: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(
                op,
                Operator::Eq
                    | Operator::NotEq
                    | Operator::Lt
                    | Operator::LtEq
                    | Operator::Gt
                    | Operator::GtEq
                    | Operator::IsDistinctFrom
                    | Operator::IsNotDistinctFrom
            ) =>
        {
            let (left, right) = match (unknown_text(&left), unknown_text(&right)) {
                (Some(text), None) if is_boolean(&right, schema) => {
                    (Box::new(boolean_literal(text)?), right)
                }
                (None, Some(text)) if is_boolean(&left, schema) => {
                    (left, Box::new(boolean_literal(text)?))
                }
                _ => {
                    return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
                        left,
                        op,
                        right,
                    })))
                }
            };
            Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                left,
                op,
                right,
            })))
        }
        // `flag AND 'true'`: a quoted operand of AND and OR is a boolean.
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::And | Operator::Or)
                && (unknown_text(&left).is_some() || unknown_text(&right).is_some()) =>
        {
            let as_boolean = |e: Box<Expr>| match unknown_text(&e) {
                Some(text) => boolean_literal(text).map(Box::new),
                None => Ok(e),
            };
            Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                left: as_boolean(left)?,
                op,
                right: as_boolean(right)?,
            })))
        }
        Expr::InList(in_list)
            if is_boolean(&in_list.expr, schema)
                && in_list.list.iter().any(|item| unknown_text(item).is_some()) =>
        {
            let list = in_list
                .list
                .into_iter()
                .map(|item| match unknown_text(&item) {
                    Some(text) => boolean_literal(text),
                    None => Ok(item),
                })
                .collect::<DfResult<Vec<_>>>()?;
            Ok(Transformed::yes(Expr::InList(InList { list, ..in_list })))
        }
        // `CASE pg_is_in_recovery() WHEN 't' THEN ...`: the quoted values a boolean is
        // compared with are booleans.
        Expr::Case(mut case)
            if case.expr.as_deref().is_some_and(|e| is_boolean(e, schema))
                && case
                    .when_then_expr
                    .iter()
                    .any(|(w, _)| unknown_text(w).is_some()) =>
        {
            for (when, _) in case.when_then_expr.iter_mut() {
                if let Some(text) = unknown_text(when) {
                    *when = Box::new(boolean_literal(text)?);
                }
            }
            Ok(Transformed::yes(Expr::Case(case)))
        }
        // A quoted argument of COALESCE, GREATEST, LEAST or NULLIF, which the statement's
        // rewrite wrapped (`crate::query::rewrite`): a date or time when its sibling is one.
        Expr::ScalarFunction(mut call) if call.func.name() == SIBLING_TYPED => {
            let sibling = call.args.pop().expect("two arguments");
            let literal = call.args.pop().expect("two arguments");
            Ok(Transformed::yes(match sibling.get_type(schema)? {
                t @ (ArrowType::Timestamp(..)
                | ArrowType::Date32
                | ArrowType::Time64(_)
                | ArrowType::Interval(_)) => cast(literal, t),
                _ => literal,
            }))
        }
        other => Ok(Transformed::no(other)),
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
