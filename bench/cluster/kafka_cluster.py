"""Apache Kafka 4.3.1 with three brokers on 127.0.0.1 (KRaft).

Three combined nodes (`process.roles=broker,controller`, node ids 1-3),
each with its own client and controller port and its own data directory,
the controller quorum made of all three: the same shape as a three-node
herald cluster, where every node holds the metadata group and replicas.
The jars are bench/kafka/lib (fetched by bench/kafka/setup.sh, the wire
benchmark's copy of ../shared/peers/kafka, which runs one broker).

Settings (the stock defaults unless listed; `extra` adds or replaces):
- heap -Xms1G -Xmx1G per broker, G1, the flags of kafka-server-start.sh;
- default.replication.factor=3, min.insync.replicas=2 (acks=all then
  needs the leader and one follower, herald's majority of three; Kafka's
  default is 1), offsets and transaction topics with replication 3;
- no fsync on acks=all (Kafka's default: flush.messages and flush.ms
  unset, the page cache); `flush.messages=1` on a topic is the
  like-for-like durability point with herald (every replica's append
  fsynced before it counts);
- broker.session.timeout.ms=9000, broker.heartbeat.interval.ms=2000,
  controller.quorum.election.timeout.ms=1000,
  controller.quorum.fetch.timeout.ms=2000 (the defaults, which set how
  soon a dead leader is fenced and its partitions get a new leader);
- log.segment.delete.delay.ms=0, group.initial.rebalance.delay.ms=0,
  auto.create.topics.enable=false (as in bench/kafka's config).
"""

import os
import re
import subprocess
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

import procs

ROOT = Path(__file__).resolve().parents[2]
KAFKA_DIR = ROOT / "bench" / "kafka"
LIB = KAFKA_DIR / "lib"
CP = str(LIB / "*")
TOOLS_LOG = KAFKA_DIR / "config" / "tools-log4j2.properties"
SERVER_LOG = KAFKA_DIR / "config" / "log4j2.properties"
HEAP = os.environ.get("KAFKA_HEAP_OPTS", "-Xms1G -Xmx1G").split()
JVM = ("-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
       "-XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true").split()

BASE = {
    "process.roles": "broker,controller",
    "inter.broker.listener.name": "PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "log.retention.hours": "1",
    "log.segment.delete.delay.ms": "0",
}

# A labelled variant for the failover benchmark: a dead broker fenced after
# 2 s instead of 9 s (the controller quorum's own timeouts left as they are).
FAST_SESSION = {"broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "500"}


LEADER_LINE = re.compile(
    r"Completed transition to Leader\(localVoterNode=VoterNode\(voterKey=ReplicaKey\(id=(\d+),.*?epoch=(\d+)"
)


def setup():
    """The jars, fetched once (about 55 MB) by bench/kafka/setup.sh."""
    if not list(LIB.glob("kafka_2.13-*.jar")):
        subprocess.run([str(KAFKA_DIR / "setup.sh")], check=True)


class KafkaCluster:
    """Three Kafka brokers; data and logs under `work`."""

    nodes = 3

    def __init__(self, work, extra=None):
        self.work = Path(work)
        self.extra = dict(extra or {})
        self.procs = {}
        self.ports = {i: procs.free_port() for i in range(1, 4)}
        self.controller_ports = {i: procs.free_port() for i in range(1, 4)}

    def properties(self, node_id):
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.controller_ports.items())
        props = dict(BASE)
        props.update({
            "node.id": str(node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.ports[node_id]}"
                         f",CONTROLLER://127.0.0.1:{self.controller_ports[node_id]}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.ports[node_id]}",
            "log.dirs": str(self.work / f"k{node_id}" / "data"),
        })
        props.update(self.extra)
        return props

    def _write_config(self, node_id):
        home = self.work / f"k{node_id}"
        home.mkdir(parents=True, exist_ok=True)
        path = home / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties(node_id).items()))
        return path

    def _format(self, configs):
        java = ["java", "-Xmx256m", f"-Dlog4j2.configurationFile={TOOLS_LOG}", "-cp", CP]
        cluster_id = subprocess.run(
            java + ["kafka.tools.StorageTool", "random-uuid"],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout.strip()
        formats = [
            subprocess.Popen(java + ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(c)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for c in configs
        ]
        for proc in formats:
            _, err = proc.communicate(timeout=60)
            if proc.returncode != 0:
                raise RuntimeError(f"kafka storage format failed: {err[-2000:]}")

    def start(self):
        configs = {i: self._write_config(i) for i in self.ports}
        self._format(configs.values())
        for node_id, config in configs.items():
            home = self.work / f"k{node_id}"
            args = ["java", *HEAP, *JVM, f"-Dkafka.logs.dir={home}",
                    f"-Dlog4j2.configurationFile={SERVER_LOG}", "-cp", CP, "kafka.Kafka", str(config)]
            self.procs[node_id] = procs.spawn(args, home / "stdout.log")
        for node_id, proc in self.procs.items():
            procs.wait_port(self.ports[node_id], proc, self.work / f"k{node_id}" / "stdout.log", 90)
        self._wait_brokers(60)

    def _wait_brokers(self, timeout_s):
        """Until all three brokers are registered and unfenced (listed by
        Metadata)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if len(admin.list_topics(timeout=5).brokers) == self.nodes:
                    return
            except Exception:  # noqa: BLE001 - brokers still starting
                pass
            time.sleep(0.3)
        raise RuntimeError(f"kafka: not all brokers registered after {timeout_s}s")

    def active_controller(self):
        """The controller quorum's leader, from the brokers' logs (in KRaft
        DescribeCluster names a random broker, not the active controller):
        the node whose latest "Completed transition to Leader" has the
        highest epoch."""
        best = (-1, None)
        for node_id in self.ports:
            log = self.work / f"k{node_id}" / "server.log"
            text = log.read_text(errors="replace") if log.exists() else ""
            for match in LEADER_LINE.finditer(text):
                best = max(best, (int(match.group(2)), int(match.group(1))))
        return best[1]

    @property
    def bootstrap(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def kill(self, node_id):
        """SIGKILL to one broker (reaped by `stop`)."""
        self.procs[node_id].kill()

    def stop(self):
        # Combined nodes shutting down together may wait on each other's
        # controlled shutdown; the data is thrown away, so 10 s is enough.
        procs.stop(list(self.procs.values()), 10)
        self.procs = {}
