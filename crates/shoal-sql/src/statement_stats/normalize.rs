//! The text and id under which pg_stat_statements counts a statement, as PostgreSQL 15 forms
//! them. For a query (SELECT, INSERT, UPDATE, DELETE, VALUES, TABLE, MERGE, WITH) each
//! constant becomes a parameter numbered after the statement's own (`WHERE a = 5` reads
//! `WHERE a = $1`), so executions that differ only in their constants share one entry; the
//! id hashes the statement's tokens with the constants' kinds, so case and spacing do not
//! matter. What PostgreSQL does not count as a constant stays: type modifiers
//! (`numeric(10,2)`), ordinals in ORDER BY and GROUP BY, and NULL or a boolean after IS.
//! Any other statement (utility statements: DDL, SET, BEGIN) keeps its text, and its id
//! hashes that text.
//!
//! PostgreSQL works on the parse tree; this works on the tokens, so it differs where the two
//! part: two texts that parse to the same tree but differ in tokens (`a=1` and `(a)=1`) are
//! two entries here.

use std::hash::{Hash, Hasher};

use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::parse::location_offsets;

/// A statement as pg_stat_statements shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NormalizedStatement {
    pub queryid: i64,
    pub text: String,
    /// A utility statement: not a query, its text kept as it was.
    pub utility: bool,
}

impl NormalizedStatement {
    /// Whether pg_stat_statements counts the statement: not PREPARE and DEALLOCATE (an
    /// EXECUTE is counted as the prepared query), as PostgreSQL's does not.
    pub fn counted(&self) -> bool {
        let first = self.text.split_whitespace().next().unwrap_or("");
        !(self.utility
            && (first.eq_ignore_ascii_case("prepare") || first.eq_ignore_ascii_case("deallocate")))
    }
}

/// The statement `sql` (one statement, as the client sent it) as pg_stat_statements counts it.
pub fn normalize(sql: &str) -> NormalizedStatement {
    let sql = trim_statement(sql);
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
        .with_unescape(false)
        .tokenize_with_location();
    let Ok(tokens) = tokens else {
        return utility(sql);
    };
    let significant: Vec<&TokenWithSpan> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
        .collect();
    let offset = location_offsets(sql);
    // Comments before the statement's first token are not part of it.
    let Some(first) = significant.first().and_then(|t| offset(t.span.start)) else {
        return utility(sql);
    };
    if !is_query(&significant) {
        return utility(&sql[first..]);
    }
    let mut next_param = significant
        .iter()
        .filter_map(|t| match &t.token {
            Token::Placeholder(p) => p.strip_prefix('$')?.parse::<u32>().ok(),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let constants = constants(&significant);
    let mut text = String::with_capacity(sql.len());
    let mut copied_to = first;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut constant_at = constants.iter().peekable();
    let mut i = 0;
    while i < significant.len() {
        let token = significant[i];
        if let Some(&&(start, len, kind)) = constant_at.peek() {
            if start == i {
                constant_at.next();
                let (Some(from), Some(to)) = (
                    offset(token.span.start),
                    offset(significant[i + len - 1].span.end),
                ) else {
                    return utility(sql);
                };
                next_param += 1;
                text.push_str(&sql[copied_to..from]);
                text.push_str(&format!("${next_param}"));
                copied_to = to;
                ("$const", kind).hash(&mut hasher);
                i += len;
                continue;
            }
        }
        hash_token(&token.token, &mut hasher);
        i += 1;
    }
    text.push_str(&sql[copied_to..]);
    NormalizedStatement {
        queryid: hasher.finish() as i64,
        text,
        utility: false,
    }
}

/// The statement's text as pg_stat_statements keeps it: without surrounding whitespace and
/// the semicolons that end it.
pub fn trim_statement(sql: &str) -> &str {
    let mut sql = sql.trim();
    while let Some(rest) = sql.strip_suffix(';') {
        sql = rest.trim_end();
    }
    sql
}

/// The statements of a query string, each as its own text (without the semicolon); None when
/// the text does not tokenize.
pub fn split_statements(sql: &str) -> Option<Vec<&str>> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
        .with_unescape(false)
        .tokenize_with_location()
        .ok()?;
    let offset = location_offsets(sql);
    let mut pieces = Vec::new();
    // Where the statement being read starts: its first token (comments before it are not
    // part of it, those after it are, as PostgreSQL cuts statements).
    let mut start: Option<usize> = None;
    for t in &tokens {
        match &t.token {
            Token::SemiColon | Token::EOF => {
                if let Some(from) = start.take() {
                    let to = match t.token {
                        Token::EOF => sql.len(),
                        _ => offset(t.span.start)?,
                    };
                    pieces.push(sql[from..to].trim_end());
                }
            }
            Token::Whitespace(_) => {}
            _ => {
                if start.is_none() {
                    start = Some(offset(t.span.start)?);
                }
            }
        }
    }
    if let Some(from) = start {
        pieces.push(sql[from..].trim_end());
    }
    Some(pieces)
}

fn utility(sql: &str) -> NormalizedStatement {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    ("utility", sql).hash(&mut hasher);
    NormalizedStatement {
        queryid: hasher.finish() as i64,
        text: sql.to_string(),
        utility: true,
    }
}

fn is_query(tokens: &[&TokenWithSpan]) -> bool {
    match tokens.first().map(|t| &t.token) {
        Some(Token::LParen) => true,
        Some(Token::Word(w)) => matches!(
            w.keyword,
            Keyword::SELECT
                | Keyword::INSERT
                | Keyword::UPDATE
                | Keyword::DELETE
                | Keyword::VALUES
                | Keyword::TABLE
                | Keyword::MERGE
                | Keyword::WITH
        ),
        _ => false,
    }
}

/// What kind of constant a token is; None for other tokens.
fn constant_kind(token: &Token) -> Option<&'static str> {
    Some(match token {
        Token::Number(n, _) if n.contains(['.', 'e', 'E']) => "numeric",
        Token::Number(..) => "integer",
        Token::SingleQuotedString(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::NationalStringLiteral(_)
        | Token::DollarQuotedString(_) => "string",
        Token::HexStringLiteral(_) => "bits",
        Token::Word(w) if w.quote_style.is_none() => match w.keyword {
            Keyword::TRUE | Keyword::FALSE => "boolean",
            Keyword::NULL => "null",
            _ => return None,
        },
        _ => return None,
    })
}

/// The constants among `tokens`: (index of the first token, tokens it spans, kind), in order.
/// A minus sign before a number is part of it where it cannot be a subtraction.
fn constants(tokens: &[&TokenWithSpan]) -> Vec<(usize, usize, &'static str)> {
    let mut found = Vec::new();
    // Parenthesis depths at which a type's modifiers are open (`numeric(` at depth 0 → 1).
    let mut typmod_depths: Vec<usize> = Vec::new();
    // The depth of an ORDER BY or GROUP BY list being read, if any.
    let mut by_list: Option<usize> = None;
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i].token;
        let previous = i.checked_sub(1).map(|p| &tokens[p].token);
        let next = tokens.get(i + 1).map(|t| &t.token);
        match token {
            Token::LParen => {
                depth += 1;
                if previous.is_some_and(is_type_name) {
                    typmod_depths.push(depth);
                }
            }
            Token::RParen => {
                if typmod_depths.last() == Some(&depth) {
                    typmod_depths.pop();
                }
                if by_list.is_some_and(|d| d >= depth) {
                    by_list = None;
                }
                depth = depth.saturating_sub(1);
            }
            Token::Word(w) if w.keyword == Keyword::BY => by_list = Some(depth),
            Token::Word(w)
                if by_list == Some(depth)
                    && w.quote_style.is_none()
                    && !matches!(
                        w.keyword,
                        Keyword::ASC | Keyword::DESC | Keyword::NULLS | Keyword::FIRST
                    )
                    && w.keyword != Keyword::LAST
                    && w.keyword != Keyword::NoKeyword =>
            {
                by_list = None
            }
            _ => {}
        }
        let in_typmod = typmod_depths.last() == Some(&depth);
        let ordinal = by_list == Some(depth)
            && matches!(previous, Some(Token::Comma) | Some(Token::Word(_)))
            && matches!(token, Token::Number(..))
            && next.is_none_or(ends_by_item);
        let after_is = matches!(previous, Some(Token::Word(w)) if w.keyword == Keyword::IS)
            || matches!(
                (i.checked_sub(2).map(|p| &tokens[p].token), previous),
                (Some(Token::Word(is)), Some(Token::Word(not)))
                    if is.keyword == Keyword::IS && not.keyword == Keyword::NOT
            );
        if let Some(kind) = constant_kind(token) {
            let keep = in_typmod || ordinal || (after_is && matches!(kind, "boolean" | "null"));
            if !keep {
                found.push((i, 1, kind));
            }
        } else if matches!(token, Token::Minus)
            && matches!(next, Some(Token::Number(..)))
            && !in_typmod
            && previous.is_none_or(starts_operand)
        {
            let kind = constant_kind(next.expect("matched")).expect("a number");
            found.push((i, 2, kind));
            i += 2;
            continue;
        }
        i += 1;
    }
    found
}

/// Whether an operand may follow `token` (so a minus sign after it negates, not subtracts).
fn starts_operand(token: &Token) -> bool {
    match token {
        Token::Word(w) => {
            w.quote_style.is_none()
                && matches!(
                    w.keyword,
                    Keyword::SELECT
                        | Keyword::WHERE
                        | Keyword::AND
                        | Keyword::OR
                        | Keyword::NOT
                        | Keyword::WHEN
                        | Keyword::THEN
                        | Keyword::ELSE
                        | Keyword::VALUES
                        | Keyword::SET
                        | Keyword::IN
                        | Keyword::BETWEEN
                        | Keyword::LIMIT
                        | Keyword::OFFSET
                        | Keyword::ON
                        | Keyword::HAVING
                        | Keyword::RETURNING
                        | Keyword::CASE
                        | Keyword::LIKE
                        | Keyword::ILIKE
                        | Keyword::DISTINCT
                        | Keyword::ALL
                        | Keyword::ANY
                        | Keyword::SOME
                        | Keyword::BY
                )
        }
        Token::Number(..)
        | Token::SingleQuotedString(_)
        | Token::EscapedStringLiteral(_)
        | Token::DollarQuotedString(_)
        | Token::Placeholder(_)
        | Token::RParen
        | Token::RBracket => false,
        _ => true,
    }
}

/// Whether `token` may end an item of an ORDER BY or GROUP BY list.
fn ends_by_item(token: &Token) -> bool {
    match token {
        Token::Comma | Token::RParen | Token::SemiColon => true,
        Token::Word(w) => w.quote_style.is_none() && w.keyword != Keyword::NoKeyword,
        _ => false,
    }
}

/// Type names whose parenthesized modifiers are not constants.
fn is_type_name(token: &Token) -> bool {
    let Token::Word(w) = token else {
        return false;
    };
    w.quote_style.is_none()
        && matches!(
            w.value.to_ascii_lowercase().as_str(),
            "numeric"
                | "decimal"
                | "dec"
                | "varchar"
                | "char"
                | "character"
                | "varying"
                | "bpchar"
                | "bit"
                | "varbit"
                | "time"
                | "timetz"
                | "timestamp"
                | "timestamptz"
                | "interval"
                | "float"
        )
}

fn hash_token(token: &Token, hasher: &mut impl Hasher) {
    match token {
        Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_lowercase().hash(hasher),
        other => other.to_string().hash(hasher),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(sql: &str) -> String {
        normalize(sql).text
    }

    #[test]
    fn constants_become_parameters_as_in_postgresql() {
        assert_eq!(
            text(
                "SELECT true, NULL, DATE '2020-01-01', interval '1 day', 1.5e3, -2.5, 3 - 1, x'1f'"
            ),
            "SELECT $1, $2, DATE $3, interval $4, $5, $6, $7 - $8, $9"
        );
        assert_eq!(
            text("SELECT a::numeric(10,2), 'abc'::varchar(5) FROM (VALUES (1)) v(a) ORDER BY 1 LIMIT 10 OFFSET 2"),
            "SELECT a::numeric(10,2), $1::varchar(5) FROM (VALUES ($2)) v(a) ORDER BY 1 LIMIT $3 OFFSET $4"
        );
        assert_eq!(
            text("SELECT ARRAY[1,2], '{1,2}'::int[], E'a\\n', $$dollar$$"),
            "SELECT ARRAY[$1,$2], $3::int[], $4, $5"
        );
        assert_eq!(
            text("/* first */ select /* c1 */ 1 -- trailing\n;"),
            "select /* c1 */ $1 -- trailing"
        );
        assert_eq!(
            text("SELECT a FROM t WHERE b IN ('x', 'y') AND a > -5"),
            "SELECT a FROM t WHERE b IN ($1, $2) AND a > $3"
        );
        assert_eq!(
            text("UPDATE t SET b = 'q' WHERE a >= $1 AND c IS NOT NULL;"),
            "UPDATE t SET b = $2 WHERE a >= $1 AND c IS NOT NULL"
        );
    }

    #[test]
    fn spelling_does_not_change_the_id_but_constant_kinds_do() {
        let a = normalize("SELECT * FROM t WHERE a = 1");
        let b = normalize("select *  from T where A = 2");
        assert_eq!(a.queryid, b.queryid);
        assert_ne!(
            a.queryid,
            normalize("SELECT * FROM t WHERE a = 'x'").queryid
        );
        assert_ne!(a.queryid, normalize("SELECT * FROM t WHERE b = 1").queryid);
    }

    #[test]
    fn a_query_string_splits_into_its_statements() {
        assert_eq!(
            split_statements("SELECT 1; /* c */ SELECT ';' -- x\n;\n  BEGIN;;").unwrap(),
            vec!["SELECT 1", "SELECT ';' -- x", "BEGIN"]
        );
    }

    #[test]
    fn utility_statements_keep_their_text() {
        let set = normalize("SET work_mem = '4MB';");
        assert!(set.utility);
        assert_eq!(set.text, "SET work_mem = '4MB'");
        assert_ne!(set.queryid, normalize("SET work_mem = '8MB'").queryid);
        assert!(set.counted());
        assert!(!normalize("PREPARE p AS SELECT 1").counted());
        assert!(!normalize("deallocate all").counted());
    }
}
