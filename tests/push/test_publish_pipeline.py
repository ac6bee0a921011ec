"""Publishes a client sends without waiting for each answer: herald keeps
several in flight per session, and still stores them in the order sent and
answers them in that order, with refused ones answered in their place.

The broker fsyncs every append here, so each publish has a durability wait
that the next ones overlap; a Kafka consumer reads the records back."""

import queue

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafka_side import create_topic
from push_client import Session, channel

COUNT = 3000
REFUSED_AT = 1500


def read_back(bootstrap, topic, count):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    try:
        for _ in range(120):
            if len(values) >= count:
                break
            values.extend(m.value() for m in consumer.consume(1000, 0.5) if m.error() is None)
    finally:
        consumer.close()
    return values


def check_answers(answers, pb, expected_ids, refused_ids=()):
    """Answers come in request order; accepted ones have increasing
    offsets on partition 0; refused ones say why."""
    assert [a.request_id for a in answers] == expected_ids, "answers in the order the publishes were sent"
    offsets = []
    for a in answers:
        if a.request_id in refused_ids:
            assert a.HasField("error") and a.error.code == pb.ERROR_CODE_INVALID_REQUEST, a
            assert "partition" in a.error.message
        else:
            assert not a.HasField("error"), a.error
            assert a.partition == 0
            offsets.append(a.offset)
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), "stored in the order sent"
    return offsets


@pytest.mark.herald_args("--flush", "every-append")
def test_a_session_s_pipelined_publishes_are_stored_and_answered_in_the_order_sent(herald, proto):
    pb = proto.pb
    create_topic(herald.bootstrap, "pipelined", 1)
    session = Session(proto, herald.push_address)
    sent = []
    for i in range(COUNT):
        partition = 99 if i == REFUSED_AT else 0
        value = b"p%05d" % i
        session.send(publish=pb.PublishRequest(
            request_id=i + 1, topic="pipelined", key=b"k%d" % (i % 7), value=value, partition=partition))
        if i != REFUSED_AT:
            sent.append(value)
    session.wait_for(lambda s: len(s.of_kind("published")) >= COUNT, what=f"{COUNT} answers")
    answers = session.of_kind("published")
    offsets = check_answers(answers, pb, list(range(1, COUNT + 1)), {REFUSED_AT + 1})
    assert offsets == list(range(COUNT - 1))
    session.close()
    assert read_back(herald.bootstrap, "pipelined", len(sent)) == sent


@pytest.mark.herald_args("--flush", "every-append")
def test_a_publish_stream_is_answered_in_order_even_after_the_client_ends_it(herald, proto):
    pb = proto.pb
    create_topic(herald.bootstrap, "streamed", 1)
    values = [b"s%05d" % i for i in range(COUNT)]
    requests = queue.Queue()
    for i, value in enumerate(values):
        requests.put(pb.PublishRequest(request_id=i + 1, topic="streamed", value=value, partition=0))
    requests.put(None)
    ch = channel(herald.push_address)
    try:
        stub = proto.rpc.HeraldStub(ch)
        # The request stream ends at once after the last publish: every
        # one sent is still answered.
        answers = list(stub.PublishStream(iter(requests.get, None), timeout=120))
    finally:
        ch.close()
    offsets = check_answers(answers, pb, list(range(1, COUNT + 1)))
    assert offsets == list(range(COUNT))
    assert read_back(herald.bootstrap, "streamed", COUNT) == values
