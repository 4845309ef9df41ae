"""The WSGI and ASGI middleware examples for real: the WSGI one behind
wsgiref's server on a free loopback port, driven with urllib; the ASGI one
called directly with scope, receive and send, as a server would."""
import asyncio
import json
import threading
import urllib.error
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest

import asgi_app
import wsgi_app
from ratelimit import Limiter
from rlhelp import rule, ruleset

RULES = ruleset(rule("per-ip", 3, dimension="ip"),
                rule("per-user-search", 2, match={"endpoint": "/search"}))


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def wsgi_server():
    lim = Limiter(rules=RULES)
    app = wsgi_app.RateLimitMiddleware(wsgi_app.hello_app, lim)
    httpd = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()
    t.join()
    lim.close()


def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, dict(err.headers), err.read()


def test_wsgi_passes_then_answers_429(wsgi_server):
    got = [get(wsgi_server + "/") for _ in range(4)]
    for i, (status, headers, body) in enumerate(got[:3]):
        assert (status, body) == (200, b"hello\n")
        assert headers["X-RateLimit-Limit"] == "3"
        assert headers["X-RateLimit-Remaining"] == str(2 - i)
        assert "Retry-After" not in headers
    status, headers, body = got[3]
    assert status == 429
    assert headers["X-RateLimit-Remaining"] == "0"
    assert headers["Content-Type"] == "application/json"
    retry = int(headers["Retry-After"])
    assert 1 <= retry <= 60
    assert json.loads(body) == {"error": "rate_limited", "retryAfter": retry}


def test_wsgi_maps_the_user_header(wsgi_server):
    url = wsgi_server + "/search"
    assert get(url, {"X-User": "u1"})[0] == 200
    assert get(url, {"X-User": "u1"})[0] == 200
    status, headers, _ = get(url, {"X-User": "u1"})
    assert status == 429 and headers["X-RateLimit-Limit"] == "2"


def call_asgi(app, path="/", client=("198.51.100.7", 4242), headers=()):
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "method": "GET",
             "path": path, "headers": list(headers), "client": client}
    asyncio.run(app(scope, receive, send))
    start, body = sent
    assert start["type"] == "http.response.start"
    assert body["type"] == "http.response.body"
    return start["status"], dict(start["headers"]), body["body"]


@pytest.mark.parametrize("offload", [True, False])
def test_asgi_passes_then_answers_429(offload):
    with Limiter(rules=RULES) as lim:
        app = asgi_app.RateLimitASGI(asgi_app.hello_app, lim,
                                     offload=offload)
        got = [call_asgi(app) for _ in range(4)]
        for i, (status, headers, body) in enumerate(got[:3]):
            assert (status, body) == (200, b"hello\n")
            assert headers[b"content-type"] == b"text/plain"
            assert headers[b"x-ratelimit-remaining"] == str(2 - i).encode()
        status, headers, body = got[3]
        assert status == 429
        retry = int(headers[b"retry-after"])
        assert json.loads(body) == {"error": "rate_limited",
                                    "retryAfter": retry}
        # another client has its own count; a user header is mapped
        assert call_asgi(app, client=("198.51.100.8", 1))[0] == 200
        user = [(b"x-user", b"u9")]
        statuses = [call_asgi(app, "/search", ("203.0.113.%d" % i, 1),
                              user)[0] for i in range(3)]
        assert statuses == [200, 200, 429]


def test_asgi_lets_other_scopes_through():
    seen = []

    async def inner(scope, receive, send):
        seen.append(scope["type"])

    with Limiter(rules=RULES) as lim:
        app = asgi_app.RateLimitASGI(inner, lim)
        asyncio.run(app({"type": "lifespan"}, None, None))
        assert seen == ["lifespan"]
        assert lim.stats()["checks"] == 0
