"""The binding against a real redis-server (redis_server.py starts one on
a free loopback port and kills it at the end): one limit across
limiters and threads, the failure modes with the server stopped, store
errors, and the GIL released while a check waits for Redis."""
import ctypes
import threading
import time

import pytest

from ratelimit import ErrorCode, Flags, Limiter, StoreError, _abi, _lib
from rlhelp import on_threads, rule, ruleset
import redis_server

# Long enough that no check of a loaded machine times out into a failure
# mode: these tests count what Redis decided.
PATIENT = {"timeout_ms": 5000}


def test_two_limiters_share_one_limit(redis):
    rules = ruleset(rule("fleet", 20, failure_mode="closed"))
    with Limiter(redis.uri, rules=rules, **PATIENT) as a, \
            Limiter(redis.uri, rules=rules, **PATIENT) as b:
        results = [(a if i % 2 else b).allow("user:fleet", "fleet")
                   for i in range(50)]
        assert sum(r.allowed for r in results) == 20
        assert [r.allowed for r in results[:20]] == [True] * 20
        failed = Flags.FAIL_OPEN | Flags.FAIL_CLOSED | Flags.FALLBACK
        assert not any(r.flags & failed for r in results)
        # each limiter answers a client Redis denied from its deny cache
        assert Flags.CACHED in results[-1].flags
        assert results[19].remaining == 0 and results[20].retry_after >= 1


def test_threads_on_redis_admit_exactly_the_limit(redis):
    threads, calls, limit = 8, 50, 100
    allowed = [0] * threads
    rules = ruleset(rule("hot", limit, failure_mode="closed"))
    with Limiter(redis.uri, rules=rules, **PATIENT) as lim:
        def worker(i):
            for _ in range(calls):
                if lim.check(endpoint="/x", user="hot"):
                    allowed[i] += 1
        on_threads(threads, worker)
        st = lim.stats()
    assert sum(allowed) == limit
    assert st["fail_closed"] == st["fail_open"] == st["fallback"] == 0
    assert st["checks"] == threads * calls


def test_named_dimensions_on_redis(redis):
    rules = ruleset(rule("per-tenant", 2, dimension="tenant",
                         failure_mode="closed"))
    with Limiter(redis.uri, rules=rules, **PATIENT) as lim:
        got = [lim.check(endpoint="/a", dimensions={"tenant": "t1"}).allowed
               for _ in range(3)]
        assert got == [True, True, False]
        assert lim.check(endpoint="/a", dimensions={"tenant": "t2"})


def test_no_server_is_a_store_error_without_the_password():
    port = redis_server.free_port()
    with pytest.raises(StoreError) as e:
        Limiter(f"redis://:s3cret-pw@127.0.0.1:{port}",
                connect_timeout_ms=300)
    assert e.value.code == ErrorCode.RL_ESTORE
    assert f"127.0.0.1:{port}" in e.value.message
    assert "s3cret-pw" not in e.value.message


def test_failure_modes_with_the_server_stopped(own_redis):
    rules = ruleset(rule("open", 5, failure_mode="open"),
                    rule("closed", 5, failure_mode="closed"))
    with Limiter(own_redis.uri, rules=rules, timeout_ms=200) as lim:
        assert lim.allow("user:1", "closed").allowed  # connected
        own_redis.stop_process()
        try:
            opened = lim.allow("user:1", "open")
            closed = lim.allow("user:1", "closed")
        finally:
            own_redis.cont()
    assert opened.allowed and Flags.FAIL_OPEN in opened.flags
    assert not closed.allowed and Flags.FAIL_CLOSED in closed.flags
    assert closed.retry_after >= 1 and dict(closed.headers())["Retry-After"]


def _count_during(call):
    """Run call() while another Python thread counts; return the call's
    result, its start and end (monotonic) and the counter's clock
    readings."""
    ticks = []
    stop = threading.Event()

    def count():
        n = 0
        while not stop.is_set():
            n += 1
            if n % 1000 == 0:
                ticks.append(time.monotonic())
    t = threading.Thread(target=count)
    t.start()
    try:
        while not ticks:  # the counter runs
            time.sleep(0.001)
        t0 = time.monotonic()
        res = call()
        t1 = time.monotonic()
    finally:
        stop.set()
        t.join()
    return res, t0, t1, ticks


def test_the_gil_is_released_while_a_check_waits(own_redis):
    rules = ruleset(rule("r", 100, failure_mode="open"))
    with Limiter(own_redis.uri, rules=rules, timeout_ms=500) as lim:
        assert lim.allow("user:1", "r").allowed  # connected
        own_redis.stop_process()
        try:
            res, t0, t1, ticks = _count_during(
                lambda: lim.allow("user:1", "r"))
            # Control: the same call through ctypes.PyDLL, which holds
            # the GIL, shows what a held GIL would look like.
            held = ctypes.PyDLL(_lib.lib()._name)
            _abi.declare(held)
            raw = _abi.sized(_abi.rl_result)
            rc, c0, c1, cticks = _count_during(
                lambda: held.rl_allow(lim._handle, b"user:1", b"r", 1,
                                      ctypes.byref(raw)))
        finally:
            own_redis.cont()
    # the call waited for its timeout and decided by failure mode ...
    assert res.allowed and Flags.FAIL_OPEN in res.flags
    assert t1 - t0 >= 0.45
    # ... while the other thread went on counting, well inside the call
    inside = [x for x in ticks if t0 + 0.1 <= x <= t1 - 0.1]
    assert len(inside) >= 5, (len(ticks), t1 - t0)
    # with the GIL held the counter stood still for the whole call
    assert rc == 0 and raw.flags & Flags.FAIL_OPEN and c1 - c0 >= 0.45
    assert [x for x in cticks if c0 + 0.2 <= x <= c1 - 0.05] == []

