"""Fixtures of the push suite: the real herald binary per test, and the
Python client generated from proto/herald/v1/herald.proto with grpcio-tools
at the start of the run (the way a user of another language would make
theirs)."""

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "compat"))

from broker import HeraldBroker, serve_for_test  # noqa: E402
from push_client import generate_stubs  # noqa: E402


def herald_binary_path() -> Path:
    return Path(os.environ.get("HERALD_BIN", REPO_ROOT / "target" / "release" / "herald"))


@pytest.fixture(scope="session")
def proto(tmp_path_factory):
    """The generated modules: `proto.pb` (messages) and `proto.rpc` (stub)."""
    return generate_stubs(tmp_path_factory.mktemp("generated"))


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
