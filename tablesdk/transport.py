"""Sending one logical request: sign, send, time out, retry and record.

:class:`Transport` owns one :class:`requests.Session` and turns a method, URL,
headers and body into an :class:`HttpResponse`, or raises a
:class:`~tablesdk.errors.TableServiceError` subclass. It knows nothing about
entities or payload formats: error bodies are turned into exceptions by the
``error_parser`` the client passes in.

What happens on every attempt of one :meth:`Transport.send`:

* the caller's headers are copied and ``x-ms-client-request-id`` (the same for
  every attempt of the operation), ``User-Agent``, a fresh ``x-ms-date`` (any
  earlier one is removed so each attempt is signed anew) and
  ``Content-Length`` are set; then the credential signs the copy;
* the whole response body is read; ``requests`` timeouts become
  :class:`~tablesdk.errors.RequestTimeoutError`, broken or refused connections
  :class:`~tablesdk.errors.ConnectionFailedError`, and status >= 400 whatever
  ``error_parser`` builds;
* the retry policy decides whether to try again and after how long; an overall
  ``deadline`` is never slept past;
* one DEBUG line is logged to ``tablesdk.transport`` (a WARNING when the
  attempt will be retried) and one :class:`RequestAttempt` is appended to the
  caller's :class:`OperationContext`.

Ambiguous writes (the seeds' "Network errors and timeouts on successful server
side operations"): when an attempt's outcome is unknown (a timeout, a
connection lost after the request may have been sent, a 408 or a 5xx) and a
later attempt of the same write fails with 404, 409 or 412, that error gets
``ambiguous_retry = True``: the first attempt may have done the work (a
retried insert then conflicts with itself, a retried delete finds nothing, a
retried conditional update sees its own new ETag). Reads (GET, HEAD) are never
flagged.

Secrets never leave this module: the ``sig`` value of a SAS URL is replaced by
``REDACTED`` (:func:`redact_url`) wherever a URL is logged or recorded, the
``Authorization`` header is never logged, exception messages carry no query
string, and the request's own signature is scrubbed from server error messages
that echo it. urllib3's own DEBUG lines, which include the request path and
query, pass through a redacting filter as well.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.utils import formatdate
from types import TracebackType
from typing import TYPE_CHECKING, Union
from urllib.parse import unquote, urlsplit, urlunsplit

import requests
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from requests.auth import AuthBase
from requests.structures import CaseInsensitiveDict

from ._version import __version__
from .errors import ConnectionFailedError, RequestTimeoutError, TableServiceError
from .retry import RetryPolicy

if TYPE_CHECKING:
    from .auth import TableCredential

__all__ = [
    "HttpResponse",
    "RequestAttempt",
    "OperationContext",
    "Transport",
    "Timeout",
    "redact_url",
    "redact_text",
    "DEFAULT_USER_AGENT",
    "DEFAULT_TIMEOUT",
]

_LOG = logging.getLogger("tablesdk.transport")

#: ``User-Agent`` sent when the caller does not give one.
DEFAULT_USER_AGENT = f"tablesdk/{__version__}"

#: A ``requests`` timeout: seconds, or ``(connect, read)`` seconds.
Timeout = Union[float, tuple[float, float]]

#: Default client timeout: 10 s to connect, 60 s between bytes read.
DEFAULT_TIMEOUT: tuple[float, float] = (10.0, 60.0)

_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_AMBIGUOUS_STATUSES = frozenset({404, 409, 412})
_SIG_IN_URL = re.compile(r"([?&]sig=)[^&#]*", re.IGNORECASE)
_SIG_IN_TEXT = re.compile(r"(\bsig=)[^&#\s'\")]*", re.IGNORECASE)
_QUERY_IN_TEXT = re.compile(r"((?:https?://|/)[^\s?'\"]*)\?[^\s'\")]*")
_REDACTED = "REDACTED"


def redact_url(url: str) -> str:
    """Return ``url`` with the value of any ``sig`` query parameter replaced by ``REDACTED``.

    Use it wherever a URL may reach a log, a repr or an exception: a SAS
    signature is a bearer secret.
    """
    return _SIG_IN_URL.sub(r"\1" + _REDACTED, url)


def redact_text(text: str) -> str:
    """Redact ``sig=`` values and drop query strings of URLs found in free ``text``."""
    text = _SIG_IN_TEXT.sub(r"\1" + _REDACTED, text)
    return _QUERY_IN_TEXT.sub(r"\1?...", text)


def _strip_query(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class _RedactingFilter(logging.Filter):
    """Rewrites third-party log records (urllib3 logs request paths) to hide SAS signatures."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is not ours to fix
            return True
        if "sig=" in message.lower():
            record.msg = _SIG_IN_TEXT.sub(r"\1" + _REDACTED, message)
            record.args = ()
        return True


_THIRD_PARTY_LOGGERS = ("urllib3.connectionpool", "urllib3.util.retry", "urllib3.connection")
_FILTER = _RedactingFilter()


def _install_log_filter() -> None:
    for name in _THIRD_PARTY_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


class _NoAuth(AuthBase):
    """Session-level auth that changes nothing; it stops requests reading ``~/.netrc``.

    With ``trust_env`` on, requests would otherwise replace a signed
    ``Authorization`` header with Basic credentials from netrc.
    """

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        return r


@dataclass(repr=False)
class HttpResponse:
    """A complete HTTP response: status, case-insensitive headers and the whole body.

    ``after_unknown_attempt`` is True when :meth:`Transport.send` returned this
    response for a write after an earlier attempt whose outcome was unknown: a
    ``202`` entity group transaction answer that reports 404, 409 or 412 inside
    is then ambiguous in the same way as a plain error (see ``ambiguous_retry``).
    """

    status: int
    headers: CaseInsensitiveDict[str]
    body: bytes
    after_unknown_attempt: bool = False

    @property
    def request_id(self) -> str | None:
        """The service's ``x-ms-request-id``, if any."""
        return self.headers.get("x-ms-request-id")

    @property
    def etag(self) -> str | None:
        """The ``ETag`` header, if any."""
        return self.headers.get("etag")

    def __repr__(self) -> str:
        return (
            f"HttpResponse(status={self.status!r}, request_id={self.request_id!r}, "
            f"body=<{len(self.body)} bytes>)"
        )


@dataclass
class RequestAttempt:
    """What one HTTP attempt of an operation did (see :class:`OperationContext`).

    ``url`` has any SAS ``sig`` redacted. ``start`` and ``end`` are readings of
    the transport's clock (``time.monotonic`` unless injected). ``retry_delay``
    is the wait before the next attempt, None when this attempt was the last.
    ``error`` is the text of the error this attempt produced, if any.
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

    @property
    def elapsed(self) -> float:
        """Seconds the attempt took, by the transport's clock."""
        return self.end - self.start


class OperationContext:
    """An optional per-operation recorder passed to :meth:`Transport.send`.

    Every attempt is appended to :attr:`attempts` as a :class:`RequestAttempt`
    (status, request ids, timings, delays, errors), so a caller can see how
    many requests an operation made and quote the request ids when escalating.
    When :attr:`client_request_id` is set it is sent as
    ``x-ms-client-request-id`` on every attempt of every request made with
    this context; otherwise each operation gets a fresh UUID4. Not thread-safe:
    use one context per operation.
    """

    def __init__(self, client_request_id: str | None = None) -> None:
        self.client_request_id = client_request_id
        self.attempts: list[RequestAttempt] = []

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


def _check_timeout(value: Timeout, name: str) -> Timeout:
    items = value if isinstance(value, tuple) else (value,)
    if isinstance(value, tuple) and len(value) != 2:
        raise ValueError(f"{name} must be seconds or a (connect, read) pair, got {value!r}")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not item > 0:
            raise ValueError(f"{name} must be > 0 seconds, got {value!r}")
    return value


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


def _remove_header(headers: dict[str, str], name: str) -> None:
    lowered = name.lower()
    for key in [k for k in headers if k.lower() == lowered]:
        del headers[key]


def _get_header(headers: dict[str, str], name: str) -> str | None:
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return value
    return None


def _exception_reason(exc: BaseException) -> str:
    """A short, URL-free description of what went wrong under a requests exception."""
    inner: object = exc.args[0] if exc.args else None
    if isinstance(inner, urllib3.exceptions.MaxRetryError) and inner.reason is not None:
        inner = inner.reason
    if isinstance(inner, BaseException):
        text = f"{type(inner).__name__}: {inner}"
    else:
        text = type(exc).__name__
    return redact_text(text)


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, requests.Timeout):
        return True
    inner: object = exc.args[0] if exc.args else None
    if isinstance(inner, urllib3.exceptions.MaxRetryError):
        inner = inner.reason
    if isinstance(inner, urllib3.exceptions.NewConnectionError):
        return False  # urllib3 derives it from ConnectTimeoutError, but "refused" is no timeout
    return isinstance(inner, urllib3.exceptions.TimeoutError)


def _never_sent(exc: BaseException) -> bool:
    """True when the failure happened before the request could reach the server."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    inner: object = exc.args[0] if exc.args else None
    if isinstance(inner, urllib3.exceptions.MaxRetryError):
        inner = inner.reason
    return isinstance(
        inner,
        (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError),
    )


def _secrets(headers: dict[str, str], url: str) -> list[str]:
    """The values of this attempt that must not appear in an error message."""
    found: list[str] = []
    auth = _get_header(headers, "Authorization")
    if auth:
        found.append(auth)
        credential = auth.split(" ", 1)[-1]
        found.append(credential)
        if ":" in credential:
            found.append(credential.rsplit(":", 1)[1])
    for param in urlsplit(url).query.split("&"):
        name, _, value = param.partition("=")
        if name.lower() == "sig" and value:
            found.extend((value, unquote(value)))
    # Longest first, so a whole header is replaced before its parts; skip tiny values.
    return sorted({s for s in found if len(s) >= 8}, key=len, reverse=True)


def _scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, _REDACTED)
    return _SIG_IN_TEXT.sub(r"\1" + _REDACTED, text)


def _scrub_error(error: TableServiceError, secrets: list[str]) -> None:
    message = _scrub(error.message, secrets)
    if message != error.message:
        error.message = message
    error.args = tuple(_scrub(a, secrets) if isinstance(a, str) else a for a in error.args)


@dataclass
class _Outcome:
    response: HttpResponse | None
    error: TableServiceError | None
    unknown: bool  # the server may have acted on the request but we do not know the result
    url: str  # redacted URL actually sent
    request_id: str | None


class Transport:
    """Sends requests to the Table service over one pooled :class:`requests.Session`.

    ``credential`` signs each attempt (None sends unsigned, e.g. a URL that
    already carries a SAS). ``retry_policy`` is the default policy and
    ``error_parser`` turns a response with status >= 400 into the exception to
    raise. ``timeout`` is the client timeout of each attempt in seconds, or a
    ``(connect, read)`` pair (requests semantics: the read timeout bounds each
    wait for bytes, not the whole response). ``server_timeout`` appends the
    service's ``timeout=N`` query parameter to every request.

    Connections: the session's adapter keeps up to ``pool_size`` connections
    per host (``pool_connections`` and ``pool_maxsize``), so as many threads
    can share one Transport without the connection starvation the seeds warn
    about (the .NET default of 2 connections). requests never sends
    ``Expect: 100-continue`` and urllib3 disables Nagle (``TCP_NODELAY``) by
    default, the other two settings the seeds recommend. Idle connections the
    server closed (Azurite closes them after 5 s) are detected and reopened by
    urllib3; a close that races a new request surfaces as a
    :class:`~tablesdk.errors.ConnectionFailedError`, which the retry policy
    retries.

    ``trust_env`` (default False) is requests' switch for reading proxy
    settings (``HTTP(S)_PROXY``, ``NO_PROXY``) and ``REQUESTS_CA_BUNDLE`` from
    the environment. requests does that lookup on every call, which the
    Azurite measurements found to be a noticeable share of per-request CPU,
    so it is off unless asked for; pass ``trust_env=True`` behind a proxy.
    ``~/.netrc`` is never consulted either way, because it would replace the
    signed ``Authorization`` header.

    ``sleep`` and ``clock`` are injectable for tests; ``clock`` measures the
    ``deadline`` and the :class:`RequestAttempt` timings. A Transport is safe
    to share between threads; close it (or use it as a context manager) to
    release its connections.
    """

    def __init__(
        self,
        credential: TableCredential | None,
        *,
        retry_policy: RetryPolicy,
        error_parser: Callable[[HttpResponse], TableServiceError],
        pool_size: int = 16,
        timeout: Timeout = DEFAULT_TIMEOUT,
        server_timeout: int | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        trust_env: bool = False,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size must be an int >= 1, got {pool_size!r}")
        if server_timeout is not None:
            _check_server_timeout(server_timeout)
        if retry_policy is None:
            raise ValueError("retry_policy is required (use NoRetry() to disable retries)")
        self._credential = credential
        self._retry_policy = retry_policy
        self._error_parser = error_parser
        self._pool_size = pool_size
        self._timeout = _check_timeout(timeout, "timeout")
        self._server_timeout = server_timeout
        self._user_agent = user_agent
        self._sleep = sleep
        self._clock = clock

        session = requests.Session()
        session.trust_env = trust_env
        session.auth = _NoAuth()
        # Only the caller's headers and ours go out (no python-requests UA, no */* Accept).
        session.headers.clear()
        adapter = HTTPAdapter(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        self._session = session
        _install_log_filter()

    @property
    def retry_policy(self) -> RetryPolicy:
        """The policy used when :meth:`send` is not given one."""
        return self._retry_policy

    @retry_policy.setter
    def retry_policy(self, policy: RetryPolicy) -> None:
        if policy is None:
            raise ValueError("retry_policy is required (use NoRetry() to disable retries)")
        self._retry_policy = policy

    @property
    def pool_size(self) -> int:
        """Connections kept per host."""
        return self._pool_size

    @property
    def timeout(self) -> Timeout:
        """Default client timeout of each attempt."""
        return self._timeout

    @property
    def server_timeout(self) -> int | None:
        """The ``timeout=N`` sent to the service, or None."""
        return self._server_timeout

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        retry_policy: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        deadline: float | None = None,
        server_timeout: int | None = None,
        operation_context: OperationContext | None = None,
    ) -> HttpResponse:
        """Send one logical request, retrying as the policy says, and return the response.

        ``headers`` are not modified. ``retry_policy``, ``timeout`` and
        ``server_timeout`` override the transport's defaults for this call.
        ``deadline`` bounds the whole operation in seconds (by the transport's
        clock): each attempt's timeout is capped to the time left, no back-off
        sleeps past it, and running out raises
        :class:`~tablesdk.errors.RequestTimeoutError` saying so. The read timeout
        bounds each wait for bytes, so a response that keeps trickling in can
        still finish after the deadline (docs/retries.md). Responses with
        status < 300 are returned; a 3xx (redirects are never followed: the Table service does not
        redirect, so one means a proxy or a wrong endpoint) is an error like a 4xx.

        Raises the error of the last attempt: what ``error_parser`` built for a
        status >= 400 (with ``request_id`` and ``client_request_id`` set),
        :class:`~tablesdk.errors.RequestTimeoutError` or
        :class:`~tablesdk.errors.ConnectionFailedError`. Errors that do not
        come from the request (a credential raising ``ValueError``, say)
        propagate at once without retry.
        """
        method = method.upper()
        policy = retry_policy if retry_policy is not None else self._retry_policy
        base_timeout = (
            _check_timeout(timeout, "timeout") if timeout is not None else self._timeout
        )
        if deadline is not None and (
            isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not deadline > 0
        ):
            raise ValueError(f"deadline must be > 0 seconds, got {deadline!r}")
        if server_timeout is not None:
            _check_server_timeout(server_timeout)
        else:
            server_timeout = self._server_timeout
        if server_timeout is not None:
            url = _with_server_timeout(url, server_timeout)

        base_headers = dict(headers) if headers else {}
        client_request_id = (
            (operation_context.client_request_id if operation_context else None)
            or _get_header(base_headers, "x-ms-client-request-id")
            or str(uuid.uuid4())
        )
        for name in ("x-ms-client-request-id", "x-ms-date", "Content-Length"):
            _remove_header(base_headers, name)
        base_headers["x-ms-client-request-id"] = client_request_id
        if _get_header(base_headers, "User-Agent") is None:
            base_headers["User-Agent"] = self._user_agent
        if body is not None or method not in _READ_METHODS:
            base_headers["Content-Length"] = str(len(body) if body is not None else 0)

        started = self._clock()
        deadline_at = started + deadline if deadline is not None else None
        earlier_unknown = False
        last_error: TableServiceError | None = None
        attempt = 0
        while True:
            attempt += 1
            remaining = None if deadline_at is None else deadline_at - self._clock()
            if remaining is not None and remaining <= 0:  # the last sleep overran
                raise self._deadline_error(
                    method, url, deadline, attempt - 1, client_request_id, last_error
                ) from last_error
            attempt_start = self._clock()
            outcome = self._attempt(
                method, url, base_headers, body, _cap_timeout(base_timeout, remaining),
                client_request_id,
            )
            attempt_end = self._clock()
            error = outcome.error
            status = outcome.response.status if outcome.response is not None else (
                error.status_code if error is not None else None
            )
            if (
                error is not None
                and earlier_unknown
                and method not in _READ_METHODS
                and error.status_code in _AMBIGUOUS_STATUSES
            ):
                error.ambiguous_retry = True
            if outcome.response is not None and earlier_unknown and method not in _READ_METHODS:
                outcome.response.after_unknown_attempt = True
            earlier_unknown = earlier_unknown or outcome.unknown

            delay: float | None = None
            final_error: TableServiceError | None = error
            if error is not None:
                delay = policy.retry_after(attempt, error)
                if delay is not None:
                    delay = max(0.0, float(delay))
                    if deadline_at is not None and attempt_end + delay >= deadline_at:
                        # Sleeping would reach the deadline: stop now instead.
                        delay = None
                        final_error = self._deadline_error(
                            method, url, deadline, attempt, client_request_id, error
                        )

            record = RequestAttempt(
                attempt=attempt,
                method=method,
                url=outcome.url,
                client_request_id=client_request_id,
                request_id=outcome.request_id,
                status=status,
                error_code=error.error_code if error is not None else None,
                start=attempt_start,
                end=attempt_end,
                retry_delay=delay,
                error=str(error) if error is not None else None,
            )
            if operation_context is not None:
                operation_context.attempts.append(record)
            _LOG.debug(
                "%s %s -> %s (request id %s, client request id %s, attempt %d, %.1f ms)",
                method, outcome.url,
                status if status is not None else type(error).__name__,
                outcome.request_id, client_request_id, attempt,
                (attempt_end - attempt_start) * 1000.0,
            )

            if error is None:
                assert outcome.response is not None
                return outcome.response
            if delay is None:
                assert final_error is not None
                if final_error is error:
                    raise error
                raise final_error from error
            _LOG.warning(
                "%s %s attempt %d failed (%s); retrying in %.3f s",
                method, outcome.url, attempt, error, delay,
            )
            last_error = error
            self._sleep(delay)

    def _attempt(
        self,
        method: str,
        url: str,
        base_headers: dict[str, str],
        body: bytes | None,
        timeout: Timeout,
        client_request_id: str,
    ) -> _Outcome:
        headers = dict(base_headers)
        headers["x-ms-date"] = formatdate(usegmt=True)
        send_url = (
            self._credential.apply(method, url, headers) if self._credential is not None else url
        )
        safe_url = redact_url(send_url)
        try:
            raw = self._session.request(
                method, send_url, headers=headers, data=body, timeout=timeout,
                allow_redirects=False,
            )
            content = raw.content
        except (requests.ConnectionError, requests.Timeout,
                requests.exceptions.ChunkedEncodingError,
                requests.exceptions.ContentDecodingError,
                urllib3.exceptions.HTTPError) as exc:
            where = f"{method} {_strip_query(send_url)}"
            reason = _exception_reason(exc)
            transport_error: TableServiceError
            if _is_timeout(exc):
                transport_error = RequestTimeoutError(
                    f"{where}: no response within the client timeout ({reason})",
                    client_request_id=client_request_id,
                )
            else:
                transport_error = ConnectionFailedError(
                    f"{where}: connection failed ({reason})",
                    client_request_id=client_request_id,
                )
            return _Outcome(None, transport_error, not _never_sent(exc), safe_url, None)
        except requests.RequestException as exc:
            # Invalid URL, header or schema: a programming error, never retried.
            raise ValueError(
                f"cannot send {method} {_strip_query(send_url)}: {_exception_reason(exc)}"
            ) from None

        response = HttpResponse(status=raw.status_code, headers=raw.headers, body=content)
        request_id = response.request_id
        if response.status < 300:  # a 3xx is not the operation's answer: the Table service never redirects
            return _Outcome(response, None, False, safe_url, request_id)
        error = self._error_parser(response)
        if error.request_id is None:
            error.request_id = request_id
        error.client_request_id = client_request_id
        _scrub_error(error, _secrets(headers, send_url))
        unknown = response.status >= 500 or response.status == 408
        return _Outcome(None, error, unknown, safe_url, request_id)

    @staticmethod
    def _deadline_error(
        method: str,
        url: str,
        deadline: float | None,
        attempts: int,
        client_request_id: str,
        last: TableServiceError | None = None,
    ) -> RequestTimeoutError:
        text = (
            f"{method} {_strip_query(url)}: deadline of {deadline} s exceeded "
            f"after {attempts} attempt{'s' if attempts != 1 else ''}"
        )
        if last is not None:
            text += f"; last error: {last}"
        return RequestTimeoutError(text, client_request_id=client_request_id)

    def close(self) -> None:
        """Close the session and its pooled connections."""
        self._session.close()

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
            f"retry_policy={self._retry_policy!r}, pool_size={self._pool_size}, "
            f"timeout={self._timeout!r}, server_timeout={self._server_timeout!r})"
        )


def _check_server_timeout(value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"server_timeout must be an int >= 1 (seconds), got {value!r}")
