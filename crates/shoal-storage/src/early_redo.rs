//! Row redo logged ahead of the commit. A commit is one log record, and a record holds at most
//! 1 GiB, so a transaction that writes more rows than that (a COPY of millions of rows, an
//! INSERT ... SELECT) could never commit if its whole redo waited for the commit record. Once a
//! transaction's unlogged row redo passes a threshold, its writes so far go into the log as a
//! `RowChanges` record of the transaction's chain (named by the log position of its first such
//! record); the commit record then carries only the writes after the last of them, and names the
//! chain and how many of its writes count. A ROLLBACK TO SAVEPOINT below what was logged just
//! lowers that count: the next record of the chain starts at the savepoint's write, and recovery
//! replaces what followed it. A transaction that never commits leaves a chain nobody names,
//! which recovery drops. Like a column segment logged early, the chain pins the log from its
//! first record until the transaction ends, so a checkpoint taken meanwhile replays it.

use std::sync::atomic::Ordering;

use crate::error::StorageError;
use crate::txn::{RedoChange, Transaction, TxnShared, WriteEntry};

/// Default unlogged row redo after which a transaction logs its writes ahead of its commit:
/// big enough that ordinary transactions never do, small enough that the record and the
/// transaction's buffer stay far below the 1 GiB record limit.
pub const EARLY_REDO_BYTES_DEFAULT: usize = 64 << 20;

/// Encoded size of one change before its row bytes (table, kind, row id, length), as the log
/// writes it; only used to decide when to log, so an estimate would do.
const CHANGE_OVERHEAD_BYTES: usize = 21;

/// The chain this transaction's commit names, and how many of its writes the chain holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EarlyRedo {
    /// Log position of the chain's first `RowChanges` record.
    pub chain: u64,
    /// The transaction's first `writes` row changes are in the chain; the commit holds the rest.
    pub writes: u64,
}

/// How much of a transaction's row redo is already in the log.
#[derive(Debug, Default)]
pub(crate) struct EarlyRowRedo {
    /// Log position of the chain's first record, once one was logged.
    chain: Option<u64>,
    /// `writes[..logged]` are in the chain.
    logged: usize,
    /// Redo bytes of `writes[logged..]`.
    unlogged_bytes: usize,
}

impl EarlyRowRedo {
    /// What the commit record names, and the index of the first write it must hold itself.
    pub(crate) fn for_commit(&self) -> (Option<EarlyRedo>, usize) {
        let early = self.chain.map(|chain| EarlyRedo {
            chain,
            writes: self.logged as u64,
        });
        (early, self.logged)
    }

    /// The log position of the chain's first record, once one was logged.
    pub(crate) fn chain(&self) -> Option<u64> {
        self.chain
    }

    /// A ROLLBACK TO SAVEPOINT left `writes`: writes logged past its end no longer count.
    pub(crate) fn rolled_back(&mut self, writes: &[WriteEntry]) {
        self.logged = self.logged.min(writes.len());
        self.unlogged_bytes = writes[self.logged..].iter().map(redo_bytes).sum();
    }

    pub(crate) fn wrote(&mut self, write: &WriteEntry) {
        self.unlogged_bytes += redo_bytes(write);
    }
}

fn redo_bytes(w: &WriteEntry) -> usize {
    CHANGE_OVERHEAD_BYTES + w.row_bytes().len()
}

pub(crate) fn redo_change(w: &WriteEntry) -> RedoChange<'_> {
    RedoChange {
        table: w.table,
        kind: w.kind,
        row_id: w.chain.row_id(),
        row: w.row_bytes(),
    }
}

impl TxnShared {
    /// Called before each row write: registers the writer and, once the transaction's unlogged
    /// redo is over the threshold, logs it ahead of the commit.
    pub(crate) fn before_row_write(&self, txn: &mut Transaction) -> Result<(), StorageError> {
        self.ensure_writer(txn);
        if txn.early.unlogged_bytes >= self.early_redo_bytes.load(Ordering::Relaxed) {
            self.log_row_writes_early(txn)?;
        }
        Ok(())
    }

    /// Logs the transaction's row writes not yet in its chain as one `RowChanges` record.
    fn log_row_writes_early(&self, txn: &mut Transaction) -> Result<(), StorageError> {
        let Some(sink) = self.redo_sink.read().clone() else {
            return Ok(());
        };
        let first = txn.early.logged;
        let changes: Vec<RedoChange<'_>> = txn.writes[first..].iter().map(redo_change).collect();
        let txn_id = txn.id();
        // The pin is taken under the log's append lock, as checkpoints read the pins.
        let chain = sink
            .log_row_changes(txn.early.chain, first as u64, &changes, &mut |pos| {
                self.pin_log(txn_id, pos)
            })
            .map_err(StorageError::CommitFailed)?;
        drop(changes);
        match chain {
            Some((chain, end)) => {
                debug_assert!(txn.early.chain.is_none_or(|c| c == chain));
                txn.early = EarlyRowRedo {
                    chain: Some(chain),
                    logged: txn.writes.len(),
                    unlogged_bytes: 0,
                };
                txn.early_log_end = txn.early_log_end.max(end);
            }
            // This sink logs rows only in commit records; ask again a threshold later.
            None => txn.early.unlogged_bytes = 0,
        }
        Ok(())
    }
}
