"""A relay tree of four herald nodes, seed 003's figure 4, driven by
confluent-kafka (librdkafka).

    M  (a herald node: the tree's root)
    +-- R1 (relays M)
    |   +-- R3 (relays R1; knows M too)
    +-- R2 (relays M)

A relay (`--relay-upstream`, `--relay-topics`) mirrors the topic from its
upstream by fetching, serves its own consumers from its copy, and forwards
what its producers send to the upstream's leader. Every node then holds
the same records at the same offsets, whichever node they were produced
to. When R1 dies (SIGKILL), R3 turns to M, the other address it knows, and
the rest of the tree carries on: nothing acknowledged is lost anywhere.
Push subscribers (gRPC) on the relays receive from their relay's copy, and
a push publish on a relay travels up to M.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
)

from broker import HeraldBroker
from conftest import EXTERNAL_BOOTSTRAP, KAFKA_LIB, herald_binary_path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "push"))
from push_client import Session, channel, generate_stubs  # noqa: E402

pytestmark = pytest.mark.skipif(
    bool(EXTERNAL_BOOTSTRAP or KAFKA_LIB), reason="starts herald nodes of its own"
)

KAFKA_TOOLS = Path(__file__).resolve().parents[2] / "bench" / "kafka" / "lib"

TOPIC = "tree"
PARTITIONS = 2


def relay_args(upstreams):
    return [
        "--relay-upstream", ",".join(u.bootstrap for u in upstreams),
        "--relay-topics", TOPIC,
    ]


def wait_for_topic(node, timeout=30.0):
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=5)
        topic = md.topics.get(TOPIC)
        if topic is not None and topic.error is None and len(topic.partitions) == PARTITIONS:
            return
        time.sleep(0.2)
    raise AssertionError(f"{node.bootstrap} never mirrored '{TOPIC}':\n{node.log_tail(30)}")


@pytest.fixture
def tree(tmp_path, request):
    binary = herald_binary_path()

    def node(name, extra=()):
        return HeraldBroker(binary, tmp_path / name, tmp_path / f"{name}.log", extra)

    root = node("m", ["--auto-create-topics", "false"])
    nodes = [root]
    try:
        root.start()
        admin = AdminClient({"bootstrap.servers": root.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        r1 = node("r1", relay_args([root]))
        r2 = node("r2", relay_args([root]))
        nodes += [r1, r2]
        r1.start()
        r2.start()
        # R3 hangs below R1, and knows M as the address to turn to.
        r3 = node("r3", relay_args([r1, root]))
        nodes.append(r3)
        r3.start()
        for relay in (r1, r2, r3):
            wait_for_topic(relay)
        yield {"m": root, "r1": r1, "r2": r2, "r3": r3}
    finally:
        report = getattr(request.node, "report_call", None)
        for n in nodes:
            if report is not None and report.failed:
                print(f"--- {n.data_dir.name} log ---\n{n.log_tail(30)}")
            n.stop()


def produce(node, values, idempotent=False):
    """Produces `values` to `node` with acks=all (librdkafka's idempotent
    producer with five requests in flight when `idempotent`, else one at a
    time); returns {value: (partition, offset)} as the delivery reports
    state them."""
    settings = (
        {"enable.idempotence": True, "max.in.flight.requests.per.connection": 5, "linger.ms": 2}
        if idempotent
        else {"enable.idempotence": False, "max.in.flight.requests.per.connection": 1}
    )
    producer = Producer({
        "bootstrap.servers": node.bootstrap,
        "acks": "all",
        "message.timeout.ms": 60000,
        **settings,
    })
    acked, errors = {}, []

    def delivered(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    for i, value in enumerate(values):
        producer.produce(TOPIC, key=value, value=value, callback=delivered)
        if i % 50 == 0:
            producer.poll(0)
    assert producer.flush(90) == 0, "deliveries still pending"
    assert errors == [], errors
    return acked


def read_all(node, expected, timeout=60.0):
    """Reads both partitions of `node` from offset 0 until `expected`
    values are there; returns {value: (partition, offset)} and the values
    seen more than once."""
    consumer = Consumer({
        "bootstrap.servers": node.bootstrap,
        "group.id": f"reader-{time.time_ns()}",
        "enable.auto.commit": False,
    })
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen, repeated = {}, []
    last_offset = {}
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                if msg.error() is not None:
                    continue
                p, o = msg.partition(), msg.offset()
                assert o > last_offset.get(p, -1), f"{node.bootstrap}: partition {p} went back to {o}"
                last_offset[p] = o
                if msg.value() in seen:
                    repeated.append(msg.value())
                seen[msg.value()] = (p, o)
    finally:
        consumer.close()
    return seen, repeated


def values(prefix, count):
    return [f"{prefix}-{i:05d}".encode() for i in range(count)]


def test_every_node_of_the_tree_delivers_what_any_node_took(tree):
    acked = {}
    acked.update(produce(tree["m"], values("via-m", 300)))
    acked.update(produce(tree["r1"], values("via-r1", 300)))
    acked.update(produce(tree["r3"], values("via-r3", 300)))
    assert len(acked) == 900
    for name, node in tree.items():
        seen, repeated = read_all(node, len(acked))
        missing = set(acked) - set(seen)
        assert not missing, f"{name} lacks {len(missing)} acknowledged records"
        assert repeated == [], f"{name} delivered {len(repeated)} records twice"
        # A relay's producer is answered with the upstream's offset, and
        # every copy holds each record at that same offset.
        moved = {v: (seen[v], where) for v, where in acked.items() if seen[v] != where}
        assert not moved, f"{name}: {len(moved)} records at other offsets, e.g. {next(iter(moved.items()))}"


def test_the_tree_carries_on_when_a_relay_dies(tree):
    acked = produce(tree["r3"], values("before", 200))
    read_all(tree["r3"], len(acked))
    tree["r1"].kill()
    # R3 loses its upstream: its copier and its forwarded produces turn to
    # M, the other address it knows.
    acked.update(produce(tree["r3"], values("after-via-r3", 200)))
    acked.update(produce(tree["m"], values("after-via-m", 200)))
    acked.update(produce(tree["r2"], values("after-via-r2", 200)))
    for name in ("m", "r2", "r3"):
        seen, repeated = read_all(tree[name], len(acked))
        missing = set(acked) - set(seen)
        assert not missing, f"{name} lacks {len(missing)} acknowledged records after R1 died"
        assert repeated == [], f"{name} delivered {len(repeated)} records twice"
        assert all(seen[v] == where for v, where in acked.items()), f"{name}: offsets differ"


def java_idempotent_produce(node, tmp_path, count):
    """Kafka's own Java producer (VerifiableProducer, idempotence on, five
    requests in flight) sends `count` records to `node`; returns
    {value: (partition, offset)} from its acknowledgements."""
    config = tmp_path / "java-producer.properties"
    config.write_text(
        "enable.idempotence=true\nmax.in.flight.requests.per.connection=5\n"
        "retries=2147483647\ndelivery.timeout.ms=60000\n"
    )
    run = subprocess.run(
        ["java", "-Xms64m", "-Xmx256m", "-cp", f"{KAFKA_TOOLS}/*",
         "org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", node.bootstrap,
         "--topic", TOPIC, "--max-messages", str(count), "--acks", "-1",
         "--value-prefix", "7", "--command-config", str(config)],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    failed = [e for e in events if e.get("name") == "producer_send_error"]
    assert failed == [], failed[:3]
    return {
        e["value"].encode(): (e["partition"], e["offset"])
        for e in events if e.get("name") == "producer_send_success"
    }


def test_idempotent_producers_write_through_relays_once_each(tree, tmp_path):
    # librdkafka's idempotent producer on R3 (two relays below the root)
    # and on R2, and Kafka's Java producer on R1: each relay gets the
    # producer id from its upstream, and the root's leader judges the
    # sequences of batches forwarded as they were sent.
    acked = {}
    acked.update(produce(tree["r3"], values("idem-r3", 400), idempotent=True))
    acked.update(produce(tree["r2"], values("idem-r2", 400), idempotent=True))
    java = java_idempotent_produce(tree["r1"], tmp_path, 300)
    assert len(java) == 300
    acked.update(java)
    for name, node in tree.items():
        seen, repeated = read_all(node, len(acked))
        missing = set(acked) - set(seen)
        assert not missing, f"{name} lacks {len(missing)} acknowledged records"
        assert repeated == [], f"{name} delivered {len(repeated)} records twice"
        assert all(seen[v] == where for v, where in acked.items()), f"{name}: offsets differ"


def topic_configs(node):
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    resource = ConfigResource("topic", TOPIC)
    described = admin.describe_configs([resource])[resource].result(30)
    return {name: entry.value for name, entry in described.items()}


def test_relays_take_the_topic_configs_of_their_upstream(tree):
    root = tree["m"]
    default_retention = topic_configs(tree["r2"])["retention.ms"]
    admin = AdminClient({"bootstrap.servers": root.bootstrap})
    resource = ConfigResource("topic", TOPIC, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "65536", incremental_operation=AlterConfigOpType.SET),
    ])
    admin.incremental_alter_configs([resource])[resource].result(30)

    def wait_until(name, wanted):
        deadline = time.monotonic() + 30
        while True:
            got = topic_configs(tree[name])
            if all(got.get(k) == v for k, v in wanted.items()):
                return
            assert time.monotonic() < deadline, f"{name} has {got}"
            time.sleep(0.3)

    for name in ("r1", "r2", "r3"):
        wait_until(name, {"retention.ms": "3600000", "max.message.bytes": "65536"})
    # The copy enforces what it took: a batch over the limit is refused on
    # the relay itself.
    producer = Producer({"bootstrap.servers": tree["r3"].bootstrap, "message.max.bytes": 1000000,
                         "message.timeout.ms": 20000, "enable.idempotence": False})
    errors = []
    producer.produce(TOPIC, value=b"x" * 200000, callback=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, errors

    # An override removed upstream goes from every relay too.
    resource = ConfigResource("topic", TOPIC, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    admin.incremental_alter_configs([resource])[resource].result(30)
    for name in ("r1", "r2", "r3"):
        wait_until(name, {"retention.ms": default_retention, "max.message.bytes": "65536"})


@pytest.fixture(scope="module")
def proto(tmp_path_factory):
    return generate_stubs(tmp_path_factory.mktemp("generated"))


def test_push_subscribers_on_relays_receive_what_any_node_took(tree, proto):
    keys = [b"feed.eu.%d" % k for k in range(4)]
    subscribers = {}
    for name in ("r2", "r3"):
        session = Session(proto, tree[name].push_address)
        session.subscribe(1, TOPIC, pattern="feed.>", start="earliest")
        subscribers[name] = session
    try:
        producer = Producer({"bootstrap.servers": tree["m"].bootstrap, "acks": "all"})
        acked = {}

        def delivered(err, msg):
            assert err is None, err
            acked[(msg.partition(), msg.offset())] = msg.value()

        for i in range(100):
            producer.produce(TOPIC, key=keys[i % 4], value=b"kafka-%d" % i, callback=delivered)
        assert producer.flush(60) == 0
        # A publish on the deepest relay goes up to M and comes back down.
        pb = proto.pb
        ch = channel(tree["r3"].push_address)
        stub = proto.rpc.HeraldStub(ch)
        try:
            for i in range(50):
                answer = stub.Publish(
                    pb.PublishRequest(request_id=i, topic=TOPIC, key=keys[i % 4], value=b"push-%d" % i),
                    timeout=30,
                )
                assert not answer.HasField("error"), answer.error
                acked[(answer.partition, answer.offset)] = b"push-%d" % i
        finally:
            ch.close()
        assert len(acked) == 150
        for name, session in subscribers.items():
            session.wait_for(
                lambda s: len([d for d in s.deliveries if d[0] == 1]) >= len(acked),
                what=f"every record on {name}",
            )
            got = {(p, o): v for (sid, p, o, _k, v) in session.deliveries if sid == 1}
            assert got == acked, f"{name}: push deliveries differ from what was acknowledged"
            assert len(session.deliveries) == len(acked), f"{name}: a record delivered twice"
    finally:
        for session in subscribers.values():
            session.close()


def test_relays_follow_partitions_the_root_adds(tree):
    from confluent_kafka.admin import NewPartitions

    root = tree["m"]
    admin = AdminClient({"bootstrap.servers": root.bootstrap})
    admin.create_partitions([NewPartitions(TOPIC, PARTITIONS + 2)])[TOPIC].result(30)
    # Records on the new partitions, written at the root.
    producer = Producer({"bootstrap.servers": root.bootstrap, "acks": "all"})
    acked = {}

    def delivered(err, msg):
        assert err is None, err
        acked[msg.value()] = (msg.partition(), msg.offset())

    for p in (PARTITIONS, PARTITIONS + 1):
        for i in range(20):
            producer.produce(TOPIC, value=b"grown-%d-%02d" % (p, i), partition=p, callback=delivered)
    assert producer.flush(60) == 0 and len(acked) == 40
    # Every relay, R3 through R1 included, grows its copy and holds them at
    # the root's offsets.
    for name in ("r1", "r2", "r3"):
        relay = tree[name]
        consumer = Consumer({"bootstrap.servers": relay.bootstrap, "group.id": f"grown-{name}",
                             "enable.auto.commit": False})
        deadline = time.monotonic() + 60
        seen = {}
        try:
            while len(seen) < 40:
                assert time.monotonic() < deadline, f"{name} has {len(seen)} of the 40 records"
                md = consumer.list_topics(TOPIC, timeout=10)
                if len(md.topics[TOPIC].partitions) < PARTITIONS + 2:
                    time.sleep(0.3)
                    continue
                if not consumer.assignment():
                    consumer.assign([TopicPartition(TOPIC, p, 0) for p in (PARTITIONS, PARTITIONS + 1)])
                for msg in consumer.consume(100, 0.5):
                    if msg.error() is None:
                        seen[msg.value()] = (msg.partition(), msg.offset())
        finally:
            consumer.close()
        assert seen == acked, f"{name}: records moved"
