"""Consumer groups on a three-node herald cluster, driven by confluent-kafka
(librdkafka) and by raw Kafka requests.

A group's coordinator is the leader of its replicated offsets partition:
every node names the same one (FindCoordinator), another node answers the
group's requests NOT_COORDINATOR, and when the coordinator is SIGKILLed a
new one is elected among the survivors with every acknowledged commit, so
the group's next consumer goes on from where the last one committed, reading
nothing twice and missing nothing. The killed node comes back and agrees.

The cluster fixture (three `herald serve` processes) is test_cluster.py's.
"""

import struct
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_wire import RawConnection, string
from test_cluster import bootstrap, cluster, leaders, produce  # noqa: F401 (fixture)

FIND_COORDINATOR, HEARTBEAT, LIST_GROUPS = 10, 12, 16
NONE, NOT_COORDINATOR, UNKNOWN_MEMBER_ID = 0, 16, 25


def find_coordinator(node, group):
    """(error code, node id) of FindCoordinator v0 asked of `node`."""
    with RawConnection(node.bootstrap) as conn:
        answer = conn.call(FIND_COORDINATOR, 0, string(group))
        return answer.take(">h"), answer.take(">i")


def agreed_coordinator(nodes, group, timeout=30.0, not_on=()):
    """The node id every node of `nodes` names as `group`'s coordinator,
    once they agree on one outside `not_on` (a node just killed)."""
    deadline = time.monotonic() + timeout
    while True:
        answers = {n.node_id: find_coordinator(n, group) for n in nodes}
        named = set(answers.values())
        if len(named) == 1:
            error, node_id = named.pop()
            if error == NONE and node_id not in not_on:
                return node_id
        assert time.monotonic() < deadline, f"no agreed coordinator of {group}: {answers}"
        time.sleep(0.2)


def heartbeat_error(node, group):
    """The error a Heartbeat v0 from a member `node` never saw gets."""
    with RawConnection(node.bootstrap) as conn:
        body = string(group) + struct.pack(">i", 1) + string("nobody")
        return conn.call(HEARTBEAT, 0, body).take(">h")


def list_groups(node):
    """The group ids ListGroups v0 answers on `node`."""
    with RawConnection(node.bootstrap) as conn:
        answer = conn.call(LIST_GROUPS, 0, b"")
        assert answer.take(">h") == NONE
        return [g for g, _ in answer.array(lambda r: (r.string(), r.string()))]


def group_consumer(boot, group):
    return Consumer(
        {
            "bootstrap.servers": boot,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )


def consume(consumer, count, timeout=60.0):
    """Up to `count` records as (partition, offset, value)."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for msg in consumer.consume(min(500, count - len(got)), 1.0):
            if msg.error() is None:
                got.append((msg.partition(), msg.offset(), msg.value()))
    return got


def committed(boot, group, topic, partitions, want, timeout=60.0):
    """The group's committed offsets as a consumer of `boot` reads them,
    once they read `want` (a coordinator may be moving)."""
    consumer = group_consumer(boot, group)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                found = consumer.committed(
                    [TopicPartition(topic, p) for p in range(partitions)], timeout=10
                )
                seen = {tp.partition: tp.offset for tp in found}
            except Exception as e:  # a coordinator being elected
                seen = repr(e)
            if seen == want:
                return seen
            assert time.monotonic() < deadline, f"committed offsets {seen}, want {want}"
            time.sleep(0.3)
    finally:
        consumer.close()


@pytest.mark.restarts_broker
def test_a_groups_commits_survive_its_coordinators_sigkill_and_the_next_consumer_goes_on(cluster):
    nodes = cluster
    boot = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": boot})
    topic, partitions, total = "grouped", 2, 1000
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3)])[
        topic
    ].result(30)
    leaders(admin, topic)
    acked, errors = produce(boot, topic, [b"v%05d" % i for i in range(total)])
    assert errors == [] and len(acked) == total

    group = "survives-its-coordinator"
    coordinator = agreed_coordinator(nodes, group)
    # Only the coordinator takes the group's requests.
    for node in nodes:
        expected = UNKNOWN_MEMBER_ID if node.node_id == coordinator else NOT_COORDINATOR
        assert heartbeat_error(node, group) == expected, f"node {node.node_id}"

    # A member reads part of the topic and commits what it read.
    first = group_consumer(boot, group)
    first.subscribe([topic])
    read_first = consume(first, 600)
    assert len(read_first) == 600
    positions = {}
    for p, offset, _ in read_first:
        positions[p] = max(positions.get(p, 0), offset + 1)
    first.commit(
        offsets=[TopicPartition(topic, p, o) for p, o in positions.items()], asynchronous=False
    )
    first.close()
    want = {p: positions.get(p, -1001) for p in range(partitions)}
    assert committed(boot, group, topic, partitions, want) == want

    # Its coordinator dies; the survivors elect another, which has the
    # commits.
    victim = next(n for n in nodes if n.node_id == coordinator)
    victim.kill()
    survivors = [n for n in nodes if n is not victim]
    moved_to = agreed_coordinator(survivors, group, not_on={victim.node_id})
    assert moved_to != victim.node_id
    assert committed(bootstrap(survivors), group, topic, partitions, want) == want

    # The next member goes on from the commits: the rest of the topic,
    # nothing read twice.
    second = group_consumer(bootstrap(survivors), group)
    second.subscribe([topic])
    read_second = consume(second, total - 600)
    second.commit(asynchronous=False)
    final = {
        tp.partition: tp.offset
        for tp in second.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    }
    second.close()
    first_values = {v for (_, _, v) in read_first}
    second_values = [v for (_, _, v) in read_second]
    assert not first_values.intersection(second_values), "records read again after the move"
    assert len(second_values) == len(set(second_values)) == total - 600
    assert first_values.union(second_values) == {v for (_, _, v) in acked}

    # Past every record (and past the Raft entries a new leader adds, which
    # take offsets too and which consumers skip).
    for p in range(partitions):
        ends = [o + 1 for (q, o, _) in acked if q == p]
        assert final[p] >= max(ends, default=-1001), f"partition {p} committed {final[p]}"

    # The killed node comes back: it agrees on the coordinator and reads the
    # same commits.
    victim.start()
    agreed_coordinator(nodes, group)
    assert committed(victim.bootstrap, group, topic, partitions, final) == final


def test_groups_are_spread_over_the_nodes_and_listed_by_their_coordinators(cluster):
    nodes = cluster
    groups = [f"spread-{i}" for i in range(24)]
    coordinators = {g: agreed_coordinator(nodes, g) for g in groups}
    assert len(set(coordinators.values())) > 1, f"every group on one node: {coordinators}"

    # Each group gets a commit through its own coordinator (the admin
    # client finds it); each node lists exactly the groups it coordinates.
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    topic = "spread"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(30)
    leaders(admin, topic)
    for g in groups:
        consumer = group_consumer(bootstrap(nodes), g)
        consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
        consumer.close()
    # Each node lists the groups it coordinates, and only those (Kafka's
    # admin clients ask every node and merge).
    for node in nodes:
        listed = set(list_groups(node)).intersection(groups)
        mine = {g for g, c in coordinators.items() if c == node.node_id}
        assert listed == mine, f"node {node.node_id} lists {sorted(listed)}, coordinates {sorted(mine)}"
    everywhere = {g.group_id for g in admin.list_consumer_groups(request_timeout=10).result().valid}
    assert set(groups) <= everywhere
