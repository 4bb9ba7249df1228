//! DataFusion's `ceil`, `floor` and `round`, given only scalar arguments, build an array of
//! the batch's row count and read its first element back: on a batch of no rows (a filter
//! that kept nothing, with `ceil((SELECT ...))` in it) that read panics. Wrapped here, they
//! get a row count of one whenever every argument is a scalar, since the answer is then one
//! value whatever the batch's size.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, FieldRef};
use datafusion::common::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

/// The functions that read the first row of an array built from scalar arguments.
const FIRST_ROW_READERS: &[&str] = &["ceil", "floor", "round"];

pub fn register(state: &mut datafusion::execution::SessionState) {
    for name in FIRST_ROW_READERS {
        let Ok(inner) = state.udf(name) else {
            continue;
        };
        state
            .register_udf(Arc::new(ScalarUDF::new_from_impl(ScalarsOneRow { inner })))
            .expect("function registration cannot fail");
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ScalarsOneRow {
    inner: Arc<ScalarUDF>,
}

impl ScalarUDFImpl for ScalarsOneRow {
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
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        if all_scalar && !args.args.is_empty() {
            args.number_rows = 1;
        }
        self.inner.invoke_with_args(args)
    }
}
