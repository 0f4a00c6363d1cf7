"""The async client and context over an in-memory AsyncSender: awaitable operations (their faces
are compared with the sync ones in test_sync_async_parity.py), retries through the shared loop,
and cancellation of a save."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable

import pytest

from tablesdk import (
    CloudStorageAccount,
    DynamicEntity,
    EntityStates,
    LinearRetry,
    NoRetry,
    OperationContext,
    TableServiceContext,
)
from tablesdk.aio import AsyncCloudTableClient, AsyncSender, AsyncTableServiceContext
from tablesdk._pipeline._http import AttemptState, HttpRequest, HttpResponse, MockSender, SendError, Timeout

pytestmark = pytest.mark.asyncio

CONN = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    "TableEndpoint=http://127.0.0.1:1/devstoreaccount1;"
)


class MemorySender:
    """An AsyncSender answering with ``handler(request)`` (which may await), recording requests."""

    def __init__(self, handler: Callable[[HttpRequest], Awaitable[HttpResponse]]) -> None:
        self.handler = handler
        self.requests: list[HttpRequest] = []
        self.closed = False

    async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        self.requests.append(request)
        return await self.handler(request)

    async def close(self) -> None:
        self.closed = True


def client_with(sender: MemorySender, **options: object) -> AsyncCloudTableClient:
    return CloudStorageAccount.parse(CONN).create_async_cloud_table_client(sender=sender, **options)  # type: ignore[arg-type]


def public(cls: type) -> dict[str, object]:
    return {name: getattr(cls, name) for name in dir(cls) if not name.startswith("_")}


async def test_client_operations_are_awaitable_and_the_builders_are_not() -> None:
    # Names, parameters, defaults and annotations against the sync client: test_sync_async_parity.py.
    for name, async_op in public(AsyncCloudTableClient).items():
        if not inspect.isfunction(async_op):
            continue
        if name in ("create_query", "get_table_service_context", "get_table_reference", "decode_query_segment"):
            assert not inspect.iscoroutinefunction(async_op), name  # builders (and decoding, CPU only) stay synchronous
        else:
            assert inspect.iscoroutinefunction(async_op) or inspect.isasyncgenfunction(async_op), name
    assert inspect.iscoroutinefunction(AsyncCloudTableClient.close)


async def test_the_contexts_share_recording_and_differ_in_sending() -> None:
    for name in ("__init__", "add_object", "attach_to", "upsert_object", "update_object", "delete_object", "detach",
                 "get_entity_descriptor", "_materialize", "_f_save"):
        assert getattr(AsyncTableServiceContext, name) is getattr(TableServiceContext, name), name
    for name in ("save_changes", "save_changes_with_retries", "get", "execute_query_segment", "execute_batch"):
        assert inspect.iscoroutinefunction(getattr(AsyncTableServiceContext, name)), name
    assert isinstance(MemorySender(lambda r: asyncio.sleep(0, MockSender.response(204))), AsyncSender)


async def test_an_operation_retries_through_the_shared_loop() -> None:
    answers = [MockSender.response(503, '{"odata.error":{"code":"ServerBusy","message":{"value":"busy"}}}',
                                   {"Content-Type": "application/json", "x-ms-error-code": "ServerBusy"}),
               MockSender.response(204, "", {"ETag": 'W/"1"'})]

    async def handler(request: HttpRequest) -> HttpResponse:
        return answers.pop(0)

    sender = MemorySender(handler)
    op = OperationContext()
    async with client_with(sender, retry_policy=LinearRetry(1, 0)) as client:
        etag = await client.insert_entity("tbl", DynamicEntity(PartitionKey="p", RowKey="r", A=1), operation_context=op)
    assert etag == 'W/"1"' and sender.closed
    assert [a.status for a in op.attempts] == [503, 204]
    assert [r.url for r in sender.requests] == ["http://127.0.0.1:1/devstoreaccount1/tbl"] * 2
    first, second = sender.requests
    assert first.header("x-ms-client-request-id") == second.header("x-ms-client-request-id")
    assert all((r.header("Authorization") or "").startswith("SharedKey devstoreaccount1:") for r in sender.requests)
    assert json.loads(first.body or b"{}")["A"] == 1


async def test_keys_the_path_cannot_carry_go_through_a_filter_query() -> None:
    async def handler(request: HttpRequest) -> HttpResponse:
        return MockSender.response(200, '{"value":[{"PartitionKey":"p","RowKey":"100%","A":1}]}',
                                   {"Content-Type": "application/json"})

    sender = MemorySender(handler)
    async with client_with(sender) as client:
        entity = await client.get_entity("tbl", "p", "100%")
    assert entity["A"] == 1
    assert "$filter=" in sender.requests[0].url and "tbl()" in sender.requests[0].url


async def test_a_refused_connection_is_recorded_as_never_sent() -> None:
    async def handler(request: HttpRequest) -> HttpResponse:
        raise SendError("ConnectionRefusedError: refused", state=AttemptState.NOT_SENT, refused=True)

    op = OperationContext()
    async with client_with(MemorySender(handler), retry_policy=NoRetry()) as client:
        with pytest.raises(Exception) as info:
            await client.table_exists("tbl", operation_context=op)
    assert type(info.value).__name__ == "ConnectionFailedError"
    assert [a.state for a in op.attempts] == [AttemptState.NOT_SENT]


async def test_a_cancelled_save_applies_only_what_succeeded() -> None:
    held = asyncio.Event()

    async def handler(request: HttpRequest) -> HttpResponse:
        if json.loads(request.body or b"{}").get("RowKey") == "b":
            held.set()
            await asyncio.sleep(60)  # the answer never comes: the save is cancelled meanwhile
        return MockSender.response(204, "", {"ETag": 'W/"x"'})

    sender = MemorySender(handler)
    async with client_with(sender) as client:
        ctx = client.get_table_service_context()
        rows = [DynamicEntity(PartitionKey="p", RowKey=rk) for rk in ("a", "b", "c")]
        for row in rows:
            ctx.add_object("tbl", row)
        saving = asyncio.ensure_future(ctx.save_changes())
        await held.wait()
        saving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await saving
        states = [ctx.get_entity_descriptor(row).state for row in rows]  # type: ignore[union-attr]
        assert states == [EntityStates.UNCHANGED, EntityStates.ADDED, EntityStates.ADDED]
        assert rows[0].etag == 'W/"x"' and rows[1].etag is None
        # The context is free again; the next save sends exactly the two pending changes.
        sender.handler = lambda request: asyncio.sleep(0, MockSender.response(204, "", {"ETag": 'W/"y"'}))
        sent_before = len(sender.requests)
        outcome = await ctx.save_changes()
        assert len(outcome) == 2 and len(sender.requests) == sent_before + 2
        assert all(ctx.get_entity_descriptor(row).state is EntityStates.UNCHANGED for row in rows)  # type: ignore[union-attr]
