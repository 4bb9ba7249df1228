//! Raft's messages between nodes, over TCP. A request is `[kind u8][length u32][bincode]`, its
//! answer `[length u32][bincode of Result<reply, RaftError>]` (a follower's report of what it
//! applied has none). Each peer client keeps one
//! connection and sends one request at a time on it (openraft runs one replication stream per
//! follower); a failed connection is dropped and made again at the next request. An append
//! too big to be answered within openraft's timeout goes on a connection and task of its own
//! (`BigAppend`), which openraft's retries of the same request wait for.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Raft};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufStream};
use tokio::net::{TcpListener, TcpStream};

use crate::log_store::Positions;
use crate::peer_auth::{self, PeerKey};
use crate::state_machine::Applied;
use crate::{failover, membership, NodeId, TypeConfig};

const KIND_APPEND: u8 = 1;
const KIND_VOTE: u8 = 2;
const KIND_SNAPSHOT: u8 = 3;
/// A node asks to be added to the group (`join`); answered by the leader only.
const KIND_JOIN: u8 = 4;
/// A follower tells the leader how far its database has applied the log (`report_applied`).
const KIND_APPLIED: u8 = 5;
/// A follower asks the leader to hand the group over to it (`hand_over`).
const KIND_SWITCHOVER: u8 = 6;
/// The leader asks a follower not to stand for election for a while (`hold_elections`).
const KIND_HOLD_ELECTIONS: u8 = 7;
/// A follower asks another member how much log it holds and when it last heard from a
/// leader (`failover`).
pub(crate) const KIND_PROBE: u8 = 8;
/// How long the other followers keep out of elections during a switchover.
const SWITCHOVER_HOLD_MS: u64 = 5_000;
/// A message bigger than this is refused: openraft sends at most `max_payload_entries` entries
/// per request, each a batch bounded by the log buffer.
const MESSAGE_BYTES_MAX: usize = 1 << 30;

async fn read_message(stream: &mut BufStream<TcpStream>) -> io::Result<Vec<u8>> {
    let len = stream.read_u32_le().await? as usize;
    if len > MESSAGE_BYTES_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("replication message of {len} bytes"),
        ));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    Ok(body)
}

async fn write_message(stream: &mut BufStream<TcpStream>, body: &[u8]) -> io::Result<()> {
    stream.write_u32_le(body.len() as u32).await?;
    stream.write_all(body).await?;
    stream.flush().await
}

fn decode<T: DeserializeOwned>(body: &[u8]) -> io::Result<T> {
    bincode::deserialize(body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    bincode::serialize(value).expect("Raft messages always encode")
}

/// Makes a client per peer for openraft.
pub(crate) struct PeerNetwork {
    pub(crate) from: NodeId,
    pub(crate) key: PeerKey,
}

impl RaftNetworkFactory<TypeConfig> for PeerNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient {
            from: self.from,
            target,
            addr: node.addr.clone(),
            key: self.key.clone(),
            conn: None,
            big_append: None,
        }
    }
}

/// One peer, as openraft sends to it.
pub(crate) struct PeerClient {
    from: NodeId,
    target: NodeId,
    addr: String,
    key: PeerKey,
    conn: Option<BufStream<TcpStream>>,
    big_append: Option<BigAppend>,
}

/// An append bigger than this goes as a `BigAppend`.
const BIG_APPEND_BYTES: usize = 2 << 20;

/// An append that may not reach the follower's disk within openraft's timeout (one heartbeat
/// interval): an entry holding one value of tens of megabytes, which no cutting makes smaller.
/// Sent again at each timeout, it would never arrive whole, and the followers, hearing nothing,
/// would elect another leader. So it is sent once, by a task of its own that a timeout does not
/// cancel, and openraft's retries of the same request wait for its answer.
struct BigAppend {
    request: AppendKey,
    answer: tokio::task::JoinHandle<Result<Vec<u8>, CallError>>,
}

/// What makes a retry the same request: the leader's vote, and the entries after `prev_log_id`
/// up to the last one.
type AppendKey = (
    openraft::Vote<NodeId>,
    Option<openraft::LogId<NodeId>>,
    Option<openraft::LogId<NodeId>>,
);

impl Drop for BigAppend {
    fn drop(&mut self) {
        self.answer.abort();
    }
}

/// What went wrong with a call, before it becomes openraft's error type.
enum CallError {
    Connect(io::Error),
    Io(io::Error),
    TimedOut(Duration),
}

impl PeerClient {
    async fn exchange(&mut self, kind: u8, body: &[u8]) -> Result<Vec<u8>, CallError> {
        // The connection is taken out while a request is on it and put back only once its
        // answer is read: openraft may drop this future halfway (a replication stream that
        // moves on), and a connection holding half a request would make the peer read the next
        // request's bytes as the rest of it.
        let mut conn = match self.conn.take() {
            Some(conn) => conn,
            None => peer_auth::connect(&self.addr, &self.key)
                .await
                .map_err(CallError::Connect)?,
        };
        let answer = async {
            conn.write_u8(kind).await?;
            write_message(&mut conn, body).await?;
            read_message(&mut conn).await
        }
        .await
        .map_err(CallError::Io)?;
        self.conn = Some(conn);
        Ok(answer)
    }

    async fn call<Req: Serialize, Reply: DeserializeOwned, E>(
        &mut self,
        kind: u8,
        request: &Req,
        option: &RPCOption,
    ) -> Result<Reply, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        E: std::error::Error + DeserializeOwned,
    {
        let body = encode(request);
        let ttl = option.hard_ttl();
        let outcome = match tokio::time::timeout(ttl, self.exchange(kind, &body)).await {
            Ok(r) => r,
            Err(_) => Err(CallError::TimedOut(ttl)),
        };
        if outcome.is_err() {
            // The stream may hold half a message: start over on a new connection.
            self.conn = None;
        }
        self.reply(kind, outcome)
    }

    /// Sends an append bigger than `BIG_APPEND_BYTES` as a `BigAppend`, or waits on for the
    /// one already sent if this is openraft's retry of it.
    async fn big_append<E>(
        &mut self,
        request: AppendKey,
        body: Vec<u8>,
        option: &RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        E: std::error::Error + DeserializeOwned,
    {
        if self.big_append.as_ref().map(|b| &b.request) != Some(&request) {
            // A different request replaces the one before (openraft moved on from it).
            let (addr, key) = (self.addr.clone(), self.key.clone());
            let answer = tokio::spawn(async move {
                let mut conn = peer_auth::connect(&addr, &key)
                    .await
                    .map_err(CallError::Connect)?;
                async {
                    conn.write_u8(KIND_APPEND).await?;
                    write_message(&mut conn, &body).await?;
                    read_message(&mut conn).await
                }
                .await
                .map_err(CallError::Io)
            });
            self.big_append = Some(BigAppend { request, answer });
        }
        let pending = self.big_append.as_mut().expect("just made");
        let ttl = option.hard_ttl();
        let outcome = match tokio::time::timeout(ttl, &mut pending.answer).await {
            Err(_) => return self.reply(KIND_APPEND, Err(CallError::TimedOut(ttl))),
            Ok(joined) => joined.unwrap_or_else(|e| Err(CallError::Io(io::Error::other(e)))),
        };
        self.big_append = None;
        self.reply(KIND_APPEND, outcome)
    }

    /// A call's answer (or failure) as openraft takes it.
    #[allow(clippy::result_large_err)] // openraft's error type, as its network trait returns it
    fn reply<Reply: DeserializeOwned, E>(
        &mut self,
        kind: u8,
        outcome: Result<Vec<u8>, CallError>,
    ) -> Result<Reply, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        E: std::error::Error + DeserializeOwned,
    {
        let answer = match outcome {
            Ok(answer) => answer,
            Err(e) => {
                return Err(match e {
                    CallError::Connect(e) => RPCError::Unreachable(Unreachable::new(&e)),
                    CallError::Io(e) => RPCError::Network(NetworkError::new(&e)),
                    CallError::TimedOut(timeout) => RPCError::Timeout(Timeout {
                        action: match kind {
                            KIND_APPEND => openraft::network::RPCTypes::AppendEntries,
                            KIND_VOTE => openraft::network::RPCTypes::Vote,
                            _ => openraft::network::RPCTypes::InstallSnapshot,
                        },
                        id: self.from,
                        target: self.target,
                        timeout,
                    }),
                });
            }
        };
        let reply: Result<Reply, RaftError<NodeId, E>> = decode(&answer).map_err(|e| {
            self.conn = None;
            RPCError::Network(NetworkError::new(&e))
        })?;
        reply.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let bytes: usize = rpc
            .entries
            .iter()
            .map(|e| match &e.payload {
                openraft::EntryPayload::Normal(batch) => batch.records.len(),
                _ => 0,
            })
            .sum();
        if bytes > BIG_APPEND_BYTES {
            let request = (
                rpc.vote,
                rpc.prev_log_id,
                rpc.entries.last().map(|e| e.log_id),
            );
            return self.big_append(request, encode(&rpc), &option).await;
        }
        self.call(KIND_APPEND, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call(KIND_SNAPSHOT, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call(KIND_VOTE, &rpc, &option).await
    }
}

/// What a node's replication listener answers peers with.
#[derive(Clone)]
pub(crate) struct PeerService {
    pub(crate) raft: Raft<TypeConfig>,
    /// Followers' reports of what they applied (on the leader).
    pub(crate) applied_by: AppliedBy,
    pub(crate) key: PeerKey,
    /// When a leader was last heard from (`failover`).
    pub(crate) contact: Arc<failover::Contact>,
    pub(crate) positions: Positions,
}

/// Accepts peers' connections and answers their requests until the listener fails.
pub(crate) async fn serve(listener: TcpListener, service: PeerService) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!("replication listener: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let service = service.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_peer(stream, service).await {
                if e.kind() == io::ErrorKind::PermissionDenied {
                    tracing::warn!(%peer, "refused a replication connection: {e}");
                } else if e.kind() != io::ErrorKind::UnexpectedEof {
                    tracing::debug!(%peer, "replication connection closed: {e}");
                }
            }
        });
    }
}

async fn serve_peer(stream: TcpStream, service: PeerService) -> io::Result<()> {
    let PeerService {
        raft,
        applied_by,
        key,
        contact,
        positions,
    } = service;
    let mut conn = peer_auth::accept(stream, &key).await?;
    loop {
        let kind = conn.read_u8().await?;
        let body = read_message(&mut conn).await?;
        let answer = match kind {
            KIND_APPEND => {
                contact.heard_from_leader();
                encode(&raft.append_entries(decode(&body)?).await)
            }
            KIND_VOTE => encode(&raft.vote(decode(&body)?).await),
            KIND_SNAPSHOT => {
                contact.heard_from_leader();
                encode(&raft.install_snapshot(decode(&body)?).await)
            }
            KIND_JOIN => encode(&add_member(&raft, decode(&body)?).await),
            KIND_SWITCHOVER => encode(&hand_over(&raft, decode(&body)?, &key).await),
            KIND_HOLD_ELECTIONS => {
                let hold_ms: u64 = decode(&body)?;
                hold_elections(&raft, &contact, hold_ms);
                encode(&())
            }
            // One way: a follower does not wait for an answer to its report.
            KIND_APPLIED => {
                let (node_id, lsn): (NodeId, u64) = decode(&body)?;
                applied_by.record(node_id, lsn);
                continue;
            }
            KIND_PROBE => encode(&failover::answer(&raft, &positions, &contact)),
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unknown replication message kind {other}"),
                ))
            }
        };
        write_message(&mut conn, &answer).await?;
    }
}

/// A node's request to be added to the group.
#[derive(Debug, Serialize, serde::Deserialize)]
struct JoinRequest {
    node_id: NodeId,
    addr: String,
}

/// On the leader: adds the node as a learner, waits until it has caught up (from the log, or
/// from the newest checkpoint if the log it lacks is gone), then makes it a voter.
async fn add_member(raft: &Raft<TypeConfig>, request: JoinRequest) -> Result<(), String> {
    let metrics = raft.metrics().borrow().clone();
    if metrics.state != openraft::ServerState::Leader {
        return Err(match metrics.current_leader {
            Some(id) => format!(
                "node {} does not lead the group; node {id} does",
                metrics.id
            ),
            None => format!("node {} does not lead the group", metrics.id),
        });
    }
    tracing::info!(node = request.node_id, addr = %request.addr, "a node asks to join the group");
    raft.add_learner(request.node_id, BasicNode::new(&request.addr), true)
        .await
        .map_err(|e| format!("could not add node {}: {e}", request.node_id))?;
    let mut voters: std::collections::BTreeSet<NodeId> =
        membership::voters(&raft.metrics().borrow()).collect();
    if voters.insert(request.node_id) {
        raft.change_membership(voters, false)
            .await
            .map_err(|e| format!("could not make node {} a voter: {e}", request.node_id))?;
    }
    tracing::info!(node = request.node_id, "node joined the group as a voter");
    Ok(())
}

/// One request on a connection of its own, for the rare messages (join, switchover, probes).
pub(crate) async fn call_once<Req: Serialize, Reply: DeserializeOwned>(
    addr: &str,
    key: &PeerKey,
    kind: u8,
    request: &Req,
) -> io::Result<Reply> {
    let mut conn = peer_auth::connect(addr, key).await?;
    conn.write_u8(kind).await?;
    write_message(&mut conn, &encode(request)).await?;
    decode(&read_message(&mut conn).await?)
}

async fn request_join(
    addr: &str,
    key: &PeerKey,
    request: &JoinRequest,
) -> io::Result<Result<(), String>> {
    call_once(addr, key, KIND_JOIN, request).await
}

/// On a follower: no election from this node for `hold_ms` (a switchover to another one runs).
fn hold_elections(raft: &Raft<TypeConfig>, contact: &failover::Contact, hold_ms: u64) {
    contact.hold(hold_ms);
    raft.runtime_config().elect(false);
    let raft = raft.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(hold_ms)).await;
        raft.runtime_config().elect(true);
    });
}

/// On the leader: prepares handing the group to `target`, a voter. The other followers keep
/// out of elections for a while, `target` gets the whole log, and this node stops its
/// heartbeats and elections: once the others' leases from it end, `target` is elected
/// (`ask_hand_over`), and this node, finding a newer term, steps down.
async fn hand_over(raft: &Raft<TypeConfig>, target: NodeId, key: &PeerKey) -> Result<(), String> {
    let metrics = raft.metrics().borrow().clone();
    if metrics.state != openraft::ServerState::Leader {
        return Err(format!("node {} is not the primary", metrics.id));
    }
    let voters: Vec<NodeId> = membership::voters(&metrics).collect();
    if !voters.contains(&target) {
        return Err(format!("node {target} is not a voting member of the group"));
    }
    tracing::info!(
        node = target,
        "switchover: handing the primary role to node {target}"
    );
    for id in voters
        .iter()
        .filter(|&&id| id != metrics.id && id != target)
    {
        let addr = membership::addr(&raft.metrics().borrow(), *id);
        let held: io::Result<()> = match addr {
            Some(addr) => call_once(&addr, key, KIND_HOLD_ELECTIONS, &SWITCHOVER_HOLD_MS).await,
            None => Ok(()),
        };
        if let Err(e) = held {
            // A member that is down stands for nothing either.
            tracing::info!(node = id, "switchover: could not reach node {id}: {e}");
        }
    }
    let last = metrics.last_log_index;
    let mut watch = raft.metrics();
    let caught_up = watch.wait_for(|m| {
        m.replication
            .as_ref()
            .and_then(|r| r.get(&target).copied().flatten())
            .map(|l| l.index)
            >= last
    });
    if tokio::time::timeout(Duration::from_secs(5), caught_up)
        .await
        .is_err()
    {
        return Err(format!(
            "node {target} did not catch up with the log within 5 s"
        ));
    }
    raft.runtime_config().elect(false);
    raft.runtime_config().heartbeat(false);
    Ok(())
}

/// On a follower: has the leader hand the group over to this node, then stands for election
/// until elected (the others' leases from the old leader end within the election timeout).
pub(crate) async fn ask_hand_over(
    raft: &Raft<TypeConfig>,
    node_id: NodeId,
    timeout: Duration,
    key: &PeerKey,
) -> Result<(), String> {
    let leader = raft
        .metrics()
        .borrow()
        .current_leader
        .ok_or("no primary is known to hand over")?;
    if leader == node_id {
        return Ok(());
    }
    let addr = membership::addr(&raft.metrics().borrow(), leader)
        .ok_or("the primary's address is unknown")?;
    let answer: Result<(), String> = call_once(&addr, key, KIND_SWITCHOVER, &node_id)
        .await
        .map_err(|e| format!("could not reach the primary (node {leader}): {e}"))?;
    answer?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let m = raft.metrics().borrow().clone();
        if m.state == openraft::ServerState::Leader {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("not elected within {timeout:?}"));
        }
        if m.state != openraft::ServerState::Candidate {
            raft.trigger().elect().await.map_err(|e| e.to_string())?;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// On a joining node: asks each member in turn to add this node, until the group's membership
/// has it as a voter. The leader answers once this node has caught up.
pub(crate) async fn join(
    raft: Raft<TypeConfig>,
    node_id: NodeId,
    members: std::collections::BTreeMap<NodeId, String>,
    key: PeerKey,
) {
    let request = JoinRequest {
        node_id,
        addr: members[&node_id].clone(),
    };
    loop {
        let is_voter = membership::voters(&raft.metrics().borrow()).any(|id| id == node_id);
        if is_voter {
            return;
        }
        for (id, addr) in members.iter().filter(|(&id, _)| id != node_id) {
            match request_join(addr, &key, &request).await {
                Ok(Ok(())) => break,
                Ok(Err(refused)) => tracing::debug!(node = id, "join: {refused}"),
                Err(e) => tracing::debug!(node = id, "join: {e}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What each follower reported it applied (an LSN), on the leader.
#[derive(Clone)]
pub(crate) struct AppliedBy {
    lsns: std::sync::Arc<tokio::sync::watch::Sender<std::collections::BTreeMap<NodeId, u64>>>,
}

impl AppliedBy {
    pub(crate) fn new() -> AppliedBy {
        AppliedBy {
            lsns: std::sync::Arc::new(tokio::sync::watch::channel(Default::default()).0),
        }
    }

    fn record(&self, node_id: NodeId, lsn: u64) {
        self.lsns.send_modify(|lsns| {
            lsns.insert(node_id, lsn);
        });
    }

    pub(crate) fn get(&self, node_id: NodeId) -> Option<u64> {
        self.lsns.borrow().get(&node_id).copied()
    }

    pub(crate) fn subscribe(
        &self,
    ) -> tokio::sync::watch::Receiver<std::collections::BTreeMap<NodeId, u64>> {
        self.lsns.subscribe()
    }
}

/// On every node: tells the leader (when it is another node) each new applied position, so
/// that `remote_apply` commits know when a standby shows them. A report is one way (no
/// answer); reports coalesce: while one is being sent, only the newest position is sent next.
pub(crate) async fn report_applied(
    raft: Raft<TypeConfig>,
    node_id: NodeId,
    mut applied: tokio::sync::watch::Receiver<Applied>,
    key: PeerKey,
) {
    let mut conn: Option<(NodeId, BufStream<TcpStream>)> = None;
    loop {
        if applied.changed().await.is_err() {
            return;
        }
        let lsn = applied.borrow_and_update().end_lsn;
        let (leader, addr) = {
            let metrics = raft.metrics();
            let m = metrics.borrow();
            let Some(leader) = m.current_leader.filter(|&l| l != node_id) else {
                continue;
            };
            match membership::addr(&m, leader) {
                Some(addr) => (leader, addr),
                None => continue,
            }
        };
        if conn.as_ref().is_some_and(|(to, _)| *to != leader) {
            conn = None;
        }
        let sent = async {
            if conn.is_none() {
                conn = Some((leader, peer_auth::connect(&addr, &key).await?));
            }
            let (_, stream) = conn.as_mut().expect("connected above");
            stream.write_u8(KIND_APPLIED).await?;
            write_message(stream, &encode(&(node_id, lsn))).await
        };
        if let Err(e) = tokio::time::timeout(Duration::from_secs(1), sent)
            .await
            .unwrap_or_else(|_| Err(io::Error::other("timed out")))
        {
            tracing::debug!(leader, "reporting the applied position: {e}");
            conn = None;
            // The position is sent again with the next one, or after this pause.
            tokio::time::sleep(Duration::from_millis(100)).await;
            applied.mark_changed();
        }
    }
}
