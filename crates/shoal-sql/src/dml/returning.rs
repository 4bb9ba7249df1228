//! RETURNING: the rows a statement wrote, projected through its RETURNING list. Usually each
//! written row is put in a one-row VALUES under the target's name and the list is evaluated
//! over it. When UPDATE ... FROM or DELETE ... USING joins other tables, the list may read
//! them too, so it is evaluated in the query that finds the target rows instead, with every
//! reference to an assigned column replaced by the column's new value (`over_join`).

use std::ops::ControlFlow;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{self, visit_expressions_mut};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use shoal_storage::catalog::{ColumnDef, TableDef};
use shoal_storage::types::{DataType, Value};

use super::modify::Modification;
use super::{ident_name, quote_ident, row_as_values_sql, run_sql_query};
use crate::error::SqlResult;
use crate::session::{columns_of_schema, ResultColumn, Session, StatementResult};

/// The command tag of a DML statement that wrote `count` rows.
pub(super) fn command_done(tag: &'static str, count: usize, oid: Option<u32>) -> StatementResult {
    StatementResult::Command {
        tag: tag.to_string(),
        rows: Some(count),
        oid,
    }
}

/// The command tag, or the RETURNING rows computed over the rows written.
pub(crate) async fn finish_dml(
    session: &Session,
    columns: &[ColumnDef],
    alias: &str,
    tag: &'static str,
    written: Vec<Vec<Value>>,
    returning: Option<&[ast::SelectItem]>,
    oid: Option<u32>,
) -> SqlResult<StatementResult> {
    let Some(items) = returning else {
        return Ok(command_done(tag, written.len(), oid));
    };
    let items_sql: Vec<String> = items.iter().map(|i| i.to_string()).collect();
    let mut batches = Vec::new();
    let mut schema = None;
    // One query per row keeps RETURNING expressions exact (volatile functions, subqueries).
    for row in &written {
        let sql = format!(
            "SELECT {} FROM {}",
            items_sql.join(", "),
            row_as_values_sql(columns, row, alias)
        );
        let mut b = run_sql_query(session, &sql).await?;
        if schema.is_none() {
            schema = b.first().map(|b| b.schema());
        }
        batches.append(&mut b);
    }
    let columns = match schema {
        Some(s) => columns_of_schema(&s),
        None => returning_columns(session, columns, alias, items, &[]).await?,
    };
    Ok(StatementResult::Rows {
        columns,
        batches,
        tag: rows_tag(tag),
    })
}

/// The command tag of a statement that returns rows; the wire layer appends the row count.
/// INSERT's tag carries an object id, always 0, before the count ("INSERT 0 2").
fn rows_tag(tag: &'static str) -> &'static str {
    match tag {
        "INSERT" => "INSERT 0",
        other => other,
    }
}

/// The RETURNING columns, planned over a row of NULLs (and the FROM/USING tables).
pub(super) async fn returning_columns(
    session: &Session,
    def: &[ColumnDef],
    alias: &str,
    items: &[ast::SelectItem],
    from: &[ast::TableWithJoins],
) -> SqlResult<Vec<ResultColumn>> {
    Ok(columns_of_schema(
        &returning_schema(session, def, alias, items, from).await?,
    ))
}

async fn returning_schema(
    session: &Session,
    def: &[ColumnDef],
    alias: &str,
    items: &[ast::SelectItem],
    from: &[ast::TableWithJoins],
) -> SqlResult<SchemaRef> {
    let nulls: Vec<Value> = def.iter().map(|_| Value::Null).collect();
    let items_sql: Vec<String> = items.iter().map(|i| i.to_string()).collect();
    let mut sql = format!(
        "SELECT {} FROM {}",
        items_sql.join(", "),
        row_as_values_sql(def, &nulls, alias)
    );
    for f in from {
        sql.push_str(&format!(", {f}"));
    }
    sql.push_str(" WHERE FALSE");
    let stmt = crate::session::parse_sql(&sql)?
        .pop()
        .expect("one generated statement");
    let plan = crate::query::plan_statement(session.state(), &session.scope, stmt).await?;
    Ok(plan.schema().inner().clone())
}

/// The RETURNING values computed in the target query, as the statement's result rows.
pub(super) async fn finish_joined(
    session: &Session,
    m: &Modification<'_>,
    tag: &'static str,
    items: &[ast::SelectItem],
    returned: Vec<Vec<ScalarValue>>,
) -> SqlResult<StatementResult> {
    // The columns are planned the way Describe plans them, so both protocols report the same
    // types; the values are cast to them.
    let schema = returning_schema(session, &m.def.columns, m.alias, items, m.from).await?;
    let mut batches = Vec::new();
    if !returned.is_empty() {
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for (i, field) in schema.fields().iter().enumerate() {
            let array = ScalarValue::iter_to_array(returned.iter().map(|r| r[i].clone()))?;
            arrays.push(if array.data_type() == field.data_type() {
                array
            } else {
                cast(&array, field.data_type())?
            });
        }
        batches.push(RecordBatch::try_new(schema.clone(), arrays)?);
    }
    Ok(StatementResult::Rows {
        columns: columns_of_schema(&schema),
        batches,
        tag: rows_tag(tag),
    })
}

/// The RETURNING items of an UPDATE ... FROM or DELETE ... USING as expressions over the
/// target query: wildcards expanded (a FROM table's `rel.*` stays, giving its columns), and
/// each reference to a target column that SET assigns replaced by the new value's expression.
/// Result column names come from `returning_schema`.
pub(super) fn over_join(
    def: &TableDef,
    alias: &str,
    items: &[ast::SelectItem],
    assignments: &[(usize, String)],
    from: &[ast::TableWithJoins],
) -> SqlResult<Vec<String>> {
    let target = TargetColumns {
        def,
        alias,
        assignments,
    };
    let mut out = Vec::new();
    for item in items {
        match item {
            ast::SelectItem::Wildcard(_) => {
                out.extend(target.all());
                out.extend(
                    relation_names(from)
                        .iter()
                        .map(|r| format!("{}.*", quote_ident(r))),
                );
            }
            ast::SelectItem::QualifiedWildcard(
                ast::SelectItemQualifiedWildcardKind::ObjectName(name),
                _,
            ) if name.0.len() == 1 && ident_of_part(&name.0[0]) == alias => {
                out.extend(target.all())
            }
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                match target.column_of(e) {
                    Some(col) => out.push(target.new_value(col)),
                    None => out.push(target.substitute(e)?.to_string()),
                }
            }
            other => out.push(other.to_string()),
        }
    }
    Ok(out)
}

/// The target table's columns as a RETURNING list sees them after the write.
struct TargetColumns<'a> {
    def: &'a TableDef,
    alias: &'a str,
    assignments: &'a [(usize, String)],
}

impl TargetColumns<'_> {
    /// The column an expression names, if it is a (possibly qualified) target column.
    fn column_of(&self, e: &ast::Expr) -> Option<usize> {
        match e {
            ast::Expr::Identifier(id) => self.def.column_index(&ident_name(id)),
            ast::Expr::CompoundIdentifier(parts)
                if parts.len() == 2 && ident_name(&parts[0]) == self.alias =>
            {
                self.def.column_index(&ident_name(&parts[1]))
            }
            _ => None,
        }
    }

    /// The SQL of the column's value after the write.
    fn new_value(&self, col: usize) -> String {
        let c = &self.def.columns[col];
        match self.assignments.iter().find(|(a, _)| *a == col) {
            Some((_, e)) => match cast_name(&c.data_type) {
                Some(t) => format!("CAST(({e}) AS {t})"),
                None => format!("({e})"),
            },
            None => format!("{}.{}", quote_ident(self.alias), quote_ident(&c.name)),
        }
    }

    fn all(&self) -> Vec<String> {
        (0..self.def.columns.len())
            .map(|c| self.new_value(c))
            .collect()
    }

    fn substitute(&self, e: &ast::Expr) -> SqlResult<ast::Expr> {
        let mut e = e.clone();
        let mut failed = None;
        let _ = visit_expressions_mut(&mut e, |inner| {
            let Some(col) = self.column_of(inner) else {
                return ControlFlow::<()>::Continue(());
            };
            if !self.assignments.iter().any(|(a, _)| *a == col) {
                return ControlFlow::Continue(());
            }
            let parsed = Parser::new(&PostgreSqlDialect {})
                .try_with_sql(&self.new_value(col))
                .and_then(|mut p| p.parse_expr());
            match parsed {
                Ok(value) => *inner = value,
                Err(err) => failed = Some(err),
            }
            ControlFlow::Continue(())
        });
        match failed {
            Some(err) => Err(err.into()),
            None => Ok(e),
        }
    }
}

/// The SQL name to cast a new value to so RETURNING shows it as stored; None for types whose
/// values are already stored as computed.
fn cast_name(t: &DataType) -> Option<String> {
    match t {
        DataType::Bool
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Numeric { .. }
        | DataType::Date
        | DataType::Timestamp
        | DataType::TimestampTz
        | DataType::Time
        | DataType::Json
        | DataType::Jsonb
        | DataType::Array(_) => Some(crate::types::format_type(t)),
        _ => None,
    }
}

/// The names FROM/USING items are visible under (their aliases, or their table names).
fn relation_names(from: &[ast::TableWithJoins]) -> Vec<String> {
    let factors = from
        .iter()
        .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)));
    factors
        .filter_map(|f| match f {
            ast::TableFactor::Table { alias: Some(a), .. }
            | ast::TableFactor::Derived { alias: Some(a), .. } => Some(ident_name(&a.name)),
            ast::TableFactor::Table { name, .. } => name.0.last().map(ident_of_part),
            _ => None,
        })
        .collect()
}

fn ident_of_part(part: &ast::ObjectNamePart) -> String {
    match part {
        ast::ObjectNamePart::Identifier(id) => ident_name(id),
        other => crate::ddl::ident_of(&other.to_string()),
    }
}
