"""The flow-control gate on a real broker: with `--flow-control` on, a
produce waits for room under the broker-wide limit on records in flight.
confluent-kafka producing flat out still gets every record delivered, in
order, with no error (a gated client is slowed, never refused), and the
broker's metrics show the controller measuring windows and moving the
limit. A fixed limit of one record still serves everyone, one request at
a time. The admin API switches the gate's mode and limit while a producer
runs flat out, and the producer loses nothing."""

import json
import re
import threading
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import KAFKA_LIB

pytestmark = pytest.mark.skipif(bool(KAFKA_LIB), reason="herald's own flow control")

RECORDS = 200_000


def admin_port(broker):
    found = re.findall(r"admin listener ready on 127\.0\.0\.1:(\d+)", broker.log_tail())
    assert found, broker.log_tail()
    return int(found[-1])


def metric(broker, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin_port(broker)}/metrics", timeout=10) \
        .read().decode()
    found = re.search(rf"^{name}(?:_total)? (\S+)$", text, re.MULTILINE)
    assert found, f"{name} missing from /metrics"
    return float(found[1])


def produce_all(broker, topic, delivered=None):
    """Produces RECORDS flat out; `delivered`, a list, gets one entry per
    record acknowledged (appending is atomic under the GIL)."""
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2,
                         "batch.size": 4096, "queue.buffering.max.messages": 200_000})

    def on_delivery(err, _message):
        if err:
            errors.append(err)
        elif delivered is not None:
            delivered.append(1)

    for i in range(RECORDS):
        producer.produce(topic, str(i).encode(), on_delivery=on_delivery)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    assert errors == [], errors[:3]


def consume_all(broker, topic):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + 60
    while len(values) < RECORDS and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            assert message.error() is None, message.error()
            values.append(int(message.value()))
    consumer.close()
    return values


@pytest.mark.herald_args("--flow-control", "adaptive", "--flow-limit", "200")
def test_an_adaptive_limit_slows_a_producer_without_losing_a_record(broker, unique):
    topic = unique("flow")
    produce_all(broker, topic)
    assert consume_all(broker, topic) == list(range(RECORDS))
    # 200,000 records make windows of 10,000 records and at least 50 ms:
    # the controller decided each time, and raised the limit from 200 by
    # its delta while it warmed up.
    assert metric(broker, "herald_kafka_flow_windows") >= 3
    assert metric(broker, "herald_kafka_flow_limit_records") > 200
    assert metric(broker, "herald_kafka_flow_throughput_records_per_second") > 0


@pytest.mark.herald_args("--flow-control", "fixed", "--flow-limit", "1")
def test_a_limit_of_one_still_serves_every_producer(broker, unique):
    topic = unique("flow-one")
    produce_all(broker, topic)
    assert consume_all(broker, topic) == list(range(RECORDS))
    assert metric(broker, "herald_kafka_flow_limit_records") == 1


def flow_api(broker, method, body=None):
    """(status, JSON answer) of /v1/flow-control."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{admin_port(broker)}/v1/flow-control", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.herald_args("--flow-control", "fixed", "--flow-limit", "1")
def test_the_gate_is_switched_while_a_producer_runs_without_losing_a_record(broker, unique):
    assert flow_api(broker, "GET") == (200, {
        "mode": "fixed", "limit": 1, "in_flight": 0, "resumed": False,
        "min_limit": 100, "max_limit": 1_000_000, "delta": 100})
    topic = unique("flow-switch")
    failures, delivered = [], []

    def produce():
        try:
            produce_all(broker, topic, delivered)
        except Exception as failure:  # noqa: BLE001 - reported by the test's thread
            failures.append(failure)

    producing = threading.Thread(target=produce)
    producing.start()
    # Each switch must land while records are still being produced and
    # after some were acknowledged under the setup before it.
    for change, limit in [({"mode": "adaptive", "limit": 300}, 300), ({"mode": "off"}, None),
                          ({"mode": "gradient", "limit": 150}, 150),
                          ({"mode": "adaptive", "limit": 5_000, "resume": True}, "resumed"),
                          ({"mode": "fixed", "limit": 2}, 2)]:
        before = len(delivered)
        deadline = time.monotonic() + 30
        while len(delivered) < before + 2_000 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(delivered) >= before + 2_000, f"nothing acknowledged before switching to {change}"
        assert len(delivered) < RECORDS and producing.is_alive(), \
            f"the producer finished before switching to {change}"
        status, view = flow_api(broker, "PUT", change)
        assert status == 200, view
        if limit == "resumed":
            # The adaptive controller carries on from where it was, not
            # from the 5,000 sent for a broker that no longer had it.
            assert view["resumed"] is True and view["mode"] == "adaptive", view
            assert 100 <= view["limit"] < 5_000, view
        else:
            assert (view["mode"], view["limit"], view["resumed"]) == (change["mode"], limit, False)
    producing.join(180)
    assert not producing.is_alive() and failures == [], failures
    assert consume_all(broker, topic) == list(range(RECORDS))
    assert metric(broker, "herald_kafka_flow_limit_records") == 2

    # Refused changes say why and leave the gate as it was.
    for change, words in [({"mode": "fast"}, "unknown flow-control mode"),
                          ({"mode": "fixed", "limit": 0}, "at least 1"),
                          ({"mode": "fixed", "speed": 1}, "invalid JSON")]:
        status, answer = flow_api(broker, "PUT", change)
        assert status == 400 and words in answer["error"], (change, answer)
    status, view = flow_api(broker, "GET")
    assert (status, view["mode"], view["limit"]) == (200, "fixed", 2)
    assert flow_api(broker, "DELETE")[0] == 405
