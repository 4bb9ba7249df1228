//! A text cast to a fixed-length bit string and on to an integer, `(text)::bit(n)::int` (or
//! `::bigint`): how monitoring queries read hexadecimal (pgwatch's `wal` metric reads the
//! timeline of a WAL file name as `('x' || substr(name, 1, 8))::bit(32)::int`). Shoal has no
//! bit string type; the two casts together are rewritten into `pg_bit_text_to_int(text, n,
//! width)`, which does what PostgreSQL's bit_in and bittoint4/bittoint8 do in a row. Any other
//! use of `bit(n)` still names a type Shoal lacks (42704).

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{ScalarUDF, Volatility};
use datafusion::sql::sqlparser::ast::{self, DataType, Expr};

use super::functions::{sql_error, udf};
use super::rewrite::function_call;
use crate::error::{code, SqlError};

/// Rewrites `(e)::bit(n)::int4|int8` into `(pg_bit_text_to_int(e, n, width))::int4|int8`.
pub fn rewrite(expr: &mut Expr) {
    let Expr::Cast {
        expr: inner,
        data_type: outer,
        ..
    } = expr
    else {
        return;
    };
    let width: i64 = match outer {
        DataType::Int(_) | DataType::Integer(_) | DataType::Int4(_) => 32,
        DataType::BigInt(_) | DataType::Int8(_) => 64,
        _ => return,
    };
    let mut bits = inner.as_ref();
    while let Expr::Nested(e) = bits {
        bits = e;
    }
    let Expr::Cast {
        expr: text,
        data_type: DataType::Bit(Some(n)),
        ..
    } = bits
    else {
        return;
    };
    let (text, n) = (text.as_ref().clone(), *n);
    let number = |v: u64| Expr::value(ast::Value::Number(v.to_string(), false));
    // The outer cast stays, for the result's type (`::int` is an integer, not a bigint).
    let read = function_call(
        "pg_bit_text_to_int",
        vec![text, number(n), number(width as u64)],
    );
    *inner = Box::new(read);
}

pub fn register(state: &mut datafusion::execution::SessionState) {
    use datafusion::execution::FunctionRegistry;
    let f: ScalarUDF = udf(
        "pg_bit_text_to_int",
        &[3],
        ArrowType::Int64,
        Volatility::Immutable,
        |a| {
            let ScalarValue::Utf8(Some(text)) = a[0].cast_to(&ArrowType::Utf8)? else {
                return Ok(ScalarValue::Int64(None));
            };
            let int = |v: &ScalarValue| match v.cast_to(&ArrowType::Int64) {
                Ok(ScalarValue::Int64(Some(n))) => n as u32,
                _ => 0,
            };
            bit_text_to_int(&text, int(&a[1]), int(&a[2]))
                .map(|v| ScalarValue::Int64(Some(v)))
                .map_err(sql_error)
        },
    );
    state
        .register_udf(Arc::new(f))
        .expect("function registration cannot fail");
}

/// bit_in, the explicit cast to bit(`length`), then the cast to an integer of `width` bits
/// (32 or 64).
fn bit_text_to_int(text: &str, length: u32, width: u32) -> Result<i64, SqlError> {
    let (digits, bits_per_digit) = match text.as_bytes().first() {
        Some(b'x' | b'X') => (&text[1..], 4),
        Some(b'b' | b'B') => (&text[1..], 1),
        _ => (text, 1),
    };
    let mut bits: Vec<bool> = Vec::with_capacity(digits.len() * bits_per_digit);
    for c in digits.chars() {
        let value = match bits_per_digit {
            4 => c.to_digit(16).ok_or_else(|| {
                SqlError::new(
                    code::INVALID_TEXT_REPRESENTATION,
                    format!("\"{c}\" is not a valid hexadecimal digit"),
                )
            })?,
            _ => match c {
                '0' => 0,
                '1' => 1,
                _ => {
                    return Err(SqlError::new(
                        code::INVALID_TEXT_REPRESENTATION,
                        format!("\"{c}\" is not a valid binary digit"),
                    ))
                }
            },
        };
        bits.extend((0..bits_per_digit).rev().map(|i| value >> i & 1 == 1));
    }
    // An explicit cast to bit(n) zero-pads or truncates on the right, as PostgreSQL's does.
    bits.resize(length as usize, false);
    if bits.len() > width as usize {
        return Err(SqlError::new(
            code::NUMERIC_VALUE_OUT_OF_RANGE,
            match width {
                32 => "integer out of range",
                _ => "bigint out of range",
            },
        ));
    }
    let unsigned = bits.iter().fold(0u64, |acc, &b| acc << 1 | u64::from(b));
    Ok(match width {
        32 => unsigned as u32 as i32 as i64,
        _ => unsigned as i64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hexadecimal_and_binary_text_read_as_postgresql_reads_them() {
        assert_eq!(bit_text_to_int("x00000001", 32, 32).unwrap(), 1);
        assert_eq!(bit_text_to_int("xFFFFFFFF", 32, 32).unwrap(), -1);
        assert_eq!(bit_text_to_int("xFFFFFFFF", 32, 64).unwrap(), 4294967295);
        assert_eq!(bit_text_to_int("101", 3, 32).unwrap(), 5);
        assert_eq!(bit_text_to_int("x1", 32, 32).unwrap(), 0x1000_0000);
        assert_eq!(bit_text_to_int("x1234", 8, 32).unwrap(), 0x12);
        assert_eq!(
            bit_text_to_int("x123456789", 36, 32).unwrap_err().code,
            code::NUMERIC_VALUE_OUT_OF_RANGE
        );
        assert_eq!(
            bit_text_to_int("xzz", 8, 32).unwrap_err().code,
            code::INVALID_TEXT_REPRESENTATION
        );
    }
}
