//! PostgreSQL's operand type rules where DataFusion is more lenient. DataFusion coerces text to
//! numbers and numbers to text as needed; PostgreSQL resolves operators and CASE/COALESCE
//! results by type and rejects mixed categories (`integer = text`, `CASE` branches of integer
//! and text) unless one side is an untyped literal, which takes the other side's type. The
//! checks run before DataFusion's coercion, where the written types are still visible:
//! operators while SQL is planned (DataFusion would fail or coerce right there), CASE and
//! COALESCE on the planned plan.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, DFSchemaRef, DataFusionError, ScalarValue};
use datafusion::logical_expr::expr::{Case, ScalarFunction};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, Union};
use datafusion::sql::sqlparser::ast::BinaryOperator;

use crate::error::{code, SqlError, SqlResult};
use crate::query::pg_catalog::format_type_oid;
use crate::types::{pg_oid_for_arrow, PG_TYPE_METADATA_KEY};

pub(crate) const NO_OPERATOR_HINT: &str =
    "No operator matches the given name and argument types. You might need to add explicit type casts.";

/// Type categories that PostgreSQL never converts between implicitly.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Category {
    Numeric,
    String,
    Boolean,
}

/// Checks every expression of the plan and of its subqueries.
pub fn check_plan(plan: &LogicalPlan) -> SqlResult<()> {
    let mut error = None;
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::Union(union) = node {
            error = check_union(union).err();
            if error.is_some() {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        let schema = input_schema(node);
        node.apply_expressions(|e| {
            e.apply(|sub| {
                error = check_expr(sub, &schema).err();
                Ok(match error {
                    Some(_) => TreeNodeRecursion::Stop,
                    None => TreeNodeRecursion::Continue,
                })
            })
        })
    })
    .map_err(SqlError::from)?;
    error.map_or(Ok(()), Err)
}

/// PostgreSQL resolves each UNION column to one type and refuses to mix categories (integer
/// and text) unless one side is an untyped literal; DataFusion would convert.
fn check_union(union: &Union) -> SqlResult<()> {
    for column in 0..union.schema.fields().len() {
        let mut first: Option<(String, ArrowType)> = None;
        for input in &union.inputs {
            let Some(t) = output_type(input, column) else {
                continue;
            };
            let Some(f) = &first else {
                first = Some(t);
                continue;
            };
            let (a, b) = (category(&f.1), category(&t.1));
            if a.is_some() && b.is_some() && a != b {
                return Err(SqlError::new(
                    code::DATATYPE_MISMATCH,
                    format!("UNION types {} and {} cannot be matched", f.0, t.0),
                ));
            }
        }
    }
    Ok(())
}

/// The type of a union input's column `i`, as `typed` sees it (None for untyped literals).
fn output_type(input: &LogicalPlan, i: usize) -> Option<(String, ArrowType)> {
    match input {
        LogicalPlan::Projection(p) => {
            let e = match p.expr.get(i)? {
                Expr::Alias(alias) => alias.expr.as_ref(),
                e => e,
            };
            typed(e, p.input.schema())
        }
        other => {
            let t = other.schema().fields().get(i)?.data_type().clone();
            Some((format_type_oid(pg_oid_for_arrow(&t), -1)?, t))
        }
    }
}

/// The schema a node's expressions refer to: its one input's, or for joins its own (the
/// columns of both sides).
fn input_schema(node: &LogicalPlan) -> DFSchemaRef {
    match node.inputs().as_slice() {
        [input] => input.schema().clone(),
        _ => node.schema().clone(),
    }
}

fn check_expr(e: &Expr, schema: &DFSchemaRef) -> SqlResult<()> {
    match e {
        Expr::Case(case) => check_common_type("CASE", &case_results(case), schema),
        Expr::ScalarFunction(ScalarFunction { func, args }) if func.name() == "coalesce" => {
            check_common_type("COALESCE", &args.iter().collect::<Vec<_>>(), schema)
        }
        Expr::ScalarFunction(ScalarFunction { func, args })
            if TEXT_FUNCTIONS.contains(&func.name()) =>
        {
            check_text_argument(func.name(), args, schema)
        }
        _ => Ok(()),
    }
}

/// Functions whose first argument PostgreSQL takes only as a string (or bytea); DataFusion
/// would turn a number into text for them.
const TEXT_FUNCTIONS: &[&str] = &[
    "length",
    "char_length",
    "character_length",
    "octet_length",
    "upper",
    "lower",
    "initcap",
    "ltrim",
    "rtrim",
    "btrim",
    "reverse",
    "repeat",
    "lpad",
    "rpad",
    "split_part",
    "strpos",
    "replace",
    "translate",
    "left",
    "right",
    "md5",
    "starts_with",
];

/// `length(42)` names no function in PostgreSQL: no text function takes a number or boolean.
fn check_text_argument(name: &str, args: &[Expr], schema: &DFSchema) -> SqlResult<()> {
    let Some(first) = args.first().and_then(|a| typed(a, schema)) else {
        return Ok(());
    };
    if !matches!(
        category(&first.1),
        Some(Category::Numeric | Category::Boolean)
    ) {
        return Ok(());
    }
    let types: Vec<String> = args
        .iter()
        .map(|a| typed(a, schema).map_or_else(|| "unknown".to_string(), |t| t.0))
        .collect();
    // DataFusion plans length and char_length as character_length; length is the usual spelling.
    let name = if name == "character_length" {
        "length"
    } else {
        name
    };
    Err(SqlError::new(
        code::UNDEFINED_FUNCTION,
        format!("function {name}({}) does not exist", types.join(", ")),
    )
    .with_hint(
        "No function matches the given name and argument types. You might need to add explicit type casts.",
    ))
}

/// PostgreSQL resolves a CASE's type from its ELSE branch first, then the THEN branches.
fn case_results(case: &Case) -> Vec<&Expr> {
    case.else_expr
        .iter()
        .map(|e| e.as_ref())
        .chain(case.when_then_expr.iter().map(|(_, then)| then.as_ref()))
        .collect()
}

/// Rejects arithmetic and comparison operators between types PostgreSQL has no operator for.
#[derive(Debug)]
pub struct OperatorTypeCheck {
    /// `pg_text_out`, the text a value casts to, for `text || anynonarray`.
    pub text_out: Arc<datafusion::logical_expr::ScalarUDF>,
}

impl ExprPlanner for OperatorTypeCheck {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> datafusion::common::Result<PlannerResult<RawBinaryExpr>> {
        let mut expr = expr;
        adopt_operand_type(&mut expr, schema);
        type_unknown_operand(&mut expr, schema);
        let expr = match crate::query::json::plan_operator(expr, schema)? {
            PlannerResult::Planned(e) => return Ok(PlannerResult::Planned(e)),
            PlannerResult::Original(expr) => expr,
        };
        check_operator(&expr.op, &expr.left, &expr.right, schema)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let expr = match smallint_shift(expr, schema) {
            PlannerResult::Planned(e) => return Ok(PlannerResult::Planned(e)),
            PlannerResult::Original(expr) => expr,
        };
        let expr = match crate::numeric::plan::plan_binary_op(expr, schema)? {
            PlannerResult::Planned(e) => return Ok(PlannerResult::Planned(e)),
            PlannerResult::Original(expr) => expr,
        };
        let expr = crate::query::text_types::plan_operands(expr, schema, &self.text_out)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        crate::interval::arith::plan_operator(expr, schema)
    }
}

/// `smallint << n` and `smallint >> n` are smallints in PostgreSQL, the shifted bits past the
/// sixteenth dropped (`32767::int2 << 3` is -8); DataFusion shifts in the coerced int4. The
/// shift runs in int4, and its low sixteen bits are read back as a signed smallint.
fn smallint_shift(expr: RawBinaryExpr, schema: &DFSchema) -> PlannerResult<RawBinaryExpr> {
    use datafusion::logical_expr::{cast, lit, Operator};
    let op = match expr.op {
        BinaryOperator::PGBitwiseShiftLeft => Operator::BitwiseShiftLeft,
        BinaryOperator::PGBitwiseShiftRight => Operator::BitwiseShiftRight,
        _ => return PlannerResult::Original(expr),
    };
    if !matches!(expr.left.get_type(schema), Ok(ArrowType::Int16)) {
        return PlannerResult::Original(expr);
    }
    let shifted = Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(
        Box::new(cast(expr.left, ArrowType::Int32)),
        op,
        Box::new(cast(expr.right, ArrowType::Int32)),
    ));
    // Sign-extends the low sixteen bits: ((v & 0xffff) ^ 0x8000) - 0x8000.
    let low = Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(
        Box::new(shifted),
        Operator::BitwiseAnd,
        Box::new(lit(0xffff_i32)),
    ));
    let flipped = Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(
        Box::new(low),
        Operator::BitwiseXor,
        Box::new(lit(0x8000_i32)),
    ));
    PlannerResult::Planned(cast(flipped - lit(0x8000_i32), ArrowType::Int16))
}

/// The comparison and arithmetic operators, whose operands PostgreSQL resolves to one type.
fn compares_or_computes(op: &BinaryOperator) -> bool {
    matches!(
        op,
        BinaryOperator::Eq
            | BinaryOperator::NotEq
            | BinaryOperator::Lt
            | BinaryOperator::LtEq
            | BinaryOperator::Gt
            | BinaryOperator::GtEq
            | BinaryOperator::Plus
            | BinaryOperator::Minus
            | BinaryOperator::Multiply
            | BinaryOperator::Divide
            | BinaryOperator::Modulo
    )
}

/// An untyped parameter compared with (or computed with) a value of a type DataFusion does not
/// know by its Arrow type alone (numeric, uuid, char(n), json) takes that value's type, as
/// PostgreSQL resolves it: Describe then reports that type, so drivers send their encoding of
/// it. (DataFusion infers plain types itself, but the rewrites of those operators would hide
/// the other operand from it.)
fn adopt_operand_type(expr: &mut RawBinaryExpr, schema: &DFSchema) {
    if !compares_or_computes(&expr.op) {
        return;
    }
    let untyped = |e: &Expr| matches!(e, Expr::Placeholder(p) if p.field.is_none());
    let special_field = |e: &Expr| {
        if untyped(e) {
            return None;
        }
        let (_, field) = e.to_field(schema).ok()?;
        let declared = field.metadata().contains_key(PG_TYPE_METADATA_KEY);
        (declared || crate::numeric::is_numeric(field.data_type())).then_some(field)
    };
    let (left_field, right_field) = (special_field(&expr.left), special_field(&expr.right));
    // A decimal literal (`$1 * 2.0`) makes the parameter a numeric, unconstrained: its
    // literal's precision and scale are not the parameter's.
    let decimal_literal = |e: &Expr| {
        matches!(
            e,
            Expr::Literal(
                datafusion::common::ScalarValue::Decimal128(..)
                    | datafusion::common::ScalarValue::Decimal256(..),
                _
            )
        )
        .then(|| {
            std::sync::Arc::new(crate::types::arrow_field(
                "",
                &shoal_storage::types::DataType::Numeric {
                    precision: None,
                    scale: None,
                },
            ))
        })
    };
    let left_field = left_field.or_else(|| decimal_literal(&expr.left));
    let right_field = right_field.or_else(|| decimal_literal(&expr.right));
    for (side, other) in [(&mut expr.left, right_field), (&mut expr.right, left_field)] {
        if let (Expr::Placeholder(p), Some(other)) = (side, other) {
            if p.field.is_none() {
                p.field = Some(std::sync::Arc::new(other.as_ref().clone().with_name(&p.id)));
            }
        }
    }
}

/// A quoted literal operand of arithmetic, or compared with an interval, takes the type
/// PostgreSQL resolves for it: the other operand's (`n + '5'`, `price * '1.5'`, `iv = '1 day'`,
/// `ts - '2024-01-01'`), or an interval added to a timestamp (`ts + '1 hour'`: timestamp +
/// timestamp does not exist). DataFusion has no text arithmetic and no interval = text.
fn type_unknown_operand(expr: &mut RawBinaryExpr, schema: &DFSchema) {
    use datafusion::arrow::datatypes::IntervalUnit;
    let is_unknown = |e: &Expr| matches!(e, Expr::Literal(ScalarValue::Utf8(Some(_)), _));
    let (literal, other) = match (is_unknown(&expr.left), is_unknown(&expr.right)) {
        (true, false) => (&mut expr.left, &expr.right),
        (false, true) => (&mut expr.right, &expr.left),
        _ => return,
    };
    let Ok(other_type) = other.get_type(schema) else {
        return;
    };
    let interval = ArrowType::Interval(IntervalUnit::MonthDayNano);
    let target = match (&expr.op, &other_type) {
        (
            BinaryOperator::Plus
            | BinaryOperator::Minus
            | BinaryOperator::Multiply
            | BinaryOperator::Divide
            | BinaryOperator::Modulo,
            t,
        ) if t.is_numeric() => Some(other_type.clone()),
        (
            BinaryOperator::Plus
            | BinaryOperator::Minus
            | BinaryOperator::Eq
            | BinaryOperator::NotEq
            | BinaryOperator::Lt
            | BinaryOperator::LtEq
            | BinaryOperator::Gt
            | BinaryOperator::GtEq,
            ArrowType::Interval(_),
        ) => Some(other_type.clone()),
        (
            BinaryOperator::Minus,
            ArrowType::Timestamp(..) | ArrowType::Time64(_) | ArrowType::Date32,
        ) => Some(other_type.clone()),
        (BinaryOperator::Plus, ArrowType::Timestamp(..) | ArrowType::Time64(_)) => Some(interval),
        _ => None,
    };
    let Some(t) = target else { return };
    // Against a numeric, the literal is a numeric of its own precision and scale, as a number
    // written without quotes would be (not cut to the other operand's scale).
    if matches!(t, ArrowType::Decimal128(..) | ArrowType::Decimal256(..)) {
        if let Expr::Literal(ScalarValue::Utf8(Some(text)), _) = &*literal {
            if let Some(number) = decimal_literal(text) {
                *literal = Expr::Literal(number, None);
                return;
            }
        }
    }
    *literal = datafusion::logical_expr::cast(literal.clone(), t);
}

/// `text` as a decimal literal (`-12.50`: Decimal128(4, 2)), when it is a plain decimal number
/// that fits 38 digits.
fn decimal_literal(text: &str) -> Option<ScalarValue> {
    let t = text.trim();
    let (negative, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() || !all_digits(whole) || !all_digits(fraction) {
        return None;
    }
    let joined = format!("{whole}{fraction}");
    let precision = joined
        .trim_start_matches('0')
        .len()
        .max(fraction.len())
        .max(1);
    if precision > 38 {
        return None;
    }
    let value: i128 = joined.parse().ok()?;
    Some(ScalarValue::Decimal128(
        Some(if negative { -value } else { value }),
        precision as u8,
        fraction.len() as i8,
    ))
}

fn check_operator(
    op: &BinaryOperator,
    left: &Expr,
    right: &Expr,
    schema: &DFSchema,
) -> SqlResult<()> {
    if !compares_or_computes(op) {
        return Ok(());
    }
    let (Some(left), Some(right)) = (typed(left, schema), typed(right, schema)) else {
        return Ok(());
    };
    match (category(&left.1), category(&right.1)) {
        (Some(l), Some(r)) if l != r => Err(SqlError::new(
            code::UNDEFINED_FUNCTION,
            format!("operator does not exist: {} {op} {}", left.0, right.0),
        )
        .with_hint(NO_OPERATOR_HINT)),
        _ => Ok(()),
    }
}

/// The results of a CASE or COALESCE must share a category: `CASE types text and integer
/// cannot be matched`, naming the first typed result and the first that conflicts with it.
fn check_common_type(construct: &str, results: &[&Expr], schema: &DFSchema) -> SqlResult<()> {
    let mut first: Option<(String, Category)> = None;
    for e in results {
        let Some((name, t)) = typed(e, schema) else {
            continue;
        };
        let Some(c) = category(&t) else {
            continue;
        };
        match &first {
            None => first = Some((name, c)),
            Some((first_name, first_c)) if *first_c != c => {
                return Err(SqlError::new(
                    code::DATATYPE_MISMATCH,
                    format!("{construct} types {first_name} and {name} cannot be matched"),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// The PostgreSQL type name and Arrow type of an expression that has a type of its own; None
/// for untyped literals (strings, NULL, parameters), which adapt to the other operand, and for
/// expressions whose type cannot be computed here.
fn typed(e: &Expr, schema: &DFSchema) -> Option<(String, ArrowType)> {
    match e {
        Expr::Literal(
            ScalarValue::Utf8(_)
            | ScalarValue::LargeUtf8(_)
            | ScalarValue::Utf8View(_)
            | ScalarValue::Null,
            _,
        )
        | Expr::Placeholder(_) => None,
        // An integer literal is an integer (int4) in PostgreSQL when it fits, as DataFusion
        // makes every integer literal an Int64.
        Expr::Literal(ScalarValue::Int64(Some(v)), _) if i32::try_from(*v).is_ok() => {
            Some(("integer".into(), ArrowType::Int32))
        }
        _ => {
            let t = e.get_type(schema).ok()?;
            let name = format_type_oid(pg_oid_for_arrow(&t), -1)?;
            Some((name, t))
        }
    }
}

fn category(t: &ArrowType) -> Option<Category> {
    match t {
        t if t.is_numeric() || crate::numeric::is_numeric(t) => Some(Category::Numeric),
        ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => Some(Category::String),
        ArrowType::Boolean => Some(Category::Boolean),
        ArrowType::Dictionary(_, v) => category(v),
        _ => None,
    }
}
