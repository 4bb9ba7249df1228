//! Rounding to a number of decimal places and the display-scale functions: `round`, `trunc`,
//! `ceil`, `floor`, `scale`, `min_scale`, `trim_scale`, and the `numeric(p, s)` typmod check
//! PostgreSQL applies on input and cast. PostgreSQL rounds half away from zero, and a negative
//! scale rounds to the left of the point while displaying no fractional digits.

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{Signed, Zero};

use crate::{digit_count, div_pow10_round, pow10, Numeric, NumericError, MAX_RESULT_SCALE};

/// How digits beyond the target scale are dropped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Drop {
    /// Half away from zero (`round_var`).
    Round,
    /// Toward zero (`trunc_var`).
    Truncate,
}

/// `mantissa × 10^-scale` brought to `target` decimal places (possibly negative): the new
/// mantissa at scale `max(target, 0)`.
fn rescale(mantissa: &BigInt, scale: u16, target: i32, drop: Drop) -> BigInt {
    let scale = i64::from(scale);
    let target = i64::from(target);
    if target >= scale {
        return mantissa * pow10((target.max(0) - scale) as u64);
    }
    let dropped = (scale - target) as u64;
    let kept = match drop {
        Drop::Round => div_pow10_round(mantissa, dropped),
        Drop::Truncate => mantissa / pow10(dropped),
    };
    if target < 0 {
        kept * pow10((-target) as u64)
    } else {
        kept
    }
}

impl Numeric {
    /// `round(self, places)` (`numeric_round`): half away from zero; the result's scale is
    /// `max(places, 0)` (so `round(1.5, 3)` is `1.500`). Specials are returned unchanged.
    pub fn round(&self, places: i32) -> Result<Numeric, NumericError> {
        self.round_with(places, Drop::Round)
    }

    /// `trunc(self, places)` (`numeric_trunc`): like `round` but toward zero.
    pub fn trunc(&self, places: i32) -> Result<Numeric, NumericError> {
        self.round_with(places, Drop::Truncate)
    }

    fn round_with(&self, places: i32, drop: Drop) -> Result<Numeric, NumericError> {
        let Numeric::Finite { mantissa, scale } = self else {
            return Ok(self.clone());
        };
        let places = places.clamp(-MAX_RESULT_SCALE, MAX_RESULT_SCALE);
        let rounded = rescale(mantissa, *scale, places, drop);
        Numeric::make(rounded, i64::from(places.max(0)))
    }

    /// `ceil(self)` (`numeric_ceil`): the smallest integer not below, scale 0.
    pub fn ceil(&self) -> Result<Numeric, NumericError> {
        self.to_integer(true)
    }

    /// `floor(self)` (`numeric_floor`): the largest integer not above, scale 0.
    pub fn floor(&self) -> Result<Numeric, NumericError> {
        self.to_integer(false)
    }

    fn to_integer(&self, up: bool) -> Result<Numeric, NumericError> {
        let Numeric::Finite { mantissa, scale } = self else {
            return Ok(self.clone());
        };
        let unit = pow10(u64::from(*scale));
        let result = if up {
            mantissa.div_ceil(&unit)
        } else {
            mantissa.div_floor(&unit)
        };
        Numeric::make(result, 0)
    }

    /// `scale(self)`: the display scale; `None` (SQL NULL) for NaN and the infinities.
    pub fn scale(&self) -> Option<i32> {
        match self {
            Numeric::Finite { scale, .. } => Some(i32::from(*scale)),
            _ => None,
        }
    }

    /// `min_scale(self)`: the fewest decimal places that represent the value exactly; `None`
    /// for NaN and the infinities.
    pub fn min_scale(&self) -> Option<i32> {
        match self {
            Numeric::Finite { mantissa, scale } => {
                Some(i32::from(*scale) - trailing_zeros(mantissa, *scale) as i32)
            }
            _ => None,
        }
    }

    /// `trim_scale(self)`: the value with its scale reduced to `min_scale`; specials unchanged.
    pub fn trim_scale(&self) -> Numeric {
        match self {
            Numeric::Finite { mantissa, scale } => {
                let zeros = trailing_zeros(mantissa, *scale);
                Numeric::Finite {
                    mantissa: mantissa / pow10(u64::from(zeros)),
                    scale: scale - zeros,
                }
            }
            other => other.clone(),
        }
    }

    /// Coerces to `numeric(precision, scale)` (`apply_typmod`): rounds to `scale` places
    /// (which PostgreSQL 15 allows to be negative or above the precision), then fails with
    /// 22003 `numeric field overflow` if the value needs more than `precision - scale` integer
    /// digits. NaN passes; an infinity always fails.
    pub fn apply_typmod(&self, precision: u32, scale: i32) -> Result<Numeric, NumericError> {
        let overflow = |detail: String| NumericError {
            sqlstate: "22003",
            message: "numeric field overflow".to_string(),
            detail: Some(detail),
        };
        let (mantissa, own_scale) = match self {
            Numeric::NaN => return Ok(Numeric::NaN),
            Numeric::PosInf | Numeric::NegInf => {
                return Err(overflow(format!(
                "A field with precision {precision}, scale {scale} cannot hold an infinite value."
            )))
            }
            Numeric::Finite { mantissa, scale } => (mantissa, *scale),
        };
        let rounded = rescale(mantissa, own_scale, scale, Drop::Round);
        let result_scale = scale.max(0);
        let max_integer_digits = precision as i64 - i64::from(scale);
        if !rounded.is_zero() {
            let integer_digits = digit_count(rounded.magnitude()) as i64 - i64::from(result_scale);
            if integer_digits > max_integer_digits {
                // PostgreSQL prints 10^0 as plain 1.
                let bound = match max_integer_digits {
                    0 => "1".to_string(),
                    d => format!("10^{d}"),
                };
                return Err(overflow(format!(
                    "A field with precision {precision}, scale {scale} must round to an absolute value less than {bound}."
                )));
            }
        }
        Numeric::make(rounded, i64::from(result_scale))
    }
}

/// How many of the `scale` fractional digits of the value are trailing zeros.
fn trailing_zeros(mantissa: &BigInt, scale: u16) -> u16 {
    if mantissa.is_zero() {
        return scale;
    }
    let mut m = mantissa.abs();
    let mut zeros = 0;
    let ten = BigInt::from(10);
    while zeros < scale {
        let (q, r) = m.div_rem(&ten);
        if !r.is_zero() {
            break;
        }
        m = q;
        zeros += 1;
    }
    zeros
}
