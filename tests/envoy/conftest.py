"""Fixtures of ratelimit-envoy's tests: a configuration directory written
per test, a shm:// region of the test's own (unlinked after), real
redis-server processes (bindings/python/tests/redis_server.py), and the
services started on them, stopped however the test ends."""
import importlib.util
import os
import uuid

import pytest

import rls_client


def _redis_module():
    spec = importlib.util.spec_from_file_location(
        "redis_server", os.environ["RLS_REDIS_HELPER"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def config_dir(tmp_path):
    d = tmp_path / "config"
    d.mkdir()
    return d


@pytest.fixture
def shm_store():
    name = "rl-envoy-test-" + uuid.uuid4().hex[:12]
    yield "store=shm://" + name
    try:
        os.unlink("/dev/shm/" + name)
    except FileNotFoundError:
        pass


@pytest.fixture
def redis():
    mod = _redis_module()
    if not mod.available():
        pytest.skip("redis-server not found")
    r = mod.RedisServer().start()
    yield r
    r.stop()


@pytest.fixture
def services():
    """services(config, options=..., args=...) starts one; all stopped at
    the end."""
    started = []

    def start(config, options=(), args=()):
        s = rls_client.Service(None if config is None else str(config),
                               options, args).start()
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
