//! Rewrites of a query's shape: positions in DISTINCT ON, FETCH FIRST, the column of a
//! quantified subquery, and quoted LIMIT counts.

use datafusion::sql::sqlparser::ast::{self, DataType, Expr, Ident};

/// DISTINCT ON and ORDER BY may name output columns by position (`DISTINCT ON (1) ... ORDER BY
/// 1`), as PostgreSQL reads them. DataFusion resolves positions in ORDER BY but takes them for
/// constants in DISTINCT ON, and then finds the two lists different. Both get the output
/// column's expression written out.
pub(super) fn distinct_on_positions(query: &mut ast::Query) {
    let ast::SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    let Some(ast::Distinct::On(distinct)) = &select.distinct else {
        return;
    };
    let output = |e: &Expr| -> Option<Expr> {
        let Expr::Value(v) = e else { return None };
        let ast::Value::Number(n, _) = &v.value else {
            return None;
        };
        let position: usize = n.parse().ok()?;
        match select.projection.get(position.checked_sub(1)?)? {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                Some(e.clone())
            }
            _ => None,
        }
    };
    // An output column's alias stands for its expression.
    let aliased = |e: &Expr| -> Option<Expr> {
        let Expr::Identifier(name) = e else {
            return None;
        };
        select.projection.iter().find_map(|item| match item {
            ast::SelectItem::ExprWithAlias { expr, alias } if alias.value == name.value => {
                Some(expr.clone())
            }
            _ => None,
        })
    };
    let resolved = |e: &Expr| {
        output(e)
            .or_else(|| aliased(e))
            .unwrap_or_else(|| e.clone())
    };
    let mut distinct: Vec<Expr> = distinct
        .iter()
        .map(|e| output(e).unwrap_or_else(|| e.clone()))
        .collect();
    if let Some(ast::OrderBy {
        kind: ast::OrderByKind::Expressions(order),
        ..
    }) = &mut query.order_by
    {
        // The DISTINCT ON expressions are a set: PostgreSQL takes them in any order as long
        // as ORDER BY starts with them, where DataFusion wants them in ORDER BY's order.
        if order.len() >= distinct.len() {
            let leading: Vec<Expr> = order[..distinct.len()]
                .iter()
                .map(|item| resolved(&item.expr))
                .collect();
            let wanted: Vec<Expr> = distinct.iter().map(&resolved).collect();
            let same_set = leading.iter().all(|e| wanted.contains(e))
                && wanted.iter().all(|e| leading.contains(e));
            if same_set && leading != wanted {
                distinct = leading;
            }
        }
        for item in order.iter_mut() {
            // A constant stays a position: in ORDER BY a number is read as one.
            if let Some(e) = output(&item.expr).filter(|e| !matches!(e, Expr::Value(_))) {
                item.expr = e;
            }
        }
    }
    select.distinct = Some(ast::Distinct::On(distinct));
}

/// `FETCH FIRST n ROWS ONLY` is the standard spelling of `LIMIT n`, which DataFusion plans.
pub(crate) fn fetch_to_limit(query: &mut ast::Query) {
    let Some(fetch) = &query.fetch else { return };
    if fetch.with_ties || fetch.percent {
        return;
    }
    let quantity = fetch
        .quantity
        .clone()
        .unwrap_or_else(|| Expr::value(ast::Value::Number("1".into(), false)));
    match &mut query.limit_clause {
        None => {
            query.limit_clause = Some(ast::LimitClause::LimitOffset {
                limit: Some(quantity),
                offset: None,
                limit_by: vec![],
            });
        }
        Some(ast::LimitClause::LimitOffset {
            limit: limit @ None,
            ..
        }) => *limit = Some(quantity),
        Some(_) => return,
    }
    query.fetch = None;
}

/// DataFusion compares `x > ALL (SELECT c FROM t)` by pushing `x > c` into the subquery; when
/// the subquery reads the same table as the outer query without an alias, the two sides of that
/// comparison end up with the same qualified name and the outer one is lost. Naming the
/// subquery's column keeps them apart.
pub(super) fn name_quantified_subquery_column(query: &mut ast::Query) {
    let ast::SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    if let [item @ ast::SelectItem::UnnamedExpr(_)] = select.projection.as_mut_slice() {
        let ast::SelectItem::UnnamedExpr(e) = item else {
            return;
        };
        *item = ast::SelectItem::ExprWithAlias {
            expr: e.clone(),
            alias: Ident::new("__shoal_quantified"),
        };
    }
}

/// `LIMIT '5'`: a quoted count is read as a bigint, as PostgreSQL reads LIMIT's `unknown`
/// (drivers' simple protocol sends their parameters so).
pub(super) fn quoted_limit_as_bigint(query: &mut ast::Query) {
    let Some(ast::LimitClause::LimitOffset { limit, offset, .. }) = &mut query.limit_clause else {
        return;
    };
    let counts = limit
        .iter_mut()
        .chain(offset.iter_mut().map(|o| &mut o.value));
    for count in counts {
        if matches!(count, Expr::Value(v) if matches!(v.value, ast::Value::SingleQuotedString(_))) {
            *count = Expr::Cast {
                kind: ast::CastKind::Cast,
                expr: Box::new(count.clone()),
                data_type: DataType::BigInt(None),
                array: false,
                format: None,
            };
        }
    }
}
