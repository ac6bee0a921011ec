"""Offering a byte rate for a while. Run as a script, a confluent-kafka
producer in its own process (so several can compete for the broker without
sharing one interpreter):

    python offer_producer.py CONF_JSON TOPIC BYTES_PER_SEC SECONDS RECORD_BYTES

CONF_JSON is the client's configuration as JSON (0 for the rate: as fast
as it can). Prints one JSON line: records sent and delivered, delivery
errors by name with the first message, throttle callbacks.

Imported, `offer_with_kcat` does the same through kcat."""

import collections
import json
import subprocess
import sys
import threading
import time

from confluent_kafka import Producer


def offer_with_kcat(kcat_args, rate, seconds, record_bytes, log):
    """Runs `kcat -P` with `kcat_args`, feeding it records of `record_bytes`
    at `rate` bytes per second for `seconds` while `log` (an AcceptedLog,
    not yet entered) samples what the broker accepts; answers (records
    sent, kcat's exit code, its stderr)."""
    kcat = subprocess.Popen(["kcat", "-P", *kcat_args], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    line = b"x" * (record_bytes - 1) + b"\n"
    stderr, sent = [], 0
    # Read as it comes: kcat blocks once a pipe of its messages fills up.
    reader = threading.Thread(target=lambda: stderr.append(kcat.stderr.read()), daemon=True)
    reader.start()
    try:
        with log:
            started = time.monotonic()
            while (now := time.monotonic()) - started < seconds:
                due = int((now - started) * rate / record_bytes)
                # A write blocks while kcat is held back by the broker: the
                # offer stops at `seconds`, not only once caught up to `due`
                # (which, above the quota, takes longer than falling behind).
                while sent < due and time.monotonic() - started < seconds:
                    kcat.stdin.write(line)
                    sent += 1
                kcat.stdin.flush()
                time.sleep(0.002)
            kcat.stdin.close()
            code = kcat.wait(60)
    finally:
        if kcat.poll() is None:
            kcat.kill()
            kcat.wait()
    reader.join(10)
    return sent, code, b"".join(stderr).decode(errors="replace")


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
