"""envoyproxy/ratelimit's YAML configuration as ratelimit-envoy reads it:
nested descriptors, exact values, wildcards, bare keys, replaces,
unlimited, shadow mode, the algorithm key, a directory of domains, and
reloads (SIGHUP, a changed file) where a file with an error is refused with
its file:line and the last good set stays."""
import os
import signal
import time

import pytest

from rls_client import OK, OVER, desc, request

NESTED = """
domain: api
descriptors:
  - key: tenant
    value: acme
    descriptors:
      - key: path
        value: /search
        rate_limit: {unit: minute, requests_per_unit: 2}
      - key: path
        value: "/v1/*/items"
        rate_limit: {unit: minute, requests_per_unit: 3}
      - key: path
        rate_limit: {unit: minute, requests_per_unit: 4}
  - key: tenant
    value: "beta*"
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2, name: per_user}
  - key: user
    value: partner
    rate_limit:
      unit: minute
      requests_per_unit: 5
      name: partner
      replaces: [{name: per_user}]
  - key: vip
    rate_limit: {unlimited: true}
  - key: probe
    shadow_mode: true
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: fixed
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: fixed_window}
"""


@pytest.fixture
def api(config_dir, shm_store, services):
    (config_dir / "api.yaml").write_text(NESTED)
    return services(config_dir, [shm_store])


def remaining(svc, *descriptors):
    r = svc.call(request("api", *descriptors))
    return [(s.code, s.limit_remaining if s.HasField("current_limit")
             else None) for s in r.statuses]


def test_nested_exact(api):
    d = desc(("tenant", "acme"), ("path", "/search"))
    assert remaining(api, d) == [(OK, 1)]
    assert remaining(api, d) == [(OK, 0)]
    assert remaining(api, d) == [(OVER, 0)]
    # the parent alone has no limit; deeper than the config: none
    assert remaining(api, desc(("tenant", "acme"))) == [(OK, None)]
    assert remaining(api, desc(("tenant", "acme"), ("path", "/search"),
                               ("x", "y"))) == [(OK, None)]


def test_wildcard_in_the_middle_and_trailing(api):
    d = desc(("tenant", "acme"), ("path", "/v1/shop/items"))
    assert remaining(api, d) == [(OK, 2)]
    assert remaining(api, desc(("tenant", "acme"), ("path", "/v1/x/items"))
                     ) == [(OK, 2)]  # a counter per value
    assert remaining(api, desc(("tenant", "beta-7"))) == [(OK, 0)]
    assert remaining(api, desc(("tenant", "beta-7"))) == [(OVER, 0)]
    assert remaining(api, desc(("tenant", "gamma"))) == [(OK, None)]


def test_bare_key_counts_per_value(api):
    a = desc(("tenant", "acme"), ("path", "/other"))
    b = desc(("tenant", "acme"), ("path", "/else"))
    assert remaining(api, a) == [(OK, 3)]
    assert remaining(api, a) == [(OK, 2)]
    assert remaining(api, b) == [(OK, 3)]


def test_replaces_drops_the_named_limit(api):
    u = desc(("user", "partner"))
    # partner's limit replaces per_user: only 5 per minute counts
    got = [remaining(api, u)[0] for _ in range(6)]
    assert got == [(OK, 4), (OK, 3), (OK, 2), (OK, 1), (OK, 0), (OVER, 0)]
    # with the general limit in the same request, it is dropped there too
    r = api.call(request("api", desc(("user", "alice")),
                         desc(("user", "partner"))))
    assert not r.statuses[0].HasField("current_limit")
    assert r.statuses[1].code == OVER


def test_unlimited(api):
    for _ in range(20):
        r = api.call(request("api", desc(("vip", "x"))))
        assert r.overall_code == OK
        assert r.statuses[0].limit_remaining == 2**32 - 1


def test_shadow_mode_counts_never_over(api):
    d = desc(("probe", "p"))
    assert remaining(api, d) == [(OK, 0)]
    for _ in range(3):
        r = api.call(request("api", d))
        assert r.overall_code == OK and r.statuses[0].code == OK


def test_fixed_window_algorithm_key(api):
    d = desc(("fixed", "f"))
    codes = [api.call(request("api", d)).overall_code for _ in range(3)]
    # two per second; the third is over unless a second boundary passed
    assert codes[:2] == [OK, OK] or codes[1:] == [OK, OK]


def test_directory_of_domains(config_dir, shm_store, services):
    (config_dir / "a.yaml").write_text(
        "domain: a\ndescriptors:\n  - key: k\n    rate_limit: "
        "{unit: minute, requests_per_unit: 1}\n")
    (config_dir / "b.yml").write_text(
        "domain: b\ndescriptors:\n  - key: k\n    rate_limit: "
        "{unit: minute, requests_per_unit: 2}\n")
    (config_dir / "notes.txt").write_text("not a config")
    s = services(config_dir, [shm_store])
    assert s.call(request("a", desc(("k", "v")))).statuses[0].limit_remaining == 0
    assert s.call(request("b", desc(("k", "v")))).statuses[0].limit_remaining == 1


BAD_FILES = {
    "unknown key": ("domain: x\ndescriptors:\n  - key: k\n    colour: red\n",
                    "bad.yaml:4"),
    "bad unit": ("domain: x\ndescriptors:\n  - key: k\n    rate_limit:\n"
                 "      unit: fortnight\n      requests_per_unit: 1\n",
                 "bad.yaml:5"),
    "unlimited with unit": ("domain: x\ndescriptors:\n  - key: k\n"
                            "    rate_limit: {unlimited: true, unit: second}\n",
                            "bad.yaml:4"),
    "rpu over the library's limit": (
        "domain: x\ndescriptors:\n  - key: k\n    rate_limit:\n"
        "      unit: second\n      requests_per_unit: 4000000000\n",
        "bad.yaml:6"),
    "no key": ("domain: x\ndescriptors:\n  - value: v\n", "bad.yaml:3"),
    "year": ("domain: x\ndescriptors:\n  - key: k\n    rate_limit:\n"
             "      unit: year\n      requests_per_unit: 1\n", "bad.yaml:5"),
    "yaml syntax": ("domain: x\ndescriptors: [\n", "bad.yaml:"),
    "duplicate": ("domain: x\ndescriptors:\n  - key: k\n  - key: k\n",
                  "bad.yaml:4"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_file_refused_at_start(tmp_path, shm_store, name):
    import subprocess
    import rls_client
    text, where = BAD_FILES[name]
    (tmp_path / "bad.yaml").write_text(text)
    p = subprocess.run([rls_client.BINARY, "-c", str(tmp_path), "-l",
                        "127.0.0.1:0", "-o", shm_store],
                       capture_output=True, timeout=30)
    assert p.returncode != 0
    assert where in p.stderr.decode(), p.stderr


def wait_for(cond, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def limit_of(svc, domain, key):
    r = svc.call(request(domain, desc((key, "v"), hits=0)))
    s = r.statuses[0]
    return s.current_limit.requests_per_unit if s.HasField("current_limit") \
        else None


ONE = "domain: r\ndescriptors:\n  - key: k\n    rate_limit: " \
      "{unit: minute, requests_per_unit: %d}\n"


def test_reload_on_sighup_and_on_change_keeps_last_good(config_dir,
                                                         shm_store, services):
    f = config_dir / "r.yaml"
    f.write_text(ONE % 5)
    s = services(config_dir, [shm_store])
    assert limit_of(s, "r", "k") == 5
    # a change on disk is seen without a signal
    f.write_text(ONE % 7)
    assert wait_for(lambda: limit_of(s, "r", "k") == 7)
    # a broken file: refused with file:line, the last good set answers
    f.write_text("domain: r\ndescriptors:\n  - key: k\n    rate_limit:\n"
                 "      unit: minute\n      requests_per_unit: -1\n")
    s.signal(signal.SIGHUP)
    assert s.wait_log("r.yaml:6")
    assert limit_of(s, "r", "k") == 7
    # fixed again: taken on SIGHUP
    f.write_text(ONE % 9)
    s.signal(signal.SIGHUP)
    assert wait_for(lambda: limit_of(s, "r", "k") == 9)


def test_example_config(shm_store, services):
    """examples/envoy's descriptor file, with the descriptors its
    envoy.yaml sends."""
    s = services(os.environ["RLS_EXAMPLE_CONFIG"], [shm_store])
    r = s.call(request("edge", desc(("remote_address", "192.0.2.1")),
                       desc(("tenant", "acme"), ("path", "/search?q=x")),
                       desc(("tenant", "other"), ("path", "/x")),
                       desc(("tenant", "trial"), ("path", "/x"))))
    got = [(st.current_limit.name, st.limit_remaining) for st in r.statuses]
    assert got == [("", 59), ("acme_search", 9), ("tenant_default", 99),
                   ("", 9)]
