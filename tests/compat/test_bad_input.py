"""Bad input over a raw socket: the offending request gets its error code or
its own connection closed, and nobody else notices.

Every test first stores messages, opens an idle connection and starts a
healthy confluent-kafka producer/consumer (see bystanders.py); it then sends
its bad input, lets the healthy client make progress while the bad
connection is still open, checks the answer, and finally checks that the
stored messages, the idle connection and the healthy client are unaffected.
"""

import random
import socket
import struct

import pytest
from confluent_kafka import TopicPartition

from bystanders import Bystanders
from clients import admin_client, consume_from, consumer, create_topic
from kafka_wire import (
    API_METADATA,
    API_PRODUCE,
    API_VERSIONS,
    CORRUPT_MESSAGE,
    MESSAGE_TOO_LARGE,
    NONE,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_VERSION,
    RawConnection,
    Reader,
    nullable_string,
    parse_api_versions_v0,
    record_batch,
)

# Kafka's default socket.request.max.bytes; herald is started with the same limit.
MAX_FRAME_BYTES = 104_857_600


@pytest.fixture
def bystanders(broker, unique):
    guard = Bystanders(broker, unique)
    yield guard
    guard.close()


def high_watermark(bootstrap, topic, partition):
    cons = consumer(bootstrap)
    try:
        return cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        cons.close()


GARBAGE = {
    # 'GET ' read as a frame size is 1.2 GB: over any limit.
    "http_request": b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    # A plausible size followed by random bytes (fixed seed: the same bytes every run).
    "random_frame": struct.pack(">i", 64) + random.Random(20261122).randbytes(64),
    "zero_size_frame": struct.pack(">i", 0) + b"\x00" * 8,
}


@pytest.mark.parametrize("garbage", list(GARBAGE))
def test_garbage_bytes_are_answered_or_close_only_their_connection(broker, bystanders, garbage):
    with RawConnection(broker.bootstrap) as conn:
        conn.send_raw(GARBAGE[garbage])
        bystanders.traffic.wait_for_progress()
        outcome = conn.closed_or_answered()
        if garbage == "http_request":
            assert outcome == "closed"
    bystanders.assert_unaffected()


def test_truncated_frame_then_close_leaves_the_broker_serving(broker, bystanders):
    with RawConnection(broker.bootstrap) as conn:
        # Declares 100 bytes, sends the start of a Metadata request, then stops.
        conn.send_raw(struct.pack(">ihhi", 100, API_METADATA, 1, 42) + nullable_string("cut"))
        bystanders.traffic.wait_for_progress()
    with RawConnection(broker.bootstrap) as conn:
        conn.send_raw(struct.pack(">ihh", 100, API_METADATA, 1))
        conn.sock.shutdown(socket.SHUT_WR)
        conn.expect_closed()
    bystanders.assert_unaffected()


@pytest.mark.herald_args("--max-frame-bytes", str(MAX_FRAME_BYTES))
@pytest.mark.parametrize(
    "declared",
    [0x7FFF_FFFF, MAX_FRAME_BYTES + 1, -0x8000_0000, -1],
    ids=["2GiB", "limit_plus_one", "negative_min", "negative_one"],
)
def test_frame_over_the_size_limit_is_refused_without_reading_it(broker, bystanders, declared):
    with RawConnection(broker.bootstrap) as conn:
        conn.send_raw(struct.pack(">ihhi", declared, API_METADATA, 1, 7) + b"\x00" * 16)
        conn.expect_closed()
    bystanders.assert_unaffected()


HOSTILE_COUNT = 0x7FFF_FFFF


@pytest.mark.parametrize("api", ["metadata_v1_topics", "produce_v3_topics"])
def test_hostile_array_count_gets_an_error_or_a_closed_connection(broker, bystanders, api):
    # The array count claims 2^31-1 entries; nothing follows it.
    if api == "metadata_v1_topics":
        api_key, version, body = API_METADATA, 1, struct.pack(">i", HOSTILE_COUNT)
    else:
        api_key, version = API_PRODUCE, 3
        body = nullable_string(None) + struct.pack(">hii", 1, 10_000, HOSTILE_COUNT)
    with RawConnection(broker.bootstrap) as conn:
        correlation_id = conn.send(api_key, version, body)
        bystanders.traffic.wait_for_progress()
        outcome = conn.closed_or_answered()
        if outcome != "closed":
            assert outcome[0] == correlation_id
    bystanders.assert_unaffected()


def test_unknown_api_key_is_answered_or_closes_only_its_connection(broker, bystanders):
    with RawConnection(broker.bootstrap) as conn:
        correlation_id = conn.send(9999, 0, b"")
        outcome = conn.closed_or_answered()
        if outcome != "closed":
            assert outcome[0] == correlation_id
    bystanders.assert_unaffected()


def test_api_versions_above_supported_answers_unsupported_version_in_a_v0_body(broker, bystanders):
    with RawConnection(broker.bootstrap) as conn:
        # Version 99 uses the flexible request header v2 (an empty tagged-field
        # section after client_id), as clients send ApiVersions v3 and later.
        header = struct.pack(">hhi", API_VERSIONS, 99, 77) + nullable_string("future") + b"\x00"
        body = b"\x07future\x021\x00"
        conn.send_raw(struct.pack(">i", len(header + body)) + header + body)
        correlation_id, answer = conn.read_response()
        assert correlation_id == 77
        error, keys = parse_api_versions_v0(Reader(answer))
        assert error == UNSUPPORTED_VERSION
        assert API_VERSIONS in keys, "the answer must say which ApiVersions versions to use"
        low, high = keys[API_VERSIONS]
        assert low == 0 and high >= 3, keys[API_VERSIONS]
        # The client retries with a supported version on the same connection.
        error, keys = conn.api_versions(0)
        assert error == 0 and API_PRODUCE in keys and API_METADATA in keys
    bystanders.assert_unaffected()


def test_unsupported_version_of_another_api_is_refused(broker, bystanders):
    with RawConnection(broker.bootstrap) as conn:
        correlation_id = conn.send(API_METADATA, 99, struct.pack(">i", -1))
        outcome = conn.closed_or_answered()
        if outcome != "closed":
            assert outcome[0] == correlation_id
    bystanders.assert_unaffected()


def corrupt_payload_byte(batch):
    batch[-1] ^= 0xFF


def corrupt_crc_field(batch):
    # RecordBatch v2: baseOffset(8) batchLength(4) partitionLeaderEpoch(4) magic(1) crc(4)
    batch[17] ^= 0x01


@pytest.mark.parametrize("corrupt", [corrupt_payload_byte, corrupt_crc_field],
                         ids=["payload_byte_flipped", "crc_field_changed"])
def test_batch_with_wrong_crc_is_rejected_with_corrupt_message(broker, bystanders, unique, corrupt):
    topic = unique("crc")
    create_topic(broker.bootstrap, topic, 2)
    good = record_batch([b"good-0", b"good-1"])
    bad = record_batch([b"bad-0", b"bad-1"])
    corrupt(bad)
    with RawConnection(broker.bootstrap) as conn:
        answer = conn.produce(topic, {0: good, 1: bad})
    assert answer[1][0] == CORRUPT_MESSAGE, answer
    # The valid batch in the same request is stored; the corrupt one is not.
    assert answer[0] == (NONE, 0), answer
    assert high_watermark(broker.bootstrap, topic, 1) == (0, 0)
    stored = consume_from(broker.bootstrap, topic, {0: 0}, 2)
    assert [m.value() for m in stored] == [b"good-0", b"good-1"]
    bystanders.assert_unaffected()


def test_batch_above_max_message_bytes_is_rejected_with_message_too_large(
    broker, bystanders, unique
):
    topic = unique("too-large")
    create_topic(broker.bootstrap, topic, 1, {"max.message.bytes": "1024"})
    fits = record_batch([b"f" * 500])
    too_large = record_batch([b"x" * 3000])
    assert len(fits) < 1024 < len(too_large)
    with RawConnection(broker.bootstrap) as conn:
        assert conn.produce(topic, {0: too_large}) == {0: (MESSAGE_TOO_LARGE, -1)}
        assert conn.produce(topic, {0: fits}) == {0: (NONE, 0)}
    assert high_watermark(broker.bootstrap, topic, 0) == (0, 1)
    [stored] = consume_from(broker.bootstrap, topic, {0: 0}, 1)
    assert stored.value() == b"f" * 500
    bystanders.assert_unaffected()


@pytest.mark.herald_args("--auto-create-topics", "false")
def test_produce_to_unknown_topic_with_auto_create_off_fails_with_unknown_topic(
    broker, bystanders, unique
):
    # Apache Kafka never creates a topic on Produce (only on Metadata), so it
    # answers the same whatever auto.create.topics.enable says.
    topic = unique("never-created")
    with RawConnection(broker.bootstrap) as conn:
        answer = conn.produce(topic, {0: record_batch([b"lost"])})
    assert answer == {0: (UNKNOWN_TOPIC_OR_PARTITION, -1)}
    admin = admin_client(broker.bootstrap)
    assert topic not in admin.list_topics(timeout=10).topics
    bystanders.assert_unaffected()


def test_produce_to_a_partition_that_does_not_exist_fails_with_unknown_partition(
    broker, bystanders, unique
):
    topic = unique("two-parts")
    create_topic(broker.bootstrap, topic, 2)
    with RawConnection(broker.bootstrap) as conn:
        answer = conn.produce(topic, {7: record_batch([b"nowhere"])})
    assert answer == {7: (UNKNOWN_TOPIC_OR_PARTITION, -1)}
    bystanders.assert_unaffected()


def test_request_with_a_short_topic_name_field_is_refused(broker, bystanders):
    # The topic name claims 300 bytes but the frame ends after 3.
    with RawConnection(broker.bootstrap) as conn:
        body = struct.pack(">i", 1) + struct.pack(">h", 300) + b"abc"
        correlation_id = conn.send(API_METADATA, 1, body)
        outcome = conn.closed_or_answered()
        if outcome != "closed":
            assert outcome[0] == correlation_id
    bystanders.assert_unaffected()

