//! The database handle the SQL layer holds (as `Arc<Database>`): begins and ends transactions,
//! hands out statement snapshots, lets a session wait for the transaction that holds a row, and
//! keeps the registry of row tables by id (names live in the SQL-level catalog).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::error::StorageError;
use crate::table::RowTable;
use crate::txn::{CommitTs, IsolationLevel, RedoSink, Snapshot, Transaction, TxnId, TxnShared};
use crate::types::DataType;
use crate::TableId;

pub struct Database {
    shared: Arc<TxnShared>,
    tables: RwLock<HashMap<TableId, Arc<RowTable>>>,
}

impl Database {
    pub fn new() -> Arc<Database> {
        Arc::new(Database {
            shared: Arc::new(TxnShared::new()),
            tables: RwLock::new(HashMap::new()),
        })
    }

    pub(crate) fn shared(&self) -> &TxnShared {
        &self.shared
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

    /// Commits: logs to the redo sink (if any), stamps the versions, releases locks, wakes
    /// waiters. Read-only transactions take no timestamp and return their snapshot's.
    pub fn commit(&self, mut txn: Transaction) -> Result<CommitTs, StorageError> {
        self.check_owner(&txn);
        self.shared.commit(&mut txn)
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

    /// Removes the table; statements still holding it get `TableDropped` on writes. Returns
    /// whether it existed.
    pub fn drop_table(&self, id: TableId) -> bool {
        match self.tables.write().remove(&id) {
            Some(t) => {
                t.mark_dropped();
                true
            }
            None => false,
        }
    }

    pub fn tables(&self) -> Vec<Arc<RowTable>> {
        self.tables.read().values().cloned().collect()
    }

    /// The oldest timestamp a running transaction can still read at; versions that ended at
    /// or before it are garbage.
    pub fn oldest_active_snapshot(&self) -> CommitTs {
        self.shared.oldest_active_snapshot()
    }

    /// Newest fully committed timestamp (what a new snapshot would read at).
    pub fn stable_ts(&self) -> CommitTs {
        self.shared.clock.stable()
    }
}
