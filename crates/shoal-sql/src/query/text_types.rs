//! The string-like types that DataFusion sees as plain text but PostgreSQL does not:
//! `char(n)` (bpchar) and `uuid`. A char(n) value is stored blank-padded to n, but its
//! trailing blanks are insignificant: comparisons between bpchar values (or with an untyped
//! literal, which becomes bpchar) ignore them, as do `||` (which casts to text), the
//! functions that take text (`length`, `upper`, ...) and the casts to text. A uuid compares as a uuid, so an untyped literal against one is read by
//! uuid's input function (any case, braces, missing hyphens) before comparing. Columns carry
//! their PostgreSQL type in the Arrow field's metadata (`PG_TYPE_METADATA_KEY`).

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::RawBinaryExpr;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan};
use datafusion::optimizer::analyzer::AnalyzerRule;
use datafusion::sql::sqlparser::ast::BinaryOperator;

use crate::error::SqlResult;
use crate::query::expr_pass::rewrite_expressions_up;
use crate::types::{oid, PG_TYPE_METADATA_KEY};

/// The PostgreSQL type an expression's field declares, if it declares one.
fn declared_type_oid(e: &Expr, schema: &DFSchema) -> Option<u32> {
    let metadata = e.metadata(schema).ok()?;
    metadata.inner().get(PG_TYPE_METADATA_KEY)?.parse().ok()
}

fn is_bpchar(e: &Expr, schema: &DFSchema) -> bool {
    string_type_oid(e, schema) == Some(oid::BPCHAR)
}

/// The PostgreSQL type of a string expression: the type its field declares, or for a
/// conditional (`coalesce`, `nullif`, `greatest`, `least`, CASE) the type PostgreSQL resolves
/// for its results. Among string types that is the first one not of an untyped literal, so
/// `coalesce(c, '-')` of a char(n) `c` is char(n), and `coalesce(v, c)` of a varchar `v` is
/// varchar (`c` cast to it, losing its padding).
fn string_type_oid(e: &Expr, schema: &DFSchema) -> Option<u32> {
    if let Some(declared) = declared_type_oid(e, schema) {
        return Some(declared);
    }
    let first_typed = conditional_results(e)?
        .into_iter()
        .find(|result| !is_literal(result))?;
    string_type_oid(first_typed, schema)
}

/// A literal, or a literal cast to a type (a NULL is typed so for a conditional).
fn is_literal(e: &Expr) -> bool {
    match e {
        Expr::Literal(..) => true,
        Expr::Cast(cast) => matches!(cast.expr.as_ref(), Expr::Literal(..)),
        _ => false,
    }
}

/// The expressions a conditional's value comes from, or None if `e` is not a conditional.
fn conditional_results(e: &Expr) -> Option<Vec<&Expr>> {
    match e {
        Expr::ScalarFunction(ScalarFunction { func, args })
            if matches!(func.name(), "coalesce" | "nullif" | "greatest" | "least") =>
        {
            Some(args.iter().collect())
        }
        Expr::Case(case) => Some(
            case.when_then_expr
                .iter()
                .map(|(_, then)| then.as_ref())
                .chain(case.else_expr.as_deref())
                .collect(),
        ),
        _ => None,
    }
}

/// An untyped string literal's text (a literal written with a cast is not one: the cast is
/// still there when operators are planned).
fn untyped_string(e: &mut Expr) -> Option<&mut String> {
    match e {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            _,
        ) => Some(s),
        _ => None,
    }
}

/// An untyped literal compared with char(n): its trailing blanks are padding too.
fn trim_padding(text: &mut String) {
    let trimmed = text.trim_end_matches(' ').len();
    text.truncate(trimmed);
}

/// bpchar's value without its insignificant trailing blanks (PostgreSQL's bpchar-to-text cast).
pub fn without_padding(e: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(
        datafusion::functions::string::rtrim(),
        vec![e],
    ))
}

fn text_out_of(text_out: &Arc<datafusion::logical_expr::ScalarUDF>, e: Expr) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(text_out.clone(), vec![e]))
}

/// Rewrites the operands of a comparison or `||` for char(n) and uuid, while the operator is
/// planned (untyped literals can still be told apart from typed ones there).
pub fn plan_operands(
    mut expr: RawBinaryExpr,
    schema: &DFSchema,
    text_out: &Arc<datafusion::logical_expr::ScalarUDF>,
) -> SqlResult<RawBinaryExpr> {
    let comparison = matches!(
        expr.op,
        BinaryOperator::Eq
            | BinaryOperator::NotEq
            | BinaryOperator::Lt
            | BinaryOperator::LtEq
            | BinaryOperator::Gt
            | BinaryOperator::GtEq
    );
    let concat = matches!(expr.op, BinaryOperator::StringConcat);
    if !comparison && !concat {
        return Ok(expr);
    }
    let left_oid = string_type_oid(&expr.left, schema);
    let right_oid = string_type_oid(&expr.right, schema);
    if concat {
        for (side, t) in [(&mut expr.left, left_oid), (&mut expr.right, right_oid)] {
            if t == Some(oid::BPCHAR) {
                *side = without_padding(side.clone());
            }
        }
        // `text || anynonarray` casts the other operand to text, with its type's output:
        // a timestamp keeps its space (DataFusion's cast to Utf8 writes a `T`), a float its
        // shortest exact digits, an interval PostgreSQL's words.
        let is_text = |e: &Expr| {
            matches!(
                e.get_type(schema),
                Ok(ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View)
            )
        };
        let formats_otherwise = |e: &Expr| {
            matches!(
                e.get_type(schema),
                Ok(ArrowType::Timestamp(..)
                    | ArrowType::Date32
                    | ArrowType::Time64(_)
                    | ArrowType::Interval(_)
                    | ArrowType::Float32
                    | ArrowType::Float64)
            )
        };
        if is_text(&expr.left) && formats_otherwise(&expr.right) {
            expr.right = text_out_of(text_out, expr.right);
        } else if is_text(&expr.right) && formats_otherwise(&expr.left) {
            expr.left = text_out_of(text_out, expr.left);
        }
        return Ok(expr);
    }
    if left_oid == Some(oid::BPCHAR) || right_oid == Some(oid::BPCHAR) {
        for (side, t) in [(&mut expr.left, left_oid), (&mut expr.right, right_oid)] {
            if let Some(text) = untyped_string(side) {
                trim_padding(text);
            } else if t == Some(oid::BPCHAR) {
                *side = without_padding(side.clone());
            }
        }
    }
    if left_oid == Some(oid::UUID) || right_oid == Some(oid::UUID) {
        for side in [&mut expr.left, &mut expr.right] {
            if let Some(text) = untyped_string(side) {
                *text = crate::types::format_uuid(crate::types::parse_uuid(text)?);
            }
        }
    }
    Ok(expr)
}

/// Functions that take text see a char(n) value without its trailing blanks (PostgreSQL casts
/// bpchar to text on the way in): `length(c)` ignores the padding, `upper(c)` drops it.
/// Functions with a bpchar or "any" signature keep it: `octet_length(c)` counts it and
/// `concat(c, ...)` shows it, so they are not listed.
const TEXT_FUNCTIONS: &[&str] = &[
    "length",
    "char_length",
    "character_length",
    "upper",
    "lower",
    "initcap",
    "substr",
    "substring",
    "left",
    "right",
    "replace",
    "strpos",
    "starts_with",
    "split_part",
    "reverse",
    "repeat",
    "lpad",
    "rpad",
    "translate",
    "md5",
    "ascii",
];

#[derive(Debug)]
pub struct BpcharAsText;

impl AnalyzerRule for BpcharAsText {
    fn name(&self) -> &str {
        "pg_bpchar_as_text"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        rewrite_expressions_up(plan, |e, schema| {
            Ok(match &e {
                Expr::InList(_) | Expr::Between(_) => unpadded_comparands(e, schema),
                _ if conditional_results(&e).is_some() => unpadded_results(e, schema),
                _ => unpadded_arguments(e, schema),
            })
        })
    }
}

/// `nullif(c, x)` of a char(n) `c` compares as char(n) does, without trailing blanks:
/// it becomes `CASE WHEN rtrim(c) = x' THEN NULL ELSE c END`.
fn padded_nullif(e: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let Expr::ScalarFunction(ScalarFunction { func, args }) = &e else {
        return Transformed::no(e);
    };
    let [value, other] = args.as_slice() else {
        return Transformed::no(e);
    };
    if func.name() != "nullif" {
        return Transformed::no(e);
    }
    let mut other = other.clone();
    if is_bpchar(&other, schema) {
        other = without_padding(other);
    } else if let Some(text) = untyped_string(&mut other) {
        trim_padding(text);
    }
    let equal = without_padding(value.clone()).eq(other);
    // A typed NULL: type coercion has already run.
    let Ok(null) = value
        .get_type(schema)
        .and_then(|t| ScalarValue::try_from(&t))
    else {
        return Transformed::no(e);
    };
    match datafusion::logical_expr::when(equal, Expr::Literal(null, None)).otherwise(value.clone())
    {
        Ok(case) => Transformed::yes(case),
        Err(_) => Transformed::no(e),
    }
}

/// `IN (...)` and `BETWEEN` with a char(n) operand compare without trailing blanks, as `=`,
/// `<` and `>` do (`plan_operands`): the char(n) operands lose their padding and so do the
/// string literals (untyped ones, as they are still bare literals here).
fn unpadded_comparands(e: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let operands: Vec<&Expr> = match &e {
        Expr::InList(in_list) => std::iter::once(in_list.expr.as_ref())
            .chain(&in_list.list)
            .collect(),
        Expr::Between(between) => vec![&between.expr, &between.low, &between.high],
        _ => return Transformed::no(e),
    };
    if !operands.iter().any(|o| is_bpchar(o, schema)) {
        return Transformed::no(e);
    }
    let unpadded = |mut o: Expr| {
        if is_bpchar(&o, schema) {
            return without_padding(o);
        }
        let literal = match &mut o {
            Expr::Cast(cast) => cast.expr.as_mut(),
            other => other,
        };
        if let Some(text) = untyped_string(literal) {
            trim_padding(text);
        }
        o
    };
    Transformed::yes(match e {
        Expr::InList(in_list) => Expr::InList(datafusion::logical_expr::expr::InList::new(
            Box::new(unpadded(*in_list.expr)),
            in_list.list.into_iter().map(unpadded).collect(),
            in_list.negated,
        )),
        Expr::Between(between) => Expr::Between(datafusion::logical_expr::expr::Between::new(
            Box::new(unpadded(*between.expr)),
            between.negated,
            Box::new(unpadded(*between.low)),
            Box::new(unpadded(*between.high)),
        )),
        other => other,
    })
}

/// A conditional whose type is not char(n) casts its char(n) results to its type, which drops
/// their padding: `coalesce(v, c)` of a varchar `v` gives `c` without trailing blanks.
fn unpadded_results(e: Expr, schema: &DFSchema) -> Transformed<Expr> {
    if string_type_oid(&e, schema) == Some(oid::BPCHAR) {
        return padded_nullif(e, schema);
    }
    let has_padded =
        conditional_results(&e).is_some_and(|results| results.iter().any(|r| is_bpchar(r, schema)));
    if !has_padded {
        return Transformed::no(e);
    }
    let unpadded = |r: Expr| match is_bpchar(&r, schema) {
        true => without_padding(r),
        false => r,
    };
    Transformed::yes(match e {
        Expr::ScalarFunction(ScalarFunction { func, args }) if func.name() == "nullif" => {
            // nullif's second argument is only compared with, never returned.
            let mut args = args.into_iter();
            let first = args.next().map(unpadded);
            Expr::ScalarFunction(ScalarFunction::new_udf(
                func,
                first.into_iter().chain(args).collect(),
            ))
        }
        Expr::ScalarFunction(ScalarFunction { func, args }) => Expr::ScalarFunction(
            ScalarFunction::new_udf(func, args.into_iter().map(unpadded).collect()),
        ),
        Expr::Case(mut case) => {
            for (_, then) in &mut case.when_then_expr {
                **then = unpadded(std::mem::take(then.as_mut()));
            }
            if let Some(other) = &mut case.else_expr {
                **other = unpadded(std::mem::take(other.as_mut()));
            }
            Expr::Case(case)
        }
        other => other,
    })
}

fn unpadded_arguments(e: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let Expr::ScalarFunction(ScalarFunction { func, args }) = &e else {
        return Transformed::no(e);
    };
    if !TEXT_FUNCTIONS.contains(&func.name()) || !args.iter().any(|a| is_bpchar(a, schema)) {
        return Transformed::no(e);
    }
    let args = args
        .iter()
        .map(|a| match is_bpchar(a, schema) {
            true => without_padding(a.clone()),
            false => a.clone(),
        })
        .collect();
    Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::clone(func),
        args,
    )))
}
