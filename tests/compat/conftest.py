"""Fixtures of the compatibility suite: a fresh herald (or an external broker) per test.

By default every test gets its own `target/release/herald serve` on a free
127.0.0.1 port and a temporary data directory. Per-test server flags go in a
marker:

    @pytest.mark.herald_args("--auto-create-topics", "false")

Reference runs against Apache Kafka, to check the tests themselves:
- HERALD_COMPAT_KAFKA_LIB=/path/to/kafka/jars starts a private single-node Kafka
  per test instead of herald (herald_args are translated to Kafka settings), so
  every test runs, restarts included;
- HERALD_COMPAT_BOOTSTRAP=host:port uses a broker that is already running;
  `herald_args` are ignored then, and tests marked `restarts_broker` or
  `needs_server_flags` are skipped.
Set HERALD_BIN to use another herald binary.

HERALD_COMPAT_LONG=1 runs the long versions of the tests that have one
(test_cluster_faults.py, test_request_quotas.py): CI runs the short ones;
each test's docstring says what its long version does more.
"""

import os
import uuid
from pathlib import Path

import pytest

from broker import ExternalBroker, HeraldBroker, KafkaBroker, serve_for_test

REPO_ROOT = Path(__file__).resolve().parents[2]
EXTERNAL_BOOTSTRAP = os.environ.get("HERALD_COMPAT_BOOTSTRAP", "").strip()
KAFKA_LIB = os.environ.get("HERALD_COMPAT_KAFKA_LIB", "").strip()
LONG = os.environ.get("HERALD_COMPAT_LONG", "").strip() not in ("", "0")
# JVM flags for Kafka's command-line tools (kafka-configs, kafka-acls, ...):
# each runs for a second or so, most of it starting up, which the JIT's
# first tier alone makes a third shorter. What the tools send is the same.
KAFKA_TOOL_JVM_FLAGS = ["-XX:TieredStopAtLevel=1"]
# `herald serve` flags for the tests whose consumer groups form and re-form:
# an empty group's first rebalance waits for more members (3 s by default,
# as long again while members keep arriving), which no test checks.
# docs/configuration.md has 0 suit tests; half a second still takes the
# delayed path and merges members started together, seconds sooner.
QUICK_GROUP_START = ("--group-initial-rebalance-delay-ms", "500")
DEPS_DIR = Path(__file__).resolve().parent / ".deps"


def pytest_configure(config):
    config.addinivalue_line("markers", "herald_args(*args): extra `herald serve` flags")
    config.addinivalue_line(
        "markers", "restarts_broker: stops or kills the broker (skipped on an external broker)"
    )
    config.addinivalue_line(
        "markers",
        "needs_server_flags: depends on its herald_args taking effect (skipped on an external broker)",
    )
    if EXTERNAL_BOOTSTRAP:
        target = f"external broker at {EXTERNAL_BOOTSTRAP}"
    elif KAFKA_LIB:
        target = f"private Apache Kafka per test, jars from {KAFKA_LIB}"
    else:
        target = f"herald binary {herald_binary_path()}"
    config.stash[TARGET_KEY] = target


TARGET_KEY = pytest.StashKey[str]()


def pytest_report_header(config):
    return f"compat target: {config.stash[TARGET_KEY]}"


def herald_binary_path() -> Path:
    return Path(os.environ.get("HERALD_BIN", REPO_ROOT / "target" / "release" / "herald"))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def broker(request, tmp_path):
    """The broker under test, running; yields an object with `.bootstrap`."""
    if EXTERNAL_BOOTSTRAP:
        if request.node.get_closest_marker("restarts_broker"):
            pytest.skip("needs to stop the broker; not possible on an external broker")
        if request.node.get_closest_marker("needs_server_flags"):
            pytest.skip("needs its own server settings; an external broker has its own")
        yield ExternalBroker(EXTERNAL_BOOTSTRAP)
        return
    args = []
    for marker in request.node.iter_markers("herald_args"):
        args.extend(marker.args)
    data_dir = tmp_path / "data"
    if KAFKA_LIB:
        server = KafkaBroker(Path(KAFKA_LIB), data_dir, tmp_path / "broker.log", args)
    else:
        binary = herald_binary_path()
        if not binary.is_file():
            pytest.fail(f"{binary} is missing: run `cargo build --release -p herald` first")
        server = HeraldBroker(binary, data_dir, tmp_path / "broker.log", args)
    yield from serve_for_test(server, request)


@pytest.fixture
def unique():
    """Makes names no other test (or earlier run on an external broker) uses."""
    run = uuid.uuid4().hex[:10]

    def make(prefix: str) -> str:
        return f"{prefix}-{run}"

    return make


@pytest.fixture
def java_deps() -> Path:
    """Folder with the kafka-clients jars and the compiled test program."""
    classes = DEPS_DIR / "java" / "classes"
    if not (classes / "HeraldCompat.class").is_file():
        pytest.fail(
            f"{classes}/HeraldCompat.class is missing: run scripts/install-test-deps.sh"
        )
    return DEPS_DIR / "java"
