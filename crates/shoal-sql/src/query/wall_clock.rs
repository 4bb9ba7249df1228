//! Where PostgreSQL reads a timestamptz on the session's wall clock. A timestamptz is an
//! instant (UTC microseconds) and compares, sorts and groups as one; but casting it to
//! timestamp or date, casting a timestamp or date to it, extract/date_part,
//! date_trunc, to_char and current_date all work in the session time zone. DataFusion knows
//! only the zone written in the Arrow type, so the analyzer rule here rewrites those
//! operations to go through `pg_timestamptz_to_local` / `pg_local_to_timestamptz`, which read
//! the session's zone (from the plan scope) when they run. In UTC both are the identity.
//! `timestamptz ± interval` moves months and days on the wall clock too (a day across a DST
//! change is 23 or 25 hours), and the time part in absolute time, as PostgreSQL does.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, TimestampMicrosecondArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType as ArrowType, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{plan_err, DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    BinaryExpr, Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::analyzer::AnalyzerRule;

use crate::query::expr_pass::rewrite_expressions_up;
use crate::timezone::{SessionZone, TimeZone};

/// The Arrow zone of the timestamptz values these functions return (any zone tag means "an
/// instant" to Shoal; this one is what DataFusion's now() carries).
const INSTANT_ZONE: &str = "+00:00";

fn micros_type(zone: Option<&str>) -> ArrowType {
    ArrowType::Timestamp(TimeUnit::Microsecond, zone.map(Arc::from))
}

/// The analyzer rule; appended after DataFusion's type coercion, so the casts coercion adds
/// (a timestamp compared with a timestamptz) are rewritten too.
#[derive(Debug)]
pub struct WallClock {
    to_local: Arc<ScalarUDF>,
    to_instant: Arc<ScalarUDF>,
    add_interval: Arc<ScalarUDF>,
}

impl WallClock {
    pub fn new(zone: SessionZone) -> Self {
        let udf = |kind| {
            Arc::new(ScalarUDF::new_from_impl(ZoneConversion {
                kind,
                zone: zone.clone(),
                signature: Signature::user_defined(Volatility::Stable),
            }))
        };
        WallClock {
            to_local: udf(Kind::ToLocal),
            to_instant: udf(Kind::ToInstant),
            add_interval: Arc::new(ScalarUDF::new_from_impl(IntervalOnWallClock {
                zone: zone.clone(),
                signature: Signature::user_defined(Volatility::Stable),
            })),
        }
    }

    fn call(&self, udf: &Arc<ScalarUDF>, arg: Expr) -> Expr {
        Expr::ScalarFunction(ScalarFunction::new_udf(udf.clone(), vec![arg]))
    }

    fn local(&self, e: Expr) -> Expr {
        self.call(&self.to_local, e)
    }

    fn instant(&self, e: Expr) -> Expr {
        self.call(&self.to_instant, e)
    }
}

impl AnalyzerRule for WallClock {
    fn name(&self) -> &str {
        "pg_wall_clock"
    }

    fn analyze(&self, plan: LogicalPlan, config: &ConfigOptions) -> DfResult<LogicalPlan> {
        rewrite_expressions_up(plan, |e, schema| self.rewrite(e, schema, config))
    }
}

fn is_zoned(t: &ArrowType) -> bool {
    matches!(t, ArrowType::Timestamp(_, Some(_)))
}

fn cast_to(e: Expr, t: &ArrowType) -> Expr {
    Expr::Cast(Cast::new(Box::new(e), t.clone()))
}

/// `e` as the given type, without a cast when it already is.
fn retyped(e: Expr, from: &ArrowType, to: &ArrowType) -> Expr {
    if from == to {
        e
    } else {
        cast_to(e, to)
    }
}

impl WallClock {
    fn rewrite(
        &self,
        e: Expr,
        schema: &DFSchema,
        config: &ConfigOptions,
    ) -> DfResult<Transformed<Expr>> {
        let type_of = |e: &Expr| e.get_type(schema).ok();
        let replacement = match &e {
            Expr::BinaryExpr(BinaryExpr { left, op, right })
                if matches!(op, Operator::Plus | Operator::Minus) =>
            {
                self.interval_sum(left, *op, right, schema)
            }
            Expr::Cast(Cast { expr, field }) => {
                let to = field.data_type();
                type_of(expr).and_then(|from| self.cast(expr, &from, to))
            }
            Expr::ScalarFunction(ScalarFunction { func, args }) => {
                self.function(func, args, schema, config)
            }
            _ => None,
        };
        Ok(match replacement {
            Some(r) => Transformed::yes(r),
            None => Transformed::no(e),
        })
    }

    /// `timestamptz ± interval` (or `interval + timestamptz`) as `pg_timestamptz_pl_interval`.
    fn interval_sum(
        &self,
        left: &Expr,
        op: Operator,
        right: &Expr,
        schema: &DFSchema,
    ) -> Option<Expr> {
        let type_of = |e: &Expr| e.get_type(schema).ok();
        let (lt, rt) = (type_of(left), type_of(right));
        let is_interval = |t: &Option<ArrowType>| matches!(t, Some(ArrowType::Interval(_)));
        let (instant, span, instant_type) = match (&lt, &rt) {
            (Some(t), _) if is_zoned(t) && is_interval(&rt) => (left, right, t),
            (_, Some(t)) if is_zoned(t) && is_interval(&lt) && op == Operator::Plus => {
                (right, left, t)
            }
            _ => return None,
        };
        let span = if op == Operator::Minus {
            Expr::Negative(Box::new(span.clone()))
        } else {
            span.clone()
        };
        let sum = Expr::ScalarFunction(ScalarFunction::new_udf(
            self.add_interval.clone(),
            vec![instant.clone(), span],
        ));
        Some(retyped(sum, &micros_type(Some(INSTANT_ZONE)), instant_type))
    }

    /// The date/time functions that work on the wall clock, given a timestamptz.
    fn function(
        &self,
        func: &Arc<ScalarUDF>,
        args: &[Expr],
        schema: &DFSchema,
        config: &ConfigOptions,
    ) -> Option<Expr> {
        let type_of = |e: &Expr| e.get_type(schema).ok();
        match (func.name(), args) {
            ("date_part" | "pg_extract", [field, value])
                if type_of(value).is_some_and(|t| is_zoned(&t)) =>
            {
                let zone_free = matches!(
                    field,
                    Expr::Literal(ScalarValue::Utf8(Some(f)), _)
                        if f.eq_ignore_ascii_case("epoch")
                            || f.to_ascii_lowercase().starts_with("timezone")
                );
                (!zone_free).then(|| {
                    Expr::ScalarFunction(ScalarFunction::new_udf(
                        func.clone(),
                        vec![field.clone(), self.local(value.clone())],
                    ))
                })
            }
            ("to_char", [value, format]) if type_of(value).is_some_and(|t| is_zoned(&t)) => {
                Some(Expr::ScalarFunction(ScalarFunction::new_udf(
                    func.clone(),
                    vec![self.local(value.clone()), format.clone()],
                )))
            }
            ("date_trunc", [unit, value]) => match type_of(value) {
                Some(t) if is_zoned(&t) => {
                    let truncated = Expr::ScalarFunction(ScalarFunction::new_udf(
                        func.clone(),
                        vec![unit.clone(), self.local(value.clone())],
                    ));
                    let instant = self.instant(truncated);
                    Some(retyped(instant, &micros_type(Some(INSTANT_ZONE)), &t))
                }
                _ => None,
            },
            ("current_date", []) => {
                let now = datafusion::functions::datetime::now(config);
                let now = Expr::ScalarFunction(ScalarFunction::new_udf(now, vec![]));
                Some(cast_to(self.local(now), &ArrowType::Date32))
            }
            _ => None,
        }
    }

    /// A cast between timestamptz and timestamp, date or text, made to go through the wall
    /// clock; None for every other cast.
    fn cast(&self, inner: &Expr, from: &ArrowType, to: &ArrowType) -> Option<Expr> {
        let inner = inner.clone();
        match (from, to) {
            (
                ArrowType::Timestamp(_, None) | ArrowType::Date32,
                ArrowType::Timestamp(_, Some(_)),
            ) => {
                let local = retyped(inner, from, &micros_type(None));
                Some(retyped(
                    self.instant(local),
                    &micros_type(Some(INSTANT_ZONE)),
                    to,
                ))
            }
            (
                ArrowType::Timestamp(_, Some(_)),
                ArrowType::Timestamp(_, None) | ArrowType::Date32,
            ) => Some(retyped(self.local(inner), &micros_type(None), to)),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    /// timestamptz → the session's wall clock, as a timestamp.
    ToLocal,
    /// timestamp (a wall-clock time in the session's zone) → timestamptz.
    ToInstant,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ZoneConversion {
    kind: Kind,
    zone: SessionZone,
    signature: Signature,
}

impl ScalarUDFImpl for ZoneConversion {
    fn name(&self) -> &str {
        match self.kind {
            Kind::ToLocal => "pg_timestamptz_to_local",
            Kind::ToInstant => "pg_local_to_timestamptz",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        let [t] = arg_types else {
            return plan_err!("{} takes one argument", self.name());
        };
        Ok(vec![match self.kind {
            Kind::ToLocal => match t {
                ArrowType::Timestamp(_, Some(zone)) => micros_type(Some(zone)),
                _ => micros_type(Some(INSTANT_ZONE)),
            },
            Kind::ToInstant => micros_type(None),
        }])
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(match self.kind {
            Kind::ToLocal => micros_type(None),
            Kind::ToInstant => micros_type(Some(INSTANT_ZONE)),
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let input = args.args[0].to_array(args.number_rows.max(1))?;
        let zone = self.zone.get();
        let out: ArrayRef = match self.kind {
            Kind::ToLocal | Kind::ToInstant => {
                let micros = cast(&input, &micros_type(None))?;
                let micros = micros
                    .as_any()
                    .downcast_ref::<TimestampMicrosecondArray>()
                    .expect("cast to microsecond timestamps");
                if self.kind == Kind::ToLocal {
                    let local: TimestampMicrosecondArray = micros.unary(|v| zone.utc_to_local(v));
                    Arc::new(local)
                } else {
                    let utc: TimestampMicrosecondArray = micros.unary(|v| zone.local_to_utc(v));
                    Arc::new(utc.with_timezone(INSTANT_ZONE))
                }
            }
        };
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

/// `timestamptz + interval` as PostgreSQL's timestamptz_pl_interval: the months (clamped to the
/// month's last day) and then the days are added on the session's wall clock, the time part to
/// the instant. `timestamptz - interval` adds the negated interval.
#[derive(Debug, PartialEq, Eq, Hash)]
struct IntervalOnWallClock {
    zone: SessionZone,
    signature: Signature,
}

impl ScalarUDFImpl for IntervalOnWallClock {
    fn name(&self) -> &str {
        "pg_timestamptz_pl_interval"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        let [t, _] = arg_types else {
            return plan_err!("{} takes a timestamptz and an interval", self.name());
        };
        let zone = match t {
            ArrowType::Timestamp(_, Some(zone)) => zone.clone(),
            _ => Arc::from(INSTANT_ZONE),
        };
        Ok(vec![
            ArrowType::Timestamp(TimeUnit::Microsecond, Some(zone)),
            ArrowType::Interval(datafusion::arrow::datatypes::IntervalUnit::MonthDayNano),
        ])
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(micros_type(Some(INSTANT_ZONE)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        use datafusion::arrow::array::{Array, IntervalMonthDayNanoArray};
        let rows = args.number_rows;
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let instants = args.args[0].to_array(rows.max(1))?;
        let instants = cast(&instants, &micros_type(None))?;
        let instants = instants
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .expect("cast to microsecond timestamps");
        let spans = args.args[1].to_array(rows.max(1))?;
        let spans = spans
            .as_any()
            .downcast_ref::<IntervalMonthDayNanoArray>()
            .expect("coerce_types makes intervals");
        let zone = self.zone.get();
        let out: TimestampMicrosecondArray = (0..instants.len())
            .map(|row| {
                if instants.is_null(row) || spans.is_null(row) {
                    return None;
                }
                let span = spans.value(row);
                add_on_wall_clock(instants.value(row), span.months, span.days, &zone)
                    .map(|t| t.saturating_add(span.nanoseconds / 1000))
            })
            .collect();
        let out: ArrayRef = Arc::new(out.with_timezone(INSTANT_ZONE));
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

/// The instant `months` and `days` later on `zone`'s wall clock; None when out of range.
fn add_on_wall_clock(utc_micros: i64, months: i32, days: i32, zone: &TimeZone) -> Option<i64> {
    use chrono::{DateTime, Months};
    if months == 0 && days == 0 {
        return Some(utc_micros);
    }
    let mut local = DateTime::from_timestamp_micros(zone.utc_to_local(utc_micros))?.naive_utc();
    if months != 0 {
        // chrono clamps the day to the month's last day, as PostgreSQL does.
        local = if months > 0 {
            local.checked_add_months(Months::new(months as u32))?
        } else {
            local.checked_sub_months(Months::new(months.unsigned_abs()))?
        };
    }
    local = local.checked_add_signed(chrono::TimeDelta::days(days as i64))?;
    Some(zone.naive_to_utc(local))
}
