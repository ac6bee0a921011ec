"""Push subscriptions over gRPC, with a Python client generated from the
.proto and records published by confluent-kafka: routing, resume after a
client or broker crash, bad input."""

import socket
import time
from collections import defaultdict

import grpc
import pytest

from kafka_side import create_topic, delete_topic, produce
from push_client import Closed, Session, channel


def subscribed(ids):
    return lambda s: ids <= {m.subscription_id for m in s.of_kind("subscribed")}


def by_subscription(session):
    out = defaultdict(list)
    for sid, _p, _o, key, value in session.deliveries:
        out[sid].append((key, value))
    return out


def test_each_subscription_receives_exactly_its_subjects(herald, proto):
    create_topic(herald.bootstrap, "events", 3)
    s = Session(proto, herald.push_address)
    s.subscribe(1, "events", subject=b"user.1")
    s.subscribe(2, "events", pattern="user.*")
    s.subscribe(3, "events", pattern="eu.>")
    s.subscribe(4, "events", subject=b"nobody")
    s.wait_for(subscribed({1, 2, 3, 4}), what="four subscriptions")
    keys = [b"user.1", b"user.2", b"eu.fr.paris", b"eu", b"us.ny", None]
    records = [(keys[i % len(keys)], b"v%d" % i) for i in range(600)]
    produce(herald.bootstrap, "events", records)
    expected = {
        1: [r for r in records if r[0] == b"user.1"],
        2: [r for r in records if r[0] in (b"user.1", b"user.2")],
        3: [r for r in records if r[0] == b"eu.fr.paris"],
    }
    total = sum(len(v) for v in expected.values())
    s.wait_for(lambda s: len(s.deliveries) >= total, what=f"{total} deliveries")
    s.drain_quiet()
    got = by_subscription(s)
    assert set(got) == {1, 2, 3}, "subscription 4 (no such subject) got records"
    for sid, want in expected.items():
        # Per subject, in publish order.
        for key in {k for k, _ in want}:
            assert [r for r in got[sid] if r[0] == key] == [r for r in want if r[0] == key], (sid, key)
        assert len(got[sid]) == len(want), sid
    metrics = scrape(herald)
    assert metrics["herald_push_sessions"] == 1
    assert metrics["herald_push_subscriptions"] == 4
    assert metrics['herald_push_routing_routes{kind="literal"}'] == 2
    assert metrics['herald_push_routing_routes{kind="pattern"}'] == 2
    assert metrics["herald_push_routing_subjects"] == 2
    assert metrics["herald_push_deliveries_written_total"] == total
    assert metrics['herald_push_cursors{kind="live"}'] == 12
    s.close()


def scrape(herald):
    """The broker's /metrics as {series: value}; the admin address is read
    from the broker's log."""
    import re
    import urllib.request

    found = re.findall(r"admin listener ready on (\S+)", herald.log_path.read_text())
    with urllib.request.urlopen(f"http://{found[-1]}/metrics", timeout=10) as response:
        text = response.read().decode()
    series = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            series[name] = float(value)
    return series


def ack_some(session, sid, count):
    """Acks the first `count` deliveries of `sid`, one by one, and waits
    until the checkpoint answering the last ack arrived."""
    session.wait_for(lambda s: len(s.deliveries) >= count, what=f"{count} deliveries")
    acked = session.deliveries[:count]
    for d in acked:
        session.ack(sid, d[1], d[2])
    # One checkpoint answers each ack, in order.
    session.wait_for(lambda s: len(s.checkpoint_log) >= count, what="the checkpoints")
    return acked, session.checkpoints[sid]


def check_resumed(acked, resumed, records_by_key):
    """Every record after the acked position of its partition arrived,
    none missing, in order per subject; nothing at or before it."""
    last_acked = {}
    for _sid, partition, offset, _k, _v in acked:
        last_acked[partition] = max(offset, last_acked.get(partition, -1))
    per_key = defaultdict(list)
    for _sid, partition, offset, key, value in resumed:
        assert offset > last_acked.get(partition, -1), f"replayed an acked record: p{partition}@{offset}"
        per_key[key].append(value)
    acked_per_key = defaultdict(list)
    for _sid, _p, _o, key, value in acked:
        acked_per_key[key].append(value)
    for key, values in records_by_key.items():
        # What was acked, then what was resumed, is exactly the subject's
        # records in order: nothing lost, nothing out of order.
        assert acked_per_key[key] + per_key[key] == values, key


class RecordingSession(Session):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.checkpoint_log = []

    def next(self, timeout=30.0):
        message = super().next(timeout)
        if message.WhichOneof("kind") == "checkpoint":
            self.checkpoint_log.append(message.checkpoint.resume_token)
        return message


@pytest.mark.parametrize("crash", ["client", "broker"])
def test_a_resume_token_continues_after_the_last_ack(herald, proto, crash):
    create_topic(herald.bootstrap, "ledger", 3)
    keys = [b"acct.%d" % k for k in range(6)]
    first = [(keys[i % 6], b"a%d" % i) for i in range(300)]
    produce(herald.bootstrap, "ledger", first)
    s = RecordingSession(proto, herald.push_address)
    s.subscribe(9, "ledger", pattern="acct.*", start="earliest", cumulative=True)
    acked, token = ack_some(s, 9, 120)
    # The subscriber dies without a word.
    s.channel.close()
    if crash == "broker":
        herald.kill()
        herald.start()
    second = [(keys[i % 6], b"b%d" % i) for i in range(300)]
    produce(herald.bootstrap, "ledger", second)
    records_by_key = defaultdict(list)
    for key, value in first + second:
        records_by_key[key].append(value)
    again = Session(proto, herald.push_address, hello=proto.pb.Hello(resume_tokens=[token]))
    want = 600 - len(acked)
    again.wait_for(lambda s: len(s.deliveries) >= want, what=f"{want} resumed deliveries")
    again.drain_quiet()
    assert {m.subscription_id for m in again.of_kind("subscribed")} == {9}
    check_resumed(acked, again.deliveries, records_by_key)
    again.close()


@pytest.mark.herald_args("--push-max-subscriptions", "3", "--push-max-connections", "6")
def test_bad_input_gets_a_clear_answer_and_everyone_else_is_served(herald, proto):
    pb = proto.pb
    create_topic(herald.bootstrap, "orders", 2)
    # A bystander subscribed through all of it.
    bystander = Session(proto, herald.push_address)
    bystander.subscribe(1, "orders", pattern="o.>", start="earliest")
    bystander.wait_for(subscribed({1}))

    s = Session(proto, herald.push_address)
    s.subscribe(1, "no-such-topic", subject=b"x")
    s.subscribe(2, "orders", pattern="a.>.b")
    s.subscribe(3, "orders", subject=b"o.1", start=b"HRT1 forged token")
    s.subscribe(4, "orders", subject=b"o.1")
    s.subscribe(4, "orders", subject=b"o.2")
    s.subscribe(5, "orders", subject=b"o.3")
    s.subscribe(6, "orders", subject=b"o.4")
    s.subscribe(7, "orders", subject=b"o.5")
    s.wait_for(lambda s: len(s.of_kind("error")) >= 5 and len(s.of_kind("subscribed")) >= 3, what="five errors")
    codes = {e.subscription_id: pb.ErrorCode.Name(e.code) for e in s.of_kind("error")}
    assert codes[1] == "ERROR_CODE_UNKNOWN_TOPIC"
    assert codes[2] == "ERROR_CODE_INVALID_SELECTOR"
    assert codes[3] == "ERROR_CODE_INVALID_TOKEN"
    assert codes[4] == "ERROR_CODE_DUPLICATE_SUBSCRIPTION_ID"
    assert codes[7] == "ERROR_CODE_TOO_MANY_SUBSCRIPTIONS"
    assert {m.subscription_id for m in s.of_kind("subscribed")} == {4, 5, 6}
    # An ack of something never delivered.
    s.ack(4, 0, 10**9)
    s.wait_for(lambda s: len(s.of_kind("error")) >= 6)
    assert pb.ErrorCode.Name(s.of_kind("error")[-1].code) == "ERROR_CODE_INVALID_REQUEST"

    # A stale token: its topic was deleted and made again.
    t = Session(proto, herald.push_address)
    t.subscribe(1, "orders", subject=b"o.1", cumulative=True)
    t.wait_for(subscribed({1}))
    produce(herald.bootstrap, "orders", [(b"o.1", b"x")])
    t.wait_for(lambda s: len(s.deliveries) == 1)
    t.ack(1, t.deliveries[0][1], t.deliveries[0][2])
    t.wait_for(lambda s: 1 in s.checkpoints)
    token = t.checkpoints[1]
    t.close()

    # Malformed bytes where a ClientMessage belongs: a go-away, then the end.
    raw = channel(herald.push_address)
    call = raw.stream_stream(
        "/herald.v1.Herald/Session",
        request_serializer=lambda b: b,
        response_deserializer=pb.ServerMessage.FromString,
    )(iter([b"\xff\xff\xff\xff\x0f"]))
    replies = list(call)
    assert replies[-1].WhichOneof("kind") == "go_away"
    assert pb.GoAwayReason.Name(replies[-1].go_away.reason) == "GO_AWAY_REASON_PROTOCOL_ERROR"
    raw.close()

    # A message past the 4 MiB limit.
    big = Session(proto, herald.push_address)
    big.send(publish=pb.PublishRequest(request_id=1, topic="orders", key=b"o.1", value=b"x" * (5 << 20)))
    with pytest.raises(Closed):
        big.wait_for(lambda s: False, timeout=15)
    away = big.of_kind("go_away")
    assert away and pb.GoAwayReason.Name(away[0].reason) == "GO_AWAY_REASON_MESSAGE_TOO_LARGE"

    # A connection flood: sessions past the limit are told to go away;
    # raw connections far past it are closed at once.
    crowd = [Session(proto, herald.push_address) for _ in range(6)]
    refused = 0
    for c in crowd:
        c.wait_for(lambda c: bool(c.of_kind("welcome") or c.of_kind("go_away")), what="welcome or go-away")
        if c.of_kind("go_away"):
            assert pb.GoAwayReason.Name(c.of_kind("go_away")[0].reason) == "GO_AWAY_REASON_TOO_MANY_CONNECTIONS"
            refused += 1
    # Sessions open: bystander, s, and the crowd's; limit 6.
    assert refused == 2, f"{refused} sessions refused"
    sockets = []
    for _ in range(150):
        try:
            sockets.append(socket.create_connection(("127.0.0.1", herald.push_port), timeout=2))
        except OSError:
            break
    time.sleep(0.5)
    closed = 0
    for sock in sockets:
        sock.settimeout(0.2)
        try:
            if sock.recv(1) == b"":
                closed += 1
        except (socket.timeout, OSError):
            pass
        sock.close()
    assert closed > 0, "no connection past the listener's bound was closed"
    for c in crowd:
        c.close()

    # The bystander kept its subscription and gets everything published
    # meanwhile and after; the stale token is refused.
    records = [(b"o.%d" % (i % 4), b"m%d" % i) for i in range(200)]
    produce(herald.bootstrap, "orders", records)
    bystander.wait_for(lambda s: len(s.deliveries) >= 201, what="the bystander's deliveries")
    assert sorted(v for *_x, v in bystander.deliveries) == sorted([b"x"] + [v for _k, v in records])
    delete_topic(herald.bootstrap, "orders")
    bystander.wait_for(lambda s: bool(s.of_kind("unsubscribed")), what="the end of the deleted topic's subscription")
    create_topic(herald.bootstrap, "orders", 2)
    late = Session(proto, herald.push_address)
    late.subscribe(1, "orders", subject=b"o.1", start=token)
    late.wait_for(lambda s: bool(s.of_kind("error")))
    assert pb.ErrorCode.Name(late.of_kind("error")[0].code) == "ERROR_CODE_STALE_TOKEN"
    for c in (bystander, s, late):
        c.close()
