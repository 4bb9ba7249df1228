#!/usr/bin/env python3
"""Memory per key: the same small string keys loaded into Redis 7 and into Shoal.

    python3 bench/redis/memory.py --shoal-binary target/release/shoal [--keys 1000000]

Loads N keys of 16 bytes (`key:` and 12 digits) with 10-byte values through `redis-cli
--pipe`, then reports per key:
- Redis: the growth of `used_memory` (INFO memory);
- Shoal: the bytes `shoal_memory` counts for `redis.keys` (rows, versions, index entries);
- both: the growth of the server's resident memory (VmRSS).

Writes bench/redis/memory.md.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def wait_ping(port):
    for _ in range(300):
        try:
            out = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                                 text=True, timeout=5).stdout
            if "PONG" in out:
                return
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.2)
    raise RuntimeError("no PONG on %d" % port)


def load(port, path):
    with open(path, "rb") as f:
        out = subprocess.run(["redis-cli", "-p", str(port), "--pipe"], stdin=f,
                             capture_output=True, text=True, check=True).stdout
    if "errors: 0" not in out:
        raise RuntimeError(out)


def info_field(port, name):
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "memory"], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith(name + ":"):
            return int(line.split(":")[1])
    raise RuntimeError("no %s in INFO" % name)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shoal-binary", required=True)
    p.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    p.add_argument("--keys", type=int, default=1000000)
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "memory.md"))
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="shoal-redis-memory-")
    commands = os.path.join(work, "set.resp")
    with open(commands, "wb") as f:
        for i in range(args.keys):
            k, v = b"key:%012d" % i, b"v%09d" % i
            f.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
    def measure(name, argv_of):
        """Starts a server (argv_of(port) runs it), loads the keys, returns its row."""
        port = free_port()
        proc = subprocess.Popen(argv_of(port), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            wait_ping(port)
            used, rss = info_field(port, "used_memory"), rss_bytes(proc.pid)
            load(port, commands)
            return (name, (info_field(port, "used_memory") - used) / args.keys,
                    (rss_bytes(proc.pid) - rss) / args.keys)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)

    try:
        rows = [
            measure("Redis 7", lambda port: [
                args.redis_server, "--port", str(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no"]),
            measure("Shoal", lambda port: [
                args.shoal_binary, "serve", "--data-dir", os.path.join(work, "data"),
                "--listen", "127.0.0.1:%d" % free_port(), "--unix-socket-dir", "",
                "--redis-listen", "127.0.0.1:%d" % port, "--redis-appendfsync", "no"]),
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "# Memory per key: %d string keys (16-byte keys, 10-byte values)" % args.keys,
        "",
        "`python3 bench/redis/memory.py --keys %d`. Redis: growth of `used_memory`; Shoal: the"
        " bytes `shoal_memory` counts for `redis.keys` (INFO's `used_memory`); both: growth of"
        " the process's resident memory." % args.keys,
        "",
        "| server | bytes per key (own count) | bytes per key (resident memory) |",
        "|---|---:|---:|",
    ]
    lines += ["| %s | %.0f | %.0f |" % row for row in rows]
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
