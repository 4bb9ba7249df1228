#!/usr/bin/env python3
"""Differential SQL fuzzer: random statements on Shoal and on PostgreSQL 15, every difference
reported.

Starts a Shoal (`--shoal-binary`) and a throw-away PostgreSQL 15 (initdb into a temporary
directory, fsync off), or uses running ones (`--shoal HOST:PORT`, `--postgres HOST:PORT`), creates
the same small tables on both (generator.py), then generates statements area by area from
`--seed` and runs each on both servers. An answer that differs (rows, column count, types or
names, command tag, SQLSTATE, one side failing) is shrunk to a smaller statement with the same
kind of difference; a Shoal 0A000 (feature_not_supported) counts as a refusal, not a difference.
A lost Shoal connection is a crash: the statement is recorded and Shoal restarted.

Prints a table per area (run, identical, refused, differences, crashes, timeouts) and exits 1 if
it found any difference or crash. `--report FILE` writes the distinct shrunk differences as
markdown, `--slt-out FILE` as sqllogictest records with PostgreSQL's answers as the expected
output. `--check-slt FILE` instead runs such a file against the PostgreSQL (or, with
`--check-on shoal`, the Shoal) and reports the records it does not pass.

Usage:
  python3 tests/differential/fuzz.py --shoal-binary target/debug/shoal --queries 2000 \\
      [--seed 1 --seed 2] [--areas join,window | --exclude-areas txn] [--duration-s 600]
      [--report report.md] [--slt-out found.slt] [--postgres 127.0.0.1:5432] [--shrink-s 20]
See README.md in this directory.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generator  # noqa: E402
import slt  # noqa: E402
import sqlast  # noqa: E402
from compare import DIFFERENCE_KINDS, Session, run_statements  # noqa: E402

PG_BIN = Path("/usr/lib/postgresql/15/bin")
STATEMENT_TIMEOUT_S = 5
# "both-failed": identical answers that were the same error (a measure of the generator's aim).
SUMMARY_COLUMNS = ["run", "identical", "both-failed", "refused", "differences", "crashes",
                   "timeouts"]


# ---------------------------------------------------------------------------------------------
# Servers

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc=None, timeout_s=120):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode} while starting")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on port {port} after {timeout_s}s")


def as_postgres_user(cmd):
    """initdb and postgres refuse to run as root; run them as the postgres user then."""
    return ["runuser", "-u", "postgres", "--"] + cmd if os.geteuid() == 0 else cmd


class ExternalServer:
    """A server someone else runs: nothing to start or stop, and no restart after a crash."""

    def __init__(self, address):
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)

    def start(self):
        pass

    def stop(self):
        pass

    def restart(self):
        raise RuntimeError(f"the server at {self.host}:{self.port} is gone and not ours to restart")

    kill = None


class ShoalServer:
    """A Shoal started from a binary, on a free port, with a fresh data directory each start."""

    def __init__(self, binary, workdir):
        self.binary, self.workdir = binary, Path(workdir)
        self.host, self.port, self.proc, self.starts = "127.0.0.1", None, None, 0
        self.log = self.workdir / "shoal.log"

    def start(self):
        self.starts += 1
        data_dir = self.workdir / f"shoal-data-{self.starts}"
        self.port = free_port()
        self.proc = subprocess.Popen(
            [str(self.binary), "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir",
             str(data_dir), "--unix-socket-dir", ""],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "a"), start_new_session=True)
        wait_for_port(self.port, self.proc)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self):
        self.stop()
        self.start()


class PostgresServer:
    """A PostgreSQL 15 cluster in a temporary directory: C.UTF-8, UTC, fsync off."""

    def __init__(self, workdir):
        self.host, self.port = "127.0.0.1", free_port()
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "pg-data"
        self.data_dir.mkdir(parents=True)
        self.workdir.parent.chmod(0o755)    # mkdtemp's 0700 would keep the postgres user out
        if os.geteuid() == 0:
            for path in (self.workdir, self.data_dir):
                shutil.chown(path, "postgres")
        subprocess.run(as_postgres_user([str(PG_BIN / "initdb"), "-D", str(self.data_dir),
                                         "-U", "postgres", "--auth=trust", "-E", "UTF8",
                                         "--locale=C.UTF-8"]),
                       check=True, stdout=subprocess.DEVNULL)
        with open(self.data_dir / "postgresql.conf", "a") as f:
            f.write(f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = ''\nfsync = off\nsynchronous_commit = off\n"
                    f"full_page_writes = off\ntimezone = 'UTC'\n")

    def start(self):
        # A session of its own: Ctrl-C must not stop the servers before the report is written.
        subprocess.run(as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir), "-w",
                                         "-l", str(self.workdir / "pg.log"), "start"]),
                       check=True, stdout=subprocess.DEVNULL, start_new_session=True)
        wait_for_port(self.port)

    def stop(self):
        subprocess.run(as_postgres_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data_dir),
                                         "-m", "immediate", "stop"]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def restart(self):
        raise RuntimeError("PostgreSQL lost its connection; giving up")

    kill = None


class Side:
    """A server, the one session to it, and the schema on it."""

    def __init__(self, name, server):
        self.name, self.server, self.session = name, server, None

    def connect(self):
        self.session = Session(self.server.host, self.server.port, STATEMENT_TIMEOUT_S,
                               hard_kill=self.server.kill)
        setup = ["DROP TABLE IF EXISTS " + ", ".join(generator.TABLE_NAMES)]
        for sql in setup + generator.schema_statements():
            outcome = self.session.run(sql)
            if outcome.status != "ok":
                raise RuntimeError(f"{self.name} could not set up the schema: {sql}\n"
                                   f"{outcome.describe()}")

    def recover(self):
        """After a crash: reconnect if the server still runs, else restart it (fresh data)."""
        self.session.close()
        proc = getattr(self.server, "proc", None)
        if proc is not None and proc.poll() is not None:
            self.server.restart()
        try:
            self.connect()
        except (ConnectionError, RuntimeError):
            self.server.restart()
            self.connect()


# ---------------------------------------------------------------------------------------------
# Fuzzing

@dataclass
class Variant:
    """One shrunk statement showing a difference: the area of the case it came from, its tree,
    and the CaseResult of running it."""
    area: str
    node: object
    result: object


@dataclass
class Group:
    """Differences that look like one cause: the same error message (numbers and quoted names
    masked), the same pairs of column types or names, only numeric scales differing, or else
    the same shrunk statement up to literals and names (see `skeleton`)."""
    variants: dict = field(default_factory=dict)     # shrunk SQL -> Variant
    seen: int = 0

    @property
    def kind(self):
        """The most serious kind among the variants."""
        return min((v.result.verdict for v in self.variants.values()), key=DIFFERENCE_KINDS.index)

    def representative(self):
        """The shortest variant of the group's kind."""
        return min((v for v in self.variants.values() if v.result.verdict == self.kind),
                   key=lambda v: (len(v.node.sql()), v.node.sql()))


# After this many distinct shrunk statements in a group, further cases of it are only counted.
VARIANTS_PER_GROUP = 3


def mask(message):
    """An error message with the parts that vary between statements masked."""
    message = re.sub(r'"[^"]*"', '"…"', message or "")
    return re.sub(r"\d+(\.\d+)?", "N", message)


def group_key(result, sql):
    """The key of the Group a difference belongs to; `sql` (the shrunk statement) is needed
    only for kinds whose cause cannot be told from the answers. A Shoal error groups by the
    error alone: most SQLSTATE mismatches are Shoal rejecting a valid construct in a statement
    that PostgreSQL fails later, at run time, for another reason."""
    kind, shoal, pg = result.verdict, result.shoal, result.pg
    if kind in ("rejects-valid", "sqlstate"):
        return "shoal-error", shoal.sqlstate, mask(shoal.message)
    if kind == "accepts-invalid":
        return kind, pg.sqlstate, mask(pg.message)
    if kind == "types":
        return kind, tuple((a, b) for a, b in zip(shoal.types, pg.types) if a != b)
    if kind == "names":
        return kind, tuple((a, b) for a, b in zip(shoal.names, pg.names) if a != b)
    if result.scale_only():
        return kind, "numeric scale"
    return kind, skeleton(sql)


def skeleton(sql):
    """The statement with literals, column references and aliases masked, so that
    `SELECT cbrt(j1.g) FROM t3 AS j1` and `SELECT cbrt(j2.f) FROM t1 AS j2` group together."""
    sql = re.sub(r"'(?:[^']|'')*'", "'…'", sql)
    sql = re.sub(r"\b[a-z]\d+\.\w+", "col", sql)
    sql = re.sub(r"\b(t[1-4]|[jdvc]\d+)\b", "x", sql)
    return re.sub(r"\b\d+(\.\d+)?(e-?\d+)?\b", "0", sql)


class Fuzzer:
    """Runs cases on both sides, counts outcomes per area, and shrinks and groups differences."""

    def __init__(self, shoal, pg, shrink_s):
        self.shoal, self.pg, self.shrink_s = shoal, pg, shrink_s
        self.stats = defaultdict(Counter)
        self.groups = {}
        self.refusals = Counter()

    def run_case(self, node):
        result = run_statements(self.shoal.session, self.pg.session,
                                sqlast.case_statements(node))
        if result.verdict == "crash":
            self.shoal.recover()
        return result

    def fuzz(self, area, node):
        """Runs one case, counts its outcome, and records a difference."""
        result = self.run_case(node)
        counts = self.stats[area]
        counts["run"] += 1
        column = {"identical": "identical", "refused": "refused", "crash": "crashes",
                  "timeout": "timeouts"}.get(result.verdict, "differences")
        counts[column] += 1
        if result.verdict == "identical" and result.pg.status == "error":
            counts["both-failed"] += 1
        if result.verdict == "refused":
            refusal = result.shoal if result.shoal.sqlstate == "0A000" else result.pg
            who = "Shoal" if refusal is result.shoal else "PostgreSQL"
            self.refusals[f"{who}: {refusal.message[:100]}"] += 1
        elif result.verdict != "identical":
            self.record(area, node, result)

    def record(self, area, node, result):
        """Shrinks a difference (unless its group is well known) and files it in its group."""
        group = self.groups.get(group_key(result, node.sql()))
        if group is not None and len(group.variants) >= VARIANTS_PER_GROUP:
            group.seen += 1     # a well-known difference: not worth shrinking again
            return
        node, result = self.shrink(node, result)
        sql = node.sql()
        key = group_key(result, sql)
        if key not in self.groups:
            print(f"  new: {area}/{result.verdict}: {one_line(sql)[:150]}", flush=True)
        group = self.groups.setdefault(key, Group())
        group.seen += 1
        group.variants.setdefault(sql, Variant(area, node, result))

    def shrink(self, node, result):
        """Greedily takes the first smaller candidate with the same kind of difference, until
        none is left or the time is up."""
        target, deadline = result.signature(), time.time() + self.shrink_s
        tried = {node.sql()}
        improved = True
        while improved and time.time() < deadline:
            improved = False
            for cand in sqlast.shrink_candidates(node):
                if time.time() >= deadline:
                    break
                sql = cand.sql()
                if sql in tried or not smaller(sql, node.sql()) or \
                        not sqlast.deterministic(cand):
                    continue
                tried.add(sql)
                cand_result = self.run_case(cand)
                if cand_result.signature() == target:
                    node, result, improved = cand, cand_result, True
                    break
        return node, result

    def exit_code(self):
        return 1 if self.groups else 0


def smaller(a, b):
    """Shrinking's order: shorter, or as long but sorting first ('1' replaces '2'). Every step
    goes down this well-order, so shrinking ends."""
    return (len(a), a) < (len(b), b)


def one_line(sql):
    return " ".join(sql.split())


def run_fuzzer(fuzzer, seeds, areas, queries, duration_s):
    """Generates and runs cases, areas in turn; per seed `queries` cases or an equal share of
    `duration_s`."""
    started = last_progress = time.time()
    for n, seed in enumerate(seeds):
        gen = generator.Generator(seed)
        seed_deadline = started + duration_s * (n + 1) / len(seeds) if duration_s else None
        i = 0
        while (seed_deadline is None and i < queries) or \
                (seed_deadline is not None and time.time() < seed_deadline):
            area = areas[i % len(areas)]
            fuzzer.fuzz(area, gen.case(area))
            i += 1
            if time.time() - last_progress > 30:
                last_progress = time.time()
                total = sum(c["run"] for c in fuzzer.stats.values())
                print(f"[{time.time() - started:.0f}s] seed {seed}: {total} cases, "
                      f"{len(fuzzer.groups)} distinct differences", flush=True)


# ---------------------------------------------------------------------------------------------
# Output

def summary_table(stats):
    """The per-area counts as a markdown table, with a total row."""
    rows = [[area] + [str(stats[area][c]) for c in SUMMARY_COLUMNS] for area in stats]
    totals = Counter()
    for counts in stats.values():
        totals.update(counts)
    rows.append(["total"] + [str(totals[c]) for c in SUMMARY_COLUMNS])
    header = ["area"] + SUMMARY_COLUMNS
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def ordered_groups(groups):
    severity = {kind: i for i, kind in enumerate(DIFFERENCE_KINDS)}
    return sorted(groups.values(), key=lambda g: (severity[g.kind], -g.seen,
                                                  g.representative().node.sql()))


def markdown_report(fuzzer, command):
    out = ["# Differential fuzzing: Shoal against PostgreSQL 15", "", f"Command: `{command}`", "",
           summary_table(fuzzer.stats), "",
           f"## {len(fuzzer.groups)} distinct differences (shrunk), most serious first", ""]
    for n, group in enumerate(ordered_groups(fuzzer.groups), 1):
        rep = group.representative()
        r = rep.result
        out += [f"### {n}. {group.kind}, {rep.area} (seen {group.seen}x)", "", "```sql",
                rep.node.sql(), "```", ""]
        if len(sqlast.case_statements(rep.node)) > 1:
            out += [f"Differs at: `{r.statement}`", ""]
        out += [f"- Shoal: `{r.shoal.describe()}`", f"- PostgreSQL: `{r.pg.describe()}`"]
        if group.kind in ("types", "names"):
            out += [f"- Shoal columns: {list(zip(r.shoal.names, r.shoal.types))}",
                    f"- PostgreSQL columns: {list(zip(r.pg.names, r.pg.types))}"]
        others = [v.node.sql() for v in group.variants.values() if v is not rep]
        if others:
            out += ["- Also: " + "; ".join(f"`{one_line(sql)[:200]}`" for sql in others)]
        out.append("")
    if fuzzer.refusals:
        out += ["## Refusals (0A000), by message", "", "| count | message |", "|---|---|"]
        out += [f"| {n} | {msg.replace('|', '/')} |" for msg, n in fuzzer.refusals.most_common(40)]
    return "\n".join(out) + "\n"


def slt_file(fuzzer, command):
    """Each group's representative as sqllogictest records, each statement's expected output
    taken from PostgreSQL (re-run here, so that every statement of a script gets its own).
    Type and name differences are left out: sqllogictest compares neither."""
    out = [slt.comment(f"Differences between Shoal and PostgreSQL 15 found by\n{command}\n"
                       "Expected outputs are PostgreSQL's. Generated by "
                       "tests/differential/fuzz.py."), "statement ok\n"
           f"DROP TABLE IF EXISTS {', '.join(generator.TABLE_NAMES)}\n"]
    out += [f"statement ok\n{sql}\n" for sql in generator.schema_statements()]
    # Crashes go last: a lost connection fails every record after it.
    groups = [g for g in ordered_groups(fuzzer.groups) if g.kind not in ("types", "names")]
    for group in [g for g in groups if g.kind != "crash"] + [g for g in groups if g.kind == "crash"]:
        rep = group.representative()
        r = rep.result
        where = f" to: {r.statement}" if len(sqlast.case_statements(rep.node)) > 1 else ""
        note = f"{rep.area} / {group.kind}: Shoal answered {r.shoal.describe(3)}{where}"
        out.append(slt.comment(note[:400]) + expected_records(fuzzer.pg.session, rep.node))
    out.append(f"statement ok\nDROP TABLE {', '.join(generator.TABLE_NAMES)}\n")
    return "\n".join(out)


def expected_records(pg, node):
    records = []
    for sql, ordered in sqlast.case_statements(node):
        outcome = pg.run(sql)
        text_sql = slt.as_text_query(sql, outcome)
        if text_sql != sql:
            outcome = pg.run(text_sql)
        records.append(slt.record(text_sql, outcome, ordered))
    pg.reset()
    return "\n".join(records)


# ---------------------------------------------------------------------------------------------
# Command line

def parse_args(argv):
    """The command line, with areas checked and defaults filled in."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shoal-binary", help="start this shoal binary")
    p.add_argument("--shoal", metavar="HOST:PORT", help="use a running Shoal")
    p.add_argument("--postgres", metavar="HOST:PORT",
                   help="use a running PostgreSQL 15 (default: start one)")
    p.add_argument("--seed", type=int, action="append", help="generator seed (repeatable)")
    p.add_argument("--queries", type=int, help="cases per seed (default 1000)")
    p.add_argument("--duration-s", type=float, help="run for this long instead, over all seeds")
    p.add_argument("--areas", help="comma-separated areas to run: " + ",".join(generator.AREAS))
    p.add_argument("--exclude-areas", help="comma-separated areas to skip")
    p.add_argument("--shrink-s", type=float, default=20, help="time limit per shrink (s)")
    p.add_argument("--report", help="write a markdown report of distinct differences here")
    p.add_argument("--slt-out", help="write the differences as sqllogictest records here")
    p.add_argument("--baseline", help="JSON of the most differences each area may show; with it "
                   "the exit code is 1 only for a crash or an area above its number (CI)")
    p.add_argument("--write-baseline", help="write this run's differences per area as JSON here")
    p.add_argument("--check-slt", help="only run this .slt file and report failing records")
    p.add_argument("--check-on", choices=["postgres", "shoal"], default="postgres",
                   help="the server --check-slt runs against")
    args = p.parse_args(argv)
    if args.check_slt is None and not (args.shoal_binary or args.shoal):
        p.error("give --shoal-binary PATH or --shoal HOST:PORT")
    if args.check_slt and args.check_on == "shoal" and not (args.shoal_binary or args.shoal):
        p.error("--check-on shoal needs --shoal-binary or --shoal")
    areas = args.areas.split(",") if args.areas else list(generator.AREAS)
    excluded = set(args.exclude_areas.split(",")) if args.exclude_areas else set()
    unknown = (set(areas) | excluded) - set(generator.AREAS)
    if unknown:
        p.error(f"unknown areas: {', '.join(sorted(unknown))}")
    args.areas = [a for a in areas if a not in excluded]
    args.seed = args.seed or [1]
    if args.queries is None and args.duration_s is None:
        args.queries = 1000
    return args


def main(argv):
    args = parse_args(argv)
    command = "python3 tests/differential/fuzz.py " + " ".join(argv)
    workdir = Path(tempfile.mkdtemp(prefix="shoal-differential-"))
    servers, keep_workdir = [], False
    try:
        pg_server = ExternalServer(args.postgres) if args.postgres else PostgresServer(workdir / "pg")
        servers.append(pg_server)
        shoal_server = None
        if args.shoal or args.shoal_binary:
            shoal_server = ExternalServer(args.shoal) if args.shoal else \
                ShoalServer(args.shoal_binary, workdir)
            servers.append(shoal_server)
        for server in servers:
            server.start()
        if args.check_slt:
            return check_slt(args, pg_server, shoal_server)
        shoal, pg = Side("Shoal", shoal_server), Side("PostgreSQL", pg_server)
        pg.connect()
        shoal.connect()
        fuzzer = Fuzzer(shoal, pg, args.shrink_s)
        try:
            run_fuzzer(fuzzer, args.seed, args.areas, args.queries, args.duration_s)
        except KeyboardInterrupt:
            print("interrupted; reporting what was found so far")
        print(summary_table(fuzzer.stats))
        print(f"{len(fuzzer.groups)} distinct differences")
        if any(c["crashes"] for c in fuzzer.stats.values()) and isinstance(shoal_server, ShoalServer):
            keep_workdir = True
            print(f"Shoal crashed; its log is kept in {shoal_server.log}")
        if args.report:
            Path(args.report).write_text(markdown_report(fuzzer, command))
        if args.slt_out:
            Path(args.slt_out).write_text(slt_file(fuzzer, command))
        if args.write_baseline:
            counts = {area: c["differences"] for area, c in sorted(fuzzer.stats.items())}
            Path(args.write_baseline).write_text(json.dumps(counts, indent=2) + "\n")
        if args.baseline:
            return against_baseline(fuzzer, json.loads(Path(args.baseline).read_text()))
        return fuzzer.exit_code()
    finally:
        for server in servers:
            server.stop()
        if not keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def against_baseline(fuzzer, baseline):
    """The CI ratchet: known differences are tolerated up to the recorded count per area, so
    that a fix lowers the number and anything new fails; a crash always fails."""
    failed = False
    for area, counts in sorted(fuzzer.stats.items()):
        allowed, found = baseline.get(area, 0), counts["differences"]
        if counts["crashes"]:
            print(f"FAIL {area}: {counts['crashes']} crash(es)")
            failed = True
        if found > allowed:
            print(f"FAIL {area}: {found} differences, the baseline allows {allowed}")
            failed = True
        elif found < allowed:
            print(f"{area}: {found} differences, below the baseline's {allowed}: lower it")
    return 1 if failed else 0


def check_slt(args, pg_server, shoal_server):
    server = shoal_server if args.check_on == "shoal" else pg_server
    failures = slt.check_file(lambda: Session(server.host, server.port, STATEMENT_TIMEOUT_S),
                              args.check_slt)
    for failure in failures:
        print(failure, end="\n\n")
    print(f"{args.check_slt}: {len(failures)} failing records on {args.check_on}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
