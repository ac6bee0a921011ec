//! Behaviour of the broker core against real logs in temp directories.

use std::sync::Arc;

use herald_broker::{
    Acks, Broker, BrokerConfig, BrokerError, ConfigChange, OffsetSpec, Partition, ProduceError,
};
use herald_records::{testing, BatchHeader};

fn open(dir: &std::path::Path) -> Arc<Broker> {
    Broker::open(BrokerConfig::new(dir)).expect("open broker")
}

/// The partition's next offset, as ListOffsets(latest) answers it.
async fn latest_offset(p: &Partition) -> u64 {
    p.list_offset(OffsetSpec::Latest)
        .await
        .expect("lookup")
        .expect("latest")
        .offset
}

/// A valid batch from an idempotent producer.
fn idempotent_batch(count: u32, producer_id: i64, epoch: i16, sequence: i32) -> Vec<u8> {
    let mut b = testing::batch(count, b"value", 1_000);
    b[43..51].copy_from_slice(&producer_id.to_be_bytes());
    b[51..53].copy_from_slice(&epoch.to_be_bytes());
    b[53..57].copy_from_slice(&sequence.to_be_bytes());
    let crc = BatchHeader::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

#[test]
fn topics_and_configs_survive_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (id, cluster) = {
        let broker = open(dir.path());
        let created = broker
            .create_topic(
                "orders",
                Some(3),
                &[("retention.ms".into(), "60000".into())],
                false,
            )
            .expect("create");
        broker.close().expect("close");
        (created.id, broker.cluster_id().to_owned())
    };
    let broker = open(dir.path());
    let topic = broker.topic("orders").expect("kept");
    assert_eq!(topic.id(), id);
    assert_eq!(topic.partition_count(), 3);
    assert_eq!(
        topic
            .config()
            .overrides()
            .get("retention.ms")
            .map(String::as_str),
        Some("60000")
    );
    assert_eq!(broker.cluster_id(), cluster);
    assert!(broker.topic_by_id(id).is_some());
}

#[tokio::test]
async fn appended_batches_are_readable_after_restart_and_offsets_continue() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let broker = open(dir.path());
        broker
            .create_topic("t", Some(1), &[], false)
            .expect("create");
        let p = broker
            .topic("t")
            .and_then(|t| t.partition(0))
            .expect("partition");
        assert_eq!(
            p.append(&testing::batch(3, b"a", 10), Acks::All)
                .await
                .expect("append")
                .base_offset,
            0
        );
        broker.close().expect("close");
    }
    let broker = open(dir.path());
    let p = broker
        .topic("t")
        .and_then(|t| t.partition(0))
        .expect("partition");
    assert_eq!(
        p.append(&testing::batch(2, b"b", 20), Acks::All)
            .await
            .expect("append")
            .base_offset,
        3
    );
    assert_eq!(latest_offset(&p).await, 5);
}

#[tokio::test]
async fn retried_idempotent_batch_gets_original_offsets_even_after_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pid, epoch) = {
        let broker = open(dir.path());
        broker
            .create_topic("t", Some(1), &[], false)
            .expect("create");
        let (pid, epoch) = broker.init_producer_id(None).expect("pid");
        let p = broker
            .topic("t")
            .and_then(|t| t.partition(0))
            .expect("partition");
        p.append(&testing::batch(4, b"x", 0), Acks::All)
            .await
            .expect("plain");
        let first = p
            .append(&idempotent_batch(2, pid, epoch, 0), Acks::All)
            .await
            .expect("first");
        assert_eq!((first.base_offset, first.duplicate), (4, false));
        let retry = p
            .append(&idempotent_batch(2, pid, epoch, 0), Acks::All)
            .await
            .expect("retry");
        assert_eq!((retry.base_offset, retry.duplicate), (4, true));
        broker.close().expect("close");
        (pid, epoch)
    };
    let broker = open(dir.path());
    let p = broker
        .topic("t")
        .and_then(|t| t.partition(0))
        .expect("partition");
    let retry = p
        .append(&idempotent_batch(2, pid, epoch, 0), Acks::All)
        .await
        .expect("retry after restart");
    assert_eq!((retry.base_offset, retry.duplicate), (4, true));
    let gap = p
        .append(&idempotent_batch(1, pid, epoch, 5), Acks::All)
        .await
        .expect_err("gap");
    assert!(
        matches!(
            gap,
            ProduceError::OutOfOrderSequence {
                expected: 2,
                found: 5,
                ..
            }
        ),
        "{gap}"
    );
    let next = p
        .append(&idempotent_batch(1, pid, epoch, 2), Acks::All)
        .await
        .expect("next");
    assert_eq!(next.base_offset, 6);
    let fenced = p
        .append(&idempotent_batch(1, pid, epoch - 1, 3), Acks::All)
        .await
        .expect_err("old epoch");
    assert!(
        matches!(fenced, ProduceError::InvalidProducerEpoch { .. }),
        "{fenced}"
    );
}

#[test]
fn producer_ids_are_never_reused_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = open(dir.path()).init_producer_id(None).expect("pid").0;
    let second = open(dir.path()).init_producer_id(None).expect("pid").0;
    assert!(second > first);
}

#[test]
fn epoch_bump_keeps_the_producer_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = open(dir.path());
    let (pid, epoch) = broker.init_producer_id(None).expect("pid");
    assert_eq!(
        broker.init_producer_id(Some((pid, epoch))).expect("bump"),
        (pid, epoch + 1)
    );
    assert!(matches!(
        broker.init_producer_id(Some((pid, epoch))),
        Err(BrokerError::InvalidProducerEpoch { .. })
    ));
}

#[tokio::test]
async fn deleted_topic_leaves_no_data_and_can_be_recreated_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = open(dir.path());
    broker
        .create_topic("gone", Some(2), &[], false)
        .expect("create");
    let p = broker
        .topic("gone")
        .and_then(|t| t.partition(0))
        .expect("partition");
    p.append(&testing::batch(1, b"x", 0), Acks::All)
        .await
        .expect("append");
    drop(p);
    broker.delete_topic("gone").expect("delete");
    assert!(broker.topic("gone").is_none());
    assert!(!dir.path().join("gone-0").exists());
    // The files go on a thread of their own, soon after the answer.
    let leftovers = || {
        std::fs::read_dir(dir.path())
            .expect("data dir")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("gone-"))
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while leftovers() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(
        leftovers(),
        0,
        "the deleted partitions' directories are removed"
    );
    broker
        .create_topic("gone", Some(1), &[], false)
        .expect("recreate");
    let p = broker
        .topic("gone")
        .and_then(|t| t.partition(0))
        .expect("partition");
    assert_eq!(latest_offset(&p).await, 0);
}

#[test]
fn partitions_only_grow_and_new_ones_survive_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let broker = open(dir.path());
        broker
            .create_topic("t", Some(1), &[], false)
            .expect("create");
        assert!(broker.create_partitions("t", 1, false).is_err());
        broker
            .create_partitions("t", 4, true)
            .expect("validate only");
        assert_eq!(broker.topic("t").expect("t").partition_count(), 1);
        broker.create_partitions("t", 4, false).expect("grow");
        broker.close().expect("close");
    }
    assert_eq!(open(dir.path()).topic("t").expect("t").partition_count(), 4);
}

#[tokio::test]
async fn altered_config_is_persisted_and_invalid_changes_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let broker = open(dir.path());
        broker
            .create_topic("t", Some(1), &[], false)
            .expect("create");
        let set = ConfigChange::Set {
            key: "max.message.bytes".into(),
            value: "2048".into(),
        };
        broker
            .alter_topic_config("t", &[set], false, false)
            .expect("alter");
        let compact = ConfigChange::Set {
            key: "cleanup.policy".into(),
            value: "compact".into(),
        };
        assert!(broker
            .alter_topic_config("t", &[compact], false, false)
            .is_err());
        broker.close().expect("close");
    }
    let broker = open(dir.path());
    let p = broker
        .topic("t")
        .and_then(|t| t.partition(0))
        .expect("partition");
    let big = testing::batch(1, &[7u8; 4096], 0);
    assert!(matches!(
        p.append(&big, Acks::All).await,
        Err(ProduceError::TooLarge { .. })
    ));
}

#[test]
fn auto_create_follows_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::new(dir.path());
    config.auto_create_topics = false;
    let broker = Broker::open(config).expect("open");
    assert!(matches!(
        broker.topic_or_auto_create("nope"),
        Err(BrokerError::UnknownTopic { .. })
    ));
    drop(broker);
    let broker = open(dir.path());
    assert_eq!(
        broker
            .topic_or_auto_create("yes")
            .expect("created")
            .partition_count(),
        1
    );
}

#[tokio::test]
async fn two_batches_in_one_partition_request_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = open(dir.path());
    broker
        .create_topic("t", Some(1), &[], false)
        .expect("create");
    let p = broker
        .topic("t")
        .and_then(|t| t.partition(0))
        .expect("partition");
    let mut two = testing::batch(1, b"a", 0);
    two.extend(testing::batch(1, b"b", 0));
    assert!(matches!(
        p.append(&two, Acks::All).await,
        Err(ProduceError::InvalidRecords(_))
    ));
    let mut bad = testing::batch(1, b"a", 0);
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(matches!(
        p.append(&bad, Acks::All).await,
        Err(ProduceError::InvalidBatch(_))
    ));
    assert_eq!(latest_offset(&p).await, 0);
}

#[tokio::test]
async fn producer_state_is_the_snapshot_plus_the_batches_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pid = {
        let broker = open(dir.path());
        broker
            .create_topic("t", Some(1), &[], false)
            .expect("create");
        let (pid, _) = broker.init_producer_id(None).expect("pid");
        let p = broker
            .topic("t")
            .and_then(|t| t.partition(0))
            .expect("partition");
        p.append(&idempotent_batch(2, pid, 0, 0), Acks::All)
            .await
            .expect("first");
        broker.close().expect("clean close writes the snapshot");
        pid
    };
    {
        // Appended after the snapshot, then no clean close (as after a crash).
        let broker = open(dir.path());
        let p = broker
            .topic("t")
            .and_then(|t| t.partition(0))
            .expect("partition");
        assert_eq!(
            p.append(&idempotent_batch(1, pid, 0, 2), Acks::All)
                .await
                .expect("second")
                .base_offset,
            2
        );
    }
    let broker = open(dir.path());
    let p = broker
        .topic("t")
        .and_then(|t| t.partition(0))
        .expect("partition");
    let from_snapshot = p
        .append(&idempotent_batch(2, pid, 0, 0), Acks::All)
        .await
        .expect("retry of first");
    assert_eq!(
        (from_snapshot.base_offset, from_snapshot.duplicate),
        (0, true)
    );
    let from_replay = p
        .append(&idempotent_batch(1, pid, 0, 2), Acks::All)
        .await
        .expect("retry of second");
    assert_eq!((from_replay.base_offset, from_replay.duplicate), (2, true));
    assert_eq!(
        p.append(&idempotent_batch(1, pid, 0, 3), Acks::All)
            .await
            .expect("next")
            .base_offset,
        3
    );
}

#[test]
fn credentials_acls_and_tenants_survive_restart_and_refusals_change_nothing() {
    use herald_auth::{
        AclBinding, Caller, Operation, PatternType, Permission, ResourceType, ScramCredential,
        ScramMechanism, SecurityCommand,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::new(dir.path());
    config.security.authorization = true;
    let credential =
        ScramCredential::from_password(ScramMechanism::Sha512, "pw", 4096).expect("credential");
    let read_orders = AclBinding {
        resource_type: ResourceType::Topic,
        name: "orders".into(),
        pattern_type: PatternType::Literal,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: Operation::Read,
        permission: Permission::Allow,
    };
    let secret = {
        let broker = Broker::open(config.clone()).expect("open");
        broker
            .apply_security_all(vec![
                SecurityCommand::UpsertScram {
                    user: "alice".into(),
                    mechanism: ScramMechanism::Sha512,
                    credential: credential.clone(),
                },
                SecurityCommand::CreateAcls(vec![read_orders.clone()]),
                SecurityCommand::CreateTenant {
                    name: "acme".into(),
                    principals: ["User:ann".to_owned()].into(),
                    namespaces: ["acme.".to_owned()].into(),
                },
            ])
            .expect("applied");
        // Refused as a whole: the second command names no credential.
        let refused = broker.apply_security_all(vec![
            SecurityCommand::CreateAcls(vec![AclBinding {
                name: "other".into(),
                ..read_orders.clone()
            }]),
            SecurityCommand::DeleteScram {
                user: "nobody".into(),
                mechanism: ScramMechanism::Sha256,
            },
        ]);
        assert!(matches!(refused, Err(BrokerError::Security(_))));
        assert_eq!(broker.security().state().acls.len(), 1 + 3);
        broker.close().expect("close");
        broker.security().secret().to_vec()
    };
    let broker = Broker::open(config).expect("reopen");
    let security = broker.security();
    assert_eq!(security.secret(), &secret[..], "the decoy secret is kept");
    assert_eq!(
        security.state().scram("alice", ScramMechanism::Sha512),
        Some(&credential)
    );
    let alice = Caller {
        principal: "User:alice".into(),
        host: "127.0.0.1".into(),
    };
    assert!(security.authorize(&alice, Operation::Read, ResourceType::Topic, "orders"));
    assert!(!security.authorize(&alice, Operation::Read, ResourceType::Topic, "other"));
    let ann = Caller {
        principal: "User:ann".into(),
        host: "127.0.0.1".into(),
    };
    assert!(security.authorize(&ann, Operation::Create, ResourceType::Topic, "acme.x"));
    assert_eq!(
        security
            .state()
            .namespace_of("acme.x")
            .map(|n| n.tenant.clone()),
        Some("acme".to_owned())
    );
}

/// The `retention.ms` a topic inherits from its namespace, if any.
fn inherited_retention(topic: &herald_broker::Topic) -> Option<String> {
    topic.config().inherited().get("retention.ms").cloned()
}

#[test]
fn topics_follow_their_namespaces_configs_and_bad_ones_are_refused() {
    use herald_auth::SecurityCommand;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = BrokerConfig::new(dir.path());
    {
        let broker = Broker::open(config.clone()).expect("open");
        broker
            .create_topic("acme.orders", Some(1), &[], false)
            .expect("created before its namespace");
        broker
            .apply_security_all(vec![
                SecurityCommand::CreateTenant {
                    name: "acme".into(),
                    principals: ["User:ann".to_owned()].into(),
                    namespaces: ["acme.".to_owned()].into(),
                },
                SecurityCommand::AlterNamespaceConfigs {
                    prefix: "acme.".into(),
                    set: [("retention.ms".to_owned(), "60000".to_owned())].into(),
                    remove: Default::default(),
                },
            ])
            .expect("applied");
        let topic = broker.topic("acme.orders").expect("topic");
        assert_eq!(inherited_retention(&topic).as_deref(), Some("60000"));
        assert!(topic.config().overrides().is_empty());
        // A topic created afterwards inherits at once.
        broker
            .create_topic("acme.events", Some(1), &[], false)
            .expect("created");
        let events = broker.topic("acme.events").expect("topic");
        assert_eq!(events.config().inherited().len(), 1);
        // An invalid value, or one that does not fit a topic, changes nothing.
        for (key, value) in [("retention.ms", "soon"), ("no.such.key", "1")] {
            let refused = broker.apply_security(SecurityCommand::AlterNamespaceConfigs {
                prefix: "acme.".into(),
                set: [(key.to_owned(), value.to_owned())].into(),
                remove: Default::default(),
            });
            assert!(
                matches!(refused, Err(BrokerError::InvalidConfig { .. })),
                "{key}: {refused:?}"
            );
        }
        assert_eq!(
            broker.security().state().namespaces["acme."]
                .configs
                .get("retention.ms")
                .map(String::as_str),
            Some("60000")
        );
        broker.close().expect("close");
    }
    let broker = Broker::open(config).expect("reopen");
    let topic = broker.topic("acme.orders").expect("topic");
    assert_eq!(inherited_retention(&topic).as_deref(), Some("60000"));
    // Deleting the tenant takes the inheritance away.
    broker
        .apply_security(SecurityCommand::DeleteTenant {
            name: "acme".into(),
        })
        .expect("deleted");
    assert!(topic.config().inherited().is_empty());
}
