//! An uncorrelated scalar subquery is NULL when it returns no rows, whatever its select list.
//! DataFusion declares its value as nullable as the subquery's column, so with a column that
//! cannot be NULL (`SELECT (SELECT 1 FROM t WHERE false)`) the simplifier folded
//! `(...) IS NULL` to false and `coalesce((...), 7)` to the subquery, and execution failed
//! with "Column '?column?' is declared as non-nullable but contains null values". The
//! subquery's column goes through `maybe_null`, an identity whose result may be NULL.
//! (Correlated subqueries become outer joins, which declare their columns nullable.)

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, FieldRef};
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Column, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, LogicalPlanBuilder, ReturnFieldArgs, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Subquery, Volatility,
};

/// Rewrites every uncorrelated scalar subquery of `plan` whose column is declared NOT NULL.
pub fn nullable_scalar_subqueries(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| {
        node.map_expressions(|e| {
            e.transform_up(|e| match e {
                Expr::ScalarSubquery(sq) if may_lose_null(&sq) => {
                    Ok(Transformed::yes(Expr::ScalarSubquery(maybe_null(sq)?)))
                }
                other => Ok(Transformed::no(other)),
            })
        })
    })
    .data()
}

/// An aggregate without GROUP BY always has its one row, so its NOT NULL column stays so.
fn may_lose_null(sq: &Subquery) -> bool {
    let schema = sq.subquery.schema();
    if !sq.outer_ref_columns.is_empty() || schema.fields().len() != 1 {
        return false;
    }
    if schema.field(0).is_nullable() {
        return false;
    }
    let mut inner = sq.subquery.as_ref();
    loop {
        match inner {
            LogicalPlan::Projection(p) => inner = p.input.as_ref(),
            LogicalPlan::SubqueryAlias(a) => inner = a.input.as_ref(),
            LogicalPlan::Aggregate(a) => return !a.group_expr.is_empty(),
            _ => return true,
        }
    }
}

fn maybe_null(sq: Subquery) -> DfResult<Subquery> {
    let plan = Arc::unwrap_or_clone(sq.subquery);
    let (qualifier, field) = plan.schema().qualified_field(0);
    let name = field.name().clone();
    let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
    let plan = LogicalPlanBuilder::from(plan)
        .project(vec![maybe_null_call(vec![column]).alias(name)])?
        .build()?;
    Ok(Subquery {
        subquery: Arc::new(plan),
        outer_ref_columns: sq.outer_ref_columns,
        spans: sq.spans,
    })
}

/// `maybe_null(e, ...)`: e, declared nullable and never folded into a constant. The further
/// arguments are ignored; a column among them keeps the physical plan from taking the call
/// for a constant.
pub fn maybe_null_call(args: Vec<Expr>) -> Expr {
    ScalarUDF::new_from_impl(MaybeNull {
        signature: Signature::variadic_any(Volatility::Volatile),
    })
    .call(args)
}

/// The identity, declared nullable. Volatile, so that constant folding does not replace it
/// with its (NOT NULL) argument.
#[derive(Debug, PartialEq, Eq, Hash)]
struct MaybeNull {
    signature: Signature,
}

impl ScalarUDFImpl for MaybeNull {
    fn name(&self) -> &str {
        "maybe_null"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(arg_types[0].clone())
    }

    /// The argument's field (its PostgreSQL type in the metadata included), nullable.
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let field = args.arg_fields[0].as_ref().clone().with_nullable(true);
        Ok(Arc::new(field))
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Ok(args.args.remove(0))
    }
}
