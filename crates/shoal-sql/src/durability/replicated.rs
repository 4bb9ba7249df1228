//! A node of a replication group (crate shoal-replication): the node's redo log is the
//! group's log. A node starts as a hot standby: each batch the group commits is applied to the
//! database as recovery replays the log (`StandbyApplier`), and sessions only read. Once the
//! node leads the group and has applied the log of every earlier leader, it is promoted: its
//! log takes appends from where the group's log ends, commits are acknowledged once a majority
//! has them on disk, and sessions write. A primary that loses its place must restart
//! (`Replication::wait_restart`): its memory may hold commits the group never acknowledged.
//!
//! Checkpoints are the group's Raft snapshots: every node writes its own (a standby of the log
//! it applied) when its settings say one is due, and the log before it goes once every member
//! has it. A node that lacks log the group dropped (a new one, or one away for long) is sent
//! the leader's checkpoint, makes it current, and restarts to load it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use shoal_replication::{Applier, LogBatch, Replica, ReplicaConfig, StandbyProgress};
use shoal_storage::{Database, IsolationLevel};
use shoal_wal::{BatchSink, DataDirLock, Lsn, Record, Wal};

use super::recovery::{self, RecoveryReport, Replay};
use super::{Durability, DurabilityOptions, WalSink};
use crate::engine::Engine;

/// Applies the group's committed batches to the database, as recovery replays a log.
pub(crate) struct StandbyApplier {
    replay: Mutex<Replay>,
    engine: OnceLock<Weak<Engine>>,
    data_dir: PathBuf,
    /// Batches from here on were written by this node as the primary: already in memory.
    own_from_lsn: AtomicU64,
    /// The loaded checkpoint's cut: records before `replay_from_lsn` are in it, and so are
    /// those before `covered_lsn` other than the ones logged ahead of a commit (as recovery
    /// skips them).
    replay_from_lsn: Lsn,
    covered_lsn: Lsn,
    /// Where the newest applied batch ends; until one is, where the checkpoint's replay starts
    /// (the group's log resumes at or before it).
    applied_end_lsn: AtomicU64,
    /// A checkpoint from the leader replaced the database on disk: the memory is stale until
    /// the node restarts, and batches are no longer applied to it.
    stale: AtomicBool,
}

impl StandbyApplier {
    fn engine(&self) -> Result<Arc<Engine>, String> {
        self.engine
            .get()
            .and_then(Weak::upgrade)
            .ok_or_else(|| "the server is stopping".to_string())
    }
}

impl Applier for StandbyApplier {
    fn apply(&self, batch: &LogBatch) -> Result<(), String> {
        if self.stale.load(Ordering::Acquire) {
            return Ok(());
        }
        if self.holds(batch) {
            self.applied_end_lsn.store(batch.end_lsn, Ordering::Release);
            return Ok(());
        }
        let mut replay = self.replay.lock();
        let mut catalog_changed = false;
        shoal_wal::decode_batch(batch.first_lsn, &batch.records, |lsn, record| {
            let ahead_of_commit = matches!(
                record,
                Record::RowChanges { .. } | Record::ColumnSegment { .. } | Record::Abandoned { .. }
            );
            if lsn < self.replay_from_lsn {
                return Ok(());
            }
            if lsn < self.covered_lsn && !ahead_of_commit {
                replay.forget_committed(&record);
                return Ok(());
            }
            catalog_changed |= matches!(record, Record::Catalog { .. });
            replay.apply(lsn, record)
        })?;
        if catalog_changed {
            if let Some(engine) = self.engine.get().and_then(Weak::upgrade) {
                engine.catalog.install_replayed(replay.catalog().clone());
            }
        }
        self.applied_end_lsn.store(batch.end_lsn, Ordering::Release);
        Ok(())
    }

    fn holds(&self, batch: &LogBatch) -> bool {
        batch.first_lsn >= self.own_from_lsn.load(Ordering::Acquire)
    }

    fn checkpoint(&self) -> Result<u64, String> {
        if self.stale.load(Ordering::Acquire) {
            return Err("this node restarts to load the primary's checkpoint".into());
        }
        let engine = self.engine()?;
        let durability = engine.durability.as_ref().expect("a replicated node logs");
        // No batch is applied, and the node is not promoted, while the cut is taken.
        let replay = self.replay.lock();
        if !engine.in_recovery() {
            drop(replay);
            return durability
                .checkpoint(&engine.db, &engine.catalog)
                .map(|r| r.start_lsn)
                .map_err(|e| e.message);
        }
        let db = &engine.db;
        let report = durability.checkpoint_standby(db, &engine.catalog, move || {
            // The database holds every commit before the applied end, and before the loaded
            // checkpoint's cover. Replay must start at the oldest record still waiting for its
            // commit, and no later than the applied end: the records after it were not read
            // yet (those logged ahead of a commit among them).
            let applied_end = self.applied_end_lsn.load(Ordering::Acquire);
            let covered = applied_end.max(self.covered_lsn);
            let start = replay
                .pending_from()
                .map_or(applied_end, |p| p.min(applied_end));
            let mut txn = db.begin(IsolationLevel::RepeatableRead);
            db.statement_snapshot(&mut txn);
            drop(replay);
            (start, covered, txn)
        });
        report.map(|r| r.start_lsn).map_err(|e| e.message)
    }

    fn current_checkpoint_dir(&self) -> Result<Option<PathBuf>, String> {
        shoal_wal::current_checkpoint_dir(&self.data_dir).map_err(|e| e.to_string())
    }

    fn install_checkpoint(&self, dir: &Path) -> Result<(), String> {
        // From here on the database in memory is not what the disk says.
        self.stale.store(true, Ordering::Release);
        let id = shoal_wal::adopt_checkpoint(&self.data_dir, dir).map_err(|e| e.to_string())?;
        tracing::info!(checkpoint = id, "received the primary's checkpoint");
        Ok(())
    }
}

/// The log's batches go to the group: a batch is durable once a majority has it on disk.
struct GroupSink {
    replica: Arc<OnceLock<Arc<Replica>>>,
    runtime: tokio::runtime::Handle,
}

/// The most redo one Raft entry carries (unless one record is bigger). openraft gives a follower
/// one heartbeat interval (100 ms) to take an append onto its disk before it sends it again, and
/// replication sends at most a megabyte of entries at a time but never less than one entry: a
/// bulk load's batch of tens of megabytes as one entry would never make it, and the followers,
/// hearing nothing whole from the primary, would elect another.
const ENTRY_BYTES_MAX: usize = 256 << 10;

/// The most unlogged row redo a transaction gathers on a group's primary before it logs it
/// ahead of its commit: its records stay within what one append sends a follower.
const GROUP_EARLY_REDO_BYTES: usize = 1 << 20;

impl BatchSink for GroupSink {
    fn write(&mut self, first_lsn: Lsn, end_lsn: Lsn, records: &[u8]) -> Result<(), String> {
        let replica = self
            .replica
            .get()
            .ok_or_else(|| "replication has not started".to_string())?;
        debug_assert_eq!(
            first_lsn + records.len() as u64,
            end_lsn,
            "an LSN is a byte"
        );
        // Whole records per entry: each entry is a batch of its own, as if the log writer
        // had taken less at a time.
        let entries = shoal_wal::split_batch(records, ENTRY_BYTES_MAX)?
            .into_iter()
            .map(|run| LogBatch {
                first_lsn: first_lsn + run.start as u64,
                end_lsn: first_lsn + run.end as u64,
                records: records[run].to_vec(),
            })
            .collect();
        self.runtime
            .block_on(replica.write_all(entries))
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

    /// Waits until replication stopped on this node (a storage failure); returns why.
    pub async fn wait_stopped(&self) -> String {
        self.replica.wait_stopped().await
    }

    /// Waits until a checkpoint from the primary replaced this node's database on disk.
    pub async fn wait_checkpoint_installed(&self) {
        self.replica.wait_checkpoint_installed().await;
    }
}

/// After a commit on a replicated primary, waits for what `synchronous_commit` and
/// `synchronous_standby_names` ask beyond the majority the log already waited for: with
/// `remote_apply`, a majority of the group showing the commit; with standbys named, that many
/// of them having it on disk (or showing it, with `remote_apply`). Waits for the log up to
/// `lsn`, the end of the commit's record or later.
pub(crate) async fn wait_for_standbys(
    engine: &Engine,
    lsn: Lsn,
    synchronous_commit: &str,
    standby_names: &str,
) -> Result<(), crate::error::SqlError> {
    let Some(replica) = engine.replica.get() else {
        return Ok(());
    };
    let apply = synchronous_commit == "remote_apply";
    let named = super::sync_standbys::parse(standby_names).ok().flatten();
    if engine.in_recovery() || (!apply && named.is_none()) {
        return Ok(());
    }
    let lost = |e: shoal_replication::WriteError| {
        crate::error::SqlError::new(
            "40003",
            format!(
                "the commit is in this node's log, but whether the group has it is unknown: {e}"
            ),
        )
    };
    let progress = match apply {
        true => StandbyProgress::Applied,
        false => StandbyProgress::Flushed,
    };
    if let Some(named) = &named {
        replica
            .wait_standbys(lsn, named.count, progress, |name| named.names_standby(name))
            .await
            .map_err(lost)?;
    }
    if apply {
        replica
            .wait_standbys(lsn, replica.quorum_standbys(), progress, |_| true)
            .await
            .map_err(lost)?;
    }
    Ok(())
}

/// Opens `data_dir` as a member of the group `config` describes: the newest checkpoint, then
/// the group's log from there. Returns once the node has joined (it may not know a leader
/// yet).
pub(crate) async fn open(
    data_dir: &Path,
    options: DurabilityOptions,
    config: ReplicaConfig,
) -> Result<(Arc<Engine>, Replication), String> {
    let dir_lock = DataDirLock::acquire(data_dir).map_err(|e| e.to_string())?;
    let db = Database::new();
    let (catalog, manifest) = {
        let (dir, db, options) = (data_dir.to_path_buf(), db.clone(), options.clone());
        tokio::task::spawn_blocking(move || {
            let mut report = RecoveryReport::default();
            let started = Instant::now();
            let loaded = recovery::load_checkpoint(&dir, &db, &options, &mut report);
            report.checkpoint_load = started.elapsed();
            tracing::info!("recovery: {report}");
            loaded
        })
        .await
        .map_err(|e| format!("loading the checkpoint: {e}"))??
    };
    let (replay_from_lsn, covered_lsn) = manifest
        .as_ref()
        .map_or((0, 0), |m| (m.start_lsn, m.covered_lsn));
    let replica_slot: Arc<OnceLock<Arc<Replica>>> = Arc::default();
    let sink = GroupSink {
        replica: replica_slot.clone(),
        runtime: tokio::runtime::Handle::current(),
    };
    let wal = Arc::new(
        Wal::open_replicated(data_dir, options.wal.clone(), Box::new(sink))
            .map_err(|e| e.to_string())?,
    );
    let durability = Durability::new(data_dir, dir_lock, wal, options, replay_from_lsn);
    // Nothing was released early on this log: its appends start at promotion, where the
    // group's log ends.
    durability.released_lsn.store(0, Ordering::Release);
    let engine = Engine::assemble_standby(db.clone(), catalog.clone(), Arc::new(durability));
    let applier = Arc::new(StandbyApplier {
        replay: Mutex::new(Replay::new(db, catalog)),
        engine: OnceLock::new(),
        data_dir: data_dir.to_path_buf(),
        own_from_lsn: AtomicU64::new(Lsn::MAX),
        replay_from_lsn,
        covered_lsn,
        applied_end_lsn: AtomicU64::new(replay_from_lsn),
        stale: AtomicBool::new(false),
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
    tokio::spawn(run_checkpointer(Arc::downgrade(&engine), replica.clone()));
    Ok((engine, Replication { replica }))
}

/// Checkpoints as a single server's checkpointer does (after `checkpoint_log_bytes` of log or
/// `checkpoint_interval_s`), through the group (`Replica::checkpoint`) so that each one is a
/// snapshot the log can be dropped up to.
async fn run_checkpointer(engine: Weak<Engine>, replica: Arc<Replica>) {
    let mut last = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(crate::engine::CHECKPOINT_POLL_MS)).await;
        let Some(engine) = engine.upgrade() else {
            return;
        };
        let durability = engine.durability.clone().expect("a replicated node logs");
        let end_lsn = replica.applied().borrow().end_lsn;
        let bytes = end_lsn.saturating_sub(durability.last_checkpoint_lsn.load(Ordering::Acquire));
        let due = bytes >= durability.options.checkpoint_log_bytes
            || (bytes > 0 && last.elapsed().as_secs() >= durability.options.checkpoint_interval_s);
        // A bulk load pins the log from its start: a checkpoint now could drop none of it.
        if !due || engine.db.replay_start_pinned() {
            continue;
        }
        drop(engine);
        match replica.checkpoint().await {
            Ok(taken) => tracing::info!(
                lsn = format!("{:X}", taken.start_lsn),
                entry = taken.entry,
                "checkpoint written"
            ),
            Err(e) => tracing::error!("checkpoint failed: {e}"),
        }
        last = Instant::now();
    }
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
    // A checkpoint cut is taken either before the switch (of the applied log) or after it
    // (of the primary's commits), never across it.
    let _no_cut = applier.replay.lock();
    // From here on the group's batches are this node's own, already in memory.
    applier.own_from_lsn.store(end_lsn, Ordering::Release);
    let durability = engine.durability.as_ref().expect("a replicated node logs");
    durability.wal.start_appends_at(end_lsn);
    engine
        .db
        .set_redo_sink(Arc::new(WalSink(durability.wal.clone())));
    // Row redo is logged ahead of the commit in records small enough to replicate as they come
    // (see ENTRY_BYTES_MAX), rather than in few of tens of megabytes.
    engine.db.set_early_redo_bytes(
        durability
            .options
            .early_redo_bytes
            .min(GROUP_EARLY_REDO_BYTES),
    );
    engine.catalog.start_logging(durability.wal.clone());
    engine.end_recovery();
    tracing::info!(
        node = replica.node_id(),
        lsn = format!("{end_lsn:X}"),
        "this node is the primary now: it accepts writes"
    );
}
