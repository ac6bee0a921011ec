"""confluent-kafka (librdkafka): produce 100,000 messages, read every one back.

Each variant produces with its own codec and acks into a 3-partition topic,
then reads the topic twice with assign(): from offset 0 and from the offsets
that offsets_for_times() gives for a timestamp in the middle of the run.
Smaller scenarios cover acks=0, messages above the consumer's fetch size
limits, and a consumer waiting at the end of the log.
"""

import time

import pytest
from confluent_kafka import TopicPartition

from clients import (
    CLIENT_TIMEOUT_S,
    assert_messages_match,
    consume_from,
    consumer,
    create_topic,
    expected_message,
    produce_indexed,
    producer,
    watermarks,
)

COUNT = 100_000
PARTITIONS = 3
# Offset of the middle of the run, as a timestamp: message i has timestamp base_ts + i.
SPLIT_INDEX = 60_000

VARIANTS = {
    "no_compression": {"compression.type": "none", "acks": "1"},
    "gzip": {"compression.type": "gzip", "acks": "1"},
    "snappy": {"compression.type": "snappy", "acks": "1"},
    "lz4": {"compression.type": "lz4", "acks": "1"},
    "zstd": {"compression.type": "zstd", "acks": "1"},
    "idempotent_acks_all": {"enable.idempotence": True, "acks": "all", "compression.type": "lz4"},
}


def run_base_ts() -> int:
    # In the recent past, so that no retention setting drops the messages and
    # no "timestamp too far in the future" check rejects them.
    return int(time.time() * 1000) - 10 * 60 * 1000


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_produced_message_is_consumed_once_in_order_from_start_and_from_timestamp(
    broker, unique, variant
):
    topic = unique(f"cc-{variant.replace('_', '-')}")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    base_ts = run_base_ts()
    prod = producer(broker.bootstrap, **VARIANTS[variant])
    log = produce_indexed(prod, topic, variant, COUNT, base_ts)

    per_partition = {p: [i for i in range(COUNT) if log.partition[i] == p] for p in range(PARTITIONS)}
    assert sum(len(v) for v in per_partition.values()) == COUNT
    for p, indexes in per_partition.items():
        offsets = [log.offset[i] for i in indexes]
        assert offsets == list(range(len(indexes))), (
            f"partition {p}: delivery offsets are not 0..{len(indexes) - 1} in produce order"
        )

    # The high watermarks say exactly how many messages each partition holds.
    marks = watermarks(broker.bootstrap, topic, PARTITIONS)
    assert marks == {p: (0, len(ix)) for p, ix in per_partition.items()}

    consumed = consume_from(broker.bootstrap, topic, {p: 0 for p in range(PARTITIONS)}, COUNT)
    assert_messages_match(consumed, log, variant, base_ts, range(COUNT))

    # From a timestamp: each partition starts at its first message with timestamp >= target.
    target = base_ts + SPLIT_INDEX
    cons = consumer(broker.bootstrap)
    try:
        found = cons.offsets_for_times(
            [TopicPartition(topic, p, target) for p in range(PARTITIONS)], timeout=CLIENT_TIMEOUT_S
        )
    finally:
        cons.close()
    starts = {}
    for tp in found:
        assert tp.error is None, f"offsets_for_times partition {tp.partition}: {tp.error}"
        first = next(i for i in per_partition[tp.partition] if i >= SPLIT_INDEX)
        assert tp.offset == log.offset[first], (
            f"partition {tp.partition}: offset for timestamp is {tp.offset}, "
            f"the first message at or after it is at {log.offset[first]}"
        )
        starts[tp.partition] = tp.offset
    later = range(SPLIT_INDEX, COUNT)
    consumed = consume_from(broker.bootstrap, topic, starts, len(later))
    assert_messages_match(consumed, log, variant, base_ts, later)


def test_acks_zero_messages_arrive_in_order(broker, unique):
    topic = unique("cc-acks0")
    create_topic(broker.bootstrap, topic, 1)
    base_ts = run_base_ts()
    count = 2_000
    prod = producer(broker.bootstrap, acks="0")
    produce_indexed(prod, topic, "acks0", count, base_ts, partition=0)
    # With acks=0 the broker answers nothing, so the client learns no offsets;
    # the log must still hold every message, in produce order, intact.
    consumed = consume_from(broker.bootstrap, topic, {0: 0}, count)
    assert [m.offset() for m in consumed] == list(range(count))
    for i, msg in enumerate(consumed):
        m = expected_message("acks0", i, base_ts)
        assert (msg.key(), msg.value(), msg.headers()) == (m.key, m.value, m.headers), (
            f"message at offset {i} is not message {i}"
        )


def test_messages_larger_than_the_consumer_fetch_limits_are_still_delivered(broker, unique):
    # A fetch returns at least one whole batch even when it exceeds max_bytes.
    topic = unique("cc-large")
    create_topic(broker.bootstrap, topic, 1, {"max.message.bytes": "1048576"})
    values = [bytes([i]) * (200_000 + i) for i in range(20)]
    prod = producer(broker.bootstrap, linger_ms=0, batch_size=1)
    for v in values:
        prod.produce(topic, value=v, partition=0)
    assert prod.flush(CLIENT_TIMEOUT_S) == 0
    cons = consumer(broker.bootstrap, fetch_max_bytes=1024, max_partition_fetch_bytes=1024,
                    message_max_bytes=1000,
                    receive_message_max_bytes=2_000_000)
    try:
        cons.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < len(values):
            assert time.monotonic() < deadline, f"consumed {len(got)} of {len(values)} large messages"
            for msg in cons.consume(num_messages=100, timeout=1.0):
                assert msg.error() is None, msg.error()
                got.append(msg)
    finally:
        cons.close()
    assert [m.value() for m in got] == values
    assert [m.offset() for m in got] == list(range(len(values)))


def test_consumer_waiting_at_the_end_receives_messages_produced_later(broker, unique):
    topic = unique("cc-tail")
    create_topic(broker.bootstrap, topic, 2)
    cons = consumer(broker.bootstrap)
    try:
        # Partition 1 stays empty all along: waiting on it must not produce errors.
        cons.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        assert cons.consume(num_messages=10, timeout=2.0) == []
        prod = producer(broker.bootstrap, linger_ms=0)
        got = []
        for round_ in range(5):
            prod.produce(topic, value=b"late-%d" % round_, partition=0)
            assert prod.flush(CLIENT_TIMEOUT_S) == 0
            deadline = time.monotonic() + 30
            while len(got) <= round_:
                assert time.monotonic() < deadline, f"message {round_} never reached the consumer"
                # consume() waits for all 10 or its timeout: a short one, so
                # that each round's single message does not cost a second
                # (the client's fetch waits at the end all the same).
                for msg in cons.consume(num_messages=10, timeout=0.2):
                    assert msg.error() is None, msg.error()
                    got.append(msg)
    finally:
        cons.close()
    assert [(m.partition(), m.offset(), m.value()) for m in got] == [
        (0, i, b"late-%d" % i) for i in range(5)
    ]
