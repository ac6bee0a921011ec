//! The metadata group's quorum as this node sees it: what Kafka's
//! DescribeQuorum (and `kafka-metadata-quorum.sh describe`) reports.

use herald_raft::openraft::async_runtime::WatchReceiver;

use super::Cluster;

/// One member of the metadata group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumMember {
    /// Its node id.
    pub id: u64,
    /// Where its Raft listener is.
    pub raft: String,
    /// The next log index it is known to hold (its log end), when this
    /// node leads (the leader tracks every member) or is that member.
    pub log_end: Option<u64>,
    /// Milliseconds since it last answered the leader, when this node
    /// leads.
    pub answered_ms_ago: Option<u64>,
}

/// The metadata group as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumView {
    /// The leader, if one is known.
    pub leader: Option<u64>,
    /// The current term (Kafka's leader epoch).
    pub term: u64,
    /// The next index after the last one this node knows committed (the
    /// high watermark).
    pub high_watermark: Option<u64>,
    /// The leader's log end, when this node leads.
    pub leader_log_end: Option<u64>,
    /// The voters.
    pub voters: Vec<QuorumMember>,
    /// Members that do not vote (nodes being added).
    pub observers: Vec<QuorumMember>,
}

impl Cluster {
    /// The metadata group's quorum as this node sees it: the leader knows
    /// every member's progress; another node knows only its own.
    pub fn quorum(&self) -> QuorumView {
        use herald_raft::openraft::Instant as _;
        let metrics = self.metadata.raft().metrics();
        let metrics = metrics.borrow_watched();
        let me = self.config.node_id;
        let membership = metrics.membership_config.membership();
        let next = |index: Option<u64>| index.map(|i| i + 1);
        let member = |id: u64| {
            let raft = membership
                .get_node(&id)
                .map(|n| n.addr.clone())
                .unwrap_or_default();
            let (log_end, answered_ms_ago) = if id == me {
                (next(metrics.last_log_index), Some(0))
            } else {
                let matched = metrics
                    .replication
                    .as_ref()
                    .and_then(|r| r.get(&id).cloned())
                    .flatten()
                    .map(|log_id| log_id.index);
                let answered = metrics
                    .heartbeat
                    .as_ref()
                    .and_then(|acks| acks.get(&id).copied().flatten())
                    .map(|at| at.elapsed().as_millis() as u64);
                (next(matched), answered)
            };
            QuorumMember {
                id,
                raft,
                log_end,
                answered_ms_ago,
            }
        };
        let voters: Vec<QuorumMember> = membership.voter_ids().map(member).collect();
        let observers: Vec<QuorumMember> = membership.learner_ids().map(member).collect();
        let leads = metrics.replication.is_some();
        QuorumView {
            leader: metrics.current_leader,
            term: metrics.current_term,
            high_watermark: next(metrics.local_committed.as_ref().map(|id| id.index)),
            leader_log_end: leads.then(|| next(metrics.last_log_index)).flatten(),
            voters,
            observers,
        }
    }
}
