"""The library's error codes as Python exceptions.

A call that returns a negative RL_E* code raises the RateLimitError
subclass of that code, carrying the code (``.code``, an :class:`ErrorCode`:
an int equal to the C value whose ``.name`` is the RL_E* name) and the
library's message for it (``.message``: rl_errmsg(), read in the thread
that made the call, which is where the library keeps it).  A denial is a
result, never an exception.
"""
import enum


class ErrorCode(enum.IntEnum):
    RL_EINVAL = -1
    RL_ENOMEM = -2
    RL_ENORULE = -3
    RL_ERULE = -4
    RL_EPARSE = -5
    RL_EIO = -6
    RL_EOPTION = -7
    RL_ESTORE = -8
    RL_ERANGE = -9
    RL_EBUSY = -10
    RL_ESETTLED = -11


class RateLimitError(Exception):
    """A failed call: ``code`` (ErrorCode) and ``message`` (rl_errmsg())."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self):
        name = getattr(self.code, "name", str(self.code))
        return f"{self.message} ({name})"


class InvalidArgumentError(RateLimitError, ValueError):
    """RL_EINVAL: an argument is empty, too long or out of range."""


class OutOfMemoryError(RateLimitError, MemoryError):
    """RL_ENOMEM."""


class NoSuchRuleError(RateLimitError, LookupError):
    """RL_ENORULE: no rule has this id."""


class RuleError(RateLimitError, ValueError):
    """RL_ERULE: a rule or rule set fails validation."""


class RuleParseError(RuleError):
    """RL_EPARSE: the rule JSON does not parse."""


class FileReadError(RateLimitError):
    """RL_EIO: a file could not be read."""


class OptionError(RateLimitError, ValueError):
    """RL_EOPTION: an unknown configuration option or a bad value."""


class StoreError(RateLimitError):
    """RL_ESTORE: the store is not supported or failed, and no failure
    mode decided."""


class BufferTooSmallError(RateLimitError):
    """RL_ERANGE."""


class BusyError(RateLimitError):
    """RL_EBUSY."""


class SettledError(RateLimitError):
    """RL_ESETTLED: the reservation was settled already (it, a copy,
    another process) or has expired; nothing changed."""


_BY_CODE = {
    ErrorCode.RL_EINVAL: InvalidArgumentError,
    ErrorCode.RL_ENOMEM: OutOfMemoryError,
    ErrorCode.RL_ENORULE: NoSuchRuleError,
    ErrorCode.RL_ERULE: RuleError,
    ErrorCode.RL_EPARSE: RuleParseError,
    ErrorCode.RL_EIO: FileReadError,
    ErrorCode.RL_EOPTION: OptionError,
    ErrorCode.RL_ESTORE: StoreError,
    ErrorCode.RL_ERANGE: BufferTooSmallError,
    ErrorCode.RL_EBUSY: BusyError,
    ErrorCode.RL_ESETTLED: SettledError,
}


def error_for(rc, message):
    """The exception for return code rc (an unknown code: RateLimitError
    with the int)."""
    try:
        code = ErrorCode(rc)
    except ValueError:
        return RateLimitError(rc, message)
    return _BY_CODE[code](code, message)
