"""Push subscriptions and publishes on every node of a three-node herald
cluster.

Seed 003's Raft cluster: every node handles subscribes, publishes go to the
leader. A topic with replication factor 3 has a replica on each node; a
gRPC subscriber on each node (two of them on followers of the partition)
receives every record, in the partition's order, exactly once, whether it
was produced by a Kafka producer (acks=all) to the leader or published
through the push API on a follower (which forwards it to the leader and
answers once it is committed). A subscriber on a follower that goes away
resumes there from its checkpoint and receives only what it missed.

A node that holds no replica of a partition (replication factor 2) still
takes publishes for it, forwarded to the leader (a record too large for the
topic refused on the spot), and refuses a subscription to it, naming the
nodes to subscribe on.

The cluster fixture (three `herald serve` processes) is test_cluster.py's;
the gRPC client is the one generated from the .proto in tests/push.
"""

import sys
import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from test_cluster import bootstrap, cluster, leaders  # noqa: F401 (fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "push"))
from push_client import Session, channel, generate_stubs  # noqa: E402

KEYS = [b"feed.eu.%d" % k for k in range(3)] + [b"feed.us.0"]


@pytest.fixture(scope="module")
def proto(tmp_path_factory):
    return generate_stubs(tmp_path_factory.mktemp("generated"))


def one_partition_topic(nodes, topic, factor):
    """Creates `topic` with one partition and `factor` replicas; (leaders,
    metadata) once it has a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=factor)])[topic].result(30)
    return leaders(admin, topic)


def subscribe(proto, node, topic, **kw):
    """A session on `node` with subscription 1 to `pattern` feed.>,
    answered."""
    s = Session(proto, node.push_address)
    s.subscribe(1, topic, pattern="feed.>", **kw)
    s.wait_for(
        lambda s: any(m.subscription_id == 1 for m in s.of_kind("subscribed") + s.of_kind("error")),
        what=f"an answer to the subscribe on node {node.node_id}",
    )
    return s


def received(session):
    """(offset, key, value) of what subscription 1 received, in arrival
    order."""
    return [(o, k, v) for (sid, _p, o, k, v) in session.deliveries if sid == 1]


def kafka_produce(boot, topic, values):
    """Produces keyed records to partition 0 with acks=all; {offset: (key,
    value)} as acknowledged."""
    producer = Producer({
        "bootstrap.servers": boot,
        "acks": "all",
        "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 1,
        "message.timeout.ms": 60000,
    })
    acked, errors = {}, []

    def delivered(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.offset()] = (msg.key(), msg.value())

    for i, value in enumerate(values):
        producer.produce(topic, key=KEYS[i % len(KEYS)], value=value, partition=0, callback=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0, "deliveries still pending"
    assert errors == [], errors
    return acked


def push_publish(proto, node, topic, values):
    """Publishes through `node`'s push listener, one unary Publish per
    record, each answered before the next; {offset: (key, value)} as
    acknowledged."""
    pb = proto.pb
    ch = channel(node.push_address)
    stub = proto.rpc.HeraldStub(ch)
    acked = {}
    try:
        for i, value in enumerate(values):
            key = KEYS[i % len(KEYS)]
            answer = stub.Publish(
                pb.PublishRequest(request_id=i, topic=topic, key=key, value=value, partition=0),
                timeout=30,
            )
            assert not answer.HasField("error"), f"publish {value} refused: {answer.error}"
            assert answer.partition == 0
            acked[answer.offset] = (key, value)
    finally:
        ch.close()
    return acked


def high_watermark(boot, topic):
    """Partition 0's high watermark, as a Kafka consumer sees it."""
    consumer = Consumer({"bootstrap.servers": boot, "group.id": "watermarks"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return high
    finally:
        consumer.close()


def in_order(acked):
    return [(o, *acked[o]) for o in sorted(acked)]


def test_subscribers_on_every_node_receive_every_record_once_in_order(cluster, proto):
    nodes, topic = cluster, "feed"
    led, _ = one_partition_topic(nodes, topic, 3)
    leader = next(n for n in nodes if n.node_id == led[0])
    resuming, publishing = [n for n in nodes if n is not leader]

    # A subscriber on each node; the one on a follower acknowledges, to
    # resume later.
    sessions = {n.node_id: subscribe(proto, n, topic, cumulative=n is resuming) for n in nodes}

    # Kafka to the leader and push publishes on a follower at once, then
    # Kafka again.
    acked, pushed = {}, {}
    publisher = threading.Thread(
        target=lambda: pushed.update(
            push_publish(proto, publishing, topic, [b"push-a%04d" % i for i in range(150)])
        )
    )
    publisher.start()
    acked.update(kafka_produce(leader.bootstrap, topic, [b"kafka-a%04d" % i for i in range(300)]))
    publisher.join()
    assert len(pushed) == 150, "every publish on the follower was acknowledged"
    acked.update(pushed)
    # Acknowledged means committed: the leader serves it to Kafka readers.
    assert high_watermark(leader.bootstrap, topic) > max(pushed)
    acked.update(kafka_produce(leader.bootstrap, topic, [b"kafka-b%04d" % i for i in range(300)]))
    assert len(acked) == 750, "every acknowledged record has an offset of its own"

    expected = in_order(acked)
    for node_id, s in sessions.items():
        s.wait_for(lambda s: len(received(s)) >= len(expected), what=f"750 deliveries on node {node_id}")
        s.drain_quiet(0.5)
        assert received(s) == expected, f"node {node_id}: not every record once, in order"

    # The follower's subscriber acknowledges all it has and goes away.
    s = sessions.pop(resuming.node_id)
    s.ack(1, 0, received(s)[-1][0])
    s.wait_for(lambda s: 1 in s.checkpoints, what="a checkpoint")
    token = s.checkpoints[1]
    s.close()

    missed = {}
    missed.update(kafka_produce(leader.bootstrap, topic, [b"kafka-c%04d" % i for i in range(200)]))
    missed.update(push_publish(proto, publishing, topic, [b"push-c%04d" % i for i in range(50)]))

    again = Session(proto, resuming.push_address, hello=proto.pb.Hello(resume_tokens=[token]))
    want = in_order(missed)
    again.wait_for(lambda s: len(received(s)) >= len(want), what="the missed records")
    again.drain_quiet(0.5)
    assert received(again) == want, "only what it missed, each once, in order"
    again.close()
    for node_id, s in sessions.items():
        s.wait_for(lambda s: len(received(s)) >= len(expected) + len(want), what="the later records")
        s.drain_quiet(0.5)
        assert received(s) == expected + want, f"node {node_id}: the later records once, in order"
        s.close()


def test_a_node_without_a_replica_forwards_publishes_and_names_where_to_subscribe(cluster, proto):
    nodes, topic = cluster, "pair"
    _, md = one_partition_topic(nodes, topic, 2)
    holders = sorted(md.topics[topic].partitions[0].replicas)
    outsider = next(n for n in nodes if n.node_id not in holders)

    refused = subscribe(proto, outsider, topic)
    errors = refused.of_kind("error")
    assert [e.code for e in errors] == [proto.pb.ERROR_CODE_INVALID_REQUEST]
    assert "nodes %s hold every partition" % ", ".join(map(str, holders)) in errors[0].message
    refused.close()

    # A record above the topic's max.message.bytes is refused where it
    # was published, not passed to the leader.
    ch = channel(outsider.push_address)
    answer = proto.rpc.HeraldStub(ch).Publish(
        proto.pb.PublishRequest(topic=topic, key=b"feed.big", value=b"x" * (2 << 20), partition=0),
        timeout=30,
    )
    ch.close()
    assert answer.error.code == proto.pb.ERROR_CODE_RECORD_TOO_LARGE, answer

    sessions = {n.node_id: subscribe(proto, n, topic) for n in nodes if n.node_id in holders}
    acked = push_publish(proto, outsider, topic, [b"via-outsider-%03d" % i for i in range(100)])
    assert len(acked) == 100
    expected = in_order(acked)
    for node_id, s in sessions.items():
        s.wait_for(lambda s: len(received(s)) >= len(expected), what=f"100 deliveries on node {node_id}")
        s.drain_quiet(0.5)
        assert received(s) == expected, f"node {node_id}: not every record once, in order"
        s.close()


def stream_publish(proto, node, topic, values):
    """Publishes `values` on one PublishStream through `node`, all sent
    before any answer is read; the answers in arrival order."""
    pb = proto.pb
    ch = channel(node.push_address)
    try:
        requests = (
            pb.PublishRequest(request_id=i + 1, topic=topic, key=KEYS[i % len(KEYS)], value=v, partition=0)
            for i, v in enumerate(values)
        )
        return list(proto.rpc.HeraldStub(ch).PublishStream(requests, timeout=120))
    finally:
        ch.close()


def test_publishes_sent_without_waiting_keep_their_order_on_the_leader_and_through_a_follower(cluster, proto):
    nodes, topic = cluster, "pipelined"
    led, _ = one_partition_topic(nodes, topic, 3)
    leader = next(n for n in nodes if n.node_id == led[0])
    follower = next(n for n in nodes if n is not leader)
    sent = {
        leader.node_id: [b"on-leader-%04d" % i for i in range(600)],
        follower.node_id: [b"via-follower-%04d" % i for i in range(200)],
    }
    answers = {}
    threads = [
        threading.Thread(target=lambda n=n: answers.update({n.node_id: stream_publish(proto, n, topic, sent[n.node_id])}))
        for n in (leader, follower)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = {}
    for node_id, values in sent.items():
        got = answers[node_id]
        assert [a.request_id for a in got] == list(range(1, len(values) + 1)), "answered in the order sent"
        assert all(not a.HasField("error") for a in got), [a.error for a in got if a.HasField("error")][:3]
        offsets = [a.offset for a in got]
        assert offsets == sorted(offsets), f"node {node_id}: stored in the order sent"
        stored.update(zip(offsets, values))
    assert len(stored) == 800, "every publish has an offset of its own"
    consumer = Consumer({"bootstrap.servers": bootstrap(nodes), "group.id": "pipelined-check"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    log = {}
    try:
        for _ in range(120):
            if len(log) >= 800:
                break
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    log[m.offset()] = m.value()
    finally:
        consumer.close()
    assert log == stored, "the log holds each publish at the offset it was answered with"


def test_a_named_subscription_resumes_on_another_node_from_positions_its_coordinator_keeps(
    cluster, proto
):
    """The positions of a named subscription are the committed offsets of
    its consumer group, kept by that group's coordinator: a session on a
    node that is not the coordinator stores them there, and a later session
    on yet another node continues from them."""
    from test_cluster_groups import agreed_coordinator, committed

    nodes, topic, name = cluster, "named", "audit-trail"
    one_partition_topic(nodes, topic, 3)
    group = f"herald-push.{name}"
    coordinator = agreed_coordinator(nodes, group)
    first_node, second_node = [n for n in nodes if n.node_id != coordinator]
    acked = kafka_produce(bootstrap(nodes), topic, [b"n%03d" % i for i in range(40)])
    offsets = sorted(acked)

    first = subscribe(proto, first_node, topic, start="earliest", cumulative=True, name=name)
    try:
        first.wait_for(lambda s: len(received(s)) >= 40, what="every record on the first node")
        upto = offsets[19]
        first.ack(1, 0, upto)
        # Stored on the coordinator, another node: a Kafka client reads it.
        committed(bootstrap(nodes), group, topic, 1, {0: upto + 1})
    finally:
        first.close()

    second = subscribe(proto, second_node, topic, cumulative=True, name=name)
    try:
        second.wait_for(lambda s: len(received(s)) >= 20, what="the rest on the second node")
        second.drain_quiet(1.0)
        assert received(second) == [(o, *acked[o]) for o in offsets[20:]], (
            "continues after the acknowledged position, nothing again"
        )
    finally:
        second.close()
