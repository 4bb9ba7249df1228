//! pg_cancel_backend and pg_terminate_backend: reach another backend of the server (see
//! `crate::backends`); any backend may be signalled (privileges are not checked yet). And
//! pg_reload_conf(), which reads pg_hba.conf again, as SIGHUP does.

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
        move |a| Ok(signal(&sc, &a[0], Backend::cancel)),
    ));
    let sc = scope.clone();
    add(udf(
        "pg_reload_conf",
        &[0],
        ArrowType::Boolean,
        Volatility::Volatile,
        move |_| {
            let superuser = sc
                .engine
                .catalog
                .read()
                .role_named(&sc.current_role())
                .is_some_and(|r| r.superuser);
            if !superuser {
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
            Ok(ScalarValue::Boolean(Some(true)))
        },
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
            Ok(signal(&sc, &a[0], Backend::terminate))
        },
    ));
}

fn int(v: &ScalarValue) -> Option<i64> {
    match v.cast_to(&ArrowType::Int64).ok()? {
        ScalarValue::Int64(v) => v,
        _ => None,
    }
}

/// Signals backend `pid` with `how`; false (and a WARNING) when there is no such backend.
fn signal(scope: &PlanScope, pid: &ScalarValue, how: fn(&Backend) -> bool) -> ScalarValue {
    let Some(pid) = int(pid) else {
        return ScalarValue::Boolean(None);
    };
    let backend = i32::try_from(pid)
        .ok()
        .and_then(|pid| scope.engine.backends.get(pid));
    let Some(backend) = backend else {
        scope.warning(
            code::WARNING,
            format!("PID {pid} is not a PostgreSQL backend process"),
        );
        return ScalarValue::Boolean(Some(false));
    };
    ScalarValue::Boolean(Some(how(&backend)))
}
