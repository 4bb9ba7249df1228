#!/usr/bin/env python3
"""redis-benchmark against Redis 7 and against Shoal's Redis protocol, same machine, same run.

    python3 bench/redis/run.py --shoal-binary target/release/shoal [--requests 2000000]
        [--runs 3] [--pinned] [--everysec] [--suite] [--out bench/redis/results]

Redis runs with `--save "" --appendonly no`, Shoal with `--redis-appendfsync no` (both
acknowledge writes without waiting for a disk); with --everysec, Redis runs with
`--appendonly yes --appendfsync everysec` and Shoal with `--redis-appendfsync everysec`. Each
test is `redis-benchmark -c 50 -n N -r 10000 -d 10 -t set,get -P P` for P = 1 and 100, run
--runs times; the median requests per second is reported. With --suite, the test is instead
redis-benchmark's whole default suite (`-c 50 -n N`, no -t), every test of it in the table. With
--pinned the server runs on core 0 and redis-benchmark on core 1 (per-core numbers); without,
both float.

Writes OUT.md (a table) and OUT.png (a bar chart).
"""

import argparse
import csv
import io
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout_s=60):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server on port %d did not answer PING" % port)


def taskset(core, argv, pinned):
    return (["taskset", "-c", str(core)] + argv) if pinned else argv


def benchmark(port, requests, pipeline, pinned, suite):
    """Requests per second of each test, in the order redis-benchmark ran them. redis-benchmark
    stops at the first error reply, so a test missing from the output is a failure."""
    argv = ["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(requests)]
    if not suite:
        argv += ["-r", "10000", "-d", "10", "-t", "set,get"]
    argv += ["-P", str(pipeline), "--csv", "-q"]
    run = subprocess.run(taskset(1, argv, pinned), capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError("redis-benchmark failed: %s" % run.stderr.strip())
    rps = {}
    for row in csv.reader(io.StringIO(run.stdout)):
        if len(row) >= 2 and row[0] != "test":
            rps[row[0]] = float(row[1])
    return rps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shoal-binary", required=True)
    p.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    p.add_argument("--requests", type=int, default=2000000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--pinned", action="store_true")
    p.add_argument("--everysec", action="store_true",
                   help="both servers log every write and flush it within a second")
    p.add_argument("--suite", action="store_true",
                   help="redis-benchmark's whole default suite, pipeline 1")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "results"))
    args = p.parse_args()

    results = {}  # (system, pipeline, test) -> [rps]
    data_dir = tempfile.mkdtemp(prefix="shoal-redis-bench-")
    redis_log = (["--appendonly", "yes", "--appendfsync", "everysec", "--dir", data_dir]
                 if args.everysec else ["--appendonly", "no"])
    shoal_fsync = "everysec" if args.everysec else "no"
    servers = {
        "Redis 7": lambda port: [args.redis_server, "--port", str(port), "--bind", "127.0.0.1",
                                 "--save", ""] + redis_log,
        "Shoal": lambda port: [args.shoal_binary, "serve", "--data-dir", data_dir,
                               "--listen", "127.0.0.1:%d" % free_port(),
                               "--unix-socket-dir", "", "--redis-listen",
                               "127.0.0.1:%d" % port, "--redis-appendfsync", shoal_fsync],
    }
    pipelines = (1,) if args.suite else (1, 100)
    tests = []  # in the order redis-benchmark ran them
    try:
        for system, argv_of in servers.items():
            port = free_port()
            proc = subprocess.Popen(taskset(0, argv_of(port), args.pinned),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_for_port(port)
                for pipeline in pipelines:
                    for _ in range(args.runs):
                        for test, rps in benchmark(port, args.requests, pipeline,
                                                   args.pinned, args.suite).items():
                            results.setdefault((system, pipeline, test), []).append(rps)
                            if test not in tests:
                                tests.append(test)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)

    median = {k: statistics.median(v) for k, v in results.items()}
    if args.suite:
        workload = "redis-benchmark -c 50 -n %d` (the default suite)" % args.requests
    else:
        workload = "redis-benchmark -c 50 -n %d -r 10000 -d 10 -t set,get -P P`" % args.requests
    durability = ("Redis `--appendonly yes --appendfsync everysec`, Shoal "
                  "`--redis-appendfsync everysec`" if args.everysec else
                  "Redis `--save \"\" --appendonly no`, Shoal `--redis-appendfsync no`")
    command = " ".join(["python3 bench/redis/run.py", "--requests", str(args.requests), "--runs",
                        str(args.runs)] + [f for f, on in (("--pinned", args.pinned),
                                                           ("--everysec", args.everysec),
                                                           ("--suite", args.suite)) if on])
    lines = [
        "# redis-benchmark: Redis 7 and Shoal, %s" % ("pinned (server on core 0, client on core 1)"
                                                        if args.pinned else "unpinned"),
        "",
        "`%s` (median of %d runs; `%s; %s)" % (command, args.runs, workload, durability),
        "",
        "| test | pipeline | Redis 7 requests/s | Shoal requests/s | Shoal / Redis |",
        "|---|---:|---:|---:|---:|",
    ]
    labels = []
    for pipeline in pipelines:
        for test in (tests if args.suite else ("SET", "GET")):
            r, s = median.get(("Redis 7", pipeline, test)), median.get(("Shoal", pipeline, test))
            if r and s:
                lines.append("| %s | %d | %.0f | %.0f | %.2fx |" % (test, pipeline, r, s, s / r))
                labels.append((test, pipeline))
    text = "\n".join(lines) + "\n"
    with open(args.out + ".md", "w") as f:
        f.write(text)
    print(text)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        redis = [median[("Redis 7", p, t)] for t, p in labels]
        shoal = [median[("Shoal", p, t)] for t, p in labels]
        labels = [t.split(" ")[0] if args.suite else "%s P=%d" % (t, p) for t, p in labels]
        x = range(len(labels))
        fig, ax = plt.subplots(figsize=(max(7, len(labels) * 0.6), 4))
        ax.bar([i - 0.2 for i in x], redis, 0.4, label="Redis 7")
        ax.bar([i + 0.2 for i in x], shoal, 0.4, label="Shoal")
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, rotation=45 if args.suite else 0, ha="right" if args.suite
                           else "center")
        ax.set_ylabel("requests per second")
        ax.set_title("redis-benchmark default suite, 50 clients" if args.suite
                     else "redis-benchmark, 50 clients, 10-byte values")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.out + ".png")
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
