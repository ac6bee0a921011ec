"""`herald consume` prints records a Kafka client produced compressed.

Batches are stored as the producer compressed them (every codec Kafka has);
the CLI decompresses them to print keys, headers and values, as
kafka-console-consumer does.
"""

import json
import subprocess

import pytest

from clients import create_topic, producer
from conftest import herald_binary_path

RECORDS = 200


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_cli_consume_prints_every_record_of_compressed_batches(broker, unique, codec):
    topic = unique(f"cli-{codec}")
    create_topic(broker.bootstrap, topic, partitions=1)
    prod = producer(broker.bootstrap, compression_type=codec, linger_ms=50)
    for i in range(RECORDS):
        prod.produce(
            topic,
            key=f"key-{i % 7}".encode(),
            # Repetitive values compress well: several records per batch.
            value=f"value-{i:05d}-{'x' * 40}".encode(),
            headers=[("codec", codec.encode())],
        )
    assert prod.flush(30) == 0

    run = subprocess.run(
        [
            str(herald_binary_path()),
            "consume",
            topic,
            "--format",
            "json",
            "--bootstrap",
            broker.bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    records = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["offset"] for r in records] == list(range(RECORDS))
    for i, record in enumerate(records):
        assert record["value"] == f"value-{i:05d}-{'x' * 40}"
        assert record["key"] == f"key-{i % 7}"
        assert record["headers"] == {"codec": codec}
