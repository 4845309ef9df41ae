"""ShouldRateLimit's request and response: limits counted exactly, the
statuses in order, hits_addend (request and per descriptor), limit
overrides, the headers, and every bad input refused with INVALID_ARGUMENT
and nothing counted."""
import re

import grpc
import pytest

from rls_client import OK, OVER, desc, request

CONFIG = """
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: /login
    rate_limit: {unit: hour, requests_per_unit: 2, name: login}
"""


@pytest.fixture
def svc(config_dir, shm_store, services):
    (config_dir / "edge.yaml").write_text(CONFIG)
    return services(config_dir, [shm_store])


def ip(addr, **kw):
    return desc(("remote_address", addr), **kw)


def test_limit_counted_exactly_then_over(svc):
    for left in (2, 1, 0):
        r = svc.call(request("edge", ip("10.0.0.1")))
        assert r.overall_code == OK
        st = r.statuses[0]
        assert st.code == OK and st.limit_remaining == left
        assert st.current_limit.requests_per_unit == 3
        assert st.current_limit.unit == st.current_limit.MINUTE
        assert 0 < st.duration_until_reset.seconds <= 60
    r = svc.call(request("edge", ip("10.0.0.1")))
    assert r.overall_code == OVER and r.statuses[0].code == OVER
    headers = {h.key: h.value for h in r.response_headers_to_add}
    assert headers["X-RateLimit-Limit"] == "3"
    assert headers["X-RateLimit-Remaining"] == "0"
    assert int(headers["Retry-After"]) >= 1
    # another client has its own counter
    assert svc.call(request("edge", ip("10.0.0.2"))).overall_code == OK


def test_statuses_in_order_and_unmatched_ok(svc):
    r = svc.call(request("edge", desc(("nothing", "here")),
                         desc(("path", "/login")), ip("10.1.1.1")))
    assert [s.code for s in r.statuses] == [OK, OK, OK]
    assert not r.statuses[0].HasField("current_limit")
    assert r.statuses[1].current_limit.name == "login"
    assert r.statuses[1].limit_remaining == 1
    assert r.statuses[2].limit_remaining == 2


def test_unknown_domain_is_ok_without_limit(svc):
    r = svc.call(request("nowhere", ip("10.0.0.1")))
    assert r.overall_code == OK
    assert not r.statuses[0].HasField("current_limit")
    assert not r.response_headers_to_add


def test_request_hits_addend_zero_is_one(svc):
    r = svc.call(request("edge", ip("10.2.0.1"), hits=0))
    assert r.statuses[0].limit_remaining == 2
    r = svc.call(request("edge", ip("10.2.0.1"), hits=2))
    assert r.statuses[0].limit_remaining == 0
    assert svc.call(request("edge", ip("10.2.0.1"))).overall_code == OVER


def test_descriptor_hits_addend_wins_and_zero_looks(svc):
    r = svc.call(request("edge", ip("10.3.0.1", hits=0), hits=3))
    assert r.statuses[0].limit_remaining == 3  # looked, nothing counted
    r = svc.call(request("edge", ip("10.3.0.1", hits=2), hits=1))
    assert r.statuses[0].limit_remaining == 1
    r = svc.call(request("edge", ip("10.3.0.1", hits=2)))
    assert r.overall_code == OVER


def test_limit_override(svc):
    minute = 2  # RateLimitUnit.MINUTE
    for left in (4, 3, 2, 1, 0):
        r = svc.call(request("edge", ip("10.4.0.1", limit=(5, minute))))
        st = r.statuses[0]
        assert st.code == OK and st.limit_remaining == left
        assert st.current_limit.requests_per_unit == 5
    r = svc.call(request("edge", ip("10.4.0.1", limit=(5, minute))))
    assert r.overall_code == OVER
    # the configured limit is a counter of its own
    r = svc.call(request("edge", ip("10.4.0.1")))
    assert r.statuses[0].limit_remaining == 2
    # zero per unit: over at once, nothing to count
    r = svc.call(request("edge", ip("10.4.0.9", limit=(0, minute))))
    assert r.overall_code == OVER


def test_override_year_refused(svc):
    with pytest.raises(grpc.RpcError) as e:
        svc.call(request("edge", ip("10.4.1.1", limit=(5, 6))))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def invalid(svc, req):
    with pytest.raises(grpc.RpcError) as e:
        svc.call(req)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details()
    return e.value.details()


BAD = {
    "no descriptors": lambda: request("edge"),
    "empty domain": lambda: request("", ip("10.9.0.1")),
    "no entries": lambda: request("edge", ip("10.9.0.1"), desc()),
    "empty key": lambda: request("edge", ip("10.9.0.1"), desc(("", "v"))),
    "10k descriptors": lambda: request(
        "edge", *[ip("10.9.0.1") for _ in range(10000)]),
    "1 MB value": lambda: request(
        "edge", ip("10.9.0.1"), desc(("remote_address", "x" * (1 << 20)))),
    "huge hits": lambda: request("edge", ip("10.9.0.1", hits=1 << 40)),
    "huge override": lambda: request(
        "edge", ip("10.9.0.1", limit=(4000000000, 2))),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_refused_and_nothing_counted(svc, name):
    msg = invalid(svc, BAD[name]())
    assert all(ord(c) >= 0x20 for c in msg)
    r = svc.call(request("edge", ip("10.9.0.1", hits=0)))
    assert r.statuses[0].limit_remaining == 3


def test_truncated_and_garbage_frames(svc):
    good = request("edge", ip("10.9.1.1")).SerializeToString()
    for payload in (good[:-3], b"\x12\xff\xff\xff\x0f", b"\xff" * 64):
        with pytest.raises(grpc.RpcError) as e:
            svc.raw("/envoy.service.ratelimit.v3.RateLimitService/"
                    "ShouldRateLimit", payload)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    r = svc.call(request("edge", ip("10.9.1.1", hits=0)))
    assert r.statuses[0].limit_remaining == 3


def test_unknown_method_unimplemented(svc):
    with pytest.raises(grpc.RpcError) as e:
        svc.raw("/envoy.service.ratelimit.v3.RateLimitService/Other", b"")
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_ietf_headers_when_asked(config_dir, shm_store, services):
    (config_dir / "edge.yaml").write_text(CONFIG)
    s = services(config_dir, [shm_store], ["--headers", "ietf"])
    r = s.call(request("edge", ip("10.5.0.1")))
    names = {h.key for h in r.response_headers_to_add}
    assert "RateLimit-Policy" in names and "RateLimit" in names
    # draft-ietf-httpapi-ratelimit-headers-11: the policy named by the
    # limit's name, its quota and window; the quota left after this call
    s.call(request("edge", desc(("path", "/login"))))
    r = s.call(request("edge", desc(("path", "/login"))))
    h = {h.key: h.value for h in r.response_headers_to_add}
    assert h["RateLimit-Policy"] == '"login";q=2;w=3600'
    assert re.fullmatch(r'"login";r=0;t=\d+', h["RateLimit"]), h
    assert h["X-RateLimit-Remaining"] == "0"
