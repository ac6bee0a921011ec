"""Failover time: a partition leader SIGKILLed under a steady acks=all stream.

One partition, replication factor 3, three nodes. A confluent-kafka
producer offers `rate` records/s (open loop: records are produced on
schedule whether or not earlier ones were acknowledged), and every record's
send time, delivery-report time and outcome are kept. After `warm_s`
seconds of the same stream (a fresh Kafka broker's JIT makes its first
10-15 s under load slower and bumpier) and `pre_s` seconds of steady
state, the partition's leader (from Metadata) gets SIGKILL, and:

- leader_s: from the kill to the first Metadata answer naming another
  leader (polled every 50 ms by a client of its own): the cluster's part
  of the failover, without the producer's metadata refresh cadence;
- first_ok_s: from the kill to the first successful delivery report of a
  record produced after the kill;
- resume_s: from the kill to the start of the first 100 ms window from
  which the successful deliveries of every window for 1 s are at least
  half of the pre-kill rate (the backlog queued during the outage counts:
  this is when the stream is flowing again, not when it caught up);
- failed: records whose delivery failed (message.timeout.ms ran out while
  no leader took them; they were produced during the outage).

The run stops once the stream has resumed and flowed for a little longer,
or after `post_s_max` seconds whatever happened (then the figures it did
not reach are None). Timings are never asserted.
"""

import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

VALUE = b"f" * 100
WINDOW_S = 0.1
SUSTAIN_WINDOWS = 10

# The client's settings, the same for herald and Kafka. Retries and the
# metadata refresh after a dead leader are librdkafka's defaults (retries
# unbounded within message.timeout.ms, retry.backoff.ms=100 doubling up to
# retry.backoff.max.ms=1000).
PRODUCER = {
    "acks": "all",
    "linger.ms": 5,
    "message.timeout.ms": 5000,
    "enable.idempotence": False,
    "queue.buffering.max.messages": 1000000,
    "log_level": 3,
}


def partition_leader(admin, topic, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        part = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
        if part is not None and part.error is None and part.leader >= 0:
            return part.leader
        time.sleep(0.2)
    raise RuntimeError(f"{topic}: no leader after {timeout_s}s")


class LeaderWatch:
    """Polls Metadata from its own thread, once the kill is done, until a
    leader other than the killed node is named."""

    def __init__(self, bootstrap, topic, killed, timeout_s):
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.admin.list_topics(topic, timeout=10)  # connections up before the kill
        self.topic, self.killed, self.timeout_s = topic, killed, timeout_s
        self.seen_t = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()

    def _run(self):
        deadline = time.perf_counter() + self.timeout_s
        while time.perf_counter() < deadline:
            try:
                part = self.admin.list_topics(self.topic, timeout=1).topics[self.topic].partitions.get(0)
                if part is not None and part.leader not in (-1, self.killed):
                    self.seen_t = time.perf_counter()
                    return
            except Exception:  # noqa: BLE001 - a node down or electing: ask again
                pass
            time.sleep(0.05)

    def join(self):
        self.thread.join(timeout=self.timeout_s + 5)


class Tally:
    """Delivery reports, and the successes per window after the kill."""

    def __init__(self):
        self.kill_t = None
        self.pre = []            # success times before the kill
        self.first_ok = None     # seconds after the kill
        self.windows = {}        # window index after the kill -> successes
        self.failed = 0
        self.ok_after = 0

    def report(self, err, sent_t):
        now = time.perf_counter()
        if err is not None:
            self.failed += 1
            return
        if self.kill_t is None or now < self.kill_t:
            self.pre.append(now)
            return
        self.ok_after += 1
        w = int((now - self.kill_t) / WINDOW_S)
        self.windows[w] = self.windows.get(w, 0) + 1
        if sent_t > self.kill_t and self.first_ok is None:
            self.first_ok = now - self.kill_t

    def pre_rate(self, pre_s):
        return sum(1 for t in self.pre if t >= self.kill_t - pre_s) / pre_s

    def pre_timeline(self, pre_s):
        counts = [0] * round(pre_s / WINDOW_S)
        for t in self.pre:
            w = int((t - (self.kill_t - pre_s)) / WINDOW_S)
            if 0 <= w < len(counts):
                counts[w] += 1
        return counts

    def resume(self, pre_s):
        """Seconds from the kill to the first window of a sustained run at
        half the pre-kill rate, or None."""
        floor = 0.5 * self.pre_rate(pre_s) * WINDOW_S
        last = max(self.windows, default=-1)
        for w in range(0, last - SUSTAIN_WINDOWS + 2):
            if all(self.windows.get(w + i, 0) >= floor for i in range(SUSTAIN_WINDOWS)):
                return w * WINDOW_S
        return None


def measure(cluster, topic, rate, pre_s, post_s_max, warm_s):
    """One failover of `topic`'s partition 0 on `cluster` (anything with
    `bootstrap` and `kill(node_id)`). Returns a dict of figures."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    leader = partition_leader(admin, topic)
    producer = Producer({**PRODUCER, "bootstrap.servers": cluster.bootstrap})
    watch = LeaderWatch(cluster.bootstrap, topic, leader, post_s_max)
    tally = Tally()
    start = time.perf_counter()
    kill_at = start + warm_s + pre_s
    end = kill_at + post_s_max
    sent = 0
    resume_s = None
    checked = 0.0
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        due = int((now - start) * rate)
        while sent < due:
            t = time.perf_counter()
            producer.produce(topic, VALUE, callback=lambda err, _m, t=t: tally.report(err, t))
            sent += 1
        producer.poll(0.001)
        if tally.kill_t is None and now >= kill_at:
            tally.kill_t = time.perf_counter()
            cluster.kill(leader)
            watch.start()
        elif tally.first_ok is not None and now - checked >= WINDOW_S:
            checked = now
            resume_s = tally.resume(pre_s)
            # Seen to flow for its sustain second and one more: done.
            if resume_s is not None and now - tally.kill_t > resume_s + SUSTAIN_WINDOWS * WINDOW_S + 1:
                break
    post_s = time.perf_counter() - tally.kill_t
    producer.flush(PRODUCER["message.timeout.ms"] / 1000 + 5)
    resume_s = tally.resume(pre_s)
    watch.join()
    try:
        new_leader = partition_leader(admin, topic, timeout_s=5)
    except RuntimeError:
        new_leader = None
    return {
        "killed": leader,
        "new_leader": new_leader,
        "rate": rate,
        "pre_rate": tally.pre_rate(pre_s),
        "leader_s": None if watch.seen_t is None else watch.seen_t - tally.kill_t,
        "first_ok_s": tally.first_ok,
        "resume_s": resume_s,
        "failed": tally.failed,
        "ok_after": tally.ok_after,
        "observed_s": post_s,
        # Successes per 100 ms window before the kill and from it on.
        "pre_timeline": tally.pre_timeline(pre_s),
        "timeline": [tally.windows.get(w, 0) for w in range(max(tally.windows, default=-1) + 1)],
    }
