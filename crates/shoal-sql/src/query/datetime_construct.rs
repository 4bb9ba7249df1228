//! Functions that build a date or timestamp from numbers, as PostgreSQL's do where
//! DataFusion's differ: `make_date`, whose negative years are BC (`make_date(-44, 3, 15)` is
//! 0044-03-15 BC, and there is no year 0), and `to_timestamp(double precision)`, seconds since
//! the epoch with `infinity` and PostgreSQL's range errors (DataFusion's reads text).

use std::sync::Arc;

use datafusion::arrow::array::TimestampMicrosecondArray;
use datafusion::arrow::array::{Array, ArrayRef, Date32Array, Float64Array, Int32Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType as ArrowType, TimeUnit};
use datafusion::common::{plan_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature};

use crate::error::{code, SqlError, SqlResult};
use crate::query::functions::sql_error;

/// The zone tag of the timestamptz values built here (any tag means "an instant").
const INSTANT_ZONE: &str = "+00:00";
/// 4714-11-24 BC, the first day PostgreSQL's dates and timestamps reach.
const FIRST_DAY: i64 = -2_440_588;
/// The day after 5874897-12-31, the last date.
const DATE_END_DAY: i64 = 2_145_042_906;
const MICROS_PER_SECOND: f64 = 1e6;

fn arrays(args: &ScalarFunctionArgs) -> DfResult<(Vec<ArrayRef>, bool)> {
    let scalar = args
        .args
        .iter()
        .all(|a| matches!(a, ColumnarValue::Scalar(_)));
    // All scalars: one value. Else as many as the batch has, which may be none (a scalar
    // expanded to one row beside an empty column would be read past the column's end).
    let rows = if scalar {
        args.number_rows.max(1)
    } else {
        args.number_rows
    };
    let arrays = args
        .args
        .iter()
        .map(|a| a.to_array(rows))
        .collect::<DfResult<_>>()?;
    Ok((arrays, scalar))
}

fn result(out: ArrayRef, scalar: bool) -> DfResult<ColumnarValue> {
    Ok(if scalar {
        ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
    } else {
        ColumnarValue::Array(out)
    })
}

/// `make_date(year, month, day)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MakeDate {
    pub signature: Signature,
}

impl ScalarUDFImpl for MakeDate {
    fn name(&self) -> &str {
        "make_date"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        if arg_types.len() != 3 || !arg_types.iter().all(|t| t.is_integer() || t.is_null()) {
            return plan_err!("make_date takes three integers");
        }
        Ok(vec![ArrowType::Int32; 3])
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Date32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (arrays, scalar) = arrays(&args)?;
        let int = |i: usize| {
            arrays[i]
                .as_any()
                .downcast_ref::<Int32Array>()
                .expect("coerce_types makes integers")
        };
        let (years, months, days) = (int(0), int(1), int(2));
        let out: Date32Array = (0..years.len())
            .map(|row| {
                if years.is_null(row) || months.is_null(row) || days.is_null(row) {
                    return Ok(None);
                }
                make_date(years.value(row), months.value(row), days.value(row)).map(Some)
            })
            .collect::<SqlResult<_>>()
            .map_err(sql_error)?;
        result(Arc::new(out), scalar)
    }
}

fn make_date(year: i32, month: i32, day: i32) -> SqlResult<i32> {
    // Negative years count back from 1 BC, as in PostgreSQL: -1 is 1 BC (astronomical 0).
    let astronomical = if year < 0 {
        i64::from(year) + 1
    } else {
        i64::from(year)
    };
    let field_error = || {
        SqlError::new(
            code::DATETIME_FIELD_OVERFLOW,
            format!("date field value out of range: {year}-{month:02}-{day:02}"),
        )
    };
    if year == 0 || !(1..=12).contains(&month) || day < 1 {
        return Err(field_error());
    }
    let days_in_month = {
        let next = if month == 12 {
            crate::pgtext::days_from_civil(astronomical + 1, 1, 1)
        } else {
            crate::pgtext::days_from_civil(astronomical, month as u32 + 1, 1)
        };
        next - crate::pgtext::days_from_civil(astronomical, month as u32, 1)
    };
    if i64::from(day) > days_in_month {
        return Err(field_error());
    }
    let days = crate::pgtext::days_from_civil(astronomical, month as u32, day as u32);
    if !(FIRST_DAY..DATE_END_DAY).contains(&days) {
        return Err(SqlError::new(
            code::DATETIME_FIELD_OVERFLOW,
            format!("date out of range: {astronomical}-{month:02}-{day:02}"),
        ));
    }
    Ok(days as i32)
}

/// `to_timestamp(double precision)`: seconds since 1970-01-01 00:00 UTC as a timestamptz.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ToTimestampFromEpoch {
    pub signature: Signature,
}

impl ScalarUDFImpl for ToTimestampFromEpoch {
    fn name(&self) -> &str {
        "pg_to_timestamp_epoch"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        let [t] = arg_types else {
            return plan_err!("to_timestamp takes one number");
        };
        // An untyped literal ('Infinity') is a double precision, as in PostgreSQL.
        // A numeric stays numeric here (DataFusion has no cast from it): the function converts
        // it to a double precision itself.
        if crate::numeric::is_numeric(t) {
            return Ok(vec![t.clone()]);
        }
        if !(t.is_numeric() || t.is_null() || matches!(t, ArrowType::Utf8)) {
            return plan_err!("to_timestamp takes one number");
        }
        Ok(vec![ArrowType::Float64])
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Timestamp(
            TimeUnit::Microsecond,
            Some(Arc::from(INSTANT_ZONE)),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (arrays, scalar) = arrays(&args)?;
        let seconds = match crate::numeric::is_numeric(arrays[0].data_type()) {
            true => crate::numeric::kernels::cast_array(&arrays[0], &ArrowType::Float64)?,
            false => cast(&arrays[0], &ArrowType::Float64)?,
        };
        let seconds = seconds
            .as_any()
            .downcast_ref::<Float64Array>()
            .expect("cast to double precision");
        let out: TimestampMicrosecondArray = seconds
            .iter()
            .map(|s| s.map(epoch_to_micros).transpose())
            .collect::<SqlResult<_>>()
            .map_err(sql_error)?;
        result(Arc::new(out.with_timezone(INSTANT_ZONE)), scalar)
    }
}

fn epoch_to_micros(seconds: f64) -> SqlResult<i64> {
    if seconds.is_nan() {
        return Err(SqlError::new(
            code::DATETIME_FIELD_OVERFLOW,
            "timestamp cannot be NaN",
        ));
    }
    if seconds.is_infinite() {
        return Ok(if seconds > 0.0 { i64::MAX } else { i64::MIN });
    }
    let micros = (seconds * MICROS_PER_SECOND).round();
    let first = FIRST_DAY as f64 * 86_400.0 * MICROS_PER_SECOND;
    // i64::MAX is infinity; values at or beyond it are out of range.
    if micros < first || micros >= i64::MAX as f64 {
        return Err(SqlError::new(
            code::DATETIME_FIELD_OVERFLOW,
            format!("timestamp out of range: \"{}\"", format_g(seconds)),
        ));
    }
    Ok(micros as i64)
}

/// A double as C's `%g` prints it (six significant digits), as PostgreSQL's message does.
fn format_g(v: f64) -> String {
    let sci = format!("{v:.5e}");
    let (mantissa, exponent) = sci.split_once('e').expect("{:e} has an exponent");
    let exponent: i32 = exponent.parse().expect("exponent is an integer");
    if (-4..6).contains(&exponent) {
        let decimals = (5 - exponent).max(0) as usize;
        let fixed = format!("{v:.decimals$}");
        let fixed = if fixed.contains('.') {
            fixed
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string()
        } else {
            fixed
        };
        return fixed;
    }
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_date_counts_negative_years_as_bc() {
        let mut s = String::new();
        crate::pgtext::format_date(make_date(-44, 3, 15).unwrap(), &mut s);
        assert_eq!(s, "0044-03-15 BC");
        assert_eq!(
            make_date(0, 7, 15).unwrap_err().message,
            "date field value out of range: 0-07-15"
        );
    }

    #[test]
    fn doubles_print_as_c_g() {
        assert_eq!(format_g(1e300), "1e+300");
        assert_eq!(format_g(-1e12), "-1e+12");
        assert_eq!(format_g(9224318016000.0), "9.22432e+12");
        assert_eq!(format_g(-210866803201.0), "-2.10867e+11");
        assert_eq!(format_g(123.5), "123.5");
    }
}
