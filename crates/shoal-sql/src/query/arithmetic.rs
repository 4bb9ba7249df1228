//! PostgreSQL's arithmetic on DataFusion's plans. DataFusion types every integer literal as a
//! bigint, lets integer arithmetic wrap around, divides floats by zero into infinity, truncates
//! numbers cast to integers and rounds floats half away from zero. PostgreSQL types a literal
//! that fits in four bytes as integer, raises `integer out of range` (22003) on overflow and
//! `division by zero` (22012) for floats too, rounds numbers cast to integers, and rounds
//! floats half to even. `type_for_postgres` retypes a freshly planned statement before DataFusion's
//! type coercion; the `PgArithmetic` analyzer rule runs after the coercion, when every operand
//! has its final type, and swaps the operators and functions that behave differently for the
//! checked versions below, named after PostgreSQL's own (`int4pl`, `float8div`, `dround`).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::compute::try_binary;
use datafusion::arrow::datatypes::{
    ArrowNativeTypeOp, ArrowPrimitiveType, DataType as ArrowType, Float32Type, Float64Type,
    Int16Type, Int32Type, Int64Type,
};
use datafusion::arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::{BinaryExpr, Cast, ScalarFunction};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::error::{code, SqlError};
use crate::query::expr_pass::rewrite_expressions_up;

/// Gives integer literals PostgreSQL's type (integer when the value fits in four bytes, bigint
/// otherwise, as DataFusion already has it), and a few functions of numbers their PostgreSQL
/// result type. Runs once, on a plan straight from the SQL planner.
pub fn type_for_postgres(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    // The work table of a recursive query keeps the types its first term was planned with.
    let skip_recursive = |node: LogicalPlan| {
        Ok(match node {
            LogicalPlan::RecursiveQuery(_) => {
                Transformed::new(node, false, TreeNodeRecursion::Jump)
            }
            _ => Transformed::no(node),
        })
    };
    plan.transform_down_up_with_subqueries(skip_recursive, |node| {
        // A VALUES list keeps the schema it was planned with, and LIMIT/OFFSET need bigints.
        if matches!(
            node,
            LogicalPlan::Values(_) | LogicalPlan::Limit(_) | LogicalPlan::RecursiveQuery(_)
        ) {
            return Ok(Transformed::no(node));
        }
        let schema = datafusion::logical_expr::utils::merge_schema(&node.inputs());
        let names = NamePreserver::new(&node);
        node.map_expressions(|e| {
            let saved = names.save(&e);
            e.transform_down(retype_literal)?
                .transform_data(|e| e.transform_up(|e| sum_of_bigint(e, &schema)))?
                .transform_data(|e| e.transform_up(|e| nullif_of_integers(e, &schema)))?
                .transform_data(|e| {
                    e.transform_up(|e| crate::query::integer_gcd::typed_gcd_lcm(e, &schema))
                })?
                .transform_data(|e| {
                    e.transform_up(|e| Ok(crate::interval::order::keyed_expr(e, &schema)))
                })
                .map(|t| t.update_data(|e| saved.restore(e)))
        })?
        // The numeric rule runs here too: a sum of bigints just became numeric, and the
        // operators above it must become numeric ones before their types are computed again.
        .transform_data(crate::numeric::plan::rewrite_node)?
        .transform_data(crate::query::window_types::cast_ranks)
    })
    .map(|t| t.data)
}

/// `nullif(a, b)` has the type of `a` in PostgreSQL when both are integers (there is an `=`
/// between every two integer types), where DataFusion widens it to the wider of the two.
fn nullif_of_integers(e: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let Expr::ScalarFunction(ScalarFunction { func, args }) = &e else {
        return Ok(Transformed::no(e));
    };
    let [first, second] = &args[..] else {
        return Ok(Transformed::no(e));
    };
    if func.name() != "nullif" {
        return Ok(Transformed::no(e));
    }
    let (Ok(a), Ok(b)) = (first.get_type(schema), second.get_type(schema)) else {
        return Ok(Transformed::no(e));
    };
    let narrower = |a: &ArrowType, b: &ArrowType| a.primitive_width() < b.primitive_width();
    if !(is_integer(&a) && is_integer(&b) && narrower(&a, &b)) {
        return Ok(Transformed::no(e));
    }
    Ok(Transformed::yes(Expr::Cast(Cast::new(Box::new(e), a))))
}

/// The sum of bigints is numeric, so that it cannot overflow. This is decided here, once, on
/// the plan as written: DataFusion's coercion turns every integer sum into a sum of bigints,
/// and the analyzer runs again when the plan is executed.
fn sum_of_bigint(e: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let is_bigint = |args: &[Expr]| match args {
        [arg] => matches!(
            arg.get_type(schema),
            Ok(ArrowType::Int64 | ArrowType::UInt64)
        ),
        _ => false,
    };
    let numeric = |args: &mut Vec<Expr>| {
        let arg = args.remove(0);
        args.push(Expr::ScalarFunction(ScalarFunction::new_udf(
            crate::numeric::kernels::udf(crate::numeric::kernels::Op::Cast),
            vec![arg],
        )));
    };
    match e {
        Expr::AggregateFunction(mut f) if f.func.name() == "sum" && is_bigint(&f.params.args) => {
            numeric(&mut f.params.args);
            Ok(Transformed::yes(Expr::AggregateFunction(f)))
        }
        Expr::WindowFunction(mut w) if w.fun.name() == "sum" && is_bigint(&w.params.args) => {
            numeric(&mut w.params.args);
            Ok(Transformed::yes(Expr::WindowFunction(w)))
        }
        other => Ok(Transformed::no(other)),
    }
}

fn retype_literal(e: Expr) -> DfResult<Transformed<Expr>> {
    match e {
        // DataFusion plans count(*) as count(1) with a bigint 1 that its optimizations look for.
        Expr::AggregateFunction(ref f) if f.func.name() == "count" => {
            Ok(Transformed::new(e, false, TreeNodeRecursion::Jump))
        }
        Expr::Literal(ScalarValue::Int64(Some(v)), None) => match i32::try_from(v) {
            Ok(v) => Ok(Transformed::yes(Expr::Literal(
                ScalarValue::Int32(Some(v)),
                None,
            ))),
            Err(_) => Ok(Transformed::no(e)),
        },
        _ => Ok(Transformed::no(e)),
    }
}

/// Replaces integer `+ - *`, unary minus and `abs`, float division, `round(float)` and casts
/// to integers with their PostgreSQL behaviour. Runs after type coercion.
#[derive(Debug)]
pub struct PgArithmetic;

impl AnalyzerRule for PgArithmetic {
    fn name(&self) -> &str {
        "pg_arithmetic"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        rewrite_expressions_up(plan, |e, schema| Ok(pg_expr(e, schema)))
    }
}

fn pg_expr(e: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let type_of = |e: &Expr| e.get_type(schema).ok();
    let replacement = match &e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let t = type_of(left).filter(|t| Some(t) == type_of(right).as_ref());
            t.and_then(|t| binary_op(*op, &t))
                .map(|op| checked_call(op, vec![(**left).clone(), (**right).clone()]))
        }
        Expr::Negative(inner) => type_of(inner)
            .filter(is_integer)
            .map(|t| checked_call(Op::new(OpKind::Neg, &t), vec![(**inner).clone()])),
        Expr::ScalarFunction(ScalarFunction { func, args }) => match (func.name(), &args[..]) {
            ("abs", [arg]) => type_of(arg)
                .filter(is_integer)
                .map(|t| checked_call(Op::new(OpKind::Abs, &t), args.clone())),
            ("round", [arg]) => type_of(arg)
                .filter(is_float)
                .map(|t| checked_call(Op::new(OpKind::RoundEven, &t), args.clone())),
            _ => None,
        },
        Expr::Cast(Cast { expr, field }) if is_integer(field.data_type()) => {
            let rounded = type_of(expr).and_then(|t| rounded_before_cast(expr, t));
            rounded.map(|r| Expr::Cast(Cast::new_from_field(Box::new(r), field.clone())))
        }
        _ => None,
    };
    match replacement {
        Some(r) => Transformed::yes(r),
        None => Transformed::no(e),
    }
}

/// PostgreSQL rounds a number cast to an integer: numeric half away from zero, floats half to
/// even. None when `e` needs no rounding (it is not fractional, or is rounded already).
fn rounded_before_cast(e: &Expr, t: ArrowType) -> Option<Expr> {
    if let Expr::ScalarFunction(f) = e {
        if matches!(f.func.name(), "round" | "dround") {
            return None;
        }
    }
    match t {
        ArrowType::Decimal128(..) | ArrowType::Decimal256(..) => {
            Some(datafusion::functions::math::expr_fn::round(vec![e.clone()]))
        }
        ArrowType::Float32 | ArrowType::Float64 => Some(checked_call(
            Op::new(OpKind::RoundEven, &t),
            vec![e.clone()],
        )),
        _ => None,
    }
}

fn binary_op(op: Operator, t: &ArrowType) -> Option<Op> {
    let kind = match op {
        Operator::Plus if is_integer(t) => OpKind::Add,
        Operator::Minus if is_integer(t) => OpKind::Sub,
        Operator::Multiply if is_integer(t) => OpKind::Mul,
        Operator::Divide if is_float(t) => OpKind::Div,
        _ => return None,
    };
    Some(Op::new(kind, t))
}

fn is_integer(t: &ArrowType) -> bool {
    matches!(t, ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64)
}

fn is_float(t: &ArrowType) -> bool {
    matches!(t, ArrowType::Float32 | ArrowType::Float64)
}

fn checked_call(op: Op, args: Vec<Expr>) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(op)),
        args,
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum OpKind {
    Add,
    Sub,
    Mul,
    Div,
    Neg,
    Abs,
    RoundEven,
}

/// One of PostgreSQL's arithmetic functions for one operand type (`int4pl`, `float8div`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Op {
    kind: OpKind,
    name: String,
    /// What PostgreSQL calls the operand type in `... out of range` errors.
    type_name: &'static str,
    signature: Signature,
}

impl Op {
    fn new(kind: OpKind, t: &ArrowType) -> Op {
        let (prefix, type_name) = match t {
            ArrowType::Int16 => ("int2", "smallint"),
            ArrowType::Int32 => ("int4", "integer"),
            ArrowType::Int64 => ("int8", "bigint"),
            ArrowType::Float32 => ("float4", "real"),
            _ => ("float8", "double precision"),
        };
        let name = match kind {
            OpKind::Add => format!("{prefix}pl"),
            OpKind::Sub => format!("{prefix}mi"),
            OpKind::Mul => format!("{prefix}mul"),
            OpKind::Div => format!("{prefix}div"),
            OpKind::Neg => format!("{prefix}um"),
            OpKind::Abs => format!("{prefix}abs"),
            OpKind::RoundEven => "dround".to_string(),
        };
        let arity = match kind {
            OpKind::Add | OpKind::Sub | OpKind::Mul | OpKind::Div => 2,
            OpKind::Neg | OpKind::Abs | OpKind::RoundEven => 1,
        };
        Op {
            kind,
            name,
            type_name,
            signature: Signature::any(arity, Volatility::Immutable),
        }
    }

    fn apply(&self, args: &[ArrayRef]) -> Result<ArrayRef, ArrowError> {
        match self.kind {
            OpKind::Add => numeric::add(&args[0], &args[1]),
            OpKind::Sub => numeric::sub(&args[0], &args[1]),
            OpKind::Mul => numeric::mul(&args[0], &args[1]),
            OpKind::Neg => numeric::neg(&args[0]),
            // A NULL of no type (a null-extended column DataFusion typed Null) stays NULL.
            OpKind::Div | OpKind::Abs if args.iter().any(|a| a.data_type().is_null()) => Ok(
                datafusion::arrow::array::new_null_array(&ArrowType::Null, args[0].len()),
            ),
            OpKind::Div => match args[0].data_type() {
                ArrowType::Float32 => float_div::<Float32Type>(&args[0], &args[1]),
                ArrowType::Float64 => float_div::<Float64Type>(&args[0], &args[1]),
                other => Err(unexpected_type("/", other)),
            },
            OpKind::Abs => match args[0].data_type() {
                ArrowType::Int16 => checked_abs::<Int16Type>(&args[0]),
                ArrowType::Int32 => checked_abs::<Int32Type>(&args[0]),
                ArrowType::Int64 => checked_abs::<Int64Type>(&args[0]),
                other => Err(unexpected_type("abs", other)),
            },
            OpKind::RoundEven => Ok(match args[0].data_type() {
                ArrowType::Float32 => Arc::new(
                    args[0]
                        .as_primitive::<Float32Type>()
                        .unary::<_, Float32Type>(f32::round_ties_even),
                ),
                _ => Arc::new(
                    args[0]
                        .as_primitive::<Float64Type>()
                        .unary::<_, Float64Type>(f64::round_ties_even),
                ) as ArrayRef,
            }),
        }
    }

    fn pg_error(&self, e: ArrowError) -> DataFusionError {
        let sql = match e {
            ArrowError::ArithmeticOverflow(_) => SqlError::new(
                code::NUMERIC_VALUE_OUT_OF_RANGE,
                format!("{} out of range", self.type_name),
            ),
            ArrowError::DivideByZero => SqlError::new(code::DIVISION_BY_ZERO, "division by zero"),
            other => return DataFusionError::ArrowError(Box::new(other), None),
        };
        DataFusionError::External(Box::new(sql))
    }
}

fn float_div<T: ArrowPrimitiveType>(a: &ArrayRef, b: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    let quotient: PrimitiveArray<T> =
        try_binary(a.as_primitive::<T>(), b.as_primitive::<T>(), |x, y| {
            if y.is_zero() {
                Err(ArrowError::DivideByZero)
            } else {
                Ok(x.div_wrapping(y))
            }
        })?;
    Ok(Arc::new(quotient))
}

/// An argument type the planning step should not have let through: an error, not a panic.
fn unexpected_type(op: &str, t: &ArrowType) -> ArrowError {
    ArrowError::InvalidArgumentError(format!("{op} of an argument of type {t}"))
}

fn checked_abs<T: ArrowPrimitiveType>(a: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    let abs: PrimitiveArray<T> = a.as_primitive::<T>().try_unary(|v: T::Native| {
        if v.is_lt(T::Native::ZERO) {
            v.neg_checked()
        } else {
            Ok(v)
        }
    })?;
    Ok(Arc::new(abs))
}

impl ScalarUDFImpl for Op {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let result = self.apply(&arrays).map_err(|e| self.pg_error(e))?;
        if all_scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                &result, 0,
            )?))
        } else {
            Ok(ColumnarValue::Array(result))
        }
    }
}
