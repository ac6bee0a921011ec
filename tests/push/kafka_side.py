"""The Kafka side of the push tests: topics made and records published
with confluent-kafka (librdkafka), as any producer would."""

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT_S = 30.0


def create_topic(bootstrap: str, name: str, partitions: int):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futures[name].result(timeout=TIMEOUT_S)


def delete_topic(bootstrap: str, name: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([name])[name].result(timeout=TIMEOUT_S)


def produce(bootstrap: str, topic: str, records, **config):
    """Publishes (key, value) or (key, value, headers) records with
    acks=all; returns once all are acknowledged. `config` adds producer
    settings (dots spelled as underscores)."""
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "enable.idempotence": True,
        **{k.replace("_", "."): v for k, v in config.items()},
    })
    failures = []

    def report(err, _msg):
        if err is not None:
            failures.append(err)

    for record in records:
        key, value = record[0], record[1]
        # An optional third item: the record's headers, [(name, value)].
        headers = record[2] if len(record) > 2 else None
        while True:
            try:
                producer.produce(topic, key=key, value=value, headers=headers, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(TIMEOUT_S)
    assert left == 0 and not failures, f"{left} records unsent, failures: {failures[:3]}"
