"""Batches are stored exactly as produced: the codec a client compressed with
is the codec a fetch returns, for every codec.

The stored batches are read back over a raw Fetch (v4) so that the test sees
the attributes of each batch, not what a client makes of them.
"""

import struct

import pytest
from kafka import KafkaProducer

from clients import CLIENT_TIMEOUT_S, create_topic, producer
from kafka_wire import RawConnection, string

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
MESSAGES = 2_000


def stored_codecs(bootstrap: str, topic: str) -> list:
    """Codec id of every batch stored in partition 0 of `topic`."""
    codecs, offset = [], 0
    with RawConnection(bootstrap) as conn:
        while True:
            body = struct.pack(">iiiib", -1, 100, 1, 8 << 20, 0)
            body += struct.pack(">i", 1) + string(topic)
            body += struct.pack(">i", 1) + struct.pack(">iqi", 0, offset, 4 << 20)
            r = conn.call(1, 4, body)
            r.take(">i")  # throttle_time_ms
            assert r.take(">i") == 1
            assert r.string() == topic
            assert r.take(">i") == 1
            _partition, error, high_watermark, _lso = r.take(">ihqq")
            assert error == 0
            r.array(lambda r: r.take(">qq"))  # aborted transactions
            size = r.take(">i")
            records = r.data[r.pos : r.pos + max(size, 0)]
            if not records:
                return codecs
            pos = 0
            while pos + 61 <= len(records):
                base_offset, batch_length = struct.unpack_from(">qi", records, pos)
                attributes, last_delta = struct.unpack_from(">hi", records, pos + 21)
                codecs.append(attributes & 0x07)
                offset = base_offset + last_delta + 1
                pos += 12 + batch_length
            if offset >= high_watermark:
                return codecs


@pytest.mark.parametrize(
    "codec",
    [
        "none",
        "gzip",
        "snappy",
        "lz4",
        "zstd",
    ],
)
def test_confluent_kafka_batches_are_stored_with_their_codec(broker, unique, codec):
    topic = unique(f"codec-cc-{codec}")
    create_topic(broker.bootstrap, topic, 1)
    prod = producer(broker.bootstrap, **{"compression.type": codec, "linger.ms": 20})
    for i in range(MESSAGES):
        prod.produce(topic, value=b"value-%06d-" % i + b"x" * 50)
    assert prod.flush(CLIENT_TIMEOUT_S) == 0
    codecs = stored_codecs(broker.bootstrap, topic)
    assert codecs, "batches were stored"
    assert set(codecs) == {CODEC_IDS[codec]}, f"stored codecs {set(codecs)}"


# A second client's view of the same rule (confluent-kafka covers snappy and
# zstd above; kafka-python needs extra packages for those).
@pytest.mark.parametrize("codec", ["gzip", "lz4"])
def test_kafka_python_batches_are_stored_with_their_codec(broker, unique, codec):
    topic = unique(f"codec-kp-{codec}")
    create_topic(broker.bootstrap, topic, 1)
    prod = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20)
    for i in range(MESSAGES):
        prod.send(topic, value=b"value-%06d-" % i + b"x" * 50)
    prod.flush(timeout=CLIENT_TIMEOUT_S)
    prod.close(timeout=CLIENT_TIMEOUT_S)
    codecs = stored_codecs(broker.bootstrap, topic)
    assert codecs, "batches were stored"
    assert set(codecs) == {CODEC_IDS[codec]}, f"stored codecs {set(codecs)}"
