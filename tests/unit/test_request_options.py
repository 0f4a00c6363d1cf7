"""TableRequestOptions override the client's defaults for one call only: sync and async, client,
table object, queries, contexts and bulk_insert."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from tablesdk import (
    CloudStorageAccount,
    CloudTableClient,
    DynamicEntity,
    LinearRetry,
    NoRetry,
    RetryPolicy,
    ServerBusyError,
    SharedKeyCredential,
    TableOperation,
    TableRequestOptions,
    TableServiceError,
)
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender, Timeout
from tablesdk.aio import AsyncCloudTableClient

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
PRIMARY = "https://acct.table.core.windows.net"
PRIMARY_HOST = "acct.table.core.windows.net"
SECONDARY_HOST = "acct-secondary.table.core.windows.net"
JSON = {"Content-Type": "application/json;odata=minimalmetadata"}
ENTITY = '{"PartitionKey":"p","RowKey":"r","Beat":1}'
BUSY = '{"odata.error":{"code":"ServerBusy","message":{"value":"busy"}}}'

CLIENT_TIMEOUT = 7.0


class CountingRetry:
    """Retries ``times`` times without waiting, counting how often it was asked."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.asked = 0

    def retry_after(self, attempt: int, error: TableServiceError) -> float | None:
        self.asked += 1
        return 0.0 if attempt <= self.times else None


def answer(request: HttpRequest) -> HttpResponse:
    """A service that answers every request: writes with an ETag, reads with one entity."""
    if request.method == "GET" and "/Tables" in request.url:
        return MockSender.response(200, '{"value":[{"TableName":"t1"}]}', JSON)
    if request.method == "GET" and "()" in request.url:
        return MockSender.response(200, '{"value":[' + ENTITY + "]}", JSON)
    if request.method == "GET":
        return MockSender.response(200, ENTITY, {**JSON, "ETag": 'W/"1"'})
    return MockSender.response(204, headers={"ETag": 'W/"1"'})


def busy(request: HttpRequest) -> HttpResponse:
    return MockSender.response(503, BUSY, JSON)


def account() -> CloudStorageAccount:
    return CloudStorageAccount("acct", PRIMARY, SharedKeyCredential("acct", KEY))


def sync_client(handler: Callable[[HttpRequest], HttpResponse] = answer) -> tuple[CloudTableClient, MockSender]:
    sender = MockSender(handler)
    client = account().create_cloud_table_client(sender=sender, timeout=CLIENT_TIMEOUT, retry_policy=NoRetry())
    return client, sender


def entity() -> DynamicEntity:
    return DynamicEntity(PartitionKey="p", RowKey="r", Beat=1)


def host(request: HttpRequest) -> str:
    return request.url.split("/")[2]


# ---------------------------------------------------------------- the options themselves


def test_the_options_are_checked_when_built_and_frozen() -> None:
    with pytest.raises(ValueError, match="server_timeout"):
        TableRequestOptions(server_timeout=0)
    with pytest.raises(ValueError, match="timeout"):
        TableRequestOptions(timeout=-1)
    with pytest.raises(ValueError, match="deadline"):
        TableRequestOptions(deadline=0)
    with pytest.raises(ValueError, match="location_mode"):
        TableRequestOptions(location_mode="nearest")
    with pytest.raises(TypeError, match="retry_after"):
        TableRequestOptions(retry_policy=3)  # type: ignore[arg-type]
    options = TableRequestOptions(timeout=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.timeout = 4  # type: ignore[misc]


def test_an_operation_refuses_options_of_another_type() -> None:
    client, sender = sync_client()
    with pytest.raises(TypeError, match="TableRequestOptions"):
        client.insert_entity("tbl", entity(), options={"timeout": 3})  # type: ignore[arg-type]
    assert sender.requests == []


# ---------------------------------------------------------------- each option, one call only


SYNC_CALLS: dict[str, Callable[[CloudTableClient, TableRequestOptions | None], object]] = {
    "client.insert_entity": lambda c, o: c.insert_entity("tbl", entity(), options=o),
    "client.get_entity": lambda c, o: c.get_entity("tbl", "p", "r", options=o),
    "client.table_exists": lambda c, o: c.table_exists("tbl", options=o),
    "client.list_tables": lambda c, o: list(c.list_tables(options=o)),
    "client.create_query": lambda c, o: list(c.create_query("tbl", options=o).where("Beat eq 1")),
    "query.with_options": lambda c, o: list(c.create_query("tbl").where("Beat eq 1").with_options(o)),
    "table.upsert_entity": lambda c, o: c.get_table_reference("tbl").upsert_entity(entity(), options=o),
    "table.get_entity": lambda c, o: c.get_table_reference("tbl").get_entity("p", "r", options=o),
    "table.create_query": lambda c, o: c.get_table_reference("tbl").create_query(options=o).where("Beat gt 0").first(),
    "context.get": lambda c, o: c.get_table_service_context().get("tbl", "p", "r", request_options=o),
    "table_context.get": lambda c, o: c.get_table_reference("tbl").get_table_service_context().get(
        "p", "r", request_options=o),
}


@pytest.mark.parametrize("call", list(SYNC_CALLS))
def test_client_timeout_and_server_timeout_for_one_call(call: str) -> None:
    client, sender = sync_client()
    run = SYNC_CALLS[call]
    run(client, TableRequestOptions(timeout=(2, 3), server_timeout=11))
    overridden = len(sender.requests)
    run(client, None)
    assert overridden >= 1
    assert sender.timeouts[:overridden] == [(2, 3)] * overridden
    assert all("timeout=11" in r.url for r in sender.requests[:overridden])
    assert sender.timeouts[overridden:] == [CLIENT_TIMEOUT] * (len(sender.requests) - overridden)
    assert not any("timeout=" in r.url for r in sender.requests[overridden:])


@pytest.mark.parametrize("call", list(SYNC_CALLS))
def test_the_deadline_caps_each_attempt_for_one_call(call: str) -> None:
    client, sender = sync_client()
    run = SYNC_CALLS[call]
    run(client, TableRequestOptions(deadline=0.5))
    overridden = len(sender.requests)
    run(client, None)
    assert all(t <= 0.5 for t in sender.timeouts[:overridden])  # type: ignore[operator]
    assert sender.timeouts[overridden:] == [CLIENT_TIMEOUT] * (len(sender.requests) - overridden)


@pytest.mark.parametrize("call", [name for name in SYNC_CALLS if "get" in name or "query" in name or "list" in name])
def test_the_location_mode_for_one_read(call: str) -> None:
    client, sender = sync_client()
    run = SYNC_CALLS[call]
    run(client, TableRequestOptions(location_mode="secondary_only"))
    overridden = len(sender.requests)
    run(client, None)
    assert [host(r) for r in sender.requests[:overridden]] == [SECONDARY_HOST] * overridden
    assert [host(r) for r in sender.requests[overridden:]] == [PRIMARY_HOST] * (len(sender.requests) - overridden)


def test_a_write_goes_to_the_primary_whatever_the_location_mode() -> None:
    client, sender = sync_client()
    client.insert_entity("tbl", entity(), options=TableRequestOptions(location_mode="secondary_only"))
    assert host(sender.requests[0]) == PRIMARY_HOST


SYNC_RETRIED: dict[str, Callable[[CloudTableClient, TableRequestOptions | None], object]] = {
    "client.insert_entity": SYNC_CALLS["client.insert_entity"],
    "client.get_entity": SYNC_CALLS["client.get_entity"],
    "query.with_options": SYNC_CALLS["query.with_options"],
    "table.upsert_entity": SYNC_CALLS["table.upsert_entity"],
    "client.execute_batch": lambda c, o: c.execute_batch([_delete_operation()], options=o),
    "table.execute": lambda c, o: c.get_table_reference("tbl").execute(
        TableOperation.insert_or_merge(entity()), options=o),
}


def _delete_operation() -> Any:
    from tablesdk._formats._batch import BatchOperation, BatchOperationKind

    return BatchOperation(BatchOperationKind.DELETE, "tbl", "p", "r", None, "*")


@pytest.mark.parametrize("call", list(SYNC_RETRIED))
def test_the_retry_policy_for_one_call(call: str) -> None:
    client, sender = sync_client(busy)
    run = SYNC_RETRIED[call]
    policy = CountingRetry(2)
    with pytest.raises(ServerBusyError):
        run(client, TableRequestOptions(retry_policy=policy))
    assert len(sender.requests) == 3 and policy.asked == 3
    with pytest.raises(ServerBusyError):
        run(client, None)  # the client's NoRetry again
    assert len(sender.requests) == 4 and policy.asked == 3


def test_an_explicit_retry_policy_wins_over_the_options() -> None:
    client, sender = sync_client(busy)
    mine, theirs = CountingRetry(1), CountingRetry(3)
    with pytest.raises(ServerBusyError):
        client.execute_batch([_delete_operation()], retry_policy=mine, options=TableRequestOptions(retry_policy=theirs))
    assert (len(sender.requests), mine.asked, theirs.asked) == (2, 2, 0)


def test_the_options_do_not_change_the_client() -> None:
    client, _ = sync_client()
    client.insert_entity("tbl", entity(), options=TableRequestOptions(
        timeout=1, server_timeout=2, deadline=3, retry_policy=LinearRetry(1, 0), location_mode="secondary_only"))
    settings = client._settings
    assert (settings.timeout, settings.server_timeout, client.operation_deadline, client.location_mode) == (
        CLIENT_TIMEOUT, None, None, "primary_only")
    assert isinstance(client.retry_policy, NoRetry)


# ---------------------------------------------------------------- saves and bulk loading


def test_save_changes_takes_request_options_and_keeps_its_own_default_of_no_retry() -> None:
    client, sender = sync_client(busy)
    context = client.get_table_service_context()
    context.add_object("tbl", entity())
    policy = CountingRetry(2)
    with pytest.raises(Exception):
        context.save_changes(request_options=TableRequestOptions(retry_policy=policy, timeout=4))
    assert len(sender.requests) == 3 and sender.timeouts == [4, 4, 4]
    with pytest.raises(Exception):
        context.save_changes()
    assert len(sender.requests) == 4 and sender.timeouts[3] == CLIENT_TIMEOUT


def test_save_changes_with_retries_prefers_its_retry_policy_argument() -> None:
    client, sender = sync_client(busy)
    context = client.get_table_reference("tbl").get_table_service_context()
    context.add_object(entity())
    mine, theirs = CountingRetry(1), CountingRetry(3)
    with pytest.raises(Exception):
        context.context.save_changes_with_retries(retry_policy=mine, request_options=TableRequestOptions(
            retry_policy=theirs, server_timeout=9))
    assert (len(sender.requests), mine.asked, theirs.asked) == (2, 2, 0)
    assert all("timeout=9" in r.url for r in sender.requests)


@pytest.mark.parametrize("via_table", [False, True])
def test_bulk_insert_sends_every_batch_with_the_options(via_table: bool) -> None:
    client, sender = sync_client(busy)
    policy = CountingRetry(1)
    options = TableRequestOptions(retry_policy=policy, timeout=5, server_timeout=8)
    if via_table:
        result = client.get_table_reference("tbl").bulk_insert([entity()], options=options)
    else:
        result = client.bulk_insert("tbl", [entity()], options=options)
    assert len(result.failed) == 1 and isinstance(result.failed[0].error, ServerBusyError)
    assert len(sender.requests) == 2 and policy.asked == 2
    assert sender.timeouts == [5, 5] and all("timeout=8" in r.url for r in sender.requests)
    client.bulk_insert("tbl", [entity()])
    assert len(sender.requests) == 3 and sender.timeouts[2] == CLIENT_TIMEOUT


# ---------------------------------------------------------------- asyncio


class RecordingSender:
    """An AsyncSender answering with a sync handler, recording requests and timeouts."""

    def __init__(self, handler: Callable[[HttpRequest], HttpResponse]) -> None:
        self.handler = handler
        self.requests: list[HttpRequest] = []
        self.timeouts: list[Timeout] = []

    async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        self.requests.append(request)
        self.timeouts.append(timeout)
        return self.handler(request)

    async def close(self) -> None:
        pass


def async_client(handler: Callable[[HttpRequest], HttpResponse] = answer) -> tuple[AsyncCloudTableClient, RecordingSender]:
    sender = RecordingSender(handler)
    client = account().create_async_cloud_table_client(sender=sender, timeout=CLIENT_TIMEOUT, retry_policy=NoRetry())
    return client, sender


async def _collect(query: Any) -> list[Any]:
    return [item async for item in query]


ASYNC_CALLS: dict[str, Callable[[AsyncCloudTableClient, TableRequestOptions | None], Any]] = {
    "client.insert_entity": lambda c, o: c.insert_entity("tbl", entity(), options=o),
    "client.get_entity": lambda c, o: c.get_entity("tbl", "p", "r", options=o),
    "client.create_query": lambda c, o: _collect(c.create_query("tbl", options=o).where("Beat eq 1")),
    "query.with_options": lambda c, o: _collect(c.create_query("tbl").where("Beat eq 1").with_options(o)),
    "table.upsert_entity": lambda c, o: c.get_table_reference("tbl").upsert_entity(entity(), options=o),
    "table.get_entity": lambda c, o: c.get_table_reference("tbl").get_entity("p", "r", options=o),
    "context.get": lambda c, o: c.get_table_service_context().get("tbl", "p", "r", request_options=o),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("call", list(ASYNC_CALLS))
async def test_async_options_for_one_call(call: str) -> None:
    client, sender = async_client()
    run = ASYNC_CALLS[call]
    await run(client, TableRequestOptions(timeout=(2, 3), server_timeout=11))
    overridden = len(sender.requests)
    await run(client, None)
    assert overridden >= 1
    assert sender.timeouts[:overridden] == [(2, 3)] * overridden
    assert all("timeout=11" in r.url for r in sender.requests[:overridden])
    assert sender.timeouts[overridden:] == [CLIENT_TIMEOUT] * (len(sender.requests) - overridden)
    if "insert" not in call and "upsert" not in call:
        await run(client, TableRequestOptions(location_mode="secondary_only", deadline=0.5))
        assert host(sender.requests[-1]) == SECONDARY_HOST and sender.timeouts[-1] <= 0.5  # type: ignore[operator]


@pytest.mark.asyncio
@pytest.mark.parametrize("call", ["client.insert_entity", "client.get_entity", "table.upsert_entity", "query.with_options"])
async def test_async_retry_policy_for_one_call(call: str) -> None:
    client, sender = async_client(busy)
    run = ASYNC_CALLS[call]
    policy: RetryPolicy = CountingRetry(2)
    with pytest.raises(ServerBusyError):
        await run(client, TableRequestOptions(retry_policy=policy))
    assert len(sender.requests) == 3
    with pytest.raises(ServerBusyError):
        await run(client, None)
    assert len(sender.requests) == 4


@pytest.mark.asyncio
async def test_async_save_changes_and_bulk_insert_take_the_options() -> None:
    client, sender = async_client(busy)
    context = client.get_table_service_context()
    context.add_object("tbl", entity())
    with pytest.raises(Exception):
        await context.save_changes(request_options=TableRequestOptions(retry_policy=CountingRetry(1), timeout=4))
    assert sender.timeouts == [4, 4]
    result = await client.get_table_reference("tbl").bulk_insert(
        [entity()], options=TableRequestOptions(retry_policy=CountingRetry(2), server_timeout=8))
    assert len(result.failed) == 1 and len(sender.requests) == 5
    assert all("timeout=8" in r.url for r in sender.requests[2:])


def test_a_query_under_a_per_call_location_mode_pins_its_continuation_to_where_it_was_read() -> None:
    def paged(request: HttpRequest) -> HttpResponse:
        return MockSender.response(200, '{"value":[' + ENTITY + "]}", {
            **JSON, "x-ms-continuation-NextPartitionKey": "p", "x-ms-continuation-NextRowKey": "s"})

    client, sender = sync_client(paged)
    query = client.create_query("tbl").where("Beat eq 1")
    assert query.execute_segmented().continuation_token.target_location is None  # type: ignore[union-attr]
    token = query.with_options(TableRequestOptions(location_mode="secondary_only")).execute_segmented()
    assert token.continuation_token is not None and token.continuation_token.target_location == "secondary"
    mode = TableRequestOptions(location_mode="primary_then_secondary")
    first = query.with_options(mode).execute_segmented()
    assert first.continuation_token is not None and first.continuation_token.target_location == "primary"
