"""Start, stop and restart the real `herald` binary for one test scenario.

`HeraldBroker` runs `target/release/herald serve` on a free 127.0.0.1 port with
a data directory of its own, and can restart it on the same directory after a
clean stop (SIGTERM) or a crash (SIGKILL). Two reference modes check the tests
themselves against Apache Kafka:
- `KafkaBroker` does the same as `HeraldBroker` with a private single-node
  KRaft Kafka built from a folder of Kafka jars, translating herald's flags
  into Kafka settings, so that even the restart tests run against Kafka;
- `ExternalBroker` stands for a broker someone else runs (for example Kafka on
  127.0.0.1:19092); it cannot be restarted, so tests that need that are skipped.
"""

import base64
import contextlib
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
# Starts tried when the chosen port turns out taken, and the pause between
# tries on a restart (which must keep its port).
PORT_ATTEMPTS = 4
PORT_RETRY_PAUSE_S = 0.5


class PortTaken(RuntimeError):
    """herald could not bind its Kafka port: something else took it."""


# Ports handed out by this process, never handed out twice.
_HANDED_OUT = set()
# Listening ports are drawn from here up to the kernel's ephemeral range.
_LOWEST_PORT = 10000


def _first_ephemeral_port() -> int:
    try:
        low, _high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low)
    except (OSError, ValueError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, below the
    kernel's ephemeral range: a node stopped and started again on its port
    (a cluster's node list names it) would otherwise find it taken, now and
    then, by the local end of some outgoing connection made meanwhile."""
    import random

    top = _first_ephemeral_port()
    for _ in range(500 if top > _LOWEST_PORT else 0):
        port = random.randrange(_LOWEST_PORT, top)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def environment(**values):
    """Sets environment variables for the block (a broker started in it
    reads them), and puts back what was there before."""
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class HeraldBroker:
    """One `herald serve` process; restartable on the same data dir and port."""

    external = False
    # The port is only in the command line, so a first start may move to
    # another one.
    port_may_move = True

    def __init__(self, binary: Path, data_dir: Path, log_path: Path, extra_args=()):
        self.binary = binary
        self.data_dir = data_dir
        self.log_path = log_path
        self.extra_args = list(extra_args)
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        # The push listener (gRPC, WebSocket, SSE), on a port of its own.
        self.push_port = free_port()
        self.push_address = f"127.0.0.1:{self.push_port}"
        # The admin listener (metrics, the admin API under /v1/).
        self.admin_port = free_port()
        self.admin_address = f"127.0.0.1:{self.admin_port}"
        self.proc = None
        self.starts = 0
        self.ready_once = False

    def command(self):
        return [
            str(self.binary),
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--kafka-listen",
            self.bootstrap,
            # A free port: the default admin port may be taken.
            "--admin-listen",
            self.admin_address,
            "--push-listen",
            self.push_address,
            *self.extra_args,
        ]

    def start(self):
        """Starts the broker and waits until it accepts connections.

        `free_port` only finds a port that was free a moment ago: another
        process (a client's outgoing connection, say) may take it before
        herald binds it. Before the first successful start nobody knows the
        port yet, so another one is tried; on a restart the same port is
        tried again after a pause, since clients hold its address.
        """
        for attempt in range(PORT_ATTEMPTS):
            try:
                self._start_once()
                self.ready_once = True
                return
            except PortTaken:
                if attempt + 1 == PORT_ATTEMPTS:
                    raise
                if self.ready_once or not self.port_may_move:
                    time.sleep(PORT_RETRY_PAUSE_S)
                else:
                    self.port = free_port()
                    self.bootstrap = f"127.0.0.1:{self.port}"
                    self.push_port = free_port()
                    self.push_address = f"127.0.0.1:{self.push_port}"
                    self.admin_port = free_port()
                    self.admin_address = f"127.0.0.1:{self.admin_port}"

    def _start_once(self):
        assert self.proc is None, "broker already running"
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(f"\n=== start #{self.starts}: {' '.join(self.command())}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RUST_BACKTRACE": "1"},
        )
        log.close()
        self._wait_ready()

    def ready_ports(self):
        """The ports that accept connections once the broker is ready."""
        return [self.port, self.push_port]

    def _wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                self.proc = None
                tail = self.log_tail()
                this_start = tail.rsplit("=== start #", 1)[-1]
                taken = "Address already in use" in this_start
                error = PortTaken if taken else RuntimeError
                raise error(f"herald exited with {code} before listening:\n{tail}")
            if all(port_accepts("127.0.0.1", port) for port in self.ready_ports()):
                return
            time.sleep(0.05)
        raise RuntimeError(
            f"herald did not accept connections on {self.bootstrap} within "
            f"{READY_TIMEOUT_S:.0f}s:\n{self.log_tail()}"
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM) -> int:
        """Send `sig`, wait (bounded), SIGKILL if still alive; returns the exit code."""
        if self.proc is None:
            return 0
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)
                raise RuntimeError(
                    f"herald ignored {signal.Signals(sig).name} for {STOP_TIMEOUT_S:.0f}s; "
                    f"killed it:\n{self.log_tail()}"
                )
        return proc.returncode

    def kill(self) -> int:
        return self.stop(signal.SIGKILL)

    def restart(self, sig=signal.SIGTERM) -> int:
        code = self.stop(sig)
        self.start()
        return code

    def log_tail(self, lines=60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


class KafkaBroker(HeraldBroker):
    """A private Apache Kafka (single KRaft node) run like HeraldBroker, for
    checking the suite against the reference implementation."""

    # herald flag -> Kafka server property (value passed through unless mapped)
    FLAGS = {
        "--auto-create-topics": ("auto.create.topics.enable", None),
        "--max-frame-bytes": ("socket.request.max.bytes", None),
        "--default-partitions": ("num.partitions", None),
        "--flush": ("log.flush.interval.messages", {"every-append": "1"}),
    }
    # The port is written into the server properties once.
    port_may_move = False

    def __init__(self, lib_dir: Path, data_dir: Path, log_path: Path, extra_args=()):
        super().__init__(Path("java"), data_dir, log_path, ())
        self.lib_dir = lib_dir
        self.controller_port = free_port()
        self.props_path = data_dir.parent / "kafka-server.properties"
        self.log4j_path = data_dir.parent / "kafka-log4j2.properties"
        self._write_config(list(extra_args))

    def _write_config(self, args):
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.bootstrap},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        while args:
            flag, value = args.pop(0), args.pop(0)
            if flag in self.FLAGS:
                name, mapping = self.FLAGS[flag]
                props[name] = (mapping or {}).get(value, value)
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log4j_path.write_text(
            "rootLogger.level = WARN\n"
            "rootLogger.appenderRef.out.ref = OUT\n"
            "appender.out.type = Console\n"
            "appender.out.name = OUT\n"
            "appender.out.layout.type = PatternLayout\n"
            "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
        )

    def ready_ports(self):
        # Kafka has no push listener.
        return [self.port]

    # Extra arguments of the storage format (SCRAM credentials to seed).
    format_args = ()

    def _java(self, *args):
        return [
            "java", "-Xms256m", "-Xmx1g", f"-Dlog4j2.configurationFile={self.log4j_path}",
            "-cp", f"{self.lib_dir}/*", *args,
        ]

    def command(self):
        return self._java("kafka.Kafka", str(self.props_path))

    def stop(self, sig=signal.SIGTERM) -> int:
        code = super().stop(sig)
        # A JVM that ran its shutdown hooks after SIGTERM exits with 128 + 15.
        return 0 if sig == signal.SIGTERM and code == 143 else code

    def start(self):
        if not (self.data_dir / "meta.properties").exists():
            cluster_id = "-"
            while cluster_id.startswith("-"):  # StorageTool would read it as an option
                cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            subprocess.run(
                self._java("kafka.tools.StorageTool", "format", "-t", cluster_id,
                           "-c", str(self.props_path), *self.format_args),
                check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
            )
        super().start()


class ExternalBroker:
    """A broker started outside the suite, e.g. Apache Kafka, for reference runs."""

    external = True

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.proc = None

    def alive(self) -> bool:
        host, port = self.bootstrap.rsplit(":", 1)
        return port_accepts(host, int(port))

    def _cannot(self, what):
        pytest.skip(f"cannot {what} an external broker ({self.bootstrap})")

    def start(self):
        pass

    def stop(self, sig=signal.SIGTERM):
        self._cannot("stop")

    def kill(self):
        self._cannot("kill")

    def restart(self, sig=signal.SIGTERM):
        self._cannot("restart")

    def log_tail(self, lines=60) -> str:
        return "(external broker: no log)"


def serve_for_test(server, request):
    """Runs `server` for one test (a generator for a fixture to delegate
    to): starts it, yields it, stops it; prints its log when the test
    failed and fails the test when the broker exited on its own."""
    server.start()
    crashed = None
    try:
        yield server
    finally:
        if server.proc is not None and server.proc.poll() is not None:
            crashed = server.proc.returncode
            server.proc = None
        server.stop()
        call_report = getattr(request.node, "report_call", None)
        if call_report is not None and call_report.failed:
            print(f"--- broker log ({server.log_path}) ---\n{server.log_tail(80)}")
    if crashed is not None:
        pytest.fail(f"the broker exited with {crashed} during the test:\n{server.log_tail()}")
