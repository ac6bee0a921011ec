//! Every handler at every served version: the response encodes (a field set
//! that the negotiated version cannot carry would make the encoder fail and
//! the connection close).

use std::net::SocketAddr;
use std::sync::Arc;

use herald_broker::{Acks, Broker, BrokerConfig};
use herald_records::testing;

use super::{handle_frame, Context, Outcome};
use crate::config::KafkaConfig;
use crate::registry::APIS;
use crate::test_support::{frame, plaintext_session, populated};

fn context(dir: &std::path::Path) -> Context {
    let broker = Broker::open(BrokerConfig::new(dir)).expect("broker");
    broker
        .create_topic("orders", Some(2), &[], false)
        .expect("topic");
    let partition = broker
        .topic("orders")
        .and_then(|t| t.partition(1))
        .expect("partition");
    // No runtime here: the append completes at once (no fsync to wait for).
    let batch = testing::batch(3, b"stored", 1_000);
    futures_util::FutureExt::now_or_never(partition.append(&batch, Acks::All))
        .expect("an append that needs no fsync completes at once")
        .expect("append");
    let listen: SocketAddr = "127.0.0.1:9092".parse().expect("addr");
    Context::new(broker, KafkaConfig::new(listen))
}

#[tokio::test]
async fn every_handler_answers_every_served_version() {
    for range in APIS {
        for version in (range.min..=range.max).filter(|v| range.serves(*v)) {
            let dir = tempfile::tempdir().expect("tempdir");
            let ctx = context(dir.path());
            let (body, _) = populated(range.key, version);
            match handle_frame(&ctx, &plaintext_session(), frame(range.key, version, &body)).await {
                Outcome::Respond(response) => {
                    assert!(response.len() > 8, "{:?} v{version}", range.key)
                }
                other => panic!("{:?} v{version}: {other:?}", range.key),
            }
            Arc::clone(&ctx.broker).close().expect("close");
        }
    }
}

#[tokio::test]
async fn fetch_at_every_version_carries_the_stored_batch() {
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Decodable, Encodable};
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = context(dir.path());
    let id = ctx.broker.topic("orders").expect("topic").id();
    for version in 4..=18 {
        let request = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(crate::test_support::topic())
                .with_topic_id(id)
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(1)
                    .with_fetch_offset(1)
                    .with_partition_max_bytes(1 << 20)])]);
        let mut body = bytes::BytesMut::new();
        request.encode(&mut body, version).expect("encode");
        let Outcome::Respond(response) = handle_frame(
            &ctx,
            &plaintext_session(),
            frame(ApiKey::Fetch, version, &body),
        )
        .await
        else {
            panic!("fetch v{version} not answered");
        };
        let mut bytes = bytes::Bytes::from(response.to_vec()).slice(4..);
        ResponseHeader::decode(&mut bytes, ApiKey::Fetch.response_header_version(version))
            .expect("header");
        let decoded = FetchResponse::decode(&mut bytes, version).expect("decode");
        let p = &decoded.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "v{version}");
        assert_eq!(p.high_watermark, 3);
        let records = p.records.clone().expect("records");
        assert_eq!(
            records.len(),
            testing::batch(3, b"stored", 1_000).len(),
            "v{version}: the whole batch"
        );
    }
}

/// A context whose groups start their first rebalance at once.
fn group_context(dir: &std::path::Path) -> Context {
    let mut config = BrokerConfig::new(dir);
    config.groups.initial_rebalance_delay_ms = 0;
    let broker = Broker::open(config).expect("broker");
    broker
        .create_topic("orders", Some(2), &[], false)
        .expect("topic");
    let listen: SocketAddr = "127.0.0.1:9092".parse().expect("addr");
    Context::new(broker, KafkaConfig::new(listen))
}

/// Sends `request` through the dispatcher and decodes the answer, as a
/// client of the plaintext listener.
async fn exchange<Req, Resp>(
    ctx: &Context,
    key: kafka_protocol::messages::ApiKey,
    version: i16,
    request: Req,
) -> Resp
where
    Req: kafka_protocol::protocol::Encodable,
    Resp: kafka_protocol::protocol::Decodable,
{
    exchange_as(ctx, &plaintext_session(), key, version, request).await
}

/// Versions used together by one client generation: (JoinGroup, SyncGroup,
/// OffsetCommit, OffsetFetch, Heartbeat, LeaveGroup).
const GROUP_CLIENT_VERSIONS: &[(i16, i16, i16, i16, i16, i16)] = &[
    (0, 0, 2, 1, 0, 0),
    (3, 2, 5, 4, 2, 2),
    (5, 3, 7, 6, 3, 3),
    (7, 4, 8, 7, 4, 4),
    (9, 5, 9, 8, 4, 5),
];

#[tokio::test]
async fn a_lone_member_joins_syncs_commits_and_reads_its_offset_at_every_client_generation() {
    use crate::test_support::{group, s, topic};
    use kafka_protocol::messages::*;
    for &(join_v, sync_v, commit_v, fetch_v, heartbeat_v, leave_v) in GROUP_CLIENT_VERSIONS {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = group_context(dir.path());
        let join = JoinGroupRequest::default()
            .with_group_id(group())
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
            )
            .with_name(s("range"))
            .with_metadata(bytes::Bytes::from_static(b"sub"))]);
        let mut joined: JoinGroupResponse =
            exchange(&ctx, ApiKey::JoinGroup, join_v, join.clone()).await;
        if join_v >= 4 {
            assert_eq!(joined.error_code, 79, "v{join_v}: MEMBER_ID_REQUIRED first");
            let again = join.with_member_id(joined.member_id.clone());
            joined = exchange(&ctx, ApiKey::JoinGroup, join_v, again).await;
        }
        assert_eq!(joined.error_code, 0, "join v{join_v}");
        assert_eq!(joined.leader, joined.member_id, "the only member leads");
        assert_eq!(joined.members.len(), 1);
        let sync = SyncGroupRequest::default()
            .with_group_id(group())
            .with_generation_id(joined.generation_id)
            .with_member_id(joined.member_id.clone())
            .with_assignments(vec![
                sync_group_request::SyncGroupRequestAssignment::default()
                    .with_member_id(joined.member_id.clone())
                    .with_assignment(bytes::Bytes::from_static(b"assigned")),
            ]);
        let synced: SyncGroupResponse = exchange(&ctx, ApiKey::SyncGroup, sync_v, sync).await;
        assert_eq!(synced.error_code, 0, "sync v{sync_v}");
        assert_eq!(&synced.assignment[..], b"assigned");
        let heartbeat = HeartbeatRequest::default()
            .with_group_id(group())
            .with_generation_id(joined.generation_id)
            .with_member_id(joined.member_id.clone());
        let beat: HeartbeatResponse =
            exchange(&ctx, ApiKey::Heartbeat, heartbeat_v, heartbeat).await;
        assert_eq!(beat.error_code, 0, "heartbeat v{heartbeat_v}");
        let commit = OffsetCommitRequest::default()
            .with_group_id(group())
            .with_generation_id_or_member_epoch(joined.generation_id)
            .with_member_id(joined.member_id.clone())
            .with_retention_time_ms(-1)
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(topic())
                    .with_partitions(vec![
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(1)
                            .with_committed_offset(42)
                            .with_committed_leader_epoch(-1)
                            .with_committed_metadata(Some(s("m"))),
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(7)
                            .with_committed_offset(1),
                    ]),
            ]);
        let committed: OffsetCommitResponse =
            exchange(&ctx, ApiKey::OffsetCommit, commit_v, commit).await;
        let codes: Vec<i16> = committed.topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(
            codes,
            vec![0, 3],
            "commit v{commit_v}: partition 7 does not exist"
        );
        let fetched: OffsetFetchResponse = if fetch_v >= 8 {
            let request = OffsetFetchRequest::default().with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(group())
                    .with_topics(None),
            ]);
            exchange(&ctx, ApiKey::OffsetFetch, fetch_v, request).await
        } else {
            let request = OffsetFetchRequest::default()
                .with_group_id(group())
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(topic())
                        .with_partition_indexes(vec![1]),
                ]));
            exchange(&ctx, ApiKey::OffsetFetch, fetch_v, request).await
        };
        let offset = if fetch_v >= 8 {
            fetched.groups[0].topics[0].partitions[0].committed_offset
        } else {
            fetched.topics[0].partitions[0].committed_offset
        };
        assert_eq!(offset, 42, "fetch v{fetch_v}");
        let leave = if leave_v >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(group())
                .with_members(vec![leave_group_request::MemberIdentity::default()
                    .with_member_id(joined.member_id.clone())])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(group())
                .with_member_id(joined.member_id.clone())
        };
        let left: LeaveGroupResponse = exchange(&ctx, ApiKey::LeaveGroup, leave_v, leave).await;
        assert_eq!(left.error_code, 0, "leave v{leave_v}");
        Arc::clone(&ctx.broker).close().expect("close");
    }
}

#[tokio::test]
async fn find_coordinator_names_this_broker_for_one_key_and_for_a_batch() {
    use crate::test_support::s;
    use kafka_protocol::messages::*;
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = group_context(dir.path());
    for version in 0..=3 {
        let found: FindCoordinatorResponse = exchange(
            &ctx,
            ApiKey::FindCoordinator,
            version,
            FindCoordinatorRequest::default().with_key(s("g")),
        )
        .await;
        assert_eq!(found.error_code, 0);
        assert_eq!((found.node_id.0, found.port), (1, 9092), "v{version}");
        assert_eq!(found.host.as_str(), "127.0.0.1");
    }
    for version in 4..=6 {
        let found: FindCoordinatorResponse = exchange(
            &ctx,
            ApiKey::FindCoordinator,
            version,
            FindCoordinatorRequest::default().with_coordinator_keys(vec![s("a"), s("b")]),
        )
        .await;
        let keys: Vec<(&str, i32)> = found
            .coordinators
            .iter()
            .map(|c| (c.key.as_str(), c.node_id.0))
            .collect();
        assert_eq!(keys, vec![("a", 1), ("b", 1)], "v{version}");
    }
    let transactional: FindCoordinatorResponse = exchange(
        &ctx,
        ApiKey::FindCoordinator,
        3,
        FindCoordinatorRequest::default()
            .with_key(s("tx"))
            .with_key_type(1),
    )
    .await;
    assert_eq!(transactional.error_code, 15, "no transaction coordinator");
    Arc::clone(&ctx.broker).close().expect("close");
}

#[tokio::test]
async fn committed_offsets_survive_a_broker_restart() {
    use crate::test_support::{group, s, topic};
    use kafka_protocol::messages::*;
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = group_context(dir.path());
    let commit = OffsetCommitRequest::default()
        .with_group_id(group())
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(topic())
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(9)
                        .with_committed_metadata(Some(s("kept"))),
                ]),
        ]);
    let committed: OffsetCommitResponse = exchange(&ctx, ApiKey::OffsetCommit, 9, commit).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    Arc::clone(&ctx.broker).close().expect("close");
    drop(ctx);
    let broker = Broker::open(BrokerConfig::new(dir.path())).expect("reopen");
    let listen: SocketAddr = "127.0.0.1:9092".parse().expect("addr");
    let ctx = Context::new(broker, KafkaConfig::new(listen));
    let fetched: OffsetFetchResponse = exchange(
        &ctx,
        ApiKey::OffsetFetch,
        7,
        OffsetFetchRequest::default()
            .with_group_id(group())
            .with_topics(None),
    )
    .await;
    let p = &fetched.topics[0].partitions[0];
    assert_eq!(
        (p.committed_offset, p.metadata.as_deref()),
        (9, Some("kept"))
    );
    Arc::clone(&ctx.broker).close().expect("close");
}

/// A client of a SASL_PLAINTEXT listener offering SCRAM-SHA-256 and PLAIN.
fn sasl_session() -> crate::session::Session {
    use crate::listener::{ListenerConfig, SaslMechanism, SecurityProtocol};
    let mut listener = ListenerConfig::plaintext("127.0.0.1:9094".parse().expect("addr"));
    listener.protocol = SecurityProtocol::SaslPlaintext;
    listener.sasl_mechanisms = vec![
        SaslMechanism::Scram(herald_auth::ScramMechanism::Sha256),
        SaslMechanism::Plain,
    ];
    crate::session::Session::new(
        Arc::new(listener),
        Some("127.0.0.1:40000".parse().expect("addr")),
        None,
    )
}

#[tokio::test]
async fn before_sasl_only_the_handshake_is_answered_then_scram_authenticates() {
    use herald_auth::{ScramClient, ScramCredential, ScramMechanism, SecurityCommand};
    use kafka_protocol::messages::*;
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = context(dir.path());
    let m = ScramMechanism::Sha256;
    ctx.broker
        .apply_security(SecurityCommand::UpsertScram {
            user: "alice".into(),
            mechanism: m,
            credential: ScramCredential::from_password(m, "pw", 4096).expect("credential"),
        })
        .expect("stored");
    let session = sasl_session();
    let (body, _) = populated(ApiKey::Metadata, 12);
    let refused = handle_frame(&ctx, &session, frame(ApiKey::Metadata, 12, &body)).await;
    assert!(matches!(refused, Outcome::Close(_)), "{refused:?}");
    let unsupported: SaslHandshakeResponse = exchange_as(
        &ctx,
        &session,
        ApiKey::SaslHandshake,
        1,
        SaslHandshakeRequest::default().with_mechanism(crate::test_support::s("GSSAPI")),
    )
    .await;
    assert_eq!(unsupported.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    assert_eq!(unsupported.mechanisms.len(), 2);
    let chosen: SaslHandshakeResponse = exchange_as(
        &ctx,
        &session,
        ApiKey::SaslHandshake,
        1,
        SaslHandshakeRequest::default().with_mechanism(crate::test_support::s("SCRAM-SHA-256")),
    )
    .await;
    assert_eq!(chosen.error_code, 0);
    let mut client = ScramClient::new(m, "alice", "pw", "nonce");
    let first: SaslAuthenticateResponse = exchange_as(
        &ctx,
        &session,
        ApiKey::SaslAuthenticate,
        2,
        SaslAuthenticateRequest::default().with_auth_bytes(client.first().into()),
    )
    .await;
    assert_eq!(first.error_code, 0);
    let last = client.last(&first.auth_bytes).expect("client final");
    let done: SaslAuthenticateResponse = exchange_as(
        &ctx,
        &session,
        ApiKey::SaslAuthenticate,
        2,
        SaslAuthenticateRequest::default().with_auth_bytes(last.into()),
    )
    .await;
    assert_eq!(done.error_code, 0);
    assert!(
        client.verify_server(&done.auth_bytes),
        "the broker proved itself"
    );
    assert_eq!(session.principal().as_deref(), Some("User:alice"));
}

#[tokio::test]
async fn a_wrong_plain_password_fails_and_ends_the_session() {
    use kafka_protocol::messages::*;
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = context(dir.path());
    let session = sasl_session();
    let _: SaslHandshakeResponse = exchange_as(
        &ctx,
        &session,
        ApiKey::SaslHandshake,
        1,
        SaslHandshakeRequest::default().with_mechanism(crate::test_support::s("PLAIN")),
    )
    .await;
    let failed: SaslAuthenticateResponse = exchange_as(
        &ctx,
        &session,
        ApiKey::SaslAuthenticate,
        1,
        SaslAuthenticateRequest::default()
            .with_auth_bytes(bytes::Bytes::from_static(b"\0nobody\0guess")),
    )
    .await;
    assert_eq!(failed.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    assert!(session.has_failed());
    assert_eq!(session.principal(), None);
}

/// As `exchange`, as the client of `session`.
async fn exchange_as<Req, Resp>(
    ctx: &Context,
    session: &crate::session::Session,
    key: kafka_protocol::messages::ApiKey,
    version: i16,
    request: Req,
) -> Resp
where
    Req: kafka_protocol::protocol::Encodable,
    Resp: kafka_protocol::protocol::Decodable,
{
    use kafka_protocol::messages::ResponseHeader;
    use kafka_protocol::protocol::Decodable;
    let mut body = bytes::BytesMut::new();
    request.encode(&mut body, version).expect("encode");
    let Outcome::Respond(response) = handle_frame(ctx, session, frame(key, version, &body)).await
    else {
        panic!("{key:?} v{version} not answered");
    };
    let mut bytes = bytes::Bytes::from(response.to_vec()).slice(4..);
    ResponseHeader::decode(&mut bytes, key.response_header_version(version)).expect("header");
    let decoded = Resp::decode(&mut bytes, version).expect("decode");
    assert!(bytes.is_empty(), "{key:?} v{version}: trailing bytes");
    decoded
}
