#!/usr/bin/env python3
"""Single-row INSERTs into a column table: what the small segments they leave cost, before and
after VACUUM merges them (crates/shoal-sql/src/dml/compact.rs).

    python3 bench/columnar/small_inserts.py --binary target/release/shoal --rows 10000

Starts its own server on a free port with a temporary data directory, creates
t (id int, a text, b float8, c int) USING columnar (or --access-method heap), runs --rows
autocommit single-row INSERTs over one connection, and prints: the insert time, the server's
resident memory growth per row, pg_total_relation_size, and a count/sum scan time, then the same
after VACUUM. The background merger also runs during the inserts (once a table has 256 small
segments)."""

import argparse
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import psycopg


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("server exited")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="target/release/shoal")
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--access-method", default="columnar", choices=["columnar", "heap"])
    args = ap.parse_args()
    port, data_dir = free_port(), tempfile.mkdtemp(prefix="shoal-small-inserts-")
    server = subprocess.Popen([args.binary, "serve", "--listen", f"127.0.0.1:{port}",
                               "--data-dir", data_dir],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                conn = psycopg.connect(host="127.0.0.1", port=port, user="postgres",
                                       autocommit=True)
                break
            except psycopg.OperationalError:
                time.sleep(0.1)
        else:
            raise SystemExit("the server did not start")
        conn.execute(f"CREATE TABLE t (id int, a text, b float8, c int) "
                     f"USING {args.access_method}")
        start_rss = rss_bytes(server.pid)
        started = time.perf_counter()
        for i in range(args.rows):
            conn.execute("INSERT INTO t VALUES (%s, 'x', 1.5, 7)", (i,))
        insert_s = time.perf_counter() - started

        def report(when):
            size = conn.execute("SELECT pg_total_relation_size('t')").fetchone()[0]
            t0 = time.perf_counter()
            count, total = conn.execute("SELECT count(*), sum(c) FROM t").fetchone()
            scan_ms = (time.perf_counter() - t0) * 1000
            assert (count, total) == (args.rows, 7 * args.rows), (count, total)
            grown = (rss_bytes(server.pid) - start_rss) / args.rows
            print(f"{when}: relation {size / args.rows:.0f} bytes/row, resident memory growth "
                  f"{grown:.0f} bytes/row, count/sum scan {scan_ms:.1f} ms")

        print(f"{args.rows} single-row INSERTs into a {args.access_method} table: "
              f"{insert_s:.2f} s ({insert_s / args.rows * 1e6:.0f} us each)")
        report("after the inserts")
        conn.execute("VACUUM")
        report("after VACUUM")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
