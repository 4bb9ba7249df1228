//! float8 functions whose answers must be PostgreSQL's to the last bit: `cbrt` as the C
//! library PostgreSQL calls computes it (glibc's is not correctly rounded: `cbrt(0.125)` is
//! `0.49999999999999994` there, where Rust's own is `0.5`), and `sign`, which is 0 for NaN and -0 as
//! PostgreSQL's comparisons make it (DataFusion's signum answers NaN and -1).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, Float64Array};
use datafusion::arrow::datatypes::{DataType as ArrowType, Float64Type};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::execution::{FunctionRegistry, SessionState};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// glibc's cbrt (sysdeps/ieee754/dbl-64/s_cbrt.c), the one PostgreSQL calls on Linux: a
/// polynomial first guess on the mantissa, one Halley step, then 2^(e/3) with a table for
/// the exponent's remainder. Rust's own cbrt is correctly rounded and so differs from it in
/// the last bit now and then.
fn glibc_cbrt(x: f64) -> f64 {
    const CBRT_2: f64 = 1.259_921_049_894_873_164_8;
    const CBRT_2_SQUARED: f64 = 1.587_401_051_968_199_474_8;
    const FACTOR: [f64; 5] = [
        1.0 / CBRT_2_SQUARED,
        1.0 / CBRT_2,
        1.0,
        CBRT_2,
        CBRT_2_SQUARED,
    ];
    if x == 0.0 || !x.is_finite() {
        return x + x;
    }
    let (xm, xe) = frexp(x.abs());
    let u = 0.354_895_765_043_919_86
        + ((1.508_191_937_815_848_96
            + ((-2.114_994_941_673_712_87
                + ((2.446_931_225_635_344_3
                    + ((-1.834_692_774_836_130_86
                        + (0.784_932_344_976_639_262 - 0.145_263_899_385_486_377 * xm) * xm)
                        * xm))
                    * xm))
                * xm))
            * xm);
    let t2 = u * u * u;
    let ym = u * (t2 + 2.0 * xm) / (2.0 * t2 + xm) * FACTOR[(2 + xe % 3) as usize];
    let signed = if x > 0.0 { ym } else { -ym };
    // |xe / 3| <= 358, so 2^(xe / 3) is a normal double and the product rounds once.
    signed * 2f64.powi(xe / 3)
}

/// C's frexp for a finite non-zero `x`: (m, e) with x = m * 2^e and 0.5 <= |m| < 1.
fn frexp(x: f64) -> (f64, i32) {
    const MANTISSA_BITS: u32 = 52;
    const EXPONENT_MASK: u64 = 0x7ff << MANTISSA_BITS;
    // A subnormal is scaled into the normal range first.
    let (x, scaled) = if x.abs() < f64::MIN_POSITIVE {
        (x * 2f64.powi(54), -54)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let biased = ((bits & EXPONENT_MASK) >> MANTISSA_BITS) as i32;
    let mantissa = f64::from_bits((bits & !EXPONENT_MASK) | (1022 << MANTISSA_BITS));
    (mantissa, biased - 1022 + scaled)
}

/// PostgreSQL's float8 sign: comparisons with 0, so NaN and -0 are 0.
fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Function {
    Cbrt,
    Sign,
}

impl Function {
    fn apply(self, x: f64) -> f64 {
        match self {
            Function::Cbrt => glibc_cbrt(x),
            Function::Sign => sign(x),
        }
    }
}

pub fn register(state: &mut SessionState) {
    let functions: [(&str, &[&str], Function); 2] = [
        ("cbrt", &[], Function::Cbrt),
        ("signum", &["sign"], Function::Sign),
    ];
    for (name, aliases, function) in functions {
        let udf = FloatFunction {
            name,
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            function,
            signature: Signature::uniform(1, vec![ArrowType::Float64], Volatility::Immutable),
        };
        state
            .register_udf(Arc::new(ScalarUDF::new_from_impl(udf)))
            .expect("function registration cannot fail");
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct FloatFunction {
    name: &'static str,
    aliases: Vec<String>,
    function: Function,
    signature: Signature,
}

impl ScalarUDFImpl for FloatFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let input = args.args[0].to_array(args.number_rows.max(1))?;
        let out: Float64Array = input
            .as_primitive::<Float64Type>()
            .unary(|x| self.function.apply(x));
        let out: ArrayRef = Arc::new(out);
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_as_postgresql_on_glibc() {
        // PostgreSQL 15 on Debian's answers.
        assert_eq!(glibc_cbrt(0.125), 0.49999999999999994);
        assert_eq!(glibc_cbrt(27.0), 3.0000000000000004);
        assert_eq!(glibc_cbrt(2.5), 1.3572088082974532);
        assert_eq!(glibc_cbrt(-8.0), -2.0);
        assert_eq!(glibc_cbrt(1e300), 1e100);
        assert!(glibc_cbrt(f64::NAN).is_nan());
        assert_eq!(glibc_cbrt(f64::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(sign(f64::NAN), 0.0);
        assert_eq!(sign(-0.0), 0.0);
        assert_eq!(sign(-2.5), -1.0);
    }
}
