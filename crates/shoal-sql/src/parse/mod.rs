//! Parsing PostgreSQL text into sqlparser statements. sqlparser 0.62 rejects some valid
//! PostgreSQL that clients send. When the plain parse fails, the token stream is normalised into
//! a form sqlparser accepts and parsed again; tokens keep their source spans, so error positions
//! still point into the client's text. The cases:
//!
//! - Sequence options (`CREATE SEQUENCE s START 10 INCREMENT 2`, `AS IDENTITY (START WITH 50
//!   INCREMENT BY 5)`): PostgreSQL takes them in any order, sqlparser only in the order AS,
//!   INCREMENT, MINVALUE, MAXVALUE, START, CACHE, CYCLE, OWNED BY. They are reordered.
//! - COPY boolean options (`WITH (freeze on)`, as pgbench sends): PostgreSQL takes on/off,
//!   true/false and 1/0, sqlparser only TRUE/FALSE. The value is rewritten to TRUE or FALSE.
//! - `CREATE TABLE ... AS query WITH [NO] DATA`: sqlparser has no such clause. It is removed, and
//!   for NO DATA the parsed query gets `LIMIT 0`, so the table is created with no rows.
//! - `INSERT ... OVERRIDING {SYSTEM | USER} VALUE`: sqlparser has neither the clause nor a field
//!   for it. It is removed and recorded in the insert's `settings` under the name
//!   [`OVERRIDING_SETTING`], which [`insert_overriding`] reads back for the INSERT executor.
//! - `CREATE TABLE ... USING method` (PostgreSQL's table access method): sqlparser takes USING
//!   only in the Spark dialect. The clause is removed and the method recorded in the statement's
//!   `hive_formats` as `HiveIOFormat::Using`, which the DDL executor reads.
//! - `VACUUM [(options)] [FREEZE] [VERBOSE] [ANALYZE] table, ...` (pgbench sends `vacuum analyze
//!   pgbench_branches`): sqlparser knows only Redshift's VACUUM. The PostgreSQL options and all
//!   tables after the first are removed; Shoal's VACUUM always works on the whole database.
//! - `ALTER TABLE name SET ACCESS METHOD method`: sqlparser has no such operation. It is
//!   rewritten to `ALTER TABLE name SET (shoal_access_method = method)` ([`ACCESS_METHOD_OPTION`]),
//!   which the ALTER TABLE executor reads back.
//!
//! - `[NOT] DEFERRABLE` among the transaction modes of BEGIN, START TRANSACTION and SET
//!   TRANSACTION: sqlparser has no such mode. It is removed; a DEFERRABLE BEGIN or START
//!   TRANSACTION is marked with the modifier [`DEFERRABLE_MARKER`] (a modifier sqlparser reads
//!   only in other dialects), which the session shows as `transaction_deferrable`.
//!
//! - `SET CONSTRAINTS {ALL | names} {DEFERRED | IMMEDIATE}`: sqlparser has no such statement.
//!   It becomes a SET of the variable [`SET_CONSTRAINTS_VARIABLE`] to the text after
//!   CONSTRAINTS, which the session reads back.
//!
//! - `GRANT role TO role`, `REVOKE role FROM role`, `REVOKE GRANT OPTION FOR`, `REASSIGN
//!   OWNED`, `DROP OWNED`, `ALTER DEFAULT PRIVILEGES`: sqlparser reads none of them. They become a SET of [`ROLE_COMMAND_VARIABLE`] to the statement's
//!   text.
//!
//! - `ALTER SYSTEM`: sqlparser does not read it. It becomes a SET of [`ALTER_SYSTEM_VARIABLE`]
//!   to the statement's text.
//!
//! - `ALTER SEQUENCE`: sqlparser does not read it. It becomes a SET of
//!   [`ALTER_SEQUENCE_VARIABLE`] to the statement's text (`sequence`).
//!
//! - `ALTER TABLE ... ADD GENERATED ... AS IDENTITY (SEQUENCE NAME name ...)`: sqlparser has no
//!   SEQUENCE NAME option. It is removed, and the name handed to the executor as a last
//!   operation `SET (shoal_identity_sequence = 'name')` ([`IDENTITY_SEQUENCE_OPTION`]).
//!
//! - `CREATE USER` and `ALTER USER`: sqlparser reads them as other dialects' statements. USER
//!   becomes ROLE, and a CREATE USER gets LOGIN unless it says NOLOGIN.
//!
//! - `f(a, VARIADIC array)`: sqlparser reads VARIADIC only among a routine's parameters. The
//!   argument becomes the named argument `shoal_variadic => array` ([`VARIADIC_ARGUMENT`]).
//!
//! When the parse still fails, [`reserved_word_as_name`] finds the reserved word PostgreSQL
//! would have stopped at (`CREATE TABLE TABLE t`), which sqlparser took as a name.
//!
//! One fix applies to every parse: sqlparser reads the right side of `a IS [NOT] DISTINCT FROM
//! b` as a whole expression, so `a IS DISTINCT FROM b AND c` comes out as `a IS DISTINCT FROM (b
//! AND c)`. PostgreSQL's IS binds tighter than NOT, AND and OR; [`fix_is_distinct_from`] turns
//! the tree back into `(a IS DISTINCT FROM b) AND c`.

mod sequence;

use sequence::{reorder_create_sequence, reorder_identity_options, skip_name};
pub use sequence::{ALTER_SEQUENCE_VARIABLE, IDENTITY_SEQUENCE_OPTION};

use datafusion::sql::sqlparser::ast::{self, Statement};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, Whitespace};

/// The insert setting that carries OVERRIDING SYSTEM VALUE / OVERRIDING USER VALUE.
pub const OVERRIDING_SETTING: &str = "shoal_overriding";

/// The transaction modifier that marks `BEGIN ... DEFERRABLE` (see the module comment).
pub const DEFERRABLE_MARKER: ast::TransactionModifier = ast::TransactionModifier::Deferred;

/// The setting name `SET CONSTRAINTS` is parsed as (see `rewrite_set_constraints`).
pub const SET_CONSTRAINTS_VARIABLE: &str = "shoal_set_constraints";

/// The setting name a role membership GRANT or REVOKE is parsed as (see
/// `rewrite_role_membership`).
pub const ROLE_COMMAND_VARIABLE: &str = "shoal_role_command";

/// The setting name an ALTER SYSTEM statement is parsed as (see `rewrite_alter_system`).
pub const ALTER_SYSTEM_VARIABLE: &str = "shoal_alter_system";

/// The `ALTER TABLE ... SET (option)` that carries SET ACCESS METHOD.
pub const ACCESS_METHOD_OPTION: &str = "shoal_access_method";

/// Which values an INSERT's OVERRIDING clause lets win for identity columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overriding {
    /// OVERRIDING SYSTEM VALUE: explicit values go into GENERATED ALWAYS columns.
    System,
    /// OVERRIDING USER VALUE: explicit values for identity columns are ignored.
    User,
}

/// What the normalisation removed from one statement and must be put back after parsing.
#[derive(Clone, Debug)]
enum Note {
    NoData,
    /// CREATE USER: LOGIN unless the statement says NOLOGIN.
    CreateUser,
    Deferrable,
    AccessMethod(String),
    Overriding(Overriding),
    /// The `SEQUENCE NAME` of an identity column ALTER TABLE adds.
    IdentitySequence(String),
}

/// Parses `sql` (one or more statements) as PostgreSQL.
/// What to say of a statement of `sql` that needs a feature Shoal lacks and sqlparser cannot
/// parse (CREATE RULE; DO blocks and CREATE PROCEDURE in a query string with other
/// statements), for a 0A000 that names the feature rather than a syntax error; None when every
/// statement starts otherwise.
pub fn unsupported_statement(sql: &str) -> Option<&'static str> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let words = |segment: &[Token]| -> Vec<String> {
        segment
            .iter()
            .filter(|t| !is_space(t))
            .take(4)
            .map(|t| match t {
                Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
                _ => String::new(),
            })
            .collect()
    };
    tokens
        .split(|t| matches!(t, Token::SemiColon))
        .find_map(|segment| {
            let words = words(segment);
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            match words.as_slice() {
                // Alone in a query string these are read by `routines::statement`.
                ["DO", ..] => {
                    Some("DO blocks among other statements in one query string are not supported")
                }
                ["CREATE", "PROCEDURE", ..] | ["CREATE", "OR", "REPLACE", "PROCEDURE"] => Some(
                    "CREATE PROCEDURE among other statements in one query string is not supported",
                ),
                ["CREATE", "RULE", ..] | ["CREATE", "OR", "REPLACE", "RULE"] => {
                    Some("CREATE RULE is not supported")
                }
                _ => None,
            }
        })
}

pub fn parse_statements(sql: &str) -> Result<Vec<Statement>, ParserError> {
    let mut statements = parse_unfixed(sql)?;
    for stmt in &mut statements {
        let _ = ast::visit_expressions_mut(stmt, |e| {
            fix_is_distinct_from(e);
            std::ops::ControlFlow::<()>::Continue(())
        });
    }
    Ok(statements)
}

/// Moves AND and OR that sqlparser put inside the right side of IS [NOT] DISTINCT FROM above
/// it (a parenthesised right side is an `Expr::Nested` and stays).
fn fix_is_distinct_from(e: &mut ast::Expr) {
    use ast::{BinaryOperator, Expr};
    let (Expr::IsDistinctFrom(_, right) | Expr::IsNotDistinctFrom(_, right)) = e else {
        return;
    };
    let Expr::BinaryOp {
        op: op @ (BinaryOperator::And | BinaryOperator::Or),
        ..
    } = right.as_ref()
    else {
        return;
    };
    let op = op.clone();
    let placeholder = Expr::Value(ast::Value::Null.into());
    let Expr::BinaryOp {
        left: inner_left,
        right: inner_right,
        ..
    } = std::mem::replace(right.as_mut(), placeholder)
    else {
        unreachable!("matched a binary operation above");
    };
    // e = a IS DISTINCT FROM (l op r)  becomes  (a IS DISTINCT FROM l) op r.
    **right = *inner_left;
    fix_is_distinct_from(e);
    let is_distinct = std::mem::replace(e, Expr::Value(ast::Value::Null.into()));
    *e = Expr::BinaryOp {
        left: Box::new(is_distinct),
        op,
        right: inner_right,
    };
}

fn parse_unfixed(sql: &str) -> Result<Vec<Statement>, ParserError> {
    let dialect = PostgreSqlDialect {};
    let first_error = match Parser::parse_sql(&dialect, sql) {
        // sqlparser reads CREATE USER and ALTER USER as other dialects' statements.
        Ok(statements) if !statements.iter().any(is_other_dialects_user) => return Ok(statements),
        Ok(_) => ParserError::ParserError("CREATE USER / ALTER USER".into()),
        Err(e) => e,
    };
    let Ok(tokens) = Tokenizer::new(&dialect, sql).tokenize_with_location() else {
        return Err(first_error);
    };
    let Some((tokens, notes)) = normalize(tokens) else {
        return Err(first_error);
    };
    let mut statements = Parser::new(&dialect)
        .with_tokens_with_locations(tokens)
        .parse_statements()?;
    for (index, note) in notes {
        if let Some(stmt) = statements.get_mut(index) {
            apply_note(stmt, note);
        }
    }
    Ok(statements)
}

fn is_other_dialects_user(stmt: &Statement) -> bool {
    matches!(stmt, Statement::CreateUser(_) | Statement::AlterUser(_))
}

/// `CREATE USER` / `ALTER USER` are PostgreSQL's CREATE ROLE / ALTER ROLE (CREATE USER with
/// LOGIN unless told otherwise): the USER keyword becomes ROLE; Some(true) for CREATE.
fn rewrite_user_as_role(seg: &mut [TokenWithSpan]) -> Option<bool> {
    let sig = significant(seg);
    let second = *sig.get(1)?;
    if keyword_of(&seg[second]) != Keyword::USER {
        return None;
    }
    let create = keyword_of(&seg[sig[0]]) == Keyword::CREATE;
    seg[second].token = Token::make_keyword("ROLE");
    Some(create)
}

/// One statement of a query string split by [`split_at_checkpoints`].
#[derive(Debug, PartialEq)]
pub enum Piece {
    /// PostgreSQL's CHECKPOINT, which sqlparser does not know.
    Checkpoint,
    /// Any other statements, as text for the parser.
    Sql(String),
}

/// Where in `sql` a token location (line and column, from 1, in characters) is, in bytes;
/// None for a location outside the text.
pub(crate) fn location_offsets(
    sql: &str,
) -> impl Fn(datafusion::sql::sqlparser::tokenizer::Location) -> Option<usize> + '_ {
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(sql.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    move |loc| {
        let line_start = *line_starts.get((loc.line as usize).checked_sub(1)?)?;
        let column = (loc.column as usize).checked_sub(1)?;
        match sql[line_start..].char_indices().nth(column) {
            Some((i, _)) => Some(line_start + i),
            None => Some(sql.len()),
        }
    }
}

/// Splits a query string that holds a CHECKPOINT statement among others into CHECKPOINT and
/// the text around it, in order; None when no statement is exactly CHECKPOINT (or the text does
/// not tokenize), so the caller parses it as usual.
pub fn split_at_checkpoints(sql: &str) -> Option<Vec<Piece>> {
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .ok()?;
    // Pieces are cut from the client's text by the tokens' spans (not re-printed from the
    // tokens, which would lose quoting such as 'it''s').
    let offset = location_offsets(sql);
    let mut pieces = Vec::new();
    let mut pending: Option<usize> = None; // start of the text not yet in a piece
    let mut found = false;
    for segment in tokens.split(|t| matches!(t.token, Token::SemiColon)) {
        let words: Vec<&TokenWithSpan> = segment
            .iter()
            .filter(|t| !is_space(&t.token) && t.token != Token::EOF)
            .collect();
        let is_checkpoint = matches!(
            words.as_slice(),
            [t] if matches!(&t.token, Token::Word(w)
                if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("checkpoint"))
        );
        if is_checkpoint {
            found = true;
            if let Some(start) = pending.take() {
                let end = offset(words[0].span.start)?;
                pieces.push(Piece::Sql(sql[start..end].to_string()));
            }
            pieces.push(Piece::Checkpoint);
        } else if let (Some(first), None) = (words.first(), pending) {
            pending = Some(offset(first.span.start)?);
        }
    }
    if let Some(start) = pending {
        pieces.push(Piece::Sql(sql[start..].to_string()));
    }
    found.then_some(pieces)
}

#[cfg(test)]
mod checkpoint_split_tests {
    use super::{split_at_checkpoints, Piece};

    fn sql(s: &str) -> Piece {
        Piece::Sql(s.to_string())
    }

    #[test]
    fn checkpoint_statements_are_cut_out_in_order() {
        assert_eq!(
            split_at_checkpoints("checkpoint"),
            Some(vec![Piece::Checkpoint])
        );
        assert_eq!(
            split_at_checkpoints("SELECT 'it''s'; CHECKPOINT;\n SELECT 2; select 3"),
            Some(vec![
                sql("SELECT 'it''s'; "),
                Piece::Checkpoint,
                sql("SELECT 2; select 3")
            ])
        );
        assert_eq!(
            split_at_checkpoints("Checkpoint ; checkpoint"),
            Some(vec![Piece::Checkpoint, Piece::Checkpoint])
        );
    }

    #[test]
    fn checkpoint_as_a_name_or_inside_text_is_not_a_statement() {
        assert_eq!(split_at_checkpoints("SELECT 'checkpoint'"), None);
        assert_eq!(split_at_checkpoints("SELECT checkpoint FROM t"), None);
        assert_eq!(split_at_checkpoints("\"checkpoint\""), None);
    }
}

/// The OVERRIDING clause the parser recorded on an INSERT, if any.
pub fn insert_overriding(ins: &ast::Insert) -> Option<Overriding> {
    let setting = ins
        .settings
        .as_ref()?
        .iter()
        .find(|s| s.key.value == OVERRIDING_SETTING)?;
    match &setting.value {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) if s == "system" => Some(Overriding::System),
            ast::Value::SingleQuotedString(s) if s == "user" => Some(Overriding::User),
            _ => None,
        },
        _ => None,
    }
}

fn apply_note(stmt: &mut Statement, note: Note) {
    match (stmt, note) {
        (Statement::CreateRole(role), Note::CreateUser) => {
            role.login.get_or_insert(true);
        }
        (Statement::StartTransaction { modifier, .. }, Note::Deferrable) => {
            *modifier = Some(DEFERRABLE_MARKER);
        }
        (Statement::CreateTable(create), Note::AccessMethod(method)) => {
            create
                .hive_formats
                .get_or_insert_with(Default::default)
                .storage = Some(ast::HiveIOFormat::Using {
                format: ast::Ident::new(method.as_str()),
            });
        }
        (Statement::CreateTable(create), Note::NoData) => {
            if let Some(query) = create.query.as_mut() {
                query.fetch = None;
                query.limit_clause = Some(ast::LimitClause::LimitOffset {
                    limit: Some(ast::Expr::value(ast::Value::Number("0".into(), false))),
                    offset: None,
                    limit_by: vec![],
                });
            }
        }
        (stmt @ Statement::AlterTable(_), Note::IdentitySequence(name)) => {
            sequence::add_identity_sequence(stmt, name)
        }
        (Statement::Insert(ins), Note::Overriding(o)) => {
            let value = match o {
                Overriding::System => "system",
                Overriding::User => "user",
            };
            ins.settings
                .get_or_insert_with(Vec::new)
                .push(ast::Setting {
                    key: ast::Ident::new(OVERRIDING_SETTING),
                    value: ast::Expr::value(ast::Value::SingleQuotedString(value.into())),
                });
        }
        _ => {}
    }
}

/// Rewrites each statement's tokens; None when nothing needed rewriting. The notes name the
/// statement by its position among the non-empty statements, as the parser returns them.
fn normalize(tokens: Vec<TokenWithSpan>) -> Option<(Vec<TokenWithSpan>, Vec<(usize, Note)>)> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut notes = Vec::new();
    let mut changed = false;
    let mut index = 0;
    let mut segment = Vec::new();
    let mut tokens = tokens.into_iter().peekable();
    while let Some(t) = tokens.next() {
        let separator = if matches!(t.token, Token::SemiColon | Token::EOF) {
            Some(t)
        } else {
            segment.push(t);
            None
        };
        if separator.is_none() && tokens.peek().is_some() {
            continue;
        }
        if segment.iter().any(|t| !is_space(&t.token)) {
            let (new_segment, rewritten, statement_notes) =
                normalize_statement(std::mem::take(&mut segment));
            changed |= rewritten || !statement_notes.is_empty();
            // Unchanged statements are kept as they are, next to rewritten ones.
            out.extend(new_segment);
            notes.extend(statement_notes.into_iter().map(|n| (index, n)));
            index += 1;
        }
        out.append(&mut segment);
        out.extend(separator);
    }
    changed.then_some((out, notes))
}

/// One statement's tokens (without the `;`): its tokens, whether they were rewritten, and the
/// notes to apply after parsing.
fn normalize_statement(mut seg: Vec<TokenWithSpan>) -> (Vec<TokenWithSpan>, bool, Vec<Note>) {
    let first = significant(&seg).first().map(|&i| keyword_of(&seg[i]));
    let mut notes = Vec::new();
    let mut changed = false;
    match first {
        Some(Keyword::CREATE | Keyword::ALTER) if rewrite_user_as_role(&mut seg).is_some() => {
            changed = true;
            if keyword_of(&seg[significant(&seg)[0]]) == Keyword::CREATE {
                notes.push(Note::CreateUser);
            }
        }
        Some(Keyword::CREATE) => {
            changed |= reorder_create_sequence(&mut seg);
            if let Some(method) = strip_table_access_method(&mut seg) {
                changed = true;
                notes.push(Note::AccessMethod(method));
            }
            if let Some(no_data) = strip_with_data(&mut seg) {
                changed = true;
                notes.extend(no_data.then_some(Note::NoData));
            }
        }
        Some(Keyword::ALTER) => {
            changed |= rewrite_role_membership(&mut seg)
                || rewrite_alter_system(&mut seg)
                || sequence::rewrite_alter_sequence(&mut seg)
                || rewrite_set_access_method(&mut seg);
            if let Some(name) = sequence::strip_identity_sequence_name(&mut seg) {
                changed = true;
                notes.push(Note::IdentitySequence(name));
            }
        }
        Some(Keyword::COPY) => changed |= copy_boolean_options(&mut seg),
        Some(Keyword::VACUUM) => changed |= strip_vacuum_options(&mut seg),
        Some(Keyword::RESET) => changed |= rewrite_reset_time_zone(&mut seg),
        Some(Keyword::FETCH) => changed |= rewrite_fetch(&mut seg, false),
        Some(Keyword::SET) if rewrite_set_constraints(&mut seg) => changed = true,
        Some(Keyword::GRANT | Keyword::REVOKE | Keyword::DROP) => {
            changed |= rewrite_role_membership(&mut seg)
        }
        // REASSIGN is not one of sqlparser's keywords.
        Some(Keyword::NoKeyword)
            if matches!(significant(&seg).first().map(|&i| &seg[i].token),
                Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("reassign")) =>
        {
            changed |= rewrite_role_membership(&mut seg)
        }
        Some(Keyword::BEGIN | Keyword::START | Keyword::SET) => {
            if let Some(deferrable) = strip_deferrable(&mut seg) {
                changed = true;
                notes.extend(deferrable.then_some(Note::Deferrable));
            }
        }
        // MOVE is not one of sqlparser's keywords.
        Some(Keyword::NoKeyword)
            if matches!(significant(&seg).first().map(|&i| &seg[i].token),
                Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("move")) =>
        {
            changed |= rewrite_fetch(&mut seg, true)
        }
        Some(Keyword::INSERT) | Some(Keyword::WITH) => {
            if let Some(o) = strip_overriding(&mut seg) {
                changed = true;
                notes.push(Note::Overriding(o));
            }
        }
        _ => {}
    }
    changed |= reorder_identity_options(&mut seg);
    changed |= mark_variadic_arguments(&mut seg);
    seg.retain(|t| !is_marker(t));
    (seg, changed, notes)
}

/// The name a call's `VARIADIC array` argument is passed by: `f(1, VARIADIC a)` is read as
/// `f(1, shoal_variadic => a)`, which routine resolution takes apart (`routines::resolve_call`).
pub const VARIADIC_ARGUMENT: &str = "shoal_variadic";

/// `VARIADIC expr` as a call's argument (after `(` or `,`) becomes the named argument
/// `shoal_variadic => expr` ([`VARIADIC_ARGUMENT`]). Statements that name a routine's
/// parameters (CREATE, ALTER, DROP FUNCTION ...) keep theirs: there VARIADIC is a mode.
fn mark_variadic_arguments(seg: &mut Vec<TokenWithSpan>) -> bool {
    let sig = significant(seg);
    let declares_parameters = sig.iter().take(6).any(|&i| {
        matches!(
            keyword_of(&seg[i]),
            Keyword::FUNCTION | Keyword::PROCEDURE | Keyword::AGGREGATE
        )
    });
    if declares_parameters {
        return false;
    }
    let at: Vec<usize> = sig
        .windows(2)
        .filter(|w| {
            matches!(seg[w[0]].token, Token::LParen | Token::Comma)
                && keyword_of(&seg[w[1]]) == Keyword::VARIADIC
        })
        .map(|w| w[1])
        .collect();
    for &i in at.iter().rev() {
        seg[i].token = Token::make_word(VARIADIC_ARGUMENT, None);
        seg.insert(i + 1, TokenWithSpan::wrap(Token::RArrow));
    }
    !at.is_empty()
}

/// `SET CONSTRAINTS {ALL | name [, ...]} {DEFERRED | IMMEDIATE}`, which sqlparser does not
/// know, becomes `SET shoal_set_constraints = '<the text after CONSTRAINTS>'`
/// ([`SET_CONSTRAINTS_VARIABLE`]); the session reads the text back.
fn rewrite_set_constraints(seg: &mut Vec<TokenWithSpan>) -> bool {
    let sig = significant(seg);
    let is_constraints = sig.get(1).is_some_and(|&i| {
        matches!(&seg[i].token, Token::Word(w)
            if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("constraints"))
    });
    if !is_constraints {
        return false;
    }
    let rest: Vec<String> = sig[2..].iter().map(|&i| seg[i].token.to_string()).collect();
    let text = rest.join(" ");
    *seg = set_of_text(SET_CONSTRAINTS_VARIABLE, text);
    true
}

/// The tokens of `SET variable = 'text'`, the form the rewrites of statements sqlparser does
/// not read take: the executor recognises the variable and reads the text back.
pub(super) fn set_of_text(variable: &str, text: String) -> Vec<TokenWithSpan> {
    let word = |w: &str| TokenWithSpan::wrap(Token::make_word(w, None));
    vec![
        word("SET"),
        TokenWithSpan::wrap(Token::Whitespace(Whitespace::Space)),
        word(variable),
        TokenWithSpan::wrap(Token::Eq),
        TokenWithSpan::wrap(Token::SingleQuotedString(text)),
    ]
}

/// `GRANT role TO role` and `REVOKE role FROM role`, which sqlparser does not read, become
/// `SET shoal_role_membership = '<the statement>'` ([`ROLE_COMMAND_VARIABLE`]); the
/// statement's text is read again by `ddl::role_membership`.
fn rewrite_role_membership(seg: &mut Vec<TokenWithSpan>) -> bool {
    let sig = significant(seg);
    let words: Vec<String> = sig.iter().map(|&i| seg[i].token.to_string()).collect();
    if !crate::ddl::role_membership::is_role_command(&words) {
        return false;
    }
    let text = words.join(" ");
    *seg = set_of_text(ROLE_COMMAND_VARIABLE, text);
    true
}

/// `ALTER SYSTEM ...`, which sqlparser does not read, becomes `SET shoal_alter_system =
/// '<the statement>'` ([`ALTER_SYSTEM_VARIABLE`]), read again by `config::alter_system`.
fn rewrite_alter_system(seg: &mut Vec<TokenWithSpan>) -> bool {
    let sig = significant(seg);
    let is_system = sig
        .get(1)
        .is_some_and(|&i| keyword_of(&seg[i]) == Keyword::SYSTEM);
    if !is_system {
        return false;
    }
    let text: String = seg.iter().map(|t| t.token.to_string()).collect();
    *seg = set_of_text(ALTER_SYSTEM_VARIABLE, text.trim().to_string());
    true
}

/// Removes `[NOT] DEFERRABLE` (and a comma that joins it to another mode) from a statement's
/// transaction modes; Some(true) if it was DEFERRABLE, Some(false) if NOT DEFERRABLE.
fn strip_deferrable(seg: &mut [TokenWithSpan]) -> Option<bool> {
    let sig = significant(seg);
    let at = sig
        .iter()
        .position(|&i| keyword_of(&seg[i]) == Keyword::DEFERRABLE)?;
    let mut first = at;
    let deferrable = !(at > 0 && keyword_of(&seg[sig[at - 1]]) == Keyword::NOT);
    if !deferrable {
        first -= 1;
    }
    let mut remove: Vec<usize> = sig[first..=at].to_vec();
    if first > 0 && seg[sig[first - 1]].token == Token::Comma {
        remove.push(sig[first - 1]);
    } else if let Some(&next) = sig.get(at + 1) {
        if seg[next].token == Token::Comma {
            remove.push(next);
        }
    }
    for i in remove {
        seg[i] = marker();
    }
    Some(deferrable)
}

/// `FETCH`/`MOVE [direction] [FROM | IN] cursor` in any of PostgreSQL's spellings becomes the
/// `FETCH direction FROM cursor` sqlparser takes: a missing direction is NEXT, FORWARD and
/// BACKWARD alone are NEXT and PRIOR, signed counts become one number token, and a MOVE is a
/// FETCH marked `INTO shoal_move` (see `session::MOVE_MARKER`).
fn rewrite_fetch(seg: &mut Vec<TokenWithSpan>, is_move: bool) -> bool {
    let sig = significant(seg);
    let tokens: Vec<&Token> = sig.iter().map(|&i| &seg[i].token).collect();
    let kw = |k: usize| match tokens.get(k) {
        Some(Token::Word(w)) if w.quote_style.is_none() => w.keyword,
        _ => Keyword::NoKeyword,
    };
    // A count with its sign, and how many tokens it took.
    let count_at = |k: usize| -> Option<(String, usize)> {
        match (tokens.get(k), tokens.get(k + 1)) {
            (Some(Token::Minus), Some(Token::Number(n, _))) => Some((format!("-{n}"), 2)),
            (Some(Token::Plus), Some(Token::Number(n, _))) => Some((n.clone(), 2)),
            (Some(Token::Number(n, _)), _) => Some((n.clone(), 1)),
            _ => None,
        }
    };
    let word = |k: Keyword| Token::make_keyword(&format!("{k:?}"));
    let number = |n: String| Token::Number(n, false);
    let mut at = 1;
    let direction: Vec<Token> = match kw(at) {
        k @ (Keyword::NEXT | Keyword::PRIOR | Keyword::FIRST | Keyword::LAST | Keyword::ALL) => {
            at += 1;
            vec![word(k)]
        }
        k @ (Keyword::ABSOLUTE | Keyword::RELATIVE) => {
            let Some((n, used)) = count_at(at + 1) else {
                return false;
            };
            at += 1 + used;
            vec![word(k), number(n)]
        }
        k @ (Keyword::FORWARD | Keyword::BACKWARD) => {
            if kw(at + 1) == Keyword::ALL {
                at += 2;
                vec![word(k), word(Keyword::ALL)]
            } else if let Some((n, used)) = count_at(at + 1) {
                at += 1 + used;
                vec![word(k), number(n)]
            } else {
                at += 1;
                match k {
                    Keyword::FORWARD => vec![word(Keyword::NEXT)],
                    _ => vec![word(Keyword::PRIOR)],
                }
            }
        }
        _ => match count_at(at) {
            Some((n, used)) => {
                at += used;
                vec![number(n)]
            }
            None => vec![word(Keyword::NEXT)],
        },
    };
    if matches!(kw(at), Keyword::FROM | Keyword::IN) {
        at += 1;
    }
    let (Some(&name_at), None) = (sig.get(at), sig.get(at + 1)) else {
        return false;
    };
    if !matches!(seg[name_at].token, Token::Word(_)) {
        return false;
    }
    let name = seg[name_at].clone();
    let mut out = vec![TokenWithSpan::wrap(word(Keyword::FETCH))];
    out.extend(direction.into_iter().map(TokenWithSpan::wrap));
    out.push(TokenWithSpan::wrap(word(Keyword::FROM)));
    out.push(name);
    if is_move {
        out.push(TokenWithSpan::wrap(word(Keyword::INTO)));
        out.push(TokenWithSpan::wrap(Token::make_word(
            crate::session::MOVE_MARKER,
            None,
        )));
    }
    // Spaces between the words, for the parser's error messages.
    let mut spaced = Vec::with_capacity(out.len() * 2);
    for t in out {
        if !spaced.is_empty() {
            spaced.push(TokenWithSpan::wrap(Token::Whitespace(Whitespace::Space)));
        }
        spaced.push(t);
    }
    *seg = spaced;
    true
}

/// `RESET TIME ZONE` (PostgreSQL's spelling, which sqlparser lacks) becomes `RESET timezone`.
fn rewrite_reset_time_zone(seg: &mut [TokenWithSpan]) -> bool {
    let sig = significant(seg);
    let [_, time, zone] = sig.as_slice() else {
        return false;
    };
    if keyword_of(&seg[*time]) != Keyword::TIME || keyword_of(&seg[*zone]) != Keyword::ZONE {
        return false;
    }
    seg[*time].token = Token::make_word("timezone", None);
    seg[*zone] = marker();
    true
}

fn is_space(token: &Token) -> bool {
    matches!(token, Token::Whitespace(_))
}

/// Removes `USING method` from `CREATE [TEMP | UNLOGGED] TABLE name (...) USING method ...`
/// (outside parentheses and before any `AS query`) and returns the method's name, lower-cased.
fn strip_table_access_method(seg: &mut [TokenWithSpan]) -> Option<String> {
    let sig = significant(seg);
    let table_at = sig
        .iter()
        .take(4)
        .position(|&i| keyword_of(&seg[i]) == Keyword::TABLE)?;
    let mut depth = 0usize;
    for (k, &i) in sig.iter().enumerate().skip(table_at + 1) {
        match &seg[i].token {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Word(_) if depth == 0 && keyword_of(&seg[i]) == Keyword::AS => return None,
            Token::Word(_) if depth == 0 && keyword_of(&seg[i]) == Keyword::USING => {
                let &name_at = sig.get(k + 1)?;
                let Token::Word(w) = &seg[name_at].token else {
                    return None;
                };
                // Unknown methods get PostgreSQL's error from the DDL executor.
                let method = w.value.to_ascii_lowercase();
                seg[i] = marker();
                seg[name_at] = marker();
                return Some(method);
            }
            _ => {}
        }
    }
    None
}

/// `ALTER TABLE ... SET ACCESS METHOD m` (the statement's last four significant tokens) becomes
/// `ALTER TABLE ... SET (shoal_access_method = m)`.
fn rewrite_set_access_method(seg: &mut Vec<TokenWithSpan>) -> bool {
    let sig = significant(seg);
    if sig.len() < 6 || keyword_of(&seg[sig[1]]) != Keyword::TABLE {
        return false;
    }
    let tail = &sig[sig.len() - 4..];
    let kw = |i: usize| keyword_of(&seg[tail[i]]);
    // METHOD is not one of sqlparser's keywords.
    let is_method = matches!(&seg[tail[2]].token,
        Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("method"));
    if kw(0) != Keyword::SET || kw(1) != Keyword::ACCESS || !is_method {
        return false;
    }
    if !matches!(seg[tail[3]].token, Token::Word(_)) {
        return false;
    }
    let (access_at, method_at, name_at) = (tail[1], tail[2], tail[3]);
    seg[access_at] = TokenWithSpan::wrap(Token::LParen);
    seg[method_at] = TokenWithSpan::wrap(Token::make_word(ACCESS_METHOD_OPTION, None));
    seg.insert(name_at, TokenWithSpan::wrap(Token::Eq));
    seg.insert(name_at + 2, TokenWithSpan::wrap(Token::RParen));
    true
}

/// Removed tokens are first replaced by this marker (an empty-span space) and dropped at the
/// end, so the indices of the other tokens stay valid while a statement is rewritten.
fn marker() -> TokenWithSpan {
    TokenWithSpan::wrap(Token::Whitespace(Whitespace::Space))
}

fn is_marker(t: &TokenWithSpan) -> bool {
    t.span.start.line == 0 && is_space(&t.token)
}

/// Indices of the tokens that are not whitespace or comments.
fn significant(seg: &[TokenWithSpan]) -> Vec<usize> {
    (0..seg.len())
        .filter(|&i| !is_space(&seg[i].token))
        .collect()
}

fn keyword_of(t: &TokenWithSpan) -> Keyword {
    match &t.token {
        Token::Word(w) if w.quote_style.is_none() => w.keyword,
        _ => Keyword::NoKeyword,
    }
}

/// COPY's boolean options written on/off, 1/0 or as strings become TRUE/FALSE.
fn copy_boolean_options(seg: &mut [TokenWithSpan]) -> bool {
    let sig = significant(seg);
    let mut changed = false;
    for w in sig.windows(3) {
        let after_separator = matches!(seg[w[0]].token, Token::LParen | Token::Comma);
        let boolean_option = matches!(keyword_of(&seg[w[1]]), Keyword::FREEZE | Keyword::HEADER);
        if !(after_separator && boolean_option) {
            continue;
        }
        let value = match &seg[w[2]].token {
            Token::Word(word) => word.value.to_ascii_lowercase(),
            Token::Number(n, _) => n.clone(),
            Token::SingleQuotedString(s) => s.to_ascii_lowercase(),
            _ => continue,
        };
        let (keyword, text) = match value.as_str() {
            "on" | "1" | "true" => (Keyword::TRUE, "TRUE"),
            "off" | "0" | "false" => (Keyword::FALSE, "FALSE"),
            _ => continue,
        };
        if keyword_of(&seg[w[2]]) != keyword {
            seg[w[2]].token = Token::make_keyword(text);
            changed = true;
        }
    }
    changed
}

/// Removes a trailing `WITH DATA` / `WITH NO DATA` of CREATE TABLE AS; Some(true) for NO DATA.
fn strip_with_data(seg: &mut [TokenWithSpan]) -> Option<bool> {
    let sig = significant(seg);
    let kw = |p: usize| {
        sig.get(p)
            .map_or(Keyword::NoKeyword, |&i| keyword_of(&seg[i]))
    };
    if !(1..4).any(|p| kw(p) == Keyword::TABLE) || kw(sig.len() - 1) != Keyword::DATA {
        return None;
    }
    let n = sig.len();
    let (start, no_data) = if n >= 3 && kw(n - 3) == Keyword::WITH && kw(n - 2) == Keyword::NO {
        (n - 3, true)
    } else if n >= 2 && kw(n - 2) == Keyword::WITH {
        (n - 2, false)
    } else {
        return None;
    };
    for &i in &sig[start..] {
        seg[i] = marker();
    }
    Some(no_data)
}

/// Removes `OVERRIDING {SYSTEM | USER} VALUE` from an INSERT and says which it was.
fn strip_overriding(seg: &mut [TokenWithSpan]) -> Option<Overriding> {
    let sig = significant(seg);
    let w = sig.windows(3).find(|w| {
        // OVERRIDING is not among sqlparser's keywords, so it is matched by its text.
        matches!(&seg[w[0]].token, Token::Word(word) if word.quote_style.is_none()
            && word.value.eq_ignore_ascii_case("overriding"))
            && matches!(keyword_of(&seg[w[1]]), Keyword::SYSTEM | Keyword::USER)
            && keyword_of(&seg[w[2]]) == Keyword::VALUE
    })?;
    let overriding = if keyword_of(&seg[w[1]]) == Keyword::SYSTEM {
        Overriding::System
    } else {
        Overriding::User
    };
    let w = w.to_vec();
    for i in w {
        seg[i] = marker();
    }
    Some(overriding)
}

/// Reduces a PostgreSQL VACUUM to `VACUUM [FULL] [table]`, which sqlparser parses.
fn strip_vacuum_options(seg: &mut [TokenWithSpan]) -> bool {
    let sig = significant(seg);
    let mut remove = Vec::new();
    let mut p = 1;
    if sig.get(p).is_some_and(|&i| seg[i].token == Token::LParen) {
        let close = (p..sig.len()).find(|&q| seg[sig[q]].token == Token::RParen);
        let Some(close) = close else {
            return false;
        };
        remove.extend(p..=close);
        p = close + 1;
    }
    while p < sig.len() {
        match keyword_of(&seg[sig[p]]) {
            Keyword::FULL => {}
            Keyword::FREEZE | Keyword::VERBOSE | Keyword::ANALYZE => remove.push(p),
            _ => break,
        }
        p += 1;
    }
    let after_first_table = skip_name(seg, &sig, p);
    if p < after_first_table && after_first_table < sig.len() {
        remove.extend(after_first_table..sig.len());
    }
    for &q in &remove {
        seg[sig[q]] = marker();
    }
    !remove.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_distinct_from_binds_tighter_than_and_or() {
        let cases = [
            (
                "SELECT a IS NOT DISTINCT FROM b AND c AND d IS DISTINCT FROM e OR f",
                "SELECT a IS NOT DISTINCT FROM b AND c AND d IS DISTINCT FROM e OR f",
            ),
            (
                "SELECT a IS DISTINCT FROM (b AND c)",
                "SELECT a IS DISTINCT FROM (b AND c)",
            ),
        ];
        for (sql, printed) in cases {
            let stmt = parse_statements(sql).expect("parses").remove(0);
            assert_eq!(stmt.to_string(), printed);
        }
        let stmt = parse_statements("SELECT 1 WHERE x IS DISTINCT FROM y AND z")
            .expect("parses")
            .remove(0);
        let Statement::Query(q) = stmt else { panic!() };
        let ast::SetExpr::Select(sel) = q.body.as_ref() else {
            panic!()
        };
        assert!(
            matches!(
                sel.selection,
                Some(ast::Expr::BinaryOp {
                    op: ast::BinaryOperator::And,
                    ..
                })
            ),
            "{:?}",
            sel.selection
        );
    }

    #[test]
    fn access_method_is_moved_and_neighbours_are_kept() {
        let stmts = parse_statements(
            "CREATE TABLE t (a int, b int DEFAULT 1) USING Columnar; INSERT INTO t VALUES (1); \
             SELECT 2",
        )
        .expect("parses");
        assert_eq!(stmts.len(), 3, "statements next to a rewritten one survive");
        let Statement::CreateTable(ct) = &stmts[0] else {
            panic!("not a CREATE TABLE: {}", stmts[0]);
        };
        let storage = ct.hive_formats.as_ref().and_then(|h| h.storage.as_ref());
        assert!(
            matches!(storage, Some(ast::HiveIOFormat::Using { format }) if format.value == "columnar"),
            "{storage:?}"
        );
        assert!(matches!(stmts[1], Statement::Insert(_)));
    }

    #[test]
    fn set_access_method_becomes_a_set_option() {
        let stmts =
            parse_statements("ALTER TABLE IF EXISTS s.t SET ACCESS METHOD Columnar").unwrap();
        let Statement::AlterTable(at) = &stmts[0] else {
            panic!("{stmts:?}")
        };
        assert_eq!(at.name.to_string(), "s.t");
        assert!(at.if_exists);
        let [ast::AlterTableOperation::SetOptionsParens { options }] = &at.operations[..] else {
            panic!("{:?}", at.operations)
        };
        assert_eq!(
            options[0].to_string(),
            format!("{ACCESS_METHOD_OPTION} = Columnar")
        );
    }

    #[test]
    fn access_method_and_no_data_both_apply() {
        let stmts = parse_statements("CREATE TABLE c USING columnar AS SELECT 1 AS a WITH NO DATA")
            .expect("parses");
        let Statement::CreateTable(ct) = &stmts[0] else {
            panic!("not a CREATE TABLE");
        };
        assert!(ct
            .hive_formats
            .as_ref()
            .and_then(|h| h.storage.as_ref())
            .is_some());
        let limit = ct.query.as_ref().and_then(|q| q.limit_clause.as_ref());
        assert!(limit.is_some(), "WITH NO DATA becomes LIMIT 0");
    }

    #[test]
    fn using_inside_a_query_is_not_an_access_method() {
        let stmts = parse_statements("CREATE TABLE j AS SELECT * FROM a JOIN b USING (id)")
            .expect("parses");
        let Statement::CreateTable(ct) = &stmts[0] else {
            panic!("not a CREATE TABLE");
        };
        assert!(ct
            .hive_formats
            .as_ref()
            .and_then(|h| h.storage.as_ref())
            .is_none());
    }
}

/// The first reserved word (unquoted) right after TABLE or INTO, where only a relation name
/// may stand: PostgreSQL reports its syntax error there, sqlparser at the next token.
pub fn reserved_word_as_name(sql: &str) -> Option<(String, u32)> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
        .tokenize_with_location()
        .ok()?;
    let mut words = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .map(|t| match &t.token {
            Token::Word(w) => Some((w, t.span.start)),
            _ => None,
        });
    let mut previous = words.next()?;
    for word in words {
        if let (Some((before, _)), Some((name, at))) = (previous, word) {
            let introduces_name = matches!(before.keyword, Keyword::TABLE | Keyword::INTO);
            let reserved = crate::query::checks::RESERVED_KEYWORDS
                .contains(&name.value.to_lowercase().as_str());
            // ONLY is allowed there: ALTER TABLE ONLY t, TRUNCATE TABLE ONLY t.
            if introduces_name
                && reserved
                && name.quote_style.is_none()
                && name.keyword != Keyword::ONLY
            {
                return Some((name.value.clone(), char_position(sql, at.line, at.column)?));
            }
        }
        previous = word;
    }
    None
}

/// The 1-based character offset of sqlparser's 1-based (line, column) in `sql`, as PostgreSQL's
/// error position counts.
pub fn char_position(sql: &str, line: u64, column: u64) -> Option<u32> {
    if line == 0 || column == 0 {
        return None;
    }
    let mut offset: u64 = 0;
    for (index, text) in sql.split('\n').enumerate() {
        if index as u64 + 1 == line {
            return u32::try_from(offset + column).ok();
        }
        // The line's characters and its newline.
        offset += text.chars().count() as u64 + 1;
    }
    None
}

/// Where sqlparser's error message says it stopped: `... found: X at Line: 1, Column: 8`, or the
/// end of the input.
pub fn error_position(sql: &str, parser_message: &str) -> Option<u32> {
    let found = parser_message.rsplit_once("found: ")?.1;
    if found.trim() == "EOF" {
        return u32::try_from(
            sql.trim_end_matches([' ', '\n', '\t', '\r', ';'])
                .chars()
                .count()
                + 1,
        )
        .ok();
    }
    let location = found.rsplit_once(" at Line: ")?.1;
    let (line, column) = location.split_once(", Column: ")?;
    char_position(sql, line.trim().parse().ok()?, column.trim().parse().ok()?)
}

/// Where a name an error message quotes first appears in `sql` as an identifier: PostgreSQL
/// reports the position of the relation or column it could not find (`relation "t" does not
/// exist`), which psql marks with a caret.
pub fn name_position(sql: &str, name: &str) -> Option<u32> {
    let first = name.split('.').next()?;
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
        .tokenize_with_location()
        .ok()?;
    let at = tokens.iter().find(|t| match &t.token {
        Token::Word(w) if w.quote_style.is_none() => w.value.to_lowercase() == first,
        Token::Word(w) => w.value == first,
        _ => false,
    })?;
    char_position(sql, at.span.start.line, at.span.start.column)
}
