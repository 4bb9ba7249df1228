#!/usr/bin/env python3
"""Runs the Redis client-library suites, unmodified libraries over the wire, against a real
Redis 7 first (which shows the suite's expectations are right) and then against Shoal's Redis
protocol.

    python3 tests/redis/clients/run.py --shoal-binary target/debug/shoal [--suite node ...]

| suite | folder | libraries |
|---|---|---|
| node | `node/` | node-redis and ioredis (`npm ci`) |
| go | `go/` | go-redis v9, over RESP3 and RESP2 (`go run .`) |
| java | `java/` | Jedis (`fetch.sh` puts the pinned jars in `lib/`, `run.sh` compiles and runs) |

(redis-py has its own runner, `tests/redis/clients.py`.) A suite reads REDIS_HOST and
REDIS_PORT, prints `ok <case>` or `not ok <case>: ...` per case and exits 1 when a case failed.
Each run gets fresh servers on free loopback ports. The run fails when a suite fails on
either server.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import differential  # noqa: E402  (free_port, Conn)

SUITES = {
    "node": {"install": ["npm", "ci", "--no-audit", "--no-fund"], "run": ["node", "suite.js"]},
    "go": {"install": None, "run": ["go", "run", "."]},
    "java": {"install": ["bash", "fetch.sh"], "run": ["bash", "run.sh"]},
}
# A suite that has not answered by then is stuck: it fails.
SUITE_TIMEOUT_S = 600


def start_redis(redis_server):
    port = differential.free_port()
    proc = subprocess.Popen(
        [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, port, None


def start_shoal(binary):
    port = differential.free_port()
    data_dir = tempfile.mkdtemp(prefix="shoal-redis-clients-")
    proc = subprocess.Popen(
        [binary, "serve", "--data-dir", data_dir,
         "--listen", "127.0.0.1:%d" % differential.free_port(), "--unix-socket-dir", "",
         "--redis-listen", "127.0.0.1:%d" % port],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(data_dir, "stderr.log"), "w"))
    return proc, port, data_dir


def stop(proc, data_dir):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    if data_dir:
        shutil.rmtree(data_dir, ignore_errors=True)


def run_suite(name, server_name, start):
    proc, port, data_dir = start()
    try:
        differential.Conn(port).call(["PING"])  # waits until the server listens
        env = dict(os.environ, REDIS_HOST="127.0.0.1", REDIS_PORT=str(port))
        try:
            run = subprocess.run(SUITES[name]["run"], cwd=os.path.join(HERE, name), env=env,
                                 capture_output=True, text=True, timeout=SUITE_TIMEOUT_S)
            output, code = run.stdout + run.stderr, run.returncode
        except subprocess.TimeoutExpired as e:
            output, code = (e.stdout or b"").decode() + "\n(timed out)", 1
        lines = output.splitlines()
        passed = sum(1 for line in lines if line.startswith("ok "))
        failed = [line for line in lines if line.startswith("not ok ")]
        print("%s on %s: %d cases passed, %d failed" % (name, server_name, passed, len(failed)))
        for line in failed:
            print("  " + line)
        if code != 0 and not failed:
            print("  exit %d:\n%s" % (code, "\n".join("    " + l for l in lines[-30:])))
        return code == 0 and passed > 0
    finally:
        stop(proc, data_dir)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shoal-binary", required=True)
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--suite", nargs="+", choices=sorted(SUITES), default=sorted(SUITES))
    args = parser.parse_args()
    binary = os.path.abspath(args.shoal_binary)
    ok = True
    for name in args.suite:
        install = SUITES[name]["install"]
        if install:
            subprocess.run(install, cwd=os.path.join(HERE, name), check=True,
                           stdout=subprocess.DEVNULL)
        ok &= run_suite(name, "redis 7", lambda: start_redis(args.redis_server))
        ok &= run_suite(name, "shoal", lambda: start_shoal(binary))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
