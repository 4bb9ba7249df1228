//! The database's counters for pg_stat_database that no table holds: transactions, deadlocks,
//! and sessions (how many, how they ended, and the time they spent active and idle in a
//! transaction). Rows read and written are the tables' counters, summed
//! (`shoal_storage::activity`). Counted from the server's start; `stats_reset` says when.

use std::sync::atomic::AtomicU64;

use chrono::{DateTime, Utc};
use shoal_storage::activity::{add, Striped};

#[derive(Default)]
pub struct DatabaseCounters {
    xact_commit: AtomicU64,
    xact_rollback: AtomicU64,
    deadlocks: AtomicU64,
    sessions: AtomicU64,
    sessions_abandoned: AtomicU64,
    sessions_fatal: AtomicU64,
    sessions_killed: AtomicU64,
    session_time_us: AtomicU64,
    active_time_us: AtomicU64,
    idle_in_transaction_time_us: AtomicU64,
    /// Statements (a Query message, or an extended-protocol exchange up to its Sync) by how
    /// long they ran: one count per bucket of `LATENCY_BUCKETS_S`, the last for longer ones.
    latency_buckets: [AtomicU64; LATENCY_BUCKETS_S.len() + 1],
    latency_sum_us: AtomicU64,
}

/// The upper bounds, in seconds, of the statement latency histogram's buckets.
pub const LATENCY_BUCKETS_S: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// The statement latency histogram: statements per bucket (not cumulative; the last bucket is
/// the ones longer than the last bound), and their total time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Latencies {
    pub buckets: Vec<u64>,
    pub sum_us: u64,
}

/// How a session ended, as pg_stat_database sorts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionEnd {
    /// The client said goodbye (a Terminate message).
    Normal,
    /// The connection was lost.
    Abandoned,
    /// A FATAL error ended it (an idle timeout, a protocol violation).
    Fatal,
    /// pg_terminate_backend ended it.
    Killed,
}

/// The counters' totals, as pg_stat_database names them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatabaseTotals {
    pub xact_commit: u64,
    pub xact_rollback: u64,
    pub deadlocks: u64,
    pub sessions: u64,
    pub sessions_abandoned: u64,
    pub sessions_fatal: u64,
    pub sessions_killed: u64,
    pub session_time_us: u64,
    pub active_time_us: u64,
    pub idle_in_transaction_time_us: u64,
}

pub struct DatabaseStats {
    counters: Striped<DatabaseCounters>,
    pub stats_reset: DateTime<Utc>,
}

impl Default for DatabaseStats {
    fn default() -> Self {
        DatabaseStats {
            counters: Striped::default(),
            stats_reset: Utc::now(),
        }
    }
}

fn micros_since(start: DateTime<Utc>, end: DateTime<Utc>) -> u64 {
    (end - start).num_microseconds().unwrap_or(0).max(0) as u64
}

impl DatabaseStats {
    pub fn transaction_ended(&self, committed: bool) {
        let c = self.counters.local();
        add(
            if committed {
                &c.xact_commit
            } else {
                &c.xact_rollback
            },
            1,
        );
    }

    pub fn deadlock(&self) {
        add(&self.counters.local().deadlocks, 1);
    }

    pub fn session_started(&self) {
        add(&self.counters.local().sessions, 1);
    }

    pub fn session_ended(&self, started: DateTime<Utc>, end: SessionEnd) {
        let c = self.counters.local();
        add(&c.session_time_us, micros_since(started, Utc::now()));
        match end {
            SessionEnd::Normal => {}
            SessionEnd::Abandoned => add(&c.sessions_abandoned, 1),
            SessionEnd::Fatal => add(&c.sessions_fatal, 1),
            SessionEnd::Killed => add(&c.sessions_killed, 1),
        }
    }

    /// A session spent `start..end` running statements.
    pub fn active(&self, start: DateTime<Utc>, end: DateTime<Utc>) {
        add(
            &self.counters.local().active_time_us,
            micros_since(start, end),
        );
    }

    /// A session spent `start..end` idle inside a transaction block.
    pub fn idle_in_transaction(&self, start: DateTime<Utc>, end: DateTime<Utc>) {
        add(
            &self.counters.local().idle_in_transaction_time_us,
            micros_since(start, end),
        );
    }

    /// A statement ran from `start` to `end`.
    pub fn statement(&self, start: DateTime<Utc>, end: DateTime<Utc>) {
        let us = micros_since(start, end);
        let seconds = us as f64 / 1e6;
        let bucket = LATENCY_BUCKETS_S
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(LATENCY_BUCKETS_S.len());
        let c = self.counters.local();
        add(&c.latency_buckets[bucket], 1);
        add(&c.latency_sum_us, us);
    }

    pub fn latencies(&self) -> Latencies {
        let c = &self.counters;
        Latencies {
            buckets: (0..=LATENCY_BUCKETS_S.len())
                .map(|b| c.sum(|c| &c.latency_buckets[b]))
                .collect(),
            sum_us: c.sum(|c| &c.latency_sum_us),
        }
    }

    pub fn totals(&self) -> DatabaseTotals {
        let c = &self.counters;
        DatabaseTotals {
            xact_commit: c.sum(|c| &c.xact_commit),
            xact_rollback: c.sum(|c| &c.xact_rollback),
            deadlocks: c.sum(|c| &c.deadlocks),
            sessions: c.sum(|c| &c.sessions),
            sessions_abandoned: c.sum(|c| &c.sessions_abandoned),
            sessions_fatal: c.sum(|c| &c.sessions_fatal),
            sessions_killed: c.sum(|c| &c.sessions_killed),
            session_time_us: c.sum(|c| &c.session_time_us),
            active_time_us: c.sum(|c| &c.active_time_us),
            idle_in_transaction_time_us: c.sum(|c| &c.idle_in_transaction_time_us),
        }
    }
}
