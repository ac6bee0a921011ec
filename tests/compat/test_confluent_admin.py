"""confluent-kafka AdminClient: topics, partitions, configs, offsets, cluster."""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from clients import (
    CLIENT_TIMEOUT_S,
    admin_client,
    consume_from,
    create_topic,
    eventually,
    produce_indexed,
    producer,
    wait_for_partitions,
    watermarks,
)

T = CLIENT_TIMEOUT_S


def topic_configs(admin, topic):
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(timeout=T)


def changed(configs, name, value):
    """`configs` if config `name` has `value` there, else None (for eventually())."""
    return configs if configs[name].value == value else None


def create_error(admin, topic: NewTopic, **kwargs) -> KafkaError:
    with pytest.raises(KafkaException) as failure:
        admin.create_topics([topic], operation_timeout=T, **kwargs)[topic.topic].result(timeout=T)
    return failure.value.args[0]


def test_created_topic_is_described_with_its_partitions_id_and_configs(broker, unique):
    topic = unique("adm-describe")
    admin = create_topic(
        broker.bootstrap, topic, 3, {"retention.ms": "3600000", "max.message.bytes": "200000"}
    )
    description = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=T)
    assert description.name == topic
    assert str(description.topic_id) not in ("", "AAAAAAAAAAAAAAAAAAAAAA"), "topic has no id"
    assert sorted(p.id for p in description.partitions) == [0, 1, 2]
    assert all(p.leader is not None and p.leader.id >= 0 for p in description.partitions)

    configs = topic_configs(admin, topic)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["max.message.bytes"].value == "200000"
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    for name in ("retention.bytes", "segment.bytes", "segment.ms"):
        assert name in configs, f"describe_configs lacks {name}"


def test_incremental_alter_configs_sets_and_then_removes_a_topic_override(broker, unique):
    topic = unique("adm-incr")
    admin = create_topic(broker.bootstrap, topic, 1, {"retention.ms": "3600000"})
    default_segment_bytes = topic_configs(admin, topic)["segment.bytes"].value

    def alter(*entries):
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=list(entries))
        admin.incremental_alter_configs([resource])[resource].result(timeout=T)

    alter(
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
    )
    configs = eventually(
        lambda: changed(topic_configs(admin, topic), "segment.bytes", "1048576"), "SET applied"
    )
    assert configs["retention.ms"].value == "7200000"
    assert configs["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    alter(ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE))
    configs = eventually(
        lambda: changed(topic_configs(admin, topic), "segment.bytes", default_segment_bytes),
        "DELETE applied",
    )
    assert configs["segment.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].value == "7200000", "deleting one override touched another"


def test_incremental_alter_configs_rejects_an_unknown_or_invalid_topic_config(broker, unique):
    topic = unique("adm-badcfg")
    admin = create_topic(broker.bootstrap, topic, 1)
    for entry in (
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", "not-a-number", incremental_operation=AlterConfigOpType.SET),
    ):
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
        with pytest.raises(KafkaException) as failure:
            admin.incremental_alter_configs([resource])[resource].result(timeout=T)
        assert failure.value.args[0].code() == KafkaError.INVALID_CONFIG, (entry.name, failure.value)
    assert topic_configs(admin, topic)["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_alter_configs_replaces_the_whole_set_of_overrides(broker, unique):
    # Kafka's (non-incremental) AlterConfigs resets every override it does not name.
    topic = unique("adm-alter")
    admin = create_topic(
        broker.bootstrap, topic, 1, {"retention.ms": "3600000", "segment.bytes": "1048576"}
    )
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "5400000"})
    admin.alter_configs([resource])[resource].result(timeout=T)
    configs = eventually(
        lambda: changed(topic_configs(admin, topic), "retention.ms", "5400000"), "alter applied"
    )
    assert configs["segment.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_create_partitions_adds_partitions_that_producers_can_use(broker, unique):
    topic = unique("adm-parts")
    admin = create_topic(broker.bootstrap, topic, 1)
    admin.create_partitions([NewPartitions(topic, 4)], operation_timeout=T)[topic].result(timeout=T)
    wait_for_partitions(broker.bootstrap, admin, topic, 4)

    base_ts = int(time.time() * 1000)
    log = produce_indexed(producer(broker.bootstrap), topic, "parts", 100, base_ts, partition=3)
    assert log.offset == list(range(100))
    assert len(consume_from(broker.bootstrap, topic, {3: 0}, 100)) == 100
    assert watermarks(broker.bootstrap, topic, 4) == {0: (0, 0), 1: (0, 0), 2: (0, 0), 3: (0, 100)}

    with pytest.raises(KafkaException) as failure:
        admin.create_partitions([NewPartitions(topic, 2)], operation_timeout=T)[topic].result(timeout=T)
    assert failure.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_deleted_topic_disappears_and_its_name_can_be_reused(broker, unique):
    topic = unique("adm-delete")
    admin = create_topic(broker.bootstrap, topic, 2)
    first_id = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=T).topic_id
    produce_indexed(producer(broker.bootstrap), topic, "del", 50, int(time.time() * 1000))

    admin.delete_topics([topic], operation_timeout=T)[topic].result(timeout=T)
    deadline = time.monotonic() + T
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} still listed after delete"
        time.sleep(0.1)

    # Creating it again gives a new, empty topic (retried while the delete settles).
    deadline = time.monotonic() + T
    while True:
        futures = admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=T)
        try:
            futures[topic].result(timeout=T)
            break
        except KafkaException as e:
            assert e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS, e
            assert time.monotonic() < deadline, "name never became free again"
            time.sleep(0.2)
    wait_for_partitions(broker.bootstrap, admin, topic, 1)
    second_id = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=T).topic_id
    assert str(second_id) != str(first_id)
    assert watermarks(broker.bootstrap, topic, 1) == {0: (0, 0)}


def test_delete_of_unknown_topic_fails_with_unknown_topic(broker, unique):
    admin = admin_client(broker.bootstrap)
    topic = unique("adm-never-created")
    with pytest.raises(KafkaException) as failure:
        admin.delete_topics([topic], operation_timeout=T)[topic].result(timeout=T)
    assert failure.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_topic_rejects_duplicates_and_validate_only_creates_nothing(broker, unique):
    topic = unique("adm-dup")
    admin = create_topic(broker.bootstrap, topic, 1)
    err = create_error(admin, NewTopic(topic, 1, 1))
    assert err.code() == KafkaError.TOPIC_ALREADY_EXISTS

    dry = unique("adm-dry")
    admin.create_topics([NewTopic(dry, 2, 1)], validate_only=True, operation_timeout=T)[dry].result(
        timeout=T
    )
    assert dry not in admin.list_topics(timeout=10).topics

    err = create_error(admin, NewTopic(unique("adm-badcfg"), 1, 1, config={"retention.ms": "x"}))
    assert err.code() == KafkaError.INVALID_CONFIG
    err = create_error(admin, NewTopic(unique("adm-zero"), 0, 1))
    assert err.code() == KafkaError.INVALID_PARTITIONS


def test_list_offsets_earliest_latest_by_timestamp_and_max_timestamp(broker, unique):
    topic = unique("adm-offsets")
    admin = create_topic(broker.bootstrap, topic, 1)
    base_ts = int(time.time() * 1000) - 60_000
    # Ten messages in one batch; timestamps base+0, +10, ..., +90, except the
    # seventh, which carries the largest timestamp of all.
    stamps = [base_ts + 10 * i for i in range(10)]
    stamps[6] = base_ts + 1_000
    prod = producer(broker.bootstrap, linger_ms=100)
    for i, ts in enumerate(stamps):
        prod.produce(topic, value=b"v%d" % i, partition=0, timestamp=ts)
    assert prod.flush(T) == 0

    tp = TopicPartition(topic, 0)

    def list_offset(spec):
        return admin.list_offsets({tp: spec}, request_timeout=T)[tp].result(timeout=T)

    assert list_offset(OffsetSpec.earliest()).offset == 0
    assert list_offset(OffsetSpec.latest()).offset == 10
    at = list_offset(OffsetSpec.for_timestamp(base_ts + 25))
    assert (at.offset, at.timestamp) == (3, base_ts + 30)
    at = list_offset(OffsetSpec.for_timestamp(base_ts + 500))
    assert (at.offset, at.timestamp) == (6, base_ts + 1_000)
    assert list_offset(OffsetSpec.for_timestamp(base_ts + 5_000)).offset == -1
    top = list_offset(OffsetSpec.max_timestamp())
    assert (top.offset, top.timestamp) == (6, base_ts + 1_000)


def test_describe_cluster_lists_the_broker_at_its_advertised_address(broker):
    admin = admin_client(broker.bootstrap)
    cluster = admin.describe_cluster(request_timeout=T).result(timeout=T)
    assert cluster.cluster_id
    assert len(cluster.nodes) == 1
    node = cluster.nodes[0]
    assert f"{node.host}:{node.port}" == broker.bootstrap
    assert cluster.controller is not None
