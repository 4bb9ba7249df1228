//! What the group's membership, as a node's Raft metrics last saw it, says about its members.

use openraft::{BasicNode, RaftMetrics};

use crate::NodeId;

pub(crate) type Metrics = RaftMetrics<NodeId, BasicNode>;

/// The replication address of member `id`; `None` if it is not a member.
pub(crate) fn addr(metrics: &Metrics, id: NodeId) -> Option<String> {
    metrics
        .membership_config
        .nodes()
        .find(|(n, _)| **n == id)
        .map(|(_, node)| node.addr.clone())
}

/// The voting members (learners are not among them).
pub(crate) fn voters(metrics: &Metrics) -> impl Iterator<Item = NodeId> + '_ {
    metrics.membership_config.membership().voter_ids()
}
