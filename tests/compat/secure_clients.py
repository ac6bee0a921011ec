"""Producing and consuming with confluent-kafka for the security tests:
each answers the error codes a client with given settings meets, so that
refusals (authorization, authentication) can be compared."""

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer


def produce(conf, topic, count, key=b"k"):
    """Produces `count` records; answers the delivery errors (codes)."""
    errors = []

    def report(err, _msg):
        if err is not None:
            errors.append(err.code())

    producer = Producer({**conf, "message.timeout.ms": 10000, "retries": 0})
    for i in range(count):
        producer.produce(topic, key=key, value=b"v%d" % i, on_delivery=report)
    assert producer.flush(20) == 0, "every record answered"
    return errors


def consume(conf, topic, group, count, timeout_s=20):
    """Consumes until `count` records or an error; answers (values, error code)."""
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values, error = [], None
    deadline = time.monotonic() + timeout_s
    try:
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                error = msg.error().code()
                break
            values.append(msg.value())
        if error is None and values:
            consumer.commit(asynchronous=False)
    except KafkaException as e:
        error = e.args[0].code()
    finally:
        consumer.close()
    return values, error
