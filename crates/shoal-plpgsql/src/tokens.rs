//! The body's tokens, without whitespace and comments, each with where it is in the text (in
//! bytes), so that expressions and statements can be cut out of the text as written.

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Location, Token, Tokenizer};

#[derive(Clone, Debug)]
pub(crate) struct Tok {
    pub token: Token,
    pub start: usize,
    pub end: usize,
}

impl Tok {
    /// The token as an unquoted word, lower-cased; None for quoted identifiers and non-words.
    pub fn word(&self) -> Option<String> {
        match &self.token {
            Token::Word(w) if w.quote_style.is_none() => Some(w.value.to_ascii_lowercase()),
            _ => None,
        }
    }

    pub fn is_word(&self, word: &str) -> bool {
        matches!(&self.token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
    }
}

/// The tokens of `text`, or the tokenizer's complaint.
pub(crate) fn tokenize(text: &str) -> Result<Vec<Tok>, String> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, text)
        .with_unescape(false)
        .tokenize_with_location()
        .map_err(|e| e.to_string())?;
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let offset = |loc: Location| -> usize {
        let Some(&line_start) = (loc.line as usize)
            .checked_sub(1)
            .and_then(|l| line_starts.get(l))
        else {
            return text.len();
        };
        let column = (loc.column as usize).saturating_sub(1);
        text[line_start..]
            .char_indices()
            .nth(column)
            .map_or(text.len(), |(i, _)| line_start + i)
    };
    Ok(tokens
        .into_iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
        .map(|t| Tok {
            start: offset(t.span.start),
            end: offset(t.span.end),
            token: t.token,
        })
        .collect())
}
