"""Produce latency with ten online queries registered, against none.

One herald node. Each run creates a topic of two partitions and produces
JSON records (keys from 100,000 ids, two headers) at a fixed rate with a
confluent-kafka producer (acks=all, linger.ms=0), timing every record from
`produce()` to its delivery report. Runs alternate: without queries, then
with ten queries registered on the run's topic before it starts (the
filters and aggregates of `herald-query-bench`, half of the filters on JSON
fields), so the indexers follow the records as they arrive. Prints each
run's p50 and p99 (and the queries' lag at the end), the medians over the
runs of each kind, and the ratio with / without. Timings are never
asserted.

    .venv/bin/python bench/queries/produce_latency.py [--rate 10000] [--seconds 15] [--runs 3]
"""

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
import procs  # noqa: E402
from herald_nodes import SingleNode  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000, help="records per second")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--runs", type=int, default=3, help="runs of each kind")
    args = parser.parse_args()
    procs.raise_on_sigterm()
    work = Path(tempfile.mkdtemp(prefix="herald-query-latency-"))
    node = SingleNode(work)
    bootstrap, admin_port = node.bootstrap, node.admin_port
    try:
        node.start()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        results = {False: [], True: []}
        for run in range(args.runs * 2):
            with_queries = run % 2 == 1
            topic = f"orders-{run}"
            admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(60)
            ids = []
            if with_queries:
                for spec in specs(topic, run):
                    api(admin_port, "POST", "/v1/queries", spec)
                    ids.append(spec["id"])
            p50, p99 = produce_at_rate(bootstrap, topic, args.rate, args.seconds)
            lag = sum(api(admin_port, "GET", f"/v1/queries/{q}")["lag"] for q in ids)
            for q in ids:
                api(admin_port, "DELETE", f"/v1/queries/{q}")
            results[with_queries].append((p50, p99))
            kind = "10 queries" if with_queries else "no query  "
            print(f"run {run}: {kind} p50 {p50:7.3f} ms  p99 {p99:7.3f} ms"
                  + (f"  (lag at the end: {lag} records)" if with_queries else ""), flush=True)
        print(f"\n{args.rate} records/s for {args.seconds:.0f} s, medians of {args.runs} runs each:")
        medians = {}
        for kind, label in ((False, "no query"), (True, "10 queries")):
            p50 = statistics.median(r[0] for r in results[kind])
            p99 = statistics.median(r[1] for r in results[kind])
            medians[kind] = (p50, p99)
            print(f"  {label:<11} p50 {p50:7.3f} ms  p99 {p99:7.3f} ms")
        print(f"  with / without: p50 {medians[True][0] / medians[False][0]:.2f}x, "
              f"p99 {medians[True][1] / medians[False][1]:.2f}x")
    finally:
        node.stop()
        shutil.rmtree(work, ignore_errors=True)


def specs(topic, run):
    mid = int(time.time() * 1000) + 5_000
    metadata = ['key starts_with "user-00"', 'header.type == "refund"',
                'header.region in ("eu", "ap")', f"timestamp >= {mid}", 'key == "user-0000001"',
                'header.region == "us" and header.type == "order"', 'not (header.type == "order")',
                f'timestamp < {mid} or header.region == "sa"',
                'key starts_with "user-09" and exists header.type', 'header.type != "refund"']
    on_values = ["value.total > 250", 'value.region == "eu"', "value.latency_ms >= 200",
                 'value.status == "ok" and value.total < 10', 'value.user starts_with "user-00"']
    aggregates = [{"name": "n", "function": "count"},
                  {"name": "revenue", "function": "sum", "field": "value.total"},
                  {"name": "slowest", "function": "max", "field": "value.latency_ms"},
                  {"name": "users", "function": "distinct", "field": "key"}]
    return [{"id": f"q{run}-{i}", "topic": topic,
             "filter": on_values[i // 2] if i % 2 else metadata[i],
             "bucket_ms": 60_000, "aggregates": aggregates,
             "triggers": [{"name": "many", "aggregate": "n", "op": ">=", "threshold": 1e12,
                           "window_ms": 60_000}]}
            for i in range(10)]


def produce_at_rate(bootstrap, topic, rate, seconds):
    """(p50, p99) in milliseconds from produce() to the delivery report."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    latencies = []
    rng = random.Random(7)
    regions = ["eu", "us", "ap", "sa"]

    def delivered(started):
        def report(err, _msg):
            if err is None:
                latencies.append(time.perf_counter() - started)
        return report

    total = int(rate * seconds)
    begin = time.perf_counter()
    for n in range(total):
        due = begin + n / rate
        while True:
            now = time.perf_counter()
            if now >= due:
                break
            producer.poll(min(due - now, 0.001))
        uid = int(rng.random() ** 2 * 100_000)
        key = f"user-{uid:07d}"
        region = regions[uid % 4]
        value = json.dumps({"user": key, "region": region, "total": uid % 500 + n % 100 / 100,
                            "latency_ms": n % 250, "status": "ok"}).encode()
        headers = [("type", b"refund" if n % 10 == 0 else b"order"), ("region", region.encode())]
        producer.produce(topic, key=key.encode(), value=value, headers=headers,
                         on_delivery=delivered(time.perf_counter()))
    producer.flush(60)
    latencies.sort()
    return (latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000)


def api(admin_port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{admin_port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        text = answer.read()
        return json.loads(text) if text else None


if __name__ == "__main__":
    main()
