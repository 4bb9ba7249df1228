//! This node's membership of its replication group, as the rest of Shoal sees it.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::ClientWriteError;
use openraft::{BasicNode, ChangeMembers, Raft, RaftMetrics, ServerState, SnapshotPolicy};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::log_store::{LogStore, Positions};
use crate::peer_auth::PeerKey;
use crate::snapshot::{self, SnapshotRecord};
pub use crate::state_machine::Applied;
use crate::state_machine::{Shared, StateMachine};
use crate::{failover, membership, network, Applier, LogBatch, NodeId, TypeConfig};

/// How a node takes part in its group.
#[derive(Clone, Debug)]
pub struct ReplicaConfig {
    pub node_id: NodeId,
    /// Where this node listens for its peers.
    pub listen: SocketAddr,
    /// Every member of the group, this node included: id and replication address. A group
    /// starting for the first time is made of these.
    pub members: BTreeMap<NodeId, String>,
    /// The directory of this node's log files.
    pub log_dir: PathBuf,
    /// How often the leader tells followers it is alive.
    pub heartbeat_ms: u64,
    /// A follower that heard nothing from a leader for a random time in this range stands for
    /// election. It bounds how fast a failed leader is replaced.
    pub election_timeout_ms: (u64, u64),
    /// This node joins a group that already runs (its members are the other `members`)
    /// instead of forming one: it asks the leader to add it.
    pub join: bool,
    /// Entries kept after a checkpoint for followers that lag; one further behind is sent the
    /// checkpoint instead.
    pub entries_kept_after_checkpoint: u64,
    /// The group's shared secret: members prove they hold it before they exchange anything
    /// (`peer_auth`). Empty: no key, for a group on one machine's loopback.
    pub key: Vec<u8>,
}

impl ReplicaConfig {
    /// A group with the default timing: heartbeats every 100 ms, elections after 500-1000 ms
    /// of silence. openraft gives each AppendEntries one heartbeat interval to be answered
    /// (the follower answers once its log is synced), which a loaded machine's fsync can
    /// exceed at 50 ms.
    pub fn new(
        node_id: NodeId,
        listen: SocketAddr,
        members: BTreeMap<NodeId, String>,
        log_dir: PathBuf,
    ) -> ReplicaConfig {
        ReplicaConfig {
            node_id,
            listen,
            members,
            log_dir,
            heartbeat_ms: 100,
            election_timeout_ms: (500, 1000),
            join: false,
            entries_kept_after_checkpoint: ENTRIES_KEPT_AFTER_CHECKPOINT,
            key: Vec::new(),
        }
    }
}

/// Entries kept after a checkpoint by default: a follower that was away for up to this many
/// group commits catches up from the log.
pub const ENTRIES_KEPT_AFTER_CHECKPOINT: u64 = 10_000;

/// This node's part in the group at the moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Accepts writes and replicates them.
    Leader,
    /// Receives the log from a leader (or waits for one to be elected).
    Follower,
    /// Standing for election.
    Candidate,
    /// Stopped.
    Shutdown,
}

impl Role {
    fn of(state: ServerState) -> Role {
        match state {
            ServerState::Leader => Role::Leader,
            ServerState::Candidate => Role::Candidate,
            ServerState::Shutdown => Role::Shutdown,
            ServerState::Follower | ServerState::Learner => Role::Follower,
        }
    }
}

/// Why a batch was not written.
#[derive(Debug)]
pub enum WriteError {
    /// This node does not lead the group (any more): the batch may or may not be in the log,
    /// and nothing about it was acknowledged.
    NotLeader { leader: Option<NodeId> },
    /// Replication stopped on this node (a storage failure, or shutdown).
    Stopped(String),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::NotLeader { leader: Some(id) } => {
                write!(f, "this node is no longer the primary (node {id} is)")
            }
            WriteError::NotLeader { leader: None } => {
                write!(f, "this node is no longer the primary")
            }
            WriteError::Stopped(message) => write!(f, "replication stopped: {message}"),
        }
    }
}

/// How far a follower has the log, as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowerProgress {
    pub node_id: NodeId,
    /// Its replication address.
    pub addr: String,
    /// Where the redo log it has on disk ends; `None` before it acknowledged anything.
    pub flushed_lsn: Option<u64>,
    /// How far its database has applied the log, as it last reported; `None` before it did.
    pub applied_lsn: Option<u64>,
}

/// What a commit waits for on standbys (`Replica::wait_standbys`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StandbyProgress {
    /// The commit is on the standby's disk.
    Flushed,
    /// The standby's database shows the commit.
    Applied,
}

/// A checkpoint `Replica::checkpoint` took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointTaken {
    /// Replay from the checkpoint starts at this LSN.
    pub start_lsn: u64,
    /// The newest entry the checkpoint holds whole (the Raft snapshot's), if any: the log up
    /// to it may go once every member has it.
    pub entry: Option<u64>,
}

/// This node in its group.
pub struct Replica {
    node_id: NodeId,
    raft: Raft<TypeConfig>,
    positions: Positions,
    applied: watch::Receiver<Applied>,
    shared: Shared,
    installed: watch::Receiver<bool>,
    applied_by: network::AppliedBy,
    key: PeerKey,
    runtime: tokio::runtime::Handle,
    /// Taken out and awaited by `shutdown`.
    tasks: parking_lot::Mutex<Vec<JoinHandle<()>>>,
}

impl Replica {
    /// Opens the log, listens for peers and joins the group; a group none of whose members has
    /// a log yet is formed of `config.members`. `applier` receives every committed batch.
    pub async fn start(config: ReplicaConfig, applier: Arc<dyn Applier>) -> io::Result<Replica> {
        assert!(
            config.members.contains_key(&config.node_id),
            "a node is a member of its own group"
        );
        let log = LogStore::open(&config.log_dir)?;
        let positions = log.positions();
        let (applied_tx, applied) = watch::channel(Applied::default());
        let (installed_tx, installed) = watch::channel(false);
        let shared = Shared {
            applier,
            log_dir: config.log_dir.clone(),
            memberships: Default::default(),
            checkpoint_files: Default::default(),
            installed: installed_tx,
        };
        // The database loaded the newest checkpoint: the log is applied from its entry on.
        let record = snapshot::read_record(&config.log_dir)?;
        let state_machine = StateMachine::new(shared.clone(), record, applied_tx);
        let raft_config = openraft::Config {
            cluster_name: "shoal".into(),
            heartbeat_interval: config.heartbeat_ms,
            election_timeout_min: config.election_timeout_ms.0,
            election_timeout_max: config.election_timeout_ms.1,
            // Shoal decides when to checkpoint (`Replica::checkpoint`), by its own settings.
            snapshot_policy: SnapshotPolicy::Never,
            max_in_snapshot_log_to_keep: config.entries_kept_after_checkpoint,
            // Batches can be megabytes (a bulk load): a few at a time keeps each request
            // within its time.
            max_payload_entries: 16,
            ..Default::default()
        }
        .validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        // Bind first: a port in use is the caller's error, before any Raft state exists.
        let listener = TcpListener::bind(config.listen).await?;
        let key = PeerKey::new(&config.key);
        let network = network::PeerNetwork {
            from: config.node_id,
            key: key.clone(),
        };
        let raft = Raft::new(
            config.node_id,
            Arc::new(raft_config),
            network,
            log,
            state_machine,
        )
        .await
        .map_err(|e| io::Error::other(e.to_string()))?;
        let applied_by = network::AppliedBy::new();
        let contact = failover::Contact::new();
        let service = network::PeerService {
            raft: raft.clone(),
            applied_by: applied_by.clone(),
            key: key.clone(),
            contact: contact.clone(),
            positions: positions.clone(),
        };
        let mut tasks = vec![
            tokio::spawn(network::serve(listener, service)),
            tokio::spawn(failover::watch(
                raft.clone(),
                config.node_id,
                positions.clone(),
                contact,
                key.clone(),
                config.election_timeout_ms.1,
                config.heartbeat_ms,
            )),
            tokio::spawn(network::report_applied(
                raft.clone(),
                config.node_id,
                applied.clone(),
                key.clone(),
            )),
        ];
        let initialized = raft
            .is_initialized()
            .await
            .map_err(|e| io::Error::other(e.to_string()))?;
        if config.join {
            tasks.push(tokio::spawn(network::join(
                raft.clone(),
                config.node_id,
                config.members.clone(),
                key.clone(),
            )));
        } else if !initialized {
            let members: BTreeMap<NodeId, BasicNode> = config
                .members
                .iter()
                .map(|(&id, addr)| (id, BasicNode::new(addr)))
                .collect();
            // Every first-time member proposes the same membership; whichever wins the first
            // election holds it, and the others' proposals are the same entry.
            if let Err(e) = raft.initialize(members).await {
                tracing::info!("group already formed: {e}");
            }
        }
        Ok(Replica {
            node_id: config.node_id,
            raft,
            positions,
            applied,
            shared,
            installed,
            applied_by,
            key,
            runtime: tokio::runtime::Handle::current(),
            tasks: parking_lot::Mutex::new(tasks),
        })
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// Appends `batch` to the group's log and returns its index once a majority has it on disk
    /// and this node applied it.
    pub async fn write(&self, batch: LogBatch) -> Result<u64, WriteError> {
        self.write_all(vec![batch]).await
    }

    /// Appends `batches` to the group's log, one entry each, in this order, and returns the
    /// last one's index once a majority has them all on disk and this node applied them. They
    /// are all handed to Raft before any is waited for.
    pub async fn write_all(&self, batches: Vec<LogBatch>) -> Result<u64, WriteError> {
        let stopped = |e: &dyn std::fmt::Display| WriteError::Stopped(e.to_string());
        let mut answers = Vec::with_capacity(batches.len());
        for batch in batches {
            let answer = self.raft.client_write_ff(batch).await;
            answers.push(answer.map_err(|e| stopped(&e))?);
        }
        let mut index = 0;
        for answer in answers {
            match answer.await.map_err(|e| stopped(&e))? {
                Ok(reply) => index = reply.log_id.index,
                Err(ClientWriteError::ForwardToLeader(f)) => {
                    return Err(WriteError::NotLeader {
                        leader: f.leader_id,
                    })
                }
                Err(e) => return Err(stopped(&e)),
            }
        }
        Ok(index)
    }

    /// Raft's view of this node: role, term, leader, log positions, each follower's progress.
    pub fn metrics(&self) -> watch::Receiver<RaftMetrics<NodeId, BasicNode>> {
        self.raft.metrics()
    }

    /// The other members and how far each has the log: known on the leader only (empty
    /// elsewhere).
    pub fn followers(&self) -> Vec<FollowerProgress> {
        let metrics = self.raft.metrics().borrow().clone();
        let Some(matched) = &metrics.replication else {
            return Vec::new();
        };
        matched
            .iter()
            .filter(|(id, _)| **id != self.node_id)
            .map(|(&node_id, &log_id)| FollowerProgress {
                node_id,
                addr: membership::addr(&metrics, node_id).unwrap_or_default(),
                flushed_lsn: log_id.and_then(|l| self.positions.end_lsn_at(l.index)),
                applied_lsn: self.applied_by.get(node_id),
            })
            .collect()
    }

    /// How many other voters must have an entry for it to be committed: a majority of the
    /// group, this node being one of it.
    pub fn quorum_standbys(&self) -> usize {
        membership::voters(&self.raft.metrics().borrow()).count() / 2
    }

    /// On the leader: waits until `count` of the other voters have the log up to `lsn`
    /// flushed, or applied (`progress`); only those whose application name (`nodeN`)
    /// `counts` accepts are counted. Fails once this node no longer leads.
    pub async fn wait_standbys(
        &self,
        lsn: u64,
        count: usize,
        progress: StandbyProgress,
        counts: impl Fn(&str) -> bool,
    ) -> Result<(), WriteError> {
        let mut metrics = self.raft.metrics();
        let mut applied = self.applied_by.subscribe();
        loop {
            let reached = {
                let m = metrics.borrow_and_update();
                if m.state != ServerState::Leader {
                    return Err(WriteError::NotLeader {
                        leader: m.current_leader,
                    });
                }
                let applied_lsns = applied.borrow_and_update();
                membership::voters(&m)
                    .filter(|&id| id != self.node_id && counts(&format!("node{id}")))
                    .filter(|&id| match progress {
                        StandbyProgress::Applied => {
                            applied_lsns.get(&id).is_some_and(|&l| l >= lsn)
                        }
                        StandbyProgress::Flushed => m
                            .replication
                            .as_ref()
                            .and_then(|r| r.get(&id).copied().flatten())
                            .and_then(|l| self.positions.end_lsn_at(l.index))
                            .is_some_and(|l| l >= lsn),
                    })
                    .count()
            };
            if reached >= count {
                return Ok(());
            }
            tokio::select! {
                changed = metrics.changed() => if changed.is_err() {
                    return Err(WriteError::Stopped("replication stopped".into()));
                },
                _ = applied.changed() => {}
            }
        }
    }

    pub fn role(&self) -> Role {
        Role::of(self.raft.metrics().borrow().state)
    }

    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// The leader this node follows, with its replication address; `None` on the leader and
    /// while none is known.
    pub fn leader_addr(&self) -> Option<(NodeId, String)> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let leader = m.current_leader.filter(|&l| l != self.node_id)?;
        Some((leader, membership::addr(&m, leader)?))
    }

    /// On the leader: removes member `id` from the group, a voter or a learner (a node that
    /// is joining). Returns once the group committed the change, which takes a majority of the
    /// group both with and without it (Raft's joint consensus); fails after `timeout` (the
    /// change may still be committed later). The leader cannot remove itself: a switchover
    /// to another member comes first.
    pub async fn remove_member(&self, id: NodeId, timeout: Duration) -> Result<(), String> {
        let (raft, node_id) = (self.raft.clone(), self.node_id);
        let change = async move {
            let metrics = raft.metrics().borrow().clone();
            if metrics.state != ServerState::Leader {
                return Err("this node is not the primary".to_string());
            }
            if id == node_id {
                return Err(format!(
                    "node {id} is the primary: switch over to another member first (pg_promote() there)"
                ));
            }
            if membership::addr(&metrics, id).is_none() {
                return Err(format!("node {id} is not a member of the group"));
            }
            let voters: BTreeSet<NodeId> = membership::voters(&metrics).collect();
            let changed = match voters.contains(&id) {
                // Removed from the voters and, not retained as a learner, from the group.
                true => {
                    let rest: BTreeSet<NodeId> = voters.into_iter().filter(|&v| v != id).collect();
                    raft.change_membership(rest, false).await
                }
                false => {
                    let change = ChangeMembers::RemoveNodes(BTreeSet::from([id]));
                    raft.change_membership(change, false).await
                }
            };
            changed.map_err(|e| format!("could not remove node {id}: {e}"))?;
            tracing::info!(node = id, "node {id} is no longer a member of the group");
            Ok(())
        };
        // On the runtime Raft runs on, whichever runtime the caller (a session) is on.
        let change = self.runtime.spawn(tokio::time::timeout(timeout, change));
        match change.await.map_err(|e| format!("removing node {id}: {e}"))? {
            Ok(removed) => removed,
            Err(_) => Err(format!(
                "the group did not commit the removal of node {id} within {timeout:?}: a majority of it, with and without node {id}, must be up"
            )),
        }
    }

    /// Switchover: makes this node (a voting follower) the leader on purpose. The leader hands
    /// over once this node has the whole log, so no acknowledged commit is lost; writes pause
    /// for about the election timeout. Fails on a learner, without a leader, or when the
    /// election does not happen within `timeout`.
    pub async fn become_leader(&self, timeout: Duration) -> Result<(), String> {
        let (raft, node_id, key) = (self.raft.clone(), self.node_id, self.key.clone());
        // On the runtime Raft runs on, whichever runtime the caller (a session) is on.
        self.runtime
            .spawn(async move { network::ask_hand_over(&raft, node_id, timeout, &key).await })
            .await
            .map_err(|e| format!("switchover: {e}"))?
    }

    /// The Raft term: it grows with every election (PostgreSQL's timeline, in effect).
    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow().current_term
    }

    /// Where the redo log this node has on disk ends, as far as it is known.
    pub fn received_lsn(&self) -> Option<u64> {
        let last = self.raft.metrics().borrow().last_log_index?;
        self.positions.end_lsn_at(last)
    }

    /// What the database holds of the log.
    pub fn applied(&self) -> watch::Receiver<Applied> {
        self.applied.clone()
    }

    /// Waits until this node leads the group and has applied every entry in its log (those of
    /// earlier leaders included), so its database is the group's newest committed state.
    /// `None` if that did not happen within `timeout`.
    pub async fn wait_leading(&self, timeout: Duration) -> Option<Applied> {
        let mut metrics = self.raft.metrics();
        let ready = async {
            metrics
                .wait_for(|m| {
                    m.state == ServerState::Leader
                        && m.last_applied.map(|l| l.index) == m.last_log_index
                })
                .await
                .map(|_| ())
        };
        match tokio::time::timeout(timeout, ready).await {
            Ok(Ok(())) => Some(*self.applied.borrow()),
            _ => None,
        }
    }

    /// Waits until this node no longer leads the group (a newer term began elsewhere, or it
    /// lost touch with a majority).
    pub async fn wait_not_leading(&self) {
        let mut metrics = self.raft.metrics();
        let _ = metrics
            .wait_for(|m| m.state != ServerState::Leader)
            .await
            .map(|_| ());
    }

    /// Has the database write a checkpoint and makes it this node's Raft snapshot: the log it
    /// covers goes once every member has it (`entries_kept_after_checkpoint` entries stay), and
    /// a member that lacks dropped log is sent the checkpoint.
    pub async fn checkpoint(&self) -> Result<CheckpointTaken, String> {
        let _files = self.shared.checkpoint_files.lock().await;
        let applier = self.shared.applier.clone();
        let start_lsn = tokio::task::spawn_blocking(move || applier.checkpoint())
            .await
            .map_err(|e| format!("checkpoint: {e}"))??;
        // Only applied entries: the state machine's record must not run ahead of it.
        let applied_index = self.applied.borrow().index;
        let Some((log_id, end_lsn)) =
            applied_index.and_then(|i| self.positions.last_entry_ending_by(start_lsn, i))
        else {
            return Ok(CheckpointTaken {
                start_lsn,
                entry: None,
            });
        };
        let log_dir = self.shared.log_dir.clone();
        let previous = snapshot::read_record(&log_dir).map_err(|e| e.to_string())?;
        if let Some(previous) = previous.filter(|p| p.last_log_id >= log_id) {
            return Ok(CheckpointTaken {
                start_lsn,
                entry: Some(previous.last_log_id.index),
            });
        }
        let record = SnapshotRecord {
            last_log_id: log_id,
            membership: self.shared.membership_at(log_id),
            end_lsn,
        };
        let written = record.clone();
        tokio::task::spawn_blocking(move || snapshot::write_record(&log_dir, &written))
            .await
            .map_err(|e| format!("checkpoint: {e}"))?
            .map_err(|e| format!("could not record the checkpoint: {e}"))?;
        self.shared.forget_memberships_before(&record);
        snapshot::remove_other_packs(&self.shared.log_dir, None);
        self.raft
            .trigger()
            .snapshot()
            .await
            .map_err(|e| e.to_string())?;
        let mut metrics = self.raft.metrics();
        let taken = metrics.wait_for(|m| m.snapshot.is_some_and(|s| s >= log_id));
        if tokio::time::timeout(Duration::from_secs(30), taken)
            .await
            .is_err()
        {
            tracing::warn!(entry = %log_id, "Raft did not take the checkpoint as its snapshot in 30 s");
        }
        Ok(CheckpointTaken {
            start_lsn,
            entry: Some(log_id.index),
        })
    }

    /// Waits until a checkpoint from the leader replaced this node's database on disk: the
    /// node must restart to load it.
    pub async fn wait_checkpoint_installed(&self) {
        let mut installed = self.installed.clone();
        let _ = installed.wait_for(|&installed| installed).await;
    }

    /// Waits until Raft stopped on this node: shut down, or a storage failure it cannot go on
    /// from (the log or a checkpoint could not be written). Returns why.
    pub async fn wait_stopped(&self) -> String {
        let mut metrics = self.raft.metrics();
        let shut_down = metrics
            .wait_for(|m| m.state == ServerState::Shutdown)
            .await
            .is_ok();
        if shut_down {
            return "replication was shut down".into();
        }
        match self.raft.is_initialized().await {
            Err(e) => e.to_string(),
            Ok(_) => "replication stopped".into(),
        }
    }

    /// Leaves the group: stops Raft and the peer listener.
    pub async fn shutdown(&self) {
        let tasks = std::mem::take(&mut *self.tasks.lock());
        for task in &tasks {
            task.abort();
        }
        // Until an aborted task is dropped it holds what it owns: the listener among them, and
        // a node started again at once on the same address must find it free.
        for task in tasks {
            let _ = task.await;
        }
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!("replication shutdown: {e}");
        }
    }
}
