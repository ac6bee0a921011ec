"""Tenant SLAs (seed 004, section 2.3.6): `herald tenant sla` sets a
tenant's input rate, shared by every connection of its principals.

- Reject mode (`reject_over_rate=1`): a produce over the rate is refused
  with THROTTLING_QUOTA_EXCEEDED and a message saying which tenant, which
  rate and when to retry; what the broker accepts stays at the rate. What
  each real client does with the refusal is asserted as it is documented
  (docs/quotas.md): librdkafka and kcat fail the records (the error is
  not retriable for them), the Java producer retries them
  (ThrottlingQuotaExceededException is retriable) and delivers every one,
  backing off exponentially, so well under the rate.
- A push publish over the input rate is refused RESOURCE_EXHAUSTED with
  when to retry, on a session and on the unary call; push delivery is
  paced to the output rate in every one-second window, and nothing is
  lost.
- Throttle mode (the default), two tenants offering twice their rate
  while an unlimited producer floods the broker: each still gets at
  least 95% of its rate.

The broker is the secure one of `secure_push.py`; tenants' principals log
in with SCRAM on its SASL_PLAINTEXT Kafka listener.
"""

import base64
import json
import queue
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
from confluent_kafka import Producer

from accepted_log import AcceptedLog
from offer_producer import offer_with_kcat
from secure_push import (  # noqa: F401 (secure is a fixture)
    ADMIN_PASSWORD,
    create_topic,
    new_user,
    scram_session,
    secure,
    tls_credentials,
)
from test_tenants import herald_tenant, kafka

COMPAT = Path(__file__).resolve().parents[1] / "compat"
RECORD_BYTES = 1000


def offer(conf, topic, rate, seconds):
    """Runs compat/offer_producer.py; answers its summary."""
    run = subprocess.run(
        [sys.executable, str(COMPAT / "offer_producer.py"), json.dumps(conf), topic,
         str(rate), str(seconds), str(RECORD_BYTES)],
        capture_output=True, text=True, timeout=seconds + 120)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def tenant_with_sla(secure, *sla):
    """A new tenant with one SCRAM user and a namespace, and its SLA set;
    answers (user's Kafka config, namespace prefix)."""
    run = uuid.uuid4().hex[:6]
    name, prefix = f"sla{run}", f"sla{run}."
    user, password = new_user(secure, f"sla{run}")
    code, out = herald_tenant(secure, "create", name, "--principal", f"User:{user}",
                              "--namespace", prefix)
    assert code == 0, out
    args = [arg for key_value in sla for arg in ("--set", key_value)]
    code, out = herald_tenant(secure, "sla", name, *args)
    assert code == 0, out
    return name, kafka(secure, user, password), prefix


def test_the_sla_is_set_listed_and_checked(secure):
    name, _, _ = tenant_with_sla(secure, "input_bytes_per_sec=262144", "reject_over_rate=1")
    code, out = herald_tenant(secure, "list")
    assert code == 0, out
    listed = out.split(f"\n{name}\n", 1)[-1] if f"\n{name}\n" in f"\n{out}" else out
    assert "sla input_bytes_per_sec=262144" in listed and "sla reject_over_rate=1" in listed, out
    code, out = herald_tenant(secure, "sla", name, "--set", "input_bytes_per_sec=1.5")
    assert code != 0 and "InvalidArgument" in out, out
    code, out = herald_tenant(secure, "sla", name, "--set", "bogus_rate=5")
    assert code != 0 and "InvalidArgument" in out and "bogus_rate" in out, out
    code, out = herald_tenant(secure, "sla", "no-such-tenant", "--set", "input_bytes_per_sec=5")
    assert code != 0 and "NotFound" in out, out
    code, out = herald_tenant(secure, "sla", name, "--remove", "reject_over_rate")
    assert code == 0 and "reject_over_rate" not in out and "input_bytes_per_sec" in out, out


REJECT_RATE = 256 * 1024


def reject_mode_topic(secure):
    _, conf, prefix = tenant_with_sla(secure, f"input_bytes_per_sec={REJECT_RATE}",
                                      "reject_over_rate=1")
    topic = prefix + "in"
    create_topic(secure, topic)
    return conf, topic


def test_reject_mode_fails_librdkafkas_records_over_the_rate(secure):
    conf, topic = reject_mode_topic(secure)
    with AcceptedLog(kafka(secure, "admin", ADMIN_PASSWORD), topic) as log:
        summary = offer(conf, topic, 2 * REJECT_RATE, 10)
    rate, _ = log.rates((2, 8), RECORD_BYTES)
    print(json.dumps({"accepted": rate, **summary}))
    # librdkafka does not retry THROTTLING_QUOTA_EXCEEDED on a produce: the
    # records fail with it (its delivery report drops the broker's message).
    assert set(summary["errors"]) == {"THROTTLING_QUOTA_EXCEEDED"}, summary
    assert summary["delivered"] + summary["errors"]["THROTTLING_QUOTA_EXCEEDED"] == summary["sent"]
    # Refused records take nothing: what was accepted is what was delivered.
    assert log.samples[-1][1] == summary["delivered"], (log.samples[-1], summary)
    assert 0.9 * REJECT_RATE <= rate <= 1.05 * REJECT_RATE, rate


def test_reject_mode_makes_the_java_producer_back_off_and_retry(secure):
    conf, topic = reject_mode_topic(secure)
    deps = COMPAT / ".deps" / "java"
    settings = "\n".join([
        "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f"username=\"{conf['sasl.username']}\" password=\"{conf['sasl.password']}\";",
    ])
    with AcceptedLog(kafka(secure, "admin", ADMIN_PASSWORD), topic) as log:
        run = subprocess.run(
            ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-cp", f"{deps / 'classes'}:{deps / 'lib'}/*", "HeraldQuotaProducer",
             conf["bootstrap.servers"], topic, "java-reject", str(2 * REJECT_RATE), "8",
             str(RECORD_BYTES), settings],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
    output = f"stdout:\n{run.stdout[-3000:]}\nstderr:\n{run.stderr[-3000:]}"
    assert run.returncode == 0, output
    line = re.search(r"HERALD-QUOTA java sent=(\d+) errors=(\d+)", run.stdout)
    assert line, output
    rate, _ = log.rates((2, 8), RECORD_BYTES)
    print(f"java: accepted {rate:.0f} B/s, sent {line[1]}, errors {line[2]}")
    # ThrottlingQuotaExceededException is retriable: every record gets in,
    # and the producer logs the broker's reason as it retries. Its retries
    # back off exponentially (retry.backoff.ms up to retry.backoff.max.ms),
    # so it gets well under the rate: throttle mode suits it better.
    assert int(line[2]) == 0 and log.samples[-1][1] == int(line[1]), output
    assert re.search(r"THROTTLING_QUOTA_EXCEEDED.*over its input byte rate of \d+/s; "
                     r"retry after \d+ ms", run.stderr), output
    assert 0 < rate <= 1.05 * REJECT_RATE, rate


def test_reject_mode_fails_kcats_records_over_the_rate(secure):
    conf, topic = reject_mode_topic(secure)
    log = AcceptedLog(kafka(secure, "admin", ADMIN_PASSWORD), topic)
    sent, code, text = offer_with_kcat(
        ["-b", conf["bootstrap.servers"], "-t", topic, "-p", "0",
         "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-512",
         "-X", f"sasl.username={conf['sasl.username']}",
         "-X", f"sasl.password={conf['sasl.password']}",
         "-X", "linger.ms=5", "-X", "queue.buffering.max.messages=2000"],
        2 * REJECT_RATE, 10, RECORD_BYTES, log)
    failed = text.count("Delivery failed for message: Broker: Throttling quota has been exceeded")
    rate, _ = log.rates((2, 8), RECORD_BYTES)
    print(f"kcat: accepted {rate:.0f} B/s, sent {sent}, failed {failed}, exit {code}")
    # Like librdkafka under it: the records over the rate fail, and kcat
    # says so and exits with an error.
    assert failed > 0 and code != 0, text[-2000:]
    assert log.samples[-1][1] + failed == sent, (log.samples[-1], sent, failed)
    assert 0.9 * REJECT_RATE <= rate <= 1.05 * REJECT_RATE, rate


FAIR_RATE = 4 * 1024 * 1024


def test_two_tenants_over_their_rates_each_get_it_beside_a_flood(secure):
    """Throttle mode: two tenants each offer twice their input rate while
    an unlimited producer (the administrator, in no tenant) floods the
    broker as fast as it can; each tenant is still accepted at least 95%
    of its rate."""
    tenants = []
    for _ in range(2):
        _, conf, prefix = tenant_with_sla(secure, f"input_bytes_per_sec={FAIR_RATE}")
        topic = prefix + "in"
        create_topic(secure, topic)
        tenants.append((conf, topic))
    flood_topic = f"flood-{uuid.uuid4().hex[:6]}"
    # The flood writes hundreds of MB/s: small segments under a size
    # retention keep what it leaves on disk bounded (it is never read).
    create_topic(secure, flood_topic, config={
        "segment.bytes": str(64 * 1024 * 1024),
        "retention.bytes": str(256 * 1024 * 1024),
    })
    admin_conf = kafka(secure, "admin", ADMIN_PASSWORD)
    script = str(COMPAT / "offer_producer.py")
    seconds = 12
    flood = subprocess.Popen(
        [sys.executable, script, json.dumps({**admin_conf, "queue.buffering.max.messages": 20000}),
         flood_topic, "0", str(seconds + 2), str(RECORD_BYTES)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    producers = [
        subprocess.Popen(
            [sys.executable, script, json.dumps(conf), topic, str(2 * FAIR_RATE), str(seconds),
             str(RECORD_BYTES)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for conf, topic in tenants
    ]
    logs = [AcceptedLog(admin_conf, topic) for _, topic in tenants]
    for log in logs:
        log.__enter__()
    try:
        outputs = [p.communicate(timeout=seconds + 120) for p in producers]
        flood_output = flood.communicate(timeout=120)
    finally:
        for log in logs:
            log.__exit__(None, None, None)
        for p in [flood, *producers]:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip([*producers, flood], [*outputs, flood_output]):
        assert p.returncode == 0, err[-2000:]
    flooded = json.loads(flood_output[0].strip().splitlines()[-1])
    rates = [log.rates((2, 10), RECORD_BYTES)[0] for log in logs]
    print(f"tenants accepted {[round(r) for r in rates]} B/s of {FAIR_RATE}; "
          f"the flood delivered {flooded['delivered']} records in {seconds + 2} s")
    for (out, _), rate in zip(outputs, rates):
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["errors"] == {}, summary
        assert summary["throttle_callbacks"] > 0, summary
        assert rate >= 0.95 * FAIR_RATE, f"a tenant got {rate:.0f} B/s of its {FAIR_RATE}"
    assert flooded["delivered"] > 0, flooded


def published_answers(session, count):
    session.wait_for(lambda s: len(s.of_kind("published")) >= count,
                     what=f"{count} publish answers")
    return session.of_kind("published")


def test_a_push_publish_over_the_input_rate_is_refused_with_retry_after(secure, proto):
    pb = proto.pb
    rate = 20_000
    name, conf, prefix = tenant_with_sla(secure, f"input_bytes_per_sec={rate}")
    user, password = conf["sasl.username"], conf["sasl.password"]
    topic = prefix + "push"
    create_topic(secure, topic)
    session, welcome = scram_session(proto, secure, user, password)
    try:
        assert welcome.WhichOneof("kind") == "welcome", welcome
        started = time.monotonic()
        for i in range(40):
            session.send(publish=pb.PublishRequest(request_id=i + 1, topic=topic,
                                                   value=b"v" * RECORD_BYTES))
        answers = published_answers(session, 40)
        elapsed = time.monotonic() - started
        refused = [a for a in answers if a.HasField("error")]
        accepted = len(answers) - len(refused)
        print(f"{accepted} of 40 publishes accepted in {elapsed:.2f} s at {rate} B/s")
        assert refused, "nothing was refused"
        for answer in refused:
            assert answer.error.code == pb.ERROR_CODE_RESOURCE_EXHAUSTED, answer
            assert answer.error.retry_after_ms > 0, answer
            assert re.fullmatch(rf"tenant {name} is over its input byte rate of {rate}/s; "
                                r"retry after \d+ ms", answer.error.message), answer
        # Each record's batch is a little over 1000 B: at most the rate's
        # worth of them over the time taken, plus the one that went over.
        assert accepted <= elapsed * rate / RECORD_BYTES + 2, accepted
        # Retried after the delay it was given, a publish goes in.
        time.sleep(refused[-1].error.retry_after_ms / 1000 + 0.05)
        session.send(publish=pb.PublishRequest(request_id=100, topic=topic,
                                               value=b"v" * RECORD_BYTES))
        assert not published_answers(session, 41)[-1].HasField("error")
    finally:
        session.close()
    # The unary call is answered the same way. Each call checks the
    # password again (PBKDF2), slow in a debug build: records of half a
    # second of the rate each keep the calls ahead of the refill.
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    with grpc.secure_channel(secure.push_address, tls_credentials(secure)) as channel:
        stub = proto.rpc.HeraldStub(channel)
        results = [stub.Publish(pb.PublishRequest(request_id=i, topic=topic,
                                                  value=b"v" * (rate // 2)),
                                metadata=[("authorization", f"Basic {basic}")], timeout=10)
                   for i in range(5)]
    codes = {r.error.code for r in results if r.HasField("error")}
    assert codes == {pb.ERROR_CODE_RESOURCE_EXHAUSTED}, results


def test_push_delivery_is_paced_by_the_output_rate(secure, proto):
    pb = proto.pb
    rate, total = 200, 2600
    name, conf, prefix = tenant_with_sla(secure, f"output_messages_per_sec={rate}")
    topic = prefix + "out"
    create_topic(secure, topic)
    producer = Producer(kafka(secure, "admin", ADMIN_PASSWORD))
    for i in range(total):
        producer.produce(topic, key=b"k", value=b"%d" % i)
    assert producer.flush(30) == 0
    session, welcome = scram_session(proto, secure, conf["sasl.username"], conf["sasl.password"])
    try:
        assert welcome.WhichOneof("kind") == "welcome", welcome
        session.subscribe(1, topic, subject=b"k", start="earliest")
        arrivals = []  # (seconds since the first delivery, deliveries so far)
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            try:
                session.next(timeout=0.5)
            except queue.Empty:
                continue
            if session.deliveries:
                now = time.monotonic()
                if not arrivals:
                    first = now
                arrivals.append((now - first, len(session.deliveries)))
        windows = [sum(1 for t, _ in zip_counts(arrivals) if s <= t < s + 1)
                   for s in range(1, 10)]
        print(f"deliveries per one-second window at {rate}/s: {windows}")
        for count in windows:
            assert 0.9 * rate <= count <= 1.1 * rate, windows
        # Without the rate the rest arrives at once, in order, none lost.
        code, out = herald_tenant(secure, "sla", name, "--remove", "output_messages_per_sec")
        assert code == 0, out
        session.wait_for(lambda s: len(s.deliveries) >= total, what="every record")
        offsets = [offset for _, _, offset, _, _ in session.deliveries]
        assert offsets == list(range(total)), offsets[:20]
    finally:
        session.close()


def zip_counts(arrivals):
    """One arrival time per delivery, from (time, deliveries so far)."""
    before = 0
    for at, count in arrivals:
        for _ in range(count - before):
            yield at, count
        before = count
