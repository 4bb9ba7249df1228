//! PostgreSQL's `numeric` in the SQL layer: exact, with up to PostgreSQL's number of digits and
//! a display scale of its own on every value (`1.50` prints `1.50`, `1 / 3` has 20 fractional
//! digits). DataFusion's decimals have one scale per column and 38 digits, so a numeric value
//! travels through plans as a `LargeBinary` string in `shoal_numeric`'s sortable encoding, and
//! no other SQL type uses `LargeBinary`. The encoding's bytes sort in value order, so DataFusion's
//! own sorts, min and max work on it unchanged; everything that computes with numerics, compares
//! them for equality or converts them is one of the functions in `kernels` and `aggregates`, put
//! in place of DataFusion's operators by the `plan` rule. See docs/numeric.md for the choice.

pub mod aggregates;
pub mod functions;
pub mod kernels;
pub mod plan;
mod relations;

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, LargeBinaryArray, LargeBinaryBuilder};
use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::{DataFusionError, Result as DfResult, ScalarValue};
use shoal_numeric::{Numeric, NumericError};

use crate::error::SqlError;

/// The Arrow type numeric values travel as.
pub const NUMERIC_ARROW: ArrowType = ArrowType::LargeBinary;

/// Whether a column or expression of this Arrow type holds numerics.
pub fn is_numeric(t: &ArrowType) -> bool {
    matches!(t, ArrowType::LargeBinary)
}

/// Whether this Arrow type is one of DataFusion's fixed-scale decimals, which only DataFusion's
/// own planning produces (decimal literals, casts); they become numerics.
pub fn is_decimal(t: &ArrowType) -> bool {
    matches!(
        t,
        ArrowType::Decimal32(..)
            | ArrowType::Decimal64(..)
            | ArrowType::Decimal128(..)
            | ArrowType::Decimal256(..)
    )
}

pub fn encode(n: &Numeric) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    n.encode_sortable(&mut out);
    out
}

/// The value of an encoded numeric. The bytes come from `encode`, so they always decode.
pub fn decode(bytes: &[u8]) -> Numeric {
    Numeric::decode_sortable(bytes).expect("numeric values in plans are well-formed")
}

/// The bytes that compare equal exactly when the values are equal (the display scale left out).
pub fn key_of(bytes: &[u8]) -> &[u8] {
    &bytes[..Numeric::sortable_key_len(bytes)]
}

pub fn scalar(n: Option<&Numeric>) -> ScalarValue {
    ScalarValue::LargeBinary(n.map(encode))
}

/// The numeric a scalar holds, None for NULL.
pub fn scalar_value(s: &ScalarValue) -> Option<Numeric> {
    match s {
        ScalarValue::LargeBinary(Some(b)) => Some(decode(b)),
        _ => None,
    }
}

pub fn array_from<I>(values: I) -> ArrayRef
where
    I: IntoIterator<Item = Option<Numeric>>,
{
    let values = values.into_iter();
    let mut b = LargeBinaryBuilder::with_capacity(values.size_hint().0, 16 * values.size_hint().0);
    let mut buf = Vec::with_capacity(16);
    for v in values {
        match v {
            Some(n) => {
                buf.clear();
                n.encode_sortable(&mut buf);
                b.append_value(&buf);
            }
            None => b.append_null(),
        }
    }
    Arc::new(b.finish())
}

/// The numeric at `row` of a numeric array, None for NULL.
pub fn value_at(array: &LargeBinaryArray, row: usize) -> Option<Numeric> {
    array.is_valid(row).then(|| decode(array.value(row)))
}

pub fn as_numeric_array(array: &dyn Array) -> DfResult<&LargeBinaryArray> {
    array.as_binary_opt::<i64>().ok_or_else(|| {
        DataFusionError::Internal(format!(
            "expected a numeric array, found {}",
            array.data_type()
        ))
    })
}

pub fn sql_error(e: NumericError) -> SqlError {
    let mut err = SqlError::new(e.sqlstate, e.message);
    err.detail = e.detail;
    err
}

/// A numeric failure as DataFusion carries errors out of a function, with its SQLSTATE.
pub fn df_error(e: NumericError) -> DataFusionError {
    DataFusionError::External(Box::new(sql_error(e)))
}
