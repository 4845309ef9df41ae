"""--metrics-listen: GET /metrics over real HTTP, the library's metrics
(Prometheus text) and the service's own counters: calls by gRPC status,
responses by overall code, descriptors by code, health checks."""
import re
import urllib.error
import urllib.request

import grpc
import pytest

from rls_client import OVER, desc, request

CONFIG = """
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 2}
"""


def scrape(svc, path="/metrics", method="GET"):
    req = urllib.request.Request(
        f"http://127.0.0.1:{svc.metrics_port}{path}", method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.headers["Content-Type"], r.read().decode()


def value(text, name):
    m = re.search("^" + re.escape(name) + r" (\d+)$", text, re.M)
    assert m, name + " not in the metrics"
    return int(m.group(1))


@pytest.fixture
def svc(config_dir, shm_store, services):
    (config_dir / "edge.yaml").write_text(CONFIG)
    return services(config_dir, [shm_store],
                    ["--metrics-listen", "127.0.0.1:0"])


def test_metrics_count_calls_by_code(svc):
    for _ in range(2):
        svc.call(request("edge", desc(("remote_address", "10.0.0.1"))))
    r = svc.call(request("edge", desc(("remote_address", "10.0.0.1")),
                         desc(("remote_address", "10.0.0.2"))))
    assert r.overall_code == OVER
    with pytest.raises(grpc.RpcError) as e:
        svc.call(request("", desc(("remote_address", "10.0.0.1"))))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    svc.health()
    status, ctype, text = scrape(svc)
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    assert value(text, 'ratelimit_envoy_calls_total{code="OK"}') == 3
    assert value(text,
                 'ratelimit_envoy_calls_total{code="INVALID_ARGUMENT"}') == 1
    assert value(text,
                 'ratelimit_envoy_calls_total{code="DEADLINE_EXCEEDED"}') == 0
    assert value(text, 'ratelimit_envoy_responses_total'
                       '{overall_code="OVER_LIMIT"}') == 1
    assert value(text,
                 'ratelimit_envoy_responses_total{overall_code="OK"}') == 2
    assert value(text, 'ratelimit_envoy_descriptors_total{code="OK"}') == 3
    assert value(text,
                 'ratelimit_envoy_descriptors_total{code="OVER_LIMIT"}') == 1
    assert value(text, "ratelimit_envoy_health_checks_total") == 1
    # the library's own: the rule set the configuration loaded, the checks
    assert value(text, "ratelimit_rules_version") >= 1
    assert "ratelimit_check_duration_seconds" in text


def test_metrics_other_paths_and_methods(svc):
    with pytest.raises(urllib.error.HTTPError) as e:
        scrape(svc, "/other")
    assert e.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as e:
        scrape(svc, method="POST")
    assert e.value.code == 405
    assert scrape(svc)[0] == 200  # still serving
