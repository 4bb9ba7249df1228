//! Function calls PostgreSQL spells differently from DataFusion: synonyms, to_timestamp of
//! epoch seconds, ARRAY(subquery), untyped literals next to typed arguments, LIKE's escape
//! character, and `-x ^ y`.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, BinaryOperator, CastKind, DataType, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, Ident, ObjectName, ObjectNamePart,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::{function_call, object_name_parts};
use crate::error::{SqlError, SqlResult};

/// A quoted argument of COALESCE, GREATEST, LEAST or NULLIF next to an argument that is not
/// one becomes `shoal_sibling_typed('...', sibling)`, which takes the sibling's type when it
/// is a date or time (`crate::query::unknown_literals`). Not when the sibling holds a subquery,
/// which the wrapper would plan twice.
pub(super) fn sibling_typed_literals(f: &mut Function) {
    let name = object_name_parts(&f.name);
    if !matches!(name.as_slice(), [n] if matches!(n.as_str(), "coalesce" | "greatest" | "least" | "nullif"))
    {
        return;
    }
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    let is_quoted = |e: &Expr| matches!(e, Expr::Value(v) if matches!(v.value, ast::Value::SingleQuotedString(_)));
    let sibling = list.args.iter().find_map(|a| match a {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) if !is_quoted(e) => Some(e.clone()),
        _ => None,
    });
    let Some(sibling) = sibling else {
        return;
    };
    let has_subquery = ast::visit_expressions(&sibling, |e| match e {
        Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break();
    if matches!(sibling, Expr::Value(_)) || has_subquery {
        return;
    }
    for arg in list.args.iter_mut() {
        if let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg {
            if is_quoted(e) {
                *e = function_call(
                    crate::query::unknown_literals::SIBLING_TYPED,
                    vec![e.clone(), sibling.clone()],
                );
            }
        }
    }
}

/// `ARRAY(SELECT x FROM ... WHERE ... ORDER BY y)`, an array of the subquery's rows (psql's
/// `\du` reads role memberships so), becomes `(SELECT array_agg(x ORDER BY y) FROM ... WHERE
/// ...)`, an aggregate subquery DataFusion plans and decorrelates when it reads the outer row,
/// wrapped in `coalesce(..., make_array())`: without rows, ARRAY() is an empty array where
/// array_agg is NULL. Only a plain SELECT of one column is rewritten (no DISTINCT, GROUP BY,
/// LIMIT or set operation).
pub(super) fn array_subquery(f: &Function) -> Option<Expr> {
    let FunctionArguments::Subquery(query) = &f.args else {
        return None;
    };
    if object_name_parts(&f.name).as_slice() != ["array"]
        || query.with.is_some()
        || query.limit_clause.is_some()
        || query.fetch.is_some()
    {
        return None;
    }
    let ast::SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let plain = select.distinct.is_none()
        && select.having.is_none()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty());
    let element = match select.projection.as_slice() {
        [ast::SelectItem::UnnamedExpr(e)] | [ast::SelectItem::ExprWithAlias { expr: e, .. }] => e,
        _ => return None,
    };
    if !plain {
        return None;
    }
    // ORDER BY 1 names the element by position.
    let order = match &query.order_by {
        Some(ast::OrderBy {
            kind: ast::OrderByKind::Expressions(keys),
            ..
        }) => {
            let keys: Vec<String> = keys
                .iter()
                .map(|k| {
                    let mut k = k.clone();
                    if matches!(&k.expr, Expr::Value(v) if v.to_string() == "1") {
                        k.expr = element.clone();
                    }
                    k.to_string()
                })
                .collect();
            format!(" ORDER BY {}", keys.join(", "))
        }
        _ => String::new(),
    };
    let mut aggregated = (**select).clone();
    let call = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&format!("array_agg({element}{order})"))
        .and_then(|mut p| p.parse_expr())
        .ok()?;
    aggregated.projection = vec![ast::SelectItem::UnnamedExpr(call)];
    let mut subquery = (**query).clone();
    subquery.body = Box::new(ast::SetExpr::Select(Box::new(aggregated)));
    subquery.order_by = None;
    Some(function_call(
        "coalesce",
        vec![
            Expr::Subquery(Box::new(subquery)),
            function_call("make_array", vec![]),
        ],
    ))
}

/// PostgreSQL functions that are another name for a DataFusion function or operator.
pub(super) fn synonym_call(f: &Function) -> Option<Expr> {
    let parts = object_name_parts(&f.name);
    let [name] = parts.as_slice() else {
        return None;
    };
    if f.over.is_some() {
        return None;
    }
    let renamed = match name.as_str() {
        "ceiling" => "ceil",
        "sign" => "signum",
        "transaction_timestamp" => "now",
        // PostgreSQL's array_remove removes every element equal to the value; DataFusion's
        // removes the first.
        "array_remove" => "array_remove_all",
        // The SQL standard's name for bool_and.
        "every" => "bool_and",
        "to_timestamp" => return to_timestamp_from_epoch(f),
        "mod" => {
            let FunctionArguments::List(list) = &f.args else {
                return None;
            };
            let [FunctionArg::Unnamed(FunctionArgExpr::Expr(a)), FunctionArg::Unnamed(FunctionArgExpr::Expr(b))] =
                list.args.as_slice()
            else {
                return None;
            };
            return Some(Expr::Nested(Box::new(Expr::BinaryOp {
                left: Box::new(a.clone()),
                op: BinaryOperator::Modulo,
                right: Box::new(b.clone()),
            })));
        }
        _ => return None,
    };
    let mut f = f.clone();
    f.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(renamed))]);
    Some(Expr::Function(f))
}

/// PostgreSQL's one-argument to_timestamp takes seconds since the epoch (a double precision);
/// DataFusion's reads text. A number literal is passed as a double, as PostgreSQL's argument
/// type makes it, so that `1e300` is not first read as a numeric.
pub(super) fn to_timestamp_from_epoch(f: &Function) -> Option<Expr> {
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))] = list.args.as_slice() else {
        return None;
    };
    let arg = match arg {
        Expr::Value(v) if matches!(v.value, ast::Value::Number(..)) => Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(Expr::value(ast::Value::SingleQuotedString(
                v.value.to_string(),
            ))),
            data_type: DataType::DoublePrecision,
            array: false,
            format: None,
        },
        other => other.clone(),
    };
    Some(function_call("pg_to_timestamp_epoch", vec![arg]))
}

/// In PostgreSQL unary minus binds tighter than `^`, so `-2 ^ 2` is `(-2) ^ 2`; sqlparser
/// parses it as `-(2 ^ 2)`.
pub(super) fn negate_power_base(operand: &Expr) -> Option<Expr> {
    let Expr::BinaryOp {
        left,
        op: BinaryOperator::PGExp,
        right,
    } = operand
    else {
        return None;
    };
    let negated = Expr::UnaryOp {
        op: ast::UnaryOperator::Minus,
        expr: left.clone(),
    };
    let base = negate_power_base(left).unwrap_or(negated);
    Some(Expr::BinaryOp {
        left: Box::new(base),
        op: BinaryOperator::PGExp,
        right: right.clone(),
    })
}

/// A LIKE pattern written with escape character `escape` (empty: none), rewritten for the
/// backslash: `a#_b` with `#` is `a\_b`, and a backslash that escapes nothing is doubled.
/// (PostgreSQL checks a trailing escape character only when the match reaches it.)
pub(crate) fn like_pattern_with_backslash(pattern: &str, escape: &str) -> SqlResult<String> {
    let invalid = |message: &str| SqlError::new("22025", message);
    let mut escape_chars = escape.chars();
    let escape = match (escape_chars.next(), escape_chars.next()) {
        (None, _) => None,
        (Some(c), None) => Some(c),
        _ => {
            return Err(invalid("invalid escape string")
                .with_hint("Escape string must be empty or one character."))
        }
    };
    let mut out = String::with_capacity(pattern.len() + 2);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            // PostgreSQL reports a trailing escape only when matching reaches it; here it is
            // read as a literal backslash, which gives its answer wherever the match fails
            // before that point.
            let Some(next) = chars.next() else {
                out.push_str("\\\\");
                break;
            };
            out.push('\\');
            out.push(next);
        } else if c == '\\' {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    Ok(out)
}
