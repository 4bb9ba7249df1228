//! SQL-level prepared statements: `PREPARE name [(types)] AS statement`, `EXECUTE name
//! [(values)]` and `DEALLOCATE [PREPARE] name | ALL`, kept per session as the extended
//! protocol's Parse keeps its statements, and listed in `pg_prepared_statements`. As in
//! PostgreSQL they are not transactional: a rolled-back PREPARE stays.

use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{self, Statement};

use super::{Prepared, Session, StatementResult};
use crate::error::{SqlError, SqlResult};

/// One prepared statement of this session, for `pg_prepared_statements` (and, from PREPARE,
/// for EXECUTE).
#[derive(Clone)]
pub struct SqlPrepared {
    pub prepared: Arc<Prepared>,
    /// The PREPARE statement as the client wrote it.
    pub text: String,
    /// When it was prepared, in microseconds since the Unix epoch.
    pub prepared_at_micros: i64,
}

/// SQLSTATE 26000.
const INVALID_SQL_STATEMENT_NAME: &str = "26000";
/// SQLSTATE 42P05.
const DUPLICATE_PREPARED_STATEMENT: &str = "42P05";

/// A statement's (or cursor's) name as PostgreSQL folds it: lower-cased unless quoted.
pub(super) fn statement_name(name: &ast::Ident) -> String {
    match name.quote_style {
        Some(_) => name.value.clone(),
        None => name.value.to_lowercase(),
    }
}

fn missing(name: &str) -> SqlError {
    SqlError::new(
        INVALID_SQL_STATEMENT_NAME,
        format!("prepared statement \"{name}\" does not exist"),
    )
}

impl Session {
    /// PREPARE, EXECUTE and DEALLOCATE; None for other statements.
    pub(super) async fn sql_prepared_command(
        &mut self,
        stmt: &Statement,
    ) -> Option<SqlResult<StatementResult>> {
        Some(match stmt {
            Statement::Prepare {
                name,
                data_types,
                statement,
            } => self.sql_prepare(name, data_types, statement, stmt).await,
            Statement::Execute {
                name: Some(name),
                parameters,
                immediate: false,
                ..
            } => {
                let name = match name.0.as_slice() {
                    [ast::ObjectNamePart::Identifier(id)] => statement_name(id),
                    _ => name.to_string(),
                };
                Box::pin(self.sql_execute(&name, parameters)).await
            }
            Statement::Deallocate { name, .. } => {
                let all = name.quote_style.is_none() && name.value.eq_ignore_ascii_case("all");
                // The protocol's named statements are deallocated too, as in PostgreSQL.
                let mut statements = self.scope.prepared_statements.lock();
                let mut protocol = self.scope.protocol_statements.lock();
                if all {
                    statements.clear();
                    protocol.clear();
                    Ok(StatementResult::command("DEALLOCATE ALL"))
                } else {
                    let name = statement_name(name);
                    let sql_level = statements.remove(&name);
                    let protocol_level = protocol.remove(&name);
                    match sql_level.or(protocol_level) {
                        Some(_) => Ok(StatementResult::command("DEALLOCATE")),
                        None => Err(missing(&name)),
                    }
                }
            }
            _ => return None,
        })
    }

    async fn sql_prepare(
        &mut self,
        name: &ast::Ident,
        data_types: &[ast::DataType],
        statement: &Statement,
        whole: &Statement,
    ) -> SqlResult<StatementResult> {
        let name = statement_name(name);
        if self.scope.prepared_statements.lock().contains_key(&name) {
            return Err(SqlError::new(
                DUPLICATE_PREPARED_STATEMENT,
                format!("prepared statement \"{name}\" already exists"),
            ));
        }
        let declared = data_types
            .iter()
            .map(declared_parameter_type)
            .collect::<SqlResult<Vec<u32>>>()?;
        let prepared = self.prepare(&statement.to_string(), &declared).await?;
        let entry = SqlPrepared {
            prepared: Arc::new(prepared),
            text: whole.to_string(),
            prepared_at_micros: chrono::Utc::now().timestamp_micros(),
        };
        self.scope.prepared_statements.lock().insert(name, entry);
        Ok(StatementResult::command("PREPARE"))
    }

    async fn sql_execute(
        &mut self,
        name: &str,
        arguments: &[ast::Expr],
    ) -> SqlResult<StatementResult> {
        let prepared = match self.scope.prepared_statements.lock().get(name) {
            Some(p) => p.prepared.clone(),
            None => return Err(missing(name)),
        };
        let expected = prepared.param_types.len();
        if arguments.len() != expected {
            return Err(SqlError::syntax(format!(
                "wrong number of parameters for prepared statement \"{name}\""
            ))
            .with_detail(format!(
                "Expected {expected} parameters but got {}.",
                arguments.len()
            )));
        }
        let values = self
            .evaluate_arguments(arguments, &prepared.param_oids)
            .await?;
        let values = values
            .into_iter()
            .zip(&prepared.param_types)
            .map(|(v, t)| v.cast_to(t).map_err(SqlError::from))
            .collect::<SqlResult<Vec<ScalarValue>>>()?;
        self.execute_prepared(&prepared, values).await
    }

    /// EXECUTE's arguments are expressions: each is computed, as the parameter's type.
    async fn evaluate_arguments(
        &mut self,
        arguments: &[ast::Expr],
        oids: &[u32],
    ) -> SqlResult<Vec<ScalarValue>> {
        if arguments.is_empty() {
            return Ok(Vec::new());
        }
        let items: Vec<String> = arguments
            .iter()
            .zip(oids)
            .map(
                |(e, oid)| match crate::query::pg_catalog::format_type_oid(*oid, -1) {
                    Some(t) if *oid != 0 => format!("CAST(({e}) AS {t})"),
                    _ => format!("({e})"),
                },
            )
            .collect();
        let batches = crate::query::run_generated_sql(
            self.state(),
            &self.scope,
            &format!("SELECT {}", items.join(", ")),
        )
        .await?;
        let batch = batches
            .iter()
            .find(|b| b.num_rows() > 0)
            .ok_or_else(|| SqlError::internal("EXECUTE's arguments gave no row"))?;
        (0..batch.num_columns())
            .map(|c| ScalarValue::try_from_array(batch.column(c), 0).map_err(SqlError::from))
            .collect()
    }
}

/// The PostgreSQL type of a PREPARE's declared parameter: a column type, or an object
/// identifier type (pg_dump prepares statements over `pg_catalog.oid`).
fn declared_parameter_type(t: &ast::DataType) -> SqlResult<u32> {
    if let ast::DataType::Custom(name, _) = t {
        let name = name.to_string().to_lowercase();
        let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
        match name {
            "oid" => return Ok(crate::types::oid::OID),
            "regclass" => return Ok(crate::types::oid::REGCLASS),
            "regtype" => return Ok(crate::types::oid::REGTYPE),
            _ => {}
        }
    }
    crate::types::from_sql_type(t).map(|t| crate::types::pg_type_of(&t).0)
}
