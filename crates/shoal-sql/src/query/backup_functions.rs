//! PostgreSQL 15's non-exclusive backup functions, over Shoal's files: `pg_backup_start(label
//! [, fast])` pins the current checkpoint and the log after it (`Durability::pin_for_backup`)
//! for the session that called it, and `pg_backup_stop([wait_for_archive])` flushes the log,
//! lets the files go and returns where the log ended with the backup label. Between them a
//! tool copies the data directory's checkpoint and log (`shoal backup` does, with
//! `shoal_wal::copy_for_backup`). Unlike PostgreSQL, `fast` makes no checkpoint: the copy
//! starts from the newest one, which `CHECKPOINT` before the backup makes recent. A session
//! that ends without `pg_backup_stop` ends its backup too.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, Field, Schema};
use datafusion::catalog::{TableFunctionImpl, TableProvider};
use datafusion::common::{plan_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{Expr, ScalarUDF, Volatility};

use super::functions::{sql_error, udf};
use super::pg_catalog::{fallible_live_view_of, s, TableBuilder};
use super::scope::PlanScope;
use super::wal_functions::format_lsn;
use crate::durability::BackupPin;
use crate::error::{code, SqlError};

/// A session's backup between pg_backup_start and pg_backup_stop.
pub struct SessionBackup {
    _pin: BackupPin,
    label: String,
    start_lsn: u64,
    started: chrono::DateTime<chrono::Utc>,
}

pub fn register(state: &mut datafusion::execution::SessionState, scope: &Arc<PlanScope>) {
    use datafusion::execution::FunctionRegistry;
    let sc = scope.clone();
    let start: ScalarUDF = udf(
        "pg_backup_start",
        &[1, 2],
        ArrowType::Utf8,
        Volatility::Volatile,
        move |a| {
            let ScalarValue::Utf8(Some(label)) = a[0].cast_to(&ArrowType::Utf8)? else {
                return Ok(ScalarValue::Utf8(None));
            };
            backup_start(&sc, label)
                .map(|lsn| s(&format_lsn(lsn)))
                .map_err(sql_error)
        },
    );
    state
        .register_udf(Arc::new(start))
        .expect("function registration cannot fail");
    state.register_udtf("pg_backup_stop", Arc::new(BackupStop(scope.clone())));
}

fn require_superuser(scope: &PlanScope, function: &str) -> Result<(), SqlError> {
    match scope.current_role_is_superuser() {
        true => Ok(()),
        false => Err(SqlError::new(
            code::INSUFFICIENT_PRIVILEGE,
            format!("permission denied for function {function}"),
        )),
    }
}

fn backup_start(scope: &PlanScope, label: String) -> Result<u64, SqlError> {
    require_superuser(scope, "pg_backup_start")?;
    if scope.engine.replicated() {
        return Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            "online backup of a member of a replication group is not supported yet",
        ));
    }
    let Some(durability) = &scope.engine.durability else {
        return Err(SqlError::new(
            code::OBJECT_NOT_IN_PREREQUISITE_STATE,
            "the server runs without a redo log (--redo-log off): there is nothing to back up",
        ));
    };
    let mut backup = scope.backup.lock();
    if backup.is_some() {
        return Err(SqlError::new(
            code::OBJECT_NOT_IN_PREREQUISITE_STATE,
            "a backup is already in progress in this session",
        ));
    }
    let pin = durability.pin_for_backup();
    let start_lsn = durability.checkpoint_start_lsn();
    *backup = Some(SessionBackup {
        _pin: pin,
        label,
        start_lsn,
        started: chrono::Utc::now(),
    });
    Ok(start_lsn)
}

/// `pg_backup_stop([wait_for_archive])`: (lsn, labelfile, spcmapfile). The backup stops when
/// the table is scanned, not when the statement is planned (a prepared statement stops it at
/// each execution).
#[derive(Debug)]
struct BackupStop(Arc<PlanScope>);

impl TableFunctionImpl for BackupStop {
    fn call(&self, args: &[Expr]) -> DfResult<Arc<dyn TableProvider>> {
        if args.len() > 1 {
            return plan_err!("pg_backup_stop() takes at most one argument");
        }
        let schema = Arc::new(Schema::new(
            STOP_COLUMNS
                .iter()
                .map(|n| Field::new(*n, ArrowType::Utf8, true))
                .collect::<Vec<_>>(),
        ));
        let scope = self.0.clone();
        Ok(fallible_live_view_of(schema, move || {
            let (lsn, label) = backup_stop(&scope).map_err(sql_error)?;
            let columns: Vec<(&str, ArrowType)> =
                STOP_COLUMNS.iter().map(|n| (*n, ArrowType::Utf8)).collect();
            let mut t = TableBuilder::new(&columns);
            t.row(vec![s(&format_lsn(lsn)), s(&label), s("")]);
            Ok(t.build())
        }))
    }
}

const STOP_COLUMNS: [&str; 3] = ["lsn", "labelfile", "spcmapfile"];

fn backup_stop(scope: &PlanScope) -> Result<(u64, String), SqlError> {
    require_superuser(scope, "pg_backup_stop")?;
    let Some(backup) = scope.backup.lock().take() else {
        return Err(SqlError::new(
            code::OBJECT_NOT_IN_PREREQUISITE_STATE,
            "backup is not in progress",
        )
        .with_hint("Did you call pg_backup_start()?"));
    };
    let durability = scope
        .engine
        .durability
        .as_ref()
        .expect("a backup started, so the server has a log");
    let end_lsn = durability.wal.next_lsn();
    durability
        .wal
        .wait_flushed_blocking(end_lsn)
        .map_err(crate::durability::wal_error)?;
    let label = format!(
        "START WAL LOCATION: {}\nBACKUP METHOD: streamed\nBACKUP FROM: primary\nSTART TIME: {}\nLABEL: {}\nSTOP WAL LOCATION: {}\n",
        format_lsn(backup.start_lsn),
        backup.started.format("%Y-%m-%d %H:%M:%S UTC"),
        backup.label,
        format_lsn(end_lsn),
    );
    Ok((end_lsn, label))
}
