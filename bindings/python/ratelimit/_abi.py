"""The C ABI of libratelimit, mirrored for ctypes: the structs of
include/ratelimit.h member for member, the constants the binding uses, and
the prototypes of the functions it calls.

Every struct the caller allocates starts with ``size_t size``, which the
caller sets to the size of the struct it was compiled with; here that is
``ctypes.sizeof`` of the mirror, set by :func:`sized`.  The mirrors must
match the C layouts exactly: tests/test_abi.py compares every size and
offset with what a C program compiled against the header reports.
"""
import ctypes
from ctypes import (POINTER, Structure, c_char, c_char_p, c_int, c_int64,
                    c_size_t, c_uint, c_uint64, c_void_p)

# Bounds and options (include/ratelimit.h).
RL_KEY_MAX = 256
RL_RULE_ID_MAX = 63
RL_COST_MAX = 1000000000
RL_DIMS_MAX = 16
RL_HEADERS_IETF = 0x01
RL_HEADERS_DRAFT10 = 0x02
RL_HEADERS_MAX = 6
RL_HEADERS_FORMAT_MAX = 396
RL_BODY_FORMAT_MAX = 58
RL_RULES_REFUSAL_MAX = 256
RL_ERANGE = -9
RL_RESERVATION_WORDS = 40


class rl_result(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("allowed", c_int),
        ("flags", c_uint),
        ("limit", c_int64),
        ("remaining", c_int64),
        ("reset_at", c_int64),
        ("retry_after", c_int64),
        ("window", c_int64),
        ("rule_id", c_char * (RL_RULE_ID_MAX + 1)),
        # since 1.0.0, past RL_RESULT_SIZE_MIN
        ("retry_after_ms", c_int64),
        ("reset_at_ms", c_int64),
    ]


class rl_dim(Structure):
    _fields_ = [("name", c_char_p), ("value", c_char_p)]


class rl_request(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("endpoint", c_char_p),
        ("tier", c_char_p),
        ("user", c_char_p),
        ("api_key", c_char_p),
        ("ip", c_char_p),
        ("dims", POINTER(rl_dim)),
        ("ndims", c_size_t),
        ("cost", c_int64),
        # since 1.1.0, past RL_REQUEST_SIZE_MIN: the strings' lengths (0:
        # NUL-terminated, as c_char_p gives them)
        ("endpoint_len", c_size_t),
        ("tier_len", c_size_t),
        ("user_len", c_size_t),
        ("api_key_len", c_size_t),
        ("ip_len", c_size_t),
    ]


class rl_dryrun(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("mode", c_int),
        ("version", c_int64),
        ("checks", c_uint64),
        ("would_deny", c_uint64),
        ("distinct", c_uint64),
        ("since_ms", c_int64),
    ]


class rl_rules_status(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("version", c_int64),
        ("origin", c_int),
        ("source", c_int),
        ("loads", c_uint64),
        ("refused_bad", c_uint64),
        ("refused_stale", c_uint64),
        ("source_errors", c_uint64),
        ("last_read_ms", c_int64),
        ("last_load_ms", c_int64),
        ("last_refusal", c_char * RL_RULES_REFUSAL_MAX),
    ]


class rl_stats(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("checks", c_uint64),
        ("allowed", c_uint64),
        ("denied", c_uint64),
        ("soft", c_uint64),
        ("fail_open", c_uint64),
        ("fallback", c_uint64),
        ("fail_closed", c_uint64),
        ("store_errors", c_uint64),
        ("breaker_opens", c_uint64),
        ("breaker_closes", c_uint64),
        ("fleet_size", c_uint64),
        ("breaker_state", c_int),
    ]


class rl_header(Structure):
    _fields_ = [("name", c_char * 24), ("value", c_char * 104)]


class rl_reservation(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("opaque", c_uint64 * RL_RESERVATION_WORDS),
    ]


# Every mirrored struct, by its C name (the ABI test walks this).
STRUCTS = {cls.__name__: cls for cls in
           (rl_result, rl_dim, rl_request, rl_dryrun, rl_rules_status,
            rl_stats, rl_header, rl_reservation)}


def sized(cls):
    """A zeroed instance of a growable struct with its size member set."""
    obj = cls()
    obj.size = ctypes.sizeof(cls)
    return obj


# rl_metrics_write_cb's writer is not used: rl_metrics_write with a buffer
# grown on RL_ERANGE needs no callback into Python.
_PROTOTYPES = {
    "rl_version": (c_int, []),
    "rl_version_string": (c_char_p, []),
    "rl_strerror": (c_char_p, [c_int]),
    "rl_errmsg": (c_char_p, [c_void_p]),
    "rl_config_new": (c_void_p, []),
    "rl_config_set": (c_int, [c_void_p, c_char_p, c_char_p]),
    "rl_config_free": (None, [c_void_p]),
    "rl_config_set_log": (c_int, [c_void_p, c_void_p, c_void_p]),
    "rl_limiter_new": (c_int, [POINTER(c_void_p), c_void_p]),
    "rl_limiter_free": (None, [c_void_p]),
    "rl_allow": (c_int, [c_void_p, c_char_p, c_char_p, c_int64,
                         POINTER(rl_result)]),
    "rl_check": (c_int, [c_void_p, POINTER(rl_request), POINTER(rl_result)]),
    "rl_check_many": (c_int, [c_void_p, POINTER(rl_request),
                              POINTER(rl_result), POINTER(c_int), c_size_t]),
    "rl_rules_load_file": (c_int, [c_void_p, c_char_p]),
    "rl_rules_load_string": (c_int, [c_void_p, c_char_p]),
    "rl_rules_version": (c_int64, [c_void_p]),
    "rl_rules_status_get": (c_int, [c_void_p, POINTER(rl_rules_status)]),
    "rl_rule_dryrun_get": (c_int, [c_void_p, c_char_p, POINTER(rl_dryrun)]),
    "rl_stats_get": (c_int, [c_void_p, POINTER(rl_stats)]),
    "rl_metrics_write": (c_int, [c_void_p, c_char_p, c_size_t,
                                 POINTER(c_size_t)]),
    "rl_headers": (c_int, [POINTER(rl_result), c_uint, POINTER(rl_header),
                           c_size_t]),
    "rl_headers_format": (c_int, [POINTER(rl_result), c_uint, c_char_p,
                                  c_size_t]),
    "rl_body_format": (c_int, [POINTER(rl_result), c_char_p, c_size_t]),
    "rl_reserve": (c_int, [c_void_p, POINTER(rl_request),
                           POINTER(rl_reservation), POINTER(rl_result)]),
    "rl_settle": (c_int, [c_void_p, POINTER(rl_request),
                          POINTER(rl_reservation), c_int64]),
}


def declare(lib):
    """Set restype and argtypes of every function the binding calls."""
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib
