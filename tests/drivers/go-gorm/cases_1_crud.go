package main

// Connecting, and writing rows: common column types through both protocols, RETURNING of
// generated values, batches, upserts, updates and deletes.

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

func connectAndQuery(t *T, opts ...func(*openOptions)) *gorm.DB {
	db := t.open(opts...)
	eq(db.Dialector.Name(), "postgres", "Dialector.Name()")
	sqlDB, err := db.DB()
	t.must(err, "db.DB()")
	t.must(sqlDB.PingContext(t.ctx), "Ping")
	var who struct{ User, Db string }
	t.raw(db, &who, "SELECT current_user AS user, current_database() AS db")
	eq([]string{who.User, who.Db}, []string{"postgres", "postgres"}, "current_user, current_database()")
	eq(db.Migrator().CurrentDatabase(), "postgres", "Migrator().CurrentDatabase()")
	var version string
	t.raw(db, &version, "SHOW server_version")
	if major, err := strconv.Atoi(strings.Split(version, ".")[0]); err != nil || major < 10 {
		fail("server_version %q", version)
	}
	eq(t.int(db, "SELECT ?::int + ?::int", 2, 3), int64(5), "SELECT ?::int + ?::int")
	eq(t.strs(db, "SELECT ?::text || ? || ?", "it's", "-", `"q"`), []string{`it's-"q"`}, "text parameters with quotes")
	var got struct {
		B  bool
		F  float64
		N  *int64
		Ts time.Time
		By []byte
	}
	at := time.Date(2023, 12, 31, 23, 59, 58, 500000000, time.UTC)
	t.raw(db, &got, "SELECT ?::bool AS b, ?::float8 AS f, ?::int8 AS n, ?::timestamptz AS ts, ?::bytea AS by",
		true, 2.5, nil, at, []byte{0, 'a', 0xff})
	eq([]any{got.B, got.F, got.N, got.Ts.UTC(), got.By}, []any{true, 2.5, (*int64)(nil), at, []byte{0, 'a', 0xff}},
		"bool, float8, NULL, timestamptz and bytea parameters")
	eq(t.strs(db, "SELECT x::text FROM generate_series(1, ?) AS x WHERE x NOT IN ? ORDER BY x DESC", 5, []int64{2, 4}),
		[]string{"5", "3", "1"}, "NOT IN a slice")
	return db
}

func connectPreparedStatements(t *T) {
	db := connectAndQuery(t)
	// pgx's default: every statement is prepared once per connection and described.
	var stmts []string
	t.raw(db, &stmts, "SELECT statement FROM pg_prepared_statements WHERE statement LIKE ? ORDER BY statement",
		"SELECT $1::int + $2::int%")
	eq(stmts, []string{"SELECT $1::int + $2::int"}, "GORM's statement in pg_prepared_statements")
}

func connectSimpleProtocol(t *T) {
	db := connectAndQuery(t, simpleProtocol)
	var n int64
	t.raw(db, &n, "SELECT count(*) FROM pg_prepared_statements")
	eq(n, int64(0), "prepared statements with PreferSimpleProtocol")
}

// Common Go types in one model, written and read through one of the protocols.
type CtPayload struct {
	Kind  string   `json:"kind"`
	Sizes []int    `json:"sizes"`
	Extra *float64 `json:"extra"`
}

type CtRow struct {
	ID       int64
	Name     string `gorm:"size:40"`
	Count    int
	Big      int64
	Small    int16
	Ratio    float64
	Real     float64 `gorm:"type:double precision"`
	Flag     bool
	At       time.Time
	Day      time.Time `gorm:"type:date"`
	MaybeStr *string
	MaybeInt *int
	MaybeAt  *time.Time
	Blob     []byte
	Ref      string         `gorm:"type:uuid"`
	Amount   string         `gorm:"type:numeric(14,4)"`
	Meta     map[string]any `gorm:"type:jsonb;serializer:json"`
	Tags     []string       `gorm:"type:text;serializer:json"`
	Payload  CtPayload      `gorm:"type:json;serializer:json"`
}

func crudTypes(t *T, table string, opts ...func(*openOptions)) {
	db := t.open(opts...)
	t.must(db.Table(table).AutoMigrate(&CtRow{}), "AutoMigrate")
	at := time.Date(2024, 2, 29, 13, 14, 15, 123456000, time.FixedZone("UTC+2", 2*3600))
	day := time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)
	rows := []CtRow{
		{Name: `Zoë's "row"`, Count: -42, Big: 1<<53 + 1, Small: -32768, Ratio: 0.1, Real: 1.0 / 3, Flag: true, At: at, Day: day,
			Blob: []byte{0, 1, 2, 0xff, '\\', '\''}, Ref: "0f8fad5b-d9cb-469f-a165-70867728950e", Amount: "12345.6789",
			Meta: map[string]any{"k": "v", "n": 1.5, "list": []any{"a", nil}}, Tags: []string{"x", "y z"},
			Payload: CtPayload{Kind: "p", Sizes: []int{1, 2}}},
		{Name: "", Count: 0, Big: -1, Small: 7, Ratio: -2.75, Real: 1e-300, Flag: false, At: at.Add(-time.Hour * 24 * 365 * 30),
			Day: time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC), MaybeStr: ptr("set"), MaybeInt: ptr(0), MaybeAt: ptr(at.UTC()),
			Blob: []byte{}, Ref: "00000000-0000-0000-0000-000000000001", Amount: "-0.5", Meta: map[string]any{}, Tags: []string{},
			Payload: CtPayload{Kind: "q", Extra: ptr(2.0)}},
	}
	t.must(db.Table(table).Create(&rows).Error, "Create")
	eq([]int64{rows[0].ID, rows[1].ID}, []int64{1, 2}, "ids from RETURNING")
	var back []CtRow
	t.must(db.Table(table).Order("id").Find(&back).Error, "Find")
	if len(back) != 2 {
		fail("rows read back: %d", len(back))
	}
	for i, want := range rows {
		got := back[i]
		if !got.At.Equal(want.At) {
			fail("row %d At: got %v, want %v", i+1, got.At, want.At)
		}
		if (got.MaybeAt == nil) != (want.MaybeAt == nil) || (got.MaybeAt != nil && !got.MaybeAt.Equal(*want.MaybeAt)) {
			fail("row %d MaybeAt: got %v, want %v", i+1, got.MaybeAt, want.MaybeAt)
		}
		eq(got.Day.Format("2006-01-02"), want.Day.Format("2006-01-02"), fmt.Sprintf("row %d Day", i+1))
		got.At, got.MaybeAt, got.Day = want.At, want.MaybeAt, want.Day
		if want.Amount == "-0.5" {
			want.Amount = "-0.5000"
		}
		eq(got, want, fmt.Sprintf("row %d", i+1))
	}
	// What the server holds.
	type server struct {
		Amount, K, Ref, Blob, Day, At, Ratio, Tags, Payload string
		MaybeStr                                            *string
	}
	var s []server
	t.raw(db, &s, "SELECT amount::text AS amount, meta->>'k' AS k, ref::text AS ref, encode(blob, 'hex') AS blob, day::text AS day, "+
		"to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') AS at, ratio::text AS ratio, tags, payload::text AS payload, maybe_str "+
		"FROM "+table+" ORDER BY id")
	eq(s, []server{
		{"12345.6789", "v", "0f8fad5b-d9cb-469f-a165-70867728950e", "000102ff5c27", "2024-02-29", "2024-02-29 11:14:15.123456", "0.1",
			`["x","y z"]`, `{"kind":"p","sizes":[1,2],"extra":null}`, nil},
		{"-0.5000", "", "00000000-0000-0000-0000-000000000001", "", "1999-12-31", "1994-03-08 11:14:15.123456", "-2.75",
			`[]`, `{"kind":"q","sizes":null,"extra":2}`, ptr("set")},
	}, "values on the server")
	// Conditions on each type find the row.
	for _, c := range []struct {
		cond string
		arg  any
	}{
		{"name = ?", `Zoë's "row"`}, {"count = ?", -42}, {"big = ?", int64(1<<53 + 1)}, {"small = ?", int16(-32768)},
		{"ratio = ?", 0.1}, {"real = ?", 1.0 / 3}, {"flag = ?", true}, {"at = ?", at}, {"day = ?", day}, {"maybe_str IS NULL AND ? ", true},
		{"blob = ?", []byte{0, 1, 2, 0xff, '\\', '\''}}, {"ref = ?", "0f8fad5b-d9cb-469f-a165-70867728950e"},
		{"amount = ?", "12345.6789"}, {"meta @> ?", `{"k": "v"}`}, {"payload->>'kind' = ?", "p"},
	} {
		var ids []int64
		t.must(db.Table(table).Where(c.cond, c.arg).Pluck("id", &ids).Error, "WHERE "+c.cond)
		eq(ids, []int64{1}, "ids WHERE "+c.cond)
	}
	// Updating to NULL and back.
	t.must(db.Table(table).Where("id = ?", 2).Updates(map[string]any{"maybe_str": nil, "maybe_int": 5, "blob": nil}).Error, "Updates to NULL")
	var r2 CtRow
	t.must(db.Table(table).First(&r2, 2).Error, "First(2)")
	eq([]any{r2.MaybeStr, r2.MaybeInt, r2.Blob}, []any{(*string)(nil), ptr(5), []byte(nil)}, "row 2 after the update")
}

func crudTypesPrepared(t *T)       { crudTypes(t, "ct_rows_prepared") }
func crudTypesSimpleProtocol(t *T) { crudTypes(t, "ct_rows_simple", simpleProtocol) }

// Values the server generates come back through RETURNING: serial ids, defaults, a uuid key.
type RdTicket struct {
	ID        string    `gorm:"type:uuid;primaryKey;default:gen_random_uuid()"`
	Seq       int64     `gorm:"autoIncrement;not null"`
	Title     string    `gorm:"size:50;not null"`
	Status    string    `gorm:"size:10;default:'open'"`
	Priority  int       `gorm:"default:3"`
	Opened    time.Time `gorm:"default:now()"`
	Score     float64   `gorm:"type:double precision;default:0.5"`
	CreatedAt time.Time
}

func createReturningDefaults(t *T) {
	db := t.open()
	t.migrate(db, &RdTicket{})
	before := time.Now().Add(-time.Minute)
	a := RdTicket{Title: "first"}
	t.create(db, &a)
	if len(a.ID) != 36 || a.ID[14] != '4' {
		fail("generated uuid %q", a.ID)
	}
	if a.Opened.Before(before) || a.Opened.After(time.Now().Add(time.Minute)) {
		fail("now() default came back as %v", a.Opened)
	}
	eq([]any{a.Seq, a.Status, a.Priority, a.Score}, []any{int64(1), "open", 3, 0.5}, "defaults from RETURNING")
	b := RdTicket{Title: "second", Status: "closed", Priority: 9, Score: 2}
	t.create(db, &b)
	eq([]any{b.Seq, b.Status, b.Priority, b.Score}, []any{int64(2), "closed", 9, 2.0}, "given values")
	// Omit: the omitted column gets its default (see the rows below).
	c := RdTicket{Title: "third", Status: "ignored", Priority: 1}
	t.must(db.Omit("Status").Create(&c).Error, "Omit(Status).Create")
	eq([]any{c.Seq, c.Priority}, []any{int64(3), 1}, "Omit(Status)")
	// From a map: no model value to fill, the row is there.
	t.must(db.Model(&RdTicket{}).Create(map[string]any{"Title": "fourth", "Priority": 4}).Error, "Create(map)")
	t.must(db.Table("rd_tickets").Create([]map[string]any{{"title": "fifth"}, {"title": "sixth", "status": "x"}}).Error, "Table.Create([]map)")
	type row struct {
		Seq      int64
		Title    string
		Status   string
		Priority int
	}
	var all []row
	t.must(db.Model(&RdTicket{}).Order("seq").Find(&all).Error, "Find")
	eq(all, []row{{1, "first", "open", 3}, {2, "second", "closed", 9}, {3, "third", "open", 1}, {4, "fourth", "open", 4},
		{5, "fifth", "", 3}, {6, "sixth", "x", 3}}, "rows (fifth has a NULL status: the batch names the column)")
	var got RdTicket
	t.must(db.First(&got, "id = ?", a.ID).Error, "First by uuid")
	eq(got.Title, "first", "row found by its uuid")
	// An explicit primary key value is sent and kept.
	d := RdTicket{ID: "11111111-2222-3333-4444-555555555555", Title: "explicit"}
	t.create(db, &d)
	eq([]any{d.ID, d.Seq}, []any{"11111111-2222-3333-4444-555555555555", int64(7)}, "explicit uuid and next seq")
}

type BtEvent struct {
	ID   uint
	Name string `gorm:"size:20;not null"`
	N    int
}

func createInBatches(t *T) {
	db := t.open()
	t.migrate(db, &BtEvent{})
	var evs []BtEvent
	for i := 1; i <= 10; i++ {
		evs = append(evs, BtEvent{Name: fmt.Sprintf("e%02d", i), N: i * i})
	}
	mark := t.log.mark()
	r := db.CreateInBatches(&evs, 4)
	t.must(r.Error, "CreateInBatches")
	eq(r.RowsAffected, int64(10), "RowsAffected")
	inserts := 0
	for _, s := range t.log.since(mark) {
		if strings.HasPrefix(s, "INSERT") {
			inserts++
		}
	}
	eq(inserts, 3, "INSERT statements for 10 rows in batches of 4")
	ids := []uint{}
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	eq(ids, []uint{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, "ids from RETURNING, in order")
	// One multi-row INSERT.
	more := []*BtEvent{{Name: "m1", N: -1}, {Name: "m2", N: -2}, {Name: "m3", N: -3}}
	r = db.Create(more)
	t.must(r.Error, "Create(slice)")
	eq([]any{r.RowsAffected, more[0].ID, more[1].ID, more[2].ID}, []any{int64(3), uint(11), uint(12), uint(13)}, "multi-row insert")
	var sum int64
	t.raw(db, &sum, "SELECT sum(n) FROM bt_events")
	eq(sum, int64(385-6), "sum(n)")
	// A batch that fails leaves nothing behind (GORM wraps it in a transaction).
	bad := []BtEvent{{Name: "ok1"}, {Name: strings.Repeat("x", 21)}}
	if err := db.CreateInBatches(&bad, 1).Error; err == nil {
		fail("a name of 21 characters in varchar(20) was accepted")
	} else {
		pgErr(err, "22001", "a name of 21 characters in varchar(20)")
	}
	var n int64
	t.must(db.Model(&BtEvent{}).Count(&n).Error, "Count")
	eq(n, int64(13), "rows after the failed batch")
}

type UpKv struct {
	Key       string `gorm:"primaryKey;size:20"`
	Value     string `gorm:"size:20"`
	Hits      int
	UpdatedAt time.Time
}

type UpUser struct {
	ID    uint
	Email string `gorm:"size:50;uniqueIndex"`
	Name  string `gorm:"size:50"`
}

func upsertOnConflict(t *T) {
	db := t.open()
	t.migrate(db, &UpKv{}, &UpUser{})
	t.create(db, []UpKv{{Key: "a", Value: "old", Hits: 1}, {Key: "b", Value: "old", Hits: 1}})
	value := func(key string) UpKv {
		var kv UpKv
		t.must(db.First(&kv, "key = ?", key).Error, "First "+key)
		return kv
	}
	r := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&UpKv{Key: "a", Value: "new"})
	t.must(r.Error, "ON CONFLICT DO NOTHING")
	eq([]any{r.RowsAffected, value("a").Value}, []any{int64(0), "old"}, "DO NOTHING: RowsAffected, value")
	r = db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "key"}}, DoUpdates: clause.AssignmentColumns([]string{"value"})}).
		Create(&UpKv{Key: "a", Value: "new", Hits: 100})
	t.must(r.Error, "ON CONFLICT DO UPDATE SET value")
	eq([]any{r.RowsAffected, value("a").Value, value("a").Hits}, []any{int64(1), "new", 1}, "DoUpdates(value): RowsAffected, value, hits")
	for i := 0; i < 3; i++ {
		t.must(db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "key"}},
			DoUpdates: clause.Assignments(map[string]any{"hits": gorm.Expr("up_kvs.hits + excluded.hits")})}).
			Create(&UpKv{Key: "b", Value: "ignored", Hits: 10}).Error, "ON CONFLICT DO UPDATE SET hits = hits + excluded.hits")
	}
	eq([]any{value("b").Value, value("b").Hits}, []any{"old", 31}, "hits incremented three times")
	// DO UPDATE ... WHERE: only a higher hit count wins.
	r = db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "key"}}, DoUpdates: clause.AssignmentColumns([]string{"value", "hits"}),
		Where: clause.Where{Exprs: []clause.Expression{gorm.Expr("excluded.hits > up_kvs.hits")}}}).
		Create(&[]UpKv{{Key: "a", Value: "low", Hits: 0}, {Key: "b", Value: "high", Hits: 50}})
	t.must(r.Error, "ON CONFLICT DO UPDATE WHERE")
	eq([]any{r.RowsAffected, value("a").Value, value("b").Value, value("b").Hits}, []any{int64(1), "new", "high", 50}, "DO UPDATE WHERE")
	// UpdateAll: every column but the key, for a batch with one new row.
	r = db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&[]UpKv{{Key: "a", Value: "all", Hits: 7}, {Key: "c", Value: "new", Hits: 3}})
	t.must(r.Error, "ON CONFLICT UpdateAll")
	eq([]any{r.RowsAffected, value("a").Value, value("a").Hits, value("c").Value}, []any{int64(2), "all", 7, "new"}, "UpdateAll")
	var n int64
	t.must(db.Model(&UpKv{}).Count(&n).Error, "Count")
	eq(n, int64(3), "rows")
	// A serial key through an upsert on a unique column: RETURNING gives the existing row's id.
	u1 := UpUser{Email: "a@x", Name: "A"}
	t.create(db, &u1)
	t.create(db, &UpUser{Email: "b@x", Name: "B"})
	u2 := UpUser{Email: "a@x", Name: "A2"}
	t.must(db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "email"}}, DoUpdates: clause.AssignmentColumns([]string{"name"})}).
		Create(&u2).Error, "upsert on email")
	eq([]any{u1.ID, u2.ID}, []any{uint(1), uint(1)}, "id of the upserted row")
	var u UpUser
	t.must(db.First(&u, u1.ID).Error, "First")
	eq(u.Name, "A2", "name after the upsert")
	// DO NOTHING on the unique column, with RETURNING: no row, so the id stays 0.
	u3 := UpUser{Email: "b@x", Name: "B2"}
	r = db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "email"}}, DoNothing: true}).Create(&u3)
	t.must(r.Error, "DO NOTHING on email")
	eq([]any{r.RowsAffected, u3.ID}, []any{int64(0), uint(0)}, "DO NOTHING: RowsAffected, id")
}

type UdItem struct {
	ID    uint
	Name  string `gorm:"size:20"`
	Qty   int
	Price float64 `gorm:"type:numeric(10,2)"`
	Note  *string
}

func updatesAndDeletes(t *T) {
	db := t.open()
	t.migrate(db, &UdItem{})
	items := []UdItem{{Name: "a", Qty: 1, Price: 1.5}, {Name: "b", Qty: 2, Price: 2.5}, {Name: "c", Qty: 3, Price: 3.5}, {Name: "d", Qty: 4, Price: 4.5}}
	t.create(db, &items)
	get := func(id uint) UdItem {
		var it UdItem
		t.must(db.First(&it, id).Error, "First")
		return it
	}
	// Save: every field, the zero ones too.
	it := get(1)
	it.Name, it.Qty, it.Note = "a2", 0, ptr("noted")
	t.must(db.Save(&it).Error, "Save")
	eq(get(1), UdItem{1, "a2", 0, 1.5, ptr("noted")}, "after Save")
	// Update one column; Updates with a struct skips zero fields, with a map does not.
	r := db.Model(&UdItem{ID: 2}).Update("name", "b2")
	t.must(r.Error, "Update")
	eq(r.RowsAffected, int64(1), "Update RowsAffected")
	t.must(db.Model(&UdItem{ID: 2}).Updates(UdItem{Name: "b3", Qty: 0, Price: 9.99}).Error, "Updates(struct)")
	eq(get(2), UdItem{2, "b3", 2, 9.99, nil}, "after Updates(struct)")
	t.must(db.Model(&UdItem{ID: 2}).Updates(map[string]any{"qty": 0, "note": "n"}).Error, "Updates(map)")
	eq(get(2), UdItem{2, "b3", 0, 9.99, ptr("n")}, "after Updates(map)")
	t.must(db.Model(&UdItem{ID: 3}).Select("*").Omit("id").Updates(UdItem{Name: "c2"}).Error, "Select(*).Updates")
	eq(get(3), UdItem{3, "c2", 0, 0, nil}, "after Select(*).Updates")
	// Expressions.
	r = db.Model(&UdItem{}).Where("id IN ?", []uint{1, 4}).UpdateColumn("qty", gorm.Expr("qty + ?", 10))
	t.must(r.Error, "UpdateColumn(qty + 10)")
	eq(r.RowsAffected, int64(2), "UpdateColumn RowsAffected")
	t.must(db.Model(&UdItem{}).Where("name = ?", "d").Update("price", gorm.Expr("price * ?", 2)).Error, "Update(price * 2)")
	eq([]int{get(1).Qty, get(4).Qty}, []int{10, 14}, "qty after the expression")
	eq(get(4).Price, 9.0, "price after the expression")
	// UPDATE ... RETURNING into the models.
	var returned []UdItem
	r = db.Model(&returned).Clauses(clause.Returning{}).Where("qty >= ?", 10).Update("name", gorm.Expr("upper(name)"))
	t.must(r.Error, "UPDATE RETURNING")
	names := []string{}
	for _, x := range returned {
		names = append(names, x.Name)
	}
	if len(names) == 2 && names[0] > names[1] {
		names[0], names[1] = names[1], names[0]
	}
	eq(names, []string{"A2", "D"}, "names from UPDATE RETURNING")
	// Without conditions GORM refuses, unless asked.
	err := db.Model(&UdItem{}).Update("qty", 1).Error
	if !errors.Is(err, gorm.ErrMissingWhereClause) {
		fail("global update: got %v, want gorm.ErrMissingWhereClause", err)
	}
	r = db.Session(&gorm.Session{AllowGlobalUpdate: true}).Model(&UdItem{}).Update("qty", 1)
	t.must(r.Error, "global update")
	eq(r.RowsAffected, int64(4), "global update RowsAffected")
	// Deletes: by primary key, by condition, with RETURNING.
	r = db.Delete(&UdItem{}, 1)
	t.must(r.Error, "Delete by id")
	eq(r.RowsAffected, int64(1), "Delete by id RowsAffected")
	var deleted []UdItem
	r = db.Clauses(clause.Returning{Columns: []clause.Column{{Name: "id"}, {Name: "name"}}}).Where("qty = ?", 1).Delete(&deleted)
	t.must(r.Error, "DELETE RETURNING")
	if len(deleted) != 3 {
		fail("DELETE RETURNING gave %+v", deleted)
	}
	var left int64
	t.must(db.Model(&UdItem{}).Count(&left).Error, "Count")
	eq([]any{r.RowsAffected, left}, []any{int64(3), int64(0)}, "rows deleted, rows left")
}

// Custom types through driver.Valuer and sql.Scanner, sql.Null*, named string types.
type Point struct{ X, Y int }

func (p Point) Value() (driver.Value, error) { return fmt.Sprintf("(%d,%d)", p.X, p.Y), nil }

func (p *Point) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case string:
		s = v
	case []byte:
		s = string(v)
	default:
		return fmt.Errorf("Point.Scan: %T", src)
	}
	_, err := fmt.Sscanf(s, "(%d,%d)", &p.X, &p.Y)
	return err
}

type Status string

type CvShape struct {
	ID     uint
	Corner Point  `gorm:"type:text"`
	Status Status `gorm:"size:10"`
	Label  sql.NullString
	Size   sql.NullInt64
	Seen   sql.NullTime
	Ok     sql.NullBool
	Weight sql.NullFloat64 `gorm:"type:double precision"`
}

func customTypes(t *T) {
	db := t.open()
	t.migrate(db, &CvShape{})
	seen := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	in := []CvShape{
		{Corner: Point{3, -4}, Status: "active", Label: sql.NullString{String: "L", Valid: true}, Size: sql.NullInt64{Int64: 9, Valid: true},
			Seen: sql.NullTime{Time: seen, Valid: true}, Ok: sql.NullBool{Bool: false, Valid: true}, Weight: sql.NullFloat64{Float64: 0.25, Valid: true}},
		{Corner: Point{0, 0}, Status: "idle"},
	}
	t.create(db, &in)
	var out []CvShape
	t.must(db.Order("id").Find(&out).Error, "Find")
	if len(out) != 2 {
		fail("rows: %+v", out)
	}
	out[0].Seen.Time = out[0].Seen.Time.UTC()
	eq(out, []CvShape{{ID: 1, Corner: Point{3, -4}, Status: "active", Label: in[0].Label, Size: in[0].Size, Seen: in[0].Seen, Ok: in[0].Ok,
		Weight: in[0].Weight}, {ID: 2, Corner: Point{0, 0}, Status: "idle"}}, "rows")
	var ids []uint
	t.must(db.Model(&CvShape{}).Where(&CvShape{Status: "idle"}).Or("corner = ?", Point{3, -4}).Order("id").Pluck("id", &ids).Error, "Where(Valuer)")
	eq(ids, []uint{1, 2}, "ids by status or by a Valuer")
	var nulls int64
	t.raw(db, &nulls, "SELECT count(*) FROM cv_shapes WHERE label IS NULL AND size IS NULL AND seen IS NULL AND ok IS NULL AND weight IS NULL")
	eq(nulls, int64(1), "rows of NULLs")
}

func init() {
	addCase("connect_prepared_statements", connectPreparedStatements)
	addCase("connect_simple_protocol", connectSimpleProtocol)
	addCase("crud_types_prepared", crudTypesPrepared)
	addCase("crud_types_simple_protocol", crudTypesSimpleProtocol)
	addCase("create_returning_defaults", createReturningDefaults)
	addCase("create_in_batches", createInBatches)
	addCase("upsert_on_conflict", upsertOnConflict)
	addCase("updates_and_deletes", updatesAndDeletes)
	addCase("custom_types_valuer_scanner", customTypes)
}
