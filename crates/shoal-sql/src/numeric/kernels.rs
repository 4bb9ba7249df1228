//! The scalar functions over numerics: PostgreSQL's operators (`numeric_add`, `numeric_div`, ...),
//! its numeric functions (`round`, `sqrt`, `scale`, ...), the casts into numeric (`pg_numeric`,
//! with an optional typmod) and out of it, and `numeric_key`, the value without its display scale
//! that equality, IN lists and joins compare. Each one works row by row on decoded values: the
//! arithmetic is `shoal_numeric`'s, exact and with PostgreSQL's result scales. An argument that
//! is not yet numeric (an integer, a float, a text) is converted as PostgreSQL's implicit cast
//! would, so a call the plan rule did not prepare still gives PostgreSQL's answer.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryBuilder, Float32Builder, Float64Builder, Int16Builder,
    Int32Builder, Int64Array, Int64Builder, StringBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType as ArrowType, Decimal128Type, Decimal256Type, Float32Type, Float64Type,
};
use datafusion::common::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use shoal_numeric::{Numeric, NumericError};

use super::{array_from, as_numeric_array, df_error, value_at, NUMERIC_ARROW};
use crate::error::code;

/// What a numeric function computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    DivTrunc,
    Power,
    Log,
    Gcd,
    Lcm,
    Neg,
    Abs,
    Sign,
    Ceil,
    Floor,
    Sqrt,
    Exp,
    Ln,
    Log10,
    TrimScale,
    /// round(x) or round(x, digits)
    Round,
    /// trunc(x) or trunc(x, digits)
    Trunc,
    Scale,
    MinScale,
    Key,
    /// The key as hexadecimal text, which sorts as the key does: a window's ORDER BY, whose
    /// RANGE frames DataFusion runs over numbers and strings only.
    SortKey,
    /// Into numeric: pg_numeric(x) or pg_numeric(x, precision, scale).
    Cast,
    /// An array into numeric[]: each element as `Cast` converts it.
    CastArray,
    ToInt2,
    ToInt4,
    ToInt8,
    ToFloat4,
    ToFloat8,
    ToText,
}

impl Op {
    pub const ALL: [Op; 34] = [
        Op::Add,
        Op::Sub,
        Op::Mul,
        Op::Div,
        Op::Mod,
        Op::DivTrunc,
        Op::Power,
        Op::Log,
        Op::Gcd,
        Op::Lcm,
        Op::Neg,
        Op::Abs,
        Op::Sign,
        Op::Ceil,
        Op::Floor,
        Op::Sqrt,
        Op::Exp,
        Op::Ln,
        Op::Log10,
        Op::TrimScale,
        Op::Round,
        Op::Trunc,
        Op::Scale,
        Op::MinScale,
        Op::Key,
        Op::SortKey,
        Op::Cast,
        Op::CastArray,
        Op::ToInt2,
        Op::ToInt4,
        Op::ToInt8,
        Op::ToFloat4,
        Op::ToFloat8,
        Op::ToText,
    ];

    /// The registered name. `scale`, `min_scale`, `trim_scale` and `div` are PostgreSQL's own
    /// names, which only numeric has; the others are called by the plan rule.
    pub fn name(self) -> &'static str {
        match self {
            Op::Add => "numeric_add",
            Op::Sub => "numeric_sub",
            Op::Mul => "numeric_mul",
            Op::Div => "numeric_div",
            Op::Mod => "numeric_mod",
            Op::DivTrunc => "div",
            Op::Power => "numeric_power",
            Op::Log => "numeric_log",
            Op::Gcd => "numeric_gcd",
            Op::Lcm => "numeric_lcm",
            Op::Neg => "numeric_neg",
            Op::Abs => "numeric_abs",
            Op::Sign => "numeric_sign",
            Op::Ceil => "numeric_ceil",
            Op::Floor => "numeric_floor",
            Op::Sqrt => "numeric_sqrt",
            Op::Exp => "numeric_exp",
            Op::Ln => "numeric_ln",
            Op::Log10 => "numeric_log10",
            Op::TrimScale => "trim_scale",
            Op::Round => "numeric_round",
            Op::Trunc => "numeric_trunc",
            Op::Scale => "scale",
            Op::MinScale => "min_scale",
            Op::Key => "numeric_key",
            Op::SortKey => "numeric_sort_key",
            Op::Cast => "pg_numeric",
            Op::CastArray => "pg_numeric_array",
            Op::ToInt2 => "numeric_int2",
            Op::ToInt4 => "numeric_int4",
            Op::ToInt8 => "numeric_int8",
            Op::ToFloat4 => "numeric_float4",
            Op::ToFloat8 => "numeric_float8",
            Op::ToText => "numeric_out",
        }
    }

    fn return_type(self) -> ArrowType {
        match self {
            Op::Scale | Op::MinScale => ArrowType::Int32,
            Op::Key => ArrowType::Binary,
            Op::SortKey => ArrowType::Utf8,
            Op::ToInt2 => ArrowType::Int16,
            Op::ToInt4 => ArrowType::Int32,
            Op::ToInt8 => ArrowType::Int64,
            Op::ToFloat4 => ArrowType::Float32,
            Op::ToFloat8 => ArrowType::Float64,
            Op::ToText => ArrowType::Utf8,
            Op::CastArray => crate::types::arrow_type(&shoal_storage::types::DataType::Array(
                Box::new(shoal_storage::types::DataType::Numeric {
                    precision: None,
                    scale: None,
                }),
            )),
            _ => NUMERIC_ARROW,
        }
    }

    /// How many leading arguments are numerics; the rest are integers (digits, typmod).
    fn numeric_args(self, given: usize) -> usize {
        match self {
            Op::Round | Op::Trunc | Op::Cast => 1.min(given),
            Op::CastArray => 0,
            _ => given,
        }
    }
}

/// One numeric function.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct NumericFunction {
    op: Op,
    signature: Signature,
}

pub fn register(registry: &mut dyn FunctionRegistry) {
    for op in Op::ALL {
        let f = NumericFunction {
            op,
            signature: Signature::user_defined(Volatility::Immutable),
        };
        registry
            .register_udf(Arc::new(ScalarUDF::new_from_impl(f)))
            .expect("function registration cannot fail");
    }
}

/// The function for `op`, to call from a rewritten plan.
pub fn udf(op: Op) -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(NumericFunction {
        op,
        signature: Signature::user_defined(Volatility::Immutable),
    }))
}

impl ScalarUDFImpl for NumericFunction {
    fn name(&self) -> &str {
        self.op.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The arguments are taken as they come: `invoke_with_args` converts what is not numeric.
    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        Ok(arg_types.to_vec())
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(self.op.return_type())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if all_scalar { 1 } else { args.number_rows };
        let arrays = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<DfResult<Vec<_>>>()?;
        if self.op == Op::CastArray {
            let out = cast_list(&arrays)?;
            return Ok(if all_scalar {
                ColumnarValue::Scalar(datafusion::common::ScalarValue::try_from_array(&out, 0)?)
            } else {
                ColumnarValue::Array(out)
            });
        }
        let numeric_count = self.op.numeric_args(arrays.len());
        let mut numerics = Vec::with_capacity(numeric_count);
        for a in &arrays[..numeric_count] {
            numerics.push(to_numeric_array(a)?);
        }
        let integers = arrays[numeric_count..]
            .iter()
            .map(|a| Ok(cast(a, &ArrowType::Int64)?.as_primitive().clone()))
            .collect::<DfResult<Vec<Int64Array>>>()?;
        let out = evaluate(self.op, &numerics, &integers, rows)?;
        Ok(if all_scalar {
            ColumnarValue::Scalar(datafusion::common::ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

/// `pg_numeric_array(list [, precision, scale])`: each element of each list into numeric, with
/// the typmod applied; the lists keep their lengths and NULLs.
fn cast_list(arrays: &[ArrayRef]) -> DfResult<ArrayRef> {
    let list = match arrays[0].data_type() {
        ArrowType::List(_) => arrays[0].as_list::<i32>().clone(),
        ArrowType::Null => {
            return Ok(datafusion::arrow::array::new_null_array(
                &Op::CastArray.return_type(),
                arrays[0].len(),
            ))
        }
        other => {
            return Err(df_error(NumericError {
                sqlstate: code::CANNOT_COERCE,
                message: format!(
                    "cannot cast type {} to numeric[]",
                    crate::query::pg_catalog::format_type_oid(
                        crate::types::pg_oid_for_arrow(other),
                        -1
                    )
                    .unwrap_or_else(|| other.to_string())
                ),
                detail: None,
            }))
        }
    };
    let elements = list.values();
    let numerics = to_numeric_array(elements)?;
    let integers = arrays[1..]
        .iter()
        .map(|a| {
            // The typmod is one value for the whole call: repeated for each element.
            let v = cast(a, &ArrowType::Int64)?;
            let v = v.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
            let typmod = v.is_valid(0).then(|| v.value(0));
            Ok(Int64Array::from(vec![typmod; elements.len()]))
        })
        .collect::<DfResult<Vec<Int64Array>>>()?;
    let values = evaluate(Op::Cast, &[numerics], &integers, elements.len())?;
    let ArrowType::List(field) = Op::CastArray.return_type() else {
        unreachable!("numeric[] is a list")
    };
    Ok(Arc::new(datafusion::arrow::array::ListArray::try_new(
        field,
        list.offsets().clone(),
        values,
        list.nulls().cloned(),
    )?))
}

fn evaluate(
    op: Op,
    numerics: &[ArrayRef],
    integers: &[Int64Array],
    rows: usize,
) -> DfResult<ArrayRef> {
    let columns = numerics
        .iter()
        .map(|a| as_numeric_array(a.as_ref()))
        .collect::<DfResult<Vec<_>>>()?;
    let arg = |row: usize, i: usize| value_at(columns[i], row);
    let int = |row: usize, i: usize| integers[i].is_valid(row).then(|| integers[i].value(row));
    match op {
        Op::Scale | Op::MinScale => {
            let mut b = Int32Builder::with_capacity(rows);
            for row in 0..rows {
                let v = arg(row, 0).and_then(|n| match op {
                    Op::Scale => n.scale(),
                    _ => n.min_scale(),
                });
                b.append_option(v);
            }
            Ok(Arc::new(b.finish()))
        }
        Op::Key => {
            let mut b = BinaryBuilder::with_capacity(rows, rows * 12);
            for row in 0..rows {
                match columns[0].is_valid(row) {
                    true => b.append_value(super::key_of(columns[0].value(row))),
                    false => b.append_null(),
                }
            }
            Ok(Arc::new(b.finish()))
        }
        Op::SortKey => {
            let mut b = StringBuilder::with_capacity(rows, rows * 24);
            for row in 0..rows {
                match columns[0].is_valid(row) {
                    true => {
                        let key = super::key_of(columns[0].value(row));
                        b.append_value(
                            key.iter()
                                .map(|byte| format!("{byte:02x}"))
                                .collect::<String>(),
                        )
                    }
                    false => b.append_null(),
                }
            }
            Ok(Arc::new(b.finish()))
        }
        Op::ToInt2 | Op::ToInt4 | Op::ToInt8 | Op::ToFloat4 | Op::ToFloat8 | Op::ToText => {
            convert_out(op, columns[0], rows)
        }
        Op::Cast => {
            let typmod = match integers {
                [p, s] => Some((p, s)),
                _ => None,
            };
            let values = (0..rows).map(|row| {
                let n = arg(row, 0)?;
                Some(match typmod {
                    Some((p, s)) if p.is_valid(row) && s.is_valid(row) => {
                        n.apply_typmod(p.value(row) as u32, s.value(row) as i32)
                    }
                    _ => Ok(n),
                })
            });
            collect_numerics(values)
        }
        _ => {
            let values = (0..rows).map(|row| {
                let args: Option<Vec<Numeric>> = (0..columns.len()).map(|i| arg(row, i)).collect();
                let args = args?;
                let digits = if integers.is_empty() {
                    Some(0)
                } else {
                    int(row, 0)
                };
                let digits = digits?;
                Some(compute(op, &args, digits))
            });
            collect_numerics(values)
        }
    }
}

fn collect_numerics(
    values: impl Iterator<Item = Option<Result<Numeric, NumericError>>>,
) -> DfResult<ArrayRef> {
    let values = values
        .map(|v| v.transpose())
        .collect::<Result<Vec<Option<Numeric>>, NumericError>>()
        .map_err(df_error)?;
    Ok(array_from(values))
}

/// One row of an arithmetic function. `digits` is round's and trunc's second argument.
fn compute(op: Op, args: &[Numeric], digits: i64) -> Result<Numeric, NumericError> {
    let digits = digits.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
    let (a, b) = (&args[0], args.get(1));
    let second = || b.expect("binary numeric function called with two arguments");
    match op {
        Op::Add => a.add(second()),
        Op::Sub => a.sub(second()),
        Op::Mul => a.mul(second()),
        Op::Div => a.div(second()),
        Op::Mod => a.rem(second()),
        Op::DivTrunc => a.div_trunc(second()),
        Op::Power => a.power(second()),
        Op::Log => Numeric::log(a, second()),
        Op::Gcd => a.gcd(second()),
        Op::Lcm => a.lcm(second()),
        Op::Neg => Ok(a.neg()),
        Op::Abs => Ok(a.abs()),
        Op::Sign => Ok(a.sign()),
        Op::Ceil => a.ceil(),
        Op::Floor => a.floor(),
        Op::Sqrt => a.sqrt(),
        Op::Exp => a.exp(),
        Op::Ln => a.ln(),
        Op::Log10 => a.log10(),
        Op::TrimScale => Ok(a.trim_scale()),
        Op::Round => a.round(digits),
        Op::Trunc => a.trunc(digits),
        Op::Scale
        | Op::MinScale
        | Op::Key
        | Op::SortKey
        | Op::Cast
        | Op::CastArray
        | Op::ToInt2
        | Op::ToInt4
        | Op::ToInt8
        | Op::ToFloat4
        | Op::ToFloat8
        | Op::ToText => unreachable!("{op:?} is not arithmetic"),
    }
}

fn convert_out(
    op: Op,
    column: &datafusion::arrow::array::LargeBinaryArray,
    rows: usize,
) -> DfResult<ArrayRef> {
    macro_rules! build {
        ($builder:ty, $convert:expr) => {{
            let mut b = <$builder>::with_capacity(rows);
            for row in 0..rows {
                match value_at(column, row) {
                    Some(n) => b.append_value($convert(&n)?),
                    None => b.append_null(),
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    Ok(match op {
        Op::ToInt2 => build!(Int16Builder, |n: &Numeric| n.to_i16().map_err(df_error)),
        Op::ToInt4 => build!(Int32Builder, |n: &Numeric| n.to_i32().map_err(df_error)),
        Op::ToInt8 => build!(Int64Builder, |n: &Numeric| n.to_i64().map_err(df_error)),
        Op::ToFloat4 => build!(Float32Builder, |n: &Numeric| n.to_f32().map_err(df_error)),
        Op::ToFloat8 => build!(Float64Builder, |n: &Numeric| n.to_f64().map_err(df_error)),
        _ => {
            let mut b = StringBuilder::with_capacity(rows, rows * 8);
            for row in 0..rows {
                match value_at(column, row) {
                    Some(n) => b.append_value(n.to_pg_text()),
                    None => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
    })
}

/// Any array as numerics, converted as PostgreSQL converts into numeric: integers exactly,
/// floats to their 15 (float4: 6) significant digits, decimals with their scale, text by
/// numeric's input function.
pub fn to_numeric_array(array: &ArrayRef) -> DfResult<ArrayRef> {
    let rows = array.len();
    let convert = |f: &dyn Fn(usize) -> Result<Numeric, NumericError>| {
        collect_numerics((0..rows).map(|row| array.is_valid(row).then(|| f(row))))
    };
    match array.data_type() {
        t if super::is_numeric(t) => Ok(array.clone()),
        ArrowType::Null => Ok(array_from((0..rows).map(|_| None))),
        t if t.is_integer() => {
            let ints = cast(array, &ArrowType::Int64)?;
            let ints: &Int64Array = ints.as_primitive();
            convert(&|row| Ok(Numeric::from_i64(ints.value(row))))
        }
        ArrowType::Float16 | ArrowType::Float32 => {
            let floats = cast(array, &ArrowType::Float32)?;
            let floats = floats.as_primitive::<Float32Type>();
            convert(&|row| Numeric::from_f32(floats.value(row)))
        }
        ArrowType::Float64 => {
            let floats = array.as_primitive::<Float64Type>();
            convert(&|row| Numeric::from_f64(floats.value(row)))
        }
        ArrowType::Decimal128(_, scale) => {
            let decimals = array.as_primitive::<Decimal128Type>();
            let scale = *scale;
            convert(&|row| from_decimal(decimals.value(row), scale))
        }
        ArrowType::Decimal256(_, scale) => {
            let decimals = array.as_primitive::<Decimal256Type>();
            let scale = *scale;
            convert(&|row| Numeric::parse(&format!("{}e{}", decimals.value(row), -(scale as i32))))
        }
        ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => {
            let text = cast(array, &ArrowType::Utf8)?;
            let text = text.as_string::<i32>();
            convert(&|row| Numeric::parse(text.value(row)))
        }
        other => Err(df_error(NumericError {
            sqlstate: code::CANNOT_COERCE,
            message: format!(
                "cannot cast type {} to numeric",
                crate::query::pg_catalog::format_type_oid(
                    crate::types::pg_oid_for_arrow(other),
                    -1
                )
                .unwrap_or_else(|| other.to_string())
            ),
            detail: None,
        })),
    }
}

/// A decimal mantissa with its (possibly negative) Arrow scale as a numeric.
pub fn from_decimal(mantissa: i128, scale: i8) -> Result<Numeric, NumericError> {
    if scale >= 0 {
        return Numeric::from_i128(mantissa, scale as u16);
    }
    Numeric::parse(&format!("{mantissa}e{}", -(scale as i32)))
}

/// An array cast into or out of numeric, as a stored value is converted: into numeric from any
/// number or text; out of numeric to the integers (rounded, range-checked), floats and text.
pub fn cast_array(array: &ArrayRef, target: &ArrowType) -> DfResult<ArrayRef> {
    if super::is_numeric(target) {
        return to_numeric_array(array);
    }
    let op = match target {
        ArrowType::Int16 => Op::ToInt2,
        ArrowType::Int32 => Op::ToInt4,
        ArrowType::Int64 => Op::ToInt8,
        ArrowType::Float32 => Op::ToFloat4,
        ArrowType::Float64 => Op::ToFloat8,
        ArrowType::Utf8 => Op::ToText,
        other => {
            return Err(df_error(NumericError {
                sqlstate: code::CANNOT_COERCE,
                message: format!("cannot cast type numeric to {other}"),
                detail: None,
            }))
        }
    };
    convert_out(op, as_numeric_array(array.as_ref())?, array.len())
}
