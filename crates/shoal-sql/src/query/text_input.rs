//! Casts from text to date, timestamp, time and interval read PostgreSQL's input forms
//! (`January 8, 1999`, `2040-04-10 BC`, `infinity`, `today`, `@ 10 days`, `24:00:00`) through
//! Shoal's parsers in `pgtext`, with PostgreSQL's errors, instead of Arrow's cast kernels,
//! which read ISO forms only and say other things about the rest. The analyzer rule here
//! replaces each such cast (written ones, and those type coercion adds, as in
//! `date_col = 'Jan 8 1999'`) with a call of `pg_date_in`, `pg_timestamp_in`, `pg_time_in`,
//! `pg_interval_in`, or `pg_timestamptz_in`, which reads a time without an offset in the
//! session's time zone. Text read as bytea (`bytea_col = '\x0102'`, `text_col::bytea`) goes
//! through `pg_bytea_in`, which reads bytea's hex and escape forms as PostgreSQL's input
//! function does: Arrow's cast would take the text's own bytes.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BinaryArray, Date32Array, IntervalMonthDayNanoArray, StringArray,
    Time64MicrosecondArray, Time64NanosecondArray, TimestampMicrosecondArray,
    TimestampNanosecondArray,
};
use datafusion::arrow::datatypes::{
    DataType as ArrowType, IntervalMonthDayNano, IntervalUnit, TimeUnit,
};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{plan_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::analyzer::AnalyzerRule;

use crate::error::{code, SqlError, SqlResult};
use crate::query::expr_pass::rewrite_expressions_up;
use crate::query::functions::sql_error;
use crate::timezone::{SessionZone, TimeZone};

/// The type a text is read as; timestamps and times keep the unit of the cast's target.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Target {
    Date,
    Timestamp(TimeUnit),
    /// An instant, tagged with this zone (any zone means "an instant" to Shoal).
    TimestampTz(TimeUnit, Arc<str>),
    Time(TimeUnit),
    Interval,
    Bytea,
}

impl Target {
    fn of(t: &ArrowType) -> Option<Target> {
        Some(match t {
            ArrowType::Date32 => Target::Date,
            ArrowType::Timestamp(unit @ (TimeUnit::Microsecond | TimeUnit::Nanosecond), None) => {
                Target::Timestamp(*unit)
            }
            ArrowType::Timestamp(
                unit @ (TimeUnit::Microsecond | TimeUnit::Nanosecond),
                Some(zone),
            ) => Target::TimestampTz(*unit, zone.clone()),
            ArrowType::Time64(unit) => Target::Time(*unit),
            ArrowType::Interval(IntervalUnit::MonthDayNano) => Target::Interval,
            ArrowType::Binary => Target::Bytea,
            _ => return None,
        })
    }

    fn arrow_type(&self) -> ArrowType {
        match self {
            Target::Date => ArrowType::Date32,
            Target::Timestamp(unit) => ArrowType::Timestamp(*unit, None),
            Target::TimestampTz(unit, zone) => ArrowType::Timestamp(*unit, Some(zone.clone())),
            Target::Time(unit) => ArrowType::Time64(*unit),
            Target::Interval => ArrowType::Interval(IntervalUnit::MonthDayNano),
            Target::Bytea => ArrowType::Binary,
        }
    }
}

/// The analyzer rule; appended after DataFusion's type coercion, so the casts coercion adds
/// are rewritten too.
#[derive(Debug)]
pub struct TextInput {
    zone: SessionZone,
}

impl TextInput {
    pub fn new(zone: SessionZone) -> Self {
        TextInput { zone }
    }

    fn rewrite(&self, e: Expr, schema: &datafusion::common::DFSchema) -> Transformed<Expr> {
        let Expr::Cast(Cast { expr, field }) = &e else {
            return Transformed::no(e);
        };
        let textual = matches!(
            expr.get_type(schema),
            Ok(ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View)
        );
        let Some(target) = Target::of(field.data_type()).filter(|_| textual) else {
            return Transformed::no(e);
        };
        let text = match expr.get_type(schema) {
            Ok(ArrowType::Utf8) => (**expr).clone(),
            _ => Expr::Cast(Cast::new(expr.clone(), ArrowType::Utf8)),
        };
        let udf = ScalarUDF::new_from_impl(ReadText {
            target,
            zone: self.zone.clone(),
            signature: Signature::exact(vec![ArrowType::Utf8], Volatility::Stable),
        });
        Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::new(udf),
            vec![text],
        )))
    }
}

impl AnalyzerRule for TextInput {
    fn name(&self) -> &str {
        "pg_text_input"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        rewrite_expressions_up(plan, |e, schema| Ok(self.rewrite(e, schema)))
    }
}

/// Reads text as the target type. Stable, not immutable: `today` and `now` depend on when
/// the statement runs and on the session's time zone.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ReadText {
    target: Target,
    zone: SessionZone,
    signature: Signature,
}

impl ScalarUDFImpl for ReadText {
    fn name(&self) -> &str {
        match self.target {
            Target::Date => "pg_date_in",
            Target::Timestamp(_) => "pg_timestamp_in",
            Target::TimestampTz(..) => "pg_timestamptz_in",
            Target::Time(_) => "pg_time_in",
            Target::Interval => "pg_interval_in",
            Target::Bytea => "pg_bytea_in",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(self.target.arrow_type())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let input = args.args[0].to_array(args.number_rows.max(1))?;
        let Some(text) = input.as_any().downcast_ref::<StringArray>() else {
            return plan_err!("{} takes text", self.name());
        };
        let zone = self.zone.get();
        let out = read_all(text, &self.target, &zone).map_err(sql_error)?;
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

fn read_all(text: &StringArray, target: &Target, zone: &TimeZone) -> SqlResult<ArrayRef> {
    fn each<T>(
        text: &StringArray,
        read: impl Fn(&str) -> SqlResult<T>,
    ) -> SqlResult<Vec<Option<T>>> {
        text.iter().map(|s| s.map(&read).transpose()).collect()
    }
    Ok(match target {
        Target::Date => Arc::new(Date32Array::from(each(text, |s| {
            crate::pgtext::parse_date_at(s, zone)
        })?)),
        Target::Timestamp(TimeUnit::Nanosecond) => {
            Arc::new(TimestampNanosecondArray::from(each(text, |s| {
                nanos(crate::pgtext::parse_timestamp_at(s, zone)?, s)
            })?))
        }
        Target::Timestamp(_) => Arc::new(TimestampMicrosecondArray::from(each(text, |s| {
            crate::pgtext::parse_timestamp_at(s, zone)
        })?)),
        Target::TimestampTz(TimeUnit::Nanosecond, tag) => Arc::new(
            TimestampNanosecondArray::from(each(text, |s| {
                nanos(crate::pgtext::parse_timestamptz(s, zone)?, s)
            })?)
            .with_timezone(tag.clone()),
        ),
        Target::TimestampTz(_, tag) => Arc::new(
            TimestampMicrosecondArray::from(each(text, |s| {
                crate::pgtext::parse_timestamptz(s, zone)
            })?)
            .with_timezone(tag.clone()),
        ),
        Target::Time(TimeUnit::Nanosecond) => {
            Arc::new(Time64NanosecondArray::from(each(text, |s| {
                Ok(crate::pgtext::parse_time(s, zone)? * 1000)
            })?))
        }
        Target::Time(_) => Arc::new(Time64MicrosecondArray::from(each(text, |s| {
            crate::pgtext::parse_time(s, zone)
        })?)),
        Target::Interval => Arc::new(IntervalMonthDayNanoArray::from(each(text, |s| {
            let i = crate::pgtext::parse_interval(s)?;
            Ok(IntervalMonthDayNano::new(i.months, i.days, i.micros * 1000))
        })?)),
        Target::Bytea => Arc::new(BinaryArray::from_iter(each(text, |s| {
            crate::pgtext::parse_bytea(s)
        })?)),
    })
}

/// A timestamp in nanoseconds, the unit DataFusion gives `::timestamp`: ±infinity stay the
/// extreme values, and what nanoseconds cannot hold (before 1677, after 2262, BC) is refused
/// rather than wrapped.
fn nanos(micros: i64, text: &str) -> SqlResult<i64> {
    match micros {
        i64::MAX | i64::MIN => Ok(micros),
        _ => micros.checked_mul(1000).ok_or_else(|| {
            SqlError::new(
                code::DATETIME_FIELD_OVERFLOW,
                format!("timestamp out of range: \"{text}\""),
            )
        }),
    }
}
