"""Rule sets for the binding's tests, as dicts the Limiter takes, and a
way to run a worker on many threads at once."""
import threading


def rule(rule_id, limit, window=60, dimension="user",
         algorithm="fixed_window", **extra):
    r = {"rule_id": rule_id, "dimension": dimension, "limit": limit,
         "window_seconds": window, "algorithm": algorithm}
    r.update(extra)
    return r


def ruleset(*rules, version=1):
    return {"version": version, "rules": list(rules)}


def on_threads(n, worker):
    """Run worker(i) for i in 0..n-1, each on a thread of its own, all
    released together (a barrier), and wait for every one."""
    start = threading.Barrier(n)

    def run(i):
        start.wait()
        worker(i)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
