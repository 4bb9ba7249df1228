//! Data-modifying statements in WITH (`WITH moved AS (DELETE ... RETURNING ...) SELECT ...
//! FROM moved`). DataFusion cannot plan them, so each one runs first, in order, through the
//! ordinary INSERT/UPDATE/DELETE paths inside the statement's transaction, and the main query
//! then reads its RETURNING rows as a VALUES list. For Describe, the same CTE stands for an
//! empty SELECT of its RETURNING list from its target table, which has the right columns.

use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{self, Expr, Ident, Query, SetExpr, Statement};
use shoal_storage::Transaction;

use crate::error::{SqlError, SqlResult};
use crate::params::literal_expr;
use crate::session::{parse_sql, Session, StatementResult};

/// Whether `q` has an INSERT, UPDATE or DELETE in its WITH.
pub fn has_modifying_cte(q: &Query) -> bool {
    q.with.as_ref().is_some_and(|with| {
        with.cte_tables
            .iter()
            .any(|cte| modifying_statement(&cte.query).is_some())
    })
}

fn modifying_statement(q: &Query) -> Option<&Statement> {
    match q.body.as_ref() {
        SetExpr::Insert(s) | SetExpr::Update(s) | SetExpr::Delete(s) => Some(s),
        _ => None,
    }
}

/// Runs the data-modifying CTEs of `q` and puts their RETURNING rows in their place.
pub async fn run_modifying_ctes(
    session: &mut Session,
    txn: &mut Transaction,
    q: &mut Query,
) -> SqlResult<()> {
    let Some(with) = q.with.as_mut() else {
        return Ok(());
    };
    for cte in &mut with.cte_tables {
        let Some(stmt) = modifying_statement(&cte.query).cloned() else {
            continue;
        };
        let result = match stmt {
            Statement::Insert(i) => super::insert(session, txn, i).await?,
            Statement::Update(u) => super::update(session, txn, u).await?,
            Statement::Delete(d) => super::delete(session, txn, d).await?,
            _ => continue,
        };
        let StatementResult::Rows {
            columns, batches, ..
        } = result
        else {
            // Without RETURNING the CTE has no columns; reading it is an error PostgreSQL
            // reports too, so an empty one-column relation is enough.
            *cte.query = empty_query(&["?column?"], &["text"])?;
            continue;
        };
        let names: Vec<&str> = columns.iter().map(|c| &*c.name).collect();
        if cte.alias.columns.is_empty() {
            cte.alias.columns = names
                .iter()
                .map(|n| ast::TableAliasColumnDef {
                    name: Ident::with_quote('"', *n),
                    data_type: None,
                })
                .collect();
        }
        let mut rows: Vec<Vec<Expr>> = Vec::new();
        for batch in &batches {
            for row in 0..batch.num_rows() {
                let values = batch
                    .columns()
                    .iter()
                    .map(|array| ScalarValue::try_from_array(array, row).map(|v| literal_expr(&v)))
                    .collect::<Result<Vec<_>, _>>()?;
                rows.push(values);
            }
        }
        *cte.query = if rows.is_empty() {
            let types: Vec<String> = columns
                .iter()
                .map(|c| {
                    crate::query::pg_catalog::format_type_oid(c.type_oid, c.typmod)
                        .unwrap_or_else(|| "text".to_string())
                })
                .collect();
            let types: Vec<&str> = types.iter().map(String::as_str).collect();
            empty_query(&names, &types)?
        } else {
            values_query(rows)?
        };
    }
    Ok(())
}

/// `q` with each data-modifying CTE replaced by an empty SELECT of its RETURNING list from its
/// target table: the same result columns, for Describe.
pub fn describable(q: &Query) -> SqlResult<Query> {
    let mut q = q.clone();
    let Some(with) = q.with.as_mut() else {
        return Ok(q);
    };
    for cte in &mut with.cte_tables {
        let (table, returning) = match modifying_statement(&cte.query) {
            Some(Statement::Insert(i)) => (i.table.to_string(), i.returning.clone()),
            Some(Statement::Update(u)) => (u.table.relation.to_string(), u.returning.clone()),
            Some(Statement::Delete(d)) => {
                let tables = match &d.from {
                    ast::FromTable::WithFromKeyword(t) | ast::FromTable::WithoutKeyword(t) => t,
                };
                let Some(target) = tables.first() else {
                    continue;
                };
                (target.relation.to_string(), d.returning.clone())
            }
            _ => continue,
        };
        let list = match returning {
            Some(items) => items
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            None => "NULL::text".to_string(),
        };
        *cte.query = parse_query(&format!("SELECT {list} FROM {table} WHERE false"))?;
    }
    Ok(q)
}

fn values_query(rows: Vec<Vec<Expr>>) -> SqlResult<Query> {
    let rows: Vec<String> = rows
        .iter()
        .map(|row| {
            let values: Vec<String> = row.iter().map(ToString::to_string).collect();
            format!("({})", values.join(", "))
        })
        .collect();
    parse_query(&format!("VALUES {}", rows.join(", ")))
}

fn empty_query(names: &[&str], types: &[&str]) -> SqlResult<Query> {
    let list = names
        .iter()
        .zip(types)
        .map(|(n, t)| format!("CAST(NULL AS {t}) AS \"{}\"", n.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(", ");
    parse_query(&format!("SELECT {list} WHERE false"))
}

fn parse_query(sql: &str) -> SqlResult<Query> {
    match parse_sql(sql)?.pop() {
        Some(Statement::Query(q)) => Ok(*q),
        _ => Err(SqlError::internal(format!("not a query: {sql}"))),
    }
}
