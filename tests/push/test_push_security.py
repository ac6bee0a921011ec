"""Who may do what on the push listener: TLS, logins in a session's hello
(SCRAM and PLAIN, checked against the same credentials Kafka clients
use), access tokens from `POST /v1/token` for clients that cannot run
SCRAM (gRPC calls, browsers), and the broker's ACLs on every subscribe
and publish.

One herald per module: its push listener is SASL_SSL (TLS with a
certificate made per run by openssl, every client logs in), a
SASL_PLAINTEXT Kafka listener carries the operator's requests, and
authorization is on, with `admin` the bootstrap administrator.
"""

import base64
import json
import time
import uuid

import grpc
import pytest
from confluent_kafka.admin import AclOperation, ResourceType

from push_client import Closed, Session
from secure_push import (  # noqa: F401 (secure is a fixture)
    ADMIN_PASSWORD,
    FAILURE_WITHIN_S,
    allow,
    create_topic,
    new_user,
    scram_session,
    secure,
    tls_credentials,
    token_request,
)


def expect_go_away(session, pb, within_s=FAILURE_WITHIN_S + 1.0, first=None):
    """The session ends with GoAway AUTHENTICATION_FAILED (`first`: a
    message already read); answers how long it took."""
    started = time.monotonic()
    while True:
        message, first = (first, None) if first is not None else (session.next(timeout=within_s), None)
        kind = message.WhichOneof("kind")
        if kind == "authenticate_challenge":
            continue
        assert kind == "go_away", message
        assert message.go_away.reason == pb.GO_AWAY_REASON_AUTHENTICATION_FAILED
        return time.monotonic() - started


def error_codes(session):
    return [e.code for e in session.of_kind("error")]


def test_scram_login_in_the_hello_then_acls_decide_each_subscribe_and_publish(secure, proto):
    pb = proto.pb
    topic, other = f"orders-{uuid.uuid4().hex[:6]}", f"secret-{uuid.uuid4().hex[:6]}"
    create_topic(secure, topic)
    create_topic(secure, other)
    user, password = new_user(secure, "alice")
    allow(secure, f"User:{user}", ResourceType.TOPIC, topic, AclOperation.READ)
    allow(secure, f"User:{user}", ResourceType.TOPIC, topic, AclOperation.WRITE)

    for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
        session, welcome = scram_session(proto, secure, user, password, mechanism)
        try:
            assert welcome.WhichOneof("kind") == "welcome", welcome
            assert welcome.welcome.principal == f"User:{user}"
            session.subscribe(1, topic, subject=b"eu")
            session.subscribe(2, other, subject=b"eu")
            session.send(publish=pb.PublishRequest(request_id=7, topic=topic, key=b"eu", value=b"v"))
            session.send(publish=pb.PublishRequest(request_id=8, topic=other, key=b"eu", value=b"v"))
            session.wait_for(lambda s: len(s.deliveries) == 1 and len(s.of_kind("published")) == 2
                             and len(s.of_kind("error")) == 1, what="one delivery, two answers, one refusal")
            refused = session.of_kind("error")[0]
            assert (refused.subscription_id, refused.code) == (2, pb.ERROR_CODE_NOT_AUTHORIZED)
            answers = {p.request_id: p for p in session.of_kind("published")}
            assert not answers[7].HasField("error")
            assert answers[8].error.code == pb.ERROR_CODE_NOT_AUTHORIZED
            assert session.deliveries[0][3:] == (b"eu", b"v")
        finally:
            session.close()


def test_bad_logins_are_refused_fast_and_alike_while_others_are_served(secure, proto):
    pb = proto.pb
    topic = f"steady-{uuid.uuid4().hex[:6]}"
    create_topic(secure, topic)
    user, password = new_user(secure, "steady")
    allow(secure, f"User:{user}", ResourceType.TOPIC, topic, AclOperation.ALL)
    steady, _ = scram_session(proto, secure, user, password)
    steady.subscribe(1, topic, subject=b"k")
    steady.wait_for(lambda s: s.of_kind("subscribed"), what="the steady subscription")

    attempts = {
        "wrong password": lambda: scram_session(proto, secure, user, "wrong"),
        "unknown user": lambda: scram_session(proto, secure, "nobody-" + uuid.uuid4().hex[:6], "x"),
        "wrong mechanism": lambda: Session(proto, secure.push_address, credentials=tls_credentials(secure),
                                           hello=pb.Hello(authenticate=pb.Authenticate(
                                               mechanism="GSSAPI", payload=b"x"))),
        "plain, wrong password": lambda: Session(proto, secure.push_address, credentials=tls_credentials(secure),
                                                 hello=pb.Hello(authenticate=pb.Authenticate(
                                                     mechanism="PLAIN", payload=f"\0{user}\0nope".encode()))),
        "no login at all": lambda: Session(proto, secure.push_address, credentials=tls_credentials(secure),
                                           hello=pb.Hello(client_name="forgetful")),
    }
    for what, attempt in attempts.items():
        started = time.monotonic()
        session = attempt()
        first = None
        if isinstance(session, tuple):
            session, first = session
        try:
            expect_go_away(session, pb, first=first)
            elapsed = time.monotonic() - started
            assert elapsed < FAILURE_WITHIN_S + 0.5, f"{what}: refused after {elapsed:.2f} s"
            with pytest.raises(Closed):
                session.next(timeout=5)
        finally:
            session.close()
    # A PLAIN login with the right password works too.
    plain = Session(proto, secure.push_address, credentials=tls_credentials(secure),
                    hello=pb.Hello(authenticate=pb.Authenticate(
                        mechanism="PLAIN", payload=f"\0{user}\0{password}".encode())))
    try:
        assert plain.next().welcome.principal == f"User:{user}"
    finally:
        plain.close()

    # The steady session was served throughout.
    steady.send(publish=pb.PublishRequest(request_id=1, topic=topic, key=b"k", value=b"after"))
    steady.wait_for(lambda s: len(s.deliveries) == 1, what="a delivery after the failed logins")
    steady.close()


def test_tokens_from_the_token_endpoint_stand_for_their_user(secure, proto):
    pb = proto.pb
    topic = f"feed-{uuid.uuid4().hex[:6]}"
    create_topic(secure, topic)
    user, password = new_user(secure, "bob")
    allow(secure, f"User:{user}", ResourceType.TOPIC, topic, AclOperation.READ)

    status, body = token_request(secure, user, "wrong")
    assert (status, body["error"]) == (401, "invalid_client")
    status, body = token_request(secure, user, password)
    assert status == 200, body
    assert body["token_type"] == "Bearer" and body["expires_in"] == 600
    token = body["access_token"]

    # A gRPC session with the token in its metadata needs no hello login.
    session = Session(proto, secure.push_address, credentials=tls_credentials(secure),
                      metadata=[("authorization", f"Bearer {token}")])
    try:
        assert session.next().welcome.principal == f"User:{user}"
        session.subscribe(1, topic, subject=b"x")
        session.wait_for(lambda s: s.of_kind("subscribed"), what="a subscription with a token")
    finally:
        session.close()

    # Unary publish takes a token too; bob may read but not write.
    channel = grpc.secure_channel(secure.push_address, tls_credentials(secure))
    stub = proto.rpc.HeraldStub(channel)
    answer = stub.Publish(pb.PublishRequest(topic=topic, key=b"x", value=b"v"),
                          metadata=[("authorization", f"Bearer {token}")], timeout=10)
    assert answer.error.code == pb.ERROR_CODE_NOT_AUTHORIZED
    with pytest.raises(grpc.RpcError) as refused:
        stub.Publish(pb.PublishRequest(topic=topic, key=b"x", value=b"v"), timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

    # A forged token (bob's claims edited to admin's), a token of another
    # broker's key, and an expired token are refused alike.
    header, claims, signature = token.split(".")
    edited = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    edited["sub"] = "admin"
    forged_claims = base64.urlsafe_b64encode(json.dumps(edited).encode()).decode().rstrip("=")
    status, short = token_request(secure, user, password, expires_in="1")
    assert status == 200 and short["expires_in"] == 1
    time.sleep(2.1)
    for what, bad in {
        "forged": f"{header}.{forged_claims}.{signature}",
        "expired": short["access_token"],
        "garbage": "not-a-token",
    }.items():
        with pytest.raises(grpc.RpcError) as refused:
            stub.Publish(pb.PublishRequest(topic=topic, key=b"x", value=b"v"),
                         metadata=[("authorization", f"Bearer {bad}")], timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, what
        session = Session(proto, secure.push_address, credentials=tls_credentials(secure),
                          hello=pb.Hello(authenticate=pb.Authenticate(mechanism="OAUTHBEARER",
                                                                      payload=bad.encode())))
        try:
            expect_go_away(session, pb)
        finally:
            session.close()
    channel.close()

    # The same token works as an OAUTHBEARER login in a hello.
    session = Session(proto, secure.push_address, credentials=tls_credentials(secure),
                      hello=pb.Hello(authenticate=pb.Authenticate(mechanism="OAUTHBEARER",
                                                                  payload=token.encode())))
    try:
        assert session.next().welcome.principal == f"User:{user}"
    finally:
        session.close()


def test_only_a_super_user_gets_a_token_for_someone_else(secure):
    user, password = new_user(secure, "carol")
    status, body = token_request(secure, user, password, user="admin")
    assert (status, body["error"]) == (403, "unauthorized_client")
    status, body = token_request(secure, "admin", ADMIN_PASSWORD, user=user)
    assert status == 200 and body["principal"] == f"User:{user}"


def test_plaintext_on_the_tls_port_fails_at_once_and_is_logged(secure, proto):
    pb = proto.pb
    started = time.monotonic()
    session = Session(proto, secure.push_address, hello=pb.Hello(client_name="plaintext"))
    try:
        with pytest.raises(Closed):
            session.next(timeout=10)
    finally:
        session.close()
    assert time.monotonic() - started < 5
    deadline = time.monotonic() + 5
    while "spoke plaintext on a TLS listener" not in secure.log_path.read_text():
        assert time.monotonic() < deadline, "the broker did not log the plaintext client"
        time.sleep(0.1)


def test_a_browser_reads_over_tls_with_its_token_and_a_forged_one_gets_nothing(secure, proto):
    from playwright.sync_api import sync_playwright

    from test_browser import CHROMIUM, PageServer, wait_until

    pb = proto.pb
    topic = f"web-{uuid.uuid4().hex[:6]}"
    create_topic(secure, topic, 2)
    user, _ = new_user(secure, "reader")
    allow(secure, f"User:{user}", ResourceType.TOPIC, topic, AclOperation.READ)
    # The web application's back end (a super user) asks for its signed-in
    # user's token and hands it to the page.
    status, body = token_request(secure, "admin", ADMIN_PASSWORD, user=user)
    assert status == 200, body
    token = body["access_token"]
    header, claims, signature = token.split(".")
    forged = f"{header}.{claims}.{signature[::-1]}"

    server = PageServer()
    with sync_playwright() as playwright:
        # The test CA is not in the browser's store: accept the broker's
        # certificate, as a browser with the CA installed would.
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--ignore-certificate-errors"])
        try:
            page = browser.new_page()
            page.goto(f"{server.url}?push={secure.push_address}&topic={topic}&tls=1&token={token}")
            wait_until(page, "window.ws.subscribed.length === 2 && window.sse.subscribed === 1",
                       what="both WebSocket subscriptions and the SSE stream")
            assert page.evaluate("window.ws.principal") == f"User:{user}"

            publisher, _ = scram_session(proto, secure, "admin", ADMIN_PASSWORD)
            keys = [b"web.a", b"web.exact", b"other.x"]
            for i in range(30):
                publisher.send(publish=pb.PublishRequest(
                    request_id=i, topic=topic, key=keys[i % 3], value=b"v%d" % i))
            publisher.wait_for(lambda s: len(s.of_kind("published")) == 30, what="30 publishes")
            publisher.close()
            # ws: web.exact on subscription 1, web.a and web.exact on 2.
            wait_until(page, "window.ws.received.length >= 30 && window.sse.received.length >= 20",
                       what="the deliveries in the browser")
            assert len(page.evaluate("window.sse.received")) == 20

            forged_page = browser.new_page()
            forged_page.goto(
                f"{server.url}?push={secure.push_address}&topic={topic}&tls=1&token={forged}")
            wait_until(forged_page, "window.ws.closed && window.sse.errors > 0",
                       what="the forged token's WebSocket closed and EventSource failed")
            assert forged_page.evaluate("window.ws.subscribed.length") == 0
            assert forged_page.evaluate("window.ws.principal") is None
            assert forged_page.evaluate("window.sse.opened") == 0
        finally:
            browser.close()
            server.shutdown()
