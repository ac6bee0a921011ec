"""SQL over history against what Kafka users do today (issue 20's benchmark).

One herald node (release build with the `sql` feature). Per codec (none,
lz4) it loads RECORDS JSON records into a topic of two partitions with a
confluent-kafka producer: keys from 1,000,000 ids, skewed (log-uniform: the
hottest id holds about 5% of the records, most a handful); two
headers; timestamps spread evenly over the hour before the load, in
producer order. Then, medians of --reps runs each:

- full scans with a key, a header and a JSON-field predicate (count(*)),
  and a time-range scan: herald's SQL over HTTP, records per second and
  records per CPU-second of the broker (per core); the same predicates by
  `kcat -J | jq` and by a confluent-kafka consumer evaluating them in
  Python (what Kafka UIs do), over the first --subset records (their rate
  is per record, so a subset measures it); and Apache DataFusion's Python
  package over a Parquet export of the topic (made by herald; the export
  time is printed);
- "the last minute": time to the first row of `timestamp > now() -
  interval '1 minute'`, streamed as JSON lines;
- key lookups: `key = 'id-N'` for --lookups ids (500) drawn from the
  loaded keys, p50 and p99 of the whole answer, once the history indexer
  has caught up; medians over --reps such samples (the p99 of 100 would
  be the second slowest, which one stall of a shared machine decides).
  With `--key-copy on` the topic keeps key-sorted copies of its sealed
  segments (`key.sorted.copy`; the lookups wait for them to be built);
  `--key-copy off,on` loads and measures each in turn, in the same run.
  `--lookups-only` measures the lookups alone.

Timings are printed, never asserted.

    .venv/bin/python bench/sql/sql_bench.py [--records 10000000] [--codecs none,lz4] [--reps 3] [--subset 500000]
"""

import argparse
import http.client
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
import procs  # noqa: E402
from herald_nodes import SingleNode  # noqa: E402

PARTITIONS = 2
IDS = 1_000_000
TICKS = os.sysconf("SC_CLK_TCK")

# (name, SQL predicate, jq predicate, Python predicate over (key, headers dict, value dict))
SCANS = [
    ("key prefix", "key LIKE 'id-12%'", '(.key | startswith("id-12"))',
     lambda k, h, v: k.startswith("id-12")),
    ("header", "headers['type'] = 'refund'", '(.headers | index("refund") != null)',
     lambda k, h, v: h.get("type") == "refund"),
    ("JSON field", "(value->>'region') = 'eu' AND CAST(value->>'amount' AS DOUBLE) > 250",
     '((.payload | fromjson) as $v | $v.region == "eu" and $v.amount > 250)',
     lambda k, h, v: v["region"] == "eu" and v["amount"] > 250),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--codecs", default="none,lz4")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--subset", type=int, default=500_000,
                        help="records the kcat | jq and consumer baselines read")
    parser.add_argument("--lookups", type=int, default=500)
    parser.add_argument("--key-copy", default="off",
                        help="off, on, or off,on: whether the topic keeps key-sorted copies")
    parser.add_argument("--segment-bytes", type=int, default=None,
                        help="the topic's segment.bytes (default: the broker's, 1 GiB); only sealed "
                             "segments get key-sorted copies")
    parser.add_argument("--lookups-only", action="store_true",
                        help="skip the scans, the Parquet export and the last minute")
    args = parser.parse_args()
    procs.raise_on_sigterm()
    # Per record: the log and its key-sorted copies (uncompressed about
    # 175 bytes, lz4 about 75), and a Parquet export about as large as an
    # uncompressed log unless only lookups are measured.
    per_record = 175 if "none" in args.codecs.split(",") else 75
    if not args.lookups_only:
        per_record += 220
    need_gb = args.records * per_record / 1e9
    if procs.free_disk_gb() < need_gb + 5:
        sys.exit(f"needs about {need_gb:.0f} GB free disk; {procs.free_disk_gb():.0f} GB free")
    for codec in args.codecs.split(","):
        for key_copy in args.key_copy.split(","):
            if key_copy not in ("off", "on"):
                sys.exit(f"--key-copy takes off, on or off,on, not {key_copy}")
            run_codec(codec, args, key_copy == "on")


def run_codec(codec, args, key_copy):
    work = Path(tempfile.mkdtemp(prefix="herald-sql-bench-"))
    node = SingleNode(work)
    bootstrap, admin_port = node.bootstrap, node.admin_port
    try:
        node.start()
        proc = node.proc
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = f"events-{codec}"
        config = {"key.sorted.copy": "true"} if key_copy else {}
        if args.segment_bytes:
            config["segment.bytes"] = str(args.segment_bytes)
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, config=config)])[topic].result(60)
        copies = ", key-sorted copies" if key_copy else ""
        if args.segment_bytes:
            copies += f", segments of {args.segment_bytes >> 20} MiB"
        print(f"\n=== {args.records:,} records, codec {codec}{copies} ===", flush=True)
        started = time.monotonic()
        keys, end_ms = load(bootstrap, topic, codec, args.records)
        print(f"loaded in {time.monotonic() - started:.1f} s", flush=True)
        sql = Sql(admin_port, proc.pid)
        wait_indexed(sql, topic, keys)
        if key_copy:
            wait_copied(work)
        t = f'"{topic}"'

        # Full scans: ours, then the baselines on a subset.
        for name, predicate, jq_filter, py_filter in ([] if args.lookups_only else SCANS):
            ours = [sql.timed(f"SELECT count(*) AS n FROM {t} WHERE {predicate}") for _ in range(args.reps)]
            wall = statistics.median(o[0] for o in ours)
            cpu = statistics.median(o[1] for o in ours)
            count = ours[0][2][0]["n"]
            kcat = statistics.median(kcat_jq_rate(bootstrap, topic, jq_filter, args.subset)
                                     for _ in range(args.reps))
            consumer = statistics.median(consumer_rate(bootstrap, topic, py_filter, args.subset)
                                         for _ in range(args.reps))
            rate, per_core = args.records / wall, args.records / cpu
            print(f"scan, {name:<10} {count:>10,} rows  herald {rate / 1e6:6.2f} M rec/s "
                  f"({per_core / 1e6:5.2f} M/s per core)  kcat|jq {kcat / 1e3:7.1f} k/s "
                  f"-> {rate / kcat:6.1f}x  consumer {consumer / 1e3:7.1f} k/s -> {rate / consumer:6.1f}x",
                  flush=True)

        if not args.lookups_only:
            # A time range: 5 minutes in the middle of the hour.
            window = (f"timestamp >= to_timestamp_millis({end_ms - 1_800_000}) "
                      f"AND timestamp < to_timestamp_millis({end_ms - 1_500_000})")
            ours = [sql.timed(f"SELECT count(*) AS n FROM {t} WHERE {window}") for _ in range(args.reps)]
            wall = statistics.median(o[0] for o in ours)
            print(f"scan, 5-minute range {ours[0][2][0]['n']:>10,} rows in {wall * 1000:8.1f} ms "
                  f"({args.records / wall / 1e6:.1f} M topic records/s)", flush=True)

            # DataFusion over a Parquet export.
            export = work / "export.parquet"
            began = time.monotonic()
            sql.download(f"SELECT * FROM {t}", "parquet", export)
            exported = time.monotonic() - began
            df_rates = datafusion_rates(export, args.reps, args.records)
            for (name, _, _, _), (wall, cpu) in zip(SCANS, df_rates):
                print(f"DataFusion over Parquet, {name:<10} {args.records / wall / 1e6:6.2f} M rec/s "
                      f"({args.records / cpu / 1e6:5.2f} M/s per core)", flush=True)
            print(f"(the Parquet export took {exported:.1f} s, {export.stat().st_size / 1e9:.2f} GB)")
            export.unlink()

            # The last minute of the data: time to the first row.
            firsts = [sql.first_row_ms(f"SELECT * FROM {t} WHERE timestamp > to_timestamp_millis({end_ms - 60_000})")
                      for _ in range(max(args.reps, 5))]
            print(f"last minute: first row in {statistics.median(firsts):.2f} ms (median of {len(firsts)})")

        # Key lookups: --reps samples of --lookups ids each.
        # The cost of a lookup grows with the records it answers (each in
        # its own batch, read up to it): the tail is also shown by size.
        p50s, p99s = [], []
        by_size = {}
        for rep in range(args.reps):
            rng = random.Random(11 + rep)
            sample = [keys[rng.randrange(len(keys))] for _ in range(args.lookups)]
            timed = [sql.timed(f"SELECT \"offset\", value FROM {t} WHERE key = 'id-{k}'") for k in sample]
            latencies = sorted(wall * 1000 for wall, _, _ in timed)
            p50s.append(latencies[len(latencies) // 2])
            p99s.append(latencies[int(len(latencies) * 0.99) - 1])
            for wall, _, found in timed:
                size = "1-10" if len(found) <= 10 else "11-100" if len(found) <= 100 else "over 100"
                by_size.setdefault(size, []).append(wall * 1000)
        print(f"key lookups: p50 {statistics.median(p50s):.2f} ms, p99 {statistics.median(p99s):.2f} ms "
              f"(medians of {args.reps} samples of {args.lookups}; p99s {', '.join(f'{p:.1f}' for p in p99s)})",
              flush=True)
        for size in ("1-10", "11-100", "over 100"):
            walls = sorted(by_size.get(size, []))
            if walls:
                print(f"  answering {size} records: {len(walls)} lookups, p50 {walls[len(walls) // 2]:.2f} ms, "
                      f"p99 {walls[max(int(len(walls) * 0.99) - 1, 0)]:.2f} ms, max {walls[-1]:.2f} ms", flush=True)
    finally:
        node.stop()
        shutil.rmtree(work, ignore_errors=True)


def load(bootstrap, topic, codec, records):
    """Produces `records` JSON records stamped over the hour before now;
    answers the key ids used and the newest timestamp."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144,
                         "compression.type": codec, "queue.buffering.max.messages": 1_000_000,
                         "acks": 1})
    rng = random.Random(5)
    used = set()
    regions = ["eu", "us", "ap", "sa"]
    now = int(time.time() * 1000)
    start = now - 3_600_000
    step = 3_600_000 / records
    for n in range(records):
        # Log-uniform over the ids: id-0 gets about 5% of the records,
        # most ids a handful.
        uid = int(IDS ** rng.random()) - 1
        used.add(uid)
        value = (f'{{"id": {n}, "user": "u{uid}", "region": "{regions[n % 4]}", '
                 f'"amount": {n % 500 + (n % 100) / 100}, "status": "ok", "items": {n % 7}}}')
        headers = [("type", b"refund" if n % 10 == 0 else b"order"), ("source", b"web" if n % 3 else b"app")]
        while True:
            try:
                producer.produce(topic, key=f"id-{uid}", value=value, headers=headers,
                                 partition=n % PARTITIONS, timestamp=start + int(n * step))
                break
            except BufferError:
                producer.poll(0.05)
        if n % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(300) == 0
    return sorted(used), now


class Sql:
    """POST /v1/sql, timed, with the broker's CPU time."""

    def __init__(self, port, pid):
        self.port = port
        self.pid = pid

    def cpu_seconds(self):
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def _post(self, text, fmt="jsonl", **limits):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        conn.request("POST", "/v1/sql", json.dumps({"sql": text, "format": fmt, **limits}),
                     {"Content-Type": "application/json"})
        return conn, conn.getresponse()

    def answer(self, text, **limits):
        """The whole answer's body."""
        conn, answer = self._post(text, **limits)
        body = answer.read()
        conn.close()
        if answer.status != 200:
            raise QueryRefused(answer.status, body)
        return body

    def query(self, text, **limits):
        return [json.loads(line) for line in self.answer(text, **limits).decode().splitlines()]

    def timed(self, text):
        """Wall time until the whole answer is received (not the time Python
        takes to parse it: a thousand rows cost milliseconds), broker CPU
        time, and the rows."""
        cpu = self.cpu_seconds()
        began = time.perf_counter()
        body = self.answer(text)
        wall = time.perf_counter() - began
        rows = [json.loads(line) for line in body.decode().splitlines()]
        return wall, max(self.cpu_seconds() - cpu, 1 / TICKS), rows

    def first_row_ms(self, text):
        began = time.perf_counter()
        conn, answer = self._post(text)
        assert answer.status == 200, answer.read()
        line = answer.readline()
        took = (time.perf_counter() - began) * 1000
        assert line.strip(), "no row in the last minute"
        conn.close()
        return took

    def download(self, text, fmt, path):
        conn, answer = self._post(text, fmt)
        assert answer.status == 200, answer.read()
        with open(path, "wb") as out:
            while chunk := answer.read(1 << 20):
                out.write(chunk)
        conn.close()


class QueryRefused(Exception):
    def __init__(self, status, body):
        super().__init__(f"{status}: {body[:300]!r}")
        self.status = status


def wait_indexed(sql, topic, keys):
    """Until the history indexer has caught up: a lookup of a rare key then
    fits a small scan limit."""
    began = time.monotonic()
    rare = keys[-1]
    while True:
        try:
            sql.query(f"SELECT count(*) AS n FROM \"{topic}\" WHERE key = 'id-{rare}'",
                      max_scan_bytes=64 << 20)
            break
        except QueryRefused as refused:
            if refused.status != 422 or time.monotonic() - began > 1800:
                raise
            time.sleep(1)
    print(f"history index caught up {time.monotonic() - began:.1f} s after the load", flush=True)


def wait_copied(work):
    """Until every sealed segment has its key-sorted copy (`.kcopy`) and the
    active segments' parts (`.kpart`) have caught up."""
    began = time.monotonic()
    while True:
        logs = sum(1 for _ in work.rglob("*.log"))
        copies = sum(1 for _ in work.rglob("*.kcopy"))
        # Each partition's active segment has none; other logs (group
        # offsets, say) may hold segments too, so this waits for at least
        # as many copies as the topic's sealed segments can need.
        sealed = sum(max(len(list(d.glob("*.log"))) - 1, 0)
                     for d in work.rglob("*") if d.is_dir() and d.name.startswith("events-"))
        if copies >= sealed:
            break
        if time.monotonic() - began > 1800:
            sys.exit(f"key-sorted copies not built after 30 minutes ({copies} of {sealed}; {logs} logs)")
        time.sleep(1)
    # The active segments' stretches (`.kpart`) follow the index: settled
    # once their bytes stop changing for three seconds.
    def copy_bytes():
        return sum(f.stat().st_size for pattern in ("*.kcopy", "*.kpart") for f in work.rglob(pattern))
    last, steady = copy_bytes(), 0
    while steady < 3 and time.monotonic() - began < 1800:
        time.sleep(1)
        now = copy_bytes()
        steady = steady + 1 if now == last else 0
        last = now
    parts = sum(1 for _ in work.rglob("*.kpart"))
    print(f"key-sorted copies ({copies}, and {parts} parts of active segments) settled "
          f"{time.monotonic() - began:.1f} s after the index caught up; "
          f"{last / 1e9:.2f} GB beside "
          f"{sum(f.stat().st_size for f in work.rglob('*.log')) / 1e9:.2f} GB of segments", flush=True)


def kcat_jq_rate(bootstrap, topic, jq_filter, subset):
    """Records per second of `kcat -J | jq 'select(...)'` over `subset` records."""
    per_partition = subset // PARTITIONS
    began = time.perf_counter()
    for partition in range(PARTITIONS):
        kcat = subprocess.Popen(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", str(partition),
                                 "-o", "beginning", "-c", str(per_partition), "-e", "-J", "-q"],
                                stdout=subprocess.PIPE)
        jq = subprocess.run(["jq", "-c", f"select({jq_filter}) | .offset"], stdin=kcat.stdout,
                            stdout=subprocess.DEVNULL, check=True)
        kcat.stdout.close()
        assert kcat.wait(600) == 0 and jq.returncode == 0
    return per_partition * PARTITIONS / (time.perf_counter() - began)


def consumer_rate(bootstrap, topic, predicate, subset):
    """Records per second of a confluent-kafka consumer evaluating
    `predicate` on every record (JSON value parsed), over `subset` records."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"scan-{time.monotonic_ns()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen = matched = 0
    began = time.perf_counter()
    while seen < subset:
        for msg in consumer.consume(num_messages=10_000, timeout=30):
            if msg.error():
                continue
            seen += 1
            headers = {k: v.decode() for k, v in (msg.headers() or [])}
            if predicate(msg.key().decode(), headers, json.loads(msg.value())):
                matched += 1
    took = time.perf_counter() - began
    consumer.close()
    return seen / took


def datafusion_rates(path, reps, records):
    """(wall, CPU) seconds of each SCANS predicate by DataFusion over Parquet."""
    from datafusion import SessionContext
    ctx = SessionContext()
    ctx.register_parquet("t", str(path))
    out = []
    for _, predicate, _, _ in SCANS:
        runs = []
        for _ in range(reps):
            cpu = time.process_time()
            began = time.perf_counter()
            # DataFusion's Python package has no `->>` for a JSON string:
            # its own json functions are not in it, so the value is matched
            # as text as a Parquet user would.
            text = predicate.replace("(value->>'region') = 'eu'", "value LIKE '%\"region\": \"eu\"%'")
            text = text.replace("CAST(value->>'amount' AS DOUBLE) > 250",
                                "CAST(regexp_match(value, '\"amount\": ([0-9.]+)')[1] AS DOUBLE) > 250")
            ctx.sql(f"SELECT count(*) FROM t WHERE {text}").collect()
            runs.append((time.perf_counter() - began, time.process_time() - cpu))
        out.append((statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)))
    return out


if __name__ == "__main__":
    try:
        main()
    finally:
        procs.stop_all()
