//! DataFusion's own functions, taught that numeric exists. DataFusion types a statement while
//! planning it, before any analyzer rule runs, so `abs(x)`, `sum(x)` or `coalesce(x, 0)` over a
//! numeric column must already have a type then. Each wrapper here keeps its function's name and
//! behaviour for every other type, and for numeric arguments accepts them as they are, answers
//! PostgreSQL's result type, and computes with the numeric kernels (`abs`, `round`, ...) or the
//! numeric accumulator (`sum`, `avg`, the variances), exactly. `pg_negate` is unary minus, which
//! the planner would refuse for numerics (see `rewrite.rs`).

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::kernels::numeric::neg;
use datafusion::arrow::datatypes::{DataType as ArrowType, FieldRef};
use datafusion::common::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, GroupsAccumulator, ReturnFieldArgs,
    ReversedUDAF, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::aggregates::{numeric_accumulator, numeric_state_fields, Statistic};
use super::kernels::{self, Op};
use super::{is_decimal, is_numeric, NUMERIC_ARROW};

fn numeric_like(t: &ArrowType) -> bool {
    is_numeric(t) || is_decimal(t)
}

/// What a wrapped scalar function answers when a numeric is among its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Answer {
    /// Computed by the numeric kernel `plan::numeric_function` names for the call (one
    /// mapping from PostgreSQL's names and arities to kernels, shared with the plan rule).
    Kernel,
    /// The function itself over numerics (coalesce, greatest, least, nullif): the plan rule has
    /// made every argument numeric, or float8 when a float is among them.
    Generic,
    /// A function of float8 only: the plan rule converts the numeric to float8.
    Float,
}

const WRAPPED: &[(&str, Answer)] = &[
    ("abs", Answer::Kernel),
    ("sign", Answer::Kernel),
    ("signum", Answer::Kernel),
    ("ceil", Answer::Kernel),
    ("floor", Answer::Kernel),
    ("round", Answer::Kernel),
    ("trunc", Answer::Kernel),
    ("sqrt", Answer::Kernel),
    ("exp", Answer::Kernel),
    ("ln", Answer::Kernel),
    ("log10", Answer::Kernel),
    ("log", Answer::Kernel),
    ("power", Answer::Kernel),
    ("gcd", Answer::Kernel),
    ("lcm", Answer::Kernel),
    ("coalesce", Answer::Generic),
    ("nullif", Answer::Generic),
    ("greatest", Answer::Generic),
    ("least", Answer::Generic),
    ("cbrt", Answer::Float),
    ("degrees", Answer::Float),
    ("radians", Answer::Float),
    ("sin", Answer::Float),
    ("cos", Answer::Float),
    ("tan", Answer::Float),
    ("cot", Answer::Float),
    ("asin", Answer::Float),
    ("acos", Answer::Float),
    ("atan", Answer::Float),
    ("atan2", Answer::Float),
    ("sinh", Answer::Float),
    ("cosh", Answer::Float),
    ("tanh", Answer::Float),
    ("asinh", Answer::Float),
    ("acosh", Answer::Float),
    ("atanh", Answer::Float),
    ("isnan", Answer::Float),
    ("iszero", Answer::Float),
    ("nanvl", Answer::Float),
];

const WRAPPED_AGGREGATES: &[(&str, Statistic)] = &[
    ("sum", Statistic::Sum),
    ("avg", Statistic::Avg),
    (
        "stddev",
        Statistic::Moment(super::aggregates::Moment::StddevSamp),
    ),
    (
        "stddev_pop",
        Statistic::Moment(super::aggregates::Moment::StddevPop),
    ),
    ("var", Statistic::Moment(super::aggregates::Moment::VarSamp)),
    (
        "var_pop",
        Statistic::Moment(super::aggregates::Moment::VarPop),
    ),
];

/// Wraps the functions registered under the names above; runs after Shoal's other wrappers
/// (`builtins`, `math_domain`), which it keeps for non-numeric arguments.
pub fn register(state: &mut datafusion::execution::SessionState) {
    for (name, answer) in WRAPPED {
        let Ok(inner) = state.udf(name) else {
            continue;
        };
        let wrapped = NumericAware {
            signature: Signature::user_defined(inner.signature().volatility),
            inner,
            answer: *answer,
        };
        state
            .register_udf(Arc::new(ScalarUDF::new_from_impl(wrapped)))
            .expect("function registration cannot fail");
    }
    for (name, statistic) in WRAPPED_AGGREGATES {
        let Ok(inner) = state.udaf(name) else {
            continue;
        };
        let mut aliases = inner.aliases().to_vec();
        // PostgreSQL's name for the sample variance, which DataFusion lacks.
        if *name == "var" {
            aliases.push("variance".to_string());
        }
        let wrapped = NumericAwareAggregate {
            signature: Signature::user_defined(inner.signature().volatility),
            inner,
            statistic: *statistic,
            aliases,
        };
        state
            .register_udaf(Arc::new(AggregateUDF::new_from_impl(wrapped)))
            .expect("function registration cannot fail");
    }
    state
        .register_udf(Arc::new(ScalarUDF::new_from_impl(PgNegate {
            signature: Signature::any(1, Volatility::Immutable),
        })))
        .expect("function registration cannot fail");
}

/// The argument types the wrapped function's own signature asks for.
pub(crate) fn inner_coercion<
    F: datafusion::logical_expr::type_coercion::functions::UDFCoercionExt,
>(
    arg_types: &[ArrowType],
    inner: &F,
) -> DfResult<Vec<ArrowType>> {
    let fields: Vec<FieldRef> = arg_types
        .iter()
        .map(|t| {
            Arc::new(datafusion::arrow::datatypes::Field::new(
                "arg",
                t.clone(),
                true,
            ))
        })
        .collect();
    Ok(
        datafusion::logical_expr::type_coercion::functions::fields_with_udf(&fields, inner)?
            .iter()
            .map(|f| f.data_type().clone())
            .collect(),
    )
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct NumericAware {
    inner: Arc<ScalarUDF>,
    answer: Answer,
    /// User-defined, so that DataFusion asks `coerce_types`, which delegates to the inner
    /// function's own signature for other arguments.
    signature: Signature,
}

impl NumericAware {
    fn has_numeric(arg_types: &[ArrowType]) -> bool {
        arg_types.iter().any(numeric_like)
    }

    /// The argument types the inner function sees when numerics become float8.
    fn as_float(arg_types: &[ArrowType]) -> Vec<ArrowType> {
        arg_types
            .iter()
            .map(|t| match numeric_like(t) {
                true => ArrowType::Float64,
                false => t.clone(),
            })
            .collect()
    }
}

impl ScalarUDFImpl for NumericAware {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        if !Self::has_numeric(arg_types) {
            return inner_coercion(arg_types, self.inner.as_ref());
        }
        Ok(arg_types.to_vec())
    }

    /// coalesce, nullif and the like are simplified into CASE, which works on numerics too; the
    /// arithmetic functions are not (DataFusion's `power(x, 2)` simplifications are float's).
    fn simplify(
        &self,
        args: Vec<datafusion::logical_expr::Expr>,
        info: &datafusion::logical_expr::simplify::SimplifyContext,
    ) -> DfResult<datafusion::logical_expr::simplify::ExprSimplifyResult> {
        match self.answer {
            Answer::Generic => self.inner.simplify(args, info),
            _ => Ok(datafusion::logical_expr::simplify::ExprSimplifyResult::Original(args)),
        }
    }

    fn short_circuits(&self) -> bool {
        self.inner.short_circuits()
    }

    fn return_type(&self, arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        if !Self::has_numeric(arg_types) {
            return self.inner.return_type(arg_types);
        }
        match self.answer {
            Answer::Float => self.inner.return_type(&Self::as_float(arg_types)),
            Answer::Generic if arg_types.iter().any(|t| t.is_floating()) => Ok(ArrowType::Float64),
            _ => Ok(NUMERIC_ARROW),
        }
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let types: Vec<ArrowType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        if !Self::has_numeric(&types) {
            return self.inner.return_field_from_args(args);
        }
        let t = self.return_type(&types)?;
        Ok(Arc::new(datafusion::arrow::datatypes::Field::new(
            self.name(),
            t,
            true,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let types: Vec<ArrowType> = args.args.iter().map(|a| a.data_type()).collect();
        if !Self::has_numeric(&types) {
            return self.inner.invoke_with_args(args);
        }
        match self.answer {
            Answer::Kernel => {
                let op = super::plan::numeric_function(self.name(), args.args.len()).ok_or_else(
                    || {
                        datafusion::common::DataFusionError::Internal(format!(
                            "{} has no numeric form with {} arguments",
                            self.name(),
                            args.args.len()
                        ))
                    },
                )?;
                kernels::udf(op).invoke_with_args(args)
            }
            Answer::Generic => self.inner.invoke_with_args(args),
            Answer::Float => {
                let mut args = args;
                for a in &mut args.args {
                    if numeric_like(&a.data_type()) {
                        let array = a.to_array(args.number_rows)?;
                        *a = ColumnarValue::Array(kernels::cast_array(
                            &kernels::to_numeric_array(&array)?,
                            &ArrowType::Float64,
                        )?);
                    }
                }
                self.inner.invoke_with_args(args)
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct NumericAwareAggregate {
    inner: Arc<AggregateUDF>,
    statistic: Statistic,
    signature: Signature,
    aliases: Vec<String>,
}

impl NumericAwareAggregate {
    /// Whether PostgreSQL's result over this argument type is numeric: always over numerics;
    /// for avg and the variances over any integers.
    fn numeric_result(&self, arg_types: &[ArrowType]) -> bool {
        let [t] = arg_types else {
            return false;
        };
        // The sum of bigints is numeric too, but DataFusion's coercion has made the sum of
        // integers a sum of bigints by the time it asks again: the plan rule decides that one
        // where the argument's own type is still visible.
        match self.statistic {
            _ if numeric_like(t) => true,
            Statistic::Sum => false,
            _ => t.is_integer(),
        }
    }

    fn numeric_args(&self, args: &AccumulatorArgs) -> bool {
        is_numeric(args.return_field.data_type())
    }
}

impl AggregateUDFImpl for NumericAwareAggregate {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[ArrowType]) -> DfResult<Vec<ArrowType>> {
        if self.numeric_result(arg_types) {
            return Ok(arg_types.to_vec());
        }
        inner_coercion(arg_types, self.inner.as_ref())
    }

    fn return_type(&self, arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        if self.numeric_result(arg_types) {
            return Ok(NUMERIC_ARROW);
        }
        self.inner.return_type(arg_types)
    }

    fn is_nullable(&self) -> bool {
        self.inner.is_nullable()
    }

    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        if self.numeric_args(&args) {
            return Ok(numeric_accumulator(self.statistic, args.is_distinct));
        }
        self.inner.accumulator(args)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        if is_numeric(args.return_field.data_type()) {
            return Ok(numeric_state_fields(&args));
        }
        self.inner.state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        !self.numeric_args(&args) && self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> DfResult<Box<dyn GroupsAccumulator>> {
        self.inner.create_groups_accumulator(args)
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        if self.numeric_args(&args) {
            return Ok(numeric_accumulator(self.statistic, args.is_distinct));
        }
        self.inner.create_sliding_accumulator(args)
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        match self.inner.reverse_udf() {
            ReversedUDAF::Identical => ReversedUDAF::Identical,
            _ => ReversedUDAF::NotSupported,
        }
    }

    fn default_value(&self, data_type: &ArrowType) -> DfResult<datafusion::common::ScalarValue> {
        if is_numeric(data_type) {
            return Ok(datafusion::common::ScalarValue::LargeBinary(None));
        }
        self.inner.default_value(data_type)
    }

    fn schema_name(
        &self,
        params: &datafusion::logical_expr::expr::AggregateFunctionParams,
    ) -> DfResult<String> {
        self.inner.inner().schema_name(params)
    }
}

/// Unary minus of any type that has one: numerics by the kernel, the rest by Arrow's negation
/// (the plan rule hands them back to DataFusion's own `-`, whose integers check overflow).
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgNegate {
    signature: Signature,
}

impl ScalarUDFImpl for PgNegate {
    fn name(&self) -> &str {
        "pg_negate"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        match &arg_types[0] {
            t if is_decimal(t) => Ok(NUMERIC_ARROW),
            t => Ok(t.clone()),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        if numeric_like(&args.args[0].data_type()) {
            return kernels::udf(Op::Neg).invoke_with_args(args);
        }
        let array: ArrayRef = args.args[0].to_array(args.number_rows)?;
        Ok(ColumnarValue::Array(neg(&array)?))
    }
}
