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
            Some(name) if self.inside_unnest == 0 && LIST_RETURNING.contains(&name) => {
                *e = function_call("unnest", vec![e.clone()]);
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}
