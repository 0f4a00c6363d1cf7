"""The integration flows for ``tablesdk.aio`` against every target (Azurite JSON, the bundled
emulator in JSON and Atom): tables, entities of every EDM type, special keys, queries with
paging, batches, bulk loading, the context's flows, errors and concurrency.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import pytest_asyncio

from tablesdk import (
    AccessPolicy,
    BatchError,
    BatchOperation,
    BatchOperationKind,
    CloudStorageAccount,
    ConflictError,
    ContinuationToken,
    DataServiceRequestError,
    DynamicEntity,
    EdmType,
    EmptyResultError,
    EntityProperty,
    EntityStates,
    Int64,
    MergeOption,
    Metrics,
    OperationContext,
    PreconditionFailedError,
    ResourceNotFoundError,
    SaveChangesOptions,
    TableEntity,
    TableValidationError,
    prop,
)
from tablesdk.aio import AsyncCloudTableClient, AsyncTableQuery, AsyncTableServiceContext
from tablesdk._entities._edm import parse_datetime
from tablesdk._entities._entity import entity_to_payload

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

K = BatchOperationKind
BASE = datetime(2020, 1, 1, tzinfo=timezone.utc)


class Reading(TableEntity):
    Seq: Int64
    Value: float
    At: datetime
    Sensor: uuid.UUID
    Raw: bytes
    Small: int


class Movie(TableEntity):
    ReleaseYear: int
    Rating: float


@pytest_asyncio.fixture
async def aclient(target: str, connection_string: str) -> AsyncIterator[AsyncCloudTableClient]:
    payload_format = target.rsplit("-", 1)[1]
    account = CloudStorageAccount.parse(connection_string)
    async with account.create_async_cloud_table_client(payload_format=payload_format) as client:
        yield client


@pytest_asyncio.fixture
async def atable(aclient: AsyncCloudTableClient, unique_table_name: str) -> AsyncIterator[str]:
    await aclient.create_table(unique_table_name)
    yield unique_table_name
    await aclient.delete_table_if_exists(unique_table_name)


def reading(p: int, i: int, per_partition: int) -> Reading:
    n = p * per_partition + i
    return Reading(
        PartitionKey=f"p{p:02d}", RowKey=f"{i:05d}", Seq=n, Value=n / 4, At=BASE + timedelta(minutes=n),
        Sensor=uuid.UUID(int=n), Raw=n.to_bytes(4, "big"), Small=n % 7,
    )


def op(kind: BatchOperationKind, table: str, row_key: str, etag: str | None = None, **props: Any) -> BatchOperation:
    payload = None if kind is K.DELETE else entity_to_payload(DynamicEntity(PartitionKey="B", RowKey=row_key, **props))
    return BatchOperation(kind, table, "B", row_key, payload, etag)


# ------------------------------------------------------------------ tables


async def test_table_lifecycle(aclient: AsyncCloudTableClient, unique_table_name: str) -> None:
    name = unique_table_name
    assert await aclient.table_exists(name) is False
    assert await aclient.create_table_if_not_exists(name) is True
    assert await aclient.create_table_if_not_exists(name) is False
    with pytest.raises(ConflictError) as info:
        await aclient.create_table(name)
    assert info.value.error_code == "TableAlreadyExists" and info.value.request_id
    assert await aclient.table_exists(name) is True
    assert name in [n async for n in aclient.list_tables(prefix=name[:6])]
    assert await aclient.delete_table_if_exists(name) is True
    assert await aclient.delete_table_if_exists(name) is False
    with pytest.raises(ResourceNotFoundError):
        await aclient.delete_table(name)
    with pytest.raises(TableValidationError, match="table"):
        await aclient.create_table("a_b")


async def test_list_tables_follows_continuation(aclient: AsyncCloudTableClient, unique_table_name: str) -> None:
    names = [f"{unique_table_name[:40]}x{i}" for i in range(7)]
    await asyncio.gather(*(aclient.create_table(name) for name in names))
    try:
        listed = [n async for n in aclient.list_tables(prefix=unique_table_name[:40], page_size=3)]
        assert sorted(listed) == sorted(names)
    finally:
        await asyncio.gather(*(aclient.delete_table_if_exists(name) for name in names))


# ------------------------------------------------------------------ entities


async def test_every_edm_type_round_trips(aclient: AsyncCloudTableClient, atable: str) -> None:
    guid = uuid.uuid4()
    when = parse_datetime("2024-01-02T03:04:05.1234567Z")
    entity = DynamicEntity(
        PartitionKey="p", RowKey="types",
        Text="é中😀 'quoted' <xml>", Int=-(2**31), Big=EntityProperty(2**62 + 1, EdmType.INT64),
        Small64=EntityProperty(5, EdmType.INT64), Whole=2.0, NaN=math.nan, Inf=math.inf,
        Flag=True, When=when, Early=datetime(1601, 1, 1, tzinfo=timezone.utc), Id=guid,
        Blob=bytes(range(256)), Empty="", NoBytes=b"",
    )
    etag = await aclient.insert_entity(atable, entity)
    assert etag and entity.etag == etag
    back = await aclient.get_entity(atable, "p", "types")
    assert back.etag == etag
    assert back["Text"] == "é中😀 'quoted' <xml>" and back["Int"] == -(2**31)
    assert back["Big"] == 2**62 + 1 and back.edm_type("Big") is EdmType.INT64
    assert back["Small64"] == 5 and back.edm_type("Small64") is EdmType.INT64
    assert back["Whole"] == 2.0 and back.edm_type("Whole") is EdmType.DOUBLE
    assert math.isnan(back["NaN"]) and back["Inf"] == math.inf
    assert back["Flag"] is True and back["Id"] == guid and back["Blob"] == bytes(range(256))
    assert back["When"] == when and back["When"].ticks_remainder == 7
    assert back["Early"] == datetime(1601, 1, 1, tzinfo=timezone.utc)
    assert back["Empty"] == "" and back["NoBytes"] == b""
    assert back.Timestamp is not None and back.Timestamp.tzinfo is not None


async def test_conditional_writes(aclient: AsyncCloudTableClient, atable: str) -> None:
    entity = DynamicEntity(PartitionKey="p", RowKey="r", N=1)
    first = await aclient.insert_entity(atable, entity)
    with pytest.raises(ConflictError) as info:
        await aclient.insert_entity(atable, DynamicEntity(PartitionKey="p", RowKey="r"))
    assert info.value.error_code == "EntityAlreadyExists"
    entity["N"] = 2
    second = await aclient.update_entity(atable, entity)
    assert second != first
    entity.etag = first
    with pytest.raises(PreconditionFailedError):
        await aclient.update_entity(atable, entity, mode="replace")
    await aclient.update_entity(atable, entity, etag="*", mode="replace")
    await aclient.upsert_entity(atable, DynamicEntity(PartitionKey="p", RowKey="r", M=3))
    assert dict(await aclient.get_entity(atable, "p", "r")) == {"N": 2, "M": 3}
    await aclient.delete_entity(atable, partition_key="p", row_key="r", etag="*")
    with pytest.raises(ResourceNotFoundError):
        await aclient.get_entity(atable, "p", "r")


@pytest.mark.parametrize("key", ["o'neil", "100%", "a b", "a+b", "é中😀", "", "k" * 300])
async def test_special_keys_work_for_every_operation(aclient: AsyncCloudTableClient, atable: str, key: str) -> None:
    entity = DynamicEntity(PartitionKey=key, RowKey=key, V=1)
    await aclient.insert_entity(atable, entity)
    assert (await aclient.get_entity(atable, key, key))["V"] == 1
    entity["V"] = 2
    await aclient.update_entity(atable, entity)
    await aclient.upsert_entity(atable, DynamicEntity(PartitionKey=key, RowKey=key, W=3), mode="replace")
    assert dict(await aclient.get_entity(atable, key, key)) == {"W": 3}
    await aclient.delete_entity(atable, partition_key=key, row_key=key, etag="*")
    with pytest.raises(ResourceNotFoundError):
        await aclient.get_entity(atable, key, key)


# ------------------------------------------------------------------ queries


async def test_queries_page_lazily_completely_and_in_order(aclient: AsyncCloudTableClient, atable: str) -> None:
    per_partition = 120
    result = await aclient.bulk_insert(atable, [reading(p, i, per_partition) for p in range(3) for i in range(per_partition)])
    assert not result.failed
    query = aclient.create_query(atable, Reading).page_size(50)
    assert isinstance(query, AsyncTableQuery)
    seen = [(r.PartitionKey, r.RowKey) async for r in query]
    assert seen == sorted(seen) and len(seen) == 360 and len(set(seen)) == 360
    first = [r async for r in query.take(75)]
    assert len(first) == 75 and first[-1].RowKey == "00074"
    # execute_segmented: one request per page; the token survives its text form.
    segment = await query.execute_segmented()
    assert len(segment.results) == 50 and segment.continuation_token is not None
    token = ContinuationToken.from_string(segment.continuation_token.to_string())
    following = await query.execute_segmented(token)
    assert following.results[0].RowKey == "00050"
    assert isinstance(following.results[0].Seq, int) and following.results[0].Sensor == uuid.UUID(int=50)


async def test_typed_filters_select_and_point_queries(aclient: AsyncCloudTableClient, atable: str) -> None:
    await aclient.bulk_insert(atable, [reading(0, i, 40) for i in range(40)])
    q = aclient.create_query(atable, Reading)
    hits = [r.Seq async for r in q.where((Reading.Small == 3) & (Reading.At >= BASE + timedelta(minutes=10)))]
    assert hits == [n for n in range(10, 40) if n % 7 == 3]
    projected = await q.where(Reading.Seq == 5).select("Value").first()
    assert projected.Value == 1.25 and projected.RowKey == "00005" and projected.Small is None
    point = await q.where((prop("PartitionKey") == "p00") & (prop("RowKey") == "00007")).first_or_default()
    assert point is not None and point.Seq == 7
    with pytest.raises(EmptyResultError):
        await q.where(Reading.Seq > 1000).first()
    missing = q.where((prop("PartitionKey") == "p00") & (prop("RowKey") == "nope"))
    assert await missing.first_or_default() is None
    with pytest.raises(TypeError, match="async"):
        iter(missing.description).__next__()


# ------------------------------------------------------------------ batches and bulk


async def test_mixed_batch_and_atomic_rollback(aclient: AsyncCloudTableClient, atable: str) -> None:
    etag = await aclient.insert_entity(atable, DynamicEntity(PartitionKey="B", RowKey="upd", V=1))
    await aclient.insert_entity(atable, DynamicEntity(PartitionKey="B", RowKey="del", V=1))
    await aclient.insert_entity(atable, DynamicEntity(PartitionKey="B", RowKey="mrg", V=1))
    ops = [op(K.INSERT, atable, f"i{i:02d}", V=i) for i in range(95)] + [
        op(K.UPDATE, atable, "upd", etag, V=2), op(K.DELETE, atable, "del", "*"),
        op(K.INSERT_OR_MERGE, atable, "m", V=3), op(K.INSERT_OR_REPLACE, atable, "r", V=4),
        op(K.MERGE, atable, "mrg", "*", W=5),
    ]
    results = await aclient.execute_batch(ops)
    assert len(results) == 100 and all(r.status < 300 for r in results)
    assert dict(await aclient.get_entity(atable, "B", "upd")) == {"V": 2}
    assert dict(await aclient.get_entity(atable, "B", "mrg")) == {"V": 1, "W": 5}
    with pytest.raises(ResourceNotFoundError):
        await aclient.get_entity(atable, "B", "del")
    with pytest.raises(BatchError) as info:
        await aclient.execute_batch([op(K.INSERT, atable, "new1"), op(K.INSERT, atable, "i00"), op(K.INSERT, atable, "new2")])
    assert info.value.failed_index == 1 and info.value.status_code == 409
    assert [e async for e in aclient.create_query(atable).where(prop("RowKey").startswith("new"))] == []
    with pytest.raises(TableValidationError):
        await aclient.execute_batch([op(K.INSERT, atable, f"x{i}") for i in range(101)])


async def test_bulk_insert_isolates_existing_entities_and_runs_concurrently(
    aclient: AsyncCloudTableClient, atable: str
) -> None:
    await aclient.insert_entity(atable, DynamicEntity(PartitionKey="p3", RowKey="00010"))
    entities = [DynamicEntity(PartitionKey=f"p{i % 20}", RowKey=f"{i // 20:05d}", N=i) for i in range(2000)]
    entities.append(DynamicEntity(PartitionKey="bad", RowKey="x", Bad=object()))
    calls: list[tuple[int, int | None]] = []
    result = await aclient.bulk_insert(atable, entities, max_concurrency=6, progress=lambda d, t: calls.append((d, t)))
    assert result.total == 2001 and len(result.succeeded) == 1999
    failed = {(o.entity.PartitionKey, o.entity.RowKey): o.error for o in result.failed}
    assert isinstance(failed["p3", "00010"], ConflictError)
    assert isinstance(failed["bad", "x"], (TypeError, ValueError))
    assert all(o.entity.etag for o in result.succeeded)
    assert calls[-1] == (2001, 2001)
    count = len([e async for e in aclient.create_query(atable)])
    assert count == 2000
    merged = await aclient.bulk_insert(atable, [DynamicEntity(PartitionKey="p0", RowKey="00000", M=1)], mode="merge")
    assert not merged.failed
    assert dict(await aclient.get_entity(atable, "p0", "00000")) == {"N": 0, "M": 1}


# ------------------------------------------------------------------ the context


async def test_context_saves_each_batch_and_tracks(aclient: AsyncCloudTableClient, atable: str) -> None:
    ctx = aclient.get_table_service_context()
    assert isinstance(ctx, AsyncTableServiceContext)
    movies = [Movie(PartitionKey="Action", RowKey=f"m{i}", ReleaseYear=2000 + i, Rating=4.0) for i in range(3)]
    for movie in movies:
        ctx.add_object(atable, movie)
    outcome = await ctx.save_changes(SaveChangesOptions.BATCH)
    assert outcome.is_batch and all(r.succeeded for r in outcome)
    assert all(ctx.get_entity_descriptor(m).state is EntityStates.UNCHANGED and m.etag for m in movies)
    movies[0].Rating = 5.0
    ctx.update_object(movies[0])
    ctx.delete_object(movies[1])
    await ctx.save_changes()
    assert ctx.get_entity_descriptor(movies[1]) is None
    fresh = aclient.get_table_service_context()
    got = await fresh.get(atable, "Action", "m0", Movie)
    assert got is not None and got.Rating == 5.0
    assert [m.RowKey async for m in fresh.create_query(atable, Movie)] == ["m0", "m2"]
    assert await fresh.get(atable, "Action", "m0", Movie) is got  # identity: one object per entity


async def test_failed_change_stays_pending_and_concurrency_recovery(aclient: AsyncCloudTableClient, atable: str) -> None:
    await aclient.insert_entity(atable, Movie(PartitionKey="Action", RowKey="dup", ReleaseYear=1, Rating=1.0))
    ctx = aclient.get_table_service_context()
    ctx.add_object(atable, Movie(PartitionKey="Action", RowKey="dup", ReleaseYear=1, Rating=1.0))
    ctx.add_object(atable, Movie(PartitionKey="Action", RowKey="next", ReleaseYear=1, Rating=1.0))
    with pytest.raises(DataServiceRequestError) as info:
        await ctx.save_changes_with_retries()
    assert info.value.error_code == "EntityAlreadyExists"
    assert [r.sent for r in info.value.response] == [True, False]
    assert all(d.state is EntityStates.ADDED for d in ctx.entities)
    # Optimistic concurrency: another writer changes the entity; PRESERVE_CHANGES recovers.
    ctx = aclient.get_table_service_context()
    mine = await ctx.get(atable, "Action", "dup", Movie)
    assert mine is not None
    await aclient.update_entity(atable, DynamicEntity(PartitionKey="Action", RowKey="dup", ReleaseYear=2), etag="*")
    mine.Rating = 9.0
    ctx.update_object(mine)
    with pytest.raises(DataServiceRequestError) as stale:
        await ctx.save_changes()
    assert isinstance(stale.value.response[0].error, PreconditionFailedError)
    assert ctx.get_entity_descriptor(mine).state is EntityStates.MODIFIED
    ctx.merge_option = MergeOption.PRESERVE_CHANGES
    refreshed = await ctx.get(atable, "Action", "dup", Movie)
    assert refreshed is mine and mine.ReleaseYear == 2 and mine.Rating == 9.0
    await ctx.save_changes()
    assert (await aclient.get_entity(atable, "Action", "dup", Movie)).Rating == 9.0


async def test_point_query_in_a_batch_and_missing_entities(aclient: AsyncCloudTableClient, atable: str) -> None:
    await aclient.insert_entity(atable, DynamicEntity(PartitionKey="p", RowKey="100%", V=1))
    ctx = aclient.get_table_service_context()
    query = ctx.create_query(atable).where((prop("PartitionKey") == "p") & (prop("RowKey") == "100%"))
    found = await ctx.execute_batch(query)
    assert len(found) == 1 and found[0]["V"] == 1
    missing = ctx.create_query(atable).where((prop("PartitionKey") == "p") & (prop("RowKey") == "none"))
    with pytest.raises(ResourceNotFoundError):
        await ctx.execute_batch(missing)
    with pytest.raises(ResourceNotFoundError):
        await ctx.get(atable, "p", "none")
    ctx.ignore_resource_not_found = True
    with pytest.warns(DeprecationWarning, match="get_or_none"):
        assert await ctx.get(atable, "p", "none") is None
    assert await ctx.execute_batch(missing) == []


async def test_a_context_refuses_a_second_task_while_saving(aclient: AsyncCloudTableClient, atable: str) -> None:
    ctx = aclient.get_table_service_context()
    for i in range(20):
        ctx.add_object(atable, DynamicEntity(PartitionKey="p", RowKey=f"{i:03d}"))
    saving = asyncio.ensure_future(ctx.save_changes())
    await asyncio.sleep(0)  # the save is now waiting for its first answer
    with pytest.raises(RuntimeError, match="task"):
        await ctx.get(atable, "p", "000")
    await saving
    assert all(d.state is EntityStates.UNCHANGED for d in ctx.entities)


async def test_many_concurrent_operations_share_one_client(aclient: AsyncCloudTableClient, atable: str) -> None:
    rows = [DynamicEntity(PartitionKey=f"p{i % 5}", RowKey=f"{i:03d}", N=i) for i in range(150)]
    etags = await asyncio.gather(*(aclient.insert_entity(atable, row) for row in rows))
    assert all(etags) and len(set(etags)) >= 1
    back = await asyncio.gather(*(aclient.get_entity(atable, row.PartitionKey, row.RowKey) for row in rows))
    assert [b["N"] for b in back] == list(range(150))


# ------------------------------------------------------------------ service level


async def test_table_acl_and_service_properties(aclient: AsyncCloudTableClient, atable: str) -> None:
    now = datetime.now(timezone.utc)
    assert await aclient.get_table_acl(atable) == {}
    await aclient.set_table_acl(atable, {"readers": AccessPolicy("r", now, now + timedelta(hours=1))})
    got = await aclient.get_table_acl(atable)
    assert list(got) == ["readers"] and got["readers"].permission == "r"
    await aclient.set_table_acl(atable, {})
    assert await aclient.get_table_acl(atable) == {}
    before = await aclient.get_service_properties()
    try:
        changed = await aclient.get_service_properties()
        changed.hour_metrics = Metrics(enabled=True, include_apis=True, retention_days=7)
        await aclient.set_service_properties(changed)
        assert (await aclient.get_service_properties()).hour_metrics == changed.hour_metrics
    finally:
        await aclient.set_service_properties(before)


async def test_segmented_table_listing_resumes(aclient: AsyncCloudTableClient, unique_table_name: str) -> None:
    names = [f"{unique_table_name[:40]}s{i}" for i in range(5)]
    await asyncio.gather(*(aclient.create_table(name) for name in names))
    try:
        first = await aclient.list_tables_segmented(prefix=unique_table_name[:40], max_results=2)
        assert len(first.results) == 2 and first.continuation_token is not None
        token = ContinuationToken.from_string(first.continuation_token.to_string())
        rest = [n async for n in aclient.list_tables(prefix=unique_table_name[:40], filter=prop("TableName") > first.results[-1])]
        second = await aclient.list_tables_segmented(token, prefix=unique_table_name[:40], max_results=10)
        assert first.results + second.results == sorted(names) and rest == second.results
    finally:
        await asyncio.gather(*(aclient.delete_table_if_exists(name) for name in names))


async def test_stats_and_secondary_reads_on_the_emulator(devstore: Any, devstore_account: CloudStorageAccount) -> None:
    async with devstore_account.create_async_cloud_table_client() as writer:
        assert (await writer.get_service_stats()).geo_replication_status == "live"
        await writer.create_table_if_not_exists("asyncgeo")
        await writer.upsert_entity("asyncgeo", DynamicEntity(PartitionKey="p", RowKey="r", A=7))
    context = OperationContext()
    async with devstore_account.create_async_cloud_table_client(location_mode="secondary_only") as reader:
        assert (await reader.get_entity("asyncgeo", "p", "r", operation_context=context))["A"] == 7
        assert context.attempts[0].url.startswith(devstore.secondary_url + "/")


async def test_async_client_and_context_take_models_and_dicts(aclient: AsyncCloudTableClient, atable: str) -> None:
    import dataclasses

    @dataclasses.dataclass
    class Note:
        PartitionKey: str
        RowKey: str
        Text: str
        etag: str | None = None

    note = Note("p", "1", "hello")
    await aclient.insert_entity(atable, note)
    assert note.etag
    await aclient.insert_entity(atable, {"PartitionKey": "p", "RowKey": "2", "Text": "dict"})
    assert (await aclient.get_entity(atable, "p", "2", Note)).Text == "dict"
    ctx = aclient.get_table_service_context()
    found = [n async for n in ctx.create_query(atable, Note)]
    assert [n.Text for n in found] == ["hello", "dict"]
    found[0].Text = "changed"
    ctx.update_object(found[0])
    await ctx.save_changes()
    assert (await aclient.get_entity(atable, "p", "1", Note)).Text == "changed"
