"""Consumer groups with real clients: confluent-kafka (librdkafka) consumers in
one group share a topic's partitions while a producer writes continuously.

Each group member runs in its own process (this file, run as a script with
`member`), so that it can be SIGKILLed like a crashed application. A member
writes what it does to a JSON-lines file, flushed line by line: partitions
assigned and revoked (with the time), and every message it processed, before
it commits (synchronously) the offsets after them. The test reads these files
to follow the group and to check, at the end:
- every partition was owned by at most one member at any time;
- every message the producer had acknowledged was processed at least once;
- with cooperative-sticky, a partition is revoked only to move elsewhere;
- after the broker restarts (SIGTERM, or SIGKILL: a commit is acknowledged
  only once it is on disk), the group resumes from its committed offsets.
"""

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from clients import eventually
from conftest import QUICK_GROUP_START
from group_helpers import ContinuousProducer, MemberProcess

PARTITIONS = 6
SESSION_TIMEOUT_MS = 6_000  # the smallest the coordinator accepts by default
PRODUCE_RATE_PER_S = 300
PRODUCE_COUNT_MAX = 100_000
STEP_TIMEOUT_S = 60.0
MEMBER_EXIT_TIMEOUT_S = 30.0

pytestmark = pytest.mark.herald_args(*QUICK_GROUP_START)


# --- the member process -------------------------------------------------------


def member_main(settings: dict):
    """Consumes until SIGTERM (then leaves the group cleanly), logging to a file."""
    from confluent_kafka import Consumer, KafkaException

    out = open(settings["out"], "a", buffering=1)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())

    def event(kind, partitions):
        parts = sorted(p.partition for p in partitions)
        out.write(json.dumps({"t": time.time(), "ev": kind, "p": parts}) + "\n")
        out.flush()

    conf = {
        "bootstrap.servers": settings["bootstrap"],
        "group.id": settings["group"],
        "client.id": settings["name"],
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": 1_000,
        "max.poll.interval.ms": 30_000,
        "partition.assignment.strategy": settings["strategy"],
        "enable.partition.eof": False,
    }
    cons = Consumer(conf)
    cons.subscribe(
        [settings["topic"]],
        on_assign=lambda c, ps: event("assign", ps),
        on_revoke=lambda c, ps: event("revoke", ps),
        on_lost=lambda c, ps: event("lost", ps),
    )
    while not stopping.is_set():
        batch = cons.consume(num_messages=500, timeout=0.2)
        processed = []
        for msg in batch:
            if msg.error() is not None:
                out.write(json.dumps({"t": time.time(), "error": str(msg.error())}) + "\n")
                continue
            processed.append([msg.partition(), msg.offset(), int(msg.value())])
        if not processed:
            continue
        # Processing = recording; only then is the position committed.
        out.write(json.dumps({"t": time.time(), "msgs": processed}) + "\n")
        out.flush()
        try:
            cons.commit(asynchronous=False)
        except KafkaException as e:
            # A commit refused during a rebalance: the messages come again.
            out.write(json.dumps({"t": time.time(), "commit_error": str(e)}) + "\n")
    cons.close()
    out.write(json.dumps({"t": time.time(), "ev": "closed", "p": []}) + "\n")
    out.close()


# --- the test side ------------------------------------------------------------


class Member(MemberProcess):
    """One member process and what its log says."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str, strategy: str,
                 workdir: Path):
        self.name = name
        self.out = workdir / f"{name}.jsonl"
        self.killed_at = None
        settings = {"name": name, "bootstrap": bootstrap, "topic": topic, "group": group,
                    "strategy": strategy, "out": str(self.out)}
        self.stderr = open(workdir / f"{name}.stderr", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "member", json.dumps(settings)],
            stdin=subprocess.DEVNULL, stdout=self.stderr, stderr=subprocess.STDOUT,
            cwd=Path(__file__).parent,
        )

    def kill(self):
        super().kill(MEMBER_EXIT_TIMEOUT_S)

    def stop(self):
        self.terminate(MEMBER_EXIT_TIMEOUT_S)
        self.stderr.close()


def wait_until(check, what: str, timeout_s: float = STEP_TIMEOUT_S):
    return eventually(check, what, timeout_s)


def ownership(members):
    return {m.name: m.owned() for m in members}


def partitions_spread_over(members):
    """True once the members together own every partition, each exactly once,
    and every member owns at least one."""
    def check():
        owned = ownership(members)
        counted = sorted(p for ps in owned.values() for p in ps)
        return counted == list(range(PARTITIONS)) and all(owned.values()) and owned
    return check


def owners_processing(members, since):
    """True once every member has processed, after `since` (time.time()),
    a message of each partition it owns: the group is not only formed but
    consuming. Waited for instead of a fixed pause (at the producer's rate
    every partition gets a message every few tens of milliseconds)."""
    def check():
        for m in members:
            fresh = {p for t, p, _, _ in m.processed() if t > since}
            if not m.owned() <= fresh:
                return False
        return True
    return check


def ownership_intervals(members, end_time):
    """Per partition, the (start, end, member) intervals of ownership."""
    intervals = {p: [] for p in range(PARTITIONS)}
    for m in members:
        since = {}
        for line in m.lines():
            kind = line.get("ev")
            if kind == "assign":
                for p in line["p"]:
                    since.setdefault(p, line["t"])
            elif kind in ("revoke", "lost"):
                for p in line["p"]:
                    if p in since:
                        intervals[p].append((since.pop(p), line["t"], m.name))
            elif kind == "closed":
                for p, start in since.items():
                    intervals[p].append((start, line["t"], m.name))
                since = {}
        stop = m.killed_at or end_time
        for p, start in since.items():
            intervals[p].append((start, stop, m.name))
    return intervals


def assert_single_owner(members, end_time):
    for p, spans in ownership_intervals(members, end_time).items():
        spans.sort()
        for (s1, e1, m1), (s2, e2, m2) in zip(spans, spans[1:]):
            assert s2 >= e1, (
                f"partition {p} owned by {m1} until {e1:.3f} and by {m2} from {s2:.3f}"
            )


def assert_every_acked_message_processed(members, producer):
    processed = {}
    for m in members:
        for _, p, offset, index in m.processed():
            processed[(p, offset)] = index
    missing = [po for po in producer.acked if po not in processed]
    assert not missing, f"{len(missing)} acknowledged messages never processed, e.g. {missing[:5]}"
    wrong = [(po, i, processed[po]) for po, i in producer.acked.items() if processed[po] != i]
    assert not wrong, f"messages read back differ: {wrong[:5]}"


def all_processed(members, producer):
    def check():
        seen = {(p, o) for m in members for _, p, o, _ in m.processed()}
        left = len(set(producer.acked) - seen)
        return left == 0 or f"{left} messages not yet processed"
    return lambda: check() is True


def assert_cooperative_revokes_only_moved_partitions(members):
    """With cooperative-sticky, a revoked partition is next assigned to
    another member (a partition that stays is never revoked)."""
    events = []
    for m in members:
        for line in m.lines():
            if line.get("ev") in ("assign", "revoke"):
                events.extend((line["t"], line["ev"], p, m.name) for p in line["p"])
    events.sort()
    for i, (t, kind, p, name) in enumerate(events):
        if kind != "revoke":
            continue
        after = [e for e in events[i + 1:] if e[2] == p and e[1] == "assign"]
        if after:
            assert after[0][3] != name, (
                f"partition {p} revoked from {name} at {t:.3f} and given back to it"
            )


@pytest.fixture
def group_run(broker, unique, tmp_path):
    """Makes a topic, a producer and member processes; stops all of them."""
    from clients import create_topic

    topic, group = unique("groups"), unique("group")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    started = []

    class Run:
        def __init__(self):
            self.topic, self.group, self.members = topic, group, started
            self.producer = None

        def member(self, strategy: str):
            m = Member(f"member{len(started)}", broker.bootstrap, topic, group, strategy,
                       tmp_path)
            started.append(m)
            return m

        def produce(self):
            self.producer = ContinuousProducer(broker.bootstrap, topic, PRODUCE_RATE_PER_S,
                                               PRODUCE_COUNT_MAX, STEP_TIMEOUT_S)
            return self.producer

    run = Run()
    try:
        yield run
    finally:
        if run.producer is not None:
            run.producer.stopping.set()
        for m in started:
            if m.proc.poll() is None:
                m.proc.kill()
                m.proc.wait(timeout=MEMBER_EXIT_TIMEOUT_S)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_members_share_partitions_and_a_killed_members_partitions_move(group_run, strategy):
    members = [group_run.member(strategy) for _ in range(3)]
    producer = group_run.produce()
    wait_until(partitions_spread_over(members), "6 partitions spread over 3 members")
    spread_at = time.time()
    wait_until(owners_processing(members, spread_at), "each member processing its partitions")

    victim = members[0]
    victim_partitions = victim.owned()
    victim.kill()
    survivors = members[1:]
    owned = wait_until(partitions_spread_over(survivors),
                       "the killed member's partitions taken over by the other two",
                       timeout_s=SESSION_TIMEOUT_MS / 1000 + STEP_TIMEOUT_S)
    taken_over = [p for p in victim_partitions for m in survivors if p in owned[m.name]]
    assert sorted(taken_over) == sorted(victim_partitions)
    taken_over_at = time.time()
    # The new owners read on from the killed member's commits while the
    # producer still writes.
    wait_until(owners_processing(survivors, taken_over_at),
               "the survivors processing every partition, the moved ones included")

    producer.stop()
    assert producer.sent > 0
    wait_until(all_processed(members, producer), "every acknowledged message processed")
    stopping_at = time.time()
    for m in survivors:
        m.stop()
    end = time.time()

    assert_single_owner(members, end)
    assert_every_acked_message_processed(members, producer)
    # The takeover waited for the session timeout (no earlier owner change).
    for p in victim_partitions:
        firsts = [s for s, _, name in ownership_intervals(members, end)[p]
                  if name != victim.name and s > victim.killed_at]
        assert firsts, f"partition {p} never moved off the killed member"
    if strategy == "cooperative-sticky":
        assert_cooperative_revokes_only_moved_partitions(members)
        # Members that stayed lost nothing when the victim's partitions moved
        # (until they were stopped themselves, which revokes everything).
        for m in survivors:
            revokes = [line for line in m.lines()
                       if line.get("ev") == "revoke"
                       and victim.killed_at < line["t"] < stopping_at and line["p"]]
            assert not revokes, f"{m.name} had partitions revoked after the kill: {revokes}"


@pytest.mark.restarts_broker
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_group_resumes_from_committed_offsets_after_a_broker_restart(broker, group_run, sig):
    from confluent_kafka import Consumer, TopicPartition

    members = [group_run.member("range") for _ in range(2)]
    producer = group_run.produce()
    wait_until(partitions_spread_over(members), "6 partitions spread over 2 members")
    wait_until(lambda: {p for m in members for _, p, _, _ in m.processed()}
               == set(range(PARTITIONS)), "messages processed on every partition")

    def committed_floor():
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_run.group})
        try:
            committed = reader.committed([TopicPartition(group_run.topic, p)
                                          for p in range(PARTITIONS)], timeout=30)
        finally:
            reader.close()
        floor = {tp.partition: tp.offset for tp in committed}
        return all(offset > 0 for offset in floor.values()) and floor

    # Each member commits right after recording what it processed: polled
    # until every partition has a commit, rather than a fixed pause.
    floor = wait_until(committed_floor, "a commit on every partition")

    stopped_at = time.time()
    code = broker.restart(sig)
    assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    wait_until(partitions_spread_over(members), "the group formed again after the restart",
               timeout_s=STEP_TIMEOUT_S * 2)
    # Consumption resumed on every partition before production stops.
    wait_until(lambda: {p for m in members for t, p, _, _ in m.processed() if t > stopped_at}
               == set(range(PARTITIONS)), "messages processed on every partition after the restart")
    producer.stop()
    wait_until(all_processed(members, producer), "every acknowledged message processed")
    for m in members:
        m.stop()

    assert_single_owner(members, time.time())
    assert_every_acked_message_processed(members, producer)
    first_after = {}
    for m in members:
        for t, p, offset, _ in m.processed():
            if t > stopped_at:
                first_after[p] = min(offset, first_after.get(p, offset))
    for p in range(PARTITIONS):
        assert p in first_after, f"nothing processed on partition {p} after the restart"
        assert first_after[p] >= floor[p], (
            f"partition {p} re-read from {first_after[p]}, below its committed {floor[p]}"
        )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "member":
        member_main(json.loads(sys.argv[2]))
    else:
        sys.exit(f"usage: {sys.argv[0]} member SETTINGS_JSON")
