"""A small client of herald's push protocol over gRPC, written against the
stubs generated from proto/herald/v1/herald.proto: one session stream, a
thread reading what the broker sends into a queue."""

import importlib
import queue
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import grpc

WAIT_S = 30.0


PROTO_DIR = Path(__file__).resolve().parents[2] / "proto"


def generate_stubs(out):
    """Generates the Python modules for proto/herald/v1/herald.proto into
    the directory `out` with grpcio-tools (as a user of another language
    would make theirs) and imports them: `.pb` (messages), `.rpc` (stub)."""
    from grpc_tools import protoc

    grpc_include = Path(protoc.__file__).parent / "_proto"
    code = protoc.main([
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{grpc_include}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        str(PROTO_DIR / "herald" / "v1" / "herald.proto"),
    ])
    assert code == 0, "grpc_tools.protoc failed on proto/herald/v1/herald.proto"
    sys.path.insert(0, str(out))
    pb = importlib.import_module("herald.v1.herald_pb2")
    rpc = importlib.import_module("herald.v1.herald_pb2_grpc")
    return SimpleNamespace(pb=pb, rpc=rpc)


class Closed(Exception):
    """The session's stream ended."""


def channel(address: str, options=(), credentials=None) -> grpc.Channel:
    # A connection of its own, not shared with other channels to the
    # same address.
    options = [("grpc.use_local_subchannel_pool", 1), *options]
    if credentials is not None:
        return grpc.secure_channel(address, credentials, options=options)
    return grpc.insecure_channel(address, options=options)


class Session:
    """One session. `gate`, when given, is a threading.Event the reader
    waits on before taking each message: clear it to stop reading."""

    def __init__(self, proto, address, hello=None, gate=None, options=(), credentials=None,
                 metadata=None):
        self.pb = proto.pb
        self.channel = channel(address, options, credentials)
        self.stub = proto.rpc.HeraldStub(self.channel)
        self.requests = queue.Queue()
        self.messages = queue.Queue()
        self.gate = gate
        if hello is not None:
            self.requests.put(self.pb.ClientMessage(hello=hello))
        self.call = self.stub.Session(self._requests(), metadata=metadata)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.deliveries = []  # (subscription, partition, offset, key, value)
        self.checkpoints = {}  # subscription -> latest token
        self.others = []

    def _requests(self):
        while True:
            message = self.requests.get()
            if message is None:
                return
            yield message

    def _read(self):
        try:
            for message in self.call:
                if self.gate is not None:
                    self.gate.wait()
                self.messages.put(message)
        except grpc.RpcError as e:
            self.messages.put(e)
        finally:
            self.messages.put(None)

    def send(self, **kind):
        self.requests.put(self.pb.ClientMessage(**kind))

    def subscribe(self, sid, topic, *, subject=None, pattern=None, start=None,
                  cumulative=False, max_lag=0, filter="", attributes=(), name=""):
        pb = self.pb
        fields = dict(subscription_id=sid, topic=topic, max_lag=max_lag,
                      ack_mode=pb.ACK_MODE_CUMULATIVE if cumulative else pb.ACK_MODE_NONE,
                      filter=filter, attributes=list(attributes), name=name)
        if subject is not None:
            fields["subject"] = subject
        if pattern is not None:
            fields["pattern"] = pattern
        if start == "earliest":
            fields["start"] = pb.StartAt(earliest=pb.Empty())
        elif isinstance(start, bytes):
            fields["start"] = pb.StartAt(resume_token=start)
        self.send(subscribe=pb.Subscribe(**fields))

    def ack(self, sid, partition, offset):
        self.send(ack=self.pb.Ack(subscription_id=sid, partition=partition, offset=offset))

    def next(self, timeout=WAIT_S):
        """The next message, sorted into deliveries/checkpoints/others."""
        message = self.messages.get(timeout=timeout)
        if message is None:
            raise Closed("the session ended")
        if isinstance(message, grpc.RpcError):
            raise Closed(f"the session failed: {message}")
        kind = message.WhichOneof("kind")
        if kind == "deliveries":
            for d in message.deliveries.deliveries:
                key = d.key if d.HasField("key") else None
                self.deliveries.append((d.subscription_id, d.partition, d.offset, key, d.value))
        elif kind == "checkpoint":
            self.checkpoints[message.checkpoint.subscription_id] = message.checkpoint.resume_token
        else:
            self.others.append(message)
        return message

    def wait_for(self, done, timeout=WAIT_S, what="the expected messages"):
        """Reads until `done(self)` holds."""
        deadline = time.monotonic() + timeout
        while not done(self):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"timed out waiting for {what}: {len(self.deliveries)} deliveries, "
                    f"others {[m.WhichOneof('kind') for m in self.others][-10:]}")
            try:
                self.next(timeout=left)
            except queue.Empty:
                continue

    def drain_quiet(self, quiet_s=1.0):
        """Reads until nothing arrives for `quiet_s`."""
        while True:
            try:
                self.next(timeout=quiet_s)
            except queue.Empty:
                return

    def of_kind(self, kind):
        return [getattr(m, kind) for m in self.others if m.WhichOneof("kind") == kind]

    def close(self):
        self.requests.put(None)
        self.call.cancel()
        self.channel.close()
