//! PL/pgSQL cursors: bound cursor declarations (`c CURSOR (k int) FOR query`), `refcursor`
//! variables, OPEN (a bound cursor with arguments, `FOR query`, `FOR EXECUTE`), FETCH and
//! MOVE in any direction, CLOSE, and `FOR record IN cursor LOOP`.
//!
//! A cursor variable holds a portal's name, as in PostgreSQL; the portal itself is one of the
//! session's SQL cursors (`session/cursor.rs`), so a function may OPEN a cursor and return its
//! name for the caller to FETCH from, and the transaction's end closes it. A bound cursor's
//! variable starts as its own name; an unbound one is NULL until OPEN names its portal
//! `<unnamed portal N>`.

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{self, Statement};
use shoal_plpgsql::{Into as IntoClause, OpenSource, Stmt};
use shoal_storage::types::{DataType, Value};

use super::{pass, Exec, Flow, Pass};
use crate::error::{code, SqlError, SqlResult};
use crate::routines::plpgsql::vars::{self, BoundCursor, Datum, Scope, Var, VarRef, VarType};
use crate::session::{fetches_one_row, StatementResult};

impl Exec<'_> {
    /// `name [[NO] SCROLL] CURSOR [(arguments)] FOR query`.
    pub(super) fn declare_bound_cursor(
        &mut self,
        name: &str,
        scroll: Option<bool>,
        arguments: &[(String, String)],
        query: &str,
    ) -> SqlResult<()> {
        let arguments = arguments
            .iter()
            .map(|(n, t)| Ok((n.clone(), self.resolve_type(t)?)))
            .collect::<SqlResult<Vec<_>>>()?;
        self.scopes.declare(Var {
            name: name.to_string(),
            var_type: VarType::Scalar(DataType::Text),
            value: Datum::text(name),
            constant: false,
            not_null: false,
            cursor: Some(Arc::new(BoundCursor {
                arguments,
                query: query.to_string(),
                scrollable: scroll != Some(false),
            })),
        });
        Ok(())
    }

    /// The variable of a cursor statement.
    fn cursor_var(&self, cursor: &str) -> SqlResult<VarRef> {
        let r = self
            .scopes
            .find(cursor)
            .ok_or_else(|| SqlError::syntax(format!("\"{cursor}\" is not a known variable")))?;
        match &self.scopes.get(r).var_type {
            VarType::Scalar(DataType::Text) => Ok(r),
            _ => Err(SqlError::new(
                code::DATATYPE_MISMATCH,
                format!("variable \"{cursor}\" must be of type cursor or refcursor"),
            )),
        }
    }

    /// The portal a cursor variable names.
    fn portal_of(&self, cursor: &str) -> SqlResult<String> {
        let r = self.cursor_var(cursor)?;
        match &self.scopes.get(r).value {
            Datum::Scalar(_, Value::Text(name)) => Ok(name.clone()),
            _ => Err(SqlError::new(
                code::NULL_VALUE_NOT_ALLOWED,
                format!("cursor variable \"{cursor}\" is null"),
            )),
        }
    }

    pub(super) async fn open(
        &mut self,
        cursor: &str,
        scroll: Option<bool>,
        source: &OpenSource,
    ) -> SqlResult<()> {
        let r = self.cursor_var(cursor)?;
        let var = self.scopes.get(r);
        let bound = var.cursor.clone();
        let portal = match &var.value {
            Datum::Scalar(_, Value::Text(name)) => Some(name.clone()),
            _ => None,
        };
        if let Some(name) = &portal {
            if self.session.cursor_is_open(name) {
                return Err(SqlError::new(
                    DUPLICATE_CURSOR,
                    format!("cursor \"{name}\" already in use"),
                ));
            }
        }
        let (result, text, scrollable) = match (source, &bound) {
            (OpenSource::Bound(arguments), Some(bound)) => {
                let result = self.run_bound(cursor, bound, arguments).await?;
                (result, bound.query.clone(), bound.scrollable)
            }
            (OpenSource::Bound(_), None) => {
                return Err(SqlError::syntax(format!(
                    "cursor \"{cursor}\" is not bound to a query: OPEN it FOR a query"
                )))
            }
            (_, Some(_)) => {
                return Err(SqlError::syntax(format!(
                    "cursor \"{cursor}\" is bound to a query and cannot be opened FOR another"
                )))
            }
            (OpenSource::Query(query), None) => {
                let stmt = self.parsed_statement(query)?;
                refuse_non_query(&stmt)?;
                let result = self.run_statement(stmt).await?;
                (result, query.clone(), scroll != Some(false))
            }
            (OpenSource::Execute { command, using }, None) => {
                let stmt = self.dynamic_statement(command, using).await?;
                refuse_non_query(&stmt)?;
                let text = stmt.to_string();
                let result = self.session.run_embedded(self.txn, stmt).await?;
                (result, text, scroll != Some(false))
            }
        };
        let name = match portal {
            Some(name) => name,
            None => self.session.unnamed_portal_name(),
        };
        self.session.open_routine_cursor(
            name.clone(),
            result.columns,
            &result.batches,
            scrollable,
            text,
        )?;
        self.scopes.get_mut(r).value = Datum::text(name);
        Ok(())
    }

    /// Runs a bound cursor's query with its arguments as variables of a scope around it.
    async fn run_bound(
        &mut self,
        cursor: &str,
        bound: &BoundCursor,
        given: &[String],
    ) -> SqlResult<crate::session::EmbeddedResult> {
        let values = self.cursor_arguments(cursor, bound, given).await?;
        self.scopes.stack.push(Scope::default());
        for ((name, var_type), value) in bound.arguments.iter().zip(values) {
            self.declare(name, var_type.clone(), value);
        }
        let result = match self.parsed_statement(&bound.query) {
            Ok(stmt) => self.run_statement(stmt).await,
            Err(e) => Err(e),
        };
        self.scopes.stack.pop();
        result
    }

    /// The values of a bound cursor's arguments, given by position or as `name := expr`,
    /// checked as PostgreSQL checks them.
    async fn cursor_arguments(
        &mut self,
        cursor: &str,
        bound: &BoundCursor,
        given: &[String],
    ) -> SqlResult<Vec<Datum>> {
        let declared = &bound.arguments;
        if declared.is_empty() && !given.is_empty() {
            return Err(SqlError::syntax(format!(
                "cursor \"{cursor}\" has no arguments"
            )));
        }
        if !declared.is_empty() && given.is_empty() {
            return Err(SqlError::syntax(format!(
                "cursor \"{cursor}\" has arguments"
            )));
        }
        let mut exprs: Vec<Option<&str>> = vec![None; declared.len()];
        for (position, argument) in given.iter().enumerate() {
            let (slot, expr) = match named_argument(argument) {
                Some((name, expr)) => {
                    let slot = declared
                        .iter()
                        .position(|(n, _)| *n == name)
                        .ok_or_else(|| {
                            SqlError::syntax(format!(
                                "cursor \"{cursor}\" has no argument named \"{name}\""
                            ))
                        })?;
                    (slot, expr)
                }
                None if position < declared.len() => (position, argument.as_str()),
                None => {
                    return Err(SqlError::syntax(format!(
                        "too many arguments for cursor \"{cursor}\""
                    )))
                }
            };
            if exprs[slot].is_some() {
                return Err(SqlError::syntax(format!(
                    "value for parameter \"{}\" of cursor \"{cursor}\" specified more than once",
                    declared[slot].0
                )));
            }
            exprs[slot] = Some(expr);
        }
        let mut values = Vec::with_capacity(declared.len());
        for (expr, (_, var_type)) in exprs.into_iter().zip(declared) {
            let Some(expr) = expr else {
                return Err(SqlError::syntax(format!(
                    "not enough arguments for cursor \"{cursor}\""
                )));
            };
            values.push(self.eval_typed(expr, var_type).await?);
        }
        Ok(values)
    }

    /// FETCH (with `into`) or MOVE (without).
    pub(super) async fn fetch(
        &mut self,
        direction: Option<&str>,
        cursor: &str,
        into: Option<&IntoClause>,
    ) -> SqlResult<()> {
        let portal = self.portal_of(cursor)?;
        let direction = self.fetch_direction(direction).await?;
        if into.is_some() && !fetches_one_row(&direction)? {
            return Err(SqlError::syntax(
                "FETCH statement cannot return multiple rows",
            ));
        }
        let result = self.session.fetch(&portal, &direction, into.is_none())?;
        match (result, into) {
            (StatementResult::Rows { batches, .. }, Some(into)) => {
                let rows = vars::rows_of(&batches)?;
                self.row_count = rows.len() as u64;
                self.into_targets(into, rows).await
            }
            (StatementResult::Command { rows, .. }, None) => {
                let moved = rows.unwrap_or(0);
                self.row_count = moved as u64;
                self.set_found(moved > 0);
                Ok(())
            }
            _ => Err(SqlError::internal("FETCH gave an unexpected result")),
        }
    }

    /// A FETCH direction as SQL's parser reads it, with a count that is an expression (PL/pgSQL
    /// allows `RELATIVE n` for a variable `n`) computed first.
    async fn fetch_direction(&mut self, written: Option<&str>) -> SqlResult<ast::FetchDirection> {
        let written = written.unwrap_or("NEXT").trim();
        let (keyword, count) = match written.split_once(char::is_whitespace) {
            Some((k, rest)) => (k, Some(rest.trim())),
            None => (written, None),
        };
        let keyword_lower = keyword.to_ascii_lowercase();
        let counted = matches!(
            keyword_lower.as_str(),
            "absolute" | "relative" | "forward" | "backward"
        );
        let text = match (counted, count) {
            (true, Some(count)) if !count.eq_ignore_ascii_case("all") => {
                format!("{keyword} {}", self.fetch_count(count).await?)
            }
            (true, _) => written.to_string(),
            (false, None)
                if matches!(
                    keyword_lower.as_str(),
                    "next" | "prior" | "first" | "last" | "all"
                ) =>
            {
                written.to_string()
            }
            // A bare count: FORWARD that many.
            (false, _) => format!("FORWARD {}", self.fetch_count(written).await?),
        };
        let statement = crate::session::parse_sql(&format!("FETCH {text} FROM shoal_cursor"))?;
        match statement.as_slice() {
            [Statement::Fetch { direction, .. }] => Ok(direction.clone()),
            _ => Err(SqlError::syntax(format!(
                "syntax error at or near \"{written}\""
            ))),
        }
    }

    async fn fetch_count(&mut self, expr: &str) -> SqlResult<i64> {
        match self
            .eval_typed(expr, &VarType::Scalar(DataType::Int64))
            .await?
        {
            Datum::Scalar(_, Value::Int64(n)) => Ok(n),
            _ => Err(SqlError::new(
                code::NULL_VALUE_NOT_ALLOWED,
                "FETCH count cannot be null",
            )),
        }
    }

    pub(super) fn close(&mut self, cursor: &str) -> SqlResult<()> {
        let portal = self.portal_of(cursor)?;
        self.session.close_cursor(&portal)
    }

    /// `FOR target IN cursor [(arguments)] LOOP body END LOOP`.
    pub(super) async fn for_cursor(
        &mut self,
        label: &Option<String>,
        target: &str,
        cursor: &str,
        arguments: &[String],
        body: &[Stmt],
    ) -> SqlResult<Flow> {
        let r = self.cursor_var(cursor)?;
        if self.scopes.get(r).cursor.is_none() {
            return Err(SqlError::syntax(
                "cursor FOR loop must use a bound cursor variable",
            ));
        }
        self.open(cursor, None, &OpenSource::Bound(arguments.to_vec()))
            .await?;
        let portal = self.portal_of(cursor)?;
        self.scopes.stack.push(Scope::default());
        self.declare(target, VarType::Record, Datum::Unassigned);
        let record = VarRef {
            scope: self.scopes.stack.len() - 1,
            index: 0,
        };
        let mut iterated = false;
        let result = loop {
            let row = match self
                .session
                .fetch(&portal, &ast::FetchDirection::Next, false)
            {
                Ok(StatementResult::Rows { batches, .. }) => match vars::rows_of(&batches) {
                    Ok(mut rows) => rows.pop(),
                    Err(e) => break Err(e),
                },
                Ok(_) => break Err(SqlError::internal("FETCH gave no rows")),
                Err(e) => break Err(e),
            };
            let Some(row) = row else {
                break Ok(Flow::Next);
            };
            iterated = true;
            self.scopes.get_mut(record).value = Datum::Row(row);
            self.tick().await;
            match self.loop_body(body).await {
                Ok(flow) => {
                    if let Pass::Leave(flow) = pass(flow, label) {
                        break Ok(flow);
                    }
                }
                Err(e) => break Err(e),
            }
        };
        self.scopes.stack.pop();
        // The loop closes its cursor however it ends (the body may have closed it already).
        let _ = self.session.close_cursor(&portal);
        self.set_found(iterated);
        result
    }
}

/// SQLSTATE 42P03.
const DUPLICATE_CURSOR: &str = "42P03";

/// OPEN takes queries only, as PostgreSQL's does.
fn refuse_non_query(stmt: &Statement) -> SqlResult<()> {
    match stmt {
        Statement::Query(_) => Ok(()),
        other => {
            let kind = other
                .to_string()
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_ascii_uppercase();
            Err(SqlError::new(
                "42P11",
                format!("cannot open {kind} query as cursor"),
            ))
        }
    }
}

/// `name := expr` or `name => expr`: (name, expr); None for a positional argument.
fn named_argument(argument: &str) -> Option<(String, &str)> {
    let (name, expr) = argument
        .split_once(":=")
        .or_else(|| argument.split_once("=>"))?;
    let name = name.trim();
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '"');
    plain.then(|| (name.trim_matches('"').to_ascii_lowercase(), expr.trim()))
}
