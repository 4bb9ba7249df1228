"""Random SQL for the differential fuzzer: the fixed schema and one generator per area.

The generator builds sqlast trees. It only emits statements whose result PostgreSQL defines
exactly, so that any difference is Shoal's: LIMIT, OFFSET and DISTINCT ON only after an ORDER BY
over every output column; order-sensitive window functions (row_number, lag, ROWS frames...)
only over an ORDER BY that ends in a row key; string_agg ordered by its own argument; float
sums only over column values that add up exactly in any order; GROUP BY and ORDER BY never on a
bare integer literal (that would mean an output position).
"""

import random
from dataclasses import dataclass, replace

from sqlast import (FAMILY_TYPES, INT_TYPES, NUMBER_FAMILIES, ORDERED_FAMILIES, Cte, Derived,
                    Expr, Item, Join, Leaf, Order, Script, Select, SetOp, TableRef, Values,
                    deterministic, family, is_column, number_result)

# ---------------------------------------------------------------------------------------------
# Schema

# (name, [(column, type)], primary key column or None, rows as SQL literal tuples). t3 has no
# key and two identical rows; t4 has no key but no two rows alike.
TABLES = [
    ("t1", [("id", "int4"), ("a", "int4"), ("b", "int8"), ("c", "int2"), ("n", "numeric(10,2)"),
            ("f", "float8"), ("s", "text"), ("v", "varchar(12)"), ("p", "bool"), ("d", "date"),
            ("ts", "timestamp")], "id", [
        "(1, 10, 100, 1, 1.50, 1.5, 'apple', 'red', true, '2024-01-15', '2024-01-15 08:30:00')",
        "(2, -5, -100, -1, -2.25, -0.25, 'Banana', 'yellow', false, '2023-12-31', "
        "'2023-12-31 23:59:59')",
        "(3, 0, 0, 0, 0.00, 0, '', 'green', NULL, '2000-02-29', '2000-02-29 12:00:00')",
        "(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        "(5, 10, 9223372036854775807, 32767, 99999999.99, 1000000, 'apple', 'RED', true, "
        "'1999-01-01', '1999-01-01 00:00:00.5')",
        "(6, 2147483647, -9223372036854775808, -32768, -99999999.99, -1000000, 'cherry pie', "
        "'red', false, '2038-01-19', '2038-01-19 03:14:07')",
        "(7, -2147483648, 42, 7, 0.01, 'Infinity', ' spaced ', '', true, '1970-01-01', "
        "'1970-01-01 00:00:00')",
        "(8, 3, 3, 3, 3.00, 3, 'a%b_c', 'blue', false, '2024-02-29', '2024-02-29 23:59:59.999')",
        "(9, 3, 7, 2, 12.34, 0.125, 'APPLE', 'green', true, '2024-03-01', '2024-03-01 00:00:00')",
        "(10, 7, NULL, 5, -0.50, 'NaN', 'date', 'x', NULL, '2020-06-15', NULL)",
        "(11, -1, 1, -7, 5.55, 2.5, 'élan', 'red', true, NULL, '2020-06-15 10:20:30')",
        "(12, 10, 100, 1, 1.50, 1.5, 'apple', 'red', true, '2024-01-15', '2024-01-15 08:30:00')",
        "(13, 2, 2, 2, 2.50, 2.75, 'Kiwi', 'green', false, '2024-01-16', '2024-01-16 00:00:01')",
        "(14, NULL, 5, 3, 7.25, NULL, 'banana', NULL, true, '2024-01-15', '2024-01-15 08:30:00')",
    ]),
    ("t2", [("id", "int8"), ("a", "int4"), ("k", "int4"), ("m", "numeric(12,4)"), ("s", "text"),
            ("d", "date"), ("iv", "interval")], "id", [
        "(1, 1, 1, 10.5000, 'apple', '2024-01-15', '1 day')",
        "(2, 1, 2, -3.1416, 'Banana', '2024-01-16', '2 hours 30 minutes')",
        "(3, 2, 2, 0.0000, 'kiwi', '2023-12-31', '-3 days')",
        "(4, 3, NULL, 100.0001, NULL, NULL, '1 mon 2 days')",
        "(5, 5, 3, NULL, 'apple', '2000-02-29', NULL)",
        "(6, 99, 0, 1.2345, 'fig', '2024-02-29', '00:00:01.5')",
        "(7, NULL, 1, -0.0001, 'date', '1999-01-01', '1 year')",
        "(8, 9, 4, 12.3400, 'APPLE', '2024-03-01', '-1 mon')",
        "(9, 9, 4, 12.3400, 'APPLE', '2024-03-01', '-1 mon')",
        "(10, 11, 0, 5.5500, 'élan', '2020-06-15', '36 hours')",
        "(11, 13, NULL, 2.5000, '', '2024-01-16', '0 seconds')",
        "(12, 6, 3, 99999999.9999, 'cherry pie', '2038-01-19', '1 day 01:00:00')",
    ]),
    ("t3", [("k", "int4"), ("a", "int4"), ("w", "varchar(8)"), ("x", "numeric(6,1)"), ("q", "bool"),
            ("g", "float8")], None, [
        "(1, 10, 'apple', 1.5, true, 0.5)",
        "(1, 10, 'apple', 1.5, true, 0.5)",
        "(2, 3, 'kiwi', -2.0, false, -1.25)",
        "(2, NULL, 'Banana', NULL, NULL, 4)",
        "(3, 3, NULL, 0.0, true, 0)",
        "(NULL, 7, 'fig', 99.9, false, 1024.75)",
        "(NULL, NULL, NULL, NULL, NULL, NULL)",
        "(4, -5, 'x', -0.5, true, -8)",
        "(0, 0, '', 10.0, false, 2.5)",
        "(3, 2, 'date', 3.3, NULL, 16)",
    ]),
    ("t4", [("k", "int2"), ("s", "text")], None, [
        "(1, 'apple')", "(2, NULL)", "(NULL, 'x')", "(2, 'Banana')", "(NULL, NULL)", "(0, '')",
    ]),
]

# The table that transaction scripts write to; every script first puts it back into this state,
# so a script's outcome does not depend on the scripts before it. TRUNCATE, not DELETE: the
# latter's row count would depend on what earlier scripts left (after a Shoal restart the two
# servers' copies of tw differ until the next reset).
TW_COLUMNS = [("id", "int4"), ("v", "int4"), ("s", "text"), ("n", "numeric(8,2)")]
TW_DDL = ("CREATE TABLE tw (id int4 PRIMARY KEY, v int4 NOT NULL CHECK (v >= 0), s text, "
          "n numeric(8,2))")
TW_RESET = ("TRUNCATE tw",
            "INSERT INTO tw VALUES (1, 10, 'a', 1.50), (2, 20, NULL, NULL), (3, 0, 'c', -2.25)")


def schema_statements():
    """The statements that create and fill every table, in order. One INSERT per row: Shoal
    gives a multi-row VALUES list one common type per column before converting to the column's
    type, so 1.5 and 'Infinity' in one float8 column fail there (PostgreSQL converts each value
    to the column's type); the fuzzer reports that separately."""
    stmts = []
    for name, cols, pk, rows in TABLES:
        coldefs = ", ".join(f"{c} {t}{' PRIMARY KEY' if c == pk else ''}" for c, t in cols)
        stmts.append(f"CREATE TABLE {name} ({coldefs})")
        stmts += [f"INSERT INTO {name} VALUES {row}" for row in rows]
    stmts.append(TW_DDL)
    stmts.extend(TW_RESET)
    return stmts


TABLE_NAMES = [t[0] for t in TABLES] + ["tw"]


def row_key(table, alias):
    """Columns that tell every row of the table apart, or None (t3 has two identical rows).
    Ordering by them makes the order total, which order-sensitive window functions need: two
    such functions could otherwise pair up the values of identical rows differently."""
    name, cols, pk, _ = next(t for t in TABLES if t[0] == table)
    if pk:
        return [f"{alias}.{pk}"]
    return None if table == "t3" else [f"{alias}.{c}" for c, _ in cols]


# ---------------------------------------------------------------------------------------------
# Literals

LITERALS = {
    "int": ["0", "1", "-1", "2", "3", "7", "10", "100", "-5", "2147483647", "(-2147483648)",
            "9223372036854775807", "CAST(3 AS int2)", "CAST(40000 AS int8)"],
    "numeric": ["0.5", "1.25", "-3.75", "100.00", "0.001", "12345.6789", "2.5", "-0.5", "1e3",
                "99999999.99"],
    "float8": ["CAST(1.5 AS float8)", "CAST(-0.25 AS float8)", "CAST(0 AS float8)",
               "CAST('1e10' AS float8)", "CAST('Infinity' AS float8)", "CAST('NaN' AS float8)",
               "CAST(2.5 AS float8)", "CAST(0.1 AS float8)", "CAST(1e-7 AS float8)"],
    "text": ["'a'", "'apple'", "''", "' x '", "'Hello World'", "'APPLE'", "'b%'", "'kiwi'",
             "'42'", "'-7'", "'élan'"],
    "bool": ["TRUE", "FALSE"],
    "date": ["DATE '2024-02-29'", "DATE '2000-01-01'", "DATE '1999-12-31'", "DATE '2024-01-15'"],
    "timestamp": ["TIMESTAMP '2024-01-15 08:30:00'", "TIMESTAMP '2000-01-01 00:00:00'",
                  "TIMESTAMP '2024-02-29 12:00:00.25'"],
    "interval": ["INTERVAL '1 day'", "INTERVAL '2 hours 30 minutes'", "INTERVAL '1 mon'",
                 "INTERVAL '-3 days'", "INTERVAL '1 year 2 mons'"],
    # Text that casts to other types, mostly successfully.
    "numtext": ["'42'", "' 7 '", "'-0'", "'3.5'", "'1e3'", "'abc'", "''", "'+12'", "'0x1F'",
                "'  -2147483648'", "'NaN'", "'-Infinity'"],
    "datetext": ["'2024-02-29'", "'2023-02-29'", "'20240115'", "'Jan 5, 2024'", "'2024-1-5'",
                 "'epoch'", "'1999-12-31 23:59'", "'infinity'"],
    "booltext": ["'t'", "'yes'", "'off'", "'0'", "' true '", "'maybe'", "'ON'"],
    "ivtext": ["'1 day 2 hours'", "'P1Y2M'", "'-1 week'", "'90 minutes'", "'1.5 days'",
               "'3 mons -2 days'"],
}
LITERAL_TYPES = dict(FAMILY_TYPES, numtext="text", datetext="text", booltext="text",
                     ivtext="text")
SMALL_INTS = ["0", "1", "2", "3", "-1", "5"]
LIKE_PATTERNS = ["'a%'", "'%a%'", "'_pple'", "'%'", "''", "'A%'", "'%e'", "'%\\%%'", "'b_n%'",
                 "'%i_'"]


def is_literal(node):
    """A bare literal: in GROUP BY or ORDER BY an integer one would mean an output position."""
    return isinstance(node, Leaf) and not is_column(node)


def is_nonzero_literal(node):
    try:
        return isinstance(node, Leaf) and float(node.text.strip("()")) != 0
    except ValueError:
        return False


def typed(node):
    """A string literal has type unknown, which polymorphic functions (lag, first_value) and
    DISTINCT aggregates cannot resolve; give it type text."""
    if isinstance(node, Leaf) and node.text.startswith("'"):
        return Expr("CAST({0} AS text)", (node,), "text")
    return node


# ---------------------------------------------------------------------------------------------
# Scopes

@dataclass
class Scope:
    """What an expression may refer to. `grouped`: only group keys, aggregates and literals."""
    cols: list
    row_key: list = None          # SQL of columns that order the FROM rows totally, or None
    grouped: bool = False
    keys: list = None             # group-by expressions, when grouped
    raw: "Scope" = None           # the ungrouped scope aggregates read
    allow_agg: bool = False
    allow_window: bool = False
    allow_subquery: bool = True

    def of_family(self, fam):
        return [c for c in self.cols if family(c.type) == fam]

    def plain(self):
        """The scope for arguments of aggregates and windows: no aggregates, windows inside."""
        base = self.raw if self.grouped else self
        return Scope(base.cols, base.row_key, allow_subquery=False)


NO_COLUMNS = Scope([], allow_subquery=False)

# ---------------------------------------------------------------------------------------------
# Generator

AREAS = ["scalar", "string", "math", "datetime", "cast", "where", "join", "aggregate", "window",
         "setop", "subquery", "cte", "order", "distinct", "values", "txn"]

# The type families of select items in areas about certain types (default: any).
AREA_FAMILIES = {
    "string": ["text", "text", "text", "int", "bool"],
    "math": ["int", "numeric", "float8"],
    "datetime": ["date", "timestamp", "interval", "numeric", "float8", "text"],
}

# How much each area multiplies the weight of each expression flavour (default 1).
AREA_FLAVOURS = {
    "scalar": {"arith": 3, "logic": 3, "case": 3},
    "string": {"string": 8},
    "math": {"math": 8, "arith": 3},
    "datetime": {"datetime": 8},
    "cast": {"cast": 8},
    "where": {"logic": 3},
    "subquery": {"subquery": 8},
}


class Generator:
    """Builds random statements; the same seed gives the same sequence of statements."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.alias_no = 0
        self.flavours = {}
        self.families = ORDERED_FAMILIES

    def chance(self, p):
        return self.rng.random() < p

    def pick(self, seq):
        return self.rng.choice(seq)

    def alias(self, prefix="j"):
        self.alias_no += 1
        return f"{prefix}{self.alias_no}"

    def literal(self, fam):
        typ = LITERAL_TYPES[fam]
        if fam in ORDERED_FAMILIES and self.chance(0.08):
            return Leaf(f"CAST(NULL AS {typ})", typ)
        return Leaf(self.pick(LITERALS[fam]), typ)

    def item_family(self):
        """The type family of a select item: any, or one the area is about."""
        return self.pick(self.families)

    def direction(self):
        return self.chance(0.4), self.pick(["", "", "FIRST", "LAST"])

    # -- statements -------------------------------------------------------------------------------

    def case(self, area):
        """One statement (or transaction script) exercising `area`."""
        self.alias_no = 0
        self.flavours = AREA_FLAVOURS.get(area, {})
        self.families = AREA_FAMILIES.get(area, ORDERED_FAMILIES)
        builder = {
            "join": self.join_query, "aggregate": self.aggregate_query,
            "window": self.window_query, "setop": self.setop_query, "cte": self.cte_query,
            "order": self.order_query, "distinct": self.distinct_query,
            "values": self.values_query, "txn": self.txn_script, "where": self.where_query,
        }.get(area, self.scalar_query)
        while True:
            node = builder()
            if deterministic(node):
                return node

    def scalar_query(self):
        """Expressions over zero or one table; the expression flavour comes from the area."""
        frm, scope = (None, Scope([])) if self.chance(0.15) else self.from_clause(1)
        items = self.items(scope, self.rng.randint(1, 4))
        where = self.expr("bool", scope, 2) if frm is not None and self.chance(0.4) else None
        return Select(tuple(items), frm, where)

    def where_query(self):
        frm, scope = self.from_clause(self.rng.randint(1, 2))
        where = self.expr("bool", scope, 3)
        for _ in range(self.rng.randint(0, 2)):
            op = self.pick(["AND", "OR"])
            where = Expr("({0} " + op + " {1})", (where, self.expr("bool", scope, 3)), "bool")
        return Select(tuple(self.items(scope, self.rng.randint(1, 3), simple=True)), frm, where)

    def join_query(self):
        frm, scope = self.from_clause(self.rng.randint(2, 3), join_heavy=True)
        if self.chance(0.15):
            items = (Item(Leaf("*", "")),)
        else:
            items = tuple(self.items(scope, self.rng.randint(1, 4)))
        where = self.expr("bool", scope, 2) if self.chance(0.3) else None
        return Select(items, frm, where)

    def aggregate_query(self):
        """GROUP BY 0-2 keys (columns or expressions over one), aggregates (some with FILTER)
        over the ungrouped rows, maybe WHERE and HAVING."""
        frm, raw = self.from_clause(self.rng.randint(1, 2))
        keys = [self.group_key(raw) for _ in range(self.pick([0, 1, 1, 2]))]
        scope = Scope(raw.cols, grouped=True, keys=keys, raw=raw, allow_agg=True,
                      allow_subquery=False)
        items = [Item(k) for k in keys if self.chance(0.8)]
        items += self.items(scope, self.rng.randint(1, 3))
        where = self.expr("bool", raw, 2) if self.chance(0.3) else None
        having = self.expr("bool", scope, 2) if keys and self.chance(0.4) else None
        return Select(tuple(items), frm, where, tuple(keys), having)

    def group_key(self, scope):
        """A column, or an expression over one (never a bare literal: that is a position)."""
        col = self.pick(scope.cols)
        if self.chance(0.6):
            return col
        key = self.expr(family(col.type), scope, 1)
        return col if is_literal(key) else key

    def window_query(self):
        """1-3 window function calls next to plain columns, over one table or a join."""
        frm, scope = self.from_clause(self.rng.randint(1, 2))
        wscope = Scope(scope.cols, scope.row_key, allow_window=True)
        items = [Item(self.window(self.pick(ORDERED_FAMILIES), wscope))
                 for _ in range(self.rng.randint(1, 3))]
        items += self.items(scope, self.rng.randint(0, 2), simple=True)
        self.rng.shuffle(items)
        where = self.expr("bool", scope, 1) if self.chance(0.3) else None
        return Select(tuple(items), frm, where)

    def setop_query(self):
        node = self.setop_over(self.plain_select(self.rng.randint(1, 3)))
        if self.chance(0.3):
            node = self.setop_over(node)
        return self.total_order(node, limit_chance=0.4) if self.chance(0.5) else node

    def setop_over(self, left):
        op = self.pick(["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"])
        right = self.plain_select(left.ncols(), [family(t) for t in left.types()])
        if self.chance(0.3):
            left, right = right, left
        return SetOp(op, left, right)

    def plain_select(self, ncols, fams=None):
        """A one-table SELECT with `ncols` items of the given families; DISTINCT sometimes."""
        frm, scope = self.from_clause(1, derived=False)
        fams = fams or [self.pick(ORDERED_FAMILIES) for _ in range(ncols)]
        items = tuple(Item(self.expr(f, scope, self.rng.randint(0, 1))) for f in fams)
        where = self.expr("bool", scope, 1) if self.chance(0.5) else None
        return Select(items, frm, where, distinct=self.chance(0.15))

    def cte_query(self):
        """WITH w AS (...) referenced once or joined to itself, or a recursive CTE."""
        if self.chance(0.25):
            return self.recursive_cte()
        inner = self.plain_select(self.rng.randint(1, 3))
        cols = tuple(f"c{i + 1}" for i in range(inner.ncols()))
        cte = Cte("w", cols, inner)
        a1, a2 = self.alias(), self.alias()
        refs1 = [Leaf(f"{a1}.{c}", t) for c, t in zip(cols, inner.types())]
        refs2 = [Leaf(f"{a2}.{c}", t) for c, t in zip(cols, inner.types())]
        if self.chance(0.6):    # referenced twice, joined to itself
            col = self.rng.randrange(len(cols))
            cond = Expr("({0} = {1})", (refs1[col], refs2[col]), "bool")
            kind = self.pick(["INNER", "LEFT", "FULL"])
            frm, scope = Join(kind, TableRef("w", a1), TableRef("w", a2), cond), Scope(refs1 + refs2)
        else:
            frm, scope = TableRef("w", a1), Scope(refs1)
        items = self.items(scope, self.rng.randint(1, 3))
        where = self.expr("bool", scope, 1) if self.chance(0.3) else None
        return Select(tuple(items), frm, where, ctes=(cte,))

    def recursive_cte(self):
        """A counter, or a walk along t2.a -> t2.id links, with a bounded depth."""
        a = self.alias()
        if self.chance(0.5):
            step = self.pick(["n + 1", "n * 2", "n + 3"])
            body = Leaf(f"SELECT 1, CAST('x' AS text) UNION ALL SELECT {step}, s || 'y' FROM r "
                        f"WHERE n < {self.rng.randint(2, 12)}", "stmt")
            cte = Cte("r", ("n", "s"), body)
            cols = [Leaf(f"{a}.n", "int4"), Leaf(f"{a}.s", "text")]
        else:
            body = Leaf(f"SELECT id, a, 1 FROM t2 WHERE id = {self.rng.randint(1, 12)} UNION ALL "
                        f"SELECT t2.id, t2.a, r.depth + 1 FROM t2 JOIN r ON t2.id = r.a "
                        f"WHERE r.depth < 6", "stmt")
            cte = Cte("r", ("id", "a", "depth"), body)
            cols = [Leaf(f"{a}.id", "int8"), Leaf(f"{a}.a", "int4"), Leaf(f"{a}.depth", "int4")]
        items = self.items(Scope(cols), self.rng.randint(1, 3))
        return Select(tuple(items), TableRef("r", a), ctes=(cte,), recursive=True)

    def order_query(self):
        base = self.scalar_query() if self.chance(0.5) else self.join_query()
        if base.items[0].expr.sql() == "*":
            base = self.scalar_query()
        return self.total_order(base, limit_chance=0.7)

    def distinct_query(self):
        """SELECT DISTINCT, or DISTINCT ON the leading output columns with a total ORDER BY."""
        frm, scope = self.from_clause(self.rng.randint(1, 2))
        items = tuple(self.items(scope, self.rng.randint(1, 3), simple=True))
        where = self.expr("bool", scope, 1) if self.chance(0.3) else None
        query = Select(items, frm, where)
        if self.chance(0.5):
            return replace(query, distinct=True)
        on = tuple(range(1, self.rng.randint(1, len(items)) + 1))
        query = self.total_order(query, limit_chance=0.2)
        # DISTINCT ON needs its keys leftmost in ORDER BY (sorted() is stable).
        keys = sorted(query.order_by, key=lambda o: o.key not in on)
        return replace(query, distinct_on=on, order_by=tuple(keys))

    def values_query(self):
        """A VALUES list alone (maybe ordered), or in FROM, maybe joined to a table."""
        ncols = self.rng.randint(1, 3)
        fams = [self.pick(ORDERED_FAMILIES) for _ in range(ncols)]
        rows = tuple(tuple(self.expr(f, NO_COLUMNS, self.pick([0, 0, 1])) for f in fams)
                     for _ in range(self.rng.randint(1, 5)))
        values = Values(rows)
        if self.chance(0.4):
            return self.total_order(values, limit_chance=0.4) if self.chance(0.6) else values
        alias = self.alias("v")
        cols = tuple(f"c{i + 1}" for i in range(ncols))
        refs = [Leaf(f"{alias}.{c}", v.type) for c, v in zip(cols, rows[0])]
        frm, scope = Derived(values, alias, cols), Scope(refs)
        if self.chance(0.4):
            table, tscope = self.from_clause(1, derived=False)
            kind = self.pick(["INNER", "LEFT", "RIGHT", "FULL"])
            cond = self.join_condition(Scope(refs), tscope, equi=kind == "FULL")
            frm, scope = Join(kind, frm, table, cond), Scope(refs + tscope.cols)
        return Select(tuple(self.items(scope, self.rng.randint(1, 3))), frm)

    def total_order(self, query, limit_chance):
        """ORDER BY an expression sometimes (plain Selects), then every output position, so ties
        are identical rows; then maybe LIMIT and OFFSET."""
        keys = []
        if isinstance(query, Select) and query.frm is not None and not query.group_by \
                and not query.distinct and self.chance(0.4):
            key = self.expr(self.pick(ORDERED_FAMILIES), Scope(from_columns(query.frm)), 1)
            if not is_literal(key):
                keys.append(Order(key, *self.direction()))
        positions = list(range(1, query.ncols() + 1))
        self.rng.shuffle(positions)
        keys += [Order(p, *self.direction()) for p in positions]
        limit = offset = None
        if self.chance(limit_chance):
            limit = self.pick([0, 1, 2, 3, 5, 10])
            if self.chance(0.4):
                offset = self.pick([0, 1, 2, 4, 20])
        elif self.chance(0.1):
            offset = self.pick([1, 3])
        return replace(query, order_by=tuple(keys), limit=limit, offset=offset)

    # -- FROM -------------------------------------------------------------------------------------

    def table(self):
        name, cols, pk, _ = self.pick(TABLES)
        alias = self.alias()
        refs = [Leaf(f"{alias}.{c}", t) for c, t in cols]
        return TableRef(name, alias), Scope(refs, row_key(name, alias)), cols

    def from_clause(self, ntables, join_heavy=False, derived=True):
        """A table (or a subquery, with `derived`), or a join tree of `ntables` tables, and the
        scope its columns make."""
        if ntables == 1 and derived and self.chance(0.1):
            return self.derived_table()
        node, scope, cols = self.table()
        for _ in range(ntables - 1):
            right, rscope, rcols = self.table()
            node, scope = self.join(node, scope, cols, right, rscope, rcols, join_heavy)
            cols = None      # USING and NATURAL only between the first two tables
        return node, scope

    def join(self, left, lscope, lcols, right, rscope, rcols, join_heavy):
        """Joins `right` to the tree `left`: CROSS, USING, NATURAL or ON, any join kind."""
        kind = self.pick(["INNER", "LEFT", "RIGHT", "FULL", "CROSS", "INNER", "LEFT"])
        # Unqualified USING columns could become ambiguous once a third table joins.
        lscope = Scope([c for c in lscope.cols if "." in c.text], lscope.row_key)
        both_keyed = lscope.row_key and rscope.row_key
        scope = Scope(lscope.cols + rscope.cols,
                      lscope.row_key + rscope.row_key if both_keyed else None)
        if kind == "CROSS":
            return Join("CROSS", left, right), scope
        lnames = dict(lcols or [])
        common = [c for c, _ in rcols if c in lnames]
        if common and self.chance(0.4 if join_heavy else 0.15):
            if self.chance(0.3):
                return Join(kind, left, right, natural=True), self.merged(scope, common, lnames)
            using = tuple(self.rng.sample(common, self.rng.randint(1, min(2, len(common)))))
            return Join(kind, left, right, using=using), self.merged(scope, using, lnames)
        cond = self.join_condition(lscope, rscope, equi=kind == "FULL" or self.chance(0.6))
        return Join(kind, left, right, cond), scope

    @staticmethod
    def merged(scope, names, types):
        """USING/NATURAL columns may also be named unqualified (a FULL JOIN coalesces them)."""
        return Scope(scope.cols + [Leaf(n, types[n]) for n in names], scope.row_key)

    def join_condition(self, lscope, rscope, equi):
        """Equalities between same-family columns (all a FULL JOIN allows in PostgreSQL), or for
        other joins any comparison, sometimes with an extra condition."""
        pairs = [(lc, rc) for lc in lscope.cols for rc in rscope.cols
                 if family(lc.type) == family(rc.type) and family(lc.type) != "interval"]
        if not pairs:
            return Leaf("TRUE", "bool")
        lc, rc = self.pick(pairs)
        op = "=" if equi else self.pick(["=", "<", "<>", ">=", "="])
        cond = Expr("({0} " + op + " {1})", (lc, rc), "bool")
        if equi and self.chance(0.2):
            lc2, rc2 = self.pick(pairs)
            cond = Expr("({0} AND ({1} = {2}))", (cond, lc2, rc2), "bool")
        elif not equi and self.chance(0.3):
            extra = self.expr("bool", Scope(lscope.cols + rscope.cols, allow_subquery=False), 1)
            cond = Expr("({0} " + self.pick(["AND", "OR"]) + " {1})", (cond, extra), "bool")
        return cond

    def derived_table(self):
        inner = self.plain_select(self.rng.randint(1, 3))
        alias = self.alias("d")
        cols = tuple(f"c{i + 1}" for i in range(inner.ncols()))
        refs = [Leaf(f"{alias}.{c}", t) for c, t in zip(cols, inner.types())]
        return Derived(inner, alias, cols), Scope(refs)

    # -- expressions ------------------------------------------------------------------------------

    def items(self, scope, n, simple=False):
        out = []
        for _ in range(n):
            depth = self.rng.randint(0, 1) if simple else self.rng.randint(1, 3)
            expr = self.expr(self.item_family(), scope, depth)
            out.append(Item(expr, self.alias("c") if self.chance(0.3) else ""))
        return out

    def expr(self, fam, scope, depth):
        """An expression of type family `fam` over `scope`, at most `depth` operators deep."""
        if depth <= 0 or self.chance(0.25):
            return self.leaf(fam, scope)
        producers = [(weight * self.flavours.get(flavour, 1), fn)
                     for flavour, weight, fn in self.producers(fam, scope)]
        x = self.rng.random() * sum(w for w, _ in producers)
        for weight, fn in producers:
            x -= weight
            if x < 0:
                return fn(scope, depth - 1)
        return self.leaf(fam, scope)

    def leaf(self, fam, scope):
        if scope.grouped:
            keys = [k for k in scope.keys if family(k.type) == fam]
            if keys and self.chance(0.5):
                return self.pick(keys)
            if scope.allow_agg and self.chance(0.8):
                return self.aggregate(fam, scope)
            return self.literal(fam)
        cols = scope.of_family(fam)
        if cols and self.chance(0.8):
            return self.pick(cols)
        return self.literal(fam)

    def producers(self, fam, scope):
        """(flavour, weight, function(scope, depth)) for every way to make a `fam` value."""
        out = [("case", 1, lambda s, d: self.case_expr(fam, s, d)),
               ("case", 1, lambda s, d: self.coalesce(fam, s, d))]
        if fam != "bool":
            out.append(("case", 0.5, lambda s, d: self.tmpl("NULLIF({0}, {1})", (fam, fam), s, d, fam)))
            out.append(("math", 0.5, lambda s, d: self.tmpl(
                self.pick(["greatest({0}, {1})", "least({0}, {1})"]), (fam, fam), s, d, fam)))
        out += getattr(self, "produce_" + fam)()
        if scope.allow_agg:
            out.append(("agg", 2, lambda s, d: self.aggregate(fam, s)))
        if scope.allow_window:
            out.append(("window", 2, lambda s, d: self.window(fam, s)))
        if scope.allow_subquery and not scope.grouped:
            out.append(("subquery", 0.5, lambda s, d: self.scalar_subquery(fam, s)))
            if fam == "bool":
                out.append(("subquery", 0.5, self.in_subquery))
                out.append(("subquery", 0.5, self.exists_subquery))
        return out

    def tmpl(self, fmt, arg_fams, scope, depth, result, kind="plain"):
        """Expr for `fmt` with arguments of the given families (see `arg`). `result` is a type or
        family; 'int' means the widest int argument, 'num' the arithmetic result type."""
        args = tuple(self.arg(f, scope, depth) for f in arg_fams)
        if result == "num":
            result = number_result(*(a.type for a in args))
        elif result == "int":
            result = max((a.type for a in args if a.type in INT_TYPES), key=INT_TYPES.index,
                         default="int4")
        else:
            result = LITERAL_TYPES.get(result, result)
        return Expr(fmt, args, result, kind)

    def arg(self, fam, scope, depth):
        """An argument of family `fam`, or: 'small' a small int literal, 'pattern' a LIKE pattern,
        'lit<fam>' a literal of that family, 'nz<fam>' a value that is never zero."""
        if fam == "small":
            return Leaf(self.pick(SMALL_INTS), "int4")
        if fam == "pattern":
            return Leaf(self.pick(LIKE_PATTERNS), "text")
        if fam.startswith("lit"):
            return self.literal(fam[3:])
        if fam.startswith("nz"):
            e = self.expr(fam[2:], scope, depth)
            return e if is_nonzero_literal(e) else Expr("NULLIF({0}, 0)", (e,), e.type)
        return self.expr(fam, scope, depth)

    def t(self, fmt, args, result, flavour, weight=1):
        """A producer for a fixed template (see `tmpl`)."""
        return (flavour, weight, lambda s, d: self.tmpl(fmt, args, s, d, result))

    def arith(self, pairs, ops=("+", "-", "*")):
        """Producers for binary arithmetic over one of the family pairs."""
        return [("arith", 1, (lambda op: lambda s, d: self.tmpl(
            "({0} " + op + " {1})", self.pick(pairs), s, d, "num"))(op)) for op in ops]

    def case_expr(self, fam, scope, depth):
        if self.chance(0.3):    # simple CASE
            key = self.pick(["int", "text"])
            return self.tmpl("CASE {0} WHEN {1} THEN {2} WHEN {3} THEN {4} ELSE {5} END",
                             (key, "lit" + key, fam, "lit" + key, fam, fam), scope, depth, fam)
        if self.chance(0.3):    # no ELSE: NULL
            return self.tmpl("CASE WHEN {0} THEN {1} END", ("bool", fam), scope, depth, fam)
        return self.tmpl("CASE WHEN {0} THEN {1} WHEN {2} THEN {3} ELSE {4} END",
                         ("bool", fam, "bool", fam, fam), scope, depth, fam)

    def coalesce(self, fam, scope, depth):
        n = self.rng.randint(2, 3)
        return self.tmpl("COALESCE(" + ", ".join(f"{{{i}}}" for i in range(n)) + ")",
                         (fam,) * n, scope, depth, fam)

    def comparison(self, scope, depth):
        op = self.pick(["=", "<>", "<", "<=", ">", ">="])
        fam = self.pick(ORDERED_FAMILIES)
        pair = (self.pick(NUMBER_FAMILIES), self.pick(NUMBER_FAMILIES)) \
            if fam in NUMBER_FAMILIES else (fam, fam)     # mixed number types compare too
        return self.tmpl("({0} " + op + " {1})", pair, scope, depth, "bool")

    # -- producers per family -----------------------------------------------------------------

    def produce_int(self):
        t = self.t
        return self.arith([("int", "int")]) + [
            t("({0} / {1})", ("int", "nzint"), "int", "arith"),
            t("({0} % {1})", ("int", "nzint"), "int", "math"),
            t("(- {0})", ("int",), "int", "arith"), t("abs({0})", ("int",), "int", "math"),
            t("mod({0}, {1})", ("int", "nzint"), "int", "math"),
            t("({0} & {1})", ("int", "int"), "int", "math", 0.3),
            t("({0} | {1})", ("int", "int"), "int", "math", 0.3),
            t("({0} << {1})", ("int", "small"), "int", "math", 0.3),
            t("length({0})", ("text",), "int4", "string"),
            t("position({0} IN {1})", ("text", "text"), "int4", "string"),
            t("strpos({0}, {1})", ("text", "text"), "int4", "string", 0.5),
            t("ascii({0})", ("text",), "int4", "string", 0.3),
            t("({0} - {1})", ("date", "date"), "int4", "datetime"),
            t("CAST({0} AS int4)", ("numeric",), "int4", "cast"),
            t("CAST({0} AS int8)", ("float8",), "int8", "cast"),
            t("CAST({0} AS int4)", ("float8",), "int4", "cast"),
            t("CAST({0} AS int2)", ("int",), "int2", "cast"),
            t("CAST({0} AS int4)", ("litnumtext",), "int4", "cast"),
            t("CAST({0} AS int4)", ("bool",), "int4", "cast", 0.5),
            t("{0}::int8", ("int",), "int8", "cast"),
        ]

    def produce_numeric(self):
        t = self.t
        return self.arith([("numeric", "numeric"), ("numeric", "int"), ("int", "numeric")]) + [
            t("({0} / {1})", ("numeric", "nznumeric"), "numeric", "arith"),
            t("({0} / {1})", ("int", "nznumeric"), "numeric", "arith", 0.5),
            t("(- {0})", ("numeric",), "numeric", "arith"),
            t("round({0})", ("numeric",), "numeric", "math"),
            t("round({0}, {1})", ("numeric", "small"), "numeric", "math"),
            t("trunc({0})", ("numeric",), "numeric", "math"),
            t("trunc({0}, {1})", ("numeric", "small"), "numeric", "math"),
            t("ceil({0})", ("numeric",), "numeric", "math"),
            t("floor({0})", ("numeric",), "numeric", "math"),
            t("abs({0})", ("numeric",), "numeric", "math"),
            t("sign({0})", ("numeric",), "numeric", "math"),
            t("mod({0}, {1})", ("numeric", "nznumeric"), "numeric", "math"),
            t("power({0}, 2)", ("numeric",), "numeric", "math", 0.5),
            t("sqrt(abs({0}))", ("numeric",), "numeric", "math", 0.5),
            t("CAST({0} AS numeric)", ("int",), "numeric", "cast"),
            t("CAST({0} AS numeric(8,3))", ("numeric",), "numeric", "cast"),
            t("CAST({0} AS numeric)", ("float8",), "numeric", "cast"),
            t("CAST({0} AS numeric(5,1))", ("float8",), "numeric", "cast", 0.5),
            t("CAST({0} AS numeric)", ("litnumtext",), "numeric", "cast", 0.5),
            t("{0}::numeric(10,4)", ("int",), "numeric", "cast"),
            t("EXTRACT(YEAR FROM {0})", ("date",), "numeric", "datetime"),
            t("EXTRACT(DOW FROM {0})", ("timestamp",), "numeric", "datetime"),
            t("EXTRACT(EPOCH FROM {0})", ("timestamp",), "numeric", "datetime"),
            t("EXTRACT(DAY FROM {0})", ("interval",), "numeric", "datetime"),
        ]

    def produce_float8(self):
        t = self.t
        return self.arith([("float8", "float8"), ("float8", "int"), ("numeric", "float8")]) + [
            t("({0} / {1})", ("float8", "nzfloat8"), "float8", "arith"),
            t("(- {0})", ("float8",), "float8", "arith"),
            t("sqrt(abs({0}))", ("float8",), "float8", "math"),
            t("power({0}, 2)", ("float8",), "float8", "math"),
            t("cbrt({0})", ("float8",), "float8", "math", 0.5),
            t("abs({0})", ("float8",), "float8", "math"),
            t("ceil({0})", ("float8",), "float8", "math"),
            t("floor({0})", ("float8",), "float8", "math"),
            t("round({0})", ("float8",), "float8", "math"),
            t("trunc({0})", ("float8",), "float8", "math"),
            t("sign({0})", ("float8",), "float8", "math"),
            t("CAST({0} AS float8)", ("int",), "float8", "cast"),
            t("CAST({0} AS float8)", ("numeric",), "float8", "cast"),
            t("CAST({0} AS float8)", ("litnumtext",), "float8", "cast", 0.5),
            t("{0}::float8", ("int",), "float8", "cast"),
            t("date_part('month', {0})", ("date",), "float8", "datetime"),
            t("date_part('hour', {0})", ("timestamp",), "float8", "datetime"),
        ]

    def produce_text(self):
        t = self.t
        casts = [t("CAST({0} AS text)", (fam,), "text", "cast")
                 for fam in ("int", "numeric", "float8", "date", "timestamp", "interval", "bool")]
        return casts + [
            t("({0} || {1})", ("text", "text"), "text", "string", 2),
            t("({0} || {1})", ("text", "int"), "text", "string", 0.5),
            t("upper({0})", ("text",), "text", "string"),
            t("lower({0})", ("text",), "text", "string"),
            t("substr({0}, {1})", ("text", "small"), "text", "string"),
            t("substr({0}, {1}, {2})", ("text", "small", "small"), "text", "string"),
            t("substring({0} FROM {1} FOR {2})", ("text", "small", "small"), "text", "string", 0.5),
            t("replace({0}, {1}, {2})", ("text", "littext", "littext"), "text", "string"),
            t("trim({0})", ("text",), "text", "string"),
            t("trim(BOTH 'a' FROM {0})", ("text",), "text", "string", 0.5),
            t("ltrim({0})", ("text",), "text", "string", 0.5),
            t("rtrim({0}, 'e')", ("text",), "text", "string", 0.5),
            t("btrim({0}, ' x')", ("text",), "text", "string", 0.5),
            t("lpad({0}, {1}, '*')", ("text", "small"), "text", "string"),
            t("rpad({0}, {1})", ("text", "small"), "text", "string", 0.5),
            t("concat({0}, {1}, {2})", ("text", "int", "text"), "text", "string"),
            t("concat_ws('-', {0}, {1})", ("text", "text"), "text", "string", 0.5),
            t("left({0}, {1})", ("text", "small"), "text", "string", 0.5),
            t("right({0}, {1})", ("text", "small"), "text", "string", 0.5),
            t("repeat({0}, {1})", ("text", "small"), "text", "string", 0.5),
            t("reverse({0})", ("text",), "text", "string", 0.5),
            t("initcap({0})", ("text",), "text", "string", 0.5),
            t("split_part({0}, ' ', 2)", ("text",), "text", "string", 0.3),
            t("translate({0}, 'ap', 'AP')", ("text",), "text", "string", 0.3),
            t("CAST({0} AS varchar(3))", ("text",), "text", "cast"),
            t("to_char({0}, 'YYYY-MM-DD')", ("date",), "text", "datetime", 0.5),
        ]

    def produce_bool(self):
        t, pick = self.t, self.pick
        any_fam, cmp_fam = pick(ORDERED_FAMILIES), pick(ORDERED_FAMILIES[:5])
        in_fam = pick(["int", "text", "numeric", "date"])
        return [
            ("logic", 4, self.comparison),
            t("({0} AND {1})", ("bool", "bool"), "bool", "logic", 2),
            t("({0} OR {1})", ("bool", "bool"), "bool", "logic", 2),
            t("(NOT {0})", ("bool",), "bool", "logic"),
            t("({0} IS " + pick(["", "NOT "]) + "NULL)", (any_fam,), "bool", "logic"),
            t("({0} IS " + pick(["TRUE", "NOT TRUE", "FALSE", "NOT FALSE", "UNKNOWN"]) + ")",
              ("bool",), "bool", "logic"),
            t("({0} IS " + pick(["", "NOT "]) + "DISTINCT FROM {1})", (any_fam, any_fam), "bool",
              "logic"),
            t("({0} " + pick(["", "NOT "]) + "BETWEEN {1} AND {2})", (cmp_fam,) * 3, "bool",
              "logic"),
            t("({0} " + pick(["IN", "NOT IN"]) + " ({1}, {2}, {3}))",
              (in_fam, "lit" + in_fam, "lit" + in_fam, in_fam), "bool", "logic"),
            t("({0} " + pick(["LIKE", "NOT LIKE", "ILIKE"]) + " {1})", ("text", "pattern"),
              "bool", "string"),
            t("starts_with({0}, {1})", ("text", "littext"), "bool", "string", 0.3),
            t("CAST({0}::int4 AS bool)", ("int",), "bool", "cast", 0.5),
            t("CAST({0} AS bool)", ("litbooltext",), "bool", "cast", 0.5),
        ]

    def produce_date(self):
        t = self.t
        return [
            t("({0} + {1})", ("date", "small"), "date", "datetime"),
            t("({0} - {1})", ("date", "small"), "date", "datetime"),
            t("CAST({0} AS date)", ("timestamp",), "date", "cast"),
            t("CAST({0} AS date)", ("litdatetext",), "date", "cast", 0.5),
        ]

    def produce_timestamp(self):
        t = self.t
        return [
            t("({0} + {1})", ("timestamp", "interval"), "timestamp", "datetime"),
            t("({0} - {1})", ("timestamp", "interval"), "timestamp", "datetime"),
            t("({0} + {1})", ("date", "interval"), "timestamp", "datetime"),
            t("date_trunc('month', {0})", ("timestamp",), "timestamp", "datetime"),
            t("date_trunc('hour', {0})", ("timestamp",), "timestamp", "datetime"),
            t("CAST({0} AS timestamp)", ("date",), "timestamp", "cast"),
            t("CAST({0} AS timestamp)", ("litdatetext",), "timestamp", "cast", 0.3),
        ]

    def produce_interval(self):
        t = self.t
        return [
            t("({0} - {1})", ("timestamp", "timestamp"), "interval", "datetime"),
            t("({0} * {1})", ("interval", "small"), "interval", "datetime"),
            t("({0} + {1})", ("interval", "interval"), "interval", "datetime"),
            t("(- {0})", ("interval",), "interval", "datetime"),
            t("justify_hours({0})", ("interval",), "interval", "datetime", 0.3),
            t("CAST({0} AS interval)", ("litivtext",), "interval", "cast", 0.5),
        ]

    # -- aggregates and windows ----------------------------------------------------------------

    def aggregate(self, fam, scope):
        """An aggregate call with a `fam` result, over the ungrouped scope, maybe with FILTER."""
        plain = scope.plain()
        choices = AGGREGATES[fam] + ([("min({0})", fam), ("max({0})", fam)] if fam != "bool" else [])
        for _ in range(5):
            fmt, arg_fam = self.pick(choices)
            arg = typed(self.agg_arg(arg_fam, plain))
            result = result_type(fmt, arg.type if arg else "int8")
            if family(result) == fam:
                break
        else:
            fmt, arg = ("count(*)", None) if fam == "int" else ("max({0})", self.expr(fam, plain, 0))
            result = arg.type if arg else "int8"
        args = (arg,) if arg is not None else ()
        if self.chance(0.25):
            fmt += " FILTER (WHERE {%d})" % len(args)
            args += (self.expr("bool", plain, 1),)
        return Expr(fmt, args, result, "agg")

    def agg_arg(self, arg_fam, scope):
        if arg_fam is None:
            return None
        if arg_fam == "floatcol":
            # Float sums only over values whose sums are exact whatever the order of addition
            # (Shoal adds partial sums in its own order, PostgreSQL row by row).
            cols = scope.of_family("float8")
            return self.pick(cols) if cols else Leaf("CAST(1.5 AS float8)", "float8")
        return self.expr(arg_fam, scope, self.pick([0, 0, 1]))

    def window(self, fam, scope):
        """A window function call with a `fam` result. Functions whose result depends on which
        of two peer rows comes first get the row key appended to their ORDER BY."""
        plain = scope.plain()
        fmt, arg_fams, row_sensitive = self.pick(WINDOW_FUNCS[fam])
        if row_sensitive and not scope.row_key:
            fmt, arg_fams, row_sensitive = WINDOW_FUNCS[fam][0]
        args = tuple(typed(self.agg_arg(f, plain) if f == "floatcol" else
                           self.arg(f, plain, self.pick([0, 1]))) for f in arg_fams)
        result = result_type(fmt, args[0].type if args else "int8")
        spec = []
        if self.chance(0.6):
            parts = [self.expr(self.pick(ORDERED_FAMILIES), plain, self.pick([0, 1]))
                     for _ in range(self.rng.randint(1, 2))]
            spec.append("PARTITION BY " + ", ".join(f"{{{len(args) + i}}}" for i in range(len(parts))))
            args += tuple(parts)
        order = []
        if row_sensitive or self.chance(0.7):
            for _ in range(self.rng.randint(0 if row_sensitive else 1, 2)):
                desc, nulls = self.direction()
                order.append(f"{{{len(args)}}}" + (" DESC" if desc else "") +
                             (f" NULLS {nulls}" if nulls else ""))
                args += (self.expr(self.pick(ORDERED_FAMILIES), plain, self.pick([0, 1])),)
            if row_sensitive:
                order += [k.replace("{", "{{").replace("}", "}}") for k in scope.row_key]
        if order:
            spec.append("ORDER BY " + ", ".join(order))
            if row_sensitive and self.chance(0.5):
                spec.append(self.pick(FRAMES))
        return Expr(fmt + " OVER (" + " ".join(spec) + ")", args, result, "window")

    # -- subqueries ---------------------------------------------------------------------------------

    def inner_select(self, fam, outer, agg):
        """A one-column SELECT over one table, correlated to `outer` half of the time. Aggregates
        read only the inner table, so that they belong to the subquery."""
        frm, scope = self.from_clause(1, derived=False)
        where = None
        if outer.cols and self.chance(0.5):
            where = self.join_condition(scope, Scope(outer.cols), equi=self.chance(0.7))
        elif self.chance(0.4):
            where = self.expr("bool", Scope(scope.cols + outer.cols, allow_subquery=False), 1)
        if agg:
            item = self.aggregate(fam, Scope(scope.cols, grouped=True, keys=[], raw=scope,
                                             allow_agg=True))
        else:
            item = self.expr(fam, Scope(scope.cols, allow_subquery=False), self.pick([0, 1]))
        return Select((Item(item),), frm, where)

    def scalar_subquery(self, fam, scope):
        query = self.inner_select(fam, scope, agg=True)
        return Expr("({0})", (query,), query.items[0].expr.type)

    def in_subquery(self, scope, depth):
        fam = self.pick(["int", "text", "numeric", "date"])
        query = self.inner_select(fam, scope, agg=False)
        op = self.pick(["IN", "NOT IN", "= ANY", "<> ALL", "> ALL", "<= ANY"])
        return Expr("({0} " + op + " ({1}))", (self.expr(fam, scope, depth), query), "bool")

    def exists_subquery(self, scope, depth):
        query = self.inner_select("int", scope, agg=False)
        return Expr(self.pick(["EXISTS ({0})", "(NOT EXISTS ({0}))"]), (query,), "bool")

    # -- transaction scripts -----------------------------------------------------------------------

    def txn_script(self):
        """BEGIN, some writes, often a failing statement and statements after it, then COMMIT or
        ROLLBACK (sometimes to a savepoint first), and finally the table's contents."""
        s = [Leaf(self.pick(["BEGIN", "BEGIN", "START TRANSACTION",
                             "BEGIN ISOLATION LEVEL REPEATABLE READ"]), "stmt")]
        s += [self.dml() for _ in range(self.rng.randint(1, 3))]
        savepoint = self.chance(0.3)
        if savepoint:
            s.append(Leaf("SAVEPOINT sp", "stmt"))
        if self.chance(0.8):
            s.append(Leaf(self.pick(FAILING), "stmt"))
            s += [self.dml() for _ in range(self.rng.randint(0, 2))]
        if savepoint and self.chance(0.7):
            s.append(Leaf("ROLLBACK TO SAVEPOINT sp", "stmt"))
            s += [self.dml() for _ in range(self.rng.randint(0, 2))]
        s.append(Leaf(self.pick(["COMMIT", "ROLLBACK", "COMMIT", "END"]), "stmt"))
        return Script(TW_RESET, tuple(s), "SELECT * FROM tw ORDER BY id")

    def dml(self):
        """A write to tw (or a read of it), with expressions over its columns."""
        scope = Scope([Leaf(c, t) for c, t in TW_COLUMNS], allow_subquery=False)
        kind = self.pick(["insert", "insert", "update", "delete", "upsert", "insert_select",
                          "select"])
        returning = self.pick(["", "", " RETURNING id, v"])
        if kind == "select":
            return Expr("SELECT count(*), sum(v) FROM tw WHERE {0}", (self.row_filter(scope),),
                        "stmt")
        if kind == "update":
            col, typ = self.pick(TW_COLUMNS[1:])
            return Expr(f"UPDATE tw SET {col} = {{0}} WHERE {{1}}{returning}",
                        (self.expr(family(typ), scope, 1), self.row_filter(scope)), "stmt")
        if kind == "delete":
            return Expr(f"DELETE FROM tw WHERE {{0}}{returning}", (self.row_filter(scope),),
                        "stmt")
        if kind == "insert_select":
            # Only duplicate keys can fail here: with two possible errors, which one a
            # server reports would depend on its row order.
            return Leaf(f"INSERT INTO tw SELECT id + {self.rng.randint(0, 12)}, "
                        f"COALESCE(abs(c % 100), 0), s, n % 1000 "
                        f"FROM t1 WHERE id {self.pick(['<', '>', '='])} {self.rng.randint(1, 14)}"
                        f"{returning}", "stmt")
        row = Expr("({0}, {1}, {2}, {3})", (Leaf(str(self.rng.randint(1, 8)), "int4"),
                                            self.literal("int"), self.literal("text"),
                                            self.literal("numeric")), "row")
        conflict = ""
        if kind == "upsert":
            conflict = self.pick([" ON CONFLICT (id) DO NOTHING",
                                  " ON CONFLICT (id) DO UPDATE SET v = tw.v + excluded.v",
                                  " ON CONFLICT (id) DO UPDATE SET s = excluded.s WHERE tw.v > 5"])
        return Expr(f"INSERT INTO tw VALUES {{0}}{conflict}{returning}", (row,), "stmt")

    def row_filter(self, scope):
        """A condition on one of tw's columns, so that writes hit some rows and miss others."""
        col = self.pick(scope.cols)
        if self.chance(0.2):
            return Expr("({0} IS NULL)", (col,), "bool")
        op = self.pick(["=", "<", ">", "<>", ">="])
        return Expr("({0} " + op + " {1})", (col, self.expr(family(col.type), scope, 1)), "bool")


FAILING = [
    "INSERT INTO tw VALUES (1, 1, 'dup', 0)",
    "INSERT INTO tw VALUES (50, NULL, 'null v', 0)",
    "INSERT INTO tw VALUES (51, -1, 'negative', 0)",
    "UPDATE tw SET v = v - 15",
    "SELECT 1 / (v - v) FROM tw",
    "SELECT CAST(s AS int4) FROM tw",
    "SELECT nope FROM tw",
    "INSERT INTO tw VALUES (52, 1, 'x', 123456789)",
    "UPDATE tw SET id = 2 WHERE id = 1",
]


def from_columns(frm):
    """The qualified columns a FROM tree makes visible."""
    if isinstance(frm, TableRef):
        cols = next((cols for name, cols, _, _ in TABLES if name == frm.name), [])
        return [Leaf(f"{frm.alias}.{c}", t) for c, t in cols]
    if isinstance(frm, Join):
        return from_columns(frm.left) + from_columns(frm.right)
    if isinstance(frm, Derived):
        return [Leaf(f"{frm.alias}.{c}", t) for c, t in zip(frm.cols, frm.query.types())]
    return []


# Aggregates by result family: (format, argument family or None). 'floatcol' is a float column.
AGGREGATES = {
    "int": [("count(*)", None), ("count({0})", "text"), ("count({0})", "int"),
            ("count(DISTINCT {0})", "int"), ("count(DISTINCT {0})", "text"), ("sum({0})", "int")],
    "numeric": [("sum({0})", "numeric"), ("avg({0})", "int"), ("avg({0})", "numeric"),
                ("sum({0})", "int"), ("avg(DISTINCT {0})", "numeric")],
    "float8": [("sum({0})", "floatcol"), ("avg({0})", "floatcol")],
    "text": [("string_agg({0}, ',' ORDER BY {0})", "text"),
             ("string_agg(DISTINCT {0}, '|' ORDER BY {0})", "text")],
    "bool": [("bool_and({0})", "bool"), ("bool_or({0})", "bool"), ("every({0})", "bool")],
    "interval": [("sum({0})", "interval")],
    "date": [], "timestamp": [],
}


def result_type(fmt, arg_type):
    """The result type of an aggregate or window call with the given first argument type."""
    name = fmt.split("(")[0]
    if name in ("count", "rank", "dense_rank", "row_number"):
        return "int8"
    if name == "ntile":
        return "int4"
    if name in ("percent_rank", "cume_dist"):
        return "float8"
    if name == "sum":
        return "int8" if arg_type in ("int2", "int4") else "numeric" if arg_type == "int8" else arg_type
    if name == "avg":
        return "numeric" if arg_type in INT_TYPES else arg_type
    return arg_type


FRAMES = ["ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING", "ROWS UNBOUNDED PRECEDING",
          "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING",
          "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW",
          "RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING",
          "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"]


def _window_funcs():
    """By result family: (format, argument families, row_sensitive). The first entry of each
    family is not row-sensitive: it stands in when the FROM clause has no row key."""
    def values(fam):
        out = [("lag({0})", (fam,), True), ("lead({0}, 2)", (fam,), True),
               ("lag({0}, 1, {1})", (fam, fam), True), ("first_value({0})", (fam,), True),
               ("last_value({0})", (fam,), True), ("nth_value({0}, 2)", (fam,), True)]
        if fam == "bool":       # no min/max over bool
            return out
        return [("min({0})", (fam,), True), ("max({0})", (fam,), True)] + out

    first = {
        "int": [("rank()", (), False), ("dense_rank()", (), False), ("count(*)", (), False),
                ("row_number()", (), True), ("ntile(3)", (), True),
                ("count({0})", ("text",), True), ("sum({0})", ("int",), True)],
        "numeric": [("sum({0})", ("numeric",), False), ("avg({0})", ("int",), True),
                    ("sum({0})", ("numeric",), True)],
        "float8": [("percent_rank()", (), False), ("cume_dist()", (), False),
                   ("sum({0})", ("floatcol",), True)],
        "bool": [("bool_or({0})", ("bool",), False), ("bool_and({0})", ("bool",), True)],
    }
    return {fam: first.get(fam, [("max({0})", (fam,), False)]) + values(fam)
            for fam in ORDERED_FAMILIES}


WINDOW_FUNCS = _window_funcs()

