//! Date and time functions where PostgreSQL and DataFusion differ: `age` (a symbolic difference
//! in years, months and days, which DataFusion lacks), `to_char` patterns (PostgreSQL's
//! `YYYY-MM-DD HH24:MI:SS`, which `rewrite.rs` translates into the chrono patterns DataFusion's
//! `to_char` takes), and interval literals in PostgreSQL's forms that DataFusion's parser
//! refuses (`1 day 04:05:06`), which `rewrite.rs` restates in units it reads. Also
//! `AT TIME ZONE` (as `pg_at_time_zone`), which turns a timestamptz into the zone's local
//! timestamp and a timestamp into a timestamptz. Interval arithmetic is in `crate::interval`.

use std::sync::Arc;

use chrono::{DateTime, Datelike, NaiveDateTime, Timelike};
use datafusion::arrow::array::{
    Array, ArrayRef, IntervalMonthDayNanoArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{
    DataType as ArrowType, IntervalMonthDayNano, IntervalUnit, TimeUnit,
};
use datafusion::common::{plan_err, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

use crate::query::civil_time::{civil_field, CivilField};

/// An interval literal restated in the units DataFusion's parser reads, from Shoal's reading
/// of PostgreSQL's forms.
pub fn interval_literal_for_datafusion(text: &str) -> crate::error::SqlResult<String> {
    let i = crate::pgtext::parse_interval(text)?;
    Ok(format!(
        "{} months {} days {} microseconds",
        i.months, i.days, i.micros
    ))
}

/// PostgreSQL's to_char template as a chrono format: the common date and time fields; other
/// text is copied (with `%` escaped), as PostgreSQL copies what it does not recognise, and
/// double-quoted text is copied without its quotes.
pub fn to_char_pattern(template: &str) -> String {
    const FIELDS: &[(&str, &str)] = &[
        ("YYYY", "%Y"),
        ("HH24", "%H"),
        ("HH12", "%I"),
        ("Month", "%B"),
        ("Mon", "%b"),
        ("Day", "%A"),
        ("Dy", "%a"),
        ("YY", "%y"),
        ("MM", "%m"),
        ("DD", "%d"),
        ("HH", "%I"),
        ("MI", "%M"),
        ("SS", "%S"),
        ("MS", "%3f"),
        ("US", "%6f"),
        ("AM", "%p"),
        ("PM", "%p"),
    ];
    let mut out = String::new();
    let mut rest = template;
    'outer: while let Some(c) = rest.chars().next() {
        if c == '"' {
            let end = rest[1..].find('"').map_or(rest.len(), |e| e + 1);
            out.push_str(&rest[1..end].replace('%', "%%"));
            rest = rest.get(end + 1..).unwrap_or("");
            continue;
        }
        for (field, chrono) in FIELDS {
            if let Some(after) = rest.strip_prefix(field) {
                out.push_str(chrono);
                rest = after;
                continue 'outer;
            }
        }
        if c == '%' {
            out.push('%');
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `age(a, b)`: a - b in years, months and days plus a time, as PostgreSQL computes it
/// (fields subtracted one by one, borrowing from the next larger field); `age(a)` is
/// `age(current_date, a)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Age {
    pub signature: Signature,
}

impl ScalarUDFImpl for Age {
    fn name(&self) -> &str {
        "age"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        if !(1..=2).contains(&arg_types.len()) {
            return plan_err!("age takes one or two timestamps");
        }
        Ok(vec![
            ArrowType::Timestamp(TimeUnit::Microsecond, None);
            arg_types.len()
        ])
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Interval(IntervalUnit::MonthDayNano))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<DfResult<Vec<ArrayRef>>>()?;
        let micros = |i: usize| {
            arrays[i]
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .expect("coerce_types makes timestamps")
        };
        let today = chrono::Utc::now()
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .expect("midnight exists");
        let out: IntervalMonthDayNanoArray = (0..rows)
            .map(|row| {
                let (a, b) = if arrays.len() == 2 {
                    (micros(0), Some(micros(1)))
                } else {
                    (micros(0), None)
                };
                let (newer, older) = match b {
                    Some(b) if a.is_valid(row) && b.is_valid(row) => {
                        (naive(a.value(row))?, naive(b.value(row))?)
                    }
                    None if a.is_valid(row) => (today, naive(a.value(row))?),
                    _ => return None,
                };
                Some(age(newer, older))
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

fn naive(micros: i64) -> Option<NaiveDateTime> {
    DateTime::from_timestamp_micros(micros).map(|d| d.naive_utc())
}

fn age(newer: NaiveDateTime, older: NaiveDateTime) -> IntervalMonthDayNano {
    if newer < older {
        let a = age(older, newer);
        return IntervalMonthDayNano::new(-a.months, -a.days, -a.nanoseconds);
    }
    let time_of = |t: NaiveDateTime| {
        t.num_seconds_from_midnight() as i64 * 1_000_000 + (t.nanosecond() / 1000) as i64
    };
    let mut micros = time_of(newer) - time_of(older);
    let mut days = newer.day() as i32 - older.day() as i32;
    let mut months = newer.month() as i32 - older.month() as i32;
    let years = newer.year() - older.year();
    if micros < 0 {
        micros += 86_400_000_000;
        days -= 1;
    }
    if days < 0 {
        // Borrow the length of the older date's month, as PostgreSQL does.
        days += days_in_month(older.year(), older.month());
        months -= 1;
    }
    IntervalMonthDayNano::new(years * 12 + months, days, micros * 1000)
}

fn days_in_month(year: i32, month: u32) -> i32 {
    let (next_year, next_month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    let first = chrono::NaiveDate::from_ymd_opt(year, month, 1).expect("valid month");
    let next = chrono::NaiveDate::from_ymd_opt(next_year, next_month, 1).expect("valid month");
    (next - first).num_days() as i32
}

/// `ts AT TIME ZONE zone`: timestamptz to the zone's wall-clock timestamp, timestamp (taken as
/// the zone's wall clock) to timestamptz. The zone is an IANA name or a POSIX specification,
/// as PostgreSQL reads it; an unknown one fails with 22023.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AtTimeZone {
    pub signature: Signature,
    /// Unused by the conversion itself, which names its zone; kept so the function is tied to
    /// the session like the other zone-aware functions.
    pub zone: crate::timezone::SessionZone,
}

impl ScalarUDFImpl for AtTimeZone {
    fn name(&self) -> &str {
        "pg_at_time_zone"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        let [ts, _] = arg_types else {
            return plan_err!("AT TIME ZONE takes a timestamp and a zone");
        };
        let ts = match ts {
            ArrowType::Timestamp(_, Some(tz)) => {
                ArrowType::Timestamp(TimeUnit::Microsecond, Some(tz.clone()))
            }
            _ => ArrowType::Timestamp(TimeUnit::Microsecond, None),
        };
        Ok(vec![ts, ArrowType::Utf8])
    }

    fn return_type(&self, arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(match arg_types.first() {
            Some(ArrowType::Timestamp(_, Some(_))) => {
                ArrowType::Timestamp(TimeUnit::Microsecond, None)
            }
            _ => ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let zones = args.args[1].to_array(rows)?;
        let zones = zones
            .as_any()
            .downcast_ref::<datafusion::arrow::array::StringArray>()
            .expect("coerce_types makes the zone text");
        let micros = args.args[0].to_array(rows)?;
        let micros = micros
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .expect("coerce_types makes microsecond timestamps");
        let to_local = matches!(micros.data_type(), ArrowType::Timestamp(_, Some(_)));
        // Zones repeat (usually one constant): parse each distinct text once in a row.
        let mut last: Option<(String, crate::timezone::TimeZone)> = None;
        let mut out = Vec::with_capacity(rows);
        for row in 0..rows {
            if micros.is_null(row) || zones.is_null(row) {
                out.push(None);
                continue;
            }
            let text = zones.value(row);
            if last.as_ref().is_none_or(|(t, _)| t != text) {
                let zone =
                    crate::timezone::TimeZone::from_at_time_zone_text(text).ok_or_else(|| {
                        crate::query::functions::sql_error(crate::error::SqlError::new(
                            crate::error::code::INVALID_PARAMETER_VALUE,
                            format!("time zone \"{text}\" not recognized"),
                        ))
                    })?;
                last = Some((text.to_string(), zone));
            }
            let zone = &last.as_ref().expect("set above").1;
            let v = micros.value(row);
            out.push(Some(if to_local {
                zone.utc_to_local(v)
            } else {
                zone.local_to_utc(v)
            }));
        }
        let out = TimestampMicrosecondArray::from(out);
        let out = match args.return_field.data_type() {
            ArrowType::Timestamp(_, Some(tz)) => out.with_timezone(tz.clone()),
            _ => out,
        };
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// `EXTRACT(field FROM value)`, which `rewrite.rs` turns into `pg_extract('field', value)`: a
/// numeric, as in PostgreSQL 14 and later. Seconds, milliseconds and the epoch of a timestamp
/// keep their microseconds (`30.500000`, `30500.000`, `1704067200.000000`); whole fields are
/// numerics without decimals. The fields themselves come from DataFusion's date_part (on the
/// session's wall clock for a timestamptz, see `wall_clock.rs`).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Extract {
    pub signature: Signature,
    pub date_part: Arc<ScalarUDF>,
    /// For the `timezone` fields of a timestamptz: the session zone's offset at the instant.
    pub zone: crate::timezone::SessionZone,
}

/// What an EXTRACT field needs beyond date_part's whole numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExtractField {
    /// Seconds with microseconds: scale 6.
    Second,
    /// Milliseconds with microseconds: scale 3.
    Millisecond,
    Epoch,
    Whole,
}

impl ExtractField {
    fn of(field: &str) -> Self {
        match field.to_ascii_lowercase().as_str() {
            "second" | "seconds" | "sec" | "secs" | "s" => ExtractField::Second,
            "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" => ExtractField::Millisecond,
            "epoch" => ExtractField::Epoch,
            _ => ExtractField::Whole,
        }
    }

    /// The numeric scale PostgreSQL gives the field of a value of type `t`.
    fn scale(self, t: &ArrowType) -> i8 {
        match (self, t) {
            (_, ArrowType::Date32) | (ExtractField::Whole, _) => 0,
            (ExtractField::Millisecond, _) => 3,
            (ExtractField::Second | ExtractField::Epoch, _) => 6,
        }
    }
}

fn extract_field_name(field: Option<&datafusion::common::ScalarValue>) -> DfResult<String> {
    match field.and_then(|f| f.try_as_str().flatten()) {
        Some(name) if !name.is_empty() => Ok(name.to_string()),
        _ => plan_err!("EXTRACT needs a constant field name"),
    }
}

impl ScalarUDFImpl for Extract {
    fn name(&self) -> &str {
        "pg_extract"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        let [_, value] = arg_types else {
            return plan_err!("EXTRACT takes a field and a value");
        };
        let value = match value {
            ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View | ArrowType::Null => {
                ArrowType::Timestamp(TimeUnit::Microsecond, None)
            }
            other => other.clone(),
        };
        Ok(vec![ArrowType::Utf8, value])
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        plan_err!("pg_extract's type depends on its field: return_field_from_args is used")
    }

    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> DfResult<datafusion::arrow::datatypes::FieldRef> {
        let field = extract_field_name(args.scalar_arguments.first().copied().flatten())?;
        let value = &args.arg_fields[1];
        let scale = ExtractField::of(&field).scale(value.data_type());
        Ok(Arc::new(datafusion::arrow::datatypes::Field::new(
            self.name(),
            ArrowType::Decimal128(shoal_storage::types::NUMERIC_MAX_PRECISION, scale),
            value.is_nullable(),
        )))
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        use datafusion::arrow::array::{Decimal128Array, Int32Array};
        use datafusion::common::ScalarValue;
        let ColumnarValue::Scalar(field) = &args.args[0] else {
            return plan_err!("EXTRACT needs a constant field name");
        };
        let field_name = extract_field_name(Some(field))?;
        // Infinite dates and timestamps: their fields are NULL, but the epoch, year and the
        // like are ±Infinity, which the decimal this returns cannot hold.
        {
            let values = args.args[1].to_array(args.number_rows.max(1))?;
            let (finite, signs) = split_infinite(&values)?;
            if signs.iter().any(|&s| s != 0) {
                if infinite_valued(&field_name) {
                    return Err(crate::query::functions::sql_error(
                        crate::error::SqlError::new(
                            crate::error::code::FEATURE_NOT_SUPPORTED,
                            format!(
                                "EXTRACT({field_name} FROM ...) of an infinite date or \
                                 timestamp (numeric Infinity) is not supported; date_part \
                                 answers it as float8"
                            ),
                        ),
                    ));
                }
                args.args[1] = ColumnarValue::Array(finite);
            }
        }
        let field = ExtractField::of(&field_name);
        let value_type = args.arg_fields[1].data_type().clone();
        let scale = field.scale(&value_type);
        let precision = shoal_storage::types::NUMERIC_MAX_PRECISION;
        let scalar = matches!(args.args[1], ColumnarValue::Scalar(_));
        let rows = args.number_rows.max(1);
        let values = args.args[1].to_array(rows)?;
        let is_timestamp = matches!(value_type, ArrowType::Timestamp(..));
        let zone_field = matches!(
            field_name.to_ascii_lowercase().as_str(),
            "timezone" | "timezone_hour" | "timezone_minute"
        );
        let out: ArrayRef = if zone_field && matches!(value_type, ArrowType::Timestamp(_, Some(_)))
        {
            let micros = datafusion::arrow::compute::cast(
                &values,
                &ArrowType::Timestamp(TimeUnit::Microsecond, None),
            )?;
            let micros = micros
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .expect("cast to microsecond timestamps");
            let zone = self.zone.get();
            let lower = field_name.to_ascii_lowercase();
            let out: Decimal128Array = micros.unary(|v| {
                let offset = zone.offset_at_utc(v) as i128;
                match lower.as_str() {
                    "timezone_hour" => offset / 3600,
                    "timezone_minute" => offset / 60 % 60,
                    _ => offset,
                }
            });
            Arc::new(out.with_precision_and_scale(precision, 0)?)
        } else if is_timestamp && field == ExtractField::Epoch {
            // The timestamp's own microseconds, exactly.
            let micros = datafusion::arrow::compute::cast(
                &values,
                &ArrowType::Timestamp(TimeUnit::Microsecond, None),
            )?;
            let micros = micros
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .expect("cast to microsecond timestamps");
            let out: Decimal128Array = micros.unary(|v| v as i128);
            Arc::new(out.with_precision_and_scale(precision, scale)?)
        } else if let Some(out) = CivilField::of(&field_name)
            .filter(|_| field == ExtractField::Whole)
            .and_then(|civil| civil_field(&values, civil))
        {
            Arc::new(out.with_precision_and_scale(precision, scale)?)
        } else {
            // Seconds and milliseconds of a timestamp from date_part's microseconds (seconds
            // times a million plus the fraction), read at the field's scale.
            let exact_fraction = is_timestamp && field != ExtractField::Whole;
            let part = if exact_fraction {
                "microsecond"
            } else {
                &field_name
            };
            let part = ScalarValue::Utf8(Some(part.to_string()));
            let return_field = self.date_part.return_field_from_args(
                datafusion::logical_expr::ReturnFieldArgs {
                    arg_fields: &args.arg_fields,
                    scalar_arguments: &[Some(&part), None],
                },
            )?;
            let inner = ScalarFunctionArgs {
                args: vec![ColumnarValue::Scalar(part), ColumnarValue::Array(values)],
                arg_fields: args.arg_fields.clone(),
                number_rows: rows,
                return_field,
                config_options: args.config_options.clone(),
            };
            let part_values = self.date_part.invoke_with_args(inner)?.to_array(rows)?;
            if exact_fraction {
                let micros = part_values
                    .as_any()
                    .downcast_ref::<Int32Array>()
                    .expect("date_part gives microseconds as int4");
                let out: Decimal128Array = micros.unary(|v| v as i128);
                Arc::new(out.with_precision_and_scale(precision, scale)?)
            } else {
                datafusion::arrow::compute::cast(
                    &part_values,
                    &ArrowType::Decimal128(precision, scale),
                )?
            }
        };
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

/// Fields that are ±Infinity for an infinite date or timestamp (the others are NULL), as in
/// PostgreSQL 15.
fn infinite_valued(field: &str) -> bool {
    matches!(
        field.to_ascii_lowercase().as_str(),
        "epoch"
            | "julian"
            | "year"
            | "years"
            | "decade"
            | "decades"
            | "century"
            | "centuries"
            | "millennium"
            | "millennia"
            | "isoyear"
    )
}

/// `values` with its infinite dates and timestamps made NULL, and each row's infinity sign
/// (1, -1, or 0 for a finite value or NULL).
fn split_infinite(values: &ArrayRef) -> DfResult<(ArrayRef, Vec<i8>)> {
    use datafusion::arrow::array::{AsArray, BooleanArray};
    use datafusion::arrow::datatypes::{Date32Type, Int64Type};
    let signs: Vec<i8> = match values.data_type() {
        ArrowType::Date32 => values
            .as_primitive::<Date32Type>()
            .iter()
            .map(|d| match d {
                Some(crate::pgtext::DATE_INFINITY) => 1,
                Some(d) if d == -crate::pgtext::DATE_INFINITY - 1 => -1,
                _ => 0,
            })
            .collect(),
        // Infinity is the largest value in any unit (pgtext reads it so).
        ArrowType::Timestamp(_, _) => {
            let raw = datafusion::arrow::compute::cast(values, &ArrowType::Int64)?;
            raw.as_primitive::<Int64Type>()
                .iter()
                .map(|v| match v {
                    Some(i64::MAX) => 1,
                    Some(i64::MIN) => -1,
                    _ => 0,
                })
                .collect()
        }
        _ => vec![0; values.len()],
    };
    if signs.iter().all(|&s| s == 0) {
        return Ok((values.clone(), signs));
    }
    let infinite: BooleanArray = signs.iter().map(|&s| Some(s != 0)).collect();
    let finite = datafusion::arrow::compute::nullif(values, &infinite)?;
    Ok((finite, signs))
}

/// `date_trunc(unit, value)` as DataFusion's, except that a date is truncated as a
/// timestamptz (PostgreSQL has no date_trunc for date: the date becomes a timestamptz at the
/// session's midnight) rather than as a timestamp.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DateTrunc {
    pub signature: Signature,
    pub inner: Arc<ScalarUDF>,
}

impl ScalarUDFImpl for DateTrunc {
    fn name(&self) -> &str {
        "date_trunc"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        let [_, value] = arg_types else {
            return plan_err!("date_trunc takes a unit and a value");
        };
        let value = match value {
            ArrowType::Date32 | ArrowType::Date64 => {
                ArrowType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
            }
            ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View | ArrowType::Null => {
                ArrowType::Timestamp(TimeUnit::Microsecond, None)
            }
            other => other.clone(),
        };
        Ok(vec![ArrowType::Utf8, value])
    }

    fn return_type(&self, arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(arg_types[1].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        self.inner.invoke_with_args(args)
    }
}

/// `date_part(field, value)`: double precision, as in PostgreSQL (DataFusion's gives integers
/// for most fields); seconds and milliseconds of a timestamp keep their fraction.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DatePart {
    pub signature: Signature,
    /// `pg_extract`, whose exact numeric this converts.
    pub extract: Arc<ScalarUDF>,
}

impl ScalarUDFImpl for DatePart {
    fn name(&self) -> &str {
        "date_part"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        self.extract.coerce_types(arg_types)
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let field = match &args.args[0] {
            ColumnarValue::Scalar(f) => extract_field_name(Some(f))?,
            _ => return plan_err!("date_part needs a constant field name"),
        };
        let scale = ExtractField::of(&field).scale(args.arg_fields[1].data_type());
        let return_field = Arc::new(datafusion::arrow::datatypes::Field::new(
            "pg_extract",
            ArrowType::Decimal128(shoal_storage::types::NUMERIC_MAX_PRECISION, scale),
            true,
        ));
        let rows = args.number_rows.max(1);
        let values = args.args[1].to_array(rows)?;
        let (finite, signs) = split_infinite(&values)?;
        let mut args = args;
        args.args[1] = ColumnarValue::Array(finite);
        let exact = self.extract.invoke_with_args(ScalarFunctionArgs {
            return_field,
            ..args
        })?;
        let float = exact.to_array(rows)?;
        let float = datafusion::arrow::compute::cast(&float, &ArrowType::Float64)?;
        if !infinite_valued(&field) || signs.iter().all(|&s| s == 0) {
            return Ok(ColumnarValue::Array(float));
        }
        // date_part of an infinite value: ±Infinity for the fields that grow without bound.
        let float = float
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Float64Array>()
            .expect("cast to float8");
        let out: datafusion::arrow::array::Float64Array = float
            .iter()
            .zip(&signs)
            .map(|(v, &sign)| match sign {
                0 => v,
                s => Some(f64::INFINITY * f64::from(s)),
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}
