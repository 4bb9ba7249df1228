//! The json parser: PostgreSQL 15's recursive descent (`pg_parse_json` in src/common/jsonapi.c),
//! consuming tokens in the same order so that the first error reported is PostgreSQL's, building
//! a tree whose nodes remember their byte span in the input. json results are cut from the input
//! by those spans, which is how PostgreSQL returns json values: as the text the client wrote.

use std::borrow::Cow;
use std::ops::Range;

use crate::deep_stack::DEPTH_MAX;
use crate::error::JsonError;
use crate::lex::{Failure, Lexer, Token};

/// A parsed json value and where it came from in the input (an empty span for built values).
#[derive(Clone, Debug)]
pub(crate) struct Node<'a> {
    pub(crate) value: Value<'a>,
    pub(crate) span: Range<usize>,
}

#[derive(Clone, Debug)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    /// The number's text: as written for json, PostgreSQL's numeric output for jsonb.
    Number(Cow<'a, str>),
    /// De-escaped content when parsed with escapes decoded, else the text between the quotes.
    String(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    /// Members in input order for json; jsonb's normal form sorts and de-duplicates them.
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

impl<'a> Node<'a> {
    /// A node made by an operation rather than read from input.
    pub(crate) fn built(value: Value<'a>) -> Node<'a> {
        Node { value, span: 0..0 }
    }

    pub(crate) fn is_scalar(&self) -> bool {
        !matches!(self.value, Value::Array(_) | Value::Object(_))
    }
}

/// Where the parser was when it met an unexpected token (`JsonParseContext`).
#[derive(Clone, Copy)]
enum Expecting {
    Value,
    String,
    ArrayNext,
    ObjectStart,
    ObjectLabel,
    ObjectNext,
    End,
}

/// Parses a whole json document. `decode_escapes` is false only where PostgreSQL lexes without
/// de-escaping (json input, `json_array_length`, `json_array_elements`), which skips the
/// surrogate and `\u0000` checks.
pub(crate) fn parse(text: &str, decode_escapes: bool) -> Result<Node<'_>, JsonError> {
    let mut parser = Parser {
        lexer: Lexer::new(text, decode_escapes),
        depth: 0,
    };
    parser.lexer.lex()?;
    let root = parser.parse_value()?;
    parser.expect(Token::End, Expecting::End)?;
    Ok(root)
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn parse_value(&mut self) -> Result<Node<'a>, JsonError> {
        match self.lexer.token() {
            Token::ObjectStart => self.parse_object(),
            Token::ArrayStart => self.parse_array(),
            _ => self.parse_scalar(),
        }
    }

    fn parse_scalar(&mut self) -> Result<Node<'a>, JsonError> {
        let (start, end) = self.lexer.token_span();
        let value = match self.lexer.token() {
            Token::True => Value::Bool(true),
            Token::False => Value::Bool(false),
            Token::Null => Value::Null,
            Token::Number => Value::Number(Cow::Borrowed(self.lexer.token_text())),
            Token::String => Value::String(self.lexer.take_string()),
            _ => return Err(self.report(Expecting::Value)),
        };
        self.lexer.lex()?;
        Ok(Node {
            value,
            span: start..end,
        })
    }

    fn parse_object(&mut self) -> Result<Node<'a>, JsonError> {
        self.enter()?;
        let (start, _) = self.lexer.token_span();
        self.lexer.lex()?;
        let mut members = Vec::new();
        match self.lexer.token() {
            Token::String => loop {
                members.push(self.parse_object_field()?);
                if self.lexer.token() != Token::Comma {
                    break;
                }
                self.lexer.lex()?;
            },
            Token::ObjectEnd => {}
            _ => return Err(self.report(Expecting::ObjectStart)),
        }
        let (_, end) = self.lexer.token_span();
        self.expect(Token::ObjectEnd, Expecting::ObjectNext)?;
        self.depth -= 1;
        Ok(Node {
            value: Value::Object(members),
            span: start..end,
        })
    }

    fn parse_object_field(&mut self) -> Result<(Cow<'a, str>, Node<'a>), JsonError> {
        if self.lexer.token() != Token::String {
            return Err(self.report(Expecting::String));
        }
        let key = self.lexer.take_string();
        self.lexer.lex()?;
        self.expect(Token::Colon, Expecting::ObjectLabel)?;
        let value = self.parse_value()?;
        Ok((key, value))
    }

    fn parse_array(&mut self) -> Result<Node<'a>, JsonError> {
        self.enter()?;
        let (start, _) = self.lexer.token_span();
        self.lexer.lex()?;
        let mut items = Vec::new();
        if self.lexer.token() != Token::ArrayEnd {
            loop {
                items.push(self.parse_value()?);
                if self.lexer.token() != Token::Comma {
                    break;
                }
                self.lexer.lex()?;
            }
        }
        let (_, end) = self.lexer.token_span();
        self.expect(Token::ArrayEnd, Expecting::ArrayNext)?;
        self.depth -= 1;
        Ok(Node {
            value: Value::Array(items),
            span: start..end,
        })
    }

    /// PostgreSQL checks the stack on entering each object or array; we count levels instead.
    fn enter(&mut self) -> Result<(), JsonError> {
        self.depth += 1;
        if self.depth > DEPTH_MAX {
            return Err(JsonError::stack_depth_exceeded());
        }
        Ok(())
    }

    fn expect(&mut self, token: Token, expecting: Expecting) -> Result<(), JsonError> {
        if self.lexer.token() != token {
            return Err(self.report(expecting));
        }
        self.lexer.lex()
    }

    /// `report_parse_error`: running out of input wins over what was expected.
    fn report(&self, expecting: Expecting) -> JsonError {
        let failure = if self.lexer.token() == Token::End {
            Failure::ExpectedMore
        } else {
            match expecting {
                Expecting::Value => Failure::ExpectedJson,
                Expecting::String => Failure::ExpectedString,
                Expecting::ArrayNext => Failure::ExpectedArrayNext,
                Expecting::ObjectStart => Failure::ExpectedObjectFirst,
                Expecting::ObjectLabel => Failure::ExpectedColon,
                Expecting::ObjectNext => Failure::ExpectedObjectNext,
                Expecting::End => Failure::ExpectedEnd,
            }
        };
        self.lexer.error(failure)
    }
}
