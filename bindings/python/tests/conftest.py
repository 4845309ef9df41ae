"""Fixtures of the Python binding's tests: the package and the examples
on sys.path, and real redis-servers (redis_server.py).

Run by `make check` through bindings/python/run-tests.sh, which points
RATELIMIT_LIBRARY at the library just built; by hand:
    RATELIMIT_LIBRARY=$PWD/.libs/libratelimit.so.1 \\
        /usr/bin/python3 -m pytest bindings/python/tests
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))                      # ratelimit
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
sys.path.insert(0, HERE)                                       # redis_server

import redis_server  # noqa: E402


@pytest.fixture(scope="session")
def redis():
    """One redis-server for the tests that do not stop it."""
    if not redis_server.available():
        pytest.skip("redis-server is not installed")
    server = redis_server.RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def own_redis():
    """A redis-server of the test's own, for tests that stop it."""
    if not redis_server.available():
        pytest.skip("redis-server is not installed")
    server = redis_server.RedisServer().start()
    yield server
    server.stop()
