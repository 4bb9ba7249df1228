//! Function results are dictionary-encoded only when they are text. Column tables scan text
//! columns as dictionaries (`shoal_storage::column`), and DataFusion's string functions keep
//! that encoding (`EncodingPreservation::dictionary`): they compute once per distinct value and
//! answer a dictionary of the results. For the ones that answer text (`upper`, `btrim`, ...)
//! that is a text column like the scanned one. For the ones that answer numbers (`length`,
//! `octet_length`, `bit_length`, `ascii`) it is a `Dictionary(Int32, Int32)`, which Shoal's
//! PostgreSQL type resolution does not take for an integer: `sum(length(pad))` over a column
//! table failed with "function sum(integer) does not exist". The wrapper here answers such
//! results as plain arrays of their value type (a gather of the per-value results), so
//! `length(pad)` is an integer wherever it goes.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, TypeSignature,
};

/// Wraps every function whose signature keeps dictionaries. Registered before Shoal's other
/// wrappers (`bytea`'s `length`, ...), which then wrap these.
pub fn register(state: &mut datafusion::execution::SessionState) {
    let mut seen = HashSet::new();
    let keeping: Vec<Arc<ScalarUDF>> = state
        .scalar_functions()
        .values()
        .filter(|f| keeps_dictionaries(&f.signature().type_signature))
        // Aliases map to the same function; its registration covers them.
        .filter(|f| seen.insert(f.name().to_string()))
        .cloned()
        .collect();
    for inner in keeping {
        state
            .register_udf(Arc::new(ScalarUDF::new_from_impl(PlainResults { inner })))
            .expect("function registration cannot fail");
    }
}

fn keeps_dictionaries(signature: &TypeSignature) -> bool {
    match signature {
        TypeSignature::Coercible(coercions) => coercions
            .iter()
            .any(|c| c.encoding_preservation().preserve_dictionary()),
        TypeSignature::OneOf(variants) => variants.iter().any(keeps_dictionaries),
        _ => false,
    }
}

/// The value type of a dictionary of anything but text.
fn plain(t: &ArrowType) -> Option<&ArrowType> {
    match t {
        ArrowType::Dictionary(_, v)
            if !matches!(
                v.as_ref(),
                ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View
            ) =>
        {
            Some(v.as_ref())
        }
        _ => None,
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct PlainResults {
    inner: Arc<ScalarUDF>,
}

impl ScalarUDFImpl for PlainResults {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        self.inner.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        let t = self.inner.return_type(arg_types)?;
        Ok(plain(&t).cloned().unwrap_or(t))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let field = self.inner.return_field_from_args(args)?;
        Ok(match plain(field.data_type()).cloned() {
            Some(v) => Arc::new(field.as_ref().clone().with_data_type(v)),
            None => field,
        })
    }

    fn is_strict(&self) -> bool {
        self.inner.is_strict()
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let answered = args.return_field.data_type().clone();
        // The inner function answers the type it promised (which debug builds check).
        let promised = {
            let scalars: Vec<Option<&ScalarValue>> = args
                .args
                .iter()
                .map(|a| match a {
                    ColumnarValue::Scalar(s) => Some(s),
                    ColumnarValue::Array(_) => None,
                })
                .collect();
            self.inner.return_field_from_args(ReturnFieldArgs {
                arg_fields: &args.arg_fields,
                scalar_arguments: &scalars,
            })?
        };
        args.return_field = promised;
        let result = self.inner.invoke_with_args(args)?;
        if result.data_type() == answered {
            return Ok(result);
        }
        result.cast_to(&answered, None)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }
}
