//! Failover when the leader is gone: which follower stands for election, and when.
//!
//! openraft's own timer has a follower stand once it has heard nothing from the leader for
//! the lease (`election_timeout_max`) plus a random election timeout, each follower on its
//! own. Two followers may then stand at once and split the vote, and a follower that lacks
//! the log's last entry stands in vain (the others refuse it) and delays the one that has it:
//! rounds of a second each. Here the followers agree first. Once this node has heard nothing
//! from a leader for the lease and a margin, it asks the other voters how much of the log
//! they hold and how long ago they heard from a leader (`Probe`), and stands at once only if
//! none of them heard from one within the lease (so they grant votes) and it holds the most
//! log, the lower id winning a tie. The others, asking the same, leave it to that node.
//! openraft's timer stays the fallback, for a member that cannot be asked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::{LogId, Raft, ServerState};
use serde::{Deserialize, Serialize};

use crate::log_store::Positions;
use crate::peer_auth::PeerKey;
use crate::{membership, network, NodeId, TypeConfig};

/// How long an asked member has to answer: a member that does not is left out.
const PROBE_TIMEOUT: Duration = Duration::from_millis(200);

/// When this node last heard from a leader, and whether it may stand for election now.
pub(crate) struct Contact {
    started: Instant,
    /// Milliseconds from `started` to the last append (or heartbeat, or checkpoint chunk) a
    /// leader sent.
    heard_ms: AtomicU64,
    /// Milliseconds from `started` until which this node does not stand (a switchover to
    /// another member runs).
    held_until_ms: AtomicU64,
}

impl Contact {
    pub(crate) fn new() -> Arc<Contact> {
        Arc::new(Contact {
            started: Instant::now(),
            heard_ms: AtomicU64::new(0),
            held_until_ms: AtomicU64::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// A leader's request arrived.
    pub(crate) fn heard_from_leader(&self) {
        self.heard_ms.store(self.now_ms(), Ordering::Release);
    }

    /// How long ago a leader was last heard from (since start, if never).
    fn silence_ms(&self) -> u64 {
        self.now_ms()
            .saturating_sub(self.heard_ms.load(Ordering::Acquire))
    }

    /// This node does not stand for `hold_ms`.
    pub(crate) fn hold(&self, hold_ms: u64) {
        self.held_until_ms
            .store(self.now_ms() + hold_ms, Ordering::Release);
    }

    fn held(&self) -> bool {
        self.now_ms() < self.held_until_ms.load(Ordering::Acquire)
    }
}

/// A member's answer to "how much log do you hold, and when did you last hear a leader?".
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Probe {
    last_log: Option<LogId<NodeId>>,
    /// 0 on a leader.
    silence_ms: u64,
}

/// This node's answer to another member's probe.
pub(crate) fn answer(raft: &Raft<TypeConfig>, positions: &Positions, contact: &Contact) -> Probe {
    Probe {
        last_log: positions.last_log_id(),
        silence_ms: match raft.metrics().borrow().state {
            ServerState::Leader => 0,
            _ => contact.silence_ms(),
        },
    }
}

/// When a follower stands, given the answers of the members it could ask.
struct Rule {
    lease_ms: u64,
    margin_ms: u64,
}

impl Rule {
    /// Whether `node_id`, holding `mine`, stands: the members that answered (`answers`) with
    /// it are a majority of the `voters`, none still hears a leader (each would refuse the
    /// vote while its lease lasts, counted from when it handled the leader's last request: a
    /// little after its silence passes `lease_ms`), and none holds more log, nor as much with
    /// a lower id.
    fn stands(
        &self,
        node_id: NodeId,
        mine: &Probe,
        voters: usize,
        answers: &[(NodeId, Probe)],
    ) -> bool {
        let reachable = answers.len() + 1;
        reachable * 2 > voters
            && answers.iter().all(|(id, theirs)| {
                theirs.silence_ms > self.lease_ms + self.margin_ms / 2
                    && (theirs.last_log < mine.last_log
                        || (theirs.last_log == mine.last_log && *id > node_id))
            })
    }
}

/// Watches for the leader's silence and stands for election when this node is the one to.
/// `lease_ms` is openraft's leader lease (`election_timeout_max`): until it ends a member
/// refuses votes; `margin_ms` is added before asking, for heartbeats late on a busy machine.
pub(crate) async fn watch(
    raft: Raft<TypeConfig>,
    node_id: NodeId,
    positions: Positions,
    contact: Arc<Contact>,
    key: PeerKey,
    lease_ms: u64,
    margin_ms: u64,
) {
    let tick = Duration::from_millis((margin_ms / 2).max(10));
    let mut last_stood: Option<Instant> = None;
    loop {
        tokio::time::sleep(tick).await;
        let metrics = raft.metrics().borrow().clone();
        let standing = matches!(
            metrics.state,
            ServerState::Follower | ServerState::Candidate
        );
        let is_voter = membership::voters(&metrics).any(|id| id == node_id);
        if !standing || !is_voter || contact.held() || contact.silence_ms() < lease_ms + margin_ms {
            continue;
        }
        // One try per lease: a vote under way is not started over.
        if last_stood.is_some_and(|t| t.elapsed() < Duration::from_millis(lease_ms)) {
            continue;
        }
        let mine = answer(&raft, &positions, &contact);
        let others: Vec<(NodeId, String)> = membership::voters(&metrics)
            .filter(|&id| id != node_id)
            .filter_map(|id| Some((id, membership::addr(&metrics, id)?)))
            .collect();
        let mut answers = Vec::new();
        for (id, addr) in &others {
            let asked = network::call_once::<_, Probe>(addr, &key, network::KIND_PROBE, &());
            // A member that does not answer in time is left out.
            if let Ok(Ok(theirs)) = tokio::time::timeout(PROBE_TIMEOUT, asked).await {
                answers.push((*id, theirs));
            }
        }
        let rule = Rule {
            lease_ms,
            margin_ms,
        };
        if !rule.stands(node_id, &mine, others.len() + 1, &answers) {
            continue;
        }
        tracing::info!(
            node = node_id,
            silence_ms = contact.silence_ms(),
            "no primary heard for the lease; this node holds the most log of the members that answer, and stands for election"
        );
        last_stood = Some(Instant::now());
        if let Err(e) = raft.trigger().elect().await {
            tracing::warn!("could not stand for election: {e}");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Rule = Rule {
        lease_ms: 1000,
        margin_ms: 100,
    };

    fn probe(term: u64, index: u64, silence_ms: u64) -> Probe {
        Probe {
            last_log: Some(LogId::new(openraft::CommittedLeaderId::new(term, 1), index)),
            silence_ms,
        }
    }

    #[test]
    fn the_member_with_the_most_log_stands() {
        let (two, three) = (probe(3, 10, 1200), probe(3, 9, 1200));
        assert!(RULE.stands(2, &two, 3, &[(3, three.clone())]));
        assert!(!RULE.stands(3, &three, 3, &[(2, two)]));
        // A newer term is more log, whatever the index.
        let (two, three) = (probe(3, 10, 1200), probe(4, 9, 1200));
        assert!(!RULE.stands(2, &two, 3, &[(3, three.clone())]));
        assert!(RULE.stands(3, &three, 3, &[(2, two)]));
    }

    #[test]
    fn among_equal_logs_the_lowest_id_stands() {
        let p = probe(3, 10, 1200);
        assert!(RULE.stands(2, &p, 3, &[(3, p.clone())]));
        assert!(!RULE.stands(3, &p, 3, &[(2, p.clone())]));
    }

    #[test]
    fn nobody_stands_while_a_member_hears_a_leader() {
        let mine = probe(3, 10, 1200);
        // Within the lease (and its margin) that member would refuse the vote.
        assert!(!RULE.stands(2, &mine, 3, &[(3, probe(3, 9, 1040))]));
        // A leader answers with no silence at all.
        assert!(!RULE.stands(2, &mine, 3, &[(1, probe(3, 10, 0)), (3, probe(3, 9, 1200))]));
        assert!(RULE.stands(2, &mine, 3, &[(3, probe(3, 9, 1060))]));
    }

    #[test]
    fn nobody_stands_without_a_majority_answering() {
        let mine = probe(3, 10, 1200);
        assert!(!RULE.stands(2, &mine, 3, &[]));
        assert!(!RULE.stands(2, &mine, 5, &[(3, probe(3, 9, 1200))]));
        assert!(RULE.stands(
            2,
            &mine,
            5,
            &[(3, probe(3, 9, 1200)), (4, probe(3, 9, 1200))]
        ));
    }
}
