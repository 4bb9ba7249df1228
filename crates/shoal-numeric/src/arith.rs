//! The four operations and their relatives (`div`, `%`, gcd, lcm, negation, abs, sign) with
//! PostgreSQL 15's result scales and its rules for NaN and the infinities. Division follows
//! `select_div_scale`, which picks the scale from the operands' base-10000 weights so that a
//! quotient carries at least 16 significant digits.

use std::cmp::Ordering;

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{Signed, Zero};

use crate::nbase::{NBaseDigits, DEC_DIGITS};
use crate::{div_round_half_away, pow10, Numeric, NumericError, MAX_DISPLAY_SCALE, MIN_SIG_DIGITS};

/// Brings two scaled mantissas to their common (larger) scale.
pub(crate) fn align(a: &BigInt, sa: u16, b: &BigInt, sb: u16) -> (BigInt, BigInt, u16) {
    match sa.cmp(&sb) {
        Ordering::Equal => (a.clone(), b.clone(), sa),
        Ordering::Less => (a * pow10(u64::from(sb - sa)), b.clone(), sb),
        Ordering::Greater => (a.clone(), b * pow10(u64::from(sa - sb)), sa),
    }
}

/// The scale `numeric_div` gives `a / b` (`select_div_scale`), for finite non-zero `b`.
pub(crate) fn select_div_scale(a: &BigInt, sa: u16, b: &BigInt, sb: u16) -> i32 {
    let na = NBaseDigits::of(a, sa);
    let nb = NBaseDigits::of(b, sb);
    let mut qweight = na.weight - nb.weight;
    if na.first() <= nb.first() {
        qweight -= 1;
    }
    let rscale = MIN_SIG_DIGITS - qweight * DEC_DIGITS;
    rscale
        .max(i32::from(sa))
        .max(i32::from(sb))
        .clamp(0, MAX_DISPLAY_SCALE)
}

/// `(a × 10^-sa) / (b × 10^-sb)` rounded half away from zero to `rscale` digits (`div_var`).
pub(crate) fn div_rounded(a: &BigInt, sa: i64, b: &BigInt, sb: i64, rscale: i64) -> BigInt {
    // quotient × 10^rscale = a × 10^(rscale + sb - sa) / b
    let shift = rscale + sb - sa;
    if shift >= 0 {
        div_round_half_away(&(a * pow10(shift as u64)), b)
    } else {
        div_round_half_away(a, &(b * pow10((-shift) as u64)))
    }
}

/// The truncated integer quotient of two finite values (`div_var` with rscale 0, no rounding).
fn div_truncated(a: &BigInt, sa: u16, b: &BigInt, sb: u16) -> BigInt {
    let (x, y, _) = align(a, sa, b, sb);
    x / y
}

impl Numeric {
    /// `self + other` (`numeric_add`): scale max(s1, s2); Infinity + -Infinity is NaN.
    pub fn add(&self, other: &Numeric) -> Result<Numeric, NumericError> {
        use Numeric::*;
        match (self, other) {
            (NaN, _) | (_, NaN) | (PosInf, NegInf) | (NegInf, PosInf) => Ok(NaN),
            (PosInf, _) | (_, PosInf) => Ok(PosInf),
            (NegInf, _) | (_, NegInf) => Ok(NegInf),
            (
                Finite {
                    mantissa: a,
                    scale: sa,
                },
                Finite {
                    mantissa: b,
                    scale: sb,
                },
            ) => {
                let (x, y, scale) = align(a, *sa, b, *sb);
                Numeric::make(x + y, i64::from(scale))
            }
        }
    }

    /// `self - other` (`numeric_sub`): scale max(s1, s2); Infinity - Infinity is NaN.
    pub fn sub(&self, other: &Numeric) -> Result<Numeric, NumericError> {
        self.add(&other.neg())
    }

    /// `self * other` (`numeric_mul`): scale s1 + s2, rounded to 16383 if it would exceed the
    /// largest storable scale; zero times an infinity is NaN.
    pub fn mul(&self, other: &Numeric) -> Result<Numeric, NumericError> {
        use Numeric::*;
        match (self, other) {
            (NaN, _) | (_, NaN) => return Ok(NaN),
            (Finite { .. }, Finite { .. }) => {}
            _ => {
                return Ok(match self.signum() * other.signum() {
                    0 => NaN,
                    1 => PosInf,
                    _ => NegInf,
                })
            }
        }
        let (
            Finite {
                mantissa: a,
                scale: sa,
            },
            Finite {
                mantissa: b,
                scale: sb,
            },
        ) = (self, other)
        else {
            unreachable!("specials handled above")
        };
        let product = a * b;
        let scale = u64::from(*sa) + u64::from(*sb);
        let max = u64::from(crate::DSCALE_MAX);
        if scale > max {
            let rounded = crate::div_pow10_round(&product, scale - max);
            return Numeric::make(rounded, max as i64);
        }
        Numeric::make(product, scale as i64)
    }

    /// `self / other` (`numeric_div`) at `select_div_scale`'s scale, rounded half away from
    /// zero. Division by zero is 22012; a finite value divided by an infinity is 0.
    pub fn div(&self, other: &Numeric) -> Result<Numeric, NumericError> {
        if let Some(special) = div_special(self, other)? {
            return Ok(special);
        }
        let (
            Numeric::Finite {
                mantissa: a,
                scale: sa,
            },
            Numeric::Finite {
                mantissa: b,
                scale: sb,
            },
        ) = (self, other)
        else {
            unreachable!("specials handled by div_special")
        };
        let rscale = select_div_scale(a, *sa, b, *sb);
        let q = div_rounded(a, i64::from(*sa), b, i64::from(*sb), i64::from(rscale));
        Numeric::make(q, i64::from(rscale))
    }

    /// `div(self, other)` (`numeric_div_trunc`): the quotient truncated toward zero, scale 0.
    pub fn div_trunc(&self, other: &Numeric) -> Result<Numeric, NumericError> {
        if let Some(special) = div_special(self, other)? {
            return Ok(special);
        }
        let (
            Numeric::Finite {
                mantissa: a,
                scale: sa,
            },
            Numeric::Finite {
                mantissa: b,
                scale: sb,
            },
        ) = (self, other)
        else {
            unreachable!("specials handled by div_special")
        };
        Numeric::make(div_truncated(a, *sa, b, *sb), 0)
    }

    /// `self % other` (`numeric_mod`): `self - trunc(self / other) * other`, scale max(s1, s2).
    /// A zero divisor is 22012; Infinity % x is NaN; x % Infinity is x.
    pub fn rem(&self, other: &Numeric) -> Result<Numeric, NumericError> {
        use Numeric::*;
        match (self, other) {
            (NaN, _) | (_, NaN) => Ok(NaN),
            (PosInf | NegInf, _) if other.is_zero() => Err(NumericError::division_by_zero()),
            (PosInf | NegInf, _) => Ok(NaN),
            (_, PosInf | NegInf) => Ok(self.clone()),
            (
                Finite {
                    mantissa: a,
                    scale: sa,
                },
                Finite {
                    mantissa: b,
                    scale: sb,
                },
            ) => {
                if b.is_zero() {
                    return Err(NumericError::division_by_zero());
                }
                let (x, y, scale) = align(a, *sa, b, *sb);
                Numeric::make(x % y, i64::from(scale))
            }
        }
    }

    /// `-self`, keeping the scale; negating zero gives zero.
    pub fn neg(&self) -> Numeric {
        match self {
            Numeric::NaN => Numeric::NaN,
            Numeric::PosInf => Numeric::NegInf,
            Numeric::NegInf => Numeric::PosInf,
            Numeric::Finite { mantissa, scale } => Numeric::Finite {
                mantissa: -mantissa,
                scale: *scale,
            },
        }
    }

    /// `abs(self)`, keeping the scale.
    pub fn abs(&self) -> Numeric {
        match self {
            Numeric::NegInf => Numeric::PosInf,
            Numeric::Finite { mantissa, scale } => Numeric::Finite {
                mantissa: mantissa.abs(),
                scale: *scale,
            },
            other => other.clone(),
        }
    }

    /// `sign(self)` (`numeric_sign`): -1, 0 or 1 with scale 0 (also for the infinities); NaN
    /// for NaN.
    pub fn sign(&self) -> Numeric {
        match self {
            Numeric::NaN => Numeric::NaN,
            other => Numeric::from_i64(i64::from(other.signum())),
        }
    }

    /// `gcd(self, other)` (`numeric_gcd`): the largest value dividing both exactly, positive,
    /// at scale max(s1, s2); NaN if either input is NaN or infinite.
    pub fn gcd(&self, other: &Numeric) -> Result<Numeric, NumericError> {
        let (
            Numeric::Finite {
                mantissa: a,
                scale: sa,
            },
            Numeric::Finite {
                mantissa: b,
                scale: sb,
            },
        ) = (self, other)
        else {
            return Ok(Numeric::NaN);
        };
        let (x, y, scale) = align(a, *sa, b, *sb);
        Numeric::make(x.gcd(&y), i64::from(scale))
    }

    /// `lcm(self, other)` (`numeric_lcm`): the smallest positive common multiple (0 if either
    /// is 0) at scale max(s1, s2); NaN if either input is NaN or infinite.
    pub fn lcm(&self, other: &Numeric) -> Result<Numeric, NumericError> {
        let (
            Numeric::Finite {
                mantissa: a,
                scale: sa,
            },
            Numeric::Finite {
                mantissa: b,
                scale: sb,
            },
        ) = (self, other)
        else {
            return Ok(Numeric::NaN);
        };
        let (x, y, scale) = align(a, *sa, b, *sb);
        if x.is_zero() || y.is_zero() {
            return Numeric::make(BigInt::zero(), i64::from(scale));
        }
        // With both scaled to 10^-scale, lcm(x, y) / 10^scale is the lcm of the values.
        let lcm = (&x / x.gcd(&y) * &y).abs();
        Numeric::make(lcm, i64::from(scale))
    }
}

/// The result of `/` or `div()` when an operand is special or the divisor is zero
/// (`numeric_div`'s special cases), or `None` when both are finite and the divisor non-zero.
fn div_special(a: &Numeric, b: &Numeric) -> Result<Option<Numeric>, NumericError> {
    use Numeric::*;
    match (a, b) {
        (NaN, _) | (_, NaN) => Ok(Some(NaN)),
        (PosInf | NegInf, PosInf | NegInf) => Ok(Some(NaN)),
        (PosInf | NegInf, _) => match b.signum() {
            0 => Err(NumericError::division_by_zero()),
            s if s * a.signum() > 0 => Ok(Some(PosInf)),
            _ => Ok(Some(NegInf)),
        },
        // POSIX would want an underflow error; PostgreSQL returns plain zero.
        (_, PosInf | NegInf) => Ok(Some(Numeric::zero())),
        (Finite { .. }, Finite { mantissa, .. }) if mantissa.is_zero() => {
            Err(NumericError::division_by_zero())
        }
        _ => Ok(None),
    }
}
