//! Advisory locks, PostgreSQL's `pg_advisory_lock` family: locks on application-chosen keys
//! (one bigint, or two integers, which are different keys), exclusive or shared, held by a
//! session until unlocked or by a transaction until it ends. Session locks are reentrant and
//! counted; a waiter blocks until the key is free, `lock_timeout` passes (55P03), the statement
//! is canceled, or its wait would close a cycle of waiters (40P01). Migration tools (Alembic,
//! Flyway, Django) and connection pools (asyncpg's reset runs `pg_advisory_unlock_all()`) use
//! them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{ArrayRef, BooleanBuilder, StringArray};
use datafusion::arrow::datatypes::{DataType as ArrowType, Field, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::async_udf::{AsyncScalarUDF, AsyncScalarUDFImpl};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use parking_lot::Mutex;

use crate::error::{code, SqlError, SqlResult};
use crate::query::functions::{sql_error, VOID_OID};
use crate::query::scope::PlanScope;
use crate::types::PG_TYPE_METADATA_KEY;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockKey {
    /// `pg_advisory_lock(bigint)`.
    Single(i64),
    /// `pg_advisory_lock(int, int)`.
    Pair(i32, i32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    Exclusive,
    Shared,
}

/// Who holds one key: each holder's session-level and transaction-level counts per mode.
#[derive(Default)]
struct Holders {
    by_pid: HashMap<i32, Held>,
}

#[derive(Default, Clone, Copy)]
struct Held {
    exclusive: u32,
    shared: u32,
    /// Of the counts above, those taken by the running transaction (released at its end).
    xact_exclusive: u32,
    xact_shared: u32,
}

impl Holders {
    /// Whether `pid` may take the key in `mode` now.
    fn grantable(&self, pid: i32, mode: Mode) -> bool {
        self.by_pid.iter().all(|(other, held)| {
            *other == pid
                || match mode {
                    Mode::Exclusive => held.exclusive == 0 && held.shared == 0,
                    Mode::Shared => held.exclusive == 0,
                }
        })
    }
}

/// Every advisory lock of the server. One per engine.
#[derive(Default)]
pub struct LockTable {
    state: Mutex<TableState>,
    /// Woken whenever a lock is released.
    released: tokio::sync::Notify,
}

#[derive(Default)]
struct TableState {
    keys: HashMap<LockKey, Holders>,
    /// What each waiting session waits for, for deadlock detection.
    waiting: HashMap<i32, (LockKey, Mode)>,
}

impl TableState {
    /// Whether `pid` waiting for `key` would close a cycle: some holder of `key` (other than
    /// `pid`) waits, directly or through others, for a key `pid` holds.
    fn closes_cycle(&self, pid: i32, key: LockKey, mode: Mode) -> bool {
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![(key, mode)];
        while let Some((k, m)) = stack.pop() {
            let Some(holders) = self.keys.get(&k) else {
                continue;
            };
            for (holder, held) in &holders.by_pid {
                let blocks = match m {
                    Mode::Exclusive => held.exclusive + held.shared > 0,
                    Mode::Shared => held.exclusive > 0,
                };
                if !blocks {
                    continue;
                }
                if *holder == pid {
                    if k != key {
                        return true;
                    }
                    continue;
                }
                if seen.insert(*holder) {
                    if let Some(next) = self.waiting.get(holder) {
                        stack.push(*next);
                    }
                }
            }
        }
        false
    }
}

/// One lock a session holds or waits for, as pg_locks lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockEntry {
    pub key: LockKey,
    pub mode: Mode,
    pub pid: i32,
    pub granted: bool,
}

impl LockTable {
    /// Every lock held (one entry per session and mode) and waited for, by key and session.
    pub fn entries(&self) -> Vec<LockEntry> {
        let state = self.state.lock();
        let mut out = Vec::new();
        for (key, holders) in &state.keys {
            for (pid, held) in &holders.by_pid {
                for (mode, count) in [
                    (Mode::Exclusive, held.exclusive),
                    (Mode::Shared, held.shared),
                ] {
                    if count > 0 {
                        out.push(LockEntry {
                            key: *key,
                            mode,
                            pid: *pid,
                            granted: true,
                        });
                    }
                }
            }
        }
        for (pid, (key, mode)) in &state.waiting {
            out.push(LockEntry {
                key: *key,
                mode: *mode,
                pid: *pid,
                granted: false,
            });
        }
        out.sort_by_key(|e| (e.pid, !e.granted, format!("{:?}", e.key)));
        out
    }

    fn try_take(&self, pid: i32, key: LockKey, mode: Mode, xact: bool) -> bool {
        let mut state = self.state.lock();
        let holders = state.keys.entry(key).or_default();
        if !holders.grantable(pid, mode) {
            return false;
        }
        let held = holders.by_pid.entry(pid).or_default();
        match (mode, xact) {
            (Mode::Exclusive, false) => held.exclusive += 1,
            (Mode::Shared, false) => held.shared += 1,
            (Mode::Exclusive, true) => {
                held.exclusive += 1;
                held.xact_exclusive += 1;
            }
            (Mode::Shared, true) => {
                held.shared += 1;
                held.xact_shared += 1;
            }
        }
        true
    }

    /// Releases one session-level hold of `key` in `mode`; false if `pid` had none.
    fn release(&self, pid: i32, key: LockKey, mode: Mode) -> bool {
        let mut state = self.state.lock();
        let Some(holders) = state.keys.get_mut(&key) else {
            return false;
        };
        let Some(held) = holders.by_pid.get_mut(&pid) else {
            return false;
        };
        let (count, xact) = match mode {
            Mode::Exclusive => (&mut held.exclusive, held.xact_exclusive),
            Mode::Shared => (&mut held.shared, held.xact_shared),
        };
        // Transaction-level holds are not released by unlock, as in PostgreSQL.
        if *count <= xact {
            return false;
        }
        *count -= 1;
        forget_if_free(&mut state, key, pid);
        drop(state);
        self.released.notify_waiters();
        true
    }

    /// Releases what `pid` holds: its transaction-level holds only, or everything.
    fn release_all(&self, pid: i32, transaction_only: bool) {
        let mut state = self.state.lock();
        let keys: Vec<LockKey> = state
            .keys
            .iter()
            .filter(|(_, h)| h.by_pid.contains_key(&pid))
            .map(|(k, _)| *k)
            .collect();
        if keys.is_empty() {
            return;
        }
        for key in keys {
            let holders = state.keys.get_mut(&key).expect("listed above");
            let held = holders.by_pid.get_mut(&pid).expect("listed above");
            if transaction_only {
                held.exclusive -= held.xact_exclusive;
                held.shared -= held.xact_shared;
            } else {
                held.exclusive = 0;
                held.shared = 0;
            }
            held.xact_exclusive = 0;
            held.xact_shared = 0;
            forget_if_free(&mut state, key, pid);
        }
        drop(state);
        self.released.notify_waiters();
    }
}

fn forget_if_free(state: &mut TableState, key: LockKey, pid: i32) {
    let holders = state.keys.get_mut(&key).expect("the key is held");
    if holders
        .by_pid
        .get(&pid)
        .is_some_and(|h| h.exclusive == 0 && h.shared == 0)
    {
        holders.by_pid.remove(&pid);
    }
    if holders.by_pid.is_empty() {
        state.keys.remove(&key);
    }
}

/// One session's side of the lock table.
pub struct SessionLocks {
    table: Arc<LockTable>,
    pid: i32,
}

impl SessionLocks {
    pub fn new(table: Arc<LockTable>, pid: i32) -> Self {
        SessionLocks { table, pid }
    }

    /// Takes `key`, waiting while others hold it; `lock_timeout_ms` 0 waits as long as it takes.
    pub async fn lock(
        &self,
        key: LockKey,
        mode: Mode,
        xact: bool,
        lock_timeout_ms: u64,
    ) -> SqlResult<()> {
        // Removes this session's entry in the wait graph however the wait ends, a canceled
        // statement (its future dropped) included: a stale entry would be a false deadlock.
        struct Waiting<'a>(&'a LockTable, i32);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.state.lock().waiting.remove(&self.1);
            }
        }
        let _waiting = Waiting(&self.table, self.pid);
        let wait = async {
            loop {
                // Registered before the attempt, so a release in between is not missed.
                let released = self.table.released.notified();
                if self.table.try_take(self.pid, key, mode, xact) {
                    return Ok(());
                }
                {
                    let mut state = self.table.state.lock();
                    if state.closes_cycle(self.pid, key, mode) {
                        return Err(SqlError::new(code::DEADLOCK_DETECTED, "deadlock detected")
                            .with_detail(format!(
                                "Process {} waits for an advisory lock held by a process that waits for one it holds.",
                                self.pid
                            )));
                    }
                    state.waiting.insert(self.pid, (key, mode));
                }
                released.await;
            }
        };
        if lock_timeout_ms == 0 {
            return wait.await;
        }
        match tokio::time::timeout(Duration::from_millis(lock_timeout_ms), wait).await {
            Ok(r) => r,
            Err(_) => Err(crate::interrupt::lock_timeout_error()),
        }
    }

    pub fn try_lock(&self, key: LockKey, mode: Mode, xact: bool) -> bool {
        self.table.try_take(self.pid, key, mode, xact)
    }

    pub fn unlock(&self, key: LockKey, mode: Mode) -> bool {
        self.table.release(self.pid, key, mode)
    }

    /// pg_advisory_unlock_all(): every session-level lock (and DISCARD ALL).
    pub fn unlock_all(&self) {
        self.table.release_all(self.pid, false);
    }

    /// The transaction ended: its transaction-level locks go.
    pub fn end_transaction(&self) {
        self.table.release_all(self.pid, true);
    }
}

impl Drop for SessionLocks {
    /// A session that ends releases everything it held, as PostgreSQL's does.
    fn drop(&mut self) {
        self.table.state.lock().waiting.remove(&self.pid);
        self.table.release_all(self.pid, false);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Call {
    /// Waits; returns void.
    Lock {
        mode: Mode,
        xact: bool,
    },
    /// Returns whether it got the lock.
    TryLock {
        mode: Mode,
        xact: bool,
    },
    /// Returns whether a lock was held.
    Unlock(Mode),
    UnlockAll,
}

const FUNCTIONS: &[(&str, Call)] = &[
    (
        "pg_advisory_lock",
        Call::Lock {
            mode: Mode::Exclusive,
            xact: false,
        },
    ),
    (
        "pg_advisory_lock_shared",
        Call::Lock {
            mode: Mode::Shared,
            xact: false,
        },
    ),
    (
        "pg_advisory_xact_lock",
        Call::Lock {
            mode: Mode::Exclusive,
            xact: true,
        },
    ),
    (
        "pg_advisory_xact_lock_shared",
        Call::Lock {
            mode: Mode::Shared,
            xact: true,
        },
    ),
    (
        "pg_try_advisory_lock",
        Call::TryLock {
            mode: Mode::Exclusive,
            xact: false,
        },
    ),
    (
        "pg_try_advisory_lock_shared",
        Call::TryLock {
            mode: Mode::Shared,
            xact: false,
        },
    ),
    (
        "pg_try_advisory_xact_lock",
        Call::TryLock {
            mode: Mode::Exclusive,
            xact: true,
        },
    ),
    (
        "pg_try_advisory_xact_lock_shared",
        Call::TryLock {
            mode: Mode::Shared,
            xact: true,
        },
    ),
    ("pg_advisory_unlock", Call::Unlock(Mode::Exclusive)),
    ("pg_advisory_unlock_shared", Call::Unlock(Mode::Shared)),
    ("pg_advisory_unlock_all", Call::UnlockAll),
];

/// Registers the advisory lock functions of the session whose scope is `scope`.
pub fn register(state: &mut datafusion::execution::SessionState, scope: &Arc<PlanScope>) {
    use datafusion::execution::FunctionRegistry;
    // Explicit signatures: the async wrapper does not ask `coerce_types`. Integer arguments
    // of any width take the bigint form; the two-key form checks its range when called.
    let keyed = Signature::one_of(
        vec![
            TypeSignature::Exact(vec![ArrowType::Int64]),
            TypeSignature::Exact(vec![ArrowType::Int64, ArrowType::Int64]),
        ],
        Volatility::Volatile,
    );
    for (name, call) in FUNCTIONS {
        let signature = match call {
            Call::UnlockAll => Signature::nullary(Volatility::Volatile),
            _ => keyed.clone(),
        };
        let udf = AsyncScalarUDF::new(Arc::new(AdvisoryFunction {
            name,
            call: *call,
            scope: scope.clone(),
            signature,
        }));
        state
            .register_udf(Arc::new(udf.into_scalar_udf()))
            .expect("function registration cannot fail");
    }
}

struct AdvisoryFunction {
    name: &'static str,
    call: Call,
    scope: Arc<PlanScope>,
    signature: Signature,
}

impl std::fmt::Debug for AdvisoryFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for AdvisoryFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && Arc::ptr_eq(&self.scope, &other.scope)
    }
}
impl Eq for AdvisoryFunction {}
impl std::hash::Hash for AdvisoryFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

impl AdvisoryFunction {
    fn returns_bool(&self) -> bool {
        matches!(self.call, Call::TryLock { .. } | Call::Unlock(_))
    }
}

impl ScalarUDFImpl for AdvisoryFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(if self.returns_bool() {
            ArrowType::Boolean
        } else {
            ArrowType::Utf8
        })
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> DfResult<FieldRef> {
        if self.returns_bool() {
            return Ok(Arc::new(Field::new(self.name, ArrowType::Boolean, true)));
        }
        Ok(Arc::new(
            Field::new(self.name, ArrowType::Utf8, true).with_metadata(
                [(PG_TYPE_METADATA_KEY.to_string(), VOID_OID.to_string())]
                    .into_iter()
                    .collect(),
            ),
        ))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        // AsyncScalarUDF calls invoke_async_with_args instead.
        datafusion::common::internal_err!("{} must be invoked asynchronously", self.name)
    }
}

/// The key of row `row`, None when an argument is NULL (the functions are strict).
fn key_at(arrays: &[ArrayRef], row: usize) -> DfResult<Option<LockKey>> {
    let value = |i: usize| ScalarValue::try_from_array(&arrays[i], row);
    Ok(match arrays.len() {
        1 => match value(0)? {
            ScalarValue::Int64(Some(k)) => Some(LockKey::Single(k)),
            _ => None,
        },
        _ => match (value(0)?, value(1)?) {
            (ScalarValue::Int64(Some(a)), ScalarValue::Int64(Some(b))) => {
                let int4 = |v: i64| {
                    i32::try_from(v).map_err(|_| {
                        sql_error(SqlError::new(
                            code::NUMERIC_VALUE_OUT_OF_RANGE,
                            "integer out of range",
                        ))
                    })
                };
                Some(LockKey::Pair(int4(a)?, int4(b)?))
            }
            _ => None,
        },
    })
}

#[async_trait::async_trait]
impl AsyncScalarUDFImpl for AdvisoryFunction {
    async fn invoke_async_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let locks = &self.scope.advisory_locks;
        if self.call == Call::UnlockAll {
            locks.unlock_all();
            let empty: ArrayRef = Arc::new(StringArray::from(vec![""; rows]));
            return Ok(ColumnarValue::Array(empty));
        }
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<DfResult<_>>()?;
        let lock_timeout_ms = self
            .scope
            .settings
            .lock()
            .get("lock_timeout")
            .and_then(|v| crate::settings::parse_duration_ms(v))
            .unwrap_or(0);
        // One call per row, in order, as PostgreSQL evaluates a volatile function.
        let mut answers = BooleanBuilder::with_capacity(rows);
        let mut voids = Vec::with_capacity(rows);
        for row in 0..rows {
            let Some(key) = key_at(&arrays, row)? else {
                answers.append_null();
                voids.push(None);
                continue;
            };
            match self.call {
                Call::Lock { mode, xact } => {
                    locks
                        .lock(key, mode, xact, lock_timeout_ms)
                        .await
                        .map_err(sql_error)?;
                    voids.push(Some(""));
                }
                Call::TryLock { mode, xact } => {
                    answers.append_value(locks.try_lock(key, mode, xact));
                }
                Call::Unlock(mode) => {
                    let held = locks.unlock(key, mode);
                    if !held {
                        let kind = match mode {
                            Mode::Exclusive => "ExclusiveLock",
                            Mode::Shared => "ShareLock",
                        };
                        // PostgreSQL warns and answers false.
                        tracing::debug!("you don't own a lock of type {kind}");
                    }
                    answers.append_value(held);
                }
                Call::UnlockAll => unreachable!("handled above"),
            }
        }
        let result: ArrayRef = if self.returns_bool() {
            Arc::new(answers.finish())
        } else {
            Arc::new(StringArray::from(voids))
        };
        Ok(ColumnarValue::Array(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_and_shared_holds_exclude_as_in_postgres() {
        let table = Arc::new(LockTable::default());
        let a = SessionLocks::new(table.clone(), 1);
        let b = SessionLocks::new(table.clone(), 2);
        let k = LockKey::Single(42);
        assert!(a.try_lock(k, Mode::Exclusive, false));
        assert!(a.try_lock(k, Mode::Exclusive, false), "reentrant");
        assert!(!b.try_lock(k, Mode::Shared, false));
        assert!(
            b.try_lock(LockKey::Pair(0, 42), Mode::Exclusive, false),
            "another key space"
        );
        assert!(a.unlock(k, Mode::Exclusive));
        assert!(!b.try_lock(k, Mode::Exclusive, false), "still held once");
        assert!(a.unlock(k, Mode::Exclusive));
        assert!(!a.unlock(k, Mode::Exclusive), "nothing left to unlock");
        assert!(b.try_lock(k, Mode::Shared, false));
        assert!(a.try_lock(k, Mode::Shared, false), "shared with shared");
        assert!(!a.try_lock(LockKey::Pair(0, 42), Mode::Shared, false));
        drop(b);
        assert!(
            a.try_lock(LockKey::Pair(0, 42), Mode::Exclusive, false),
            "freed at session end"
        );
    }

    #[test]
    fn transaction_locks_end_with_the_transaction_and_resist_unlock() {
        let table = Arc::new(LockTable::default());
        let a = SessionLocks::new(table.clone(), 1);
        let b = SessionLocks::new(table.clone(), 2);
        let k = LockKey::Single(7);
        assert!(a.try_lock(k, Mode::Exclusive, true));
        assert!(!a.unlock(k, Mode::Exclusive));
        assert!(!b.try_lock(k, Mode::Exclusive, false));
        a.end_transaction();
        assert!(b.try_lock(k, Mode::Exclusive, false));
    }

    #[tokio::test]
    async fn a_waiter_gets_the_lock_when_it_is_released_and_a_cycle_is_a_deadlock() {
        let table = Arc::new(LockTable::default());
        let a = Arc::new(SessionLocks::new(table.clone(), 1));
        let b = Arc::new(SessionLocks::new(table.clone(), 2));
        let (k1, k2) = (LockKey::Single(1), LockKey::Single(2));
        assert!(a.try_lock(k1, Mode::Exclusive, false));
        assert!(b.try_lock(k2, Mode::Exclusive, false));
        let waiter = {
            let a = a.clone();
            tokio::spawn(async move { a.lock(k2, Mode::Exclusive, false, 0).await })
        };
        // Wait until a is registered as waiting for k2.
        while !table.state.lock().waiting.contains_key(&1) {
            tokio::task::yield_now().await;
        }
        let e = b.lock(k1, Mode::Exclusive, false, 0).await.unwrap_err();
        assert_eq!(e.code, code::DEADLOCK_DETECTED);
        assert!(b.unlock(k2, Mode::Exclusive));
        waiter.await.unwrap().unwrap();
        let e = b.lock(k2, Mode::Exclusive, false, 50).await.unwrap_err();
        assert_eq!(e.code, code::LOCK_NOT_AVAILABLE);
    }
}
