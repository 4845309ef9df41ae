"""libratelimit from Python: ctypes over the library's C ABI, standard
library only.

    from ratelimit import Limiter

    with Limiter("redis://127.0.0.1:6379", rules="rules.json",
                 timeout_ms=20) as lim:
        res = lim.check(endpoint="/search", tier="free", user="42")
        if not res:
            status, headers, body = 429, res.headers(), res.body()

The library is found through RATELIMIT_LIBRARY, the source tree this
package sits in, then the system (see _lib.py).  Every call releases the
GIL while it runs.

Installed with pip as the distribution "libratelimit" (pyproject.toml:
pip install ./bindings/python); the import name is "ratelimit".
"""
from . import _lib
from .errors import (BufferTooSmallError, BusyError, ErrorCode,
                     FileReadError, InvalidArgumentError, NoSuchRuleError,
                     OptionError, OutOfMemoryError, RateLimitError,
                     RuleError, RuleParseError, SettledError, StoreError)
from .limiter import Limiter, Reservation
from .result import Flags, Result

__all__ = [
    "Limiter", "Result", "Flags", "ErrorCode", "RateLimitError",
    "InvalidArgumentError", "OutOfMemoryError", "NoSuchRuleError",
    "RuleError", "RuleParseError", "FileReadError", "OptionError",
    "StoreError", "BufferTooSmallError", "BusyError", "library_version",
    "Reservation", "SettledError",
]


def library_version():
    """The loaded library's version string, e.g. "1.1.0"."""
    return _lib.lib().rl_version_string().decode("ascii")
