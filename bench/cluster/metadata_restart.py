"""A cluster node's restart after many metadata changes, with and without
images of the metadata log.

Three herald nodes; `changes` IncrementalAlterConfigs on one topic (each
one a command in the metadata log, as every leader change, in-sync change
and admin request is). Node 2 is then restarted `runs` times and each
restart is timed from the process start to its Kafka listener accepting
connections: `serve` opens it only once the node has applied its metadata
log again up to where it was committed. Two setups, in the same run:

- no image: `--metadata-image-bytes` far above what the changes write,
  so the whole log is applied again at every start (herald before
  images, and any cluster whose log is still young);
- images: `--metadata-image-bytes 65536`, so the log starts at an image
  of the state and a restart applies that and what followed.

Prints each setup's restarts and their median, and the ratio of the
medians. Timings are never asserted.

    .venv/bin/python bench/cluster/metadata_restart.py [--changes 3000] [--runs 3]
"""

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
)

import procs
from herald_nodes import HERALD, Herald

TOPIC = "configured"


def change_configs(bootstrap, changes):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3)])[TOPIC].result(30)
    for i in range(changes):
        entry = ConfigEntry("retention.ms", str(3_600_000 + i), incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource("topic", TOPIC, incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)


def restart_seconds(cluster, node_id):
    """Stops node `node_id` and starts it again; seconds from its start to
    its Kafka listener accepting."""
    index = node_id - 1
    proc = cluster.procs[node_id]
    procs.stop([proc], 20)
    log = cluster.work / f"n{node_id}.log"
    started = time.monotonic()
    cluster.procs[node_id] = procs.spawn(proc.args, log)
    procs.wait_port(cluster.kafka_ports[index], cluster.procs[node_id], log, timeout_s=300)
    return time.monotonic() - started


def measure(label, image_bytes, args):
    work = Path(tempfile.mkdtemp(prefix=f"herald-metadata-{label}-", dir=args.work))
    cluster = Herald(3, work, extra_args=["--metadata-image-bytes", str(image_bytes)])
    try:
        cluster.start()
        change_configs(cluster.bootstrap, args.changes)
        # The leader writes an image within a second of its threshold and
        # cuts the log once every node holds it.
        time.sleep(5)
        restarts = [restart_seconds(cluster, 2) for _ in range(args.runs)]
        return {"label": label, "restarts": restarts, "median": statistics.median(restarts)}
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", default=None, help="where the nodes' data goes (a temporary directory)")
    args = parser.parse_args()
    if not HERALD.exists():
        sys.exit(f"no herald binary at {HERALD}: cargo build --release first")
    procs.raise_on_sigterm()
    try:
        plain = measure("no-image", 1 << 40, args)
        imaged = measure("images", 65536, args)
    finally:
        procs.stop_all()
    print(f"{args.changes} config changes, node 2 restarted {args.runs} times per setup")
    print(f"{'setup':<10} {'median restart s':>17}  runs (s)")
    for r in (plain, imaged):
        runs = ", ".join(f"{s:.2f}" for s in r["restarts"])
        print(f"{r['label']:<10} {r['median']:>17.2f}  {runs}")
    print(f"restart with images / without: {imaged['median'] / plain['median']:.2f}")


if __name__ == "__main__":
    main()
