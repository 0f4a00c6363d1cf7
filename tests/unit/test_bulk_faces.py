"""Every public bulk face: the same parameters, names, defaults and annotations in each flavour.

The faces are ``bulk_insert``, ``delete_entities``, ``write_arrow`` and ``write_pandas`` of the
client and of the table object, sync and async, ``tablesdk.aio.bulk_insert`` and
``tablesdk.dask.write_table``. The one documented difference between the flavours is the name
of the concurrency: ``max_workers`` threads (sync, Dask), ``max_concurrency`` tasks (asyncio);
async ``write_arrow``/``write_pandas`` keep their old ``max_workers`` as a deprecated alias.
Every face hands ``options=`` and ``retry_policy=`` to each request, and ``bulk_insert`` takes
a pandas DataFrame or a ``pyarrow.Table`` as the rows it writes.
"""

from __future__ import annotations

import asyncio
import inspect
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from bulk_fakes import T, FakeBatchService
from fake_service import CONNECTION_STRING
from test_bulk_parity import FakeAsyncSender

import tablesdk.aio
from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, LinearRetry, NoRetry, TableRequestOptions
from tablesdk._bulk_loading._bulk import BulkOptions, BulkResult
from tablesdk._unit_of_work._table import CloudTable
from tablesdk.aio import AsyncCloudTableClient
from tablesdk.aio._table import AsyncCloudTable
from tablesdk._pipeline._http import MockSender

FACES = ("bulk_insert", "delete_entities", "write_arrow", "write_pandas")
#: The parameters every bulk face takes, in the sync spelling.
SHARED = ("max_workers", "progress", "retry_policy", "options")
#: Async faces that still take the old spelling ``max_workers`` (keyword-only, None), deprecated.
DEPRECATED_ALIAS = frozenset({"write_arrow", "write_pandas"})

Described = list[tuple[str, Any, Any, Any]]


def described(function: Callable[..., Any], skip: int = 1) -> Described:
    """(name, kind, default, annotation) of each parameter after the first ``skip``."""
    parameters = list(inspect.signature(function).parameters.values())[skip:]
    return [(p.name, p.kind, p.default, p.annotation) for p in parameters]


def as_async(sync: Described) -> Described:
    return [("max_concurrency" if name == "max_workers" else name, kind, default, note)
            for name, kind, default, note in sync]


def without_alias(face: str, params: Described) -> Described:
    """The async face's parameters without its deprecated alias, which must be the documented one."""
    if face not in DEPRECATED_ALIAS:
        return params
    *rest, alias = params
    assert alias == ("max_workers", inspect.Parameter.KEYWORD_ONLY, None, "int | None"), face
    return rest


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(("sync_owner", "async_owner"), [(CloudTableClient, AsyncCloudTableClient),
                                                         (CloudTable, AsyncCloudTable)])
def test_the_async_face_takes_the_sync_parameters_with_its_concurrency_name(
    face: str, sync_owner: type, async_owner: type
) -> None:
    sync_face, async_face = getattr(sync_owner, face), getattr(async_owner, face)
    assert inspect.iscoroutinefunction(async_face)
    assert without_alias(face, described(async_face)) == as_async(described(sync_face))
    assert inspect.signature(async_face).return_annotation == inspect.signature(sync_face).return_annotation


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(("client", "table"), [(CloudTableClient, CloudTable), (AsyncCloudTableClient, AsyncCloudTable)])
def test_the_table_object_takes_the_client_parameters_but_the_table(face: str, client: type, table: type) -> None:
    assert described(getattr(table, face)) == described(getattr(client, face), skip=2)


@pytest.mark.parametrize("owner", [CloudTableClient, AsyncCloudTableClient])
def test_every_face_of_a_flavour_takes_the_shared_parameters_alike(owner: type) -> None:
    shared = SHARED if owner is CloudTableClient else ("max_concurrency",) + SHARED[1:]
    seen: dict[str, set[tuple[Any, Any]]] = {name: set() for name in shared + ("mode",)}
    for face in FACES:
        parameters = inspect.signature(getattr(owner, face)).parameters
        assert set(shared) <= set(parameters), face
        for name in seen:
            if name in parameters:
                seen[name].add((parameters[name].default, parameters[name].annotation))
    assert all(len(variants) == 1 for variants in seen.values()), seen
    assert seen[shared[0]] == {(8, "int")}


def test_the_module_level_async_bulk_insert_is_the_client_face() -> None:
    # its table argument has kept its first name, ``table``
    assert described(tablesdk.aio.bulk_insert)[0][0] == "table"
    assert described(tablesdk.aio.bulk_insert, 2) == described(AsyncCloudTableClient.bulk_insert, 2)


def test_the_dask_writer_takes_the_sync_bulk_parameters() -> None:
    pytest.importorskip("dask")
    from tablesdk.dask import write_table

    writer = {name: (default, note) for name, _kind, default, note in described(write_table, skip=0)}
    sync = {name: (default, note) for name, _kind, default, note in described(CloudTableClient.write_pandas)}
    # progress runs on the calling thread of one call; Dask writes its partitions elsewhere
    for name in ("mode", "max_workers", "retry_policy", "options"):
        assert writer[name] == sync[name], name
    assert "progress" not in writer


def test_the_parameters_travel_to_other_processes() -> None:
    bulk = BulkOptions.threads(3, None, LinearRetry(2, 0), TableRequestOptions(server_timeout=9))
    assert pickle.loads(pickle.dumps(bulk)).options == bulk.options


def test_bad_parameters_name_the_flavours_spelling() -> None:
    with pytest.raises(ValueError, match="max_workers"):
        BulkOptions.threads(0, None, None, None)
    with pytest.raises(ValueError, match="max_concurrency"):
        BulkOptions.tasks(0, None, None, None)
    with pytest.raises(TypeError, match="options"):
        BulkOptions.threads(1, None, None, {"timeout": 3})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- what each face sends

def frame_of(count: int) -> Any:
    pd = pytest.importorskip("pandas")
    return pd.DataFrame({"PartitionKey": ["p"] * count, "RowKey": [f"r{i:03d}" for i in range(count)], "N": range(count)})


def arrow_of(count: int) -> Any:
    pytest.importorskip("pyarrow")
    from tablesdk._columns._arrow_write import pandas_to_arrow

    return pandas_to_arrow(frame_of(count))


def rows(count: int) -> list[DynamicEntity]:
    return [DynamicEntity(PartitionKey="p", RowKey=f"r{i:03d}", N=i) for i in range(count)]


#: face -> (the data it is given, how it is called with the table object or the client and keywords)
CALLS: dict[str, tuple[Callable[[int], Any], Callable[[Any, Any, dict[str, Any]], Any]]] = {
    "bulk_insert": (rows, lambda owner, data, kw: owner.bulk_insert(*owner.args, data, **kw)),
    "bulk_insert of a DataFrame": (frame_of, lambda owner, data, kw: owner.bulk_insert(*owner.args, data, **kw)),
    "bulk_insert of an Arrow table": (arrow_of, lambda owner, data, kw: owner.bulk_insert(*owner.args, data, **kw)),
    "write_arrow": (arrow_of, lambda owner, data, kw: owner.write_arrow(*owner.args, data, **kw)),
    "write_pandas": (frame_of, lambda owner, data, kw: owner.write_pandas(*owner.args, data, **kw)),
    "delete_entities": (rows, lambda owner, data, kw: owner.delete_entities(*owner.args, **kw)),
}


class Owner:
    """A client or table object, and the arguments before the data (the table name for a client)."""

    def __init__(self, target: Any, args: tuple[str, ...]) -> None:
        self.target, self.args = target, args

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


def run_face(face: str, flavour: str, on: str, service: FakeBatchService, count: int, **keywords: Any) -> BulkResult:
    make, call = CALLS[face]
    data = make(count)
    if face == "delete_entities":
        service.put(rows(count))
    account = CloudStorageAccount.parse(CONNECTION_STRING)
    if flavour == "sync":
        with account.create_cloud_table_client(sender=MockSender(service.answer), retry_policy=NoRetry()) as client:
            owner = Owner(client.get_table_reference(T), ()) if on == "table" else Owner(client, (T,))
            result: BulkResult = call(owner, data, keywords)
            return result

    async def run() -> BulkResult:
        sender = FakeAsyncSender(service.answer, None)
        async with account.create_async_cloud_table_client(sender=sender, retry_policy=NoRetry()) as client:  # type: ignore[arg-type]
            owner = Owner(client.get_table_reference(T), ()) if on == "table" else Owner(client, (T,))
            result: BulkResult = await call(owner, data, keywords)
            return result

    return asyncio.run(run())


@pytest.mark.parametrize("on", ["client", "table"])
@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("face", sorted(CALLS))
def test_every_face_sends_each_request_with_its_options_and_retry_policy(face: str, flavour: str, on: str) -> None:
    service = FakeBatchService()
    service.busy = [(503, "outer")]  # the client does not retry; the call's retry_policy does
    result = run_face(face, flavour, on, service, 5, retry_policy=LinearRetry(2, 0),
                      options=TableRequestOptions(server_timeout=17))
    assert not result.failed and result.total == 5 and result.requests == 2
    assert all("timeout=17" in sent.url for sent in service.sent) and len(service.sent) == 2
    if face == "delete_entities":
        assert not service.keys()
    else:
        assert service.keys() == {("p", f"r{i:03d}") for i in range(5)}
        assert int(service.entities[(T, "p", "r003")]["N"]) == 3


@pytest.mark.parametrize("face", ["write_arrow", "write_pandas"])
@pytest.mark.parametrize("on", ["client", "table"])
def test_the_old_async_concurrency_name_works_with_a_deprecation_warning(face: str, on: str) -> None:
    service = FakeBatchService()
    with pytest.warns(DeprecationWarning, match="max_concurrency") as caught:
        result = run_face(face, "async", on, service, 3, max_workers=2)
    assert not result.failed and len(service.keys()) == 3
    # named at the caller's line (here, the CALLS lambda), past the faces and tracing wrappers: a
    # warning attributed to tablesdk itself is hidden by Python's default filters
    assert [warning.filename for warning in caught] == [__file__]
