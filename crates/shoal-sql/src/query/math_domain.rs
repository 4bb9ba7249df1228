//! Math functions outside their domain fail as in PostgreSQL instead of returning NaN or an
//! infinity: `ln(0)` is 2201E "cannot take logarithm of zero", `sqrt(-1)` 2201F, `0 ^ -1`
//! 2201F, and a finite input whose result overflows (`exp(1000)`) 22003. Each function wraps
//! DataFusion's own, which still computes the values: the wrapper checks the arguments first
//! and the result after.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Float64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType as ArrowType, FieldRef};
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

use crate::error::SqlError;

/// What arguments a function refuses, as PostgreSQL's error; the arguments as float8.
type DomainCheck = fn(&[f64]) -> Option<SqlError>;

const LOG_OF_ZERO: &str = "cannot take logarithm of zero";
const LOG_OF_NEGATIVE: &str = "cannot take logarithm of a negative number";
const INVALID_LOG_ARGUMENT: &str = "2201E";
const INVALID_POWER_ARGUMENT: &str = "2201F";

fn logarithm(args: &[f64]) -> Option<SqlError> {
    // log(b, x): both the base and the value must be positive, and the base not 1.
    for &x in args {
        if x == 0.0 {
            return Some(SqlError::new(INVALID_LOG_ARGUMENT, LOG_OF_ZERO));
        }
        if x < 0.0 {
            return Some(SqlError::new(INVALID_LOG_ARGUMENT, LOG_OF_NEGATIVE));
        }
    }
    if args.len() == 2 && args[0] == 1.0 {
        return Some(SqlError::new(
            crate::error::code::DIVISION_BY_ZERO,
            "division by zero",
        ));
    }
    None
}

fn square_root(args: &[f64]) -> Option<SqlError> {
    (args[0] < 0.0).then(|| {
        SqlError::new(
            INVALID_POWER_ARGUMENT,
            "cannot take square root of a negative number",
        )
    })
}

fn power(args: &[f64]) -> Option<SqlError> {
    let (base, exponent) = (args[0], args[1]);
    if base == 0.0 && exponent < 0.0 {
        return Some(SqlError::new(
            INVALID_POWER_ARGUMENT,
            "zero raised to a negative power is undefined",
        ));
    }
    if base < 0.0 && exponent.fract() != 0.0 {
        return Some(SqlError::new(
            INVALID_POWER_ARGUMENT,
            "a negative number raised to a non-integer power yields a complex result",
        ));
    }
    None
}

fn anything(_: &[f64]) -> Option<SqlError> {
    None
}

fn character_code(args: &[f64]) -> Option<SqlError> {
    let code = args[0];
    if code == 0.0 {
        return Some(SqlError::new(
            crate::error::code::PROGRAM_LIMIT_EXCEEDED,
            "null character not permitted",
        ));
    }
    (code < 0.0).then(|| {
        SqlError::new(
            crate::error::code::INVALID_PARAMETER_VALUE,
            "character number must be positive",
        )
    })
}

/// Wraps DataFusion's `ln`, `log`, `log10`, `sqrt`, `power`, `exp` and `chr` in domain
/// checks (and the numeric ones in an overflow check).
pub fn register(state: &mut datafusion::execution::SessionState) {
    let checks: [(&str, DomainCheck, bool); 7] = [
        ("ln", logarithm, true),
        ("log", logarithm, true),
        ("log10", logarithm, true),
        ("sqrt", square_root, true),
        ("power", power, true),
        ("exp", anything, true),
        ("chr", character_code, false),
    ];
    for (name, check, numeric_result) in checks {
        let Ok(inner) = state.udf(name) else {
            continue;
        };
        let wrapped = DomainChecked {
            inner,
            check,
            numeric_result,
        };
        state
            .register_udf(Arc::new(ScalarUDF::new_from_impl(wrapped)))
            .expect("function registration cannot fail");
    }
}

#[derive(Debug)]
struct DomainChecked {
    inner: Arc<ScalarUDF>,
    check: DomainCheck,
    /// The result is a number, which must not overflow to an infinity.
    numeric_result: bool,
}

// The check follows from the wrapped function, which alone tells two wrappers apart (function
// pointers are no identity to compare).
impl PartialEq for DomainChecked {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}

impl Eq for DomainChecked {}

impl std::hash::Hash for DomainChecked {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.hash(state);
    }
}

impl ScalarUDFImpl for DomainChecked {
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

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        // With only scalar arguments (constants, uncorrelated subqueries) DataFusion's functions
        // answer one value, as a scalar or a one-element array, whatever the batch's size:
        // that one value is what to check.
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if all_scalar { 1 } else { args.number_rows };
        let inputs = args
            .args
            .iter()
            .map(|a| a.to_array(rows).and_then(|a| as_float64(&a)))
            .collect::<DfResult<Vec<Float64Array>>>()?;
        let mut row_args = Vec::with_capacity(inputs.len());
        for row in 0..rows {
            if inputs.iter().any(|a| a.is_null(row)) {
                continue;
            }
            row_args.clear();
            row_args.extend(inputs.iter().map(|a| a.value(row)));
            if let Some(e) = (self.check)(&row_args) {
                return Err(DataFusionError::External(Box::new(e)));
            }
        }
        let result = self.inner.invoke_with_args(args)?;
        if !self.numeric_result {
            return Ok(result);
        }
        let output = as_float64(&result.to_array(rows)?)?;
        for row in 0..rows.min(output.len()) {
            let finite_inputs = inputs
                .iter()
                .all(|a| a.is_null(row) || a.value(row).is_finite());
            if output.is_valid(row) && output.value(row).is_infinite() && finite_inputs {
                return Err(DataFusionError::External(Box::new(SqlError::new(
                    crate::error::code::NUMERIC_VALUE_OUT_OF_RANGE,
                    "value out of range: overflow",
                ))));
            }
        }
        Ok(result)
    }
}

fn as_float64(array: &ArrayRef) -> DfResult<Float64Array> {
    let cast = cast(array, &ArrowType::Float64)?;
    Ok(cast
        .as_any()
        .downcast_ref::<Float64Array>()
        .expect("cast to Float64")
        .clone())
}
