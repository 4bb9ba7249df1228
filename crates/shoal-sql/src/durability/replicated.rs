//! A node of a replication group (crate shoal-replication): the node's redo log is the
//! group's log. A node starts as a hot standby: each batch the group commits is applied to the
//! database as recovery replays the log (`StandbyApplier`), and sessions only read. Once the
//! node leads the group and has applied the log of every earlier leader, it is promoted: its
//! log takes appends from where the group's log ends, commits are acknowledged once a majority
//! has them on disk, and sessions write. A primary that loses its place must restart
//! (`Replication::wait_demoted`): its memory may hold commits the group never acknowledged.
//!
//! Not yet: checkpoints on a replicated node (a restarted node replays the group's whole log,
//! which the group keeps), the Redis protocol and archiving on a replicated node.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use shoal_replication::{Applier, LogBatch, Replica, ReplicaConfig};
use shoal_storage::catalog::Catalog;
use shoal_storage::Database;
use shoal_wal::{BatchSink, DataDirLock, Lsn, Record, Wal};

use super::recovery::Replay;
use super::{Durability, DurabilityOptions, WalSink};
use crate::engine::Engine;

/// Applies the group's committed batches to the database, as recovery replays a log.
pub(crate) struct StandbyApplier {
    replay: Mutex<Replay>,
    engine: OnceLock<Weak<Engine>>,
    /// Batches from here on were written by this node as the primary: already in memory.
    own_from_lsn: AtomicU64,
}

impl Applier for StandbyApplier {
    fn apply(&self, batch: &LogBatch) -> Result<(), String> {
        if batch.first_lsn >= self.own_from_lsn.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut replay = self.replay.lock();
        let mut catalog_changed = false;
        shoal_wal::decode_batch(batch.first_lsn, &batch.records, |_, record| {
            catalog_changed |= matches!(record, Record::Catalog { .. });
            replay.apply(record)
        })?;
        if catalog_changed {
            if let Some(engine) = self.engine.get().and_then(Weak::upgrade) {
                engine.catalog.install_replayed(replay.catalog().clone());
            }
        }
        Ok(())
    }
}

/// The log's batches go to the group: a batch is durable once a majority has it on disk.
struct GroupSink {
    replica: Arc<OnceLock<Arc<Replica>>>,
    runtime: tokio::runtime::Handle,
}

impl BatchSink for GroupSink {
    fn write(&mut self, first_lsn: Lsn, end_lsn: Lsn, records: &[u8]) -> Result<(), String> {
        let replica = self
            .replica
            .get()
            .ok_or_else(|| "replication has not started".to_string())?;
        let batch = LogBatch {
            first_lsn,
            end_lsn,
            records: records.to_vec(),
        };
        self.runtime
            .block_on(replica.write(batch))
            .map(|_index| ())
            .map_err(|e| e.to_string())
    }
}

/// This node's place in its group, for the server.
pub struct Replication {
    pub replica: Arc<Replica>,
}

impl Replication {
    /// Waits until this node is promoted (`engine.in_recovery()` turns false).
    pub async fn wait_promoted(&self, engine: &Engine) {
        while engine.in_recovery() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until this node, promoted, no longer leads the group.
    pub async fn wait_demoted(&self) {
        self.replica.wait_not_leading().await;
    }
}

/// Opens `data_dir` as a member of the group `config` describes: an empty database that the
/// group's log fills. Returns once the node has joined (it may not know a leader yet).
pub(crate) async fn open(
    data_dir: &Path,
    options: DurabilityOptions,
    config: ReplicaConfig,
) -> Result<(Arc<Engine>, Replication), String> {
    let dir_lock = DataDirLock::acquire(data_dir).map_err(|e| e.to_string())?;
    let db = Database::new();
    let replica_slot: Arc<OnceLock<Arc<Replica>>> = Arc::default();
    let sink = GroupSink {
        replica: replica_slot.clone(),
        runtime: tokio::runtime::Handle::current(),
    };
    let wal = Arc::new(
        Wal::open_replicated(data_dir, options.wal.clone(), Box::new(sink))
            .map_err(|e| e.to_string())?,
    );
    let durability = Durability::new(data_dir, dir_lock, wal, options, 0);
    let engine = Engine::assemble_standby(db.clone(), Catalog::default(), Arc::new(durability));
    let applier = Arc::new(StandbyApplier {
        replay: Mutex::new(Replay::new(db, Catalog::default())),
        engine: OnceLock::new(),
        own_from_lsn: AtomicU64::new(Lsn::MAX),
    });
    let _ = applier.engine.set(Arc::downgrade(&engine));
    let replica = Replica::start(config, applier.clone())
        .await
        .map_err(|e| format!("cannot join the replication group: {e}"))?;
    let replica = Arc::new(replica);
    let _ = replica_slot.set(replica.clone());
    let _ = engine.replica.set(replica.clone());
    tokio::spawn(promote_when_leading(
        Arc::downgrade(&engine),
        replica.clone(),
        applier,
    ));
    Ok((engine, Replication { replica }))
}

/// Waits until this node leads the group with every earlier leader's log applied, then opens
/// its log for appends where the group's log ends and lets sessions write.
async fn promote_when_leading(
    engine: Weak<Engine>,
    replica: Arc<Replica>,
    applier: Arc<StandbyApplier>,
) {
    let applied = loop {
        if let Some(applied) = replica.wait_leading(Duration::from_secs(60)).await {
            break applied;
        }
        if engine.strong_count() == 0 {
            return;
        }
    };
    let Some(engine) = engine.upgrade() else {
        return;
    };
    let end_lsn = applied.end_lsn;
    // From here on the group's batches are this node's own, already in memory.
    applier.own_from_lsn.store(end_lsn, Ordering::Release);
    let durability = engine.durability.as_ref().expect("a replicated node logs");
    durability.wal.start_appends_at(end_lsn);
    engine
        .db
        .set_redo_sink(Arc::new(WalSink(durability.wal.clone())));
    engine
        .db
        .set_early_redo_bytes(durability.options.early_redo_bytes);
    engine.catalog.start_logging(durability.wal.clone());
    engine.end_recovery();
    tracing::info!(
        node = replica.node_id(),
        lsn = format!("{end_lsn:X}"),
        "this node is the primary now: it accepts writes"
    );
}
