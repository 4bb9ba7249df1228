//! The recursive-descent parser of PL/pgSQL bodies (see the crate's comment).

use sqlparser::tokenizer::Token;

use crate::ast::*;
use crate::tokens::{tokenize, Tok};

/// A syntax error, with where in the body it is (bytes from its start).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub message: String,
    pub position: usize,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.position)
    }
}

type Result<T> = std::result::Result<T, ParseError>;

/// Parses the body of a PL/pgSQL function, procedure or DO block: one block, optionally
/// followed by a semicolon.
pub fn parse_body(text: &str) -> Result<Block> {
    let tokens = tokenize(text).map_err(|message| ParseError {
        message,
        position: 0,
    })?;
    let mut p = Parser {
        text,
        tokens,
        pos: 0,
    };
    let label = p.label()?;
    let block = p.block(label)?;
    p.eat(&Token::SemiColon);
    if p.pos < p.tokens.len() {
        return Err(p.error("syntax error at end of function body"));
    }
    Ok(block)
}

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Tok>,
    pos: usize,
}

/// Words that end a list of statements (the caller says which it expects).
const STATEMENT_LIST_ENDS: &[&str] = &["end", "elsif", "elseif", "else", "when", "exception"];

impl Parser<'_> {
    fn error(&self, message: &str) -> ParseError {
        let (position, near) = match self.tokens.get(self.pos) {
            Some(t) => (
                t.start,
                format!(" at or near \"{}\"", self.text[t.start..t.end].trim()),
            ),
            None => (self.text.len(), " at end of input".to_string()),
        };
        ParseError {
            message: format!("{message}{near}"),
            position,
        }
    }

    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos)
    }

    fn peek_word(&self) -> Option<String> {
        self.peek().and_then(Tok::word)
    }

    fn at_word(&self, word: &str) -> bool {
        self.peek().is_some_and(|t| t.is_word(word))
    }

    fn at_words(&self, words: &[&str]) -> bool {
        words
            .iter()
            .enumerate()
            .all(|(i, w)| self.tokens.get(self.pos + i).is_some_and(|t| t.is_word(w)))
    }

    fn eat_word(&mut self, word: &str) -> bool {
        let found = self.at_word(word);
        if found {
            self.pos += 1;
        }
        found
    }

    fn expect_word(&mut self, word: &str) -> Result<()> {
        if self.eat_word(word) {
            return Ok(());
        }
        Err(self.error(&format!("syntax error: expected {}", word.to_uppercase())))
    }

    fn eat(&mut self, token: &Token) -> bool {
        let found = self.peek().is_some_and(|t| &t.token == token);
        if found {
            self.pos += 1;
        }
        found
    }

    fn expect(&mut self, token: &Token) -> Result<()> {
        if self.eat(token) {
            return Ok(());
        }
        Err(self.error(&format!("syntax error: expected \"{token}\"")))
    }

    /// An identifier (quoted or not) as PostgreSQL folds it.
    fn identifier(&mut self) -> Result<String> {
        match self.peek().map(|t| &t.token) {
            Some(Token::Word(w)) => {
                let name = match w.quote_style {
                    Some(_) => w.value.clone(),
                    None => w.value.to_ascii_lowercase(),
                };
                self.pos += 1;
                Ok(name)
            }
            _ => Err(self.error("syntax error: expected a name")),
        }
    }

    /// `<<label>>`, if one is here.
    fn label(&mut self) -> Result<Option<String>> {
        if !self.eat(&Token::ShiftLeft) {
            return Ok(None);
        }
        let label = self.identifier()?;
        self.expect(&Token::ShiftRight)?;
        Ok(Some(label))
    }

    /// An optional label after END / END LOOP, which must match the opening one.
    fn end_label(&mut self, opened: &Option<String>) -> Result<()> {
        if let Some(Token::Word(_)) = self.peek().map(|t| &t.token) {
            if self.peek().is_some_and(|t| t.token != Token::SemiColon) && !self.at_end_word() {
                let at = self.pos;
                let label = self.identifier()?;
                if opened.as_deref() != Some(label.as_str()) {
                    self.pos = at;
                    return Err(self.error(&format!(
                        "end label \"{label}\" differs from block's label \"{}\"",
                        opened.as_deref().unwrap_or("")
                    )));
                }
            }
        }
        Ok(())
    }

    fn at_end_word(&self) -> bool {
        self.peek_word()
            .is_some_and(|w| STATEMENT_LIST_ENDS.contains(&w.as_str()))
    }

    /// The text from here up to (not including) the first token at parenthesis depth 0 (and
    /// outside CASE ... END) for which `stop` holds; the parser stops at that token. Empty text
    /// is an error naming `what`.
    fn cut(&mut self, what: &str, stop: impl Fn(&Tok) -> bool) -> Result<String> {
        let start = self.pos;
        let (mut depth, mut cases) = (0usize, 0usize);
        while let Some(t) = self.peek() {
            if depth == 0 && cases == 0 && stop(t) {
                break;
            }
            match &t.token {
                Token::LParen | Token::LBracket => depth += 1,
                Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
                _ if depth == 0 && t.is_word("case") => cases += 1,
                _ if depth == 0 && cases > 0 && t.is_word("end") => cases -= 1,
                _ => {}
            }
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.error(&format!("syntax error: missing {what}")));
        }
        let (from, to) = (self.tokens[start].start, self.tokens[self.pos - 1].end);
        Ok(self.text[from..to].trim().to_string())
    }

    fn cut_to_semicolon(&mut self, what: &str) -> Result<String> {
        let text = self.cut(what, |t| t.token == Token::SemiColon)?;
        self.expect(&Token::SemiColon)?;
        Ok(text)
    }

    fn cut_to_word(&mut self, what: &str, words: &[&str]) -> Result<String> {
        self.cut(what, |t| words.iter().any(|w| t.is_word(w)))
    }

    /// Comma-separated expressions up to `;` or one of `words`.
    fn expression_list(&mut self, words: &[&str]) -> Result<Vec<String>> {
        let mut list = Vec::new();
        loop {
            let item = self.cut("expression", |t| {
                t.token == Token::Comma
                    || t.token == Token::SemiColon
                    || words.iter().any(|w| t.is_word(w))
            })?;
            list.push(item);
            if !self.eat(&Token::Comma) {
                return Ok(list);
            }
        }
    }

    fn block(&mut self, label: Option<String>) -> Result<Block> {
        let mut declarations = Vec::new();
        while self.eat_word("declare") {
            while !self.at_word("begin") && !self.at_word("declare") {
                if self.peek().is_none() {
                    return Err(self.error("syntax error: expected BEGIN"));
                }
                declarations.push(self.declaration()?);
            }
        }
        self.expect_word("begin")?;
        let body = self.statements()?;
        let mut handlers = Vec::new();
        if self.eat_word("exception") {
            while self.eat_word("when") {
                let mut conditions = vec![self.condition()?];
                while self.eat_word("or") {
                    conditions.push(self.condition()?);
                }
                self.expect_word("then")?;
                handlers.push(Handler {
                    conditions,
                    body: self.statements()?,
                });
            }
            if handlers.is_empty() {
                return Err(self.error("syntax error: expected WHEN"));
            }
        }
        self.expect_word("end")?;
        self.end_label(&label)?;
        Ok(Block {
            label,
            declarations,
            body,
            handlers,
        })
    }

    fn condition(&mut self) -> Result<Condition> {
        if self.eat_word("sqlstate") {
            return match self.peek().map(|t| t.token.clone()) {
                Some(Token::SingleQuotedString(code)) => {
                    self.pos += 1;
                    Ok(Condition::SqlState(code))
                }
                _ => Err(self.error("syntax error: expected a SQLSTATE code")),
            };
        }
        Ok(Condition::Name(self.identifier()?))
    }

    fn declaration(&mut self) -> Result<Declaration> {
        let name = self.identifier()?;
        if self.eat_word("alias") {
            self.expect_word("for")?;
            let target = self.cut_to_semicolon("alias target")?;
            return Ok(Declaration::Alias { name, target });
        }
        let scroll = if self.at_words(&["no", "scroll", "cursor"]) {
            self.pos += 2;
            Some(false)
        } else if self.at_words(&["scroll", "cursor"]) {
            self.pos += 1;
            Some(true)
        } else {
            None
        };
        if self.eat_word("cursor") {
            let mut arguments = Vec::new();
            if self.eat(&Token::LParen) {
                loop {
                    let argument = self.identifier()?;
                    let data_type = self.cut("argument type", |t| {
                        matches!(t.token, Token::Comma | Token::RParen)
                    })?;
                    arguments.push((argument, data_type));
                    if !self.eat(&Token::Comma) {
                        break;
                    }
                }
                self.expect(&Token::RParen)?;
            }
            if !self.eat_word("for") {
                self.expect_word("is")?;
            }
            let query = self.cut_to_semicolon("cursor query")?;
            return Ok(Declaration::Cursor {
                name,
                scroll,
                arguments,
                query,
            });
        }
        let constant = self.eat_word("constant");
        let data_type = self.cut("type", |t| {
            matches!(t.token, Token::SemiColon | Token::Assignment | Token::Eq)
                || t.is_word("default")
                || t.is_word("not")
                || t.is_word("collate")
        })?;
        if self.eat_word("collate") {
            self.identifier()?;
        }
        let not_null = self.eat_word("not");
        if not_null {
            self.expect_word("null")?;
        }
        let default =
            if self.eat_word("default") || self.eat(&Token::Assignment) || self.eat(&Token::Eq) {
                Some(self.cut("default value", |t| t.token == Token::SemiColon)?)
            } else {
                None
            };
        self.expect(&Token::SemiColon)?;
        Ok(Declaration::Variable {
            name,
            constant,
            data_type,
            not_null,
            default,
        })
    }

    /// Statements up to a word that ends the list (END, ELSIF, ELSE, WHEN, EXCEPTION).
    fn statements(&mut self) -> Result<Vec<Stmt>> {
        let mut list = Vec::new();
        while !self.at_end_word() {
            if self.peek().is_none() {
                return Err(self.error("syntax error: expected END"));
            }
            list.push(self.statement()?);
        }
        Ok(list)
    }

    fn statement(&mut self) -> Result<Stmt> {
        let label = self.label()?;
        let word = self.peek_word().unwrap_or_default();
        if label.is_some()
            && !matches!(
                word.as_str(),
                "declare" | "begin" | "loop" | "while" | "for" | "foreach"
            )
        {
            return Err(self.error("syntax error: a label must precede a block or a loop"));
        }
        match word.as_str() {
            "declare" | "begin" => {
                let block = self.block(label)?;
                self.expect(&Token::SemiColon)?;
                return Ok(Stmt::Block(block));
            }
            "loop" => {
                self.pos += 1;
                let body = self.loop_body(&label)?;
                return Ok(Stmt::Loop { label, body });
            }
            "while" => {
                self.pos += 1;
                let condition = self.cut_to_word("condition", &["loop"])?;
                self.expect_word("loop")?;
                let body = self.loop_body(&label)?;
                return Ok(Stmt::While {
                    label,
                    condition,
                    body,
                });
            }
            "for" => {
                self.pos += 1;
                return self.for_loop(label);
            }
            "foreach" => {
                self.pos += 1;
                let target = self.cut_to_word("loop variable", &["slice", "in"])?;
                let slice = match self.eat_word("slice") {
                    true => Some(self.cut_to_word("slice", &["in"])?),
                    false => None,
                };
                self.expect_word("in")?;
                self.expect_word("array")?;
                let array = self.cut_to_word("array", &["loop"])?;
                self.expect_word("loop")?;
                let body = self.loop_body(&label)?;
                return Ok(Stmt::Foreach {
                    label,
                    target,
                    slice,
                    array,
                    body,
                });
            }
            _ => {}
        }
        // Not a PL/pgSQL keyword followed by `:=`: an assignment's target may be any name.
        if let Some(target) = self.assignment_target() {
            let expr = self.cut_to_semicolon("expression")?;
            return Ok(Stmt::Assign { target, expr });
        }
        match word.as_str() {
            "if" => self.if_statement(),
            "case" => self.case_statement(),
            "exit" | "continue" => {
                self.pos += 1;
                let label = match self.peek().map(|t| &t.token) {
                    Some(Token::Word(_)) if !self.at_word("when") => Some(self.identifier()?),
                    _ => None,
                };
                let condition = match self.eat_word("when") {
                    true => Some(self.cut("condition", |t| t.token == Token::SemiColon)?),
                    false => None,
                };
                self.expect(&Token::SemiColon)?;
                Ok(Stmt::Exit {
                    continue_loop: word == "continue",
                    label,
                    condition,
                })
            }
            "return" => self.return_statement(),
            "raise" => self.raise(),
            "perform" => {
                let from = self.tokens[self.pos].end;
                self.pos += 1;
                self.cut_to_semicolon("query")?;
                let end = self.tokens[self.pos - 2].end;
                Ok(Stmt::Perform(format!(
                    "SELECT {}",
                    self.text[from..end].trim()
                )))
            }
            "execute" => {
                self.pos += 1;
                let command = self.cut_to_word_or_semicolon("command", &["into", "using"])?;
                let mut into = None;
                let mut using = Vec::new();
                loop {
                    if self.eat_word("into") {
                        into = Some(self.into_targets(&["using"])?);
                    } else if self.eat_word("using") {
                        using = self.expression_list(&["into"])?;
                    } else {
                        break;
                    }
                }
                self.expect(&Token::SemiColon)?;
                Ok(Stmt::Execute {
                    command,
                    into,
                    using,
                })
            }
            "get" => self.get_diagnostics(),
            "open" => self.open(),
            "fetch" | "move" => self.fetch(word == "move"),
            "close" => {
                self.pos += 1;
                let cursor = self.identifier()?;
                self.expect(&Token::SemiColon)?;
                Ok(Stmt::Close(cursor))
            }
            "assert" => {
                self.pos += 1;
                let condition = self.cut("condition", |t| {
                    matches!(t.token, Token::Comma | Token::SemiColon)
                })?;
                let message = match self.eat(&Token::Comma) {
                    true => Some(self.cut("message", |t| t.token == Token::SemiColon)?),
                    false => None,
                };
                self.expect(&Token::SemiColon)?;
                Ok(Stmt::Assert { condition, message })
            }
            "null"
                if self
                    .tokens
                    .get(self.pos + 1)
                    .is_some_and(|t| t.token == Token::SemiColon) =>
            {
                self.pos += 2;
                Ok(Stmt::Null)
            }
            "commit" | "rollback"
                if !self
                    .tokens
                    .get(self.pos + 1)
                    .is_some_and(|t| t.is_word("to") || t.is_word("prepared")) =>
            {
                self.pos += 1;
                let chain = if self.eat_word("and") {
                    let no = self.eat_word("no");
                    self.expect_word("chain")?;
                    !no
                } else {
                    false
                };
                self.expect(&Token::SemiColon)?;
                Ok(Stmt::Transaction {
                    commit: word == "commit",
                    chain,
                })
            }
            _ => self.sql_statement(),
        }
    }

    /// `OPEN cursor [(arguments)]` or `OPEN cursor [[NO] SCROLL] FOR {query | EXECUTE ...}`.
    fn open(&mut self) -> Result<Stmt> {
        self.expect_word("open")?;
        let cursor = self.identifier()?;
        if self.peek().is_some_and(|t| t.token == Token::LParen) {
            let arguments = self.call_arguments()?;
            self.expect(&Token::SemiColon)?;
            return Ok(Stmt::Open {
                cursor,
                scroll: None,
                source: OpenSource::Bound(arguments),
            });
        }
        if self.eat(&Token::SemiColon) {
            return Ok(Stmt::Open {
                cursor,
                scroll: None,
                source: OpenSource::Bound(Vec::new()),
            });
        }
        let scroll = if self.eat_word("no") {
            self.expect_word("scroll")?;
            Some(false)
        } else if self.eat_word("scroll") {
            Some(true)
        } else {
            None
        };
        self.expect_word("for")?;
        let source = if self.eat_word("execute") {
            let command = self.cut_to_word_or_semicolon("command", &["using"])?;
            let using = match self.eat_word("using") {
                true => self.expression_list(&[])?,
                false => Vec::new(),
            };
            self.expect(&Token::SemiColon)?;
            OpenSource::Execute { command, using }
        } else {
            OpenSource::Query(self.cut_to_semicolon("query")?)
        };
        Ok(Stmt::Open {
            cursor,
            scroll,
            source,
        })
    }

    /// `(expr, ...)` of a bound cursor's OPEN or FOR, each argument as written.
    fn call_arguments(&mut self) -> Result<Vec<String>> {
        self.expect(&Token::LParen)?;
        let mut arguments = Vec::new();
        loop {
            arguments.push(self.cut("argument", |t| {
                matches!(t.token, Token::Comma | Token::RParen)
            })?);
            if !self.eat(&Token::Comma) {
                break;
            }
        }
        self.expect(&Token::RParen)?;
        Ok(arguments)
    }

    /// `FETCH [direction {FROM | IN}] cursor INTO targets` or `MOVE [direction {FROM | IN}]
    /// cursor` (FROM may be left out after a direction, as PostgreSQL allows).
    fn fetch(&mut self, is_move: bool) -> Result<Stmt> {
        self.pos += 1;
        let start = self.pos;
        let mut end = start;
        while let Some(t) = self.tokens.get(end) {
            if t.token == Token::SemiColon || t.is_word("into") {
                break;
            }
            end += 1;
        }
        if end == start {
            return Err(self.error("syntax error: expected a cursor"));
        }
        // The cursor is the last name; a direction and FROM/IN may come before it.
        let cursor_at = end - 1;
        let direction_end = match cursor_at.checked_sub(1).map(|i| &self.tokens[i]) {
            Some(t) if t.is_word("from") || t.is_word("in") => cursor_at - 1,
            _ => cursor_at,
        };
        let direction = (direction_end > start).then(|| {
            self.text[self.tokens[start].start..self.tokens[direction_end - 1].end]
                .trim()
                .to_string()
        });
        self.pos = cursor_at;
        let cursor = self.identifier()?;
        let into = match self.eat_word("into") {
            true if !is_move => Some(self.into_targets(&[])?),
            true => return Err(self.error("syntax error at or near \"into\"")),
            false if !is_move => return Err(self.error("syntax error: FETCH needs INTO")),
            false => None,
        };
        self.expect(&Token::SemiColon)?;
        Ok(Stmt::Fetch {
            direction,
            cursor,
            into,
        })
    }

    fn cut_to_word_or_semicolon(&mut self, what: &str, words: &[&str]) -> Result<String> {
        self.cut(what, |t| {
            t.token == Token::SemiColon || words.iter().any(|w| t.is_word(w))
        })
    }

    /// `target :=` or `target =` at the statement's start (a name, `a.b`, `a[i]`), consumed;
    /// None (and nothing consumed) otherwise.
    fn assignment_target(&mut self) -> Option<String> {
        let start = self.pos;
        let mut i = start;
        if !matches!(self.tokens.get(i)?.token, Token::Word(_)) {
            return None;
        }
        i += 1;
        loop {
            match &self.tokens.get(i)?.token {
                Token::Period => {
                    if !matches!(self.tokens.get(i + 1)?.token, Token::Word(_)) {
                        return None;
                    }
                    i += 2;
                }
                Token::LBracket => {
                    let mut depth = 0usize;
                    loop {
                        match &self.tokens.get(i)?.token {
                            Token::LBracket => depth += 1,
                            Token::RBracket => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                    i += 1;
                }
                Token::Assignment | Token::Eq => {
                    let target = self.text[self.tokens[start].start..self.tokens[i - 1].end]
                        .trim()
                        .to_string();
                    self.pos = i + 1;
                    return Some(target);
                }
                _ => return None,
            }
        }
    }

    fn loop_body(&mut self, label: &Option<String>) -> Result<Vec<Stmt>> {
        let body = self.statements()?;
        self.expect_word("end")?;
        self.expect_word("loop")?;
        self.end_label(label)?;
        self.expect(&Token::SemiColon)?;
        Ok(body)
    }

    fn for_loop(&mut self, label: Option<String>) -> Result<Stmt> {
        let targets_text = self.cut_to_word("loop variable", &["in"])?;
        self.expect_word("in")?;
        let targets: Vec<String> = targets_text
            .split(',')
            .map(|t| t.trim().to_string())
            .collect();
        if self.eat_word("execute") {
            let query = self.cut_to_word("query", &["using", "loop"])?;
            let using = match self.eat_word("using") {
                true => self.expression_list(&["loop"])?,
                false => Vec::new(),
            };
            self.expect_word("loop")?;
            let body = self.loop_body(&label)?;
            return Ok(Stmt::ForQuery {
                label,
                targets,
                query,
                dynamic: true,
                using,
                body,
            });
        }
        // An integer range has `..` at depth 0 before LOOP, as PostgreSQL decides. The
        // tokenizer reads `1..10` as numbers, so the range is split in the text.
        let reverse = self.eat_word("reverse");
        let source = self.cut_to_word("query", &["loop"])?;
        self.expect_word("loop")?;
        let Some((low, rest)) = split_outside(&source, |s| s.starts_with("..")) else {
            if reverse {
                return Err(self.error("syntax error: REVERSE needs an integer range"));
            }
            if let Some((cursor, arguments)) = bound_cursor_call(&source)? {
                let [target] = targets.as_slice() else {
                    return Err(
                        self.error("syntax error: a loop over a cursor has one record variable")
                    );
                };
                let body = self.loop_body(&label)?;
                return Ok(Stmt::ForCursor {
                    label,
                    target: target.to_ascii_lowercase(),
                    cursor,
                    arguments,
                    body,
                });
            }
            let body = self.loop_body(&label)?;
            return Ok(Stmt::ForQuery {
                label,
                targets,
                query: source,
                dynamic: false,
                using: Vec::new(),
                body,
            });
        };
        let rest = &rest[2..];
        let (high, step) = match split_outside(rest, starts_with_word_by) {
            Some((high, by)) => (high, Some(by.trim_start()[2..].trim().to_string())),
            None => (rest, None),
        };
        let [var] = targets.as_slice() else {
            return Err(self.error("syntax error: an integer loop has one variable"));
        };
        let var = var.to_ascii_lowercase();
        let body = self.loop_body(&label)?;
        Ok(Stmt::ForRange {
            label,
            var,
            reverse,
            low: low.trim().to_string(),
            high: high.trim().to_string(),
            step,
            body,
        })
    }

    fn if_statement(&mut self) -> Result<Stmt> {
        self.expect_word("if")?;
        let mut branches = Vec::new();
        loop {
            let condition = self.cut_to_word("condition", &["then"])?;
            self.expect_word("then")?;
            branches.push((condition, self.statements()?));
            if !(self.eat_word("elsif") || self.eat_word("elseif")) {
                break;
            }
        }
        let otherwise = match self.eat_word("else") {
            true => Some(self.statements()?),
            false => None,
        };
        self.expect_word("end")?;
        self.expect_word("if")?;
        self.expect(&Token::SemiColon)?;
        Ok(Stmt::If {
            branches,
            otherwise,
        })
    }

    fn case_statement(&mut self) -> Result<Stmt> {
        self.expect_word("case")?;
        let subject = match self.at_word("when") {
            true => None,
            false => Some(self.cut_to_word("expression", &["when"])?),
        };
        let mut arms = Vec::new();
        while self.eat_word("when") {
            let condition = self.cut_to_word("condition", &["then"])?;
            self.expect_word("then")?;
            arms.push((condition, self.statements()?));
        }
        if arms.is_empty() {
            return Err(self.error("syntax error: expected WHEN"));
        }
        let otherwise = match self.eat_word("else") {
            true => Some(self.statements()?),
            false => None,
        };
        self.expect_word("end")?;
        self.expect_word("case")?;
        self.expect(&Token::SemiColon)?;
        Ok(Stmt::Case {
            subject,
            arms,
            otherwise,
        })
    }

    fn return_statement(&mut self) -> Result<Stmt> {
        self.expect_word("return")?;
        if self.eat_word("next") {
            return Ok(Stmt::ReturnNext(self.optional_expression()?));
        }
        if self.eat_word("query") {
            if self.eat_word("execute") {
                let query = self.cut_to_word_or_semicolon("command", &["using"])?;
                let using = match self.eat_word("using") {
                    true => self.expression_list(&[])?,
                    false => Vec::new(),
                };
                self.expect(&Token::SemiColon)?;
                return Ok(Stmt::ReturnQuery {
                    query,
                    dynamic: true,
                    using,
                });
            }
            let query = self.cut_to_semicolon("query")?;
            return Ok(Stmt::ReturnQuery {
                query,
                dynamic: false,
                using: Vec::new(),
            });
        }
        Ok(Stmt::Return(self.optional_expression()?))
    }

    fn optional_expression(&mut self) -> Result<Option<String>> {
        if self.eat(&Token::SemiColon) {
            return Ok(None);
        }
        Ok(Some(self.cut_to_semicolon("expression")?))
    }

    fn raise(&mut self) -> Result<Stmt> {
        self.expect_word("raise")?;
        let mut raise = Raise {
            level: "exception".to_string(),
            format: None,
            args: Vec::new(),
            condition: None,
            options: Vec::new(),
        };
        if let Some(level) = self.peek_word().filter(|w| {
            matches!(
                w.as_str(),
                "debug" | "log" | "info" | "notice" | "warning" | "exception"
            )
        }) {
            raise.level = level;
            self.pos += 1;
        }
        match self.peek().map(|t| t.token.clone()) {
            Some(Token::SemiColon) => {}
            Some(Token::SingleQuotedString(_)) | Some(Token::EscapedStringLiteral(_)) => {
                let t = &self.tokens[self.pos];
                raise.format = Some(self.text[t.start..t.end].to_string());
                self.pos += 1;
                if self.eat(&Token::Comma) {
                    raise.args = self.expression_list(&["using"])?;
                }
            }
            Some(Token::Word(_)) if !self.at_word("using") => {
                raise.condition = Some(self.condition()?);
            }
            _ => {}
        }
        if self.eat_word("using") {
            loop {
                let option = self.identifier()?;
                if !(self.eat(&Token::Eq) || self.eat(&Token::Assignment)) {
                    return Err(self.error("syntax error: expected ="));
                }
                let value = self.cut("option value", |t| {
                    matches!(t.token, Token::Comma | Token::SemiColon)
                })?;
                raise.options.push((option, value));
                if !self.eat(&Token::Comma) {
                    break;
                }
            }
        }
        self.expect(&Token::SemiColon)?;
        Ok(Stmt::Raise(raise))
    }

    fn get_diagnostics(&mut self) -> Result<Stmt> {
        self.expect_word("get")?;
        let stacked = self.eat_word("stacked");
        if !stacked {
            self.eat_word("current");
        }
        self.expect_word("diagnostics")?;
        let mut items = Vec::new();
        loop {
            let target = self.identifier()?;
            if !(self.eat(&Token::Eq) || self.eat(&Token::Assignment)) {
                return Err(self.error("syntax error: expected ="));
            }
            let item = self.identifier()?;
            items.push((target, item));
            if !self.eat(&Token::Comma) {
                break;
            }
        }
        self.expect(&Token::SemiColon)?;
        Ok(Stmt::GetDiagnostics { stacked, items })
    }

    /// `INTO [STRICT] target [, ...]`, after INTO, up to `;` or one of `words`.
    fn into_targets(&mut self, words: &[&str]) -> Result<Into> {
        let strict = self.eat_word("strict");
        let mut targets = Vec::new();
        loop {
            let start = self.pos;
            let mut end = self.pos;
            // A target is a name, possibly qualified (`r.f`).
            while let Some(t) = self.tokens.get(end) {
                let continues = match &t.token {
                    Token::Word(_) => end == start || self.tokens[end - 1].token == Token::Period,
                    Token::Period => end > start,
                    _ => false,
                };
                if !continues || (end > start && words.iter().any(|w| t.is_word(w))) {
                    break;
                }
                end += 1;
            }
            if end == start {
                return Err(self.error("syntax error: expected an INTO target"));
            }
            targets.push(
                self.text[self.tokens[start].start..self.tokens[end - 1].end].to_ascii_lowercase(),
            );
            self.pos = end;
            if !self.eat(&Token::Comma) {
                return Ok(Into { strict, targets });
            }
        }
    }

    /// An embedded SQL statement up to `;`, with PL/pgSQL's INTO taken out: the first INTO at
    /// depth 0 that does not follow INSERT or MERGE.
    fn sql_statement(&mut self) -> Result<Stmt> {
        let start = self.pos;
        let first_word = self.peek_word().unwrap_or_default();
        let mut depth = 0usize;
        let mut into: Option<(usize, usize, Into)> = None; // (from token, to token, targets)
        let mut i = self.pos;
        while let Some(t) = self.tokens.get(i) {
            match &t.token {
                Token::SemiColon if depth == 0 => break,
                Token::LParen => depth += 1,
                Token::RParen => depth = depth.saturating_sub(1),
                _ if depth == 0
                    && t.is_word("into")
                    && into.is_none()
                    && !(i > start
                        && (self.tokens[i - 1].is_word("insert")
                            || self.tokens[i - 1].is_word("merge")))
                    && !(first_word == "import") =>
                {
                    self.pos = i + 1;
                    let targets = self.into_targets(&[
                        "from",
                        "where",
                        "group",
                        "having",
                        "order",
                        "limit",
                        "offset",
                        "union",
                        "for",
                        "returning",
                        "window",
                    ])?;
                    into = Some((i, self.pos, targets));
                    i = self.pos;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        if i == start {
            return Err(self.error("syntax error: empty statement"));
        }
        if self.tokens.get(i).is_none() {
            self.pos = i;
            return Err(self.error("syntax error: missing \";\""));
        }
        let (from, to) = (self.tokens[start].start, self.tokens[i - 1].end);
        let text = match &into {
            Some((into_at, after, _)) => {
                let cut_from = self.tokens[*into_at].start;
                let rest_from = self.tokens.get(*after).map_or(to, |t| t.start).min(to);
                let tail = if *after < i {
                    &self.text[rest_from..to]
                } else {
                    ""
                };
                format!("{} {}", self.text[from..cut_from].trim_end(), tail)
                    .trim()
                    .to_string()
            }
            None => self.text[from..to].trim().to_string(),
        };
        self.pos = i + 1;
        Ok(Stmt::Sql {
            text,
            into: into.map(|(_, _, targets)| targets),
        })
    }
}

/// Splits `text` at the first place outside quotes and parentheses where `at` holds for the
/// rest of the text: (before, from there on).
fn split_outside(text: &str, at: impl Fn(&str) -> bool) -> Option<(&str, &str)> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, c) in text.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' | '[' => depth += 1,
                ')' | ']' => depth = depth.saturating_sub(1),
                _ if depth == 0 && at(&text[i..]) => return Some((&text[..i], &text[i..])),
                _ => {}
            },
        }
    }
    None
}

/// `name` or `name(arguments)`, the source of a FOR loop over a bound cursor (a query starts
/// with a keyword and goes on after it); None for a query.
fn bound_cursor_call(source: &str) -> Result<Option<(String, Vec<String>)>> {
    let tokens = crate::tokens::tokenize(source).map_err(|message| ParseError {
        message,
        position: 0,
    })?;
    let Some(first) = tokens.first() else {
        return Ok(None);
    };
    let Token::Word(w) = &first.token else {
        return Ok(None);
    };
    let plain = tokens.len() == 1;
    let called = tokens.len() > 2
        && tokens[1].token == Token::LParen
        && tokens.last().is_some_and(|t| t.token == Token::RParen);
    if !(plain || called) {
        return Ok(None);
    }
    let name = match w.quote_style {
        Some(_) => w.value.clone(),
        None => w.value.to_ascii_lowercase(),
    };
    if matches!(name.as_str(), "select" | "values" | "with" | "table") {
        return Ok(None);
    }
    let mut parser = Parser {
        text: source,
        tokens,
        pos: 1,
    };
    let arguments = match called {
        true => parser.call_arguments()?,
        false => Vec::new(),
    };
    Ok(Some((name, arguments)))
}

/// Whether `text` starts with the word BY (a loop's step), after a space.
fn starts_with_word_by(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() > 3
        && bytes[0].is_ascii_whitespace()
        && text[1..3].eq_ignore_ascii_case("by")
        && !bytes[3].is_ascii_alphanumeric()
        && bytes[3] != b'_'
}

#[cfg(test)]
mod tests;
