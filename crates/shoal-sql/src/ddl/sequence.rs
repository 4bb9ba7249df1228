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
