//! A set-returning function in FROM over an earlier FROM item's columns, which PostgreSQL runs
//! once per row of that item (an implicit LATERAL): `FROM pg_index i, unnest(i.indkey) WITH
//! ORDINALITY k(key, n)` (Django's introspection), `FROM orders o, unnest(o.tags) AS tag`,
//! `FROM t, generate_series(1, t.n) AS g`. DataFusion's FROM cannot see another item's
//! columns, but its select list runs set-returning functions per row as PostgreSQL's does
//! (`select_srf.rs`). So the pair becomes one derived table under the first item's name:
//!
//! `FROM (SELECT i.*, unnest(i.indkey) AS key, unnest(generate_series(...)) AS n
//!        FROM pg_index i) AS i`
//!
//! and references to the function's alias (`k.key`) name that table instead (`i.key`). A row
//! whose set is empty or NULL yields no rows, as the cross join does in PostgreSQL. Only the
//! plain shape is rewritten: one table (no joins) followed by the function, as a comma item or
//! a CROSS JOIN; other shapes are left to DataFusion.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, Expr, FunctionArg, FunctionArgExpr, Ident, ObjectName, Query, SelectItem, SetExpr,
    TableAlias, TableFactor, TableWithJoins, VisitMut, VisitorMut,
};

use crate::query::rewrite::{function_call, object_name_parts};

/// Rewrites `query`'s FROM when it has the shape above.
pub fn rewrite(query: &mut Query) {
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    let Some((from_alias, function_alias)) = merge_lateral(&mut select.from) else {
        return;
    };
    let mut renamer = Rename {
        from: function_alias,
        to: from_alias,
    };
    let _ = query.visit(&mut renamer);
}

/// The function in FROM: the rows' expressions in the select list (each named), and the
/// alias its columns are referred to by.
struct SetFunction {
    items: Vec<SelectItem>,
    alias: String,
}

/// Merges the first `table, function(...)` pair of `from` into one derived table; returns the
/// table's name and the function's alias.
fn merge_lateral(from: &mut Vec<TableWithJoins>) -> Option<(String, String)> {
    for i in 0..from.len() {
        let first = &from[i];
        if !first.joins.is_empty() && !cross_join_of_function(first) {
            continue;
        }
        let table_name = visible_name(&first.relation)?;
        // `t CROSS JOIN f(...)` or `t, f(...)`.
        let (function, from_next) = if first.joins.len() == 1 {
            (&first.joins[0].relation, false)
        } else {
            match from.get(i + 1) {
                Some(next) if next.joins.is_empty() => (&next.relation, true),
                _ => continue,
            }
        };
        let Some(set) = set_function(function, &table_name) else {
            continue;
        };
        let table = first.relation.clone();
        let mut projection = vec![SelectItem::QualifiedWildcard(
            ast::SelectItemQualifiedWildcardKind::ObjectName(ObjectName::from(vec![Ident::new(
                table_name.clone(),
            )])),
            ast::WildcardAdditionalOptions::default(),
        )];
        projection.extend(set.items);
        let sql = format!(
            "SELECT {} FROM {table}",
            projection
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let subquery = datafusion::sql::sqlparser::parser::Parser::new(
            &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
        )
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .ok()?;
        let merged = TableWithJoins {
            relation: TableFactor::Derived {
                lateral: false,
                subquery: Box::new(*subquery),
                alias: Some(TableAlias {
                    explicit: true,
                    name: Ident::with_quote('"', table_name.clone()),
                    columns: vec![],
                    at: None,
                }),
                sample: None,
            },
            joins: vec![],
        };
        from[i] = merged;
        if from_next {
            from.remove(i + 1);
        }
        return Some((table_name, set.alias));
    }
    None
}

fn cross_join_of_function(t: &TableWithJoins) -> bool {
    matches!(t.joins.as_slice(), [j] if matches!(
        j.join_operator,
        ast::JoinOperator::CrossJoin(ast::JoinConstraint::None)
    ))
}

/// The name a FROM table is referred to by: its alias, else its own name.
fn visible_name(t: &TableFactor) -> Option<String> {
    match t {
        TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } => Some(match alias {
            Some(a) if a.columns.is_empty() => crate::ddl::ident(&a.name),
            Some(_) => return None,
            None => object_name_parts(name).last()?.clone(),
        }),
        _ => None,
    }
}

/// `unnest(...)` or `generate_series(...)` over `table`'s columns, as select-list items.
fn set_function(f: &TableFactor, table: &str) -> Option<SetFunction> {
    let (arrays, alias, ordinality, series) = match f {
        TableFactor::UNNEST {
            alias,
            array_exprs,
            with_ordinality,
            with_offset: false,
            ..
        } => (array_exprs.clone(), alias.clone(), *with_ordinality, false),
        TableFactor::Function {
            name,
            args,
            alias,
            with_ordinality: false,
            ..
        } if function_named(name, "generate_series") => {
            let args: Option<Vec<Expr>> = args
                .iter()
                .map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
                    _ => None,
                })
                .collect();
            (args?, alias.clone(), false, true)
        }
        TableFactor::Table {
            name,
            args: Some(args),
            alias,
            ..
        } if function_named(name, "generate_series") || function_named(name, "unnest") => {
            let exprs: Option<Vec<Expr>> = args
                .args
                .iter()
                .map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
                    _ => None,
                })
                .collect();
            (
                exprs?,
                alias.clone(),
                false,
                function_named(name, "generate_series"),
            )
        }
        _ => return None,
    };
    if !arrays.iter().any(|e| references(e, table)) {
        return None;
    }
    let function_name = if series { "generate_series" } else { "unnest" };
    let alias_name = alias
        .as_ref()
        .map(|a| crate::ddl::ident(&a.name))
        .unwrap_or_else(|| function_name.to_string());
    let columns: Vec<String> = alias
        .as_ref()
        .map(|a| {
            a.columns
                .iter()
                .map(|c| crate::ddl::ident(&c.name))
                .collect()
        })
        .unwrap_or_default();
    // The sets, side by side: one per array, or the one series.
    let sets: Vec<Expr> = if series {
        vec![function_call("generate_series", arrays.clone())]
    } else {
        arrays.clone()
    };
    let mut names: Vec<String> = Vec::new();
    for i in 0..sets.len() + usize::from(ordinality) {
        names.push(match columns.get(i) {
            Some(c) => c.clone(),
            // A function's one unnamed column is named after its alias.
            None if sets.len() == 1 && i == 0 => alias_name.clone(),
            None => return None,
        });
    }
    let mut items: Vec<SelectItem> = sets
        .iter()
        .zip(&names)
        .map(|(set, name)| SelectItem::ExprWithAlias {
            expr: function_call("unnest", vec![set.clone()]),
            alias: Ident::with_quote('"', name.clone()),
        })
        .collect();
    if ordinality {
        let lengths: Vec<Expr> = arrays
            .iter()
            .map(|a| function_call("cardinality", vec![a.clone()]))
            .collect();
        let longest = if lengths.len() == 1 {
            lengths.into_iter().next()?
        } else {
            function_call("greatest", lengths)
        };
        let one = Expr::value(ast::Value::Number("1".into(), false));
        items.push(SelectItem::ExprWithAlias {
            expr: function_call(
                "unnest",
                vec![function_call("generate_series", vec![one, longest])],
            ),
            alias: Ident::with_quote('"', names.last()?.clone()),
        });
    }
    Some(SetFunction {
        items,
        alias: alias_name,
    })
}

fn function_named(name: &ObjectName, wanted: &str) -> bool {
    match object_name_parts(name).as_slice() {
        [n] => n == wanted,
        [schema, n] => schema == "pg_catalog" && n == wanted,
        _ => false,
    }
}

/// Whether `e` names a column of `table` (`table.column`).
fn references(e: &Expr, table: &str) -> bool {
    ast::visit_expressions(e, |e| match e {
        Expr::CompoundIdentifier(parts)
            if parts.len() == 2 && crate::ddl::ident(&parts[0]) == table =>
        {
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// Renames the qualifier `from` to `to` in column references.
struct Rename {
    from: String,
    to: String,
}

impl VisitorMut for Rename {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if let Expr::CompoundIdentifier(parts) = e {
            if parts.len() == 2 && crate::ddl::ident(&parts[0]) == self.from {
                parts[0] = Ident::with_quote('"', self.to.clone());
            }
        }
        ControlFlow::Continue(())
    }
}
