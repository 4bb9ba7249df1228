#!/usr/bin/env node
// What applications do with node-postgres (`pg`), case by case (see tests/drivers/run.py for the
// output protocol: `ok <case>` / `not ok <case>: <message>`). Connects with the libpq environment
// variables (PGHOST, PGPORT, PGUSER, PGDATABASE); each case uses its own clients and tables, so one
// failure does not spill into the next. The tls_ cases use the certificates run.py made for the run
// (SHOAL_TEST_SSLROOTCERT and the others of its TestPki.env()). Run `node pg_suite.js [case ...] [-v]`.
'use strict'

const crypto = require('node:crypto')
const fs = require('node:fs')
const util = require('node:util')
const { Readable } = require('node:stream')
const { pipeline } = require('node:stream/promises')
const pg = require('pg')
const Cursor = require('pg-cursor')
const { from: copyFrom, to: copyTo } = require('pg-copy-streams')

const { Client, Pool } = pg

// A case that takes longer than this is reported as hung, and the suite goes on.
const CASE_TIMEOUT_MS = 20000

const CASES = []

function testCase(name, fn) {
  CASES.push({ name, fn })
}

class CheckError extends Error {}

function show(v) {
  return util.inspect(v, { depth: 6, breakLength: Infinity })
}

function check(got, want, what = '') {
  if (!util.isDeepStrictEqual(got, want)) {
    throw new CheckError(`${what} got ${show(got)}, want ${show(want)}`)
  }
}

function assert(cond, what) {
  if (!cond) throw new CheckError(what)
}

// A connected client that never crashes the process with an unhandled 'error' event.
async function connect(config) {
  const c = new Client(config)
  c.on('error', () => {})
  await c.connect()
  return c
}

// Runs fn with connected clients, then ends them whatever happens.
async function withClients(n, fn, config) {
  const clients = []
  try {
    for (let i = 0; i < n; i++) clients.push(await connect(config))
    return await fn(...clients)
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})))
  }
}

const withClient = (fn, config) => withClients(1, fn, config)

// Awaits a promise that must reject with a PostgreSQL error of this SQLSTATE; returns the error.
async function expectError(promise, code, what = '') {
  let result
  try {
    result = await promise
  } catch (e) {
    if (e.code !== code) {
      throw new CheckError(`${what} expected SQLSTATE ${code}, got ${e.code || 'no code'}: ${e.message}`)
    }
    return e
  }
  throw new CheckError(`${what} expected SQLSTATE ${code}, but it succeeded: ${show(result && result.rows)}`)
}

function waitFor(pred, ms, what) {
  return new Promise((resolve, reject) => {
    const start = Date.now()
    const timer = setInterval(() => {
      if (pred()) {
        clearInterval(timer)
        resolve()
      } else if (Date.now() - start > ms) {
        clearInterval(timer)
        reject(new CheckError(`timed out after ${ms} ms waiting for ${what}`))
      }
    }, 10)
  })
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// pg-cursor's callback API, as promises (works whether or not the pinned version returns promises).
function cursorRead(cursor, n) {
  return new Promise((resolve, reject) => cursor.read(n, (err, rows) => (err ? reject(err) : resolve(rows))))
}

function cursorClose(cursor) {
  return new Promise((resolve, reject) => cursor.close((err) => (err ? reject(err) : resolve())))
}

async function copyIn(client, sql, chunks) {
  const stream = client.query(copyFrom(sql))
  await pipeline(Readable.from(chunks), stream)
  return stream
}

async function copyOut(client, sql) {
  const stream = client.query(copyTo(sql))
  const parts = []
  for await (const chunk of stream) parts.push(chunk)
  return { data: Buffer.concat(parts), stream }
}

// ---------------------------------------------------------------------------------------------
// Connection

testCase('connect_and_server_parameters', async () => {
  const c = new Client({ application_name: 'node-suite' })
  c.on('error', () => {})
  const params = {}
  // node-postgres keeps no table of ParameterStatus values; the connection emits each message.
  c.connection.on('parameterStatus', (m) => {
    params[m.parameterName] = m.parameterValue
  })
  await c.connect()
  try {
    check(params.server_encoding, 'UTF8', 'server_encoding')
    check(params.client_encoding, 'UTF8', 'client_encoding')
    check(params.integer_datetimes, 'on', 'integer_datetimes')
    check(params.standard_conforming_strings, 'on', 'standard_conforming_strings')
    check(params.DateStyle, 'ISO, MDY', 'DateStyle')
    check(params.application_name, 'node-suite', 'application_name reported at startup')
    const major = parseInt(params.server_version, 10)
    assert(major >= 10, `server_version ${show(params.server_version)}`)
    assert(Number.isInteger(c.processID) && c.processID !== 0, `processID ${show(c.processID)}`)
    const r = await c.query(
      'SELECT pg_backend_pid() AS pid, current_user AS u, current_database() AS db, ' +
        "current_setting('application_name') AS app"
    )
    check(r.rows, [{ pid: c.processID, u: 'postgres', db: 'postgres', app: 'node-suite' }])
    await c.query("SET application_name = 'renamed'")
    check(params.application_name, 'renamed', 'application_name reported after SET')
  } finally {
    await c.end()
  }
})

// ---------------------------------------------------------------------------------------------
// Type round trips: a parameter as node-postgres sends it (text, except a Buffer, which goes
// binary), stored beside a serial key and a default, read back through node-postgres' parsers,
// and found again with WHERE v = $1.

const sameTime = (want) => (got) => got instanceof Date && got.getTime() === want.getTime()

const ROUND_TRIP = [
  ['smallint', 'smallint', 32767, 32767],
  ['integer', 'integer', -2147483648, -2147483648],
  // int8 comes back as a string by default (it does not fit a JS number).
  ['bigint', 'bigint', '9223372036854775807', '9223372036854775807'],
  ['real', 'real', 1.5, 1.5],
  ['double', 'double precision', 2.718281828459045, 2.718281828459045],
  // numeric comes back as a string by default.
  ['numeric', 'numeric', '12345678901234567890.123456789', '12345678901234567890.123456789'],
  ['numeric_scale', 'numeric(10,2)', '-99.95', '-99.95'],
  ['numeric_from_number', 'numeric(12,4)', 3.25, '3.2500'],
  ['text', 'text', "héllo \u2603 'quoted' \\ back \"dq\"", "héllo \u2603 'quoted' \\ back \"dq\""],
  ['varchar', 'varchar(20)', 'short', 'short'],
  ['char', 'char(5)', 'ab', 'ab   '],
  ['boolean', 'boolean', true, true],
  ['bytea', 'bytea', Buffer.from([0, 3, 255, 92, 120]), Buffer.from([0, 3, 255, 92, 120])],
  // date parses to a local-midnight Date.
  ['date', 'date', '2024-02-29', (got) => got instanceof Date && got.getFullYear() === 2024 && got.getMonth() === 1 && got.getDate() === 29],
  ['time', 'time', '13:14:15.123456', '13:14:15.123456'],
  ['timetz', 'timetz', '13:14:15+02', '13:14:15+02'],
  // timestamp (without time zone) parses as local time, to millisecond precision.
  ['timestamp', 'timestamp', '2024-01-02 03:04:05.678901', sameTime(new Date(2024, 0, 2, 3, 4, 5, 678))],
  ['timestamptz', 'timestamptz', new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 678)), sameTime(new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 678)))],
  // interval parses to a postgres-interval object, which goes back in through its toPostgres().
  ['interval', 'interval', '3 days 01:02:03', (got) => got && got.days === 3 && got.hours === 1 && got.minutes === 2 && got.seconds === 3 && !got.years && !got.months, 'read'],
  ['uuid', 'uuid', '12345678-1234-5678-1234-567812345678', '12345678-1234-5678-1234-567812345678'],
  ['inet', 'inet', '192.168.1.0/24', '192.168.1.0/24'],
]

// [case suffix, column type, parameter, expected value or predicate, 'read' to search with the
// value as read back instead of the parameter]
ROUND_TRIP.forEach(([name, sqltype, value, want, searchWith]) => {
  testCase(`round_trip_${name}`, () =>
    withClient(async (c) => {
      const table = `rt_${name}`
      await c.query(`CREATE TABLE ${table} (id serial PRIMARY KEY, v ${sqltype}, note text DEFAULT 'd')`)
      const ins = await c.query(`INSERT INTO ${table} (v) VALUES ($1) RETURNING id, note`, [value])
      check(ins.rows, [{ id: 1, note: 'd' }], 'INSERT RETURNING')
      const got = (await c.query(`SELECT v FROM ${table}`)).rows[0].v
      if (typeof want === 'function') {
        assert(want(got), `${sqltype}: stored ${show(value)}, read ${show(got)}`)
      } else {
        check(got, want, `${sqltype}: stored ${show(value)}, read`)
      }
      const param = searchWith === 'read' ? got : value
      const found = await c.query(`SELECT count(*)::int AS n FROM ${table} WHERE v = $1`, [param])
      check(found.rows[0].n, 1, `${sqltype}: WHERE v = $1 (${show(param)}) found`)
    })
  )
})

testCase('null_parameters_and_results', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE nulls (id int PRIMARY KEY, a int, b text, c timestamptz)')
    await c.query('INSERT INTO nulls VALUES ($1, $2, $3, $4)', [1, null, undefined, null])
    const r = await c.query('SELECT a, b, c, a IS NULL AND b IS NULL AND c IS NULL AS all_null FROM nulls')
    check(r.rows, [{ a: null, b: null, c: null, all_null: true }])
  })
)

testCase('json_and_jsonb', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE docs (id int PRIMARY KEY, j json, jb jsonb)')
    const doc = { a: 1, b: [1, 2, { c: null }], s: 'x \u2603', nested: { t: true } }
    // A plain object parameter is sent as JSON.stringify(object).
    await c.query('INSERT INTO docs VALUES (1, $1, $2)', [doc, doc])
    // A JS array would become a PostgreSQL array literal, so applications stringify it.
    await c.query('INSERT INTO docs VALUES (2, $1, $2)', [JSON.stringify([1, 'two']), JSON.stringify([3])])
    const r = await c.query('SELECT j, jb FROM docs ORDER BY id')
    check(r.rows[0].j, doc, 'json')
    check(r.rows[0].jb, doc, 'jsonb')
    check(r.rows[1], { j: [1, 'two'], jb: [3] }, 'json arrays')
    const ops = await c.query("SELECT jb->>'s' AS s, jb->'b'->1 AS b1, jb @> $1 AS contains FROM docs WHERE id = 1", [
      { a: 1 },
    ])
    check(ops.rows, [{ s: 'x \u2603', b1: 2, contains: true }])
    const f = await c.query('SELECT j, jb FROM docs LIMIT 1')
    check(
      f.fields.map((x) => x.dataTypeID),
      [114, 3802],
      'json/jsonb dataTypeID'
    )
  })
)

testCase('arrays', () =>
  withClient(async (c) => {
    await c.query(
      'CREATE TABLE arr (id int PRIMARY KEY, tags text[], nums int[], grid int[][], big bigint[], ' +
        'amounts numeric[], flags boolean[], blobs bytea[], ats timestamptz[])'
    )
    const tags = ['a', 'b c', null, 'quote"d', 'back\\slash', 'com,ma', '{brace}', '', 'NULL']
    const at = new Date(Date.UTC(2024, 4, 6, 7, 8, 9))
    await c.query('INSERT INTO arr VALUES (1, $1, $2, $3, $4, $5, $6, $7, $8)', [
      tags,
      [1, 2, 3],
      [
        [1, 2],
        [3, 4],
      ],
      ['9223372036854775807', '-1'],
      ['1.50', '-2'],
      [true, false, null],
      [Buffer.from([0, 255]), Buffer.from('hi')],
      [at, null],
    ])
    const r = await c.query('SELECT tags, nums, grid, big, amounts, flags, blobs, ats FROM arr')
    const row = r.rows[0]
    check(row.tags, tags, 'text[]')
    check(row.nums, [1, 2, 3], 'int[]')
    check(row.grid, [
      [1, 2],
      [3, 4],
    ], 'int[][]')
    check(row.big, ['9223372036854775807', '-1'], 'bigint[]')
    // pg-types parses numeric[] elements with parseFloat (a scalar numeric stays a string).
    check(row.amounts, [1.5, -2], 'numeric[]')
    check(row.flags, [true, false, null], 'boolean[]')
    check(row.blobs, [Buffer.from([0, 255]), Buffer.from('hi')], 'bytea[]')
    check(row.ats.length, 2, 'timestamptz[] length')
    assert(row.ats[0] instanceof Date && row.ats[0].getTime() === at.getTime(), `timestamptz[] got ${show(row.ats)}`)
    check(row.ats[1], null, 'timestamptz[] NULL element')
    const q = await c.query(
      'SELECT id, array_length(tags, 1) AS n, nums[2] AS second, grid[2][1] AS g21 FROM arr WHERE 2 = ANY(nums)'
    )
    check(q.rows, [{ id: 1, n: 9, second: 2, g21: 3 }])
  })
)

testCase('array_parameters', () =>
  withClient(async (c) => {
    // The usual `WHERE id = ANY($1)` with a JS array, sent as an array literal in text.
    await c.query('CREATE TABLE arrp (id int PRIMARY KEY, name text)')
    await c.query("INSERT INTO arrp VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    const any = await c.query('SELECT id FROM arrp WHERE id = ANY($1) ORDER BY id', [[1, 3, 5]])
    check(any.rows, [{ id: 1 }, { id: 3 }], 'id = ANY($1)')
    const names = await c.query('SELECT id FROM arrp WHERE name = ANY($1::text[]) ORDER BY id', [['b', 'q"x', null]])
    check(names.rows, [{ id: 2 }], 'name = ANY($1::text[])')
    const un = await c.query('SELECT unnest($1::text[]) AS t', [['x', 'y z']])
    check(
      un.rows.map((x) => x.t),
      ['x', 'y z'],
      'unnest($1::text[])'
    )
    const cast = await c.query('SELECT $1::int[] AS a, array_length($1::int[], 1) AS n', [[4, 5, 6]])
    check(cast.rows, [{ a: [4, 5, 6], n: 3 }], '$1::int[]')
  })
)

testCase('untyped_parameters_inferred_by_server', () =>
  withClient(async (c) => {
    // node-postgres sends every parameter with type OID 0, so the server infers the types.
    // (Array and jsonb parameters have their own cases.)
    const r = await c.query('SELECT $1 + 1 AS a, $2 AS b, $3::text AS c, $4::boolean AS e', ['41', 'txt', { k: 'v' }, true])
    check(r.rows, [{ a: 42, b: 'txt', c: '{"k":"v"}', e: true }])
    check(
      r.fields.map((f) => f.dataTypeID),
      [23, 25, 25, 16],
      'dataTypeIDs'
    )
    await c.query('CREATE TABLE infer (id int PRIMARY KEY, at timestamptz, amount numeric(8,2), d date)')
    await c.query('INSERT INTO infer VALUES ($1, $2, $3, $4)', ['7', '2024-03-04 05:06:07+00', 12.5, '2024-03-04'])
    const s = await c.query('SELECT id, at::text AS at, amount, d::text AS d FROM infer WHERE at > $1', [
      new Date(Date.UTC(2024, 0, 1)),
    ])
    check(s.rows.length, 1, 'rows')
    check(s.rows[0].id, 7, 'id')
    check(s.rows[0].amount, '12.50', 'amount')
    check(s.rows[0].d, '2024-03-04', 'date')
  })
)

testCase('timestamptz_is_an_instant_in_any_session_time_zone', () =>
  withClient(async (c) => {
    const at = new Date(Date.UTC(2024, 0, 2, 3, 4, 5))
    await c.query("SET TIME ZONE 'America/New_York'")
    const r = await c.query('SELECT $1::timestamptz AS t, $1::timestamptz::text AS s', [at])
    assert(r.rows[0].t instanceof Date && r.rows[0].t.getTime() === at.getTime(), `read ${show(r.rows[0].t)}`)
    check(r.rows[0].s, '2024-01-01 22:04:05-05', 'text in America/New_York')
    await c.query("SET TIME ZONE 'UTC'")
    const u = await c.query("SELECT '2024-07-01 12:00:00+02'::timestamptz::text AS s")
    check(u.rows[0].s, '2024-07-01 10:00:00+00', 'text in UTC')
  })
)

// ---------------------------------------------------------------------------------------------
// Queries and results

testCase('crud_with_returning_and_rowcount', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL, qty int)')
    const ids = []
    for (let i = 0; i < 5; i++) {
      const r = await c.query('INSERT INTO items (name, qty) VALUES ($1, $2) RETURNING id', [`n${i}`, i])
      check(r.command, 'INSERT', 'command')
      check(r.rowCount, 1, 'INSERT rowCount')
      ids.push(r.rows[0].id)
    }
    check(ids, [1, 2, 3, 4, 5], 'serial ids')
    const up = await c.query('UPDATE items SET qty = qty + 10 WHERE id > $1', [2])
    check([up.command, up.rowCount], ['UPDATE', 3], 'UPDATE')
    const del = await c.query('DELETE FROM items WHERE id = $1 RETURNING name', [1])
    check([del.command, del.rowCount, del.rows], ['DELETE', 1, [{ name: 'n0' }]], 'DELETE RETURNING')
    const none = await c.query('UPDATE items SET qty = 0 WHERE id = $1', [999])
    check(none.rowCount, 0, 'UPDATE of nothing')
    const sel = await c.query('SELECT sum(qty)::int AS s, count(*) AS n FROM items')
    check([sel.command, sel.rowCount, sel.rows], ['SELECT', 1, [{ s: 40, n: '4' }]], 'SELECT')
    const upsert = await c.query(
      'INSERT INTO items (id, name, qty) VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET qty = EXCLUDED.qty RETURNING id, qty',
      [2, 'dup', 99]
    )
    check(upsert.rows, [{ id: 2, qty: 99 }], 'ON CONFLICT DO UPDATE RETURNING')
  })
)

testCase('bulk_insert_with_many_parameters', () =>
  withClient(async (c) => {
    // What query builders (knex, slonik) send for a batch insert: one statement, many $n.
    await c.query('CREATE TABLE bulk (id int PRIMARY KEY, v text, at timestamptz)')
    const rows = 500
    const values = []
    const tuples = []
    for (let i = 0; i < rows; i++) {
      tuples.push(`($${3 * i + 1}, $${3 * i + 2}, $${3 * i + 3})`)
      values.push(i, `v${i}`, new Date(Date.UTC(2024, 0, 1) + i * 1000))
    }
    const r = await c.query(`INSERT INTO bulk VALUES ${tuples.join(', ')}`, values)
    check(r.rowCount, rows, 'rowCount')
    const s = await c.query("SELECT count(*)::int AS n, max(v) AS mx, max(at) - min(at) AS span FROM bulk")
    check(s.rows[0].n, rows, 'count')
    check(s.rows[0].mx, 'v99', 'max(v)')
    check(s.rows[0].span.minutes, 8, 'span minutes')
    check(s.rows[0].span.seconds, 19, 'span seconds')
  })
)

testCase('rowmode_array', () =>
  withClient(async (c) => {
    // Duplicate column names survive in array mode; object mode keeps the last.
    const r = await c.query({ text: "SELECT 1 AS a, 'x' AS a, NULL::int AS b", rowMode: 'array' })
    check(r.rows, [[1, 'x', null]], 'rows')
    check(
      r.fields.map((f) => f.name),
      ['a', 'a', 'b'],
      'field names'
    )
    const p = await c.query({
      text: 'SELECT v, v * $1::int FROM (VALUES (1), (2), (3)) AS t (v) ORDER BY v',
      values: [10],
      rowMode: 'array',
    })
    check(p.rows, [
      [1, 10],
      [2, 20],
      [3, 30],
    ])
    const o = await c.query("SELECT 1 AS a, 'x' AS a")
    check(o.rows, [{ a: 'x' }], 'object mode')
  })
)

testCase('result_fields_describe_table_columns', () =>
  withClient(async (c) => {
    await c.query(
      'CREATE TABLE described (id int PRIMARY KEY, name varchar(20), price numeric(10,2), created timestamptz, big bigint)'
    )
    await c.query("INSERT INTO described VALUES (1, 'n', 1.5, now(), 2)")
    const reg = await c.query("SELECT 'described'::regclass::oid AS oid")
    const oid = Number(reg.rows[0].oid)
    assert(Number.isInteger(oid) && oid > 0, `table oid ${show(reg.rows[0].oid)}`)
    const want = [
      ['id', oid, 1, 23, 4, -1],
      ['name', oid, 2, 1043, -1, 24],
      ['price', oid, 3, 1700, -1, (10 << 16) + 2 + 4],
      ['created', oid, 4, 1184, 8, -1],
      ['big', oid, 5, 20, 8, -1],
      ['two', 0, 0, 23, 4, -1],
    ]
    const sql = 'SELECT id, name, price, created, big, 1 + 1 AS two FROM described'
    for (const [how, result] of [
      ['simple query', await c.query(sql)],
      ['extended query', await c.query(sql + ' WHERE id = $1', [1])],
    ]) {
      const got = result.fields.map((f) => [f.name, f.tableID, f.columnID, f.dataTypeID, f.dataTypeSize, f.dataTypeModifier])
      check(got, want, `${how}: [name, tableID, columnID, dataTypeID, dataTypeSize, dataTypeModifier]`)
      check(
        result.fields.map((f) => f.format),
        ['text', 'text', 'text', 'text', 'text', 'text'],
        `${how}: format`
      )
    }
    check(reg.fields[0].dataTypeID, 26, 'regclass::oid dataTypeID')
    const attr = await c.query('SELECT attname FROM pg_attribute WHERE attrelid = $1 AND attnum = $2', [oid, 3])
    check(attr.rows, [{ attname: 'price' }], 'pg_attribute for tableID/columnID')
  })
)

testCase('simple_query_multiple_statements', () =>
  withClient(async (c) => {
    const results = await c.query(
      'CREATE TABLE ms (id int PRIMARY KEY); INSERT INTO ms VALUES (1), (2); ' +
        'SELECT count(*)::int AS n FROM ms; UPDATE ms SET id = id + 10'
    )
    assert(Array.isArray(results), `expected an array of results, got ${show(results && results.command)}`)
    check(
      results.map((r) => [r.command, r.rowCount]),
      [
        ['CREATE', null],
        ['INSERT', 2],
        ['SELECT', 1],
        ['UPDATE', 2],
      ],
      '[command, rowCount]'
    )
    check(results[2].rows, [{ n: 2 }], 'SELECT rows')
    // The statements of one simple query run in one implicit transaction: an error undoes them all.
    await expectError(c.query('INSERT INTO ms VALUES (3); SELECT 1 / 0; INSERT INTO ms VALUES (4)'), '22012')
    check((await c.query('SELECT array_agg(id ORDER BY id) AS ids FROM ms')).rows[0].ids, [11, 12], 'after error')
  })
)

testCase('named_prepared_statements', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE np (id int PRIMARY KEY, v int)')
    for (let i = 0; i < 20; i++) {
      const r = await c.query({ name: 'np_insert', text: 'INSERT INTO np VALUES ($1, $2)', values: [i, i * i] })
      check(r.rowCount, 1, 'INSERT rowCount')
    }
    const got = []
    for (let i = 0; i < 20; i++) {
      const r = await c.query({ name: 'np_get', text: 'SELECT v FROM np WHERE id = $1', values: [i] })
      got.push(r.rows[0].v)
    }
    check(
      got,
      Array.from({ length: 20 }, (_, i) => i * i),
      'values'
    )
    // Reused without its text (node-postgres sends only Bind/Execute the second time).
    const again = await c.query({ name: 'np_get', text: 'SELECT v FROM np WHERE id = $1', values: [7], rowMode: 'array' })
    check(again.rows, [[49]], 'reuse with rowMode array')
    check(again.fields[0].dataTypeID, 23, 'dataTypeID on reuse')
    const ps = await c.query(
      "SELECT name, from_sql, parameter_types::text AS types FROM pg_prepared_statements WHERE name LIKE 'np\\_%' ORDER BY name"
    )
    check(ps.rows, [
      { name: 'np_get', from_sql: false, types: '{integer}' },
      { name: 'np_insert', from_sql: false, types: '{integer,integer}' },
    ])
  })
)

testCase('sql_level_prepare_execute', () =>
  withClient(async (c) => {
    await c.query('PREPARE q (int) AS SELECT $1 * 2 AS doubled')
    check((await c.query('EXECUTE q (21)')).rows, [{ doubled: 42 }], 'EXECUTE')
    const ps = await c.query("SELECT name, from_sql FROM pg_prepared_statements WHERE name = 'q'")
    check(ps.rows, [{ name: 'q', from_sql: true }], 'pg_prepared_statements')
    await c.query('DEALLOCATE q')
    await expectError(c.query('EXECUTE q (1)'), '26000', 'EXECUTE after DEALLOCATE')
  })
)

testCase('generate_series_column_types', () =>
  withClient(async (c) => {
    const r = await c.query('SELECT g FROM generate_series(1, 3) g')
    check(r.rows, [{ g: 1 }, { g: 2 }, { g: 3 }], 'generate_series(int, int)')
    check(r.fields[0].dataTypeID, 23, 'generate_series(int, int) dataTypeID')
    const b = await c.query('SELECT g FROM generate_series(1::bigint, 2) g')
    check(b.rows, [{ g: '1' }, { g: '2' }], 'generate_series(bigint, bigint)')
    check(b.fields[0].dataTypeID, 20, 'generate_series(bigint, bigint) dataTypeID')
  })
)

testCase('set_returning_functions_in_select_list', () =>
  withClient(async (c) => {
    const r = await c.query('SELECT generate_series(1, 3) AS g')
    check(r.rows, [{ g: 1 }, { g: 2 }, { g: 3 }])
  })
)

testCase('large_result', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE lr (id int PRIMARY KEY, pad text)')
    await c.query("INSERT INTO lr SELECT g, repeat('x', 100) || g FROM generate_series(1, 20000) g")
    const r = await c.query('SELECT id, pad FROM lr ORDER BY id')
    check(r.rowCount, 20000, 'rowCount')
    check(r.rows[19999], { id: 20000, pad: 'x'.repeat(100) + '20000' }, 'last row')
  })
)

testCase('custom_type_parsers', () =>
  withClient(async (c) => {
    await c.query("CREATE TYPE mood AS ENUM ('sad', 'happy')")
    await c.query('CREATE TABLE moods (id int PRIMARY KEY, m mood, tags mood[])')
    await c.query("INSERT INTO moods VALUES (1, 'happy', '{sad,happy}')")
    // Looking up a type's OID to register a parser, as applications do for enums and extensions.
    const t = await c.query("SELECT oid, typarray FROM pg_type WHERE typname = 'mood'")
    check(t.rows.length, 1, 'pg_type rows')
    const { oid, typarray } = t.rows[0]
    const types = {
      getTypeParser: (id, format) => {
        if (id === 20) return (v) => BigInt(v)
        if (id === oid) return (v) => v.toUpperCase()
        if (id === typarray) return (v) => v
        return pg.types.getTypeParser(id, format)
      },
    }
    const r = await c.query({ text: 'SELECT m, tags, 9007199254740993::bigint AS b FROM moods', types })
    check(
      r.fields.map((f) => f.dataTypeID),
      [oid, typarray, 20],
      'dataTypeIDs'
    )
    check(r.rows, [{ m: 'HAPPY', tags: '{sad,happy}', b: 9007199254740993n }])
  })
)

testCase('notices_reach_the_client', () =>
  withClient(async (c) => {
    const notices = []
    c.on('notice', (n) => notices.push(n))
    await c.query('CREATE TABLE IF NOT EXISTS noticed (id int)')
    await c.query('CREATE TABLE IF NOT EXISTS noticed (id int)')
    await waitFor(() => notices.length >= 1, 2000, 'a notice')
    check(
      notices.map((n) => [n.severity, n.code, n.message]),
      [['NOTICE', '42P07', 'relation "noticed" already exists, skipping']]
    )
  })
)

// ---------------------------------------------------------------------------------------------
// Errors

testCase('error_unique_violation_fields', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE u_err (id int PRIMARY KEY, email text CONSTRAINT u_err_email_key UNIQUE)')
    await c.query("INSERT INTO u_err VALUES (1, 'a@x')")
    const e = await expectError(c.query('INSERT INTO u_err VALUES ($1, $2)', [2, 'a@x']), '23505')
    assert(e instanceof pg.DatabaseError, 'not a pg.DatabaseError')
    check(
      [e.severity, e.constraint, e.table, e.schema, e.detail, e.message],
      [
        'ERROR',
        'u_err_email_key',
        'u_err',
        'public',
        'Key (email)=(a@x) already exists.',
        'duplicate key value violates unique constraint "u_err_email_key"',
      ],
      '[severity, constraint, table, schema, detail, message]'
    )
    check((await c.query('SELECT count(*)::int AS n FROM u_err')).rows[0].n, 1, 'client usable after the error')
  })
)

testCase('error_not_null_and_check_fields', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE nn (id int PRIMARY KEY, name text NOT NULL, qty int CONSTRAINT nn_qty_check CHECK (qty > 0))')
    const e = await expectError(c.query('INSERT INTO nn (id, qty) VALUES (1, 1)'), '23502')
    check([e.table, e.column, e.schema], ['nn', 'name', 'public'], 'not null [table, column, schema]')
    const k = await expectError(c.query("INSERT INTO nn VALUES (1, 'x', 0)"), '23514')
    check([k.table, k.constraint], ['nn', 'nn_qty_check'], 'check [table, constraint]')
  })
)

testCase('error_foreign_key_fields', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE fk_parent (id int PRIMARY KEY)')
    await c.query('CREATE TABLE fk_child (id int PRIMARY KEY, p int REFERENCES fk_parent (id))')
    await c.query('INSERT INTO fk_parent VALUES (1)')
    await c.query('INSERT INTO fk_child VALUES (1, 1)')
    const e = await expectError(c.query('INSERT INTO fk_child VALUES (2, 9)'), '23503')
    check(
      [e.table, e.constraint, e.detail],
      ['fk_child', 'fk_child_p_fkey', 'Key (p)=(9) is not present in table "fk_parent".'],
      'insert [table, constraint, detail]'
    )
    const d = await expectError(c.query('DELETE FROM fk_parent WHERE id = 1'), '23503')
    check([d.table, d.constraint], ['fk_child', 'fk_child_p_fkey'], 'delete [table, constraint]')
  })
)

testCase('error_syntax_and_position', () =>
  withClient(async (c) => {
    const s = await expectError(c.query('SELEC 1'), '42601')
    check(s.position, '1', 'SELEC 1 position')
    const t = await expectError(c.query('SELECT * FROM no_such_table_x'), '42P01')
    check(t.position, '15', 'undefined table position')
    check(t.message, 'relation "no_such_table_x" does not exist', 'undefined table message')
    await c.query('CREATE TABLE pos (id int)')
    const col = await expectError(c.query('SELECT $1::int, nosuch FROM pos', [1]), '42703')
    check(col.position, '17', 'undefined column position (extended protocol)')
    check((await c.query('SELECT 1 AS one')).rows, [{ one: 1 }], 'client usable after errors')
  })
)

testCase('error_data_exceptions', () =>
  withClient(async (c) => {
    await expectError(c.query('SELECT 1 / 0'), '22012', 'division by zero')
    await expectError(c.query('SELECT 32768::smallint'), '22003', 'smallint out of range')
    const bad = await expectError(c.query('SELECT $1::int', ['abc']), '22P02', 'invalid integer parameter')
    check(bad.message, 'invalid input syntax for type integer: "abc"', 'message')
    await expectError(c.query('SELECT $1::date', ['2024-02-30']), '22008', 'date out of range')
    await expectError(c.query('SELECT $1::uuid', ['not-a-uuid']), '22P02', 'invalid uuid')
  })
)

// ---------------------------------------------------------------------------------------------
// Transactions

testCase('transaction_aborted_until_rollback', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE tx (id int PRIMARY KEY)')
    await c.query('BEGIN')
    await c.query('INSERT INTO tx VALUES (1)')
    await expectError(c.query('INSERT INTO tx VALUES (1)'), '23505')
    const e = await expectError(c.query('INSERT INTO tx VALUES (2)'), '25P02', 'statement in an aborted transaction')
    check(e.message, 'current transaction is aborted, commands ignored until end of transaction block')
    await expectError(c.query('SELECT $1::int AS x', [1]), '25P02', 'extended query in an aborted transaction')
    await c.query('ROLLBACK')
    check((await c.query('SELECT count(*)::int AS n FROM tx')).rows[0].n, 0, 'rows after ROLLBACK')
  })
)

testCase('commit_of_aborted_transaction_rolls_back', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE txc (id int PRIMARY KEY)')
    await c.query('BEGIN')
    await c.query('INSERT INTO txc VALUES (1)')
    await expectError(c.query('SELECT 1 / 0'), '22012')
    const r = await c.query('COMMIT')
    check(r.command, 'ROLLBACK', 'COMMIT of an aborted transaction reports')
    check((await c.query('SELECT count(*)::int AS n FROM txc')).rows[0].n, 0, 'rows')
  })
)

testCase('savepoints', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE sp (id int PRIMARY KEY)')
    await c.query('BEGIN')
    await c.query('INSERT INTO sp VALUES (1)')
    await c.query('SAVEPOINT s1')
    await expectError(c.query('INSERT INTO sp VALUES (1)'), '23505')
    await c.query('ROLLBACK TO SAVEPOINT s1')
    await c.query('INSERT INTO sp VALUES (2)')
    await c.query('SAVEPOINT s2')
    await c.query('INSERT INTO sp VALUES (3)')
    await c.query('RELEASE SAVEPOINT s2')
    await c.query('COMMIT')
    check((await c.query('SELECT array_agg(id ORDER BY id) AS ids FROM sp')).rows[0].ids, [1, 2, 3])
  })
)

testCase('isolation_levels', () =>
  withClient(async (c) => {
    for (const level of ['READ COMMITTED', 'REPEATABLE READ', 'SERIALIZABLE']) {
      await c.query(`BEGIN ISOLATION LEVEL ${level}`)
      const r = await c.query('SHOW transaction_isolation')
      check(r.rows[0].transaction_isolation, level.toLowerCase(), `BEGIN ISOLATION LEVEL ${level}`)
      await c.query('COMMIT')
    }
    await c.query('SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ')
    await c.query('BEGIN')
    check((await c.query('SHOW transaction_isolation')).rows[0].transaction_isolation, 'repeatable read', 'session default')
    await c.query('COMMIT')
    await c.query('CREATE TABLE ro (id int)')
    await c.query('BEGIN READ ONLY')
    await expectError(c.query('INSERT INTO ro VALUES (1)'), '25006', 'INSERT in a READ ONLY transaction')
    await c.query('ROLLBACK')
  })
)

testCase('repeatable_read_keeps_its_snapshot', () =>
  withClients(2, async (a, b) => {
    await a.query('CREATE TABLE snap (id int PRIMARY KEY)')
    await a.query('INSERT INTO snap VALUES (1)')
    await a.query('BEGIN ISOLATION LEVEL REPEATABLE READ')
    check((await a.query('SELECT count(*)::int AS n FROM snap')).rows[0].n, 1, 'first read')
    await b.query('INSERT INTO snap VALUES (2)')
    check((await a.query('SELECT count(*)::int AS n FROM snap')).rows[0].n, 1, 'read after a concurrent commit')
    await a.query('COMMIT')
    check((await a.query('SELECT count(*)::int AS n FROM snap')).rows[0].n, 2, 'read after COMMIT')
  })
)

testCase('serializable_detects_write_skew', () =>
  withClients(2, async (a, b) => {
    await a.query('CREATE TABLE oncall (name text PRIMARY KEY, on_duty bool)')
    await a.query("INSERT INTO oncall VALUES ('a', true), ('b', true)")
    for (const c of [a, b]) await c.query('BEGIN ISOLATION LEVEL SERIALIZABLE')
    for (const c of [a, b]) {
      check((await c.query('SELECT count(*)::int AS n FROM oncall WHERE on_duty')).rows[0].n, 2, 'on duty')
    }
    await a.query("UPDATE oncall SET on_duty = false WHERE name = 'a'")
    await b.query("UPDATE oncall SET on_duty = false WHERE name = 'b'")
    await a.query('COMMIT')
    await expectError(b.query('COMMIT'), '40001', 'second COMMIT of a write skew')
    check((await a.query('SELECT count(*)::int AS n FROM oncall WHERE on_duty')).rows[0].n, 1, 'on duty after')
  })
)

// ---------------------------------------------------------------------------------------------
// COPY (pg-copy-streams)

testCase('copy_text_in_and_out', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE cp (id int PRIMARY KEY, name text, at date)')
    const lines = []
    for (let i = 0; i < 1000; i++) lines.push(`${i}\tname ${i}\\t\t2024-01-01\n`)
    // Chunks that do not end on row boundaries, as a file stream would send them.
    const text = lines.join('')
    const chunks = []
    for (let i = 0; i < text.length; i += 997) chunks.push(text.slice(i, i + 997))
    const inStream = await copyIn(c, 'COPY cp (id, name, at) FROM STDIN', chunks)
    check(inStream.rowCount, 1000, 'COPY FROM rowCount')
    const r = await c.query("SELECT count(*)::int AS n, max(name) AS mx, min(at)::text AS at FROM cp")
    check(r.rows, [{ n: 1000, mx: 'name 999\t', at: '2024-01-01' }])
    const out = await copyOut(c, 'COPY (SELECT id, name FROM cp WHERE id < 3 ORDER BY id) TO STDOUT')
    check(out.data.toString(), '0\tname 0\\t\n1\tname 1\\t\n2\tname 2\\t\n', 'COPY TO data')
    check(out.stream.rowCount, 3, 'COPY TO rowCount')
    const nulls = await copyOut(c, "COPY (SELECT 1, NULL::text, 'a\\b'::text) TO STDOUT")
    check(nulls.data.toString(), '1\t\\N\ta\\\\b\n', 'NULL and backslash in COPY TO')
  })
)

testCase('copy_csv_with_header', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE cpcsv (id int PRIMARY KEY, name text, note text)')
    const csv = 'id,name,note\n1,"Smith, J",plain\n2,"say ""hi""",\n3,x,"multi\nline"\n'
    const s = await copyIn(c, 'COPY cpcsv FROM STDIN (FORMAT csv, HEADER true)', [csv])
    check(s.rowCount, 3, 'rowCount')
    const r = await c.query('SELECT id, name, note FROM cpcsv ORDER BY id')
    check(r.rows, [
      { id: 1, name: 'Smith, J', note: 'plain' },
      { id: 2, name: 'say "hi"', note: null },
      { id: 3, name: 'x', note: 'multi\nline' },
    ])
    const out = await copyOut(c, 'COPY cpcsv TO STDOUT WITH (FORMAT csv, HEADER)')
    check(out.data.toString(), csv, 'CSV out')
  })
)

function binaryCopy(tuples) {
  const parts = [Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]
  for (const fields of tuples) {
    const n = Buffer.alloc(2)
    n.writeInt16BE(fields.length)
    parts.push(n)
    for (const f of fields) {
      const len = Buffer.alloc(4)
      len.writeInt32BE(f.length)
      parts.push(len, f)
    }
  }
  parts.push(Buffer.from([0xff, 0xff]))
  return Buffer.concat(parts)
}

function int4(v) {
  const b = Buffer.alloc(4)
  b.writeInt32BE(v)
  return b
}

testCase('copy_binary_in_and_out', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE cpb (id int PRIMARY KEY, b bytea)')
    const data = binaryCopy([
      [int4(7), Buffer.from([7, 0, 255])],
      [int4(8), Buffer.from('hello')],
    ])
    const s = await copyIn(c, 'COPY cpb FROM STDIN (FORMAT binary)', [data])
    check(s.rowCount, 2, 'rowCount')
    const r = await c.query('SELECT id, b FROM cpb ORDER BY id')
    check(r.rows, [
      { id: 7, b: Buffer.from([7, 0, 255]) },
      { id: 8, b: Buffer.from('hello') },
    ])
    const out = await copyOut(c, 'COPY (SELECT id, b FROM cpb ORDER BY id) TO STDOUT (FORMAT binary)')
    check(out.data.toString('hex'), data.toString('hex'), 'binary COPY TO bytes')
  })
)

testCase('copy_from_bad_data_fails_and_client_recovers', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE cpbad (id int PRIMARY KEY, v text)')
    let err = null
    try {
      await copyIn(c, 'COPY cpbad FROM STDIN', ['1\tok\n2\tok\nnot-a-number\tbad\n'])
    } catch (e) {
      err = e
    }
    assert(err, 'COPY with bad data succeeded')
    check(err.code, '22P02', `SQLSTATE (${err.message})`)
    check((await c.query('SELECT count(*)::int AS n FROM cpbad')).rows[0].n, 0, 'rows after a failed COPY')
    await copyIn(c, 'COPY cpbad FROM STDIN', ['5\tfine\n'])
    check((await c.query('SELECT v FROM cpbad')).rows, [{ v: 'fine' }], 'COPY after the failed one')
  })
)

// ---------------------------------------------------------------------------------------------
// Cursors (pg-cursor): a portal read in batches with Execute row limits.

testCase('cursor_reads_in_batches', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE big (id int PRIMARY KEY)')
    await c.query('INSERT INTO big SELECT g FROM generate_series(1, 5000) g')
    const cursor = c.query(new Cursor('SELECT id FROM big ORDER BY id'))
    const sizes = []
    let total = 0
    let last = 0
    for (;;) {
      const rows = await cursorRead(cursor, 300)
      if (rows.length === 0) break
      sizes.push(rows.length)
      for (const r of rows) {
        if (r.id !== last + 1) throw new CheckError(`row ${show(r)} after ${last}`)
        last = r.id
        total += r.id
      }
    }
    await cursorClose(cursor)
    check(sizes.length, 17, 'batches')
    check(sizes[0], 300, 'first batch')
    check(sizes[16], 200, 'last batch')
    check(total, (5000 * 5001) / 2, 'sum')
    check((await c.query('SELECT 1 AS one')).rows, [{ one: 1 }], 'client usable after the cursor')
  })
)

testCase('cursor_with_parameters_closed_early_in_transaction', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE big2 (id int PRIMARY KEY, s text)')
    await c.query('INSERT INTO big2 SELECT g, g::text FROM generate_series(1, 1000) g')
    await c.query('BEGIN')
    const cursor = c.query(new Cursor('SELECT id, s FROM big2 WHERE id > $1 ORDER BY id', [990], { rowMode: 'array' }))
    check(await cursorRead(cursor, 4), [
      [991, '991'],
      [992, '992'],
      [993, '993'],
      [994, '994'],
    ], 'first batch')
    check(await cursorRead(cursor, 2), [
      [995, '995'],
      [996, '996'],
    ], 'second batch')
    await cursorClose(cursor)
    // The transaction goes on after the cursor is closed early.
    await c.query('INSERT INTO big2 VALUES (1001, $1)', ['x'])
    await c.query('COMMIT')
    check((await c.query('SELECT count(*)::int AS n FROM big2')).rows[0].n, 1001, 'count after COMMIT')
  })
)

testCase('sql_level_cursor_fetch', () =>
  withClient(async (c) => {
    await c.query('BEGIN')
    await c.query('DECLARE cur CURSOR FOR SELECT g FROM generate_series(1, 10) g')
    const a = await c.query('FETCH 4 FROM cur')
    check([a.command, a.rowCount, a.rows.map((r) => r.g)], ['FETCH', 4, [1, 2, 3, 4]], 'FETCH 4')
    const b = await c.query('FETCH ALL FROM cur')
    check(
      b.rows.map((r) => r.g),
      [5, 6, 7, 8, 9, 10],
      'FETCH ALL'
    )
    await c.query('CLOSE cur')
    await c.query('COMMIT')
  })
)

// ---------------------------------------------------------------------------------------------
// LISTEN / NOTIFY

testCase('listen_notify', () =>
  withClients(2, async (listener, sender) => {
    const got = []
    listener.on('notification', (n) => got.push(n))
    await listener.query('LISTEN jobs')
    await listener.query('LISTEN "Mixed Case"')
    await sender.query("NOTIFY jobs, 'first'")
    await sender.query("SELECT pg_notify('jobs', $1)", ['second'])
    await sender.query('NOTIFY "Mixed Case"')
    await waitFor(() => got.length >= 3, 5000, 'three notifications')
    check(
      got.map((n) => [n.channel, n.payload, n.processId]),
      [
        ['jobs', 'first', sender.processID],
        ['jobs', 'second', sender.processID],
        ['Mixed Case', '', sender.processID],
      ],
      '[channel, payload, processId]'
    )
    await listener.query('UNLISTEN *')
    await sender.query("NOTIFY jobs, 'after unlisten'")
    await listener.query('SELECT 1')
    await sleep(100)
    check(got.length, 3, 'notifications after UNLISTEN *')
  })
)

testCase('notify_in_transaction_delivered_on_commit', () =>
  withClients(2, async (listener, sender) => {
    const got = []
    listener.on('notification', (n) => got.push(n.payload))
    await listener.query('LISTEN txjobs')
    await sender.query('BEGIN')
    await sender.query("NOTIFY txjobs, 'a'")
    await sender.query("NOTIFY txjobs, 'a'") // duplicates within a transaction are folded
    await sender.query("NOTIFY txjobs, 'b'")
    await sleep(200)
    check(got, [], 'delivered before COMMIT')
    await sender.query('COMMIT')
    await waitFor(() => got.length >= 2, 5000, 'notifications after COMMIT')
    await sleep(100)
    check(got, ['a', 'b'], 'payloads')
    await sender.query('BEGIN')
    await sender.query("NOTIFY txjobs, 'rolled back'")
    await sender.query('ROLLBACK')
    await listener.query('SELECT 1')
    await sleep(150)
    check(got, ['a', 'b'], 'after a rolled-back NOTIFY')
  })
)

// ---------------------------------------------------------------------------------------------
// Locks, migrations, catalogs

testCase('advisory_locks', () =>
  withClients(2, async (a, b) => {
    const tryLock = async (c, k) => (await c.query('SELECT pg_try_advisory_lock($1) AS ok', [k])).rows[0].ok
    check(await tryLock(a, 42), true, 'a locks 42')
    check(await tryLock(b, 42), false, 'b locks 42 while a holds it')
    check((await a.query('SELECT pg_advisory_unlock(42) AS ok')).rows[0].ok, true, 'a unlocks')
    check(await tryLock(b, 42), true, 'b locks 42 after')
    // Transaction-level locks, as migration tools take them, end with the transaction.
    await a.query('BEGIN')
    await a.query('SELECT pg_advisory_xact_lock(7)')
    check((await b.query('SELECT pg_try_advisory_xact_lock(7) AS ok')).rows[0].ok, false, 'xact lock held')
    await a.query('COMMIT')
    check((await b.query('SELECT pg_try_advisory_lock(7) AS ok')).rows[0].ok, true, 'xact lock released at COMMIT')
    // What a pool's reset does with session-level locks left behind.
    check(await tryLock(a, 99), true, 'a locks 99')
    const held = await a.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
    check(held.rows[0].n, 1, 'pg_locks rows for a')
    await a.query('DISCARD ALL')
    check(await tryLock(b, 99), true, 'b locks 99 after DISCARD ALL on a')
    check((await b.query('SELECT pg_advisory_unlock_all()')).rows, [{ pg_advisory_unlock_all: '' }], 'unlock_all')
    check(await tryLock(a, 7), true, 'a locks 7 after pg_advisory_unlock_all on b')
  })
)

testCase('schema_migration_in_a_transaction', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE mig (id int PRIMARY KEY, n int)')
    await c.query('INSERT INTO mig VALUES (1, 10)')
    await c.query('BEGIN')
    await c.query("ALTER TABLE mig ADD COLUMN note text DEFAULT 'x'")
    await c.query('ALTER TABLE mig ALTER COLUMN n TYPE bigint')
    await c.query('CREATE INDEX mig_n ON mig (n)')
    await c.query('CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, run_on timestamptz DEFAULT now())')
    await c.query('INSERT INTO schema_migrations (version) VALUES ($1)', ['001_add_note'])
    await c.query('COMMIT')
    const r = await c.query('SELECT n, note FROM mig')
    check(r.rows, [{ n: '10', note: 'x' }], 'row (bigint comes back as a string)')
    check(r.fields[0].dataTypeID, 20, 'n dataTypeID after ALTER COLUMN TYPE')
    const info = await c.query(
      "SELECT data_type FROM information_schema.columns WHERE table_name = 'mig' AND column_name = 'n'"
    )
    check(info.rows, [{ data_type: 'bigint' }], 'information_schema')
    check((await c.query('SELECT version FROM schema_migrations')).rows, [{ version: '001_add_note' }])
  })
)

testCase('ddl_rolls_back', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE keep (id int)')
    await c.query('BEGIN')
    await c.query('CREATE TABLE dropped_by_rollback (id int)')
    await c.query('ALTER TABLE keep ADD COLUMN extra int')
    await c.query('ROLLBACK')
    const r = await c.query("SELECT to_regclass('dropped_by_rollback') IS NULL AS gone")
    check(r.rows, [{ gone: true }], 'table created in a rolled-back transaction')
    const cols = await c.query(
      "SELECT column_name FROM information_schema.columns WHERE table_name = 'keep' ORDER BY ordinal_position"
    )
    check(cols.rows, [{ column_name: 'id' }], 'columns after a rolled-back ALTER')
  })
)

testCase('catalog_regclass_and_foreign_keys', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE cat_parent (id int PRIMARY KEY)')
    await c.query('CREATE TABLE cat_child (id serial PRIMARY KEY, p int NOT NULL REFERENCES cat_parent (id))')
    const reg = await c.query("SELECT to_regclass('cat_child') IS NOT NULL AS present, to_regtype('int4')::text AS t")
    check(reg.rows, [{ present: true, t: 'integer' }], 'to_regclass/to_regtype')
    const fks = await c.query(
      `SELECT con.conname, cl.relname
         FROM pg_constraint con JOIN pg_class cl ON cl.oid = con.confrelid
        WHERE con.contype = 'f' AND con.conrelid = $1::regclass`,
      ['cat_child']
    )
    check(fks.rows, [{ conname: 'cat_child_p_fkey', relname: 'cat_parent' }], 'foreign keys')
  })
)

testCase('information_schema_tables_and_columns', () =>
  withClient(async (c) => {
    await c.query('CREATE TABLE is_parent (id int PRIMARY KEY)')
    await c.query(
      "CREATE TABLE is_child (id serial PRIMARY KEY, p int NOT NULL REFERENCES is_parent (id), label varchar(10) DEFAULT 'l')"
    )
    const cols = await c.query(
      `SELECT column_name, data_type, is_nullable, column_default, character_maximum_length AS len
         FROM information_schema.columns
        WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position`,
      ['is_child']
    )
    check(cols.rows, [
      { column_name: 'id', data_type: 'integer', is_nullable: 'NO', column_default: "nextval('is_child_id_seq'::regclass)", len: null },
      { column_name: 'p', data_type: 'integer', is_nullable: 'NO', column_default: null, len: null },
      { column_name: 'label', data_type: 'character varying', is_nullable: 'YES', column_default: "'l'::character varying", len: 10 },
    ], 'information_schema.columns')
    const tables = await c.query(
      "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'public' AND table_name LIKE 'is\\_%' ORDER BY 1"
    )
    check(tables.rows, [
      { table_name: 'is_child', table_type: 'BASE TABLE' },
      { table_name: 'is_parent', table_type: 'BASE TABLE' },
    ], 'information_schema.tables')
  })
)

testCase('pg_attribute_and_format_type', () =>
  withClient(async (c) => {
    await c.query("CREATE TABLE att (id serial PRIMARY KEY, p int NOT NULL, label varchar(10) DEFAULT 'l', amount numeric(8,3))")
    const att = await c.query(
      `SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull
         FROM pg_attribute a WHERE a.attrelid = 'att'::regclass AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY a.attnum`
    )
    check(att.rows, [
      { attname: 'id', type: 'integer', attnotnull: true },
      { attname: 'p', type: 'integer', attnotnull: true },
      { attname: 'label', type: 'character varying(10)', attnotnull: false },
      { attname: 'amount', type: 'numeric(8,3)', attnotnull: false },
    ], 'pg_attribute')
  })
)

// ---------------------------------------------------------------------------------------------
// Pools and concurrency

testCase('pool_runs_clients_in_parallel', async () => {
  const pool = new Pool({ max: 4 })
  pool.on('error', () => {})
  try {
    // Four slow queries at once need four backends.
    const started = Date.now()
    const results = await Promise.all(
      [0, 1, 2, 3].map(() => pool.query('SELECT pg_backend_pid() AS pid, pg_sleep(0.3)'))
    )
    const elapsed = Date.now() - started
    const pids = new Set(results.map((r) => r.rows[0].pid))
    check(pids.size, 4, 'distinct backends')
    assert(elapsed < 1100, `4 x 0.3 s in parallel took ${elapsed} ms`)
    check(pool.totalCount, 4, 'pool.totalCount')
    await pool.query('CREATE TABLE pooled (id int PRIMARY KEY, pid int)')
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => pool.query('INSERT INTO pooled VALUES ($1, pg_backend_pid())', [i]))
    )
    const r = await pool.query('SELECT count(*)::int AS n, count(DISTINCT pid)::int AS backends FROM pooled')
    check(r.rows[0].n, 40, 'rows')
    assert(r.rows[0].backends >= 2 && r.rows[0].backends <= 4, `backends used ${r.rows[0].backends}`)
    check(pool.waitingCount, 0, 'pool.waitingCount')
  } finally {
    await pool.end()
  }
})

testCase('pool_transaction_on_checked_out_client', async () => {
  const pool = new Pool({ max: 2 })
  pool.on('error', () => {})
  try {
    await pool.query('CREATE TABLE pool_tx (id int PRIMARY KEY)')
    const client = await pool.connect()
    try {
      await client.query('BEGIN')
      await client.query('INSERT INTO pool_tx VALUES (1)')
      // Another pooled connection does not see the uncommitted row.
      check((await pool.query('SELECT count(*)::int AS n FROM pool_tx')).rows[0].n, 0, 'seen from another client')
      await client.query('COMMIT')
    } finally {
      client.release()
    }
    check((await pool.query('SELECT count(*)::int AS n FROM pool_tx')).rows[0].n, 1, 'after COMMIT')
  } finally {
    await pool.end()
  }
})

testCase('pool_session_state_and_reset', async () => {
  const pool = new Pool({ max: 1 })
  pool.on('error', () => {})
  // Checks out a client, runs fn with it, and gives it back (destroyed if fn failed or asked).
  const checkout = async (fn) => {
    const client = await pool.connect()
    let destroy = false
    try {
      destroy = (await fn(client)) === 'destroy'
    } catch (e) {
      destroy = true
      throw e
    } finally {
      client.release(destroy)
    }
  }
  try {
    let pid
    await checkout(async (client) => {
      pid = client.processID
      await client.query("SET application_name = 'pooled'")
      await client.query("SET statement_timeout = '5s'")
    })
    // node-postgres resets nothing: the next checkout gets the same session, state and all.
    await checkout(async (client) => {
      check(client.processID, pid, 'same backend')
      check((await client.query('SHOW application_name')).rows[0].application_name, 'pooled', 'state kept')
      await client.query('DISCARD ALL')
      check((await client.query('SHOW application_name')).rows[0].application_name, '', 'after DISCARD ALL')
      check((await client.query('SHOW statement_timeout')).rows[0].statement_timeout, '0', 'after DISCARD ALL')
      await client.query("SET application_name = 'again'")
      await client.query('RESET ALL')
      check((await client.query('SHOW application_name')).rows[0].application_name, '', 'after RESET ALL')
      // release(true) destroys the client; the pool opens a new session.
      return 'destroy'
    })
    await checkout(async (client) => {
      assert(client.processID !== pid, 'release(true) did not replace the backend')
    })
  } finally {
    await pool.end()
  }
})

testCase('concurrent_connections', async () => {
  await withClient(async (c) => {
    await c.query('CREATE TABLE conc (id int PRIMARY KEY)')
    await withClients(8, async (...clients) => {
      await Promise.all(
        clients.map(async (w, n) => {
          for (let i = 0; i < 50; i++) await w.query('INSERT INTO conc VALUES ($1)', [n * 1000 + i])
        })
      )
    })
    check((await c.query('SELECT count(*)::int AS n FROM conc')).rows[0].n, 400, 'rows')
  })
})

testCase('pipelined_queries_on_one_client', () =>
  withClient(async (c) => {
    // node-postgres queues queries issued without awaiting; they run in order on one connection.
    await c.query('CREATE TABLE queued (id int PRIMARY KEY)')
    const results = await Promise.all([
      c.query('INSERT INTO queued VALUES (1)'),
      c.query('INSERT INTO queued VALUES ($1)', [2]),
      c.query('INSERT INTO queued VALUES (1)').catch((e) => e),
      c.query('SELECT array_agg(id ORDER BY id) AS ids FROM queued'),
    ])
    check(results[2].code, '23505', 'the failing query')
    check(results[3].rows[0].ids, [1, 2], 'rows seen by the last query')
  })
)

testCase('statement_timeout_from_config', () =>
  withClient(
    async (c) => {
      check((await c.query('SHOW statement_timeout')).rows[0].statement_timeout, '300ms', 'statement_timeout')
      const started = Date.now()
      await expectError(c.query('SELECT pg_sleep(5)'), '57014', 'slow query')
      assert(Date.now() - started < 4000, `cancelled after ${Date.now() - started} ms`)
      check((await c.query('SELECT 1 AS one')).rows, [{ one: 1 }], 'client usable after the timeout')
    },
    { statement_timeout: 300 }
  )
)

// ---------------------------------------------------------------------------------------------
// TLS, with the certificates of the run's own CA

// What an application gives node-postgres to verify the server: the CA, and the name the server's
// certificate must carry (PGHOST is an address, which Node does not send as the TLS server name).
function tlsOptions(ca = process.env.SHOAL_TEST_SSLROOTCERT) {
  return { ca: fs.readFileSync(ca), servername: 'localhost', rejectUnauthorized: true }
}

// The client and the server both say the connection is TLS, and data larger than a TLS record
// (16 KiB) goes both ways intact.
async function checkEncrypted(c) {
  const socket = c.connection.stream
  check([socket.encrypted, socket.authorized], [true, true], 'TLSSocket encrypted, authorized')
  assert(['TLSv1.2', 'TLSv1.3'].includes(socket.getProtocol()), `TLS protocol ${show(socket.getProtocol())}`)
  check(socket.getPeerCertificate().subject.CN, 'localhost', 'server certificate CN')
  check((await c.query('SHOW ssl')).rows, [{ ssl: 'on' }], 'SHOW ssl')
  const blob = crypto.randomBytes(200000)
  const r = await c.query('SELECT $1::bytea AS b, length($1::bytea) AS n', [blob])
  check([r.rows[0].b.equals(blob), r.rows[0].n], [true, blob.length], 'a 200 kB bytea through TLS')
}

// Connecting must fail before any query; returns the error.
async function expectConnectError(config, what) {
  const c = new Client(config)
  c.on('error', () => {})
  try {
    await c.connect()
  } catch (e) {
    return e
  }
  await c.end().catch(() => {})
  throw new CheckError(what)
}

testCase('tls_verify_full', () =>
  withClient(
    async (c) => {
      await checkEncrypted(c)
      check((await c.query('SELECT current_user AS u')).rows, [{ u: 'postgres' }])
    },
    { ssl: tlsOptions() }
  )
)

testCase('tls_scram_channel_binding', () =>
  withClient(async (admin) => {
    // run.py's pg_hba.conf lets tls_scram in over TLS only, by SCRAM-SHA-256; with
    // enableChannelBinding, node-postgres picks SCRAM-SHA-256-PLUS when the server offers it.
    await admin.query("CREATE ROLE tls_scram LOGIN PASSWORD 'scram over tls'")
    const c = new Client({ user: 'tls_scram', password: 'scram over tls', ssl: tlsOptions(), enableChannelBinding: true })
    c.on('error', () => {})
    let offered = null
    c.connection.on('authenticationSASL', (m) => {
      offered = m.mechanisms
    })
    try {
      await c.connect()
      assert(offered && offered.includes('SCRAM-SHA-256-PLUS'), `SASL mechanisms offered over TLS: ${show(offered)}`)
      await checkEncrypted(c)
      check((await c.query('SELECT current_user AS u')).rows, [{ u: 'tls_scram' }])
      await c.end()
      const e = await expectConnectError(
        { user: 'tls_scram', password: 'scram over tls', ssl: false },
        'tls_scram logged in without TLS past a hostnossl reject line'
      )
      assert(/pg_hba.conf rejects connection/.test(e.message), `without TLS: ${e.message}`)
    } finally {
      await c.end().catch(() => {})
      await admin.query('DROP ROLE IF EXISTS tls_scram')
    }
  })
)

testCase('tls_sasl_mechanisms_in_preference_order', () =>
  withClient(async (admin) => {
    // AuthenticationSASL lists the mechanisms in the server's order of preference: PostgreSQL
    // puts channel binding first over TLS.
    await admin.query("CREATE ROLE tls_scram LOGIN PASSWORD 'scram over tls'")
    const c = new Client({ user: 'tls_scram', password: 'scram over tls', ssl: tlsOptions() })
    c.on('error', () => {})
    let offered = null
    c.connection.on('authenticationSASL', (m) => {
      offered = m.mechanisms
    })
    try {
      await c.connect()
    } finally {
      await c.end().catch(() => {})
      await admin.query('DROP ROLE IF EXISTS tls_scram')
    }
    check(offered, ['SCRAM-SHA-256-PLUS', 'SCRAM-SHA-256'], 'SASL mechanisms offered over TLS')
  })
)

testCase('tls_client_certificate', () =>
  withClient(async (admin) => {
    // The cert method: the client certificate (CN=tls_cert, signed by the run's CA) is the login.
    await admin.query('CREATE ROLE tls_cert LOGIN')
    const cert = fs.readFileSync(process.env.SHOAL_TEST_SSLCERT)
    const key = fs.readFileSync(process.env.SHOAL_TEST_SSLKEY)
    try {
      await withClient(
        async (c) => {
          await checkEncrypted(c)
          check((await c.query('SELECT current_user AS u')).rows, [{ u: 'tls_cert' }])
        },
        { user: 'tls_cert', ssl: { ...tlsOptions(), cert, key } }
      )
      const e = await expectConnectError(
        { user: 'tls_cert', ssl: tlsOptions() },
        'tls_cert logged in by the cert method without a certificate'
      )
      assert(/requires a valid client certificate/.test(e.message), `without a certificate: ${e.message}`)
    } finally {
      await admin.query('DROP ROLE IF EXISTS tls_cert')
    }
  })
)

testCase('tls_wrong_ca_rejected', async () => {
  const e = await expectConnectError(
    { ssl: tlsOptions(process.env.SHOAL_TEST_WRONG_SSLROOTCERT) },
    'node-postgres accepted a server the given CA did not sign'
  )
  // PostgreSQL (OpenSSL) sends its CA's certificate after its own, a server may send only its own.
  const codes = ['SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE']
  assert(codes.includes(e.code), `error ${show(e.code)}: ${e.message}, want one of ${show(codes)}`)
})

// ---------------------------------------------------------------------------------------------

function withTimeout(promise, ms) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`case did not finish within ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

async function main() {
  const args = process.argv.slice(2)
  const verbose = args.includes('-v')
  const only = new Set(args.filter((a) => !a.startsWith('-')))
  for (const { name, fn } of CASES) {
    if (only.size && !only.has(name)) continue
    try {
      await withTimeout(Promise.resolve().then(fn), CASE_TIMEOUT_MS)
      console.log(`ok ${name}`)
    } catch (e) {
      const kind = e instanceof CheckError ? 'AssertionError' : (e && e.constructor && e.constructor.name) || 'Error'
      const code = e && e.code ? ` [${e.code}]` : ''
      const message = String((e && e.message) || e)
        .split(/\s+/)
        .join(' ')
      console.log(`not ok ${name}: ${kind}${code}: ${message.slice(0, 400)}`)
      if (verbose) console.error(e)
    }
  }
}

process.on('unhandledRejection', (e) => console.error('unhandled rejection:', e))
process.on('uncaughtException', (e) => console.error('uncaught exception:', e))

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e)
    process.exit(1)
  }
)
