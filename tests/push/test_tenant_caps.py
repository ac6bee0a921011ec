"""A tenant's caps (seed 004, section 2.3.6), set with `herald tenant sla`
and enforced on every front end:

- `max_partitions`: CreateTopics and CreatePartitions past the cap are
  refused POLICY_VIOLATION, with the broker's reason, for librdkafka's
  admin client as for any other; what fits is created.
- `max_stored_bytes`: once the tenant's topics store the cap, a produce
  is refused POLICY_VIOLATION (librdkafka fails the records) and a push
  publish ERROR_CODE_TENANT_CAP; raising the cap lets both in again.
- `max_connections`: across the Kafka listener and the push gateway, a
  connection past the cap is refused (a Kafka client's SASL login fails
  with the reason; a push session ends with GoAway TOO_MANY_CONNECTIONS),
  and closing one makes room.

The broker is the secure one of `secure_push.py`.
"""

import time
import uuid

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from secure_push import (  # noqa: F401 (secure is a fixture)
    ADMIN_PASSWORD,
    create_topic,
    scram_session,
    secure,
)
from test_tenant_sla import tenant_with_sla
from test_tenants import herald_tenant, kafka

# How old the broker's stored-bytes sum may be (tenant_caps::USAGE_MAX_AGE):
# a raised cap is seen by then.
USAGE_MAX_AGE_S = 0.2


def tenant_with_caps(secure, *sla):
    """A new tenant with one SCRAM user, a namespace and its SLA set;
    answers (name, user, password, namespace prefix)."""
    name, conf, prefix = tenant_with_sla(secure, *sla)
    return name, conf["sasl.username"], conf["sasl.password"], prefix


def outcome(future):
    """None when the admin operation succeeded, else its KafkaError."""
    try:
        future.result(timeout=15)
        return None
    except Exception as e:  # confluent_kafka raises KafkaException(KafkaError)
        return e.args[0]


def test_max_partitions_refuses_what_would_pass_the_cap(secure):
    name, user, password, prefix = tenant_with_caps(secure, "max_partitions=4")
    client = AdminClient(kafka(secure, user, password))
    first = client.create_topics([NewTopic(prefix + "a", num_partitions=3, replication_factor=1)])
    assert outcome(first[prefix + "a"]) is None
    # Two more would make five.
    refused = outcome(client.create_topics(
        [NewTopic(prefix + "b", num_partitions=2, replication_factor=1)])[prefix + "b"])
    assert refused is not None and refused.code() == KafkaError.POLICY_VIOLATION, refused
    assert f"tenant {name} may have at most 4 partitions" in refused.str(), refused.str()
    assert "have 3 and this adds 2" in refused.str(), refused.str()
    # Growing the topic to five is refused the same way; to four it fits.
    grown = outcome(client.create_partitions([NewPartitions(prefix + "a", 5)])[prefix + "a"])
    assert grown is not None and grown.code() == KafkaError.POLICY_VIOLATION, grown
    assert outcome(client.create_partitions([NewPartitions(prefix + "a", 4)])[prefix + "a"]) is None
    # The administrator is held to the tenant's cap in its namespace too,
    # and not outside it.
    admin_client = AdminClient(kafka(secure, "admin", ADMIN_PASSWORD))
    refused = outcome(admin_client.create_topics(
        [NewTopic(prefix + "c", num_partitions=1, replication_factor=1)])[prefix + "c"])
    assert refused is not None and refused.code() == KafkaError.POLICY_VIOLATION, refused
    outside = f"free-{uuid.uuid4().hex[:6]}"
    assert outcome(admin_client.create_topics(
        [NewTopic(outside, num_partitions=8, replication_factor=1)])[outside]) is None
    metadata = client.list_topics(prefix + "a", timeout=10)
    assert len(metadata.topics[prefix + "a"].partitions) == 4


def produce(conf, topic, count, size=1000):
    """Produces `count` records of `size` bytes one after another, each
    waited for; answers (delivered, {error name: count})."""
    producer = Producer({**conf, "linger.ms": 0, "retries": 0})
    delivered, errors = 0, {}

    def report(err, _msg):
        nonlocal delivered
        if err is None:
            delivered += 1
        else:
            errors[err.name()] = errors.get(err.name(), 0) + 1

    for _ in range(count):
        producer.produce(topic, b"v" * size, on_delivery=report)
        producer.flush(15)
    return delivered, errors


def test_max_stored_bytes_refuses_produce_and_publish_until_raised(secure, proto):
    pb = proto.pb
    cap = 100_000
    name, user, password, prefix = tenant_with_caps(secure, f"max_stored_bytes={cap}")
    topic = prefix + "store"
    create_topic(secure, topic)
    conf = kafka(secure, user, password)
    delivered, errors = produce(conf, topic, 300)
    print(f"delivered {delivered} records of 1000 B under a cap of {cap} B; errors {errors}")
    assert set(errors) == {"POLICY_VIOLATION"}, errors
    # Each record stores a little over 1000 B; the broker counts what each
    # produce adds, so only the one that crosses the cap goes past it.
    assert cap // 1100 <= delivered <= cap // 1000 + 1, delivered
    session, welcome = scram_session(proto, secure, user, password)
    try:
        assert welcome.WhichOneof("kind") == "welcome", welcome
        session.send(publish=pb.PublishRequest(request_id=1, topic=topic, key=b"k", value=b"v"))
        session.wait_for(lambda s: s.of_kind("published"), what="the publish's answer")
        answer = session.of_kind("published")[0]
        assert answer.error.code == pb.ERROR_CODE_TENANT_CAP, answer
        assert f"tenant {name} stores" in answer.error.message, answer
        assert f"max_stored_bytes of {cap}" in answer.error.message, answer
        code, out = herald_tenant(secure, "sla", name, "--set", f"max_stored_bytes={100 * cap}")
        assert code == 0, out
        time.sleep(USAGE_MAX_AGE_S * 2)
        session.send(publish=pb.PublishRequest(request_id=2, topic=topic, key=b"k", value=b"v"))
        session.wait_for(lambda s: len(s.of_kind("published")) == 2, what="the second answer")
        assert not session.of_kind("published")[1].HasField("error"), session.of_kind("published")
    finally:
        session.close()
    assert produce(conf, topic, 5) == (5, {})


def test_max_connections_holds_across_kafka_and_push(secure, proto):
    pb = proto.pb
    name, user, password, prefix = tenant_with_caps(secure, "max_connections=2")
    sessions = []
    try:
        for _ in range(2):
            session, welcome = scram_session(proto, secure, user, password)
            sessions.append(session)
            assert welcome.WhichOneof("kind") == "welcome", welcome
        session, away = scram_session(proto, secure, user, password)
        sessions.append(session)
        assert away.WhichOneof("kind") == "go_away", away
        assert away.go_away.reason == pb.GO_AWAY_REASON_TOO_MANY_CONNECTIONS, away
        assert away.go_away.message == f"tenant {name} holds 2 connections, its max_connections"
        assert away.go_away.retry_after_ms > 0
        # A Kafka client of the tenant is refused at its SASL login, and
        # told why.
        errors = []
        producer = Producer({**kafka(secure, user, password),
                             "error_cb": lambda e: errors.append(e)})
        deadline = time.monotonic() + 15
        while not errors and time.monotonic() < deadline:
            producer.poll(0.2)
        assert errors, "the producer saw no error"
        assert errors[0].code() == KafkaError._AUTHENTICATION, errors[0]
        assert f"tenant {name} holds 2 connections" in errors[0].str(), errors[0].str()
        del producer
        # Once a session closes, the Kafka client gets in.
        sessions.pop(0).close()
        deadline = time.monotonic() + 15
        while True:
            try:
                metadata = AdminClient(kafka(secure, user, password)).list_topics(timeout=5)
                break
            except Exception:
                # The closed session may take a moment to be uncounted.
                assert time.monotonic() < deadline, "the Kafka client never got in"
                time.sleep(0.2)
        assert metadata.brokers
    finally:
        for session in sessions:
            session.close()
