"""The sync sender closes a pooled connection idle longer than ``keepalive`` before it reuses it.

A loopback HTTP/1.1 server records which connection (client port) each request arrived on. Told
to ``expire``, it plays a server whose idle limit has passed: a request that still arrives on one
of the connections it had then is dropped unanswered, as when the server closes the connection
while the request is on its way (the reset that costs a retried attempt). The sender's idle clock
is a fake the test moves, so nothing sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from requests.adapters import HTTPAdapter

from tablesdk import CloudStorageAccount, LinearRetry, OperationContext, RequestsSender
from tablesdk._pipeline._http import HttpRequest, SendError


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.arrivals: list[int] = []  # the client port of each request answered
        self.expired: set[int] = set()
        self.lock = threading.Lock()

    def expire(self) -> None:
        """Treat every connection seen so far as closed by the server's idle limit."""
        with self.lock:
            self.expired = set(self.arrivals)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/Tables"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    server: _Server

    def do_GET(self) -> None:
        port = self.client_address[1]
        with self.server.lock:
            if port in self.server.expired:
                self.close_connection = True  # no answer: the connection is gone
                return
            self.server.arrivals.append(port)
        if self.path.startswith("/devstoreaccount1/Tables("):  # Get Table: no such table
            body = b'{"odata.error":{"code":"ResourceNotFound","message":{"lang":"en-US","value":"none"}}}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json;odata=minimalmetadata;charset=utf-8")
        else:
            body = b"ok"
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _sender(clock: _Clock, **kwargs: float) -> RequestsSender:
    sender = RequestsSender(**kwargs)  # type: ignore[arg-type]
    sender._idle_limit.clock = clock
    return sender


def _get(sender: RequestsSender, server: _Server) -> None:
    response = sender.send(HttpRequest("GET", server.url), 5.0)
    assert (response.status, response.body) == (200, b"ok")


def test_a_connection_idle_past_keepalive_is_replaced_before_it_is_used(server: _Server) -> None:
    clock = _Clock()
    sender = _sender(clock)
    try:
        _get(sender, server)
        server.expire()  # the server has closed what was idle ...
        clock.now += 4.01  # ... and the sender's limit (4 s by default) has passed too
        _get(sender, server)  # a new connection: no reset, so no attempt to retry
    finally:
        sender.close()
    assert len(server.arrivals) == 2 and server.arrivals[0] != server.arrivals[1]


def test_a_connection_idle_below_keepalive_is_reused(server: _Server) -> None:
    clock = _Clock()
    sender = _sender(clock, keepalive=2.5)
    try:
        _get(sender, server)
        clock.now += 2.49
        _get(sender, server)
        clock.now += 2.49  # idle time counts from the last release, not from the first request
        _get(sender, server)
        clock.now += 2.51
        _get(sender, server)
    finally:
        sender.close()
    first, second, third, fourth = server.arrivals
    assert first == second == third != fourth


def test_without_the_limit_the_expired_connection_fails(server: _Server) -> None:
    """The harness sees the failure the limit prevents: reusing the expired connection fails."""
    clock = _Clock()
    sender = _sender(clock, keepalive=1e9)
    try:
        _get(sender, server)
        server.expire()
        clock.now += 4.01
        with pytest.raises(SendError):
            sender.send(HttpRequest("GET", server.url), 5.0)
    finally:
        sender.close()


def test_requests_through_session_request_close_idle_connections_too(server: _Server) -> None:
    clock = _Clock()
    sender = _sender(clock)
    sender.session.headers["x-ms-test"] = "1"  # the session was read: Session.request carries every request
    try:
        _get(sender, server)
        server.expire()
        clock.now += 4.01
        _get(sender, server)
    finally:
        sender.close()
    assert len(set(server.arrivals)) == 2


def test_an_adapter_the_user_mounts_is_used_as_it_is(server: _Server) -> None:
    clock = _Clock()
    sender = _sender(clock)
    sender.session.mount("http://", HTTPAdapter(max_retries=0))
    try:
        _get(sender, server)
        clock.now += 4.01
        _get(sender, server)  # the user's adapter keeps its connection (no limit of ours there)
    finally:
        sender.close()
    assert len(server.arrivals) == 2 and server.arrivals[0] == server.arrivals[1]


def test_a_client_after_an_idle_pause_needs_one_attempt(server: _Server) -> None:
    """Through the retry loop: the request after the pause is answered at its first attempt."""
    clock = _Clock()
    sender = _sender(clock)
    key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/devstoreaccount1"
    account = CloudStorageAccount.parse(
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={key};TableEndpoint={endpoint};"
    )
    client = account.create_cloud_table_client(sender=sender, retry_policy=LinearRetry(3, 0))
    try:
        assert client.table_exists("Nowhere") is False
        server.expire()
        clock.now += 4.01
        context = OperationContext()
        assert client.table_exists("Nowhere", operation_context=context) is False
    finally:
        client.close()
    assert len(context.attempts) == 1
    assert len(set(server.arrivals)) == 2


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "4"])
def test_keepalive_must_be_a_positive_number_of_seconds(bad: object) -> None:
    with pytest.raises(ValueError, match="keepalive"):
        RequestsSender(keepalive=bad)  # type: ignore[arg-type]


def test_a_pickled_sender_keeps_its_limit(server: _Server) -> None:
    import pickle

    copy = pickle.loads(pickle.dumps(RequestsSender(keepalive=2.5)))
    try:
        assert copy.keepalive == 2.5 and copy._adapter.idle is copy._idle_limit  # type: ignore[attr-defined]
        clock = _Clock()
        copy._idle_limit.clock = clock
        _get(copy, server)
        server.expire()
        clock.now += 2.51
        _get(copy, server)
    finally:
        copy.close()
    assert len(set(server.arrivals)) == 2


def test_keepalive_defaults_to_the_async_senders() -> None:
    import inspect

    from tablesdk.aio._sender import AiohttpSender

    default = inspect.signature(AiohttpSender).parameters["keepalive"].default
    sender = RequestsSender()
    try:
        assert sender.keepalive == default == 4.0
    finally:
        sender.close()
