#!/usr/bin/env python3
"""What applications do with psycopg 3, case by case (see tests/drivers/run.py for the output
protocol). Connects with the libpq environment variables; each case uses its own connection
and tables, so one failure does not spill into the next. The tls_ cases use the certificates
run.py made for the run (SHOAL_TEST_SSLROOTCERT and the others of its TestPki.env())."""

import datetime
import decimal
import os
import threading
import uuid

import psycopg
from psycopg import errors
from psycopg.types.json import Json, Jsonb

from suite import run_cases

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def connect(**kw):
    return psycopg.connect(autocommit=kw.pop("autocommit", True), **kw)


def check(got, want, what=""):
    if got != want:
        raise AssertionError(f"{what} got {got!r}, want {want!r}")


@case
def connect_and_server_parameters():
    with connect() as c:
        check(c.info.parameter_status("server_encoding"), "UTF8", "server_encoding")
        check(c.info.parameter_status("integer_datetimes"), "on", "integer_datetimes")
        check(c.info.parameter_status("standard_conforming_strings"), "on")
        check(c.info.parameter_status("DateStyle"), "ISO, MDY", "DateStyle")
        if c.info.server_version < 100000:
            raise AssertionError(f"server_version {c.info.server_version}")


# (type, value) pairs that must come back equal through a parameter, in text and binary.
ROUND_TRIP = [
    ("smallint", 32767),
    ("integer", -2147483648),
    ("bigint", 9223372036854775807),
    ("real", 1.5),
    ("double precision", 2.718281828459045),
    ("numeric", decimal.Decimal("12345678901234567890.123456789")),
    ("numeric(10,2)", decimal.Decimal("-99.95")),
    ("text", "héllo \u2603 'quoted' \\ back"),
    ("varchar(20)", "short"),
    ("boolean", True),
    ("bytea", b"\x00\x03\xff\\x"),
    ("date", datetime.date(2024, 2, 29)),
    ("time", datetime.time(13, 14, 15, 123456)),
    ("timestamp", datetime.datetime(2024, 1, 2, 3, 4, 5, 678901)),
    ("timestamptz", datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)),
    ("interval", datetime.timedelta(days=3, seconds=3723)),
    ("uuid", uuid.UUID("12345678-1234-5678-1234-567812345678")),
]


def round_trip(binary):
    failures = []
    with connect() as c:
        for i, (sqltype, value) in enumerate(ROUND_TRIP):
            table = f"rt_{'b' if binary else 't'}_{i}"
            try:
                # A serial key and a default beside the value: the insert path with defaults.
                c.execute(f"CREATE TABLE {table} (id serial PRIMARY KEY, v {sqltype}, "
                          "note text DEFAULT 'd')")
                c.execute(f"INSERT INTO {table} (v) VALUES (%s)", (value,), binary=binary)
                got = c.execute(f"SELECT v FROM {table}", binary=binary).fetchone()[0]
                if got != value:
                    failures.append(f"{sqltype}: stored {value!r}, read {got!r}")
                found = c.execute(f"SELECT count(*) FROM {table} WHERE v = %s", (value,),
                                  binary=binary).fetchone()[0]
                if found != 1:
                    failures.append(f"{sqltype}: WHERE v = parameter found {found} rows")
            except psycopg.Error as e:
                failures.append(f"{sqltype}: {e.sqlstate} {e}".strip())
    if failures:
        raise AssertionError("; ".join(failures))


@case
def types_round_trip_text_format():
    round_trip(binary=False)


@case
def types_round_trip_binary_format():
    round_trip(binary=True)


@case
def json_and_jsonb():
    with connect() as c:
        c.execute("CREATE TABLE docs (id int PRIMARY KEY, j json, jb jsonb)")
        doc = {"a": 1, "b": [1, 2, {"c": None}], "s": "x"}
        c.execute("INSERT INTO docs VALUES (1, %s, %s)", (Json(doc), Jsonb(doc)))
        j, jb = c.execute("SELECT j, jb FROM docs").fetchone()
        check(j, doc, "json")
        check(jb, doc, "jsonb")
        check(c.execute("SELECT jb->>'s', jb->'b'->1 FROM docs").fetchone(), ("x", 2))


@case
def untyped_null_is_null():
    with connect() as c:
        for binary in (False, True):
            row = c.execute("SELECT NULL, NULL AS x, 1", binary=binary).fetchone()
            check(row, (None, None, 1), f"binary={binary}")
        with c.cursor().copy("COPY (SELECT NULL, 'a') TO STDOUT") as copy:
            check(b"".join(bytes(b) for b in copy), b"\\N\ta\n", "COPY")


@case
def arrays():
    with connect() as c:
        c.execute("CREATE TABLE arr (id int PRIMARY KEY, tags text[], nums int[])")
        c.execute("INSERT INTO arr VALUES (1, %s, %s)", (["a", "b c", None], [1, 2, 3]))
        check(c.execute("SELECT tags, nums FROM arr").fetchone(), (["a", "b c", None], [1, 2, 3]))
        check(c.execute("SELECT id FROM arr WHERE 2 = ANY(nums)").fetchone(), (1,))
        check(c.execute("SELECT count(*) FROM arr WHERE id = ANY(%s)", ([1, 5],)).fetchone(), (1,))


@case
def crud_with_returning_and_rowcount():
    with connect() as c:
        c.execute("CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL, qty int)")
        ids = [c.execute("INSERT INTO items (name, qty) VALUES (%s, %s) RETURNING id",
                         (f"n{i}", i)).fetchone()[0] for i in range(5)]
        check(ids, [1, 2, 3, 4, 5], "serial ids")
        cur = c.execute("UPDATE items SET qty = qty + 10 WHERE id > %s", (2,))
        check(cur.rowcount, 3, "UPDATE rowcount")
        cur = c.execute("DELETE FROM items WHERE id = %s RETURNING name", (1,))
        check(cur.fetchall(), [("n0",)], "DELETE RETURNING")
        check(c.execute("SELECT sum(qty) FROM items").fetchone(), (40,))


@case
def executemany_and_pipeline():
    with connect() as c:
        c.execute("CREATE TABLE many (id int PRIMARY KEY, v text)")
        with c.cursor() as cur:
            cur.executemany("INSERT INTO many VALUES (%s, %s)", [(i, str(i)) for i in range(100)])
        with c.pipeline():
            for i in range(100, 110):
                c.execute("INSERT INTO many VALUES (%s, %s)", (i, str(i)))
        check(c.execute("SELECT count(*) FROM many").fetchone(), (110,))


@case
def errors_carry_sqlstate_and_constraint():
    with connect() as c:
        c.execute("CREATE TABLE u (id int PRIMARY KEY, email text CONSTRAINT u_email_key UNIQUE)")
        c.execute("INSERT INTO u VALUES (1, 'a@x')")
        try:
            c.execute("INSERT INTO u VALUES (2, 'a@x')")
            raise AssertionError("duplicate accepted")
        except errors.UniqueViolation as e:
            check(e.diag.constraint_name, "u_email_key", "constraint_name")
            check(e.diag.table_name, "u", "table_name")
        try:
            c.execute("SELEC 1")
            raise AssertionError("syntax error accepted")
        except errors.SyntaxError as e:
            check(e.diag.statement_position, "1", "statement_position")


@case
def transaction_rolls_back_on_error():
    with connect(autocommit=False) as c:
        c.execute("CREATE TABLE tx (id int PRIMARY KEY)")
        c.commit()
        c.execute("INSERT INTO tx VALUES (1)")
        try:
            c.execute("INSERT INTO tx VALUES (1)")
        except errors.UniqueViolation:
            pass
        try:
            c.execute("INSERT INTO tx VALUES (2)")
            raise AssertionError("statement accepted in an aborted transaction")
        except errors.InFailedSqlTransaction:
            pass
        c.rollback()
        check(c.execute("SELECT count(*) FROM tx").fetchone(), (0,))


@case
def isolation_levels():
    for level in (psycopg.IsolationLevel.READ_COMMITTED, psycopg.IsolationLevel.REPEATABLE_READ,
                  psycopg.IsolationLevel.SERIALIZABLE):
        with connect(autocommit=False) as c:
            c.isolation_level = level
            got = c.execute("SHOW transaction_isolation").fetchone()[0]
            check(got, level.name.lower().replace("_", " "), "transaction_isolation")
            c.commit()


@case
def serializable_detects_write_skew():
    with connect() as setup:
        setup.execute("CREATE TABLE oncall (name text PRIMARY KEY, on_duty bool)")
        setup.execute("INSERT INTO oncall VALUES ('a', true), ('b', true)")
    a = connect(autocommit=False)
    b = connect(autocommit=False)
    for c in (a, b):
        c.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
    try:
        check(a.execute("SELECT count(*) FROM oncall WHERE on_duty").fetchone(), (2,))
        check(b.execute("SELECT count(*) FROM oncall WHERE on_duty").fetchone(), (2,))
        a.execute("UPDATE oncall SET on_duty = false WHERE name = 'a'")
        b.execute("UPDATE oncall SET on_duty = false WHERE name = 'b'")
        a.commit()
        try:
            b.commit()
            raise AssertionError("write skew committed under SERIALIZABLE")
        except errors.SerializationFailure:
            pass
    finally:
        a.close()
        b.close()


@case
def copy_text_in_and_out():
    with connect() as c:
        c.execute("CREATE TABLE cp (id int PRIMARY KEY, name text, at date)")
        with c.cursor().copy("COPY cp (id, name, at) FROM STDIN") as copy:
            for i in range(1000):
                copy.write_row((i, f"name {i}\t", datetime.date(2024, 1, 1)))
        check(c.execute("SELECT count(*), max(name) FROM cp").fetchone(), (1000, "name 999\t"))
        out = []
        with c.cursor().copy("COPY (SELECT id, name FROM cp WHERE id < 3 ORDER BY id) TO STDOUT") as copy:
            for row in copy.rows():
                out.append(row)
        check(out, [("0", "name 0\t"), ("1", "name 1\t"), ("2", "name 2\t")])


@case
def copy_binary_in_and_out():
    with connect() as c:
        c.execute("CREATE TABLE cpb (id int PRIMARY KEY, v numeric, b bytea, t timestamptz)")
        at = datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc)
        with c.cursor().copy("COPY cpb FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "numeric", "bytea", "timestamptz"])
            for i in range(100):
                copy.write_row((i, decimal.Decimal(f"{i}.5"), bytes([i, 0, 255]), at))
        check(c.execute("SELECT count(*), sum(v) FROM cpb").fetchone(),
              (100, decimal.Decimal("5000.0")))
        with c.cursor().copy("COPY (SELECT id, b FROM cpb WHERE id = 7) TO STDOUT (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "bytea"])
            rows = list(copy.rows())
        check(rows, [(7, b"\x07\x00\xff")])


@case
def server_side_cursor_streams():
    with connect(autocommit=False) as c:
        c.execute("CREATE TABLE big AS SELECT g AS id FROM generate_series(1, 5000) g")
        with c.cursor(name="stream") as cur:
            cur.itersize = 100
            cur.execute("SELECT id FROM big ORDER BY id")
            total = sum(row[0] for row in cur)
        check(total, 5000 * 5001 // 2)
        c.commit()


@case
def listen_notify():
    with connect() as listener, connect() as sender:
        listener.execute("LISTEN jobs")
        sender.execute("NOTIFY jobs, 'first'")
        sender.execute("SELECT pg_notify('jobs', 'second')")
        got = []
        for n in listener.notifies(timeout=5, stop_after=2):
            got.append((n.channel, n.payload))
        check(got, [("jobs", "first"), ("jobs", "second")])


@case
def prepared_statements_reused():
    with connect(prepare_threshold=0) as c:
        c.execute("CREATE TABLE prep (id int PRIMARY KEY, v int)")
        for i in range(20):
            c.execute("INSERT INTO prep VALUES (%s, %s)", (i, i * i))
        got = [c.execute("SELECT v FROM prep WHERE id = %s", (i,)).fetchone()[0] for i in range(20)]
        check(got, [i * i for i in range(20)])


@case
def sql_level_prepare_execute():
    with connect() as c:
        c.execute("PREPARE q (int) AS SELECT $1 * 2")
        check(c.execute("EXECUTE q (21)").fetchone(), (42,))
        check(c.execute("SELECT name FROM pg_prepared_statements WHERE name = 'q'").fetchone(),
              ("q",))
        c.execute("DEALLOCATE q")


@case
def advisory_locks():
    with connect() as a, connect() as b:
        check(a.execute("SELECT pg_try_advisory_lock(42)").fetchone(), (True,))
        check(b.execute("SELECT pg_try_advisory_lock(42)").fetchone(), (False,))
        check(a.execute("SELECT pg_advisory_unlock(42)").fetchone(), (True,))
        check(b.execute("SELECT pg_try_advisory_lock(42)").fetchone(), (True,))


@case
def schema_migration_in_a_transaction():
    with connect(autocommit=False) as c:
        c.execute("CREATE TABLE mig (id int PRIMARY KEY, n int)")
        c.execute("INSERT INTO mig VALUES (1, 10)")
        c.commit()
        c.execute("ALTER TABLE mig ADD COLUMN note text DEFAULT 'x'")
        c.execute("ALTER TABLE mig ALTER COLUMN n TYPE bigint")
        c.execute("CREATE INDEX mig_n ON mig (n)")
        c.commit()
        check(c.execute("SELECT n, note FROM mig").fetchone(), (10, "x"))
        check(c.execute("SELECT data_type FROM information_schema.columns "
                        "WHERE table_name = 'mig' AND column_name = 'n'").fetchone(), ("bigint",))


@case
def catalog_introspection():
    with connect() as c:
        c.execute("CREATE TABLE parent (id int PRIMARY KEY)")
        c.execute("CREATE TABLE child (id int PRIMARY KEY, p int REFERENCES parent (id))")
        check(c.execute("SELECT to_regclass('child') IS NOT NULL, to_regtype('int4')::text").fetchone(),
              (True, "integer"))
        fks = c.execute("""
            SELECT con.conname, cl.relname
            FROM pg_constraint con JOIN pg_class cl ON cl.oid = con.confrelid
            WHERE con.contype = 'f' AND con.conrelid = 'child'::regclass""").fetchall()
        check(fks, [("child_p_fkey", "parent")])


@case
def set_returning_functions_in_select_list():
    with connect() as c:
        check(c.execute("SELECT generate_series(1, 3)").fetchall(), [(1,), (2,), (3,)])


@case
def pool_reset_queries():
    with connect() as c:
        c.execute("SET application_name = 'pooled'")
        c.execute("DISCARD ALL")
        check(c.execute("SHOW application_name").fetchone(), ("",))
        c.execute("RESET ALL")
        c.execute("SELECT pg_advisory_unlock_all()")


@case
def concurrent_connections():
    errors_seen = []

    def worker(n):
        try:
            with connect() as c:
                for i in range(50):
                    c.execute("INSERT INTO conc VALUES (%s)", (n * 1000 + i,))
        except Exception as e:  # noqa: BLE001 - reported below
            errors_seen.append(repr(e))

    with connect() as c:
        c.execute("CREATE TABLE conc (id int PRIMARY KEY)")
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors_seen:
            raise AssertionError(errors_seen[0])
        check(c.execute("SELECT count(*) FROM conc").fetchone(), (400,))


def connect_tls(**kw):
    """A connection that libpq makes only over TLS, to a server whose certificate the run's CA
    signed for the name localhost (hostaddr is where it connects)."""
    kw.setdefault("sslrootcert", os.environ["SHOAL_TEST_SSLROOTCERT"])
    return connect(host="localhost", hostaddr=os.environ["PGHOST"], sslmode="verify-full", **kw)


def check_encrypted(c):
    """The client and the server both say the connection is TLS, and data larger than a TLS
    record (16 KiB) goes both ways intact."""
    check(c.pgconn.ssl_in_use, True, "libpq ssl_in_use")
    check(c.execute("SHOW ssl").fetchone(), ("on",), "SHOW ssl")
    blob = os.urandom(200_000)
    check(c.execute("SELECT %s::bytea, length(%s::bytea)", (blob, blob)).fetchone(),
          (blob, len(blob)), "a 200 kB bytea through TLS")


@case
def tls_verify_full():
    with connect_tls() as c:
        check_encrypted(c)
        check(c.execute("SELECT current_user").fetchone(), ("postgres",))


@case
def tls_scram_channel_binding():
    # run.py's pg_hba.conf lets tls_scram in over TLS only, by SCRAM-SHA-256; channel_binding=
    # require makes libpq insist on SCRAM-SHA-256-PLUS, bound to the server's certificate.
    with connect() as admin:
        admin.execute("CREATE ROLE tls_scram LOGIN PASSWORD 'scram over tls'")
        try:
            with connect_tls(user="tls_scram", password="scram over tls",
                             channel_binding="require") as c:
                check_encrypted(c)
                check(c.execute("SELECT current_user").fetchone(), ("tls_scram",))
            try:
                connect(user="tls_scram", password="scram over tls", sslmode="disable").close()
                raise AssertionError("tls_scram logged in without TLS past a hostnossl reject line")
            except psycopg.OperationalError as e:
                if "pg_hba.conf rejects connection" not in str(e):
                    raise
        finally:
            admin.execute("DROP ROLE IF EXISTS tls_scram")


@case
def tls_client_certificate():
    # The cert method: the client certificate (CN=tls_cert, signed by the run's CA) is the login.
    with connect() as admin:
        admin.execute("CREATE ROLE tls_cert LOGIN")
        try:
            with connect_tls(user="tls_cert", sslcert=os.environ["SHOAL_TEST_SSLCERT"],
                             sslkey=os.environ["SHOAL_TEST_SSLKEY"]) as c:
                check_encrypted(c)
                check(c.execute("SELECT current_user").fetchone(), ("tls_cert",))
            try:
                connect_tls(user="tls_cert").close()
                raise AssertionError("tls_cert logged in by the cert method without a certificate")
            except psycopg.OperationalError as e:
                if "requires a valid client certificate" not in str(e):
                    raise
        finally:
            admin.execute("DROP ROLE IF EXISTS tls_cert")


@case
def tls_wrong_ca_rejected():
    try:
        connect_tls(sslrootcert=os.environ["SHOAL_TEST_WRONG_SSLROOTCERT"]).close()
        raise AssertionError("verify-full accepted a server the given CA did not sign")
    except psycopg.OperationalError as e:
        if "certificate verify failed" not in str(e):
            raise


def main():
    run_cases(CASES)


if __name__ == "__main__":
    main()
