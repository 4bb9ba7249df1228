#!/usr/bin/env python3
"""Drives a real Redis and then Shoal's Redis protocol with an unmodified client library
(redis-py), over the wire, and asserts the values it gets back.

    python3 tests/redis/clients.py --shoal-binary target/debug/shoal [--redis-server PATH]

The same checks (`exercise`) run first against a real Redis 7, which shows the expectations
are right, and then against Shoal. Each server starts empty on a free loopback port and is
stopped at the end. Prints one line per server ("redis 7: N checks passed", "shoal: N checks
passed"); on the first failing check prints which check, what was expected and what came back,
and exits 1.

Needs `redis` (redis-py, 5.x) installed for python3.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import differential  # noqa: E402  (free_port)

try:
    import redis
except ImportError:
    sys.exit("clients.py needs redis-py: pip install redis")


class CheckFailed(Exception):
    pass


class Checks:
    """Counts checks and names the one that fails."""

    def __init__(self):
        self.count = 0
        self.section = ""

    def eq(self, name, expected, got):
        self.count += 1
        if got != expected or type(got) is not type(expected):
            raise CheckFailed("%s / %s:\n  expected: %r (%s)\n  got:      %r (%s)"
                              % (self.section, name, expected, type(expected).__name__,
                                 got, type(got).__name__))

    def true(self, name, condition, got):
        self.count += 1
        if not condition:
            raise CheckFailed("%s / %s:\n  got: %r" % (self.section, name, got))

    def raises(self, name, exc_class, fn, message_check, description):
        """fn() must raise exc_class whose str() satisfies message_check."""
        self.count += 1
        try:
            got = fn()
        except exc_class as e:
            if not message_check(str(e)):
                raise CheckFailed("%s / %s:\n  expected: %s %s\n  got:      %s(%r)"
                                  % (self.section, name, exc_class.__name__, description,
                                     type(e).__name__, str(e)))
            return
        except Exception as e:
            raise CheckFailed("%s / %s:\n  expected: %s %s\n  got:      %s(%r)"
                              % (self.section, name, exc_class.__name__, description,
                                 type(e).__name__, str(e)))
        raise CheckFailed("%s / %s:\n  expected: %s %s\n  got:      no error, returned %r"
                          % (self.section, name, exc_class.__name__, description, got))


def exercise(make_client):
    """Runs every check; make_client(**kwargs) returns a redis.Redis for the server under
    test. Returns the number of checks passed; raises CheckFailed on the first failure."""
    c = Checks()
    r = make_client(decode_responses=True)
    raw = make_client()  # bytes replies
    c.section = "setup"
    c.eq("ping", True, r.ping())
    c.eq("flushall", True, r.flushall())

    # ---- strings
    c.section = "strings"
    c.eq("set", True, r.set("greeting", "hello"))
    c.eq("get", "hello", r.get("greeting"))
    c.eq("get missing", None, r.get("no-such-key"))
    c.eq("set ex=100", True, r.set("temp", "v", ex=100))
    ttl = r.ttl("temp")
    c.true("ttl after set ex=100 in (0, 100]", isinstance(ttl, int) and 0 < ttl <= 100, ttl)
    c.eq("incr new key", 1, r.incr("counter"))
    c.eq("incr", 2, r.incr("counter"))
    c.eq("incrby 10", 12, r.incrby("counter", 10))
    c.eq("incrby -5", 7, r.incrby("counter", -5))
    c.eq("incrbyfloat 1.5", 8.5, r.incrbyfloat("counter", 1.5))
    c.eq("get after incrbyfloat", "8.5", r.get("counter"))
    c.eq("mset", True, r.mset({"k1": "v1", "k2": "v2", "k3": "v3"}))
    c.eq("mget", ["v1", "v2", None, "v3"], r.mget(["k1", "k2", "missing", "k3"]))
    c.eq("setnx existing", False, r.setnx("k1", "other"))
    c.eq("get after setnx existing", "v1", r.get("k1"))
    c.eq("setnx new", True, r.setnx("fresh", "x"))
    c.eq("get after setnx new", "x", r.get("fresh"))
    c.eq("getdel", "v2", r.getdel("k2"))
    c.eq("get after getdel", None, r.get("k2"))
    c.eq("getdel missing", None, r.getdel("k2"))
    c.eq("append new", 3, r.append("app", "abc"))
    c.eq("append", 6, r.append("app", "def"))
    c.eq("get after append", "abcdef", r.get("app"))
    blob = bytes(range(256)) * 4096
    c.eq("set 1 MiB binary", True, raw.set(b"blob\x00\xff", blob))
    got = raw.get(b"blob\x00\xff")
    c.true("1 MiB binary value round-trips exactly (len %d)" % len(got or b""),
           got == blob, (got[:32] + b"..." if got else got))

    # ---- pipeline, not transactional
    c.section = "pipeline"
    pipe = r.pipeline(transaction=False)
    for _ in range(1000):
        pipe.incr("piped")
    c.eq("1000 pipelined INCRs", list(range(1, 1001)), pipe.execute())
    c.eq("get after pipeline", "1000", r.get("piped"))

    # ---- MULTI/EXEC
    c.section = "transaction"
    with r.pipeline() as pipe:
        pipe.set("tx", "5")
        pipe.incr("tx")
        pipe.get("tx")
        c.eq("multi set/incr/get", [True, 6, "6"], pipe.execute())
    with r.pipeline() as pipe:
        pipe.set("tx2", "a").rpush("tx-list", "x", "y").incrby("tx3", 4).lrange("tx-list", 0, -1)
        c.eq("multi chained", [True, 2, 4, ["x", "y"]], pipe.execute())

    # ---- optimistic locking
    c.section = "watch"
    r.set("watched-key", "10")

    def increment(pipe):
        current = pipe.get("watched-key")
        pipe.multi()
        pipe.set("watched-key", int(current) + 1)

    c.eq("r.transaction(fn, 'watched-key')", [True], r.transaction(increment, "watched-key"))
    c.eq("get after transaction", "11", r.get("watched-key"))
    def read_then_incr(pipe):
        before = pipe.get("watched-key")
        pipe.multi()
        pipe.incr("watched-key")
        return before

    c.eq("r.transaction(fn, value_from_callable=True)", "11",
         r.transaction(read_then_incr, "watched-key", value_from_callable=True))
    c.eq("get after second transaction", "12", r.get("watched-key"))

    r.set("contended", "original")
    other = make_client(decode_responses=True)
    with r.pipeline() as pipe:
        pipe.watch("contended")
        c.eq("get in watch (immediate mode)", "original", pipe.get("contended"))
        c.eq("second client changes watched key", True, other.set("contended", "changed"))
        pipe.multi()
        pipe.set("contended", "mine")
        c.raises("execute after watched key changed", redis.WatchError, pipe.execute,
                 lambda m: True, "(watched key changed)")
    c.eq("value after failed exec", "changed", r.get("contended"))
    with r.pipeline() as pipe:
        pipe.watch("contended")
        pipe.multi()
        pipe.set("contended", "mine")
        c.eq("exec with untouched watched key", [True], pipe.execute())
    c.eq("value after successful exec", "mine", r.get("contended"))
    other.close()

    # ---- hashes
    c.section = "hashes"
    c.eq("hset mapping", 3, r.hset("h", mapping={"f1": "v1", "f2": "v2", "n": "5"}))
    c.eq("hset existing field", 0, r.hset("h", "f2", "v2b"))
    c.eq("hgetall", {"f1": "v1", "f2": "v2b", "n": "5"}, r.hgetall("h"))
    c.eq("hgetall missing", {}, r.hgetall("no-hash"))
    c.eq("hget", "v1", r.hget("h", "f1"))
    c.eq("hincrby", 8, r.hincrby("h", "n", 3))
    c.eq("hincrby new field", -2, r.hincrby("h", "m", -2))
    c.eq("hdel", 2, r.hdel("h", "f1", "m", "nope"))
    c.eq("hexists deleted", False, r.hexists("h", "f1"))
    c.eq("hexists present", True, r.hexists("h", "f2"))
    c.eq("hlen", 2, r.hlen("h"))
    c.eq("hkeys", {"f2", "n"}, set(r.hkeys("h")))

    # ---- lists
    c.section = "lists"
    c.eq("rpush", 3, r.rpush("l", "a", "b", "c"))
    c.eq("lpush", 5, r.lpush("l", "y", "z"))
    c.eq("lrange 0 -1", ["z", "y", "a", "b", "c"], r.lrange("l", 0, -1))
    c.eq("lrange 1 2", ["y", "a"], r.lrange("l", 1, 2))
    c.eq("lpop count=2", ["z", "y"], r.lpop("l", count=2))
    c.eq("lpop", "a", r.lpop("l"))
    c.eq("llen", 2, r.llen("l"))
    c.eq("rpush more", 5, r.rpush("l", "a", "b", "a"))
    c.eq("lrem 0 a", 2, r.lrem("l", 0, "a"))
    c.eq("lrange after lrem", ["b", "c", "b"], r.lrange("l", 0, -1))
    c.eq("lrem -1 b", 1, r.lrem("l", -1, "b"))
    c.eq("lrange after lrem -1", ["b", "c"], r.lrange("l", 0, -1))
    c.eq("rpush for ltrim", 5, r.rpush("l", "d", "e", "f"))
    c.eq("ltrim 1 3", True, r.ltrim("l", 1, 3))
    c.eq("lrange after ltrim", ["c", "d", "e"], r.lrange("l", 0, -1))
    c.eq("lindex 1", "d", r.lindex("l", 1))
    c.eq("lindex -1", "e", r.lindex("l", -1))
    c.eq("lindex out of range", None, r.lindex("l", 10))
    c.eq("lset", True, r.lset("l", 0, "C"))
    c.eq("lrange after lset", ["C", "d", "e"], r.lrange("l", 0, -1))
    c.eq("lpop count missing key", None, r.lpop("no-list", count=2))
    c.eq("llen missing", 0, r.llen("no-list"))

    # ---- sets
    c.section = "sets"
    c.eq("sadd", 3, r.sadd("s1", "a", "b", "c"))
    c.eq("sadd existing", 0, r.sadd("s1", "a"))
    c.eq("smembers", {"a", "b", "c"}, r.smembers("s1"))
    c.eq("smembers missing", set(), r.smembers("no-set"))
    c.true("sismember present", r.sismember("s1", "a") == 1, r.sismember("s1", "a"))
    c.true("sismember absent", r.sismember("s1", "zz") == 0, r.sismember("s1", "zz"))
    c.eq("srem", 1, r.srem("s1", "c", "nope"))
    c.eq("sadd s2", 3, r.sadd("s2", "b", "c", "d"))
    c.eq("sinter", {"b"}, r.sinter("s1", "s2"))
    c.eq("sunion", {"a", "b", "c", "d"}, r.sunion("s1", "s2"))
    c.eq("sdiff s1 s2", {"a"}, r.sdiff("s1", "s2"))
    c.eq("sdiff s2 s1", {"c", "d"}, r.sdiff("s2", "s1"))
    c.eq("scard", 2, r.scard("s1"))

    # ---- sorted sets
    c.section = "sorted sets"
    c.eq("zadd mapping", 4, r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4}))
    c.eq("zrange withscores",
         [("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 4.0)], r.zrange("z", 0, -1, withscores=True))
    c.eq("zrange", ["a", "b", "c", "d"], r.zrange("z", 0, -1))
    c.eq("zrangebyscore 2 3", ["b", "c"], r.zrangebyscore("z", 2, 3))
    c.eq("zrangebyscore (1 +inf", ["b", "c", "d"], r.zrangebyscore("z", "(1", "+inf"))
    c.eq("zrangebyscore -inf +inf start=1 num=2", ["b", "c"],
         r.zrangebyscore("z", "-inf", "+inf", start=1, num=2))
    c.eq("zrangebyscore withscores", [("c", 3.0), ("d", 4.0)],
         r.zrangebyscore("z", 3, 10, withscores=True))
    c.eq("zrevrange", ["d", "c", "b", "a"], r.zrevrange("z", 0, -1))
    c.eq("zrevrange withscores 0 1", [("d", 4.0), ("c", 3.0)],
         r.zrevrange("z", 0, 1, withscores=True))
    c.eq("zincrby 3.5", 4.5, r.zincrby("z", 3.5, "a"))
    c.eq("zscore", 4.5, r.zscore("z", "a"))
    c.eq("zscore missing member", None, r.zscore("z", "nope"))
    c.eq("zrank a (now highest)", 3, r.zrank("z", "a"))
    c.eq("zrank b", 0, r.zrank("z", "b"))
    c.eq("zrank missing", None, r.zrank("z", "nope"))
    c.eq("zcard", 4, r.zcard("z"))
    c.eq("zpopmin", [("b", 2.0)], r.zpopmin("z"))
    c.eq("zpopmin count=2", [("c", 3.0), ("d", 4.0)], r.zpopmin("z", 2))
    c.eq("zadd more", 3, r.zadd("z", {"x": 10, "y": 20, "w": -1.5}))
    c.eq("zcount -inf +inf", 4, r.zcount("z", "-inf", "+inf"))
    c.eq("zcount 4.5 10", 2, r.zcount("z", 4.5, 10))
    c.eq("zcount (4.5 10", 1, r.zcount("z", "(4.5", 10))
    c.eq("zrem", 2, r.zrem("z", "x", "w", "nope"))
    c.eq("zrange withscores after zrem", [("a", 4.5), ("y", 20.0)],
         r.zrange("z", 0, -1, withscores=True))

    # ---- keys
    c.section = "keys"
    c.eq("flushall", True, r.flushall())
    users = {"user:%d" % i for i in range(50)}
    c.eq("mset 50 user keys", True, r.mset({k: k.upper() for k in users}))
    r.set("other:1", "o")
    r.hset("hash:1", "f", "v")
    r.rpush("list:1", "x")
    r.sadd("set:1", "x")
    r.zadd("zset:1", {"x": 1})
    scanned = list(r.scan_iter(match="user:*", count=7))
    c.eq("scan_iter match=user:* count=7", users, set(scanned))
    c.eq("keys user:1*", {"user:1"} | {"user:1%d" % i for i in range(10)}, set(r.keys("user:1*")))
    c.eq("keys *", users | {"other:1", "hash:1", "list:1", "set:1", "zset:1"}, set(r.keys("*")))
    c.eq("dbsize", 55, r.dbsize())
    for key, kind in [("other:1", "string"), ("hash:1", "hash"), ("list:1", "list"),
                      ("set:1", "set"), ("zset:1", "zset"), ("missing", "none")]:
        c.eq("type %s" % key, kind, r.type(key))
    c.eq("exists several", 2, r.exists("user:1", "user:2", "nope"))
    c.eq("exists same key twice", 2, r.exists("user:1", "user:1"))
    c.eq("exists none", 0, r.exists("nope", "nope2"))
    c.eq("ttl without expiry", -1, r.ttl("user:1"))
    c.eq("ttl missing key", -2, r.ttl("nope"))
    c.eq("expire", True, r.expire("user:1", 100))
    ttl = r.ttl("user:1")
    c.true("ttl after expire 100 in (0, 100]", isinstance(ttl, int) and 0 < ttl <= 100, ttl)
    c.eq("persist", True, r.persist("user:1"))
    c.eq("ttl after persist", -1, r.ttl("user:1"))
    c.eq("persist again", False, r.persist("user:1"))
    c.eq("expire missing key", False, r.expire("nope", 100))
    c.eq("rename", True, r.rename("user:2", "renamed"))
    c.eq("exists old name", 0, r.exists("user:2"))
    c.eq("get new name", "USER:2", r.get("renamed"))
    c.raises("rename missing key", redis.ResponseError, lambda: r.rename("nope", "x"),
             lambda m: "no such key" in m, "containing 'no such key'")
    c.eq("delete returns count", 2, r.delete("user:3", "user:4", "nope"))
    c.eq("delete nothing", 0, r.delete("user:3"))
    c.eq("dbsize after delete", 53, r.dbsize())

    # ---- errors
    c.section = "errors"
    c.raises("get of a hash", redis.ResponseError, lambda: r.get("hash:1"),
             lambda m: m.startswith("WRONGTYPE"), "starting with 'WRONGTYPE'")
    c.raises("lpush onto a hash", redis.ResponseError, lambda: r.lpush("hash:1", "x"),
             lambda m: m.startswith("WRONGTYPE"), "starting with 'WRONGTYPE'")
    r.set("word", "abc")
    c.raises("incr of a non-number", redis.ResponseError, lambda: r.incr("word"),
             lambda m: "value is not an integer" in m, "containing 'value is not an integer'")
    c.eq("connection still usable after errors", "abc", r.get("word"))
    with r.pipeline() as pipe:
        pipe.set("tx-err", "x").incr("tx-err").get("tx-err")
        c.raises("error inside MULTI/EXEC", redis.ResponseError, pipe.execute,
                 lambda m: "value is not an integer" in m,
                 "containing 'value is not an integer'")
    c.eq("MULTI/EXEC ran the other commands", "x", r.get("tx-err"))

    # ---- RESP3
    c.section = "RESP3"
    r3 = make_client(protocol=3, decode_responses=True)
    c.eq("ping", True, r3.ping())
    c.eq("hset", 2, r3.hset("h3", mapping={"a": "1", "b": "2"}))
    c.eq("hgetall is a dict", {"a": "1", "b": "2"}, r3.hgetall("h3"))
    c.eq("zadd", 2, r3.zadd("z3", {"m": 1.5, "n": 2}))
    c.eq("zscore is a float", 1.5, r3.zscore("z3", "m"))
    c.eq("sadd", 2, r3.sadd("s3", "p", "q"))
    c.eq("smembers is a set", {"p", "q"}, r3.smembers("s3"))
    # redis-py 5 leaves RESP3 ZRANGE replies as the server sent them: [member, score] pairs
    c.eq("zrange withscores pairs", [["m", 1.5], ["n", 2.0]],
         r3.zrange("z3", 0, -1, withscores=True))
    c.eq("get", "abc", r3.get("word"))
    c.eq("incrbyfloat", 2.5, r3.incrbyfloat("f3", 2.5))
    r3.close()

    # ---- SELECT
    c.section = "select"
    db3 = make_client(db=3, decode_responses=True)
    db0 = make_client(db=0, decode_responses=True)
    c.eq("set in db 3", True, db3.set("only-in-3", "three"))
    c.eq("get in db 3", "three", db3.get("only-in-3"))
    c.eq("get in db 0", None, db0.get("only-in-3"))
    c.eq("exists in db 0", 0, db0.exists("only-in-3"))
    c.eq("dbsize db 3", 1, db3.dbsize())
    c.eq("db 3 does not see db 0 keys", None, db3.get("word"))
    db3.close()
    db0.close()

    # ---- client name
    c.section = "client name"
    named = make_client(decode_responses=True)
    c.eq("client_getname before setname", None, named.client_getname())
    c.eq("client_setname", True, named.client_setname("shoal-clients-test"))
    c.eq("client_getname", "shoal-clients-test", named.client_getname())
    named.close()
    named2 = make_client(decode_responses=True, client_name="from-connect")
    c.eq("client_name= on connect", "from-connect", named2.client_getname())
    named2.close()

    c.section = "teardown"
    c.eq("flushall", True, r.flushall())
    c.eq("dbsize after flushall", 0, r.dbsize())
    r.close()
    raw.close()
    return c.count


def wait_port(port, proc, what, timeout=60):
    deadline = time.time() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError("%s exited with status %s before listening on port %d"
                               % (what, proc.returncode, port))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.time() > deadline:
                raise RuntimeError("%s did not listen on port %d within %ds"
                                   % (what, port, timeout))
            time.sleep(0.1)


def run(label, port):
    def make_client(**kwargs):
        kwargs.setdefault("socket_timeout", 30)
        return redis.Redis(host="127.0.0.1", port=port, **kwargs)

    try:
        n = exercise(make_client)
    except CheckFailed as e:
        print("%s: check failed: %s" % (label, e))
        return False
    except Exception:
        print("%s: unexpected error:\n%s" % (label, traceback.format_exc()))
        return False
    print("%s: %d checks passed" % (label, n))
    return True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shoal-binary", required=True)
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    args = parser.parse_args()

    redis_port = differential.free_port()
    shoal_port, shoal_redis_port = differential.free_port(), differential.free_port()
    data_dir = tempfile.mkdtemp(prefix="shoal-redis-clients-")
    procs = []

    def start(command, **kwargs):
        try:
            procs.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, **kwargs))
        except OSError as e:
            raise SystemExit("cannot start %s: %s" % (command[0], e))
        return procs[-1]

    try:
        start(
            [args.redis_server, "--port", str(redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no"],
            stderr=subprocess.DEVNULL)
        wait_port(redis_port, procs[-1], "redis-server")
        if not run("redis 7", redis_port):
            print("the check failed against real Redis: the expectation is wrong")
            return 1

        stderr_path = os.path.join(data_dir, "stderr.log")
        with open(stderr_path, "w") as stderr:
            start(
                [args.shoal_binary, "serve", "--data-dir", data_dir,
                 "--listen", "127.0.0.1:%d" % shoal_port, "--unix-socket-dir", "",
                 "--redis-listen", "127.0.0.1:%d" % shoal_redis_port],
                stderr=stderr)
        try:
            wait_port(shoal_redis_port, procs[-1], "shoal")
        except RuntimeError as e:
            with open(stderr_path) as f:
                tail = f.read()[-4000:]
            print("shoal: %s\n%s" % (e, tail))
            return 1
        if not run("shoal", shoal_redis_port):
            return 1
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
