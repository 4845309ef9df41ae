"""An ASGI middleware that rate-limits every HTTP request with
libratelimit: a plain ASGI 3 callable, no framework.

    app = RateLimitASGI(my_asgi_app, Limiter(store="redis://...", ...))

The request is mapped as in wsgi_app.py (path, X-Tier, X-User, X-API-Key,
the client's address).  A denied request is answered 429 with the
X-RateLimit-* headers, Retry-After and the JSON body; an allowed one goes
to the app, whose http.response.start gets the X-RateLimit-* headers.
Other scopes (lifespan, websocket) pass through unchecked.

A check against Redis waits up to the limiter's timeout_ms, so by
default it runs in a worker thread (asyncio.to_thread): the library
releases the GIL while it waits and the event loop goes on.  With
offload=False (a memory:// store, whose checks take microseconds) it
runs inline.
"""
import asyncio

from ratelimit import RateLimitError


def _header(scope, name):
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def request_of(scope):
    """check() arguments for an ASGI http scope."""
    client = scope.get("client")
    return {
        "endpoint": scope.get("path") or "/",
        "tier": _header(scope, b"x-tier"),
        "user": _header(scope, b"x-user"),
        "api_key": _header(scope, b"x-api-key"),
        "ip": client[0] if client else None,
    }


def _encode(headers):
    return [(n.lower().encode("latin-1"), v.encode("latin-1"))
            for n, v in headers]


class RateLimitASGI:
    def __init__(self, app, limiter, request_of=request_of, offload=True,
                 ietf=False):
        self.app = app
        self.limiter = limiter
        self.request_of = request_of
        self.offload = offload
        self.ietf = ietf

    async def _check(self, scope):
        args = self.request_of(scope)
        if self.offload:
            return await asyncio.to_thread(self.limiter.check, **args)
        return self.limiter.check(**args)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        try:
            res = await self._check(scope)
        except RateLimitError:
            return await _respond(send, 503, [],
                                  b'{"error":"rate_limiter_unavailable"}')
        headers = _encode(res.headers(ietf=self.ietf))
        if not res.allowed:
            return await _respond(send, 429, headers, res.body())

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers", ())) + \
                    headers
            await send(message)
        return await self.app(scope, receive, send_with_headers)


async def _respond(send, status, headers, body):
    await send({"type": "http.response.start", "status": status,
                "headers": headers + [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def hello_app(scope, receive, send):
    """A tiny ASGI app to put behind the middleware."""
    body = b"hello\n"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
