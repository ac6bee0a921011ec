#!/usr/bin/env python3
"""Seed 003's experiment on herald: one node, a relay tree and a Raft cluster.

Seed 003 (../shared/seeds/003_*.txt) loads its pub/sub service with clients
growing from 2,000 upward; each client receives about 20 messages a round
and should have them all within 1 second. It reports the average round
latency and the time-out rate for a single machine, a 4-node master-slave
tree (figure 4) and a 4-node Raft cluster (figure 7). This driver does the
same with herald's release binary:

- `single`: one `herald serve`;
- `tree`:   figure 4: a root M (a herald node holding the topic); relays
            R1 and R2 of M (`--relay-upstream M --relay-topics seed003`);
            R3 of R1, knowing M too (`--relay-upstream R1,M`). Relays
            mirror the topic by fetching and serve their push subscribers
            from their copy; the publisher publishes on M;
- `raft`:   four nodes forming a cluster (`--node-id`, `--cluster-listen`,
            `--cluster-nodes`), the topic with replication factor 4 (every
            node a voter of the partition's Raft group, as every seed 003
            node is a peer); the publisher publishes on the partition's
            leader, followers serve their subscribers from their committed
            log.

A run is `herald-loadgen push fanout --scenario s2` (seed 003's rounds): N
WebSocket clients of one subject spread evenly over the topology's push
listeners (client n on node n mod 4), a burst of 20 messages a second for
--rounds seconds; per client and round, the time from the round's tick
until it has all 20 (round latency), and a time-out when that is past 1 s
or never. Topologies take turns within each client count and repeat; the
summary gives medians over repeats.

Every broker is started and stopped here, by its PID (also on an error or
Ctrl-C; a child dies with the driver through PR_SET_PDEATHSIG), fresh for
every run, with its data in a directory under /dev/shm removed at the end.
Every run is bounded in time. A topology stops growing once the median
time-out share of a client count passes --stop-share, a run fails, or the
next count is past what the open-file limit lets its nodes hold.

    scripts/bench-seed003.sh            # the full run (about 30 minutes)
    scripts/bench-seed003.sh --quick    # a smoke run (< 5 minutes)
"""

import argparse
import ctypes
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERALD = Path(os.environ.get("HERALD_BIN", ROOT / "target" / "release" / "herald"))
LOADGEN = Path(os.environ.get("LOADGEN_BIN", ROOT / "target" / "release" / "herald-loadgen"))
TOPIC = "seed003"
TOPOLOGIES = ("single", "tree", "raft")
DISK_FREE_GB_MIN = 20
# File descriptors a node keeps for itself (logs, segments, listeners,
# Kafka and Raft connections) besides one per push session.
NODE_FDS_RESERVED = 2000
# Memory a client costs the machine, at most, for the precheck: its
# generator's share, the broker's session and both sockets' buffers.
CLIENT_BYTES_BUDGET = 150 * 1024

PR_SET_PDEATHSIG = 1
_started = []


class OutOfTime(Exception):
    """The time budget ran out: no further run starts."""


def log(msg):
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def _die_with_parent():
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(args, log_path):
    """Starts `args` in a session of its own (its PID is its process
    group's id), output to `log_path`, and records it for `stop_all`."""
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_die_with_parent)
    _started.append(proc)
    return proc


def stop(proc, grace_s=10):
    """SIGTERM to `proc`'s process group (by its PID), SIGKILL after
    `grace_s`."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
    if proc in _started:
        _started.remove(proc)


def stop_all():
    for proc in list(_started):
        stop(proc, 5)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def cpu_ticks(pid):
    """User + system clock ticks of `pid` (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def load_average():
    """The machine's 1-minute load average: how much else wanted the CPUs."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def herald_cli(*args, timeout_s=30):
    done = subprocess.run([str(HERALD), *args], capture_output=True, text=True, timeout=timeout_s)
    return done.returncode, done.stdout + done.stderr


class Node:
    """One `herald serve` process with ports of its own."""

    def __init__(self, name, work):
        self.name = name
        self.kafka_port = free_port()
        self.push_port = free_port()
        self.raft_port = free_port()
        self.data_dir = work / name
        self.log_path = work / f"{name}.log"
        self.proc = None

    @property
    def kafka(self):
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def push(self):
        return f"127.0.0.1:{self.push_port}"

    def start(self, extra=()):
        args = [
            str(HERALD), "serve", "--data-dir", str(self.data_dir),
            "--kafka-listen", self.kafka, "--push-listen", self.push,
            "--admin-listen", "127.0.0.1:0", "--log-level", "warn",
            # Few Kafka connections are needed (relays, the CLI); the rest
            # of the open-file limit goes to push sessions.
            "--max-connections", "64", "--auto-create-topics", "false", *extra,
        ]
        self.proc = spawn(args, self.log_path)

    def wait_ready(self, timeout_s=60):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log_tail()}")
            if accepts(self.kafka_port) and accepts(self.push_port):
                return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not listening after {timeout_s}s:\n{self.log_tail()}")

    def log_tail(self, lines=20):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def retry(what, action, timeout_s=60, pause_s=0.3):
    """Calls `action` until it returns something true, for `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        ok, last = action()
        if ok:
            return last
        time.sleep(pause_s)
    raise RuntimeError(f"{what} after {timeout_s}s: {last}")


def create_topic(node):
    def attempt():
        code, out = herald_cli("topic", "create", TOPIC, "--partitions", "1", "--bootstrap", node.kafka)
        return code == 0 or "already exists" in out, out
    retry(f"creating {TOPIC} on {node.name}", attempt)


def describe(node):
    """The topic's partition 0 leader as `node` names it, or None."""
    code, out = herald_cli("topic", "describe", TOPIC, "--bootstrap", node.kafka)
    if code != 0:
        return None
    lines = out.splitlines()
    try:
        at = lines.index("PARTITION\tLEADER\tSTART\tEND")
        return int(lines[at + 1].split("\t")[1])
    except (ValueError, IndexError):
        return None


def wait_listed(node, leader_needed=False):
    """Until `node`'s Metadata lists the topic (with a leader)."""
    def attempt():
        leader = describe(node)
        return leader is not None and (not leader_needed or leader >= 0), leader
    return retry(f"{node.name} listing {TOPIC}", attempt)


class Topology:
    """A topology's nodes, the node the publisher uses, and its start."""

    def __init__(self, name, work):
        self.name = name
        self.work = work / name
        self.work.mkdir(parents=True)
        self.nodes = []
        self.publisher = None
        self.note = ""

    def start(self):
        getattr(self, f"_start_{self.name}")()

    def _start_single(self):
        node = Node("single", self.work)
        self.nodes = [node]
        node.start()
        node.wait_ready()
        create_topic(node)
        wait_listed(node)
        self.publisher = node

    def _start_tree(self):
        # Figure 4: M; R1 and R2 under M; R3 under R1 (knowing M as well).
        m, r1, r2, r3 = (Node(n, self.work) for n in ("m", "r1", "r2", "r3"))
        self.nodes = [m, r1, r2, r3]
        m.start()
        m.wait_ready()
        create_topic(m)
        wait_listed(m)
        relay = ("--relay-topics", TOPIC)
        r1.start(("--relay-upstream", m.kafka, *relay))
        r2.start(("--relay-upstream", m.kafka, *relay))
        r3.start(("--relay-upstream", f"{r1.kafka},{m.kafka}", *relay))
        for node in (r1, r2, r3):
            node.wait_ready()
            wait_listed(node)
        self.publisher = m

    def _start_raft(self):
        names = [f"n{i}" for i in range(1, 5)]
        self.nodes = [Node(n, self.work) for n in names]
        members = ",".join(f"{i + 1}=127.0.0.1:{n.raft_port}=127.0.0.1:{n.kafka_port}"
                           for i, n in enumerate(self.nodes))
        for i, node in enumerate(self.nodes):
            node.start(("--node-id", str(i + 1), "--cluster-listen", f"127.0.0.1:{node.raft_port}",
                        "--cluster-nodes", members, "--default-replication-factor", "4"))
        for node in self.nodes:
            node.wait_ready()
        # CreateTopics needs the metadata group's leader: retried until
        # one is elected.
        create_topic(self.nodes[0])
        leaders = [wait_listed(node, leader_needed=True) for node in self.nodes]
        leader = leaders[0]
        self.publisher = self.nodes[leader - 1]
        self.note = f"leader n{leader}"

    def leader_now(self):
        if self.name != "raft":
            return None
        return describe(self.nodes[0])

    def pids(self):
        return [n.proc.pid for n in self.nodes if n.proc is not None]

    def logs_with_errors(self):
        """Lines at WARN or ERROR in the nodes' logs, by node."""
        found = {}
        for node in self.nodes:
            try:
                lines = node.log_path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            bad = [line for line in lines if " WARN " in line or " ERROR " in line]
            if bad:
                found[node.name] = bad
        return found

    def stop(self):
        """Stops every node by its PID and removes their data and logs."""
        for node in reversed(self.nodes):
            if node.proc is not None:
                stop(node.proc)
        shutil.rmtree(self.work, ignore_errors=True)


# Starts of a topology tried when a port picked as free was taken before
# a node bound it (another process's connection may take it meanwhile).
START_ATTEMPTS = 3


def start_topology(name, work):
    """A started topology, on fresh ports for each attempt."""
    for attempt in range(START_ATTEMPTS):
        topo = Topology(name, work / f"attempt-{attempt}")
        try:
            topo.start()
            return topo
        except RuntimeError as e:
            topo.stop()
            if "Address already in use" not in str(e) or attempt + 1 == START_ATTEMPTS:
                raise
            log(f"   a port was taken before {name} bound it; starting again on others")
    raise AssertionError("unreachable")


def run_once(args, work, topology_name, clients, repeat):
    """Starts the topology, runs the rounds, stops it; returns the row."""
    started = time.monotonic()
    topo = start_topology(topology_name, work / f"{topology_name}-{clients}-{repeat}")
    try:
        setup_s = time.monotonic() - started
        pushes = ",".join(n.push for n in topo.nodes)
        cmd = [
            str(LOADGEN), "push", "fanout", "--system", "herald", "--scenario", "seed003",
            "--subscribers", str(clients), "--rate", "1", "--burst", "20",
            "--secs", str(args.rounds), "--round-deadline-ms", "1000",
            "--push", topo.publisher.push, "--bootstrap", topo.publisher.kafka,
            "--subscriber-push", pushes, "--topic", TOPIC, "--transport", args.transport,
            "--per-generator", str(args.per_generator),
        ]
        if len(topo.nodes) == 1:
            cmd += ["--broker-pid", str(topo.nodes[0].proc.pid)]
        leader_before = topo.leader_now()
        ticks_before = {pid: cpu_ticks(pid) for pid in topo.pids()}
        # The load generator and its generator processes (which it waits
        # for) count as this driver's children once it is waited for.
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_before = load_average()
        run_started = time.monotonic()
        # Opening the connections, the rounds, and the loadgen's own 10 s
        # grace for late deliveries, with room to spare.
        timeout_s = 120 + clients / 50 + args.rounds * 3
        out_path = work / "loadgen.out"
        err_path = args.out / "loadgen.err"
        with open(out_path, "wb") as out, open(err_path, "ab") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True,
                                    preexec_fn=_die_with_parent)
            _started.append(proc)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                stop(proc, 5)
                raise RuntimeError(f"the load generator took over {timeout_s:.0f}s")
            finally:
                stop(proc, 5)
        wall_s = time.monotonic() - run_started
        ticks_after = {pid: cpu_ticks(pid) for pid in topo.pids()}
        children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        loadgen_cpu_s = (children_after.ru_utime + children_after.ru_stime
                         - children_before.ru_utime - children_before.ru_stime)
        if proc.returncode != 0:
            raise RuntimeError(f"the load generator failed ({proc.returncode}); see {err_path}")
        row = json.loads(out_path.read_text().strip().splitlines()[-1])
        hz = os.sysconf("SC_CLK_TCK")
        row.update({
            "topology": topology_name,
            "repeat": repeat,
            "setup_s": round(setup_s, 1),
            "run_wall_s": round(wall_s, 1),
            # Over the whole run: opening connections, rounds, the wait
            # for late deliveries.
            "broker_cpu_s": {n.name: round((ticks_after[n.proc.pid] - ticks_before[n.proc.pid]) / hz, 2)
                             for n in topo.nodes},
            "loadgen_cpu_s": round(loadgen_cpu_s, 2),
            "load_average": [load_before, load_average()],
            "publisher_node": topo.publisher.name,
            "leader_before": leader_before,
            "leader_after": topo.leader_now(),
            "node_warnings": {k: len(v) for k, v in topo.logs_with_errors().items()},
        })
        return row
    except Exception:
        # Keep the nodes' logs of a failed run.
        for node in topo.nodes:
            if node.log_path.exists():
                shutil.copy(node.log_path, args.out / f"failed-{topology_name}-{clients}-{repeat}-{node.name}.log")
        raise
    finally:
        # Keep the logs of nodes that warned, for the report.
        warned = topo.logs_with_errors()
        for node in topo.nodes:
            if node.name in warned:
                shutil.copy(node.log_path, args.out / f"{topology_name}-{clients}-{repeat}-{node.name}.log")
        topo.stop()


def node_capacity():
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft - NODE_FDS_RESERVED


def mem_available_bytes():
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def summarize(rows):
    """Medians over repeats, by topology and client count."""
    groups = {}
    for row in rows:
        groups.setdefault((row["topology"], row["subscribers"]), []).append(row)
    summary = []
    for (topology, clients), group in sorted(groups.items(), key=lambda kv: (TOPOLOGIES.index(kv[0][0]), kv[0][1])):
        ok = [r for r in group if r.get("rounds")]
        if not ok:
            continue
        med = lambda key: statistics.median(r["rounds"][key] for r in ok)
        by_node = {}
        for r in ok:
            for i, node in enumerate(r.get("rounds_by_node") or []):
                by_node.setdefault(i, []).append(node)
        summary.append({
            "topology": topology,
            "clients": clients,
            "runs": len(ok),
            "mean_ms": med("mean_ms"),
            "p50_ms": med("p50_ms"),
            "p99_ms": med("p99_ms"),
            "timed_out_share": med("timed_out_share"),
            "timed_out_share_range": [min(r["rounds"]["timed_out_share"] for r in ok),
                                      max(r["rounds"]["timed_out_share"] for r in ok)],
            "mean_ms_range": [min(r["rounds"]["mean_ms"] for r in ok), max(r["rounds"]["mean_ms"] for r in ok)],
            "lost": sum(r["lost"] for r in ok),
            "dropped": sum(r["dropped_subscribers"] for r in ok),
            "broker_cpu_s": statistics.median(sum(r["broker_cpu_s"].values()) for r in ok),
            # Cores kept busy over the run (opening, rounds, the wait for
            # late deliveries): every broker, and the load generator.
            "broker_cores": statistics.median(sum(r["broker_cpu_s"].values()) / r["run_wall_s"] for r in ok),
            "loadgen_cores": statistics.median(r.get("loadgen_cpu_s", float("nan")) / r["run_wall_s"] for r in ok),
            "load_average_max": max(max(r.get("load_average", [float("nan")])) for r in ok),
            "run_wall_s": statistics.median(r["run_wall_s"] for r in ok),
            "node_mean_ms": [statistics.median(n["mean_ms"] for n in nodes) for _, nodes in sorted(by_node.items())],
            "node_timed_out_share": [statistics.median(n["timed_out_share"] for n in nodes)
                                     for _, nodes in sorted(by_node.items())],
        })
    return summary


def markdown(summary):
    out = ["| topology | clients | runs | round latency mean | p50 | p99 | time-outs (median, range) | "
           "mean by node, ms | broker cores | load generator cores | load average, highest |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in summary:
        lo, hi = s["timed_out_share_range"]
        nodes = " / ".join(f"{m:.0f}" for m in s["node_mean_ms"]) or "-"
        out.append(
            f"| {s['topology']} | {s['clients']:,} | {s['runs']} | {s['mean_ms']:.1f} ms | {s['p50_ms']:.1f} ms | "
            f"{s['p99_ms']:.1f} ms | {100 * s['timed_out_share']:.2f}% ({100 * lo:.2f}-{100 * hi:.2f}%) | "
            f"{nodes} | {s['broker_cores']:.2f} | {s['loadgen_cores']:.2f} | {s['load_average_max']:.1f} |")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 clients, 5 rounds, one repeat")
    parser.add_argument("--clients", default="2000,3000,4000,6000,8000,12000,16000,18000,24000,32000,48000,64000",
                        help="client counts, ascending")
    parser.add_argument("--topologies", default=",".join(TOPOLOGIES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=20, help="rounds (seconds of publishing) per run")
    parser.add_argument("--transport", default="websocket", choices=("websocket", "grpc"))
    parser.add_argument("--per-generator", type=int, default=9000,
                        help="clients per load-generator process (each under the open-file limit)")
    parser.add_argument("--stop-share", type=float, default=0.5,
                        help="stop growing a topology past this median time-out share")
    parser.add_argument("--max-minutes", type=float, default=150, help="start no run after this long")
    parser.add_argument("--out", type=Path, default=Path("/tmp/herald-bench-seed003"))
    args = parser.parse_args()
    if args.quick:
        args.clients, args.rounds, args.repeats = "2000", 5, 1
    counts = [int(c) for c in args.clients.split(",")]
    topologies = [t for t in args.topologies.split(",") if t]
    assert all(t in TOPOLOGIES for t in topologies), topologies
    args.out.mkdir(parents=True, exist_ok=True)
    rows_path = args.out / "seed003.jsonl"
    rows_path.unlink(missing_ok=True)

    def on_sigterm(_sig, _frame):
        raise KeyboardInterrupt("SIGTERM")
    signal.signal(signal.SIGTERM, on_sigterm)

    capacity = node_capacity()
    log(f"open-file limit {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}: "
        f"up to {capacity:,} push sessions per node")
    work = Path(tempfile.mkdtemp(prefix="herald-seed003-", dir="/dev/shm"))
    started = time.monotonic()
    rows = []
    growing = {t: True for t in topologies}
    why_stopped = {}
    try:
        for clients in counts:
            for t in topologies:
                nodes = 1 if t == "single" else 4
                if growing[t] and clients > nodes * capacity:
                    growing[t] = False
                    why_stopped[t] = f"{clients:,} clients are past {nodes} node(s) x {capacity:,} sessions"
            if mem_available_bytes() < clients * CLIENT_BYTES_BUDGET:
                why_stopped["all"] = f"{clients:,} clients would need more memory than is available"
                break
            shares = {t: [] for t in topologies}
            for repeat in range(args.repeats):
                order = topologies[repeat % len(topologies):] + topologies[:repeat % len(topologies)]
                for t in order:
                    if not growing[t]:
                        continue
                    if (time.monotonic() - started) / 60 > args.max_minutes:
                        why_stopped["all"] = f"the time budget of {args.max_minutes} minutes ran out"
                        raise OutOfTime
                    free_gb = shutil.disk_usage("/").free / 1e9
                    if free_gb < DISK_FREE_GB_MIN:
                        raise RuntimeError(f"only {free_gb:.0f} GB free on /")
                    log(f"{t}: {clients:,} clients, repeat {repeat + 1}")
                    try:
                        row = run_once(args, work, t, clients, repeat)
                    except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as e:
                        log(f"   FAILED: {e}")
                        growing[t] = False
                        why_stopped[t] = f"a run at {clients:,} clients failed: {str(e)[:300]}"
                        continue
                    rows.append(row)
                    with open(rows_path, "a") as f:
                        f.write(json.dumps(row) + "\n")
                    r = row["rounds"]
                    shares[t].append(r["timed_out_share"])
                    log(f"   mean {r['mean_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
                        f"time-outs {100 * r['timed_out_share']:.2f}%, lost {row['lost']}, "
                        f"dropped {row['dropped_subscribers']}, {row['run_wall_s']}s")
            for t in topologies:
                if growing[t] and shares[t] and statistics.median(shares[t]) > args.stop_share:
                    growing[t] = False
                    why_stopped[t] = (f"median time-out share {100 * statistics.median(shares[t]):.0f}% "
                                      f"at {clients:,} clients")
            if not any(growing.values()):
                break
    except OutOfTime:
        pass
    finally:
        stop_all()
        shutil.rmtree(work, ignore_errors=True)
    summary = summarize(rows)
    table = markdown(summary)
    (args.out / "seed003-summary.json").write_text(json.dumps(
        {"summary": summary, "stopped": why_stopped, "args": vars(args) | {"out": str(args.out)}}, indent=1))
    (args.out / "seed003.md").write_text(table + "\n")
    print(table)
    for t, why in why_stopped.items():
        print(f"{t}: stopped growing: {why}")
    print(f"rows: {rows_path}")


if __name__ == "__main__":
    main()
