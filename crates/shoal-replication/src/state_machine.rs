//! openraft's state machine for Shoal: committed entries go, in log order, to the `Applier`
//! (the database). Membership entries are kept here, for openraft.
//!
//! Snapshots are Shoal's checkpoints (`snapshot`): `Replica::checkpoint` has the database write
//! one and records the entry it covers; the builder openraft runs then only reads that record.
//! A node that lacks log the group dropped is sent the current checkpoint as one packed file,
//! installs it and restarts to load it.

use std::path::PathBuf;
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, EntryPayload, ErrorSubject, ErrorVerb, LogId, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::snapshot::{self, SnapshotRecord};
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

/// What the state machine shares with `Replica`.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) applier: Arc<dyn Applier>,
    /// This node's log directory: the snapshot record and packs live there.
    pub(crate) log_dir: PathBuf,
    /// The memberships applied since the newest snapshot's (that one included), oldest first:
    /// a snapshot names the membership as of its entry.
    pub(crate) memberships: Arc<Mutex<Vec<StoredMembership<NodeId, BasicNode>>>>,
    /// Held while the current checkpoint changes or is packed, so a pack never mixes two.
    pub(crate) checkpoint_files: Arc<tokio::sync::Mutex<()>>,
    /// Set once a checkpoint from the leader is installed: the database must be reloaded.
    pub(crate) installed: watch::Sender<bool>,
}

impl Shared {
    /// The membership as of entry `log_id`.
    pub(crate) fn membership_at(
        &self,
        log_id: LogId<NodeId>,
    ) -> StoredMembership<NodeId, BasicNode> {
        self.memberships
            .lock()
            .iter()
            .rev()
            .find(|m| m.log_id().is_none_or(|l| l <= log_id))
            .cloned()
            .unwrap_or_default()
    }

    /// Forgets memberships older than the one `record` names.
    pub(crate) fn forget_memberships_before(&self, record: &SnapshotRecord) {
        let kept_from = *record.membership.log_id();
        self.memberships
            .lock()
            .retain(|m| kept_from.is_none() || *m.log_id() >= kept_from);
    }
}

pub(crate) struct StateMachine {
    shared: Shared,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    applied: watch::Sender<Applied>,
    /// openraft asks for the current snapshot once at start-up, for its meta only.
    startup_snapshot_served: bool,
}

impl StateMachine {
    /// The state machine as of the newest checkpoint (`record`), which the database loaded.
    pub(crate) fn new(
        shared: Shared,
        record: Option<SnapshotRecord>,
        applied: watch::Sender<Applied>,
    ) -> StateMachine {
        let (last_applied, membership) = match &record {
            Some(r) => (Some(r.last_log_id), r.membership.clone()),
            None => (None, StoredMembership::default()),
        };
        shared.memberships.lock().push(membership.clone());
        applied.send_replace(Applied {
            index: last_applied.map(|l| l.index),
            end_lsn: record.as_ref().map_or(0, |r| r.end_lsn),
        });
        StateMachine {
            shared,
            last_applied,
            membership,
            applied,
            startup_snapshot_served: false,
        }
    }
}

fn snapshot_error(verb: ErrorVerb, e: std::io::Error) -> StorageError<NodeId> {
    StorageIOError::new(
        ErrorSubject::Snapshot(None),
        verb,
        openraft::AnyError::new(&e),
    )
    .into()
}

/// Opens `path` as openraft's snapshot data.
async fn open_data(path: &std::path::Path) -> Result<Box<tokio::fs::File>, StorageError<NodeId>> {
    tokio::fs::File::open(path)
        .await
        .map(Box::new)
        .map_err(|e| snapshot_error(ErrorVerb::Read, e))
}

/// The builder openraft runs after `Replica::checkpoint` asked it to: the checkpoint is written
/// and recorded already, so building is reading the record.
pub(crate) struct RecordedCheckpoint {
    log_dir: PathBuf,
}

impl RaftSnapshotBuilder<TypeConfig> for RecordedCheckpoint {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let record = snapshot::read_record(&self.log_dir)
            .map_err(|e| snapshot_error(ErrorVerb::Read, e))?
            .ok_or_else(|| {
                snapshot_error(
                    ErrorVerb::Read,
                    std::io::Error::other("no checkpoint was recorded"),
                )
            })?;
        // openraft keeps only the meta of a snapshot it built; the data is read again
        // (`get_current_snapshot`) when a node needs it.
        let data = open_data(&self.log_dir.join(snapshot::RECORD_FILE_NAME)).await?;
        Ok(Snapshot {
            meta: record.meta(),
            snapshot: data,
        })
    }
}

impl StateMachine {
    /// Packs the current checkpoint (once per checkpoint) and opens the pack.
    async fn packed_current(
        &self,
        record: SnapshotRecord,
    ) -> Result<Box<tokio::fs::File>, StorageError<NodeId>> {
        let path = snapshot::pack_path(&self.shared.log_dir, &record);
        if !path.exists() {
            let shared = self.shared.clone();
            let to = path.clone();
            tokio::task::spawn_blocking(move || -> std::io::Result<()> {
                let dir = shared
                    .applier
                    .current_checkpoint_dir()
                    .map_err(std::io::Error::other)?
                    .ok_or_else(|| std::io::Error::other("no current checkpoint"))?;
                snapshot::pack(&record, &dir, &to)?;
                snapshot::remove_other_packs(&shared.log_dir, Some(&to));
                Ok(())
            })
            .await
            .unwrap_or_else(|e| panic!("packing a checkpoint panicked: {e}"))
            .map_err(|e| snapshot_error(ErrorVerb::Read, e))?;
        }
        open_data(&path).await
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = RecordedCheckpoint;

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
                    self.shared.memberships.lock().push(self.membership.clone());
                }
            }
        }
        let applier = self.shared.applier.clone();
        let held = batches.iter().all(|(_, b)| applier.holds(b));
        let apply_all = move || {
            for (log_id, batch) in &batches {
                if let Err(message) = applier.apply(batch) {
                    tracing::error!(%log_id, "could not apply: {message}");
                    return Err((*log_id, message));
                }
            }
            Ok(())
        };
        // Applying a batch is the database's work (a bulk load's batch takes a while): on a
        // thread of its own, so Raft's tasks (heartbeats among them) keep running. The
        // leader's own batches are in its database already: noted here, at once.
        let applied = match held {
            true => apply_all(),
            false => tokio::task::spawn_blocking(apply_all)
                .await
                .unwrap_or_else(|e| panic!("applying a batch panicked: {e}")),
        };
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

    async fn get_snapshot_builder(&mut self) -> RecordedCheckpoint {
        RecordedCheckpoint {
            log_dir: self.shared.log_dir.clone(),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<tokio::fs::File>, StorageError<NodeId>> {
        tokio::fs::File::create(self.shared.log_dir.join(INCOMING_PACK))
            .await
            .map(Box::new)
            .map_err(|e| snapshot_error(ErrorVerb::Write, e))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError<NodeId>> {
        snapshot
            .sync_all()
            .await
            .map_err(|e| snapshot_error(ErrorVerb::Write, e))?;
        drop(snapshot);
        let shared = self.shared.clone();
        let expected = meta.last_log_id;
        let record = tokio::task::spawn_blocking(move || -> std::io::Result<SnapshotRecord> {
            let _files = shared.checkpoint_files.blocking_lock();
            let pack = shared.log_dir.join(INCOMING_PACK);
            let dir = shared.log_dir.join(INCOMING_DIR);
            let record = snapshot::unpack(&pack, &dir)?;
            if Some(record.last_log_id) != expected {
                return Err(std::io::Error::other(format!(
                    "the snapshot's record names entry {} where openraft sent {expected:?}",
                    record.last_log_id
                )));
            }
            shared
                .applier
                .install_checkpoint(&dir)
                .map_err(std::io::Error::other)?;
            // After the checkpoint is current, never before (see `snapshot`).
            snapshot::write_record(&shared.log_dir, &record)?;
            let _ = std::fs::remove_file(&pack);
            Ok(record)
        })
        .await
        .unwrap_or_else(|e| panic!("installing a checkpoint panicked: {e}"))
        .map_err(|e| snapshot_error(ErrorVerb::Write, e))?;
        tracing::info!(
            entry = %record.last_log_id,
            lsn = format!("{:X}", record.end_lsn),
            "installed the primary's checkpoint"
        );
        self.last_applied = Some(record.last_log_id);
        self.membership = record.membership.clone();
        *self.shared.memberships.lock() = vec![record.membership.clone()];
        self.applied.send_replace(Applied {
            index: Some(record.last_log_id.index),
            end_lsn: record.end_lsn,
        });
        self.shared.installed.send_replace(true);
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let _files = self.shared.checkpoint_files.clone().lock_owned().await;
        let Some(record) = snapshot::read_record(&self.shared.log_dir)
            .map_err(|e| snapshot_error(ErrorVerb::Read, e))?
        else {
            self.startup_snapshot_served = true;
            return Ok(None);
        };
        let data = if self.startup_snapshot_served {
            self.packed_current(record.clone()).await?
        } else {
            // At start-up openraft reads the meta only: packing the checkpoint would only
            // slow the start.
            self.startup_snapshot_served = true;
            open_data(&self.shared.log_dir.join(snapshot::RECORD_FILE_NAME)).await?
        };
        Ok(Some(Snapshot {
            meta: record.meta(),
            snapshot: data,
        }))
    }
}

/// Where a checkpoint from the leader is received, and unpacked.
const INCOMING_PACK: &str = "snapshot-incoming";
const INCOMING_DIR: &str = "snapshot-incoming.d";
