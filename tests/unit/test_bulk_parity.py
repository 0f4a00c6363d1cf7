"""Inserts and deletes, sync and async: one engine, one set of fault cases, run on all four.

Every client talks to the same in-memory fake of the ``$batch`` endpoint and of a
key-only scan (tests/unit/bulk_fakes.py): the sync client through a MockSender on its
worker threads, the async client through an AsyncSender awaited on the loop. A case
runs as ``bulk_insert`` of its entities and as ``delete_entities`` of the same entities
stored first (numbered in key order, as the scan reads them), and expects the same
requests and outcomes from both drivers (the async driver once sent every batch to a
missing table; ``delete_entities`` once sent every batch to a table that refused them).
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from bulk_fakes import T, FakeBatchService
from fake_service import CONNECTION_STRING

from tablesdk import (
    AuthenticationError,
    CloudStorageAccount,
    DynamicEntity,
    LinearRetry,
    ResourceNotFoundError,
    TableServiceError,
    TableValidationError,
)
from tablesdk._bulk_loading._bulk import BulkResult
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender, Timeout

FAST = LinearRetry(3, 0)  # retries without sleeping


class HoldFirst:
    """Keeps the first request of a call from being answered until :meth:`release`, and
    records whether it was still the only request started by then."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.released_on_loop = asyncio.Event()
        self.started = 0
        self.alone_when_released: list[bool] = []

    def release(self) -> None:
        self.released.set()
        self.released_on_loop.set()  # called on the loop's thread by the async tests

    def sync_wait(self) -> None:
        self.started += 1
        if self.started == 1:
            self.alone_when_released.append(self.released.wait(timeout=10) and self.started == 1)

    async def async_wait(self) -> None:
        self.started += 1
        if self.started == 1:
            try:
                await asyncio.wait_for(self.released_on_loop.wait(), timeout=10)
            except TimeoutError:  # the call waits for this answer before reading on
                self.alone_when_released.append(False)
            else:
                self.alone_when_released.append(self.started == 1)


class FakeAsyncSender:
    """An AsyncSender handing every request to the fake, after one turn of the loop (so other
    tasks run while a request is out, as they would on a network)."""

    def __init__(self, handler: Callable[[HttpRequest], HttpResponse], hold: HoldFirst | None) -> None:
        self.handler = handler
        self.hold = hold

    async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        if self.hold is not None and request.method == "POST":
            await self.hold.async_wait()
        await asyncio.sleep(0)
        return self.handler(request)

    async def close(self) -> None:
        pass


Keys = tuple[str, str]


@dataclass(frozen=True)
class Bulk:
    """One engine face on one driver: ``insert`` writes ``data``, ``delete`` stores it and deletes it all."""

    operation: str  # "insert" or "delete"
    driver: str  # "sync" or "async"

    def __call__(
        self, service: FakeBatchService, data: Iterable[Any], workers: int = 8, hold: HoldFirst | None = None,
        **options: Any,
    ) -> BulkResult:
        if self.operation == "delete":
            service.put(list(data))
        if self.driver == "sync":
            return self._sync(service, data, workers, hold, options)
        return asyncio.run(self._async(service, data, workers, hold, options))

    def _sync(
        self, service: FakeBatchService, data: Iterable[Any], workers: int, hold: HoldFirst | None, options: dict[str, Any]
    ) -> BulkResult:
        def answer(request: HttpRequest) -> HttpResponse:
            if hold is not None and request.method == "POST":
                hold.sync_wait()
            return service.answer(request)

        account = CloudStorageAccount.parse(CONNECTION_STRING)
        with account.create_cloud_table_client(sender=MockSender(answer), retry_policy=FAST) as client:
            if self.operation == "delete":
                return client.delete_entities(T, max_workers=workers, **options)
            return client.bulk_insert(T, data, max_workers=workers, **options)

    async def _async(
        self, service: FakeBatchService, data: Iterable[Any], workers: int, hold: HoldFirst | None, options: dict[str, Any]
    ) -> BulkResult:
        account = CloudStorageAccount.parse(CONNECTION_STRING)
        sender = FakeAsyncSender(service.answer, hold)
        async with account.create_async_cloud_table_client(sender=sender, retry_policy=FAST) as client:  # type: ignore[arg-type]
            if self.operation == "delete":
                return await client.delete_entities(T, max_concurrency=workers, **options)
            return await client.bulk_insert(T, data, max_concurrency=workers, **options)

    def numbered(self, data: list[DynamicEntity]) -> list[DynamicEntity]:
        """``data`` in the order the call numbers it: the input's, or the scan's (by keys)."""
        return data if self.operation == "insert" else sorted(data, key=lambda e: (e.PartitionKey, e.RowKey))

    def done(self, service: FakeBatchService, data: list[DynamicEntity]) -> set[Keys]:
        """The keys of ``data`` the call wrote (insert) or removed (delete)."""
        keys = {(e.PartitionKey, e.RowKey) for e in data}
        return keys & service.keys() if self.operation == "insert" else keys - service.keys()

    def total(self, count: int) -> int | None:
        """The ``total`` progress is given: the input's length, or None for a scan."""
        return count if self.operation == "insert" else None


BULKS = [Bulk(operation, driver) for operation in ("insert", "delete") for driver in ("sync", "async")]


@pytest.fixture(params=BULKS, ids=[f"{b.operation}-{b.driver}" for b in BULKS])
def bulk(request: pytest.FixtureRequest) -> Bulk:
    runner: Bulk = request.param
    return runner


@pytest.fixture(params=[b for b in BULKS if b.operation == "insert"], ids=["sync", "async"])
def insert(request: pytest.FixtureRequest) -> Bulk:
    runner: Bulk = request.param
    return runner


@pytest.fixture(params=[b for b in BULKS if b.operation == "delete"], ids=["sync", "async"])
def delete(request: pytest.FixtureRequest) -> Bulk:
    runner: Bulk = request.param
    return runner


@pytest.fixture
def service() -> FakeBatchService:
    return FakeBatchService()


def entities(count: int, partitions: int = 1) -> list[DynamicEntity]:
    return [DynamicEntity(PartitionKey=f"p{i % partitions}", RowKey=f"r{i:05d}", N=i) for i in range(count)]


def check_bookkeeping(result: BulkResult, count: int) -> None:
    assert result.total == count
    assert sorted(o.index for o in result.succeeded + result.failed) == list(range(count))
    assert [o.index for o in result.succeeded] == sorted(o.index for o in result.succeeded)
    assert [o.index for o in result.failed] == sorted(o.index for o in result.failed)


def refuse(*row_keys: str, status: int = 400, code: str = "InvalidInput") -> dict[str, tuple[int, str, str]]:
    return {row_key: (status, code, "An error occurred while processing this request.") for row_key in row_keys}


# --------------------------------------------------------------------------- answers that end the call


def test_a_missing_table_gets_one_request(bulk: Bulk, service: FakeBatchService) -> None:
    service.missing_tables = {T}
    result = bulk(service, entities(5000, partitions=50))
    check_bookkeeping(result, 5000)
    assert len(service.sent) == 1 and result.batches == 1 and result.requests == 1
    assert len(result.failed) == 5000
    assert all(isinstance(o.error, ResourceNotFoundError) and o.error.error_code == "TableNotFound" for o in result.failed)


def test_a_refused_credential_gets_one_request(bulk: Bulk, service: FakeBatchService) -> None:
    service.busy = [(403, "outer")] * 50  # every batch would be refused
    result = bulk(service, entities(60, partitions=20))
    check_bookkeeping(result, 60)
    assert len(service.sent) == 1 and result.batches == 1
    assert len(result.failed) == 60 and all(isinstance(o.error, AuthenticationError) for o in result.failed)


def test_a_refused_credential_fails_a_single_batch(bulk: Bulk, service: FakeBatchService) -> None:
    service.busy = [(403, "outer")]
    result = bulk(service, entities(3))
    assert len(result.failed) == 3 and all(isinstance(o.error, AuthenticationError) for o in result.failed)
    assert len(service.sent) == 1


def test_nothing_else_is_sent_before_the_first_answer(bulk: Bulk, service: FakeBatchService) -> None:
    hold = HoldFirst()
    data = [DynamicEntity(PartitionKey=f"p{i // 100}", RowKey=f"r{i:05d}", N=i) for i in range(1000)]
    pulled = [0]

    def source() -> Iterator[DynamicEntity]:
        for entity in data:  # ten partitions one after another: a batch is planned every 100 entities
            pulled[0] += 1
            if pulled[0] == 500:  # read while the first batch is out: four more batches are planned
                hold.release()
            yield entity

    service.page_size = 100  # a delete plans a batch per page of its scan: release it at the fifth
    service.on_query = lambda number: hold.release() if number == 5 else None
    result = bulk(service, source() if bulk.operation == "insert" else data, hold=hold)
    assert hold.alone_when_released == [True]
    assert not result.failed and result.batches == len(service.sent) == 10


# --------------------------------------------------------------------------- refusals inside a batch


def test_the_refused_entity_is_isolated_and_the_rest_resent(bulk: Bulk, service: FakeBatchService) -> None:
    service.poison = refuse("r00042", status=409, code="EntityAlreadyExists")
    data = entities(100)
    result = bulk(service, data)
    check_bookkeeping(result, 100)
    [culprit] = result.failed
    assert culprit.index == 42 and culprit.entity.RowKey == "r00042"
    assert isinstance(culprit.error, TableServiceError) and culprit.error.error_code == "EntityAlreadyExists"
    assert [len(s.keys) for s in service.sent] == [100, 99]
    assert result.batches == 2 and result.requests == 2
    assert bulk.done(service, data) == {(e.PartitionKey, e.RowKey) for e in data} - {("p0", "r00042")}


def test_culprits_in_many_partitions_fail_in_input_order(bulk: Bulk, service: FakeBatchService) -> None:
    service.poison = refuse(*(f"r{i:05d}" for i in (7, 311, 1203, 1999)))
    data = entities(2000, partitions=9)
    random.Random(5).shuffle(data)
    result = bulk(service, data)
    check_bookkeeping(result, 2000)
    assert [o.entity.RowKey for o in result.failed] == [e.RowKey for e in bulk.numbered(data) if e.RowKey in service.poison]
    assert len(bulk.done(service, data)) == 1996
    assert result.batches == len(service.sent) == result.requests


def test_the_busy_batch_is_retried(bulk: Bulk, service: FakeBatchService) -> None:
    service.busy = [(503, "outer"), (503, "inner")]
    data = entities(100)
    result = bulk(service, data)
    assert not result.failed and len(bulk.done(service, data)) == 100
    assert result.requests == 3 and result.batches == 1


# --------------------------------------------------------------------------- what a delete's refusal means


def test_an_entity_already_gone_counts_as_deleted(delete: Bulk, service: FakeBatchService) -> None:
    service.poison = refuse("r00042", status=404, code="ResourceNotFound")
    result = delete(service, entities(100))
    check_bookkeeping(result, 100)
    assert not result.failed and [len(s.keys) for s in service.sent] == [100, 99]


@pytest.mark.parametrize("conditional", [False, True])
def test_a_delete_is_conditional_on_the_scanned_etag_only_when_asked(
    delete: Bulk, service: FakeBatchService, conditional: bool
) -> None:
    data = entities(10)
    scanned: list[str] = []
    service.on_query = lambda _: scanned.extend(service.etags[(T, e.PartitionKey, e.RowKey)] for e in data)
    result = delete(service, data, conditional=conditional)
    assert not result.failed and not service.keys()
    [sent] = service.sent
    assert [h["If-Match"] for h in sent.inner_headers] == (scanned if conditional else ["*"] * 10)


# --------------------------------------------------------------------------- input problems (inserts only)


def test_duplicates_fail_after_the_first(insert: Bulk, service: FakeBatchService) -> None:
    data = entities(5) + [DynamicEntity(PartitionKey="p0", RowKey="r00002", N=99), DynamicEntity(PartitionKey="p0", RowKey="r00002")]
    result = insert(service, data, mode="replace")
    check_bookkeeping(result, 7)
    assert [o.index for o in result.failed] == [5, 6]
    assert all(isinstance(o.error, TableValidationError) and o.error.field == "entity" for o in result.failed)
    assert service.entities[(T, "p0", "r00002")] == {"N": 2}
    assert len(service.sent) == 1


def test_invalid_entities_fail_without_a_request(insert: Bulk, service: FakeBatchService) -> None:
    data: list[Any] = [DynamicEntity(PartitionKey="x", RowKey="a?b"), object()]
    result = insert(service, data)
    check_bookkeeping(result, 2)
    assert len(result.failed) == 2 and not service.sent and result.batches == 0


# --------------------------------------------------------------------------- progress and results


def test_progress_counts_and_thread(bulk: Bulk, service: FakeBatchService) -> None:
    calls: list[tuple[int, int | None, int]] = []
    data = entities(1000, partitions=8)
    result = bulk(service, data, workers=4, progress=lambda done, total: calls.append((done, total, threading.get_ident())))
    check_bookkeeping(result, 1000)
    assert {thread for _, _, thread in calls} == {threading.get_ident()}
    assert {total for _, total, _ in calls} == {bulk.total(1000)}
    dones = [done for done, _, _ in calls]
    assert dones == sorted(dones) and dones[-1] == 1000
    assert len(calls) == result.batches == len(service.sent) == 16  # once per batch


def test_progress_counts_the_unsent_batches_of_a_missing_table(bulk: Bulk, service: FakeBatchService) -> None:
    service.missing_tables = {T}
    calls: list[int] = []
    result = bulk(service, entities(1000, partitions=10), progress=lambda done, total: calls.append(done))
    assert len(result.failed) == 1000 and len(service.sent) == 1
    assert calls == list(range(100, 1001, 100))  # the answered batch, then each batch failed unsent


def test_the_error_of_the_first_failure_is_raised(bulk: Bulk, service: FakeBatchService) -> None:
    service.poison = refuse("r00001", status=409, code="EntityAlreadyExists")
    result = bulk(service, entities(10, partitions=2))
    with pytest.raises(TableServiceError) as info:
        result.raise_on_error()
    assert info.value.error_code == "EntityAlreadyExists" and "1 of 10 entities failed" in str(info.value)
