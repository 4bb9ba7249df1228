//! Statements that end early: `statement_timeout`, `lock_timeout` and the client's
//! CancelRequest. All three stop the statement's work by dropping its future at the next await
//! (a lock wait, a DataFusion batch, an async function such as `pg_sleep`) and fail it with
//! SQLSTATE 57014 or 55P03. The session races the statement's work, not the whole statement,
//! so the transaction survives the drop and ends as after any other error: rolled back when it
//! was implicit, a failed block (25P02 until ROLLBACK) otherwise.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures::future::{self, Either, FutureExt};
use shoal_storage::{Transaction, TxnId};

use crate::error::{code, SqlError, SqlResult};
use crate::session::Session;

/// Fires when the client asks to cancel the statement that is running. The protocol layer
/// installs one per query (see `Session::set_cancel_signal`); the session keeps it across the
/// statements of a multi-statement query.
pub struct CancelSignal(
    Pin<Box<dyn Future<Output = ()> + Send + Sync>>,
    /// The backend whose termination (pg_terminate_backend) fires the signal too.
    Option<std::sync::Arc<crate::backends::Backend>>,
);

impl CancelSignal {
    /// A signal that fires when `fired` completes. A future that completes because its sender
    /// went away (a dropped oneshot) must map that to `future::pending()`, not complete.
    pub fn new(fired: impl Future<Output = ()> + Send + Sync + 'static) -> Self {
        CancelSignal(Box::pin(fired), None)
    }

    /// The signal of `backend`'s statements: once the backend is terminated, a statement it
    /// stops fails with the termination's FATAL error rather than 57014.
    pub fn of_backend(mut self, backend: std::sync::Arc<crate::backends::Backend>) -> Self {
        self.1 = Some(backend);
        self
    }

    /// The error of a statement this signal stopped.
    pub(crate) fn error(&self) -> SqlError {
        match &self.1 {
            Some(backend) if backend.is_terminated() => backend.termination_error(),
            _ => user_cancel_error(),
        }
    }
}

impl CancelSignal {
    /// The signal as a future to race against work; it can be polled again after a race it
    /// lost.
    pub(crate) fn as_future(&mut self) -> Pin<&mut (dyn Future<Output = ()> + Send + Sync)> {
        self.0.as_mut()
    }
}

impl std::fmt::Debug for CancelSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CancelSignal")
    }
}

pub fn statement_timeout_error() -> SqlError {
    SqlError::new(
        code::QUERY_CANCELED,
        "canceling statement due to statement timeout",
    )
}

pub fn user_cancel_error() -> SqlError {
    SqlError::new(
        code::QUERY_CANCELED,
        "canceling statement due to user request",
    )
}

pub fn lock_timeout_error() -> SqlError {
    SqlError::new(
        code::LOCK_NOT_AVAILABLE,
        "canceling statement due to lock timeout",
    )
}

/// Runs `work` unless `timeout_ms` (0: no limit) passes or `cancel` fires first. A fired
/// signal is spent: the next statement of the same query runs normally, as in PostgreSQL,
/// where a cancel interrupts only what runs when it arrives.
pub async fn interruptible<T>(
    timeout_ms: u64,
    cancel: &mut Option<CancelSignal>,
    work: impl Future<Output = SqlResult<T>>,
) -> SqlResult<T> {
    if timeout_ms == 0 && cancel.is_none() {
        return work.await;
    }
    let stopped = {
        let timer = std::pin::pin!(async {
            if timeout_ms == 0 {
                future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_millis(timeout_ms)).await;
        });
        let stop = std::pin::pin!(async {
            let Some(signal) = cancel.as_mut() else {
                timer.await;
                return Stop::TimedOut;
            };
            match future::select(signal.0.as_mut(), timer).await {
                Either::Left(_) => Stop::Canceled,
                Either::Right(_) => Stop::TimedOut,
            }
        });
        match future::select(std::pin::pin!(work), stop).await {
            Either::Left((result, _)) => return result,
            Either::Right((stopped, _)) => stopped,
        }
    };
    match stopped {
        Stop::TimedOut => Err(statement_timeout_error()),
        Stop::Canceled => {
            let error = cancel.take().map_or_else(user_cancel_error, |c| c.error());
            Err(error)
        }
    }
}

enum Stop {
    TimedOut,
    Canceled,
}

impl Session {
    /// Waits until the transaction `holder`, which holds a row this statement needs, ends;
    /// fails with 55P03 after `lock_timeout` (0: wait as long as it takes) and with 40P01 if
    /// the wait would close a deadlock.
    pub async fn wait_for_row_holder(&self, txn: &Transaction, holder: TxnId) -> SqlResult<()> {
        self.within_lock_timeout(self.engine.db.wait_for(txn, holder))
            .await
    }

    async fn within_lock_timeout(
        &self,
        wait: impl Future<Output = Result<(), shoal_storage::StorageError>>,
    ) -> SqlResult<()> {
        let timeout_ms = self.settings.lock_timeout_ms();
        if timeout_ms == 0 {
            return Ok(wait.await?);
        }
        match tokio::time::timeout(Duration::from_millis(timeout_ms), wait).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(lock_timeout_error()),
        }
    }
}

/// A statement's waits for the lock of one row. The first wait joins the row's queue of
/// waiters, and the place is kept across the statement's retries until this is dropped (once
/// the row is locked or given up), so waiters get a row in the order they came, as in
/// PostgreSQL: a job queue's workers are served first come, first served.
#[derive(Default)]
pub struct RowWait {
    ticket: Option<shoal_storage::RowTicket>,
}

impl RowWait {
    /// Waits for the transactions ahead in the row's queue, then for `holder`; the caller
    /// retries the row afterwards, which finds the row's new state (or its new holder).
    pub async fn wait(
        &mut self,
        session: &Session,
        txn: &Transaction,
        row: &shoal_storage::RowRef,
        holder: TxnId,
    ) -> SqlResult<()> {
        let db = &session.engine.db;
        let ticket = self
            .ticket
            .get_or_insert_with(|| db.queue_for_row(txn, row));
        session
            .within_lock_timeout(db.wait_for_turn(ticket))
            .await?;
        session.wait_for_row_holder(txn, holder).await
    }
}

/// Turns a oneshot-style receiver (which also completes, with an error, when its sender is
/// dropped unfired) into a `CancelSignal` that fires only on a real send.
pub fn cancel_signal_from<F, E>(receiver: F) -> CancelSignal
where
    F: Future<Output = Result<(), E>> + Send + Sync + 'static,
{
    CancelSignal::new(receiver.then(|r| match r {
        Ok(()) => Either::Left(future::ready(())),
        Err(_) => Either::Right(future::pending()),
    }))
}
