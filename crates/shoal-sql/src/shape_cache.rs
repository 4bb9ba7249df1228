//! The simple-protocol statement cache. Clients that do not prepare (pgbench `-M simple`, many
//! ORMs, psql scripts) send the same few statement shapes over and over with different literals
//! in them: `SELECT abalance FROM pgbench_accounts WHERE aid = 48213;`. Parsing and resolving
//! each one again costs more than running it. So before parsing, the text's literals are cut
//! out (`... WHERE aid = $1`), and the fast-path plan of that shape is looked up in a small
//! per-session cache; the literals are then converted to the columns' types exactly as the
//! fast path converts literals, and the plan runs.
//!
//! Anything unusual sends the statement down the ordinary path, which is always correct: text
//! the scanner does not fully understand (comments, `$`, E'' and other prefixed strings, string
//! continuation, several statements), shapes that are not fast-path statements, and literals
//! that do not convert (those then raise PostgreSQL's error on the ordinary path).

use std::collections::HashMap;
use std::sync::Arc;

use shoal_storage::types::Value;

use crate::fastpath::{self, FastPlan, Operand};

/// Shapes remembered per session. When full, the cache starts over: the shapes a client repeats
/// come back at once, and a client that never repeats one costs no more than this.
const MAX_SHAPES: usize = 256;

/// A literal cut out of the statement text.
#[derive(Debug, PartialEq)]
pub(crate) enum Literal<'a> {
    /// A numeric literal's digits; `negative` when a unary minus stood before it.
    Number { digits: &'a str, negative: bool },
    /// A string literal's content, with `''` already turned into `'`.
    String(String),
}

/// Cuts the literals out of a single statement: the text with each literal replaced by `$n`
/// (1-based, in order) and the literals. None when the text holds anything the scanner does not
/// handle exactly (see the module comment).
pub(crate) fn auto_parameterize(sql: &str) -> Option<(String, Vec<Literal<'_>>)> {
    let b = sql.as_bytes();
    let mut shape = String::with_capacity(sql.len() + 8);
    let mut literals = Vec::new();
    let mut copied = 0; // sql[..copied] is in `shape` already
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'$' | b'\\' => return None,
            b'-' if b.get(i + 1) == Some(&b'-') => return None,
            b'/' if b.get(i + 1) == Some(&b'*') => return None,
            b';' => {
                // Only a trailing semicolon: several statements take the ordinary path.
                if !sql[i + 1..].trim().is_empty() {
                    return None;
                }
                shape.push_str(&sql[copied..i]);
                return Some((shape, literals));
            }
            b'"' => i = quoted_end(b, i, b'"')?,
            b'\'' => {
                // E'', B'', X'', N'', U&'' strings have other rules.
                if i > 0 && (is_ident_byte(b[i - 1]) || b[i - 1] == b'&') {
                    return None;
                }
                let end = quoted_end(b, i, b'\'')?;
                // 'a' 'b' on two lines is one string in PostgreSQL.
                if sql[end..].trim_start().starts_with('\'') {
                    return None;
                }
                shape.push_str(&sql[copied..i]);
                literals.push(Literal::String(sql[i + 1..end - 1].replace("''", "'")));
                push_placeholder(&mut shape, literals.len());
                copied = end;
                i = end;
            }
            c if c.is_ascii_digit()
                || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) =>
            {
                let end = number_end(b, i);
                // 0x1F, 1abc: PostgreSQL 15 reads a number then an identifier; leave it be.
                if b.get(end).is_some_and(|&c| is_ident_byte(c) || c == b'.') {
                    return None;
                }
                let minus = unary_minus_before(b, i);
                shape.push_str(&sql[copied..minus.unwrap_or(i)]);
                literals.push(Literal::Number {
                    digits: &sql[i..end],
                    negative: minus.is_some(),
                });
                push_placeholder(&mut shape, literals.len());
                copied = end;
                i = end;
            }
            c if is_ident_byte(c) => {
                // Digits inside a name (t1, pgbench_accounts) are not literals.
                while i < b.len() && (is_ident_byte(b[i]) || b[i].is_ascii_digit()) {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    shape.push_str(&sql[copied..]);
    Some((shape, literals))
}

fn push_placeholder(shape: &mut String, n: usize) {
    use std::fmt::Write;
    write!(shape, "${n}").expect("writing to a String");
}

/// Letters, `_` and every byte of a multi-byte character (PostgreSQL allows those in names).
fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c >= 0x80
}

/// The index just past the quoted token starting at `start` (doubled quotes stay inside).
fn quoted_end(b: &[u8], start: usize, quote: u8) -> Option<usize> {
    let mut i = start + 1;
    loop {
        let at = i + b.get(i..)?.iter().position(|&c| c == quote)?;
        if b.get(at + 1) == Some(&quote) {
            i = at + 2;
        } else {
            return Some(at + 1);
        }
    }
}

/// The end of the numeric literal at `start`: digits, a fraction, an exponent.
fn number_end(b: &[u8], start: usize) -> usize {
    let digits = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut i = digits(start);
    if b.get(i) == Some(&b'.') {
        i = digits(i + 1);
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(i + 1), Some(b'+' | b'-')));
        if b.get(i + 1 + sign).is_some_and(u8::is_ascii_digit) {
            i = digits(i + 1 + sign);
        }
    }
    i
}

/// The position of a `-` before the number at `at` that is a sign rather than a subtraction:
/// the token before the `-` is an operator, `(`, `,` or the start of the text.
fn unary_minus_before(b: &[u8], at: usize) -> Option<usize> {
    let minus = b[..at].iter().rposition(|c| !c.is_ascii_whitespace())?;
    if b[minus] != b'-' {
        return None;
    }
    match b[..minus].iter().rposition(|c| !c.is_ascii_whitespace()) {
        None => Some(minus),
        Some(p) if b"+-*/%^=<>(,".contains(&b[p]) => Some(minus),
        Some(_) => None,
    }
}

/// Fast plans by statement shape, for one session.
#[derive(Default)]
pub(crate) struct ShapeCache {
    shapes: HashMap<String, CachedShape>,
}

struct CachedShape {
    /// The catalog version and settings generation the plan was resolved under: a DDL or a
    /// changed search_path resolves it again.
    catalog_version: u64,
    settings_generation: u64,
    /// None: the shape is not a fast-path statement.
    plan: Option<Arc<FastPlan>>,
}

impl ShapeCache {
    /// How many cached shapes have a fast plan (for tests).
    #[cfg(test)]
    pub(crate) fn fast_shapes(&self) -> usize {
        self.shapes.values().filter(|c| c.plan.is_some()).count()
    }

    /// The cached plan of `shape` if it is still valid: Some(None) for a shape known not to be
    /// fast, None when it must be (re-)planned.
    pub(crate) fn get(
        &self,
        shape: &str,
        catalog_version: u64,
        settings_generation: u64,
    ) -> Option<Option<Arc<FastPlan>>> {
        self.shapes
            .get(shape)
            .filter(|c| {
                c.catalog_version == catalog_version && c.settings_generation == settings_generation
            })
            .map(|c| c.plan.clone())
    }

    pub(crate) fn insert(
        &mut self,
        shape: String,
        catalog_version: u64,
        settings_generation: u64,
        plan: Option<Arc<FastPlan>>,
    ) {
        if self.shapes.len() >= MAX_SHAPES && !self.shapes.contains_key(&shape) {
            self.shapes.clear();
        }
        self.shapes.insert(
            shape,
            CachedShape {
                catalog_version,
                settings_generation,
                plan,
            },
        );
    }
}

/// The literals as values of the columns they meet in `plan`, converted as the fast path
/// converts literals in statement text. None if one does not convert (the ordinary path then
/// handles the statement and reports any error).
pub(crate) fn bind_literals(plan: &FastPlan, literals: &[Literal<'_>]) -> Option<Vec<Value>> {
    literals
        .iter()
        .enumerate()
        .map(|(i, literal)| {
            let t = plan.param_type(i)?;
            let operand = match literal {
                Literal::Number { digits, negative } => fastpath::literal(digits, t, *negative)?,
                Literal::String(s) => Operand::Const(fastpath::string_literal(s, t)?),
            };
            match operand {
                Operand::Const(v) => Some(v),
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(sql: &str) -> Option<String> {
        auto_parameterize(sql).map(|(s, _)| s)
    }

    #[test]
    fn literals_become_numbered_placeholders() {
        let (s, lits) =
            auto_parameterize("UPDATE t1 SET a = a + -12, b = 'it''s' WHERE k = 7.5e3;").unwrap();
        assert_eq!(s, "UPDATE t1 SET a = a + $1, b = $2 WHERE k = $3");
        assert_eq!(
            lits,
            vec![
                Literal::Number {
                    digits: "12",
                    negative: true
                },
                Literal::String("it's".into()),
                Literal::Number {
                    digits: "7.5e3",
                    negative: false
                },
            ]
        );
    }

    #[test]
    fn subtraction_is_not_a_sign() {
        let (s, lits) = auto_parameterize("SELECT a FROM t WHERE k = b - 3").unwrap();
        assert_eq!(s, "SELECT a FROM t WHERE k = b - $1");
        assert!(matches!(
            lits[0],
            Literal::Number {
                negative: false,
                ..
            }
        ));
        // After a keyword the sign stays in the text; such shapes are not fast anyway.
        assert_eq!(shape("SELECT -5").unwrap(), "SELECT -$1");
        assert_eq!(shape("VALUES (1, -5)").unwrap(), "VALUES ($1, $2)");
    }

    #[test]
    fn names_and_quoted_identifiers_keep_their_digits() {
        assert_eq!(
            shape("SELECT \"col 1\" FROM pgbench_accounts2 WHERE x9 = 1").unwrap(),
            "SELECT \"col 1\" FROM pgbench_accounts2 WHERE x9 = $1"
        );
    }

    /// The same shape with other literals runs on the cached plan (no second plan), and a DDL
    /// makes it plan again against the new table.
    #[test]
    fn a_session_reuses_the_plan_of_a_shape_until_the_catalog_changes() {
        // Planning through DataFusion nests deep futures: a debug build needs more than a test
        // thread's default stack, as the server's worker threads have.
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(run_session_scenario)
            .unwrap()
            .join()
            .unwrap();
    }

    fn run_session_scenario() {
        use crate::session::{Session, StatementResult};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut s = Session::new(crate::Engine::new());
            let run = async |s: &mut Session, sql: &str| {
                let mut results = s.execute_sql(sql).await;
                assert_eq!(results.len(), 1, "{sql}");
                results.pop().unwrap().unwrap()
            };
            let rows = |r: StatementResult| match r {
                StatementResult::Rows { batches, .. } => {
                    batches.iter().map(|b| b.num_rows()).sum::<usize>()
                }
                StatementResult::PointRows(p) => p.rows.len(),
                other => panic!("not rows: {other:?}"),
            };
            run(&mut s, "CREATE TABLE t (k int PRIMARY KEY, v text)").await;
            run(&mut s, "INSERT INTO t VALUES (1, 'a')").await;
            run(&mut s, "INSERT INTO t VALUES (2, 'b')").await;
            assert_eq!(s.shape_cache().fast_shapes(), 1);
            assert_eq!(rows(run(&mut s, "SELECT v FROM t WHERE k = 1").await), 1);
            assert_eq!(rows(run(&mut s, "SELECT v FROM t WHERE k = 3").await), 0);
            assert_eq!(s.shape_cache().fast_shapes(), 2);
            run(&mut s, "DROP TABLE t").await;
            run(&mut s, "CREATE TABLE t (k bigint PRIMARY KEY)").await;
            run(&mut s, "INSERT INTO t VALUES (2)").await;
            assert_eq!(rows(run(&mut s, "SELECT k FROM t WHERE k = 2").await), 1);
        });
    }

    #[test]
    fn text_it_cannot_read_exactly_is_left_alone() {
        for sql in [
            "SELECT 1; SELECT 2",
            "SELECT $1",
            "SELECT 1 -- comment",
            "SELECT /* c */ 1",
            "SELECT E'a\\n'",
            "SELECT X'1F'",
            "SELECT U&'a'",
            "SELECT 'a'\n'b'",
            "SELECT 0x1F",
            "SELECT 'unterminated",
            "SELECT \"unterminated",
        ] {
            assert_eq!(shape(sql), None, "{sql}");
        }
    }
}
