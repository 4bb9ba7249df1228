//! Calls of SQL functions inside a statement, replaced by their bodies before planning (see the
//! module comment of `routines`). The query rewriter calls `call_expression` for a call in an
//! expression and `call_in_from` for one in FROM, and rewrites the result again, so calls in a
//! body are inlined in turn (a function that calls itself without end fails with 54001 once the
//! rewriter's nesting limit is reached).

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, Expr, Query, SelectItem, SetExpr, Statement, TableAlias, TableFactor,
};
use shoal_storage::catalog_functions::{ArgMode, RoutineDef, RoutineReturn};

use super::{body_statements, cast, sql_type, ResolvedCall};
use crate::error::{code, SqlError, SqlResult};
use crate::query::scope::PlanScope;

/// Aggregate functions: a body whose expression has one is a query, not an expression.
pub(super) const AGGREGATES: &[&str] = &[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "array_agg",
    "string_agg",
    "bool_and",
    "bool_or",
    "every",
    "json_agg",
    "jsonb_agg",
    "json_object_agg",
    "jsonb_object_agg",
    "stddev",
    "variance",
    "bit_and",
    "bit_or",
];

/// The expression a call of a scalar SQL function becomes.
pub fn call_expression(scope: &PlanScope, call: &ResolvedCall) -> SqlResult<Expr> {
    let def = &call.routine;
    let result_type = match &def.returns {
        RoutineReturn::Scalar(t) => Some(sql_type(t)?),
        RoutineReturn::Void => None,
        RoutineReturn::SetOf(_) | RoutineReturn::Table(_) => {
            return Err(SqlError::unsupported(format!(
                "calling set-returning function {}() in a select list (call it in FROM)",
                def.name
            )))
        }
        RoutineReturn::Record(_) => {
            return Err(SqlError::unsupported(format!(
                "calling function {}() with OUT parameters in a select list (call it in FROM)",
                def.name
            )))
        }
        RoutineReturn::Trigger => {
            return Err(SqlError::new(
                code::FEATURE_NOT_SUPPORTED,
                "trigger functions can only be called as triggers",
            ))
        }
    };
    let mut query = body_query(scope, call)?;
    let body = match single_expression(&query) {
        Some(e) => e,
        None => {
            // A SQL function returns the first row of its last query.
            if query.limit_clause.is_none() && query.order_by.is_none() && !is_aggregate(&query) {
                query.limit_clause = Some(ast::LimitClause::LimitOffset {
                    limit: Some(Expr::value(ast::Value::Number("1".into(), false))),
                    offset: None,
                    limit_by: vec![],
                });
            }
            Expr::Subquery(Box::new(query))
        }
    };
    let value = match result_type {
        Some(t) => cast(Expr::Nested(Box::new(body)), t),
        // void: the call's value is NULL (its body has no effects: it is one query).
        None => cast(Expr::value(ast::Value::Null), ast::DataType::Text),
    };
    Ok(strict_guard(def, &call.args, value))
}

/// The derived table a call in FROM becomes: the body's rows, typed as the function declares
/// and named after its columns (or after the function, for one column).
pub fn call_in_from(
    scope: &PlanScope,
    call: &ResolvedCall,
    alias: Option<TableAlias>,
) -> SqlResult<TableFactor> {
    let def = &call.routine;
    // One column is named after the alias when there is one, as in PostgreSQL.
    let scalar_name = alias
        .as_ref()
        .map(|a| super::plpgsql::embed::ident_name(&a.name))
        .unwrap_or_else(|| def.name.clone());
    let columns: Vec<(String, ast::DataType)> = match &def.returns {
        RoutineReturn::Scalar(t) | RoutineReturn::SetOf(t) => {
            vec![(scalar_name.clone(), sql_type(t)?)]
        }
        RoutineReturn::Table(cols) | RoutineReturn::Record(cols) => cols
            .iter()
            .map(|(n, t)| Ok((n.clone(), sql_type(t)?)))
            .collect::<SqlResult<_>>()?,
        RoutineReturn::Void => vec![(scalar_name.clone(), ast::DataType::Text)],
        RoutineReturn::Trigger => {
            return Err(SqlError::new(
                code::FEATURE_NOT_SUPPORTED,
                "trigger functions can only be called as triggers",
            ))
        }
    };
    let quote = crate::query::functions::quote_ident_if_needed;
    let sql = match &def.returns {
        RoutineReturn::Scalar(_) | RoutineReturn::Void => {
            let value = call_expression(scope, call)?;
            format!("SELECT {value} AS {}", quote(&scalar_name))
        }
        _ => {
            let mut query = body_query(scope, call)?;
            if matches!(def.returns, RoutineReturn::Record(_)) && query.limit_clause.is_none() {
                query.limit_clause = Some(ast::LimitClause::LimitOffset {
                    limit: Some(Expr::value(ast::Value::Number("1".into(), false))),
                    offset: None,
                    limit_by: vec![],
                });
            }
            let inner: Vec<String> = (1..=columns.len()).map(|i| format!("c{i}")).collect();
            let outer: Vec<String> = columns
                .iter()
                .enumerate()
                .map(|(i, (n, t))| format!("CAST(c{} AS {t}) AS {}", i + 1, quote(n)))
                .collect();
            let filter = strict_condition(def, &call.args)
                .map(|c| format!(" WHERE NOT ({c})"))
                .unwrap_or_default();
            format!(
                "SELECT {} FROM ({query}) AS shoal_routine_rows({}){filter}",
                outer.join(", "),
                inner.join(", ")
            )
        }
    };
    let subquery = crate::parse::parse_statements(&sql)
        .ok()
        .and_then(|mut s| match s.pop() {
            Some(Statement::Query(q)) => Some(q),
            _ => None,
        })
        .ok_or_else(|| SqlError::internal(format!("inlined function does not parse: {sql}")))?;
    let alias = alias.unwrap_or_else(|| TableAlias {
        explicit: true,
        name: ast::Ident::new(def.name.clone()),
        columns: vec![],
        at: None,
    });
    let lateral = call.args.iter().any(refers_to_columns);
    Ok(TableFactor::Derived {
        lateral,
        subquery,
        alias: Some(alias),
        sample: None,
    })
}

/// The body's one query with the call's arguments in place of its parameters. Other bodies
/// (several statements, or INSERT, UPDATE, DELETE) cannot become part of another statement.
fn body_query(scope: &PlanScope, call: &ResolvedCall) -> SqlResult<Query> {
    let def = &call.routine;
    if def.language != "sql" {
        return Err(SqlError::unsupported(format!(
            "calling function {}() of language {} inside a statement",
            def.name, def.language
        )));
    }
    let mut statements = body_statements(def)?;
    let query = match (statements.len(), statements.pop()) {
        (1, Some(Statement::Query(q))) if !crate::dml::cte::has_modifying_cte(&q) => *q,
        _ => {
            return Err(SqlError::unsupported(format!(
                "calling function {}() inside a statement: its body is not a single query",
                def.name
            )))
        }
    };
    let mut query = query;
    check_no_capture(scope, &query, call)?;
    substitute_parameters(scope, &mut query, def, &call.args);
    Ok(query)
}

/// Refuses a call whose argument names a column (or a table) that the body's query also
/// has: put in the body, the name would mean the body's column instead of the caller's, and
/// the call would give a wrong answer.
fn check_no_capture(scope: &PlanScope, query: &Query, call: &ResolvedCall) -> SqlResult<()> {
    let mut relations = HashSet::new();
    let _ = ast::visit_relations(query, |name| {
        if let Some(last) = crate::query::rewrite::object_name_parts(name).pop() {
            relations.insert(last);
        }
        ControlFlow::<()>::Continue(())
    });
    if relations.is_empty() {
        return Ok(());
    }
    let columns = columns_read(scope, query);
    let mut captured = None;
    for a in &call.args {
        let _ = ast::visit_expressions(a, |e| {
            match e {
                Expr::Identifier(i) if columns.contains(&crate::ddl::ident(i)) => {
                    captured = Some(crate::ddl::ident(i));
                }
                Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                    let qualifier = crate::ddl::ident(&parts[parts.len() - 2]);
                    if relations.contains(&qualifier) {
                        captured = Some(qualifier);
                    }
                }
                _ => {}
            }
            ControlFlow::<()>::Continue(())
        });
    }
    match captured {
        None => Ok(()),
        Some(name) => Err(SqlError::unsupported(format!(
            "calling function {}() with an argument that reads \"{name}\", a name its body's query also uses (qualify the column with a table alias)",
            call.routine.name
        ))),
    }
}

/// Replaces the body's parameter references (`$n`, a parameter's name, `function.name`) with
/// the arguments. A name that is also a column of a table the body reads means the column, as
/// in PostgreSQL.
pub(super) fn substitute_parameters<T: ast::Visit + ast::VisitMut>(
    scope: &PlanScope,
    query: &mut T,
    def: &RoutineDef,
    args: &[Expr],
) {
    let names: Vec<Option<String>> = def
        .args
        .iter()
        .filter(|a| a.mode != ArgMode::Out)
        .map(|a| a.name.clone())
        .collect();
    let columns = columns_read(scope, query);
    let by_name = |name: &str| -> Option<Expr> {
        let i = names.iter().position(|n| n.as_deref() == Some(name))?;
        Some(Expr::Nested(Box::new(args.get(i)?.clone())))
    };
    let _ = ast::visit_expressions_mut(query, |e| {
        let replacement = match e {
            Expr::Value(v) => match &v.value {
                ast::Value::Placeholder(p) => p
                    .strip_prefix('$')
                    .and_then(|n| n.parse::<usize>().ok())
                    .and_then(|n| args.get(n.wrapping_sub(1)))
                    .map(|a| Expr::Nested(Box::new(a.clone()))),
                _ => None,
            },
            Expr::Identifier(id) => {
                let name = crate::ddl::ident(id);
                match columns.contains(&name) {
                    true => None,
                    false => by_name(&name),
                }
            }
            Expr::CompoundIdentifier(parts) if parts.len() == 2 => (crate::ddl::ident(&parts[0])
                == def.name)
                .then(|| by_name(&crate::ddl::ident(&parts[1])))
                .flatten(),
            _ => None,
        };
        if let Some(r) = replacement {
            *e = r;
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The column names of the tables and views a query reads.
fn columns_read<T: ast::Visit>(scope: &PlanScope, query: &T) -> HashSet<String> {
    let mut relations = Vec::new();
    let _ = ast::visit_relations(query, |name| {
        relations.push(crate::ddl::split_name(name));
        ControlFlow::<()>::Continue(())
    });
    let catalog = scope.engine.catalog.read();
    let mut columns = HashSet::new();
    for (schema, name) in relations {
        let Some((_, _, oid)) = scope.resolve_relation(schema.as_deref(), &name) else {
            continue;
        };
        if let Some(t) = catalog.tables.get(&oid) {
            columns.extend(t.columns.iter().map(|c| c.name.clone()));
        } else if let Some(v) = catalog.views.get(&oid) {
            columns.extend(v.column_names.iter().cloned());
        }
    }
    columns
}

/// `SELECT expr` with nothing else: the expression, which the call can become.
fn single_expression(query: &Query) -> Option<Expr> {
    if query.with.is_some()
        || query.order_by.is_some()
        || query.limit_clause.is_some()
        || query.fetch.is_some()
    {
        return None;
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let plain = select.from.is_empty()
        && select.selection.is_none()
        && select.having.is_none()
        && select.distinct.is_none()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty())
        && select.projection.len() == 1;
    if !plain || is_aggregate(query) {
        return None;
    }
    match &select.projection[0] {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
            let mut has_subquery = false;
            let _ = ast::visit_expressions(e, |x| {
                if matches!(
                    x,
                    Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
                ) {
                    has_subquery = true;
                }
                ControlFlow::<()>::Continue(())
            });
            (!has_subquery).then(|| e.clone())
        }
        _ => None,
    }
}

/// Whether the query's select list calls an aggregate or window function (so it gives one
/// row, or needs its FROM).
fn is_aggregate(query: &Query) -> bool {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return false;
    };
    let mut found = false;
    for item in &select.projection {
        let _ = ast::visit_expressions(item, |e| {
            if let Expr::Function(f) = e {
                let name = crate::query::rewrite::object_name_parts(&f.name);
                if f.over.is_some()
                    || name
                        .last()
                        .is_some_and(|n| AGGREGATES.contains(&n.as_str()))
                {
                    found = true;
                }
            }
            ControlFlow::<()>::Continue(())
        });
    }
    found
}

/// A STRICT function's value is NULL when an argument is: `CASE WHEN arg IS NULL ... THEN
/// NULL ELSE value END` over the arguments that may be NULL.
fn strict_guard(def: &RoutineDef, args: &[Expr], value: Expr) -> Expr {
    match strict_condition(def, args) {
        None => value,
        Some(condition) => Expr::Case {
            case_token: ast::helpers::attached_token::AttachedToken::empty(),
            end_token: ast::helpers::attached_token::AttachedToken::empty(),
            operand: None,
            conditions: vec![ast::CaseWhen {
                condition,
                result: Expr::value(ast::Value::Null),
            }],
            else_result: Some(Box::new(value)),
        },
    }
}

fn strict_condition(def: &RoutineDef, args: &[Expr]) -> Option<Expr> {
    if !def.strict {
        return None;
    }
    args.iter()
        .filter(|a| !non_null_literal(a))
        .map(|a| Expr::IsNull(Box::new(Expr::Nested(Box::new(a.clone())))))
        .reduce(|l, r| Expr::BinaryOp {
            left: Box::new(l),
            op: ast::BinaryOperator::Or,
            right: Box::new(r),
        })
}

fn non_null_literal(e: &Expr) -> bool {
    match e {
        Expr::Value(v) => !matches!(v.value, ast::Value::Null | ast::Value::Placeholder(_)),
        Expr::Cast { expr, .. } | Expr::Nested(expr) => non_null_literal(expr),
        _ => false,
    }
}

/// Whether an argument reads a column (so a call in FROM depends on the items before it).
pub(super) fn refers_to_columns(e: &Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(e, |x| {
        if matches!(x, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
            found = true;
        }
        ControlFlow::<()>::Continue(())
    });
    found
}
