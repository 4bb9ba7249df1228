#!/usr/bin/env python3
"""Server CPU time per execution of each TPC-C statement, PostgreSQL against Shoal.

Each statement runs alone, prepared, from one connection, `--executions` times with the
parameters a TPC-C terminal would send, each time in a transaction of its own that is rolled
back (so the database is left as it was); the cost of an empty transaction is subtracted. The server's CPU time over those executions (user +
system, from /proc) divided by their number is the statement's cost on that server: for
PostgreSQL the connection's backend process, for Shoal the whole server process (its
background threads included). Both databases must hold a TPC-C database loaded by
`tpcc/tpcc.py load` with the same number of warehouses, and both servers must run on this
machine.

    python3 bench/oltp/statements.py --warehouses 2 \\
        --pg "host=127.0.0.1 port=5432 user=postgres dbname=tpcc" \\
        --shoal "host=127.0.0.1 port=5433 user=postgres dbname=postgres" --shoal-pid PID

writes a markdown table (bench/oltp/statements-results.md by default).
"""
import argparse
import datetime
import os
import random
import time

import psycopg

TICKS_PER_S = os.sysconf("SC_CLK_TCK")

# (name, SQL, parameters for one execution from a random generator and the warehouse count)
STATEMENTS = [
    ("warehouse by key", "SELECT w_tax FROM warehouse WHERE w_id = %s",
     lambda r, w: (r.randint(1, w),)),
    ("district by key FOR UPDATE",
     "SELECT d_tax, d_next_o_id FROM district WHERE d_w_id = %s AND d_id = %s FOR UPDATE",
     lambda r, w: (r.randint(1, w), r.randint(1, 10))),
    ("district d_next_o_id + 1",
     "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = %s AND d_id = %s",
     lambda r, w: (r.randint(1, w), r.randint(1, 10))),
    ("customer by key",
     "SELECT c_discount, c_last, c_credit FROM customer "
     "WHERE c_w_id = %s AND c_d_id = %s AND c_id = %s",
     lambda r, w: (r.randint(1, w), r.randint(1, 10), r.randint(1, 3000))),
    ("item by key", "SELECT i_price, i_name, i_data FROM item WHERE i_id = %s",
     lambda r, w: (r.randint(1, 100000),)),
    ("stock by key FOR UPDATE",
     "SELECT s_quantity, s_data, s_dist_01 FROM stock WHERE s_w_id = %s AND s_i_id = %s "
     "FOR UPDATE",
     lambda r, w: (r.randint(1, w), r.randint(1, 100000))),
    ("stock update",
     "UPDATE stock SET s_quantity = %s, s_ytd = s_ytd + %s, s_order_cnt = s_order_cnt + 1, "
     "s_remote_cnt = s_remote_cnt + %s WHERE s_w_id = %s AND s_i_id = %s",
     lambda r, w: (r.randint(10, 100), r.randint(1, 10), 0, r.randint(1, w),
                   r.randint(1, 100000))),
    ("customer balance update",
     "UPDATE customer SET c_balance = c_balance - %s, c_ytd_payment = c_ytd_payment + %s, "
     "c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = %s AND c_d_id = %s AND c_id = %s",
     lambda r, w: (1, 1, r.randint(1, w), r.randint(1, 10), r.randint(1, 3000))),
    ("customers by last name",
     "SELECT c_id FROM customer WHERE c_w_id = %s AND c_d_id = %s AND c_last = %s "
     "ORDER BY c_first",
     lambda r, w: (r.randint(1, w), r.randint(1, 10), "BARBARBAR")),
    ("last order of a customer",
     "SELECT o_id, o_entry_d, o_carrier_id FROM orders WHERE o_w_id = %s AND o_d_id = %s "
     "AND o_c_id = %s ORDER BY o_id DESC LIMIT 1",
     lambda r, w: (r.randint(1, w), r.randint(1, 10), r.randint(1, 3000))),
    ("order lines of an order",
     "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line "
     "WHERE ol_w_id = %s AND ol_d_id = %s AND ol_o_id = %s",
     lambda r, w: (r.randint(1, w), r.randint(1, 10), r.randint(1, 2100))),
    ("oldest new order FOR UPDATE",
     "SELECT no_o_id FROM new_order WHERE no_w_id = %s AND no_d_id = %s "
     "ORDER BY no_o_id LIMIT 1 FOR UPDATE",
     lambda r, w: (r.randint(1, w), r.randint(1, 10))),
    ("order lines delivered",
     "UPDATE order_line SET ol_delivery_d = %s WHERE ol_w_id = %s AND ol_d_id = %s "
     "AND ol_o_id = %s",
     lambda r, w: (datetime.datetime(2026, 1, 1), r.randint(1, w), r.randint(1, 10),
                   r.randint(1, 2100))),
    ("sum of order lines",
     "SELECT SUM(ol_amount) FROM order_line WHERE ol_w_id = %s AND ol_d_id = %s "
     "AND ol_o_id = %s",
     lambda r, w: (r.randint(1, w), r.randint(1, 10), r.randint(1, 2100))),
    ("stock level join",
     "SELECT COUNT(DISTINCT s_i_id) FROM order_line, stock WHERE ol_w_id = %s AND ol_d_id = %s "
     "AND ol_o_id < %s AND ol_o_id >= %s AND s_w_id = %s AND s_i_id = ol_i_id "
     "AND s_quantity < %s",
     lambda r, w: (lambda wid, o: (wid, r.randint(1, 10), o, o - 20, wid, 15))(
         r.randint(1, w), r.randint(2100, 3000))),
]


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of the whole line; here 12 and 13 after the name.
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def run_each(conn, pid, executions, one):
    """CPU and wall seconds of `executions` calls of `one`, each in a transaction rolled back."""
    cpu0, wall0 = cpu_s(pid), time.perf_counter()
    for _ in range(executions):
        conn.execute("BEGIN")
        one()
        # Through libpq directly: psycopg drops every prepared statement of the connection
        # when it sees a ROLLBACK, and each execution would then be prepared anew.
        conn.pgconn.exec_(b"ROLLBACK")
    return cpu_s(pid) - cpu0, time.perf_counter() - wall0


def measure(dsn, pid, warehouses, executions, seed):
    """CPU microseconds and wall microseconds per execution, by statement name: each execution
    in a transaction of its own that is rolled back, less the cost of an empty such
    transaction (BEGIN and ROLLBACK)."""
    out = {}
    with psycopg.connect(dsn, prepare_threshold=0, autocommit=True) as conn:
        if pid is None:
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        base_cpu, base_wall = run_each(conn, pid, executions, lambda: None)
        for name, sql, params in STATEMENTS:
            r = random.Random(seed)

            def one():
                cur = conn.execute(sql, params(r, warehouses))
                if cur.description is not None:
                    cur.fetchall()

            run_each(conn, pid, 5, one)  # warm up: prepared, plan kept
            cpu, wall = run_each(conn, pid, executions, one)
            out[name] = (max(cpu - base_cpu, 0) * 1e6 / executions,
                         max(wall - base_wall, 0) * 1e6 / executions)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pg", required=True, help="PostgreSQL DSN")
    p.add_argument("--shoal", required=True, help="Shoal DSN")
    p.add_argument("--shoal-pid", type=int, required=True, help="the Shoal server's process id")
    p.add_argument("--warehouses", type=int, required=True)
    p.add_argument("--executions", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--report", default=os.path.join(os.path.dirname(__file__),
                                                    "statements-results.md"))
    args = p.parse_args()
    pg = measure(args.pg, None, args.warehouses, args.executions, args.seed)
    shoal = measure(args.shoal, args.shoal_pid, args.warehouses, args.executions, args.seed)
    lines = [
        "| statement | PostgreSQL CPU µs | Shoal CPU µs | Shoal / PostgreSQL | "
        "PostgreSQL wall µs | Shoal wall µs |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, _, _ in STATEMENTS:
        (pc, pw), (sc, sw) = pg[name], shoal[name]
        ratio = sc / pc if pc > 0 else float("inf")
        lines.append("| %s | %.0f | %.0f | %.2f | %.0f | %.0f |" % (name, pc, sc, ratio, pw, sw))
    table = "\n".join(lines)
    print(table)
    with open(args.report, "w") as f:
        f.write("Server CPU time per execution of each TPC-C statement (less an empty "
                "transaction's), %d executions each, prepared, one connection, %d warehouses:\n\n    python3 bench/oltp/statements.py "
                "--warehouses %d --executions %d --pg DSN --shoal DSN --shoal-pid PID\n\n%s\n"
                % (args.executions, args.warehouses, args.warehouses, args.executions, table))


if __name__ == "__main__":
    main()
