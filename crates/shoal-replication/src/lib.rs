//! Shoal's replicated redo log. A group of nodes keeps one log by Raft, from the openraft
//! crate: leader election, terms, membership and the commit rule are openraft's. What is
//! replicated is Shoal's redo log itself: one Raft entry is one group-commit batch of redo
//! records (`LogBatch`), so a batch is still one write and one fsync on each node.
//!
//! The interface to the rest of Shoal is small:
//! - `Replica::start` opens this node's log files, listens for its peers and joins the group;
//! - `Replica::write` hands a batch to the group and returns once a majority has it on disk
//!   (the leader only; other nodes get `WriteError::NotLeader`);
//! - the `Applier` Shoal gives to `start` receives every committed batch, in log order, and
//!   applies it to the in-memory database (a follower's hot standby);
//! - `Replica::role` tells who leads, and changes as elections happen.
//!
//! The modules follow a batch's way: `node` (the group seen from Shoal), `network` (Raft's
//! messages between nodes over TCP), `log_store` (the log files), `state_machine` (committed
//! batches to the `Applier`).

mod log_store;
mod network;
mod node;
mod state_machine;

use std::io::Cursor;

use serde::{Deserialize, Serialize};

pub use node::{Replica, ReplicaConfig, Role, WriteError};

/// A node's id in its group: 1, 2, 3, ... as the `--node-id` flag gives it.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// Shoal's Raft types: entries carry redo batches; a node's address is its replication
    /// listener's `host:port`.
    pub TypeConfig:
        D = LogBatch,
        R = (),
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
);

/// One group-commit batch of redo records: the encoded records with LSNs `first_lsn..end_lsn`
/// exactly as the leader's log writer took them from its buffer. LSNs continue from batch to
/// batch (`first_lsn` is the previous batch's `end_lsn`), on every node alike.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogBatch {
    pub first_lsn: u64,
    pub end_lsn: u64,
    #[serde(with = "serde_bytes")]
    pub records: Vec<u8>,
}

impl std::fmt::Debug for LogBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LogBatch({}..{})", self.first_lsn, self.end_lsn)
    }
}

/// Where committed batches go: Shoal's database. Called on one task, in log order, each batch
/// once per process lifetime (a restarted node is given the committed log again from its start,
/// or from its newest checkpoint).
pub trait Applier: Send + Sync + 'static {
    /// Applies one committed batch. An error stops the node's replication: its database would
    /// no longer match the log.
    fn apply(&self, batch: &LogBatch) -> Result<(), String>;
}
