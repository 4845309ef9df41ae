"""nginx_harness.py -- real nginx and redis-server processes for the nginx
module's tests (tests/nginx_module.py, tests/nginx_install.py) and
benchmark (bench/nginxbench.py), and the tests' PASS/FAIL count.

Each server runs in the foreground of a child process (nginx with
`-g 'daemon off;'`, redis-server without daemonize) on a free loopback
port, nginx with a prefix of its own under a temporary directory; stop()
ends it by its pid and waits.  Requests go through curl, the client an
operator would use.  Python standard library only.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

NGINX = os.environ.get("NGINX", "/usr/sbin/nginx")
REDIS_SERVER = os.environ.get("REDIS_SERVER", "redis-server")
START_TIMEOUT_S = 10.0


def free_port():
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what):
    """Wait until port accepts a connection; fail if proc died first."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"{what} does not listen on {port}")


class Redis:
    """A private redis-server: no persistence, loopback only."""

    def __init__(self, tmp):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc, "redis-server")

    @property
    def uri(self):
        return f"redis://127.0.0.1:{self.port}"

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def unread_bytes(self):
        """Bytes its clients sent that the server has not read yet, summed
        over its established connections (/proc/net/tcp*): above 0 while
        a stopped server has a request waiting."""
        port = f"{self.port:04X}"
        total = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    rows = f.readlines()[1:]
            except OSError:
                continue
            for row in rows:
                field = row.split()
                if field[1].endswith(":" + port) and field[3] == "01":
                    total += int(field[4].split(":")[1], 16)
        return total

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()


CONF = """{load}
error_log {prefix}/error.log info;
pid {prefix}/nginx.pid;
worker_processes {workers};
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp;
    proxy_temp_path {prefix}/tmp;
    fastcgi_temp_path {prefix}/tmp;
    uwsgi_temp_path {prefix}/tmp;
    scgi_temp_path {prefix}/tmp;
{http}
    server {{
        listen 127.0.0.1:{port};
{server}
    }}
}}
"""


class Nginx:
    """One nginx instance: module (a .so path, a load_module snippet to
    include (a .conf path), or None for none), the http block's extra
    text, the server block's text."""

    def __init__(self, module, http="", server="", workers=1):
        self.prefix = tempfile.mkdtemp(prefix="rl-nginx-")
        os.mkdir(os.path.join(self.prefix, "tmp"))
        self.port = free_port()
        self.conf = os.path.join(self.prefix, "nginx.conf")
        load = ""
        if module:
            load = (f"include {module};" if module.endswith(".conf")
                    else f"load_module {module};")
        with open(self.conf, "w") as f:
            f.write(CONF.format(load=load, prefix=self.prefix,
                                workers=workers, port=self.port, http=http,
                                server=server))
        self.proc = None

    def test(self):
        """`nginx -t`: (exit status, what it printed)."""
        p = subprocess.run([NGINX, "-t", "-p", self.prefix, "-c", self.conf],
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr

    def start(self):
        """Start nginx; return once it takes signals.  Its master listens
        (ngx_init_cycle) before it installs its signal handlers
        (ngx_init_signals), and a SIGHUP in between ends it (the default
        action): so wait for the pid file too, which it writes after."""
        self.proc = subprocess.Popen(
            [NGINX, "-p", self.prefix, "-c", self.conf, "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_port(self.port, self.proc, "nginx")
        if not wait_for(lambda: self.pid_file() == self.proc.pid or
                        self.proc.poll() is not None):
            raise RuntimeError("nginx wrote no pid file")
        if self.proc.poll() is not None:
            raise RuntimeError(f"nginx exited with {self.proc.returncode}")
        return self

    def pid_file(self):
        """The pid in nginx.pid (the master's, once it takes signals), or
        None."""
        try:
            with open(os.path.join(self.prefix, "nginx.pid")) as f:
                return int(f.read().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def log(self):
        with open(os.path.join(self.prefix, "error.log")) as f:
            return f.read()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: workers exit
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        subprocess.run(["rm", "-rf", self.prefix])


def wait_for(condition, timeout=START_TIMEOUT_S):
    """Poll condition() until it is true (True) or timeout seconds have
    passed (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def curl(url, timeout=10, extra=()):
    """GET url with curl: (status, {lower-case header: value}, body)."""
    p = subprocess.run(["curl", "-s", "-i", "--max-time", str(timeout),
                        *extra, url], capture_output=True)
    raw = p.stdout.decode("latin-1")
    head, _, body = raw.partition("\r\n\r\n")
    lines = head.split("\r\n")
    if not lines[0].startswith("HTTP/"):
        return 0, {}, ""
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def setup_test(prefix, rules):
    """A test's start: the module named by argv[1] as an absolute path, a
    temporary directory (prefix...) and the rule set (a dict, or JSON text)
    written to rules.json in it: (module, tmp, rules_path)."""
    module = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix=prefix)
    path = os.path.join(tmp, "rules.json")
    with open(path, "w") as f:
        f.write(rules if isinstance(rules, str) else json.dumps(rules))
    return module, tmp, path


class Checks:
    """The tests' results: check(ok, what) prints a PASS or FAIL line and
    counts it; summary() prints the counts and gives the exit status."""

    def __init__(self):
        self.passed = self.failed = 0

    def __call__(self, ok, what):
        print(("PASS: " if ok else "FAIL: ") + what, flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1

    def summary(self):
        print(f"{self.passed} passed, {self.failed} failed")
        return 0 if self.failed == 0 else 1
