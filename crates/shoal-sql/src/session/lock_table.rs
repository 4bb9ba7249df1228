//! LOCK TABLE. Shoal has no table-level lock manager: readers and writers never block each
//! other (MVCC), and DDL runs one statement at a time. The one mode clients take in practice
//! on a database they only read, ACCESS SHARE (pg_dump locks every table it dumps in it), is
//! accepted after PostgreSQL's checks, and gives what the dump needs from it together with the
//! transaction's REPEATABLE READ snapshot: the rows as of one instant. Unlike PostgreSQL, it
//! does not hold off a concurrent DROP, ALTER or TRUNCATE of the table (docs/sql.md). Stronger
//! modes, which exist to block other writers, are refused with 0A000 rather than granted
//! without blocking anyone.

use datafusion::sql::sqlparser::ast;

use super::{Session, StatementResult, TxnState};
use crate::error::{code, SqlError, SqlResult};

impl Session {
    pub(super) fn lock_table(&mut self, lock: &ast::Lock) -> SqlResult<StatementResult> {
        if matches!(self.txn, TxnState::Idle) {
            return Err(SqlError::new(
                code::NO_ACTIVE_SQL_TRANSACTION,
                "LOCK TABLE can only be used in transaction blocks",
            ));
        }
        for target in &lock.tables {
            let (schema, name) = crate::ddl::split_name(&target.name);
            if self
                .scope
                .resolve_relation(schema.as_deref(), &name)
                .is_none()
            {
                return Err(SqlError::undefined_table(&target.name.to_string()));
            }
        }
        // Without IN ... MODE, PostgreSQL takes ACCESS EXCLUSIVE.
        match lock.lock_mode {
            Some(ast::LockTableMode::AccessShare) => Ok(StatementResult::command("LOCK TABLE")),
            ref mode => {
                let mode = mode
                    .as_ref()
                    .map_or("ACCESS EXCLUSIVE".to_string(), |m| m.to_string());
                Err(SqlError::new(
                    code::FEATURE_NOT_SUPPORTED,
                    format!("LOCK TABLE in {mode} mode is not supported"),
                )
                .with_hint(
                    "Shoal takes only ACCESS SHARE table locks; rows are locked with SELECT ... FOR UPDATE.",
                ))
            }
        }
    }
}
