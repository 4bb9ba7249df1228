//! What DDL asks of a row table's existing rows, apart from building indexes
//! (`index_build.rs`): checking them against a new constraint, closing the table for a rebuild,
//! and rewriting every version for new columns. Shoal takes no relation locks, so each of these
//! also answers for the versions of transactions still open: a check looks at them too, and a
//! rebuild or rewrite that would lose them, or leave redo records replay cannot apply, is
//! refused (the SQL layer turns that into 55P03, where PostgreSQL would wait).

use std::sync::Arc;

use crate::error::StorageError;
use crate::row_codec;
use crate::table::{ChainState, RowRef, RowTable, VersionData, HEAP_CHUNK_ROWS};
use crate::txn::{is_txn_stamp, stamp_txn, txn_stamp, Snapshot, TxnId, END_UNSET};
use crate::types::{DataType, Value};

impl RowTable {
    /// Calls `f` with the bytes of every version of every row that is live, or may become
    /// live, to a transaction that starts after `snap`'s: the version `snap` sees, and any
    /// version not ended by a commit or by `snap`'s own transaction (one another transaction
    /// wrote and has not committed, one committed after `snap` was taken, one another
    /// transaction is deleting or updating). Stops when `f` returns false.
    ///
    /// For DDL that checks the existing rows against a new constraint (SET NOT NULL, CHECK,
    /// FOREIGN KEY). With no relation locks, a row another transaction inserted and has not
    /// yet committed must pass the check as well, or its commit would break the constraint
    /// the DDL has already made part of the table. Conservative: a version that a rollback
    /// would discard fails the DDL too, where PostgreSQL waits for the other transaction to end.
    pub fn scan_possibly_live(&self, snap: &Snapshot, mut f: impl FnMut(&[u8]) -> bool) {
        let _shape = self.shape.read_recursive();
        let own = txn_stamp(snap.txn);
        let mut rows: Vec<RowRef> = Vec::with_capacity(HEAP_CHUNK_ROWS);
        for chunk in self.heap.chunks() {
            rows.clear();
            rows.extend(chunk.lock().iter().cloned());
            for row in &rows {
                let st = row.state.lock();
                for v in st.versions() {
                    let open_end = v.end == END_UNSET || (is_txn_stamp(v.end) && v.end != own);
                    // A version its own (uncommitted) writer has replaced or deleted is dead
                    // whichever way that transaction ends.
                    let replaced_by_its_writer = is_txn_stamp(v.begin) && v.begin == v.end;
                    let may_be_live = open_end && !replaced_by_its_writer;
                    if (snap.sees(v.begin, v.end) || may_be_live) && !f(row.bytes(&v.data)) {
                        return;
                    }
                }
            }
        }
    }

    /// Closes the table to writers for a rebuild that copied its rows as `snap` saw them
    /// (ALTER COLUMN TYPE, SET ACCESS METHOD): marks it dropped, so every later write to it
    /// fails, and returns true; unless the table holds a change the copy lacks, then leaves it
    /// as it is and returns false. Such a change is a version or a row lock of a transaction
    /// other than `snap`'s that is still open (its commit would land in the old table and be
    /// lost, and its log records would name rows the rebuilt table numbers differently), or a
    /// version committed after `snap`.
    pub fn close_for_rebuild(&self, snap: &Snapshot) -> bool {
        // The shape's write lock: a writer holds the read lock from its alive check to its
        // write, so each one has either written already (and is seen here) or finds the table
        // dropped.
        let _shape = self.shape.write();
        let own = txn_stamp(snap.txn);
        let not_in_copy = |stamp: u64| {
            stamp != END_UNSET && stamp != own && (is_txn_stamp(stamp) || stamp > snap.ts)
        };
        let blocked = self.find_in_chains(|st| {
            let change = st.older.other_lock_holder(snap.txn, true).is_some()
                || st
                    .versions()
                    .any(|v| not_in_copy(v.begin) || not_in_copy(v.end));
            change.then_some(())
        });
        if blocked.is_some() {
            return false;
        }
        self.mark_dropped();
        true
    }

    /// Opens a table `close_for_rebuild` closed, when the rebuild failed before replacing it.
    pub fn reopen_after_failed_rebuild(&self) {
        self.mark_restored();
    }

    /// Cuts the trailing columns past `new_types` off every version (a rolled back ADD COLUMN),
    /// unless another transaction has uncommitted versions in the table: those are logged with
    /// the columns they were written with at their commit, so the table keeps them (false).
    pub fn cut_columns(&self, new_types: Vec<DataType>) -> Result<bool, StorageError> {
        let n = new_types.len();
        self.rewrite_columns(
            new_types,
            &|mut row| {
                row.truncate(n);
                row
            },
            true,
        )
        .map(|in_flight| in_flight.is_none())
    }

    /// Rewrites every version for new column types (ALTER TABLE ADD/DROP COLUMN ...): `map`
    /// turns an old row into a new one, uncommitted versions included (for a rewrite whose new
    /// rows decode the old ones' redo records the same way; otherwise see
    /// `alter_columns_unless_in_flight`). Index column positions are not renumbered: drop
    /// indexes on dropped columns and re-create those whose positions shift. Nothing changes if
    /// a mapped row does not fit.
    pub fn alter_columns(
        &self,
        new_types: Vec<DataType>,
        map: &dyn Fn(Vec<Value>) -> Vec<Value>,
    ) -> Result<(), StorageError> {
        self.rewrite_columns(new_types, map, false).map(|_| ())
    }

    /// `alter_columns`, unless a version in the table is an uncommitted write of some
    /// transaction (this one's included): then nothing changes and that transaction is
    /// returned. For a rewrite that changes what a row decodes to (DROP COLUMN, ADD COLUMN with
    /// a default): such a write's redo record was made with the old columns and is logged at
    /// its commit, after the rewrite, so replay would apply it to the new columns.
    pub fn alter_columns_unless_in_flight(
        &self,
        new_types: Vec<DataType>,
        map: &dyn Fn(Vec<Value>) -> Vec<Value>,
    ) -> Result<Option<TxnId>, StorageError> {
        self.rewrite_columns(new_types, map, true)
    }

    /// `alter_columns`; with `refuse_in_flight`, nothing changes if any version is an
    /// uncommitted write (checked under the same lock as the rewrite), and the writer is
    /// returned.
    fn rewrite_columns(
        &self,
        new_types: Vec<DataType>,
        map: &dyn Fn(Vec<Value>) -> Vec<Value>,
        refuse_in_flight: bool,
    ) -> Result<Option<TxnId>, StorageError> {
        let mut shape = self.shape.write();
        if refuse_in_flight {
            let writer = |stamp: u64| is_txn_stamp(stamp).then(|| stamp_txn(stamp));
            let in_flight = self.find_in_chains(|st| {
                st.versions()
                    .find_map(|v| writer(v.begin).or_else(|| writer(v.end)))
            });
            if in_flight.is_some() {
                return Ok(in_flight);
            }
        }
        let mut rewritten: Vec<(RowRef, Vec<Arc<[u8]>>)> = Vec::new();
        for chunk in self.heap.chunks() {
            for chain in chunk.lock().iter() {
                let st = chain.state.lock();
                let mut datas = Vec::new();
                for v in st.versions() {
                    let new_row = map(row_codec::decode_all(&shape.types, chain.bytes(&v.data)));
                    row_codec::check_row(&new_types, &new_row)?;
                    datas.push(Arc::from(row_codec::encode_vec(&new_types, &new_row)));
                }
                rewritten.push((chain.clone(), datas));
            }
        }
        for (chain, datas) in rewritten {
            let mut st = chain.state.lock();
            for (v, data) in st.versions_mut().zip(datas) {
                // The inline bytes stay in the block, unused, for the row's life.
                v.data = VersionData::Shared(data);
            }
        }
        shape.types = new_types;
        self.reset_gc_cursor();
        Ok(None)
    }

    /// The first `Some` that `f` gives for a row's chain state, each row visited under its
    /// chunk's lock. Call it with the shape write-locked, so that no write runs meanwhile.
    fn find_in_chains<T>(&self, mut f: impl FnMut(&ChainState) -> Option<T>) -> Option<T> {
        self.heap
            .chunks()
            .iter()
            .find_map(|chunk| chunk.lock().iter().find_map(|row| f(&row.state.lock())))
    }
}
