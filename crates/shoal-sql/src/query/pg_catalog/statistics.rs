//! The cumulative statistics views over Shoal's counters: pg_stat_database,
//! pg_stat_user_tables / pg_stat_all_tables, pg_stat_user_indexes / pg_stat_all_indexes and
//! pg_statio_user_indexes / pg_statio_all_indexes. Every table is a user table (the system
//! catalogs are not tables in Shoal). Columns about disk blocks, buffer hits, temporary files,
//! HOT updates, vacuum and analyze runs have no counterpart in memory and are zero (or NULL
//! where PostgreSQL leaves them NULL); `n_dead_tup` is zero because garbage collection runs
//! continuously rather than on a schedule.
//!
//! Also the server-wide views monitoring tools read: pg_stat_bgwriter (the checkpoints),
//! pg_stat_wal (the redo log's counters), pg_stat_archiver and pg_stat_database_conflicts
//! (nothing to count yet), pg_stat_replication (on a replication group's primary),
//! pg_stat_wal_receiver (on its standbys) and pg_replication_slots (none: Raft keeps the log a
//! standby needs).

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use shoal_storage::activity::{IndexActivity, TableActivity};
use shoal_storage::catalog::{AccessMethod, IndexDef, TableDef};

use super::{i64v, null_text, o, s, TableBuilder, DATABASE_OID, I32, I64, OID, T};
use crate::query::scope::PlanScope;

fn timestamptz() -> ArrowType {
    ArrowType::Timestamp(
        datafusion::arrow::datatypes::TimeUnit::Microsecond,
        Some("UTC".into()),
    )
}

fn no_time() -> ScalarValue {
    ScalarValue::TimestampMicrosecond(None, Some("UTC".into()))
}

fn count(n: u64) -> ScalarValue {
    i64v(n as i64)
}

fn f64v(v: f64) -> ScalarValue {
    ScalarValue::Float64(Some(v))
}

/// A table's counters and live row estimate; None for a table that is gone.
fn table_activity(scope: &PlanScope, table: &TableDef) -> Option<(TableActivity, u64)> {
    table_counters(scope, table, false)
}

/// A table's counters and, if `count_live` is set, its live rows as the statement sees them
/// (a walk over a row table: `n_live_tup` is exact, where PostgreSQL's is an estimate).
fn table_counters(
    scope: &PlanScope,
    table: &TableDef,
    count_live: bool,
) -> Option<(TableActivity, u64)> {
    let db = &scope.engine.db;
    let snapshot = count_live.then(|| scope.snapshot());
    match table.access_method {
        AccessMethod::Heap => {
            let t = db.table(table.oid as u64)?;
            let live = snapshot.map_or(0, |s| t.live_row_count(&s));
            Some((t.activity(), live as u64))
        }
        AccessMethod::Columnar => {
            let t = db.column_table(table.oid as u64)?;
            let live = snapshot.map_or(0, |s| t.live_row_count(&s));
            Some((t.activity(), live as u64))
        }
    }
}

/// An index's counters (zero for an index kept in the catalog only).
fn index_activity(scope: &PlanScope, table: u32, index: u32) -> IndexActivity {
    scope
        .engine
        .db
        .table(table as u64)
        .and_then(|t| t.index_activity(index as u64))
        .unwrap_or_default()
}

/// The statistics view `name` (one of those the module names).
pub(super) fn view(scope: &Arc<PlanScope>, name: &str) -> Arc<dyn TableProvider> {
    let rows: fn(Option<&PlanScope>) -> Arc<dyn TableProvider> = match name {
        "pg_stat_database" => pg_stat_database,
        "pg_stat_database_conflicts" => pg_stat_database_conflicts,
        "pg_stat_bgwriter" => pg_stat_bgwriter,
        "pg_stat_wal" => pg_stat_wal,
        "pg_stat_archiver" => pg_stat_archiver,
        "pg_stat_replication" => pg_stat_replication,
        "pg_stat_wal_receiver" => pg_stat_wal_receiver,
        "pg_replication_slots" => pg_replication_slots,
        "pg_stat_all_tables" | "pg_stat_user_tables" => pg_stat_tables,
        "pg_stat_all_indexes" | "pg_stat_user_indexes" => |s| pg_stat_indexes(s, false),
        _ => |s| pg_stat_indexes(s, true),
    };
    let scope = scope.clone();
    super::live::live_view_of(rows(None).schema(), move || rows(Some(&scope)))
}

/// The tables and indexes, copied out so the catalog is not locked while their counters are
/// read.
struct Relations {
    tables: Vec<Arc<TableDef>>,
    indexes: Vec<Arc<IndexDef>>,
}

fn relations(scope: &PlanScope) -> Relations {
    let catalog = scope.engine.catalog.read_recursive();
    Relations {
        tables: catalog.tables.values().cloned().collect(),
        indexes: catalog.indexes.values().cloned().collect(),
    }
}

/// The view's rows, or with no `scope` none (its columns only).
fn pg_stat_tables(scope: Option<&PlanScope>) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("relid", OID),
        ("schemaname", T),
        ("relname", T),
        ("seq_scan", I64),
        ("seq_tup_read", I64),
        ("idx_scan", I64),
        ("idx_tup_fetch", I64),
        ("n_tup_ins", I64),
        ("n_tup_upd", I64),
        ("n_tup_del", I64),
        ("n_tup_hot_upd", I64),
        ("n_live_tup", I64),
        ("n_dead_tup", I64),
        ("n_mod_since_analyze", I64),
        ("n_ins_since_vacuum", I64),
        ("last_vacuum", timestamptz()),
        ("last_autovacuum", timestamptz()),
        ("last_analyze", timestamptz()),
        ("last_autoanalyze", timestamptz()),
        ("vacuum_count", I64),
        ("autovacuum_count", I64),
        ("analyze_count", I64),
        ("autoanalyze_count", I64),
    ]);
    let Some(scope) = scope else {
        return t.build();
    };
    let relations = relations(scope);
    for table in &relations.tables {
        let Some((a, live_rows)) = table_counters(scope, table, true) else {
            continue;
        };
        // As PostgreSQL: the index columns are NULL for a table without indexes.
        let has_index = relations.indexes.iter().any(|i| i.table == table.oid);
        let if_indexed = |n: u64| match has_index {
            true => count(n),
            false => ScalarValue::Int64(None),
        };
        t.row(vec![
            o(table.oid),
            s(&table.schema),
            s(&table.name),
            count(a.seq_scan),
            count(a.seq_tup_read),
            if_indexed(a.idx_scan),
            if_indexed(a.idx_tup_fetch),
            count(a.n_tup_ins),
            count(a.n_tup_upd),
            count(a.n_tup_del),
            count(0),
            count(live_rows),
            count(0),
            count(a.n_tup_ins + a.n_tup_upd + a.n_tup_del),
            count(a.n_tup_ins),
            no_time(),
            no_time(),
            no_time(),
            no_time(),
            count(0),
            count(0),
            count(0),
            count(0),
        ]);
    }
    t.build()
}

/// pg_stat_*_indexes (`io` false) or pg_statio_*_indexes (`io` true); no rows without a
/// `scope`.
fn pg_stat_indexes(scope: Option<&PlanScope>, io: bool) -> Arc<dyn TableProvider> {
    let mut columns = vec![
        ("relid", OID),
        ("indexrelid", OID),
        ("schemaname", T),
        ("relname", T),
        ("indexrelname", T),
    ];
    columns.extend(match io {
        false => [
            ("idx_scan", I64),
            ("idx_tup_read", I64),
            ("idx_tup_fetch", I64),
        ]
        .to_vec(),
        true => [("idx_blks_read", I64), ("idx_blks_hit", I64)].to_vec(),
    });
    let mut t = TableBuilder::new(&columns);
    let Some(scope) = scope else {
        return t.build();
    };
    let relations = relations(scope);
    for index in &relations.indexes {
        let Some(table) = relations.tables.iter().find(|t| t.oid == index.table) else {
            continue;
        };
        let mut row = vec![
            o(table.oid),
            o(index.oid),
            s(&index.schema),
            s(&table.name),
            s(&index.name),
        ];
        if io {
            row.extend([count(0), count(0)]);
        } else {
            let a = index_activity(scope, table.oid, index.oid);
            row.extend([
                count(a.idx_scan),
                count(a.idx_tup_read),
                count(a.idx_tup_fetch),
            ]);
        }
        t.row(row);
    }
    t.build()
}

/// No rows without a `scope`.
fn pg_stat_database(scope: Option<&PlanScope>) -> Arc<dyn TableProvider> {
    let ms = |us: u64| f64v(us as f64 / 1000.0);
    let mut t = TableBuilder::new(&[
        ("datid", OID),
        ("datname", T),
        ("numbackends", I32),
        ("xact_commit", I64),
        ("xact_rollback", I64),
        ("blks_read", I64),
        ("blks_hit", I64),
        ("tup_returned", I64),
        ("tup_fetched", I64),
        ("tup_inserted", I64),
        ("tup_updated", I64),
        ("tup_deleted", I64),
        ("conflicts", I64),
        ("temp_files", I64),
        ("temp_bytes", I64),
        ("deadlocks", I64),
        ("checksum_failures", I64),
        ("checksum_last_failure", timestamptz()),
        ("blk_read_time", ArrowType::Float64),
        ("blk_write_time", ArrowType::Float64),
        ("session_time", ArrowType::Float64),
        ("active_time", ArrowType::Float64),
        ("idle_in_transaction_time", ArrowType::Float64),
        ("sessions", I64),
        ("sessions_abandoned", I64),
        ("sessions_fatal", I64),
        ("sessions_killed", I64),
        ("stats_reset", timestamptz()),
    ]);
    let Some(scope) = scope else {
        return t.build();
    };
    let stats = &scope.engine.backends.stats;
    let stats_reset = ScalarValue::TimestampMicrosecond(
        Some(stats.stats_reset.timestamp_micros()),
        Some("UTC".into()),
    );
    let relations = relations(scope);
    let mut rows = TableActivity::default();
    let mut index_rows_read = 0;
    for table in &relations.tables {
        if let Some((a, _)) = table_activity(scope, table) {
            rows.seq_tup_read += a.seq_tup_read;
            rows.idx_tup_fetch += a.idx_tup_fetch;
            rows.n_tup_ins += a.n_tup_ins;
            rows.n_tup_upd += a.n_tup_upd;
            rows.n_tup_del += a.n_tup_del;
        }
    }
    for index in &relations.indexes {
        index_rows_read += index_activity(scope, index.table, index.oid).idx_tup_read;
    }
    let totals = scope.engine.backends.database_totals();
    let no_count = || ScalarValue::Int64(None);
    // PostgreSQL's row for the objects shared by all databases: none of Shoal's counters
    // belong to it.
    t.row(vec![
        o(0),
        null_text(),
        ScalarValue::Int32(Some(0)),
        count(0),
        count(0),
        count(0),
        count(0),
        count(0),
        count(0),
        count(0),
        count(0),
        count(0),
        count(0),
        count(0),
        count(0),
        count(0),
        no_count(),
        no_time(),
        f64v(0.0),
        f64v(0.0),
        ScalarValue::Float64(None),
        ScalarValue::Float64(None),
        ScalarValue::Float64(None),
        no_count(),
        no_count(),
        no_count(),
        no_count(),
        stats_reset.clone(),
    ]);
    t.row(vec![
        o(DATABASE_OID),
        s("postgres"),
        ScalarValue::Int32(Some(scope.engine.backends.all().len() as i32)),
        count(totals.xact_commit),
        count(totals.xact_rollback),
        count(0),
        count(0),
        count(rows.seq_tup_read + index_rows_read),
        count(rows.idx_tup_fetch),
        count(rows.n_tup_ins),
        count(rows.n_tup_upd),
        count(rows.n_tup_del),
        count(0),
        count(0),
        count(0),
        count(totals.deadlocks),
        no_count(),
        no_time(),
        f64v(0.0),
        f64v(0.0),
        ms(totals.session_time_us),
        ms(totals.active_time_us),
        ms(totals.idle_in_transaction_time_us),
        count(totals.sessions),
        count(totals.sessions_abandoned),
        count(totals.sessions_fatal),
        count(totals.sessions_killed),
        stats_reset,
    ]);
    t.build()
}

fn stats_reset(scope: &PlanScope) -> ScalarValue {
    let at = scope.engine.backends.stats.stats_reset;
    ScalarValue::TimestampMicrosecond(Some(at.timestamp_micros()), Some("UTC".into()))
}

/// Queries canceled by conflicts with recovery, per database: a server that is not a replica
/// has none.
fn pg_stat_database_conflicts(scope: Option<&PlanScope>) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("datid", OID),
        ("datname", T),
        ("confl_tablespace", I64),
        ("confl_lock", I64),
        ("confl_snapshot", I64),
        ("confl_bufferpin", I64),
        ("confl_deadlock", I64),
    ]);
    if scope.is_some() {
        t.row(vec![
            o(DATABASE_OID),
            s("postgres"),
            count(0),
            count(0),
            count(0),
            count(0),
            count(0),
        ]);
    }
    t.build()
}

/// The checkpoints: how many (`checkpoints_timed`: the server's own, after the interval or
/// the log volume; `checkpoints_req`: CHECKPOINT commands) and the time spent writing them.
/// Shoal has no shared buffers: the buffer counters are zero.
fn pg_stat_bgwriter(scope: Option<&PlanScope>) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("checkpoints_timed", I64),
        ("checkpoints_req", I64),
        ("checkpoint_write_time", ArrowType::Float64),
        ("checkpoint_sync_time", ArrowType::Float64),
        ("buffers_checkpoint", I64),
        ("buffers_clean", I64),
        ("maxwritten_clean", I64),
        ("buffers_backend", I64),
        ("buffers_backend_fsync", I64),
        ("buffers_alloc", I64),
        ("stats_reset", timestamptz()),
    ]);
    let Some(scope) = scope else {
        return t.build();
    };
    use std::sync::atomic::Ordering::Relaxed;
    let (timed, requested, write_ms) = scope.engine.durability.as_ref().map_or((0, 0, 0), |d| {
        let c = &d.checkpoints;
        (
            c.timed.load(Relaxed),
            c.requested.load(Relaxed),
            c.write_time_ms.load(Relaxed),
        )
    });
    t.row(vec![
        count(timed),
        count(requested),
        f64v(write_ms as f64),
        f64v(0.0),
        count(0),
        count(0),
        count(0),
        count(0),
        count(0),
        count(0),
        stats_reset(scope),
    ]);
    t.build()
}

/// The redo log since the server started: records and bytes written, batches written and
/// synced (group commit makes one write and one sync of many commits), and the time the syncs
/// took.
fn pg_stat_wal(scope: Option<&PlanScope>) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("wal_records", I64),
        ("wal_fpi", I64),
        ("wal_bytes", ArrowType::LargeBinary),
        ("wal_buffers_full", I64),
        ("wal_write", I64),
        ("wal_sync", I64),
        ("wal_write_time", ArrowType::Float64),
        ("wal_sync_time", ArrowType::Float64),
        ("stats_reset", timestamptz()),
    ]);
    let Some(scope) = scope else {
        return t.build();
    };
    let stats = scope.engine.durability.as_ref().map(|d| d.wal.stats());
    let (records, bytes, batches, flushes, sync_us) = stats.map_or((0, 0, 0, 0, 0), |s| {
        (s.records, s.bytes, s.batches, s.flushes, s.sync_time_us)
    });
    t.row(vec![
        count(records),
        count(0),
        crate::numeric::scalar(Some(&shoal_numeric::Numeric::from_i64(bytes as i64))),
        count(0),
        count(batches),
        count(flushes),
        f64v(0.0),
        f64v(sync_us as f64 / 1000.0),
        stats_reset(scope),
    ]);
    t.build()
}

/// Log archiving (`archive_mode`): the archiver's counters since the server started.
fn pg_stat_archiver(scope: Option<&PlanScope>) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("archived_count", I64),
        ("last_archived_wal", T),
        ("last_archived_time", timestamptz()),
        ("failed_count", I64),
        ("last_failed_wal", T),
        ("last_failed_time", timestamptz()),
        ("stats_reset", timestamptz()),
    ]);
    if let Some(scope) = scope {
        let stats = scope
            .engine
            .durability
            .as_ref()
            .map(|d| d.archiver.stats.lock().clone())
            .unwrap_or_default();
        let time = |t: Option<chrono::DateTime<chrono::Utc>>| match t {
            Some(t) => {
                ScalarValue::TimestampMicrosecond(Some(t.timestamp_micros()), Some("UTC".into()))
            }
            None => no_time(),
        };
        let text = |w: Option<String>| w.map_or_else(null_text, |w| s(&w));
        t.row(vec![
            count(stats.archived_count),
            text(stats.last_archived_wal),
            time(stats.last_archived_time),
            count(stats.failed_count),
            text(stats.last_failed_wal),
            time(stats.last_failed_time),
            stats_reset(scope),
        ]);
    }
    t.build()
}

/// On the primary of a replication group, a row per standby (application name `nodeN`, as
/// `synchronous_standby_names` names it): how far it has the log on disk (sent, write and
/// flush positions alike: a standby answers once a batch is synced) and how far its database
/// applied it, as it last reported. PostgreSQL 15's columns, with positions as text (Shoal has
/// no pg_lsn type) and lags as intervals.
fn pg_stat_replication(scope: Option<&PlanScope>) -> Arc<dyn TableProvider> {
    let interval = ArrowType::Interval(datafusion::arrow::datatypes::IntervalUnit::MonthDayNano);
    let mut t = TableBuilder::new(&[
        ("pid", I32),
        ("usesysid", OID),
        ("usename", T),
        ("application_name", T),
        ("client_addr", T),
        ("client_hostname", T),
        ("client_port", I32),
        ("backend_start", timestamptz()),
        ("backend_xmin", T),
        ("state", T),
        ("sent_lsn", T),
        ("write_lsn", T),
        ("flush_lsn", T),
        ("replay_lsn", T),
        ("write_lag", interval.clone()),
        ("flush_lag", interval.clone()),
        ("replay_lag", interval),
        ("sync_priority", I32),
        ("sync_state", T),
        ("reply_time", timestamptz()),
    ]);
    let followers = scope
        .and_then(|scope| scope.engine.replica.get())
        .map(|replica| replica.followers())
        .unwrap_or_default();
    let no_interval = || ScalarValue::IntervalMonthDayNano(None);
    for f in followers {
        let lsn = f.flushed_lsn.map_or_else(null_text, |l| {
            s(&crate::query::wal_functions::format_lsn(l))
        });
        let replayed = f.applied_lsn.map_or_else(null_text, |l| {
            s(&crate::query::wal_functions::format_lsn(l))
        });
        let host = f.addr.rsplit_once(':').map_or(f.addr.as_str(), |(h, _)| h);
        t.row(vec![
            ScalarValue::Int32(None),
            ScalarValue::UInt32(None),
            null_text(),
            s(&format!("node{}", f.node_id)),
            s(host),
            null_text(),
            ScalarValue::Int32(None),
            no_time(),
            null_text(),
            s(if f.flushed_lsn.is_some() {
                "streaming"
            } else {
                "startup"
            }),
            lsn.clone(),
            lsn.clone(),
            lsn,
            replayed,
            no_interval(),
            no_interval(),
            no_interval(),
            ScalarValue::Int32(Some(1)),
            s("quorum"),
            no_time(),
        ]);
    }
    t.build()
}

/// On a standby of a replication group, one row: the primary it receives the log from and how
/// far it has it on disk. PostgreSQL 15's columns; the timeline columns hold the Raft term.
fn pg_stat_wal_receiver(scope: Option<&PlanScope>) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("pid", I32),
        ("status", T),
        ("receive_start_lsn", T),
        ("receive_start_tli", I32),
        ("written_lsn", T),
        ("flushed_lsn", T),
        ("received_tli", I32),
        ("last_msg_send_time", timestamptz()),
        ("last_msg_receipt_time", timestamptz()),
        ("latest_end_lsn", T),
        ("latest_end_time", timestamptz()),
        ("slot_name", T),
        ("sender_host", T),
        ("sender_port", I32),
        ("conninfo", T),
    ]);
    let replica = scope
        .filter(|scope| scope.engine.in_recovery())
        .and_then(|scope| scope.engine.replica.get());
    if let Some(replica) = replica {
        let received = replica.received_lsn().map_or_else(null_text, |l| {
            s(&crate::query::wal_functions::format_lsn(l))
        });
        let term = ScalarValue::Int32(Some(replica.term().min(i32::MAX as u64) as i32));
        let (status, host, port, conninfo) = match replica.leader_addr() {
            Some((leader, addr)) => {
                let (host, port) = addr.rsplit_once(':').unwrap_or((addr.as_str(), ""));
                (
                    "streaming",
                    s(host),
                    ScalarValue::Int32(port.parse().ok()),
                    s(&format!("node{leader} at {addr}")),
                )
            }
            None => (
                "waiting",
                null_text(),
                ScalarValue::Int32(None),
                null_text(),
            ),
        };
        t.row(vec![
            ScalarValue::Int32(None),
            s(status),
            received.clone(),
            term.clone(),
            received.clone(),
            received.clone(),
            term,
            no_time(),
            no_time(),
            received,
            no_time(),
            null_text(),
            host,
            port,
            conninfo,
        ]);
    }
    t.build()
}

/// Replication slots: none.
fn pg_replication_slots(_scope: Option<&PlanScope>) -> Arc<dyn TableProvider> {
    TableBuilder::new(&[
        ("slot_name", T),
        ("plugin", T),
        ("slot_type", T),
        ("datoid", OID),
        ("database", T),
        ("temporary", ArrowType::Boolean),
        ("active", ArrowType::Boolean),
        ("active_pid", I32),
        ("xmin", T),
        ("catalog_xmin", T),
        ("restart_lsn", T),
        ("confirmed_flush_lsn", T),
        ("wal_status", T),
        ("safe_wal_size", I64),
        ("two_phase", ArrowType::Boolean),
    ])
    .build()
}
