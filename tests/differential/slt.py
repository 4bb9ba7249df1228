"""sqllogictest output for fuzz.py: found differences as records whose expected output is
PostgreSQL's answer, in the conventions of tests/slt/*.slt, and a checker that runs such a file
against a server the way crates/shoal/tests/slt.rs does over the simple query protocol.

The repository's harness also runs every file over the extended protocol, where the test engine
converts values itself (floats and numerics through Rust types, timestamps through chrono) and
cannot decode some types at all. So a query whose result has a column of any type other than
int, text, varchar or bool is written wrapped as `SELECT c1::text, ... FROM (query) AS q(c1, ...)`:
the text PostgreSQL prints is then the same under both protocols. A column with values whose
whitespace the runner's normalisation would lose (leading, trailing or repeated spaces) is
printed between brackets.
"""

import re

# Result column types the extended-protocol engine prints exactly as PostgreSQL's text does.
TEXT_EXACT_OIDS = {16, 20, 21, 23, 25, 1043}
INT_OIDS = {20, 21, 23}
REAL_OIDS = {700, 701, 1700}
REGEX_SPECIAL = set("\\.+*?()|[]{}^$")


def regex_escape(text):
    """Escapes what Rust's regex syntax treats specially (Python's re.escape escapes more, e.g.
    spaces, which Rust's regex rejects)."""
    return "".join("\\" + ch if ch in REGEX_SPECIAL else ch for ch in text)


def cell(value):
    if value is None:
        return "NULL"
    return value if value != "" else "(empty)"


def type_letters(type_oids):
    return "".join("I" if t in INT_OIDS else "R" if t in REAL_OIDS else "T" for t in type_oids)


def as_text_query(sql, outcome):
    """The query to write for `sql`, given PostgreSQL's outcome for it: `sql` itself, or wrapped
    so that each column prints the same under both protocols (see the module doc) and keeps its
    whitespace, which the runner would otherwise normalise away (so '[' || c || ']')."""
    if outcome.status != "ok" or not outcome.names:
        return sql
    columns, wrapped = [], False
    for i, oid in enumerate(outcome.types):
        col = f"c{i + 1}"
        values = [row[i] for row in outcome.rows if row[i] is not None]
        if any(v != " ".join(v.split()) for v in values):
            col, wrapped = f"'[' || {col}::text || ']'", True
        elif oid not in TEXT_EXACT_OIDS:
            col, wrapped = f"{col}::text", True
        columns.append(col)
    if not wrapped:
        return sql
    names = ", ".join(f"c{i + 1}" for i in range(len(columns)))
    return f"SELECT {', '.join(columns)} FROM ({sql}) AS q({names})"


def record(sql, outcome, ordered, letters=None):
    """One sqllogictest record expecting `outcome` (PostgreSQL's) for `sql`."""
    if outcome.status != "ok":
        return f"statement error {outcome.sqlstate}: {regex_escape(outcome.message)}\n{sql}\n"
    if not outcome.names:
        return f"statement ok\n{sql}\n"
    rows = [[cell(v) for v in row] for row in outcome.rows]
    if not ordered:
        rows.sort()     # rowsort: the runner sorts the actual rows the same way
    header = f"query {letters or type_letters(outcome.types)}{'' if ordered else ' rowsort'}"
    body = "".join(" ".join(row) + "\n" for row in rows)
    return f"{header}\n{sql}\n----\n{body}"


def comment(text):
    return "".join(f"# {line}\n" for line in text.splitlines())


# ---------------------------------------------------------------------------------------------
# Checking a file

def parse(text):
    """The file's records as (line number, kind, header words, sql, expected lines)."""
    records, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            i += 1
            continue
        start, words = i + 1, line.split()
        i += 1
        sql = []
        while i < len(lines) and lines[i].strip() and lines[i] != "----":
            sql.append(lines[i])
            i += 1
        expected = []
        if i < len(lines) and lines[i] == "----":
            i += 1
            while i < len(lines) and lines[i].strip():
                expected.append(lines[i])
                i += 1
        header = line[len(words[0]) + 1:]
        records.append((start, words[0], header, "\n".join(sql), expected))
    return records


def normalize(line):
    return " ".join(line.split())


def check_record(session, kind, header, sql, expected):
    """Runs one record; returns an error message, or None if the server answered as expected."""
    outcome = session.run(sql)
    if kind == "statement":
        if header.startswith("error"):
            pattern = header[len("error"):].strip()
            if outcome.status == "ok":
                return f"expected an error matching {pattern!r}, got success"
            got = f"ERROR {outcome.sqlstate}: {outcome.message}"
            return None if re.search(pattern, got) else f"expected {pattern!r}, got {got!r}"
        return None if outcome.status == "ok" else f"expected success, got {outcome.describe()}"
    if outcome.status != "ok":
        return f"expected rows, got {outcome.describe()}"
    rows = [[cell(v) for v in row] for row in outcome.rows]
    if "rowsort" in header.split():
        rows.sort()
    actual = [normalize(" ".join(row)) for row in rows]
    if actual != [normalize(line) for line in expected]:
        return "expected:\n  " + "\n  ".join(expected) + "\ngot:\n  " + "\n  ".join(actual)
    return None


def check_file(connect, path):
    """Runs every record of the file in order on a session from `connect()` (a new one after
    a lost connection); returns a list of failures."""
    failures, session = [], connect()
    for line_no, kind, header, sql, expected in parse(open(path, encoding="utf-8").read()):
        if kind not in ("statement", "query"):
            failures.append(f"{path}:{line_no}: unsupported record {kind}")
            continue
        problem = check_record(session, kind, header, sql, expected)
        if problem:
            failures.append(f"{path}:{line_no}: {sql}\n{problem}")
        if not session.alive():
            session = connect()
    return failures
