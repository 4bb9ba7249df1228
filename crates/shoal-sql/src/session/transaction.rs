//! A session's transactions: the implicit one a statement runs in when no block is open, the
//! explicit block of BEGIN ... COMMIT with its savepoints, and the failed block that waits for
//! ROLLBACK. Commit waits for the log here, and a READ ONLY transaction refuses writes here,
//! because both depend on which transaction the statement belongs to.

use datafusion::sql::sqlparser::ast::{self, Statement};
use shoal_storage::{IsolationLevel, Transaction};

use super::{on_blocking_thread, Session, StatementResult, TxnState};
use crate::ddl::undo::DdlUndo;
use crate::engine::Engine;
use crate::error::{code, SqlError, SqlResult};

/// A commit or rollback with at least this many writes runs on a blocking thread: logging and
/// stamping, or undoing, hundreds of thousands of versions (a bulk load's COPY in one
/// transaction) takes long enough to hold up every other connection of the connection's thread.
pub(super) const BLOCKING_END_WRITES: usize = 64 * 1024;

impl Session {
    /// The transaction a statement runs in: the open block's, or a new implicit one (true).
    /// Also fixes the time now() returns for the statement (see `mark_statement_start`).
    pub(super) fn statement_transaction(&mut self) -> (Transaction, bool) {
        let result = match std::mem::replace(&mut self.txn, TxnState::Idle) {
            TxnState::Block(t) => (t, false),
            TxnState::Idle => {
                self.txn_started_at = chrono::Utc::now();
                self.scope.take_reads();
                (self.engine.db.begin(self.default_isolation()), true)
            }
            TxnState::Failed(_) => {
                unreachable!("statements in a failed block are refused before they start")
            }
        };
        self.statement_started_at = std::time::Instant::now();
        // A statement canceled inside a routine left its depth behind.
        self.routine_depth = 0;
        self.stack_base = super::embedded::stack_address();
        self.backend.set_txn_id(result.0.id());
        self.scope
            .mark_statement_start(chrono::Utc::now().timestamp_micros());
        self.statement_in_block = !result.1;
        self.scope
            .set_read_tracking(result.0.isolation() == IsolationLevel::Serializable);
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

    /// Whether the running statement is part of a transaction block.
    pub(crate) fn statement_in_block(&self) -> bool {
        self.statement_in_block
    }

    pub(super) async fn finish_statement(
        &mut self,
        txn: Transaction,
        implicit: bool,
        result: SqlResult<StatementResult>,
    ) -> SqlResult<StatementResult> {
        self.scope.dml_capture.lock().clear();
        self.apply_set_config_calls(!implicit, result.is_ok());
        let mut result = result;
        // SERIALIZABLE's check at commit needs every read: an autocommit statement that wrote
        // (a query with a data-modifying CTE) reads its rows to the end before it commits.
        if implicit && txn.isolation() == IsolationLevel::Serializable && !txn.is_read_only_so_far()
        {
            if let Ok(StatementResult::RowStream { columns, rows, tag }) = result {
                result = rows.collect().await.map(|batches| StatementResult::Rows {
                    columns,
                    batches,
                    tag,
                });
            }
        }
        if let Ok(StatementResult::RowStream { rows, .. }) = &mut result {
            let timeout_ms = self.settings.statement_timeout_ms();
            let deadline = (timeout_ms > 0).then(|| {
                tokio::time::Instant::from_std(self.statement_started_at)
                    + std::time::Duration::from_millis(timeout_ms)
            });
            rows.interrupt_with(self.cancel.take(), deadline);
            if !implicit {
                self.stream_failures.push(rows.failure_flag());
            }
        }
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
                self.undo_ddl(committed.is_ok());
                self.end_transaction_state(committed.is_ok());
                committed.map(|_| r)
            }
            (true, Err(e)) => {
                self.count_error(&e);
                self.rollback_txn(txn).await;
                self.undo_ddl(false);
                self.end_transaction_state(false);
                self.wait_released_flushed().await;
                Err(e)
            }
            (false, Ok(r)) => {
                self.txn = TxnState::Block(txn);
                Ok(r)
            }
            (false, Err(e)) => {
                self.count_error(&e);
                self.txn = TxnState::Failed(txn);
                Err(e)
            }
        }
    }

    /// Counts what pg_stat_database counts of a failed statement: deadlocks.
    fn count_error(&self, e: &SqlError) {
        if e.code == code::DEADLOCK_DETECTED {
            self.engine.backends.stats.deadlock();
        }
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

    /// A READ ONLY transaction (or, outside a block, default_transaction_read_only) refuses
    /// statements that write.
    pub(super) fn check_writable(&self, stmt: &Statement) -> SqlResult<()> {
        // The statement's kind first: a look at an enum, where the setting is a hash-map
        // lookup by name, and most statements (every SELECT) are not writes.
        let Some(command) = write_command_name(stmt) else {
            return Ok(());
        };
        if !self.read_only() {
            return Ok(());
        }
        Err(SqlError::new(
            code::READ_ONLY_SQL_TRANSACTION,
            format!("cannot execute {command} in a read-only transaction"),
        ))
    }

    pub(crate) fn read_only(&self) -> bool {
        // A standby's transactions only read, whatever the settings say (as PostgreSQL's
        // hot standby).
        if self.engine.in_recovery() {
            return true;
        }
        let setting = match self.txn {
            TxnState::Idle => "default_transaction_read_only",
            _ => "transaction_read_only",
        };
        self.settings.get(setting) == Some("on")
    }

    /// A statement of the block failed: the block stays open but refuses everything but
    /// ROLLBACK. A block that has failed already stays failed, whatever fails next (a syntax
    /// error included); outside a block there is nothing to fail.
    pub(super) fn fail_block(&mut self) {
        self.txn = match std::mem::replace(&mut self.txn, TxnState::Idle) {
            TxnState::Block(t) => TxnState::Failed(t),
            other => other,
        };
    }

    /// BEGIN, COMMIT, ROLLBACK and savepoints, which need no planning; None for any other
    /// statement. Callers try this before boxing `execute_statement`, whose future is large
    /// enough that building it costs more than these statements themselves.
    pub(super) async fn execute_transaction_control(
        &mut self,
        stmt: &Statement,
    ) -> Option<SqlResult<StatementResult>> {
        match stmt {
            Statement::Commit { chain: false, .. } => return Some(self.commit_block().await),
            Statement::Rollback {
                savepoint: None,
                chain: false,
            } => return Some(Ok(self.rollback_block().await)),
            Statement::Commit { chain: true, .. } => {
                return Some(self.end_block_and_chain("COMMIT").await)
            }
            Statement::Rollback {
                savepoint: None,
                chain: true,
            } => return Some(self.end_block_and_chain("ROLLBACK").await),
            _ => {}
        }
        self.transaction_control(stmt)
    }

    /// COMMIT AND CHAIN, ROLLBACK AND CHAIN: ends the block as COMMIT or ROLLBACK would and
    /// opens a new one at once with the same isolation level and access mode, as PostgreSQL
    /// does. Outside a block there is nothing to chain from: an error (25P01), where plain
    /// COMMIT only warns.
    async fn end_block_and_chain(&mut self, command: &str) -> SqlResult<StatementResult> {
        let (TxnState::Block(t) | TxnState::Failed(t)) = &self.txn else {
            return Err(SqlError::new(
                code::NO_ACTIVE_SQL_TRANSACTION,
                format!("{command} AND CHAIN can only be used in transaction blocks"),
            ));
        };
        let isolation = t.isolation();
        let read_only = self.settings.get("transaction_read_only") == Some("on");
        let ended = match command {
            "COMMIT" => self.commit_block().await?,
            _ => self.rollback_block().await,
        };
        self.start_block(isolation, read_only);
        Ok(ended)
    }

    /// BEGIN, COMMIT, ROLLBACK and savepoints. None for every other statement.
    fn transaction_control(&mut self, stmt: &Statement) -> Option<SqlResult<StatementResult>> {
        Some(match stmt {
            Statement::StartTransaction {
                modes,
                begin,
                modifier,
                ..
            } => {
                // The tag repeats the command's spelling: BEGIN or START TRANSACTION.
                let tag = if *begin { "BEGIN" } else { "START TRANSACTION" };
                let deferrable = *modifier == Some(crate::parse::DEFERRABLE_MARKER);
                self.begin_block(modes, deferrable, tag)
            }
            // COMMIT waits for the log and a big ROLLBACK for a blocking thread: see
            // execute_transaction_control.
            Statement::Commit { .. }
            | Statement::Rollback {
                savepoint: None, ..
            } => return None,
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
        deferrable: bool,
        tag: &str,
    ) -> SqlResult<StatementResult> {
        match self.txn {
            TxnState::Idle => {}
            TxnState::Block(_) => {
                // PostgreSQL warns and carries on; BEGIN in a several-statement message makes
                // its implicit block an ordinary one (see `query_run`).
                self.implicit_block = false;
                return Ok(StatementResult::TransactionStart(tag.into()));
            }
            TxnState::Failed(_) => return Err(SqlError::in_failed_transaction()),
        }
        let mut isolation = self.default_isolation();
        let mut shown_level = None;
        let mut read_only = self.settings.get("default_transaction_read_only") == Some("on");
        for m in modes {
            match m {
                ast::TransactionMode::IsolationLevel(level) => {
                    isolation = isolation_of(level)?;
                    shown_level = Some(level_name(level, isolation));
                }
                ast::TransactionMode::AccessMode(mode) => {
                    read_only = matches!(mode, ast::TransactionAccessMode::ReadOnly);
                    if !read_only && self.engine.in_recovery() {
                        return Err(SqlError::new(
                            code::FEATURE_NOT_SUPPORTED,
                            "cannot set transaction read-write mode during recovery",
                        ));
                    }
                }
            }
        }
        self.start_block(isolation, read_only);
        // READ UNCOMMITTED (asked for, or the default) shows as itself.
        let shown_level = shown_level.unwrap_or_else(|| {
            match self.settings.get("default_transaction_isolation") {
                Some("read uncommitted") => "read uncommitted",
                _ => isolation_name(isolation),
            }
        });
        self.settings
            .set("transaction_isolation", shown_level, false)
            .ok();
        if deferrable {
            self.settings
                .set("transaction_deferrable", "on", false)
                .ok();
        }
        self.sync_scope_settings();
        Ok(StatementResult::TransactionStart(tag.into()))
    }

    /// Opens a transaction block (the session has none) and sets the settings that show it.
    pub(super) fn start_block(&mut self, isolation: IsolationLevel, read_only: bool) {
        debug_assert!(matches!(self.txn, TxnState::Idle));
        self.implicit_block = false;
        let read_only = read_only || self.engine.in_recovery();
        let access = if read_only { "on" } else { "off" };
        self.settings
            .set("transaction_read_only", access, false)
            .ok();
        self.settings
            .set("transaction_isolation", isolation_name(isolation), false)
            .ok();
        self.sync_scope_settings();
        self.txn_started_at = chrono::Utc::now();
        self.scope.take_reads();
        self.txn = TxnState::Block(self.engine.db.begin(isolation));
    }

    pub(super) fn default_isolation(&self) -> IsolationLevel {
        match self.settings.get("default_transaction_isolation") {
            Some("repeatable read") => IsolationLevel::RepeatableRead,
            Some("serializable") => IsolationLevel::Serializable,
            _ => IsolationLevel::ReadCommitted,
        }
    }

    /// SET TRANSACTION ISOLATION LEVEL inside a block: allowed before its first query only.
    pub(super) fn set_block_isolation(&mut self, level: &str) -> SqlResult<()> {
        let iso = if level.contains("repeatable") {
            IsolationLevel::RepeatableRead
        } else if level.contains("serializable") {
            IsolationLevel::Serializable
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

    /// COMMIT: a failed block rolls back instead, as in PostgreSQL; a commit the log refuses
    /// (disk full, broken log) is an error, and its changes are gone.
    pub(super) async fn commit_block(&mut self) -> SqlResult<StatementResult> {
        let committed = match std::mem::replace(&mut self.txn, TxnState::Idle) {
            TxnState::Idle => Ok(true),
            TxnState::Block(t) => self.commit_txn(t).await.map(|_| true),
            TxnState::Failed(t) => {
                self.rollback_txn(t).await;
                Ok(false)
            }
        };
        self.undo_ddl(committed == Ok(true));
        self.end_transaction_state(committed == Ok(true));
        let tag = if committed.clone()? {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        Ok(StatementResult::TransactionEnd(tag.into()))
    }

    /// Commits `txn` and, unless synchronous_commit is off, returns once its redo record (and
    /// any catalog change logged before it) is flushed. A small commit the log grants early
    /// release becomes visible and frees its row locks as soon as its record is appended;
    /// others stay invisible until the flush, and if the log cannot take them their changes are
    /// undone and the error says why. A read-only transaction waits for the flush of the
    /// commits released early it may have seen.
    pub(super) async fn commit_txn(&mut self, mut txn: Transaction) -> SqlResult<()> {
        // Deferred foreign keys are checked before anything is logged; a violation rolls the
        // transaction back.
        let due = self.scope.deferred_constraints.lock().take_all();
        if !due.is_empty() {
            // Boxed: the checks plan queries, a future far larger than a commit's, and this
            // one is awaited on every commit (debug builds run out of a test thread's stack).
            let checked = Box::pin(crate::constraints::check_pending(self, &mut txn, due)).await;
            if let Err(e) = checked {
                self.rollback_txn(txn).await;
                return Err(e);
            }
        }
        // What the transaction read (a streamed result may have read after its statement
        // ended), for SERIALIZABLE's check.
        txn.note_reads(self.scope.take_reads());
        let durability = self.synchronous_durability().is_some();
        let may_release_early = self.ddl_undo.is_empty();
        let wrote = txn.write_count() > 0 || !may_release_early;
        if let Err((e, txn)) =
            commit_durably(&self.engine, txn, durability, may_release_early).await
        {
            if let Some(txn) = txn {
                self.rollback_txn(txn).await;
            }
            return Err(e);
        }
        if let (true, Some(d)) = (
            wrote && self.engine.replicated(),
            self.synchronous_durability(),
        ) {
            // The commit's record is flushed: the log's flushed end is at or past it.
            crate::durability::wait_for_standbys(
                &self.engine,
                d.wal.flushed_lsn(),
                self.settings.get("synchronous_commit").unwrap_or("on"),
                self.settings
                    .get("synchronous_standby_names")
                    .unwrap_or_default(),
            )
            .await?;
        }
        Ok(())
    }

    /// An error can tell of a commit released early too (a duplicate key, a serialization
    /// failure): like a read-only commit, it waits for the flush of those before it is sent.
    /// A failed wait changes nothing: the statement's own error goes out.
    async fn wait_released_flushed(&self) {
        if let Some(d) = self.synchronous_durability() {
            let _ = d.wait_flushed(d.released_lsn()).await;
        }
    }

    /// The log, if this session's commits wait for it (synchronous_commit is not off).
    fn synchronous_durability(&self) -> Option<&crate::durability::Durability> {
        let off = matches!(
            self.settings.get("synchronous_commit"),
            Some("off" | "false" | "no" | "0")
        );
        self.engine.durability.as_deref().filter(|_| !off)
    }

    /// Rolls `txn` back; one with many writes on a blocking thread, as its commit would run.
    pub(super) async fn rollback_txn(&self, txn: Transaction) {
        // Reads noted for SERIALIZABLE's check belong to this transaction only.
        self.scope.take_reads();
        if txn.write_count() < BLOCKING_END_WRITES {
            self.engine.db.rollback(txn);
            return;
        }
        let db = self.engine.db.clone();
        // Only a panic fails the task; the storage's assertion that fired says what broke.
        if let Err(e) = on_blocking_thread("rollback", move || db.rollback(txn)).await {
            tracing::error!("{e}");
        }
    }

    async fn rollback_block(&mut self) -> StatementResult {
        match std::mem::replace(&mut self.txn, TxnState::Idle) {
            TxnState::Block(t) | TxnState::Failed(t) => self.rollback_txn(t).await,
            TxnState::Idle => {}
        }
        self.undo_ddl(false);
        self.end_transaction_state(false);
        StatementResult::TransactionEnd("ROLLBACK".into())
    }

    /// The transaction ended: forgets its DDL if it committed, undoes it if not.
    pub(super) fn undo_ddl(&mut self, committed: bool) {
        let statements = self.ddl_undo.take_all();
        if !committed {
            undo_ddl_statements(&self.engine, statements);
        }
    }

    fn savepoint(&mut self, name: &str) -> SqlResult<StatementResult> {
        match &mut self.txn {
            TxnState::Block(t) => {
                self.engine.db.savepoint(t, name);
                self.ddl_undo.savepoint(name);
                self.cursor_marks.savepoint(name);
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
                self.ddl_undo.release(name);
                self.cursor_marks.release(name);
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
                        self.rollback_cursors_to(name);
                        let statements = self.ddl_undo.take_after(name);
                        crate::ddl::undo::undo(&self.engine, statements)?;
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
}

/// The name PostgreSQL gives a statement that writes, for the read-only transaction error.
fn write_command_name(stmt: &Statement) -> Option<String> {
    Some(match stmt {
        Statement::Insert(_) => "INSERT".into(),
        Statement::Update(_) => "UPDATE".into(),
        Statement::Delete(_) => "DELETE".into(),
        Statement::Merge { .. } => "MERGE".into(),
        Statement::Query(q) => crate::dml::locking_command_name(q)?,
        Statement::Copy { to: false, .. } => "COPY FROM".into(),
        Statement::Truncate { .. } => "TRUNCATE TABLE".into(),
        Statement::CreateTable(_) => "CREATE TABLE".into(),
        Statement::CreateIndex(_) => "CREATE INDEX".into(),
        Statement::CreateView { .. } => "CREATE VIEW".into(),
        Statement::CreateSequence { .. } => "CREATE SEQUENCE".into(),
        Statement::CreateSchema { .. } => "CREATE SCHEMA".into(),
        Statement::AlterTable { .. } => "ALTER TABLE".into(),
        Statement::CreateType { .. } => "CREATE TYPE".into(),
        Statement::AlterType(_) => "ALTER TYPE".into(),
        Statement::Drop { object_type, .. } => format!("DROP {object_type}"),
        _ => return None,
    })
}

/// The isolation level as `transaction_isolation` shows it.
pub(super) fn isolation_name(isolation: IsolationLevel) -> &'static str {
    match isolation {
        IsolationLevel::ReadCommitted => "read committed",
        IsolationLevel::RepeatableRead => "repeatable read",
        IsolationLevel::Serializable => "serializable",
    }
}

/// The name `transaction_isolation` shows for a level asked for: READ UNCOMMITTED keeps its
/// name, though it runs as READ COMMITTED.
pub(super) fn level_name(
    level: &ast::TransactionIsolationLevel,
    isolation: IsolationLevel,
) -> &'static str {
    match level {
        ast::TransactionIsolationLevel::ReadUncommitted => "read uncommitted",
        _ => isolation_name(isolation),
    }
}

pub(super) fn isolation_of(level: &ast::TransactionIsolationLevel) -> SqlResult<IsolationLevel> {
    match level {
        ast::TransactionIsolationLevel::ReadCommitted
        | ast::TransactionIsolationLevel::ReadUncommitted => Ok(IsolationLevel::ReadCommitted),
        ast::TransactionIsolationLevel::RepeatableRead
        | ast::TransactionIsolationLevel::Snapshot => Ok(IsolationLevel::RepeatableRead),
        ast::TransactionIsolationLevel::Serializable => Ok(IsolationLevel::Serializable),
    }
}

/// Undoes the DDL of a rolled back transaction. An undo that fails is logged; the catalog keeps
/// whatever it could not put back.
pub(super) fn undo_ddl_statements(engine: &Engine, statements: Vec<DdlUndo>) {
    if let Err(e) = crate::ddl::undo::undo(engine, statements) {
        tracing::error!("could not undo the DDL of a rolled back transaction: {e}");
    }
}

/// Commits `txn` and, when `synchronous` (and the engine has a log), returns once its redo
/// record (and any catalog change logged before it) is flushed. A small commit the log grants
/// early release becomes visible and frees its row locks as soon as its record is appended
/// (unless `may_release_early` is false: a commit with DDL, whose undo on a failed flush
/// assumes nobody saw it); others stay invisible until the flush, and if the log cannot take
/// them their changes are undone and the error says why. A read-only transaction waits for
/// the flush of the commits released early it may have seen. Once it returns, every new
/// snapshot sees the commit. On an error, the transaction is given back when it still needs
/// a rollback.
pub(crate) async fn commit_durably(
    engine: &crate::engine::Engine,
    txn: Transaction,
    synchronous: bool,
    may_release_early: bool,
) -> Result<shoal_storage::CommitTs, (SqlError, Option<Transaction>)> {
    // A large transaction's records logged ahead of its commit must be durable before the
    // commit record names them; waiting here keeps `prepare_commit` from blocking a worker
    // thread on that flush (it checks again, and finds it done).
    if let (Some(d), Some((from, end))) = (&engine.durability, engine.db.early_log_range(&txn)) {
        if let Err(e) = d.wait_range_flushed(from, end).await {
            return Err((e, Some(txn)));
        }
    }
    // A big commit's two halves (logging, then stamping every version) run on a blocking
    // thread, so the other connections of this one's thread go on meanwhile.
    let big = txn.write_count() >= BLOCKING_END_WRITES;
    let prepared = if big {
        let db = engine.db.clone();
        let prepared = on_blocking_thread("commit", move || db.prepare_commit(txn)).await;
        prepared
            .map_err(|e| (e, None))?
            .map_err(|e| (e.into(), None))?
    } else {
        engine
            .db
            .prepare_commit(txn)
            .map_err(|e| (e.into(), None))?
    };
    let durability = engine.durability.as_deref().filter(|_| synchronous);
    let ts = match (durability, prepared.durable_at()) {
        (None, _) if big => on_blocking_thread("commit", move || prepared.finish())
            .await
            .map_err(|e| (e, None))?,
        (None, _) => prepared.finish(),
        // Read-only: nothing to log, but what it read must be durable before the client
        // hears of it (DDL, commits released early).
        (Some(d), None) => {
            let lsn = d.released_lsn().max(engine.catalog.last_logged_lsn());
            // Once the log is broken nothing more becomes durable, and reads go on over
            // what is in memory: that may include commits released early whose flush
            // failed (their clients were told so, 58030). A restart recovers the log's.
            if let Err(e) = d.wait_flushed(lsn).await {
                if d.check_writable().is_ok() {
                    return Err((e, None));
                }
            }
            prepared.finish()
        }
        (Some(d), Some(record_end)) => {
            // Its record and any catalog record logged after it: all must have made it.
            let (from, lsn) = (
                record_end - 1,
                record_end.max(engine.catalog.last_logged_lsn()),
            );
            // Early lock release: visible now, acknowledged once durable. Not for a big
            // commit (stamped on a blocking thread) nor one with DDL, whose undo on a failed
            // flush assumes nobody saw it.
            if !big && may_release_early && d.release_early(lsn) {
                let ts = prepared.finish();
                // Only a broken log fails this: a granted record is never dropped for a
                // full disk, and a broken log stops every write after it.
                d.wait_range_flushed(from, lsn)
                    .await
                    .map_err(|e| (e, None))?;
                ts
            } else {
                if let Err(e) = d.wait_range_flushed(from, lsn).await {
                    prepared.abort();
                    return Err((e, None));
                }
                if big {
                    on_blocking_thread("commit", move || prepared.finish())
                        .await
                        .map_err(|e| (e, None))?
                } else {
                    prepared.finish()
                }
            }
        }
    };
    wait_until_visible(&engine.db, ts).await;
    Ok(ts)
}

/// Waits until every new snapshot sees the commit at `ts`, as PostgreSQL's commit is visible
/// to all before it is acknowledged. `finish` stamps this commit's versions, but snapshots
/// read the stable watermark, which stays below `ts` while a commit with an earlier timestamp
/// is between its halves: woken by the same log flush but not yet run, possibly a task of this
/// very thread, so the wait yields instead of blocking. Without it a client's next statement
/// could miss its own commit (500 concurrent clients did, in `crates/shoal/tests/connections.rs`).
/// The wait is normally nothing or a few yields; a huge earlier commit still stamping its rows
/// makes it back off to short sleeps.
async fn wait_until_visible(db: &shoal_storage::Database, ts: shoal_storage::CommitTs) {
    const YIELDS_BEFORE_SLEEPING: u32 = 64;
    let mut yields = 0;
    while db.stable_ts() < ts {
        if yields < YIELDS_BEFORE_SLEEPING {
            yields += 1;
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(std::time::Duration::from_micros(200)).await;
        }
    }
}
