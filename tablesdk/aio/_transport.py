"""Sending one logical request from asyncio: the sync transport's retry loop, awaited.

:class:`AsyncTransport` drives the very :class:`~tablesdk._transport.RetryLoop`
the thread-based :class:`~tablesdk._transport.Transport` drives (preparing the
request once, a fresh date and signature per attempt, classification,
``ambiguous_retry``, the retry policy, the deadline, one
:class:`~tablesdk._transport.RequestAttempt` per attempt and the log lines);
it differs only in awaiting the :class:`~tablesdk.aio._sender.AiohttpSender`
and waiting with :func:`asyncio.sleep`. The options and their checks are the
sync transport's too: an AsyncTransport keeps a :class:`Transport` whose
:meth:`~tablesdk._transport.Transport.start` prepares each operation and whose
own sender is never used.

Cancellation: cancelling the awaiting task cancels the HTTP exchange or the
back-off sleep in progress; aiohttp closes the connection of an exchange cut
short, so the pool never hands out a connection with a half-read answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from .._http import DEFAULT_MAX_RESPONSE_BYTES, HttpRequest, HttpResponse, SendError, Timeout
from .._retry import RetryPolicy
from .._tracing import active_tracer, atraced_attempt
from .._transport import (
    DEFAULT_TIMEOUT,
    DEFAULT_USER_AGENT,
    AnswerCheck,
    AttemptResult,
    RetryLoop,
    ErrorParser,
    OperationContext,
    Transport,
    sign_attempt,
)
from ._sender import AiohttpSender, AsyncSender

if TYPE_CHECKING:
    from .._auth import TableCredential

__all__ = ["AsyncTransport"]


class _Unused:
    """The sender of the options-only sync transport: never called."""

    def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        raise RuntimeError("the async transport sends through its AiohttpSender")


class AsyncTransport:
    """Sends requests to the Table service from asyncio, retrying as a policy says.

    The options are :class:`tablesdk._transport.Transport`'s (``credential``,
    ``retry_policy``, ``error_parser``, ``timeout`` per attempt as seconds or
    ``(connect, read)``, ``server_timeout``, ``user_agent``, ``clock``);
    ``sender`` is an :class:`AiohttpSender` by default, built from
    ``pool_size``, ``trust_env`` and ``max_response_bytes``. ``sleep`` (a
    coroutine function) is injectable for tests. An AsyncTransport belongs to
    the event loop it first sends on; close it with ``await transport.close()``.
    """

    def __init__(
        self,
        credential: TableCredential | None,
        *,
        retry_policy: RetryPolicy,
        error_parser: ErrorParser,
        pool_size: int = 100,
        timeout: Timeout = DEFAULT_TIMEOUT,
        server_timeout: int | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        trust_env: bool = False,
        sender: AsyncSender | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._options = Transport(
            credential, retry_policy=retry_policy, error_parser=error_parser, pool_size=pool_size,
            timeout=timeout, server_timeout=server_timeout, user_agent=user_agent, sender=_Unused(), clock=clock,
        )
        self._sender: AsyncSender = sender if sender is not None else AiohttpSender(
            pool_size=pool_size, trust_env=trust_env, max_response_bytes=max_response_bytes
        )
        self._pool_size = pool_size
        self._sleep = sleep
        self._clock = clock

    @property
    def retry_policy(self) -> RetryPolicy:
        """The policy used when :meth:`send` is not given one."""
        return self._options.retry_policy

    @retry_policy.setter
    def retry_policy(self, policy: RetryPolicy) -> None:
        self._options.retry_policy = policy

    @property
    def sender(self) -> AsyncSender:
        """The sender that puts each attempt on the wire."""
        return self._sender

    @property
    def credential(self) -> TableCredential | None:
        """The credential that signs each attempt (None: unsigned)."""
        return self._options.credential

    @property
    def pool_size(self) -> int:
        """Connections kept open at most (by the default sender)."""
        return self._pool_size

    @property
    def timeout(self) -> Timeout:
        """Default client timeout of each attempt."""
        return self._options.timeout

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
        check: AnswerCheck | None = None,
        read_only: bool = False,
        locations: tuple[str, ...] = (),
    ) -> HttpResponse:
        """Send one logical request, retrying as the policy says, and return the response.

        Arguments, results and errors are those of :meth:`tablesdk._transport.Transport.send`.
        """
        request = HttpRequest(method, url, dict(headers) if headers else {}, body)
        loop = self._options.start(
            request, retry_policy=retry_policy, timeout=timeout, deadline=deadline,
            server_timeout=server_timeout, operation_context=operation_context, check=check,
            read_only=read_only, locations=locations,
        )
        credential = self._options.credential
        while True:
            attempt_timeout = loop.next_timeout(self._clock())
            start = self._clock()
            signed = sign_attempt(loop.attempt_request(), credential)
            tracer = active_tracer()
            if tracer is None:
                result = await self._attempt(loop, signed, attempt_timeout)
            else:
                result = await atraced_attempt(
                    tracer, signed, loop.attempt, lambda: self._attempt(loop, signed, attempt_timeout)
                )
            step = loop.settle(result, start, self._clock())
            if step.delay is None:
                return step.finish()
            await self._sleep(step.delay)

    async def _attempt(self, loop: RetryLoop, signed: HttpRequest, timeout: Timeout) -> AttemptResult:
        try:
            return loop.answered(signed, await self._sender.send(signed, timeout))
        except SendError as exc:
            return loop.failed(signed, exc)

    async def close(self) -> None:
        """Close the HTTP session and its pooled connections."""
        await self._sender.close()

    def __repr__(self) -> str:
        credential = self._options.credential
        return (
            f"AsyncTransport(credential={type(credential).__name__ if credential else None}, "
            f"retry_policy={self.retry_policy!r}, pool_size={self.pool_size}, timeout={self.timeout!r})"
        )
