package main

// The extended protocol as pgx drives it: QueryExecModes, the parameter types the server
// describes, the statement cache, named prepared statements, batches, field descriptions,
// COPY (binary CopyFrom and pgconn's text COPY), streaming rows and SQL cursors.

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// execMode runs what an application does with scalar parameters (uuid keys in three Go forms,
// int, numeric, timestamptz, NULL) with the connection's default QueryExecMode set to mode.
func execMode(t *T, mode pgx.QueryExecMode, table string) {
	c := t.connect(withMode(mode))
	t.exec(c, "CREATE TABLE "+table+" (id uuid PRIMARY KEY, n int4 NOT NULL, amount numeric(12,2), at timestamptz)")
	for i := 0; i < 3; i++ {
		tag := t.exec(c, "INSERT INTO "+table+" (id, n, amount, at) VALUES ($1, $2, $3, $4)",
			uid(i), int32(i+1), num(fmt.Sprintf("%d.25", i)), time.Date(2024, 1, 1+i, 12, 0, 0, 0, time.UTC))
		eq(tag.RowsAffected(), int64(1), "INSERT rows affected")
	}
	eq(t.int(c, "SELECT n FROM "+table+" WHERE id = $1", uid(1)), int64(2), "WHERE id = $1 (pgtype.UUID)")
	if mode != pgx.QueryExecModeExec && mode != pgx.QueryExecModeSimpleProtocol {
		// Only where the server described the parameter as uuid can pgx encode a bare [16]byte.
		eq(t.int(c, "SELECT n FROM "+table+" WHERE id = $1", uid(2).Bytes), int64(3), "WHERE id = $1 ([16]byte)")
	}
	eq(t.int(c, "SELECT n FROM "+table+" WHERE id = $1", uid(0).String()), int64(1), "WHERE id = $1 (string)")
	var id pgtype.UUID
	t.get(c, into(&id), "SELECT id FROM "+table+" WHERE n = $1", int32(3))
	eq(id, uid(2), "uuid column into pgtype.UUID")
	var amount pgtype.Numeric
	t.get(c, into(&amount), "SELECT amount FROM "+table+" WHERE id = $1", uid(1))
	eq(numStr(amount), "1.25", "numeric(12,2) column")
	var total pgtype.Numeric
	t.get(c, into(&total), "SELECT sum(amount) + $1 FROM "+table, num("0.01"))
	eq(numStr(total), "3.76", "sum(amount) + $1")
	eq(t.int(c, "SELECT count(*) FROM "+table+" WHERE at >= $1", time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)), int64(2), "at >= $1")
	eq(t.int(c, "SELECT count(*) FROM "+table+" WHERE $1::int IS NULL", nil), int64(3), "NULL parameter")
	// The same statements again: served from pgx's caches where the mode has them.
	for i := 0; i < 6; i++ {
		eq(t.int(c, "SELECT n FROM "+table+" WHERE id = $1", uid(i%3)), int64(i%3+1), "repeated WHERE id = $1")
	}
	var n int32
	var at time.Time
	t.get(c, into(&n, &amount, &at), "UPDATE "+table+" SET n = n + $1, amount = amount * $2 WHERE id = $3 RETURNING n, amount, at",
		int32(10), num("2"), uid(0))
	eq([]any{n, numStr(amount)}, []any{int32(11), "0.50"}, "UPDATE RETURNING")
	if !at.Equal(time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)) {
		fail("UPDATE RETURNING timestamptz: got %s", at)
	}
	tag := t.exec(c, "DELETE FROM "+table+" WHERE id = $1 OR n = $2", uid(1), int32(3))
	eq(tag.RowsAffected(), int64(2), "DELETE rows affected")
}

// arrayAndJSONParams: array parameters (= ANY($1) with []int32, $1::text[]), a text[] column and
// a jsonb column, in one QueryExecMode.
func arrayAndJSONParams(t *T, mode pgx.QueryExecMode, table string) {
	c := t.connect(withMode(mode))
	t.exec(c, "CREATE TABLE "+table+" (id uuid PRIMARY KEY, n int4 NOT NULL)")
	for i := 0; i < 3; i++ {
		t.exec(c, "INSERT INTO "+table+" (id, n) VALUES ($1, $2)", uid(i), int32(i+1))
	}
	eq(t.int(c, "SELECT count(*) FROM "+table+" WHERE n = ANY($1)", []int32{1, 3, 9}), int64(2), "n = ANY($1) with []int32")
	eq(t.int(c, "SELECT count(*) FROM "+table+" WHERE id = ANY($1)", []pgtype.UUID{uid(0), uid(2), uid(9)}), int64(2), "id = ANY($1) with uuids")
	var strs []string
	t.get(c, into(&strs), "SELECT $1::text[]", []string{"a", "b c"})
	eq(strs, []string{"a", "b c"}, "SELECT $1::text[]")
	var ids []int32
	t.get(c, into(&ids), "SELECT array_agg(n ORDER BY n) FROM "+table)
	eq(ids, []int32{1, 2, 3}, "array_agg into []int32")
	// Array and jsonb columns.
	t.exec(c, "ALTER TABLE "+table+" ADD COLUMN tags text[], ADD COLUMN doc jsonb")
	for i := 0; i < 3; i++ {
		t.exec(c, "UPDATE "+table+" SET tags = $1, doc = $2 WHERE id = $3",
			[]string{"t", fmt.Sprint("g", i%2)}, jsonArg(mode, map[string]any{"i": i}), uid(i))
	}
	eq(t.int(c, "SELECT count(*) FROM "+table+" WHERE tags @> $1::text[]", []string{"g1"}), int64(1), "tags @> $1::text[]")
	eq(t.int(c, "SELECT count(*) FROM "+table+" WHERE doc @> $1", jsonArg(mode, map[string]any{"i": 2})), int64(1), "doc @> $1")
	var tags []string
	var doc map[string]any
	t.get(c, into(&tags, &doc), "UPDATE "+table+" SET tags = tags || $1::text[], doc = doc || $2::jsonb WHERE id = $3 RETURNING tags, doc",
		[]string{"new"}, jsonArg(mode, map[string]any{"k": "v"}), uid(0))
	eq(tags, []string{"t", "g0", "new"}, "UPDATE RETURNING text[]")
	eq(doc, map[string]any{"i": 0.0, "k": "v"}, "UPDATE RETURNING jsonb")
}

type describedStatement struct {
	sql    string
	params []uint32
	fields []uint32
}

// checkDescribed prepares each statement and compares the parameter and result types the server
// describes, which pgx uses to choose each value's encoding.
func checkDescribed(t *T, c *pgx.Conn, prefix string, stmts []describedStatement) {
	var failures []string
	for i, s := range stmts {
		sd, err := c.Prepare(t.ctx, fmt.Sprintf("%s_%d", prefix, i), s.sql)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %s", s.sql, describe(err)))
			continue
		}
		fields := []uint32{}
		for _, f := range sd.Fields {
			fields = append(fields, f.DataTypeOID)
		}
		if fmt.Sprint(sd.ParamOIDs) != fmt.Sprint(s.params) || fmt.Sprint(fields) != fmt.Sprint(s.fields) {
			failures = append(failures, fmt.Sprintf("%s: parameter OIDs %v result OIDs %v, want %v %v",
				s.sql, sd.ParamOIDs, fields, s.params, s.fields))
		}
	}
	if len(failures) > 0 {
		fail("%s", strings.Join(failures, "; "))
	}
}

func describedParameterTypes(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE desc_pgx (id uuid PRIMARY KEY, n int4, amount numeric(12,2), "+
		"at timestamptz, big int8, flag bool, day date, name text, span interval)")
	checkDescribed(t, c, "desc", []describedStatement{
		{"SELECT n FROM desc_pgx WHERE id = $1", []uint32{pgtype.UUIDOID}, []uint32{pgtype.Int4OID}},
		{"SELECT $1::uuid, $2::int8, $3::numeric", []uint32{pgtype.UUIDOID, pgtype.Int8OID, pgtype.NumericOID},
			[]uint32{pgtype.UUIDOID, pgtype.Int8OID, pgtype.NumericOID}},
		{"INSERT INTO desc_pgx (id, n, amount, at, big, flag, day, name, span) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
			[]uint32{pgtype.UUIDOID, pgtype.Int4OID, pgtype.NumericOID, pgtype.TimestamptzOID,
				pgtype.Int8OID, pgtype.BoolOID, pgtype.DateOID, pgtype.TextOID, pgtype.IntervalOID}, []uint32{}},
		{"UPDATE desc_pgx SET amount = amount + $1 WHERE id = $2 RETURNING id, amount",
			[]uint32{pgtype.NumericOID, pgtype.UUIDOID}, []uint32{pgtype.UUIDOID, pgtype.NumericOID}},
		{"SELECT count(*) FROM desc_pgx WHERE at > $1 AND name = $2 AND big < $3",
			[]uint32{pgtype.TimestamptzOID, pgtype.TextOID, pgtype.Int8OID}, []uint32{pgtype.Int8OID}},
		{"DELETE FROM desc_pgx WHERE day = $1 AND flag = $2", []uint32{pgtype.DateOID, pgtype.BoolOID}, []uint32{}},
		{"SELECT $1::int8 + $2::int2, $3::interval, $4::bytea", []uint32{pgtype.Int8OID, pgtype.Int2OID, pgtype.IntervalOID, pgtype.ByteaOID},
			[]uint32{pgtype.Int8OID, pgtype.IntervalOID, pgtype.ByteaOID}},
		{"SELECT span, day, flag FROM desc_pgx WHERE span > $1 LIMIT $2", []uint32{pgtype.IntervalOID, pgtype.Int8OID},
			[]uint32{pgtype.IntervalOID, pgtype.DateOID, pgtype.BoolOID}},
	})
}

func describedArrayAndJSONTypes(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE desc_arr_pgx (id uuid PRIMARY KEY, n int4)")
	checkDescribed(t, c, "desc_arr", []describedStatement{
		{"SELECT id FROM desc_arr_pgx WHERE n = ANY($1)", []uint32{pgtype.Int4ArrayOID}, []uint32{pgtype.UUIDOID}},
		{"SELECT count(*) FROM desc_arr_pgx WHERE id = ANY($1)", []uint32{pgtype.UUIDArrayOID}, []uint32{pgtype.Int8OID}},
		{"SELECT $1::text[]", []uint32{pgtype.TextArrayOID}, []uint32{pgtype.TextArrayOID}},
		{"SELECT $1::uuid[], $2::int8[], $3::numeric[]", []uint32{pgtype.UUIDArrayOID, pgtype.Int8ArrayOID, pgtype.NumericArrayOID},
			[]uint32{pgtype.UUIDArrayOID, pgtype.Int8ArrayOID, pgtype.NumericArrayOID}},
		{"SELECT $1::jsonb, $2::json", []uint32{pgtype.JSONBOID, pgtype.JSONOID}, []uint32{pgtype.JSONBOID, pgtype.JSONOID}},
		{"SELECT array_agg(n) FROM desc_arr_pgx", []uint32{}, []uint32{pgtype.Int4ArrayOID}},
	})
	t.exec(c, "ALTER TABLE desc_arr_pgx ADD COLUMN tags text[], ADD COLUMN doc jsonb")
	checkDescribed(t, c, "desc_arr_cols", []describedStatement{
		{"INSERT INTO desc_arr_pgx (id, tags, doc) VALUES ($1, $2, $3)", []uint32{pgtype.UUIDOID, pgtype.TextArrayOID, pgtype.JSONBOID}, []uint32{}},
		{"UPDATE desc_arr_pgx SET doc = doc || $1 WHERE tags @> $2 RETURNING tags, doc",
			[]uint32{pgtype.JSONBOID, pgtype.TextArrayOID}, []uint32{pgtype.TextArrayOID, pgtype.JSONBOID}},
		{"SELECT doc ->> 'k' FROM desc_arr_pgx WHERE doc ->> 'k' = $1", []uint32{pgtype.TextOID}, []uint32{pgtype.TextOID}},
	})
}

func statementCache(t *T) {
	simple := pgx.QueryExecModeSimpleProtocol
	c := t.connect() // QueryExecModeCacheStatement, the default
	q := "SELECT $1::int4 + 1"
	for i := 0; i < 3; i++ {
		eq(t.int(c, q, int32(i)), int64(i+1), q)
	}
	var names []string
	rows, err := c.Query(t.ctx, "SELECT name FROM pg_prepared_statements WHERE statement = $1", simple, q)
	must(err, "pg_prepared_statements")
	names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	must(err, "pg_prepared_statements rows")
	if len(names) != 1 || !strings.HasPrefix(names[0], "stmtcache_") {
		fail("cached statement in pg_prepared_statements: got %v, want one stmtcache_ name", names)
	}
	// DeallocateAll empties the server's statements and pgx's cache; the query prepares again.
	must(c.DeallocateAll(t.ctx), "DeallocateAll")
	eq(t.int(c, "SELECT count(*) FROM pg_prepared_statements", simple), int64(0), "statements after DeallocateAll")
	eq(t.int(c, q, int32(5)), int64(6), q+" after DeallocateAll")
	eq(t.int(c, "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", simple, q), int64(1), "statement prepared again")

	// CacheDescribe keeps descriptions only: nothing stays prepared on the server.
	d := t.connect(withMode(pgx.QueryExecModeCacheDescribe))
	q2 := "SELECT $1::int4 + 2"
	for i := 0; i < 3; i++ {
		eq(t.int(d, q2, int32(i)), int64(i+2), q2)
	}
	eq(t.int(d, "SELECT count(*) FROM pg_prepared_statements", simple), int64(0), "statements under CacheDescribe")

	// A small cache evicts: the evicted statement is closed on the server.
	e := t.connect(func(cfg *pgx.ConnConfig) { cfg.StatementCacheCapacity = 2 })
	for i := 0; i < 5; i++ {
		eq(t.int(e, fmt.Sprintf("SELECT $1::int4 + %d", 10+i), int32(1)), int64(11+i), "evicting cache")
	}
	eq(t.int(e, "SELECT 7 + $1::int4", int32(0)), int64(7), "after eviction")
	n := t.int(e, "SELECT count(*) FROM pg_prepared_statements", simple)
	if n > 3 {
		fail("statements with a cache of 2: %d on the server", n)
	}
}

func namedPreparedStatements(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE prep_pgx (id int PRIMARY KEY, v int)")
	ins, err := c.Prepare(t.ctx, "ins_prep", "INSERT INTO prep_pgx VALUES ($1, $2)")
	must(err, "Prepare ins_prep")
	eq(ins.ParamOIDs, []uint32{pgtype.Int4OID, pgtype.Int4OID}, "ins_prep parameter OIDs")
	sel, err := c.Prepare(t.ctx, "get_prep", "SELECT v, id::text AS label FROM prep_pgx WHERE id = $1")
	must(err, "Prepare get_prep")
	eq(sel.ParamOIDs, []uint32{pgtype.Int4OID}, "get_prep parameter OIDs")
	if len(sel.Fields) != 2 || sel.Fields[0].Name != "v" || sel.Fields[1].Name != "label" ||
		sel.Fields[0].DataTypeOID != pgtype.Int4OID || sel.Fields[1].DataTypeOID != pgtype.TextOID {
		fail("get_prep fields: %+v", sel.Fields)
	}
	for i := 0; i < 20; i++ {
		t.exec(c, "ins_prep", i, i*i)
	}
	for i := 0; i < 20; i++ {
		var v int
		var label string
		t.get(c, into(&v, &label), "get_prep", i)
		eq([]any{v, label}, []any{i * i, fmt.Sprint(i)}, "get_prep")
	}
	var fromSQL bool
	var types string
	t.get(c, into(&fromSQL, &types), "SELECT from_sql, parameter_types::text FROM pg_prepared_statements WHERE name = 'get_prep'",
		pgx.QueryExecModeSimpleProtocol)
	eq([]any{fromSQL, types}, []any{false, "{integer}"}, "pg_prepared_statements for get_prep")
	// Deallocate closes it with a protocol Close message.
	must(c.Deallocate(t.ctx, "get_prep"), "Deallocate")
	eq(t.int(c, "SELECT count(*) FROM pg_prepared_statements WHERE name = 'get_prep'", pgx.QueryExecModeSimpleProtocol),
		int64(0), "after Deallocate")
	// Preparing the same name and SQL again is allowed; other SQL under that name is not.
	_, err = c.Prepare(t.ctx, "ins_prep", "INSERT INTO prep_pgx VALUES ($1, $2)")
	must(err, "Prepare ins_prep again")
}

func sqlPrepareExecute(t *T) {
	c := t.connect()
	t.exec(c, "PREPARE q_pgx (int) AS SELECT $1 * 2")
	eq(t.int(c, "EXECUTE q_pgx (21)"), int64(42), "EXECUTE (extended protocol)")
	eq(t.int(c, "EXECUTE q_pgx (4)", pgx.QueryExecModeSimpleProtocol), int64(8), "EXECUTE (simple protocol)")
	var fromSQL bool
	t.get(c, into(&fromSQL), "SELECT from_sql FROM pg_prepared_statements WHERE name = 'q_pgx'", pgx.QueryExecModeSimpleProtocol)
	eq(fromSQL, true, "from_sql")
	t.exec(c, "DEALLOCATE q_pgx")
	_, err := c.Exec(t.ctx, "EXECUTE q_pgx (1)")
	pgErr(err, "26000", "EXECUTE after DEALLOCATE")
}

func sendBatch(t *T, mode pgx.QueryExecMode, table string) {
	c := t.connect(withMode(mode))
	t.exec(c, "CREATE TABLE "+table+" (id int PRIMARY KEY, v text, u uuid)")
	b := &pgx.Batch{}
	for i := 0; i < 100; i++ {
		b.Queue("INSERT INTO "+table+" (id, v, u) VALUES ($1, $2, $3)", int32(i), fmt.Sprint(i), uid(i))
	}
	var count int64
	b.Queue("SELECT count(*) FROM " + table).QueryRow(func(row pgx.Row) error { return row.Scan(&count) })
	var updated int64
	b.Queue("UPDATE "+table+" SET v = v || '!' WHERE id < $1", int32(10)).Exec(func(ct pgconn.CommandTag) error {
		updated = ct.RowsAffected()
		return nil
	})
	var got []string
	b.Queue("SELECT id, v FROM "+table+" WHERE id < $1 ORDER BY id", int32(3)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id int32
			var v string
			if err := rows.Scan(&id, &v); err != nil {
				return err
			}
			got = append(got, fmt.Sprintf("%d=%s", id, v))
		}
		return rows.Err()
	})
	var byUUID string
	b.Queue("SELECT v FROM "+table+" WHERE u = $1", uid(42)).QueryRow(func(row pgx.Row) error { return row.Scan(&byUUID) })
	eq(b.Len(), 104, "queued")
	must(c.SendBatch(t.ctx, b).Close(), "SendBatch")
	eq(count, int64(100), "count inside the batch")
	eq(updated, int64(10), "UPDATE rows affected inside the batch")
	eq(got, []string{"0=0!", "1=1!", "2=2!"}, "query inside the batch")
	eq(byUUID, "42", "uuid parameter inside the batch")

	// Results read one by one.
	b2 := &pgx.Batch{}
	b2.Queue("DELETE FROM "+table+" WHERE id >= $1", int32(90))
	b2.Queue("SELECT count(*) FROM " + table)
	b2.Queue("SELECT id FROM "+table+" WHERE id < $1 ORDER BY id", int32(2))
	br := c.SendBatch(t.ctx, b2)
	tag, err := br.Exec()
	must(err, "batch DELETE")
	eq(tag.RowsAffected(), int64(10), "batch DELETE rows affected")
	var n int64
	must(br.QueryRow().Scan(&n), "batch count")
	eq(n, int64(90), "batch count after DELETE")
	rows, err := br.Query()
	must(err, "batch query")
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	must(err, "batch query rows")
	eq(ids, []int32{0, 1}, "batch query rows")
	must(br.Close(), "batch close")
	eq(t.int(c, "SELECT count(*) FROM "+table), int64(90), "count after the batches")
}

// batchErrorRollsBack: a batch runs as one implicit transaction, so an error undoes it all.
func batchErrorRollsBack(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE batch_err_pgx (id int PRIMARY KEY)")
	b := &pgx.Batch{}
	b.Queue("INSERT INTO batch_err_pgx VALUES ($1)", 1)
	b.Queue("INSERT INTO batch_err_pgx VALUES ($1)", 1)
	b.Queue("INSERT INTO batch_err_pgx VALUES ($1)", 2)
	br := c.SendBatch(t.ctx, b)
	_, err := br.Exec()
	must(err, "first insert")
	_, err = br.Exec()
	pgErr(err, "23505", "duplicate in a batch")
	_, err = br.Exec()
	if err == nil {
		fail("the statement after the failed one ran")
	}
	br.Close()
	eq(t.int(c, "SELECT count(*) FROM batch_err_pgx"), int64(0), "rows after the failed batch")
	eq(string(c.PgConn().TxStatus()), "I", "transaction status after the failed batch")
	// Inside an explicit transaction the batch is part of it.
	tx, err := c.Begin(t.ctx)
	must(err, "Begin")
	b2 := &pgx.Batch{}
	b2.Queue("INSERT INTO batch_err_pgx VALUES ($1)", 3)
	b2.Queue("INSERT INTO batch_err_pgx VALUES ($1)", 4)
	must(tx.SendBatch(t.ctx, b2).Close(), "batch in a transaction")
	eq(string(c.PgConn().TxStatus()), "T", "transaction status in the transaction")
	must(tx.Commit(t.ctx), "Commit")
	eq(t.int(c, "SELECT count(*) FROM batch_err_pgx"), int64(2), "rows after the committed batch")
}

func fieldDescriptions(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE fd_pgx (id int PRIMARY KEY, name text NOT NULL, amount numeric(10,2), at timestamptz, flag boolean, code varchar(12))")
	t.exec(c, "INSERT INTO fd_pgx VALUES (1, 'a', 1.5, now(), true, 'c')")
	var oid uint32
	t.get(c, into(&oid), "SELECT 'fd_pgx'::regclass::oid")
	// pgx asks for text results of text types and binary results of the others.
	check := func(mode pgx.QueryExecMode, binary int16) {
		text := int16(pgx.TextFormatCode)
		rows, err := c.Query(t.ctx, "SELECT id, name, amount, flag, code, id + 1 AS next FROM fd_pgx", mode)
		must(err, "query")
		fds := append([]pgconn.FieldDescription(nil), rows.FieldDescriptions()...)
		for rows.Next() {
		}
		must(rows.Err(), "rows")
		want := []pgconn.FieldDescription{
			{Name: "id", TableOID: oid, TableAttributeNumber: 1, DataTypeOID: pgtype.Int4OID, DataTypeSize: 4, TypeModifier: -1, Format: binary},
			{Name: "name", TableOID: oid, TableAttributeNumber: 2, DataTypeOID: pgtype.TextOID, DataTypeSize: -1, TypeModifier: -1, Format: text},
			{Name: "amount", TableOID: oid, TableAttributeNumber: 3, DataTypeOID: pgtype.NumericOID, DataTypeSize: -1, TypeModifier: (10<<16 | 2) + 4, Format: binary},
			{Name: "flag", TableOID: oid, TableAttributeNumber: 5, DataTypeOID: pgtype.BoolOID, DataTypeSize: 1, TypeModifier: -1, Format: binary},
			{Name: "code", TableOID: oid, TableAttributeNumber: 6, DataTypeOID: pgtype.VarcharOID, DataTypeSize: -1, TypeModifier: 12 + 4, Format: text},
			{Name: "next", TableOID: 0, TableAttributeNumber: 0, DataTypeOID: pgtype.Int4OID, DataTypeSize: 4, TypeModifier: -1, Format: binary},
		}
		if fmt.Sprintf("%+v", fds) != fmt.Sprintf("%+v", want) {
			fail("field descriptions (%s):\n got %+v\nwant %+v", mode, fds, want)
		}
	}
	check(pgx.QueryExecModeCacheStatement, pgx.BinaryFormatCode)
	check(pgx.QueryExecModeExec, pgx.TextFormatCode)
	check(pgx.QueryExecModeSimpleProtocol, pgx.TextFormatCode)
	// Values map by field name.
	rows, err := c.Query(t.ctx, "SELECT id, name FROM fd_pgx")
	must(err, "query")
	m, err := pgx.CollectOneRow(rows, pgx.RowToMap)
	must(err, "RowToMap")
	eq(m, map[string]any{"id": int32(1), "name": "a"}, "RowToMap")
	// A dropped column keeps its number: later columns keep theirs.
	t.exec(c, "ALTER TABLE fd_pgx DROP COLUMN at")
	rows, err = c.Query(t.ctx, "SELECT flag FROM fd_pgx")
	must(err, "query after DROP COLUMN")
	attnum := rows.FieldDescriptions()[0].TableAttributeNumber
	rows.Close()
	eq(attnum, uint16(5), "attribute number of flag after dropping the column before it")
}

func copyFromBinary(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE cpf_pgx (id int PRIMARY KEY, v numeric, b bytea, t timestamptz, name text, u uuid, "+
		"d date, f float8, ok bool, big int8, span interval)")
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	cols := []string{"id", "v", "b", "t", "name", "u", "d", "f", "ok", "big", "span"}
	n, err := c.CopyFrom(t.ctx, pgx.Identifier{"cpf_pgx"}, cols, pgx.CopyFromSlice(1000, func(i int) ([]any, error) {
		var name any = fmt.Sprintf("name %d\t", i)
		if i == 5 {
			name = nil
		}
		return []any{int32(i), num(fmt.Sprintf("%d.5", i)), []byte{byte(i), 0, 255}, at, name, uid(i),
			day, float64(i) / 4, i%2 == 0, int64(i) << 40, time.Duration(i) * time.Second}, nil
	}))
	must(err, "CopyFrom")
	eq(n, int64(1000), "CopyFrom rows")
	var count, named int64
	var sum pgtype.Numeric
	var maxName string
	t.get(c, into(&count, &sum, &named, &maxName), "SELECT count(*), sum(v), count(name), max(name) FROM cpf_pgx")
	eq([]any{count, numStr(sum), named, maxName}, []any{int64(1000), "500000.0", int64(999), "name 999\t"}, "count, sum, count(name), max")
	var b []byte
	var gotAt time.Time
	var u pgtype.UUID
	var d time.Time
	var f float64
	var ok bool
	var big int64
	var span time.Duration
	t.get(c, into(&b, &gotAt, &u, &d, &f, &ok, &big, &span), "SELECT b, t, u, d, f, ok, big, span FROM cpf_pgx WHERE id = $1", 7)
	eq([]any{b, u, f, ok, big, span}, []any{[]byte{7, 0, 255}, uid(7), 1.75, false, int64(7) << 40, 7 * time.Second}, "row 7")
	if !gotAt.Equal(at) || !d.Equal(day) {
		fail("row 7 times: %s %s", gotAt, d)
	}
	// Schema-qualified, from rows, with NULLs.
	n, err = c.CopyFrom(t.ctx, pgx.Identifier{"public", "cpf_pgx"}, []string{"id", "name", "v"},
		pgx.CopyFromRows([][]any{{int32(1000), "x", nil}, {int32(1001), nil, num("-1")}}))
	must(err, "CopyFrom public.cpf_pgx")
	eq(n, int64(2), "CopyFrom rows")
	eq(t.int(c, "SELECT count(*) FROM cpf_pgx WHERE v IS NULL OR name IS NULL"), int64(3), "NULLs copied")
}

func copyFromBinaryArraysJSON(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE cpa_pgx (id int PRIMARY KEY, tags text[], nums int[], j jsonb, js json)")
	n, err := c.CopyFrom(t.ctx, pgx.Identifier{"cpa_pgx"}, []string{"id", "tags", "nums", "j", "js"},
		pgx.CopyFromSlice(100, func(i int) ([]any, error) {
			return []any{i, []string{"a", fmt.Sprint(i)}, []int32{int32(i), int32(i * 2)}, map[string]any{"i": i}, map[string]any{"s": fmt.Sprint(i)}}, nil
		}))
	must(err, "CopyFrom")
	eq(n, int64(100), "CopyFrom rows")
	var tags []string
	var nums []int32
	var j, js map[string]any
	t.get(c, into(&tags, &nums, &j, &js), "SELECT tags, nums, j, js FROM cpa_pgx WHERE id = $1", 7)
	eq([]any{tags, nums, j, js}, []any{[]string{"a", "7"}, []int32{7, 14}, map[string]any{"i": 7.0}, map[string]any{"s": "7"}}, "row 7")
	eq(t.int(c, "SELECT sum(nums[2]) FROM cpa_pgx WHERE j @> '{\"i\": 7}' OR 'a' = ANY(tags)"), int64(9900), "sum over the copied arrays")
}

func copyFromErrorIsAtomic(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE cpe_pgx (id int PRIMARY KEY, v text NOT NULL)")
	_, err := c.CopyFrom(t.ctx, pgx.Identifier{"cpe_pgx"}, []string{"id", "v"},
		pgx.CopyFromRows([][]any{{1, "a"}, {2, "b"}, {1, "c"}}))
	pe := pgErr(err, "23505", "CopyFrom with a duplicate key")
	eq(pe.TableName, "cpe_pgx", "table name")
	_, err = c.CopyFrom(t.ctx, pgx.Identifier{"cpe_pgx"}, []string{"id", "v"}, pgx.CopyFromRows([][]any{{3, nil}}))
	pe = pgErr(err, "23502", "CopyFrom with a NULL in a NOT NULL column")
	eq(pe.ColumnName, "v", "column name")
	eq(t.int(c, "SELECT count(*) FROM cpe_pgx"), int64(0), "rows after failed copies")
	_, err = c.CopyFrom(t.ctx, pgx.Identifier{"cpe_nosuch"}, []string{"id"}, pgx.CopyFromRows([][]any{{1}}))
	pgErr(err, "42P01", "CopyFrom into a missing table")
	n, err := c.CopyFrom(t.ctx, pgx.Identifier{"cpe_pgx"}, []string{"id", "v"}, pgx.CopyFromRows([][]any{{1, "a"}}))
	must(err, "CopyFrom after the failures")
	eq(n, int64(1), "rows copied after the failures")
}

func copyTextViaPgconn(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE cpt_pgx (id int PRIMARY KEY, name text, at date)")
	in := "1\tname 1\t2024-01-01\n2\t\\N\t2024-01-02\n3\ttab\\there\t2024-01-03\n"
	tag, err := c.PgConn().CopyFrom(t.ctx, strings.NewReader(in), "COPY cpt_pgx (id, name, at) FROM STDIN")
	must(err, "COPY FROM STDIN")
	eq(tag.RowsAffected(), int64(3), "COPY FROM rows")
	eq(tag.String(), "COPY 3", "COPY FROM command tag")
	eq(t.str(c, "SELECT name FROM cpt_pgx WHERE id = 3"), "tab\there", "escaped tab")
	csvIn := "id,name,at\n4,\"comma, quoted\",2024-02-01\n5,,2024-02-02\n"
	_, err = c.PgConn().CopyFrom(t.ctx, strings.NewReader(csvIn), "COPY cpt_pgx FROM STDIN (FORMAT csv, HEADER true)")
	must(err, "COPY FROM STDIN csv")
	eq(t.str(c, "SELECT name FROM cpt_pgx WHERE id = 4"), "comma, quoted", "csv quoted field")
	var out bytes.Buffer
	tag, err = c.PgConn().CopyTo(t.ctx, &out, "COPY (SELECT id, name, at FROM cpt_pgx WHERE id <= 3 ORDER BY id) TO STDOUT")
	must(err, "COPY TO STDOUT")
	eq(out.String(), "1\tname 1\t2024-01-01\n2\t\\N\t2024-01-02\n3\ttab\\there\t2024-01-03\n", "COPY TO text")
	eq(tag.RowsAffected(), int64(3), "COPY TO rows")
	out.Reset()
	_, err = c.PgConn().CopyTo(t.ctx, &out, "COPY cpt_pgx (id, name) TO STDOUT (FORMAT csv, HEADER)")
	must(err, "COPY TO STDOUT csv")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	eq(lines[0], "id,name", "csv header")
	eq(len(lines), 6, "csv lines")
	// A bad line fails the whole COPY.
	_, err = c.PgConn().CopyFrom(t.ctx, strings.NewReader("9\tok\t2024-01-01\nx\tbad\t2024-01-01\n"), "COPY cpt_pgx FROM STDIN")
	pgErr(err, "22P02", "COPY with a bad integer")
	eq(t.int(c, "SELECT count(*) FROM cpt_pgx"), int64(5), "rows after the failed COPY")
}

func copyBinaryOutViaPgconn(t *T) {
	c := t.connect()
	var out bytes.Buffer
	_, err := c.PgConn().CopyTo(t.ctx, &out, "COPY (SELECT 1::int4, NULL::text) TO STDOUT (FORMAT binary)")
	must(err, "COPY TO STDOUT binary")
	want := "PGCOPY\n\xff\r\n\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00" + // signature, flags, header extension
		"\x00\x02" + "\x00\x00\x00\x04" + "\x00\x00\x00\x01" + "\xff\xff\xff\xff" + // a tuple of an int4 and a NULL
		"\xff\xff" // trailer
	eq(out.String(), want, "binary COPY TO")
}

func rowsStreamAndEarlyClose(t *T) {
	c := t.connect()
	rows, err := c.Query(t.ctx, "SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g")
	must(err, "query")
	var sum, count int64
	for rows.Next() {
		var g int64
		var s string
		must(rows.Scan(&g, &s), "scan")
		sum += g
		count++
	}
	must(rows.Err(), "rows")
	eq([]int64{count, sum}, []int64{20000, 20000 * 20001 / 2}, "rows streamed")
	eq(rows.CommandTag().String(), "SELECT 20000", "command tag")
	// Closing early leaves the connection usable.
	rows, err = c.Query(t.ctx, "SELECT g FROM generate_series(1, 200000) g")
	must(err, "query")
	for i := 0; i < 10 && rows.Next(); i++ {
	}
	rows.Close()
	must(rows.Err(), "rows closed early")
	eq(t.int(c, "SELECT 41 + $1::int", 1), int64(42), "query after an early close")
	// An error part way through a result.
	rows, err = c.Query(t.ctx, "SELECT 10 / (5 - g) FROM generate_series(1, 10) g")
	must(err, "query")
	n := 0
	for rows.Next() {
		n++
	}
	pgErr(rows.Err(), "22012", "division by zero in the fifth row")
	if n > 4 {
		fail("rows before the error: %d", n)
	}
	eq(t.int(c, "SELECT 1"), int64(1), "query after an error in a result")
}

func sqlCursorFetch(t *T) {
	c := t.connect()
	t.exec(c, "CREATE TABLE big_pgx AS SELECT g AS id FROM generate_series(1, 5000) g")
	tx, err := c.Begin(t.ctx)
	must(err, "Begin")
	defer tx.Rollback(t.ctx)
	t.exec(tx, "DECLARE cur_pgx CURSOR FOR SELECT id FROM big_pgx ORDER BY id")
	var sum int64
	fetches := 0
	for {
		rows, err := tx.Query(t.ctx, "FETCH 100 FROM cur_pgx")
		must(err, "FETCH")
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		must(err, "FETCH rows")
		if len(ids) == 0 {
			break
		}
		fetches++
		for _, id := range ids {
			sum += int64(id)
		}
		if fetches > 60 {
			fail("FETCH never ran out")
		}
	}
	eq([]int64{int64(fetches), sum}, []int64{50, 5000 * 5001 / 2}, "fetches and sum")
	tag := t.exec(tx, "MOVE ABSOLUTE 10 IN cur_pgx")
	eq(tag.String(), "MOVE 1", "MOVE command tag")
	eq(t.int(tx, "FETCH NEXT FROM cur_pgx"), int64(11), "FETCH after MOVE")
	t.exec(tx, "CLOSE cur_pgx")
	must(tx.Commit(t.ctx), "Commit")
	// WITH HOLD outlives its transaction.
	t.exec(c, "BEGIN")
	t.exec(c, "DECLARE hold_pgx CURSOR WITH HOLD FOR SELECT id FROM big_pgx WHERE id <= 3 ORDER BY id")
	t.exec(c, "COMMIT")
	rows, err := c.Query(t.ctx, "FETCH ALL FROM hold_pgx")
	must(err, "FETCH ALL")
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	must(err, "FETCH ALL rows")
	eq(ids, []int32{1, 2, 3}, "WITH HOLD cursor")
	t.exec(c, "CLOSE hold_pgx")
}

func init() {
	for _, m := range modes {
		m := m
		addCase("query_exec_mode_"+m.name, func(t *T) { execMode(t, m.mode, "qm_"+m.name) })
	}
	for _, m := range modes {
		m := m
		addCase("array_and_json_params_"+m.name, func(t *T) { arrayAndJSONParams(t, m.mode, "aj_"+m.name) })
	}
	addCase("described_parameter_types", describedParameterTypes)
	addCase("described_array_and_json_types", describedArrayAndJSONTypes)
	addCase("statement_cache", statementCache)
	addCase("named_prepared_statements", namedPreparedStatements)
	addCase("sql_level_prepare_execute", sqlPrepareExecute)
	for _, m := range modes {
		m := m
		addCase("send_batch_"+m.name, func(t *T) { sendBatch(t, m.mode, "batch_"+m.name) })
	}
	addCase("batch_error_rolls_back_implicit_transaction", batchErrorRollsBack)
	addCase("rows_field_descriptions", fieldDescriptions)
	addCase("copy_from_binary", copyFromBinary)
	addCase("copy_from_binary_arrays_json", copyFromBinaryArraysJSON)
	addCase("copy_from_error_is_atomic", copyFromErrorIsAtomic)
	addCase("copy_text_and_csv_via_pgconn", copyTextViaPgconn)
	addCase("copy_binary_out_via_pgconn", copyBinaryOutViaPgconn)
	addCase("rows_stream_and_early_close", rowsStreamAndEarlyClose)
	addCase("sql_cursor_fetch", sqlCursorFetch)
}
