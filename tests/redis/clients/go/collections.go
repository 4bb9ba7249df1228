package main

import (
	"context"
	"fmt"
	"math"

	"github.com/redis/go-redis/v9"
)

type user struct {
	Name  string  `redis:"name"`
	Age   int     `redis:"age"`
	Score float64 `redis:"score"`
	Admin bool    `redis:"admin"`
}

func caseHashes(ctx context.Context, e *env) {
	h := e.k("h")
	eq("HSET map", ok(e.rdb.HSet(ctx, h, map[string]interface{}{"a": "1", "b": "2"})).Val(), int64(2))
	eq("HSET pairs (one new, one updated)", ok(e.rdb.HSet(ctx, h, "c", "3", "a", "10")).Val(), int64(1))
	eq("HGET", ok(e.rdb.HGet(ctx, h, "a")).Val(), "10")
	nilReply(e.rdb.HGet(ctx, h, "missing"))
	nilReply(e.rdb.HGet(ctx, e.k("missing"), "a"))
	eq("HGETALL", ok(e.rdb.HGetAll(ctx, h)).Val(), map[string]string{"a": "10", "b": "2", "c": "3"})

	eq("HINCRBY", ok(e.rdb.HIncrBy(ctx, h, "a", 5)).Val(), int64(15))
	eq("HINCRBY new field", ok(e.rdb.HIncrBy(ctx, h, "n", -3)).Val(), int64(-3))
	eq("HINCRBYFLOAT new field", ok(e.rdb.HIncrByFloat(ctx, h, "f", 1.5)).Val(), 1.5)
	eq("HINCRBYFLOAT", ok(e.rdb.HIncrByFloat(ctx, h, "f", 0.25)).Val(), 1.75)
	eq("HGET after HINCRBYFLOAT", ok(e.rdb.HGet(ctx, h, "f")).Val(), "1.75")
	eq("HLEN", ok(e.rdb.HLen(ctx, h)).Val(), int64(5))

	eq("HDEL two present one missing", ok(e.rdb.HDel(ctx, h, "n", "f", "missing")).Val(), int64(2))
	eq("HLEN after HDEL", ok(e.rdb.HLen(ctx, h)).Val(), int64(3))
	eq("HEXISTS present", ok(e.rdb.HExists(ctx, h, "a")).Val(), true)
	eq("HEXISTS missing", ok(e.rdb.HExists(ctx, h, "zz")).Val(), false)
	eq("HKEYS (sorted)", sorted(ok(e.rdb.HKeys(ctx, h)).Val()), []string{"a", "b", "c"})
	eq("HVALS (sorted)", sorted(ok(e.rdb.HVals(ctx, h)).Val()), []string{"15", "2", "3"})
	eq("HMGET with a missing field", ok(e.rdb.HMGet(ctx, h, "a", "missing", "c")).Val(),
		[]interface{}{"15", nil, "3"})

	eq("HSETNX on existing field", ok(e.rdb.HSetNX(ctx, h, "a", "x")).Val(), false)
	eq("HSETNX on new field", ok(e.rdb.HSetNX(ctx, h, "d", "4")).Val(), true)
	eq("HGET after HSETNX", ok(e.rdb.HGet(ctx, h, "d")).Val(), "4")
	eq("HGET after refused HSETNX", ok(e.rdb.HGet(ctx, h, "a")).Val(), "15")

	eq("HGETALL of missing key", len(ok(e.rdb.HGetAll(ctx, e.k("missing"))).Val()), 0)
	eq("HLEN of missing key", ok(e.rdb.HLen(ctx, e.k("missing"))).Val(), int64(0))

	// Struct round trip with `redis` tags, as applications store objects.
	u := e.k("user")
	in := user{Name: "Ada", Age: 36, Score: 99.5, Admin: true}
	eq("HSET struct", ok(e.rdb.HSet(ctx, u, in)).Val(), int64(4))
	var out user
	if err := ok(e.rdb.HGetAll(ctx, u)).Scan(&out); err != nil {
		failf("HGETALL .Scan(&struct): %v", err)
	}
	eq("HGETALL into struct", out, in)
	var part user
	if err := ok(e.rdb.HMGet(ctx, u, "name", "age")).Scan(&part); err != nil {
		failf("HMGET .Scan(&struct): %v", err)
	}
	eq("HMGET into struct", part, user{Name: "Ada", Age: 36})

	// Deleting the last field deletes the key.
	eq("HDEL all fields", ok(e.rdb.HDel(ctx, u, "name", "age", "score", "admin")).Val(), int64(4))
	eq("EXISTS after deleting all fields", ok(e.rdb.Exists(ctx, u)).Val(), int64(0))
}

func caseLists(ctx context.Context, e *env) {
	l := e.k("l")
	eq("LPUSH", ok(e.rdb.LPush(ctx, l, "a", "b", "c")).Val(), int64(3))
	eq("RPUSH", ok(e.rdb.RPush(ctx, l, "d", "e")).Val(), int64(5))
	eq("LRANGE 0 -1", ok(e.rdb.LRange(ctx, l, 0, -1)).Val(), []string{"c", "b", "a", "d", "e"})
	eq("LRANGE 1 2", ok(e.rdb.LRange(ctx, l, 1, 2)).Val(), []string{"b", "a"})
	eq("LRANGE out of range", ok(e.rdb.LRange(ctx, l, 10, 20)).Val(), []string{})
	eq("LLEN", ok(e.rdb.LLen(ctx, l)).Val(), int64(5))
	eq("LINDEX 0", ok(e.rdb.LIndex(ctx, l, 0)).Val(), "c")
	eq("LINDEX -1", ok(e.rdb.LIndex(ctx, l, -1)).Val(), "e")
	nilReply(e.rdb.LIndex(ctx, l, 99))

	eq("LPOP", ok(e.rdb.LPop(ctx, l)).Val(), "c")
	eq("RPOP", ok(e.rdb.RPop(ctx, l)).Val(), "e")
	eq("LPOP count", ok(e.rdb.LPopCount(ctx, l, 2)).Val(), []string{"b", "a"})
	eq("LRANGE after pops", ok(e.rdb.LRange(ctx, l, 0, -1)).Val(), []string{"d"})

	ok(e.rdb.RPush(ctx, l, "x", "y", "x", "z", "x"))
	eq("LREM 2 x", ok(e.rdb.LRem(ctx, l, 2, "x")).Val(), int64(2))
	eq("LRANGE after LREM", ok(e.rdb.LRange(ctx, l, 0, -1)).Val(), []string{"d", "y", "z", "x"})
	eq("LREM of absent value", ok(e.rdb.LRem(ctx, l, 0, "nope")).Val(), int64(0))
	ok(e.rdb.RPush(ctx, l, "y"))
	eq("LREM -1 y (from the tail)", ok(e.rdb.LRem(ctx, l, -1, "y")).Val(), int64(1))
	eq("LRANGE after LREM from tail", ok(e.rdb.LRange(ctx, l, 0, -1)).Val(), []string{"d", "y", "z", "x"})

	eq("LSET", ok(e.rdb.LSet(ctx, l, 1, "Y")).Val(), "OK")
	eq("LSET negative index", ok(e.rdb.LSet(ctx, l, -1, "X")).Val(), "OK")
	errPrefix(e.rdb.LSet(ctx, l, 99, "v"), "ERR index out of range")
	errPrefix(e.rdb.LSet(ctx, e.k("missing"), 0, "v"), "ERR no such key")
	eq("LRANGE after LSET", ok(e.rdb.LRange(ctx, l, 0, -1)).Val(), []string{"d", "Y", "z", "X"})

	eq("LTRIM", ok(e.rdb.LTrim(ctx, l, 1, 2)).Val(), "OK")
	eq("LRANGE after LTRIM", ok(e.rdb.LRange(ctx, l, 0, -1)).Val(), []string{"Y", "z"})

	eq("LPUSHX on missing key", ok(e.rdb.LPushX(ctx, e.k("missing"), "v")).Val(), int64(0))
	eq("RPUSHX on existing key", ok(e.rdb.RPushX(ctx, l, "w")).Val(), int64(3))

	eq("LPOP count more than length", ok(e.rdb.LPopCount(ctx, l, 10)).Val(), []string{"Y", "z", "w"})
	eq("EXISTS after popping everything", ok(e.rdb.Exists(ctx, l)).Val(), int64(0))
	nilReply(e.rdb.LPop(ctx, l))
	nilReply(e.rdb.RPop(ctx, l))
	nilReply(e.rdb.LPopCount(ctx, l, 2))
	eq("LLEN of missing key", ok(e.rdb.LLen(ctx, l)).Val(), int64(0))
	eq("LRANGE of missing key", ok(e.rdb.LRange(ctx, l, 0, -1)).Val(), []string{})

	// A queue: producer RPUSHes, consumer LPOPs, order is preserved.
	q := e.k("queue")
	for i := 0; i < 50; i++ {
		ok(e.rdb.RPush(ctx, q, fmt.Sprintf("job-%d", i)))
	}
	for i := 0; i < 50; i++ {
		eq("queue order", ok(e.rdb.LPop(ctx, q)).Val(), fmt.Sprintf("job-%d", i))
	}
}

func caseSets(ctx context.Context, e *env) {
	s, s2, dst := e.k("s"), e.k("s2"), e.k("dst")
	eq("SADD", ok(e.rdb.SAdd(ctx, s, "a", "b", "c")).Val(), int64(3))
	eq("SADD with one already present", ok(e.rdb.SAdd(ctx, s, "c", "d")).Val(), int64(1))
	eq("SREM one present one missing", ok(e.rdb.SRem(ctx, s, "d", "zz")).Val(), int64(1))
	eq("SMEMBERS (sorted)", sorted(ok(e.rdb.SMembers(ctx, s)).Val()), []string{"a", "b", "c"})
	eq("SISMEMBER present", ok(e.rdb.SIsMember(ctx, s, "a")).Val(), true)
	eq("SISMEMBER missing", ok(e.rdb.SIsMember(ctx, s, "z")).Val(), false)
	eq("SMISMEMBER", ok(e.rdb.SMIsMember(ctx, s, "a", "z", "c")).Val(), []bool{true, false, true})
	eq("SCARD", ok(e.rdb.SCard(ctx, s)).Val(), int64(3))
	eq("SMEMBERSMAP", ok(e.rdb.SMembersMap(ctx, s)).Val(),
		map[string]struct{}{"a": {}, "b": {}, "c": {}})

	ok(e.rdb.SAdd(ctx, s2, "b", "c", "e"))
	eq("SINTER (sorted)", sorted(ok(e.rdb.SInter(ctx, s, s2)).Val()), []string{"b", "c"})
	eq("SUNION (sorted)", sorted(ok(e.rdb.SUnion(ctx, s, s2)).Val()), []string{"a", "b", "c", "e"})
	eq("SDIFF", ok(e.rdb.SDiff(ctx, s, s2)).Val(), []string{"a"})
	eq("SDIFF reversed", ok(e.rdb.SDiff(ctx, s2, s)).Val(), []string{"e"})
	eq("SINTER with a missing key", ok(e.rdb.SInter(ctx, s, e.k("missing"))).Val(), []string{})

	eq("SINTERSTORE", ok(e.rdb.SInterStore(ctx, dst, s, s2)).Val(), int64(2))
	eq("SMEMBERS of SINTERSTORE result (sorted)", sorted(ok(e.rdb.SMembers(ctx, dst)).Val()), []string{"b", "c"})
	eq("SINTERSTORE with empty result", ok(e.rdb.SInterStore(ctx, dst, s, e.k("missing"))).Val(), int64(0))
	eq("EXISTS after empty SINTERSTORE", ok(e.rdb.Exists(ctx, dst)).Val(), int64(0))

	eq("SREM all members", ok(e.rdb.SRem(ctx, s2, "b", "c", "e")).Val(), int64(3))
	eq("EXISTS after removing all members", ok(e.rdb.Exists(ctx, s2)).Val(), int64(0))
	eq("SCARD of missing key", ok(e.rdb.SCard(ctx, s2)).Val(), int64(0))
	eq("SMEMBERS of missing key", ok(e.rdb.SMembers(ctx, s2)).Val(), []string{})
}

func caseSortedSets(ctx context.Context, e *env) {
	z := e.k("z")
	eq("ZADD", ok(e.rdb.ZAdd(ctx, z, redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"},
		redis.Z{Score: 3, Member: "c"})).Val(), int64(3))
	eq("ZADD update", ok(e.rdb.ZAdd(ctx, z, redis.Z{Score: 2.5, Member: "a"})).Val(), int64(0))
	eq("ZSCORE", ok(e.rdb.ZScore(ctx, z, "a")).Val(), 2.5)

	// GT + CH: a (2 < 2.5) unchanged, b raised, d added => 2 changed.
	eq("ZADD GT CH", ok(e.rdb.ZAddArgs(ctx, z, redis.ZAddArgs{GT: true, Ch: true, Members: []redis.Z{
		{Score: 2, Member: "a"}, {Score: 5, Member: "b"}, {Score: 1, Member: "d"}}})).Val(), int64(2))
	// LT without CH: a lowered, c (4 > 3) unchanged; nothing added => 0.
	eq("ZADD LT", ok(e.rdb.ZAddArgs(ctx, z, redis.ZAddArgs{LT: true, Members: []redis.Z{
		{Score: 1, Member: "a"}, {Score: 4, Member: "c"}}})).Val(), int64(0))
	// NX: a exists (unchanged), e added => 1.
	eq("ZADD NX", ok(e.rdb.ZAddArgs(ctx, z, redis.ZAddArgs{NX: true, Members: []redis.Z{
		{Score: 100, Member: "a"}, {Score: 0.5, Member: "e"}}})).Val(), int64(1))
	// XX + CH: e updated, f not added => 1.
	eq("ZADD XX CH", ok(e.rdb.ZAddArgs(ctx, z, redis.ZAddArgs{XX: true, Ch: true, Members: []redis.Z{
		{Score: 7, Member: "e"}, {Score: 1, Member: "f"}}})).Val(), int64(1))

	// a=1 d=1 c=3 b=5 e=7; equal scores order by member.
	eq("ZRANGE WITHSCORES", ok(e.rdb.ZRangeWithScores(ctx, z, 0, -1)).Val(), []redis.Z{
		{Score: 1, Member: "a"}, {Score: 1, Member: "d"}, {Score: 3, Member: "c"},
		{Score: 5, Member: "b"}, {Score: 7, Member: "e"}})
	eq("ZCARD", ok(e.rdb.ZCard(ctx, z)).Val(), int64(5))
	nilReply(e.rdb.ZScore(ctx, z, "missing"))
	eq("ZMSCORE with a missing member", ok(e.rdb.ZMScore(ctx, z, "a", "missing", "e")).Val(),
		[]float64{1, 0, 7})

	eq("ZINCRBY", ok(e.rdb.ZIncrBy(ctx, z, 2, "c")).Val(), 5.0)
	eq("ZINCRBY new member", ok(e.rdb.ZIncrBy(ctx, z, 1.5, "g")).Val(), 1.5)
	eq("ZREM one present one missing", ok(e.rdb.ZRem(ctx, z, "g", "missing")).Val(), int64(1))

	// a=1 d=1 b=5 c=5 e=7
	eq("ZRANGE", ok(e.rdb.ZRange(ctx, z, 0, -1)).Val(), []string{"a", "d", "b", "c", "e"})
	eq("ZRANK first", ok(e.rdb.ZRank(ctx, z, "a")).Val(), int64(0))
	eq("ZRANK", ok(e.rdb.ZRank(ctx, z, "c")).Val(), int64(3))
	eq("ZREVRANK", ok(e.rdb.ZRevRank(ctx, z, "e")).Val(), int64(0))
	eq("ZREVRANK last", ok(e.rdb.ZRevRank(ctx, z, "a")).Val(), int64(4))
	nilReply(e.rdb.ZRank(ctx, z, "missing"))
	nilReply(e.rdb.ZRevRank(ctx, z, "missing"))

	eq("ZCOUNT -inf +inf", ok(e.rdb.ZCount(ctx, z, "-inf", "+inf")).Val(), int64(5))
	eq("ZCOUNT (1 5", ok(e.rdb.ZCount(ctx, z, "(1", "5")).Val(), int64(2))
	eq("ZCOUNT 1 1", ok(e.rdb.ZCount(ctx, z, "1", "1")).Val(), int64(2))
	eq("ZREVRANGE 0 1", ok(e.rdb.ZRevRange(ctx, z, 0, 1)).Val(), []string{"e", "c"})

	eq("ZPOPMIN", ok(e.rdb.ZPopMin(ctx, z)).Val(), []redis.Z{{Score: 1, Member: "a"}})
	eq("ZPOPMAX 2", ok(e.rdb.ZPopMax(ctx, z, 2)).Val(), []redis.Z{{Score: 7, Member: "e"}, {Score: 5, Member: "c"}})
	eq("ZRANGE after pops", ok(e.rdb.ZRangeWithScores(ctx, z, 0, -1)).Val(),
		[]redis.Z{{Score: 1, Member: "d"}, {Score: 5, Member: "b"}})

	eq("ZREMRANGEBYSCORE -inf (5", ok(e.rdb.ZRemRangeByScore(ctx, z, "-inf", "(5")).Val(), int64(1))
	eq("ZCARD after ZREMRANGEBYSCORE", ok(e.rdb.ZCard(ctx, z)).Val(), int64(1))
	eq("ZREM last member", ok(e.rdb.ZRem(ctx, z, "b")).Val(), int64(1))
	eq("EXISTS after removing all members", ok(e.rdb.Exists(ctx, z)).Val(), int64(0))
	eq("ZPOPMIN of missing key", ok(e.rdb.ZPopMin(ctx, z)).Val(), []redis.Z{})
	eq("ZCARD of missing key", ok(e.rdb.ZCard(ctx, z)).Val(), int64(0))

	// Infinite and negative scores.
	inf := e.k("inf")
	ok(e.rdb.ZAdd(ctx, inf, redis.Z{Score: math.Inf(1), Member: "top"}, redis.Z{Score: math.Inf(-1), Member: "bottom"},
		redis.Z{Score: -2.25, Member: "neg"}))
	eq("ZSCORE +inf", ok(e.rdb.ZScore(ctx, inf, "top")).Val(), math.Inf(1))
	eq("ZRANGE WITHSCORES with infinities", ok(e.rdb.ZRangeWithScores(ctx, inf, 0, -1)).Val(), []redis.Z{
		{Score: math.Inf(-1), Member: "bottom"}, {Score: -2.25, Member: "neg"}, {Score: math.Inf(1), Member: "top"}})
}

func caseSortedSetRanges(ctx context.Context, e *env) {
	r := e.k("r")
	var members []redis.Z
	for i := 0; i < 10; i++ {
		members = append(members, redis.Z{Score: float64(i), Member: fmt.Sprintf("m%d", i)})
	}
	eq("ZADD 10", ok(e.rdb.ZAdd(ctx, r, members...)).Val(), int64(10))

	eq("ZRANGE BYSCORE LIMIT", ok(e.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key: r, Start: 2, Stop: 7, ByScore: true, Offset: 1, Count: 3})).Val(),
		[]string{"m3", "m4", "m5"})
	eq("ZRANGE BYSCORE exclusive to +inf", ok(e.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key: r, Start: "(6", Stop: "+inf", ByScore: true})).Val(),
		[]string{"m7", "m8", "m9"})
	eq("ZRANGE BYSCORE REV LIMIT", ok(e.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key: r, Start: 7, Stop: 2, ByScore: true, Rev: true, Offset: 1, Count: 2})).Val(),
		[]string{"m6", "m5"})
	eq("ZRANGE REV by index", ok(e.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key: r, Start: 0, Stop: 2, Rev: true})).Val(),
		[]string{"m9", "m8", "m7"})
	eq("ZRANGE BYSCORE WITHSCORES", ok(e.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
		Key: r, Start: "-inf", Stop: 1, ByScore: true})).Val(),
		[]redis.Z{{Score: 0, Member: "m0"}, {Score: 1, Member: "m1"}})
	eq("ZRANGE BYSCORE empty range", ok(e.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key: r, Start: 20, Stop: 30, ByScore: true})).Val(), []string{})

	eq("ZRANGEBYSCORE", ok(e.rdb.ZRangeByScore(ctx, r, &redis.ZRangeBy{Min: "3", Max: "(6"})).Val(),
		[]string{"m3", "m4", "m5"})
	eq("ZREVRANGEBYSCORE LIMIT", ok(e.rdb.ZRevRangeByScore(ctx, r, &redis.ZRangeBy{
		Min: "-inf", Max: "+inf", Offset: 0, Count: 2})).Val(), []string{"m9", "m8"})
	eq("ZRANGEBYSCORE WITHSCORES", ok(e.rdb.ZRangeByScoreWithScores(ctx, r, &redis.ZRangeBy{Min: "8", Max: "+inf"})).Val(),
		[]redis.Z{{Score: 8, Member: "m8"}, {Score: 9, Member: "m9"}})

	// A leaderboard: top 3 by score, highest first, with scores.
	eq("ZREVRANGE WITHSCORES top 3", ok(e.rdb.ZRevRangeWithScores(ctx, r, 0, 2)).Val(),
		[]redis.Z{{Score: 9, Member: "m9"}, {Score: 8, Member: "m8"}, {Score: 7, Member: "m7"}})
}
