#!/usr/bin/python3
"""metrics_prom.py METRICS TALLY_JSON -- the metrics text of
tests/metrics_dump.c, parsed by prometheus_client (Debian's
python3-prometheus-client), compared sample by sample with the tallies the
program kept of its own checks.  Every sample must be expected; exit 0
when all match, 1 with the differences on stdout otherwise."""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

RULE_COUNTERS = ("allowed", "denied", "would_deny", "near_limit")
# 0 on metrics_dump's memory store: it never fails and has no deny cache
# and no leases.
ZERO_COUNTERS = ("fail_open", "fallback", "fail_closed", "cached", "leased",
                 "lease_full")


def expected(t):
    """{(sample name, frozen labels): value} for everything the text must hold."""
    want = {}
    for rule, v in t["rules"].items():
        lab = frozenset({"rule": rule}.items())
        for c in RULE_COUNTERS:
            want[("ratelimit_rule_%s_total" % c, lab)] = v[c]
        for c in ZERO_COUNTERS:
            want[("ratelimit_rule_%s_total" % c, lab)] = 0
        want[("ratelimit_rule_checks_total", lab)] = (
            v["allowed"] + v["denied"] + v["would_deny"])
        want[("ratelimit_rule_limit", lab)] = v["limit"]
        want[("ratelimit_rule_window_seconds", lab)] = v["window_seconds"]
    want[("ratelimit_rules_version", frozenset())] = t["version"]
    want[("ratelimit_rules_loads_total", frozenset())] = 1
    for reason in ("invalid", "stale", "source"):
        want[("ratelimit_rules_load_failures_total",
              frozenset({"reason": reason}.items()))] = 0
    want[("ratelimit_fleet_size", frozenset())] = 1
    want[("ratelimit_events_sent_total", frozenset())] = 0
    for reason in ("ring_full", "redis_away", "rejected"):
        want[("ratelimit_events_dropped_total",
              frozenset({"reason": reason}.items()))] = 0
    return want


def check_histogram(fam, checks, errors):
    # The memory store times one check in 64 per thread (the first, the
    # 65th, ...); metrics_dump checks from one thread.
    checks = (checks + 63) // 64
    buckets = [(float(s.labels["le"]), s.value) for s in fam.samples
               if s.name.endswith("_bucket")]
    count = [s.value for s in fam.samples if s.name.endswith("_count")]
    total = [s.value for s in fam.samples if s.name.endswith("_sum")]
    if [b for b, _ in buckets] != sorted(b for b, _ in buckets):
        errors.append("histogram buckets out of order")
    if any(x[1] > y[1] for x, y in zip(buckets, buckets[1:])):
        errors.append("histogram buckets not cumulative")
    if buckets[0][0] != 1e-05 or buckets[-2][0] != 0.1 or buckets[-1][0] != float("inf"):
        errors.append("histogram bounds: %r" % [b for b, _ in buckets])
    if count != [checks] or buckets[-1][1] != checks:
        errors.append("histogram count %r, +Inf %r, not %d"
                      % (count, buckets[-1][1], checks))
    if len(total) != 1 or not 0 < total[0] < checks * 0.1:
        errors.append("histogram sum %r" % total)
    for s in fam.samples:
        if s.labels.get("store") != "memory":
            errors.append("histogram sample %s without store=memory" % s.name)


def main():
    text = open(sys.argv[1]).read()
    tally = json.load(open(sys.argv[2]))
    want = expected(tally)
    got, errors, types = {}, [], {}
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith("ratelimit_"):
            errors.append("family without the prefix: " + fam.name)
        if not fam.documentation:
            errors.append("family without HELP: " + fam.name)
        types[fam.name] = fam.type
        if fam.type == "histogram":
            check_histogram(fam, tally["checks"], errors)
            continue
        for s in fam.samples:
            if fam.type == "counter" and not s.name.endswith("_total"):
                errors.append("counter sample without _total: " + s.name)
            got[(s.name, frozenset(s.labels.items()))] = s.value
    if types.get("ratelimit_check_duration_seconds") != "histogram":
        errors.append("no latency histogram")
    for key in sorted(set(want) | set(got), key=str):
        if want.get(key) != got.get(key):
            errors.append("%s %s: got %r, want %r" % (
                key[0], dict(key[1]), got.get(key), want.get(key)))
    for e in errors:
        print("FAIL:", e)
    print("%d samples compared, %d differences" % (len(want), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
