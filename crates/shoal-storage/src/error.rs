//! The one error type of the storage engine. Every variant a user can see maps to a PostgreSQL
//! SQLSTATE (see [`StorageError::sqlstate`]) so the SQL layer renders it the way psql and drivers
//! expect; `WouldBlock` is internal: it tells the caller to wait for another transaction
//! (`Database::wait_for`) and retry, and never reaches a client.

use crate::txn::TxnId;
use crate::types::{DataType, Value};
use crate::IndexId;

#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum StorageError {
    /// SQLSTATE 23505; `key_columns` are column positions in the table and `key` the
    /// conflicting values, so the SQL layer can say `Key (id)=(1) already exists.`
    #[error("duplicate key value violates unique constraint \"{index_name}\"")]
    UniqueViolation {
        index_name: String,
        key_columns: Vec<usize>,
        key: Vec<Value>,
    },
    /// 40001: a REPEATABLE READ transaction tried to change a row changed after its snapshot.
    #[error("could not serialize access due to concurrent update")]
    SerializationFailure,
    /// 40P01: this transaction was chosen as the victim of a waits-for cycle.
    #[error("deadlock detected")]
    Deadlock,
    /// 55P03: NOWAIT / lock_timeout style failure to get a row lock.
    #[error("could not obtain lock on row")]
    LockNotAvailable,
    /// Internal: the row (or unique key) is held by an uncommitted transaction. Call
    /// `Database::wait_for(txn, holder)` and then retry the same call.
    #[error("row is held by transaction {holder}; wait for it and retry")]
    WouldBlock { holder: TxnId },
    /// 3B001.
    #[error("savepoint \"{0}\" does not exist")]
    NoSuchSavepoint(String),
    /// 42P01: the table was dropped while a statement still held it.
    #[error("table was dropped")]
    TableDropped,
    /// 58000-ish: the redo sink (WAL) refused the commit; the transaction was rolled back.
    #[error("could not commit transaction: {0}")]
    CommitFailed(String),
    /// 42704.
    #[error("index {0} does not exist")]
    NoSuchIndex(IndexId),
    /// 42P07.
    #[error("index {0} already exists")]
    DuplicateIndex(IndexId),
    /// 42804: the SQL layer must cast values to the column type before they reach storage.
    #[error("column {column} is of type {expected:?} but value is {value:?}")]
    TypeMismatch {
        column: usize,
        expected: DataType,
        value: Value,
    },
    /// 42601-ish: a row with the wrong number of values.
    #[error("row has {got} values but the table has {expected} columns")]
    ColumnCountMismatch { expected: usize, got: usize },
    /// XX000: a column segment's arrays do not fit its table (a bug in the caller, or a log
    /// image of another table).
    #[error("column segment does not fit its table: {0}")]
    SchemaMismatch(String),
    /// 53200: the server's memory has reached its limit (`memory_budget.rs`).
    #[error("out of memory")]
    OutOfMemory { used_bytes: u64, limit_bytes: u64 },
}

impl StorageError {
    /// The PostgreSQL SQLSTATE the SQL layer reports for this error.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            StorageError::UniqueViolation { .. } => "23505",
            StorageError::SerializationFailure => "40001",
            StorageError::Deadlock => "40P01",
            StorageError::LockNotAvailable => "55P03",
            StorageError::WouldBlock { .. } => "55P03",
            StorageError::NoSuchSavepoint(_) => "3B001",
            StorageError::TableDropped => "42P01",
            StorageError::CommitFailed(_) => "58030",
            StorageError::NoSuchIndex(_) => "42704",
            StorageError::DuplicateIndex(_) => "42P07",
            StorageError::TypeMismatch { .. } => "42804",
            StorageError::ColumnCountMismatch { .. } => "42601",
            StorageError::SchemaMismatch(_) => "XX000",
            StorageError::OutOfMemory { .. } => "53200",
        }
    }
}
