package main

// Type round trips through parameters and results in every QueryExecMode, and pgtype's codecs
// for numeric, interval, uuid, json(b), arrays and timestamptz.

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

type roundTripValue struct {
	sqlType string
	value   any
	dest    func() any // a new pointer to scan the column into
}

func roundTripValues() []roundTripValue {
	newOf := func(v any) func() any {
		return func() any { return reflect.New(reflect.TypeOf(v)).Interface() }
	}
	values := []roundTripValue{
		{"smallint", int16(32767), nil},
		{"integer", int32(-2147483648), nil},
		{"bigint", int64(9223372036854775807), nil},
		{"real", float32(1.5), nil},
		{"double precision", 2.718281828459045, nil},
		{"numeric", num("12345678901234567890.123456789"), nil},
		{"numeric(10,2)", num("-99.95"), nil},
		{"text", "héllo \u2603 'quoted' \\ back", nil},
		{"varchar(20)", "short", nil},
		{"boolean", true, nil},
		{"bytea", []byte{0x00, 0x03, 0xff, '\\', 'x'}, nil},
		{"date", time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), nil},
		{"time", pgtype.Time{Microseconds: ((13*60+14)*60+15)*1_000_000 + 123456, Valid: true}, nil},
		{"timestamp", time.Date(2024, 1, 2, 3, 4, 5, 678901000, time.UTC), nil},
		{"timestamptz", time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), nil},
		{"interval", pgtype.Interval{Days: 3, Microseconds: 3723 * 1_000_000, Valid: true}, nil},
		{"uuid", uid(0x5678), nil},
	}
	for i := range values {
		values[i].dest = newOf(values[i].value)
	}
	return values
}

// jsonArg is a JSON parameter as an application passes it in this mode: a Go value where pgx
// knows the parameter's type from the server, its text where pgx sends text of unknown type.
func jsonArg(mode pgx.QueryExecMode, v any) any {
	if mode == pgx.QueryExecModeExec || mode == pgx.QueryExecModeSimpleProtocol {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	return v
}

// sameValue compares a value read back with the one written: instants by time.Equal, numerics
// by their text, the rest by reflect.DeepEqual.
func sameValue(got, want any) bool {
	switch w := want.(type) {
	case time.Time:
		g, ok := got.(time.Time)
		return ok && g.Equal(w)
	case pgtype.Numeric:
		g, ok := got.(pgtype.Numeric)
		return ok && numStr(g) == numStr(w)
	}
	return reflect.DeepEqual(got, want)
}

func show(v any) string {
	switch x := v.(type) {
	case pgtype.Numeric:
		return numStr(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%#v", v)
}

// roundTrip writes each value into a table with a serial key and a default beside it, reads it
// back and finds it with WHERE v = $1, all in one QueryExecMode.
func roundTrip(t *T, mode pgx.QueryExecMode, textResults bool, prefix string) {
	c := t.connect()
	var failures []string
	for i, v := range roundTripValues() {
		table := fmt.Sprintf("rt_%s_%d", prefix, i)
		err := func() error {
			if _, err := c.Exec(t.ctx, fmt.Sprintf(
				"CREATE TABLE %s (id serial PRIMARY KEY, v %s, note text DEFAULT 'd')", table, v.sqlType)); err != nil {
				return fmt.Errorf("create: %s", describe(err))
			}
			var id int32
			var note string
			if err := c.QueryRow(t.ctx, "INSERT INTO "+table+" (v) VALUES ($1) RETURNING id, note", mode, v.value).
				Scan(&id, &note); err != nil {
				return fmt.Errorf("insert: %s", describe(err))
			}
			if id != 1 || note != "d" {
				return fmt.Errorf("insert returned id %d note %q, want 1 'd'", id, note)
			}
			args := []any{mode}
			if textResults {
				args = append(args, pgx.QueryResultFormats{pgx.TextFormatCode})
			}
			dest := v.dest()
			if err := c.QueryRow(t.ctx, "SELECT v FROM "+table, args...).Scan(dest); err != nil {
				return fmt.Errorf("select: %s", describe(err))
			}
			got := reflect.ValueOf(dest).Elem().Interface()
			if !sameValue(got, v.value) {
				return fmt.Errorf("stored %s, read %s", show(v.value), show(got))
			}
			var n int64
			if err := c.QueryRow(t.ctx, "SELECT count(*) FROM "+table+" WHERE v = $1", mode, v.value).Scan(&n); err != nil {
				return fmt.Errorf("WHERE v = $1: %s", describe(err))
			}
			if n != 1 {
				return fmt.Errorf("WHERE v = $1 found %d rows", n)
			}
			return nil
		}()
		if err != nil {
			failures = append(failures, v.sqlType+": "+err.Error())
		}
	}
	if len(failures) > 0 {
		fail("%s", strings.Join(failures, "; "))
	}
}

func jsonAndJsonb(t *T, mode pgx.QueryExecMode, table string) {
	c := t.connect(withMode(mode))
	t.exec(c, "CREATE TABLE "+table+" (id int PRIMARY KEY, j json, jb jsonb)")
	doc := map[string]any{"a": 1.0, "b": []any{1.0, 2.0, map[string]any{"c": nil}}, "s": "x"}
	t.exec(c, "INSERT INTO "+table+" VALUES (1, $1, $2)", jsonArg(mode, doc), jsonArg(mode, doc))
	var j, jb map[string]any
	t.get(c, into(&j, &jb), "SELECT j, jb FROM "+table)
	eq(j, doc, "json")
	eq(jb, doc, "jsonb")
	var s string
	var second int
	t.get(c, into(&s, &second), "SELECT jb->>'s', jb->'b'->1 FROM "+table)
	eq([]any{s, second}, []any{"x", 2}, "jb->>'s', jb->'b'->1")
	// json keeps its text as sent (encoding/json sorts map keys); jsonb prints normalized.
	eq(t.str(c, "SELECT j::text FROM "+table), `{"a":1,"b":[1,2,{"c":null}],"s":"x"}`, "json text")
	eq(t.str(c, "SELECT jb::text FROM "+table), `{"a": 1, "b": [1, 2, {"c": null}], "s": "x"}`, "jsonb text")
	// Into a struct, and JSON parameters in predicates.
	var st struct {
		A int    `json:"a"`
		S string `json:"s"`
	}
	t.get(c, into(&st), "SELECT jb FROM "+table+" WHERE id = $1", 1)
	eq(st.A, 1, "jsonb into struct field a")
	eq(st.S, "x", "jsonb into struct field s")
	eq(t.int(c, "SELECT count(*) FROM "+table+" WHERE jb @> $1", jsonArg(mode, map[string]any{"s": "x"})), int64(1), "jb @> $1")
	var has bool
	t.get(c, into(&has), "SELECT jb ? $1 FROM "+table, "a")
	eq(has, true, "jb ? $1")
	// SQL NULL and JSON null.
	t.exec(c, "INSERT INTO "+table+" VALUES (2, NULL, 'null')")
	var nj *map[string]any
	t.get(c, into(&nj), "SELECT j FROM "+table+" WHERE id = 2")
	eq(nj == nil, true, "SQL NULL json scans as nil")
	var raw string
	t.get(c, into(&raw), "SELECT jb::text FROM "+table+" WHERE id = 2")
	eq(raw, "null", "JSON null in jsonb")
}

func arraysCase(t *T, mode pgx.QueryExecMode, table string) {
	c := t.connect(withMode(mode))
	t.exec(c, "CREATE TABLE "+table+" (id int PRIMARY KEY, tags text[], nums int[], grid int[][], uids uuid[], amounts numeric[], days date[])")
	tags := []pgtype.Text{{String: "a", Valid: true}, {String: "b c", Valid: true}, {}}
	day := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	// The modes that send text cannot encode a multidimensional slice: they send the literal.
	var grid any = [][]int32{{1, 2}, {3, 4}}
	if mode == pgx.QueryExecModeExec || mode == pgx.QueryExecModeSimpleProtocol {
		grid = "{{1,2},{3,4}}"
	}
	t.exec(c, "INSERT INTO "+table+" VALUES (1, $1, $2, $3, $4, $5, $6)",
		tags, []int32{1, 2, 3}, grid, []pgtype.UUID{uid(1), uid(2)},
		[]pgtype.Numeric{num("1.5"), num("-2")}, []time.Time{day})
	var gotTags []pgtype.Text
	var nums []int32
	var gotGrid [][]int32
	var uids []pgtype.UUID
	var amounts []pgtype.Numeric
	var days []time.Time
	t.get(c, into(&gotTags, &nums, &gotGrid, &uids, &amounts, &days), "SELECT tags, nums, grid, uids, amounts, days FROM "+table)
	eq(gotTags, tags, "text[] with NULL")
	eq(nums, []int32{1, 2, 3}, "int[]")
	eq(gotGrid, [][]int32{{1, 2}, {3, 4}}, "int[][]")
	eq(uids, []pgtype.UUID{uid(1), uid(2)}, "uuid[]")
	if len(amounts) != 2 || numStr(amounts[0]) != "1.5" || numStr(amounts[1]) != "-2" {
		fail("numeric[]: got %v", amounts)
	}
	if len(days) != 1 || !days[0].Equal(day) {
		fail("date[]: got %v", days)
	}
	eq(t.int(c, "SELECT id FROM "+table+" WHERE 2 = ANY(nums)"), int64(1), "2 = ANY(nums)")
	eq(t.int(c, "SELECT count(*) FROM "+table+" WHERE id = ANY($1)", []int32{1, 5}), int64(1), "id = ANY($1)")
	eq(t.int(c, "SELECT count(*) FROM "+table+" WHERE tags @> $1", []string{"b c"}), int64(1), "tags @> $1")
	var strs []string
	t.get(c, into(&strs), "SELECT $1::text[]", []string{"x", "y z", `q"uote`, "back\\slash", ""})
	eq(strs, []string{"x", "y z", `q"uote`, "back\\slash", ""}, "$1::text[]")
	var n, sum int64
	t.get(c, into(&n, &sum), "SELECT count(*), sum(a) FROM unnest($1::int[], $2::text[]) AS u(a, b)",
		[]int32{1, 2, 3}, []string{"one", "two", "three"})
	eq([]int64{n, sum}, []int64{3, 6}, "unnest($1::int[], $2::text[])")
	var length, card, cell int32
	t.get(c, into(&length, &card, &cell), "SELECT array_length(nums, 1), cardinality(grid), grid[2][1] FROM "+table)
	eq([]int32{length, card, cell}, []int32{3, 4, 3}, "array_length, cardinality, subscript")
	var empty []int32
	t.get(c, into(&empty), "SELECT '{}'::int[]")
	if empty == nil || len(empty) != 0 {
		fail("empty int[]: got %#v, want an empty slice", empty)
	}
}

func pgtypeNumeric(t *T) {
	c := t.connect()
	var nan pgtype.Numeric
	t.get(c, into(&nan), "SELECT 'NaN'::numeric")
	eq(nan.NaN, true, "'NaN'::numeric is NaN")
	var f float64
	t.get(c, into(&f), "SELECT 1.25::numeric")
	eq(f, 1.25, "numeric into float64")
	var i64 int64
	t.get(c, into(&i64), "SELECT 12345::numeric")
	eq(i64, int64(12345), "numeric into int64")
	big30 := pgtype.Numeric{Int: new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil), Exp: -2, Valid: true}
	for _, m := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
		for _, s := range []string{"0.0001234", "-0.5", "1000000", "99999999999999999999999999999.99", "0", "0.0000000001", "123.4500"} {
			var got pgtype.Numeric
			t.get(c, into(&got), "SELECT $1::numeric", m, num(s))
			want := num(s)
			if numStr(got) != numStr(want) {
				fail("numeric %s round trip: got %s, want %s", s, numStr(got), numStr(want))
			}
		}
		var got pgtype.Numeric
		t.get(c, into(&got), "SELECT $1::numeric + 1", m, big30)
		eq(numStr(got), "10000000000000000000000000001.00", "10^30 * 10^-2 + 1")
	}
	var scaled pgtype.Numeric
	t.get(c, into(&scaled), "SELECT round(2.0 / 3, 4)")
	eq(numStr(scaled), "0.6667", "round(2.0 / 3, 4)")
	var total pgtype.Numeric
	t.get(c, into(&total), "SELECT sum(x) FROM unnest($1::numeric[]) x", []pgtype.Numeric{num("0.1"), num("0.2")})
	eq(numStr(total), "0.3", "sum of numeric[] parameter")
}

func pgtypeIntervalAndTime(t *T) {
	c := t.connect()
	for _, m := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
		var iv pgtype.Interval
		t.get(c, into(&iv), "SELECT '1 year 2 mons 3 days 04:05:06.789'::interval", m)
		eq(iv, pgtype.Interval{Months: 14, Days: 3, Microseconds: (4*3600+5*60+6)*1_000_000 + 789000, Valid: true}, "interval")
		var d time.Duration
		t.get(c, into(&d), "SELECT '1 hour 30 minutes'::interval", m)
		eq(d, 90*time.Minute, "interval into time.Duration")
		var neg pgtype.Interval
		t.get(c, into(&neg), "SELECT $1::interval", m, pgtype.Interval{Days: -1, Microseconds: -1_500_000, Valid: true})
		eq(neg, pgtype.Interval{Days: -1, Microseconds: -1_500_000, Valid: true}, "negative interval")
		var sum pgtype.Interval
		t.get(c, into(&sum), "SELECT $1::interval + interval '1 day'", m, 2*time.Hour)
		eq(sum, pgtype.Interval{Days: 1, Microseconds: 2 * 3600 * 1_000_000, Valid: true}, "time.Duration parameter")

		// timestamptz: any zone in, the same instant out; infinity; date arithmetic.
		zone := time.FixedZone("plus0530", 5*3600+30*60)
		at := time.Date(2024, 6, 30, 23, 59, 59, 999999000, zone)
		var got time.Time
		t.get(c, into(&got), "SELECT $1::timestamptz", m, at)
		if !got.Equal(at) {
			fail("timestamptz from +05:30: got %s, want %s", got, at)
		}
		var utc string
		t.get(c, into(&utc), "SELECT to_char($1::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')", m, at)
		eq(utc, "2024-06-30 18:29:59.999999", "AT TIME ZONE 'UTC'")
		var inf pgtype.Timestamptz
		t.get(c, into(&inf), "SELECT 'infinity'::timestamptz", m)
		eq(inf.InfinityModifier, pgtype.Infinity, "'infinity'::timestamptz")
		var ninf pgtype.Timestamptz
		t.get(c, into(&ninf), "SELECT $1::timestamptz", m, pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true})
		eq(ninf.InfinityModifier, pgtype.NegativeInfinity, "-infinity parameter")
		var next time.Time
		t.get(c, into(&next), "SELECT $1::date + 1", m, time.Date(2024, 2, 28, 0, 0, 0, 0, time.UTC))
		if !next.Equal(time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)) {
			fail("date + 1: got %s", next)
		}
		var old time.Time
		t.get(c, into(&old), "SELECT $1::timestamp", m, time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC))
		if !old.Equal(time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC)) {
			fail("timestamp before 1970: got %s", old)
		}
	}
}

func pgtypeScalars(t *T) {
	c := t.connect()
	for _, m := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
		// uuid from a string parameter, into a string and into pgtype.UUID.
		var s string
		t.get(c, into(&s), "SELECT $1::uuid::text", m, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11")
		eq(s, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "uuid text")
		var u pgtype.UUID
		t.get(c, into(&u), "SELECT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid", m)
		eq(u.String(), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "pgtype.UUID")
		var us string
		t.get(c, into(&us), "SELECT $1::uuid", m, uid(7))
		eq(us, "12345678-1234-5678-9abc-def000000007", "uuid into string")
		// NULLs into pointers and pgtype values.
		var np *string
		var nt pgtype.Text
		var ni pgtype.Int8
		t.get(c, into(&np, &nt, &ni), "SELECT NULL::text, NULL::text, NULL::int8", m)
		eq([]bool{np == nil, nt.Valid, ni.Valid}, []bool{true, false, false}, "NULLs")
		// Special floats, an empty bytea, bool and char(n).
		var nan, inf float64
		t.get(c, into(&nan, &inf), "SELECT 'NaN'::float8, '-Infinity'::float8", m)
		if !math.IsNaN(nan) || !math.IsInf(inf, -1) {
			fail("NaN, -Infinity: got %v %v", nan, inf)
		}
		var empty []byte
		t.get(c, into(&empty), "SELECT ''::bytea", m)
		if empty == nil || len(empty) != 0 {
			fail("empty bytea: got %#v", empty)
		}
		var ch string
		t.get(c, into(&ch), "SELECT 'ab'::char(4)", m)
		eq(ch, "ab  ", "char(4) is blank-padded")
		var oid uint32
		t.get(c, into(&oid), "SELECT 'pg_class'::regclass::oid", m)
		eq(oid, uint32(1259), "pg_class oid")
	}
}

func init() {
	addCase("types_round_trip_binary_cache_statement", func(t *T) { roundTrip(t, pgx.QueryExecModeCacheStatement, false, "cs") })
	addCase("types_round_trip_binary_cache_describe", func(t *T) { roundTrip(t, pgx.QueryExecModeCacheDescribe, false, "cd") })
	addCase("types_round_trip_binary_describe_exec", func(t *T) { roundTrip(t, pgx.QueryExecModeDescribeExec, false, "de") })
	addCase("types_round_trip_text_exec", func(t *T) { roundTrip(t, pgx.QueryExecModeExec, false, "ex") })
	addCase("types_round_trip_text_simple_protocol", func(t *T) { roundTrip(t, pgx.QueryExecModeSimpleProtocol, false, "sp") })
	addCase("types_round_trip_binary_params_text_results", func(t *T) { roundTrip(t, pgx.QueryExecModeCacheStatement, true, "tr") })
	addCase("json_and_jsonb_binary", func(t *T) { jsonAndJsonb(t, pgx.QueryExecModeCacheStatement, "docs_b") })
	addCase("json_and_jsonb_text", func(t *T) { jsonAndJsonb(t, pgx.QueryExecModeExec, "docs_t") })
	addCase("arrays_binary", func(t *T) { arraysCase(t, pgx.QueryExecModeCacheStatement, "arr_b") })
	addCase("arrays_text", func(t *T) { arraysCase(t, pgx.QueryExecModeExec, "arr_t") })
	addCase("pgtype_numeric", pgtypeNumeric)
	addCase("pgtype_interval_and_timestamptz", pgtypeIntervalAndTime)
	addCase("pgtype_uuid_null_and_scalars", pgtypeScalars)
}
