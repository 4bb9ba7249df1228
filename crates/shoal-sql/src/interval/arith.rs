//! Interval arithmetic where PostgreSQL and DataFusion differ. The planner's operator hook
//! (`query::typecheck::OperatorTypeCheck`) calls `plan_operator` for every binary operator.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, Float64Array, IntervalMonthDayNanoArray};
use datafusion::arrow::datatypes::{
    DataType as ArrowType, IntervalMonthDayNano, IntervalUnit, TimeUnit, TimestampMicrosecondType,
};
use datafusion::common::{DFSchema, Result as DfResult};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;

use crate::error::{code, SqlError};
use crate::query::functions::sql_error;

const MICROS_PER_DAY: i64 = 86_400_000_000;
const NANOS_PER_MICRO: i64 = 1_000;

/// Plans `timestamp - timestamp` as `pg_timestamp_mi`, `date - date` as an integer,
/// `interval * number`,
/// `number * interval` and `interval / number` as `pg_interval_mul(interval, factor)`, and
/// makes `date ± interval` a timestamp; every other operation is left to DataFusion.
pub fn plan_operator(
    expr: RawBinaryExpr,
    schema: &DFSchema,
) -> DfResult<PlannerResult<RawBinaryExpr>> {
    if let Some(difference) = timestamp_difference(&expr, schema) {
        return Ok(PlannerResult::Planned(difference));
    }
    // date - date is an integer number of days, where DataFusion's is a bigint.
    let is_date = |e: &Expr| matches!(e.get_type(schema), Ok(ArrowType::Date32));
    if expr.op == BinaryOperator::Minus && is_date(&expr.left) && is_date(&expr.right) {
        let days = Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(
            Box::new(expr.left),
            datafusion::logical_expr::Operator::Minus,
            Box::new(expr.right),
        ));
        return Ok(PlannerResult::Planned(cast(days, ArrowType::Int32)));
    }
    let is_interval = |e: &Expr| matches!(e.get_type(schema), Ok(ArrowType::Interval(_)));
    let is_number = |e: &Expr| e.get_type(schema).is_ok_and(|t| t.is_numeric());
    let is_date = |e: &Expr| matches!(e.get_type(schema), Ok(ArrowType::Date32));
    // date ± interval is a timestamp in PostgreSQL (the date at midnight, moved).
    let date_shift = matches!(expr.op, BinaryOperator::Plus | BinaryOperator::Minus)
        && is_date(&expr.left)
        && is_interval(&expr.right);
    if date_shift
        || expr.op == BinaryOperator::Plus && is_interval(&expr.left) && is_date(&expr.right)
    {
        let timestamp = ArrowType::Timestamp(TimeUnit::Microsecond, None);
        let mut expr = expr;
        if date_shift {
            expr.left = cast(expr.left, timestamp);
        } else {
            expr.right = cast(expr.right, timestamp);
        }
        return Ok(PlannerResult::Original(expr));
    }
    let (interval, factor) = match expr.op {
        BinaryOperator::Multiply if is_interval(&expr.left) && is_number(&expr.right) => (
            expr.left.clone(),
            cast(expr.right.clone(), ArrowType::Float64),
        ),
        BinaryOperator::Multiply if is_number(&expr.left) && is_interval(&expr.right) => (
            expr.right.clone(),
            cast(expr.left.clone(), ArrowType::Float64),
        ),
        BinaryOperator::Divide if is_interval(&expr.left) && is_number(&expr.right) => {
            let divisor = cast(expr.right.clone(), ArrowType::Float64);
            let reciprocal = ScalarUDF::new_from_impl(IntervalReciprocal::default());
            let factor = ScalarFunction::new_udf(Arc::new(reciprocal), vec![divisor]);
            (expr.left.clone(), Expr::ScalarFunction(factor))
        }
        _ => return Ok(PlannerResult::Original(expr)),
    };
    let mul = ScalarUDF::new_from_impl(IntervalMul::default());
    Ok(PlannerResult::Planned(Expr::ScalarFunction(
        ScalarFunction::new_udf(Arc::new(mul), vec![interval, factor]),
    )))
}

/// `a - b` over two timestamps (or a date and a timestamp, the date taken at midnight), both
/// with or both without a time zone: `pg_timestamp_mi(a, b)`. DataFusion's answer is a
/// duration, which turns into an interval of hours alone wherever it meets an interval (a
/// UNION, CASE, sum); PostgreSQL's is an interval of days and a time below a day.
fn timestamp_difference(expr: &RawBinaryExpr, schema: &DFSchema) -> Option<Expr> {
    if expr.op != BinaryOperator::Minus {
        return None;
    }
    let left = expr.left.get_type(schema).ok()?;
    let right = expr.right.get_type(schema).ok()?;
    let zone = match (&left, &right) {
        (ArrowType::Timestamp(_, a), ArrowType::Timestamp(_, b)) if a.is_some() == b.is_some() => {
            a.clone()
        }
        (ArrowType::Timestamp(_, None), ArrowType::Date32)
        | (ArrowType::Date32, ArrowType::Timestamp(_, None)) => None,
        _ => return None,
    };
    let micros = ArrowType::Timestamp(TimeUnit::Microsecond, zone);
    let difference = ScalarUDF::new_from_impl(TimestampDifference::default());
    Some(Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::new(difference),
        vec![
            cast(expr.left.clone(), micros.clone()),
            cast(expr.right.clone(), micros),
        ],
    )))
}

/// `pg_timestamp_mi(a, b)`: a - b as PostgreSQL's timestamp_mi computes it, the time between
/// them split into whole days and the rest (interval_justify_hours), both with its sign.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TimestampDifference {
    signature: Signature,
}

impl Default for TimestampDifference {
    fn default() -> Self {
        TimestampDifference {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for TimestampDifference {
    fn name(&self) -> &str {
        "pg_timestamp_mi"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Interval(IntervalUnit::MonthDayNano))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let (a, b) = (args.args[0].to_array(rows)?, args.args[1].to_array(rows)?);
        // The planner cast both sides to microsecond timestamps; the zone does not change
        // the instants they hold.
        let (a, b) = (
            a.as_primitive_opt::<TimestampMicrosecondType>(),
            b.as_primitive_opt::<TimestampMicrosecondType>(),
        );
        let (Some(a), Some(b)) = (a, b) else {
            return datafusion::common::plan_err!("pg_timestamp_mi takes two timestamps");
        };
        let out: IntervalMonthDayNanoArray = a
            .iter()
            .zip(b.iter())
            .map(|pair| match pair {
                (Some(a), Some(b)) => days_and_time(a, b).map(Some),
                _ => Ok(None),
            })
            .collect::<DfResult<_>>()?;
        let out: datafusion::arrow::array::ArrayRef = Arc::new(out);
        Ok(if scalar {
            ColumnarValue::Scalar(datafusion::common::ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

/// `a - b` microseconds as whole days and the rest; truncating division gives both the sign
/// of the difference, as interval_justify_hours leaves them.
fn days_and_time(a_micros: i64, b_micros: i64) -> DfResult<IntervalMonthDayNano> {
    let out_of_range = || {
        sql_error(SqlError::new(
            code::DATETIME_FIELD_OVERFLOW,
            "interval out of range",
        ))
    };
    let micros = a_micros.checked_sub(b_micros).ok_or_else(out_of_range)?;
    let days = i32::try_from(micros / MICROS_PER_DAY).map_err(|_| out_of_range())?;
    Ok(IntervalMonthDayNano::new(
        0,
        days,
        (micros % MICROS_PER_DAY) * NANOS_PER_MICRO,
    ))
}

fn cast(e: Expr, t: ArrowType) -> Expr {
    Expr::Cast(datafusion::logical_expr::Cast::new(Box::new(e), t))
}

/// `interval * factor` as PostgreSQL's interval_mul: fractional months spill into days (30 to
/// a month) and fractional days into time. `interval / d` is `interval * (1 / d)`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalMul {
    signature: Signature,
}

impl Default for IntervalMul {
    fn default() -> Self {
        IntervalMul {
            signature: Signature::exact(
                vec![
                    ArrowType::Interval(IntervalUnit::MonthDayNano),
                    ArrowType::Float64,
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for IntervalMul {
    fn name(&self) -> &str {
        "pg_interval_mul"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Interval(IntervalUnit::MonthDayNano))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let spans = args.args[0].to_array(rows)?;
        let spans = spans
            .as_any()
            .downcast_ref::<IntervalMonthDayNanoArray>()
            .expect("signature makes intervals");
        let factors = args.args[1].to_array(rows)?;
        let factors = factors
            .as_any()
            .downcast_ref::<Float64Array>()
            .expect("signature makes float8");
        let out: IntervalMonthDayNanoArray = (0..rows)
            .map(|row| {
                if spans.is_null(row) || factors.is_null(row) {
                    return Ok(None);
                }
                scale_interval(spans.value(row), factors.value(row)).map(Some)
            })
            .collect::<DfResult<_>>()?;
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

fn scale_interval(span: IntervalMonthDayNano, factor: f64) -> DfResult<IntervalMonthDayNano> {
    const DAYS_PER_MONTH: f64 = 30.0;
    const SECS_PER_DAY: f64 = 86_400.0;
    // PostgreSQL rounds the spilled fractions to microseconds (TSROUND) on the way.
    let ts_round = |v: f64| (v * 1e6).round() / 1e6;
    let months_f = span.months as f64 * factor;
    let days_f = span.days as f64 * factor;
    let micros_f = (span.nanoseconds / 1000) as f64 * factor;
    let fits = months_f.abs() < i32::MAX as f64
        && days_f.abs() < i32::MAX as f64
        && micros_f.abs() < i64::MAX as f64;
    if !fits || !factor.is_finite() {
        return Err(sql_error(SqlError::new(
            code::DATETIME_FIELD_OVERFLOW,
            "interval out of range",
        )));
    }
    let months = months_f.trunc();
    let mut days = days_f.trunc();
    let month_remainder_days = ts_round((months_f - months) * DAYS_PER_MONTH);
    let mut sec_remainder = ts_round(
        (days_f - days + month_remainder_days - month_remainder_days.trunc()) * SECS_PER_DAY,
    );
    if sec_remainder.abs() >= SECS_PER_DAY {
        days += (sec_remainder / SECS_PER_DAY).trunc();
        sec_remainder -= (sec_remainder / SECS_PER_DAY).trunc() * SECS_PER_DAY;
    }
    days += month_remainder_days.trunc();
    let micros = (micros_f + sec_remainder * 1e6).round() as i64;
    Ok(IntervalMonthDayNano::new(
        months as i32,
        days as i32,
        micros * 1000,
    ))
}

/// `1 / divisor` for `interval / divisor`, failing with 22012 on zero as PostgreSQL does.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalReciprocal {
    signature: Signature,
}

impl Default for IntervalReciprocal {
    fn default() -> Self {
        IntervalReciprocal {
            signature: Signature::exact(vec![ArrowType::Float64], Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for IntervalReciprocal {
    fn name(&self) -> &str {
        "pg_interval_divisor"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let divisors = args.args[0].to_array(rows)?;
        let divisors = divisors
            .as_any()
            .downcast_ref::<Float64Array>()
            .expect("signature makes float8");
        let out: Float64Array = divisors
            .iter()
            .map(|d| match d {
                Some(d) if d == 0.0 => Err(sql_error(SqlError::new(
                    code::DIVISION_BY_ZERO,
                    "division by zero",
                ))),
                Some(d) => Ok(Some(1.0 / d)),
                None => Ok(None),
            })
            .collect::<DfResult<_>>()?;
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}
