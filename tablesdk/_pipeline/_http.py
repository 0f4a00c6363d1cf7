"""One HTTP exchange: the request and response objects and the senders that carry them.

This is the seam under the transport. A :class:`Sender` has one method,
``send(request, timeout)``: it puts one :class:`HttpRequest` on the wire and
returns the complete :class:`HttpResponse`, whatever its status, or raises
:class:`SendError` when no response arrived. It neither signs, retries, nor
interprets statuses: :class:`~tablesdk._pipeline._transport.Transport` does that, one
attempt at a time, around whichever sender it was given.

* :class:`~tablesdk._pipeline._requests_sender.RequestsSender` is the default: one pooled
  :class:`requests.Session` (in its own module, so that ``requests`` is imported only
  when a client creates its sender).
* :class:`MockSender` answers from a function, in memory, for tests (the role of
  httpx's ``MockTransport``); pass it as ``sender=`` to
  :class:`~tablesdk._clients._client.CloudTableClient`.

Bodies are bounded: a response larger than ``max_response_bytes`` is refused
while it is read, and ``Accept-Encoding: identity`` is sent so that no server
compresses a body the client would then have to inflate (the Table service
never compresses; a body inflated on the client has no size a server vouched
for).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Protocol, Union, runtime_checkable

from .._core._errors import require_positive_int
from .._core._redaction import SecretPattern, redact_userinfo, strip_query

if TYPE_CHECKING:
    from requests.structures import CaseInsensitiveDict

__all__ = [
    "check_proxies",
    "proxy_for",
    "shown_proxies",
    "AttemptState",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "HttpRequest",
    "HttpResponse",
    "MockSender",
    "RequestHook",
    "SendingRequest",
    "SendError",
    "Sender",
    "Timeout",
]

#: A client timeout: seconds, or ``(connect, read)`` seconds.
Timeout = Union[float, tuple[float, float]]

#: Largest response body read by default. A query page holds at most 1,000 entities of at most
#: 1 MiB each; escaped on the wire (JSON ``\\uXXXX`` escapes, base64 binaries, Atom markup) one can
#: take about three times its stored size, so no legal page reaches 3.5 GiB. Set lower
#: (``max_response_bytes=``) to bound memory more tightly.
DEFAULT_MAX_RESPONSE_BYTES = 3584 * 1024 * 1024


class AttemptState(Enum):
    """What one attempt of a request is known to have done, recorded once per attempt.

    * ``NOT_SENT``: it failed before the request could reach the server (connection
      refused, connect timeout); the server did nothing.
    * ``UNKNOWN``: it may have reached the server, but no definite answer came back (a
      read timeout, a connection cut after sending, a 5xx or 408, whose work may or may
      not have been done).
    * ``ANSWERED``: the server answered with a definite outcome (2xx, 3xx or 4xx but 408).
    """

    NOT_SENT = "not sent"
    UNKNOWN = "sent, outcome unknown"
    ANSWERED = "answered"


@dataclass
class HttpRequest:
    """One HTTP request as it goes on the wire: method, absolute URL, headers, body.

    ``headers`` is a plain dict; the transport copies the request before it adds the
    date and signature of each attempt, so a request object can be sent again.
    """

    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (any case), or None."""
        lowered = name.lower()
        for key, value in self.headers.items():
            if key.lower() == lowered:
                return value
        return None

    def without_header(self, name: str) -> None:
        """Remove header ``name`` in any case."""
        lowered = name.lower()
        for key in [k for k in self.headers if k.lower() == lowered]:
            del self.headers[key]

    def copy(self) -> HttpRequest:
        """A copy whose headers can be changed without touching this request."""
        return HttpRequest(self.method, self.url, dict(self.headers), self.body)

    def __repr__(self) -> str:
        size = "None" if self.body is None else f"<{len(self.body)} bytes>"
        return f"HttpRequest(method={self.method!r}, url={strip_query(self.url)!r}, body={size})"


@dataclass(repr=False)
class HttpResponse:
    """A complete HTTP response: status, case-insensitive headers and the whole body.

    ``after_unknown_attempt`` is True when the transport returned this response for a
    write after an earlier attempt whose outcome was unknown (see
    :func:`tablesdk._pipeline._transport.is_ambiguous`). ``url`` is the URL of the attempt that
    got this answer, with any SAS signature redacted (set by the transport; reads
    under a location mode use it to tell which endpoint answered). ``attempt_secrets``
    are the secrets of the attempt that got this answer (set by the transport): what a
    decode error or an error's message quotes of the body is scrubbed of them
    (:func:`tablesdk._formats.decoded`, :func:`tablesdk._formats.parse_error_body`).
    """

    status: int
    headers: CaseInsensitiveDict[str]
    body: bytes
    after_unknown_attempt: bool = False
    url: str = ""
    attempt_secrets: SecretPattern | None = field(default=None, compare=False)

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
class SendingRequest:
    """A request about to be signed and sent, as a ``sending_request`` hook sees it.

    Hooks may add or change ``headers`` (the Storage Client Library adds ``x-ms-version`` this way);
    the request is signed after the hooks run. It lives here, under the operations that build it
    and the contexts and clients that take hooks, so that none of them imports another for it.
    """

    method: str
    url: str
    headers: dict[str, str]


#: A ``sending_request`` hook: called with each request before it is signed.
RequestHook = Callable[[SendingRequest], None]


class SendError(Exception):
    """A sender got no usable response. The transport turns it into the error to raise.

    ``reason`` describes the cause (it may hold URLs: the transport redacts it).
    ``state`` is :attr:`AttemptState.NOT_SENT` when the request cannot have reached the
    server, else :attr:`AttemptState.UNKNOWN`. ``timed_out`` marks a client timeout and
    ``refused`` a connection that could not be made because nothing is there: refused
    (nothing listens) or, with ``unresolved`` too, a host name that does not resolve (a
    mistyped account name or endpoint). Waiting minutes fixes neither, so both are retried
    on the short schedule of :func:`~tablesdk._pipeline._retry.refused_backoff`. ``status`` is set when
    a response began but its body was refused (larger than the size cap): the server
    did answer, so the attempt counts as answered and is not retried. ``invalid`` marks a
    request that cannot be sent at all (a malformed URL or header): a programming error.
    """

    def __init__(
        self,
        reason: str,
        *,
        state: AttemptState = AttemptState.UNKNOWN,
        timed_out: bool = False,
        refused: bool = False,
        status: int | None = None,
        invalid: bool = False,
        unresolved: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.state = state
        self.timed_out = timed_out
        self.refused = refused or unresolved
        self.unresolved = unresolved
        self.status = status
        self.invalid = invalid


@runtime_checkable
class Sender(Protocol):
    """Puts one request on the wire and returns the complete response (any status).

    Raises :class:`SendError` when no response arrived. A sender may also have a
    ``close()`` method; the transport calls it when it is closed.
    """

    def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        """Send ``request`` with the client ``timeout`` and return the whole response."""
        ...


def body_too_slow(size: int) -> SendError:
    """The :class:`SendError` of a body that did not arrive within the read timeout (a trickle), either sender."""
    return SendError(
        f"ReadTimeoutError: the response did not arrive within the read timeout ({size} bytes of its body read)",
        timed_out=True,
    )


def body_too_large(status: int, size: int, cap: int) -> SendError:
    """The :class:`SendError` of a body larger than ``max_response_bytes`` (``cap``), either sender:
    the server answered (``status``), so the attempt counts as answered and is not retried."""
    return SendError(
        f"the response body ({size} bytes or more) exceeds max_response_bytes={cap}",
        state=AttemptState.ANSWERED,
        status=status,
    )


def workers_within_pool(caller: str, name: str, workers: int, pool_size: int, *, stacklevel: int) -> int:
    """``workers`` (argument ``name`` of ``caller``, an int >= 1), or ``pool_size`` with a
    :class:`RuntimeWarning` when it is larger.

    urllib3 does not make a request wait for a pooled connection: one beyond
    ``pool_size`` in flight gets a new connection that is closed afterwards
    (TCP connection churn), so threads sharing one sender run at most
    ``pool_size`` at once. ``stacklevel`` points the warning at the caller's caller.
    """
    require_positive_int(name, workers)
    if workers <= pool_size:
        return workers
    warnings.warn(
        f"{caller}: {name}={workers} exceeds the client's pool_size={pool_size}; "
        f"using {pool_size} workers (create the client with a larger pool_size to run more)",
        RuntimeWarning,
        stacklevel=stacklevel + 1,
    )
    return pool_size


def check_max_response_bytes(value: int) -> int:
    """Validate a response size cap (an int >= 1)."""
    return require_positive_int("max_response_bytes", value)


# ---------------------------------------------------------------- tests


Handler = Callable[[HttpRequest], HttpResponse]


class MockSender:
    """A sender that answers every request with ``handler(request)``, in memory.

    ``handler`` returns an :class:`HttpResponse` (build one with :meth:`response`) or
    raises :class:`SendError` to play a network failure. Every request the transport
    sent (signed, with its date and headers) is appended to :attr:`requests`, and the
    timeout it was given to :attr:`timeouts`.

    >>> sender = MockSender(lambda request: MockSender.response(204))
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[HttpRequest] = []
        self.timeouts: list[Timeout] = []

    @staticmethod
    def response(status: int, body: bytes | str = b"", headers: dict[str, str] | None = None) -> HttpResponse:
        """An :class:`HttpResponse` with ``status``, ``body`` (str is UTF-8 encoded) and ``headers``."""
        from requests.structures import CaseInsensitiveDict

        data = body.encode("utf-8") if isinstance(body, str) else body
        return HttpResponse(status, CaseInsensitiveDict(headers or {}), data)

    def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        """Record ``request`` and return what the handler answers."""
        self.requests.append(request)
        self.timeouts.append(timeout)
        return self.handler(request)

    def __repr__(self) -> str:
        return f"MockSender(requests={len(self.requests)})"



# ---------------------------------------------------------------- proxies

#: The URL schemes a proxy may have (an HTTP proxy: ``https://`` targets go through a CONNECT tunnel).
_PROXY_SCHEMES = ("http", "https")


def check_proxies(proxies: Mapping[str, str] | None) -> dict[str, str] | None:
    """``proxies`` as a plain dict when it is a mapping like requests' (``{"http": url,
    "https": url}``: the key is the scheme of the request's URL, ``"all"`` for any); a
    ValueError naming the bad key or value otherwise (the value's credentials left out)."""
    if proxies is None:
        return None
    if not isinstance(proxies, Mapping):
        raise ValueError(f"proxies must be a mapping like {{'https': 'http://proxy:3128'}}, not {type(proxies).__name__}")
    checked: dict[str, str] = {}
    for key, url in proxies.items():
        if key not in ("http", "https", "all"):
            raise ValueError(f"proxies: the keys are 'http', 'https' or 'all' (the request's scheme), not {key!r}")
        if not isinstance(url, str) or not _is_proxy_url(url):
            shown = redact_userinfo(str(url))
            raise ValueError(f"proxies[{key!r}] must be an http:// or https:// proxy URL, got {shown!r}")
        checked[key] = url
    return checked


def _is_proxy_url(url: str) -> bool:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return False
    return parts.scheme.lower() in _PROXY_SCHEMES and bool(parts.hostname)


def proxy_for(proxies: Mapping[str, str] | None, url: str) -> str | None:
    """The proxy of a request to ``url``: the entry for its scheme, else ``"all"``, else None."""
    if not proxies:
        return None
    scheme = url.split(":", 1)[0].lower()
    return proxies.get(scheme) or proxies.get("all")


def shown_proxies(proxies: Mapping[str, str] | None) -> dict[str, str] | None:
    """``proxies`` as a repr may show them: the credentials in each URL redacted."""
    return None if proxies is None else {key: redact_userinfo(url) for key, url in proxies.items()}
