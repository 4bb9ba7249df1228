//! Intervals compare and sort by the span they stand for, as in PostgreSQL (interval_cmp):
//! a month counts 30 days and a day 24 hours, so `'30 days' = '1 month'` is true and
//! `'1 day' > '23 hours'`. Arrow compares MonthDayNano values field by field instead.
//!
//! The values keep their fields (`'1 month'` still prints as `1 mon`); only the comparisons
//! change. The analyzer rule here rewrites comparison operators between intervals, the keys of
//! ORDER BY, DISTINCT ON and windows (PARTITION BY, ORDER BY), and the groups of GROUP BY and
//! DISTINCT to use `pg_interval_span(x)` (the span in nanoseconds, a decimal): no storage or
//! Arrow type changes, and every other interval operation is untouched. A group shows its
//! first value, as PostgreSQL's hash aggregation does. Joins and min/max still treat intervals
//! field by field.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Decimal128Array, IntervalMonthDayNanoArray};
use datafusion::arrow::datatypes::IntervalMonthDayNano;
use datafusion::arrow::datatypes::{DataType as ArrowType, IntervalUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{plan_err, DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::{ScalarFunction, Sort as SortExpr, WindowFunction};
use datafusion::logical_expr::{
    AggregateUDF, BinaryExpr, ColumnarValue, Distinct, DistinctOn, Expr, ExprSchemable,
    LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
    WindowFunctionDefinition,
};
use datafusion::optimizer::analyzer::AnalyzerRule;

use crate::query::expr_pass::{replace_sort_keys, rewrite_expressions_up};
use crate::query::group_by_key::group_by_key;

const NANOS_PER_DAY: i128 = 86_400 * 1_000_000_000;
const DAYS_PER_MONTH: i128 = 30;
/// Precision of the span: months and days of i32 and nanoseconds of i64 sum to under 10^26.
const SPAN_PRECISION: u8 = 38;

fn is_interval(t: &ArrowType) -> bool {
    matches!(t, ArrowType::Interval(IntervalUnit::MonthDayNano))
}

static SPAN: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    Arc::new(ScalarUDF::new_from_impl(IntervalSpan {
        signature: Signature::exact(
            vec![ArrowType::Interval(IntervalUnit::MonthDayNano)],
            Volatility::Immutable,
        ),
    }))
});

/// `pg_interval_span(e)`.
fn span_of(e: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(SPAN.clone(), vec![e]))
}

/// Windows partitioned or ordered by intervals, and count(DISTINCT interval), use spans. Also
/// called before DataFusion's type coercion (from `query::arithmetic`), which refuses RANGE
/// frames over an interval ORDER BY.
pub fn keyed_expr(e: Expr, schema: &DFSchema) -> Transformed<Expr> {
    match e {
        Expr::WindowFunction(w) => window_keys(*w, schema),
        Expr::AggregateFunction(mut f)
            if f.params.distinct
                && f.func.name() == "count"
                && f.params.args.len() == 1
                && f.params.args[0]
                    .get_type(schema)
                    .is_ok_and(|t| is_interval(&t)) =>
        {
            let arg = f.params.args.remove(0);
            f.params.args.push(span_of(arg));
            Transformed::yes(Expr::AggregateFunction(f))
        }
        Expr::AggregateFunction(mut f) if interval_extreme(&f.func, &f.params.args, schema) => {
            f.func = super::aggregates::extreme(f.func.name()).expect("min or max");
            Transformed::yes(Expr::AggregateFunction(f))
        }
        other => Transformed::no(other),
    }
}

/// Whether `func(args)` is DataFusion's min or max over an interval.
fn interval_extreme(func: &Arc<AggregateUDF>, args: &[Expr], schema: &DFSchema) -> bool {
    let datafusions =
        super::aggregates::extreme(func.name()).is_some_and(|ours| !Arc::ptr_eq(&ours, func));
    datafusions && args.len() == 1 && args[0].get_type(schema).is_ok_and(|t| is_interval(&t))
}

/// A window partitioned or ordered by intervals partitions and orders by their spans; min and
/// max over intervals compare spans.
fn window_keys(mut w: WindowFunction, schema: &DFSchema) -> Transformed<Expr> {
    let mut changed = false;
    if let WindowFunctionDefinition::AggregateUDF(f) = &w.fun {
        if interval_extreme(f, &w.params.args, schema) {
            let ours = super::aggregates::extreme(f.name()).expect("min or max");
            w.fun = WindowFunctionDefinition::AggregateUDF(ours);
            changed = true;
        }
    }
    let partitions = w.params.partition_by.iter_mut();
    let orders = w.params.order_by.iter_mut().map(|sort| &mut sort.expr);
    for key in partitions.chain(orders) {
        if key.get_type(schema).is_ok_and(|t| is_interval(&t)) {
            *key = span_of(key.clone());
            changed = true;
        }
    }
    let e = Expr::WindowFunction(Box::new(w));
    if changed {
        Transformed::yes(e)
    } else {
        Transformed::no(e)
    }
}

/// The span of an interval in nanoseconds, a month counting 30 days and a day 24 hours.
pub fn span_nanos(v: IntervalMonthDayNano) -> i128 {
    (i128::from(v.months) * DAYS_PER_MONTH + i128::from(v.days)) * NANOS_PER_DAY
        + i128::from(v.nanoseconds)
}

#[derive(Debug, Default)]
pub struct IntervalOrder;

impl IntervalOrder {
    fn span_of(&self, e: Expr) -> Expr {
        span_of(e)
    }

    fn comparison(&self, e: Expr, schema: &DFSchema) -> Transformed<Expr> {
        let e = match keyed_expr(e, schema) {
            t if t.transformed => return t,
            t => t.data,
        };
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

    /// DISTINCT ON (intervals) keeps one row per span, in the order of the spans.
    fn distinct_on_keys(&self, on: DistinctOn) -> DfResult<Transformed<LogicalPlan>> {
        let schema = on.input.schema().clone();
        let is_interval_key = |e: &Expr| e.get_type(&schema).is_ok_and(|t| is_interval(&t));
        let keyed = on.on_expr.iter().any(is_interval_key)
            || on
                .sort_expr
                .iter()
                .flatten()
                .any(|s| is_interval_key(&s.expr));
        if !keyed {
            return Ok(Transformed::no(LogicalPlan::Distinct(Distinct::On(on))));
        }
        let span = |e: Expr| match is_interval_key(&e) {
            true => self.span_of(e),
            false => e,
        };
        let on_expr = on.on_expr.into_iter().map(span).collect();
        let sort_expr = on.sort_expr.map(|keys| {
            keys.into_iter()
                .map(|key| SortExpr {
                    expr: span(key.expr.clone()),
                    ..key
                })
                .collect()
        });
        // The output (the select list) is unchanged: the node keeps its schema, which
        // DistinctOn::try_new would derive anew, without the fields' metadata.
        let plan = DistinctOn {
            on_expr,
            sort_expr,
            ..on
        };
        Ok(Transformed::yes(LogicalPlan::Distinct(Distinct::On(plan))))
    }

    fn sort_keys(&self, plan: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
        let plan = match plan {
            LogicalPlan::Distinct(Distinct::On(on)) => return self.distinct_on_keys(on),
            LogicalPlan::Aggregate(_) | LogicalPlan::Distinct(_) => {
                let is_interval_expr =
                    |e: &Expr, schema: &DFSchema| e.get_type(schema).is_ok_and(|t| is_interval(&t));
                return group_by_key(
                    plan,
                    is_interval_expr,
                    |e| self.span_of(e),
                    "interval_group",
                );
            }
            other => other,
        };
        Ok(replace_sort_keys(plan, |key, schema| {
            key.get_type(schema)
                .is_ok_and(|t| is_interval(&t))
                .then(|| self.span_of(key.clone()))
        }))
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
        let out: Decimal128Array = intervals.iter().map(|v| v.map(span_nanos)).collect();
        let out: datafusion::arrow::array::ArrayRef =
            Arc::new(out.with_precision_and_scale(SPAN_PRECISION, 0)?);
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}
