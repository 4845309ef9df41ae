"""The answer to one check, as a Python object.

:class:`Result` copies the library's rl_result (so it outlives the call and
can cross threads) and keeps the C struct for the header and body calls,
which format it exactly as a C caller's response would carry it.
"""
import ctypes
import enum

from . import _abi, _lib
from .errors import error_for


class Flags(enum.IntFlag):
    """rl_result.flags (RL_FLAG_*)."""
    SOFT = 0x01         # a rule in mode "log" would have rejected
    FAIL_OPEN = 0x02    # allowed because the store failed (open)
    FALLBACK = 0x04     # decided by the local fallback limiter
    CACHED = 0x08       # a Redis denial answered locally (deny_cache)
    NO_RULE = 0x10      # check(): no rule matched the request
    FAIL_CLOSED = 0x20  # denied because the store failed (closed)
    LEASED = 0x40       # allowed from units leased from Redis (a rule's lease)


class Result:
    """One decision.  Truthy when the request may pass.

    allowed, remaining, limit, window (seconds), reset_at (epoch s),
    reset_at_ms, retry_after (s, >= 1 when denied), retry_after_ms,
    flags (:class:`Flags`), rule_id (the deciding rule, "" if none).
    """

    __slots__ = ("_raw", "allowed", "remaining", "limit", "window",
                 "reset_at", "reset_at_ms", "retry_after", "retry_after_ms",
                 "flags", "rule_id")

    def __init__(self, raw):
        self._raw = raw
        self.allowed = bool(raw.allowed)
        self.remaining = raw.remaining
        self.limit = raw.limit
        self.window = raw.window
        self.reset_at = raw.reset_at
        self.reset_at_ms = raw.reset_at_ms
        self.retry_after = raw.retry_after
        self.retry_after_ms = raw.retry_after_ms
        self.flags = Flags(raw.flags)
        self.rule_id = raw.rule_id.decode("ascii", "replace")

    def __bool__(self):
        return self.allowed

    def __repr__(self):
        return (f"Result(allowed={self.allowed}, remaining={self.remaining}, "
                f"limit={self.limit}, retry_after={self.retry_after}, "
                f"rule_id={self.rule_id!r}, flags={self.flags!r})")

    def headers(self, ietf=False, draft10=False):
        """The response headers (rl_headers()) as a list of (name, value)
        str pairs: X-RateLimit-Limit, -Remaining, -Reset, Retry-After when
        denied, and with ietf=True RateLimit-Policy and RateLimit (draft-11
        meaning; draft10=True: the draft-10 one, rl_headers(3))."""
        out = (_abi.rl_header * _abi.RL_HEADERS_MAX)()
        n = _lib.lib().rl_headers(ctypes.byref(self._raw),
                                  _options(ietf, draft10),
                                  out, _abi.RL_HEADERS_MAX)
        if n < 0:
            raise error_for(n, "rl_headers failed")
        return [(h.name.decode("ascii"), h.value.decode("ascii"))
                for h in out[:n]]

    def headers_text(self, ietf=False, draft10=False):
        """The same as one "Name: value\\r\\n" block (rl_headers_format())."""
        buf = ctypes.create_string_buffer(_abi.RL_HEADERS_FORMAT_MAX)
        n = _lib.lib().rl_headers_format(ctypes.byref(self._raw),
                                         _options(ietf, draft10), buf,
                                         len(buf))
        if n < 0:
            raise error_for(n, "rl_headers_format failed")
        return buf.raw[:n].decode("ascii")

    def body(self):
        """The 429 body (rl_body_format()), bytes of JSON:
        b'{"error":"rate_limited","retryAfter":N}' when denied, b'' when
        allowed."""
        buf = ctypes.create_string_buffer(_abi.RL_BODY_FORMAT_MAX)
        n = _lib.lib().rl_body_format(ctypes.byref(self._raw), buf, len(buf))
        if n < 0:
            raise error_for(n, "rl_body_format failed")
        return buf.raw[:n]


def _options(ietf, draft10):
    if draft10 and not ietf:
        raise ValueError("draft10=True needs ietf=True")
    return ((_abi.RL_HEADERS_IETF if ietf else 0) |
            (_abi.RL_HEADERS_DRAFT10 if draft10 else 0))
