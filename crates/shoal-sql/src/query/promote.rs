//! `pg_promote(wait boolean DEFAULT true, wait_seconds integer DEFAULT 60)`: on a standby of a
//! replication group, a switchover to it. The primary hands the group over once this node has
//! the whole log (no acknowledged commit is lost), this node is elected, and with `wait` the
//! call returns once it accepts writes: true, or false if that took longer than
//! `wait_seconds`. On a server not in recovery it fails as PostgreSQL's does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::{ArrayRef, BooleanArray};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::async_udf::{AsyncScalarUDF, AsyncScalarUDFImpl};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};

use crate::error::{code, SqlError};
use crate::query::functions::sql_error;
use crate::query::scope::PlanScope;

const WAIT_SECONDS_DEFAULT: i64 = 60;

pub fn register(state: &mut datafusion::execution::SessionState, scope: &Arc<PlanScope>) {
    use datafusion::execution::FunctionRegistry;
    let signature = Signature::one_of(
        vec![
            TypeSignature::Nullary,
            TypeSignature::Exact(vec![ArrowType::Boolean]),
            TypeSignature::Exact(vec![ArrowType::Boolean, ArrowType::Int64]),
        ],
        Volatility::Volatile,
    );
    let udf = AsyncScalarUDF::new(Arc::new(PgPromote {
        scope: scope.clone(),
        signature,
    }));
    state
        .register_udf(Arc::new(udf.into_scalar_udf()))
        .expect("function registration cannot fail");
}

struct PgPromote {
    scope: Arc<PlanScope>,
    signature: Signature,
}

impl std::fmt::Debug for PgPromote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("pg_promote")
    }
}

impl PartialEq for PgPromote {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.scope, &other.scope)
    }
}
impl Eq for PgPromote {}
impl std::hash::Hash for PgPromote {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        "pg_promote".hash(state)
    }
}

impl ScalarUDFImpl for PgPromote {
    fn name(&self) -> &str {
        "pg_promote"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Boolean)
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        Ok(Arc::new(Field::new("pg_promote", ArrowType::Boolean, true)))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        // AsyncScalarUDF calls invoke_async_with_args instead.
        datafusion::common::internal_err!("pg_promote must be invoked asynchronously")
    }
}

#[async_trait::async_trait]
impl AsyncScalarUDFImpl for PgPromote {
    async fn invoke_async_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arg = |i: usize| -> DfResult<Option<ScalarValue>> {
            args.args
                .get(i)
                .map(|a| ScalarValue::try_from_array(&a.to_array(rows.max(1))?, 0))
                .transpose()
        };
        let wait = match arg(0)? {
            Some(ScalarValue::Boolean(Some(w))) => w,
            Some(_) => return null_result(rows),
            None => true,
        };
        let wait_seconds = match arg(1)? {
            Some(ScalarValue::Int64(Some(s))) => s,
            Some(_) => return null_result(rows),
            None => WAIT_SECONDS_DEFAULT,
        };
        if wait_seconds <= 0 {
            return Err(sql_error(SqlError::new(
                code::INVALID_PARAMETER_VALUE,
                "\"wait_seconds\" must not be negative or zero",
            )));
        }
        let promoted = self.promote(wait, wait_seconds as u64).await?;
        let answers: ArrayRef = Arc::new(BooleanArray::from(vec![promoted; rows]));
        Ok(ColumnarValue::Array(answers))
    }
}

fn null_result(rows: usize) -> DfResult<ColumnarValue> {
    let nulls: ArrayRef = Arc::new(BooleanArray::from(vec![None; rows]));
    Ok(ColumnarValue::Array(nulls))
}

impl PgPromote {
    async fn promote(&self, wait: bool, wait_seconds: u64) -> DfResult<bool> {
        let engine = &self.scope.engine;
        if !self.scope.current_role_is_superuser() {
            return Err(sql_error(SqlError::new(
                code::INSUFFICIENT_PRIVILEGE,
                "permission denied for function pg_promote",
            )));
        }
        let replica = engine.replica.get().filter(|_| engine.in_recovery());
        let Some(replica) = replica else {
            return Err(sql_error(
                SqlError::new("55000", "recovery is not in progress")
                    .with_hint("Recovery control functions can only be executed during recovery."),
            ));
        };
        let started = Instant::now();
        let timeout = Duration::from_secs(wait_seconds);
        replica.become_leader(timeout).await.map_err(|e| {
            sql_error(SqlError::new(
                "55000",
                format!("could not promote this standby: {e}"),
            ))
        })?;
        if !wait {
            return Ok(true);
        }
        // Elected: promotion follows once the log of the earlier primary is applied.
        while engine.in_recovery() {
            if started.elapsed() >= timeout {
                tracing::warn!("server did not promote within {wait_seconds} seconds");
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(true)
    }
}
