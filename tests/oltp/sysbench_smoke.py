#!/usr/bin/env python3
"""A short sysbench run on a Shoal it starts itself, as CI runs it: prepare two small tables,
run each OLTP workload for a few seconds with several threads, and check afterwards that no
row was lost or doubled (oltp_read_write and oltp_write_only delete a row and insert it again
in the same transaction, so each table keeps its ids 1..N and its size). Fails when sysbench
fails, completes no transaction, or ignores errors in more than a tenth of them. This is a test, not a benchmark: for throughput see
bench/oltp/sysbench.py.

    python3 tests/oltp/sysbench_smoke.py --shoal-binary target/debug/shoal
"""
import argparse
import re
import shutil
import subprocess
import sys
import tempfile

from tpcc_smoke import free_port, wait_for_port

WORKLOADS = ["oltp_point_select", "oltp_read_only", "oltp_write_only", "oltp_read_write"]


def psql(port, sql):
    done = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                           "-Atc", sql], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"psql failed: {done.stderr}")
    return done.stdout.strip()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shoal-binary", required=True)
    p.add_argument("--time-s", type=int, default=4)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--tables", type=int, default=2)
    p.add_argument("--table-size", type=int, default=2000)
    args = p.parse_args()
    if not shutil.which("sysbench"):
        raise SystemExit("sysbench is not installed (apt-get install sysbench)")
    port = free_port()
    data = tempfile.mkdtemp(prefix="shoal-sysbench-")
    proc = subprocess.Popen([args.shoal_binary, "serve", "--listen", f"127.0.0.1:{port}",
                             "--data-dir", data, "--unix-socket-dir", ""])
    try:
        wait_for_port(port, proc)
        common = ["sysbench", "--db-driver=pgsql", "--pgsql-host=127.0.0.1",
                  f"--pgsql-port={port}", "--pgsql-user=postgres", "--pgsql-db=postgres",
                  f"--tables={args.tables}", f"--table-size={args.table_size}"]

        def sysbench(*rest):
            cmd = common + list(rest)
            print("$ " + " ".join(cmd), flush=True)
            done = subprocess.run(cmd, capture_output=True, text=True)
            print(done.stdout[-1500:], flush=True)
            if done.returncode != 0:
                raise SystemExit(f"sysbench failed ({done.returncode}):\n{done.stderr[-3000:]}")
            return done.stdout

        sysbench("oltp_common", "prepare")
        for workload in WORKLOADS:
            out = sysbench(f"--threads={args.threads}", f"--time={args.time_s}",
                           "--report-interval=0", workload, "run")
            done = re.search(r"transactions:\s+(\d+)", out)
            errors = re.search(r"ignored errors:\s+(\d+)", out)
            if not done or int(done.group(1)) == 0:
                raise SystemExit(f"{workload}: no transaction completed")
            # sysbench retries the errors it ignores (deadlocks and unique violations between
            # threads writing the same ids, which PostgreSQL reports too); they must stay rare.
            if not errors or int(errors.group(1)) * 10 > int(done.group(1)):
                raise SystemExit(f"{workload}: sysbench reports too many errors")
        for t in range(1, args.tables + 1):
            stats = psql(port, f"SELECT count(*), count(DISTINCT id), min(id), max(id) "
                               f"FROM sbtest{t}")
            want = f"{args.table_size}|{args.table_size}|1|{args.table_size}"
            if stats != want:
                raise SystemExit(f"sbtest{t}: count, distinct ids, min, max = {stats}, "
                                 f"expected {want}")
            print(f"sbtest{t}: {stats} as prepared", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(data, ignore_errors=True)
    print("sysbench smoke test passed")


if __name__ == "__main__":
    sys.exit(main())
