//! PostgreSQL's text representation of values: parsing input text into storage values (used
//! for text-format parameters, COPY FROM and literal coercion) and formatting Arrow values as
//! PostgreSQL prints them (used for text-format results and COPY TO). Output must match
//! PostgreSQL byte for byte, since tests and applications compare strings.

use std::fmt::Write;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use datafusion::arrow::array::*;
use datafusion::arrow::datatypes::{DataType as ArrowType, IntervalUnit, TimeUnit};
use shoal_storage::types::{
    DataType, Interval, Value, NUMERIC_DEFAULT_SCALE, NUMERIC_MAX_PRECISION,
};

use crate::error::{code, SqlError, SqlResult};
use crate::timezone::TimeZone;
use crate::types::{format_type, pad_char, parse_uuid};

const UNIX_EPOCH_DAYS_FROM_CE: i32 = 719_163;
const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

fn invalid(type_name: &str, s: &str) -> SqlError {
    SqlError::new(
        code::INVALID_TEXT_REPRESENTATION,
        format!("invalid input syntax for type {type_name}: \"{s}\""),
    )
}

fn out_of_range(type_name: &str, s: &str) -> SqlError {
    SqlError::new(
        code::NUMERIC_VALUE_OUT_OF_RANGE,
        format!("value \"{s}\" is out of range for type {type_name}"),
    )
}

/// Parses PostgreSQL input text for a column of type `t`; a timestamptz written without an
/// offset is read in `zone`, the session's time zone.
pub fn parse_value(s: &str, t: &DataType, zone: &TimeZone) -> SqlResult<Value> {
    Ok(match t {
        DataType::Bool => Value::Bool(parse_bool(s)?),
        DataType::Int16 => Value::Int16(parse_smallint(s)?),
        DataType::Int32 => Value::Int32(parse_integer(s)?),
        DataType::Int64 => Value::Int64(parse_bigint(s)?),
        DataType::Float32 => Value::Float32(parse_real(s)?),
        DataType::Float64 => Value::Float64(parse_double(s)?),
        DataType::Numeric { precision, scale } => {
            let target_scale = t.numeric_scale();
            let mantissa = parse_numeric(s, target_scale)?;
            check_numeric_precision(
                mantissa,
                precision.unwrap_or(NUMERIC_MAX_PRECISION),
                scale.unwrap_or(target_scale),
            )?;
            Value::Numeric {
                mantissa,
                scale: target_scale,
            }
        }
        DataType::Text => Value::Text(s.to_string()),
        DataType::Varchar(limit) => Value::Text(check_varchar(s, *limit, t)?),
        DataType::Char(n) => Value::Text(check_char(s, *n)?),
        DataType::Bytea => Value::Bytea(parse_bytea(s)?),
        DataType::Date => Value::Date(parse_date(s)?),
        DataType::Timestamp => Value::Timestamp(parse_timestamp(s)?),
        DataType::TimestampTz => Value::TimestampTz(parse_timestamptz(s, zone)?),
        DataType::Interval => Value::Interval(parse_interval(s)?),
        DataType::Uuid => Value::Uuid(parse_uuid(s)?),
    })
}

pub fn parse_bool(s: &str) -> SqlResult<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "t" | "true" | "y" | "yes" | "on" | "1" => Ok(true),
        "f" | "false" | "n" | "no" | "off" | "0" => Ok(false),
        _ => Err(invalid("boolean", s)),
    }
}

pub fn parse_smallint(s: &str) -> SqlResult<i16> {
    i16::try_from(parse_int(s, "smallint")?).map_err(|_| out_of_range("smallint", s))
}

pub fn parse_integer(s: &str) -> SqlResult<i32> {
    i32::try_from(parse_int(s, "integer")?).map_err(|_| out_of_range("integer", s))
}

pub fn parse_bigint(s: &str) -> SqlResult<i64> {
    parse_int(s, "bigint")
}

pub fn parse_real(s: &str) -> SqlResult<f32> {
    Ok(parse_float(s, "real")? as f32)
}

pub fn parse_double(s: &str) -> SqlResult<f64> {
    parse_float(s, "double precision")
}

fn parse_int(s: &str, type_name: &str) -> SqlResult<i64> {
    let t = s.trim();
    if t.is_empty()
        || !t
            .trim_start_matches(['-', '+'])
            .bytes()
            .all(|b| b.is_ascii_digit())
    {
        return Err(invalid(type_name, s));
    }
    t.parse::<i64>().map_err(|_| out_of_range(type_name, s))
}

fn parse_float(s: &str, type_name: &str) -> SqlResult<f64> {
    let t = s.trim();
    // Plain decimal numbers, the common case, need no lower-cased copy for the checks below.
    if t.bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'))
    {
        if let Ok(v) = t.parse::<f64>() {
            if v.is_finite() {
                return Ok(v);
            }
        }
    }
    match t.to_ascii_lowercase().as_str() {
        "nan" => return Ok(f64::NAN),
        "infinity" | "inf" | "+infinity" | "+inf" => return Ok(f64::INFINITY),
        "-infinity" | "-inf" => return Ok(f64::NEG_INFINITY),
        _ => {}
    }
    let v: f64 = t.parse().map_err(|_| invalid(type_name, s))?;
    if v.is_infinite() {
        return Err(SqlError::new(
            code::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("\"{s}\" is out of range for type {type_name}"),
        ));
    }
    Ok(v)
}

/// Parses a decimal string into a mantissa at `scale`, rounding half away from zero.
pub fn parse_numeric(s: &str, scale: u8) -> SqlResult<i128> {
    let t = s.trim();
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa_part, exponent) = match digits.find(['e', 'E']) {
        Some(i) => (
            &digits[..i],
            digits[i + 1..]
                .parse::<i32>()
                .map_err(|_| invalid("numeric", s))?,
        ),
        None => (digits, 0),
    };
    let (int_part, frac_part) = match mantissa_part.find('.') {
        Some(i) => (&mantissa_part[..i], &mantissa_part[i + 1..]),
        None => (mantissa_part, ""),
    };
    if (int_part.is_empty() && frac_part.is_empty())
        || !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(invalid("numeric", s));
    }
    let overflow = || SqlError::new(code::NUMERIC_VALUE_OUT_OF_RANGE, "numeric field overflow");
    // All digits as one integer, with the decimal point `frac_len - exponent` places from the right.
    let all_digits = format!("{int_part}{frac_part}");
    let all_digits = all_digits.trim_start_matches('0');
    let point_from_right = frac_part.len() as i64 - exponent as i64;
    let shift = scale as i64 - point_from_right;
    let mut mantissa: i128 = if all_digits.is_empty() {
        0
    } else if shift >= 0 {
        let base: i128 = all_digits.parse().map_err(|_| overflow())?;
        base.checked_mul(10i128.checked_pow(shift as u32).ok_or_else(overflow)?)
            .ok_or_else(overflow)?
    } else {
        let drop = (-shift) as usize;
        if drop > all_digits.len() {
            0
        } else {
            let keep = &all_digits[..all_digits.len() - drop];
            let base: i128 = if keep.is_empty() {
                0
            } else {
                keep.parse().map_err(|_| overflow())?
            };
            let round_up = all_digits.as_bytes()[all_digits.len() - drop] >= b'5';
            base + round_up as i128
        }
    };
    if negative {
        mantissa = -mantissa;
    }
    Ok(mantissa)
}

pub fn check_numeric_precision(mantissa: i128, precision: u8, scale: u8) -> SqlResult<()> {
    let limit = 10i128.checked_pow(precision as u32).unwrap_or(i128::MAX);
    if mantissa.unsigned_abs() >= limit as u128 {
        return Err(SqlError::new(code::NUMERIC_VALUE_OUT_OF_RANGE, "numeric field overflow")
            .with_detail(format!(
                "A field with precision {precision}, scale {scale} must round to an absolute value less than {}.",
                if precision > scale { format!("10^{}", precision - scale) } else { "1".to_string() }
            )));
    }
    Ok(())
}

/// varchar(n) rejects longer strings, except that excess trailing spaces are cut silently
/// (SQL standard behaviour that PostgreSQL follows).
pub fn check_varchar(s: &str, limit: Option<u32>, t: &DataType) -> SqlResult<String> {
    let Some(n) = limit else {
        return Ok(s.to_string());
    };
    let len = s.chars().count();
    if len <= n as usize {
        return Ok(s.to_string());
    }
    let cut: String = s.chars().take(n as usize).collect();
    if s.chars().skip(n as usize).all(|c| c == ' ') {
        return Ok(cut);
    }
    Err(SqlError::new(
        code::STRING_DATA_RIGHT_TRUNCATION,
        format!("value too long for type {}", format_type(t)),
    ))
}

pub fn check_char(s: &str, n: u32) -> SqlResult<String> {
    let len = s.chars().count();
    if len > n as usize {
        if s.chars().skip(n as usize).all(|c| c == ' ') {
            return Ok(s.chars().take(n as usize).collect());
        }
        return Err(SqlError::new(
            code::STRING_DATA_RIGHT_TRUNCATION,
            format!("value too long for type character({n})"),
        ));
    }
    Ok(pad_char(s, n))
}

pub fn parse_bytea(s: &str) -> SqlResult<Vec<u8>> {
    if let Some(hex) = s.strip_prefix("\\x") {
        let hex: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if hex.len() % 2 != 0 {
            return Err(invalid("bytea", s));
        }
        let nibble = |b: u8| -> SqlResult<u8> {
            (b as char)
                .to_digit(16)
                .map(|d| d as u8)
                .ok_or_else(|| invalid("bytea", s))
        };
        return hex
            .chunks(2)
            .map(|p| Ok(nibble(p[0])? << 4 | nibble(p[1])?))
            .collect();
    }
    // Escape format: backslash followed by three octal digits or another backslash.
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
            } else if i + 3 < bytes.len() + 0
                && bytes[i + 1..i + 4]
                    .iter()
                    .all(|b| (b'0'..=b'7').contains(b))
            {
                let v = (bytes[i + 1] - b'0') as u32 * 64
                    + (bytes[i + 2] - b'0') as u32 * 8
                    + (bytes[i + 3] - b'0') as u32;
                if v > 255 {
                    return Err(invalid("bytea", s));
                }
                out.push(v as u8);
                i += 4;
            } else {
                return Err(invalid("bytea", s));
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

fn date_out_of_range(s: &str) -> SqlError {
    SqlError::new(
        code::DATETIME_FIELD_OVERFLOW,
        format!("date/time field value out of range: \"{s}\""),
    )
}

pub fn parse_date(s: &str) -> SqlResult<i32> {
    if let Some(d) = plain_date(s.as_bytes()) {
        return Ok(days_from_date(d));
    }
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "epoch" => return Ok(0),
        "today" => return Ok(days_from_date(chrono::Utc::now().date_naive())),
        _ => {}
    }
    let date_part = t.split([' ', 'T']).next().unwrap_or(t);
    match NaiveDate::parse_from_str(date_part, "%Y-%m-%d") {
        Ok(d) => Ok(days_from_date(d)),
        Err(_) => {
            let parts: Vec<&str> = date_part.split('-').collect();
            if parts.len() == 3
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            {
                Err(date_out_of_range(s))
            } else {
                Err(SqlError::new(
                    code::INVALID_DATETIME_FORMAT,
                    format!("invalid input syntax for type date: \"{s}\""),
                ))
            }
        }
    }
}

pub fn days_from_date(d: NaiveDate) -> i32 {
    d.num_days_from_ce() - UNIX_EPOCH_DAYS_FROM_CE
}

pub fn date_from_days(days: i32) -> Option<NaiveDate> {
    NaiveDate::from_num_days_from_ce_opt(days + UNIX_EPOCH_DAYS_FROM_CE)
}

/// Parses a timestamp (without time zone; a zone in the text is ignored, as in PostgreSQL).
/// Returns microseconds since the epoch.
pub fn parse_timestamp(s: &str) -> SqlResult<i64> {
    parse_timestamp_in(s, None)
}

/// Parses a timestamptz: an explicit offset or zone name in the text is honoured, otherwise
/// the time is read in `zone` (the session's). Returns UTC microseconds since the epoch.
pub fn parse_timestamptz(s: &str, zone: &TimeZone) -> SqlResult<i64> {
    parse_timestamp_in(s, Some(zone))
}

fn parse_timestamp_in(s: &str, session_zone: Option<&TimeZone>) -> SqlResult<i64> {
    let type_name = if session_zone.is_some() {
        "timestamp with time zone"
    } else {
        "timestamp"
    };
    if let Some(micros) = plain_timestamp(s.as_bytes()) {
        return Ok(match session_zone {
            Some(zone) => zone.local_to_utc(micros),
            None => micros,
        });
    }
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "epoch" => return Ok(0),
        "now" => return Ok(chrono::Utc::now().timestamp_micros()),
        "infinity" => return Ok(i64::MAX),
        "-infinity" => return Ok(i64::MIN),
        _ => {}
    }
    let bad = || {
        SqlError::new(
            code::INVALID_DATETIME_FORMAT,
            format!("invalid input syntax for type {type_name}: \"{s}\""),
        )
    };
    // Split off a trailing zone: "Z", "+hh", "+hh:mm", "+hhmm", " UTC", " Europe/Berlin".
    let (body, input_zone) = split_zone(t).ok_or_else(bad)?;
    let body = body.trim();
    let naive = if body.len() <= 10 && !body.contains(':') {
        let d = NaiveDate::parse_from_str(body, "%Y-%m-%d").map_err(|_| bad())?;
        d.and_time(NaiveTime::MIN)
    } else {
        let normalized = body.replacen('T', " ", 1);
        NaiveDateTime::parse_from_str(&normalized, "%Y-%m-%d %H:%M:%S%.f")
            .or_else(|_| NaiveDateTime::parse_from_str(&normalized, "%Y-%m-%d %H:%M"))
            .map_err(|_| {
                if normalized.len() >= 10
                    && NaiveDate::parse_from_str(&normalized[..10], "%Y-%m-%d").is_err()
                    && normalized[..10].split('-').count() == 3
                {
                    date_out_of_range(s)
                } else {
                    bad()
                }
            })?
    };
    let micros = naive.and_utc().timestamp_micros();
    let Some(session_zone) = session_zone else {
        return Ok(micros);
    };
    Ok(match input_zone {
        InputZone::Offset(seconds_east) => micros - seconds_east as i64 * MICROS_PER_SECOND,
        InputZone::Named(zone) => zone.local_to_utc(micros),
        InputZone::Session => session_zone.local_to_utc(micros),
    })
}

/// The zone written at the end of a timestamp's text, if any.
enum InputZone {
    /// Seconds east of Greenwich.
    Offset(i32),
    Named(TimeZone),
    Session,
}

fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |acc, d| {
        d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0'))
    })
}

/// `YYYY-MM-DD`, the shape bulk loads are made of, without chrono's format parser.
fn plain_date(b: &[u8]) -> Option<NaiveDate> {
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    NaiveDate::from_ymd_opt(
        digits(&b[0..4])? as i32,
        digits(&b[5..7])?,
        digits(&b[8..10])?,
    )
}

/// `YYYY-MM-DD HH:MM:SS` as microseconds, likewise. Anything else (fractions, zones, other
/// layouts) returns None and takes the general path.
fn plain_timestamp(b: &[u8]) -> Option<i64> {
    if b.len() != 19 || !(b[10] == b' ' || b[10] == b'T') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let date = plain_date(&b[..10])?;
    let time = NaiveTime::from_hms_opt(
        digits(&b[11..13])?,
        digits(&b[14..16])?,
        digits(&b[17..19])?,
    )?;
    Some(date.and_time(time).and_utc().timestamp_micros())
}

fn split_zone(t: &str) -> Option<(&str, InputZone)> {
    if let Some(b) = t.strip_suffix('Z').or_else(|| t.strip_suffix('z')) {
        return Some((b, InputZone::Offset(0)));
    }
    for suffix in [" UTC", " utc", " GMT", "+00", "-00"] {
        if let Some(b) = t.strip_suffix(suffix) {
            if suffix.starts_with(' ') || b.contains(':') {
                return Some((b, InputZone::Offset(0)));
            }
        }
    }
    // A zone name after the time: "2024-03-31 02:30 Europe/Berlin".
    if let Some((body, name)) = t.rsplit_once(' ') {
        if name.starts_with(|c: char| c.is_ascii_alphabetic()) && body.contains(':') {
            let zone = TimeZone::from_name(name)?;
            return Some((body, InputZone::Named(zone)));
        }
    }
    // A sign after the time part (position > 10 so a date's dashes are not taken for it).
    if let Some(pos) = t.rfind(['+', '-']) {
        if pos > 10 && t[..pos].contains(':') {
            let zone = &t[pos + 1..];
            let sign = if &t[pos..pos + 1] == "-" { -1 } else { 1 };
            let digits: String = zone.chars().filter(|c| *c != ':').collect();
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let (h, m, sec) = match digits.len() {
                1 | 2 => (digits.parse::<i32>().ok()?, 0, 0),
                4 => (
                    digits[..2].parse::<i32>().ok()?,
                    digits[2..].parse::<i32>().ok()?,
                    0,
                ),
                6 => (
                    digits[..2].parse::<i32>().ok()?,
                    digits[2..4].parse::<i32>().ok()?,
                    digits[4..].parse::<i32>().ok()?,
                ),
                _ => return None,
            };
            let offset = sign * (h * 3600 + m * 60 + sec);
            return Some((&t[..pos], InputZone::Offset(offset)));
        }
    }
    Some((t, InputZone::Session))
}

/// Parses PostgreSQL interval input: unit words ("1 year 2 mons 3 days 04:05:06"), a bare
/// hh:mm:ss, "ago", and a number with no unit meaning seconds.
pub fn parse_interval(s: &str) -> SqlResult<Interval> {
    let bad = || {
        SqlError::new(
            code::INVALID_DATETIME_FORMAT,
            format!("invalid input syntax for type interval: \"{s}\""),
        )
    };
    let mut out = Interval::default();
    let lower = s.trim().to_ascii_lowercase();
    let mut tokens: Vec<&str> = lower.split_whitespace().collect();
    let ago = tokens.last() == Some(&"ago");
    if ago {
        tokens.pop();
    }
    if tokens.is_empty() {
        return Err(bad());
    }
    let mut i = 0;
    while i < tokens.len() {
        let tok = tokens[i].trim_start_matches('@');
        if tok.is_empty() {
            i += 1;
            continue;
        }
        if tok.contains(':') {
            let negative = tok.starts_with('-');
            let parts: Vec<&str> = tok.trim_start_matches(['-', '+']).split(':').collect();
            let h: i64 = parts.first().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
            let m: i64 = parts.get(1).and_then(|p| p.parse().ok()).ok_or_else(bad)?;
            let sec: f64 = parts
                .get(2)
                .map(|p| p.parse().map_err(|_| bad()))
                .transpose()?
                .unwrap_or(0.0);
            let micros = h * 3600 * MICROS_PER_SECOND
                + m * 60 * MICROS_PER_SECOND
                + (sec * 1e6).round() as i64;
            out.micros += if negative { -micros } else { micros };
            i += 1;
            continue;
        }
        let (num_str, unit_inline) = split_number_unit(tok);
        let n: f64 = num_str.parse().map_err(|_| bad())?;
        let unit = if !unit_inline.is_empty() {
            unit_inline.to_string()
        } else if i + 1 < tokens.len()
            && !tokens[i + 1].starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+')
        {
            i += 1;
            tokens[i].to_string()
        } else {
            "second".to_string()
        };
        add_interval_unit(&mut out, n, unit.trim_end_matches(','), bad)?;
        i += 1;
    }
    if ago {
        out = Interval {
            months: -out.months,
            days: -out.days,
            micros: -out.micros,
        };
    }
    Ok(out)
}

fn split_number_unit(tok: &str) -> (&str, &str) {
    let end = tok
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || *c == '.' || ((*c == '-' || *c == '+') && *i == 0)))
        .map(|(i, _)| i)
        .unwrap_or(tok.len());
    (&tok[..end], &tok[end..])
}

fn add_interval_unit(
    out: &mut Interval,
    n: f64,
    unit: &str,
    bad: impl Fn() -> SqlError,
) -> SqlResult<()> {
    let micros = |secs: f64| (secs * 1e6).round() as i64;
    match unit {
        "y" | "yr" | "yrs" | "year" | "years" => out.months += (n * 12.0).round() as i32,
        "mon" | "mons" | "month" | "months" => {
            out.months += n.trunc() as i32;
            out.days += (n.fract() * 30.0).round() as i32;
        }
        "w" | "week" | "weeks" => out.days += (n * 7.0).round() as i32,
        "d" | "day" | "days" => {
            out.days += n.trunc() as i32;
            out.micros += micros(n.fract() * 86400.0);
        }
        "h" | "hr" | "hrs" | "hour" | "hours" => out.micros += micros(n * 3600.0),
        "m" | "min" | "mins" | "minute" | "minutes" => out.micros += micros(n * 60.0),
        "s" | "sec" | "secs" | "second" | "seconds" => out.micros += micros(n),
        "ms" | "millisecond" | "milliseconds" => out.micros += micros(n / 1000.0),
        "us" | "microsecond" | "microseconds" => out.micros += n.round() as i64,
        "decade" | "decades" => out.months += (n * 120.0).round() as i32,
        "century" | "centuries" => out.months += (n * 1200.0).round() as i32,
        _ => return Err(bad()),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Output

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
        ArrowType::Decimal128(p, s) => {
            let trim = *p == NUMERIC_MAX_PRECISION && *s == NUMERIC_DEFAULT_SCALE as i8;
            format_decimal(arr!(Decimal128Array).value(row), *s, trim, out)
        }
        ArrowType::Utf8 => out.push_str(arr!(StringArray).value(row)),
        ArrowType::LargeUtf8 => out.push_str(arr!(LargeStringArray).value(row)),
        ArrowType::Utf8View => out.push_str(arr!(StringViewArray).value(row)),
        ArrowType::Binary => format_bytea(arr!(BinaryArray).value(row), out),
        ArrowType::LargeBinary => format_bytea(arr!(LargeBinaryArray).value(row), out),
        ArrowType::BinaryView => format_bytea(arr!(BinaryViewArray).value(row), out),
        ArrowType::Date32 => format_date(arr!(Date32Array).value(row), out),
        ArrowType::Timestamp(unit, tz) => {
            let micros = match unit {
                TimeUnit::Second => arr!(TimestampSecondArray).value(row) * MICROS_PER_SECOND,
                TimeUnit::Millisecond => arr!(TimestampMillisecondArray).value(row) * 1000,
                TimeUnit::Microsecond => arr!(TimestampMicrosecondArray).value(row),
                TimeUnit::Nanosecond => arr!(TimestampNanosecondArray).value(row) / 1000,
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

/// PostgreSQL array literal output: {1,2,NULL}; strings quoted when needed.
fn format_pg_array(values: &dyn Array, zone: &TimeZone, out: &mut String) {
    out.push('{');
    for i in 0..values.len() {
        if i > 0 {
            out.push(',');
        }
        if values.is_null(i) {
            out.push_str("NULL");
            continue;
        }
        let mut item = String::new();
        format_array_value(values, i, zone, &mut item);
        let needs_quotes = item.is_empty()
            || item.eq_ignore_ascii_case("null")
            || item
                .chars()
                .any(|c| matches!(c, ',' | '{' | '}' | '"' | '\\' | ' '));
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
            out.push_str(&item);
        }
    }
    out.push('}');
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
    match date_from_days(days) {
        Some(d) if d.year() > 0 => {
            write!(out, "{:04}-{:02}-{:02}", d.year(), d.month(), d.day()).unwrap()
        }
        Some(d) => write!(
            out,
            "{:04}-{:02}-{:02} BC",
            1 - d.year(),
            d.month(),
            d.day()
        )
        .unwrap(),
        None => out.push_str(if days > 0 { "infinity" } else { "-infinity" }),
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
    let secs = local.div_euclid(MICROS_PER_SECOND);
    let frac = local.rem_euclid(MICROS_PER_SECOND);
    let Some(dt) = DateTime::from_timestamp(secs, 0) else {
        out.push_str("infinity");
        return;
    };
    let d = dt.naive_utc();
    let (year, bc) = if d.year() > 0 {
        (d.year(), false)
    } else {
        (1 - d.year(), true)
    };
    write!(
        out,
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        year,
        d.month(),
        d.day(),
        d.hour(),
        d.minute(),
        d.second()
    )
    .unwrap();
    format_fraction(frac, out);
    if zone.is_some() {
        crate::timezone::push_offset(offset_seconds, out);
    }
    if bc {
        out.push_str(" BC");
    }
}

/// A length of time as whole days and the rest; both carry the sign of `micros`.
fn days_and_time(micros: i64) -> Interval {
    Interval {
        months: 0,
        days: (micros / MICROS_PER_DAY) as i32,
        micros: micros % MICROS_PER_DAY,
    }
}

/// PostgreSQL's default IntervalStyle (postgres): "1 year 2 mons 3 days 04:05:06".
pub fn format_interval(i: &Interval, out: &mut String) {
    let mut parts: Vec<String> = Vec::new();
    let years = i.months / 12;
    let months = i.months % 12;
    // Only exactly 1 is singular: PostgreSQL writes "-1 days".
    let plural = |n: i64, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    if years != 0 {
        parts.push(plural(years as i64, "year"));
    }
    if months != 0 {
        parts.push(plural(months as i64, "mon"));
    }
    if i.days != 0 {
        parts.push(plural(i.days as i64, "day"));
    }
    if i.micros != 0 || parts.is_empty() {
        let negative = i.micros < 0;
        let abs = i.micros.unsigned_abs() as i64;
        let secs = abs / MICROS_PER_SECOND;
        let mut s = String::new();
        if negative {
            s.push('-');
        } else if parts.iter().any(|p| p.starts_with('-')) {
            s.push('+');
        }
        write!(
            s,
            "{:02}:{:02}:{:02}",
            secs / 3600,
            (secs / 60) % 60,
            secs % 60
        )
        .unwrap();
        format_fraction(abs % MICROS_PER_SECOND, &mut s);
        parts.push(s);
    }
    out.push_str(&parts.join(" "));
}

/// A storage value as PostgreSQL text (for COPY TO and errors' Key (...)=(...) details),
/// timestamptz in `zone`.
pub fn format_value(v: &Value, zone: &TimeZone) -> Option<String> {
    let mut out = String::new();
    match v {
        Value::Null => return None,
        Value::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Value::Int16(x) => write!(out, "{x}").unwrap(),
        Value::Int32(x) => write!(out, "{x}").unwrap(),
        Value::Int64(x) => write!(out, "{x}").unwrap(),
        Value::Float32(x) => format_float(*x as f64, 6, &mut out),
        Value::Float64(x) => format_float(*x, 15, &mut out),
        Value::Numeric { mantissa, scale } => format_decimal(
            *mantissa,
            *scale as i8,
            *scale == NUMERIC_DEFAULT_SCALE,
            &mut out,
        ),
        Value::Text(s) => out.push_str(s),
        Value::Bytea(b) => format_bytea(b, &mut out),
        Value::Date(d) => format_date(*d, &mut out),
        Value::Timestamp(t) => format_timestamp(*t, None, &mut out),
        Value::TimestampTz(t) => format_timestamp(*t, Some(zone), &mut out),
        Value::Interval(i) => format_interval(i, &mut out),
        Value::Uuid(u) => out.push_str(&crate::types::format_uuid(*u)),
    }
    Some(out)
}

#[allow(dead_code)]
const _: i64 = MICROS_PER_DAY;

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

    #[test]
    fn numerics_parse_and_round() {
        assert_eq!(parse_numeric("1.235", 2).unwrap(), 124);
        assert_eq!(parse_numeric("-1.235", 2).unwrap(), -124);
        assert_eq!(parse_numeric("12", 2).unwrap(), 1200);
        assert_eq!(parse_numeric("1e3", 0).unwrap(), 1000);
        assert_eq!(parse_numeric(".5", 1).unwrap(), 5);
        assert!(parse_numeric("abc", 2).is_err());
        let mut s = String::new();
        format_decimal(-12345, 2, false, &mut s);
        assert_eq!(s, "-123.45");
    }

    #[test]
    fn timestamps_and_intervals_round_trip_text() {
        let t = parse_timestamp("2024-02-29 13:14:15.25").unwrap();
        let mut s = String::new();
        format_timestamp(t, None, &mut s);
        assert_eq!(s, "2024-02-29 13:14:15.25");
        let utc = TimeZone::utc();
        let tz = parse_timestamptz("2024-01-01 02:00:00+02", &utc).unwrap();
        let mut s = String::new();
        format_timestamp(tz, Some(&utc), &mut s);
        assert_eq!(s, "2024-01-01 00:00:00+00");
        let kolkata = TimeZone::from_setting("Asia/Kolkata").unwrap();
        let tz = parse_timestamptz("2024-01-01 12:00:00", &kolkata).unwrap();
        let mut s = String::new();
        format_timestamp(tz, Some(&kolkata), &mut s);
        assert_eq!(s, "2024-01-01 12:00:00+05:30");
        let i = parse_interval("1 year 2 mons 3 days 04:05:06").unwrap();
        let mut s = String::new();
        format_interval(&i, &mut s);
        assert_eq!(s, "1 year 2 mons 3 days 04:05:06");
        assert!(parse_date("2020-13-01").unwrap_err().code == code::DATETIME_FIELD_OVERFLOW);
    }

    #[test]
    fn text_limits_are_checked() {
        let t = DataType::Varchar(Some(3));
        assert_eq!(check_varchar("ab ", Some(3), &t).unwrap(), "ab ");
        assert_eq!(check_varchar("abc  ", Some(3), &t).unwrap(), "abc");
        assert_eq!(
            check_varchar("abcd", Some(3), &t).unwrap_err().code,
            code::STRING_DATA_RIGHT_TRUNCATION
        );
        assert_eq!(check_char("ab", 4).unwrap(), "ab  ");
        assert_eq!(
            parse_value("40000", &DataType::Int16, &TimeZone::utc())
                .unwrap_err()
                .code,
            code::NUMERIC_VALUE_OUT_OF_RANGE
        );
        assert_eq!(
            parse_value("4x", &DataType::Int32, &TimeZone::utc())
                .unwrap_err()
                .code,
            code::INVALID_TEXT_REPRESENTATION
        );
    }
}
