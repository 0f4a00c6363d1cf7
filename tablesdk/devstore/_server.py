"""HTTP front end (standard library ``http.server``) and the :class:`DevStore` API."""

from __future__ import annotations

import email.parser
import logging
import re
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Callable, Iterable

from ._explorer import Explorer
from ._request import MAX_BODY, Request, Response
from ._service import DEVSTORE_ACCOUNT, DEVSTORE_KEY, TableService
from ._storage import Storage

__all__ = ["DevStore", "DevStoreServer"]

log = logging.getLogger("tablesdk.devstore")
#: A SAS signature is a bearer secret: request lines are logged with its value replaced.
_SIG = re.compile(r"(\bsig=)[^&#\s'\"]*", re.IGNORECASE)

#: Bodies larger than this are not read at all; the connection is closed after the 413.
_DRAIN_LIMIT = 64 * 1024 * 1024


class _BodyTooLarge(Exception):
    pass


#: The standard library's limits on a request's header lines (``http.client``).
_MAX_LINE = 65536
_MAX_HEADERS = 100
#: A header line the fast reader takes as it is: a token, a colon, a value (no folding).
_SIMPLE_HEADER = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+:")


class _Headers:
    """A request's header fields, looked up without case; what the handler uses of
    ``email.message.Message`` (``get``, ``get_all``, ``items``), read without the email parser."""

    __slots__ = ("_fields",)

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        self._fields = fields

    def get(self, name: str, default: Any = None) -> Any:
        lower = name.lower()
        for key, value in self._fields:
            if key.lower() == lower:
                return value
        return default

    def get_all(self, name: str) -> list[str] | None:
        lower = name.lower()
        found = [value for key, value in self._fields if key.lower() == lower]
        return found or None

    def items(self) -> list[tuple[str, str]]:
        return list(self._fields)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 300  # seconds a keep-alive connection may sit idle (or a body may stall)
    server: DevStoreServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        if self.server.verbose:
            log.info("%s - %s", self.address_string(), _SIG.sub(r"\1REDACTED", format % args))

    def parse_request(self) -> bool:
        """The standard library's request-line and connection handling, with the header lines
        read directly: ``http.client.parse_headers`` runs the email parser, the largest part
        of a small request's cost. Folded or unusual lines still go to that parser."""
        self.command = None  # type: ignore[assignment]  # as the standard library: unset on a bad line
        self.request_version = version = self.default_request_version
        self.close_connection = True
        raw_line: bytes = getattr(self, "raw_requestline")  # set by handle_one_request
        requestline = raw_line.decode("iso-8859-1").rstrip("\r\n")
        self.requestline = requestline
        words = requestline.split()
        if not words:
            return False
        if len(words) >= 3:
            version = words[-1]
            try:
                if not version.startswith("HTTP/"):
                    raise ValueError
                base_version_number = version.split("/", 1)[1]
                numbers = base_version_number.split(".")
                if len(numbers) != 2 or any(not n.isdigit() or len(n) > 10 for n in numbers):
                    raise ValueError
                version_number = int(numbers[0]), int(numbers[1])
            except (ValueError, IndexError):
                self.send_error(HTTPStatus.BAD_REQUEST, "Bad request version (%r)" % version)
                return False
            if version_number >= (1, 1) and self.protocol_version >= "HTTP/1.1":
                self.close_connection = False
            if version_number >= (2, 0):
                self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED,
                                "Invalid HTTP version (%s)" % base_version_number)
                return False
            self.request_version = version
        if not 2 <= len(words) <= 3:
            self.send_error(HTTPStatus.BAD_REQUEST, "Bad request syntax (%r)" % requestline)
            return False
        command, path = words[:2]
        if len(words) == 2:
            self.close_connection = True
            if command != "GET":
                self.send_error(HTTPStatus.BAD_REQUEST, "Bad HTTP/0.9 request type (%r)" % command)
                return False
        self.command, self.path = command, path
        if self.path.startswith("//"):
            self.path = "/" + self.path.lstrip("/")
        lines: list[bytes] = []
        while True:
            line = self.rfile.readline(_MAX_LINE + 1)
            if len(line) > _MAX_LINE:
                self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long",
                                f"got more than {_MAX_LINE} bytes when reading header line")
                return False
            lines.append(line)
            if len(lines) > _MAX_HEADERS:
                self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers",
                                f"got more than {_MAX_HEADERS} headers")
                return False
            if line in (b"\r\n", b"\n", b""):
                break
        fields: list[tuple[str, str]] = []
        for raw_line in lines[:-1]:  # the last is the blank line (or the end of the stream)
            field_line = raw_line.decode("iso-8859-1")
            if not _SIMPLE_HEADER.match(field_line):
                text = b"".join(lines).decode("iso-8859-1")
                self.headers = email.parser.Parser(_class=self.MessageClass).parsestr(text)
                break
            name, _, value = field_line.partition(":")
            fields.append((name, value.lstrip(" \t").rstrip("\r\n")))
        else:
            self.headers = _Headers(fields)  # type: ignore[assignment]
        conntype = self.headers.get("Connection", "").lower()
        if conntype == "close":
            self.close_connection = True
        elif conntype == "keep-alive" and self.protocol_version >= "HTTP/1.1":
            self.close_connection = False
        expect = self.headers.get("Expect", "")
        if (expect.lower() == "100-continue" and self.protocol_version >= "HTTP/1.1"
                and self.request_version >= "HTTP/1.1"):
            if not self.handle_expect_100():
                return False
        return True

    # every verb goes to the same place; the service answers 405 where needed
    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PUT = do_DELETE = do_MERGE = do_PATCH = do_HEAD = do_OPTIONS = do_GET

    def __getattr__(self, name: str) -> Callable[[], None]:
        # Any other method (BREW, TRACE, CONNECT) is served too: the service answers it with its
        # own 405 UnsupportedHttpVerb error body, not the standard library's 501 HTML page.
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    def _read_body(self) -> tuple[bytes, bool]:
        """(body, too_large). Handles Content-Length and chunked transfer coding."""
        encoding = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in encoding:
            chunks: list[bytes] = []
            total = 0
            too_large = False
            while True:
                size_line = self.rfile.readline(65537)
                if not size_line:
                    raise ConnectionError("connection closed inside a chunked body")
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                total += size
                if total > _DRAIN_LIMIT:
                    raise _BodyTooLarge()
                data = self.rfile.read(size)
                self.rfile.readline(3)  # CRLF after the chunk
                if total > MAX_BODY:
                    too_large = True
                else:
                    chunks.append(data)
            return (b"" if too_large else b"".join(chunks)), too_large
        length_text = self.headers.get("Content-Length")
        if not length_text:
            return b"", False
        length = int(length_text)
        if length < 0:
            raise ValueError("negative Content-Length")
        if length > _DRAIN_LIMIT:
            raise _BodyTooLarge()
        if length > MAX_BODY:
            remaining = length
            while remaining > 0:
                got = self.rfile.read(min(remaining, 1 << 20))
                if not got:
                    break
                remaining -= len(got)
            return b"", True
        return self.rfile.read(length), False

    def _serve(self) -> None:
        server = self.server
        try:
            body, too_large = self._read_body()
        except _BodyTooLarge:
            body, too_large = b"", True
            self.close_connection = True
        except (ValueError, ConnectionError):
            self.send_error(400, "Bad request body")
            self.close_connection = True
            return
        raw_path, _, raw_query = self.path.partition("?")
        if raw_path.startswith("http://") or raw_path.startswith("https://"):
            # absolute-form request target
            after_scheme = raw_path.split("://", 1)[1]
            raw_path = "/" + after_scheme.split("/", 1)[1] if "/" in after_scheme else "/"
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            headers.setdefault(name.lower(), value)
        x_methods = self.headers.get_all("X-HTTP-Method") or []
        host = headers.get("host") or "%s:%d" % tuple(server.socket.getsockname()[:2])
        req = Request(
            method=self.command, raw_path=raw_path, raw_query=raw_query, headers=headers, body=body,
            host=host, secure=False, client_ip=self.client_address[0], x_http_methods=list(x_methods),
            body_too_large=too_large,
        )
        response = server.answer(req)
        self._write(response)

    def _write(self, response: Response) -> None:
        self.send_response(response.status)
        body = response.body if self.command != "HEAD" else b""
        for name, value in response.headers:
            if name.lower() in ("server", "date"):
                continue  # send_response wrote them
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        # The head and the body leave in one write: one segment for a small answer, so the
        # client never waits for the body in a second read (a scheduling round on a busy machine).
        buffer: list[bytes] = self._headers_buffer  # type: ignore[assignment]  # http.server's own
        buffer.append(b"\r\n")
        if body:
            buffer.append(body)
        self.flush_headers()

    def version_string(self) -> str:
        return self.server.service.server_name


class DevStoreServer(ThreadingHTTPServer):
    """A threading HTTP server bound to one :class:`TableService`."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], service: TableService, verbose: bool = False,
                 explorer: Explorer | None = None) -> None:
        self.service = service
        self.verbose = verbose
        #: what serves a request: the explorer in front of the service, or the service alone
        self.answer: Callable[[Request], Response] = service.handle if explorer is None else explorer.handle
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            log.debug("devstore: connection from %s ended: %s", client_address, exc)
            return
        log.exception("devstore: error serving %s", client_address)

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().server_bind()


class DevStore:
    """The bundled Table service emulator, served on loopback in a background thread.

    ::

        with DevStore(port=0, page_size=1000) as store:
            store.url                # "http://127.0.0.1:<port>/devstoreaccount1"
            store.connection_string  # with the well-known devstoreaccount1 key
            store.reset()            # delete every table

    ``port=0`` picks a free port. ``db`` is ``":memory:"`` (default) or a file
    path that keeps data between runs. ``page_size`` (1..1000) is the largest
    query page the server returns, so small values exercise continuation
    tokens; ``max_scan`` additionally caps the entities a query examines per
    request, producing short and even empty pages with a continuation token,
    as the real service may. ``allow_anonymous`` accepts unsigned requests
    (signed ones are still verified).

    Two URL-path behaviours of the production front end are reproduced so that
    a client's workarounds can be tested: ``max_url_segment`` (default 260,
    HTTP.sys's limit; None disables it) answers a longer path segment, such as
    ``Table(PartitionKey='...',RowKey='...')`` with long keys, with HTTP.sys's
    400 "Invalid URL" page; ``double_decode_keys=True`` percent-decodes the key
    segment of a request path twice, the documented bug that makes keys
    containing '%' unreachable by URL (off by default; batch bodies and
    ``$filter`` are never affected).

    ``explorer`` (default True) serves the explorer page at the root address
    (:attr:`explorer_url`); ``explorer_read_only`` makes the page read-only (it
    cannot write; clients with the account key still can). See docs/devstore.md.

    ``clock_ns`` (nanoseconds since the Unix epoch, ``time.time_ns`` by default) is where the
    entities' Timestamps (and ETags) come from, at 100 ns: a test can write a row at a chosen tick.
    Each write still gets a Timestamp later than the one before.
    """

    account_name = DEVSTORE_ACCOUNT
    account_key = DEVSTORE_KEY

    def __init__(
        self,
        port: int = 0,
        page_size: int = 1000,
        *,
        host: str = "127.0.0.1",
        db: str = ":memory:",
        max_scan: int | None = None,
        allow_anonymous: bool = False,
        verbose: bool = False,
        max_url_segment: int | None = 260,
        double_decode_keys: bool = False,
        bearer_tokens: Iterable[str] = (),
        geo_replication_status: str = "live",
        explorer: bool = True,
        explorer_read_only: bool = False,
        clock_ns: Callable[[], int] | None = None,
    ) -> None:
        if isinstance(bearer_tokens, str):
            raise ValueError("bearer_tokens: a list of token strings, not one string")
        self.host = host
        self.requested_port = port
        self.storage = Storage(db, clock_ns=clock_ns)
        self.service = TableService(self.storage, page_size=page_size, max_scan=max_scan,
                                    allow_anonymous=allow_anonymous, max_url_segment=max_url_segment,
                                    double_decode_keys=double_decode_keys,
                                    bearer_tokens=frozenset(bearer_tokens),
                                    geo_replication_status=geo_replication_status)
        self.explorer = (Explorer(self.service, self.account_key, read_only=explorer_read_only, bind_host=host)
                         if explorer else None)
        self.verbose = verbose
        self._server: DevStoreServer | None = None
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------- lifecycle

    def start(self) -> DevStore:
        """Bind and start serving in a daemon thread (returns self)."""
        if self._server is not None:
            return self
        self._server = DevStoreServer((self.host, self.requested_port), self.service, self.verbose,
                                      self.explorer)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
            name=f"devstore-{self.port}", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port (the data stays until the object is dropped)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def close(self) -> None:
        """Stop and close the database."""
        self.stop()
        self.storage.close()

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (used by ``python -m tablesdk.devstore``)."""
        if self._server is None:
            self._server = DevStoreServer((self.host, self.requested_port), self.service, self.verbose,
                                          self.explorer)
        try:
            self._server.serve_forever(poll_interval=0.5)
        finally:
            self._server.server_close()
            self._server = None

    def request_shutdown(self) -> None:
        """Ask a :meth:`serve_forever` loop (in another thread) to stop."""
        if self._server is not None:
            threading.Thread(target=self._server.shutdown, daemon=True).start()

    def __enter__(self) -> DevStore:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -------------------------------------------------------------- addresses

    @property
    def port(self) -> int:
        if self._server is None:
            return self.requested_port
        return int(self._server.server_address[1])

    @property
    def endpoint_host(self) -> str:
        return "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host

    @property
    def url(self) -> str:
        """The table endpoint, path-style: ``http://127.0.0.1:<port>/devstoreaccount1``."""
        return f"http://{self.endpoint_host}:{self.port}/{self.account_name}"

    @property
    def explorer_url(self) -> str:
        """The explorer page: ``http://127.0.0.1:<port>/`` (when ``explorer`` is on)."""
        return f"http://{self.endpoint_host}:{self.port}/"

    @property
    def secondary_url(self) -> str:
        """The read-only secondary endpoint: ``http://127.0.0.1:<port>/devstoreaccount1-secondary``."""
        return self.url + "-secondary"

    @property
    def connection_string(self) -> str:
        return (
            "DefaultEndpointsProtocol=http;"
            f"AccountName={self.account_name};"
            f"AccountKey={self.account_key};"
            f"TableEndpoint={self.url};"
        )

    # -------------------------------------------------------------- data

    def reset(self) -> None:
        """Delete every table and entity (for test isolation)."""
        self.service.reset()

    def table_names(self) -> list[str]:
        return self.service.table_names()

    def __repr__(self) -> str:
        state = "running" if self._server is not None else "stopped"
        return f"DevStore(url={self.url!r}, {state})"
