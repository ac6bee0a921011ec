"""Message expiry on the push path, with records published by
confluent-kafka: what expired while a subscriber was away is not
delivered when it resumes, what did not is, in order; a topic's
message.ttl.ms is set with Kafka's IncrementalAlterConfigs."""

import time

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kafka_side import create_topic, produce
from push_client import Session


def subscribed(ids):
    return lambda s: ids <= {m.subscription_id for m in s.of_kind("subscribed")}


def test_records_that_expired_while_away_are_not_delivered_on_resume(herald, proto):
    create_topic(herald.bootstrap, "expiring", 3)
    s = Session(proto, herald.push_address)
    s.subscribe(1, "expiring", pattern="exp.>", cumulative=True)
    s.wait_for(subscribed({1}))
    produce(herald.bootstrap, "expiring", [(b"exp.%d" % (i % 4), b"before-%d" % i) for i in range(8)])
    s.wait_for(lambda s: len(s.deliveries) >= 8, what="the first records")
    s.drain_quiet(0.5)
    for partition in {p for _s, p, _o, _k, _v in s.deliveries}:
        s.ack(1, partition, max(o for _s, p, o, _k, _v in s.deliveries if p == partition))
    s.wait_for(lambda s: 1 in s.checkpoints)
    s.drain_quiet(0.5)
    token = s.checkpoints[1]
    s.close()

    # Away: a mix of short and long lives, and records with none.
    away = []
    for i in range(40):
        headers = []
        if i % 3 == 0:
            headers = [("herald.ttl-ms", b"300")]
        elif i % 3 == 1:
            headers = [("herald.ttl-ms", b"600000")]
        away.append((b"exp.%d" % (i % 4), b"away-%d" % i, headers))
    produce(herald.bootstrap, "expiring", away)
    time.sleep(0.8)

    again = Session(proto, herald.push_address, hello=proto.pb.Hello(resume_tokens=[token]))
    want = [(k, v) for k, v, h in away if h != [("herald.ttl-ms", b"300")]]
    again.wait_for(lambda s: len(s.deliveries) >= len(want), what=f"{len(want)} unexpired records")
    again.drain_quiet()
    got = [(k, v) for _s, _p, _o, k, v in again.deliveries]
    assert sorted(got) == sorted(want)
    for key in {k for k, _ in want}:
        assert [r for r in got if r[0] == key] == [r for r in want if r[0] == key], key
    again.close()


def test_a_topic_ttl_set_through_kafka_admin_applies_and_gaps_are_told_when_asked(herald, proto):
    create_topic(herald.bootstrap, "expiring-topic", 1)
    admin = AdminClient({"bootstrap.servers": herald.bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC, "expiring-topic",
        incremental_configs=[ConfigEntry("message.ttl.ms", "200", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "expiring-topic")])
    entries = next(iter(described.values())).result(timeout=30)
    assert entries["message.ttl.ms"].value == "200"

    produce(herald.bootstrap, "expiring-topic", [(b"t.1", b"old-%d" % i) for i in range(5)])
    time.sleep(0.5)
    produce(herald.bootstrap, "expiring-topic", [(b"t.1", b"kept", [("herald.ttl-ms", b"600000")])])
    pb = proto.pb
    s = Session(proto, herald.push_address)
    s.send(subscribe=pb.Subscribe(subscription_id=3, topic="expiring-topic", subject=b"t.1",
                                  start=pb.StartAt(earliest=pb.Empty()), report_expired=True))
    s.wait_for(lambda s: len(s.deliveries) >= 1 and s.of_kind("gap"), what="a gap and a delivery")
    s.drain_quiet()
    assert [v for _s, _p, _o, _k, v in s.deliveries] == [b"kept"]
    gaps = [(g.from_offset, g.to_offset, pb.GapReason.Name(g.reason)) for g in s.of_kind("gap")]
    assert gaps == [(0, 5, "GAP_REASON_EXPIRED")]
    s.close()
