"""Clients that must not notice when another connection misbehaves.

`Bystanders` sets up, before a test sends bad input:
- stored messages: a topic written and acknowledged beforehand, read back
  byte for byte afterwards;
- an idle raw connection that must still be open and answer afterwards;
- healthy traffic: a confluent-kafka producer and consumer on a topic of
  their own, in a background thread, producing and consuming all along.
"""

import threading
import time

from confluent_kafka import TopicPartition

from clients import (
    assert_messages_match,
    consume_from,
    consumer,
    create_topic,
    produce_indexed,
    producer,
)
from kafka_wire import RawConnection

STORED_COUNT = 1_000
TRAFFIC_MAX_MESSAGES = 100_000
TRAFFIC_MAX_SECONDS = 300
PROGRESS_TIMEOUT_S = 30


class HealthyTraffic:
    """Produces batches of 10 messages (flushing each) and consumes them, in a
    thread, until stopped or a bound on count or time is reached."""

    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap = bootstrap
        self.topic = topic
        self.acked = []  # offsets, in delivery order
        self.consumed = []  # (offset, value)
        self.errors = []
        self.cond = threading.Condition()
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="healthy-traffic", daemon=True)

    def start(self):
        create_topic(self.bootstrap, self.topic, 1)
        self.thread.start()
        self.wait_for_progress()

    def _on_delivery(self, err, msg):
        with self.cond:
            if err is not None:
                self.errors.append(f"delivery: {err}")
            else:
                self.acked.append(msg.offset())
            self.cond.notify_all()

    def _run(self):
        prod = producer(self.bootstrap, linger_ms=0, message_timeout_ms=30000)
        cons = consumer(self.bootstrap)
        cons.assign([TopicPartition(self.topic, 0, 0)])
        deadline = time.monotonic() + TRAFFIC_MAX_SECONDS
        sent = 0
        try:
            while (
                not self.stop_event.is_set()
                and sent < TRAFFIC_MAX_MESSAGES
                and time.monotonic() < deadline
            ):
                for _ in range(10):
                    prod.produce(self.topic, value=b"healthy-%d" % sent, on_delivery=self._on_delivery)
                    sent += 1
                if prod.flush(30) != 0:
                    with self.cond:
                        self.errors.append("flush left messages unacknowledged")
                        self.cond.notify_all()
                    return
                for msg in cons.consume(num_messages=1000, timeout=0.05):
                    with self.cond:
                        if msg.error() is not None:
                            self.errors.append(f"consume: {msg.error()}")
                        else:
                            self.consumed.append((msg.offset(), msg.value()))
                        self.cond.notify_all()
        except Exception as e:  # reported by check(), never lost
            with self.cond:
                self.errors.append(f"traffic thread: {e!r}")
                self.cond.notify_all()
        finally:
            prod.flush(30)
            cons.close()

    def wait_for_progress(self, more=30):
        """Blocks until `more` further messages are acknowledged and consumed."""
        with self.cond:
            target_acked = len(self.acked) + more
            target_consumed = len(self.consumed) + more
            ok = self.cond.wait_for(
                lambda: self.errors
                or (len(self.acked) >= target_acked and len(self.consumed) >= target_consumed),
                timeout=PROGRESS_TIMEOUT_S,
            )
            assert ok, (
                f"healthy client stalled: {len(self.acked)} acked, {len(self.consumed)} consumed"
            )
            assert not self.errors, f"healthy client saw errors: {self.errors[:5]}"

    def stop_and_check(self):
        self.stop_event.set()
        self.thread.join(timeout=PROGRESS_TIMEOUT_S * 2)
        assert not self.thread.is_alive(), "healthy traffic thread did not stop"
        assert not self.errors, f"healthy client saw errors: {self.errors[:5]}"
        assert self.acked == list(range(len(self.acked))), "acknowledged offsets not dense"
        # Everything acknowledged is readable, in order, exactly once.
        tail = consume_from(self.bootstrap, self.topic, {0: len(self.consumed)},
                            len(self.acked) - len(self.consumed))
        everything = self.consumed + [(m.offset(), m.value()) for m in tail]
        assert everything == [(i, b"healthy-%d" % i) for i in range(len(self.acked))]


class Bystanders:
    def __init__(self, broker, unique):
        self.broker = broker
        self.bootstrap = broker.bootstrap
        self.stored_topic = unique("stored")
        self.base_ts = int(time.time() * 1000) - 60_000
        create_topic(self.bootstrap, self.stored_topic, 3)
        self.stored_log = produce_indexed(
            producer(self.bootstrap), self.stored_topic, "stored", STORED_COUNT, self.base_ts
        )
        self.idle = RawConnection(self.bootstrap)
        error, keys = self.idle.api_versions()
        assert error == 0 and 18 in keys
        self.traffic = HealthyTraffic(self.bootstrap, unique("healthy"))
        self.traffic.start()

    def assert_unaffected(self):
        """Call after the bad input: everyone else was served during and after it."""
        assert self.broker.alive(), f"broker died:\n{self.broker.log_tail()}"
        self.traffic.wait_for_progress()
        error, keys = self.idle.api_versions()
        assert error == 0 and 18 in keys, "the idle connection is no longer served"
        self.traffic.stop_and_check()
        consumed = consume_from(
            self.bootstrap, self.stored_topic, {p: 0 for p in range(3)}, STORED_COUNT
        )
        assert_messages_match(consumed, self.stored_log, "stored", self.base_ts, range(STORED_COUNT))
        cons = consumer(self.bootstrap)
        try:
            for p in range(3):
                low, high = cons.get_watermark_offsets(
                    TopicPartition(self.stored_topic, p), timeout=10, cached=False
                )
                expected = sum(1 for part in self.stored_log.partition if part == p)
                assert (low, high) == (0, expected), f"stored partition {p} changed: {low}..{high}"
        finally:
            cons.close()

    def close(self):
        self.traffic.stop_event.set()
        if self.traffic.thread.ident is not None:
            self.traffic.thread.join(timeout=PROGRESS_TIMEOUT_S * 2)
        self.idle.close()
