package main

// Transactions (with savepoints), row locks, errors as GORM translates them, GORM's own
// prepared statements, and cancellation.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

type TxEntry struct {
	ID   uint
	Name string `gorm:"size:20;uniqueIndex"`
	N    int
}

func names(t *T, db *gorm.DB, model any) []string {
	var out []string
	t.must(db.Model(model).Order("id").Pluck("name", &out).Error, "Pluck names")
	if out == nil {
		out = []string{}
	}
	return out
}

func transactionNestedSavepoints(t *T) {
	db := t.open()
	sqlDB, err := db.DB()
	t.must(err, "DB")
	sqlDB.SetMaxOpenConns(1)
	t.migrate(db, &TxEntry{})
	errInner := errors.New("inner fails")
	err = db.Transaction(func(tx *gorm.DB) error {
		t.create(tx, &TxEntry{Name: "outer1"})
		// A nested transaction that fails rolls back to its savepoint only.
		err := tx.Transaction(func(tx2 *gorm.DB) error {
			t.create(tx2, &TxEntry{Name: "inner1"})
			return errInner
		})
		if !errors.Is(err, errInner) {
			return fmt.Errorf("nested transaction returned %v", err)
		}
		// One that succeeds stays; and one more level inside it fails.
		err = tx.Transaction(func(tx2 *gorm.DB) error {
			t.create(tx2, &TxEntry{Name: "inner2"})
			return tx2.Transaction(func(tx3 *gorm.DB) error {
				t.create(tx3, &TxEntry{Name: "inner3"})
				return errors.New("third level fails")
			})
		})
		if err == nil || err.Error() != "third level fails" {
			return fmt.Errorf("nested twice returned %v", err)
		}
		// A statement that fails inside a savepoint, rolled back by hand: the transaction goes on.
		tx.SavePoint("sp1")
		if err := tx.Create(&TxEntry{Name: "outer1"}).Error; !errors.Is(err, gorm.ErrDuplicatedKey) {
			return fmt.Errorf("duplicate in the savepoint: %v", err)
		}
		tx.RollbackTo("sp1")
		t.create(tx, &TxEntry{Name: "outer2"})
		var seen []string
		t.must(tx.Model(&TxEntry{}).Order("id").Pluck("name", &seen).Error, "names inside")
		eq(seen, []string{"outer1", "outer2"}, "names inside the transaction")
		return nil
	})
	t.must(err, "Transaction")
	eq(names(t, db, &TxEntry{}), []string{"outer1", "outer2"}, "names after commit")
	// The whole transaction rolls back on an error, and on a panic.
	err = db.Transaction(func(tx *gorm.DB) error {
		t.create(tx, &TxEntry{Name: "kept1"})
		return tx.Transaction(func(tx2 *gorm.DB) error {
			t.create(tx2, &TxEntry{Name: "kept2"})
			return nil
		})
	})
	t.must(err, "second Transaction")
	eq(len(names(t, db, &TxEntry{})), 4, "rows after the second commit")
	err = db.Transaction(func(tx *gorm.DB) error {
		t.create(tx, &TxEntry{Name: "gone3"})
		return errors.New("abort")
	})
	eq(fmt.Sprint(err), "abort", "Transaction error")
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				panic(r)
			}
		}()
		db.Transaction(func(tx *gorm.DB) error {
			t.create(tx, &TxEntry{Name: "gone4"})
			panic("boom")
		})
	}()
	eq(names(t, db, &TxEntry{}), []string{"outer1", "outer2", "kept1", "kept2"}, "names after the rollbacks")
	// The one connection is out of any transaction: what it writes now, another session sees.
	t.create(db, &TxEntry{Name: "final"})
	eq(names(t, t.open(), &TxEntry{}), []string{"outer1", "outer2", "kept1", "kept2", "final"}, "names seen by another session")
}

type TmEntry struct {
	ID   uint
	Name string `gorm:"size:20;uniqueIndex"`
	N    int
}

func transactionManual(t *T) {
	db := t.open()
	t.migrate(db, &TmEntry{})
	tx := db.Begin()
	t.must(tx.Error, "Begin")
	t.create(tx, &TmEntry{Name: "rolled"})
	var inside, outside int64
	t.must(tx.Model(&TmEntry{}).Count(&inside).Error, "Count inside")
	t.must(db.Model(&TmEntry{}).Count(&outside).Error, "Count outside")
	eq([]int64{inside, outside}, []int64{1, 0}, "rows seen inside and outside the open transaction")
	t.must(tx.Rollback().Error, "Rollback")
	eq(names(t, db, &TmEntry{}), []string{}, "after Rollback")
	tx = db.Begin()
	t.create(tx, &TmEntry{Name: "kept", N: 1})
	tx.SavePoint("a")
	t.create(tx, &TmEntry{Name: "dropped"})
	tx.RollbackTo("a")
	t.must(tx.Model(&TmEntry{}).Where("name = ?", "kept").Update("n", 2).Error, "Update after RollbackTo")
	t.must(tx.Commit().Error, "Commit")
	eq(names(t, db, &TmEntry{}), []string{"kept"}, "after Commit")
	eq(t.int(db, "SELECT n FROM tm_entries WHERE name = 'kept'"), int64(2), "the update after RollbackTo")
	// A failed statement aborts the transaction until it ends.
	tx = db.Begin()
	err := tx.Create(&TmEntry{Name: "kept"}).Error
	if !errors.Is(err, gorm.ErrDuplicatedKey) {
		fail("duplicate in a transaction: got %v, want ErrDuplicatedKey", err)
	}
	var n int64
	err = tx.Model(&TmEntry{}).Count(&n).Error
	pgErr(err, "25P02", "a statement after the error")
	tx.Rollback()
	// Isolation levels and read-only transactions, through sql.TxOptions.
	for _, c := range []struct {
		opts *sql.TxOptions
		want []string
	}{
		{&sql.TxOptions{Isolation: sql.LevelSerializable}, []string{"serializable", "off"}},
		{&sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, []string{"repeatable read", "on"}},
		{&sql.TxOptions{Isolation: sql.LevelReadCommitted}, []string{"read committed", "off"}},
	} {
		tx = db.Begin(c.opts)
		t.must(tx.Error, "Begin with options")
		var iso, ro string
		t.raw(tx, &iso, "SHOW transaction_isolation")
		t.raw(tx, &ro, "SHOW transaction_read_only")
		eq([]string{iso, ro}, c.want, fmt.Sprintf("isolation and read-only for %+v", *c.opts))
		if c.opts.ReadOnly {
			pgErr(tx.Create(&TmEntry{Name: "ro"}).Error, "25006", "INSERT in a read-only transaction")
		}
		tx.Rollback()
	}
	// Transaction with options.
	err = db.Transaction(func(tx *gorm.DB) error {
		var iso string
		t.raw(tx, &iso, "SHOW transaction_isolation")
		eq(iso, "repeatable read", "Transaction(fn, options)")
		return tx.Create(&TmEntry{Name: "rr"}).Error
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	t.must(err, "Transaction with options")
	eq(names(t, db, &TmEntry{}), []string{"kept", "rr"}, "at the end")
}

type LkSeat struct {
	ID    uint
	Label string `gorm:"size:5"`
	Taken bool
}

func lockingForUpdate(t *T) {
	db := t.open()
	t.migrate(db, &LkSeat{})
	t.create(db, []LkSeat{{Label: "A1"}, {Label: "A2"}, {Label: "A3"}})
	other := t.open()
	tx1 := db.Begin()
	t.must(tx1.Error, "Begin tx1")
	defer tx1.Rollback()
	var s LkSeat
	mark := t.log.mark()
	t.must(tx1.Clauses(clause.Locking{Strength: "UPDATE"}).Where("label = ?", "A1").First(&s).Error, "FOR UPDATE")
	stmts := t.log.since(mark)
	if len(stmts) != 1 || !strings.HasSuffix(stmts[0], "FOR UPDATE") {
		fail("the locking statement: %q", stmts)
	}
	// NOWAIT fails at once on the locked row.
	tx2 := other.Begin()
	t.must(tx2.Error, "Begin tx2")
	err := tx2.Clauses(clause.Locking{Strength: "UPDATE", Options: "NOWAIT"}).Where("label = ?", "A1").First(&LkSeat{}).Error
	pgErr(err, "55P03", "FOR UPDATE NOWAIT on a locked row")
	tx2.Rollback()
	// SKIP LOCKED passes over it.
	tx2 = other.Begin()
	var free []LkSeat
	t.must(tx2.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"}).Order("id").Limit(2).Find(&free).Error, "SKIP LOCKED")
	eq(len(free) == 2 && free[0].Label == "A2" && free[1].Label == "A3", true, "rows SKIP LOCKED gives")
	tx2.Rollback()
	// FOR SHARE of another row does not wait; FOR SHARE of the locked row waits until tx1 commits.
	tx2 = other.Begin()
	t.must(tx2.Clauses(clause.Locking{Strength: "SHARE"}).Where("label = ?", "A2").First(&LkSeat{}).Error, "FOR SHARE of a free row")
	done := make(chan error, 1)
	var waited LkSeat
	go func() {
		done <- tx2.Clauses(clause.Locking{Strength: "SHARE", Table: clause.Table{Name: clause.CurrentTable}}).
			Where("label = ?", "A1").First(&waited).Error
	}()
	select {
	case err := <-done:
		fail("FOR SHARE of the locked row did not wait: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	t.must(tx1.Model(&s).Update("taken", true).Error, "Update in tx1")
	t.must(tx1.Commit().Error, "Commit tx1")
	select {
	case err := <-done:
		t.must(err, "FOR SHARE after the commit")
	case <-time.After(10 * time.Second):
		fail("FOR SHARE still waits 10 s after the commit")
	}
	eq(waited.Taken, true, "the waiting read sees the committed update")
	tx2.Rollback()
	// FOR UPDATE in a Transaction func, the way a reservation is made.
	err = db.Transaction(func(tx *gorm.DB) error {
		var seat LkSeat
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("NOT taken").Order("id").First(&seat).Error; err != nil {
			return err
		}
		return tx.Model(&seat).Update("taken", true).Error
	})
	t.must(err, "reserve")
	var taken []string
	t.must(db.Model(&LkSeat{}).Where("taken").Order("label").Pluck("label", &taken).Error, "taken seats")
	eq(taken, []string{"A1", "A2"}, "taken seats")
}

type ErParent struct {
	ID   uint
	Name string `gorm:"size:20"`
}

type ErChild struct {
	ID         uint
	Email      string `gorm:"size:30;uniqueIndex:idx_er_email"`
	Qty        int    `gorm:"check:chk_er_qty,qty >= 0"`
	ErParentID uint
	ErParent   ErParent
}

func errorsTranslated(t *T) {
	db := t.open()
	t.migrate(db, &ErParent{}, &ErChild{})
	p := ErParent{Name: "p"}
	t.create(db, &p)
	t.create(db, &ErChild{Email: "a@x", Qty: 1, ErParentID: p.ID})
	for _, c := range []struct {
		what  string
		err   error
		want  error
		code  string
		cname string
		table string
	}{
		{"duplicate email", db.Create(&ErChild{Email: "a@x", ErParentID: p.ID}).Error, gorm.ErrDuplicatedKey, "23505", "idx_er_email", "er_children"},
		{"missing parent", db.Create(&ErChild{Email: "b@x", ErParentID: 99}).Error, gorm.ErrForeignKeyViolated, "23503", "fk_er_children_er_parent", "er_children"},
		{"negative qty", db.Create(&ErChild{Email: "c@x", Qty: -1, ErParentID: p.ID}).Error, gorm.ErrCheckConstraintViolated, "23514", "chk_er_qty", "er_children"},
		{"delete a referenced parent", db.Delete(&p).Error, gorm.ErrForeignKeyViolated, "23503", "fk_er_children_er_parent", "er_children"},
		{"duplicate primary key", db.Create(&ErParent{ID: p.ID, Name: "again"}).Error, gorm.ErrDuplicatedKey, "23505", "er_parents_pkey", "er_parents"},
	} {
		if !errors.Is(c.err, c.want) {
			fail("%s: got %v, want %v", c.what, c.err, c.want)
		}
		pe := pgErr(c.err, c.code, c.what)
		eq([]string{pe.ConstraintName, pe.TableName, pe.SchemaName}, []string{c.cname, c.table, "public"}, c.what+": constraint, table, schema")
	}
	err := db.Create(&ErChild{Email: "a@x", ErParentID: p.ID}).Error
	eq(pgErr(err, "23505", "duplicate email").Detail, "Key (email)=(a@x) already exists.", "Detail of the unique violation")
	pgErr(db.Where("no_such_column = ?", 1).Find(&[]ErChild{}).Error, "42703", "unknown column")
	pgErr(db.Exec("SELECT * FROM er_nothing").Error, "42P01", "unknown table")
	pgErr(db.Exec("SELEC 1").Error, "42601", "syntax error")
	pgErr(db.Raw("SELECT 1 / ?", 0).Scan(new(int)).Error, "22012", "division by zero")
	// Without TranslateError the driver's error comes as it is.
	raw := t.open(rawErrors)
	err = raw.Create(&ErChild{Email: "a@x", ErParentID: p.ID}).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		fail("without TranslateError the error is translated: %v", err)
	}
	pgErr(err, "23505", "duplicate email without TranslateError")
	// Records not found are errors for First, not for Find.
	err = db.Where("email = ?", "none").First(&ErChild{}).Error
	eq(errors.Is(err, gorm.ErrRecordNotFound), true, "First finds nothing")
}

type PsWidget struct {
	ID   uint
	Name string `gorm:"size:20"`
	Qty  int
}

func (PsWidget) TableName() string { return "ps_widgets" }

func prepareStmtMode(t *T) {
	// PrepareStmt: GORM prepares each statement once through database/sql and reuses it.
	db := t.open(prepareStmt)
	sqlDB, err := db.DB()
	t.must(err, "DB")
	sqlDB.SetMaxOpenConns(1)
	t.migrate(db, &PsWidget{})
	for i := 1; i <= 5; i++ {
		t.create(db, &PsWidget{Name: fmt.Sprintf("w%d", i), Qty: i})
	}
	for i := 1; i <= 5; i++ {
		var w PsWidget
		t.must(db.First(&w, "qty = ?", i).Error, "First by qty")
		eq(w.Name, fmt.Sprintf("w%d", i), "the prepared query's row")
	}
	var stmts []string
	t.raw(db, &stmts, `SELECT statement FROM pg_prepared_statements WHERE statement LIKE 'SELECT * FROM "ps_widgets"%' ORDER BY statement`)
	eq(stmts, []string{`SELECT * FROM "ps_widgets" WHERE qty = $1 ORDER BY "ps_widgets"."id" LIMIT $2`}, "GORM's prepared SELECT")
	// A row inserted after the SELECT was prepared is found by it.
	t.create(db, &PsWidget{Name: "w6", Qty: 3})
	var ws []PsWidget
	t.must(db.Where("qty = ?", 3).Order("id").Find(&ws).Error, "Find by qty")
	eq(len(ws) == 2 && ws[1].Name == "w6", true, "the prepared query sees the new row")
	err = db.Transaction(func(tx *gorm.DB) error {
		for i := 0; i < 3; i++ {
			if err := tx.Model(&PsWidget{}).Where("qty = ?", i).Update("name", gorm.Expr("name || ?", "-blue")).Error; err != nil {
				return err
			}
		}
		return nil
	})
	t.must(err, "prepared statements in a transaction")
	var blue []string
	t.must(db.Model(&PsWidget{}).Where("name LIKE ?", "%-blue").Order("id").Pluck("name", &blue).Error, "Pluck")
	eq(blue, []string{"w1-blue", "w2-blue"}, "rows updated in the transaction")
}

type CxJob struct {
	ID   uint
	Name string `gorm:"size:20"`
}

func contextCancellation(t *T) {
	db := t.open()
	sqlDB, err := db.DB()
	t.must(err, "DB")
	sqlDB.SetMaxOpenConns(1)
	t.migrate(db, &CxJob{})
	ctx, cancel := context.WithTimeout(t.ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = db.WithContext(ctx).Exec("SELECT pg_sleep(5)").Error
	if err == nil || time.Since(start) > 3*time.Second {
		fail("pg_sleep(5) under a 300 ms timeout: %v after %s", err, time.Since(start))
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		fail("pg_sleep(5) under a 300 ms timeout: got %v, want context.DeadlineExceeded", err)
	}
	// The pool goes on with a working connection.
	t.create(db, &CxJob{Name: "after"})
	var n int64
	t.must(db.Model(&CxJob{}).Count(&n).Error, "Count after the timeout")
	eq(n, int64(1), "rows after the timeout")
	// A transaction whose context ends is rolled back.
	ctx2, cancel2 := context.WithCancel(t.ctx)
	tx := db.WithContext(ctx2).Begin()
	t.must(tx.Error, "Begin")
	t.create(tx, &CxJob{Name: "cancelled"})
	cancel2()
	time.Sleep(100 * time.Millisecond)
	if err := tx.Commit().Error; err == nil {
		fail("Commit after the context ended succeeded")
	}
	var jobs []string
	t.must(db.Model(&CxJob{}).Order("id").Pluck("name", &jobs).Error, "Pluck")
	eq(jobs, []string{"after"}, "rows after the cancelled transaction")
	// statement_timeout set for a session.
	err = db.Connection(func(c *gorm.DB) error {
		if err := c.Exec("SET statement_timeout = 200").Error; err != nil {
			return err
		}
		e := c.Exec("SELECT pg_sleep(3)").Error
		c.Exec("RESET statement_timeout")
		return e
	})
	pgErr(err, "57014", "pg_sleep(3) with statement_timeout = 200")
}

// Composite primary keys.
type CkStock struct {
	Warehouse string `gorm:"primaryKey;size:10"`
	Sku       int    `gorm:"primaryKey;autoIncrement:false"`
	Qty       int
}

func compositePrimaryKey(t *T) {
	db := t.open()
	t.migrate(db, &CkStock{})
	t.create(db, []CkStock{{"north", 1, 5}, {"north", 2, 0}, {"south", 1, 7}})
	var s CkStock
	t.must(db.First(&s, "warehouse = ? AND sku = ?", "south", 1).Error, "First")
	eq(s.Qty, 7, "qty of (south, 1)")
	t.must(db.Model(&CkStock{Warehouse: "north", Sku: 2}).Update("qty", 9).Error, "Update by the composite key")
	t.must(db.Save(&CkStock{Warehouse: "south", Sku: 1, Qty: 8}).Error, "Save")
	t.must(db.Save(&CkStock{Warehouse: "east", Sku: 3, Qty: 1}).Error, "Save a new row")
	t.must(db.Delete(&CkStock{Warehouse: "north", Sku: 1}).Error, "Delete by the composite key")
	var all []CkStock
	t.must(db.Order("warehouse, sku").Find(&all).Error, "Find")
	eq(all, []CkStock{{"east", 3, 1}, {"north", 2, 9}, {"south", 1, 8}}, "rows")
	err := db.Create(&CkStock{"north", 2, 1}).Error
	if !errors.Is(err, gorm.ErrDuplicatedKey) {
		fail("duplicate composite key: got %v", err)
	}
	var pk []string
	t.raw(db, &pk, `SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		WHERE i.indrelid = 'ck_stocks'::regclass AND i.indisprimary ORDER BY a.attnum`)
	sort.Strings(pk)
	eq(pk, []string{"sku", "warehouse"}, "primary key columns")
}

func init() {
	addCase("transaction_nested_savepoints", transactionNestedSavepoints)
	addCase("transaction_manual", transactionManual)
	addCase("locking_for_update", lockingForUpdate)
	addCase("errors_translated", errorsTranslated)
	addCase("prepare_stmt_mode", prepareStmtMode)
	addCase("context_cancellation", contextCancellation)
	addCase("composite_primary_key", compositePrimaryKey)
}
