//! A query's result rows on their way to the client, one batch at a time. The query runs on the
//! query runtime (see `query_runtime`) and hands each batch through a channel of
//! `BATCHES_IN_FLIGHT_MAX` batches to the connection, which encodes it into DataRows and writes
//! them to the socket. A client that reads slowly fills its socket, then the connection's write
//! buffer, then the channel, and the query waits there: the server holds a few batches of the
//! result, never the whole result, however large it is or however slowly it is read.
//!
//! Scans take their rows when the plan is made (the statement's snapshot), so the stream needs
//! no transaction: a plain SELECT's implicit transaction ends before its first row is sent.
//! A statement timeout and the client's CancelRequest still reach the stream, which fails with
//! 57014 as the statement would; dropping the stream aborts the query.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::{execute_stream, ExecutionPlan};
use std::panic::AssertUnwindSafe;

use futures::future::{self, Either, FutureExt};
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{pg_errors, query_runtime};
use crate::error::{SqlError, SqlResult};
use crate::interrupt::{self, CancelSignal};

/// Batches produced ahead of the client. One is being encoded while the next is made.
const BATCHES_IN_FLIGHT_MAX: usize = 2;

/// The rows of one query, produced as they are read.
pub struct RowStream {
    batches: mpsc::Receiver<SqlResult<RecordBatch>>,
    producer: query_runtime::AbortOnDrop<()>,
    /// The statement's CancelRequest signal, moved here from the session for as long as rows
    /// are sent; `take_cancel_signal` gives it back for the next statement of the query.
    cancel: Option<CancelSignal>,
    /// When statement_timeout, counted from the statement's start, runs out.
    deadline: Option<Instant>,
    /// Set when the stream failed, so the session fails the transaction block the statement
    /// belonged to (see `Session::settle_stream_failure`).
    failed: Arc<AtomicBool>,
    /// What the query's plan needs alive while it runs: a kept plan whose parameter values
    /// this execution owns (see `kept_plan`).
    held: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl RowStream {
    /// Starts `plan` on the query runtime.
    pub fn start(plan: Arc<dyn ExecutionPlan>, task_ctx: Arc<TaskContext>) -> RowStream {
        let (sender, batches) = mpsc::channel(BATCHES_IN_FLIGHT_MAX);
        let producer = query_runtime::spawn(async move {
            // A panic while the query runs must fail the statement: left to end the task, it
            // would close the channel as the last batch does, and the client would take the
            // rows sent so far for the whole answer.
            let run = AssertUnwindSafe(produce(plan, task_ctx, &sender)).catch_unwind();
            if let Err(panic) = run.await {
                let error = query_panicked(panic.as_ref());
                let _ = sender.send(Err(error)).await;
            }
        });
        RowStream {
            batches,
            producer,
            cancel: None,
            deadline: None,
            failed: Arc::new(AtomicBool::new(false)),
            held: None,
        }
    }

    /// Keeps `value` alive as long as the stream.
    pub fn hold(&mut self, value: Arc<dyn std::any::Any + Send + Sync>) {
        self.held = Some(value);
    }

    /// Lets `cancel` and the statement's `deadline` stop the stream.
    pub fn interrupt_with(&mut self, cancel: Option<CancelSignal>, deadline: Option<Instant>) {
        self.cancel = cancel;
        self.deadline = deadline;
    }

    /// The flag this stream sets when it fails.
    pub(crate) fn failure_flag(&self) -> Arc<AtomicBool> {
        self.failed.clone()
    }

    /// The next batch, None after the last. After an error (the query's, a cancel, a timeout)
    /// the stream ends.
    pub async fn next_batch(&mut self) -> Option<SqlResult<RecordBatch>> {
        let result = match self.next_or_interrupt().await {
            Ok(batch) => batch,
            Err(e) => Some(Err(e)),
        };
        if matches!(result, Some(Err(_))) {
            self.failed.store(true, Ordering::Release);
            self.batches.close();
            self.producer.abort();
        }
        result
    }

    /// Every remaining batch (for callers that need the whole result, as EXPLAIN does).
    pub async fn collect(mut self) -> SqlResult<Vec<RecordBatch>> {
        let mut batches = Vec::new();
        while let Some(batch) = self.next_batch().await {
            batches.push(batch?);
        }
        Ok(batches)
    }

    /// The CancelRequest signal, unless a cancel spent it, for the query's next statement.
    pub fn take_cancel_signal(&mut self) -> Option<CancelSignal> {
        self.cancel.take()
    }

    async fn next_or_interrupt(&mut self) -> SqlResult<Option<SqlResult<RecordBatch>>> {
        let RowStream {
            batches,
            cancel,
            deadline,
            ..
        } = self;
        let receive = std::pin::pin!(batches.recv());
        let deadline = *deadline;
        let timer = std::pin::pin!(async move {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => future::pending().await,
            }
        });
        let stop = std::pin::pin!(async {
            match cancel.as_mut() {
                Some(signal) => match future::select(signal.as_future(), timer).await {
                    Either::Left(_) => Stop::Canceled,
                    Either::Right(_) => Stop::TimedOut,
                },
                None => {
                    timer.await;
                    Stop::TimedOut
                }
            }
        });
        // The interruption is polled first: a query that produces faster than the client
        // reads always has a batch ready, and would otherwise never see its deadline.
        match future::select(stop, receive).await {
            Either::Right((batch, _)) => Ok(batch),
            Either::Left((Stop::TimedOut, _)) => Err(interrupt::statement_timeout_error()),
            Either::Left((Stop::Canceled, _)) => {
                let error = cancel
                    .take()
                    .map_or_else(interrupt::user_cancel_error, |c| c.error());
                Err(error)
            }
        }
    }
}

enum Stop {
    TimedOut,
    Canceled,
}

/// Runs `plan` and sends its batches, then its error if it fails; stops early when the
/// receiving side is gone.
async fn produce(
    plan: Arc<dyn ExecutionPlan>,
    task_ctx: Arc<TaskContext>,
    sender: &mpsc::Sender<SqlResult<RecordBatch>>,
) {
    let mut stream = match execute_stream(plan, task_ctx) {
        Ok(stream) => stream,
        Err(e) => {
            let _ = sender.send(Err(pg_errors::from_datafusion(e))).await;
            return;
        }
    };
    while let Some(batch) = stream.next().await {
        let failed = batch.is_err();
        let batch = batch.map_err(pg_errors::from_datafusion);
        // A closed channel: the client is gone or the statement ended; stop.
        if sender.send(batch).await.is_err() || failed {
            return;
        }
    }
}

impl std::fmt::Debug for RowStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RowStream")
    }
}

/// The error of a query whose execution panicked: the statement fails, the server goes on.
pub(crate) fn query_panicked(panic: &(dyn std::any::Any + Send)) -> SqlError {
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    SqlError::internal(format!("query failed: {message}"))
}
