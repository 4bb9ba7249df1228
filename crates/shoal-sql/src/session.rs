//! A session: one client connection's state — its transaction (none, an explicit block, or a
//! failed block waiting for ROLLBACK), its settings, and its DataFusion planning state. Every
//! statement enters here; transaction control and settings are handled in place, everything
//! else is routed to DDL, DML, COPY or the general query path inside the right transaction.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::execution::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::ast::{self, Statement};
use shoal_storage::{IsolationLevel, Transaction};

use crate::copy::CopyRequest;
use crate::engine::Engine;
use crate::error::{code, SqlError, SqlResult};
use crate::fastpath::{self, FastPlan};
use crate::interrupt::{interruptible, CancelSignal};
use crate::query::scope::PlanScope;
use crate::settings::{serializable_unsupported, Settings};
use crate::shape_cache::{self, ShapeCache};
use crate::types::pg_oid_for_arrow;
use crate::{ddl, dml, params, query};

/// A column of a result set as the client sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultColumn {
    /// Shared: a fast-path result hands out the same names on every execution.
    pub name: Arc<str>,
    pub type_oid: u32,
    pub typmod: i32,
}

pub fn columns_of_schema(schema: &SchemaRef) -> Vec<ResultColumn> {
    schema
        .fields()
        .iter()
        .map(|f| {
            let type_oid = f
                .metadata()
                .get(crate::types::PG_TYPE_METADATA_KEY)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| pg_oid_for_arrow(f.data_type()));
            ResultColumn {
                name: crate::query::column_names::output_name(f.name()).into(),
                type_oid,
                typmod: -1,
            }
        })
        .collect()
}

/// What one statement produced.
#[derive(Debug)]
pub enum StatementResult {
    Rows {
        columns: Vec<ResultColumn>,
        batches: Vec<RecordBatch>,
        tag: &'static str,
    },
    /// A command tag such as "CREATE TABLE"; `rows` adds the count ("INSERT 0 5" has oid 0).
    Command {
        tag: String,
        rows: Option<usize>,
        oid: Option<u32>,
    },
    TransactionStart(String),
    TransactionEnd(String),
    CopyIn(CopyRequest),
    CopyOut {
        columns: usize,
        data: Vec<u8>,
        rows: usize,
        csv: bool,
    },
    Empty,
}

impl StatementResult {
    pub fn command(tag: &str) -> Self {
        StatementResult::Command {
            tag: tag.to_string(),
            rows: None,
            oid: None,
        }
    }
}

enum TxnState {
    Idle,
    /// Inside BEGIN ... COMMIT.
    Block(Transaction),
    /// A statement in the block failed: only ROLLBACK (or ROLLBACK TO SAVEPOINT) is accepted.
    Failed(Transaction),
}

/// A statement parsed (and, for queries, planned) once by the extended protocol's Parse.
#[derive(Debug)]
pub struct Prepared {
    pub sql: String,
    pub stmt: Option<Statement>,
    /// Parameter types, as declared by the client or inferred from the statement.
    pub param_types: Vec<ArrowType>,
    pub param_oids: Vec<u32>,
    /// Result columns; None when the statement returns no rows.
    pub columns: Option<Vec<ResultColumn>>,
    plan: parking_lot::Mutex<Option<(LogicalPlan, u64)>>,
    /// The fast-path plan and the catalog version it was resolved against.
    fast: parking_lot::Mutex<Option<(Arc<FastPlan>, u64)>>,
}

pub struct Session {
    pub engine: Arc<Engine>,
    pub scope: Arc<PlanScope>,
    state: SessionState,
    txn: TxnState,
    /// When the current transaction (block or single statement) started. PostgreSQL's now()
    /// and CURRENT_TIMESTAMP return this time, so they agree across a whole transaction.
    txn_started_at: chrono::DateTime<chrono::Utc>,
    pub settings: Settings,
    /// The settings generation last copied to `scope` (None: never).
    scope_settings_generation: Option<u64>,
    /// Settings changed by the last statements that the client must hear about.
    pub reported_changes: Vec<(String, String)>,
    /// Fast plans of simple-protocol statement shapes (see `shape_cache`).
    shapes: ShapeCache,
    /// Whether the running statement belongs to a transaction block (rather than its own
    /// implicit transaction): `self.txn` is taken out while a statement runs.
    statement_in_block: bool,
    /// The client's CancelRequest for the query running now, if the protocol layer gave one.
    cancel: Option<CancelSignal>,
}

pub fn parse_sql(sql: &str) -> SqlResult<Vec<Statement>> {
    crate::parse::parse_statements(sql).or_else(|e| {
        // The parser lacks some of PostgreSQL's locking clauses; retry with them rewritten.
        if let Some(rewritten) = dml::rewrite_locking_syntax(sql) {
            if let Ok(statements) = crate::parse::parse_statements(&rewritten) {
                return Ok(statements);
            }
        }
        if let Some(word) = crate::parse::reserved_word_as_name(sql) {
            return Err(SqlError::syntax(format!(
                "syntax error at or near \"{word}\""
            )));
        }
        let msg = e.to_string();
        let msg = msg.trim_start_matches("sql parser error: ");
        Err(SqlError::syntax(pg_syntax_message(msg)))
    })
}

/// PostgreSQL names the token where parsing failed ("syntax error at or near \"FROM\"", or
/// "at end of input"); sqlparser says "Expected: ..., found: FROM at Line: 1, Column: 17".
fn pg_syntax_message(msg: &str) -> String {
    let Some(found) = msg.split("found: ").nth(1) else {
        return format!("syntax error: {msg}");
    };
    let token = found.split(" at Line: ").next().unwrap_or(found).trim();
    if token == "EOF" {
        "syntax error at end of input".to_string()
    } else {
        format!("syntax error at or near \"{token}\"")
    }
}

impl Session {
    pub fn new(engine: Arc<Engine>) -> Session {
        let pid = engine.allocate_backend_pid();
        let scope = Arc::new(PlanScope::new(engine.clone(), pid));
        let state = query::new_session_state(scope.clone());
        let mut settings = Settings::default();
        if !engine.synchronous_commit_default() {
            settings
                .set("synchronous_commit", "off", false)
                .expect("synchronous_commit accepts off");
        }
        *scope.settings.lock() = settings.all().clone();
        *scope.search_path.lock() = settings.search_path();
        let scope_settings_generation = Some(settings.generation());
        Session {
            engine,
            scope,
            state,
            txn: TxnState::Idle,
            txn_started_at: chrono::Utc::now(),
            settings,
            scope_settings_generation,
            reported_changes: Vec::new(),
            shapes: ShapeCache::default(),
            statement_in_block: false,
            cancel: None,
        }
    }

    pub fn backend_pid(&self) -> i32 {
        self.scope.backend_pid
    }

    /// Installs the signal a CancelRequest fires for the query about to run (None: the query
    /// cannot be canceled); see `interrupt`.
    pub fn set_cancel_signal(&mut self, signal: Option<CancelSignal>) {
        self.cancel = signal;
    }

    /// 'I' idle, 'T' in a transaction block, 'E' in a failed block (ReadyForQuery status).
    pub fn transaction_status(&self) -> u8 {
        match self.txn {
            TxnState::Idle => b'I',
            TxnState::Block(_) => b'T',
            TxnState::Failed(_) => b'E',
        }
    }

    /// Runs every statement of a simple-protocol query string; stops at the first error.
    pub async fn execute_sql(&mut self, sql: &str) -> Vec<SqlResult<StatementResult>> {
        // sqlparser does not know PostgreSQL's CHECKPOINT: such strings run piece by piece.
        // The substring test keeps the tokenizer off every other query.
        if sql.to_ascii_lowercase().contains("checkpoint") {
            if let Some(pieces) = crate::parse::split_at_checkpoints(sql) {
                return Box::pin(self.execute_pieces(pieces)).await;
            }
        }
        if let Some(result) = self.execute_cached_shape(sql).await {
            return vec![result];
        }
        let statements = match parse_sql(sql) {
            Ok(s) => s,
            Err(e) => {
                self.fail_block();
                return vec![Err(e)];
            }
        };
        let mut results = Vec::with_capacity(statements.len());
        for stmt in statements {
            // Boxed: the general path's future (DataFusion planning included) is many
            // kilobytes, and every caller's future would otherwise embed it and be copied
            // whole into each `async_trait` box, fast path or not.
            let r = match self.execute_transaction_control(&stmt).await {
                Some(r) => r,
                None => Box::pin(self.execute_statement(stmt)).await,
            };
            let failed = r.is_err();
            results.push(r);
            if failed {
                break;
            }
        }
        results
    }

    /// A query string with CHECKPOINT among its statements; stops at the first error, as
    /// `execute_sql` does.
    async fn execute_pieces(
        &mut self,
        pieces: Vec<crate::parse::Piece>,
    ) -> Vec<SqlResult<StatementResult>> {
        let mut results = Vec::new();
        for piece in pieces {
            let piece_results = match piece {
                crate::parse::Piece::Checkpoint => vec![self.checkpoint().await],
                crate::parse::Piece::Sql(text) => self.execute_sql(&text).await,
            };
            let failed = piece_results.iter().any(|r| r.is_err());
            results.extend(piece_results);
            if failed {
                break;
            }
        }
        results
    }

    /// The simple-protocol statement cache (see `shape_cache`): runs `sql` on the cached fast
    /// plan of its shape, or returns None and leaves it to the ordinary path.
    async fn execute_cached_shape(&mut self, sql: &str) -> Option<SqlResult<StatementResult>> {
        if matches!(self.txn, TxnState::Failed(_)) {
            return None;
        }
        let (shape, literals) = shape_cache::auto_parameterize(sql)?;
        let catalog_version = self.engine.catalog.read().version;
        let generation = self.settings.generation();
        let plan = match self.shapes.get(&shape, catalog_version, generation) {
            Some(plan) => plan?,
            None => {
                let plan = match parse_sql(&shape) {
                    Ok(mut statements) if statements.len() == 1 => {
                        let stmt = statements.pop().expect("one statement");
                        fastpath::plan(self, &stmt, literals.len()).map(Arc::new)
                    }
                    _ => None,
                };
                self.shapes
                    .insert(shape, catalog_version, generation, plan.clone());
                plan?
            }
        };
        if plan.columns().is_none() && self.read_only() {
            return None; // the ordinary path reports the error
        }
        let values = shape_cache::bind_literals(&plan, &literals)?;
        let (mut txn, implicit) = self.statement_transaction();
        let mut cancel = self.cancel.take();
        let timeout_ms = self.settings.statement_timeout_ms();
        let work = fastpath::execute_values(self, &mut txn, &plan, &values);
        let result = interruptible(timeout_ms, &mut cancel, work).await;
        self.cancel = cancel;
        Some(self.finish_statement(txn, implicit, result).await)
    }

    #[cfg(test)]
    pub(crate) fn shape_cache(&self) -> &ShapeCache {
        &self.shapes
    }

    /// CHECKPOINT: writes a checkpoint now, on a blocking thread.
    async fn checkpoint(&mut self) -> SqlResult<StatementResult> {
        if matches!(self.txn, TxnState::Failed(_)) {
            return Err(SqlError::in_failed_transaction());
        }
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || engine.checkpoint())
            .await
            .map_err(|e| SqlError::new(code::INTERNAL_ERROR, format!("checkpoint: {e}")))??;
        Ok(StatementResult::command("CHECKPOINT"))
    }

    fn fail_block(&mut self) {
        if let TxnState::Block(t) = std::mem::replace(&mut self.txn, TxnState::Idle) {
            self.txn = TxnState::Failed(t);
        }
    }

    /// BEGIN, COMMIT, ROLLBACK and savepoints, which need no planning; None for any other
    /// statement. Callers try this before boxing `execute_statement`, whose future is large
    /// enough that building it costs more than these statements themselves.
    async fn execute_transaction_control(
        &mut self,
        stmt: &Statement,
    ) -> Option<SqlResult<StatementResult>> {
        if matches!(stmt, Statement::Commit { .. }) {
            return Some(self.commit_block().await);
        }
        self.transaction_control(stmt)
    }

    /// Runs one statement with autocommit or inside the current block.
    pub async fn execute_statement(&mut self, stmt: Statement) -> SqlResult<StatementResult> {
        if let Some(r) = self.execute_transaction_control(&stmt).await {
            return r;
        }
        if matches!(self.txn, TxnState::Failed(_)) {
            return Err(SqlError::in_failed_transaction());
        }
        if let Some(r) = self.session_command(&stmt) {
            if r.is_err() {
                self.fail_block();
            }
            return r;
        }
        if let Err(e) = self.check_writable(&stmt) {
            self.fail_block();
            return Err(e);
        }
        let (mut txn, implicit) = self.statement_transaction();
        let mut cancel = self.cancel.take();
        let timeout_ms = self.settings.statement_timeout_ms();
        let work = async {
            match fastpath::plan(self, &stmt, 0) {
                Some(plan) => fastpath::execute(self, &mut txn, &plan, &[]).await,
                None => self.run_in_transaction(&mut txn, stmt).await,
            }
        };
        let result = interruptible(timeout_ms, &mut cancel, work).await;
        self.cancel = cancel;
        self.finish_statement(txn, implicit, result).await
    }

    /// A READ ONLY transaction (or, outside a block, default_transaction_read_only) refuses
    /// statements that write.
    fn check_writable(&self, stmt: &Statement) -> SqlResult<()> {
        if !self.read_only() {
            return Ok(());
        }
        match write_command_name(stmt) {
            Some(command) => Err(SqlError::new(
                code::READ_ONLY_SQL_TRANSACTION,
                format!("cannot execute {command} in a read-only transaction"),
            )),
            None => Ok(()),
        }
    }

    /// Whether the running statement is part of a transaction block.
    pub(crate) fn statement_in_block(&self) -> bool {
        self.statement_in_block
    }

    fn read_only(&self) -> bool {
        let setting = match self.txn {
            TxnState::Idle => "default_transaction_read_only",
            _ => "transaction_read_only",
        };
        self.settings.get(setting) == Some("on")
    }

    /// The transaction a statement runs in: the open block's, or a new implicit one (true).
    /// Also fixes the time now() returns for the statement (see `mark_statement_start`).
    fn statement_transaction(&mut self) -> (Transaction, bool) {
        let result = match std::mem::replace(&mut self.txn, TxnState::Idle) {
            TxnState::Block(t) => (t, false),
            _ => {
                self.txn_started_at = chrono::Utc::now();
                (self.engine.db.begin(self.default_isolation()), true)
            }
        };
        self.statement_in_block = !result.1;
        self.mark_statement_start();
        result
    }

    /// DataFusion's optimizer replaces now() with the execution start time it finds in the
    /// session state, and now() fails if none was set. Shoal sets it to the transaction's start
    /// time before each statement, which also gives PostgreSQL's meaning of now().
    fn mark_statement_start(&mut self) {
        self.state.mark_start_execution();
        self.state.execution_props_mut().query_execution_start_time = Some(self.txn_started_at);
    }

    /// The time now() returns in the current statement, in microseconds since the epoch.
    pub fn now_micros(&self) -> i64 {
        self.txn_started_at.timestamp_micros()
    }

    /// The prepared statement's fast plan, re-resolved if the catalog changed since.
    fn fast_plan_of(&self, prepared: &Prepared, stmt: &Statement) -> Option<Arc<FastPlan>> {
        let version = self.engine.catalog.read().version;
        let mut fast = prepared.fast.lock();
        match fast.as_ref() {
            Some((plan, v)) if *v == version => return Some(plan.clone()),
            None => return None,
            Some(_) => {}
        }
        // The catalog changed: resolve again; the parameter types must still match.
        let plan = fastpath::plan(self, stmt, prepared.param_types.len())
            .filter(|p| {
                (0..prepared.param_types.len()).all(|i| {
                    p.param_type(i).map(crate::types::arrow_type).as_ref()
                        == Some(&prepared.param_types[i])
                })
            })
            .map(Arc::new);
        *fast = plan.clone().map(|p| (p, version));
        plan
    }

    async fn finish_statement(
        &mut self,
        txn: Transaction,
        implicit: bool,
        result: SqlResult<StatementResult>,
    ) -> SqlResult<StatementResult> {
        *self.scope.dml_capture.lock() = None;
        self.apply_set_config_calls(!implicit, result.is_ok());
        match (implicit, result) {
            (true, Ok(StatementResult::CopyIn(req))) => {
                // COPY FROM STDIN keeps its transaction open until the data has arrived.
                self.txn = TxnState::Idle;
                Ok(StatementResult::CopyIn(req.with_transaction(txn, true)))
            }
            (false, Ok(StatementResult::CopyIn(req))) => {
                Ok(StatementResult::CopyIn(req.with_transaction(txn, false)))
            }
            (true, Ok(r)) => {
                let committed = self.commit_txn(txn).await;
                self.end_transaction_settings(committed.is_ok());
                committed.map(|_| r)
            }
            (true, Err(e)) => {
                self.engine.db.rollback(txn);
                self.end_transaction_settings(false);
                Err(e)
            }
            (false, Ok(r)) => {
                self.txn = TxnState::Block(txn);
                Ok(r)
            }
            (false, Err(e)) => {
                self.txn = TxnState::Failed(txn);
                Err(e)
            }
        }
    }

    /// Keeps the statement's set_config() changes if it succeeded: like SET (or SET LOCAL when
    /// is_local) inside a block; outside one, a local change ends with the statement.
    fn apply_set_config_calls(&mut self, in_block: bool, succeeded: bool) {
        let calls = std::mem::take(&mut *self.scope.set_config_calls.lock());
        if calls.is_empty() {
            return;
        }
        for (name, value, local) in calls.into_iter().filter(|_| succeeded) {
            let set = match (in_block, local) {
                (true, true) => self.settings.set(&name, &value, true),
                (true, false) => self.settings.set_in_block(&name, &value),
                (false, false) => self.settings.set(&name, &value, false),
                (false, true) => continue,
            };
            if set.is_ok() {
                self.setting_changed(&name);
            }
        }
        // set_config wrote into the scope's copy directly: copy the session's back over it.
        self.scope_settings_generation = None;
        self.sync_scope_settings();
    }

    /// Completes a COPY FROM STDIN that `execute_statement` started.
    pub async fn finish_copy(
        &mut self,
        txn: Transaction,
        implicit: bool,
        result: SqlResult<usize>,
    ) -> SqlResult<usize> {
        let r = result.map(|rows| StatementResult::Command {
            tag: "COPY".into(),
            rows: Some(rows),
            oid: None,
        });
        match self.finish_statement(txn, implicit, r).await? {
            StatementResult::Command { rows, .. } => Ok(rows.unwrap_or(0)),
            _ => Ok(0),
        }
    }

    fn default_isolation(&self) -> IsolationLevel {
        match self.settings.get("default_transaction_isolation") {
            Some("repeatable read") => IsolationLevel::RepeatableRead,
            _ => IsolationLevel::ReadCommitted,
        }
    }

    fn end_transaction_settings(&mut self, committed: bool) {
        for name in self.settings.end_transaction(committed) {
            self.setting_changed(&name);
        }
        self.reset_to_default("transaction_isolation", "read committed");
        self.reset_to_default("transaction_read_only", "off");
        self.sync_scope_settings();
    }

    /// Sets `name` back to `default_<name>` (or `fallback`) if it differs. This runs after
    /// every autocommit statement, so the usual case, nothing to change, must not allocate.
    fn reset_to_default(&mut self, name: &str, fallback: &str) {
        let default_name = match name {
            "transaction_isolation" => "default_transaction_isolation",
            "transaction_read_only" => "default_transaction_read_only",
            _ => unreachable!("no default_ setting for {name}"),
        };
        let wanted = self.settings.get(default_name).unwrap_or(fallback);
        if self.settings.get(name) != Some(wanted) {
            let wanted = wanted.to_string();
            self.settings.set(name, &wanted, false).ok();
        }
    }

    /// Publishes the settings to the plan scope (which DataFusion's catalog functions read),
    /// if they changed since the last time.
    fn sync_scope_settings(&mut self) {
        let generation = self.settings.generation();
        if self.scope_settings_generation == Some(generation) {
            return;
        }
        *self.scope.settings.lock() = self.settings.all().clone();
        *self.scope.search_path.lock() = self.settings.search_path();
        self.scope.time_zone.set(self.settings.time_zone().clone());
        self.scope_settings_generation = Some(generation);
    }

    fn setting_changed(&mut self, name: &str) {
        if Settings::is_reported(name) {
            let value = self.settings.get(name).unwrap_or("").to_string();
            self.reported_changes
                .push((crate::settings::reported_name(name).to_string(), value));
        }
    }

    /// BEGIN, COMMIT, ROLLBACK and savepoints. None for every other statement.
    fn transaction_control(&mut self, stmt: &Statement) -> Option<SqlResult<StatementResult>> {
        Some(match stmt {
            Statement::StartTransaction { modes, begin, .. } => {
                // The tag repeats the command's spelling: BEGIN or START TRANSACTION.
                let tag = if *begin { "BEGIN" } else { "START TRANSACTION" };
                self.begin_block(modes, tag)
            }
            // COMMIT waits for the log: see execute_statement.
            Statement::Commit { .. } => return None,
            Statement::Rollback {
                savepoint: None, ..
            } => Ok(self.rollback_block()),
            Statement::Rollback {
                savepoint: Some(name),
                ..
            } => self.rollback_to(&name.value),
            Statement::Savepoint { name } => self.savepoint(&name.value),
            Statement::ReleaseSavepoint { name } => self.release(&name.value),
            _ => return None,
        })
    }

    fn begin_block(
        &mut self,
        modes: &[ast::TransactionMode],
        tag: &str,
    ) -> SqlResult<StatementResult> {
        match self.txn {
            TxnState::Idle => {}
            TxnState::Block(_) => {
                // PostgreSQL warns and carries on.
                return Ok(StatementResult::TransactionStart(tag.into()));
            }
            TxnState::Failed(_) => return Err(SqlError::in_failed_transaction()),
        }
        let mut isolation = self.default_isolation();
        let mut read_only = self.settings.get("default_transaction_read_only") == Some("on");
        for m in modes {
            match m {
                ast::TransactionMode::IsolationLevel(level) => isolation = isolation_of(level)?,
                ast::TransactionMode::AccessMode(mode) => {
                    read_only = matches!(mode, ast::TransactionAccessMode::ReadOnly)
                }
            }
        }
        let access = if read_only { "on" } else { "off" };
        self.settings
            .set("transaction_read_only", access, false)
            .ok();
        self.settings
            .set(
                "transaction_isolation",
                if isolation == IsolationLevel::RepeatableRead {
                    "repeatable read"
                } else {
                    "read committed"
                },
                false,
            )
            .ok();
        self.sync_scope_settings();
        self.txn_started_at = chrono::Utc::now();
        self.txn = TxnState::Block(self.engine.db.begin(isolation));
        Ok(StatementResult::TransactionStart(tag.into()))
    }

    /// COMMIT: a failed block rolls back instead, as in PostgreSQL; a commit the log refuses
    /// (disk full, broken log) is an error, and its changes are gone.
    async fn commit_block(&mut self) -> SqlResult<StatementResult> {
        let committed = match std::mem::replace(&mut self.txn, TxnState::Idle) {
            TxnState::Idle => Ok(true),
            TxnState::Block(t) => self.commit_txn(t).await.map(|_| true),
            TxnState::Failed(t) => {
                self.engine.db.rollback(t);
                Ok(false)
            }
        };
        self.end_transaction_settings(committed == Ok(true));
        let tag = if committed.clone()? {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        Ok(StatementResult::TransactionEnd(tag.into()))
    }

    /// Commits `txn`, first waiting until its redo record (and any catalog change logged
    /// before it) is flushed, unless synchronous_commit is off. If the log cannot take it, the
    /// transaction's changes are undone and the error says why.
    async fn commit_txn(&mut self, txn: Transaction) -> SqlResult<()> {
        let prepared = self.engine.db.prepare_commit(txn)?;
        if let Some(d) = &self.engine.durability {
            let wait = !matches!(
                self.settings.get("synchronous_commit"),
                Some("off" | "false" | "no" | "0")
            );
            if wait {
                let lsn = prepared
                    .durable_at()
                    .unwrap_or(0)
                    .max(self.engine.catalog.last_logged_lsn());
                if let Err(e) = d.wait_flushed(lsn).await {
                    prepared.abort();
                    return Err(e);
                }
            }
        }
        prepared.finish();
        Ok(())
    }

    fn rollback_block(&mut self) -> StatementResult {
        match std::mem::replace(&mut self.txn, TxnState::Idle) {
            TxnState::Block(t) | TxnState::Failed(t) => self.engine.db.rollback(t),
            TxnState::Idle => {}
        }
        self.end_transaction_settings(false);
        StatementResult::TransactionEnd("ROLLBACK".into())
    }

    fn savepoint(&mut self, name: &str) -> SqlResult<StatementResult> {
        match &mut self.txn {
            TxnState::Block(t) => {
                self.engine.db.savepoint(t, name);
                Ok(StatementResult::command("SAVEPOINT"))
            }
            TxnState::Failed(_) => Err(SqlError::in_failed_transaction()),
            TxnState::Idle => Err(SqlError::new(
                code::NO_ACTIVE_SQL_TRANSACTION,
                "SAVEPOINT can only be used in transaction blocks",
            )),
        }
    }

    fn release(&mut self, name: &str) -> SqlResult<StatementResult> {
        match &mut self.txn {
            TxnState::Block(t) => {
                let r = self.engine.db.release_savepoint(t, name);
                if let Err(e) = r {
                    self.fail_block();
                    return Err(e.into());
                }
                Ok(StatementResult::command("RELEASE"))
            }
            TxnState::Failed(_) => Err(SqlError::in_failed_transaction()),
            TxnState::Idle => Err(SqlError::new(
                code::NO_ACTIVE_SQL_TRANSACTION,
                "RELEASE SAVEPOINT can only be used in transaction blocks",
            )),
        }
    }

    fn rollback_to(&mut self, name: &str) -> SqlResult<StatementResult> {
        match std::mem::replace(&mut self.txn, TxnState::Idle) {
            TxnState::Block(mut t) | TxnState::Failed(mut t) => {
                match self.engine.db.rollback_to_savepoint(&mut t, name) {
                    Ok(()) => {
                        self.txn = TxnState::Block(t);
                        Ok(StatementResult::command("ROLLBACK"))
                    }
                    Err(e) => {
                        self.txn = TxnState::Failed(t);
                        Err(e.into())
                    }
                }
            }
            TxnState::Idle => Err(SqlError::new(
                code::NO_ACTIVE_SQL_TRANSACTION,
                "ROLLBACK TO SAVEPOINT can only be used in transaction blocks",
            )),
        }
    }

    /// SET, SHOW, RESET and other statements that touch only the session.
    fn session_command(&mut self, stmt: &Statement) -> Option<SqlResult<StatementResult>> {
        Some(match stmt {
            Statement::Set(set) => self.set(set),
            Statement::ShowVariable { variable } => self.show(variable),
            Statement::Reset(r) => {
                let changed = match &r.reset {
                    ast::Reset::ALL => self.settings.reset_all(),
                    ast::Reset::ConfigurationParameter(name) => {
                        match self.settings.reset(&name.to_string()) {
                            Ok(n) => vec![n],
                            Err(e) => return Some(Err(e)),
                        }
                    }
                };
                for n in changed {
                    self.setting_changed(&n);
                }
                self.sync_scope_settings();
                Ok(StatementResult::command("RESET"))
            }
            Statement::Discard { .. } => Ok(StatementResult::command("DISCARD ALL")),
            Statement::Deallocate { .. } => Ok(StatementResult::command("DEALLOCATE")),
            Statement::Comment { .. } => Ok(StatementResult::command("COMMENT")),
            Statement::LISTEN { .. } => Ok(StatementResult::command("LISTEN")),
            Statement::UNLISTEN { .. } => Ok(StatementResult::command("UNLISTEN")),
            _ => return None,
        })
    }

    fn set(&mut self, set: &ast::Set) -> SqlResult<StatementResult> {
        let in_block = !matches!(self.txn, TxnState::Idle);
        match set {
            ast::Set::SingleAssignment {
                scope,
                variable,
                values,
                ..
            } => {
                let local = matches!(scope, Some(ast::ContextModifier::Local));
                let name = variable.to_string().to_lowercase();
                let value = values
                    .iter()
                    .map(setting_value_text)
                    .collect::<Vec<_>>()
                    .join(", ");
                if local && !in_block {
                    // PostgreSQL warns that SET LOCAL outside a block has no effect.
                    return Ok(StatementResult::command("SET"));
                }
                let value = if value.eq_ignore_ascii_case("default") {
                    return self.settings.reset(&name).map(|n| {
                        self.setting_changed(&n);
                        self.sync_scope_settings();
                        StatementResult::command("SET")
                    });
                } else {
                    value
                };
                if name == "transaction_isolation" && in_block {
                    self.set_block_isolation(&value)?;
                }
                let name = if in_block && !local {
                    self.settings.set_in_block(&name, &value)?
                } else {
                    self.settings.set(&name, &value, local)?
                };
                self.setting_changed(&name);
                self.sync_scope_settings();
                Ok(StatementResult::command("SET"))
            }
            ast::Set::SetTimeZone { local, value } => {
                if *local && !in_block {
                    return Ok(StatementResult::command("SET"));
                }
                let value = setting_value_text(value);
                let name = if in_block && !*local {
                    self.settings.set_in_block("timezone", &value)?
                } else {
                    self.settings.set("timezone", &value, *local)?
                };
                self.setting_changed(&name);
                self.sync_scope_settings();
                Ok(StatementResult::command("SET"))
            }
            ast::Set::SetNames { charset_name, .. } => {
                let name = self
                    .settings
                    .set("client_encoding", &charset_name.value, false)?;
                self.setting_changed(&name);
                Ok(StatementResult::command("SET"))
            }
            ast::Set::SetTransaction { modes, session, .. } => {
                for m in modes {
                    if let ast::TransactionMode::AccessMode(mode) = m {
                        let on = matches!(mode, ast::TransactionAccessMode::ReadOnly);
                        let name = if *session {
                            "default_transaction_read_only"
                        } else {
                            "transaction_read_only"
                        };
                        if *session || in_block {
                            self.settings
                                .set(name, if on { "on" } else { "off" }, false)?;
                        }
                    }
                    if let ast::TransactionMode::IsolationLevel(level) = m {
                        let iso = isolation_of(level)?;
                        let text = if iso == IsolationLevel::RepeatableRead {
                            "repeatable read"
                        } else {
                            "read committed"
                        };
                        if *session {
                            self.settings
                                .set("default_transaction_isolation", text, false)?;
                        } else if in_block {
                            self.set_block_isolation(text)?;
                            self.settings.set("transaction_isolation", text, false)?;
                        }
                    }
                }
                self.sync_scope_settings();
                Ok(StatementResult::command("SET"))
            }
            _ => Ok(StatementResult::command("SET")),
        }
    }

    /// SET TRANSACTION ISOLATION LEVEL inside a block: allowed before its first query only.
    fn set_block_isolation(&mut self, level: &str) -> SqlResult<()> {
        let iso = if level.contains("repeatable") {
            IsolationLevel::RepeatableRead
        } else {
            IsolationLevel::ReadCommitted
        };
        if let TxnState::Block(t) = &self.txn {
            if t.isolation() == iso {
                return Ok(());
            }
            if !t.is_read_only_so_far() || t.current_snapshot().is_some() {
                return Err(SqlError::new(
                    code::ACTIVE_SQL_TRANSACTION,
                    "SET TRANSACTION ISOLATION LEVEL must be called before any query",
                ));
            }
            let old = std::mem::replace(&mut self.txn, TxnState::Idle);
            if let TxnState::Block(t) = old {
                self.engine.db.rollback(t);
            }
            self.txn = TxnState::Block(self.engine.db.begin(iso));
        }
        Ok(())
    }

    fn show(&mut self, variable: &[ast::Ident]) -> SqlResult<StatementResult> {
        let name = variable
            .iter()
            .map(|i| i.value.to_lowercase())
            .collect::<Vec<_>>()
            .join(" ");
        let name = match name.as_str() {
            "time zone" => "timezone".to_string(),
            "transaction isolation level" => "transaction_isolation".to_string(),
            n => n.to_string(),
        };
        if name == "all" {
            let mut names: Vec<(&String, &String)> = self.settings.all().iter().collect();
            names.sort();
            let batch = rows_batch(
                &["name", "setting", "description"],
                names
                    .iter()
                    .map(|(n, v)| vec![n.to_string(), v.to_string(), String::new()])
                    .collect(),
            );
            return Ok(StatementResult::Rows {
                columns: columns_of_schema(&batch.schema()),
                batches: vec![batch],
                tag: "SHOW",
            });
        }
        let value = self
            .settings
            .get(&name)
            .map(|s| s.to_string())
            .ok_or_else(|| {
                SqlError::new(
                    code::UNDEFINED_OBJECT,
                    format!("unrecognized configuration parameter \"{name}\""),
                )
            })?;
        let column = variable
            .iter()
            .map(|i| i.value.to_lowercase())
            .collect::<Vec<_>>()
            .join("_");
        let column = if column == "time_zone" {
            "TimeZone".to_string()
        } else if column == "datestyle" {
            "DateStyle".to_string()
        } else {
            column
        };
        let batch = rows_batch(&[column.as_str()], vec![vec![value]]);
        Ok(StatementResult::Rows {
            columns: columns_of_schema(&batch.schema()),
            batches: vec![batch],
            tag: "SHOW",
        })
    }

    /// Everything that needs a transaction: queries, DML, DDL, COPY.
    async fn run_in_transaction(
        &mut self,
        txn: &mut Transaction,
        stmt: Statement,
    ) -> SqlResult<StatementResult> {
        let snapshot = self.engine.db.statement_snapshot(txn);
        *self.scope.snapshot.lock() = snapshot;
        match stmt {
            Statement::Query(q) => self.run_query(txn, *q).await,
            Statement::Insert(insert) => dml::insert(self, txn, insert).await,
            Statement::Update(update) => dml::update(self, txn, update).await,
            Statement::Delete(delete) => dml::delete(self, txn, delete).await,
            Statement::Copy {
                source,
                to,
                target,
                options,
                legacy_options,
                values,
            } => {
                crate::copy::start(
                    self,
                    txn,
                    source,
                    to,
                    target,
                    options,
                    legacy_options,
                    values,
                )
                .await
            }
            Statement::Explain {
                statement, analyze, ..
            } => self.explain(*statement, analyze).await,
            Statement::Vacuum(_) => {
                self.engine.db.vacuum();
                Ok(StatementResult::command("VACUUM"))
            }
            Statement::Analyze(_) => Ok(StatementResult::command("ANALYZE")),
            other => ddl::execute(self, txn, other).await,
        }
    }

    pub fn state(&self) -> &SessionState {
        &self.state
    }

    async fn run_query(
        &mut self,
        txn: &mut Transaction,
        mut q: ast::Query,
    ) -> SqlResult<StatementResult> {
        if dml::cte::has_modifying_cte(&q) {
            dml::cte::run_modifying_ctes(self, txn, &mut q).await?;
        }
        if !q.locks.is_empty() {
            return dml::select_for_update(self, txn, q).await;
        }
        let plan =
            query::plan_statement(&self.state, &self.scope, Statement::Query(Box::new(q))).await?;
        self.run_plan(plan, None).await
    }

    pub async fn run_plan(
        &self,
        plan: LogicalPlan,
        params: Option<ParamValues>,
    ) -> SqlResult<StatementResult> {
        let schema = plan.schema().inner().clone();
        let batches = query::execute_plan(&self.state, plan, params).await?;
        Ok(StatementResult::Rows {
            columns: columns_of_schema(&schema),
            batches,
            tag: "SELECT",
        })
    }

    async fn explain(&mut self, stmt: Statement, analyze: bool) -> SqlResult<StatementResult> {
        let plan = query::plan_statement(&self.state, &self.scope, stmt).await?;
        let builder = datafusion::logical_expr::LogicalPlanBuilder::from(plan);
        let explained = if analyze {
            builder.explain_option_format(
                datafusion::logical_expr::ExplainOption::default().with_analyze(true),
            )?
        } else {
            builder.explain(false, false)?
        }
        .build()?;
        let result = self.run_plan(explained, None).await?;
        Ok(match result {
            StatementResult::Rows { batches, .. } => {
                // PostgreSQL returns one text column named "QUERY PLAN".
                let zone = self.settings.time_zone().clone();
                let mut lines = Vec::new();
                for b in &batches {
                    let col = b.column(b.num_columns() - 1);
                    for row in 0..b.num_rows() {
                        let mut s = String::new();
                        crate::pgtext::format_array_value(col.as_ref(), row, &zone, &mut s);
                        lines.extend(s.lines().map(|l| vec![l.to_string()]));
                    }
                }
                let batch = rows_batch(&["QUERY PLAN"], lines);
                StatementResult::Rows {
                    columns: columns_of_schema(&batch.schema()),
                    batches: vec![batch],
                    tag: "EXPLAIN",
                }
            }
            other => other,
        })
    }

    // ------------------------------------------------------------------------------------
    // Extended protocol

    /// Parse: analyzes the statement once; queries are planned so Describe can answer.
    pub async fn prepare(&mut self, sql: &str, declared: &[u32]) -> SqlResult<Prepared> {
        let mut statements = parse_sql(sql)?;
        if statements.len() > 1 {
            return Err(SqlError::syntax(
                "cannot insert multiple commands into a prepared statement",
            ));
        }
        let stmt = statements.pop();
        let mut prepared = Prepared {
            sql: sql.to_string(),
            stmt: stmt.clone(),
            param_types: Vec::new(),
            param_oids: Vec::new(),
            columns: None,
            plan: parking_lot::Mutex::new(None),
            fast: parking_lot::Mutex::new(None),
        };
        let Some(stmt) = stmt else {
            return Ok(prepared);
        };
        let count = params::count_placeholders(&stmt);
        let mut inferred: Vec<Option<ArrowType>> = vec![None; count];
        let fast = fastpath::plan(self, &stmt, count);
        match &stmt {
            _ if fast.is_some() => {
                let plan = fast.expect("checked");
                for (i, slot) in inferred.iter_mut().enumerate() {
                    *slot = plan.param_type(i).map(crate::types::arrow_type);
                }
                prepared.columns = plan.columns().map(<[ResultColumn]>::to_vec);
                *prepared.fast.lock() = Some((Arc::new(plan), self.engine.catalog.read().version));
            }
            Statement::Query(_) | Statement::Explain { .. } => {
                if matches!(self.txn, TxnState::Idle | TxnState::Block(_)) {
                    let modifying =
                        matches!(&stmt, Statement::Query(q) if dml::cte::has_modifying_cte(q));
                    let planned = match &stmt {
                        // Planned only for Describe: execution runs the DML first.
                        Statement::Query(q) if modifying => {
                            Statement::Query(Box::new(dml::cte::describable(q)?))
                        }
                        _ => stmt.clone(),
                    };
                    let plan = self.plan_with_snapshot(planned).await?;
                    let types = plan.get_parameter_types()?;
                    for (name, t) in types {
                        if let Some(i) = params::placeholder_index(&name) {
                            if i < inferred.len() {
                                inferred[i] = t;
                            }
                        }
                    }
                    prepared.columns = Some(columns_of_schema(&plan.schema().inner().clone()));
                    if !modifying {
                        *prepared.plan.lock() = Some((plan, self.engine.catalog.read().version));
                    }
                }
            }
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => {
                let (types, columns) = dml::describe(self, &stmt, count).await?;
                inferred = types;
                prepared.columns = columns;
            }
            Statement::ShowVariable { variable } => {
                let name = variable
                    .iter()
                    .map(|i| i.value.to_lowercase())
                    .collect::<Vec<_>>()
                    .join("_");
                prepared.columns = Some(vec![ResultColumn {
                    name: name.into(),
                    type_oid: crate::types::oid::TEXT,
                    typmod: -1,
                }]);
            }
            _ => {}
        }
        let cast_types = params::placeholder_cast_types(&stmt, count);
        for i in 0..count {
            let declared_oid = declared.get(i).copied().unwrap_or(0);
            let inferred_type = inferred.get(i).cloned().flatten();
            let (t, oid) = match (declared_oid, inferred_type, &cast_types[i]) {
                (0, Some(t), _) => {
                    let oid = pg_oid_for_arrow(&t);
                    (t, oid)
                }
                (0, None, Some((t, oid))) => (t.clone(), *oid),
                (0, None, None) => (ArrowType::Utf8, pg_oid_for_arrow(&ArrowType::Utf8)),
                (declared, _, _) => (params::arrow_type_for_oid(declared), declared),
            };
            prepared.param_types.push(t);
            prepared.param_oids.push(oid);
        }
        Ok(prepared)
    }

    async fn plan_with_snapshot(&mut self, stmt: Statement) -> SqlResult<LogicalPlan> {
        query::plan_statement(&self.state, &self.scope, stmt).await
    }

    /// Execute: runs a prepared statement with bound parameter values.
    pub async fn execute_prepared(
        &mut self,
        prepared: &Prepared,
        values: Vec<ScalarValue>,
    ) -> SqlResult<StatementResult> {
        // Borrowed, not cloned: only the general path below needs a copy of the statement to
        // put the parameters into, and cloning an AST on every execution is not free.
        let Some(stmt) = prepared.stmt.as_ref() else {
            return Ok(StatementResult::Empty);
        };
        if !matches!(self.txn, TxnState::Failed(_)) {
            if let Some(plan) = self.fast_plan_of(prepared, stmt) {
                if let Err(e) = self.check_writable(stmt) {
                    self.fail_block();
                    return Err(e);
                }
                let (mut txn, implicit) = self.statement_transaction();
                let mut cancel = self.cancel.take();
                let timeout_ms = self.settings.statement_timeout_ms();
                let work = fastpath::execute(self, &mut txn, &plan, &values);
                let result = interruptible(timeout_ms, &mut cancel, work).await;
                self.cancel = cancel;
                return self.finish_statement(txn, implicit, result).await;
            }
        }
        if let Some(r) = self.execute_transaction_control(stmt).await {
            return r;
        }
        let is_query = matches!(stmt, Statement::Query(q) if q.locks.is_empty());
        if is_query && !matches!(self.txn, TxnState::Failed(_)) {
            let version = self.engine.catalog.read().version;
            let cached = prepared
                .plan
                .lock()
                .as_ref()
                .filter(|(_, v)| *v == version)
                .map(|(p, _)| p.clone());
            if let Some(plan) = cached {
                let (mut txn, implicit) = self.statement_transaction();
                let snapshot = self.engine.db.statement_snapshot(&mut txn);
                *self.scope.snapshot.lock() = snapshot;
                let params = if values.is_empty() {
                    None
                } else {
                    Some(ParamValues::List(
                        values.into_iter().map(Into::into).collect(),
                    ))
                };
                let mut cancel = self.cancel.take();
                let timeout_ms = self.settings.statement_timeout_ms();
                // Boxed for the reason given in `execute_sql`.
                let work = Box::pin(self.run_plan(plan, params));
                let result = interruptible(timeout_ms, &mut cancel, work).await;
                self.cancel = cancel;
                return self.finish_statement(txn, implicit, result).await;
            }
        }
        let mut stmt = stmt.clone();
        params::substitute(&mut stmt, &values)?;
        Box::pin(self.execute_statement(stmt)).await
    }
}

/// The name PostgreSQL gives a statement that writes, for the read-only transaction error.
fn write_command_name(stmt: &Statement) -> Option<String> {
    Some(match stmt {
        Statement::Insert(_) => "INSERT".into(),
        Statement::Update(_) => "UPDATE".into(),
        Statement::Delete(_) => "DELETE".into(),
        Statement::Merge { .. } => "MERGE".into(),
        Statement::Query(q) => match q.locks.first()?.lock_type {
            ast::LockType::Update => "SELECT FOR UPDATE".into(),
            ast::LockType::Share => "SELECT FOR SHARE".into(),
        },
        Statement::Copy { to: false, .. } => "COPY FROM".into(),
        Statement::Truncate { .. } => "TRUNCATE TABLE".into(),
        Statement::CreateTable(_) => "CREATE TABLE".into(),
        Statement::CreateIndex(_) => "CREATE INDEX".into(),
        Statement::CreateView { .. } => "CREATE VIEW".into(),
        Statement::CreateSequence { .. } => "CREATE SEQUENCE".into(),
        Statement::CreateSchema { .. } => "CREATE SCHEMA".into(),
        Statement::AlterTable { .. } => "ALTER TABLE".into(),
        Statement::Drop { object_type, .. } => format!("DROP {object_type}"),
        _ => return None,
    })
}

fn isolation_of(level: &ast::TransactionIsolationLevel) -> SqlResult<IsolationLevel> {
    match level {
        ast::TransactionIsolationLevel::ReadCommitted
        | ast::TransactionIsolationLevel::ReadUncommitted => Ok(IsolationLevel::ReadCommitted),
        ast::TransactionIsolationLevel::RepeatableRead
        | ast::TransactionIsolationLevel::Snapshot => Ok(IsolationLevel::RepeatableRead),
        ast::TransactionIsolationLevel::Serializable => Err(serializable_unsupported()),
    }
}

/// The text of a SET value: identifiers and strings unquoted, numbers as written.
fn setting_value_text(e: &ast::Expr) -> String {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            ast::Value::Number(n, _) => n.clone(),
            ast::Value::Boolean(b) => {
                if *b {
                    "on".into()
                } else {
                    "off".into()
                }
            }
            other => other.to_string(),
        },
        ast::Expr::Identifier(i) => i.value.clone(),
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => format!("-{}", setting_value_text(expr)),
        other => other.to_string(),
    }
}

/// A batch of text columns, for SHOW and EXPLAIN.
pub fn rows_batch(names: &[&str], rows: Vec<Vec<String>>) -> RecordBatch {
    use datafusion::arrow::array::{ArrayRef, StringArray};
    use datafusion::arrow::datatypes::{Field, Schema};
    let schema = Arc::new(Schema::new(
        names
            .iter()
            .map(|n| Field::new(*n, ArrowType::Utf8, true))
            .collect::<Vec<_>>(),
    ));
    let columns: Vec<ArrayRef> = (0..names.len())
        .map(|i| {
            Arc::new(StringArray::from(
                rows.iter().map(|r| r[i].clone()).collect::<Vec<_>>(),
            )) as ArrayRef
        })
        .collect();
    RecordBatch::try_new(schema, columns).expect("text columns match schema")
}
