// The GORM driver suite: what Go applications do with gorm.io/gorm and its PostgreSQL driver
// gorm.io/driver/postgres (pgx v5 underneath), case by case (see tests/drivers/run.py for the
// output protocol). It connects with a DSN built from the libpq environment variables (PGHOST,
// PGPORT, PGUSER, PGDATABASE); each case opens its own *gorm.DB and uses its own tables, so one
// failure does not spill into the next, and each runs under a context timeout.
//
//	go run .                 # every case
//	go run . -v CASE ...     # only these cases, with every SQL statement GORM ran on stderr
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// How long one case may take; its context ends then, and the runner moves on a little later
// even when the case ignores its context.
const caseTimeout = 30 * time.Second

type testCase struct {
	name string
	fn   func(t *T)
}

var cases []testCase

func addCase(name string, fn func(t *T)) { cases = append(cases, testCase{name, fn}) }

var verbose bool

// T is one case's state: its context, the SQL GORM ran for it and what to close when it ends.
type T struct {
	name    string
	ctx     context.Context
	closers []func()
	log     *sqlLog
}

// failure is what the assertion helpers panic with; the runner reports it as the case's message.
type failure struct{ msg string }

func fail(format string, args ...any) { panic(failure{fmt.Sprintf(format, args...)}) }

// describe renders an error with its SQLSTATE when the server sent one.
func describe(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Sprintf("SQLSTATE %s: %s", pe.Code, pe.Message)
	}
	return err.Error()
}

// must fails the case when err is set, naming the statement GORM ran last that failed.
func (t *T) must(err error, what string) {
	if err != nil {
		msg := fmt.Sprintf("%s: %s", what, describe(err))
		if sql := t.log.lastFailed(); sql != "" {
			msg += " [SQL: " + sql + "]"
		}
		fail("%s", msg)
	}
}

// eq compares with reflect.DeepEqual.
func eq(got, want any, what string) {
	if !reflect.DeepEqual(got, want) {
		if lines, ok := got.([]string); ok && verbose {
			fmt.Fprintf(os.Stderr, "%s, got:\n", what)
			for _, l := range lines {
				fmt.Fprintf(os.Stderr, "\t\t`%s`,\n", l)
			}
		}
		fail("%s: got %#v, want %#v", what, got, want)
	}
}

// pgErr asserts that err wraps a *pgconn.PgError with this SQLSTATE and returns it.
func pgErr(err error, code, what string) *pgconn.PgError {
	if err == nil {
		fail("%s: succeeded, want SQLSTATE %s", what, code)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		fail("%s: got %T %v, want SQLSTATE %s", what, err, err, code)
	}
	if pe.Code != code {
		fail("%s: got SQLSTATE %s (%s), want %s", what, pe.Code, pe.Message, code)
	}
	return pe
}

func (t *T) onClose(f func()) { t.closers = append(t.closers, f) }

// sqlLog is a GORM logger that keeps the statements of one case (and prints them with -v).
type sqlLog struct {
	mu     sync.Mutex
	name   string
	stmts  []string
	failed string
}

func (l *sqlLog) LogMode(logger.LogLevel) logger.Interface     { return l }
func (l *sqlLog) Info(context.Context, string, ...interface{}) {}
func (l *sqlLog) Warn(context.Context, string, ...interface{}) {}
func (l *sqlLog) Error(_ context.Context, msg string, args ...interface{}) {
	if verbose {
		fmt.Fprintf(os.Stderr, "[%s] gorm error: %s\n", l.name, fmt.Sprintf(msg, args...))
	}
}

func (l *sqlLog) Trace(_ context.Context, begin time.Time, fc func() (string, int64), err error) {
	sql, rows := fc()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stmts = append(l.stmts, sql)
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		l.failed = sql
	}
	if verbose {
		status := fmt.Sprintf("%d rows", rows)
		if err != nil {
			status = "ERROR " + describe(err)
		}
		fmt.Fprintf(os.Stderr, "[%s] %s -- %s (%s)\n", l.name, sql, status, time.Since(begin).Round(time.Microsecond))
	}
}

func (l *sqlLog) lastFailed() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// mark returns how many statements ran so far; since(mark) the statements run after it.
func (l *sqlLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.stmts)
}

func (l *sqlLog) since(mark int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.stmts[mark:]...)
}

func dsn() string {
	return fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable connect_timeout=10",
		os.Getenv("PGHOST"), os.Getenv("PGPORT"), os.Getenv("PGUSER"), os.Getenv("PGDATABASE"))
}

type openOptions struct {
	simpleProtocol bool
	prepareStmt    bool
	rawErrors      bool // TranslateError off
	config         func(*gorm.Config)
}

func simpleProtocol(o *openOptions) { o.simpleProtocol = true }
func prepareStmt(o *openOptions)    { o.prepareStmt = true }
func rawErrors(o *openOptions)      { o.rawErrors = true }

// open opens a *gorm.DB for this case (prepared statements through pgx's statement cache
// unless simpleProtocol is given), bound to the case's context and closed when the case ends.
func (t *T) open(opts ...func(*openOptions)) *gorm.DB {
	var o openOptions
	for _, f := range opts {
		f(&o)
	}
	cfg := &gorm.Config{Logger: t.log, TranslateError: !o.rawErrors, PrepareStmt: o.prepareStmt}
	if o.config != nil {
		o.config(cfg)
	}
	db, err := gorm.Open(postgres.New(postgres.Config{DSN: dsn(), PreferSimpleProtocol: o.simpleProtocol}), cfg)
	t.must(err, "gorm.Open")
	sqlDB, err := db.DB()
	t.must(err, "db.DB()")
	t.onClose(func() { sqlDB.Close() })
	return db.WithContext(t.ctx)
}

// migrate runs AutoMigrate for these models and fails the case when it fails.
func (t *T) migrate(db *gorm.DB, models ...any) {
	t.must(db.AutoMigrate(models...), fmt.Sprintf("AutoMigrate(%T)", models[0]))
}

// create inserts value and fails the case when it fails.
func (t *T) create(db *gorm.DB, value any) {
	t.must(db.Create(value).Error, fmt.Sprintf("Create(%T)", value))
}

// raw runs a query and scans its result into dest.
func (t *T) raw(db *gorm.DB, dest any, sql string, args ...any) {
	t.must(db.Raw(sql, args...).Scan(dest).Error, sql)
}

func (t *T) exec(db *gorm.DB, sql string, args ...any) int64 {
	r := db.Exec(sql, args...)
	t.must(r.Error, sql)
	return r.RowsAffected
}

func (t *T) int(db *gorm.DB, sql string, args ...any) int64 {
	var n int64
	t.raw(db, &n, sql, args...)
	return n
}

func (t *T) strs(db *gorm.DB, sql string, args ...any) []string {
	var s []string
	t.raw(db, &s, sql, args...)
	if s == nil {
		s = []string{}
	}
	return s
}

func ptr[V any](v V) *V { return &v }

func runCase(tc testCase) (msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	done := make(chan string, 1)
	go func() {
		t := &T{name: tc.name, ctx: ctx, log: &sqlLog{name: tc.name}}
		result := ""
		defer func() {
			if r := recover(); r != nil {
				if f, ok := r.(failure); ok {
					result = f.msg
				} else {
					result = fmt.Sprintf("panic: %v", r)
					if verbose {
						fmt.Fprintf(os.Stderr, "%s: %v\n%s\n", tc.name, r, debug.Stack())
					}
				}
			}
			for i := len(t.closers) - 1; i >= 0; i-- {
				func() {
					defer func() { recover() }()
					t.closers[i]()
				}()
			}
			done <- result
		}()
		tc.fn(t)
	}()
	select {
	case msg = <-done:
		if msg == "" && ctx.Err() != nil {
			msg = "ran past its context timeout of " + caseTimeout.String()
		}
		return msg
	case <-time.After(caseTimeout + 10*time.Second):
		return "hung: no result " + (caseTimeout + 10*time.Second).String() + " after it started"
	}
}

func main() {
	only := map[string]bool{}
	for _, a := range os.Args[1:] {
		if a == "-v" {
			verbose = true
		} else if !strings.HasPrefix(a, "-") {
			only[a] = true
		}
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			panic("duplicate case name " + tc.name)
		}
		seen[tc.name] = true
	}
	for _, tc := range cases {
		if len(only) > 0 && !only[tc.name] {
			continue
		}
		start := time.Now()
		msg := runCase(tc)
		if verbose {
			fmt.Fprintf(os.Stderr, "%s took %s\n", tc.name, time.Since(start).Round(time.Millisecond))
		}
		if msg == "" {
			fmt.Printf("ok %s\n", tc.name)
		} else {
			msg = strings.Join(strings.Fields(msg), " ")
			if len(msg) > 600 {
				msg = msg[:600] + "..."
			}
			fmt.Printf("not ok %s: %s\n", tc.name, msg)
		}
	}
}
