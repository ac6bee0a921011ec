"""Catch-up for one subject in a busy partition, over the subject filters:
records published by confluent-kafka under 20,000 subjects, one gRPC
subscriber of one subject from the earliest offset. It receives exactly
that subject's records, in order, while the broker passes over the blocks
that hold none of them (its own counters say so), and again after a
restart, from the filter files the broker kept."""

import re
import time
import urllib.request

from confluent_kafka.admin import AdminClient, NewTopic

from kafka_side import TIMEOUT_S, produce
from push_client import Session

RECORDS = 100_000
RARE = b"dev.rare"
RARE_AT = (700, 66_000, 99_000)


def admin_address(herald):
    """The admin listener of the broker's latest start (it picks a free
    port), from the line it logs when ready."""
    text = herald.log_path.read_text(errors="replace")
    found = re.findall(r"admin listener ready on (127\.0\.0\.1:\d+)", text)
    assert found, "the broker logged no admin address"
    return found[-1]


def metric(herald, name):
    with urllib.request.urlopen(f"http://{admin_address(herald)}/metrics", timeout=10) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def wait_for_the_indexer(herald, indexed_before):
    """Waits until the indexer has read past `indexed_before` bytes and
    then stood still with nothing left: the lag gauge alone is set at the
    end of a pass, so right after a produce it can still say 0 from the
    pass before."""
    deadline = time.monotonic() + 60
    last = None
    while True:
        assert time.monotonic() < deadline, "the subject filters never caught up"
        indexed = metric(herald, "herald_push_subject_indexed_bytes_total")
        lag = metric(herald, "herald_push_subject_index_lag")
        if indexed > indexed_before and lag == 0 and indexed == last:
            return
        last = indexed
        time.sleep(0.3)


def catch_up(proto, herald, sid):
    pb = proto.pb
    s = Session(proto, herald.push_address)
    s.send(subscribe=pb.Subscribe(subscription_id=sid, topic="busy", subject=RARE,
                                  start=pb.StartAt(earliest=pb.Empty())))
    s.wait_for(lambda s: len(s.deliveries) >= len(RARE_AT), what="the subject's records")
    s.drain_quiet(0.5)
    got = [(o, v) for _s, _p, o, _k, v in s.deliveries]
    s.close()
    return got


def test_a_catch_up_for_one_subject_reads_only_blocks_that_may_hold_it(herald, proto):
    admin = AdminClient({"bootstrap.servers": herald.bootstrap})
    topic = NewTopic("busy", num_partitions=1, replication_factor=1,
                     config={"subject.filters": "true"})
    admin.create_topics([topic])["busy"].result(timeout=TIMEOUT_S)
    records = [
        (RARE if i in RARE_AT else b"dev.%d" % (i % 20_000), b"value-%d" % i)
        for i in range(RECORDS)
    ]
    # Batches of at most 500 records: a read returns whole batches, so a
    # producer's batch is the finest grain a catch-up can read at.
    indexed_before = metric(herald, "herald_push_subject_indexed_bytes_total")
    produce(herald.bootstrap, "busy", records, batch_num_messages=500)
    wait_for_the_indexer(herald, indexed_before)
    want = [(i, b"value-%d" % i) for i in RARE_AT]

    assert catch_up(proto, herald, 1) == want
    skipped = metric(herald, "herald_push_catch_up_skipped_offsets_total")
    read = metric(herald, "herald_push_catch_up_read_bytes_total")
    assert skipped > RECORDS * 0.9, f"only {skipped} offsets passed over"
    # The log holds about 2.7 MB; three blocks and a false positive or two
    # are well under a tenth of it.
    assert read < 270_000, f"{read} bytes read"

    # The sealed chunk's filter file survives a restart; the rest of the
    # log is indexed again, and the catch-up is the same.
    assert list(herald.data_dir.glob("busy-0/*.subjects")), "no filter file kept"
    herald.restart()
    wait_for_the_indexer(herald, 0)
    assert catch_up(proto, herald, 2) == want
    assert metric(herald, "herald_push_catch_up_skipped_offsets_total") > RECORDS * 0.9
