#!/usr/bin/env python3
"""A short TPC-C run on a Shoal it starts itself, as CI runs it: load one warehouse, run the
standard mix for a few seconds with prepared statements (kept plans, the fast path) and again
with the simple protocol, then check the specification's consistency conditions; then create
the transactions as PL/pgSQL functions, run the mix as one function call per transaction and
check again. Fails when a transaction failed or a condition does not hold. This is a test,
not a benchmark: for throughput see bench/oltp/tpcc/README.md.

    python3 tests/oltp/tpcc_smoke.py --shoal-binary target/debug/shoal
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TPCC = os.path.join(HERE, "..", "..", "bench", "oltp", "tpcc", "tpcc.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, timeout_s=120):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit("shoal exited with status %s while starting" % proc.returncode)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("nothing listens on port %d after %d s" % (port, timeout_s))


def tpcc(*args):
    """Runs tpcc.py; returns its output, and fails the test if it fails."""
    cmd = [sys.executable, TPCC] + list(args)
    print("$ " + " ".join(cmd), flush=True)
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(done.stdout, flush=True)
    if done.returncode != 0:
        raise SystemExit("tpcc.py %s exited with status %d" % (args[0], done.returncode))
    return done.stdout


def run_mix(args, dsn, what, *flags):
    """Runs the mix; fails the test if no transaction completed or any failed."""
    out = tpcc("run", "--warehouses", "1", "--scale-items", "10000",
               "--connections", str(args.connections),
               "--duration-s", str(args.duration_s), "--progress-s", "0",
               "--seed", "7", "--dsn", dsn, *flags)
    m = re.search(r"all transactions: (\d+) in .*; failed: (\d+)", out)
    if not m:
        raise SystemExit("no summary line in the run's output")
    completed, failed = int(m.group(1)), int(m.group(2))
    if completed == 0 or failed != 0:
        raise SystemExit("%s: %d transactions completed, %d failed" % (what, completed, failed))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shoal-binary", required=True)
    p.add_argument("--duration-s", type=float, default=8)
    p.add_argument("--connections", type=int, default=4)
    args = p.parse_args()

    port = free_port()
    data_dir = tempfile.mkdtemp(prefix="shoal-tpcc-")
    log = open(os.path.join(data_dir, "server.log"), "a")
    proc = subprocess.Popen(
        [args.shoal_binary, "serve", "--listen", "127.0.0.1:%d" % port, "--data-dir",
         os.path.join(data_dir, "data"), "--unix-socket-dir", ""],
        stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    dsn = "host=127.0.0.1 port=%d user=postgres dbname=postgres" % port
    try:
        wait_for_port(port, proc)
        tpcc("load", "--warehouses", "1", "--scale-items", "10000", "--seed", "7", "--dsn", dsn)
        for prepare in ("always", "never"):
            run_mix(args, dsn, "prepare=" + prepare, "--prepare", prepare)
        tpcc("check", "--warehouses", "1", "--scale-items", "10000", "--dsn", dsn)
        tpcc("procedures", "--dsn", dsn)
        run_mix(args, dsn, "procedures", "--procedures")
        tpcc("check", "--warehouses", "1", "--scale-items", "10000", "--dsn", dsn)
        if proc.poll() is not None:
            raise SystemExit("shoal exited during the run")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    print("TPC-C smoke run passed")


if __name__ == "__main__":
    main()
