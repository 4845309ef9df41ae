"""Finding and loading libratelimit.

In this order: the file named by the environment variable
RATELIMIT_LIBRARY; the library of the source tree this package sits in
(an in-tree build's .libs/libratelimit.so.1, for running the examples
from a checkout); then the system's, through ctypes.util.find_library
and the dynamic linker (after `make install`, its cache: a root install
runs ldconfig; a libdir outside /etc/ld.so.conf.d needs an entry there,
or LD_LIBRARY_PATH).
The library is loaded once, with ctypes.CDLL: every foreign call releases
the GIL, so a check that waits for Redis lets the other Python threads
run.  A library of another major version than the ABI mirrored here
(_abi.py) is refused.
"""
import ctypes
import ctypes.util
import os
import threading

from . import _abi

ENV_VAR = "RATELIMIT_LIBRARY"
SONAME = "libratelimit.so.1"
ABI_MAJOR = 1

_lock = threading.Lock()
_lib = None


def _candidates():
    env = os.environ.get(ENV_VAR)
    if env:
        # Named explicitly: that one or nothing.
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.normpath(os.path.join(here, "..", "..", "..", ".libs",
                                         SONAME))
    found = [tree] if os.path.exists(tree) else []
    system = ctypes.util.find_library("ratelimit")
    found.append(system or SONAME)
    return found


def _open():
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            errors.append(f"{path}: {exc}")
            continue
        _abi.declare(lib)
        major = lib.rl_version() // 10000
        if major != ABI_MAJOR:
            errors.append(f"{path}: version {major}, this binding needs "
                          f"{ABI_MAJOR}")
            continue
        return lib
    raise OSError("libratelimit not found (set " + ENV_VAR + "): " +
                  "; ".join(errors))


def lib():
    """The loaded library (loaded on first use)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib = _open()
    return _lib
