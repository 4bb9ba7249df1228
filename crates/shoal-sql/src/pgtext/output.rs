//! Output text: Arrow values and storage values printed as PostgreSQL prints them (for
//! text-format results, COPY TO and error details), timestamptz in the session's time zone,
//! floats with the shortest digits that read back the same, intervals in the default
//! IntervalStyle.

use std::fmt::Write;

use datafusion::arrow::array::*;
use datafusion::arrow::datatypes::{DataType as ArrowType, IntervalUnit, TimeUnit};
use shoal_storage::types::{Interval, Value};

use super::{MICROS_PER_DAY, MICROS_PER_SECOND};
use crate::query::civil_time::civil_from_days;
use crate::timezone::TimeZone;

/// Formats element `row` of `array`, a list, as an int2vector or oidvector prints: the
/// elements separated by spaces (`1 2`).
pub fn format_vector_value(array: &dyn Array, row: usize, out: &mut String) {
    let Some(list) = array.as_any().downcast_ref::<ListArray>() else {
        return format_array_value(array, row, &TimeZone::utc(), out);
    };
    let elements = list.value(row);
    for i in 0..elements.len() {
        if i > 0 {
            out.push(' ');
        }
        format_array_value(elements.as_ref(), i, &TimeZone::utc(), out);
    }
}

/// Formats element `row` of `array` as PostgreSQL text, timestamptz in `zone` (the session's).
/// The caller has checked it is not null.
pub fn format_array_value(array: &dyn Array, row: usize, zone: &TimeZone, out: &mut String) {
    macro_rules! arr {
        ($t:ty) => {
            array
                .as_any()
                .downcast_ref::<$t>()
                .expect("array type matches its data type")
        };
    }
    match array.data_type() {
        ArrowType::Boolean => out.push(if arr!(BooleanArray).value(row) {
            't'
        } else {
            'f'
        }),
        ArrowType::Int8 => write!(out, "{}", arr!(Int8Array).value(row)).unwrap(),
        ArrowType::Int16 => write!(out, "{}", arr!(Int16Array).value(row)).unwrap(),
        ArrowType::Int32 => write!(out, "{}", arr!(Int32Array).value(row)).unwrap(),
        ArrowType::Int64 => write!(out, "{}", arr!(Int64Array).value(row)).unwrap(),
        ArrowType::UInt8 => write!(out, "{}", arr!(UInt8Array).value(row)).unwrap(),
        ArrowType::UInt16 => write!(out, "{}", arr!(UInt16Array).value(row)).unwrap(),
        ArrowType::UInt32 => write!(out, "{}", arr!(UInt32Array).value(row)).unwrap(),
        ArrowType::UInt64 => write!(out, "{}", arr!(UInt64Array).value(row)).unwrap(),
        ArrowType::Float32 => format_float(arr!(Float32Array).value(row) as f64, 6, out),
        ArrowType::Float64 => format_float(arr!(Float64Array).value(row), 15, out),
        ArrowType::Decimal128(_, s) => {
            format_decimal(arr!(Decimal128Array).value(row), *s, false, out)
        }
        ArrowType::Utf8 => out.push_str(arr!(StringArray).value(row)),
        ArrowType::LargeUtf8 => out.push_str(arr!(LargeStringArray).value(row)),
        ArrowType::Utf8View => out.push_str(arr!(StringViewArray).value(row)),
        ArrowType::Binary => format_bytea(arr!(BinaryArray).value(row), out),
        ArrowType::LargeBinary => {
            out.push_str(&crate::numeric::decode(arr!(LargeBinaryArray).value(row)).to_pg_text())
        }
        ArrowType::BinaryView => format_bytea(arr!(BinaryViewArray).value(row), out),
        ArrowType::Date32 => format_date(arr!(Date32Array).value(row), out),
        ArrowType::Timestamp(unit, tz) => {
            let micros = match unit {
                TimeUnit::Second => arr!(TimestampSecondArray).value(row) * MICROS_PER_SECOND,
                TimeUnit::Millisecond => arr!(TimestampMillisecondArray).value(row) * 1000,
                TimeUnit::Microsecond => arr!(TimestampMicrosecondArray).value(row),
                // Infinity keeps its meaning in nanoseconds.
                TimeUnit::Nanosecond => match arr!(TimestampNanosecondArray).value(row) {
                    i64::MAX => i64::MAX,
                    i64::MIN => i64::MIN,
                    nanos => nanos.div_euclid(1000),
                },
            };
            format_timestamp(micros, tz.is_some().then_some(zone), out)
        }
        ArrowType::Interval(IntervalUnit::MonthDayNano) => {
            let v = arr!(IntervalMonthDayNanoArray).value(row);
            format_interval(
                &Interval {
                    months: v.months,
                    days: v.days,
                    micros: v.nanoseconds / 1000,
                },
                out,
            )
        }
        ArrowType::Interval(IntervalUnit::DayTime) => {
            let v = arr!(IntervalDayTimeArray).value(row);
            format_interval(
                &Interval {
                    months: 0,
                    days: v.days,
                    micros: v.milliseconds as i64 * 1000,
                },
                out,
            )
        }
        ArrowType::Interval(IntervalUnit::YearMonth) => {
            let v = arr!(IntervalYearMonthArray).value(row);
            format_interval(
                &Interval {
                    months: v,
                    days: 0,
                    micros: 0,
                },
                out,
            )
        }
        // Durations come from subtracting timestamps, which PostgreSQL expresses in days and
        // a time below a day ("64 days 01:00:00"), as justify_hours does.
        ArrowType::Duration(TimeUnit::Microsecond) => {
            let v = arr!(DurationMicrosecondArray).value(row);
            format_interval(&days_and_time(v), out)
        }
        ArrowType::Duration(TimeUnit::Nanosecond) => {
            let v = arr!(DurationNanosecondArray).value(row);
            format_interval(&days_and_time(v / 1000), out)
        }
        ArrowType::Time64(TimeUnit::Microsecond) => {
            let v = arr!(Time64MicrosecondArray).value(row);
            format_time(v, out)
        }
        ArrowType::Time64(TimeUnit::Nanosecond) => {
            let v = arr!(Time64NanosecondArray).value(row);
            format_time(v / 1000, out)
        }
        ArrowType::List(_) => {
            let list = arr!(ListArray).value(row);
            format_pg_array(list.as_ref(), zone, out)
        }
        ArrowType::Struct(_) => format_record(arr!(StructArray), row, zone, out),
        ArrowType::Dictionary(_, _) => {
            let formatter = datafusion::arrow::util::display::ArrayFormatter::try_new(
                array,
                &Default::default(),
            );
            if let Ok(f) = formatter {
                write!(out, "{}", f.value(row)).unwrap();
            }
        }
        _ => {
            let formatter = datafusion::arrow::util::display::ArrayFormatter::try_new(
                array,
                &Default::default(),
            );
            if let Ok(f) = formatter {
                write!(out, "{}", f.value(row)).unwrap();
            }
        }
    }
}

/// PostgreSQL array literal output: {1,2,NULL}; strings quoted when needed. The elements of a
/// nested list are its sub-arrays, written in place: `{{1,2},{3,4}}`.
fn format_pg_array(values: &dyn Array, zone: &TimeZone, out: &mut String) {
    let nested = matches!(values.data_type(), ArrowType::List(_));
    out.push('{');
    for i in 0..values.len() {
        if i > 0 {
            out.push(',');
        }
        if super::is_null_at(values, i) {
            out.push_str("NULL");
            continue;
        }
        let mut item = String::new();
        format_array_value(values, i, zone, &mut item);
        if nested {
            out.push_str(&item);
        } else {
            push_array_item(&item, out);
        }
    }
    out.push('}');
}

/// One element of an array's text, quoted when it is empty, reads as NULL, or holds a
/// delimiter, a brace, a quote, a backslash or white space.
fn push_array_item(item: &str, out: &mut String) {
    let needs_quotes = item.is_empty()
        || item.eq_ignore_ascii_case("null")
        || item
            .chars()
            .any(|c| matches!(c, ',' | '{' | '}' | '"' | '\\') || is_pg_space(c));
    if needs_quotes {
        out.push('"');
        for c in item.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    } else {
        out.push_str(item);
    }
}

/// A row value as PostgreSQL writes a record: `(1,"a b",)`, a NULL field left empty, a field
/// quoted when it is empty or holds a delimiter, a quote, a backslash or white space.
fn format_record(record: &StructArray, row: usize, zone: &TimeZone, out: &mut String) {
    out.push('(');
    for (i, field) in record.columns().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if super::is_null_at(field.as_ref(), row) {
            continue;
        }
        let mut item = String::new();
        format_array_value(field.as_ref(), row, zone, &mut item);
        let needs_quotes = item.is_empty()
            || item
                .chars()
                .any(|c| matches!(c, ',' | '(' | ')' | '"' | '\\') || is_pg_space(c));
        if !needs_quotes {
            out.push_str(&item);
            continue;
        }
        out.push('"');
        for c in item.chars() {
            if c == '"' || c == '\\' {
                out.push(c);
            }
            out.push(c);
        }
        out.push('"');
    }
    out.push(')');
}

/// White space as PostgreSQL's array and record output see it (C's isspace).
fn is_pg_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

/// Shortest round-trip digits, laid out like PostgreSQL (extra_float_digits = 1): fixed notation
/// for decimal exponents in [-4, `max_exp`), scientific with a two-digit exponent otherwise.
pub fn format_float(v: f64, max_exp: i32, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
        return;
    }
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    // For float4 (max_exp 6) the shortest digits must be those of the f32 value.
    let sci = if max_exp == 6 {
        format!("{:e}", v as f32)
    } else {
        format!("{v:e}")
    };
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("exponent is an integer");
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    if negative {
        out.push('-');
    }
    if exp < -4 || exp >= max_exp {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs()).unwrap();
    } else if exp < 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
        out.push_str(&digits);
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', int_len - digits.len()));
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    }
}

/// Formats a decimal; `trim` drops trailing fractional zeros (used for unconstrained numeric,
/// stored at a fixed scale but printed as entered).
pub fn format_decimal(mantissa: i128, scale: i8, trim: bool, out: &mut String) {
    if scale <= 0 {
        write!(out, "{}", mantissa * 10i128.pow((-scale) as u32)).unwrap();
        return;
    }
    let scale = scale as u32;
    let abs = mantissa.unsigned_abs();
    let div = 10u128.pow(scale);
    if mantissa < 0 {
        out.push('-');
    }
    write!(out, "{}", abs / div).unwrap();
    let mut frac = format!("{:0width$}", abs % div, width = scale as usize);
    if trim {
        while frac.ends_with('0') {
            frac.pop();
        }
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(&frac);
    }
}

pub fn format_bytea(b: &[u8], out: &mut String) {
    out.push_str("\\x");
    for byte in b {
        write!(out, "{byte:02x}").unwrap();
    }
}

pub fn format_date(days: i32, out: &mut String) {
    match days {
        i32::MAX => out.push_str("infinity"),
        i32::MIN => out.push_str("-infinity"),
        _ => {
            let (year, month, day) = civil_from_days(i64::from(days));
            write_year_month_day(year, month, day, out);
            push_era(year, out);
        }
    }
}

/// `YYYY-MM-DD` of an astronomical year, the era left to the caller (`BC` comes last).
fn write_year_month_day(year: i64, month: u32, day: u32, out: &mut String) {
    let year = if year > 0 { year } else { 1 - year };
    write!(out, "{year:04}-{month:02}-{day:02}").unwrap();
}

fn push_era(year: i64, out: &mut String) {
    if year <= 0 {
        out.push_str(" BC");
    }
}

pub fn format_time(micros: i64, out: &mut String) {
    let secs = micros.div_euclid(MICROS_PER_SECOND);
    let frac = micros.rem_euclid(MICROS_PER_SECOND);
    write!(
        out,
        "{:02}:{:02}:{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
    .unwrap();
    format_fraction(frac, out);
}

fn format_fraction(frac_micros: i64, out: &mut String) {
    if frac_micros != 0 {
        let mut s = format!("{frac_micros:06}");
        while s.ends_with('0') {
            s.pop();
        }
        out.push('.');
        out.push_str(&s);
    }
}

/// Timestamps print as ISO with a space; a timestamptz (`zone` given) prints as the wall clock
/// of the session's zone followed by that zone's offset at the instant ("+01", "+05:30").
pub fn format_timestamp(micros: i64, zone: Option<&TimeZone>, out: &mut String) {
    if micros == i64::MAX {
        out.push_str("infinity");
        return;
    }
    if micros == i64::MIN {
        out.push_str("-infinity");
        return;
    }
    let offset_seconds = zone.map_or(0, |z| z.offset_at_utc(micros));
    let local = micros.saturating_add(offset_seconds as i64 * MICROS_PER_SECOND);
    let (year, month, day) = civil_from_days(local.div_euclid(MICROS_PER_DAY));
    write_year_month_day(year, month, day, out);
    let time_of_day = local.rem_euclid(MICROS_PER_DAY);
    out.push(' ');
    format_time(time_of_day, out);
    if zone.is_some() {
        crate::timezone::push_offset(offset_seconds, out);
    }
    push_era(year, out);
}

/// A length of time as whole days and the rest; both carry the sign of `micros`.
fn days_and_time(micros: i64) -> Interval {
    Interval {
        months: 0,
        days: (micros / MICROS_PER_DAY) as i32,
        micros: micros % MICROS_PER_DAY,
    }
}

/// PostgreSQL's default IntervalStyle (postgres): "1 year 2 mons 3 days 04:05:06". A positive
/// field right after a negative one carries a '+' ("-1 mons +2 days -03:00:00"), as
/// EncodeInterval writes it.
pub fn format_interval(i: &Interval, out: &mut String) {
    let start = out.len();
    // Whether the last field written was negative.
    let mut after_negative = false;
    let mut field = |n: i64, unit: &str, out: &mut String| {
        if n == 0 {
            return;
        }
        if out.len() > start {
            out.push(' ');
        }
        let sign = if after_negative && n > 0 { "+" } else { "" };
        // Only exactly 1 is singular: PostgreSQL writes "-1 days".
        let plural = if n == 1 { "" } else { "s" };
        write!(out, "{sign}{n} {unit}{plural}").unwrap();
        after_negative = n < 0;
    };
    field(i64::from(i.months / 12), "year", out);
    field(i64::from(i.months % 12), "mon", out);
    field(i64::from(i.days), "day", out);
    let nothing_written = out.len() == start;
    if i.micros != 0 || nothing_written {
        if !nothing_written {
            out.push(' ');
        }
        if i.micros < 0 {
            out.push('-');
        } else if after_negative {
            out.push('+');
        }
        let abs = i.micros.unsigned_abs() as i64;
        let secs = abs / MICROS_PER_SECOND;
        write!(
            out,
            "{:02}:{:02}:{:02}",
            secs / 3600,
            (secs / 60) % 60,
            secs % 60
        )
        .unwrap();
        format_fraction(abs % MICROS_PER_SECOND, out);
    }
}

/// A storage value as PostgreSQL text (for COPY TO and errors' Key (...)=(...) details),
/// timestamptz in `zone`.
pub fn format_value(v: &Value, zone: &TimeZone) -> Option<String> {
    let mut out = String::new();
    write_value(v, zone, &mut out).then_some(out)
}

/// Appends a storage value's PostgreSQL text to `out`; false (and nothing appended) for NULL.
pub fn write_value(v: &Value, zone: &TimeZone, out: &mut String) -> bool {
    match v {
        Value::Null => return false,
        Value::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Value::Int16(x) => write!(out, "{x}").unwrap(),
        Value::Int32(x) => write!(out, "{x}").unwrap(),
        Value::Int64(x) => write!(out, "{x}").unwrap(),
        Value::Float32(x) => format_float(*x as f64, 6, out),
        Value::Float64(x) => format_float(*x, 15, out),
        Value::Numeric { mantissa, scale } => format_decimal(*mantissa, *scale as i8, false, out),
        Value::Text(s) => out.push_str(s),
        Value::Bytea(b) => format_bytea(b, out),
        Value::Date(d) => format_date(*d, out),
        Value::Timestamp(t) => format_timestamp(*t, None, out),
        Value::TimestampTz(t) => format_timestamp(*t, Some(zone), out),
        Value::Interval(i) => format_interval(i, out),
        Value::Uuid(u) => out.push_str(&crate::types::format_uuid(*u)),
        Value::Time(t) => format_time(*t, out),
        Value::Array(elements) => {
            out.push('{');
            for (i, e) in elements.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let mut item = String::new();
                if write_value(e, zone, &mut item) {
                    push_array_item(&item, out);
                } else {
                    out.push_str("NULL");
                }
            }
            out.push('}');
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(v: f64, max_exp: i32) -> String {
        let mut s = String::new();
        format_float(v, max_exp, &mut s);
        s
    }

    #[test]
    fn floats_print_like_postgres() {
        assert_eq!(float(1.5, 15), "1.5");
        assert_eq!(float(100.0, 15), "100");
        assert_eq!(float(1e20, 15), "1e+20");
        assert_eq!(float(0.1 + 0.2, 15), "0.30000000000000004");
        assert_eq!(float(0.0001, 15), "0.0001");
        assert_eq!(float(0.00001, 15), "1e-05");
        assert_eq!(float(-2.5e-7, 15), "-2.5e-07");
        assert_eq!(float(1e6, 6), "1e+06");
        assert_eq!(float(123456.0, 6), "123456");
    }
}
