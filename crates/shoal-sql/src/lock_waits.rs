//! Who blocks whom, in PostgreSQL's terms: a session waiting for a row another transaction
//! wrote or locked waits for that transaction to end (pg_locks shows it as a ShareLock not
//! granted on the holder's `transactionid`, each writing transaction holding the ExclusiveLock
//! on its own), and a session waiting for an advisory lock waits for the sessions holding it in
//! a conflicting mode. `pg_blocking_pids(pid)` lists the sessions blocking one.

use shoal_storage::txn::LockWaits;

use crate::advisory::{LockEntry, Mode};
use crate::engine::Engine;

/// A transaction lock of pg_locks: `pid`'s session, on transaction `txn`.
pub struct TransactionLock {
    pub pid: i32,
    pub txn: u64,
    pub granted: bool,
}

/// The sessions now running each transaction id (a session's latest transaction).
fn pid_of(engine: &Engine, txn: u64) -> Option<i32> {
    engine
        .backends
        .all()
        .into_iter()
        .find(|b| b.txn_id() == txn)
        .map(|b| b.pid)
}

/// pg_locks' transactionid rows: each writing transaction's own lock, and each wait for one.
pub fn transaction_locks(engine: &Engine) -> Vec<TransactionLock> {
    let LockWaits { writers, waits_for } = engine.db.lock_waits();
    let backends = engine.backends.all();
    let pid = |txn: u64| backends.iter().find(|b| b.txn_id() == txn).map(|b| b.pid);
    let mut locks: Vec<TransactionLock> = writers
        .iter()
        .filter_map(|&txn| {
            Some(TransactionLock {
                pid: pid(txn)?,
                txn,
                granted: true,
            })
        })
        .collect();
    for (waiter, holders) in waits_for {
        let Some(waiter_pid) = pid(waiter) else {
            continue;
        };
        locks.extend(holders.into_iter().map(|txn| TransactionLock {
            pid: waiter_pid,
            txn,
            granted: false,
        }));
    }
    locks.sort_by_key(|l| (l.pid, l.txn, l.granted));
    locks
}

/// pg_blocking_pids: the sessions `pid` waits for, for a row lock or an advisory lock.
pub fn blocking_pids(engine: &Engine, pid: i32) -> Vec<i32> {
    let mut blockers = Vec::new();
    if let Some(backend) = engine.backends.get(pid) {
        let txn = backend.txn_id();
        for (waiter, holders) in engine.db.lock_waits().waits_for {
            if waiter == txn && txn != 0 {
                blockers.extend(holders.into_iter().filter_map(|h| pid_of(engine, h)));
            }
        }
    }
    let advisory = engine.advisory_locks.entries();
    for wait in advisory.iter().filter(|e| e.pid == pid && !e.granted) {
        blockers.extend(
            advisory
                .iter()
                .filter(|held| held.granted && held.pid != pid && conflicts(held, wait))
                .map(|held| held.pid),
        );
    }
    blockers.sort_unstable();
    blockers.dedup();
    blockers
}

/// Whether an advisory lock held blocks one waited for: the same key, and one of them
/// exclusive.
fn conflicts(held: &LockEntry, wanted: &LockEntry) -> bool {
    held.key == wanted.key && (held.mode == Mode::Exclusive || wanted.mode == Mode::Exclusive)
}
