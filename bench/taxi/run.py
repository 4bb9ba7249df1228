#!/usr/bin/env python3
"""The "billion taxi rides" benchmark, scaled down: Shoal against DuckDB and PostgreSQL 15.

Builds `taxi-gen` and `shoal` (production profile), generates the trips CSV once per row count
(cached in the work directory), then for each system: creates `trips` from schema.sql, loads the
CSV and times the load, runs the four queries of queries.sql best-of-N, checks that every system
returns the same rows as PostgreSQL, and measures memory per row. Writes results.md and
times.png next to this script and prints the table.

- Shoal: a fresh server per row count; by default `COPY trips FROM 'file' WITH (FORMAT csv)`,
  which the server reads itself as DuckDB does (`--shoal-load stdin` streams the file over the
  wire in one COPY instead). Memory: growth of the server's resident set over the load.
- DuckDB: in-memory, in a child process (so its resident set is its own), `COPY trips FROM
  'file'`. Memory: growth of the child's VmRSS over the load, per row (duckdb_memory() is noted).
- PostgreSQL 15: a throw-away cluster; COPY FROM STDIN, then VACUUM ANALYZE (inside the load
  time). Memory: pg_total_relation_size('trips') per row.

Query times are wall-clock times at the client including fetching the result, best of --runs.

Usage: python3 bench/taxi/run.py [--rows 5000000 --rows 20000000] [--seed 42] [--runs 5]
           [--systems shoal,duckdb,postgres] [--shoal-access-method columnar|heap] [--also-heap]
           [--workdir DIR] [--skip-build] [--shoal-binary PATH] [--gen-binary PATH]
Needs: duckdb, psycopg (3), matplotlib; PostgreSQL 15 server binaries (apt-get install
postgresql-15).
"""

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT_DIR = Path(__file__).resolve().parent
PG_BIN = Path("/usr/lib/postgresql/15/bin")
# The benchmark's definition: schema.sql and queries.sql next to this script, or in the shared
# copy of the benchmark's facts.
BENCH_DIRS = [OUT_DIR, Path("/work/shared/bench/taxi")]
COPY_BLOCK_BYTES = 8 << 20
# Shoal loads the file in one COPY (from the file, or over the wire with --shoal-load stdin)
# unless --shoal-rows-per-copy asks for several.
SHOAL_ROWS_PER_COPY = 0
FLOAT_REL_TOLERANCE = 1e-9

sys.dont_write_bytecode = True  # no __pycache__ in bench/pgbench from the import below
sys.path.insert(0, str(REPO / "bench" / "pgbench"))
from run import as_postgres_user, free_port, wait_for_port  # noqa: E402  (bench/pgbench/run.py)


def bench_file(name):
    for d in BENCH_DIRS:
        if (d / name).exists():
            return d / name
    raise SystemExit(f"{name} not found in {', '.join(map(str, BENCH_DIRS))}")


def read_queries():
    text = bench_file("queries.sql").read_text()
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("--")]
    return [q.strip() for q in "\n".join(lines).split(";") if q.strip()]


def table_ddl(access_method=None):
    ddl = bench_file("schema.sql").read_text().strip()
    assert ddl.endswith(";"), "schema.sql must end with ';'"
    if access_method:
        ddl = ddl[:-1].rstrip() + f" USING {access_method};"
    return ddl


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def short_error(e):
    """The first line of an error, for a table cell."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text if len(text) <= 90 else text[:87] + "..."


# ---------------------------------------------------------------------------------------------
# Building and generating

def target_dir():
    return Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))


def build(args):
    gen = Path(args.gen_binary) if args.gen_binary else target_dir() / "production" / "taxi-gen"
    shoal = Path(args.shoal_binary) if args.shoal_binary else target_dir() / "production" / "shoal"
    if not args.skip_build:
        packages = []
        if not args.gen_binary:
            packages += ["-p", "shoal-taxi-gen"]
        if not args.shoal_binary and any(s.startswith("shoal") for s in args.system_list):
            packages += ["-p", "shoal"]
        if packages:
            print(f"building {' '.join(packages[1::2])} (production profile, target "
                  f"{target_dir()})", flush=True)
            subprocess.run(["cargo", "build", "--profile", "production", "-q"] + packages,
                           cwd=REPO, check=True)
    for binary in (gen, shoal):
        if binary == shoal and not any(s.startswith("shoal") for s in args.system_list):
            continue
        if not binary.exists():
            raise SystemExit(f"{binary} does not exist (build it, or drop --skip-build)")
    return gen, shoal


def csv_for(gen, workdir, rows, seed):
    """The CSV for (rows, seed), generated once: the file is renamed into place when complete."""
    path = Path(workdir) / f"trips-{rows}-seed{seed}.csv"
    if path.exists():
        print(f"using cached {path} ({path.stat().st_size / 1e9:.2f} GB)", flush=True)
        return path
    partial = path.with_suffix(".csv.partial")
    print(f"generating {rows} rows into {path}", flush=True)
    subprocess.run([str(gen), "--rows", str(rows), "--seed", str(seed), "--out", str(partial)],
                   check=True)
    partial.rename(path)
    return path


# ---------------------------------------------------------------------------------------------
# Loading over the wire (Shoal and PostgreSQL)

def copy_rows(conn, path, offset, max_rows):
    """Streams rows of the CSV from byte `offset` into one COPY, at most `max_rows` of them.
    Returns the offset after the last row sent and the number of rows."""
    rows = 0
    with conn.cursor() as cur, cur.copy("COPY trips FROM STDIN WITH (FORMAT csv)") as copy, \
            open(path, "rb") as f:
        f.seek(offset)
        while rows < max_rows:
            block = f.read(COPY_BLOCK_BYTES)
            if not block:
                break
            newlines = block.count(b"\n")
            if rows + newlines > max_rows:
                cut = -1
                for _ in range(max_rows - rows):
                    cut = block.index(b"\n", cut + 1)
                block = block[:cut + 1]
                newlines = max_rows - rows
            copy.write(block)
            rows += newlines
            offset += len(block)
    return offset, rows


def copy_file(conn, path, rows_per_copy=None):
    """Loads the whole file, in one COPY or in COPYs of `rows_per_copy` rows. Returns the
    number of COPY statements."""
    size = path.stat().st_size
    offset, copies = 0, 0
    while offset < size:
        offset, _ = copy_rows(conn, path, offset, rows_per_copy or math.inf)
        copies += 1
    return copies


def run_queries(execute, queries, runs):
    """Best-of-`runs` seconds and the result rows of each query, or the error's text."""
    out = []
    for q in queries:
        best, rows, error = math.inf, None, None
        for _ in range(runs):
            started = time.perf_counter()
            try:
                rows = execute(q)
            except Exception as e:  # noqa: BLE001  (any failure is a result to report)
                error = short_error(e)
                break
            best = min(best, time.perf_counter() - started)
        out.append({"seconds": None if error else best, "rows": None if error else rows,
                     "error": error})
    return out


# ---------------------------------------------------------------------------------------------
# The systems. Each `measure` returns {"load_s", "queries", "bytes_per_row", "notes", "error"}.

class Shoal:
    def __init__(self, binary, workdir, access_method, rows_per_copy=SHOAL_ROWS_PER_COPY,
                 load_from="file"):
        self.load_from = load_from
        self.binary = binary
        self.workdir = Path(workdir)
        self.access_method = access_method
        self.name = f"Shoal ({access_method})"
        self.rows_per_copy = rows_per_copy
        self.proc = None

    def start(self):
        self.port = free_port()
        self.data_dir = Path(tempfile.mkdtemp(prefix="shoal-data-", dir=self.workdir))
        self.log = open(self.workdir / "shoal.log", "a")
        self.proc = subprocess.Popen(
            [str(self.binary), "serve", "--listen", f"127.0.0.1:{self.port}",
             "--data-dir", str(self.data_dir)], stdout=subprocess.DEVNULL, stderr=self.log)
        wait_for_port(self.port)

    def stop(self):
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            self.log.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def connect(self):
        import psycopg
        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                               dbname="postgres", autocommit=True)

    def load(self, csv_path, rows):
        """Returns (load seconds, RSS growth in bytes, notes)."""
        notes = []
        self.start()
        conn = self.connect()
        rss_before = rss_bytes(self.proc.pid)
        notes += self.create_table(conn)
        started = time.perf_counter()
        if self.rows_per_copy:
            copies = copy_file(conn, csv_path, self.rows_per_copy)
            notes.append(f"loaded in {copies} COPYs of at most {self.rows_per_copy} rows")
        elif self.load_from == "file":
            # The server reads the file itself, as DuckDB does.
            conn.execute(f"COPY trips FROM '{Path(csv_path).resolve()}' WITH (FORMAT csv)")
            notes.append("server-side COPY FROM file")
        else:
            copy_file(conn, csv_path)
        load_s = time.perf_counter() - started
        grown = rss_bytes(self.proc.pid) - rss_before
        # The load filled the redo log, so an automatic checkpoint would start now and run
        # beside the queries. Take it first, outside the load time, and say how long it took.
        checkpoint_started = time.perf_counter()
        conn.execute("CHECKPOINT")
        notes.append(f"CHECKPOINT after the load {time.perf_counter() - checkpoint_started:.1f} s "
                     "(not in the load time)")
        self.conn = conn
        return load_s, grown, notes

    def create_table(self, conn):
        """CREATE TABLE ... USING the access method. A server that does not know the clause
        gets a plain CREATE TABLE for `heap`, its default access method, and the note says so;
        `columnar` has no such stand-in."""
        import psycopg
        try:
            conn.execute(table_ddl(self.access_method))
            return []
        except psycopg.Error as e:
            if self.access_method != "heap":
                raise
            conn.execute(table_ddl())
            return [f"`USING heap` rejected ({short_error(e)}); created without USING "
                    "(heap is the default access method)"]


    def measure(self, csv_path, rows, queries, runs):
        try:
            load_s, grown, notes = self.load(csv_path, rows)
            count = self.conn.execute("SELECT count(*) FROM trips").fetchone()[0]
            if count != rows:
                notes.append(f"count(*) is {count}, expected {rows}")
            results = run_queries(lambda q: self.conn.execute(q).fetchall(), queries, runs)
            self.conn.close()
            return {"load_s": load_s, "queries": results, "bytes_per_row": grown / rows,
                    "notes": notes}
        finally:
            self.stop()


class Postgres:
    name = "PostgreSQL"

    def __init__(self, workdir):
        self.workdir = Path(workdir)

    def start(self, rows):
        self.port = free_port()
        self.data_dir = Path(tempfile.mkdtemp(prefix="pg-data-", dir=self.workdir))
        if os.geteuid() == 0:
            shutil.chown(self.data_dir, "postgres")
        subprocess.run(as_postgres_user([str(PG_BIN / "initdb"), "-D", str(self.data_dir),
                                         "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
                       check=True, stdout=subprocess.DEVNULL)
        ram_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        # Room for the whole table (about 600 bytes a row), up to a quarter of the machine.
        shared_buffers_mb = int(min(max(256 << 20, rows * 600), ram_bytes // 4) >> 20)
        with open(self.data_dir / "postgresql.conf", "a") as f:
            f.write(f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{self.data_dir}'\n"
                    f"shared_buffers = '{shared_buffers_mb}MB'\nwork_mem = '256MB'\n"
                    f"max_wal_size = '8GB'\n")
        subprocess.run(as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir), "-w",
                                         "-l", str(self.data_dir / "log"), "start"]),
                       check=True, stdout=subprocess.DEVNULL)
        wait_for_port(self.port)

    def stop(self):
        subprocess.run(as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir), "-m",
                                         "fast", "stop"]), stdout=subprocess.DEVNULL)
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def measure(self, csv_path, rows, queries, runs):
        import psycopg
        self.start(rows)
        try:
            conn = psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                                   dbname="postgres", autocommit=True)
            conn.execute(table_ddl())
            started = time.perf_counter()
            copy_file(conn, csv_path)
            copied_s = time.perf_counter() - started
            conn.execute("VACUUM ANALYZE trips")
            load_s = time.perf_counter() - started
            size = conn.execute("SELECT pg_total_relation_size('trips')").fetchone()[0]
            results = run_queries(lambda q: conn.execute(q).fetchall(), queries, runs)
            conn.close()
            return {"load_s": load_s, "queries": results, "bytes_per_row": size / rows,
                    "notes": [f"COPY {copied_s:.2f} s + VACUUM ANALYZE "
                              f"{load_s - copied_s:.2f} s"]}
        finally:
            self.stop()


class DuckDB:
    """Runs in a child process (`--duckdb-worker`), so that its resident set is its own."""
    name = "DuckDB"

    def measure(self, csv_path, rows, queries, runs):
        job = {"csv": str(csv_path), "rows": rows, "queries": queries, "runs": runs,
               "ddl": table_ddl()}
        out = subprocess.run([sys.executable, __file__, "--duckdb-worker", json.dumps(job)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"DuckDB worker failed: {out.stderr.strip()[-2000:]}")
        return json.loads(out.stdout)


def duckdb_worker(job):
    import duckdb
    pid = os.getpid()
    rss_before = rss_bytes(pid)
    conn = duckdb.connect(":memory:")
    conn.execute(job["ddl"])
    started = time.perf_counter()
    path = job["csv"].replace("'", "''")
    conn.execute(f"COPY trips FROM '{path}' (FORMAT csv, HEADER false)")
    load_s = time.perf_counter() - started
    grown = rss_bytes(pid) - rss_before
    tracked = conn.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0]
    count = conn.execute("SELECT count(*) FROM trips").fetchone()[0]
    results = run_queries(lambda q: conn.execute(q).fetchall(), job["queries"], job["runs"])
    for r in results:
        if r["rows"] is not None:
            r["rows"] = [[jsonable(v) for v in row] for row in r["rows"]]
    notes = [f"duckdb_memory() {tracked / job['rows']:.0f} bytes/row"]
    if count != job["rows"]:
        notes.append(f"count(*) is {count}, expected {job['rows']}")
    json.dump({"load_s": load_s, "queries": results, "bytes_per_row": grown / job["rows"],
               "notes": notes}, sys.stdout)


def jsonable(v):
    if isinstance(v, Decimal):
        return float(v) if v != v.to_integral_value() else int(v)
    if v is None or isinstance(v, (int, float, str)):
        return v
    return str(v)


# ---------------------------------------------------------------------------------------------
# Checking results

def normalise(rows):
    """Rows as sorted tuples of plain values: integral numbers (PostgreSQL's numeric year, a
    double 2009.0) become ints, other numbers floats; NULLs sort first."""
    def value(v):
        if isinstance(v, (Decimal, float)) and math.isfinite(v) and v == int(v):
            return int(v)
        if isinstance(v, Decimal):
            return float(v)
        return v

    def key(row):
        return tuple((0, 0) if v is None else (1, v) for v in row)

    return sorted((tuple(value(v) for v in row) for row in rows), key=key)


def same_value(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=FLOAT_REL_TOLERANCE, abs_tol=1e-12)
    return a == b


def compare(reference, rows):
    """None if the results agree, otherwise a short description of the first difference."""
    ref, got = normalise(reference), normalise(rows)
    if len(ref) != len(got):
        return f"{len(got)} rows, expected {len(ref)}"
    for r, g in zip(ref, got):
        if len(r) != len(g) or not all(same_value(a, b) for a, b in zip(r, g)):
            return f"row {g} where the reference has {r}"
    return None


def check_results(measured, query_count):
    """Per query, the systems whose rows differ from the reference (PostgreSQL if it ran,
    else the first system that answered)."""
    problems = []
    for qi in range(query_count):
        answered = [(name, m["queries"][qi]["rows"]) for name, m in measured.items()
                    if m.get("queries") and m["queries"][qi]["rows"] is not None]
        if len(answered) < 2:
            continue
        ref_name, ref_rows = next(((n, r) for n, r in answered if n == "PostgreSQL"), answered[0])
        for name, rows in answered:
            if name != ref_name:
                diff = compare(ref_rows, rows)
                if diff:
                    problems.append(f"Q{qi + 1}: {name} differs from {ref_name}: {diff}")
    return problems


# ---------------------------------------------------------------------------------------------
# Report

def cell_seconds(m, qi):
    q = m["queries"][qi]
    return f"error: {q['error']}" if q["error"] else f"{q['seconds']:.3f}"


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b not in (None, 0) else "-"


def metric(m, column):
    """The numeric value of a table column (0: load, 1..4: queries, 5: bytes/row)."""
    if not m or m.get("error"):
        return None
    if column == 0:
        return m["load_s"]
    if column == 5:
        return m["bytes_per_row"]
    return m["queries"][column - 1]["seconds"]


def table_for(rows, measured, query_count):
    header = "| system | load s | " + " | ".join(f"Q{i + 1} s" for i in range(query_count)) \
        + " | bytes/row |"
    lines = [header, "|---" + "|---:" * (query_count + 2) + "|"]
    for name, m in measured.items():
        if m.get("error"):
            lines.append(f"| {name} | error: {m['error']} |" + " |" * (query_count + 1))
            continue
        cells = [f"{m['load_s']:.2f}"] + [cell_seconds(m, i) for i in range(query_count)] \
            + [f"{m['bytes_per_row']:.0f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    duck, pg = measured.get("DuckDB"), measured.get("PostgreSQL")
    for name, m in measured.items():
        if not name.startswith("Shoal") or m.get("error"):
            continue
        columns = range(query_count + 2)
        if duck and not duck.get("error"):
            lines.append(f"| {name} / DuckDB | " + " | ".join(
                ratio(metric(m, c), metric(duck, c)) for c in columns) + " |")
        if pg and not pg.get("error"):
            lines.append(f"| PostgreSQL / {name} | " + " | ".join(
                ratio(metric(pg, c), metric(m, c)) for c in columns) + " |")
    return lines


def source_version():
    """The commit the binaries were built from, marked when the tree had local changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, capture_output=True, text=True).stdout.strip()
        return f"commit {head}" + (" with uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "an unknown commit"


def write_report(all_results, queries, args, machine):
    lines = [
        "# Taxi rides benchmark: Shoal, DuckDB, PostgreSQL 15",
        "",
        f"Command: `python3 bench/taxi/run.py {' '.join(sys.argv[1:])}` at {source_version()}.",
        "",
        f"Machine: {machine}. Seed {args.seed}; query times best of {args.runs} runs, seconds, "
        "at the client including the result transfer. Load: CSV into an empty table (Shoal "
        f"{'reading the file itself with COPY FROM file' if args.shoal_load == 'file' else 'over the wire with COPY FROM STDIN'}, "
        "durable, then a CHECKPOINT outside the load time; PostgreSQL over the wire with COPY "
        "FROM STDIN, including VACUUM ANALYZE; DuckDB in-memory, COPY from the file). "
        "bytes/row: Shoal and DuckDB resident "
        "memory growth over the load, PostgreSQL pg_total_relation_size. Ratio rows: above 1 "
        "means the first-named system takes longer (or more bytes).",
        "",
        "Queries:",
        "",
    ]
    lines += [f"{i + 1}. `{q}`" for i, q in enumerate(queries)]
    for rows, (measured, problems) in all_results.items():
        lines += ["", f"## {rows:,} rows", ""]
        lines += table_for(rows, measured, len(queries))
        notes = [f"- {name}: {'; '.join(m['notes'])}" for name, m in measured.items()
                 if m.get("notes")]
        notes += [f"- {name}: query {i + 1} failed: {q['error']}" for name, m in measured.items()
                  for i, q in enumerate(m.get("queries") or []) if q["error"]]
        answered = [n for n, m in measured.items() if not m.get("error")]
        if len(answered) < 2:
            lines += ["", "Results: not compared (fewer than two systems answered)."]
        elif not problems:
            lines += ["", f"Results: {', '.join(answered)} return the same rows for every query "
                      "that they all answered."]
        else:
            lines += ["", "Results differ:"] + [f"- {p}" for p in problems]
        if notes:
            lines += ["", "Notes:"] + notes
    text = "\n".join(lines) + "\n"
    (OUT_DIR / "results.md").write_text(text)
    print(text)


def plot(all_results, query_count):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(all_results), 1, figsize=(9.5, 3.6 * len(all_results)),
                             squeeze=False)
    for ax, (rows, (measured, _)) in zip(axes[:, 0], all_results.items()):
        names = list(measured)
        width = 0.8 / max(1, len(names))
        failed = []  # x positions of queries a system could not answer
        for si, name in enumerate(names):
            for qi in range(query_count):
                x = qi + (si - (len(names) - 1) / 2) * width
                seconds = metric(measured[name], qi + 1)
                if seconds is None:
                    failed.append(x)
                    continue
                ax.bar(x, seconds, width, color=f"C{si}", label=name if qi == 0 else None)
            if metric(measured[name], 1) is None:
                ax.bar([], [], color=f"C{si}", label=f"{name} (Q1 failed)")
        ax.set_yscale("log")
        bottom = ax.get_ylim()[0]
        for x in failed:
            ax.text(x, bottom, "failed", ha="center", va="bottom", fontsize=7, rotation=90)
        ax.set_xticks(range(query_count), [f"Q{i + 1}" for i in range(query_count)])
        ax.set_ylabel("seconds (best run, log)")
        ax.set_title(f"{rows:,} rows")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(OUT_DIR / "times.png", dpi=100)


# ---------------------------------------------------------------------------------------------

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, action="append",
                    help="row count (repeatable; default 5000000 and 20000000)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--runs", type=int, default=5, help="runs per query; the best is reported")
    ap.add_argument("--systems", default="shoal,duckdb,postgres")
    ap.add_argument("--shoal-access-method", choices=["columnar", "heap"], default="columnar")
    ap.add_argument("--also-heap", action="store_true",
                    help="also run Shoal with a row (heap) table")
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "shoal-taxi-bench"),
                    help="where the generated CSVs are cached and the servers keep their data")
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--shoal-load", choices=["file", "stdin"], default="file",
                    help="Shoal loads with COPY FROM 'file' (server-side, the default) or "
                         "COPY FROM STDIN over the wire")
    ap.add_argument("--shoal-rows-per-copy", type=int, default=SHOAL_ROWS_PER_COPY,
                    help="load Shoal in COPYs of this many rows (0: one COPY)")
    ap.add_argument("--shoal-binary", help="use this shoal binary instead of building one")
    ap.add_argument("--gen-binary", help="use this taxi-gen binary instead of building one")
    args = ap.parse_args()
    args.rows = args.rows or [5_000_000, 20_000_000]
    args.system_list = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(args.system_list) - {"shoal", "duckdb", "postgres"}
    if unknown:
        ap.error(f"unknown systems {sorted(unknown)}; choose from shoal, duckdb, postgres")
    return args


def make_systems(args, shoal_binary, workdir):
    systems = []
    for s in args.system_list:
        if s == "shoal":
            systems.append(Shoal(shoal_binary, workdir, args.shoal_access_method,
                                 args.shoal_rows_per_copy, args.shoal_load))
            if args.also_heap and args.shoal_access_method != "heap":
                systems.append(Shoal(shoal_binary, workdir, "heap", args.shoal_rows_per_copy,
                                     args.shoal_load))
        elif s == "duckdb":
            systems.append(DuckDB())
        else:
            systems.append(Postgres(workdir))
    return systems


def warm_page_cache(path):
    """Reads the CSV once, untimed, so that every system's load starts with the file in the
    page cache. Without it the first system measured after a build or a generation read part
    of the file from disk (the same Shoal load of 5M rows took 16.2 s cold and 8.7-9.7 s
    warm), while the systems after it found it cached."""
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--duckdb-worker":
        return duckdb_worker(json.loads(sys.argv[2]))
    args = parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    os.chmod(workdir, 0o755)  # PostgreSQL runs as the postgres user and needs to enter it.
    gen, shoal_binary = build(args)
    queries = read_queries()
    systems = make_systems(args, shoal_binary, workdir)
    all_results = {}
    for rows in args.rows:
        csv_path = csv_for(gen, workdir, rows, args.seed)
        measured = {}
        for system in systems:
            print(f"{system.name}: {rows} rows", flush=True)
            warm_page_cache(csv_path)
            try:
                m = system.measure(csv_path, rows, queries, args.runs)
            except Exception as e:  # noqa: BLE001  (a failed system is a result to report)
                m = {"error": short_error(e), "notes": [str(e)]}
            measured[system.name] = m
            if m.get("error"):
                print(f"  failed: {m['error']}", flush=True)
            else:
                times = ", ".join(cell_seconds(m, i) for i in range(len(queries)))
                print(f"  load {m['load_s']:.2f} s, queries {times}, "
                      f"{m['bytes_per_row']:.0f} bytes/row {m['notes']}", flush=True)
        all_results[rows] = (measured, check_results(measured, len(queries)))
    machine = f"{os.cpu_count()} cores, " \
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
    write_report(all_results, queries, args, machine)
    plot(all_results, len(queries))


if __name__ == "__main__":
    sys.exit(main())
