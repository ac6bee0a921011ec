"""acks=all produce load from confluent-kafka (librdkafka), 100-byte records.

The producer lingers 5 ms and batches up to 10,000 records; its queue
holds a million records, so an open-loop run never blocks on it.
"""

import os
import time
from pathlib import Path

from confluent_kafka import Producer

VALUE = b"x" * 100


def producer(bootstrap):
    return Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 1000000,
        "enable.idempotence": False,
    })


def closed_loop(p, topic, records, cb, seconds_max=None):
    """Produces up to `records` as fast as the producer's queue lets in,
    stopping early after `seconds_max`; returns the count produced."""
    start = time.perf_counter()
    for i in range(records):
        if seconds_max is not None and i % 1000 == 0 and time.perf_counter() - start > seconds_max:
            return i
        while True:
            try:
                p.produce(topic, VALUE, callback=cb)
                break
            except BufferError:
                p.poll(0.001)
        if i % 1000 == 0:
            p.poll(0)
    return records


def cpu_seconds(pids):
    """User + system CPU seconds the processes `pids` have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def max_rate(bootstrap, topic, records, warmup_s, broker_pids):
    """The closed-loop rate, and the cores the client (this process, with
    librdkafka's threads) and the brokers kept busy meanwhile."""
    p = producer(bootstrap)
    done = [0]

    def cb(err, _msg):
        if err is None:
            done[0] += 1

    # Warm-up: connections, metadata, the leader found, and Kafka's JIT
    # (its first seconds under load are several times slower): twice the
    # measured count, or warmup_s, whichever ends first.
    closed_loop(p, topic, 2 * records, cb, warmup_s)
    p.flush(120)
    done[0] = 0
    start = time.perf_counter()
    client_start, broker_start = time.process_time(), cpu_seconds(broker_pids)
    closed_loop(p, topic, records, cb)
    p.flush(120)
    wall = time.perf_counter() - start
    return {
        "max_rate": done[0] / wall,
        "client_cores": (time.process_time() - client_start) / wall,
        "broker_cores": (cpu_seconds(broker_pids) - broker_start) / wall,
    }


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
