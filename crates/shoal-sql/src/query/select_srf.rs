//! Set-returning functions in a select list, as PostgreSQL 10+ runs them: `SELECT
//! generate_series(1, 3)` gives three rows. DataFusion's `generate_series` in an expression
//! returns one list, so each such call becomes `unnest(...)` of that list. DataFusion's unnest in
//! a select list already behaves as PostgreSQL's ProjectSet: several set-returning items advance
//! together and the shorter ones are padded with NULLs, an empty or NULL set gives no row, and
//! the other items repeat on each row.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Expr, Query, SelectItem, SetExpr, VisitMut, VisitorMut};

use crate::query::rewrite::{function_call, object_name_parts};

/// Functions that return a set in PostgreSQL and a list in DataFusion.
const LIST_RETURNING: [&str; 1] = ["generate_series"];

/// Wraps the list-returning calls of `query`'s select list in `unnest`. Names are already given
/// (`column_names`), so the column keeps the function's name.
pub fn expand_in_select_list(query: &mut Query) {
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    for item in &mut select.projection {
        let (SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = item else {
            continue;
        };
        let _ = e.visit(&mut Unnester { inside_unnest: 0 });
    }
}

struct Unnester {
    /// How many `unnest(...)` calls enclose the expression visited: a call already unnested
    /// stays as it is.
    inside_unnest: usize,
}

/// The function a call names, without a `pg_catalog.` qualifier; None for other expressions.
fn called(e: &Expr) -> Option<String> {
    let Expr::Function(f) = e else {
        return None;
    };
    match object_name_parts(&f.name).as_slice() {
        [name] => Some(name.clone()),
        [schema, name] if schema == "pg_catalog" => Some(name.clone()),
        _ => None,
    }
}

/// An integer literal that fits int4 (`-5` included), as PostgreSQL types it.
pub(crate) fn int4_literal(e: &Expr) -> Option<i32> {
    use datafusion::sql::sqlparser::ast::{UnaryOperator, Value};
    match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => int4_literal(expr).and_then(|v| v.checked_neg()),
        Expr::Nested(inner) => int4_literal(inner),
        _ => None,
    }
}

/// The arguments of a call without DISTINCT, ORDER BY or named arguments.
fn plain_arguments(e: &Expr) -> Option<Vec<Expr>> {
    use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    let Expr::Function(f) = e else {
        return None;
    };
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    list.args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

impl VisitorMut for Unnester {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        // A subquery's select list is expanded by its own query's pass.
        if matches!(
            e,
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
        ) {
            self.inside_unnest += 1;
        }
        if called(e).as_deref() == Some("unnest") {
            self.inside_unnest += 1;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if matches!(
            e,
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
        ) {
            self.inside_unnest -= 1;
            return ControlFlow::Continue(());
        }
        match called(e).as_deref() {
            Some("unnest") => self.inside_unnest -= 1,
            // generate_subscripts(a, dim): the subscripts of that dimension, in order; none for
            // an empty or NULL array.
            Some("generate_subscripts") if self.inside_unnest == 0 => {
                if let Some([array, dim]) = plain_arguments(e).as_deref() {
                    let bound = |f: &str| function_call(f, vec![array.clone(), dim.clone()]);
                    let series = function_call(
                        "generate_series",
                        vec![bound("array_lower"), bound("array_upper")],
                    );
                    *e = function_call("unnest", vec![series]);
                }
            }
            Some(name) if self.inside_unnest == 0 && LIST_RETURNING.contains(&name) => {
                let integers = plain_arguments(e).is_some_and(|args| {
                    (2..=3).contains(&args.len()) && args.iter().all(|a| int4_literal(a).is_some())
                });
                *e = function_call("unnest", vec![e.clone()]);
                // A series of integer literals is a series of integers (int4), not bigints.
                if integers {
                    *e = Expr::Cast {
                        kind: datafusion::sql::sqlparser::ast::CastKind::Cast,
                        expr: Box::new(e.clone()),
                        data_type: datafusion::sql::sqlparser::ast::DataType::Integer(None),
                        array: false,
                        format: None,
                    };
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}
