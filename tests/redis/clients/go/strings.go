package main

import (
	"bytes"
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

func casePing(ctx context.Context, e *env) {
	eq("PING", ok(e.rdb.Ping(ctx)).Val(), "PONG")
	eq("ECHO", ok(e.rdb.Echo(ctx, "hello shoal")).Val(), "hello shoal")
}

// caseProtocol checks that the protocol asked for is the one spoken: with RESP3 a
// HGETALL reply is a map and ZSCORE a double; with RESP2 both are flat bulk strings.
func caseProtocol(ctx context.Context, e *env) {
	h, z := e.k("h"), e.k("z")
	ok(e.rdb.HSet(ctx, h, "a", "1", "b", "2"))
	ok(e.rdb.ZAdd(ctx, z, redis.Z{Score: 1.5, Member: "m"}))
	raw := ok(e.rdb.Do(ctx, "hgetall", h)).Val()
	score := ok(e.rdb.Do(ctx, "zscore", z, "m")).Val()
	if e.proto == 3 {
		eq("HGETALL via Do (RESP3 map)", raw, map[interface{}]interface{}{"a": "1", "b": "2"})
		eq("ZSCORE via Do (RESP3 double)", score, 1.5)
	} else {
		arr, isArr := raw.([]interface{})
		isTrue("HGETALL via Do is a flat array in RESP2", isArr && len(arr) == 4, raw)
		got := map[interface{}]interface{}{arr[0]: arr[1], arr[2]: arr[3]}
		eq("HGETALL via Do (RESP2 pairs)", got, map[interface{}]interface{}{"a": "1", "b": "2"})
		eq("ZSCORE via Do (RESP2 bulk string)", score, "1.5")
	}
}

func caseSetGet(ctx context.Context, e *env) {
	k := e.k("k")
	eq("SET", ok(e.rdb.Set(ctx, k, "v1", 0)).Val(), "OK")
	eq("GET", ok(e.rdb.Get(ctx, k)).Val(), "v1")
	eq("SET overwrite", ok(e.rdb.Set(ctx, k, "v2", 0)).Val(), "OK")
	eq("GET after overwrite", ok(e.rdb.Get(ctx, k)).Val(), "v2")
	eq("TTL of plain SET", ok(e.rdb.TTL(ctx, k)).Val(), time.Duration(-1))

	nilReply(e.rdb.Get(ctx, e.k("missing")))

	n := e.k("int")
	ok(e.rdb.Set(ctx, n, 42, 0))
	eq("GET of int value", ok(e.rdb.Get(ctx, n)).Val(), "42")
	i, err := e.rdb.Get(ctx, n).Int()
	isTrue("GET .Int()", err == nil && i == 42, i)

	empty := e.k("empty")
	ok(e.rdb.Set(ctx, empty, "", 0))
	eq("GET empty string is not nil", ok(e.rdb.Get(ctx, empty)).Val(), "")
	eq("EXISTS empty-string key", ok(e.rdb.Exists(ctx, empty)).Val(), int64(1))

	t := e.k("ttl")
	ok(e.rdb.Set(ctx, t, "v", 30*time.Second))
	between("TTL after SET with expiration", ok(e.rdb.TTL(ctx, t)).Val(), 29*time.Second, 30*time.Second)
	eq("GET of key with TTL", ok(e.rdb.Get(ctx, t)).Val(), "v")
}

func caseSetArgs(ctx context.Context, e *env) {
	// EX
	k1 := e.k("ex")
	eq("SET EX", ok(e.rdb.SetArgs(ctx, k1, "a", redis.SetArgs{TTL: 10 * time.Second})).Val(), "OK")
	between("TTL after SET EX", ok(e.rdb.TTL(ctx, k1)).Val(), 9*time.Second, 10*time.Second)

	// PX
	k2 := e.k("px")
	eq("SET PX", ok(e.rdb.SetArgs(ctx, k2, "a", redis.SetArgs{TTL: 1500 * time.Millisecond})).Val(), "OK")
	between("PTTL after SET PX", ok(e.rdb.PTTL(ctx, k2)).Val(), time.Millisecond, 1500*time.Millisecond)

	// NX
	k3 := e.k("nx")
	eq("SET NX on missing key", ok(e.rdb.SetArgs(ctx, k3, "first", redis.SetArgs{Mode: "NX"})).Val(), "OK")
	nilReply(e.rdb.SetArgs(ctx, k3, "second", redis.SetArgs{Mode: "NX"}))
	eq("GET after refused SET NX", ok(e.rdb.Get(ctx, k3)).Val(), "first")

	// XX
	k4 := e.k("xx")
	nilReply(e.rdb.SetArgs(ctx, k4, "a", redis.SetArgs{Mode: "XX"}))
	eq("EXISTS after refused SET XX", ok(e.rdb.Exists(ctx, k4)).Val(), int64(0))
	ok(e.rdb.Set(ctx, k4, "a", 0))
	eq("SET XX on existing key", ok(e.rdb.SetArgs(ctx, k4, "b", redis.SetArgs{Mode: "XX", TTL: 20 * time.Second})).Val(), "OK")
	eq("GET after SET XX", ok(e.rdb.Get(ctx, k4)).Val(), "b")
	between("TTL after SET XX EX", ok(e.rdb.TTL(ctx, k4)).Val(), 19*time.Second, 20*time.Second)

	// GET
	k5 := e.k("get")
	nilReply(e.rdb.SetArgs(ctx, k5, "a", redis.SetArgs{Get: true}))
	eq("GET after SET GET on missing key", ok(e.rdb.Get(ctx, k5)).Val(), "a")
	eq("SET GET returns old value", ok(e.rdb.SetArgs(ctx, k5, "b", redis.SetArgs{Get: true})).Val(), "a")
	eq("GET after SET GET", ok(e.rdb.Get(ctx, k5)).Val(), "b")

	// NX + GET (Redis >= 7.0): returns the old value and does not set.
	eq("SET NX GET on existing key", ok(e.rdb.SetArgs(ctx, k5, "c", redis.SetArgs{Mode: "NX", Get: true})).Val(), "b")
	eq("GET after SET NX GET", ok(e.rdb.Get(ctx, k5)).Val(), "b")

	// KEEPTTL
	k6 := e.k("keepttl")
	ok(e.rdb.Set(ctx, k6, "a", 100*time.Second))
	eq("SET KEEPTTL", ok(e.rdb.SetArgs(ctx, k6, "b", redis.SetArgs{KeepTTL: true})).Val(), "OK")
	between("TTL after SET KEEPTTL", ok(e.rdb.TTL(ctx, k6)).Val(), 99*time.Second, 100*time.Second)
	eq("GET after SET KEEPTTL", ok(e.rdb.Get(ctx, k6)).Val(), "b")
	ok(e.rdb.Set(ctx, k6, "c", 0))
	eq("TTL after plain SET clears it", ok(e.rdb.TTL(ctx, k6)).Val(), time.Duration(-1))

	// EXAT (whole seconds) and PXAT (millisecond precision)
	k7 := e.k("exat")
	at := time.Now().Add(60 * time.Second).Truncate(time.Second)
	eq("SET EXAT", ok(e.rdb.SetArgs(ctx, k7, "a", redis.SetArgs{ExpireAt: at})).Val(), "OK")
	between("TTL after SET EXAT", ok(e.rdb.TTL(ctx, k7)).Val(), 58*time.Second, 60*time.Second)
	k8 := e.k("pxat")
	at = time.Now().Add(45*time.Second + 500*time.Millisecond)
	if at.Nanosecond() < int(time.Millisecond) {
		at = at.Add(5 * time.Millisecond)
	}
	eq("SET PXAT", ok(e.rdb.SetArgs(ctx, k8, "a", redis.SetArgs{ExpireAt: at})).Val(), "OK")
	between("PTTL after SET PXAT", ok(e.rdb.PTTL(ctx, k8)).Val(), 44*time.Second, 46*time.Second)
}

func caseSetNXEtc(ctx context.Context, e *env) {
	k := e.k("nx")
	eq("SETNX on missing key", ok(e.rdb.SetNX(ctx, k, "a", 0)).Val(), true)
	eq("SETNX on existing key", ok(e.rdb.SetNX(ctx, k, "b", 0)).Val(), false)
	eq("GET after SETNX", ok(e.rdb.Get(ctx, k)).Val(), "a")
	eq("TTL after SETNX", ok(e.rdb.TTL(ctx, k)).Val(), time.Duration(-1))

	k2 := e.k("nxttl")
	eq("SETNX with expiration", ok(e.rdb.SetNX(ctx, k2, "a", 10*time.Second)).Val(), true)
	between("TTL after SETNX with expiration", ok(e.rdb.TTL(ctx, k2)).Val(), 9*time.Second, 10*time.Second)
	eq("SETNX with expiration on existing key", ok(e.rdb.SetNX(ctx, k2, "b", 10*time.Second)).Val(), false)

	k3 := e.k("ex")
	eq("SETEX", ok(e.rdb.SetEx(ctx, k3, "v", 20*time.Second)).Val(), "OK")
	between("TTL after SETEX", ok(e.rdb.TTL(ctx, k3)).Val(), 19*time.Second, 20*time.Second)
	eq("GET after SETEX", ok(e.rdb.Get(ctx, k3)).Val(), "v")

	eq("GETDEL", ok(e.rdb.GetDel(ctx, k3)).Val(), "v")
	eq("EXISTS after GETDEL", ok(e.rdb.Exists(ctx, k3)).Val(), int64(0))
	nilReply(e.rdb.GetDel(ctx, k3))

	k4 := e.k("getex")
	ok(e.rdb.Set(ctx, k4, "x", 0))
	eq("GETEX EX", ok(e.rdb.GetEx(ctx, k4, 30*time.Second)).Val(), "x")
	between("TTL after GETEX EX", ok(e.rdb.TTL(ctx, k4)).Val(), 29*time.Second, 30*time.Second)
	eq("GETEX PX", ok(e.rdb.GetEx(ctx, k4, 2500*time.Millisecond)).Val(), "x")
	between("PTTL after GETEX PX", ok(e.rdb.PTTL(ctx, k4)).Val(), time.Millisecond, 2500*time.Millisecond)
	eq("GETEX PERSIST", ok(e.rdb.GetEx(ctx, k4, 0)).Val(), "x")
	eq("TTL after GETEX PERSIST", ok(e.rdb.TTL(ctx, k4)).Val(), time.Duration(-1))
	nilReply(e.rdb.GetEx(ctx, e.k("missing"), 10*time.Second))
}

func caseExpiry(ctx context.Context, e *env) {
	k := e.k("k")
	ok(e.rdb.Set(ctx, k, "v", 0))
	eq("TTL without expiry", ok(e.rdb.TTL(ctx, k)).Val(), time.Duration(-1))
	eq("PTTL without expiry", ok(e.rdb.PTTL(ctx, k)).Val(), time.Duration(-1))
	eq("TTL of missing key", ok(e.rdb.TTL(ctx, e.k("missing"))).Val(), time.Duration(-2))
	eq("PTTL of missing key", ok(e.rdb.PTTL(ctx, e.k("missing"))).Val(), time.Duration(-2))

	eq("EXPIRE", ok(e.rdb.Expire(ctx, k, 50*time.Second)).Val(), true)
	between("TTL after EXPIRE", ok(e.rdb.TTL(ctx, k)).Val(), 49*time.Second, 50*time.Second)
	between("PTTL after EXPIRE", ok(e.rdb.PTTL(ctx, k)).Val(), 49*time.Second, 50*time.Second)
	eq("EXPIRE on missing key", ok(e.rdb.Expire(ctx, e.k("missing"), 50*time.Second)).Val(), false)

	eq("EXPIRE NX on key with TTL", ok(e.rdb.ExpireNX(ctx, k, 10*time.Second)).Val(), false)
	between("TTL after refused EXPIRE NX", ok(e.rdb.TTL(ctx, k)).Val(), 49*time.Second, 50*time.Second)
	eq("PERSIST", ok(e.rdb.Persist(ctx, k)).Val(), true)
	eq("PERSIST again", ok(e.rdb.Persist(ctx, k)).Val(), false)
	eq("TTL after PERSIST", ok(e.rdb.TTL(ctx, k)).Val(), time.Duration(-1))
	eq("EXPIRE NX on key without TTL", ok(e.rdb.ExpireNX(ctx, k, 10*time.Second)).Val(), true)
	between("TTL after EXPIRE NX", ok(e.rdb.TTL(ctx, k)).Val(), 9*time.Second, 10*time.Second)

	eq("EXPIRE XX on key with TTL", ok(e.rdb.ExpireXX(ctx, k, 20*time.Second)).Val(), true)
	eq("EXPIRE GT with smaller TTL", ok(e.rdb.ExpireGT(ctx, k, 5*time.Second)).Val(), false)
	eq("EXPIRE LT with smaller TTL", ok(e.rdb.ExpireLT(ctx, k, 5*time.Second)).Val(), true)
	between("TTL after EXPIRE LT", ok(e.rdb.TTL(ctx, k)).Val(), 4*time.Second, 5*time.Second)

	eq("PEXPIRE", ok(e.rdb.PExpire(ctx, k, 1500*time.Millisecond)).Val(), true)
	between("PTTL after PEXPIRE", ok(e.rdb.PTTL(ctx, k)).Val(), time.Millisecond, 1500*time.Millisecond)

	eq("EXPIREAT", ok(e.rdb.ExpireAt(ctx, k, time.Now().Add(100*time.Second))).Val(), true)
	between("TTL after EXPIREAT", ok(e.rdb.TTL(ctx, k)).Val(), 98*time.Second, 100*time.Second)

	// A key really goes away when its TTL runs out.
	gone := e.k("gone")
	ok(e.rdb.Set(ctx, gone, "v", 100*time.Millisecond))
	time.Sleep(300 * time.Millisecond)
	nilReply(e.rdb.Get(ctx, gone))
	eq("EXISTS after expiry", ok(e.rdb.Exists(ctx, gone)).Val(), int64(0))
}

func caseCounters(ctx context.Context, e *env) {
	k := e.k("n")
	eq("INCR on missing key", ok(e.rdb.Incr(ctx, k)).Val(), int64(1))
	eq("INCRBY", ok(e.rdb.IncrBy(ctx, k, 10)).Val(), int64(11))
	eq("DECR", ok(e.rdb.Decr(ctx, k)).Val(), int64(10))
	eq("DECRBY", ok(e.rdb.DecrBy(ctx, k, 3)).Val(), int64(7))
	eq("INCRBY negative", ok(e.rdb.IncrBy(ctx, k, -10)).Val(), int64(-3))
	eq("GET counter", ok(e.rdb.Get(ctx, k)).Val(), "-3")

	f := e.k("f")
	eq("INCRBYFLOAT on missing key", ok(e.rdb.IncrByFloat(ctx, f, 10.5)).Val(), 10.5)
	eq("INCRBYFLOAT", ok(e.rdb.IncrByFloat(ctx, f, 0.1)).Val(), 10.6)
	eq("GET after INCRBYFLOAT", ok(e.rdb.Get(ctx, f)).Val(), "10.6")
	eq("INCRBYFLOAT negative", ok(e.rdb.IncrByFloat(ctx, f, -5)).Val(), 5.6)
	eq("GET after INCRBYFLOAT negative", ok(e.rdb.Get(ctx, f)).Val(), "5.6")
	ok(e.rdb.Set(ctx, f, "3", 0))
	eq("INCRBYFLOAT on integer string", ok(e.rdb.IncrByFloat(ctx, f, 1.5)).Val(), 4.5)
	eq("INCRBYFLOAT to a whole number", ok(e.rdb.IncrByFloat(ctx, f, 0.5)).Val(), 5.0)
	eq("GET whole-number float", ok(e.rdb.Get(ctx, f)).Val(), "5")

	big := e.k("big")
	ok(e.rdb.Set(ctx, big, "9223372036854775807", 0))
	errPrefix(e.rdb.Incr(ctx, big), "ERR increment or decrement would overflow")
	eq("GET after overflowing INCR", ok(e.rdb.Get(ctx, big)).Val(), "9223372036854775807")
}

func caseMSetMGet(ctx context.Context, e *env) {
	k1, k2, k3, k4, k5 := e.k("1"), e.k("2"), e.k("3"), e.k("4"), e.k("5")
	eq("MSET pairs", ok(e.rdb.MSet(ctx, k1, "a", k2, "b")).Val(), "OK")
	eq("MSET map", ok(e.rdb.MSet(ctx, map[string]interface{}{k3: "c"})).Val(), "OK")
	eq("MGET with a missing key", ok(e.rdb.MGet(ctx, k1, k2, e.k("missing"), k3)).Val(),
		[]interface{}{"a", "b", nil, "c"})

	h := e.k("hash")
	ok(e.rdb.HSet(ctx, h, "f", "v"))
	eq("MGET with a non-string key", ok(e.rdb.MGet(ctx, k1, h)).Val(), []interface{}{"a", nil})

	eq("MSETNX with an existing key", ok(e.rdb.MSetNX(ctx, k1, "x", k4, "y")).Val(), false)
	eq("EXISTS after refused MSETNX", ok(e.rdb.Exists(ctx, k4)).Val(), int64(0))
	eq("GET after refused MSETNX", ok(e.rdb.Get(ctx, k1)).Val(), "a")
	eq("MSETNX on new keys", ok(e.rdb.MSetNX(ctx, k4, "y", k5, "z")).Val(), true)
	eq("MGET after MSETNX", ok(e.rdb.MGet(ctx, k4, k5)).Val(), []interface{}{"y", "z"})
}

func caseStringRanges(ctx context.Context, e *env) {
	k := e.k("s")
	eq("APPEND to missing key", ok(e.rdb.Append(ctx, k, "Hello")).Val(), int64(5))
	eq("APPEND", ok(e.rdb.Append(ctx, k, " World")).Val(), int64(11))
	eq("STRLEN", ok(e.rdb.StrLen(ctx, k)).Val(), int64(11))
	eq("GETRANGE 0 4", ok(e.rdb.GetRange(ctx, k, 0, 4)).Val(), "Hello")
	eq("GETRANGE -5 -1", ok(e.rdb.GetRange(ctx, k, -5, -1)).Val(), "World")
	eq("GETRANGE past the end", ok(e.rdb.GetRange(ctx, k, 100, 200)).Val(), "")
	eq("SETRANGE", ok(e.rdb.SetRange(ctx, k, 6, "Redis")).Val(), int64(11))
	eq("GET after SETRANGE", ok(e.rdb.Get(ctx, k)).Val(), "Hello Redis")
	eq("SETRANGE growing the value", ok(e.rdb.SetRange(ctx, k, 11, "!!")).Val(), int64(13))
	eq("GET after growing SETRANGE", ok(e.rdb.Get(ctx, k)).Val(), "Hello Redis!!")

	m := e.k("missing")
	eq("STRLEN of missing key", ok(e.rdb.StrLen(ctx, m)).Val(), int64(0))
	eq("GETRANGE of missing key", ok(e.rdb.GetRange(ctx, m, 0, 10)).Val(), "")
	eq("SETRANGE on missing key pads with zero bytes", ok(e.rdb.SetRange(ctx, m, 5, "x")).Val(), int64(6))
	eq("GET after padding SETRANGE", ok(e.rdb.Get(ctx, m)).Val(), "\x00\x00\x00\x00\x00x")
}

func caseBinary(ctx context.Context, e *env) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	k := e.k("all")
	ok(e.rdb.Set(ctx, k, all, 0))
	got, err := e.rdb.Get(ctx, k).Bytes()
	isTrue("GET of all 256 byte values", err == nil && bytes.Equal(got, all), got)
	eq("STRLEN of binary value", ok(e.rdb.StrLen(ctx, k)).Val(), int64(256))
	eq("GETRANGE of binary value", ok(e.rdb.GetRange(ctx, k, 10, 13)).Val(), "\x0a\x0b\x0c\x0d")

	bk := e.k("\x00\xff\r\n key\x01")
	ok(e.rdb.Set(ctx, bk, "\r\n$5\r\n*1\r\n", 0))
	eq("GET with binary key and RESP-looking value", ok(e.rdb.Get(ctx, bk)).Val(), "\r\n$5\r\n*1\r\n")
	eq("EXISTS binary key", ok(e.rdb.Exists(ctx, bk)).Val(), int64(1))

	h := e.k("hash")
	ok(e.rdb.HSet(ctx, h, "\x00\r\nfield", all))
	hv, err := e.rdb.HGet(ctx, h, "\x00\r\nfield").Bytes()
	isTrue("HGET of binary field and value", err == nil && bytes.Equal(hv, all), hv)
	eq("HGETALL binary", ok(e.rdb.HGetAll(ctx, h)).Val(), map[string]string{"\x00\r\nfield": string(all)})

	l := e.k("list")
	ok(e.rdb.RPush(ctx, l, all, "\r\n", ""))
	eq("LRANGE binary", ok(e.rdb.LRange(ctx, l, 0, -1)).Val(), []string{string(all), "\r\n", ""})

	s := e.k("set")
	ok(e.rdb.SAdd(ctx, s, all))
	eq("SISMEMBER binary", ok(e.rdb.SIsMember(ctx, s, all)).Val(), true)
	eq("SMEMBERS binary", ok(e.rdb.SMembers(ctx, s)).Val(), []string{string(all)})

	z := e.k("zset")
	ok(e.rdb.ZAdd(ctx, z, redis.Z{Score: 1, Member: all}))
	eq("ZSCORE of binary member", ok(e.rdb.ZScore(ctx, z, string(all))).Val(), 1.0)

	// A larger value (1 MiB) spanning many reads and writes.
	large := make([]byte, 1<<20)
	for i := range large {
		large[i] = byte(i*7 + i/256)
	}
	lk := e.k("large")
	ok(e.rdb.Set(ctx, lk, large, 0))
	lv, err := e.rdb.Get(ctx, lk).Bytes()
	isTrue("GET of 1 MiB value", err == nil && bytes.Equal(lv, large), len(lv))
}

func caseKeys(ctx context.Context, e *env) {
	a, b, c, d := e.k("a"), e.k("b"), e.k("c"), e.k("d")
	missing := e.k("missing")
	ok(e.rdb.Set(ctx, a, "1", 0))
	eq("EXISTS one present one missing", ok(e.rdb.Exists(ctx, a, missing)).Val(), int64(1))
	eq("EXISTS counts repeats", ok(e.rdb.Exists(ctx, a, a)).Val(), int64(2))

	ok(e.rdb.RPush(ctx, e.k("list"), "x"))
	ok(e.rdb.HSet(ctx, e.k("hash"), "f", "v"))
	ok(e.rdb.SAdd(ctx, e.k("set"), "m"))
	ok(e.rdb.ZAdd(ctx, e.k("zset"), redis.Z{Score: 1, Member: "m"}))
	for k, want := range map[string]string{
		a: "string", e.k("list"): "list", e.k("hash"): "hash", e.k("set"): "set",
		e.k("zset"): "zset", missing: "none",
	} {
		eq("TYPE "+k, ok(e.rdb.Type(ctx, k)).Val(), want)
	}

	eq("KEYS", sorted(ok(e.rdb.Keys(ctx, e.p+"*")).Val()),
		[]string{a, e.k("hash"), e.k("list"), e.k("set"), e.k("zset")})

	eq("DEL one present one missing", ok(e.rdb.Del(ctx, e.k("list"), missing)).Val(), int64(1))
	eq("UNLINK", ok(e.rdb.Unlink(ctx, e.k("hash"), e.k("set"), e.k("zset"))).Val(), int64(3))

	ok(e.rdb.Expire(ctx, a, 100*time.Second))
	eq("RENAME", ok(e.rdb.Rename(ctx, a, b)).Val(), "OK")
	eq("GET renamed key", ok(e.rdb.Get(ctx, b)).Val(), "1")
	eq("EXISTS old name", ok(e.rdb.Exists(ctx, a)).Val(), int64(0))
	between("RENAME keeps the TTL", ok(e.rdb.TTL(ctx, b)).Val(), 99*time.Second, 100*time.Second)
	errPrefix(e.rdb.Rename(ctx, missing, c), "ERR no such key")

	ok(e.rdb.Set(ctx, c, "3", 0))
	eq("RENAMENX onto existing key", ok(e.rdb.RenameNX(ctx, b, c)).Val(), false)
	eq("GET after refused RENAMENX", ok(e.rdb.Get(ctx, c)).Val(), "3")
	eq("RENAMENX onto new key", ok(e.rdb.RenameNX(ctx, b, d)).Val(), true)
	eq("GET after RENAMENX", ok(e.rdb.Get(ctx, d)).Val(), "1")
	eq("EXISTS after RENAMENX", ok(e.rdb.Exists(ctx, b, c, d)).Val(), int64(2))

	eq("RENAME over an existing key", ok(e.rdb.Rename(ctx, d, c)).Val(), "OK")
	eq("GET after RENAME over existing key", ok(e.rdb.Get(ctx, c)).Val(), "1")
	eq("DEL", ok(e.rdb.Del(ctx, c)).Val(), int64(1))
	eq("KEYS after deleting all", ok(e.rdb.Keys(ctx, e.p+"*")).Val(), []string{})
}
