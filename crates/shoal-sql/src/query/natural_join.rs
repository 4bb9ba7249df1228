//! NATURAL joins written as the USING joins they mean: `a NATURAL JOIN b` is
//! `a JOIN b USING (the columns both have, in a's order)`. DataFusion plans NATURAL joins
//! itself, but `join_using` gives USING joins PostgreSQL's merged columns (first in `*`, and
//! for RIGHT and FULL joins the right side's or either side's value); spelling NATURAL out lets
//! it do the same there. Only the first join of a FROM item is rewritten, between relations
//! whose columns are known here: tables, views, and subqueries whose select lists name their
//! columns.

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, JoinConstraint, JoinOperator, ObjectName, Query, SelectItem, SetExpr, TableFactor,
};
use shoal_storage::catalog::RelationKind;

use crate::query::column_names::output_name;
use crate::query::scope::PlanScope;

/// Rewrites the SELECTs directly in `query`'s body (nested queries are visited on their own).
pub fn natural_to_using(query: &mut Query, scope: &PlanScope) {
    rewrite_set_expr(&mut query.body, scope);
}

fn rewrite_set_expr(body: &mut SetExpr, scope: &PlanScope) {
    match body {
        SetExpr::Select(select) => {
            for from in select.from.iter_mut() {
                let Some(join) = from.joins.first_mut() else {
                    continue;
                };
                let Some(constraint) = natural_constraint(&mut join.join_operator) else {
                    continue;
                };
                let (Some(left), Some(right)) = (
                    relation_columns(&from.relation, scope),
                    relation_columns(&join.relation, scope),
                ) else {
                    continue;
                };
                let common: Vec<ObjectName> = left
                    .into_iter()
                    .filter(|c| right.contains(c))
                    .map(|c| ObjectName::from(vec![Ident::with_quote('"', c)]))
                    .collect();
                // Without common columns a NATURAL join is a cross join, and USING () is no SQL.
                if !common.is_empty() {
                    *constraint = JoinConstraint::Using(common);
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            rewrite_set_expr(left, scope);
            rewrite_set_expr(right, scope);
        }
        _ => {}
    }
}

fn natural_constraint(op: &mut JoinOperator) -> Option<&mut JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
            if matches!(c, JoinConstraint::Natural) =>
        {
            Some(c)
        }
        _ => None,
    }
}

/// The relation's column names, normalized as identifiers are, when they are known.
fn relation_columns(factor: &TableFactor, scope: &PlanScope) -> Option<Vec<String>> {
    match factor {
        TableFactor::Derived {
            subquery, alias, ..
        } => {
            let mut names = output_names(&subquery.body);
            // A column list renames the first columns.
            if let Some(a) = alias.as_ref().filter(|a| !a.columns.is_empty()) {
                let renamed: Vec<String> = a.columns.iter().map(|c| normalize(&c.name)).collect();
                names = match names {
                    Some(names) if names.len() < renamed.len() => return None,
                    Some(names) => Some(
                        renamed
                            .iter()
                            .cloned()
                            .chain(names[renamed.len()..].iter().cloned())
                            .collect(),
                    ),
                    None => None,
                };
            }
            names
        }
        TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } if alias.as_ref().is_none_or(|a| a.columns.is_empty()) => table_columns(name, scope),
        _ => None,
    }
}

/// A subquery's column names when its (first) select list names each one plainly; its items
/// already carry PostgreSQL's names as aliases (`column_names`).
fn output_names(body: &SetExpr) -> Option<Vec<String>> {
    match body {
        SetExpr::Select(select) => select
            .projection
            .iter()
            .map(|item| match item {
                SelectItem::ExprWithAlias { alias, .. } => Some(normalize(alias)),
                SelectItem::UnnamedExpr(Expr::Identifier(i)) => Some(normalize(i)),
                SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
                    parts.last().map(normalize)
                }
                _ => None,
            })
            .map(|name| name.filter(|n| output_name(n) == n))
            .collect(),
        SetExpr::SetOperation { left, .. } => output_names(left),
        SetExpr::Query(q) => output_names(&q.body),
        _ => None,
    }
}

fn table_columns(name: &ObjectName, scope: &PlanScope) -> Option<Vec<String>> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| p.as_ident().map(normalize))
        .collect::<Option<_>>()?;
    let (schema, table) = match parts.as_slice() {
        [table] => (None, table),
        [schema, table] => (Some(schema.as_str()), table),
        _ => return None,
    };
    let (_, RelationKind::Table, oid) = scope.resolve_relation(schema, table)? else {
        return None;
    };
    let catalog = scope.engine.catalog.read();
    let def = catalog.tables.get(&oid)?;
    Some(def.columns.iter().map(|c| c.name.clone()).collect())
}

fn normalize(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}
