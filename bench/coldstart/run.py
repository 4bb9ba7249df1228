#!/usr/bin/env python3
"""Cold start of Shoal: how long a restart takes, and how fast it loads its checkpoint.

For each dataset (pgbench -i at each scale, and a generated table of about N GB of checkpoint),
starts a fresh Shoal on an empty data directory, loads the data, runs `CHECKPOINT`, then stops the
server with SIGTERM and starts it again `--runs` times. Each restart is timed from spawning the
process until a new client connection has run `SELECT 1`; the server's own `recovery:` log line
gives the checkpoint load time, rows and bytes and the log replay time. Medians are reported.
With `--replay`, each dataset is also loaded a second time with automatic checkpoints disabled
and no `CHECKPOINT`, so that restarts replay the whole redo log instead.

Writes results.md (a markdown table) next to this script and prints it.

Usage: python3 bench/coldstart/run.py [--scales 100] [--gb 5] [--runs 3] [--replay]
           [--binary PATH | --build] [--workdir /tmp/shoal-coldstart] [--drop-caches] [--keep]
Needs: a production (or release) build of shoal, pgbench (Debian's postgresql-15 package),
psycopg 3.
"""

import argparse
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parents[2]
OUT_DIR = Path(__file__).resolve().parent
GB = 1e9  # the server's log uses decimal MB; so does this report

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RECOVERY = re.compile(
    r"recovery: (?:loaded checkpoint (?P<id>\d+): (?P<rows>\d+) rows, (?P<mb>[\d.]+) MB in "
    r"(?P<load_s>[\d.]+) s \([\d.]+ MB/s(?:, indexes (?P<index_s>[\d.]+) s[^)]*)?\)|no checkpoint); replayed (?P<records>\d+) log records, "
    r"(?P<log_mb>[\d.]+) MB in (?P<replay_s>[\d.]+) s")

# Settings of a server that must never checkpoint by itself (the --replay variant).
NO_AUTO_CHECKPOINT = ["--checkpoint-log-mb", str(1 << 30), "--checkpoint-interval-s", str(10**9)]

LIVE_SERVERS = []  # every Shoal process started and not yet stopped, for the clean-up


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binary(args):
    if args.build:
        subprocess.run(["cargo", "build", "--profile", "production", "-q", "-p", "shoal"],
                       cwd=REPO, check=True)
    if args.binary:
        return Path(args.binary)
    # The production profile (whole-program LTO) is what a deployment runs; a release build is
    # taken when there is none.
    targets = []
    if os.environ.get("CARGO_TARGET_DIR"):
        targets.append(Path(os.environ["CARGO_TARGET_DIR"]))
    targets += [REPO / "target", Path("/work/cargo-target-release")]
    candidates = [t / profile / "shoal" for profile in ("production", "release") for t in targets]
    for c in candidates:
        if c.is_file():
            return c
    sys.exit("no production or release build of shoal found (looked at "
             + ", ".join(str(c) for c in candidates)
             + "); pass --binary PATH or --build")


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def checkpoint_bytes(data_dir):
    """Size of the files of the current checkpoint (`checkpoints/<CURRENT>/`), 0 if none."""
    current = Path(data_dir) / "checkpoints" / "CURRENT"
    if not current.exists():
        return 0
    return dir_bytes(current.parent / current.read_text().strip())


def drop_caches():
    subprocess.run(["sync"], check=True)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as e:
        sys.exit(f"--drop-caches: cannot write /proc/sys/vm/drop_caches ({e}); run as root "
                 "outside a read-only /proc, or leave the option off")


class Shoal:
    """One data directory, served by one shoal process at a time."""

    def __init__(self, binary, data_dir, extra_args=()):
        self.binary = binary
        self.data_dir = Path(data_dir)
        self.extra_args = list(extra_args)
        self.proc = None
        self.port = None
        self.log_path = None
        self.starts = 0

    def spawn(self):
        """Starts the server; returns the perf_counter time just before the spawn."""
        self.port = free_port()
        self.starts += 1
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.start{self.starts}.log"
        log = open(self.log_path, "w")
        # tracing writes the log to stdout; errors such as a damaged data directory to stderr.
        env = dict(os.environ, NO_COLOR="1", RUST_LOG=os.environ.get("RUST_LOG", "info"))
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [str(self.binary), "serve", "--listen", f"127.0.0.1:{self.port}",
             "--data-dir", str(self.data_dir)] + self.extra_args,
            stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        LIVE_SERVERS.append(self)
        return t0

    def wait_ready(self, t0, timeout_s):
        """Seconds from t0 until a new connection runs `SELECT 1`. The server binds its port
        before recovery and accepts connections only after it, so a connection made during
        recovery waits in the listen backlog; one made before the bind is refused and retried."""
        deadline = t0 + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"shoal exited with {self.proc.returncode} during start-up:\n"
                                   + self.log_tail())
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise RuntimeError(f"shoal not ready within {timeout_s}s:\n" + self.log_tail())
            try:
                with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                                     dbname="postgres",
                                     connect_timeout=max(2, int(math.ceil(remaining)))) as conn:
                    conn.execute("SELECT 1").fetchone()
                return time.perf_counter() - t0
            except psycopg.OperationalError:
                time.sleep(0.005)

    def start(self, timeout_s):
        return self.wait_ready(self.spawn(), timeout_s)

    def connect(self):
        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                               dbname="postgres", autocommit=True)

    def recovery(self):
        """The numbers of this start's `recovery:` log line (logged before the server accepts
        connections, so it is there once wait_ready returned)."""
        for _ in range(100):
            m = RECOVERY.search(ANSI.sub("", self.log_path.read_text(errors="replace")))
            if m:
                break
            time.sleep(0.02)
        else:
            raise RuntimeError("no `recovery:` line in the server log:\n" + self.log_tail())
        loaded = m.group("id") is not None
        return {
            "ckpt_rows": int(m.group("rows")) if loaded else 0,
            "ckpt_log_bytes": float(m.group("mb")) * 1e6 if loaded else 0.0,
            "ckpt_load_s": float(m.group("load_s")) if loaded else 0.0,
            # Of which sorting and hashing the index entries (older servers do not say).
            "ckpt_index_s": float(m.group("index_s") or "nan") if loaded else 0.0,
            "log_records": int(m.group("records")),
            "log_bytes": float(m.group("log_mb")) * 1e6,
            "replay_s": float(m.group("replay_s")),
        }

    def rss_bytes(self):
        try:
            for line in open(f"/proc/{self.proc.pid}/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def log_tail(self, lines=20):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout_s=120):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self in LIVE_SERVERS:
            LIVE_SERVERS.remove(self)
        self.proc = None


# ---------------------------------------------------------------------------------- datasets


class PgbenchDataset:
    def __init__(self, scale):
        self.scale = scale
        self.name = f"pgbench -i -s {scale}"
        self.tables = ["pgbench_accounts", "pgbench_branches", "pgbench_tellers"]

    def load(self, server, checkpoint):
        cmd = ["pgbench", "-i", "-q", "-s", str(self.scale), "-h", "127.0.0.1",
               "-p", str(server.port), "-U", "postgres", "postgres"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
        if checkpoint:
            with server.connect() as conn:
                conn.execute("CHECKPOINT")


class GbDataset:
    """`big (id bigint PRIMARY KEY, a bigint, b double precision, c text)`, ~150 bytes a row in
    a checkpoint, filled with INSERT ... SELECT FROM generate_series until the checkpoint on disk
    reaches the target (estimated from a first small batch), or with exactly `rows` rows.
    As a column table (`USING columnar`, no primary key: column tables have no indexes) its
    checkpoint is the segments' Arrow IPC images."""

    PROBE_ROWS = 100_000

    def __init__(self, gb, batch_rows, access_method, fill_clients=1):
        self.gb = gb
        self.batch_rows = batch_rows
        self.access_method = access_method
        self.fill_clients = fill_clients
        self.name = f"big {access_method} table, {gb:g} GB checkpoint"
        if fill_clients > 1:
            self.name += f", filled by {fill_clients} clients"
        self.tables = ["big"]
        self.rows = None  # fixed by the first (checkpointed) load, reused by --replay

    @staticmethod
    def insert(conn, start, end):
        conn.execute("INSERT INTO big SELECT g, g * 7, g * 0.5, repeat('x', 100) || g "
                     f"FROM generate_series({start}, {end}) g")

    def fill(self, server, conn, batches, first, total):
        """Inserts `batches` ((start, end) ids), from `conn` alone or, with --fill-clients N,
        from N connections at once, client k taking batches k, k + N, ...: as several clients
        loading one table do, which interleaves their batches' rows in the table."""
        started, lock = time.perf_counter(), threading.Lock()
        done = [first]

        def run(client_conn, mine):
            for start, end in mine:
                self.insert(client_conn, start, end)
                with lock:
                    done[0] += end - start + 1
                    rate = (done[0] - first) / max(time.perf_counter() - started, 1e-9)
                    print(f"  inserted {done[0]}/{total} rows ({rate:,.0f} rows/s)", flush=True)

        if self.fill_clients == 1:
            run(conn, batches)
            return
        clients = [server.connect() for _ in range(self.fill_clients)]
        failures = []

        def guarded(k):
            try:
                run(clients[k], batches[k::self.fill_clients])
            except Exception as e:  # reported after the join, not lost in a thread
                failures.append(e)

        threads = [threading.Thread(target=guarded, args=(k,)) for k in range(len(clients))]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            for c in clients:
                c.close()
        if failures:
            raise failures[0]

    def load(self, server, checkpoint):
        with server.connect() as conn:
            if self.access_method == "columnar":
                conn.execute("CREATE TABLE big (id bigint, a bigint, b double precision, "
                             "c text) USING columnar")
            else:
                conn.execute("CREATE TABLE big (id bigint PRIMARY KEY, a bigint, "
                             "b double precision, c text)")
            done = 0
            target_rows = self.rows
            if target_rows is None:
                if not checkpoint:
                    raise RuntimeError("the size of the big table is measured on a checkpoint")
                self.insert(conn, 1, self.PROBE_ROWS)
                done = self.PROBE_ROWS
                conn.execute("CHECKPOINT")
                per_row = checkpoint_bytes(server.data_dir) / done
                target_rows = max(done, int(math.ceil(self.gb * GB / per_row)))
                print(f"  {per_row:.0f} checkpoint bytes/row: {target_rows} rows for "
                      f"{self.gb:g} GB", flush=True)
            batches = [(start + 1, min(start + self.batch_rows, target_rows))
                       for start in range(done, target_rows, self.batch_rows)]
            self.fill(server, conn, batches, first=done, total=target_rows)
            self.rows = target_rows
            if checkpoint:
                conn.execute("CHECKPOINT")


# ---------------------------------------------------------------------------------- measuring


def table_counts(server, tables):
    with server.connect() as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def measure(binary, dataset, variant, workdir, args):
    """Loads `dataset` into a fresh data directory and restarts the server args.runs times."""
    checkpoint = variant == "checkpoint"
    data_dir = Path(workdir) / f"data-{len(list(Path(workdir).glob('data-*'))) + 1}"
    server = Shoal(binary, data_dir, [] if checkpoint else NO_AUTO_CHECKPOINT)
    print(f"{dataset.name}, start from {variant}: loading", flush=True)
    try:
        server.start(args.timeout)
        t = time.perf_counter()
        dataset.load(server, checkpoint)
        load_s = time.perf_counter() - t
        counts = table_counts(server, dataset.tables)
        print(f"  loaded in {load_s:.1f} s: {counts}", flush=True)
        runs = []
        for i in range(args.runs):
            server.stop()
            if args.drop_caches:
                drop_caches()
            restart_s = server.start(args.timeout)
            r = server.recovery()
            r["restart_s"] = restart_s
            r["rss"] = server.rss_bytes()
            runs.append(r)
            print(f"  restart {i + 1}: {restart_s:.3f} s to SELECT 1; checkpoint "
                  f"{r['ckpt_rows']} rows, {r['ckpt_log_bytes'] / 1e6:.1f} MB in "
                  f"{r['ckpt_load_s']:.3f} s (indexes {r['ckpt_index_s']:.3f} s); "
                  f"replayed {r['log_records']} log records, "
                  f"{r['log_bytes'] / 1e6:.1f} MB in {r['replay_s']:.3f} s; "
                  f"RSS {r['rss'] / 2**20:.0f} MiB", flush=True)
        after = table_counts(server, dataset.tables)
        if after != counts:
            raise RuntimeError(f"rows differ after restart: {counts} before, {after} after")
        result = {
            "dataset": dataset.name,
            "variant": variant,
            "rows": sum(counts.values()),
            "ckpt_disk": checkpoint_bytes(data_dir),
            "wal_disk": dir_bytes(data_dir / "wal"),
            "load_s": load_s,
            "runs": runs,
        }
        for key in ("restart_s", "ckpt_load_s", "replay_s", "ckpt_log_bytes", "log_bytes",
                    "rss"):
            result[key] = statistics.median(r[key] for r in runs)
        result["ckpt_rows"] = runs[-1]["ckpt_rows"]
        return result
    except Exception:
        print(f"--- last lines of the server log ({server.log_path}):\n{server.log_tail()}",
              file=sys.stderr)
        raise
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
            for log in Path(workdir).glob(f"{data_dir.name}.start*.log"):
                log.unlink()


# ---------------------------------------------------------------------------------- report


def machine():
    cores = len(os.sched_getaffinity(0))
    mem = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) * 1024
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return cores, mem, model


def fmt_bytes(n):
    if n == 0:
        return "-"
    return f"{n / GB:.2f} GB" if n >= GB else f"{n / 1e6:.1f} MB"


def write_report(results, args, binary):
    cores, mem, model = machine()
    lines = [
        "# Cold start: restart time and checkpoint load speed",
        "",
        f"Machine: {cores} cores{f' ({model})' if model else ''}, {mem / 2**30:.1f} GiB RAM. "
        f"Binary: `{binary}`. Each row: median of {args.runs} restarts (SIGTERM, then start) of "
        "the same data directory. Page cache: "
        + ("dropped before every restart (`--drop-caches`)." if args.drop_caches else
           "not dropped, so the checkpoint files are read from memory and the numbers measure "
           "decoding and building the tables, not the disk."),
        "",
        "- *restart s*: from spawning `shoal serve` until a new connection has run `SELECT 1`.",
        "- *load s* / *replay s*: the server's `recovery:` log line (checkpoint load, then redo "
        "log replay).",
        "- *GB/s*, *rows/s*: checkpoint bytes on disk (the current `checkpoints/<id>/` "
        "directory) and the tables' rows, divided by *load s*; for *log replay*, the redo log "
        "bytes on disk and the rows divided by *replay s*.",
        "- Target (issue): at least 1 GB/s of checkpoint loaded on 2 cores.",
        "",
        "| dataset | start from | rows | checkpoint on disk | log on disk | restart s | load s "
        "| replay s | GB/s | rows/s | RSS after start |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if r["variant"] == "checkpoint":
            secs, nbytes = r["ckpt_load_s"], r["ckpt_disk"]
        else:
            secs, nbytes = r["replay_s"], r["wal_disk"]
        # Table rows, not checkpoint entries: a column table's entry is a whole segment.
        nrows = r["rows"]
        gbs = nbytes / GB / secs if secs > 0 else float("nan")
        rows_s = nrows / secs if secs > 0 else float("nan")
        lines.append(
            f"| {r['dataset']} | {r['variant']} | {r['rows']:,} | {fmt_bytes(r['ckpt_disk'])} "
            f"| {fmt_bytes(r['wal_disk'])} | {r['restart_s']:.3f} | {r['ckpt_load_s']:.3f} "
            f"| {r['replay_s']:.3f} | {gbs:.2f} | {rows_s:,.0f} | {r['rss'] / 2**20:,.0f} MiB |")
    cmd = "python3 bench/coldstart/run.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in
        (("scales", args.scales), ("gb", f"{args.gb:g}"),
         ("big_access_method", args.big_access_method), ("runs", args.runs)))
    cmd += f" --fill-clients {args.fill_clients}" if args.fill_clients != 1 else ""
    cmd += " --replay" if args.replay else ""
    cmd += " --drop-caches" if args.drop_caches else ""
    lines += ["", f"Reproduce: `{cmd}`."]
    text = "\n".join(lines) + "\n"
    (OUT_DIR / "results.md").write_text(text)
    print()
    print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scales", default="100",
                    help="pgbench -i scales, comma-separated; empty or 0 skips pgbench")
    ap.add_argument("--gb", type=float, default=5,
                    help="checkpoint size of the generated table in GB; 0 skips it")
    ap.add_argument("--batch-rows", type=int, default=1_000_000,
                    help="rows per INSERT ... SELECT statement of the generated table")
    ap.add_argument("--fill-clients", type=int, default=1,
                    help="connections filling the big table at once, each inserting its own "
                         "batches (their rows interleave in the table, as with concurrent "
                         "loaders)")
    ap.add_argument("--big-access-method", default="heap",
                    help="heap, columnar, or heap,columnar: the kind of table of the big dataset")
    ap.add_argument("--runs", type=int, default=3, help="restarts per dataset; median reported")
    ap.add_argument("--replay", action="store_true",
                    help="also load each dataset without any checkpoint and time log replay")
    ap.add_argument("--binary", help="shoal binary (default: the first production, then "
                    "release, build found in $CARGO_TARGET_DIR, ./target, "
                    "/work/cargo-target-release)")
    ap.add_argument("--build", action="store_true",
                    help="run cargo build --profile production first")
    ap.add_argument("--workdir", default="/tmp/shoal-coldstart",
                    help="where the data directories and server logs go (removed afterwards)")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="seconds a start may take before the run fails")
    ap.add_argument("--drop-caches", action="store_true",
                    help="sync and drop the OS page cache before each restart (root; affects "
                    "the whole machine)")
    ap.add_argument("--keep", action="store_true", help="keep data directories and logs")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    # SIGTERM (e.g. from a CI timeout) unwinds through the finally blocks like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    binary = find_binary(args)
    print(f"shoal binary: {binary} (built {time.ctime(binary.stat().st_mtime)})", flush=True)
    datasets = [PgbenchDataset(int(s)) for s in args.scales.split(",") if s.strip()
                and int(s) > 0]
    if args.gb > 0:
        for access_method in args.big_access_method.split(","):
            datasets.append(GbDataset(args.gb, args.batch_rows, access_method.strip(),
                                      args.fill_clients))
    variants = ["checkpoint"] + (["log replay"] if args.replay else [])

    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="run-", dir=args.workdir)
    results = []
    try:
        for dataset in datasets:
            for variant in variants:
                results.append(measure(binary, dataset, variant, workdir, args))
    finally:
        for server in list(LIVE_SERVERS):
            server.stop()
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
            try:
                os.rmdir(args.workdir)  # only if nothing else is in it
            except OSError:
                pass
    write_report(results, args, binary)


if __name__ == "__main__":
    sys.exit(main())
