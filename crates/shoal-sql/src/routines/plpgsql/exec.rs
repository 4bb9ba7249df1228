//! Running a PL/pgSQL body: statements, control flow, exception blocks (see the module
//! comment of `plpgsql`).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{self, Expr, Statement};
use shoal_plpgsql::{Block, Condition, Declaration, Into as IntoClause, Raise, Stmt};
use shoal_storage::types::{DataType, Value};
use shoal_storage::Transaction;

use super::conditions;
use super::embed::{self, ident_name};
use super::fast_eval;
use super::kept::KeptStatement;
use super::vars::{self, Datum, Field, Scope, Scopes, Var, VarRef, VarType};
use super::{Invocation, Returns};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{EmbeddedResult, Session};
use crate::timezone::TimeZone;

mod cursor;

/// What a body gave back.
#[derive(Debug)]
pub enum Outcome {
    /// A procedure, DO block or void function.
    None,
    /// A scalar function's value, a row of OUT parameters, or a trigger's row (NULL: skip).
    Value(Datum),
    /// A set-returning function's rows.
    Rows(Vec<Vec<Field>>),
}

/// How a statement left: on to the next, or out of loops and blocks.
#[derive(Debug, PartialEq)]
enum Flow {
    Next,
    Exit(Option<String>),
    Continue(Option<String>),
    Return,
}

/// What a loop does after one pass of its body.
enum Pass {
    Again,
    Leave(Flow),
}

/// Loops yield to the runtime this often, so that statement_timeout and a cancel reach a loop
/// that runs no SQL, and the connection's thread serves its other clients.
const STEPS_PER_YIELD: u64 = 1024;

type Boxed<'a, T> = Pin<Box<dyn Future<Output = SqlResult<T>> + Send + 'a>>;

pub(super) struct Exec<'s> {
    session: &'s mut Session,
    txn: &'s mut Transaction,
    scopes: Scopes,
    name: String,
    returns: Returns,
    /// The OUT parameters' variables, in order.
    outputs: Vec<VarRef>,
    returned: Option<Datum>,
    rows: Vec<Vec<Field>>,
    /// GET DIAGNOSTICS ROW_COUNT: rows of the last SQL statement.
    row_count: u64,
    /// The errors being handled, innermost last (GET STACKED DIAGNOSTICS, bare RAISE).
    handling: Vec<SqlError>,
    /// Embedded statements parsed, by their text.
    parsed: HashMap<String, Statement>,
    /// Expressions simple enough for `fast_eval`, parsed, by their text (None: not simple).
    simple: HashMap<String, Option<Arc<Expr>>>,
    steps: u64,
    savepoints: u64,
    transaction_control: bool,
    zone: TimeZone,
}

impl<'s> Exec<'s> {
    pub fn new(
        session: &'s mut Session,
        txn: &'s mut Transaction,
        invocation: &Invocation<'_>,
    ) -> Self {
        let zone = session.settings.time_zone().clone();
        Exec {
            session,
            txn,
            scopes: Scopes::default(),
            name: invocation.name.to_string(),
            returns: invocation.returns.clone(),
            outputs: Vec::new(),
            returned: None,
            rows: Vec::new(),
            row_count: 0,
            handling: Vec::new(),
            parsed: HashMap::new(),
            simple: HashMap::new(),
            steps: 0,
            savepoints: 0,
            transaction_control: invocation.transaction_control,
            zone,
        }
    }

    pub async fn run(self, invocation: &Invocation<'_>) -> SqlResult<Outcome> {
        let context = format!("PL/pgSQL function {}", invocation.context);
        self.run_body(invocation).await.map_err(|e| {
            // The innermost routine names itself; outer ones add their lines after it.
            let context = match &e.context {
                Some(inner) => format!("{inner}\n{context}"),
                None => context,
            };
            SqlError {
                context: Some(context),
                ..e
            }
        })
    }

    async fn run_body(mut self, invocation: &Invocation<'_>) -> SqlResult<Outcome> {
        // The parameters live in a scope around the body, labelled with the routine's name
        // (`fname.param`), with FOUND.
        self.scopes.stack.push(Scope {
            label: Some(invocation.name.to_string()),
            ..Default::default()
        });
        for (i, p) in invocation.params.iter().enumerate() {
            self.scopes.declare(Var {
                name: p.name.clone().unwrap_or_else(|| format!("${}", i + 1)),
                var_type: p.var_type.clone(),
                value: p.value.clone(),
                constant: false,
                not_null: false,
                cursor: None,
            });
            let r = VarRef {
                scope: 0,
                index: self.scopes.stack[0].vars.len() - 1,
            };
            self.scopes.positional.push(r);
            if p.output {
                self.outputs.push(r);
            }
        }
        self.declare("found", VarType::Scalar(DataType::Bool), Datum::bool(false));
        for (name, t, value) in &invocation.specials {
            self.declare(name, t.clone(), value.clone());
        }
        let flow = self.block(invocation.body).await?;
        if let Flow::Exit(Some(label)) | Flow::Continue(Some(label)) = flow {
            return Err(SqlError::syntax(format!(
                "there is no label \"{label}\" attached to any block or loop enclosing this statement"
            )));
        }
        match &self.returns {
            Returns::Void => Ok(Outcome::None),
            Returns::Rows(_) => Ok(Outcome::Rows(std::mem::take(&mut self.rows))),
            Returns::OutRow(_) if self.returned.is_none() => Ok(Outcome::Value(self.out_row())),
            Returns::Scalar(_) | Returns::OutRow(_) | Returns::Trigger => {
                match self.returned.take() {
                    Some(v) => Ok(Outcome::Value(v)),
                    None => Err(SqlError::new(
                        "2F005",
                        "control reached end of function without RETURN",
                    )),
                }
            }
        }
    }

    fn declare(&mut self, name: &str, var_type: VarType, value: Datum) {
        self.scopes.declare(Var {
            name: name.to_string(),
            var_type,
            value,
            constant: false,
            not_null: false,
            cursor: None,
        });
    }

    fn out_row(&self) -> Datum {
        Datum::Row(
            self.outputs
                .iter()
                .map(|r| {
                    let v = self.scopes.get(*r);
                    let (data_type, value) = match &v.value {
                        Datum::Scalar(t, v) => (t.clone(), v.clone()),
                        _ => (DataType::Text, Value::Null),
                    };
                    Field {
                        name: v.name.clone(),
                        data_type,
                        value,
                    }
                })
                .collect(),
        )
    }

    /// Counts a step of a loop, and now and then lets the runtime run others (and deliver a
    /// cancel or timeout).
    async fn tick(&mut self) {
        self.steps += 1;
        if self.steps % STEPS_PER_YIELD == 0 {
            tokio::task::yield_now().await;
        }
    }

    // ----- blocks and statements -----

    fn block<'a>(&'a mut self, block: &'a Block) -> Boxed<'a, Flow> {
        Box::pin(async move {
            self.scopes.stack.push(Scope {
                label: block.label.clone(),
                ..Default::default()
            });
            let result = self.block_in_scope(block).await;
            self.scopes.stack.pop();
            let flow = result?;
            Ok(match flow {
                Flow::Exit(Some(l)) if block.label.as_deref() == Some(l.as_str()) => Flow::Next,
                other => other,
            })
        })
    }

    async fn block_in_scope(&mut self, block: &Block) -> SqlResult<Flow> {
        for d in &block.declarations {
            self.declaration(d).await?;
        }
        if block.handlers.is_empty() {
            return self.statements(&block.body).await;
        }
        self.savepoints += 1;
        let savepoint = format!("plpgsql exception block {}", self.savepoints);
        self.session.routine_savepoint(self.txn, &savepoint);
        let vars_at_start = self.scopes.stack.last().map(|s| s.vars.len());
        match self.statements(&block.body).await {
            Ok(flow) => {
                self.session.routine_release(self.txn, &savepoint)?;
                Ok(flow)
            }
            Err(e) => {
                let Some(handler) = block
                    .handlers
                    .iter()
                    .find(|h| h.conditions.iter().any(|c| conditions::catches(c, e.code)))
                else {
                    self.session.routine_rollback_to(self.txn, &savepoint)?;
                    self.session.routine_release(self.txn, &savepoint)?;
                    return Err(e);
                };
                self.session.routine_rollback_to(self.txn, &savepoint)?;
                self.session.routine_release(self.txn, &savepoint)?;
                debug_assert_eq!(
                    vars_at_start,
                    self.scopes.stack.last().map(|s| s.vars.len())
                );
                self.scopes.stack.push(Scope::default());
                self.declare(
                    "sqlstate",
                    VarType::Scalar(DataType::Text),
                    Datum::text(e.code),
                );
                self.declare(
                    "sqlerrm",
                    VarType::Scalar(DataType::Text),
                    Datum::text(e.message.clone()),
                );
                self.handling.push(e);
                let result = self.statements(&handler.body).await;
                self.handling.pop();
                self.scopes.stack.pop();
                result
            }
        }
    }

    async fn declaration(&mut self, d: &Declaration) -> SqlResult<()> {
        match d {
            Declaration::Variable {
                name,
                constant,
                data_type,
                not_null,
                default,
            } => {
                let var_type = self.resolve_type(data_type)?;
                let value = match default {
                    Some(expr) => self.eval_typed(expr, &var_type).await?,
                    None if *not_null => {
                        return Err(SqlError::syntax(format!(
                            "variable \"{name}\" must have a default value, since it's declared NOT NULL"
                        )))
                    }
                    None => var_type.initial(),
                };
                if *not_null && value.is_null() {
                    return Err(null_into_not_null(name));
                }
                self.scopes.declare(Var {
                    name: name.clone(),
                    var_type,
                    value,
                    constant: *constant,
                    not_null: *not_null,
                    cursor: None,
                });
                Ok(())
            }
            Declaration::Alias { name, target } => {
                let target_ref = match target.strip_prefix('$') {
                    Some(n) => n
                        .parse::<usize>()
                        .ok()
                        .and_then(|n| self.scopes.positional.get(n.wrapping_sub(1)).copied()),
                    None => self.scopes.find(target),
                };
                let Some(r) = target_ref else {
                    return Err(SqlError::syntax(format!(
                        "variable \"{target}\" does not exist"
                    )));
                };
                let scope = self.scopes.stack.last_mut().expect("a block is open");
                scope.aliases.push((name.clone(), r));
                Ok(())
            }
            Declaration::Cursor {
                name,
                scroll,
                arguments,
                query,
            } => self.declare_bound_cursor(name, *scroll, arguments, query),
        }
    }

    fn statements<'a>(&'a mut self, list: &'a [Stmt]) -> Boxed<'a, Flow> {
        Box::pin(async move {
            for s in list {
                let flow = match self.statement_now(s) {
                    Some(done) => done?,
                    None => self.statement(s).await?,
                };
                if flow != Flow::Next {
                    return Ok(flow);
                }
            }
            Ok(Flow::Next)
        })
    }

    /// A loop's body: the statements done in place (`statement_now`) without building the
    /// future of a statement list, the rest as `statements` does.
    async fn loop_body(&mut self, list: &[Stmt]) -> SqlResult<Flow> {
        for (i, s) in list.iter().enumerate() {
            match self.statement_now(s) {
                Some(done) => done?,
                None => return self.statements(&list[i..]).await,
            };
        }
        Ok(Flow::Next)
    }

    /// A statement done at once, when it needs nothing asynchronous: an assignment of a
    /// simple expression (`fast_eval`) to a scalar variable, or NULL. None: run it as
    /// `statement` does (which also reports any error this one would have met).
    fn statement_now(&mut self, s: &Stmt) -> Option<SqlResult<Flow>> {
        match s {
            Stmt::Null => Some(Ok(Flow::Next)),
            Stmt::Assign { target, expr } => {
                let r = self.scopes.find(&plain_target(target)?)?;
                let var = self.scopes.get(r);
                let VarType::Scalar(t) = &var.var_type else {
                    return None;
                };
                if var.constant {
                    return None;
                }
                let t = t.clone();
                let simple = self.simple_expression(expr)?;
                let value = fast_eval::eval_as(&simple, &self.scopes, &t)?;
                Some(self.store(r, value).map(|()| Flow::Next))
            }
            _ => None,
        }
    }

    async fn statement(&mut self, s: &Stmt) -> SqlResult<Flow> {
        match s {
            Stmt::Block(b) => self.block(b).await,
            Stmt::Null => Ok(Flow::Next),
            Stmt::Assign { target, expr } => {
                self.assign(target, expr).await?;
                Ok(Flow::Next)
            }
            Stmt::If {
                branches,
                otherwise,
            } => {
                for (condition, body) in branches {
                    if self.condition(condition).await? {
                        return self.statements(body).await;
                    }
                }
                match otherwise {
                    Some(body) => self.statements(body).await,
                    None => Ok(Flow::Next),
                }
            }
            Stmt::Case {
                subject,
                arms,
                otherwise,
            } => {
                self.case(subject.as_deref(), arms, otherwise.as_deref())
                    .await
            }
            Stmt::Loop { label, body } => loop {
                self.tick().await;
                let flow = self.loop_body(body).await?;
                if let Pass::Leave(flow) = pass(flow, label) {
                    return Ok(flow);
                }
            },
            Stmt::While {
                label,
                condition,
                body,
            } => {
                while self.condition(condition).await? {
                    self.tick().await;
                    let flow = self.loop_body(body).await?;
                    if let Pass::Leave(flow) = pass(flow, label) {
                        return Ok(flow);
                    }
                }
                Ok(Flow::Next)
            }
            Stmt::ForRange {
                label,
                var,
                reverse,
                low,
                high,
                step,
                body,
            } => {
                self.for_range(label, var, *reverse, low, high, step.as_deref(), body)
                    .await
            }
            Stmt::ForQuery {
                label,
                targets,
                query,
                dynamic,
                using,
                body,
            } => {
                let rows = match dynamic {
                    true => self.dynamic_rows(query, using).await?,
                    false => {
                        let r = self.run_sql(query).await?;
                        vars::rows_of(&r.batches)?
                    }
                };
                self.for_rows(label, targets, rows, body).await
            }
            Stmt::ForCursor {
                label,
                target,
                cursor,
                arguments,
                body,
            } => {
                self.for_cursor(label, target, cursor, arguments, body)
                    .await
            }
            Stmt::Open {
                cursor,
                scroll,
                source,
            } => {
                self.open(cursor, *scroll, source).await?;
                Ok(Flow::Next)
            }
            Stmt::Fetch {
                direction,
                cursor,
                into,
            } => {
                self.fetch(direction.as_deref(), cursor, into.as_ref())
                    .await?;
                Ok(Flow::Next)
            }
            Stmt::Close(cursor) => {
                self.close(cursor)?;
                Ok(Flow::Next)
            }
            Stmt::Foreach {
                label,
                target,
                slice,
                array,
                body,
            } => {
                if slice.is_some() {
                    return Err(SqlError::unsupported("FOREACH ... SLICE"));
                }
                self.foreach(label, target, array, body).await
            }
            Stmt::Exit {
                continue_loop,
                label,
                condition,
            } => {
                if let Some(c) = condition {
                    if !self.condition(c).await? {
                        return Ok(Flow::Next);
                    }
                }
                if let Some(l) = label {
                    if !self.scopes.has_label(l) && !*continue_loop {
                        // A loop's label is not a scope's; the loop checks it.
                    }
                }
                Ok(match continue_loop {
                    true => Flow::Continue(label.clone()),
                    false => Flow::Exit(label.clone()),
                })
            }
            Stmt::Return(expr) => {
                self.return_value(expr.as_deref()).await?;
                Ok(Flow::Return)
            }
            Stmt::ReturnNext(expr) => {
                self.return_next(expr.as_deref()).await?;
                Ok(Flow::Next)
            }
            Stmt::ReturnQuery {
                query,
                dynamic,
                using,
            } => {
                self.return_query(query, *dynamic, using).await?;
                Ok(Flow::Next)
            }
            Stmt::Raise(r) => {
                self.raise(r).await?;
                Ok(Flow::Next)
            }
            Stmt::Perform(query) => {
                let r = self.run_sql(query).await?;
                self.set_found(r.row_count > 0);
                self.row_count = r.row_count;
                Ok(Flow::Next)
            }
            Stmt::Execute {
                command,
                into,
                using,
            } => {
                self.execute(command, into.as_ref(), using).await?;
                Ok(Flow::Next)
            }
            Stmt::GetDiagnostics { stacked, items } => {
                self.get_diagnostics(*stacked, items).await?;
                Ok(Flow::Next)
            }
            Stmt::Assert { condition, message } => {
                if self.settings_flag("plpgsql.check_asserts") == Some(false) {
                    return Ok(Flow::Next);
                }
                if !self.condition(condition).await? {
                    let message = match message {
                        Some(m) => self.eval_text(m).await?.unwrap_or_default(),
                        None => "assertion failed".to_string(),
                    };
                    return Err(SqlError::new("P0004", message));
                }
                Ok(Flow::Next)
            }
            Stmt::Transaction { commit, chain } => {
                if !self.transaction_control {
                    return Err(SqlError::new("2D000", "invalid transaction termination"));
                }
                self.session
                    .routine_end_transaction(self.txn, *commit, *chain)
                    .await?;
                Ok(Flow::Next)
            }
            Stmt::Sql { text, into } => {
                self.sql_statement(text, into.as_ref()).await?;
                Ok(Flow::Next)
            }
        }
    }

    fn settings_flag(&self, name: &str) -> Option<bool> {
        self.session
            .settings
            .get(name)
            .map(|v| matches!(v, "on" | "true" | "1"))
    }

    // ----- control flow -----

    async fn case(
        &mut self,
        subject: Option<&str>,
        arms: &[(String, Vec<Stmt>)],
        otherwise: Option<&[Stmt]>,
    ) -> SqlResult<Flow> {
        let subject = match subject {
            Some(s) => Some(self.eval(s).await?.to_expr(&self.zone)?.to_string()),
            None => None,
        };
        for (when, body) in arms {
            let test = match &subject {
                Some(s) => format!("({s}) IN ({when})"),
                None => when.clone(),
            };
            if self.condition(&test).await? {
                return self.statements(body).await;
            }
        }
        match otherwise {
            Some(body) => self.statements(body).await,
            None => Err(SqlError::new("20000", "case not found")
                .with_hint("CASE statement is missing ELSE part.")),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn for_range(
        &mut self,
        label: &Option<String>,
        var: &str,
        reverse: bool,
        low: &str,
        high: &str,
        step: Option<&str>,
        body: &[Stmt],
    ) -> SqlResult<Flow> {
        let int = VarType::Scalar(DataType::Int32);
        let bound = |d: Datum, what: &str| -> SqlResult<i64> {
            match d {
                Datum::Scalar(_, Value::Int32(i)) => Ok(i as i64),
                _ => Err(SqlError::new(
                    code::NULL_VALUE_NOT_ALLOWED,
                    format!("{what} of FOR loop cannot be null"),
                )),
            }
        };
        let from = bound(self.eval_typed(low, &int).await?, "lower bound")?;
        let to = bound(self.eval_typed(high, &int).await?, "upper bound")?;
        let by = match step {
            Some(s) => bound(self.eval_typed(s, &int).await?, "BY value")?,
            None => 1,
        };
        if by <= 0 {
            return Err(SqlError::new(
                code::INVALID_PARAMETER_VALUE,
                "BY value of FOR loop must be greater than zero",
            ));
        }
        self.scopes.stack.push(Scope::default());
        self.declare(
            var,
            int,
            Datum::Scalar(DataType::Int32, Value::Int32(from as i32)),
        );
        let r = VarRef {
            scope: self.scopes.stack.len() - 1,
            index: 0,
        };
        let mut i = from;
        let mut iterated = false;
        let result = loop {
            if (!reverse && i > to) || (reverse && i < to) {
                break Ok(Flow::Next);
            }
            iterated = true;
            self.scopes.get_mut(r).value = Datum::Scalar(DataType::Int32, Value::Int32(i as i32));
            self.tick().await;
            match self.loop_body(body).await {
                Ok(flow) => {
                    if let Pass::Leave(flow) = pass(flow, label) {
                        break Ok(flow);
                    }
                }
                Err(e) => break Err(e),
            }
            i = if reverse { i - by } else { i + by };
        };
        self.scopes.stack.pop();
        self.set_found(iterated);
        result
    }

    async fn for_rows(
        &mut self,
        label: &Option<String>,
        targets: &[String],
        rows: Vec<Vec<Field>>,
        body: &[Stmt],
    ) -> SqlResult<Flow> {
        let iterated = !rows.is_empty();
        for row in rows {
            self.assign_row(targets, Some(row)).await?;
            self.tick().await;
            let flow = self.loop_body(body).await?;
            if let Pass::Leave(flow) = pass(flow, label) {
                self.set_found(iterated);
                return Ok(flow);
            }
        }
        self.set_found(iterated);
        Ok(Flow::Next)
    }

    async fn foreach(
        &mut self,
        label: &Option<String>,
        target: &str,
        array: &str,
        body: &[Stmt],
    ) -> SqlResult<Flow> {
        let (element_type, elements) = match self.eval(array).await? {
            Datum::Scalar(DataType::Array(t), Value::Array(items)) => (*t, items),
            Datum::Scalar(_, Value::Null) => {
                return Err(SqlError::new(
                    code::NULL_VALUE_NOT_ALLOWED,
                    "FOREACH expression must not be null",
                ))
            }
            Datum::Scalar(t, _) => {
                return Err(SqlError::new(
                    code::DATATYPE_MISMATCH,
                    format!(
                        "FOREACH expression must yield an array, not type {}",
                        crate::types::format_type(&t)
                    ),
                ))
            }
            _ => return Err(SqlError::unsupported("FOREACH over a record")),
        };
        for value in elements {
            let field = Field {
                name: target.to_string(),
                data_type: element_type.clone(),
                value,
            };
            self.assign_row(&[target.to_string()], Some(vec![field]))
                .await?;
            self.tick().await;
            let flow = self.statements(body).await?;
            if let Pass::Leave(flow) = pass(flow, label) {
                return Ok(flow);
            }
        }
        Ok(Flow::Next)
    }

    // ----- values -----

    /// The value of an expression, as `SELECT expr` gives it.
    async fn eval(&mut self, expr: &str) -> SqlResult<Datum> {
        self.eval_with(expr, None).await
    }

    /// The value of an expression cast to `t` (an assignment's).
    async fn eval_typed(&mut self, expr: &str, t: &VarType) -> SqlResult<Datum> {
        match t {
            VarType::Scalar(t) => self.eval_with(expr, Some(t)).await,
            VarType::Row(_) | VarType::Record => {
                let d = self.eval_row_expression(expr)?;
                self.coerce(d, t).await
            }
        }
    }

    /// A whole-row expression: a row or record variable's name.
    fn eval_row_expression(&self, expr: &str) -> SqlResult<Datum> {
        let name = expr.trim().to_ascii_lowercase();
        if name == "null" {
            return Ok(Datum::Unassigned);
        }
        match self.scopes.find(&name) {
            Some(r) => Ok(self.scopes.get(r).value.clone()),
            None => Err(SqlError::unsupported(format!(
                "assigning the expression \"{expr}\" to a row variable"
            ))),
        }
    }

    async fn eval_with(&mut self, expr: &str, cast_to: Option<&DataType>) -> SqlResult<Datum> {
        if let Some(simple) = self.simple_expression(expr) {
            let done = match cast_to {
                Some(t) => fast_eval::eval_as(&simple, &self.scopes, t),
                None => fast_eval::eval(&simple, &self.scopes),
            };
            if let Some(d) = done {
                return Ok(d);
            }
        }
        let key = format!("SELECT {expr}");
        let mut stmt = self.parsed_statement(&key)?;
        if let Some(t) = cast_to {
            let sql_type = crate::routines::sql_type(t)?;
            cast_projection(&mut stmt, sql_type)?;
        }
        let result = self.run_statement(stmt).await?;
        let mut rows = vars::rows_of(&result.batches)?;
        if rows.len() > 1 {
            return Err(SqlError::new(
                code::CARDINALITY_VIOLATION,
                "query returned more than one row",
            )
            .with_context(format!("PL/pgSQL expression \"{expr}\"")));
        }
        let width = result.columns.len();
        if width != 1 {
            return Err(SqlError::syntax(format!(
                "query \"{key}\" returned {width} columns"
            )));
        }
        Ok(match rows.pop() {
            Some(mut row) => {
                let f = row.pop().expect("one column");
                Datum::Scalar(f.data_type, f.value)
            }
            None => Datum::null(&crate::types::storage_type_of_field(
                &crate::types::arrow_field("", &cast_to.cloned().unwrap_or(DataType::Text)),
            )),
        })
    }

    async fn condition(&mut self, expr: &str) -> SqlResult<bool> {
        match self.eval_with(expr, Some(&DataType::Bool)).await? {
            Datum::Scalar(_, Value::Bool(b)) => Ok(b),
            _ => Ok(false),
        }
    }

    /// An expression's value as text (RAISE, EXECUTE): None for NULL.
    async fn eval_text(&mut self, expr: &str) -> SqlResult<Option<String>> {
        let d = self.eval(expr).await?;
        Ok(self.text_of(&d))
    }

    fn text_of(&self, d: &Datum) -> Option<String> {
        match d {
            Datum::Scalar(_, v) => crate::pgtext::format_value(v, &self.zone),
            Datum::Row(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|f| {
                        crate::pgtext::format_value(&f.value, &self.zone)
                            .map(|s| composite_field(&s))
                            .unwrap_or_default()
                    })
                    .collect();
                Some(format!("({})", parts.join(",")))
            }
            Datum::Unassigned => None,
        }
    }

    /// `d` made a value of type `t`: scalars cast as an assignment casts them, rows field by
    /// field in order.
    fn coerce<'a>(&'a mut self, d: Datum, t: &'a VarType) -> Boxed<'a, Datum> {
        Box::pin(async move {
            match (t, d) {
                (VarType::Record, d) => Ok(d),
                (VarType::Scalar(t), Datum::Scalar(from, v)) => {
                    if &from == t || v.is_null() {
                        return Ok(Datum::Scalar(t.clone(), v));
                    }
                    let lit = vars::literal(&from, &v, &self.zone)?;
                    let e = crate::routines::cast(lit, crate::routines::sql_type(t)?);
                    let stmt = select_of(e);
                    let result = self.run_statement(stmt).await?;
                    let f = vars::rows_of(&result.batches)?
                        .pop()
                        .and_then(|mut r| r.pop())
                        .ok_or_else(|| SqlError::internal("a cast gave no row"))?;
                    Ok(Datum::Scalar(t.clone(), f.value))
                }
                (VarType::Row(cols), Datum::Row(fields)) => {
                    let mut out = Vec::with_capacity(cols.len());
                    for (i, (name, ct)) in cols.iter().enumerate() {
                        let d = match fields.get(i) {
                            Some(f) => Datum::Scalar(f.data_type.clone(), f.value.clone()),
                            None => Datum::null(ct),
                        };
                        let Datum::Scalar(_, value) =
                            self.coerce(d, &VarType::Scalar(ct.clone())).await?
                        else {
                            unreachable!("a scalar coerces to a scalar")
                        };
                        out.push(Field {
                            name: name.clone(),
                            data_type: ct.clone(),
                            value,
                        });
                    }
                    Ok(Datum::Row(out))
                }
                (VarType::Row(cols), Datum::Unassigned) => Ok(VarType::Row(cols.clone()).initial()),
                (VarType::Scalar(t), Datum::Unassigned) => Ok(Datum::null(t)),
                (VarType::Scalar(_), Datum::Row(_)) => Err(SqlError::new(
                    code::DATATYPE_MISMATCH,
                    "cannot assign a row to a scalar variable",
                )),
                (VarType::Row(cols), Datum::Scalar(t, v)) => {
                    // One value into a row: its first field, as PostgreSQL assigns a scalar
                    // query result to a one-column row.
                    let first = vec![Field {
                        name: String::new(),
                        data_type: t,
                        value: v,
                    }];
                    let row = VarType::Row(cols.clone());
                    self.coerce(Datum::Row(first), &row).await
                }
            }
        })
    }

    /// The declared type a declaration's text names.
    fn resolve_type(&self, text: &str) -> SqlResult<VarType> {
        let trimmed = text.trim();
        let lower = trimmed.to_ascii_lowercase();
        if lower == "record" {
            return Ok(VarType::Record);
        }
        if let Some(of) = lower.strip_suffix("%rowtype") {
            return self.table_row_type(of.trim());
        }
        if let Some(of) = lower.strip_suffix("%type") {
            let of = of.trim();
            if let Some(r) = self.scopes.find(of) {
                return Ok(self.scopes.get(r).var_type.clone());
            }
            let Some((table, column)) = of.rsplit_once('.') else {
                return Err(SqlError::syntax(format!("invalid type name \"{trimmed}\"")));
            };
            let VarType::Row(cols) = self.table_row_type(table)? else {
                unreachable!("a table's type is a row")
            };
            return cols
                .into_iter()
                .find(|(n, _)| n == column)
                .map(|(_, t)| VarType::Scalar(t))
                .ok_or_else(|| {
                    SqlError::new(
                        code::UNDEFINED_COLUMN,
                        format!("column \"{column}\" of relation \"{table}\" does not exist"),
                    )
                });
        }
        let parsed = datafusion::sql::sqlparser::parser::Parser::new(
            &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
        )
        .try_with_sql(trimmed)
        .and_then(|mut p| p.parse_data_type());
        match parsed {
            Ok(t) => match crate::ddl::column_type(self.session, &t) {
                Ok(t) => Ok(VarType::Scalar(t)),
                // A table's name is its row type.
                Err(e) => self.table_row_type(&lower).map_err(|_| e),
            },
            Err(_) => self.table_row_type(&lower),
        }
    }

    fn table_row_type(&self, name: &str) -> SqlResult<VarType> {
        let (schema, table) = match name.rsplit_once('.') {
            Some((s, t)) => (Some(s), t),
            None => (None, name),
        };
        let found = self.session.scope.resolve_relation(schema, table);
        let catalog = self.session.engine.catalog.read();
        let def = found.and_then(|(_, _, oid)| catalog.tables.get(&oid).cloned());
        match def {
            Some(def) => Ok(VarType::Row(
                def.columns
                    .iter()
                    .map(|c| (c.name.clone(), c.data_type.clone()))
                    .collect(),
            )),
            None => Err(SqlError::new(
                code::UNDEFINED_OBJECT,
                format!("type \"{name}\" does not exist"),
            )),
        }
    }

    // ----- assignment -----

    async fn assign(&mut self, target: &str, expr: &str) -> SqlResult<()> {
        let parts = target_parts(target)?;
        let (r, field) = self.target_ref(&parts)?;
        let var = self.scopes.get(r);
        if var.constant {
            return Err(SqlError::syntax(format!(
                "variable \"{}\" is declared CONSTANT",
                var.name
            )));
        }
        match field {
            None => {
                let t = var.var_type.clone();
                let value = self.eval_typed(expr, &t).await?;
                self.store(r, value)
            }
            Some(field) => {
                let Datum::Row(fields) = &var.value else {
                    return Err(vars::unassigned_record(&var.name));
                };
                let Some(i) = fields.iter().position(|f| f.name == field) else {
                    return Err(SqlError::new(
                        code::UNDEFINED_COLUMN,
                        format!("record \"{}\" has no field \"{field}\"", var.name),
                    ));
                };
                let t = fields[i].data_type.clone();
                let Datum::Scalar(_, value) = self.eval_typed(expr, &VarType::Scalar(t)).await?
                else {
                    unreachable!("a scalar type evaluates to a scalar")
                };
                if let Datum::Row(fields) = &mut self.scopes.get_mut(r).value {
                    fields[i].value = value;
                }
                Ok(())
            }
        }
    }

    /// The variable (and field of it) an assignment target names.
    fn target_ref(&self, parts: &[String]) -> SqlResult<(VarRef, Option<String>)> {
        let missing =
            || SqlError::syntax(format!("\"{}\" is not a known variable", parts.join(".")));
        match parts {
            [name] => self
                .scopes
                .find(name)
                .map(|r| (r, None))
                .ok_or_else(missing),
            [a, b] => {
                if let Some(r) = self.scopes.find(a) {
                    if !matches!(self.scopes.get(r).var_type, VarType::Scalar(_)) {
                        return Ok((r, Some(b.clone())));
                    }
                }
                self.scopes
                    .find_qualified(a, b)
                    .map(|r| (r, None))
                    .ok_or_else(missing)
            }
            [label, rec, field] => self
                .scopes
                .find_qualified(label, rec)
                .map(|r| (r, Some(field.clone())))
                .ok_or_else(missing),
            _ => Err(missing()),
        }
    }

    fn store(&mut self, r: VarRef, value: Datum) -> SqlResult<()> {
        let var = self.scopes.get_mut(r);
        if var.not_null && value.is_null() {
            return Err(null_into_not_null(&var.name));
        }
        var.value = value;
        Ok(())
    }

    /// Assigns a row to INTO or loop targets: one row or record variable takes the whole
    /// row; otherwise the scalars take its columns in order (missing ones NULL). None sets
    /// them all to NULL.
    async fn assign_row(&mut self, targets: &[String], row: Option<Vec<Field>>) -> SqlResult<()> {
        let refs = targets
            .iter()
            .map(|t| {
                let parts = target_parts(t)?;
                self.target_ref(&parts)
            })
            .collect::<SqlResult<Vec<_>>>()?;
        if let [(r, None)] = refs.as_slice() {
            let t = self.scopes.get(*r).var_type.clone();
            if !matches!(t, VarType::Scalar(_)) {
                let value = match row {
                    Some(fields) => self.coerce(Datum::Row(fields), &t).await?,
                    None => match t {
                        VarType::Row(_) => t.initial(),
                        _ => Datum::Unassigned,
                    },
                };
                return self.store(*r, value);
            }
        }
        let mut values = row.map(|r| r.into_iter()).into_iter().flatten();
        for (r, field) in refs {
            let given = values.next();
            let target_type = match &field {
                None => self.scopes.get(r).var_type.clone(),
                Some(name) => match &self.scopes.get(r).value {
                    Datum::Row(fields) => fields
                        .iter()
                        .find(|f| &f.name == name)
                        .map(|f| VarType::Scalar(f.data_type.clone()))
                        .ok_or_else(|| {
                            SqlError::new(
                                code::UNDEFINED_COLUMN,
                                format!("record has no field \"{name}\""),
                            )
                        })?,
                    _ => return Err(vars::unassigned_record(&self.scopes.get(r).name)),
                },
            };
            let d = match given {
                Some(f) => Datum::Scalar(f.data_type, f.value),
                None => Datum::Unassigned,
            };
            let value = self.coerce(d, &target_type).await?;
            match field {
                None => self.store(r, value)?,
                Some(name) => {
                    let Datum::Scalar(_, v) = value else {
                        unreachable!("a field is a scalar")
                    };
                    if let Datum::Row(fields) = &mut self.scopes.get_mut(r).value {
                        if let Some(f) = fields.iter_mut().find(|f| f.name == name) {
                            f.value = v;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn set_found(&mut self, found: bool) {
        if let Some(r) = self.scopes.find_qualified(&self.name.clone(), "found") {
            self.scopes.get_mut(r).value = Datum::bool(found);
        } else if let Some(r) = self.scopes.find("found") {
            self.scopes.get_mut(r).value = Datum::bool(found);
        }
    }

    // ----- SQL -----

    /// The expression, parsed, when `SELECT expr` is all there is to it (no FROM, no
    /// aggregate, one item): what `fast_eval` may compute. Kept per text.
    fn simple_expression(&mut self, expr: &str) -> Option<Arc<Expr>> {
        if let Some(found) = self.simple.get(expr) {
            return found.clone();
        }
        let parsed = crate::routines::parse_expr(expr).ok().filter(|e| {
            let mut plain = true;
            let _ = ast::visit_expressions(e, |x| {
                if matches!(
                    x,
                    Expr::Function(_)
                        | Expr::Subquery(_)
                        | Expr::Exists { .. }
                        | Expr::InSubquery { .. }
                ) {
                    plain = false;
                }
                std::ops::ControlFlow::<()>::Continue(())
            });
            plain
        });
        let parsed = parsed.map(Arc::new);
        self.simple.insert(expr.to_string(), parsed.clone());
        parsed
    }

    fn parsed_statement(&mut self, text: &str) -> SqlResult<Statement> {
        if let Some(s) = self.parsed.get(text) {
            return Ok(s.clone());
        }
        let mut statements = crate::session::parse_sql(text)?;
        if statements.len() != 1 {
            return Err(SqlError::syntax(format!(
                "expected one SQL statement in \"{text}\""
            )));
        }
        let mut stmt = statements.pop().expect("one statement");
        if self.returns == Returns::Trigger {
            embed::zero_based_tg_argv(&mut stmt);
        }
        self.parsed.insert(text.to_string(), stmt.clone());
        Ok(stmt)
    }

    /// Runs a statement with the variables it names replaced by their values.
    async fn run_statement(&mut self, mut stmt: Statement) -> SqlResult<EmbeddedResult> {
        let columns = self.columns_read(&stmt);
        embed::substitute(&mut stmt, &self.scopes, &columns, &self.zone)?;
        self.session.run_embedded(self.txn, stmt).await
    }

    /// Runs an embedded statement given by its text: on its kept plan when it has one (see
    /// `kept`), else the ordinary way, after which a point statement's plan is kept.
    async fn run_sql(&mut self, text: &str) -> SqlResult<EmbeddedResult> {
        let catalog_version = self.session.engine.catalog.read().version;
        let generation = self.session.settings.generation();
        let kept = self
            .session
            .routine_cache
            .statement(text, catalog_version, generation);
        if let Some(kept) = &kept {
            if let (Some(plan), Some(values)) = (&kept.plan, kept.bind(&self.scopes)) {
                if !(plan.writes() && self.session.read_only()) {
                    return self
                        .session
                        .run_embedded_plan(self.txn, plan, &values)
                        .await;
                }
            }
        }
        let stmt = self.parsed_statement(text)?;
        if kept.is_some() {
            return self.run_statement(stmt).await;
        }
        let result = self.run_statement(stmt.clone()).await?;
        let session = &*self.session;
        let kept = KeptStatement::new(&stmt, &self.scopes, catalog_version, generation, |s, n| {
            // A statement the role may not run is left to the ordinary path, which says so.
            session.check_privileges(s).ok()?;
            crate::fastpath::plan(session, s, n)
        });
        self.session.routine_cache.keep(text, Arc::new(kept));
        Ok(result)
    }

    /// The column names of the tables `stmt` reads, which variables must not shadow.
    fn columns_read(&self, stmt: &Statement) -> HashSet<String> {
        let mut columns = HashSet::new();
        let tables = embed::read_tables(stmt);
        if tables.is_empty() {
            return columns;
        }
        for name in tables {
            let parts: Vec<String> = name
                .0
                .iter()
                .filter_map(|p| p.as_ident().map(ident_name))
                .collect();
            let (schema, table) = match parts.as_slice() {
                [t] => (None, t.as_str()),
                [.., s, t] => (Some(s.as_str()), t.as_str()),
                [] => continue,
            };
            let Some((_, _, oid)) = self.session.scope.resolve_relation(schema, table) else {
                continue;
            };
            let catalog = self.session.engine.catalog.read();
            if let Some(def) = catalog.tables.get(&oid) {
                columns.extend(def.columns.iter().map(|c| c.name.clone()));
            }
        }
        columns
    }

    async fn sql_statement(&mut self, text: &str, into: Option<&IntoClause>) -> SqlResult<()> {
        let result = self.run_sql(text).await?;
        // A query, or a statement with RETURNING.
        let returns_rows = result.tag == "SELECT" || !result.columns.is_empty();
        self.row_count = result.row_count;
        match into {
            Some(into) => {
                let rows = vars::rows_of(&result.batches)?;
                self.into_targets(into, rows).await?;
            }
            None if returns_rows => {
                return Err(SqlError::syntax("query has no destination for result data")
                    .with_hint(
                        "If you want to discard the results of a SELECT, use PERFORM instead.",
                    ));
            }
            None => self.set_found(result.row_count > 0),
        }
        Ok(())
    }

    async fn into_targets(
        &mut self,
        into: &IntoClause,
        mut rows: Vec<Vec<Field>>,
    ) -> SqlResult<()> {
        if into.strict {
            if rows.is_empty() {
                return Err(SqlError::new("P0002", "query returned no rows"));
            }
            if rows.len() > 1 {
                return Err(SqlError::new("P0003", "query returned more than one row")
                    .with_hint("Make sure the query returns a single row, or use LIMIT 1."));
            }
        }
        let found = !rows.is_empty();
        let first = if rows.is_empty() {
            None
        } else {
            Some(rows.swap_remove(0))
        };
        self.assign_row(&into.targets, first).await?;
        self.set_found(found);
        Ok(())
    }

    /// The statement text EXECUTE runs, with `$n` taking the USING values.
    async fn dynamic_statement(&mut self, command: &str, using: &[String]) -> SqlResult<Statement> {
        let text = match self.eval_text(command).await? {
            Some(t) => t,
            None => {
                return Err(SqlError::new(
                    code::NULL_VALUE_NOT_ALLOWED,
                    "query string argument of EXECUTE is null",
                ))
            }
        };
        let mut values = Vec::with_capacity(using.len());
        for u in using {
            values.push(self.eval(u).await?);
        }
        let mut statements = crate::session::parse_sql(&text)?;
        if statements.len() != 1 {
            return Err(SqlError::syntax(
                "EXECUTE of a string with several statements is not supported",
            ));
        }
        let mut stmt = statements.pop().expect("one statement");
        let zone = self.zone.clone();
        let mut error = None;
        let _ = ast::visit_expressions_mut(&mut stmt, |e| {
            if let Expr::Value(v) = e {
                if let ast::Value::Placeholder(p) = &v.value {
                    let n = p.trim_start_matches('$').parse::<usize>().unwrap_or(0);
                    match values.get(n.wrapping_sub(1)) {
                        Some(d) => match d.to_expr(&zone) {
                            Ok(lit) => *e = Expr::Nested(Box::new(lit)),
                            Err(err) => error = Some(err),
                        },
                        None => {
                            error = Some(SqlError::new(
                                code::UNDEFINED_PARAMETER,
                                format!("there is no parameter {p}"),
                            ))
                        }
                    }
                }
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        match error {
            Some(e) => Err(e),
            None => Ok(stmt),
        }
    }

    async fn dynamic_rows(
        &mut self,
        command: &str,
        using: &[String],
    ) -> SqlResult<Vec<Vec<Field>>> {
        let stmt = self.dynamic_statement(command, using).await?;
        let result = self.session.run_embedded(self.txn, stmt).await?;
        vars::rows_of(&result.batches)
    }

    async fn execute(
        &mut self,
        command: &str,
        into: Option<&IntoClause>,
        using: &[String],
    ) -> SqlResult<()> {
        let stmt = self.dynamic_statement(command, using).await?;
        let result = self.session.run_embedded(self.txn, stmt).await?;
        self.row_count = result.row_count;
        if let Some(into) = into {
            let rows = vars::rows_of(&result.batches)?;
            let found = self
                .scopes
                .find("found")
                .map(|r| self.scopes.get(r).value.clone());
            self.into_targets(into, rows).await?;
            // EXECUTE leaves FOUND alone.
            if let (Some(r), Some(v)) = (self.scopes.find("found"), found) {
                self.scopes.get_mut(r).value = v;
            }
        }
        Ok(())
    }

    // ----- RETURN -----

    async fn return_value(&mut self, expr: Option<&str>) -> SqlResult<()> {
        match (&self.returns, expr) {
            (Returns::Scalar(t), Some(e)) => {
                let t = VarType::Scalar(t.clone());
                self.returned = Some(self.eval_typed(e, &t).await?);
            }
            (Returns::Scalar(_), None) => {
                return Err(SqlError::syntax("missing expression at or near \";\""))
            }
            (Returns::Trigger, Some(e)) => {
                self.returned = Some(self.eval_row_expression(e)?);
            }
            (Returns::OutRow(_), Some(_)) => {
                return Err(SqlError::syntax(
                    "RETURN cannot have a parameter in function with OUT parameters",
                ))
            }
            (Returns::OutRow(_), None) => self.returned = Some(self.out_row()),
            (Returns::Void, Some(e)) if !e.trim().is_empty() => {
                return Err(SqlError::new(
                    code::DATATYPE_MISMATCH,
                    "RETURN cannot have a parameter in function returning void",
                ))
            }
            (Returns::Rows(_), Some(e)) if !e.trim().is_empty() => {
                return Err(SqlError::new(
                    code::DATATYPE_MISMATCH,
                    "RETURN cannot have a parameter in function returning set",
                )
                .with_hint("Use RETURN NEXT or RETURN QUERY."))
            }
            _ => {}
        }
        Ok(())
    }

    async fn return_next(&mut self, expr: Option<&str>) -> SqlResult<()> {
        let Returns::Rows(columns) = self.returns.clone() else {
            return Err(SqlError::syntax(
                "cannot use RETURN NEXT in a non-SETOF function",
            ));
        };
        let row = match expr {
            None if !self.outputs.is_empty() => match self.out_row() {
                Datum::Row(f) => f,
                _ => unreachable!("out_row is a row"),
            },
            None => {
                return Err(SqlError::syntax("RETURN NEXT must have a parameter"));
            }
            Some(e) if columns.len() == 1 => {
                let t = VarType::Scalar(columns[0].1.clone());
                match self.eval_typed(e, &t).await? {
                    Datum::Scalar(data_type, value) => vec![Field {
                        name: columns[0].0.clone(),
                        data_type,
                        value,
                    }],
                    _ => unreachable!("a scalar type evaluates to a scalar"),
                }
            }
            Some(e) => {
                let d = self.eval_row_expression(e)?;
                match self.coerce(d, &VarType::Row(columns.clone())).await? {
                    Datum::Row(f) => f,
                    _ => unreachable!("a row type coerces to a row"),
                }
            }
        };
        self.rows.push(row);
        Ok(())
    }

    async fn return_query(
        &mut self,
        query: &str,
        dynamic: bool,
        using: &[String],
    ) -> SqlResult<()> {
        let Returns::Rows(columns) = self.returns.clone() else {
            return Err(SqlError::syntax(
                "cannot use RETURN QUERY in a non-SETOF function",
            ));
        };
        let rows = match dynamic {
            true => self.dynamic_rows(query, using).await?,
            false => {
                let r = self.run_sql(query).await?;
                vars::rows_of(&r.batches)?
            }
        };
        let found = !rows.is_empty();
        for row in rows {
            if row.len() != columns.len() {
                return Err(SqlError::new(
                    code::DATATYPE_MISMATCH,
                    "structure of query does not match function result type",
                )
                .with_detail("Number of returned columns does not match expected column count."));
            }
            let mut out = Vec::with_capacity(row.len());
            for (i, (f, (name, t))) in row.into_iter().zip(&columns).enumerate() {
                if crate::types::pg_type_of(&f.data_type).0 != crate::types::pg_type_of(t).0
                    && !f.value.is_null()
                {
                    return Err(SqlError::new(
                        code::DATATYPE_MISMATCH,
                        "structure of query does not match function result type",
                    )
                    .with_detail(format!(
                        "Returned type {} does not match expected type {} in column {}.",
                        crate::types::format_type(&f.data_type),
                        crate::types::format_type(t),
                        i + 1
                    )));
                }
                out.push(Field {
                    name: name.clone(),
                    data_type: t.clone(),
                    value: f.value,
                });
            }
            self.rows.push(out);
        }
        self.set_found(found);
        Ok(())
    }

    // ----- RAISE and diagnostics -----

    async fn raise(&mut self, r: &Raise) -> SqlResult<()> {
        if r.format.is_none() && r.condition.is_none() && r.options.is_empty() {
            // A bare RAISE re-throws the error being handled.
            return match self.handling.last() {
                Some(e) => Err(e.clone()),
                None => Err(SqlError::new(
                    "0Z002",
                    "RAISE without parameters cannot be used outside an exception handler",
                )),
            };
        }
        let mut sqlstate: Option<String> = None;
        let mut message = match &r.format {
            Some(f) => Some(self.format_message(&string_constant(f)?, &r.args).await?),
            None => None,
        };
        if let Some(c) = &r.condition {
            match c {
                Condition::SqlState(s) => sqlstate = Some(s.clone()),
                Condition::Name(n) => {
                    let code = conditions::sqlstate_of(n).ok_or_else(|| {
                        SqlError::new(
                            code::UNDEFINED_OBJECT,
                            format!("unrecognized exception condition \"{n}\""),
                        )
                    })?;
                    sqlstate = Some(code.to_string());
                    if message.is_none() {
                        message = Some(n.clone());
                    }
                }
            }
        }
        let (mut detail, mut hint) = (None, None);
        for (option, expr) in &r.options {
            let value = self.eval_text(expr).await?;
            let Some(value) = value else {
                return Err(SqlError::new(
                    code::NULL_VALUE_NOT_ALLOWED,
                    format!("RAISE option cannot be null"),
                ));
            };
            match option.as_str() {
                "message" => message = Some(value),
                "detail" => detail = Some(value),
                "hint" => hint = Some(value),
                "errcode" => {
                    let code = match conditions::sqlstate_of(&value.to_ascii_lowercase()) {
                        Some(c) => c.to_string(),
                        None if is_sqlstate(&value) => value,
                        None => {
                            return Err(SqlError::new(
                                code::UNDEFINED_OBJECT,
                                format!("unrecognized exception condition \"{value}\""),
                            ))
                        }
                    };
                    sqlstate = Some(code);
                }
                // COLUMN, CONSTRAINT, DATATYPE, TABLE, SCHEMA: kept by PostgreSQL for the
                // client's error fields.
                _ => {}
            }
        }
        let level = r.level.as_str();
        if level == "exception" {
            let code = conditions::static_code(sqlstate.as_deref().unwrap_or("P0001"));
            let message = message.unwrap_or_else(|| code.to_string());
            let mut e = SqlError::new(code, message);
            e.detail = detail;
            e.hint = hint;
            return Err(e);
        }
        let message = message.unwrap_or_default();
        let severity = match level {
            "warning" => "WARNING",
            "info" => "INFO",
            "notice" => "NOTICE",
            "log" | "debug" => return Ok(()),
            _ => "NOTICE",
        };
        if !self.client_hears(severity) {
            return Ok(());
        }
        let code = conditions::static_code(sqlstate.as_deref().unwrap_or(match severity {
            "WARNING" => "01000",
            _ => "00000",
        }));
        self.session
            .scope
            .notices
            .lock()
            .push(crate::error::Notice {
                severity,
                code,
                message,
                detail,
                hint,
            });
        Ok(())
    }

    /// Whether `client_min_messages` lets a message of this severity through (INFO always).
    fn client_hears(&self, severity: &str) -> bool {
        let min = self
            .session
            .settings
            .get("client_min_messages")
            .unwrap_or("notice")
            .to_ascii_lowercase();
        let rank = |s: &str| match s {
            "debug5" | "debug4" | "debug3" | "debug2" | "debug1" | "debug" => 0,
            "log" => 1,
            "notice" => 2,
            "warning" => 3,
            "error" => 4,
            _ => 2,
        };
        severity == "INFO" || rank(&severity.to_ascii_lowercase()) >= rank(&min)
    }

    async fn format_message(&mut self, format: &str, args: &[String]) -> SqlResult<String> {
        let mut values = Vec::with_capacity(args.len());
        for a in args {
            let d = self.eval(a).await?;
            values.push(self.text_of(&d).unwrap_or_else(|| "<NULL>".to_string()));
        }
        let mut out = String::new();
        let mut next = values.into_iter();
        let mut used = 0;
        let mut chars = format.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            if chars.peek() == Some(&'%') {
                chars.next();
                out.push('%');
                continue;
            }
            match next.next() {
                Some(v) => {
                    out.push_str(&v);
                    used += 1;
                }
                None => {
                    return Err(SqlError::syntax("too few parameters specified for RAISE"));
                }
            }
        }
        if used < args.len() {
            return Err(SqlError::syntax("too many parameters specified for RAISE"));
        }
        Ok(out)
    }

    async fn get_diagnostics(
        &mut self,
        stacked: bool,
        items: &[(String, String)],
    ) -> SqlResult<()> {
        for (target, item) in items {
            let item = item.to_ascii_lowercase();
            let value = if stacked {
                let Some(e) = self.handling.last() else {
                    return Err(SqlError::new(
                        "0Z002",
                        "GET STACKED DIAGNOSTICS cannot be used outside an exception handler",
                    ));
                };
                let object = e.object.as_deref();
                let text = match item.as_str() {
                    "returned_sqlstate" => Some(e.code.to_string()),
                    "message_text" => Some(e.message.clone()),
                    "pg_exception_detail" => e.detail.clone(),
                    "pg_exception_hint" => e.hint.clone(),
                    "pg_exception_context" => e.context.clone(),
                    "column_name" => object.and_then(|o| o.column.clone()),
                    "constraint_name" => object.and_then(|o| o.constraint.clone()),
                    "pg_datatype_name" => object.and_then(|o| o.datatype.clone()),
                    "table_name" => object.and_then(|o| o.table.clone()),
                    "schema_name" => object.and_then(|o| o.schema.clone()),
                    other => {
                        return Err(SqlError::syntax(format!(
                            "unrecognized GET STACKED DIAGNOSTICS item \"{other}\""
                        )))
                    }
                };
                Datum::text(text.unwrap_or_default())
            } else {
                match item.as_str() {
                    "row_count" => Datum::int(self.row_count as i64),
                    "pg_context" => Datum::text(format!("PL/pgSQL function {}", self.name)),
                    other => {
                        return Err(SqlError::syntax(format!(
                            "unrecognized GET DIAGNOSTICS item \"{other}\""
                        )))
                    }
                }
            };
            let parts = target_parts(target)?;
            let (r, _) = self.target_ref(&parts)?;
            let t = self.scopes.get(r).var_type.clone();
            let value = self.coerce(value, &t).await?;
            self.store(r, value)?;
        }
        Ok(())
    }
}

/// What a loop does with the flow its body ended with.
fn pass(flow: Flow, label: &Option<String>) -> Pass {
    match flow {
        Flow::Next => Pass::Again,
        Flow::Continue(None) => Pass::Again,
        Flow::Continue(Some(l)) if label.as_deref() == Some(l.as_str()) => Pass::Again,
        Flow::Exit(None) => Pass::Leave(Flow::Next),
        Flow::Exit(Some(l)) if label.as_deref() == Some(l.as_str()) => Pass::Leave(Flow::Next),
        other => Pass::Leave(other),
    }
}

fn null_into_not_null(name: &str) -> SqlError {
    SqlError::new(
        code::NULL_VALUE_NOT_ALLOWED,
        format!("null value cannot be assigned to variable \"{name}\" declared NOT NULL"),
    )
}

fn is_sqlstate(s: &str) -> bool {
    s.len() == 5
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// A field's text inside a composite's text form, quoted when PostgreSQL would.
fn composite_field(s: &str) -> String {
    if s.is_empty()
        || s.chars()
            .any(|c| matches!(c, ',' | '(' | ')' | '"' | '\\') || c.is_whitespace())
    {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        s.to_string()
    }
}

/// The value of a string constant as written (`'it''s'`, `E'a\\n'`, `$$x$$`).
fn string_constant(written: &str) -> SqlResult<String> {
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let dialect = datafusion::sql::sqlparser::dialect::PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, written)
        .tokenize()
        .map_err(|e| SqlError::syntax(e.to_string()))?;
    match tokens.into_iter().next() {
        Some(Token::SingleQuotedString(s)) | Some(Token::EscapedStringLiteral(s)) => Ok(s),
        Some(Token::DollarQuotedString(d)) => Ok(d.value),
        _ => Err(SqlError::syntax(format!(
            "expected a string constant, got {written}"
        ))),
    }
}

/// An assignment target's name parts (`x`, `r.f`, `blk.x`).
fn target_parts(target: &str) -> SqlResult<Vec<String>> {
    if let Some(name) = plain_target(target) {
        return Ok(vec![name]);
    }
    match crate::routines::parse_expr(target)? {
        Expr::Identifier(i) => Ok(vec![ident_name(&i)]),
        Expr::CompoundIdentifier(ids) => Ok(ids.iter().map(ident_name).collect()),
        _ => Err(SqlError::unsupported(format!(
            "assigning to \"{target}\" (array elements and other targets)"
        ))),
    }
}

/// A target that is one plain variable name (lower-cased), read without a parser; None for
/// anything else (`r.f`, `"X"`, `a[i]`).
fn plain_target(target: &str) -> Option<String> {
    let plain = !target.is_empty()
        && target
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$');
    plain.then(|| target.to_ascii_lowercase())
}

/// `SELECT e`.
fn select_of(e: Expr) -> Statement {
    let sql = format!("SELECT {e}");
    crate::parse::parse_statements(&sql)
        .ok()
        .and_then(|mut s| s.pop())
        .expect("a SELECT of a printed expression parses")
}

/// Wraps the only item of `SELECT item` in a cast.
fn cast_projection(stmt: &mut Statement, t: ast::DataType) -> SqlResult<()> {
    if let Statement::Query(q) = stmt {
        if let ast::SetExpr::Select(select) = q.body.as_mut() {
            if let [item] = select.projection.as_mut_slice() {
                if let ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } = item
                {
                    let inner = std::mem::replace(e, Expr::value(ast::Value::Null));
                    *e = crate::routines::cast(Expr::Nested(Box::new(inner)), t);
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}
