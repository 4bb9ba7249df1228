#!/usr/bin/env python3
"""sysbench's OLTP workloads against PostgreSQL 15 and Shoal, one after the other on this
machine, both durable (fsync on; Shoal's redo log with synchronous commit).

    python3 bench/oltp/sysbench.py --shoal-binary target/release/shoal [--time-s 30] [--runs 3]

Needs sysbench 1.0 (Debian's package, with its pgsql driver) and PostgreSQL 15 under
/usr/lib/postgresql/15/bin. Each server gets a fresh data directory under /tmp; the tables
(4 of 100,000 rows by default) are prepared once per server, then each workload runs `--runs`
times; the table shows the median transactions per second and Shoal's ratio to PostgreSQL.
Writes the table to bench/oltp/sysbench-results.md (or --report), and a PNG next to it when
matplotlib is installed.
"""

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

PG_BIN = "/usr/lib/postgresql/15/bin"
WORKLOADS = ["oltp_point_select", "oltp_read_only", "oltp_write_only", "oltp_read_write"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, timeout_s=60):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        ok = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-Atc", "select 1"],
            capture_output=True,
        )
        if ok.returncode == 0:
            return
        time.sleep(0.3)
    raise RuntimeError(f"server on port {port} did not start")


class Postgres:
    name = "PostgreSQL 15"

    def __init__(self, dir="/tmp/sysbench-pg", max_connections=100):
        self.port = free_port()
        self.dir = dir
        self.max_connections = max_connections
        self.proc = None

    def start(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        os.makedirs(self.dir)
        if as_postgres:
            shutil.chown(self.dir, "postgres")
        subprocess.run(as_postgres + [f"{PG_BIN}/initdb", "-D", self.dir, "-U", "postgres",
                                      "-A", "trust"], check=True, capture_output=True)
        subprocess.run(as_postgres + [f"{PG_BIN}/pg_ctl", "-D", self.dir, "-l",
                                      f"{self.dir}/log", "-o",
                                      f"-p {self.port} -c listen_addresses=127.0.0.1 "
                                      f"-c max_connections={self.max_connections} -c shared_buffers=1GB",
                                      "start"], check=True, capture_output=True)
        wait_ready(self.port)

    def stop(self):
        as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(as_postgres + [f"{PG_BIN}/pg_ctl", "-D", self.dir, "stop", "-m", "fast"],
                       capture_output=True)


class Shoal:
    name = "Shoal"

    def __init__(self, binary, dir="/tmp/sysbench-shoal"):
        self.binary = binary
        self.port = free_port()
        self.dir = dir
        self.proc = None

    def start(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        log = open(self.dir + ".log", "w")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir",
             self.dir, "--unix-socket-dir", ""],
            stdout=log, stderr=log, start_new_session=True)
        wait_ready(self.port)

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def sysbench(server, args, workload, command, threads, time_s):
    cmd = ["sysbench", "--db-driver=pgsql", "--pgsql-host=127.0.0.1",
           f"--pgsql-port={server.port}", "--pgsql-user=postgres", "--pgsql-db=postgres",
           f"--tables={args.tables}", f"--table-size={args.table_size}",
           f"--threads={threads}", f"--time={time_s}", "--report-interval=0", workload, command]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out.stdout


def transactions_per_s(output):
    m = re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec\.\)", output)
    if not m:
        raise RuntimeError(f"no transaction rate in sysbench's output:\n{output[-2000:]}")
    return float(m.group(1))


def measure(server, args):
    server.start()
    try:
        sysbench(server, args, "oltp_common", "prepare", threads=1, time_s=0)
        results = {}
        for w in WORKLOADS:
            runs = [transactions_per_s(sysbench(server, args, w, "run", args.threads, args.time_s))
                    for _ in range(args.runs)]
            results[w] = (statistics.median(runs), runs)
            print(f"{server.name} {w}: {results[w][0]:.0f} tps (runs {runs})", flush=True)
        return results
    finally:
        server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shoal-binary", required=True)
    p.add_argument("--tables", type=int, default=4)
    p.add_argument("--table-size", type=int, default=100_000)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--time-s", type=int, default=30)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--report", default=os.path.join(os.path.dirname(__file__), "sysbench-results.md"))
    args = p.parse_args()
    if not shutil.which("sysbench"):
        sys.exit("sysbench is not installed (apt-get install sysbench)")
    pg = measure(Postgres(), args)
    shoal = measure(Shoal(args.shoal_binary), args)
    lines = [
        f"sysbench 1.0, {args.tables} tables of {args.table_size:,} rows, {args.threads} threads, "
        f"{args.time_s} s per run, median of {args.runs} runs, {os.cpu_count()} cores; "
        "both servers durable.",
        "",
        "| workload | PostgreSQL 15 tps | Shoal tps | Shoal / PostgreSQL |",
        "|---|---|---|---|",
    ]
    for w in WORKLOADS:
        lines.append(f"| {w} | {pg[w][0]:.0f} | {shoal[w][0]:.0f} | {shoal[w][0] / pg[w][0]:.2f}x |")
    table = "\n".join(lines) + "\n"
    print(table)
    with open(args.report, "w") as f:
        f.write(table)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 4))
        xs = range(len(WORKLOADS))
        ax.bar([x - 0.2 for x in xs], [pg[w][0] for w in WORKLOADS], 0.4, label="PostgreSQL 15")
        ax.bar([x + 0.2 for x in xs], [shoal[w][0] for w in WORKLOADS], 0.4, label="Shoal")
        ax.set_xticks(list(xs), WORKLOADS)
        ax.set_ylabel("transactions/s (median)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.splitext(args.report)[0] + ".png")
    except ImportError:
        pass


if __name__ == "__main__":
    main()
