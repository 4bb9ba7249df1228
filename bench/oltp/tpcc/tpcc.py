#!/usr/bin/env python3
"""TPC-C driver for PostgreSQL-protocol servers (PostgreSQL 15, Shoal).

Written from the TPC-C Standard Specification, revision 5.11. Subcommands:

    load        create the nine tables and populate them (clause 4.3)
    procedures  create the five transactions as PL/pgSQL functions (procedures.sql)
    run         run the transaction mix (clauses 2.4-2.8, 5.2.3) with no keying or think
                times, as interactive SQL or (--procedures) as one function call each
    check       verify the consistency conditions of clause 3.3.2

See README.md next to this file for what is and is not implemented.
"""

import argparse
import datetime
import math
import os
import random
import re
import sys
import threading
import time
from decimal import Decimal

import psycopg

# ---------------------------------------------------------------------------
# Constants (clause 4.3, 4.2)

DIST_PER_WARE = 10
CUST_PER_DIST = 3000
ORD_PER_DIST = 3000
FIRST_UNDELIVERED_O_ID = 2101          # orders 2101..3000 are in NEW-ORDER at load
SPEC_ITEMS = 100000
SYLLABLES = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"]

# NURand constant C for C_LAST at load time (clause 2.1.6). The run picks its own C_RUN so
# that |C_RUN - C_LOAD| is in [65..119] and not 96 or 112 (clause 2.1.6.1). A constant C_LOAD
# lets `run` find it without storing anything outside the nine tables.
C_LOAD_C_LAST = 157

TX_TYPES = ["new_order", "payment", "order_status", "delivery", "stock_level"]
TX_LABEL = {
    "new_order": "New-Order",
    "payment": "Payment",
    "order_status": "Order-Status",
    "delivery": "Delivery",
    "stock_level": "Stock-Level",
}
# Clause 5.2.3: Payment >= 43%, Order-Status, Delivery, Stock-Level >= 4% each; New-Order the rest.
MIX = {"new_order": 45, "payment": 43, "order_status": 4, "delivery": 4, "stock_level": 4}

RETRY_SQLSTATES = {"40001", "40P01"}

PROCEDURES_SQL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "procedures.sql")
# The SQLSTATE tpcc_new_order raises for the unused item number of clause 2.4.2.3.
ITEM_NOT_VALID_SQLSTATE = "TPC01"

# ---------------------------------------------------------------------------
# Schema (clause 1.3). numeric(N) integer counters are declared as integer, as most
# implementations do; everything else uses the spec's sizes.

SCHEMA = [
    """CREATE TABLE warehouse (
        w_id integer NOT NULL,
        w_name varchar(10),
        w_street_1 varchar(20),
        w_street_2 varchar(20),
        w_city varchar(20),
        w_state char(2),
        w_zip char(9),
        w_tax numeric(4,4),
        w_ytd numeric(12,2),
        PRIMARY KEY (w_id))""",
    """CREATE TABLE district (
        d_id integer NOT NULL,
        d_w_id integer NOT NULL,
        d_name varchar(10),
        d_street_1 varchar(20),
        d_street_2 varchar(20),
        d_city varchar(20),
        d_state char(2),
        d_zip char(9),
        d_tax numeric(4,4),
        d_ytd numeric(12,2),
        d_next_o_id integer,
        PRIMARY KEY (d_w_id, d_id))""",
    """CREATE TABLE customer (
        c_id integer NOT NULL,
        c_d_id integer NOT NULL,
        c_w_id integer NOT NULL,
        c_first varchar(16),
        c_middle char(2),
        c_last varchar(16),
        c_street_1 varchar(20),
        c_street_2 varchar(20),
        c_city varchar(20),
        c_state char(2),
        c_zip char(9),
        c_phone char(16),
        c_since timestamp,
        c_credit char(2),
        c_credit_lim numeric(12,2),
        c_discount numeric(4,4),
        c_balance numeric(12,2),
        c_ytd_payment numeric(12,2),
        c_payment_cnt integer,
        c_delivery_cnt integer,
        c_data varchar(500),
        PRIMARY KEY (c_w_id, c_d_id, c_id))""",
    """CREATE TABLE history (
        h_c_id integer,
        h_c_d_id integer,
        h_c_w_id integer,
        h_d_id integer,
        h_w_id integer,
        h_date timestamp,
        h_amount numeric(6,2),
        h_data varchar(24))""",
    """CREATE TABLE new_order (
        no_o_id integer NOT NULL,
        no_d_id integer NOT NULL,
        no_w_id integer NOT NULL,
        PRIMARY KEY (no_w_id, no_d_id, no_o_id))""",
    """CREATE TABLE orders (
        o_id integer NOT NULL,
        o_d_id integer NOT NULL,
        o_w_id integer NOT NULL,
        o_c_id integer,
        o_entry_d timestamp,
        o_carrier_id integer,
        o_ol_cnt integer,
        o_all_local integer,
        PRIMARY KEY (o_w_id, o_d_id, o_id))""",
    """CREATE TABLE order_line (
        ol_o_id integer NOT NULL,
        ol_d_id integer NOT NULL,
        ol_w_id integer NOT NULL,
        ol_number integer NOT NULL,
        ol_i_id integer,
        ol_supply_w_id integer,
        ol_delivery_d timestamp,
        ol_quantity integer,
        ol_amount numeric(6,2),
        ol_dist_info char(24),
        PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number))""",
    """CREATE TABLE item (
        i_id integer NOT NULL,
        i_im_id integer,
        i_name varchar(24),
        i_price numeric(5,2),
        i_data varchar(50),
        PRIMARY KEY (i_id))""",
    """CREATE TABLE stock (
        s_i_id integer NOT NULL,
        s_w_id integer NOT NULL,
        s_quantity integer,
        s_dist_01 char(24),
        s_dist_02 char(24),
        s_dist_03 char(24),
        s_dist_04 char(24),
        s_dist_05 char(24),
        s_dist_06 char(24),
        s_dist_07 char(24),
        s_dist_08 char(24),
        s_dist_09 char(24),
        s_dist_10 char(24),
        s_ytd integer,
        s_order_cnt integer,
        s_remote_cnt integer,
        s_data varchar(50),
        PRIMARY KEY (s_w_id, s_i_id))""",
]

TABLES = ["warehouse", "district", "customer", "history", "new_order", "orders",
          "order_line", "item", "stock"]

INDEXES = [
    "CREATE INDEX customer_name_idx ON customer (c_w_id, c_d_id, c_last, c_first)",
    "CREATE INDEX orders_customer_idx ON orders (o_w_id, o_d_id, o_c_id, o_id)",
]

# Clause 1.3: the foreign keys of each table (optional here, --foreign-keys).
FOREIGN_KEYS = [
    "ALTER TABLE district ADD FOREIGN KEY (d_w_id) REFERENCES warehouse (w_id)",
    "ALTER TABLE customer ADD FOREIGN KEY (c_w_id, c_d_id) REFERENCES district (d_w_id, d_id)",
    "ALTER TABLE history ADD FOREIGN KEY (h_c_w_id, h_c_d_id, h_c_id) "
    "REFERENCES customer (c_w_id, c_d_id, c_id)",
    "ALTER TABLE history ADD FOREIGN KEY (h_w_id, h_d_id) REFERENCES district (d_w_id, d_id)",
    "ALTER TABLE new_order ADD FOREIGN KEY (no_w_id, no_d_id, no_o_id) "
    "REFERENCES orders (o_w_id, o_d_id, o_id)",
    "ALTER TABLE orders ADD FOREIGN KEY (o_w_id, o_d_id, o_c_id) "
    "REFERENCES customer (c_w_id, c_d_id, c_id)",
    "ALTER TABLE order_line ADD FOREIGN KEY (ol_w_id, ol_d_id, ol_o_id) "
    "REFERENCES orders (o_w_id, o_d_id, o_id)",
    "ALTER TABLE order_line ADD FOREIGN KEY (ol_supply_w_id, ol_i_id) "
    "REFERENCES stock (s_w_id, s_i_id)",
    "ALTER TABLE stock ADD FOREIGN KEY (s_w_id) REFERENCES warehouse (w_id)",
    "ALTER TABLE stock ADD FOREIGN KEY (s_i_id) REFERENCES item (i_id)",
]

# ---------------------------------------------------------------------------
# Random data (clause 2.1.6, 4.3.2)

_ALNUM = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_ALNUM_TABLE = bytes(_ALNUM[i % 62] for i in range(256))
_ALNUM_DROP = bytes(range(248, 256))     # 248 = 4 * 62: keeps the mapping uniform
_DIGIT_TABLE = bytes(b"0123456789"[i % 10] for i in range(256))
_DIGIT_DROP = bytes(range(250, 256))


class Rand:
    """Random values as clause 4.3.2 defines them. One instance per thread."""

    def __init__(self, seed=None):
        self.rng = random.Random(seed)
        self.randint = self.rng.randint
        self._abuf, self._apos = "", 0
        self._nbuf, self._npos = "", 0

    def _chars(self, n, which):
        # a-strings and n-strings are cut from a buffer of random characters that is
        # refilled from randbytes(): much faster than one random.choice() per character.
        if which == "a":
            if self._apos + n > len(self._abuf):
                self._abuf = self.rng.randbytes(1 << 16).translate(
                    _ALNUM_TABLE, _ALNUM_DROP).decode("ascii")
                self._apos = 0
            p = self._apos
            self._apos = p + n
            return self._abuf[p:p + n]
        if self._npos + n > len(self._nbuf):
            self._nbuf = self.rng.randbytes(1 << 14).translate(
                _DIGIT_TABLE, _DIGIT_DROP).decode("ascii")
            self._npos = 0
        p = self._npos
        self._npos = p + n
        return self._nbuf[p:p + n]

    def astring(self, x, y):
        return self._chars(self.randint(x, y), "a")

    def nstring(self, x, y):
        return self._chars(self.randint(x, y), "n")

    def zip(self):
        return self._chars(4, "n") + "11111"                       # clause 4.3.2.7

    def data_original(self, x, y):
        """a-string [x..y]; for 10% of the rows 'ORIGINAL' at a random position (4.3.3.1)."""
        s = self.astring(x, y)
        if self.randint(1, 10) == 1:
            p = self.randint(0, len(s) - 8)
            s = s[:p] + "ORIGINAL" + s[p + 8:]
        return s

    def nurand(self, a, x, y, c):
        return (((self.randint(0, a) | self.randint(x, y)) + c) % (y - x + 1)) + x

    def other(self, lo, hi, exclude):
        """A uniform value in [lo..hi] other than exclude (hi > lo)."""
        v = self.randint(lo, hi - 1)
        return v + 1 if v >= exclude else v

    def money(self, lo_cents, hi_cents):
        return Decimal(self.randint(lo_cents, hi_cents)).scaleb(-2)


def last_name(num):
    """C_LAST from a number in [0..999] (clause 4.3.2.3)."""
    return SYLLABLES[num // 100] + SYLLABLES[(num // 10) % 10] + SYLLABLES[num % 10]


def cents(v):
    return "%d.%02d" % divmod(v, 100)


def frac4(v):
    return "0.%04d" % v


def choose_c_run(rng, c_load):
    """C_RUN for C_LAST with the delta rules of clause 2.1.6.1."""
    while True:
        c = rng.randint(0, 255)
        delta = abs(c - c_load)
        if 65 <= delta <= 119 and delta not in (96, 112):
            return c


# ---------------------------------------------------------------------------
# Connections


def connect(args, autocommit=False):
    conn = psycopg.connect(args.dsn, autocommit=autocommit)
    return conn


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


# ---------------------------------------------------------------------------
# load


class CopyBatch:
    """Rows for one table, sent with COPY ... FROM STDIN every `batch_rows` rows."""

    def __init__(self, conn, table, columns, batch_rows, stats):
        self.conn = conn
        self.sql = "COPY %s (%s) FROM STDIN" % (table, ", ".join(columns))
        self.table = table
        self.batch_rows = batch_rows
        self.rows = []
        self.stats = stats

    def add(self, fields):
        # COPY text format; generated values never hold tabs, newlines or backslashes.
        self.rows.append("\t".join(fields))
        if len(self.rows) >= self.batch_rows:
            self.flush()

    def flush(self):
        if not self.rows:
            return
        data = "\n".join(self.rows) + "\n"
        n = len(self.rows)
        self.rows = []
        with self.conn.cursor() as cur:
            with cur.copy(self.sql) as copy:
                step = 1 << 20
                for i in range(0, len(data), step):
                    copy.write(data[i:i + step])
        self.conn.commit()
        self.stats[self.table] = self.stats.get(self.table, 0) + n


NULL = "\\N"


def load_items(conn, rnd, n_items, batch_rows, stats):
    b = CopyBatch(conn, "item", ["i_id", "i_im_id", "i_name", "i_price", "i_data"],
                  batch_rows, stats)
    for i in range(1, n_items + 1):
        b.add((str(i), str(rnd.randint(1, 10000)), rnd.astring(14, 24),
               cents(rnd.randint(100, 10000)), rnd.data_original(26, 50)))
    b.flush()


def load_warehouse(conn, rnd, w, n_items, batch_rows, now, stats):
    ri = rnd.randint
    b = CopyBatch(conn, "warehouse",
                  ["w_id", "w_name", "w_street_1", "w_street_2", "w_city", "w_state", "w_zip",
                   "w_tax", "w_ytd"], batch_rows, stats)
    b.add((str(w), rnd.astring(6, 10), rnd.astring(10, 20), rnd.astring(10, 20),
           rnd.astring(10, 20), rnd._chars(2, "a"), rnd.zip(), frac4(ri(0, 2000)), "300000.00"))
    b.flush()

    b = CopyBatch(conn, "stock",
                  ["s_i_id", "s_w_id", "s_quantity"] + ["s_dist_%02d" % d for d in range(1, 11)]
                  + ["s_ytd", "s_order_cnt", "s_remote_cnt", "s_data"], batch_rows, stats)
    ws = str(w)
    for i in range(1, n_items + 1):
        f = [str(i), ws, str(ri(10, 100))]
        f.extend(rnd._chars(24, "a") for _ in range(10))
        f.extend(("0", "0", "0", rnd.data_original(26, 50)))
        b.add(f)
    b.flush()

    b = CopyBatch(conn, "district",
                  ["d_id", "d_w_id", "d_name", "d_street_1", "d_street_2", "d_city", "d_state",
                   "d_zip", "d_tax", "d_ytd", "d_next_o_id"], batch_rows, stats)
    for d in range(1, DIST_PER_WARE + 1):
        b.add((str(d), ws, rnd.astring(6, 10), rnd.astring(10, 20), rnd.astring(10, 20),
               rnd.astring(10, 20), rnd._chars(2, "a"), rnd.zip(), frac4(ri(0, 2000)),
               "30000.00", str(ORD_PER_DIST + 1)))
    b.flush()

    cust = CopyBatch(conn, "customer",
                     ["c_id", "c_d_id", "c_w_id", "c_first", "c_middle", "c_last", "c_street_1",
                      "c_street_2", "c_city", "c_state", "c_zip", "c_phone", "c_since",
                      "c_credit", "c_credit_lim", "c_discount", "c_balance", "c_ytd_payment",
                      "c_payment_cnt", "c_delivery_cnt", "c_data"], batch_rows, stats)
    hist = CopyBatch(conn, "history",
                     ["h_c_id", "h_c_d_id", "h_c_w_id", "h_d_id", "h_w_id", "h_date",
                      "h_amount", "h_data"], batch_rows, stats)
    for d in range(1, DIST_PER_WARE + 1):
        ds = str(d)
        for c in range(1, CUST_PER_DIST + 1):
            # The first 1,000 customers take the last names 0..999 in order, the other
            # 2,000 NURand(255, 0, 999) with C_LOAD (clause 4.3.3.1).
            num = c - 1 if c <= 1000 else rnd.nurand(255, 0, 999, C_LOAD_C_LAST)
            cs = str(c)
            cust.add((cs, ds, ws, rnd.astring(8, 16), "OE", last_name(num),
                      rnd.astring(10, 20), rnd.astring(10, 20), rnd.astring(10, 20),
                      rnd._chars(2, "a"), rnd.zip(), rnd._chars(16, "n"), now,
                      "BC" if ri(1, 10) == 1 else "GC", "50000.00", frac4(ri(0, 5000)),
                      "-10.00", "10.00", "1", "0", rnd.astring(300, 500)))
            hist.add((cs, ds, ws, ds, ws, now, "10.00", rnd.astring(12, 24)))
    cust.flush()
    hist.flush()

    orders = CopyBatch(conn, "orders",
                       ["o_id", "o_d_id", "o_w_id", "o_c_id", "o_entry_d", "o_carrier_id",
                        "o_ol_cnt", "o_all_local"], batch_rows, stats)
    lines = CopyBatch(conn, "order_line",
                      ["ol_o_id", "ol_d_id", "ol_w_id", "ol_number", "ol_i_id",
                       "ol_supply_w_id", "ol_delivery_d", "ol_quantity", "ol_amount",
                       "ol_dist_info"], batch_rows, stats)
    new_orders = CopyBatch(conn, "new_order", ["no_o_id", "no_d_id", "no_w_id"],
                           batch_rows, stats)
    for d in range(1, DIST_PER_WARE + 1):
        ds = str(d)
        perm = list(range(1, CUST_PER_DIST + 1))
        rnd.rng.shuffle(perm)                 # O_C_ID: a random permutation of [1..3,000]
        for o in range(1, ORD_PER_DIST + 1):
            os_ = str(o)
            delivered = o < FIRST_UNDELIVERED_O_ID
            ol_cnt = ri(5, 15)
            orders.add((os_, ds, ws, str(perm[o - 1]), now,
                        str(ri(1, 10)) if delivered else NULL, str(ol_cnt), "1"))
            for n in range(1, ol_cnt + 1):
                lines.add((os_, ds, ws, str(n), str(ri(1, n_items)), ws,
                           now if delivered else NULL, "5",
                           "0.00" if delivered else cents(ri(1, 999999)),
                           rnd._chars(24, "a")))
            if not delivered:
                new_orders.add((os_, ds, ws))
    orders.flush()
    lines.flush()
    new_orders.flush()


def load_worker(args, warehouses, seed, now):
    rnd = Rand(seed)
    conn = connect(args)
    stats = {}
    for w in warehouses:
        t0 = time.time()
        load_warehouse(conn, rnd, w, args.scale_items, args.batch_rows, now, stats)
        log("warehouse %d loaded in %.1f s" % (w, time.time() - t0))
    conn.close()
    return stats


def _load_worker_proc(args, warehouses, seed, now, queue):
    try:
        queue.put(("ok", load_worker(args, warehouses, seed, now)))
    except Exception as e:  # reported by the parent
        queue.put(("error", "%s: %s" % (type(e).__name__, e)))


def run_ddl(conn, statements, what):
    for sql in statements:
        try:
            conn.execute(sql)
            conn.commit()
        except psycopg.Error as e:
            conn.rollback()
            raise SystemExit("%s failed: %s\n  SQLSTATE %s: %s" % (
                what, " ".join(sql.split()), e.sqlstate, str(e).strip()))


def cmd_load(args):
    t_start = time.time()
    conn = connect(args)
    log("dropping and creating tables")
    run_ddl(conn, ["DROP TABLE IF EXISTS %s CASCADE" % t for t in TABLES], "drop")
    run_ddl(conn, SCHEMA, "create table")
    if args.index_first:
        run_ddl(conn, INDEXES, "create index")

    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    stats = {}
    t0 = time.time()
    load_items(conn, Rand(seed), args.scale_items, args.batch_rows, stats)
    log("item: %d rows in %.1f s" % (args.scale_items, time.time() - t0))

    ws = list(range(1, args.warehouses + 1))
    workers = max(1, min(args.load_workers, len(ws)))
    if workers == 1:
        for k, v in load_worker(args, ws, seed + 1, now).items():
            stats[k] = stats.get(k, 0) + v
    else:
        import multiprocessing as mp
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        procs = [ctx.Process(target=_load_worker_proc,
                             args=(args, ws[i::workers], seed + 1 + i, now, queue))
                 for i in range(workers)]
        for p in procs:
            p.start()
        failed = []
        for _ in procs:
            status, payload = queue.get()
            if status == "ok":
                for k, v in payload.items():
                    stats[k] = stats.get(k, 0) + v
            else:
                failed.append(payload)
        for p in procs:
            p.join()
        if failed:
            raise SystemExit("load failed: " + "; ".join(failed))

    if not args.index_first:
        t0 = time.time()
        run_ddl(conn, INDEXES, "create index")
        log("secondary indexes built in %.1f s" % (time.time() - t0))
    if args.foreign_keys:
        t0 = time.time()
        run_ddl(conn, FOREIGN_KEYS, "add foreign key")
        log("foreign keys added in %.1f s" % (time.time() - t0))
    if not args.no_analyze:
        try:
            conn.execute("ANALYZE")
            conn.commit()
        except psycopg.Error as e:
            conn.rollback()
            log("ANALYZE failed (ignored): SQLSTATE %s: %s" % (e.sqlstate, str(e).strip()))
    conn.close()
    log("loaded %d warehouse(s) in %.1f s: %s" % (
        args.warehouses, time.time() - t_start,
        ", ".join("%s %d" % (t, stats.get(t, 0)) for t in TABLES)))


# ---------------------------------------------------------------------------
# procedures


def sql_statements(text):
    """The statements of a SQL file, split at the semicolons outside $$-quoted bodies.
    Comments outside the bodies are dropped (they may hold semicolons)."""
    statements, current = [], ""
    for k, part in enumerate(text.split("$$")):
        if k % 2:
            current += "$$" + part + "$$"
            continue
        pieces = re.sub(r"--[^\n]*", "", part).split(";")
        for piece in pieces[:-1]:
            statements.append(current + piece)
            current = ""
        current += pieces[-1]
    statements.append(current)
    return [st.strip() for st in statements if st.strip()]


def cmd_procedures(args):
    with open(PROCEDURES_SQL) as f:
        statements = sql_statements(f.read())
    conn = connect(args)
    for sql in statements:
        try:
            conn.execute(sql)
            conn.commit()
        except psycopg.Error as e:
            raise SystemExit("%s failed\n  SQLSTATE %s: %s" % (
                sql.split("(")[0], e.sqlstate, str(e).strip()))
    conn.close()
    log("created %d function(s) from %s" % (len(statements), PROCEDURES_SQL))


# ---------------------------------------------------------------------------
# run: the five transactions


class UserRollback(Exception):
    """New-Order with an unused item number (clause 2.4.2.3): rolled back on purpose."""


class Terminal:
    """One connection, one thread: the emulated terminal of clause 2.2 with no keying or
    think times. Its home warehouse (and its Stock-Level district) stay fixed (2.4.1.1,
    2.8.1.1)."""

    def __init__(self, args, tid, w_id, sl_d_id, c_run, c_id_c, ol_i_id_c, seed):
        self.args = args
        self.tid = tid
        self.w_id = w_id
        self.sl_d_id = sl_d_id
        self.c_run = c_run
        self.c_id_c = c_id_c
        self.ol_i_id_c = ol_i_id_c
        self.rnd = Rand(seed)
        self.n_items = args.scale_items
        self.n_ware = args.warehouses
        self.conn = None
        self.cur = None
        self.last_sql = None
        # statistics
        self.count = {t: 0 for t in TX_TYPES}
        self.latency = {t: [] for t in TX_TYPES}
        self.retries = {t: 0 for t in TX_TYPES}
        self.failures = {t: 0 for t in TX_TYPES}
        self.errors = {}            # (type, sqlstate, message, sql) -> count
        self.rolled_back = 0        # New-Orders rolled back on purpose (1%)
        self.remote_lines = 0
        self.total_lines = 0
        self.by_name = {"payment": 0, "order_status": 0}
        self.remote_payments = 0
        self.delivery_skipped = 0   # districts with no undelivered order
        self.progress = 0           # New-Orders done so far (all time, for the monitor)
        self.deck = []
        self.screen = None

    # -- plumbing --

    def open(self):
        # A function call is a transaction by itself: procedures run in autocommit.
        self.conn = connect(self.args, autocommit=self.args.procedures)
        if self.args.prepare == "always":
            self.conn.prepare_threshold = 0
        elif self.args.prepare == "never":
            self.conn.prepare_threshold = None
        if self.args.isolation and self.args.procedures:
            # psycopg's isolation_level applies to the BEGIN it sends, and autocommit sends
            # none: the session's default takes its place.
            self.conn.execute("SET default_transaction_isolation = '%s'"
                              % self.args.isolation.replace("-", " "))
        elif self.args.isolation:
            self.conn.isolation_level = {
                "read-committed": psycopg.IsolationLevel.READ_COMMITTED,
                "repeatable-read": psycopg.IsolationLevel.REPEATABLE_READ,
                "serializable": psycopg.IsolationLevel.SERIALIZABLE,
            }[self.args.isolation]
        self.cur = self.conn.cursor()

    def close(self):
        try:
            if self.conn is not None:
                self.conn.close()
        except Exception:
            pass

    def q(self, sql, params):
        self.last_sql = sql
        self.cur.execute(sql, params)
        return self.cur

    def where(self, error):
        """The statement an error came from: the last one sent and, for an error raised in a
        function, the last line of the error's context, which names the function called (and,
        on PostgreSQL, the line of its body)."""
        context = error.diag.context
        if context:
            return "%s (%s)" % (self.last_sql, context.strip().splitlines()[-1])
        return self.last_sql

    def next_type(self):
        # A shuffled deck of 100 cards with the exact mix (clause 5.2.4.2 allows a deck).
        if not self.deck:
            self.deck = [t for t in TX_TYPES for _ in range(MIX[t])]
            self.rnd.rng.shuffle(self.deck)
        return self.deck.pop()

    # -- input generation (done once; a retry reuses the same input) --

    def gen_new_order(self):
        r = self.rnd
        ol_cnt = r.randint(5, 15)
        rbk = r.randint(1, 100) == 1
        items = []
        for i in range(ol_cnt):
            i_id = r.nurand(8191, 1, self.n_items, self.ol_i_id_c)
            if rbk and i == ol_cnt - 1:
                i_id = self.n_items + 1          # unused item number (2.4.1.5)
            supply = self.w_id
            if self.n_ware > 1 and r.randint(1, 100) == 1:
                supply = r.other(1, self.n_ware, self.w_id)
            items.append((i_id, supply, r.randint(1, 10)))
        # Lock stock rows in one global order (item, then warehouse), as BenchmarkSQL
        # does, to avoid deadlocks between New-Orders; the unused item stays last.
        items.sort()
        return dict(d_id=r.randint(1, DIST_PER_WARE),
                    c_id=r.nurand(1023, 1, CUST_PER_DIST, self.c_id_c), items=items)

    def gen_customer(self, d_id, w_id):
        r = self.rnd
        if r.randint(1, 100) <= 60:
            return dict(c_d_id=d_id, c_w_id=w_id, c_id=None,
                        c_last=last_name(r.nurand(255, 0, 999, self.c_run)))
        return dict(c_d_id=d_id, c_w_id=w_id, c_last=None,
                    c_id=r.nurand(1023, 1, CUST_PER_DIST, self.c_id_c))

    def gen_payment(self):
        r = self.rnd
        d_id = r.randint(1, DIST_PER_WARE)
        if self.n_ware == 1 or r.randint(1, 100) <= 85:
            cust = self.gen_customer(d_id, self.w_id)
        else:
            cust = self.gen_customer(r.randint(1, DIST_PER_WARE),
                                     r.other(1, self.n_ware, self.w_id))
        return dict(d_id=d_id, h_amount=r.money(100, 500000), **cust)

    def gen_order_status(self):
        return self.gen_customer(self.rnd.randint(1, DIST_PER_WARE), self.w_id)

    def gen_delivery(self):
        return dict(o_carrier_id=self.rnd.randint(1, 10))

    def gen_stock_level(self):
        return dict(threshold=self.rnd.randint(10, 20))

    # -- transactions (clause 2.4.2, 2.5.2, 2.6.2, 2.7.4, 2.8.2) --

    def tx_new_order(self, d_id, c_id, items):
        w_id = self.w_id
        q = self.q
        w_tax = q("SELECT w_tax FROM warehouse WHERE w_id = %s", (w_id,)).fetchone()[0]
        d_tax, o_id = q("SELECT d_tax, d_next_o_id FROM district "
                        "WHERE d_w_id = %s AND d_id = %s FOR UPDATE", (w_id, d_id)).fetchone()
        q("UPDATE district SET d_next_o_id = d_next_o_id + 1 "
          "WHERE d_w_id = %s AND d_id = %s", (w_id, d_id))
        c_discount, c_last, c_credit = q(
            "SELECT c_discount, c_last, c_credit FROM customer "
            "WHERE c_w_id = %s AND c_d_id = %s AND c_id = %s", (w_id, d_id, c_id)).fetchone()
        all_local = 1 if all(s == w_id for _, s, _ in items) else 0
        entry_d = datetime.datetime.now()
        q("INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, "
          "o_ol_cnt, o_all_local) VALUES (%s, %s, %s, %s, %s, NULL, %s, %s)",
          (o_id, d_id, w_id, c_id, entry_d, len(items), all_local))
        q("INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (%s, %s, %s)",
          (o_id, d_id, w_id))
        dist_col = "s_dist_%02d" % d_id
        total = Decimal(0)
        brand_generic = []
        for number, (i_id, supply_w_id, quantity) in enumerate(items, 1):
            row = q("SELECT i_price, i_name, i_data FROM item WHERE i_id = %s",
                    (i_id,)).fetchone()
            if row is None:
                raise UserRollback()
            i_price, i_name, i_data = row
            s_quantity, s_data, s_dist = q(
                "SELECT s_quantity, s_data, %s FROM stock "
                "WHERE s_w_id = %%s AND s_i_id = %%s FOR UPDATE" % dist_col,
                (supply_w_id, i_id)).fetchone()
            if s_quantity >= quantity + 10:
                s_quantity -= quantity
            else:
                s_quantity = s_quantity - quantity + 91
            remote = 0 if supply_w_id == w_id else 1
            q("UPDATE stock SET s_quantity = %s, s_ytd = s_ytd + %s, "
              "s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + %s "
              "WHERE s_w_id = %s AND s_i_id = %s",
              (s_quantity, quantity, remote, supply_w_id, i_id))
            amount = i_price * quantity
            total += amount
            # brand/generic (2.4.2.2): shown on the terminal only
            brand_generic.append("B" if "ORIGINAL" in i_data and "ORIGINAL" in s_data
                                 else "G")
            q("INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, "
              "ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) "
              "VALUES (%s, %s, %s, %s, %s, %s, NULL, %s, %s, %s)",
              (o_id, d_id, w_id, number, i_id, supply_w_id, quantity, amount, s_dist))
        self.conn.commit()
        # What the terminal would display (2.4.3.3); computed, not shown.
        self.screen = (o_id, c_last, c_credit, total * (1 - c_discount) * (1 + w_tax + d_tax),
                       brand_generic)
        self.total_lines += len(items)
        self.remote_lines += sum(1 for _, s, _ in items if s != w_id)

    def find_customer_by_name(self, w_id, d_id, c_last):
        rows = self.q("SELECT c_id FROM customer WHERE c_w_id = %s AND c_d_id = %s "
                      "AND c_last = %s ORDER BY c_first", (w_id, d_id, c_last)).fetchall()
        if not rows:
            raise RuntimeError("no customer with c_last %s in (%d, %d)" % (c_last, w_id, d_id))
        return rows[(len(rows) - 1) // 2][0]     # position ceil(n/2), 1-based (2.5.2.2)

    def tx_payment(self, d_id, c_d_id, c_w_id, c_id, c_last, h_amount):
        w_id = self.w_id
        q = self.q
        q("UPDATE warehouse SET w_ytd = w_ytd + %s WHERE w_id = %s", (h_amount, w_id))
        w_name, = q("SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip "
                    "FROM warehouse WHERE w_id = %s", (w_id,)).fetchone()[:1]
        q("UPDATE district SET d_ytd = d_ytd + %s WHERE d_w_id = %s AND d_id = %s",
          (h_amount, w_id, d_id))
        d_name, = q("SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip "
                    "FROM district WHERE d_w_id = %s AND d_id = %s",
                    (w_id, d_id)).fetchone()[:1]
        if c_id is None:
            c_id = self.find_customer_by_name(c_w_id, c_d_id, c_last)
        row = q("SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, "
                "c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance "
                "FROM customer WHERE c_w_id = %s AND c_d_id = %s AND c_id = %s FOR UPDATE",
                (c_w_id, c_d_id, c_id)).fetchone()
        c_credit = row[10]
        if c_credit == "BC":
            c_data, = q("SELECT c_data FROM customer "
                        "WHERE c_w_id = %s AND c_d_id = %s AND c_id = %s",
                        (c_w_id, c_d_id, c_id)).fetchone()
            # 2.5.2.2: the six values go in at the left, what falls off the right goes
            c_data = ("%d %d %d %d %d %s " % (c_id, c_d_id, c_w_id, d_id, w_id, h_amount)
                      + c_data)[:500]
            q("UPDATE customer SET c_balance = c_balance - %s, "
              "c_ytd_payment = c_ytd_payment + %s, c_payment_cnt = c_payment_cnt + 1, "
              "c_data = %s WHERE c_w_id = %s AND c_d_id = %s AND c_id = %s",
              (h_amount, h_amount, c_data, c_w_id, c_d_id, c_id))
        else:
            q("UPDATE customer SET c_balance = c_balance - %s, "
              "c_ytd_payment = c_ytd_payment + %s, c_payment_cnt = c_payment_cnt + 1 "
              "WHERE c_w_id = %s AND c_d_id = %s AND c_id = %s",
              (h_amount, h_amount, c_w_id, c_d_id, c_id))
        h_data = w_name + "    " + d_name
        q("INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, "
          "h_amount, h_data) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
          (c_id, c_d_id, c_w_id, d_id, w_id, datetime.datetime.now(), h_amount, h_data))
        self.conn.commit()

    def tx_order_status(self, c_d_id, c_w_id, c_id, c_last):
        q = self.q
        if c_id is None:
            rows = q("SELECT c_id, c_balance, c_first, c_middle FROM customer "
                     "WHERE c_w_id = %s AND c_d_id = %s AND c_last = %s ORDER BY c_first",
                     (c_w_id, c_d_id, c_last)).fetchall()
            if not rows:
                raise RuntimeError("no customer with c_last %s" % c_last)
            c_id = rows[(len(rows) - 1) // 2][0]
        else:
            q("SELECT c_balance, c_first, c_middle, c_last FROM customer "
              "WHERE c_w_id = %s AND c_d_id = %s AND c_id = %s",
              (c_w_id, c_d_id, c_id)).fetchone()
        row = q("SELECT o_id, o_entry_d, o_carrier_id FROM orders "
                "WHERE o_w_id = %s AND o_d_id = %s AND o_c_id = %s "
                "ORDER BY o_id DESC LIMIT 1", (c_w_id, c_d_id, c_id)).fetchone()
        if row is not None:
            q("SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d "
              "FROM order_line WHERE ol_w_id = %s AND ol_d_id = %s AND ol_o_id = %s",
              (c_w_id, c_d_id, row[0])).fetchall()
        self.conn.commit()

    def tx_delivery(self, o_carrier_id):
        w_id = self.w_id
        q = self.q
        delivery_d = datetime.datetime.now()
        skipped = 0
        for d_id in range(1, DIST_PER_WARE + 1):
            row = q("SELECT no_o_id FROM new_order WHERE no_w_id = %s AND no_d_id = %s "
                    "ORDER BY no_o_id LIMIT 1 FOR UPDATE", (w_id, d_id)).fetchone()
            if row is None:
                skipped += 1                     # 2.7.4.2: no outstanding order
                continue
            o_id = row[0]
            q("DELETE FROM new_order WHERE no_w_id = %s AND no_d_id = %s AND no_o_id = %s",
              (w_id, d_id, o_id))
            if self.cur.rowcount != 1:
                raise RuntimeError("Delivery: DELETE of new_order (%d, %d, %d) removed %d rows"
                                   % (w_id, d_id, o_id, self.cur.rowcount))
            c_id, = q("SELECT o_c_id FROM orders "
                      "WHERE o_w_id = %s AND o_d_id = %s AND o_id = %s",
                      (w_id, d_id, o_id)).fetchone()
            q("UPDATE orders SET o_carrier_id = %s "
              "WHERE o_w_id = %s AND o_d_id = %s AND o_id = %s",
              (o_carrier_id, w_id, d_id, o_id))
            q("UPDATE order_line SET ol_delivery_d = %s "
              "WHERE ol_w_id = %s AND ol_d_id = %s AND ol_o_id = %s",
              (delivery_d, w_id, d_id, o_id))
            amount, = q("SELECT SUM(ol_amount) FROM order_line "
                        "WHERE ol_w_id = %s AND ol_d_id = %s AND ol_o_id = %s",
                        (w_id, d_id, o_id)).fetchone()
            q("UPDATE customer SET c_balance = c_balance + %s, "
              "c_delivery_cnt = c_delivery_cnt + 1 "
              "WHERE c_w_id = %s AND c_d_id = %s AND c_id = %s",
              (amount, w_id, d_id, c_id))
        self.conn.commit()
        self.delivery_skipped += skipped

    def tx_stock_level(self, threshold):
        w_id, d_id = self.w_id, self.sl_d_id
        q = self.q
        next_o_id, = q("SELECT d_next_o_id FROM district WHERE d_w_id = %s AND d_id = %s",
                       (w_id, d_id)).fetchone()
        q("SELECT COUNT(DISTINCT s_i_id) FROM order_line, stock "
          "WHERE ol_w_id = %s AND ol_d_id = %s AND ol_o_id < %s AND ol_o_id >= %s "
          "AND s_w_id = %s AND s_i_id = ol_i_id AND s_quantity < %s",
          (w_id, d_id, next_o_id, next_o_id - 20, w_id, threshold)).fetchone()
        self.conn.commit()

    # -- the same transactions as one call each of procedures.sql's functions (--procedures);
    #    the connection is in autocommit, so each call commits on its own --

    def call(self, sql, params):
        value = self.q(sql, params).fetchone()[0]
        if value is None:
            raise RuntimeError("the function returned NULL")
        return value

    def proc_new_order(self, d_id, c_id, items):
        try:
            total = self.call("SELECT tpcc_new_order(%s, %s, %s, %s, %s, %s)",
                              (self.w_id, d_id, c_id, [i for i, _, _ in items],
                               [s for _, s, _ in items], [n for _, _, n in items]))
        except psycopg.Error as e:
            if e.sqlstate == ITEM_NOT_VALID_SQLSTATE:
                raise UserRollback() from e
            raise
        self.screen = total
        self.total_lines += len(items)
        self.remote_lines += sum(1 for _, s, _ in items if s != self.w_id)

    def proc_payment(self, d_id, c_d_id, c_w_id, c_id, c_last, h_amount):
        self.call("SELECT tpcc_payment(%s, %s, %s, %s, %s, %s, %s)",
                  (self.w_id, d_id, c_w_id, c_d_id, c_id, c_last, h_amount))

    def proc_order_status(self, c_d_id, c_w_id, c_id, c_last):
        self.call("SELECT tpcc_order_status(%s, %s, %s, %s)", (c_w_id, c_d_id, c_id, c_last))

    def proc_delivery(self, o_carrier_id):
        self.delivery_skipped += self.call("SELECT tpcc_delivery(%s, %s)",
                                           (self.w_id, o_carrier_id))

    def proc_stock_level(self, threshold):
        self.call("SELECT tpcc_stock_level(%s, %s, %s)", (self.w_id, self.sl_d_id, threshold))

    # -- the loop --

    def run(self, t_measure, t_end, stop):
        gens = {"new_order": self.gen_new_order, "payment": self.gen_payment,
                "order_status": self.gen_order_status, "delivery": self.gen_delivery,
                "stock_level": self.gen_stock_level}
        if self.args.procedures:
            txs = {"new_order": self.proc_new_order, "payment": self.proc_payment,
                   "order_status": self.proc_order_status, "delivery": self.proc_delivery,
                   "stock_level": self.proc_stock_level}
        else:
            txs = {"new_order": self.tx_new_order, "payment": self.tx_payment,
                   "order_status": self.tx_order_status, "delivery": self.tx_delivery,
                   "stock_level": self.tx_stock_level}
        max_retries = self.args.max_retries
        while not stop.is_set() and time.monotonic() < t_end:
            ttype = self.next_type()
            inp = gens[ttype]()
            if ttype == "payment":
                remote = inp["c_w_id"] != self.w_id
            t0 = time.monotonic()
            retries = 0
            ok = True
            rolled_back = False
            while True:
                try:
                    txs[ttype](**inp)
                    break
                except UserRollback:
                    self.conn.rollback()
                    rolled_back = True
                    break
                except psycopg.Error as e:
                    state = getattr(e, "sqlstate", None)
                    broken = self.conn.closed or self.conn.broken
                    if not broken:
                        try:
                            self.conn.rollback()
                        except psycopg.Error:
                            broken = True
                    if state in RETRY_SQLSTATES and not broken and retries < max_retries \
                            and time.monotonic() < t_end + self.args.grace_s:
                        retries += 1
                        continue
                    ok = False
                    if state in RETRY_SQLSTATES:
                        msg = "gave up after %d retries: %s" % (retries, str(e).strip())
                    else:
                        msg = str(e).strip()
                    self.note_error(ttype, state, msg, self.where(e))
                    if broken:
                        self.reopen()
                    break
                except Exception as e:       # a driver-side check failed
                    ok = False
                    try:
                        self.conn.rollback()
                    except psycopg.Error:
                        self.reopen()
                    self.note_error(ttype, None, "%s: %s" % (type(e).__name__, e),
                                    self.last_sql)
                    break
            t1 = time.monotonic()
            if ttype == "new_order":
                self.progress += 1
            if t1 < t_measure or t1 > t_end:
                continue
            self.retries[ttype] += retries
            if not ok:
                self.failures[ttype] += 1
                continue
            self.count[ttype] += 1
            self.latency[ttype].append(t1 - t0)
            if rolled_back:
                self.rolled_back += 1
            if ttype == "payment":
                self.remote_payments += remote
            if ttype in self.by_name and inp["c_id"] is None:
                self.by_name[ttype] += 1

    def note_error(self, ttype, state, msg, sql):
        key = (ttype, state or "-", msg.splitlines()[0] if msg else "", sql or "")
        self.errors[key] = self.errors.get(key, 0) + 1
        if self.args.verbose:
            log("%s failed: SQLSTATE %s: %s\n    in: %s" % (ttype, state, msg, sql))

    def reopen(self):
        self.close()
        while True:
            try:
                self.open()
                return
            except psycopg.Error as e:
                log("terminal %d: reconnect failed: %s" % (self.tid, e))
                time.sleep(1)


def percentile(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    # nearest rank: the smallest value with at least p% of the values at or below it
    k = max(0, min(len(sorted_vals) - 1, math.ceil(p / 100.0 * len(sorted_vals)) - 1))
    return sorted_vals[k]


def cmd_run(args):
    for path in (args.report, args.plot):
        if path and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
    rng = random.Random(args.seed)
    c_run = choose_c_run(rng, C_LOAD_C_LAST)
    c_id_c = rng.randint(0, 1023)
    ol_i_id_c = rng.randint(0, 8191)

    # Sanity: the database holds what --warehouses and --scale-items say.
    conn = connect(args, autocommit=True)
    n_w = conn.execute("SELECT COUNT(*) FROM warehouse").fetchone()[0]
    n_i = conn.execute("SELECT MAX(i_id) FROM item").fetchone()[0]
    if n_w != args.warehouses:
        raise SystemExit("the database has %d warehouses, --warehouses is %d"
                         % (n_w, args.warehouses))
    if n_i != args.scale_items:
        raise SystemExit("the item table has %s items, --scale-items is %d (load used it)"
                         % (n_i, args.scale_items))
    if args.procedures:
        # Stock-Level only reads, so one call tells whether the functions are there.
        try:
            conn.execute("SELECT tpcc_stock_level(1, 1, 10)")
        except psycopg.Error as e:
            raise SystemExit("SELECT tpcc_stock_level(1, 1, 10) failed: SQLSTATE %s: %s\n"
                             "(`tpcc.py procedures` creates the functions)"
                             % (e.sqlstate, str(e).strip()))
    conn.close()

    terminals = []
    for i in range(args.connections):
        w_id = i % args.warehouses + 1
        sl_d_id = (i // args.warehouses) % DIST_PER_WARE + 1
        terminals.append(Terminal(args, i, w_id, sl_d_id, c_run, c_id_c, ol_i_id_c,
                                  rng.randrange(1 << 30)))
    for t in terminals:
        t.open()

    stop = threading.Event()
    t_start = time.monotonic()
    t_measure = t_start + args.warmup_s
    t_end = t_measure + args.duration_s
    threads = [threading.Thread(target=t.run, args=(t_measure, t_end, stop), daemon=True)
               for t in terminals]
    log("running %d connection(s) on %d warehouse(s)%s: %d s warm-up, %d s measured"
        % (args.connections, args.warehouses, ", stored procedures" if args.procedures else "",
           args.warmup_s, args.duration_s))
    for th in threads:
        th.start()
    last_n, last_t = 0, t_start
    try:
        while any(th.is_alive() for th in threads):
            time.sleep(0.2)
            now = time.monotonic()
            if args.progress_s and now - last_t >= args.progress_s:
                n = sum(t.progress for t in terminals)
                log("t=%4.0fs  New-Order %d/min" % (now - t_start,
                                                     (n - last_n) * 60.0 / (now - last_t)))
                last_n, last_t = n, now
    except KeyboardInterrupt:
        stop.set()
        log("interrupted; waiting for transactions in flight")
    for th in threads:
        th.join()
    elapsed = min(time.monotonic(), t_end) - t_measure
    for t in terminals:
        t.close()
    report(args, terminals, elapsed, c_run)


def report(args, terminals, elapsed, c_run):
    count = {t: sum(x.count[t] for x in terminals) for t in TX_TYPES}
    retries = {t: sum(x.retries[t] for x in terminals) for t in TX_TYPES}
    failures = {t: sum(x.failures[t] for x in terminals) for t in TX_TYPES}
    lat = {t: sorted(v for x in terminals for v in x.latency[t]) for t in TX_TYPES}
    errors = {}
    for x in terminals:
        for k, v in x.errors.items():
            errors[k] = errors.get(k, 0) + v
    rolled_back = sum(x.rolled_back for x in terminals)
    total = sum(count.values())
    tpmc = count["new_order"] * 60.0 / elapsed if elapsed > 0 else 0.0
    cores = os.cpu_count() or 1
    skipped = sum(x.delivery_skipped for x in terminals)
    lines = sum(x.total_lines for x in terminals)
    remote_lines = sum(x.remote_lines for x in terminals)

    rows = []
    for t in TX_TYPES:
        l = lat[t]
        share = 100.0 * count[t] / total if total else 0.0
        rows.append([TX_LABEL[t], str(count[t]), "%.1f" % share, str(failures[t]),
                     str(retries[t])] +
                    ["%.1f" % (1000 * percentile(l, p)) for p in (50, 90, 99)] +
                    ["%.1f" % (1000 * l[-1]) if l else "nan"])
    header = ["transaction", "completed", "mix %", "failed", "retries",
              "p50 ms", "p90 ms", "p99 ms", "max ms"]

    out = []
    out.append("tpmC: %.0f  (New-Order transactions per minute, %d rolled back on purpose "
               "and counted)" % (tpmc, rolled_back))
    out.append("tpmC per core: %.0f  (os.cpu_count() = %d)" % (tpmc / cores, cores))
    out.append("all transactions: %d in %.1f s (%.1f per second); failed: %d; retries: %d"
               % (total, elapsed, total / elapsed if elapsed > 0 else 0,
                  sum(failures.values()), sum(retries.values())))
    out.append("warehouses %d, connections %d, %s, prepare %s, isolation %s, items %d, "
               "C_RUN %d" % (args.warehouses, args.connections,
                             "stored procedures" if args.procedures else "interactive SQL",
                             args.prepare, args.isolation or "server default",
                             args.scale_items, c_run))
    if count["payment"]:
        by_name = sum(x.by_name["payment"] for x in terminals)
        remote = sum(x.remote_payments for x in terminals)
        out.append("Payment: %.1f%% by last name, %.1f%% remote" % (
            100.0 * by_name / count["payment"], 100.0 * remote / count["payment"]))
    if count["order_status"]:
        out.append("Order-Status: %.1f%% by last name" % (
            100.0 * sum(x.by_name["order_status"] for x in terminals) / count["order_status"]))
    if lines:
        out.append("New-Order: %.2f%% remote order lines, %.2f%% rolled back" % (
            100.0 * remote_lines / lines,
            100.0 * rolled_back / count["new_order"] if count["new_order"] else 0))
    if count["delivery"]:
        out.append("Delivery: %d district(s) skipped for want of a new order (%.2f%%)" % (
            skipped, 100.0 * skipped / (count["delivery"] * DIST_PER_WARE)))

    table = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    table += ["| " + " | ".join(r) + " |" for r in rows]

    print()
    for line in out:
        print(line)
    print()
    widths = [max(len(header[i]), max(len(r[i]) for r in rows)) for i in range(len(header))]
    print("  ".join(h.ljust(widths[i]) if i == 0 else h.rjust(widths[i])
                    for i, h in enumerate(header)))
    for r in rows:
        print("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                        for i, c in enumerate(r)))
    err_lines = []
    if errors:
        print()
        print("errors (type, SQLSTATE, count, message, statement):")
        for (ttype, state, msg, sql), n in sorted(errors.items(), key=lambda kv: -kv[1]):
            line = "%s  %s  x%d  %s\n    %s" % (TX_LABEL[ttype], state, n, msg, sql)
            print("  " + line)
            err_lines.append("- %s, SQLSTATE %s, %d time(s): %s  \n  `%s`" % (
                TX_LABEL[ttype], state, n, msg, sql))

    if args.report:
        md = ["# TPC-C run", "",
              "%s, `%s`" % (time.strftime("%Y-%m-%d %H:%M:%S"), " ".join(sys.argv)), ""]
        md += ["- " + line for line in out]
        md += [""] + table + [""]
        if err_lines:
            md += ["## Errors", ""] + err_lines + [""]
        with open(args.report, "w") as f:
            f.write("\n".join(md))
        log("wrote %s" % args.report)
        plot = args.plot or os.path.splitext(args.report)[0] + ".png"
    else:
        plot = args.plot
    if plot:
        write_plot(plot, lat)


def write_plot(path, lat):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no plot")
        return
    labels = ["p50", "p90", "p99", "max"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.18
    for k, name in enumerate(labels):
        vals = []
        for t in TX_TYPES:
            l = lat[t]
            if not l:
                vals.append(0)
            elif name == "max":
                vals.append(1000 * l[-1])
            else:
                vals.append(1000 * percentile(l, int(name[1:])))
        ax.bar([i + (k - 1.5) * width for i in range(len(TX_TYPES))], vals, width, label=name)
    ax.set_xticks(range(len(TX_TYPES)))
    ax.set_xticklabels([TX_LABEL[t] for t in TX_TYPES])
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_yscale("log")
    ax.set_title("TPC-C latency percentiles")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    log("wrote %s" % path)


# ---------------------------------------------------------------------------
# check: consistency conditions (clause 3.3.2)

# Each query returns the rows that break the condition (at most 5 are shown).
CHECKS = [
    ("3.3.2.1", "W_YTD = sum(D_YTD) for each warehouse",
     """SELECT w.w_id, w.w_ytd, d.sum_d_ytd
        FROM warehouse w
        LEFT JOIN (SELECT d_w_id, SUM(d_ytd) AS sum_d_ytd FROM district GROUP BY d_w_id) d
          ON d.d_w_id = w.w_id
        WHERE d.sum_d_ytd IS NULL OR w.w_ytd <> d.sum_d_ytd
        ORDER BY w.w_id"""),
    ("3.3.2.2", "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) for each district",
     """SELECT d.d_w_id, d.d_id, d.d_next_o_id, o.max_o_id, n.max_no_o_id
        FROM district d
        LEFT JOIN (SELECT o_w_id, o_d_id, MAX(o_id) AS max_o_id
                   FROM orders GROUP BY o_w_id, o_d_id) o
          ON o.o_w_id = d.d_w_id AND o.o_d_id = d.d_id
        LEFT JOIN (SELECT no_w_id, no_d_id, MAX(no_o_id) AS max_no_o_id
                   FROM new_order GROUP BY no_w_id, no_d_id) n
          ON n.no_w_id = d.d_w_id AND n.no_d_id = d.d_id
        WHERE o.max_o_id IS NULL OR d.d_next_o_id - 1 <> o.max_o_id
           OR (n.max_no_o_id IS NOT NULL AND d.d_next_o_id - 1 <> n.max_no_o_id)
        ORDER BY d.d_w_id, d.d_id"""),
    ("3.3.2.3", "max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW-ORDER) for each district",
     """SELECT no_w_id, no_d_id, MAX(no_o_id) - MIN(no_o_id) + 1 AS span, COUNT(*) AS cnt
        FROM new_order
        GROUP BY no_w_id, no_d_id
        HAVING MAX(no_o_id) - MIN(no_o_id) + 1 <> COUNT(*)
        ORDER BY no_w_id, no_d_id"""),
    ("3.3.2.4", "sum(O_OL_CNT) = count(ORDER-LINE) for each district",
     """SELECT o.o_w_id, o.o_d_id, o.sum_ol_cnt, l.cnt
        FROM (SELECT o_w_id, o_d_id, SUM(o_ol_cnt) AS sum_ol_cnt
              FROM orders GROUP BY o_w_id, o_d_id) o
        LEFT JOIN (SELECT ol_w_id, ol_d_id, COUNT(*) AS cnt
                   FROM order_line GROUP BY ol_w_id, ol_d_id) l
          ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id
        WHERE l.cnt IS NULL OR o.sum_ol_cnt <> l.cnt
        ORDER BY o.o_w_id, o.o_d_id"""),
    ("3.3.2.5", "O_CARRIER_ID is null exactly for the orders with a NEW-ORDER row",
     """SELECT o.o_w_id, o.o_d_id, o.o_id, o.o_carrier_id, n.no_o_id
        FROM orders o
        LEFT JOIN new_order n
          ON n.no_w_id = o.o_w_id AND n.no_d_id = o.o_d_id AND n.no_o_id = o.o_id
        WHERE (o.o_carrier_id IS NULL AND n.no_o_id IS NULL)
           OR (o.o_carrier_id IS NOT NULL AND n.no_o_id IS NOT NULL)
        ORDER BY o.o_w_id, o.o_d_id, o.o_id"""),
    ("3.3.2.5", "every NEW-ORDER row has its ORDER row",
     """SELECT n.no_w_id, n.no_d_id, n.no_o_id
        FROM new_order n
        LEFT JOIN orders o
          ON o.o_w_id = n.no_w_id AND o.o_d_id = n.no_d_id AND o.o_id = n.no_o_id
        WHERE o.o_id IS NULL
        ORDER BY n.no_w_id, n.no_d_id, n.no_o_id"""),
    ("3.3.2.6", "O_OL_CNT = the number of ORDER-LINE rows of each order",
     """SELECT o.o_w_id, o.o_d_id, o.o_id, o.o_ol_cnt, l.cnt
        FROM orders o
        LEFT JOIN (SELECT ol_w_id, ol_d_id, ol_o_id, COUNT(*) AS cnt
                   FROM order_line GROUP BY ol_w_id, ol_d_id, ol_o_id) l
          ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id
        WHERE l.cnt IS NULL OR o.o_ol_cnt <> l.cnt
        ORDER BY o.o_w_id, o.o_d_id, o.o_id"""),
    ("3.3.2.7", "OL_DELIVERY_D is null exactly when the order's O_CARRIER_ID is null",
     """SELECT l.ol_w_id, l.ol_d_id, l.ol_o_id, l.ol_number, l.ol_delivery_d, o.o_carrier_id
        FROM order_line l
        JOIN orders o ON o.o_w_id = l.ol_w_id AND o.o_d_id = l.ol_d_id AND o.o_id = l.ol_o_id
        WHERE (l.ol_delivery_d IS NULL AND o.o_carrier_id IS NOT NULL)
           OR (l.ol_delivery_d IS NOT NULL AND o.o_carrier_id IS NULL)
        ORDER BY l.ol_w_id, l.ol_d_id, l.ol_o_id, l.ol_number"""),
    ("3.3.2.8", "W_YTD = sum(H_AMOUNT) for each warehouse",
     """SELECT w.w_id, w.w_ytd, h.sum_h_amount
        FROM warehouse w
        LEFT JOIN (SELECT h_w_id, SUM(h_amount) AS sum_h_amount
                   FROM history GROUP BY h_w_id) h
          ON h.h_w_id = w.w_id
        WHERE h.sum_h_amount IS NULL OR w.w_ytd <> h.sum_h_amount
        ORDER BY w.w_id"""),
    ("3.3.2.9", "D_YTD = sum(H_AMOUNT) for each district",
     """SELECT d.d_w_id, d.d_id, d.d_ytd, h.sum_h_amount
        FROM district d
        LEFT JOIN (SELECT h_w_id, h_d_id, SUM(h_amount) AS sum_h_amount
                   FROM history GROUP BY h_w_id, h_d_id) h
          ON h.h_w_id = d.d_w_id AND h.h_d_id = d.d_id
        WHERE h.sum_h_amount IS NULL OR d.d_ytd <> h.sum_h_amount
        ORDER BY d.d_w_id, d.d_id"""),
    ("3.3.2.10", "C_BALANCE = sum(OL_AMOUNT of delivered lines) - sum(H_AMOUNT) per customer",
     """SELECT c.c_w_id, c.c_d_id, c.c_id, c.c_balance, ol.delivered, h.paid
        FROM customer c
        LEFT JOIN (SELECT o.o_w_id, o.o_d_id, o.o_c_id, SUM(l.ol_amount) AS delivered
                   FROM orders o
                   JOIN order_line l
                     ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id
                   WHERE l.ol_delivery_d IS NOT NULL
                   GROUP BY o.o_w_id, o.o_d_id, o.o_c_id) ol
          ON ol.o_w_id = c.c_w_id AND ol.o_d_id = c.c_d_id AND ol.o_c_id = c.c_id
        LEFT JOIN (SELECT h_c_w_id, h_c_d_id, h_c_id, SUM(h_amount) AS paid
                   FROM history GROUP BY h_c_w_id, h_c_d_id, h_c_id) h
          ON h.h_c_w_id = c.c_w_id AND h.h_c_d_id = c.c_d_id AND h.h_c_id = c.c_id
        WHERE c.c_balance <> COALESCE(ol.delivered, 0) - COALESCE(h.paid, 0)
        ORDER BY c.c_w_id, c.c_d_id, c.c_id"""),
    ("3.3.2.11", "count(ORDER) - count(NEW-ORDER) = 2100 + sum(C_DELIVERY_CNT) per district "
     "(the 2,100 orders per district loaded as delivered left C_DELIVERY_CNT at 0)",
     """SELECT o.o_w_id, o.o_d_id, o.cnt AS orders, n.cnt AS new_orders, c.deliveries
        FROM (SELECT o_w_id, o_d_id, COUNT(*) AS cnt FROM orders GROUP BY o_w_id, o_d_id) o
        LEFT JOIN (SELECT no_w_id, no_d_id, COUNT(*) AS cnt
                   FROM new_order GROUP BY no_w_id, no_d_id) n
          ON n.no_w_id = o.o_w_id AND n.no_d_id = o.o_d_id
        LEFT JOIN (SELECT c_w_id, c_d_id, SUM(c_delivery_cnt) AS deliveries
                   FROM customer GROUP BY c_w_id, c_d_id) c
          ON c.c_w_id = o.o_w_id AND c.c_d_id = o.o_d_id
        WHERE c.deliveries IS NULL
           OR o.cnt - COALESCE(n.cnt, 0) <> 2100 + c.deliveries
        ORDER BY o.o_w_id, o.o_d_id"""),
    ("3.3.2.12", "C_BALANCE + C_YTD_PAYMENT = sum(OL_AMOUNT of delivered lines) per customer",
     """SELECT c.c_w_id, c.c_d_id, c.c_id, c.c_balance, c.c_ytd_payment, ol.delivered
        FROM customer c
        LEFT JOIN (SELECT o.o_w_id, o.o_d_id, o.o_c_id, SUM(l.ol_amount) AS delivered
                   FROM orders o
                   JOIN order_line l
                     ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id
                   WHERE l.ol_delivery_d IS NOT NULL
                   GROUP BY o.o_w_id, o.o_d_id, o.o_c_id) ol
          ON ol.o_w_id = c.c_w_id AND ol.o_d_id = c.c_d_id AND ol.o_c_id = c.c_id
        WHERE c.c_balance + c.c_ytd_payment <> COALESCE(ol.delivered, 0)
        ORDER BY c.c_w_id, c.c_d_id, c.c_id"""),
]


def cmd_check(args):
    conn = connect(args)
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ   # one snapshot for all
    conn.read_only = True
    w = args.warehouses
    failed = []

    def report_line(ok, clause, text, detail=""):
        print("%s  %-9s %s%s" % ("PASS" if ok else "FAIL", clause, text,
                                 ("\n      " + detail) if detail else ""), flush=True)
        if not ok:
            failed.append(clause)

    # Cardinalities of the fixed-size tables (clause 1.2, 4.3.3.1).
    expected = [("warehouse", w), ("district", w * DIST_PER_WARE),
                ("customer", w * DIST_PER_WARE * CUST_PER_DIST),
                ("item", args.scale_items), ("stock", w * args.scale_items)]
    for table, n in expected:
        try:
            got = conn.execute("SELECT COUNT(*) FROM %s" % table).fetchone()[0]
        except psycopg.Error as e:
            conn.rollback()
            report_line(False, "rows", "count(%s)" % table,
                        "SQLSTATE %s: %s" % (e.sqlstate, str(e).strip()))
            continue
        report_line(got == n, "rows", "count(%s) = %d" % (table, n),
                    "" if got == n else "found %d" % got)

    for clause, text, sql in CHECKS:
        t0 = time.time()
        try:
            cur = conn.execute(sql)
            bad = cur.fetchmany(6)
            cols = [c.name for c in cur.description]
        except psycopg.Error as e:
            conn.rollback()
            report_line(False, clause, text, "query failed: SQLSTATE %s: %s\n      %s" % (
                e.sqlstate, str(e).strip(), " ".join(sql.split())))
            continue
        dt = time.time() - t0
        if bad:
            detail = "violations (first %d): %s\n      %s" % (
                min(5, len(bad)), ", ".join(cols),
                "\n      ".join(str(tuple(r)) for r in bad[:5]))
            report_line(False, clause, text, detail)
        else:
            report_line(True, clause, "%s  (%.1f s)" % (text, dt))
    conn.rollback()
    conn.close()
    if failed:
        print("\nconsistency check FAILED: %s" % ", ".join(dict.fromkeys(failed)))
        sys.exit(1)
    print("\nall consistency checks passed")


# ---------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description="TPC-C driver (spec revision 5.11) for "
                                "PostgreSQL-protocol servers")
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(sp):
        sp.add_argument("--dsn", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres",
                        help="libpq connection string (default: %(default)s)")
        sp.add_argument("--warehouses", "-w", type=int, required=True)
        sp.add_argument("--scale-items", type=int, default=SPEC_ITEMS,
                        help="items (and stock rows per warehouse); smoke tests only: the "
                        "spec's %d is the default" % SPEC_ITEMS)

    sp = sub.add_parser("load", help="create and populate the tables")
    common(sp)
    sp.add_argument("--batch-rows", type=int, default=20000,
                    help="rows per COPY statement (each one its own transaction)")
    sp.add_argument("--load-workers", type=int, default=1,
                    help="processes loading warehouses in parallel")
    sp.add_argument("--index-first", action="store_true",
                    help="create the secondary indexes before loading rather than after")
    sp.add_argument("--foreign-keys", action="store_true",
                    help="add the foreign keys of clause 1.3 after loading")
    sp.add_argument("--no-analyze", action="store_true", help="skip ANALYZE after loading")
    sp.add_argument("--seed", type=int)

    sp = sub.add_parser("procedures", help="create (or replace) the five transactions as "
                        "PL/pgSQL functions, from procedures.sql")
    sp.add_argument("--dsn", default="host=127.0.0.1 port=5432 user=postgres dbname=postgres",
                    help="libpq connection string (default: %(default)s)")

    sp = sub.add_parser("run", help="run the transaction mix")
    common(sp)
    sp.add_argument("--connections", "-c", type=int, default=None,
                    help="connections = terminals = threads (default: 10 per warehouse)")
    sp.add_argument("--duration-s", type=float, default=60)
    sp.add_argument("--warmup-s", type=float, default=0,
                    help="seconds run before the measured interval (not counted)")
    sp.add_argument("--prepare", choices=["auto", "always", "never"], default="auto",
                    help="server-side prepared statements: auto = psycopg's default "
                    "(after 5 executions), always = from the first, never")
    sp.add_argument("--isolation", choices=["read-committed", "repeatable-read", "serializable"],
                    default=None, help="transaction isolation (default: the server's)")
    sp.add_argument("--max-retries", type=int, default=100,
                    help="retries of a transaction after 40001/40P01 before it counts as failed")
    sp.add_argument("--grace-s", type=float, default=10,
                    help="retries go on this long after the end of the run")
    sp.add_argument("--progress-s", type=float, default=10,
                    help="print the New-Order rate this often (0: never)")
    sp.add_argument("--report", help="write the results as a markdown table to this file "
                    "(and a PNG of latencies next to it if matplotlib is installed)")
    sp.add_argument("--plot", help="PNG file for the latency chart")
    sp.add_argument("--seed", type=int)
    sp.add_argument("--procedures", action="store_true",
                    help="run each transaction as one autocommit call of its PL/pgSQL "
                    "function (create them first with the procedures subcommand)")
    sp.add_argument("--verbose", "-v", action="store_true", help="log every failure")

    sp = sub.add_parser("check", help="verify the consistency conditions of clause 3.3.2")
    common(sp)

    args = p.parse_args()
    if args.cmd == "run" and args.connections is None:
        args.connections = DIST_PER_WARE * args.warehouses
    try:
        {"load": cmd_load, "procedures": cmd_procedures, "run": cmd_run,
         "check": cmd_check}[args.cmd](args)
    except psycopg.OperationalError as e:
        raise SystemExit("connection failed: %s" % e)


if __name__ == "__main__":
    main()
