"""Priority on the push path: a subscriber flooded with normal records
(published by confluent-kafka) that it is not reading receives a
high-priority record ahead of the normal backlog the broker holds for it,
and the normal records still arrive complete and in order."""

import threading
import time

import pytest

from kafka_side import create_topic, produce
from push_client import Session


@pytest.mark.herald_args("--push-queue-bytes", "65536")
def test_a_high_priority_record_overtakes_a_normal_flood(herald, proto):
    create_topic(herald.bootstrap, "priority", 1)
    gate = threading.Event()
    gate.set()
    # Without bandwidth-delay probing, grpcio keeps HTTP/2's 64 KiB window
    # instead of growing it to megabytes: a client that stops reading then
    # leaves the backlog with the broker, as a slow client on a real
    # network would.
    s = Session(proto, herald.push_address, gate=gate, options=[("grpc.http2.bdp_probe", 0)])
    s.subscribe(1, "priority", pattern="p.>")
    s.wait_for(lambda s: s.of_kind("subscribed"))
    gate.clear()  # stop reading: the flood backs up into the broker
    flood = [(b"p.%d" % (i % 3), b"n-%05d-" % i + b"x" * 1000) for i in range(6000)]
    produce(herald.bootstrap, "priority", flood)
    time.sleep(1.0)
    produce(herald.bootstrap, "priority", [(b"p.urgent", b"URGENT", [("herald.priority", b"high")])])
    time.sleep(0.5)
    gate.set()
    s.wait_for(lambda s: len(s.deliveries) >= len(flood) + 1, timeout=120, what="the flood and the urgent record")
    s.drain_quiet()
    values = [v for _s, _p, _o, _k, v in s.deliveries]
    assert values.count(b"URGENT") == 1
    position = values.index(b"URGENT")
    # What was already in flight (socket buffers, HTTP/2 windows, the
    # client's queue) comes first; the backlog the broker still held does
    # not. Without priority it would arrive last, after all 6,000.
    assert position < len(flood) // 4, f"the urgent record arrived {position}th of {len(values)}"
    normal = [v for v in values if v != b"URGENT"]
    assert normal == [v for _k, v in flood], "the normal records: complete, in order, once"
    urgent = [d for d in s.deliveries if d[4] == b"URGENT"]
    s.close()
    assert urgent and urgent[0][2] == len(flood)
