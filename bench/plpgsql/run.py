#!/usr/bin/env python3
"""PL/pgSQL speed, PostgreSQL against Shoal: the time of one call of

- `inc(k)`: `RETURN k + 1` and nothing else, the fixed cost of a call;
- `assign_loop(n)`: a loop of `n` simple integer assignments (no SQL);
- `keyed_ops(k)`: three keyed statements on a 10,000-row table (a SELECT INTO by primary key,
  an UPDATE by primary key, an INSERT into a log table);

each measured from one connection as the median of `--runs` runs of `--calls` calls (wall
time at the client, so that it includes what the server does for the call). Both servers must
run on this machine; the script creates its tables and functions in the databases given.

    python3 bench/plpgsql/run.py \\
        --pg "host=127.0.0.1 port=5432 user=postgres dbname=postgres" \\
        --shoal "host=127.0.0.1 port=5433 user=postgres dbname=postgres"

writes bench/plpgsql/results.md and bench/plpgsql/results.png.
"""
import argparse
import datetime
import os
import random
import statistics
import time

import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))

SETUP = [
    "DROP TABLE IF EXISTS bench_pl_accounts",
    "DROP TABLE IF EXISTS bench_pl_log",
    "CREATE TABLE bench_pl_accounts (id integer PRIMARY KEY, balance bigint NOT NULL)",
    "CREATE TABLE bench_pl_log (id bigserial PRIMARY KEY, account integer, amount bigint)",
    "INSERT INTO bench_pl_accounts SELECT g, 1000 FROM generate_series(1, 10000) g",
    """CREATE OR REPLACE FUNCTION bench_pl_assign_loop(n integer) RETURNS bigint
       LANGUAGE plpgsql AS $$
       DECLARE total bigint := 0;
       BEGIN
         FOR i IN 1..n LOOP
           total := total + i;
         END LOOP;
         RETURN total;
       END $$""",
    """CREATE OR REPLACE FUNCTION bench_pl_inc(k integer) RETURNS integer
       LANGUAGE plpgsql AS $$
       BEGIN
         RETURN k + 1;
       END $$""",
    """CREATE OR REPLACE FUNCTION bench_pl_keyed_ops(k integer) RETURNS bigint
       LANGUAGE plpgsql AS $$
       DECLARE b bigint;
       BEGIN
         SELECT balance INTO b FROM bench_pl_accounts WHERE id = k;
         UPDATE bench_pl_accounts SET balance = b + 1 WHERE id = k;
         INSERT INTO bench_pl_log (account, amount) VALUES (k, 1);
         RETURN b;
       END $$""",
]

# (name, SQL of one call, argument for one call, what one call does)
CASES = [
    ("call_only", "SELECT bench_pl_inc(%s)", lambda r: r.randint(1, 10000),
     "nothing but RETURN k + 1: the fixed cost of a call"),
    ("assign_loop", "SELECT bench_pl_assign_loop(%s)", lambda r: 1000,
     "1,000 integer assignments in a FOR loop"),
    ("keyed_ops", "SELECT bench_pl_keyed_ops(%s)", lambda r: r.randint(1, 10000),
     "SELECT INTO, UPDATE and INSERT by primary key"),
]


def setup(dsn):
    with psycopg.connect(dsn, autocommit=True) as c:
        for s in SETUP:
            c.execute(s)


def measure(dsn, sql, arg, calls, runs, seed):
    """Median over runs of the mean time of one call, in milliseconds."""
    times = []
    with psycopg.connect(dsn, autocommit=True) as c:
        r = random.Random(seed)
        c.execute(sql, (arg(r),))  # warm up: the first call parses the body
        for _ in range(runs):
            start = time.perf_counter()
            for _ in range(calls):
                c.execute(sql, (arg(r),))
            times.append((time.perf_counter() - start) * 1000 / calls)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pg", required=True)
    p.add_argument("--shoal", required=True)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--out", default=os.path.join(HERE, "results.md"))
    args = p.parse_args()
    for dsn in (args.pg, args.shoal):
        setup(dsn)
    rows = []
    for name, sql, arg, what in CASES:
        pg = measure(args.pg, sql, arg, args.calls, args.runs, 1)
        shoal = measure(args.shoal, sql, arg, args.calls, args.runs, 1)
        rows.append((name, what, pg, shoal))
        print(f"{name}: PostgreSQL {pg:.3f} ms, Shoal {shoal:.3f} ms, ratio {pg / shoal:.2f}")
    with open(args.out, "w") as f:
        f.write("# PL/pgSQL speed: PostgreSQL 15 against Shoal\n\n")
        f.write(f"Measured {datetime.date.today()} by `bench/plpgsql/run.py` (median of "
                f"{args.runs} runs of {args.calls} calls, one connection, wall time per call "
                "at the client). Ratio above 1: Shoal is faster.\n\n")
        f.write("| function | one call does | PostgreSQL ms/call | Shoal ms/call | ratio |\n")
        f.write("|---|---|---:|---:|---:|\n")
        for name, what, pg, shoal in rows:
            f.write(f"| `{name}` | {what} | {pg:.3f} | {shoal:.3f} | {pg / shoal:.2f} |\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.5))
        xs = range(len(rows))
        ax.bar([x - 0.2 for x in xs], [r[2] for r in rows], width=0.4, label="PostgreSQL 15")
        ax.bar([x + 0.2 for x in xs], [r[3] for r in rows], width=0.4, label="Shoal")
        ax.set_xticks(list(xs), [r[0] for r in rows])
        ax.set_ylabel("ms per call (lower is better)")
        ax.set_yscale("log")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.splitext(args.out)[0] + ".png", dpi=120)
    except ImportError:
        print("matplotlib missing: no plot")


if __name__ == "__main__":
    main()
