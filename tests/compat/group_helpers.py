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


class MemberProcess:
    """A group member running as its own process, writing JSON lines to `out`:
    `{"t", "ev": "assign"|"revoke"|"lost"|"closed", "p": [...]}` for ownership
    and `{"t", "msgs": [[partition, offset, index], ...]}` for records
    processed. Subclasses start `self.proc` and set `self.name`."""

    out = None
    proc = None
    name = ""
    killed_at = None

    def lines(self):
        import json

        if not self.out.exists():
            return []
        parsed = []
        for line in self.out.read_text().splitlines():
            try:
                parsed.append(json.loads(line))
            except json.JSONDecodeError:
                break  # the torn last line of a killed member
        return parsed

    def owned(self) -> set:
        """The partitions the member owns now, by its own log."""
        owned = set()
        for line in self.lines():
            if line.get("ev") == "assign":
                owned |= set(line["p"])
            elif line.get("ev") in ("revoke", "lost"):
                owned -= set(line["p"])
            elif line.get("ev") == "closed":
                owned = set()
        return owned

    def processed(self):
        """(time, partition, offset, index) of every record processed."""
        for line in self.lines():
            for p, offset, index in line.get("msgs", []):
                yield line["t"], p, offset, index

    def kill(self, timeout_s: float):
        """SIGKILL, like a crashed application."""
        import signal

        self.killed_at = time.time()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=timeout_s)

    def terminate(self, timeout_s: float):
        """SIGTERM (the member leaves cleanly) and waits; a member that does
        not exit in time is killed and the test fails."""
        import signal
        import subprocess

        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout_s)
            raise AssertionError(f"{self.name} did not exit within {timeout_s}s")
