#!/usr/bin/env python3
"""Monitoring tools, unmodified, against the server (see tests/drivers/run.py for the output
protocol): prometheus-community's postgres_exporter v0.19.1 (built from this folder's go.mod,
its default collectors and default metrics) scraped over HTTP, and the SQL of pgwatch's
`basic` preset (instance_up, db_size, db_stats, wal) run verbatim with psycopg, as pgwatch
cannot be installed here. Before the scrape the cases make activity whose counters they then
look for: a table with 100 inserted rows and 5 key lookups, and a checkpoint."""

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from suite import run_cases  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTER = os.path.join(HERE, ".bin", "postgres_exporter")
# The collectors postgres_exporter v0.19.1 enables by default (collector/*.go).
DEFAULT_COLLECTORS = {
    "database", "locks", "replication", "replication_slot", "roles", "stat_bgwriter",
    "stat_database", "stat_progress_vacuum", "stat_user_tables", "statio_user_tables", "wal",
}
SCRAPE_TIMEOUT_S = 30

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def connect():
    return psycopg.connect(autocommit=True)


def check(ok, what):
    if not ok:
        raise AssertionError(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Exporter:
    """postgres_exporter on a free loopback port, pointed at the server of PGHOST/PGPORT."""

    def __init__(self):
        self.port = free_port()
        dsn = (f"postgresql://{os.environ.get('PGUSER', 'postgres')}@{os.environ['PGHOST']}:"
               f"{os.environ['PGPORT']}/{os.environ.get('PGDATABASE', 'postgres')}?sslmode=disable")
        self.log_path = os.path.join(HERE, ".bin", "exporter.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [EXPORTER, f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=info"],
            env={**os.environ, "DATA_SOURCE_NAME": dsn}, cwd=os.path.join(HERE, ".bin"),
            stdout=self.log, stderr=subprocess.STDOUT)

    def scrape(self):
        deadline = time.time() + SCRAPE_TIMEOUT_S
        while True:
            try:
                url = f"http://127.0.0.1:{self.port}/metrics"
                with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as r:
                    return r.read().decode()
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.2)

    def stop(self):
        """Stops the exporter; returns the errors it logged."""
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()
        with open(self.log_path) as f:
            return [line.strip() for line in f if "level=ERROR" in line]


def samples(metrics, name):
    """The samples of metric `name`: (labels dict, value)."""
    out = []
    for line in metrics.splitlines():
        m = re.match(rf"^{re.escape(name)}(?:\{{(.*)\}})? (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1) or ""))
            out.append((labels, float(m.group(2))))
    return out


def value(metrics, name, **labels):
    found = [v for l, v in samples(metrics, name) if all(l.get(k) == w for k, w in labels.items())]
    check(len(found) == 1, f"{name}{labels}: {len(found)} samples")
    return found[0]


STATE = {}


@case
def activity_to_count():
    with connect() as c:
        c.execute("DROP TABLE IF EXISTS mon_t")
        c.execute("CREATE TABLE mon_t (id int PRIMARY KEY, v text)")
        c.execute("INSERT INTO mon_t SELECT g, 'x' FROM generate_series(1, 100) g")
        for k in range(1, 6):
            c.execute("SELECT v FROM mon_t WHERE id = %s", (k,))
        c.execute("CHECKPOINT")
    exporter = Exporter()
    try:
        STATE["metrics"] = exporter.scrape()
        # A second scrape: counters are read again, collectors run again.
        STATE["metrics"] = exporter.scrape()
    finally:
        STATE["errors"] = exporter.stop()


@case
def exporter_connects():
    m = STATE["metrics"]
    check(value(m, "pg_up") == 1, "pg_up")
    check(value(m, "pg_exporter_last_scrape_error") == 0, "pg_exporter_last_scrape_error")
    static = samples(m, "pg_static")
    check(static and static[0][0].get("short_version", "").startswith("15."), f"pg_static {static}")


@case
def exporter_default_collectors_succeed():
    ran = {l["collector"]: v for l, v in samples(STATE["metrics"], "pg_scrape_collector_success")}
    check(set(ran) == DEFAULT_COLLECTORS, f"collectors {sorted(ran)}")
    failed = sorted(c for c, v in ran.items() if v != 1)
    check(not failed, f"failed collectors {failed}")


@case
def exporter_logs_no_errors():
    check(not STATE["errors"], f"errors: {STATE['errors'][:3]}")


@case
def exporter_table_counters():
    m = STATE["metrics"]
    labels = {"datname": os.environ.get("PGDATABASE", "postgres"), "schemaname": "public",
              "relname": "mon_t"}
    check(value(m, "pg_stat_user_tables_n_tup_ins", **labels) == 100, "n_tup_ins")
    check(value(m, "pg_stat_user_tables_n_live_tup", **labels) == 100, "n_live_tup")
    check(value(m, "pg_stat_user_tables_idx_scan", **labels) >= 5, "idx_scan")
    check(value(m, "pg_stat_user_tables_table_size_bytes", **labels) > 0, "table_size")


@case
def exporter_database_counters():
    m = STATE["metrics"]
    db = os.environ.get("PGDATABASE", "postgres")
    check(value(m, "pg_stat_database_xact_commit", datname=db) > 0, "xact_commit")
    check(value(m, "pg_stat_database_tup_inserted", datname=db) >= 100, "tup_inserted")
    check(value(m, "pg_stat_database_numbackends", datname=db) >= 1, "numbackends")
    check(value(m, "pg_database_size_bytes", datname=db) > 0, "database size")
    check(value(m, "pg_stat_bgwriter_checkpoints_req_total") >= 1, "checkpoints_req")
    check(value(m, "pg_settings_max_connections") > 0, "pg_settings_max_connections")


# pgwatch's `basic` preset for PostgreSQL 15: cybertec-postgresql/pgwatch,
# internal/metrics/metrics.yaml (commit 021b593), verbatim.
PGWATCH_INSTANCE_UP = """select /* pgwatch_generated */
    (extract(epoch from now()) * 1e9)::int8 as epoch_ns,
    1::int as is_up"""

PGWATCH_DB_SIZE = """select /* pgwatch_generated */
  (extract(epoch from now()) * 1e9)::int8 as epoch_ns,
  pg_database_size(current_database()) as size_b,
  (select sum(pg_total_relation_size(c.oid))::int8
   from pg_class c join pg_namespace n on n.oid = c.relnamespace
   where nspname = 'pg_catalog' and relkind = 'r'
  ) as catalog_size_b,
  (select sum(pg_relation_size(indexrelid))::int8
from pg_stat_user_indexes) as indexes_size_b"""

PGWATCH_DB_STATS = """select /* pgwatch_generated */
  (extract(epoch from now()) * 1e9)::int8 as epoch_ns,
  numbackends,
  xact_commit,
  xact_rollback,
  blks_read,
  blks_hit,
  tup_returned,
  tup_fetched,
  tup_inserted,
  tup_updated,
  tup_deleted,
  conflicts,
  temp_files,
  temp_bytes,
  deadlocks,
  blk_read_time,
  blk_write_time,
  extract(epoch from (now() - pg_postmaster_start_time()))::int8 as postmaster_uptime_s,
  checksum_failures,
  extract(epoch from (now() - checksum_last_failure))::int8 as checksum_last_failure_s,
  case when pg_is_in_recovery() then 1 else 0 end as in_recovery_int,
  system_identifier::text as tag_sys_id,
  session_time::int8,
  active_time::int8,
  idle_in_transaction_time::int8,
  sessions,
  sessions_abandoned,
  sessions_fatal,
  sessions_killed,
  (select count(*) from pg_index i
    where not indisvalid
    and not exists ( /* leave out ones that are being actively rebuilt */
      select * from pg_locks l
      join pg_stat_activity a using (pid)
      where l.relation = i.indexrelid
      and a.state = 'active'
      and a.query ~* 'concurrently'
  )) as invalid_indexes
from
  pg_stat_database, pg_control_system()
where
  datname = current_database()"""

PGWATCH_WAL = """select /* pgwatch_generated */
  (extract(epoch from now()) * 1e9)::int8 as epoch_ns,
  case
    when pg_is_in_recovery() = false then
      pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::int8
    else
      pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::int8
    end as xlog_location_b,
  case when pg_is_in_recovery() then 1 else 0 end as in_recovery_int,
  extract(epoch from (now() - pg_postmaster_start_time()))::int8 as postmaster_uptime_s,
  system_identifier::text as tag_sys_id,
  case
    when pg_is_in_recovery() = false then
      ('x'||substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int
    else
      (select min_recovery_end_timeline::int from pg_control_recovery())
    end as timeline
from pg_control_system()"""


def pgwatch_row(sql):
    """Runs a metric as pgwatch does (in a transaction with a lock timeout), one row back."""
    with connect() as c:
        with c.transaction():
            c.execute("SET LOCAL lock_timeout TO '100ms'")
            cur = c.execute(sql)
            rows = cur.fetchall()
            names = [d.name for d in cur.description]
    check(len(rows) == 1, f"{len(rows)} rows")
    return dict(zip(names, rows[0]))


@case
def pgwatch_instance_up():
    check(pgwatch_row(PGWATCH_INSTANCE_UP)["is_up"] == 1, "is_up")


@case
def pgwatch_db_size():
    row = pgwatch_row(PGWATCH_DB_SIZE)
    check(row["size_b"] > 0, f"size_b {row['size_b']}")
    check(row["indexes_size_b"] is not None and row["indexes_size_b"] > 0, "indexes_size_b")


@case
def pgwatch_db_stats():
    row = pgwatch_row(PGWATCH_DB_STATS)
    check(row["numbackends"] >= 1 and row["xact_commit"] > 0, f"{row}")
    check(row["tag_sys_id"] and row["tag_sys_id"] != "0", f"system identifier {row['tag_sys_id']}")
    check(row["in_recovery_int"] == 0 and row["postmaster_uptime_s"] >= 0, f"{row}")


@case
def pgwatch_wal():
    row = pgwatch_row(PGWATCH_WAL)
    check(row["xlog_location_b"] > 0, f"xlog_location_b {row['xlog_location_b']}")
    check(row["timeline"] >= 1, f"timeline {row['timeline']}")


if __name__ == "__main__":
    run_cases(CASES)
