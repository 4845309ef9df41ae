"""ratelimit-envoy as a fleet member and as a process: two instances on
one redis-server and on one shm:// region count one limit exactly; the
health service; SIGTERM answers the calls in flight; a call whose client
deadline passes is ended, and the service goes on; TLS."""
import shutil
import signal
import subprocess
import time

import grpc
import pytest

import rls_client
from rls_client import OK, OVER, desc, request

CONFIG = """
domain: fleet
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 10}
"""


@pytest.fixture
def fleet_config(config_dir):
    (config_dir / "fleet.yaml").write_text(CONFIG)
    return config_dir


def hammer(services_, total):
    futures = [services_[i % len(services_)].future(
        request("fleet", desc(("client", "c1")))) for i in range(total)]
    return [f.result().overall_code for f in futures]


def test_two_instances_one_redis_exact(fleet_config, redis, services):
    opts = ["store=" + redis.uri, "timeout_ms=2000", "fleet_size=2"]
    a, b = services(fleet_config, opts), services(fleet_config, opts)
    codes = hammer([a, b], 40)
    assert codes.count(OK) == 10 and codes.count(OVER) == 30


def test_two_instances_one_shm_exact(fleet_config, shm_store, services):
    a, b = services(fleet_config, [shm_store]), \
        services(fleet_config, [shm_store])
    codes = hammer([a, b], 40)
    assert codes.count(OK) == 10 and codes.count(OVER) == 30


def test_health(fleet_config, shm_store, services):
    s = services(fleet_config, [shm_store])
    assert s.health() == b"\x08\x01"  # SERVING
    assert s.health(b"envoy.service.ratelimit.v3.RateLimitService") == \
        b"\x08\x01"
    with pytest.raises(grpc.RpcError) as e:
        s.health(b"other.Service")
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


def _server_sockets(port):
    """(recv_q, bytes_received) of the service's side of its connections,
    from ss(8)."""
    out = subprocess.run(["ss", "-tinH", "state", "established",
                          f"( sport = :{port} )"], capture_output=True,
                         text=True).stdout
    socks, cur = [], None
    for line in out.splitlines():
        f = line.split()
        if f and f[0].isdigit():  # Recv-Q Send-Q local peer
            cur = [int(f[0]), 0]
            socks.append(cur)
        elif cur is not None and "bytes_received:" in line:
            cur[1] = int(line.split("bytes_received:")[1].split()[0])
    return socks


def bytes_received(port):
    return sum(b for _, b in _server_sockets(port))


def service_read(port, at_least):
    socks = _server_sockets(port)
    return sum(b for _, b in socks) >= at_least and \
        all(q == 0 for q, _ in socks)


def wait_until(cond, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.skipif(shutil.which("ss") is None, reason="no ss (iproute2)")
def test_sigterm_answers_calls_in_flight(fleet_config, redis, services):
    s = services(fleet_config, ["store=" + redis.uri, "timeout_ms=3000",
                                "fleet_size=1"])
    assert s.call(request("fleet", desc(("client", "warm")))).overall_code \
        == OK
    redis.stop_process()  # SIGSTOP: the checks wait in the service
    try:
        before = bytes_received(s.port)
        futures = [s.future(request("fleet", desc(("client", f"c{i}"))),
                            timeout=30) for i in range(8)]
        # the calls are in the service when it has read their bytes
        # (its socket's receive queue empty); its poller takes them at once
        assert wait_until(lambda: service_read(s.port, before + 8 * 40))
        time.sleep(0.2)
        s.signal(signal.SIGTERM)
        assert s.wait_log("stopping")
    finally:
        redis.cont()
    # every call is answered, none cancelled by the stop
    for f in futures:
        assert f.result().overall_code in (OK, OVER)
    assert s.proc.wait(timeout=30) == 0


def test_client_deadline_then_service_goes_on(fleet_config, redis, services):
    s = services(fleet_config, ["store=" + redis.uri, "timeout_ms=3000",
                                "fleet_size=1"])
    redis.stop_process()
    try:
        with pytest.raises(grpc.RpcError) as e:
            s.call(request("fleet", desc(("client", "late"))), timeout=0.3)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        redis.cont()
    assert s.call(request("fleet", desc(("client", "after")))).overall_code \
        == OK


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl")
def test_tls_listener(fleet_config, shm_store, tmp_path):
    key, crt = tmp_path / "key.pem", tmp_path / "crt.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-nodes", "-keyout", str(key), "-out", str(crt),
                    "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"],
                   check=True, capture_output=True)
    p = subprocess.Popen([rls_client.BINARY, "-c", str(fleet_config),
                          "-L", "127.0.0.1:0", "--tls-cert", str(crt),
                          "--tls-key", str(key), "-o", shm_store],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=rls_client._die_with_parent)
    try:
        line = p.stdout.readline().decode()
        assert "(TLS)" in line, p.stderr.read()
        port = int(line.split("port ")[1].split()[0])
        creds = grpc.ssl_channel_credentials(root_certificates=crt.read_bytes())
        ch = grpc.secure_channel(f"localhost:{port}", creds)
        call = ch.unary_unary(rls_client.RLS_METHOD,
                              request_serializer=rls_client.Request.SerializeToString,
                              response_deserializer=rls_client.Response.FromString)
        r = call(request("fleet", desc(("client", "tls"))), timeout=20)
        assert r.overall_code == OK and r.statuses[0].limit_remaining == 9
        ch.close()
    finally:
        p.terminate()
        assert p.wait(timeout=30) == 0


MODES = """
domain: modes
descriptors:
  - key: open
    rate_limit: {unit: minute, requests_per_unit: 3, failure_mode: open}
  - key: closed
    rate_limit: {unit: minute, requests_per_unit: 3, failure_mode: closed}
  - key: fallback
    rate_limit: {unit: minute, requests_per_unit: 3, failure_mode: fallback}
"""


def test_redis_stopped_each_failure_mode(config_dir, redis, services):
    (config_dir / "modes.yaml").write_text(MODES)
    s = services(config_dir, ["store=" + redis.uri, "timeout_ms=100",
                              "fleet_size=1"])

    def codes(key, n):
        return [s.call(request("modes", desc((key, "c")))).overall_code
                for _ in range(n)]

    redis.stop_process()  # SIGSTOP: every check times out
    try:
        assert codes("open", 6) == [OK] * 6
        assert codes("closed", 2) == [OVER] * 2
        # the local fallback at limit / fleet_size
        assert codes("fallback", 5) == [OK, OK, OK, OVER, OVER]
    finally:
        redis.cont()


def test_reload_under_load_drops_no_call(config_dir, shm_store, services):
    import threading
    f = config_dir / "fleet.yaml"
    f.write_text(CONFIG)
    s = services(config_dir, [shm_store])
    errors, done = [], threading.Event()
    count = [0]

    def load():
        while not done.is_set():
            try:
                r = s.call(request("fleet", desc(("client", "load"))))
                assert r.overall_code in (OK, OVER)
                count[0] += 1
            except Exception as e:  # noqa: BLE001 - any failure counts
                errors.append(repr(e))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for i in range(20):
            f.write_text(CONFIG.replace("10}", "%d}" % (11 + i)))
            s.signal(signal.SIGHUP)
            time.sleep(0.05)
    finally:
        done.set()
        for t in threads:
            t.join()
    assert not errors, errors[:3]
    assert count[0] > 0

    # A reload is the signal loop's, after the signal: the last one may
    # still be on its way (SIGHUPs sent while one reload runs make one
    # more, which reads the file as it is then).  Wait until the last
    # file's limit is in force; a reload lost for good fails here.
    def limit_in_force():
        r = s.call(request("fleet", desc(("client", "after"))))
        return r.statuses[0].current_limit.requests_per_unit
    assert wait_until(lambda: limit_in_force() == 30), limit_in_force()
    # the library counts by that limit too (the rule set and the reported
    # configuration changed together): one call of 30 hits on a fresh
    # client passes, one of 31 does not, whatever the clock
    assert s.call(request("fleet", desc(("client", "full"), hits=30))) \
        .overall_code == OK
    assert s.call(request("fleet", desc(("client", "over"), hits=31))) \
        .overall_code == OVER
