"""Consumer-group commit load from confluent-kafka (librdkafka).

Each client is a consumer of its own group that commits an offset of a
one-partition topic synchronously, again and again (a closed loop: the next
commit leaves when the last is acknowledged, which on herald and on Kafka
means stored as its offsets partition's durability demands). The latency of
each commit is the time `commit(asynchronous=False)` takes.
"""

import statistics
import threading
import time

from confluent_kafka import Consumer, TopicPartition


def _client(bootstrap, group, topic, seconds, warmup_seconds, out):
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
    })
    latencies = []
    try:
        offset = 0
        started = time.perf_counter()
        measuring_from = started + warmup_seconds
        end = measuring_from + seconds
        while True:
            now = time.perf_counter()
            if now >= end:
                break
            offset += 1
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            done = time.perf_counter()
            if now >= measuring_from:
                latencies.append(done - now)
    finally:
        consumer.close()
    out.append(latencies)


def commit_rates(bootstrap, topic, clients, seconds, warmup_seconds=2.0):
    """`clients` clients (groups) committing for `seconds` after a warm-up:
    commits/s over all of them, and latency p50 and p99 in ms."""
    results = []
    threads = [
        threading.Thread(
            target=_client,
            args=(bootstrap, f"bench-commits-{clients}-{i}-{time.time_ns()}", topic, seconds,
                  warmup_seconds, results),
            daemon=True,
        )
        for i in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + warmup_seconds + 120)
    latencies = sorted(x for rows in results for x in rows)
    if not latencies:
        return {"clients": clients, "commits_per_s": 0.0, "p50_ms": None, "p99_ms": None}
    return {
        "clients": clients,
        "commits_per_s": len(latencies) / seconds,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
    }
