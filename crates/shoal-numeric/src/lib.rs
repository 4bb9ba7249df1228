//! PostgreSQL 15's `numeric` type for Shoal: an exact decimal that is NaN, ±Infinity, or a
//! finite `mantissa × 10^-scale` whose scale is the display scale PostgreSQL prints. Every
//! operation reproduces PostgreSQL's result *and its display scale* (which `numeric.c` derives
//! from its base-10000 representation, mirrored in `nbase`), its errors and their SQLSTATEs, so
//! that a client cannot tell Shoal's answers from PostgreSQL's. This file holds the type, its
//! error, the limits, and comparison/hashing by value; the operations live in the sibling
//! modules by topic.

mod aggregate;
mod arith;
mod convert;
mod encoding;
mod fixed;
mod nbase;
mod power;
mod round;
mod text;
mod transcendental;

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use num_bigint::{BigInt, BigUint, Sign};
use num_traits::{One, Signed, Zero};

pub use aggregate::MomentsAccumulator;

/// Most digits PostgreSQL stores before the decimal point (a weight of 32767 base-10000 digits).
pub const INTEGER_DIGITS_MAX: u64 = 131_072;
/// Largest display scale a stored value may have (`NUMERIC_DSCALE_MAX`).
pub const DSCALE_MAX: u16 = 0x3FFF;
/// Largest scale PostgreSQL chooses for an inexact result (`NUMERIC_MAX_DISPLAY_SCALE`).
pub(crate) const MAX_DISPLAY_SCALE: i32 = 1000;
/// Bound on scales passed to round/trunc and used by exp's estimate (`NUMERIC_MAX_RESULT_SCALE`).
pub(crate) const MAX_RESULT_SCALE: i32 = 2000;
/// Significant digits PostgreSQL aims for in an inexact result (`NUMERIC_MIN_SIG_DIGITS`).
pub(crate) const MIN_SIG_DIGITS: i32 = 16;

/// An error as PostgreSQL reports it: SQLSTATE, primary message and optional detail line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumericError {
    /// The five-character SQLSTATE, e.g. `22003`.
    pub sqlstate: &'static str,
    /// The primary message, worded as PostgreSQL words it.
    pub message: String,
    /// PostgreSQL's DETAIL line, when it gives one (e.g. for `numeric field overflow`).
    pub detail: Option<String>,
}

impl NumericError {
    pub(crate) fn new(sqlstate: &'static str, message: impl Into<String>) -> NumericError {
        NumericError {
            sqlstate,
            message: message.into(),
            detail: None,
        }
    }

    pub(crate) fn overflow() -> NumericError {
        NumericError::new("22003", "value overflows numeric format")
    }

    pub(crate) fn division_by_zero() -> NumericError {
        NumericError::new("22012", "division by zero")
    }
}

impl fmt::Display for NumericError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for NumericError {}

/// A PostgreSQL `numeric` value. A finite value is `mantissa × 10^-scale`; the scale is the
/// display scale (`1.50` has mantissa 150 and scale 2) and no digit beyond it is ever kept.
/// Zero is always stored with a non-negative mantissa, since PostgreSQL has no negative zero.
#[derive(Clone, Debug)]
pub enum Numeric {
    /// Not-a-number: equal to itself and greater than every other value, as in PostgreSQL.
    NaN,
    /// `Infinity`.
    PosInf,
    /// `-Infinity`.
    NegInf,
    /// A finite value `mantissa × 10^-scale`.
    Finite { mantissa: BigInt, scale: u16 },
}

impl Numeric {
    /// Zero with display scale 0.
    pub fn zero() -> Numeric {
        Numeric::Finite {
            mantissa: BigInt::zero(),
            scale: 0,
        }
    }

    /// One with display scale 0.
    pub fn one() -> Numeric {
        Numeric::Finite {
            mantissa: BigInt::one(),
            scale: 0,
        }
    }

    /// The finite value `mantissa × 10^-scale`, checked against PostgreSQL's storage limits
    /// (`make_result`): a scale above 16383 or more than 131072 integer digits is 22003. A
    /// negative scale multiplies the mantissa out, as PostgreSQL never stores one.
    pub(crate) fn make(mantissa: BigInt, scale: i64) -> Result<Numeric, NumericError> {
        let (mantissa, scale) = if scale < 0 {
            if mantissa.is_zero() {
                return Ok(Numeric::zero());
            }
            // Check before multiplying out, so `1e100000000` fails without a huge power of 10.
            let integer_digits = digit_count(mantissa.magnitude()) as i64 - scale;
            if integer_digits > INTEGER_DIGITS_MAX as i64 {
                return Err(NumericError::overflow());
            }
            (mantissa * pow10((-scale) as u64), 0)
        } else {
            (mantissa, scale)
        };
        if scale > i64::from(DSCALE_MAX) {
            return Err(NumericError::overflow());
        }
        if !mantissa.is_zero() {
            let integer_digits = digit_count(mantissa.magnitude()) as i64 - scale;
            if integer_digits > INTEGER_DIGITS_MAX as i64 {
                return Err(NumericError::overflow());
            }
        }
        Ok(Numeric::Finite {
            mantissa,
            scale: scale as u16,
        })
    }

    /// True for a finite zero of any scale.
    pub fn is_zero(&self) -> bool {
        matches!(self, Numeric::Finite { mantissa, .. } if mantissa.is_zero())
    }

    /// True for NaN.
    pub fn is_nan(&self) -> bool {
        matches!(self, Numeric::NaN)
    }

    /// True for a finite value.
    pub fn is_finite(&self) -> bool {
        matches!(self, Numeric::Finite { .. })
    }

    /// -1, 0 or 1 for the sign of a non-NaN value (infinities included), as
    /// `numeric_sign_internal`; NaN reports 0 and callers handle it first.
    pub(crate) fn signum(&self) -> i32 {
        match self {
            Numeric::NaN => 0,
            Numeric::PosInf => 1,
            Numeric::NegInf => -1,
            Numeric::Finite { mantissa, .. } => match mantissa.sign() {
                Sign::Minus => -1,
                Sign::NoSign => 0,
                Sign::Plus => 1,
            },
        }
    }

    /// Orders two values the way PostgreSQL's `cmp_numerics` does.
    fn cmp_value(&self, other: &Numeric) -> Ordering {
        fn class(n: &Numeric) -> u8 {
            match n {
                Numeric::NegInf => 0,
                Numeric::Finite { .. } => 1,
                Numeric::PosInf => 2,
                Numeric::NaN => 3,
            }
        }
        match (self, other) {
            (
                Numeric::Finite {
                    mantissa: a,
                    scale: sa,
                },
                Numeric::Finite {
                    mantissa: b,
                    scale: sb,
                },
            ) => cmp_scaled(a, *sa, b, *sb),
            _ => class(self).cmp(&class(other)),
        }
    }
}

/// Compares `a × 10^-sa` with `b × 10^-sb` exactly.
pub(crate) fn cmp_scaled(a: &BigInt, sa: u16, b: &BigInt, sb: u16) -> Ordering {
    match sa.cmp(&sb) {
        Ordering::Equal => a.cmp(b),
        Ordering::Less => (a * pow10(u64::from(sb - sa))).cmp(b),
        Ordering::Greater => a.cmp(&(b * pow10(u64::from(sa - sb)))),
    }
}

impl PartialEq for Numeric {
    fn eq(&self, other: &Numeric) -> bool {
        self.cmp_value(other) == Ordering::Equal
    }
}

impl Eq for Numeric {}

impl PartialOrd for Numeric {
    fn partial_cmp(&self, other: &Numeric) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Numeric {
    fn cmp(&self, other: &Numeric) -> Ordering {
        self.cmp_value(other)
    }
}

impl Hash for Numeric {
    /// Hashes the sortable key, which is identical for equal values whatever their scales.
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut bytes = Vec::new();
        self.encode_sortable(&mut bytes);
        let key_len = Numeric::sortable_key_len(&bytes);
        state.write(&bytes[..key_len]);
    }
}

impl fmt::Display for Numeric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_pg_text())
    }
}

/// `10^exponent` as a big integer.
pub(crate) fn pow10(exponent: u64) -> BigInt {
    BigInt::from(pow10_unsigned(exponent))
}

/// `10^exponent` as an unsigned big integer.
pub(crate) fn pow10_unsigned(exponent: u64) -> BigUint {
    num_traits::pow::Pow::pow(BigUint::from(10u32), exponent)
}

/// Number of decimal digits of `n` (1 for zero).
pub(crate) fn digit_count(n: &BigUint) -> u64 {
    if n.is_zero() {
        return 1;
    }
    // The bit length gives the digit count to within one; one comparison settles it.
    let estimate = ((n.bits() - 1) as f64 * std::f64::consts::LOG10_2) as u64 + 1;
    if *n >= pow10_unsigned(estimate) {
        estimate + 1
    } else if estimate > 1 && *n < pow10_unsigned(estimate - 1) {
        estimate - 1
    } else {
        estimate
    }
}

/// Divides `n` by `10^digits`, rounding half away from zero (PostgreSQL's `round_var`).
pub(crate) fn div_pow10_round(n: &BigInt, digits: u64) -> BigInt {
    if digits == 0 {
        return n.clone();
    }
    div_round_half_away(n, &pow10(digits))
}

/// `n / d` rounded half away from zero; `d` must be non-zero.
pub(crate) fn div_round_half_away(n: &BigInt, d: &BigInt) -> BigInt {
    let (q, r) = num_integer::Integer::div_rem(n, d);
    if (r.abs() * 2u32) >= d.abs() {
        if n.is_negative() != d.is_negative() {
            q - 1
        } else {
            q + 1
        }
    } else {
        q
    }
}
