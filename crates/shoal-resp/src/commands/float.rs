//! INCRBYFLOAT's arithmetic as Redis 7.0 does it on x86-64: in C's `long double`, the x87
//! 80-bit format with a 64-bit significand, printed with `%.17Lf` and its trailing zeros cut.
//! That is why `INCRBYFLOAT k 1000.1` answers `1000.09999999999999998`: the text is the
//! binary value's exact decimal expansion, rounded to 17 places. Doubles would answer
//! differently, so the format is emulated here with exact integer arithmetic: parse the text
//! to the nearest 64-bit-significand value, add exactly and round once, print exactly.

use num_bigint::BigUint;
use num_traits::{One, Zero};

/// The longest text Redis reads as a long double (`MAX_LONG_DOUBLE_CHARS`).
const TEXT_MAX_BYTES: usize = 5 * 1024;
/// x87 extended precision: a 64-bit significand; normal values from 2^-16382 to below 2^16384.
const SIGNIFICAND_BITS: u64 = 64;
const EXPONENT_MIN: i64 = -16382;
const EXPONENT_LIMIT: i64 = 16384;

/// A long double: ±significand × 2^exponent (significand 0 is zero), or an infinity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongDouble {
    Finite {
        negative: bool,
        significand: u64,
        exponent: i64,
    },
    Infinite {
        negative: bool,
    },
}

impl LongDouble {
    pub fn is_finite(self) -> bool {
        matches!(self, LongDouble::Finite { .. })
    }
}

/// What `string2ld` reads: a whole string that strtold takes as a finite or infinite value
/// in range; None otherwise (leading blanks, trailing text, NaN, out of range).
pub fn parse(text: &[u8]) -> Option<LongDouble> {
    if text.is_empty() || text.len() > TEXT_MAX_BYTES || text[0].is_ascii_whitespace() {
        return None;
    }
    let s = std::str::from_utf8(text).ok()?;
    let (negative, body) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(LongDouble::Infinite { negative });
    }
    let (numerator, denominator, binary_exponent) = match lower.strip_prefix("0x") {
        Some(hex) => parse_hex(hex)?,
        None => parse_decimal(&lower)?,
    };
    round(negative, numerator, denominator, binary_exponent)
}

/// digits[.digits][e[+-]digits] as numerator / denominator.
fn parse_decimal(s: &str) -> Option<(BigUint, BigUint, i64)> {
    let (value, fraction_digits, exponent) = split_number(s, 'e', 10)?;
    let scale = exponent - fraction_digits;
    // Far outside the range either way: a bound keeps the powers small.
    if scale.abs() > 20_000 {
        return match value.is_zero() {
            true => Some((value, BigUint::one(), 0)),
            false => None,
        };
    }
    let ten = BigUint::from(10u32);
    Some(match scale >= 0 {
        true => (value * ten.pow(scale as u32), BigUint::one(), 0),
        false => (value, ten.pow((-scale) as u32), 0),
    })
}

/// hexdigits[.hexdigits][p[+-]digits] (strtold's hexadecimal form).
fn parse_hex(s: &str) -> Option<(BigUint, BigUint, i64)> {
    let (value, fraction_digits, exponent) = split_number(s, 'p', 16)?;
    Some((value, BigUint::one(), exponent - 4 * fraction_digits))
}

/// `digits[.digits][<marker>[+-]digits]` in `radix`: the digits as one integer, how many of
/// them follow the point, and the exponent.
fn split_number(s: &str, marker: char, radix: u32) -> Option<(BigUint, i64, i64)> {
    let (mantissa, exponent) = match s.split_once(marker) {
        Some((m, e)) => (m, parse_exponent(e)?),
        None => (s, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let digits = format!("{whole}{fraction}");
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let value = BigUint::parse_bytes(digits.as_bytes(), radix)?;
    Some((value, fraction.len() as i64, exponent))
}

fn parse_exponent(e: &str) -> Option<i64> {
    let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
    if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    e.parse().ok()
}

/// The long double nearest to ±(numerator / denominator) × 2^binary_exponent (ties to even);
/// None when it is outside the normal range (strtold's ERANGE).
fn round(
    negative: bool,
    numerator: BigUint,
    denominator: BigUint,
    binary_exponent: i64,
) -> Option<LongDouble> {
    if numerator.is_zero() {
        return Some(LongDouble::Finite {
            negative,
            significand: 0,
            exponent: 0,
        });
    }
    // Scale by 2^shift so the quotient has exactly 64 bits.
    let mut shift = SIGNIFICAND_BITS as i64 - (numerator.bits() as i64 - denominator.bits() as i64);
    let quotient = |shift: i64| {
        let (n, d) = match shift >= 0 {
            true => (&numerator << (shift as u64), denominator.clone()),
            false => (numerator.clone(), &denominator << ((-shift) as u64)),
        };
        let q = &n / &d;
        let r = n - &q * &d;
        (q, r, d)
    };
    let (mut q, mut r, mut d) = quotient(shift);
    while q.bits() > SIGNIFICAND_BITS {
        shift -= 1;
        (q, r, d) = quotient(shift);
    }
    while q.bits() < SIGNIFICAND_BITS {
        shift += 1;
        (q, r, d) = quotient(shift);
    }
    let twice = &r << 1u8;
    let round_up = twice > d || (twice == d && q.bit(0));
    if round_up {
        q += 1u32;
    }
    let mut exponent = binary_exponent - shift;
    if q.bits() > SIGNIFICAND_BITS {
        q >>= 1u8;
        exponent += 1;
    }
    let top = exponent + SIGNIFICAND_BITS as i64 - 1;
    if top >= EXPONENT_LIMIT {
        return None;
    }
    if top < EXPONENT_MIN {
        return None;
    }
    let significand = q.iter_u64_digits().next().unwrap_or(0);
    Some(LongDouble::Finite {
        negative,
        significand,
        exponent,
    })
}

/// a + b, rounded once; an infinite result (from an infinite term or by overflow) is returned
/// as such for the caller to refuse.
pub fn add(a: LongDouble, b: LongDouble) -> LongDouble {
    let (
        LongDouble::Finite {
            negative: na,
            significand: ma,
            exponent: ea,
        },
        LongDouble::Finite {
            negative: nb,
            significand: mb,
            exponent: eb,
        },
    ) = (a, b)
    else {
        return LongDouble::Infinite { negative: false };
    };
    let low = ea.min(eb);
    let term = |m: u64, e: i64| BigUint::from(m) << ((e - low) as u64);
    let (ta, tb) = (term(ma, ea), term(mb, eb));
    let (negative, magnitude) = match (na, nb) {
        (false, false) | (true, true) => (na, ta + tb),
        _ if ta >= tb => (na, ta - tb),
        _ => (nb, tb - ta),
    };
    // x + (-x) is +0 when rounding to nearest.
    let negative = negative && !magnitude.is_zero();
    round(negative, magnitude, BigUint::one(), low).unwrap_or(LongDouble::Infinite { negative })
}

/// `%.17Lf` with the trailing zeros (and a trailing point) removed, and `-0` written `0`, as
/// Redis's `ld2string` in its human mode.
pub fn format_human(value: LongDouble) -> String {
    let LongDouble::Finite {
        negative,
        significand,
        exponent,
    } = value
    else {
        return "inf".into();
    };
    const PLACES: u32 = 17;
    let scaled = BigUint::from(significand) * BigUint::from(10u32).pow(PLACES);
    let n = match exponent >= 0 {
        true => scaled << (exponent as u64),
        false => {
            let d = BigUint::one() << ((-exponent) as u64);
            let q = &scaled / &d;
            let r = scaled - &q * &d;
            let twice = r << 1u8;
            match twice > d || (twice == d && q.bit(0)) {
                true => q + 1u32,
                false => q,
            }
        }
    };
    let digits = format!("{:0>18}", n.to_str_radix(10));
    let (whole, fraction) = digits.split_at(digits.len() - PLACES as usize);
    let fraction = fraction.trim_end_matches('0');
    let mut text = match fraction.is_empty() {
        true => whole.to_string(),
        false => format!("{whole}.{fraction}"),
    };
    if negative && text != "0" {
        text.insert(0, '-');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(current: &str, by: &str) -> String {
        format_human(add(
            parse(current.as_bytes()).unwrap(),
            parse(by.as_bytes()).unwrap(),
        ))
    }

    /// What Redis 7.0.15 on x86-64 answers to INCRBYFLOAT (the key holding `current`).
    #[test]
    fn sums_as_redis_prints_them() {
        for (current, by, redis) in [
            ("0", "0.1", "0.1"),
            ("0.1", "0.2", "0.3"),
            ("0", "1000.1", "1000.09999999999999998"),
            ("0", "123456.789", "123456.78900000000000148"),
            (
                "123456.78900000000000148",
                "0.001",
                "123456.78999999999999915",
            ),
            ("0", "1e20", "100000000000000000000"),
            ("100000000000000000000", "1", "100000000000000000000"),
            ("0", "3.0e3", "3000"),
            ("3000", "-3000", "0"),
            ("0", "0x10", "16"),
            ("10.50", "0.1", "10.6"),
            ("5.0e3", "2.0e2", "5200"),
        ] {
            assert_eq!(incr(current, by), redis, "{current} + {by}");
        }
    }

    #[test]
    fn what_is_not_a_float() {
        for bad in [
            "", " 1", "1 ", "abc", "1.5e", "nan", ".", "e5", "1e999999", "1..2",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(
            parse(b"inf"),
            Some(LongDouble::Infinite { negative: false })
        );
        assert!(parse(b"-1.5E+3").is_some_and(LongDouble::is_finite));
        assert!(!add(parse(b"inf").unwrap(), parse(b"1").unwrap()).is_finite());
    }
}
