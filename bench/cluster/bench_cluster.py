"""Produce with replication factor 3 against a single node, same client, same run.

Setups, each started here and stopped here (by PID):
- herald, one node (the embedded default);
- herald, three nodes on 127.0.0.1 (one process each), topic with
  replication factor 3.

For each, a topic of one partition (replication factor 3 in the cluster)
and confluent-kafka (librdkafka) producing 100-byte records with acks=all:
- the most it takes (a closed loop, the producer's batching as configured);
- latency at a fixed offered rate (half of the single node's maximum):
  delivery-report latency p50 and p99.

Each setup is measured --repeats times, alternating; medians are printed
with ratios against the single node. Timings are never asserted: this is a
benchmark, not a test.

    bench/cluster/bench_cluster.py [--repeats 3] [--records 200000] [--seconds 10]
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[2]
HERALD = Path(os.environ.get("HERALD_BIN", ROOT / "target" / "release" / "herald"))
VALUE = b"x" * 100


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, log):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"herald exited: {Path(log).read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("herald did not start")


class Herald:
    """One or three herald processes."""

    def __init__(self, nodes, work):
        self.nodes = nodes
        self.work = Path(work)
        self.procs = []
        self.kafka_ports = [free_port() for _ in range(nodes)]

    def start(self):
        raft = [free_port() for _ in range(self.nodes)]
        cluster = ",".join(
            f"{i + 1}=127.0.0.1:{raft[i]}=127.0.0.1:{self.kafka_ports[i]}" for i in range(self.nodes)
        )
        for i in range(self.nodes):
            args = [
                str(HERALD), "serve", "--data-dir", str(self.work / f"n{i + 1}"),
                "--kafka-listen", f"127.0.0.1:{self.kafka_ports[i]}",
                "--admin-listen", "127.0.0.1:0", "--push-listen", "127.0.0.1:0",
                "--log-level", "warn",
            ]
            if self.nodes > 1:
                args += ["--node-id", str(i + 1), "--cluster-listen", f"127.0.0.1:{raft[i]}",
                         "--cluster-nodes", cluster]
            log = self.work / f"n{i + 1}.log"
            with open(log, "ab") as out:
                proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
            self.procs.append(proc)
            wait_port(self.kafka_ports[i], proc, log)

    @property
    def bootstrap(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.kafka_ports)

    def stop(self):
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs = []


def create(bootstrap, topic, replication):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=replication)])[topic].result(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10)
        part = md.topics[topic].partitions.get(0)
        if part is not None and part.leader >= 0 and part.error is None:
            return
        time.sleep(0.2)
    raise RuntimeError("no leader")


def producer(bootstrap):
    return Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 1000000,
        "enable.idempotence": False,
    })


def max_rate(bootstrap, topic, records):
    p = producer(bootstrap)
    done = [0]

    def cb(err, _msg):
        if err is None:
            done[0] += 1

    # Warm-up: connections, metadata, the leader found.
    for _ in range(1000):
        p.produce(topic, VALUE, callback=cb)
    p.flush(30)
    done[0] = 0
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, VALUE, callback=cb)
                break
            except BufferError:
                p.poll(0.001)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    return done[0] / (time.perf_counter() - start)


def latency_at(bootstrap, topic, rate, seconds):
    p = producer(bootstrap)
    latencies = []

    def cb(err, msg, sent):
        if err is None:
            latencies.append(time.perf_counter() - sent)

    for _ in range(200):
        p.produce(topic, VALUE)
    p.flush(30)
    start = time.perf_counter()
    sent = 0
    while time.perf_counter() - start < seconds:
        due = int((time.perf_counter() - start) * rate)
        while sent < due:
            t = time.perf_counter()
            p.produce(topic, VALUE, callback=lambda err, msg, t=t: cb(err, msg, t))
            sent += 1
        p.poll(0.0005)
    p.flush(60)
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
    return pick(0.5), pick(0.99), len(latencies) / seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--out", default="/tmp/herald-bench-cluster.json")
    args = parser.parse_args()
    results = {"single": [], "rf3": []}
    rate = None
    for r in range(args.repeats):
        for name, nodes, replication in (("single", 1, 1), ("rf3", 3, 3)):
            work = tempfile.mkdtemp(prefix=f"herald-bench-cluster-{name}-", dir="/dev/shm")
            herald = Herald(nodes, work)
            try:
                herald.start()
                topic = f"bench-{name}-{r}"
                create(herald.bootstrap, topic, replication)
                top = max_rate(herald.bootstrap, topic, args.records)
                if rate is None:
                    rate = top / 2
                p50, p99, achieved = latency_at(herald.bootstrap, topic, rate, args.seconds)
                row = {"max_rate": top, "rate": rate, "achieved": achieved, "p50_ms": p50, "p99_ms": p99}
                results[name].append(row)
                print(f"round {r + 1} {name}: {json.dumps(row)}", flush=True)
            finally:
                herald.stop()
                shutil.rmtree(work, ignore_errors=True)
    med = lambda name, key: statistics.median(row[key] for row in results[name])
    print("\n| figure | single node | 3 nodes, RF 3 | RF 3 / single |")
    print("|---|---|---|---|")
    for key, label in (("max_rate", "acks=all records/s (closed loop)"),
                       ("p50_ms", f"p50 ms at {rate:.0f}/s"), ("p99_ms", f"p99 ms at {rate:.0f}/s")):
        a, b = med("single", key), med("rf3", key)
        print(f"| {label} | {a:.1f} | {b:.1f} | {b / a:.2f} |")
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(f"\nrows: {args.out} (medians of {args.repeats})")


if __name__ == "__main__":
    sys.exit(main())
