//! The analyzer rule that gives a freshly planned statement PostgreSQL's numeric. It runs before
//! DataFusion's type coercion, which knows only fixed-scale decimals: DataFusion's decimal
//! literals and casts become numerics (`LargeBinary`), and every operator, function and
//! aggregate that meets a numeric becomes the numeric function that does what PostgreSQL's does,
//! after PostgreSQL's implicit casts of the other operands: an integer or an untyped literal
//! becomes numeric, and a numeric meeting a float becomes float8. Equality and ordering
//! comparisons, IN lists, CASE tests and join keys compare `numeric_key`s, so `1.5 = 1.50`.
//! Set operations and VALUES lists take numeric for a column that mixes integers and numerics.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, Field};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{DFSchema, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::{
    AggregateFunction, Between, BinaryExpr, Case, Cast, InList, InSubquery, ScalarFunction,
    TryCast, WindowFunction, WindowFunctionDefinition,
};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::planner::{PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    Expr, ExprSchemable, LogicalPlan, LogicalPlanBuilder, Operator, Subquery,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::sql::sqlparser::ast::BinaryOperator;

use super::kernels::{self, Op};
use super::relations;
use super::{is_decimal, is_numeric, NUMERIC_ARROW};
use crate::error::{code, SqlError};

#[derive(Debug, Default)]
pub struct NumericSemantics;

impl AnalyzerRule for NumericSemantics {
    fn name(&self) -> &str {
        "shoal_numeric"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(rewrite_node).data()
    }
}

/// One node of the rule, its inputs already rewritten.
pub fn rewrite_node(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let node = match node {
        LogicalPlan::Values(values) => return relations::values_as_numeric(values),
        LogicalPlan::Union(union) => return relations::union_as_numeric(union),
        LogicalPlan::Join(join) => relations::join_keys(join)?,
        other => other,
    };
    let schema = merge_schema(&node.inputs());
    let names = NamePreserver::new(&node);
    let rewritten = node.map_expressions(|e| {
        let saved = names.save(&e);
        e.transform_up(|sub| rewrite_expr(sub, &schema))
            .map(|t| t.update_data(|e| saved.restore(e)))
    })?;
    // Also when only an input changed: a column's type may have become numeric below.
    let rewritten = rewritten.map_data(|node| node.recompute_schema())?;
    rewritten.transform_data(relations::group_by_value)
}

/// What an operand is to PostgreSQL's operator resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Numeric,
    Integer,
    Float,
    /// A quoted literal: PostgreSQL's `unknown`, which takes the other operand's type.
    Unknown,
    Null,
    Other,
}

pub(super) fn kind(e: &Expr, schema: &DFSchema) -> Kind {
    if let Expr::Literal(value, _) = strip_alias(e) {
        match value {
            ScalarValue::Utf8(Some(_)) => return Kind::Unknown,
            v if v.is_null() && v.data_type() == ArrowType::Null => return Kind::Null,
            _ => {}
        }
    }
    match e.get_type(schema) {
        Ok(t) if is_numeric(&t) || is_decimal(&t) => Kind::Numeric,
        Ok(t) if t.is_integer() => Kind::Integer,
        Ok(t) if t.is_floating() => Kind::Float,
        Ok(ArrowType::Null) => Kind::Null,
        _ => Kind::Other,
    }
}

fn strip_alias(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => strip_alias(&a.expr),
        other => other,
    }
}

fn call(op: Op, args: Vec<Expr>) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(kernels::udf(op), args))
}

fn plan_error(e: SqlError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// `e` as a numeric: constants are converted now (so a bad literal fails when the statement is
/// planned, as in PostgreSQL, and constants stay constants), anything else by `pg_numeric`.
pub(super) fn to_numeric(e: Expr, schema: &DFSchema) -> DfResult<Expr> {
    let t = e.get_type(schema)?;
    if is_numeric(&t) {
        return Ok(e);
    }
    match strip_alias(&e) {
        Expr::Literal(value, _) => Ok(Expr::Literal(numeric_constant(value)?, None)),
        _ => Ok(call(Op::Cast, vec![e])),
    }
}

fn numeric_constant(value: &ScalarValue) -> DfResult<ScalarValue> {
    let array = value.to_array_of_size(1)?;
    let converted = kernels::to_numeric_array(&array)?;
    ScalarValue::try_from_array(&converted, 0)
}

pub(super) fn to_float8(e: Expr, schema: &DFSchema) -> DfResult<Expr> {
    Ok(match kind(&e, schema) {
        Kind::Numeric => call(Op::ToFloat8, vec![to_numeric(e, schema)?]),
        _ => e,
    })
}

pub(super) fn key(e: Expr) -> Expr {
    call(Op::Key, vec![e])
}

/// The common type PostgreSQL resolves for operands of these kinds when one is numeric:
/// float8 if a float is among them, else numeric. None if no operand is numeric.
pub(super) fn common_kind(kinds: &[Kind]) -> Option<Kind> {
    if !kinds.contains(&Kind::Numeric) {
        return None;
    }
    if kinds.contains(&Kind::Float) {
        return Some(Kind::Float);
    }
    Some(Kind::Numeric)
}

/// Converts `exprs` to the common type of `common_kind` (numeric or float8).
pub(super) fn unify(exprs: Vec<Expr>, common: Kind, schema: &DFSchema) -> DfResult<Vec<Expr>> {
    exprs
        .into_iter()
        .map(|e| match (common, kind(&e, schema)) {
            (Kind::Float, _) => to_float8(e, schema),
            (_, Kind::Other | Kind::Float) => Ok(e),
            _ => to_numeric(e, schema),
        })
        .collect()
}

pub(super) fn rewrite_expr(e: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    match e {
        Expr::Literal(ref value, _) if is_decimal(&value.data_type()) => Ok(Transformed::yes(
            Expr::Literal(numeric_constant(value)?, None),
        )),
        Expr::BinaryExpr(b) => binary(b, schema),
        Expr::Negative(inner) if kind(&inner, schema) == Kind::Numeric => Ok(Transformed::yes(
            call(Op::Neg, vec![to_numeric(*inner, schema)?]),
        )),
        Expr::Cast(Cast { expr, field }) => cast(*expr, field.data_type().clone(), schema, false),
        Expr::TryCast(TryCast { expr, field }) => {
            cast(*expr, field.data_type().clone(), schema, true)
        }
        Expr::InList(list) => in_list(list, schema),
        Expr::Between(between) => between_keys(between, schema),
        Expr::Case(case) => case_expr(case, schema),
        Expr::ScalarFunction(f) => function(f, schema),
        Expr::AggregateFunction(f) => aggregate(f, schema),
        Expr::WindowFunction(w) => window(*w, schema),
        Expr::InSubquery(s) => in_subquery(s, schema),
        other => Ok(Transformed::no(other)),
    }
}

/// The planner's hook for operators: `x + 1` over a numeric column must be typed while the
/// statement is planned, before any analyzer rule could rewrite it.
pub fn plan_binary_op(
    expr: RawBinaryExpr,
    schema: &DFSchema,
) -> DfResult<PlannerResult<RawBinaryExpr>> {
    let op = match &expr.op {
        BinaryOperator::Plus => Operator::Plus,
        BinaryOperator::Minus => Operator::Minus,
        BinaryOperator::Multiply => Operator::Multiply,
        BinaryOperator::Divide => Operator::Divide,
        BinaryOperator::Modulo => Operator::Modulo,
        BinaryOperator::Eq => Operator::Eq,
        BinaryOperator::NotEq => Operator::NotEq,
        BinaryOperator::Lt => Operator::Lt,
        BinaryOperator::LtEq => Operator::LtEq,
        BinaryOperator::Gt => Operator::Gt,
        BinaryOperator::GtEq => Operator::GtEq,
        BinaryOperator::StringConcat => Operator::StringConcat,
        _ => return Ok(PlannerResult::Original(expr)),
    };
    let numeric = |e: &Expr| kind(e, schema) == Kind::Numeric;
    if !numeric(&expr.left) && !numeric(&expr.right) {
        return Ok(PlannerResult::Original(expr));
    }
    // numeric times an interval is the interval times a float8, which the interval rules
    // plan (`interval::arith::plan_operator`).
    let interval = |e: &Expr| matches!(e.get_type(schema), Ok(ArrowType::Interval(_)));
    if interval(&expr.left) || interval(&expr.right) {
        return Ok(PlannerResult::Original(RawBinaryExpr {
            op: expr.op,
            left: to_float8(expr.left, schema)?,
            right: to_float8(expr.right, schema)?,
        }));
    }
    let b = BinaryExpr::new(Box::new(expr.left), op, Box::new(expr.right));
    Ok(PlannerResult::Planned(binary(b, schema)?.data))
}

fn binary(b: BinaryExpr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let (lk, rk) = (kind(&b.left, schema), kind(&b.right, schema));
    if lk != Kind::Numeric && rk != Kind::Numeric {
        return Ok(Transformed::no(Expr::BinaryExpr(b)));
    }
    let BinaryExpr { left, op, right } = b;
    let (left, right) = (*left, *right);
    if op == Operator::StringConcat {
        let text = |e: Expr, k: Kind| match k {
            Kind::Numeric => to_numeric(e, schema).map(|e| call(Op::ToText, vec![e])),
            _ => Ok(e),
        };
        let (left, right) = (text(left, lk)?, text(right, rk)?);
        return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
            Box::new(left),
            op,
            Box::new(right),
        ))));
    }
    let other = if lk == Kind::Numeric { rk } else { lk };
    let arithmetic = arithmetic_op(op);
    let comparison = op.supports_propagation() || is_distinct_op(op);
    // numeric with float: both float8 (PostgreSQL's implicit cast), and numeric times an
    // interval is the interval times a float8.
    let interval = matches!(
        (left.get_type(schema), right.get_type(schema)),
        (Ok(ArrowType::Interval(_)), _) | (_, Ok(ArrowType::Interval(_)))
    );
    if other == Kind::Float || interval {
        let (left, right) = (to_float8(left, schema)?, to_float8(right, schema)?);
        return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
            Box::new(left),
            op,
            Box::new(right),
        ))));
    }
    if other == Kind::Other {
        return Err(plan_error(SqlError::new(
            code::UNDEFINED_FUNCTION,
            format!(
                "operator does not exist: {} {} {}",
                type_name(&left, schema),
                op,
                type_name(&right, schema)
            ),
        )));
    }
    let (left, right) = (to_numeric(left, schema)?, to_numeric(right, schema)?);
    if let Some(arith) = arithmetic {
        return Ok(Transformed::yes(call(arith, vec![left, right])));
    }
    if comparison {
        return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
            Box::new(key(left)),
            op,
            Box::new(key(right)),
        ))));
    }
    Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
        Box::new(left),
        op,
        Box::new(right),
    ))))
}

fn type_name(e: &Expr, schema: &DFSchema) -> String {
    match e.get_type(schema) {
        Ok(t) if is_numeric(&t) || is_decimal(&t) => "numeric".into(),
        Ok(t) => crate::query::pg_catalog::format_type_oid(crate::types::pg_oid_for_arrow(&t), -1)
            .unwrap_or_else(|| t.to_string()),
        Err(_) => "unknown".into(),
    }
}

fn arithmetic_op(op: Operator) -> Option<Op> {
    Some(match op {
        Operator::Plus => Op::Add,
        Operator::Minus => Op::Sub,
        Operator::Multiply => Op::Mul,
        Operator::Divide => Op::Div,
        Operator::Modulo => Op::Mod,
        _ => return None,
    })
}

fn is_distinct_op(op: Operator) -> bool {
    matches!(op, Operator::IsDistinctFrom | Operator::IsNotDistinctFrom)
}

fn cast(
    inner: Expr,
    target: ArrowType,
    schema: &DFSchema,
    try_cast: bool,
) -> DfResult<Transformed<Expr>> {
    let from_numeric = kind(&inner, schema) == Kind::Numeric;
    if is_decimal(&target) {
        let (precision, scale) = match target {
            ArrowType::Decimal128(p, s) | ArrowType::Decimal256(p, s) => (p as i64, s as i64),
            ArrowType::Decimal32(p, s) | ArrowType::Decimal64(p, s) => (p as i64, s as i64),
            _ => unreachable!(),
        };
        let numeric = to_numeric(inner, schema)?;
        return Ok(Transformed::yes(call(
            Op::Cast,
            vec![
                numeric,
                Expr::Literal(ScalarValue::Int64(Some(precision)), None),
                Expr::Literal(ScalarValue::Int64(Some(scale)), None),
            ],
        )));
    }
    if is_numeric(&target) {
        return Ok(Transformed::yes(to_numeric(inner, schema)?));
    }
    // An array into numeric[] or numeric(p, s)[]: each element as a numeric cast.
    if let ArrowType::List(element) = &target {
        let typmod = match element.data_type() {
            ArrowType::Decimal128(p, s) | ArrowType::Decimal256(p, s) => {
                Some((*p as i64, *s as i64))
            }
            ArrowType::Decimal32(p, s) | ArrowType::Decimal64(p, s) => Some((*p as i64, *s as i64)),
            t if is_numeric(t) => None,
            _ => {
                return Ok(Transformed::no(Expr::Cast(Cast::new(
                    Box::new(inner),
                    target,
                ))))
            }
        };
        let mut args = vec![inner];
        if let Some((p, s)) = typmod {
            args.push(Expr::Literal(ScalarValue::Int64(Some(p)), None));
            args.push(Expr::Literal(ScalarValue::Int64(Some(s)), None));
        }
        return Ok(Transformed::yes(call(Op::CastArray, args)));
    }
    if !from_numeric {
        let rebuilt = match try_cast {
            true => Expr::TryCast(TryCast::new(Box::new(inner), target)),
            false => Expr::Cast(Cast::new(Box::new(inner), target)),
        };
        return Ok(Transformed::no(rebuilt));
    }
    let inner = to_numeric(inner, schema)?;
    let op = match target {
        t if is_numeric(&t) => return Ok(Transformed::yes(inner)),
        ArrowType::Int8 | ArrowType::Int16 => Op::ToInt2,
        ArrowType::Int32 => Op::ToInt4,
        ArrowType::Int64 => Op::ToInt8,
        ArrowType::Float16 | ArrowType::Float32 => Op::ToFloat4,
        ArrowType::Float64 => Op::ToFloat8,
        ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => Op::ToText,
        other => {
            return Err(plan_error(SqlError::new(
                code::CANNOT_COERCE,
                format!(
                    "cannot cast type numeric to {}",
                    crate::query::pg_catalog::format_type_oid(
                        crate::types::pg_oid_for_arrow(&other),
                        -1
                    )
                    .unwrap_or_else(|| other.to_string())
                ),
            )))
        }
    };
    let converted = call(op, vec![inner]);
    Ok(Transformed::yes(match target {
        ArrowType::Int8 | ArrowType::Float16 | ArrowType::LargeUtf8 | ArrowType::Utf8View => {
            Expr::Cast(Cast::new(Box::new(converted), target))
        }
        _ => converted,
    }))
}

fn kinds_of<'a>(exprs: impl Iterator<Item = &'a Expr>, schema: &DFSchema) -> Vec<Kind> {
    exprs.map(|e| kind(e, schema)).collect()
}

fn in_list(list: InList, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let kinds = kinds_of(
        std::iter::once(list.expr.as_ref()).chain(&list.list),
        schema,
    );
    let Some(common) = common_kind(&kinds) else {
        return Ok(Transformed::no(Expr::InList(list)));
    };
    let mut all = unify(
        std::iter::once(*list.expr).chain(list.list).collect(),
        common,
        schema,
    )?;
    if common == Kind::Numeric {
        all = all.into_iter().map(key).collect();
    }
    let expr = all.remove(0);
    Ok(Transformed::yes(Expr::InList(InList::new(
        Box::new(expr),
        all,
        list.negated,
    ))))
}

fn between_keys(b: Between, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let kinds = kinds_of([&*b.expr, &*b.low, &*b.high].into_iter(), schema);
    let Some(common) = common_kind(&kinds) else {
        return Ok(Transformed::no(Expr::Between(b)));
    };
    let mut all = unify(vec![*b.expr, *b.low, *b.high], common, schema)?;
    if common == Kind::Numeric {
        all = all.into_iter().map(key).collect();
    }
    let high = all.pop().expect("three operands");
    let low = all.pop().expect("three operands");
    let expr = all.pop().expect("three operands");
    Ok(Transformed::yes(Expr::Between(Between::new(
        Box::new(expr),
        b.negated,
        Box::new(low),
        Box::new(high),
    ))))
}

fn case_expr(case: Case, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let mut changed = false;
    let Case {
        mut expr,
        mut when_then_expr,
        mut else_expr,
    } = case;
    // CASE x WHEN v: the tests compare x with each v.
    if let Some(base) = expr.take() {
        let kinds = kinds_of(
            std::iter::once(base.as_ref()).chain(when_then_expr.iter().map(|(w, _)| w.as_ref())),
            schema,
        );
        if let Some(common) = common_kind(&kinds) {
            changed = true;
            let whens: Vec<Expr> = when_then_expr.iter().map(|(w, _)| (**w).clone()).collect();
            let mut all = unify(
                std::iter::once(*base).chain(whens).collect(),
                common,
                schema,
            )?;
            if common == Kind::Numeric {
                all = all.into_iter().map(key).collect();
            }
            let base = all.remove(0);
            for ((w, _), new) in when_then_expr.iter_mut().zip(all) {
                *w = Box::new(new);
            }
            expr = Some(Box::new(base));
        } else {
            expr = Some(base);
        }
    }
    let results: Vec<&Expr> = when_then_expr
        .iter()
        .map(|(_, t)| t.as_ref())
        .chain(else_expr.as_deref())
        .collect();
    if let Some(common) = common_kind(&kinds_of(results.into_iter(), schema)) {
        changed = true;
        let thens: Vec<Expr> = when_then_expr.iter().map(|(_, t)| (**t).clone()).collect();
        let mut unified = unify(thens, common, schema)?;
        for ((_, t), new) in when_then_expr.iter_mut().zip(unified.drain(..)) {
            *t = Box::new(new);
        }
        if let Some(e) = else_expr.take() {
            else_expr = Some(Box::new(unify(vec![*e], common, schema)?.remove(0)));
        }
    }
    let case = Expr::Case(Case {
        expr,
        when_then_expr,
        else_expr,
    });
    Ok(if changed {
        Transformed::yes(case)
    } else {
        Transformed::no(case)
    })
}

/// PostgreSQL's numeric functions by name, for a call whose first argument is numeric.
pub(super) fn numeric_function(name: &str, args: usize) -> Option<Op> {
    Some(match (name, args) {
        ("abs", 1) => Op::Abs,
        ("sign" | "signum", 1) => Op::Sign,
        ("ceil" | "ceiling", 1) => Op::Ceil,
        ("floor", 1) => Op::Floor,
        ("round", 1 | 2) => Op::Round,
        ("trunc", 1 | 2) => Op::Trunc,
        ("sqrt", 1) => Op::Sqrt,
        ("exp", 1) => Op::Exp,
        ("ln", 1) => Op::Ln,
        ("log" | "log10", 1) => Op::Log10,
        ("log", 2) => Op::Log,
        ("power" | "pow", 2) => Op::Power,
        ("mod", 2) => Op::Mod,
        ("div", 2) => Op::DivTrunc,
        ("gcd", 2) => Op::Gcd,
        ("lcm", 2) => Op::Lcm,
        ("scale", 1) => Op::Scale,
        ("min_scale", 1) => Op::MinScale,
        ("trim_scale", 1) => Op::TrimScale,
        _ => return None,
    })
}

/// Functions over any type, which take numerics as they are once their arguments agree.
const GENERIC_FUNCTIONS: &[&str] = &["coalesce", "greatest", "least", "make_array"];

/// Functions whose arguments PostgreSQL takes as text (`concat(1.50)` is `1.50`).
const TEXT_FUNCTIONS: &[&str] = &["concat", "concat_ws", "format"];

/// Functions of float8 only, to which a numeric argument is converted.
const FLOAT_FUNCTIONS: &[&str] = &[
    "cbrt", "sin", "cos", "tan", "cot", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh",
    "asinh", "acosh", "atanh", "degrees", "radians", "sind", "cosd", "tand", "cotd", "asind",
    "acosd", "atand", "atan2d",
];

fn function(f: ScalarFunction, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let name = f.func.name().to_string();
    let kinds = kinds_of(f.args.iter(), schema);
    if name == "pg_numeric" {
        return fold_constant_cast(f);
    }
    // Unary minus (see `functions::PgNegate`): DataFusion's own for all but numerics.
    if name == "pg_negate" && f.args.len() == 1 {
        let arg = f.args.into_iter().next().expect("one argument");
        let t = arg.get_type(schema)?;
        let negatable = t.is_signed_integer()
            || t.is_floating()
            || t.is_null()
            || matches!(t, ArrowType::Interval(_) | ArrowType::Duration(_));
        return Ok(Transformed::yes(match kind(&arg, schema) {
            Kind::Numeric => call(Op::Neg, vec![to_numeric(arg, schema)?]),
            _ if negatable => Expr::Negative(Box::new(arg)),
            _ => {
                return Err(plan_error(SqlError::new(
                    code::UNDEFINED_FUNCTION,
                    format!("operator does not exist: - {}", type_name(&arg, schema)),
                )))
            }
        }));
    }
    if !kinds.contains(&Kind::Numeric) {
        // div() exists for numerics only: div(7, 2) is numeric 3.
        if name == "div" && f.args.len() == 2 {
            let args = unify(f.args, Kind::Numeric, schema)?;
            return Ok(Transformed::yes(call(Op::DivTrunc, args)));
        }
        return Ok(Transformed::no(Expr::ScalarFunction(f)));
    }
    if let Some(op) = numeric_function(&name, f.args.len()) {
        let mut args = f.args;
        let rest = args.split_off(1);
        let first = to_numeric(args.remove(0), schema)?;
        let rest = match op {
            Op::Round | Op::Trunc => rest,
            _ => rest
                .into_iter()
                .map(|e| to_numeric(e, schema))
                .collect::<DfResult<Vec<_>>>()?,
        };
        return Ok(Transformed::yes(call(
            op,
            std::iter::once(first).chain(rest).collect(),
        )));
    }
    if name == "nullif" && f.args.len() == 2 {
        return nullif(f.args, schema);
    }
    if GENERIC_FUNCTIONS.contains(&name.as_str()) {
        let common = common_kind(&kinds).expect("a numeric argument");
        let args = unify(f.args, common, schema)?;
        return Ok(Transformed::yes(Expr::ScalarFunction(
            ScalarFunction::new_udf(f.func, args),
        )));
    }
    let convert = |e: Expr, op: Op| -> DfResult<Expr> {
        Ok(match kind(&e, schema) {
            Kind::Numeric => call(op, vec![to_numeric(e, schema)?]),
            _ => e,
        })
    };
    let op = if TEXT_FUNCTIONS.contains(&name.as_str()) {
        Op::ToText
    } else if FLOAT_FUNCTIONS.contains(&name.as_str()) {
        Op::ToFloat8
    } else if let Some(conversions) = argument_conversions(&f, schema) {
        let args = f
            .args
            .into_iter()
            .zip(conversions)
            .map(|(e, op)| match op {
                Some(op) => call(op, vec![e]),
                None => e,
            })
            .collect();
        return Ok(Transformed::yes(Expr::ScalarFunction(
            ScalarFunction::new_udf(f.func, args),
        )));
    } else {
        // pg_typeof, pg_text_out and the like see the numeric itself.
        return Ok(Transformed::no(Expr::ScalarFunction(f)));
    };
    let args = f
        .args
        .into_iter()
        .map(|e| convert(e, op))
        .collect::<DfResult<Vec<_>>>()?;
    Ok(Transformed::yes(Expr::ScalarFunction(
        ScalarFunction::new_udf(f.func, args),
    )))
}

/// The conversion of each numeric argument a function asks for, by its own coercion: to the
/// type it coerces that argument to, or to float8 when it refuses numerics but takes floats
/// (`pg_sleep(0.5)`: PostgreSQL casts numeric to float8 implicitly). None when it takes the
/// numerics as they are, or takes neither.
fn argument_conversions(f: &ScalarFunction, schema: &DFSchema) -> Option<Vec<Option<Op>>> {
    use datafusion::logical_expr::type_coercion::functions::fields_with_udf;
    let types: Vec<ArrowType> = f
        .args
        .iter()
        .map(|a| a.get_type(schema).ok())
        .collect::<Option<_>>()?;
    let fields = |float: bool| -> Vec<Arc<Field>> {
        types
            .iter()
            .map(|t| {
                let t = match float && is_numeric(t) {
                    true => ArrowType::Float64,
                    false => t.clone(),
                };
                Arc::new(Field::new("arg", t, true))
            })
            .collect()
    };
    let coerced = fields_with_udf(&fields(false), f.func.as_ref())
        .or_else(|_| fields_with_udf(&fields(true), f.func.as_ref()))
        .ok()?;
    let conversions: Vec<Option<Op>> = types
        .iter()
        .zip(&coerced)
        .map(|(t, c)| match (is_numeric(t), c.data_type()) {
            (false, _) => None,
            (true, c) if is_numeric(c) => None,
            (true, ArrowType::Int16) => Some(Op::ToInt2),
            (true, ArrowType::Int32) => Some(Op::ToInt4),
            (true, ArrowType::Int64) => Some(Op::ToInt8),
            (true, ArrowType::Float32) => Some(Op::ToFloat4),
            (true, ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View) => {
                Some(Op::ToText)
            }
            (true, _) => Some(Op::ToFloat8),
        })
        .collect();
    conversions
        .iter()
        .any(Option::is_some)
        .then_some(conversions)
}

/// `pg_numeric` of constants is computed now: a literal stays a literal, and `'abc'::numeric`
/// fails when the statement is planned, as in PostgreSQL.
fn fold_constant_cast(f: ScalarFunction) -> DfResult<Transformed<Expr>> {
    let constants: Option<Vec<ScalarValue>> = f
        .args
        .iter()
        .map(|a| match strip_alias(a) {
            Expr::Literal(v, _) => Some(v.clone()),
            _ => None,
        })
        .collect();
    let Some(constants) = constants else {
        return Ok(Transformed::no(Expr::ScalarFunction(f)));
    };
    let args = constants
        .iter()
        .map(|c| {
            c.to_array_of_size(1)
                .map(datafusion::logical_expr::ColumnarValue::Array)
        })
        .collect::<DfResult<Vec<_>>>()?;
    let arg_fields = constants
        .iter()
        .map(|c| Arc::new(Field::new("arg", c.data_type(), true)))
        .collect();
    let result = f
        .func
        .invoke_with_args(datafusion::logical_expr::ScalarFunctionArgs {
            args,
            arg_fields,
            number_rows: 1,
            return_field: Arc::new(Field::new("pg_numeric", NUMERIC_ARROW, true)),
            config_options: Arc::new(ConfigOptions::default()),
        })?;
    let value = match result {
        datafusion::logical_expr::ColumnarValue::Scalar(s) => s,
        datafusion::logical_expr::ColumnarValue::Array(a) => ScalarValue::try_from_array(&a, 0)?,
    };
    Ok(Transformed::yes(Expr::Literal(value, None)))
}

/// nullif(a, b) compares the values, not their display scales: nullif(1.5, 1.50) is NULL.
fn nullif(args: Vec<Expr>, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let kinds = kinds_of(args.iter(), schema);
    let common = common_kind(&kinds).expect("a numeric argument");
    let mut args = unify(args, common, schema)?;
    let b = args.pop().expect("two arguments");
    let a = args.pop().expect("two arguments");
    let test = match common {
        Kind::Numeric => key(a.clone()).eq(key(b)),
        _ => a.clone().eq(b),
    };
    let null = Expr::Literal(ScalarValue::try_from(&a.get_type(schema)?)?, None);
    Ok(Transformed::yes(Expr::Case(Case::new(
        None,
        vec![(Box::new(test), Box::new(null))],
        Some(Box::new(a)),
    ))))
}

/// count(DISTINCT x) counts values, not display scales; the aggregates of float8 take a
/// numeric as float8. (sum, avg and the variances compute numerics themselves: see
/// `functions`.)
fn aggregate(mut f: AggregateFunction, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let name = f.func.name().to_string();
    let [arg] = &f.params.args[..] else {
        return Ok(Transformed::no(Expr::AggregateFunction(f)));
    };
    if kind(arg, schema) != Kind::Numeric {
        return Ok(Transformed::no(Expr::AggregateFunction(f)));
    }
    let arg = f.params.args.remove(0);
    let arg = if f.params.distinct && name == "count" {
        key(to_numeric(arg, schema)?)
    } else if is_float_aggregate(&name) {
        to_float8(arg, schema)?
    } else {
        f.params.args.push(arg);
        return Ok(Transformed::no(Expr::AggregateFunction(f)));
    };
    f.params.args.push(arg);
    Ok(Transformed::yes(Expr::AggregateFunction(f)))
}

/// Aggregates of float8 in PostgreSQL, which take a numeric argument as float8.
fn is_float_aggregate(name: &str) -> bool {
    name.starts_with("regr_")
        || matches!(
            name,
            "corr" | "covar_pop" | "covar_samp" | "percentile_cont" | "approx_percentile_cont"
        )
}

fn window(w: WindowFunction, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let ordered = window_keys(w, schema)?;
    let changed = ordered.transformed;
    let mut w = ordered.data;
    let WindowFunctionDefinition::AggregateUDF(udaf) = &w.fun else {
        let t = lag_lead_default(w, schema)?;
        return Ok(Transformed::new(t.data, t.transformed || changed, t.tnr));
    };
    let name = udaf.name().to_string();
    let unchanged = |w: WindowFunction| {
        Ok(Transformed::new(
            Expr::WindowFunction(Box::new(w)),
            changed,
            datafusion::common::tree_node::TreeNodeRecursion::Continue,
        ))
    };
    let [arg] = &w.params.args[..] else {
        return unchanged(w);
    };
    if kind(arg, schema) != Kind::Numeric || !is_float_aggregate(&name) {
        return unchanged(w);
    }
    let arg = w.params.args.remove(0);
    w.params.args.push(to_float8(arg, schema)?);
    Ok(Transformed::yes(Expr::WindowFunction(Box::new(w))))
}

/// A window partitioned or ordered by numerics: partitions by value, and orders by the key as
/// text, since DataFusion runs RANGE frames (the default with ORDER BY) over numbers and
/// strings only. A RANGE frame with an offset (`RANGE 1 PRECEDING`) needs numeric arithmetic
/// on the key, which is refused.
fn window_keys(mut w: WindowFunction, schema: &DFSchema) -> DfResult<Transformed<WindowFunction>> {
    let mut changed = false;
    for e in &mut w.params.partition_by {
        if kind(e, schema) == Kind::Numeric {
            let numeric = to_numeric(e.clone(), schema)?;
            *e = key(numeric);
            changed = true;
        }
    }
    let mut numeric_order = false;
    for sort in &mut w.params.order_by {
        if kind(&sort.expr, schema) == Kind::Numeric {
            let numeric = to_numeric(sort.expr.clone(), schema)?;
            sort.expr = call(Op::SortKey, vec![numeric]);
            numeric_order = true;
        }
    }
    let frame = &w.params.window_frame;
    let offset = |b: &datafusion::logical_expr::WindowFrameBound| match b {
        datafusion::logical_expr::WindowFrameBound::Preceding(v)
        | datafusion::logical_expr::WindowFrameBound::Following(v) => !v.is_null(),
        datafusion::logical_expr::WindowFrameBound::CurrentRow => false,
    };
    if numeric_order
        && frame.units == datafusion::logical_expr::WindowFrameUnits::Range
        && (offset(&frame.start_bound) || offset(&frame.end_bound))
    {
        return Err(plan_error(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            "RANGE window frames with an offset over a numeric ORDER BY are not supported",
        )));
    }
    Ok(Transformed::new(
        w,
        changed || numeric_order,
        datafusion::common::tree_node::TreeNodeRecursion::Continue,
    ))
}

/// lag/lead(x, n, default): the default takes x's type when one of them is numeric.
fn lag_lead_default(mut w: WindowFunction, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let name = w.fun.name().to_string();
    if !matches!(name.as_str(), "lag" | "lead") || w.params.args.len() != 3 {
        return Ok(Transformed::no(Expr::WindowFunction(Box::new(w))));
    }
    let kinds = [
        kind(&w.params.args[0], schema),
        kind(&w.params.args[2], schema),
    ];
    let Some(common) = common_kind(&kinds) else {
        return Ok(Transformed::no(Expr::WindowFunction(Box::new(w))));
    };
    let default = w.params.args.pop().expect("three arguments");
    let offset = w.params.args.pop().expect("three arguments");
    let value = w.params.args.pop().expect("three arguments");
    let mut unified = unify(vec![value, default], common, schema)?;
    let default = unified.pop().expect("two");
    let value = unified.pop().expect("two");
    w.params.args = vec![value, offset, default];
    Ok(Transformed::yes(Expr::WindowFunction(Box::new(w))))
}

/// `x IN (SELECT y ...)` compares keys, with both sides numeric when either is.
fn in_subquery(s: InSubquery, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let inner_schema = s.subquery.subquery.schema();
    let Some(column) = inner_schema.columns().into_iter().next() else {
        return Ok(Transformed::no(Expr::InSubquery(s)));
    };
    let inner_kind = kind(&Expr::Column(column.clone()), inner_schema);
    let outer_kind = kind(&s.expr, schema);
    let Some(Kind::Numeric) = common_kind(&[inner_kind, outer_kind]) else {
        return Ok(Transformed::no(Expr::InSubquery(s)));
    };
    let inner_key = key(to_numeric(Expr::Column(column), inner_schema)?).alias("numeric_key");
    let plan = LogicalPlanBuilder::from((*s.subquery.subquery).clone())
        .project(vec![inner_key])?
        .build()?;
    let subquery = Subquery {
        subquery: Arc::new(plan),
        outer_ref_columns: s.subquery.outer_ref_columns,
        spans: s.subquery.spans,
    };
    let expr = key(to_numeric(*s.expr, schema)?);
    Ok(Transformed::yes(Expr::InSubquery(InSubquery::new(
        Box::new(expr),
        subquery,
        s.negated,
    ))))
}
