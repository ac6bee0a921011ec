#!/usr/bin/env python3
"""acks=all produce and failover: herald's cluster, one herald node, Kafka's three brokers.

Setups, each started here and stopped here (by PID), data under
--data-root (tmpfs by default), removed at the end:
- herald, one node (the embedded default: no fsync);
- herald, three nodes on 127.0.0.1, topic with replication factor 3
  (acks=all answered once a majority fsynced the batch), and the same with
  the topic's write.caching=true (once a majority wrote it, no fsync: the
  like-for-like point for Kafka's default);
- Apache Kafka 4.3.1, three brokers (combined broker+controller, KRaft),
  replication factor 3, min.insync.replicas=2 (kafka_cluster.py), topics
  with Kafka's defaults (no fsync) and with flush.messages=1 (an fsync per
  append, the like-for-like durability point), on the same brokers.

Throughput: a topic of one partition and confluent-kafka (librdkafka)
producing 100-byte records with acks=all:
- the most it takes (a closed loop, the producer's batching as configured,
  after a warm-up), with the cores the client and the brokers kept busy;
- delivery-report latency p50 and p99 at two offered rates, the same for
  every setup: 10,000 records/s (light: what replication itself costs) and
  half the slowest setup's maximum, measured in a calibration pass first
  (or --rate).
Each setup is measured --repeats times in rounds (the order rotating);
medians are printed with ratios against herald's single node and Kafka.

Failover (failover.py): a 10,000 records/s acks=all stream to a
one-partition topic with replication factor 3; the partition's leader
gets SIGKILL; the time to a new leader in Metadata, to the first
successful produce of a record sent after the kill, and to throughput
back at half the pre-kill rate. herald (Raft: heartbeat 150 ms, a
follower stands after openraft's 2 s leader lease plus a random 1-2 s
election timeout), Kafka with its defaults
(a dead broker fenced after broker.session.timeout.ms=9000; the leader
placed on a broker that is not the active controller), Kafka when the
leader is also the active controller, and Kafka with the session timeout
lowered to 2 s (heartbeat 0.5 s). --failover-repeats runs each, fresh
clusters every time; medians.

Consumer-group commits (commit_load.py): 1 and 8 clients, each of its own
group, committing an offset synchronously in a closed loop for --seconds:
commits/s and commit latency p50 and p99, on herald's single node (its
offsets partition fsynced per commit), herald's three nodes (the group's
offsets partition a Raft group of 3: a commit is acknowledged once a
majority fsynced it) and Kafka's three brokers (offsets topic with
replication factor 3, acknowledged by the in-sync replicas, no fsync).

Timings are never asserted: this is a benchmark, not a test. The full
run takes about 25 minutes; --quick about 3:

    .venv/bin/python bench/cluster/bench_cluster.py
    .venv/bin/python bench/cluster/bench_cluster.py --quick
    .venv/bin/python bench/cluster/bench_cluster.py --only failover --failover-repeats 3
    .venv/bin/python bench/cluster/bench_cluster.py --only commits
    .venv/bin/python bench/cluster/bench_cluster.py --only throughput --data-root /var/tmp
    .venv/bin/python bench/cluster/bench_cluster.py --only throughput --setups herald-rf3 --quick
    .venv/bin/python bench/cluster/bench_cluster.py --report /tmp/herald-bench-cluster.json

herald is target/release/herald (`chrt -i 0 cargo build --release -p herald`)
or $HERALD_BIN; Kafka's jars are fetched by bench/kafka/setup.sh if missing.
Figures and what they say: docs/benchmarks.md, "The cluster: produce and
failover against Kafka".
"""

import argparse
import json
import sys
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

import failover
import kafka_cluster
import procs
import report
from herald_nodes import HERALD
from commit_load import commit_rates
from produce_load import latency_at, max_rate
from setups import COMMITS, FAILOVER, QUICK_FAILOVER, THROUGHPUT, create, with_cluster

DISK_FREE_GB_MIN = 20
# The most one setup writes: about 2.5M records of ~110 bytes on each of
# three replicas, twice on Kafka's brokers (two topics).
DATA_FREE_GB_MIN = 4


def throughput_pass(args, label, rate, rotate, results):
    """Every throughput setup once: its maximum and, given a rate, its
    latency there. Setups on one kind of cluster share its start."""
    chosen = [s for s in THROUGHPUT if not args.setups or s[0] in args.setups]
    kinds = []
    for _, _, kind, _ in chosen:
        if kind not in kinds:
            kinds.append(kind)
    kinds = kinds[rotate % len(kinds):] + kinds[:rotate % len(kinds)]
    for kind in kinds:
        setups = [s for s in chosen if s[2] == kind]
        if rotate % 2:
            setups.reverse()

        def run(cluster):
            for name, _, _, configs in setups:
                topic = f"bench-{name}-{label}"
                create(cluster, topic, configs)
                pids = [proc.pid for proc in cluster.procs.values()]
                row = max_rate(cluster.bootstrap, topic, args.records, args.warmup_seconds, pids)
                if rate is not None:
                    # Each latency run on a topic of its own: on a disk, the
                    # first fsyncs of the closed loop's segment would wait
                    # for the write-back of all it wrote (seconds).
                    for prefix, offered in (("light_", args.light_rate), ("", rate)):
                        fresh = f"{topic}-{prefix or 'half'}{offered:.0f}"
                        create(cluster, fresh, configs)
                        p50, p99, achieved = latency_at(cluster.bootstrap, fresh, offered, args.seconds)
                        row.update({f"{prefix}rate": offered, f"{prefix}achieved": achieved,
                                    f"{prefix}p50_ms": p50, f"{prefix}p99_ms": p99})
                results.setdefault(name, []).append(row)
                print(f"{label} {name}: {json.dumps(row)}", flush=True)

        with_cluster(args, kind, run)


def throughput(args, out):
    rate = args.rate
    if rate is None:
        calibration = {}
        throughput_pass(args, "calibration", None, 0, calibration)
        out["calibration"] = calibration
        rate = round(min(rows[0]["max_rate"] for rows in calibration.values()) / 2, -3)
        print(f"offered rate for latency: {rate:.0f}/s (half the slowest maximum)", flush=True)
    results = out.setdefault("throughput", {})
    for r in range(args.repeats):
        throughput_pass(args, f"round{r + 1}", rate, r, results)
    return rate


def failover_runs(args, out):
    names = QUICK_FAILOVER if args.quick else tuple(s[0] for s in FAILOVER)
    results = out.setdefault("failover", {})
    for r in range(args.failover_repeats):
        for name, _, kind, settings, placement in FAILOVER:
            if name not in names:
                continue
            topic = f"failover-{r + 1}"

            def run(cluster):
                create(cluster, topic, {}, placement)
                if kind == "kafka":
                    controller = cluster.active_controller()
                else:
                    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
                    controller = admin.describe_cluster(request_timeout=10).result().controller.id
                row = failover.measure(cluster, topic, args.failover_rate, args.pre_seconds,
                                       args.post_seconds_max, args.warmup_seconds)
                row["controller"] = controller
                return row

            row = with_cluster(args, kind, run, settings)
            results.setdefault(name, []).append(row)
            print(f"failover {r + 1} {name}: {json.dumps(row)}", flush=True)


def commit_runs(args, out):
    """Every commit setup --repeats times, in rotating order, on a fresh
    cluster each time."""
    results = out.setdefault("commits", {})
    for r in range(args.repeats):
        order = COMMITS[r % len(COMMITS):] + COMMITS[:r % len(COMMITS)]
        for name, _, kind in order:
            topic = f"commits-{r + 1}"

            def run(cluster):
                create(cluster, topic, {})
                return [commit_rates(cluster.bootstrap, topic, clients, args.seconds)
                        for clients in (1, 8)]

            rows = with_cluster(args, kind, run)
            results.setdefault(name, []).append(rows)
            print(f"commits {r + 1} {name}: {json.dumps(rows)}", flush=True)


def print_report(out):
    if "throughput" in out:
        rate = next(iter(out["throughput"].values()))[0]["rate"]
        report.print_throughput(out, rate)
    if "failover" in out:
        report.print_failover(out)
    if "commits" in out:
        report.print_commits(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="1 round, short runs, failover of herald and Kafka's defaults once (< 5 min)")
    parser.add_argument("--only", choices=("throughput", "failover", "commits"))
    parser.add_argument("--setups", type=lambda text: text.split(","), default=None,
                        help="throughput setups to run, comma-separated (default: all): "
                        + ", ".join(s[0] for s in THROUGHPUT))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--records", type=int, default=500000)
    parser.add_argument("--seconds", type=float, default=10, help="each latency run")
    parser.add_argument("--rate", type=float, help="offered rate for latency (default: calibrated)")
    parser.add_argument("--light-rate", type=float, default=10000,
                        help="a second, light offered rate for latency")
    parser.add_argument("--failover-repeats", type=int, default=5)
    parser.add_argument("--failover-rate", type=float, default=10000)
    parser.add_argument("--warmup-seconds", type=float, default=15,
                        help="load before anything is measured (Kafka's JIT)")
    parser.add_argument("--pre-seconds", type=float, default=5, help="steady state before the kill")
    parser.add_argument("--post-seconds-max", type=float, default=40, help="most to watch after the kill")
    parser.add_argument("--data-root", default="/dev/shm", help="where the data directories go")
    parser.add_argument("--out", default="/tmp/herald-bench-cluster.json")
    parser.add_argument("--report", metavar="JSON", help="print the tables of an earlier run's --out, run nothing")
    args = parser.parse_args()
    if args.report:
        print_report(json.loads(Path(args.report).read_text()))
        return
    if args.quick:
        args.repeats, args.records, args.seconds = 1, 150000, 3
        args.failover_repeats, args.pre_seconds, args.post_seconds_max = 1, 3, 30
        args.warmup_seconds = 8
    if procs.free_disk_gb("/") < DISK_FREE_GB_MIN:
        sys.exit(f"less than {DISK_FREE_GB_MIN} GB free on /: not starting")
    if procs.free_disk_gb(args.data_root) < DATA_FREE_GB_MIN:
        sys.exit(f"less than {DATA_FREE_GB_MIN} GB free in {args.data_root}: not starting")
    if not HERALD.exists():
        sys.exit(f"{HERALD} missing: chrt -i 0 cargo build --release -p herald")
    if args.only not in ("throughput", "commits") or any(
        s[2] == "kafka" for s in THROUGHPUT if not args.setups or s[0] in args.setups
    ) or args.only == "commits":
        kafka_cluster.setup()
    procs.raise_on_sigterm()
    out = {"settings": {**vars(args), "herald": str(HERALD)}}
    started = time.monotonic()
    try:
        if args.only in (None, "throughput"):
            throughput(args, out)
        if args.only in (None, "failover"):
            failover_runs(args, out)
        if args.only in (None, "commits"):
            commit_runs(args, out)
    finally:
        procs.stop_all()
        Path(args.out).write_text(json.dumps(out, indent=1))
    print_report(out)
    print(f"\nrows: {args.out}; {time.monotonic() - started:.0f} s; the machine is shared: rerun before"
          " trusting a small difference")


if __name__ == "__main__":
    sys.exit(main())
