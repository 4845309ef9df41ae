"""nginx_module.py -- ngx_http_ratelimit_module in the real nginx, driven by
curl and wrk, against a real redis-server (tests/nginx_harness.py).

    python3 tests/nginx_module.py MODULE.so

  - two nginx instances on one Redis enforce one fleet-wide limit: 60
    requests alternating between them, exactly 20 admitted; then two wrk
    runs at once, one on each, exactly the limit of 50 admitted;
  - every response carries X-RateLimit-*; a rejection has Retry-After and
    the library's JSON body; the IETF pair on request; ratelimit_status;
    ratelimit_headers denied (the rejection's only) and off (Retry-After
    alone, on a limit's 429 and on a fail-closed 503);
  - the default store, shm://nginx-ratelimit: 2 workers share one limit,
    the master removes the region when it exits; the memory store (its
    answers come at once, in the handler: under wrk the workers make no
    read(2) and about one write(2) a request, /proc/PID/io);
  - Redis stopped (SIGSTOP): an `open` rule admits, a `closed` one
    answers 503 (ratelimit_unavailable_status; not the 429 of a limit)
    with Retry-After 1 and a line in error.log (rate-limited), a
    `fallback` one decides locally (its limit of 5); ratelimit_metrics
    serves the worker's Prometheus text (the store up, down, up again,
    the fail-closed answers counted); a client that goes away while its check waits leaves
    the worker serving;
  - `nginx -t` refuses bad directives with the library's messages.

Prints PASS/FAIL lines; exit 0 when all passed, 1 otherwise.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nginx_harness import (Checks, Nginx, Redis, curl, setup_test,  # noqa: E402
                           wait_for)

RULES = {"version": 1, "rules": [
    {"rule_id": "fleet", "dimension": "user", "match": {"endpoint": "/fleet"},
     "limit": 20, "window_seconds": 86400, "algorithm": "token_bucket"},
    {"rule_id": "wrk", "dimension": "user", "match": {"endpoint": "/wrk"},
     "limit": 50, "window_seconds": 86400, "algorithm": "token_bucket"},
    {"rule_id": "ietf", "dimension": "api_key", "match": {"endpoint": "/ietf"},
     "limit": 2, "window_seconds": 86400, "algorithm": "token_bucket"},
    {"rule_id": "open", "dimension": "user", "match": {"endpoint": "/open"},
     "limit": 3, "window_seconds": 86400, "algorithm": "token_bucket",
     "failure_mode": "open"},
    {"rule_id": "closed", "dimension": "user",
     "match": {"endpoint": "/closed"}, "limit": 3, "window_seconds": 86400,
     "algorithm": "token_bucket", "failure_mode": "closed"},
    {"rule_id": "fallback", "dimension": "user",
     "match": {"endpoint": "/fallback"}, "limit": 5, "window_seconds": 86400,
     "algorithm": "token_bucket", "failure_mode": "fallback"},
    # issue 25 s3: a per-value override and an allow-list, as rule JSON
    {"rule_id": "values", "dimension": "api_key",
     "match": {"endpoint": "/values"}, "limit": 2, "window_seconds": 86400},
    {"rule_id": "values-partner", "dimension": "api_key",
     "match": {"endpoint": "/values", "value": "partner-*"}, "limit": 4,
     "window_seconds": 86400},
    {"rule_id": "values-vip", "dimension": "api_key",
     "match": {"endpoint": "/values", "value": ["vip-1", "vip-2"]},
     "unlimited": True},
]}

SERVER = """
        location / {
            ratelimit on;
            ratelimit_dimension user $arg_user;
            ratelimit_dimension api_key $http_x_api_key;
            return 200 "ok\\n";
        }
        location /ietf {
            ratelimit on;
            ratelimit_dimension api_key $http_x_api_key;
            ratelimit_ietf_headers on;
            ratelimit_status 503;
            return 200 "ok\\n";
        }
        location /hdr-denied {
            ratelimit on;
            ratelimit_dimension api_key $http_x_api_key;
            ratelimit_endpoint /ietf;
            ratelimit_ietf_headers on;
            ratelimit_headers denied;
            return 200 "ok\\n";
        }
        location /hdr-off {
            ratelimit on;
            ratelimit_dimension api_key $http_x_api_key;
            ratelimit_endpoint /ietf;
            ratelimit_ietf_headers on;
            ratelimit_headers off;
            return 200 "ok\\n";
        }
        location /free { return 200 "free\\n"; }
"""

check = Checks()


def has_trio(h):
    return all(f"x-ratelimit-{n}" in h for n in ("limit", "remaining", "reset"))


def test_fleet(a, b):
    codes, trio = [], True
    for i in range(60):
        st, h, body = curl((a if i % 2 == 0 else b).url("/fleet?user=u1"))
        codes.append(st)
        trio = trio and has_trio(h)
        if st == 429:
            last429 = (h, body)
    check(codes.count(200) == 20 and codes.count(429) == 40,
          f"two instances, one Redis: 20 of 60 admitted "
          f"(got {codes.count(200)} 200s, {codes.count(429)} 429s)")
    check(codes[:20] == [200] * 20, "the first 20 admitted, then rejected")
    check(trio, "every response carries X-RateLimit-Limit/-Remaining/-Reset")
    h, body = last429
    check(h.get("x-ratelimit-limit") == "20" and
          h.get("x-ratelimit-remaining") == "0", "429: Limit 20, Remaining 0")
    check(h.get("retry-after", "").isdigit() and int(h["retry-after"]) >= 1,
          f"429 carries Retry-After ({h.get('retry-after')})")
    check(h.get("content-type") == "application/json", "429 is JSON")
    try:
        doc = json.loads(body)
    except ValueError:
        doc = {}
    check(doc.get("error") == "rate_limited" and
          doc.get("retryAfter") == int(h.get("retry-after", "-1")),
          f"429 body is rl_body_format's ({body!r})")


def wrk_admitted(url, out):
    p = subprocess.run(["wrk", "-t1", "-c4", "-d2s", url],
                       capture_output=True, text=True)
    total = re.search(r"(\d+) requests in", p.stdout)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", p.stdout)
    out.append(int(total.group(1)) - (int(non2xx.group(1)) if non2xx else 0)
               if total else -1)


def test_wrk(a, b):
    got = []
    runs = [threading.Thread(target=wrk_admitted, args=(n.url(
        "/wrk?user=w"), got)) for n in (a, b)]
    for t in runs:
        t.start()
    for t in runs:
        t.join()
    check(len(got) == 2 and -1 not in got and sum(got) == 50,
          f"wrk on both instances at once: exactly 50 admitted ({got})")


def test_ietf_and_status(a):
    key = ["-H", "X-Api-Key: k1"]
    got = [curl(a.url("/ietf"), extra=key) for _ in range(3)]
    codes = [g[0] for g in got]
    st, h, _ = curl(a.url("/ietf"), extra=key)
    check(codes == [200, 200, 503] and st == 503,
          f"ratelimit_status 503 answers the rejection ({codes + [st]})")
    # Each header under its own name (the module names them by their
    # place in rl_headers(3)'s order): the values tell them apart.
    ok = got[0][1]
    check(ok.get("x-ratelimit-limit") == "2" and
          ok.get("x-ratelimit-remaining") == "1" and
          ok.get("x-ratelimit-reset", "").isdigit() and
          "retry-after" not in ok and
          ok.get("ratelimit-policy") == '"ietf";q=2;w=86400' and
          ok.get("ratelimit", "").startswith('"ietf";r=1;t='),
          f"admitted, with the IETF pair: each header its name ({ok})")
    check("ratelimit-policy" in h and "ratelimit" in h and has_trio(h) and
          h.get("retry-after", "").isdigit() and
          h.get("ratelimit-policy") == '"ietf";q=2;w=86400' and
          h.get("ratelimit", "").startswith('"ietf";r=0;t='),
          "ratelimit_ietf_headers on: RateLimit-Policy and RateLimit too, "
          f"Retry-After in its place ({h})")
    st, h, _ = curl(a.url("/free"))
    check(st == 200 and "x-ratelimit-limit" not in h,
          "a location without ratelimit: no headers")
    st, h, _ = curl(a.url("/norule"))
    check(st == 200 and "x-ratelimit-limit" not in h,
          "no rule matched: admitted, no headers")


RL_HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining",
              "x-ratelimit-reset", "ratelimit-policy", "ratelimit")


def test_headers_modes(a):
    """ratelimit_headers denied: the headers on the rejection only; off:
    a rejection's Retry-After alone.  The 429, its body and its
    Retry-After stay in both."""
    for mode in ("denied", "off"):
        key = ["-H", f"X-Api-Key: hdr-{mode}"]
        got = [curl(a.url(f"/hdr-{mode}"), extra=key) for _ in range(3)]
        codes = [g[0] for g in got]
        check(codes == [200, 200, 429], f"ratelimit_headers {mode}: the "
              f"limit of 2 holds ({codes})")
        bare = [n for g in got[:2] for n in RL_HEADERS + ("retry-after",)
                if n in g[1]]
        check(not bare, f"ratelimit_headers {mode}: admitted responses "
              f"carry none ({bare})")
        h, body = got[2][1], got[2][2]
        ra = h.get("retry-after", "")
        check(ra.isdigit() and int(ra) >= 1 and
              json.loads(body or "{}").get("retryAfter") == int(ra),
              f"ratelimit_headers {mode}: the 429 keeps Retry-After ({ra}) "
              f"and its body ({body!r})")
        want = set(RL_HEADERS) if mode == "denied" else set()
        check({n for n in RL_HEADERS if n in h} == want,
              f"ratelimit_headers {mode}: the 429's other headers are "
              f"{sorted(want)} ({sorted(n for n in RL_HEADERS if n in h)})")


SHM_DEFAULT = "/dev/shm/nginx-ratelimit"  # the module's default store


def worker_io(n):
    """read(2)-family and write(2)-family calls the workers of n made so
    far (/proc/PID/io's syscr, syscw: recv and accept are neither)."""
    with open(f"/proc/{n.proc.pid}/task/{n.proc.pid}/children") as f:
        pids = f.read().split()
    total = [0, 0]
    for pid in pids:
        with open(f"/proc/{pid}/io") as f:
            io = dict(line.split(": ") for line in f.read().splitlines())
        total[0] += int(io["syscr"])
        total[1] += int(io["syscw"])
    return total


def check_no_wakeup(n, what):
    """A check decided at once (RL_ASYNC_NOW) is taken in the handler: no
    eventfd write and read a request, so the workers read nothing and
    write about one response a request (the queued path: a read and two
    writes a request)."""
    before = worker_io(n)
    p = subprocess.run(["wrk", "-t1", "-c2", "-d1s", n.url("/fleet?user=io")],
                       capture_output=True, text=True)
    after = worker_io(n)
    reqs = int(re.search(r"(\d+) requests in", p.stdout).group(1))
    reads, writes = after[0] - before[0], after[1] - before[1]
    check(reqs >= 100 and reads < reqs / 20 and writes < reqs * 1.2,
          f"{what}: decided in the handler, no descriptor wake-up "
          f"({reqs} requests, {reads} reads, {writes} writes)")


def test_default_shm(module, rules):
    """No ratelimit_store: the workers share one shm:// region, made by a
    worker, removed by the master when it exits."""
    if os.path.exists(SHM_DEFAULT):
        os.unlink(SHM_DEFAULT)
    n = Nginx(module, http=f"ratelimit_rules {rules};", server=SERVER,
              workers=2).start()
    try:
        codes = [curl(n.url("/fleet?user=s"))[0] for _ in range(25)]
        check(codes.count(200) == 20 and codes[20:] == [429] * 5,
              f"default shm://nginx-ratelimit, 2 workers: 20 of 25 ({codes})")
        check(os.path.exists(SHM_DEFAULT), "the region exists while it runs")
        check_no_wakeup(n, "shm://, 2 workers")
    finally:
        n.stop()
    check(not os.path.exists(SHM_DEFAULT), "the master removed the region")


# Dimension values that are not one variable alone: a regex capture and
# a composite value go through the complex value's script; a lone
# variable is read by its index (ngx_http_ratelimit_dim_value).
VALUES_SERVER = SERVER + """
        location ~ ^/cap/(\\w+)$ {
            ratelimit on;
            ratelimit_dimension user $1;
            ratelimit_endpoint /fleet;
            return 200 "ok\\n";
        }
        location /composite {
            ratelimit on;
            ratelimit_dimension user "c-$arg_user";
            ratelimit_endpoint /fleet;
            return 200 "ok\\n";
        }
"""


def test_dimension_values(n):
    """A capture, a composite value and a lone variable name one key."""
    for via in ("/cap/k", "/composite?user=k"):
        key = "k" if via.startswith("/cap") else "c-k"
        codes = [curl(n.url(via if i % 2 else f"/fleet?user={key}"))[0]
                 for i in range(21)]
        check(codes == [200] * 20 + [429],
              f"{via} and /fleet?user={key} share one key: 20 of 21 "
              f"({codes})")


def test_memory(module, rules):
    n = Nginx(module, http=f"ratelimit_store memory://;\n"
              f"    ratelimit_rules {rules};", server=VALUES_SERVER).start()
    try:
        test_dimension_values(n)
        codes = [curl(n.url("/fleet?user=m"))[0] for _ in range(25)]
        check(codes.count(200) == 20 and codes[20:] == [429] * 5,
              f"memory:// (answers at once): 20 of 25 ({codes})")
        per_key = {k: [curl(n.url("/values"), extra=["-H", f"X-Api-Key: {k}"])[0]
                       for _ in range(6)] for k in ("a", "partner-b", "vip-1")}
        check(per_key == {"a": [200] * 2 + [429] * 4,
                          "partner-b": [200] * 4 + [429] * 2,
                          "vip-1": [200] * 6},
              f"per-value rules: 2, a partner 4, the allow-list all ({per_key})")
        check_no_wakeup(n, "memory://")
    finally:
        n.stop()


OUTAGE_SERVER = SERVER + """
        location /closed-as-429 {
            ratelimit on;
            ratelimit_dimension user $arg_user;
            ratelimit_endpoint /closed;
            ratelimit_unavailable_status 429;
            return 200 "ok\\n";
        }
        location /closed-off {
            ratelimit on;
            ratelimit_dimension user $arg_user;
            ratelimit_endpoint /closed;
            ratelimit_headers off;
            return 200 "ok\\n";
        }
        location = /metrics { ratelimit_metrics; }
"""


def fail_closed(text):
    """The closed rule's fail-closed answers in a /metrics text."""
    m = re.search(r'^ratelimit_rule_fail_closed_total\{rule="closed"\} '
                  r'(\d+)$', text, re.M)
    return int(m.group(1)) if m else 0


def test_outage(module, rules, redis):
    # One worker: the fallback's local limit is each worker's own (fleet
    # size 1: the other instances on this Redis count in "auto", the
    # default), and /metrics shows the limiter that served the checks.
    a = Nginx(module, server=OUTAGE_SERVER, http=f"""
    ratelimit_store {redis.uri};
    ratelimit_rules {rules};
    ratelimit_option fleet_size 1;
    ratelimit_option timeout_ms 100;""").start()
    try:
        for path in ("/open", "/closed", "/fallback"):
            curl(a.url(path + "?user=warm"))
        up = f'ratelimit_store_up{{shard="127.0.0.1:{redis.port}"}} 1'
        st, h, text = curl(a.url("/metrics"))
        check(st == 200 and up in text and
              h.get("content-type", "").startswith("text/plain; version=0.0.4"),
              "ratelimit_metrics: the worker's Prometheus text, store up")
        # The warm-up may itself have failed closed (a connection not up
        # yet): the outage's answers are counted from here.
        before = fail_closed(text)
        outage(a, redis)
        # The breaker's probe is a check: traffic (of a fail-open rule,
        # so the fail-closed count stays) brings the store back.
        check(wait_for(lambda: curl(a.url("/open?user=p"))[0] == 200 and
                       up in curl(a.url("/metrics"))[2]),
              "ratelimit_metrics: the store up again after the outage")
        n = fail_closed(curl(a.url("/metrics"))[2]) - before
        check(n == 6, f"ratelimit_metrics: the 6 fail-closed answers "
              f"counted ({n})")
        st, _, _ = curl(a.url("/metrics"), extra=["-X", "POST"])
        check(st == 405, f"ratelimit_metrics: POST is refused ({st})")
    finally:
        a.stop()


def outage(a, redis):
    redis.signal(signal.SIGSTOP)
    try:
        opened = [curl(a.url("/open?user=o")) for _ in range(6)]
        closed = [curl(a.url("/closed?user=c"))[:2] for _ in range(3)]
        as429 = [curl(a.url("/closed-as-429?user=c"))[0] for _ in range(2)]
        off = curl(a.url("/closed-off?user=c"))[:2]
        fb = [curl(a.url("/fallback?user=f"))[0] for _ in range(8)]
    finally:
        redis.signal(signal.SIGCONT)
    check(all(r[0] == 200 and has_trio(r[1]) for r in opened),
          "Redis stopped: open rule admits all 6 (limit 3), with headers")
    check(all(s == 503 and h.get("retry-after") == "1" for s, h in closed),
          "Redis stopped: closed rule answers 503 (the store away, not a "
          f"limit), Retry-After 1 ({[c[0] for c in closed]})")
    check(as429 == [429, 429],
          f"ratelimit_unavailable_status 429 is obeyed ({as429})")
    check(off[0] == 503 and off[1].get("retry-after") == "1" and
          not has_trio(off[1]), "Redis stopped, ratelimit_headers off: 503 "
          f"with Retry-After 1 alone ({off[0]}, {off[1]})")
    lines = [ln for ln in a.log().splitlines()
             if "the store is unavailable" in ln]
    check(len(lines) >= 1 and 'rule "closed" fails closed' in lines[0]
          and len(lines) <= 2,
          f"error.log tells the outage, rate-limited ({len(lines)} lines "
          "for 6 answers)")
    check(fb == [200] * 5 + [429] * 3,
          f"Redis stopped: fallback rule decides locally, 5 of 8 ({fb})")


def test_abort(module, rules, redis):
    # Each step waits for what it needs, not for a time: the first check
    # waits for Redis until it resumes, which is what keeps the worker's
    # only slot taken.  Its deadline lies far beyond the test, and so does
    # the time after which its connection counts as stuck and is replaced
    # (connect_timeout_ms, else 1 s: then every check would fail at once).
    n = Nginx(module, server=SERVER, http=f"""
    ratelimit_store {redis.uri};
    ratelimit_rules {rules};
    ratelimit_option timeout_ms 60000;
    ratelimit_option connect_timeout_ms 60000;
    ratelimit_max_in_flight 1;""").start()
    client = None
    try:
        # Up, and its checks decided by Redis (remaining 2 of the bucket's
        # 3), not admitted by the rule's failure mode (remaining 3): a
        # check answered at once would leave nothing in flight below.
        tries = []
        up = wait_for(lambda: tries.append(curl(n.url(
            f"/open?user=up{len(tries)}"))) or
            tries[-1][1].get("x-ratelimit-remaining") == "2")
        last = (tries[-1][0], tries[-1][1].get("x-ratelimit-remaining"))
        check(up, "abort: server up, Redis deciding" +
              ("" if up else f" ({last}; log: {n.log()[-600:]!r})"))
        redis.signal(signal.SIGSTOP)
        client = socket.create_connection(("127.0.0.1", n.port))
        client.sendall(b"GET /open?user=ab HTTP/1.1\r\nHost: t\r\n\r\n")
        # Its check is in flight once Redis has it waiting, unread.
        in_flight = wait_for(lambda: redis.unread_bytes() > 0)
        busy = curl(n.url("/open?user=ab3"))[0]
        check(in_flight and busy == 503 and "1 checks in flight" in n.log(),
              f"beyond ratelimit_max_in_flight: 503, logged ({busy}" +
              ("" if in_flight and busy == 503
               else f"; in flight {in_flight}; log: {n.log()[-600:]!r}") + ")")
        client.close()  # the client goes away while its check waits
        client = None
        gone = wait_for(
            lambda: "client prematurely closed connection" in n.log())
        check(gone, "a client gone while its check waits: request ended")
        redis.signal(signal.SIGCONT)
        # The check completes for a request gone, and frees the slot.
        codes = []
        wait_for(lambda: codes.append(curl(n.url("/open?user=ab2"))[0]) or
                 codes[-1] != 503)
        log = n.log()
        check(codes[-1] == 200 and "exited on signal" not in log and
              "[alert]" not in log, f"the worker goes on serving ({codes})")
    finally:
        if client:
            client.close()
        redis.signal(signal.SIGCONT)
        n.stop()


BAD = [
    ("ratelimit_status 200;", "", "value must be between 400 and 599"),
    ("ratelimit_store foo://x;", "", 'store "foo://x": unknown scheme'),
    ("ratelimit_rules /nonexistent/rules.json;", "",
     "/nonexistent/rules.json"),
    ("ratelimit_rules {badjson};", "", "rules"),
    ("ratelimit_option no_such_option 1;", "", "no_such_option"),
    ("ratelimit_option timeout_ms 0;", "", "timeout_ms"),
    ("ratelimit_option store memory://;", "", "has its own directive"),
    ("", "location /x { ratelimit_dimension Bad $arg_x; }",
     'bad dimension name "Bad"'),
    ("", "location /x { ratelimit_cost -3; }", 'bad cost "-3"'),
    ("", "location /x { ratelimit_headers some; }", 'invalid value "some"'),
]


def test_bad_directives(module, tmp):
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write('{"rules": [{"rule_id": "x", "limit": 1}]}')
    for http, server, want in BAD:
        http = http.replace("{badjson}", bad)
        n = Nginx(module, http=http, server=server)
        rc, out = n.test()
        n.stop()
        check(rc != 0 and want in out,
              f"nginx -t refuses `{http or server}`: "
              f"{out.strip().splitlines()[0] if out.strip() else ''}")
    n = Nginx(module, http="ratelimit_store redis://127.0.0.1:1;",
              server=SERVER)
    rc, out = n.test()
    n.stop()
    check(rc == 0, "nginx -t accepts a Redis store that is down now")


def main():
    module, tmp, rules = setup_test("rl-nginx-test-", RULES)
    test_bad_directives(module, tmp)
    test_default_shm(module, rules)
    test_memory(module, rules)
    redis = Redis(tmp)
    # The counts must be Redis's alone: a check waits up to 5 s for Redis
    # (half curl's 10; the default 50 ms would hand some to the local
    # fallback on a loaded machine), and a worker connects before it
    # serves (degraded_start 0, the connection given 5 s): with the
    # module's degraded_start 1 a worker serves at once and its first
    # checks follow the failure mode until its connection is up (seen
    # once at load 9: 21 of 60 admitted).  test_outage covers a store
    # away at start.
    http = (f"ratelimit_store {redis.uri};\n    ratelimit_rules {rules};\n"
            "    ratelimit_option timeout_ms 5000;\n"
            "    ratelimit_option connect_timeout_ms 5000;\n"
            "    ratelimit_option degraded_start 0;")
    a = b = None
    try:
        a = Nginx(module, http=http, server=SERVER, workers=2).start()
        b = Nginx(module, http=http, server=SERVER, workers=2).start()
        test_fleet(a, b)
        test_wrk(a, b)
        test_ietf_and_status(a)
        test_headers_modes(a)
        test_outage(module, rules, redis)
        test_abort(module, rules, redis)
    finally:
        for n in (a, b):
            if n:
                n.stop()
        redis.stop()
        subprocess.run(["rm", "-rf", tmp])
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
