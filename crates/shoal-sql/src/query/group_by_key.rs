//! GROUP BY and DISTINCT by a key rather than by the value: where PostgreSQL's equality is
//! coarser than Arrow's (numerics equal at different display scales, `1.5` and `1.50`;
//! intervals of equal span, `'1 mon'` and `'30 days'`), the aggregation groups by a key that
//! is equal exactly when the values are, and shows each group's first value, as PostgreSQL's
//! hash aggregation does.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result as DfResult};
use datafusion::logical_expr::{Expr, LogicalPlan, Projection};

/// Regroups an aggregation (GROUP BY or DISTINCT) whose group expressions `needs_key` picks:
/// it groups by `key(expr)` instead, and a projection above it gives each group's value back
/// (its first value) under the column's name.
pub fn group_by_key(
    node: LogicalPlan,
    needs_key: impl Fn(&Expr, &DFSchema) -> bool,
    key: impl Fn(Expr) -> Expr,
    label: &str,
) -> DfResult<Transformed<LogicalPlan>> {
    let agg = match node {
        LogicalPlan::Aggregate(agg) => agg,
        LogicalPlan::Distinct(datafusion::logical_expr::Distinct::All(input))
            if input
                .schema()
                .columns()
                .into_iter()
                .any(|c| needs_key(&Expr::Column(c), input.schema())) =>
        {
            let group = input
                .schema()
                .columns()
                .into_iter()
                .map(Expr::Column)
                .collect();
            datafusion::logical_expr::Aggregate::try_new(input, group, vec![])?
        }
        other => return Ok(Transformed::no(other)),
    };
    let input_schema = agg.input.schema().clone();
    let keyed_groups: Vec<bool> = agg
        .group_expr
        .iter()
        .map(|g| !matches!(g, Expr::GroupingSet(_)) && needs_key(g, &input_schema))
        .collect();
    // One output column per group expression (DataFusion merges a repeated one, `GROUP BY x,
    // x`, into one column; such a grouping is left as it is).
    let one_column_each = agg.schema.fields().len() == agg.group_expr.len() + agg.aggr_expr.len();
    let grouping_sets = agg
        .group_expr
        .iter()
        .any(|g| matches!(g, Expr::GroupingSet(_)));
    if !keyed_groups.contains(&true) || grouping_sets || !one_column_each {
        return Ok(Transformed::no(LogicalPlan::Aggregate(agg)));
    }
    let mut group_expr = Vec::with_capacity(agg.group_expr.len());
    let mut aggr_expr = agg.aggr_expr.clone();
    for (g, keyed) in agg.group_expr.iter().zip(&keyed_groups) {
        if !keyed {
            group_expr.push(g.clone());
            continue;
        }
        let name = format!("{label}_{}", aggr_expr.len());
        group_expr.push(key(g.clone()).alias(format!("{name}_key")));
        // The group's first value, as PostgreSQL's hash aggregation shows it.
        let first = datafusion::functions_aggregate::expr_fn::first_value(g.clone(), vec![]);
        aggr_expr.push(first.alias(name));
    }
    let grouped =
        datafusion::logical_expr::Aggregate::try_new(agg.input.clone(), group_expr, aggr_expr)?;
    let grouped_schema = grouped.schema.clone();
    // Output columns as the original aggregation had them: groups, then aggregates.
    let groups = agg.group_expr.len();
    let mut extra = agg.aggr_expr.len();
    let mut exprs = Vec::with_capacity(agg.schema.fields().len());
    for (i, keyed) in keyed_groups.iter().enumerate() {
        let (q, f) = agg.schema.qualified_field(i);
        let source = match keyed {
            true => {
                let c = groups + extra;
                extra += 1;
                grouped_schema.qualified_field(c)
            }
            false => grouped_schema.qualified_field(i),
        };
        exprs.push(Expr::Column(source.into()).alias_qualified(q.cloned(), f.name()));
    }
    for a in 0..agg.aggr_expr.len() {
        let (q, f) = agg.schema.qualified_field(groups + a);
        let source = grouped_schema.qualified_field(groups + a);
        exprs.push(Expr::Column(source.into()).alias_qualified(q.cloned(), f.name()));
    }
    let projection = Projection::try_new(exprs, Arc::new(LogicalPlan::Aggregate(grouped)))?;
    Ok(Transformed::yes(LogicalPlan::Projection(projection)))
}
