"""The cluster fault test, short: `cluster_faults.py` for 18 seconds in a
private network namespace (leaders SIGKILLed, nodes SIGSTOPped, nodes cut
off), Kafka's VerifiableProducer and VerifiableConsumer as the clients.
18 seconds leave room for two or three faults, and the nemesis draws them
of different kinds (three: one of each).

Longer: HERALD_COMPAT_LONG=1 runs each case for 25 seconds (about four
faults); `scripts/cluster-faults.sh` runs minutes per run, several runs."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXTERNAL_BOOTSTRAP, KAFKA_LIB, LONG, REPO_ROOT, herald_binary_path

KAFKA_JARS = REPO_ROOT / "bench" / "kafka" / "lib"
# The nemesis starts faults until six seconds before the end; a fault and
# the pause before it take about five seconds.
FAULT_SECONDS = 25 if LONG else 18

pytestmark = pytest.mark.skipif(
    bool(EXTERNAL_BOOTSTRAP or KAFKA_LIB), reason="starts herald nodes of its own"
)


@pytest.mark.parametrize("idempotent", [False, True], ids=["one-in-flight", "idempotent"])
def test_no_acknowledged_record_is_lost_moved_or_reordered_through_kills_pauses_and_cuts(
    tmp_path, idempotent
):
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("the fault test needs unshare and ip (util-linux, iproute2)")
    if not any(KAFKA_JARS.glob("kafka-tools-*.jar")):
        pytest.fail(f"Kafka's tools are missing from {KAFKA_JARS}: run scripts/install-test-deps.sh")
    run = subprocess.run(
        ["unshare", "-rn", sys.executable, str(Path(__file__).parent / "cluster_faults.py"),
         "--herald", str(herald_binary_path()), "--kafka-lib", str(KAFKA_JARS),
         "--work", str(tmp_path / "work"), "--seconds", str(FAULT_SECONDS),
         *(["--idempotent"] if idempotent else [])],
        capture_output=True, text=True, timeout=400,
    )
    lines = [l for l in run.stdout.splitlines() if l.startswith("{")]
    assert lines, f"no report (exit {run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    report = json.loads(lines[-1])
    print(json.dumps(report, indent=1))
    assert report["faults"], "the nemesis injected no fault"
    assert report["acknowledged"] > 1000, report
    assert report["lost"] == 0, f"acknowledged records lost: {report['lost_examples']}"
    assert report["moved"] == 0, "acknowledged records read at another offset"
    assert report["reordered"] == 0, "records out of order within a partition"
    if idempotent:
        assert report["duplicates"] == 0, "an idempotent producer's record read twice"
    assert run.returncode == 0, run.stderr[-3000:]
