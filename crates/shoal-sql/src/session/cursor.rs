//! SQL cursors: `DECLARE name [BINARY] [NO] SCROLL CURSOR [WITH[OUT] HOLD] FOR query`,
//! `FETCH`/`MOVE` in every direction PostgreSQL has, and `CLOSE name | ALL`, listed in
//! `pg_cursors`. psycopg's and SQLAlchemy's server-side cursors, asyncpg's `cursor()` and
//! migration tools use them.
//!
//! A cursor's rows are computed when it is declared, in the declaring statement's snapshot,
//! and kept in memory: what a cursor returns never depends on what its transaction does
//! after the DECLARE (PostgreSQL's cursors are insensitive too), and a WITH HOLD cursor
//! outlives its transaction as PostgreSQL's does, whose commit materializes it. The cost is
//! that a cursor holds its whole result at once, where PostgreSQL's streams rows from its plan.
//!
//! Transactions end cursors as in PostgreSQL: the end of a transaction closes the cursors
//! declared WITHOUT HOLD, a rollback also closes the WITH HOLD cursors it declared, and
//! ROLLBACK TO SAVEPOINT closes those declared after the savepoint.

use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, UInt32Array};
use datafusion::arrow::compute;
use datafusion::sql::sqlparser::ast::{self, Statement};
use shoal_storage::Transaction;

use super::sql_prepare::statement_name as cursor_name;
use super::{ResultColumn, Session, StatementResult};
use crate::error::{code, SqlError, SqlResult};

/// SQLSTATE 34000.
const INVALID_CURSOR_NAME: &str = "34000";
/// SQLSTATE 42P03.
const DUPLICATE_CURSOR: &str = "42P03";

/// The `FETCH ... INTO` name by which the parser marks a MOVE (see `parse`): a MOVE is parsed
/// as the FETCH of the same motion, and PostgreSQL's SQL has no FETCH INTO.
pub const MOVE_MARKER: &str = "shoal_move";

/// One open cursor.
pub struct SqlCursor {
    pub columns: Vec<ResultColumn>,
    /// All the cursor's rows, in one batch.
    rows: RecordBatch,
    /// PostgreSQL's cursor position: 0 before the first row, `k` on row `k` (1-based), and
    /// `rows + 1` after the last.
    position: usize,
    pub holdable: bool,
    /// False only for NO SCROLL: rows are kept, so any cursor can move backward.
    pub scrollable: bool,
    /// The DECLARE statement, for `pg_cursors`.
    pub text: String,
    pub declared_at_micros: i64,
    /// Declared by the transaction that is still open: its rollback closes the cursor.
    declared_in_open_transaction: bool,
    /// Its place among the session's DECLAREs (see `CursorMarks`).
    declared_seq: u64,
}

/// Where each open savepoint stands in the session's sequence of DECLAREs, so that ROLLBACK
/// TO SAVEPOINT closes the cursors declared after it.
#[derive(Default)]
pub(super) struct CursorMarks {
    next_seq: u64,
    /// The last number given to an `<unnamed portal N>`.
    unnamed_portals: u64,
    /// Savepoint name and the sequence number of the first DECLARE after it.
    savepoints: Vec<(String, u64)>,
}

impl CursorMarks {
    pub(super) fn savepoint(&mut self, name: &str) {
        self.savepoints.push((name.to_string(), self.next_seq));
    }

    pub(super) fn release(&mut self, name: &str) {
        if let Some(at) = self.savepoints.iter().rposition(|(n, _)| n == name) {
            self.savepoints.truncate(at);
        }
    }

    /// ROLLBACK TO: the savepoint stays; returns where its DECLAREs begin.
    fn rollback_to(&mut self, name: &str) -> Option<u64> {
        let at = self.savepoints.iter().rposition(|(n, _)| n == name)?;
        self.savepoints.truncate(at + 1);
        Some(self.savepoints[at].1)
    }
}

/// Where a FETCH or MOVE goes, relative to PostgreSQL's cursor position.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Motion {
    /// Step `n` rows forward (negative: backward), returning each row stepped onto;
    /// `i64::MAX` is ALL.
    Step(i64),
    /// Go to row `n` (negative: from the end, 0: before the first) and return it.
    Absolute(i64),
    /// Go `n` rows from the current one and return the row there (0: the current row again).
    Relative(i64),
}

fn missing(name: &str) -> SqlError {
    SqlError::new(
        INVALID_CURSOR_NAME,
        format!("cursor \"{name}\" does not exist"),
    )
}

fn count_of(value: &ast::ValueWithSpan) -> SqlResult<i64> {
    match &value.value {
        ast::Value::Number(n, _) => n
            .parse::<i64>()
            .map_err(|_| SqlError::syntax(format!("syntax error at or near \"{n}\""))),
        other => Err(SqlError::syntax(format!(
            "syntax error at or near \"{other}\""
        ))),
    }
}

fn motion_of(direction: &ast::FetchDirection) -> SqlResult<Motion> {
    use ast::FetchDirection as D;
    Ok(match direction {
        D::Count { limit } => match count_of(limit)? {
            0 => Motion::Relative(0),
            n => Motion::Step(n),
        },
        D::Next => Motion::Step(1),
        D::Prior => Motion::Step(-1),
        D::First => Motion::Absolute(1),
        D::Last => Motion::Absolute(-1),
        D::Absolute { limit } => Motion::Absolute(count_of(limit)?),
        D::Relative { limit } => Motion::Relative(count_of(limit)?),
        D::All | D::ForwardAll => Motion::Step(i64::MAX),
        D::BackwardAll => Motion::Step(-i64::MAX),
        D::Forward { limit } => match limit.as_ref().map(count_of).transpose()?.unwrap_or(1) {
            0 => Motion::Relative(0),
            n => Motion::Step(n),
        },
        D::Backward { limit } => match limit.as_ref().map(count_of).transpose()?.unwrap_or(1) {
            0 => Motion::Relative(0),
            n => Motion::Step(-n),
        },
    })
}

impl SqlCursor {
    fn row_count(&self) -> usize {
        self.rows.num_rows()
    }

    /// Moves the cursor and returns the row numbers (1-based) it returns, in order.
    fn advance(&mut self, motion: Motion) -> SqlResult<Vec<usize>> {
        let n = self.row_count() as i64;
        let at = self.position as i64;
        let backward = match motion {
            Motion::Step(k) => k < 0,
            Motion::Absolute(k) => {
                let target = if k < 0 { n + 1 + k } else { k };
                target < at
            }
            Motion::Relative(k) => k < 0,
        };
        if backward && !self.scrollable {
            return Err(SqlError::new(
                code::OBJECT_NOT_IN_PREREQUISITE_STATE,
                "cursor can only scan forward",
            )
            .with_hint("Declare it with SCROLL option to enable backward scan."));
        }
        let mut rows = Vec::new();
        let position = match motion {
            Motion::Step(k) if k > 0 => {
                let mut p = at;
                while (rows.len() as i64) < k && p < n {
                    p += 1;
                    rows.push(p as usize);
                }
                // Stepping past the last row leaves the cursor after it.
                if (rows.len() as i64) < k {
                    n + 1
                } else {
                    p
                }
            }
            Motion::Step(k) => {
                let mut p = at;
                while (rows.len() as i64) < -k && p > 1 {
                    p -= 1;
                    rows.push(p as usize);
                }
                if (rows.len() as i64) < -k {
                    0
                } else {
                    p
                }
            }
            Motion::Absolute(k) | Motion::Relative(k) => {
                let target = match motion {
                    Motion::Absolute(_) if k < 0 => n + 1 + k,
                    Motion::Absolute(_) => k,
                    _ => at.saturating_add(k),
                };
                let target = target.clamp(0, n + 1);
                if (1..=n).contains(&target) {
                    rows.push(target as usize);
                }
                target
            }
        };
        self.position = position as usize;
        Ok(rows)
    }

    /// The rows with these 1-based numbers, in this order.
    fn take_rows(&self, numbers: &[usize]) -> SqlResult<RecordBatch> {
        if let (Some(&first), Some(&last)) = (numbers.first(), numbers.last()) {
            if last >= first && last - first + 1 == numbers.len() {
                return Ok(self.rows.slice(first - 1, numbers.len()));
            }
        }
        let indices = UInt32Array::from_iter_values(numbers.iter().map(|&k| (k - 1) as u32));
        Ok(compute::take_record_batch(&self.rows, &indices)?)
    }
}

impl Session {
    /// DECLARE: runs the query in the statement's transaction and keeps its rows.
    pub(super) async fn declare_cursor(
        &mut self,
        txn: &mut Transaction,
        declare: ast::Declare,
    ) -> SqlResult<StatementResult> {
        let text = format!("DECLARE {declare}");
        let [name] = declare.names.as_slice() else {
            return Err(SqlError::syntax("DECLARE names one cursor"));
        };
        let name = cursor_name(name);
        let Some(query) = declare.for_query else {
            return Err(SqlError::syntax("DECLARE CURSOR needs FOR query"));
        };
        if declare.binary == Some(true) {
            return Err(SqlError::unsupported("DECLARE BINARY CURSOR"));
        }
        let holdable = declare.hold == Some(true);
        if !holdable && !self.statement_in_block() {
            return Err(SqlError::new(
                code::NO_ACTIVE_SQL_TRANSACTION,
                "DECLARE CURSOR can only be used in transaction blocks",
            ));
        }
        if self.scope.cursors.lock().contains_key(&name) {
            return Err(SqlError::new(
                DUPLICATE_CURSOR,
                format!("cursor \"{name}\" already exists"),
            ));
        }
        let result = Box::pin(self.run_in_transaction(txn, Statement::Query(query)))
            .await?
            .into_batches()?;
        let (columns, batches) = match result {
            StatementResult::Rows {
                columns, batches, ..
            } => (columns, batches),
            StatementResult::RowStream { columns, rows, .. } => (columns, rows.collect().await?),
            _ => return Err(SqlError::internal("DECLARE's query returned no rows")),
        };
        let scrollable = declare.scroll != Some(false);
        self.keep_cursor(name, columns, &batches, holdable, scrollable, text)?;
        Ok(StatementResult::command("DECLARE CURSOR"))
    }

    /// Keeps a cursor's rows under `name`, in the open transaction.
    fn keep_cursor(
        &mut self,
        name: String,
        columns: Vec<ResultColumn>,
        batches: &[RecordBatch],
        holdable: bool,
        scrollable: bool,
        text: String,
    ) -> SqlResult<()> {
        // A query without rows may come without batches; its cursor never returns a batch.
        let rows = match batches.first() {
            Some(first) => compute::concat_batches(&first.schema(), batches)?,
            None => RecordBatch::new_empty(Arc::new(datafusion::arrow::datatypes::Schema::empty())),
        };
        let cursor = SqlCursor {
            columns,
            rows,
            position: 0,
            holdable,
            scrollable,
            text,
            declared_at_micros: chrono::Utc::now().timestamp_micros(),
            declared_in_open_transaction: true,
            declared_seq: self.cursor_marks.next_seq,
        };
        self.cursor_marks.next_seq += 1;
        self.scope.cursors.lock().insert(name, cursor);
        Ok(())
    }

    /// FETCH, MOVE and CLOSE; None for other statements.
    pub(super) fn cursor_command(
        &mut self,
        stmt: &Statement,
    ) -> Option<SqlResult<StatementResult>> {
        Some(match stmt {
            Statement::Fetch {
                name,
                direction,
                into,
                ..
            } => {
                let is_move = match into {
                    None => false,
                    Some(n) if n.to_string() == MOVE_MARKER => true,
                    Some(n) => {
                        return Some(Err(SqlError::syntax(format!(
                            "syntax error at or near \"{n}\""
                        ))))
                    }
                };
                self.fetch(&cursor_name(name), direction, is_move)
            }
            Statement::Close { cursor } => {
                let mut cursors = self.scope.cursors.lock();
                match cursor {
                    ast::CloseCursor::All => {
                        cursors.clear();
                        Ok(StatementResult::command("CLOSE CURSOR ALL"))
                    }
                    ast::CloseCursor::Specific { name } => {
                        let name = cursor_name(name);
                        match cursors.remove(&name) {
                            Some(_) => Ok(StatementResult::command("CLOSE CURSOR")),
                            None => Err(missing(&name)),
                        }
                    }
                }
            }
            _ => return None,
        })
    }

    pub(crate) fn fetch(
        &mut self,
        name: &str,
        direction: &ast::FetchDirection,
        is_move: bool,
    ) -> SqlResult<StatementResult> {
        let motion = motion_of(direction)?;
        let mut cursors = self.scope.cursors.lock();
        let cursor = cursors.get_mut(name).ok_or_else(|| missing(name))?;
        let numbers = cursor.advance(motion)?;
        if is_move {
            return Ok(StatementResult::Command {
                tag: "MOVE".into(),
                rows: Some(numbers.len()),
                oid: None,
            });
        }
        let batches = match numbers.is_empty() {
            true => vec![],
            false => vec![cursor.take_rows(&numbers)?],
        };
        Ok(StatementResult::Rows {
            columns: cursor.columns.clone(),
            batches,
            tag: "FETCH",
        })
    }

    /// The result columns of `FETCH ... FROM name`, for Describe; None for anything else.
    pub(super) fn fetch_columns(&self, stmt: &Statement) -> Option<Vec<ResultColumn>> {
        let Statement::Fetch { name, into, .. } = stmt else {
            return None;
        };
        if into.is_some() {
            return None;
        }
        let cursors = self.scope.cursors.lock();
        cursors.get(&cursor_name(name)).map(|c| c.columns.clone())
    }

    /// The result columns of the cursor of this exact name, for Describe of it as a portal.
    pub fn cursor_columns(&self, name: &str) -> Option<Vec<ResultColumn>> {
        self.scope
            .cursors
            .lock()
            .get(name)
            .map(|c| c.columns.clone())
    }

    /// ROLLBACK TO SAVEPOINT: the cursors declared since the savepoint close.
    pub(super) fn rollback_cursors_to(&mut self, savepoint: &str) {
        if let Some(first) = self.cursor_marks.rollback_to(savepoint) {
            self.scope
                .cursors
                .lock()
                .retain(|_, c| c.declared_seq < first);
        }
    }

    /// The transaction ended: its WITHOUT HOLD cursors close, and so, if it rolled back, do
    /// the WITH HOLD cursors it declared.
    pub(super) fn end_transaction_cursors(&mut self, committed: bool) {
        self.cursor_marks.savepoints.clear();
        let mut cursors = self.scope.cursors.lock();
        if cursors.is_empty() {
            return;
        }
        cursors.retain(|_, c| c.holdable && (committed || !c.declared_in_open_transaction));
        for cursor in cursors.values_mut() {
            cursor.declared_in_open_transaction = false;
        }
    }
}

/// The cursors PL/pgSQL opens are the session's, as PostgreSQL's are portals: a function may
/// return a cursor's name (a `refcursor`) for its caller to FETCH from until the transaction
/// ends.
impl Session {
    pub(crate) fn cursor_is_open(&self, name: &str) -> bool {
        self.scope.cursors.lock().contains_key(name)
    }

    /// OPEN: keeps a query's rows (computed by the caller, in the statement's snapshot) as
    /// the cursor `name`, which is not open.
    pub(crate) fn open_routine_cursor(
        &mut self,
        name: String,
        columns: Vec<ResultColumn>,
        batches: &[RecordBatch],
        scrollable: bool,
        text: String,
    ) -> SqlResult<()> {
        debug_assert!(!self.cursor_is_open(&name), "OPEN checks the name is free");
        self.keep_cursor(name, columns, batches, false, scrollable, text)
    }

    /// A name for a cursor whose variable is NULL when opened, as PostgreSQL makes them.
    pub(crate) fn unnamed_portal_name(&mut self) -> String {
        loop {
            self.cursor_marks.unnamed_portals += 1;
            let name = format!("<unnamed portal {}>", self.cursor_marks.unnamed_portals);
            if !self.cursor_is_open(&name) {
                return name;
            }
        }
    }

    pub(crate) fn close_cursor(&mut self, name: &str) -> SqlResult<()> {
        match self.scope.cursors.lock().remove(name) {
            Some(_) => Ok(()),
            None => Err(missing(name)),
        }
    }
}

/// Whether a FETCH in this direction returns at most one row (PL/pgSQL's FETCH INTO must).
pub(crate) fn fetches_one_row(direction: &ast::FetchDirection) -> SqlResult<bool> {
    Ok(match motion_of(direction)? {
        Motion::Step(k) => k.abs() <= 1,
        Motion::Absolute(_) | Motion::Relative(_) => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int32Array;

    fn cursor(rows: i32, scrollable: bool) -> SqlCursor {
        let batch = RecordBatch::try_from_iter(vec![(
            "v",
            Arc::new(Int32Array::from_iter_values(1..=rows)) as _,
        )])
        .unwrap();
        SqlCursor {
            columns: vec![],
            rows: batch,
            position: 0,
            holdable: false,
            scrollable,
            text: String::new(),
            declared_at_micros: 0,
            declared_in_open_transaction: true,
            declared_seq: 0,
        }
    }

    #[test]
    fn motions_follow_postgres_positions() {
        let mut c = cursor(5, true);
        assert_eq!(c.advance(Motion::Step(2)).unwrap(), vec![1, 2]);
        assert_eq!(c.advance(Motion::Relative(0)).unwrap(), vec![2]);
        assert_eq!(c.advance(Motion::Step(-1)).unwrap(), vec![1]);
        assert_eq!(c.advance(Motion::Step(-1)).unwrap(), Vec::<usize>::new());
        assert_eq!(c.position, 0);
        assert_eq!(c.advance(Motion::Absolute(-1)).unwrap(), vec![5]);
        assert_eq!(c.advance(Motion::Step(3)).unwrap(), Vec::<usize>::new());
        assert_eq!(c.position, 6);
        assert_eq!(c.advance(Motion::Step(-2)).unwrap(), vec![5, 4]);
        assert_eq!(c.advance(Motion::Absolute(9)).unwrap(), Vec::<usize>::new());
        assert_eq!(c.position, 6);
        assert_eq!(c.advance(Motion::Relative(-3)).unwrap(), vec![3]);
        assert_eq!(c.advance(Motion::Step(i64::MAX)).unwrap(), vec![4, 5]);
        assert_eq!(
            c.advance(Motion::Step(-i64::MAX)).unwrap(),
            vec![5, 4, 3, 2, 1]
        );
        assert_eq!(c.position, 0);
    }

    #[test]
    fn no_scroll_cursors_refuse_to_move_backward() {
        let mut c = cursor(3, false);
        assert_eq!(c.advance(Motion::Absolute(2)).unwrap(), vec![2]);
        assert!(c.advance(Motion::Step(-1)).is_err());
        assert!(c.advance(Motion::Absolute(1)).is_err());
        assert_eq!(c.advance(Motion::Step(5)).unwrap(), vec![3]);
    }
}
