#!/usr/bin/env python3
"""pgbench against Shoal and PostgreSQL 15 on the same machine.

Builds Shoal with the `production` profile (release with whole-program LTO; or takes
`--binary`), starts it and a throw-away PostgreSQL 15 (Debian's package, in a temporary data
directory, shared_buffers large enough for the data), loads both with
`pgbench -i -s SCALE`, and runs the same pgbench workloads against each: every combination of
scale, script (select-only, tpcb-like), query mode (prepared, simple) and client count, each point
several times, reporting the median. Writes results.md (a markdown table) and tps.png (TPS against
clients) next to this script, and prints the table.

Both servers run with the same durability: `--synchronous-commit on` (the default: every commit
flushed to the redo log / WAL before it is acknowledged) or `off` on both (the output says which).
pgbench reaches both the same way: over loopback TCP (`--transport tcp`, the default) or over
each server's Unix-domain socket (`--transport unix`, what pgbench uses when given no host).

Usage: python3 bench/pgbench/run.py [--scales 10,100] [--clients 1,2,4,8,16,32,64]
           [--duration 10] [--runs 3] [--modes prepared,simple] [--scripts select-only,tpcb-like]
           [--synchronous-commit on|off] [--transport tcp|unix] [--binary PATH]
Needs: pgbench and PostgreSQL 15 server binaries (apt-get install postgresql-15), matplotlib.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT_DIR = Path(__file__).resolve().parent
PG_BIN = Path("/usr/lib/postgresql/15/bin")
SCRIPT_FLAGS = {"select-only": ["-S"], "tpcb-like": [], "simple-update": ["-N"]}
ARG_DEFAULTS = {"scales": "10,100", "clients": "1,2,4,8,16,32,64",
                "scripts": "select-only,tpcb-like", "modes": "prepared,simple"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout_s=60):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"server on port {port} did not start within {timeout_s}s")


def as_postgres_user(cmd):
    """initdb and postgres refuse to run as root; run them as the postgres user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--"] + cmd
    return cmd


class Shoal:
    name = "Shoal"

    def __init__(self, workdir, synchronous_commit, transport, binary, extra_args=()):
        self.synchronous_commit = synchronous_commit
        self.host = "127.0.0.1" if transport == "tcp" else str(workdir)
        self.workdir = workdir
        self.extra_args = list(extra_args)
        self.binary = binary
        self.port = free_port()
        self.data_dir = Path(workdir) / "shoal-data"
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [str(self.binary), "serve", "--listen", f"127.0.0.1:{self.port}",
             "--data-dir", str(self.data_dir), "--unix-socket-dir", str(self.workdir),
             "--synchronous-commit", self.synchronous_commit] + self.extra_args,
            stdout=subprocess.DEVNULL, stderr=open(self.data_dir.parent / "shoal.log", "w"))
        wait_for_port(self.port)

    def rss_bytes(self):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self):
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # The next scale starts from an empty data directory, not by recovering this one.
        shutil.rmtree(self.data_dir, ignore_errors=True)


class Postgres:
    name = "PostgreSQL"

    def __init__(self, workdir, shared_buffers, synchronous_commit, transport):
        self.port = free_port()
        self.host = "127.0.0.1" if transport == "tcp" else str(workdir)
        self.data_dir = Path(workdir) / "pg-data"
        self.data_dir.mkdir()
        if os.geteuid() == 0:
            shutil.chown(workdir, "postgres")
            shutil.chown(self.data_dir, "postgres")
        subprocess.run(as_postgres_user([str(PG_BIN / "initdb"), "-D", str(self.data_dir),
                                         "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
                       check=True, stdout=subprocess.DEVNULL)
        with open(self.data_dir / "postgresql.conf", "a") as f:
            f.write(f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{workdir}'\n"
                    f"shared_buffers = '{shared_buffers}'\nmax_connections = 200\n"
                    f"synchronous_commit = {synchronous_commit}\n")

    def start(self):
        subprocess.run(as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir), "-w",
                                         "-l", str(self.data_dir / "log"), "start"]),
                       check=True, stdout=subprocess.DEVNULL)
        wait_for_port(self.port)

    def stop(self):
        subprocess.run(as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir), "-m",
                                         "fast", "stop"]), stdout=subprocess.DEVNULL)
        # The next scale makes a new cluster in the same place.
        shutil.rmtree(self.data_dir, ignore_errors=True)


def build_production():
    """Builds shoal with the profile a deployment runs (Cargo.toml: `production`)."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    subprocess.run(["cargo", "build", "--profile", "production", "-q", "-p", "shoal"], cwd=REPO,
                   check=True)
    return target / "production" / "shoal"


def psql(server, sql):
    out = subprocess.run(["psql", "-h", server.host, "-p", str(server.port), "-U", "postgres",
                          "-d", "postgres", "-Atc", sql], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def pgbench(server, args, log_dir=None):
    cmd = ["pgbench", "-h", server.host, "-p", str(server.port), "-U", "postgres"] + args
    if log_dir:
        cmd += ["--log", f"--log-prefix={log_dir}/tx"]
    # pgbench's -d means --debug; the database comes from PGDATABASE instead.
    env = dict(os.environ, PGDATABASE="postgres")
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=log_dir, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def p99_latency_ms(log_dir):
    """The 99th percentile of per-transaction latencies from pgbench --log files."""
    latencies_us = []
    for f in Path(log_dir).glob("tx*"):
        for line in open(f):
            fields = line.split()
            if len(fields) >= 3 and fields[2].isdigit():
                latencies_us.append(int(fields[2]))
    if not latencies_us:
        return float("nan")
    latencies_us.sort()
    return latencies_us[int(len(latencies_us) * 0.99) - 1 if len(latencies_us) > 1 else 0] / 1000


def run_point(server, scale, script, mode, clients, duration_s):
    with tempfile.TemporaryDirectory() as log_dir:
        out = pgbench(server, SCRIPT_FLAGS[script] + ["-M", mode, "-c", str(clients),
                      "-j", str(min(2, clients)), "-T", str(duration_s)], log_dir)
        tps = float(re.search(r"tps = ([\d.]+)", out).group(1))
        lat = float(re.search(r"latency average = ([\d.]+) ms", out).group(1))
        failed = int(re.search(r"number of failed transactions: (\d+)", out).group(1))
        return tps, lat, p99_latency_ms(log_dir), failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scales", default=ARG_DEFAULTS["scales"])
    ap.add_argument("--clients", default=ARG_DEFAULTS["clients"])
    ap.add_argument("--scripts", default=ARG_DEFAULTS["scripts"])
    ap.add_argument("--modes", default=ARG_DEFAULTS["modes"])
    ap.add_argument("--duration", type=int, default=10, help="seconds per run")
    ap.add_argument("--runs", type=int, default=3, help="runs per point; the median is reported")
    ap.add_argument("--synchronous-commit", choices=["on", "off"], default="on",
                    help="durability of both servers")
    ap.add_argument("--transport", choices=["tcp", "unix"], default="tcp",
                    help="how pgbench connects to both servers: loopback TCP or Unix socket")
    ap.add_argument("--init-steps", metavar="STEPS",
                    help="pgbench -i's -I steps for both servers, e.g. dtGvpf (server-side "
                    "generation and foreign keys); the report then goes to results-STEPS.md "
                    "and tps-STEPS.png")
    ap.add_argument("--binary", help="the shoal binary to run (default: build the production "
                    "profile, ~25 minutes on 2 cores)")
    ap.add_argument("--from-log", nargs="+", metavar="LOG",
                    help="write the report from the output of earlier runs instead of running")
    args = ap.parse_args()
    scales = [int(s) for s in args.scales.split(",")]
    clients = [int(c) for c in args.clients.split(",")]
    scripts = args.scripts.split(",")
    modes = args.modes.split(",")

    results = {}  # (server, scale, script, mode, clients) -> (tps, lat, p99, failed)
    memory = {}   # (server, scale) -> bytes per pgbench_accounts row
    if args.from_log:
        # Render the report from the lines earlier runs printed (e.g. one run per scale).
        for log in args.from_log:
            parse_log(log, results, memory)
        write_report(results, memory, scales, scripts, modes, clients, args)
        return 0
    binary = Path(args.binary) if args.binary else build_production()
    print(f"Shoal binary: {binary}", flush=True)
    workdir = tempfile.mkdtemp(prefix="shoal-pgbench-")
    try:
        for scale in scales:
            shared_buffers = f"{max(256, scale * 24)}MB"
            sync = args.synchronous_commit
            for server in (Shoal(workdir, sync, args.transport, binary),
                           Postgres(workdir, shared_buffers, sync, args.transport)):
                server.start()
                try:
                    rss_before = server.rss_bytes() if isinstance(server, Shoal) else 0
                    steps = ["-I", args.init_steps] if args.init_steps else []
                    pgbench(server, ["-i", "-q", "-s", str(scale)] + steps)
                    rows = 100000 * scale
                    if isinstance(server, Shoal):
                        memory[(server.name, scale)] = (server.rss_bytes() - rss_before) / rows
                    else:
                        size = int(psql(server, "SELECT pg_total_relation_size('pgbench_accounts')"))
                        memory[(server.name, scale)] = size / rows
                    print(f"{server.name:10} s={scale:<4} memory bytes_per_row="
                          f"{memory[(server.name, scale)]:.0f}", flush=True)
                    for script in scripts:
                        for mode in modes:
                            for c in clients:
                                runs = [run_point(server, scale, script, mode, c, args.duration)
                                        for _ in range(args.runs)]
                                med = statistics.median(r[0] for r in runs)
                                pick = min(runs, key=lambda r: abs(r[0] - med))
                                results[(server.name, scale, script, mode, c)] = pick
                                print(f"{server.name:10} s={scale:<4} {script:12} {mode:8} c={c:<3}"
                                      f" tps={pick[0]:10.0f} lat={pick[1]:7.3f}ms"
                                      f" p99={pick[2]:7.3f}ms failed={pick[3]}", flush=True)
                finally:
                    server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    write_report(results, memory, scales, scripts, modes, clients, args)


RESULT_LINE = re.compile(r"^(Shoal|PostgreSQL)\s+s=(\d+)\s+(\S+)\s+(\S+)\s+c=(\d+)\s+"
                         r"tps=\s*([\d.]+)\s+lat=\s*([\d.]+)ms\s+p99=\s*([\d.na]+)ms\s+"
                         r"failed=(\d+)")
MEMORY_LINE = re.compile(r"^(Shoal|PostgreSQL)\s+s=(\d+)\s+memory bytes_per_row=([\d.]+)")


def parse_log(path, results, memory):
    for line in open(path):
        if m := RESULT_LINE.match(line):
            server, scale, script, mode, c = m[1], int(m[2]), m[3], m[4], int(m[5])
            results[(server, scale, script, mode, c)] = (
                float(m[6]), float(m[7]), float(m[8]), int(m[9]))
        elif m := MEMORY_LINE.match(line):
            memory[(m[1], int(m[2]))] = float(m[3])


def non_default_points(args):
    """The --scales, --clients, --scripts and --modes flags of a run that changed them."""
    flags = ""
    for flag in ("scales", "clients", "scripts", "modes"):
        value = getattr(args, flag)
        if value != ARG_DEFAULTS[flag]:
            flags += f" --{flag} {value}"
    if args.init_steps:
        flags += f" --init-steps {args.init_steps}"
    return flags


def report_suffix(args):
    """results.md and tps.png, or results-STEPS.md and tps-STEPS.png for --init-steps."""
    return f"-{args.init_steps}" if args.init_steps else ""


def write_report(results, memory, scales, scripts, modes, clients, args):
    lines = [
        "# pgbench: Shoal vs PostgreSQL 15",
        "",
        f"Machine: {os.cpu_count()} cores. Each point: median TPS of {args.runs} runs of "
        f"{args.duration}s, `-j 2`. Both servers run with synchronous_commit="
        f"{args.synchronous_commit}; pgbench connects to both over "
        f"{'loopback TCP' if args.transport == 'tcp' else 'their Unix-domain sockets'}. "
        f"Reproduce: `python3 bench/pgbench/run.py{non_default_points(args)} --duration "
        f"{args.duration} --runs {args.runs} --synchronous-commit {args.synchronous_commit} "
        f"--transport {args.transport}`.",
        "",
        "| scale | script | mode | clients | Shoal TPS | PG TPS | ratio | Shoal lat ms (p99) "
        "| PG lat ms (p99) |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for scale in scales:
        for script in scripts:
            for mode in modes:
                for c in clients:
                    s = results.get(("Shoal", scale, script, mode, c))
                    p = results.get(("PostgreSQL", scale, script, mode, c))
                    if not s or not p:
                        continue
                    lines.append(f"| {scale} | {script} | {mode} | {c} | {s[0]:.0f} | {p[0]:.0f} "
                                 f"| {s[0] / p[0]:.2f} | {s[1]:.3f} ({s[2]:.3f}) "
                                 f"| {p[1]:.3f} ({p[2]:.3f}) |")
    lines += ["", "| scale | Shoal bytes/row (RSS growth) | PG bytes/row (table + pkey) |",
              "|---:|---:|---:|"]
    def per_row(server, scale):
        v = memory.get((server, scale))
        return "n/a" if v is None else f"{v:.0f}"
    for scale in scales:
        lines.append(f"| {scale} | {per_row('Shoal', scale)} | {per_row('PostgreSQL', scale)} |")
    text = "\n".join(lines) + "\n"
    (OUT_DIR / f"results{report_suffix(args)}.md").write_text(text)
    print(text)
    plot(results, scales, scripts, modes, clients, args)


def plot(results, scales, scripts, modes, clients, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = [(s, sc, m) for s in scales for sc in scripts for m in modes]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 3.2 * len(panels)), squeeze=False)
    for ax, (scale, script, mode) in zip(axes[:, 0], panels):
        for server, style in (("Shoal", "o-"), ("PostgreSQL", "s--")):
            xs = [c for c in clients if (server, scale, script, mode, c) in results]
            ax.plot(xs, [results[(server, scale, script, mode, c)][0] for c in xs], style,
                    label=server)
        ax.set_xscale("log", base=2)
        ax.set_xticks(clients, [str(c) for c in clients])
        ax.set_title(f"scale {scale}, {script}, -M {mode}")
        ax.set_xlabel("clients")
        ax.set_ylabel("TPS")
        ax.legend()
    fig.tight_layout()
    fig.savefig(OUT_DIR / f"tps{report_suffix(args)}.png", dpi=100)


if __name__ == "__main__":
    sys.exit(main())
