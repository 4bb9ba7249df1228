//! PostgreSQL's base-10000 view of a finite numeric (`NumericVar`: a weight and NBASE digits).
//! Several of PostgreSQL's result-scale rules (division, square root, logarithm estimates) and
//! its binary wire format are stated in terms of this representation, so reproducing them
//! exactly needs the same digits and weight PostgreSQL would hold for the value.

use num_bigint::BigInt;
use num_traits::Zero;

use crate::pow10;

/// Decimal digits per base-10000 digit (`DEC_DIGITS`).
pub(crate) const DEC_DIGITS: i32 = 4;
/// The base of PostgreSQL's digits (`NBASE`).
pub(crate) const NBASE: i32 = 10_000;

/// A finite value as PostgreSQL holds it after `strip_var`: `digits[i] × 10000^(weight - i)`,
/// no leading or trailing zero digits, and zero as no digits with weight 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NBaseDigits {
    pub weight: i32,
    pub digits: Vec<u16>,
}

impl NBaseDigits {
    /// The base-10000 digits of `|mantissa| × 10^-scale`.
    pub(crate) fn of(mantissa: &BigInt, scale: u16) -> NBaseDigits {
        if mantissa.is_zero() {
            return NBaseDigits {
                weight: 0,
                digits: Vec::new(),
            };
        }
        // Align the scale to a whole base-10000 digit so the integer's digit groups line up.
        let groups_after_point = (i32::from(scale) + DEC_DIGITS - 1) / DEC_DIGITS;
        let pad = (groups_after_point * DEC_DIGITS - i32::from(scale)) as u64;
        let aligned = mantissa.magnitude() * pow10(pad).magnitude();
        let text = aligned.to_str_radix(10);
        let lead = (DEC_DIGITS as usize - text.len() % DEC_DIGITS as usize) % DEC_DIGITS as usize;
        let padded: Vec<u8> = std::iter::repeat_n(b'0', lead)
            .chain(text.bytes())
            .collect();
        let mut digits: Vec<u16> = padded
            .chunks(DEC_DIGITS as usize)
            .map(|c| c.iter().fold(0u16, |acc, d| acc * 10 + u16::from(d - b'0')))
            .collect();
        let weight = digits.len() as i32 - 1 - groups_after_point;
        while digits.last() == Some(&0) {
            digits.pop();
        }
        NBaseDigits { weight, digits }
    }

    /// The leading digit, or 0 for zero.
    pub(crate) fn first(&self) -> i32 {
        self.digits.first().map_or(0, |d| i32::from(*d))
    }
}
