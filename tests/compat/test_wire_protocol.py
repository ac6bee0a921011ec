"""Connection-level protocol rules that every client relies on, checked over a
raw socket: pipelined requests are answered in order, and acks=0 produce
requests get no answer at all."""

import struct

from clients import consume_from, create_topic, watermarks
from kafka_wire import (
    API_METADATA,
    API_PRODUCE,
    API_VERSIONS,
    NONE,
    RawConnection,
    Reader,
    metadata_v1_body,
    nullable_string,
    parse_produce_v3,
    record_batch,
    string,
)


def produce_v3_body(topic, partition, batch, acks):
    return (
        nullable_string(None)
        + struct.pack(">hi", acks, 10_000)
        + struct.pack(">i", 1)
        + string(topic)
        + struct.pack(">iii", 1, partition, len(batch))
        + bytes(batch)
    )


def test_pipelined_requests_are_answered_in_request_order(broker, unique):
    topic = unique("pipeline")
    create_topic(broker.bootstrap, topic, 1)
    kinds = ["versions", "metadata", "produce"] * 10
    with RawConnection(broker.bootstrap) as conn:
        sent = []
        produced = 0
        for kind in kinds:  # all written before any answer is read
            if kind == "versions":
                sent.append((kind, conn.send(API_VERSIONS, 0, b"")))
            elif kind == "metadata":
                sent.append((kind, conn.send(API_METADATA, 1, metadata_v1_body([topic]))))
            else:
                batch = record_batch([b"pipelined-%d" % produced])
                produced += 1
                sent.append((kind, conn.send(API_PRODUCE, 3, produce_v3_body(topic, 0, batch, 1))))
        next_offset = 0
        for kind, correlation_id in sent:
            got, body = conn.read_response()
            assert got == correlation_id, f"answer {got} came where {correlation_id} was due"
            if kind == "produce":
                assert parse_produce_v3(Reader(body), topic) == {0: (NONE, next_offset)}
                next_offset += 1
    values = [m.value() for m in consume_from(broker.bootstrap, topic, {0: 0}, produced)]
    assert values == [b"pipelined-%d" % i for i in range(produced)]


def test_produce_with_acks_zero_gets_no_answer_but_is_stored(broker, unique):
    topic = unique("acks0-raw")
    create_topic(broker.bootstrap, topic, 1)
    with RawConnection(broker.bootstrap) as conn:
        conn.send(API_PRODUCE, 3, produce_v3_body(topic, 0, record_batch([b"fire"]), 0))
        conn.send(API_PRODUCE, 3, produce_v3_body(topic, 0, record_batch([b"forget"]), 0))
        versions = conn.send(API_VERSIONS, 0, b"")
        got, _ = conn.read_response()
        assert got == versions, "an acks=0 produce request was answered"
    assert watermarks(broker.bootstrap, topic, 1) == {0: (0, 2)}
    assert [m.value() for m in consume_from(broker.bootstrap, topic, {0: 0}, 2)] == [
        b"fire",
        b"forget",
    ]
