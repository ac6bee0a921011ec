//! Builders shared by the unit tests: populated requests of every served
//! API, encoded by `kafka-protocol` itself.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};

pub(crate) fn s(v: &'static str) -> StrBytes {
    StrBytes::from_static_str(v)
}

pub(crate) fn topic() -> TopicName {
    TopicName(s("orders"))
}

pub(crate) fn group() -> GroupId {
    GroupId(s("billing"))
}

/// A request of `key` at `version` with every array non-empty, so nested
/// layouts are exercised.
pub(crate) fn populated(key: ApiKey, version: i16) -> (Vec<u8>, bool) {
    let mut buf = BytesMut::new();
    let id = uuid::Uuid::from_u128(0x1234);
    macro_rules! enc {
        ($r:expr) => {{
            $r.encode(&mut buf, version).expect("encode");
        }};
    }
    match key {
        ApiKey::Metadata => enc!(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default()
                .with_name(Some(topic()))
                .with_topic_id(id)
        ]))),
        ApiKey::Produce => enc!(ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5)
            .with_topic_data(vec![produce_request::TopicProduceData::default()
                .with_name(topic())
                .with_topic_id(id)
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(3)
                        .with_records(Some(Bytes::from_static(b"0123456789")))
                ])])),
        ApiKey::Fetch => {
            let mut r = FetchRequest::default()
                .with_max_wait_ms(500)
                .with_min_bytes(1)
                .with_max_bytes(1 << 20)
                .with_topics(vec![fetch_request::FetchTopic::default()
                    .with_topic(topic())
                    .with_topic_id(id)
                    .with_partitions(vec![fetch_request::FetchPartition::default()
                        .with_partition(1)
                        .with_fetch_offset(42)
                        .with_partition_max_bytes(1024)])]);
            if version >= 7 {
                r = r.with_forgotten_topics_data(vec![fetch_request::ForgottenTopic::default()
                    .with_topic(topic())
                    .with_topic_id(id)
                    .with_partitions(vec![1, 2])]);
            }
            if version >= 11 {
                r = r.with_rack_id(s("rack-a"));
            }
            enc!(r)
        }
        ApiKey::ListOffsets => enc!(ListOffsetsRequest::default().with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default()
                .with_name(topic())
                .with_partitions(vec![list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-2)])
        ])),
        ApiKey::ApiVersions => enc!(ApiVersionsRequest::default()
            .with_client_software_name(s("herald-test"))
            .with_client_software_version(s("1.0"))),
        ApiKey::InitProducerId => {
            let r = InitProducerIdRequest::default().with_transaction_timeout_ms(60_000);
            if version >= 3 {
                enc!(r.with_producer_id(ProducerId(7)).with_producer_epoch(2))
            } else {
                enc!(r)
            }
        }
        ApiKey::CreateTopics => enc!(CreateTopicsRequest::default()
            .with_validate_only(true)
            .with_topics(vec![create_topics_request::CreatableTopic::default()
                .with_name(topic())
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(vec![
                    create_topics_request::CreatableReplicaAssignment::default()
                        .with_partition_index(0)
                        .with_broker_ids(vec![BrokerId(1)])
                ])
                .with_configs(vec![
                    create_topics_request::CreatableTopicConfig::default()
                        .with_name(s("retention.ms"))
                        .with_value(Some(s("1000")))
                ])])),
        ApiKey::DeleteTopics => {
            if version >= 6 {
                enc!(DeleteTopicsRequest::default().with_topics(vec![
                    delete_topics_request::DeleteTopicState::default()
                        .with_name(Some(topic()))
                        .with_topic_id(id)
                ]))
            } else {
                enc!(DeleteTopicsRequest::default()
                    .with_topic_names(vec![topic(), TopicName(s("b"))]))
            }
        }
        ApiKey::CreatePartitions => enc!(CreatePartitionsRequest::default().with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(topic())
                .with_count(4)
                .with_assignments(Some(vec![
                    create_partitions_request::CreatePartitionsAssignment::default()
                        .with_broker_ids(vec![BrokerId(1)])
                ]))
        ])),
        ApiKey::DescribeConfigs => enc!(DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_configuration_keys(Some(vec![s("retention.ms")]))
        ])),
        ApiKey::AlterConfigs => enc!(AlterConfigsRequest::default().with_resources(vec![
            alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_configs(vec![alter_configs_request::AlterableConfig::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("1")))])
        ])),
        ApiKey::IncrementalAlterConfigs => enc!(IncrementalAlterConfigsRequest::default()
            .with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("orders"))
                    .with_configs(vec![
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(s("retention.ms"))
                            .with_config_operation(0)
                            .with_value(Some(s("1")))
                    ])
            ])),
        ApiKey::DescribeCluster => enc!(DescribeClusterRequest::default()),
        ApiKey::DescribeLogDirs => enc!(DescribeLogDirsRequest::default().with_topics(Some(vec![
            describe_log_dirs_request::DescribableLogDirTopic::default()
                .with_topic(TopicName(s("orders")))
                .with_partitions(vec![0, 2]),
        ]))),
        ApiKey::FindCoordinator => {
            let r = FindCoordinatorRequest::default();
            if version >= 4 {
                enc!(r.with_coordinator_keys(vec![s("billing"), s("audit")]))
            } else {
                enc!(r.with_key(s("billing")))
            }
        }
        ApiKey::JoinGroup => {
            let r = JoinGroupRequest::default()
                .with_group_id(group())
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(10_000)
                .with_member_id(s("member-1"))
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
                )
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(b"subscription"))])
                .with_reason(Some(s("test")));
            if version >= 5 {
                enc!(r.with_group_instance_id(Some(s("instance-1"))))
            } else {
                enc!(r)
            }
        }
        ApiKey::SyncGroup => {
            let r = SyncGroupRequest::default()
                .with_group_id(group())
                .with_generation_id(1)
                .with_member_id(s("member-1"))
                .with_protocol_type(Some(s("consumer")))
                .with_protocol_name(Some(s("range")))
                .with_assignments(vec![
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(s("member-1"))
                        .with_assignment(Bytes::from_static(b"assignment")),
                ]);
            if version >= 3 {
                enc!(r.with_group_instance_id(Some(s("instance-1"))))
            } else {
                enc!(r)
            }
        }
        ApiKey::Heartbeat => {
            let r = HeartbeatRequest::default()
                .with_group_id(group())
                .with_generation_id(1)
                .with_member_id(s("member-1"));
            if version >= 3 {
                enc!(r.with_group_instance_id(Some(s("instance-1"))))
            } else {
                enc!(r)
            }
        }
        ApiKey::LeaveGroup => {
            let r = LeaveGroupRequest::default().with_group_id(group());
            if version >= 3 {
                enc!(
                    r.with_members(vec![leave_group_request::MemberIdentity::default()
                        .with_member_id(s("member-1"))
                        .with_group_instance_id(Some(s("instance-1")))
                        .with_reason(Some(s("closing")))])
                )
            } else {
                enc!(r.with_member_id(s("member-1")))
            }
        }
        ApiKey::OffsetCommit => {
            let r = OffsetCommitRequest::default()
                .with_group_id(group())
                .with_generation_id_or_member_epoch(-1)
                .with_retention_time_ms(-1)
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(1)
                                .with_committed_offset(2)
                                .with_committed_leader_epoch(0)
                                .with_committed_metadata(Some(s("meta"))),
                        ]),
                ]);
            if version >= 7 {
                enc!(r.with_group_instance_id(Some(s("instance-1"))))
            } else {
                enc!(r)
            }
        }
        ApiKey::OffsetFetch => {
            if version >= 8 {
                enc!(OffsetFetchRequest::default()
                    .with_require_stable(true)
                    .with_groups(vec![
                        offset_fetch_request::OffsetFetchRequestGroup::default()
                            .with_group_id(group())
                            .with_member_id(Some(s("member-1")))
                            .with_member_epoch(-1)
                            .with_topics(Some(vec![
                                offset_fetch_request::OffsetFetchRequestTopics::default()
                                    .with_name(topic())
                                    .with_partition_indexes(vec![0, 1]),
                            ]))
                    ]))
            } else {
                let r = OffsetFetchRequest::default()
                    .with_group_id(group())
                    .with_topics(Some(vec![
                        offset_fetch_request::OffsetFetchRequestTopic::default()
                            .with_name(topic())
                            .with_partition_indexes(vec![0, 1]),
                    ]));
                if version >= 7 {
                    enc!(r.with_require_stable(true))
                } else {
                    enc!(r)
                }
            }
        }
        ApiKey::ListGroups => {
            let mut r = ListGroupsRequest::default();
            if version >= 4 {
                r = r.with_states_filter(vec![s("Stable"), s("Empty")]);
            }
            if version >= 5 {
                r = r.with_types_filter(vec![s("classic")]);
            }
            enc!(r)
        }
        ApiKey::DescribeGroups => {
            let r = DescribeGroupsRequest::default().with_groups(vec![group(), GroupId(s("b"))]);
            if version >= 3 {
                enc!(r.with_include_authorized_operations(true))
            } else {
                enc!(r)
            }
        }
        ApiKey::DeleteGroups => {
            enc!(DeleteGroupsRequest::default().with_groups_names(vec![group(), GroupId(s("b"))]))
        }
        ApiKey::OffsetDelete => enc!(OffsetDeleteRequest::default()
            .with_group_id(group())
            .with_topics(vec![
                offset_delete_request::OffsetDeleteRequestTopic::default()
                    .with_name(topic())
                    .with_partitions(vec![
                        offset_delete_request::OffsetDeleteRequestPartition::default()
                            .with_partition_index(1)
                    ])
            ])),
        ApiKey::DeleteRecords => enc!(DeleteRecordsRequest::default()
            .with_timeout_ms(5)
            .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
                .with_name(topic())
                .with_partitions(vec![
                    delete_records_request::DeleteRecordsPartition::default()
                        .with_partition_index(1)
                        .with_offset(7)
                ])])),
        // An API with no arrays worth populating: its default request.
        other => {
            crate::registry::encode_default(other, version, &mut buf);
            return (buf.to_vec(), false);
        }
    }
    (buf.to_vec(), true)
}

pub(crate) fn frame(key: ApiKey, version: i16, body: &[u8]) -> Bytes {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(99)
        .with_client_id(Some(s("test")))
        .encode(&mut buf, key.request_header_version(version))
        .expect("header");
    buf.extend_from_slice(body);
    buf.freeze()
}

/// A client of a PLAINTEXT listener on 127.0.0.1:9092.
pub(crate) fn plaintext_session() -> crate::session::Session {
    let listen = "127.0.0.1:9092".parse().expect("address");
    crate::session::Session::new(
        std::sync::Arc::new(crate::listener::ListenerConfig::plaintext(listen)),
        None,
        None,
    )
}
