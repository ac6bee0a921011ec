"""A consumer group of Java clients (org.apache.kafka:kafka-clients, classic group
protocol, CooperativeStickyAssignor) sharing a 6-partition topic while a
producer writes continuously.

Each member is its own JVM running tests/compat/java/HeraldGroupMember.java, so
that it can be closed (SIGTERM: the consumer commits, revokes its partitions
and leaves the group) or SIGKILLed like a crashed application. A member writes
what it does to a JSON-lines file, flushed line by line: partitions assigned,
revoked (after committing them) and lost, with the time, and every record it
processed, before it commits (synchronously) the offsets after them. The
scenario: a first member takes all partitions; a second joins and gets some;
the first stops (closed or killed) and the second takes over all of them. The
test reads the files and checks, at the end:
- both members owned partitions, every partition by at most one member at any
  time, and every partition by someone once the group settled;
- cooperative rebalancing: when the second member joined, the first member
  gave up only the partitions that moved to the second one (an eager protocol
  would revoke all six), and the member that stayed never lost a partition
  when the other one left;
- a member giving a partition up commits it first (the commit succeeds), and
  the next owner resumes exactly after the last record processed before;
- every message the producer had acknowledged was processed at least once, and
  the group's committed offsets reached the end of every partition.
"""

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from clients import create_topic, eventually, watermarks
from conftest import QUICK_GROUP_START
from group_helpers import ContinuousProducer, MemberProcess

PARTITIONS = 6
SESSION_TIMEOUT_S = 6.0  # the members' session.timeout.ms
PRODUCE_RATE_PER_S = 200
PRODUCE_COUNT_MAX = 50_000
STEP_TIMEOUT_S = 60.0
MEMBER_EXIT_TIMEOUT_S = 40.0
MEMBER_CLASS = "HeraldGroupMember"

pytestmark = pytest.mark.herald_args(*QUICK_GROUP_START)


class JavaMember(MemberProcess):
    """One HeraldGroupMember JVM and what its log says."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str, java_deps: Path,
                 workdir: Path):
        self.name = name
        self.out = workdir / f"{name}.jsonl"
        self.stderr_path = workdir / f"{name}.stderr"
        self.started_at = time.time()
        self.killed_at = None
        self.stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [
                "java",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                # Joins, assignments and revocations, for the failure report.
                "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer.internals"
                ".ConsumerCoordinator=info",
                "-cp",
                f"{java_deps / 'classes'}:{java_deps / 'lib'}/*",
                MEMBER_CLASS,
                bootstrap,
                topic,
                group,
                name,
                str(self.out),
            ],
            stdin=subprocess.DEVNULL, stdout=self.stderr, stderr=subprocess.STDOUT,
        )

    def events(self, kind: str, since: float = 0.0, until: float = float("inf")):
        return [line for line in self.lines()
                if line.get("ev") == kind and since <= line["t"] <= until]

    def kill(self):
        super().kill(MEMBER_EXIT_TIMEOUT_S)

    def stop(self):
        """SIGTERM: the member closes its consumer (revoking and committing) and exits."""
        self.terminate(MEMBER_EXIT_TIMEOUT_S)
        # 143: the JVM's exit status after SIGTERM once its shutdown hook has finished.
        assert self.proc.returncode in (0, 143, -signal.SIGTERM), (
            f"{self.name} exited with {self.proc.returncode}:\n{self.stderr_tail()}"
        )
        assert self.events("closed"), (
            f"{self.name} never closed its consumer:\n{self.stderr_tail()}"
        )

    def stderr_tail(self, lines: int = 40) -> str:
        text = self.stderr_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


def wait_until(check, what: str, timeout_s: float = STEP_TIMEOUT_S):
    return eventually(check, what, timeout_s)


def spread_over(members):
    """True (the ownership) once the members together own every partition, each
    exactly once, and every member owns at least one."""
    def check():
        owned = {m.name: m.owned() for m in members}
        counted = sorted(p for ps in owned.values() for p in ps)
        return counted == list(range(PARTITIONS)) and all(owned.values()) and owned
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
                    assert p not in since, f"{m.name} assigned partition {p} it already owns"
                    since[p] = line["t"]
            elif kind in ("revoke", "lost"):
                for p in line["p"]:
                    assert p in since, f"{m.name} lost partition {p} it did not own"
                    intervals[p].append((since.pop(p), line["t"], m.name))
            elif kind == "closed":
                assert not since, f"{m.name} closed still owning {sorted(since)}"
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
    missing = sorted(po for po in producer.acked if po not in processed)
    assert not missing, f"{len(missing)} acknowledged messages never processed, e.g. {missing[:5]}"
    wrong = [(po, i, processed[po]) for po, i in producer.acked.items() if processed[po] != i]
    assert not wrong, f"messages read back differ: {wrong[:5]}"
    unknown = sorted(po for po in processed if po not in producer.acked)
    assert not unknown, f"processed records nobody produced: {unknown[:5]}"


def assert_clean_handoffs_resume_after_the_last_processed(members):
    """A partition revoked with a successful commit is resumed by its next owner
    at the offset right after the last one its previous owner processed."""
    events = []
    for m in members:
        for line in m.lines():
            if line.get("ev") in ("assign", "revoke"):
                events.extend((line["t"], line["ev"], p, m, line.get("committed"))
                              for p in line["p"])
    events.sort(key=lambda e: e[0])
    checked = 0
    for i, (t, kind, p, m, committed) in enumerate(events):
        if kind != "revoke":
            continue
        assert committed, f"{m.name} could not commit partition {p} when it was revoked at {t:.3f}"
        last = max((off for tt, pp, off, _ in m.processed() if pp == p and tt <= t), default=None)
        nxt = next((e for e in events[i + 1:] if e[2] == p and e[1] == "assign"), None)
        if last is None or nxt is None:
            continue
        heir, since = nxt[3], nxt[0]
        first = min((off for tt, pp, off, _ in heir.processed() if pp == p and tt >= since),
                    default=None)
        if first is None:
            continue
        assert first == last + 1, (
            f"partition {p}: {m.name} processed up to {last} and committed it, then "
            f"{heir.name} resumed at {first}"
        )
        checked += 1
    return checked


def committed_offsets(bootstrap: str, group: str, topic: str):
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "enable.auto.commit": False})
    try:
        committed = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                     timeout=30)
    finally:
        reader.close()
    return {tp.partition: tp.offset for tp in committed}


@pytest.fixture
def java_group(request, broker, unique, tmp_path, java_deps):
    """Makes a topic, a producer and member JVMs; stops all of them."""
    if not (java_deps / "classes" / f"{MEMBER_CLASS}.class").is_file():
        pytest.fail(f"{MEMBER_CLASS}.class is missing: run scripts/install-test-deps.sh")
    topic, group = unique("java-topic"), unique("java-group")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    started = []

    class Run:
        def __init__(self):
            self.bootstrap, self.topic, self.group = broker.bootstrap, topic, group
            self.members = started
            self.producer = None

        def member(self):
            m = JavaMember(f"member{len(started)}", broker.bootstrap, topic, group, java_deps,
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
            run.producer.thread.join(timeout=STEP_TIMEOUT_S)
        for m in started:
            if m.proc.poll() is None:
                m.proc.kill()
                m.proc.wait(timeout=MEMBER_EXIT_TIMEOUT_S)
            m.stderr.close()
        call_report = getattr(request.node, "report_call", None)
        if call_report is not None and call_report.failed:
            for m in started:
                events = [line for line in m.lines() if "ev" in line or "msgs" not in line]
                print(f"--- {m.name}: events ---\n" + "\n".join(map(json.dumps, events)))
                print(f"--- {m.name}: output ---\n{m.stderr_tail(60)}")


@pytest.mark.parametrize("how", ["close", "kill"])
def test_java_cooperative_sticky_members_share_and_hand_over_partitions(java_group, how):
    first = java_group.member()
    producer = java_group.produce()
    wait_until(lambda: first.owned() == set(range(PARTITIONS)) and any(first.processed()),
               "the first member owns every partition and processes messages")
    time.sleep(1)

    # A second member joins: some partitions move to it, the others stay put.
    second = java_group.member()
    owned = wait_until(spread_over([first, second]),
                       "the partitions spread over both members")
    settled = time.time()
    moved = owned[second.name]
    kept = owned[first.name]
    revoked = [p for line in first.events("revoke", second.started_at, settled)
               for p in line["p"]]
    assert sorted(revoked) == sorted(moved), (
        f"when {second.name} joined, {first.name} had {revoked} revoked; "
        f"only the partitions that moved ({sorted(moved)}) should have been"
    )
    assert not first.events("lost"), f"{first.name} lost partitions: {first.events('lost')}"
    for m in (first, second):
        wait_until(lambda m=m: {p for t, p, _, _ in m.processed() if t > settled} == m.owned(),
                   f"{m.name} processes messages on every partition it owns")

    # One member leaves (closes, or dies): the other one takes everything over.
    if how == "close":
        first.stop()
    else:
        first.kill()
    wait_until(lambda: second.owned() == set(range(PARTITIONS)),
               f"{second.name} owns every partition after {first.name} left",
               timeout_s=SESSION_TIMEOUT_S + STEP_TIMEOUT_S)
    taken_over_at = time.time()
    wait_until(lambda: {p for t, p, _, _ in second.processed() if t > taken_over_at}
               == set(range(PARTITIONS)),
               f"{second.name} processes messages on every partition")

    producer.stop()
    assert producer.sent > 0
    members = [first, second]
    wait_until(lambda: not set(producer.acked)
               - {(p, o) for m in members for _, p, o, _ in m.processed()},
               "every acknowledged message processed")
    stopping_at = time.time()
    second.stop()
    end = time.time()

    crashes = [(m.name, line) for m in members for line in m.lines() if "error" in line]
    assert not crashes, f"a member failed: {crashes}"
    assert_single_owner(members, end)
    assert_every_acked_message_processed(members, producer)
    # The member that stayed never lost a partition while the other one left.
    taken = second.events("revoke", 0, stopping_at) + second.events("lost", 0, stopping_at)
    assert not taken, f"{second.name} had partitions taken away before it was stopped: {taken}"
    # Once the group had settled, the first member was never given partitions again.
    assert not [line for line in first.events("assign", settled) if line["p"]], (
        f"{first.name} was assigned partitions again: {first.events('assign', settled)}"
    )
    if how == "close":
        # Closing revoked (and committed) exactly what the first member still owned.
        at_close = sorted(p for line in first.events("revoke", settled) for p in line["p"])
        assert at_close == sorted(kept), f"{first.name} revoked {at_close} when closing"
    handoffs = assert_clean_handoffs_resume_after_the_last_processed(members)
    assert handoffs > 0, "no partition was handed over cleanly with messages on both sides"

    # Every processed record was committed: the group's offsets are at the end.
    ends = {p: high for p, (_, high) in watermarks(java_group.bootstrap, java_group.topic,
                                                   PARTITIONS).items()}
    assert sum(ends.values()) == producer.sent
    assert committed_offsets(java_group.bootstrap, java_group.group, java_group.topic) == ends
