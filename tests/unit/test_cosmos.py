"""Cosmos DB's Table API: its endpoints recognised, and its documented differences from Azure
Storage followed, sync and async.

No Cosmos DB account is reachable from the test machine, so every answer here is written from
Microsoft's documentation (the API for Table FAQ, "Where is API for Table not identical with
Azure Table storage behavior?"; the API for Table query tutorial; the Table service REST
reference, whose JSON shapes the API for Table shares) and from exchanges recorded in public
issue threads (a 429 with ``x-ms-retry-after-ms``). Every request goes through the sender seam
(:class:`~tablesdk.MockSender`): no host name is resolved (``no_name_resolution`` makes sure).
"""

from __future__ import annotations

import asyncio
import json
import socket
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tablesdk import (
    BatchOperation,
    EdmType,
    BatchOperationKind,
    CloudStorageAccount,
    CosmosRetry,
    CosmosTimestampFilterWarning,
    EntityProperty,
    ExponentialRetry,
    MockSender,
    NoRetry,
    RequestTimeoutError,
    ResourceNotFoundError,
    ServerBusyError,
    ServiceProperties,
    TableValidationError,
    prop,
)
from tablesdk._core._cosmos import (
    COSMOS_EMULATOR_KEY,
    COSMOS_MAX_BATCH_BYTES,
    filter_names_timestamp,
    is_cosmos_endpoint,
)
from tablesdk._pipeline._http import HttpRequest, HttpResponse, Timeout

KEY = "a2V5"  # base64 of "key": signing works, nothing is secret
COSMOS = f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={KEY};TableEndpoint=https://acct.table.cosmos.azure.com:443/"
STORAGE = f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={KEY}"
JSON = {"Content-Type": "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"}


@pytest.fixture(autouse=True)
def no_name_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Cosmos DB host name must never be resolved: any lookup fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a host name was resolved: {args[:1]!r}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "gethostbyname", refuse)


# ------------------------------------------------------------------ a recorded Cosmos DB


def error_body(code: str, message: str) -> str:
    """The JSON error body the API for Table answers (the Table service's odata.error shape)."""
    return json.dumps({"odata.error": {"code": code, "message": {"lang": "en-us", "value": message}}})


def ok(request: HttpRequest) -> HttpResponse:
    """What the API for Table answers a write (204, ETag) or a read (an empty page)."""
    if request.method == "GET":
        return MockSender.response(200, json.dumps({"value": []}), JSON)
    return MockSender.response(204, b"", {"ETag": 'W/"datetime\'2024-01-02T03%3A04%3A05.0000000Z\'"'})


def cosmos(handler: Callable[[HttpRequest], HttpResponse] = ok, **kwargs: Any) -> tuple[Any, MockSender]:
    sender = MockSender(handler)
    return CloudStorageAccount.parse(COSMOS).create_cloud_table_client(sender=sender, **kwargs), sender


class AsyncMock:
    """The async sender seam over a MockSender."""

    def __init__(self, inner: MockSender) -> None:
        self.inner = inner

    async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        return self.inner.send(request, timeout)

    async def close(self) -> None:
        pass


def run_async(connection_string: str, body: Callable[[Any], Any], handler: Callable[[HttpRequest], HttpResponse] = ok,
              **kwargs: Any) -> tuple[Any, MockSender]:
    inner = MockSender(handler)

    async def main() -> Any:
        account = CloudStorageAccount.parse(connection_string)
        async with account.create_async_cloud_table_client(sender=AsyncMock(inner), **kwargs) as client:
            return await body(client)

    return asyncio.run(main()), inner


# ------------------------------------------------------------------ recognising the endpoints


@pytest.mark.parametrize(
    ("endpoint", "key", "expected"),
    [
        ("https://acct.table.cosmos.azure.com:443", None, True),
        ("https://acct.table.cosmos.azure.com", None, True),
        ("https://ACCT.Table.Cosmos.Azure.com/", None, True),
        ("https://acct.table.cosmosdb.azure.com", None, True),  # the FAQ's connection string
        ("https://localhost:8081", None, True),  # the Cosmos DB emulator
        ("https://127.0.0.1:8081/", None, True),
        ("http://127.0.0.1:8902", COSMOS_EMULATOR_KEY, True),  # its well-known key, any port
        ("https://acct.table.core.windows.net", None, False),
        ("http://127.0.0.1:10002/devstoreaccount1", None, False),  # Azurite
        ("https://acct.table.cosmos.azure.com.example.net", None, False),  # a look-alike host
        ("https://cosmos.azure.com", None, False),
        ("https://localhost:8080", None, False),
    ],
)
def test_cosmos_endpoints_are_recognised_from_their_text(endpoint: str, key: str | None, expected: bool) -> None:
    assert is_cosmos_endpoint(endpoint, key) is expected


@pytest.mark.parametrize(
    "connection_string",
    [
        COSMOS,
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={KEY};TableEndpoint=https://acct.table.cosmosdb.azure.com",
        f"AccountName=localhost;AccountKey={COSMOS_EMULATOR_KEY};TableEndpoint=http://localhost:8902/",
        f"AccountName=localhost;AccountKey={KEY};TableEndpoint=https://localhost:8081/",
    ],
)
def test_connection_strings_of_cosmos_accounts(connection_string: str) -> None:
    assert CloudStorageAccount.parse(connection_string).is_cosmos


def test_storage_accounts_are_not_cosmos() -> None:
    assert not CloudStorageAccount.parse(STORAGE).is_cosmos
    assert not CloudStorageAccount.development_storage_account().is_cosmos
    assert not CloudStorageAccount.parse(STORAGE).create_cloud_table_client(sender=MockSender(ok)).is_cosmos


def test_an_explicit_switch_for_custom_domains() -> None:
    custom = f"AccountName=acct;AccountKey={KEY};TableEndpoint=https://tables.contoso.example"
    assert not CloudStorageAccount.parse(custom).is_cosmos
    assert CloudStorageAccount.parse(custom, cosmos=True).is_cosmos
    assert not CloudStorageAccount.parse(COSMOS, cosmos=False).is_cosmos
    from tablesdk import SharedKeyCredential

    account = CloudStorageAccount("acct", "https://tables.contoso.example", SharedKeyCredential("acct", KEY), cosmos=True)
    assert account.is_cosmos and account.create_cloud_table_client(sender=MockSender(ok)).is_cosmos
    with pytest.raises(ValueError, match="cosmos: must be True, False or None"):
        CloudStorageAccount("acct", "https://tables.contoso.example", None, cosmos="yes")  # type: ignore[arg-type]


# ------------------------------------------------------------------ JSON only


def test_atom_is_refused_when_the_client_is_made() -> None:
    sender = MockSender(ok)
    with pytest.raises(TableValidationError, match="JSON only") as caught:
        CloudStorageAccount.parse(COSMOS).create_cloud_table_client(payload_format="atom", sender=sender)
    assert caught.value.field == "payload_format" and sender.requests == []
    with pytest.raises(TableValidationError, match="JSON only"):
        run_async(COSMOS, lambda client: client.table_exists("Orders"), payload_format="atom")
    # Azure Storage still takes Atom (before 2015-12-11).
    CloudStorageAccount.parse(STORAGE).create_cloud_table_client(payload_format="atom", sender=sender)


# ------------------------------------------------------------------ entity and property limits


def long_row_key_writes(client: Any) -> Iterator[Callable[[], Any]]:
    too_long = "é" * 128  # 256 bytes in UTF-8, 128 characters
    entity = {"PartitionKey": "p", "RowKey": too_long, "Name": "x"}
    yield lambda: client.insert_entity("Orders", dict(entity))
    yield lambda: client.upsert_entity("Orders", dict(entity))
    yield lambda: client.update_entity("Orders", dict(entity), etag="*")
    yield lambda: client.delete_entity("Orders", partition_key="p", row_key=too_long, etag="*")


def test_row_keys_over_255_bytes_are_refused_before_sending() -> None:
    client, sender = cosmos()
    for write in long_row_key_writes(client):
        with pytest.raises(TableValidationError) as caught:
            write()
        assert caught.value.field == "RowKey" and "255 bytes" in caught.value.limit
        assert "got 256 bytes" in str(caught.value)
    assert sender.requests == []
    client.insert_entity("Orders", {"PartitionKey": "p", "RowKey": "r" * 255})  # at the limit: sent
    assert len(sender.requests) == 1


def test_azure_storage_keeps_its_own_key_limit() -> None:
    sender = MockSender(ok)
    client = CloudStorageAccount.parse(STORAGE).create_cloud_table_client(sender=sender)
    client.insert_entity("Orders", {"PartitionKey": "p", "RowKey": "é" * 128})
    assert len(sender.requests) == 1


@pytest.mark.parametrize("name", ["Id", "id", "ID", "rid", "ETag", "Etag", "ResourceId"])
def test_reserved_property_names_are_refused(name: str) -> None:
    client, sender = cosmos()
    with pytest.raises(TableValidationError, match="reserves the property names") as caught:
        client.insert_entity("Orders", {"PartitionKey": "p", "RowKey": "r", name: 1})
    assert caught.value.field == name and sender.requests == []


def test_names_that_only_contain_a_reserved_word_are_fine() -> None:
    client, sender = cosmos()
    client.insert_entity("Orders", {"PartitionKey": "p", "RowKey": "r", "UserId": 1, "Identity": "x", "etags": 2})
    assert len(sender.requests) == 1


def big_entities(count: int) -> list[dict[str, Any]]:
    """Entities of about 480 KB of JSON each (16 properties of 30,000 characters): inside the
    1 MiB entity limit, and five of them make a batch between 2 MB and 4 MiB."""
    return [
        {"PartitionKey": "p", "RowKey": str(index), **{f"P{n}": "x" * 30_000 for n in range(16)}}
        for index in range(count)
    ]


def insert_operations(entities: list[dict[str, Any]]) -> list[BatchOperation]:
    return [
        BatchOperation(BatchOperationKind.INSERT, "Orders", entity["PartitionKey"], entity["RowKey"], _payload(entity), None)
        for entity in entities
    ]


def _payload(entity: dict[str, Any]) -> Any:
    from tablesdk._entities._entity import entity_to_payload

    return entity_to_payload(entity)


def test_batches_over_2_mb_are_refused_before_sending() -> None:
    client, sender = cosmos()
    with pytest.raises(TableValidationError, match="2 MB") as caught:
        client.execute_batch(insert_operations(big_entities(5)))
    assert caught.value.field == "batch" and sender.requests == []
    assert client.max_batch_bytes == COSMOS_MAX_BATCH_BYTES


def test_batches_are_checked_for_cosmos_limits_operation_by_operation() -> None:
    client, sender = cosmos()
    operations = insert_operations([{"PartitionKey": "p", "RowKey": "1"}, {"PartitionKey": "p", "RowKey": "2", "rid": 1}])
    with pytest.raises(TableValidationError) as caught:
        client.execute_batch(operations)
    assert caught.value.field == "rid" and sender.requests == []


def test_bulk_insert_plans_batches_of_at_most_2_mb() -> None:
    from tablesdk._bulk_loading._bulk import BulkOptions, insert_call

    def planned_sizes(client: Any) -> list[int]:
        _, steps = insert_call(client, "Orders", big_entities(5), "insert", BulkOptions())
        sizes = []
        for step in steps:
            assert isinstance(step, list), step  # no entity failed
            ops = [BatchOperation(BatchOperationKind.INSERT, "Orders", i.partition_key, i.row_key, i.payload, None) for i in step]
            from tablesdk._formats._batch import build_batch_request

            sizes.append(len(build_batch_request(client.table_endpoint, ops, client.format, api_version=client.api_version)[0]))
        return sizes

    cosmos_sizes = planned_sizes(cosmos()[0])
    assert len(cosmos_sizes) >= 2 and max(cosmos_sizes) <= COSMOS_MAX_BATCH_BYTES
    storage = CloudStorageAccount.parse(STORAGE).create_cloud_table_client(sender=MockSender(ok))
    assert len(planned_sizes(storage)) == 1  # Azure Storage takes the five in one 4 MiB batch


def test_async_writes_are_checked_too() -> None:
    async def body(client: Any) -> None:
        await client.insert_entity("Orders", {"PartitionKey": "p", "RowKey": "r" * 256})

    with pytest.raises(TableValidationError, match="255 bytes"):
        run_async(COSMOS, body)

    async def reserved(client: Any) -> None:
        await client.upsert_entity("Orders", {"PartitionKey": "p", "RowKey": "r", "ResourceId": "x"})

    with pytest.raises(TableValidationError, match="reserves"):
        run_async(COSMOS, reserved)

    async def batch(client: Any) -> None:
        await client.execute_batch(insert_operations(big_entities(5)))

    with pytest.raises(TableValidationError, match="2 MB"):
        run_async(COSMOS, batch)


@pytest.mark.parametrize("batch", [False, True])
def test_context_saves_are_checked_before_anything_is_sent(batch: bool) -> None:
    from tablesdk import SaveChangesOptions

    client, sender = cosmos()
    ctx = client.get_table_service_context()
    ctx.add_object("Orders", {"PartitionKey": "p", "RowKey": "ok"})
    ctx.add_object("Orders", {"PartitionKey": "p", "RowKey": "x" * 300})
    with pytest.raises(TableValidationError, match="255 bytes"):
        ctx.save_changes(SaveChangesOptions.BATCH if batch else SaveChangesOptions.NONE)
    assert sender.requests == []  # not even the valid change: a save is checked whole first


def test_context_saves_are_checked_async() -> None:
    async def body(client: Any) -> None:
        ctx = client.get_table_service_context()
        ctx.add_object("Orders", {"PartitionKey": "p", "RowKey": "1", "Id": 1})
        await ctx.save_changes()

    with pytest.raises(TableValidationError, match="reserves"):
        run_async(COSMOS, body)


def test_bulk_insert_reports_each_entity_over_cosmos_limits() -> None:
    from tablesdk._bulk_loading._bulk import BulkOptions, insert_call

    entities = [{"PartitionKey": "p", "RowKey": "1"}, {"PartitionKey": "p", "RowKey": "2", "rid": 1},
                {"PartitionKey": "p", "RowKey": "r" * 256}, {"PartitionKey": "p", "RowKey": "4"}]
    _, steps = insert_call(cosmos()[0], "Orders", entities, "insert", BulkOptions())
    planned = list(steps)
    failed = {step[0]: step[2] for step in planned if isinstance(step, tuple)}
    batches = [[item.row_key for item in step] for step in planned if isinstance(step, list)]
    assert sorted(failed) == [1, 2] and batches == [["1", "4"]]
    assert isinstance(failed[1], TableValidationError) and failed[1].field == "rid"
    assert isinstance(failed[2], TableValidationError) and failed[2].field == "RowKey"


# ------------------------------------------------------------------ table names


COSMOS_NAMES = ["my-table", "orders_2024", "a", "v1.2~x", "T" * 255]


@pytest.mark.parametrize("name", COSMOS_NAMES)
def test_cosmos_table_names_are_wider_than_storages(name: str) -> None:
    """Cosmos DB takes 1-255 characters (not '/', '\\', '#', '?', a trailing space): a table made in
    its portal as 'my-table' must be reachable from every face."""
    client, sender = cosmos()
    assert client.table_exists(name) is True
    client.insert_entity(name, {"PartitionKey": "p", "RowKey": "r"})
    list(client.create_query(name))
    client.get_table_reference(name)
    ctx = client.get_table_service_context()
    ctx.add_object(name, {"PartitionKey": "p", "RowKey": "r2"})
    list(ctx.create_query(name))
    assert len(sender.requests) == 4 and all(
        request.url.endswith((f"/{name}()", f"/Tables('{name}')", f"/{name}")) for request in sender.requests
    )
    storage = CloudStorageAccount.parse(STORAGE).create_cloud_table_client(sender=MockSender(ok))
    if not (name.isalnum() and 3 <= len(name) <= 63):
        with pytest.raises(TableValidationError):
            storage.table_exists(name)


@pytest.mark.parametrize("name", ["", "T" * 256, "a/b", "a#b", "a?b", "a\\b", "trailing ", "it's", "spa ce"])
def test_table_names_cosmos_refuses_or_tablesdk_cannot_address(name: str) -> None:
    client, sender = cosmos()
    with pytest.raises(TableValidationError) as caught:
        client.table_exists(name)
    assert caught.value.field == "table" and sender.requests == []


def test_cosmos_table_names_async() -> None:
    async def body(client: Any) -> Any:
        await client.insert_entity("my-table", {"PartitionKey": "p", "RowKey": "r"})
        return [entity async for entity in client.create_query("my-table")]

    assert run_async(COSMOS, body)[0] == []


# ------------------------------------------------------------------ Storage-only calls


STORAGE_ONLY: list[tuple[str, Callable[[Any], Any]]] = [
    ("get_service_properties", lambda client: client.get_service_properties()),
    ("set_service_properties", lambda client: client.set_service_properties(ServiceProperties())),
    ("get_service_stats", lambda client: client.get_service_stats()),
    ("get_table_acl", lambda client: client.get_table_acl("Orders")),
    ("set_table_acl", lambda client: client.set_table_acl("Orders", {})),
]


@pytest.mark.parametrize(("name", "call"), STORAGE_ONLY, ids=[name for name, _ in STORAGE_ONLY])
def test_storage_only_calls_are_refused_before_sending(name: str, call: Callable[[Any], Any]) -> None:
    client, sender = cosmos()
    with pytest.raises(NotImplementedError, match=f"{name} is not supported by Cosmos DB's Table API"):
        call(client)
    assert sender.requests == []

    async def body(client: Any) -> Any:
        return await call(client)

    with pytest.raises(NotImplementedError, match=name):
        run_async(COSMOS, body)


# ------------------------------------------------------------------ Timestamp filters


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Timestamp ge datetime'2022-10-24T21:50:41Z'", True),
        ("UserId eq 'x' and Timestamp ge datetime'2022-10-24T21:50:41Z'", True),
        ("(Timestamp lt datetime'2024-01-01T00:00:00Z')", True),
        ("Name eq 'Timestamp'", False),  # inside a string literal
        ("Name eq 'it''s Timestamp ge'", False),
        ("MyTimestamp ge datetime'2024-01-01T00:00:00Z'", False),
        ("Timestamps eq 1", False),
    ],
)
def test_which_filters_name_timestamp(text: str, names: bool) -> None:
    assert filter_names_timestamp(text) is names


def test_a_timestamp_filter_warns_on_cosmos() -> None:
    client, sender = cosmos()
    since = datetime(2022, 10, 24, 21, 50, 41, tzinfo=timezone.utc)
    with pytest.warns(CosmosTimestampFilterWarning, match="no entities") as caught:
        list(client.create_query("Orders").where(prop("Timestamp") >= since))
    assert caught[0].filename == __file__  # points at the caller's line
    with pytest.warns(CosmosTimestampFilterWarning):
        client.query_entity_payloads("Orders", filter="UserId eq 'u' and Timestamp ge datetime'2022-10-24T21:50:41Z'")
    assert len(sender.requests) == 2  # a warning, not a refusal: the query is still sent


def test_other_filters_and_storage_do_not_warn() -> None:
    client, _ = cosmos()
    storage = CloudStorageAccount.parse(STORAGE).create_cloud_table_client(sender=MockSender(ok))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        client.query_entity_payloads("Orders", filter="Name eq 'Timestamp'")
        list(client.create_query("Orders").where(prop("Created") >= datetime(2024, 1, 1, tzinfo=timezone.utc)))
        storage.query_entity_payloads("Orders", filter="Timestamp ge datetime'2022-10-24T21:50:41Z'")


def test_a_timestamp_filter_warns_on_cosmos_async() -> None:
    async def body(client: Any) -> Any:
        return await client.query_entity_payloads("Orders", filter="Timestamp gt datetime'2024-01-01T00:00:00Z'")

    with pytest.warns(CosmosTimestampFilterWarning):
        run_async(COSMOS, body)


# ------------------------------------------------------------------ the token audience


@dataclass
class Token:
    token: str
    expires_on: int


class ScopeRecorder:
    def __init__(self) -> None:
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> Token:
        self.scopes.append(scopes)
        return Token("t0ken", 4_102_444_800)


def test_entra_id_tokens_are_asked_for_cosmos_dbs_audience() -> None:
    recorder = ScopeRecorder()
    account = CloudStorageAccount("acct", "https://acct.table.cosmos.azure.com", recorder)
    account.create_cloud_table_client(sender=MockSender(ok)).table_exists("Orders")
    assert recorder.scopes == [("https://cosmos.azure.com/.default",)]


def test_token_audience_still_overrides_on_cosmos() -> None:
    recorder = ScopeRecorder()
    account = CloudStorageAccount("acct", "https://acct.table.cosmos.azure.com", recorder)
    account.create_cloud_table_client(sender=MockSender(ok), token_audience="https://cosmos.azure.us").table_exists("Orders")
    assert recorder.scopes == [("https://cosmos.azure.us/.default",)]


def test_an_account_level_audience_other_than_storages_is_kept() -> None:
    recorder = ScopeRecorder()
    account = CloudStorageAccount("acct", "https://acct.table.cosmos.azure.com", recorder, token_audience="api://custom")
    account.create_cloud_table_client(sender=MockSender(ok)).table_exists("Orders")
    assert recorder.scopes == [("api://custom/.default",)]


def test_entra_id_tokens_for_cosmos_async_and_storage_unchanged() -> None:
    recorder = ScopeRecorder()
    inner = MockSender(ok)

    async def main() -> None:
        account = CloudStorageAccount("acct", "https://acct.table.cosmos.azure.com", recorder)
        async with account.create_async_cloud_table_client(sender=AsyncMock(inner)) as client:
            await client.table_exists("Orders")
        storage = CloudStorageAccount("acct", "https://acct.table.core.windows.net", recorder)
        async with storage.create_async_cloud_table_client(sender=AsyncMock(inner)) as client:
            await client.table_exists("Orders")

    asyncio.run(main())
    assert recorder.scopes == [("https://cosmos.azure.com/.default",), ("https://storage.azure.com/.default",)]


# ------------------------------------------------------------------ throttling, errors, continuation


#: A throttled answer as Cosmos DB gives it: 429 with the wait in x-ms-retry-after-ms.
def throttled(wait_ms: str) -> HttpResponse:
    return MockSender.response(
        429, error_body("TooManyRequests", "Message: Request rate is large. More Request Units may be needed."),
        {**JSON, "x-ms-retry-after-ms": wait_ms},
    )


def test_429_is_retried_after_exactly_the_wait_cosmos_asks_by_default() -> None:
    answers = [throttled("20"), throttled("150"), throttled("5000")]
    client, sender = cosmos(lambda request: answers.pop(0) if answers else ok(request))
    assert client.retry_policy == CosmosRetry()
    slept: list[float] = []
    client.transport._sleep = slept.append
    client.insert_entity("Orders", {"PartitionKey": "p", "RowKey": "r"})
    assert len(sender.requests) == 4 and slept == [0.02, 0.15, 5.0]  # the asks, no back-off of its own


def test_429_is_retried_after_exactly_the_wait_cosmos_asks_async() -> None:
    answers = [throttled("20"), throttled("1500")]
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    async def body(client: Any) -> None:
        client.transport._sleep = record
        await client.upsert_entity("Orders", {"PartitionKey": "p", "RowKey": "r"})

    _, sender = run_async(COSMOS, body, lambda request: answers.pop(0) if answers else ok(request))
    assert len(sender.requests) == 3 and slept == [0.02, 1.5]


def test_throttles_are_retried_nine_times_then_raised() -> None:
    client, sender = cosmos(lambda request: throttled("10"))
    client.transport._sleep = lambda seconds: None
    with pytest.raises(ServerBusyError) as caught:
        client.insert_entity("Orders", {"PartitionKey": "p", "RowKey": "r"})
    assert len(sender.requests) == 10 and caught.value.status_code == 429
    assert caught.value.error_code == "TooManyRequests"


def test_a_429_without_a_wait_and_other_errors_take_the_storage_back_off() -> None:
    policy = CosmosRetry()
    bare_429 = ServerBusyError("busy", status_code=429)
    busy_503 = ServerBusyError("busy", status_code=503)
    assert policy.retry_after(1, bare_429) == 3.0 and policy.retry_after(1, busy_503) == 3.0
    assert policy.retry_after(4, busy_503) is None  # ExponentialRetry's 3 retries
    assert CosmosRetry(2, others=NoRetry()).retry_after(1, busy_503) is None
    with pytest.raises(ValueError, match="others must be a retry policy"):
        CosmosRetry(others=3)  # type: ignore[arg-type]


def test_a_given_retry_policy_is_kept_and_storage_keeps_its_default() -> None:
    assert cosmos(retry_policy=NoRetry())[0].retry_policy == NoRetry()
    storage = CloudStorageAccount.parse(STORAGE).create_cloud_table_client(sender=MockSender(ok))
    assert isinstance(storage.retry_policy, ExponentialRetry)

    async def body(client: Any) -> Any:
        return client.retry_policy

    assert run_async(COSMOS, body)[0] == CosmosRetry()


def test_a_throttle_wait_past_the_deadline_ends_the_call_at_once() -> None:
    now = [1000.0]
    client, sender = cosmos(lambda request: throttled("30000"), operation_deadline=10)
    slept: list[float] = []
    client.transport._sleep = slept.append
    client.transport._clock = lambda: now[0]
    with pytest.raises(RequestTimeoutError, match="deadline") as caught:
        client.insert_entity("Orders", {"PartitionKey": "p", "RowKey": "r"})
    assert slept == [] and len(sender.requests) == 1
    assert isinstance(caught.value.__cause__, ServerBusyError)
    assert caught.value.__cause__.headers["x-ms-retry-after-ms"] == "30000"


def test_cosmos_error_bodies_are_read_as_the_tables_are() -> None:
    client, _ = cosmos(lambda request: MockSender.response(
        404, error_body("ResourceNotFound", "Message: {\"Errors\":[\"Resource Not Found\"]}\r\nActivityId: 1"), JSON,
    ))
    with pytest.raises(ResourceNotFoundError) as caught:
        client.get_entity("Orders", "p", "r")
    assert caught.value.error_code == "ResourceNotFound" and "Resource Not Found" in caught.value.message


#: Cosmos DB's continuation tokens are opaque (not keys): characters that need percent-encoding.
OPAQUE_PK = '{"token":"+RID:~a2V5#RT:1#TRC:2","range":{"min":"","max":"FF"}}'
OPAQUE_RK = "NA+/="


def paged(request: HttpRequest) -> HttpResponse:
    query = parse_qs(urlsplit(request.url).query)
    if "NextPartitionKey" not in query:
        return MockSender.response(200, json.dumps({"value": [{"PartitionKey": "p", "RowKey": "1"}]}), {
            **JSON, "x-ms-continuation-NextPartitionKey": OPAQUE_PK, "x-ms-continuation-NextRowKey": OPAQUE_RK,
        })
    assert query["NextPartitionKey"] == [OPAQUE_PK] and query["NextRowKey"] == [OPAQUE_RK]
    return MockSender.response(200, json.dumps({"value": [{"PartitionKey": "p", "RowKey": "2"}]}), JSON)


def test_opaque_continuation_tokens_are_followed_verbatim() -> None:
    client, sender = cosmos(paged)
    rows = [entity.RowKey for entity in client.create_query("Orders")]
    assert rows == ["1", "2"] and len(sender.requests) == 2


def test_opaque_continuation_tokens_are_followed_verbatim_async() -> None:
    async def body(client: Any) -> list[str]:
        first, token = await client.query_entity_payloads("Orders")
        second, last = await client.query_entity_payloads("Orders", continuation_token=token)
        assert last is None
        return [payload.values["RowKey"] for payload in first + second]

    rows, sender = run_async(COSMOS, body, paged)
    assert rows == ["1", "2"] and len(sender.requests) == 2


def test_entity_properties_round_trip_as_on_storage() -> None:
    client, sender = cosmos()
    client.insert_entity("Orders", {"PartitionKey": "p", "RowKey": "r", "Big": EntityProperty(2**40, EdmType.INT64)})
    body = json.loads(sender.requests[0].body or b"{}")
    assert body["Big"] == str(2**40) and body["Big@odata.type"] == "Edm.Int64"


def test_the_sample_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    """samples/cosmos_table_api.py needs no account and resolves no name (the fixture above)."""
    import runpy
    from pathlib import Path

    runpy.run_path(str(Path(__file__).resolve().parents[2] / "samples" / "cosmos_table_api.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "Cosmos DB? True" in out and "written after 2 attempts" in out
    assert out.count("refused before sending") == 3 and "warned: " in out


def test_no_secondary_reads_on_cosmos() -> None:
    """Cosmos DB has no '-secondary' endpoint (its FAQ: it replicates to the account's regions and
    routes reads itself): asking for one is refused, never sent to a host that does not exist."""
    from tablesdk import TableRequestOptions

    with pytest.raises(TableValidationError, match="no read-only secondary") as caught:
        cosmos(location_mode="primary_then_secondary")
    assert caught.value.field == "location_mode"
    client, sender = cosmos()
    with pytest.raises(TableValidationError, match="no read-only secondary"):
        client.location_mode = "secondary_only"
    with pytest.raises(TableValidationError, match="no read-only secondary"):
        client.table_exists("Orders", options=TableRequestOptions(location_mode="secondary_only"))
    assert sender.requests == [] and client.location_mode == "primary_only"


def test_an_opaque_token_survives_being_saved_and_resumed() -> None:
    from tablesdk import ContinuationToken

    client, sender = cosmos(paged)
    _, token = client.query_entity_payloads("Orders")
    assert token is not None
    resumed = ContinuationToken.from_string(token.to_string())
    page, last = client.query_entity_payloads("Orders", continuation_token=resumed)
    assert [payload.values["RowKey"] for payload in page] == ["2"] and last is None
