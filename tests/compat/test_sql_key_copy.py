"""Key-sorted copies (topic config `key.sorted.copy`), set and changed
with a stock Kafka AdminClient: the broker builds a copy of each sealed
segment, says so in its metrics, and SQL key lookups answer exactly what
a plain consumer finds, with the copies and after they are turned off."""

import json
import time
import urllib.request

from clients import CLIENT_TIMEOUT_S, consumer, create_topic, producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from test_sql import history_indexed, rows, sql_broker  # noqa: F401 (a fixture)

T = CLIENT_TIMEOUT_S


def partition_metrics(broker, name, topic):
    """The value of metric `name` for each partition of `topic`."""
    with urllib.request.urlopen(f"http://{broker.admin_address}/metrics", timeout=T) as answer:
        text = answer.read().decode()
    return [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith(f"herald_partition_{name}") and f'topic="{topic}"' in line]


def wait_until(check, what):
    deadline = time.monotonic() + T
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_key_lookups_through_key_sorted_copies_answer_what_a_consumer_finds(sql_broker, unique):
    topic = unique("sorted")
    # Small segments, so that most of the topic is sealed and copied.
    admin = create_topic(sql_broker.bootstrap, topic, 2, {
        "key.sorted.copy": "true", "segment.bytes": "65536", "max.message.bytes": "16384"})
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    config = list(described.values())[0].result(T)
    assert config["key.sorted.copy"].value == "true"

    prod = producer(sql_broker.bootstrap, compression_type="lz4", linger_ms=50, batch_size=12_000)
    for n in range(6000):
        key = None if n % 101 == 0 else f"k{(n * 7919) % 40}"
        prod.produce(topic, key=key, partition=n % 2,
                     value=json.dumps({"n": n, "pad": "y" * (n % 200)}),
                     headers=[("n", str(n).encode())])
    assert prod.flush(T) == 0
    cons = consumer(sql_broker.bootstrap)
    cons.assign([TopicPartition(topic, p, 0) for p in range(2)])
    truth, seen = {}, 0
    while seen < 6000:
        msg = cons.poll(T)
        assert msg is not None and not msg.error(), msg and msg.error()
        seen += 1
        if msg.key() is not None:
            truth.setdefault(msg.key().decode(), []).append(
                (msg.partition(), msg.offset(), msg.timestamp()[1], msg.value().decode(),
                 msg.headers()[0][1].decode()))
    cons.close()

    def check():
        for keys in (["k3"], ["k0", "k17", "k39"], ["k5", "nobody"], ["nobody"]):
            listed = ", ".join(f"'{k}'" for k in keys)
            where = f"key = {listed}" if len(keys) == 1 else f"key IN ({listed})"
            got = sorted(
                (r["partition"], r["offset"], r["ts"], r["value"], r["n"])
                for r in rows(sql_broker, f'SELECT partition, "offset", CAST(timestamp AS BIGINT) AS ts, '
                                          f"value, headers['n'] AS n "
                                          f'FROM "{topic}" WHERE {where}'))
            want = sorted(row for k in keys for row in truth.get(k, []))
            assert got == want, where

    # Every sealed segment of both partitions gets its copy.
    wait_until(lambda: history_indexed(sql_broker, topic)
               and partition_metrics(sql_broker, "key_copy_pending_segments", topic) == [0.0, 0.0]
               and all(b > 0 for b in partition_metrics(sql_broker, "key_copy_bytes", topic)),
               "the key-sorted copies were never built")
    check()

    # Turned off: the copies are deleted; lookups read the batches again.
    change = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("key.sorted.copy", "false", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([change]).values():
        future.result(T)
    wait_until(lambda: partition_metrics(sql_broker, "key_copy_bytes", topic) == [0.0, 0.0],
               "the key-sorted copies were not deleted")
    check()
