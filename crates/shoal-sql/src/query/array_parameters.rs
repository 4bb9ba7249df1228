//! `x = ANY($1)`: the parameter is an array of x's type, as PostgreSQL resolves it, so Describe
//! reports `int4[]` (or `uuid[]`, ...) and drivers send the array they hold; `$1 = ANY(a)` makes
//! the parameter a's element type. The comparison is a function call (`array_compare`, or
//! DataFusion's `array_has($1, x)`), and DataFusion infers no type for a function's parameter.

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
        if call.args.len() != 2 {
            return Ok(Transformed::no(Expr::ScalarFunction(call)));
        }
        // Which argument is the array and which the value sought in it.
        let (array, value) = match call.func.name() {
            "array_has" => (0, 1),
            name if crate::query::array_compare::is_array_compare(name) => (1, 0),
            _ => return Ok(Transformed::no(Expr::ScalarFunction(call))),
        };
        if let Expr::Placeholder(p) = &call.args[value] {
            if p.field.is_none() {
                let element = match call.args[array].to_field(schema) {
                    Ok((_, field)) => match field.data_type() {
                        ArrowType::List(e) | ArrowType::LargeList(e) => Some(e.clone()),
                        _ => None,
                    },
                    _ => None,
                };
                if let (Some(element), Expr::Placeholder(p)) = (element, &mut call.args[value]) {
                    p.field = Some(Arc::new(element.as_ref().clone().with_name(&p.id)));
                    return Ok(Transformed::yes(Expr::ScalarFunction(call)));
                }
            }
        }
        let needle = match call.args[value].to_field(schema) {
            Ok((_, field)) if field.data_type() != &ArrowType::Null => field,
            _ => return Ok(Transformed::no(Expr::ScalarFunction(call))),
        };
        match &mut call.args[array] {
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
