//! pg_cancel_backend and pg_terminate_backend: reach another backend of the server (see
//! `crate::backends`), as PostgreSQL allows it: a role may signal the backends of roles whose
//! privileges it has, and only a superuser those of a superuser. And pg_reload_conf(), which
//! reads pg_hba.conf and the settings files again, as SIGHUP does; pg_postmaster_start_time
//! and pg_conf_load_time.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType as ArrowType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{ScalarUDF, Volatility};

use super::functions::{sql_error, udf};
use super::scope::PlanScope;
use crate::backends::Backend;
use crate::error::{code, SqlError};

pub fn register(state: &mut datafusion::execution::SessionState, scope: &Arc<PlanScope>) {
    use datafusion::execution::FunctionRegistry;
    let mut add = |f: ScalarUDF| {
        state
            .register_udf(Arc::new(f))
            .expect("function registration cannot fail");
    };
    let sc = scope.clone();
    add(udf(
        "pg_cancel_backend",
        &[1],
        ArrowType::Boolean,
        Volatility::Volatile,
        move |a| signal(&sc, &a[0], Signal::Cancel).map_err(sql_error),
    ));
    // The sessions a session waits for (row locks, advisory locks), as an int4[].
    let sc = scope.clone();
    add(udf(
        "pg_blocking_pids",
        &[1],
        ArrowType::List(Arc::new(
            datafusion::arrow::datatypes::Field::new_list_field(ArrowType::Int32, true),
        )),
        Volatility::Volatile,
        move |a| {
            let pid = match a[0].cast_to(&ArrowType::Int32)? {
                ScalarValue::Int32(Some(pid)) => pid,
                _ => {
                    return Ok(ScalarValue::List(ScalarValue::new_list_nullable(
                        &[],
                        &ArrowType::Int32,
                    )))
                }
            };
            let pids: Vec<ScalarValue> = crate::lock_waits::blocking_pids(&sc.engine, pid)
                .into_iter()
                .map(|p| ScalarValue::Int32(Some(p)))
                .collect();
            Ok(ScalarValue::List(ScalarValue::new_list_nullable(
                &pids,
                &ArrowType::Int32,
            )))
        },
    ));
    let sc = scope.clone();
    add(udf(
        "pg_reload_conf",
        &[0],
        ArrowType::Boolean,
        Volatility::Volatile,
        move |_| {
            if !sc.current_role_is_superuser() {
                return Err(sql_error(SqlError::new(
                    code::INSUFFICIENT_PRIVILEGE,
                    "permission denied for function pg_reload_conf",
                )));
            }
            match sc.engine.hba.reload() {
                Ok(file) => {
                    for e in &file.errors {
                        tracing::warn!(
                            "pg_hba.conf line {}: {}; the line is ignored",
                            e.line,
                            e.message
                        );
                    }
                    tracing::info!("pg_reload_conf: pg_hba.conf reloaded");
                }
                Err(e) => tracing::warn!("pg_reload_conf: pg_hba.conf not reloaded: {e}"),
            }
            sc.engine.reload_config();
            Ok(ScalarValue::Boolean(Some(true)))
        },
    ));
    // When the server started, and when it last read its settings files.
    let sc = scope.clone();
    add(instant_udf("pg_postmaster_start_time", move || {
        sc.engine.started_at
    }));
    let sc = scope.clone();
    add(instant_udf("pg_conf_load_time", move || {
        let loaded = sc.engine.config.read().loaded_at();
        loaded.unwrap_or(sc.engine.started_at)
    }));
    // The statistics views read the counters as they are: there is nothing to flush.
    add(super::functions::void_udf(
        "pg_stat_force_next_flush",
        0,
        |_| Ok(()),
    ));
    // A standby of a replication group is in recovery until it is promoted.
    let sc = scope.clone();
    add(udf(
        "pg_is_in_recovery",
        &[0],
        ArrowType::Boolean,
        Volatility::Volatile,
        move |_| Ok(ScalarValue::Boolean(Some(sc.engine.in_recovery()))),
    ));
    let sc = scope.clone();
    add(udf(
        "pg_terminate_backend",
        &[1, 2],
        ArrowType::Boolean,
        Volatility::Volatile,
        move |a| {
            // PostgreSQL's timeout waits for the backend to exit; Shoal only asks it to.
            if let Some(timeout_ms) = a.get(1).and_then(int) {
                if timeout_ms < 0 {
                    return Err(sql_error(SqlError::new(
                        code::NUMERIC_VALUE_OUT_OF_RANGE,
                        "\"timeout\" must not be negative",
                    )));
                }
                if timeout_ms > 0 {
                    return Err(sql_error(SqlError::unsupported(
                        "pg_terminate_backend with a timeout",
                    )));
                }
            }
            signal(&sc, &a[0], Signal::Terminate).map_err(sql_error)
        },
    ));
}

/// A function of no arguments that returns the timestamptz `at` gives.
fn instant_udf(
    name: &str,
    at: impl Fn() -> chrono::DateTime<chrono::Utc> + Send + Sync + 'static,
) -> ScalarUDF {
    let zone = || Some(super::functions::INSTANT_ZONE.into());
    let micros = datafusion::arrow::datatypes::TimeUnit::Microsecond;
    udf(
        name,
        &[0],
        ArrowType::Timestamp(micros, zone()),
        Volatility::Stable,
        move |_| {
            Ok(ScalarValue::TimestampMicrosecond(
                Some(at().timestamp_micros()),
                zone(),
            ))
        },
    )
}

fn int(v: &ScalarValue) -> Option<i64> {
    match v.cast_to(&ArrowType::Int64).ok()? {
        ScalarValue::Int64(v) => v,
        _ => None,
    }
}

#[derive(Clone, Copy)]
enum Signal {
    Cancel,
    Terminate,
}

/// Signals backend `pid`; false (and a WARNING) when there is no such backend, 42501 when the
/// acting role may not signal it.
fn signal(scope: &PlanScope, pid: &ScalarValue, how: Signal) -> Result<ScalarValue, SqlError> {
    let Some(pid) = int(pid) else {
        return Ok(ScalarValue::Boolean(None));
    };
    let backend = i32::try_from(pid)
        .ok()
        .and_then(|pid| scope.engine.backends.get(pid));
    let Some(backend) = backend else {
        scope.warning(
            code::WARNING,
            format!("PID {pid} is not a PostgreSQL backend process"),
        );
        return Ok(ScalarValue::Boolean(Some(false)));
    };
    may_signal(scope, &backend, how)?;
    let signalled = match how {
        Signal::Cancel => backend.cancel(),
        Signal::Terminate => backend.terminate(),
    };
    Ok(ScalarValue::Boolean(Some(signalled)))
}

/// PostgreSQL's rule: a superuser's backend only for superusers; another only for roles with
/// the privileges of the role it logged in as.
fn may_signal(scope: &PlanScope, backend: &Backend, how: Signal) -> Result<(), SqlError> {
    let catalog = scope.engine.catalog.read();
    let Some(actor) = catalog.role_named(&scope.current_role()) else {
        return Ok(());
    };
    if actor.superuser {
        return Ok(());
    }
    let Some(target) = catalog.role_named(&backend.activity().user) else {
        return Ok(());
    };
    let denied = |message: &str| Err(SqlError::new(code::INSUFFICIENT_PRIVILEGE, message));
    match (how, target.superuser) {
        (Signal::Cancel, true) => denied("must be a superuser to cancel superuser query"),
        (Signal::Terminate, true) => denied("must be a superuser to terminate superuser process"),
        _ if catalog.has_privileges_of_role(actor.oid, target.oid) => Ok(()),
        (Signal::Cancel, false) => denied(
            "must be a member of the role whose query is being canceled or member of \
             pg_signal_backend",
        ),
        (Signal::Terminate, false) => denied(
            "must be a member of the role whose process is being terminated or member of \
             pg_signal_backend",
        ),
    }
}
