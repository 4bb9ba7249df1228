// The pgx driver suite: what Go applications do with github.com/jackc/pgx/v5, case by case
// (see tests/drivers/run.py for the output protocol). It connects with the libpq environment
// variables (PGHOST, PGPORT, PGUSER, PGDATABASE); each case uses its own connections and
// tables, so one failure does not spill into the next, and each runs under a context timeout.
//
//	go run .                 # every case
//	go run . -v CASE ...     # only these cases, with details of failures on stderr
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// How long one case may take; its context ends then, and the runner moves on a little later
// even when the case ignores its context.
const caseTimeout = 20 * time.Second

type testCase struct {
	name string
	fn   func(t *T)
}

var cases []testCase

func addCase(name string, fn func(t *T)) { cases = append(cases, testCase{name, fn}) }

// T is one case's state: its context and what to close when it ends.
type T struct {
	ctx     context.Context
	closers []func()
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

func must(err error, what string) {
	if err != nil {
		fail("%s: %s", what, describe(err))
	}
}

// eq compares with reflect.DeepEqual.
func eq(got, want any, what string) {
	if !reflect.DeepEqual(got, want) {
		fail("%s: got %#v, want %#v", what, got, want)
	}
}

// pgErr asserts that err is a *pgconn.PgError with this SQLSTATE and returns it.
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

// config is the libpq-environment configuration, changed by the options given.
func (t *T) config(opts ...func(*pgx.ConnConfig)) *pgx.ConnConfig {
	cfg, err := pgx.ParseConfig("")
	must(err, "pgx.ParseConfig")
	for _, o := range opts {
		o(cfg)
	}
	return cfg
}

// connect opens a connection of this case, closed when the case ends.
func (t *T) connect(opts ...func(*pgx.ConnConfig)) *pgx.Conn {
	c, err := pgx.ConnectConfig(t.ctx, t.config(opts...))
	must(err, "connect")
	t.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

func withMode(mode pgx.QueryExecMode) func(*pgx.ConnConfig) {
	return func(cfg *pgx.ConnConfig) { cfg.DefaultQueryExecMode = mode }
}

// querier is what *pgx.Conn, pgx.Tx and *pgxpool.Pool have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (t *T) exec(q querier, sql string, args ...any) pgconn.CommandTag {
	tag, err := q.Exec(t.ctx, sql, args...)
	must(err, sql)
	return tag
}

// get runs a query that returns one row and scans it into dest.
func (t *T) get(q querier, dest []any, sql string, args ...any) {
	must(q.QueryRow(t.ctx, sql, args...).Scan(dest...), sql)
}

func into(dest ...any) []any { return dest }

func (t *T) int(q querier, sql string, args ...any) int64 {
	var n int64
	t.get(q, into(&n), sql, args...)
	return n
}

func (t *T) str(q querier, sql string, args ...any) string {
	var s string
	t.get(q, into(&s), sql, args...)
	return s
}

// num parses a numeric literal.
func num(s string) pgtype.Numeric {
	var n pgtype.Numeric
	if err := n.Scan(s); err != nil {
		panic(fmt.Sprintf("num(%q): %v", s, err))
	}
	return n
}

// numStr renders a numeric as PostgreSQL prints it.
func numStr(n pgtype.Numeric) string {
	v, err := n.Value()
	if err != nil {
		return "error: " + err.Error()
	}
	if v == nil {
		return "NULL"
	}
	return v.(string)
}

// uid is a fixed uuid that ends in i.
func uid(i int) pgtype.UUID {
	b := [16]byte{0x12, 0x34, 0x56, 0x78, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0, 0, byte(i >> 8), byte(i)}
	return pgtype.UUID{Bytes: b, Valid: true}
}

var modes = []struct {
	name string
	mode pgx.QueryExecMode
}{
	{"cache_statement", pgx.QueryExecModeCacheStatement},
	{"cache_describe", pgx.QueryExecModeCacheDescribe},
	{"describe_exec", pgx.QueryExecModeDescribeExec},
	{"exec", pgx.QueryExecModeExec},
	{"simple_protocol", pgx.QueryExecModeSimpleProtocol},
}

func runCase(tc testCase, verbose bool) (msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	done := make(chan string, 1)
	go func() {
		t := &T{ctx: ctx}
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
	verbose := false
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
		msg := runCase(tc, verbose)
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
