"""kcat's balanced consumer (`kcat -G GROUP TOPIC`, Debian's kcat on its own
librdkafka): two kcat processes in one group share a 6-partition topic.

Each kcat prints what it consumes (`-f '%p\\t%o\\t%s\\n'`, unbuffered) to a file,
and its group events ("Group ... rebalanced ... assigned/revoked ...") to
stderr, from which the test follows who owns which partitions. kcat stores the
offset of each message it prints and commits with librdkafka's auto-commit
(every 5 s, and when partitions are revoked or it leaves the group on
SIGTERM; kcat's `-X` sets a topic-level property first when one has the same
name, so `-X auto.commit.interval.ms` or `-X enable.auto.commit` would only
reach librdkafka's legacy topic settings). `-e` and `-o` are not used: with
-G, `-e` stops a member once *its* partitions are at their end (the first
member would leave before the second joined) and `-o` would override the
committed offsets at every assignment.

The scenario, for an eager (range) and a cooperative (cooperative-sticky)
assignor: once both members own partitions, a first batch is produced; then
one member is stopped, the other takes every partition over, and a second
batch is produced. Checked:
- both members owned partitions, never the same one, and each consumed a share
  of the first batch, only from its own partitions;
- every message was consumed exactly once (no member left before its
  consumption had been committed, so nothing is read twice), with its value;
- the group's committed offsets reached the end of every partition while the
  members ran (auto-commit) and are still there after they left (read with
  OffsetFetch, and with the admin API's list_consumer_group_offsets);
- DescribeGroups shows the group Stable with both members and the partitions
  each one reported, then Empty once both left.
"""

import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import (Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions,
                             TopicPartition)

from clients import admin_client, create_topic, eventually, producer, watermarks
from conftest import QUICK_GROUP_START

PARTITIONS = 6
BATCH = 2_000
STEP_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 30.0

pytestmark = pytest.mark.herald_args(*QUICK_GROUP_START)


class KcatMember:
    """One `kcat -G` process, what it printed and which partitions it owns."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, strategy: str,
                 workdir: Path):
        binary = shutil.which("kcat")
        if binary is None:
            pytest.fail("kcat is not installed: run scripts/install-test-deps.sh")
        self.name = name
        self.topic = topic
        self.out_path = workdir / f"{name}.out"
        self.err_path = workdir / f"{name}.err"
        self.out = open(self.out_path, "wb")
        self.err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(
            [
                binary, "-b", bootstrap, "-G", group,
                "-f", "%p\t%o\t%s\n", "-u",
                "-X", f"client.id={name}",
                "-X", f"partition.assignment.strategy={strategy}",
                # No committed offset yet: start at the beginning, not at the end.
                "-X", "auto.offset.reset=earliest",
                topic,
            ],
            stdin=subprocess.DEVNULL, stdout=self.out, stderr=self.err,
        )

    def consumed(self):
        """(partition, offset, value) of every message printed, in order."""
        text = self.out_path.read_bytes().decode(errors="replace")
        rows = []
        for line in text.split("\n")[:-1]:  # the last piece is empty, or not written yet
            p, offset, value = line.split("\t", 2)
            rows.append((int(p), int(offset), value))
        return rows

    def owned(self) -> set:
        """The partitions owned after the last rebalance kcat reported."""
        owned = set()
        for line in self.err_path.read_text(errors="replace").splitlines():
            if "rebalanced" not in line:
                continue
            parts = {int(p) for p in re.findall(re.escape(self.topic) + r" \[(\d+)\]", line)}
            if "incremental assignment" in line:
                owned |= parts
            elif "assigned:" in line:
                owned = parts
            elif "incremental revoke" in line or "revoked:" in line:
                owned -= parts
            else:
                raise AssertionError(f"{self.name}: unexpected rebalance line {line!r}")
        return owned

    def alive(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n"
                                 f"{self.err_path.read_text(errors='replace')[-3000:]}")
        return True

    def stop(self):
        """SIGTERM: kcat closes its consumer (final commit, LeaveGroup) and exits 0."""
        self.alive()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=EXIT_TIMEOUT_S)
            raise AssertionError(f"{self.name} did not exit within {EXIT_TIMEOUT_S}s")
        assert code == 0, (f"{self.name} exited with {code}:\n"
                           f"{self.err_path.read_text(errors='replace')[-3000:]}")


def wait_until(check, what: str, timeout_s: float = STEP_TIMEOUT_S):
    return eventually(check, what, timeout_s)


def produce_batch(bootstrap: str, topic: str, start: int, count: int) -> dict:
    """Messages start..start+count, value `kcat-group:i`, spread evenly over the
    partitions; returns (partition, offset) -> value of each acknowledged one."""
    prod = producer(bootstrap, acks="all")
    acked, errors = {}, []

    def report(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[(msg.partition(), msg.offset())] = msg.value().decode()

    for i in range(start, start + count):
        while True:
            try:
                prod.produce(topic, value=b"kcat-group:%d" % i, partition=i % PARTITIONS,
                             on_delivery=report)
                break
            except BufferError:
                prod.poll(0.1)
        prod.poll(0)
    remaining = prod.flush(STEP_TIMEOUT_S)
    assert remaining == 0, f"{remaining} messages unacknowledged after flush"
    assert not errors, f"delivery errors: {errors[:5]}"
    assert len(acked) == count
    return acked


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "enable.auto.commit": False})
    try:
        committed = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                     timeout=30)
    finally:
        reader.close()
    return {tp.partition: tp.offset for tp in committed}


def group_offsets(bootstrap: str, group: str) -> dict:
    """The group's committed offsets as the admin API lists them (all partitions)."""
    admin = admin_client(bootstrap)  # kept alive until the answer is in
    listed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in listed.topic_partitions}


def describe_group(bootstrap: str, group: str):
    admin = admin_client(bootstrap)  # kept alive until the answer is in
    return admin.describe_consumer_groups([group])[group].result(timeout=30)


def log_ends(bootstrap: str, topic: str) -> dict:
    return {p: high for p, (_, high) in watermarks(bootstrap, topic, PARTITIONS).items()}


@pytest.fixture
def kcat_members(request, broker, tmp_path):
    started = []

    def start(*args):
        m = KcatMember(*args, workdir=tmp_path)
        started.append(m)
        return m

    try:
        yield start
    finally:
        for m in started:
            if m.proc.poll() is None:
                m.proc.kill()
                m.proc.wait(timeout=EXIT_TIMEOUT_S)
            m.out.close()
            m.err.close()
        call_report = getattr(request.node, "report_call", None)
        if call_report is not None and call_report.failed:
            for m in started:
                print(f"--- {m.name} stderr ---\n"
                      f"{m.err_path.read_text(errors='replace')[-4000:]}")


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_two_kcat_balanced_consumers_share_a_topic_and_commit_to_the_end(
        broker, unique, kcat_members, strategy):
    topic, group = unique("kcat-topic"), unique("kcat-group")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    members = [kcat_members(f"kcat{i}", broker.bootstrap, group, topic, strategy)
               for i in range(2)]

    def spread():
        owned = [m.owned() for m in members if m.alive()]
        counted = sorted(p for ps in owned for p in ps)
        return counted == list(range(PARTITIONS)) and all(owned) and owned

    settled = wait_until(spread, "the partitions spread over both kcat members")

    # Batch 1, shared by the two members.
    acked = produce_batch(broker.bootstrap, topic, 0, BATCH)
    wait_until(lambda: set(acked) <= {(p, o) for m in members for p, o, _ in m.consumed()},
               "the first batch consumed")
    ends = log_ends(broker.bootstrap, topic)
    assert sum(ends.values()) == BATCH
    wait_until(lambda: committed_offsets(broker.bootstrap, group, topic) == ends,
               "the members' auto-commits reach the end of every partition")
    assert [m.owned() for m in members] == settled, "the group rebalanced during batch 1"
    # What the group coordinator tells an admin (kafka-consumer-groups --describe).
    described = describe_group(broker.bootstrap, group)
    assert described.state == ConsumerGroupState.STABLE, described
    assert {m.client_id: {tp.partition for tp in m.assignment.topic_partitions}
            for m in described.members} == {m.name: o for m, o in zip(members, settled)}
    for m, owned in zip(members, settled):
        rows = m.consumed()
        assert rows, f"{m.name} consumed nothing"
        foreign = sorted({p for p, _, _ in rows} - owned)
        assert not foreign, f"{m.name} consumed partitions {foreign} it did not own ({owned})"

    # One member leaves; the other takes every partition over and reads on.
    leaving, staying = members
    leaving.stop()
    wait_until(lambda: staying.alive() and staying.owned() == set(range(PARTITIONS)),
               f"{staying.name} owns every partition after {leaving.name} left")
    acked.update(produce_batch(broker.bootstrap, topic, BATCH, BATCH))
    wait_until(lambda: set(acked) <= {(p, o) for m in members for p, o, _ in m.consumed()},
               "the second batch consumed")
    ends = log_ends(broker.bootstrap, topic)
    assert sum(ends.values()) == 2 * BATCH
    wait_until(lambda: committed_offsets(broker.bootstrap, group, topic) == ends,
               "the remaining member's auto-commits reach the end of every partition")
    staying.stop()

    consumed = [(p, o, v) for m in members for p, o, v in m.consumed()]
    seen = {}
    for p, o, v in consumed:
        assert (p, o) in acked, f"consumed {p}/{o} ({v!r}) that nobody produced"
        assert v == acked[(p, o)], f"{p}/{o}: consumed {v!r}, produced {acked[(p, o)]!r}"
        seen[(p, o)] = seen.get((p, o), 0) + 1
    twice = sorted(po for po, n in seen.items() if n > 1)
    assert not twice, f"{len(twice)} messages consumed more than once, e.g. {twice[:5]}"
    assert len(seen) == len(acked) == 2 * BATCH
    assert committed_offsets(broker.bootstrap, group, topic) == ends
    assert group_offsets(broker.bootstrap, group) == ends
    described = describe_group(broker.bootstrap, group)
    assert (described.state, described.members) == (ConsumerGroupState.EMPTY, []), described
