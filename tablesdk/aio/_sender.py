"""The asyncio sender: one HTTP exchange over aiohttp, no retries.

:class:`AiohttpSender` is the async counterpart of
:class:`tablesdk._pipeline._requests_sender.RequestsSender` with the same contract (the seam of
:mod:`tablesdk._pipeline._http`): ``await send(request, timeout)`` puts one signed
:class:`~tablesdk._pipeline._http.HttpRequest` on the wire and returns the complete
:class:`~tablesdk._pipeline._http.HttpResponse` whatever its status, or raises
:class:`~tablesdk._pipeline._http.SendError` saying whether the request may have reached
the server (``state``), whether it timed out and whether the connection was
refused. Signing, retrying and reading statuses are the transport's.

Why aiohttp (measured, see docs/async.md): at 200 concurrent signed point reads
against Azurite it moved five to eight times the requests of httpx on the same
loop, at about a tenth of the client CPU per request.

What goes on the wire is exactly the caller's request: the URL is handed to
aiohttp as already encoded (yarl would otherwise re-quote the path, and the
Shared Key signature covers the path as sent), and aiohttp's automatic
``User-Agent``, ``Accept``, ``Accept-Encoding`` and ``Content-Type`` headers are
suppressed (a ``Content-Type`` nobody signed breaks the signature). As in the
sync sender, ``Accept-Encoding: identity`` is sent, a body is never inflated,
at most ``max_response_bytes`` of it are read, and environment proxy settings
and ``~/.netrc`` are ignored unless ``trust_env`` is set.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from requests.structures import CaseInsensitiveDict

from .._core._errors import require_positive_int, require_positive_seconds
from .._core._extras import install_hint
from .._pipeline._http import (
    body_too_large,
    body_too_slow,
    DEFAULT_MAX_RESPONSE_BYTES,
    AttemptState,
    HttpRequest,
    HttpResponse,
    SendError,
    Timeout,
    check_max_response_bytes,
    check_proxies,
    proxy_for,
    shown_proxies,
)

if TYPE_CHECKING:
    import aiohttp

__all__ = ["AsyncSender", "AiohttpSender", "import_aiohttp"]

# aiohttp adds these unless told not to; none of them is part of a Table service request.
_SKIP_AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
_CHUNK = 256 * 1024


@runtime_checkable
class AsyncSender(Protocol):
    """The async form of :class:`tablesdk._pipeline._http.Sender`: puts one request on the wire and returns
    the complete response (any status), or raises :class:`~tablesdk._pipeline._http.SendError`.

    :class:`AiohttpSender` is the default; a test can pass any object with these two
    coroutine methods as ``sender=`` to :class:`~tablesdk.aio.AsyncCloudTableClient`.
    """

    async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        """Send ``request`` with the client ``timeout`` and return the whole response."""
        ...

    async def close(self) -> None:
        """Release the connections."""
        ...


def import_aiohttp() -> Any:
    """The aiohttp module, or an ImportError that says which extra to install."""
    try:
        import aiohttp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"tablesdk.aio needs aiohttp: {install_hint('aio')}") from exc
    return aiohttp


def _connect_and_read(timeout: Timeout) -> tuple[float, float]:
    if isinstance(timeout, tuple):
        return float(timeout[0]), float(timeout[1])
    return float(timeout), float(timeout)


def _reason(exc: BaseException) -> str:
    """What went wrong, naming the OS error where there is one (the transport redacts it)."""
    if isinstance(exc, OSError) and exc.errno == errno.ECONNRESET:
        name = "ConnectionResetError"
    elif isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED:
        name = "ConnectionRefusedError"
    else:
        name = type(exc).__name__
    text = str(exc)
    return f"{name}: {text}" if text else name


def _refused(exc: BaseException) -> bool:
    os_error = getattr(exc, "os_error", None)
    return isinstance(os_error, ConnectionRefusedError) or (
        isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED
    )


class AiohttpSender:
    """Sends one request over a pooled :class:`aiohttp.ClientSession`.

    ``pool_size`` bounds the open connections (aiohttp makes requests beyond it
    wait for a free one instead of opening throw-away connections). Idle
    connections are closed after ``keepalive`` seconds, below the 5 s after
    which Azurite closes them, so a request rarely lands on a connection the
    server is closing. The session is created on the first request, inside the
    running event loop, and closed by :meth:`close`.

    ``proxies`` is a mapping like requests' (``{"http": url, "https": url}``, ``"all"`` for
    any scheme), the same as :class:`~tablesdk.RequestsSender` takes: aiohttp takes one proxy
    per request, the one for the request URL's scheme. It wins over the environment's
    (``trust_env``). Credentials in a proxy URL are sent as ``Proxy-Authorization`` and never
    appear in a repr, a log line or an error.
    """

    def __init__(
        self,
        *,
        pool_size: int = 100,
        trust_env: bool = False,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        keepalive: float = 4.0,
        proxies: Mapping[str, str] | None = None,
    ) -> None:
        require_positive_int("pool_size", pool_size)
        keepalive = require_positive_seconds("keepalive", keepalive, finite=True)
        self._proxies = check_proxies(proxies)
        self._aiohttp = import_aiohttp()
        import yarl  # aiohttp's URL type

        self._url_type: Any = yarl.URL
        self.pool_size = pool_size
        self.max_response_bytes = check_max_response_bytes(max_response_bytes)
        self._trust_env = trust_env
        self._keepalive = keepalive
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            aiohttp = self._aiohttp
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.pool_size, keepalive_timeout=self._keepalive),
                trust_env=self._trust_env,
                auto_decompress=False,
                skip_auto_headers=_SKIP_AUTO_HEADERS,
            )
            # aiohttp silently sends an idempotent request (GET, PUT, DELETE) a second time when
            # a reused connection drops. The retry loop must see every attempt: a DELETE whose
            # answer was lost and that is re-sent meets 404, which is only recognisable as
            # ambiguous when the lost attempt was counted. aiohttp's own test client turns the
            # re-send off the same way; tests/unit/test_aio_sender.py fails if the switch goes.
            self._session._retry_connection = False
        return self._session

    async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        """Send ``request`` with the client ``timeout`` (seconds, or connect and read seconds)
        and return the whole, undecoded response.

        The read timeout bounds each wait for bytes and also the whole attempt, from this call
        to the last byte of the body (aiohttp's ``total``): a server that trickles its status
        line, headers or body (each byte well inside the per-read timeout) still ends it."""
        aiohttp = self._aiohttp
        connect, read = _connect_and_read(timeout)
        finish_by = asyncio.get_running_loop().time() + read
        headers = request.headers
        if request.header("Accept-Encoding") is None:
            headers = {**headers, "Accept-Encoding": "identity"}
        try:
            async with self._get_session().request(
                request.method, self._url_type(request.url, encoded=True), headers=headers, data=request.body,
                timeout=aiohttp.ClientTimeout(total=read, sock_connect=connect, sock_read=read), allow_redirects=False,
                proxy=proxy_for(self._proxies, request.url),
            ) as raw:
                body = await self._read(raw, finish_by)
                return HttpResponse(raw.status, CaseInsensitiveDict(raw.headers.items()), body)
        except SendError:
            raise
        except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError, ValueError) as exc:
            raise SendError(_reason(exc), invalid=True) from None
        except aiohttp.ConnectionTimeoutError as exc:
            raise SendError(_reason(exc), state=AttemptState.NOT_SENT, timed_out=True) from None
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise SendError(_reason(exc), timed_out=True) from None
        except aiohttp.ClientConnectorError as exc:  # refused, unreachable, unresolved, TLS: never sent
            unresolved = isinstance(exc, getattr(aiohttp, "ClientConnectorDNSError", ()))
            raise SendError(
                _reason(exc), state=AttemptState.NOT_SENT, refused=_refused(exc), unresolved=unresolved
            ) from None
        except (aiohttp.ClientError, OSError) as exc:  # reset, disconnected, truncated body
            raise SendError(_reason(exc)) from None

    async def _read(self, raw: aiohttp.ClientResponse, finish_by: float) -> bytes:
        # aiohttp's total timeout ends a trickled body too; this check after each chunk says
        # how much of it had come (a trickle returns here with every byte).
        clock = asyncio.get_running_loop().time
        cap = self.max_response_bytes
        declared = raw.content_length
        if declared is not None and declared > cap:
            raise body_too_large(raw.status, declared, cap)
        chunks: list[bytes] = []
        size = 0
        async for chunk in raw.content.iter_chunked(_CHUNK):
            size += len(chunk)
            if size > cap:
                raw.close()  # the connection holds an unread rest: never reuse it
                raise body_too_large(raw.status, size, cap)
            chunks.append(chunk)
            if clock() > finish_by:
                raw.close()
                raise body_too_slow(size)
        return b"".join(chunks)


    async def close(self) -> None:
        """Close the session and its pooled connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def __repr__(self) -> str:
        proxies = f", proxies={shown_proxies(self._proxies)!r}" if self._proxies else ""
        return f"AiohttpSender(pool_size={self.pool_size}, max_response_bytes={self.max_response_bytes}{proxies})"
