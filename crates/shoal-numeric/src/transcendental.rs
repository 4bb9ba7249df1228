//! Square root, exponential, logarithms and power.

use num_bigint::BigInt;

/// `sqrt(m × 10^-scale)` rounded half up to `rscale` digits, as a mantissa at `rscale`.
pub(crate) fn sqrt_rounded(mantissa: &BigInt, scale: i32, rscale: i32) -> BigInt {
    // floor(sqrt(x) × 10^(rscale+1)) = isqrt(floor(x × 10^(2 rscale + 2))); the extra digit
    // decides the rounding, which is exact half-up since the truncated tail only adds.
    let shift = 2 * i64::from(rscale) + 2 - i64::from(scale);
    let radicand = if shift >= 0 {
        mantissa * crate::pow10(shift as u64)
    } else {
        mantissa / crate::pow10((-shift) as u64)
    };
    let root = radicand.sqrt();
    crate::div_pow10_round(&root, 1)
}
