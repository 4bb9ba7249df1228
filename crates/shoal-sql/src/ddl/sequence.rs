//! CREATE SEQUENCE, and the sequence definition that serial and identity columns of CREATE
//! TABLE get too: PostgreSQL's defaults for the bounds and the start, which depend on the
//! direction of the increment and on the sequence's integer type.

use std::sync::atomic::{AtomicBool, AtomicI64};
use std::sync::Arc;

use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog::{Catalog, Oid, SequenceDef, SequenceState};
use shoal_storage::types::DataType;

use super::creation_target;
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};
use crate::types::from_sql_type;

/// CREATE SEQUENCE [IF NOT EXISTS] name [AS type] [options]; bigint when AS is left out.
pub(super) fn create_sequence(
    session: &Session,
    name: &ast::ObjectName,
    if_not_exists: bool,
    data_type: Option<&ast::DataType>,
    sequence_options: &[ast::SequenceOptions],
) -> SqlResult<StatementResult> {
    let (schema, rel) = creation_target(session, name)?;
    if if_not_exists
        && session
            .engine
            .catalog
            .read()
            .lookup(&schema, &rel)
            .is_some()
    {
        return Ok(StatementResult::command("CREATE SEQUENCE"));
    }
    let t = match data_type {
        Some(t) => from_sql_type(t)?,
        None => DataType::Int64,
    };
    let mut catalog = session.engine.catalog.write();
    let def = sequence_def(&mut catalog, &schema, &rel, t, sequence_options, None)?;
    catalog.insert_sequence(def)?;
    Ok(StatementResult::command("CREATE SEQUENCE"))
}

fn expr_i64(e: &ast::Expr) -> SqlResult<i64> {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n
                .parse()
                .map_err(|_| SqlError::syntax(format!("invalid number {n}"))),
            _ => Err(SqlError::syntax("expected a number")),
        },
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => Ok(-expr_i64(expr)?),
        _ => Err(SqlError::syntax("expected a number")),
    }
}

pub(super) fn sequence_def(
    catalog: &mut Catalog,
    schema: &str,
    name: &str,
    t: DataType,
    options: &[ast::SequenceOptions],
    owned_by: Option<(Oid, usize)>,
) -> SqlResult<SequenceDef> {
    let type_max = match t {
        DataType::Int16 => i16::MAX as i64,
        DataType::Int32 => i32::MAX as i64,
        _ => i64::MAX,
    };
    let mut increment = 1i64;
    let mut min: Option<i64> = None;
    let mut max: Option<i64> = None;
    let mut start: Option<i64> = None;
    let mut cycle = false;
    for o in options {
        match o {
            ast::SequenceOptions::IncrementBy(e, _) => increment = expr_i64(e)?,
            ast::SequenceOptions::MinValue(Some(e)) => min = Some(expr_i64(e)?),
            ast::SequenceOptions::MaxValue(Some(e)) => max = Some(expr_i64(e)?),
            ast::SequenceOptions::StartWith(e, _) => start = Some(expr_i64(e)?),
            ast::SequenceOptions::Cycle(c) => cycle = !*c,
            _ => {}
        }
    }
    if increment == 0 {
        return Err(SqlError::new(
            code::INVALID_PARAMETER_VALUE,
            "INCREMENT must not be zero",
        ));
    }
    let min_value = min.unwrap_or(if increment > 0 { 1 } else { -type_max });
    let max_value = max.unwrap_or(if increment > 0 { type_max } else { -1 });
    let start = start.unwrap_or(if increment > 0 { min_value } else { max_value });
    Ok(SequenceDef {
        oid: catalog.allocate_oid(),
        schema: schema.to_string(),
        name: name.to_string(),
        data_type: t,
        start,
        increment,
        min_value,
        max_value,
        cycle,
        owned_by,
        state: Arc::new(SequenceState {
            last_value: AtomicI64::new(start),
            is_called: AtomicBool::new(false),
        }),
    })
}

/// What an ALTER SEQUENCE changes.
#[derive(Default)]
struct SequenceChange {
    /// OWNED BY: Some(None) for NONE, else the column's name parts.
    owned_by: Option<Option<Vec<String>>>,
    /// RESTART: Some(None) restarts at the start value.
    restart: Option<Option<i64>>,
    /// The other options, as CREATE SEQUENCE's.
    options: Vec<ast::SequenceOptions>,
}

/// `ALTER SEQUENCE [IF EXISTS] name option ...` with the options OWNED BY, RESTART [WITH],
/// INCREMENT, MINVALUE, MAXVALUE, START, CACHE and [NO] CYCLE (the statement's text, see
/// `parse::ALTER_SEQUENCE_VARIABLE`). RESTART takes effect at once, as setval does.
pub(super) fn alter_sequence(session: &Session, text: &str) -> SqlResult<StatementResult> {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let tokens: Vec<Token> = Tokenizer::new(&PostgreSqlDialect {}, text)
        .tokenize()
        .map_err(|e| SqlError::syntax(e.to_string()))?
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let word = |i: usize| match tokens.get(i) {
        Some(Token::Word(w)) if w.quote_style.is_none() => w.value.to_lowercase(),
        _ => String::new(),
    };
    // ALTER SEQUENCE [IF EXISTS]
    let mut p = 2;
    let if_exists = word(p) == "if" && word(p + 1) == "exists";
    if if_exists {
        p += 2;
    }
    let (name, next) = name_at(&tokens, p)?;
    p = next;
    let unsupported = |what: &str| {
        SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            format!("ALTER SEQUENCE ... {what} is not supported"),
        )
    };
    let mut change = SequenceChange::default();
    let mut rest = Vec::new();
    while p < tokens.len() {
        match word(p).as_str() {
            "owned" if word(p + 1) == "by" => {
                if word(p + 2) == "none" {
                    change.owned_by = Some(None);
                    p += 3;
                } else {
                    let (column, next) = name_at(&tokens, p + 2)?;
                    change.owned_by = Some(Some(column));
                    p = next;
                }
            }
            "restart" => {
                p += 1;
                if word(p) == "with" {
                    p += 1;
                }
                let (value, next) = number_at(&tokens, p);
                change.restart = Some(value);
                p = next;
            }
            "rename" => return Err(unsupported("RENAME")),
            "owner" => return Err(unsupported("OWNER TO")),
            "set" => return Err(unsupported("SET")),
            "as" => return Err(unsupported("AS type")),
            _ => {
                rest.push(tokens[p].to_string());
                p += 1;
            }
        }
    }
    if !rest.is_empty() {
        let sql = format!("CREATE SEQUENCE shoal_alter {}", rest.join(" "));
        match crate::parse::parse_statements(&sql)
            .map_err(|e| SqlError::syntax(e.to_string()))?
            .pop()
        {
            Some(ast::Statement::CreateSequence {
                sequence_options,
                owned_by: None,
                ..
            }) => change.options = sequence_options,
            _ => return Err(SqlError::syntax(format!("syntax error in {text}"))),
        }
    }
    let (schema, relation) = match name.as_slice() {
        [schema, relation] => (Some(schema.as_str()), relation.as_str()),
        [relation] => (None, relation.as_str()),
        _ => {
            return Err(SqlError::syntax(format!(
                "improper relation name {}",
                name.join(".")
            )))
        }
    };
    let Some((_, kind, oid)) = session.scope.resolve_relation(schema, relation) else {
        if if_exists {
            session.scope.notice(
                code::UNDEFINED_TABLE,
                format!("relation \"{relation}\" does not exist, skipping"),
            );
            return Ok(StatementResult::command("ALTER SEQUENCE"));
        }
        return Err(SqlError::undefined_table(relation));
    };
    if kind != shoal_storage::catalog::RelationKind::Sequence {
        return Err(SqlError::new(
            code::WRONG_OBJECT_TYPE,
            format!("\"{relation}\" is not a sequence"),
        ));
    }
    apply_sequence_change(session, oid, change)?;
    Ok(StatementResult::command("ALTER SEQUENCE"))
}

fn apply_sequence_change(session: &Session, oid: Oid, change: SequenceChange) -> SqlResult<()> {
    use shoal_storage::catalog_privileges::ObjectClass;
    let actor = crate::privileges::acting_role(session)?;
    let mut catalog = session.engine.catalog.write();
    let old = catalog
        .sequences
        .get(&oid)
        .cloned()
        .expect("resolved sequence");
    let owner = catalog.owner_of((ObjectClass::Relation, oid));
    if !actor.superuser && !catalog.has_privileges_of_role(actor.oid, owner) {
        return Err(SqlError::new(
            code::INSUFFICIENT_PRIVILEGE,
            format!("must be owner of sequence {}", old.name),
        ));
    }
    let mut def = (*old).clone();
    if let Some(owned_by) = change.owned_by {
        def.owned_by = match owned_by {
            None => None,
            Some(parts) => Some(owning_column(&catalog, &def, owner, &parts)?),
        };
    }
    if !change.options.is_empty() {
        // The options change what they name; the rest keep their values.
        let mut options = vec![
            ast::SequenceOptions::IncrementBy(number_expr(def.increment), true),
            ast::SequenceOptions::MinValue(Some(number_expr(def.min_value))),
            ast::SequenceOptions::MaxValue(Some(number_expr(def.max_value))),
            ast::SequenceOptions::StartWith(number_expr(def.start), true),
            ast::SequenceOptions::Cycle(!def.cycle),
        ];
        let same_kind = |a: &ast::SequenceOptions, b: &ast::SequenceOptions| {
            std::mem::discriminant(a) == std::mem::discriminant(b)
        };
        for given in change.options {
            options.retain(|o| !same_kind(o, &given));
            // NO MINVALUE / NO MAXVALUE: the type's bound for the direction, as CREATE gives.
            if !matches!(
                given,
                ast::SequenceOptions::MinValue(None) | ast::SequenceOptions::MaxValue(None)
            ) {
                options.push(given);
            }
        }
        let new = sequence_def(
            &mut catalog,
            &def.schema,
            &def.name,
            def.data_type.clone(),
            &options,
            def.owned_by,
        )?;
        def.increment = new.increment;
        def.min_value = new.min_value;
        def.max_value = new.max_value;
        def.start = new.start;
        def.cycle = new.cycle;
    }
    check_bounds("START", def.start, &def)?;
    if let Some(restart) = change.restart {
        let value = restart.unwrap_or(def.start);
        check_bounds("RESTART", value, &def)?;
        def.set_value(value, false);
        session.engine.log_sequence(&def);
    }
    catalog.remove_sequence(oid);
    catalog.insert_sequence(def)?;
    Ok(())
}

/// The 22023 of a START or RESTART value outside the sequence's bounds, worded as PostgreSQL's.
fn check_bounds(what: &str, value: i64, def: &SequenceDef) -> SqlResult<()> {
    let message = if value < def.min_value {
        format!(
            "{what} value ({value}) cannot be less than MINVALUE ({})",
            def.min_value
        )
    } else if value > def.max_value {
        format!(
            "{what} value ({value}) cannot be greater than MAXVALUE ({})",
            def.max_value
        )
    } else {
        return Ok(());
    };
    Err(SqlError::new(code::INVALID_PARAMETER_VALUE, message))
}

/// The column `[schema.]table.column` that OWNED BY names, checked as PostgreSQL checks it.
fn owning_column(
    catalog: &Catalog,
    sequence: &SequenceDef,
    sequence_owner: Oid,
    parts: &[String],
) -> SqlResult<(Oid, usize)> {
    use shoal_storage::catalog_privileges::ObjectClass;
    let (schema, table, column) = match parts {
        [table, column] => (sequence.schema.as_str(), table, column),
        [schema, table, column] => (schema.as_str(), table, column),
        _ => {
            return Err(SqlError::syntax(
                "invalid OWNED BY option: specify OWNED BY table.column or OWNED BY NONE",
            ))
        }
    };
    let def = catalog
        .lookup(schema, table)
        .and_then(|(_, oid)| catalog.tables.get(&oid))
        .ok_or_else(|| SqlError::undefined_table(table))?;
    if def.schema != sequence.schema {
        return Err(SqlError::new(
            code::OBJECT_NOT_IN_PREREQUISITE_STATE,
            "sequence must be in same schema as table it is linked to",
        ));
    }
    if catalog.owner_of((ObjectClass::Relation, def.oid)) != sequence_owner {
        return Err(SqlError::new(
            code::OBJECT_NOT_IN_PREREQUISITE_STATE,
            "sequence must have same owner as table it is linked to",
        ));
    }
    let position = def.column_index(column).ok_or_else(|| {
        SqlError::new(
            code::UNDEFINED_COLUMN,
            format!("column \"{column}\" of relation \"{table}\" does not exist"),
        )
    })?;
    Ok((def.oid, position))
}

fn number_expr(n: i64) -> ast::Expr {
    let literal = ast::Expr::value(ast::Value::Number(n.unsigned_abs().to_string(), false));
    match n < 0 {
        true => ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr: Box::new(literal),
        },
        false => literal,
    }
}

/// A possibly qualified name at token `p`, folded as identifiers are; and the token after it.
fn name_at(
    tokens: &[datafusion::sql::sqlparser::tokenizer::Token],
    mut p: usize,
) -> SqlResult<(Vec<String>, usize)> {
    use datafusion::sql::sqlparser::tokenizer::Token;
    let mut parts = Vec::new();
    while let Some(Token::Word(w)) = tokens.get(p) {
        parts.push(match w.quote_style {
            Some(_) => w.value.clone(),
            None => w.value.to_lowercase(),
        });
        p += 1;
        if tokens.get(p) != Some(&Token::Period) {
            break;
        }
        p += 1;
    }
    if parts.is_empty() {
        return Err(SqlError::syntax(
            "syntax error in ALTER SEQUENCE: a name is missing",
        ));
    }
    Ok((parts, p))
}

/// An optionally signed integer at token `p` (None when there is none), and the token after.
fn number_at(
    tokens: &[datafusion::sql::sqlparser::tokenizer::Token],
    p: usize,
) -> (Option<i64>, usize) {
    use datafusion::sql::sqlparser::tokenizer::Token;
    let (negative, at) = match tokens.get(p) {
        Some(Token::Minus) => (true, p + 1),
        _ => (false, p),
    };
    match tokens.get(at) {
        Some(Token::Number(n, _)) => match n.parse::<i64>() {
            Ok(v) => (Some(if negative { -v } else { v }), at + 1),
            Err(_) => (None, p),
        },
        _ => (None, p),
    }
}

/// `ALTER TABLE ... ALTER COLUMN ... ADD GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY
/// [(options)]`: the column (of `table`, not yet in the catalog) takes its values from a new
/// sequence it owns, named `name` (pg_dump's `SEQUENCE NAME`) or `table_column_seq`.
pub(super) fn add_identity(
    catalog: &mut Catalog,
    table: &mut shoal_storage::catalog::TableDef,
    position: usize,
    always: bool,
    options: &[ast::SequenceOptions],
    name: Option<String>,
) -> SqlResult<()> {
    let column = &table.columns[position];
    let refuse = |what: &str| {
        Err(SqlError::new(
            code::OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "column \"{}\" of relation \"{}\" {what}",
                column.name, table.name
            ),
        ))
    };
    if column.identity.is_some() {
        return refuse("is already an identity column");
    }
    if column.default_sql.is_some() {
        return refuse("already has a default value");
    }
    if !column.not_null {
        return refuse("must be declared NOT NULL before identity can be added");
    }
    if !matches!(
        column.data_type,
        DataType::Int16 | DataType::Int32 | DataType::Int64
    ) {
        return Err(SqlError::new(
            code::INVALID_PARAMETER_VALUE,
            "identity column type must be smallint, integer, or bigint",
        ));
    }
    let (schema, sequence_name) = match name.as_deref().map(|n| n.split_once('.')) {
        Some(Some((schema, name))) => (crate::ddl::ident_of(schema), crate::ddl::ident_of(name)),
        Some(None) => (
            table.schema.clone(),
            crate::ddl::ident_of(name.as_deref().unwrap_or_default()),
        ),
        None => (
            table.schema.clone(),
            format!("{}_{}_seq", table.name, column.name),
        ),
    };
    if schema != table.schema {
        return Err(SqlError::new(
            code::OBJECT_NOT_IN_PREREQUISITE_STATE,
            "sequence must be in same schema as table it is linked to",
        ));
    }
    let sequence = sequence_def(
        catalog,
        &schema,
        &sequence_name,
        column.data_type.clone(),
        options,
        Some((table.oid, position)),
    )?;
    let sequence_oid = sequence.oid;
    catalog.insert_sequence(sequence)?;
    let qualified = match schema.as_str() {
        "public" => sequence_name,
        _ => format!("{schema}.{sequence_name}"),
    };
    let column = &mut table.columns[position];
    column.default_sql = Some(format!("nextval('{qualified}')"));
    column.identity = Some(shoal_storage::catalog::Identity {
        always,
        sequence: sequence_oid,
    });
    Ok(())
}
