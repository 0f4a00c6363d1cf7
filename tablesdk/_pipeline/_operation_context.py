"""What an operation records of its attempts, and the hooks that see them.

:class:`OperationContext` is the optional per-operation recorder a caller passes to a client
call: every attempt is appended as a :class:`RequestAttempt`, and its two events (lists of
callables, as the Storage Client Library's ``ResponseReceived`` and ``Retrying``) are called
by the retry loop (:class:`tablesdk._pipeline._transport.RetryLoop`) with a :class:`ResponseReceived`
after each attempt and a :class:`RetryDecision` after each failed one. No I/O here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .._core._errors import TableServiceError
from ._http import AttemptState

__all__ = ["NO_HEADERS", "RequestAttempt", "OperationContext", "ResponseReceived", "RetryDecision", "read_only_headers"]


@dataclass
class RequestAttempt:
    """What one HTTP attempt of an operation did (see :class:`OperationContext`).

    ``url`` has any SAS ``sig`` redacted. ``start`` and ``end`` are readings of
    the transport's clock (``time.monotonic`` unless injected). ``retry_delay``
    is the wait before the next attempt, None when this attempt was the last.
    ``error`` is the text of the error this attempt produced, if any. ``state``
    says what the attempt is known to have done (not sent / sent, outcome
    unknown / answered), the fact :func:`is_ambiguous` reads. ``server_delay`` is the
    wait the answer asked for (``Retry-After``, ``x-ms-retry-after-ms``), None when it asked none.
    """

    attempt: int
    method: str
    url: str
    client_request_id: str
    request_id: str | None
    status: int | None
    error_code: str | None
    start: float
    end: float
    retry_delay: float | None
    error: str | None
    state: AttemptState = AttemptState.ANSWERED
    server_delay: float | None = None

    @property
    def elapsed(self) -> float:
        """Seconds the attempt took, by the transport's clock."""
        return self.end - self.start


NO_HEADERS: Mapping[str, str] = MappingProxyType({})


def read_only_headers(headers: Mapping[str, str]) -> Mapping[str, str]:
    """A read-only, case-insensitive copy of an answer's (already scrubbed) headers."""
    copy = getattr(headers, "copy", None)
    return MappingProxyType(copy() if callable(copy) else dict(headers))


class ResponseReceived:
    """What a ``response_received`` hook of an :class:`OperationContext` sees after each attempt.

    ``attempt`` counts from 1; ``method`` and ``url`` (any SAS signature redacted) are the
    attempt's; ``status`` is the answer's status and ``headers`` its headers (read-only,
    case-insensitive, echoed secrets redacted), None and empty when no answer arrived (a
    timeout, a cut connection); ``request_id`` is the service's ``x-ms-request-id``;
    ``error`` is the error this attempt produced (None for the answer returned to the caller);
    ``elapsed`` the attempt's seconds by the transport's clock.
    """

    __slots__ = ("attempt", "method", "url", "status", "headers", "request_id", "error", "elapsed")

    def __init__(
        self, attempt: int, method: str, url: str, status: int | None, headers: Mapping[str, str],
        request_id: str | None, error: TableServiceError | None, elapsed: float,
    ) -> None:
        self.attempt = attempt
        self.method = method
        self.url = url
        self.status = status
        self.headers = headers
        self.request_id = request_id
        self.error = error
        self.elapsed = elapsed

    def __repr__(self) -> str:
        return (
            f"ResponseReceived(attempt={self.attempt}, method={self.method!r}, url={self.url!r}, "
            f"status={self.status!r}, request_id={self.request_id!r})"
        )


class RetryDecision:
    """What a ``retrying`` hook of an :class:`OperationContext` sees after each failed attempt.

    ``retry`` says whether another attempt follows, after ``delay`` seconds. ``policy_delay``
    is the retry policy's answer (None: stop), ``server_delay`` the wait the answer asked for
    (None: none asked). ``delay`` is the wait the transport chose: the larger of the two when
    the policy retries (the policy's alone if it opts out), capped by the time the deadline
    leaves; None when the policy stopped. ``deadline_exceeded`` is True when that wait would
    reach the deadline, so the operation ends now with the deadline error (``retry`` False,
    ``delay`` the wait capped at what was left).
    """

    __slots__ = ("attempt", "error", "retry", "delay", "policy_delay", "server_delay", "deadline_exceeded")

    def __init__(
        self, attempt: int, error: TableServiceError, retry: bool, delay: float | None,
        policy_delay: float | None, server_delay: float | None, deadline_exceeded: bool = False,
    ) -> None:
        self.attempt = attempt
        self.error = error
        self.retry = retry
        self.delay = delay
        self.policy_delay = policy_delay
        self.server_delay = server_delay
        self.deadline_exceeded = deadline_exceeded

    def __repr__(self) -> str:
        return (
            f"RetryDecision(attempt={self.attempt}, retry={self.retry}, delay={self.delay!r}, "
            f"policy_delay={self.policy_delay!r}, server_delay={self.server_delay!r}, "
            f"deadline_exceeded={self.deadline_exceeded})"
        )


class OperationContext:
    """An optional per-operation recorder passed to :meth:`Transport.send`.

    Every attempt is appended to :attr:`attempts` as a :class:`RequestAttempt`
    (status, request ids, timings, delays, errors), so a caller can see how
    many requests an operation made and quote the request ids when escalating.
    When :attr:`client_request_id` is set it is sent as
    ``x-ms-client-request-id`` on every attempt of every request made with
    this context; otherwise each operation gets a fresh UUID4. Not thread-safe:
    use one context per operation.

    Events, as lists of callables (the Storage Client Library's ``ResponseReceived`` and
    ``Retrying``): each of :attr:`response_received` is called after every attempt with a
    :class:`ResponseReceived` (the answer's status and headers, or the error of an attempt
    that got none); each of :attr:`retrying` after every failed attempt with the
    :class:`RetryDecision` (retry or not, the wait, what the policy and the server asked).
    They run in the thread (or on the event loop) that sends the request, before the
    back-off wait; an exception a hook raises ends the operation.
    """

    def __init__(self, client_request_id: str | None = None) -> None:
        self.client_request_id = client_request_id
        self.attempts: list[RequestAttempt] = []
        self.response_received: list[Callable[[ResponseReceived], None]] = []
        self.retrying: list[Callable[[RetryDecision], None]] = []

    @property
    def last_attempt(self) -> RequestAttempt | None:
        """The most recent attempt, or None before any."""
        return self.attempts[-1] if self.attempts else None

    @property
    def request_ids(self) -> list[str]:
        """The service request ids of all attempts that got one."""
        return [a.request_id for a in self.attempts if a.request_id]

    def __repr__(self) -> str:
        return (
            f"OperationContext(client_request_id={self.client_request_id!r}, "
            f"attempts={len(self.attempts)})"
        )
