"""Running a statement on one server and comparing two servers' outcomes, for fuzz.py.

Statements go over libpq's simple query protocol (psycopg's `pq` layer), so what is compared is
exactly what the server sent: the text of every value, NULLs, the column count, names and type
OIDs, the command tag, and on failure the SQLSTATE.
"""

import decimal
import re
import threading
from dataclasses import dataclass, field

from psycopg import pq

SQLSTATE = pq.DiagnosticField.SQLSTATE
MESSAGE = pq.DiagnosticField.MESSAGE_PRIMARY
NUMERIC_OID = 1700
QUERY_CANCELED = "57014"
FEATURE_NOT_SUPPORTED = "0A000"

# Verdicts that are differences, most serious first (the report's order).
DIFFERENCE_KINDS = ["crash", "rows", "columns", "accepts-invalid", "rejects-valid", "tag",
                    "sqlstate", "types", "names", "timeout"]


@dataclass
class Outcome:
    """What one server answered to one statement. status: ok, error, timeout or crash."""
    status: str
    sqlstate: str = None
    message: str = None
    tag: str = None
    names: tuple = ()
    types: tuple = ()
    rows: list = field(default_factory=list)

    def describe(self, max_rows=8):
        """A short human-readable form for reports."""
        if self.status == "crash":
            return f"connection lost: {self.message}"
        if self.status != "ok":
            return f"ERROR {self.sqlstate}: {self.message}"
        if not self.names:
            return self.tag
        shown = "; ".join("(" + ", ".join(show(v) for v in row) + ")" for row in self.rows[:max_rows])
        more = f" ... ({len(self.rows)} rows)" if len(self.rows) > max_rows else ""
        return f"{shown or '(no rows)'}{more}"


def show(value):
    return "NULL" if value is None else repr(value)


class Session:
    """One connection to one server. `hard_kill` (optional) is called when a statement outlives
    even its cancellation, to make the server let go (fuzz.py kills a server it started)."""

    def __init__(self, host, port, statement_timeout_s, hard_kill=None):
        self.statement_timeout_s = statement_timeout_s
        self.hard_kill = hard_kill
        conninfo = f"host={host} port={port} user=postgres dbname=postgres connect_timeout=10"
        self.conn = pq.PGconn.connect(conninfo.encode())
        if self.conn.status != pq.ConnStatus.OK:
            raise ConnectionError(self.conn.get_error_message().decode(errors="replace"))
        for setting in (f"SET statement_timeout = '{statement_timeout_s}s'", "SET TimeZone = 'UTC'"):
            outcome = self.run(setting)
            if outcome.status != "ok":
                raise ConnectionError(f"{setting}: {outcome.describe()}")

    def run(self, sql):
        """Runs one statement and returns its Outcome; never raises for server errors."""
        # statement_timeout cancels a slow statement inside the server; these timers catch a
        # server that ignores it: first a cancel request, then `hard_kill`.
        timers = [threading.Timer(self.statement_timeout_s * 2, self._cancel)]
        if self.hard_kill:
            timers.append(threading.Timer(self.statement_timeout_s * 6, self.hard_kill))
        for t in timers:
            t.daemon = True
            t.start()
        try:
            res = self.conn.exec_(sql.encode())
        except Exception as exc:  # psycopg raises when libpq returns no result at all
            return Outcome("crash", message=str(exc))
        finally:
            for t in timers:
                t.cancel()
        return self._outcome(res)

    def _cancel(self):
        try:
            self.conn.get_cancel().cancel()
        except Exception:  # the connection may already be gone; the caller sees that
            pass

    def _outcome(self, res):
        if res.status in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
            rows = [tuple(None if v is None else v.decode() for v in
                          (res.get_value(r, c) for c in range(res.nfields)))
                    for r in range(res.ntuples)]
            return Outcome("ok", tag=(res.command_status or b"").decode(),
                           names=tuple(res.fname(c).decode() for c in range(res.nfields)),
                           types=tuple(res.ftype(c) for c in range(res.nfields)), rows=rows)
        sqlstate = res.error_field(SQLSTATE)
        message = (res.error_field(MESSAGE) or res.error_message or b"").decode(errors="replace")
        if sqlstate is None or self.conn.status == pq.ConnStatus.BAD:
            return Outcome("crash", message=message.strip())
        sqlstate = sqlstate.decode()
        status = "timeout" if sqlstate == QUERY_CANCELED else "error"
        return Outcome(status, sqlstate=sqlstate, message=message)

    def alive(self):
        return self.conn.status == pq.ConnStatus.OK

    def reset(self):
        """Ends any transaction a script left open."""
        if self.alive() and self.conn.transaction_status != pq.TransactionStatus.IDLE:
            self.run("ROLLBACK")

    def close(self):
        self.conn.finish()


def sort_key(row):
    return tuple((v is None, v or "") for v in row)


DECIMAL = re.compile(r"-?\d+(\.\d*)?")
WIDE = decimal.Context(prec=2000)


def same_number(a, b):
    """Whether two numeric texts are one value shown with different scales: equal once both are
    rounded (or truncated) to the fewer fractional digits of the two."""
    if a == b:
        return True
    if a is None or b is None or not DECIMAL.fullmatch(a) or not DECIMAL.fullmatch(b):
        return False
    digits = min(len(x.partition(".")[2]) for x in (a, b))
    step = decimal.Decimal(1).scaleb(-digits)
    return any(decimal.Decimal(a).quantize(step, rounding, WIDE) ==
               decimal.Decimal(b).quantize(step, rounding, WIDE)
               for rounding in (decimal.ROUND_HALF_UP, decimal.ROUND_DOWN))


def numeric_scale_only(shoal, pg):
    """Whether two differing row sets differ only in how numeric values are scaled (1.5 against
    1.50, or 0.33333 against 0.33333333333333333333): a cause common enough to be one group."""
    numeric = [t == NUMERIC_OID for t in pg.types]
    if len(shoal.rows) != len(pg.rows) or not any(numeric):
        return False

    def key(row):
        return tuple((0, decimal.Decimal(v), "") if v is not None and DECIMAL.fullmatch(v)
                     else (1, 0, v or "") if v is not None else (2, 0, "") for v in row)
    return all(same_number(a, b) if is_num else a == b
               for srow, prow in zip(sorted(shoal.rows, key=key), sorted(pg.rows, key=key))
               for a, b, is_num in zip(srow, prow, numeric))


def verdict(shoal, pg, ordered):
    """'identical', 'refused' (a 0A000 refusal), or a difference kind from DIFFERENCE_KINDS."""
    if shoal.status == "crash":
        return "crash"
    if shoal.status == "timeout" or pg.status == "timeout":
        return "identical" if shoal.status == pg.status else "timeout"
    # PostgreSQL refuses a few things too (a FULL JOIN on a condition it cannot hash or merge).
    if FEATURE_NOT_SUPPORTED in (shoal.sqlstate, pg.sqlstate):
        return "refused"
    if shoal.status == "error" and pg.status == "error":
        return "identical" if shoal.sqlstate == pg.sqlstate else "sqlstate"
    if shoal.status == "error":
        return "rejects-valid"
    if pg.status == "error":
        return "accepts-invalid"
    if len(shoal.names) != len(pg.names):
        return "columns"
    if ordered:
        same_rows = shoal.rows == pg.rows
    else:
        same_rows = sorted(shoal.rows, key=sort_key) == sorted(pg.rows, key=sort_key)
    if not same_rows:
        return "rows"
    if shoal.tag != pg.tag:
        return "tag"
    if shoal.types != pg.types:
        return "types"
    if shoal.names != pg.names:
        return "names"
    return "identical"


@dataclass
class CaseResult:
    """The outcome of one case: its verdict and, for a difference, the statement that showed
    it (for a script: its position among the script's statements) and both answers."""
    verdict: str
    statement: str = ""
    index: int = 0
    shoal: Outcome = None
    pg: Outcome = None

    def scale_only(self):
        return self.verdict == "rows" and numeric_scale_only(self.shoal, self.pg)

    def signature(self):
        """What must stay the same while shrinking: the kind, for errors the SQLSTATEs, and for
        rows whether only numeric scales differ (so that shrinking a wrong value does not end
        at a mere scale difference)."""
        codes = tuple(o.sqlstate for o in (self.shoal, self.pg) if o and o.status == "error")
        return self.verdict, codes, self.scale_only()


def run_statements(shoal, pg, statements):
    """Runs (sql, ordered) statements in order on both sessions and returns the first
    non-identical one's CaseResult (a refusal or a difference), else the last one's. Rows are
    compared in order only for statements marked ordered. Leaves both sessions idle."""
    for i, (sql, ordered) in enumerate(statements):
        a, b = shoal.run(sql), pg.run(sql)
        if b.status == "crash":
            raise ConnectionError(f"lost the PostgreSQL connection: {b.message}")
        v = verdict(a, b, ordered)
        result = CaseResult(v, sql, i, a, b)
        if v != "identical":
            break
    if result.verdict != "crash":
        shoal.reset()
    pg.reset()
    return result
