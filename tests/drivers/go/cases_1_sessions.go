package main

// Connections, CRUD, errors, transactions, notifications, locks, migrations, catalogs, pools
// and cancellation.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

func connectionParameters(t *T) {
	cfg := t.config()
	eq(cfg.Host, os.Getenv("PGHOST"), "host from PGHOST")
	eq(strconv.Itoa(int(cfg.Port)), os.Getenv("PGPORT"), "port from PGPORT")
	eq([]string{cfg.User, cfg.Database}, []string{os.Getenv("PGUSER"), os.Getenv("PGDATABASE")}, "user and database")
	c := t.connect()
	pc := c.PgConn()
	for _, kv := range [][2]string{{"server_encoding", "UTF8"}, {"client_encoding", "UTF8"}, {"integer_datetimes", "on"},
		{"standard_conforming_strings", "on"}, {"DateStyle", "ISO, MDY"}} {
		eq(pc.ParameterStatus(kv[0]), kv[1], kv[0])
	}
	version := pc.ParameterStatus("server_version")
	major, err := strconv.Atoi(strings.FieldsFunc(version, func(r rune) bool { return r < '0' || r > '9' })[0])
	if err != nil || major < 10 {
		fail("server_version %q", version)
	}
	must(c.Ping(t.ctx), "Ping")
	var user, db string
	t.get(c, into(&user, &db), "SELECT current_user, current_database()")
	eq([]string{user, db}, []string{os.Getenv("PGUSER"), os.Getenv("PGDATABASE")}, "current_user, current_database()")
	eq(t.int(c, "SELECT pg_backend_pid()"), int64(pc.PID()), "pg_backend_pid() is the BackendKeyData pid")

	// A URL with application_name and a runtime parameter sent at startup.
	url := fmt.Sprintf("postgres://%s@%s:%s/%s?sslmode=disable&application_name=pgx_suite&search_path=public",
		os.Getenv("PGUSER"), os.Getenv("PGHOST"), os.Getenv("PGPORT"), os.Getenv("PGDATABASE"))
	urlCfg, err := pgx.ParseConfig(url)
	must(err, "ParseConfig(url)")
	c2, err := pgx.ConnectConfig(t.ctx, urlCfg)
	must(err, "connect with a URL")
	t.onClose(func() { c2.Close(context.Background()) })
	eq(c2.PgConn().ParameterStatus("application_name"), "pgx_suite", "application_name ParameterStatus")
	eq(t.str(c2, "SHOW application_name"), "pgx_suite", "SHOW application_name")
	eq(t.str(c2, "SHOW search_path"), "public", "SHOW search_path")
	// A keyword/value string.
	dsn := fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable application_name='pgx kv'",
		os.Getenv("PGHOST"), os.Getenv("PGPORT"), os.Getenv("PGUSER"), os.Getenv("PGDATABASE"))
	c3, err := pgx.Connect(t.ctx, dsn)
	must(err, "connect with keyword/value")
	t.onClose(func() { c3.Close(context.Background()) })
	eq(t.str(c3, "SHOW application_name"), "pgx kv", "application_name from keyword/value")
	// SET and the ParameterStatus that follows it.
	t.exec(c3, "SET application_name = 'renamed'")
	eq(c3.PgConn().ParameterStatus("application_name"), "renamed", "ParameterStatus after SET")
	t.exec(c3, "SET TIME ZONE 'Europe/Paris'")
	eq(c3.PgConn().ParameterStatus("TimeZone"), "Europe/Paris", "TimeZone ParameterStatus after SET TIME ZONE")
}

func connectErrors(t *T) {
	_, err := pgx.ConnectConfig(t.ctx, t.config(func(c *pgx.ConnConfig) { c.Database = "no_such_db_pgx" }))
	pgErr(err, "3D000", "connect to a missing database")
	_, err = pgx.ConnectConfig(t.ctx, t.config(func(c *pgx.ConnConfig) { c.User = "no_such_role_pgx" }))
	pgErr(err, "28000", "connect as a missing role")
}

type item struct {
	ID   int32  `db:"id"`
	Name string `db:"name"`
	Qty  *int32 `db:"qty"`
}

func crudWithReturning(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE items_pgx (id serial PRIMARY KEY, name text NOT NULL, qty int)")
	var ids []int32
	for i := 0; i < 5; i++ {
		var id int32
		t.get(c, into(&id), "INSERT INTO items_pgx (name, qty) VALUES ($1, $2) RETURNING id", fmt.Sprintf("n%d", i), i)
		ids = append(ids, id)
	}
	eq(ids, []int32{1, 2, 3, 4, 5}, "serial ids")
	tag := t.exec(c, "UPDATE items_pgx SET qty = qty + 10 WHERE id > $1", 2)
	eq([]any{tag.RowsAffected(), tag.Update(), tag.String()}, []any{int64(3), true, "UPDATE 3"}, "UPDATE command tag")
	rows, err := c.Query(t.ctx, "DELETE FROM items_pgx WHERE id = $1 RETURNING name", 1)
	must(err, "DELETE RETURNING")
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	must(err, "DELETE RETURNING rows")
	eq(names, []string{"n0"}, "DELETE RETURNING")
	eq(rows.CommandTag().String(), "DELETE 1", "DELETE command tag")
	eq(t.int(c, "SELECT sum(qty) FROM items_pgx"), int64(40), "sum(qty)")
	tag = t.exec(c, "INSERT INTO items_pgx (name, qty) VALUES ($1, $2), ($3, NULL)", "m1", 7, "m2")
	eq([]any{tag.RowsAffected(), tag.Insert(), tag.String()}, []any{int64(2), true, "INSERT 0 2"}, "multi-row INSERT tag")
	eq(t.str(c, "SELECT name FROM items_pgx WHERE id = @id", pgx.NamedArgs{"id": 2}), "n1", "named arguments")
	rows, err = c.Query(t.ctx, "SELECT id, name, qty FROM items_pgx ORDER BY id")
	must(err, "select items")
	items, err := pgx.CollectRows(rows, pgx.RowToStructByName[item])
	must(err, "RowToStructByName")
	if len(items) != 6 || items[0].ID != 2 || items[0].Name != "n1" || items[0].Qty == nil || *items[0].Qty != 1 ||
		items[5].Name != "m2" || items[5].Qty != nil {
		fail("items: %+v", items)
	}
	var missing string
	err = c.QueryRow(t.ctx, "SELECT name FROM items_pgx WHERE id = $1", 999).Scan(&missing)
	if !errors.Is(err, pgx.ErrNoRows) {
		fail("no row: got %v, want pgx.ErrNoRows", err)
	}
	tag = t.exec(c, "INSERT INTO items_pgx (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING", 2, "dup")
	eq(tag.RowsAffected(), int64(0), "ON CONFLICT DO NOTHING")
	var name string
	t.get(c, into(&name), "INSERT INTO items_pgx (id, name) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name || '!' RETURNING name", 2, "up")
	eq(name, "up!", "ON CONFLICT DO UPDATE RETURNING")
	tag = t.exec(c, "DELETE FROM items_pgx")
	eq(tag.String(), "DELETE 6", "DELETE all")
}

func errorsConstraintViolations(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE err_parent_pgx (id int PRIMARY KEY)")
	t.exec(c, "CREATE TABLE err_u_pgx (id int PRIMARY KEY, email text CONSTRAINT err_u_pgx_email_key UNIQUE, "+
		"n int NOT NULL CONSTRAINT err_u_pgx_n_check CHECK (n > 0), p int CONSTRAINT err_u_pgx_p_fkey REFERENCES err_parent_pgx (id))")
	t.exec(c, "INSERT INTO err_parent_pgx VALUES (1)")
	t.exec(c, "INSERT INTO err_u_pgx VALUES (1, 'a@x', 1, 1)")
	ins := "INSERT INTO err_u_pgx VALUES ($1, $2, $3, $4)"
	_, err := c.Exec(t.ctx, ins, 2, "a@x", 1, nil)
	pe := pgErr(err, "23505", "duplicate email")
	eq([]string{pe.Severity, pe.ConstraintName, pe.TableName, pe.SchemaName, pe.Detail},
		[]string{"ERROR", "err_u_pgx_email_key", "err_u_pgx", "public", "Key (email)=(a@x) already exists."}, "unique violation fields")
	// The same through the simple protocol.
	_, err = c.Exec(t.ctx, "INSERT INTO err_u_pgx VALUES (1, 'b@x', 1, NULL)")
	pe = pgErr(err, "23505", "duplicate key (simple protocol)")
	eq([]string{pe.ConstraintName, pe.TableName}, []string{"err_u_pgx_pkey", "err_u_pgx"}, "primary key violation fields")
	_, err = c.Exec(t.ctx, ins, 3, "c@x", nil, nil)
	pe = pgErr(err, "23502", "NULL into NOT NULL")
	eq([]string{pe.ColumnName, pe.TableName, pe.SchemaName}, []string{"n", "err_u_pgx", "public"}, "not-null violation fields")
	_, err = c.Exec(t.ctx, ins, 4, "d@x", 0, nil)
	pe = pgErr(err, "23514", "CHECK (n > 0)")
	eq([]string{pe.ConstraintName, pe.TableName}, []string{"err_u_pgx_n_check", "err_u_pgx"}, "check violation fields")
	_, err = c.Exec(t.ctx, ins, 5, "e@x", 1, 99)
	pe = pgErr(err, "23503", "foreign key to a missing parent")
	eq([]string{pe.ConstraintName, pe.TableName, pe.Detail},
		[]string{"err_u_pgx_p_fkey", "err_u_pgx", `Key (p)=(99) is not present in table "err_parent_pgx".`}, "foreign key violation fields")
	_, err = c.Exec(t.ctx, "DELETE FROM err_parent_pgx WHERE id = $1", 1)
	pe = pgErr(err, "23503", "deleting a referenced parent")
	eq([]string{pe.ConstraintName, pe.TableName}, []string{"err_u_pgx_p_fkey", "err_u_pgx"}, "referenced delete fields")
	eq(t.int(c, "SELECT count(*) FROM err_u_pgx"), int64(1), "rows after the failures")
}

func errorsSyntaxAndPosition(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE err_pos_pgx (id int PRIMARY KEY)")
	_, err := c.Exec(t.ctx, "SELEC 1")
	eq(pgErr(err, "42601", "SELEC (simple protocol)").Position, int32(1), "syntax error position (simple protocol)")
	var n int
	err = c.QueryRow(t.ctx, "SELEC $1", 1).Scan(&n)
	eq(pgErr(err, "42601", "SELEC (extended protocol)").Position, int32(1), "syntax error position (extended protocol)")
	_, err = c.Exec(t.ctx, "SELECT * FROM err_nosuch_pgx")
	pe := pgErr(err, "42P01", "missing table")
	eq([]any{pe.Position, pe.Message}, []any{int32(15), `relation "err_nosuch_pgx" does not exist`}, "missing table position and message")
	err = c.QueryRow(t.ctx, "SELECT nosuch_col FROM err_pos_pgx WHERE id = $1", 1).Scan(&n)
	eq(pgErr(err, "42703", "missing column").Position, int32(8), "missing column position")
	err = c.QueryRow(t.ctx, "SELECT nosuch_fn_pgx($1::int)", 1).Scan(&n)
	eq(pgErr(err, "42883", "missing function").Position, int32(8), "missing function position")
	err = c.QueryRow(t.ctx, "SELECT 1 / $1::int", 0).Scan(&n)
	pgErr(err, "22012", "division by zero")
	err = c.QueryRow(t.ctx, "SELECT $1::int", "abc").Scan(&n)
	pgErr(err, "22P02", "'abc' as an integer")
	err = c.QueryRow(t.ctx, "SELECT 'x' || 1 +", pgx.QueryExecModeSimpleProtocol).Scan(&n)
	eq(pgErr(err, "42601", "incomplete expression").Position, int32(18), "syntax error at end of input position")
	eq(t.int(c, "SELECT 1"), int64(1), "connection after the errors")
	// An error raised by a function carries its SQLSTATE, message and hint.
	t.exec(c, `CREATE FUNCTION err_raise_pgx(x int) RETURNS int LANGUAGE plpgsql AS $$
		BEGIN
			IF x < 0 THEN
				RAISE EXCEPTION 'negative: %', x USING ERRCODE = 'P0001', HINT = 'use a positive number';
			END IF;
			RETURN x;
		END $$`)
	err = c.QueryRow(t.ctx, "SELECT err_raise_pgx($1)", -5).Scan(&n)
	pe = pgErr(err, "P0001", "RAISE EXCEPTION")
	eq([]string{pe.Message, pe.Hint}, []string{"negative: -5", "use a positive number"}, "RAISE message and hint")
}

func transactionAbortedUntilRollback(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE tx_pgx (id int PRIMARY KEY)")
	tx, err := c.Begin(t.ctx)
	must(err, "Begin")
	eq(string(c.PgConn().TxStatus()), "T", "status in a transaction")
	t.exec(tx, "INSERT INTO tx_pgx VALUES ($1)", 1)
	_, err = tx.Exec(t.ctx, "INSERT INTO tx_pgx VALUES ($1)", 1)
	pgErr(err, "23505", "duplicate")
	eq(string(c.PgConn().TxStatus()), "E", "status after the error")
	_, err = tx.Exec(t.ctx, "INSERT INTO tx_pgx VALUES ($1)", 2)
	pgErr(err, "25P02", "statement in an aborted transaction")
	var n int
	err = tx.QueryRow(t.ctx, "SELECT 1").Scan(&n)
	pgErr(err, "25P02", "query in an aborted transaction")
	// COMMIT of a failed transaction rolls back; pgx reports it as ErrTxCommitRollback.
	err = tx.Commit(t.ctx)
	if !errors.Is(err, pgx.ErrTxCommitRollback) {
		fail("Commit of an aborted transaction: got %v, want pgx.ErrTxCommitRollback", err)
	}
	eq(string(c.PgConn().TxStatus()), "I", "status after the commit")
	eq(t.int(c, "SELECT count(*) FROM tx_pgx"), int64(0), "rows after the rolled back transaction")
	// Rollback of an aborted transaction.
	tx, err = c.Begin(t.ctx)
	must(err, "Begin")
	_, err = tx.Exec(t.ctx, "SELECT 1/0")
	pgErr(err, "22012", "division by zero")
	must(tx.Rollback(t.ctx), "Rollback")
	eq(string(c.PgConn().TxStatus()), "I", "status after the rollback")
}

func savepointsAndBeginFunc(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE sp_pgx (id int PRIMARY KEY)")
	tx, err := c.Begin(t.ctx)
	must(err, "Begin")
	t.exec(tx, "INSERT INTO sp_pgx VALUES ($1)", 1)
	nested, err := tx.Begin(t.ctx) // SAVEPOINT
	must(err, "nested Begin")
	_, err = nested.Exec(t.ctx, "INSERT INTO sp_pgx VALUES ($1)", 1)
	pgErr(err, "23505", "duplicate in the savepoint")
	must(nested.Rollback(t.ctx), "ROLLBACK TO SAVEPOINT")
	t.exec(tx, "INSERT INTO sp_pgx VALUES ($1)", 2)
	nested, err = tx.Begin(t.ctx)
	must(err, "second nested Begin")
	t.exec(nested, "INSERT INTO sp_pgx VALUES ($1)", 3)
	must(nested.Commit(t.ctx), "RELEASE SAVEPOINT")
	must(tx.Commit(t.ctx), "Commit")
	rows, err := c.Query(t.ctx, "SELECT id FROM sp_pgx ORDER BY id")
	must(err, "select")
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	must(err, "rows")
	eq(ids, []int32{1, 2, 3}, "rows after savepoints")
	// BeginFunc commits when the function succeeds and rolls back when it fails.
	must(pgx.BeginFunc(t.ctx, c, func(tx pgx.Tx) error {
		_, err := tx.Exec(t.ctx, "INSERT INTO sp_pgx VALUES ($1)", 4)
		return err
	}), "BeginFunc")
	boom := errors.New("boom")
	err = pgx.BeginFunc(t.ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.ctx, "INSERT INTO sp_pgx VALUES ($1)", 5); err != nil {
			return err
		}
		return boom
	})
	eq(errors.Is(err, boom), true, "BeginFunc returns the function's error")
	eq(t.int(c, "SELECT count(*) FROM sp_pgx"), int64(4), "rows after BeginFunc")
}

func isolationLevels(t *T) {
	c := t.connect()
	for _, l := range []struct {
		level pgx.TxIsoLevel
		name  string
	}{{pgx.ReadCommitted, "read committed"}, {pgx.RepeatableRead, "repeatable read"},
		{pgx.Serializable, "serializable"}, {pgx.ReadUncommitted, "read uncommitted"}} {
		tx, err := c.BeginTx(t.ctx, pgx.TxOptions{IsoLevel: l.level})
		must(err, "BeginTx "+l.name)
		eq(t.str(tx, "SHOW transaction_isolation"), l.name, "transaction_isolation")
		must(tx.Commit(t.ctx), "Commit")
	}
	tx, err := c.BeginTx(t.ctx, pgx.TxOptions{IsoLevel: pgx.Serializable, AccessMode: pgx.ReadOnly, DeferrableMode: pgx.Deferrable})
	must(err, "BeginTx serializable read only deferrable")
	eq([]string{t.str(tx, "SHOW transaction_isolation"), t.str(tx, "SHOW transaction_read_only"), t.str(tx, "SHOW transaction_deferrable")},
		[]string{"serializable", "on", "on"}, "serializable read only deferrable")
	must(tx.Commit(t.ctx), "Commit")
	eq(t.str(c, "SHOW transaction_isolation"), "read committed", "the default after the transactions")
}

func txReadOnlyAndSessionDefaults(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE ro_pgx (id int)")
	tx, err := c.BeginTx(t.ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	must(err, "BeginTx read only")
	eq(t.str(tx, "SHOW transaction_read_only"), "on", "transaction_read_only")
	_, err = tx.Exec(t.ctx, "INSERT INTO ro_pgx VALUES ($1)", 1)
	pgErr(err, "25006", "INSERT in a read-only transaction")
	must(tx.Rollback(t.ctx), "Rollback")
	tx, err = c.BeginTx(t.ctx, pgx.TxOptions{AccessMode: pgx.ReadWrite})
	must(err, "BeginTx read write")
	eq(t.str(tx, "SHOW transaction_read_only"), "off", "transaction_read_only in a read-write transaction")
	t.exec(tx, "INSERT INTO ro_pgx VALUES ($1)", 1)
	must(tx.Commit(t.ctx), "Commit")
	// SET SESSION CHARACTERISTICS changes the default for later transactions.
	t.exec(c, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	tx, err = c.Begin(t.ctx)
	must(err, "Begin")
	eq(t.str(tx, "SHOW transaction_isolation"), "repeatable read", "session default isolation")
	must(tx.Commit(t.ctx), "Commit")
}

func repeatableReadSnapshot(t *T) {
	a, b := t.connect(), t.connect()
	t.exec(a, "CREATE TABLE rr_pgx (id int PRIMARY KEY)")
	t.exec(a, "INSERT INTO rr_pgx VALUES (1)")
	tx, err := a.BeginTx(t.ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	must(err, "BeginTx repeatable read")
	eq(t.int(tx, "SELECT count(*) FROM rr_pgx"), int64(1), "first read")
	t.exec(b, "INSERT INTO rr_pgx VALUES ($1)", 2)
	eq(t.int(tx, "SELECT count(*) FROM rr_pgx"), int64(1), "repeatable read keeps its snapshot")
	_, err = tx.Exec(t.ctx, "UPDATE rr_pgx SET id = id + 10 WHERE id = $1", 1)
	must(err, "update a row nobody else changed")
	must(tx.Commit(t.ctx), "Commit")
	tx, err = a.BeginTx(t.ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	must(err, "BeginTx read committed")
	eq(t.int(tx, "SELECT count(*) FROM rr_pgx"), int64(2), "read committed first read")
	t.exec(b, "INSERT INTO rr_pgx VALUES ($1)", 3)
	eq(t.int(tx, "SELECT count(*) FROM rr_pgx"), int64(3), "read committed sees the new commit")
	must(tx.Commit(t.ctx), "Commit")
	// A repeatable read transaction that updates a row changed since its snapshot fails with 40001.
	tx, err = a.BeginTx(t.ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	must(err, "BeginTx repeatable read")
	eq(t.int(tx, "SELECT count(*) FROM rr_pgx"), int64(3), "snapshot")
	t.exec(b, "UPDATE rr_pgx SET id = 20 WHERE id = 2")
	_, err = tx.Exec(t.ctx, "UPDATE rr_pgx SET id = 30 WHERE id = 2")
	pgErr(err, "40001", "update of a row changed after the snapshot")
	tx.Rollback(t.ctx)
}

func serializableWriteSkew(t *T) {
	setup := t.connect()
	t.exec(setup, "CREATE TABLE oncall_pgx (name text PRIMARY KEY, on_duty bool)")
	t.exec(setup, "INSERT INTO oncall_pgx VALUES ('a', true), ('b', true)")
	a, b := t.connect(), t.connect()
	ta, err := a.BeginTx(t.ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	must(err, "BeginTx a")
	defer ta.Rollback(t.ctx)
	tb, err := b.BeginTx(t.ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	must(err, "BeginTx b")
	defer tb.Rollback(t.ctx)
	eq(t.int(ta, "SELECT count(*) FROM oncall_pgx WHERE on_duty"), int64(2), "a sees two on duty")
	eq(t.int(tb, "SELECT count(*) FROM oncall_pgx WHERE on_duty"), int64(2), "b sees two on duty")
	t.exec(ta, "UPDATE oncall_pgx SET on_duty = false WHERE name = $1", "a")
	t.exec(tb, "UPDATE oncall_pgx SET on_duty = false WHERE name = $1", "b")
	must(ta.Commit(t.ctx), "commit a")
	err = tb.Commit(t.ctx)
	pgErr(err, "40001", "commit b (write skew under SERIALIZABLE)")
	eq(t.int(setup, "SELECT count(*) FROM oncall_pgx WHERE on_duty"), int64(1), "one still on duty")
}

func listenNotify(t *T) {
	listener, sender := t.connect(), t.connect()
	t.exec(listener, "LISTEN jobs_pgx")
	t.exec(sender, "NOTIFY jobs_pgx, 'first'")
	t.exec(sender, "SELECT pg_notify($1, $2)", "jobs_pgx", "second")
	wait := func(d time.Duration) (*pgconn.Notification, error) {
		ctx, cancel := context.WithTimeout(t.ctx, d)
		defer cancel()
		return listener.WaitForNotification(ctx)
	}
	for _, want := range []string{"first", "second"} {
		n, err := wait(5 * time.Second)
		must(err, "WaitForNotification")
		eq([]any{n.Channel, n.Payload, n.PID}, []any{"jobs_pgx", want, sender.PgConn().PID()}, "notification")
	}
	// Nothing more: the wait ends with the context's deadline and the connection stays usable.
	start := time.Now()
	_, err := wait(300 * time.Millisecond)
	if err == nil || !pgconn.Timeout(err) {
		fail("waiting with nothing sent: got %v, want a timeout", err)
	}
	if time.Since(start) > 3*time.Second {
		fail("the wait overran its deadline: %s", time.Since(start))
	}
	eq(t.int(listener, "SELECT 1"), int64(1), "listener usable after a timed-out wait")
	// A NOTIFY in a transaction is delivered at commit, and a rolled-back one never.
	tx, err := sender.Begin(t.ctx)
	must(err, "Begin")
	t.exec(tx, "NOTIFY jobs_pgx, 'third'")
	if n, err := wait(300 * time.Millisecond); err == nil {
		fail("notification %q before the commit", n.Payload)
	}
	must(tx.Commit(t.ctx), "Commit")
	n, err := wait(5 * time.Second)
	must(err, "WaitForNotification after the commit")
	eq(n.Payload, "third", "notification after the commit")
	tx, err = sender.Begin(t.ctx)
	must(err, "Begin")
	t.exec(tx, "NOTIFY jobs_pgx, 'never'")
	must(tx.Rollback(t.ctx), "Rollback")
	// A notification that arrives while the listener runs a query waits for the next wait.
	t.exec(sender, "NOTIFY jobs_pgx, 'fourth'")
	eq(t.int(listener, "SELECT 2"), int64(2), "query while a notification is pending")
	n, err = wait(5 * time.Second)
	must(err, "notification received during a query")
	eq(n.Payload, "fourth", "notification received during a query")
	t.exec(listener, "UNLISTEN jobs_pgx")
	t.exec(sender, "NOTIFY jobs_pgx, 'after unlisten'")
	if n, err := wait(300 * time.Millisecond); err == nil {
		fail("notification %q after UNLISTEN", n.Payload)
	}
}

func advisoryLocks(t *T) {
	a, b := t.connect(), t.connect()
	var ok bool
	t.get(a, into(&ok), "SELECT pg_try_advisory_lock($1)", int64(42))
	eq(ok, true, "a locks 42")
	t.get(b, into(&ok), "SELECT pg_try_advisory_lock($1)", int64(42))
	eq(ok, false, "b cannot lock 42")
	t.get(a, into(&ok), "SELECT pg_advisory_unlock($1)", int64(42))
	eq(ok, true, "a unlocks 42")
	t.get(b, into(&ok), "SELECT pg_try_advisory_lock($1)", int64(42))
	eq(ok, true, "b locks 42 after a unlocked it")
	t.get(b, into(&ok), "SELECT pg_advisory_unlock($1)", int64(42))
	eq(ok, true, "b unlocks 42")
	// A transaction-level lock is released at commit.
	tx, err := a.Begin(t.ctx)
	must(err, "Begin")
	t.exec(tx, "SELECT pg_advisory_xact_lock($1)", int64(7))
	t.get(b, into(&ok), "SELECT pg_try_advisory_lock($1)", int64(7))
	eq(ok, false, "b cannot lock 7 while a's transaction holds it")
	must(tx.Commit(t.ctx), "Commit")
	t.get(b, into(&ok), "SELECT pg_try_advisory_lock($1)", int64(7))
	eq(ok, true, "b locks 7 after the commit")
	// A blocking lock waits for the holder.
	released := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, err := b.Exec(t.ctx, "SELECT pg_advisory_unlock_all()")
		released <- err
	}()
	start := time.Now()
	t.exec(a, "SELECT pg_advisory_lock($1)", int64(7))
	if time.Since(start) < 200*time.Millisecond {
		fail("pg_advisory_lock did not wait for the holder")
	}
	must(<-released, "pg_advisory_unlock_all")
	t.get(a, into(&ok), "SELECT pg_advisory_unlock($1)", int64(7))
	eq(ok, true, "a unlocks 7")
}

func schemaMigrationInTransaction(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE mig_pgx (id int PRIMARY KEY, n int, code text)")
	t.exec(c, "INSERT INTO mig_pgx VALUES (1, 10, '42')")
	tx, err := c.Begin(t.ctx)
	must(err, "Begin")
	t.exec(tx, "ALTER TABLE mig_pgx ADD COLUMN note text DEFAULT 'x'")
	t.exec(tx, "ALTER TABLE mig_pgx ALTER COLUMN n TYPE bigint")
	t.exec(tx, "ALTER TABLE mig_pgx ALTER COLUMN code TYPE int USING code::int")
	t.exec(tx, "CREATE INDEX mig_pgx_n ON mig_pgx (n)")
	t.exec(tx, "ALTER TABLE mig_pgx RENAME COLUMN note TO remark")
	t.exec(tx, "CREATE TABLE schema_migrations_pgx (version bigint PRIMARY KEY)")
	t.exec(tx, "INSERT INTO schema_migrations_pgx VALUES ($1)", int64(20240101))
	must(tx.Commit(t.ctx), "Commit")
	var n int64
	var remark string
	var code int32
	rows, err := c.Query(t.ctx, "SELECT n, remark, code FROM mig_pgx")
	must(err, "select after the migration")
	oids := []uint32{}
	for _, f := range rows.FieldDescriptions() {
		oids = append(oids, f.DataTypeOID)
	}
	if !rows.Next() {
		fail("no row after the migration: %v", rows.Err())
	}
	must(rows.Scan(&n, &remark, &code), "scan")
	rows.Close()
	eq([]any{n, remark, code}, []any{int64(10), "x", int32(42)}, "row after the migration")
	eq(oids, []uint32{20, 25, 23}, "column types after the migration")
	rows, err = c.Query(t.ctx, "SELECT column_name::text, data_type::text FROM information_schema.columns WHERE table_name = 'mig_pgx' ORDER BY ordinal_position")
	must(err, "information_schema.columns")
	var cols []string
	for rows.Next() {
		var name, typ string
		must(rows.Scan(&name, &typ), "scan")
		cols = append(cols, name+" "+typ)
	}
	must(rows.Err(), "rows")
	eq(cols, []string{"id integer", "n bigint", "code integer", "remark text"}, "information_schema.columns")
	eq(t.str(c, "SELECT indexname::text FROM pg_indexes WHERE tablename = 'mig_pgx' AND indexname = 'mig_pgx_n'"), "mig_pgx_n", "pg_indexes")
	eq(t.int(c, "SELECT max(version) FROM schema_migrations_pgx"), int64(20240101), "schema_migrations")
}

func ddlRollsBack(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE ddl_keep_pgx (id int)")
	tx, err := c.Begin(t.ctx)
	must(err, "Begin")
	t.exec(tx, "CREATE TABLE ddl_rb_pgx (id int PRIMARY KEY)")
	t.exec(tx, "INSERT INTO ddl_rb_pgx VALUES (1)")
	t.exec(tx, "ALTER TABLE ddl_keep_pgx ADD COLUMN extra text")
	t.exec(tx, "DROP TABLE ddl_keep_pgx")
	must(tx.Rollback(t.ctx), "Rollback")
	var missing, kept bool
	t.get(c, into(&missing, &kept), "SELECT to_regclass('ddl_rb_pgx') IS NULL, to_regclass('ddl_keep_pgx') IS NOT NULL")
	eq([]bool{missing, kept}, []bool{true, true}, "tables after the rollback")
	eq(t.int(c, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'ddl_keep_pgx'"), int64(1), "columns after the rollback")
}

func catalogTables(t *T, c *pgx.Conn, suffix string) {
	t.exec(c, "CREATE TABLE cat_parent_"+suffix+" (id int PRIMARY KEY)")
	t.exec(c, "CREATE TABLE cat_child_"+suffix+" (id int PRIMARY KEY, p int REFERENCES cat_parent_"+suffix+" (id), label varchar(20))")
}

func catalogRegclassRegtype(t *T) {
	c := t.connect()
	catalogTables(t, c, "a")
	var exists bool
	var typ string
	t.get(c, into(&exists, &typ), "SELECT to_regclass('cat_child_a') IS NOT NULL, to_regtype('int4')::text")
	eq([]any{exists, typ}, []any{true, "integer"}, "to_regclass, to_regtype")
	var missing bool
	t.get(c, into(&missing), "SELECT to_regclass('cat_nosuch') IS NULL")
	eq(missing, true, "to_regclass of a missing table")
	var relname string
	t.get(c, into(&relname), "SELECT relname::text FROM pg_class WHERE oid = 'cat_child_a'::regclass")
	eq(relname, "cat_child_a", "::regclass")
	var regtype string
	t.get(c, into(&regtype), "SELECT 'varchar'::regtype::text")
	eq(regtype, "character varying", "::regtype::text")
}

func catalogForeignKeys(t *T) {
	c := t.connect()
	catalogTables(t, c, "b")
	rows, err := c.Query(t.ctx, `
		SELECT con.conname::text, cl.relname::text
		FROM pg_constraint con JOIN pg_class cl ON cl.oid = con.confrelid
		WHERE con.contype = 'f' AND con.conrelid = 'cat_child_b'::regclass`)
	must(err, "pg_constraint")
	var fks []string
	for rows.Next() {
		var name, rel string
		must(rows.Scan(&name, &rel), "scan")
		fks = append(fks, name+" -> "+rel)
	}
	must(rows.Err(), "rows")
	eq(fks, []string{"cat_child_b_p_fkey -> cat_parent_b"}, "foreign keys")
	rows, err = c.Query(t.ctx, `
		SELECT tc.constraint_name::text, tc.constraint_type::text
		FROM information_schema.table_constraints tc
		WHERE tc.table_name = $1 ORDER BY tc.constraint_type`, "cat_child_b")
	must(err, "information_schema.table_constraints")
	var cons []string
	for rows.Next() {
		var name, typ string
		must(rows.Scan(&name, &typ), "scan")
		if typ != "CHECK" { // NOT NULL constraints show as CHECK rows
			cons = append(cons, name+" "+typ)
		}
	}
	must(rows.Err(), "rows")
	eq(cons, []string{"cat_child_b_p_fkey FOREIGN KEY", "cat_child_b_pkey PRIMARY KEY"}, "table_constraints")
}

func catalogColumnsAndIndexes(t *T) {
	c := t.connect()
	catalogTables(t, c, "c")
	rows, err := c.Query(t.ctx, `
		SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull
		FROM pg_attribute a
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attnum`, "cat_child_c")
	must(err, "pg_attribute")
	var cols []string
	for rows.Next() {
		var name, ftype string
		var notNull bool
		must(rows.Scan(&name, &ftype, &notNull), "scan")
		cols = append(cols, fmt.Sprintf("%s %s %v", name, ftype, notNull))
	}
	must(rows.Err(), "rows")
	eq(cols, []string{"id integer true", "p integer false", "label character varying(20) false"}, "pg_attribute")
	var primary bool
	t.get(c, into(&primary), "SELECT indisprimary FROM pg_index WHERE indrelid = 'cat_child_c'::regclass")
	eq(primary, true, "pg_index.indisprimary")
	var nspname string
	t.get(c, into(&nspname), "SELECT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = $1", "cat_child_c")
	eq(nspname, "public", "namespace")
}

func setReturningFunctionInSelectList(t *T) {
	c := t.connect()
	for _, m := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		rows, err := c.Query(t.ctx, "SELECT generate_series(1, 3)", m)
		must(err, "generate_series in the select list")
		series, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		must(err, "rows")
		eq(series, []int32{1, 2, 3}, "generate_series in the select list")
	}
}

type pairPgx struct {
	A int32
	B string
}

func loadTypes(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TYPE mood_pgx AS ENUM ('sad', 'ok', 'happy')")
	t.exec(c, "CREATE TYPE pair_pgx AS (a int, b text)")
	t.exec(c, "CREATE DOMAIN posint_pgx AS int CHECK (VALUE > 0)")
	types, err := c.LoadTypes(t.ctx, []string{"mood_pgx", "_mood_pgx", "pair_pgx", "_pair_pgx", "posint_pgx"})
	must(err, "LoadTypes")
	c.TypeMap().RegisterTypes(types)
	checkRegistered(t, c)
}

func loadTypeOneByOne(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TYPE mood_pgx1 AS ENUM ('sad', 'ok', 'happy')")
	t.exec(c, "CREATE TYPE pair_pgx1 AS (a int, b text)")
	t.exec(c, "CREATE DOMAIN posint_pgx1 AS int CHECK (VALUE > 0)")
	for _, name := range []string{"mood_pgx1", "_mood_pgx1", "pair_pgx1", "_pair_pgx1", "posint_pgx1"} {
		typ, err := c.LoadType(t.ctx, name)
		must(err, "LoadType "+name)
		c.TypeMap().RegisterType(typ)
	}
	checkRegistered(t, c, "1")
}

func checkRegistered(t *T, c *pgx.Conn, suffix ...string) {
	s := strings.Join(suffix, "")
	var moods []string
	t.get(c, into(&moods), "SELECT $1::mood_pgx"+s+"[]", []string{"happy", "sad"})
	eq(moods, []string{"happy", "sad"}, "enum array")
	var mood string
	t.get(c, into(&mood), "SELECT 'ok'::mood_pgx"+s)
	eq(mood, "ok", "enum")
	var p pairPgx
	t.get(c, into(&p), "SELECT ROW(1, 'x')::pair_pgx"+s)
	eq(p, pairPgx{1, "x"}, "composite into a struct")
	var ps []pairPgx
	t.get(c, into(&ps), "SELECT ARRAY[ROW(1, 'x'), ROW(2, 'y')]::pair_pgx"+s+"[]")
	if len(ps) != 2 || ps[1].A != 2 {
		fail("composite array: %+v", ps)
	}
	var back pairPgx
	t.get(c, into(&back), "SELECT $1::pair_pgx"+s, pairPgx{7, "seven"})
	eq(back, pairPgx{7, "seven"}, "composite parameter")
	var pos int32
	t.get(c, into(&pos), "SELECT $1::posint_pgx"+s, 5)
	eq(pos, int32(5), "domain")
	var n int32
	err := c.QueryRow(t.ctx, "SELECT $1::posint_pgx"+s, -1).Scan(&n)
	pgErr(err, "23514", "domain check")
}

func poolResetQueries(t *T) {
	c := t.connect()
	simple := pgx.QueryExecModeSimpleProtocol
	t.exec(c, "SET application_name = 'pooled'")
	t.exec(c, "SET statement_timeout = '5s'")
	t.exec(c, "DISCARD ALL")
	eq(t.str(c, "SHOW application_name", simple), "", "application_name after DISCARD ALL")
	eq(t.str(c, "SHOW statement_timeout", simple), "0", "statement_timeout after DISCARD ALL")
	t.exec(c, "SET work_mem = '8MB'")
	t.exec(c, "RESET ALL")
	eq(t.str(c, "SHOW work_mem", simple), "4MB", "work_mem after RESET ALL")
	// DISCARD ALL dropped the server's statements: pgx must be told (DeallocateAll) before reuse.
	must(c.DeallocateAll(t.ctx), "DeallocateAll")
	eq(t.int(c, "SELECT $1::int", 3), int64(3), "prepared statement after the reset")
	t.exec(c, "SELECT pg_advisory_unlock_all()")
	// DISCARD ALL also releases session advisory locks.
	t.exec(c, "SELECT pg_advisory_lock(99)")
	t.exec(c, "DISCARD ALL")
	var ok bool
	t.get(t.connect(), into(&ok), "SELECT pg_try_advisory_lock(99)")
	eq(ok, true, "advisory lock after DISCARD ALL")
}

func pgxpoolParallel(t *T) {
	cfg, err := pgxpool.ParseConfig("")
	must(err, "pgxpool.ParseConfig")
	cfg.MaxConns = 4
	var connects atomic.Int32
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		connects.Add(1)
		_, err := c.Exec(ctx, "SET application_name = 'pgx_pool'")
		return err
	}
	pool, err := pgxpool.NewWithConfig(t.ctx, cfg)
	must(err, "pgxpool.NewWithConfig")
	t.onClose(pool.Close)
	t.exec(pool, "CREATE TABLE pool_pgx (id int PRIMARY KEY, worker int, at timestamptz DEFAULT now())")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	pids := map[uint32]bool{}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			report := func(err error, what string) bool {
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("worker %d %s: %s", w, what, describe(err)))
					mu.Unlock()
				}
				return err != nil
			}
			for i := 0; i < 25; i++ {
				if _, err := pool.Exec(t.ctx, "INSERT INTO pool_pgx (id, worker) VALUES ($1, $2)", w*1000+i, w); report(err, "insert") {
					return
				}
			}
			// A transaction on one pooled connection.
			err := pgx.BeginFunc(t.ctx, pool, func(tx pgx.Tx) error {
				for i := 25; i < 50; i++ {
					if _, err := tx.Exec(t.ctx, "INSERT INTO pool_pgx (id, worker) VALUES ($1, $2)", w*1000+i, w); err != nil {
						return err
					}
				}
				var n int64
				if err := tx.QueryRow(t.ctx, "SELECT count(*) FROM pool_pgx WHERE worker = $1", w).Scan(&n); err != nil {
					return err
				}
				if n != 50 {
					return fmt.Errorf("worker sees %d of its rows", n)
				}
				return nil
			})
			if report(err, "transaction") {
				return
			}
			conn, err := pool.Acquire(t.ctx)
			if report(err, "acquire") {
				return
			}
			defer conn.Release()
			var app string
			if report(conn.QueryRow(t.ctx, "SHOW application_name").Scan(&app), "SHOW") {
				return
			}
			if app != "pgx_pool" {
				report(fmt.Errorf("application_name %q", app), "AfterConnect")
			}
			mu.Lock()
			pids[conn.Conn().PgConn().PID()] = true
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	if len(errs) > 0 {
		sort.Strings(errs)
		fail("%s", strings.Join(errs, "; "))
	}
	eq(t.int(pool, "SELECT count(*) FROM pool_pgx"), int64(400), "rows from the workers")
	eq(t.int(pool, "SELECT count(DISTINCT worker) FROM pool_pgx"), int64(8), "workers")
	st := pool.Stat()
	if st.MaxConns() != 4 || st.TotalConns() > 4 || connects.Load() > 4 || connects.Load() < 1 || len(pids) > 4 {
		fail("pool: max %d total %d connects %d distinct backends %d", st.MaxConns(), st.TotalConns(), connects.Load(), len(pids))
	}
	// Hold every connection: the next Acquire waits until one is released.
	var held []*pgxpool.Conn
	for i := 0; i < 4; i++ {
		conn, err := pool.Acquire(t.ctx)
		must(err, "acquire all")
		held = append(held, conn)
	}
	ctx, cancel := context.WithTimeout(t.ctx, 200*time.Millisecond)
	_, err = pool.Acquire(ctx)
	cancel()
	if err == nil {
		fail("acquired a fifth connection from a pool of four")
	}
	for _, conn := range held {
		conn.Release()
	}
	eq(t.int(pool, "SELECT 5"), int64(5), "query after the release")
}

func concurrentConnections(t *T) {
	setup := t.connect()
	t.exec(setup, "CREATE TABLE conc_pgx (id int PRIMARY KEY)")
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c, err := pgx.ConnectConfig(t.ctx, t.config())
			if err != nil {
				errs <- describe(err)
				return
			}
			defer c.Close(context.Background())
			for i := 0; i < 50; i++ {
				if _, err := c.Exec(t.ctx, "INSERT INTO conc_pgx VALUES ($1)", w*1000+i); err != nil {
					errs <- describe(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		fail("worker: %s", e)
	}
	eq(t.int(setup, "SELECT count(*) FROM conc_pgx"), int64(400), "rows")
}

func cancelAndTimeouts(t *T) {
	c := t.connect()
	// statement_timeout ends a long statement with 57014.
	t.exec(c, "SET statement_timeout = '200ms'")
	_, err := c.Exec(t.ctx, "SELECT pg_sleep(3)")
	pgErr(err, "57014", "statement_timeout")
	t.exec(c, "SET statement_timeout = 0")
	eq(t.int(c, "SELECT 1"), int64(1), "after the statement timeout")
	// A cancel request from another goroutine.
	go func() {
		time.Sleep(300 * time.Millisecond)
		ctx, cancel := context.WithTimeout(t.ctx, 3*time.Second)
		defer cancel()
		c.PgConn().CancelRequest(ctx)
	}()
	start := time.Now()
	_, err = c.Exec(t.ctx, "SELECT pg_sleep(5)")
	pgErr(err, "57014", "CancelRequest")
	if time.Since(start) > 3*time.Second {
		fail("the cancel took %s", time.Since(start))
	}
	eq(t.int(c, "SELECT 2"), int64(2), "after the cancel")
	// A context deadline interrupts the query; pgx asks the server to cancel it.
	d := t.connect()
	ctx, cancel := context.WithTimeout(t.ctx, 300*time.Millisecond)
	start = time.Now()
	_, err = d.Exec(ctx, "SELECT pg_sleep(5)")
	cancel()
	if err == nil || !pgconn.Timeout(err) {
		fail("query past its context deadline: got %v, want a timeout", err)
	}
	if time.Since(start) > 3*time.Second {
		fail("the deadline took %s", time.Since(start))
	}
	eq(t.int(t.connect(), "SELECT 3"), int64(3), "a new connection after the deadline")
}

func init() {
	addCase("connect_and_server_parameters", connectionParameters)
	addCase("connect_errors", connectErrors)
	addCase("crud_with_returning_and_command_tags", crudWithReturning)
	addCase("errors_constraint_violations", errorsConstraintViolations)
	addCase("errors_syntax_and_position", errorsSyntaxAndPosition)
	addCase("transaction_aborted_until_rollback", transactionAbortedUntilRollback)
	addCase("savepoints_and_begin_func", savepointsAndBeginFunc)
	addCase("isolation_levels", isolationLevels)
	addCase("tx_read_only_and_session_defaults", txReadOnlyAndSessionDefaults)
	addCase("repeatable_read_snapshot", repeatableReadSnapshot)
	addCase("serializable_detects_write_skew", serializableWriteSkew)
	addCase("listen_notify", listenNotify)
	addCase("advisory_locks", advisoryLocks)
	addCase("schema_migration_in_a_transaction", schemaMigrationInTransaction)
	addCase("ddl_rolls_back", ddlRollsBack)
	addCase("catalog_regclass_and_regtype", catalogRegclassRegtype)
	addCase("catalog_foreign_keys", catalogForeignKeys)
	addCase("catalog_columns_and_indexes", catalogColumnsAndIndexes)
	addCase("set_returning_function_in_select_list", setReturningFunctionInSelectList)
	addCase("load_types_enum_composite_domain", loadTypes)
	addCase("load_type_one_by_one", loadTypeOneByOne)
	addCase("pool_reset_queries", poolResetQueries)
	addCase("pgxpool_parallel_goroutines", pgxpoolParallel)
	addCase("concurrent_connections", concurrentConnections)
	addCase("cancel_and_timeouts", cancelAndTimeouts)
}
