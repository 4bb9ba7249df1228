//! Text input and output of numeric values, as PostgreSQL 15's `numeric_in` and `numeric_out`:
//! the accepted spellings (sign, digits, point, exponent, NaN and the infinities, surrounding
//! whitespace) and the printed form with exactly the display scale's digits after the point.

use num_bigint::BigInt;
use num_traits::{Signed, Zero};

use crate::{Numeric, NumericError};

/// C's `isspace` in the C locale, which is what PostgreSQL's parser skips.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C)
}

/// The special spellings `numeric_in` tries, in its order, before reading digits.
const SPECIALS: [(&str, Numeric); 7] = [
    ("nan", Numeric::NaN),
    ("infinity", Numeric::PosInf),
    ("+infinity", Numeric::PosInf),
    ("-infinity", Numeric::NegInf),
    ("inf", Numeric::PosInf),
    ("+inf", Numeric::PosInf),
    ("-inf", Numeric::NegInf),
];

impl Numeric {
    /// Parses text the way `numeric_in` does (without a typmod). Bad syntax is 22P02
    /// `invalid input syntax for type numeric: "<text>"`; a value beyond the storage limits
    /// is 22003 `value overflows numeric format`.
    pub fn parse(text: &str) -> Result<Numeric, NumericError> {
        let syntax_error = || {
            NumericError::new(
                "22P02",
                format!("invalid input syntax for type numeric: \"{text}\""),
            )
        };
        let bytes = text.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() && is_c_space(bytes[pos]) {
            pos += 1;
        }
        let rest = &bytes[pos..];
        let special = SPECIALS.iter().find(|(word, _)| {
            rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word.as_bytes())
        });
        let (value, end) = match special {
            Some((word, value)) => (Ok(value.clone()), pos + word.len()),
            None => parse_finite(bytes, pos).ok_or_else(syntax_error)?,
        };
        if !bytes[end..].iter().all(|b| is_c_space(*b)) {
            return Err(syntax_error());
        }
        value
    }

    /// Prints the value as `numeric_out` does: `NaN`, `Infinity`, `-Infinity`, or the digits
    /// with exactly `scale` of them after the point.
    pub fn to_pg_text(&self) -> String {
        match self {
            Numeric::NaN => "NaN".to_string(),
            Numeric::PosInf => "Infinity".to_string(),
            Numeric::NegInf => "-Infinity".to_string(),
            Numeric::Finite { mantissa, scale } => format_finite(mantissa, usize::from(*scale)),
        }
    }
}

/// Prints `mantissa × 10^-scale` with `scale` digits after the point.
pub(crate) fn format_finite(mantissa: &BigInt, scale: usize) -> String {
    let digits = mantissa.magnitude().to_str_radix(10);
    let mut out = String::with_capacity(digits.len() + scale + 3);
    if mantissa.is_negative() {
        out.push('-');
    }
    if digits.len() > scale {
        let (int_part, frac_part) = digits.split_at(digits.len() - scale);
        out.push_str(int_part);
        if scale > 0 {
            out.push('.');
            out.push_str(frac_part);
        }
    } else {
        out.push('0');
        if scale > 0 {
            out.push('.');
            out.extend(std::iter::repeat_n('0', scale - digits.len()));
            out.push_str(&digits);
        }
    }
    out
}

/// Reads a finite number starting at `pos` as `set_var_from_str` does, returning the value
/// (or the overflow error PostgreSQL raises for it) and where the number ended; `None` for a
/// syntax error.
fn parse_finite(bytes: &[u8], mut pos: usize) -> Option<(Result<Numeric, NumericError>, usize)> {
    let mut negative = false;
    match bytes.get(pos) {
        Some(b'+') => pos += 1,
        Some(b'-') => {
            negative = true;
            pos += 1
        }
        _ => {}
    }
    let mut digits = String::new();
    let mut have_point = false;
    let mut digits_after_point: i64 = 0;
    if bytes.get(pos) == Some(&b'.') {
        have_point = true;
        pos += 1;
    }
    if !bytes.get(pos).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    while let Some(&b) = bytes.get(pos) {
        if b.is_ascii_digit() {
            digits.push(b as char);
            digits_after_point += i64::from(have_point);
        } else if b == b'.' && !have_point {
            have_point = true;
        } else if b == b'.' {
            return None;
        } else {
            break;
        }
        pos += 1;
    }
    let mut exponent: i64 = 0;
    if matches!(bytes.get(pos), Some(b'e' | b'E')) {
        let (value, end) = parse_strtol(bytes, pos + 1)?;
        pos = end;
        // PostgreSQL bounds the exponent at INT_MAX/2 before any arithmetic, with the same
        // error make_result would give for a value too large to store.
        if value >= i64::from(i32::MAX / 2) || value <= -i64::from(i32::MAX / 2) {
            return Some((Err(NumericError::overflow()), pos));
        }
        exponent = value;
    }
    let mut mantissa: BigInt = digits.parse().ok()?;
    if negative {
        mantissa = -mantissa;
    }
    let scale = digits_after_point - exponent;
    let value = if scale < 0 {
        Numeric::make(mantissa, scale)
    } else if scale > i64::from(crate::DSCALE_MAX) {
        Err(NumericError::overflow())
    } else {
        Numeric::make(mantissa, scale)
    };
    Some((value.map(normalize_zero), pos))
}

/// The exponent as C's `strtol` reads it: optional whitespace, optional sign, digits. A value
/// too large saturates, as strtol's does, which the caller then rejects as an overflow.
fn parse_strtol(bytes: &[u8], mut pos: usize) -> Option<(i64, usize)> {
    while pos < bytes.len() && is_c_space(bytes[pos]) {
        pos += 1;
    }
    let mut negative = false;
    match bytes.get(pos) {
        Some(b'+') => pos += 1,
        Some(b'-') => {
            negative = true;
            pos += 1
        }
        _ => {}
    }
    let start = pos;
    let mut value: i64 = 0;
    while let Some(&b) = bytes.get(pos) {
        if !b.is_ascii_digit() {
            break;
        }
        value = value.saturating_mul(10).saturating_add(i64::from(b - b'0'));
        pos += 1;
    }
    if pos == start {
        return None;
    }
    Some((if negative { -value } else { value }, pos))
}

/// Makes a zero's mantissa non-negative (`-0.00` reads as `0.00`).
fn normalize_zero(n: Numeric) -> Numeric {
    match n {
        Numeric::Finite { mantissa, scale } if mantissa.is_zero() => Numeric::Finite {
            mantissa: BigInt::zero(),
            scale,
        },
        other => other,
    }
}
