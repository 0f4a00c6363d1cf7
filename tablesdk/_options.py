"""``TableRequestOptions``: per-call overrides of a client's request defaults.

A client has defaults for every request it sends (``timeout``, ``server_timeout``,
``operation_deadline``, ``retry_policy``, ``location_mode``). Any operation takes
``options=TableRequestOptions(...)`` (a context's save and queries:
``request_options=``, since their ``options`` is the :class:`SaveChangesOptions`);
the fields that are set override the client's defaults for that call only, the
ones left None keep them. The client is never changed.

The payload format is not a request option: the codec (JSON or Atom), the API
version that goes with it and the headers built from them belong to the client,
and a query's continuation or a context's ETags are only meaningful in one format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._errors import require_positive_int, require_positive_seconds
from ._http import Timeout
from ._retry import RetryPolicy
from ._transport import _check_timeout

__all__ = ["TableRequestOptions", "LOCATION_MODES", "check_options", "resolve_retry_policy"]

#: Where reads go: the primary only (default), the primary with retries alternating to the
#: read-only secondary of an RA-GRS account, or the secondary only. Writes always go to the primary.
LOCATION_MODES = ("primary_only", "primary_then_secondary", "secondary_only")


@dataclass(frozen=True)
class TableRequestOptions:
    """Request settings for one call, overriding the client's defaults (None: the client's).

    ``server_timeout`` (int seconds) is sent as the service's ``timeout=N``;
    ``timeout`` bounds each attempt (seconds, or a ``(connect, read)`` pair);
    ``deadline`` caps each request of the call across all its retries (the
    client's ``operation_deadline``); ``retry_policy`` retries the call's
    requests; ``location_mode`` is where its reads go (one of
    :data:`LOCATION_MODES`; writes always go to the primary). Checked when built.

    An explicit ``retry_policy=`` argument of an operation wins over the one here.
    """

    server_timeout: int | None = None
    timeout: Timeout | None = None
    deadline: float | None = None
    retry_policy: RetryPolicy | None = None
    location_mode: str | None = None

    def __post_init__(self) -> None:
        if self.server_timeout is not None:
            require_positive_int("server_timeout", self.server_timeout, " (seconds)")
        if self.timeout is not None:
            _check_timeout(self.timeout, "timeout")
        if self.deadline is not None:
            require_positive_seconds("deadline", self.deadline)
        if self.retry_policy is not None and not callable(getattr(self.retry_policy, "retry_after", None)):
            raise TypeError(
                f"retry_policy must have retry_after(attempt, error), not {type(self.retry_policy).__name__}"
            )
        if self.location_mode is not None and self.location_mode not in LOCATION_MODES:
            raise ValueError(f"location_mode must be one of {', '.join(LOCATION_MODES)}; got {self.location_mode!r}")


def resolve_retry_policy(
    explicit: RetryPolicy | None, options: TableRequestOptions | None, default: RetryPolicy
) -> RetryPolicy:
    """The policy of a call that fixes one for all its requests (a bulk call, a save): an explicit
    ``retry_policy=`` argument, else the request options', else ``default`` (the client's, or
    ``NoRetry()`` for ``save_changes``)."""
    if explicit is not None:
        return explicit
    if options is not None and options.retry_policy is not None:
        return options.retry_policy
    return default


def check_options(options: Any) -> TableRequestOptions | None:
    """``options`` when it is None or a :class:`TableRequestOptions`; a TypeError otherwise."""
    if options is None or isinstance(options, TableRequestOptions):
        return options
    raise TypeError(f"options must be a TableRequestOptions, not {type(options).__name__}")
