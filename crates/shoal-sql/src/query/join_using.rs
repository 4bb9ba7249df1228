//! The merged column of a join with USING (or NATURAL, see `natural_join`). In PostgreSQL an
//! unqualified `k` after `a FULL JOIN b USING (k)` is `COALESCE(a.k, b.k)` (for RIGHT joins,
//! `b.k`), so rows that exist only on the right still show their key. DataFusion resolves `k` to
//! `a.k`, which is NULL there. And `*` lists the merged columns first, then each side's other
//! columns, where DataFusion keeps every table's order. This rewrite spells the merged columns
//! out, for the common case of a USING join between two named relations at the start of a FROM
//! item.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    ExcludeSelectItem, Expr, GroupByExpr, Ident, JoinConstraint, JoinOperator, ObjectName, Query,
    Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, TableFactor, VisitMut,
    VisitorMut,
};

use crate::query::rewrite::function_call;

/// One merged column: its name and the expression that computes it.
struct Merged {
    name: String,
    expr: Expr,
}

/// Rewrites the SELECTs directly in `query`'s body (nested queries are visited on their own).
pub fn merge_using_columns(query: &mut Query) {
    rewrite_set_expr(&mut query.body);
}

fn rewrite_set_expr(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => rewrite_select(select),
        SetExpr::SetOperation { left, right, .. } => {
            rewrite_set_expr(left);
            rewrite_set_expr(right);
        }
        _ => {}
    }
}

fn rewrite_select(select: &mut Select) {
    let Some((sides, merged)) = merged_columns(select) else {
        return;
    };
    let mut replacer = Replacer {
        merged: &merged,
        depth: 0,
    };
    let mut projection = Vec::with_capacity(select.projection.len() + merged.len());
    for mut item in std::mem::take(&mut select.projection) {
        match &mut item {
            SelectItem::UnnamedExpr(Expr::Identifier(ident)) => {
                if let Some(m) = merged.iter().find(|m| m.name == ident_name(ident)) {
                    item = SelectItem::ExprWithAlias {
                        expr: m.expr.clone(),
                        alias: ident.clone(),
                    };
                }
            }
            SelectItem::Wildcard(options) if options.opt_exclude.is_none() && !sides.is_empty() => {
                // `*` is the merged columns, then the other columns of each side in turn, then
                // those of the relations joined later.
                for m in &merged {
                    // A relation joined later may have a column of the same name, which
                    // DataFusion would call ambiguous next to a plain alias.
                    let alias = match sides.len() {
                        2 => Ident::new(&m.name),
                        _ => crate::query::column_names::hidden_alias(&m.name, "merged"),
                    };
                    projection.push(SelectItem::ExprWithAlias {
                        expr: m.expr.clone(),
                        alias,
                    });
                }
                for (i, side) in sides.iter().enumerate() {
                    let mut options = options.clone();
                    if i < 2 {
                        options.opt_exclude = Some(ExcludeSelectItem::Multiple(
                            merged
                                .iter()
                                .map(|m| ObjectName::from(vec![Ident::new(&m.name)]))
                                .collect(),
                        ));
                    }
                    projection.push(SelectItem::QualifiedWildcard(
                        SelectItemQualifiedWildcardKind::ObjectName(ObjectName::from(vec![
                            side.clone()
                        ])),
                        options,
                    ));
                }
                continue;
            }
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                let _ = e.visit(&mut replacer);
            }
            _ => {}
        }
        projection.push(item);
    }
    select.projection = projection;
    if let Some(e) = &mut select.selection {
        let _ = e.visit(&mut replacer);
    }
    if let Some(e) = &mut select.having {
        let _ = e.visit(&mut replacer);
    }
    if let GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
        for e in exprs {
            let _ = e.visit(&mut replacer);
        }
    }
}

fn ident_name(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

/// The name a relation's columns are qualified with, when it has one.
fn qualifier(factor: &TableFactor) -> Option<Ident> {
    match factor {
        TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } => {
            Some(a.name.clone())
        }
        TableFactor::Table {
            name, alias: None, ..
        } => name.0.last().and_then(|p| p.as_ident()).cloned(),
        _ => None,
    }
}

/// The merged columns of a USING join that directly follows the first relation of a FROM
/// item; a single FROM item only, so `*` is unambiguous. The qualifiers `*` expands to come
/// with them, none when a later join has merged columns of its own or no name.
fn merged_columns(select: &Select) -> Option<(Vec<Ident>, Vec<Merged>)> {
    let [from] = select.from.as_slice() else {
        return None;
    };
    let join = from.joins.first()?;
    let (side, columns) = match &join.join_operator {
        JoinOperator::FullOuter(JoinConstraint::Using(c)) => (Side::Either, c),
        JoinOperator::Right(JoinConstraint::Using(c))
        | JoinOperator::RightOuter(JoinConstraint::Using(c)) => (Side::Right, c),
        JoinOperator::Join(JoinConstraint::Using(c))
        | JoinOperator::Inner(JoinConstraint::Using(c))
        | JoinOperator::Left(JoinConstraint::Using(c))
        | JoinOperator::LeftOuter(JoinConstraint::Using(c)) => (Side::Left, c),
        _ => return None,
    };
    let left = qualifier(&from.relation)?;
    let right = qualifier(&join.relation)?;
    let merged = columns
        .iter()
        .filter_map(|c| c.0.last().and_then(|p| p.as_ident()).cloned())
        .map(|col| {
            let left_col = Expr::CompoundIdentifier(vec![left.clone(), col.clone()]);
            let right_col = Expr::CompoundIdentifier(vec![right.clone(), col.clone()]);
            let expr = match side {
                Side::Left => left_col,
                Side::Right => right_col,
                Side::Either => function_call("coalesce", vec![left_col, right_col]),
            };
            Merged {
                name: ident_name(&col),
                expr,
            }
        })
        .collect();
    let mut sides = vec![left, right];
    for later in &from.joins[1..] {
        let merges = matches!(
            join_constraint(&later.join_operator),
            Some(JoinConstraint::Using(_) | JoinConstraint::Natural)
        );
        match qualifier(&later.relation) {
            Some(q) if !merges => sides.push(q),
            _ => {
                sides.clear();
                break;
            }
        }
    }
    Some((sides, merged))
}

/// Which side's value a merged column takes.
enum Side {
    Left,
    Right,
    Either,
}

fn join_constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c) => Some(c),
        _ => None,
    }
}

/// Replaces unqualified references to merged columns outside nested queries.
struct Replacer<'a> {
    merged: &'a [Merged],
    depth: usize,
}

impl VisitorMut for Replacer<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if self.depth > 0 {
            return ControlFlow::Continue(());
        }
        if let Expr::Identifier(ident) = e {
            let name = ident_name(ident);
            if let Some(m) = self.merged.iter().find(|m| m.name == name) {
                *e = m.expr.clone();
            }
        }
        ControlFlow::Continue(())
    }
}
