//! `shoal_to_bpchar(text, n)`: the value of an explicit cast to char(n), blank-padded to n
//! characters and marked as `character(n)`, as a char(n) column's values are: comparisons,
//! `||` and text functions then ignore the padding (see `text_types`), and output shows it.
//! The cast's cut to n characters is made before (see `rewrite`).

use std::sync::Arc;

use datafusion::arrow::array::{Array, StringArray};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, FieldRef};
use datafusion::common::{exec_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, Volatility,
};

use crate::types::{oid, PG_TYPE_METADATA_KEY, PG_TYPMOD_METADATA_KEY};

pub const TO_BPCHAR: &str = "shoal_to_bpchar";

pub fn register(state: &mut datafusion::execution::SessionState) {
    use datafusion::execution::FunctionRegistry;
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(ToBpchar {
            signature: Signature::new(TypeSignature::Any(2), Volatility::Immutable),
        })))
        .expect("function registration cannot fail");
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ToBpchar {
    signature: Signature,
}

impl ScalarUDFImpl for ToBpchar {
    fn name(&self) -> &str {
        TO_BPCHAR
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let length = match args.scalar_arguments.get(1).copied().flatten() {
            Some(n) => match n.cast_to(&ArrowType::Int64)? {
                ScalarValue::Int64(Some(n)) => n,
                _ => return exec_err!("{TO_BPCHAR} needs a length"),
            },
            None => return exec_err!("{TO_BPCHAR} needs a constant length"),
        };
        let metadata = [
            (PG_TYPE_METADATA_KEY.to_string(), oid::BPCHAR.to_string()),
            (PG_TYPMOD_METADATA_KEY.to_string(), (length + 4).to_string()),
        ];
        Ok(Arc::new(
            Field::new(self.name(), ArrowType::Utf8, true).with_metadata(metadata.into()),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let width = match &args.args[1] {
            ColumnarValue::Scalar(n) => match n.cast_to(&ArrowType::Int64)? {
                ScalarValue::Int64(Some(n)) => u32::try_from(n).unwrap_or(0),
                _ => 0,
            },
            ColumnarValue::Array(_) => return exec_err!("{TO_BPCHAR} needs a constant length"),
        };
        let pad = |s: &str| crate::types::pad_char(s, width);
        match &args.args[0] {
            ColumnarValue::Scalar(v) => match v {
                ScalarValue::Utf8(s) => Ok(ColumnarValue::Scalar(ScalarValue::Utf8(
                    s.as_deref().map(pad),
                ))),
                other => exec_err!("{TO_BPCHAR} of {}", other.data_type()),
            },
            ColumnarValue::Array(a) => {
                let Some(strings) = a.as_any().downcast_ref::<StringArray>() else {
                    return exec_err!("{TO_BPCHAR} of {}", a.data_type());
                };
                let out: StringArray = strings.iter().map(|s| s.map(pad)).collect();
                Ok(ColumnarValue::Array(Arc::new(out)))
            }
        }
    }
}
