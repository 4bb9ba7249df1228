//! A session: one client connection's state — its transaction (none, an explicit block, or a
//! failed block waiting for ROLLBACK), its settings, and its DataFusion planning state. Every
//! statement enters here; transaction control (`transaction`) and settings (`set_show`) are
//! handled in place, everything else is routed (`route`) to DDL, DML, COPY or the general query
//! path inside the right transaction. The extended protocol's Parse and Execute are in
//! `extended`.

mod cursor;
mod embedded;
mod extended;
mod lock_table;
mod query_run;
mod route;
mod set_show;
mod sql_prepare;
mod statement_tracking;
mod transaction;
pub(crate) use transaction::commit_durably;

pub(crate) use cursor::fetches_one_row;
pub use cursor::{SqlCursor, MOVE_MARKER};
pub use embedded::{stack_depth_exceeded, EmbeddedResult, ROUTINE_DEPTH_MAX};
pub use extended::Prepared;
pub use query_run::QueryRun;
pub(crate) use set_show::{alter_sequence_text, role_membership_text, setting_value_text};
pub use sql_prepare::SqlPrepared;

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::execution::SessionState;
use datafusion::sql::sqlparser::ast::Statement;
use shoal_storage::Transaction;

use crate::copy::CopyRequest;
use crate::engine::Engine;
use crate::error::{SqlError, SqlResult};
use crate::fastpath;
use crate::interrupt::{interruptible, CancelSignal};
use crate::query::scope::PlanScope;
use crate::settings::Settings;
use crate::shape_cache::{self, ShapeCache};
use crate::types::pg_oid_for_arrow;
use crate::{dml, query};

/// A column of a result set as the client sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultColumn {
    /// Shared: a fast-path result hands out the same names on every execution.
    pub name: Arc<str>,
    pub type_oid: u32,
    pub typmod: i32,
    /// The table and column (1-based) the column reads, or 0 and 0 (see `column_origin`).
    pub table_oid: u32,
    pub attnum: i16,
}

impl ResultColumn {
    /// A column computed by an expression: no table, no typmod.
    pub fn computed(name: impl Into<Arc<str>>, type_oid: u32) -> Self {
        ResultColumn {
            name: name.into(),
            type_oid,
            typmod: -1,
            table_oid: 0,
            attnum: 0,
        }
    }
}

/// The result columns of a planned query, with the table column each plain column reference
/// reads (its table, number and typmod), as PostgreSQL describes them.
pub fn columns_of_plan(plan: &datafusion::logical_expr::LogicalPlan) -> Vec<ResultColumn> {
    let mut columns = columns_of_schema(plan.schema().inner());
    for (column, origin) in columns
        .iter_mut()
        .zip(crate::query::column_origin::origins(plan))
    {
        if let Some(origin) = origin {
            column.table_oid = origin.table_oid;
            column.attnum = origin.attnum;
            column.typmod = origin.typmod;
        }
    }
    columns
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
            // No typmod: a field keeps its column's metadata through casts (`v::varchar(10)`
            // of a varchar(3) column), so the column's would be wrong there.
            ResultColumn::computed(crate::query::column_names::output_name(f.name()), type_oid)
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
    /// The rows of a fast-path point SELECT as storage values, which the wire encoder writes
    /// straight into DataRows: a one-row answer skips building Arrow arrays and a batch only to
    /// read them back. `fastpath` returns these only for column types whose text output is the
    /// same from a value as from an array; [`StatementResult::into_batches`] turns them into
    /// `Rows` for everything else (binary format, internal callers).
    PointRows(Box<crate::fastpath::PointRows>),
    /// A query's rows as they are produced (see `query::row_stream`): the protocol layer
    /// reads them while it writes them to the client.
    RowStream {
        columns: Vec<ResultColumn>,
        rows: crate::query::row_stream::RowStream,
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
    /// COPY ... TO STDOUT (FORMAT binary): the rows, which the protocol layer writes in
    /// PostgreSQL's binary COPY format with its binary encoders.
    CopyOutBinary {
        columns: Vec<ResultColumn>,
        batches: Vec<RecordBatch>,
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

    /// The result with `PointRows` turned into an Arrow batch (`Rows`); others unchanged.
    pub fn into_batches(self) -> SqlResult<Self> {
        match self {
            StatementResult::PointRows(p) => p.into_rows(),
            other => Ok(other),
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
    /// The engine's `config_generation` whose server-wide values the settings hold.
    config_generation: u64,
    /// Settings changed by the last statements that the client must hear about.
    pub reported_changes: Vec<(String, String)>,
    /// Fast plans of simple-protocol statement shapes (see `shape_cache`).
    shapes: ShapeCache,
    /// PL/pgSQL bodies and embedded statements kept between calls.
    pub(crate) routine_cache: crate::routines::plpgsql::kept::RoutineCache,
    /// Whether the running statement belongs to a transaction block (rather than its own
    /// implicit transaction): `self.txn` is taken out while a statement runs.
    statement_in_block: bool,
    /// Savepoints' places among the DECLAREs, for ROLLBACK TO SAVEPOINT.
    cursor_marks: cursor::CursorMarks,
    /// The client's CancelRequest for the query running now, if the protocol layer gave one.
    cancel: Option<CancelSignal>,
    /// DDL of the current transaction, undone if it rolls back (see `ddl::undo`).
    pub(crate) ddl_undo: crate::ddl::undo::DdlUndoLog,
    /// The open block is the implicit one of a several-statement Query message (see
    /// `query_run`). Meaningless while no block is open.
    implicit_block: bool,
    /// When the running statement started: statement_timeout counts from here, also while
    /// its rows are streamed.
    statement_started_at: std::time::Instant,
    /// The failure flags of row streams of this session's block that may still be read
    /// (a portal can be suspended with rows left): a failed one fails the block.
    stream_failures: Vec<Arc<std::sync::atomic::AtomicBool>>,
    /// The bound parameters of the prepared DML statement running with its placeholders in
    /// place (see `kept_plan::generated`); None otherwise.
    pub(crate) statement_params: Option<crate::kept_plan::generated::StatementParams>,
    /// Statements Parse analyzed, for clients that parse the same text again.
    parsed: extended::ParseCache,
    /// This session's entry among the server's backends (pg_stat_activity).
    pub backend: Arc<crate::backends::Backend>,
    /// The running statement, when pg_stat_statements counts it (see `statement_tracking`).
    pending_statement: Option<crate::statement_stats::Pending>,
    normalized_texts: statement_tracking::NormalizedTexts,
    /// How deep routines' statements are nested now (see `embedded`).
    routine_depth: u32,
    /// Where on the stack the client's statement started (see `embedded::stack_address`).
    stack_base: usize,
    /// Foreign-key actions on tables with triggers, waiting for their statement's end (see
    /// `dml::referential`).
    pub(crate) pending_actions: crate::dml::PendingActions,
}

impl Drop for Session {
    /// A client that goes away inside a transaction block rolls it back, DDL included. A big
    /// transaction is undone on a blocking thread, as its ROLLBACK would be (see
    /// `rollback_txn`), and nobody waits for it: writers that meet its rows wait for it to end.
    fn drop(&mut self) {
        self.engine.backends.remove(self.backend.pid);
        // A backup its session did not stop ends with it (its files are let go).
        self.scope.backup.lock().take();
        let (TxnState::Block(txn) | TxnState::Failed(txn)) =
            std::mem::replace(&mut self.txn, TxnState::Idle)
        else {
            self.undo_ddl(false);
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if txn.write_count() >= transaction::BLOCKING_END_WRITES => {
                let undo = UndoOnDrop {
                    engine: self.engine.clone(),
                    txn: Some(txn),
                    ddl: self.ddl_undo.take_all(),
                };
                // A runtime shutting down drops the task unrun, and with it `undo`, which then
                // does the work right there.
                runtime.spawn_blocking(move || drop(undo));
            }
            _ => {
                self.engine.db.rollback(txn);
                self.undo_ddl(false);
            }
        }
    }
}

/// Runs `work` on one of tokio's blocking threads and waits for it without blocking: long work
/// (an index build, a big commit or rollback, VACUUM, CHECKPOINT) run inline would hold up every
/// other connection of this connection's thread. `what` names the work in the error a failed
/// (panicked) task becomes.
pub(crate) async fn on_blocking_thread<T: Send + 'static>(
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> SqlResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| SqlError::internal(format!("{what} failed: {e}")))
}

/// A vanished client's transaction and DDL, undone when this is dropped.
struct UndoOnDrop {
    engine: Arc<Engine>,
    txn: Option<Transaction>,
    ddl: Vec<crate::ddl::undo::DdlUndo>,
}

impl Drop for UndoOnDrop {
    fn drop(&mut self) {
        if let Some(txn) = self.txn.take() {
            self.engine.db.rollback(txn);
        }
        transaction::undo_ddl_statements(&self.engine, std::mem::take(&mut self.ddl));
    }
}

pub fn parse_sql(sql: &str) -> SqlResult<Vec<Statement>> {
    let sql = &*crate::query::psql_describe::rewrite(sql);
    let sql = &*crate::query::pg_dump_queries::rewrite(sql);
    crate::parse::parse_statements(sql).or_else(|e| {
        // The parser lacks some of PostgreSQL's locking clauses; retry with them rewritten.
        if let Some(rewritten) = dml::rewrite_locking_syntax(sql) {
            if let Ok(statements) = crate::parse::parse_statements(&rewritten) {
                return Ok(statements);
            }
        }
        if let Some(statement) = crate::routines::statement::parse(sql) {
            return statement.map(|s| vec![s]);
        }
        if let Some(message) = crate::parse::unsupported_statement(sql) {
            return Err(SqlError::new(
                crate::error::code::FEATURE_NOT_SUPPORTED,
                message,
            ));
        }
        if let Some((word, position)) = crate::parse::reserved_word_as_name(sql) {
            return Err(
                SqlError::syntax(format!("syntax error at or near \"{word}\""))
                    .with_position(position),
            );
        }
        let msg = e.to_string();
        let msg = msg.trim_start_matches("sql parser error: ");
        let error = SqlError::syntax(pg_syntax_message(msg));
        Err(match crate::parse::error_position(sql, msg) {
            Some(position) => error.with_position(position),
            None => error,
        })
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
        let backend = engine.backends.register(pid);
        let scope = Arc::new(PlanScope::new(engine.clone(), pid));
        let state = query::new_session_state(scope.clone());
        let mut settings = Settings::default();
        let config_generation = engine.config_generation();
        settings.apply_server_values(&engine.config.read().value_map());
        if !engine.synchronous_commit_default() {
            settings
                .set("synchronous_commit", "off", false)
                .expect("synchronous_commit accepts off");
        }
        if engine.in_recovery() {
            // What libpq's target_session_attrs reads to tell a standby from a primary.
            for name in ["in_hot_standby", "transaction_read_only"] {
                settings.set(name, "on", false).expect("a boolean setting");
            }
        }
        *scope.settings.lock() = settings.all().clone();
        *scope.search_path.lock() = settings.search_path();
        let scope_settings_generation = Some(settings.generation());
        let session = Session {
            engine,
            scope,
            state,
            txn: TxnState::Idle,
            txn_started_at: chrono::Utc::now(),
            settings,
            scope_settings_generation,
            config_generation,
            reported_changes: Vec::new(),
            shapes: ShapeCache::default(),
            routine_cache: Default::default(),
            statement_params: None,
            parsed: Default::default(),
            pending_statement: None,
            normalized_texts: Default::default(),
            statement_in_block: false,
            cursor_marks: Default::default(),
            cancel: None,
            ddl_undo: Default::default(),
            implicit_block: false,
            statement_started_at: std::time::Instant::now(),
            stream_failures: Vec::new(),
            backend,
            routine_depth: 0,
            stack_base: 0,
            pending_actions: Default::default(),
        };
        session.sync_log_min_duration();
        session
    }

    pub fn backend_pid(&self) -> i32 {
        self.scope.backend_pid
    }

    /// Installs the signal a CancelRequest fires for the query about to run (None: the query
    /// cannot be canceled); see `interrupt`.
    pub fn set_cancel_signal(&mut self, signal: Option<CancelSignal>) {
        self.cancel = signal;
    }

    /// Whether another transaction is waiting for this session's open transaction block (for a
    /// row it wrote or locked).
    pub fn transaction_is_waited_for(&self) -> bool {
        match &self.txn {
            TxnState::Idle => false,
            TxnState::Block(txn) | TxnState::Failed(txn) => txn.is_waited_for(),
        }
    }

    /// 'I' idle, 'T' in a transaction block, 'E' in a failed block (ReadyForQuery status).
    pub fn transaction_status(&mut self) -> u8 {
        self.settle_stream_failure();
        match self.txn {
            TxnState::Idle => b'I',
            TxnState::Block(_) => b'T',
            TxnState::Failed(_) => b'E',
        }
    }

    /// Fails the block if one of its statements' row streams failed while the client read
    /// it, as the statement would have failed it had the error come before its first row.
    /// True if one had failed.
    fn settle_stream_failure(&mut self) -> bool {
        if self.stream_failures.is_empty() {
            return false;
        }
        let failed = self
            .stream_failures
            .iter()
            .any(|f| f.load(std::sync::atomic::Ordering::Acquire));
        // A flag nobody else holds belongs to a stream that is gone.
        self.stream_failures
            .retain(|f| Arc::strong_count(f) > 1 && !failed);
        if failed {
            self.fail_block();
        }
        failed
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
                        // A shape the acting role may not run is left to the ordinary path,
                        // which reports the denial. The entry holds for this catalog version
                        // (GRANT and REVOKE change it) and settings generation (SET ROLE
                        // changes it), so the check need not be repeated for each use.
                        match self.check_privileges(&stmt) {
                            Ok(()) => fastpath::plan(self, &stmt, literals.len()).map(Arc::new),
                            Err(_) => None,
                        }
                    }
                    _ => None,
                };
                self.shapes
                    .insert(shape, catalog_version, generation, plan.clone());
                plan?
            }
        };
        if plan.writes() && self.read_only() {
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
        on_blocking_thread("checkpoint", move || engine.checkpoint()).await??;
        Ok(StatementResult::command("CHECKPOINT"))
    }

    /// Runs one statement with autocommit or inside the current block.
    pub async fn execute_statement(&mut self, stmt: Statement) -> SqlResult<StatementResult> {
        if let Some(r) = self.execute_transaction_control(&stmt).await {
            return r;
        }
        if matches!(self.txn, TxnState::Failed(_)) {
            return Err(SqlError::in_failed_transaction());
        }
        if let Some(r) = self.sql_prepared_command(&stmt).await {
            if r.is_err() {
                self.fail_block();
            }
            return r;
        }
        if let Some(r) = self.session_command(&stmt) {
            if r.is_err() {
                self.fail_block();
            }
            return r;
        }
        if let Some(r) = self.cursor_command(&stmt) {
            if r.is_err() {
                self.fail_block();
            }
            return r;
        }
        if let Err(e) = self
            .check_writable(&stmt)
            .and_then(|()| self.check_privileges(&stmt))
        {
            self.fail_block();
            return Err(e);
        }
        // A statement that changes the catalog runs alone among those, and what it changed
        // is kept for ROLLBACK even when it fails or is canceled half-way (see `ddl::undo`).
        let engine = self.engine.clone();
        let ddl_lock = match crate::ddl::changes_catalog(&stmt) {
            true => Some(engine.ddl_statement.lock().await),
            false => None,
        };
        let mark = ddl_lock
            .as_ref()
            .map(|_| crate::ddl::undo::DdlMark::capture(&engine));
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
        if let (Some(mark), Ok(_)) = (&mark, &result) {
            // What the statement created belongs to the role that created it.
            let created = mark.created(&engine);
            if !created.is_empty() {
                if let Ok(role) = crate::privileges::acting_role(self) {
                    let mut catalog = engine.catalog.write();
                    crate::privileges::grant::own_created(&mut catalog, role.oid, &created);
                }
            }
        }
        if let Some(changes) = mark.and_then(|m| m.finish(&engine)) {
            self.ddl_undo.push(changes);
        }
        drop(ddl_lock);
        self.finish_statement(txn, implicit, result).await
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
