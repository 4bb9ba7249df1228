#!/usr/bin/env python3
"""Where the two cores go during one pgbench workload: pgbench, the server, and idle time.

Starts Shoal (`--binary`, a release or production build) and a throw-away PostgreSQL 15 the way
`run.py` does (same settings, same transport), loads both with `pgbench -i -s SCALE`, then runs
the workload against each in turn, `--runs` rounds, and measures for every run:

- TPS;
- pgbench's own CPU per transaction (user + system, from the child's rusage);
- the server's CPU per transaction: the whole machine's busy time (/proc/stat) minus pgbench's,
  so it counts the kernel's work on the server's behalf wherever it runs (softirqs, the disk's
  interrupts) and every PostgreSQL backend;
- the idle and iowait time per transaction (both cores' worth).

On a machine where pgbench and the server share the cores, throughput is bounded by
`cores / (pgbench CPU + server CPU)` per transaction; the idle column says how far from that
bound each server ran. The medians of each server's runs are printed as a markdown table and
written to cpu_split.md next to this script.

Usage: python3 bench/pgbench/cpu_split.py --binary PATH [--scale 10] [--args "-M prepared -c 8 -j 2"]
           [--duration 10] [--runs 3] [--transport unix|tcp]
"""

import argparse
import os
import re
import resource
import statistics
import tempfile
from pathlib import Path

from run import Postgres, Shoal, pgbench, psql

OUT = Path(__file__).resolve().parent / "cpu_split.md"
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count()


def machine_ticks():
    """(busy, idle) clock ticks of all CPUs since boot; iowait counts as idle."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    return user + nice + system + irq + softirq + steal, idle + iowait


def child_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured_run(server, pgbench_args, duration_s):
    """One pgbench run: (TPS, pgbench µs/tx, server µs/tx, idle µs/tx)."""
    busy_before, idle_before = machine_ticks()
    child_before = child_cpu_s()
    out = pgbench(server, pgbench_args + ["-T", str(duration_s)])
    child_s = child_cpu_s() - child_before
    busy_after, idle_after = machine_ticks()
    transactions = int(re.search(r"processed: (\d+)", out).group(1))
    tps = float(re.search(r"tps = ([\d.]+)", out).group(1))
    busy_s = (busy_after - busy_before) / CLOCK_TICKS_PER_S
    idle_s = (idle_after - idle_before) / CLOCK_TICKS_PER_S
    per_tx_us = lambda s: s * 1e6 / transactions
    return tps, per_tx_us(child_s), per_tx_us(busy_s - child_s), per_tx_us(idle_s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", required=True, help="the Shoal binary to run")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--args", default="-M prepared -c 8 -j 2",
                    help="pgbench's workload arguments (default: tpcb-like, prepared, 8 clients)")
    ap.add_argument("--duration", type=int, default=10, help="seconds per run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--transport", choices=["tcp", "unix"], default="unix")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as workdir:
        os.chmod(workdir, 0o755)
        shoal_dir, pg_dir = Path(workdir) / "shoal", Path(workdir) / "pg"
        shoal_dir.mkdir()
        pg_dir.mkdir()
        shared_buffers = f"{max(256, args.scale * 24)}MB"
        servers = [Shoal(shoal_dir, "on", args.transport, args.binary),
                   Postgres(pg_dir, shared_buffers, "on", args.transport)]
        runs = {s.name: [] for s in servers}
        try:
            for server in servers:
                server.start()
                pgbench(server, ["-i", "-q", "-s", str(args.scale)])
                psql(server, "CHECKPOINT")
            for round_no in range(1, args.runs + 1):
                for server in servers:
                    tps, client_us, server_us, idle_us = measured_run(
                        server, args.args.split(), args.duration)
                    runs[server.name].append((tps, client_us, server_us, idle_us))
                    print(f"round {round_no} {server.name}: {tps:.0f} TPS, pgbench "
                          f"{client_us:.1f} µs/tx, server {server_us:.1f} µs/tx, "
                          f"idle {idle_us:.1f} µs/tx", flush=True)
        finally:
            for server in servers:
                server.stop()

    medians = {name: [statistics.median(r[i] for r in rows) for i in range(4)]
               for name, rows in runs.items()}
    lines = [
        f"pgbench `{args.args}`, scale {args.scale}, {args.transport} socket, both servers "
        f"durable (synchronous_commit on), {args.runs} runs of {args.duration} s each, medians; "
        f"{CORES} cores. CPU per transaction: pgbench's from its rusage, the server's is the "
        "machine's busy time minus pgbench's; idle includes iowait. Bound: the TPS if the "
        "cores were never idle, cores / (pgbench + server).",
        "",
        "| server | TPS | pgbench µs/tx | server µs/tx | idle µs/tx | bound TPS |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, (tps, client_us, server_us, idle_us) in medians.items():
        bound = CORES * 1e6 / (client_us + server_us)
        lines.append(f"| {name} | {tps:.0f} | {client_us:.1f} | {server_us:.1f} | "
                     f"{idle_us:.1f} | {bound:.0f} |")
    shoal_tps, pg_tps = medians["Shoal"][0], medians["PostgreSQL"][0]
    lines += ["", f"Shoal / PostgreSQL: {shoal_tps / pg_tps:.2f}x", ""]
    print("\n".join(lines))
    OUT.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
