"""Senders that ask the fault proxy first (tests/faults.py is the front and says why): each
attempt learns its fault before it goes out, so only the attempts a delay fault holds get a
short read timeout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from fault_proxy import FaultProxy
from fault_rules import DECISION_HEADER, DELAY_FAULTS, Decision

__all__ = ["AsyncFaultSender", "FaultSender"]


def _request_target(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _attempt_timeout(decision: Decision, timeout: float | tuple[float, float], impatience: float | None) -> Any:
    """The client's ``timeout`` for the attempt, with the read part cut to ``impatience``
    when a delay fault will hold it (the proxy holds it until the client gives up)."""
    if impatience is None or decision.fault not in DELAY_FAULTS:
        return timeout
    connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
    return (connect, min(read, impatience))


def _never_sent(exc: BaseException) -> bool:
    state = getattr(exc, "state", None)  # tablesdk's SendError says whether the request left
    return getattr(state, "name", None) == "NOT_SENT"


class FaultSender:
    """A tablesdk sender (``sender=`` of a client) around ``inner`` that lets ``proxy`` decide
    each attempt's fault before it is sent (see the module docstring).

    An attempt the proxy will hold with a delay fault is sent with its read timeout cut
    to ``impatience`` seconds; every other attempt with the client's timeout unchanged
    (``impatience=None``: every attempt, for tests of the client's own timeouts, which
    still get the exact accounting of :attr:`FaultProxy.events`).
    The decision travels in :data:`DECISION_HEADER`, added to a copy of the signed
    request. Other attributes are ``inner``'s.
    """

    def __init__(self, inner: Any, proxy: FaultProxy, *, impatience: float | None = 0.3) -> None:
        self.inner = inner
        self.proxy = proxy
        self.impatience = impatience

    def send(self, request: Any, timeout: Any) -> Any:
        decision, tagged = _decide_and_tag(self.proxy, request)
        try:
            return self.inner.send(tagged, _attempt_timeout(decision, timeout, self.impatience))
        except BaseException as exc:
            if _never_sent(exc):
                self.proxy.withdraw(decision)
            raise

    def close(self) -> None:
        close: Callable[[], None] | None = getattr(self.inner, "close", None)
        if close is not None:
            close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class AsyncFaultSender:
    """:class:`FaultSender` for ``tablesdk.aio`` (``inner`` is an AsyncSender)."""

    def __init__(self, inner: Any, proxy: FaultProxy, *, impatience: float | None = 0.3) -> None:
        self.inner = inner
        self.proxy = proxy
        self.impatience = impatience

    async def send(self, request: Any, timeout: Any) -> Any:
        decision, tagged = _decide_and_tag(self.proxy, request)
        try:
            return await self.inner.send(tagged, _attempt_timeout(decision, timeout, self.impatience))
        except BaseException as exc:
            if _never_sent(exc):
                self.proxy.withdraw(decision)
            raise

    async def close(self) -> None:
        await self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _decide_and_tag(proxy: FaultProxy, request: Any) -> tuple[Decision, Any]:
    decision = proxy.decide(request.method, _request_target(request.url))
    tagged = request.copy()
    tagged.headers[DECISION_HEADER] = decision.id
    return decision, tagged
