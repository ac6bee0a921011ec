"""Kafka's other client quotas, set with Kafka's own `kafka-configs.sh` and
enforced:

- `request_percentage` (per client id): the time the broker spends on a
  client's requests is charged to it, and a client over its share is not
  read from until the share has paid for it. A client limited to 0.1% of
  a thread takes many times as long per request as an unlimited one for
  the same requests, and the broker's metrics count the pauses. The
  limited client sends 250 Metadata requests (it needs seconds for them),
  the unlimited one 1000; with HERALD_COMPAT_LONG=1 both send 1000.
- `connection_creation_rate` (per IP, here the default entity): the
  connections past the rate are held unread for the throttle time and
  then closed, as Kafka closes them; the ones within it are served.
- `controller_mutation_rate` (per client id): librdkafka's CreateTopics
  (a version before 6, which Kafka throttles rather than refuses) is
  answered with a throttle time for the partitions it created past the
  rate, and librdkafka's throttle callback reports it.
"""

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import KAFKA_LIB, LONG
from kafka_wire import Closed, RawConnection, metadata_v1_body, request
from test_flow_control import metric
from test_quotas import configs

pytestmark = pytest.mark.skipif(bool(KAFKA_LIB), reason="herald's own enforcement")

METADATA = 3
# The unlimited client's requests take milliseconds in all: many, so that
# its time per request is not a scheduler's hiccup. The limited one's take
# a thousand times their handling time each: fewer suffice, and save
# seconds.
FREE_REQUESTS = 1000
BUSY_REQUESTS = 1000 if LONG else 250


def timed_metadata(broker, client_id, count):
    """Seconds `count` Metadata requests of `client_id` take, one after
    another on one connection."""
    with RawConnection(broker.bootstrap) as conn:
        started = time.monotonic()
        for correlation_id in range(1, count + 1):
            conn.send_raw(request(METADATA, 1, correlation_id, metadata_v1_body([]),
                                  client_id=client_id))
            got, _ = conn.read_response()
            assert got == correlation_id
        return time.monotonic() - started


def test_request_percentage_holds_a_busy_client_to_its_share(broker, unique):
    busy, free = unique("busy"), unique("free")
    code, out = configs(broker, "--alter", "--entity-type", "clients", "--entity-name", busy,
                        "--add-config", "request_percentage=0.1")
    assert code == 0, out
    free_s = timed_metadata(broker, free, FREE_REQUESTS)
    busy_s = timed_metadata(broker, busy, BUSY_REQUESTS)
    pauses = metric(broker, "herald_kafka_quota_pauses")
    print(f"Metadata requests: {FREE_REQUESTS} in {free_s:.2f} s unlimited, {BUSY_REQUESTS} "
          f"in {busy_s:.2f} s at 0.1% of a thread; {pauses:.0f} pauses")
    # 0.1% of a thread is 1 ms of handling per second.
    assert pauses > 0
    free_each, busy_each = free_s / FREE_REQUESTS, busy_s / BUSY_REQUESTS
    assert busy_each > 5 * free_each, (busy_each, free_each)


def answered_or_closed(conn):
    try:
        error, _ = conn.api_versions()
        return "answered" if error == 0 else f"error {error}"
    except Closed:
        return "closed"


def test_connection_creation_rate_closes_connections_past_it(broker):
    code, out = configs(broker, "--alter", "--entity-type", "ips", "--entity-default",
                        "--add-config", "connection_creation_rate=3")
    assert code == 0, out
    # kafka-configs' own connections came before the quota: a fresh second.
    time.sleep(1.5)
    connections = [RawConnection(broker.bootstrap) for _ in range(10)]
    try:
        outcomes = [answered_or_closed(conn) for conn in connections]
    finally:
        for conn in connections:
            conn.close()
    print(f"ten connections at once at 3 per second: {outcomes}")
    assert set(outcomes) <= {"answered", "closed"}, outcomes
    # The bucket holds one second of the rate; a little refills while the
    # ten are opened and asked.
    assert 3 <= outcomes.count("answered") <= 5, outcomes
    time.sleep(1.5)
    with RawConnection(broker.bootstrap) as conn:
        assert answered_or_closed(conn) == "answered"


def test_controller_mutation_rate_throttles_creations_past_it(broker, unique):
    creator = unique("creator")
    code, out = configs(broker, "--alter", "--entity-type", "clients", "--entity-name", creator,
                        "--add-config", "controller_mutation_rate=2")
    assert code == 0, out
    throttles = []
    client = AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": creator,
                          "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    names = [f"{unique('mutated')}-{i}" for i in range(8)]
    futures = client.create_topics([NewTopic(n, num_partitions=1, replication_factor=1)
                                    for n in names])
    for name in names:
        futures[name].result(timeout=30)
    deadline = time.monotonic() + 10
    while not throttles and time.monotonic() < deadline:
        client.poll(0.2)
    print(f"throttle callbacks: {throttles}")
    # Eight partitions at 2 per second from an empty bucket owe 4 s.
    assert throttles and max(throttles) >= 3.0, throttles
