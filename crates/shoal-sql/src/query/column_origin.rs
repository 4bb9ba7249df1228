//! Where a result column comes from, for the RowDescription PostgreSQL sends: the table OID
//! and column number of a column that is a plain reference to a table's column (through
//! projections, filters, sorts, joins, aliases and GROUP BY keys), with that column's typmod
//! (`varchar(20)`, `numeric(10,2)`). An expression, an aggregate or a UNION has none: 0, 0 and
//! -1, as in PostgreSQL. Drivers show these as JDBC's getTableName, node-postgres's
//! tableID/columnID and pgx's TableOID/TableAttributeNumber.

use std::sync::Arc;

use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Expr, LogicalPlan};
use shoal_storage::catalog::TableDef;

use crate::query::column_provider::ColumnTableProvider;
use crate::query::provider::RowTableProvider;

/// The table column a result column reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnOrigin {
    pub table_oid: u32,
    /// 1-based, as pg_attribute.attnum.
    pub attnum: i16,
    pub typmod: i32,
}

/// The origin of each output column of `plan`.
pub fn origins(plan: &LogicalPlan) -> Vec<Option<ColumnOrigin>> {
    (0..plan.schema().fields().len())
        .map(|i| origin(plan, i))
        .collect()
}

fn origin(plan: &LogicalPlan, column: usize) -> Option<ColumnOrigin> {
    match plan {
        LogicalPlan::Projection(p) => {
            let input_column = column_index(p.expr.get(column)?, &p.input)?;
            origin(&p.input, input_column)
        }
        LogicalPlan::Aggregate(a) => {
            let key = a.group_expr.get(column)?;
            origin(&a.input, column_index(key, &a.input)?)
        }
        LogicalPlan::Filter(f) => origin(&f.input, column),
        LogicalPlan::Sort(s) => origin(&s.input, column),
        LogicalPlan::Limit(l) => origin(&l.input, column),
        LogicalPlan::SubqueryAlias(s) => origin(&s.input, column),
        LogicalPlan::Repartition(r) => origin(&r.input, column),
        // The input's columns, then the window functions' values.
        LogicalPlan::Window(w) if column < w.input.schema().fields().len() => {
            origin(&w.input, column)
        }
        LogicalPlan::Distinct(datafusion::logical_expr::Distinct::All(input)) => {
            origin(input, column)
        }
        LogicalPlan::Join(j) => {
            let left_width = j.left.schema().fields().len();
            match j.join_type {
                datafusion::common::JoinType::LeftSemi
                | datafusion::common::JoinType::LeftAnti
                | datafusion::common::JoinType::LeftMark => origin(&j.left, column),
                datafusion::common::JoinType::RightSemi
                | datafusion::common::JoinType::RightAnti
                | datafusion::common::JoinType::RightMark => origin(&j.right, column),
                _ if column < left_width => origin(&j.left, column),
                _ => origin(&j.right, column - left_width),
            }
        }
        LogicalPlan::TableScan(scan) => {
            let table_column = match &scan.projection {
                Some(projection) => *projection.get(column)?,
                None => column,
            };
            let def = table_def(scan)?;
            let c = def.columns.get(table_column)?;
            Some(ColumnOrigin {
                table_oid: def.oid,
                attnum: i16::try_from(table_column + 1).ok()?,
                typmod: crate::types::pg_type_of(&c.data_type).1,
            })
        }
        _ => None,
    }
}

/// The position in `input`'s schema of the column `e` names, if `e` is a column (or an
/// aliased one).
fn column_index(e: &Expr, input: &LogicalPlan) -> Option<usize> {
    match e {
        Expr::Column(c) => input.schema().index_of_column(c).ok(),
        Expr::Alias(a) => column_index(&a.expr, input),
        _ => None,
    }
}

fn table_def(scan: &datafusion::logical_expr::TableScan) -> Option<Arc<TableDef>> {
    let provider = source_as_provider(&scan.source).ok()?;
    if let Some(row) = provider.downcast_ref::<RowTableProvider>() {
        return Some(row.def());
    }
    provider
        .downcast_ref::<ColumnTableProvider>()
        .map(|c| c.def.clone())
}
