"""A WSGI middleware that rate-limits every request with libratelimit.

    app = RateLimitMiddleware(my_app, Limiter(rules="rules.json"))

Each request is checked (Limiter.check) with its path as the endpoint,
the X-Tier header as the tier, X-User and X-API-Key as those dimensions
and the client's address as ip (pass request_of to map them otherwise).
A denied request is answered 429 with the X-RateLimit-* headers,
Retry-After and the library's JSON body; an allowed one goes to the app,
and its response carries the X-RateLimit-* headers.  A check that fails
(StoreError: the store failed and the rule's failure mode did not
decide) is answered 503.

Run it (standard library only: wsgiref):
    /usr/bin/python3 wsgi_app.py [port] [rules.json]
"""
import sys

from ratelimit import Limiter, RateLimitError


def request_of(environ):
    """check() arguments for a WSGI environ."""
    return {
        "endpoint": environ.get("PATH_INFO") or "/",
        "tier": environ.get("HTTP_X_TIER"),
        "user": environ.get("HTTP_X_USER"),
        "api_key": environ.get("HTTP_X_API_KEY"),
        "ip": environ.get("REMOTE_ADDR"),
    }


class RateLimitMiddleware:
    def __init__(self, app, limiter, request_of=request_of, ietf=False):
        self.app = app
        self.limiter = limiter
        self.request_of = request_of
        self.ietf = ietf

    def __call__(self, environ, start_response):
        try:
            res = self.limiter.check(**self.request_of(environ))
        except RateLimitError as exc:
            body = b'{"error":"rate_limiter_unavailable"}'
            start_response("503 Service Unavailable", [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body)))])
            environ["wsgi.errors"].write(f"ratelimit: {exc}\n")
            return [body]
        headers = res.headers(ietf=self.ietf)
        if not res.allowed:
            body = res.body()
            start_response("429 Too Many Requests", headers + [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body)))])
            return [body]

        def start(status, app_headers, exc_info=None):
            return start_response(status, app_headers + headers, exc_info)
        return self.app(environ, start)


def hello_app(environ, start_response):
    body = b"hello\n"
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]


DEMO_RULES = {"version": 1, "rules": [
    {"rule_id": "per-ip", "dimension": "ip", "limit": 5,
     "window_seconds": 10, "algorithm": "fixed_window"}]}


def main(argv):
    from wsgiref.simple_server import make_server

    port = int(argv[1]) if len(argv) > 1 else 8080
    rules = argv[2] if len(argv) > 2 else DEMO_RULES
    with Limiter(rules=rules) as lim:
        app = RateLimitMiddleware(hello_app, lim)
        with make_server("127.0.0.1", port, app) as httpd:
            print(f"serving on http://127.0.0.1:{port}/", flush=True)
            httpd.serve_forever()


if __name__ == "__main__":
    main(sys.argv)
