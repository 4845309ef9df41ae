"""Rules from ratelimitd (-o rules_source=store instead of -c): a real
ratelimitd on a real SQLite file publishing to a real redis-server; a rule
PUT over its REST API is enforced by the service within the refresh
interval, a per-value rule covers its exact value, and a DELETE takes the
limit away.  A descriptor is the request: endpoint "/<domain>", each entry
a dimension of its key (ratelimit-envoy(8), RULES FROM RATELIMITD)."""
import json
import os
import subprocess
import time
import urllib.error
import urllib.request

import grpc
import pytest

from rls_client import BINARY, OK, OVER, desc, request

RATELIMITD = os.environ.get("RATELIMITD", "")
TOKEN = "envoytest0123456789abcdef"
WAIT_S = 20  # the refresh interval is 1 s; a loaded machine is slow


@pytest.fixture
def ratelimitd(redis, tmp_path):
    if not os.access(RATELIMITD, os.X_OK):
        pytest.skip("ratelimitd not built (--with-ratelimitd)")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"tester:{TOKEN}\n")
    tokens.chmod(0o600)
    port_file = tmp_path / "port"
    log = open(tmp_path / "ratelimitd.log", "wb")
    proc = subprocess.Popen(
        [RATELIMITD, "--token-file", str(tokens),
         "--db", str(tmp_path / "rules.db"), "--listen", "127.0.0.1:0",
         "--port-file", str(port_file), "--redis", redis.uri],
        stdout=log, stderr=log)
    deadline = time.monotonic() + WAIT_S
    while not (port_file.exists() and port_file.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, \
            (tmp_path / "ratelimitd.log").read_text()
        time.sleep(0.05)
    yield f"http://127.0.0.1:{int(port_file.read_text())}"
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def rest(base, method, path, body=None):
    req = urllib.request.Request(
        base + path, method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": "Bearer " + TOKEN,
                 "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def ip(addr):
    return desc(("remote_address", addr))


def limit_of(svc, addr):
    """The limit the service answers for one descriptor (0: none)."""
    st = svc.call(request("edge", ip(addr))).statuses[0]
    return st.current_limit.requests_per_unit if st.HasField(
        "current_limit") else 0


def wait_for(cond):
    deadline = time.monotonic() + WAIT_S
    while not cond():
        assert time.monotonic() < deadline, "not within the refresh interval"
        time.sleep(0.1)


def test_rule_put_enforced_then_deleted(ratelimitd, redis, services):
    svc = services(None, [f"store={redis.uri}", "rules_source=store",
                          "rules_refresh_s=1"])
    assert limit_of(svc, "10.1.0.1") == 0  # no rule yet: OK, no limit
    assert rest(ratelimitd, "PUT", "/v1/rules/edge-per-ip", {
        "dimension": "remote_address", "match": {"endpoint": "/edge"},
        "limit": 2, "window_seconds": 60}) == 200
    probe = iter(range(1000))
    wait_for(lambda: limit_of(svc, f"10.2.0.{next(probe)}") == 2)
    for left in (1, 0):
        st = svc.call(request("edge", ip("10.3.0.1"))).statuses[0]
        assert st.code == OK and st.limit_remaining == left
    r = svc.call(request("edge", ip("10.3.0.1")))
    assert r.overall_code == OVER
    st = r.statuses[0]
    assert st.current_limit.name == "edge-per-ip"
    assert st.current_limit.unit == st.current_limit.MINUTE
    # another domain is another endpoint: the rule does not apply
    assert svc.call(request("other", ip("10.3.0.1"))).overall_code == OK
    # a per-value rule takes the general one out for its exact value
    assert rest(ratelimitd, "PUT", "/v1/rules/edge-partner", {
        "dimension": "remote_address",
        "match": {"endpoint": "/edge", "value": "10.7.7.7"},
        "limit": 5, "window_seconds": 60}) == 200
    wait_for(lambda: limit_of(svc, "10.7.7.7") == 5)
    assert limit_of(svc, "10.7.7.8") == 2
    assert rest(ratelimitd, "DELETE", "/v1/rules/edge-per-ip") in (200, 204)
    wait_for(lambda: svc.call(request("edge", ip("10.3.0.1"))).overall_code
             == OK)
    assert limit_of(svc, "10.3.0.1") == 0


def test_source_refuses_what_a_request_cannot_carry(ratelimitd, redis,
                                                   services):
    svc = services(None, [f"store={redis.uri}", "rules_source=store"])
    for bad in (desc(("Remote-Address", "10.0.0.1")),  # not a dimension
                desc(("remote_address", "a"), ("remote_address", "b")),
                desc(("remote_address", "x" * 300)),
                desc(("remote_address", "10.0.0.1"),
                     limit=(5, 2))):  # an override (MINUTE) needs -c
        with pytest.raises(grpc.RpcError) as e:
            svc.call(request("edge", bad))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_config_or_rules_source_not_both(config_dir, redis):
    both = subprocess.run(
        [BINARY, "-c", str(config_dir), "-l", "127.0.0.1:0",
         "-o", f"store={redis.uri}", "-o", "rules_source=store"],
        capture_output=True, timeout=30)
    assert both.returncode == 2 and b"not both" in both.stderr
    neither = subprocess.run([BINARY, "-l", "127.0.0.1:0"],
                             capture_output=True, timeout=30)
    assert neither.returncode == 2
