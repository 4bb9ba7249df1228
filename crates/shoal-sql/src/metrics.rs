//! The server's metrics in Prometheus's text exposition format, for `--metrics-listen`'s
//! `/metrics`: sessions and transactions, statement latency, rows written and read, the redo
//! log, checkpoints, memory (in total, against `shoal.max_memory`, and per table) and garbage
//! collection. Every value is read from counters the server keeps anyway; only the per-table
//! memory walks the tables (as `shoal_memory` does), so a scrape costs about one scan of the
//! database's row headers.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use shoal_storage::catalog::AccessMethod;

use crate::database_stats::LATENCY_BUCKETS_S;
use crate::engine::Engine;

/// Writes metric families: `# HELP` and `# TYPE` once per family, then its samples.
struct Exposition {
    out: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// A family of one unlabelled sample.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }
}

/// A label value as the format wants it: backslash, double quote and newline escaped.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Every metric, rendered.
pub fn render(engine: &Engine) -> String {
    let mut e = Exposition { out: String::new() };
    sessions(engine, &mut e);
    statements(engine, &mut e);
    rows(engine, &mut e);
    redo_log(engine, &mut e);
    memory(engine, &mut e);
    gc(engine, &mut e);
    e.out
}

fn sessions(engine: &Engine, e: &mut Exposition) {
    e.single(
        "shoal_start_time_seconds",
        "gauge",
        "When the server started, in seconds since the Unix epoch.",
        engine.started_at.timestamp_micros() as f64 / 1e6,
    );
    let backends = engine.backends.all();
    e.family(
        "shoal_connections",
        "gauge",
        "Client sessions, by state (as pg_stat_activity.state names them).",
    );
    for state in [
        crate::backends::BackendState::Active,
        crate::backends::BackendState::Idle,
        crate::backends::BackendState::IdleInTransaction,
        crate::backends::BackendState::IdleInTransactionAborted,
    ] {
        let n = backends
            .iter()
            .filter(|b| b.activity().state == state)
            .count();
        e.sample("shoal_connections", &[("state", state.name())], n as f64);
    }
    e.single(
        "shoal_max_connections",
        "gauge",
        "Most client sessions at once (--max-connections).",
        engine.max_connections() as f64,
    );
    let t = engine.backends.database_totals();
    e.single(
        "shoal_sessions_started_total",
        "counter",
        "Client sessions started.",
        t.sessions as f64,
    );
    e.family(
        "shoal_sessions_ended_total",
        "counter",
        "Sessions that did not end with the client's goodbye: the connection was lost (abandoned), a FATAL error ended it, or pg_terminate_backend did (killed).",
    );
    for (how, n) in [
        ("abandoned", t.sessions_abandoned),
        ("fatal", t.sessions_fatal),
        ("killed", t.sessions_killed),
    ] {
        e.sample("shoal_sessions_ended_total", &[("how", how)], n as f64);
    }
    e.family(
        "shoal_transactions_total",
        "counter",
        "Transactions ended, by outcome (autocommit statements count one each).",
    );
    e.sample(
        "shoal_transactions_total",
        &[("outcome", "commit")],
        t.xact_commit as f64,
    );
    e.sample(
        "shoal_transactions_total",
        &[("outcome", "rollback")],
        t.xact_rollback as f64,
    );
    e.single(
        "shoal_deadlocks_total",
        "counter",
        "Deadlocks detected (a transaction failed with 40P01).",
        t.deadlocks as f64,
    );
}

fn statements(engine: &Engine, e: &mut Exposition) {
    let name = "shoal_statement_duration_seconds";
    e.family(
        name,
        "histogram",
        "Time from a statement's arrival to the server's ReadyForQuery (a Query message, or an extended-protocol exchange up to its Sync).",
    );
    let latencies = engine.backends.stats.latencies();
    let mut cumulative = 0;
    for (bucket, n) in latencies.buckets.iter().enumerate() {
        cumulative += n;
        let bound = match LATENCY_BUCKETS_S.get(bucket) {
            Some(b) => b.to_string(),
            None => "+Inf".to_string(),
        };
        e.sample(
            &format!("{name}_bucket"),
            &[("le", &bound)],
            cumulative as f64,
        );
    }
    e.sample(&format!("{name}_sum"), &[], latencies.sum_us as f64 / 1e6);
    e.sample(&format!("{name}_count"), &[], cumulative as f64);
}

fn rows(engine: &Engine, e: &mut Exposition) {
    let (mut ins, mut upd, mut del, mut scanned, mut fetched) = (0, 0, 0, 0, 0);
    let tables: Vec<_> = engine.catalog.read().tables.values().cloned().collect();
    for table in &tables {
        let activity = match table.access_method {
            AccessMethod::Heap => engine.db.table(table.oid as u64).map(|t| t.activity()),
            AccessMethod::Columnar => engine
                .db
                .column_table(table.oid as u64)
                .map(|t| t.activity()),
        };
        if let Some(a) = activity {
            ins += a.n_tup_ins;
            upd += a.n_tup_upd;
            del += a.n_tup_del;
            scanned += a.seq_tup_read;
            fetched += a.idx_tup_fetch;
        }
    }
    e.family(
        "shoal_rows_total",
        "counter",
        "Rows written, by operation; rows read by whole-table scans and fetched by index scans (tables dropped since are not counted).",
    );
    for (op, n) in [
        ("inserted", ins),
        ("updated", upd),
        ("deleted", del),
        ("scanned", scanned),
        ("index_fetched", fetched),
    ] {
        e.sample("shoal_rows_total", &[("operation", op)], n as f64);
    }
}

fn redo_log(engine: &Engine, e: &mut Exposition) {
    let Some(d) = &engine.durability else {
        return;
    };
    let s = d.wal.stats();
    e.single(
        "shoal_wal_records_total",
        "counter",
        "Redo records written and synced.",
        s.records as f64,
    );
    e.single(
        "shoal_wal_bytes_total",
        "counter",
        "Redo log bytes written and synced.",
        s.bytes as f64,
    );
    e.single(
        "shoal_wal_writes_total",
        "counter",
        "Batches written to the log (one write of every commit that arrived meanwhile: group commit).",
        s.batches as f64,
    );
    e.single(
        "shoal_wal_fsyncs_total",
        "counter",
        "fdatasync calls on log segments.",
        s.flushes as f64,
    );
    e.single(
        "shoal_wal_fsync_seconds_total",
        "counter",
        "Time spent in those fdatasync calls.",
        s.sync_time_us as f64 / 1e6,
    );
    e.single(
        "shoal_wal_insert_position_bytes",
        "gauge",
        "Where the next redo record goes (pg_current_wal_lsn() as a number).",
        d.wal.next_lsn() as f64,
    );
    e.single(
        "shoal_wal_flushed_position_bytes",
        "gauge",
        "How far the log is flushed (pg_current_wal_flush_lsn()).",
        d.wal.flushed_lsn() as f64,
    );
    let c = &d.checkpoints;
    e.family(
        "shoal_checkpoints_total",
        "counter",
        "Checkpoints written: timed (the server's, after the interval or the log volume) or requested (CHECKPOINT).",
    );
    e.sample(
        "shoal_checkpoints_total",
        &[("trigger", "timed")],
        c.timed.load(Relaxed) as f64,
    );
    e.sample(
        "shoal_checkpoints_total",
        &[("trigger", "requested")],
        c.requested.load(Relaxed) as f64,
    );
    e.single(
        "shoal_checkpoint_seconds_total",
        "counter",
        "Time spent writing checkpoints.",
        c.write_time_ms.load(Relaxed) as f64 / 1e3,
    );
}

fn memory(engine: &Engine, e: &mut Exposition) {
    let budget = engine.db.memory_budget();
    e.single(
        "shoal_memory_resident_bytes",
        "gauge",
        "The server's resident memory, as shoal.max_memory measures it.",
        budget.used_bytes() as f64,
    );
    if let Some(limit) = budget.limit_bytes() {
        e.single(
            "shoal_memory_limit_bytes",
            "gauge",
            "shoal.max_memory: from here on, writes that add rows fail with 53200.",
            limit as f64,
        );
    }
    e.family(
        "shoal_table_memory_bytes",
        "gauge",
        "Memory each table holds, in its rows and in its indexes (the estimates of shoal_memory).",
    );
    let tables: Vec<_> = engine.catalog.read().tables.values().cloned().collect();
    for table in tables {
        let Some(m) = crate::query::shoal_memory::table_memory(&engine.db, table.oid) else {
            continue;
        };
        for (part, bytes) in [("rows", m.rows_bytes), ("indexes", m.index_bytes)] {
            e.sample(
                "shoal_table_memory_bytes",
                &[
                    ("schema", &table.schema),
                    ("table", &table.name),
                    ("part", part),
                ],
                bytes as f64,
            );
        }
    }
}

fn gc(engine: &Engine, e: &mut Exposition) {
    let t = engine.db.gc_totals();
    e.family(
        "shoal_gc_freed_total",
        "counter",
        "What garbage collection reclaimed: old row versions, dead rows, index entries, column-table segments.",
    );
    for (what, n) in [
        ("versions", &t.versions_freed),
        ("rows", &t.rows_freed),
        ("index_entries", &t.index_entries_freed),
        ("segments", &t.segments_freed),
    ] {
        e.sample(
            "shoal_gc_freed_total",
            &[("what", what)],
            n.load(Relaxed) as f64,
        );
    }
    e.single(
        "shoal_gc_backlog_tables",
        "gauge",
        "Row tables garbage collection has work in (written since their last pass, or holding versions an open snapshot still sees).",
        engine.db.gc_backlog_tables() as f64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label("x\ny"), "x\\ny");
    }
}
