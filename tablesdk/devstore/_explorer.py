"""The explorer: a page at the emulator's root address to look at (and change) its tables.

The page (``explorer/index.html``, ``app.js``, ``app.css``, shipped as package data) talks
to the emulator's own REST API, so it shows what a client sees. How it authenticates:

- ``GET /`` answers the page with a **session token** in a ``<meta>`` element: a random
  value made when the emulator starts, never written anywhere else. The page sends it in
  the ``x-tablesdk-explorer-token`` header of each REST request it makes.
- A request with that header is checked here and then signed here, on the page's behalf,
  with the account key (Shared Key Lite), and served by :class:`TableService` as any client's
  request is. The account key never reaches the browser, except when the user asks for the
  connection string (``GET /_explorer/connection-string``, which needs the token too).
- A request with the token is refused (403) when the token is wrong, when it comes from
  another origin (an ``Origin`` other than the page's own, a ``Sec-Fetch-Site`` other than
  ``same-origin``), when its ``Host`` is not a loopback name or the address the emulator
  listens on (a page of another site whose name was pointed at 127.0.0.1 must not read the
  token), or when it would change something and the explorer is read-only.
- A state-changing request that comes from the page's origin without the token is refused
  (403): the page's requests are the token's, and nothing else of that origin writes.

The page and its files are answered with a strict Content-Security-Policy (only the page's
own scripts, styles and requests, no framing), ``X-Content-Type-Options: nosniff`` and no
caching of the page (it holds the token).
"""

from __future__ import annotations

import hmac
import json
import secrets
from email.utils import formatdate
from functools import lru_cache
from importlib.resources import files

from ._auth import canonicalized_resource, shared_key_lite_string_to_sign, sign
from ._request import Request, Response
from ._service import TableService
from ._url_parts import query_dict

__all__ = ["Explorer", "TOKEN_HEADER", "STATIC_PREFIX"]

#: The header that carries the page's session token.
TOKEN_HEADER = "x-tablesdk-explorer-token"
#: Where the page's files and its own endpoints live (no account name can start with '_').
STATIC_PREFIX = "/_explorer/"

_STATIC_TYPES = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "font-src 'none'; object-src 'none'; media-src 'none'; frame-src 'none'; worker-src 'none'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_PAGE_HEADERS = (
    ("Content-Security-Policy", _CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
)
_READ_METHODS = frozenset({"GET", "HEAD"})
_UNCHANGING_METHODS = _READ_METHODS | {"OPTIONS"}  # a CORS preflight changes nothing
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})


@lru_cache(maxsize=None)
def _static(name: str) -> bytes:
    return files("tablesdk.devstore").joinpath("explorer").joinpath(name).read_bytes()


def _host_name(host_header: str) -> str:
    """The name part of a ``Host`` header, lower case (``[::1]:10002`` -> ``[::1]``)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.split(":", 1)[0]


def _refusal(status: int, code: str, message: str) -> Response:
    body = json.dumps({"odata.error": {"code": code, "message": {"lang": "en-US", "value": message}}}).encode()
    return Response(status, [("Content-Type", "application/json;odata=minimalmetadata;charset=utf-8"),
                              ("Cache-Control", "no-store"), *_PAGE_HEADERS], body)


class Explorer:
    """The explorer page in front of a :class:`TableService`: ``handle`` serves every request.

    Requests that are not the page's pass straight to ``service.handle``. ``read_only`` hides
    the page's write controls and refuses its writes (clients with the account key still write).
    ``bind_host`` is the address the emulator listens on, accepted in ``Host`` besides loopback.
    """

    def __init__(self, service: TableService, account_key: str, *, read_only: bool = False,
                 bind_host: str = "127.0.0.1") -> None:
        self.service = service
        self.read_only = read_only
        self.token = secrets.token_urlsafe(32)
        self._account_key = account_key
        host = bind_host.strip().lower()
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        self._hosts = _LOOPBACK_NAMES | ({host} - _WILDCARD_HOSTS)

    @property
    def server_name(self) -> str:
        return self.service.server_name

    def handle(self, req: Request) -> Response:
        """Serve one request: the page, its files, a request of the page, or any client's."""
        headers = req.headers
        if TOKEN_HEADER in headers:
            return self._on_behalf_of_page(req)
        path = req.raw_path
        if path.startswith(STATIC_PREFIX) or (path == "/" and not req.raw_query and "authorization" not in headers):
            return self._page_file(req)
        if req.method.upper() not in _UNCHANGING_METHODS and self._from_page_origin(req):
            return _refusal(403, "AuthorizationFailure",
                            "A request from the explorer page's origin that changes data needs the page's token.")
        return self.service.handle(req)

    # -------------------------------------------------------------- checks

    def _from_page_origin(self, req: Request) -> bool:
        origin = req.headers.get("origin")
        if origin is not None and origin.strip().lower() == "http://" + req.host.strip().lower():
            return True
        return req.headers.get("sec-fetch-site", "").strip().lower() == "same-origin"

    def _host_refusal(self, req: Request) -> Response | None:
        if _host_name(req.host) in self._hosts:
            return None
        return _refusal(403, "AuthorizationFailure",
                        "The explorer answers only at a loopback address or the address the emulator listens on.")

    def _page_request_refusal(self, req: Request) -> Response | None:
        """Why a request carrying the token is not the page's own, or None when it is."""
        refused = self._host_refusal(req)
        if refused is not None:
            return refused
        if not hmac.compare_digest(req.headers[TOKEN_HEADER].encode("utf-8", "surrogatepass"),
                                   self.token.encode("ascii")):
            return _refusal(403, "AuthenticationFailed", "The explorer token is not this emulator's.")
        origin = req.headers.get("origin")
        if origin is not None and origin.strip().lower() != "http://" + req.host.strip().lower():
            return _refusal(403, "AuthorizationFailure", "The explorer token is accepted only from the page's origin.")
        fetch_site = req.headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site.strip().lower() != "same-origin":
            return _refusal(403, "AuthorizationFailure", "The explorer token is accepted only from the page's origin.")
        return None

    # -------------------------------------------------------------- the page's requests

    def _on_behalf_of_page(self, req: Request) -> Response:
        refused = self._page_request_refusal(req)
        if refused is not None:
            return refused
        if req.raw_path == STATIC_PREFIX + "connection-string" and req.method.upper() in _READ_METHODS:
            return self._connection_string(req)
        if self.read_only and (req.method.upper() not in _READ_METHODS or req.x_http_methods):
            return _refusal(403, "AuthorizationFailure",
                            "The explorer is read-only (the emulator was started with --read-only).")
        headers = {name: value for name, value in req.headers.items()
                   if name not in (TOKEN_HEADER, "authorization", "date")}
        date = formatdate(usegmt=True)
        headers["x-ms-date"] = date
        resource = canonicalized_resource(self.service.account, req.raw_path, query_dict(req.raw_query))
        signature = sign(self.service.key, shared_key_lite_string_to_sign(date, resource))
        headers["authorization"] = f"SharedKeyLite {self.service.account}:{signature}"
        signed = Request(
            method=req.method, raw_path=req.raw_path, raw_query=req.raw_query, headers=headers, body=req.body,
            host=req.host, secure=req.secure, client_ip=req.client_ip, x_http_methods=req.x_http_methods,
            body_too_large=req.body_too_large,
        )
        response = self.service.handle(signed)
        response.headers.append(("X-Content-Type-Options", "nosniff"))
        return response

    def _connection_string(self, req: Request) -> Response:
        account = self.service.account
        text = (f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={self._account_key};"
                f"TableEndpoint=http://{req.host.strip()}/{account};")
        body = json.dumps({"connectionString": text}).encode()
        return Response(200, [("Content-Type", "application/json;charset=utf-8"), ("Cache-Control", "no-store"),
                              *_PAGE_HEADERS], body)

    # -------------------------------------------------------------- the page and its files

    def _page_file(self, req: Request) -> Response:
        if req.method.upper() not in _READ_METHODS:
            return _refusal(405, "UnsupportedHttpVerb", "The explorer's files are read with GET.")
        refused = self._host_refusal(req)
        if refused is not None:
            return refused
        if req.raw_path == "/":
            page = _static("index.html").decode("utf-8")
            for name, value in (("token", self.token), ("mode", "read-only" if self.read_only else "read-write"),
                                ("account", self.service.account)):
                page = page.replace("{{%s}}" % name, value)  # values of [A-Za-z0-9_-] only: no escaping needed
            return Response(200, [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store"),
                                  *_PAGE_HEADERS], page.encode("utf-8"))
        name = req.raw_path[len(STATIC_PREFIX):]
        content_type = _STATIC_TYPES.get(name)
        if content_type is None:
            return _refusal(404, "ResourceNotFound", "The explorer has no such file.")
        return Response(200, [("Content-Type", content_type), ("Cache-Control", "no-cache"), *_PAGE_HEADERS],
                        _static(name))
