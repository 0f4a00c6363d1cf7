"""Answers no HTTP server should give raise the same named error from both clients (issue 22.3)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from loopback import LoopbackServer, answer
from tablesdk import ConnectionFailedError, NoRetry

TWO_LENGTHS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}"
)


@pytest.fixture
def two_lengths() -> Iterator[LoopbackServer]:
    with LoopbackServer(answer(TWO_LENGTHS)) as server:
        yield server


def test_sync_two_content_lengths_is_a_connection_failure(two_lengths: LoopbackServer) -> None:
    client = two_lengths.account.create_cloud_table_client(retry_policy=NoRetry())
    with pytest.raises(ConnectionFailedError, match="Content-Length"):
        client.get_entity("T", "p", "r")
    client.close()


def test_async_two_content_lengths_is_a_connection_failure(two_lengths: LoopbackServer) -> None:
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
