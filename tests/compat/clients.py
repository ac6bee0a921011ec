"""confluent-kafka (librdkafka) helpers shared by the scenarios.

Every message a test produces is derived from its index, so what a consumer
reads back can be checked field by field without keeping the messages:
`expected_message(tag, i, base_ts)` is the message number i of a run.
"""

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CLIENT_TIMEOUT_S = 30.0
PAYLOAD = bytes(range(256)) * 4


@dataclass(frozen=True)
class Message:
    key: bytes | None
    value: bytes
    headers: list
    timestamp_ms: int


def expected_message(tag: str, i: int, base_ts: int) -> Message:
    """Message i of run `tag`: keys sometimes null, values of varying size, headers
    with an empty and (sometimes) a null value, timestamps base_ts + i."""
    key = None if i % 17 == 0 else b"key-%d" % (i % 1000)
    start = i % 256
    value = b"%s:%d:" % (tag.encode(), i) + PAYLOAD[start : start + (i * 7) % 300]
    headers = [("i", str(i).encode()), ("tag", tag.encode()), ("empty", b"")]
    if i % 10 == 0:
        headers.append(("null", None))
    return Message(key, value, headers, base_ts + i)


def index_of(msg) -> int:
    """The run index carried in a consumed message's `i` header."""
    for name, value in msg.headers() or []:
        if name == "i":
            return int(value)
    raise AssertionError(f"message at {msg.partition()}/{msg.offset()} has no `i` header")


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config=None):
    """Creates a topic and waits (bounded) until its metadata lists every partition."""
    admin = admin_client(bootstrap)
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=CLIENT_TIMEOUT_S,
    )
    futures[name].result(timeout=CLIENT_TIMEOUT_S)
    wait_for_partitions(bootstrap, admin, name, partitions)
    return admin


def eventually(check, what: str, timeout_s: float = CLIENT_TIMEOUT_S):
    """Polls `check` (bounded) until it returns a true value, which it returns.

    Apache Kafka applies topic changes asynchronously (controller first, then
    the broker's metadata cache), so right after a create or an alter a
    request may still see the old state; herald is expected to pass at once.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not true after {timeout_s:.0f}s (last: {result!r})")
        time.sleep(0.1)


def wait_for_partitions(bootstrap: str, admin: AdminClient, name: str, partitions: int):
    """Waits until metadata lists every partition with a leader, and the leader
    answers offset requests for each (so that produce requests are accepted)."""

    def listed():
        topic = admin.list_topics(topic=name, timeout=10).topics.get(name)
        ready = (
            topic is not None
            and topic.error is None
            and len(topic.partitions) == partitions
            and all(p.leader >= 0 for p in topic.partitions.values())
        )
        return topic if ready else None

    topic = eventually(listed, f"topic {name} listed with {partitions} partitions")
    cons = consumer(bootstrap)
    try:
        for p in range(partitions):
            eventually(lambda: leader_answers(cons, name, p), f"leader of {name}/{p} answers")
    finally:
        cons.close()
    return topic


def leader_answers(cons, topic: str, partition: int) -> bool:
    try:
        cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=5, cached=False)
        return True
    except KafkaException:
        return False


def producer(bootstrap: str, **conf) -> Producer:
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 60000}
    settings.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(settings)


class DeliveryLog:
    """Delivery reports by message index: (partition, offset) or the error."""

    def __init__(self, count: int):
        self.partition = [None] * count
        self.offset = [None] * count
        self.errors = {}

    def callback(self, i):
        def on_delivery(err, msg):
            if err is not None:
                self.errors[i] = err
            else:
                self.partition[i] = msg.partition()
                self.offset[i] = msg.offset()

        return on_delivery

    def acked(self):
        return [i for i, off in enumerate(self.offset) if off is not None]


def produce_indexed(prod: Producer, topic: str, tag: str, count: int, base_ts: int,
                    partition=None, start=0) -> DeliveryLog:
    """Produces messages start..start+count of run `tag` and waits for every report."""
    log = DeliveryLog(start + count)
    for i in range(start, start + count):
        m = expected_message(tag, i, base_ts)
        kwargs = {"key": m.key, "value": m.value, "headers": m.headers,
                  "timestamp": m.timestamp_ms, "on_delivery": log.callback(i)}
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                prod.produce(topic, **kwargs)
                break
            except BufferError:
                prod.poll(0.1)
        prod.poll(0)
    remaining = prod.flush(CLIENT_TIMEOUT_S * 4)
    assert remaining == 0, f"{remaining} messages still unacknowledged after flush"
    assert not log.errors, f"delivery errors: {dict(list(log.errors.items())[:5])}"
    return log


def consumer(bootstrap: str, **conf) -> Consumer:
    settings = {
        "bootstrap.servers": bootstrap,
        # Required by the Python client; the tests only use assign(), never commit.
        "group.id": "compat-assign-only",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
    }
    settings.update({k.replace("_", "."): v for k, v in conf.items()})
    return Consumer(settings)


def consume_from(bootstrap: str, topic: str, start_offsets: dict, expected: int,
                 timeout_s: float = 120.0):
    """Assigns partitions at the given offsets and returns exactly `expected` messages
    (fails on a client error, or if they do not all arrive in time)."""
    cons = consumer(bootstrap)
    try:
        cons.assign([TopicPartition(topic, p, off) for p, off in start_offsets.items()])
        got = []
        deadline = time.monotonic() + timeout_s
        while len(got) < expected:
            assert time.monotonic() < deadline, (
                f"consumed {len(got)} of {expected} messages in {timeout_s:.0f}s"
            )
            # consume() waits for all 10000 or its timeout: a short one, so
            # that the last (partial) batch does not cost a second.
            for msg in cons.consume(num_messages=10000, timeout=0.2):
                err = msg.error()
                assert err is None, f"consumer error: {err}"
                got.append(msg)
        assert len(got) == expected, f"consumed {len(got)} messages, expected {expected}"
        return got
    finally:
        cons.close()


def watermarks(bootstrap: str, topic: str, partitions: int):
    cons = consumer(bootstrap)
    try:
        return {
            p: cons.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            for p in range(partitions)
        }
    finally:
        cons.close()


def assert_messages_match(consumed, log: DeliveryLog, tag: str, base_ts: int, indexes):
    """Each message of `indexes` was consumed exactly once, at the offset its delivery
    report gave, with its key, value, headers and timestamp intact, and each
    partition's messages came in offset order."""
    wanted = set(indexes)
    seen = set()
    last_offset = {}
    for msg in consumed:
        i = index_of(msg)
        assert i in wanted, f"unexpected message {i} at {msg.partition()}/{msg.offset()}"
        assert i not in seen, f"message {i} consumed twice"
        seen.add(i)
        p, off = msg.partition(), msg.offset()
        assert (p, off) == (log.partition[i], log.offset[i]), (
            f"message {i} read at {p}/{off}, delivered at {log.partition[i]}/{log.offset[i]}"
        )
        assert off > last_offset.get(p, -1), f"partition {p}: offset {off} after {last_offset[p]}"
        last_offset[p] = off
        m = expected_message(tag, i, base_ts)
        assert msg.key() == m.key, f"message {i}: key {msg.key()!r} != {m.key!r}"
        assert msg.value() == m.value, f"message {i}: value differs"
        assert msg.headers() == m.headers, f"message {i}: headers {msg.headers()} != {m.headers}"
        assert msg.timestamp()[1] == m.timestamp_ms, f"message {i}: timestamp {msg.timestamp()}"
    missing = wanted - seen
    assert not missing, f"{len(missing)} messages never consumed, e.g. {sorted(missing)[:5]}"

