"""nginx_install.py -- ngx_http_ratelimit_module as an operator installs and
runs it, in the real nginx (tests/nginx_harness.py), driven by curl.

    python3 tests/nginx_install.py MODULE.so [INSTALLED.conf]

  - a shm:// region that exists and that the workers' user cannot open
    (made by root, mode 0600, as a root rlctl check would leave it): `nginx
    -t` fails and a start exits, each naming the region, its owner and the
    workers' user, instead of a master listening with no worker; a
    reload to it is refused and the running workers go on serving; one
    the workers' group may read and write passes;
  - a region a reload drops is kept while the master runs (its old workers
    may still count in it) and removed when the master quits, with the one
    configured then;
  - INSTALLED.conf, the load_module snippet `make install` wrote
    (tests/nginx_install.sh installs into a prefix of its own): included
    as Debian's modules-enabled/ links are, the installed module limits.

Prints PASS/FAIL lines; exit 0 when all passed, 1 otherwise.
"""
import os
import pwd
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nginx_harness import (NGINX, Checks, Nginx, curl, setup_test,  # noqa: E402
                           wait_for)

RULES = ('{"version":1,"rules":[{"rule_id":"r","dimension":"user",'
         '"limit":2,"window_seconds":86400,"algorithm":"token_bucket"}]}')
SERVER = """
        location / {
            ratelimit on;
            ratelimit_dimension user $arg_user;
            return 200 "ok\\n";
        }
"""

check = Checks()


def region(tag):
    """A region name of this run (make check runs suites side by side)."""
    return f"rl-install-{os.getpid()}-{tag}"


def http_for(name, rules):
    return f"ratelimit_store shm://{name};\n    ratelimit_rules {rules};"


def test_foreign_region(module, rules):
    name = region("foreign")
    path = "/dev/shm/" + name
    # as root the workers run as nobody: a root region of mode 0600 shuts
    # them out; otherwise a region of our own without read/write does
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR,
                 0o600 if os.geteuid() == 0 else 0)
    os.ftruncate(fd, 1 << 20)
    os.close(fd)
    n = Nginx(module, http=http_for(name, rules), server=SERVER)
    try:
        rc, out = n.test()
        check(rc != 0 and path in out and "cannot open it" in out,
              f"nginx -t refuses a region the workers cannot open: "
              f"{[l for l in out.splitlines() if 'ratelimit' in l] or rc}")
        proc = subprocess.Popen(
            [NGINX, "-p", n.prefix, "-c", n.conf, "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, err = proc.communicate(timeout=10)
            check(proc.returncode != 0 and path in err,
                  f"a start exits ({proc.returncode}) and says why")
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            status = curl(n.url("/?user=a"), timeout=2)[0]
            check(False, "a start with a region the workers cannot open "
                  f"keeps a master running (a request: status {status})")
        check(os.path.exists(path), "the region is left alone")
        # a reload to it is refused: the running workers go on serving
        good = region("good")
        with open(n.conf) as f:
            conf = f.read()
        with open(n.conf, "w") as f:
            f.write(conf.replace(name, good))
        n.start()
        with open(n.conf, "w") as f:
            f.write(conf)
        n.proc.send_signal(signal.SIGHUP)
        refused = wait_for(lambda: path in n.log())
        check(refused and n.proc.poll() is None and
              curl(n.url("/?user=h"))[0] == 200,
              "a reload to it is refused, logged, and nginx goes on serving")
    finally:
        n.stop()
        os.unlink(path)


def test_group_region(module, rules):
    """Not a false refusal: a root region the workers' group may read and
    write passes nginx -t and a reload, and the workers keep counting."""
    if os.geteuid() != 0:
        print("SKIP: a region of another owner needs root")
        return
    name = region("group")
    path = "/dev/shm/" + name
    n = Nginx(module, http=http_for(name, rules), server=SERVER)
    try:
        n.start()
        first = curl(n.url("/?user=g"))[0]
        os.chown(path, 0, pwd.getpwnam("nobody").pw_gid)
        os.chmod(path, 0o660)
        rc, out = n.test()
        n.proc.send_signal(signal.SIGHUP)
        # the reload's new workers open it: the limit of 2 goes on
        check(first == 200 and rc == 0 and
              wait_for(lambda: curl(n.url("/?user=g"))[0] == 429),
              f"a root region of mode 0660 in the workers' group: nginx -t "
              f"{rc}, the reload's workers count on in it")
    finally:
        n.stop()


def test_reload_drops_region(module, rules):
    a, b = region("before"), region("after")
    n = Nginx(module, http=http_for(a, rules), server=SERVER, workers=2)
    try:
        n.start()
        check(curl(n.url("/?user=r"))[0] == 200 and
              wait_for(lambda: os.path.exists("/dev/shm/" + a)),
              f"shm://{a} is made by the workers")
        with open(n.conf) as f:
            conf = f.read()
        with open(n.conf, "w") as f:
            f.write(conf.replace(a, b))
        n.proc.send_signal(signal.SIGHUP)
        check(wait_for(lambda: os.path.exists("/dev/shm/" + b)) and
              wait_for(lambda: curl(n.url("/?user=r"))[0] == 200),
              f"after a reload to shm://{b} the new workers made it")
        check(os.path.exists("/dev/shm/" + a),
              "the dropped region stays while the master runs")
    finally:
        n.stop()
    gone = [r for r in (a, b) if not os.path.exists("/dev/shm/" + r)]
    check(len(gone) == 2, f"the master quit and removed both regions "
          f"(removed: {gone})")
    for r in (a, b):
        if r not in gone:
            os.unlink("/dev/shm/" + r)


def test_installed(snippet, rules):
    with open(snippet) as f:
        text = f.read()
    so = text.split()[1].rstrip(";")
    check(text.startswith("load_module /") and os.path.isfile(so),
          f"the snippet loads the installed module: {text.strip()}")
    n = Nginx(snippet, http=f"ratelimit_store memory://;\n"
              f"    ratelimit_rules {rules};", server=SERVER)
    try:
        n.start()
        codes = [curl(n.url("/?user=i"))[0] for _ in range(3)]
        check(codes == [200, 200, 429],
              f"nginx with the installed module limits ({codes})")
    finally:
        n.stop()


def main():
    module, tmp, rules = setup_test("rl-nginx-install-", RULES)
    try:
        test_foreign_region(module, rules)
        test_group_region(module, rules)
        test_reload_drops_region(module, rules)
        if len(sys.argv) > 2:
            test_installed(sys.argv[2], rules)
    finally:
        subprocess.run(["rm", "-rf", tmp])
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
