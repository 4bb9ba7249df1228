// Command go drives a Redis-protocol server with an unmodified go-redis v9 client and
// asserts the values it gets back, the way a typical Go application uses Redis.
//
//	REDIS_HOST=127.0.0.1 REDIS_PORT=6379 go run .
//
// The same program is meant to pass against a real Redis 7 (which shows the expectations
// are right) and against Shoal's Redis protocol. Every case runs twice: once with
// go-redis's defaults (RESP3: HELLO 3 on connect) and once with Protocol: 2. It prints one
// line per case, "ok <case>" or "not ok <case>: <what went wrong>", and exits 1 if any case
// failed.
//
// Where Redis leaves an order unspecified (hash fields, set members) the checks compare
// order-insensitively; SCAN cursors are opaque, only the set of collected keys is checked.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"time"

	"github.com/redis/go-redis/v9"
)

// env is what every case gets: a client for the protocol under test, the options it was
// made from (to make more clients), and the key prefix of the case.
type env struct {
	rdb   *redis.Client
	opts  *redis.Options
	proto int
	p     string // key prefix: "resp3:hashes:" and so on
}

// k returns the case's key with the given suffix.
func (e *env) k(suffix string) string { return e.p + suffix }

// newClient makes another client like the one under test, with changes applied.
func (e *env) newClient(change func(*redis.Options)) *redis.Client {
	o := *e.opts
	if change != nil {
		change(&o)
	}
	return redis.NewClient(&o)
}

type testCase struct {
	name string
	fn   func(ctx context.Context, e *env)
}

var cases = []testCase{
	{"ping", casePing},
	{"protocol", caseProtocol},
	{"set get", caseSetGet},
	{"set args", caseSetArgs},
	{"setnx setex getdel getex", caseSetNXEtc},
	{"expiry", caseExpiry},
	{"counters", caseCounters},
	{"mset mget", caseMSetMGet},
	{"string ranges", caseStringRanges},
	{"binary safe", caseBinary},
	{"keys", caseKeys},
	{"hashes", caseHashes},
	{"lists", caseLists},
	{"sets", caseSets},
	{"sorted sets", caseSortedSets},
	{"sorted set ranges", caseSortedSetRanges},
	{"pipeline", casePipeline},
	{"pipelined", casePipelined},
	{"transaction", caseTx},
	{"watch", caseWatch},
	{"scan", caseScan},
	{"scan type", caseScanType},
	{"select db", caseSelectDB},
	{"errors", caseErrors},
	{"client name", caseClientName},
	{"pool concurrency", casePool},
	{"info", caseInfo},
	{"flushdb dbsize", caseFlushDB},
}

func main() {
	host := os.Getenv("REDIS_HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	port := os.Getenv("REDIS_PORT")
	if port == "" {
		port = "6379"
	}
	addr := net.JoinHostPort(host, port)

	failed, passed := 0, 0
	for _, proto := range []int{3, 2} {
		opts := &redis.Options{
			Addr:         addr,
			DialTimeout:  3 * time.Second,
			ReadTimeout:  3 * time.Second,
			WriteTimeout: 3 * time.Second,
			PoolTimeout:  5 * time.Second,
			MaxRetries:   -1, // a failing command is reported, not retried
		}
		if proto == 2 {
			opts.Protocol = 2
		} // else: go-redis's default, RESP3
		rdb := redis.NewClient(opts)
		tag := fmt.Sprintf("resp%d", proto)

		if proto == 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := rdb.FlushAll(ctx).Err()
			cancel()
			if err != nil {
				fmt.Printf("not ok %s: setup: FLUSHALL: %v\n", tag, err)
				os.Exit(1)
			}
		}

		for _, c := range cases {
			name := tag + ": " + c.name
			e := &env{rdb: rdb, opts: opts, proto: proto, p: tag + ":" + c.name + ":"}
			if err := run(c, e); err != nil {
				failed++
				fmt.Printf("not ok %s: %s\n", name, err)
			} else {
				passed++
				fmt.Printf("ok %s\n", name)
			}
		}
		rdb.Close()
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// run runs one case with a deadline and turns a failed check (a panic of type failure)
// into an error. Any other panic is reported too, with where it happened.
func run(c testCase, e *env) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(failure); ok {
				err = f
			} else {
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}
	}()
	c.fn(ctx, e)
	return nil
}
