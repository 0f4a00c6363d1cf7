"""Sending one logical request from asyncio: sign, send, time out, retry and record.

:class:`AsyncTransport` is the async counterpart of
:class:`tablesdk.transport.Transport` with the same contract: per attempt a
fresh ``x-ms-date`` and signature, one ``x-ms-client-request-id`` for every
attempt of an operation, the retry policy's decision after each failure, an
overall ``deadline`` that no back-off sleeps past, one
:class:`~tablesdk.transport.RequestAttempt` per attempt in the caller's
:class:`~tablesdk.transport.OperationContext`, the same DEBUG/WARNING log lines
on ``tablesdk.transport``, the same ``ambiguous_retry`` rule for writes and the
same scrubbing of secrets. Waiting uses :func:`asyncio.sleep`; the HTTP
exchange is the :class:`~tablesdk.aio._sender.AiohttpSender`'s.

The decisions themselves are the sync transport's helpers (timeouts, server
timeout, secrets, deadline error) and :class:`_Call` below, which holds the
bookkeeping of one operation and does no I/O.

Cancellation: cancelling the awaiting task cancels the HTTP exchange or the
back-off sleep in progress; aiohttp closes the connection of an exchange cut
short, so the pool never hands out a connection with a half-read answer.
Whether the service acted on a cancelled write is unknown.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import formatdate
from typing import TYPE_CHECKING

from ..errors import TableServiceError
from ..retry import RetryPolicy
from ..transport import (
    _AMBIGUOUS_STATUSES,
    _LOG,
    _READ_METHODS,
    DEFAULT_TIMEOUT,
    DEFAULT_USER_AGENT,
    HttpResponse,
    OperationContext,
    RequestAttempt,
    Timeout,
    Transport,
    _cap_timeout,
    _check_server_timeout,
    _check_timeout,
    _get_header,
    _remove_header,
    _scrub_error,
    _secrets,
    _strip_query,
    _with_server_timeout,
    redact_url,
)
from ._sender import AiohttpSender, SendFailure

if TYPE_CHECKING:
    from ..auth import TableCredential

__all__ = ["AsyncTransport"]


@dataclass
class _Outcome:
    response: HttpResponse | None
    error: TableServiceError | None
    unknown: bool  # the service may have acted on the request, but no answer says so
    url: str  # redacted URL actually sent
    request_id: str | None


class _Call:
    """The bookkeeping of one logical request across its attempts (no I/O)."""

    def __init__(
        self,
        method: str,
        url: str,
        client_request_id: str,
        policy: RetryPolicy,
        deadline: float | None,
        started: float,
        operation_context: OperationContext | None,
    ) -> None:
        self.method = method
        self.url = url
        self.client_request_id = client_request_id
        self.policy = policy
        self.deadline = deadline
        self.deadline_at = started + deadline if deadline is not None else None
        self.operation_context = operation_context
        self.attempt = 0
        self.earlier_unknown = False
        self.last_error: TableServiceError | None = None

    def begin(self, now: float) -> float | None:
        """Start the next attempt; the seconds left before the deadline (None: no deadline)."""
        self.attempt += 1
        if self.deadline_at is None:
            return None
        remaining = self.deadline_at - now
        if remaining <= 0:  # the last sleep overran
            error = self.deadline_error(self.attempt - 1, self.last_error)
            raise error from self.last_error
        return remaining

    def deadline_error(self, attempts: int, last: TableServiceError | None) -> TableServiceError:
        return Transport._deadline_error(
            self.method, self.url, self.deadline, attempts, self.client_request_id, last
        )

    def settle(self, outcome: _Outcome, start: float, end: float) -> float:
        """Record the attempt; return the delay before the next one, or raise the final error."""
        error = outcome.error
        write = self.method not in _READ_METHODS
        if error is not None and self.earlier_unknown and write and error.status_code in _AMBIGUOUS_STATUSES:
            error.ambiguous_retry = True
        if outcome.response is not None and self.earlier_unknown and write:
            outcome.response.after_unknown_attempt = True
        self.earlier_unknown = self.earlier_unknown or outcome.unknown
        delay: float | None = None
        final_error = error
        if error is not None:
            delay = self.policy.retry_after(self.attempt, error)
            if delay is not None:
                delay = max(0.0, float(delay))
                if self.deadline_at is not None and end + delay >= self.deadline_at:
                    delay = None  # sleeping would reach the deadline: stop now instead
                    final_error = self.deadline_error(self.attempt, error)
        self._record(outcome, start, end, delay)
        if error is None:
            return -1.0
        if delay is None:
            assert final_error is not None
            if final_error is error:
                raise error
            raise final_error from error
        _LOG.warning(
            "%s %s attempt %d failed (%s); retrying in %.3f s",
            self.method, outcome.url, self.attempt, error, delay,
        )
        self.last_error = error
        return delay

    def _record(self, outcome: _Outcome, start: float, end: float, delay: float | None) -> None:
        error = outcome.error
        status = outcome.response.status if outcome.response is not None else (
            error.status_code if error is not None else None
        )
        if self.operation_context is not None:
            self.operation_context.attempts.append(RequestAttempt(
                attempt=self.attempt, method=self.method, url=outcome.url,
                client_request_id=self.client_request_id, request_id=outcome.request_id, status=status,
                error_code=error.error_code if error is not None else None, start=start, end=end,
                retry_delay=delay, error=str(error) if error is not None else None,
            ))
        _LOG.debug(
            "%s %s -> %s (request id %s, client request id %s, attempt %d, %.1f ms)",
            self.method, outcome.url, status if status is not None else type(error).__name__,
            outcome.request_id, self.client_request_id, self.attempt, (end - start) * 1000.0,
        )


class AsyncTransport:
    """Sends requests to the Table service from asyncio, over one pooled aiohttp session.

    The options are :class:`tablesdk.transport.Transport`'s: ``credential``,
    ``retry_policy``, ``error_parser``, ``timeout`` (seconds or ``(connect,
    read)``, per attempt), ``server_timeout``, ``user_agent``, ``trust_env``;
    ``pool_size`` bounds the open connections (requests beyond it wait for a
    free one). ``sleep`` (a coroutine function) and ``clock`` are injectable
    for tests. One AsyncTransport belongs to one event loop; close it with
    ``await transport.close()``.
    """

    def __init__(
        self,
        credential: TableCredential | None,
        *,
        retry_policy: RetryPolicy,
        error_parser: Callable[[HttpResponse], TableServiceError],
        pool_size: int = 100,
        timeout: Timeout = DEFAULT_TIMEOUT,
        server_timeout: int | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        trust_env: bool = False,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        sender: AiohttpSender | None = None,
    ) -> None:
        if server_timeout is not None:
            _check_server_timeout(server_timeout)
        if retry_policy is None:
            raise ValueError("retry_policy is required (use NoRetry() to disable retries)")
        self._credential = credential
        self._retry_policy = retry_policy
        self._error_parser = error_parser
        self._timeout = _check_timeout(timeout, "timeout")
        self._server_timeout = server_timeout
        self._user_agent = user_agent
        self._sleep = sleep
        self._clock = clock
        self._sender = sender if sender is not None else AiohttpSender(pool_size=pool_size, trust_env=trust_env)

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
        """Connections kept open at most."""
        return self._sender.pool_size

    @property
    def timeout(self) -> Timeout:
        """Default client timeout of each attempt."""
        return self._timeout

    def _prepare(
        self, method: str, url: str, headers: dict[str, str] | None, body: bytes | None,
        server_timeout: int | None, operation_context: OperationContext | None,
    ) -> tuple[str, dict[str, str], str]:
        if server_timeout is not None:
            _check_server_timeout(server_timeout)
        else:
            server_timeout = self._server_timeout
        if server_timeout is not None:
            url = _with_server_timeout(url, server_timeout)
        base = dict(headers) if headers else {}
        client_request_id = (
            (operation_context.client_request_id if operation_context else None)
            or _get_header(base, "x-ms-client-request-id")
            or str(uuid.uuid4())
        )
        for name in ("x-ms-client-request-id", "x-ms-date", "Content-Length"):
            _remove_header(base, name)
        base["x-ms-client-request-id"] = client_request_id
        if _get_header(base, "User-Agent") is None:
            base["User-Agent"] = self._user_agent
        if body is not None or method not in _READ_METHODS:
            base["Content-Length"] = str(len(body) if body is not None else 0)
        return url, base, client_request_id

    async def send(
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

        Same arguments, results and errors as :meth:`tablesdk.transport.Transport.send`.
        One difference: with a ``deadline``, each attempt as a whole (not only
        each wait for bytes) is bounded by the time left.
        """
        method = method.upper()
        policy = retry_policy if retry_policy is not None else self._retry_policy
        base_timeout = _check_timeout(timeout, "timeout") if timeout is not None else self._timeout
        if deadline is not None and (
            isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not deadline > 0
        ):
            raise ValueError(f"deadline must be > 0 seconds, got {deadline!r}")
        url, base_headers, client_request_id = self._prepare(
            method, url, headers, body, server_timeout, operation_context
        )
        call = _Call(method, url, client_request_id, policy, deadline, self._clock(), operation_context)
        while True:
            remaining = call.begin(self._clock())
            start = self._clock()
            outcome = await self._attempt(
                method, url, base_headers, body, _cap_timeout(base_timeout, remaining), remaining,
                client_request_id,
            )
            delay = call.settle(outcome, start, self._clock())
            if delay < 0:
                assert outcome.response is not None
                return outcome.response
            await self._sleep(delay)

    async def _attempt(
        self,
        method: str,
        url: str,
        base_headers: dict[str, str],
        body: bytes | None,
        timeout: Timeout,
        total: float | None,
        client_request_id: str,
    ) -> _Outcome:
        headers = dict(base_headers)
        headers["x-ms-date"] = formatdate(usegmt=True)
        send_url = self._credential.apply(method, url, headers) if self._credential is not None else url
        safe_url = redact_url(send_url)
        try:
            response = await self._sender.send(
                method, send_url, headers, body, timeout, total=total,
                where=f"{method} {_strip_query(send_url)}", client_request_id=client_request_id,
            )
        except SendFailure as failure:
            return _Outcome(None, failure.error, failure.sent, safe_url, None)
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

    async def close(self) -> None:
        """Close the HTTP session and its pooled connections."""
        await self._sender.close()

    def __repr__(self) -> str:
        return (
            f"AsyncTransport(credential={type(self._credential).__name__ if self._credential else None}, "
            f"retry_policy={self._retry_policy!r}, pool_size={self.pool_size}, timeout={self._timeout!r})"
        )
