"""Sending one logical request from asyncio: the sync transport's retry loop, awaited.

:class:`AsyncTransport` drives the very :class:`~tablesdk._pipeline._transport.RetryLoop`
the thread-based :class:`~tablesdk._pipeline._transport.Transport` drives, started by the same
:func:`~tablesdk._pipeline._transport.begin_operation` from the same
:class:`~tablesdk._pipeline._settings.RequestSettings` (preparing the request once, a fresh date and
signature per attempt, classification, ``ambiguous_retry``, the retry policy, the deadline,
one :class:`~tablesdk._pipeline._transport.RequestAttempt` per attempt and the log lines); it differs
only in awaiting the sender and waiting with :func:`asyncio.sleep`.

The default sender, an :class:`~tablesdk.aio.AiohttpSender`, is made with the first request
(or when :attr:`AsyncTransport.sender` is first read): aiohttp is imported then, not by
``import tablesdk.aio`` nor by making a client.

Cancellation: cancelling the awaiting task cancels the HTTP exchange or the
back-off sleep in progress; aiohttp closes the connection of an exchange cut
short, so the pool never hands out a connection with a half-read answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from .._core._errors import require_positive_int
from .._core._extras import install_hint
from .._pipeline._http import (
    DEFAULT_MAX_RESPONSE_BYTES, HttpRequest, HttpResponse, SendError, Timeout, check_max_response_bytes, check_proxies,
)
from .._core._redaction import install_log_filter
from .._pipeline._settings import RequestSettings
from .._core._tracing import active_tracer, atraced_attempt
from .._pipeline._transport import (
    AnswerCheck,
    AttemptResult,
    ErrorParser,
    OperationContext,
    RetryLoop,
    begin_operation,
    check_custom_sender_proxies,
    sign_attempt,
)

if TYPE_CHECKING:
    from .._core._auth import TableCredential
    from ._sender import AsyncSender

__all__ = ["AsyncTransport"]


def _require_aiohttp() -> None:
    """Say at once, when a client is made, that aiohttp is missing (it is imported with the first request)."""
    from importlib.util import find_spec

    if find_spec("aiohttp") is None:
        raise ImportError(f"tablesdk.aio needs aiohttp: {install_hint('aio')}")


class AsyncTransport:
    """Sends requests to the Table service from asyncio, retrying as the settings say.

    ``credential`` signs each attempt and ``error_parser`` builds the error of a status
    >= 300, as for :class:`tablesdk._pipeline._transport.Transport`; every :meth:`send` is given
    the :class:`~tablesdk._pipeline._settings.RequestSettings` to use. ``sender`` is an
    :class:`~tablesdk.aio.AiohttpSender` by default, made with the first request from
    ``pool_size``, ``trust_env``, ``max_response_bytes`` and ``proxies`` (checked now). ``sleep`` (a
    coroutine function) and ``clock`` are injectable for tests. An AsyncTransport belongs
    to the event loop it first sends on; close it with ``await transport.close()``.
    """

    def __init__(
        self,
        credential: TableCredential | None,
        *,
        error_parser: ErrorParser,
        pool_size: int = 100,
        trust_env: bool = False,
        sender: AsyncSender | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        proxies: Mapping[str, str] | None = None,
    ) -> None:
        require_positive_int("pool_size", pool_size)
        check_max_response_bytes(max_response_bytes)
        check_custom_sender_proxies(sender, proxies)
        self._proxies = check_proxies(proxies)
        if sender is None:
            _require_aiohttp()
        self._credential = credential
        self._error_parser = error_parser
        self._sender: AsyncSender | None = sender
        self._pool_size = pool_size
        self._trust_env = trust_env
        self._max_response_bytes = max_response_bytes
        self._sleep = sleep
        self._clock = clock
        install_log_filter()

    @property
    def sender(self) -> AsyncSender:
        """The sender that puts each attempt on the wire (the default one is made on first use)."""
        if self._sender is None:
            from ._sender import AiohttpSender  # aiohttp with it: the first request, not the import

            self._sender = AiohttpSender(
                pool_size=self._pool_size, trust_env=self._trust_env, max_response_bytes=self._max_response_bytes,
                proxies=self._proxies,
            )
        return self._sender

    @property
    def credential(self) -> TableCredential | None:
        """The credential that signs each attempt (None: unsigned)."""
        return self._credential

    @property
    def pool_size(self) -> int:
        """Connections kept open at most (by the default sender)."""
        return self._pool_size

    async def send(
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

        Arguments, results and errors are those of :meth:`tablesdk._pipeline._transport.Transport.send`.
        """
        request = HttpRequest(method, url, dict(headers) if headers else {}, body)
        loop = begin_operation(
            request, settings, self._error_parser, self._clock(), operation_context=operation_context, check=check,
            locations=locations, read_only=read_only,
        )
        credential = self._credential
        sender = self.sender
        while True:
            attempt_timeout = loop.next_timeout(self._clock())
            start = self._clock()
            signed = sign_attempt(loop.attempt_request(), credential)
            tracer = active_tracer()
            if tracer is None:
                result = await self._attempt(sender, loop, signed, attempt_timeout)
            else:
                result = await atraced_attempt(
                    tracer, signed, loop.attempt, lambda: self._attempt(sender, loop, signed, attempt_timeout)
                )
            step = loop.settle(result, start, self._clock())
            if step.delay is None:
                return step.finish()
            await self._sleep(step.delay)

    async def _attempt(
        self, sender: AsyncSender, loop: RetryLoop, signed: HttpRequest, timeout: Timeout
    ) -> AttemptResult:
        try:
            return loop.answered(signed, await sender.send(signed, timeout))
        except SendError as exc:
            return loop.failed(signed, exc)

    async def close(self) -> None:
        """Close the HTTP session and its pooled connections (nothing to do before the first request)."""
        if self._sender is not None:
            await self._sender.close()

    def __repr__(self) -> str:
        credential = self._credential
        sender = type(self._sender).__name__ if self._sender is not None else "AiohttpSender (not made yet)"
        return (
            f"AsyncTransport(credential={type(credential).__name__ if credential else None}, "
            f"pool_size={self._pool_size}, sender={sender})"
        )
