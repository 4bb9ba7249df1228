#!/usr/bin/env python3
"""TPC-C (tpcc.py) against PostgreSQL 15 and Shoal, one server after the other on this machine,
both durable, median of several runs.

    python3 bench/oltp/tpcc/compare.py --shoal-binary target/release/shoal \
        [--warehouses 2] [--connections 8 32] [--duration-s 60] [--runs 3] [--procedures]

Each server gets a fresh data directory, the warehouses are loaded once, then each connection
count runs `--runs` times in a row (the orders the runs add stay, as in any TPC-C run), and the
consistency check runs at the end. The table shows the median tpmC, Shoal's ratio to
PostgreSQL and the check's result. Writes bench/oltp/tpcc/results-<W>w.md (or --report) and a
PNG next to it when matplotlib is installed.

With --procedures, the transactions run as PL/pgSQL functions (procedures.sql, created after
the load), one autocommit call each (`tpcc.py run --procedures`), and the report is
results-<W>w-procedures.md.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from sysbench import Postgres, Shoal  # noqa: E402

TPCC = os.path.join(HERE, "tpcc.py")


def tpcc(server, *args):
    dsn = f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres"
    cmd = [sys.executable, TPCC, *args, "--dsn", dsn]
    out = subprocess.run(cmd, capture_output=True, text=True)
    return out.returncode, out.stdout + out.stderr


def measure(server, args):
    server.start()
    try:
        w = str(args.warehouses)
        rc, out = tpcc(server, "load", "--warehouses", w, "--load-workers", "2")
        if rc != 0:
            raise RuntimeError(f"{server.name}: load failed\n{out[-3000:]}")
        run_flags = []
        if args.procedures:
            rc, out = tpcc(server, "procedures")
            if rc != 0:
                raise RuntimeError(f"{server.name}: creating the functions failed\n{out[-3000:]}")
            run_flags = ["--procedures"]
        results = {}
        for c in args.connections:
            runs = []
            for _ in range(args.runs):
                rc, out = tpcc(server, "run", "--warehouses", w, "--connections", str(c),
                               "--duration-s", str(args.duration_s), "--progress-s", "0",
                               *run_flags)
                m = re.search(r"^tpmC: (\d+)", out, re.M)
                failed = re.search(r"failed: (\d+);", out)
                if rc != 0 or not m:
                    raise RuntimeError(f"{server.name}: run failed\n{out[-3000:]}")
                runs.append((int(m.group(1)), int(failed.group(1)) if failed else -1))
            results[c] = (statistics.median(t for t, _ in runs), runs)
            print(f"{server.name} {c} connections: {results[c][0]:.0f} tpmC "
                  f"(runs, failed: {runs})", flush=True)
        rc, out = tpcc(server, "check", "--warehouses", w)
        return results, "passed" if rc == 0 else "FAILED"
    finally:
        server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shoal-binary", required=True)
    p.add_argument("--warehouses", type=int, default=2)
    p.add_argument("--connections", type=int, nargs="+", default=[8, 32])
    p.add_argument("--duration-s", type=int, default=60)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--procedures", action="store_true",
                   help="run the transactions as PL/pgSQL functions (tpcc.py run --procedures)")
    p.add_argument("--report")
    args = p.parse_args()
    suffix = "-procedures" if args.procedures else ""
    report = args.report or os.path.join(HERE, f"results-{args.warehouses}w{suffix}.md")
    mode = "stored procedures, " if args.procedures else ""
    max_connections = max(args.connections) + 20
    pg, pg_check = measure(Postgres(dir="/tmp/tpcc-pg", max_connections=max_connections), args)
    shoal, shoal_check = measure(Shoal(args.shoal_binary, dir="/tmp/tpcc-shoal"), args)
    lines = [
        f"TPC-C (`tpcc.py`), {mode}{args.warehouses} warehouses, {args.duration_s} s per run, "
        f"median of {args.runs} runs, {os.cpu_count()} cores shared by the server and the driver; "
        "both servers durable. Failed transactions are listed per run.",
        "",
        "| connections | PostgreSQL 15 tpmC | Shoal tpmC | Shoal / PostgreSQL | failed (PG; Shoal) |",
        "|---|---|---|---|---|",
    ]
    for c in args.connections:
        failed = (",".join(str(f) for _, f in pg[c][1]) + "; "
                  + ",".join(str(f) for _, f in shoal[c][1]))
        lines.append(f"| {c} | {pg[c][0]:.0f} | {shoal[c][0]:.0f} | "
                     f"{shoal[c][0] / pg[c][0]:.2f}x | {failed} |")
    lines += ["", f"Consistency check after the runs: PostgreSQL {pg_check}, Shoal {shoal_check}."]
    table = "\n".join(lines) + "\n"
    print(table)
    with open(report, "w") as f:
        f.write(table)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        xs = range(len(args.connections))
        ax.bar([x - 0.2 for x in xs], [pg[c][0] for c in args.connections], 0.4,
               label="PostgreSQL 15")
        ax.bar([x + 0.2 for x in xs], [shoal[c][0] for c in args.connections], 0.4,
               label="Shoal")
        ax.set_xticks(list(xs), [f"{c} connections" for c in args.connections])
        ax.set_ylabel("tpmC (median)")
        ax.set_title(f"TPC-C, {mode}{args.warehouses} warehouses")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.splitext(report)[0] + ".png")
    except ImportError:
        pass


if __name__ == "__main__":
    main()
