//! The functions that change a replication group, superusers only:
//! - `pg_promote(wait boolean DEFAULT true, wait_seconds integer DEFAULT 60)`: on a standby, a
//!   switchover to it. The primary hands the group over once this node has the whole log (no
//!   acknowledged commit is lost), this node is elected, and with `wait` the call returns once
//!   it accepts writes: true, or false if that took longer than `wait_seconds`. On a server
//!   not in recovery it fails as PostgreSQL's does.
//! - `shoal_remove_member(node_id bigint)`: on the primary, removes a member (one that is
//!   gone for good, before a replacement joins); true once the group committed the change.

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
/// How long `shoal_remove_member` waits for the group to commit the change.
const REMOVE_TIMEOUT: Duration = Duration::from_secs(10);

pub fn register(state: &mut datafusion::execution::SessionState, scope: &Arc<PlanScope>) {
    use datafusion::execution::FunctionRegistry;
    let promote = Signature::one_of(
        vec![
            TypeSignature::Nullary,
            TypeSignature::Exact(vec![ArrowType::Boolean]),
            TypeSignature::Exact(vec![ArrowType::Boolean, ArrowType::Int64]),
        ],
        Volatility::Volatile,
    );
    let remove = Signature::uniform(1, vec![ArrowType::Int64], Volatility::Volatile);
    for (function, signature) in [
        (GroupFunction::Promote, promote),
        (GroupFunction::RemoveMember, remove),
    ] {
        let udf = AsyncScalarUDF::new(Arc::new(GroupControl {
            function,
            scope: scope.clone(),
            signature,
        }));
        state
            .register_udf(Arc::new(udf.into_scalar_udf()))
            .expect("function registration cannot fail");
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum GroupFunction {
    Promote,
    RemoveMember,
}

impl GroupFunction {
    fn name(self) -> &'static str {
        match self {
            GroupFunction::Promote => "pg_promote",
            GroupFunction::RemoveMember => "shoal_remove_member",
        }
    }
}

struct GroupControl {
    function: GroupFunction,
    scope: Arc<PlanScope>,
    signature: Signature,
}

impl std::fmt::Debug for GroupControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.function.name())
    }
}

impl PartialEq for GroupControl {
    fn eq(&self, other: &Self) -> bool {
        self.function == other.function && Arc::ptr_eq(&self.scope, &other.scope)
    }
}
impl Eq for GroupControl {}
impl std::hash::Hash for GroupControl {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.function.hash(state)
    }
}

impl ScalarUDFImpl for GroupControl {
    fn name(&self) -> &str {
        self.function.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(ArrowType::Boolean)
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        Ok(Arc::new(Field::new(
            self.function.name(),
            ArrowType::Boolean,
            true,
        )))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        // AsyncScalarUDF calls invoke_async_with_args instead.
        datafusion::common::internal_err!("{} must be invoked asynchronously", self.function.name())
    }
}

#[async_trait::async_trait]
impl AsyncScalarUDFImpl for GroupControl {
    async fn invoke_async_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arg = |i: usize| -> DfResult<Option<ScalarValue>> {
            args.args
                .get(i)
                .map(|a| ScalarValue::try_from_array(&a.to_array(rows.max(1))?, 0))
                .transpose()
        };
        if !self.scope.current_role_is_superuser() {
            return Err(sql_error(SqlError::new(
                code::INSUFFICIENT_PRIVILEGE,
                format!("permission denied for function {}", self.function.name()),
            )));
        }
        if self.function == GroupFunction::RemoveMember {
            let Some(ScalarValue::Int64(Some(id))) = arg(0)? else {
                return null_result(rows);
            };
            self.remove_member(id).await?;
            let answers: ArrayRef = Arc::new(BooleanArray::from(vec![true; rows]));
            return Ok(ColumnarValue::Array(answers));
        }
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

impl GroupControl {
    async fn remove_member(&self, id: i64) -> DfResult<()> {
        let engine = &self.scope.engine;
        let replica = engine.replica.get().filter(|_| !engine.in_recovery());
        let Some(replica) = replica else {
            let message = match engine.replicated() {
                true => "a member is removed on the primary",
                false => "this server is not a member of a replication group",
            };
            return Err(sql_error(SqlError::new("55000", message)));
        };
        let id = u64::try_from(id).map_err(|_| {
            sql_error(SqlError::new(
                code::INVALID_PARAMETER_VALUE,
                format!("node {id} is not a member of the group"),
            ))
        })?;
        replica
            .remove_member(id, REMOVE_TIMEOUT)
            .await
            .map_err(|e| sql_error(SqlError::new("55000", e)))
    }

    async fn promote(&self, wait: bool, wait_seconds: u64) -> DfResult<bool> {
        let engine = &self.scope.engine;
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
