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

mod failover;
mod log_store;
mod membership;
mod network;
mod node;
mod peer_auth;
mod snapshot;
mod state_machine;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use node::{
    CheckpointTaken, Replica, ReplicaConfig, Role, StandbyProgress, WriteError,
    ENTRIES_KEPT_AFTER_CHECKPOINT,
};

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
        // A snapshot travels as one file: a pack of a checkpoint's files (`snapshot`).
        SnapshotData = tokio::fs::File,
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

/// Where committed batches go: Shoal's database. `apply` is called on one task, in log order,
/// each batch once per process lifetime (a restarted node is given the committed log again from
/// its newest checkpoint on; batches the checkpoint holds in part come again whole, and the
/// database skips what it holds by LSN).
pub trait Applier: Send + Sync + 'static {
    /// Applies one committed batch. An error stops the node's replication: its database would
    /// no longer match the log.
    fn apply(&self, batch: &LogBatch) -> Result<(), String>;

    /// Whether `batch` is in the database already (the leader wrote it): `apply` then only
    /// notes it, and runs inline rather than on a thread of its own, off the commit's path.
    fn holds(&self, batch: &LogBatch) -> bool {
        let _ = batch;
        false
    }

    /// Writes a checkpoint of the database as it is now and makes it current; returns the LSN
    /// replay must start from to rebuild the database from it (every batch ending at or before
    /// it is held whole). Blocks.
    fn checkpoint(&self) -> Result<u64, String>;

    /// The current checkpoint's directory: every file in it is the checkpoint. `None` before
    /// the first.
    fn current_checkpoint_dir(&self) -> Result<Option<PathBuf>, String>;

    /// Makes the checkpoint received from the leader (its files in `dir`, on this node's disk)
    /// this node's current one. The database in memory is stale from then on: the node must
    /// restart to load it (`Replica::wait_checkpoint_installed`), and `apply` may ignore the
    /// batches it is given until then.
    fn install_checkpoint(&self, dir: &Path) -> Result<(), String>;
}
