//! `numeric_power` (`x ^ y`, `power(x, y)`) as PostgreSQL 15 computes it: POSIX pow's rules
//! for NaN and the infinities, integer exponents by repeated multiplication at a scale of at
//! least 16 and the base's (`power_var_int`), and other exponents as exp(y · ln x) with the
//! scales `power_var` derives from a low-precision first pass.

use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};

use crate::fixed;
use crate::nbase::{NBaseDigits, DEC_DIGITS, NBASE};
use crate::transcendental::{
    clamp_rscale, estimate_ln_dweight, exp_var, ln_var, Scaled, PG_LOG10_E,
};
use crate::{Numeric, NumericError, MAX_DISPLAY_SCALE, MAX_RESULT_SCALE, MIN_SIG_DIGITS};

fn zero_to_negative() -> NumericError {
    NumericError::new("2201F", "zero raised to a negative power is undefined")
}

fn complex_result() -> NumericError {
    NumericError::new(
        "2201F",
        "a negative number raised to a non-integer power yields a complex result",
    )
}

/// Whether a value is an integer; PostgreSQL counts the infinities as integral.
fn is_integral(n: &Numeric) -> bool {
    match n {
        Numeric::NaN => false,
        Numeric::PosInf | Numeric::NegInf => true,
        Numeric::Finite { mantissa, scale } => fixed::is_integral(mantissa, *scale),
    }
}

/// Whether an integral value is odd.
fn is_odd(n: &Numeric) -> bool {
    match n {
        Numeric::Finite { mantissa, scale } if fixed::is_integral(mantissa, *scale) => {
            let integer = mantissa / crate::pow10(u64::from(*scale));
            !(integer % 2u32).is_zero()
        }
        _ => false,
    }
}

impl Numeric {
    /// `self ^ exp` (`numeric_power`). Errors as PostgreSQL: 2201F for zero to a negative
    /// power and for a negative base with a non-integer exponent, 22003 when the result
    /// cannot be stored.
    pub fn power(&self, exp: &Numeric) -> Result<Numeric, NumericError> {
        if !self.is_finite() || !exp.is_finite() {
            return power_special(self, exp);
        }
        if self.signum() == 0 && exp.signum() < 0 {
            return Err(zero_to_negative());
        }
        if self.signum() < 0 && !is_integral(exp) {
            return Err(complex_result());
        }
        let base = Scaled::of(self).expect("finite");
        let exponent = Scaled::of(exp).expect("finite");
        if let Some(n) = small_integer(exp) {
            let rscale = clamp_rscale(MIN_SIG_DIGITS.max(base.scale as i32));
            return power_var_int(&base, n, i64::from(rscale))?.into_numeric();
        }
        power_var(&base, &exponent, is_odd(exp))?.into_numeric()
    }
}

/// The exponent as an i32 when it is an integer in range (`power_var`'s fast-path test).
fn small_integer(exp: &Numeric) -> Option<i32> {
    let Numeric::Finite { mantissa, scale } = exp else {
        return None;
    };
    if !fixed::is_integral(mantissa, *scale) {
        return None;
    }
    (mantissa / crate::pow10(u64::from(*scale))).to_i32()
}

/// POSIX pow's rules for NaN and infinite inputs, as `numeric_power` applies them.
fn power_special(x: &Numeric, y: &Numeric) -> Result<Numeric, NumericError> {
    let one = Numeric::one();
    if x.is_nan() {
        return Ok(if y.is_finite() && y.is_zero() {
            one
        } else {
            Numeric::NaN
        });
    }
    if y.is_nan() {
        return Ok(if *x == one { one } else { Numeric::NaN });
    }
    let (sign_x, sign_y) = (x.signum(), y.signum());
    if sign_x == 0 && sign_y < 0 {
        return Err(zero_to_negative());
    }
    if sign_x < 0 && !is_integral(y) {
        return Err(complex_result());
    }
    if *x == one || sign_y == 0 {
        return Ok(one);
    }
    if !y.is_finite() {
        if *x == Numeric::from_i64(-1) {
            return Ok(one);
        }
        let abs_x_gt_one = !x.is_finite() || x.abs() > one;
        return Ok(if abs_x_gt_one == (sign_y > 0) {
            Numeric::PosInf
        } else {
            Numeric::zero()
        });
    }
    // x is ±Infinity and y finite and non-zero.
    Ok(match (x, sign_y > 0) {
        (Numeric::PosInf, true) => Numeric::PosInf,
        (_, false) => Numeric::zero(),
        (_, true) if is_odd(y) => Numeric::NegInf,
        _ => Numeric::PosInf,
    })
}

/// `power_var_int`: base^n for an i32 exponent, rounded to `rscale`.
fn power_var_int(base: &Scaled, n: i32, rscale: i64) -> Result<Scaled, NumericError> {
    let at = |mantissa: BigInt| {
        Ok(Scaled {
            mantissa,
            scale: rscale,
        })
    };
    match n {
        0 => return at(crate::pow10(rscale as u64)),
        1 => return at(fixed::round_to_scale(&base.mantissa, -base.scale, rscale)),
        -1 => {
            return at(fixed::reciprocal_to_scale(
                &base.mantissa,
                -base.scale,
                rscale,
            ))
        }
        2 => return Ok(base.mul_round(base, rscale)),
        _ => {}
    }
    if base.mantissa.is_zero() {
        if n < 0 {
            return Err(NumericError::division_by_zero());
        }
        return at(BigInt::zero());
    }
    // PostgreSQL's estimate of log10(result) from the leading 16 or so digits.
    let nb = NBaseDigits::of(&base.mantissa, base.scale as u16);
    let mut f = f64::from(nb.first());
    let mut p = nb.weight * DEC_DIGITS;
    for (i, d) in nb.digits.iter().enumerate().skip(1) {
        if i as i32 * DEC_DIGITS >= 16 {
            break;
        }
        f = f * f64::from(NBASE) + f64::from(*d);
        p -= DEC_DIGITS;
    }
    let f = f64::from(n) * (f.log10() + f64::from(p));
    if f > f64::from(3 * i32::from(i16::MAX) * DEC_DIGITS) {
        return Err(NumericError::overflow());
    }
    if f + 1.0 < -(rscale as f64) || f + 1.0 < -f64::from(MAX_DISPLAY_SCALE) {
        return at(BigInt::zero());
    }
    let sig_digits = 1 + rscale + f as i64 + f64::from(n).abs().ln() as i64 + 8;
    // Extra digits beyond PostgreSQL's own guard make the last digit reliable.
    let (mantissa, exponent) = fixed::pow_approx(
        &base.mantissa,
        base.scale,
        n.unsigned_abs(),
        sig_digits.max(1) as u64 + 16,
    );
    let negative_base = base.mantissa.is_negative() && n % 2 != 0;
    let mantissa = if negative_base {
        -mantissa.abs()
    } else {
        mantissa.abs()
    };
    if n < 0 {
        return at(fixed::reciprocal_to_scale(&mantissa, exponent, rscale));
    }
    at(fixed::round_to_scale(&mantissa, exponent, rscale))
}

/// `power_var` for a non-integer (or out-of-i32-range) exponent: exp(y · ln |x|) with the
/// result scale chosen from a first pass at about 8 significant digits.
fn power_var(base: &Scaled, exp: &Scaled, odd_exponent: bool) -> Result<Scaled, NumericError> {
    if base.mantissa.is_zero() {
        return Ok(Scaled {
            mantissa: BigInt::zero(),
            scale: i64::from(MIN_SIG_DIGITS),
        });
    }
    let negative_result = base.mantissa.is_negative() && odd_exponent;
    let abs_base = Scaled {
        mantissa: base.mantissa.abs(),
        scale: base.scale,
    };
    let ln_dweight = estimate_ln_dweight(&abs_base);
    let local_rscale = i64::from((8 - ln_dweight).max(0));
    let ln_base = ln_var(&abs_base, local_rscale)?;
    let ln_num = ln_base.mul_round(exp, local_rscale);
    let mut val = ln_num.to_f64();
    if val.abs() > f64::from(MAX_RESULT_SCALE) * 3.01 {
        if val > 0.0 {
            return Err(NumericError::overflow());
        }
        return Ok(Scaled {
            mantissa: BigInt::zero(),
            scale: i64::from(MAX_DISPLAY_SCALE),
        });
    }
    val *= PG_LOG10_E;
    let rscale = clamp_rscale(
        (MIN_SIG_DIGITS - val as i32)
            .max(base.scale as i32)
            .max(exp.scale as i32),
    );
    let sig_digits = (rscale + val as i32).max(0);
    let local_rscale = i64::from((sig_digits - ln_dweight + 8).max(0));
    let ln_base = ln_var(&abs_base, local_rscale)?;
    let ln_num = ln_base.mul_round(exp, local_rscale);
    let mut result = exp_var(&ln_num, i64::from(rscale))?;
    if negative_result {
        result.mantissa = -result.mantissa;
    }
    Ok(result)
}
