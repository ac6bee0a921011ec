"""kcat (Debian's package, built on its own librdkafka): metadata, produce, consume."""

import json
import shutil
import subprocess

import pytest

from clients import create_topic, watermarks

LINES = 2_000
PARTITIONS = 2


def kcat(*args, input_path=None, timeout=120):
    binary = shutil.which("kcat")
    if binary is None:
        pytest.fail("kcat is not installed: run scripts/install-test-deps.sh")
    stdin = open(input_path, "rb") if input_path else subprocess.DEVNULL
    try:
        run = subprocess.run(
            [binary, *args], stdin=stdin, capture_output=True, timeout=timeout
        )
    finally:
        if input_path:
            stdin.close()
    assert run.returncode == 0, f"kcat {' '.join(args)} exited {run.returncode}:\n{run.stderr.decode()}"
    return run.stdout.decode()


def test_kcat_metadata_lists_topic_partitions_and_broker(broker, unique):
    topic = unique("kcat-meta")
    create_topic(broker.bootstrap, topic, 3)
    meta = json.loads(kcat("-b", broker.bootstrap, "-L", "-J", "-t", topic))
    brokers = {b["id"]: b["name"] for b in meta["brokers"]}
    assert list(brokers.values()) == [broker.bootstrap]
    [listed] = meta["topics"]
    assert listed["topic"] == topic
    assert "error" not in listed, listed
    assert sorted(p["partition"] for p in listed["partitions"]) == [0, 1, 2]
    for p in listed["partitions"]:
        assert p["leader"] in brokers, p


def test_kcat_produces_a_file_and_consumes_it_back_from_the_beginning(broker, unique, tmp_path):
    topic = unique("kcat-file")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    lines = [(f"key-{i % 10}", f"line {i} of the file, payload {'z' * (i % 50)}") for i in range(LINES)]
    source = tmp_path / "messages.txt"
    source.write_text("".join(f"{k}\t{v}\n" for k, v in lines))

    kcat("-b", broker.bootstrap, "-t", topic, "-P", "-K", "\t", "-z", "snappy", "-l", str(source))
    marks = watermarks(broker.bootstrap, topic, PARTITIONS)
    assert sum(high for _, high in marks.values()) == LINES

    out = kcat(
        "-b", broker.bootstrap, "-t", topic, "-C", "-o", "beginning", "-e", "-q",
        "-f", "%p\t%o\t%k\t%s\n",
    )
    rows = [line.split("\t") for line in out.splitlines()]
    assert len(rows) == LINES, f"kcat consumed {len(rows)} messages, produced {LINES}"
    next_offset = {}
    last_index = {}
    for partition, offset, key, value in rows:
        p = int(partition)
        assert int(offset) == next_offset.get(p, 0), f"partition {p}: offset {offset} out of order"
        next_offset[p] = int(offset) + 1
        i = int(value.split()[1])
        assert (key, value) == lines[i]
        assert i > last_index.get(p, -1), f"partition {p}: line {i} after line {last_index[p]}"
        last_index[p] = i
    assert sorted(int(v.split()[1]) for _, _, _, v in rows) == list(range(LINES))
    # Same key, same partition.
    by_key = {}
    for partition, _, key, _ in rows:
        by_key.setdefault(key, set()).add(partition)
    assert all(len(ps) == 1 for ps in by_key.values()), by_key
