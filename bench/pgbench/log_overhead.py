#!/usr/bin/env python3
"""What Shoal's redo log costs: pgbench TPS with the log on (synchronous_commit on and off)
against Shoal with no log at all (`serve --redo-log off`), same binary, same machine.

Each configuration gets a fresh server loaded with `pgbench -i -s SCALE`; each point is the
median of several runs. Writes log_overhead.md next to this script and prints it.

Usage: python3 bench/pgbench/log_overhead.py [--scale 10] [--clients 8] [--duration 10]
           [--runs 3] [--modes prepared,simple] [--transport tcp|unix] [--binary PATH]
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from run import OUT_DIR, Shoal, build_production, pgbench, run_point

CONFIGS = [
    ("log on, synchronous_commit=on", "on", []),
    ("log on, synchronous_commit=off", "off", []),
    ("no log (--redo-log off)", "on", ["--redo-log", "off"]),
]
SCRIPTS = ["select-only", "tpcb-like"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--duration", type=int, default=10, help="seconds per run")
    ap.add_argument("--runs", type=int, default=3, help="runs per point; the median is reported")
    ap.add_argument("--modes", default="prepared,simple")
    ap.add_argument("--transport", choices=["tcp", "unix"], default="tcp",
                    help="how pgbench reaches the server (as in run.py)")
    ap.add_argument("--binary", help="the shoal binary to run (default: build the production "
                    "profile)")
    args = ap.parse_args()
    binary = Path(args.binary) if args.binary else build_production()
    modes = args.modes.split(",")

    tps = {}  # (config, script, mode) -> median TPS
    workdir = tempfile.mkdtemp(prefix="shoal-log-overhead-")
    try:
        for name, sync, extra in CONFIGS:
            server = Shoal(workdir, sync, args.transport, binary, extra)
            server.start()
            try:
                pgbench(server, ["-i", "-q", "-s", str(args.scale)])
                for script in SCRIPTS:
                    for mode in modes:
                        runs = [run_point(server, args.scale, script, mode, args.clients,
                                          args.duration)[0] for _ in range(args.runs)]
                        tps[(name, script, mode)] = statistics.median(runs)
                        print(f"{name:32} {script:12} {mode:8} tps={tps[(name, script, mode)]:.0f}",
                              flush=True)
            finally:
                server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    baseline = CONFIGS[-1][0]
    lines = [
        "# What the redo log costs",
        "",
        f"Machine: {os.cpu_count()} cores. Shoal only, scale {args.scale}, {args.clients} clients, "
        f"`-j 2`, over {'loopback TCP' if args.transport == 'tcp' else 'the Unix-domain socket'}; each point the median TPS of {args.runs} runs of {args.duration}s. Ratio: TPS "
        f"over the same workload without a log. Reproduce: `python3 bench/pgbench/log_overhead.py "
        f"--scale {args.scale} --clients {args.clients} --duration {args.duration} --runs {args.runs} "
        f"--transport {args.transport}`.",
        "",
        "| script | mode | " + " | ".join(name for name, _, _ in CONFIGS) + " |",
        "|---|---|" + "---:|" * len(CONFIGS),
    ]
    for script in SCRIPTS:
        for mode in modes:
            base = tps[(baseline, script, mode)]
            cells = [f"{tps[(name, script, mode)]:.0f} ({tps[(name, script, mode)] / base:.2f})"
                     for name, _, _ in CONFIGS]
            lines.append(f"| {script} | {mode} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    (OUT_DIR / "log_overhead.md").write_text(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
