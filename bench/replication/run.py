#!/usr/bin/env python3
"""What replication costs and how fast a failover is: Shoal's group against PostgreSQL 15.

Two measurements, in one run on one machine:

1. Throughput with and without replication, all durable (synchronous_commit on). pgbench's
   tpcb-like script, `-M prepared -c CLIENTS -j 2 -T DURATION` over loopback TCP, the median of
   RUNS runs after `pgbench -i -s SCALE`, against four configurations:
     - PostgreSQL 15 alone (a throw-away cluster: initdb in a temporary directory, fsync on);
     - PostgreSQL 15 with one synchronous streaming standby (pg_basebackup -R, hot_standby,
       synchronous_standby_names='*'; pg_stat_replication must say `sync` before measuring);
     - Shoal alone (one `shoal serve`);
     - a Shoal group of three nodes (`--node-id --peers`), pgbench against its primary.
   Both replicated systems acknowledge a commit once two copies are on disk: PostgreSQL's
   primary and its standby; Shoal's primary and one of its two followers (a majority of 3).
   Alongside TPS, CPU per transaction: the CPU seconds (user + system, /proc/PID/stat) that the
   primary's processes and, separately, the standbys' processes used during the measured pgbench
   run, divided by the transactions it committed. For PostgreSQL a server is its postmaster and
   every descendant (backends, WAL sender/receiver, startup process, ...), including those that
   exited during the run; a Shoal node is its one process. Counted per side, the figures can be
   read for a deployment with each server on its own machine; on one small machine the standbys
   compete with the primary and pgbench for the same cores, which lowers replicated TPS.

2. Failover time (RTO) of the Shoal group over RTO_CYCLES cycles: a client writes
   (`INSERT INTO rto_probe`, autocommit) in a loop through a multi-host connection string with
   target_session_attrs=read-write, the primary is killed with SIGKILL at a random moment, and the
   RTO is the time from the kill to the first write that was sent after it and succeeded (the
   client reconnects with the same string, 20 ms apart). The killed node is restarted with the
   same flags and data directory and must be a standby again before the next cycle. After all
   cycles every acknowledged write must be on the final primary: a lost one is an error (exit 1).
   One more cycle records every write's time, for a plot of writes per 100 ms across a failover.
   The failover group is a fresh one with only the probe table (a replicated node replays the
   group's whole log when it restarts, so the pgbench data would only slow the restarts).

Writes OUT_DIR/results.md (both tables, the command line, the machine), tps.png and failover.png,
and prints the tables.

Usage: python3 bench/replication/run.py --shoal-binary PATH [--scale 10] [--clients 8]
           [--duration 10] [--runs 3] [--rto-cycles 20] [--out-dir bench/replication]
Needs: PostgreSQL 15's server binaries and pgbench (apt-get install postgresql-15),
psycopg 3 (pip install psycopg[binary]) and matplotlib.
"""

import argparse
import math
import os
import platform
import random
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

OUT_DIR_DEFAULT = Path(__file__).resolve().parent
PG_BIN = Path("/usr/lib/postgresql/15/bin")
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
ROWS_PER_SCALE = 100_000
# Between failed connection attempts of the failover client.
RECONNECT_SLEEP_S = 0.02
FAILOVER_TIMEOUT_S = 60
# A restarted group member replays the group's whole log before it serves.
REJOIN_TIMEOUT_S = 300
STARTUP_TIMEOUT_S = 120
# The failover plot shows this much time before the kill and after the first write after it.
PLOT_MARGIN_S = 2.0
PLOT_BUCKET_S = 0.1


# ---------------------------------------------------------------------------------------------
# Ports, processes, CPU time

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_postgres_user(cmd):
    """initdb, pg_ctl and pg_basebackup refuse to run as root; run them as postgres then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--"] + cmd
    return cmd


def run_checked(cmd, what):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{what} failed ({shlex.join(cmd)}):\n{out.stdout}\n{out.stderr}")
    return out.stdout


def read_proc_stat(pid):
    """(ppid, CPU clock ticks) of a process: its own user + system time and that of its
    children it has reaped (cutime + cstime), so a backend that exited still counts, in its
    postmaster. None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = text[text.rindex(")") + 2:].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return ppid, utime + stime + cutime + cstime


def process_tree_cpu_s(root_pid):
    """CPU seconds used so far by root_pid and all its descendants, the exited ones included."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_proc_stat(int(entry))
            if stat is not None:
                stats[int(entry)] = stat
    children = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    ticks, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        if pid in stats:
            ticks += stats[pid][1]
        todo.extend(children.get(pid, []))
    return ticks / CLOCK_TICKS_PER_S


def connect(port, timeout_s=2, **kwargs):
    return psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres",
                           connect_timeout=timeout_s, autocommit=True, **kwargs)


def query_value(port, sql):
    with connect(port) as conn:
        return conn.execute(sql).fetchone()[0]


def execute(port, sql):
    with connect(port) as conn:
        conn.execute(sql)


def in_recovery(port):
    """pg_is_in_recovery() of the server on `port`, or None if it does not answer."""
    try:
        return query_value(port, "SELECT pg_is_in_recovery()")
    except psycopg.Error:
        return None


def wait_until(what, timeout_s, check, interval_s=0.1):
    """Polls check() until it returns something truthy, which is returned."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


def wait_serving(port, timeout_s=STARTUP_TIMEOUT_S):
    return wait_until(f"a server on port {port}", timeout_s, lambda: in_recovery(port) is not None)


# ---------------------------------------------------------------------------------------------
# PostgreSQL 15

class PostgresCluster:
    """A throw-away PostgreSQL 15 cluster: a data directory and the postmaster serving it."""

    def __init__(self, workdir, name):
        self.workdir = Path(workdir)
        self.name = name
        self.data_dir = self.workdir / name
        self.log_file = self.workdir / f"{name}.log"
        self.port = free_port()
        self.running = False

    def initdb(self, settings):
        run_checked(as_postgres_user([str(PG_BIN / "initdb"), "-D", str(self.data_dir),
                                      "-U", "postgres", "--auth=trust", "-E", "UTF8"]), "initdb")
        self.configure(settings)

    def base_backup_of(self, primary, settings):
        """Makes this cluster a streaming standby of `primary` (standby.signal and
        primary_conninfo from -R), named standby1 so pg_stat_replication shows which it is."""
        run_checked(as_postgres_user([str(PG_BIN / "pg_basebackup"), "-h", "127.0.0.1",
                                      "-p", str(primary.port), "-U", "postgres",
                                      "-D", str(self.data_dir), "-R", "-X", "stream"]),
                    "pg_basebackup")
        auto_conf = self.data_dir / "postgresql.auto.conf"
        text = auto_conf.read_text()
        auto_conf.write_text(text.replace("primary_conninfo = '",
                                          "primary_conninfo = 'application_name=standby1 "))
        self.configure(settings)

    def configure(self, settings):
        # Lines appended last win over the ones a base backup copied from the primary.
        settings = dict(settings, port=self.port, listen_addresses="'127.0.0.1'",
                        unix_socket_directories=f"'{self.workdir}'")
        with open(self.data_dir / "postgresql.conf", "a") as f:
            for name, value in settings.items():
                f.write(f"{name} = {value}\n")

    def allow_replication_from_loopback(self):
        with open(self.data_dir / "pg_hba.conf", "a") as f:
            f.write("host replication all 127.0.0.1/32 trust\n")

    def start(self):
        # Set first: a start that fails half way may still leave a postmaster to stop.
        self.running = True
        run_checked(as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir), "-w",
                                      "-t", str(STARTUP_TIMEOUT_S), "-l", str(self.log_file),
                                      "start"]), f"starting {self.name}")
        wait_serving(self.port)

    def stop(self):
        if self.running:
            subprocess.run(as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir),
                                             "-m", "immediate", "stop"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.running = False

    def cpu_s(self):
        postmaster_pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
        return process_tree_cpu_s(postmaster_pid)


def postgres_settings(shared_buffers):
    """What both PostgreSQL configurations share: durable commits, data in memory."""
    return {"shared_buffers": f"'{shared_buffers}'", "max_connections": 100, "fsync": "on",
            "synchronous_commit": "on", "full_page_writes": "on"}


class PostgresAlone:
    name = "PostgreSQL 15"
    system = "PostgreSQL"
    replicated = False

    def __init__(self, workdir, shared_buffers):
        self.primary = PostgresCluster(workdir, "pg-alone")
        self.shared_buffers = shared_buffers

    def start(self):
        self.primary.initdb(postgres_settings(self.shared_buffers))
        self.primary.start()

    @property
    def primary_port(self):
        return self.primary.port

    def standby_ports(self):
        return []

    def primary_cpu_s(self):
        return self.primary.cpu_s()

    def standbys_cpu_s(self):
        return 0.0

    def check_before_run(self):
        pass

    def stop(self):
        self.primary.stop()


class PostgresWithSyncStandby(PostgresAlone):
    name = "PostgreSQL 15 + 1 synchronous standby"
    replicated = True

    def __init__(self, workdir, shared_buffers):
        super().__init__(workdir, shared_buffers)
        self.primary = PostgresCluster(workdir, "pg-primary")
        self.standby = PostgresCluster(workdir, "pg-standby")

    def start(self):
        self.primary.initdb(dict(postgres_settings(self.shared_buffers), wal_level="replica",
                                 max_wal_senders=5, synchronous_standby_names="'*'"))
        self.primary.allow_replication_from_loopback()
        self.primary.start()
        self.standby.base_backup_of(self.primary, {"hot_standby": "on"})
        self.standby.start()
        wait_until("the standby to be synchronous", STARTUP_TIMEOUT_S, self.standby_is_sync)

    def standby_is_sync(self):
        with connect(self.primary.port) as conn:
            states = [r[0] for r in conn.execute("SELECT sync_state FROM pg_stat_replication")]
        return states == ["sync"]

    def standby_ports(self):
        return [self.standby.port]

    def standbys_cpu_s(self):
        return self.standby.cpu_s()

    def check_before_run(self):
        if not self.standby_is_sync():
            raise RuntimeError("pg_stat_replication does not show the standby as sync")

    def stop(self):
        self.standby.stop()
        self.primary.stop()


# ---------------------------------------------------------------------------------------------
# Shoal

class ShoalNode:
    """One `shoal serve` process; restarting it keeps its flags, port and data directory."""

    def __init__(self, binary, workdir, name, extra_args=()):
        self.binary = binary
        self.name = name
        self.port = free_port()
        self.data_dir = Path(workdir) / name
        self.log_file = Path(workdir) / f"{name}.log"
        self.extra_args = list(extra_args)
        self.proc = None

    def start(self):
        cmd = [str(self.binary), "serve", "--listen", f"127.0.0.1:{self.port}",
               "--data-dir", str(self.data_dir), "--unix-socket-dir", "",
               "--synchronous-commit", "on"] + self.extra_args
        with open(self.log_file, "a") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log)

    def kill(self):
        """SIGKILL, as a crash: no shutdown, nothing flushed that was not already."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def is_running(self):
        return self.proc is not None and self.proc.poll() is None

    def cpu_s(self):
        return process_tree_cpu_s(self.proc.pid)


class ShoalAlone:
    name = "Shoal"
    system = "Shoal"
    replicated = False

    def __init__(self, binary, workdir):
        self.node = ShoalNode(binary, workdir, "shoal-alone")

    def start(self):
        self.node.start()
        wait_serving(self.node.port)

    @property
    def primary_port(self):
        return self.node.port

    def standby_ports(self):
        return []

    def primary_cpu_s(self):
        return self.node.cpu_s()

    def standbys_cpu_s(self):
        return 0.0

    def check_before_run(self):
        pass

    def stop(self):
        self.node.kill()


class ShoalGroup:
    """Three `shoal serve --node-id N --peers ...` processes on loopback (docs/replication.md)."""
    name = "Shoal 3-node group"
    system = "Shoal"
    replicated = True

    def __init__(self, binary, workdir, prefix="shoal-group"):
        peer_ports = [free_port() for _ in range(3)]
        peers = ",".join(f"{n}=127.0.0.1:{p}" for n, p in enumerate(peer_ports, start=1))
        self.nodes = [ShoalNode(binary, workdir, f"{prefix}-node{n}",
                                ["--node-id", str(n), "--peers", peers])
                      for n in range(1, 4)]
        self.primary_node = None

    def start(self):
        for node in self.nodes:
            node.start()
        self.primary_node = self.find_primary()

    def find_primary(self, timeout_s=STARTUP_TIMEOUT_S):
        """The running node where pg_is_in_recovery() is false."""
        def primary():
            for node in self.nodes:
                if node.is_running() and in_recovery(node.port) is False:
                    return node
            return None
        return wait_until("a primary", timeout_s, primary)

    def wait_standby(self, node):
        wait_until(f"{node.name} to serve as a standby", REJOIN_TIMEOUT_S,
                   lambda: in_recovery(node.port) is True, interval_s=0.2)

    def conninfo(self):
        """The multi-host string a client uses to find the primary wherever it is."""
        ports = ",".join(str(node.port) for node in self.nodes)
        return (f"host=127.0.0.1,127.0.0.1,127.0.0.1 port={ports} "
                "target_session_attrs=read-write connect_timeout=1 user=postgres dbname=postgres")

    @property
    def primary_port(self):
        return self.primary_node.port

    def followers(self):
        return [node for node in self.nodes if node is not self.primary_node]

    def standby_ports(self):
        return [node.port for node in self.followers()]

    def primary_cpu_s(self):
        return self.primary_node.cpu_s()

    def standbys_cpu_s(self):
        return sum(node.cpu_s() for node in self.followers())

    def check_before_run(self):
        if in_recovery(self.primary_node.port) is not False:
            raise RuntimeError(f"{self.primary_node.name} is no longer the primary")

    def stop(self):
        for node in self.nodes:
            node.kill()


# ---------------------------------------------------------------------------------------------
# Throughput and CPU per transaction

@dataclass
class PgbenchRun:
    tps: float
    transactions: int
    failed: int
    primary_cpu_us_per_txn: float
    standbys_cpu_us_per_txn: float


@dataclass
class ConfigurationResult:
    name: str
    system: str
    replicated: bool
    runs: list = field(default_factory=list)

    def median(self, attribute):
        return statistics.median(getattr(run, attribute) for run in self.runs)


def pgbench(port, args):
    cmd = ["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres"] + args
    # pgbench's -d means --debug; the database comes from PGDATABASE instead.
    env = dict(os.environ, PGDATABASE="postgres")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def load(config, scale):
    """pgbench -i on the primary, then a checkpoint where the server takes one, and a wait
    until every standby has the loaded rows, so the first measured run does not pay for the
    load's aftermath."""
    pgbench(config.primary_port, ["-i", "-q", "-s", str(scale)])
    try:
        execute(config.primary_port, "CHECKPOINT")
    except psycopg.Error as e:
        print(f"  ({config.name}: CHECKPOINT refused: {e})", flush=True)
    rows = scale * ROWS_PER_SCALE
    for port in config.standby_ports():
        wait_until(f"the standby on port {port} to have the loaded rows", REJOIN_TIMEOUT_S,
                   lambda: accounts_on(port) == rows, interval_s=0.5)


def accounts_on(port):
    """How many pgbench_accounts rows the server on `port` has, None before it has the table."""
    try:
        return query_value(port, "SELECT count(*) FROM pgbench_accounts")
    except psycopg.Error:
        return None


def measured_run(config, clients, duration_s):
    """One pgbench tpcb-like run, with the CPU the primary and the standbys used during it."""
    config.check_before_run()
    primary_before, standbys_before = config.primary_cpu_s(), config.standbys_cpu_s()
    out = pgbench(config.primary_port, ["-M", "prepared", "-c", str(clients),
                                        "-j", str(min(2, clients)), "-T", str(duration_s)])
    # The backends of pgbench's sessions exit once it disconnects; let their postmaster reap
    # them, so their CPU time is in its cutime.
    time.sleep(0.5)
    primary_cpu_s = config.primary_cpu_s() - primary_before
    standbys_cpu_s = config.standbys_cpu_s() - standbys_before
    transactions = int(re.search(r"number of transactions actually processed: (\d+)", out)[1])
    failed = re.search(r"number of failed transactions: (\d+)", out)
    tps = float(re.search(r"tps = ([\d.]+)", out)[1])
    per_txn = 1e6 / max(transactions, 1)
    return PgbenchRun(tps, transactions, int(failed[1]) if failed else 0,
                      primary_cpu_s * per_txn, standbys_cpu_s * per_txn)


def measure_configuration(config, args):
    result = ConfigurationResult(config.name, config.system, config.replicated)
    print(f"{config.name}: starting, pgbench -i -s {args.scale}", flush=True)
    try:
        config.start()
        load(config, args.scale)
        for i in range(args.runs):
            run = measured_run(config, args.clients, args.duration)
            result.runs.append(run)
            print(f"  run {i + 1}/{args.runs}: tps={run.tps:.0f} txns={run.transactions} "
                  f"failed={run.failed} primary={run.primary_cpu_us_per_txn:.0f} us/txn "
                  f"standbys={run.standbys_cpu_us_per_txn:.0f} us/txn", flush=True)
    finally:
        config.stop()
    return result


# ---------------------------------------------------------------------------------------------
# Failover time

@dataclass
class ProbeWrite:
    id: int
    sent_at: float   # time.monotonic() when the INSERT was sent
    acked_at: float  # ... and when its commit was acknowledged


class ProbeWriter(threading.Thread):
    """Inserts rows one by one, autocommit, through the group's multi-host string; on any
    error it reconnects with the same string (RECONNECT_SLEEP_S between failed attempts) and
    goes on. Every acknowledged write is kept in `acked`."""

    def __init__(self, conninfo):
        super().__init__(daemon=True)
        self.conninfo = conninfo
        self.acked = []
        self.stopping = threading.Event()
        self.next_id = 1

    def run(self):
        conn = None
        while not self.stopping.is_set():
            if conn is None:
                conn = self.reconnect()
                continue
            # A failed INSERT may have committed all the same: an id is never sent twice.
            probe_id = self.next_id
            self.next_id += 1
            sent_at = time.monotonic()
            try:
                conn.execute("INSERT INTO rto_probe VALUES (%s)", (probe_id,))
            except psycopg.Error:
                conn.close()
                conn = None
                continue
            self.acked.append(ProbeWrite(probe_id, sent_at, time.monotonic()))
        if conn is not None:
            conn.close()

    def reconnect(self):
        """A connection to the primary, or None after a failed attempt and a short sleep."""
        try:
            return psycopg.connect(self.conninfo, autocommit=True)
        except (psycopg.Error, OSError):
            time.sleep(RECONNECT_SLEEP_S)
            return None

    def stop(self):
        self.stopping.set()
        self.join(10)

    def has_written_since(self, t):
        return bool(self.acked) and self.acked[-1].acked_at > t

    def first_write_sent_after(self, t):
        """The earliest acknowledged write sent after time t, or None."""
        first = None
        # Appends while this runs do not disturb a reversed() walk.
        for write in reversed(self.acked):
            if write.sent_at <= t:
                break
            first = write
        return first


@dataclass
class FailoverCycle:
    killed: str
    killed_at: float
    first_write: ProbeWrite

    @property
    def rto_ms(self):
        return (self.first_write.acked_at - self.killed_at) * 1000


def failover_cycle(group, writer, delay_s):
    """Kills the primary delay_s after the writer has written to it and waits for the first
    write sent after the kill."""
    primary = group.find_primary()
    cycle_start = time.monotonic()
    wait_until("the probe writer to write", FAILOVER_TIMEOUT_S,
               lambda: writer.has_written_since(cycle_start), interval_s=0.01)
    time.sleep(delay_s)
    killed_at = time.monotonic()
    primary.kill()
    first_write = wait_until("a write after the kill", FAILOVER_TIMEOUT_S,
                             lambda: writer.first_write_sent_after(killed_at), interval_s=0.005)
    return primary, FailoverCycle(primary.name, killed_at, first_write)


def rejoin(group, node):
    """Restarts a killed node with its flags and data directory; it comes back a standby."""
    node.start()
    group.wait_standby(node)


def lost_writes(group, writer):
    """Acknowledged probe ids that are missing on the final primary, and its row count."""
    with psycopg.connect(group.conninfo(), autocommit=True) as conn:
        count = conn.execute("SELECT count(*) FROM rto_probe").fetchone()[0]
        present = {r[0] for r in conn.execute("SELECT id FROM rto_probe")}
    acked = {w.id for w in writer.acked}
    return sorted(acked - present), count


@dataclass
class FailoverResult:
    cycles: list
    plotted: FailoverCycle
    plotted_writes: list  # acknowledgement times of the writes around the plotted failover
    acked: int
    rows: int
    lost: list


def measured_failovers(group, writer, cycles):
    done = []
    for i in range(cycles):
        killed, cycle = failover_cycle(group, writer, random.uniform(0.2, 1.2))
        print(f"  cycle {i + 1}/{cycles}: killed {cycle.killed}, first write after "
              f"{cycle.rto_ms:.0f} ms", flush=True)
        rejoin(group, killed)
        done.append(cycle)
    return done


def plotted_failover(group, writer):
    """One more failover, with time before the kill and after the first write to plot."""
    killed, cycle = failover_cycle(group, writer,
                                   random.uniform(PLOT_MARGIN_S, PLOT_MARGIN_S + 0.5))
    print(f"  plotted cycle: killed {cycle.killed}, first write after {cycle.rto_ms:.0f} ms",
          flush=True)
    time.sleep(PLOT_MARGIN_S + 0.2)
    start, end = cycle.killed_at - PLOT_MARGIN_S, cycle.first_write.acked_at + PLOT_MARGIN_S
    writes = [w.acked_at for w in writer.acked if start <= w.acked_at <= end]
    rejoin(group, killed)
    return cycle, writes


def measure_failover(binary, workdir, cycles):
    group = ShoalGroup(binary, workdir, prefix="shoal-failover")
    writer = None
    print(f"Shoal 3-node group: {cycles} kill -9 cycles of the primary, then one plotted",
          flush=True)
    try:
        group.start()
        execute(group.primary_port, "CREATE TABLE rto_probe (id bigint PRIMARY KEY)")
        writer = ProbeWriter(group.conninfo())
        writer.start()
        done = measured_failovers(group, writer, cycles)
        plotted, plotted_writes = plotted_failover(group, writer)
        writer.stop()
        lost, rows = lost_writes(group, writer)
        return FailoverResult(done, plotted, plotted_writes, len(writer.acked), rows, lost)
    finally:
        if writer is not None:
            writer.stop()
        group.stop()


def percentile(values, p):
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


# ---------------------------------------------------------------------------------------------
# Report

def ratio(numerator, denominator):
    return f"{numerator / denominator:.2f}" if denominator else "n/a"


def throughput_table(results):
    by_name = {r.name: r for r in results}
    lines = ["| configuration | TPS (median) | replication overhead | primary CPU µs/txn "
             "| standby CPU µs/txn (sum over standbys) |",
             "|---|---:|---:|---:|---:|"]
    for r in results:
        alone = next(a for a in results if a.system == r.system and not a.replicated)
        overhead = f"{1 - r.median('tps') / alone.median('tps'):.1%}" if r.replicated else "—"
        standbys = f"{r.median('standbys_cpu_us_per_txn'):.0f}" if r.replicated else "—"
        lines.append(f"| {r.name} | {r.median('tps'):.0f} | {overhead} "
                     f"| {r.median('primary_cpu_us_per_txn'):.0f} | {standbys} |")
    pairs = [("without replication", by_name[PostgresAlone.name], by_name[ShoalAlone.name]),
             ("with replication", by_name[PostgresWithSyncStandby.name],
              by_name[ShoalGroup.name])]
    for label, pg, shoal in pairs:
        standbys = ratio(shoal.median("standbys_cpu_us_per_txn"),
                         pg.median("standbys_cpu_us_per_txn")) if pg.replicated else "—"
        lines.append(f"| **Shoal / PostgreSQL, {label}** "
                     f"| {ratio(shoal.median('tps'), pg.median('tps'))} | "
                     f"| {ratio(shoal.median('primary_cpu_us_per_txn'), pg.median('primary_cpu_us_per_txn'))} "
                     f"| {standbys} |")
    return "\n".join(lines)


def runs_list(results):
    lines = []
    for r in results:
        tps = ", ".join(f"{run.tps:.0f}" for run in r.runs)
        failed = sum(run.failed for run in r.runs)
        lines.append(f"- {r.name}: TPS of each run {tps}; failed transactions {failed}")
    return "\n".join(lines)


def failover_table(f):
    rtos = [c.rto_ms for c in f.cycles]
    return "\n".join([
        "| cycles | RTO median ms | RTO p99 ms | RTO max ms | acknowledged writes "
        "| rows on the final primary | acknowledged writes lost |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {len(rtos)} | {statistics.median(rtos):.0f} | {percentile(rtos, 99):.0f} "
        f"| {max(rtos):.0f} | {f.acked} | {f.rows} | {len(f.lost)} |"])


def machine_facts():
    nproc = os.cpu_count()
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{nproc} cores (nproc), {model}, Linux {platform.release()} (uname -r)"


def version_of(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def write_report(out_dir, args, results, failover):
    command = shlex.join(["python3"] + sys.argv)
    table = throughput_table(results)
    rto = failover_table(failover)
    text = f"""# Replication: Shoal's 3-node group against PostgreSQL 15 with a synchronous standby

Produced by `{command}`.
Machine: {machine_facts()}. Shoal: {version_of([str(args.shoal_binary), "--version"])}
(`{args.shoal_binary}`); {version_of([str(PG_BIN / "postgres"), "--version"])}.

## Throughput and CPU per transaction

pgbench tpcb-like, `-M prepared -c {args.clients} -j {min(2, args.clients)} -T {args.duration}`
over loopback TCP after `pgbench -i -s {args.scale}`; the median of {args.runs} runs. Every
configuration is durable: synchronous_commit on, fsync on. PostgreSQL's replicated
configuration has one synchronous streaming standby (synchronous_standby_names='*';
pg_stat_replication showed it as `sync` before every run); Shoal's is
a group of three where a commit is acknowledged once a majority (the primary and one follower)
has it on disk, so both acknowledge with two copies on disk, but Shoal's primary ships to two
followers. Replication overhead is 1 - TPS with replication / TPS without, per system.

CPU µs/txn: CPU seconds (user + system, from /proc/PID/stat) used during the measured run,
divided by the transactions it committed, for the primary (a PostgreSQL postmaster and all its
descendants; a Shoal node's process) and for the standbys (summed). pgbench's own CPU is in
neither. On this {os.cpu_count()}-core machine the standbys compete for the same cores as the
primary and pgbench, so the replicated TPS here is lower than with each server on its own
machine; the CPU columns are what each machine would spend per transaction.

{table}

{runs_list(results)}

![TPS with and without replication](tps.png)

## Failover time (Shoal 3-node group)

A client writes `INSERT INTO rto_probe` (autocommit, one row at a time) through
`host=127.0.0.1,127.0.0.1,127.0.0.1 port=A,B,C target_session_attrs=read-write
connect_timeout=1`, reconnecting {RECONNECT_SLEEP_S * 1000:.0f} ms apart after a failure. The
primary is killed with SIGKILL at a random moment; the RTO is the time from the kill to the
first successful write sent after it. The killed node is restarted with the same flags and data
directory and serves as a standby before the next cycle. Afterwards every acknowledged write
must be on the final primary. The p99 is the nearest-rank one: with fewer than 100 cycles it
is the slowest cycle.

{rto}

Client-observed writes per {PLOT_BUCKET_S * 1000:.0f} ms across one more failover (not among
the cycles above), killed at time 0:

![writes per 100 ms across a failover](failover.png)
"""
    (out_dir / "results.md").write_text(text)
    print()
    print(table)
    print()
    print(rto)


def plot_tps(out_dir, args, results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    systems = ["PostgreSQL", "Shoal"]
    width = 0.38
    fig, ax = plt.subplots(figsize=(7, 4))
    for offset, replicated, label in ((-width / 2, False, "without replication"),
                                      (width / 2, True, "with replication (PostgreSQL: 1 sync "
                                       "standby; Shoal: 3-node group)")):
        tps = [next(r.median("tps") for r in results
                    if r.system == s and r.replicated == replicated) for s in systems]
        bars = ax.bar([i + offset for i in range(len(systems))], tps, width, label=label)
        ax.bar_label(bars, fmt="%.0f")
    ax.set_xticks(range(len(systems)), ["PostgreSQL 15", "Shoal"])
    ax.set_ylabel("TPS (median)")
    ax.set_ylim(top=ax.get_ylim()[1] * 1.3)  # room for the legend above the bars
    ax.set_title(f"pgbench tpcb-like, scale {args.scale}, {args.clients} clients, "
                 "synchronous_commit on")
    ax.legend(fontsize="small", loc="upper right")
    fig.tight_layout()
    fig.savefig(out_dir / "tps.png", dpi=100)
    plt.close(fig)


def plot_failover(out_dir, failover):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cycle = failover.plotted
    start_s = -PLOT_MARGIN_S
    end_s = cycle.first_write.acked_at - cycle.killed_at + PLOT_MARGIN_S
    # Whole buckets only: a last one cut short by the window's end would look like a dip.
    buckets = [0] * math.floor((end_s - start_s) / PLOT_BUCKET_S)
    for acked_at in failover.plotted_writes:
        i = int((acked_at - cycle.killed_at - start_s) / PLOT_BUCKET_S)
        if 0 <= i < len(buckets):
            buckets[i] += 1
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.bar([start_s + i * PLOT_BUCKET_S for i in range(len(buckets))], buckets,
           width=PLOT_BUCKET_S, align="edge")
    ax.axvline(0, color="red", label="kill -9 of the primary")
    ax.axvline(cycle.rto_ms / 1000, color="green", linestyle="--",
               label=f"first write after it ({cycle.rto_ms:.0f} ms)")
    ax.set_xlabel("seconds since the kill")
    ax.set_ylabel(f"writes per {PLOT_BUCKET_S * 1000:.0f} ms")
    ax.set_title("One client's writes across a failover of a Shoal 3-node group")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out_dir / "failover.png", dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shoal-binary", required=True, type=Path, help="the shoal binary to run")
    ap.add_argument("--scale", type=int, default=10, help="pgbench -i -s")
    ap.add_argument("--clients", type=int, default=8, help="pgbench -c")
    ap.add_argument("--duration", type=int, default=10, help="seconds per pgbench run")
    ap.add_argument("--runs", type=int, default=3,
                    help="pgbench runs per configuration; the median is reported")
    ap.add_argument("--rto-cycles", type=int, default=20,
                    help="kill -9 cycles of the Shoal group's primary")
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR_DEFAULT,
                    help="where results.md, tps.png and failover.png go")
    args = ap.parse_args()
    if args.runs < 1 or args.rto_cycles < 1 or args.clients < 1:
        ap.error("--runs, --rto-cycles and --clients must be at least 1")
    if not os.access(args.shoal_binary, os.X_OK):
        ap.error(f"{args.shoal_binary} is not an executable")
    return args


def print_logs(workdir):
    """The end of every server log, to see why something failed."""
    for log in sorted(Path(workdir).glob("*.log")):
        lines = log.read_text(errors="replace").splitlines()[-15:]
        print(f"--- {log.name} (last lines)", file=sys.stderr)
        print("\n".join(lines), file=sys.stderr)


def exit_on_sigterm(signum, frame):
    # SystemExit unwinds through the finally blocks that stop the servers.
    sys.exit(128 + signum)


def main():
    args = parse_args()
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    args.shoal_binary = args.shoal_binary.resolve()
    workdir = tempfile.mkdtemp(prefix="shoal-replication-")
    if os.geteuid() == 0:
        shutil.chown(workdir, "postgres")
    shared_buffers = f"{max(1024, args.scale * 24)}MB"
    failed = False
    try:
        configurations = [PostgresAlone(workdir, shared_buffers),
                          PostgresWithSyncStandby(workdir, shared_buffers),
                          ShoalAlone(args.shoal_binary, workdir),
                          ShoalGroup(args.shoal_binary, workdir)]
        results = [measure_configuration(c, args) for c in configurations]
        failover = measure_failover(args.shoal_binary, workdir, args.rto_cycles)
    except BaseException:
        failed = True
        print_logs(workdir)
        print(f"the servers' directories and whole logs are kept in {workdir}", file=sys.stderr)
        raise
    finally:
        if not failed:
            shutil.rmtree(workdir, ignore_errors=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    plot_tps(args.out_dir, args, results)
    plot_failover(args.out_dir, failover)
    write_report(args.out_dir, args, results, failover)
    if failover.lost:
        print(f"ERROR: {len(failover.lost)} acknowledged writes are missing on the final "
              f"primary (ids {failover.lost[:20]}{' ...' if len(failover.lost) > 20 else ''})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
