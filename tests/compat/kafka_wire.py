"""Just enough of the Kafka wire protocol, by hand, to send well-formed and
malformed requests over a raw socket and read the answers.

Framing: int32 size, then the request header v1 (int16 api_key, int16
api_version, int32 correlation_id, nullable string client_id), then the body.
Only non-flexible versions are used (ApiVersions v0, Metadata v1, Produce v3),
so every answer starts with the response header v0 (int32 correlation_id).
Record batches come from kafka-python's DefaultRecordBatchBuilder.
"""

import socket
import struct
import time

from kafka.record.default_records import DefaultRecordBatchBuilder

API_PRODUCE = 0
API_METADATA = 3
API_VERSIONS = 18

NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
UNSUPPORTED_VERSION = 35

IO_TIMEOUT_S = 15.0


class Closed(Exception):
    """The broker closed the connection (EOF or reset)."""


def string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def nullable_string(value) -> bytes:
    return struct.pack(">h", -1) if value is None else string(value)


def request(api_key: int, api_version: int, correlation_id: int, body: bytes,
            client_id="herald-compat-raw") -> bytes:
    payload = struct.pack(">hhi", api_key, api_version, correlation_id)
    payload += nullable_string(client_id) + body
    return struct.pack(">i", len(payload)) + payload


class Reader:
    """Sequential big-endian reads over one response body."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError(f"response ends at {len(self.data)}, wanted {size} more at {self.pos}")
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values[0] if len(values) == 1 else values

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        return raw.decode()

    def array(self, item):
        n = self.take(">i")
        return [] if n < 0 else [item(self) for _ in range(n)]


class RawConnection:
    def __init__(self, bootstrap: str):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=IO_TIMEOUT_S)
        self.sock.settimeout(IO_TIMEOUT_S)
        self.next_correlation_id = 1

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def send(self, api_key: int, api_version: int, body: bytes) -> int:
        correlation_id = self.next_correlation_id
        self.next_correlation_id += 1
        self.send_raw(request(api_key, api_version, correlation_id, body))
        return correlation_id

    def _read_exactly(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            try:
                chunk = self.sock.recv(min(n - got, 1 << 20))
            except (ConnectionResetError, BrokenPipeError) as e:
                raise Closed(str(e)) from e
            except socket.timeout as e:
                raise TimeoutError(
                    f"no answer and no close within {IO_TIMEOUT_S:.0f}s ({got}/{n} bytes)"
                ) from e
            if not chunk:
                raise Closed(f"EOF after {got}/{n} bytes")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def read_response(self):
        """(correlation_id, body) of the next response; raises Closed on EOF/reset."""
        (size,) = struct.unpack(">i", self._read_exactly(4))
        assert 4 <= size <= 64 << 20, f"implausible response size {size}"
        frame = self._read_exactly(size)
        return struct.unpack_from(">i", frame)[0], frame[4:]

    def call(self, api_key: int, api_version: int, body: bytes) -> Reader:
        correlation_id = self.send(api_key, api_version, body)
        got, body = self.read_response()
        assert got == correlation_id, f"response correlation id {got}, sent {correlation_id}"
        return Reader(body)

    def closed_or_answered(self):
        """After a bad request: 'closed' if the broker closed this connection,
        else the (correlation_id, body) it answered. Fails if it does neither."""
        try:
            return self.read_response()
        except Closed:
            return "closed"

    def expect_closed(self):
        """The broker must close this connection without answering."""
        try:
            data = self.sock.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            return
        except socket.timeout as e:
            raise AssertionError(f"connection still open {IO_TIMEOUT_S:.0f}s later") from e
        assert data == b"", f"expected the connection closed, got {data[:64]!r}"

    # ---- ApiVersions v0 -------------------------------------------------

    def api_versions(self, version=0):
        """Error code and {api_key: (min, max)} from an ApiVersions request."""
        return parse_api_versions_v0(self.call(API_VERSIONS, version, b""))

    # ---- Produce v3 ------------------------------------------------------

    def produce(self, topic: str, batches: dict, acks=1, timeout_ms=10_000):
        """Produce v3 of {partition: batch bytes}; returns {partition: (error, base_offset)}."""
        body = nullable_string(None) + struct.pack(">hi", acks, timeout_ms)
        body += struct.pack(">i", 1) + string(topic) + struct.pack(">i", len(batches))
        for partition, batch in batches.items():
            body += struct.pack(">ii", partition, len(batch)) + bytes(batch)
        return parse_produce_v3(self.call(API_PRODUCE, 3, body), topic)


def parse_api_versions_v0(r: Reader):
    error = r.take(">h")
    keys = r.array(lambda r: r.take(">hhh"))
    return error, {k: (lo, hi) for k, lo, hi in keys}


def parse_produce_v3(r: Reader, topic: str):
    def partition(r):
        index, error, base_offset, _log_append_time = r.take(">ihqq")
        return index, (error, base_offset)

    def topic_response(r):
        return r.string(), dict(r.array(partition))

    topics = dict(r.array(topic_response))
    assert list(topics) == [topic], f"produce response names topics {list(topics)}"
    return topics[topic]


def record_batch(values, keys=None, timestamp_ms=None) -> bytearray:
    """An uncompressed RecordBatch v2 (magic 2) holding `values`, base offset 0."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30,
    )
    ts = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
    for i, value in enumerate(values):
        key = keys[i] if keys else None
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return builder.build()


def metadata_v1_body(topics) -> bytes:
    if topics is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(topics)) + b"".join(string(t) for t in topics)
