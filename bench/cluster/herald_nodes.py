"""One herald node, or three forming a cluster, on 127.0.0.1.

A cluster's nodes are started with `--node-id`, `--cluster-listen` and
`--cluster-nodes` (every node's Raft and Kafka addresses), as
tests/compat/test_cluster.py does. Settings are herald's defaults: a
single node does not fsync (`--flush never`); a replicated partition's
acks=all is answered once a majority of its replicas fsynced the batch
(Raft's log flush, a group commit); Raft heartbeats every 150 ms and a
follower stands for election after 1-2 s of silence.
"""

import os
from pathlib import Path

import procs

ROOT = Path(__file__).resolve().parents[2]
HERALD = Path(os.environ.get("HERALD_BIN", ROOT / "target" / "release" / "herald"))


class Herald:
    """`nodes` herald processes, data under `work`."""

    def __init__(self, nodes, work, extra_args=()):
        self.nodes = nodes
        self.work = Path(work)
        self.extra_args = list(extra_args)
        self.procs = {}
        self.kafka_ports = [procs.free_port() for _ in range(nodes)]

    def start(self):
        raft = [procs.free_port() for _ in range(self.nodes)]
        cluster = ",".join(
            f"{i + 1}=127.0.0.1:{raft[i]}=127.0.0.1:{self.kafka_ports[i]}" for i in range(self.nodes)
        )
        for i in range(self.nodes):
            node_id = i + 1
            args = [
                str(HERALD), "serve", "--data-dir", str(self.work / f"n{node_id}"),
                "--kafka-listen", f"127.0.0.1:{self.kafka_ports[i]}",
                "--admin-listen", "127.0.0.1:0", "--push-listen", "127.0.0.1:0",
                "--log-level", "warn", *self.extra_args,
            ]
            if self.nodes > 1:
                args += ["--node-id", str(node_id), "--cluster-listen", f"127.0.0.1:{raft[i]}",
                         "--cluster-nodes", cluster]
            log = self.work / f"n{node_id}.log"
            self.procs[node_id] = procs.spawn(args, log)
        for i, (node_id, proc) in enumerate(self.procs.items()):
            procs.wait_port(self.kafka_ports[i], proc, self.work / f"n{node_id}.log", timeout_s=30)

    @property
    def bootstrap(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.kafka_ports)

    def kill(self, node_id):
        """SIGKILL to one node (reaped by `stop`)."""
        self.procs[node_id].kill()

    def stop(self):
        procs.stop(list(self.procs.values()), 20)
        self.procs = {}


class SingleNode:
    """One herald node, data and log under `work`, on free ports: what the
    single-node benchmarks start. `start` waits for its Kafka port."""

    def __init__(self, work, extra_args=()):
        self.work = Path(work)
        self.kafka, self.admin_port, self.push = procs.free_port(), procs.free_port(), procs.free_port()
        self.bootstrap = f"127.0.0.1:{self.kafka}"
        self.log = self.work / "herald.log"
        self.extra_args = list(extra_args)
        self.proc = None

    def start(self):
        self.proc = procs.spawn([str(HERALD), "serve", "--data-dir", str(self.work / "data"),
                                 "--kafka-listen", self.bootstrap,
                                 "--admin-listen", f"127.0.0.1:{self.admin_port}",
                                 "--push-listen", f"127.0.0.1:{self.push}", "--log-level", "warn",
                                 *self.extra_args], self.log)
        procs.wait_port(self.kafka, self.proc, self.log)
        return self

    def stop(self):
        if self.proc is not None:
            procs.stop([self.proc], 20)

