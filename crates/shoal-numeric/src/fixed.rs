//! Fixed-point kernels for the transcendental functions: natural logarithm, exponential and
//! integer powers evaluated on big integers with guard digits beyond the scale asked for, so
//! that rounding the kernel's answer to PostgreSQL's result scale gives PostgreSQL's digits.
//! A fixed-point value `F` at scale `w` stands for `F × 10^-w`.

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{One, Signed, Zero};

use crate::{digit_count, div_pow10_round, pow10};

/// Guard digits the kernels carry beyond the caller's scale; errors stay far below them.
const GUARD_DIGITS: u64 = 24;

/// `m × 10^-s` as a fixed-point value at scale `w`, truncated.
fn to_fixed(m: &BigInt, s: i64, w: u64) -> BigInt {
    let shift = w as i64 - s;
    if shift >= 0 {
        m * pow10(shift as u64)
    } else {
        m / pow10((-shift) as u64)
    }
}

/// `2 atanh(z)` for a fixed-point `|z| < 1` at scale `w` (its series converges geometrically
/// in z², quickly when z is small).
fn twice_atanh(z: &BigInt, w: u64) -> BigInt {
    let one = pow10(w);
    let z2 = z * z / &one;
    let mut power = z.clone();
    let mut sum = z.clone();
    let mut k = 1u64;
    loop {
        power = &power * &z2 / &one;
        k += 2;
        let term = &power / k;
        if term.is_zero() {
            break;
        }
        sum += term;
    }
    sum * 2
}

/// ln 2 and ln 10 at scale `w`: ln 2 = 2 atanh(1/3), ln 10 = 3 ln 2 + ln 1.25 = 3 ln 2 +
/// 2 atanh(1/9).
fn ln2_ln10(w: u64) -> (BigInt, BigInt) {
    let one = pow10(w);
    let ln2 = twice_atanh(&(&one / 3), w);
    let ln10 = &ln2 * 3 + twice_atanh(&(&one / 9), w);
    (ln2, ln10)
}

/// `ln(m × 10^-s)` for a positive value, as a fixed-point value at scale `w` accurate to well
/// below one unit in the last place.
pub(crate) fn ln(m: &BigInt, s: i64, w: u64) -> BigInt {
    debug_assert!(m.is_positive());
    let wi = w + GUARD_DIGITS;
    let one = pow10(wi);
    // x = y × 10^e10 with y in [0.1, 1).
    let digits = digit_count(m.magnitude()) as i64;
    let e10 = digits - s;
    let mut y = to_fixed(m, digits, wi);
    // Doubling brings y into [0.7, 1.4); ln 2 then accounts for it.
    let seven_tenths = &one * 7 / 10;
    let mut doublings = 0i64;
    while y < seven_tenths {
        y *= 2;
        doublings += 1;
    }
    // Square roots bring y within 1% of 1, where the atanh series converges fast; each one
    // halves the logarithm, undone by the shift below.
    let mut halvings = 0u32;
    while (&y - &one).abs() * 100 > one {
        y = (&y * &one).sqrt();
        halvings += 1;
    }
    let z = (&y - &one) * &one / (&y + &one);
    let ln_y = twice_atanh(&z, wi) << halvings;
    let (ln2, ln10) = ln2_ln10(wi);
    let total = ln_y - ln2 * doublings + ln10 * e10;
    div_pow10_round(&total, GUARD_DIGITS)
}

/// `exp(m × 10^-s)` as a fixed-point value at scale `w`, accurate to well below one unit in
/// the last place. The caller bounds the argument (PostgreSQL refuses |x| ≥ 6000).
pub(crate) fn exp(m: &BigInt, s: i64, w: u64, approx: f64) -> BigInt {
    // Digits before the point in the result, and the digits lost to k squarings (each one
    // doubles the relative error), are carried as extra working precision.
    let integer_digits = (approx * std::f64::consts::LOG10_E).max(0.0).ceil() as u64;
    let magnitude_bits = approx.abs().max(1.0).log2().ceil() as u64;
    let base_wi = w + GUARD_DIGITS + integer_digits;
    let extra_halvings = ((base_wi as f64).sqrt() as u64).max(8);
    let halvings = magnitude_bits + extra_halvings;
    let wi = base_wi + (halvings as f64 * std::f64::consts::LOG10_2).ceil() as u64 + 2;
    let one = pow10(wi);
    // t = x / 2^halvings, small enough for a short Taylor series.
    let t = to_fixed(m, s, wi) / (BigInt::one() << halvings as usize);
    let mut term = one.clone();
    let mut sum = one.clone();
    let mut n = 0u64;
    loop {
        n += 1;
        term = &term * &t / (&one * n);
        if term.is_zero() {
            break;
        }
        sum += &term;
    }
    for _ in 0..halvings {
        sum = &sum * &sum / &one;
    }
    div_pow10_round(&sum, wi - w)
}

/// `(m × 10^-s)^n` for n ≥ 1 as `(mantissa, exponent)` meaning `mantissa × 10^exponent`, kept
/// to at least `digits` significant digits (exact whenever the exact power fits in them).
pub(crate) fn pow_approx(m: &BigInt, s: i64, n: u32, digits: u64) -> (BigInt, i64) {
    let keep = |v: BigInt, e: i64| -> (BigInt, i64) {
        let len = digit_count(v.magnitude());
        if len > digits {
            let drop = len - digits;
            (v / pow10(drop), e + drop as i64)
        } else {
            (v, e)
        }
    };
    let mut base = (m.clone(), -s);
    let mut result = (BigInt::one(), 0i64);
    let mut bits = n;
    loop {
        if bits & 1 == 1 {
            result = keep(&result.0 * &base.0, result.1 + base.1);
        }
        bits >>= 1;
        if bits == 0 {
            break;
        }
        base = keep(&base.0 * &base.0, 2 * base.1);
    }
    result
}

/// `mantissa × 10^exponent` rounded half away from zero to `scale` decimal places, as the
/// mantissa at that scale.
pub(crate) fn round_to_scale(mantissa: &BigInt, exponent: i64, scale: i64) -> BigInt {
    let shift = exponent + scale;
    if shift >= 0 {
        mantissa * pow10(shift as u64)
    } else {
        div_pow10_round(mantissa, (-shift) as u64)
    }
}

/// `1 / (mantissa × 10^exponent)` rounded half away from zero to `scale` decimal places.
pub(crate) fn reciprocal_to_scale(mantissa: &BigInt, exponent: i64, scale: i64) -> BigInt {
    // 10^scale / (mantissa × 10^exponent) = 10^(scale - exponent) / mantissa
    let shift = scale - exponent;
    if shift >= 0 {
        crate::div_round_half_away(&pow10(shift as u64), mantissa)
    } else {
        crate::div_round_half_away(&BigInt::one(), &(mantissa * pow10((-shift) as u64)))
    }
}

/// Whether `m × 10^-s` is an integer.
pub(crate) fn is_integral(m: &BigInt, s: u16) -> bool {
    m.is_multiple_of(&pow10(u64::from(s)))
}
