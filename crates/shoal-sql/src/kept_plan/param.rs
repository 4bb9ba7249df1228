//! A kept plan's parameters. DataFusion turns a placeholder into a value only by rewriting the
//! logical plan (`with_param_values`), which forces planning again for every execution. A kept
//! plan instead calls `ParamUdf`, a function of no arguments that returns the value bound to
//! its parameter for the running execution, read from the plan's `ParamSlot`.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::{exec_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use parking_lot::RwLock;

/// The values bound to one kept plan's parameters for the execution under way. Only one
/// execution of a kept plan runs at a time (see `KeptPlan`'s lease).
#[derive(Debug, Default)]
pub struct ParamSlot(RwLock<Vec<ScalarValue>>);

impl ParamSlot {
    pub fn set(&self, values: Vec<ScalarValue>) {
        *self.0.write() = values;
    }

    fn get(&self, index: usize) -> Option<ScalarValue> {
        self.0.read().get(index).cloned()
    }
}

/// Parameter `$n` of a kept plan: a Volatile function, so that no optimizer folds it into a
/// constant and keeps that constant for later executions.
#[derive(Debug)]
pub struct ParamUdf {
    /// `$1`, `$2`, ...: the name the placeholder had, so the plan's column names stay the same.
    id: String,
    index: usize,
    data_type: ArrowType,
    slot: Arc<ParamSlot>,
    signature: Signature,
}

impl ParamUdf {
    /// The call that stands for placeholder `id` (`$n`) of type `data_type`.
    pub fn call(id: &str, index: usize, data_type: ArrowType, slot: Arc<ParamSlot>) -> Expr {
        let udf = ParamUdf {
            id: id.to_string(),
            index,
            data_type,
            slot,
            signature: Signature::nullary(Volatility::Volatile),
        };
        Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::new(ScalarUDF::new_from_impl(udf)),
            vec![],
        ))
    }

    fn value(&self) -> DfResult<ScalarValue> {
        match self.slot.get(self.index) {
            Some(v) if v.data_type() == self.data_type => Ok(v),
            // Values arrive typed as the placeholders are (see `KeptPlan::accepts`); a NULL
            // may come untyped.
            Some(v) if v.is_null() => ScalarValue::try_from(&self.data_type),
            // A list's element field carries the element's PostgreSQL type (uuid[]), which a
            // cast does not put on the value: the list is rebuilt with the planned field.
            Some(ScalarValue::List(list)) => match &self.data_type {
                ArrowType::List(field) => {
                    let (_, offsets, values, nulls) = list.as_ref().clone().into_parts();
                    let values = datafusion::arrow::compute::cast(&values, field.data_type())?;
                    Ok(ScalarValue::List(Arc::new(
                        datafusion::arrow::array::ListArray::try_new(
                            field.clone(),
                            offsets,
                            values,
                            nulls,
                        )?,
                    )))
                }
                _ => ScalarValue::List(list).cast_to(&self.data_type),
            },
            Some(v) => v.cast_to(&self.data_type),
            None => exec_err!("no value bound to parameter {}", self.id),
        }
    }
}

/// The value bound to the parameter `f` calls, when `f` is a kept plan's parameter.
pub fn bound_value(f: &ScalarFunction) -> Option<ScalarValue> {
    let param = f.func.inner().downcast_ref::<ParamUdf>()?;
    param.value().ok()
}

impl PartialEq for ParamUdf {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index
            && self.data_type == other.data_type
            && Arc::ptr_eq(&self.slot, &other.slot)
    }
}

impl Eq for ParamUdf {}

impl Hash for ParamUdf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.index.hash(state);
        self.data_type.hash(state);
        Arc::as_ptr(&self.slot).hash(state);
    }
}

impl ScalarUDFImpl for ParamUdf {
    fn name(&self) -> &str {
        "shoal_param"
    }

    fn display_name(&self, _args: &[Expr]) -> DfResult<String> {
        Ok(self.id.clone())
    }

    fn schema_name(&self, _args: &[Expr]) -> DfResult<String> {
        Ok(self.id.clone())
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(self.data_type.clone())
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Ok(ColumnarValue::Scalar(self.value()?))
    }
}
