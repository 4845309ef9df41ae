"""Rule sets for the binding's tests, as dicts the Limiter takes."""


def rule(rule_id, limit, window=60, dimension="user",
         algorithm="fixed_window", **extra):
    r = {"rule_id": rule_id, "dimension": dimension, "limit": limit,
         "window_seconds": window, "algorithm": algorithm}
    r.update(extra)
    return r


def ruleset(*rules, version=1):
    return {"version": version, "rules": list(rules)}
