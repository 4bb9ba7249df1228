//! `count(t.*)` counts the rows where t's whole-row value is not NULL, and in PostgreSQL that
//! value is NULL only in a row an outer join extended with NULLs for t (a row of t whose
//! columns are all NULL still counts). DataFusion reads `count(t.*)` as `count(*)`, which also
//! counts the NULL-extended rows. Where t can be NULL-extended, the count becomes one of a
//! NOT NULL column of t's table, NULL exactly in those rows; where t has none (a subquery, a
//! table without NOT NULL columns) it is refused rather than counted wrongly.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, JoinOperator, ObjectName,
    ObjectNamePart, Query, Select, SetExpr, TableFactor, TableWithJoins, VisitMut, VisitorMut,
};
use shoal_storage::catalog::RelationKind;

use crate::error::{code, SqlError, SqlResult};
use crate::query::scope::PlanScope;

/// Rewrites `count(t.*)` in the select lists and HAVING clauses of `query`'s own SELECTs
/// (nested queries are rewritten when the caller's walk reaches them).
pub fn count_present_rows(query: &mut Query, scope: &PlanScope) -> SqlResult<()> {
    rewrite_set_expr(&mut query.body, scope)
}

fn rewrite_set_expr(body: &mut SetExpr, scope: &PlanScope) -> SqlResult<()> {
    match body {
        SetExpr::Select(select) => rewrite_select(select, scope),
        SetExpr::SetOperation { left, right, .. } => {
            rewrite_set_expr(left, scope)?;
            rewrite_set_expr(right, scope)
        }
        _ => Ok(()),
    }
}

/// A FROM item's qualifier, its table when it names one, and whether an outer join can
/// extend it with NULLs.
struct Relation {
    qualifier: String,
    table: Option<ObjectName>,
    nullable: bool,
}

fn rewrite_select(select: &mut Select, scope: &PlanScope) -> SqlResult<()> {
    let mut relations = Vec::new();
    for from in &select.from {
        collect_relations(from, false, &mut relations);
    }
    if !relations.iter().any(|r| r.nullable) {
        return Ok(());
    }
    let mut rewriter = CountRewriter {
        relations: &relations,
        scope,
        query_depth: 0,
        error: None,
    };
    for item in select.projection.iter_mut() {
        let _ = item.visit(&mut rewriter);
    }
    if let Some(having) = select.having.as_mut() {
        let _ = having.visit(&mut rewriter);
    }
    rewriter.error.map_or(Ok(()), Err)
}

fn collect_relations(from: &TableWithJoins, nullable: bool, out: &mut Vec<Relation>) {
    collect_factor(&from.relation, nullable, out);
    for join in &from.joins {
        let (left_nullable, right_nullable) = match &join.join_operator {
            JoinOperator::Left(_) | JoinOperator::LeftOuter(_) => (false, true),
            JoinOperator::Right(_) | JoinOperator::RightOuter(_) => (true, false),
            JoinOperator::FullOuter(_) => (true, true),
            _ => (false, false),
        };
        if left_nullable {
            out.iter_mut().for_each(|r| r.nullable = true);
        }
        collect_factor(&join.relation, nullable || right_nullable, out);
    }
}

fn collect_factor(factor: &TableFactor, nullable: bool, out: &mut Vec<Relation>) {
    match factor {
        TableFactor::NestedJoin {
            table_with_joins, ..
        } => {
            let mut inner = Vec::new();
            collect_relations(table_with_joins, nullable, &mut inner);
            out.extend(inner);
        }
        TableFactor::Table { name, alias, .. } => {
            let qualifier = match alias {
                Some(a) => normalize(&a.name),
                None => last_part(name),
            };
            out.push(Relation {
                qualifier,
                table: Some(name.clone()),
                nullable,
            });
        }
        other => {
            let qualifier = match other {
                TableFactor::Derived { alias: Some(a), .. }
                | TableFactor::Function { alias: Some(a), .. }
                | TableFactor::UNNEST { alias: Some(a), .. } => normalize(&a.name),
                _ => return,
            };
            out.push(Relation {
                qualifier,
                table: None,
                nullable,
            });
        }
    }
}

struct CountRewriter<'a> {
    relations: &'a [Relation],
    scope: &'a PlanScope,
    /// Subqueries entered: their count(t.*) belongs to their own FROM clause.
    query_depth: usize,
    error: Option<SqlError>,
}

impl VisitorMut for CountRewriter<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.query_depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.query_depth -= 1;
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if self.query_depth > 0 {
            return ControlFlow::Continue(());
        }
        let Some(arg) = count_whole_row_arg(expr) else {
            return ControlFlow::Continue(());
        };
        let Some(qualifier) = arg.0.last().and_then(ObjectNamePart::as_ident) else {
            return ControlFlow::Continue(());
        };
        let name = normalize(qualifier);
        let Some(relation) = self.relations.iter().find(|r| r.qualifier == name) else {
            return ControlFlow::Continue(());
        };
        if !relation.nullable {
            return ControlFlow::Continue(());
        }
        match not_null_column(relation, self.scope) {
            Some(column) => {
                let column = Expr::CompoundIdentifier(vec![qualifier.clone(), column]);
                *arg_slot(expr) = FunctionArg::Unnamed(FunctionArgExpr::Expr(column));
                ControlFlow::Continue(())
            }
            None => {
                self.error = Some(SqlError::new(
                    code::FEATURE_NOT_SUPPORTED,
                    format!(
                        "count({name}.*) is not supported where an outer join can extend \"{name}\" with NULLs and it is not a table with a NOT NULL column"
                    ),
                ));
                ControlFlow::Break(())
            }
        }
    }
}

/// The qualifier of `count(t.*)` (not DISTINCT, no FILTER or OVER, which keep DataFusion's
/// meaning or its refusal).
fn count_whole_row_arg(expr: &Expr) -> Option<&ObjectName> {
    let Expr::Function(f) = expr else { return None };
    if last_part(&f.name) != "count" || f.over.is_some() {
        return None;
    }
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    if list.duplicate_treatment.is_some() {
        return None;
    }
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::QualifiedWildcard(name))] => Some(name),
        _ => None,
    }
}

fn arg_slot(expr: &mut Expr) -> &mut FunctionArg {
    let Expr::Function(f) = expr else {
        unreachable!("checked by count_whole_row_arg")
    };
    let FunctionArguments::List(list) = &mut f.args else {
        unreachable!("checked by count_whole_row_arg")
    };
    &mut list.args[0]
}

/// A column of the relation's table that holds no NULL in any stored row.
fn not_null_column(relation: &Relation, scope: &PlanScope) -> Option<Ident> {
    let name = relation.table.as_ref()?;
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
    let column = def.columns.iter().find(|c| c.not_null)?;
    Some(Ident::with_quote('"', column.name.clone()))
}

fn normalize(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

fn last_part(name: &ObjectName) -> String {
    name.0
        .last()
        .and_then(ObjectNamePart::as_ident)
        .map(normalize)
        .unwrap_or_default()
}
