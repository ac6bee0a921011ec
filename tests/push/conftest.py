"""Fixtures of the push suite: the real herald binary per test, and the
Python client generated from proto/herald/v1/herald.proto with grpcio-tools
at the start of the run (the way a user of another language would make
theirs)."""

import importlib
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "compat"))

from broker import HeraldBroker, serve_for_test  # noqa: E402


def herald_binary_path() -> Path:
    return Path(os.environ.get("HERALD_BIN", REPO_ROOT / "target" / "release" / "herald"))


@pytest.fixture(scope="session")
def proto(tmp_path_factory):
    """The generated modules: `proto.pb` (messages) and `proto.rpc` (stub)."""
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("generated")
    include = REPO_ROOT / "proto"
    grpc_include = Path(protoc.__file__).parent / "_proto"
    code = protoc.main([
        "grpc_tools.protoc",
        f"-I{include}",
        f"-I{grpc_include}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        str(include / "herald" / "v1" / "herald.proto"),
    ])
    assert code == 0, "grpc_tools.protoc failed on proto/herald/v1/herald.proto"
    sys.path.insert(0, str(out))
    pb = importlib.import_module("herald.v1.herald_pb2")
    rpc = importlib.import_module("herald.v1.herald_pb2_grpc")
    return SimpleNamespace(pb=pb, rpc=rpc)


@pytest.fixture
def herald(request, tmp_path):
    """A running herald; `.bootstrap` is its Kafka address, `.push_address`
    its push listener. Restartable on the same ports and data."""
    args = []
    for marker in request.node.iter_markers("herald_args"):
        args.extend(marker.args)
    binary = herald_binary_path()
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: run `cargo build --release -p herald` first")
    server = HeraldBroker(binary, tmp_path / "data", tmp_path / "broker.log", args)
    yield from serve_for_test(server, request)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report
