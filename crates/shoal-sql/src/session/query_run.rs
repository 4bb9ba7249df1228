//! One simple-protocol Query message: its statements run one at a time, and the protocol layer
//! sends each result (a query's rows as they are produced) before it asks for the next one, so
//! a statement never runs while an earlier one's rows are still being read.
//!
//! Several statements in one message form one implicit transaction block, as in PostgreSQL:
//! `INSERT ...; SELECT 1/0` leaves no row behind. The block starts before the first statement
//! that needs a transaction, becomes an ordinary block at an explicit BEGIN, ends at COMMIT or
//! ROLLBACK (the statements after them start a new one), is rolled back at the first error
//! (the statements after it are skipped) and commits after the last statement.

use std::collections::VecDeque;

use datafusion::sql::sqlparser::ast::Statement;

use super::{parse_sql, Session, StatementResult, TxnState};
use crate::error::SqlResult;
use crate::parse::Piece;

/// What is left to run of one Query message.
#[derive(Default)]
pub struct QueryRun {
    steps: VecDeque<Step>,
    /// The message holds several statements: they share an implicit block.
    several: bool,
    /// The implicit block's commit has been tried (its error, if any, was returned).
    ended: bool,
    /// The message's text, where errors find the position of what they name.
    text: String,
}

enum Step {
    /// The message's text, not parsed yet: a known shape runs without parsing.
    Text(String),
    /// A statement, with its own text when pg_stat_statements counts it.
    Statement(Statement, Option<String>),
    Checkpoint,
}

impl Session {
    /// Prepares to run `sql`; `next_result` runs its statements.
    pub fn start_query(&mut self, sql: &str) -> QueryRun {
        self.settle_stream_failure();
        self.take_reloaded_config();
        let mut run = QueryRun {
            text: sql.to_string(),
            ..QueryRun::default()
        };
        // sqlparser does not know PostgreSQL's CHECKPOINT: such strings run piece by piece.
        // The substring test keeps the tokenizer off every other query.
        let pieces = match sql.to_ascii_lowercase().contains("checkpoint") {
            true => crate::parse::split_at_checkpoints(sql),
            false => None,
        };
        match pieces {
            Some(pieces) => {
                run.several = pieces.len() > 1;
                run.steps
                    .extend(pieces.into_iter().map(|piece| match piece {
                        Piece::Checkpoint => Step::Checkpoint,
                        Piece::Sql(text) => Step::Text(text),
                    }));
            }
            None => run.steps.push_back(Step::Text(sql.to_string())),
        }
        run
    }

    /// Runs the next statement of `run` and returns its result; None once all have run (or
    /// an error ended the message). A result's row stream must be read (or dropped) before
    /// the next call: its failure fails the block, and the rest of the message is skipped.
    pub async fn next_result(&mut self, run: &mut QueryRun) -> Option<SqlResult<StatementResult>> {
        if self.settle_stream_failure() {
            self.abort_message(run);
        }
        loop {
            let Some(step) = run.steps.pop_front() else {
                return self.end_message(run).await;
            };
            let result = match step {
                Step::Text(text) => {
                    if !run.several {
                        self.track_statement(|| text.clone());
                        if let Some(result) = self.execute_cached_shape(&text).await {
                            return Some(self.after_step(run, result));
                        }
                    }
                    match parse_sql(&text) {
                        Ok(statements) => {
                            // COPY FROM STDIN ends the message (its data comes after it), so
                            // it cannot share a block with the statements after it.
                            let copy_in = statements
                                .iter()
                                .any(|s| matches!(s, Statement::Copy { to: false, .. }));
                            run.several |= statements.len() > 1 && !copy_in;
                            let mut texts = self.statement_texts(&text, statements.len());
                            for statement in statements.into_iter().rev() {
                                let text = texts.pop().flatten();
                                run.steps.push_front(Step::Statement(statement, text));
                            }
                            continue;
                        }
                        Err(e) => {
                            self.fail_block();
                            Err(e)
                        }
                    }
                }
                Step::Statement(stmt, text) => {
                    self.track_statement(|| text.unwrap_or_else(|| stmt.to_string()));
                    if run.several && !run_outside_implicit_block(&stmt) {
                        self.begin_implicit_block();
                    }
                    // Boxed: the general path's future (DataFusion planning included) is many
                    // kilobytes, and every caller's future would otherwise embed it and be
                    // copied whole into each `async_trait` box, fast path or not.
                    match self.execute_transaction_control(&stmt).await {
                        Some(r) => r,
                        None => Box::pin(self.execute_statement(stmt)).await,
                    }
                }
                Step::Checkpoint => {
                    self.track_statement(|| "CHECKPOINT".to_string());
                    self.checkpoint().await
                }
            };
            return Some(self.after_step(run, result));
        }
    }

    /// Runs every statement of `sql` and returns their results, rows read to the end: for
    /// callers inside Shoal and tests, which want whole results rather than streams.
    pub async fn execute_sql(&mut self, sql: &str) -> Vec<SqlResult<StatementResult>> {
        let mut run = self.start_query(sql);
        let mut results = Vec::new();
        while let Some(result) = self.next_result(&mut run).await {
            let result = match result {
                Ok(StatementResult::RowStream { columns, rows, tag }) => {
                    rows.collect().await.map(|batches| StatementResult::Rows {
                        columns,
                        batches,
                        tag,
                    })
                }
                other => other,
            };
            results.push(result);
        }
        results
    }

    fn after_step(
        &mut self,
        run: &mut QueryRun,
        result: SqlResult<StatementResult>,
    ) -> SqlResult<StatementResult> {
        let result = result.map_err(|e| e.locate_in(&run.text));
        match &result {
            Err(_) => self.abort_message(run),
            // The data of COPY FROM STDIN arrives after this message: the statements after it
            // are not run, and an implicit block ends with the COPY (see `finish_copy`).
            Ok(StatementResult::CopyIn(_)) => run.steps.clear(),
            Ok(_) => {}
        }
        result
    }

    /// An error ends the message: the rest is skipped and an implicit block is rolled back.
    fn abort_message(&mut self, run: &mut QueryRun) {
        run.steps.clear();
        if self.implicit_block && !matches!(self.txn, TxnState::Idle) {
            self.implicit_block = false;
            if let TxnState::Block(t) | TxnState::Failed(t) =
                std::mem::replace(&mut self.txn, TxnState::Idle)
            {
                self.engine.db.rollback(t);
            }
            self.undo_ddl(false);
            self.end_transaction_state(false);
        }
    }

    /// After the last statement: an implicit block still open commits; an error doing so is
    /// the message's last result.
    async fn end_message(&mut self, run: &mut QueryRun) -> Option<SqlResult<StatementResult>> {
        if run.ended || !self.implicit_block || matches!(self.txn, TxnState::Idle) {
            return None;
        }
        run.ended = true;
        self.implicit_block = false;
        match self.commit_block().await {
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// The texts of the `count` statements in `text`, for pg_stat_statements (nothing when it
    /// is off, or when the text does not split into as many statements as the parser found).
    fn statement_texts(&self, text: &str, count: usize) -> Vec<Option<String>> {
        if !self.engine.catalog.tracks_statements() {
            return Vec::new();
        }
        match crate::statement_stats::normalize::split_statements(text) {
            Some(pieces) if pieces.len() == count => {
                pieces.into_iter().map(|p| Some(p.to_string())).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Opens the implicit block of a several-statement message, if no block is open.
    pub(super) fn begin_implicit_block(&mut self) {
        if matches!(self.txn, TxnState::Idle) {
            let isolation = self.default_isolation();
            let read_only = self.settings.get("default_transaction_read_only") == Some("on");
            self.start_block(isolation, read_only);
            self.implicit_block = true;
        }
    }
}

/// Statements that manage the transaction themselves, so they do not open an implicit block:
/// BEGIN would only turn it into an explicit one, and COMMIT and ROLLBACK end what is open.
fn run_outside_implicit_block(stmt: &Statement) -> bool {
    matches!(
        stmt,
        Statement::StartTransaction { .. }
            | Statement::Commit { .. }
            | Statement::Rollback {
                savepoint: None,
                ..
            }
    )
}
