"""Retry policies: when to try a failed request again, and after how long.

The transport asks its :class:`RetryPolicy` after every failed attempt. The
built-in policies follow the Storage Client Library rules (Azure Storage team blog, "Overview of Retry Policies in the
Windows Azure Storage Client Library"):

* **Classification** (:func:`is_retryable`): 4xx responses are not retried,
  except 408 Request Timeout and 429 Too Many Requests (throttling); 501 Not Implemented and 505 HTTP Version Not
  Supported are not retried; every other 5xx, client-side timeouts
  (:class:`~tablesdk._core._errors.RequestTimeoutError`) and connection failures
  (:class:`~tablesdk._core._errors.ConnectionFailedError`) are. Anything that is not a
  service or transport error (a ``ValueError`` from bad input, say) is never
  retried.
* **Where the classification lives**: inside each built-in policy, not in the
  transport. As in the 2.0 client libraries, the transport does not pre-filter
  errors, so a custom policy may deliberately retry something the built-ins do
  not (call :func:`is_retryable` from it to keep the default rules).
* **Back-off**: :class:`ExponentialRetry` (the default) waits
  ``min(min_backoff + (2 ** (attempt - 1) - 1) * d, max_backoff)`` where ``d``
  is ``delta_seconds`` randomised by +/-20%. With the defaults (3 retries,
  delta 30 s, bounds 3 s and 90 s) that gives about 3 s, 33 s and 90 s.
  :class:`LinearRetry` waits the same interval every time and
  :class:`NoRetry` never retries. A refused connection (nothing listens) and a
  host name that does not resolve (a mistyped account name or endpoint: the
  sender marks it ``refused`` too) are retried on the short
  :data:`REFUSED_BACKOFF_SECONDS` schedule by both.

Policies hold no per-operation state: the transport passes the number of
attempts made so far, so one instance can be shared by every operation and
thread.

**Server-given waits** (:func:`server_delay`): a 429, 503 or 500 answer may say how long to
wait (``x-ms-retry-after-ms`` or ``retry-after-ms`` in milliseconds, ``Retry-After`` in
seconds or as an HTTP date: Cosmos DB's Table API throttles with 429 and
``x-ms-retry-after-ms``). The policy still decides *whether* to retry (its classification
and its count); when it retries, the transport waits the larger of the policy's back-off
and the server's ask (:data:`MAX_SERVER_DELAY_SECONDS` at most), capped by the deadline. A
policy opts out with a false ``honour_server_delay`` attribute (the built-ins take it as a
keyword) and then reads ``error.headers`` itself if it wants to.

Retries of writes can produce confusing answers (a retried insert that had
already succeeded gets 409, a retried delete gets 404); the transport flags
those errors with ``ambiguous_retry`` (see :mod:`tablesdk._pipeline._transport`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .._core._errors import ConnectionFailedError, RequestTimeoutError, TableServiceError, require_positive_int

if TYPE_CHECKING:
    import random as _random

__all__ = [
    "RetryPolicy",
    "is_retryable",
    "NoRetry",
    "LinearRetry",
    "ExponentialRetry",
    "DEFAULT_RETRY_COUNT",
    "DEFAULT_BACKOFF_SECONDS",
    "DEFAULT_MIN_BACKOFF_SECONDS",
    "DEFAULT_MAX_BACKOFF_SECONDS",
    "REFUSED_BACKOFF_SECONDS",
    "refused_backoff",
    "server_delay",
    "honours_server_delay",
    "MAX_SERVER_DELAY_SECONDS",
    "SERVER_DELAY_STATUSES",
    "CosmosRetry",
    "COSMOS_THROTTLE_RETRY_COUNT",
]

#: Retries after the first attempt (the Storage Client Library's ``DefaultClientRetryCount``).
DEFAULT_RETRY_COUNT = 3
#: Linear interval and exponential delta (the Storage Client Library's ``DefaultClientBackoff``, 30 s).
DEFAULT_BACKOFF_SECONDS = 30.0
#: Smallest exponential back-off (the Storage Client Library's ``DefaultMinBackoff``).
DEFAULT_MIN_BACKOFF_SECONDS = 3.0
#: Largest exponential back-off (the Storage Client Library's ``DefaultMaxBackoff``).
DEFAULT_MAX_BACKOFF_SECONDS = 90.0

#: Waits before the retries of a refused connection. Nothing listens at the address (an
#: emulator not started, a wrong port, a server restarting), or there is no such address (a
#: host name that does not resolve: a mistyped account name): a back-off of minutes cannot
#: fix that and only hides it (a mistyped account name took 119 s to fail), so the built-in policies retry it on this short schedule
#: (about 3.5 s in all with the default 3 retries) and then report it.
REFUSED_BACKOFF_SECONDS: tuple[float, ...] = (0.5, 1.0, 2.0)

#: The statuses whose answers are read for a server-given wait (throttling and server trouble).
SERVER_DELAY_STATUSES = frozenset({429, 500, 503})
#: The longest server-given wait honoured: a larger ask (a misconfigured proxy's
#: ``Retry-After: 86400``) waits this long. The deadline caps every wait further.
MAX_SERVER_DELAY_SECONDS = 300.0
#: The headers that carry a wait, first match wins: the millisecond ones are the more precise
#: (the order azure-core reads them in).
_DELAY_HEADERS_MS = ("retry-after-ms", "x-ms-retry-after-ms")

_JITTER = 0.2
_NOT_RETRIED_5XX = frozenset({501, 505})


@runtime_checkable
class RetryPolicy(Protocol):
    """Decides whether, and after how long, a failed request is tried again."""

    def retry_after(self, attempt: int, error: BaseException) -> float | None:
        """Return the seconds to wait before the next attempt, or None to stop.

        ``attempt`` is the number of attempts made so far (1 after the first
        failure); ``error`` is what the last attempt raised. Policies hold no
        per-operation state, so one instance is shared by all operations.
        """
        ...


def is_retryable(error: BaseException) -> bool:
    """Whether ``error`` is worth retrying under the Storage Client rules.

    4xx are final except 408 and 429 (throttling); 501 and 505 are final; other 5xx, client-side
    timeouts and connection failures are retryable; any other exception
    (``ValueError`` and the like) is not.
    """
    if not isinstance(error, TableServiceError):
        return False
    status = error.status_code
    if status is None:
        return isinstance(error, (RequestTimeoutError, ConnectionFailedError))
    if status in (408, 429):
        return True
    if 400 <= status < 500:
        return False
    if status in _NOT_RETRIED_5XX:
        return False
    return 500 <= status < 600


def _wall_clock() -> float:
    """Seconds since the epoch, for a ``Retry-After`` given as an HTTP date (replaceable in tests)."""
    return time.time()


def _parse_delay(name: str, value: str) -> float | None:
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if name != "retry-after":
        return number / 1000.0 if math.isfinite(number) and number >= 0 else None
    if math.isfinite(number):
        return number if number >= 0 else None
    from email.utils import parsedate_to_datetime  # an HTTP date: rare, so imported when met

    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - _wall_clock())


def server_delay(error: BaseException) -> float | None:
    """The wait, in seconds, that the answer behind ``error`` asked for, or None.

    Read from a 429, 503 or 500 answer's ``retry-after-ms`` or ``x-ms-retry-after-ms``
    (milliseconds) or ``Retry-After`` (seconds, or an HTTP date: the seconds until then),
    the first of them that holds a valid value; at most :data:`MAX_SERVER_DELAY_SECONDS`.
    None for any other error, or when no header holds a valid value.
    """
    if not isinstance(error, TableServiceError) or error.status_code not in SERVER_DELAY_STATUSES:
        return None
    headers: Mapping[str, str] = error.headers
    lowered = {name.lower(): value for name, value in headers.items()}  # any mapping, any case
    for name in (*_DELAY_HEADERS_MS, "retry-after"):
        value = lowered.get(name)
        if value is None:
            continue
        seconds = _parse_delay(name, value)
        if seconds is not None:
            return min(seconds, MAX_SERVER_DELAY_SECONDS)
    return None


def honours_server_delay(policy: object) -> bool:
    """Whether the transport may lengthen ``policy``'s waits to the server's ask: True unless
    the policy has a false ``honour_server_delay`` attribute."""
    return bool(getattr(policy, "honour_server_delay", True))


def refused_backoff(attempt: int, error: BaseException) -> float | None:
    """The short wait before retrying a refused connection (or an unresolved host name), or None otherwise.

    Retry ``n`` waits ``REFUSED_BACKOFF_SECONDS[n - 1]`` (the last value beyond the table).
    """
    if not isinstance(error, ConnectionFailedError) or not error.refused:
        return None
    return REFUSED_BACKOFF_SECONDS[min(attempt, len(REFUSED_BACKOFF_SECONDS)) - 1]


def _check_count(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def _check_seconds(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number of seconds, got {type(value).__name__}")
    result = float(value)
    if not math.isfinite(result) or result < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return result


def _check_flag(value: bool, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def _check_attempt(attempt: int) -> None:
    require_positive_int("attempt", attempt)


class NoRetry:
    """Never retry: the first failure is raised to the caller."""

    def retry_after(self, attempt: int, error: BaseException) -> float | None:
        """Always None."""
        _check_attempt(attempt)
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NoRetry)

    def __hash__(self) -> int:
        return hash(NoRetry)

    def __repr__(self) -> str:
        return "NoRetry()"


class _CountedRetry:
    """What the counted policies share: at most ``count`` retries, of errors
    :func:`is_retryable` accepts, and whether a server's asked-for wait lengthens theirs."""

    _count: int
    _honour: bool

    @property
    def count(self) -> int:
        """Maximum number of retries after the first attempt."""
        return self._count

    @property
    def honour_server_delay(self) -> bool:
        """Whether a wait the server asks for (``Retry-After``) lengthens this policy's waits."""
        return self._honour

    def _gives_up(self, attempt: int, error: BaseException) -> bool:
        """True once ``count`` retries were made or when ``error`` is final (``attempt`` checked)."""
        _check_attempt(attempt)
        return attempt > self._count or not is_retryable(error)

    def _honour_repr(self) -> str:
        return "" if self._honour else ", honour_server_delay=False"


class LinearRetry(_CountedRetry):
    """Retry up to ``count`` times, waiting ``interval_seconds`` before each retry.

    The defaults (3 retries, 30 s) are the Storage Client Library's ``DefaultClientRetryCount``
    and ``DefaultClientBackoff``. Only errors :func:`is_retryable` accepts are
    retried.
    """

    def __init__(
        self,
        count: int = DEFAULT_RETRY_COUNT,
        interval_seconds: float = DEFAULT_BACKOFF_SECONDS,
        *,
        honour_server_delay: bool = True,
    ) -> None:
        self._count = _check_count(count, "count")
        self._interval = _check_seconds(interval_seconds, "interval_seconds")
        self._honour = _check_flag(honour_server_delay, "honour_server_delay")

    @property
    def interval_seconds(self) -> float:
        """Seconds waited before every retry."""
        return self._interval

    def retry_after(self, attempt: int, error: BaseException) -> float | None:
        """``interval_seconds`` while fewer than ``count`` retries were made and the error is retryable."""
        if self._gives_up(attempt, error):
            return None
        refused = refused_backoff(attempt, error)
        return self._interval if refused is None else min(refused, self._interval)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LinearRetry):
            return NotImplemented
        return (self._count, self._interval, self._honour) == (other._count, other._interval, other._honour)

    def __hash__(self) -> int:
        return hash((LinearRetry, self._count, self._interval, self._honour))

    def __repr__(self) -> str:
        return f"LinearRetry(count={self._count!r}, interval_seconds={self._interval!r}{self._honour_repr()})"


class ExponentialRetry(_CountedRetry):
    """Retry up to ``count`` times with a randomised, exponentially growing back-off.

    The wait before retry number ``n`` (``n = attempt``, counting from 1) is::

        min(min_backoff + (2 ** (n - 1) - 1) * uniform(0.8 * delta, 1.2 * delta), max_backoff)

    which is the Storage Client Library's formula (``currentRetryCount`` there counts from 0):
    the first retry comes after ``min_backoff``, later ones grow by powers of
    two of a +/-20% jittered ``delta_seconds``, and none waits longer than
    ``max_backoff``. Each call that answers "retry" draws exactly one
    ``random.uniform`` from ``random`` (a private :class:`random.Random` when
    not given), so an injected, seeded ``random.Random`` makes the sequence
    reproducible. The defaults (3 retries, delta 30 s, 3 s .. 90 s) are those
    of the Storage Client Library's default policy: waits of about 3 s, 33 s and 90 s.
    """

    def __init__(
        self,
        count: int = DEFAULT_RETRY_COUNT,
        delta_seconds: float = DEFAULT_BACKOFF_SECONDS,
        min_backoff: float = DEFAULT_MIN_BACKOFF_SECONDS,
        max_backoff: float = DEFAULT_MAX_BACKOFF_SECONDS,
        *,
        random: _random.Random | None = None,
        honour_server_delay: bool = True,
    ) -> None:
        self._honour = _check_flag(honour_server_delay, "honour_server_delay")
        self._count = _check_count(count, "count")
        self._delta = _check_seconds(delta_seconds, "delta_seconds")
        self._min = _check_seconds(min_backoff, "min_backoff")
        self._max = _check_seconds(max_backoff, "max_backoff")
        if self._max < self._min:
            raise ValueError(
                f"max_backoff ({max_backoff!r}) must be >= min_backoff ({min_backoff!r})"
            )
        from random import Random  # with the first policy, not with ``import tablesdk`` (start-up)

        if random is not None and not isinstance(random, Random):
            raise ValueError(f"random must be a random.Random, got {type(random).__name__}")
        self._random = random if random is not None else Random()

    @property
    def delta_seconds(self) -> float:
        """The base of the exponential increment, before +/-20% jitter."""
        return self._delta

    @property
    def min_backoff(self) -> float:
        """The wait before the first retry and the lower bound of every wait."""
        return self._min

    @property
    def max_backoff(self) -> float:
        """The upper bound of every wait (of the policy's own: a server's ask may be longer)."""
        return self._max

    def retry_after(self, attempt: int, error: BaseException) -> float | None:
        """The jittered exponential back-off, or None once ``count`` retries were made or the error is final."""
        if self._gives_up(attempt, error):
            return None
        refused = refused_backoff(attempt, error)
        if refused is not None:
            return min(refused, self._max)
        jittered = self._random.uniform(self._delta * (1 - _JITTER), self._delta * (1 + _JITTER))
        # 2.0 ** 1023 is the largest finite power; beyond it the cap applies anyway.
        factor = 2.0 ** min(attempt - 1, 1023) - 1
        return min(self._min + factor * jittered, self._max)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExponentialRetry):
            return NotImplemented
        return self._params() == other._params()

    def __hash__(self) -> int:
        return hash((ExponentialRetry, *self._params()))

    def _params(self) -> tuple[int, float, float, float, bool]:
        return (self._count, self._delta, self._min, self._max, self._honour)

    def __repr__(self) -> str:
        return (
            f"ExponentialRetry(count={self._count!r}, delta_seconds={self._delta!r}, "
            f"min_backoff={self._min!r}, max_backoff={self._max!r}{self._honour_repr()})"
        )


#: Retries of a throttled request under :class:`CosmosRetry` (the Cosmos DB SDKs' default).
COSMOS_THROTTLE_RETRY_COUNT = 9


class CosmosRetry:
    """The default policy of a client of a Cosmos DB account: throttling handled as Cosmos DB's
    own SDKs do, every other failure by ``others`` (``ExponentialRetry()`` unless given).

    Cosmos DB throttles routinely (a 429 when a table's provisioned throughput is used up) and
    says in ``x-ms-retry-after-ms`` how long to wait, usually milliseconds. A 429 that says so
    is retried up to ``throttle_count`` times (9, the Cosmos DB SDKs' default), after exactly
    that wait (the policy asks for none of its own; the transport waits the server's ask,
    capped by :data:`MAX_SERVER_DELAY_SECONDS` and the client's ``operation_deadline``, which
    bounds the total as the Cosmos DB SDKs' 30-second cap does theirs). A 429 without a wait,
    and every other error, goes to ``others``.
    """

    honour_server_delay = True

    def __init__(self, throttle_count: int = COSMOS_THROTTLE_RETRY_COUNT, others: RetryPolicy | None = None) -> None:
        self._throttle_count = _check_count(throttle_count, "throttle_count")
        if others is not None and not isinstance(others, RetryPolicy):
            raise ValueError(f"others must be a retry policy (an object with retry_after), got {type(others).__name__}")
        self._others: RetryPolicy = others if others is not None else ExponentialRetry()

    @property
    def throttle_count(self) -> int:
        """Maximum number of retries of a throttled request that says how long to wait."""
        return self._throttle_count

    @property
    def others(self) -> RetryPolicy:
        """The policy of every other failure."""
        return self._others

    def retry_after(self, attempt: int, error: BaseException) -> float | None:
        """No wait of its own for a throttled answer that asks for one (the transport waits the
        ask), None past ``throttle_count``; ``others`` decides anything else."""
        _check_attempt(attempt)
        if isinstance(error, TableServiceError) and error.status_code == 429 and server_delay(error) is not None:
            return 0.0 if attempt <= self._throttle_count else None
        return self._others.retry_after(attempt, error)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CosmosRetry):
            return NotImplemented
        return (self._throttle_count, self._others) == (other._throttle_count, other._others)

    def __hash__(self) -> int:
        return hash((CosmosRetry, self._throttle_count))

    def __repr__(self) -> str:
        return f"CosmosRetry(throttle_count={self._throttle_count!r}, others={self._others!r})"
