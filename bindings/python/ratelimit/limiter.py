"""Limiter: one rl_limiter, its configuration, checks and rules.

Each method is one call into the library (ctypes.CDLL: the GIL is
released for its duration, so threads waiting on Redis do not stop the
others).  One Limiter serves any number of threads, as an rl_limiter
does; close() waits for the calls in progress in other threads before it
frees the handle, so closing never races a check.
"""
import ctypes
import json
import os
import threading

from . import _abi, _lib
from .errors import ErrorCode, InvalidArgumentError, error_for
from .result import Result

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# rl_log_fn: void (*)(void *arg, int level, const char *msg)
_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int,
                           ctypes.c_char_p)


def _bytes(value, what):
    """value as the NUL-terminated bytes the C API takes (None stays)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = value.encode("utf-8")
    elif not isinstance(value, (bytes, bytearray)):
        raise TypeError(f"{what}: expected str or bytes, got "
                        f"{type(value).__name__}")
    if b"\0" in value:
        raise InvalidArgumentError(ErrorCode.RL_EINVAL,
                                   f"{what}: contains a NUL byte")
    return bytes(value)


def _option_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _cost(cost):
    if isinstance(cost, bool) or not isinstance(cost, int):
        raise TypeError(f"cost: expected int, got {type(cost).__name__}")
    if not _INT64_MIN <= cost <= _INT64_MAX:
        raise InvalidArgumentError(
            ErrorCode.RL_EINVAL,
            f"cost: must be 0..{_abi.RL_COST_MAX}, got {cost}")
    return cost


def rules_kind(rules):
    """("json", text) or ("file", path) for a rules argument: a dict or
    list (dumped to JSON), bytes or a str starting with '{' (JSON text),
    any other str or an os.PathLike (a file's path)."""
    if isinstance(rules, (dict, list)):
        return "json", json.dumps(rules)
    if isinstance(rules, (bytes, bytearray)):
        return "json", bytes(rules).decode("utf-8")
    if isinstance(rules, os.PathLike):
        return "file", os.fspath(rules)
    if isinstance(rules, str):
        if rules.lstrip().startswith("{"):
            return "json", rules
        return "file", rules
    raise TypeError("rules: expected a path, JSON text or a dict, got "
                    f"{type(rules).__name__}")


class Limiter:
    """A rate limiter on a store.

    ``Limiter(store="memory://", rules=None, log=None, **options)``:
    store is a URI (memory://, redis://, unix://, redis-cluster://, ...);
    rules a path, JSON text or a dict (taken at creation: options rules /
    rules_file); each keyword option is an rl_config_set() option (values
    converted with str(), booleans to 1/0).  log: None, the library's
    default (stderr); False, silence; or a callable(level, message) called
    from the limiter's own threads (level is syslog's: 3 error, 4 warning,
    6 info).  Raises OptionError, RuleError, RuleParseError, FileReadError,
    StoreError... with the library's message.
    """

    def __init__(self, store="memory://", rules=None, *, log=None,
                 **options):
        self._lib = _lib.lib()
        self._cond = threading.Condition()
        self._users = 0
        self._handle = None
        self._log_fn = None
        settings = [("store", store)]
        if rules is not None:
            kind, value = rules_kind(rules)
            settings.append(("rules" if kind == "json" else "rules_file",
                             value))
        settings.extend(options.items())
        cfg = self._lib.rl_config_new()
        if not cfg:
            raise error_for(ErrorCode.RL_ENOMEM, "rl_config_new failed")
        try:
            for name, value in settings:
                self._config_set(cfg, name, value)
            self._set_log(cfg, log)
            handle = ctypes.c_void_p()
            rc = self._lib.rl_limiter_new(ctypes.byref(handle), cfg)
            if rc != 0:
                raise self._error(rc, None)
            self._handle = handle.value
        finally:
            self._lib.rl_config_free(cfg)

    def _config_set(self, cfg, name, value):
        rc = self._lib.rl_config_set(cfg, _bytes(name, "option name"),
                                     _bytes(_option_value(value), name))
        if rc != 0:
            raise self._error(rc, None)

    def _set_log(self, cfg, log):
        if log is None:
            return
        if log is False:
            self._lib.rl_config_set_log(cfg, None, None)
            return
        if not callable(log):
            raise TypeError("log: expected None, False or a callable")

        def deliver(_arg, level, msg):
            try:
                log(level, msg.decode("utf-8", "replace"))
            except Exception:  # never let an exception into a C thread
                pass
        # Kept on self for as long as the limiter can call it.
        self._log_fn = _LOG_FN(deliver)
        self._lib.rl_config_set_log(
            cfg, ctypes.cast(self._log_fn, ctypes.c_void_p), None)

    # ---- the handle's users ------------------------------------------
    def _enter(self):
        with self._cond:
            if self._handle is None:
                raise InvalidArgumentError(ErrorCode.RL_EINVAL,
                                           "the limiter is closed")
            self._users += 1
            return self._handle

    def _leave(self):
        with self._cond:
            self._users -= 1
            if self._users == 0:
                self._cond.notify_all()

    def _error(self, rc, handle):
        """The exception for rc, with the message this thread's failed
        call on handle left (rl_errmsg is per thread)."""
        msg = self._lib.rl_errmsg(handle) or b""
        if not msg:
            msg = self._lib.rl_strerror(rc) or b""
        return error_for(rc, msg.decode("utf-8", "replace"))

    def close(self):
        """Free the limiter, once the calls in progress have returned.
        Later calls raise InvalidArgumentError; closing twice is a no-op."""
        cond = getattr(self, "_cond", None)
        if cond is None:
            return
        with cond:
            handle, self._handle = self._handle, None
            while self._users > 0:
                cond.wait()
        if handle is not None:
            self._lib.rl_limiter_free(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    @property
    def closed(self):
        return self._handle is None

    # ---- the request path --------------------------------------------
    def allow(self, key, rule, cost=1):
        """Charge cost to key (e.g. "user:42") under the rule with id rule
        (rl_allow()).  Returns a Result; a denial is a Result with allowed
        False.  NoSuchRuleError, InvalidArgumentError, StoreError."""
        kb, rb, cost = _bytes(key, "key"), _bytes(rule, "rule"), _cost(cost)
        res = _abi.sized(_abi.rl_result)
        h = self._enter()
        try:
            rc = self._lib.rl_allow(h, kb, rb, cost, ctypes.byref(res))
            if rc != 0:
                raise self._error(rc, h)
        finally:
            self._leave()
        return Result(res)

    def check(self, endpoint=None, tier=None, *, user=None, api_key=None,
              ip=None, dimensions=None, cost=1):
        """Charge every rule matching the request, all or nothing, and
        return the most restrictive answer (rl_check()).  dimensions maps
        other dimension names ("tenant", "header:x-api-version") to values;
        user, api_key and ip are the shortcuts.  A request no rule applies
        to passes with Flags.NO_RULE."""
        req, _keep = _request(endpoint, tier, user, api_key, ip, dimensions,
                              cost)
        res = _abi.sized(_abi.rl_result)
        h = self._enter()
        try:
            rc = self._lib.rl_check(h, ctypes.byref(req), ctypes.byref(res))
            if rc != 0:
                raise self._error(rc, h)
        finally:
            self._leave()
        return Result(res)

    def check_many(self, requests):
        """Decide many requests in one call (rl_check_many(); on Redis one
        round trip per 64).  requests: an iterable of dicts of check()'s
        keyword arguments.  Returns a list, per request its Result or the
        RateLimitError that request failed with."""
        built = [_request(**dict(r)) for r in requests]
        n = len(built)
        if n == 0:
            return []
        reqs = (_abi.rl_request * n)(*[b[0] for b in built])
        results = (_abi.rl_result * n)()
        for r in results:
            r.size = ctypes.sizeof(_abi.rl_result)
        codes = (ctypes.c_int * n)()
        h = self._enter()
        try:
            rc = self._lib.rl_check_many(h, reqs, results, codes, n)
            last = self._error(rc, h) if rc != 0 else None
        finally:
            self._leave()
        # rl_errmsg() describes the last failure; the others get the
        # code's text.
        failed = [i for i in range(n) if codes[i] != 0]
        out = []
        for i in range(n):
            if codes[i] == 0:
                out.append(Result(results[i]))
            elif last is not None and i == failed[-1]:
                out.append(error_for(codes[i], last.message))
            else:
                out.append(error_for(codes[i], self._lib.rl_strerror(
                    codes[i]).decode()))
        return out

    # ---- reserve, then settle -------------------------------------------
    def reserve(self, endpoint=None, tier=None, *, user=None, api_key=None,
                ip=None, dimensions=None, cost=1):
        """Decide the request as check() does, with cost as an estimate
        (rl_reserve()).  Returns (Result, Reservation), the reservation
        None when the request is denied; settle it once the real cost is
        known."""
        kw = dict(endpoint=endpoint, tier=tier, user=user, api_key=api_key,
                  ip=ip, dimensions=dimensions, cost=cost)
        req, _keep = _request(**kw)
        res = _abi.sized(_abi.rl_result)
        rsv = _abi.sized(_abi.rl_reservation)
        h = self._enter()
        try:
            rc = self._lib.rl_reserve(h, ctypes.byref(req), ctypes.byref(rsv),
                                      ctypes.byref(res))
            if rc != 0:
                raise self._error(rc, h)
        finally:
            self._leave()
        return Result(res), (Reservation(rsv, kw) if res.allowed else None)

    def settle(self, reservation, actual):
        """Settle the reservation at the real cost actual (rl_settle()):
        the difference refunded, or charged as a debt.  SettledError when
        it was settled already (a copy, another process) or expired;
        StoreError when the store could not be reached (call again)."""
        req, _keep = _request(**reservation.request)
        h = self._enter()
        try:
            rc = self._lib.rl_settle(h, ctypes.byref(req),
                                     ctypes.byref(reservation.raw),
                                     _cost(actual))
            if rc != 0:
                raise self._error(rc, h)
        finally:
            self._leave()

    # ---- rules ---------------------------------------------------------
    def load_rules(self, rules):
        """Replace the rule set, all or nothing (rl_rules_load_file() for
        a path, rl_rules_load_string() for JSON text or a dict).  A bad set
        leaves the one in force and raises RuleError / RuleParseError /
        FileReadError naming the file, rule and field."""
        kind, value = rules_kind(rules)
        fn = (self._lib.rl_rules_load_string if kind == "json"
              else self._lib.rl_rules_load_file)
        arg = _bytes(value, "rules")
        h = self._enter()
        try:
            rc = fn(h, arg)
            if rc != 0:
                raise self._error(rc, h)
        finally:
            self._leave()

    reload = load_rules

    @property
    def rules_version(self):
        """The version of the rule set in force (0: none yet)."""
        h = self._enter()
        try:
            return self._lib.rl_rules_version(h)
        finally:
            self._leave()

    def rules_status(self):
        """Where the rules stand (rl_rules_status_get()) as a dict."""
        st = self._get(self._lib.rl_rules_status_get, _abi.rl_rules_status)
        out = _fields(st)
        out["last_refusal"] = st.last_refusal.decode("utf-8", "replace")
        return out

    def dryrun(self, rule):
        """A rule's dry-run counts (rl_rule_dryrun_get()) as a dict."""
        rb = _bytes(rule, "rule")
        return _fields(self._get(
            lambda h, p: self._lib.rl_rule_dryrun_get(h, rb, p),
            _abi.rl_dryrun))

    def stats(self):
        """How checks were decided (rl_stats_get()) as a dict."""
        return _fields(self._get(self._lib.rl_stats_get, _abi.rl_stats))

    def metrics(self):
        """The metrics in the Prometheus text format 0.0.4
        (rl_metrics_write()), as str."""
        cap = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = ctypes.c_size_t()
            h = self._enter()
            try:
                rc = self._lib.rl_metrics_write(h, buf, cap, ctypes.byref(n))
                err = self._error(rc, h) if rc not in (0, _abi.RL_ERANGE) \
                    else None
            finally:
                self._leave()
            if rc == 0:
                return buf.raw[:n.value].decode("utf-8")
            if err is not None:
                raise err
            cap = max(n.value + 4096, cap * 2)

    def _get(self, fn, cls):
        out = _abi.sized(cls)
        h = self._enter()
        try:
            rc = fn(h, ctypes.byref(out))
            if rc != 0:
                raise self._error(rc, h)
        finally:
            self._leave()
        return out


def _fields(st):
    return {name: getattr(st, name) for name, _ in st._fields_
            if name != "size"}


class Reservation:
    """What Limiter.reserve() charged: the library's rl_reservation (raw)
    and the request it was made for, which Limiter.settle() sends again.
    to_bytes()/from_bytes() carry it to another process of the fleet."""

    def __init__(self, raw, request):
        self.raw = raw
        self.request = dict(request)

    def to_bytes(self):
        return bytes(self.raw)

    @classmethod
    def from_bytes(cls, data, request):
        raw = _abi.rl_reservation.from_buffer_copy(data)
        return cls(raw, request)

    def copy(self):
        return Reservation.from_bytes(self.to_bytes(), self.request)


def _request(endpoint=None, tier=None, user=None, api_key=None, ip=None,
             dimensions=None, cost=1):
    """An rl_request, and the objects its pointers point into (to be
    kept alive for the call)."""
    keep = []
    req = _abi.sized(_abi.rl_request)
    for field, value in (("endpoint", endpoint), ("tier", tier),
                         ("user", user), ("api_key", api_key), ("ip", ip)):
        b = _bytes(value, field)
        keep.append(b)
        setattr(req, field, b)
    if dimensions:
        items = list(dict(dimensions).items())
        dims = (_abi.rl_dim * len(items))()
        for d, (name, value) in zip(dims, items):
            nb, vb = _bytes(name, "dimension name"), _bytes(value, name)
            keep.extend((nb, vb))
            d.name, d.value = nb, vb
        keep.append(dims)
        req.dims = dims
        req.ndims = len(items)
    req.cost = _cost(cost)
    return req, keep
