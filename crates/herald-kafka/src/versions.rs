//! The APIs and version ranges herald advertises in ApiVersions, and which
//! of those versions it can decode. Only implemented APIs are listed; the
//! transaction and security APIs come with later issues.

use kafka_protocol::messages::ApiKey;

/// One advertised API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRange {
    /// The API.
    pub key: ApiKey,
    /// Lowest advertised version.
    pub min: i16,
    /// Highest advertised version.
    pub max: i16,
}

const fn api(key: ApiKey, min: i16, max: i16) -> ApiRange {
    ApiRange { key, min, max }
}

/// Every API herald answers, with the versions it advertises. Minimums follow
/// Apache Kafka 4.3.1, whose ranges these match or stay inside, except where
/// `kafka-protocol` stops earlier (ListOffsets 10 instead of 11,
/// OffsetCommit and OffsetFetch 9 instead of 10).
pub const SUPPORTED: &[ApiRange] = &[
    // Produce v0-v2 (message formats 0 and 1) are advertised but refused, as
    // Kafka 4 does (KIP-896): librdkafka up to 2.11 only keeps gzip, snappy
    // and lz4 enabled when the broker lists Produce v0.
    api(ApiKey::Produce, 0, 13),
    api(ApiKey::Fetch, 4, 18),
    api(ApiKey::ListOffsets, 1, 10),
    api(ApiKey::Metadata, 0, 13),
    api(ApiKey::ApiVersions, 0, 4),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::InitProducerId, 0, 5),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::DescribeCluster, 0, 2),
    // The classic consumer-group protocol. kafka-protocol stops at
    // OffsetCommit 9 and OffsetFetch 9 (Kafka 4.3 has 10, with topic ids).
    api(ApiKey::FindCoordinator, 0, 6),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::OffsetCommit, 2, 9),
    api(ApiKey::OffsetFetch, 1, 9),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::DescribeGroups, 0, 6),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::OffsetDelete, 0, 0),
];

/// Lowest Produce version whose requests are served (record batch v2).
pub const PRODUCE_MIN_SERVED: i16 = 3;

/// The advertised range of an API key, if herald implements it.
pub fn advertised(api_key: i16) -> Option<ApiRange> {
    SUPPORTED.iter().copied().find(|r| r.key as i16 == api_key)
}

/// True if requests of this API at this version are decoded and answered.
pub fn served(range: &ApiRange, version: i16) -> bool {
    let min = if range.key == ApiKey::Produce {
        PRODUCE_MIN_SERVED
    } else {
        range.min
    };
    (min..=range.max).contains(&version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::Message;

    fn kp_range(key: ApiKey) -> (i16, i16) {
        let r = match key {
            ApiKey::Produce => ProduceRequest::VERSIONS,
            ApiKey::Fetch => FetchRequest::VERSIONS,
            ApiKey::ListOffsets => ListOffsetsRequest::VERSIONS,
            ApiKey::Metadata => MetadataRequest::VERSIONS,
            ApiKey::ApiVersions => ApiVersionsRequest::VERSIONS,
            ApiKey::CreateTopics => CreateTopicsRequest::VERSIONS,
            ApiKey::DeleteTopics => DeleteTopicsRequest::VERSIONS,
            ApiKey::InitProducerId => InitProducerIdRequest::VERSIONS,
            ApiKey::DescribeConfigs => DescribeConfigsRequest::VERSIONS,
            ApiKey::AlterConfigs => AlterConfigsRequest::VERSIONS,
            ApiKey::CreatePartitions => CreatePartitionsRequest::VERSIONS,
            ApiKey::IncrementalAlterConfigs => IncrementalAlterConfigsRequest::VERSIONS,
            ApiKey::DescribeCluster => DescribeClusterRequest::VERSIONS,
            ApiKey::FindCoordinator => FindCoordinatorRequest::VERSIONS,
            ApiKey::JoinGroup => JoinGroupRequest::VERSIONS,
            ApiKey::SyncGroup => SyncGroupRequest::VERSIONS,
            ApiKey::Heartbeat => HeartbeatRequest::VERSIONS,
            ApiKey::LeaveGroup => LeaveGroupRequest::VERSIONS,
            ApiKey::OffsetCommit => OffsetCommitRequest::VERSIONS,
            ApiKey::OffsetFetch => OffsetFetchRequest::VERSIONS,
            ApiKey::ListGroups => ListGroupsRequest::VERSIONS,
            ApiKey::DescribeGroups => DescribeGroupsRequest::VERSIONS,
            ApiKey::DeleteGroups => DeleteGroupsRequest::VERSIONS,
            ApiKey::OffsetDelete => OffsetDeleteRequest::VERSIONS,
            other => panic!("{other:?} is not supported"),
        };
        (r.min, r.max)
    }

    #[test]
    fn every_served_version_is_decodable_by_kafka_protocol() {
        for range in SUPPORTED {
            let (min, max) = kp_range(range.key);
            for v in range.min..=range.max {
                assert_eq!(
                    served(range, v),
                    (min..=max).contains(&v),
                    "{:?} v{v}",
                    range.key
                );
            }
        }
    }

    #[test]
    fn transaction_apis_are_not_advertised() {
        for key in [
            ApiKey::EndTxn,
            ApiKey::AddPartitionsToTxn,
            ApiKey::TxnOffsetCommit,
            ApiKey::ConsumerGroupHeartbeat,
        ] {
            assert!(advertised(key as i16).is_none());
        }
    }

    #[test]
    fn every_classic_group_api_is_advertised_with_kafka_minimums() {
        for (key, min) in [
            (ApiKey::FindCoordinator, 0),
            (ApiKey::JoinGroup, 0),
            (ApiKey::SyncGroup, 0),
            (ApiKey::Heartbeat, 0),
            (ApiKey::LeaveGroup, 0),
            (ApiKey::OffsetCommit, 2),
            (ApiKey::OffsetFetch, 1),
            (ApiKey::ListGroups, 0),
            (ApiKey::DescribeGroups, 0),
            (ApiKey::DeleteGroups, 0),
            (ApiKey::OffsetDelete, 0),
        ] {
            let range = advertised(key as i16).expect("advertised");
            assert_eq!(range.min, min, "{key:?}");
        }
    }
}
