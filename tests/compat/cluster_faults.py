"""Fault injection on a three-node herald cluster, with a history checker.

Runs inside a private network namespace (`unshare -rn`, so no root and
nothing of the host's network is touched): three `herald serve` nodes on
127.0.0.2, .3 and .4; Kafka's VerifiableProducer (acks=all, one request in
flight, so retries cannot reorder) writes increasing integers while a
nemesis, every few seconds, does one of (each once per round, in a random
order):

- SIGKILL a partition leader, and restart it a little later;
- SIGSTOP a node for longer than an election takes, then SIGCONT it;
- cut a node off from the two others (`ip rule ... prohibit` both ways),
  then heal the cut.

Then every fault is healed, Kafka's VerifiableConsumer reads the whole
topic, and the checker compares: every acknowledged value must be read, at
the partition and offset it was acknowledged at; within a partition,
values must come in the order they were acknowledged; values stored at
more than one offset (a producer's retry of a write that had in fact
committed, whose earlier copy is a duplicate and not a move) are counted
and reported, and fail the run with `--idempotent` (the Java
producer's defaults: idempotence on, five requests in flight), where the
broker must drop such retries.

Usage (normally through test_cluster_faults.py or scripts/cluster-faults.sh):
    unshare -rn python cluster_faults.py --herald BIN --kafka-lib DIR --work DIR --seconds 30
Prints one JSON report line last; exits 1 when an invariant is broken.
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

NODES = {1: "127.0.0.2", 2: "127.0.0.3", 3: "127.0.0.4"}
CLIENT_IP = "127.0.0.1"
KAFKA_PORT, RAFT_PORT, ADMIN_PORT, PUSH_PORT = 9092, 9193, 9644, 9093
TOPIC, PARTITIONS = "faults", 3


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def port_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class Node:
    def __init__(self, node_id, binary, work):
        self.id = node_id
        self.ip = NODES[node_id]
        self.binary = binary
        self.dir = work / f"node-{node_id}"
        self.log = work / f"node-{node_id}.log"
        self.proc = None
        self.stopped = False

    def command(self):
        nodes = ",".join(
            f"{i}={ip}:{RAFT_PORT}={ip}:{KAFKA_PORT}" for i, ip in NODES.items()
        )
        return [
            str(self.binary), "serve",
            "--data-dir", str(self.dir),
            "--kafka-listen", f"{self.ip}:{KAFKA_PORT}",
            "--admin-listen", f"{self.ip}:{ADMIN_PORT}",
            "--push-listen", f"{self.ip}:{PUSH_PORT}",
            "--node-id", str(self.id),
            "--cluster-listen", f"{self.ip}:{RAFT_PORT}",
            "--cluster-nodes", nodes,
            # The checking consumer's group forms in half a second rather
            # than the default 3 s (and 3 s more as members keep arriving).
            "--group-initial-rebalance-delay-ms", "500",
        ]

    def start(self):
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not port_open(self.ip, KAFKA_PORT):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"node {self.id} did not start: {self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)
        self.stopped = True

    def resume(self):
        if self.proc is not None and self.stopped:
            self.proc.send_signal(signal.SIGCONT)
        self.stopped = False

    def stop(self):
        if self.proc is None:
            return
        self.resume()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


class Network:
    """Cuts between node addresses with policy-routing rules: `prohibit`
    fails a connection at once (EACCES), so nothing waits for a timeout."""

    def __init__(self):
        sh("ip", "link", "set", "lo", "up")
        # The local table is consulted first by default (rule 0); moved
        # behind the cut rules so that those are seen first.
        sh("ip", "rule", "add", "pref", "100", "lookup", "local")
        sh("ip", "rule", "del", "pref", "0")
        self.cut = set()

    def isolate(self, node_id):
        ip = NODES[node_id]
        for other, other_ip in NODES.items():
            if other == node_id:
                continue
            for a, b in ((ip, other_ip), (other_ip, ip)):
                sh("ip", "rule", "add", "pref", "10", "from", a, "to", b, "prohibit")
        self.cut.add(node_id)

    def heal(self):
        while sh("ip", "rule", "del", "pref", "10", check=False).returncode == 0:
            pass
        self.cut.clear()


def java(kafka_lib, main, *args):
    return ["java", "-Xms64m", "-Xmx256m", "-cp", f"{kafka_lib}/*",
            f"org.apache.kafka.tools.{main}", *args]


def cluster_bootstrap():
    return ",".join(f"{ip}:{KAFKA_PORT}" for ip in NODES.values())


def create_topic():
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster_bootstrap()})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3)])[TOPIC].result(60)
    return admin


def leaders(admin):
    md = admin.list_topics(TOPIC, timeout=10)
    return {p.id: p.leader for p in md.topics[TOPIC].partitions.values()}


def wait_for_leaders(admin, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            led = leaders(admin)
            if len(led) == PARTITIONS and all(v >= 0 for v in led.values()):
                return led
        except Exception:
            pass
        time.sleep(0.3)
    raise RuntimeError("partitions without a leader")


FAULTS = ["kill-leader", "pause", "isolate"]


def nemesis(nodes, network, admin, rng, until, events):
    """Injects faults until `until`, one at a time, each healed before the next.
    The kinds come in rounds, each kind once per round in a random order, so
    that a short run (two or three faults) still has as many kinds as faults."""
    kinds = []
    while time.monotonic() < until - 6:
        time.sleep(rng.uniform(1.0, 2.5))
        if not kinds:
            kinds = rng.sample(FAULTS, len(FAULTS))
        kind = kinds.pop()
        try:
            led = leaders(admin)
        except Exception:
            led = {}
        leader_ids = [v for v in led.values() if v > 0]
        target = rng.choice(leader_ids) if leader_ids else rng.choice(list(nodes))
        node = nodes[target]
        t0 = time.monotonic()
        if kind == "kill-leader":
            node.kill()
            time.sleep(rng.uniform(2.0, 4.0))
            node.start()
        elif kind == "pause":
            node.pause()
            time.sleep(rng.uniform(2.5, 4.0))
            node.resume()
        else:
            network.isolate(target)
            time.sleep(rng.uniform(2.5, 4.0))
            network.heal()
        events.append({"fault": kind, "node": target, "seconds": round(time.monotonic() - t0, 2)})


def read_json_lines(path):
    out = []
    for line in Path(path).read_text(errors="replace").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--herald", required=True)
    parser.add_argument("--kafka-lib", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--throughput", type=int, default=400)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument(
        "--idempotent", action="store_true",
        help="the Java producer's defaults (idempotence on, 5 requests in flight): "
        "then no record may be read twice either",
    )
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    network = Network()
    nodes = {i: Node(i, Path(args.herald), work) for i in NODES}
    producer = None
    events = []
    report = {"seed": args.seed, "seconds": args.seconds}
    try:
        for node in nodes.values():
            node.start()
        admin = create_topic()
        wait_for_leaders(admin)
        config = work / "producer.properties"
        ordering = (
            "enable.idempotence=true\nmax.in.flight.requests.per.connection=5\n"
            if args.idempotent
            else "enable.idempotence=false\nmax.in.flight.requests.per.connection=1\n"
        )
        config.write_text(
            ordering +
            "retries=2147483647\n"
            "delivery.timeout.ms=120000\n"
            "request.timeout.ms=5000\n"
            "retry.backoff.ms=100\n"
            "metadata.max.age.ms=2000\n"
        )
        produced = work / "producer.jsonl"
        with open(produced, "w") as out, open(work / "producer.err", "w") as err:
            producer = subprocess.Popen(
                java(args.kafka_lib, "VerifiableProducer",
                     "--bootstrap-server", cluster_bootstrap(), "--topic", TOPIC,
                     "--throughput", str(args.throughput), "--acks", "-1",
                     "--command-config", str(config)),
                stdout=out, stderr=err,
            )
        nemesis(nodes, network, admin, rng, time.monotonic() + args.seconds, events)
        network.heal()
        for node in nodes.values():
            node.resume()
            if node.proc is None:
                node.start()
        time.sleep(3)
        producer.send_signal(signal.SIGTERM)
        producer.wait(timeout=150)
        producer = None
        wait_for_leaders(admin)

        sends = read_json_lines(produced)
        acked = [e for e in sends if e.get("name") == "producer_send_success"]
        failed = [e for e in sends if e.get("name") == "producer_send_error"]
        consumed_path = work / "consumer.jsonl"
        with open(consumed_path, "w") as out, open(work / "consumer.err", "w") as err:
            consumer = subprocess.Popen(
                java(args.kafka_lib, "VerifiableConsumer",
                     "--bootstrap-server", cluster_bootstrap(), "--topic", TOPIC,
                     "--group-id", f"check-{args.seed}", "--reset-policy", "earliest",
                     "--verbose"),
                stdout=out, stderr=err,
            )
            want = {e["value"] for e in acked}
            seen_values = set()
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not want <= seen_values:
                time.sleep(1)
                seen_values = {
                    e["value"] for e in read_json_lines(consumed_path) if e.get("name") == "record_data"
                }
            consumer.send_signal(signal.SIGTERM)
            try:
                consumer.wait(timeout=20)
            except subprocess.TimeoutExpired:
                consumer.kill()
        records = [e for e in read_json_lines(consumed_path) if e.get("name") == "record_data"]
        reads = {}
        at_offset = {}
        for r in records:
            reads[r["value"]] = reads.get(r["value"], 0) + 1
            at_offset[(r["partition"], r["offset"])] = r["value"]
        lost = [e["value"] for e in acked if e["value"] not in reads]
        # Moved: read, but not at the offset its acknowledgement named. A
        # producer without idempotence may also have written a copy
        # earlier (a retry of a request whose answer was lost, as in
        # Kafka): that copy is a duplicate, not a move.
        moved = [
            e["value"] for e in acked
            if e["value"] in reads and at_offset.get((e["partition"], e["offset"])) != e["value"]
        ]
        reordered = 0
        for p in range(PARTITIONS):
            # By offset, acknowledged values must come in the order sent.
            values = [int(e["value"]) for e in sorted(acked, key=lambda e: e["offset"]) if e["partition"] == p]
            reordered += sum(1 for a, b in zip(values, values[1:]) if b < a)
        # Copies in the log (a record the consumer read twice at one offset
        # is one copy).
        copies = {}
        for value in at_offset.values():
            copies[value] = copies.get(value, 0) + 1
        duplicates = sum(n - 1 for n in copies.values() if n > 1)
        report.update({
            "faults": events,
            "sent": len(sends),
            "acknowledged": len(acked),
            "send_errors": len(failed),
            "read": len(records),
            "lost": len(lost),
            "lost_examples": lost[:5],
            "moved": len(moved),
            "reordered": reordered,
            "duplicates": duplicates,
        })
        ok = not lost and not moved and reordered == 0 and len(acked) > 0
        if args.idempotent:
            ok = ok and duplicates == 0
        report["idempotent"] = args.idempotent
        report["ok"] = ok
        print(json.dumps(report))
        return 0 if ok else 1
    finally:
        if producer is not None:
            producer.kill()
        network.heal()
        for node in nodes.values():
            node.stop()


if __name__ == "__main__":
    sys.exit(main())
