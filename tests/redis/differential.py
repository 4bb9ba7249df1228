#!/usr/bin/env python3
"""Runs the same Redis commands against a real Redis and against Shoal's Redis protocol, and
compares every reply, byte for byte once parsed (type, value, error text).

    python3 tests/redis/differential.py --shoal-binary target/debug/shoal [--redis-server PATH]
        [--commands FILE ...]

The commands are in the .txt files next to this file (commands.txt: connection, keys and
strings; collections.txt: hashes, lists, sets and sorted sets), one per line, split as a shell
splits words. Each file starts on new connections to servers just flushed. A line may start with a marker:
    ~   the reply is an array, set or map whose order is unspecified (KEYS, SMEMBERS,
        HGETALL): compared sorted
    ?   the reply varies (TIME, RANDOMKEY): only its type is compared
    !sleep SECONDS   waits (for expiry)
Lines starting with # are comments. Each file runs twice: once a command at a time, waiting for
each reply, and once pipelined, every command between two `!sleep` lines sent in one write
before any reply is read (Shoal then runs them in shared transactions, which must not change a
reply). Both servers start empty, on free loopback ports, and
are stopped at the end. Each line runs in RESP2; after a `HELLO 3` line, in RESP3.
"""

import argparse
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        deadline = time.time() + 30
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return ("simple", rest.decode())
        if kind == b"-":
            return ("error", rest.decode())
        if kind == b":":
            return ("int", int(rest))
        if kind == b"$":
            n = int(rest)
            return ("null",) if n < 0 else ("bulk", self._exact(n))
        if kind == b"*":
            n = int(rest)
            return ("null",) if n < 0 else ("array", [self.reply() for _ in range(n)])
        if kind == b"_":
            return ("null",)
        if kind == b",":
            return ("double", rest.decode())
        if kind == b"#":
            return ("bool", rest == b"t")
        if kind == b"%":
            return ("map", [(self.reply(), self.reply()) for _ in range(int(rest))])
        if kind == b"~":
            return ("set", [self.reply() for _ in range(int(rest))])
        if kind == b"=":
            return ("verbatim", self._exact(int(rest)))
        raise ValueError("unknown reply type %r" % line)

    def call(self, args):
        self.sock.sendall(encode(args))
        return self.reply()

    def pipeline(self, commands):
        self.sock.sendall(b"".join(encode(args) for args in commands))
        return [self.reply() for _ in commands]


def segments(path):
    """The file's commands, as (line number, marker, words), in runs between `!sleep` lines;
    yields each run and then the seconds to sleep after it."""
    run = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("!sleep"):
                yield run, float(line.split()[1])
                run = []
                continue
            marker = line[0] if line[0] in "~?" else ""
            run.append((number, line, marker, shlex.split(line[len(marker):])))
    yield run, 0


def normalise(reply, marker):
    if marker == "?":
        return reply[0]
    if marker == "~" and reply[0] in ("array", "set"):
        return (reply[0], sorted(reply[1], key=repr))
    if marker == "~" and reply[0] == "map":
        return (reply[0], sorted(reply[1], key=repr))
    return reply


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shoal-binary", required=True)
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--commands", nargs="+",
                        default=sorted(os.path.join(HERE, f) for f in os.listdir(HERE)
                                       if f.endswith(".txt")))
    args = parser.parse_args()

    redis_port, shoal_port, shoal_redis_port = free_port(), free_port(), free_port()
    data_dir = tempfile.mkdtemp(prefix="shoal-redis-diff-")
    procs = []
    try:
        procs.append(subprocess.Popen(
            [args.redis_server, "--port", str(redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            [args.shoal_binary, "serve", "--data-dir", data_dir,
             "--listen", "127.0.0.1:%d" % shoal_port, "--unix-socket-dir", "",
             "--redis-listen", "127.0.0.1:%d" % shoal_redis_port],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(data_dir, "stderr.log"), "w")))
        failures, count = 0, 0
        for pipelined in (False, True):
            for path in args.commands:
                redis, shoal = Conn(redis_port), Conn(shoal_redis_port)
                for c in (redis, shoal):
                    c.call(["FLUSHALL"])
                for run, sleep_s in segments(path):
                    commands = [words for _, _, _, words in run]
                    if pipelined:
                        expected, actual = redis.pipeline(commands), shoal.pipeline(commands)
                    else:
                        expected = [redis.call(words) for words in commands]
                        actual = [shoal.call(words) for words in commands]
                    for (number, line, marker, _), e, a in zip(run, expected, actual):
                        count += 1
                        if normalise(e, marker) != normalise(a, marker):
                            failures += 1
                            print("%s:%d%s: %s\n  redis: %r\n  shoal: %r"
                                  % (os.path.basename(path), number,
                                     " (pipelined)" if pipelined else "", line,
                                     normalise(e, marker), normalise(a, marker)))
                    time.sleep(sleep_s)
        print("%d commands, %d replies differ from Redis's" % (count, failures))
        return 1 if failures else 0
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
