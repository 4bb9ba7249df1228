//! Input text of the scalar types: booleans, integers, floats and numerics, text with its
//! length limits and bytea, and `parse_value`, which picks the parser for a column's type.
//! Errors carry PostgreSQL's SQLSTATEs and wording (22P02 for bad syntax, 22003 for values out
//! of range, 22001 for strings too long).

use shoal_storage::types::{DataType, Value};

use super::datetime_input::{parse_date_at, parse_time, parse_timestamp_at, parse_timestamptz};
use super::interval_input::parse_interval;
use crate::error::{code, SqlError, SqlResult};
use crate::timezone::TimeZone;
use crate::types::{format_type, pad_char, parse_uuid};

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
            let n = shoal_numeric::Numeric::parse(s).map_err(crate::numeric::sql_error)?;
            crate::types::numeric_value(&n, *precision, *scale)?
        }
        DataType::Text => Value::Text(s.to_string()),
        DataType::Varchar(limit) => Value::Text(check_varchar(s, *limit, t)?),
        DataType::Char(n) => Value::Text(check_char(s, *n)?),
        DataType::Bytea => Value::Bytea(parse_bytea(s)?),
        DataType::Date => Value::Date(parse_date_at(s, zone)?),
        DataType::Timestamp => Value::Timestamp(parse_timestamp_at(s, zone)?),
        DataType::TimestampTz => Value::TimestampTz(parse_timestamptz(s, zone)?),
        DataType::Interval => Value::Interval(parse_interval(s)?),
        DataType::Uuid => Value::Uuid(parse_uuid(s)?),
        DataType::Time => Value::Time(parse_time(s, zone)?),
        DataType::Array(element) => Value::Array(parse_array(s, element, zone)?),
        DataType::Json => {
            shoal_json::validate_json(s).map_err(crate::query::json::sql_error)?;
            Value::Text(s.to_string())
        }
        DataType::Jsonb => {
            Value::Text(shoal_json::jsonb_in(s).map_err(crate::query::json::sql_error)?)
        }
        DataType::Enum(e) => Value::Text(check_enum_label(s, e)?.to_string()),
    })
}

/// An array's text (`{1,2,NULL}`, `{"a b",c}`): each element read by the element type's input.
fn parse_array(s: &str, element: &DataType, zone: &TimeZone) -> SqlResult<Vec<Value>> {
    use crate::query::array_literal::{parse, Element};
    parse(s)?
        .into_iter()
        .map(|e| match e {
            Element::Null => Ok(Value::Null),
            Element::Text(text) => parse_value(&text, element, zone),
            Element::Array(_) => Err(SqlError::unsupported("multidimensional arrays")),
        })
        .collect()
}

/// enum_in: the text must be one of the type's labels, exactly (case and blanks count).
pub fn check_enum_label<'s>(s: &'s str, e: &shoal_storage::types::EnumType) -> SqlResult<&'s str> {
    match e.position(s) {
        Some(_) => Ok(s),
        None => Err(SqlError::new(
            code::INVALID_TEXT_REPRESENTATION,
            format!("invalid input value for enum {}: \"{s}\"", e.name),
        )),
    }
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
    let v = parse_float(s, "real")?;
    let narrowed = v as f32;
    // Out of float4's range although within float8's, or too small for it.
    if (narrowed.is_infinite() && v.is_finite()) || (narrowed == 0.0 && v != 0.0) {
        return Err(SqlError::new(
            code::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("\"{s}\" is out of range for type real"),
        ));
    }
    Ok(narrowed)
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

/// Whether the digits before a float's exponent are not all zero.
fn mantissa_has_nonzero_digit(t: &str) -> bool {
    t.split(['e', 'E'])
        .next()
        .is_some_and(|m| m.bytes().any(|b| matches!(b, b'1'..=b'9')))
}

fn parse_float(s: &str, type_name: &str) -> SqlResult<f64> {
    let t = s.trim();
    // Plain decimal numbers, the common case, need no lower-cased copy for the checks below.
    if t.bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'))
    {
        if let Ok(v) = t.parse::<f64>() {
            if v.is_finite() && (v != 0.0 || !mantissa_has_nonzero_digit(t)) {
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
    // A finite input too large for the type, or too small to be told from zero (strtod's
    // ERANGE in PostgreSQL): "1e-400" is not 0.
    let underflow = v == 0.0 && mantissa_has_nonzero_digit(t);
    if v.is_infinite() || underflow {
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

#[cfg(test)]
mod tests {
    use super::*;

    use crate::pgtext::format_decimal;

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
