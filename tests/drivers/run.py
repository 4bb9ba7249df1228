#!/usr/bin/env python3
"""The driver suite: programs written against the PostgreSQL drivers and ORMs applications use,
each run unmodified against a server this script starts (Shoal, or PostgreSQL 15 with
--postgres) on a free loopback port.

    python3 tests/drivers/run.py --shoal-binary target/debug/shoal [--suite NAME ...]
    python3 tests/drivers/run.py --postgres                # every case must pass here first

A suite is a program in its own folder (see SUITES) that reads the usual libpq variables
(PGHOST, PGPORT, PGUSER, PGDATABASE; PGSSLMODE is disable, so a case asks for TLS itself) and
prints one line per case:

    ok <case>
    not ok <case>: <what went wrong>

Each suite gets a fresh server. On PostgreSQL every case must pass. On Shoal, the cases listed
in tests/drivers/known_gaps/<suite>.txt (one case name per line, `#` comments saying why) are
expected to fail; any other failure fails the run, and so does a listed case that passes, so
the list only shrinks. A suite with an unexpected result runs once more; a case that then gives
the expected result is printed as FLAKY and does not fail the run. The pass counts per suite are
printed at the end as a markdown table.

Both servers run with TLS on, with certificates of a certificate authority made for the run (see
TestPki), and the same pg_hba.conf (HBA): TCP clients without TLS are trusted as before, and the
roles tls_scram and tls_cert, which a suite's TLS cases create, log in only over TLS, by
SCRAM-SHA-256 and by a client certificate. The suites find the files through the environment
variables in TestPki.env().
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
# Days the run's certificates are valid: a run takes hours at most.
CERT_VALIDITY_DAYS = 2

# The rules both servers authenticate by. Without TLS, every TCP client is trusted, as the
# servers' defaults do (Shoal's pg_hba.conf written on first start, initdb -A trust); the roles
# the TLS cases create are only let in over TLS, so a case that logs in as one of them knows the
# server, not only the driver, took the connection as TLS.
HBA = """\
# TYPE    DATABASE USER      ADDRESS       METHOD
local     all      all                     trust
hostssl   all      tls_scram 127.0.0.1/32  scram-sha-256
hostssl   all      tls_cert  127.0.0.1/32  cert
hostnossl all      tls_scram 127.0.0.1/32  reject
hostnossl all      tls_cert  127.0.0.1/32  reject
host      all      all       127.0.0.1/32  trust
host      all      all       ::1/128       trust
"""


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
    "monitoring": ("monitoring",
                   ["go", "build", "-o", ".bin/postgres_exporter",
                    "github.com/prometheus-community/postgres_exporter/cmd/postgres_exporter"],
                   python("monitoring_suite.py")),
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


class TestPki:
    """A certificate authority made for one run with openssl's command line (EC P-256 keys),
    and what it signed: the servers' certificate (localhost and 127.0.0.1) and a client
    certificate for the role tls_cert. A second CA, which signed nothing the servers use, lets
    a case check that a driver refuses a server it cannot verify."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="shoal-drivers-pki-")
        self.ca = self._authority("ca", "Shoal driver suite CA")
        self.wrong_ca = self._authority("wrong-ca", "Shoal driver suite wrong CA")
        self.server_cert, self.server_key = self._signed(
            "server", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                   "extendedKeyUsage=serverAuth\n")
        self.client_cert, self.client_key = self._signed(
            "client", "tls_cert", "extendedKeyUsage=clientAuth\n")
        # pgJDBC reads a client key as unencrypted PKCS#8 DER.
        self.client_key_pk8 = self._path("client.pk8")
        self._openssl("pkcs8", "-topk8", "-nocrypt", "-in", self.client_key, "-outform", "DER",
                      "-out", self.client_key_pk8)
        self.hba = self._path("pg_hba.conf")
        with open(self.hba, "w") as f:
            f.write(HBA)
        for name in os.listdir(self.dir):
            # libpq refuses a client key that others may read.
            os.chmod(self._path(name), 0o600 if name.endswith((".key", ".pk8")) else 0o644)

    def env(self):
        """What the suites' TLS cases read: the CA to verify the server by, the other CA, and
        the client certificate with its key (PEM, and PKCS#8 DER for pgJDBC)."""
        return {"SHOAL_TEST_SSLROOTCERT": self.ca,
                "SHOAL_TEST_WRONG_SSLROOTCERT": self.wrong_ca,
                "SHOAL_TEST_SSLCERT": self.client_cert,
                "SHOAL_TEST_SSLKEY": self.client_key,
                "SHOAL_TEST_SSLKEY_PK8": self.client_key_pk8}

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def _authority(self, name, common_name):
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                      "-nodes", "-keyout", self._path(f"{name}.key"), "-out",
                      self._path(f"{name}.crt"), "-days", str(CERT_VALIDITY_DAYS),
                      "-subj", f"/CN={common_name}",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        return self._path(f"{name}.crt")

    def _signed(self, name, common_name, extensions):
        key, csr, crt = (self._path(f"{name}.{ext}") for ext in ("key", "csr", "crt"))
        ext_file = self._path(f"{name}.ext")
        with open(ext_file, "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature\n" + extensions)
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-keyout", key, "-out", csr, "-subj", f"/CN={common_name}")
        self._openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self._path("ca.key"),
                      "-CAcreateserial", "-out", crt, "-days", str(CERT_VALIDITY_DAYS),
                      "-extfile", ext_file)
        return crt, key

    def _path(self, name):
        return os.path.join(self.dir, name)

    def _openssl(self, *args):
        done = subprocess.run(["openssl", *args], cwd=self.dir, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"openssl {' '.join(args)}: {done.stderr.strip()}")


class Server:
    """A throwaway server on a free loopback port, in a temporary data directory, with TLS on
    (the certificates of pki) and pki's pg_hba.conf."""

    def __init__(self, pki, shoal_binary=None):
        self.pki = pki
        self.shoal_binary = shoal_binary
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="shoal-drivers-")
        self.proc = None

    def __enter__(self):
        if self.shoal_binary:
            self.proc = subprocess.Popen(
                [self.shoal_binary, "serve", "--listen", f"127.0.0.1:{self.port}",
                 "--data-dir", self.dir, "--unix-socket-dir", "",
                 "--tls-cert", self.pki.server_cert, "--tls-key", self.pki.server_key,
                 "--tls-ca", self.pki.ca, "--hba-file", self.pki.hba],
                stdout=subprocess.DEVNULL, stderr=open(self.dir + ".log", "w"))
        else:
            self._start_postgres()
        wait_for_port(self.port, self.proc)
        return self

    def _start_postgres(self):
        as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if as_postgres:
            shutil.chown(self.dir, "postgres")
        subprocess.run(as_postgres + [f"{PG_BIN}/initdb", "-D", self.dir, "-U", "postgres",
                                      "-A", "trust", "--locale=C.UTF-8"],
                       check=True, capture_output=True)
        # PostgreSQL reads its key only when the server's user owns it and no one else may
        # read it, so the server gets its own copies of the files, in its data directory.
        tls = {}
        for setting, source in [("ssl_cert_file", self.pki.server_cert),
                                ("ssl_key_file", self.pki.server_key),
                                ("ssl_ca_file", self.pki.ca), ("hba_file", self.pki.hba)]:
            tls[setting] = shutil.copy(source, os.path.join(self.dir, os.path.basename(source)))
            if as_postgres:
                shutil.chown(tls[setting], "postgres")
        os.chmod(tls["ssl_key_file"], 0o600)
        options = " ".join(f"-c {setting}={path}" for setting, path in tls.items())
        subprocess.run(as_postgres + [f"{PG_BIN}/pg_ctl", "-D", self.dir, "-l",
                                      f"{self.dir}/log", "-w", "-o",
                                      f"-p {self.port} -c listen_addresses=127.0.0.1 "
                                      f"-k {self.dir} -c ssl=on {options}", "start"],
                       check=True, capture_output=True)

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


def run_suite(name, shoal_binary, pki):
    folder, install, command = SUITES[name]
    cwd = os.path.join(HERE, folder)
    if install:
        subprocess.run(install, cwd=cwd, check=True)
    with Server(pki, shoal_binary) as server:
        env = dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(server.port), PGUSER="postgres",
                   PGDATABASE="postgres", PGSSLMODE="disable", **pki.env())
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


def judge_suite(name, shoal_binary, pki, gaps, target):
    """Runs one suite (twice when a result surprises), prints a line per case and returns the
    suite's row of the summary table and its unexpected results."""
    results = run_suite(name, shoal_binary, pki)
    surprises = [c for c, m in results.items() if (m is None) == ((name, c) in gaps)]
    if surprises:
        # Once more on a fresh server: a case that only fails under load (a timing race in
        # a driver or in Shoal) is reported as flaky rather than failing the run.
        again = run_suite(name, shoal_binary, pki)
        steady = [c for c in surprises if (again.get(c) is None) == (results[c] is None)]
        for case in surprises:
            if case not in steady:
                print(f"FLAKY {target} {name} {case}: {results[case] or 'passed'}, then "
                      f"{again.get(case) or 'passed'}", flush=True)
        results = {c: (again.get(c, m) if c in surprises and c not in steady else m)
                   for c, m in results.items()}
    problems = []
    passed = sum(1 for m in results.values() if m is None)
    for case, message in results.items():
        expected_gap = (name, case) in gaps
        if message is not None and not expected_gap:
            problems.append(f"{name} {case}: {message}")
        elif message is None and expected_gap:
            problems.append(f"{name} {case}: passes now; remove it from known_gaps/{name}.txt")
        status = "ok" if message is None else ("known gap" if expected_gap else "FAILED")
        print(f"{target} {name} {case}: {status}" + (f" ({message})" if message else ""),
              flush=True)
    return f"| {name} | {passed} / {len(results)} |", problems


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
    pki = TestPki()
    try:
        for name in args.suite or sorted(SUITES):
            row, suite_problems = judge_suite(name, args.shoal_binary, pki, gaps, target)
            rows.append(row)
            problems += suite_problems
    finally:
        pki.remove()
    print(f"\n| suite | cases passed on {target} |\n|---|---|")
    print("\n".join(rows))
    if problems:
        print("\nUnexpected results:\n" + "\n".join(problems))
        sys.exit(1)


if __name__ == "__main__":
    main()
