"""A response trickled a byte at a time ends at the deadline (issue 22.1), sync and async.

The fake server answers at once with headers and then one body byte every 20 ms, far
inside any per-read timeout, for longer than the test allows. Before the fix the sync
client waited for the whole body (43.9 s at 5 s of deadline).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tablesdk import CloudStorageAccount, NoRetry, RequestTimeoutError
from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY

BODY_BYTES = 3000  # at 20 ms a byte: a minute, if nothing stops it
HEAD = (
    "HTTP/1.1 200 OK\r\nContent-Type: application/json;odata=minimalmetadata\r\n"
    f"Content-Length: {BODY_BYTES}\r\nx-ms-request-id: trickle\r\n\r\n"
).encode()


class TricklingServer:
    """Answers every request on loopback with headers at once, then a body byte every 20 ms."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stopped = threading.Event()
        self.connections = 0
        self._threads: list[threading.Thread] = []
        self._open: list[socket.socket] = []
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self._open.append(conn)
            handler = threading.Thread(target=self._trickle, args=(conn,), daemon=True)
            handler.start()
            self._threads.append(handler)

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                data = conn.recv(65536)
                if not data:
                    return
                request += data
            try:
                conn.sendall(HEAD)
                for _ in range(BODY_BYTES):
                    if self.stopped.wait(0.02):  # the pace of the trickle, not an ordering
                        return
                    conn.sendall(b" ")
            except OSError:
                return  # the client gave up and closed: what the test wants

    def close(self) -> None:
        self.stopped.set()
        for sock in [self.listener, *self._open]:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept or recv
            except OSError:
                pass
        self.listener.close()
        for thread in self._threads:
            thread.join(timeout=10)


@pytest.fixture
def server() -> Iterator[TricklingServer]:
    trickling = TricklingServer()
    yield trickling
    trickling.close()


def _connection_string(port: int) -> str:
    return (f"DefaultEndpointsProtocol=http;AccountName={DEVSTORE_ACCOUNT};AccountKey={DEVSTORE_KEY};"
            f"TableEndpoint=http://127.0.0.1:{port}/{DEVSTORE_ACCOUNT}")


def test_sync_deadline_bounds_a_trickled_body(server: TricklingServer) -> None:
    account = CloudStorageAccount.parse(_connection_string(server.port))
    client = account.create_cloud_table_client(operation_deadline=5)
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError):
        client.get_entity("Trickle", "p", "r")
    elapsed = time.monotonic() - started
    client.close()
    assert elapsed < 6, f"the call took {elapsed:.1f} s with operation_deadline=5"
    assert server.connections >= 1


def test_sync_read_timeout_bounds_a_trickled_body_without_a_deadline(server: TricklingServer) -> None:
    account = CloudStorageAccount.parse(_connection_string(server.port))
    client = account.create_cloud_table_client(timeout=(2.0, 1.0), retry_policy=NoRetry())
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError):
        client.get_entity("Trickle", "p", "r")
    elapsed = time.monotonic() - started
    client.close()
    assert elapsed < 4, f"a 1 s read timeout let the trickle run {elapsed:.1f} s"


def test_async_deadline_bounds_a_trickled_body(server: TricklingServer) -> None:
    pytest.importorskip("aiohttp")
    from tablesdk.aio import AsyncCloudTableClient

    async def call() -> float:
        account = CloudStorageAccount.parse(_connection_string(server.port))
        async with AsyncCloudTableClient(account, operation_deadline=5) as client:
            started = time.monotonic()
            with pytest.raises(RequestTimeoutError):
                await client.get_entity("Trickle", "p", "r")
            return time.monotonic() - started

    elapsed = asyncio.run(call())
    assert elapsed < 6, f"the async call took {elapsed:.1f} s with operation_deadline=5"
