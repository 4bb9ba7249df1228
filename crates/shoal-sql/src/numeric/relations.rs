//! The plan nodes whose columns the numeric rule retypes or regroups (see `plan`): VALUES lists
//! and set operations take numeric for a column that mixes numerics with integers; joins match
//! numeric keys by value; GROUP BY and DISTINCT group numerics by value, not display scale.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, Field};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::Cast;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, Projection, Union, Values};

use super::plan::{common_kind, key, kind, rewrite_expr, to_float8, to_numeric, unify, Kind};
use super::{is_decimal, is_numeric, NUMERIC_ARROW};

/// GROUP BY and DISTINCT over numerics group values, not display scales (`1.5` and `1.50` are
/// one group): the aggregation groups by `numeric_key` (see `query::group_by_key`).
pub(super) fn group_by_value(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    crate::query::group_by_key::group_by_key(
        node,
        |e, schema| kind(e, schema) == Kind::Numeric,
        key,
        "numeric_group",
    )
}

/// A join on numeric columns (USING, NATURAL, INTERSECT and EXCEPT, which DataFusion plans as
/// joins) matches values, not display scales: its keys become `numeric_key`s.
pub(super) fn join_keys(mut join: datafusion::logical_expr::Join) -> DfResult<LogicalPlan> {
    let (left, right) = (join.left.schema().clone(), join.right.schema().clone());
    for (l, r) in &mut join.on {
        if kind(l, &left) != Kind::Numeric && kind(r, &right) != Kind::Numeric {
            continue;
        }
        *l = key(to_numeric(l.clone(), &left)?);
        *r = key(to_numeric(r.clone(), &right)?);
    }
    // The keys do not change the join's output: its schema stands.
    Ok(LogicalPlan::Join(join))
}

/// A VALUES column that holds numerics holds them with each value's own scale: `VALUES (2),
/// (77.7)` is 2 and 77.7. DataFusion typed the column as one decimal.
pub(super) fn values_as_numeric(values: Values) -> DfResult<Transformed<LogicalPlan>> {
    let empty = DFSchema::empty();
    let columns = values.schema.fields().len();
    // The rows' own expressions first: they are no plan node's expressions. DataFusion cast
    // each value to the column's common decimal type; the value as written keeps its own scale
    // (a numeric cast the user wrote is a `pg_numeric` call, see `rewrite.rs`).
    let mut rows = values
        .values
        .into_iter()
        .map(|row| {
            row.into_iter()
                .map(|e| {
                    let e = match e {
                        Expr::Cast(Cast { expr, field }) if is_decimal(field.data_type()) => *expr,
                        other => other,
                    };
                    e.transform_up(|x| rewrite_expr(x, &empty)).map(|t| t.data)
                })
                .collect::<DfResult<Vec<_>>>()
        })
        .collect::<DfResult<Vec<_>>>()?;
    let kinds = |c: usize| -> Vec<Kind> { rows.iter().map(|row| kind(&row[c], &empty)).collect() };
    let common: Vec<Option<Kind>> = (0..columns)
        .map(|c| {
            let t = values.schema.field(c).data_type();
            match common_kind(&kinds(c)) {
                None if is_decimal(t) || is_numeric(t) => Some(Kind::Numeric),
                other => other,
            }
        })
        .collect();
    // A column of other values whose type the rewrite changed (an ARRAY of decimal literals
    // is now an array of numerics) takes the new type, when every row agrees on it.
    let rewritten: Vec<Option<ArrowType>> = (0..columns)
        .map(|c| {
            let old = values.schema.field(c).data_type();
            let mut types = rows.iter().filter_map(|row| match &row[c] {
                Expr::Literal(v, _) if v.is_null() => None,
                e => e.get_type(&empty).ok(),
            });
            let first = types.next()?;
            (common[c].is_none() && first != *old && types.all(|t| t == first)).then_some(first)
        })
        .collect();
    if common.iter().all(Option::is_none) && rewritten.iter().all(Option::is_none) {
        return Ok(Transformed::no(LogicalPlan::Values(Values {
            schema: values.schema,
            values: rows,
        })));
    }
    for row in &mut rows {
        for (c, k) in common.iter().enumerate() {
            let Some(k) = k else { continue };
            let e = std::mem::replace(&mut row[c], Expr::Literal(ScalarValue::Null, None));
            row[c] = match (k, kind(&e, &empty)) {
                (Kind::Float, _) => to_float8(e, &empty)?,
                (_, Kind::Null) => Expr::Literal(ScalarValue::LargeBinary(None), None),
                (_, Kind::Other | Kind::Float) => e,
                _ => to_numeric(e, &empty)?,
            };
        }
    }
    let fields = values
        .schema
        .fields()
        .iter()
        .zip(common.iter().zip(&rewritten))
        .map(|(f, (k, rewritten))| match (k, rewritten) {
            (Some(Kind::Numeric), _) => Arc::new(Field::new(f.name(), NUMERIC_ARROW, true)),
            (Some(_), _) => Arc::new(Field::new(f.name(), ArrowType::Float64, true)),
            (None, Some(t)) => Arc::new(f.as_ref().clone().with_data_type(t.clone())),
            (None, None) => f.clone(),
        })
        .collect::<Vec<_>>();
    let qualified = values
        .schema
        .iter()
        .zip(fields)
        .map(|((q, _), f)| (q.cloned(), f))
        .collect::<Vec<_>>();
    let schema = DFSchema::new_with_metadata(qualified, values.schema.metadata().clone())?;
    Ok(Transformed::yes(LogicalPlan::Values(Values {
        schema: Arc::new(schema),
        values: rows,
    })))
}

/// A set operation's column is numeric when its branches mix numerics with integers (float8
/// when a float is among them); each branch converts its own values.
pub(super) fn union_as_numeric(union: Union) -> DfResult<Transformed<LogicalPlan>> {
    let columns = union.schema.fields().len();
    let mut common = Vec::with_capacity(columns);
    for c in 0..columns {
        let kinds: Vec<Kind> = union
            .inputs
            .iter()
            .map(|i| {
                let f = i.schema().qualified_field(c);
                kind(&Expr::Column(f.into()), i.schema())
            })
            .collect();
        common.push(common_kind(&kinds));
    }
    let converted = |t: &ArrowType, k: Kind| match k {
        Kind::Float => t == &ArrowType::Float64,
        _ => is_numeric(t),
    };
    let needed = common.iter().enumerate().any(|(c, k)| {
        k.is_some_and(|k| {
            union
                .inputs
                .iter()
                .any(|i| !converted(i.schema().field(c).data_type(), k))
        })
    });
    if !needed {
        // The inputs may have become numeric below (a decimal literal): the union's schema
        // follows them.
        let stale = (0..columns).any(|c| {
            let t = union.schema.field(c).data_type();
            union
                .inputs
                .iter()
                .any(|i| i.schema().field(c).data_type() != t)
        });
        if stale && common.iter().any(Option::is_some) {
            let inputs = union.inputs.clone();
            return Ok(Transformed::yes(LogicalPlan::Union(
                Union::try_new_with_loose_types(inputs)?,
            )));
        }
        return Ok(Transformed::no(LogicalPlan::Union(union)));
    }
    let inputs = union
        .inputs
        .iter()
        .map(|input| {
            let schema = input.schema();
            let exprs = (0..columns)
                .map(|c| {
                    let (q, f) = schema.qualified_field(c);
                    let column = Expr::Column((q, f).into());
                    let converted = match common[c] {
                        None => column,
                        Some(k) => unify(vec![column], k, schema)?.remove(0),
                    };
                    Ok(converted.alias_qualified(q.cloned(), f.name()))
                })
                .collect::<DfResult<Vec<_>>>()?;
            Ok(Arc::new(LogicalPlan::Projection(Projection::try_new(
                exprs,
                input.clone(),
            )?)))
        })
        .collect::<DfResult<Vec<_>>>()?;
    Ok(Transformed::yes(LogicalPlan::Union(
        Union::try_new_with_loose_types(inputs)?,
    )))
}
