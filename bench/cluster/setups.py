"""The setups the cluster benchmark compares, and how each is started.

A setup is a kind of cluster (herald's single node, herald's three nodes,
Kafka's three brokers) and what varies on it (topic configs, broker
settings, where Kafka's partition leader is placed). `with_cluster` starts
a fresh cluster for one measurement and always stops it and removes its
data.
"""

import shutil
import tempfile

from confluent_kafka.admin import AdminClient, NewTopic

import failover
import kafka_cluster
from herald_nodes import Herald

# Throughput setups: (name, label, cluster kind, topic configs).
THROUGHPUT = (
    ("herald-1", "herald, 1 node", "herald-1", {}),
    ("herald-rf3", "herald, 3 nodes, RF 3", "herald-3", {}),
    ("herald-rf3-cached", "herald, 3 nodes, RF 3, write.caching=true (no fsync)", "herald-3",
     {"write.caching": "true"}),
    ("kafka-rf3", "Kafka, 3 brokers, RF 3 (no fsync)", "kafka", {}),
    ("kafka-rf3-flush", "Kafka, 3 brokers, RF 3, flush.messages=1", "kafka", {"flush.messages": "1"}),
)
# Failover setups: (name, label, cluster kind, broker settings, where the
# partition leader is placed for Kafka).
FAILOVER = (
    ("herald-rf3", "herald, 3 nodes, defaults (election after 3-4 s)", "herald-3", {}, None),
    ("kafka-rf3", "Kafka, 3 brokers, defaults (session 9 s)", "kafka", {}, "off-controller"),
    ("kafka-rf3-ctrl", "Kafka, defaults, leader = active controller", "kafka", {}, "on-controller"),
    ("kafka-rf3-session2s", "Kafka, session 2 s, heartbeat 0.5 s", "kafka", kafka_cluster.FAST_SESSION,
     "off-controller"),
)
QUICK_FAILOVER = ("herald-rf3", "kafka-rf3")
# Consumer-group commit setups: (name, label, cluster kind).
COMMITS = (
    ("herald-1", "herald, 1 node (fsync per commit)", "herald-1"),
    ("herald-rf3", "herald, 3 nodes (Raft, RF 3, fsync)", "herald-3"),
    ("kafka-rf3", "Kafka, 3 brokers (offsets RF 3, no fsync)", "kafka"),
)


def start_cluster(kind, work, broker_settings=None):
    if kind == "herald-1":
        cluster = Herald(1, work)
    elif kind == "herald-3":
        cluster = Herald(3, work)
    else:
        cluster = kafka_cluster.KafkaCluster(work, broker_settings)
    cluster.start()
    return cluster


def create(cluster, topic, configs, placement=None):
    """A topic of one partition, replicated on every node of `cluster`;
    for Kafka, `placement` puts the leader off or on the active controller."""
    replication = 1 if cluster.nodes == 1 else 3
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    if placement is None:
        new = NewTopic(topic, num_partitions=1, replication_factor=replication, config=configs)
    else:
        controller = cluster.active_controller()
        if controller is None:
            raise RuntimeError("kafka: no active controller in the brokers' logs")
        others = [n for n in (1, 2, 3) if n != controller]
        first = controller if placement == "on-controller" else others[0]
        rest = [n for n in (1, 2, 3) if n != first]
        new = NewTopic(topic, num_partitions=1, replica_assignment=[[first, *rest]], config=configs)
    admin.create_topics([new])[topic].result(60)
    failover.partition_leader(admin, topic)


def with_cluster(args, kind, fn, broker_settings=None):
    """Runs fn(cluster) on a fresh cluster of `kind`, stopped and its data
    removed afterwards whatever happens."""
    work = tempfile.mkdtemp(prefix=f"herald-bench-cluster-{kind}-", dir=args.data_root)
    cluster = None
    try:
        cluster = start_cluster(kind, work, broker_settings)
        return fn(cluster)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
