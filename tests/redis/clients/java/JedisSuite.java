import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.commons.pool2.impl.GenericObjectPoolConfig;

import redis.clients.jedis.Connection;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.Pipeline;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.RedisProtocol;
import redis.clients.jedis.Response;
import redis.clients.jedis.Transaction;
import redis.clients.jedis.args.ExpiryOption;
import redis.clients.jedis.args.ListDirection;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.params.GetExParams;
import redis.clients.jedis.params.ScanParams;
import redis.clients.jedis.params.SetParams;
import redis.clients.jedis.params.ZAddParams;
import redis.clients.jedis.params.ZRangeParams;
import redis.clients.jedis.resps.ScanResult;
import redis.clients.jedis.resps.Tuple;

/**
 * What applications do with Jedis (redis.clients:jedis, unmodified), case by case, against the
 * Redis-protocol server at REDIS_HOST (default 127.0.0.1) : REDIS_PORT (default 6379). The same
 * program passes against a real Redis 7, which shows the expectations are right, and is then run
 * against Shoal.
 *
 * Prints one line per case, "ok CASE" or "not ok CASE: WHAT WENT WRONG", then a closing line
 * "N passed, N failed"; exits 1 when a case failed, else 0. Each case uses its own connections and
 * keys (prefixed with the case name); connection and socket timeouts are a few seconds and each
 * case has an overall limit, so nothing hangs. The server is FLUSHALLed once at the start.
 *
 * Where Redis leaves an order unspecified (hash fields, set members) the checks compare
 * order-insensitively, and SCAN cursors are never compared, only what the iteration collects.
 */
@SuppressWarnings("deprecation") // setnx, setex, hmset, zrangeByScore...: still what applications call
public final class JedisSuite {

  /** Seconds one case may take before it counts as hung (the suite then goes on). */
  private static final int CASE_TIMEOUT_S = 60;
  private static final int CONNECT_TIMEOUT_MS = 3000;
  private static final int SOCKET_TIMEOUT_MS = 5000;

  private static final String HOST = envOr("REDIS_HOST", "127.0.0.1");
  private static final int PORT = Integer.parseInt(envOr("REDIS_PORT", "6379"));

  interface Body {
    void run() throws Exception;
  }

  private static final Map<String, Body> CASES = new LinkedHashMap<>();

  private static String envOr(String name, String dflt) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? dflt : v;
  }

  // ---------------------------------------------------------------- connections

  private static DefaultJedisClientConfig.Builder baseConfig() {
    return DefaultJedisClientConfig.builder()
        .connectionTimeoutMillis(CONNECT_TIMEOUT_MS)
        .socketTimeoutMillis(SOCKET_TIMEOUT_MS);
  }

  private static JedisClientConfig resp2Config() {
    return baseConfig().build();
  }

  private static JedisClientConfig resp3Config() {
    return baseConfig().protocol(RedisProtocol.RESP3).build();
  }

  private static HostAndPort hp() {
    return new HostAndPort(HOST, PORT);
  }

  /** A plain connection with the default protocol (what most applications use). */
  private static Jedis conn() {
    return new Jedis(hp(), resp2Config());
  }

  private static Jedis conn3() {
    return new Jedis(hp(), resp3Config());
  }

  // ---------------------------------------------------------------- checks

  static final class CheckFailed extends RuntimeException {
    CheckFailed(String m) {
      super(m);
    }
  }

  private static String show(Object o) {
    if (o instanceof byte[]) {
      byte[] b = (byte[]) o;
      return "bytes[" + b.length + "]" + Arrays.toString(b.length > 16 ? Arrays.copyOf(b, 16) : b);
    }
    if (o instanceof String) {
      return "\"" + o + "\"";
    }
    return String.valueOf(o);
  }

  private static void eq(String what, Object expected, Object got) {
    boolean same;
    if (expected instanceof byte[] && got instanceof byte[]) {
      same = Arrays.equals((byte[]) expected, (byte[]) got);
    } else {
      same = Objects.equals(expected, got);
    }
    if (!same) {
      throw new CheckFailed(what + ": expected " + show(expected) + ", got " + show(got)
          + (got == null ? "" : " (" + got.getClass().getSimpleName() + ")"));
    }
  }

  private static void check(String what, boolean cond, Object got) {
    if (!cond) {
      throw new CheckFailed(what + ": got " + show(got));
    }
  }

  private static void near(String what, double expected, double got, double eps) {
    if (Math.abs(expected - got) > eps) {
      throw new CheckFailed(what + ": expected " + expected + " (+-" + eps + "), got " + got);
    }
  }

  /** Compares as sets (order-insensitive, duplicates would show as a size difference). */
  private static void sameSet(String what, Collection<String> expected, Collection<String> got) {
    if (got == null) {
      throw new CheckFailed(what + ": expected " + new TreeSet<>(expected) + ", got null");
    }
    if (got.size() != expected.size() || !new HashSet<>(got).equals(new HashSet<>(expected))) {
      throw new CheckFailed(what + ": expected (any order) " + new TreeSet<>(expected) + ", got "
          + got);
    }
  }

  private static Set<String> setOf(String... xs) {
    return new HashSet<>(Arrays.asList(xs));
  }

  private static Map<String, String> mapOf(String... kv) {
    Map<String, String> m = new HashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put(kv[i], kv[i + 1]);
    }
    return m;
  }

  /** Runs body and returns the JedisDataException it must throw. */
  private static JedisDataException dataError(String what, Callable<?> body) throws Exception {
    Object got;
    try {
      got = body.call();
    } catch (JedisDataException e) {
      return e;
    }
    throw new CheckFailed(what + ": expected a JedisDataException, got the reply " + show(got));
  }

  private static List<String> tupleStrings(List<Tuple> ts) {
    List<String> out = new ArrayList<>();
    for (Tuple t : ts) {
      out.add(t.getElement() + "=" + t.getScore());
    }
    return out;
  }

  // ---------------------------------------------------------------- cases

  static {
    CASES.put("ping", () -> {
      try (Jedis j = conn()) {
        eq("PING", "PONG", j.ping());
        eq("PING message", "hello", j.ping("hello"));
        eq("ECHO", "echo me", j.echo("echo me"));
        check("isConnected", j.isConnected(), j.isConnected());
      }
    });

    CASES.put("strings_set_get", () -> {
      try (Jedis j = conn()) {
        String k = "strings_set_get:k";
        eq("SET", "OK", j.set(k, "v1"));
        eq("GET", "v1", j.get(k));
        eq("GET missing", null, j.get("strings_set_get:missing"));
        eq("SET overwrite", "OK", j.set(k, "v2"));
        eq("GET after overwrite", "v2", j.get(k));
        eq("SET empty value", "OK", j.set("strings_set_get:empty", ""));
        eq("GET empty value", "", j.get("strings_set_get:empty"));
        String uni = "h\u00e9llo w\u00f6rld \u2603 \ud83d\ude00";
        eq("SET unicode", "OK", j.set("strings_set_get:uni", uni));
        eq("GET unicode", uni, j.get("strings_set_get:uni"));

        // SET ... EX / PX
        String kex = "strings_set_get:ex";
        eq("SET EX", "OK", j.set(kex, "x", SetParams.setParams().ex(100)));
        long ttl = j.ttl(kex);
        check("TTL after SET EX 100 in 95..100", ttl >= 95 && ttl <= 100, ttl);
        String kpx = "strings_set_get:px";
        eq("SET PX", "OK", j.set(kpx, "x", SetParams.setParams().px(50000)));
        long pttl = j.pttl(kpx);
        check("PTTL after SET PX 50000 in 45000..50000", pttl >= 45000 && pttl <= 50000, pttl);

        // SET NX / XX
        String knx = "strings_set_get:nx";
        eq("SET NX on missing", "OK", j.set(knx, "first", SetParams.setParams().nx()));
        eq("SET NX on existing", null, j.set(knx, "second", SetParams.setParams().nx()));
        eq("GET after SET NX twice", "first", j.get(knx));
        String kxx = "strings_set_get:xx";
        eq("SET XX on missing", null, j.set(kxx, "v", SetParams.setParams().xx()));
        eq("GET after SET XX on missing", null, j.get(kxx));
        j.set(kxx, "old");
        eq("SET XX on existing", "OK", j.set(kxx, "new", SetParams.setParams().xx()));
        eq("GET after SET XX", "new", j.get(kxx));
        eq("SET NX EX on missing", "OK",
            j.set("strings_set_get:nxex", "v", SetParams.setParams().nx().ex(60)));
        long ttlNxEx = j.ttl("strings_set_get:nxex");
        check("TTL after SET NX EX 60", ttlNxEx > 0 && ttlNxEx <= 60, ttlNxEx);

        // KEEPTTL
        eq("SET KEEPTTL", "OK", j.set(kex, "y", SetParams.setParams().keepTtl()));
        eq("GET after KEEPTTL", "y", j.get(kex));
        long kept = j.ttl(kex);
        check("TTL kept by KEEPTTL", kept >= 95 && kept <= 100, kept);
        eq("SET without KEEPTTL", "OK", j.set(kex, "z"));
        eq("TTL cleared by plain SET", -1L, j.ttl(kex));

        // SET ... GET
        String kg = "strings_set_get:setget";
        eq("SETGET on missing", null, j.setGet(kg, "a"));
        eq("SETGET returns old", "a", j.setGet(kg, "b"));
        eq("GET after SETGET", "b", j.get(kg));
        eq("SETGET with EX returns old", "b", j.setGet(kg, "c", SetParams.setParams().ex(100)));
        long ttlg = j.ttl(kg);
        check("TTL after SETGET EX 100", ttlg >= 95 && ttlg <= 100, ttlg);

        // SETNX / SETEX
        String ksnx = "strings_set_get:setnx";
        eq("SETNX on missing", 1L, j.setnx(ksnx, "1"));
        eq("SETNX on existing", 0L, j.setnx(ksnx, "2"));
        eq("GET after SETNX", "1", j.get(ksnx));
        String ksex = "strings_set_get:setex";
        eq("SETEX", "OK", j.setex(ksex, 30, "v"));
        eq("GET after SETEX", "v", j.get(ksex));
        long ttlsex = j.ttl(ksex);
        check("TTL after SETEX 30", ttlsex >= 25 && ttlsex <= 30, ttlsex);
        eq("PSETEX", "OK", j.psetex("strings_set_get:psetex", 30000, "p"));
        long pttlp = j.pttl("strings_set_get:psetex");
        check("PTTL after PSETEX 30000", pttlp > 25000 && pttlp <= 30000, pttlp);

        // GETDEL
        String kd = "strings_set_get:getdel";
        j.set(kd, "gone");
        eq("GETDEL", "gone", j.getDel(kd));
        eq("GET after GETDEL", null, j.get(kd));
        eq("EXISTS after GETDEL", false, j.exists(kd));
        eq("GETDEL missing", null, j.getDel(kd));

        // GETEX
        String ke = "strings_set_get:getex";
        j.set(ke, "val");
        eq("GETEX no options", "val", j.getEx(ke, GetExParams.getExParams()));
        eq("TTL after GETEX no options", -1L, j.ttl(ke));
        eq("GETEX EX", "val", j.getEx(ke, GetExParams.getExParams().ex(200)));
        long ttle = j.ttl(ke);
        check("TTL after GETEX EX 200", ttle >= 195 && ttle <= 200, ttle);
        eq("GETEX PX", "val", j.getEx(ke, GetExParams.getExParams().px(90000)));
        long pttle = j.pttl(ke);
        check("PTTL after GETEX PX 90000", pttle > 85000 && pttle <= 90000, pttle);
        eq("GETEX PERSIST", "val", j.getEx(ke, GetExParams.getExParams().persist()));
        eq("TTL after GETEX PERSIST", -1L, j.ttl(ke));
        eq("GETEX missing", null, j.getEx("strings_set_get:nokey", GetExParams.getExParams().ex(5)));
      }
    });

    CASES.put("expiry", () -> {
      try (Jedis j = conn()) {
        String k = "expiry:k";
        eq("TTL missing key", -2L, j.ttl(k));
        eq("PTTL missing key", -2L, j.pttl(k));
        j.set(k, "v");
        eq("TTL without expiry", -1L, j.ttl(k));
        eq("PTTL without expiry", -1L, j.pttl(k));
        eq("EXPIRE", 1L, j.expire(k, 100));
        long ttl = j.ttl(k);
        check("TTL after EXPIRE 100", ttl >= 95 && ttl <= 100, ttl);
        long pttl = j.pttl(k);
        check("PTTL after EXPIRE 100", pttl > 95000 && pttl <= 100000, pttl);
        eq("PEXPIRE", 1L, j.pexpire(k, 20000));
        long pttl2 = j.pttl(k);
        check("PTTL after PEXPIRE 20000", pttl2 > 15000 && pttl2 <= 20000, pttl2);
        eq("PERSIST", 1L, j.persist(k));
        eq("TTL after PERSIST", -1L, j.ttl(k));
        eq("PERSIST without expiry", 0L, j.persist(k));
        eq("EXPIRE missing key", 0L, j.expire("expiry:missing", 10));
        eq("PERSIST missing key", 0L, j.persist("expiry:missing"));
        long at = System.currentTimeMillis() / 1000 + 500;
        eq("EXPIREAT", 1L, j.expireAt(k, at));
        long ttlAt = j.ttl(k);
        check("TTL after EXPIREAT now+500", ttlAt >= 490 && ttlAt <= 500, ttlAt);

        // A key that really expires.
        String ks = "expiry:short";
        j.set(ks, "v", SetParams.setParams().px(150));
        eq("GET before expiry", "v", j.get(ks));
        Thread.sleep(400);
        eq("GET after expiry", null, j.get(ks));
        eq("EXISTS after expiry", false, j.exists(ks));
        eq("TTL after expiry", -2L, j.ttl(ks));

        // EXPIRE NX / XX / GT / LT (Redis 7).
        String ko = "expiry:opts";
        j.set(ko, "v");
        eq("EXPIRE XX without a TTL", 0L, j.expire(ko, 100, ExpiryOption.XX));
        eq("TTL after refused EXPIRE XX", -1L, j.ttl(ko));
        eq("EXPIRE NX without a TTL", 1L, j.expire(ko, 100, ExpiryOption.NX));
        eq("EXPIRE NX with a TTL", 0L, j.expire(ko, 200, ExpiryOption.NX));
        eq("EXPIRE GT lower", 0L, j.expire(ko, 50, ExpiryOption.GT));
        eq("EXPIRE GT higher", 1L, j.expire(ko, 300, ExpiryOption.GT));
        long tgt = j.ttl(ko);
        check("TTL after EXPIRE GT 300", tgt > 290 && tgt <= 300, tgt);
        eq("EXPIRE LT higher", 0L, j.expire(ko, 400, ExpiryOption.LT));
        eq("EXPIRE LT lower", 1L, j.expire(ko, 60, ExpiryOption.LT));
        long tlt = j.ttl(ko);
        check("TTL after EXPIRE LT 60", tlt > 50 && tlt <= 60, tlt);
        eq("EXPIRE XX with a TTL", 1L, j.expire(ko, 70, ExpiryOption.XX));
        eq("PEXPIRE GT", 1L, j.pexpire(ko, 80000, ExpiryOption.GT));
        long ptgt = j.pttl(ko);
        check("PTTL after PEXPIRE GT 80000", ptgt > 75000 && ptgt <= 80000, ptgt);

        // EXPIRE with 0 / a negative time deletes the key.
        String kz = "expiry:zero";
        j.set(kz, "v");
        eq("EXPIRE -1", 1L, j.expire(kz, -1));
        eq("EXISTS after EXPIRE -1", false, j.exists(kz));
      }
    });

    CASES.put("counters", () -> {
      try (Jedis j = conn()) {
        String k = "counters:n";
        eq("INCR missing", 1L, j.incr(k));
        eq("INCR", 2L, j.incr(k));
        eq("INCRBY 10", 12L, j.incrBy(k, 10));
        eq("INCRBY -20", -8L, j.incrBy(k, -20));
        eq("DECR", -9L, j.decr(k));
        eq("DECRBY 1", -10L, j.decrBy(k, 1));
        eq("GET counter", "-10", j.get(k));
        j.set("counters:big", "9223372036854775806");
        eq("INCR to Long.MAX_VALUE", Long.MAX_VALUE, j.incr("counters:big"));
        JedisDataException ov = dataError("INCR past Long.MAX_VALUE", () -> j.incr("counters:big"));
        check("overflow message", ov.getMessage().startsWith("ERR increment or decrement would overflow"),
            ov.getMessage());

        String f = "counters:f";
        j.set(f, "10.50");
        near("INCRBYFLOAT 0.1", 10.6, j.incrByFloat(f, 0.1), 0);
        eq("GET after INCRBYFLOAT", "10.6", j.get(f));
        near("INCRBYFLOAT -5", 5.6, j.incrByFloat(f, -5), 1e-9);
        eq("GET after INCRBYFLOAT -5", "5.6", j.get(f));
        near("INCRBYFLOAT on missing", 2.5, j.incrByFloat("counters:fnew", 2.5), 0);
        eq("GET after INCRBYFLOAT on missing", "2.5", j.get("counters:fnew"));
        j.set("counters:fi", "3");
        near("INCRBYFLOAT to an integer", 5.0, j.incrByFloat("counters:fi", 2.0), 0);
        eq("GET integral float", "5", j.get("counters:fi"));
        j.set("counters:exp", "5.0e3");
        near("INCRBYFLOAT on 5.0e3", 5200.0, j.incrByFloat("counters:exp", 200), 0);
        eq("GET after INCRBYFLOAT on exponent form", "5200", j.get("counters:exp"));
      }
    });

    CASES.put("mset_mget", () -> {
      try (Jedis j = conn()) {
        eq("MSET", "OK", j.mset("mset_mget:a", "1", "mset_mget:b", "2", "mset_mget:c", "3"));
        eq("MGET with a missing key",
            Arrays.asList("1", null, "2", "3"),
            j.mget("mset_mget:a", "mset_mget:missing", "mset_mget:b", "mset_mget:c"));
        eq("MSETNX with an existing key", 0L, j.msetnx("mset_mget:a", "x", "mset_mget:d", "4"));
        eq("MGET after failed MSETNX", Arrays.asList("1", null),
            j.mget("mset_mget:a", "mset_mget:d"));
        eq("MSETNX all new", 1L, j.msetnx("mset_mget:d", "4", "mset_mget:e", "5"));
        eq("MGET after MSETNX", Arrays.asList("4", "5"), j.mget("mset_mget:d", "mset_mget:e"));
        j.lpush("mset_mget:list", "x");
        eq("MGET of a non-string key gives null", Arrays.asList("1", null),
            j.mget("mset_mget:a", "mset_mget:list"));
      }
    });

    CASES.put("string_ranges", () -> {
      try (Jedis j = conn()) {
        String k = "string_ranges:s";
        eq("APPEND to missing", 5L, j.append(k, "Hello"));
        eq("APPEND", 11L, j.append(k, " World"));
        eq("GET after APPEND", "Hello World", j.get(k));
        eq("STRLEN", 11L, j.strlen(k));
        eq("STRLEN missing", 0L, j.strlen("string_ranges:missing"));
        eq("GETRANGE 0 4", "Hello", j.getrange(k, 0, 4));
        eq("GETRANGE -5 -1", "World", j.getrange(k, -5, -1));
        eq("GETRANGE 0 -1", "Hello World", j.getrange(k, 0, -1));
        eq("GETRANGE past the end", "World", j.getrange(k, 6, 100));
        eq("GETRANGE start > end", "", j.getrange(k, 5, 2));
        eq("GETRANGE missing", "", j.getrange("string_ranges:missing", 0, 10));
        eq("SETRANGE", 11L, j.setrange(k, 6, "Redis"));
        eq("GET after SETRANGE", "Hello Redis", j.get(k));
        String kp = "string_ranges:pad";
        eq("SETRANGE past the end pads with zero bytes", 8L, j.setrange(kp, 5, "abc"));
        eq("GET padded", "\0\0\0\0\0abc", j.get(kp));
        eq("SETRANGE extends", 13L, j.setrange(k, 11, "!!"));
        eq("GET after extending SETRANGE", "Hello Redis!!", j.get(k));
      }
    });

    CASES.put("binary_values", () -> {
      try (Jedis j = conn()) {
        byte[] all = new byte[256];
        for (int i = 0; i < 256; i++) {
          all[i] = (byte) i;
        }
        byte[] k = "binary_values:all".getBytes(StandardCharsets.UTF_8);
        eq("SET binary", "OK", j.set(k, all));
        eq("GET binary (all 256 byte values)", all, j.get(k));
        eq("STRLEN binary", 256L, j.strlen(k));
        byte[] rev = new byte[256];
        for (int i = 0; i < 256; i++) {
          rev[i] = (byte) (255 - i);
        }
        eq("APPEND binary", 512L, j.append(k, rev));
        byte[] both = new byte[512];
        System.arraycopy(all, 0, both, 0, 256);
        System.arraycopy(rev, 0, both, 256, 256);
        eq("GET after APPEND binary", both, j.get(k));
        eq("GETRANGE binary", Arrays.copyOfRange(all, 10, 21), j.getrange(k, 10, 20));

        // Binary key, too, with CR LF and NUL inside.
        byte[] bk = new byte[] {'b', 0, '\r', '\n', (byte) 0xff, (byte) 0x80};
        byte[] bv = new byte[] {0, 0, '\r', '\n', '$', '*', (byte) 0xfe};
        j.set(bk, bv);
        eq("GET binary key", bv, j.get(bk));
        eq("EXISTS binary key", true, j.exists(bk));

        // Hash field and list element with all byte values.
        byte[] hk = "binary_values:hash".getBytes(StandardCharsets.UTF_8);
        j.hset(hk, all, rev);
        eq("HGET binary field", rev, j.hget(hk, all));
        byte[] lk = "binary_values:list".getBytes(StandardCharsets.UTF_8);
        j.rpush(lk, all, rev);
        List<byte[]> lr = j.lrange(lk, 0, -1);
        eq("LRANGE binary size", 2, lr.size());
        eq("LRANGE binary [0]", all, lr.get(0));
        eq("LRANGE binary [1]", rev, lr.get(1));
        byte[] sk = "binary_values:set".getBytes(StandardCharsets.UTF_8);
        j.sadd(sk, all);
        eq("SISMEMBER binary", true, j.sismember(sk, all));

        // Each single byte on its own.
        for (int i = 0; i < 256; i++) {
          byte[] one = new byte[] {(byte) i};
          byte[] key = ("binary_values:one:" + i).getBytes(StandardCharsets.UTF_8);
          j.set(key, one);
        }
        for (int i = 0; i < 256; i++) {
          byte[] key = ("binary_values:one:" + i).getBytes(StandardCharsets.UTF_8);
          eq("GET single byte " + i, new byte[] {(byte) i}, j.get(key));
        }
      }
    });

    CASES.put("keys", () -> {
      try (Jedis j = conn()) {
        j.set("keys:a", "1");
        j.set("keys:b", "2");
        j.rpush("keys:list", "x");
        j.hset("keys:hash", "f", "v");
        j.sadd("keys:set", "m");
        j.zadd("keys:zset", 1, "m");
        eq("EXISTS one", true, j.exists("keys:a"));
        eq("EXISTS missing", false, j.exists("keys:missing"));
        eq("EXISTS many (counts repeats)", 3L, j.exists("keys:a", "keys:b", "keys:missing", "keys:a"));
        eq("TYPE string", "string", j.type("keys:a"));
        eq("TYPE list", "list", j.type("keys:list"));
        eq("TYPE hash", "hash", j.type("keys:hash"));
        eq("TYPE set", "set", j.type("keys:set"));
        eq("TYPE zset", "zset", j.type("keys:zset"));
        eq("TYPE missing", "none", j.type("keys:missing"));
        eq("KEYS pattern", setOf("keys:a", "keys:b"), j.keys("keys:[ab]"));
        eq("DEL one", 1L, j.del("keys:b"));
        eq("DEL missing", 0L, j.del("keys:b"));
        eq("DEL many", 2L, j.del("keys:list", "keys:hash", "keys:missing"));
        eq("UNLINK", 1L, j.unlink("keys:set"));

        j.set("keys:src", "payload");
        j.expire("keys:src", 300);
        eq("RENAME", "OK", j.rename("keys:src", "keys:dst"));
        eq("GET old name", null, j.get("keys:src"));
        eq("GET new name", "payload", j.get("keys:dst"));
        long ttl = j.ttl("keys:dst");
        check("RENAME keeps the TTL", ttl > 290 && ttl <= 300, ttl);
        JedisDataException e = dataError("RENAME missing", () -> j.rename("keys:nosuch", "keys:x"));
        eq("RENAME missing message", "ERR no such key", e.getMessage());
        j.set("keys:other", "o");
        eq("RENAME over an existing key", "OK", j.rename("keys:dst", "keys:other"));
        eq("GET overwritten by RENAME", "payload", j.get("keys:other"));
        eq("RENAMENX onto existing", 0L, j.renamenx("keys:other", "keys:a"));
        eq("GET after refused RENAMENX", "1", j.get("keys:a"));
        eq("RENAMENX onto new", 1L, j.renamenx("keys:other", "keys:fresh"));
        eq("GET after RENAMENX", "payload", j.get("keys:fresh"));
        eq("EXISTS source after RENAMENX", false, j.exists("keys:other"));
        eq("RENAME a zset keeps its type", "OK", j.rename("keys:zset", "keys:zset2"));
        eq("TYPE after RENAME", "zset", j.type("keys:zset2"));
        eq("ZSCORE after RENAME", 1.0, j.zscore("keys:zset2", "m"));
      }
    });

    CASES.put("hashes", () -> {
      try (Jedis j = conn()) {
        String k = "hashes:user";
        Map<String, String> m = new LinkedHashMap<>();
        m.put("name", "alice");
        m.put("email", "alice@example.com");
        m.put("age", "30");
        eq("HSET map", 3L, j.hset(k, m));
        eq("HSET existing field", 0L, j.hset(k, "name", "Alice"));
        eq("HSET new field", 1L, j.hset(k, "city", "Paris"));
        eq("HGET", "Alice", j.hget(k, "name"));
        eq("HGET missing field", null, j.hget(k, "nope"));
        eq("HGET missing key", null, j.hget("hashes:missing", "name"));
        eq("HGETALL", mapOf("name", "Alice", "email", "alice@example.com", "age", "30", "city", "Paris"),
            j.hgetAll(k));
        eq("HGETALL missing key", new HashMap<String, String>(), j.hgetAll("hashes:missing"));
        eq("HINCRBY", 31L, j.hincrBy(k, "age", 1));
        eq("HINCRBY negative", 21L, j.hincrBy(k, "age", -10));
        eq("HINCRBY new field", 5L, j.hincrBy(k, "visits", 5));
        j.hset(k, "balance", "10.50");
        near("HINCRBYFLOAT 0.1", 10.6, j.hincrByFloat(k, "balance", 0.1), 0);
        eq("HGET after HINCRBYFLOAT", "10.6", j.hget(k, "balance"));
        near("HINCRBYFLOAT new field", 1.5, j.hincrByFloat(k, "ratio", 1.5), 0);
        eq("HLEN", 7L, j.hlen(k));
        eq("HEXISTS", true, j.hexists(k, "city"));
        eq("HEXISTS missing", false, j.hexists(k, "country"));
        eq("HDEL two (one missing)", 2L, j.hdel(k, "visits", "ratio", "nope"));
        eq("HLEN after HDEL", 5L, j.hlen(k));
        sameSet("HKEYS", setOf("name", "email", "age", "city", "balance"), j.hkeys(k));
        List<String> vals = j.hvals(k);
        sameSet("HVALS", Arrays.asList("Alice", "alice@example.com", "21", "Paris", "10.6"), vals);
        eq("HMGET with a missing field", Arrays.asList("Alice", null, "Paris"),
            j.hmget(k, "name", "nope", "city"));
        eq("HMSET", "OK", j.hmset(k, mapOf("zip", "75001", "name", "A.")));
        eq("HGET after HMSET", "A.", j.hget(k, "name"));
        eq("HSETNX existing", 0L, j.hsetnx(k, "name", "Bob"));
        eq("HSETNX new", 1L, j.hsetnx(k, "nick", "al"));
        eq("HGET after HSETNX", "A.", j.hget(k, "name"));
        eq("HSTRLEN", 2L, j.hstrlen(k, "nick"));
        eq("HDEL all fields", 7L, j.hdel(k, "name", "email", "age", "city", "balance", "zip", "nick"));
        eq("EXISTS after deleting every field", false, j.exists(k));
        j.hset(k, "n", "x");
        JedisDataException e = dataError("HINCRBY on a non-integer", () -> j.hincrBy(k, "n", 1));
        eq("HINCRBY on a non-integer message", "ERR hash value is not an integer", e.getMessage());
      }
    });

    CASES.put("lists", () -> {
      try (Jedis j = conn()) {
        String k = "lists:l";
        eq("RPUSH", 3L, j.rpush(k, "a", "b", "c"));
        eq("LPUSH (reverses)", 5L, j.lpush(k, "y", "z"));
        eq("LRANGE all", Arrays.asList("z", "y", "a", "b", "c"), j.lrange(k, 0, -1));
        eq("LRANGE 1 2", Arrays.asList("y", "a"), j.lrange(k, 1, 2));
        eq("LRANGE -2 -1", Arrays.asList("b", "c"), j.lrange(k, -2, -1));
        eq("LRANGE out of range", Arrays.asList(), j.lrange(k, 10, 20));
        eq("LRANGE missing", Arrays.asList(), j.lrange("lists:missing", 0, -1));
        eq("LLEN", 5L, j.llen(k));
        eq("LLEN missing", 0L, j.llen("lists:missing"));
        eq("LINDEX 0", "z", j.lindex(k, 0));
        eq("LINDEX -1", "c", j.lindex(k, -1));
        eq("LINDEX out of range", null, j.lindex(k, 99));
        eq("LPOP", "z", j.lpop(k));
        eq("RPOP", "c", j.rpop(k));
        eq("LRANGE after pops", Arrays.asList("y", "a", "b"), j.lrange(k, 0, -1));
        j.rpush(k, "d", "e", "f");
        eq("LPOP count 2", Arrays.asList("y", "a"), j.lpop(k, 2));
        eq("RPOP count 2", Arrays.asList("f", "e"), j.rpop(k, 2));
        eq("LPOP count past the length", Arrays.asList("b", "d"), j.lpop(k, 10));
        eq("EXISTS emptied list", false, j.exists(k));
        eq("LPOP missing", null, j.lpop(k));
        eq("RPOP missing", null, j.rpop(k));
        eq("LPOP count on missing", null, j.lpop(k, 3));

        String r = "lists:rem";
        j.rpush(r, "x", "a", "x", "b", "x", "c", "x");
        eq("LREM 2 from head", 2L, j.lrem(r, 2, "x"));
        eq("LRANGE after LREM 2", Arrays.asList("a", "b", "x", "c", "x"), j.lrange(r, 0, -1));
        eq("LREM -1 from tail", 1L, j.lrem(r, -1, "x"));
        eq("LRANGE after LREM -1", Arrays.asList("a", "b", "x", "c"), j.lrange(r, 0, -1));
        eq("LREM 0 all", 1L, j.lrem(r, 0, "x"));
        eq("LREM missing value", 0L, j.lrem(r, 0, "nope"));
        eq("LRANGE after LREM 0", Arrays.asList("a", "b", "c"), j.lrange(r, 0, -1));
        eq("LSET", "OK", j.lset(r, 1, "B"));
        eq("LSET negative index", "OK", j.lset(r, -1, "C"));
        eq("LRANGE after LSET", Arrays.asList("a", "B", "C"), j.lrange(r, 0, -1));
        JedisDataException e = dataError("LSET out of range", () -> j.lset(r, 10, "x"));
        eq("LSET out of range message", "ERR index out of range", e.getMessage());

        String t = "lists:trim";
        for (int i = 0; i < 10; i++) {
          j.rpush(t, "i" + i);
        }
        eq("LTRIM", "OK", j.ltrim(t, 2, 5));
        eq("LRANGE after LTRIM", Arrays.asList("i2", "i3", "i4", "i5"), j.lrange(t, 0, -1));
        eq("LTRIM negative", "OK", j.ltrim(t, -2, -1));
        eq("LRANGE after LTRIM -2 -1", Arrays.asList("i4", "i5"), j.lrange(t, 0, -1));
        eq("LTRIM to empty", "OK", j.ltrim(t, 5, 1));
        eq("EXISTS after LTRIM to empty", false, j.exists(t));
        eq("LPUSHX on missing", 0L, j.lpushx("lists:nox", "v"));
        eq("RPUSHX on existing", 4L, j.rpushx(r, "d"));
        eq("LRANGE after RPUSHX", Arrays.asList("a", "B", "C", "d"), j.lrange(r, 0, -1));
      }
    });

    CASES.put("lists_rpoplpush", () -> {
      try (Jedis j = conn()) {
        String src = "lists_rpoplpush:src";
        String dst = "lists_rpoplpush:dst";
        j.rpush(src, "a", "b", "c");
        eq("RPOPLPUSH", "c", j.rpoplpush(src, dst));
        eq("RPOPLPUSH again", "b", j.rpoplpush(src, dst));
        eq("LRANGE source", Arrays.asList("a"), j.lrange(src, 0, -1));
        eq("LRANGE target", Arrays.asList("b", "c"), j.lrange(dst, 0, -1));
        eq("RPOPLPUSH rotate one list", "c", j.rpoplpush(dst, dst));
        eq("LRANGE rotated", Arrays.asList("c", "b"), j.lrange(dst, 0, -1));
        eq("RPOPLPUSH missing source", null, j.rpoplpush("lists_rpoplpush:none", dst));
      }
    });

    CASES.put("lists_lmove", () -> {
      try (Jedis j = conn()) {
        String src = "lists_lmove:src";
        String dst = "lists_lmove:dst";
        j.rpush(src, "a", "b", "c");
        eq("LMOVE LEFT RIGHT", "a", j.lmove(src, dst, ListDirection.LEFT, ListDirection.RIGHT));
        eq("LMOVE RIGHT LEFT", "c", j.lmove(src, dst, ListDirection.RIGHT, ListDirection.LEFT));
        eq("LRANGE source", Arrays.asList("b"), j.lrange(src, 0, -1));
        eq("LRANGE target", Arrays.asList("c", "a"), j.lrange(dst, 0, -1));
        eq("LMOVE missing source", null,
            j.lmove("lists_lmove:none", dst, ListDirection.LEFT, ListDirection.LEFT));
      }
    });

    CASES.put("sets", () -> {
      try (Jedis j = conn()) {
        String a = "sets:a";
        String b = "sets:b";
        eq("SADD", 4L, j.sadd(a, "1", "2", "3", "4"));
        eq("SADD with duplicates", 1L, j.sadd(a, "4", "5", "5"));
        eq("SADD other", 4L, j.sadd(b, "4", "5", "6", "7"));
        sameSet("SMEMBERS", setOf("1", "2", "3", "4", "5"), j.smembers(a));
        eq("SMEMBERS missing", new HashSet<String>(), j.smembers("sets:missing"));
        eq("SCARD", 5L, j.scard(a));
        eq("SCARD missing", 0L, j.scard("sets:missing"));
        eq("SISMEMBER", true, j.sismember(a, "3"));
        eq("SISMEMBER not", false, j.sismember(a, "9"));
        eq("SMISMEMBER", Arrays.asList(true, false, true), j.smismember(a, "1", "9", "5"));
        eq("SREM (one missing)", 2L, j.srem(a, "1", "2", "nope"));
        sameSet("SMEMBERS after SREM", setOf("3", "4", "5"), j.smembers(a));
        sameSet("SINTER", setOf("4", "5"), j.sinter(a, b));
        sameSet("SUNION", setOf("3", "4", "5", "6", "7"), j.sunion(a, b));
        sameSet("SDIFF a b", setOf("3"), j.sdiff(a, b));
        sameSet("SDIFF b a", setOf("6", "7"), j.sdiff(b, a));
        sameSet("SINTER with a missing key", setOf(), j.sinter(a, "sets:missing"));
        eq("SINTERSTORE", 2L, j.sinterstore("sets:dst", a, b));
        sameSet("SMEMBERS of SINTERSTORE dst", setOf("4", "5"), j.smembers("sets:dst"));
        eq("SUNIONSTORE", 5L, j.sunionstore("sets:u", a, b));
        eq("SDIFFSTORE", 1L, j.sdiffstore("sets:d", a, b));
        sameSet("SMEMBERS of SDIFFSTORE dst", setOf("3"), j.smembers("sets:d"));
        eq("SINTERSTORE empty result", 0L, j.sinterstore("sets:dst", a, "sets:missing"));
        eq("SINTERSTORE empty deletes dst", false, j.exists("sets:dst"));
        String p = j.spop("sets:d");
        eq("SPOP", "3", p);
        eq("EXISTS after popping the last member", false, j.exists("sets:d"));
        String rm = j.srandmember(b);
        check("SRANDMEMBER is a member", setOf("4", "5", "6", "7").contains(rm), rm);
      }
    });

    CASES.put("sorted_sets", () -> {
      try (Jedis j = conn()) {
        String k = "sorted_sets:z";
        Map<String, Double> m = new HashMap<>();
        m.put("a", 1.0);
        m.put("b", 2.0);
        m.put("c", 3.0);
        m.put("d", 4.0);
        m.put("e", 5.5);
        eq("ZADD map", 5L, j.zadd(k, m));
        eq("ZADD existing member (score update)", 0L, j.zadd(k, 2.5, "b"));
        eq("ZCARD", 5L, j.zcard(k));
        eq("ZSCORE", 2.5, j.zscore(k, "b"));
        eq("ZSCORE missing", null, j.zscore(k, "nope"));
        eq("ZMSCORE", Arrays.asList(1.0, null, 5.5), j.zmscore(k, "a", "nope", "e"));
        eq("ZRANGE", Arrays.asList("a", "b", "c", "d", "e"), j.zrange(k, 0, -1));
        eq("ZRANGE WITHSCORES",
            Arrays.asList(new Tuple("a", 1.0), new Tuple("b", 2.5), new Tuple("c", 3.0),
                new Tuple("d", 4.0), new Tuple("e", 5.5)),
            j.zrangeWithScores(k, 0, -1));
        eq("ZREVRANGE 0 2", Arrays.asList("e", "d", "c"), j.zrevrange(k, 0, 2));
        eq("ZREVRANGE WITHSCORES 0 1", Arrays.asList(new Tuple("e", 5.5), new Tuple("d", 4.0)),
            j.zrevrangeWithScores(k, 0, 1));
        eq("ZRANGEBYSCORE 2 4", Arrays.asList("b", "c", "d"), j.zrangeByScore(k, 2, 4));
        eq("ZRANGEBYSCORE offset 1 count 2", Arrays.asList("b", "c"),
            j.zrangeByScore(k, 0, 10, 1, 2));
        eq("ZRANGEBYSCORE exclusive / inf", Arrays.asList("c", "d", "e"),
            j.zrangeByScore(k, "(2.5", "+inf"));
        eq("ZRANGEBYSCORE WITHSCORES offset/count",
            Arrays.asList(new Tuple("d", 4.0)), j.zrangeByScoreWithScores(k, 3, 6, 1, 1));
        eq("ZREVRANGEBYSCORE", Arrays.asList("d", "c", "b"), j.zrevrangeByScore(k, 4, 2));
        eq("ZINCRBY", 4.5, j.zincrby(k, 3.5, "a"));
        eq("ZINCRBY new member", -1.0, j.zincrby(k, -1.0, "f"));
        eq("ZRANK", 0L, j.zrank(k, "f"));
        eq("ZRANK moved member", 4L, j.zrank(k, "a"));
        eq("ZRANK missing", null, j.zrank(k, "nope"));
        eq("ZREVRANK", 0L, j.zrevrank(k, "e"));
        eq("ZREVRANK missing", null, j.zrevrank(k, "nope"));
        eq("ZCOUNT 2.5 4.5", 4L, j.zcount(k, 2.5, 4.5));
        eq("ZCOUNT exclusive", 2L, j.zcount(k, "(2.5", "(4.5"));
        eq("ZCOUNT -inf +inf", 6L, j.zcount(k, "-inf", "+inf"));
        eq("ZPOPMIN", new Tuple("f", -1.0), j.zpopmin(k));
        eq("ZPOPMAX", new Tuple("e", 5.5), j.zpopmax(k));
        eq("ZPOPMIN 2", Arrays.asList(new Tuple("b", 2.5), new Tuple("c", 3.0)), j.zpopmin(k, 2));
        eq("ZRANGE after pops", Arrays.asList(new Tuple("d", 4.0), new Tuple("a", 4.5)),
            j.zrangeWithScores(k, 0, -1));
        eq("ZPOPMAX 5 (more than there are)",
            Arrays.asList(new Tuple("a", 4.5), new Tuple("d", 4.0)), j.zpopmax(k, 5));
        eq("EXISTS after popping everything", false, j.exists(k));
        eq("ZPOPMIN missing", null, j.zpopmin(k));

        String r = "sorted_sets:r";
        for (int i = 0; i < 10; i++) {
          j.zadd(r, i, "m" + i);
        }
        eq("ZREM (one missing)", 2L, j.zrem(r, "m0", "m9", "nope"));
        eq("ZCARD after ZREM", 8L, j.zcard(r));
        eq("ZREMRANGEBYSCORE 2 4", 3L, j.zremrangeByScore(r, 2, 4));
        eq("ZRANGE after ZREMRANGEBYSCORE", Arrays.asList("m1", "m5", "m6", "m7", "m8"),
            j.zrange(r, 0, -1));
        eq("ZREMRANGEBYSCORE (7 +inf", 1L, j.zremrangeByScore(r, "(7", "+inf"));
        eq("ZREMRANGEBYRANK 0 0", 1L, j.zremrangeByRank(r, 0, 0));
        eq("ZRANGE after ZREMRANGEBYRANK", Arrays.asList("m5", "m6", "m7"), j.zrange(r, 0, -1));

        // Equal scores are ordered by member.
        String t = "sorted_sets:ties";
        j.zadd(t, 1, "zeta");
        j.zadd(t, 1, "alpha");
        j.zadd(t, 1, "mid");
        eq("ZRANGE ties by member", Arrays.asList("alpha", "mid", "zeta"), j.zrange(t, 0, -1));
        eq("ZADD -inf", 1L, j.zadd(t, Double.NEGATIVE_INFINITY, "low"));
        eq("ZSCORE -inf", Double.NEGATIVE_INFINITY, j.zscore(t, "low"));
        eq("ZADD fractional", 1L, j.zadd(t, 0.1, "tenth"));
        eq("ZSCORE fractional", 0.1, j.zscore(t, "tenth"));
      }
    });

    CASES.put("zrange_params", () -> {
      // The Redis 6.2+ unified ZRANGE (what zrevrange/zrangeByScore are deprecated for).
      try (Jedis j = conn()) {
        String k = "zrange_params:z";
        for (int i = 1; i <= 6; i++) {
          j.zadd(k, i, "m" + i);
        }
        eq("ZRANGE 0 -1 REV", Arrays.asList("m6", "m5", "m4", "m3", "m2", "m1"),
            j.zrange(k, ZRangeParams.zrangeParams(0, -1).rev()));
        eq("ZRANGE BYSCORE 2 5", Arrays.asList("m2", "m3", "m4", "m5"),
            j.zrange(k, ZRangeParams.zrangeByScoreParams(2, 5)));
        eq("ZRANGE BYSCORE 2 5 LIMIT 1 2", Arrays.asList("m3", "m4"),
            j.zrange(k, ZRangeParams.zrangeByScoreParams(2, 5).limit(1, 2)));
        eq("ZRANGE BYSCORE 5 2 REV", Arrays.asList("m5", "m4", "m3", "m2"),
            j.zrange(k, ZRangeParams.zrangeByScoreParams(5, 2).rev()));
        eq("ZRANGE BYSCORE REV LIMIT WITHSCORES", Arrays.asList(new Tuple("m4", 4.0)),
            j.zrangeWithScores(k, ZRangeParams.zrangeByScoreParams(5, 2).rev().limit(1, 1)));
      }
    });

    CASES.put("zrangestore", () -> {
      try (Jedis j = conn()) {
        String k = "zrangestore:z";
        for (int i = 1; i <= 6; i++) {
          j.zadd(k, i, "m" + i);
        }
        eq("ZRANGESTORE BYSCORE", 3L,
            j.zrangestore("zrangestore:dst", k, ZRangeParams.zrangeByScoreParams(1, 3)));
        eq("ZRANGE of ZRANGESTORE dst", Arrays.asList("m1", "m2", "m3"),
            j.zrange("zrangestore:dst", 0, -1));
      }
    });

    CASES.put("zadd_params", () -> {
      try (Jedis j = conn()) {
        String k = "zadd_params:z";
        j.zadd(k, 10, "m");
        eq("ZADD NX existing", 0L, j.zadd(k, 99, "m", ZAddParams.zAddParams().nx()));
        eq("score after ZADD NX existing", 10.0, j.zscore(k, "m"));
        eq("ZADD NX new", 1L, j.zadd(k, 5, "n", ZAddParams.zAddParams().nx()));
        eq("ZADD XX missing", 0L, j.zadd(k, 7, "x", ZAddParams.zAddParams().xx()));
        eq("ZSCORE after ZADD XX missing", null, j.zscore(k, "x"));
        eq("ZADD XX existing (no CH: 0)", 0L, j.zadd(k, 11, "m", ZAddParams.zAddParams().xx()));
        eq("score after ZADD XX", 11.0, j.zscore(k, "m"));
        eq("ZADD XX CH existing", 1L, j.zadd(k, 12, "m", ZAddParams.zAddParams().xx().ch()));
        eq("ZADD GT lower", 0L, j.zadd(k, 1, "m", ZAddParams.zAddParams().gt().ch()));
        eq("score after ZADD GT lower", 12.0, j.zscore(k, "m"));
        eq("ZADD GT higher CH", 1L, j.zadd(k, 20, "m", ZAddParams.zAddParams().gt().ch()));
        eq("score after ZADD GT higher", 20.0, j.zscore(k, "m"));
        eq("ZADD LT higher", 0L, j.zadd(k, 50, "n", ZAddParams.zAddParams().lt().ch()));
        eq("score after ZADD LT higher", 5.0, j.zscore(k, "n"));
        eq("ZADD LT lower CH", 1L, j.zadd(k, 2, "n", ZAddParams.zAddParams().lt().ch()));
        eq("score after ZADD LT lower", 2.0, j.zscore(k, "n"));
        eq("ZADD GT on a new member adds it", 1L, j.zadd(k, 3, "g", ZAddParams.zAddParams().gt()));
        Map<String, Double> mm = new HashMap<>();
        mm.put("m", 25.0);
        mm.put("n", 25.0);
        mm.put("o", 25.0);
        eq("ZADD map CH counts added+changed", 3L, j.zadd(k, mm, ZAddParams.zAddParams().ch()));
        Map<String, Double> mm2 = new HashMap<>();
        mm2.put("m", 1.0);
        mm2.put("n", 30.0);
        mm2.put("p", 30.0);
        eq("ZADD map GT CH", 2L, j.zadd(k, mm2, ZAddParams.zAddParams().gt().ch()));
        eq("ZRANGE WITHSCORES after ZADD params",
            Arrays.asList(new Tuple("g", 3.0), new Tuple("m", 25.0), new Tuple("o", 25.0),
                new Tuple("n", 30.0), new Tuple("p", 30.0)),
            j.zrangeWithScores(k, 0, -1));
        eq("ZADD INCR", 33.0, j.zaddIncr(k, 3, "n", ZAddParams.zAddParams()));
        eq("ZADD INCR NX existing gives null", null, j.zaddIncr(k, 3, "n", ZAddParams.zAddParams().nx()));
        JedisDataException e = dataError("ZADD GT NX",
            () -> j.zadd(k, 1, "m", ZAddParams.zAddParams().gt().nx()));
        check("ZADD GT NX message starts with ERR", e.getMessage().startsWith("ERR"), e.getMessage());
      }
    });

    CASES.put("pipeline_1000", () -> {
      try (Jedis j = conn()) {
        List<Response<String>> sets = new ArrayList<>();
        List<Response<Long>> incrs = new ArrayList<>();
        List<Response<String>> gets = new ArrayList<>();
        List<Response<Long>> pushes = new ArrayList<>();
        Response<List<String>> range;
        Response<Long> llen;
        Response<String> missing;
        Response<Map<String, String>> hall;
        try (Pipeline p = j.pipelined()) {
          // 250 SET + 250 INCR + 250 GET + 245 RPUSH + HSET, HGETALL, LRANGE, LLEN, GET = 1000.
          for (int i = 0; i < 250; i++) {
            sets.add(p.set("pipeline_1000:s:" + i, "v" + i));
          }
          for (int i = 0; i < 250; i++) {
            incrs.add(p.incr("pipeline_1000:counter"));
          }
          for (int i = 0; i < 250; i++) {
            gets.add(p.get("pipeline_1000:s:" + i));
          }
          for (int i = 0; i < 245; i++) {
            pushes.add(p.rpush("pipeline_1000:list", "e" + i));
          }
          p.hset("pipeline_1000:h", mapOf("a", "1", "b", "2"));
          hall = p.hgetAll("pipeline_1000:h");
          range = p.lrange("pipeline_1000:list", 0, 2);
          llen = p.llen("pipeline_1000:list");
          missing = p.get("pipeline_1000:missing");
          p.sync();
        }
        for (int i = 0; i < 250; i++) {
          eq("pipelined SET #" + i, "OK", sets.get(i).get());
          eq("pipelined INCR #" + i, (long) (i + 1), incrs.get(i).get());
          eq("pipelined GET #" + i, "v" + i, gets.get(i).get());
        }
        for (int i = 0; i < 245; i++) {
          eq("pipelined RPUSH #" + i, (long) (i + 1), pushes.get(i).get());
        }
        eq("pipelined HGETALL", mapOf("a", "1", "b", "2"), hall.get());
        eq("pipelined LRANGE", Arrays.asList("e0", "e1", "e2"), range.get());
        eq("pipelined LLEN", 245L, llen.get());
        eq("pipelined GET missing", null, missing.get());
        eq("GET after pipeline", "250", j.get("pipeline_1000:counter"));

        // An error inside a pipeline surfaces on its own Response only.
        Response<Long> bad;
        Response<String> after;
        try (Pipeline p = j.pipelined()) {
          p.set("pipeline_1000:str", "abc");
          bad = p.incr("pipeline_1000:str");
          after = p.get("pipeline_1000:str");
          p.sync();
        }
        final Response<Long> badf = bad;
        JedisDataException e = dataError("pipelined INCR on a string", badf::get);
        eq("pipelined error message", "ERR value is not an integer or out of range", e.getMessage());
        eq("pipelined GET after the error", "abc", after.get());
        eq("connection usable after pipeline", "PONG", j.ping());
      }
    });

    CASES.put("transaction", () -> {
      try (Jedis j = conn()) {
        Transaction t = j.multi();
        Response<String> s = t.set("transaction:a", "1");
        Response<Long> i = t.incr("transaction:a");
        Response<Long> i2 = t.incrBy("transaction:a", 10);
        Response<String> g = t.get("transaction:a");
        Response<Long> push = t.rpush("transaction:l", "x", "y");
        Response<List<String>> lr = t.lrange("transaction:l", 0, -1);
        List<Object> res = t.exec();
        eq("EXEC result size", 6, res == null ? null : res.size());
        eq("EXEC raw [0]", "OK", res.get(0));
        eq("EXEC raw [1]", 2L, res.get(1));
        eq("Response SET", "OK", s.get());
        eq("Response INCR", 2L, i.get());
        eq("Response INCRBY", 12L, i2.get());
        eq("Response GET", "12", g.get());
        eq("Response RPUSH", 2L, push.get());
        eq("Response LRANGE", Arrays.asList("x", "y"), lr.get());
        eq("GET after EXEC", "12", j.get("transaction:a"));

        // DISCARD throws the queued commands away.
        Transaction d = j.multi();
        d.set("transaction:discarded", "x");
        eq("DISCARD", "OK", d.discard());
        eq("GET after DISCARD", null, j.get("transaction:discarded"));

        // A command failing at run time fails alone; the others are applied.
        j.set("transaction:str", "abc");
        Transaction e = j.multi();
        Response<Long> bad = e.incr("transaction:str");
        Response<String> ok = e.set("transaction:b", "2");
        List<Object> res2 = e.exec();
        eq("EXEC with a runtime error: size", 2, res2.size());
        check("EXEC with a runtime error: [0] is the error", res2.get(0) instanceof JedisDataException,
            res2.get(0));
        JedisDataException be = dataError("Response of the failed INCR", bad::get);
        eq("failed INCR message", "ERR value is not an integer or out of range", be.getMessage());
        eq("Response of the SET after the error", "OK", ok.get());
        eq("GET of the key set after the error", "2", j.get("transaction:b"));
        eq("connection usable after transactions", "PONG", j.ping());
      }
    });

    CASES.put("watch_conflict", () -> {
      try (Jedis j = conn(); Jedis other = conn()) {
        String k = "watch_conflict:k";
        j.set(k, "1");
        eq("WATCH", "OK", j.watch(k));
        eq("other connection SET", "OK", other.set(k, "changed"));
        Transaction t = j.multi();
        t.set(k, "from-tx");
        t.incr("watch_conflict:side");
        List<Object> res = t.exec();
        eq("EXEC after a watched key changed", null, res);
        eq("GET keeps the other connection's write", "changed", j.get(k));
        eq("side effect not applied", null, j.get("watch_conflict:side"));

        // Without interference the same sequence commits.
        eq("WATCH again", "OK", j.watch(k));
        Transaction t2 = j.multi();
        t2.set(k, "from-tx");
        List<Object> res2 = t2.exec();
        eq("EXEC without interference", Arrays.asList((Object) "OK"), res2);
        eq("GET after committed tx", "from-tx", j.get(k));

        // UNWATCH forgets the watch.
        j.watch(k);
        other.set(k, "again");
        eq("UNWATCH", "OK", j.unwatch());
        Transaction t3 = j.multi();
        t3.set(k, "after-unwatch");
        eq("EXEC after UNWATCH", Arrays.asList((Object) "OK"), t3.exec());
        eq("GET after UNWATCH tx", "after-unwatch", j.get(k));

        // Watching a missing key that another connection creates.
        String m = "watch_conflict:missing";
        j.watch(m);
        other.set(m, "created");
        Transaction t4 = j.multi();
        t4.set(m, "tx");
        eq("EXEC after a watched missing key was created", null, t4.exec());
        eq("GET created key", "created", j.get(m));
      }
    });

    CASES.put("scan", () -> {
      try (Jedis j = conn()) {
        Set<String> expected = new HashSet<>();
        Set<String> hashes = new HashSet<>();
        try (Pipeline p = j.pipelined()) {
          for (int i = 0; i < 250; i++) {
            String key = "scan:str:" + i;
            expected.add(key);
            p.set(key, "v");
          }
          for (int i = 0; i < 30; i++) {
            String key = "scan:hash:" + i;
            hashes.add(key);
            p.hset(key, "f", "v");
          }
          p.sync();
        }
        ScanParams params = new ScanParams().match("scan:str:*").count(25);
        List<String> seen = new ArrayList<>();
        String cursor = ScanParams.SCAN_POINTER_START;
        int rounds = 0;
        do {
          ScanResult<String> r = j.scan(cursor, params);
          seen.addAll(r.getResult());
          cursor = r.getCursor();
          rounds++;
          check("SCAN terminates within 10000 rounds", rounds < 10000, rounds);
        } while (!cursor.equals(ScanParams.SCAN_POINTER_START));
        sameSet("SCAN MATCH collects all 250 keys", expected, new HashSet<>(seen));

        // TYPE filter (Redis 6+).
        Set<String> seenStr = new HashSet<>();
        Set<String> seenHash = new HashSet<>();
        ScanParams all = new ScanParams().match("scan:*").count(50);
        cursor = ScanParams.SCAN_POINTER_START;
        rounds = 0;
        do {
          ScanResult<String> r = j.scan(cursor, all, "string");
          seenStr.addAll(r.getResult());
          cursor = r.getCursor();
          check("SCAN TYPE terminates", ++rounds < 10000, rounds);
        } while (!cursor.equals(ScanParams.SCAN_POINTER_START));
        sameSet("SCAN MATCH TYPE string", expected, seenStr);
        cursor = ScanParams.SCAN_POINTER_START;
        rounds = 0;
        do {
          ScanResult<String> r = j.scan(cursor, all, "hash");
          seenHash.addAll(r.getResult());
          cursor = r.getCursor();
          check("SCAN TYPE hash terminates", ++rounds < 10000, rounds);
        } while (!cursor.equals(ScanParams.SCAN_POINTER_START));
        sameSet("SCAN MATCH TYPE hash", hashes, seenHash);

        // Binary SCAN API too.
        Set<String> seenBin = new HashSet<>();
        byte[] bcur = ScanParams.SCAN_POINTER_START_BINARY;
        ScanParams bparams = new ScanParams().match("scan:hash:*".getBytes(StandardCharsets.UTF_8))
            .count(7);
        rounds = 0;
        do {
          ScanResult<byte[]> r = j.scan(bcur, bparams);
          for (byte[] b : r.getResult()) {
            seenBin.add(new String(b, StandardCharsets.UTF_8));
          }
          bcur = r.getCursorAsBytes();
          check("binary SCAN terminates", ++rounds < 10000, rounds);
        } while (!Arrays.equals(bcur, ScanParams.SCAN_POINTER_START_BINARY));
        sameSet("binary SCAN MATCH", hashes, seenBin);

      }
    });

    CASES.put("hscan", () -> {
      try (Jedis j = conn()) {
        String cursor;
        int rounds;
        Map<String, String> h = new HashMap<>();
        for (int i = 0; i < 120; i++) {
          h.put("f" + i, "v" + i);
        }
        j.hset("hscan:bighash", h);
        Map<String, String> hs = new HashMap<>();
        cursor = ScanParams.SCAN_POINTER_START;
        rounds = 0;
        do {
          ScanResult<Map.Entry<String, String>> r =
              j.hscan("hscan:bighash", cursor, new ScanParams().count(10));
          for (Map.Entry<String, String> e : r.getResult()) {
            hs.put(e.getKey(), e.getValue());
          }
          cursor = r.getCursor();
          check("HSCAN terminates", ++rounds < 10000, rounds);
        } while (!cursor.equals(ScanParams.SCAN_POINTER_START));
        eq("HSCAN collects the hash", h, hs);
      }
    });

    CASES.put("sscan", () -> {
      try (Jedis j = conn()) {
        String cursor;
        int rounds;
        Set<String> members = new HashSet<>();
        for (int i = 0; i < 150; i++) {
          members.add("m" + i);
        }
        j.sadd("sscan:bigset", members.toArray(new String[0]));
        Set<String> ss = new HashSet<>();
        cursor = ScanParams.SCAN_POINTER_START;
        rounds = 0;
        do {
          ScanResult<String> r = j.sscan("sscan:bigset", cursor, new ScanParams().count(10));
          ss.addAll(r.getResult());
          cursor = r.getCursor();
          check("SSCAN terminates", ++rounds < 10000, rounds);
        } while (!cursor.equals(ScanParams.SCAN_POINTER_START));
        sameSet("SSCAN collects the set", members, ss);
      }
    });

    CASES.put("zscan", () -> {
      try (Jedis j = conn()) {
        String cursor;
        int rounds;
        Map<String, Double> zm = new HashMap<>();
        for (int i = 0; i < 140; i++) {
          zm.put("z" + i, (double) i);
        }
        j.zadd("zscan:bigzset", zm);
        Map<String, Double> zs = new HashMap<>();
        cursor = ScanParams.SCAN_POINTER_START;
        rounds = 0;
        do {
          ScanResult<Tuple> r = j.zscan("zscan:bigzset", cursor, new ScanParams().match("z1*").count(10));
          for (Tuple t : r.getResult()) {
            zs.put(t.getElement(), t.getScore());
          }
          cursor = r.getCursor();
          check("ZSCAN terminates", ++rounds < 10000, rounds);
        } while (!cursor.equals(ScanParams.SCAN_POINTER_START));
        Map<String, Double> zexp = new HashMap<>();
        for (Map.Entry<String, Double> e : zm.entrySet()) {
          if (e.getKey().startsWith("z1")) {
            zexp.put(e.getKey(), e.getValue());
          }
        }
        eq("ZSCAN MATCH collects the members with scores", zexp, zs);
      }
    });

    CASES.put("jedis_pool_threads", () -> {
      GenericObjectPoolConfig<Jedis> pc = new GenericObjectPoolConfig<>();
      pc.setMaxTotal(20);
      pc.setMaxIdle(20);
      pc.setMaxWait(java.time.Duration.ofSeconds(5));
      try (JedisPool pool = new JedisPool(pc, hp(), resp2Config())) {
        String k = "jedis_pool_threads:counter";
        ExecutorService ex = Executors.newFixedThreadPool(20);
        try {
          List<Future<Long>> fs = new ArrayList<>();
          for (int t = 0; t < 20; t++) {
            fs.add(ex.submit(() -> {
              long last = 0;
              for (int i = 0; i < 200; i++) {
                try (Jedis j = pool.getResource()) {
                  last = j.incr(k);
                }
              }
              return last;
            }));
          }
          for (Future<Long> f : fs) {
            long last = f.get(45, TimeUnit.SECONDS);
            check("each INCR result in 1..4000", last >= 1 && last <= 4000, last);
          }
        } finally {
          ex.shutdownNow();
        }
        try (Jedis j = pool.getResource()) {
          eq("counter after 20 threads x 200 INCR", "4000", j.get(k));
        }
        check("pool created no more than 20 connections", pool.getCreatedCount() <= 20,
            pool.getCreatedCount());
      }
    });

    CASES.put("redis_client_pooled_threads", () -> {
      // RedisClient is Jedis 7+/8's pooled client (the successor of JedisPooled). With no protocol
      // set in its config it negotiates RESP3 (HELLO 3) on each pooled connection, unlike Jedis.
      GenericObjectPoolConfig<Connection> pc = new GenericObjectPoolConfig<>();
      pc.setMaxTotal(20);
      pc.setMaxIdle(20);
      pc.setMaxWait(java.time.Duration.ofSeconds(5));
      try (RedisClient rc = RedisClient.builder().hostAndPort(hp()).clientConfig(resp2Config())
          .poolConfig(pc).build()) {
        String k = "redis_client_pooled_threads:counter";
        ExecutorService ex = Executors.newFixedThreadPool(20);
        try {
          List<Future<?>> fs = new ArrayList<>();
          for (int t = 0; t < 20; t++) {
            fs.add(ex.submit(() -> {
              for (int i = 0; i < 200; i++) {
                rc.incr(k);
              }
              return null;
            }));
          }
          for (Future<?> f : fs) {
            f.get(45, TimeUnit.SECONDS);
          }
        } finally {
          ex.shutdownNow();
        }
        eq("counter after 20 threads x 200 INCR", "4000", rc.get(k));
        eq("RedisClient SET", "OK", rc.set("redis_client_pooled_threads:s", "v"));
        eq("RedisClient HSET/HGETALL", mapOf("a", "b"), hsetThenGetAll(rc));
        try (redis.clients.jedis.AbstractPipeline p = rc.pipelined()) {
          Response<Long> r1 = p.incr(k);
          Response<String> r2 = p.get(k);
          p.sync();
          eq("RedisClient pipeline INCR", 4001L, r1.get());
          eq("RedisClient pipeline GET", "4001", r2.get());
        }
      }
    });

    CASES.put("select_db", () -> {
      try (Jedis j0 = conn(); Jedis j3 = conn()) {
        eq("SELECT 3", "OK", j3.select(3));
        eq("getDB", 3, j3.getDB());
        j3.flushDB();
        j0.set("select_db:shared", "db0");
        j0.set("select_db:only0", "x");
        eq("SET in db 3", "OK", j3.set("select_db:shared", "db3"));
        j3.set("select_db:only3", "y");
        eq("GET in db 3", "db3", j3.get("select_db:shared"));
        eq("GET in db 0", "db0", j0.get("select_db:shared"));
        eq("db 3 does not see a db 0 key", false, j3.exists("select_db:only0"));
        eq("db 0 does not see a db 3 key", false, j0.exists("select_db:only3"));
        eq("KEYS * in db 3", setOf("select_db:shared", "select_db:only3"), j3.keys("*"));
        eq("DBSIZE in db 3", 2L, j3.dbSize());
        // A client config with database(3) selects it on connect.
        try (Jedis c3 = new Jedis(hp(), baseConfig().database(3).build())) {
          eq("GET through database(3) config", "db3", c3.get("select_db:shared"));
          eq("DBSIZE through database(3) config", 2L, c3.dbSize());
        }
        eq("SELECT 0 again", "OK", j3.select(0));
        eq("GET after SELECT 0", "db0", j3.get("select_db:shared"));
        JedisDataException e = dataError("SELECT out of range", () -> j3.select(10000));
        check("SELECT out of range message starts with ERR", e.getMessage().startsWith("ERR"),
            e.getMessage());
        try (Jedis c = conn()) {
          c.select(3);
          eq("FLUSHDB in db 3", "OK", c.flushDB());
          eq("DBSIZE of db 3 after FLUSHDB", 0L, c.dbSize());
        }
        eq("db 0 untouched by FLUSHDB of db 3", "db0", j0.get("select_db:shared"));
      }
    });

    CASES.put("error_wrongtype", () -> {
      try (Jedis j = conn()) {
        j.set("error_wrongtype:s", "v");
        j.rpush("error_wrongtype:l", "x");
        String want = "WRONGTYPE Operation against a key holding the wrong kind of value";
        JedisDataException e1 = dataError("LPUSH on a string", () -> j.lpush("error_wrongtype:s", "x"));
        check("LPUSH on a string: message starts with WRONGTYPE",
            e1.getMessage().startsWith("WRONGTYPE"), e1.getMessage());
        eq("LPUSH on a string: message", want, e1.getMessage());
        JedisDataException e2 = dataError("GET on a list", () -> j.get("error_wrongtype:l"));
        eq("GET on a list: message", want, e2.getMessage());
        JedisDataException e3 = dataError("HGET on a list", () -> j.hget("error_wrongtype:l", "f"));
        eq("HGET on a list: message", want, e3.getMessage());
        JedisDataException e4 = dataError("SADD on a list", () -> j.sadd("error_wrongtype:l", "m"));
        eq("SADD on a list: message", want, e4.getMessage());
        JedisDataException e5 = dataError("ZADD on a string", () -> j.zadd("error_wrongtype:s", 1, "m"));
        eq("ZADD on a string: message", want, e5.getMessage());
        JedisDataException e6 = dataError("INCR on a list", () -> j.incr("error_wrongtype:l"));
        eq("INCR on a list: message", want, e6.getMessage());
        eq("values untouched", "v", j.get("error_wrongtype:s"));
        eq("connection usable after errors", "PONG", j.ping());
      }
    });

    CASES.put("error_not_integer", () -> {
      try (Jedis j = conn()) {
        j.set("error_not_integer:s", "abc");
        String want = "ERR value is not an integer or out of range";
        JedisDataException e1 = dataError("INCR on a non-integer", () -> j.incr("error_not_integer:s"));
        eq("INCR message", want, e1.getMessage());
        JedisDataException e2 = dataError("INCRBY on a non-integer",
            () -> j.incrBy("error_not_integer:s", 5));
        eq("INCRBY message", want, e2.getMessage());
        JedisDataException e3 = dataError("DECR on a non-integer", () -> j.decr("error_not_integer:s"));
        eq("DECR message", want, e3.getMessage());
        j.set("error_not_integer:f", "1.5");
        JedisDataException e4 = dataError("INCR on a float", () -> j.incr("error_not_integer:f"));
        eq("INCR on a float message", want, e4.getMessage());
        JedisDataException e5 = dataError("INCRBYFLOAT on a non-number",
            () -> j.incrByFloat("error_not_integer:s", 1.0));
        eq("INCRBYFLOAT message", "ERR value is not a valid float", e5.getMessage());
        eq("value untouched", "abc", j.get("error_not_integer:s"));
        JedisDataException e6 = dataError("unknown command",
            () -> j.sendCommand(() -> "NOSUCHCOMMAND".getBytes(StandardCharsets.UTF_8)));
        check("unknown command message starts with ERR unknown command",
            e6.getMessage().startsWith("ERR unknown command"), e6.getMessage());
      }
    });

    CASES.put("client_name", () -> {
      try (Jedis j = conn()) {
        eq("CLIENT GETNAME unset", null, j.clientGetname());
        eq("CLIENT SETNAME", "OK", j.clientSetname("client_name-app"));
        eq("CLIENT GETNAME", "client_name-app", j.clientGetname());
        long id = j.clientId();
        check("CLIENT ID positive", id > 0, id);
        String list = j.clientList();
        check("CLIENT LIST names the connection", list.contains("name=client_name-app"), list);
        String info = j.clientInfo();
        check("CLIENT INFO names the connection", info.contains("name=client_name-app"), info);
        check("CLIENT INFO has our id", info.contains("id=" + id + " "), info);
      }
      try (Jedis j = new Jedis(hp(), baseConfig().clientName("client_name-config").build())) {
        eq("CLIENT GETNAME set through the config", "client_name-config", j.clientGetname());
      }
    });

    CASES.put("info_server", () -> {
      try (Jedis j = conn()) {
        String info = j.info("server");
        check("INFO server has # Server", info.contains("# Server"), info);
        check("INFO server has redis_version:7", info.contains("redis_version:7"), info);
        String all = j.info();
        check("INFO has redis_version", all.contains("redis_version:"), all.length());
        String keyspace = j.info("keyspace");
        check("INFO keyspace has # Keyspace", keyspace.contains("# Keyspace"), keyspace);
      }
    });

    CASES.put("flushdb_dbsize", () -> {
      try (Jedis j = conn()) {
        j.set("flushdb_dbsize:a", "1");
        j.rpush("flushdb_dbsize:l", "1");
        long before = j.dbSize();
        check("DBSIZE counts keys", before >= 2, before);
        eq("FLUSHDB", "OK", j.flushDB());
        eq("DBSIZE after FLUSHDB", 0L, j.dbSize());
        eq("GET after FLUSHDB", null, j.get("flushdb_dbsize:a"));
        eq("KEYS * after FLUSHDB", new HashSet<String>(), j.keys("*"));
        j.set("flushdb_dbsize:b", "1");
        eq("DBSIZE after one SET", 1L, j.dbSize());
        j.flushDB();
      }
    });

    // ---- RESP3: the same API over a connection that negotiated protocol 3 (HELLO 3).

    CASES.put("resp3_get_set", () -> {
      try (Jedis j = conn3()) {
        eq("RESP3 PING", "PONG", j.ping());
        eq("RESP3 SET", "OK", j.set("resp3_get_set:k", "v"));
        eq("RESP3 GET", "v", j.get("resp3_get_set:k"));
        eq("RESP3 GET missing", null, j.get("resp3_get_set:missing"));
        eq("RESP3 SET NX existing", null,
            j.set("resp3_get_set:k", "w", SetParams.setParams().nx()));
        eq("RESP3 INCR", 1L, j.incr("resp3_get_set:n"));
        near("RESP3 INCRBYFLOAT", 1.5, j.incrByFloat("resp3_get_set:n", 0.5), 0);
        eq("RESP3 MGET", Arrays.asList("v", null), j.mget("resp3_get_set:k", "resp3_get_set:missing"));
        eq("RESP3 EXISTS", true, j.exists("resp3_get_set:k"));
        eq("RESP3 TTL", -1L, j.ttl("resp3_get_set:k"));
        sameSet("RESP3 SMEMBERS", setOf(), j.smembers("resp3_get_set:noset"));
        j.sadd("resp3_get_set:set", "a", "b");
        sameSet("RESP3 SMEMBERS", setOf("a", "b"), j.smembers("resp3_get_set:set"));
        eq("RESP3 SMISMEMBER", Arrays.asList(true, false), j.smismember("resp3_get_set:set", "a", "z"));
        eq("RESP3 LPOP count", null, j.lpop("resp3_get_set:nolist", 2));
        JedisDataException e = dataError("RESP3 WRONGTYPE", () -> j.lpush("resp3_get_set:k", "x"));
        check("RESP3 WRONGTYPE message", e.getMessage().startsWith("WRONGTYPE"), e.getMessage());
        check("RESP3 INFO server", j.info("server").contains("redis_version:7"), "");
      }
    });

    CASES.put("resp3_hgetall", () -> {
      try (Jedis j = conn3()) {
        String k = "resp3_hgetall:h";
        eq("RESP3 HSET", 3L, j.hset(k, mapOf("a", "1", "b", "2", "c", "3")));
        eq("RESP3 HGETALL", mapOf("a", "1", "b", "2", "c", "3"), j.hgetAll(k));
        eq("RESP3 HGETALL missing", new HashMap<String, String>(), j.hgetAll("resp3_hgetall:none"));
        eq("RESP3 HMGET", Arrays.asList("1", null), j.hmget(k, "a", "z"));
        near("RESP3 HINCRBYFLOAT", 3.25, j.hincrByFloat(k, "c", 0.25), 0);
        sameSet("RESP3 HKEYS", setOf("a", "b", "c"), j.hkeys(k));
      }
    });

    CASES.put("resp3_zrange_with_scores", () -> {
      try (Jedis j = conn3()) {
        String k = "resp3_zrange_with_scores:z";
        Map<String, Double> m = new HashMap<>();
        m.put("a", 1.0);
        m.put("b", 2.5);
        m.put("c", -3.0);
        eq("RESP3 ZADD", 3L, j.zadd(k, m));
        eq("RESP3 ZRANGE WITHSCORES",
            Arrays.asList(new Tuple("c", -3.0), new Tuple("a", 1.0), new Tuple("b", 2.5)),
            j.zrangeWithScores(k, 0, -1));
        eq("RESP3 ZREVRANGE WITHSCORES", Arrays.asList(new Tuple("b", 2.5)),
            j.zrevrangeWithScores(k, 0, 0));
        eq("RESP3 ZRANGEBYSCORE WITHSCORES", Arrays.asList(new Tuple("a", 1.0), new Tuple("b", 2.5)),
            j.zrangeByScoreWithScores(k, 0, 10));
        eq("RESP3 ZSCORE", 2.5, j.zscore(k, "b"));
        eq("RESP3 ZMSCORE", Arrays.asList(2.5, null), j.zmscore(k, "b", "z"));
        eq("RESP3 ZINCRBY", 3.5, j.zincrby(k, 1.0, "b"));
        eq("RESP3 ZPOPMIN", new Tuple("c", -3.0), j.zpopmin(k));
        eq("RESP3 ZPOPMAX count", Arrays.asList(new Tuple("b", 3.5), new Tuple("a", 1.0)),
            j.zpopmax(k, 2));
      }
    });

    CASES.put("resp3_pipeline", () -> {
      try (Jedis j = conn3()) {
        List<Response<Long>> incrs = new ArrayList<>();
        Response<Map<String, String>> hall;
        Response<List<Tuple>> zr;
        Response<String> g;
        Response<Long> bad;
        try (Pipeline p = j.pipelined()) {
          for (int i = 0; i < 200; i++) {
            incrs.add(p.incr("resp3_pipeline:n"));
          }
          p.hset("resp3_pipeline:h", mapOf("x", "1", "y", "2"));
          hall = p.hgetAll("resp3_pipeline:h");
          p.zadd("resp3_pipeline:z", 2.0, "two");
          p.zadd("resp3_pipeline:z", 1.0, "one");
          zr = p.zrangeWithScores("resp3_pipeline:z", 0, -1);
          p.set("resp3_pipeline:s", "str");
          g = p.get("resp3_pipeline:s");
          bad = p.incr("resp3_pipeline:s");
          p.sync();
        }
        for (int i = 0; i < 200; i++) {
          eq("RESP3 pipelined INCR #" + i, (long) (i + 1), incrs.get(i).get());
        }
        eq("RESP3 pipelined HGETALL", mapOf("x", "1", "y", "2"), hall.get());
        eq("RESP3 pipelined ZRANGE WITHSCORES",
            Arrays.asList(new Tuple("one", 1.0), new Tuple("two", 2.0)), zr.get());
        eq("RESP3 pipelined GET", "str", g.get());
        final Response<Long> badf = bad;
        JedisDataException e = dataError("RESP3 pipelined INCR on a string", badf::get);
        eq("RESP3 pipelined error message", "ERR value is not an integer or out of range",
            e.getMessage());
        Transaction t = j.multi();
        Response<Long> ti = t.incr("resp3_pipeline:n");
        Response<Map<String, String>> th = t.hgetAll("resp3_pipeline:h");
        t.exec();
        eq("RESP3 transaction INCR", 201L, ti.get());
        eq("RESP3 transaction HGETALL", mapOf("x", "1", "y", "2"), th.get());
      }
    });
  }

  private static Map<String, String> hsetThenGetAll(RedisClient rc) {
    rc.hset("redis_client_pooled_threads:h", "a", "b");
    return rc.hgetAll("redis_client_pooled_threads:h");
  }

  // ---------------------------------------------------------------- main

  public static void main(String[] args) throws Exception {
    Set<String> only = new TreeSet<>();
    boolean verbose = false;
    for (String a : args) {
      if (a.equals("-v")) {
        verbose = true;
      } else {
        only.add(a);
      }
    }
    for (String name : only) {
      if (!CASES.containsKey(name)) {
        System.err.println("unknown case " + name);
        System.exit(2);
      }
    }
    try (Jedis j = conn()) {
      j.flushAll();
    } catch (Exception e) {
      System.out.println("not ok setup: FLUSHALL at " + HOST + ":" + PORT + " failed: "
          + e.getClass().getSimpleName() + ": " + e.getMessage());
      System.out.println("0 passed, 1 failed");
      System.exit(1);
    }
    ExecutorService runner = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r);
      t.setDaemon(true);
      return t;
    });
    int passed = 0;
    int failed = 0;
    for (Map.Entry<String, Body> e : CASES.entrySet()) {
      String name = e.getKey();
      if (!only.isEmpty() && !only.contains(name)) {
        continue;
      }
      Future<?> f = runner.submit(() -> {
        e.getValue().run();
        return null;
      });
      String failure = null;
      Throwable cause = null;
      try {
        f.get(CASE_TIMEOUT_S, TimeUnit.SECONDS);
      } catch (TimeoutException te) {
        f.cancel(true);
        failure = "timed out after " + CASE_TIMEOUT_S + " s";
      } catch (java.util.concurrent.ExecutionException ee) {
        cause = ee.getCause();
        String msg = cause.getMessage() == null ? "" : cause.getMessage();
        failure = cause instanceof CheckFailed ? msg : cause.getClass().getSimpleName() + ": " + msg;
      }
      if (failure == null) {
        passed++;
        System.out.println("ok " + name);
      } else {
        failed++;
        String flat = String.join(" ", failure.trim().split("\\s+"));
        if (flat.length() > 600) {
          flat = flat.substring(0, 600) + "...";
        }
        System.out.println("not ok " + name + ": " + flat);
        if (verbose && cause != null) {
          StringWriter sw = new StringWriter();
          cause.printStackTrace(new PrintWriter(sw));
          System.err.println(sw);
        }
      }
      System.out.flush();
    }
    System.out.println(passed + " passed, " + failed + " failed");
    System.exit(failed == 0 ? 0 : 1);
  }
}
