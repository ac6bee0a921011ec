"""What a broker accepted into a partition over time, seen from outside:
its high watermark sampled by another client while producers run."""

import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

SAMPLE_S = 0.05


class AcceptedLog:
    """Samples the partition's high watermark from another client while a
    producer runs: what the broker accepted, whatever the producer says."""

    def __init__(self, conf, topic):
        self.consumer = Consumer({**conf, "group.id": "quota-sampler"})
        self.partition = TopicPartition(topic, 0)
        self.samples = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)
        # One last look, after the producer finished.
        _, high = self.consumer.get_watermark_offsets(self.partition, timeout=5, cached=False)
        self.samples.append((time.monotonic(), high))
        self.consumer.close()

    def _run(self):
        while not self.stop.is_set():
            try:
                _, high = self.consumer.get_watermark_offsets(
                    self.partition, timeout=5, cached=False)
            except KafkaException:
                # A slow answer is a missed sample, not a failed run.
                continue
            self.samples.append((time.monotonic(), high))
            time.sleep(SAMPLE_S)

    def at(self, when):
        """Records accepted by `when` (the last sample at or before it)."""
        before = [high for at, high in self.samples if at <= when]
        return before[-1] if before else 0

    def rates(self, window, record_bytes):
        """(accepted B/s over `window` = (from, to) seconds after the first
        record was accepted, accepted B/s of each one-second window from
        the first accepted record to the window's end)."""
        start = next(at for at, high in self.samples if high > 0) - SAMPLE_S
        total = (self.at(start + window[1]) - self.at(start + window[0])) * record_bytes
        seconds = [
            (self.at(start + s + 1) - self.at(start + s)) * record_bytes
            for s in range(window[1])
        ]
        return total / (window[1] - window[0]), seconds
