"""Consistent topic snapshots against the real binary: taken over the admin
API while confluent-kafka producers and a consume-then-produce relay run,
read by stock clients (confluent-kafka, kcat) as read-only view topics,
exported and restored byte for byte, and pinned against retention."""

import filecmp
import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from clients import (
    CLIENT_TIMEOUT_S,
    admin_client,
    consume_from,
    consumer,
    create_topic,
    eventually,
    produce_indexed,
    producer,
    watermarks,
)
from conftest import herald_binary_path

T = CLIENT_TIMEOUT_S


def api(broker, method, path, body=None, raw=None):
    """Calls the admin API; returns (status, parsed JSON answer)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(
        f"http://{broker.admin_address}{path}", data=data, method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=T) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def take(broker, topics, **extra):
    status, snapshot = api(broker, "POST", "/v1/snapshots", {"topics": topics, **extra})
    assert status == 201, snapshot
    return snapshot


def cuts(snapshot):
    """{(topic, partition): (start, end)} of a snapshot."""
    return {
        (t["name"], p["partition"]): (p["start"], p["end"])
        for t in snapshot["topics"]
        for p in t["partitions"]
    }


def herald(*args, timeout=120):
    run = subprocess.run([str(herald_binary_path()), *args], capture_output=True, timeout=timeout)
    assert run.returncode == 0, f"herald {' '.join(args)} exited {run.returncode}:\n{run.stderr.decode()}"
    return run.stdout.decode()


def read_range(bootstrap, topic, ranges, timeout_s=120.0):
    """The records of each partition p in ranges[p] = (start, end), reading
    no further: a topic may hold more past `end`."""
    cons = consumer(bootstrap)
    try:
        wanted = {p: (start, end) for p, (start, end) in ranges.items() if end > start}
        cons.assign([TopicPartition(topic, p, start) for p, (start, _) in wanted.items()])
        got, done = [], set()
        deadline = time.monotonic() + timeout_s
        while len(done) < len(wanted):
            assert time.monotonic() < deadline, f"read {len(got)} records of {topic} in {timeout_s:.0f}s"
            # consume() waits for all 10000 or its timeout: a short one, so
            # that the last (partial) batch of each of the test's 15 reads
            # does not cost a second.
            for msg in cons.consume(num_messages=10000, timeout=0.2):
                assert msg.error() is None, f"consumer error: {msg.error()}"
                start, end = wanted[msg.partition()]
                if msg.offset() < end:
                    got.append(msg)
                if msg.offset() >= end - 1:
                    done.add(msg.partition())
        return got
    finally:
        cons.close()


def read_view(broker, view, partitions):
    """Every record of a view topic, partition by partition, to its end."""
    marks = watermarks(broker.bootstrap, view, partitions)
    return marks, read_range(broker.bootstrap, view, marks)


def test_a_snapshot_under_concurrent_producers_and_a_relay_is_a_consistent_cut(broker, unique):
    """Producers write to `source`; a relay consumes `source` and writes, for
    each record it fetched, a record naming it to `derived`. Every derived
    record a cut holds must have its source record in the cut too (no
    effect without its cause), and every produce acknowledged before the
    snapshot was asked for must be in it."""
    source, derived = unique("snap-src"), unique("snap-derived")
    create_topic(broker.bootstrap, source, 4)
    create_topic(broker.bootstrap, derived, 2)
    stop = threading.Event()
    acked = {}  # (partition) -> highest acknowledged offset of source
    acked_lock = threading.Lock()
    errors = []

    def produce_source(n):
        prod = producer(broker.bootstrap, linger_ms=0)

        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)
                return
            with acked_lock:
                acked[msg.partition()] = max(acked.get(msg.partition(), -1), msg.offset())

        i = 0
        while not stop.is_set():
            try:
                prod.produce(source, key=b"k%d-%d" % (n, i), value=b"v%d" % i, on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            prod.poll(0.001)
        prod.flush(T)

    def relay():
        cons = consumer(broker.bootstrap)
        cons.assign([TopicPartition(source, p, 0) for p in range(4)])
        prod = producer(broker.bootstrap, linger_ms=0)
        while not stop.is_set():
            for msg in cons.consume(num_messages=500, timeout=0.2):
                if msg.error():
                    errors.append(msg.error())
                    continue
                prod.produce(derived, key=msg.key(), value=b"%d:%d" % (msg.partition(), msg.offset()))
            prod.poll(0)
        prod.flush(T)
        cons.close()

    threads = [threading.Thread(target=produce_source, args=(n,)) for n in range(2)]
    threads.append(threading.Thread(target=relay))
    for thread in threads:
        thread.start()
    snapshots = []
    try:
        time.sleep(1.0)
        for k in range(5):
            with acked_lock:
                acked_before = dict(acked)
            snapshot = take(broker, [source, derived], id=f"run-{k}")
            snapshots.append((snapshot, acked_before))
            time.sleep(0.3)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert not errors, errors[:5]

    for snapshot, acked_before in snapshots:
        cut = cuts(snapshot)
        for partition, offset in acked_before.items():
            assert offset < cut[(source, partition)][1], (
                f"{snapshot['id']}: acknowledged {source}/{partition}@{offset} lies past the cut "
                f"{cut[(source, partition)]}"
            )
        derived_view = f"__snapshot.{snapshot['id']}.{derived}"
        _, msgs = read_view(broker, derived_view, 2)
        assert msgs, f"{snapshot['id']}: the relay wrote nothing before the cut"
        for msg in msgs:
            p, offset = (int(x) for x in msg.value().split(b":"))
            assert offset < cut[(source, p)][1], (
                f"{snapshot['id']}: {derived}/{msg.partition()}@{msg.offset()} names "
                f"{source}/{p}@{offset}, which the cut {cut[(source, p)]} excludes"
            )
        # The view holds exactly the topic's records below the cut.
        source_view = f"__snapshot.{snapshot['id']}.{source}"
        marks, viewed = read_view(broker, source_view, 4)
        for p in range(4):
            assert marks[p] == cut[(source, p)], (marks[p], cut[(source, p)])
        live = read_range(broker.bootstrap, source, {p: cut[(source, p)] for p in range(4)})
        below = sorted((m.partition(), m.offset(), m.key(), m.value()) for m in live)
        assert sorted((m.partition(), m.offset(), m.key(), m.value()) for m in viewed) == below


def test_kcat_reads_a_view_to_its_cut_and_a_view_refuses_writes(broker, unique, tmp_path):
    topic = unique("snap-kcat")
    admin = create_topic(broker.bootstrap, topic, 2)
    produce_indexed(producer(broker.bootstrap), topic, "before", 300, int(time.time() * 1000))
    snapshot = take(broker, [topic], id="kcat")
    produce_indexed(producer(broker.bootstrap), topic, "after", 200, int(time.time() * 1000))
    view = f"__snapshot.kcat.{topic}"
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed: run scripts/install-test-deps.sh"
    out = subprocess.run([kcat, "-b", broker.bootstrap, "-C", "-t", view, "-e", "-q", "-f", "%p %o %h\n"],
                         capture_output=True, timeout=120, check=True).stdout.decode(errors="replace").splitlines()
    assert len(out) == 300, f"kcat read {len(out)} records of the view, expected the 300 before the cut"
    assert all("tag=before" in line for line in out), out[:3]
    ends = {p["partition"]: p["end"] for p in snapshot["topics"][0]["partitions"]}
    offsets = subprocess.run([kcat, "-b", broker.bootstrap, "-Q", "-t", f"{view}:0:-1", "-t", f"{view}:1:-1"],
                             capture_output=True, timeout=60, check=True).stdout.decode()
    for p, end in ends.items():
        assert f"[{p}] offset {end}" in offsets, offsets
    # The CLI reads it the same way.
    printed = herald("consume", topic, "--snapshot", "kcat", "--format", "json",
                     "--bootstrap", broker.bootstrap).splitlines()
    assert len(printed) == 300

    # Writes are refused with INVALID_TOPIC_EXCEPTION, and the view is unchanged.
    refused = subprocess.run([kcat, "-b", broker.bootstrap, "-P", "-t", view, "-p", "0"], input=b"nope\n",
                             capture_output=True, timeout=60)
    assert refused.returncode != 0 or b"Invalid topic" in refused.stderr, refused.stderr
    prod = producer(broker.bootstrap, message_timeout_ms=10000)
    failures = []
    prod.produce(view, value=b"nope", partition=0, on_delivery=lambda err, msg: failures.append(err))
    prod.flush(T)
    assert failures and failures[0] is not None
    assert failures[0].code() == KafkaError.TOPIC_EXCEPTION, failures[0]
    assert watermarks(broker.bootstrap, view, 2)[0][1] == ends[0]
    # Creating a topic with a view's name is refused too.
    futures = admin.create_topics([__import__("confluent_kafka.admin", fromlist=["NewTopic"]).NewTopic(
        f"__snapshot.x.{topic}", 1, 1)], operation_timeout=T)
    with pytest.raises(KafkaException) as created:
        futures[f"__snapshot.x.{topic}"].result(timeout=T)
    assert created.value.args[0].code() == KafkaError.TOPIC_EXCEPTION


def test_an_export_and_restore_round_trip_byte_for_byte_with_offsets(broker, unique, tmp_path):
    topic = unique("snap-backup")
    admin = create_topic(broker.bootstrap, topic, 3)
    base_ts = int(time.time() * 1000)
    log = produce_indexed(producer(broker.bootstrap, compression_type="lz4"), topic, "b", 900, base_ts)
    # A log start past 0: the restored topic must start there too.
    futures = admin.delete_records([TopicPartition(topic, 1, 40)], request_timeout=T)
    assert list(futures.values())[0].result(timeout=T).low_watermark == 40
    take(broker, [topic], id="backup")
    first = tmp_path / "first"
    herald("snapshot", "export", "backup", "--format", "raw", "--output", str(first),
           "--admin", broker.admin_address, "--bootstrap", broker.bootstrap)
    restored = unique("snap-restored")
    herald("snapshot", "restore", str(first), "--rename", f"{topic}={restored}", "--admin", broker.admin_address)

    marks = watermarks(broker.bootstrap, restored, 3)
    assert marks == watermarks(broker.bootstrap, f"__snapshot.backup.{topic}", 3)
    assert marks[1][0] == 40
    original = {(m.partition(), m.offset()): (m.key(), m.value(), m.headers(), m.timestamp())
                for m in consume_from(broker.bootstrap, topic, {0: 0, 1: 40, 2: 0}, 900 - 40)}
    copy = {(m.partition(), m.offset()): (m.key(), m.value(), m.headers(), m.timestamp())
            for m in consume_from(broker.bootstrap, restored, {0: 0, 1: 40, 2: 0}, 900 - 40)}
    assert copy == original, "the restored topic holds other records or offsets"
    assert len(log.acked()) == 900

    # Exported again, the restored topic gives the same bytes.
    take(broker, [restored], id="again")
    second = tmp_path / "second"
    herald("snapshot", "export", "again", "--format", "raw", "--output", str(second),
           "--admin", broker.admin_address, "--bootstrap", broker.bootstrap)
    for p in range(3):
        assert filecmp.cmp(first / topic / f"{p}.batches", second / restored / f"{p}.batches", shallow=False)

    # JSON lines hold what a plain consumer reads.
    lines = tmp_path / "backup.jsonl"
    herald("snapshot", "export", "backup", "--format", "jsonl", "--output", str(lines),
           "--admin", broker.admin_address, "--bootstrap", broker.bootstrap)
    exported = [json.loads(line) for line in lines.read_text().splitlines()]
    assert len(exported) == 900 - 40
    for record in exported:
        key, value, headers, (_, ts) = original[(record["partition"], record["offset"])]
        assert record["timestamp"] == ts
        assert (record["key"].encode() if record["key"] is not None else None) == key
        text = record["value"].encode() if record["value"] is not None else None
        assert text == value or record.get("value_base64")
        assert [h["key"] for h in record["headers"]] == [k for k, _ in headers]

    # A damaged backup is refused and leaves no topic behind.
    damaged = tmp_path / "damaged"
    shutil.copytree(first, damaged)
    batches = damaged / topic / "0.batches"
    data = bytearray(batches.read_bytes())
    data[len(data) // 2] ^= 0xFF
    batches.write_bytes(bytes(data))
    run = subprocess.run([str(herald_binary_path()), "snapshot", "restore", str(damaged), "--rename",
                          f"{topic}={restored}-2", "--admin", broker.admin_address], capture_output=True)
    assert run.returncode != 0 and b"damaged" in run.stderr, run.stderr
    status, answer = api(broker, "POST", f"/v1/topics/{restored}-3/restore",
                         raw=b'{"partitions":[{"start":0,"end":5,"bytes":100}]}\n' + b"\x00" * 100)
    assert status == 400, answer
    assert topic not in [t for t in admin.list_topics(timeout=T).topics if t.endswith("-3")]
    assert f"{restored}-3" not in admin.list_topics(timeout=T).topics


@pytest.mark.restarts_broker
def test_retention_keeps_what_a_snapshot_pins_until_it_is_deleted(broker, unique):
    topic = unique("snap-pin")
    admin = create_topic(broker.bootstrap, topic, 1,
                         {"segment.bytes": "16384", "retention.bytes": "32768"})
    small = {"batch_size": 2000, "linger_ms": 0}
    produce_indexed(producer(broker.bootstrap, **small), topic, "p", 200, int(time.time() * 1000), partition=0)
    snapshot = take(broker, [topic], id="pin", ttl_ms=3_600_000)
    assert snapshot["expires_at_ms"] > snapshot["created_at_ms"]
    end = snapshot["topics"][0]["partitions"][0]["end"]
    produce_indexed(producer(broker.bootstrap, **small), topic, "q", 600, int(time.time() * 1000), partition=0)
    time.sleep(2.5)  # maintenance runs every second
    assert watermarks(broker.bootstrap, topic, 1)[0][0] == 0, "retention deleted pinned records"
    futures = admin.delete_records([TopicPartition(topic, 0, 10)], request_timeout=T)
    with pytest.raises(KafkaException) as refused:
        list(futures.values())[0].result(timeout=T)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION
    futures = admin.delete_topics([topic], operation_timeout=T)
    with pytest.raises(KafkaException) as refused:
        futures[topic].result(timeout=T)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION

    broker.restart()
    time.sleep(2.5)
    assert watermarks(broker.bootstrap, topic, 1)[0][0] == 0, "the pin did not survive a restart"
    _, msgs = read_view(broker, f"__snapshot.pin.{topic}", 1)
    assert len(msgs) == end

    status, _ = api(broker, "DELETE", "/v1/snapshots/pin")
    assert status == 200
    eventually(lambda: watermarks(broker.bootstrap, topic, 1)[0][0] > 0,
               "retention catching up once the snapshot is deleted")


def test_bad_snapshot_requests_get_clear_errors_and_the_broker_serves_on(broker, unique):
    topic = unique("snap-bad")
    create_topic(broker.bootstrap, topic, 1)
    cases = [
        ("POST", "/v1/snapshots", {"topics": ["no-such-topic"]}, 404, "unknown topic no-such-topic"),
        ("POST", "/v1/snapshots", {"topics": [topic], "id": "has.dot"}, 400, "invalid"),
        ("POST", "/v1/snapshots", {"topics": []}, 400, "at least one topic"),
        ("POST", "/v1/snapshots", {"topics": [topic, topic]}, 400, "named twice"),
        ("POST", "/v1/snapshots", {"topics": [topic], "ttl_ms": 0}, 400, "time to live"),
        ("POST", "/v1/snapshots", {"topic": topic}, 400, "invalid JSON"),
        ("GET", "/v1/snapshots/nope", None, 404, "unknown snapshot nope"),
        ("DELETE", "/v1/snapshots/nope", None, 404, "unknown snapshot nope"),
        ("PUT", "/v1/snapshots", None, 405, "takes GET and POST"),
        ("GET", "/v1/nothing", None, 404, "not found"),
    ]
    for method, path, body, status, words in cases:
        got, answer = api(broker, method, path, body)
        assert got == status and words in answer["error"], (method, path, body, got, answer)
    got, answer = api(broker, "POST", "/v1/snapshots", raw=b"{not json")
    assert got == 400 and "invalid JSON" in answer["error"]
    got, answer = api(broker, "POST", "/v1/snapshots", raw=b"x" * (2 << 20))
    assert got == 413, answer
    take(broker, [topic], id="dup")
    got, answer = api(broker, "POST", "/v1/snapshots", {"topics": [topic], "id": "dup"})
    assert got == 409 and "already exists" in answer["error"]
    # Still serving.
    log = produce_indexed(producer(broker.bootstrap), topic, "ok", 10, int(time.time() * 1000))
    assert len(log.acked()) == 10
    assert len(api(broker, "GET", "/v1/snapshots")[1]) == 1
