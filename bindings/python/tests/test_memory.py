"""The binding on the memory store: limits enforced exactly, results,
headers and body as the library formats them, errors raised with the
library's code and message, rule loading, threads."""
import json

import pytest

from ratelimit import (ErrorCode, FileReadError, Flags, InvalidArgumentError,
                       Limiter, NoSuchRuleError, OptionError, RateLimitError,
                       RuleError, RuleParseError, SettledError, StoreError)
from rlhelp import on_threads, rule, ruleset


@pytest.fixture
def lim():
    with Limiter(rules=ruleset(rule("per-user", 10))) as limiter:
        yield limiter


def test_a_limit_admits_exactly_its_count(lim):
    results = [lim.allow("user:1", "per-user") for _ in range(15)]
    assert [r.allowed for r in results] == [True] * 10 + [False] * 5
    assert [r.remaining for r in results[:10]] == list(range(9, -1, -1))
    assert all(r.limit == 10 and r.window == 60 and r.rule_id == "per-user"
               for r in results)
    assert all(r.retry_after == 0 for r in results[:10])
    assert all(1 <= r.retry_after <= 60 for r in results[10:])
    # another key has its own count
    assert lim.allow("user:2", "per-user").remaining == 9


def test_cost_is_charged_and_zero_only_looks(lim):
    assert lim.allow("user:1", "per-user", cost=4).remaining == 6
    assert lim.allow("user:1", "per-user", cost=0).remaining == 6
    denied = lim.allow("user:1", "per-user", cost=7)
    assert not denied and denied.remaining == 6
    assert lim.allow("user:1", "per-user", cost=6).remaining == 0


def test_headers_and_body_as_the_library_writes_them(lim):
    ok = lim.allow("user:1", "per-user")
    names = [n for n, _ in ok.headers()]
    assert names == ["X-RateLimit-Limit", "X-RateLimit-Remaining",
                     "X-RateLimit-Reset"]
    assert dict(ok.headers())["X-RateLimit-Remaining"] == "9"
    assert dict(ok.headers())["X-RateLimit-Reset"] == str(ok.reset_at)
    assert ok.body() == b""
    lim.allow("user:1", "per-user", cost=9)
    no = lim.allow("user:1", "per-user")
    hdrs = dict(no.headers())
    assert hdrs["Retry-After"] == str(no.retry_after)
    assert hdrs["X-RateLimit-Remaining"] == "0"
    assert json.loads(no.body()) == {"error": "rate_limited",
                                     "retryAfter": no.retry_after}
    text = no.headers_text()
    assert text == "".join(f"{n}: {v}\r\n" for n, v in no.headers())
    ietf = dict(no.headers(ietf=True))
    assert ietf["RateLimit-Policy"] == '"per-user";q=10;w=60'
    # draft-11: a denial's t is its Retry-After; draft-10: the window's end
    assert ietf["RateLimit"] == '"per-user";r=0;t=%d' % no.retry_after
    d10 = dict(no.headers(ietf=True, draft10=True))
    assert d10["RateLimit"].startswith('"per-user";r=0;t=')
    with pytest.raises(ValueError):
        no.headers(draft10=True)


def test_check_by_endpoint_tier_and_named_dimensions():
    rules = ruleset(
        rule("tenant-api", 3, dimension="tenant",
             match={"endpoint": "/api/**", "tier": "free"}),
        rule("per-ip", 100, dimension="ip"))
    with Limiter(rules=rules) as lim:
        def call(tenant, ip="192.0.2.1", endpoint="/api/x", tier="free"):
            return lim.check(endpoint=endpoint, tier=tier, ip=ip,
                             dimensions={"tenant": tenant})
        assert [call("acme").allowed for _ in range(4)] == \
            [True, True, True, False]
        denied = call("acme")
        assert denied.rule_id == "tenant-api" and denied.limit == 3
        assert call("globex").allowed
        # the pro tier and another endpoint do not match the tenant rule
        assert call("acme", tier="pro").rule_id == "per-ip"
        assert call("acme", endpoint="/web").rule_id == "per-ip"
        nothing = lim.check(endpoint="/web")
        assert nothing.allowed and Flags.NO_RULE in nothing.flags


def test_check_many_decides_each_request(lim):
    out = lim.check_many([{"user": "a"}] * 11 + [{"user": "b", "cost": -1}])
    assert [r.allowed for r in out[:11]] == [True] * 10 + [False]
    err = out[11]
    assert isinstance(err, InvalidArgumentError)
    assert err.code == ErrorCode.RL_EINVAL


def test_errors_carry_code_and_message(lim):
    with pytest.raises(NoSuchRuleError) as e:
        lim.allow("user:1", "nope")
    assert e.value.code == ErrorCode.RL_ENORULE == -3
    assert e.value.code.name == "RL_ENORULE"
    assert '"nope"' in e.value.message
    assert isinstance(e.value, RateLimitError)

    with pytest.raises(InvalidArgumentError) as e:
        lim.allow("k" * 257, "per-user")
    assert e.value.code == ErrorCode.RL_EINVAL and "key" in e.value.message
    with pytest.raises(InvalidArgumentError) as e:
        lim.allow("user:1", "per-user", cost=10**9 + 1)
    assert "cost" in e.value.message
    with pytest.raises(InvalidArgumentError):
        lim.allow("user:\0x", "per-user")
    with pytest.raises(InvalidArgumentError) as e:
        lim.check(user="u", dimensions={"Bad Name": "x"})
    assert e.value.code == ErrorCode.RL_EINVAL


def test_bad_options_and_stores():
    with pytest.raises(OptionError) as e:
        Limiter(no_such_option=1)
    assert e.value.code == ErrorCode.RL_EOPTION
    assert "no_such_option" in e.value.message
    with pytest.raises(OptionError) as e:
        Limiter(timeout_ms=0)
    assert "timeout_ms: must be 1..60000, got 0" in e.value.message
    with pytest.raises(RateLimitError) as e:
        Limiter(store="bogus://x")
    assert e.value.code in (ErrorCode.RL_ESTORE, ErrorCode.RL_EOPTION)
    assert e.value.message


def test_bad_rules_raise_with_the_library_message():
    bad = ruleset(rule("login", 0))
    with pytest.raises(RuleError) as e:
        Limiter(rules=bad)
    assert e.value.code == ErrorCode.RL_ERULE
    assert 'rules[0] ("login"): limit: must be 1..1000000000, got 0' in \
        e.value.message
    with pytest.raises(RuleParseError) as e:
        Limiter(rules='{"rules": [')
    assert e.value.code == ErrorCode.RL_EPARSE
    with pytest.raises(FileReadError) as e:
        Limiter(rules="/nonexistent/rules.json")
    assert e.value.code == ErrorCode.RL_EIO
    assert "/nonexistent/rules.json" in e.value.message


def test_a_refused_reload_keeps_the_set_in_force(lim, tmp_path):
    lim.allow("user:1", "per-user", cost=10)
    with pytest.raises(RuleError) as e:
        lim.load_rules(ruleset(rule("per-user", 10, window=0), version=2))
    assert "window_seconds" in e.value.message
    assert lim.rules_version == 1
    assert not lim.allow("user:1", "per-user")
    status = lim.rules_status()
    assert status["refused_bad"] == 1
    assert "window_seconds" in status["last_refusal"]

    path = tmp_path / "rules.json"
    path.write_text(json.dumps(ruleset(rule("per-user", 20), version=7)))
    lim.reload(path)
    assert lim.rules_version == 7
    assert lim.rules_status()["origin"] == 2  # RL_RULES_FROM_FILE
    # a raised window limit applies at once to the count so far
    assert lim.allow("user:1", "per-user").remaining == 9


def test_rules_from_a_file_path_string(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(ruleset(rule("f", 2), version=3)))
    with Limiter(rules=str(path)) as lim:
        assert lim.rules_version == 3
        assert [lim.allow("user:x", "f").allowed for _ in range(3)] == \
            [True, True, False]


def test_threads_share_one_exact_limit():
    threads, calls, limit = 8, 250, 1000
    allowed = [0] * threads
    with Limiter(rules=ruleset(rule("shared", limit))) as lim:
        def worker(i):
            for _ in range(calls):
                if lim.allow("user:hot", "shared"):
                    allowed[i] += 1
        on_threads(threads, worker)
        assert sum(allowed) == limit
        st = lim.stats()
        assert (st["checks"], st["allowed"], st["denied"]) == \
            (threads * calls, limit, threads * calls - limit)


def test_metrics_text(lim):
    for _ in range(12):
        lim.allow("user:1", "per-user")
    text = lim.metrics()
    assert 'ratelimit_rule_checks_total{rule="per-user"} 12' in text
    assert 'ratelimit_rule_denied_total{rule="per-user"} 2' in text


def test_dryrun_counts_a_rule_in_mode_log():
    with Limiter(rules=ruleset(rule("trial", 2, mode="log"))) as lim:
        res = [lim.allow("user:1", "trial") for _ in range(5)]
        assert all(res)
        assert [Flags.SOFT in r.flags for r in res] == [False] * 2 + [True] * 3
        d = lim.dryrun("trial")
        assert (d["checks"], d["would_deny"], d["distinct"]) == (5, 3, 1)
        with pytest.raises(NoSuchRuleError):
            lim.dryrun("none")


def test_close_and_context_manager():
    lim = Limiter(rules=ruleset(rule("r", 1)))
    with lim:
        assert lim.allow("user:1", "r")
    assert lim.closed
    with pytest.raises(InvalidArgumentError) as e:
        lim.allow("user:1", "r")
    assert "closed" in e.value.message
    lim.close()  # twice: nothing


def test_store_error_is_a_rate_limit_error():
    assert issubclass(StoreError, RateLimitError)
    assert issubclass(RuleParseError, RuleError)
    assert issubclass(InvalidArgumentError, ValueError)


def _from_last_good(tmp_path, **kw):
    """A limiter whose rules source cannot be read: rl_limiter_new itself
    logs that it starts from the last good copy (rules_file)."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(ruleset(rule("r", 3), version=4)))
    return Limiter(rules=good, rules_source=f"file:{tmp_path}/missing.json",
                   **kw)


def test_log_messages_reach_a_callable_or_stderr_or_nowhere(tmp_path, capfd):
    got = []
    with _from_last_good(tmp_path, log=lambda lv, m: got.append((lv, m))) \
            as lim:
        assert lim.rules_status()["origin"] == 4  # RL_RULES_FROM_LAST_GOOD
        assert lim.rules_version == 4
    warn = [m for lv, m in got if lv == 4 and "last good copy" in m]
    assert len(warn) == 1 and "missing.json" in warn[0]
    assert capfd.readouterr().err == ""
    with _from_last_good(tmp_path):
        pass
    assert "libratelimit: rules source file" in capfd.readouterr().err
    with _from_last_good(tmp_path, log=False):
        pass
    assert capfd.readouterr().err == ""


def test_reserve_then_settle():
    with Limiter(rules=ruleset(rule("tokens", 100))) as lim:
        res, rsv = lim.reserve(user="7", cost=100)
        assert res.allowed and rsv is not None
        copy = rsv.copy()
        lim.settle(rsv, 30)
        with pytest.raises(SettledError) as e:
            lim.settle(copy, 30)
        assert e.value.code == ErrorCode.RL_ESETTLED
        admitted = sum(bool(lim.check(user="7")) for _ in range(100))
        assert admitted == 70
        res, rsv = lim.reserve(user="7", cost=1)
        assert not res.allowed and rsv is None


def test_per_value_rules_replaces_and_unlimited():
    # issue 25 s3: the rule JSON passes through the library as is
    rules = ruleset(
        rule("per-key", 2, dimension="api_key"),
        rule("partners", 20, dimension="api_key",
             match={"value": "partner-*"}),
        rule("acme", 5, dimension="api_key",
             match={"value": "partner-acme"}, replaces="per-key"),
        {"rule_id": "ops", "dimension": "api_key",
         "match": {"value": ["ops-1", "ops-2"]}, "unlimited": True})
    with Limiter(rules=rules) as lim:
        def admitted(key):
            n = 0
            while n < 50 and lim.check(api_key=key).allowed:
                n += 1
            return n
        assert admitted("someone") == 2
        assert admitted("partner-x") == 20
        assert admitted("partner-acme") == 5
        assert admitted("ops-1") == 50
        assert lim.check(api_key="ops-2").flags & Flags.NO_RULE
        with pytest.raises(RuleError, match="which is not in the set"):
            lim.load_rules(ruleset(rule("x", 1, replaces="nope")))
