"""Answers no HTTP server should give raise the same named error from both clients (issue 22.3)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest

from tablesdk import CloudStorageAccount, ConnectionFailedError, NoRetry
from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY

TWO_LENGTHS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}"
)


class CannedServer:
    """Answers each connection on loopback with the same raw bytes, then closes it."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                request = b""
                while b"\r\n\r\n" not in request:
                    data = conn.recv(65536)
                    if not data:
                        break
                    request += data
                try:
                    conn.sendall(self.answer)
                except OSError:
                    pass

    @property
    def account(self) -> CloudStorageAccount:
        return CloudStorageAccount.parse(
            f"DefaultEndpointsProtocol=http;AccountName={DEVSTORE_ACCOUNT};AccountKey={DEVSTORE_KEY};"
            f"TableEndpoint=http://127.0.0.1:{self.port}/{DEVSTORE_ACCOUNT}"
        )

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self.thread.join(timeout=10)


@pytest.fixture
def two_lengths() -> Iterator[CannedServer]:
    server = CannedServer(TWO_LENGTHS)
    yield server
    server.close()


def test_sync_two_content_lengths_is_a_connection_failure(two_lengths: CannedServer) -> None:
    client = two_lengths.account.create_cloud_table_client(retry_policy=NoRetry())
    with pytest.raises(ConnectionFailedError, match="Content-Length"):
        client.get_entity("T", "p", "r")
    client.close()


def test_async_two_content_lengths_is_a_connection_failure(two_lengths: CannedServer) -> None:
    pytest.importorskip("aiohttp")
    from tablesdk.aio import AsyncCloudTableClient

    async def call() -> None:
        async with AsyncCloudTableClient(two_lengths.account, retry_policy=NoRetry()) as client:
            with pytest.raises(ConnectionFailedError):
                await client.get_entity("T", "p", "r")

    asyncio.run(call())


def test_an_invalid_request_header_is_still_the_callers_error() -> None:
    # The distinction above must not turn the caller's own mistakes into network failures.
    from tablesdk import HttpRequest, RequestsSender, SendError

    sender = RequestsSender()
    with pytest.raises(SendError) as raised:
        sender.send(HttpRequest("GET", "http://127.0.0.1:9/x", {"X-Bad": "a\nb"}, b""), 1.0)
    sender.close()
    assert raised.value.invalid
