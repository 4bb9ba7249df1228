//! The json lexer, a transcription of PostgreSQL 15's `json_lex` (src/common/jsonapi.c). It keeps
//! PostgreSQL's token boundaries, line counting and failure kinds exactly, because the DETAIL and
//! CONTEXT lines of every input error are cut from the input at those boundaries.

use std::borrow::Cow;

use crate::error::JsonError;

/// A json token, as `JsonTokenType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Token {
    ObjectStart,
    ObjectEnd,
    ArrayStart,
    ArrayEnd,
    Comma,
    Colon,
    String,
    Number,
    True,
    False,
    Null,
    End,
}

/// Why the input was rejected, as `JsonParseErrorType`; each maps to one DETAIL text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    InvalidToken,
    EscapingInvalid,
    EscapingRequired,
    UnicodeEscapeFormat,
    UnicodeHighSurrogate,
    UnicodeLowSurrogate,
    CodePointZero,
    ExpectedMore,
    ExpectedEnd,
    ExpectedJson,
    ExpectedString,
    ExpectedArrayNext,
    ExpectedColon,
    ExpectedObjectFirst,
    ExpectedObjectNext,
}

/// Longest excerpt of the input the CONTEXT line shows before the failing token's end.
const CONTEXT_BYTES_MAX: usize = 50;

pub(crate) struct Lexer<'a> {
    input: &'a str,
    token_start: usize,
    token_terminator: usize,
    token: Token,
    line_number: usize,
    line_start: usize,
    /// Whether string tokens are de-escaped (and so checked for surrogates and `\u0000`). json's
    /// input function does not; the json processing functions and jsonb do.
    decode_escapes: bool,
    string_value: Cow<'a, str>,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(input: &'a str, decode_escapes: bool) -> Lexer<'a> {
        Lexer {
            input,
            token_start: 0,
            token_terminator: 0,
            token: Token::End,
            line_number: 1,
            line_start: 0,
            decode_escapes,
            string_value: Cow::Borrowed(""),
        }
    }

    pub(crate) fn token(&self) -> Token {
        self.token
    }

    /// Byte offsets of the current token in the input.
    pub(crate) fn token_span(&self) -> (usize, usize) {
        (self.token_start, self.token_terminator)
    }

    pub(crate) fn token_text(&self) -> &'a str {
        &self.input[self.token_start..self.token_terminator]
    }

    /// The current string token's value: de-escaped when decoding, else the text between quotes.
    pub(crate) fn take_string(&mut self) -> Cow<'a, str> {
        std::mem::replace(&mut self.string_value, Cow::Borrowed(""))
    }

    /// Advances to the next token.
    pub(crate) fn lex(&mut self) -> Result<(), JsonError> {
        let bytes = self.input.as_bytes();
        let mut s = self.token_terminator;
        while s < bytes.len() && matches!(bytes[s], b' ' | b'\t' | b'\n' | b'\r') {
            if bytes[s] == b'\n' {
                self.line_number += 1;
                self.line_start = s + 1;
            }
            s += 1;
        }
        self.token_start = s;
        if s >= bytes.len() {
            self.token = Token::End;
            self.token_terminator = s;
            return Ok(());
        }
        let punctuation = match bytes[s] {
            b'{' => Some(Token::ObjectStart),
            b'}' => Some(Token::ObjectEnd),
            b'[' => Some(Token::ArrayStart),
            b']' => Some(Token::ArrayEnd),
            b',' => Some(Token::Comma),
            b':' => Some(Token::Colon),
            _ => None,
        };
        if let Some(token) = punctuation {
            self.token = token;
            self.token_terminator = s + 1;
            return Ok(());
        }
        match bytes[s] {
            b'"' => {
                self.lex_string(s)?;
                self.token = Token::String;
            }
            b'-' => {
                self.lex_number(s + 1)?;
                self.token = Token::Number;
            }
            b'0'..=b'9' => {
                self.lex_number(s)?;
                self.token = Token::Number;
            }
            _ => self.lex_word(s)?,
        }
        Ok(())
    }

    /// `true`, `false` or `null`. Any other run of letters and digits is reported whole, so the
    /// DETAIL names the word the user wrote rather than a prefix of it.
    fn lex_word(&mut self, start: usize) -> Result<(), JsonError> {
        let bytes = self.input.as_bytes();
        let mut end = start;
        while end < bytes.len() && is_json_alphanumeric(bytes[end]) {
            end += 1;
        }
        if end == start {
            // A lone unexpected punctuation byte; never a multibyte character, as those count
            // as alphanumeric above.
            return Err(self.fail_at(Failure::InvalidToken, start + 1));
        }
        self.token_terminator = end;
        self.token = match &bytes[start..end] {
            b"true" => Token::True,
            b"false" => Token::False,
            b"null" => Token::Null,
            _ => return Err(self.error(Failure::InvalidToken)),
        };
        Ok(())
    }

    /// `json_lex_number`: the grammar is checked to the end, then trailing letters and digits
    /// are swallowed into the token so `01x` is reported as one bad token.
    fn lex_number(&mut self, digits_start: usize) -> Result<(), JsonError> {
        let bytes = self.input.as_bytes();
        let len = bytes.len();
        let is_digit = |i: usize| i < len && bytes[i].is_ascii_digit();
        let mut s = digits_start;
        let mut error = false;
        if s < len && bytes[s] == b'0' {
            s += 1;
        } else if s < len && (b'1'..=b'9').contains(&bytes[s]) {
            while is_digit(s) {
                s += 1;
            }
        } else {
            error = true;
        }
        if s < len && bytes[s] == b'.' {
            s += 1;
            if !is_digit(s) {
                error = true;
            }
            while is_digit(s) {
                s += 1;
            }
        }
        if s < len && (bytes[s] == b'e' || bytes[s] == b'E') {
            s += 1;
            if s < len && (bytes[s] == b'+' || bytes[s] == b'-') {
                s += 1;
            }
            if !is_digit(s) {
                error = true;
            }
            while is_digit(s) {
                s += 1;
            }
        }
        while s < len && is_json_alphanumeric(bytes[s]) {
            error = true;
            s += 1;
        }
        self.token_terminator = s;
        if error {
            return Err(self.error(Failure::InvalidToken));
        }
        Ok(())
    }

    /// `json_lex_string`, including its de-escaping and surrogate-pair rules when decoding.
    fn lex_string(&mut self, start: usize) -> Result<(), JsonError> {
        let bytes = self.input.as_bytes();
        let decode = self.decode_escapes;
        let mut decoded = Unescaped::default();
        let mut run_start = start + 1;
        let mut s = start;
        loop {
            s += 1;
            if s >= bytes.len() {
                return Err(self.fail_at(Failure::InvalidToken, s));
            }
            let byte = bytes[s];
            if byte == b'"' {
                break;
            }
            if byte < 0x20 {
                // The unprintable byte itself is left out of the CONTEXT line.
                return Err(self.fail_at(Failure::EscapingRequired, s));
            }
            if byte != b'\\' {
                if decode && decoded.high_surrogate.is_some() {
                    return Err(self.fail_at_char_end(Failure::UnicodeLowSurrogate, s));
                }
                continue;
            }
            if decode {
                decoded.text().push_str(&self.input[run_start..s]);
            }
            s = self.lex_escape(s + 1, &mut decoded)?;
            run_start = s + 1;
        }
        if decode && decoded.high_surrogate.is_some() {
            return Err(self.fail_at_char_end(Failure::UnicodeLowSurrogate, s));
        }
        self.string_value = match decoded.text {
            Some(mut text) => {
                text.push_str(&self.input[run_start..s]);
                Cow::Owned(text)
            }
            None => Cow::Borrowed(&self.input[start + 1..s]),
        };
        self.token_terminator = s + 1;
        Ok(())
    }

    /// One escape sequence whose letter is at `s`; returns the position of its last byte.
    fn lex_escape(&mut self, mut s: usize, decoded: &mut Unescaped) -> Result<usize, JsonError> {
        let bytes = self.input.as_bytes();
        if s >= bytes.len() {
            return Err(self.fail_at(Failure::InvalidToken, s));
        }
        if bytes[s] == b'u' {
            let mut code: u32 = 0;
            for _ in 0..4 {
                s += 1;
                if s >= bytes.len() {
                    return Err(self.fail_at(Failure::InvalidToken, s));
                }
                match (bytes[s] as char).to_digit(16) {
                    Some(digit) => code = code * 16 + digit,
                    None => return Err(self.fail_at_char_end(Failure::UnicodeEscapeFormat, s)),
                }
            }
            if self.decode_escapes {
                self.push_code_unit(code, s, decoded)?;
            }
            return Ok(s);
        }
        if self.decode_escapes && decoded.high_surrogate.is_some() {
            return Err(self.fail_at_char_end(Failure::UnicodeLowSurrogate, s));
        }
        let unescaped = match bytes[s] {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            _ => {
                self.token_start = s;
                return Err(self.fail_at_char_end(Failure::EscapingInvalid, s));
            }
        };
        if self.decode_escapes {
            decoded.text().push(unescaped);
        }
        Ok(s)
    }

    /// Adds the UTF-16 code unit of a `\uXXXX` escape ending at `s`, pairing surrogates.
    fn push_code_unit(
        &mut self,
        mut code: u32,
        s: usize,
        decoded: &mut Unescaped,
    ) -> Result<(), JsonError> {
        if (0xD800..=0xDBFF).contains(&code) {
            if decoded.high_surrogate.is_some() {
                return Err(self.fail_at_char_end(Failure::UnicodeHighSurrogate, s));
            }
            decoded.high_surrogate = Some(code);
            return Ok(());
        }
        if (0xDC00..=0xDFFF).contains(&code) {
            let Some(high) = decoded.high_surrogate.take() else {
                return Err(self.fail_at_char_end(Failure::UnicodeLowSurrogate, s));
            };
            code = 0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00);
        }
        if decoded.high_surrogate.is_some() {
            return Err(self.fail_at_char_end(Failure::UnicodeLowSurrogate, s));
        }
        if code == 0 {
            // text cannot hold NUL, so neither can a de-escaped json string.
            return Err(self.fail_at_char_end(Failure::CodePointZero, s));
        }
        let ch = char::from_u32(code).expect("surrogates were paired above");
        decoded.text().push(ch);
        Ok(())
    }

    /// PostgreSQL's FAIL_AT_CHAR_START: the failing token ends before byte `at`.
    fn fail_at(&mut self, failure: Failure, at: usize) -> JsonError {
        self.token_terminator = at;
        self.error(failure)
    }

    /// PostgreSQL's FAIL_AT_CHAR_END: the failing token ends after the character at `at`.
    fn fail_at_char_end(&mut self, failure: Failure, at: usize) -> JsonError {
        let width = self.input[at..].chars().next().map_or(1, char::len_utf8);
        self.fail_at(failure, at + width)
    }

    /// The error for `failure` at the current token, as `json_ereport_error` words it.
    pub(crate) fn error(&self, failure: Failure) -> JsonError {
        let token = &self.input[self.token_start..self.token_terminator];
        let detail = match failure {
            Failure::InvalidToken => format!("Token \"{token}\" is invalid."),
            Failure::EscapingInvalid => format!("Escape sequence \"\\{token}\" is invalid."),
            Failure::EscapingRequired => format!(
                "Character with value 0x{:02x} must be escaped.",
                self.input.as_bytes()[self.token_terminator]
            ),
            Failure::UnicodeEscapeFormat => {
                "\"\\u\" must be followed by four hexadecimal digits.".to_string()
            }
            Failure::UnicodeHighSurrogate => {
                "Unicode high surrogate must not follow a high surrogate.".to_string()
            }
            Failure::UnicodeLowSurrogate => {
                "Unicode low surrogate must follow a high surrogate.".to_string()
            }
            Failure::CodePointZero => "\\u0000 cannot be converted to text.".to_string(),
            Failure::ExpectedMore => "The input string ended unexpectedly.".to_string(),
            Failure::ExpectedEnd => format!("Expected end of input, but found \"{token}\"."),
            Failure::ExpectedJson => format!("Expected JSON value, but found \"{token}\"."),
            Failure::ExpectedString => format!("Expected string, but found \"{token}\"."),
            Failure::ExpectedArrayNext => {
                format!("Expected \",\" or \"]\", but found \"{token}\".")
            }
            Failure::ExpectedColon => format!("Expected \":\", but found \"{token}\"."),
            Failure::ExpectedObjectFirst => {
                format!("Expected string or \"}}\", but found \"{token}\".")
            }
            Failure::ExpectedObjectNext => {
                format!("Expected \",\" or \"}}\", but found \"{token}\".")
            }
        };
        let error = if failure == Failure::CodePointZero {
            JsonError::new("22P05", "unsupported Unicode escape sequence")
        } else {
            JsonError::new("22P02", "invalid input syntax for type json")
        };
        error.with_detail(detail).with_context(self.context_line())
    }

    /// `report_json_context`: the current line up to the failing token's end, cut to about 50
    /// bytes, with "..." where the excerpt does not reach the line's start or end.
    fn context_line(&self) -> String {
        let bytes = self.input.as_bytes();
        let line_start = self.line_start;
        let context_end = self.token_terminator;
        let mut context_start = line_start;
        while context_end - context_start >= CONTEXT_BYTES_MAX {
            let width = self.input[context_start..]
                .chars()
                .next()
                .map_or(1, char::len_utf8);
            context_start += width;
        }
        if context_start - line_start <= 3 {
            context_start = line_start;
        }
        let prefix = if context_start > line_start {
            "..."
        } else {
            ""
        };
        let suffix = if context_end < bytes.len()
            && bytes[context_end] != b'\n'
            && bytes[context_end] != b'\r'
        {
            "..."
        } else {
            ""
        };
        format!(
            "JSON data, line {}: {prefix}{}{suffix}",
            self.line_number,
            &self.input[context_start..context_end]
        )
    }
}

/// A string token's de-escaped text, built only once an escape is met.
#[derive(Default)]
struct Unescaped {
    text: Option<String>,
    /// A `\uD800`-`\uDBFF` escape waiting for its low half.
    high_surrogate: Option<u32>,
}

impl Unescaped {
    fn text(&mut self) -> &mut String {
        self.text.get_or_insert_with(String::new)
    }
}

/// `JSON_ALPHANUMERIC_CHAR`: letters, digits, underscore and any byte of a multibyte character.
fn is_json_alphanumeric(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte >= 0x80
}
