"""The default sender: :class:`RequestsSender`, one pooled :class:`requests.Session`.

It lives apart from the request and response types of :mod:`tablesdk._pipeline._http` so that
``requests`` and ``urllib3`` are imported only when a client creates its default
sender, not by ``import tablesdk``.
"""

from __future__ import annotations

import http.client
import io
import re
import socket
import threading
from collections.abc import Callable, Mapping
from time import monotonic
from typing import TYPE_CHECKING, Any

import requests
import urllib3
import urllib3.connection
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from requests.auth import AuthBase
from requests.structures import CaseInsensitiveDict

from .._core._errors import require_positive_int, require_positive_seconds
from ._http import (
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
    shown_proxies,
)

if TYPE_CHECKING:
    from urllib3._base_connection import BaseHTTPConnection

__all__ = ["RequestsSender"]

_CHUNK = 256 * 1024


class _NoAuth(AuthBase):
    """Session-level auth that changes nothing; it stops requests reading ``~/.netrc``.

    With ``trust_env`` on, requests would otherwise replace a signed
    ``Authorization`` header with Basic credentials from netrc.
    """

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        return r


def _inner(exc: BaseException) -> object:
    """What a requests exception wraps (the urllib3 error under a MaxRetryError), else its first argument."""
    inner: object = exc.args[0] if exc.args else None
    if isinstance(inner, urllib3.exceptions.MaxRetryError) and inner.reason is not None:
        inner = inner.reason
    return inner


def _urlopen_inner(exc: BaseException) -> object:
    """What requests would have wrapped of an error from urllib3's ``urlopen``: the same ``inner``."""
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        return exc.reason
    return exc


def _unresolved(inner: object) -> str | None:
    """What to say when a DNS lookup was the failure (``inner`` the cause under the error), else None."""
    if not isinstance(inner, urllib3.exceptions.NewConnectionError):
        return None
    # urllib3 2 raises NameResolutionError from the socket.gaierror; older ones a NewConnectionError.
    cause = getattr(inner, "_reason", None) or inner.__cause__
    if not isinstance(inner, urllib3.exceptions.NameResolutionError) and not isinstance(cause, socket.gaierror):
        return None
    host = getattr(inner, "_host", None) or getattr(getattr(inner, "conn", None), "host", None) or "?"
    return f"the host name {host!r} does not resolve ({type(cause).__name__}: {cause})"


def _send_error(exc: BaseException, inner: object) -> SendError:
    """The :class:`SendError` of a failed exchange: ``exc`` as raised, ``inner`` the cause under it."""
    # not yet redacted: the reason may hold URLs
    reason = f"{type(inner).__name__}: {inner}" if isinstance(inner, BaseException) else type(exc).__name__
    timed_out = isinstance(exc, (requests.Timeout, urllib3.exceptions.TimeoutError)) or (
        # urllib3 derives NewConnectionError from ConnectTimeoutError, but "refused" is no timeout
        isinstance(inner, urllib3.exceptions.TimeoutError)
        and not isinstance(inner, urllib3.exceptions.NewConnectionError)
    )
    never_sent = isinstance(exc, requests.ConnectTimeout) or isinstance(
        inner, (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError)
    )
    unresolved = _unresolved(inner)
    if unresolved is not None:  # a mistyped account name or endpoint: waiting does not fix it
        return SendError(unresolved, state=AttemptState.NOT_SENT, unresolved=True)
    refused = isinstance(inner, urllib3.exceptions.NewConnectionError) and (
        "refused" in str(inner).lower() or isinstance(inner.__cause__, ConnectionRefusedError)
    )
    return SendError(
        reason,
        state=AttemptState.NOT_SENT if never_sent else AttemptState.UNKNOWN,
        timed_out=timed_out,
        refused=refused,
    )


_FAILURES = (
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.ChunkedEncodingError,
    requests.exceptions.ContentDecodingError,
    urllib3.exceptions.HTTPError,
)

#: A URL the direct path sends as it is: ``requests`` would send the same path and query
#: (its re-quoting changes nothing in them). Anything else goes through ``Session.request``.
_PLAIN_URL = re.compile(r"(https?://[^/?#@\s\\]+)(/[A-Za-z0-9\-._~!$&'()*+,/:;=?@%]*)\Z")
#: A percent escape that requests' re-quoting would decode (of an unreserved character) or reject.
_REQUOTED_ESCAPE = re.compile(
    r"%(?:[46][1-9A-Fa-f]|[57][0-9Aa]|3[0-9]|2[DdEe]|5[Ff]|7[Ee]|(?![0-9A-Fa-f]{2}))"
)
#: A header name or value that requests would refuse (CR/LF, a leading space, a colon in a name).
_ODD_NAMES = re.compile(r"[:\r\n]|^\s|\x00\s|\x00\x00|^\x00|\x00\Z")
_ODD_VALUES = re.compile(r"[\r\n]|^\s|\x00\s")
_BODILESS = frozenset(("GET", "HEAD"))
def _adapter_send_is_requests_own() -> bool:
    """True unless something replaced ``HTTPAdapter.send`` (the ``responses`` library, a test's
    mock): then every request must go through it. Checked by where the function comes from, not by
    identity with a copy taken at import: this module is imported lazily, possibly while a mock is
    already in place."""
    send = HTTPAdapter.send
    return (
        getattr(send, "__module__", None) == "requests.adapters"
        and getattr(send, "__qualname__", None) == "HTTPAdapter.send"
    )


class _IdleLimit:
    """How long a pooled connection may sit idle before it is closed instead of reused, and the
    monotonic clock that measures it (a test replaces the clock)."""

    __slots__ = ("seconds", "clock")

    def __init__(self, seconds: float, clock: Callable[[], float] = monotonic) -> None:
        self.seconds = seconds
        self.clock = clock


class _AnswerBound(threading.local):
    """When the answer of the request this thread is sending must be complete (the monotonic
    clock), set by :meth:`RequestsSender.send` around the exchange for the response to read."""

    finish_by: float | None = None


_ANSWER_BOUND = _AnswerBound()


class _HeadClock(io.RawIOBase):
    """The raw stream of a response, timed while its status line and headers are read: each
    read may wait only for what is left until ``finish_by``, and none starts after it.

    http.client reads the head a line at a time with the socket's timeout per read, so a
    server that sends it a byte at a time (or header lines without end) never trips that
    timeout; this bounds the head as a whole. ``finish_by`` None (once the head is read):
    reads pass through as they were, the body has its bound in the sender."""

    def __init__(self, raw: io.RawIOBase, sock: socket.socket, finish_by: float) -> None:
        super().__init__()
        self.raw = raw
        self.sock = sock
        self.finish_by: float | None = finish_by

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        if self.finish_by is not None:
            left = self.finish_by - monotonic()
            if left <= 0:
                raise socket.timeout("the status line and headers did not arrive within the read timeout")
            self.sock.settimeout(left)
        return self.raw.readinto(buffer)

    def fileno(self) -> int:
        return self.raw.fileno()

    def close(self) -> None:
        if not self.closed:
            self.raw.close()  # drops the socket's reference of the stream (http.client's own close)
        super().close()


class _TimedHeadResponse(http.client.HTTPResponse):
    """http.client's response, whose status line and headers must have arrived by the bound
    the sender set for the answer (else within the read timeout of the moment it is made)."""

    def __init__(self, sock: socket.socket, debuglevel: int = 0, method: str | None = None, url: str | None = None) -> None:
        super().__init__(sock, debuglevel, method, url)
        finish_by = _ANSWER_BOUND.finish_by
        if finish_by is None:  # sent by someone else on this sender's pool (urllib3 set the read timeout)
            read = sock.gettimeout()
            finish_by = None if read is None else monotonic() + read
        self._head_clock: _HeadClock | None = None
        if finish_by is not None:
            raw = self.fp.detach()  # the socket's stream, without closing it
            self._head_clock = _HeadClock(raw, sock, finish_by)
            self.fp = io.BufferedReader(self._head_clock)

    def begin(self) -> None:
        try:
            super().begin()
        finally:
            if self._head_clock is not None:
                self._head_clock.finish_by = None


class _TimedHTTPConnection(urllib3.connection.HTTPConnection):
    released_at: float | None = None  # when it last went back to the pool (the idle clock's time)
    response_class = _TimedHeadResponse


class _TimedHTTPSConnection(urllib3.connection.HTTPSConnection):
    released_at: float | None = None
    response_class = _TimedHeadResponse


class _IdleClosingPool(urllib3.HTTPConnectionPool):
    """A pool that closes a connection idle longer than its limit when it takes it out.

    Servers close a keep-alive connection after a few idle seconds (Azurite after 5): a request
    written on it as the server closes it meets a reset, and costs a retried attempt. urllib3
    only notices a close that already arrived; this closes the connection while it is surely
    still good, and urllib3 reconnects it for the request, as it does for one found dropped."""

    idle: _IdleLimit  # set on the per-sender subclasses made by _idle_closing_pools

    def _get_conn(self, timeout: float | None = None) -> BaseHTTPConnection:
        conn = super()._get_conn(timeout)
        if isinstance(conn, (_TimedHTTPConnection, _TimedHTTPSConnection)) and conn.released_at is not None:
            if self.idle.clock() - conn.released_at > self.idle.seconds:
                conn.close()
            conn.released_at = None  # in use
        return conn

    def _put_conn(self, conn: BaseHTTPConnection | None) -> None:
        if isinstance(conn, (_TimedHTTPConnection, _TimedHTTPSConnection)):
            conn.released_at = self.idle.clock()
        super()._put_conn(conn)


def _idle_closing_pools(idle: _IdleLimit) -> dict[str, type[urllib3.HTTPConnectionPool]]:
    """The pool classes (by scheme) of one sender, closing connections idle longer than ``idle``."""

    class PlainPool(_IdleClosingPool):
        ConnectionCls = _TimedHTTPConnection

    class SecurePool(_IdleClosingPool, urllib3.HTTPSConnectionPool):
        ConnectionCls = _TimedHTTPSConnection

    PlainPool.idle = SecurePool.idle = idle
    return {"http": PlainPool, "https": SecurePool}


class _IdleClosingAdapter(HTTPAdapter):
    """requests' adapter, with pools (direct and through an HTTP proxy) that close idle connections."""

    __attrs__ = [*HTTPAdapter.__attrs__, "idle"]  # pickled with the adapter (as the session pickles it)

    def __init__(self, idle: _IdleLimit, **kwargs: Any) -> None:
        self.idle = idle  # before super().__init__ makes the pool manager
        super().__init__(**kwargs)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self._pool_classes = _idle_closing_pools(self.idle)
        self.poolmanager.pool_classes_by_scheme = self._pool_classes

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> urllib3.PoolManager:
        manager: urllib3.PoolManager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if isinstance(manager, urllib3.ProxyManager):  # not a SOCKS one: it has pool classes of its own
            manager.pool_classes_by_scheme = self._pool_classes
        return manager


class _Route:
    """How requests to one origin go out on the direct path, worked out once."""

    __slots__ = ("pool", "absolute")

    def __init__(self, pool: urllib3.HTTPConnectionPool, absolute: bool) -> None:
        self.pool = pool
        self.absolute = absolute  # through a plain HTTP proxy the request line holds the whole URL


class RequestsSender:
    """The default sender: one pooled :class:`requests.Session`.

    The session's adapter keeps up to ``pool_size`` connections per host, so as many
    threads can share one sender without the connection starvation the Azure Storage team's blog warns about
    (the .NET default of 2 connections). requests never sends ``Expect: 100-continue``
    and urllib3 disables Nagle (``TCP_NODELAY``) by default, the other two settings the
    Azure Storage team's blog recommends. Redirects are never followed and urllib3 does not retry on its own.

    ``trust_env`` (default False) is requests' switch for reading proxy settings
    (``HTTP(S)_PROXY``, ``NO_PROXY``) and ``REQUESTS_CA_BUNDLE`` from the environment.
    This sender reads them once per endpoint (host), the first time it sends there: a
    change of the environment after that is not seen by this sender (create a new client).
    ``~/.netrc`` is never consulted either way, because it would replace the signed
    ``Authorization`` header.

    ``proxies`` (a mapping like requests': ``{"http": url, "https": url}``, keyed by the
    scheme of the request's URL, ``"all"`` for any) sends every request through those HTTP
    proxies, whatever the environment says; credentials in a proxy URL
    (``http://user:password@proxy:3128``) are sent as ``Proxy-Authorization`` and never
    appear in a repr, a log line or an error.

    Requests go straight to the session adapter's urllib3 pool, with the same bytes
    ``Session.request`` would send, without its per-call merging of settings, cookies
    and hooks (most of the CPU of a small request). Reading :attr:`session` (to mount
    an adapter, set proxies, hooks, certificates, cookies ...) hands every later request
    to ``Session.request``, so that whatever is configured there applies; so does a
    response that sets a cookie (the session keeps it and sends it back, as before), and
    an unusual request (a URL requests would re-quote, a header it would refuse) goes
    that way on its own, and so does every request while ``HTTPAdapter.send`` is replaced
    (by a test double such as ``responses``).

    A pooled connection idle for more than ``keepalive`` seconds (default 4.0, as the
    async sender) is closed and a new one opened in its place when a request needs it:
    Azurite, and many servers and proxies, close a keep-alive connection after 5 s idle,
    and a request that goes out on one as it closes meets a reset and costs a retried
    attempt. Set it below the idle limit of the server or proxy in between. This holds
    for every request of this sender's own adapter, direct or through ``Session.request``;
    an adapter a user mounts on :attr:`session` keeps its own behaviour.

    The body is read as it arrived (``Accept-Encoding: identity`` is sent and a
    ``Content-Encoding`` is never undone) and at most ``max_response_bytes`` of it.
    Safe to share between threads; :meth:`close` releases the connections.
    """

    def __init__(
        self,
        *,
        pool_size: int = 16,
        trust_env: bool = False,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        keepalive: float = 4.0,
        proxies: Mapping[str, str] | None = None,
    ) -> None:
        require_positive_int("pool_size", pool_size)
        self._proxies = check_proxies(proxies)
        self.pool_size = pool_size
        self.max_response_bytes = check_max_response_bytes(max_response_bytes)
        self._idle_limit = _IdleLimit(require_positive_seconds("keepalive", keepalive, finite=True))
        session = requests.Session()
        session.trust_env = trust_env
        session.auth = _NoAuth()
        # Only the caller's headers and ours go out (no python-requests UA, no */* Accept).
        session.headers.clear()
        adapter = _IdleClosingAdapter(self._idle_limit, pool_connections=pool_size, pool_maxsize=pool_size, max_retries=0)
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        if self._proxies:
            session.proxies.update(self._proxies)
        self._session = session
        self._adapter = adapter
        self._direct = True  # False once the session may have been configured by its user
        self._routes: dict[str, _Route] = {}
        self._timeouts: tuple[Timeout, urllib3.Timeout] | None = None

    @property
    def keepalive(self) -> float:
        """Seconds a pooled connection may sit idle and still be reused."""
        return self._idle_limit.seconds

    @property
    def session(self) -> requests.Session:
        """The :class:`requests.Session` under this sender.

        Reading it makes every later request of this sender go through ``Session.request``
        (as all did before), so that whatever is set on the session applies.
        """
        self._direct = False
        return self._session

    def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        """Send ``request`` and read the whole, undecoded body.

        The read timeout bounds each wait for bytes and also the whole attempt, from this call
        to the last byte of the body: a server that trickles its status line, headers or body
        (each byte well inside the per-read timeout) still ends the attempt within it."""
        finish_by = _finish_by(timeout)
        _ANSWER_BOUND.finish_by = finish_by
        try:
            return self._send(request, timeout, finish_by)
        finally:
            _ANSWER_BOUND.finish_by = None

    def _send(self, request: HttpRequest, timeout: Timeout, finish_by: float) -> HttpResponse:
        headers = request.headers
        if self._direct and _adapter_send_is_requests_own():
            matched = _PLAIN_URL.match(request.url)
            names = set(map(str.lower, headers))
            if (
                matched is not None
                and len(names) == len(headers)
                and ("%" not in matched[2] or _REQUOTED_ESCAPE.search(matched[2]) is None)
                and "" not in headers
                and _ODD_NAMES.search("\x00".join(headers)) is None
                and _all_str(headers)
                and _ODD_VALUES.search("\x00".join(headers.values())) is None
            ):
                return self._send_direct(request, timeout, finish_by, matched[1], matched[2], names)
        if request.header("Accept-Encoding") is None:
            headers = {**headers, "Accept-Encoding": "identity"}
        try:
            raw = self._session.request(
                request.method, request.url, headers=headers, data=request.body, timeout=timeout,
                allow_redirects=False, stream=True, proxies=dict(self._proxies) if self._proxies else None,
            )
            body = self._read(raw.raw, finish_by)
        except _FAILURES as exc:
            raise _send_error(exc, _inner(exc)) from None
        except requests.RequestException as exc:
            if isinstance(_inner(exc), urllib3.exceptions.HTTPError):
                # urllib3 refused the answer (two different Content-Length headers, ...): the
                # request went out and what the server did is unknown, as with a cut connection
                raise SendError(_send_error(exc, _inner(exc)).reason) from None
            raise SendError(_send_error(exc, _inner(exc)).reason, invalid=True) from None
        return HttpResponse(status=raw.status_code, headers=raw.headers, body=body)

    def _send_direct(
        self, request: HttpRequest, timeout: Timeout, finish_by: float, origin: str, path: str, names: set[str]
    ) -> HttpResponse:
        """Send on the adapter's pool what ``Session.request`` would have sent for this request."""
        route = self._routes.get(origin)
        if route is None or route.pool.pool is None:  # new, or closed (dropped from the pool manager)
            route = self._routes[origin] = self._route(origin)
        headers = dict(request.headers)
        if "accept-encoding" not in names:
            headers["Accept-Encoding"] = "identity"
        body = request.body
        method = request.method
        if "content-length" not in names:  # as requests' prepare_body
            if body is not None:
                headers["Content-Length"] = str(len(body))
            elif method not in _BODILESS:
                headers["Content-Length"] = "0"
        try:
            response = route.pool.urlopen(
                method, origin + path if route.absolute else path, body=body, headers=headers,
                redirect=False, assert_same_host=False, preload_content=False, decode_content=False,
                retries=self._adapter.max_retries, timeout=self._urllib3_timeout(timeout), chunked=False,
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _send_error(exc, _urlopen_inner(exc)) from None
        try:
            data = self._read(response, finish_by)
        except _FAILURES as exc:
            raise _send_error(exc, _inner(exc)) from None
        if "set-cookie" in response.headers:
            self._keep_cookies(request, response)
        return HttpResponse(status=response.status, headers=_headers_of(response), body=data)

    def _route(self, origin: str) -> _Route:
        """The pool and request-line form for ``origin``, from the session's settings and (with
        ``trust_env``) the environment as it is now, chosen as ``Session.request`` would choose them."""
        prepared = requests.PreparedRequest()
        prepared.prepare(method="GET", url=origin + "/")
        url = prepared.url or origin + "/"
        # The explicit proxies go in as the request's own, so they win over the environment's.
        settings = self._session.merge_environment_settings(url, dict(self._proxies or {}), True, None, None)
        proxies = settings["proxies"]
        pool: Any
        if hasattr(self._adapter, "get_connection_with_tls_context"):
            pool = self._adapter.get_connection_with_tls_context(
                prepared, settings["verify"], proxies=proxies, cert=settings["cert"]
            )
        else:  # requests before 2.32.2
            pool = self._adapter.get_connection(url, proxies)
        self._adapter.cert_verify(pool, url, settings["verify"], settings["cert"])  # type: ignore[no-untyped-call]
        return _Route(pool, self._adapter.request_url(prepared, proxies) != "/")

    def _urllib3_timeout(self, timeout: Timeout) -> urllib3.Timeout:
        last = self._timeouts  # one tuple, read once: safe between threads
        if last is not None and last[0] == timeout:
            return last[1]
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        made = urllib3.Timeout(connect=connect, read=read)
        self._timeouts = (timeout, made)
        return made

    def _keep_cookies(self, request: HttpRequest, response: urllib3.BaseHTTPResponse) -> None:
        """Store a response's cookies in the session, as ``Session.request`` does, and send every
        later request through it (which sends them back)."""
        from requests.cookies import extract_cookies_to_jar

        prepared = requests.PreparedRequest()
        prepared.prepare(method=request.method, url=request.url, headers=request.headers)
        extract_cookies_to_jar(self._session.cookies, prepared, response)  # type: ignore[no-untyped-call]
        self._direct = False

    def _read(self, response: urllib3.BaseHTTPResponse, finish_by: float) -> bytes:
        cap = self.max_response_bytes
        declared = response.headers.get("Content-Length", "")
        chunks: list[bytes] = []
        size = 0
        try:
            if declared.isdigit() and int(declared) > cap:
                raise body_too_large(response.status, int(declared), cap)
            connection = getattr(response, "connection", None)
            sock = getattr(connection, "sock", None)
            while True:
                left = finish_by - monotonic()
                if left <= 0:
                    raise body_too_slow(size)
                if sock is not None:
                    sock.settimeout(left)  # this read may wait only for what the bound leaves
                # read1: one read from the socket, so a trickle returns to this check often
                chunk = response.read1(_CHUNK, decode_content=False)
                if not chunk:
                    break
                size += len(chunk)
                if size > cap:
                    raise body_too_large(response.status, size, cap)
                chunks.append(chunk)
        except BaseException:
            response.close()  # the connection holds an unread rest: never reuse it
            response.release_conn()  # (closed: the pool opens a new one in its place)
            raise
        response.release_conn()
        return b"".join(chunks)

    def close(self) -> None:
        """Close the session and its pooled connections."""
        self._session.close()

    def __repr__(self) -> str:
        proxies = f", proxies={shown_proxies(self._proxies)!r}" if self._proxies else ""
        return f"RequestsSender(pool_size={self.pool_size}, max_response_bytes={self.max_response_bytes}{proxies})"


def _finish_by(timeout: Timeout) -> float:
    # Called as the attempt starts: the read timeout bounds each wait for data and also the
    # answer as a whole (status line, headers, body), since a server that trickles it a byte at
    # a time never trips a per-read timeout. The transport caps this timeout to what the
    # deadline leaves, so an attempt never runs past the deadline either.
    return monotonic() + (timeout[1] if isinstance(timeout, tuple) else timeout)


def _all_str(headers: dict[str, str]) -> bool:
    return all(type(value) is str for value in headers.values())


def _headers_of(response: urllib3.BaseHTTPResponse) -> CaseInsensitiveDict[str]:
    """The response's headers as requests gives them (repeated ones joined with ``", "``)."""
    return CaseInsensitiveDict(response.headers)
