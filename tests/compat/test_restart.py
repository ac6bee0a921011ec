"""Restarting herald on the same data directory: after a clean stop (SIGTERM)
everything is still there and offsets continue; after a crash (SIGKILL) with
`--flush every-append`, every acknowledged message is still there."""

import signal
import threading
import time

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

from clients import (
    CLIENT_TIMEOUT_S,
    DeliveryLog,
    assert_messages_match,
    consume_from,
    create_topic,
    expected_message,
    index_of,
    produce_indexed,
    producer,
    watermarks,
)

pytestmark = pytest.mark.restarts_broker


def topic_ids(admin, topics):
    described = admin.describe_topics(TopicCollection(list(topics)))
    return {t: str(f.result(timeout=CLIENT_TIMEOUT_S).topic_id) for t, f in described.items()}


def overrides(admin, topic):
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=CLIENT_TIMEOUT_S)
    return {
        name: entry.value
        for name, entry in entries.items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }


def test_sigterm_restart_keeps_messages_topic_ids_and_configs_and_offsets_continue(broker, unique):
    main, other = unique("restart-main"), unique("restart-other")
    config = {"retention.ms": "86400000", "segment.bytes": "1048576", "max.message.bytes": "1048576"}
    admin = create_topic(broker.bootstrap, main, 2, config)
    create_topic(broker.bootstrap, other, 1)
    base_ts = int(time.time() * 1000) - 120_000
    count, more = 20_000, 1_000  # about 2 MB a partition: more than one segment
    log = produce_indexed(producer(broker.bootstrap, acks="all"),
                          main, "restart", count, base_ts)
    ids = topic_ids(admin, [main, other])
    marks = watermarks(broker.bootstrap, main, 2)
    assert overrides(admin, main) == config

    assert broker.restart(signal.SIGTERM) == 0, "SIGTERM must end herald with exit code 0"

    assert topic_ids(admin, [main, other]) == ids
    assert overrides(admin, main) == config
    assert watermarks(broker.bootstrap, main, 2) == marks
    assert watermarks(broker.bootstrap, other, 1) == {0: (0, 0)}
    consumed = consume_from(broker.bootstrap, main, {0: 0, 1: 0}, count)
    assert_messages_match(consumed, log, "restart", base_ts, range(count))

    # New messages get the offsets right after the old ones.
    later = produce_indexed(producer(broker.bootstrap, acks="all"), main, "restart", more, base_ts,
                            start=count)
    for p in range(2):
        new_offsets = [later.offset[i] for i in range(count, count + more) if later.partition[i] == p]
        old_high = marks[p][1]
        assert new_offsets == list(range(old_high, old_high + len(new_offsets))), (
            f"partition {p}: after restart offsets start at {new_offsets[:1]}, expected {old_high}"
        )
    for i in range(count):
        later.partition[i], later.offset[i] = log.partition[i], log.offset[i]
    consumed = consume_from(broker.bootstrap, main, {0: 0, 1: 0}, count + more)
    assert_messages_match(consumed, later, "restart", base_ts, range(count + more))


class BackgroundProducer:
    """Produces indexed messages with acks=all in a thread until stopped (or a
    bound is reached), recording every delivery report."""

    MAX_MESSAGES = 500_000

    def __init__(self, bootstrap, topic, base_ts):
        self.bootstrap, self.topic, self.base_ts = bootstrap, topic, base_ts
        self.log = DeliveryLog(self.MAX_MESSAGES)
        self.acked = 0
        self.sent = 0
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, i):
        record = self.log.callback(i)

        def on_delivery(err, msg):
            record(err, msg)
            if err is None:
                with self.cond:
                    self.acked += 1
                    self.cond.notify_all()

        return on_delivery

    def _run(self):
        # After the broker's SIGKILL the producer ends once every pending
        # message has failed with this timeout: short, so the test does not
        # wait on it (acknowledgements before the kill take well under a
        # second; a message that timed out before it would count as failed,
        # which the checks allow).
        prod = producer(self.bootstrap, acks="all", linger_ms=1, message_timeout_ms=5_000,
                        retries=2)
        i = 0
        while not self.stop.is_set() and i < self.MAX_MESSAGES:
            m = expected_message("crash", i, self.base_ts)
            try:
                prod.produce(self.topic, key=m.key, value=m.value, headers=m.headers,
                             timestamp=m.timestamp_ms, on_delivery=self._on_delivery(i))
                i += 1
                with self.cond:
                    self.sent = i
                    self.cond.notify_all()
            except BufferError:
                pass
            prod.poll(0.001 if i % 100 == 0 else 0)
        prod.flush(60)

    def wait_acked(self, n):
        with self.cond:
            assert self.cond.wait_for(lambda: self.acked >= n, timeout=120), (
                f"only {self.acked} messages acknowledged"
            )

    def wait_sent(self, n):
        with self.cond:
            assert self.cond.wait_for(lambda: self.sent >= n, timeout=60), (
                f"only {self.sent} messages handed to the producer"
            )


@pytest.mark.herald_args("--flush", "every-append")
def test_sigkill_during_acks_all_production_loses_no_acknowledged_message(broker, unique):
    topic = unique("crash")
    admin = create_topic(broker.bootstrap, topic, 2)
    ids = topic_ids(admin, [topic])
    base_ts = int(time.time() * 1000) - 120_000

    background = BackgroundProducer(broker.bootstrap, topic, base_ts)
    background.thread.start()
    background.wait_acked(5_000)
    broker.kill()
    # The producer keeps going against the dead broker for a while.
    background.wait_sent(background.sent + 2_000)
    background.stop.set()
    background.thread.join(timeout=120)
    assert not background.thread.is_alive(), "producer did not finish"

    log = background.log
    acked = log.acked()
    assert len(acked) >= 5_000
    print(f"sent {background.sent}, acknowledged {len(acked)}, failed {len(log.errors)}, "
          f"{background.sent - len(acked) - len(log.errors)} without a report")
    assert len(acked) + len(log.errors) == background.sent, "some messages got no delivery report"

    broker.start()
    assert topic_ids(admin, [topic]) == ids
    marks = watermarks(broker.bootstrap, topic, 2)
    for p in range(2):
        acked_here = [log.offset[i] for i in acked if log.partition[i] == p]
        if acked_here:
            assert marks[p][1] > max(acked_here), (
                f"partition {p}: high watermark {marks[p][1]} below acknowledged offset "
                f"{max(acked_here)}"
            )
    total = sum(high for _, high in marks.values())
    consumed = consume_from(broker.bootstrap, topic, {0: 0, 1: 0}, total)

    at = {(m.partition(), m.offset()): m for m in consumed}
    for i in acked:
        m = at.get((log.partition[i], log.offset[i]))
        assert m is not None, f"acknowledged message {i} at {log.partition[i]}/{log.offset[i]} lost"
        assert index_of(m) == i, f"{log.partition[i]}/{log.offset[i]} holds {index_of(m)}, not {i}"
        want = expected_message("crash", i, base_ts)
        assert (m.key(), m.value(), m.headers()) == (want.key, want.value, want.headers)
    for p in range(2):
        last_acked = max((log.offset[i] for i in acked if log.partition[i] == p), default=-1)
        prefix = [index_of(m) for m in consumed if m.partition() == p and m.offset() <= last_acked]
        assert len(prefix) == len(set(prefix)), f"partition {p}: duplicates in the acknowledged prefix"

    # The restarted broker takes new writes after what survived.
    more = produce_indexed(producer(broker.bootstrap, acks="all"), topic, "after", 10, base_ts,
                           partition=0)
    assert more.offset == list(range(marks[0][1], marks[0][1] + 10))

