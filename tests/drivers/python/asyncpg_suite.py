#!/usr/bin/env python3
"""What applications do with asyncpg, case by case (see tests/drivers/run.py for the output
protocol). asyncpg speaks only the extended protocol with binary formats, prepares (and caches)
every statement by name, and asks the server's Describe for parameter types instead of sending
its own; these cases lean on exactly that. Connects with the libpq environment variables; each
case uses its own connection and tables, so one failure does not spill into the next. The tls_
cases use the certificates run.py made for the run (SHOAL_TEST_SSLROOTCERT and the others of its
TestPki.env())."""

import asyncio
import datetime
import decimal
import io
import json
import os
import ssl
import uuid

import asyncpg
from asyncpg import exceptions as exc
from asyncpg import introspection

from suite import run_cases

CASES = []
# Seconds one case may take before it counts as hung (the next case still runs).
CASE_TIMEOUT_S = 60


def case(fn):
    CASES.append(fn)
    return fn


async def connect(**kw):
    # host, port, user and database come from PGHOST, PGPORT, PGUSER, PGDATABASE.
    return await asyncpg.connect(**kw)


def check(got, want, what=""):
    if got != want:
        raise AssertionError(f"{what} got {got!r}, want {want!r}")


@case
async def connect_and_server_settings():
    c = await connect()
    try:
        settings = c.get_settings()
        check(settings.server_encoding, "UTF8", "server_encoding")
        check(settings.client_encoding, "UTF8", "client_encoding")
        check(settings.integer_datetimes, "on", "integer_datetimes")
        version = c.get_server_version()
        if version.major < 10:
            raise AssertionError(f"server version {version}")
        check(await c.fetchval("SELECT 1"), 1)
        check(c.is_closed(), False)
    finally:
        await c.close()
    check(c.is_closed(), True)


# (case name, type, value): each must come back equal through a parameter whose type only the
# server's Describe gives (asyncpg sends and reads every one of them in binary), and find its row
# through WHERE v = $1. One case per type, so the known gaps name the types.
ROUND_TRIP = [
    ("smallint", "smallint", 32767),
    ("integer", "integer", -2147483648),
    ("bigint", "bigint", 9223372036854775807),
    ("real", "real", 1.5),
    ("double", "double precision", 2.718281828459045),
    ("numeric", "numeric", decimal.Decimal("12345678901234567890.123456789")),
    ("numeric_scaled", "numeric(10,2)", decimal.Decimal("-99.95")),
    ("text", "text", "héllo \u2603 'quoted' \\ back"),
    ("varchar", "varchar(20)", "short"),
    ("char", "char(3)", "ab "),
    ("boolean", "boolean", True),
    ("bytea", "bytea", b"\x00\x03\xff\\x"),
    ("date", "date", datetime.date(2024, 2, 29)),
    ("time", "time", datetime.time(13, 14, 15, 123456)),
    ("timestamp", "timestamp", datetime.datetime(2024, 1, 2, 3, 4, 5, 678901)),
    ("timestamptz", "timestamptz",
     datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)),
    ("interval", "interval", datetime.timedelta(days=3, seconds=3723, microseconds=5)),
    ("uuid", "uuid", uuid.UUID("12345678-1234-5678-1234-567812345678")),
    ("json", "json", '{"a": [1, 2, null], "b": "x"}'),
    ("jsonb", "jsonb", '{"a": [1, 2, null], "b": "x"}'),
    ("int_array", "integer[]", [1, None, 3]),
    ("text_array", "text[]", ["a", "b c", None, '"q"']),
]


def round_trip_case(name, sqltype, value):
    async def fn():
        c = await connect()
        try:
            t = f"rt_{name}"
            await c.execute(f"CREATE TABLE {t} (id serial PRIMARY KEY, v {sqltype}, "
                            "note text DEFAULT 'd')")
            # No cast on $1: its type is the one the server's Describe gives for the column.
            await c.execute(f"INSERT INTO {t} (v) VALUES ($1)", value)
            got = await c.fetchval(f"SELECT v FROM {t}")
            if sqltype == "jsonb":  # jsonb prints its own way
                check(json.loads(got), json.loads(value), "read back")
            else:
                check(got, value, "read back")
            if sqltype != "json":  # json has no equality operator
                check(await c.fetchval(f"SELECT count(*) FROM {t} WHERE v = $1", value), 1,
                      "WHERE v = $1")
        finally:
            await c.close()

    fn.__name__ = f"type_{name}"
    return case(fn)


for _name, _sqltype, _value in ROUND_TRIP:
    round_trip_case(_name, _sqltype, _value)


@case
async def numeric_nan_float_infinity_null():
    c = await connect()
    try:
        row = await c.fetchrow(
            "SELECT 'NaN'::numeric AS n, 'Infinity'::float8 AS f, NULL::int AS z, "
            "''::text AS e, '-0.0'::numeric AS nz")
        check(row["n"].is_nan(), True, "numeric NaN")
        check(row["f"], float("inf"), "float8 Infinity")
        check(row["z"], None, "NULL")
        check(row["e"], "", "empty text")
        check(row["nz"], decimal.Decimal("0.0"), "numeric -0.0")
        check(await c.fetchval("SELECT $1::numeric * 2", decimal.Decimal("1e-20")),
              decimal.Decimal("2E-20"), "tiny numeric")
    finally:
        await c.close()


@case
async def timestamp_infinity():
    c = await connect()
    try:
        row = await c.fetchrow("SELECT 'infinity'::timestamp AS p, '-infinity'::timestamp AS m, "
                               "'infinity'::timestamptz AS pz, 'infinity'::date AS d")
        # asyncpg reads PostgreSQL's binary infinities as the largest and smallest datetimes
        # (naive ones, for timestamptz too).
        check(row["p"], datetime.datetime.max, "timestamp infinity")
        check(row["m"], datetime.datetime.min, "timestamp -infinity")
        check(row["pz"], datetime.datetime.max, "timestamptz infinity")
        check(row["d"], datetime.date.max, "date infinity")
    finally:
        await c.close()


@case
async def uuid_and_array_parameters():
    """uuid and array parameters with no cast in the text: asyncpg encodes each one with the
    type the server's ParameterDescription names, so that answer must fit the expression."""
    c = await connect()
    try:
        await c.execute("CREATE TABLE ent (id uuid PRIMARY KEY, n bigint, label text, "
                        "at timestamptz)")
        ids = [uuid.UUID(int=i) for i in range(1, 4)]
        at = datetime.datetime(2024, 6, 1, 12, 0, tzinfo=datetime.timezone.utc)
        for n, i in enumerate(ids):
            await c.execute("INSERT INTO ent (id, n, label, at) VALUES ($1, $2, $3, $4)",
                            i, n, f"l{n}", at)
        stmt = await c.prepare("SELECT id FROM ent WHERE id = ANY($1) ORDER BY id")
        check([p.name for p in stmt.get_parameters()], ["uuid[]"], "ANY($1) parameter type")
        check([r["id"] for r in await stmt.fetch(ids[:2])], ids[:2], "id = ANY(uuid[])")
        check(await c.fetchval("SELECT count(*) FROM ent WHERE n = ANY($1)", [0, 2, 7]), 2,
              "n = ANY(int8[])")
        check(await c.fetchval("SELECT count(*) FROM ent WHERE label <> ALL($1)", ["l0"]), 2,
              "label <> ALL(text[])")
        check(await c.fetchval("SELECT label FROM ent WHERE id = $1", ids[2]), "l2",
              "label by uuid")
        check(await c.fetchval("SELECT count(*) FROM ent WHERE at = $1", at), 3,
              "timestamptz parameter")
        types = [p.name for p in (await c.prepare(
            "UPDATE ent SET n = $1, label = $2 WHERE id = $3 AND at < $4")).get_parameters()]
        check(types, ["int8", "text", "uuid", "timestamptz"], "UPDATE parameter types")
        check(await c.fetchval("SELECT $1::int[]", [1, 2]), [1, 2], "int[] result")
    finally:
        await c.close()


@case
async def array_column_parameters():
    c = await connect()
    try:
        await c.execute("CREATE TABLE arr (id int PRIMARY KEY, tags text[], nums int8[])")
        for n in range(3):
            await c.execute("INSERT INTO arr VALUES ($1, $2, $3)", n, [f"t{n}", "all"],
                            [n, n * 10])
        check(await c.fetchval("SELECT count(*) FROM arr WHERE tags @> $1", ["all"]), 3,
              "tags @> text[]")
        check(await c.fetchval("SELECT count(*) FROM arr WHERE $1 = ANY(nums)", 10), 1,
              "$1 = ANY(int8[] column)")
        check(tuple(await c.fetchrow("SELECT tags, nums FROM arr WHERE id = 2")),
              (["t2", "all"], [2, 20]), "arrays read back")
        types = [p.name for p in (await c.prepare(
            "UPDATE arr SET tags = $1, nums = $2 WHERE id = $3")).get_parameters()]
        check(types, ["text[]", "int8[]", "int4"], "UPDATE parameter types")
    finally:
        await c.close()


@case
async def json_parameters():
    c = await connect()
    try:
        await c.execute("CREATE TABLE jd (id int PRIMARY KEY, meta json, doc jsonb)")
        for n in range(3):
            await c.execute("INSERT INTO jd VALUES ($1, $2, $3)", n, json.dumps({"n": n}),
                            json.dumps({"n": n, "k": [n]}))
        check(await c.fetchval("SELECT doc->>'n' FROM jd WHERE id = $1", 2), "2", "doc->>'n'")
        check(json.loads(await c.fetchval("SELECT meta FROM jd WHERE id = $1", 1)), {"n": 1},
              "json column")
        check(await c.fetchval("SELECT count(*) FROM jd WHERE doc @> $1", '{"n": 2}'), 1,
              "doc @> jsonb")
        types = [p.name for p in (await c.prepare(
            "UPDATE jd SET meta = $1, doc = $2 WHERE id = $3")).get_parameters()]
        check(types, ["json", "jsonb", "int4"], "UPDATE parameter types")
    finally:
        await c.close()


@case
async def fetch_row_access_and_status():
    c = await connect()
    try:
        check(await c.execute("CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL, "
                              "qty int)"), "CREATE TABLE", "CREATE status")
        check(await c.execute("INSERT INTO items (name, qty) VALUES ('a', 1), ('b', 2), "
                              "('c', 3)"), "INSERT 0 3", "INSERT status")
        check(await c.execute("UPDATE items SET qty = qty + $1 WHERE id > $2", 10, 1),
              "UPDATE 2", "UPDATE status")
        row = await c.fetchrow("SELECT id, name, qty FROM items WHERE id = $1", 2)
        check((row["id"], row[1], row.get("qty"), list(row.keys())),
              (2, "b", 12, ["id", "name", "qty"]), "Record access")
        check(dict(row), {"id": 2, "name": "b", "qty": 12}, "dict(Record)")
        check(await c.fetchrow("SELECT * FROM items WHERE id = $1", 99), None, "no row")
        got = await c.fetch("DELETE FROM items WHERE qty > $1 RETURNING name", 5)
        check(sorted(r["name"] for r in got), ["b", "c"], "DELETE RETURNING")
        check(await c.fetchval("SELECT sum(qty) FROM items"), 1, "sum after delete")
        # Several statements with no arguments go as one simple Query message.
        await c.execute("INSERT INTO items (name) VALUES ('x'); INSERT INTO items (name) "
                        "VALUES ('y'); UPDATE items SET qty = 0 WHERE qty IS NULL")
        check(await c.fetchval("SELECT count(*) FROM items WHERE qty = 0"), 2, "script")
    finally:
        await c.close()


@case
async def prepared_statements():
    c = await connect()
    try:
        await c.execute("CREATE TABLE prep (id int PRIMARY KEY, v int, label text)")
        ins = await c.prepare("INSERT INTO prep VALUES ($1, $2, $3)")
        check([p.name for p in ins.get_parameters()], ["int4", "int4", "text"], "parameters")
        for i in range(20):
            await ins.fetch(i, i * i, f"l{i}")
        sel = await c.prepare("SELECT v, label FROM prep WHERE id = $1")
        check([(a.name, a.type.name) for a in sel.get_attributes()],
              [("v", "int4"), ("label", "text")], "attributes")
        check([await sel.fetchval(i) for i in range(20)], [i * i for i in range(20)], "fetchval")
        check(tuple(await sel.fetchrow(3)), (9, "l3"), "fetchrow")
        check(await sel.fetchval(4, column=1), "l4", "fetchval column=1")
        rng = await c.prepare("SELECT id FROM prep WHERE id BETWEEN $1 AND $2 ORDER BY id")
        check([r[0] for r in await rng.fetch(5, 8)], [5, 6, 7, 8], "fetch")
        # The same text prepared twice reuses asyncpg's statement cache.
        check(await c.fetchval("SELECT v FROM prep WHERE id = $1", 5), 25)
        check(await c.fetchval("SELECT v FROM prep WHERE id = $1", 6), 36)
    finally:
        await c.close()


@case
async def prepared_statement_explain():
    """PreparedStatement.explain(): EXPLAIN (FORMAT JSON, VERBOSE) of the statement, prepared
    with the same parameters, so its Describe must give EXPLAIN's one column."""
    c = await connect()
    try:
        await c.execute("CREATE TABLE ex (id int PRIMARY KEY, v int, label text)")
        sel = await c.prepare("SELECT v, label FROM ex WHERE id = $1")
        plan = await sel.explain(1)
        if not isinstance(plan, list) or "Plan" not in plan[0]:
            raise AssertionError(f"EXPLAIN (FORMAT JSON) gave {plan!r}")
        plan = await sel.explain(1, analyze=True)
        if "Actual Rows" not in json.dumps(plan):
            raise AssertionError(f"EXPLAIN ANALYZE gave {plan!r}")
    finally:
        await c.close()


@case
async def statement_cache_after_schema_change():
    """asyncpg caches every statement by name. When a column's type changes under a cached
    SELECT, PostgreSQL answers 'cached plan must not change result type' (0A000) and asyncpg
    prepares the statement again; any other answer reaches the application."""
    c = await connect()
    try:
        await c.execute("CREATE TABLE sc (id int PRIMARY KEY, n int)")
        await c.execute("INSERT INTO sc VALUES (1, 10)")
        check(await c.fetchval("SELECT n FROM sc WHERE id = $1", 1), 10)
        await c.execute("ALTER TABLE sc ALTER COLUMN n TYPE text")
        check(await c.fetchval("SELECT n FROM sc WHERE id = $1", 1), "10", "after ALTER")
        await c.execute("ALTER TABLE sc ADD COLUMN extra int DEFAULT 7")
        check(tuple(await c.fetchrow("SELECT * FROM sc WHERE id = $1", 1)), (1, "10", 7),
              "SELECT * after ADD COLUMN")
    finally:
        await c.close()


@case
async def executemany():
    c = await connect()
    try:
        await c.execute("CREATE TABLE many (id int PRIMARY KEY, v text, n numeric)")
        await c.executemany("INSERT INTO many VALUES ($1, $2, $3)",
                            [(i, str(i), decimal.Decimal(i) / 4) for i in range(500)])
        check(await c.fetchval("SELECT count(*) FROM many"), 500)
        check(await c.fetchval("SELECT sum(n) FROM many"), decimal.Decimal("31187.50"), "sum")
        await c.executemany("UPDATE many SET v = $2 WHERE id = $1",
                            [(i, "even") for i in range(0, 500, 2)])
        check(await c.fetchval("SELECT count(*) FROM many WHERE v = 'even'"), 250)
        # A failing row fails the whole batch.
        try:
            await c.executemany("INSERT INTO many VALUES ($1, $2, $3)",
                                [(1000, "a", 1), (1, "dup", 1)])
            raise AssertionError("duplicate key accepted")
        except exc.UniqueViolationError:
            pass
        # fetchmany: the same statement for each argument tuple, the rows of all of them.
        rows = await c.fetchmany("INSERT INTO many VALUES ($1, 'r', 0) RETURNING id",
                                 [(2000,), (2001,)])
        check([r["id"] for r in rows], [2000, 2001], "fetchmany RETURNING")
        async with c.transaction():
            await c.executemany("DELETE FROM many WHERE id = $1", [(i,) for i in range(100)])
        check(await c.fetchval("SELECT count(*) FROM many WHERE id < 100"), 0)
    finally:
        await c.close()


@case
async def transactions_and_savepoints():
    c = await connect()
    try:
        await c.execute("CREATE TABLE tx (id int PRIMARY KEY)")
        async with c.transaction():
            await c.execute("INSERT INTO tx VALUES (1)")
            check(c.is_in_transaction(), True, "is_in_transaction")
            try:
                async with c.transaction():  # a SAVEPOINT
                    await c.execute("INSERT INTO tx VALUES (2)")
                    await c.execute("INSERT INTO tx VALUES (1)")
            except exc.UniqueViolationError:
                pass
            await c.execute("INSERT INTO tx VALUES (3)")
        check([r[0] for r in await c.fetch("SELECT id FROM tx ORDER BY id")], [1, 3], "rows")
        try:
            async with c.transaction():
                await c.execute("INSERT INTO tx VALUES (4)")
                raise RuntimeError("application error")
        except RuntimeError:
            pass
        check(await c.fetchval("SELECT count(*) FROM tx WHERE id = 4"), 0, "rolled back")
        tr = c.transaction()
        await tr.start()
        await c.execute("INSERT INTO tx VALUES (5)")
        try:
            await c.execute("INSERT INTO tx VALUES (5)")
        except exc.UniqueViolationError:
            pass
        try:
            await c.execute("INSERT INTO tx VALUES (6)")
            raise AssertionError("statement accepted in an aborted transaction")
        except exc.InFailedSQLTransactionError:
            pass
        await tr.rollback()
        check(await c.fetchval("SELECT count(*) FROM tx"), 2, "after rollback")
    finally:
        await c.close()


@case
async def transaction_isolation_and_read_only():
    c = await connect()
    try:
        await c.execute("CREATE TABLE iso (id int PRIMARY KEY)")
        for isolation, shown in (("read_committed", "read committed"),
                                 ("repeatable_read", "repeatable read")):
            async with c.transaction(isolation=isolation):
                check(await c.fetchval("SHOW transaction_isolation"), shown, isolation)
        async with c.transaction(isolation="repeatable_read", readonly=True):
            check(await c.fetchval("SHOW transaction_read_only"), "on", "read only")
        try:
            async with c.transaction(readonly=True):
                await c.execute("INSERT INTO iso VALUES (1)")
            raise AssertionError("write accepted in a READ ONLY transaction")
        except exc.ReadOnlySQLTransactionError:
            pass
    finally:
        await c.close()


@case
async def transaction_serializable():
    c = await connect()
    try:
        async with c.transaction(isolation="serializable"):
            check(await c.fetchval("SHOW transaction_isolation"), "serializable")
        async with c.transaction(isolation="serializable", readonly=True, deferrable=True):
            check(await c.fetchval("SHOW transaction_deferrable"), "on", "deferrable")
    finally:
        await c.close()


@case
async def serializable_conflict_raises():
    setup = await connect()
    a = await connect()
    b = await connect()
    try:
        await setup.execute("CREATE TABLE oncall (name text PRIMARY KEY, on_duty bool)")
        await setup.execute("INSERT INTO oncall VALUES ('a', true), ('b', true)")
        ta = a.transaction(isolation="serializable")
        tb = b.transaction(isolation="serializable")
        await ta.start()
        await tb.start()
        check(await a.fetchval("SELECT count(*) FROM oncall WHERE on_duty"), 2)
        check(await b.fetchval("SELECT count(*) FROM oncall WHERE on_duty"), 2)
        await a.execute("UPDATE oncall SET on_duty = false WHERE name = 'a'")
        await b.execute("UPDATE oncall SET on_duty = false WHERE name = 'b'")
        await ta.commit()
        try:
            await tb.commit()
            raise AssertionError("write skew committed under SERIALIZABLE")
        except exc.SerializationError:
            pass
    finally:
        for c in (setup, a, b):
            await c.close()


@case
async def cursor_in_transaction():
    c = await connect()
    try:
        await c.execute("CREATE TABLE big AS SELECT g AS id FROM generate_series(1, 5000) g")
        async with c.transaction():
            # Iteration: a named portal, read prefetch rows per Execute.
            total, count = 0, 0
            async for row in c.cursor("SELECT id FROM big ORDER BY id", prefetch=500):
                total += row["id"]
                count += 1
            check((count, total), (5000, 5000 * 5001 // 2), "iterated cursor")
            # A cursor object: fetch and fetchrow, each one Execute on the portal.
            cur = await c.cursor("SELECT id FROM big WHERE id > $1 ORDER BY id", 100)
            check([r[0] for r in await cur.fetch(3)], [101, 102, 103], "fetch(3)")
            check((await cur.fetchrow())[0], 104, "fetchrow")
            check(len(await cur.fetch(10000)), 5000 - 104, "fetch to the end")
            check(await cur.fetchrow(), None, "exhausted")
            stmt = await c.prepare("SELECT id FROM big WHERE id % $1 = 0 ORDER BY id")
            check([r[0] async for r in stmt.cursor(1000)], [1000, 2000, 3000, 4000, 5000],
                  "prepared statement cursor")
        try:
            await c.cursor("SELECT 1")
            raise AssertionError("a cursor outside a transaction was allowed")
        except exc.NoActiveSQLTransactionError:
            pass
    finally:
        await c.close()


@case
async def cursor_forward():
    """Cursor.forward(n) skips rows with MOVE FORWARD n on the protocol-level portal, by name."""
    c = await connect()
    try:
        await c.execute("CREATE TABLE fw AS SELECT g AS id FROM generate_series(1, 100) g")
        async with c.transaction():
            cur = await c.cursor("SELECT id FROM fw ORDER BY id")
            check([r[0] for r in await cur.fetch(3)], [1, 2, 3], "fetch(3)")
            check(await cur.forward(10), 10, "forward(10)")
            check((await cur.fetchrow())[0], 14, "fetchrow after forward")
            check(await cur.forward(1000), 86, "forward past the end")
    finally:
        await c.close()


@case
async def copy_records_to_table_binary():
    c = await connect()
    try:
        await c.execute("CREATE TABLE cpb (id int PRIMARY KEY, v numeric, b bytea, "
                        "t timestamptz, d date, f float8, u uuid, note text DEFAULT 'none')")
        at = datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc)
        records = [(i, decimal.Decimal(f"{i}.5"), bytes([i % 256, 0, 255]), at,
                    datetime.date(2024, 1, 1) + datetime.timedelta(days=i), i / 8,
                    uuid.UUID(int=i)) for i in range(1000)]
        status = await c.copy_records_to_table(
            "cpb", records=records, columns=["id", "v", "b", "t", "d", "f", "u"])
        check(status, "COPY 1000", "status")
        check(tuple(await c.fetchrow("SELECT count(*), sum(v), max(note) FROM cpb")),
              (1000, decimal.Decimal("500000.0"), "none"), "count, sum")
        check(tuple(await c.fetchrow("SELECT b, t, d, f, u FROM cpb WHERE id = 7")),
              (b"\x07\x00\xff", at, datetime.date(2024, 1, 8), 0.875, uuid.UUID(int=7)),
              "row 7")
        # An async iterable of records, every column, the schema named.
        await c.execute("CREATE TABLE cpb2 (a int, b text)")

        async def gen():
            for i in range(10):
                yield (i, None if i % 2 else f"r{i}")

        check(await c.copy_records_to_table("cpb2", records=gen(), schema_name="public"),
              "COPY 10", "async iterable")
        check(await c.fetchval("SELECT count(*) FROM cpb2 WHERE b IS NULL"), 5)
    finally:
        await c.close()


@case
async def copy_records_to_table_where():
    c = await connect()
    try:
        await c.execute("CREATE TABLE cpw (id int PRIMARY KEY, v int)")
        await c.copy_records_to_table("cpw", records=[(i, i) for i in range(10)],
                                      where="v >= 5")
        check(await c.fetchval("SELECT count(*) FROM cpw"), 5)
    finally:
        await c.close()


@case
async def copy_to_table_from_file():
    c = await connect()
    try:
        await c.execute("CREATE TABLE cpt (id int PRIMARY KEY, name text, at date)")
        csv = "".join(f'{i},"name, {i}",2024-01-{i % 28 + 1:02d}\n' for i in range(300))
        status = await c.copy_to_table("cpt", source=io.BytesIO(csv.encode()),
                                       columns=["id", "name", "at"], format="csv")
        check(status, "COPY 300", "csv status")
        text = "1000\tx\\ty\t\\N\n1001\t\\\\\t2024-02-29\n"
        await c.copy_to_table("cpt", source=io.BytesIO(text.encode()), format="text")
        check(tuple(await c.fetchrow("SELECT name, at FROM cpt WHERE id = 1000")),
              ("x\ty", None), "text format escapes")
        check(await c.fetchval("SELECT name FROM cpt WHERE id = 1001"), "\\")
        # An async iterable of chunks, with a header line and a custom NULL string.
        async def chunks():
            yield b"id|name|at\n"
            yield b"2000|NUL|2024-03-01\n2001|z|NUL\n"

        await c.copy_to_table("cpt", source=chunks(), format="csv", header=True,
                              delimiter="|", null="NUL")
        check(tuple(await c.fetchrow("SELECT name, at FROM cpt WHERE id = 2000")),
              (None, datetime.date(2024, 3, 1)), "header, delimiter, null")
        check(await c.fetchval("SELECT count(*) FROM cpt"), 304)
    finally:
        await c.close()


@case
async def copy_from_query_and_table():
    c = await connect()
    try:
        await c.execute("CREATE TABLE cpo (id int PRIMARY KEY, name text, v numeric)")
        await c.execute("INSERT INTO cpo SELECT g, 'n' || g, g / 2.0 FROM "
                        "generate_series(1, 100) g")
        out = io.BytesIO()
        status = await c.copy_from_query("SELECT id, name FROM cpo WHERE id <= 3 ORDER BY id",
                                         output=out, format="csv")
        check(status, "COPY 3", "status")
        check(out.getvalue(), b"1,n1\n2,n2\n3,n3\n", "csv output")
        chunks = []

        async def sink(data):
            chunks.append(data)

        status = await c.copy_from_table("cpo", columns=["id"], output=sink, format="text")
        check(status, "COPY 100", "copy_from_table status")
        check(sorted(int(x) for x in b"".join(chunks).split()), list(range(1, 101)), "ids")
        out = io.BytesIO()
        await c.copy_from_table("cpo", output=out, format="csv", header=True, delimiter=";")
        check(out.getvalue().split(b"\n")[0], b"id;name;v", "header")
    finally:
        await c.close()


@case
async def copy_from_query_with_arguments():
    """asyncpg inlines the arguments of a COPY query as literals: it prepares the query for
    their types, then has the server quote each one (quote_literal($n::type::text))."""
    c = await connect()
    try:
        await c.execute("CREATE TABLE cpa (id int PRIMARY KEY, name text, at date)")
        await c.execute("INSERT INTO cpa SELECT g, 'n' || g, DATE '2024-01-01' + g FROM "
                        "generate_series(1, 100) g")
        out = io.BytesIO()
        await c.copy_from_query("SELECT id, at FROM cpa WHERE id > $1 AND name <> $2 "
                                "AND at > $3 ORDER BY id", 97, "n100",
                                datetime.date(2024, 1, 1), output=out, format="text")
        check(out.getvalue(), b"98\t2024-04-08\n99\t2024-04-09\n", "text output")
    finally:
        await c.close()


@case
async def listeners():
    listener = await connect()
    sender = await connect()
    got = asyncio.Queue()

    def on_notify(conn, pid, channel, payload):
        got.put_nowait((channel, payload, pid))

    try:
        await listener.add_listener("jobs", on_notify)
        await listener.add_listener("Other Channel", on_notify)
        await sender.execute("NOTIFY jobs, 'first'")
        await sender.execute("SELECT pg_notify('jobs', 'second')")
        await sender.execute("""NOTIFY "Other Channel", 'third'""")
        async with sender.transaction():
            await sender.execute("NOTIFY jobs, 'after commit'")
        sender_pid = sender.get_server_pid()
        seen = [await asyncio.wait_for(got.get(), 5) for _ in range(4)]
        check([s[:2] for s in seen], [("jobs", "first"), ("jobs", "second"),
                                      ("Other Channel", "third"), ("jobs", "after commit")])
        check({s[2] for s in seen}, {sender_pid}, "pid of the sender")
        await listener.remove_listener("jobs", on_notify)  # UNLISTEN jobs
        await sender.execute("NOTIFY jobs, 'nobody hears'")
        await sender.execute("""NOTIFY "Other Channel", 'heard'""")
        check((await asyncio.wait_for(got.get(), 5))[:2], ("Other Channel", "heard"))
    finally:
        await listener.close()
        await sender.close()


@case
async def log_listener_gets_notices():
    c = await connect()
    notices = []
    try:
        c.add_log_listener(lambda conn, message: notices.append(message))
        await c.execute("DROP TABLE IF EXISTS no_such_table")
        await asyncio.sleep(0.05)
        if not notices:
            raise AssertionError("no NOTICE for DROP TABLE IF EXISTS on a missing table")
        check(notices[0].severity, "NOTICE", "severity")
        check(notices[0].sqlstate, "00000", "sqlstate")
    finally:
        await c.close()


@case
async def errors_carry_details():
    c = await connect()
    try:
        await c.execute("CREATE TABLE u (id int PRIMARY KEY, email text "
                        "CONSTRAINT u_email_key UNIQUE)")
        await c.execute("CREATE TABLE child (id int PRIMARY KEY, u int REFERENCES u (id))")
        await c.execute("INSERT INTO u VALUES (1, 'a@x')")
        try:
            await c.execute("INSERT INTO u VALUES ($1, $2)", 2, "a@x")
            raise AssertionError("duplicate accepted")
        except exc.UniqueViolationError as e:
            check((e.sqlstate, e.constraint_name, e.table_name, e.schema_name),
                  ("23505", "u_email_key", "u", "public"), "unique violation")
        try:
            await c.execute("INSERT INTO child VALUES (1, 42)")
            raise AssertionError("dangling foreign key accepted")
        except exc.ForeignKeyViolationError as e:
            check(e.constraint_name, "child_u_fkey", "foreign key constraint_name")
        try:
            await c.execute("INSERT INTO u (id) VALUES (NULL)")
            raise AssertionError("NULL key accepted")
        except exc.NotNullViolationError as e:
            check(e.column_name, "id", "not null column_name")
        try:
            await c.fetch("SELEC 1")
            raise AssertionError("syntax error accepted")
        except exc.PostgresSyntaxError as e:
            check(e.position, "1", "position")
        try:
            await c.fetchval("SELECT 1 / $1", 0)
            raise AssertionError("division by zero accepted")
        except exc.DivisionByZeroError:
            pass
        try:
            await c.fetch("SELECT no_such_column FROM u")
            raise AssertionError("unknown column accepted")
        except exc.UndefinedColumnError:
            pass
        try:
            await c.fetch("SELECT 1 FROM no_such_table")
            raise AssertionError("unknown table accepted")
        except exc.UndefinedTableError:
            pass
        check(await c.fetchval("SELECT 1"), 1, "connection usable after errors")
    finally:
        await c.close()


@case
async def query_timeout_cancels():
    """A timeout makes asyncpg send a CancelRequest; the connection stays usable."""
    c = await connect()
    try:
        try:
            await c.execute("SELECT pg_sleep(10)", timeout=0.5)
            raise AssertionError("pg_sleep(10) finished within 0.5 s")
        except asyncio.TimeoutError:
            pass
        check(await c.fetchval("SELECT 41 + 1"), 42, "after the cancel")
        await c.execute("SET statement_timeout = '200ms'")
        try:
            await c.execute("SELECT pg_sleep(5)")
            raise AssertionError("statement_timeout not applied")
        except exc.QueryCanceledError:
            pass
    finally:
        await c.close()


@case
async def pool_and_its_reset():
    """A Pool resets each connection it takes back with pg_advisory_unlock_all(), CLOSE ALL,
    UNLISTEN * and RESET ALL in one simple Query; a failed reset closes the connection."""
    pool = await asyncpg.create_pool(min_size=1, max_size=1)
    heard = []
    other = await connect()
    try:
        async with pool.acquire() as c:
            pid = c.get_server_pid()
            check(c.get_reset_query(),
                  "SELECT pg_advisory_unlock_all();\nCLOSE ALL;\nUNLISTEN *;\nRESET ALL;",
                  "reset query")
            await c.execute("CREATE TABLE pooled (id int PRIMARY KEY)")
            await c.execute("SET application_name = 'pooled'")
            await c.execute("SET statement_timeout = '1234ms'")
            check(await c.fetchval("SELECT pg_try_advisory_lock(7)"), True, "lock")
            await c.add_listener("pool_chan", lambda *a: heard.append(a))
        check(await other.fetchval("SELECT pg_try_advisory_lock(7)"), True,
              "advisory lock released by the reset")
        await other.execute("SELECT pg_advisory_unlock(7)")
        async with pool.acquire() as c:
            check(c.get_server_pid(), pid, "the same server connection")
            check(await c.fetchval("SHOW application_name"), "", "application_name reset")
            check(await c.fetchval("SHOW statement_timeout"), "0", "statement_timeout reset")
            await other.execute("NOTIFY pool_chan, 'x'")
            await c.fetchval("SELECT 1")
            await asyncio.sleep(0.1)
            check(heard, [], "UNLISTEN * dropped the listener")
        # The pool's shortcut methods, and concurrent use of one pool from many tasks.
        check(await pool.fetchval("SELECT count(*) FROM pooled"), 0)
    finally:
        await other.close()
        await pool.close()


@case
async def pool_concurrent_tasks():
    pool = await asyncpg.create_pool(min_size=2, max_size=4)
    try:
        await pool.execute("CREATE TABLE conc (id int PRIMARY KEY, n int)")

        async def worker(n):
            async with pool.acquire() as c:
                async with c.transaction():
                    for i in range(25):
                        await c.execute("INSERT INTO conc VALUES ($1, $2)", n * 1000 + i, n)

        await asyncio.gather(*(worker(n) for n in range(8)))
        check(await pool.fetchval("SELECT count(*) FROM conc"), 200)
        check(await pool.fetchval("SELECT count(DISTINCT n) FROM conc"), 8)
    finally:
        await pool.close()


@case
async def type_introspection_query():
    """The query asyncpg runs to learn a type it has no codec for (INTRO_LOOKUP_TYPES, over
    pg_type, pg_namespace, pg_range and pg_attribute, recursive), here for built-in types."""
    c = await connect()
    try:
        query = (introspection.INTRO_LOOKUP_TYPES if c.get_server_version() >= (14, 0)
                 else introspection.INTRO_LOOKUP_TYPES_13)
        rows = await c.fetch(query, [1007, 2951, 3802])  # int4[], uuid[], jsonb
        got = {r["name"]: (r["ns"], r["kind"], r["elemtype"], r["elemdelim"],
                           r["elemtype_name"], r["depth"]) for r in rows}
        check(got, {
            "_int4": ("pg_catalog", b"b", 23, b",", "integer", 0),
            "_uuid": ("pg_catalog", b"b", 2950, b",", "uuid", 0),
            "jsonb": ("pg_catalog", b"b", 0, None, "-", 0),
            "int4": ("pg_catalog", b"b", 0, None, "-", 1),
            "uuid": ("pg_catalog", b"b", 0, None, "-", 1),
        }, "introspection rows")
        # TYPE_BY_NAME, which set_type_codec runs.
        check(tuple(await c.fetchrow(introspection.TYPE_BY_NAME, "json", "pg_catalog")),
              (114, 0, b"b"), "TYPE_BY_NAME")
    finally:
        await c.close()


@case
async def set_type_codec_json():
    """The usual set-up of asyncpg applications: json and jsonb decoded into Python objects."""
    c = await connect()
    try:
        for name in ("json", "jsonb"):
            await c.set_type_codec(name, encoder=json.dumps, decoder=json.loads,
                                   schema="pg_catalog")
        await c.execute("CREATE TABLE jdocs (id int PRIMARY KEY, j json, jb jsonb)")
        doc = {"a": 1, "b": [1, 2, {"c": None}], "s": "x"}
        await c.execute("INSERT INTO jdocs VALUES (1, $1, $2)", doc, doc)
        row = await c.fetchrow("SELECT j, jb, jb->'b' AS b FROM jdocs")
        check((row["j"], row["jb"], row["b"]), (doc, doc, [1, 2, {"c": None}]), "decoded")
        check(await c.fetchval("SELECT count(*) FROM jdocs WHERE jb @> $1", {"s": "x"}), 1)
    finally:
        await c.close()


@case
async def enum_type_introspected():
    c = await connect()
    try:
        await c.execute("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
        await c.execute("CREATE TABLE person (id int PRIMARY KEY, m mood, ms mood[])")
        await c.execute("INSERT INTO person VALUES (1, $1, $2)", "happy", ["ok", "sad"])
        check(tuple(await c.fetchrow("SELECT m, ms FROM person")), ("happy", ["ok", "sad"]))
        check(await c.fetchval("SELECT count(*) FROM person WHERE m > $1", "ok"), 1)
    finally:
        await c.close()


@case
async def domain_type_introspected():
    c = await connect()
    try:
        await c.execute("CREATE DOMAIN posint AS integer CHECK (VALUE > 0)")
        await c.execute("CREATE TABLE dom (id int PRIMARY KEY, n posint)")
        await c.execute("INSERT INTO dom VALUES (1, $1)", 5)
        check(await c.fetchval("SELECT n FROM dom"), 5)
        try:
            await c.execute("INSERT INTO dom VALUES (2, $1)", -1)
            raise AssertionError("domain CHECK not enforced")
        except exc.CheckViolationError:
            pass
    finally:
        await c.close()


@case
async def composite_type_introspected():
    c = await connect()
    try:
        await c.execute("CREATE TABLE pt (x int, label text)")
        await c.execute("INSERT INTO pt VALUES (1, 'a')")
        check(tuple(await c.fetchval("SELECT p FROM pt p")), (1, "a"), "table row type")
        await c.execute("CREATE TYPE pair AS (a int, b text)")
        check(tuple(await c.fetchval("SELECT ROW(2, 'b')::pair")), (2, "b"), "composite type")
        check(tuple(await c.fetchval("SELECT $1::pair", (3, "c"))), (3, "c"), "as a parameter")
    finally:
        await c.close()


@case
async def connection_reset():
    """Connection.reset() by hand, the reset query a pool sends."""
    c = await connect()
    other = await connect()
    try:
        await c.execute("SET application_name = 'to be reset'")
        check(await c.fetchval("SELECT pg_try_advisory_lock(11)"), True, "lock")
        await c.execute("LISTEN some_channel")
        await c.reset()
        check(await c.fetchval("SHOW application_name"), "", "application_name reset")
        check(await other.fetchval("SELECT pg_try_advisory_lock(11)"), True,
              "advisory lock released")
    finally:
        await c.close()
        await other.close()


@case
async def reset_closes_sql_cursors():
    """Connection.reset() by hand (what the pool does), after SQL-level cursors are open."""
    c = await connect()
    try:
        await c.execute("BEGIN")
        await c.execute("DECLARE held CURSOR WITH HOLD FOR SELECT generate_series(1, 3)")
        await c.execute("COMMIT")
        check(await c.fetchval("FETCH 1 FROM held"), 1, "WITH HOLD cursor")
        await c.reset()
        try:
            await c.fetch("FETCH 1 FROM held")
            raise AssertionError("cursor still open after CLOSE ALL")
        except exc.InvalidCursorNameError:
            pass
    finally:
        await c.close()


@case
async def concurrent_connections():
    conns = [await connect() for _ in range(8)]
    try:
        await conns[0].execute("CREATE TABLE cc (id int PRIMARY KEY)")

        async def worker(n, c):
            for i in range(50):
                await c.execute("INSERT INTO cc VALUES ($1)", n * 1000 + i)

        await asyncio.gather(*(worker(n, c) for n, c in enumerate(conns)))
        check(await conns[0].fetchval("SELECT count(*) FROM cc"), 400)
    finally:
        for c in conns:
            await c.close()


def tls_context(cafile=None, client=False):
    """What an application gives asyncpg for verify-full: the run's CA, the host name checked."""
    context = ssl.create_default_context(cafile=cafile or os.environ["SHOAL_TEST_SSLROOTCERT"])
    if client:
        context.load_cert_chain(os.environ["SHOAL_TEST_SSLCERT"], os.environ["SHOAL_TEST_SSLKEY"])
    return context


async def connect_tls(**kw):
    # asyncpg checks the server's certificate against the name it connects to.
    return await connect(host="localhost", ssl=kw.pop("ssl", None) or tls_context(), **kw)


async def check_encrypted(c):
    """The client and the server both say the connection is TLS, and data larger than a TLS
    record (16 KiB) goes both ways intact."""
    # asyncpg has no public call for it: its transport is the one start_tls returned.
    tls = c._transport.get_extra_info("ssl_object")
    if tls is None or tls.version() not in ("TLSv1.2", "TLSv1.3"):
        raise AssertionError(f"the client's transport is not TLS: {tls!r}")
    check(dict(x[0] for x in tls.getpeercert()["subject"]), {"commonName": "localhost"},
          "server certificate subject")
    check(await c.fetchval("SHOW ssl"), "on", "SHOW ssl")
    blob = os.urandom(200_000)
    check(tuple(await c.fetchrow("SELECT $1::bytea, length($1::bytea)", blob)),
          (blob, len(blob)), "a 200 kB bytea through TLS")


@case
async def tls_verify_full():
    c = await connect_tls()
    try:
        await check_encrypted(c)
        check(await c.fetchval("SELECT current_user"), "postgres")
    finally:
        await c.close()


@case
async def tls_scram():
    # run.py's pg_hba.conf lets tls_scram in over TLS only, by SCRAM-SHA-256. asyncpg does not
    # do channel binding: it says so ("n,,") and the server must accept plain SCRAM over TLS.
    admin = await connect()
    try:
        await admin.execute("CREATE ROLE tls_scram LOGIN PASSWORD 'scram over tls'")
        c = await connect_tls(user="tls_scram", password="scram over tls")
        try:
            await check_encrypted(c)
            check(await c.fetchval("SELECT current_user"), "tls_scram")
        finally:
            await c.close()
        try:
            await (await connect(user="tls_scram", password="scram over tls", ssl=False)).close()
            raise AssertionError("tls_scram logged in without TLS past a hostnossl reject line")
        except exc.InvalidAuthorizationSpecificationError as e:
            if "pg_hba.conf rejects connection" not in str(e):
                raise
    finally:
        await admin.execute("DROP ROLE IF EXISTS tls_scram")
        await admin.close()


@case
async def tls_client_certificate():
    # The cert method: the client certificate (CN=tls_cert, signed by the run's CA) is the login.
    admin = await connect()
    try:
        await admin.execute("CREATE ROLE tls_cert LOGIN")
        c = await connect_tls(user="tls_cert", ssl=tls_context(client=True))
        try:
            await check_encrypted(c)
            check(await c.fetchval("SELECT current_user"), "tls_cert")
        finally:
            await c.close()
        try:
            await (await connect_tls(user="tls_cert")).close()
            raise AssertionError("tls_cert logged in by the cert method without a certificate")
        except exc.InvalidAuthorizationSpecificationError as e:
            if "requires a valid client certificate" not in str(e):
                raise
    finally:
        await admin.execute("DROP ROLE IF EXISTS tls_cert")
        await admin.close()


@case
async def tls_wrong_ca_rejected():
    try:
        context = tls_context(cafile=os.environ["SHOAL_TEST_WRONG_SSLROOTCERT"])
        await (await connect_tls(ssl=context)).close()
        raise AssertionError("asyncpg accepted a server the given CA did not sign")
    except ssl.SSLCertVerificationError:
        pass


async def run_case(fn):
    await asyncio.wait_for(fn(), CASE_TIMEOUT_S)


def main():
    run_cases(CASES, lambda fn: asyncio.run(run_case(fn)))


if __name__ == "__main__":
    main()
