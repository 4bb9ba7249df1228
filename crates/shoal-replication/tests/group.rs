//! A group of three nodes on loopback: a leader is elected, batches written through it reach
//! every node's applier in order, a new leader takes over when the old one stops, and the old
//! one rejoins and catches up from its own log and the new leader's. A fourth node joins after
//! checkpoints dropped the log's start, from the leader's checkpoint.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use shoal_replication::{Applier, LogBatch, Replica, ReplicaConfig, Role, WriteError};

/// Keeps what it was given, as a database would apply it. Its checkpoints are the batches so
/// far, in `dir/checkpoint-N/batches`.
#[derive(Default)]
struct Recorder {
    batches: Mutex<Vec<LogBatch>>,
    dir: PathBuf,
}

fn encode_batches(batches: &[LogBatch]) -> Vec<u8> {
    let mut out = Vec::new();
    for b in batches {
        out.extend_from_slice(&b.first_lsn.to_le_bytes());
        out.extend_from_slice(&b.end_lsn.to_le_bytes());
        out.extend_from_slice(&(b.records.len() as u64).to_le_bytes());
        out.extend_from_slice(&b.records);
    }
    out
}

fn decode_batches(mut data: &[u8]) -> Vec<LogBatch> {
    let mut batches = Vec::new();
    let take = |n: usize, data: &mut &[u8]| {
        let (head, rest) = data.split_at(n);
        *data = rest;
        head.to_vec()
    };
    while !data.is_empty() {
        let first_lsn = u64::from_le_bytes(take(8, &mut data).try_into().unwrap());
        let end_lsn = u64::from_le_bytes(take(8, &mut data).try_into().unwrap());
        let len = u64::from_le_bytes(take(8, &mut data).try_into().unwrap());
        let records = take(len as usize, &mut data);
        batches.push(LogBatch {
            first_lsn,
            end_lsn,
            records,
        });
    }
    batches
}

impl Applier for Recorder {
    fn apply(&self, batch: &LogBatch) -> Result<(), String> {
        self.batches.lock().push(batch.clone());
        Ok(())
    }

    fn checkpoint(&self) -> Result<u64, String> {
        let batches = self.batches.lock().clone();
        let n = std::fs::read_dir(&self.dir).map_or(0, |d| d.count());
        let dir = self.dir.join(format!("checkpoint-{n}"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("batches"), encode_batches(&batches)).map_err(|e| e.to_string())?;
        std::fs::write(self.dir.join("CURRENT"), dir.to_str().unwrap())
            .map_err(|e| e.to_string())?;
        Ok(batches.last().map_or(0, |b| b.end_lsn))
    }

    fn current_checkpoint_dir(&self) -> Result<Option<PathBuf>, String> {
        Ok(std::fs::read_to_string(self.dir.join("CURRENT"))
            .ok()
            .map(PathBuf::from))
    }

    fn install_checkpoint(&self, dir: &Path) -> Result<(), String> {
        let data = std::fs::read(dir.join("batches")).map_err(|e| e.to_string())?;
        // A recorder loads a checkpoint in place; Shoal's database restarts to.
        *self.batches.lock() = decode_batches(&data);
        Ok(())
    }
}

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

struct Node {
    config: ReplicaConfig,
    recorder: Arc<Recorder>,
    replica: Option<Replica>,
}

impl Node {
    async fn start(&mut self) {
        self.recorder = Arc::new(Recorder {
            batches: Mutex::default(),
            dir: self.config.log_dir.with_extension("db"),
        });
        let replica = Replica::start(self.config.clone(), self.recorder.clone())
            .await
            .expect("node starts");
        self.replica = Some(replica);
    }

    fn replica(&self) -> &Replica {
        self.replica.as_ref().expect("running")
    }

    fn applied(&self) -> Vec<LogBatch> {
        self.recorder.batches.lock().clone()
    }
}

async fn group(name: &str) -> (Vec<Node>, PathBuf) {
    let root = std::env::temp_dir().join(format!("shoal-raft-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let addrs: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
    let members: BTreeMap<u64, String> = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| (i as u64 + 1, a.to_string()))
        .collect();
    let mut nodes = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        let id = i as u64 + 1;
        let config = ReplicaConfig::new(id, *addr, members.clone(), root.join(format!("node{id}")));
        let mut node = Node {
            config,
            recorder: Arc::default(),
            replica: None,
        };
        node.start().await;
        nodes.push(node);
    }
    (nodes, root)
}

/// The running node that leads with everything applied, within `timeout`.
async fn leader(nodes: &[Node], timeout: Duration) -> usize {
    let deadline = Instant::now() + timeout;
    loop {
        for (i, n) in nodes.iter().enumerate() {
            if let Some(r) = &n.replica {
                if r.role() == Role::Leader
                    && r.wait_leading(Duration::from_millis(10)).await.is_some()
                {
                    return i;
                }
            }
        }
        assert!(Instant::now() < deadline, "no leader within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn write_batches(replica: &Replica, from_lsn: u64, count: u64) -> u64 {
    let mut lsn = from_lsn;
    for n in 0..count {
        let records = format!("batch at {lsn} ({n})").into_bytes();
        let end = lsn + records.len() as u64;
        let batch = LogBatch {
            first_lsn: lsn,
            end_lsn: end,
            records,
        };
        replica.write(batch).await.expect("the leader writes");
        lsn = end;
    }
    lsn
}

async fn wait_applied(node: &Node, expected: &[LogBatch]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.applied() != expected {
        assert!(
            Instant::now() < deadline,
            "node {} applied {:?}, expected {:?}",
            node.config.node_id,
            node.applied(),
            expected
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_replicate_fail_over_and_rejoin() {
    let (mut nodes, root) = group("failover").await;
    let first = leader(&nodes, Duration::from_secs(10)).await;
    let lsn = write_batches(nodes[first].replica(), 0, 20).await;
    let written = nodes[first].applied();
    assert_eq!(written.len(), 20);
    for node in &nodes {
        wait_applied(node, &written).await;
    }

    // A follower refuses writes and names the leader.
    let follower = (first + 1) % 3;
    let refused = nodes[follower]
        .replica()
        .write(LogBatch {
            first_lsn: lsn,
            end_lsn: lsn + 1,
            records: vec![0],
        })
        .await;
    match refused {
        Err(WriteError::NotLeader { leader }) => {
            assert_eq!(leader, Some(nodes[first].config.node_id))
        }
        other => panic!("a follower wrote: {other:?}"),
    }

    // The leader stops; the other two elect one of themselves and go on from the same log.
    let stopped_at = Instant::now();
    nodes[first].replica().shutdown().await;
    nodes[first].replica = None;
    let second = leader(&nodes, Duration::from_secs(10)).await;
    eprintln!("a new leader after {:?}", stopped_at.elapsed());
    assert_ne!(second, first);
    write_batches(nodes[second].replica(), lsn, 5).await;
    let all = nodes[second].applied();
    assert_eq!(all.len(), 25);
    assert_eq!(&all[..20], &written[..]);

    // The old leader restarts from its log and catches up.
    nodes[first].start().await;
    for node in &nodes {
        wait_applied(node, &all).await;
    }
    assert_eq!(nodes[first].replica().role(), Role::Follower);

    for node in &nodes {
        node.replica().shutdown().await;
    }
    let _ = std::fs::remove_dir_all(root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_joins_from_the_checkpoint_after_the_log_start_is_dropped() {
    let (mut nodes, root) = group("join").await;
    for node in &mut nodes {
        node.config.entries_kept_after_checkpoint = 2;
        node.replica().shutdown().await;
        node.start().await;
    }
    let first = leader(&nodes, Duration::from_secs(10)).await;
    let lsn = write_batches(nodes[first].replica(), 0, 30).await;
    let written = nodes[first].applied();
    for node in &nodes {
        wait_applied(node, &written).await;
    }
    for node in &nodes {
        let taken = node.replica().checkpoint().await.expect("checkpoint");
        assert_eq!(taken.start_lsn, lsn);
        assert!(taken.entry.is_some_and(|e| e >= 30), "{taken:?}");
    }
    // The leader dropped the log's start: a new node can only get it from the checkpoint.
    let purged = nodes[first].replica().metrics().borrow().purged;
    assert!(
        purged.is_some_and(|p| p.index >= 20),
        "purged up to {purged:?}"
    );

    let addr = free_addr();
    let mut members = nodes[0].config.members.clone();
    members.insert(4, addr.to_string());
    let mut config = ReplicaConfig::new(4, addr, members, root.join("node4"));
    config.join = true;
    let mut joining = Node {
        config,
        recorder: Arc::default(),
        replica: None,
    };
    joining.start().await;
    // Writes go on while it joins.
    let lsn = write_batches(nodes[first].replica(), lsn, 5).await;
    let all = nodes[first].applied();
    assert_eq!(all.len(), 35);
    wait_applied(&joining, &all).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let voters: Vec<u64> = nodes[first]
            .replica()
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .collect();
        if voters == vec![1, 2, 3, 4] {
            break;
        }
        assert!(Instant::now() < deadline, "voters {voters:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // It is a full member: a write reaches it like the others.
    write_batches(nodes[first].replica(), lsn, 1).await;
    let all = nodes[first].applied();
    wait_applied(&joining, &all).await;

    nodes.push(joining);
    for node in &nodes {
        node.replica().shutdown().await;
    }
    let _ = std::fs::remove_dir_all(root);
}
