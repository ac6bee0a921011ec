"""Online queries against the real binary: registered over the admin API
(and the CLI), their aggregates equal to what a plain consumer computes by
scanning the topic, kept across a restart, triggers raising alerts on the
internal topic exactly where their condition comes to hold, and bad
queries refused with clear errors."""

import json
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import TopicPartition

from clients import CLIENT_TIMEOUT_S, consumer, create_topic, eventually, producer, watermarks
from conftest import herald_binary_path

T = CLIENT_TIMEOUT_S


def api(broker, method, path, body=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(f"http://{broker.admin_address}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=T) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def produce_orders(bootstrap, topic, first, count, base_ts, partition=None):
    prod = producer(bootstrap, linger_ms=5)
    for i in range(first, first + count):
        value = {"user": f"u{i % 137}", "amount": (i % 500) / 10, "region": "eu" if i % 3 else "us"}
        kwargs = {"partition": partition} if partition is not None else {}
        prod.produce(topic, key=f"k{i}".encode(), value=json.dumps(value).encode(),
                     timestamp=base_ts + i * 50, **kwargs)
        prod.poll(0)
    assert prod.flush(T * 2) == 0


def read_all(bootstrap, topic, partitions):
    marks = watermarks(bootstrap, topic, partitions)
    cons = consumer(bootstrap)
    wanted = {p: high for p, (_, high) in marks.items() if high > 0}
    cons.assign([TopicPartition(topic, p, 0) for p in wanted])
    got, done = [], set()
    deadline = time.monotonic() + 120
    while len(done) < len(wanted):
        assert time.monotonic() < deadline
        for msg in cons.consume(num_messages=5000, timeout=1.0):
            assert msg.error() is None, msg.error()
            got.append(msg)
            if msg.offset() >= wanted[msg.partition()] - 1:
                done.add(msg.partition())
    cons.close()
    return got


def settled(broker, query, seen):
    def check():
        status, answer = api(broker, "GET", f"/v1/queries/{query}")
        return status == 200 and answer["lag"] == 0 and answer["results"]["records_seen"] == seen
    eventually(check, f"query {query} indexing {seen} records")
    return api(broker, "GET", f"/v1/queries/{query}")[1]


QUERY = {
    "id": "eu-orders", "filter": "value.region == \"eu\" and value.amount >= 10",
    "bucket_ms": 10_000,
    "aggregates": [
        {"name": "orders", "function": "count"},
        {"name": "revenue", "function": "sum", "field": "value.amount"},
        {"name": "smallest", "function": "min", "field": "value.amount"},
        {"name": "largest", "function": "max", "field": "value.amount"},
        {"name": "buyers", "function": "distinct", "field": "value.user"},
    ],
}


@pytest.mark.restarts_broker
def test_registered_aggregates_equal_a_scan_by_a_plain_consumer(broker, unique):
    topic = unique("orders")
    create_topic(broker.bootstrap, topic, 3)
    base_ts = (int(time.time() * 1000) // 10_000) * 10_000 - 600_000
    produce_orders(broker.bootstrap, topic, 0, 1500, base_ts)
    # Registered half way: what is stored is indexed, what follows is
    # followed.
    status, answer = api(broker, "POST", "/v1/queries", {**QUERY, "topic": topic})
    assert status == 201, answer
    produce_orders(broker.bootstrap, topic, 1500, 1500, base_ts)
    answer = settled(broker, "eu-orders", 3000)

    buckets = {}
    for msg in read_all(broker.bootstrap, topic, 3):
        value = json.loads(msg.value())
        if value["region"] != "eu" or value["amount"] < 10:
            continue
        start = msg.timestamp()[1] // 10_000 * 10_000
        b = buckets.setdefault(start, {"n": 0, "sum": 0.0, "min": None, "max": None, "users": set()})
        b["n"] += 1
        b["sum"] += value["amount"]
        b["min"] = value["amount"] if b["min"] is None else min(b["min"], value["amount"])
        b["max"] = value["amount"] if b["max"] is None else max(b["max"], value["amount"])
        b["users"].add(value["user"])

    def check(results):
        rows = {row["start_ms"]: row["values"] for row in results["buckets"]}
        assert sorted(rows) == sorted(buckets)
        for start, b in buckets.items():
            orders, revenue, smallest, largest, buyers = rows[start]
            assert orders == b["n"]
            assert abs(revenue - b["sum"]) < 1e-6
            assert (smallest, largest) == (b["min"], b["max"])
            assert abs(buyers - len(b["users"])) <= max(1, 0.05 * len(b["users"]))
        assert results["totals"][0] == sum(b["n"] for b in buckets.values())
        assert results["records_matched"] == sum(b["n"] for b in buckets.values())

    check(answer["results"])
    # A time range: the buckets starting in it.
    starts = sorted(buckets)
    status, ranged = api(broker, "GET", f"/v1/queries/eu-orders?from_ms={starts[2]}&to_ms={starts[5]}")
    assert status == 200 and [r["start_ms"] for r in ranged["results"]["buckets"]] == starts[2:5]
    assert ranged["results"]["totals"][0] == sum(buckets[s]["n"] for s in starts[2:5])

    # The CLI shows the same.
    out = subprocess.run([str(herald_binary_path()), "query", "show", "eu-orders", "--admin", broker.admin_address],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert f"{sum(b['n'] for b in buckets.values())} records matched of 3000 seen" in out, out

    # Kept across a restart, its state rebuilt from the log.
    broker.restart()
    check(settled(broker, "eu-orders", 3000)["results"])
    status, _ = api(broker, "DELETE", "/v1/queries/eu-orders")
    assert status == 200
    assert api(broker, "GET", "/v1/queries")[1] == []


def test_a_trigger_raises_an_alert_exactly_where_its_condition_comes_to_hold(broker, unique):
    topic = unique("clicks")
    create_topic(broker.bootstrap, topic, 1)
    spec = {
        "id": "surge", "topic": topic, "bucket_ms": 1000,
        "aggregates": [{"name": "clicks", "function": "count"}],
        "triggers": [{"name": "busy", "aggregate": "clicks", "op": ">=", "threshold": 5, "window_ms": 2000}],
    }
    status, answer = api(broker, "POST", "/v1/queries", spec)
    assert status == 201, answer
    base = 1_700_000_000_000
    # Per second: how many clicks. The window is the newest second and the
    # one before.
    per_second = [1, 2, 3, 0, 0, 4, 0, 6, 1, 1, 1, 1, 9]
    stamps = [base + s * 1000 + i for s, n in enumerate(per_second) for i in range(n)]
    prod = producer(broker.bootstrap, linger_ms=0, max_in_flight_requests_per_connection=1)
    for ts in stamps:
        prod.produce(topic, value=b"click", timestamp=ts, partition=0)
    assert prod.flush(T) == 0
    settled(broker, "surge", len(stamps))

    # The same rule, record by record.
    expected, firing, counts = [], False, {}
    for ts in stamps:
        second = (ts - base) // 1000
        counts[second] = counts.get(second, 0) + 1
        newest = max(counts)
        value = counts.get(newest, 0) + counts.get(newest - 1, 0)
        holds = value >= 5
        if holds and not firing:
            expected.append((base + (newest - 1) * 1000, base + (newest + 1) * 1000, value))
        firing = holds
    assert len(expected) >= 2

    cons = consumer(broker.bootstrap)
    cons.assign([TopicPartition("__herald_alerts", 0, 0)])
    alerts = []
    deadline = time.monotonic() + 60
    while len(alerts) < len(expected) and time.monotonic() < deadline:
        for msg in cons.consume(num_messages=100, timeout=1.0):
            assert msg.error() is None, msg.error()
            assert msg.key() == b"surge"
            alerts.append(json.loads(msg.value()))
    time.sleep(1)
    alerts += [json.loads(m.value()) for m in cons.consume(num_messages=100, timeout=1.0)]
    cons.close()
    got = [(a["window_start_ms"], a["window_end_ms"], a["value"]) for a in alerts]
    assert got == expected
    assert all(a["trigger"] == "busy" and a["op"] == ">=" and a["threshold"] == 5 for a in alerts)
    assert api(broker, "GET", "/v1/queries/surge")[1]["alerts"] == len(expected)
    # Monitoring sees the same: the alerts raised and nothing left to index.
    with urllib.request.urlopen(f"http://{broker.admin_address}/metrics", timeout=T) as answer:
        scraped = answer.read().decode().splitlines()
    labels = f'{{query="surge",topic="{topic}"}}'
    assert f"herald_query_alerts_total{labels} {len(expected)}" in scraped
    assert f"herald_query_indexed_records_total{labels} {len(stamps)}" in scraped
    assert f"herald_query_lag_records{labels} 0" in scraped


def test_bad_queries_get_clear_errors_and_the_broker_serves_on(broker, unique):
    topic = unique("badq")
    create_topic(broker.bootstrap, topic, 1)
    good = {"id": "ok", "topic": topic, "bucket_ms": 1000, "aggregates": [{"name": "n", "function": "count"}]}
    cases = [
        ({**good, "filter": "value.x =="}, 400, "filter is invalid"),
        ({**good, "topic": "no-such-topic"}, 404, "unknown topic"),
        ({**good, "id": "has.dot"}, 400, "invalid"),
        ({**good, "bucket_ms": 0}, 400, "bucket_ms"),
        ({**good, "aggregates": [{"name": "s", "function": "sum"}]}, 400, "needs a field"),
        ({**good, "triggers": [{"name": "t", "aggregate": "x", "op": ">", "threshold": 1, "window_ms": 1000}]},
         400, "no aggregate named"),
        ({**good, "surprise": 1}, 400, "invalid JSON"),
    ]
    for body, status, words in cases:
        got, answer = api(broker, "POST", "/v1/queries", body)
        assert got == status and words in answer["error"], (body, got, answer)
    assert api(broker, "POST", "/v1/queries", good)[0] == 201
    got, answer = api(broker, "POST", "/v1/queries", good)
    assert got == 409 and "already exists" in answer["error"]
    got, answer = api(broker, "GET", "/v1/queries/ok?from_ms=soon")
    assert got == 400 and "from_ms" in answer["error"]
    got, answer = api(broker, "DELETE", "/v1/queries/nope")
    assert got == 404 and "unknown query nope" in answer["error"]
    # Still serving.
    produce_orders(broker.bootstrap, topic, 0, 10, int(time.time() * 1000))
    assert settled(broker, "ok", 10)["results"]["totals"] == [10]
