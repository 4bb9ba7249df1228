//! The routine statements sqlparser does not read as PostgreSQL writes them, and running CALL
//! and DO.
//!
//! - `DO [LANGUAGE l] 'body' [LANGUAGE l]` becomes `CALL pg_catalog.shoal_do('body', 'l')`
//!   ([`DO_FUNCTION`]), which `run_call` runs as an anonymous block.
//! - `CREATE [OR REPLACE] PROCEDURE ...` is read as the CREATE FUNCTION it resembles and
//!   wrapped in sqlparser's (MS SQL) `Statement::CreateProcedure`, whose one body statement is
//!   that CREATE FUNCTION; `define` makes it a procedure.

use datafusion::sql::sqlparser::ast::{
    self, ConditionalStatements, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Statement,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use shoal_storage::catalog_functions::RoutineKind;
use shoal_storage::Transaction;

use super::call::invoke;
use super::plpgsql::{self, Invocation, Returns};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

/// The function a DO statement is read as.
pub const DO_FUNCTION: &str = "shoal_do";

/// Reads `sql` as a DO or CREATE PROCEDURE statement; None if it is neither.
pub fn parse(sql: &str) -> Option<SqlResult<Statement>> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let words: Vec<&Token> = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let word = |i: usize| match words.get(i) {
        Some(Token::Word(w)) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
        _ => String::new(),
    };
    match (
        word(0).as_str(),
        word(1).as_str(),
        word(2).as_str(),
        word(3).as_str(),
    ) {
        ("DO", ..) => Some(parse_do(&words[1..])),
        ("CREATE", "PROCEDURE", ..) | ("CREATE", "OR", "REPLACE", "PROCEDURE") => {
            Some(parse_create_procedure(&with_atomic_body_quoted(sql)))
        }
        ("CREATE", "TRIGGER", ..)
        | ("CREATE", "CONSTRAINT", "TRIGGER", _)
        | ("CREATE", "OR", "REPLACE", "TRIGGER") => {
            let rewritten = with_trigger_arguments_quoted(sql)?;
            // Still unreadable: the original statement's syntax error is the one to report.
            match crate::parse::parse_statements(&rewritten) {
                Ok(mut statements) if statements.len() == 1 => statements.pop().map(Ok),
                _ => None,
            }
        }
        ("CREATE", "FUNCTION", ..) | ("CREATE", "OR", "REPLACE", "FUNCTION") => {
            let quoted = with_atomic_body_quoted(sql);
            (quoted != sql).then(|| {
                let mut statements = crate::session::parse_sql(&quoted)?;
                match statements.len() {
                    1 => Ok(statements.pop().expect("one")),
                    _ => Err(SqlError::syntax("syntax error in CREATE FUNCTION")),
                }
            })
        }
        _ => None,
    }
}

/// CREATE TRIGGER with the arguments of `EXECUTE FUNCTION f(arguments)` (string constants,
/// numbers or names, all of which the trigger sees as strings in TG_ARGV) written as quoted
/// identifiers, which sqlparser reads where it expects the argument types of a signature;
/// `trigger::create` takes them back as strings. None if there are no arguments to rewrite.
fn with_trigger_arguments_quoted(sql: &str) -> Option<String> {
    let lower = sql.to_ascii_lowercase();
    let execute = lower
        .rfind("execute function")
        .or_else(|| lower.rfind("execute procedure"))?;
    let open = execute + sql[execute..].find('(')?;
    let close = sql.rfind(')')?;
    if close <= open {
        return None;
    }
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, &sql[open + 1..close])
        .tokenize()
        .ok()?;
    let mut arguments = vec![String::new()];
    for token in tokens {
        let current = arguments.last_mut().expect("one argument at least");
        match token {
            Token::Comma => arguments.push(String::new()),
            Token::Whitespace(_) => {}
            Token::SingleQuotedString(s) => current.push_str(&s),
            Token::Word(w) if w.quote_style.is_some() => current.push_str(&w.value),
            Token::Word(w) => current.push_str(&w.value.to_ascii_lowercase()),
            other => current.push_str(&other.to_string()),
        }
    }
    let quoted: Vec<String> = arguments
        .iter()
        .map(|a| format!("\"{}\"", a.replace('"', "\"\"")))
        .collect();
    Some(format!(
        "{}({}){}",
        &sql[..open],
        quoted.join(", "),
        &sql[close + 1..]
    ))
}

/// A `BEGIN ATOMIC ... END` body (the SQL-standard form sqlparser does not read) as the string
/// constant `'BEGIN ATOMIC ... END'`, which `routines::body_form` knows by its first words.
fn with_atomic_body_quoted(sql: &str) -> String {
    if sql.contains("$shoal_atomic$") {
        return sql.to_string();
    }
    let lower = sql.to_ascii_lowercase();
    let Some(at) = lower.find("begin atomic").or_else(|| {
        let b = lower.find("begin")?;
        lower[b + 5..]
            .trim_start()
            .starts_with("atomic")
            .then_some(b)
    }) else {
        return sql.to_string();
    };
    let body = sql[at..].trim_end().trim_end_matches(';').trim_end();
    format!("{} AS $shoal_atomic${body}$shoal_atomic$", &sql[..at])
}

fn parse_do(tokens: &[&Token]) -> SqlResult<Statement> {
    let mut body = None;
    let mut language = "plpgsql".to_string();
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i] {
            Token::SingleQuotedString(s) => body = Some(s.clone()),
            Token::DollarQuotedString(s) => body = Some(s.value.clone()),
            Token::Word(w) if w.value.eq_ignore_ascii_case("language") => {
                i += 1;
                language = match tokens.get(i) {
                    Some(Token::Word(w)) => w.value.to_ascii_lowercase(),
                    Some(Token::SingleQuotedString(s)) => s.to_ascii_lowercase(),
                    _ => return Err(SqlError::syntax("syntax error at or near \"LANGUAGE\"")),
                };
            }
            Token::SemiColon | Token::EOF => {}
            other => {
                return Err(SqlError::syntax(format!(
                    "syntax error at or near \"{other}\""
                )))
            }
        }
        i += 1;
    }
    let body = body.ok_or_else(|| SqlError::syntax("no inline code specified"))?;
    let arg = |s: String| {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::value(
            ast::Value::SingleQuotedString(s),
        )))
    };
    Ok(Statement::Call(ast::Function {
        name: ast::ObjectName::from(vec![
            ast::Ident::new("pg_catalog"),
            ast::Ident::new(DO_FUNCTION),
        ]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![arg(body), arg(language)],
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    }))
}

fn parse_create_procedure(sql: &str) -> SqlResult<Statement> {
    // PROCEDURE is the first word of that spelling: CREATE [OR REPLACE] PROCEDURE.
    let lower = sql.to_ascii_lowercase();
    let at = lower
        .find("procedure")
        .ok_or_else(|| SqlError::syntax("syntax error at or near \"PROCEDURE\""))?;
    let as_function = format!("{}FUNCTION{}", &sql[..at], &sql[at + "procedure".len()..]);
    let mut statements = crate::session::parse_sql(&as_function)?;
    match (statements.len(), statements.pop()) {
        (1, Some(Statement::CreateFunction(cf))) => {
            if cf.return_type.is_some() {
                return Err(SqlError::syntax("syntax error at or near \"RETURNS\""));
            }
            Ok(Statement::CreateProcedure {
                or_alter: cf.or_replace,
                name: cf.name.clone(),
                params: None,
                language: cf.language.clone(),
                body: ConditionalStatements::Sequence {
                    statements: vec![Statement::CreateFunction(cf)],
                },
            })
        }
        _ => Err(SqlError::syntax("syntax error in CREATE PROCEDURE")),
    }
}

/// The CREATE FUNCTION inside a CREATE PROCEDURE that `parse` made.
pub fn procedure_definition(stmt: &Statement) -> Option<&ast::CreateFunction> {
    match stmt {
        Statement::CreateProcedure {
            body: ConditionalStatements::Sequence { statements },
            ..
        } => match statements.as_slice() {
            [Statement::CreateFunction(cf)] => Some(cf),
            _ => None,
        },
        _ => None,
    }
}

/// CALL of a procedure (or a DO block).
pub async fn run_call(
    session: &mut Session,
    txn: &mut Transaction,
    f: ast::Function,
) -> SqlResult<StatementResult> {
    let parts = crate::query::rewrite::object_name_parts(&f.name);
    let args = match &f.args {
        FunctionArguments::List(l) => l.args.clone(),
        _ => Vec::new(),
    };
    // A procedure run outside a transaction block may end transactions (COMMIT in its body).
    let transaction_control = !session.statement_in_block();
    if parts == ["pg_catalog", DO_FUNCTION] {
        let text = |i: usize| match args.get(i) {
            Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) => match &v.value {
                ast::Value::SingleQuotedString(s) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        };
        let (Some(body), Some(language)) = (text(0), text(1)) else {
            return Err(SqlError::internal("a DO block without its body"));
        };
        run_do(session, txn, &body, &language, transaction_control).await?;
        return Ok(StatementResult::command("DO"));
    }
    let call = {
        let schemas = session.scope.lookup_schemas();
        let catalog = session.engine.catalog.read();
        super::resolve_routine_call(&catalog, &schemas, &parts, &args, RoutineKind::Procedure)?
    };
    let Some(call) = call else {
        let name = parts.last().cloned().unwrap_or_default();
        let types: Vec<String> = args.iter().map(super::apparent_type_name).collect();
        return Err(SqlError::new(
            code::UNDEFINED_FUNCTION,
            format!("procedure {name}({}) does not exist", types.join(", ")),
        )
        .with_hint(
            "No procedure matches the given name and argument types. You might need to add explicit type casts.",
        ));
    };
    let mut arg_exprs = call.args.clone();
    // Calls in the arguments run first.
    let mut holder = Statement::Query(Box::new(select_list(&arg_exprs)?));
    super::call::evaluate_calls(session, txn, &mut holder, false).await?;
    if let Statement::Query(q) = holder {
        if let ast::SetExpr::Select(s) = *q.body {
            arg_exprs = s
                .projection
                .into_iter()
                .filter_map(|i| match i {
                    // A call run first is named after its function.
                    ast::SelectItem::UnnamedExpr(e)
                    | ast::SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
                    _ => None,
                })
                .collect();
        }
    }
    let values = argument_values(session, txn, &call.routine, arg_exprs).await?;
    let outcome = invoke(session, txn, &call.routine, values, transaction_control).await?;
    // A procedure with INOUT (or OUT) parameters answers with one row of them.
    match outcome {
        plpgsql::Outcome::Value(plpgsql::vars::Datum::Row(fields)) if !fields.is_empty() => {
            Ok(one_row(session, fields)?)
        }
        _ => Ok(StatementResult::command("CALL")),
    }
}

fn select_list(exprs: &[Expr]) -> SqlResult<ast::Query> {
    let items: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
    let sql = format!(
        "SELECT {}",
        if items.is_empty() {
            "1".to_string()
        } else {
            items.join(", ")
        }
    );
    match crate::parse::parse_statements(&sql)
        .ok()
        .and_then(|mut s| s.pop())
    {
        Some(Statement::Query(q)) if !items.is_empty() => Ok(*q),
        Some(Statement::Query(mut q)) => {
            if let ast::SetExpr::Select(s) = q.body.as_mut() {
                s.projection.clear();
            }
            Ok(*q)
        }
        _ => Err(SqlError::internal("call arguments do not parse")),
    }
}

async fn argument_values(
    session: &mut Session,
    txn: &mut Transaction,
    def: &shoal_storage::catalog_functions::RoutineDef,
    args: Vec<Expr>,
) -> SqlResult<Vec<plpgsql::vars::Datum>> {
    use shoal_storage::catalog_functions::ArgMode;
    let types: Vec<_> = def
        .args
        .iter()
        .filter(|a| a.mode != ArgMode::Out)
        .map(|a| a.data_type.clone())
        .collect();
    if args.is_empty() {
        return Ok(Vec::new());
    }
    // As a function's arguments are (see `argument::unchecked`): the call's own arguments
    // may have been run already, their values now constants that DataFusion would type
    // differently from PostgreSQL.
    let args: Vec<Expr> = args.into_iter().map(super::argument::unchecked).collect();
    let query = select_list(&args)?;
    let result = session
        .run_embedded(txn, Statement::Query(Box::new(query)))
        .await?;
    let row = plpgsql::vars::rows_of(&result.batches)?
        .pop()
        .ok_or_else(|| SqlError::internal("call arguments gave no row"))?;
    Ok(row
        .into_iter()
        .zip(types)
        .map(|(f, t)| plpgsql::vars::Datum::Scalar(t, f.value))
        .collect())
}

/// The row of a procedure's output parameters, as CALL returns it.
fn one_row(session: &Session, fields: Vec<plpgsql::vars::Field>) -> SqlResult<StatementResult> {
    use datafusion::arrow::datatypes::Schema;
    use datafusion::arrow::record_batch::RecordBatch;
    let _ = session;
    let mut arrow_fields = Vec::with_capacity(fields.len());
    let mut arrays = Vec::with_capacity(fields.len());
    for f in &fields {
        arrow_fields.push(crate::types::arrow_field(&f.name, &f.data_type));
        arrays.push(crate::types::array_from_values(
            &f.data_type,
            std::iter::once(&f.value),
        ));
    }
    let schema = std::sync::Arc::new(Schema::new(arrow_fields));
    let batch = RecordBatch::try_new(schema.clone(), arrays)
        .map_err(|e| SqlError::internal(e.to_string()))?;
    Ok(StatementResult::Rows {
        columns: crate::session::columns_of_schema(&schema),
        batches: vec![batch],
        tag: "CALL",
    })
}

/// DO: an anonymous PL/pgSQL block.
async fn run_do(
    session: &mut Session,
    txn: &mut Transaction,
    body: &str,
    language: &str,
    transaction_control: bool,
) -> SqlResult<()> {
    if language != "plpgsql" {
        return Err(SqlError::new(
            code::UNDEFINED_OBJECT,
            format!("language \"{language}\" does not exist"),
        ));
    }
    let block = shoal_plpgsql::parse_body(body).map_err(|e| SqlError::syntax(e.message.clone()))?;
    plpgsql::run(
        session,
        txn,
        Invocation {
            name: "inline_code_block",
            context: "inline_code_block",
            body: &block,
            params: Vec::new(),
            returns: Returns::Void,
            specials: Vec::new(),
            transaction_control,
        },
    )
    .await
    .map(|_| ())
}

/// The columns CALL answers with: a procedure's output parameters (None when it has none),
/// for Describe.
pub fn call_columns(
    session: &Session,
    f: &ast::Function,
) -> Option<Vec<crate::session::ResultColumn>> {
    let parts = crate::query::rewrite::object_name_parts(&f.name);
    let args = match &f.args {
        FunctionArguments::List(l) => l.args.clone(),
        _ => Vec::new(),
    };
    let schemas = session.scope.lookup_schemas();
    let catalog = session.engine.catalog.read();
    let call =
        super::resolve_routine_call(&catalog, &schemas, &parts, &args, RoutineKind::Procedure)
            .ok()??;
    match &call.routine.returns {
        shoal_storage::catalog_functions::RoutineReturn::Record(cols) => Some(
            cols.iter()
                .map(|(name, t)| {
                    crate::session::ResultColumn::computed(
                        name.as_str(),
                        crate::types::pg_type_of(t).0,
                    )
                })
                .collect(),
        ),
        _ => None,
    }
}
