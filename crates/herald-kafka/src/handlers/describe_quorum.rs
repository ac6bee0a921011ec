//! DescribeQuorum: the cluster's metadata group, as Kafka describes its
//! KRaft quorum (`kafka-metadata-quorum.sh describe --status` and
//! `--replication`, `Admin.describeMetadataQuorum`). The leader, its epoch
//! (the Raft term), the high watermark (the commit point), the voters and
//! the observers (nodes being added). The metadata group's leader knows
//! every member's log end and when it last answered; another node answers
//! with what it knows (its own progress, -1 for the others), where Kafka's
//! brokers would forward the request to the controller.

#[cfg(feature = "cluster")]
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
#[cfg(feature = "cluster")]
use kafka_protocol::messages::BrokerId;
use kafka_protocol::messages::{DescribeQuorumRequest, DescribeQuorumResponse};
use kafka_protocol::ResponseError;

use super::{cluster_allowed, wire_str, Context};
use crate::error_code;
use crate::session::Session;
use herald_auth::Operation;

/// The topic name Kafka gives its metadata log, which its tools ask for.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// Answers a DescribeQuorum request.
pub fn handle(
    ctx: &Context,
    session: &Session,
    request: DescribeQuorumRequest,
    _version: i16,
) -> DescribeQuorumResponse {
    let refuse = |error: ResponseError, message: &str| {
        DescribeQuorumResponse::default()
            .with_error_code(error_code::code(error))
            .with_error_message(Some(wire_str(message)))
    };
    if !cluster_allowed(ctx, session, Operation::Describe) {
        return refuse(
            ResponseError::ClusterAuthorizationFailed,
            "not authorized to describe the quorum (DESCRIBE on the cluster)",
        );
    }
    let asks_for_metadata = matches!(
        request.topics.as_slice(),
        [topic] if topic.topic_name.0.as_str() == METADATA_TOPIC
            && matches!(topic.partitions.as_slice(), [p] if p.partition_index == 0)
    );
    if !asks_for_metadata {
        return refuse(
            ResponseError::InvalidRequest,
            "only partition 0 of __cluster_metadata has a quorum",
        );
    }
    #[cfg(feature = "cluster")]
    if let Some(cluster) = ctx.broker.cluster() {
        return describe(&cluster.quorum(), now_ms());
    }
    refuse(
        ResponseError::InvalidRequest,
        "this node is not part of a cluster: it has no quorum",
    )
}

#[cfg(feature = "cluster")]
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The response describing `view`, at `now_ms`.
#[cfg(feature = "cluster")]
fn describe(view: &herald_broker::cluster::QuorumView, now_ms: i64) -> DescribeQuorumResponse {
    let offset = |index: Option<u64>| index.and_then(|i| i64::try_from(i).ok()).unwrap_or(-1);
    let state = |member: &herald_broker::cluster::QuorumMember| {
        let fetched = member
            .answered_ms_ago
            .and_then(|ago| i64::try_from(ago).ok())
            .map_or(-1, |ago| now_ms - ago);
        // Caught up at its last answer if it then held the leader's log.
        let caught_up = match (member.log_end, view.leader_log_end) {
            (Some(end), Some(leader_end)) if end >= leader_end && fetched >= 0 => fetched,
            _ => -1,
        };
        ReplicaState::default()
            .with_replica_id(BrokerId(i32::try_from(member.id).unwrap_or(-1)))
            .with_log_end_offset(offset(member.log_end))
            .with_last_fetch_timestamp(fetched)
            .with_last_caught_up_timestamp(caught_up)
    };
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(
            view.leader
                .and_then(|l| i32::try_from(l).ok())
                .unwrap_or(-1),
        ))
        .with_leader_epoch(i32::try_from(view.term).unwrap_or(i32::MAX))
        .with_high_watermark(offset(view.high_watermark))
        .with_current_voters(view.voters.iter().map(state).collect())
        .with_observers(view.observers.iter().map(state).collect());
    let nodes = view
        .voters
        .iter()
        .chain(&view.observers)
        .filter_map(|member| {
            let (host, port) = member.raft.rsplit_once(':')?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            Some(
                Node::default()
                    .with_node_id(BrokerId(i32::try_from(member.id).ok()?))
                    .with_listeners(vec![Listener::default()
                        .with_name(wire_str("RAFT"))
                        .with_host(wire_str(host))
                        .with_port(port.parse().ok()?)]),
            )
        })
        .collect();
    DescribeQuorumResponse::default()
        .with_topics(vec![TopicData::default()
            .with_topic_name(kafka_protocol::messages::TopicName(wire_str(
                METADATA_TOPIC,
            )))
            .with_partitions(vec![partition])])
        .with_nodes(nodes)
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{all, Field, Schema};

    const PARTITION: &[Field] = &[all(I32)];
    const TOPIC: &[Field] = &[all(Str), all(Array(PARTITION))];
    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 0,
        fields: &[all(Array(TOPIC))],
    };
}

#[cfg(all(test, feature = "cluster"))]
mod tests {
    use super::*;
    use herald_broker::cluster::{QuorumMember, QuorumView};

    fn member(id: u64, log_end: Option<u64>, answered_ms_ago: Option<u64>) -> QuorumMember {
        QuorumMember {
            id,
            raft: format!("127.0.0.{id}:9193"),
            log_end,
            answered_ms_ago,
        }
    }

    #[test]
    fn the_leader_reports_every_member_and_who_has_caught_up() {
        let view = QuorumView {
            leader: Some(1),
            term: 3,
            high_watermark: Some(41),
            leader_log_end: Some(42),
            voters: vec![
                member(1, Some(42), Some(0)),
                member(2, Some(42), Some(100)),
                member(3, Some(30), Some(5_000)),
            ],
            observers: vec![member(4, None, None)],
        };
        let response = describe(&view, 1_000_000);
        let partition = &response.topics[0].partitions[0];
        assert_eq!(response.topics[0].topic_name.0.as_str(), METADATA_TOPIC);
        assert_eq!((partition.leader_id.0, partition.leader_epoch), (1, 3));
        assert_eq!(partition.high_watermark, 41);
        let voters: Vec<(i32, i64, i64, i64)> = partition
            .current_voters
            .iter()
            .map(|v| {
                (
                    v.replica_id.0,
                    v.log_end_offset,
                    v.last_fetch_timestamp,
                    v.last_caught_up_timestamp,
                )
            })
            .collect();
        assert_eq!(
            voters,
            vec![
                (1, 42, 1_000_000, 1_000_000),
                (2, 42, 999_900, 999_900),
                (3, 30, 995_000, -1),
            ]
        );
        let observer = &partition.observers[0];
        assert_eq!(
            (
                observer.replica_id.0,
                observer.log_end_offset,
                observer.last_fetch_timestamp
            ),
            (4, -1, -1)
        );
        assert_eq!(response.nodes.len(), 4);
        assert_eq!(response.nodes[3].listeners[0].host.as_str(), "127.0.0.4");
        assert_eq!(response.nodes[3].listeners[0].port, 9193);
    }
}
