"""Helpers shared by the consumer-group scenarios (confluent-kafka, Java,
kcat): a producer writing continuously while members come and go."""

import threading
import time


class ContinuousProducer:
    """Produces message i (key and value `i`) at `rate_per_s` until stopped or
    `count_max` messages; keeps every acknowledged (partition, offset) -> i."""

    def __init__(self, bootstrap: str, topic: str, rate_per_s: int, count_max: int,
                 timeout_s: float):
        # Imported here: the member processes of test_consumer_groups.py load
        # this module without needing a producer.
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                  "message.timeout.ms": 120_000})
        self.topic = topic
        self.rate_per_s = rate_per_s
        self.count_max = count_max
        self.timeout_s = timeout_s
        self.acked = {}
        self.errors = []
        self.sent = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _report(self, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked[(msg.partition(), msg.offset())] = int(msg.value())

    def _run(self):
        start = time.monotonic()
        while not self.stopping.is_set() and self.sent < self.count_max:
            due = int((time.monotonic() - start) * self.rate_per_s)
            while self.sent < due:
                try:
                    self.producer.produce(self.topic, value=str(self.sent).encode(),
                                          key=str(self.sent).encode(), on_delivery=self._report)
                    self.sent += 1
                except BufferError:
                    break
            self.producer.poll(0.01)

    def stop(self):
        """Stops producing and checks every message sent was acknowledged."""
        self.stopping.set()
        self.thread.join(timeout=self.timeout_s)
        remaining = self.producer.flush(self.timeout_s * 2)
        assert remaining == 0, f"{remaining} messages unacknowledged after flush"
        assert not self.errors, f"delivery errors: {self.errors[:5]}"
        assert len(self.acked) == self.sent, f"{len(self.acked)} acked of {self.sent}"
