"""A response trickled a byte at a time ends at the deadline (issue 22.1), sync and async.

The fake server answers at once with headers and then one body byte every 20 ms, far
inside any per-read timeout, for longer than the test allows. Before the fix the sync
client waited for the whole body (43.9 s at 5 s of deadline).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from loopback import Connection, LoopbackServer
from tablesdk import NoRetry, RequestTimeoutError

BODY_BYTES = 3000  # at 20 ms a byte: a minute, if nothing stops it
# Bounds with room for a machine loaded many times over (the suite must not race the clock): the
# bug they catch waited for the whole body (43.9 s at a 5 s deadline), far past either
SLACK_OVER_5_S = 15
SLACK_OVER_1_S = 10
HEAD = (
    "HTTP/1.1 200 OK\r\nContent-Type: application/json;odata=minimalmetadata\r\n"
    f"Content-Length: {BODY_BYTES}\r\nx-ms-request-id: trickle\r\n\r\n"
).encode()


def trickle(connection: Connection) -> None:
    """Headers at once, then a body byte every 20 ms until the client gives up or the test ends."""
    if connection.read_request() is None or not connection.send(HEAD):
        return
    for _ in range(BODY_BYTES):
        if connection.server.stopping.wait(0.02):  # the pace of the trickle, not an ordering
            return
        if not connection.send(b" "):
            return  # the client gave up and closed: what the test wants


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(trickle) as trickling:
        yield trickling


def test_sync_deadline_bounds_a_trickled_body(server: LoopbackServer) -> None:
    client = server.account.create_cloud_table_client(operation_deadline=5)
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError):
        client.get_entity("Trickle", "p", "r")
    elapsed = time.monotonic() - started
    client.close()
    assert elapsed < SLACK_OVER_5_S, f"the call took {elapsed:.1f} s with operation_deadline=5"
    assert server.connections >= 1


def test_sync_read_timeout_bounds_a_trickled_body_without_a_deadline(server: LoopbackServer) -> None:
    client = server.account.create_cloud_table_client(timeout=(2.0, 1.0), retry_policy=NoRetry())
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError):
        client.get_entity("Trickle", "p", "r")
    elapsed = time.monotonic() - started
    client.close()
    assert elapsed < SLACK_OVER_1_S, f"a 1 s read timeout let the trickle run {elapsed:.1f} s"


def test_async_deadline_bounds_a_trickled_body(server: LoopbackServer) -> None:
    pytest.importorskip("aiohttp")
    from tablesdk.aio import AsyncCloudTableClient

    async def call() -> float:
        async with AsyncCloudTableClient(server.account, operation_deadline=5) as client:
            started = time.monotonic()
            with pytest.raises(RequestTimeoutError):
                await client.get_entity("Trickle", "p", "r")
            return time.monotonic() - started

    elapsed = asyncio.run(call())
    assert elapsed < SLACK_OVER_5_S, f"the async call took {elapsed:.1f} s with operation_deadline=5"
