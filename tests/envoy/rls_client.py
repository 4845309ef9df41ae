"""ratelimit-envoy driven by a real gRPC client: Debian's python3-grpcio
with messages protoc generated from the project's .proto copies
(run-tests.sh puts them in RLS_PB_DIR).  python3-grpc-tools is too old for
Debian 12's protobuf, so there is no generated stub: methods are called by
path with channel.unary_unary and the messages' own (de)serializers.
Service processes are children of the test, killed with it
(PR_SET_PDEATHSIG), on a port the kernel chose (-l 127.0.0.1:0: the
service prints it).
"""
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")  # run-tests.sh
import grpc  # noqa: E402

sys.path.insert(0, os.environ["RLS_PB_DIR"])
from envoy.service.ratelimit.v3 import rls_pb2  # noqa: E402
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2  # noqa: E402

Request = rls_pb2.RateLimitRequest
Response = rls_pb2.RateLimitResponse
Descriptor = ratelimit_pb2.RateLimitDescriptor
OK = Response.OK
OVER = Response.OVER_LIMIT
RLS_METHOD = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
HEALTH_METHOD = "/grpc.health.v1.Health/Check"
BINARY = os.environ["RATELIMIT_ENVOY"]
START_TIMEOUT_S = 20


def _die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def desc(*entries, limit=None, hits=None):
    """desc(("k", "v"), ...; limit=(rpu, unit), hits=n)"""
    d = Descriptor()
    for k, v in entries:
        e = d.entries.add()
        e.key, e.value = k, v
    if limit is not None:
        d.limit.requests_per_unit, d.limit.unit = limit
    if hits is not None:
        d.hits_addend.value = hits
    return d


def request(domain, *descriptors, hits=0):
    r = Request(domain=domain, hits_addend=hits)
    r.descriptors.extend(descriptors)
    return r


class Service:
    """One ratelimit-envoy process: start(), call(), health(), signal(),
    stop()."""

    def __init__(self, config, options=(), args=()):
        """config None: no -c (the rules from -o rules_source=...)."""
        self.config, self.options, self.args = config, options, args
        self.proc = self.channel = None
        self.port = self.metrics_port = 0
        self.log = tempfile.TemporaryFile()

    def start(self):
        argv = [BINARY, "-l", "127.0.0.1:0"]
        if self.config is not None:
            argv += ["-c", self.config]
        for o in self.options:
            argv += ["-o", o]
        argv += list(self.args)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                     stderr=self.log,
                                     preexec_fn=_die_with_parent)
        line = self.proc.stdout.readline().decode()
        if "port" not in line:
            self.proc.wait(timeout=START_TIMEOUT_S)
            raise RuntimeError("ratelimit-envoy did not start: " +
                               self.stderr())
        self.port = int(line.split("port ")[1].split()[0])
        if "--metrics-listen" in self.args:  # its port on the next line
            line = self.proc.stdout.readline().decode()
            if "metrics on" not in line:
                raise RuntimeError("no metrics listener: " + self.stderr())
            self.metrics_port = int(line.split("port ")[1].split()[0])
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        grpc.channel_ready_future(self.channel).result(timeout=START_TIMEOUT_S)
        self._rls = self.channel.unary_unary(
            RLS_METHOD, request_serializer=Request.SerializeToString,
            response_deserializer=Response.FromString)
        self._health = self.channel.unary_unary(
            HEALTH_METHOD, request_serializer=lambda b: b,
            response_deserializer=lambda b: b)
        return self

    def call(self, req, timeout=10):
        return self._rls(req, timeout=timeout)

    def future(self, req, timeout=10):
        return self._rls.future(req, timeout=timeout)

    def raw(self, method, payload, timeout=10):
        return self.channel.unary_unary(
            method, request_serializer=lambda b: b,
            response_deserializer=lambda b: b)(payload, timeout=timeout)

    def health(self, service=b"", timeout=10):
        body = b"\x0a" + bytes([len(service)]) + service if service else b""
        return self._health(body, timeout=timeout)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stderr(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def wait_log(self, text, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.stderr():
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        if self.channel:
            self.channel.close()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None
