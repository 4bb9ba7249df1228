//! Calls in a query's select list that run a body (PL/pgSQL, SQL functions that are not one
//! query) once for each row: `SELECT id, f(x) FROM t`, or a VOLATILE `f()` over a FROM.
//!
//! Such a call cannot be part of the query's plan (its body runs statements of its own, with
//! the session), so the query runs in two steps. First the query itself, with each such call
//! replaced by its arguments (cast to the parameters' types); then, for each row of that
//! result in order, the function is called with the row's arguments, and its value takes their
//! place. This is also when PostgreSQL evaluates a select list's function: once for each row
//! the query returns, after WHERE, grouping, ORDER BY and LIMIT (when the call is not a sort
//! key).
//!
//! Only whole select items are taken this way (`f(x)` or `f(x) AS name`). A query where such a
//! call sits inside an expression, in WHERE, or where ORDER BY, GROUP BY or DISTINCT would
//! need its value is left to the planner, which refuses it with 0A000.
//!
//! UPDATE takes a SET value that is such a call the same way (`RowCall`): its target query
//! gives the call's arguments, and the function is called as each row is updated.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::sql::sqlparser::ast::{self, Expr, FunctionArguments, SelectItem, Statement};
use shoal_storage::catalog_functions::{ArgMode, RoutineReturn, Volatility};
use shoal_storage::types::{DataType, Value};
use shoal_storage::Transaction;

use super::call::{invoke, runs_body};
use super::plpgsql::vars::{self, Datum};
use super::plpgsql::Outcome;
use super::{resolve_call, ResolvedCall};
use crate::error::{SqlError, SqlResult};
use crate::query::rewrite::object_name_parts;
use crate::session::{ResultColumn, Session, StatementResult};
use crate::types::{array_from_values, pg_type_of, value_from_array};

/// Where a per-row call's arguments are among the first step's result columns.
struct PerRowItem {
    call: ResolvedCall,
    /// The result column's name.
    name: String,
    /// The first argument's column; the others follow.
    first_column: usize,
    /// The declared type of each argument (IN and INOUT parameters, in order).
    arg_types: Vec<DataType>,
    /// The function's scalar type (text for void, as PostgreSQL shows a void result).
    returns: DataType,
}

/// One select item of the query, as the first step gives it.
enum Item {
    /// One column.
    Plain,
    /// `*` or `t.*`: as many columns as the first step's result has left over.
    Wildcard,
    Call(PerRowItem),
}

/// Runs `stmt` in two steps when its select list has calls to run per row (see the module
/// comment); None when it has none, or has one this cannot take.
pub async fn run_select_list_calls(
    session: &mut Session,
    txn: &mut Transaction,
    stmt: &Statement,
) -> SqlResult<Option<StatementResult>> {
    let Some((first_step, items)) = split(session, stmt)? else {
        return Ok(None);
    };
    let result = session.run_embedded(txn, first_step).await?;
    let items = place(items, result.columns.len())?;
    let mut columns = Vec::new();
    for item in &items {
        columns.push(match item {
            Placed::Column(c) => result.columns[*c].clone(),
            Placed::Call(call) => ResultColumn::computed(
                Arc::<str>::from(call.name.as_str()),
                pg_type_of(&call.returns).0,
            ),
        });
    }
    let mut batches = Vec::with_capacity(result.batches.len());
    for batch in &result.batches {
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(items.len());
        for item in &items {
            arrays.push(match item {
                Placed::Column(c) => batch.column(*c).clone(),
                Placed::Call(call) => {
                    let mut values = Vec::with_capacity(batch.num_rows());
                    for row in 0..batch.num_rows() {
                        let mut args = Vec::with_capacity(call.arg_types.len());
                        for (k, t) in call.arg_types.iter().enumerate() {
                            let array = batch.column(call.first_column + k);
                            let value = value_from_array(array.as_ref(), row, t)?;
                            args.push(Datum::Scalar(t.clone(), value));
                        }
                        let outcome = invoke(session, txn, &call.call.routine, args, false).await?;
                        values.push(scalar_value(session, txn, call, outcome).await?);
                    }
                    array_from_values(&call.returns, values.iter())
                }
            });
        }
        let fields: Vec<Field> = columns
            .iter()
            .zip(&arrays)
            .map(|(c, a)| Field::new(c.name.to_string(), a.data_type().clone(), true))
            .collect();
        batches.push(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?);
    }
    Ok(Some(StatementResult::Rows {
        columns,
        batches,
        tag: "SELECT",
    }))
}

/// A result column: one of the first step's, or a call's.
enum Placed {
    Column(usize),
    Call(PerRowItem),
}

/// Each item's place among the first step's `width` result columns.
fn place(items: Vec<Item>, width: usize) -> SqlResult<Vec<Placed>> {
    let fixed: usize = items
        .iter()
        .map(|i| match i {
            Item::Plain => 1,
            Item::Wildcard => 0,
            Item::Call(c) => c.arg_types.len(),
        })
        .sum();
    let wildcard_width = width
        .checked_sub(fixed)
        .ok_or_else(|| SqlError::internal("the first step of a per-row call lost columns"))?;
    let mut placed = Vec::new();
    let mut column = 0;
    for item in items {
        match item {
            Item::Plain => {
                placed.push(Placed::Column(column));
                column += 1;
            }
            Item::Wildcard => {
                placed.extend((column..column + wildcard_width).map(Placed::Column));
                column += wildcard_width;
            }
            Item::Call(mut call) => {
                call.first_column = column;
                column += call.arg_types.len();
                placed.push(Placed::Call(call));
            }
        }
    }
    assert_eq!(column, width, "every first-step column placed");
    Ok(placed)
}

/// A call that an UPDATE runs for each row it writes, as the value of one SET column.
pub struct RowCall {
    pub call: ResolvedCall,
    /// The type the call's value is cast to (`f(x)::text`), if it is.
    cast: Option<DataType>,
    /// Its arguments' SQL, each cast to its parameter's type: columns of the target query.
    pub args_sql: Vec<String>,
    arg_types: Vec<DataType>,
}

impl RowCall {
    /// The call `value_sql` (a SET value) is, when it must run for each row: its arguments
    /// read the row, or it is VOLATILE.
    pub fn of(session: &Session, value_sql: &str) -> SqlResult<Option<RowCall>> {
        let Ok(expr) = datafusion::sql::sqlparser::parser::Parser::new(
            &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
        )
        .try_with_sql(value_sql)
        .and_then(|mut p| p.parse_expr()) else {
            return Ok(None);
        };
        let Some((call, cast)) = per_row_call(session, &expr, true)? else {
            return Ok(None);
        };
        if !matches!(
            call.routine.returns,
            RoutineReturn::Scalar(_) | RoutineReturn::Void
        ) {
            return Ok(None);
        }
        let arg_types = in_types(&call);
        if arg_types.len() != call.args.len() {
            return Ok(None);
        }
        let args_sql = call
            .args
            .iter()
            .map(|a| super::argument::unchecked(a.clone()).to_string())
            .collect();
        Ok(Some(RowCall {
            call,
            cast,
            args_sql,
            arg_types,
        }))
    }

    /// Calls the function with the arguments in row `row` of `columns` (one per argument);
    /// its value as a value of `target` (the SET column's type).
    pub async fn run(
        &self,
        session: &mut Session,
        txn: &mut Transaction,
        columns: &[ArrayRef],
        row: usize,
        target: &DataType,
    ) -> SqlResult<Value> {
        let mut args = Vec::with_capacity(self.arg_types.len());
        for (array, t) in columns.iter().zip(&self.arg_types) {
            args.push(Datum::Scalar(
                t.clone(),
                value_from_array(array.as_ref(), row, t)?,
            ));
        }
        let outcome = invoke(session, txn, &self.call.routine, args, false).await?;
        let name = &self.call.routine.name;
        let value = match &self.cast {
            Some(t) => Outcome::Value(Datum::Scalar(
                t.clone(),
                cast_value(session, txn, name, outcome, &self.call, t).await?,
            )),
            None => outcome,
        };
        value_as(session, txn, name, value, target).await
    }
}

/// The IN and INOUT parameters' types, in order.
fn in_types(call: &ResolvedCall) -> Vec<DataType> {
    call.routine
        .args
        .iter()
        .filter(|a| a.mode != ArgMode::Out)
        .map(|a| a.data_type.clone())
        .collect()
}

/// A call's value as a value of the item's type (the function's, or the cast's).
async fn scalar_value(
    session: &mut Session,
    txn: &mut Transaction,
    item: &PerRowItem,
    outcome: Outcome,
) -> SqlResult<Value> {
    cast_value(
        session,
        txn,
        &item.call.routine.name,
        outcome,
        &item.call,
        &item.returns,
    )
    .await
}

/// A call's value as a value of its function's type, then cast to `t`.
async fn cast_value(
    session: &mut Session,
    txn: &mut Transaction,
    name: &str,
    outcome: Outcome,
    call: &ResolvedCall,
    t: &DataType,
) -> SqlResult<Value> {
    let declared = match &call.routine.returns {
        RoutineReturn::Scalar(d) => d.clone(),
        _ => DataType::Text,
    };
    let value = value_as(session, txn, name, outcome, &declared).await?;
    if declared == *t {
        return Ok(value);
    }
    let outcome = Outcome::Value(Datum::Scalar(declared, value));
    value_as(session, txn, name, outcome, t).await
}

/// A call's value as a value of type `target`, cast as an assignment casts it.
async fn value_as(
    session: &mut Session,
    txn: &mut Transaction,
    name: &str,
    outcome: Outcome,
    target: &DataType,
) -> SqlResult<Value> {
    match outcome {
        Outcome::None | Outcome::Value(Datum::Unassigned) => Ok(Value::Null),
        Outcome::Value(Datum::Scalar(from, v)) if from == *target || v.is_null() => Ok(v),
        // A SQL function's last query may give another type than the declared one: the
        // value is cast, as the declared type's assignment would.
        Outcome::Value(Datum::Scalar(from, v)) => {
            let zone = session.settings.time_zone().clone();
            let cast = super::cast(vars::literal(&from, &v, &zone)?, super::sql_type(target)?);
            let stmt = crate::parse::parse_statements(&format!("SELECT {cast}"))
                .map_err(|e| SqlError::internal(format!("a cast does not parse: {e}")))?
                .pop()
                .ok_or_else(|| SqlError::internal("a cast gave no statement"))?;
            let result = session.run_embedded(txn, stmt).await?;
            vars::rows_of(&result.batches)?
                .pop()
                .and_then(|mut r| r.pop())
                .map(|f| f.value)
                .ok_or_else(|| SqlError::internal("a cast gave no row"))
        }
        _ => Err(SqlError::unsupported(format!(
            "calling function {name}() that returns a row or a set in a select list (call it in FROM)"
        ))),
    }
}

/// The first step's statement and what each select item becomes; None when the query has no
/// per-row call this can take.
fn split(session: &Session, stmt: &Statement) -> SqlResult<Option<(Statement, Vec<Item>)>> {
    let Statement::Query(query) = stmt else {
        return Ok(None);
    };
    let ast::SetExpr::Select(select) = query.body.as_ref() else {
        return Ok(None);
    };
    let has_from = !select.from.is_empty();
    let mut calls = Vec::new();
    for (i, item) in select.projection.iter().enumerate() {
        let (expr, alias) = match item {
            SelectItem::UnnamedExpr(e) => (e, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias)),
            _ => continue,
        };
        if let Some(call) = per_row_call(session, expr, has_from)? {
            let name = match alias {
                Some(a) => super::plpgsql::embed::ident_name(a),
                None => call.0.routine.name.clone(),
            };
            calls.push((i, call, name));
        }
    }
    if calls.is_empty() {
        return Ok(None);
    }
    // ORDER BY, GROUP BY or DISTINCT ON by position would count the first step's columns;
    // DISTINCT and a sort by the call's name need the call's value.
    let names: Vec<&str> = calls.iter().map(|(_, _, n)| n.as_str()).collect();
    if select.distinct.is_some()
        || sorted_by_name(query.order_by.as_ref(), &names)
        || grouped_by_position(&select.group_by)
    {
        return Ok(None);
    }
    let mut projection = Vec::new();
    let mut items = Vec::new();
    let mut calls = calls.into_iter().peekable();
    for (i, item) in select.projection.iter().enumerate() {
        let Some((_, (call, cast), name)) = calls.next_if(|(at, _, _)| *at == i) else {
            projection.push(item.clone());
            items.push(match item {
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => Item::Wildcard,
                _ => Item::Plain,
            });
            continue;
        };
        let returns = match (&call.routine.returns, cast) {
            (RoutineReturn::Scalar(_) | RoutineReturn::Void, Some(cast)) => cast,
            (RoutineReturn::Scalar(t), None) => t.clone(),
            (RoutineReturn::Void, None) => DataType::Text,
            _ => return Ok(None),
        };
        let arg_types = in_types(&call);
        if arg_types.len() != call.args.len() {
            return Ok(None);
        }
        for (k, arg) in call.args.iter().enumerate() {
            projection.push(SelectItem::ExprWithAlias {
                expr: super::argument::unchecked(arg.clone()),
                alias: ast::Ident::with_quote('"', format!("$shoal_arg_{i}_{k}")),
            });
        }
        items.push(Item::Call(PerRowItem {
            call,
            name,
            first_column: 0,
            arg_types,
            returns,
        }));
    }
    // Which columns two wildcards give each is known only once planned.
    if items.iter().filter(|i| matches!(i, Item::Wildcard)).count() > 1 {
        return Ok(None);
    }
    let mut first = query.as_ref().clone();
    if let Some(order_by) = &mut first.order_by {
        if !renumber_positions(order_by, &items) {
            return Ok(None);
        }
    }
    let ast::SetExpr::Select(first_select) = first.body.as_mut() else {
        unreachable!("checked above")
    };
    first_select.projection = projection;
    Ok(Some((Statement::Query(Box::new(first)), items)))
}

/// The call in a select item (or SET value), when it runs a body and must run for each row:
/// its arguments read the row, or it is VOLATILE and the query has a FROM. A cast of the call
/// (`f(x)::text`) is taken too; its type comes with the call.
type PerRowCall = (ResolvedCall, Option<DataType>);

fn per_row_call(session: &Session, expr: &Expr, has_from: bool) -> SqlResult<Option<PerRowCall>> {
    let mut e = expr;
    let mut cast = None;
    loop {
        match e {
            Expr::Nested(inner) => e = inner,
            Expr::Cast {
                expr, data_type, ..
            } if cast.is_none() => {
                let Ok(t) = crate::types::from_sql_type(data_type) else {
                    return Ok(None);
                };
                cast = Some(t);
                e = expr;
            }
            _ => break,
        }
    }
    let Expr::Function(f) = e else {
        return Ok(None);
    };
    if f.over.is_some() || f.filter.is_some() {
        return Ok(None);
    }
    let args = match &f.args {
        FunctionArguments::List(list) => list.args.clone(),
        FunctionArguments::None => vec![],
        FunctionArguments::Subquery(_) => return Ok(None),
    };
    let catalog = session.engine.catalog.read();
    let call = resolve_call(
        &catalog,
        &session.scope.lookup_schemas(),
        &object_name_parts(&f.name),
        &args,
    )?;
    drop(catalog);
    Ok(call
        .filter(|c| {
            runs_body(&c.routine)
                && (c.args.iter().any(reads_rows)
                    || (has_from && c.routine.volatility == Volatility::Volatile))
        })
        .map(|c| (c, cast)))
}

/// Whether an argument reads the query's rows: a column, or an aggregate over them.
pub(super) fn reads_rows(e: &Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(e, |x| {
        match x {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => found = true,
            Expr::Function(f) if f.over.is_some() => found = true,
            Expr::Function(f) => {
                let name = object_name_parts(&f.name);
                if name
                    .last()
                    .is_some_and(|n| super::inline::AGGREGATES.contains(&n.as_str()))
                {
                    found = true;
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

/// Whether ORDER BY names a call's result column (whose value the first step does not have).
fn sorted_by_name(order_by: Option<&ast::OrderBy>, names: &[&str]) -> bool {
    let Some(order_by) = order_by else {
        return false;
    };
    let ast::OrderByKind::Expressions(exprs) = &order_by.kind else {
        return true;
    };
    exprs.iter().any(|o| match &o.expr {
        Expr::Identifier(i) => names.contains(&super::plpgsql::embed::ident_name(i).as_str()),
        _ => false,
    })
}

/// ORDER BY positions made positions among the first step's columns; false when one names a
/// call or an item after a wildcard (whose position is known only once planned).
fn renumber_positions(order_by: &mut ast::OrderBy, items: &[Item]) -> bool {
    let ast::OrderByKind::Expressions(exprs) = &mut order_by.kind else {
        return false;
    };
    for o in exprs {
        let Expr::Value(v) = &mut o.expr else {
            continue;
        };
        let ast::Value::Number(n, _) = &mut v.value else {
            continue;
        };
        let Some(at) = n.parse::<usize>().ok().and_then(|p| p.checked_sub(1)) else {
            return false;
        };
        let mut column = 0;
        for (i, item) in items.iter().enumerate() {
            match item {
                Item::Plain if i == at => {
                    *n = (column + 1).to_string();
                    break;
                }
                Item::Plain => column += 1,
                Item::Call(c) if i != at => column += c.arg_types.len(),
                Item::Call(_) | Item::Wildcard => return false,
            }
        }
    }
    true
}

fn grouped_by_position(group_by: &ast::GroupByExpr) -> bool {
    match group_by {
        ast::GroupByExpr::All(_) => true,
        ast::GroupByExpr::Expressions(exprs, _) => exprs
            .iter()
            .any(|e| matches!(e, Expr::Value(v) if matches!(v.value, ast::Value::Number(..)))),
    }
}
