"""How long a snapshot of many partitions takes, while producers write.

One herald node, one topic of `--partitions` partitions (1,000 by default),
a confluent-kafka producer writing to every partition throughout. Each run
takes a snapshot over the admin API and reads from its answer how long the
cut held answers back (`cut_micros`: the gate closed, every partition's end
read); the whole call (pins, cut, waiting for appends in flight, the
snapshot list written with fsync) is timed too. The baseline, in the same
run: what Kafka users do today to approximate a cut, reading each
partition's end offset with ListOffsets (confluent-kafka's
`get_watermark_offsets`, one partition after another, as Kafka Connect
does), which is not even consistent while producers write.

Prints every run, the medians, and the ratio of the baseline's median to
the cut's. Timings are never asserted.

    .venv/bin/python bench/queries/snapshot_cut.py [--partitions 1000] [--runs 7]
"""

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
import procs  # noqa: E402
from herald_nodes import SingleNode  # noqa: E402

TOPIC = "cut"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    procs.raise_on_sigterm()
    work = Path(tempfile.mkdtemp(prefix="herald-snapshot-bench-"))
    node = SingleNode(work)
    bootstrap, admin_port = node.bootstrap, node.admin_port
    stop = threading.Event()
    try:
        node.start()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=args.partitions)])[TOPIC].result(120)
        writer = threading.Thread(target=produce, args=(bootstrap, args.partitions, stop))
        writer.start()
        time.sleep(2)
        cuts, calls, baseline = [], [], []
        for run in range(args.runs):
            started = time.perf_counter()
            snapshot = post(admin_port, {"topics": [TOPIC], "id": f"run-{run}"})
            calls.append((time.perf_counter() - started) * 1e6)
            cuts.append(snapshot["cut_micros"])
            baseline.append(end_offsets_one_by_one(bootstrap, args.partitions))
            print(f"run {run}: cut {cuts[-1]:.1f} µs, whole call {calls[-1] / 1000:.1f} ms, "
                  f"ListOffsets partition by partition {baseline[-1] / 1000:.1f} ms", flush=True)
        stop.set()
        writer.join(60)
        cut, call, base = (statistics.median(x) for x in (cuts, calls, baseline))
        print(f"\n{args.partitions} partitions, medians of {args.runs} runs:")
        print(f"  the cut (answers held back):        {cut:10.1f} µs")
        print(f"  the whole snapshot call:            {call:10.1f} µs")
        print(f"  end offsets partition by partition: {base:10.1f} µs  "
              f"({base / cut:.0f}x the cut, {base / call:.1f}x the whole call)")
    finally:
        stop.set()
        node.stop()
        shutil.rmtree(work, ignore_errors=True)


def produce(bootstrap, partitions, stop):
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    value = b"x" * 100
    i = 0
    while not stop.is_set():
        try:
            producer.produce(TOPIC, value=value, partition=i % partitions)
            i += 1
        except BufferError:
            producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(30)


def post(admin_port, body):
    request = urllib.request.Request(f"http://127.0.0.1:{admin_port}/v1/snapshots",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def end_offsets_one_by_one(bootstrap, partitions):
    """Microseconds to read every partition's end offset, one request each."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "snapshot-bench"})
    try:
        consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10, cached=False)
        started = time.perf_counter()
        for p in range(partitions):
            consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10, cached=False)
        return (time.perf_counter() - started) * 1e6
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
