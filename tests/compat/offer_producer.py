"""A confluent-kafka producer offering a byte rate for a while, run as its
own process (so several can compete for the broker without sharing one
interpreter):

    python offer_producer.py CONF_JSON TOPIC BYTES_PER_SEC SECONDS RECORD_BYTES

CONF_JSON is the client's configuration as JSON (0 for the rate: as fast
as it can). Prints one JSON line: records sent and delivered, delivery
errors by name with the first message, throttle callbacks."""

import collections
import json
import sys
import time

from confluent_kafka import Producer


def main():
    conf, topic = json.loads(sys.argv[1]), sys.argv[2]
    rate, seconds, record_bytes = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    errors, messages, throttles, delivered = collections.Counter(), {}, [0], [0]

    def on_delivery(err, _msg):
        if err is None:
            delivered[0] += 1
        else:
            errors[err.name()] += 1
            messages.setdefault(err.name(), err.str())

    producer = Producer({
        "linger.ms": 5,
        "batch.size": 16384,
        "queue.buffering.max.messages": 2000,
        **conf,
        "throttle_cb": lambda _event: throttles.__setitem__(0, throttles[0] + 1),
    })
    value = b"x" * record_bytes
    started, sent = time.monotonic(), 0
    while (now := time.monotonic()) - started < seconds:
        due = int((now - started) * rate / record_bytes) if rate else sent + 1000
        while sent < due and time.monotonic() - started < seconds:
            try:
                producer.produce(topic, value, on_delivery=on_delivery)
                sent += 1
            except BufferError:
                producer.poll(0.005)
        producer.poll(0)
        if rate:
            time.sleep(0.002)
    left = producer.flush(60)
    print(json.dumps({
        "sent": sent, "delivered": delivered[0], "undelivered": left,
        "errors": dict(errors), "messages": messages, "throttle_callbacks": throttles[0],
    }), flush=True)


if __name__ == "__main__":
    main()
