//! Shoal's in-memory storage engine: MVCC row tables with compact row encoding, memcomparable
//! ordered indexes, transactions (READ COMMITTED / REPEATABLE READ, row locks, savepoints,
//! deadlock detection), a redo hook for the WAL, and garbage collection of dead versions. It
//! knows nothing about SQL: the SQL layer hands it typed values and gets back rows, snapshots
//! and errors carrying PostgreSQL SQLSTATEs.

pub mod activity;
pub mod catalog;
pub mod catalog_comments;
pub mod catalog_extensions;
pub mod catalog_functions;
pub mod catalog_image;
pub mod catalog_privileges;
pub mod catalog_roles;
pub mod catalog_triggers;
pub mod catalog_undo;
pub mod column;
pub mod database;
pub mod early_redo;
pub mod error;
pub mod gc;
pub mod index;
mod index_build;
pub mod key_codec;
pub mod memory_budget;
mod ordered_entries;
mod point_map;
pub mod recovery;
pub mod row_chain;
pub mod row_codec;
mod row_ref;
mod row_slab;
pub mod table;
mod table_ddl;
pub mod text_dictionary;
pub mod txn;
pub mod types;

pub type TableId = u64;
pub type IndexId = u64;

pub use column::{ColumnStats, ColumnTable, Segment};
pub use database::{Database, PreparedCommit};
pub use early_redo::EarlyRedo;
pub use error::StorageError;
pub use gc::GcStats;
pub use index::{IndexDef, RowPredicate};
pub use ordered_entries::Direction;
pub use table::{
    InsertOutcome, RowChain, RowLockMode, RowRef, RowTable, TableMemory, WriteOutcome,
};
pub use txn::{
    ChangeKind, CommitTs, IsolationLevel, RedoChange, RedoSink, ReplayBounds, RowTicket, Snapshot,
    Transaction, TxnId,
};
pub use types::{DataType, Interval, Value};
