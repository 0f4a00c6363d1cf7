"""A fault-injecting HTTP proxy for tests (standard library only; not part of the package).

:class:`FaultProxy` listens on loopback and forwards every request, unchanged,
to an upstream Table endpoint (Azurite, the bundled emulator, a stub). A test
programs it with :meth:`FaultProxy.inject`: for the next ``times`` requests
that match a method and/or a path regex, the proxy misbehaves in one of the
ways of :class:`Fault` instead of forwarding transparently::

    with FaultProxy(azurite_endpoint) as proxy:
        proxy.inject(Fault.SERVER_BUSY, times=2, method="POST", path=r"/mytable$")
        account = CloudStorageAccount.parse(proxy.connection_string(conn_str))
        ...
        assert proxy.count(Fault.SERVER_BUSY) == 2

Request fidelity: the request line (method and the raw request target, so the
account segment and the query string), every header in its original order and
spelling (``Authorization``, ``x-ms-date``, ``Host`` ...) and the body bytes are
sent upstream exactly as received, so Shared Key and SAS signatures still
verify: the canonicalized resource is built from the URL path, which does not
change when the client's ``TableEndpoint`` is ``http://127.0.0.1:<proxy
port>/devstoreaccount1`` (:attr:`FaultProxy.endpoint`).

Connections: the client side keeps HTTP/1.1 keep-alive connections open as
the client asks; each forwarded request uses a fresh upstream connection. The
upstream response is relayed with its status, reason and headers, minus the
hop-by-hop ones (``Connection``, ``Keep-Alive``, ``Transfer-Encoding``), with
the whole body and a ``Content-Length``.

Bounds: a rule fires at most ``times`` times; delays are capped by
``max_delay``; the proxy shuts itself down after ``lifetime`` seconds even if
the test forgets to; idle client connections are dropped after
``idle_timeout`` seconds; upstream calls time out after ``upstream_timeout``.
``latency`` (seconds) delays every forwarded request, like a network round
trip (the benchmarks use 20 ms).

Every request handled is recorded as a :class:`ProxyEvent` (what the proxy
did, the status upstream and client saw, request ids): :attr:`FaultProxy.events`
(which first waits for requests still in hand, so a test can read it right
after its client call returned). Nothing is logged and nothing is printed.

Ordering without clocks: each :class:`FaultRule` sets threading events as the
proxy applies it (``received``: the request is in hand, ``forwarded``: the
upstream answered it, ``handled``: it is recorded), so a test that must act
while a request is held waits on them instead of sleeping. A client's read
timeout, though, is a clock: with one timeout for every attempt, the attempts a
delay fault holds must outlast it while the clean ones must not, which no
single value guarantees on a busy machine. :class:`FaultSender` (and
:class:`AsyncFaultSender`) resolve that: wrapped around a client's sender, they
ask the proxy, before each attempt goes out, which fault it will meet
(:meth:`FaultProxy.decide`) and tag the request with that decision
(:data:`DECISION_HEADER`, removed before forwarding), so the attempts a delay
fault holds get a short read timeout and every other attempt keeps the
client's own (in the tests a generous one: a failure detector only). Delays are
then given as an upper bound: the proxy holds the request until the client
gives up. A read timeout on a clean attempt is then never a race but a fault a
test asks for (a DELAY_BEFORE_ANSWER rule for that attempt).
"""

from __future__ import annotations

import enum
import http.client
import json
import re
import select
import socket
import socketserver
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "Fault",
    "AMBIGUOUS_FAULTS",
    "FaultRule",
    "ProxyEvent",
    "FaultProxy",
    "Decision",
    "DECISION_HEADER",
    "DELAY_FAULTS",
    "FaultSender",
    "AsyncFaultSender",
    "replace_table_endpoint",
]


class Fault(str, enum.Enum):
    """What the proxy does to a matching request instead of forwarding it cleanly."""

    #: Answer 503 ServerBusy (JSON or XML ``odata.error`` body, ``x-ms-error-code``); not forwarded.
    SERVER_BUSY = "server_busy"
    #: Answer 500 InternalError; not forwarded.
    INTERNAL_ERROR = "internal_error"
    #: Hold the request for ``delay`` seconds before forwarding; if the client gives up
    #: (closes its connection) meanwhile, the request is dropped and never forwarded.
    DELAY_BEFORE_FORWARD = "delay_before_forward"
    #: Forward at once, then hold the answer for ``delay`` seconds; if the client gives up
    #: meanwhile the answer is dropped (the server did the work: ambiguous).
    DELAY_BEFORE_ANSWER = "delay_before_answer"
    #: Read the request, then reset the connection (SO_LINGER 0 close); not forwarded.
    RESET = "reset"
    #: Forward, read the upstream answer, then reset the connection (ambiguous).
    FORWARD_THEN_RESET = "forward_then_reset"
    #: Forward, then send the headers and half of the body and close the connection
    #: (ambiguous). An empty body cannot be halved, so then the cut falls inside the
    #: status line (``HTTP/1.``), which no client can mistake for a complete answer.
    TRUNCATE = "truncate"


#: Faults after which the request has reached the server: a write may have been applied.
AMBIGUOUS_FAULTS = frozenset({Fault.DELAY_BEFORE_ANSWER, Fault.FORWARD_THEN_RESET, Fault.TRUNCATE})
#: Faults that hold a request until the client gives up (or ``delay`` runs out).
DELAY_FAULTS = frozenset({Fault.DELAY_BEFORE_FORWARD, Fault.DELAY_BEFORE_ANSWER})
#: The request header by which a :class:`FaultSender` tells the proxy which of its
#: decisions an attempt carries. The proxy removes it before recording and forwarding
#: (it is added after signing and is part of no signature).
DECISION_HEADER = "X-Fault-Proxy-Decision"

_ERROR_ANSWERS = {
    Fault.SERVER_BUSY: (503, "Service Unavailable", "ServerBusy", "The server is busy."),
    Fault.INTERNAL_ERROR: (
        500,
        "Internal Server Error",
        "InternalError",
        "The server encountered an internal error. Please retry the request.",
    ),
}
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "proxy-connection"})
_SIG = re.compile(r"([?&]sig=)[^&#]*", re.IGNORECASE)
_METHODS = ("GET", "HEAD", "POST", "PUT", "MERGE", "PATCH", "DELETE", "OPTIONS")


@dataclass
class FaultRule:
    """A programmed fault: applies to the next ``times`` requests it matches.

    ``method`` (case-insensitive) and ``path`` (a regex searched in the raw
    request target, path and query) narrow the match; None matches anything.
    ``remaining`` counts down as the rule fires.

    The signals (set the first time the rule fires, never cleared) order a test's
    actions after the proxy's: ``received`` once the proxy has the request in hand
    and has chosen this rule for it (a delay fault is now holding it), ``forwarded``
    once the upstream has answered it (DELAY_BEFORE_ANSWER is now holding the
    answer), ``handled`` once the proxy is done with it and has recorded it.
    """

    fault: Fault
    times: int
    method: str | None = None
    path: re.Pattern[str] | None = None
    delay: float = 3.0
    remaining: int = field(init=False)
    received: threading.Event = field(init=False, repr=False, compare=False, default_factory=threading.Event)
    forwarded: threading.Event = field(init=False, repr=False, compare=False, default_factory=threading.Event)
    handled: threading.Event = field(init=False, repr=False, compare=False, default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.remaining = self.times

    def matches(self, method: str, target: str) -> bool:
        if self.remaining <= 0:
            return False
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return self.path is None or self.path.search(target) is not None


@dataclass
class ProxyEvent:
    """One request the proxy handled.

    ``action`` is the :class:`Fault` applied or ``"forward"``. ``target`` is the
    request target with any SAS ``sig`` value replaced by ``REDACTED``;
    ``headers`` (the request headers exactly as received, secrets included) is
    kept out of the repr. ``upstream_status`` is what the upstream answered
    (None when not forwarded), ``client_status`` the status the client was sent
    in full (None when it got no complete answer), ``request_id`` the
    ``x-ms-request-id`` sent to the client (or upstream's, when the answer was
    lost), ``client_gave_up`` whether the client closed the connection during a
    delay.
    """

    seq: int
    method: str
    target: str
    action: str
    client_request_id: str | None
    body_length: int
    headers: list[tuple[str, str]] = field(repr=False, default_factory=list)
    forwarded: bool = False
    upstream_status: int | None = None
    client_status: int | None = None
    request_id: str | None = None
    client_gave_up: bool = False
    error: str | None = None
    start: float = 0.0
    end: float = 0.0

    def header(self, name: str) -> str | None:
        """The first request header called ``name`` (case-insensitive), as received."""
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return None


@dataclass(frozen=True)
class Decision:
    """What the proxy will do to one attempt a :class:`FaultSender` is about to send.

    ``rule`` is the rule it will apply (None: forward cleanly); ``id`` is the value of
    :data:`DECISION_HEADER` that ties the attempt to it.
    """

    id: str
    rule: FaultRule | None

    @property
    def fault(self) -> Fault | None:
        return self.rule.fault if self.rule is not None else None


def replace_table_endpoint(connection_string: str, endpoint: str) -> str:
    """``connection_string`` with its ``TableEndpoint`` set to ``endpoint`` (added if absent)."""
    parts = [p for p in connection_string.split(";") if p.strip()]
    kept = [p for p in parts if p.split("=", 1)[0].strip().lower() != "tableendpoint"]
    kept.append(f"TableEndpoint={endpoint}")
    return ";".join(kept) + ";"


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    # socketserver's default backlog of 5 drops the SYNs of a client opening many connections at
    # once (the concurrency benchmarks open 100), which then wait a whole TCP retransmit (1 s).
    request_queue_size = 128
    allow_reuse_address = True
    block_on_close = False
    proxy: FaultProxy

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that vanished mid-answer is routine here; never print tracebacks.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    # ------------------------------------------------------------ plumbing

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.proxy.idle_timeout)  # idle keep-alive connections end
        self.server.proxy._opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.proxy._closed(self.connection)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _read_body(self) -> bytes:
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            # Relay the chunked stream verbatim (headers are forwarded unchanged).
            raw = bytearray()
            while True:
                size_line = self.rfile.readline(65537)
                raw += size_line
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers up to the empty line
                        line = self.rfile.readline(65537)
                        raw += line
                        if line in (b"\r\n", b"\n", b""):
                            return bytes(raw)
                raw += self.rfile.read(size + 2)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _write(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()

    def _abort(self) -> None:
        """Close the client connection with a TCP reset (SO_LINGER 0)."""
        self.close_connection = True
        sock = self.connection
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        try:
            self.rfile.close()  # drop makefile()'s reference so close() really closes
        except OSError:
            pass
        sock.close()

    def _wait_for_client_close(self, seconds: float) -> bool:
        """Wait up to ``seconds``; True as soon as the client closes its end (or the proxy stops)."""
        proxy = self.server.proxy
        deadline = time.monotonic() + seconds
        sock = self.connection
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if proxy._stopping.is_set():
                return True
            try:
                readable, _, _ = select.select([sock], [], [], min(left, 0.05))
            except (OSError, ValueError):
                return True
            if readable:
                try:
                    peek = sock.recv(1, socket.MSG_PEEK)
                except (TimeoutError, BlockingIOError):
                    continue
                except OSError:
                    return True
                if not peek:
                    return True
                time.sleep(min(left, 0.05))  # pipelined bytes: not a close; keep waiting

    # ------------------------------------------------------------ upstream

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        proxy = self.server.proxy
        conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=proxy.upstream_timeout)
        try:
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                conn.putheader(name, value)
            conn.endheaders(body if body else None)
            response = conn.getresponse()
            data = response.read()
            return response.status, response.reason, response.getheaders(), data
        finally:
            conn.close()

    def _response_head(
        self, status: int, reason: str, headers: list[tuple[str, str]], body: bytes, *, from_upstream: bool
    ) -> bytes:
        lines = [f"HTTP/1.1 {status} {reason}"]
        has_length = False
        for name, value in headers:
            lowered = name.lower()
            if lowered in _HOP_BY_HOP:
                continue
            if lowered == "content-length":
                if self.command == "HEAD" or status in (204, 304) or status < 200:
                    lines.append(f"{name}: {value}")  # describes a body that is not sent
                    has_length = True
                continue
            lines.append(f"{name}: {value}")
        bodiless = self.command == "HEAD" or status in (204, 304) or status < 200
        if not bodiless:
            lines.append(f"Content-Length: {len(body)}")
        elif not has_length and not from_upstream:
            lines.append("Content-Length: 0")
        lines.append("Connection: close" if self.close_connection else "Connection: keep-alive")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _send_whole(self, status: int, reason: str, headers: list[tuple[str, str]], body: bytes,
                    *, from_upstream: bool) -> None:
        head = self._response_head(status, reason, headers, body, from_upstream=from_upstream)
        bodiless = self.command == "HEAD" or status in (204, 304) or status < 200
        self._write(head + (b"" if bodiless else body))

    def _error_answer(self, fault: Fault) -> tuple[int, str, list[tuple[str, str]], bytes, str]:
        status, reason, code, text = _ERROR_ANSWERS[fault]
        request_id = str(uuid.uuid4())
        now = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        message = f"{text}\nRequestId:{request_id}\nTime:{now}.0000000Z"
        accept = (self.headers.get("Accept") or "").lower()
        if "xml" in accept and "json" not in accept:
            xml_message = message.replace("&", "&amp;").replace("<", "&lt;")
            body = (
                '<?xml version="1.0" encoding="utf-8" standalone="yes"?>'
                '<error xmlns="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">'
                f'<code>{code}</code><message xml:lang="en-US">{xml_message}</message></error>'
            ).encode()
            content_type = "application/xml"
        else:
            body = json.dumps(
                {"odata.error": {"code": code, "message": {"lang": "en-US", "value": message}}}
            ).encode("utf-8")
            content_type = "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"
        headers = [
            ("Content-Type", content_type),
            ("Server", "Windows-Azure-Table/1.0 Microsoft-HTTPAPI/2.0"),
            ("x-ms-request-id", request_id),
            ("x-ms-version", self.headers.get("x-ms-version") or "2019-02-02"),
            ("x-ms-error-code", code),
            ("Date", formatdate(usegmt=True)),
        ]
        return status, reason, headers, body, request_id

    # ------------------------------------------------------------ dispatch

    def _handle(self) -> None:
        proxy = self.server.proxy
        proxy._begin()
        try:
            self._handle_inner()
        finally:
            proxy._end()

    def _handle_inner(self) -> None:
        proxy = self.server.proxy
        body = self._read_body()
        decision_id = self.headers.get(DECISION_HEADER)
        if decision_id is not None:
            del self.headers[DECISION_HEADER]  # the harness's tag: neither recorded nor forwarded
            rule = proxy._decided(decision_id, self.command, self.path)
        else:
            rule = proxy._take(self.command, self.path)
        event = proxy._new_event(self, len(body), rule)
        if rule is not None:
            rule.received.set()
        try:
            self._apply(rule, event, body)
        except Exception as exc:  # upstream down, client gone ...: record, and drop the connection
            event.error = f"{type(exc).__name__}: {exc}"
            self.close_connection = True
        finally:
            event.end = time.monotonic()
            proxy._record(event, decision_id)
            if rule is not None:
                rule.handled.set()

    def _apply(self, rule: FaultRule | None, event: ProxyEvent, body: bytes) -> None:
        fault = rule.fault if rule is not None else None
        if fault in (Fault.SERVER_BUSY, Fault.INTERNAL_ERROR):
            assert fault is not None
            status, reason, headers, payload, request_id = self._error_answer(fault)
            event.request_id = request_id
            self._send_whole(status, reason, headers, payload, from_upstream=False)
            event.client_status = status
            return
        if fault is Fault.RESET:
            self._abort()
            return
        if fault is Fault.DELAY_BEFORE_FORWARD:
            assert rule is not None
            if self._wait_for_client_close(rule.delay):
                event.client_gave_up = True
                self.close_connection = True
                return

        if self.server.proxy.latency:
            time.sleep(self.server.proxy.latency)
        status, reason, headers, data = self._forward(body)
        event.forwarded = True
        event.upstream_status = status
        event.request_id = next((v for k, v in headers if k.lower() == "x-ms-request-id"), None)
        if rule is not None:
            rule.forwarded.set()

        if fault is Fault.FORWARD_THEN_RESET:
            self._abort()
            return
        if fault is Fault.TRUNCATE:
            self.close_connection = True
            if data and self.command != "HEAD" and status not in (204, 304):
                head = self._response_head(status, reason, headers, data, from_upstream=True)
                self._write(head + data[: len(data) // 2])
            else:
                self._write(b"HTTP/1.")
            return
        if fault is Fault.DELAY_BEFORE_ANSWER:
            assert rule is not None
            if self._wait_for_client_close(rule.delay):
                event.client_gave_up = True
                self.close_connection = True
                return
        self._send_whole(status, reason, headers, data, from_upstream=True)
        event.client_status = status


for _method in _METHODS:
    setattr(_Handler, f"do_{_method}", _Handler._handle)


class FaultProxy:
    """A loopback proxy in front of ``upstream`` that injects programmed faults.

    ``upstream`` is the upstream table endpoint (``http://host:port[/account]``);
    only http is supported. :attr:`endpoint` is the same endpoint through the
    proxy. Use as a context manager (or :meth:`start` / :meth:`close`).
    """

    def __init__(
        self,
        upstream: str,
        *,
        lifetime: float = 300.0,
        max_delay: float = 30.0,
        idle_timeout: float = 30.0,
        upstream_timeout: float = 30.0,
        latency: float = 0.0,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream!r}")
        self.upstream = upstream.rstrip("/")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 80
        self.upstream_path = parts.path.rstrip("/")
        self.lifetime = lifetime
        self.max_delay = max_delay
        self.idle_timeout = idle_timeout
        self.upstream_timeout = upstream_timeout
        if not 0 <= latency <= max_delay:
            raise ValueError(f"latency must be between 0 and max_delay ({max_delay}), got {latency!r}")
        #: Seconds every forwarded request waits first: the round trip of a real network, for
        #: benchmarks of concurrency (each connection has its own handler thread, so requests in
        #: flight at once wait at the same time, as they would on the wire).
        self.latency = float(latency)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._rules: list[FaultRule] = []
        self._events: list[ProxyEvent] = []
        self._seq = 0
        self._in_flight = 0
        self._accepted = 0
        self._connections: set[socket.socket] = set()
        # Decisions handed to FaultSenders: id -> rule, until the tagged request arrives;
        # and the ids not yet recorded (an attempt on its way, or in hand).
        self._decisions: dict[str, FaultRule | None] = {}
        self._unrecorded: set[str] = set()
        self._stopping = threading.Event()
        self._finished = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self._closed_once = False

    # ------------------------------------------------------------ lifecycle

    def start(self) -> FaultProxy:
        if self._server is not None:
            raise RuntimeError("FaultProxy already started")
        server = _Server(("127.0.0.1", 0), _Handler)
        server.proxy = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fault-proxy", daemon=True
        )
        self._thread.start()
        self._timer = threading.Timer(self.lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        return self

    def close(self) -> None:
        """Stop accepting, drop every client connection and wait briefly for handlers. Idempotent."""
        with self._lock:
            if self._closed_once or self._server is None:
                return
            self._closed_once = True
            connections = list(self._connections)
        self._stopping.set()
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()
        server = self._server
        server.shutdown()
        server.server_close()
        for sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.wait_idle(timeout=5)
        self._finished.set()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` (by the test or at the end of ``lifetime``) has finished."""
        return self._finished.is_set()

    def wait_closed(self, timeout: float = 30.0) -> bool:
        """Wait until :meth:`close` has finished; False if that took longer than ``timeout``."""
        return self._finished.wait(timeout)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FaultProxy not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no path)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        """The upstream endpoint as seen through the proxy: same path, the proxy's host and port."""
        return self.url + self.upstream_path

    def connection_string(self, connection_string: str) -> str:
        """``connection_string`` with its TableEndpoint pointed at :attr:`endpoint`."""
        return replace_table_endpoint(connection_string, self.endpoint)

    # ------------------------------------------------------------ programming

    def inject(
        self,
        fault: Fault,
        times: int = 1,
        *,
        method: str | None = None,
        path: str | None = None,
        delay: float = 3.0,
    ) -> FaultRule:
        """Apply ``fault`` to the next ``times`` requests matching ``method`` and ``path`` (a regex).

        Rules are tried in the order they were added; the first one that matches
        and has not run out fires. ``delay`` (seconds, capped by ``max_delay``)
        is used by the two delay faults: make it longer than the client's timeout.
        """
        if not isinstance(fault, Fault):
            raise ValueError(f"fault must be a Fault, got {fault!r}")
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise ValueError(f"times must be an int >= 1, got {times!r}")
        if not 0 <= delay <= self.max_delay:
            raise ValueError(f"delay must be between 0 and max_delay ({self.max_delay}), got {delay!r}")
        rule = FaultRule(fault, times, method, re.compile(path) if path is not None else None, float(delay))
        with self._lock:
            self._rules.append(rule)
        return rule

    def decide(self, method: str, target: str) -> Decision:
        """Take, now, the rule the next request for ``method`` and ``target`` would meet.

        For an attempt about to be sent with :data:`DECISION_HEADER` set to the
        returned decision's ``id`` (what :class:`FaultSender` does): the proxy applies
        exactly this rule (or none) to that request whenever it arrives, whatever else
        arrives first, and :attr:`events` waits for it to be recorded.
        """
        with self._lock:
            rule = self._take_locked(method, target)
            decision = Decision(uuid.uuid4().hex, rule)
            self._decisions[decision.id] = rule
            self._unrecorded.add(decision.id)
        return decision

    def withdraw(self, decision: Decision) -> None:
        """Forget ``decision``: its attempt never reached the proxy (its rule is not given back)."""
        with self._idle:
            self._decisions.pop(decision.id, None)
            self._unrecorded.discard(decision.id)
            self._idle.notify_all()

    def clear(self) -> None:
        """Forget every rule (already recorded events stay)."""
        with self._lock:
            self._rules.clear()

    @property
    def pending(self) -> int:
        """How many more faults the current rules will inject."""
        with self._lock:
            return sum(rule.remaining for rule in self._rules)

    # ------------------------------------------------------------ records

    @property
    def events(self) -> list[ProxyEvent]:
        """Every request handled so far, in arrival order (a copy).

        Waits first (up to 30 s, a bound for a stuck proxy only) until no request is
        being handled and every attempt a :class:`FaultSender` announced has been
        recorded: a client may hold its answer, or have given up on an attempt, before
        the proxy has finished with it, or even read it.
        """
        self.wait_idle(timeout=30.0)
        with self._lock:
            return sorted(self._events, key=lambda e: e.seq)

    @property
    def connections_accepted(self) -> int:
        """How many client connections the proxy has accepted (keep-alive reuses one)."""
        with self._lock:
            return self._accepted

    def count(self, action: Fault | str | None = None) -> int:
        """How many requests were handled (with ``action``, when given: a Fault or ``"forward"``).

        Waits as :attr:`events` does."""
        self.wait_idle(timeout=30.0)
        with self._lock:
            if action is None:
                return len(self._events)
            name = action.value if isinstance(action, Fault) else action
            return sum(1 for e in self._events if e.action == name)

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no request is being handled and every decided attempt is recorded;
        False if that took longer than ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._in_flight or (self._unrecorded and not self._stopping.is_set()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
            return True

    # ------------------------------------------------------------ handler callbacks

    def _take(self, method: str, target: str) -> FaultRule | None:
        with self._lock:
            return self._take_locked(method, target)

    def _take_locked(self, method: str, target: str) -> FaultRule | None:
        for rule in self._rules:
            if rule.matches(method, target):
                rule.remaining -= 1
                return rule
        return None

    def _decided(self, decision_id: str, method: str, target: str) -> FaultRule | None:
        with self._lock:
            if decision_id in self._decisions:
                return self._decisions.pop(decision_id)
            return self._take_locked(method, target)  # a tag this proxy never issued: match as usual

    def _new_event(self, handler: _Handler, body_length: int, rule: FaultRule | None) -> ProxyEvent:
        with self._lock:
            self._seq += 1
            seq = self._seq
        return ProxyEvent(
            seq=seq,
            method=handler.command,
            target=_SIG.sub(r"\1REDACTED", handler.path),
            action=rule.fault.value if rule is not None else "forward",
            client_request_id=handler.headers.get("x-ms-client-request-id"),
            body_length=body_length,
            headers=list(handler.headers.items()),
            start=time.monotonic(),
        )

    def _record(self, event: ProxyEvent, decision_id: str | None = None) -> None:
        with self._idle:
            self._events.append(event)
            if decision_id is not None:
                self._unrecorded.discard(decision_id)
                self._idle.notify_all()

    def _begin(self) -> None:
        with self._lock:
            self._in_flight += 1

    def _end(self) -> None:
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()

    def _opened(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.add(sock)
            self._accepted += 1
        if self._stopping.is_set():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _closed(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.discard(sock)

    def __repr__(self) -> str:
        state = "closed" if self._stopping.is_set() else ("running" if self._server is not None else "new")
        return f"FaultProxy(upstream={self.upstream!r}, {state}, events={len(self._events)}, pending={self.pending})"



# ---------------------------------------------------------------- senders that ask the proxy first


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
