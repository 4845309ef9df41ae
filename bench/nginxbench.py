"""nginxbench.py -- what ngx_http_ratelimit_module costs nginx: requests/s
and p99 latency from wrk through nginx with the module beside the same
nginx without it, on a location answering `return 200 "ok"`.

    python3 bench/nginxbench.py MODULE.so [--stores memory://,shm,redis]
        [--seconds 5] [--rounds 3] [--connections 32] [--workers 1]
        [--json]

Each store is a column: a store URI as ratelimit_store takes it, or
`redis` for a private redis-server this script starts
(tests/nginx_harness.py).  Every request is checked against one rule that
admits everything (token bucket, 10^9 per second, one key per client
address: wrk's one address is one hot key), so the figures are the
check's cost, not rejections'.  The configurations run in turns, each
round once each, and each figure is the median of its rounds; the ratio
is the module's figure over the reference's of the same run.  Never part
of make check.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests"))
from nginx_harness import Nginx, Redis  # noqa: E402

RULES = {"rules": [{"rule_id": "all", "dimension": "ip", "limit": 1000000000,
                    "window_seconds": 1, "algorithm": "token_bucket"}]}
PLAIN = '        location / { return 200 "ok"; }\n'
CHECKED = ('        location / { ratelimit on; '
           'ratelimit_dimension ip $remote_addr; return 200 "ok"; }\n')
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk(url, seconds, conns):
    """(requests/s, p99 ms, non-2xx) of one wrk run."""
    p = subprocess.run(["wrk", "-t1", f"-c{conns}", f"-d{seconds}s",
                        "--latency", url], capture_output=True, text=True)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", p.stdout).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", p.stdout)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", p.stdout)
    return rps, float(m.group(1)) * UNITS[m.group(2)], \
        int(bad.group(1)) if bad else 0


def start(args, store, rules):
    if store is None:
        return Nginx(None, server=PLAIN, workers=args.workers).start()
    http = f"ratelimit_store {store};\n    ratelimit_rules {rules};"
    return Nginx(args.module, http=http, server=CHECKED,
                 workers=args.workers).start()


def run(args, rules, stores):
    names = ["without module"] + [f"module, {s}" for s in stores]
    got = {n: [] for n in names}
    servers = [start(args, None, rules)] + \
        [start(args, uri, rules) for uri in stores.values()]
    try:
        for _ in range(args.rounds):
            for name, srv in zip(names, servers):
                got[name].append(wrk(srv.url("/"), args.seconds,
                                     args.connections))
    finally:
        for srv in servers:
            srv.stop()
    return names, got


def report(args, names, got):
    ref_rps = statistics.median(r[0] for r in got[names[0]])
    ref_p99 = statistics.median(r[1] for r in got[names[0]])
    for name in names:
        rps = statistics.median(r[0] for r in got[name])
        p99 = statistics.median(r[1] for r in got[name])
        bad = sum(r[2] for r in got[name])
        row = {"bench": "nginx", "config": name, "rps": round(rps),
               "p99_ms": round(p99, 3), "rps_ratio": round(rps / ref_rps, 3),
               "p99_ratio": round(p99 / ref_p99, 3), "non_2xx": bad,
               "workers": args.workers, "connections": args.connections,
               "seconds": args.seconds, "rounds": args.rounds}
        if args.json:
            print(json.dumps(row))
        else:
            print(f"{name:<28} {rps:>10.0f} req/s ({rps / ref_rps:5.2f}x)"
                  f"   p99 {p99:7.3f} ms ({p99 / ref_p99:5.2f}x)"
                  f"{'   NON-2XX %d' % bad if bad else ''}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module")
    ap.add_argument("--stores", default="memory://,shm,redis")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.module = os.path.abspath(args.module)
    tmp = tempfile.mkdtemp(prefix="rl-nginxbench-")
    rules = os.path.join(tmp, "rules.json")
    with open(rules, "w") as f:
        json.dump(RULES, f)
    redis = None
    stores = {}
    try:
        for s in args.stores.split(","):
            if s == "redis":
                redis = redis or Redis(tmp)
                stores["redis (private)"] = redis.uri
            elif s == "shm":  # a region of its own, removed by nginx's exit
                stores["shm:// (private)"] = f"shm://rl-nginxbench-{os.getpid()}"
            else:
                stores[s] = s
        if not args.json:
            print(f"wrk -t1 -c{args.connections} -d{args.seconds}s, nginx "
                  f"workers {args.workers}, median of {args.rounds} rounds")
        report(args, *run(args, rules, stores))
    finally:
        if redis:
            redis.stop()
        subprocess.run(["rm", "-rf", tmp])
    return 0


if __name__ == "__main__":
    sys.exit(main())
