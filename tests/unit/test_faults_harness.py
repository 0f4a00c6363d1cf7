"""The fault-injection proxy (tests/faults.py) against a stub upstream: fidelity and each fault.

The stub records every request exactly as it arrived, so these tests show what
the integration tests rely on: a request passes the proxy byte for byte (so
signatures still verify), each fault does what it says, and the proxy stays
bounded.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from faults import (
    AMBIGUOUS_FAULTS,
    DECISION_HEADER,
    AsyncFaultSender,
    Fault,
    FaultProxy,
    FaultSender,
    replace_table_endpoint,
)
from requests.structures import CaseInsensitiveDict

from tablesdk._pipeline._http import AttemptState, HttpRequest, HttpResponse, SendError

BODY = b'{"value": "' + b"x" * 88 + b'"}'  # 100 bytes


class _Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, list[tuple[str, str]], bytes]]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append((self.command, self.path, list(self.headers.items()), body))  # type: ignore[attr-defined]
        if "/empty" in self.path:
            self.send_response(204)
            self.send_header("x-ms-request-id", "stub-204")
            self.end_headers()
            return
        if "/chunked" in self.path:
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (BODY[:30], BODY[30:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_response(201 if self.command == "POST" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("ETag", 'W/"datetime\'2024-01-01T00%3A00%3A00Z\'"')
        self.send_header("x-ms-request-id", "stub-id")
        self.send_header("X-Odd-Case", "kept")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    do_GET = do_POST = do_PUT = do_MERGE = do_DELETE = _any


@pytest.fixture
def upstream() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(upstream: ThreadingHTTPServer) -> Iterator[FaultProxy]:
    with FaultProxy(f"http://127.0.0.1:{upstream.server_address[1]}/acct") as p:
        yield p


def _conn(proxy: FaultProxy, timeout: float = 5.0) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)


def _request(
    conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[http.client.HTTPResponse, bytes]:
    conn.request(method, path, body=body, headers=headers or {})
    response = conn.getresponse()
    return response, response.read()


def test_forwards_request_exactly_and_relays_the_answer(proxy: FaultProxy, upstream: ThreadingHTTPServer) -> None:
    assert proxy.endpoint == f"http://127.0.0.1:{proxy.port}/acct"
    target = "/acct/Tbl(PartitionKey='a%20b',RowKey='c%27d')?$select=X&sig=abc%2Bdef%3D"
    conn = _conn(proxy)
    conn.putrequest("MERGE", target, skip_host=True, skip_accept_encoding=True)
    sent = [
        ("Host", f"127.0.0.1:{proxy.port}"),
        ("x-ms-date", "Mon, 01 Jan 2024 00:00:00 GMT"),
        ("Authorization", "SharedKey acct:c2lnbmF0dXJl"),
        ("X-Mixed-CASE", "Value  with  spaces"),
        ("If-Match", "*"),
        ("Content-Length", "5"),
    ]
    for name, value in sent:
        conn.putheader(name, value)
    conn.endheaders(b"hello")
    response = conn.getresponse()
    data = response.read()
    assert (response.status, data) == (200, BODY)
    assert response.getheader("X-Odd-Case") == "kept"
    assert response.getheader("x-ms-request-id") == "stub-id"
    assert response.getheader("Connection") == "keep-alive"
    method, path, headers, body = upstream.seen[0]  # type: ignore[attr-defined]
    assert (method, path, body) == ("MERGE", target, b"hello")
    assert headers == sent
    event = proxy.events[0]
    assert (event.action, event.forwarded, event.upstream_status, event.client_status) == ("forward", True, 200, 200)
    assert "abc" not in event.target and "sig=REDACTED" in event.target
    assert "SharedKey" not in repr(event) and event.header("authorization") == "SharedKey acct:c2lnbmF0dXJl"


def test_keep_alive_and_dechunked_upstream_answers(proxy: FaultProxy) -> None:
    conn = _conn(proxy)
    for path in ("/acct/one", "/acct/chunked", "/acct/empty", "/acct/two"):
        response, data = _request(conn, "GET", path)
        assert data == (b"" if path.endswith("empty") else BODY)
        assert response.getheader("Transfer-Encoding") is None
    assert proxy.connections_accepted == 1
    assert proxy.count("forward") == 4


@pytest.mark.parametrize(
    ("fault", "status", "code"),
    [
        (Fault.SERVER_BUSY, 503, "ServerBusy"),
        (Fault.INTERNAL_ERROR, 500, "InternalError"),
        (Fault.TOO_MANY_REQUESTS, 429, "TooManyRequests"),
    ],
)
def test_error_answers_are_service_shaped_and_not_forwarded(
    proxy: FaultProxy, upstream: ThreadingHTTPServer, fault: Fault, status: int, code: str
) -> None:
    proxy.inject(fault, times=2, method="POST")
    conn = _conn(proxy)
    ids = []
    for _ in range(2):
        response, data = _request(conn, "POST", "/acct/Tbl", b"{}", {"Accept": "application/json;odata=minimalmetadata"})
        assert response.status == status
        assert response.getheader("x-ms-error-code") == code
        assert response.getheader("Content-Type").startswith("application/json")
        error = json.loads(data)["odata.error"]
        assert error["code"] == code
        request_id = response.getheader("x-ms-request-id")
        assert f"RequestId:{request_id}" in error["message"]["value"]
        ids.append(request_id)
    assert upstream.seen == []  # type: ignore[attr-defined]
    response, _ = _request(conn, "POST", "/acct/Tbl", b"{}")
    assert response.status == 201  # the rule ran out: forwarded again, same connection
    assert proxy.connections_accepted == 1
    assert [e.request_id for e in proxy.events[:2]] == ids
    assert proxy.pending == 0


def test_error_answers_carry_the_rules_headers(proxy: FaultProxy, upstream: ThreadingHTTPServer) -> None:
    proxy.inject(Fault.TOO_MANY_REQUESTS, headers={"x-ms-retry-after-ms": "1000", "Retry-After": "1"})
    response, _ = _request(_conn(proxy), "GET", "/acct/Tbl", b"")
    assert response.status == 429
    assert response.getheader("x-ms-retry-after-ms") == "1000" and response.getheader("Retry-After") == "1"


def test_error_answer_is_xml_for_atom_clients(proxy: FaultProxy) -> None:
    proxy.inject(Fault.SERVER_BUSY)
    response, data = _request(_conn(proxy), "GET", "/acct/Tables", headers={"Accept": "application/atom+xml,application/xml"})
    assert response.status == 503 and response.getheader("Content-Type") == "application/xml"
    assert b"<code>ServerBusy</code>" in data


def test_rules_match_by_method_and_path_in_order(proxy: FaultProxy, upstream: ThreadingHTTPServer) -> None:
    proxy.inject(Fault.SERVER_BUSY, times=1, method="post", path=r"/Tbl$")
    proxy.inject(Fault.INTERNAL_ERROR, times=1, path=r"\$batch")
    proxy.inject(Fault.SERVER_BUSY, times=1, method="DELETE")
    conn = _conn(proxy)
    statuses = [
        _request(conn, method, path, b"" if method != "GET" else None)[0].status
        for method, path in [
            ("GET", "/acct/Tbl"), ("POST", "/acct/Other"), ("POST", "/acct/$batch"), ("POST", "/acct/Tbl"),
            ("POST", "/acct/Tbl"), ("DELETE", "/acct/Tbl(PartitionKey='a',RowKey='b')"), ("DELETE", "/acct/x"),
        ]
    ]
    assert statuses == [200, 201, 500, 503, 201, 503, 200]
    assert [e.action for e in proxy.events] == [
        "forward", "forward", "internal_error", "server_busy", "forward", "server_busy", "forward",
    ]


def test_reset_without_forwarding(proxy: FaultProxy, upstream: ThreadingHTTPServer) -> None:
    proxy.inject(Fault.RESET)
    with pytest.raises(ConnectionResetError):
        _request(_conn(proxy), "POST", "/acct/Tbl", b"{}")
    assert upstream.seen == []  # type: ignore[attr-defined]
    assert proxy.events[0].forwarded is False


def test_forward_then_reset_reaches_the_server(proxy: FaultProxy, upstream: ThreadingHTTPServer) -> None:
    proxy.inject(Fault.FORWARD_THEN_RESET)
    with pytest.raises(ConnectionResetError):
        _request(_conn(proxy), "POST", "/acct/Tbl", b"{}")
    assert len(upstream.seen) == 1  # type: ignore[attr-defined]
    event = proxy.events[0]
    assert (event.forwarded, event.upstream_status, event.client_status) == (True, 201, None)
    assert event.request_id == "stub-id"


def test_truncate_sends_headers_and_half_the_body(proxy: FaultProxy) -> None:
    proxy.inject(Fault.TRUNCATE)
    conn = _conn(proxy)
    conn.request("GET", "/acct/Tbl")
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Content-Length") == str(len(BODY))
    with pytest.raises(http.client.IncompleteRead) as info:
        response.read()
    assert info.value.partial == BODY[: len(BODY) // 2]


def test_truncate_of_an_empty_answer_cuts_the_status_line(proxy: FaultProxy, upstream: ThreadingHTTPServer) -> None:
    proxy.inject(Fault.TRUNCATE)
    with pytest.raises(http.client.BadStatusLine):
        _request(_conn(proxy), "DELETE", "/acct/empty")
    assert len(upstream.seen) == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("fault", [Fault.TRICKLE_HEADERS, Fault.ENDLESS_HEADERS])
def test_endless_head_comes_in_pieces_never_ends_and_stops_when_the_client_goes(
    proxy: FaultProxy, upstream: ThreadingHTTPServer, fault: Fault
) -> None:
    rule = proxy.inject(fault, pace=0.01)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(b"GET /acct/Tbl HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        while received.count(b"\r\n") < 4:  # the status line and three header lines
            piece = sock.recv(65536)
            assert piece, "the proxy closed the connection"
            received += piece
        assert received.startswith(b"HTTP/1.1 200 OK\r\nx-ms-trickle-1: ")
        assert b"\r\n\r\n" not in received  # no end of the header block
    assert rule.handled.wait(30)  # the proxy noticed the close and let the connection go
    (event,) = proxy.events
    assert event.action == fault.value and event.client_gave_up and not event.forwarded
    assert upstream.seen == []  # type: ignore[attr-defined]


def test_delay_before_forward_drops_the_request_when_the_client_gives_up(
    proxy: FaultProxy, upstream: ThreadingHTTPServer
) -> None:
    rule = proxy.inject(Fault.DELAY_BEFORE_FORWARD, delay=20.0)
    conn = _conn(proxy, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(socket.timeout):
        _request(conn, "POST", "/acct/Tbl", b"{}")
    conn.close()
    assert rule.handled.wait(30)  # the proxy may not even have read the request when we gave up
    event = proxy.events[0]
    assert time.monotonic() - started < 15.0  # the proxy noticed the close; it did not sit out 20 s
    assert event.client_gave_up and not event.forwarded
    assert upstream.seen == []  # type: ignore[attr-defined]


def test_delay_before_forward_shorter_than_the_client_timeout_just_delays(proxy: FaultProxy) -> None:
    proxy.inject(Fault.DELAY_BEFORE_FORWARD, delay=0.2)
    started = time.monotonic()
    response, data = _request(_conn(proxy), "GET", "/acct/Tbl")
    assert (response.status, data) == (200, BODY)
    assert time.monotonic() - started >= 0.2


def test_latency_delays_every_forwarded_request_and_overlaps_across_connections(
    upstream: ThreadingHTTPServer,
) -> None:
    with FaultProxy(f"http://127.0.0.1:{upstream.server_address[1]}/acct", latency=0.2) as proxy:
        started = time.monotonic()
        results: list[int] = []

        def call() -> None:
            response, _ = _request(_conn(proxy), "GET", "/acct/Tbl")
            results.append(response.status)

        workers = [threading.Thread(target=call) for _ in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=5)
        assert results == [200] * 4
        assert time.monotonic() - started >= 0.2
        assert len(upstream.seen) == 4  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        FaultProxy("http://127.0.0.1:1", latency=-1)


def test_delay_before_answer_forwards_then_drops_the_answer(proxy: FaultProxy, upstream: ThreadingHTTPServer) -> None:
    rule = proxy.inject(Fault.DELAY_BEFORE_ANSWER, delay=10.0)
    conn = _conn(proxy, timeout=0.3)
    with pytest.raises(socket.timeout):
        _request(conn, "POST", "/acct/Tbl", b"{}")
    conn.close()
    assert rule.handled.wait(30)
    event = proxy.events[0]
    assert event.forwarded and event.client_gave_up and event.upstream_status == 201
    assert event.client_status is None
    assert len(upstream.seen) == 1  # type: ignore[attr-defined]


def test_bounded_lifetime_and_arguments(upstream: ThreadingHTTPServer) -> None:
    proxy = FaultProxy(f"http://127.0.0.1:{upstream.server_address[1]}", lifetime=0.2).start()
    port = proxy.port
    assert proxy.wait_closed(30) and proxy.closed
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    proxy.close()  # idempotent
    with pytest.raises(ValueError):
        FaultProxy("https://example.invalid")
    with FaultProxy(f"http://127.0.0.1:{upstream.server_address[1]}", max_delay=1.0) as p:
        with pytest.raises(ValueError):
            p.inject(Fault.DELAY_BEFORE_ANSWER, delay=5.0)
        with pytest.raises(ValueError):
            p.inject(Fault.RESET, times=0)
    assert AMBIGUOUS_FAULTS == {Fault.DELAY_BEFORE_ANSWER, Fault.FORWARD_THEN_RESET, Fault.TRUNCATE}


def test_close_releases_a_pending_delay(upstream: ThreadingHTTPServer) -> None:
    proxy = FaultProxy(f"http://127.0.0.1:{upstream.server_address[1]}").start()
    rule = proxy.inject(Fault.DELAY_BEFORE_ANSWER, delay=20.0)
    conn = _conn(proxy, timeout=10)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            _request(conn, "GET", "/acct/Tbl")
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    assert rule.forwarded.wait(30)  # the answer is now held
    started = time.monotonic()
    proxy.close()
    worker.join(timeout=5)
    assert time.monotonic() - started < 5 and not worker.is_alive()
    assert errors and isinstance(errors[0], (http.client.HTTPException, OSError))


def test_replace_table_endpoint() -> None:
    base = "DefaultEndpointsProtocol=http;AccountName=a;AccountKey=k==;TableEndpoint=http://h:1/a;"
    assert replace_table_endpoint(base, "http://127.0.0.1:9/a") == (
        "DefaultEndpointsProtocol=http;AccountName=a;AccountKey=k==;TableEndpoint=http://127.0.0.1:9/a;"
    )
    assert replace_table_endpoint("AccountName=a;AccountKey=k==", "http://x/a").endswith(";TableEndpoint=http://x/a;")


# ------------------------------------------------------------------ decisions taken before sending (FaultSender)


def test_a_decided_attempt_meets_its_fault_whatever_arrives_first(
    proxy: FaultProxy, upstream: ThreadingHTTPServer
) -> None:
    proxy.inject(Fault.SERVER_BUSY, times=1, method="POST")
    busy = proxy.decide("POST", "/acct/Tbl")
    clean = proxy.decide("POST", "/acct/Tbl")
    assert (busy.fault, clean.fault, proxy.pending) == (Fault.SERVER_BUSY, None, 0)
    conn = _conn(proxy)
    response, _ = _request(conn, "POST", "/acct/Tbl", b"{}", {DECISION_HEADER: clean.id})
    assert response.status == 201  # arrived first, but was decided clean
    response, _ = _request(conn, "POST", "/acct/Tbl", b"{}", {DECISION_HEADER: busy.id})
    assert response.status == 503
    assert [e.action for e in proxy.events] == ["forward", "server_busy"]
    # The tag is the harness's own: neither forwarded nor recorded.
    _, _, headers, _ = upstream.seen[0]  # type: ignore[attr-defined]
    assert all(name.lower() != DECISION_HEADER.lower() for name, _ in headers)
    assert all(e.header(DECISION_HEADER) is None for e in proxy.events)


def test_events_wait_for_a_decided_attempt_still_on_its_way(proxy: FaultProxy) -> None:
    decision = proxy.decide("GET", "/acct/Tbl")
    go = threading.Event()

    def late_sender() -> None:
        go.wait(30)
        _request(_conn(proxy), "GET", "/acct/Tbl", headers={DECISION_HEADER: decision.id})

    worker = threading.Thread(target=late_sender)
    worker.start()
    go.set()
    assert [e.action for e in proxy.events] == ["forward"]  # not []: it waited for the attempt
    worker.join(timeout=30)
    withdrawn = proxy.decide("GET", "/acct/Tbl")
    proxy.withdraw(withdrawn)  # never sent: nothing to wait for
    assert proxy.wait_idle(timeout=0) and proxy.count() == 1


class _Recorder:
    """An inner sender that records what it was asked to send."""

    def __init__(self, error: SendError | None = None) -> None:
        self.sent: list[tuple[HttpRequest, object]] = []
        self.error = error
        self.closed = False
        self.pool_size = 7

    def send(self, request: HttpRequest, timeout: object) -> HttpResponse:
        self.sent.append((request, timeout))
        if self.error is not None:
            raise self.error
        return HttpResponse(200, CaseInsensitiveDict(), b"")

    def close(self) -> None:
        self.closed = True


class _AsyncRecorder(_Recorder):
    async def send(self, request: HttpRequest, timeout: object) -> HttpResponse:  # type: ignore[override]
        return _Recorder.send(self, request, timeout)

    async def close(self) -> None:  # type: ignore[override]
        self.closed = True


def test_fault_sender_cuts_the_read_timeout_of_held_attempts_only(proxy: FaultProxy) -> None:
    proxy.inject(Fault.DELAY_BEFORE_ANSWER, times=1, path=r"/Tbl$")
    inner = _Recorder()
    sender = FaultSender(inner, proxy, impatience=0.3)
    request = HttpRequest("POST", f"{proxy.endpoint}/Tbl", {"x-ms-client-request-id": "c"}, b"{}")
    sender.send(request, (10.0, 30.0))
    sender.send(request, (10.0, 30.0))
    sender.send(request, 5.0)
    assert [timeout for _, timeout in inner.sent] == [(10.0, 0.3), (10.0, 30.0), 5.0]
    assert all(sent.header(DECISION_HEADER) for sent, _ in inner.sent)
    assert request.header(DECISION_HEADER) is None  # the caller's request is untouched
    assert sender.pool_size == 7
    sender.close()
    assert inner.closed
    proxy.inject(Fault.DELAY_BEFORE_FORWARD, times=1)
    patient_inner = _Recorder()
    FaultSender(patient_inner, proxy, impatience=None).send(request, (10.0, 30.0))
    assert patient_inner.sent[0][1] == (10.0, 30.0)


def test_fault_sender_withdraws_an_attempt_that_was_never_sent(proxy: FaultProxy) -> None:
    refused = SendError("refused", state=AttemptState.NOT_SENT, refused=True)
    with pytest.raises(SendError):
        FaultSender(_Recorder(refused), proxy).send(HttpRequest("GET", f"{proxy.endpoint}/Tbl", {}, None), 1.0)
    assert proxy.wait_idle(timeout=0)  # nothing left to wait for
    lost = SendError("reset", state=AttemptState.UNKNOWN)
    with pytest.raises(SendError):
        FaultSender(_Recorder(lost), proxy).send(HttpRequest("GET", f"{proxy.endpoint}/Tbl", {}, None), 1.0)
    assert not proxy.wait_idle(timeout=0)  # it may still arrive: the proxy waits for it


def test_async_fault_sender_asks_the_proxy_too(proxy: FaultProxy) -> None:
    proxy.inject(Fault.DELAY_BEFORE_FORWARD, times=1)
    inner = _AsyncRecorder()
    sender = AsyncFaultSender(inner, proxy, impatience=0.2)
    request = HttpRequest("GET", f"{proxy.endpoint}/Tbl", {}, None)

    async def run() -> None:
        await sender.send(request, (1.0, 9.0))
        await sender.send(request, (1.0, 9.0))
        await sender.close()

    asyncio.run(run())
    assert [timeout for _, timeout in inner.sent] == [(1.0, 0.2), (1.0, 9.0)]
    assert inner.closed
