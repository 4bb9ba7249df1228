#!/usr/bin/env python3
"""redis-benchmark against Redis 7 and against Shoal's Redis protocol, same machine, same run.

    python3 bench/redis/run.py --shoal-binary target/release/shoal [--requests 2000000]
        [--runs 3] [--pinned] [--out bench/redis/results]

Redis runs with `--save "" --appendonly no`, Shoal with `--redis-appendfsync no` (both
acknowledge writes without waiting for a disk). Each test is
`redis-benchmark -c 50 -n N -r 10000 -d 10 -t set,get -P P` for P = 1 and 100, run --runs times;
the median requests per second is reported. With --pinned the server runs on core 0 and
redis-benchmark on core 1 (per-core numbers); without, both float.

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


def benchmark(port, requests, pipeline, pinned):
    argv = ["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(requests),
            "-r", "10000", "-d", "10", "-t", "set,get", "-P", str(pipeline), "--csv", "-q"]
    out = subprocess.run(taskset(1, argv, pinned), check=True, capture_output=True,
                         text=True).stdout
    rps = {}
    for row in csv.reader(io.StringIO(out)):
        if len(row) >= 2 and row[0] in ("SET", "GET"):
            rps[row[0]] = float(row[1])
    return rps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shoal-binary", required=True)
    p.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    p.add_argument("--requests", type=int, default=2000000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--pinned", action="store_true")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "results"))
    args = p.parse_args()

    results = {}  # (system, pipeline, test) -> [rps]
    data_dir = tempfile.mkdtemp(prefix="shoal-redis-bench-")
    servers = {
        "Redis 7": lambda port: [args.redis_server, "--port", str(port), "--bind", "127.0.0.1",
                                 "--save", "", "--appendonly", "no"],
        "Shoal": lambda port: [args.shoal_binary, "serve", "--data-dir", data_dir,
                               "--listen", "127.0.0.1:%d" % free_port(),
                               "--unix-socket-dir", "", "--redis-listen",
                               "127.0.0.1:%d" % port, "--redis-appendfsync", "no"],
    }
    try:
        for system, argv_of in servers.items():
            port = free_port()
            proc = subprocess.Popen(taskset(0, argv_of(port), args.pinned),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_for_port(port)
                for pipeline in (1, 100):
                    for _ in range(args.runs):
                        for test, rps in benchmark(port, args.requests, pipeline,
                                                   args.pinned).items():
                            results.setdefault((system, pipeline, test), []).append(rps)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)

    median = {k: statistics.median(v) for k, v in results.items()}
    lines = [
        "# redis-benchmark: Redis 7 and Shoal, %s" % ("pinned (server on core 0, client on core 1)"
                                                        if args.pinned else "unpinned"),
        "",
        "`%s` (median of %d runs; `redis-benchmark -c 50 -n %d -r 10000 -d 10 -t set,get -P P`;"
        " Redis `--save \"\" --appendonly no`, Shoal `--redis-appendfsync no`)"
        % (" ".join(["python3 bench/redis/run.py", "--requests", str(args.requests), "--runs",
                     str(args.runs)] + (["--pinned"] if args.pinned else [])),
           args.runs, args.requests),
        "",
        "| test | pipeline | Redis 7 requests/s | Shoal requests/s | Shoal / Redis |",
        "|---|---:|---:|---:|---:|",
    ]
    for pipeline in (1, 100):
        for test in ("SET", "GET"):
            r, s = median.get(("Redis 7", pipeline, test)), median.get(("Shoal", pipeline, test))
            if r and s:
                lines.append("| %s | %d | %.0f | %.0f | %.2fx |" % (test, pipeline, r, s, s / r))
    text = "\n".join(lines) + "\n"
    with open(args.out + ".md", "w") as f:
        f.write(text)
    print(text)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        labels = ["%s P=%d" % (t, p) for p in (1, 100) for t in ("SET", "GET")]
        redis = [median.get(("Redis 7", p, t), 0) for p in (1, 100) for t in ("SET", "GET")]
        shoal = [median.get(("Shoal", p, t), 0) for p in (1, 100) for t in ("SET", "GET")]
        x = range(len(labels))
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.bar([i - 0.2 for i in x], redis, 0.4, label="Redis 7")
        ax.bar([i + 0.2 for i in x], shoal, 0.4, label="Shoal")
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels)
        ax.set_ylabel("requests per second")
        ax.set_title("redis-benchmark, 50 clients, 10-byte values")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.out + ".png")
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
