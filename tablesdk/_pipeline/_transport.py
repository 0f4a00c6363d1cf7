"""Sending one logical request: sign, send, time out, retry and record.

:class:`Transport` is a retry loop over a :class:`~tablesdk._pipeline._http.Sender` (by
default a :class:`~tablesdk._pipeline._requests_sender.RequestsSender`, one pooled
:class:`requests.Session`). It turns an :class:`~tablesdk._pipeline._http.HttpRequest`
into an :class:`~tablesdk._pipeline._http.HttpResponse`, or raises a
:class:`~tablesdk._core._errors.TableServiceError` subclass. It knows nothing about
entities or payload formats: error bodies are turned into exceptions by the
``error_parser`` the client passes in, and a ``check`` callback may refuse a
2xx answer (an entity group transaction refused inside its ``202``).

Every decision of the loop is made by a :class:`RetryLoop`, which does no I/O:
the thread-based :class:`Transport` and an asyncio one differ only in how they
call the sender and how they wait. What happens on every attempt:

* :func:`prepare_request` (once per operation) sets ``x-ms-client-request-id``
  (the same for every attempt), ``User-Agent``, ``Content-Length`` and the
  service's ``timeout=N``; :func:`sign_attempt` (once per attempt) copies the
  request, sets a fresh ``x-ms-date`` and lets the credential sign the copy;
* the sender sends it; a :class:`~tablesdk._pipeline._http.SendError` becomes
  :class:`~tablesdk._core._errors.RequestTimeoutError` or
  :class:`~tablesdk._core._errors.ConnectionFailedError`, a status >= 300 whatever
  ``error_parser`` builds; each attempt's :class:`~tablesdk._pipeline._http.AttemptState`
  (not sent / sent, outcome unknown / answered) is recorded once;
* the retry policy decides whether to try again and after how long; an
  overall ``deadline`` caps each attempt's timeout and is never slept past;
* one DEBUG line is logged to ``tablesdk._pipeline._transport`` (a WARNING with the cause
  and the delay when the attempt will be retried) and one
  :class:`RequestAttempt` is appended to the caller's :class:`OperationContext`.

Ambiguous writes (the Azure Storage team's "Network errors and timeouts on successful server
side operations") are decided by :func:`is_ambiguous`, the one rule every
caller uses: a write answered 404, 409 or 412 after an earlier attempt whose
outcome was unknown gets ``ambiguous_retry = True``, since the first attempt may
have done the work. Reads are never flagged.

Secrets never leave this module: the ``sig`` value of a SAS URL is replaced by
``REDACTED`` wherever a URL is logged or recorded, the ``Authorization`` header is
never logged, exception messages carry no query string, and the request's own
signature is scrubbed from server error messages and headers that echo it; the
redaction itself (and the filter urllib3's DEBUG lines pass through) is
:mod:`tablesdk._core._redaction`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from .._core._auth import http_date
from .._core._errors import (
    BatchError, ConnectionFailedError, RequestTimeoutError, TableServiceError, require_positive_int,
)
from ._http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    AttemptState,
    HttpRequest,
    HttpResponse,
    SendError,
    Sender,
    Timeout,
    check_max_response_bytes,
)
from .._core._redaction import (
    SecretPattern,
    attempt_secrets,
    install_log_filter,
    library_logger,
    redact_text,
    redact_url,
    scrub_error,
    scrub_headers,
    strip_query,
)
from ._operation_context import (
    NO_HEADERS,
    OperationContext,
    RequestAttempt,
    ResponseReceived,
    RetryDecision,
    read_only_headers,
)
from ._retry import RetryPolicy, honours_server_delay, server_delay
from ._settings import DEFAULT_TIMEOUT, DEFAULT_USER_AGENT, RequestSettings
from .._core._tracing import active_tracer, traced_attempt

if TYPE_CHECKING:
    import logging

    from .._core._auth import TableCredential

__all__ = [
    "AttemptResult",
    "AttemptState",
    "HttpRequest",
    "HttpResponse",
    "RequestAttempt",
    "OperationContext",
    "ResponseReceived",
    "RetryDecision",
    "RetryLoop",
    "RequestSettings",
    "Step",
    "Transport",
    "Timeout",
    "attempt_state_for_status",
    "begin_operation",
    "is_ambiguous",
    "mark_ambiguous",
    "prepare_request",
    "sign_attempt",
    "DEFAULT_USER_AGENT",
    "DEFAULT_TIMEOUT",
]

#: The transport's logger, made with the first record (logging is not imported by ``import tablesdk``).
_LOG: logging.Logger | None = None


def _make_log() -> logging.Logger:
    global _LOG
    _LOG = library_logger("tablesdk.transport")
    return _LOG

_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_AMBIGUOUS_STATUSES = frozenset({404, 409, 412})



def _cap_timeout(value: Timeout, remaining: float | None) -> Timeout:
    if remaining is None:
        return value
    if isinstance(value, tuple):
        return (min(value[0], remaining), min(value[1], remaining))
    return min(value, remaining)


def _with_server_timeout(url: str, seconds: int) -> str:
    parts = urlsplit(url)
    names = {p.split("=", 1)[0].lower() for p in parts.query.split("&") if p}
    if "timeout" in names:
        return url
    query = f"{parts.query}&timeout={seconds}" if parts.query else f"timeout={seconds}"
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


# ---------------------------------------------------------------- decisions (no I/O)


def attempt_state_for_status(status: int) -> AttemptState:
    """What an answer with ``status`` says of the request's outcome.

    A 5xx or 408 leaves it unknown: the service may have applied the request before
    failing (or before the connection's timeout). Every other status is definite.
    """
    return AttemptState.UNKNOWN if status >= 500 or status == 408 else AttemptState.ANSWERED


def is_ambiguous(method: str, status: int | None, earlier: Iterable[AttemptState]) -> bool:
    """Whether an answer with ``status`` to a retried ``method`` may be caused by the retry itself.

    True for a write (not GET/HEAD/OPTIONS) answered 404, 409 or 412 after an earlier
    attempt of the same operation whose outcome is unknown: that attempt may have
    inserted, deleted or changed the entity, and the retry then meets its own work.
    An attempt that was never sent (connection refused) does not count. This is the
    one rule for the transport, the client's batches and bulk loading.
    """
    if method.upper() in _READ_METHODS or status not in _AMBIGUOUS_STATUSES:
        return False
    return any(state is AttemptState.UNKNOWN for state in earlier)


def mark_ambiguous(error: TableServiceError) -> None:
    """Set ``ambiguous_retry`` on ``error`` (and on the per-status cause of a :class:`BatchError`)."""
    error.ambiguous_retry = True
    if isinstance(error, BatchError) and error.cause is not None:
        error.cause.ambiguous_retry = True


def prepare_request(
    request: HttpRequest,
    *,
    client_request_id: str,
    user_agent: str,
    server_timeout: int | None,
) -> HttpRequest:
    """The request every attempt of one operation starts from (a copy; ``request`` is unchanged).

    Sets ``x-ms-client-request-id`` (the same on every attempt, so the service's logs
    tie them together), a ``User-Agent`` unless given, ``Content-Length`` for bodies
    and writes, and the service's ``timeout=N`` query parameter; drops any
    ``x-ms-date``, which :func:`sign_attempt` sets fresh on each attempt.
    """
    prepared = request.copy()
    prepared.method = request.method.upper()
    if server_timeout is not None:
        prepared.url = _with_server_timeout(prepared.url, server_timeout)
    for name in ("x-ms-client-request-id", "x-ms-date", "Content-Length"):
        prepared.without_header(name)
    prepared.headers["x-ms-client-request-id"] = client_request_id
    if prepared.header("User-Agent") is None:
        prepared.headers["User-Agent"] = user_agent
    if prepared.body is not None or prepared.method not in _READ_METHODS:
        prepared.headers["Content-Length"] = str(len(prepared.body) if prepared.body is not None else 0)
    return prepared


def sign_attempt(request: HttpRequest, credential: TableCredential | None) -> HttpRequest:
    """The signed copy of ``request`` for one attempt: a fresh ``x-ms-date``, then the credential.

    A credential is any object with ``apply(method, url, headers) -> url`` that may add
    headers (Shared Key's ``Authorization``, a bearer token) and return the URL to send
    (a SAS appends its query). None sends the request unsigned.
    """
    signed = request.copy()
    signed.headers["x-ms-date"] = http_date()
    if credential is not None:
        signed.url = credential.apply(signed.method, signed.url, signed.headers)
    return signed


class AttemptResult:
    """What one attempt produced: a response to return, or the error it raised, and its state."""

    # A plain class, not a dataclass: each dataclass costs ``import tablesdk`` about 0.5 ms (start-up).

    __slots__ = ("response", "error", "state", "url", "request_id", "status", "headers")

    def __init__(
        self, response: HttpResponse | None, error: TableServiceError | None, state: AttemptState, url: str,
        request_id: str | None = None, status: int | None = None, headers: Mapping[str, str] = NO_HEADERS,
    ) -> None:
        self.response = response
        self.error = error
        self.state = state
        self.url = url  # the URL sent, redacted
        self.request_id = request_id
        self.status = status
        self.headers = headers  # an error answer's, read-only and scrubbed (empty for a success or no answer)


class Step:
    """The loop's decision after an attempt: wait ``delay`` seconds and try again, or finish."""

    # A plain class, not a dataclass: each dataclass costs ``import tablesdk`` about 0.5 ms (start-up).

    __slots__ = ("delay", "response", "error", "cause")

    def __init__(
        self, delay: float | None, response: HttpResponse | None = None, error: TableServiceError | None = None,
        cause: BaseException | None = None,
    ) -> None:
        self.delay = delay
        self.response = response
        self.error = error
        self.cause = cause

    def finish(self) -> HttpResponse:
        """Return the response, or raise the final error (chained to its cause)."""
        if self.response is not None:
            return self.response
        assert self.error is not None
        if self.cause is None:
            raise self.error
        raise self.error from self.cause


ErrorParser = Callable[[HttpResponse], TableServiceError]
AnswerCheck = Callable[[HttpResponse], None]


class RetryLoop:
    """The decisions of one logical request across its attempts, with no I/O of its own.

    A driver (the thread-based :class:`Transport`, or an asyncio one) repeats: take
    :meth:`next_timeout`, sign (:func:`sign_attempt`) and send the request, feed the
    answer to :meth:`answered` or the :class:`~tablesdk._pipeline._http.SendError` to
    :meth:`failed`, then :meth:`settle` it, which classifies it, flags ambiguity,
    asks the policy, applies the deadline, records the attempt and logs; finally
    wait the step's ``delay`` or :meth:`Step.finish`.
    """

    # A plain class, not a dataclass: each dataclass costs ``import tablesdk`` about 0.5 ms (start-up).

    __slots__ = (
        "request", "policy", "timeout", "error_parser", "started", "deadline", "check", "operation_context",
        "locations", "read_only", "attempt", "states", "last_error",
    )

    def __init__(
        self,
        request: HttpRequest,
        policy: RetryPolicy,
        timeout: Timeout,
        error_parser: ErrorParser,
        started: float,
        deadline: float | None = None,
        check: AnswerCheck | None = None,
        operation_context: OperationContext | None = None,
        locations: tuple[str, ...] = (),
        read_only: bool = False,
    ) -> None:
        self.request = request  # prepared (see prepare_request)
        self.policy = policy
        self.timeout = timeout
        self.error_parser = error_parser
        self.started = started
        self.deadline = deadline
        self.check = check
        self.operation_context = operation_context
        self.locations = locations  # prepared URLs the attempts cycle through (primary, secondary)
        self.read_only = read_only  # a POST that changes nothing (a query inside a $batch): never ambiguous
        self.attempt = 0
        self.states: list[AttemptState] = []
        self.last_error: TableServiceError | None = None

    def attempt_request(self) -> HttpRequest:
        """The request of the current attempt: with ``locations``, attempt n goes to the
        n-th of them, cycling (a read retried on the other endpoint of an RA-GRS account)."""
        if not self.locations:
            return self.request
        request = self.request.copy()
        request.url = self.locations[(max(self.attempt, 1) - 1) % len(self.locations)]
        return request

    @property
    def client_request_id(self) -> str:
        """The ``x-ms-client-request-id`` of every attempt."""
        return self.request.header("x-ms-client-request-id") or ""

    def next_timeout(self, now: float) -> Timeout:
        """Start the next attempt: its client timeout, capped to the time the deadline leaves.

        Raises :class:`~tablesdk._core._errors.RequestTimeoutError` when a late wake-up already
        ran past the deadline.
        """
        self.attempt += 1
        if self.deadline is None:
            return self.timeout
        remaining = self.started + self.deadline - now
        if remaining <= 0:
            raise self._deadline_error(self.attempt - 1, self.last_error) from self.last_error
        return _cap_timeout(self.timeout, remaining)

    def answered(self, signed: HttpRequest, response: HttpResponse) -> AttemptResult:
        """Classify a response: a success (status < 300 that ``check`` accepts) or an error."""
        url = redact_url(signed.url)
        secrets = attempt_secrets(signed.headers, signed.url)
        scrub_headers(response.headers, secrets)
        # For the decoder and the error parser: what they quote of the body is scrubbed of these
        # before it is cut (_formats.decoded, error_parser).
        response.attempt_secrets = secrets
        request_id = response.request_id
        if response.status < 300:  # a 3xx is not the operation's answer: the Table service never redirects
            try:
                if self.check is not None:
                    self.check(response)
            except TableServiceError as refused:  # refused inside a 2xx (a batch's change set)
                headers = read_only_headers(response.headers)
                self._own(refused, request_id, secrets, headers)
                # An answer that does not say what happened (already flagged) leaves the outcome unknown.
                state = AttemptState.UNKNOWN if refused.ambiguous_retry else attempt_state_for_status(
                    refused.status_code or response.status
                )
                return AttemptResult(None, refused, state, url, request_id, response.status, headers)
            response.url = url
            # A success's headers are copied only for a hook that asks (_notify): not on every request.
            return AttemptResult(response, None, AttemptState.ANSWERED, url, request_id, response.status)
        headers = read_only_headers(response.headers)
        error = self.error_parser(response)
        self._own(error, request_id, secrets, headers)
        state = attempt_state_for_status(response.status)
        return AttemptResult(None, error, state, url, request_id, response.status, headers)

    def failed(self, signed: HttpRequest, exc: SendError) -> AttemptResult:
        """Turn a sender's failure into the error of this attempt (raises ValueError for a bad request)."""
        where = f"{signed.method} {strip_query(signed.url)}"
        reason = redact_text(exc.reason)
        if exc.invalid:  # an invalid URL or header: a programming error, never retried
            raise ValueError(f"cannot send {where}: {reason}")
        error: TableServiceError
        if exc.status is not None:
            error = TableServiceError(f"{where}: {reason}", status_code=exc.status)
        elif exc.timed_out:
            error = RequestTimeoutError(f"{where}: no response within the client timeout ({reason})")
        else:
            error = ConnectionFailedError(f"{where}: connection failed ({reason})")
            error.refused = exc.refused
            error.unresolved = exc.unresolved
        error.client_request_id = self.client_request_id
        return AttemptResult(None, error, exc.state, redact_url(signed.url), None, exc.status)

    def _own(
        self, error: TableServiceError, request_id: str | None, secrets: SecretPattern | None,
        headers: Mapping[str, str],
    ) -> None:
        if error.request_id is None:
            error.request_id = request_id
        error.client_request_id = self.client_request_id
        error.headers = headers
        scrub_error(error, secrets)

    def settle(self, result: AttemptResult, start: float, end: float) -> Step:
        """Decide what follows the attempt ``result`` (started at ``start``, ended at ``end``)."""
        method = self.request.method
        as_method = "GET" if self.read_only else method
        error = result.error
        if error is not None and is_ambiguous(as_method, error.status_code, self.states):
            mark_ambiguous(error)
        if result.response is not None and as_method not in _READ_METHODS and AttemptState.UNKNOWN in self.states:
            result.response.after_unknown_attempt = True
        self.states.append(result.state)
        asked = server_delay(error) if error is not None else None
        decision: RetryDecision | None = None
        if error is None:
            step = Step(None, response=result.response)
        elif self._secondary_not_found(error, end):
            step = Step(0.0)
            decision = RetryDecision(self.attempt, error, True, 0.0, None, asked)
        else:
            step, decision = self._decide(error, end, asked)
        self._record(result, start, end, step.delay, asked)
        context = self.operation_context
        if context is not None and (context.response_received or context.retrying):
            self._notify(context, result, end - start, decision)
        if step.delay is not None:
            (_LOG or _make_log()).warning(
                "%s %s attempt %d failed (%s); retrying in %.3f s",
                method, result.url, self.attempt, error, step.delay,
            )
            self.last_error = error
        return step

    def _notify(
        self, context: OperationContext, result: AttemptResult, elapsed: float, decision: RetryDecision | None
    ) -> None:
        """Call the context's hooks: what the attempt got, then (after a failure) what follows."""
        if context.response_received:
            response = result.response
            headers = read_only_headers(response.headers) if response is not None else result.headers
            event = ResponseReceived(
                self.attempt, self.request.method, result.url, result.status, headers, result.request_id,
                result.error, elapsed,
            )
            for hook in list(context.response_received):
                hook(event)
        if decision is not None:
            for retry_hook in list(context.retrying):
                retry_hook(decision)

    def _secondary_not_found(self, error: TableServiceError, end: float) -> bool:
        """A 404 from a secondary endpoint may only mean replication has not caught up: when the
        attempts cycle through endpoints, go back to the primary (and stay there), as the
        Microsoft clients do. Happens at most once per operation."""
        if error.status_code != 404 or len(self.locations) < 2:
            return False
        if (self.attempt - 1) % len(self.locations) == 0:
            return False  # the primary said so: that is the answer
        if self.deadline is not None and end >= self.started + self.deadline:
            return False
        self.locations = (self.locations[0],)
        return True

    def _decide(self, error: TableServiceError, end: float, asked: float | None) -> tuple[Step, RetryDecision]:
        """Ask the policy; lengthen its wait to the server's ask (unless it opts out); apply the deadline."""
        policy_delay = self.policy.retry_after(self.attempt, error)
        if policy_delay is None:
            stopped = RetryDecision(self.attempt, error, False, None, None, asked)
            if self._timed_out_at_deadline(error, end):
                # The deadline cut the attempt short (its timeout was capped to the time left):
                # say so, as when a retry would have passed it.
                stopped.deadline_exceeded = True
                return Step(None, error=self._deadline_error(self.attempt, error), cause=error), stopped
            _note_attempts(error, self.attempt, end - self.started, self.request.url)
            return Step(None, error=error), stopped
        policy_delay = max(0.0, float(policy_delay))
        delay = policy_delay
        server_wins = asked is not None and asked > policy_delay and honours_server_delay(self.policy)
        if server_wins:
            assert asked is not None
            delay = asked
        if self.deadline is not None:
            left = self.started + self.deadline - end
            if delay >= left:
                # Sleeping would reach the deadline: stop now instead (the attempt after it could not run).
                reason = (
                    f"the server asked to wait {asked:g} s" if server_wins and asked is not None
                    else f"the next retry was due in {delay:.3g} s"
                )
                note = f"{reason}, {max(0.0, left):.3g} s were left"
                stopped = RetryDecision(self.attempt, error, False, max(0.0, left), policy_delay, asked, True)
                return Step(None, error=self._deadline_error(self.attempt, error, note), cause=error), stopped
        return Step(delay), RetryDecision(self.attempt, error, True, delay, policy_delay, asked)

    def _timed_out_at_deadline(self, error: TableServiceError, end: float) -> bool:
        """A client timeout (no answer) of an attempt that ended at the deadline."""
        return (
            self.deadline is not None
            and end >= self.started + self.deadline - _TIMER_SLACK
            and isinstance(error, RequestTimeoutError)
            and error.status_code is None
        )

    def _record(
        self, result: AttemptResult, start: float, end: float, delay: float | None, asked: float | None
    ) -> None:
        error = result.error
        status = result.status if result.status is not None else (error.status_code if error else None)
        if self.operation_context is not None:
            self.operation_context.attempts.append(RequestAttempt(
                attempt=self.attempt, method=self.request.method, url=result.url,
                client_request_id=self.client_request_id, request_id=result.request_id,
                status=status, error_code=error.error_code if error is not None else None,
                start=start, end=end, retry_delay=delay, error=str(error) if error is not None else None,
                state=result.state, server_delay=asked,
            ))
        (_LOG or _make_log()).debug(
            "%s %s -> %s (request id %s, client request id %s, attempt %d, %.1f ms)",
            self.request.method, result.url,
            status if status is not None else type(error).__name__,
            result.request_id, self.client_request_id, self.attempt, (end - start) * 1000.0,
        )

    def _deadline_error(
        self, attempts: int, last: TableServiceError | None, note: str | None = None
    ) -> RequestTimeoutError:
        text = (
            f"{self.request.method} {strip_query(self.request.url)}: deadline of {self.deadline} s exceeded "
            f"after {attempts} attempt{'s' if attempts != 1 else ''}"
        )
        if note:
            text += f" ({note})"
        if last is not None:
            text += f"; last error: {last}"
        error = RequestTimeoutError(text, client_request_id=self.client_request_id)
        if last is not None:
            error.headers = last.headers  # the last answer's (a 429's Retry-After), for the caller's own back-off
        return error


#: How early a timer may fire: an event loop runs a callback due within its clock's resolution.
_TIMER_SLACK = 0.001
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def _note_attempts(error: TableServiceError, attempts: int, elapsed: float, url: str) -> None:
    """Say, on a final network failure, how hard the transport tried (and where to look)."""
    if error.status_code is not None or not isinstance(error, (ConnectionFailedError, RequestTimeoutError)):
        return
    note = f" after {attempts} attempt{'s' if attempts != 1 else ''} over {elapsed:.1f} s"
    host = (urlsplit(url).hostname or "").lower()
    if isinstance(error, ConnectionFailedError) and error.refused and host in _LOOPBACK_HOSTS:
        note += "; nothing listens there: is the emulator running? Start one with `python -m tablesdk.devstore`"
    error.message += note
    error.args = (error.message, *error.args[1:])


def begin_operation(
    request: HttpRequest,
    settings: RequestSettings,
    error_parser: ErrorParser,
    started: float,
    *,
    operation_context: OperationContext | None = None,
    check: AnswerCheck | None = None,
    locations: tuple[str, ...] = (),
    read_only: bool = False,
) -> RetryLoop:
    """Prepare ``request`` under ``settings`` and return the :class:`RetryLoop` of one operation.

    What both drivers do before the first attempt (they differ only in awaiting the sender
    and the back-off): pick the ``x-ms-client-request-id`` (the context's, the request's own,
    else a fresh UUID4) and :func:`prepare_request` with the settings' ``User-Agent`` and
    ``server_timeout``, which is added to every location as well. ``started`` is the clock's
    reading the deadline counts from.
    """
    client_request_id = (
        (operation_context.client_request_id if operation_context else None)
        or request.header("x-ms-client-request-id")
        or str(uuid.uuid4())
    )
    server_timeout = settings.server_timeout
    prepared = prepare_request(
        request, client_request_id=client_request_id, user_agent=settings.user_agent, server_timeout=server_timeout,
    )
    if server_timeout is not None:
        locations = tuple(_with_server_timeout(url, server_timeout) for url in locations)
    return RetryLoop(
        prepared, settings.retry_policy, settings.timeout, error_parser, started, deadline=settings.deadline,
        check=check, operation_context=operation_context, locations=locations, read_only=read_only,
    )


# ---------------------------------------------------------------- the thread-based driver


def check_custom_sender_proxies(sender: object, proxies: Mapping[str, str] | None) -> None:
    """Refuse ``proxies=`` beside a custom ``sender``: they configure the default sender only."""
    if sender is not None and proxies is not None:
        raise ValueError(
            "proxies= configures the default sender; a custom sender= makes its own connections "
            "(give it the proxies: RequestsSender(proxies=...) or AiohttpSender(proxies=...))"
        )


class Transport:
    """Sends requests to the Table service through a sender, retrying as the settings say.

    ``credential`` signs each attempt (None sends unsigned, e.g. a URL that
    already carries a SAS) and ``error_parser`` turns a response with status >= 300
    into the exception to raise. The transport keeps no request settings: every
    :meth:`send` is given the :class:`~tablesdk._pipeline._settings.RequestSettings` to use
    (the client's, merged with the call's options), the same value the asyncio
    transport reads.

    ``sender`` puts each attempt on the wire (see :mod:`tablesdk._pipeline._http`); by
    default a :class:`~tablesdk._pipeline._requests_sender.RequestsSender` built from ``pool_size``,
    ``trust_env``, ``max_response_bytes`` and ``proxies`` (connection settings, fixed with the
    sender: a custom ``sender`` takes its own), which the transport closes with itself. Idle connections the server closed (Azurite closes them after 5 s)
    are reopened by urllib3; a close that races a new request surfaces as a
    :class:`~tablesdk._core._errors.ConnectionFailedError`, which the policy retries.

    ``sleep`` and ``clock`` are injectable for tests; ``clock`` measures the
    deadline and the :class:`RequestAttempt` timings. A Transport is safe
    to share between threads; close it (or use it as a context manager) to
    release its connections.
    """

    def __init__(
        self,
        credential: TableCredential | None,
        *,
        error_parser: ErrorParser,
        pool_size: int = 16,
        trust_env: bool = False,
        sender: Sender | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        proxies: Mapping[str, str] | None = None,
    ) -> None:
        require_positive_int("pool_size", pool_size)
        check_max_response_bytes(max_response_bytes)
        check_custom_sender_proxies(sender, proxies)
        self._credential = credential
        self._error_parser = error_parser
        self._pool_size = pool_size
        self._sleep = sleep
        self._clock = clock
        if sender is None:
            from ._requests_sender import RequestsSender  # requests is imported with the first client

            sender = RequestsSender(
                pool_size=pool_size, trust_env=trust_env, max_response_bytes=max_response_bytes, proxies=proxies
            )
        self._sender: Sender = sender
        install_log_filter()

    @property
    def sender(self) -> Sender:
        """The sender that puts each attempt on the wire."""
        return self._sender

    @property
    def credential(self) -> TableCredential | None:
        """The credential that signs each attempt (None: unsigned)."""
        return self._credential

    @property
    def pool_size(self) -> int:
        """Connections kept per host."""
        return self._pool_size

    def send(
        self,
        method: str,
        url: str,
        *,
        settings: RequestSettings,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        operation_context: OperationContext | None = None,
        check: AnswerCheck | None = None,
        locations: tuple[str, ...] = (),
        read_only: bool = False,
    ) -> HttpResponse:
        """Send one logical request, retrying as ``settings`` say, and return the response.

        ``settings`` give the retry policy, each attempt's client timeout, the service's
        ``timeout=N``, the ``User-Agent`` and the deadline. The deadline bounds the whole
        operation in seconds (by the transport's clock): each attempt's timeout is capped
        to the time left, no back-off sleeps past it, and running out raises
        :class:`~tablesdk._core._errors.RequestTimeoutError` saying so. The read timeout bounds
        each wait for bytes and the whole answer (the senders enforce both), so a response
        that keeps trickling in ends at the deadline too.

        ``locations`` (full URLs, ``url`` usually the first) are the endpoints the
        attempts cycle through: the first attempt goes to ``locations[0]``, a retry
        to the next, and so on. The client uses it for reads with a location mode.
        ``headers`` are not modified. Responses with status < 300 are returned unless
        ``check`` raises a :class:`~tablesdk._core._errors.TableServiceError` for them, which is
        then handled like an error answer (classified, retried, flagged ambiguous); a 3xx
        (redirects are never followed: the Table service does not redirect, so
        one means a proxy or a wrong endpoint) is an error like a 4xx.
        ``read_only`` says that a write method carries no change (a query sent
        as a ``$batch``), so its errors are never flagged ambiguous.

        Raises the error of the last attempt: what ``error_parser`` built for a
        status >= 300 (with ``request_id`` and ``client_request_id`` set),
        :class:`~tablesdk._core._errors.RequestTimeoutError` or
        :class:`~tablesdk._core._errors.ConnectionFailedError` (saying how many attempts
        were made over how long). Errors that do not come from the request (a
        credential raising ``ValueError``, say) propagate at once without retry.
        """
        request = HttpRequest(method, url, dict(headers) if headers else {}, body)
        loop = begin_operation(
            request, settings, self._error_parser, self._clock(), operation_context=operation_context, check=check,
            locations=locations, read_only=read_only,
        )
        while True:
            attempt_timeout = loop.next_timeout(self._clock())
            start = self._clock()
            signed = sign_attempt(loop.attempt_request(), self._credential)
            tracer = active_tracer()
            if tracer is None:
                result = self._attempt(loop, signed, attempt_timeout)
            else:
                result = traced_attempt(
                    tracer, signed, loop.attempt, lambda: self._attempt(loop, signed, attempt_timeout)
                )
            step = loop.settle(result, start, self._clock())
            if step.delay is None:
                return step.finish()
            self._sleep(step.delay)

    def _attempt(self, loop: RetryLoop, signed: HttpRequest, timeout: Timeout) -> AttemptResult:
        try:
            return loop.answered(signed, self._sender.send(signed, timeout))
        except SendError as exc:
            return loop.failed(signed, exc)

    def close(self) -> None:
        """Close the sender (its pooled connections), if it can be closed."""
        close = getattr(self._sender, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Transport(credential={type(self._credential).__name__ if self._credential else None}, "
            f"pool_size={self._pool_size}, sender={type(self._sender).__name__})"
        )
