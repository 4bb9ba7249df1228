//! Statements that a routine runs (a PL/pgSQL body's SQL, a SQL function's statements, a DO
//! block's): run inside the caller's transaction, with the caller's session, and read to the
//! end before the routine goes on. They take the same paths a client's statement takes (the
//! fast path for keyed statements, else planning), with the same privilege and read-only
//! checks, but leave the transaction block's state to the caller: a failure is the routine's
//! to handle (an exception block may catch it).

use std::future::Future;
use std::pin::Pin;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::Statement;
use shoal_storage::Transaction;
use std::sync::Arc;

use super::{ResultColumn, Session, StatementResult};
use crate::error::{code, SqlError, SqlResult};
use crate::fastpath;
use crate::kept_plan::generated::StatementParams;
use crate::kept_plan::KeptPlan;
use crate::routines::plpgsql::kept::{General, GeneralForm, KeptQueries, KeptQuery};

/// How deep routines may call routines (and statements run statements) before a call fails
/// with 54001, as PostgreSQL's `max_stack_depth` stops runaway recursion.
pub const ROUTINE_DEPTH_MAX: u32 = 1000;

/// How much of the thread's stack the statements of routines may use, from where the client's
/// statement started, before a call fails with 54001: PostgreSQL's `check_stack_depth`. Each
/// level of nesting keeps its poll frames on the stack (far more in a debug build than in a
/// release one); the connection threads' stacks are 64 MiB (see `shoal-server`), and what is
/// left above this limit is for the innermost statement's planning.
pub const ROUTINE_STACK_BYTES_MAX: usize = 24 << 20;

/// An address on the current thread's stack (that of a local), for measuring its depth.
#[inline(never)]
pub(crate) fn stack_address() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// What an embedded statement gave: its rows (for queries and RETURNING) and how many rows it
/// read or wrote.
pub struct EmbeddedResult {
    pub columns: Vec<ResultColumn>,
    pub batches: Vec<RecordBatch>,
    /// Rows returned (a query) or written (INSERT/UPDATE/DELETE without RETURNING).
    pub row_count: u64,
    /// The command tag's name, e.g. "SELECT", "INSERT".
    pub tag: String,
}

pub type BoxedStatement<'a> = Pin<Box<dyn Future<Output = SqlResult<EmbeddedResult>> + Send + 'a>>;

impl Session {
    /// Runs `stmt` for a routine inside `txn` (see the module comment). Boxed: a routine's
    /// statement may call a routine in turn.
    pub(crate) fn run_embedded<'a>(
        &'a mut self,
        txn: &'a mut Transaction,
        stmt: Statement,
    ) -> BoxedStatement<'a> {
        self.run_embedded_with(txn, stmt, None)
    }

    /// `run_embedded` of a statement whose placeholders take `params`' values (the prepared
    /// statement's way of running with its placeholders in place, see `kept_plan::generated`).
    fn run_embedded_with<'a>(
        &'a mut self,
        txn: &'a mut Transaction,
        stmt: Statement,
        params: Option<StatementParams>,
    ) -> BoxedStatement<'a> {
        Box::pin(async move {
            // The stack grows down: what is used is the distance below the statement's start.
            let used = self.stack_base.saturating_sub(stack_address());
            if self.routine_depth >= ROUTINE_DEPTH_MAX || used > ROUTINE_STACK_BYTES_MAX {
                return Err(stack_depth_exceeded());
            }
            self.check_writable(&stmt)?;
            self.check_privileges(&stmt)?;
            if let Statement::StartTransaction { .. }
            | Statement::Commit { .. }
            | Statement::Rollback { .. }
            | Statement::Savepoint { .. }
            | Statement::ReleaseSavepoint { .. } = stmt
            {
                return Err(SqlError::new(
                    code::FEATURE_NOT_SUPPORTED,
                    "transaction control statements are not supported in functions; use COMMIT or ROLLBACK in a procedure",
                ));
            }
            // The caller's statement may be part-way through (a trigger's statement inside an
            // INSERT): its snapshot is put back when this one is done.
            let outer_snapshot = self.scope.snapshot.lock().clone();
            // A prepared statement's bound values (`statement_params`) are its own, not those
            // of the statements its triggers and functions run.
            let with_params = params.is_some();
            let outer_params = std::mem::replace(&mut self.statement_params, params);
            self.routine_depth += 1;
            let ddl = crate::ddl::changes_catalog(&stmt);
            let mark = ddl.then(|| crate::ddl::undo::DdlMark::capture(&self.engine));
            // The fast path knows tables only, not a trigger's transition tables.
            let plain = !with_params && self.scope.transition_tables.lock().is_empty();
            let fast = match plain {
                true => fastpath::plan(self, &stmt, 0),
                false => None,
            };
            let result = match fast {
                Some(plan) => fastpath::execute(self, txn, &plan, &[]).await,
                None => self.run_in_transaction(txn, stmt).await,
            };
            if let Some(changes) = mark.and_then(|m| m.finish(&self.engine)) {
                self.ddl_undo.push(changes);
            }
            let result = match result {
                Ok(r) => collect(r).await,
                Err(e) => Err(e),
            };
            self.routine_depth -= 1;
            self.statement_params = outer_params;
            *self.scope.snapshot.lock() = outer_snapshot;
            result
        })
    }
}

impl Session {
    /// Runs a kept point statement of a routine (see `routines::plpgsql::kept`) with its
    /// parameters bound, inside `txn`: what `run_embedded` does for it without parsing or
    /// planning. The caller has checked the plan may write in this transaction.
    pub(crate) async fn run_embedded_plan(
        &mut self,
        txn: &mut Transaction,
        plan: &fastpath::FastPlan,
        params: &[shoal_storage::types::Value],
    ) -> SqlResult<EmbeddedResult> {
        let outer_snapshot = self.scope.snapshot.lock().clone();
        let result = match fastpath::execute_values(self, txn, plan, params).await {
            Ok(r) => collect(r).await,
            Err(e) => Err(e),
        };
        *self.scope.snapshot.lock() = outer_snapshot;
        result
    }
}

impl Session {
    /// Runs a routine's statement kept for DataFusion to plan (see `routines::plpgsql::kept`)
    /// with `values` for its parameters, inside `txn`; None when it must run the ordinary way
    /// this time (its plan cannot be made with parameters, or the values do not convert to
    /// the types it was planned with).
    /// Boxed, made outside the caller's poll: planning is deep, and a recursive routine's
    /// statements nest here.
    pub(crate) fn run_embedded_general<'a>(
        &'a mut self,
        txn: &'a mut Transaction,
        general: &'a General,
        values: Vec<ScalarValue>,
    ) -> Pin<Box<dyn Future<Output = SqlResult<Option<EmbeddedResult>>> + Send + 'a>> {
        Box::pin(self.run_general(txn, general, values))
    }

    async fn run_general(
        &mut self,
        txn: &mut Transaction,
        general: &General,
        values: Vec<ScalarValue>,
    ) -> SqlResult<Option<EmbeddedResult>> {
        match &general.form {
            GeneralForm::Targets(plans) => {
                let params = StatementParams {
                    types: general.arrow_types.clone(),
                    values,
                    plans: plans.clone(),
                };
                self.run_embedded_with(txn, general.stmt.clone(), Some(params))
                    .await
                    .map(Some)
            }
            GeneralForm::Query(kept) => {
                let outer_snapshot = self.scope.snapshot.lock().clone();
                let snapshot = self.engine.db.statement_snapshot(txn);
                *self.scope.snapshot.lock() = snapshot;
                let result = self.run_kept_query(general, kept, values).await;
                *self.scope.snapshot.lock() = outer_snapshot;
                match result? {
                    Some(r) => collect(r).await.map(Some),
                    None => Ok(None),
                }
            }
        }
    }

    /// A kept query's rows, on its kept plan (made now at its first run here).
    async fn run_kept_query(
        &self,
        general: &General,
        kept: &KeptQueries,
        values: Vec<ScalarValue>,
    ) -> SqlResult<Option<StatementResult>> {
        let (stmt, key) = kept.statement(&general.stmt, &values);
        let (physical, inline, task_ctx, columns) = match kept.get(&key) {
            None | Some(KeptQuery::Never) => return Ok(None),
            // A run of the same statement inside this one (a function it calls) plans anew:
            // the plan's parameter values are this run's.
            Some(KeptQuery::Plan { plan, .. }) if Arc::strong_count(&plan) > 2 => return Ok(None),
            Some(KeptQuery::Plan { plan, columns }) => {
                let Some(values) = crate::kept_plan::convert_values(plan.param_types(), &values)
                else {
                    return Ok(None);
                };
                let physical = plan.instantiate(values)?;
                let inline = plan.runs_inline(&physical);
                let batches =
                    crate::query::collect_physical(physical, plan.task_ctx(), inline).await?;
                return Ok(Some(StatementResult::Rows {
                    columns,
                    batches,
                    tag: "SELECT",
                }));
            }
            Some(KeptQuery::Untried) => {
                // Planned with the parameters in place; a statement that does not plan so
                // (a parameter whose type nothing decides) runs the ordinary way from now on.
                let Ok(logical) =
                    crate::query::plan_statement(&self.state, &self.scope, stmt.into_owned()).await
                else {
                    kept.set(&key, KeptQuery::Never);
                    return Ok(None);
                };
                let Some(types) =
                    crate::kept_plan::keepable_with_unused(&logical, &general.arrow_types)
                else {
                    kept.set(&key, KeptQuery::Never);
                    return Ok(None);
                };
                let Some(values) = crate::kept_plan::convert_values(&types, &values) else {
                    return Ok(None);
                };
                let columns = super::columns_of_plan(&logical);
                let built = KeptPlan::build(&self.state, &logical, types, values).await?;
                let state = match built.kept {
                    Some(plan) => KeptQuery::Plan {
                        plan,
                        columns: columns.clone(),
                    },
                    None => KeptQuery::Never,
                };
                kept.set(&key, state);
                (built.physical, built.inline, built.task_ctx, columns)
            }
        };
        let batches = crate::query::collect_physical(physical, task_ctx, inline).await?;
        Ok(Some(StatementResult::Rows {
            columns,
            batches,
            tag: "SELECT",
        }))
    }
}

/// A result read to its end.
async fn collect(result: StatementResult) -> SqlResult<EmbeddedResult> {
    Ok(match result.into_batches()? {
        StatementResult::Rows {
            columns,
            batches,
            tag,
        } => rows_result(columns, batches, tag),
        StatementResult::RowStream { columns, rows, tag } => {
            rows_result(columns, rows.collect().await?, tag)
        }
        StatementResult::Command { tag, rows, .. } => EmbeddedResult {
            columns: Vec::new(),
            batches: Vec::new(),
            row_count: rows.unwrap_or(0) as u64,
            tag,
        },
        StatementResult::CopyIn(_)
        | StatementResult::CopyOut { .. }
        | StatementResult::CopyOutBinary { .. } => {
            return Err(SqlError::unsupported(
                "COPY to or from the client inside a function",
            ))
        }
        StatementResult::TransactionStart(tag) | StatementResult::TransactionEnd(tag) => {
            EmbeddedResult {
                columns: Vec::new(),
                batches: Vec::new(),
                row_count: 0,
                tag,
            }
        }
        StatementResult::Empty | StatementResult::PointRows(_) => EmbeddedResult {
            columns: Vec::new(),
            batches: Vec::new(),
            row_count: 0,
            tag: String::new(),
        },
    })
}

fn rows_result(columns: Vec<ResultColumn>, batches: Vec<RecordBatch>, tag: &str) -> EmbeddedResult {
    let row_count = batches.iter().map(|b| b.num_rows() as u64).sum();
    EmbeddedResult {
        columns,
        batches,
        row_count,
        tag: tag.to_string(),
    }
}

/// PostgreSQL's error when recursion goes too deep.
pub fn stack_depth_exceeded() -> SqlError {
    SqlError::new(code::STATEMENT_TOO_COMPLEX, "stack depth limit exceeded").with_hint(
        "Increase the configuration parameter \"max_stack_depth\" (currently 2048kB), after ensuring the platform's stack depth limit is adequate.",
    )
}

/// Subtransactions of PL/pgSQL exception blocks, and transaction control in procedures.
impl Session {
    /// Starts a subtransaction: a savepoint of the storage transaction and of the DDL undo
    /// log, as SAVEPOINT makes, under a name no client can write.
    pub(crate) fn routine_savepoint(&mut self, txn: &mut Transaction, name: &str) {
        self.engine.db.savepoint(txn, name);
        self.ddl_undo.savepoint(name);
        self.cursor_marks.savepoint(name);
    }

    /// Ends a subtransaction, keeping its changes.
    pub(crate) fn routine_release(&mut self, txn: &mut Transaction, name: &str) -> SqlResult<()> {
        self.engine.db.release_savepoint(txn, name)?;
        self.ddl_undo.release(name);
        self.cursor_marks.release(name);
        Ok(())
    }

    /// Undoes a subtransaction's changes (its savepoint stays until released).
    pub(crate) fn routine_rollback_to(
        &mut self,
        txn: &mut Transaction,
        name: &str,
    ) -> SqlResult<()> {
        self.engine.db.rollback_to_savepoint(txn, name)?;
        self.rollback_cursors_to(name);
        let statements = self.ddl_undo.take_after(name);
        crate::ddl::undo::undo(&self.engine, statements)
    }

    /// COMMIT or ROLLBACK inside a procedure: ends the statement's transaction and goes on in
    /// a new one (with the same characteristics for AND CHAIN), which the CALL's end commits.
    pub(crate) async fn routine_end_transaction(
        &mut self,
        txn: &mut Transaction,
        commit: bool,
        chain: bool,
    ) -> SqlResult<()> {
        let isolation = match chain {
            true => txn.isolation(),
            false => self.default_isolation(),
        };
        let next = self.engine.db.begin(isolation);
        let done = std::mem::replace(txn, next);
        let committed = match commit {
            true => self.commit_txn(done).await,
            false => {
                self.rollback_txn(done).await;
                Ok(())
            }
        };
        self.undo_ddl(commit && committed.is_ok());
        self.txn_started_at = chrono::Utc::now();
        self.backend.set_txn_id(txn.id());
        committed
    }
}

impl Session {
    /// Sets (or, with None, resets) a setting for a routine's `SET` clause, where the plans of
    /// its statements read it.
    pub(crate) fn set_routine_setting(&mut self, name: &str, value: Option<&str>) -> SqlResult<()> {
        match value {
            Some(v) => self.settings.set(name, v, false)?,
            None => self.settings.reset(name)?,
        };
        self.sync_scope_settings();
        Ok(())
    }
}
