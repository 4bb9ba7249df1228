#!/usr/bin/env node
// Drives a Redis-protocol server with two unmodified Node.js client libraries, node-redis
// (`redis`) and ioredis, the way a typical application does, and asserts the values that come
// back. The same program runs against a real Redis 7 (which shows the expectations are right)
// and then against Shoal.
//
//     npm ci && REDIS_HOST=127.0.0.1 REDIS_PORT=6379 node suite.js
//
// Prints `ok <case>` or `not ok <case>: <what went wrong>` per case, in order, and exits 1 when
// any case failed. Each library runs every case twice: over RESP3 (the default of both
// libraries' current majors) and over RESP2. Each case uses its own keys (prefixed with the
// case name), its own connections, and a time limit, so one case cannot hang or poison another.
//
// Servers may return hash fields, set members and SCAN keys in any order (Redis leaves it
// unspecified; Shoal returns member order), so those are compared order-insensitively.

'use strict';

const assert = require('node:assert/strict');
const { createClient, RESP_TYPES, WatchError } = require('redis');
const Redis = require('ioredis');

const HOST = process.env.REDIS_HOST || '127.0.0.1';
const PORT = Number(process.env.REDIS_PORT || 6379);
const TIMEOUT_MS = 5000; // connect and command timeouts
const CASE_TIMEOUT_MS = 30000; // a case that has not finished by then fails

// ---------------------------------------------------------------------------------------------
// helpers

function eq(got, expected, what) {
  assert.deepStrictEqual(got, expected, `${what}: expected ${show(expected)}, got ${show(got)}`);
}

function ok(cond, what) {
  if (!cond) throw new Error(what);
}

function show(v) {
  if (Buffer.isBuffer(v)) return `<Buffer ${v.length} bytes ${v.toString('hex').slice(0, 40)}>`;
  try {
    return JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? `${x}n` : x));
  } catch (e) {
    return String(v);
  }
}

// A plain object with the same own entries (RESP3 maps come back with a null prototype).
function plain(obj) {
  ok(obj !== null && typeof obj === 'object' && !Array.isArray(obj),
    `expected an object, got ${show(obj)}`);
  return Object.fromEntries(Object.entries(obj));
}

function sorted(arr, what) {
  ok(Array.isArray(arr), `${what}: expected an array, got ${show(arr)}`);
  return [...arr].sort();
}

function eqSorted(got, expected, what) {
  eq(sorted(got, what), [...expected].sort(), what + ' (order-insensitive)');
}

// Flat [k1, v1, k2, v2] or an object -> plain object.
function pairs(reply) {
  if (Array.isArray(reply)) {
    const o = {};
    for (let i = 0; i < reply.length; i += 2) o[String(reply[i])] = reply[i + 1];
    return o;
  }
  return plain(reply);
}

async function expectError(promise, prefix, what) {
  let reply, err;
  try {
    reply = await promise;
  } catch (e) {
    err = e;
  }
  if (err === undefined) {
    throw new Error(`${what}: expected an error starting with ${show(prefix)}, got reply ${show(reply)}`);
  }
  const msg = err && err.message;
  ok(typeof msg === 'string' && msg.startsWith(prefix),
    `${what}: expected an error starting with ${show(prefix)}, got ${err && err.constructor ? err.constructor.name : typeof err}: ${msg === undefined ? show(err) : msg}`);
  return err;
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

function allBytes() {
  const b = Buffer.alloc(256);
  for (let i = 0; i < 256; i++) b[i] = i;
  return b;
}

// ---------------------------------------------------------------------------------------------
// connections: every connection a case opens is closed when the case ends, even on timeout

class Ctx {
  constructor(variant) {
    this.variant = variant;
    this.conns = [];
  }

  // node-redis client of this case's variant; `extra` is merged into createClient's options
  async nodeRedis(extra = {}) {
    const c = createClient({
      socket: { host: HOST, port: PORT, connectTimeout: TIMEOUT_MS, reconnectStrategy: false },
      RESP: this.variant.resp,
      ...extra,
    });
    c.on('error', () => {}); // surfaced through the rejected commands instead
    this.conns.push(() => c.destroy());
    await c.connect();
    return c;
  }

  // ioredis client of this case's variant; `extra` is merged into the constructor's options
  async ioredis(extra = {}) {
    const r = new Redis({
      host: HOST,
      port: PORT,
      protocol: this.variant.resp,
      connectTimeout: TIMEOUT_MS,
      commandTimeout: TIMEOUT_MS,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      lazyConnect: true,
      ...extra,
    });
    r.on('error', () => {});
    this.conns.push(() => r.disconnect());
    await r.connect();
    return r;
  }

  close() {
    for (const close of this.conns) {
      try {
        close();
      } catch (e) {
        /* already closed */
      }
    }
    this.conns = [];
  }
}

// ---------------------------------------------------------------------------------------------
// node-redis cases; `k` prefixes a key with the case name

const nodeRedisCases = {
  async 'connect'(ctx, k) {
    const c = await ctx.nodeRedis();
    eq(await c.ping(), 'PONG', 'PING');
    eq(await c.ping('hello'), 'hello', 'PING hello');
    eq(await c.echo('round trip'), 'round trip', 'ECHO');
    const hello = pairs(await c.sendCommand(['HELLO']));
    eq(hello.proto, ctx.variant.resp, 'HELLO proto (negotiated protocol)');
    ok(c.isReady, 'client.isReady');
  },

  async 'client name'(ctx, k) {
    const c = await ctx.nodeRedis({ name: `${k}conn` });
    eq(await c.clientGetName(), `${k}conn`, 'CLIENT GETNAME after the name option');
    eq(await c.clientSetName(`${k}renamed`), 'OK', 'CLIENT SETNAME');
    eq(await c.clientGetName(), `${k}renamed`, 'CLIENT GETNAME after CLIENT SETNAME');
    const other = await ctx.nodeRedis();
    eq(await other.clientGetName(), null, 'CLIENT GETNAME on an unnamed connection');
  },

  async 'strings'(ctx, k) {
    const c = await ctx.nodeRedis();
    eq(await c.get(k + 'missing'), null, 'GET missing');
    eq(await c.set(k + 'a', 'hello'), 'OK', 'SET');
    eq(await c.get(k + 'a'), 'hello', 'GET');
    eq(await c.set(k + 'a', 'world', { GET: true }), 'hello', 'SET GET returns the old value');
    eq(await c.get(k + 'a'), 'world', 'GET after SET GET');
    eq(await c.set(k + 'new', 'v', { GET: true }), null, 'SET GET on a missing key');
    eq(await c.set(k + 'a', 'nx', { condition: 'NX' }), null, 'SET NX on an existing key');
    eq(await c.get(k + 'a'), 'world', 'value unchanged after SET NX');
    eq(await c.set(k + 'b', 'nx', { condition: 'NX' }), 'OK', 'SET NX on a missing key');
    eq(await c.set(k + 'c', 'xx', { condition: 'XX' }), null, 'SET XX on a missing key');
    eq(await c.exists(k + 'c'), 0, 'EXISTS after SET XX on a missing key');
    eq(await c.set(k + 'b', 'xx', { condition: 'XX' }), 'OK', 'SET XX on an existing key');
    eq(await c.get(k + 'b'), 'xx', 'GET after SET XX');
    eq(await c.set(k + 'ex', 'v', { expiration: { type: 'EX', value: 100 } }), 'OK', 'SET EX');
    const ttl = await c.ttl(k + 'ex');
    ok(ttl > 90 && ttl <= 100, `TTL after SET EX 100: got ${ttl}`);
    eq(await c.set(k + 'px', 'v', { expiration: { type: 'PX', value: 50000 } }), 'OK', 'SET PX');
    const pttl = await c.pTTL(k + 'px');
    ok(pttl > 40000 && pttl <= 50000, `PTTL after SET PX 50000: got ${pttl}`);
    eq(await c.set(k + 'px', 'v2', { EX: 200, XX: true }), 'OK', 'SET EX XX (v4-style options)');
    const ttl2 = await c.ttl(k + 'px');
    ok(ttl2 > 190 && ttl2 <= 200, `TTL after SET EX 200 XX: got ${ttl2}`);
    eq(await c.setEx(k + 'setex', 60, 'sv'), 'OK', 'SETEX');
    eq(await c.get(k + 'setex'), 'sv', 'GET after SETEX');
    const ttl3 = await c.ttl(k + 'setex');
    ok(ttl3 > 50 && ttl3 <= 60, `TTL after SETEX 60: got ${ttl3}`);
    eq(await c.getDel(k + 'setex'), 'sv', 'GETDEL');
    eq(await c.exists(k + 'setex'), 0, 'EXISTS after GETDEL');
    eq(await c.getDel(k + 'setex'), null, 'GETDEL on a missing key');
    eq(await c.getEx(k + 'a', { type: 'EX', value: 30 }), 'world', 'GETEX EX');
    const ttl4 = await c.ttl(k + 'a');
    ok(ttl4 > 20 && ttl4 <= 30, `TTL after GETEX EX 30: got ${ttl4}`);
    eq(await c.getEx(k + 'a', { type: 'PERSIST' }), 'world', 'GETEX PERSIST');
    eq(await c.ttl(k + 'a'), -1, 'TTL after GETEX PERSIST');
    eq(await c.getEx(k + 'missing', { type: 'PX', value: 1000 }), null, 'GETEX on a missing key');
    eq(await c.setNX(k + 'a', 'x'), 0, 'SETNX on an existing key');
    eq(await c.getSet(k + 'a', 'gs'), 'world', 'GETSET');
    eq(await c.get(k + 'a'), 'gs', 'GET after GETSET');
    const unicode = 'héllo wörld ✓ 日本語 🐟';
    await c.set(k + 'utf8', unicode);
    eq(await c.get(k + 'utf8'), unicode, 'UTF-8 value round-trips');
    eq(await c.strLen(k + 'utf8'), Buffer.byteLength(unicode), 'STRLEN counts bytes');
    eq(await c.set(k + 'num', 42), 'OK', 'SET with a number value');
    eq(await c.get(k + 'num'), '42', 'GET of a number value');
  },

  async 'expiry'(ctx, k) {
    const c = await ctx.nodeRedis();
    eq(await c.ttl(k + 'missing'), -2, 'TTL on a missing key');
    eq(await c.pTTL(k + 'missing'), -2, 'PTTL on a missing key');
    await c.set(k + 'a', 'v');
    eq(await c.ttl(k + 'a'), -1, 'TTL without expiry');
    eq(await c.pTTL(k + 'a'), -1, 'PTTL without expiry');
    eq(await c.expire(k + 'a', 100), 1, 'EXPIRE');
    const ttl = await c.ttl(k + 'a');
    ok(ttl > 90 && ttl <= 100, `TTL after EXPIRE 100: got ${ttl}`);
    const pttl = await c.pTTL(k + 'a');
    ok(pttl > 90000 && pttl <= 100000, `PTTL after EXPIRE 100: got ${pttl}`);
    eq(await c.expire(k + 'missing', 100), 0, 'EXPIRE on a missing key');
    eq(await c.persist(k + 'a'), 1, 'PERSIST');
    eq(await c.ttl(k + 'a'), -1, 'TTL after PERSIST');
    eq(await c.persist(k + 'a'), 0, 'PERSIST without expiry');
    eq(await c.pExpire(k + 'a', 5000), 1, 'PEXPIRE');
    const pttl2 = await c.pTTL(k + 'a');
    ok(pttl2 > 4000 && pttl2 <= 5000, `PTTL after PEXPIRE 5000: got ${pttl2}`);
    const at = Math.floor(Date.now() / 1000) + 1000;
    eq(await c.expireAt(k + 'a', at), 1, 'EXPIREAT');
    const ttl3 = await c.ttl(k + 'a');
    ok(ttl3 > 990 && ttl3 <= 1001, `TTL after EXPIREAT now+1000: got ${ttl3}`);
    await c.set(k + 'short', 'v', { expiration: { type: 'PX', value: 100 } });
    eq(await c.get(k + 'short'), 'v', 'GET before the key expires');
    await sleep(300);
    eq(await c.get(k + 'short'), null, 'GET after the key expired');
    eq(await c.exists(k + 'short'), 0, 'EXISTS after the key expired');
    eq(await c.ttl(k + 'short'), -2, 'TTL after the key expired');
    await c.set(k + 'gone', 'v');
    eq(await c.expire(k + 'gone', 0), 1, 'EXPIRE 0');
    eq(await c.exists(k + 'gone'), 0, 'EXISTS after EXPIRE 0');
    await c.set(k + 'neg', 'v');
    eq(await c.expire(k + 'neg', -10), 1, 'EXPIRE negative');
    eq(await c.exists(k + 'neg'), 0, 'EXISTS after EXPIRE negative');
    // which writes keep or clear a time to live
    await c.set(k + 't', '1', { expiration: { type: 'EX', value: 100 } });
    eq(await c.incr(k + 't'), 2, 'INCR of a key with a TTL');
    ok((await c.ttl(k + 't')) > 90, 'INCR keeps the TTL');
    await c.append(k + 't', '0');
    ok((await c.ttl(k + 't')) > 90, 'APPEND keeps the TTL');
    eq(await c.rename(k + 't', k + 't2'), 'OK', 'RENAME of a key with a TTL');
    ok((await c.ttl(k + 't2')) > 90, 'RENAME carries the TTL');
    eq(await c.set(k + 't2', 'kept', { expiration: 'KEEPTTL' }), 'OK', 'SET KEEPTTL');
    ok((await c.ttl(k + 't2')) > 90, 'SET KEEPTTL keeps the TTL');
    eq(await c.set(k + 't2', 'plain'), 'OK', 'plain SET over a key with a TTL');
    eq(await c.ttl(k + 't2'), -1, 'plain SET clears the TTL');
    await c.expire(k + 't2', 100);
    eq(await c.getSet(k + 't2', 'gs'), 'plain', 'GETSET');
    eq(await c.ttl(k + 't2'), -1, 'GETSET clears the TTL');
    // EXPIRE conditions (Redis 7)
    eq(await c.expire(k + 't2', 100, 'NX'), 1, 'EXPIRE NX without a TTL');
    eq(await c.expire(k + 't2', 200, 'NX'), 0, 'EXPIRE NX with a TTL');
    eq(await c.expire(k + 't2', 50, 'GT'), 0, 'EXPIRE GT with a smaller value');
    eq(await c.expire(k + 't2', 300, 'GT'), 1, 'EXPIRE GT with a larger value');
    eq(await c.expire(k + 't2', 400, 'LT'), 0, 'EXPIRE LT with a larger value');
    eq(await c.expire(k + 't2', 30, 'XX'), 1, 'EXPIRE XX with a TTL');
    const ttl4 = await c.ttl(k + 't2');
    ok(ttl4 > 20 && ttl4 <= 30, `TTL after EXPIRE 30 XX: got ${ttl4}`);
    // absolute times
    const atMs = Date.now() + 500000;
    eq(await c.set(k + 'pxat', 'v', { expiration: { type: 'PXAT', value: atMs } }), 'OK', 'SET PXAT');
    const pt = await c.pTTL(k + 'pxat');
    ok(pt > 490000 && pt <= 500000, `PTTL after SET PXAT now+500s: got ${pt}`);
    eq(await c.getEx(k + 'pxat', { type: 'EXAT', value: Math.floor(atMs / 1000) + 100 }), 'v', 'GETEX EXAT');
    const t5 = await c.ttl(k + 'pxat');
    ok(t5 > 590 && t5 <= 601, `TTL after GETEX EXAT now+600s: got ${t5}`);
  },

  async 'counters'(ctx, k) {
    const c = await ctx.nodeRedis();
    eq(await c.incr(k + 'n'), 1, 'INCR on a missing key');
    eq(await c.incr(k + 'n'), 2, 'INCR');
    eq(await c.incrBy(k + 'n', 10), 12, 'INCRBY');
    eq(await c.incrBy(k + 'n', -20), -8, 'INCRBY negative');
    eq(await c.decr(k + 'n'), -9, 'DECR');
    eq(await c.decrBy(k + 'n', 1), -10, 'DECRBY');
    eq(await c.get(k + 'n'), '-10', 'GET of a counter');
    eq(await c.incrByFloat(k + 'f', 10.5), '10.5', 'INCRBYFLOAT on a missing key');
    eq(await c.incrByFloat(k + 'f', 0.1), '10.6', 'INCRBYFLOAT 0.1');
    eq(await c.incrByFloat(k + 'f', -5), '5.6', 'INCRBYFLOAT negative');
    await c.set(k + 'i', '3');
    eq(await c.incrByFloat(k + 'i', 1.5), '4.5', 'INCRBYFLOAT on an integer string');
    eq(await c.incrByFloat(k + 'i', 0.5), '5', 'INCRBYFLOAT to a whole number');
    await c.set(k + 'big', '9223372036854775806');
    const exact = c.withTypeMapping({ [RESP_TYPES.NUMBER]: String });
    eq(await exact.incr(k + 'big'), '9223372036854775807', 'INCR to INT64_MAX (integers mapped to strings)');
    await expectError(c.incr(k + 'big'), 'ERR increment or decrement would overflow', 'INCR past INT64_MAX');
  },

  async 'mset mget'(ctx, k) {
    const c = await ctx.nodeRedis();
    eq(await c.mSet({ [k + 'a']: '1', [k + 'b']: '2', [k + 'c']: '3' }), 'OK', 'MSET (object)');
    eq(await c.mGet([k + 'a', k + 'missing', k + 'b', k + 'c']), ['1', null, '2', '3'], 'MGET with a missing key');
    eq(await c.mSet([[k + 'a', 'x'], [k + 'd', 'y']]), 'OK', 'MSET (tuples)');
    eq(await c.mGet([k + 'a', k + 'd']), ['x', 'y'], 'MGET after MSET (tuples)');
    eq(await c.mSetNX({ [k + 'a']: 'z', [k + 'e']: 'z' }), 0, 'MSETNX with an existing key');
    eq(await c.exists(k + 'e'), 0, 'MSETNX sets nothing when a key exists');
    eq(await c.mSetNX({ [k + 'e']: 'e', [k + 'f']: 'f' }), 1, 'MSETNX with new keys');
    eq(await c.mGet([k + 'e', k + 'f']), ['e', 'f'], 'MGET after MSETNX');
    await c.lPush(k + 'list', 'x');
    eq(await c.mGet([k + 'list', k + 'a']), [null, 'x'], 'MGET of a non-string key gives null');
  },

  async 'append strlen getrange'(ctx, k) {
    const c = await ctx.nodeRedis();
    eq(await c.append(k + 's', 'Hello'), 5, 'APPEND to a missing key');
    eq(await c.append(k + 's', ', World'), 12, 'APPEND');
    eq(await c.get(k + 's'), 'Hello, World', 'GET after APPEND');
    eq(await c.strLen(k + 's'), 12, 'STRLEN');
    eq(await c.strLen(k + 'missing'), 0, 'STRLEN on a missing key');
    eq(await c.getRange(k + 's', 0, 4), 'Hello', 'GETRANGE 0 4');
    eq(await c.getRange(k + 's', -5, -1), 'World', 'GETRANGE -5 -1');
    eq(await c.getRange(k + 's', 7, 100), 'World', 'GETRANGE past the end');
    eq(await c.getRange(k + 's', 5, 2), '', 'GETRANGE start > end');
    eq(await c.getRange(k + 'missing', 0, 10), '', 'GETRANGE on a missing key');
    eq(await c.setRange(k + 's', 7, 'Shoal'), 12, 'SETRANGE');
    eq(await c.get(k + 's'), 'Hello, Shoal', 'GET after SETRANGE');
    eq(await c.setRange(k + 'pad', 3, 'x'), 4, 'SETRANGE on a missing key pads');
    eq(await c.get(k + 'pad'), '\0\0\0x', 'GET of the padded key');
  },

  async 'binary values'(ctx, k) {
    const c = await ctx.nodeRedis();
    const bin = c.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
    const bytes = allBytes();
    eq(await c.set(k + 'bin', bytes), 'OK', 'SET of a Buffer with bytes 0x00..0xff');
    eq(await c.strLen(k + 'bin'), 256, 'STRLEN of the binary value');
    const back = await bin.get(k + 'bin');
    ok(Buffer.isBuffer(back), `GET with a Buffer type mapping: expected a Buffer, got ${show(back)}`);
    ok(back.equals(bytes), `binary value round-trips: got ${show(back)}`);
    const big = Buffer.alloc(1 << 20);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7919 + (i >> 8)) & 0xff;
    eq(await c.set(k + 'big', big), 'OK', 'SET of a 1 MiB binary value');
    const bigBack = await bin.get(k + 'big');
    ok(Buffer.isBuffer(bigBack) && bigBack.equals(big), `1 MiB value round-trips: got ${show(bigBack)}`);
    const part = await bin.getRange(k + 'bin', 250, 255);
    ok(part.equals(Buffer.from([250, 251, 252, 253, 254, 255])), `GETRANGE of binary: got ${show(part)}`);
    const key = Buffer.concat([Buffer.from(k), Buffer.from([0, 0xff, 0x0d, 0x0a, 0x80])]);
    await c.set(key, Buffer.from([1, 2, 3]));
    const v = await bin.get(key);
    ok(v.equals(Buffer.from([1, 2, 3])), `binary key: got ${show(v)}`);
    await c.hSet(k + 'h', 'f', bytes);
    const hv = await bin.hGet(k + 'h', 'f');
    ok(Buffer.isBuffer(hv) && hv.equals(bytes), `binary hash value round-trips: got ${show(hv)}`);
    await c.rPush(k + 'l', [bytes, Buffer.from([0])]);
    const lv = await bin.lRange(k + 'l', 0, -1);
    ok(lv.length === 2 && lv[0].equals(bytes) && lv[1].equals(Buffer.from([0])),
      `binary list values round-trip: got ${show(lv)}`);
  },

  async 'keys'(ctx, k) {
    const c = await ctx.nodeRedis();
    await c.set(k + 'a', '1');
    await c.set(k + 'b', '2');
    eq(await c.exists(k + 'a'), 1, 'EXISTS one key');
    eq(await c.exists([k + 'a', k + 'b', k + 'missing', k + 'a']), 3, 'EXISTS counts each key given');
    eq(await c.type(k + 'a'), 'string', 'TYPE string');
    await c.rPush(k + 'list', 'x');
    await c.hSet(k + 'hash', 'f', 'v');
    await c.sAdd(k + 'set', 'm');
    await c.zAdd(k + 'zset', { score: 1, value: 'm' });
    eq(await c.type(k + 'list'), 'list', 'TYPE list');
    eq(await c.type(k + 'hash'), 'hash', 'TYPE hash');
    eq(await c.type(k + 'set'), 'set', 'TYPE set');
    eq(await c.type(k + 'zset'), 'zset', 'TYPE zset');
    eq(await c.type(k + 'missing'), 'none', 'TYPE of a missing key');
    eq(await c.rename(k + 'a', k + 'renamed'), 'OK', 'RENAME');
    eq(await c.exists(k + 'a'), 0, 'old name gone after RENAME');
    eq(await c.get(k + 'renamed'), '1', 'value under the new name');
    eq(await c.rename(k + 'renamed', k + 'b'), 'OK', 'RENAME over an existing key');
    eq(await c.get(k + 'b'), '1', 'RENAME replaced the destination');
    await expectError(c.rename(k + 'missing', k + 'x'), 'ERR no such key', 'RENAME of a missing key');
    eq(await c.renameNX(k + 'b', k + 'list'), 0, 'RENAMENX onto an existing key');
    eq(await c.renameNX(k + 'b', k + 'c'), 1, 'RENAMENX');
    eq(await c.del(k + 'c'), 1, 'DEL one key');
    eq(await c.del([k + 'list', k + 'hash', k + 'missing']), 2, 'DEL counts deleted keys');
    eq(await c.unlink([k + 'set', k + 'zset']), 2, 'UNLINK');
    eq(await c.exists([k + 'c', k + 'list', k + 'hash', k + 'set', k + 'zset']), 0, 'EXISTS after DEL');
    eqSorted(await c.keys(k + '*'), [], 'KEYS after deleting everything');
  },

  async 'hashes'(ctx, k) {
    const c = await ctx.nodeRedis();
    const h = k + 'h';
    eq(await c.hSet(h, { name: 'Ada', lang: 'en', visits: '1' }), 3, 'HSET several fields (object)');
    eq(await c.hSet(h, [['lang', 'fr'], ['city', 'Paris']]), 1, 'HSET (tuples) counts only new fields');
    eq(await c.hSet(h, 'zip', '75001'), 1, 'HSET field value');
    eq(await c.hGet(h, 'name'), 'Ada', 'HGET');
    eq(await c.hGet(h, 'lang'), 'fr', 'HGET of an overwritten field');
    eq(await c.hGet(h, 'missing'), null, 'HGET of a missing field');
    eq(await c.hGet(k + 'missing', 'f'), null, 'HGET on a missing key');
    const all = await c.hGetAll(h);
    eq(plain(all), { name: 'Ada', lang: 'fr', visits: '1', city: 'Paris', zip: '75001' }, 'HGETALL as an object');
    eq(plain(await c.hGetAll(k + 'missing')), {}, 'HGETALL on a missing key');
    eq(await c.hIncrBy(h, 'visits', 5), 6, 'HINCRBY');
    eq(await c.hIncrBy(h, 'newcount', -2), -2, 'HINCRBY on a missing field');
    eq(await c.hIncrByFloat(h, 'score', 1.25), '1.25', 'HINCRBYFLOAT');
    eq(await c.hLen(h), 7, 'HLEN');
    eq(await c.hExists(h, 'name'), 1, 'HEXISTS of a field');
    eq(await c.hExists(h, 'missing'), 0, 'HEXISTS of a missing field');
    eq(await c.hDel(h, 'newcount'), 1, 'HDEL one field');
    eq(await c.hDel(h, ['score', 'zip', 'missing']), 2, 'HDEL several fields');
    eq(await c.hLen(h), 4, 'HLEN after HDEL');
    eqSorted(await c.hKeys(h), ['name', 'lang', 'visits', 'city'], 'HKEYS');
    eqSorted(await c.hVals(h), ['Ada', 'fr', '6', 'Paris'], 'HVALS');
    eq(await c.hmGet(h, ['name', 'missing', 'city']), ['Ada', null, 'Paris'], 'HMGET');
    eq(await c.hSetNX(h, 'name', 'Bob'), 0, 'HSETNX on an existing field');
    eq(await c.hSetNX(h, 'nick', 'A'), 1, 'HSETNX on a new field');
    eq(await c.hStrLen(h, 'city'), 5, 'HSTRLEN');
    eq(await c.hDel(h, ['name', 'lang', 'visits', 'city', 'nick']), 5, 'HDEL all fields');
    eq(await c.exists(h), 0, 'a hash with no fields left is deleted');
  },

  async 'lists'(ctx, k) {
    const c = await ctx.nodeRedis();
    const l = k + 'l';
    eq(await c.rPush(l, ['b', 'c']), 2, 'RPUSH several');
    eq(await c.lPush(l, 'a'), 3, 'LPUSH one');
    eq(await c.lPush(l, ['y', 'z']), 5, 'LPUSH several');
    eq(await c.lRange(l, 0, -1), ['z', 'y', 'a', 'b', 'c'], 'LRANGE 0 -1');
    eq(await c.lRange(l, 1, 2), ['y', 'a'], 'LRANGE 1 2');
    eq(await c.lRange(l, -2, -1), ['b', 'c'], 'LRANGE -2 -1');
    eq(await c.lRange(l, 10, 20), [], 'LRANGE out of range');
    eq(await c.lLen(l), 5, 'LLEN');
    eq(await c.lIndex(l, 0), 'z', 'LINDEX 0');
    eq(await c.lIndex(l, -1), 'c', 'LINDEX -1');
    eq(await c.lIndex(l, 99), null, 'LINDEX out of range');
    eq(await c.lPop(l), 'z', 'LPOP');
    eq(await c.rPop(l), 'c', 'RPOP');
    eq(await c.lPopCount(l, 2), ['y', 'a'], 'LPOP with count');
    eq(await c.rPush(l, ['d', 'e', 'f']), 4, 'RPUSH more');
    eq(await c.rPopCount(l, 2), ['f', 'e'], 'RPOP with count');
    eq(await c.lPopCount(l, 10), ['b', 'd'], 'LPOP with a count larger than the list');
    eq(await c.exists(l), 0, 'an emptied list is deleted');
    eq(await c.lPop(l), null, 'LPOP on a missing key');
    eq(await c.lPopCount(l, 2), null, 'LPOP with count on a missing key');
    eq(await c.lLen(l), 0, 'LLEN on a missing key');
    await c.rPush(l, ['x', 'a', 'x', 'b', 'x', 'c', 'x']);
    eq(await c.lRem(l, 2, 'x'), 2, 'LREM 2 from the head');
    eq(await c.lRange(l, 0, -1), ['a', 'b', 'x', 'c', 'x'], 'LRANGE after LREM 2');
    eq(await c.lRem(l, -1, 'x'), 1, 'LREM -1 from the tail');
    eq(await c.lRange(l, 0, -1), ['a', 'b', 'x', 'c'], 'LRANGE after LREM -1');
    eq(await c.lRem(l, 0, 'x'), 1, 'LREM 0 (all)');
    eq(await c.lRem(l, 0, 'nope'), 0, 'LREM of a missing element');
    eq(await c.lSet(l, 1, 'B'), 'OK', 'LSET');
    eq(await c.lSet(l, -1, 'C'), 'OK', 'LSET -1');
    eq(await c.lRange(l, 0, -1), ['a', 'B', 'C'], 'LRANGE after LSET');
    await expectError(c.lSet(l, 10, 'x'), 'ERR index out of range', 'LSET out of range');
    await c.rPush(l, ['d', 'e', 'f']);
    eq(await c.lTrim(l, 1, -2), 'OK', 'LTRIM');
    eq(await c.lRange(l, 0, -1), ['B', 'C', 'd', 'e'], 'LRANGE after LTRIM');
    eq(await c.lPushX(k + 'missing', 'x'), 0, 'LPUSHX on a missing key');
    eq(await c.rPushX(l, 'z'), 5, 'RPUSHX on an existing list');
  },

  async 'sets'(ctx, k) {
    const c = await ctx.nodeRedis();
    const a = k + 'a', b = k + 'b';
    eq(await c.sAdd(a, ['x', 'y', 'z', 'x']), 3, 'SADD counts distinct new members');
    eq(await c.sAdd(a, 'x'), 0, 'SADD of an existing member');
    eq(await c.sAdd(b, ['y', 'z', 'w']), 3, 'SADD another set');
    eqSorted(await c.sMembers(a), ['x', 'y', 'z'], 'SMEMBERS');
    eqSorted(await c.sMembers(k + 'missing'), [], 'SMEMBERS on a missing key');
    eq(await c.sIsMember(a, 'x'), 1, 'SISMEMBER of a member');
    eq(await c.sIsMember(a, 'w'), 0, 'SISMEMBER of a non-member');
    eq(await c.smIsMember(a, ['x', 'w', 'z']), [1, 0, 1], 'SMISMEMBER');
    eq(await c.sCard(a), 3, 'SCARD');
    eq(await c.sCard(k + 'missing'), 0, 'SCARD on a missing key');
    eqSorted(await c.sInter([a, b]), ['y', 'z'], 'SINTER');
    eqSorted(await c.sUnion([a, b]), ['w', 'x', 'y', 'z'], 'SUNION');
    eqSorted(await c.sDiff([a, b]), ['x'], 'SDIFF');
    eqSorted(await c.sDiff([b, a]), ['w'], 'SDIFF reversed');
    eq(await c.sInterStore(k + 'dst', [a, b]), 2, 'SINTERSTORE');
    eqSorted(await c.sMembers(k + 'dst'), ['y', 'z'], 'SMEMBERS of the SINTERSTORE result');
    eq(await c.sUnionStore(k + 'u', [a, b]), 4, 'SUNIONSTORE');
    eq(await c.sDiffStore(k + 'd', [a, b]), 1, 'SDIFFSTORE');
    eq(await c.sRem(a, ['x', 'nope']), 1, 'SREM counts removed members');
    eqSorted(await c.sMembers(a), ['y', 'z'], 'SMEMBERS after SREM');
    const popped = await c.sPop(a);
    ok(popped === 'y' || popped === 'z', `SPOP: got ${show(popped)}`);
    eq(await c.sCard(a), 1, 'SCARD after SPOP');
    const rnd = await c.sRandMember(b);
    ok(['w', 'y', 'z'].includes(rnd), `SRANDMEMBER: got ${show(rnd)}`);
    eq(await c.sRem(a, ['y', 'z']), 1, 'SREM the last member');
    eq(await c.exists(a), 0, 'an emptied set is deleted');
  },

  async 'sorted sets'(ctx, k) {
    const c = await ctx.nodeRedis();
    const z = k + 'z';
    eq(await c.zAdd(z, [
      { score: 1, value: 'one' },
      { score: 2, value: 'two' },
      { score: 3, value: 'three' },
      { score: 2.5, value: 'twohalf' },
    ]), 4, 'ZADD several');
    eq(await c.zAdd(z, { score: 4, value: 'one' }), 0, 'ZADD updating a score');
    eq(await c.zAdd(z, { score: 0, value: 'zero' }), 1, 'ZADD one');
    eq(await c.zCard(z), 5, 'ZCARD');
    eq(await c.zRange(z, 0, -1), ['zero', 'two', 'twohalf', 'three', 'one'], 'ZRANGE');
    eq(await c.zRangeWithScores(z, 0, 1), [{ value: 'zero', score: 0 }, { value: 'two', score: 2 }],
      'ZRANGE WITHSCORES');
    eq(await c.zRangeWithScores(z, -2, -1), [{ value: 'three', score: 3 }, { value: 'one', score: 4 }],
      'ZRANGE WITHSCORES -2 -1');
    eq(await c.zRange(z, 2, 3.5, { BY: 'SCORE' }), ['two', 'twohalf', 'three'], 'ZRANGE BYSCORE');
    eq(await c.zRange(z, '-inf', '+inf', { BY: 'SCORE', LIMIT: { offset: 1, count: 2 } }), ['two', 'twohalf'],
      'ZRANGE BYSCORE LIMIT');
    eq(await c.zRange(z, '(2', 3, { BY: 'SCORE' }), ['twohalf', 'three'], 'ZRANGE BYSCORE exclusive min');
    eq(await c.zRangeByScore(z, 1, 10, { LIMIT: { offset: 0, count: 2 } }), ['two', 'twohalf'],
      'ZRANGEBYSCORE LIMIT');
    eq(await c.zRangeByScoreWithScores(z, 3, '+inf'), [{ value: 'three', score: 3 }, { value: 'one', score: 4 }],
      'ZRANGEBYSCORE WITHSCORES');
    eq(await c.zRange(z, 0, 1, { REV: true }), ['one', 'three'], 'ZRANGE REV');
    eq(await c.zRange(z, '+inf', 2.5, { BY: 'SCORE', REV: true, LIMIT: { offset: 0, count: 2 } }), ['one', 'three'],
      'ZRANGE BYSCORE REV LIMIT');
    eq(await c.sendCommand(['ZREVRANGE', z, '0', '2']), ['one', 'three', 'twohalf'], 'ZREVRANGE');
    eq(await c.zScore(z, 'twohalf'), 2.5, 'ZSCORE');
    eq(await c.zScore(z, 'missing'), null, 'ZSCORE of a missing member');
    eq(await c.zmScore(z, ['two', 'missing']), [2, null], 'ZMSCORE');
    eq(await c.zIncrBy(z, 1.5, 'two'), 3.5, 'ZINCRBY');
    eq(await c.zIncrBy(z, 5, 'new'), 5, 'ZINCRBY of a new member');
    eq(await c.zRank(z, 'zero'), 0, 'ZRANK');
    eq(await c.zRank(z, 'two'), 3, 'ZRANK after ZINCRBY');
    eq(await c.zRank(z, 'missing'), null, 'ZRANK of a missing member');
    eq(await c.zRevRank(z, 'new'), 0, 'ZREVRANK');
    eq(await c.zCount(z, 2, 4), 4, 'ZCOUNT');
    eq(await c.zCount(z, '-inf', '+inf'), 6, 'ZCOUNT -inf +inf');
    eq(await c.zCount(z, '(3', 4), 2, 'ZCOUNT exclusive');
    eq(await c.zPopMin(z), { value: 'zero', score: 0 }, 'ZPOPMIN');
    eq(await c.zPopMinCount(z, 2), [{ value: 'twohalf', score: 2.5 }, { value: 'three', score: 3 }],
      'ZPOPMIN with count');
    eq(await c.zPopMax(z), { value: 'new', score: 5 }, 'ZPOPMAX');
    eq(await c.zRem(z, ['two', 'missing']), 1, 'ZREM');
    eq(await c.zCard(z), 1, 'ZCARD after ZREM');
    eq(await c.zRangeWithScores(z, 0, -1), [{ value: 'one', score: 4 }], 'ZRANGE WITHSCORES of what is left');
    eq(await c.zPopMin(k + 'missing'), null, 'ZPOPMIN on a missing key');
    eq(await c.zAdd(k + 'f', [{ score: -1.5, value: 'neg' }, { score: 1e-3, value: 'small' }]), 2, 'ZADD fractional');
    eq(await c.zRangeWithScores(k + 'f', 0, -1),
      [{ value: 'neg', score: -1.5 }, { value: 'small', score: 0.001 }], 'fractional scores round-trip');
    eq(await c.zAdd(k + 'tie', [{ score: 1, value: 'b' }, { score: 1, value: 'a' }, { score: 1, value: 'c' }]), 3,
      'ZADD equal scores');
    eq(await c.zRange(k + 'tie', 0, -1), ['a', 'b', 'c'], 'equal scores order by member');
    eq(await c.zRemRangeByScore(k + 'tie', 1, 1), 3, 'ZREMRANGEBYSCORE');
    eq(await c.exists(k + 'tie'), 0, 'an emptied sorted set is deleted');
  },

  async 'pipeline'(ctx, k) {
    const c = await ctx.nodeRedis();
    const N = 1000;
    // multi().execAsPipeline(): one batch, no MULTI/EXEC
    const p = c.multi();
    for (let i = 0; i < N; i++) {
      if (i % 2 === 0) p.set(`${k}${i}`, `v${i}`);
      else p.incrBy(k + 'counter', i);
    }
    const replies = await p.execAsPipeline();
    eq(replies.length, N, 'execAsPipeline reply count');
    let sum = 0;
    for (let i = 0; i < N; i++) {
      if (i % 2 === 0) {
        eq(replies[i], 'OK', `pipeline reply ${i} (SET)`);
      } else {
        sum += i;
        eq(replies[i], sum, `pipeline reply ${i} (INCRBY)`);
      }
    }
    const g = c.multi();
    for (let i = 0; i < N; i += 2) g.get(`${k}${i}`);
    const got = await g.execAsPipeline();
    eq(got.length, N / 2, 'GET pipeline reply count');
    for (let i = 0; i < N; i += 2) eq(got[i / 2], `v${i}`, `pipelined GET ${i}`);
    // plain concurrent commands: node-redis writes them in one go (auto-pipelining)
    const promises = [];
    for (let i = 0; i < N; i++) promises.push(c.rPush(k + 'list', String(i)));
    const lens = await Promise.all(promises);
    for (let i = 0; i < N; i++) eq(lens[i], i + 1, `concurrent RPUSH ${i}`);
    const gets = await Promise.all(Array.from({ length: N }, (_, i) => c.lIndex(k + 'list', i)));
    for (let i = 0; i < N; i++) eq(gets[i], String(i), `concurrent LINDEX ${i}`);
    // an error in the middle of a pipeline rejects execAsPipeline with that error; the
    // commands around it still ran
    await expectError(c.multi().set(k + 's', 'x').incr(k + 's').append(k + 's', 'y').execAsPipeline(),
      'ERR value is not an integer', 'execAsPipeline with a failing INCR');
    eq(await c.get(k + 's'), 'xy', 'the commands around the failing one ran');
  },

  async 'transactions'(ctx, k) {
    const c = await ctx.nodeRedis();
    const replies = await c.multi()
      .set(k + 'a', '1')
      .incr(k + 'a')
      .incrBy(k + 'a', 10)
      .get(k + 'a')
      .rPush(k + 'l', ['x', 'y'])
      .lRange(k + 'l', 0, -1)
      .hSet(k + 'h', { f: 'v' })
      .hGetAll(k + 'h')
      .exec();
    eq(replies.length, 8, 'EXEC reply count');
    eq(replies.slice(0, 7), ['OK', 2, 12, '12', 2, ['x', 'y'], 1], 'EXEC replies');
    eq(pairs(replies[7]), { f: 'v' }, 'HGETALL inside MULTI');
    eq(await c.get(k + 'a'), '12', 'GET after EXEC');
    // a command failing at run time does not stop the others
    let err;
    try {
      await c.multi().set(k + 's', 'str').lPush(k + 's', 'x').get(k + 's').exec();
    } catch (x) {
      err = x;
    }
    ok(err && Array.isArray(err.replies), `EXEC with a WRONGTYPE command: expected a MultiErrorReply, got ${show(err && err.message)}`);
    eq(err.replies[0], 'OK', 'EXEC reply before the failing command');
    ok(err.replies[1] instanceof Error && err.replies[1].message.startsWith('WRONGTYPE'),
      `EXEC reply of the failing command: got ${show(String(err.replies[1]))}`);
    eq(err.replies[2], 'str', 'EXEC reply after the failing command');
    // an empty transaction
    eq(await c.multi().exec(), [], 'empty MULTI/EXEC');
    // the connection is usable afterwards
    eq(await c.ping(), 'PONG', 'PING after the transactions');
  },

  async 'watch'(ctx, k) {
    const c = await ctx.nodeRedis();
    const other = await ctx.nodeRedis();
    await c.set(k + 'bal', '100');
    // untouched WATCH: EXEC goes through
    eq(await c.watch(k + 'bal'), 'OK', 'WATCH');
    const bal = Number(await c.get(k + 'bal'));
    eq(await c.multi().set(k + 'bal', String(bal - 10)).exec(), ['OK'], 'EXEC with an untouched WATCH');
    eq(await c.get(k + 'bal'), '90', 'GET after the watched EXEC');
    // a write from a second connection aborts EXEC: node-redis throws WatchError
    eq(await c.watch(k + 'bal'), 'OK', 'WATCH again');
    eq(await other.set(k + 'bal', '500'), 'OK', 'SET from another connection');
    const err = await expectError(c.multi().set(k + 'bal', '80').exec(),
      'One (or more) of the watched keys has been changed', 'EXEC after a watched key changed');
    ok(err instanceof WatchError, `EXEC after a watched key changed: expected WatchError, got ${err.constructor.name}`);
    eq(await c.get(k + 'bal'), '500', 'the aborted transaction wrote nothing');
    // WATCH then UNWATCH: the other write no longer matters
    await c.watch(k + 'bal');
    await other.set(k + 'bal', '600');
    eq(await c.unwatch(), 'OK', 'UNWATCH');
    eq(await c.multi().incr(k + 'bal').exec(), [601], 'EXEC after UNWATCH');
    // a watched key that did not exist yet, created by another connection
    await c.watch(k + 'fresh');
    await other.set(k + 'fresh', '1');
    await expectError(c.multi().set(k + 'fresh', '2').exec(), 'One (or more) of the watched keys has been changed',
      'EXEC after a watched missing key was created');
    eq(await c.get(k + 'fresh'), '1', 'the aborted transaction did not write the new key');
  },

  async 'scan'(ctx, k) {
    const c = await ctx.nodeRedis();
    const expected = [];
    const m = c.multi();
    for (let i = 0; i < 250; i++) {
      expected.push(`${k}key:${i}`);
      m.set(`${k}key:${i}`, String(i));
    }
    for (let i = 0; i < 30; i++) m.set(`${k}other:${i}`, 'x'); // must not match
    await m.execAsPipeline();
    const seen = new Set();
    let batches = 0;
    for await (const keys of c.scanIterator({ MATCH: `${k}key:*`, COUNT: 20 })) {
      ok(Array.isArray(keys), `scanIterator yields arrays of keys, got ${show(keys)}`);
      batches++;
      for (const key of keys) seen.add(key);
      ok(batches < 10000, 'scanIterator does not terminate');
    }
    eqSorted([...seen], expected, 'keys collected by scanIterator MATCH COUNT');
    ok(batches > 1, `SCAN COUNT 20 over 280 keys took ${batches} call(s); expected several`);
    // one SCAN call by hand
    const first = await c.scan('0', { MATCH: `${k}key:*`, COUNT: 1000 });
    ok(typeof first.cursor === 'string', `SCAN cursor is a string, got ${show(first.cursor)}`);
    ok(Array.isArray(first.keys), 'SCAN keys is an array');
    for (const key of first.keys) ok(key.startsWith(`${k}key:`), `SCAN MATCH returned ${key}`);
    // TYPE filter
    await c.rPush(k + 'alist', 'x');
    const lists = [];
    for await (const keys of c.scanIterator({ MATCH: `${k}*`, TYPE: 'list', COUNT: 50 })) lists.push(...keys);
    eq(lists, [k + 'alist'], 'scanIterator TYPE list');
    eqSorted(await c.keys(`${k}other:1*`), [`${k}other:1`].concat(Array.from({ length: 10 }, (_, i) => `${k}other:1${i}`)),
      'KEYS with a pattern');
  },

  async 'select database'(ctx, k) {
    const c0 = await ctx.nodeRedis();
    const c1 = await ctx.nodeRedis({ database: 1 });
    const c2 = await ctx.nodeRedis({ url: `redis://${HOST}:${PORT}/2`, socket: {
      host: HOST, port: PORT, connectTimeout: TIMEOUT_MS, reconnectStrategy: false } });
    await c0.set(k + 'x', 'db0');
    await c1.set(k + 'x', 'db1');
    await c1.set(k + 'only1', 'yes');
    await c2.set(k + 'x', 'db2');
    eq(await c0.get(k + 'x'), 'db0', 'GET in db 0');
    eq(await c1.get(k + 'x'), 'db1', 'GET in db 1 (database option)');
    eq(await c2.get(k + 'x'), 'db2', 'GET in db 2 (database in the URL)');
    eq(await c0.exists(k + 'only1'), 0, 'db 0 does not see a db 1 key');
    eq(await c1.exists(k + 'only1'), 1, 'db 1 sees its key');
    eqSorted(await c1.keys(k + '*'), [k + 'x', k + 'only1'], 'KEYS in db 1');
    eqSorted(await c0.keys(k + '*'), [k + 'x'], 'KEYS in db 0');
    const size1 = await c1.dbSize();
    await c1.set(k + 'more', '1');
    eq(await c1.dbSize(), size1 + 1, 'DBSIZE of db 1 counts a new key');
    eq(await c0.select(1), undefined, 'SELECT 1 from the library');
    eq(await c0.get(k + 'only1'), 'yes', 'after SELECT 1 the db 1 key is visible');
    await c0.select(0);
    eq(await c0.get(k + 'x'), 'db0', 'back in db 0');
    eq(await c2.flushDb(), 'OK', 'FLUSHDB in db 2');
    eq(await c2.exists(k + 'x'), 0, 'db 2 emptied');
    eq(await c1.get(k + 'x'), 'db1', 'FLUSHDB of db 2 left db 1 alone');
    eq(await c0.get(k + 'x'), 'db0', 'FLUSHDB of db 2 left db 0 alone');
    await expectError(c0.sendCommand(['SELECT', '99999']), 'ERR DB index is out of range', 'SELECT out of range');
  },

  // The reply types on the wire, through sendCommand (no transformation): RESP3 sends maps,
  // sets, doubles and nulls as their own types, RESP2 flattens them to arrays and strings.
  async 'reply types'(ctx, k) {
    const c = await ctx.nodeRedis();
    const typed = c.withTypeMapping({ [RESP_TYPES.MAP]: Map, [RESP_TYPES.SET]: Set });
    const resp3 = ctx.variant.resp === 3;
    await c.hSet(k + 'h', { a: '1', b: '2' });
    const h = await typed.sendCommand(['HGETALL', k + 'h']);
    if (resp3) {
      ok(h instanceof Map, `HGETALL over RESP3 is a map reply, got ${show(h)}`);
      eq(Object.fromEntries(h), { a: '1', b: '2' }, 'HGETALL map entries');
    } else {
      eq(pairs(h), { a: '1', b: '2' }, 'HGETALL over RESP2 is a flat array');
      ok(Array.isArray(h), 'HGETALL over RESP2 is an array');
    }
    await c.sAdd(k + 's', ['x', 'y']);
    const sm = await typed.sendCommand(['SMEMBERS', k + 's']);
    if (resp3) ok(sm instanceof Set, `SMEMBERS over RESP3 is a set reply, got ${show(sm)}`);
    else ok(Array.isArray(sm), `SMEMBERS over RESP2 is an array, got ${show(sm)}`);
    eqSorted([...sm], ['x', 'y'], 'SMEMBERS members');
    await c.zAdd(k + 'z', [{ score: 1, value: 'a' }, { score: 2.5, value: 'b' }]);
    const zr = await c.sendCommand(['ZRANGE', k + 'z', '0', '-1', 'WITHSCORES']);
    eq(zr, resp3 ? [['a', 1], ['b', 2.5]] : ['a', '1', 'b', '2.5'], 'ZRANGE WITHSCORES raw reply');
    eq(await c.sendCommand(['ZSCORE', k + 'z', 'b']), resp3 ? 2.5 : '2.5', 'ZSCORE raw reply');
    eq(await c.sendCommand(['ZINCRBY', k + 'z', '0.5', 'a']), resp3 ? 1.5 : '1.5', 'ZINCRBY raw reply');
    eq(await c.sendCommand(['ZPOPMIN', k + 'z']), resp3 ? ['a', 1.5] : ['a', '1.5'], 'ZPOPMIN raw reply');
    eq(await c.sendCommand(['ZSCORE', k + 'z', 'nope']), null, 'ZSCORE of a missing member raw reply');
    eq(await c.sendCommand(['GET', k + 'nope']), null, 'GET of a missing key raw reply');
    eq(await c.sendCommand(['MGET', k + 'nope', k + 'h']), [null, null], 'MGET raw reply');
    eq(await c.sendCommand(['LPOP', k + 'nope', '2']), null, 'LPOP count on a missing key raw reply');
    eq(await c.sendCommand(['EXISTS', k + 'h']), 1, 'EXISTS raw reply');
    eq(await c.sendCommand(['SET', k + 'str', 'v']), 'OK', 'SET raw reply');
    eq(await c.sendCommand(['INCRBYFLOAT', k + 'f', '2.5']), '2.5', 'INCRBYFLOAT raw reply is a bulk string');
    const hello = await typed.sendCommand(['HELLO']);
    if (resp3) ok(hello instanceof Map, `HELLO over RESP3 is a map reply, got ${show(hello)}`);
    const cfg = await typed.sendCommand(['CONFIG', 'GET', 'maxmemory-policy']);
    eq(pairs(resp3 ? Object.fromEntries(cfg) : cfg), { 'maxmemory-policy': 'noeviction' }, 'CONFIG GET raw reply');
  },

  async 'errors'(ctx, k) {
    const c = await ctx.nodeRedis();
    await c.set(k + 's', 'text');
    const e1 = await expectError(c.lPush(k + 's', 'x'), 'WRONGTYPE', 'LPUSH on a string key');
    eq(e1.message, 'WRONGTYPE Operation against a key holding the wrong kind of value', 'WRONGTYPE message');
    await expectError(c.hGet(k + 's', 'f'), 'WRONGTYPE', 'HGET on a string key');
    await c.rPush(k + 'l', 'x');
    await expectError(c.get(k + 'l'), 'WRONGTYPE', 'GET on a list key');
    await expectError(c.sAdd(k + 'l', 'x'), 'WRONGTYPE', 'SADD on a list key');
    await expectError(c.zAdd(k + 'l', { score: 1, value: 'x' }), 'WRONGTYPE', 'ZADD on a list key');
    await expectError(c.incr(k + 's'), 'ERR value is not an integer', 'INCR on a non-integer');
    await expectError(c.incrBy(k + 's', 2), 'ERR value is not an integer', 'INCRBY on a non-integer');
    await c.hSet(k + 'h', 'f', 'abc');
    await expectError(c.hIncrBy(k + 'h', 'f', 1), 'ERR hash value is not an integer', 'HINCRBY on a non-integer');
    await expectError(c.incrByFloat(k + 's', 1), 'ERR value is not a valid float', 'INCRBYFLOAT on a non-number');
    await expectError(c.expire(k + 's', 'abc'), 'ERR value is not an integer', 'EXPIRE with a bad number');
    await expectError(c.sendCommand(['NOSUCHCOMMAND', 'x']), 'ERR unknown command', 'an unknown command');
    await expectError(c.sendCommand(['GET']), 'ERR wrong number of arguments', 'GET without a key');
    await expectError(c.sendCommand(['SET', k + 's', 'v', 'EX', '0']), 'ERR invalid expire time', 'SET EX 0');
    await expectError(c.sendCommand(['SET', k + 's', 'v', 'NX', 'XX']), 'ERR syntax error', 'SET NX XX');
    eq(await c.get(k + 's'), 'text', 'the failed commands changed nothing');
    eq(await c.ping(), 'PONG', 'the connection is usable after errors');
  },
};

// ---------------------------------------------------------------------------------------------
// ioredis cases

const ioredisCases = {
  async 'connect'(ctx, k) {
    const r = await ctx.ioredis();
    eq(r.status, 'ready', 'client status');
    eq(await r.ping(), 'PONG', 'PING');
    eq(await r.ping('hello'), 'hello', 'PING hello');
    eq(await r.echo('round trip'), 'round trip', 'ECHO');
    const hello = pairs(await r.hello());
    eq(hello.proto, ctx.variant.resp, 'HELLO proto (negotiated protocol)');
    const info = await r.info('server');
    ok(typeof info === 'string' && /^redis_version:\S+\r?$/m.test(info), `INFO server has redis_version: got ${show(info)}`);
  },

  async 'client name'(ctx, k) {
    const r = await ctx.ioredis({ connectionName: `${k}conn` });
    eq(await r.client('GETNAME'), `${k}conn`, 'CLIENT GETNAME after the connectionName option');
    eq(await r.client('SETNAME', `${k}renamed`), 'OK', 'CLIENT SETNAME');
    eq(await r.client('GETNAME'), `${k}renamed`, 'CLIENT GETNAME after CLIENT SETNAME');
    const other = await ctx.ioredis();
    eq(await other.client('GETNAME'), null, 'CLIENT GETNAME on an unnamed connection');
  },

  async 'strings'(ctx, k) {
    const r = await ctx.ioredis();
    eq(await r.get(k + 'missing'), null, 'GET missing');
    eq(await r.set(k + 'a', 'hello'), 'OK', 'SET');
    eq(await r.get(k + 'a'), 'hello', 'GET');
    eq(await r.set(k + 'a', 'world', 'GET'), 'hello', 'SET GET returns the old value');
    eq(await r.set(k + 'new', 'v', 'GET'), null, 'SET GET on a missing key');
    eq(await r.set(k + 'a', 'nx', 'NX'), null, 'SET NX on an existing key');
    eq(await r.get(k + 'a'), 'world', 'value unchanged after SET NX');
    eq(await r.set(k + 'b', 'nx', 'NX'), 'OK', 'SET NX on a missing key');
    eq(await r.set(k + 'c', 'xx', 'XX'), null, 'SET XX on a missing key');
    eq(await r.set(k + 'b', 'xx', 'XX'), 'OK', 'SET XX on an existing key');
    eq(await r.get(k + 'b'), 'xx', 'GET after SET XX');
    eq(await r.set(k + 'ex', 'v', 'EX', 100), 'OK', 'SET EX');
    const ttl = await r.ttl(k + 'ex');
    ok(ttl > 90 && ttl <= 100, `TTL after SET EX 100: got ${ttl}`);
    eq(await r.set(k + 'px', 'v', 'PX', 50000), 'OK', 'SET PX');
    const pttl = await r.pttl(k + 'px');
    ok(pttl > 40000 && pttl <= 50000, `PTTL after SET PX 50000: got ${pttl}`);
    eq(await r.set(k + 'nxex', 'v', 'EX', 100, 'NX'), 'OK', 'SET EX NX on a missing key');
    eq(await r.set(k + 'nxex', 'v2', 'EX', 100, 'NX'), null, 'SET EX NX on an existing key');
    eq(await r.set(k + 'nxex', 'v3', 'PX', 1000, 'XX', 'GET'), 'v', 'SET PX XX GET');
    eq(await r.setex(k + 'setex', 60, 'sv'), 'OK', 'SETEX');
    eq(await r.get(k + 'setex'), 'sv', 'GET after SETEX');
    const ttl3 = await r.ttl(k + 'setex');
    ok(ttl3 > 50 && ttl3 <= 60, `TTL after SETEX 60: got ${ttl3}`);
    eq(await r.psetex(k + 'psetex', 60000, 'pv'), 'OK', 'PSETEX');
    eq(await r.getdel(k + 'setex'), 'sv', 'GETDEL');
    eq(await r.exists(k + 'setex'), 0, 'EXISTS after GETDEL');
    eq(await r.getdel(k + 'setex'), null, 'GETDEL on a missing key');
    eq(await r.getex(k + 'a', 'EX', 30), 'world', 'GETEX EX');
    const ttl4 = await r.ttl(k + 'a');
    ok(ttl4 > 20 && ttl4 <= 30, `TTL after GETEX EX 30: got ${ttl4}`);
    eq(await r.getex(k + 'a', 'PERSIST'), 'world', 'GETEX PERSIST');
    eq(await r.ttl(k + 'a'), -1, 'TTL after GETEX PERSIST');
    eq(await r.getex(k + 'a'), 'world', 'GETEX without options');
    eq(await r.getex(k + 'missing', 'PX', 1000), null, 'GETEX on a missing key');
    eq(await r.setnx(k + 'a', 'x'), 0, 'SETNX on an existing key');
    eq(await r.setnx(k + 'sn', 'x'), 1, 'SETNX on a missing key');
    eq(await r.getset(k + 'a', 'gs'), 'world', 'GETSET');
    const unicode = 'héllo wörld ✓ 日本語 🐟';
    await r.set(k + 'utf8', unicode);
    eq(await r.get(k + 'utf8'), unicode, 'UTF-8 value round-trips');
    eq(await r.strlen(k + 'utf8'), Buffer.byteLength(unicode), 'STRLEN counts bytes');
    eq(await r.set(k + 'num', 42), 'OK', 'SET with a number value');
    eq(await r.get(k + 'num'), '42', 'GET of a number value');
  },

  async 'expiry'(ctx, k) {
    const r = await ctx.ioredis();
    eq(await r.ttl(k + 'missing'), -2, 'TTL on a missing key');
    eq(await r.pttl(k + 'missing'), -2, 'PTTL on a missing key');
    await r.set(k + 'a', 'v');
    eq(await r.ttl(k + 'a'), -1, 'TTL without expiry');
    eq(await r.expire(k + 'a', 100), 1, 'EXPIRE');
    const ttl = await r.ttl(k + 'a');
    ok(ttl > 90 && ttl <= 100, `TTL after EXPIRE 100: got ${ttl}`);
    const pttl = await r.pttl(k + 'a');
    ok(pttl > 90000 && pttl <= 100000, `PTTL after EXPIRE 100: got ${pttl}`);
    eq(await r.expire(k + 'missing', 100), 0, 'EXPIRE on a missing key');
    eq(await r.persist(k + 'a'), 1, 'PERSIST');
    eq(await r.ttl(k + 'a'), -1, 'TTL after PERSIST');
    eq(await r.persist(k + 'a'), 0, 'PERSIST without expiry');
    eq(await r.pexpire(k + 'a', 5000), 1, 'PEXPIRE');
    const pttl2 = await r.pttl(k + 'a');
    ok(pttl2 > 4000 && pttl2 <= 5000, `PTTL after PEXPIRE 5000: got ${pttl2}`);
    eq(await r.pexpireat(k + 'a', Date.now() + 1000000), 1, 'PEXPIREAT');
    const ttl3 = await r.ttl(k + 'a');
    ok(ttl3 > 990 && ttl3 <= 1001, `TTL after PEXPIREAT now+1000s: got ${ttl3}`);
    await r.set(k + 'short', 'v', 'PX', 100);
    eq(await r.get(k + 'short'), 'v', 'GET before the key expires');
    await sleep(300);
    eq(await r.get(k + 'short'), null, 'GET after the key expired');
    eq(await r.exists(k + 'short'), 0, 'EXISTS after the key expired');
    eq(await r.pttl(k + 'short'), -2, 'PTTL after the key expired');
  },

  async 'counters'(ctx, k) {
    const r = await ctx.ioredis();
    eq(await r.incr(k + 'n'), 1, 'INCR on a missing key');
    eq(await r.incr(k + 'n'), 2, 'INCR');
    eq(await r.incrby(k + 'n', 10), 12, 'INCRBY');
    eq(await r.decr(k + 'n'), 11, 'DECR');
    eq(await r.decrby(k + 'n', 20), -9, 'DECRBY');
    eq(await r.get(k + 'n'), '-9', 'GET of a counter');
    eq(await r.incrbyfloat(k + 'f', 10.5), '10.5', 'INCRBYFLOAT on a missing key');
    eq(await r.incrbyfloat(k + 'f', 0.1), '10.6', 'INCRBYFLOAT 0.1');
    eq(await r.incrbyfloat(k + 'f', '-5.6'), '5', 'INCRBYFLOAT to a whole number');
    eq(await r.incrbyfloat(k + 'f', '1.0e3'), '1005', 'INCRBYFLOAT with an exponent');
    // Redis adds in long double and prints at most 17 decimals: on x86-64, 0.1 + 0.2 is "0.3"
    eq(await r.incrbyfloat(k + 'g', 0.1), '0.1', 'INCRBYFLOAT 0.1');
    eq(await r.incrbyfloat(k + 'g', 0.2), '0.3', 'INCRBYFLOAT 0.1 + 0.2');
    eq(await r.hincrbyfloat(k + 'h', 'f', '2.5e-3'), '0.0025', 'HINCRBYFLOAT small');
    eq(await r.hincrbyfloat(k + 'h', 'f', '-0.0025'), '0', 'HINCRBYFLOAT to zero');
    await r.set(k + 'big', '9223372036854775806');
    const max = await r.incr(k + 'big'); // a JS number cannot hold it exactly; the stored value is checked below
    ok(typeof max === 'number' && max > 9.2e18, `INCR to INT64_MAX: got ${show(max)}`);
    eq(await r.get(k + 'big'), '9223372036854775807', 'GET of INT64_MAX');
    await expectError(r.incr(k + 'big'), 'ERR increment or decrement would overflow', 'INCR past INT64_MAX');
  },

  async 'mset mget'(ctx, k) {
    const r = await ctx.ioredis();
    eq(await r.mset({ [k + 'a']: '1', [k + 'b']: '2', [k + 'c']: '3' }), 'OK', 'MSET (object)');
    eq(await r.mget(k + 'a', k + 'missing', k + 'b', k + 'c'), ['1', null, '2', '3'], 'MGET with a missing key');
    eq(await r.mset(k + 'a', 'x', k + 'd', 'y'), 'OK', 'MSET (arguments)');
    eq(await r.mget([k + 'a', k + 'd']), ['x', 'y'], 'MGET (array)');
    eq(await r.msetnx(k + 'a', 'z', k + 'e', 'z'), 0, 'MSETNX with an existing key');
    eq(await r.msetnx(k + 'e', 'e', k + 'f', 'f'), 1, 'MSETNX with new keys');
    eq(await r.mget(k + 'e', k + 'f'), ['e', 'f'], 'MGET after MSETNX');
    const buf = await r.mgetBuffer(k + 'a', k + 'missing');
    ok(Buffer.isBuffer(buf[0]) && buf[0].toString() === 'x' && buf[1] === null, `MGET buffers: got ${show(buf)}`);
  },

  async 'append strlen getrange'(ctx, k) {
    const r = await ctx.ioredis();
    eq(await r.append(k + 's', 'Hello'), 5, 'APPEND to a missing key');
    eq(await r.append(k + 's', ', World'), 12, 'APPEND');
    eq(await r.get(k + 's'), 'Hello, World', 'GET after APPEND');
    eq(await r.strlen(k + 's'), 12, 'STRLEN');
    eq(await r.strlen(k + 'missing'), 0, 'STRLEN on a missing key');
    eq(await r.getrange(k + 's', 0, 4), 'Hello', 'GETRANGE 0 4');
    eq(await r.getrange(k + 's', -5, -1), 'World', 'GETRANGE -5 -1');
    eq(await r.getrange(k + 's', 7, 100), 'World', 'GETRANGE past the end');
    eq(await r.getrange(k + 'missing', 0, 10), '', 'GETRANGE on a missing key');
    eq(await r.setrange(k + 's', 7, 'Shoal'), 12, 'SETRANGE');
    eq(await r.get(k + 's'), 'Hello, Shoal', 'GET after SETRANGE');
  },

  async 'binary values'(ctx, k) {
    const r = await ctx.ioredis();
    const bytes = allBytes();
    eq(await r.set(k + 'bin', bytes), 'OK', 'SET of a Buffer with bytes 0x00..0xff');
    eq(await r.strlen(k + 'bin'), 256, 'STRLEN of the binary value');
    const back = await r.getBuffer(k + 'bin');
    ok(Buffer.isBuffer(back), `getBuffer: expected a Buffer, got ${show(back)}`);
    ok(back.equals(bytes), `binary value round-trips: got ${show(back)}`);
    const part = await r.getrangeBuffer(k + 'bin', 0, 3);
    ok(part.equals(Buffer.from([0, 1, 2, 3])), `GETRANGE of binary: got ${show(part)}`);
    const key = Buffer.concat([Buffer.from(k), Buffer.from([0, 0xff, 0x0d, 0x0a, 0x80])]);
    await r.set(key, Buffer.from([1, 2, 3]));
    const v = await r.getBuffer(key);
    ok(v.equals(Buffer.from([1, 2, 3])), `binary key: got ${show(v)}`);
    await r.hset(k + 'h', 'f', bytes);
    const hv = await r.hgetBuffer(k + 'h', 'f');
    ok(Buffer.isBuffer(hv) && hv.equals(bytes), `binary hash value round-trips: got ${show(hv)}`);
    await r.sadd(k + 's', bytes, Buffer.from([0]));
    const members = await r.smembersBuffer(k + 's');
    ok(members.length === 2 && members.some((m) => m.equals(bytes)) && members.some((m) => m.equals(Buffer.from([0]))),
      `binary set members round-trip: got ${show(members)}`);
    eq(await r.set(k + 'bin', bytes, 'GET'), bytes.toString(), 'SET GET of a binary value as a string');
    const old = await r.setBuffer(k + 'bin', 'new', 'GET');
    ok(Buffer.isBuffer(old) && old.equals(bytes), `setBuffer GET returns the old binary value: got ${show(old)}`);
  },

  async 'keys'(ctx, k) {
    const r = await ctx.ioredis();
    await r.set(k + 'a', '1');
    await r.set(k + 'b', '2');
    eq(await r.exists(k + 'a'), 1, 'EXISTS one key');
    eq(await r.exists(k + 'a', k + 'b', k + 'missing', k + 'a'), 3, 'EXISTS counts each key given');
    eq(await r.type(k + 'a'), 'string', 'TYPE string');
    await r.rpush(k + 'list', 'x');
    await r.hset(k + 'hash', 'f', 'v');
    await r.sadd(k + 'set', 'm');
    await r.zadd(k + 'zset', 1, 'm');
    eq(await r.type(k + 'list'), 'list', 'TYPE list');
    eq(await r.type(k + 'hash'), 'hash', 'TYPE hash');
    eq(await r.type(k + 'set'), 'set', 'TYPE set');
    eq(await r.type(k + 'zset'), 'zset', 'TYPE zset');
    eq(await r.type(k + 'missing'), 'none', 'TYPE of a missing key');
    eq(await r.rename(k + 'a', k + 'renamed'), 'OK', 'RENAME');
    eq(await r.exists(k + 'a'), 0, 'old name gone after RENAME');
    eq(await r.get(k + 'renamed'), '1', 'value under the new name');
    await expectError(r.rename(k + 'missing', k + 'x'), 'ERR no such key', 'RENAME of a missing key');
    eq(await r.renamenx(k + 'renamed', k + 'b'), 0, 'RENAMENX onto an existing key');
    eq(await r.del(k + 'renamed'), 1, 'DEL one key');
    eq(await r.del(k + 'list', k + 'hash', k + 'missing'), 2, 'DEL counts deleted keys');
    eq(await r.unlink(k + 'set', k + 'zset', k + 'b'), 3, 'UNLINK');
    eq(await r.exists(k + 'renamed', k + 'list', k + 'hash', k + 'set', k + 'zset', k + 'b'), 0, 'EXISTS after DEL');
    eqSorted(await r.keys(k + '*'), [], 'KEYS after deleting everything');
    const r9 = await ctx.ioredis({ db: 9 });
    await r9.flushdb();
    eq(await r9.randomkey(), null, 'RANDOMKEY of an empty database');
    await r9.set(k + 'only', '1');
    eq(await r9.randomkey(), k + 'only', 'RANDOMKEY of a one-key database');
  },

  async 'hashes'(ctx, k) {
    const r = await ctx.ioredis();
    const h = k + 'h';
    eq(await r.hset(h, { name: 'Ada', lang: 'en', visits: '1' }), 3, 'HSET several fields (object)');
    eq(await r.hset(h, 'lang', 'fr', 'city', 'Paris'), 1, 'HSET (arguments) counts only new fields');
    eq(await r.hset(h, new Map([['zip', '75001']])), 1, 'HSET (Map)');
    eq(await r.hget(h, 'name'), 'Ada', 'HGET');
    eq(await r.hget(h, 'lang'), 'fr', 'HGET of an overwritten field');
    eq(await r.hget(h, 'missing'), null, 'HGET of a missing field');
    eq(plain(await r.hgetall(h)), { name: 'Ada', lang: 'fr', visits: '1', city: 'Paris', zip: '75001' },
      'HGETALL as an object');
    eq(plain(await r.hgetall(k + 'missing')), {}, 'HGETALL on a missing key');
    eq(await r.hincrby(h, 'visits', 5), 6, 'HINCRBY');
    eq(await r.hincrby(h, 'newcount', -2), -2, 'HINCRBY on a missing field');
    eq(await r.hincrbyfloat(h, 'score', 1.25), '1.25', 'HINCRBYFLOAT');
    eq(await r.hlen(h), 7, 'HLEN');
    eq(await r.hexists(h, 'name'), 1, 'HEXISTS of a field');
    eq(await r.hexists(h, 'missing'), 0, 'HEXISTS of a missing field');
    eq(await r.hdel(h, 'newcount'), 1, 'HDEL one field');
    eq(await r.hdel(h, 'score', 'zip', 'missing'), 2, 'HDEL several fields');
    eq(await r.hlen(h), 4, 'HLEN after HDEL');
    eqSorted(await r.hkeys(h), ['name', 'lang', 'visits', 'city'], 'HKEYS');
    eqSorted(await r.hvals(h), ['Ada', 'fr', '6', 'Paris'], 'HVALS');
    eq(await r.hmget(h, 'name', 'missing', 'city'), ['Ada', null, 'Paris'], 'HMGET');
    eq(await r.hmset(h, { a: '1', b: '2' }), 'OK', 'HMSET');
    eq(await r.hsetnx(h, 'a', 'x'), 0, 'HSETNX on an existing field');
    eq(await r.hstrlen(h, 'city'), 5, 'HSTRLEN');
    eq(plain(await r.hgetall(h)), { name: 'Ada', lang: 'fr', visits: '6', city: 'Paris', a: '1', b: '2' },
      'HGETALL after HMSET');
  },

  async 'lists'(ctx, k) {
    const r = await ctx.ioredis();
    const l = k + 'l';
    eq(await r.rpush(l, 'b', 'c'), 2, 'RPUSH several');
    eq(await r.lpush(l, 'a'), 3, 'LPUSH one');
    eq(await r.lpush(l, 'y', 'z'), 5, 'LPUSH several');
    eq(await r.lrange(l, 0, -1), ['z', 'y', 'a', 'b', 'c'], 'LRANGE 0 -1');
    eq(await r.lrange(l, -2, -1), ['b', 'c'], 'LRANGE -2 -1');
    eq(await r.llen(l), 5, 'LLEN');
    eq(await r.lindex(l, 0), 'z', 'LINDEX 0');
    eq(await r.lindex(l, -1), 'c', 'LINDEX -1');
    eq(await r.lindex(l, 99), null, 'LINDEX out of range');
    eq(await r.lpop(l), 'z', 'LPOP');
    eq(await r.rpop(l), 'c', 'RPOP');
    eq(await r.lpop(l, 2), ['y', 'a'], 'LPOP with count');
    eq(await r.rpush(l, 'd', 'e', 'f'), 4, 'RPUSH more');
    eq(await r.rpop(l, 2), ['f', 'e'], 'RPOP with count');
    eq(await r.rpop(l, 10), ['d', 'b'], 'RPOP with a count larger than the list');
    eq(await r.exists(l), 0, 'an emptied list is deleted');
    eq(await r.lpop(l), null, 'LPOP on a missing key');
    eq(await r.rpop(l, 3), null, 'RPOP with count on a missing key');
    await r.rpush(l, 'x', 'a', 'x', 'b', 'x', 'c', 'x');
    eq(await r.lrem(l, 2, 'x'), 2, 'LREM 2 from the head');
    eq(await r.lrem(l, -1, 'x'), 1, 'LREM -1 from the tail');
    eq(await r.lrange(l, 0, -1), ['a', 'b', 'x', 'c'], 'LRANGE after LREM');
    eq(await r.lrem(l, 0, 'x'), 1, 'LREM 0 (all)');
    eq(await r.lset(l, 1, 'B'), 'OK', 'LSET');
    eq(await r.lrange(l, 0, -1), ['a', 'B', 'c'], 'LRANGE after LSET');
    await expectError(r.lset(l, 10, 'x'), 'ERR index out of range', 'LSET out of range');
    await expectError(r.lset(k + 'missing', 0, 'x'), 'ERR no such key', 'LSET on a missing key');
    await r.rpush(l, 'd', 'e', 'f');
    eq(await r.ltrim(l, 1, -2), 'OK', 'LTRIM');
    eq(await r.lrange(l, 0, -1), ['B', 'c', 'd', 'e'], 'LRANGE after LTRIM');
    eq(await r.ltrim(l, 5, 10), 'OK', 'LTRIM to nothing');
    eq(await r.exists(l), 0, 'LTRIM to nothing deletes the list');
  },

  async 'sets'(ctx, k) {
    const r = await ctx.ioredis();
    const a = k + 'a', b = k + 'b';
    eq(await r.sadd(a, 'x', 'y', 'z', 'x'), 3, 'SADD counts distinct new members');
    eq(await r.sadd(a, ['x', 'q']), 1, 'SADD (array)');
    eq(await r.srem(a, 'q'), 1, 'SREM');
    eq(await r.sadd(b, 'y', 'z', 'w'), 3, 'SADD another set');
    eqSorted(await r.smembers(a), ['x', 'y', 'z'], 'SMEMBERS');
    eq(await r.sismember(a, 'x'), 1, 'SISMEMBER of a member');
    eq(await r.sismember(a, 'w'), 0, 'SISMEMBER of a non-member');
    eq(await r.smismember(a, 'x', 'w'), [1, 0], 'SMISMEMBER');
    eq(await r.scard(a), 3, 'SCARD');
    eqSorted(await r.sinter(a, b), ['y', 'z'], 'SINTER');
    eqSorted(await r.sunion(a, b), ['w', 'x', 'y', 'z'], 'SUNION');
    eqSorted(await r.sdiff(a, b), ['x'], 'SDIFF');
    eq(await r.sinterstore(k + 'i', a, b), 2, 'SINTERSTORE');
    eq(await r.sunionstore(k + 'u', a, b), 4, 'SUNIONSTORE');
    eq(await r.sdiffstore(k + 'd', b, a), 1, 'SDIFFSTORE');
    eqSorted(await r.smembers(k + 'd'), ['w'], 'SMEMBERS of the SDIFFSTORE result');
    eq(await r.srem(a, 'x', 'nope'), 1, 'SREM counts removed members');
    eqSorted(await r.smembers(a), ['y', 'z'], 'SMEMBERS after SREM');
    const popped = await r.spop(b, 3);
    eqSorted(popped, ['w', 'y', 'z'], 'SPOP with count takes the whole set');
    eq(await r.exists(b), 0, 'SPOP of every member deletes the set');
    const rnd = await r.srandmember(a, 5);
    eqSorted(rnd, ['y', 'z'], 'SRANDMEMBER with a count larger than the set');
  },

  async 'sorted sets'(ctx, k) {
    const r = await ctx.ioredis();
    const z = k + 'z';
    eq(await r.zadd(z, 1, 'one', 2, 'two', 3, 'three', 2.5, 'twohalf'), 4, 'ZADD several');
    eq(await r.zadd(z, 4, 'one'), 0, 'ZADD updating a score');
    eq(await r.zadd(z, 'NX', 9, 'one', 0, 'zero'), 1, 'ZADD NX');
    eq(await r.zadd(z, 'XX', 'CH', 4, 'one', 7, 'nope'), 0, 'ZADD XX CH with an unchanged score');
    eq(await r.zcard(z), 5, 'ZCARD');
    eq(await r.zrange(z, 0, -1), ['zero', 'two', 'twohalf', 'three', 'one'], 'ZRANGE');
    eq(await r.zrange(z, 0, 1, 'WITHSCORES'), ['zero', '0', 'two', '2'], 'ZRANGE WITHSCORES');
    eq(await r.zrange(z, '-inf', '+inf', 'BYSCORE', 'LIMIT', 1, 2), ['two', 'twohalf'], 'ZRANGE BYSCORE LIMIT');
    eq(await r.zrange(z, 2, 3, 'BYSCORE', 'WITHSCORES'), ['two', '2', 'twohalf', '2.5', 'three', '3'],
      'ZRANGE BYSCORE WITHSCORES');
    eq(await r.zrangebyscore(z, '(2', '+inf', 'LIMIT', 0, 2), ['twohalf', 'three'], 'ZRANGEBYSCORE LIMIT');
    eq(await r.zrevrangebyscore(z, 10, 3), ['one', 'three'], 'ZREVRANGEBYSCORE');
    eq(await r.zrevrange(z, 0, 2), ['one', 'three', 'twohalf'], 'ZREVRANGE');
    eq(await r.zrevrange(z, 0, 0, 'WITHSCORES'), ['one', '4'], 'ZREVRANGE WITHSCORES');
    eq(await r.zscore(z, 'twohalf'), '2.5', 'ZSCORE');
    eq(await r.zscore(z, 'missing'), null, 'ZSCORE of a missing member');
    eq(await r.zmscore(z, 'two', 'missing'), ['2', null], 'ZMSCORE');
    eq(await r.zincrby(z, 1.5, 'two'), '3.5', 'ZINCRBY');
    eq(await r.zincrby(z, 5, 'new'), '5', 'ZINCRBY of a new member');
    eq(await r.zrank(z, 'zero'), 0, 'ZRANK');
    eq(await r.zrank(z, 'two'), 3, 'ZRANK after ZINCRBY');
    eq(await r.zrank(z, 'missing'), null, 'ZRANK of a missing member');
    eq(await r.zrevrank(z, 'new'), 0, 'ZREVRANK');
    eq(await r.zcount(z, 2, 4), 4, 'ZCOUNT');
    eq(await r.zcount(z, '-inf', '+inf'), 6, 'ZCOUNT -inf +inf');
    eq(await r.zpopmin(z), ['zero', '0'], 'ZPOPMIN');
    eq(await r.zpopmin(z, 2), ['twohalf', '2.5', 'three', '3'], 'ZPOPMIN with count');
    eq(await r.zpopmax(z), ['new', '5'], 'ZPOPMAX');
    eq(await r.zrem(z, 'two', 'missing'), 1, 'ZREM');
    eq(await r.zcard(z), 1, 'ZCARD after ZREM');
    eq(await r.zpopmin(k + 'missing'), [], 'ZPOPMIN on a missing key');
    await r.zadd(k + 'r', 1, 'a', 2, 'b', 3, 'c', 4, 'd');
    eq(await r.zremrangebyrank(k + 'r', 0, 1), 2, 'ZREMRANGEBYRANK');
    eq(await r.zremrangebyscore(k + 'r', '(3', 10), 1, 'ZREMRANGEBYSCORE');
    eq(await r.zrange(k + 'r', 0, -1, 'WITHSCORES'), ['c', '3'], 'ZRANGE after ZREMRANGE*');
    eq(await r.zadd(k + 'inc', 'INCR', 2, 'm'), '2', 'ZADD INCR');
    eq(await r.zadd(k + 'inc', 'GT', 1, 'm'), 0, 'ZADD GT with a smaller score');
    eq(await r.zscore(k + 'inc', 'm'), '2', 'ZADD GT kept the larger score');
    eq(await r.zadd(k + 'inc', 'LT', 'CH', 1, 'm'), 1, 'ZADD LT CH with a smaller score');
    // scores come back as strings the server formats; Redis 7.0 prints 17 significant digits
    // ("0.10000000000000001") and 7.2 the shortest form ("0.1"), so those compare as numbers
    await r.zadd(k + 'fmt', 0.1, 'tenth', 1e20, 'big', '-inf', 'ninf', '+inf', 'pinf', -0.5, 'neg', 1e-7, 'tiny');
    eq(Number(await r.zscore(k + 'fmt', 'tenth')), 0.1, 'ZSCORE 0.1 (as a number)');
    eq(await r.zincrby(k + 'fmt', 0.2, 'tenth'), '0.30000000000000004', 'ZINCRBY 0.1 + 0.2');
    eq(Number(await r.zscore(k + 'fmt', 'big')), 1e20, 'ZSCORE 1e20 (as a number)');
    eq(Number(await r.zscore(k + 'fmt', 'tiny')), 1e-7, 'ZSCORE 1e-7 (as a number)');
    eq(await r.zscore(k + 'fmt', 'ninf'), '-inf', 'ZSCORE -inf');
    eq(await r.zscore(k + 'fmt', 'pinf'), 'inf', 'ZSCORE +inf');
    eq(await r.zscore(k + 'fmt', 'neg'), '-0.5', 'ZSCORE -0.5');
    eq(await r.zrange(k + 'fmt', 0, -1), ['ninf', 'neg', 'tiny', 'tenth', 'big', 'pinf'], 'ZRANGE with infinities');
    eq(await r.zcount(k + 'fmt', '(-inf', '(inf'), 4, 'ZCOUNT excluding the infinities');
  },

  async 'pipeline'(ctx, k) {
    const r = await ctx.ioredis();
    const N = 1000;
    const p = r.pipeline();
    for (let i = 0; i < N; i++) {
      if (i % 3 === 0) p.set(`${k}${i}`, `v${i}`);
      else if (i % 3 === 1) p.incrby(k + 'counter', i);
      else p.rpush(k + 'list', String(i));
    }
    eq(p.length, N, 'pipeline length');
    const replies = await p.exec();
    eq(replies.length, N, 'pipeline reply count');
    let sum = 0, len = 0;
    for (let i = 0; i < N; i++) {
      const [err, v] = replies[i];
      eq(err, null, `pipeline error ${i}`);
      if (i % 3 === 0) eq(v, 'OK', `pipeline reply ${i} (SET)`);
      else if (i % 3 === 1) eq(v, (sum += i), `pipeline reply ${i} (INCRBY)`);
      else eq(v, ++len, `pipeline reply ${i} (RPUSH)`);
    }
    const g = r.pipeline();
    for (let i = 0; i < N; i += 3) g.get(`${k}${i}`);
    g.lrange(k + 'list', 0, 2);
    g.get(k + 'counter');
    const got = await g.exec();
    for (let i = 0, j = 0; i < N; i += 3, j++) eq(got[j], [null, `v${i}`], `pipelined GET ${i}`);
    eq(got[got.length - 2], [null, ['2', '5', '8']], 'pipelined LRANGE');
    eq(got[got.length - 1], [null, String(sum)], 'pipelined GET of the counter');
    // pipeline built from an array, with a failing command in the middle
    const mixed = await r.pipeline([
      ['set', k + 's', 'x'],
      ['incr', k + 's'],
      ['get', k + 's'],
      ['hset', k + 'h', 'f', 'v'],
      ['hgetall', k + 'h'],
    ]).exec();
    eq(mixed[0], [null, 'OK'], 'pipeline reply before the error');
    ok(mixed[1][0] instanceof Error && mixed[1][0].message.startsWith('ERR value is not an integer'),
      `pipeline reply of the failing command: got ${show(String(mixed[1][0]))}`);
    eq(mixed[2], [null, 'x'], 'pipeline reply after the error');
    eq(mixed[3], [null, 1], 'pipelined HSET');
    eq(mixed[4][0], null, 'pipelined HGETALL error');
    eq(plain(mixed[4][1]), { f: 'v' }, 'pipelined HGETALL as an object');
    // commands issued concurrently without a pipeline
    const lens = await Promise.all(Array.from({ length: N }, (_, i) => r.rpush(k + 'c', String(i))));
    for (let i = 0; i < N; i++) eq(lens[i], i + 1, `concurrent RPUSH ${i}`);
    // the same with ioredis's automatic pipelining
    const auto = await ctx.ioredis({ enableAutoPipelining: true });
    const items = await Promise.all(Array.from({ length: N }, (_, i) => auto.lindex(k + 'c', i)));
    for (let i = 0; i < N; i++) eq(items[i], String(i), `auto-pipelined LINDEX ${i}`);
  },

  async 'transactions'(ctx, k) {
    const r = await ctx.ioredis();
    const replies = await r.multi()
      .set(k + 'a', '1')
      .incr(k + 'a')
      .incrby(k + 'a', 10)
      .get(k + 'a')
      .rpush(k + 'l', 'x', 'y')
      .lrange(k + 'l', 0, -1)
      .hset(k + 'h', { f: 'v' })
      .hgetall(k + 'h')
      .exec();
    eq(replies.length, 8, 'EXEC reply count');
    eq(replies.slice(0, 7), [[null, 'OK'], [null, 2], [null, 12], [null, '12'], [null, 2], [null, ['x', 'y']], [null, 1]],
      'EXEC replies');
    eq(replies[7][0], null, 'HGETALL inside MULTI error');
    eq(plain(replies[7][1]), { f: 'v' }, 'HGETALL inside MULTI as an object');
    // a command failing at run time does not stop the others
    const mixed = await r.multi().set(k + 's', 'str').lpush(k + 's', 'x').get(k + 's').exec();
    eq(mixed[0], [null, 'OK'], 'EXEC reply before the failing command');
    ok(mixed[1][0] instanceof Error && mixed[1][0].message.startsWith('WRONGTYPE'),
      `EXEC reply of the failing command: got ${show(String(mixed[1][0]))}`);
    eq(mixed[2], [null, 'str'], 'EXEC reply after the failing command');
    // a command rejected while queueing discards the transaction
    const err = await expectError(r.multi().set(k + 'q', '1').set(k + 'q').exec(), 'EXECABORT',
      'EXEC after a command with the wrong number of arguments');
    ok(Array.isArray(err.previousErrors) && err.previousErrors.length === 1 &&
      err.previousErrors[0].message.startsWith('ERR wrong number of arguments'),
    `EXECABORT previousErrors: got ${show(err.previousErrors && err.previousErrors.map(String))}`);
    eq(await r.exists(k + 'q'), 0, 'the discarded transaction wrote nothing');
    // MULTI/EXEC sent one by one, without a pipeline, and DISCARD
    eq(await r.multi({ pipeline: false }), 'OK', 'MULTI (no pipeline)');
    eq(await r.set(k + 'np', '1'), 'QUEUED', 'SET inside MULTI');
    eq(await r.incr(k + 'np'), 'QUEUED', 'INCR inside MULTI');
    eq(await r.exec(), [[null, 'OK'], [null, 2]], 'EXEC (no pipeline)');
    eq(await r.multi({ pipeline: false }), 'OK', 'MULTI before DISCARD');
    eq(await r.set(k + 'np', 'discarded'), 'QUEUED', 'SET before DISCARD');
    eq(await r.discard(), 'OK', 'DISCARD');
    eq(await r.get(k + 'np'), '2', 'DISCARD dropped the queued command');
    eq(await r.ping(), 'PONG', 'PING after the transactions');
  },

  async 'watch'(ctx, k) {
    const r = await ctx.ioredis();
    const other = await ctx.ioredis();
    await r.set(k + 'bal', '100');
    eq(await r.watch(k + 'bal'), 'OK', 'WATCH');
    const bal = Number(await r.get(k + 'bal'));
    eq(await r.multi().set(k + 'bal', String(bal - 10)).exec(), [[null, 'OK']], 'EXEC with an untouched WATCH');
    eq(await r.get(k + 'bal'), '90', 'GET after the watched EXEC');
    // a write from a second connection aborts EXEC: ioredis resolves exec() with null
    eq(await r.watch(k + 'bal', k + 'other'), 'OK', 'WATCH two keys');
    eq(await other.set(k + 'bal', '500'), 'OK', 'SET from another connection');
    eq(await r.multi().set(k + 'bal', '80').exec(), null, 'EXEC after a watched key changed');
    eq(await r.get(k + 'bal'), '500', 'the aborted transaction wrote nothing');
    // WATCH then UNWATCH
    await r.watch(k + 'bal');
    await other.set(k + 'bal', '600');
    eq(await r.unwatch(), 'OK', 'UNWATCH');
    eq(await r.multi().incr(k + 'bal').exec(), [[null, 601]], 'EXEC after UNWATCH');
    // a watched key deleted by another connection
    await r.watch(k + 'bal');
    eq(await other.del(k + 'bal'), 1, 'DEL from another connection');
    eq(await r.multi().set(k + 'bal', '1').exec(), null, 'EXEC after a watched key was deleted');
    eq(await r.exists(k + 'bal'), 0, 'the aborted transaction did not recreate the key');
  },

  async 'scan'(ctx, k) {
    const r = await ctx.ioredis();
    const expected = [];
    const p = r.pipeline();
    for (let i = 0; i < 250; i++) {
      expected.push(`${k}key:${i}`);
      p.set(`${k}key:${i}`, String(i));
    }
    for (let i = 0; i < 30; i++) p.set(`${k}other:${i}`, 'x');
    await p.exec();
    const collect = (stream) => new Promise((resolve, reject) => {
      const seen = new Set();
      let batches = 0;
      stream.on('data', (keys) => {
        batches++;
        for (const key of keys) seen.add(key);
      });
      stream.on('end', () => resolve({ seen, batches }));
      stream.on('error', reject);
    });
    const { seen, batches } = await collect(r.scanStream({ match: `${k}key:*`, count: 20 }));
    eqSorted([...seen], expected, 'keys collected by scanStream match count');
    ok(batches > 1, `SCAN COUNT 20 over 280 keys took ${batches} call(s); expected several`);
    const buf = await collect(r.scanBufferStream({ match: `${k}other:*`, count: 7 }));
    eqSorted([...buf.seen].map((b) => (Buffer.isBuffer(b) ? b.toString() : `not a Buffer: ${show(b)}`)),
      Array.from({ length: 30 }, (_, i) => `${k}other:${i}`), 'keys collected by scanBufferStream');
    // SCAN by hand: cursor strings until '0'
    let cursor = '0';
    const manual = new Set();
    let calls = 0;
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${k}key:1*`, 'COUNT', 25);
      ok(typeof next === 'string', `SCAN cursor is a string, got ${show(next)}`);
      cursor = next;
      for (const key of keys) manual.add(key);
      ok(++calls < 10000, 'SCAN does not terminate');
    } while (cursor !== '0');
    eqSorted([...manual], expected.filter((x) => x.startsWith(`${k}key:1`)), 'keys collected by SCAN MATCH COUNT');
    await r.rpush(k + 'alist', 'x');
    const lists = await collect(r.scanStream({ match: `${k}*`, type: 'list', count: 50 }));
    eq([...lists.seen], [k + 'alist'], 'scanStream type list');
  },

  async 'select database'(ctx, k) {
    const r0 = await ctx.ioredis();
    const r1 = await ctx.ioredis({ db: 1 });
    await r0.set(k + 'x', 'db0');
    await r1.set(k + 'x', 'db1');
    await r1.set(k + 'only1', 'yes');
    eq(await r0.get(k + 'x'), 'db0', 'GET in db 0');
    eq(await r1.get(k + 'x'), 'db1', 'GET in db 1 (db option)');
    eq(await r0.exists(k + 'only1'), 0, 'db 0 does not see a db 1 key');
    eq(await r1.exists(k + 'only1'), 1, 'db 1 sees its key');
    eqSorted(await r1.keys(k + '*'), [k + 'x', k + 'only1'], 'KEYS in db 1');
    eqSorted(await r0.keys(k + '*'), [k + 'x'], 'KEYS in db 0');
    const size1 = await r1.dbsize();
    await r1.set(k + 'more', '1');
    eq(await r1.dbsize(), size1 + 1, 'DBSIZE of db 1 counts a new key');
    eq(await r0.select(3), 'OK', 'SELECT 3');
    eq(await r0.get(k + 'x'), null, 'db 3 is empty');
    await r0.set(k + 'x', 'db3');
    eq(await r0.select(1), 'OK', 'SELECT 1');
    eq(await r0.get(k + 'only1'), 'yes', 'after SELECT 1 the db 1 key is visible');
    eq(await r0.select(0), 'OK', 'SELECT 0');
    eq(await r0.get(k + 'x'), 'db0', 'back in db 0');
    const r3 = await ctx.ioredis({ db: 3 });
    eq(await r3.get(k + 'x'), 'db3', 'db 3 kept its key');
    eq(await r3.flushdb(), 'OK', 'FLUSHDB in db 3');
    eq(await r3.dbsize(), 0, 'db 3 emptied');
    eq(await r1.get(k + 'x'), 'db1', 'FLUSHDB of db 3 left db 1 alone');
    // a transaction that switches database
    const res = await r0.multi().select(1).get(k + 'only1').select(0).exec();
    eq(res, [[null, 'OK'], [null, 'yes'], [null, 'OK']], 'SELECT inside MULTI');
    eq(await r0.get(k + 'x'), 'db0', 'db 0 after the transaction');
  },

  async 'errors'(ctx, k) {
    const r = await ctx.ioredis();
    await r.set(k + 's', 'text');
    const e1 = await expectError(r.lpush(k + 's', 'x'), 'WRONGTYPE', 'LPUSH on a string key');
    eq(e1.message, 'WRONGTYPE Operation against a key holding the wrong kind of value', 'WRONGTYPE message');
    eq(e1.name, 'ReplyError', 'error name');
    await expectError(r.hgetall(k + 's'), 'WRONGTYPE', 'HGETALL on a string key');
    await r.rpush(k + 'l', 'x');
    await expectError(r.get(k + 'l'), 'WRONGTYPE', 'GET on a list key');
    await expectError(r.zadd(k + 'l', 1, 'x'), 'WRONGTYPE', 'ZADD on a list key');
    await expectError(r.incr(k + 's'), 'ERR value is not an integer', 'INCR on a non-integer');
    await expectError(r.decrby(k + 's', 2), 'ERR value is not an integer', 'DECRBY on a non-integer');
    await expectError(r.incrbyfloat(k + 's', 1), 'ERR value is not a valid float', 'INCRBYFLOAT on a non-number');
    await expectError(r.zincrby(k + 'z', 'abc', 'm'), 'ERR value is not a valid float', 'ZINCRBY with a bad increment');
    await expectError(r.call('NOSUCHCOMMAND', 'x'), 'ERR unknown command', 'an unknown command');
    await expectError(r.call('GET'), 'ERR wrong number of arguments', 'GET without a key');
    await expectError(r.set(k + 's', 'v', 'PX', -5), 'ERR invalid expire time', 'SET PX -5');
    eq(await r.get(k + 's'), 'text', 'the failed commands changed nothing');
    eq(await r.ping(), 'PONG', 'the connection is usable after errors');
  },
};

// ioredis with replyMapping "resp3": maps as objects and doubles as numbers (RESP3 only)
const ioredisResp3MappingCases = {
  async 'resp3 reply mapping'(ctx, k) {
    const r = await ctx.ioredis({ replyMapping: 'resp3' });
    eq(pairs(await r.hello()).proto, 3, 'HELLO proto');
    await r.hset(k + 'h', { a: '1', b: '2', c: '3' });
    eq(plain(await r.hgetall(k + 'h')), { a: '1', b: '2', c: '3' }, 'HGETALL as an object');
    await r.zadd(k + 'z', 1, 'one', 2.5, 'twohalf', 3, 'three');
    eq(await r.zrange(k + 'z', 0, -1, 'WITHSCORES'), [['one', 1], ['twohalf', 2.5], ['three', 3]],
      'ZRANGE WITHSCORES as [member, score] pairs');
    eq(await r.zscore(k + 'z', 'twohalf'), 2.5, 'ZSCORE as a number');
    eq(await r.zincrby(k + 'z', 1, 'one'), 2, 'ZINCRBY as a number');
    eq(await r.zpopmin(k + 'z'), ['one', 2], 'ZPOPMIN');
    eq(await r.zmscore(k + 'z', 'three', 'missing'), [3, null], 'ZMSCORE as numbers');
    eq(await r.incrbyfloat(k + 'f', 1.5), '1.5', 'INCRBYFLOAT stays a bulk string');
    eq(plain(await r.config('GET', 'maxmemory-policy')), { 'maxmemory-policy': 'noeviction' },
      'CONFIG GET as an object');
  },
};

// ---------------------------------------------------------------------------------------------
// runner

const VARIANTS = [
  { label: 'node-redis resp3', resp: 3, cases: nodeRedisCases },
  { label: 'node-redis resp2', resp: 2, cases: nodeRedisCases },
  { label: 'ioredis resp3', resp: 3, cases: { ...ioredisCases, ...ioredisResp3MappingCases } },
  { label: 'ioredis resp2', resp: 2, cases: ioredisCases },
];

function slug(s) {
  return s.replace(/[^a-z0-9]+/gi, '-').replace(/^-|-$/g, '');
}

async function runCase(name, variant, fn) {
  const ctx = new Ctx(variant);
  const prefix = `${slug(name)}:`;
  let timer;
  try {
    await Promise.race([
      fn(ctx, prefix),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${CASE_TIMEOUT_MS} ms`)), CASE_TIMEOUT_MS);
      }),
    ]);
    return null;
  } catch (e) {
    return e;
  } finally {
    clearTimeout(timer);
    ctx.close();
  }
}

// A connection of its own, used before the cases (FLUSHALL) and after a case timed out (PING).
async function adminCall(...args) {
  const r = new Redis({
    host: HOST, port: PORT, connectTimeout: TIMEOUT_MS, commandTimeout: TIMEOUT_MS,
    maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true,
  });
  r.on('error', () => {});
  try {
    await r.connect();
    return await r.call(...args);
  } catch (e) {
    throw new Error(`${args[0]} on ${HOST}:${PORT} failed: ${e.message}`);
  } finally {
    r.disconnect();
  }
}

async function main() {
  process.on('unhandledRejection', (e) => {
    process.stderr.write(`unhandled rejection (ignored): ${e && e.stack ? e.stack : e}\n`);
  });
  await adminCall('FLUSHALL');
  let passed = 0, failed = 0;
  let serverGone = null; // once the server stops answering, the remaining cases fail at once
  for (const variant of VARIANTS) {
    for (const [caseName, fn] of Object.entries(variant.cases)) {
      const name = `${variant.label}: ${caseName}`;
      const err = serverGone ? new Error(`not run: ${serverGone}`) : await runCase(name, variant, fn);
      if (err && !serverGone && /timed out after/.test(err.message)) {
        try {
          await adminCall('PING');
        } catch (e) {
          serverGone = `the server stopped answering (PING: ${e.message})`;
        }
      }
      if (err) {
        failed++;
        const msg = (err && err.message ? err.message : String(err)).replace(/\s*\n\s*/g, ' ');
        console.log(`not ok ${name}: ${msg}`);
      } else {
        passed++;
        console.log(`ok ${name}`);
      }
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.log(`not ok setup: ${e && e.message ? e.message : e}`);
    process.exit(1);
  },
);
