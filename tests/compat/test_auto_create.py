"""Automatic topic creation, on and off, as a confluent-kafka producer sees it."""

import pytest
from confluent_kafka import KafkaError

from clients import CLIENT_TIMEOUT_S, admin_client, consume_from, producer

pytestmark = pytest.mark.needs_server_flags


@pytest.mark.herald_args("--auto-create-topics", "true", "--default-partitions", "2")
def test_producing_to_a_new_topic_creates_it_with_the_default_partition_count(broker, unique):
    topic = unique("auto-on")
    prod = producer(broker.bootstrap, linger_ms=0)
    reports = []
    for i in range(20):
        prod.produce(topic, value=b"auto-%d" % i, partition=i % 2,
                     on_delivery=lambda err, msg: reports.append((err, msg.partition(), msg.offset())))
    assert prod.flush(CLIENT_TIMEOUT_S) == 0
    assert [err for err, _, _ in reports if err is not None] == []
    listed = admin_client(broker.bootstrap).list_topics(timeout=10).topics[topic]
    assert sorted(listed.partitions) == [0, 1]
    got = consume_from(broker.bootstrap, topic, {0: 0, 1: 0}, 20)
    assert sorted(m.value() for m in got) == sorted(b"auto-%d" % i for i in range(20))


@pytest.mark.herald_args("--auto-create-topics", "false")
def test_producing_to_a_new_topic_fails_when_auto_create_is_off(broker, unique):
    topic = unique("auto-off")
    prod = producer(broker.bootstrap, linger_ms=0, message_timeout_ms=5000,
                    topic_metadata_propagation_max_ms=1000)
    reports = []
    prod.produce(topic, value=b"nowhere", on_delivery=lambda err, msg: reports.append(err))
    assert prod.flush(CLIENT_TIMEOUT_S) == 0
    [err] = reports
    assert err is not None, "the message was acknowledged although its topic does not exist"
    assert err.code() in (KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART), err
    assert topic not in admin_client(broker.bootstrap).list_topics(timeout=10).topics
