"""kafka-python (pure Python client): produce, consume with assign + seek, admin."""

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, KafkaAdminClient

from clients import expected_message

COUNT = 5_000
PARTITIONS = 2
TIMEOUT_S = 30


def kp_headers(m):
    # kafka-python refuses null header values; every other header goes through.
    return [(k, v) for k, v in m.headers if v is not None]


def admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)


def create(client, topic, partitions, configs=None):
    result = client.create_topics(
        {topic: {"num_partitions": partitions, "replication_factor": 1, "configs": configs or {}}},
        wait_for_metadata=True,
    )
    [created] = result["topics"]
    assert created["error_code"] == 0, created
    return created


def test_kafka_python_messages_read_back_after_seek_to_beginning(broker, unique):
    topic = unique("kp-roundtrip")
    with admin(broker.bootstrap) as client:
        create(client, topic, PARTITIONS)
    base_ts = int(time.time() * 1000) - 60_000

    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, acks="all", compression_type="gzip", linger_ms=5
    )
    futures = []
    for i in range(COUNT):
        m = expected_message("kp", i, base_ts)
        futures.append(
            producer.send(topic, key=m.key, value=m.value, headers=kp_headers(m), timestamp_ms=m.timestamp_ms)
        )
    producer.flush(timeout=TIMEOUT_S)
    producer.close(timeout=TIMEOUT_S)
    delivered = [f.get(timeout=TIMEOUT_S) for f in futures]
    for p in range(PARTITIONS):
        offsets = [md.offset for md in delivered if md.partition == p]
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets not dense in send order"

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False
    )
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        records = []
        deadline = time.monotonic() + 120
        while len(records) < COUNT:
            assert time.monotonic() < deadline, f"consumed {len(records)} of {COUNT}"
            for batch in consumer.poll(timeout_ms=1000, max_records=5000).values():
                records.extend(batch)
        ends = consumer.end_offsets(partitions)
    finally:
        consumer.close()

    assert len(records) == COUNT
    assert sum(ends.values()) == COUNT
    seen = set()
    for r in records:
        i = int(dict(r.headers)["i"])
        assert i not in seen, f"message {i} consumed twice"
        seen.add(i)
        assert (r.partition, r.offset) == (delivered[i].partition, delivered[i].offset)
        m = expected_message("kp", i, base_ts)
        assert (r.key, r.value, r.timestamp) == (m.key, m.value, m.timestamp_ms), f"message {i}"
        assert [(k, v) for k, v in r.headers] == kp_headers(m), f"message {i}: headers {r.headers}"
    assert seen == set(range(COUNT))


def test_kafka_python_admin_creates_describes_and_deletes_topics(broker, unique):
    topic = unique("kp-admin")
    with admin(broker.bootstrap) as client:
        created = create(client, topic, 3, {"retention.ms": "3600000"})
        assert created["num_partitions"] == 3
        assert topic in client.list_topics()

        [description] = client.describe_topics([topic])
        assert description["error_code"] == 0
        assert sorted(p["partition_index"] for p in description["partitions"]) == [0, 1, 2]
        assert all(p["leader_id"] >= 0 for p in description["partitions"])
        assert description["topic_id"] == created["topic_id"]

        configs = client.describe_configs([ConfigResource("topic", topic)])["topic"][topic]
        assert configs["retention.ms"]["value"] == "3600000"
        assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

        result = client.delete_topics([topic])
        assert [t["error_code"] for t in result["topics"]] == [0]
        deadline = time.monotonic() + TIMEOUT_S
        while topic in client.list_topics():
            assert time.monotonic() < deadline, f"{topic} still listed after delete"
            time.sleep(0.1)
