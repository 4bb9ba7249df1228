//! `gcd` and `lcm` of integers keep their type, as in PostgreSQL: int2 and int4 arguments give
//! an integer, int8 ones a bigint, and a result outside the type is an error (`lcm(2147483647,
//! 2147483646)` is 22003 "integer out of range", where DataFusion answers a bigint).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, Int32Array, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType as ArrowType, Int64Type};
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::error::{code, SqlError};
use crate::query::functions::sql_error;

/// Replaces `gcd(a, b)` and `lcm(a, b)` over two integers with the typed, checked form.
/// Called on the plan as the SQL planner made it, while the arguments have their own types.
pub fn typed_gcd_lcm(e: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let Expr::ScalarFunction(ScalarFunction { func, args }) = &e else {
        return Ok(Transformed::no(e));
    };
    let lcm = match func.name() {
        "gcd" => false,
        "lcm" => true,
        _ => return Ok(Transformed::no(e)),
    };
    let types: Vec<ArrowType> = match args
        .iter()
        .map(|a| a.get_type(schema))
        .collect::<DfResult<Vec<_>>>()
    {
        Ok(t) if t.len() == 2 => t,
        _ => return Ok(Transformed::no(e)),
    };
    let integer =
        |t: &ArrowType| matches!(t, ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64);
    if !types.iter().all(integer) {
        return Ok(Transformed::no(e));
    }
    let bigint = types.contains(&ArrowType::Int64);
    let udf = ScalarUDF::new_from_impl(IntegerGcd {
        lcm,
        bigint,
        signature: Signature::exact(
            vec![ArrowType::Int64, ArrowType::Int64],
            Volatility::Immutable,
        ),
    });
    let args = args
        .iter()
        .map(|a| {
            Expr::Cast(datafusion::logical_expr::Cast::new(
                Box::new(a.clone()),
                ArrowType::Int64,
            ))
        })
        .collect();
    Ok(Transformed::yes(Expr::ScalarFunction(
        ScalarFunction::new_udf(Arc::new(udf), args),
    )))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct IntegerGcd {
    lcm: bool,
    /// The result is a bigint (an argument was); otherwise an integer.
    bigint: bool,
    signature: Signature,
}

impl ScalarUDFImpl for IntegerGcd {
    fn name(&self) -> &str {
        if self.lcm {
            "lcm"
        } else {
            "gcd"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(if self.bigint {
            ArrowType::Int64
        } else {
            ArrowType::Int32
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if scalar { 1 } else { args.number_rows };
        let a = args.args[0].to_array(rows)?;
        let b = args.args[1].to_array(rows)?;
        let (a, b) = (a.as_primitive::<Int64Type>(), b.as_primitive::<Int64Type>());
        let max = if self.bigint {
            i128::from(i64::MAX)
        } else {
            i128::from(i32::MAX)
        };
        let out: Int64Array = a
            .iter()
            .zip(b.iter())
            .map(|pair| match pair {
                (Some(a), Some(b)) => {
                    let v = if self.lcm { lcm(a, b) } else { gcd(a, b) };
                    if v > max {
                        let type_name = if self.bigint { "bigint" } else { "integer" };
                        return Err(sql_error(SqlError::new(
                            code::NUMERIC_VALUE_OUT_OF_RANGE,
                            format!("{type_name} out of range"),
                        )));
                    }
                    Ok(Some(v as i64))
                }
                _ => Ok(None),
            })
            .collect::<DfResult<_>>()?;
        let out: ArrayRef = if self.bigint {
            Arc::new(out)
        } else {
            let narrowed = cast(&out, &ArrowType::Int32)?;
            debug_assert!(narrowed.as_any().is::<Int32Array>());
            narrowed
        };
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

/// The greatest common divisor, never negative (computed wide: |i64::MIN| does not fit).
fn gcd(a: i64, b: i64) -> i128 {
    let (mut a, mut b) = (i128::from(a).abs(), i128::from(b).abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The least common multiple, never negative; 0 when either is 0.
fn lcm(a: i64, b: i64) -> i128 {
    if a == 0 || b == 0 {
        return 0;
    }
    (i128::from(a) / gcd(a, b) * i128::from(b)).abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcd_and_lcm_as_postgresql() {
        assert_eq!(gcd(12, -18), 6);
        assert_eq!(gcd(0, 0), 0);
        assert_eq!(gcd(i64::MIN, 0), 1 << 63);
        assert_eq!(lcm(4, 6), 12);
        assert_eq!(lcm(-4, 6), 12);
        assert_eq!(lcm(0, 5), 0);
        assert_eq!(lcm(2147483647, 2147483646), 4611686011984936962);
    }
}
