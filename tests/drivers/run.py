#!/usr/bin/env python3
"""The driver suite: programs written against the PostgreSQL drivers and ORMs applications use,
each run unmodified against a server this script starts (Shoal, or PostgreSQL 15 with
--postgres) on a free loopback port.

    python3 tests/drivers/run.py --shoal-binary target/debug/shoal [--suite NAME ...]
    python3 tests/drivers/run.py --postgres                # every case must pass here first

A suite is a program in its own folder (see SUITES) that reads the usual libpq variables
(PGHOST, PGPORT, PGUSER, PGDATABASE) and prints one line per case:

    ok <case>
    not ok <case>: <what went wrong>

Each suite gets a fresh server. On PostgreSQL every case must pass. On Shoal, the cases listed
in tests/drivers/known_gaps/<suite>.txt (one case name per line, `#` comments saying why) are
expected to fail; any other failure fails the run, and so does a listed case that passes, so
the list only shrinks. A suite with an unexpected result runs once more; a case that then gives
the expected result is printed as FLAKY and does not fail the run. The pass counts per suite are
printed at the end as a markdown table.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PG_BIN = "/usr/lib/postgresql/15/bin"
# Seconds a suite may run before it counts as hung.
SUITE_TIMEOUT_S = 600


def python(script):
    return [sys.executable, script]


# name -> (folder under tests/drivers, install command or None, run command), both run in the
# folder. Python packages come from python/requirements.txt (installed by .ci/run).
SUITES = {
    "psycopg": ("python", None, python("psycopg_suite.py")),
    "asyncpg": ("python", None, python("asyncpg_suite.py")),
    "sqlalchemy": ("python", None, python("sqlalchemy_suite.py")),
    "node-postgres": ("node", ["npm", "ci", "--silent", "--no-audit", "--no-fund"],
                      ["node", "pg_suite.js"]),
    "pgx": ("go", None, ["go", "run", "."]),
    "pgjdbc": ("java", ["bash", "fetch.sh"], ["bash", "run.sh"]),
    "django": ("python", None, python("django_suite.py")),
    "gorm": ("go-gorm", None, ["go", "run", "."]),
    "sequelize": ("node-orm", ["npm", "ci", "--silent", "--no-audit", "--no-fund"],
                  ["node", "sequelize_suite.js"]),
    "hibernate": ("java-hibernate", ["bash", "fetch.sh"], ["bash", "run.sh"]),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, timeout_s=60):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode} before accepting connections")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"nothing accepted connections on port {port} within {timeout_s} s")


class Server:
    """A throwaway server on a free loopback port, in a temporary data directory."""

    def __init__(self, shoal_binary=None):
        self.shoal_binary = shoal_binary
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="shoal-drivers-")
        self.proc = None

    def __enter__(self):
        if self.shoal_binary:
            self.proc = subprocess.Popen(
                [self.shoal_binary, "serve", "--listen", f"127.0.0.1:{self.port}",
                 "--data-dir", self.dir, "--unix-socket-dir", ""],
                stdout=subprocess.DEVNULL, stderr=open(self.dir + ".log", "w"))
        else:
            as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
            if as_postgres:
                shutil.chown(self.dir, "postgres")
            subprocess.run(as_postgres + [f"{PG_BIN}/initdb", "-D", self.dir, "-U", "postgres",
                                          "-A", "trust", "--locale=C.UTF-8"],
                           check=True, capture_output=True)
            subprocess.run(as_postgres + [f"{PG_BIN}/pg_ctl", "-D", self.dir, "-l",
                                          f"{self.dir}/log", "-w", "-o",
                                          f"-p {self.port} -c listen_addresses=127.0.0.1 "
                                          f"-k {self.dir}", "start"],
                           check=True, capture_output=True)
        wait_for_port(self.port, self.proc)
        return self

    def __exit__(self, *exc):
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        else:
            as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
            subprocess.run(as_postgres + [f"{PG_BIN}/pg_ctl", "-D", self.dir, "stop", "-m",
                                          "immediate"], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def parse_results(output):
    """{case: None when it passed, else the failure message}, in the order printed."""
    results = {}
    for line in output.splitlines():
        if line.startswith("ok "):
            results[line[3:].strip()] = None
        elif line.startswith("not ok "):
            case, _, message = line[7:].partition(":")
            results[case.strip()] = message.strip() or "failed"
    return results


def run_suite(name, shoal_binary):
    folder, install, command = SUITES[name]
    cwd = os.path.join(HERE, folder)
    if install:
        subprocess.run(install, cwd=cwd, check=True)
    with Server(shoal_binary) as server:
        env = dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(server.port), PGUSER="postgres",
                   PGDATABASE="postgres", PGSSLMODE="disable")
        try:
            done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=SUITE_TIMEOUT_S)
            output, errors, code = done.stdout, done.stderr, done.returncode
        except subprocess.TimeoutExpired as e:
            output = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            errors, code = f"timed out after {SUITE_TIMEOUT_S} s", -1
    results = parse_results(output)
    if code != 0 or not results:
        # A crash after some cases: the cases it printed count, and the crash is one more.
        results["(suite ran to the end)"] = f"exit {code}: {errors.strip()[-2000:]}"
    return results


def known_gaps():
    """{(suite, case)} expected to fail on Shoal."""
    gaps = set()
    for suite in SUITES:
        path = os.path.join(HERE, "known_gaps", f"{suite}.txt")
        if os.path.exists(path):
            for line in open(path):
                case = line.split("#", 1)[0].strip()
                if case:
                    gaps.add((suite, case))
    return gaps


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shoal-binary", help="the Shoal server to test")
    p.add_argument("--postgres", action="store_true", help="test PostgreSQL 15 instead")
    p.add_argument("--suite", action="append", choices=sorted(SUITES),
                   help="run only this suite (repeatable)")
    args = p.parse_args()
    if bool(args.shoal_binary) == args.postgres:
        p.error("give exactly one of --shoal-binary and --postgres")
    target = "PostgreSQL 15" if args.postgres else "Shoal"
    gaps = set() if args.postgres else known_gaps()
    problems, rows = [], []
    for name in args.suite or sorted(SUITES):
        results = run_suite(name, None if args.postgres else args.shoal_binary)
        surprises = [c for c, m in results.items() if (m is None) == ((name, c) in gaps)]
        if surprises:
            # Once more on a fresh server: a case that only fails under load (a timing race in
            # a driver or in Shoal) is reported as flaky rather than failing the run.
            again = run_suite(name, None if args.postgres else args.shoal_binary)
            steady = [c for c in surprises if (again.get(c) is None) == (results[c] is None)]
            for case in surprises:
                if case not in steady:
                    print(f"FLAKY {target} {name} {case}: {results[case] or 'passed'}, then "
                          f"{again.get(case) or 'passed'}", flush=True)
            results = {c: (again.get(c, m) if c in surprises and c not in steady else m)
                       for c, m in results.items()}
        passed = sum(1 for m in results.values() if m is None)
        rows.append(f"| {name} | {passed} / {len(results)} |")
        for case, message in results.items():
            expected_gap = (name, case) in gaps
            if message is not None and not expected_gap:
                problems.append(f"{name} {case}: {message}")
            elif message is None and expected_gap:
                problems.append(f"{name} {case}: passes now; remove it from known_gaps/{name}.txt")
            status = "ok" if message is None else ("known gap" if expected_gap else "FAILED")
            print(f"{target} {name} {case}: {status}" + (f" ({message})" if message else ""),
                  flush=True)
    print(f"\n| suite | cases passed on {target} |\n|---|---|")
    print("\n".join(rows))
    if problems:
        print("\nUnexpected results:\n" + "\n".join(problems))
        sys.exit(1)


if __name__ == "__main__":
    main()
