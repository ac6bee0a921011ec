"""A stalled subscriber among live ones, and 10,000 subscriptions over 200
connections: each gets exactly its records, and a slow one costs the
broker no memory beyond its bounded queue."""

import asyncio
import threading
from collections import defaultdict

import grpc
import pytest

from kafka_side import create_topic, produce
from push_client import Session


def anon_rss_bytes(pid: int) -> int:
    """The broker's anonymous resident memory (the log's mapped files are
    page cache, counted apart)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc status")


def check_complete(deliveries, records, what):
    per_key = defaultdict(list)
    for _sid, _p, _o, key, value in deliveries:
        per_key[key].append(value)
    want = defaultdict(list)
    for key, value in records:
        want[key].append(value)
    assert set(per_key) == set(want), what
    for key in want:
        assert per_key[key] == want[key], f"{what}: subject {key!r} incomplete or out of order"


@pytest.mark.herald_args("--push-queue-bytes", "65536")
def test_a_stalled_subscriber_slows_nobody_and_gets_everything_later(herald, proto):
    create_topic(herald.bootstrap, "feed", 2)
    gate = threading.Event()
    gate.set()
    stalled = Session(proto, herald.push_address, gate=gate)
    live = Session(proto, herald.push_address)
    for s in (stalled, live):
        s.subscribe(1, "feed", pattern="f.*")
        s.wait_for(lambda s: bool(s.of_kind("subscribed")))
    gate.clear()  # the stalled client stops reading from here on
    before = anon_rss_bytes(herald.proc.pid)
    value = bytes(range(256)) * 4
    records = [(b"f.%d" % (i % 10), b"%d:" % i + value) for i in range(40_000)]
    produce(herald.bootstrap, "feed", records)
    live.wait_for(lambda s: len(s.deliveries) >= len(records), timeout=120, what="the live deliveries")
    grown = anon_rss_bytes(herald.proc.pid) - before
    published = sum(len(k) + len(v) for k, v in records)
    print(f"broker anonymous memory grew {grown >> 10} KiB while {published >> 20} MiB went by")
    # 40 MB went by while one subscriber read nothing: had the broker queued
    # them for it, it would have grown by as much.
    assert grown < published // 2, f"broker memory grew {grown >> 20} MiB for {published >> 20} MiB published"
    check_complete(live.deliveries, records, "live subscriber")
    gate.set()
    stalled.wait_for(lambda s: len(s.deliveries) >= len(records), timeout=180, what="the stalled subscriber's deliveries")
    stalled.drain_quiet()
    check_complete(stalled.deliveries, records, "stalled subscriber")
    states = [proto.pb.SubscriptionState.Name(m.state) for m in stalled.of_kind("status")]
    assert "SUBSCRIPTION_STATE_CATCHING_UP" in states, "the stalled subscriber never left live delivery"
    for s in (stalled, live):
        s.close()


CONNECTIONS = 200
PER_CONNECTION = 50


@pytest.mark.timeout(400)
def test_ten_thousand_subscriptions_each_receive_exactly_their_subject(herald, proto):
    pb, rpc = proto.pb, proto.rpc
    create_topic(herald.bootstrap, "many", 4)
    subject = lambda c, j: b"s.%d" % (c * PER_CONNECTION + j)  # noqa: E731
    records = [(subject(c, j), b"%d-%d-%d" % (c, j, n))
               for n in range(2) for c in range(CONNECTIONS) for j in range(PER_CONNECTION)]

    async def run():
        all_subscribed = asyncio.Event()
        ready = 0
        stop = asyncio.Event()

        async def one(c):
            nonlocal ready
            channel = grpc.aio.insecure_channel(
                herald.push_address, options=[("grpc.use_local_subchannel_pool", 1)])
            stub = rpc.HeraldStub(channel)

            async def requests():
                for j in range(PER_CONNECTION):
                    yield pb.ClientMessage(subscribe=pb.Subscribe(
                        subscription_id=j, topic="many", subject=subject(c, j)))
                await stop.wait()

            call = stub.Session(requests())
            got = defaultdict(list)
            subscribed = 0
            count = 0
            want = 2 * PER_CONNECTION
            try:
                while count < want:
                    message = await asyncio.wait_for(call.read(), timeout=120)
                    kind = message.WhichOneof("kind")
                    if kind == "subscribed":
                        subscribed += 1
                        if subscribed == PER_CONNECTION:
                            ready += 1
                            if ready == CONNECTIONS:
                                all_subscribed.set()
                    elif kind == "deliveries":
                        for d in message.deliveries.deliveries:
                            got[d.subscription_id].append((d.key, d.value))
                            count += 1
                    elif kind == "error":
                        raise AssertionError(f"connection {c}: {message.error}")
                # Anything more within a second would be a foreign record.
                try:
                    extra = await asyncio.wait_for(call.read(), timeout=1.0)
                    assert extra.WhichOneof("kind") != "deliveries", f"connection {c}: extra {extra}"
                except asyncio.TimeoutError:
                    pass
                return c, got
            finally:
                call.cancel()
                await channel.close()

        tasks = [asyncio.create_task(one(c)) for c in range(CONNECTIONS)]
        await asyncio.wait_for(all_subscribed.wait(), timeout=120)
        await asyncio.get_running_loop().run_in_executor(
            None, produce, herald.bootstrap, "many", records)
        results = await asyncio.gather(*tasks)
        stop.set()
        return results

    results = asyncio.run(run())
    assert len(results) == CONNECTIONS
    for c, got in results:
        assert sorted(got) == list(range(PER_CONNECTION)), f"connection {c}: {sorted(got)[:5]}..."
        for j, received in got.items():
            key = subject(c, j)
            assert received == [(key, b"%d-%d-0" % (c, j)), (key, b"%d-%d-1" % (c, j))], (c, j, received)
