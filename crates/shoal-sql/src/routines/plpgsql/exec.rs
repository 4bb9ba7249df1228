//! Running a PL/pgSQL body (see the module comment of `plpgsql`): here the statements,
//! control flow and exception blocks; in the submodules what the statements do with values
//! (`expr`, `assign`), SQL (`sql`, `cursor`) and what a body gives back or says (`output`).

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
use super::kept::{General, KeptRun, KeptStatement};
use super::vars::{self, Datum, Field, Scope, Scopes, Var, VarRef, VarType};
use super::{Invocation, Returns};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{EmbeddedResult, Session};
use crate::timezone::TimeZone;

mod assign;
mod cursor;
mod expr;
mod output;
mod sql;

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
    /// Assignments with their target and variables placed (see `fast_eval::Placed`), by the
    /// address of their statement in the body, which outlives this run; None: not placeable.
    placed: HashMap<usize, Option<PlacedAssignment>>,
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
            placed: HashMap::new(),
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
                let key = s as *const Stmt as usize;
                let done = match self.placed.get(&key) {
                    Some(entry) => entry.as_ref().and_then(|p| p.run(&self.scopes)),
                    None => {
                        let entry = PlacedAssignment::new(&self.scopes, target, expr);
                        let done = entry.as_ref().and_then(|p| p.run(&self.scopes));
                        self.placed.insert(key, entry);
                        done
                    }
                };
                if let Some((at, value)) = done {
                    return Some(self.store(at, value).map(|()| Flow::Next));
                }
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
}

/// `target := expr` with both placed (see `fast_eval::Placed`).
struct PlacedAssignment {
    target: VarRef,
    target_name: String,
    target_type: DataType,
    value: fast_eval::Placed,
    depth: usize,
}

impl PlacedAssignment {
    /// None when the target is not a plain scalar variable or the expression not simple.
    fn new(scopes: &Scopes, target: &str, expr: &str) -> Option<PlacedAssignment> {
        let target_name = plain_target(target)?;
        let at = fast_eval::place_of(scopes, &target_name)?;
        let var = scopes.get(at);
        let VarType::Scalar(t) = &var.var_type else {
            return None;
        };
        if var.constant {
            return None;
        }
        let expr = crate::routines::parse_expr(expr).ok()?;
        Some(PlacedAssignment {
            target: at,
            target_type: t.clone(),
            value: fast_eval::place(&expr, scopes)?,
            target_name,
            depth: scopes.stack.len(),
        })
    }

    /// The target and its new value; None to assign the ordinary way.
    fn run(&self, scopes: &Scopes) -> Option<(VarRef, Datum)> {
        if !fast_eval::still_at(scopes, self.depth, self.target, &self.target_name) {
            return None;
        }
        let value = fast_eval::eval_placed_as(&self.value, scopes, &self.target_type)?;
        Some((self.target, value))
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

/// An assignment target that is one element of an array variable (`a[i]`, `r.f[i]`): the
/// variable's name parts and the subscript's SQL. None for other targets; several subscripts
/// (`a[i][j]`) and slices are refused.
fn element_target(target: &str) -> SqlResult<Option<(Vec<String>, String)>> {
    if !target.contains('[') {
        return Ok(None);
    }
    let Expr::CompoundFieldAccess { root, access_chain } = crate::routines::parse_expr(target)?
    else {
        return Ok(None);
    };
    let parts = match *root {
        Expr::Identifier(i) => vec![ident_name(&i)],
        Expr::CompoundIdentifier(ids) => ids.iter().map(ident_name).collect(),
        _ => return Ok(None),
    };
    match access_chain.as_slice() {
        [ast::AccessExpr::Subscript(ast::Subscript::Index { index })] => {
            Ok(Some((parts, index.to_string())))
        }
        _ => Err(SqlError::unsupported(format!(
            "assigning to \"{target}\" (slices and elements of multi-dimensional arrays)"
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
