//! UPDATE and DELETE through a simple view, as PostgreSQL's automatically updatable views: a
//! view that selects columns (and expressions) of one table, with an optional WHERE and
//! nothing else, is rewritten onto that table. View columns in the statement become their
//! defining expressions, the view's WHERE is added to the statement's, and an assignment must
//! name a view column that is a plain column of the table. Views over views are followed down
//! to the table.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, visit_expressions_mut, AssignmentTarget, Expr, Ident, ObjectName, ObjectNamePart,
    SelectItem, SetExpr, Statement, TableFactor,
};
use shoal_storage::catalog::RelationKind;

use crate::error::{code, SqlError, SqlResult};
use crate::session::{parse_sql, Session};

/// How many views deep an UPDATE or DELETE is followed.
const VIEW_DEPTH_MAX: usize = 16;

/// A simple view's table, its alias in the view, its WHERE, and each view column's defining
/// expression.
struct SimpleView {
    name: String,
    table: TableFactor,
    filter: Option<Expr>,
    columns: Vec<(String, Expr)>,
}

/// `upd` with its target view (if it is one) replaced by the view's table.
pub fn update_onto_table(session: &Session, mut upd: ast::Update) -> SqlResult<ast::Update> {
    for _ in 0..VIEW_DEPTH_MAX {
        let Some(view) = simple_view_of(session, &upd.table.relation, "UPDATE")? else {
            return Ok(upd);
        };
        for assignment in &mut upd.assignments {
            let AssignmentTarget::ColumnName(target) = &mut assignment.target else {
                return Err(SqlError::unsupported(
                    "UPDATE of a view with a column tuple",
                ));
            };
            *target = view.base_column(target)?;
            substitute(&mut assignment.value, &view);
        }
        if let Some(selection) = &mut upd.selection {
            substitute(selection, &view);
        }
        substitute_items(&mut upd.returning, &view);
        upd.selection = and(view.filter.clone(), upd.selection.take());
        upd.table.relation = view.table;
    }
    Err(too_deep())
}

/// `del` with its target view (if it is one) replaced by the view's table.
pub fn delete_onto_table(session: &Session, mut del: ast::Delete) -> SqlResult<ast::Delete> {
    for _ in 0..VIEW_DEPTH_MAX {
        let tables = match &mut del.from {
            ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
        };
        let Some(target) = tables.first_mut() else {
            return Ok(del);
        };
        let Some(view) = simple_view_of(session, &target.relation, "DELETE")? else {
            return Ok(del);
        };
        target.relation = view.table.clone();
        if let Some(selection) = &mut del.selection {
            substitute(selection, &view);
        }
        substitute_items(&mut del.returning, &view);
        del.selection = and(view.filter.clone(), del.selection.take());
    }
    Err(too_deep())
}

fn too_deep() -> SqlError {
    SqlError::new(
        code::PROGRAM_LIMIT_EXCEEDED,
        format!("views nested more than {VIEW_DEPTH_MAX} deep cannot be written through"),
    )
}

/// The view `relation` names, taken apart; None if it names no view. A view that is not simple
/// fails with PostgreSQL's error.
fn simple_view_of(
    session: &Session,
    relation: &TableFactor,
    command: &str,
) -> SqlResult<Option<SimpleView>> {
    let TableFactor::Table { name, .. } = relation else {
        return Ok(None);
    };
    let (schema, rel) = crate::ddl::split_name(name);
    let Some((_, RelationKind::View, oid)) =
        session.scope.resolve_relation(schema.as_deref(), &rel)
    else {
        return Ok(None);
    };
    let Some(def) = session.engine.catalog.read().views.get(&oid).cloned() else {
        return Ok(None);
    };
    let not_simple = || {
        SqlError::new(
            code::OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("cannot {} view \"{rel}\"", command.to_lowercase()),
        )
        .with_detail(
            "Views that do not select from a single table or view are not automatically updatable.",
        )
    };
    let Some(Statement::Query(query)) = parse_sql(&def.query_sql)?.pop() else {
        return Err(not_simple());
    };
    let simple_query = query.with.is_none()
        && query.order_by.is_none()
        && query.limit_clause.is_none()
        && query.fetch.is_none();
    let SetExpr::Select(select) = *query.body else {
        return Err(not_simple());
    };
    let no_grouping =
        matches!(&select.group_by, ast::GroupByExpr::Expressions(e, _) if e.is_empty());
    let [from] = select.from.as_slice() else {
        return Err(not_simple());
    };
    if !simple_query
        || !no_grouping
        || select.having.is_some()
        || select.distinct.is_some()
        || !from.joins.is_empty()
        || !matches!(from.relation, TableFactor::Table { args: None, .. })
    {
        return Err(not_simple());
    }
    let mut columns = Vec::with_capacity(select.projection.len());
    for (i, item) in select.projection.iter().enumerate() {
        let expr = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e.clone(),
            _ => {
                return Err(SqlError::unsupported(
                    "UPDATE or DELETE through a view with *",
                ))
            }
        };
        let Some(column) = def.column_names.get(i) else {
            return Err(not_simple());
        };
        columns.push((column.clone(), expr));
    }
    Ok(Some(SimpleView {
        name: rel,
        table: from.relation.clone(),
        filter: select.selection.clone(),
        columns,
    }))
}

impl SimpleView {
    fn column(&self, name: &str) -> Option<&Expr> {
        self.columns
            .iter()
            .find(|(column, _)| column == name)
            .map(|(_, e)| e)
    }

    /// The table column an assignment to view column `target` writes.
    fn base_column(&self, target: &ObjectName) -> SqlResult<ObjectName> {
        let name = last_part(target);
        match self.column(&name) {
            Some(Expr::Identifier(ident)) => {
                Ok(ObjectName(vec![ObjectNamePart::Identifier(ident.clone())]))
            }
            Some(Expr::CompoundIdentifier(parts)) => {
                Ok(ObjectName(vec![ObjectNamePart::Identifier(
                    parts.last().cloned().unwrap_or_else(|| Ident::new("")),
                )]))
            }
            Some(_) => Err(SqlError::new(
                code::FEATURE_NOT_SUPPORTED,
                format!("cannot update column \"{name}\" of view \"{}\"", self.name),
            )
            .with_detail(
                "View columns that are not columns of their base relation are not updatable.",
            )),
            None => Err(SqlError::new(
                code::UNDEFINED_COLUMN,
                format!(
                    "column \"{name}\" of relation \"{}\" does not exist",
                    self.name
                ),
            )),
        }
    }
}

fn last_part(name: &ObjectName) -> String {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(i)) => super::ident_name(i),
        _ => String::new(),
    }
}

/// Replaces references to view columns (bare or qualified by the view's name) with their
/// defining expressions. Replacements are not visited again.
fn substitute(expr: &mut Expr, view: &SimpleView) {
    let _ = visit_expressions_mut(expr, |e| {
        let name = match e {
            Expr::Identifier(i) => Some(super::ident_name(i)),
            Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
                let qualifier = super::ident_name(&parts[0]);
                (qualifier == view.name).then(|| super::ident_name(&parts[1]))
            }
            _ => None,
        };
        if let Some(defining) = name.as_deref().and_then(|n| view.column(n)) {
            *e = Expr::Nested(Box::new(defining.clone()));
        }
        ControlFlow::<()>::Continue(())
    });
}

fn substitute_items(items: &mut Option<Vec<SelectItem>>, view: &SimpleView) {
    for item in items.iter_mut().flatten() {
        match item {
            SelectItem::UnnamedExpr(e) => {
                // Keep the name the client sees: the view column's, not the expression's.
                let alias = match e {
                    Expr::Identifier(i) => Some(i.clone()),
                    _ => None,
                };
                substitute(e, view);
                if let Some(alias) = alias {
                    *item = SelectItem::ExprWithAlias {
                        expr: e.clone(),
                        alias,
                    };
                }
            }
            SelectItem::ExprWithAlias { expr, .. } => substitute(expr, view),
            _ => {}
        }
    }
}

fn and(a: Option<Expr>, b: Option<Expr>) -> Option<Expr> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Expr::BinaryOp {
            left: Box::new(Expr::Nested(Box::new(a))),
            op: ast::BinaryOperator::And,
            right: Box::new(Expr::Nested(Box::new(b))),
        }),
        (a, b) => a.or(b),
    }
}
