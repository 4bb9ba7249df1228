//! PostgreSQL's functions over the write-ahead log, answered from Shoal's redo log: positions
//! (`pg_current_wal_lsn()` and friends, as `X/Y` text in pg_lsn's notation), their difference
//! in bytes (`pg_wal_lsn_diff`, and pg_lsn's minus, which the statement's rewrite turns into
//! it), the log's segment files (`pg_ls_waldir()`), and the replica-side functions, which are
//! NULL on a server that is not a replica. Monitoring tools (postgres_exporter, pgwatch) read
//! them. Also `pg_stat_get_progress_info`, the function behind PostgreSQL's progress views:
//! Shoal reports no command's progress, so it has no rows.
//!
//! A position is the redo log's byte offset. The values are text: Shoal has no pg_lsn type, so
//! `pg_typeof(pg_current_wal_lsn())` is text, and comparisons between positions compare text.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, TimeUnit};
use datafusion::catalog::{TableFunctionImpl, TableProvider};
use datafusion::common::{plan_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{Expr, ScalarUDF, Volatility};
use shoal_numeric::Numeric;

use super::functions::{sql_error, udf};
use super::pg_catalog::{i64v, s, TableBuilder};
use super::scope::PlanScope;
use crate::error::{code, SqlError};

/// Reads a position written as pg_lsn is (`16/B374D848`: two hexadecimal halves).
pub fn parse_lsn(text: &str) -> Option<u64> {
    let (high, low) = text.trim().split_once('/')?;
    let hex = |h: &str| {
        (!h.is_empty() && h.len() <= 8 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(h, 16).ok())
            .flatten()
    };
    Some((u64::from(hex(high)?) << 32) | u64::from(hex(low)?))
}

pub fn format_lsn(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

fn lsn_arg(v: &ScalarValue) -> DfResult<Option<u64>> {
    let text = match v {
        ScalarValue::Utf8(t) | ScalarValue::LargeUtf8(t) | ScalarValue::Utf8View(t) => t,
        ScalarValue::Null => return Ok(None),
        other => {
            return Err(sql_error(SqlError::new(
                code::UNDEFINED_FUNCTION,
                format!("a log position is pg_lsn text, not {}", other.data_type()),
            )))
        }
    };
    let Some(text) = text else {
        return Ok(None);
    };
    parse_lsn(text).map(Some).ok_or_else(|| {
        sql_error(SqlError::new(
            code::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type pg_lsn: \"{text}\""),
        ))
    })
}

/// PostgreSQL's WAL file name for the segment holding the byte before `lsn`: timeline,
/// log id and segment number, 8 hexadecimal digits each, with 16 MB segments.
fn postgres_wal_file_name(lsn: u64) -> String {
    const SEGMENT_BYTES: u64 = 16 << 20;
    let segment = lsn.saturating_sub(1) / SEGMENT_BYTES;
    let per_log_id = 0x1_0000_0000 / SEGMENT_BYTES;
    format!(
        "{:08X}{:08X}{:08X}",
        1,
        segment / per_log_id,
        segment % per_log_id
    )
}

pub fn register(state: &mut datafusion::execution::SessionState, scope: &Arc<PlanScope>) {
    use datafusion::execution::FunctionRegistry;
    let mut add = |f: ScalarUDF| {
        state
            .register_udf(Arc::new(f))
            .expect("function registration cannot fail");
    };
    // Where the next record goes (PostgreSQL's insert position; Shoal writes what it appends
    // with the next flush), and what is flushed. A server without a log is at 0/0.
    let position = |name: &str, scope: &Arc<PlanScope>, flushed: bool| {
        let sc = scope.clone();
        udf(
            name,
            &[0],
            ArrowType::Utf8,
            Volatility::Volatile,
            move |_| {
                // As PostgreSQL: a standby has no insert position of its own.
                if sc.engine.in_recovery() {
                    return Err(sql_error(SqlError::new(
                        code::OBJECT_NOT_IN_PREREQUISITE_STATE,
                        "recovery is in progress",
                    )));
                }
                let lsn = sc.engine.durability.as_ref().map_or(0, |d| match flushed {
                    true => d.wal.flushed_lsn(),
                    false => d.wal.next_lsn(),
                });
                Ok(s(&format_lsn(lsn)))
            },
        )
    };
    // pg_switch_wal(): ends the current segment so the archiver can take it; returns where the
    // log ended. Superusers only, as in PostgreSQL.
    let sc = scope.clone();
    add(udf(
        "pg_switch_wal",
        &[0],
        ArrowType::Utf8,
        Volatility::Volatile,
        move |_| {
            if !sc.current_role_is_superuser() {
                return Err(sql_error(SqlError::new(
                    code::INSUFFICIENT_PRIVILEGE,
                    "permission denied for function pg_switch_wal",
                )));
            }
            let Some(d) = &sc.engine.durability else {
                return Ok(s(&format_lsn(0)));
            };
            let end = d
                .wal
                .switch_segment()
                .map_err(|e| sql_error(SqlError::internal(e.to_string())))?;
            Ok(s(&format_lsn(end)))
        },
    ));
    // pg_walfile_name(lsn): PostgreSQL's name for the WAL file holding the byte before `lsn`
    // (timeline 1, 16 MB segments), which tools cut the timeline out of. Shoal's own segment
    // files are named by where they start (pg_ls_waldir lists them).
    add(udf(
        "pg_walfile_name",
        &[1],
        ArrowType::Utf8,
        Volatility::Immutable,
        |a| {
            let ScalarValue::Utf8(Some(text)) = a[0].cast_to(&ArrowType::Utf8)? else {
                return Ok(ScalarValue::Utf8(None));
            };
            let lsn = parse_lsn(&text).ok_or_else(|| {
                sql_error(SqlError::new(
                    code::INVALID_TEXT_REPRESENTATION,
                    format!("invalid input syntax for type pg_lsn: \"{text}\""),
                ))
            })?;
            Ok(s(&postgres_wal_file_name(lsn)))
        },
    ));
    add(position("pg_current_wal_lsn", scope, false));
    add(position("pg_current_wal_insert_lsn", scope, false));
    add(position("pg_current_wal_flush_lsn", scope, true));
    // On a standby: where the log it has on disk ends, and where the database has applied it
    // to. NULL elsewhere.
    for (name, applied) in [
        ("pg_last_wal_receive_lsn", false),
        ("pg_last_wal_replay_lsn", true),
    ] {
        let sc = scope.clone();
        add(udf(
            name,
            &[0],
            ArrowType::Utf8,
            Volatility::Volatile,
            move |_| {
                let replica = sc.engine.replica.get().filter(|_| sc.engine.in_recovery());
                let lsn = replica.and_then(|r| match applied {
                    true => Some(r.applied().borrow().end_lsn),
                    false => r.received_lsn(),
                });
                Ok(lsn.map_or(ScalarValue::Utf8(None), |l| s(&format_lsn(l))))
            },
        ));
    }
    add(udf(
        "pg_last_xact_replay_timestamp",
        &[0],
        ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        Volatility::Volatile,
        |_| Ok(ScalarValue::TimestampMicrosecond(None, Some("UTC".into()))),
    ));
    add(udf(
        "pg_lsn",
        &[1],
        ArrowType::Utf8,
        Volatility::Immutable,
        |a| Ok(ScalarValue::Utf8(lsn_arg(&a[0])?.map(format_lsn))),
    ));
    add(udf(
        "pg_wal_lsn_diff",
        &[2],
        crate::numeric::NUMERIC_ARROW,
        Volatility::Immutable,
        |a| {
            let (Some(x), Some(y)) = (lsn_arg(&a[0])?, lsn_arg(&a[1])?) else {
                return Ok(crate::numeric::scalar(None));
            };
            let diff = Numeric::from_i128(i128::from(x) - i128::from(y), 0)
                .expect("a difference of two 64-bit positions fits");
            Ok(crate::numeric::scalar(Some(&diff)))
        },
    ));
    state.register_udtf("pg_ls_waldir", Arc::new(LogDirectory(scope.clone())));
    state.register_udtf("pg_control_system", Arc::new(ControlSystem(scope.clone())));
    state.register_udtf("pg_control_recovery", Arc::new(ControlRecovery));
    state.register_udtf("pg_stat_get_progress_info", Arc::new(NoProgress));
}

/// `pg_ls_waldir()`: the redo log's segment files (name, size, modification), for
/// superusers, as in PostgreSQL. Shoal names a segment by the position it starts at.
#[derive(Debug)]
struct LogDirectory(Arc<PlanScope>);

impl TableFunctionImpl for LogDirectory {
    fn call(&self, args: &[Expr]) -> DfResult<Arc<dyn TableProvider>> {
        if !args.is_empty() {
            return plan_err!("pg_ls_waldir() takes no arguments");
        }
        let scope = &self.0;
        if !scope.current_role_is_superuser() {
            return Err(sql_error(SqlError::new(
                code::INSUFFICIENT_PRIVILEGE,
                "permission denied for function pg_ls_waldir",
            )));
        }
        let mut t = TableBuilder::new(&[
            ("name", ArrowType::Utf8),
            ("size", ArrowType::Int64),
            (
                "modification",
                ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            ),
        ]);
        if let Some(d) = &scope.engine.durability {
            let mut files: Vec<_> = std::fs::read_dir(d.wal.dir())
                .map_err(|e| {
                    sql_error(SqlError::new(
                        "58P01",
                        format!("could not read the log directory: {e}"),
                    ))
                })?
                .filter_map(Result::ok)
                .filter_map(|entry| {
                    Some((
                        entry.file_name().into_string().ok()?,
                        entry.metadata().ok()?,
                    ))
                })
                .filter(|(_, meta)| meta.is_file())
                .collect();
            files.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, meta) in files {
                let modified = meta
                    .modified()
                    .ok()
                    .map(|m| chrono::DateTime::<chrono::Utc>::from(m).timestamp_micros());
                t.row(vec![
                    s(&name),
                    i64v(meta.len() as i64),
                    ScalarValue::TimestampMicrosecond(modified, Some("UTC".into())),
                ]);
            }
        }
        Ok(t.build())
    }
}

/// `pg_control_system()`: PostgreSQL 15's control file versions, the database's system
/// identifier, and when the server last wrote its state (its start, for Shoal).
#[derive(Debug)]
struct ControlSystem(Arc<PlanScope>);

/// PostgreSQL 15's PG_CONTROL_VERSION and CATALOG_VERSION_NO, which tools compare.
const PG_CONTROL_VERSION: i32 = 1300;
const CATALOG_VERSION_NO: i32 = 202209061;

impl TableFunctionImpl for ControlSystem {
    fn call(&self, args: &[Expr]) -> DfResult<Arc<dyn TableProvider>> {
        if !args.is_empty() {
            return plan_err!("pg_control_system() takes no arguments");
        }
        let engine = &self.0.engine;
        let mut t = TableBuilder::new(&[
            ("pg_control_version", ArrowType::Int32),
            ("catalog_version_no", ArrowType::Int32),
            ("system_identifier", ArrowType::Int64),
            (
                "pg_control_last_modified",
                ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            ),
        ]);
        t.row(vec![
            ScalarValue::Int32(Some(PG_CONTROL_VERSION)),
            ScalarValue::Int32(Some(CATALOG_VERSION_NO)),
            i64v(engine.system_identifier() as i64),
            ScalarValue::TimestampMicrosecond(
                Some(engine.started_at.timestamp_micros()),
                Some("UTC".into()),
            ),
        ]);
        Ok(t.build())
    }
}

/// `pg_control_recovery()`: a server that is not a replica has recovered to no point: zeros.
#[derive(Debug)]
struct ControlRecovery;

impl TableFunctionImpl for ControlRecovery {
    fn call(&self, args: &[Expr]) -> DfResult<Arc<dyn TableProvider>> {
        if !args.is_empty() {
            return plan_err!("pg_control_recovery() takes no arguments");
        }
        let mut t = TableBuilder::new(&[
            ("min_recovery_end_lsn", ArrowType::Utf8),
            ("min_recovery_end_timeline", ArrowType::Int32),
            ("backup_start_lsn", ArrowType::Utf8),
            ("backup_end_lsn", ArrowType::Utf8),
            ("end_of_backup_record_required", ArrowType::Boolean),
        ]);
        t.row(vec![
            s("0/0"),
            ScalarValue::Int32(Some(0)),
            s("0/0"),
            s("0/0"),
            ScalarValue::Boolean(Some(false)),
        ]);
        Ok(t.build())
    }
}

/// `pg_stat_get_progress_info(command)`: PostgreSQL's columns (pid, datid, relid, param1 to
/// param20), no rows.
#[derive(Debug)]
struct NoProgress;

impl TableFunctionImpl for NoProgress {
    fn call(&self, args: &[Expr]) -> DfResult<Arc<dyn TableProvider>> {
        if args.len() != 1 {
            return plan_err!("pg_stat_get_progress_info(text) takes one argument");
        }
        let params: Vec<String> = (1..=20).map(|n| format!("param{n}")).collect();
        let mut columns: Vec<(&str, ArrowType)> = vec![
            ("pid", ArrowType::Int32),
            ("datid", ArrowType::UInt32),
            ("relid", ArrowType::UInt32),
        ];
        columns.extend(params.iter().map(|p| (p.as_str(), ArrowType::Int64)));
        Ok(TableBuilder::new(&columns).build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_read_and_print_as_pg_lsn() {
        assert_eq!(parse_lsn("0/0"), Some(0));
        assert_eq!(parse_lsn("16/B374D848"), Some(0x16_B374_D848));
        assert_eq!(format_lsn(0x16_B374_D848), "16/B374D848");
        for bad in ["", "0", "/0", "0/", "x/0", "123456789/0", "0/0/0"] {
            assert_eq!(parse_lsn(bad), None, "{bad}");
        }
    }
}
