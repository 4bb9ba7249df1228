#!/usr/bin/env python3
"""What authentication and TLS cost: Shoal against PostgreSQL 15, configured the same way.

Both servers get a password for `postgres` (SCRAM-SHA-256 verifiers), pg_hba.conf rules that
ask loopback TCP clients for it with scram-sha-256, and TLS with the same certificate (made
here with openssl, signed by a throw-away CA). pgbench (scale 1) then measures, on each server:

- `connect`: connection set-up with SCRAM, without TLS: `pgbench -C -S` (a new connection,
  startup and SCRAM exchange for every transaction);
- `connect-tls`: the same over TLS (the handshake, then SCRAM-SHA-256-PLUS);
- `select`: select-only throughput on established connections without TLS
  (`pgbench -S -M prepared`);
- `select-tls`: the same over TLS.

Each point runs several times, alternating servers; the median is reported. Writes results.md
(a markdown table with the Shoal/PostgreSQL ratios) and security.png next to this script.

Usage: python3 bench/security/run.py [--binary PATH] [--clients 8] [--duration 10] [--runs 3]
Without --binary it builds Shoal with `cargo build --release`.
Needs: pgbench, PostgreSQL 15 server binaries (apt-get install postgresql-15), openssl,
matplotlib.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT_DIR = Path(__file__).resolve().parent
PG_BIN = Path("/usr/lib/postgresql/15/bin")
PASSWORD = "bench secret"
HBA = (
    "local all all trust\n"
    "host  all all 127.0.0.1/32 scram-sha-256\n"
)
sys.path.insert(0, str(REPO / "bench" / "pgbench"))
from run import as_postgres_user, free_port, wait_for_port  # noqa: E402  (bench/pgbench/run.py)

WORKLOADS = {
    # name: (pgbench flags, sslmode)
    "connect": (["-C", "-S"], "disable"),
    "connect-tls": (["-C", "-S"], "require"),
    "select": (["-S", "-M", "prepared"], "disable"),
    "select-tls": (["-S", "-M", "prepared"], "require"),
}


def make_certificates(d):
    """A CA and a server certificate for localhost / 127.0.0.1 signed by it."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=bench CA")
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    Path(d, "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext")
    os.chmod(Path(d, "server.key"), 0o600)


class Shoal:
    name = "Shoal"

    def __init__(self, workdir, binary):
        self.port = free_port()
        data = Path(workdir, "shoal-data")
        data.mkdir()
        Path(workdir, "shoal-password").write_text(PASSWORD + "\n")
        Path(workdir, "shoal-hba.conf").write_text(HBA)
        self.log = open(Path(workdir, "shoal.log"), "w")
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(data),
             "--unix-socket-dir", "", "--superuser-password-file",
             str(Path(workdir, "shoal-password")), "--hba-file",
             str(Path(workdir, "shoal-hba.conf")), "--tls-cert",
             str(Path(workdir, "server.crt")), "--tls-key", str(Path(workdir, "server.key"))],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for_port(self.port)

    def cpu_s(self):
        """CPU time the server has used (every thread)."""
        return process_cpu_s(self.proc.pid)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


class Postgres:
    name = "PostgreSQL 15"

    def __init__(self, workdir):
        self.port = free_port()
        self.data = Path(workdir, "pg-data")
        self.data.mkdir()
        certs = Path(workdir, "pg-certs")
        certs.mkdir()
        for f in ["server.crt", "server.key"]:
            shutil.copy(Path(workdir, f), certs / f)
        pwfile = Path(workdir, "pg-password")
        pwfile.write_text(PASSWORD + "\n")
        if os.geteuid() == 0:
            for p in [workdir, self.data, certs, *certs.iterdir(), pwfile]:
                shutil.chown(p, "postgres", "postgres")
        subprocess.run(as_postgres_user(
            [str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres",
             "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"]),
            check=True, capture_output=True)
        Path(self.data, "pg_hba.conf").write_text(HBA)
        with open(Path(self.data, "postgresql.conf"), "a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{workdir}'\nmax_connections = 200\n"
                f"ssl = on\nssl_cert_file = '{certs / 'server.crt'}'\n"
                f"ssl_key_file = '{certs / 'server.key'}'\nfsync = on\n")
        self.log = Path(workdir, "pg.log")
        subprocess.run(as_postgres_user(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "start"]),
            check=True, capture_output=True)
        wait_for_port(self.port)

    def cpu_s(self):
        """CPU time of the postmaster and of its backends: a backend's time joins the
        postmaster's children's time when it exits, and the live ones are added."""
        postmaster = int(Path(self.data, "postmaster.pid").read_text().split()[0])
        total = process_cpu_s(postmaster, children=True)
        for child in Path("/proc").iterdir():
            try:
                if child.name.isdigit() and parent_of(int(child.name)) == postmaster:
                    total += process_cpu_s(int(child.name))
            except OSError:
                pass
        return total

    def stop(self):
        subprocess.run(as_postgres_user(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop"]),
            check=False, capture_output=True)


def process_cpu_s(pid, children=False):
    """User + system CPU seconds of a process (with its reaped children's when asked)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # Fields 14-17 of /proc/PID/stat (utime, stime, cutime, cstime), counted after the name.
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def parent_of(pid):
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def measured(server, args, sslmode):
    """Runs pgbench and returns (TPS, server CPU µs per transaction, pgbench CPU µs per
    transaction): on a machine where both share the cores, the two add up to what a
    transaction costs."""
    server_before = server.cpu_s()
    client_before = os.times()
    out = pgbench(server, args, sslmode)
    client_after = os.times()
    server_s = server.cpu_s() - server_before
    client_s = (client_after.children_user - client_before.children_user
                + client_after.children_system - client_before.children_system)
    txns = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
    return tps(out), server_s * 1e6 / txns, client_s * 1e6 / txns


def pgbench(server, args, sslmode, check=True):
    env = dict(os.environ, PGPASSWORD=PASSWORD, PGSSLMODE=sslmode)
    cmd = [str(PG_BIN / "pgbench"), "-h", "127.0.0.1", "-p", str(server.port),
           "-U", "postgres", *args, "postgres"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"{server.name}: {' '.join(cmd)}:\n{out.stderr}")
    return out.stdout


def tps(output):
    m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", output)
    if not m:
        m = re.search(r"tps = ([0-9.]+)", output)
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", help="a Shoal binary (default: build with cargo --release)")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    binary = args.binary
    if not binary:
        subprocess.run(["cargo", "build", "--release", "-p", "shoal"], cwd=REPO, check=True)
        target = os.environ.get("CARGO_TARGET_DIR", str(REPO / "target"))
        binary = str(Path(target, "release", "shoal"))
    workdir = tempfile.mkdtemp(prefix="shoal-security-bench-")
    os.chmod(workdir, 0o755)
    make_certificates(workdir)
    servers = [Shoal(workdir, binary), Postgres(workdir)]
    results = {s.name: {w: [] for w in WORKLOADS} for s in servers}
    # (server, pgbench) CPU µs per transaction of each run.
    cpu = {s.name: {w: [] for w in WORKLOADS} for s in servers}
    try:
        for s in servers:
            pgbench(s, ["-i", "-s", "1", "-q"], "disable")
        jobs = ["-j", str(min(2, args.clients))]
        for run in range(args.runs):
            for w, (flags, sslmode) in WORKLOADS.items():
                for s in servers:
                    rate, server_us, client_us = measured(
                        s, [*flags, "-c", str(args.clients), *jobs, "-T", str(args.duration)],
                        sslmode)
                    results[s.name][w].append(rate)
                    cpu[s.name][w].append((server_us, client_us))
                    print(f"run {run + 1} {w:12} {s.name:14} {rate:10.0f} tps, CPU per "
                          f"transaction: server {server_us:.1f} µs, pgbench {client_us:.1f} µs",
                          flush=True)
    finally:
        for s in servers:
            s.stop()
    write_results(results, cpu, args)
    shutil.rmtree(workdir, ignore_errors=True)


def tls_cost(cpu_split, name, who):
    """CPU µs that TLS adds per select-only transaction: to the server (who=0) or pgbench (1)."""
    return cpu_split[name]["select-tls"][who] - cpu_split[name]["select"][who]


def write_results(results, cpu, args):
    shoal, pg = results["Shoal"], results["PostgreSQL 15"]
    med = {name: {w: statistics.median(v) for w, v in r.items()} for name, r in results.items()}
    lines = [
        "# Authentication and TLS: Shoal against PostgreSQL 15",
        "",
        f"`python3 bench/security/run.py --clients {args.clients} --duration {args.duration} "
        f"--runs {args.runs}`: pgbench scale 1, {args.clients} clients, both servers with "
        "scram-sha-256 for loopback TCP and TLS with the same certificate; median TPS of "
        f"{args.runs} runs of {args.duration} s, alternating servers, on one machine "
        f"({os.cpu_count()} cores, pgbench on the same cores).",
        "",
        "| workload | what a transaction is | Shoal TPS | PostgreSQL TPS | Shoal / PostgreSQL "
        "| best run: Shoal | PostgreSQL | Shoal / PostgreSQL "
        "| CPU µs per transaction in the best run, Shoal + its pgbench | PostgreSQL + its pgbench |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    best = {name: {w: max(v) for w, v in r.items()} for name, r in results.items()}
    # The CPU split of each workload's best run.
    cpu_best = {name: {w: cpu[name][w][results[name][w].index(best[name][w])] for w in r}
                for name, r in results.items()}
    what = {
        "connect": "connect + SCRAM + one select (`-C -S`), no TLS",
        "connect-tls": "TLS handshake + SCRAM-PLUS + one select (`-C -S`)",
        "select": "one select on an open connection (`-S -M prepared`), no TLS",
        "select-tls": "the same over TLS",
    }
    for w in WORKLOADS:
        (ss, sc), (ps, pc) = cpu_best["Shoal"][w], cpu_best["PostgreSQL 15"][w]
        lines.append(f"| {w} | {what[w]} | {med['Shoal'][w]:.0f} | {med['PostgreSQL 15'][w]:.0f} "
                     f"| {med['Shoal'][w] / med['PostgreSQL 15'][w]:.2f} "
                     f"| {best['Shoal'][w]:.0f} | {best['PostgreSQL 15'][w]:.0f} "
                     f"| {best['Shoal'][w] / best['PostgreSQL 15'][w]:.2f} "
                     f"| {ss:.1f} + {sc:.1f} | {ps:.1f} + {pc:.1f} |")
    ratio = lambda w: med["Shoal"][w] / med["PostgreSQL 15"][w]
    best_ratio = lambda w: best["Shoal"][w] / best["PostgreSQL 15"][w]
    lines += [
        "",
        f"Select-only ratio over TLS {ratio('select-tls'):.2f} against {ratio('select'):.2f} "
        f"without (best runs: {best_ratio('select-tls'):.2f} against "
        f"{best_ratio('select'):.2f}); connection set-up with SCRAM {ratio('connect'):.2f}x "
        f"PostgreSQL's rate ({ratio('connect-tls'):.2f}x over TLS).",
        "",
        "What TLS adds to a select-only transaction, in CPU µs (best runs): to the server, "
        f"Shoal {tls_cost(cpu_best, 'Shoal', 0):.1f}, PostgreSQL "
        f"{tls_cost(cpu_best, 'PostgreSQL 15', 0):.1f}; to pgbench, against Shoal "
        f"{tls_cost(cpu_best, 'Shoal', 1):.1f}, against PostgreSQL "
        f"{tls_cost(cpu_best, 'PostgreSQL 15', 1):.1f}.",
        "",
        "Every run: " + "; ".join(
            f"{name} {w} {', '.join(f'{v:.0f}' for v in r[w])}"
            for name, r in (("Shoal", shoal), ("PostgreSQL", pg)) for w in WORKLOADS),
        "",
    ]
    Path(OUT_DIR, "results.md").write_text("\n".join(lines))
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = list(WORKLOADS)
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], [med["Shoal"][w] for w in names], 0.4, label="Shoal")
    ax.bar([x + 0.2 for x in xs], [med["PostgreSQL 15"][w] for w in names], 0.4,
           label="PostgreSQL 15")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("transactions per second (median)")
    ax.set_yscale("log")
    ax.set_title(f"SCRAM and TLS, pgbench scale 1, {args.clients} clients")
    ax.legend()
    fig.tight_layout()
    fig.savefig(Path(OUT_DIR, "security.png"), dpi=110)


if __name__ == "__main__":
    main()
