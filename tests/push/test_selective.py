"""Selective delivery over gRPC: filters on headers and keys, and
publisher-side audiences, with records and headers published by
confluent-kafka; live, on catch-up and after a resume."""

from collections import defaultdict

from kafka_side import create_topic, produce
from push_client import Session


def subscribed(ids):
    return lambda s: ids <= {m.subscription_id for m in s.of_kind("subscribed")}


def records(batch):
    """Records of four subjects with every mix of region, amount and
    audience; the value names the batch and the index."""
    regions = [b"eu", b"us", None]
    amounts = [b"50", b"150", b"1e3", b"n/a"]
    audiences = [None, b"gold", b"silver,bronze", b" gold , vip"]
    out = []
    for i in range(96):
        headers = []
        if regions[i % 3] is not None:
            headers.append(("region", regions[i % 3]))
        headers.append(("amount", amounts[i % 4]))
        if audiences[(i // 4) % 4] is not None:
            headers.append(("herald.audience", audiences[(i // 4) % 4]))
        key = b"sel.%s.%d" % (b"ab"[i % 2:i % 2 + 1], i % 5)
        out.append((key, b"%s-%d" % (batch, i), headers))
    return out


def amount(headers):
    value = dict(headers).get("amount")
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def admitted(headers, attributes):
    audience = dict(headers).get("herald.audience")
    if audience is None:
        return True
    named = {a.strip() for a in audience.split(b",") if a.strip()}
    return not named or bool(named & attributes)


# Each subscription: (filter, attributes, what it receives by the reference).
SUBSCRIPTIONS = {
    1: ('header.region == "eu"', [],
        lambda k, h: dict(h).get("region") == b"eu" and admitted(h, set())),
    2: ("", ["gold"],
        lambda k, h: admitted(h, {b"gold"})),
    3: ('header.amount >= 100 and key starts_with "sel.a"', ["vip", "silver"],
        lambda k, h: (amount(h) or 0) >= 100 and k.startswith(b"sel.a") and admitted(h, {b"vip", b"silver"})),
    4: ('not exists header.region or header.region in ("us")', ["bronze"],
        lambda k, h: dict(h).get("region") in (None, b"us") and admitted(h, {b"bronze"})),
}


def expected(batch_records, sid):
    want = SUBSCRIPTIONS[sid][2]
    return [(k, v) for k, v, h in batch_records if want(k, h)]


def by_subscription(session):
    out = defaultdict(list)
    for sid, _p, _o, key, value in session.deliveries:
        out[sid].append((key, value))
    return out


def assert_exactly(got, want, sid):
    # Order holds per subject (a subject is one partition).
    assert sorted(got) == sorted(want), (sid, len(got), len(want))
    for key in {k for k, _ in want}:
        assert [r for r in got if r[0] == key] == [r for r in want if r[0] == key], (sid, key)


def test_filters_and_audiences_select_exactly_live_and_on_catch_up(herald, proto):
    create_topic(herald.bootstrap, "selective", 3)
    stored = records(b"old")
    produce(herald.bootstrap, "selective", stored)
    s = Session(proto, herald.push_address)
    for sid, (text, attributes, _) in SUBSCRIPTIONS.items():
        s.subscribe(sid, "selective", pattern="sel.>", start="earliest", filter=text, attributes=attributes)
    s.wait_for(subscribed(set(SUBSCRIPTIONS)), what="the subscriptions")
    live = records(b"new")
    produce(herald.bootstrap, "selective", live)
    total = sum(len(expected(stored + live, sid)) for sid in SUBSCRIPTIONS)
    s.wait_for(lambda s: len(s.deliveries) >= total, what=f"{total} deliveries")
    s.drain_quiet()
    got = by_subscription(s)
    for sid in SUBSCRIPTIONS:
        assert_exactly(got[sid], expected(stored + live, sid), sid)
    # Every subscription received something and none received everything:
    # the run says something about each rule.
    for sid in SUBSCRIPTIONS:
        assert 0 < len(got[sid]) < len(stored + live), sid
    s.close()


def test_a_resumed_subscription_keeps_its_filter_and_skips_what_it_passed(herald, proto):
    create_topic(herald.bootstrap, "selective-resume", 3)
    text = 'header.region == "eu"'
    s = Session(proto, herald.push_address)
    s.subscribe(9, "selective-resume", pattern="sel.>", cumulative=True, filter=text)
    s.wait_for(subscribed({9}))
    first = records(b"one")
    produce(herald.bootstrap, "selective-resume", first)
    want = [(k, v) for k, v, h in first if dict(h).get("region") == b"eu" and admitted(h, set())]
    s.wait_for(lambda s: len(s.deliveries) >= len(want), what="the first batch")
    s.drain_quiet()
    assert sorted((k, v) for _s, _p, _o, k, v in s.deliveries) == sorted(want)
    # Acknowledge the last delivery of each partition; the checkpoint then
    # also covers the records filtered out after it.
    last = {}
    for _sid, partition, offset, _k, _v in s.deliveries:
        last[partition] = max(offset, last.get(partition, -1))
    for partition, offset in last.items():
        s.ack(9, partition, offset)
    s.wait_for(lambda s: 9 in s.checkpoints and len(s.of_kind("error")) == 0, what="a checkpoint")
    s.drain_quiet()
    token = s.checkpoints[9]
    s.close()

    second = records(b"two")
    produce(herald.bootstrap, "selective-resume", second)
    # The token carries the filter: resuming through Hello applies it.
    again = Session(proto, herald.push_address, hello=proto.pb.Hello(resume_tokens=[token]))
    want = [(k, v) for k, v, h in second if dict(h).get("region") == b"eu" and admitted(h, set())]
    again.wait_for(lambda s: len(s.deliveries) >= len(want), what="the second batch")
    again.drain_quiet()
    assert sorted((k, v) for _s, _p, _o, k, v in again.deliveries) == sorted(want)
    again.close()


def test_an_invalid_filter_or_attribute_gets_a_clear_error(herald, proto):
    create_topic(herald.bootstrap, "selective-bad", 1)
    pb = proto.pb
    s = Session(proto, herald.push_address)
    s.subscribe(1, "selective-bad", pattern="a.>", filter="header.a ==")
    s.subscribe(2, "selective-bad", pattern="a.>", filter='header.a > "x"')
    s.subscribe(3, "selective-bad", pattern="a.>", filter=" or ".join(["exists key"] * 65))
    s.subscribe(4, "selective-bad", pattern="a.>", attributes=["a,b"])
    s.subscribe(5, "selective-bad", pattern="a.>", filter="exists header.a")
    s.wait_for(lambda s: len(s.of_kind("error")) >= 4 and len(s.of_kind("subscribed")) >= 1, what="four errors")
    errors = {e.subscription_id: e for e in s.of_kind("error")}
    assert {sid: pb.ErrorCode.Name(e.code) for sid, e in errors.items()} == {
        sid: "ERROR_CODE_INVALID_FILTER" for sid in (1, 2, 3, 4)}
    assert "byte 11" in errors[1].message, errors[1].message
    assert "number" in errors[2].message, errors[2].message
    assert "64" in errors[3].message, errors[3].message
    # The session goes on serving the valid subscription.
    produce(herald.bootstrap, "selective-bad", [(b"a.1", b"yes", [("a", b"1")]), (b"a.1", b"no")])
    s.wait_for(lambda s: len(s.deliveries) >= 1)
    s.drain_quiet()
    assert [(sid, v) for sid, _p, _o, _k, v in s.deliveries] == [(5, b"yes")]
    s.close()
