#!/usr/bin/env node
// What applications do with Sequelize v6 (postgres dialect, over node-postgres), case by case (see
// tests/drivers/run.py for the output protocol: `ok <case>` / `not ok <case>: <message>`).
// Connects with the libpq environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE); each case
// opens its own Sequelize instance (its own pool) and uses its own tables, so one failure does not
// spill into the next. Run `node sequelize_suite.js [case ...] [-v]`; -v prints every SQL
// statement Sequelize sends, and the failing statement of a failed case, to stderr.
'use strict'

const util = require('node:util')
const { Sequelize, DataTypes, Op, QueryTypes, Transaction } = require('sequelize')

// A case that takes longer than this is reported as hung, and the suite goes on.
const CASE_TIMEOUT_MS = 30000

const VERBOSE = process.argv.includes('-v')

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

// Awaits a promise that must reject with an error of this class (and, when given, whose parent
// PostgreSQL error has this SQLSTATE); returns the error.
async function expectError(promise, cls, code, what = '') {
  let result
  try {
    result = await promise
  } catch (e) {
    if (!(e instanceof cls)) {
      throw new CheckError(`${what} expected ${cls.name}, got ${e && e.constructor && e.constructor.name}: ${e && e.message}`)
    }
    const got = e.parent ? e.parent.code : e.code
    if (code && got !== code) {
      throw new CheckError(`${what} expected SQLSTATE ${code}, got ${got || 'no code'}: ${e.message}`)
    }
    return e
  }
  throw new CheckError(`${what} expected ${cls.name}, but it succeeded: ${show(result)}`)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// Resolves to 'pending' when the promise has not settled within ms.
function stateAfter(promise, ms) {
  return Promise.race([
    promise.then(
      () => 'resolved',
      () => 'rejected'
    ),
    sleep(ms).then(() => 'pending'),
  ])
}

// The SQL statements of the running case, newest last (for -v).
let sqlLog = []

function newSequelize(options = {}) {
  return new Sequelize(process.env.PGDATABASE || 'postgres', process.env.PGUSER || 'postgres', process.env.PGPASSWORD || null, {
    host: process.env.PGHOST || '127.0.0.1',
    port: Number(process.env.PGPORT || 5432),
    dialect: 'postgres',
    logging: (sql) => {
      sqlLog.push(sql)
      if (VERBOSE) console.error(`    ${sql}`)
    },
    pool: { max: 5, min: 0, acquire: 10000, idle: 1000 },
    dialectOptions: { connectionTimeoutMillis: 10000 },
    ...options,
  })
}

// Runs fn with a fresh Sequelize instance, then closes its pool whatever happens.
async function withDb(fn, options) {
  const s = newSequelize(options)
  try {
    return await fn(s, s.getQueryInterface())
  } finally {
    await s.close().catch(() => {})
  }
}

const plain = (instances) => instances.map((i) => i.get({ plain: true }))
const pick = (obj, keys) => Object.fromEntries(keys.map((k) => [k, obj[k]]))
const pickAll = (rows, keys) => rows.map((r) => pick(r.get ? r.get({ plain: true }) : r, keys))

// describeTable() reduced to what the cases assert: {column: [type, allowNull, defaultValue]}.
async function columns(qi, table, options) {
  const d = await qi.describeTable(table, options)
  return Object.fromEntries(Object.entries(d).map(([k, v]) => [k, [v.type, v.allowNull, v.defaultValue]]))
}

async function indexes(qi, table, options) {
  const rows = await qi.showIndex(table, options)
  return rows
    .map((i) => ({ name: i.name, primary: i.primary, unique: i.unique, fields: i.fields.map((f) => f.attribute) }))
    .sort((a, b) => (a.name < b.name ? -1 : 1))
}

async function foreignKeys(qi, table, options) {
  const rows = await qi.getForeignKeyReferencesForTable(table, options)
  return rows
    .map((r) => ({
      constraintName: r.constraintName,
      tableName: r.tableName,
      columnName: r.columnName,
      referencedTableName: r.referencedTableName,
      referencedColumnName: r.referencedColumnName,
    }))
    .sort((a, b) => (a.constraintName < b.constraintName ? -1 : 1))
}

// ---------------------------------------------------------------------------------------------
// Connecting

testCase('authenticate_and_session_setup', () =>
  withDb(async (s) => {
    await s.authenticate()
    const v = await s.databaseVersion()
    assert(/^\d+(\.\d+)*/.test(v) && parseInt(v, 10) >= 10, `databaseVersion ${show(v)}`)
    // Sequelize sets these on every new connection (timezone '+00:00' is its default).
    const rows = await s.query(
      "SELECT current_database() AS db, current_user AS u, current_setting('client_min_messages') AS cmm, " +
        "current_setting('standard_conforming_strings') AS scs, now()::text LIKE '%+00' AS utc",
      { type: QueryTypes.SELECT }
    )
    check(rows, [{ db: 'postgres', u: 'postgres', cmm: 'warning', scs: 'on', utc: true }])
    const [offset] = await s.query("SELECT extract(timezone FROM now())::int AS tz", { type: QueryTypes.SELECT })
    check(offset, { tz: 0 }, 'session time zone offset')
  })
)

// ---------------------------------------------------------------------------------------------
// Models, associations, sync and the introspection it relies on

function defineLibrary(s, prefix) {
  const Author = s.define('Author', { name: { type: DataTypes.STRING, allowNull: false } }, { tableName: `${prefix}_authors` })
  const Book = s.define(
    'Book',
    { title: { type: DataTypes.STRING(100), allowNull: false }, pages: DataTypes.INTEGER },
    { tableName: `${prefix}_books` }
  )
  const Genre = s.define('Genre', { label: { type: DataTypes.STRING(30), unique: true } }, { tableName: `${prefix}_genres`, timestamps: false })
  Author.hasMany(Book, { foreignKey: 'authorId', as: 'books' })
  Book.belongsTo(Author, { foreignKey: 'authorId', as: 'author' })
  Book.belongsToMany(Genre, { through: `${prefix}_book_genres`, foreignKey: 'bookId', otherKey: 'genreId', as: 'genres' })
  Genre.belongsToMany(Book, { through: `${prefix}_book_genres`, foreignKey: 'genreId', otherKey: 'bookId', as: 'books' })
  return { Author, Book, Genre }
}

testCase('define_sync_and_association_methods', () =>
  withDb(async (s, qi) => {
    const { Author, Book, Genre } = defineLibrary(s, 'lib')
    await s.sync()
    const tables = (await qi.showAllTables()).filter((t) => t.startsWith('lib_')).sort()
    check(tables, ['lib_authors', 'lib_book_genres', 'lib_books', 'lib_genres'], 'showAllTables')
    const ada = await Author.create({ name: 'Ada' })
    const b1 = await ada.createBook({ title: 'Notes', pages: 120 })
    const b2 = await Book.create({ title: 'Sketches', pages: 80, authorId: ada.id })
    const [fiction, science] = await Genre.bulkCreate([{ label: 'fiction' }, { label: 'science' }], { returning: true })
    await b1.setGenres([fiction, science])
    await b2.addGenre(science)
    check(await ada.countBooks(), 2, 'countBooks')
    check(
      (await ada.getBooks({ order: [['title', 'ASC']] })).map((b) => b.title),
      ['Notes', 'Sketches'],
      'getBooks'
    )
    check((await b2.getAuthor()).name, 'Ada', 'getAuthor')
    check(
      (await b1.getGenres({ order: [['label', 'ASC']] })).map((g) => g.label),
      ['fiction', 'science'],
      'getGenres'
    )
    check(
      (await science.getBooks({ order: [['id', 'ASC']], joinTableAttributes: [] })).map((b) => b.title),
      ['Notes', 'Sketches'],
      'science.getBooks'
    )
    check(await b1.hasGenre(fiction), true, 'hasGenre')
    await b1.removeGenre(fiction)
    check(await b1.hasGenre(fiction), false, 'hasGenre after removeGenre')
    check(await s.models.lib_book_genres.count(), 2, 'rows in the through table')
  })
)

testCase('describe_table_indexes_and_foreign_keys', () =>
  withDb(async (s, qi) => {
    defineLibrary(s, 'intro')
    await s.sync()
    const books = await qi.describeTable('intro_books')
    check(
      books.id,
      { type: 'INTEGER', allowNull: false, defaultValue: 'nextval(intro_books_id_seq::regclass)', comment: null, special: [], primaryKey: true },
      'intro_books.id'
    )
    check(
      books.title,
      { type: 'CHARACTER VARYING(100)', allowNull: false, defaultValue: null, comment: null, special: [], primaryKey: false },
      'intro_books.title'
    )
    check(Object.keys(books), ['id', 'title', 'pages', 'createdAt', 'updatedAt', 'authorId'], 'intro_books columns')
    check(books.createdAt.type, 'TIMESTAMP WITH TIME ZONE', 'createdAt type')
    check(books.authorId.type, 'INTEGER', 'authorId type')
    check(await foreignKeys(qi, 'intro_books'), [
      { constraintName: 'intro_books_authorId_fkey', tableName: 'intro_books', columnName: 'authorId', referencedTableName: 'intro_authors', referencedColumnName: 'id' },
    ], 'foreign keys of intro_books')
    check(await foreignKeys(qi, 'intro_book_genres'), [
      { constraintName: 'intro_book_genres_bookId_fkey', tableName: 'intro_book_genres', columnName: 'bookId', referencedTableName: 'intro_books', referencedColumnName: 'id' },
      { constraintName: 'intro_book_genres_genreId_fkey', tableName: 'intro_book_genres', columnName: 'genreId', referencedTableName: 'intro_genres', referencedColumnName: 'id' },
    ], 'foreign keys of intro_book_genres')
    check(await indexes(qi, 'intro_book_genres'), [
      { name: 'intro_book_genres_pkey', primary: true, unique: true, fields: ['bookId', 'genreId'] },
    ], 'indexes of intro_book_genres')
    check(await indexes(qi, 'intro_genres'), [
      { name: 'intro_genres_label_key', primary: false, unique: true, fields: ['label'] },
      { name: 'intro_genres_pkey', primary: true, unique: true, fields: ['id'] },
    ], 'indexes of intro_genres')
  })
)

testCase('sync_alter_after_model_change', () =>
  withDb(async (s, qi) => {
    const v1 = s.define(
      'Item',
      {
        name: { type: DataTypes.STRING(50), allowNull: false },
        qty: DataTypes.INTEGER,
        legacy: DataTypes.STRING,
        code: DataTypes.STRING(10),
      },
      { tableName: 'alter_items' }
    )
    await v1.sync()
    await v1.create({ name: 'widget', qty: 3, legacy: 'old', code: 'W1' })
    // The next release of the app: a column changes type and nullability, one is dropped, one is
    // added with a default, one becomes unique, and an index appears.
    s.define(
      'Item',
      {
        name: { type: DataTypes.TEXT, allowNull: true },
        qty: { type: DataTypes.BIGINT, allowNull: false, defaultValue: 0 },
        code: { type: DataTypes.STRING(10), unique: true },
        active: { type: DataTypes.BOOLEAN, allowNull: false, defaultValue: true },
      },
      { tableName: 'alter_items', indexes: [{ name: 'alter_items_qty_idx', fields: ['qty'] }] }
    )
    await s.sync({ alter: true })
    check(await columns(qi, 'alter_items'), {
      id: ['INTEGER', false, 'nextval(alter_items_id_seq::regclass)'],
      name: ['TEXT', true, null],
      qty: ['BIGINT', false, '0'],
      code: ['CHARACTER VARYING(10)', true, null],
      createdAt: ['TIMESTAMP WITH TIME ZONE', false, null],
      updatedAt: ['TIMESTAMP WITH TIME ZONE', false, null],
      active: ['BOOLEAN', false, true],
    }, 'columns after sync({alter: true})')
    check(await indexes(qi, 'alter_items'), [
      { name: 'alter_items_code_key', primary: false, unique: true, fields: ['code'] },
      { name: 'alter_items_pkey', primary: true, unique: true, fields: ['id'] },
      { name: 'alter_items_qty_idx', primary: false, unique: false, fields: ['qty'] },
    ], 'indexes after sync({alter: true})')
    const row = await s.models.Item.findOne({ raw: true, attributes: ['name', 'qty', 'code', 'active'] })
    check(row, { name: 'widget', qty: '3', code: 'W1', active: true }, 'the row kept across the alter')
    // A second alter with nothing changed: Sequelize 6 sends `ALTER COLUMN "code" TYPE ... UNIQUE`
    // again, and PostgreSQL adds a second unique constraint under the next free name.
    await s.sync({ alter: true })
    check((await indexes(qi, 'alter_items')).map((i) => i.name), ['alter_items_code_key', 'alter_items_code_key1', 'alter_items_pkey', 'alter_items_qty_idx'], 'indexes after a second alter')
    await expectError(s.models.Item.create({ name: 'dup', code: 'W1' }), Sequelize.UniqueConstraintError, '23505', 'unique code')
  })
)

testCase('sync_alter_keeps_one_foreign_key', () =>
  withDb(async (s, qi) => {
    const Team = s.define('Team', { name: DataTypes.STRING }, { tableName: 'fkalter_teams' })
    const Player = s.define('Player', { name: DataTypes.STRING }, { tableName: 'fkalter_players' })
    Player.belongsTo(Team, { foreignKey: 'teamId', onDelete: 'CASCADE' })
    Team.hasMany(Player, { foreignKey: 'teamId', onDelete: 'CASCADE' })
    await s.sync()
    await s.sync({ alter: true })
    await s.sync({ alter: true })
    const want = [{ constraintName: 'fkalter_players_teamId_fkey', tableName: 'fkalter_players', columnName: 'teamId', referencedTableName: 'fkalter_teams', referencedColumnName: 'id' }]
    check(await foreignKeys(qi, 'fkalter_players'), want, 'foreign keys after two alters')
    const defs = await s.query(
      "SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = 'fkalter_players'::regclass AND contype = 'f'",
      { type: QueryTypes.SELECT }
    )
    check(defs, [{ conname: 'fkalter_players_teamId_fkey', def: 'FOREIGN KEY ("teamId") REFERENCES fkalter_teams(id) ON UPDATE CASCADE ON DELETE CASCADE' }], 'pg_constraint')
    const t = await Team.create({ name: 'red' })
    await Player.bulkCreate([{ name: 'a', teamId: t.id }, { name: 'b', teamId: t.id }])
    await t.destroy()
    check(await Player.count(), 0, 'players after deleting the team (ON DELETE CASCADE)')
  })
)

// ---------------------------------------------------------------------------------------------
// Migrations through the query interface

testCase('migration_query_interface_in_transaction', () =>
  withDb(async (s, qi) => {
    await s.transaction(async (transaction) => {
      const o = { transaction }
      await qi.createTable('mig_accounts', {
        id: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: true },
        email: { type: DataTypes.STRING, allowNull: false },
        createdAt: { type: DataTypes.DATE, allowNull: false, defaultValue: s.fn('now') },
      }, o)
      await qi.createTable('mig_orders', {
        id: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: true },
        account_id: { type: DataTypes.INTEGER },
        amount: { type: DataTypes.INTEGER, allowNull: false },
        note: { type: DataTypes.STRING(20) },
        scratch: { type: DataTypes.STRING },
      }, o)
      await qi.bulkInsert('mig_accounts', [{ email: 'a@example.com' }, { email: 'b@example.com' }], o)
      await qi.bulkInsert('mig_orders', [{ account_id: 1, amount: 12, note: 'first' }, { account_id: 2, amount: 7, note: 'second' }], o)
      await qi.addColumn('mig_orders', 'status', { type: DataTypes.STRING(16), allowNull: false, defaultValue: 'new' }, o)
      // A type change of a column holding data, and a widening.
      await qi.changeColumn('mig_orders', 'amount', { type: DataTypes.DECIMAL(10, 2), allowNull: true }, o)
      await qi.changeColumn('mig_orders', 'note', { type: DataTypes.TEXT }, o)
      await qi.renameColumn('mig_orders', 'note', 'comment', o)
      await qi.removeColumn('mig_orders', 'scratch', o)
      await qi.addIndex('mig_orders', ['account_id', 'status'], { name: 'mig_orders_account_status', ...o })
      await qi.addIndex('mig_accounts', ['email'], { unique: true, ...o })
      await qi.addConstraint('mig_orders', {
        type: 'foreign key',
        fields: ['account_id'],
        name: 'mig_orders_account_fk',
        references: { table: 'mig_accounts', field: 'id' },
        onDelete: 'cascade',
        ...o,
      })
      await qi.addConstraint('mig_orders', { type: 'check', fields: ['amount'], where: { amount: { [Op.gte]: 0 } }, name: 'mig_orders_amount_nonneg', ...o })
      await qi.createTable('mig_scratch', { id: { type: DataTypes.INTEGER, primaryKey: true } }, o)
      await qi.dropTable('mig_scratch', o)
    })
    check(await columns(qi, 'mig_orders'), {
      id: ['INTEGER', false, 'nextval(mig_orders_id_seq::regclass)'],
      account_id: ['INTEGER', true, null],
      amount: ['NUMERIC', true, null],
      comment: ['TEXT', true, null],
      status: ['CHARACTER VARYING(16)', false, 'new'],
    }, 'mig_orders columns')
    check(await indexes(qi, 'mig_orders'), [
      { name: 'mig_orders_account_status', primary: false, unique: false, fields: ['account_id', 'status'] },
      { name: 'mig_orders_pkey', primary: true, unique: true, fields: ['id'] },
    ], 'mig_orders indexes')
    check(await indexes(qi, 'mig_accounts'), [
      { name: 'mig_accounts_email', primary: false, unique: true, fields: ['email'] },
      { name: 'mig_accounts_pkey', primary: true, unique: true, fields: ['id'] },
    ], 'mig_accounts indexes')
    check(await foreignKeys(qi, 'mig_orders'), [
      { constraintName: 'mig_orders_account_fk', tableName: 'mig_orders', columnName: 'account_id', referencedTableName: 'mig_accounts', referencedColumnName: 'id' },
    ], 'mig_orders foreign keys')
    check(await qi.tableExists('mig_scratch'), false, 'mig_scratch exists')
    const rows = await s.query('SELECT account_id, amount, comment, status FROM mig_orders ORDER BY id', { type: QueryTypes.SELECT })
    check(rows, [
      { account_id: 1, amount: '12.00', comment: 'first', status: 'new' },
      { account_id: 2, amount: '7.00', comment: 'second', status: 'new' },
    ], 'data across the migration')
    await expectError(
      qi.bulkInsert('mig_orders', [{ account_id: 1, amount: -1 }]),
      Sequelize.DatabaseError,
      '23514',
      'CHECK constraint'
    )
    await expectError(qi.bulkInsert('mig_accounts', [{ email: 'a@example.com' }]), Sequelize.UniqueConstraintError, '23505', 'unique index')
    await qi.bulkDelete('mig_accounts', { email: 'a@example.com' })
    const left = await s.query('SELECT account_id FROM mig_orders ORDER BY id', { type: QueryTypes.SELECT })
    check(left, [{ account_id: 2 }], 'orders after deleting an account (ON DELETE CASCADE)')
  })
)

// A small migration runner in the way umzug's SequelizeStorage keeps its state: a SequelizeMeta
// table of applied names, each migration in its own transaction.
async function migrate(s, migrations) {
  const qi = s.getQueryInterface()
  await qi.createTable('SequelizeMeta', { name: { type: DataTypes.STRING, allowNull: false, unique: true, primaryKey: true } })
  const done = new Set((await s.query('SELECT name FROM "SequelizeMeta"', { type: QueryTypes.SELECT })).map((r) => r.name))
  const applied = []
  for (const m of migrations) {
    if (done.has(m.name)) continue
    await s.transaction(async (transaction) => {
      await m.up(qi, transaction)
      await qi.bulkInsert('SequelizeMeta', [{ name: m.name }], { transaction })
    })
    applied.push(m.name)
  }
  return applied
}

async function revertLast(s, migrations) {
  const qi = s.getQueryInterface()
  const [last] = await s.query('SELECT name FROM "SequelizeMeta" ORDER BY name DESC LIMIT 1', { type: QueryTypes.SELECT })
  const m = migrations.find((x) => x.name === last.name)
  await s.transaction(async (transaction) => {
    await m.down(qi, transaction)
    await qi.bulkDelete('SequelizeMeta', { name: m.name }, { transaction })
  })
  return m.name
}

testCase('umzug_style_migrations_and_rollback', () =>
  withDb(async (s, qi) => {
    const migrations = [
      {
        name: '20240101000000-create-widgets',
        up: (qi, transaction) =>
          qi.createTable('umz_widgets', {
            id: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: true },
            name: { type: DataTypes.STRING, allowNull: false },
          }, { transaction }),
        down: (qi, transaction) => qi.dropTable('umz_widgets', { transaction }),
      },
      {
        name: '20240102000000-add-price',
        up: async (qi, transaction) => {
          await qi.addColumn('umz_widgets', 'price', { type: DataTypes.DECIMAL(10, 2), allowNull: false, defaultValue: 0 }, { transaction })
          await qi.bulkInsert('umz_widgets', [{ name: 'bolt', price: '0.25' }], { transaction })
        },
        down: (qi, transaction) => qi.removeColumn('umz_widgets', 'price', { transaction }),
      },
    ]
    check(await migrate(s, migrations), ['20240101000000-create-widgets', '20240102000000-add-price'], 'applied')
    check(await migrate(s, migrations), [], 'applied on the second run')
    // A migration that fails halfway: its DDL is rolled back with it.
    const broken = {
      name: '20240103000000-broken',
      up: async (qi, transaction) => {
        await qi.addColumn('umz_widgets', 'sku', { type: DataTypes.STRING }, { transaction })
        await qi.createTable('umz_extra', { id: { type: DataTypes.INTEGER, primaryKey: true } }, { transaction })
        await qi.bulkInsert('umz_widgets', [{ name: null }], { transaction })
      },
      down: async () => {},
    }
    await expectError(migrate(s, [...migrations, broken]), Sequelize.DatabaseError, '23502', 'the broken migration')
    check(Object.keys(await qi.describeTable('umz_widgets')), ['id', 'name', 'price'], 'columns after the failed migration')
    check(await qi.tableExists('umz_extra'), false, 'umz_extra after the failed migration')
    const meta = await s.query('SELECT name FROM "SequelizeMeta" ORDER BY name', { type: QueryTypes.SELECT })
    check(meta.map((r) => r.name), ['20240101000000-create-widgets', '20240102000000-add-price'], 'SequelizeMeta')
    check(await revertLast(s, migrations), '20240102000000-add-price', 'reverted')
    check(Object.keys(await qi.describeTable('umz_widgets')), ['id', 'name'], 'columns after down')
    check(await s.query('SELECT name FROM umz_widgets', { type: QueryTypes.SELECT }), [{ name: 'bolt' }], 'rows after down')
  })
)

// ---------------------------------------------------------------------------------------------
// Data types

testCase('scalar_types_round_trip', () =>
  withDb(async (s, qi) => {
    const T = s.define('Scalar', {
      str: DataTypes.STRING,
      txt: DataTypes.TEXT,
      int: DataTypes.INTEGER,
      big: DataTypes.BIGINT,
      dec: DataTypes.DECIMAL(10, 2),
      flt: DataTypes.FLOAT,
      dbl: DataTypes.DOUBLE,
      rl: DataTypes.REAL,
      small: DataTypes.SMALLINT,
      flag: DataTypes.BOOLEAN,
    }, { tableName: 'types_scalar', timestamps: false })
    await T.sync()
    const values = {
      str: "it's \u2603 \"q\" \\",
      txt: 'x'.repeat(10000),
      int: -2147483648,
      big: '9007199254740993',
      dec: '12345678.90',
      flt: 0.1 + 0.2,
      dbl: 2.718281828459045,
      rl: 1.5,
      small: 32767,
      flag: false,
    }
    const created = await T.create(values)
    check(created.id, 1, 'id')
    const back = (await T.findByPk(1)).get({ plain: true })
    check(back, { id: 1, ...values }, 'read back')
    // A number for a DECIMAL column comes back as the column's text.
    await T.create({ dec: 3.5, big: 42 })
    check((await T.findByPk(2, { raw: true })).dec, '3.50', 'DECIMAL from a number')
    check((await T.findByPk(2, { raw: true })).big, '42', 'BIGINT from a number')
    for (const key of Object.keys(values)) {
      if (key === 'flt' || key === 'dbl' || key === 'rl') continue
      check(await T.count({ where: { [key]: values[key] } }), 1, `WHERE ${key} = value`)
    }
    check(await T.count({ where: { dbl: { [Op.gt]: 2.7 }, flt: { [Op.lt]: 0.31 } } }), 1, 'float comparisons')
    check(await T.count({ where: { big: { [Op.gt]: '9007199254740992' } } }), 1, 'bigint beyond 2^53')
    check(await columns(qi, 'types_scalar'), {
      id: ['INTEGER', false, 'nextval(types_scalar_id_seq::regclass)'],
      str: ['CHARACTER VARYING(255)', true, null],
      txt: ['TEXT', true, null],
      int: ['INTEGER', true, null],
      big: ['BIGINT', true, null],
      dec: ['NUMERIC', true, null],
      flt: ['DOUBLE PRECISION', true, null],
      dbl: ['DOUBLE PRECISION', true, null],
      rl: ['REAL', true, null],
      small: ['SMALLINT', true, null],
      flag: ['BOOLEAN', true, null],
    }, 'describeTable')
  })
)

testCase('date_and_dateonly', () =>
  withDb(async (s) => {
    const E = s.define('Event', { at: DataTypes.DATE, day: DataTypes.DATEONLY }, { tableName: 'types_dates' })
    await E.sync()
    const at = new Date(Date.UTC(2024, 1, 29, 23, 59, 58, 123))
    const before = Date.now()
    const e = await E.create({ at, day: '2024-02-29' })
    assert(e.createdAt instanceof Date && e.createdAt.getTime() >= before - 5000, `createdAt ${show(e.createdAt)}`)
    await E.create({ at: new Date(Date.UTC(2024, 2, 1, 0, 0, 0)), day: '2024-03-01' })
    await E.create({ at: null, day: null })
    const back = await E.findByPk(e.id)
    assert(back.at instanceof Date && back.at.getTime() === at.getTime(), `DATE read ${show(back.at)}`)
    check(back.day, '2024-02-29', 'DATEONLY read')
    const between = await E.findAll({
      where: { at: { [Op.between]: [new Date(Date.UTC(2024, 1, 29)), new Date(Date.UTC(2024, 1, 29, 23, 59, 59))] } },
    })
    check(between.map((x) => x.day), ['2024-02-29'], 'DATE between')
    check((await E.findAll({ where: { day: { [Op.gte]: '2024-03-01' } } })).map((x) => x.day), ['2024-03-01'], 'DATEONLY >=')
    check(await E.count({ where: { at: null } }), 1, 'IS NULL')
    const [txt] = await E.findAll({
      attributes: [[s.fn('to_char', s.col('at'), 'YYYY-MM-DD HH24:MI:SS.MS'), 'text'], [s.fn('date_trunc', 'month', s.col('at')), 'month']],
      where: { id: e.id },
      raw: true,
    })
    check(txt.text, '2024-02-29 23:59:58.123', 'to_char in the session time zone (+00:00)')
    assert(txt.month instanceof Date && txt.month.getTime() === Date.UTC(2024, 1, 1), `date_trunc ${show(txt.month)}`)
  })
)

testCase('uuid_primary_key_with_uuidv4_default', () =>
  withDb(async (s, qi) => {
    const U = s.define('Session', {
      id: { type: DataTypes.UUID, defaultValue: DataTypes.UUIDV4, primaryKey: true },
      token: { type: DataTypes.UUID, defaultValue: s.literal('gen_random_uuid()'), allowNull: false },
      label: DataTypes.STRING,
    }, { tableName: 'types_uuid', timestamps: false })
    await U.sync()
    const re = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
    const a = await U.create({ label: 'a' })
    const b = await U.create({ label: 'b' })
    assert(re.test(a.id) && re.test(b.id) && a.id !== b.id, `ids ${a.id} ${b.id}`)
    assert(re.test(a.token), `token from gen_random_uuid() returned: ${show(a.token)}`)
    check((await U.findByPk(a.id)).label, 'a', 'findByPk(uuid)')
    check((await U.findByPk(a.id.toUpperCase())).label, 'a', 'findByPk(upper-case uuid)')
    check((await U.findAll({ where: { id: { [Op.in]: [a.id, b.id] } }, order: [['label', 'ASC']] })).map((x) => x.label), ['a', 'b'], 'IN uuids')
    await U.create({ id: '00000000-0000-4000-8000-000000000001', label: 'fixed' })
    check((await U.findOne({ where: { label: 'fixed' } })).id, '00000000-0000-4000-8000-000000000001', 'explicit id')
    check((await qi.describeTable('types_uuid')).id.type, 'UUID', 'describeTable')
    await expectError(U.findByPk('not-a-uuid'), Sequelize.DatabaseError, '22P02', 'invalid uuid')
  })
)

testCase('jsonb_nested_where', () =>
  withDb(async (s) => {
    const D = s.define('Doc', { name: DataTypes.STRING, meta: DataTypes.JSONB }, { tableName: 'types_jsonb', timestamps: false })
    await D.sync()
    await D.bulkCreate([
      { name: 'a', meta: { city: 'Oslo', tags: ['x', 'y'], stats: { visits: 5, score: 1.5 }, active: true, owner: { name: 'Kari' } } },
      { name: 'b', meta: { city: 'Bergen', tags: ['y'], stats: { visits: 12, score: 0.5 }, active: false } },
      { name: 'c', meta: { city: 'Oslo', stats: { visits: 40 }, note: "it's \"quoted\"" } },
      { name: 'd', meta: null },
    ])
    const names = async (where, order = [['name', 'ASC']]) => (await D.findAll({ where, order })).map((x) => x.name)
    check(await names({ meta: { city: 'Oslo' } }), ['a', 'c'], 'meta.city = Oslo')
    check(await names({ meta: { stats: { visits: { [Op.gt]: 10 } } } }), ['b', 'c'], 'meta.stats.visits > 10')
    check(await names({ 'meta.stats.visits': { [Op.lte]: 12 } }), ['a', 'b'], "'meta.stats.visits' <= 12")
    check(await names({ meta: { owner: { name: 'Kari' } } }), ['a'], 'two levels deep')
    check(await names({ meta: { active: true } }), ['a'], 'boolean leaf')
    check(await names({ meta: { [Op.contains]: { tags: ['y'] } } }), ['a', 'b'], '@> {tags: [y]}')
    check(await names({ meta: { note: "it's \"quoted\"" } }), ['c'], 'quoted string leaf')
    check(await names({ meta: { city: { [Op.in]: ['Bergen', 'Trondheim'] } } }), ['b'], 'IN on a path')
    check(await names({ meta: null }), ['d'], 'meta IS NULL')
    // A JSON path is text (#>>), so it sorts as text: '5' > '40' > '12'.
    check(
      await names({ meta: { [Op.ne]: null } }, [[s.json('meta.stats.visits'), 'DESC']]),
      ['a', 'c', 'b'],
      'ORDER BY a JSON path'
    )
    check(
      await names({ meta: { [Op.ne]: null } }, [[s.cast(s.json('meta.stats.visits'), 'integer'), 'DESC']]),
      ['c', 'b', 'a'],
      'ORDER BY a JSON path cast to integer'
    )
    const [row] = await D.findAll({ attributes: [[s.json('meta.owner.name'), 'owner'], [s.json('meta.stats'), 'stats']], where: { name: 'a' }, raw: true })
    // #>> gives text: an object comes back as jsonb's text form (keys by length, then bytes).
    check(row, { owner: 'Kari', stats: '{"score": 1.5, "visits": 5}' }, 'JSON paths as attributes')
    const a = await D.findOne({ where: { name: 'a' } })
    a.meta = { ...a.meta, city: 'Tromsø', stats: { visits: 6 } }
    await a.save()
    check((await D.findOne({ where: { name: 'a' } })).meta, { city: 'Tromsø', tags: ['x', 'y'], stats: { visits: 6 }, active: true, owner: { name: 'Kari' } }, 'after save')
  })
)

testCase('arrays_contains_and_overlap', () =>
  withDb(async (s) => {
    const P = s.define('Post', { name: DataTypes.STRING, tags: DataTypes.ARRAY(DataTypes.STRING), scores: DataTypes.ARRAY(DataTypes.INTEGER) }, { tableName: 'types_arrays', timestamps: false })
    await P.sync()
    await P.bulkCreate([
      { name: 'a', tags: ['red', 'blue'], scores: [1, 2, 3] },
      { name: 'b', tags: ['green', 'with,comma', 'quote"d', 'NULL'], scores: [3, 4] },
      { name: 'c', tags: [], scores: [] },
      { name: 'd', tags: null, scores: null },
    ])
    const b = await P.findOne({ where: { name: 'b' } })
    check(b.tags, ['green', 'with,comma', 'quote"d', 'NULL'], 'text[] read back')
    check(b.scores, [3, 4], 'int[] read back')
    check((await P.findOne({ where: { name: 'c' } })).tags, [], 'empty array')
    const names = async (where) => (await P.findAll({ where, order: [['name', 'ASC']] })).map((x) => x.name)
    check(await names({ tags: { [Op.contains]: ['red'] } }), ['a'], 'tags @> {red}')
    check(await names({ tags: { [Op.overlap]: ['blue', 'green'] } }), ['a', 'b'], 'tags && {blue,green}')
    check(await names({ tags: { [Op.contains]: ['with,comma', 'quote"d'] } }), ['b'], 'tags @> quoted elements')
    check(await names({ scores: { [Op.contains]: [1, 3] } }), ['a'], 'scores @> {1,3}')
    check(await names({ scores: { [Op.overlap]: [3] } }), ['a', 'b'], 'scores && {3}')
    check(await names({ scores: { [Op.contained]: [1, 2, 3, 4] } }), ['a', 'b', 'c'], 'scores <@ {1,2,3,4}')
    check(await names({ tags: [] }), ['c'], 'tags = {}')
    await P.update({ tags: s.fn('array_append', s.col('tags'), 'new') }, { where: { name: 'a' } })
    check((await P.findOne({ where: { name: 'a' } })).tags, ['red', 'blue', 'new'], 'array_append')
    const [len] = await P.findAll({ attributes: [[s.fn('array_length', s.col('scores'), 1), 'n']], where: { name: 'a' }, raw: true })
    check(len, { n: 3 }, 'array_length')
  })
)

testCase('blob_bytea', () =>
  withDb(async (s, qi) => {
    const F = s.define('File', { name: DataTypes.STRING, data: DataTypes.BLOB }, { tableName: 'types_blob', timestamps: false })
    await F.sync()
    const bytes = Buffer.from([0, 1, 2, 39, 92, 127, 128, 255])
    await F.create({ name: 'bin', data: bytes })
    await F.create({ name: 'big', data: Buffer.alloc(100000, 7) })
    await F.create({ name: 'empty', data: Buffer.alloc(0) })
    check((await F.findOne({ where: { name: 'bin' } })).data, bytes, 'bytes read back')
    check((await F.findOne({ where: { name: 'empty' } })).data, Buffer.alloc(0), 'empty bytea')
    check((await F.findOne({ where: { data: bytes } })).name, 'bin', 'WHERE data = buffer')
    const sizes = await F.findAll({ attributes: ['name', [s.fn('octet_length', s.col('data')), 'len']], order: [['id', 'ASC']], raw: true })
    check(sizes, [{ name: 'bin', len: 8 }, { name: 'big', len: 100000 }, { name: 'empty', len: 0 }], 'octet_length')
    check((await qi.describeTable('types_blob')).data.type, 'BYTEA', 'describeTable')
  })
)

testCase('enum_creates_a_type', () =>
  withDb(async (s, qi) => {
    const M = s.define('Mood', { who: DataTypes.STRING, mood: { type: DataTypes.ENUM('sad', 'ok', 'happy'), allowNull: false, defaultValue: 'ok' } }, { tableName: 'types_enum', timestamps: false })
    await M.sync()
    const types = await s.query("SELECT t.typname, array_agg(e.enumlabel ORDER BY e.enumsortorder)::text AS labels FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid WHERE t.typname = 'enum_types_enum_mood' GROUP BY 1", { type: QueryTypes.SELECT })
    check(types, [{ typname: 'enum_types_enum_mood', labels: '{sad,ok,happy}' }], 'the type sync created')
    await M.bulkCreate([{ who: 'a', mood: 'happy' }, { who: 'b', mood: 'sad' }, { who: 'c' }])
    // Ordered by the labels' order in the type, not alphabetically.
    check((await M.findAll({ order: [['mood', 'ASC']] })).map((x) => [x.who, x.mood]), [['b', 'sad'], ['c', 'ok'], ['a', 'happy']], 'ORDER BY the enum')
    check((await M.findAll({ where: { mood: { [Op.gt]: 'sad' } }, order: [['who', 'ASC']] })).map((x) => x.who), ['a', 'c'], 'mood > sad')
    const d = await qi.describeTable('types_enum')
    check([d.mood.type, d.mood.special], ['USER-DEFINED', ['sad', 'ok', 'happy']], 'describeTable of the enum column')
    await expectError(
      s.query("INSERT INTO types_enum (who, mood) VALUES ('x', 'angry')"),
      Sequelize.DatabaseError,
      '22P02',
      'a label not in the type'
    )
    // A new label in the model: sync({alter: true}) adds it to the type.
    s.define('Mood', { who: DataTypes.STRING, mood: { type: DataTypes.ENUM('sad', 'ok', 'happy', 'ecstatic'), allowNull: false, defaultValue: 'ok' } }, { tableName: 'types_enum', timestamps: false })
    await s.sync({ alter: true })
    await s.models.Mood.create({ who: 'e', mood: 'ecstatic' })
    const [r] = await s.query('SELECT enum_range(NULL::enum_types_enum_mood)::text AS r', { type: QueryTypes.SELECT })
    check(r.r, '{sad,ok,happy,ecstatic}', 'labels after alter')
    // Dropping the model drops its enum types too (an options object is needed: Sequelize sets a
    // flag on it).
    await s.models.Mood.drop({})
    check((await qi.pgListEnums()).filter((e) => e.enum_name === 'enum_types_enum_mood'), [], 'enum after drop')
    await qi.createTable('types_enum2', { id: { type: DataTypes.INTEGER, primaryKey: true }, level: { type: DataTypes.ENUM('low', 'high') } })
    check(await qi.pgListEnums('types_enum2'), [{ enum_name: 'enum_types_enum2_level', enum_value: '{low,high}' }], 'pgListEnums (a name[], which pg leaves as text)')
    await qi.dropTable('types_enum2')
    await qi.dropEnum('enum_types_enum2_level')
    check(await qi.pgListEnums('types_enum2'), [], 'pgListEnums after dropEnum')
  })
)

// ---------------------------------------------------------------------------------------------
// Writing

testCase('bulk_create_returning', () =>
  withDb(async (s) => {
    const I = s.define('Item', {
      name: { type: DataTypes.STRING, allowNull: false },
      status: { type: DataTypes.STRING, defaultValue: 'new' },
      seq: { type: DataTypes.INTEGER, defaultValue: s.literal("nextval('bulk_items_seq')") },
    }, { tableName: 'bulk_items' })
    await s.query('CREATE SEQUENCE bulk_items_seq START 100')
    await I.sync()
    const created = await I.bulkCreate([{ name: 'a' }, { name: 'b', status: 'old' }, { name: 'c' }], { returning: true })
    // seq comes from a server-side default: only RETURNING tells the app its value.
    check(created.map((x) => [x.id, x.name, x.status, x.seq]), [[1, 'a', 'new', 100], [2, 'b', 'old', 101], [3, 'c', 'new', 102]], 'RETURNING')
    assert(created.every((x) => x.createdAt instanceof Date && !x.isNewRecord), 'instances are persisted')
    const some = await I.bulkCreate([{ name: 'd' }, { name: 'e' }], { returning: ['id'] })
    check(some.map((x) => x.id), [4, 5], 'RETURNING id')
    await expectError(I.bulkCreate([{ name: 'f' }, { name: null }], { validate: false }), Sequelize.DatabaseError, '23502', 'NOT NULL in a batch')
    check(await I.count(), 5, 'rows after the failed batch')
    const ignored = await I.bulkCreate([{ id: 1, name: 'dup' }, { id: 6, name: 'g' }], { ignoreDuplicates: true, returning: true })
    check(ignored.length, 2, 'instances from ignoreDuplicates')
    check((await I.findAll({ order: [['id', 'ASC']] })).map((x) => x.name), ['a', 'b', 'c', 'd', 'e', 'g'], 'after ignoreDuplicates')
  })
)

testCase('bulk_create_update_on_duplicate', () =>
  withDb(async (s) => {
    const P = s.define('Price', {
      sku: { type: DataTypes.STRING, allowNull: false, unique: true },
      name: DataTypes.STRING,
      price: DataTypes.DECIMAL(10, 2),
      hits: { type: DataTypes.INTEGER, defaultValue: 0 },
    }, { tableName: 'bulk_prices' })
    await P.sync()
    await P.bulkCreate([{ sku: 'A', name: 'alpha', price: '1.00', hits: 5 }, { sku: 'B', name: 'beta', price: '2.00', hits: 7 }])
    const result = await P.bulkCreate(
      [{ sku: 'B', name: 'beta2', price: '2.50', hits: 0 }, { sku: 'C', name: 'gamma', price: '3.00' }],
      { updateOnDuplicate: ['name', 'price', 'updatedAt'], returning: true }
    )
    check(result.map((x) => [x.id, x.sku, x.name, x.price, x.hits]), [[2, 'B', 'beta2', '2.50', 7], [4, 'C', 'gamma', '3.00', 0]], 'RETURNING of the upserted rows')
    check(pickAll(await P.findAll({ order: [['sku', 'ASC']] }), ['sku', 'name', 'price', 'hits']), [
      { sku: 'A', name: 'alpha', price: '1.00', hits: 5 },
      { sku: 'B', name: 'beta2', price: '2.50', hits: 7 },
      { sku: 'C', name: 'gamma', price: '3.00', hits: 0 },
    ], 'table after updateOnDuplicate')
    // With conflictAttributes naming the unique key explicitly.
    await P.bulkCreate([{ sku: 'A', name: 'alpha2', price: '9.99' }], { updateOnDuplicate: ['price'], conflictAttributes: ['sku'] })
    check(pick((await P.findOne({ where: { sku: 'A' } })).get(), ['name', 'price']), { name: 'alpha', price: '9.99' }, 'conflictAttributes')
  })
)

testCase('instance_save_update_and_timestamps', () =>
  withDb(async (s) => {
    const N = s.define('Note', { title: DataTypes.STRING, body: DataTypes.TEXT, views: { type: DataTypes.INTEGER, defaultValue: 0 } }, { tableName: 'crud_notes' })
    await N.sync()
    const n = await N.create({ title: 'first', body: 'b' })
    const created = n.createdAt.getTime()
    check(n.updatedAt.getTime(), created, 'updatedAt = createdAt on insert')
    await sleep(20)
    n.title = 'renamed'
    check(n.changed(), ['title'], 'changed()')
    await n.save()
    const sql = sqlLog.filter((q) => q.includes('UPDATE "crud_notes"')).pop()
    assert(sql && !sql.includes('"body"'), `UPDATE sent unchanged columns: ${sql}`)
    await n.reload()
    check(n.title, 'renamed', 'title after reload')
    assert(n.updatedAt.getTime() > created, 'updatedAt moved')
    await N.bulkCreate([{ title: 'x' }, { title: 'y' }])
    const [count, rows] = await N.update({ body: 'bulk' }, { where: { title: { [Op.in]: ['x', 'y'] } }, returning: true })
    check([count, rows.map((r) => r.body).sort()], [2, ['bulk', 'bulk']], 'update RETURNING')
    check(await N.update({ body: 'none' }, { where: { title: 'nope' } }), [0], 'update with no match')
    check(await N.destroy({ where: { title: 'x' } }), 1, 'destroy count')
    await n.destroy()
    check((await N.findAll()).map((x) => x.title), ['y'], 'rows left')
  })
)

testCase('increment_and_decrement', () =>
  withDb(async (s) => {
    const S = s.define('Stock', { sku: DataTypes.STRING, qty: DataTypes.INTEGER, price: DataTypes.DECIMAL(10, 2) }, { tableName: 'crud_stock' })
    await S.sync()
    const a = await S.create({ sku: 'a', qty: 10, price: '1.00' })
    await S.create({ sku: 'b', qty: 1, price: '2.00' })
    await a.increment('qty', { by: 5 })
    await a.reload()
    check(a.qty, 15, 'instance.increment')
    await a.increment({ qty: 2, price: '0.25' })
    await a.reload()
    check([a.qty, a.price], [17, '1.25'], 'increment of two columns')
    const [[rows, count]] = await S.decrement('qty', { by: 3, where: { sku: { [Op.in]: ['a', 'b'] } } })
    check(count, 2, 'decrement affected rows')
    check(rows.map((r) => [r.sku, r.qty]).sort(), [['a', 14], ['b', -2]], 'decrement RETURNING')
    await a.decrement('qty')
    check((await S.findByPk(a.id)).qty, 13, 'instance.decrement by 1')
    // Concurrent increments do not lose updates: each is a single UPDATE ... SET qty = qty + 1.
    await Promise.all(Array.from({ length: 10 }, () => S.increment('qty', { where: { sku: 'b' } })))
    check((await S.findOne({ where: { sku: 'b' } })).qty, 8, 'after 10 concurrent increments')
  })
)

testCase('upsert', () =>
  withDb(async (s) => {
    const U = s.define('Setting', { key: { type: DataTypes.STRING, primaryKey: true }, value: DataTypes.STRING, version: { type: DataTypes.INTEGER, defaultValue: 1 } }, { tableName: 'crud_settings' })
    await U.sync()
    const [first, created1] = await U.upsert({ key: 'theme', value: 'dark' })
    check([first.key, first.value, first.version, created1], ['theme', 'dark', 1, null], 'insert')
    const [second, created2] = await U.upsert({ key: 'theme', value: 'light', version: 2 })
    check([second.key, second.value, second.version, created2], ['theme', 'light', 2, null], 'update')
    check(pickAll(await U.findAll(), ['key', 'value', 'version']), [{ key: 'theme', value: 'light', version: 2 }], 'table')
    const E = s.define('Email', { email: { type: DataTypes.STRING, unique: true }, name: DataTypes.STRING }, { tableName: 'crud_emails' })
    await E.sync()
    await E.upsert({ email: 'a@example.com', name: 'A' })
    const [again] = await E.upsert({ email: 'a@example.com', name: 'A2' }, { conflictFields: ['email'] })
    check([again.id, again.name], [1, 'A2'], 'upsert on a unique column')
    check(await E.count(), 1, 'rows')
  })
)

testCase('find_or_create', () =>
  withDb(async (s) => {
    const T = s.define('Tag', { name: { type: DataTypes.STRING, unique: true }, uses: { type: DataTypes.INTEGER, defaultValue: 0 } }, { tableName: 'crud_tags' })
    await T.sync()
    const [a, createdA] = await T.findOrCreate({ where: { name: 'node' }, defaults: { uses: 3 } })
    check([a.id, a.name, a.uses, createdA], [1, 'node', 3, true], 'first findOrCreate')
    const [b, createdB] = await T.findOrCreate({ where: { name: 'node' }, defaults: { uses: 9 } })
    check([b.id, b.uses, createdB], [1, 3, false], 'second findOrCreate')
    const [c, createdC] = await s.transaction((transaction) => T.findOrCreate({ where: { name: 'sql' }, transaction }))
    check([c.name, createdC], ['sql', true], 'findOrCreate in a transaction')
    const [d, createdD] = await T.findCreateFind({ where: { name: 'orm' } })
    check([d.name, createdD], ['orm', true], 'findCreateFind')
    check(await T.count(), 3, 'rows')
  })
)

// ---------------------------------------------------------------------------------------------
// Reading

async function seedProducts(s, table) {
  const P = s.define('Product', {
    name: DataTypes.STRING,
    category: DataTypes.STRING,
    price: DataTypes.DECIMAL(10, 2),
    qty: DataTypes.INTEGER,
  }, { tableName: table, timestamps: false })
  await P.sync()
  await P.bulkCreate([
    { name: 'Apple', category: 'fruit', price: '1.20', qty: 50 },
    { name: 'apricot', category: 'fruit', price: '2.50', qty: 0 },
    { name: 'Banana', category: 'fruit', price: '0.80', qty: 120 },
    { name: 'Carrot', category: 'veg', price: '0.50', qty: 80 },
    { name: 'Celery', category: 'veg', price: '1.75', qty: null },
    { name: 'Milk', category: 'dairy', price: '1.10', qty: 30 },
    { name: 'Cheese_50%', category: 'dairy', price: '7.90', qty: 8 },
  ])
  return P
}

testCase('find_all_operators', () =>
  withDb(async (s) => {
    const P = await seedProducts(s, 'read_ops')
    const names = async (where) => (await P.findAll({ where, order: [['id', 'ASC']] })).map((x) => x.name)
    check(await names({ qty: { [Op.gt]: 50 } }), ['Banana', 'Carrot'], 'gt')
    check(await names({ price: { [Op.gte]: '1.75' } }), ['apricot', 'Celery', 'Cheese_50%'], 'gte on numeric')
    check(await names({ category: { [Op.in]: ['veg', 'dairy'] }, qty: { [Op.ne]: null } }), ['Carrot', 'Milk', 'Cheese_50%'], 'in and ne null')
    check(await names({ category: { [Op.notIn]: ['fruit'] }, qty: null }), ['Celery'], 'notIn and IS NULL')
    check(await names({ name: { [Op.like]: 'C%' } }), ['Carrot', 'Celery', 'Cheese_50%'], 'like')
    check(await names({ name: { [Op.iLike]: 'a%' } }), ['Apple', 'apricot'], 'iLike')
    check(await names({ name: { [Op.notILike]: '%e%' } }), ['apricot', 'Banana', 'Carrot', 'Milk'], 'notILike')
    check(await names({ name: { [Op.like]: '%\\_50\\%' } }), ['Cheese_50%'], 'like with escapes')
    check(await names({ [Op.or]: [{ category: 'veg' }, { qty: { [Op.lt]: 10 } }] }), ['apricot', 'Carrot', 'Celery', 'Cheese_50%'], 'or')
    check(
      await names({ [Op.and]: [{ category: 'fruit' }, { [Op.or]: [{ price: { [Op.lt]: 1 } }, { name: { [Op.startsWith]: 'Ap' } }] }] }),
      ['Apple', 'Banana'],
      'and of or'
    )
    check(await names({ qty: { [Op.between]: [8, 50] } }), ['Apple', 'Milk', 'Cheese_50%'], 'between')
    check(await names({ name: { [Op.regexp]: '^[A-C][a-z]+$' } }), ['Apple', 'Banana', 'Carrot', 'Celery'], 'regexp')
    check(await names({ name: { [Op.substring]: 'rr' } }), ['Carrot'], 'substring')
    check(await names(s.where(s.fn('lower', s.col('name')), 'apple')), ['Apple'], 'sequelize.where(fn(lower))')
    check(await names({ qty: { [Op.gt]: s.col('price') } }), ['Apple', 'Banana', 'Carrot', 'Milk', 'Cheese_50%'], 'column comparison')
    check(await names({ id: { [Op.in]: [] } }), [], 'empty IN list')
  })
)

testCase('order_limit_offset', () =>
  withDb(async (s) => {
    const P = await seedProducts(s, 'read_order')
    const page = async (opts) => (await P.findAll(opts)).map((x) => x.name)
    check(await page({ order: [['price', 'DESC']], limit: 3 }), ['Cheese_50%', 'apricot', 'Celery'], 'top 3 by price')
    check(await page({ order: [['price', 'DESC']], limit: 3, offset: 3 }), ['Apple', 'Milk', 'Banana'], 'second page')
    check(await page({ order: [['price', 'DESC']], offset: 6 }), ['Carrot'], 'offset without limit')
    check(await page({ order: [['category', 'ASC'], ['name', 'DESC']] }), ['Milk', 'Cheese_50%', 'apricot', 'Banana', 'Apple', 'Celery', 'Carrot'], 'two keys')
    check(await page({ order: [['qty', 'DESC NULLS LAST']], limit: 2 }), ['Banana', 'Carrot'], 'DESC NULLS LAST')
    check(await page({ order: [['qty', 'DESC']], limit: 1 }), ['Celery'], 'NULL sorts first in DESC')
    check(await page({ order: [[s.fn('lower', s.col('name')), 'ASC']], limit: 3 }), ['Apple', 'apricot', 'Banana'], 'ORDER BY lower(name)')
    check(await page({ order: s.literal('length(name) DESC, id'), limit: 2 }), ['Cheese_50%', 'apricot'], 'ORDER BY a literal')
    const first = await P.findOne({ order: [['qty', 'ASC']] })
    check(first.name, 'apricot', 'findOne with order')
  })
)

testCase('group_count_sum', () =>
  withDb(async (s) => {
    const P = await seedProducts(s, 'read_group')
    const rows = await P.findAll({
      attributes: ['category', [s.fn('COUNT', s.col('id')), 'n'], [s.fn('SUM', s.col('qty')), 'units'], [s.fn('SUM', s.col('price')), 'total'], [s.fn('AVG', s.col('price')), 'avg']],
      group: ['category'],
      order: [['category', 'ASC']],
      raw: true,
    })
    check(rows, [
      { category: 'dairy', n: '2', units: '38', total: '9.00', avg: '4.5000000000000000' },
      { category: 'fruit', n: '3', units: '170', total: '4.50', avg: '1.5000000000000000' },
      { category: 'veg', n: '2', units: '80', total: '2.25', avg: '1.12500000000000000000' },
    ], 'GROUP BY with aggregates (raw)')
    // count() drops the order; the groups come in whatever order the plan gives.
    check((await P.count({ group: ['category'] })).sort((a, b) => (a.category < b.category ? -1 : 1)), [
      { category: 'dairy', count: 2 },
      { category: 'fruit', count: 3 },
      { category: 'veg', count: 2 },
    ], 'count({group})')
    check(await P.count({ where: { category: 'fruit' } }), 3, 'count')
    check(await P.count({ col: 'qty' }), 6, 'count(col) skips NULL')
    check(await P.count({ distinct: true, col: 'category' }), 3, 'count(DISTINCT)')
    check(await P.sum('qty'), 288, 'sum')
    check(await P.sum('price', { where: { category: 'veg' } }), 2.25, 'sum(numeric)')
    check(await P.max('price'), 7.9, 'max(numeric), parsed by Sequelize')
    check(await P.min('qty'), 0, 'min')
    const having = await P.findAll({
      attributes: ['category', [s.fn('COUNT', s.col('id')), 'n']],
      group: ['category'],
      having: s.where(s.fn('COUNT', s.col('id')), { [Op.gt]: 2 }),
      raw: true,
    })
    check(having, [{ category: 'fruit', n: '3' }], 'HAVING')
  })
)

async function seedBlog(s, prefix) {
  const User = s.define('User', { name: DataTypes.STRING }, { tableName: `${prefix}_users`, timestamps: false })
  const Post = s.define('Post', { title: DataTypes.STRING, published: DataTypes.BOOLEAN }, { tableName: `${prefix}_posts`, timestamps: false })
  const Comment = s.define('Comment', { body: DataTypes.STRING }, { tableName: `${prefix}_comments`, timestamps: false })
  const Tag = s.define('Tag', { name: DataTypes.STRING }, { tableName: `${prefix}_tags`, timestamps: false })
  const PostTag = s.define('PostTag', { weight: DataTypes.INTEGER }, { tableName: `${prefix}_post_tags`, timestamps: false })
  User.hasMany(Post, { as: 'posts', foreignKey: 'userId' })
  Post.belongsTo(User, { as: 'author', foreignKey: 'userId' })
  Post.hasMany(Comment, { as: 'comments', foreignKey: 'postId' })
  Comment.belongsTo(Post, { foreignKey: 'postId' })
  Comment.belongsTo(User, { as: 'commenter', foreignKey: 'userId' })
  Post.belongsToMany(Tag, { through: PostTag, as: 'tags', foreignKey: 'postId', otherKey: 'tagId' })
  Tag.belongsToMany(Post, { through: PostTag, as: 'posts', foreignKey: 'tagId', otherKey: 'postId' })
  await s.sync()
  await User.bulkCreate([{ name: 'ann' }, { name: 'bob' }, { name: 'cy' }])
  await Post.bulkCreate([
    { title: 'p1', published: true, userId: 1 },
    { title: 'p2', published: false, userId: 1 },
    { title: 'p3', published: true, userId: 2 },
    { title: 'p4', published: true, userId: 1 },
  ])
  await Comment.bulkCreate([
    { body: 'c1', postId: 1, userId: 2 },
    { body: 'c2', postId: 1, userId: 3 },
    { body: 'c3', postId: 3, userId: 1 },
  ])
  await Tag.bulkCreate([{ name: 'js' }, { name: 'sql' }])
  await PostTag.bulkCreate([{ postId: 1, tagId: 1, weight: 5 }, { postId: 1, tagId: 2, weight: 1 }, { postId: 3, tagId: 2, weight: 3 }])
  return { User, Post, Comment, Tag, PostTag }
}

testCase('include_eager_loading', () =>
  withDb(async (s) => {
    const { User, Post, Comment, Tag } = await seedBlog(s, 'eager')
    const users = await User.findAll({
      include: [{ model: Post, as: 'posts', include: [{ model: Comment, as: 'comments', include: [{ model: User, as: 'commenter' }] }] }],
      order: [['id', 'ASC'], [{ model: Post, as: 'posts' }, 'id', 'ASC'], [{ model: Post, as: 'posts' }, { model: Comment, as: 'comments' }, 'id', 'ASC']],
    })
    check(
      users.map((u) => [u.name, u.posts.map((p) => [p.title, p.comments.map((c) => `${c.body}:${c.commenter.name}`)])]),
      [
        ['ann', [['p1', ['c1:bob', 'c2:cy']], ['p2', []], ['p4', []]]],
        ['bob', [['p3', ['c3:ann']]]],
        ['cy', []],
      ],
      'three levels of LEFT JOIN'
    )
    // required: true makes an INNER JOIN; a where on the include filters the parents.
    const withPublished = await User.findAll({
      include: [{ model: Post, as: 'posts', where: { published: true }, required: true, attributes: ['title'] }],
      order: [['id', 'ASC'], [{ model: Post, as: 'posts' }, 'id', 'ASC']],
    })
    check(withPublished.map((u) => [u.name, u.posts.map((p) => p.title)]), [['ann', ['p1', 'p4']], ['bob', ['p3']]], 'required include')
    // belongsTo, and a where on the parent referring to the included table.
    const posts = await Post.findAll({ include: [{ model: User, as: 'author' }], where: { '$author.name$': 'ann' }, order: [['id', 'ASC']] })
    check(posts.map((p) => `${p.title}:${p.author.name}`), ['p1:ann', 'p2:ann', 'p4:ann'], 'belongsTo include with $author.name$')
    // belongsToMany with the through table's attributes.
    const tagged = await Post.findAll({
      include: [{ model: Tag, as: 'tags', through: { attributes: ['weight'] } }],
      where: { id: [1, 3] },
      order: [['id', 'ASC'], [{ model: Tag, as: 'tags' }, 'name', 'ASC']],
    })
    check(tagged.map((p) => [p.title, p.tags.map((t) => [t.name, t.PostTag.weight])]), [['p1', [['js', 5], ['sql', 1]]], ['p3', [['sql', 3]]]], 'belongsToMany include')
    // limit with a hasMany include: Sequelize puts the parents in a subquery.
    const limited = await User.findAll({
      include: [{ model: Post, as: 'posts' }],
      order: [['id', 'ASC'], [{ model: Post, as: 'posts' }, 'id', 'ASC']],
      limit: 1,
    })
    check(limited.map((u) => [u.name, u.posts.length]), [['ann', 3]], 'limit with a hasMany include')
    // separate: true loads the children with a second query.
    const separate = await User.findAll({ include: [{ model: Post, as: 'posts', separate: true, order: [['id', 'DESC']] }], order: [['id', 'ASC']] })
    check(separate.map((u) => u.posts.map((p) => p.title)), [['p4', 'p2', 'p1'], ['p3'], []], 'separate include')
    const counted = await User.findAll({
      attributes: { include: [[s.literal('(SELECT count(*) FROM eager_posts p WHERE p."userId" = "User"."id")'), 'postCount']] },
      order: [['id', 'ASC']],
      raw: true,
    })
    check(counted.map((u) => [u.name, u.postCount]), [['ann', '3'], ['bob', '1'], ['cy', '0']], 'correlated subquery attribute')
  })
)

testCase('find_and_count_all', () =>
  withDb(async (s) => {
    const { User, Post } = await seedBlog(s, 'fcall')
    const { count, rows } = await Post.findAndCountAll({ where: { published: true }, order: [['id', 'ASC']], limit: 2, offset: 1 })
    check([count, rows.map((p) => p.title)], [3, ['p3', 'p4']], 'plain')
    const withInclude = await User.findAndCountAll({ include: [{ model: Post, as: 'posts' }], distinct: true, order: [['id', 'ASC']], limit: 2 })
    check([withInclude.count, withInclude.rows.map((u) => [u.name, u.posts.length])], [3, [['ann', 3], ['bob', 1]]], 'distinct with include')
    const required = await User.findAndCountAll({ include: [{ model: Post, as: 'posts', where: { published: false } }], distinct: true })
    check([required.count, required.rows.map((u) => u.name)], [1, ['ann']], 'with a where on the include')
    const grouped = await Post.findAndCountAll({ attributes: ['userId'], group: ['userId'], order: [['userId', 'ASC']] })
    check(grouped.count.sort((a, b) => a.userId - b.userId), [{ userId: 1, count: 3 }, { userId: 2, count: 1 }], 'grouped count')
    check(grouped.rows.map((r) => r.userId), [1, 2], 'grouped rows')
  })
)

// ---------------------------------------------------------------------------------------------
// Model features

testCase('paranoid_soft_delete', () =>
  withDb(async (s) => {
    const A = s.define('Account', { name: DataTypes.STRING }, { tableName: 'feat_paranoid', paranoid: true })
    await A.sync()
    await A.bulkCreate([{ name: 'a' }, { name: 'b' }, { name: 'c' }])
    const b = await A.findOne({ where: { name: 'b' } })
    await b.destroy()
    assert(b.deletedAt instanceof Date, `deletedAt ${show(b.deletedAt)}`)
    check((await A.findAll({ order: [['id', 'ASC']] })).map((x) => x.name), ['a', 'c'], 'findAll hides soft-deleted rows')
    check(await A.count(), 2, 'count')
    check(await A.findByPk(b.id), null, 'findByPk of a soft-deleted row')
    check((await A.findAll({ paranoid: false, order: [['id', 'ASC']] })).map((x) => x.name), ['a', 'b', 'c'], 'paranoid: false')
    const [raw] = await s.query('SELECT count(*)::int AS n FROM feat_paranoid WHERE "deletedAt" IS NOT NULL', { type: QueryTypes.SELECT })
    check(raw.n, 1, 'rows with deletedAt')
    await A.destroy({ where: { name: 'c' } })
    check(await A.count(), 1, 'count after a bulk soft delete')
    await A.restore({ where: { name: 'b' } })
    check((await A.findAll({ order: [['id', 'ASC']] })).map((x) => x.name), ['a', 'b'], 'after restore')
    await A.destroy({ where: { name: 'a' }, force: true })
    check(await A.count({ paranoid: false }), 2, 'rows after a forced delete')
  })
)

testCase('hooks', () =>
  withDb(async (s) => {
    const events = []
    const U = s.define('User', { email: DataTypes.STRING, emailLower: DataTypes.STRING, loginCount: { type: DataTypes.INTEGER, defaultValue: 0 } }, {
      tableName: 'feat_hooks',
      hooks: {
        beforeValidate: (u) => { events.push('beforeValidate') },
        beforeCreate: (u) => {
          events.push('beforeCreate')
          u.emailLower = u.email.toLowerCase()
        },
        afterCreate: (u, options) => { events.push(`afterCreate:${u.id}:${options.transaction ? 'tx' : 'no-tx'}`) },
      },
    })
    U.addHook('beforeUpdate', 'bump', (u) => {
      events.push(`beforeUpdate:${u.changed().join(',')}`)
      u.loginCount += 1
    })
    U.addHook('afterDestroy', (u) => { events.push(`afterDestroy:${u.email}`) })
    U.addHook('beforeBulkUpdate', (options) => { events.push(`beforeBulkUpdate:${Object.keys(options.attributes).join(',')}`) })
    await U.sync()
    const u = await s.transaction((transaction) => U.create({ email: 'Mixed@Example.COM' }, { transaction }))
    check(u.emailLower, 'mixed@example.com', 'value set in beforeCreate')
    check((await U.findByPk(u.id)).emailLower, 'mixed@example.com', 'value stored')
    u.email = 'Other@Example.com'
    await u.save()
    check((await U.findByPk(u.id)).loginCount, 1, 'value set in beforeUpdate is saved')
    await U.update({ email: 'bulk@example.com' }, { where: { id: u.id }, individualHooks: true })
    check((await U.findByPk(u.id)).loginCount, 2, 'individualHooks on a bulk update')
    await (await U.findByPk(u.id)).destroy()
    check(events, [
      'beforeValidate', 'beforeCreate', `afterCreate:${u.id}:tx`,
      'beforeValidate', 'beforeUpdate:email',
      'beforeValidate', 'beforeValidate', 'beforeBulkUpdate:email,updatedAt', 'beforeUpdate:email,updatedAt',
      'afterDestroy:bulk@example.com',
    ], 'hook order')
    // A hook that throws stops the INSERT.
    U.addHook('beforeCreate', 'reject', (x) => {
      if (x.email.endsWith('@blocked.test')) throw new Error('blocked domain')
    })
    let err
    await U.create({ email: 'x@blocked.test' }).catch((e) => { err = e })
    check(err && err.message, 'blocked domain', 'error from the hook')
    check(await U.count(), 0, 'rows after the rejected create')
  })
)

// ---------------------------------------------------------------------------------------------
// Transactions

testCase('managed_transaction_commit_and_rollback', () =>
  withDb(async (s) => {
    const A = s.define('Acct', { name: DataTypes.STRING, balance: DataTypes.INTEGER }, { tableName: 'tx_accounts', timestamps: false })
    await A.sync()
    await A.bulkCreate([{ name: 'a', balance: 100 }, { name: 'b', balance: 0 }])
    const transfer = (amount) =>
      s.transaction(async (transaction) => {
        await A.decrement('balance', { by: amount, where: { name: 'a' }, transaction })
        await A.increment('balance', { by: amount, where: { name: 'b' }, transaction })
        const a = await A.findOne({ where: { name: 'a' }, transaction })
        if (a.balance < 0) throw new Error('insufficient funds')
        return a.balance
      })
    check(await transfer(30), 70, 'the callback result')
    let err
    await transfer(500).catch((e) => { err = e })
    check(err && err.message, 'insufficient funds', 'the error thrown')
    check((await A.findAll({ order: [['name', 'ASC']], raw: true })).map((x) => x.balance), [70, 30], 'balances after commit and rollback')
    // An unmanaged transaction.
    const t = await s.transaction()
    await A.create({ name: 'c', balance: 1 }, { transaction: t })
    check(await A.count({ transaction: t }), 3, 'inside')
    check(await A.count(), 2, 'outside, before rollback')
    await t.rollback()
    check(await A.count(), 2, 'after rollback')
    let committed = false
    await s.transaction(async (transaction) => {
      transaction.afterCommit(() => { committed = true })
      await A.create({ name: 'd', balance: 2 }, { transaction })
    })
    check(committed, true, 'afterCommit hook ran')
    // A statement error inside the transaction rolls everything back.
    await expectError(
      s.transaction(async (transaction) => {
        await A.create({ name: 'e', balance: 3 }, { transaction })
        await s.query('SELECT 1/0', { transaction })
      }),
      Sequelize.DatabaseError,
      '22012',
      'division by zero'
    )
    check((await A.findAll({ order: [['name', 'ASC']] })).map((x) => x.name), ['a', 'b', 'd'], 'rows after the failed transaction')
  })
)

testCase('nested_transactions_savepoints', () =>
  withDb(async (s) => {
    const L = s.define('Log', { msg: DataTypes.STRING }, { tableName: 'tx_nested', timestamps: false })
    await L.sync()
    await s.transaction(async (outer) => {
      await L.create({ msg: 'outer-1' }, { transaction: outer })
      await s.transaction({ transaction: outer }, async (inner) => {
        await L.create({ msg: 'inner-kept' }, { transaction: inner })
      })
      await s
        .transaction({ transaction: outer }, async (inner) => {
          await L.create({ msg: 'inner-dropped' }, { transaction: inner })
          throw new Error('inner fails')
        })
        .catch(() => {})
      // A failed statement inside a savepoint: rolled back to it, the outer transaction goes on.
      await s
        .transaction({ transaction: outer }, async (inner) => {
          await L.create({ msg: 'before-error' }, { transaction: inner })
          await s.query('SELECT * FROM tx_nested_missing', { transaction: inner })
        })
        .catch(() => {})
      await s.transaction({ transaction: outer }, async (inner) => {
        await s.transaction({ transaction: inner }, async (innermost) => {
          await L.create({ msg: 'two-deep' }, { transaction: innermost })
        })
      })
      await L.create({ msg: 'outer-2' }, { transaction: outer })
    })
    check((await L.findAll({ order: [['id', 'ASC']] })).map((x) => x.msg), ['outer-1', 'inner-kept', 'two-deep', 'outer-2'], 'rows')
    const savepoints = sqlLog.filter((q) => /SAVEPOINT/.test(q)).length
    assert(savepoints >= 5, `SAVEPOINT statements sent: ${savepoints}`)
    // The outer transaction failing after a released savepoint drops everything.
    await s
      .transaction(async (outer) => {
        await s.transaction({ transaction: outer }, (inner) => L.create({ msg: 'gone' }, { transaction: inner }))
        throw new Error('outer fails')
      })
      .catch(() => {})
    check(await L.count({ where: { msg: 'gone' } }), 0, 'savepoint rows after the outer rollback')
  })
)

testCase('isolation_levels', () =>
  withDb(async (s) => {
    const C = s.define('Counter', { n: DataTypes.INTEGER }, { tableName: 'tx_isolation', timestamps: false })
    await C.sync()
    await C.create({ n: 1 })
    const L = Transaction.ISOLATION_LEVELS
    for (const [level, shown, seesNewRow] of [
      [L.READ_COMMITTED, 'read committed', true],
      [L.REPEATABLE_READ, 'repeatable read', false],
      [L.SERIALIZABLE, 'serializable', false],
    ]) {
      await s.transaction({ isolationLevel: level }, async (transaction) => {
        const [row] = await s.query('SHOW transaction_isolation', { transaction, type: QueryTypes.SELECT })
        check(row.transaction_isolation, shown, `${level}: SHOW transaction_isolation`)
        const before = await C.count({ transaction })
        await C.create({ n: 2 }) // another connection, committed at once
        const after = await C.count({ transaction })
        check(after - before, seesNewRow ? 1 : 0, `${level}: a row committed meanwhile is seen`)
      })
    }
    check(await C.count(), 4, 'rows')
    // Sequelize's default isolation level can be set per instance.
    await withDb(async (s2) => {
      await s2.transaction(async (transaction) => {
        const [row] = await s2.query('SHOW transaction_isolation', { transaction, type: QueryTypes.SELECT })
        check(row.transaction_isolation, 'repeatable read', 'isolationLevel option of the instance')
      })
    }, { isolationLevel: L.REPEATABLE_READ })
    // A read-only transaction refuses writes.
    await expectError(
      s.transaction(async (transaction) => {
        await s.query('SET TRANSACTION READ ONLY', { transaction })
        await C.create({ n: 9 }, { transaction })
      }),
      Sequelize.DatabaseError,
      '25006',
      'write in a read-only transaction'
    )
  })
)

testCase('serialization_failures', () =>
  withDb(async (s) => {
    const D = s.define('Doctor', { name: DataTypes.STRING, onCall: DataTypes.BOOLEAN }, { tableName: 'tx_doctors', timestamps: false })
    await D.sync()
    await D.bulkCreate([{ name: 'alice', onCall: true }, { name: 'bob', onCall: true }])
    const L = Transaction.ISOLATION_LEVELS
    // REPEATABLE READ: updating a row another transaction changed and committed fails.
    const t1 = await s.transaction({ isolationLevel: L.REPEATABLE_READ })
    const t2 = await s.transaction({ isolationLevel: L.REPEATABLE_READ })
    try {
      await D.findAll({ transaction: t2 })
      await D.update({ onCall: false }, { where: { name: 'alice' }, transaction: t1 })
      await t1.commit()
      await expectError(D.update({ name: 'alice2' }, { where: { name: 'alice' }, transaction: t2 }), Sequelize.DatabaseError, '40001', 'concurrent update')
    } finally {
      if (!t2.finished) await t2.rollback().catch(() => {})
    }
    await D.update({ onCall: true }, { where: {} })
    // SERIALIZABLE: write skew, each takes a doctor off call after seeing two on call.
    const a = await s.transaction({ isolationLevel: L.SERIALIZABLE })
    const b = await s.transaction({ isolationLevel: L.SERIALIZABLE })
    let failure
    try {
      check(await D.count({ where: { onCall: true }, transaction: a }), 2, 'a sees')
      check(await D.count({ where: { onCall: true }, transaction: b }), 2, 'b sees')
      await D.update({ onCall: false }, { where: { name: 'alice' }, transaction: a })
      await D.update({ onCall: false }, { where: { name: 'bob' }, transaction: b })
      await a.commit()
      await b.commit().catch((e) => { failure = e })
    } finally {
      for (const t of [a, b]) if (!t.finished) await t.rollback().catch(() => {})
    }
    assert(failure instanceof Sequelize.DatabaseError && failure.parent.code === '40001', `second commit: ${failure ? `${failure.parent && failure.parent.code} ${failure.message}` : 'succeeded'}`)
    check(await D.count({ where: { onCall: true } }), 1, 'doctors on call')
  })
)

testCase('lock_for_update_and_skip_locked', () =>
  withDb(async (s) => {
    const J = s.define('Job', { name: DataTypes.STRING, state: DataTypes.STRING, attempts: DataTypes.INTEGER }, { tableName: 'tx_jobs', timestamps: false })
    await J.sync()
    await J.bulkCreate([{ name: 'j1', state: 'queued', attempts: 0 }, { name: 'j2', state: 'queued', attempts: 0 }, { name: 'j3', state: 'queued', attempts: 0 }])
    const t1 = await s.transaction()
    const t2 = await s.transaction()
    try {
      const row = await J.findByPk(1, { lock: t1.LOCK.UPDATE, transaction: t1 })
      check(row.attempts, 0, 'locked row')
      const waiting = J.findByPk(1, { lock: t2.LOCK.UPDATE, transaction: t2 })
      check(await stateAfter(waiting, 500), 'pending', 'second FOR UPDATE while the first holds the lock')
      // SKIP LOCKED: a worker takes the next free job.
      const t3 = await s.transaction()
      try {
        const free = await J.findAll({ where: { state: 'queued' }, order: [['id', 'ASC']], limit: 1, lock: true, skipLocked: true, transaction: t3 })
        check(free.map((x) => x.name), ['j2'], 'FOR UPDATE SKIP LOCKED')
        const nowait = J.findByPk(1, { lock: true, transaction: t3, skipLocked: false })
        check(await stateAfter(nowait, 300), 'pending', 'third waits too')
        await row.update({ attempts: 1, state: 'running' }, { transaction: t1 })
        await t1.commit()
        const got = await Promise.race([waiting, sleep(5000).then(() => null)])
        check(got && [got.attempts, got.state], [1, 'running'], 'after the first commits, the waiter reads the new row')
        await t2.commit()
        const third = await Promise.race([nowait, sleep(5000).then(() => null)])
        check(third && third.attempts, 1, 'third')
      } finally {
        if (!t3.finished) await t3.rollback().catch(() => {})
      }
    } finally {
      for (const t of [t1, t2]) if (!t.finished) await t.rollback().catch(() => {})
    }
    // FOR SHARE lets readers in together.
    const r1 = await s.transaction()
    const r2 = await s.transaction()
    try {
      await J.findByPk(2, { lock: r1.LOCK.SHARE, transaction: r1 })
      check(await stateAfter(J.findByPk(2, { lock: r2.LOCK.SHARE, transaction: r2 }), 1000), 'resolved', 'two FOR SHARE locks')
    } finally {
      await r1.rollback().catch(() => {})
      await r2.rollback().catch(() => {})
    }
  })
)

// ---------------------------------------------------------------------------------------------
// Errors

testCase('unique_constraint_error_fields', () =>
  withDb(async (s) => {
    const U = s.define('Member', {
      email: { type: DataTypes.STRING, unique: true },
      tenant: { type: DataTypes.STRING, unique: 'tenant_slug' },
      slug: { type: DataTypes.STRING, unique: 'tenant_slug' },
    }, { tableName: 'err_members', timestamps: false })
    await U.sync()
    await U.create({ email: 'a@example.com', tenant: 't1', slug: 'home' })
    const e = await expectError(U.create({ email: 'a@example.com', tenant: 't2', slug: 'x' }), Sequelize.UniqueConstraintError, '23505', 'duplicate email')
    check(e.fields, { email: 'a@example.com' }, 'fields')
    check(e.errors.map((x) => [x.message, x.type, x.path, x.value]), [['email must be unique', 'unique violation', 'email', 'a@example.com']], 'errors')
    check([e.parent.constraint, e.parent.table, e.parent.detail], ['err_members_email_key', 'err_members', 'Key (email)=(a@example.com) already exists.'], 'the PostgreSQL error')
    const c = await expectError(U.create({ email: 'b@example.com', tenant: 't1', slug: 'home' }), Sequelize.UniqueConstraintError, '23505', 'duplicate composite key')
    check(c.fields, { tenant: 't1', slug: 'home' }, 'composite fields')
    check(c.parent.constraint, 'err_members_tenant_slug_key', 'composite constraint name')
    // The error aborts a surrounding transaction.
    const t = await s.transaction()
    try {
      await expectError(U.create({ email: 'a@example.com' }, { transaction: t }), Sequelize.UniqueConstraintError, '23505', 'inside a transaction')
      await expectError(U.count({ transaction: t }), Sequelize.DatabaseError, '25P02', 'the next statement')
    } finally {
      await t.rollback()
    }
    check(await U.count(), 1, 'rows')
  })
)

testCase('foreign_key_constraint_error', () =>
  withDb(async (s) => {
    const Owner = s.define('Owner', { name: DataTypes.STRING }, { tableName: 'err_owners', timestamps: false })
    const Pet = s.define('Pet', { name: DataTypes.STRING }, { tableName: 'err_pets', timestamps: false })
    Pet.belongsTo(Owner, { foreignKey: { name: 'ownerId', allowNull: false }, onDelete: 'RESTRICT' })
    Owner.hasMany(Pet, { foreignKey: { name: 'ownerId', allowNull: false }, onDelete: 'RESTRICT' })
    await s.sync()
    const o = await Owner.create({ name: 'kim' })
    await Pet.create({ name: 'rex', ownerId: o.id })
    const e = await expectError(Pet.create({ name: 'ghost', ownerId: 999 }), Sequelize.ForeignKeyConstraintError, '23503', 'a missing owner')
    check([e.index, e.table, e.fields], ['err_pets_ownerId_fkey', 'err_pets', null], 'index, table, fields')
    check(e.parent.detail, 'Key (ownerId)=(999) is not present in table "err_owners".', 'detail')
    const d = await expectError(o.destroy(), Sequelize.ForeignKeyConstraintError, '23503', 'deleting an owner with pets (RESTRICT)')
    // Sequelize takes the first `on table "..."` of the message: the referenced table here.
    check([d.index, d.table], ['err_pets_ownerId_fkey', 'err_owners'], 'index, table on delete')
    check(d.parent.message, 'update or delete on table "err_owners" violates foreign key constraint "err_pets_ownerId_fkey" on table "err_pets"', 'message on delete')
    check(d.parent.detail, 'Key (id)=(1) is still referenced from table "err_pets".', 'detail on delete')
    await expectError(Pet.create({ name: 'nobody' }, { validate: false }), Sequelize.DatabaseError, '23502', 'NOT NULL ownerId')
    check(await Pet.count(), 1, 'pets')
  })
)

// ---------------------------------------------------------------------------------------------
// Raw queries

testCase('raw_queries_replacements_and_bind', () =>
  withDb(async (s) => {
    await s.query('CREATE TABLE raw_items (id serial PRIMARY KEY, name text NOT NULL, qty int)')
    // Replacements are escaped into the SQL text by Sequelize.
    const named = await s.query('SELECT :n::int + 1 AS x, :s AS s, :b AS b', { replacements: { n: 41, s: "it's \\ a \"test\"", b: true }, type: QueryTypes.SELECT })
    check(named, [{ x: 42, s: "it's \\ a \"test\"", b: true }], 'named replacements')
    const positional = await s.query('SELECT ? AS a, ?::int * 2 AS b', { replacements: ['x', 21], type: QueryTypes.SELECT })
    check(positional, [{ a: 'x', b: 42 }], 'positional replacements')
    // Bind parameters go to the server as $1, $2 (extended protocol).
    const [ins, insCount] = await s.query('INSERT INTO raw_items (name, qty) VALUES ($1, $2), ($3, $4) RETURNING id, name', { bind: ['a', 1, 'b', 2], type: QueryTypes.INSERT })
    check([ins, insCount], [[{ id: 1, name: 'a' }, { id: 2, name: 'b' }], 2], 'INSERT RETURNING with bind')
    const bound = await s.query('SELECT name, qty FROM raw_items WHERE qty > $min AND name <> $skip ORDER BY id', { bind: { min: 0, skip: 'zzz' }, type: QueryTypes.SELECT })
    check(bound, [{ name: 'a', qty: 1 }, { name: 'b', qty: 2 }], 'named bind')
    const list = await s.query('SELECT name FROM raw_items WHERE id IN (:ids) ORDER BY id', { replacements: { ids: [1, 2, 3] }, type: QueryTypes.SELECT })
    check(list.map((r) => r.name), ['a', 'b'], 'IN (:ids) with an array')
    const [, upd] = await s.query('UPDATE raw_items SET qty = qty + 10 WHERE id = $1', { bind: [1], type: QueryTypes.UPDATE })
    check(upd, 1, 'UPDATE affected rows')
    const [rows, result] = await s.query("SELECT name, qty FROM raw_items WHERE name = 'a'")
    check([rows, result.rowCount, result.command], [[{ name: 'a', qty: 11 }], 1, 'SELECT'], 'no type: [rows, result]')
    // Bind and replacement markers inside string literals are left alone.
    const lit = await s.query("SELECT '$1 and :x' AS t, $1::text AS v", { bind: ['bound'], type: QueryTypes.SELECT })
    check(lit, [{ t: '$1 and :x', v: 'bound' }], 'markers inside literals')
    // A model for raw results.
    const Item = s.define('RawItem', { name: DataTypes.STRING, qty: DataTypes.INTEGER }, { tableName: 'raw_items', timestamps: false })
    const items = await s.query('SELECT * FROM raw_items ORDER BY id', { model: Item, mapToModel: true })
    assert(items.every((x) => x instanceof Item), 'instances of the model')
    check(plain(items), [{ id: 1, name: 'a', qty: 11 }, { id: 2, name: 'b', qty: 2 }], 'mapToModel')
    await expectError(s.query('SELECT * FROM raw_missing'), Sequelize.DatabaseError, '42P01', 'missing table')
  })
)

testCase('truncate_and_drop', () =>
  withDb(async (s, qi) => {
    const P = s.define('Parent', { name: DataTypes.STRING }, { tableName: 'ddl_parents', timestamps: false })
    const C = s.define('Child', { name: DataTypes.STRING }, { tableName: 'ddl_children', timestamps: false })
    C.belongsTo(P, { foreignKey: 'parentId' })
    await s.sync()
    await P.bulkCreate([{ name: 'a' }, { name: 'b' }])
    await C.create({ name: 'c', parentId: 1 })
    await P.truncate({ cascade: true, restartIdentity: true })
    check([await P.count(), await C.count()], [0, 0], 'after TRUNCATE ... CASCADE')
    check((await P.create({ name: 'again' })).id, 1, 'id after RESTART IDENTITY')
    await expectError(P.drop(), Sequelize.DatabaseError, '2BP01', 'dropping a referenced table')
    await C.drop()
    await P.drop()
    check([await qi.tableExists('ddl_parents'), await qi.tableExists('ddl_children')], [false, false], 'tables after drop')
    // sync({force: true}) drops and recreates.
    const F = s.define('Forced', { name: DataTypes.STRING }, { tableName: 'ddl_forced', timestamps: false })
    await F.sync()
    await F.create({ name: 'x' })
    await F.sync({ force: true })
    check(await F.count(), 0, 'rows after sync({force: true})')
  })
)

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
  const only = new Set(args.filter((a) => !a.startsWith('-')))
  for (const { name, fn } of CASES) {
    if (only.size && !only.has(name)) continue
    sqlLog = []
    if (VERBOSE) console.error(`--- ${name}`)
    try {
      await withTimeout(Promise.resolve().then(fn), CASE_TIMEOUT_MS)
      console.log(`ok ${name}`)
    } catch (e) {
      const kind = e instanceof CheckError ? 'AssertionError' : (e && e.constructor && e.constructor.name) || 'Error'
      const pgCode = e && (e.parent ? e.parent.code : e.code)
      const code = pgCode ? ` [${pgCode}]` : ''
      const message = String((e && e.message) || e)
        .split(/\s+/)
        .join(' ')
      console.log(`not ok ${name}: ${kind}${code}: ${message.slice(0, 400)}`)
      if (VERBOSE) {
        console.error(e)
        console.error(`    failing SQL: ${(e && e.sql) || sqlLog[sqlLog.length - 1]}`)
      }
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
