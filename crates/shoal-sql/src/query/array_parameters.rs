//! `x = ANY($1)`: the parameter is an array of x's type, as PostgreSQL resolves it, so Describe
//! reports `int4[]` (or `uuid[]`, ...) and drivers send the array they hold. DataFusion plans
//! the comparison as `array_has($1, x)` and infers no type for a function's parameter.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, Field};
use datafusion::common::tree_node::Transformed;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan};

use crate::query::expr_pass::rewrite_expressions_up;

pub fn type_any_parameters(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    rewrite_expressions_up(plan, |e, schema| {
        let Expr::ScalarFunction(mut call) = e else {
            return Ok(Transformed::no(e));
        };
        if call.func.name() != "array_has" || call.args.len() != 2 {
            return Ok(Transformed::no(Expr::ScalarFunction(call)));
        }
        let needle = match call.args[1].to_field(schema) {
            Ok((_, field)) if field.data_type() != &ArrowType::Null => field,
            _ => return Ok(Transformed::no(Expr::ScalarFunction(call))),
        };
        match &mut call.args[0] {
            Expr::Placeholder(p) if p.field.is_none() => {
                let element = needle
                    .as_ref()
                    .clone()
                    .with_name("item")
                    .with_nullable(true);
                p.field = Some(Arc::new(Field::new(
                    &p.id,
                    ArrowType::List(Arc::new(element)),
                    true,
                )));
                Ok(Transformed::yes(Expr::ScalarFunction(call)))
            }
            _ => Ok(Transformed::no(Expr::ScalarFunction(call))),
        }
    })
}
