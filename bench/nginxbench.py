"""nginxbench.py -- what ngx_http_ratelimit_module costs nginx beside
nginx's own limit_req (requests/s, CPU and p99 from wrk; --callgrind:
instructions a request).  Method: docs/BENCHMARKS.md, "How each bench
measures".  Never part of make check.

    python3 bench/nginxbench.py MODULE.so [--stores memory://,shm,redis]
        [--workers 1,2] [--seconds 5] [--rounds 3] [--connections 32]
        [--syscalls] [--callgrind] [--baseline OLD.so] [--json]
        [--rules RULES.json]
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests"))
import nginx_harness  # noqa: E402
from nginx_harness import Nginx, Redis  # noqa: E402

RULES = {"rules": [{"rule_id": "all", "dimension": "ip", "limit": 1000000000,
                    "window_seconds": 1, "algorithm": "token_bucket"}]}
PLAIN = '        location / { empty_gif; }\n'
LIMIT_REQ = ("    limit_req_zone $binary_remote_addr zone=bench:10m "
             "rate=1000000000r/s;",
             "        location / { limit_req zone=bench burst=1000000 "
             "nodelay; empty_gif; }\n")
CHECKED = ('        location / {{ ratelimit on; ratelimit_headers {}; '
           'ratelimit_dimension ip $remote_addr; empty_gif; }}\n')
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def workers_of(srv, n):
    """The pids of srv's n workers (the master's children)."""
    path = f"/proc/{srv.proc.pid}/task/{srv.proc.pid}/children"
    for _ in range(500):
        with open(path) as f:
            pids = [int(p) for p in f.read().split()]
        if len(pids) == n:
            return pids
        time.sleep(0.01)
    raise RuntimeError(f"nginx has {len(pids)} workers, not {n}")


def cpu_ns(pids):
    """Run time of every thread of pids, ns."""
    total = 0
    for pid in pids:
        for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
            try:
                with open(f) as s:
                    total += int(s.read().split()[0])
            except OSError:  # a thread gone meanwhile
                pass
    return total


def user_ticks(pids):
    """User time of pids (every thread's), clock ticks (/proc/PID/stat)."""
    total = 0
    for p in pids:
        with open(f"/proc/{p}/stat") as f:
            total += int(f.read().rsplit(")", 1)[1].split()[11])
    return total


def wrk(srv, args, pids):
    """(requests/s, CPU us a request, p99 ms, non-2xx, user us a request)
    of one wrk run."""
    t0, u0 = cpu_ns(pids), user_ticks(pids)
    p = subprocess.run(["wrk", "-t1", f"-c{args.connections}",
                        f"-d{args.seconds}s", "--latency", srv.url("/")],
                       capture_output=True, text=True)
    cpu, user = cpu_ns(pids) - t0, user_ticks(pids) - u0
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", p.stdout).group(1))
    n = int(re.search(r"(\d+) requests in", p.stdout).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", p.stdout)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", p.stdout)
    return (rps, cpu / 1e3 / max(n, 1), float(m.group(1)) * UNITS[m.group(2)],
            int(bad.group(1)) if bad else 0,
            user * 1e6 / os.sysconf("SC_CLK_TCK") / max(n, 1))


def syscalls(srv, args, pids):
    """The workers' system calls a request, one wrk run under strace."""
    out = os.path.join(srv.prefix, "strace.txt")
    st = subprocess.Popen(["strace", "-c", "-f", "-o", out] +
                          [a for p in pids for a in ("-p", str(p))],
                          stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    p = subprocess.run(["wrk", "-t1", f"-c{args.connections}",
                        f"-d{args.seconds}s", srv.url("/")],
                       capture_output=True, text=True)
    st.terminate()
    st.wait()
    n = int(re.search(r"(\d+) requests in", p.stdout).group(1))
    with open(out) as f:  # % time, seconds, usecs/call, calls, [errors]
        total = [ln.split() for ln in f if ln.rstrip().endswith(" total")]
    return int(total[-1][3]) / max(n, 1)


def start(args, workers, conf, rules):
    if conf is None:
        return Nginx(None, server=PLAIN, workers=workers).start()
    if conf == "limit_req":
        return Nginx(None, http=LIMIT_REQ[0], server=LIMIT_REQ[1],
                     workers=workers).start()
    module, conf, hdr = conf if isinstance(conf, tuple) else (
        args.module, conf, "on")
    http = f"ratelimit_store {conf};\n    ratelimit_rules {rules};"
    return Nginx(module, http=http, server=CHECKED.format(hdr),
                 workers=workers).start()


def configs(args, stores, tag):
    """Each configuration's name and what start() takes for it."""
    confs = {"without a limit": None, "limit_req": "limit_req"}
    confs.update({f"module, {s}": uri for s, uri in stores.items()})
    for s, uri in stores.items():  # limit_req's behaviour: no headers sent
        if uri.startswith("shm://"):  # on admissions (its own region)
            confs[f"module, {s}, headers denied"] = (
                args.module, f"{uri}-{tag}denied", "denied")
    if args.baseline:  # another build of the module, on its own shm://
        confs["baseline, shm://"] = (args.baseline, "shm://rl-nginxbench-"
                                     f"{os.getpid()}-{tag}baseline", "on")
    return confs


def run(args, workers, rules, stores):
    confs = configs(args, stores, f"{workers}-")
    got = {n: [] for n in confs}
    servers = {n: start(args, workers, c, rules) for n, c in confs.items()}
    try:
        pids = {n: workers_of(s, workers) for n, s in servers.items()}
        for _ in range(args.rounds):
            for n, srv in servers.items():
                got[n].append(wrk(srv, args, pids[n]))
        sc = {n: syscalls(srv, args, pids[n]) for n, srv in servers.items()
              } if args.syscalls else {}
    finally:
        for srv in servers.values():
            srv.stop()
    return got, sc


# nginx in one process under callgrind, the harness's command line kept.
VG_NGINX = """#!/bin/sh
for a; do shift
[ "$a" = "daemon off;" ] && a="daemon off; master_process off;"
set -- "$@" "$a"; done
exec valgrind --tool=callgrind --callgrind-out-file={out}/cg.%p {nginx} "$@"
"""


def callgrind(args, rules, stores, tmp):
    """Instructions a request of each configuration, ratios to limit_req."""
    wrap = os.path.join(tmp, "vg-nginx.sh")
    with open(wrap, "w") as f:
        f.write(VG_NGINX.format(out=tmp, nginx=nginx_harness.NGINX))
    os.chmod(wrap, 0o755)
    nginx_harness.NGINX, nginx_harness.START_TIMEOUT_S = wrap, 120
    ipr = {}
    for n, conf in configs(args, stores, "").items():
        srv = start(args, 1, conf, rules)
        pid, url = str(srv.proc.pid), srv.url("/")
        try:
            wrk_n = ["wrk", "-t1", "-c4", f"-d{args.seconds}s", url]
            subprocess.run(wrk_n[:3] + ["-d1s", url], capture_output=True)
            ctl = ["callgrind_control", "-z", pid]
            subprocess.run(ctl, capture_output=True)
            out = subprocess.run(wrk_n, capture_output=True, text=True).stdout
            subprocess.run(ctl[:1] + ["-d", pid], capture_output=True)
            with open(os.path.join(tmp, f"cg.{pid}.1"), errors="replace") as f:
                ir = int(re.search(r"^summary: (\d+)", f.read(),
                                   re.M).group(1))
            ipr[n] = ir / int(re.search(r"(\d+) requests in", out).group(1))
        finally:
            srv.stop()
    for n, i in ipr.items():
        ratio = i / ipr["limit_req"]
        print(json.dumps({"bench": "nginx", "config": n,
                          "instructions": round(i), "ratio": round(ratio, 3)})
              if args.json else
              f"1 {n:<40} {i:8.0f} instructions a request ({ratio:4.2f}x)")


def report(args, workers, got, sc):
    med = {n: [statistics.median(r[i] for r in rows) for i in (0, 1, 2, 4)]
           for n, rows in got.items()}
    ref = med["limit_req"]
    for n, (rps, cpu, p99, user) in med.items():
        bad = sum(r[3] for r in got[n])
        row = {"bench": "nginx", "workers": workers, "config": n,
               "rps": round(rps), "cpu_us": round(cpu, 2),
               "p99_ms": round(p99, 3), "rps_ratio": round(rps / ref[0], 3),
               "cpu_ratio": round(cpu / ref[1], 3), "user_us": round(user, 2),
               "p99_ratio": round(p99 / ref[2], 3), "non_2xx": bad,
               "connections": args.connections, "seconds": args.seconds,
               "rounds": args.rounds}
        if n in sc:
            row["syscalls"] = round(sc[n], 2)
        if args.json:
            print(json.dumps(row))
            continue
        print(f"{workers} {n:<40} {rps:>8.0f} req/s ({rps / ref[0]:4.2f}x)"
              f" {cpu:6.2f} us CPU ({cpu / ref[1]:4.2f}x, user {user:5.2f})"
              f" p99 {p99:7.3f} ms ({p99 / ref[2]:4.2f}x)"
              + (f" {sc[n]:5.2f} syscalls" if n in sc else "")
              + (f" NON-2XX {bad}" if bad else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module")
    ap.add_argument("--stores", default="memory://,shm,redis")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--syscalls", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--rules", help="a rule set of one's own (JSON file) "
                    "instead of the one ip rule")
    ap.add_argument("--baseline", help="another build of the module: a "
                    "column of its own on shm://, in the same rounds")
    args = ap.parse_args()
    args.module = os.path.abspath(args.module)
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
    tmp = tempfile.mkdtemp(prefix="rl-nginxbench-")
    rules = os.path.abspath(args.rules) if args.rules else os.path.join(
        tmp, "rules.json")
    if not args.rules:
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
        if args.callgrind:
            return callgrind(args, rules, stores, tmp)
        if not args.json:
            print(f"wrk -t1 -c{args.connections} -d{args.seconds}s, median "
                  f"of {args.rounds} rounds, ratios to limit_req; "
                  f"load {os.getloadavg()[0]:.1f}")
        for w in (int(w) for w in args.workers.split(",")):
            report(args, w, *run(args, w, rules, stores))
    finally:
        if redis:
            redis.stop()
        subprocess.run(["rm", "-rf", tmp])
    return 0


if __name__ == "__main__":
    sys.exit(main())
