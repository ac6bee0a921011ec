"""The Java client (org.apache.kafka:kafka-clients): tests/compat/java/HeraldCompat.java.

The program creates and describes a topic with Admin, produces with the
default producer config (idempotence on, acks=all) and reads everything back
with assign(); it checks every record itself and prints one summary line.
"""

import base64
import re
import subprocess

from confluent_kafka import TopicCollection

from clients import CLIENT_TIMEOUT_S, admin_client, watermarks

RECORDS = 20_000
SUMMARY = re.compile(
    r"^HERALD-COMPAT java ok topic_id=(?P<topic_id>\S+) partitions=(?P<partitions>\d+) "
    r"produced=(?P<produced>\d+) consumed=(?P<consumed>\d+)$",
    re.MULTILINE,
)


def uuid_bytes(text: str) -> bytes:
    """Topic ids are printed in base64: URL-safe by Java, standard by librdkafka."""
    return base64.b64decode(text.replace("-", "+").replace("_", "/") + "==")


def test_java_admin_idempotent_producer_and_assigned_consumer_agree(broker, unique, java_deps):
    topic = unique("java")
    classpath = f"{java_deps / 'classes'}:{java_deps / 'lib'}/*"
    run = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            classpath,
            "HeraldCompat",
            broker.bootstrap,
            topic,
            str(RECORDS),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = f"stdout:\n{run.stdout[-4000:]}\nstderr:\n{run.stderr[-4000:]}"
    assert run.returncode == 0, output
    summary = SUMMARY.search(run.stdout)
    assert summary, output
    assert int(summary["partitions"]) == 3
    assert int(summary["produced"]) == RECORDS
    assert int(summary["consumed"]) == RECORDS

    # Another client sees the same topic: same id, same number of records.
    admin = admin_client(broker.bootstrap)
    description = admin.describe_topics(TopicCollection([topic]))[topic].result(
        timeout=CLIENT_TIMEOUT_S
    )
    assert uuid_bytes(str(description.topic_id)) == uuid_bytes(summary["topic_id"])
    marks = watermarks(broker.bootstrap, topic, 3)
    assert sum(high - low for low, high in marks.values()) == RECORDS
