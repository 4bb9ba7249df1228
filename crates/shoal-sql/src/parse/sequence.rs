//! The parser's rewrites of sequence statements and options (see the module comment of
//! `parse`): sequence options in any order, `ALTER SEQUENCE`, which sqlparser does not read, and
//! the `SEQUENCE NAME` option of an identity column added by ALTER TABLE (pg_dump writes it).

use datafusion::sql::sqlparser::ast::{self, Statement};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::{keyword_of, marker, significant};

/// The setting name an ALTER SEQUENCE statement is parsed as (see `rewrite_alter_sequence`).
pub const ALTER_SEQUENCE_VARIABLE: &str = "shoal_alter_sequence";

/// The `ALTER TABLE ... SET (option)` that carries the `SEQUENCE NAME` of `ADD GENERATED ... AS
/// IDENTITY (SEQUENCE NAME name ...)`, as a string.
pub const IDENTITY_SEQUENCE_OPTION: &str = "shoal_identity_sequence";

/// `ALTER SEQUENCE ...`, which sqlparser does not read, becomes `SET shoal_alter_sequence =
/// '<the statement>'` ([`ALTER_SEQUENCE_VARIABLE`]); the DDL executor reads the text back.
pub(super) fn rewrite_alter_sequence(seg: &mut Vec<TokenWithSpan>) -> bool {
    let sig = significant(seg);
    if sig.get(1).map(|&i| keyword_of(&seg[i])) != Some(Keyword::SEQUENCE) {
        return false;
    }
    let text: String = seg.iter().map(|t| t.token.to_string()).collect();
    *seg = super::set_of_text(ALTER_SEQUENCE_VARIABLE, text.trim().to_string());
    true
}

/// Takes `SEQUENCE NAME name` out of the identity options of an `ALTER TABLE` and returns the
/// name's text, for the note that hands it to the executor (see `add_identity_sequence`).
pub(super) fn strip_identity_sequence_name(seg: &mut [TokenWithSpan]) -> Option<String> {
    let sig = significant(seg);
    if sig.get(1).map(|&i| keyword_of(&seg[i])) != Some(Keyword::TABLE) {
        return None;
    }
    let in_identity = (0..sig.len().saturating_sub(2)).find(|&p| {
        keyword_of(&seg[sig[p]]) == Keyword::AS
            && keyword_of(&seg[sig[p + 1]]) == Keyword::IDENTITY
            && seg[sig[p + 2]].token == Token::LParen
    })?;
    let p = (in_identity + 3..sig.len().saturating_sub(2)).find(|&p| {
        keyword_of(&seg[sig[p]]) == Keyword::SEQUENCE
            && matches!(&seg[sig[p + 1]].token, Token::Word(w)
                if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("name"))
    })?;
    let end = skip_name(seg, &sig, p + 2);
    if end == p + 2 {
        return None;
    }
    let name: String = (p + 2..end)
        .map(|q| seg[sig[q]].token.to_string())
        .collect();
    for t in &mut seg[sig[p]..sig[end - 1] + 1] {
        *t = marker();
    }
    Some(name)
}

/// Hands the `SEQUENCE NAME` taken out by `strip_identity_sequence_name` to the ALTER TABLE
/// executor as a last `SET (shoal_identity_sequence = 'name')` operation.
pub(super) fn add_identity_sequence(stmt: &mut Statement, name: String) {
    if let Statement::AlterTable(alter) = stmt {
        alter
            .operations
            .push(ast::AlterTableOperation::SetOptionsParens {
                options: vec![ast::SqlOption::KeyValue {
                    key: ast::Ident::new(IDENTITY_SEQUENCE_OPTION),
                    value: ast::Expr::value(ast::Value::SingleQuotedString(name)),
                }],
            });
    }
}

/// `CREATE [TEMP] SEQUENCE [IF NOT EXISTS] name [AS type] options...`
pub(super) fn reorder_create_sequence(seg: &mut Vec<TokenWithSpan>) -> bool {
    let sig = significant(seg);
    let kw = |p: usize| {
        sig.get(p)
            .map_or(Keyword::NoKeyword, |&i| keyword_of(&seg[i]))
    };
    let mut p = 1;
    if matches!(
        kw(p),
        Keyword::TEMP | Keyword::TEMPORARY | Keyword::UNLOGGED
    ) {
        p += 1;
    }
    if kw(p) != Keyword::SEQUENCE {
        return false;
    }
    p += 1;
    if kw(p) == Keyword::IF && kw(p + 1) == Keyword::NOT && kw(p + 2) == Keyword::EXISTS {
        p += 3;
    }
    p = skip_name(seg, &sig, p);
    reorder_sequence_options(seg, &sig, p, sig.len())
}

/// `AS IDENTITY ( options )` anywhere in a statement.
pub(super) fn reorder_identity_options(seg: &mut Vec<TokenWithSpan>) -> bool {
    let mut changed = false;
    let mut from = 0;
    loop {
        // Again after each reordering, which drops white space: the significant tokens keep
        // their positions among themselves, not in `seg`.
        let sig = significant(seg);
        let Some(p) = (from..sig.len().saturating_sub(2)).find(|&p| {
            keyword_of(&seg[sig[p]]) == Keyword::AS
                && keyword_of(&seg[sig[p + 1]]) == Keyword::IDENTITY
                && seg[sig[p + 2]].token == Token::LParen
        }) else {
            return changed;
        };
        if let Some(close) = (p + 3..sig.len()).find(|&q| seg[sig[q]].token == Token::RParen) {
            changed |= reorder_sequence_options(seg, &sig, p + 3, close);
        }
        from = p + 3;
    }
}

/// A possibly qualified name starting at significant position `p`; returns the position after.
pub(super) fn skip_name(seg: &[TokenWithSpan], sig: &[usize], mut p: usize) -> usize {
    while p < sig.len() && matches!(seg[sig[p]].token, Token::Word(_)) {
        p += 1;
        if p < sig.len() && seg[sig[p]].token == Token::Period {
            p += 1;
        } else {
            break;
        }
    }
    p
}

/// Sorts the sequence options between significant positions `from` and `to` into sqlparser's
/// order. Leaves the tokens alone (false) when they are in order already or when an option is
/// one this does not know, so that sqlparser reports the error.
fn reorder_sequence_options(
    seg: &mut Vec<TokenWithSpan>,
    sig: &[usize],
    from: usize,
    to: usize,
) -> bool {
    let mut options = Vec::new();
    let mut p = from;
    while p < to {
        let Some((rank, next)) = sequence_option(seg, sig, p, to) else {
            return false;
        };
        options.push((rank, p, next));
        p = next;
    }
    if options.windows(2).all(|w| w[0].0 <= w[1].0) {
        return false;
    }
    options.sort_by_key(|o| o.0);
    let mut reordered = Vec::new();
    for &(_, start, end) in &options {
        reordered.extend(seg[sig[start]..=sig[end - 1]].iter().cloned());
    }
    let range = sig[from]..=sig[to - 1];
    seg.splice(range, reordered);
    true
}

/// The sort rank of the sequence option at significant position `p` and the position after it.
fn sequence_option(
    seg: &[TokenWithSpan],
    sig: &[usize],
    p: usize,
    to: usize,
) -> Option<(u8, usize)> {
    let kw = |q: usize| {
        if q < to {
            keyword_of(&seg[sig[q]])
        } else {
            Keyword::NoKeyword
        }
    };
    let number = |q: usize| -> Option<usize> {
        let q = if q < to && matches!(seg[sig[q]].token, Token::Minus | Token::Plus) {
            q + 1
        } else {
            q
        };
        (q < to && matches!(seg[sig[q]].token, Token::Number(..))).then_some(q + 1)
    };
    let optional = |q: usize, k: Keyword| if kw(q) == k { q + 1 } else { q };
    Some(match kw(p) {
        // The type of a sequence is one word: smallint, integer, bigint or an alias.
        Keyword::AS if p + 1 < to => (0, p + 2),
        Keyword::INCREMENT => (1, number(optional(p + 1, Keyword::BY))?),
        Keyword::MINVALUE => (2, number(p + 1)?),
        Keyword::MAXVALUE => (3, number(p + 1)?),
        Keyword::NO if kw(p + 1) == Keyword::MINVALUE => (2, p + 2),
        Keyword::NO if kw(p + 1) == Keyword::MAXVALUE => (3, p + 2),
        Keyword::START => (4, number(optional(p + 1, Keyword::WITH))?),
        Keyword::CACHE => (5, number(p + 1)?),
        Keyword::NO if kw(p + 1) == Keyword::CYCLE => (6, p + 2),
        Keyword::CYCLE => (6, p + 1),
        Keyword::OWNED if kw(p + 1) == Keyword::BY => {
            let end = skip_name(seg, sig, p + 2);
            (end > p + 2).then_some((7, end.min(to)))?
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_options_of_several_columns_are_reordered() {
        let sql =
            "CREATE TABLE t (a int GENERATED ALWAYS AS IDENTITY (START WITH 5 INCREMENT BY 2), \
                   b int GENERATED BY DEFAULT AS IDENTITY (CACHE 1 START 3 INCREMENT 4), c text)";
        let parsed = crate::parse::parse_statements(sql).expect("parses");
        let text = parsed[0].to_string();
        assert!(text.contains("INCREMENT BY 2 START WITH 5"), "{text}");
        assert!(text.contains("INCREMENT 4 START 3 CACHE 1"), "{text}");
    }

    #[test]
    fn sequence_name_of_an_added_identity_becomes_an_option() {
        let sql = "ALTER TABLE public.t ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (\n    \
                   SEQUENCE NAME public.t_ids\n    START WITH 1\n    INCREMENT BY 1\n    CACHE 1\n)";
        let parsed = crate::parse::parse_statements(sql).expect("parses");
        let Statement::AlterTable(alter) = &parsed[0] else {
            panic!("an ALTER TABLE: {:?}", parsed[0]);
        };
        let last = alter.operations.last().expect("operations").to_string();
        assert_eq!(
            last,
            format!("SET ({IDENTITY_SEQUENCE_OPTION} = 'public.t_ids')")
        );
        assert_eq!(alter.operations.len(), 2);
    }

    #[test]
    fn alter_sequence_is_carried_as_text() {
        let sql = "ALTER SEQUENCE public.s OWNED BY public.t.id";
        let parsed = crate::parse::parse_statements(sql).expect("parses");
        assert_eq!(
            parsed[0].to_string(),
            format!("SET {ALTER_SEQUENCE_VARIABLE} = '{sql}'")
        );
    }
}
