"""A real redis-server for the binding's tests, as tests/redis_harness.c
runs one for the C suites: a child of the test process on a free
loopback port, in a fresh temp dir, no persistence, killed with the
process however it ends (PR_SET_PDEATHSIG) and stopped by stop().
"""
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

PR_SET_PDEATHSIG = 1
START_TIMEOUT_S = 10


def available():
    return shutil.which("redis-server") is not None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RedisServer:
    """start() / stop(); stop_process() and cont() send SIGSTOP and
    SIGCONT; command() sends one command and returns the raw reply."""

    def __init__(self):
        self.proc = None
        self.port = 0
        self.dir = None

    @property
    def uri(self):
        return f"redis://127.0.0.1:{self.port}"

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="rl-py-redis-")
        for _ in range(5):  # a port taken between the probe and the bind
            self.port = free_port()
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind",
                 "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
                 self.dir, "--logfile", os.path.join(self.dir, "log")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                preexec_fn=_die_with_parent)
            if self._wait_ping():
                return self
            self._kill()
        raise RuntimeError("redis-server did not start: " + self._log())

    def _wait_ping(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if self.command("PING") == b"+PONG\r\n":
                    return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def _log(self):
        try:
            with open(os.path.join(self.dir, "log")) as f:
                return f.read()[-2000:]
        except OSError:
            return "(no log)"

    def command(self, *args, timeout=5):
        with socket.create_connection(("127.0.0.1", self.port),
                                      timeout=timeout) as s:
            s.sendall(_encode(args))
            return s.recv(65536)

    def stop_process(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def cont(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def _kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        if self.proc:
            if self.proc.poll() is None:
                self.cont()
            self._kill()
            self.proc = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
