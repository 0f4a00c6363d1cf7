"""The aiohttp-based sender of the async client: one HTTP exchange, no retries.

:class:`AiohttpSender` turns a signed request into an
:class:`~tablesdk.transport.HttpResponse` (status, headers, whole body) or
raises :class:`SendFailure`, which carries the error to report
(:class:`~tablesdk.errors.RequestTimeoutError` or
:class:`~tablesdk.errors.ConnectionFailedError`) and whether the request may
have reached the service. Retrying, signing and classification of answers are
the transport's; nothing here knows about entities.

Why aiohttp (measured in docs/async.md): at 200 concurrent signed point reads
against Azurite it moved about five to eight times the requests of httpx on
the same loop, at a tenth of the client CPU per request.

What goes on the wire is exactly the caller's request: the URL is passed to
aiohttp as already encoded (yarl would otherwise re-quote the path, and the
Shared Key signature covers the path as sent), and aiohttp's automatic
``User-Agent``, ``Accept-Encoding`` and ``Content-Type`` headers are
suppressed (a ``Content-Type`` the caller did not sign would break the
signature). Environment proxy settings and ``~/.netrc`` are ignored unless
``trust_env`` is set, as in the sync client.
"""

from __future__ import annotations

import asyncio
import errno
from typing import TYPE_CHECKING, Any

from requests.structures import CaseInsensitiveDict

from ..errors import ConnectionFailedError, RequestTimeoutError, TableServiceError
from ..transport import HttpResponse, Timeout, redact_text

if TYPE_CHECKING:
    import aiohttp

__all__ = ["AiohttpSender", "SendFailure", "import_aiohttp"]

# aiohttp adds these unless told not to; none of them is part of a Table service request.
_SKIP_AUTO_HEADERS = ("User-Agent", "Accept-Encoding", "Content-Type", "Accept")


def import_aiohttp() -> Any:
    """The aiohttp module, or an ImportError that says which extra to install."""
    try:
        import aiohttp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "tablesdk.aio needs aiohttp: install it with `pip install tablesdk[aio]`"
        ) from exc
    return aiohttp


class SendFailure(Exception):
    """No complete response arrived.

    ``error`` is the exception to report; ``sent`` is False when the request
    certainly never reached the service (the connection could not be opened)
    and True when it may have been received and acted upon.
    """

    def __init__(self, error: TableServiceError, *, sent: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.sent = sent


def _connect_and_read(timeout: Timeout) -> tuple[float, float]:
    if isinstance(timeout, tuple):
        return float(timeout[0]), float(timeout[1])
    return float(timeout), float(timeout)


def _reason(exc: BaseException) -> str:
    """A short, URL-free description of a failure, naming the OS error where there is one."""
    if isinstance(exc, OSError) and exc.errno == errno.ECONNRESET:
        name = "ConnectionResetError"
    elif isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED:
        name = "ConnectionRefusedError"
    else:
        name = type(exc).__name__
    text = str(exc)
    return redact_text(f"{name}: {text}" if text else name)


class AiohttpSender:
    """Sends one request over a pooled :class:`aiohttp.ClientSession`.

    ``pool_size`` bounds the open connections (aiohttp queues requests beyond
    it instead of opening throw-away connections); ``keepalive`` is how long
    an idle connection is kept. The session is created on the first request,
    inside the running event loop, and closed by :meth:`close`.
    """

    def __init__(self, *, pool_size: int = 100, trust_env: bool = False, keepalive: float = 4.0) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size must be an int >= 1, got {pool_size!r}")
        self._aiohttp = import_aiohttp()
        import yarl  # aiohttp's own URL type

        self._url_type: Any = yarl.URL
        self._pool_size = pool_size
        self._trust_env = trust_env
        # Below the 5 s after which Azurite closes an idle connection, so a request
        # rarely lands on a connection the server is closing.
        self._keepalive = keepalive
        self._session: aiohttp.ClientSession | None = None

    @property
    def pool_size(self) -> int:
        """Connections kept open at most."""
        return self._pool_size

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            aiohttp = self._aiohttp
            connector = aiohttp.TCPConnector(limit=self._pool_size, keepalive_timeout=self._keepalive)
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=self._trust_env,
                auto_decompress=False,
                skip_auto_headers=_SKIP_AUTO_HEADERS,
            )
        return self._session

    async def send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | None,
        timeout: Timeout,
        *,
        total: float | None = None,
        where: str,
        client_request_id: str,
    ) -> HttpResponse:
        """One exchange. ``timeout`` is seconds or (connect, read); ``total`` bounds the whole
        exchange (the operation's deadline). ``where`` names the request in error texts."""
        aiohttp = self._aiohttp
        connect, read = _connect_and_read(timeout)
        limits = aiohttp.ClientTimeout(total=total, sock_connect=connect, sock_read=read)
        session = self._get_session()
        try:
            async with session.request(
                method, self._url_type(url, encoded=True), headers=headers, data=body,
                timeout=limits, allow_redirects=False,
            ) as raw:
                content = await raw.read()
                return HttpResponse(
                    status=raw.status, headers=CaseInsensitiveDict(raw.headers.items()), body=content
                )
        except aiohttp.InvalidURL as exc:
            raise ValueError(f"cannot send {where}: invalid URL") from exc
        except aiohttp.ConnectionTimeoutError as exc:
            raise self._timeout(where, exc, client_request_id, sent=False) from exc
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise self._timeout(where, exc, client_request_id, sent=True) from exc
        except aiohttp.ClientConnectorError as exc:  # refused, unreachable, TLS: never sent
            raise self._failed(where, exc, client_request_id, sent=False) from exc
        except (aiohttp.ClientError, OSError) as exc:  # reset, disconnected, truncated body
            raise self._failed(where, exc, client_request_id, sent=True) from exc

    @staticmethod
    def _timeout(where: str, exc: BaseException, client_request_id: str, *, sent: bool) -> SendFailure:
        reason = _reason(exc) if str(exc) else type(exc).__name__
        error = RequestTimeoutError(
            f"{where}: no response within the client timeout ({reason})", client_request_id=client_request_id
        )
        return SendFailure(error, sent=sent)

    @staticmethod
    def _failed(where: str, exc: BaseException, client_request_id: str, *, sent: bool) -> SendFailure:
        error = ConnectionFailedError(
            f"{where}: connection failed ({_reason(exc)})", client_request_id=client_request_id
        )
        return SendFailure(error, sent=sent)

    async def close(self) -> None:
        """Close the session and its pooled connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def __repr__(self) -> str:
        return f"AiohttpSender(pool_size={self._pool_size})"
