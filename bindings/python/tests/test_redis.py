"""The binding against a real redis-server (redis_server.py starts one on
a free loopback port and kills it at the end): one limit across
limiters and threads, the failure modes with the server stopped, store
errors, and the GIL released while a check waits for Redis."""
import ctypes
import os
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


# A check that waits for a stopped Redis waits this long: far past any
# scheduling delay of a loaded machine, so only a GIL held while it waits
# lets it time out (and then the test fails after WAIT_MS).
WAIT_MS = 20000
# The control's calls hold the GIL: each waits its whole timeout.
HELD_MS = 1000
TCP_LISTEN = "0A"  # /proc/net/tcp's state of a listener (its queue: accepts)


def _queued_at(port):
    """Bytes that reached the server's side of its connections on port and
    wait unread (the Recv-Q of Linux's /proc/net/tcp): the server is
    stopped, so a check's request that was sent sits there, even once the
    client gave up on it and closed."""
    total = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            local, _, state, queues = line.split()[1:5]
            if state != TCP_LISTEN and int(local.split(":")[1], 16) == port:
                total += int(queues.split(":")[1], 16)
    return total


def _released_once_sent(server, call):
    """Run call() while the server is stopped (SIGSTOP) and another Python
    thread waits until the call's request sits unread at the server, then
    lets the server go on (SIGCONT).  That thread can only run while the
    call waits if the call released the GIL; held, the call ends at its
    timeout first.  Returns call()'s result and whether the thread let the
    server go on (at once or after the call)."""
    sent, stop = threading.Event(), threading.Event()

    def release():
        while not stop.is_set():
            if _queued_at(server.port):
                server.cont()
                sent.set()
                return
            time.sleep(0.001)
    server.stop_process()
    t = threading.Thread(target=release)
    t.start()
    try:
        res = call()
        # held, the thread runs only now: let it see the request
        sent.wait(WAIT_MS / 1000)
    finally:
        stop.set()
        t.join()
        server.cont()
    return res, sent.is_set()


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"),
                    reason="no /proc/net/tcp (not Linux)")
def test_the_gil_is_released_while_a_check_waits(own_redis):
    failed = Flags.FAIL_OPEN | Flags.FAIL_CLOSED | Flags.FALLBACK
    rules = ruleset(rule("r", 100, failure_mode="open"))
    with Limiter(own_redis.uri, rules=rules, timeout_ms=WAIT_MS) as lim:
        assert lim.allow("user:1", "r").allowed  # connected
        res, sent = _released_once_sent(
            own_redis, lambda: lim.allow("user:1", "r"))
    # the other thread ran while the check waited, and Redis decided it
    assert sent and res.allowed and not res.flags & failed, res.flags
    # Control: the same call through ctypes.PyDLL, which holds the GIL:
    # the thread cannot run until the call has timed out into its failure
    # mode, though the request was sent (the thread sees it after).
    with Limiter(own_redis.uri, rules=rules, timeout_ms=HELD_MS) as lim:
        assert lim.allow("user:1", "r").allowed  # connected
        held = ctypes.PyDLL(_lib.lib()._name)
        _abi.declare(held)
        raw = _abi.sized(_abi.rl_result)
        rc, sent = _released_once_sent(
            own_redis, lambda: held.rl_allow(lim._handle, b"user:1", b"r",
                                             1, ctypes.byref(raw)))
    assert rc == 0 and sent and raw.flags & Flags.FAIL_OPEN, raw.flags
