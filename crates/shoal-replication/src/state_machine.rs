//! openraft's state machine for Shoal: committed entries go, in log order, to the `Applier`
//! (the database). Membership entries are kept here, for openraft.
//!
//! Snapshots (a checkpoint sent to a node that lacks log the group has already dropped) are not
//! built yet: the group never drops log (`snapshot_policy` is `Never` and nothing is purged), so
//! a node that joins or lags is sent the log from its start.

use std::io::Cursor;
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    EntryPayload, ErrorSubject, ErrorVerb, LogId, RaftSnapshotBuilder, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};
use tokio::sync::watch;

use crate::{Applier, NodeId, TypeConfig};

type Entry = openraft::Entry<TypeConfig>;

/// What has been applied, published for `Replica` (`remote_apply`, promotion).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Raft index of the newest applied entry.
    pub index: Option<u64>,
    /// End LSN of the newest applied batch: the database holds the log up to here.
    pub end_lsn: u64,
}

pub(crate) struct StateMachine {
    applier: Arc<dyn Applier>,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, openraft::BasicNode>,
    applied: watch::Sender<Applied>,
}

impl StateMachine {
    pub(crate) fn new(applier: Arc<dyn Applier>, applied: watch::Sender<Applied>) -> StateMachine {
        StateMachine {
            applier,
            last_applied: None,
            membership: StoredMembership::default(),
            applied,
        }
    }
}

fn not_built() -> StorageError<NodeId> {
    let e = std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "Shoal's replication does not send snapshots; the group keeps its whole log",
    );
    StorageIOError::new(
        ErrorSubject::Snapshot(None),
        ErrorVerb::Read,
        openraft::AnyError::new(&e),
    )
    .into()
}

/// The snapshot builder openraft asks for; never used while `snapshot_policy` is `Never`.
pub(crate) struct NoSnapshots;

impl RaftSnapshotBuilder<TypeConfig> for NoSnapshots {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        Err(not_built())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = NoSnapshots;

    async fn applied_state(
        &mut self,
    ) -> Result<
        (
            Option<LogId<NodeId>>,
            StoredMembership<NodeId, openraft::BasicNode>,
        ),
        StorageError<NodeId>,
    > {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut end_lsn = self.applied.borrow().end_lsn;
        let mut batches = Vec::new();
        let mut count = 0;
        let mut last = self.last_applied;
        for entry in entries {
            count += 1;
            last = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(batch) => {
                    // LSNs run on from batch to batch: a gap or an overlap is a lost or
                    // doubled batch.
                    assert!(
                        batch.first_lsn == end_lsn || end_lsn == 0,
                        "batch {batch:?} applied where the log ends at LSN {end_lsn}"
                    );
                    end_lsn = batch.end_lsn;
                    batches.push((entry.log_id, batch));
                }
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), m);
                }
            }
        }
        // Applying a batch is the database's work (a bulk load's batch takes a while): on a
        // thread of its own, so Raft's tasks (heartbeats among them) keep running.
        let applier = self.applier.clone();
        let applied = tokio::task::spawn_blocking(move || {
            for (log_id, batch) in &batches {
                if let Err(message) = applier.apply(batch) {
                    tracing::error!(%log_id, "could not apply: {message}");
                    return Err((*log_id, message));
                }
            }
            Ok(())
        })
        .await
        .unwrap_or_else(|e| panic!("applying a batch panicked: {e}"));
        if let Err((log_id, message)) = applied {
            let e = std::io::Error::other(message);
            return Err(StorageIOError::new(
                ErrorSubject::Apply(log_id),
                ErrorVerb::Write,
                openraft::AnyError::new(&e),
            )
            .into());
        }
        self.last_applied = last;
        let index = self.last_applied.map(|l| l.index);
        self.applied.send_replace(Applied { index, end_lsn });
        Ok(vec![(); count])
    }

    async fn get_snapshot_builder(&mut self) -> NoSnapshots {
        NoSnapshots
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Err(not_built())
    }

    async fn install_snapshot(
        &mut self,
        _meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
        _snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        Err(not_built())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        Ok(None)
    }
}
