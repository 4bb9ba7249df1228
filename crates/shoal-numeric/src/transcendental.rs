//! Square root, exponential, logarithms and power with PostgreSQL 15's result scales
//! (`numeric_sqrt`, `numeric_exp`, `numeric_ln`, `log_var`, `power_var`, `power_var_int`).
//! PostgreSQL picks each result scale from cheap estimates of the result's magnitude and, for
//! log and power, computes intermediate logarithms at scales of its choosing; this module
//! repeats those choices step by step, using the exact kernels in `fixed` for each step.

use num_bigint::BigInt;
use num_traits::{Signed, Zero};

use crate::arith::div_rounded;
use crate::fixed;
use crate::nbase::{NBaseDigits, DEC_DIGITS, NBASE};
use crate::{pow10, Numeric, NumericError, MAX_DISPLAY_SCALE, MAX_RESULT_SCALE, MIN_SIG_DIGITS};

/// `sqrt(m × 10^-scale)` rounded half up to `rscale` digits, as a mantissa at `rscale`.
pub(crate) fn sqrt_rounded(mantissa: &BigInt, scale: i32, rscale: i32) -> BigInt {
    // floor(sqrt(x) × 10^(rscale+1)) = isqrt(floor(x × 10^(2 rscale + 2))); the extra digit
    // decides the rounding, which is exact half-up since the truncated tail only adds.
    let shift = 2 * i64::from(rscale) + 2 - i64::from(scale);
    let radicand = if shift >= 0 {
        mantissa * pow10(shift as u64)
    } else {
        mantissa / pow10((-shift) as u64)
    };
    crate::div_pow10_round(&radicand.sqrt(), 1)
}

/// A finite value with a scale that may exceed the stored limit (intermediate results).
#[derive(Clone, Debug)]
pub(crate) struct Scaled {
    pub(crate) mantissa: BigInt,
    pub(crate) scale: i64,
}

impl Scaled {
    pub(crate) fn of(n: &Numeric) -> Option<Scaled> {
        match n {
            Numeric::Finite { mantissa, scale } => Some(Scaled {
                mantissa: mantissa.clone(),
                scale: i64::from(*scale),
            }),
            _ => None,
        }
    }

    pub(crate) fn to_f64(&self) -> f64 {
        let text = crate::text::format_finite(&self.mantissa, self.scale as usize);
        let v: f64 = text.parse().unwrap_or(0.0);
        v
    }

    pub(crate) fn into_numeric(self) -> Result<Numeric, NumericError> {
        Numeric::make(self.mantissa, self.scale)
    }

    /// `self × other` rounded to `rscale` (`mul_var` with an rscale).
    pub(crate) fn mul_round(&self, other: &Scaled, rscale: i64) -> Scaled {
        let product = &self.mantissa * &other.mantissa;
        let mantissa = fixed::round_to_scale(&product, -(self.scale + other.scale), rscale);
        Scaled {
            mantissa,
            scale: rscale,
        }
    }

    /// Compares with `numerator / denominator`.
    pub(crate) fn cmp_ratio(&self, numerator: i64, denominator: i64) -> std::cmp::Ordering {
        let lhs = &self.mantissa * denominator;
        let rhs = BigInt::from(numerator) * pow10(self.scale as u64);
        lhs.cmp(&rhs)
    }
}

/// PostgreSQL's literal for log10(e). Its scale estimates truncate products with it to
/// integers, so the same literal (not the exact constant) gives the same scales.
#[allow(clippy::approx_constant)]
pub(crate) const PG_LOG10_E: f64 = 0.434294481903252;
/// PostgreSQL's literal for ln(10), used in `estimate_ln_dweight` for the same reason.
#[allow(clippy::approx_constant)]
const PG_LN_10: f64 = 2.302585092994046;

/// Clamps a chosen result scale into PostgreSQL's [0, 1000] (`NUMERIC_MIN/MAX_DISPLAY_SCALE`).
pub(crate) fn clamp_rscale(rscale: i32) -> i32 {
    rscale.clamp(0, MAX_DISPLAY_SCALE)
}

/// `estimate_ln_dweight`: PostgreSQL's guess at the decimal weight of ln(x), which sets the
/// result scale of ln and log and the working scales of log and power.
pub(crate) fn estimate_ln_dweight(x: &Scaled) -> i32 {
    if !x.mantissa.is_positive() {
        return 0;
    }
    if x.cmp_ratio(9, 10).is_ge() && x.cmp_ratio(11, 10).is_le() {
        // Near 1, ln(x) ≈ x - 1, whose leading digit gives the weight.
        let d = &x.mantissa - pow10(x.scale as u64);
        if d.is_zero() {
            return 0;
        }
        let nb = NBaseDigits::of(&d, x.scale as u16);
        return nb.weight * DEC_DIGITS + f64::from(nb.first()).log10() as i32;
    }
    let nb = NBaseDigits::of(&x.mantissa, x.scale as u16);
    let mut digits = i64::from(nb.first());
    let mut dweight = nb.weight * DEC_DIGITS;
    if nb.digits.len() > 1 {
        digits = digits * i64::from(NBASE) + i64::from(nb.digits[1]);
        dweight -= DEC_DIGITS;
    }
    let ln_x = (digits as f64).ln() + f64::from(dweight) * PG_LN_10;
    ln_x.abs().log10() as i32
}

/// `ln_var`: ln(x) for positive x, rounded to `rscale`, with PostgreSQL's errors otherwise.
pub(crate) fn ln_var(x: &Scaled, rscale: i64) -> Result<Scaled, NumericError> {
    if x.mantissa.is_zero() {
        return Err(NumericError::new("2201E", "cannot take logarithm of zero"));
    }
    if x.mantissa.is_negative() {
        return Err(NumericError::new(
            "2201E",
            "cannot take logarithm of a negative number",
        ));
    }
    Ok(Scaled {
        mantissa: fixed::ln(&x.mantissa, x.scale, rscale as u64),
        scale: rscale,
    })
}

/// `exp_var`: e^x rounded to `rscale`; 22003 when the result could not be stored, zero when
/// it is too small to show.
pub(crate) fn exp_var(x: &Scaled, rscale: i64) -> Result<Scaled, NumericError> {
    let val = x.to_f64();
    if val.abs() >= f64::from(MAX_RESULT_SCALE * 3) {
        if val > 0.0 {
            return Err(NumericError::overflow());
        }
        return Ok(Scaled {
            mantissa: BigInt::zero(),
            scale: rscale,
        });
    }
    Ok(Scaled {
        mantissa: fixed::exp(&x.mantissa, x.scale, rscale as u64, val),
        scale: rscale,
    })
}

impl Numeric {
    /// `sqrt(self)` (`numeric_sqrt`): at least 16 significant digits and no fewer places than
    /// the input; 2201F `cannot take square root of a negative number`.
    pub fn sqrt(&self) -> Result<Numeric, NumericError> {
        let negative =
            || NumericError::new("2201F", "cannot take square root of a negative number");
        let (mantissa, scale) = match self {
            Numeric::NaN | Numeric::PosInf => return Ok(self.clone()),
            Numeric::NegInf => return Err(negative()),
            Numeric::Finite { mantissa, .. } if mantissa.is_negative() => return Err(negative()),
            Numeric::Finite { mantissa, scale } => (mantissa, *scale),
        };
        let nb = NBaseDigits::of(mantissa, scale);
        let sweight = (nb.weight + 1) * DEC_DIGITS / 2 - 1;
        let rscale = clamp_rscale((MIN_SIG_DIGITS - sweight).max(i32::from(scale)));
        Numeric::make(
            sqrt_rounded(mantissa, i32::from(scale), rscale),
            i64::from(rscale),
        )
    }

    /// `exp(self)` (`numeric_exp`): about 16 significant digits, no fewer places than the
    /// input; 22003 for arguments of 6000 and more.
    pub fn exp(&self) -> Result<Numeric, NumericError> {
        let x = match self {
            Numeric::NaN | Numeric::PosInf => return Ok(self.clone()),
            Numeric::NegInf => return Ok(Numeric::zero()),
            Numeric::Finite { .. } => Scaled::of(self).expect("finite"),
        };
        let val = (x.to_f64() * PG_LOG10_E)
            .clamp(-f64::from(MAX_RESULT_SCALE), f64::from(MAX_RESULT_SCALE));
        let rscale = clamp_rscale((MIN_SIG_DIGITS - val as i32).max(x.scale as i32));
        exp_var(&x, i64::from(rscale))?.into_numeric()
    }

    /// `ln(self)` (`numeric_ln`): 2201E for zero and negative inputs.
    pub fn ln(&self) -> Result<Numeric, NumericError> {
        let x = match self {
            Numeric::NaN | Numeric::PosInf => return Ok(self.clone()),
            Numeric::NegInf => {
                return Err(NumericError::new(
                    "2201E",
                    "cannot take logarithm of a negative number",
                ))
            }
            Numeric::Finite { .. } => Scaled::of(self).expect("finite"),
        };
        let rscale = clamp_rscale((MIN_SIG_DIGITS - estimate_ln_dweight(&x)).max(x.scale as i32));
        ln_var(&x, i64::from(rscale))?.into_numeric()
    }

    /// `log(self)`, the base-10 logarithm: PostgreSQL defines it as `log(10, x)`.
    pub fn log10(&self) -> Result<Numeric, NumericError> {
        Numeric::log(&Numeric::from_i64(10), self)
    }

    /// `log(base, x)` (`numeric_log` / `log_var`): ln(x) / ln(base) with PostgreSQL's scales;
    /// base 1 is 22012 `division by zero`.
    pub fn log(base: &Numeric, x: &Numeric) -> Result<Numeric, NumericError> {
        if let Some(special) = log_special(base, x)? {
            return Ok(special);
        }
        let (b, x) = (
            Scaled::of(base).expect("finite"),
            Scaled::of(x).expect("finite"),
        );
        let ln_base_dweight = estimate_ln_dweight(&b);
        let ln_num_dweight = estimate_ln_dweight(&x);
        let result_dweight = ln_num_dweight - ln_base_dweight;
        let rscale = clamp_rscale(
            (MIN_SIG_DIGITS - result_dweight)
                .max(b.scale as i32)
                .max(x.scale as i32),
        );
        let ln_base_rscale = (rscale + result_dweight - ln_base_dweight + 8).max(0);
        let ln_num_rscale = (rscale + result_dweight - ln_num_dweight + 8).max(0);
        let ln_base = ln_var(&b, i64::from(ln_base_rscale))?;
        let ln_num = ln_var(&x, i64::from(ln_num_rscale))?;
        if ln_base.mantissa.is_zero() {
            return Err(NumericError::division_by_zero());
        }
        let q = div_rounded(
            &ln_num.mantissa,
            ln_num.scale,
            &ln_base.mantissa,
            ln_base.scale,
            i64::from(rscale),
        );
        Numeric::make(q, i64::from(rscale))
    }
}

/// `numeric_log`'s answers when an input is NaN or infinite, or `None` for two finite inputs.
fn log_special(base: &Numeric, x: &Numeric) -> Result<Option<Numeric>, NumericError> {
    if base.is_finite() && x.is_finite() {
        return Ok(None);
    }
    if base.is_nan() || x.is_nan() {
        return Ok(Some(Numeric::NaN));
    }
    if base.signum() < 0 || x.signum() < 0 {
        return Err(NumericError::new(
            "2201E",
            "cannot take logarithm of a negative number",
        ));
    }
    if base.signum() == 0 || x.signum() == 0 {
        return Err(NumericError::new("2201E", "cannot take logarithm of zero"));
    }
    Ok(Some(match (base, x) {
        // log(Inf, Inf) is Inf/Inf.
        (Numeric::PosInf, Numeric::PosInf) => Numeric::NaN,
        (Numeric::PosInf, _) => Numeric::zero(),
        _ => Numeric::PosInf,
    }))
}
