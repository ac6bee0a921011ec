"""Client quotas over Kafka's own tool: `kafka-configs.sh` (the
ConfigCommand class, from the jars the suite fetches) sets, describes and
removes producer and consumer byte rates by user, client id and both, with
defaults, and herald keeps them across a restart. The same file runs
against Apache Kafka (scripts/security-vs-kafka.sh's HERALD_COMPAT_KAFKA_LIB)
to show the tool sees the same answers."""

from pathlib import Path
import subprocess

import pytest

from conftest import KAFKA_LIB, KAFKA_TOOL_JVM_FLAGS

KAFKA_LIB_DIR = Path(__file__).resolve().parents[2] / "bench" / "kafka" / "lib"


def configs(broker, *args):
    """kafka-configs.sh against the broker; answers (exit code, output)."""
    run = subprocess.run(
        ["java", *KAFKA_TOOL_JVM_FLAGS, "-Xmx256m", "-cp", f"{KAFKA_LIB_DIR}/*",
         "kafka.admin.ConfigCommand",
         "--bootstrap-server", broker.bootstrap, *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    return run.returncode, run.stdout + run.stderr


@pytest.mark.restarts_broker
def test_kafka_configs_sets_describes_and_removes_quotas(broker, unique):
    assert (KAFKA_LIB_DIR / "kafka-tools-4.3.1.jar").is_file(), \
        "Kafka's jars are missing: run scripts/install-test-deps.sh"
    user, client = unique("alice"), unique("app")
    code, out = configs(broker, "--alter", "--entity-type", "users", "--entity-name", user,
                        "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert code == 0 and f"Completed updating config for user {user}" in out, out
    code, out = configs(broker, "--alter", "--entity-type", "clients", "--entity-name", client,
                        "--add-config", "request_percentage=50")
    assert code == 0, out
    code, out = configs(broker, "--alter", "--entity-type", "users", "--entity-default",
                        "--add-config", "producer_byte_rate=4096")
    assert code == 0, out
    code, out = configs(broker, "--alter", "--entity-type", "users", "--entity-name", user,
                        "--entity-type", "clients", "--entity-name", client,
                        "--add-config", "consumer_byte_rate=512")
    assert code == 0, out

    code, out = configs(broker, "--describe", "--entity-type", "users", "--entity-name", user)
    assert code == 0, out
    assert "producer_byte_rate=1024.0" in out and "consumer_byte_rate=2048.0" in out, out
    code, out = configs(broker, "--describe", "--entity-type", "users")
    assert code == 0 and user in out and "default" in out and "producer_byte_rate=4096.0" in out, out
    code, out = configs(broker, "--describe", "--entity-type", "clients", "--entity-name", client)
    assert code == 0 and "request_percentage=50.0" in out, out

    # A quota key the entity does not take is refused, and nothing changes.
    code, out = configs(broker, "--alter", "--entity-type", "users", "--entity-name", user,
                        "--add-config", "connection_creation_rate=5")
    assert code != 0, out
    code, out = configs(broker, "--alter", "--entity-type", "users", "--entity-name", user,
                        "--delete-config", "producer_byte_rate")
    assert code == 0, out
    code, out = configs(broker, "--describe", "--entity-type", "users", "--entity-name", user)
    assert "producer_byte_rate" not in out and "consumer_byte_rate=2048.0" in out, out

    if not KAFKA_LIB:
        broker.stop()
        broker.start()
        code, out = configs(broker, "--describe", "--entity-type", "users", "--entity-name", user,
                            "--entity-type", "clients", "--entity-name", client)
        assert code == 0 and "consumer_byte_rate=512.0" in out, out
