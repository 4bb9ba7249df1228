//! Who can be waited for, and the waits-for graph that finds deadlocks: a transaction's first
//! write or lock registers it as a writer with a `TxnDone` others sleep on; a write check that
//! finds a row taken answers `WouldBlock` (through `TxnShared::would_block`), and the caller's
//! wait registers its edges, failing with `Deadlock` when they would close a cycle.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::{Transaction, TxnId, TxnShared};
use crate::error::StorageError;
use crate::row_ref::RowRef;

/// Signalled once when a writing transaction ends (commits or rolls back).
pub(crate) struct TxnDone {
    finished: Mutex<bool>,
    cond: Condvar,
    notify: tokio::sync::Notify,
    /// Transactions waiting for this one now (see [`Transaction::is_waited_for`]).
    waiters: AtomicU32,
}

impl TxnDone {
    /// Whether a transaction is waiting for this one now.
    pub(super) fn is_waited_for(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) > 0
    }

    fn is_finished(&self) -> bool {
        *self.finished.lock()
    }

    pub(super) fn finish(&self) {
        *self.finished.lock() = true;
        self.cond.notify_all();
        self.notify.notify_waiters();
    }
}

#[derive(Default)]
pub(super) struct WaitGraph {
    /// Transactions that wrote or locked something and have not ended: the only ones a
    /// `WouldBlock` can name.
    writers: HashMap<TxnId, Arc<TxnDone>>,
    /// waiter -> the transactions it waits for: the one it sleeps on, then the others that
    /// hold the same row lock with it (it needs all of them to end). A transaction waits for
    /// one lock at a time.
    waits_for: HashMap<TxnId, Vec<TxnId>>,
    /// waiter -> (holder, other holders): the other holders of the lock a write check found
    /// `holder` holding, for the waiter's next `start_wait` on `holder`.
    other_lock_holders: HashMap<TxnId, (TxnId, Vec<TxnId>)>,
    /// Row (by address) -> the transactions waiting for its lock, in the order they came:
    /// PostgreSQL's tuple lock. Only the first waits for the holder; the others wait for their
    /// turn, so the lock goes to the waiters first come, first served.
    row_queues: HashMap<usize, VecDeque<TxnId>>,
}

impl WaitGraph {
    /// Whether following wait edges from `from` reaches `target`.
    fn reaches(&self, from: &[TxnId], target: TxnId) -> bool {
        let mut stack = from.to_vec();
        let mut seen = HashSet::new();
        while let Some(t) = stack.pop() {
            if t == target {
                return true;
            }
            if seen.insert(t) {
                if let Some(next) = self.waits_for.get(&t) {
                    stack.extend_from_slice(next);
                }
            }
        }
        false
    }
}

/// The row lock waits at one instant, for pg_locks and pg_blocking_pids.
#[derive(Clone, Debug, Default)]
pub struct LockWaits {
    /// Running transactions that wrote or locked rows: others may wait for them.
    pub writers: Vec<TxnId>,
    /// Each waiting transaction and the transactions it waits for.
    pub waits_for: Vec<(TxnId, Vec<TxnId>)>,
}

impl TxnShared {
    pub(crate) fn lock_waits(&self) -> LockWaits {
        let g = self.waits.lock();
        LockWaits {
            writers: g.writers.keys().copied().collect(),
            waits_for: g
                .waits_for
                .iter()
                .map(|(waiter, holders)| (*waiter, holders.clone()))
                .collect(),
        }
    }

    /// Called before a transaction's first write or lock, so others can wait for it.
    pub(crate) fn ensure_writer(&self, txn: &mut Transaction) {
        if txn.done.is_none() {
            let done = Arc::new(TxnDone {
                finished: Mutex::new(false),
                cond: Condvar::new(),
                notify: tokio::sync::Notify::new(),
                waiters: AtomicU32::new(0),
            });
            self.waits.lock().writers.insert(txn.id, done.clone());
            txn.done = Some(done);
        }
    }

    /// The error that tells `waiter` to wait for `holder`; `others` are the other transactions
    /// holding the same row lock (empty when `holder` holds it alone). The caller sleeps on
    /// `holder` alone, but deadlock detection must know them all, so they are noted for the
    /// waiter's next `start_wait`. Every `WouldBlock` goes through here, which replaces the
    /// note a `WouldBlock` the waiter did not wait for (NOWAIT, SKIP LOCKED) left.
    pub(crate) fn would_block(
        &self,
        waiter: TxnId,
        holder: TxnId,
        others: Vec<TxnId>,
    ) -> StorageError {
        // Notes are written and taken only by their waiter's own thread, so when none is noted
        // anywhere this waiter has none either, and the common case takes no lock.
        if !others.is_empty() || self.noted_waiters.load(Ordering::Relaxed) > 0 {
            let note = (!others.is_empty()).then_some((holder, others));
            self.replace_note(&mut self.waits.lock(), waiter, note);
        }
        StorageError::WouldBlock { holder }
    }

    /// Registers the waits of `waiter` (for `holder`, and for the other holders of its lock),
    /// or says the wait would close a cycle, or that the holder has already ended (None).
    fn start_wait(
        &self,
        waiter: TxnId,
        holder: TxnId,
    ) -> Result<Option<Arc<TxnDone>>, StorageError> {
        debug_assert_ne!(waiter, holder, "a transaction never waits for itself");
        let mut g = self.waits.lock();
        let noted = self.replace_note(&mut g, waiter, None);
        let Some(done) = g.writers.get(&holder).cloned() else {
            return Ok(None);
        };
        let mut holders = vec![holder];
        if let Some((noted_holder, others)) = noted {
            if noted_holder == holder {
                // Ended ones cannot be in a cycle.
                holders.extend(others.into_iter().filter(|t| g.writers.contains_key(t)));
            }
        }
        if g.reaches(&holders, waiter) {
            return Err(StorageError::Deadlock);
        }
        g.waits_for.insert(waiter, holders);
        Ok(Some(done))
    }

    fn end_wait(&self, waiter: TxnId) {
        self.waits.lock().waits_for.remove(&waiter);
    }

    pub(crate) async fn wait_for(
        &self,
        waiter: &Transaction,
        holder: TxnId,
    ) -> Result<(), StorageError> {
        let Some(done) = self.start_wait(waiter.id, holder)? else {
            return Ok(());
        };
        let _edge = WaitEdge::new(self, waiter.id, &done);
        let notified = done.notify.notified();
        tokio::pin!(notified);
        // Enabled before checking the flag, so a finish in between still wakes us.
        notified.as_mut().enable();
        if !done.is_finished() {
            notified.await;
        }
        debug_assert!(done.is_finished());
        Ok(())
    }

    pub(crate) fn wait_for_blocking(
        &self,
        waiter: &Transaction,
        holder: TxnId,
    ) -> Result<(), StorageError> {
        let Some(done) = self.start_wait(waiter.id, holder)? else {
            return Ok(());
        };
        let _edge = WaitEdge::new(self, waiter.id, &done);
        let mut finished = done.finished.lock();
        while !*finished {
            done.cond.wait(&mut finished);
        }
        Ok(())
    }

    /// Puts `waiter` at the end of `row`'s queue of lock waiters; it stays there until the
    /// ticket is dropped.
    pub(crate) fn queue_for_row(self: &Arc<Self>, waiter: &Transaction, row: &RowRef) -> RowTicket {
        let key = row.as_ptr() as usize;
        let mut g = self.waits.lock();
        let queue = g.row_queues.entry(key).or_default();
        debug_assert!(!queue.contains(&waiter.id), "one place in a row's queue");
        queue.push_back(waiter.id);
        RowTicket {
            shared: self.clone(),
            _row: row.clone(),
            key,
            waiter: waiter.id,
        }
    }

    /// Waits until `ticket` is first in its row's queue. While it waits it waits for the
    /// transaction ahead of it in the deadlock graph: `Err(Deadlock)` if that closes a cycle.
    pub(crate) async fn wait_for_turn(&self, ticket: &RowTicket) -> Result<(), StorageError> {
        let me = ticket.waiter;
        let _edge = TurnEdge {
            shared: self,
            waiter: me,
        };
        loop {
            let notified = self.row_turns.notified();
            tokio::pin!(notified);
            // Enabled before the queue is read, so a departure in between still wakes us.
            notified.as_mut().enable();
            {
                let mut g = self.waits.lock();
                let first = g
                    .row_queues
                    .get(&ticket.key)
                    .and_then(|q| q.front().copied());
                match first {
                    Some(ahead) if ahead != me => {
                        if g.reaches(&[ahead], me) {
                            return Err(StorageError::Deadlock);
                        }
                        g.waits_for.insert(me, vec![ahead]);
                    }
                    _ => return Ok(()),
                }
            }
            notified.await;
        }
    }

    /// Sets (or with None clears) the other holders noted for `waiter`, keeping the count
    /// `would_block` reads without the lock; returns the note it replaced.
    fn replace_note(
        &self,
        g: &mut WaitGraph,
        waiter: TxnId,
        note: Option<(TxnId, Vec<TxnId>)>,
    ) -> Option<(TxnId, Vec<TxnId>)> {
        let old = match note {
            Some(note) => g.other_lock_holders.insert(waiter, note),
            None => g.other_lock_holders.remove(&waiter),
        };
        self.noted_waiters
            .store(g.other_lock_holders.len(), Ordering::Relaxed);
        old
    }

    /// Forgets an ending writer: it can no longer be waited for, and a note a write check
    /// left it without a wait (NOWAIT, SKIP LOCKED) goes too. Its `TxnDone` is finished next.
    pub(super) fn forget_writer(&self, txn: TxnId) {
        let mut g = self.waits.lock();
        g.writers.remove(&txn);
        self.replace_note(&mut g, txn, None);
    }
}

/// Removes the waits-for edge when a wait ends, also when the waiting future is dropped.
struct WaitEdge<'a> {
    shared: &'a TxnShared,
    waiter: TxnId,
    holder: &'a TxnDone,
}

impl<'a> WaitEdge<'a> {
    /// The edge `start_wait` registered, counted among `holder`'s waiters while it lasts.
    fn new(shared: &'a TxnShared, waiter: TxnId, holder: &'a TxnDone) -> Self {
        holder.waiters.fetch_add(1, Ordering::Relaxed);
        WaitEdge {
            shared,
            waiter,
            holder,
        }
    }
}

impl Drop for WaitEdge<'_> {
    fn drop(&mut self) {
        self.shared.end_wait(self.waiter);
        self.holder.waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A transaction's place in the queue of one row's lock waiters (see
/// `WaitGraph::row_queues`); dropping it leaves the queue and lets the next one go.
pub struct RowTicket {
    shared: Arc<TxnShared>,
    /// Keeps the row, and so its address, alive while the ticket names it.
    _row: RowRef,
    key: usize,
    waiter: TxnId,
}

impl Drop for RowTicket {
    fn drop(&mut self) {
        {
            let mut g = self.shared.waits.lock();
            if let Some(queue) = g.row_queues.get_mut(&self.key) {
                queue.retain(|t| *t != self.waiter);
                if queue.is_empty() {
                    g.row_queues.remove(&self.key);
                }
            }
        }
        self.shared.row_turns.notify_waiters();
    }
}

/// Removes a turn wait's edge from the deadlock graph when the wait ends or is dropped.
struct TurnEdge<'a> {
    shared: &'a TxnShared,
    waiter: TxnId,
}

impl Drop for TurnEdge<'_> {
    fn drop(&mut self) {
        self.shared.end_wait(self.waiter);
    }
}
