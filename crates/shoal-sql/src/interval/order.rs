//! Intervals compare and sort by the span they stand for, as in PostgreSQL (interval_cmp):
//! a month counts 30 days and a day 24 hours, so `'30 days' = '1 month'` is true and
//! `'1 day' > '23 hours'`. Arrow compares MonthDayNano values field by field instead.
//!
//! The values keep their fields (`'1 month'` still prints as `1 mon`); only the comparisons
//! change. The analyzer rule here rewrites comparison operators between intervals, and the
//! keys of ORDER BY, to compare `pg_interval_span(x)` (the span in nanoseconds, a numeric), the
//! least invasive place: no storage or Arrow type changes, and every other interval operation
//! is untouched. GROUP BY, DISTINCT, joins and min/max still treat intervals field by field
//! (`'30 days'` and `'1 month'` form two groups); see the slt file for what is covered.

use std::sync::Arc;

use datafusion::arrow::array::{Decimal128Array, IntervalMonthDayNanoArray};
use datafusion::arrow::datatypes::{DataType as ArrowType, IntervalUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{plan_err, DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::{ScalarFunction, Sort as SortExpr};
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Sort, Volatility,
};
use datafusion::optimizer::analyzer::AnalyzerRule;

use crate::query::expr_pass::rewrite_expressions_up;

const NANOS_PER_DAY: i128 = 86_400 * 1_000_000_000;
const DAYS_PER_MONTH: i128 = 30;
/// Precision of the span: months and days of i32 and nanoseconds of i64 sum to under 10^26.
const SPAN_PRECISION: u8 = 38;

fn is_interval(t: &ArrowType) -> bool {
    matches!(t, ArrowType::Interval(IntervalUnit::MonthDayNano))
}

#[derive(Debug)]
pub struct IntervalOrder {
    span: Arc<ScalarUDF>,
}

impl Default for IntervalOrder {
    fn default() -> Self {
        IntervalOrder {
            span: Arc::new(ScalarUDF::new_from_impl(IntervalSpan {
                signature: Signature::exact(
                    vec![ArrowType::Interval(IntervalUnit::MonthDayNano)],
                    Volatility::Immutable,
                ),
            })),
        }
    }
}

impl IntervalOrder {
    fn span_of(&self, e: Expr) -> Expr {
        Expr::ScalarFunction(ScalarFunction::new_udf(self.span.clone(), vec![e]))
    }

    fn comparison(&self, e: Expr, schema: &DFSchema) -> Transformed<Expr> {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &e else {
            return Transformed::no(e);
        };
        let compares = matches!(
            op,
            Operator::Eq
                | Operator::NotEq
                | Operator::Lt
                | Operator::LtEq
                | Operator::Gt
                | Operator::GtEq
                | Operator::IsDistinctFrom
                | Operator::IsNotDistinctFrom
        );
        let both_intervals = [left, right]
            .iter()
            .all(|side| side.get_type(schema).is_ok_and(|t| is_interval(&t)));
        if !compares || !both_intervals {
            return Transformed::no(e);
        }
        Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
            Box::new(self.span_of((**left).clone())),
            *op,
            Box::new(self.span_of((**right).clone())),
        )))
    }

    fn sort_keys(&self, plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
        let LogicalPlan::Sort(sort) = plan else {
            return Ok(Transformed::no(plan));
        };
        let schema = sort.input.schema().clone();
        let mut changed = false;
        let expr = sort
            .expr
            .into_iter()
            .map(|key| {
                if !key.expr.get_type(&schema).is_ok_and(|t| is_interval(&t)) {
                    return key;
                }
                changed = true;
                SortExpr {
                    expr: self.span_of(key.expr),
                    ..key
                }
            })
            .collect();
        let plan = LogicalPlan::Sort(Sort {
            expr,
            input: sort.input,
            fetch: sort.fetch,
        });
        Ok(if changed {
            Transformed::yes(plan)
        } else {
            Transformed::no(plan)
        })
    }
}

impl AnalyzerRule for IntervalOrder {
    fn name(&self) -> &str {
        "pg_interval_order"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let plan = rewrite_expressions_up(plan, |e, schema| Ok(self.comparison(e, schema)))?;
        Ok(plan
            .transform_up_with_subqueries(|node| self.sort_keys(node))?
            .data)
    }
}

/// `pg_interval_span(interval)`: the span in nanoseconds with 30-day months and 24-hour days.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalSpan {
    signature: Signature,
}

impl ScalarUDFImpl for IntervalSpan {
    fn name(&self) -> &str {
        "pg_interval_span"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Decimal128(SPAN_PRECISION, 0))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let input = args.args[0].to_array(args.number_rows.max(1))?;
        let Some(intervals) = input.as_any().downcast_ref::<IntervalMonthDayNanoArray>() else {
            return plan_err!("pg_interval_span takes an interval");
        };
        let out: Decimal128Array = intervals
            .iter()
            .map(|v| {
                v.map(|v| {
                    (i128::from(v.months) * DAYS_PER_MONTH + i128::from(v.days)) * NANOS_PER_DAY
                        + i128::from(v.nanoseconds)
                })
            })
            .collect();
        let out: datafusion::arrow::array::ArrayRef =
            Arc::new(out.with_precision_and_scale(SPAN_PRECISION, 0)?);
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}
