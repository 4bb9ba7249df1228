//! Conversions between numeric and the machine types, as PostgreSQL's casts do them: integers
//! round half away from zero and range-check (`numeric_int2/4/8`); floats become numeric
//! through `%.15g` / `%.6g` text (`float8_numeric`, `float4_numeric`), and numeric becomes a
//! float through its own text read by `strtod`/`strtof` (`numeric_float8`, `numeric_float4`).

use num_bigint::BigInt;
use num_traits::{ToPrimitive, Zero};

use crate::{div_pow10_round, pow10, Numeric, NumericError};

/// Significant digits PostgreSQL keeps when casting float8 to numeric (`DBL_DIG`).
const FLOAT8_DIGITS: u64 = 15;
/// Significant digits PostgreSQL keeps when casting float4 to numeric (`FLT_DIG`).
const FLOAT4_DIGITS: u64 = 6;

impl Numeric {
    /// The integer `v` with scale 0.
    pub fn from_i64(v: i64) -> Numeric {
        Numeric::Finite {
            mantissa: BigInt::from(v),
            scale: 0,
        }
    }

    /// `v × 10^-scale`, e.g. a 128-bit decimal mantissa from storage. Fails (22003) only for a
    /// scale above PostgreSQL's limit of 16383.
    pub fn from_i128(v: i128, scale: u16) -> Result<Numeric, NumericError> {
        Numeric::make(BigInt::from(v), i64::from(scale))
    }

    /// The mantissa and scale when the mantissa fits in an i128; `None` for specials and
    /// larger values.
    pub fn to_i128_scaled(&self) -> Option<(i128, u16)> {
        match self {
            Numeric::Finite { mantissa, scale } => mantissa.to_i128().map(|m| (m, *scale)),
            _ => None,
        }
    }

    /// `v::numeric` for a float8 (`float8_numeric`): the value rounded to 15 significant
    /// digits, trailing zeros dropped; NaN and the infinities map to their numeric twins.
    pub fn from_f64(v: f64) -> Result<Numeric, NumericError> {
        from_float(v, FLOAT8_DIGITS)
    }

    /// `v::numeric` for a float4 (`float4_numeric`): as `from_f64` with 6 significant digits.
    pub fn from_f32(v: f32) -> Result<Numeric, NumericError> {
        from_float(f64::from(v), FLOAT4_DIGITS)
    }

    /// `self::smallint`: rounds half away from zero; 22003 `smallint out of range`.
    pub fn to_i16(&self) -> Result<i16, NumericError> {
        let v = self.to_integer_checked("smallint")?;
        v.to_i16()
            .ok_or_else(|| NumericError::new("22003", "smallint out of range"))
    }

    /// `self::integer`: rounds half away from zero; 22003 `integer out of range`.
    pub fn to_i32(&self) -> Result<i32, NumericError> {
        let v = self.to_integer_checked("integer")?;
        v.to_i32()
            .ok_or_else(|| NumericError::new("22003", "integer out of range"))
    }

    /// `self::bigint`: rounds half away from zero; 22003 `bigint out of range`.
    pub fn to_i64(&self) -> Result<i64, NumericError> {
        let v = self.to_integer_checked("bigint")?;
        v.to_i64()
            .ok_or_else(|| NumericError::new("22003", "bigint out of range"))
    }

    /// The value rounded to an integer, or PostgreSQL's 0A000 error for NaN and infinities.
    fn to_integer_checked(&self, type_name: &str) -> Result<BigInt, NumericError> {
        match self {
            Numeric::NaN => Err(NumericError::new(
                "0A000",
                format!("cannot convert NaN to {type_name}"),
            )),
            Numeric::PosInf | Numeric::NegInf => Err(NumericError::new(
                "0A000",
                format!("cannot convert infinity to {type_name}"),
            )),
            Numeric::Finite { mantissa, scale } => Ok(div_pow10_round(mantissa, u64::from(*scale))),
        }
    }

    /// `self::float8` (`numeric_float8`): the correctly rounded double of the printed value.
    /// A value whose double would be infinite or zero (while it is not) is 22003
    /// `"<text>" is out of range for type double precision`, as `float8in` says.
    pub fn to_f64(&self) -> Result<f64, NumericError> {
        match self {
            Numeric::NaN => Ok(f64::NAN),
            Numeric::PosInf => Ok(f64::INFINITY),
            Numeric::NegInf => Ok(f64::NEG_INFINITY),
            Numeric::Finite { mantissa, .. } => {
                let text = self.to_pg_text();
                let v: f64 = text.parse().expect("numeric text is a valid float literal");
                if v.is_infinite() || (v == 0.0 && !mantissa.is_zero()) {
                    return Err(float_out_of_range(&text, "double precision"));
                }
                Ok(v)
            }
        }
    }

    /// `self::real` (`numeric_float4`): as `to_f64`, read with single precision.
    pub fn to_f32(&self) -> Result<f32, NumericError> {
        match self {
            Numeric::NaN => Ok(f32::NAN),
            Numeric::PosInf => Ok(f32::INFINITY),
            Numeric::NegInf => Ok(f32::NEG_INFINITY),
            Numeric::Finite { mantissa, .. } => {
                let text = self.to_pg_text();
                let v: f32 = text.parse().expect("numeric text is a valid float literal");
                if v.is_infinite() || (v == 0.0 && !mantissa.is_zero()) {
                    return Err(float_out_of_range(&text, "real"));
                }
                Ok(v)
            }
        }
    }
}

fn float_out_of_range(text: &str, type_name: &str) -> NumericError {
    NumericError::new(
        "22003",
        format!("\"{text}\" is out of range for type {type_name}"),
    )
}

/// The float `v` rounded to `digits` significant decimal digits the way glibc's `%.*g` does
/// (exactly, ties to even), then read back as numeric text would be.
fn from_float(v: f64, digits: u64) -> Result<Numeric, NumericError> {
    if v.is_nan() {
        return Ok(Numeric::NaN);
    }
    if v.is_infinite() {
        return Ok(if v > 0.0 {
            Numeric::PosInf
        } else {
            Numeric::NegInf
        });
    }
    if v == 0.0 {
        return Ok(Numeric::zero());
    }
    // A double is exactly m × 2^e, which is (m × 5^-e) × 10^e for negative e: an exact decimal.
    let (m, e) = decompose(v);
    let (exact, mut scale): (BigInt, i64) = if e >= 0 {
        (BigInt::from(m) << e as usize, 0)
    } else {
        (
            BigInt::from(m) * num_traits::pow::Pow::pow(BigInt::from(5), (-e) as u64),
            -e,
        )
    };
    let have = crate::digit_count(exact.magnitude());
    let mut mantissa = exact;
    if have > digits {
        mantissa = div_pow10_round_even(&mantissa, have - digits);
        scale -= (have - digits) as i64;
    }
    // %g drops trailing zeros, and the text then reads back with no more scale than needed.
    while scale > 0 && (&mantissa % 10u32).is_zero() {
        mantissa /= 10u32;
        scale -= 1;
    }
    if v < 0.0 {
        mantissa = -mantissa;
    }
    Numeric::make(mantissa, scale)
}

/// `n / 10^k` rounded half to even, as printf rounds the exact binary value.
fn div_pow10_round_even(n: &BigInt, k: u64) -> BigInt {
    let d = pow10(k);
    let (q, r) = num_integer::Integer::div_rem(n, &d);
    let twice = r * 2u32;
    match twice.magnitude().cmp(d.magnitude()) {
        std::cmp::Ordering::Less => q,
        std::cmp::Ordering::Greater => q + 1u32,
        std::cmp::Ordering::Equal if (&q % 2u32).is_zero() => q,
        std::cmp::Ordering::Equal => q + 1u32,
    }
}

/// Splits a finite non-zero double's magnitude into an integer significand and power of two.
fn decompose(v: f64) -> (u64, i64) {
    let bits = v.abs().to_bits();
    let exponent_bits = ((bits >> 52) & 0x7FF) as i64;
    let fraction = bits & ((1u64 << 52) - 1);
    if exponent_bits == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u64 << 52), exponent_bits - 1075)
    }
}
