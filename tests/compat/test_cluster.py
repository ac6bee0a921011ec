"""A three-node herald cluster driven by confluent-kafka (librdkafka).

Three `herald serve` processes on 127.0.0.1 form a cluster (`--node-id`,
`--cluster-listen`, `--cluster-nodes`). A topic created with replication
factor 3 has its partitions led across the nodes; acks=all produce goes on
through the SIGKILL of a partition leader without a delivery error or a lost
acknowledged record; the killed node restarts and catches up, after which
every replica of every partition holds the same bytes.

An idempotent producer (librdkafka's, with its five requests in flight)
writes each record once through a leader's SIGKILL: producer ids are unique
across the cluster's nodes, and retries of batches the old leader had
committed are recognized on the new one.

A fourth node started with `--cluster-join` is added with `herald cluster
add-node`: every node then lists it, a partition reassigned onto it
carries every record, and new topics are placed on it. It then replaces
an original node: once every partition on that node (the groups' offsets
partitions too) is moved to the new one, `herald cluster remove-node`
takes it out, and the cluster serves on without it.

Records deleted while a node is down (each replica's retention, and a
DeleteRecords) are not sent to it when it returns: it installs the
leader's snapshot and restarts its log where the others' start, and,
made the partition's only replica, serves every record from the log
start on at its offset.

The multi-process fault test in a network namespace (partitions, SIGSTOP,
Kafka's VerifiableProducer) is test_cluster_faults.py.
"""

import glob
import json
import re
import signal
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker import HeraldBroker, PortTaken, environment, free_port
from conftest import (EXTERNAL_BOOTSTRAP, KAFKA_LIB, KAFKA_TOOL_JVM_FLAGS, QUICK_GROUP_START,
                      herald_binary_path)

pytestmark = pytest.mark.skipif(
    bool(EXTERNAL_BOOTSTRAP or KAFKA_LIB), reason="starts herald nodes of its own"
)

NODES = 3
REPLICA_LAG_MS = 3000


class ClusterNode(HeraldBroker):
    """One node: its Kafka and Raft ports are fixed before any node starts,
    since every node's command line names them all."""

    port_may_move = False

    def __init__(self, node_id, data_dir, log_path, raft_port, nodes_arg):
        super().__init__(herald_binary_path(), data_dir, log_path)
        self.node_id = node_id
        self.raft_port = raft_port
        self.nodes_arg = nodes_arg

    def command(self):
        return super().command() + [
            "--node-id", str(self.node_id),
            "--cluster-listen", f"127.0.0.1:{self.raft_port}",
            "--cluster-nodes", self.nodes_arg,
            # Kafka's 30 s would make the in-sync test slow; nothing else
            # depends on it.
            "--replica-lag-time-max-ms", str(REPLICA_LAG_MS),
            # The groups of test_cluster_groups.py and test_cluster_push.py
            # form sooner.
            *QUICK_GROUP_START,
        ]


def new_nodes(base, secure=False):
    """NODES nodes under `base`, on ports chosen now; none started. Secure
    ones also have a SASL listener and authorization on."""
    base.mkdir(parents=True, exist_ok=True)
    kafka_ports = [free_port() for _ in range(NODES)]
    raft_ports = [free_port() for _ in range(NODES)]
    nodes_arg = ",".join(
        f"{i + 1}=127.0.0.1:{raft_ports[i]}=127.0.0.1:{kafka_ports[i]}" for i in range(NODES)
    )
    nodes = []
    for i in range(NODES):
        place = (i + 1, base / f"node-{i + 1}", base / f"node-{i + 1}.log", raft_ports[i], nodes_arg)
        node = SecureClusterNode(*place, sasl_port=free_port()) if secure else ClusterNode(*place)
        node.port = kafka_ports[i]
        node.bootstrap = f"127.0.0.1:{kafka_ports[i]}"
        nodes.append(node)
    return nodes


START_ATTEMPTS = 3


@pytest.fixture
def cluster(tmp_path, request):
    yield from running_cluster(tmp_path, request)


def running_cluster(tmp_path, request, secure=False, extra=()):
    """Starts NODES nodes (with `extra` flags), yields them, stops them
    (printing their logs' ends if the test failed)."""
    nodes = []
    try:
        for attempt in range(START_ATTEMPTS):
            nodes = new_nodes(tmp_path / f"attempt-{attempt}", secure)
            for node in nodes:
                node.extra_args += list(extra)
            try:
                for node in nodes:
                    node.start()
                break
            except PortTaken:
                # A port on every node's command line was taken before its
                # node bound it (another process's ephemeral port): the
                # whole cluster again, on new ports.
                for node in nodes:
                    node.stop()
                if attempt == START_ATTEMPTS - 1:
                    raise
        yield nodes
    finally:
        for node in nodes:
            node.stop()
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            for node in nodes:
                print(f"--- node {node.node_id} log ---\n{node.log_tail(40)}")


def bootstrap(nodes):
    return ",".join(n.bootstrap for n in nodes)


def leaders(admin, topic, timeout=30.0, not_on=()):
    """Partition -> leader once every partition has one, none of them on a
    node in `not_on` (a node just killed: the node answering may not have
    heard of the new leader yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10)
        parts = md.topics[topic].partitions
        if parts and all(
            p.leader >= 0 and p.leader not in not_on and p.error is None for p in parts.values()
        ):
            return {p.id: p.leader for p in parts.values()}, md
        time.sleep(0.2)
    raise AssertionError(f"{topic} has partitions without a leader after {timeout}s")


def in_sync(node, topic):
    """Partition 0's in-sync replicas as `node` reports them."""
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10)
    partitions = md.topics[topic].partitions
    # A node just started may not list the partition for a moment.
    return sorted(partitions[0].isrs) if 0 in partitions else []


def partition_gauge(node, name, topic):
    """`herald_partition_<name>` of partition 0 of `topic` on `node`'s
    /metrics (the admin address read from its log)."""
    found = re.findall(r"admin listener ready on (\S+)", Path(node.log_path).read_text())
    with urllib.request.urlopen(f"http://{found[-1]}/metrics", timeout=10) as response:
        text = response.read().decode()
    series = f'herald_partition_{name}{{topic="{topic}",partition="0"}} '
    values = [line[len(series):] for line in text.splitlines() if line.startswith(series)]
    assert len(values) == 1, f"{series.strip()} not on node {node.node_id}'s /metrics"
    return float(values[0])


def wait_gauge(node, name, topic, want, timeout=10.0):
    """Waits until `partition_gauge(node, name, topic)` reads `want`: the
    leader's gauges follow its in-sync tracker, which Metadata may show a
    moment before or after them."""
    deadline = time.monotonic() + timeout
    while True:
        value = partition_gauge(node, name, topic)
        if value == want:
            return
        assert time.monotonic() < deadline, f"{name} of {topic} on node {node.node_id} is {value}, not {want}"
        time.sleep(0.2)


def wait_in_sync(nodes, topic, want, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        seen = {n.node_id: in_sync(n, topic) for n in nodes}
        if all(v == want for v in seen.values()):
            return
        assert time.monotonic() < deadline, f"in-sync replicas {seen}, waiting for {want} everywhere"
        time.sleep(0.3)


def produce(boot, topic, values, idempotent=False, settings=None):
    """Produces `values` with acks=all (and librdkafka `settings`); returns
    (acked (partition, offset, value) in delivery order, delivery
    errors)."""
    settings = {
        "bootstrap.servers": boot,
        "acks": "all",
        "enable.idempotence": idempotent,
        "message.timeout.ms": 60000,
        **(settings or {}),
    }
    if not idempotent:
        settings["max.in.flight.requests.per.connection"] = 1
    producer = Producer(settings)
    acked, errors = [], []

    def delivered(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    for i, value in enumerate(values):
        producer.produce(topic, value=value, callback=delivered)
        if i % 100 == 0:
            producer.poll(0)
    assert producer.flush(90) == 0, "deliveries still pending"
    return acked, errors


def consume_all(boot, topic, partitions, expected):
    # From offset 0, or from the log start where records were deleted.
    consumer = Consumer(
        {"bootstrap.servers": boot, "group.id": f"read-{time.time_ns()}", "auto.offset.reset": "earliest"}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = {}
    deadline = time.monotonic() + 60
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            # consume() waits for all 1000 or its timeout: a short one, so
            # that the last (partial) batch does not cost a second.
            for msg in consumer.consume(1000, 0.2):
                if msg.error() is None:
                    seen[msg.value()] = (msg.partition(), msg.offset())
    finally:
        consumer.close()
    return seen


def stored_bytes(node, topic, partition):
    files = sorted(glob.glob(str(Path(node.data_dir) / f"{topic}-{partition}" / "log" / "*.log")))
    return b"".join(Path(f).read_bytes() for f in files).rstrip(b"\0")


@pytest.mark.restarts_broker
def test_a_replicated_topic_survives_its_leaders_sigkill_with_nothing_acknowledged_lost(cluster):
    nodes = cluster
    boot = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": boot})
    topic, partitions = "replicated", 3
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3)])[topic].result(30)
    led, md = leaders(admin, topic)
    assert sorted(b.id for b in md.brokers.values()) == [1, 2, 3]
    for p in md.topics[topic].partitions.values():
        assert sorted(p.replicas) == [1, 2, 3]

    first, errors = produce(boot, topic, [b"a%06d" % i for i in range(3000)])
    assert errors == [] and len(first) == 3000

    # The leader of partition 0 dies mid-stream; the next batch goes on.
    victim = next(n for n in nodes if n.node_id == led[0])
    victim.kill()
    survivors = [n for n in nodes if n is not victim]
    second, errors = produce(bootstrap(survivors), topic, [b"b%06d" % i for i in range(3000)])
    assert errors == [], f"delivery errors after the leader died: {set(errors)}"
    assert len(second) == 3000
    # Waits (bounded) for the survivors to name a leader other than the
    # dead node for every partition.
    leaders(AdminClient({"bootstrap.servers": bootstrap(survivors)}), topic, not_on={victim.node_id})

    acked = first + second
    seen = consume_all(bootstrap(survivors), topic, partitions, len(acked))
    missing = [v for (_, _, v) in acked if v not in seen]
    assert missing == [], f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
    for p, offset, value in acked:
        assert seen[value] == (p, offset), f"{value} moved from {(p, offset)} to {seen[value]}"
    # Within a partition, records keep the order they were acknowledged in.
    for p in range(partitions):
        offsets = [o for (q, o, _) in acked if q == p]
        assert offsets == sorted(offsets)

    # The dead node comes back and catches up: every replica holds the
    # same bytes.
    victim.start()
    third, errors = produce(boot, topic, [b"c%06d" % i for i in range(300)])
    assert errors == [] and len(third) == 300
    deadline = time.monotonic() + 30
    while True:
        copies = {p: [stored_bytes(n, topic, p) for n in nodes] for p in range(partitions)}
        if all(len(set(c)) == 1 for c in copies.values()):
            break
        assert time.monotonic() < deadline, {
            p: [len(b) for b in c] for p, c in copies.items()
        }
        time.sleep(0.5)


def test_a_deleted_topic_is_gone_from_every_node_and_its_name_can_be_reused(cluster):
    boot = bootstrap(cluster)
    admin = AdminClient({"bootstrap.servers": boot})
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic("too-many", num_partitions=1, replication_factor=4)])["too-many"].result(30)
    assert "INVALID_REPLICATION_FACTOR" in str(refused.value) or "replication factor" in str(refused.value)
    admin.create_topics([NewTopic("brief", num_partitions=2, replication_factor=2)])["brief"].result(30)
    leaders(admin, "brief")
    acked, errors = produce(boot, "brief", [b"old%03d" % i for i in range(50)])
    assert errors == [] and len(acked) == 50
    admin.delete_topics(["brief"])["brief"].result(30)
    # As in Kafka, a deletion reaches the other nodes once they apply the
    # metadata log's entry, an instant after the answer: each must drop it
    # within a few seconds.
    for node in cluster:
        node_admin = AdminClient({"bootstrap.servers": node.bootstrap})
        deadline = time.monotonic() + 10
        while "brief" in node_admin.list_topics(timeout=10).topics:
            assert time.monotonic() < deadline, f"node {node.node_id} still lists the deleted topic"
            time.sleep(0.1)
    # The name is free again; the new topic starts empty.
    admin.create_topics([NewTopic("brief", num_partitions=1, replication_factor=3)])["brief"].result(30)
    leaders(admin, "brief")
    acked, errors = produce(boot, "brief", [b"new%03d" % i for i in range(20)])
    assert errors == [] and len(acked) == 20
    seen = consume_all(boot, "brief", 1, 20)
    assert sorted(seen) == [b"new%03d" % i for i in range(20)], "nothing of the deleted topic"


@pytest.mark.restarts_broker
def test_an_idempotent_producer_writes_each_record_once_through_a_leader_failure(cluster):
    nodes = cluster
    boot = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": boot})
    topic = "exactly-once"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(30)
    led, _ = leaders(admin, topic)
    first, errors = produce(boot, topic, [b"i%06d" % i for i in range(2000)], idempotent=True)
    assert errors == [] and len(first) == 2000
    victim = next(n for n in nodes if n.node_id == led[0])
    victim.kill()
    survivors = [n for n in nodes if n is not victim]
    second, errors = produce(
        bootstrap(survivors), topic, [b"j%06d" % i for i in range(2000)], idempotent=True
    )
    assert errors == [], f"delivery errors: {set(errors)}"
    assert len(second) == 2000
    consumer = Consumer({"bootstrap.servers": bootstrap(survivors), "group.id": "exactly"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + 60
    while len(values) < 4000 and time.monotonic() < deadline:
        values.extend(m.value() for m in consumer.consume(1000, 1.0) if m.error() is None)
    consumer.close()
    expected = [b"i%06d" % i for i in range(2000)] + [b"j%06d" % i for i in range(2000)]
    assert values == expected, "every record once, in the order sent"


def test_a_stopped_follower_leaves_the_in_sync_replicas_and_returns_once_caught_up(cluster):
    nodes = cluster
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    topic = "in-sync"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(30)
    led, _ = leaders(admin, topic)
    leader = next(n for n in nodes if n.node_id == led[0])
    follower = next(n for n in nodes if n is not leader)
    live = [n for n in nodes if n is not follower]
    wait_in_sync(nodes, topic, [1, 2, 3])

    # A follower that stops answering (SIGSTOP) leaves the set once the lag
    # runs out, on every node's metadata, while acks=all goes on with two.
    follower.proc.send_signal(signal.SIGSTOP)
    try:
        acked, errors = produce(leader.bootstrap, topic, [b"while-stopped-%04d" % i for i in range(200)])
        assert errors == [] and len(acked) == 200
        wait_in_sync(live, topic, sorted(n.node_id for n in live), timeout=REPLICA_LAG_MS / 1000 + 20)
        # The leader counts the partition as under-replicated; the other
        # live node sees two in sync of three.
        other = next(n for n in live if n is not leader)
        wait_gauge(leader, "under_replicated", topic, 1)
        wait_gauge(other, "in_sync_replicas", topic, 2)
        assert partition_gauge(other, "under_replicated", topic) == 0
        assert partition_gauge(other, "replicas", topic) == 3
    finally:
        follower.proc.send_signal(signal.SIGCONT)
    # Resumed, it catches up and is back in the set.
    acked, errors = produce(leader.bootstrap, topic, [b"after-%04d" % i for i in range(100)])
    assert errors == [] and len(acked) == 100
    wait_in_sync(nodes, topic, [1, 2, 3])
    wait_gauge(leader, "under_replicated", topic, 0)
    wait_gauge(leader, "in_sync_replicas", topic, 3)


def test_added_partitions_and_changed_configs_reach_every_node(cluster):
    from confluent_kafka.admin import ConfigResource, NewPartitions, ResourceType

    nodes = cluster
    boot = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": boot})
    topic = "growing"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=2)])[topic].result(30)
    leaders(admin, topic)

    # Grown through the metadata log: every node lists the new partitions,
    # each with a leader and the topic's replication factor.
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    for node in nodes:
        # As with a deletion, another node applies the metadata entry an
        # instant after the answer: each must list the new partitions soon.
        node_admin = AdminClient({"bootstrap.servers": node.bootstrap})
        deadline = time.monotonic() + 10
        while True:
            led, md = leaders(node_admin, topic)
            if sorted(led) == [0, 1, 2]:
                break
            assert time.monotonic() < deadline, f"node {node.node_id} sees partitions {sorted(led)}"
            time.sleep(0.1)
        assert all(len(p.replicas) == 2 for p in md.topics[topic].partitions.values())
    with pytest.raises(KafkaException) as refused:
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(30)
    assert "INVALID_PARTITIONS" in str(refused.value)

    # The new partitions take writes and serve them back.
    producer = Producer({"bootstrap.servers": boot, "acks": "all"})
    for p in range(3):
        for i in range(10):
            producer.produce(topic, value=b"p%d-%d" % (p, i), partition=p)
    assert producer.flush(60) == 0
    seen = consume_all(boot, topic, 3, 30)
    assert {part for (part, _) in seen.values()} == {0, 1, 2} and len(seen) == 30

    # A config change reaches every node, and every replica enforces it.
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={"max.message.bytes": "2048"})
    admin.alter_configs([resource])[resource].result(30)
    for node in nodes:
        node_admin = AdminClient({"bootstrap.servers": node.bootstrap})
        deadline = time.monotonic() + 10
        while True:
            described = node_admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
            value = next(iter(described.values())).result(30)["max.message.bytes"].value
            if value == "2048":
                break
            assert time.monotonic() < deadline, f"node {node.node_id} still has {value}"
            time.sleep(0.2)
    big = Producer({"bootstrap.servers": boot, "acks": "all", "compression.type": "none"})
    errors = []
    big.produce(topic, value=b"x" * 4096, partition=2, callback=lambda err, _m: errors.append(err))
    big.flush(30)
    assert errors and errors[0] is not None and "MSG_SIZE_TOO_LARGE" in str(errors[0]), errors

    # Write caching: acks=all counts a replica's write, not its fsync. Two
    # topics take the same 40 produces, one at a time; the leader of the
    # one without write caching fsyncs for each, the other's for none.
    by_id = {n.node_id: n for n in nodes}
    fsyncs = {}
    for name, caching in (("synced", "false"), ("cached", "true")):
        admin.create_topics([NewTopic(name, 1, 3, config={"write.caching": caching})])[name].result(30)
        led, _ = leaders(admin, name)
        leader = by_id[led[0]]
        other_admin = AdminClient({"bootstrap.servers": nodes[-1].bootstrap})
        described = other_admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)])
        assert next(iter(described.values())).result(30)["write.caching"].value == caching
        before = partition_gauge(leader, "log_fsyncs_total", name)
        one_by_one = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 0,
                               "enable.idempotence": False})
        for i in range(40):
            one_by_one.produce(name, value=b"w%02d" % i)
            assert one_by_one.flush(30) == 0
        fsyncs[name] = partition_gauge(leader, "log_fsyncs_total", name) - before
        assert len(consume_all(boot, name, 1, 40)) == 40
    assert fsyncs["synced"] >= 30 and fsyncs["cached"] == 0, fsyncs


@pytest.mark.restarts_broker
def test_a_reassigned_partition_moves_to_other_nodes_with_every_record(cluster):
    from kafka import TopicPartition as KafkaPartition
    from kafka.admin import KafkaAdminClient

    nodes = cluster
    boot = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": boot})
    topic = "moving"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=2)])[topic].result(30)
    _, md = leaders(admin, topic)
    first, second = md.topics[topic].partitions[0].replicas
    third = next(n.node_id for n in nodes if n.node_id not in (first, second))
    before, errors = produce(boot, topic, [b"m%05d" % i for i in range(500)])
    assert errors == [] and len(before) == 500

    # From [first, second] to [third, first]: one replica added, one
    # removed, through the Kafka API a Kafka tool uses.
    target = [third, first]
    kadmin = KafkaAdminClient(bootstrap_servers=boot, request_timeout_ms=30000)
    try:
        answer = kadmin.alter_partition_reassignments({KafkaPartition(topic, 0): target})
        assert answer == {KafkaPartition(topic, 0): None}, answer
        deadline = time.monotonic() + 60
        while True:
            ongoing = kadmin.list_partition_reassignments()
            views = {}
            for node in nodes:
                node_md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(topic, timeout=10)
                views[node.node_id] = sorted(node_md.topics[topic].partitions[0].replicas)
            if not ongoing and all(v == sorted(target) for v in views.values()):
                break
            assert time.monotonic() < deadline, f"still moving: {ongoing}, replicas seen {views}"
            time.sleep(0.3)
    finally:
        kadmin.close()

    # The partition serves on: writes go on, and every record, old and new,
    # is there once, in order.
    after, errors = produce(boot, topic, [b"n%05d" % i for i in range(500)])
    assert errors == [] and len(after) == 500
    seen = consume_all(boot, topic, 1, 1000)
    acked = before + after
    assert all(seen.get(v) == (p, o) for (p, o, v) in acked), "every acknowledged record at its offset"
    # The new replica holds the same bytes as the one that stayed; the one
    # that left has discarded its copy.
    by_id = {n.node_id: n for n in nodes}
    deadline = time.monotonic() + 30
    while stored_bytes(by_id[third], topic, 0) != stored_bytes(by_id[first], topic, 0):
        assert time.monotonic() < deadline, "the new replica never caught up"
        time.sleep(0.3)
    deadline = time.monotonic() + 30
    while (Path(by_id[second].data_dir) / f"{topic}-0").exists():
        assert time.monotonic() < deadline, "the removed replica's data stayed"
        time.sleep(0.3)

    # The node that lost its replica restarts and does not bring it back.
    by_id[second].stop()
    by_id[second].start()
    led, md = leaders(AdminClient({"bootstrap.servers": by_id[second].bootstrap}), topic)
    assert sorted(md.topics[topic].partitions[0].replicas) == sorted(target)
    assert not (Path(by_id[second].data_dir) / f"{topic}-0").exists()
    more, errors = produce(boot, topic, [b"o%05d" % i for i in range(100)])
    assert errors == [] and len(more) == 100


def test_a_reassignment_cancelled_midway_leaves_the_partition_on_its_replicas(cluster, tmp_path):
    nodes = cluster
    boot = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": boot})
    topic = "undone"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=2)])[topic].result(30)
    _, md = leaders(admin, topic)
    replicas = md.topics[topic].partitions[0].replicas
    by_id = {n.node_id: n for n in nodes}
    outsider = next(n for n in nodes if n.node_id not in replicas)
    keeper = by_id[replicas[0]]
    before, errors = produce(boot, topic, [b"u%05d" % i for i in range(200)])
    assert errors == [] and len(before) == 200

    # The move to [keeper, outsider] cannot finish while the outsider is
    # frozen: its new replica never catches up.
    target = [replicas[0], outsider.node_id]
    outsider.proc.send_signal(signal.SIGSTOP)
    try:
        moved = herald_cli(
            "partition", "reassign", topic, "0", "--replicas", ",".join(map(str, target)),
            "--bootstrap", keeper.bootstrap,
        )
        assert moved.returncode == 0, moved.stderr
        listed = herald_cli("partition", "reassignments", "--bootstrap", keeper.bootstrap)
        assert topic in listed.stdout, listed.stdout + listed.stderr

        # Kafka's own tool cancels it (its throttles left alone: herald
        # sets none).
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": target},
        ]}))
        cancelled = kafka_tool(
            "reassign.ReassignPartitionsCommand", "--bootstrap-server", keeper.bootstrap,
            "--cancel", "--reassignment-json-file", str(plan), "--preserve-throttles",
        )
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        assert "Successfully cancelled" in cancelled.stdout, cancelled.stdout

        # The leader undoes the move with the outsider still frozen.
        deadline = time.monotonic() + 40
        while True:
            listed = herald_cli("partition", "reassignments", "--bootstrap", keeper.bootstrap)
            if "no reassignment in progress" in listed.stdout:
                break
            assert time.monotonic() < deadline, listed.stdout + listed.stderr
            time.sleep(0.5)
        during, errors = produce(boot, topic, [b"v%05d" % i for i in range(100)])
        assert errors == [] and len(during) == 100
    finally:
        outsider.proc.send_signal(signal.SIGCONT)

    # Every node names the replicas the partition had; every record is
    # there at its offset; the outsider drops the replica it had opened.
    deadline = time.monotonic() + 30
    while True:
        views = {
            n.node_id: sorted(AdminClient({"bootstrap.servers": n.bootstrap})
                              .list_topics(topic, timeout=10).topics[topic].partitions[0].replicas)
            for n in nodes
        }
        gone = not (Path(outsider.data_dir) / f"{topic}-0").exists()
        if gone and all(v == sorted(replicas) for v in views.values()):
            break
        assert time.monotonic() < deadline, f"replicas seen {views}; outsider's copy gone: {gone}"
        time.sleep(0.3)
    seen = consume_all(boot, topic, 1, 300)
    assert all(seen.get(v) == (p, o) for (p, o, v) in before + during), "every acknowledged record at its offset"

    # Nothing is left to cancel.
    again = herald_cli("partition", "cancel-reassignment", topic, "0", "--bootstrap", keeper.bootstrap)
    assert again.returncode != 0 and "no reassignment" in again.stderr.lower(), again.stderr


def test_a_reassignments_target_replaced_midway_is_carried_out_instead(cluster, tmp_path):
    """A move stuck on a frozen node is given another target with Kafka's
    own tool (`--execute --additional`, which Kafka answers by replacing
    the pending target): the partition ends on the new target with every
    record, and the frozen node, once back, drops the replica it opened
    for the old one."""
    nodes = cluster
    boot = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": boot})
    topic = "redirected"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    _, md = leaders(admin, topic)
    home = md.topics[topic].partitions[0].replicas[0]
    by_id = {n.node_id: n for n in nodes}
    frozen, spare = [n for n in nodes if n.node_id != home]
    before, errors = produce(boot, topic, [b"r%05d" % i for i in range(200)])
    assert errors == [] and len(before) == 200

    frozen.proc.send_signal(signal.SIGSTOP)
    try:
        moved = herald_cli(
            "partition", "reassign", topic, "0", "--replicas", f"{home},{frozen.node_id}",
            "--bootstrap", by_id[home].bootstrap,
        )
        assert moved.returncode == 0, moved.stderr
        target = [home, spare.node_id]
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": target},
        ]}))
        replaced = kafka_tool(
            "reassign.ReassignPartitionsCommand", "--bootstrap-server", by_id[home].bootstrap,
            "--execute", "--additional", "--reassignment-json-file", str(plan),
        )
        assert replaced.returncode == 0, replaced.stdout + replaced.stderr
        # The new target is carried out with the old one's node still frozen.
        until("the replaced move completes", lambda: "no reassignment in progress" in herald_cli(
            "partition", "reassignments", "--bootstrap", by_id[home].bootstrap).stdout, timeout=40)
    finally:
        frozen.proc.send_signal(signal.SIGCONT)

    def settled():
        views = {
            n.node_id: sorted(AdminClient({"bootstrap.servers": n.bootstrap})
                              .list_topics(topic, timeout=10).topics[topic].partitions[0].replicas)
            for n in nodes
        }
        gone = not (Path(frozen.data_dir) / f"{topic}-0").exists()
        return gone and all(v == sorted(target) for v in views.values())

    until("every node names the new replicas and the frozen node's copy is gone", settled, timeout=30)
    # The old target's learner left the group too (replacing the voters
    # keeps learners), so the leader no longer sends it the log.
    assert re.search(r"learners outside the reassignment's target dropped .*learners=\{%d\}" % frozen.node_id,
                     Path(by_id[home].log_path).read_text()), by_id[home].log_tail(40)
    after, errors = produce(boot, topic, [b"s%05d" % i for i in range(100)])
    assert errors == [] and len(after) == 100
    seen = consume_all(spare.bootstrap, topic, 1, 300)
    assert all(seen.get(v) == (p, o) for (p, o, v) in before + after), "every record, through the new replica's node"
    until("the new replica holds the same bytes",
          lambda: stored_bytes(spare, topic, 0) == stored_bytes(by_id[home], topic, 0))

    # Kafka's kafka-log-dirs.sh (DescribeLogDirs, which `--execute` asked
    # too) finds the partition on its two replicas' nodes, the same size
    # on both, and nowhere else.
    dirs = kafka_tool("LogDirsCommand", "--bootstrap-server", boot, "--describe", "--topic-list", topic)
    assert dirs.returncode == 0, dirs.stdout + dirs.stderr
    report = json.loads(next(l for l in dirs.stdout.splitlines() if l.startswith("{")))
    sizes = {
        b["broker"]: [p["size"] for d in b["logDirs"] for p in d["partitions"] if p["partition"] == f"{topic}-0"]
        for b in report["brokers"]
    }
    assert sorted(sizes) == [1, 2, 3], report
    assert sorted(n for n, found in sizes.items() if found) == sorted(target), report
    assert sizes[home] == sizes[spare.node_id] and sizes[home][0] > 0, report
    assert all(d["logDir"].startswith("/") and d["error"] is None for b in report["brokers"] for d in b["logDirs"]), report


def earliest(boot, topic):
    """Partition 0's log start offset, as a client reads it from the
    leader (asked again while leadership moves)."""
    consumer = Consumer({"bootstrap.servers": boot, "group.id": f"low-{time.time_ns()}"})
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                low, _high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
                return low
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
    finally:
        consumer.close()


@pytest.mark.restarts_broker
def test_a_node_that_missed_deleted_records_catches_up_from_a_snapshot(cluster):
    from kafka import TopicPartition as KafkaPartition
    from kafka.admin import KafkaAdminClient

    nodes = cluster
    boot = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": boot})
    topic = "trimmed"
    # Small segments under a size limit: retention deletes while a node is
    # away.
    config = {"segment.bytes": "65536", "retention.bytes": "262144"}
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3, config=config)])[topic].result(30)
    led, _ = leaders(admin, topic)
    away = next(n for n in nodes if n.node_id != led[0])
    live = [n for n in nodes if n is not away]
    live_boot = bootstrap(live)
    away.stop()

    values = [b"t%05d-" % i + b"x" * 200 for i in range(4000)]
    # Batches smaller than a segment.
    acked, errors = produce(live_boot, topic, values, settings={"batch.size": 32768})
    assert errors == [] and len(acked) == 4000
    # Each live replica applies retention to its own log, through Raft.
    deadline = time.monotonic() + 30
    while earliest(live_boot, topic) == 0:
        assert time.monotonic() < deadline, "retention never moved the log start"
        time.sleep(0.3)
    assert earliest(live_boot, topic) < acked[3000][1]
    # DeleteRecords further on, at a record inside a batch: replicated.
    cut = acked[3000][1]
    deleted = admin.delete_records([TopicPartition(topic, 0, cut)])
    result = next(iter(deleted.values())).result(30)
    assert result.low_watermark == cut
    assert earliest(live_boot, topic) == cut

    # The node that was away needs entries its peers have dropped: it
    # installs the leader's snapshot, restarts its log there and follows.
    away.start()
    more, errors = produce(boot, topic, [b"u%05d" % i for i in range(100)])
    assert errors == [] and len(more) == 100
    # (Away for less than the replica lag, it may never have left the
    # in-sync replicas: the snapshot's install is what says it is back.)
    restarts = until(
        "the returned node installs the leader's snapshot",
        lambda: re.findall(
            rf"replica restarted its log from the leader's snapshot.*dir=\S*/{topic}-0/log offset=(\d+)",
            Path(away.log_path).read_text(),
        ),
        timeout=30,
    )
    assert len(restarts) == 1 and 0 < int(restarts[0]) <= cut, f"snapshot installs: {restarts}"
    wait_in_sync(nodes, topic, [1, 2, 3])

    # Moved onto that node alone, the partition is served from its copy:
    # from the cut on, every acknowledged record at its offset; nothing
    # below it.
    kadmin = KafkaAdminClient(bootstrap_servers=boot, request_timeout_ms=30000)
    try:
        answer = kadmin.alter_partition_reassignments({KafkaPartition(topic, 0): [away.node_id]})
        assert answer == {KafkaPartition(topic, 0): None}, answer
        deadline = time.monotonic() + 60
        while True:
            ongoing = kadmin.list_partition_reassignments()
            led, md = leaders(admin, topic)
            if not ongoing and md.topics[topic].partitions[0].replicas == [away.node_id]:
                break
            assert time.monotonic() < deadline, f"still moving: {ongoing}"
            time.sleep(0.3)
    finally:
        kadmin.close()
    assert earliest(boot, topic) == cut
    kept = [(p, o, v) for (p, o, v) in acked + more if o >= cut]
    seen = consume_all(boot, topic, 1, len(kept))
    assert all(seen.get(v) == (p, o) for (p, o, v) in kept), "every record from the cut on, at its offset"
    assert min(o for (_p, o) in seen.values()) == cut


class JoiningNode(ClusterNode):
    """A node started with `--cluster-join` and no node list: it serves
    nothing until it is added, so its start waits only for the process."""

    def __init__(self, node_id, data_dir, log_path, raft_port):
        super().__init__(node_id, data_dir, log_path, raft_port, nodes_arg="")
        self.added = False

    def command(self):
        line = super().command()
        at = line.index("--cluster-nodes")
        return line[:at] + ["--cluster-join"] + line[at + 2:]

    def ready_ports(self):
        return super().ready_ports() if self.added else []


def herald_cli(*args, timeout=120):
    import subprocess

    return subprocess.run(
        [str(herald_binary_path()), *args], capture_output=True, text=True, timeout=timeout
    )


KAFKA_TOOLS = Path(__file__).resolve().parents[2] / "bench" / "kafka" / "lib"


def kafka_tool(main, *args):
    """Runs one of Kafka's command-line tools (from the jars the tests
    fetch) to its end."""
    import subprocess

    assert any(KAFKA_TOOLS.glob("kafka-tools-*.jar")), f"run scripts/install-test-deps.sh: no Kafka tools in {KAFKA_TOOLS}"
    return subprocess.run(
        ["java", *KAFKA_TOOL_JVM_FLAGS, "-Xms64m", "-Xmx256m", "-cp", f"{KAFKA_TOOLS}/*",
         f"org.apache.kafka.tools.{main}", *args],
        capture_output=True, text=True, timeout=120,
    )


def quorum_voters(node, timeout=30.0):
    """The metadata quorum's voters as Kafka's MetadataQuorumCommand
    reports them through `node`, and its whole report. Asked again while
    the quorum has no leader (a removed leader's successor not elected
    yet): the tool then fails looking the leader up among the voters.
    The tool's own logging shares stdout with its report, so the voters
    are looked for anywhere in it, not at a line's start."""
    deadline = time.monotonic() + timeout
    while True:
        quorum = kafka_tool("MetadataQuorumCommand", "--bootstrap-server", node.bootstrap,
                            "describe", "--status")
        report = quorum.stdout + quorum.stderr
        voters = re.search(r"CurrentVoters:\s*(\[[^\n]*\])", quorum.stdout)
        if quorum.returncode == 0 and voters is not None:
            return sorted(int(i) for i in re.findall(r'"id": ?(\d+)', voters.group(1))), report
        assert time.monotonic() < deadline, report
        time.sleep(1)


def brokers_seen(node):
    md = AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(timeout=10)
    return sorted(md.brokers), md.cluster_id


@pytest.mark.restarts_broker
def test_a_node_added_to_a_running_cluster_is_listed_everywhere_and_takes_partitions(cluster, tmp_path):
    nodes = cluster
    boot = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": boot})
    topic = "growing"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(30)
    leaders(admin, topic)
    before, errors = produce(boot, topic, [b"g%05d" % i for i in range(300)])
    assert errors == [] and len(before) == 300
    cluster_id = brokers_seen(nodes[0])[1]

    # Node 4 starts on its own and waits; any member adds it.
    new = JoiningNode(4, tmp_path / "node-4", tmp_path / "node-4.log", free_port())
    new.port = free_port()
    new.bootstrap = f"127.0.0.1:{new.port}"
    new.start()
    try:
        nodes.append(new)  # stopped (and its log shown) by the fixture
        time.sleep(0.5)
        assert not port_accepts_kafka(new), "a joining node serves before it is added"
        added = herald_cli(
            "cluster", "add-node", "4",
            "--raft", f"127.0.0.1:{new.raft_port}", "--kafka", new.bootstrap,
            "--bootstrap", nodes[1].bootstrap,
        )
        assert added.returncode == 0, added.stderr
        assert "node 4 is a member" in added.stdout
        new.added = True
        new._wait_ready()

        # Every node lists four brokers, under the same cluster id.
        deadline = time.monotonic() + 30
        while True:
            views = {n.node_id: brokers_seen(n) for n in nodes}
            if all(v == ([1, 2, 3, 4], cluster_id) for v in views.values()):
                break
            assert time.monotonic() < deadline, f"brokers and cluster ids seen: {views}"
            time.sleep(0.3)
        described = herald_cli("cluster", "describe", "--bootstrap", new.bootstrap)
        assert described.returncode == 0, described.stderr
        assert f"cluster id: {cluster_id}" in described.stdout
        assert f"4        {new.bootstrap}" in described.stdout

        # Kafka's own tool sees four voters in the metadata quorum.
        voters, quorum = quorum_voters(nodes[0])
        assert voters == [1, 2, 3, 4], quorum
        assert re.search(rf"ClusterId:\s+{cluster_id}", quorum), quorum

        # Asking again is harmless; another address for the id is refused.
        again = herald_cli(
            "cluster", "add-node", "4",
            "--raft", f"127.0.0.1:{new.raft_port}", "--kafka", new.bootstrap,
            "--bootstrap", nodes[0].bootstrap,
        )
        assert again.returncode == 0, again.stderr
        clash = herald_cli(
            "cluster", "add-node", "4",
            "--raft", "127.0.0.1:1", "--kafka", new.bootstrap,
            "--bootstrap", nodes[0].bootstrap,
        )
        assert clash.returncode != 0 and "DuplicateVoter" in clash.stderr, clash.stderr

        # A node that is not running is not added (the answer says why
        # after the timeout); removing it cancels the addition.
        absent = free_port()
        waiting = herald_cli(
            "cluster", "add-node", "5",
            "--raft", f"127.0.0.1:{absent}", "--kafka", f"127.0.0.1:{free_port()}",
            "--timeout-ms", "3000", "--bootstrap", nodes[0].bootstrap,
        )
        assert waiting.returncode != 0 and "--cluster-join" in waiting.stderr, waiting.stderr
        cancelled = herald_cli("cluster", "remove-node", "5", "--bootstrap", nodes[1].bootstrap)
        assert cancelled.returncode == 0, cancelled.stderr
        assert all(brokers_seen(n)[0] == [1, 2, 3, 4] for n in nodes)

        # A partition moves onto the new node with every record.
        _, md = leaders(admin, topic)
        old = md.topics[topic].partitions[0].replicas
        target = [4] + old[:2]
        moved = herald_cli(
            "partition", "reassign", topic, "0", "--replicas", ",".join(map(str, target)),
            "--wait", "--timeout-ms", "60000", "--bootstrap", nodes[2].bootstrap,
        )
        assert moved.returncode == 0, moved.stderr
        assert f"{topic}/0 is on" in moved.stdout
        listed = herald_cli("partition", "reassignments", "--bootstrap", new.bootstrap)
        assert "no reassignment in progress" in listed.stdout, listed.stdout + listed.stderr
        deadline = time.monotonic() + 30
        while True:
            replicas = sorted(
                AdminClient({"bootstrap.servers": new.bootstrap})
                .list_topics(topic, timeout=10).topics[topic].partitions[0].replicas
            )
            if replicas == sorted(target):
                break
            assert time.monotonic() < deadline, f"node 4 sees replicas {replicas}"
            time.sleep(0.3)
        after, errors = produce(boot, topic, [b"h%05d" % i for i in range(300)])
        assert errors == [] and len(after) == 300
        seen = consume_all(new.bootstrap, topic, 1, 600)
        assert all(seen.get(v) == (p, o) for (p, o, v) in before + after), "every record, from node 4"
        deadline = time.monotonic() + 30
        by_id = {n.node_id: n for n in nodes}
        while stored_bytes(new, topic, 0) != stored_bytes(by_id[old[0]], topic, 0):
            assert time.monotonic() < deadline, "node 4's replica never caught up"
            time.sleep(0.3)

        # New topics are placed on all four nodes.
        spread = "spread"
        admin.create_topics([NewTopic(spread, num_partitions=4, replication_factor=1)])[spread].result(30)
        _, md = leaders(admin, spread)
        assert sorted(p.replicas[0] for p in md.topics[spread].partitions.values()) == [1, 2, 3, 4]

        # Restarted, the new node is a member at once and keeps its id.
        new.stop()
        new.start()
        assert brokers_seen(new) == ([1, 2, 3, 4], cluster_id)

        # Node 4 replaces node 3: node 3 cannot be removed while it holds
        # replicas (the offsets partitions among them); once everything on
        # it, the groups' offsets partitions included, is moved to node 4,
        # it can, and no node lists it any more.
        by_id = {n.node_id: n for n in nodes}
        refused = herald_cli("cluster", "remove-node", "3", "--bootstrap", nodes[0].bootstrap)
        assert refused.returncode != 0 and "__consumer_offsets/0" in refused.stderr, refused.stderr
        group = "replaced-coordinator"
        committed = commit_offsets(boot, topic, group, 250)
        moves = [("__consumer_offsets", p, [1, 2, 4]) for p in range(8)]
        for name in (topic, spread):
            _, md = leaders(admin, name)
            for p in md.topics[name].partitions.values():
                if 3 in p.replicas:
                    kept = [r for r in p.replicas if r != 3]
                    spare = [n for n in (4, 1, 2) if n not in kept]
                    moves.append((name, p.id, kept + spare[:len(p.replicas) - len(kept)]))
        for name, partition, replicas in moves:
            moved = herald_cli(
                "partition", "reassign", name, str(partition),
                "--replicas", ",".join(map(str, replicas)), "--wait", "--timeout-ms", "60000",
                "--bootstrap", nodes[0].bootstrap,
            )
            assert moved.returncode == 0, moved.stderr
        removed = herald_cli("cluster", "remove-node", "3", "--bootstrap", nodes[1].bootstrap)
        assert removed.returncode == 0, removed.stderr
        by_id[3].stop()
        remaining = [by_id[1], by_id[2], new]
        deadline = time.monotonic() + 30
        while True:
            views = {n.node_id: brokers_seen(n)[0] for n in remaining}
            if all(v == [1, 2, 4] for v in views.values()):
                break
            assert time.monotonic() < deadline, f"brokers seen after the removal: {views}"
            time.sleep(0.3)
        voters, quorum = quorum_voters(by_id[2])
        assert voters == [1, 2, 4], quorum
        # The cluster serves on without node 3: writes, and the group's
        # committed offsets, kept by the moved offsets partitions.
        boot = bootstrap(remaining)
        after_removal, errors = produce(boot, topic, [b"i%05d" % i for i in range(100)])
        assert errors == [] and len(after_removal) == 100
        assert committed_offset(boot, topic, group) == committed
    finally:
        new.stop()


IMAGE_BYTES = 8192


@pytest.fixture
def imaging_cluster(tmp_path, request):
    yield from running_cluster(tmp_path, request, extra=["--metadata-image-bytes", str(IMAGE_BYTES)])


def log_text(node, since=0):
    return Path(node.log_path).read_bytes()[since:].decode(errors="replace")


def metadata_snapshot(node):
    """The metadata replica's snapshot on `node` (written when its log is
    cut at an image), or None."""
    path = Path(node.data_dir) / "__cluster" / "metadata" / "raft-snapshot.json"
    return json.loads(path.read_text()) if path.exists() else None


def topic_state(node, names):
    """What `node` tells a client of its topics: names, and each one's
    retention.ms and partition count."""
    from confluent_kafka.admin import ConfigResource

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    md = admin.list_topics(timeout=10)
    listed = sorted(t for t in md.topics if not t.startswith("__"))
    futures = admin.describe_configs([ConfigResource("topic", n) for n in names])
    retention = {r.name: c["retention.ms"].value for r, f in futures.items() for c in [f.result(30)]}
    counts = {n: len(md.topics[n].partitions) for n in names if n in md.topics}
    return listed, retention, counts


@pytest.mark.restarts_broker
def test_a_metadata_log_cut_at_its_image_restores_every_node_and_a_new_one(imaging_cluster, tmp_path):
    """The metadata group's leader writes the cluster's state as one image
    once 8 KiB of commands follow the last one, and the log is cut there on
    every node. A restarted node and a node added afterwards start from
    the image: same topics, configs, users and quotas, records and
    committed offsets. (ACLs are in the image with the users; the secure
    cluster's test covers them through the log.)"""
    from confluent_kafka.admin import (
        AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, ScramCredentialInfo,
        ScramMechanism, UserScramCredentialUpsertion,
    )

    nodes = imaging_cluster
    boot = bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": boot})
    kept = [f"kept-{i}" for i in range(5)]
    gone = [f"gone-{i}" for i in range(3)]
    for future in admin.create_topics(
        [NewTopic(t, num_partitions=2, replication_factor=2) for t in kept + gone]
    ).values():
        future.result(30)
    for future in admin.delete_topics(gone, operation_timeout=30).values():
        future.result(30)
    for future in admin.create_partitions([NewPartitions(kept[1], 3)]).values():
        future.result(30)
    # Every config change is a command: enough of them for an image.
    for round in range(40):
        change = ConfigResource("topic", kept[0], incremental_configs=[
            ConfigEntry("retention.ms", str(3_600_000 + round),
                        incremental_operation=AlterConfigOpType.SET)
        ])
        for future in admin.incremental_alter_configs([change]).values():
            future.result(30)
    password = "carol-" + uuid.uuid4().hex[:8]
    upsert = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    quota = kafka_tool_config(boot, "--alter", "--entity-type", "users", "--entity-name", "carol",
                              "--add-config", "consumer_byte_rate=2097152")
    assert quota.returncode == 0, quota.stdout + quota.stderr
    acked, errors = produce(boot, kept[3], [b"m%04d" % i for i in range(200)])
    assert errors == [] and len(acked) == 200
    group = "imaged-offsets"
    committed = commit_offsets(boot, kept[3], group, 120)

    until("a node wrote a metadata image",
          lambda: any("metadata image written" in log_text(n) for n in nodes), timeout=30)
    until("every node cut its metadata log at the image",
          lambda: all(metadata_snapshot(n) is not None for n in nodes), timeout=30)
    # One more change after the image: it must come back too.
    for future in admin.create_topics([NewTopic("after-image", num_partitions=1, replication_factor=3)]).values():
        future.result(30)
    expected = until("every topic is listed",
                     lambda: (lambda state: state[0] == sorted(kept + ["after-image"]) and state)(topic_state(nodes[0], kept)))
    assert expected[1][kept[0]] == str(3_600_000 + 39)
    assert expected[2][kept[1]] == 3

    def same_everything(node):
        assert topic_state(node, kept) == expected
        client = AdminClient({"bootstrap.servers": node.bootstrap})
        users = client.describe_user_scram_credentials(["carol"])
        assert [m.mechanism for m in users["carol"].result(30).scram_credential_infos] == [ScramMechanism.SCRAM_SHA_256]
        described = kafka_tool_config(node.bootstrap, "--describe", "--entity-type", "users", "--entity-name", "carol")
        assert "consumer_byte_rate=2097152.0" in described.stdout, described.stdout + described.stderr
        seen = consume_all(node.bootstrap, kept[3], 2, 200)
        assert all(seen.get(v) == (p, o) for (p, o, v) in acked), f"records read through node {node.node_id}"
        assert committed_offset(node.bootstrap, kept[3], group) == committed

    # A restarted node applies its log from the image.
    restarted = nodes[1]
    mark = Path(restarted.log_path).stat().st_size
    restarted.stop()
    restarted.start()
    assert "metadata restored from the log's image" in log_text(restarted, mark)
    same_everything(restarted)

    # A node added now is sent the leader's snapshot and starts at the image.
    new = JoiningNode(4, tmp_path / "node-4", tmp_path / "node-4.log", free_port())
    new.port = free_port()
    new.bootstrap = f"127.0.0.1:{new.port}"
    new.start()
    nodes.append(new)  # stopped (and its log shown) by the fixture
    added = herald_cli(
        "cluster", "add-node", "4",
        "--raft", f"127.0.0.1:{new.raft_port}", "--kafka", new.bootstrap,
        "--bootstrap", nodes[0].bootstrap,
    )
    assert added.returncode == 0, added.stderr
    new.added = True
    new._wait_ready()
    assert "metadata restored from the log's image" in log_text(new)
    until("node 4 lists every node", lambda: brokers_seen(new)[0] == [1, 2, 3, 4])
    same_everything(new)


def kafka_tool_config(boot, *args):
    """Kafka's ConfigCommand against `boot`, run to its end."""
    import subprocess

    return subprocess.run(
        ["java", *KAFKA_TOOL_JVM_FLAGS, "-Xmx256m", "-cp", f"{KAFKA_TOOLS}/*", "kafka.admin.ConfigCommand",
         "--bootstrap-server", boot, *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )


def commit_offsets(boot, topic, group, offset):
    """Commits `offset` for partition 0 of `topic` as `group`; returns it."""
    consumer = Consumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()
    return offset


def committed_offset(boot, topic, group):
    consumer = Consumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def port_accepts_kafka(node):
    import socket

    try:
        socket.create_connection(("127.0.0.1", node.port), timeout=0.5).close()
        return True
    except OSError:
        return False


ADMIN_PASSWORD = "admin-" + uuid.uuid4().hex[:12]


class SecureClusterNode(ClusterNode):
    """A node with a SASL_PLAINTEXT listener besides its plain one (the
    address the cluster's node list names), and authorization on."""

    def __init__(self, node_id, data_dir, log_path, raft_port, nodes_arg, sasl_port):
        super().__init__(node_id, data_dir, log_path, raft_port, nodes_arg)
        self.sasl_port = sasl_port
        self.config_path = Path(str(data_dir) + ".toml")

    def command(self):
        self.config_path.write_text(f"""
[[listeners]]
name = "SASL"
listen = "127.0.0.1:{self.sasl_port}"
protocol = "SASL_PLAINTEXT"

[security]
authorization = true
admin_user = "admin"
""")
        return super().command() + ["--config", str(self.config_path)]

    def ready_ports(self):
        return super().ready_ports() + [self.sasl_port]

    def start(self):
        with environment(HERALD_ADMIN_PASSWORD=ADMIN_PASSWORD):
            super().start()


@pytest.fixture
def secure_cluster(tmp_path, request):
    yield from running_cluster(tmp_path, request, secure=True)


def sasl_conf(node, user, password):
    return {
        "bootstrap.servers": f"127.0.0.1:{node.sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
    }


def write_errors(conf, topic, count=5):
    """Delivery errors (codes) of `count` records written with `conf`."""
    errors = []
    producer = Producer({**conf, "message.timeout.ms": 10000, "retries": 0, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, on_delivery=lambda err, _m: errors.append(err and err.code()))
    assert producer.flush(30) == 0, "every record answered"
    return [e for e in errors if e is not None]


def until(what, check, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


@pytest.mark.restarts_broker
def test_users_acls_and_quotas_changed_on_one_node_hold_on_every_node(secure_cluster, tmp_path):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
        ResourceType, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion,
    )

    nodes = secure_cluster
    first, second, third = nodes
    # A client must outlive its futures.
    admins = {node.node_id: AdminClient(sasl_conf(node, "admin", ADMIN_PASSWORD)) for node in nodes}
    admin_of = lambda node: admins[node.node_id]
    topic = "secured"
    # Clients of the SASL listener are told every node's SASL address
    # (each node advertises its listeners through the metadata log), not
    # the plain one the node list names.
    sasl_ports = sorted(n.sasl_port for n in nodes)
    until(
        "every node's SASL address is advertised",
        lambda: sorted(b.port for b in admin_of(third).list_topics(timeout=10).brokers.values()) == sasl_ports,
    )
    plain = AdminClient({"bootstrap.servers": third.bootstrap}).list_topics(timeout=10)
    assert sorted(b.port for b in plain.brokers.values()) == sorted(n.port for n in nodes)
    admin_of(first).create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(30)

    # A user made through one node logs in on every node.
    password = "alice-" + uuid.uuid4().hex[:8]
    upsert = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
    )
    for future in admin_of(first).alter_user_scram_credentials([upsert]).values():
        future.result(30)
    for node in nodes:
        alice = AdminClient(sasl_conf(node, "alice", password))
        md = until(f"alice logs in on node {node.node_id}", lambda: alice.list_topics(timeout=5))
        # Without an ACL she sees no topic.
        assert topic not in md.topics

    # An ACL created through the second node lets her write through the
    # third; deleted through the third, it stops her on the first.
    acls = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", op,
                   AclPermissionType.ALLOW)
        for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
    ]
    assert write_errors(sasl_conf(third, "alice", password), topic) == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 5
    for future in admin_of(second).create_acls(acls).values():
        future.result(30)
    until("alice writes through node 3", lambda: write_errors(sasl_conf(third, "alice", password), topic) == [])
    described = admin_of(third).describe_acls(
        AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)
    ).result(30)
    assert sorted(str(b.operation) for b in described) == sorted(str(b.operation) for b in acls)

    # A quota set through the first node is described by the third
    # (Kafka's own tool, over SASL).
    command_config = tmp_path / "admin.properties"
    command_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="admin" password="{ADMIN_PASSWORD}";\n'
    )

    def configs(node, *args):
        import subprocess

        run = subprocess.run(
            ["java", *KAFKA_TOOL_JVM_FLAGS, "-Xmx256m", "-cp", f"{KAFKA_TOOLS}/*", "kafka.admin.ConfigCommand",
             "--bootstrap-server", f"127.0.0.1:{node.sasl_port}", "--command-config", str(command_config),
             *args],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        )
        return run.returncode, run.stdout + run.stderr

    code, out = configs(first, "--alter", "--entity-type", "users", "--entity-name", "alice",
                        "--add-config", "producer_byte_rate=1048576")
    assert code == 0, out
    code, out = configs(third, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert code == 0 and "producer_byte_rate=1048576.0" in out, out

    for future in admin_of(third).delete_acls(
        [AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", None,
                          AclOperation.ANY, AclPermissionType.ANY)]
    ).values():
        future.result(30)
    until(
        "alice is refused through node 1",
        lambda: write_errors(sasl_conf(first, "alice", password), topic) == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 5,
    )

    # A node restarted applies the metadata log again before it serves:
    # the deleted ACL does not come back, even for a moment, and the user
    # and the quota are still there.
    second.stop()
    second.start()
    assert write_errors(sasl_conf(second, "alice", password), topic) == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 5
    code, out = configs(second, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert code == 0 and "producer_byte_rate=1048576.0" in out, out
