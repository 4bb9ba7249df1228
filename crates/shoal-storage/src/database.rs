//! The database handle the SQL layer holds (as `Arc<Database>`): begins and ends transactions,
//! hands out statement snapshots, lets a session wait for the transaction that holds a row, and
//! keeps the registry of row tables by id (names live in the SQL-level catalog).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use arrow::datatypes::SchemaRef;

use crate::column::ColumnTable;
use crate::error::StorageError;
use crate::table::RowTable;
use crate::txn::{
    CommitTs, IsolationLevel, RedoSink, ReplayBounds, Snapshot, Transaction, TxnId, TxnShared,
};
use crate::types::DataType;
use crate::TableId;

pub struct Database {
    shared: Arc<TxnShared>,
    tables: RwLock<HashMap<TableId, Arc<RowTable>>>,
    column_tables: RwLock<HashMap<TableId, Arc<ColumnTable>>>,
}

impl Database {
    pub fn new() -> Arc<Database> {
        Arc::new(Database {
            shared: Arc::new(TxnShared::new()),
            tables: RwLock::new(HashMap::new()),
            column_tables: RwLock::new(HashMap::new()),
        })
    }

    pub(crate) fn shared(&self) -> &TxnShared {
        &self.shared
    }

    /// Who waits for whose row locks now (pg_locks, pg_blocking_pids).
    pub fn lock_waits(&self) -> crate::txn::LockWaits {
        self.shared.lock_waits()
    }

    /// What garbage collection reclaimed since the server started.
    pub fn gc_totals(&self) -> &crate::gc::GcTotals {
        &self.shared.gc_totals
    }

    /// The memory limit every write that adds rows is checked against.
    pub fn memory_budget(&self) -> &crate::memory_budget::MemoryBudget {
        &self.shared.memory
    }

    fn check_owner(&self, txn: &Transaction) {
        debug_assert!(
            Arc::ptr_eq(txn.shared(), &self.shared),
            "transaction of another database"
        );
    }

    pub fn begin(&self, isolation: IsolationLevel) -> Transaction {
        self.shared.begin(isolation)
    }

    /// READ COMMITTED: a fresh snapshot per call (call once per statement). REPEATABLE READ: the
    /// snapshot taken at the first call, for the whole transaction.
    pub fn statement_snapshot(&self, txn: &mut Transaction) -> Snapshot {
        self.check_owner(txn);
        self.shared.statement_snapshot(txn)
    }

    /// Commits without waiting for the redo log to be flushed: logs to the redo sink (if any),
    /// stamps the versions, releases locks, wakes waiters. Read-only transactions take no
    /// timestamp and return their snapshot's.
    pub fn commit(&self, txn: Transaction) -> Result<CommitTs, StorageError> {
        Ok(self.prepare_commit(txn)?.finish())
    }

    /// First half of a durable commit: takes the timestamp and logs the redo record, leaving
    /// the changes invisible and the rows locked. Wait for the log to be flushed to
    /// `durable_at()`, then call `finish` (or `abort` if the flush failed).
    pub fn prepare_commit(&self, mut txn: Transaction) -> Result<PreparedCommit, StorageError> {
        self.check_owner(&txn);
        let (ts, durable_at) = self.shared.prepare_commit(&mut txn)?;
        // A read-only transaction has already ended: nothing is left to finish.
        let pending = txn.has_writes().then_some(txn);
        Ok(PreparedCommit {
            shared: self.shared.clone(),
            txn: pending,
            ts,
            durable_at,
        })
    }

    pub fn rollback(&self, mut txn: Transaction) {
        self.check_owner(&txn);
        self.shared.rollback(&mut txn)
    }

    pub fn savepoint(&self, txn: &mut Transaction, name: &str) {
        self.shared.savepoint(txn, name)
    }

    /// Undoes the changes made after the newest savepoint called `name`; the savepoint stays.
    pub fn rollback_to_savepoint(
        &self,
        txn: &mut Transaction,
        name: &str,
    ) -> Result<(), StorageError> {
        self.shared.rollback_to_savepoint(txn, name)
    }

    /// Forgets the newest savepoint called `name` and those after it, keeping their changes.
    pub fn release_savepoint(&self, txn: &mut Transaction, name: &str) -> Result<(), StorageError> {
        self.shared.release_savepoint(txn, name)
    }

    /// Waits until `holder` has committed or rolled back (at once if it has). `Err(Deadlock)` if
    /// this wait would close a waits-for cycle: the caller must roll back `waiter`.
    pub async fn wait_for(&self, waiter: &Transaction, holder: TxnId) -> Result<(), StorageError> {
        self.shared.wait_for(waiter, holder).await
    }

    /// Joins the queue of transactions waiting for `row`'s lock, so that they get it in the
    /// order they came (PostgreSQL's tuple lock): a waiter not first in the queue waits for
    /// its turn (`wait_for_turn`) before it waits for the holder. The ticket keeps the place
    /// until it is dropped, which the waiter does once it has the lock or gives up.
    pub fn queue_for_row(
        &self,
        waiter: &Transaction,
        row: &crate::RowRef,
    ) -> crate::txn::RowTicket {
        self.shared.queue_for_row(waiter, row)
    }

    /// Waits until `ticket` is first in its row's queue. `Err(Deadlock)` if waiting for the
    /// transactions ahead would close a waits-for cycle.
    pub async fn wait_for_turn(&self, ticket: &crate::txn::RowTicket) -> Result<(), StorageError> {
        self.shared.wait_for_turn(ticket).await
    }

    /// `wait_for` that blocks the thread; for tests and tools on std threads, never on a tokio
    /// worker.
    pub fn wait_for_blocking(
        &self,
        waiter: &Transaction,
        holder: TxnId,
    ) -> Result<(), StorageError> {
        self.shared.wait_for_blocking(waiter, holder)
    }

    pub fn set_redo_sink(&self, sink: Arc<dyn RedoSink>) {
        *self.shared.redo_sink.write() = Some(sink);
    }

    /// Sets how much row redo a transaction may gather before it logs it ahead of its commit
    /// (see `early_redo`; tests set it low to exercise the chain).
    pub fn set_early_redo_bytes(&self, bytes: usize) {
        self.shared
            .early_redo_bytes
            .store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// Registers a new row table. The catalog never reuses ids; an existing table with this id
    /// is replaced.
    pub fn create_table(&self, id: TableId, types: Vec<DataType>) -> Arc<RowTable> {
        let table = Arc::new(RowTable::new(id, types, self.shared.clone()));
        let old = self.tables.write().insert(id, table.clone());
        debug_assert!(old.is_none(), "table id {id} reused");
        table
    }

    pub fn table(&self, id: TableId) -> Option<Arc<RowTable>> {
        self.tables.read().get(&id).cloned()
    }

    /// Registers a new column table with rows of `schema` (Arrow types chosen by the SQL layer).
    pub fn create_column_table(&self, id: TableId, schema: SchemaRef) -> Arc<ColumnTable> {
        let table = Arc::new(ColumnTable::new(id, schema, self.shared.clone()));
        let old = self.column_tables.write().insert(id, table.clone());
        debug_assert!(old.is_none(), "table id {id} reused");
        table
    }

    pub fn column_table(&self, id: TableId) -> Option<Arc<ColumnTable>> {
        self.column_tables.read().get(&id).cloned()
    }

    pub fn column_tables(&self) -> Vec<Arc<ColumnTable>> {
        self.column_tables.read().values().cloned().collect()
    }

    /// Removes the table (row or column); statements still holding it get `TableDropped` on
    /// writes. Returns whether it existed.
    pub fn drop_table(&self, id: TableId) -> bool {
        if let Some(t) = self.tables.write().remove(&id) {
            t.mark_dropped();
            return true;
        }
        match self.column_tables.write().remove(&id) {
            Some(t) => {
                t.mark_dropped();
                true
            }
            None => false,
        }
    }

    /// Puts back a row table `drop_table` removed (a ROLLBACK of the DROP), rows and indexes
    /// as they were; writes through it work again.
    pub fn restore_table(&self, table: Arc<RowTable>) {
        table.mark_restored();
        let old = self.tables.write().insert(table.id(), table);
        debug_assert!(old.is_none(), "restored table id in use");
    }

    /// Puts back a column table `drop_table` removed, as `restore_table` does a row table.
    pub fn restore_column_table(&self, table: Arc<ColumnTable>) {
        table.mark_restored();
        let old = self.column_tables.write().insert(table.id(), table);
        debug_assert!(old.is_none(), "restored table id in use");
    }

    pub fn tables(&self) -> Vec<Arc<RowTable>> {
        self.tables.read().values().cloned().collect()
    }

    /// The oldest timestamp a running transaction can still read at; versions that ended at
    /// or before it are garbage.
    pub fn oldest_active_snapshot(&self) -> CommitTs {
        self.shared.oldest_active_snapshot()
    }

    /// Where a checkpoint taken now stands in the log (see [`ReplayBounds`]). Call it while no
    /// record can be appended, then take the checkpoint's snapshot: every commit record before
    /// `covered` is visible to it.
    pub fn replay_bounds(&self, log_end: u64) -> ReplayBounds {
        self.shared.replay_bounds(log_end)
    }

    /// True while a running transaction holds back the checkpoints' replay start (a bulk load
    /// that logs its segments ahead of its commit). A checkpoint then cannot shorten the log.
    pub fn replay_start_pinned(&self) -> bool {
        self.shared.has_early_log_pins()
    }

    /// Writes the image of segment `segment_no`, which `txn` appended to `table`, to the redo
    /// log now instead of inside the commit record. Bulk loads use it: the log write overlaps
    /// the load, the commit record stays small, and a load of any size fits the log's record
    /// limit. Until `txn` ends, checkpoints replay from before the record.
    pub fn log_segment_early(
        &self,
        txn: &mut Transaction,
        table: TableId,
        segment_no: u32,
    ) -> Result<(), StorageError> {
        self.shared.log_segment_early(txn, table, segment_no)
    }

    /// The log range `txn` wrote ahead of its commit (its first such record's start, its last
    /// one's end), if any. `prepare_commit` makes sure that range is durable before it logs the
    /// commit record, blocking if it is not; a caller on an async runtime waits for it first.
    pub fn early_log_range(&self, txn: &Transaction) -> Option<(u64, u64)> {
        self.shared.early_log_range(txn)
    }

    /// Recovery: after loading rows stamped with timestamps up to `ts`, new commits continue
    /// after it. Only before any transaction runs.
    pub fn restart_clock_at(&self, ts: CommitTs) {
        self.shared.restart_clock_at(ts)
    }

    /// Newest fully committed timestamp (what a new snapshot would read at).
    pub fn stable_ts(&self) -> CommitTs {
        self.shared.clock.stable()
    }

    /// The newest timestamp handed to a commit. A snapshot at it sees every transaction that
    /// has ended, and so released its locks, where `stable_ts` may still lag behind one whose
    /// commit finished before an older commit's log flush; commits still stamping their
    /// versions stay unseen, as if not yet committed.
    pub fn newest_commit_ts(&self) -> CommitTs {
        self.shared.clock.newest_issued()
    }

    /// Whether a commit after `ts` wrote rows of `table`, or a commit that does is under way.
    pub fn table_written_since(&self, table: TableId, ts: CommitTs) -> bool {
        self.shared.table_written_since(table, ts)
    }
}

/// A commit between its two halves: logged, not yet visible. Dropping it unfinished finishes
/// it: the record is in the log, so the transaction counts as committed even if nobody waits
/// for the flush any more (a client that vanished mid-commit).
#[must_use = "finish or abort the commit"]
pub struct PreparedCommit {
    shared: Arc<TxnShared>,
    /// None once ended (or when the transaction was read-only).
    txn: Option<Transaction>,
    ts: CommitTs,
    durable_at: Option<u64>,
}

impl PreparedCommit {
    /// The commit timestamp.
    pub fn ts(&self) -> CommitTs {
        self.ts
    }

    /// The log position that must be flushed before the commit is durable; None when nothing
    /// was logged.
    pub fn durable_at(&self) -> Option<u64> {
        self.durable_at
    }

    /// Makes the changes visible and releases the locks.
    pub fn finish(mut self) -> CommitTs {
        if let Some(mut txn) = self.txn.take() {
            self.shared.finish_commit(&mut txn, self.ts);
        }
        self.ts
    }

    /// The log could not be flushed: undoes the changes.
    pub fn abort(mut self) {
        if let Some(mut txn) = self.txn.take() {
            self.shared.abort_prepared(&mut txn, self.ts);
        }
    }
}

impl Drop for PreparedCommit {
    fn drop(&mut self) {
        if let Some(mut txn) = self.txn.take() {
            self.shared.finish_commit(&mut txn, self.ts);
        }
    }
}
