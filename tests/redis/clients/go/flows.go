package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

func casePipeline(ctx context.Context, e *env) {
	pipe := e.rdb.Pipeline()
	sets := make([]*redis.StatusCmd, 500)
	gets := make([]*redis.StringCmd, 500)
	for i := range sets {
		sets[i] = pipe.Set(ctx, e.k(fmt.Sprintf("k%d", i)), fmt.Sprintf("v%d", i), 0)
	}
	for i := range gets {
		gets[i] = pipe.Get(ctx, e.k(fmt.Sprintf("k%d", i)))
	}
	eq("pipeline length before Exec", pipe.Len(), 1000)
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		failf("pipeline Exec: %v", err)
	}
	eq("pipeline Exec returned commands", len(cmds), 1000)
	for i := range sets {
		eq(fmt.Sprintf("pipelined SET #%d", i), ok(sets[i]).Val(), "OK")
		eq(fmt.Sprintf("pipelined GET #%d", i), ok(gets[i]).Val(), fmt.Sprintf("v%d", i))
	}
	eq("pipeline length after Exec", pipe.Len(), 0)

	// A pipeline where some commands fail: the others still run, Exec returns the first
	// error, and each command carries its own result.
	s := e.k("str")
	pipe = e.rdb.Pipeline()
	set := pipe.Set(ctx, s, "abc", 0)
	missing := pipe.Get(ctx, e.k("missing"))
	incr := pipe.Incr(ctx, s)
	after := pipe.Append(ctx, s, "d")
	get := pipe.Get(ctx, s)
	_, err = pipe.Exec(ctx)
	isTrue("pipeline Exec returns the first error (redis.Nil)", errors.Is(err, redis.Nil), err)
	eq("SET in failing pipeline", ok(set).Val(), "OK")
	nilReply(missing)
	errPrefix(incr, "ERR value is not an integer or out of range")
	eq("APPEND after failed command in pipeline", ok(after).Val(), int64(4))
	eq("GET at end of failing pipeline", ok(get).Val(), "abcd")
}

func casePipelined(ctx context.Context, e *env) {
	c, l := e.k("counter"), e.k("list")
	var incrs []*redis.IntCmd
	var pushes []*redis.IntCmd
	cmds, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 1000; i++ {
			if i%2 == 0 {
				incrs = append(incrs, p.IncrBy(ctx, c, 2))
			} else {
				pushes = append(pushes, p.RPush(ctx, l, strconv.Itoa(i)))
			}
		}
		return nil
	})
	if err != nil {
		failf("Pipelined: %v", err)
	}
	eq("Pipelined returned commands", len(cmds), 1000)
	for i, cmd := range incrs {
		eq(fmt.Sprintf("pipelined INCRBY #%d", i), ok(cmd).Val(), int64(2*(i+1)))
	}
	for i, cmd := range pushes {
		eq(fmt.Sprintf("pipelined RPUSH #%d", i), ok(cmd).Val(), int64(i+1))
	}
	// The returned slice holds the same commands, in order.
	for i, cmd := range cmds {
		want := "incrby"
		if i%2 == 1 {
			want = "rpush"
		}
		eq(fmt.Sprintf("Pipelined cmds[%d] name", i), cmd.Name(), want)
	}
	eq("GET counter after Pipelined", ok(e.rdb.Get(ctx, c)).Val(), "1000")
	eq("LLEN after Pipelined", ok(e.rdb.LLen(ctx, l)).Val(), int64(500))
	eq("LINDEX after Pipelined", ok(e.rdb.LIndex(ctx, l, -1)).Val(), "999")

	// Reads in a pipeline see the writes queued before them.
	var get *redis.StringCmd
	var hget *redis.StringCmd
	_, err = e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, e.k("x"), "1", 0)
		p.HSet(ctx, e.k("h"), "f", "v")
		get = p.Get(ctx, e.k("x"))
		hget = p.HGet(ctx, e.k("h"), "f")
		return nil
	})
	if err != nil {
		failf("Pipelined: %v", err)
	}
	eq("GET in pipeline after SET", ok(get).Val(), "1")
	eq("HGET in pipeline after HSET", ok(hget).Val(), "v")
}

func caseTx(ctx context.Context, e *env) {
	k := e.k("k")
	var set *redis.StatusCmd
	var incr *redis.IntCmd
	var get *redis.StringCmd
	var expire *redis.BoolCmd
	cmds, err := e.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		set = p.Set(ctx, k, "1", 0)
		incr = p.Incr(ctx, k)
		get = p.Get(ctx, k)
		expire = p.Expire(ctx, k, 100*time.Second)
		return nil
	})
	if err != nil {
		failf("TxPipelined: %v", err)
	}
	eq("TxPipelined returned commands (MULTI/EXEC not included)", len(cmds), 4)
	eq("SET in MULTI", ok(set).Val(), "OK")
	eq("INCR in MULTI", ok(incr).Val(), int64(2))
	eq("GET in MULTI", ok(get).Val(), "2")
	eq("EXPIRE in MULTI", ok(expire).Val(), true)
	eq("GET after EXEC", ok(e.rdb.Get(ctx, k)).Val(), "2")
	between("TTL after EXEC", ok(e.rdb.TTL(ctx, k)).Val(), 99*time.Second, 100*time.Second)

	// TxPipeline + Exec, with an empty-looking transaction on other types.
	pipe := e.rdb.TxPipeline()
	hs := pipe.HSet(ctx, e.k("h"), "a", "1", "b", "2")
	hl := pipe.HLen(ctx, e.k("h"))
	lp := pipe.LPush(ctx, e.k("l"), "x")
	if _, err := pipe.Exec(ctx); err != nil {
		failf("TxPipeline Exec: %v", err)
	}
	eq("HSET in MULTI", ok(hs).Val(), int64(2))
	eq("HLEN in MULTI", ok(hl).Val(), int64(2))
	eq("LPUSH in MULTI", ok(lp).Val(), int64(1))

	// A command that fails when EXEC runs it does not stop the others.
	s, t := e.k("s"), e.k("t")
	var bad *redis.IntCmd
	var set1, set2 *redis.StatusCmd
	_, err = e.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		set1 = p.Set(ctx, s, "abc", 0)
		bad = p.Incr(ctx, s)
		set2 = p.Set(ctx, t, "after", 0)
		return nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "ERR value is not an integer") {
		failf("TxPipelined with a failing INCR: want error 'ERR value is not an integer...', got %v", err)
	}
	eq("SET before failing command in MULTI", ok(set1).Val(), "OK")
	errPrefix(bad, "ERR value is not an integer or out of range")
	eq("SET after failing command in MULTI", ok(set2).Val(), "OK")
	eq("GET of key written after failing command", ok(e.rdb.Get(ctx, t)).Val(), "after")

	// A command rejected while queueing (wrong arity) aborts the whole transaction.
	u := e.k("u")
	_, err = e.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, u, "x", 0)
		p.Do(ctx, "set", e.k("v")) // wrong number of arguments
		return nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
		failf("TxPipelined with a queueing error: want EXECABORT error, got %v", err)
	}
	eq("EXISTS after EXECABORT", ok(e.rdb.Exists(ctx, u)).Val(), int64(0))
	eq("connection usable after EXECABORT", ok(e.rdb.Ping(ctx)).Val(), "PONG")
}

func caseWatch(ctx context.Context, e *env) {
	other := e.newClient(nil)
	defer other.Close()

	k := e.k("k")
	ok(e.rdb.Set(ctx, k, "10", 0))

	// Another client writes the watched key between WATCH and EXEC: EXEC fails.
	err := e.rdb.Watch(ctx, func(tx *redis.Tx) error {
		n, err := tx.Get(ctx, k).Int()
		if err != nil {
			return err
		}
		if err := other.Set(ctx, k, "100", 0).Err(); err != nil {
			return fmt.Errorf("other client's SET: %w", err)
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k, n+1, 0)
			return nil
		})
		return err
	}, k)
	if err != redis.TxFailedErr {
		failf("WATCH with a conflicting write: want redis.TxFailedErr, got %v", err)
	}
	eq("GET after failed transaction keeps the other write", ok(e.rdb.Get(ctx, k)).Val(), "100")

	// No conflicting write: EXEC succeeds. A write to another key does not conflict.
	err = e.rdb.Watch(ctx, func(tx *redis.Tx) error {
		n, err := tx.Get(ctx, k).Int()
		if err != nil {
			return err
		}
		if err := other.Set(ctx, e.k("unrelated"), "x", 0).Err(); err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k, n+1, 0)
			return nil
		})
		return err
	}, k)
	if err != nil {
		failf("WATCH without a conflicting write: %v", err)
	}
	eq("GET after successful transaction", ok(e.rdb.Get(ctx, k)).Val(), "101")

	// Deleting the watched key is a conflicting write too.
	err = e.rdb.Watch(ctx, func(tx *redis.Tx) error {
		if err := other.Del(ctx, k).Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k, "mine", 0)
			return nil
		})
		return err
	}, k)
	if err != redis.TxFailedErr {
		failf("WATCH with a conflicting DEL: want redis.TxFailedErr, got %v", err)
	}
	eq("EXISTS after failed transaction", ok(e.rdb.Exists(ctx, k)).Val(), int64(0))

	// The usual optimistic-locking retry loop: the first attempt is disturbed, the second
	// succeeds.
	c := e.k("counter")
	ok(e.rdb.Set(ctx, c, "5", 0))
	attempts := 0
	for {
		attempts++
		if attempts > 5 {
			failf("optimistic lock: no success after 5 attempts")
		}
		err = e.rdb.Watch(ctx, func(tx *redis.Tx) error {
			n, err := tx.Get(ctx, c).Int()
			if err != nil {
				return err
			}
			if attempts == 1 {
				if err := other.IncrBy(ctx, c, 10).Err(); err != nil {
					return err
				}
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, c, n*2, 0)
				return nil
			})
			return err
		}, c)
		if err == redis.TxFailedErr {
			continue
		}
		if err != nil {
			failf("optimistic lock: %v", err)
		}
		break
	}
	eq("optimistic lock attempts", attempts, 2)
	eq("optimistic lock result", ok(e.rdb.Get(ctx, c)).Val(), "30")
}

func caseScan(ctx context.Context, e *env) {
	var want []string
	var pairs []interface{}
	for i := 0; i < 250; i++ {
		k := e.k(fmt.Sprintf("k:%03d", i))
		want = append(want, k)
		pairs = append(pairs, k, i)
	}
	ok(e.rdb.MSet(ctx, pairs...))
	for i := 0; i < 20; i++ {
		ok(e.rdb.Set(ctx, e.k(fmt.Sprintf("other:%d", i)), "x", 0))
	}
	match := e.p + "k:*"

	// ScanIterator
	var got []string
	it := e.rdb.Scan(ctx, 0, match, 20).Iterator()
	for it.Next(ctx) {
		got = append(got, it.Val())
		if len(got) > 10000 {
			failf("ScanIterator: runaway iteration")
		}
	}
	if err := it.Err(); err != nil {
		failf("ScanIterator: %v", err)
	}
	sameSet("ScanIterator MATCH COUNT 20", got, want)

	// Manual cursor loop.
	got = nil
	var cursor uint64
	calls := 0
	for {
		keys, next, err := e.rdb.Scan(ctx, cursor, match, 50).Result()
		if err != nil {
			failf("SCAN %d MATCH %s COUNT 50: %v", cursor, match, err)
		}
		got = append(got, keys...)
		calls++
		if calls > 10000 {
			failf("SCAN loop: cursor never came back to 0")
		}
		cursor = next
		if cursor == 0 {
			break
		}
	}
	sameSet("manual SCAN loop MATCH COUNT 50", got, want)

	// A pattern that matches nothing still ends.
	got = nil
	it = e.rdb.Scan(ctx, 0, e.p+"nothing:*", 100).Iterator()
	for it.Next(ctx) {
		got = append(got, it.Val())
	}
	if err := it.Err(); err != nil {
		failf("ScanIterator with no matches: %v", err)
	}
	eq("SCAN with no matches", len(got), 0)

	eq("KEYS with the same pattern", sorted(ok(e.rdb.Keys(ctx, match)).Val()), want)
}

func caseScanType(ctx context.Context, e *env) {
	byType := map[string][]string{}
	add := func(typ, k string) { byType[typ] = append(byType[typ], k) }
	for i := 0; i < 30; i++ {
		k := e.k(fmt.Sprintf("s:%d", i))
		ok(e.rdb.Set(ctx, k, "v", 0))
		add("string", k)
	}
	for i := 0; i < 20; i++ {
		k := e.k(fmt.Sprintf("h:%d", i))
		ok(e.rdb.HSet(ctx, k, "f", "v"))
		add("hash", k)
	}
	for i := 0; i < 10; i++ {
		k := e.k(fmt.Sprintf("l:%d", i))
		ok(e.rdb.RPush(ctx, k, "v"))
		add("list", k)
	}
	for i := 0; i < 5; i++ {
		k := e.k(fmt.Sprintf("set:%d", i))
		ok(e.rdb.SAdd(ctx, k, "v"))
		add("set", k)
		k = e.k(fmt.Sprintf("z:%d", i))
		ok(e.rdb.ZAdd(ctx, k, redis.Z{Score: 1, Member: "v"}))
		add("zset", k)
	}
	match := e.p + "*"
	for _, typ := range []string{"string", "hash", "list", "set", "zset"} {
		// Iterator over SCAN ... TYPE
		var got []string
		it := e.rdb.ScanType(ctx, 0, match, 25, typ).Iterator()
		for it.Next(ctx) {
			got = append(got, it.Val())
			if len(got) > 10000 {
				failf("ScanType iterator: runaway iteration")
			}
		}
		if err := it.Err(); err != nil {
			failf("ScanType %s iterator: %v", typ, err)
		}
		sameSet("ScanType iterator TYPE "+typ, got, byType[typ])

		// Manual loop
		got = nil
		var cursor uint64
		for calls := 0; ; calls++ {
			if calls > 10000 {
				failf("ScanType loop: cursor never came back to 0")
			}
			keys, next, err := e.rdb.ScanType(ctx, cursor, match, 40, typ).Result()
			if err != nil {
				failf("SCAN %d MATCH %s COUNT 40 TYPE %s: %v", cursor, match, typ, err)
			}
			got = append(got, keys...)
			if cursor = next; cursor == 0 {
				break
			}
		}
		sameSet("manual ScanType loop TYPE "+typ, got, byType[typ])
	}
}

func caseSelectDB(ctx context.Context, e *env) {
	c3 := e.newClient(func(o *redis.Options) { o.DB = 3 })
	defer c3.Close()
	x, y := e.k("x"), e.k("y")

	eq("FLUSHDB on db 3", ok(c3.FlushDB(ctx)).Val(), "OK")
	ok(c3.Set(ctx, x, "in3", 0))
	ok(e.rdb.Set(ctx, y, "in0", 0))
	eq("db 3 GET own key", ok(c3.Get(ctx, x)).Val(), "in3")
	eq("db 0 does not see db 3's key", ok(e.rdb.Exists(ctx, x)).Val(), int64(0))
	eq("db 3 does not see db 0's key", ok(c3.Exists(ctx, y)).Val(), int64(0))
	nilReply(c3.Get(ctx, y))
	eq("db 3 DBSIZE", ok(c3.DBSize(ctx)).Val(), int64(1))
	eq("db 3 KEYS *", ok(c3.Keys(ctx, "*")).Val(), []string{x})

	// The same key name holds different values in different databases.
	ok(c3.Set(ctx, y, "also in3", 0))
	eq("db 3 GET same name", ok(c3.Get(ctx, y)).Val(), "also in3")
	eq("db 0 GET same name", ok(e.rdb.Get(ctx, y)).Val(), "in0")
	eq("db 3 DBSIZE after second key", ok(c3.DBSize(ctx)).Val(), int64(2))

	// Pipelines and transactions on the db-3 client run in db 3 too.
	var pget *redis.StringCmd
	if _, err := c3.Pipelined(ctx, func(p redis.Pipeliner) error {
		pget = p.Get(ctx, x)
		return nil
	}); err != nil {
		failf("db 3 Pipelined: %v", err)
	}
	eq("db 3 pipelined GET", ok(pget).Val(), "in3")
	var tget *redis.StringCmd
	if _, err := c3.TxPipelined(ctx, func(p redis.Pipeliner) error {
		tget = p.Get(ctx, y)
		return nil
	}); err != nil {
		failf("db 3 TxPipelined: %v", err)
	}
	eq("db 3 GET in MULTI", ok(tget).Val(), "also in3")

	// SELECT on a dedicated connection of a separate client.
	c0 := e.newClient(nil)
	defer c0.Close()
	conn := c0.Conn()
	defer conn.Close()
	eq("SELECT 3", ok(conn.Select(ctx, 3)).Val(), "OK")
	eq("GET after SELECT 3", ok(conn.Get(ctx, x)).Val(), "in3")
	eq("SELECT 0", ok(conn.Select(ctx, 0)).Val(), "OK")
	eq("GET after SELECT 0", ok(conn.Get(ctx, y)).Val(), "in0")

	eq("FLUSHDB on db 3 leaves db 0 alone", ok(c3.FlushDB(ctx)).Val(), "OK")
	eq("db 3 DBSIZE after FLUSHDB", ok(c3.DBSize(ctx)).Val(), int64(0))
	eq("db 0 GET after db 3 FLUSHDB", ok(e.rdb.Get(ctx, y)).Val(), "in0")
}

func caseErrors(ctx context.Context, e *env) {
	s, l, h := e.k("str"), e.k("list"), e.k("hash")
	ok(e.rdb.Set(ctx, s, "abc", 0))
	ok(e.rdb.RPush(ctx, l, "x"))
	ok(e.rdb.HSet(ctx, h, "f", "abc"))

	errPrefix(e.rdb.LPush(ctx, s, "x"), "WRONGTYPE")
	errPrefix(e.rdb.Get(ctx, l), "WRONGTYPE")
	errPrefix(e.rdb.HGet(ctx, s, "f"), "WRONGTYPE")
	errPrefix(e.rdb.SAdd(ctx, h, "m"), "WRONGTYPE")
	errPrefix(e.rdb.ZAdd(ctx, s, redis.Z{Score: 1, Member: "m"}), "WRONGTYPE")
	errPrefix(e.rdb.Incr(ctx, l), "WRONGTYPE")
	full := e.rdb.LPush(ctx, s, "x").Err().Error()
	eq("WRONGTYPE message", full, "WRONGTYPE Operation against a key holding the wrong kind of value")
	eq("value untouched after WRONGTYPE", ok(e.rdb.Get(ctx, s)).Val(), "abc")

	errPrefix(e.rdb.Incr(ctx, s), "ERR value is not an integer or out of range")
	errPrefix(e.rdb.IncrBy(ctx, s, 5), "ERR value is not an integer or out of range")
	errPrefix(e.rdb.HIncrBy(ctx, h, "f", 1), "ERR hash value is not an integer")
	errPrefix(e.rdb.IncrByFloat(ctx, s, 1.5), "ERR value is not a valid float")

	// A server error is a redis.Error.
	err := e.rdb.Incr(ctx, s).Err()
	var rerr redis.Error
	isTrue("server error is a redis.Error", errors.As(err, &rerr), err)
	eq("error message", err.Error(), "ERR value is not an integer or out of range")

	// Missing things are redis.Nil, which is not a server error.
	err = e.rdb.Get(ctx, e.k("missing")).Err()
	isTrue("GET missing is redis.Nil", err == redis.Nil, err)
	isTrue("redis.Nil via errors.Is", errors.Is(err, redis.Nil), err)
	v, err := e.rdb.Get(ctx, e.k("missing")).Result()
	isTrue("GET missing .Result()", err == redis.Nil && v == "", v)
	nilReply(e.rdb.HGet(ctx, h, "missing"))
	nilReply(e.rdb.LIndex(ctx, l, 5))
	nilReply(e.rdb.ZScore(ctx, e.k("missing"), "m"))

	errPrefix(e.rdb.Do(ctx, "nosuchcommand", "x"), "ERR unknown command")
	errPrefix(e.rdb.Do(ctx, "get"), "ERR wrong number of arguments")
	errPrefix(e.rdb.Do(ctx, "set", e.k("k"), "v", "bogus"), "ERR syntax error")

	// The connection keeps working after errors.
	eq("PING after errors", ok(e.rdb.Ping(ctx)).Val(), "PONG")
}

func caseClientName(ctx context.Context, e *env) {
	c := e.newClient(nil)
	defer c.Close()
	conn := c.Conn()
	defer conn.Close()

	nilReply(conn.ClientGetName(ctx))
	name := fmt.Sprintf("shoal-go-test-resp%d", e.proto)
	eq("CLIENT SETNAME", ok(conn.ClientSetName(ctx, name)).Val(), true)
	eq("CLIENT GETNAME", ok(conn.ClientGetName(ctx)).Val(), name)
	id := ok(conn.ClientID(ctx)).Val()
	isTrue("CLIENT ID is positive", id > 0, id)
	list := ok(conn.ClientList(ctx)).Val()
	isTrue("CLIENT LIST shows the name", strings.Contains(list, "name="+name), list)
	isTrue("CLIENT LIST shows the id", strings.Contains(list, fmt.Sprintf("id=%d ", id)), list)

	// ClientName in the options names every pooled connection (sent in HELLO).
	named := fmt.Sprintf("shoal-go-pool-resp%d", e.proto)
	c2 := e.newClient(func(o *redis.Options) { o.ClientName = named })
	defer c2.Close()
	eq("CLIENT GETNAME with Options.ClientName", ok(c2.ClientGetName(ctx)).Val(), named)
}

func casePool(ctx context.Context, e *env) {
	k := e.k("counter")
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if err := e.rdb.Incr(ctx, k).Err(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		failf("INCR from a goroutine: %v", err)
	}
	eq("counter after 20 x 200 INCR", ok(e.rdb.Get(ctx, k)).Val(), "4000")
	st := e.rdb.PoolStats()
	isTrue("pool opened more than one connection", st.TotalConns > 1, *st)
}

func caseInfo(ctx context.Context, e *env) {
	info := ok(e.rdb.Info(ctx, "server")).Val()
	isTrue("INFO server contains redis_version:7", strings.Contains(info, "redis_version:7"), info)
	isTrue("INFO server has the # Server header", strings.Contains(info, "# Server"), info)
	m := ok(e.rdb.InfoMap(ctx, "server")).Val()
	isTrue("InfoMap server redis_version", strings.HasPrefix(m["Server"]["redis_version"], "7"), m)

	tm := ok(e.rdb.Time(ctx)).Val()
	d := time.Since(tm)
	isTrue("TIME is close to local time", d < time.Minute && d > -time.Minute, tm)
}

func caseFlushDB(ctx context.Context, e *env) {
	ok(e.rdb.Set(ctx, e.k("k"), "v", 0))
	n := ok(e.rdb.DBSize(ctx)).Val()
	isTrue("DBSIZE before FLUSHDB", n >= 1, n)
	eq("FLUSHDB", ok(e.rdb.FlushDB(ctx)).Val(), "OK")
	eq("DBSIZE after FLUSHDB", ok(e.rdb.DBSize(ctx)).Val(), int64(0))
	nilReply(e.rdb.Get(ctx, e.k("k")))
	eq("KEYS * after FLUSHDB", ok(e.rdb.Keys(ctx, "*")).Val(), []string{})
}
