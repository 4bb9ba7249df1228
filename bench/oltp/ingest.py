#!/usr/bin/env python3
"""The ingest test of openGauss MOT against PostgreSQL 15 and Shoal, one server after the other
on this machine, both durable (fsync on; Shoal's redo log with synchronous commit).

    python3 bench/oltp/ingest.py --shoal-binary target/release/shoal [--time-s 20] [--runs 3]

Many clients insert 10 rows per statement, each statement its own transaction, into a table
with a bigserial key and a timestamp default (`now()`); a row is about 200 bytes. The clients
are pgbench's (`-M prepared` by default, `--protocol simple` for the simple query protocol), so
the statement is the same on both servers. The table is emptied before each run; the table
shows the median rows/s of `--runs` runs per client count and Shoal's ratio to PostgreSQL.
Writes the table to bench/oltp/ingest-results.md (or --report), and a PNG next to it when
matplotlib is installed.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sysbench import Postgres, Shoal  # noqa: E402

ROWS_PER_STATEMENT = 10
# 8-byte id + 8-byte timestamp + 8-byte device id + 8-byte reading + a 168-byte payload.
PAYLOAD = "x" * 168

SCHEMA = """
DROP TABLE IF EXISTS ingest;
CREATE TABLE ingest (
    id bigserial PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    device_id bigint NOT NULL,
    reading double precision NOT NULL,
    payload text NOT NULL
);
"""


def script():
    """A pgbench script: one INSERT of ROWS_PER_STATEMENT rows of random device ids and
    readings, computed by the client as an ingesting application does."""
    lines = []
    for i in range(ROWS_PER_STATEMENT):
        lines.append(f"\\set d{i} random(1, 1000000)")
        lines.append(f"\\set r{i} random(0, 100000) / 100.0")
    rows = ", ".join(f"(:d{i}, :r{i}, '{PAYLOAD}')" for i in range(ROWS_PER_STATEMENT))
    lines.append(f"INSERT INTO ingest (device_id, reading, payload) VALUES {rows};")
    return "\n".join(lines) + "\n"


def psql(server, sql):
    subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres",
                    "-v", "ON_ERROR_STOP=1", "-qc", sql], check=True, capture_output=True)


def rows_in_table(server):
    out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres",
                          "-Atc", "SELECT count(*) FROM ingest"],
                         check=True, capture_output=True, text=True)
    return int(out.stdout.strip())


def run_once(server, script_path, clients, time_s, protocol):
    psql(server, "TRUNCATE ingest")
    cmd = ["pgbench", "-n", "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres",
           "-c", str(clients), "-j", "2", "-T", str(time_s), "-M", protocol, "-f", script_path,
           "postgres"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out.stdout)
    failed = re.search(r"number of failed transactions: (\d+)", out.stdout)
    done = re.search(r"number of transactions actually processed: (\d+)", out.stdout)
    if not tps or not done:
        raise RuntimeError(f"no rate in pgbench's output:\n{out.stdout[-2000:]}")
    if failed and int(failed.group(1)) != 0:
        raise RuntimeError(f"failed transactions:\n{out.stdout[-2000:]}")
    # Every acknowledged statement's rows are in the table: nothing was lost or doubled.
    stored = rows_in_table(server)
    expected = int(done.group(1)) * ROWS_PER_STATEMENT
    if stored != expected:
        raise RuntimeError(f"{server.name}: {stored} rows stored, {expected} acknowledged")
    return float(tps.group(1)) * ROWS_PER_STATEMENT


def measure(server, args, script_path):
    server.start()
    try:
        psql(server, SCHEMA)
        results = {}
        for clients in args.clients:
            runs = [run_once(server, script_path, clients, args.time_s, args.protocol)
                    for _ in range(args.runs)]
            results[clients] = statistics.median(runs)
            print(f"{server.name} {clients} clients: {results[clients]:.0f} rows/s "
                  f"(runs {[round(r) for r in runs]})", flush=True)
        return results
    finally:
        server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shoal-binary", required=True)
    p.add_argument("--clients", type=int, nargs="+", default=[50, 200])
    p.add_argument("--time-s", type=int, default=20)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--protocol", choices=["prepared", "simple", "extended"], default="prepared")
    p.add_argument("--report",
                   default=os.path.join(os.path.dirname(__file__), "ingest-results.md"))
    args = p.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script())
        script_path = f.name
    os.chmod(script_path, 0o644)
    max_connections = max(args.clients) + 20
    pg = measure(Postgres(dir="/tmp/ingest-pg", max_connections=max_connections), args,
                 script_path)
    shoal = measure(Shoal(args.shoal_binary, dir="/tmp/ingest-shoal"), args, script_path)
    lines = [
        f"openGauss MOT's ingest test: INSERTs of {ROWS_PER_STATEMENT} rows of ~200 bytes "
        "(bigserial key, `now()` default), one statement per transaction, pgbench "
        f"`-M {args.protocol}`, {args.time_s} s per run, median of {args.runs} runs, "
        f"{os.cpu_count()} cores; both servers durable.",
        "",
        "| clients | PostgreSQL 15 rows/s | Shoal rows/s | Shoal / PostgreSQL |",
        "|---|---|---|---|",
    ]
    for c in args.clients:
        lines.append(f"| {c} | {pg[c]:.0f} | {shoal[c]:.0f} | {shoal[c] / pg[c]:.2f}x |")
    table = "\n".join(lines) + "\n"
    print(table)
    with open(args.report, "w") as f:
        f.write(table)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        xs = range(len(args.clients))
        ax.bar([x - 0.2 for x in xs], [pg[c] for c in args.clients], 0.4, label="PostgreSQL 15")
        ax.bar([x + 0.2 for x in xs], [shoal[c] for c in args.clients], 0.4, label="Shoal")
        ax.set_xticks(list(xs), [f"{c} clients" for c in args.clients])
        ax.set_ylabel("rows/s (median)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.splitext(args.report)[0] + ".png")
    except ImportError:
        pass


if __name__ == "__main__":
    main()
