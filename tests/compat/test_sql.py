"""SQL over history (issue 20) against a broker built with the `sql`
feature: answers checked against Apache DataFusion's own Python package
over a Parquet export of the same records, and against a plain consumer's
scan for JSON fields; seed 003's history as one CLI command; bad queries
refused with clear errors while the broker serves on.

The broker binary is $HERALD_SQL_BIN, else target/debug/herald (scripts/
test.sh builds it with `--features sql`).
"""

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from datafusion import SessionContext

from broker import HeraldBroker, serve_for_test
from clients import CLIENT_TIMEOUT_S, consumer, create_topic, producer
from confluent_kafka import TopicPartition
from conftest import REPO_ROOT

T = CLIENT_TIMEOUT_S
BASE_TS = 1_700_000_000_000
RECORDS = 3_000
PARTITIONS = 3


def sql_binary() -> Path:
    return Path(os.environ.get("HERALD_SQL_BIN", REPO_ROOT / "target" / "debug" / "herald"))


@pytest.fixture
def sql_broker(request, tmp_path):
    binary = sql_binary()
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: run `cargo build -p herald --features sql` first")
    server = HeraldBroker(binary, tmp_path / "data", tmp_path / "broker.log")
    yield from serve_for_test(server, request)


def sql(broker, text, fmt="jsonl", expect=200, **extra):
    body = json.dumps({"sql": text, "format": fmt, **extra}).encode()
    req = urllib.request.Request(f"http://{broker.admin_address}/v1/sql", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=T) as answer:
            assert answer.status == expect
            return answer.read(), answer.headers
    except urllib.error.HTTPError as e:
        body = e.read()
        if e.code == 404 and b"sql feature" in body:
            pytest.fail(f"{sql_binary()} was built without the sql feature")
        assert e.code == expect, (e.code, body)
        return json.loads(body or b"{}"), e.headers


def rows(broker, text):
    body, _ = sql(broker, text)
    return [json.loads(line) for line in body.decode().splitlines()]


def produce_orders(bootstrap, topic):
    """RECORDS JSON orders over the partitions; answers what was sent."""
    prod = producer(bootstrap, linger_ms=5)
    sent = []
    for i in range(RECORDS):
        record = {
            "partition": i % PARTITIONS,
            "key": f"user-{(i * 7) % 50}",
            "value": {"total": (i * 13) % 997 / 4, "region": ["eu", "us", "ap"][i % 3 if i % 11 else 0]},
            "type": "refund" if i % 10 == 0 else "order",
            "timestamp": BASE_TS + i * 100,
        }
        prod.produce(topic, key=record["key"], value=json.dumps(record["value"]),
                     partition=record["partition"], timestamp=record["timestamp"],
                     headers=[("type", record["type"].encode())])
        sent.append(record)
    assert prod.flush(T) == 0
    return sent


def scan(bootstrap, topic):
    """Every record of `topic`, read by a plain consumer."""
    cons = consumer(bootstrap)
    cons.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen = []
    while len(seen) < RECORDS:
        batch = cons.consume(num_messages=1000, timeout=T)
        assert batch, f"only {len(seen)} records read"
        for msg in batch:
            assert msg.error() is None, msg.error()
            seen.append(msg)
    cons.close()
    return seen


def test_sql_answers_equal_datafusion_over_a_parquet_export_and_a_plain_scan(sql_broker, unique, tmp_path):
    topic = unique("orders")
    create_topic(sql_broker.bootstrap, topic, PARTITIONS)
    produce_orders(sql_broker.bootstrap, topic)

    # The export, through the CLI, at a cut (the answer names it).
    export = tmp_path / "orders.parquet"
    out = subprocess.run([str(sql_binary()), "sql", f'SELECT * FROM "{topic}"', "--format", "parquet",
                          "--output", str(export), "--admin", sql_broker.admin_address],
                         capture_output=True, text=True, timeout=T)
    assert out.returncode == 0, out.stderr
    assert "snapshot sql-" in out.stderr
    table = pq.read_table(export)
    assert table.num_rows == RECORDS
    assert table.column_names == ["partition", "offset", "timestamp", "key", "value", "headers",
                                  "key_bytes", "value_bytes"]

    # A snapshot's Parquet export holds the same rows, with their topic.
    for args in (["snapshot", "create", topic, "--id", "pq"],
                 ["snapshot", "export", "pq", "--format", "parquet", "--output", str(tmp_path / "pq.parquet"),
                  "--bootstrap", sql_broker.bootstrap]):
        out = subprocess.run([str(sql_binary()), *args, "--admin", sql_broker.admin_address],
                             capture_output=True, text=True, timeout=T)
        assert out.returncode == 0, (args, out.stderr)
    snap = pq.read_table(tmp_path / "pq.parquet")
    assert snap.num_rows == RECORDS
    assert snap.column_names[0] == "topic" and set(snap.column("topic").to_pylist()) == {topic}
    assert sorted(zip(snap.column("partition").to_pylist(), snap.column("offset").to_pylist())) == \
        sorted(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist()))

    ctx = SessionContext()
    ctx.register_parquet("orders", str(export))
    for query in [
        "SELECT partition, count(*) AS n, min(\"offset\") AS lo, max(\"offset\") AS hi "
        "FROM {t} GROUP BY partition ORDER BY partition",
        "SELECT key, count(*) AS n FROM {t} WHERE key LIKE 'user-1%' GROUP BY key ORDER BY key",
        "SELECT count(*) AS n FROM {t} WHERE timestamp >= to_timestamp_millis(1700000100000) "
        "AND timestamp < to_timestamp_millis(1700000200000)",
        "SELECT partition, \"offset\" FROM {t} WHERE partition = 1 AND \"offset\" BETWEEN 10 AND 14 "
        "ORDER BY \"offset\"",
        "SELECT headers['type'] AS kind, count(*) AS n FROM {t} GROUP BY 1 ORDER BY 1",
        "SELECT min(timestamp) AS first, max(timestamp) AS last FROM {t}",
        # Through the key index and the smallest timestamps, when the
        # history indexer has reached them (the rest is read in full).
        "SELECT partition, \"offset\", key FROM {t} WHERE key = 'user-7' ORDER BY partition, \"offset\"",
        "SELECT count(*) AS n FROM {t} WHERE key IN ('user-3', 'user-21') "
        "AND timestamp <= to_timestamp_millis(1700000150000)",
    ]:
        ours = rows(sql_broker, query.format(t=f'"{topic}"'))
        theirs = ctx.sql(query.format(t="orders")).to_pylist()
        assert len(ours) == len(theirs), query
        for mine, reference in zip(ours, theirs):
            for column, value in reference.items():
                if hasattr(value, "timestamp"):
                    # Parquet keeps the instant; JSON lines write it as text.
                    assert mine[column].startswith(value.strftime("%Y-%m-%dT%H:%M:%S")), (query, mine, value)
                else:
                    assert mine[column] == value, (query, column, mine, reference)

    # JSON fields, against a plain consumer computing the same.
    expected = Counter()
    totals = Counter()
    for msg in scan(sql_broker.bootstrap, topic):
        value = json.loads(msg.value())
        expected[value["region"]] += 1
        totals[value["region"]] += value["total"]
    ours = rows(sql_broker, f"SELECT value->>'region' AS region, count(*) AS n, "
                            f"sum(CAST(value->>'total' AS DOUBLE)) AS total FROM \"{topic}\" GROUP BY 1 ORDER BY 1")
    assert {r["region"]: r["n"] for r in ours} == dict(expected)
    for r in ours:
        assert abs(r["total"] - totals[r["region"]]) < 1e-6


def test_key_lookups_read_only_the_batches_holding_the_key(sql_broker, unique):
    """Keys grouped in batches (what a producer keyed by device sends):
    once the history indexer has caught up, a lookup of one key of ten
    fits a scan limit a full scan is far over, and answers every record."""
    topic = unique("devices")
    create_topic(sql_broker.bootstrap, topic, 1)
    prod = producer(sql_broker.bootstrap)
    for group in range(100):
        for r in range(20):
            prod.produce(topic, key=f"device-{group % 10}", partition=0,
                         value=json.dumps({"group": group, "r": r, "pad": "x" * 100}))
        assert prod.flush(T) == 0
    limit = {"max_scan_bytes": 100_000}
    answer, _ = sql(sql_broker, f'SELECT count(*) AS n FROM "{topic}"', expect=422, **limit)
    assert "limit" in answer["error"]
    query = f"SELECT value->>'group' AS g, count(*) AS n FROM \"{topic}\" WHERE key = 'device-3' GROUP BY 1 ORDER BY 1"
    deadline = time.monotonic() + T
    while True:
        body = json.dumps({"sql": query, "format": "jsonl", **limit}).encode()
        req = urllib.request.Request(f"http://{sql_broker.admin_address}/v1/sql", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=T) as answer:
                got = [json.loads(line) for line in answer.read().decode().splitlines()]
                break
        except urllib.error.HTTPError as e:
            assert e.code == 422, (e.code, e.read())
            assert time.monotonic() < deadline, "the history index never caught up"
            time.sleep(0.05)
    want = sorted((str(g), 20) for g in range(100) if g % 10 == 3)
    assert sorted((r["g"], r["n"]) for r in got) == want


def history_indexed(broker, topic):
    """True once the history indexer has indexed every record of `topic`."""
    with urllib.request.urlopen(f"http://{broker.admin_address}/metrics", timeout=T) as answer:
        text = answer.read().decode()
    lags = [line.rsplit(" ", 1)[1] for line in text.splitlines()
            if line.startswith("herald_partition_history_index_lag_records") and f'topic="{topic}"' in line]
    return bool(lags) and all(float(v) == 0 for v in lags)


def test_key_lookups_in_compressed_batches_of_many_keys_answer_every_record(sql_broker, unique):
    """lz4 batches of a thousand records over forty keys, as a busy keyed
    producer sends them: a lookup reads each batch only up to the key's
    last record in it, and one, several (IN) or absent keys answer exactly
    the records a plain consumer finds, before and after the indexer has
    caught up."""
    topic = unique("mixed")
    create_topic(sql_broker.bootstrap, topic, 2)
    prod = producer(sql_broker.bootstrap, compression_type="lz4", linger_ms=200, batch_size=1_000_000)
    for n in range(6000):
        prod.produce(topic, key=f"k{(n * 7919) % 40}", partition=n % 2,
                     value=json.dumps({"n": n, "pad": "y" * (n % 300)}))
    assert prod.flush(T) == 0
    cons = consumer(sql_broker.bootstrap)
    cons.assign([TopicPartition(topic, p, 0) for p in range(2)])
    truth = {}
    while sum(len(v) for v in truth.values()) < 6000:
        msg = cons.poll(T)
        assert msg is not None and not msg.error(), msg and msg.error()
        truth.setdefault(msg.key().decode(), []).append((msg.partition(), msg.offset()))
    cons.close()

    def check():
        for keys in (["k3"], ["k0", "k17", "k39"], ["k5", "nobody"], ["nobody"]):
            listed = ", ".join(f"'{k}'" for k in keys)
            where = f"key = {listed}" if len(keys) == 1 else f"key IN ({listed})"
            got = sorted((r["partition"], r["offset"])
                         for r in rows(sql_broker, f'SELECT partition, "offset" FROM "{topic}" WHERE {where}'))
            want = sorted(po for k in keys for po in truth.get(k, []))
            assert got == want, where

    check()
    deadline = time.monotonic() + T
    while not history_indexed(sql_broker, topic):
        assert time.monotonic() < deadline, "the history index never caught up"
        time.sleep(0.05)
    check()


def test_history_is_one_command(sql_broker, unique):
    topic = unique("history")
    create_topic(sql_broker.bootstrap, topic, PARTITIONS)
    sent = produce_orders(sql_broker.bootstrap, topic)
    t1, t2 = BASE_TS + 50_000, BASE_TS + 150_000
    want = sorted((r["timestamp"], r["partition"]) for r in sent
                  if t1 <= r["timestamp"] < t2 and r["key"] == "user-7")
    assert want
    out = subprocess.run([str(sql_binary()), "history", topic, "--subject", "user-7",
                          "--from-ms", str(t1), "--to-ms", str(t2), "--admin", sql_broker.admin_address],
                         capture_output=True, text=True, timeout=T)
    assert out.returncode == 0, out.stderr
    got = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["partition"], r["key"]) for r in got] == [(p, "user-7") for _, p in want]
    assert all(json.loads(r["value"])["region"] in ("eu", "us", "ap") for r in got)
    # The same over HTTP, as CSV.
    url = (f"http://{sql_broker.admin_address}/v1/topics/{topic}/history"
           f"?from_ms={t1}&to_ms={t2}&subject=user-7&format=csv")
    with urllib.request.urlopen(url, timeout=T) as answer:
        lines = answer.read().decode().splitlines()
    assert lines[0].startswith("partition,offset,timestamp,key,value")
    assert len(lines) == 1 + len(want)


def test_bad_queries_get_clear_errors_and_the_broker_serves_on(sql_broker, unique):
    topic = unique("bad")
    create_topic(sql_broker.bootstrap, topic, 1)
    cases = [
        ("SELEC 1", 400, "SQL"),
        (f'SELECT nope FROM "{topic}"', 400, "nope"),
        ("SELECT * FROM missing_topic", 404, "unknown table"),
        (f'DROP TABLE "{topic}"', 400, "only queries"),
        (f"COPY (SELECT 1) TO '/tmp/herald-copy.csv'", 400, "only queries"),
    ]
    for text, status, words in cases:
        answer, _ = sql(sql_broker, text, expect=status)
        assert words.lower() in answer["error"].lower(), (text, answer)
    # Over its time limit: records to read, so the query has work to stop.
    prod = producer(sql_broker.bootstrap)
    for i in range(500):
        prod.produce(topic, value=b'{"n": %d}' % i, partition=0)
    assert prod.flush(T) == 0
    answer, _ = sql(sql_broker, f'SELECT * FROM "{topic}" a, "{topic}" b', expect=422, timeout_ms=0)
    assert "limit" in answer["error"]
    out = subprocess.run([str(sql_binary()), "sql", "SELEC 1", "--admin", sql_broker.admin_address],
                         capture_output=True, text=True, timeout=T)
    assert out.returncode != 0 and "400" in out.stderr
    # Still serving: produce and read back.
    prod.produce(topic, value=b'{"ok": 1}', partition=0)
    assert prod.flush(T) == 0
    assert rows(sql_broker, f'SELECT value FROM "{topic}" WHERE "offset" = 500') == [{"value": '{"ok": 1}'}]
