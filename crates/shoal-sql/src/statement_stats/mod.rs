//! pg_stat_statements: how often each statement ran, how long it took and how many rows it
//! gave, server-wide, as PostgreSQL 15's extension of that name counts them. It counts once
//! `CREATE EXTENSION pg_stat_statements` has run (Shoal needs no shared_preload_libraries)
//! and while the session's `pg_stat_statements.track` is not `none`.
//!
//! A statement is counted when it completes (its last row or its command tag sent), under its
//! normalized text (`normalize`): executions that differ only in their constants share an
//! entry. Failed statements are not counted, as in PostgreSQL. Entries are kept in memory
//! only, up to `pg_stat_statements.max`; past it the least called twentieth is dropped (the
//! `dealloc` count of pg_stat_statements_info says how often).
//!
//! The session marks where a statement starts (`Pending`) and the protocol layer says when
//! it completes; `views` makes the view and the reset function.

pub mod normalize;
pub mod views;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use parking_lot::Mutex;

pub use normalize::{normalize, NormalizedStatement};

/// The extension's name and the version Shoal's view and functions match.
pub const EXTENSION: &str = "pg_stat_statements";
pub const VERSION: &str = "1.10";
pub const DESCRIPTION: &str =
    "track planning and execution statistics of all SQL statements executed";

/// pg_stat_statements.max unless set.
pub const DEFAULT_MAX_ENTRIES: usize = 5000;

/// One entry's key, as PostgreSQL keys them (the database is always Shoal's one database).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EntryKey {
    pub userid: u32,
    pub queryid: i64,
    pub toplevel: bool,
}

/// One entry's counters. Times are in milliseconds, as the view shows them.
#[derive(Clone, Debug)]
pub struct Entry {
    pub query: String,
    pub calls: i64,
    pub total_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// The sum of squared differences from the mean (Welford's), for the standard deviation.
    pub sum_var_ms: f64,
    pub rows: i64,
}

impl Entry {
    fn new(query: String) -> Entry {
        Entry {
            query,
            calls: 0,
            total_ms: 0.0,
            min_ms: 0.0,
            max_ms: 0.0,
            mean_ms: 0.0,
            sum_var_ms: 0.0,
            rows: 0,
        }
    }

    fn add(&mut self, ms: f64, rows: u64) {
        self.calls += 1;
        self.total_ms += ms;
        if self.calls == 1 {
            self.min_ms = ms;
            self.max_ms = ms;
        } else {
            self.min_ms = self.min_ms.min(ms);
            self.max_ms = self.max_ms.max(ms);
        }
        let old_mean = self.mean_ms;
        self.mean_ms += (ms - old_mean) / self.calls as f64;
        self.sum_var_ms += (ms - old_mean) * (ms - self.mean_ms);
        self.rows = self.rows.saturating_add(rows as i64);
    }

    /// The population standard deviation, as PostgreSQL's stddev_exec_time.
    pub fn stddev_ms(&self) -> f64 {
        match self.calls {
            0 | 1 => 0.0,
            n => (self.sum_var_ms / n as f64).sqrt(),
        }
    }
}

pub struct StatementStats {
    entries: Mutex<HashMap<EntryKey, Entry>>,
    max_entries: AtomicUsize,
    /// How many times entries were dropped to make room.
    dealloc: AtomicI64,
    stats_reset: Mutex<DateTime<Utc>>,
}

impl Default for StatementStats {
    fn default() -> Self {
        StatementStats {
            entries: Mutex::new(HashMap::new()),
            max_entries: AtomicUsize::new(DEFAULT_MAX_ENTRIES),
            dealloc: AtomicI64::new(0),
            stats_reset: Mutex::new(Utc::now()),
        }
    }
}

impl StatementStats {
    pub fn set_max_entries(&self, max: usize) {
        self.max_entries.store(max.max(100), Ordering::Relaxed);
    }

    /// Counts one completed execution of `normalized` by role `userid`, which completed with
    /// command tag `tag` and `rows`.
    pub fn record(
        &self,
        userid: u32,
        normalized: &NormalizedStatement,
        elapsed: Duration,
        tag: &str,
        rows: u64,
    ) {
        let rows = counted_rows(normalized.utility, tag, rows);
        let key = EntryKey {
            userid,
            queryid: normalized.queryid,
            toplevel: true,
        };
        let ms = elapsed.as_secs_f64() * 1000.0;
        let mut entries = self.entries.lock();
        if !entries.contains_key(&key) && entries.len() >= self.max_entries.load(Ordering::Relaxed)
        {
            self.make_room(&mut entries);
        }
        entries
            .entry(key)
            .or_insert_with(|| Entry::new(normalized.text.clone()))
            .add(ms, rows);
    }

    /// Drops the least called twentieth of the entries.
    fn make_room(&self, entries: &mut HashMap<EntryKey, Entry>) {
        let mut calls: Vec<(i64, EntryKey)> = entries.iter().map(|(k, e)| (e.calls, *k)).collect();
        calls.sort_unstable_by_key(|(c, _)| *c);
        let drop = (entries.len() / 20).max(1);
        for (_, key) in calls.into_iter().take(drop) {
            entries.remove(&key);
        }
        self.dealloc.fetch_add(1, Ordering::Relaxed);
    }

    /// pg_stat_statements_reset(userid, dbid, queryid): drops the entries that match (0
    /// matches any); with all three 0 the view's reset time is now.
    pub fn reset(&self, userid: u32, dbid: u32, queryid: i64) {
        let mut entries = self.entries.lock();
        if dbid != 0 && dbid != crate::query::pg_catalog::DATABASE_OID {
            return;
        }
        entries.retain(|k, _| {
            !((userid == 0 || k.userid == userid) && (queryid == 0 || k.queryid == queryid))
        });
        if userid == 0 && dbid == 0 && queryid == 0 {
            self.dealloc.store(0, Ordering::Relaxed);
            *self.stats_reset.lock() = Utc::now();
        }
    }

    pub fn entries(&self) -> Vec<(EntryKey, Entry)> {
        self.entries
            .lock()
            .iter()
            .map(|(k, e)| (*k, e.clone()))
            .collect()
    }

    /// pg_stat_statements_info: (dealloc, stats_reset).
    pub fn info(&self) -> (i64, DateTime<Utc>) {
        (
            self.dealloc.load(Ordering::Relaxed),
            *self.stats_reset.lock(),
        )
    }
}

/// A statement that has started and will be counted when it completes.
#[derive(Debug)]
pub struct Pending {
    pub started: Instant,
    pub text: String,
}

/// The rows pg_stat_statements counts for a statement that completed with command tag `tag`
/// (its first word) and `rows`: a query's rows, and of utility statements only those of
/// COPY, FETCH and the SELECT-tagged CREATE TABLE AS / SELECT INTO.
fn counted_rows(utility: bool, tag: &str, rows: u64) -> u64 {
    let word = tag.split_whitespace().next().unwrap_or("");
    match utility && !matches!(word, "COPY" | "FETCH" | "SELECT") {
        true => 0,
        false => rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executions_that_differ_in_constants_share_an_entry() {
        let stats = StatementStats::default();
        stats.record(
            10,
            &normalize("SELECT * FROM t WHERE a = 1"),
            Duration::from_millis(2),
            "SELECT",
            1,
        );
        stats.record(
            10,
            &normalize("select * from t where a = 2;"),
            Duration::from_millis(4),
            "SELECT",
            0,
        );
        stats.record(
            11,
            &normalize("SELECT * FROM t WHERE a = 3"),
            Duration::from_millis(1),
            "SELECT",
            1,
        );
        let mut entries = stats.entries();
        entries.sort_by_key(|(k, _)| k.userid);
        assert_eq!(entries.len(), 2, "one entry per role");
        let (_, e) = &entries[0];
        assert_eq!(
            e.query, "SELECT * FROM t WHERE a = $1",
            "the first text seen"
        );
        assert_eq!((e.calls, e.rows), (2, 1));
        assert!((e.mean_ms - 3.0).abs() < 1e-9 && (e.stddev_ms() - 1.0).abs() < 1e-9);
        assert!((e.min_ms - 2.0).abs() < 1e-9 && (e.max_ms - 4.0).abs() < 1e-9);
        stats.reset(11, 0, 0);
        assert_eq!(stats.entries().len(), 1);
    }

    #[test]
    fn a_full_table_drops_its_least_called_entries() {
        let stats = StatementStats::default();
        stats.set_max_entries(100);
        for i in 0..100 {
            for _ in 0..(i + 1) {
                stats.record(
                    10,
                    &normalize(&format!("SELECT c{i} FROM t")),
                    Duration::ZERO,
                    "SELECT",
                    0,
                );
            }
        }
        stats.record(
            10,
            &normalize("SELECT newest FROM t"),
            Duration::ZERO,
            "SELECT",
            0,
        );
        let entries = stats.entries();
        assert_eq!(entries.len(), 96, "five dropped, one added");
        assert!(!entries.iter().any(|(_, e)| e.query == "SELECT c0 FROM t"));
        assert!(entries.iter().any(|(_, e)| e.query == "SELECT c99 FROM t"));
        assert_eq!(stats.info().0, 1);
    }
}
