//! The server's backends, one per session: what each is doing, as `pg_stat_activity` shows it,
//! and the handles `pg_cancel_backend` and `pg_terminate_backend` reach it through.
//!
//! A session registers itself when it is created and leaves when it is dropped. The protocol
//! layer fills in who the client is, reports each statement's start and the transaction state
//! at each ReadyForQuery, installs the callback that cancels the running statement (the same
//! path a CancelRequest takes), and watches for termination: a terminated backend's running
//! statement is canceled first, then the connection is closed with FATAL 57P01, as PostgreSQL
//! does.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Utc};
use parking_lot::{Mutex, RwLock};

use crate::database_stats::{DatabaseStats, SessionEnd};

/// Every backend of the server, by process id.
#[derive(Default)]
pub struct Backends {
    by_pid: RwLock<BTreeMap<i32, Arc<Backend>>>,
    /// The sessions' counters of pg_stat_database (and its transactions').
    pub stats: Arc<DatabaseStats>,
}

impl Backends {
    /// Registers the backend of a new session.
    pub fn register(&self, pid: i32) -> Arc<Backend> {
        let backend = Arc::new(Backend::new(pid, self.stats.clone()));
        let previous = self.by_pid.write().insert(pid, backend.clone());
        debug_assert!(previous.is_none(), "backend pid {pid} given out twice");
        self.stats.session_started();
        backend
    }

    pub fn remove(&self, pid: i32) {
        if let Some(backend) = self.by_pid.write().remove(&pid) {
            let end = match backend.is_terminated() {
                true => SessionEnd::Killed,
                false => *backend.end.lock(),
            };
            self.stats.session_ended(backend.started_at, end);
        }
    }

    pub fn get(&self, pid: i32) -> Option<Arc<Backend>> {
        self.by_pid.read().get(&pid).cloned()
    }

    /// pg_stat_database's session counters, with the time of the sessions still open (and of
    /// their current state) counted up to now, as PostgreSQL's backends report theirs as they
    /// go.
    pub fn database_totals(&self) -> crate::database_stats::DatabaseTotals {
        let mut totals = self.stats.totals();
        let now = Utc::now();
        let micros =
            |since: DateTime<Utc>| (now - since).num_microseconds().unwrap_or(0).max(0) as u64;
        for backend in self.all() {
            totals.session_time_us += micros(backend.started_at);
            let a = backend.activity.lock();
            match a.state {
                BackendState::Active => totals.active_time_us += micros(a.state_change),
                BackendState::IdleInTransaction | BackendState::IdleInTransactionAborted => {
                    totals.idle_in_transaction_time_us += micros(a.state_change)
                }
                BackendState::Idle => {}
            }
        }
        totals
    }

    /// Every backend, in process id order.
    pub fn all(&self) -> Vec<Arc<Backend>> {
        self.by_pid.read().values().cloned().collect()
    }
}

/// A backend's state, as pg_stat_activity.state names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendState {
    /// Running a statement.
    Active,
    Idle,
    IdleInTransaction,
    IdleInTransactionAborted,
}

impl BackendState {
    pub fn name(self) -> &'static str {
        match self {
            BackendState::Active => "active",
            BackendState::Idle => "idle",
            BackendState::IdleInTransaction => "idle in transaction",
            BackendState::IdleInTransactionAborted => "idle in transaction (aborted)",
        }
    }
}

/// Who the client is and what the backend is doing.
#[derive(Clone, Debug)]
pub struct Activity {
    pub user: String,
    pub database: String,
    pub application_name: String,
    /// The client's address and port; None on a Unix socket.
    pub client: Option<std::net::SocketAddr>,
    pub state: BackendState,
    /// The running statement, or the last one when idle.
    pub query: String,
    pub query_start: Option<DateTime<Utc>>,
    pub xact_start: Option<DateTime<Utc>>,
    pub state_change: DateTime<Utc>,
    /// The prepared statement an Execute runs (`<unnamed>` for the unnamed one); None for a
    /// simple query. For the log line of a slow statement.
    pub executing: Option<String>,
}

/// Cancels the statement a backend is running, if any.
type Canceller = Box<dyn Fn() + Send + Sync>;

pub struct Backend {
    pub pid: i32,
    pub started_at: DateTime<Utc>,
    activity: Mutex<Activity>,
    canceller: OnceLock<Canceller>,
    terminate_requested: AtomicBool,
    terminate: tokio::sync::Notify,
    /// The client has been sent the FATAL error of its termination.
    termination_reported: AtomicBool,
    stats: Arc<DatabaseStats>,
    /// How the session ends, unless pg_terminate_backend ends it: a connection that closes
    /// without the protocol layer saying otherwise was lost.
    end: Mutex<SessionEnd>,
    /// The session's log_min_duration_statement in milliseconds; -1: no statement is logged.
    log_min_duration_ms: std::sync::atomic::AtomicI64,
    /// The id of the session's latest transaction (0: none yet), for `lock_waits`.
    txn_id: std::sync::atomic::AtomicU64,
}

impl Backend {
    fn new(pid: i32, stats: Arc<DatabaseStats>) -> Backend {
        let now = Utc::now();
        Backend {
            pid,
            started_at: now,
            activity: Mutex::new(Activity {
                user: String::new(),
                database: String::new(),
                application_name: String::new(),
                client: None,
                state: BackendState::Idle,
                query: String::new(),
                query_start: None,
                xact_start: None,
                state_change: now,
                executing: None,
            }),
            canceller: OnceLock::new(),
            terminate_requested: AtomicBool::new(false),
            terminate: tokio::sync::Notify::new(),
            termination_reported: AtomicBool::new(false),
            stats,
            end: Mutex::new(SessionEnd::Abandoned),
            log_min_duration_ms: std::sync::atomic::AtomicI64::new(-1),
            txn_id: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The session's statement runs in transaction `id`.
    pub fn set_txn_id(&self, id: u64) {
        self.txn_id.store(id, Ordering::Relaxed);
    }

    pub fn txn_id(&self) -> u64 {
        self.txn_id.load(Ordering::Relaxed)
    }

    pub fn set_log_min_duration_ms(&self, ms: i64) {
        self.log_min_duration_ms.store(ms, Ordering::Relaxed);
    }

    /// An Execute of the prepared statement `name` starts running `sql`.
    pub fn start_execute(&self, sql: &str, name: &str) {
        self.start_query(sql);
        self.activity.lock().executing = Some(match name {
            "" => "<unnamed>".to_string(),
            name => name.to_string(),
        });
    }

    /// How the session is ending: the client said goodbye, or a FATAL error ends it.
    pub fn set_end(&self, end: SessionEnd) {
        *self.end.lock() = end;
    }

    pub fn activity(&self) -> Activity {
        self.activity.lock().clone()
    }

    /// The client, as its startup message and socket tell.
    pub fn set_client(
        &self,
        user: &str,
        database: &str,
        application_name: &str,
        client: Option<std::net::SocketAddr>,
    ) {
        let mut a = self.activity.lock();
        a.user = user.to_string();
        a.database = database.to_string();
        a.application_name = application_name.to_string();
        a.client = client;
    }

    pub fn set_application_name(&self, name: &str) {
        let mut a = self.activity.lock();
        if a.application_name != name {
            a.application_name = name.to_string();
        }
    }

    /// A statement starts: `sql` is its text.
    pub fn start_query(&self, sql: &str) {
        let now = Utc::now();
        let mut a = self.activity.lock();
        match a.state {
            BackendState::Active => self.stats.active(a.state_change, now),
            BackendState::IdleInTransaction | BackendState::IdleInTransactionAborted => {
                self.stats.idle_in_transaction(a.state_change, now)
            }
            BackendState::Idle => {}
        }
        a.state = BackendState::Active;
        a.query.clear();
        a.query.push_str(sql);
        a.query_start = Some(now);
        a.xact_start.get_or_insert(now);
        a.state_change = now;
        a.executing = None;
    }

    /// The backend waits for the client again, in transaction state `status` (ReadyForQuery's
    /// `I`, `T` or `E`).
    pub fn ready_for_query(&self, status: u8) {
        let state = match status {
            b'T' => BackendState::IdleInTransaction,
            b'E' => BackendState::IdleInTransactionAborted,
            _ => BackendState::Idle,
        };
        let mut a = self.activity.lock();
        let mut slow = None;
        if a.state != state {
            let now = Utc::now();
            if a.state == BackendState::Active {
                self.stats.active(a.state_change, now);
                if let Some(started) = a.query_start {
                    self.stats.statement(started, now);
                    let threshold_ms = self.log_min_duration_ms.load(Ordering::Relaxed);
                    let ms = (now - started).num_microseconds().unwrap_or(i64::MAX) as f64 / 1e3;
                    if threshold_ms >= 0 && ms >= threshold_ms as f64 {
                        slow = Some((ms, a.query.clone(), a.executing.clone()));
                    }
                }
            }
            a.state = state;
            a.state_change = now;
        }
        if state == BackendState::Idle {
            a.xact_start = None;
        }
        drop(a);
        // PostgreSQL's log line for log_min_duration_statement.
        match slow {
            Some((ms, query, None)) => {
                tracing::info!(target: "shoal::statement", pid = self.pid, "duration: {ms:.3} ms  statement: {query}")
            }
            Some((ms, query, Some(name))) => {
                tracing::info!(target: "shoal::statement", pid = self.pid, "duration: {ms:.3} ms  execute {name}: {query}")
            }
            None => {}
        }
    }

    /// Installs what cancels the running statement (once, at startup).
    pub fn set_canceller(&self, cancel: impl Fn() + Send + Sync + 'static) {
        let _ = self.canceller.set(Box::new(cancel));
    }

    /// pg_cancel_backend: cancels the running statement, if any. False when the backend has
    /// no way to be reached (a session without a client).
    pub fn cancel(&self) -> bool {
        match self.canceller.get() {
            Some(cancel) => {
                cancel();
                true
            }
            None => false,
        }
    }

    /// pg_terminate_backend: asks the connection to close, canceling its statement first.
    pub fn terminate(&self) -> bool {
        self.terminate_requested.store(true, Ordering::SeqCst);
        self.terminate.notify_waiters();
        self.cancel();
        self.canceller.get().is_some()
    }

    /// The error that ends a terminated backend's statement (and, FATAL, its connection);
    /// `termination_reported` is true once it is handed out.
    pub fn termination_error(&self) -> crate::error::SqlError {
        self.termination_reported.store(true, Ordering::SeqCst);
        crate::error::SqlError::new(
            crate::error::code::ADMIN_SHUTDOWN,
            "terminating connection due to administrator command",
        )
    }

    pub fn termination_reported(&self) -> bool {
        self.termination_reported.load(Ordering::SeqCst)
    }

    pub fn is_terminated(&self) -> bool {
        self.terminate_requested.load(Ordering::SeqCst)
    }

    /// Completes once the backend has been told to terminate.
    pub async fn terminated(&self) {
        loop {
            let notified = self.terminate.notified();
            tokio::pin!(notified);
            // Registered before the flag is read, so a terminate in between is not missed.
            notified.as_mut().enable();
            if self.is_terminated() {
                return;
            }
            notified.await;
        }
    }
}
