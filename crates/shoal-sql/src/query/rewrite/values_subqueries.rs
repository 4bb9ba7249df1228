//! `VALUES` lists whose expressions hold subqueries, rewritten into `SELECT ... UNION ALL`.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{self, Expr, Ident};

/// Most rows of a VALUES list with subqueries rewritten into SELECTs.
const VALUES_SUBQUERY_ROWS_MAX: usize = 64;

/// `VALUES (e1, e2), ...` whose expressions hold a subquery, as `SELECT e1 AS column1, e2 AS
/// column2 UNION ALL ...`: DataFusion cannot evaluate a scalar subquery inside VALUES
/// (`INSERT INTO t VALUES (1, (SELECT max(id) FROM u))` failed with an internal error).
pub(super) fn values_with_subqueries_as_selects(values: &ast::Values) -> Option<ast::SetExpr> {
    // The UNION ALL nests a level per row: a long list would nest deeper than planning can.
    if values.rows.len() > VALUES_SUBQUERY_ROWS_MAX {
        return None;
    }
    let mut has_subquery = false;
    let _ = ast::Visit::visit(
        values,
        &mut SubqueryFinder {
            found: &mut has_subquery,
        },
    );
    if !has_subquery {
        return None;
    }
    // A parsed `SELECT NULL` as the template of each row's SELECT.
    let mut template = crate::parse::parse_statements("SELECT NULL").ok()?;
    let ast::Statement::Query(template) = template.pop()? else {
        return None;
    };
    let ast::SetExpr::Select(template) = *template.body else {
        return None;
    };
    let mut selects = values.rows.iter().map(|row| {
        let mut select = template.clone();
        select.projection = row
            .iter()
            .enumerate()
            .map(|(i, e)| ast::SelectItem::ExprWithAlias {
                expr: e.clone(),
                alias: Ident::new(format!("column{}", i + 1)),
            })
            .collect();
        ast::SetExpr::Select(select)
    });
    let first = selects.next()?;
    Some(
        selects.fold(first, |left, right| ast::SetExpr::SetOperation {
            op: ast::SetOperator::Union,
            set_quantifier: ast::SetQuantifier::All,
            left: Box::new(left),
            right: Box::new(right),
        }),
    )
}

struct SubqueryFinder<'a> {
    found: &'a mut bool,
}

impl ast::Visitor for SubqueryFinder<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        if matches!(
            expr,
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
        ) {
            *self.found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod values_subquery_tests {
    use super::*;

    #[test]
    fn values_with_a_subquery_become_selects() {
        let mut statements =
            crate::parse::parse_statements("VALUES (1, (SELECT 10)), (2, 3)").unwrap();
        let ast::Statement::Query(q) = statements.pop().unwrap() else {
            panic!("a query")
        };
        let ast::SetExpr::Values(values) = q.body.as_ref() else {
            panic!("values")
        };
        let selects = values_with_subqueries_as_selects(values).expect("rewritten");
        assert_eq!(
            selects.to_string(),
            "SELECT 1 AS column1, (SELECT 10) AS column2 UNION ALL SELECT 2 AS column1, 3 AS column2"
        );
    }
}
