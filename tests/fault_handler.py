"""The fault proxy's work on one client connection (tests/faults.py is the front): read a
request, apply the fault its rule names or forward it upstream unchanged, relay the answer.

:class:`ProxyHandler` is the proxy's own: it reads the proxy's rules and records its events
through :class:`~fault_proxy.FaultProxy`'s underscored methods, which exist for it.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import socketserver
import struct
import time
import uuid
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING

from fault_rules import DECISION_HEADER, ENDLESS_FAULTS, ERROR_FAULTS, Fault, FaultRule, ProxyEvent

if TYPE_CHECKING:
    from fault_proxy import FaultProxy

__all__ = ["ProxyHandler", "ProxyServer"]

_ERROR_ANSWERS = {
    Fault.SERVER_BUSY: (503, "Service Unavailable", "ServerBusy", "The server is busy."),
    Fault.INTERNAL_ERROR: (
        500,
        "Internal Server Error",
        "InternalError",
        "The server encountered an internal error. Please retry the request.",
    ),
    Fault.TOO_MANY_REQUESTS: (
        429,
        "Too Many Requests",
        "TooManyRequests",
        "The request rate is too large. Please retry after sometime.",
    ),
}
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "proxy-connection"})
_METHODS = ("GET", "HEAD", "POST", "PUT", "MERGE", "PATCH", "DELETE", "OPTIONS")


class ProxyServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
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


class ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ProxyServer

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

    def _endless_head(self, pace: float, *, byte_at_a_time: bool) -> bool:
        """Send a status line and then header lines, one ``pace`` apart (each line, or with
        ``byte_at_a_time`` each of its bytes), with no end of the header block: until the client
        gives up (True) or the proxy stops (False). Never on its own."""
        self.close_connection = True
        stopping = self.server.proxy._stopping
        text = b"HTTP/1.1 200 OK\r\n"
        number = 0
        while True:
            pieces = [text[i : i + 1] for i in range(len(text))] if byte_at_a_time else [text]
            for piece in pieces:
                if stopping.wait(pace):  # the pace of the trickle, not an ordering
                    return False
                try:
                    self._write(piece)
                except OSError:  # the client closed: a write after its close meets a reset
                    return True
            number += 1
            text = b"x-ms-trickle-%d: still coming\r\n" % number

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
        if fault in ERROR_FAULTS:
            assert fault is not None and rule is not None
            status, reason, headers, payload, request_id = self._error_answer(fault)
            headers.extend(rule.headers)
            event.request_id = request_id
            self._send_whole(status, reason, headers, payload, from_upstream=False)
            event.client_status = status
            return
        if fault is Fault.RESET:
            self._abort()
            return
        if fault in ENDLESS_FAULTS:
            assert rule is not None
            event.client_gave_up = self._endless_head(rule.pace, byte_at_a_time=fault is Fault.TRICKLE_HEADERS)
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
    setattr(ProxyHandler, f"do_{_method}", ProxyHandler._handle)

