"""A real browser (Debian's chromium, headless, driven by Playwright)
subscribes over WebSocket and over Server-Sent Events and receives what a
Kafka producer published to its subjects and patterns, and nothing else;
the EventSource resumes by itself from its Last-Event-ID after the broker
is SIGKILLed and restarted."""

import http.server
import shutil
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from kafka_side import create_topic, produce

PAGE = Path(__file__).with_name("browser_page.html").read_bytes()
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


class PageServer(http.server.ThreadingHTTPServer):
    """Serves the test page from its own origin."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, *_args):
            pass

    def __init__(self):
        super().__init__(("127.0.0.1", 0), self.Handler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/"


def wait_until(page, expression, timeout_s=30, what=None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if page.evaluate(expression):
            return
        time.sleep(0.1)
    state = page.evaluate("JSON.stringify({ws: {subscribed: window.ws.subscribed, received: window.ws.received.length, errors: window.ws.errors}, sse: {subscribed: window.sse.subscribed, received: window.sse.received.length, opened: window.sse.opened}})")
    raise AssertionError(f"timed out waiting for {what or expression}: {state}")


def in_order_per_key(received):
    per_key = defaultdict(list)
    for d in received:
        per_key[d["key"].encode()].append(d["value"].encode())
    return per_key


def expected_per_key(records, keep):
    per_key = defaultdict(list)
    for key, value in records:
        if key is not None and keep(key):
            per_key[key].append(value)
    return per_key


@pytest.fixture
def browser_page():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install-test-deps.sh (Debian's chromium)")
    server = PageServer()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield browser.new_page(), server.url
        finally:
            browser.close()
            server.shutdown()


def test_a_browser_receives_its_subjects_over_websocket_and_sse(herald, browser_page):
    page, url = browser_page
    create_topic(herald.bootstrap, "web", 2)
    page.goto(f"{url}?push={herald.push_address}&topic=web")
    wait_until(page, "window.ws.subscribed.length === 2 && window.sse.subscribed === 1",
               what="both WebSocket subscriptions and the SSE stream")
    keys = [b"web.a", b"web.b", b"web.exact", b"other.x", b"web.a.deeper", None]
    records = [(keys[i % len(keys)], b"v%d" % i) for i in range(300)]
    produce(herald.bootstrap, "web", records)
    pattern = lambda k: k in (b"web.a", b"web.b", b"web.exact")  # noqa: E731
    want_pattern = expected_per_key(records, pattern)
    want_exact = expected_per_key(records, lambda k: k == b"web.exact")
    total_ws = sum(map(len, want_pattern.values())) + sum(map(len, want_exact.values()))
    total_sse = sum(map(len, want_pattern.values()))
    wait_until(page, f"window.ws.received.length >= {total_ws} && window.sse.received.length >= {total_sse}",
               what="every delivery in the browser")
    time.sleep(1.0)  # anything more would be foreign
    ws = page.evaluate("window.ws.received")
    assert len(ws) == total_ws
    assert in_order_per_key([d for d in ws if d["sub"] == 1]) == want_exact
    assert in_order_per_key([d for d in ws if d["sub"] == 2]) == want_pattern
    sse = page.evaluate("window.sse.received")
    assert len(sse) == total_sse
    assert in_order_per_key(sse) == want_pattern

    # The broker dies and comes back; the EventSource reconnects by itself
    # with the id of the last event it got, and continues right after it.
    herald.kill()
    herald.start()
    more = [(keys[i % len(keys)], b"w%d" % i) for i in range(300)]
    produce(herald.bootstrap, "web", more)
    want_all = expected_per_key(records + more, pattern)
    total_all = sum(map(len, want_all.values()))
    wait_until(page, f"window.sse.received.length >= {total_all}", timeout_s=60,
               what="the SSE stream resumed after the restart")
    time.sleep(1.0)
    sse = page.evaluate("window.sse.received")
    assert page.evaluate("window.sse.opened") >= 2, "the EventSource never reconnected"
    assert len(sse) == total_all, "deliveries repeated or lost across the restart"
    assert in_order_per_key(sse) == want_all
