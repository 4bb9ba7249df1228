//! The result types of PostgreSQL's ranking window functions: `row_number`, `rank` and
//! `dense_rank` are bigint and `ntile` integer, where DataFusion's are unsigned 64-bit
//! integers (which Shoal would have to describe as numeric, the only PostgreSQL type that holds
//! them all). A projection above each window node casts them; the names stay, so the
//! nodes above still find their columns.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, Result as DfResult};
use datafusion::logical_expr::{Expr, LogicalPlan, Projection, WindowFunctionDefinition};

/// PostgreSQL's result type for a window function DataFusion answers differently.
fn postgres_type(window_expr: &Expr) -> Option<ArrowType> {
    let Expr::WindowFunction(f) = window_expr.clone().unalias() else {
        return None;
    };
    let WindowFunctionDefinition::WindowUDF(udf) = &f.fun else {
        return None;
    };
    match udf.name() {
        "row_number" | "rank" | "dense_rank" => Some(ArrowType::Int64),
        "ntile" => Some(ArrowType::Int32),
        _ => None,
    }
}

/// Puts a casting projection above a window node whose ranking functions' types differ from
/// PostgreSQL's.
pub fn cast_ranks(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::Window(window) = &node else {
        return Ok(Transformed::no(node));
    };
    let input_width = window.input.schema().fields().len();
    let casts: Vec<Option<ArrowType>> = window
        .window_expr
        .iter()
        .map(|e| postgres_type(e))
        .collect();
    if casts.iter().all(Option::is_none) {
        return Ok(Transformed::no(node));
    }
    let schema = window.schema.clone();
    let exprs = schema
        .iter()
        .enumerate()
        .map(|(i, (qualifier, field))| {
            let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
            let cast = i
                .checked_sub(input_width)
                .and_then(|w| casts[w].clone())
                .filter(|t| t != field.data_type());
            match cast {
                Some(t) => Expr::Cast(datafusion::logical_expr::Cast::new(Box::new(column), t))
                    .alias_qualified(qualifier.cloned(), field.name()),
                None => column,
            }
        })
        .collect();
    let projection = Projection::try_new(exprs, Arc::new(node))?;
    Ok(Transformed::yes(LogicalPlan::Projection(projection)))
}
