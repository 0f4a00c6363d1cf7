"""Answers the service never gives do not pass as data (issue 22.4): each is a ResponseDecodeError.

A null for a property the request did not select, a point read answered with another
entity, an object naming a member twice, a batch answer whose Content-IDs are repeated
or name no operation. Both formats, both clients.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from tablesdk import (
    BatchOperation,
    BatchOperationKind,
    CloudStorageAccount,
    DynamicEntity,
    NoRetry,
    ResponseDecodeError,
)
from tablesdk._formats._batch_answer import parse_batch_response
from tablesdk._entities._entity import entity_to_payload
from tablesdk._formats import get_format
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender, Timeout

CONN = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    "TableEndpoint=http://127.0.0.1:1/devstoreaccount1;"
)
A = "http://www.w3.org/2005/Atom"
D = "http://schemas.microsoft.com/ado/2007/08/dataservices"
M = D + "/metadata"
FORMATS = ["json", "atom"]
CLIENTS = ["sync", "async"]


def entity_body(fmt: str, props: dict[str, Any], *, feed: bool) -> bytes:
    """A body holding one entity with ``props`` (a None value is written as the format's null)."""
    if fmt == "json":
        obj = json.dumps(props)
        return (f'{{"value":[{obj}]}}' if feed else obj).encode()
    parts = "".join(
        f'<d:{k} m:null="true" />' if v is None else f'<d:{k} m:type="Edm.Int32">{v}</d:{k}>' if type(v) is int
        else f"<d:{k}>{v}</d:{k}>"
        for k, v in props.items()
    )
    entry = f'<entry><content type="application/xml"><m:properties>{parts}</m:properties></content></entry>'
    if feed:
        return f'<feed xmlns="{A}" xmlns:d="{D}" xmlns:m="{M}">{entry}</feed>'.encode()
    return entry.replace("<entry>", f'<entry xmlns="{A}" xmlns:d="{D}" xmlns:m="{M}">', 1).encode()


def content_type(fmt: str) -> str:
    return "application/json;odata=minimalmetadata" if fmt == "json" else "application/atom+xml"


class AsyncMemorySender:
    def __init__(self, handler: Callable[[HttpRequest], HttpResponse]) -> None:
        self.handler = handler

    async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        return self.handler(request)

    async def close(self) -> None:
        pass


def call(kind: str, fmt: str, handler: Callable[[HttpRequest], HttpResponse], operation: str, *args: Any,
         **kwargs: Any) -> Any:
    """Run a client operation over ``handler`` with the sync or the async client."""
    account = CloudStorageAccount.parse(CONN)
    if kind == "sync":
        client = account.create_cloud_table_client(
            sender=MockSender(handler), payload_format=fmt, retry_policy=NoRetry())  # type: ignore[arg-type]
        return getattr(client, operation)(*args, **kwargs)
    pytest.importorskip("aiohttp")

    async def run() -> Any:
        aclient = account.create_async_cloud_table_client(
            sender=AsyncMemorySender(handler), payload_format=fmt, retry_policy=NoRetry())  # type: ignore[arg-type]
        try:
            return await getattr(aclient, operation)(*args, **kwargs)
        finally:
            await aclient.close()

    return asyncio.run(run())


def answering(fmt: str, body: bytes, status: int = 200) -> Callable[[HttpRequest], HttpResponse]:
    return lambda request: MockSender.response(
        status, body, {"Content-Type": content_type(fmt), "x-ms-request-id": "rid-9"})


# ---------------------------------------------------------------- nulls


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_null_no_select_asked_for_is_refused(fmt: str, kind: str) -> None:
    body = entity_body(fmt, {"PartitionKey": "p", "RowKey": "r", "Gone": None}, feed=True)
    with pytest.raises(ResponseDecodeError, match="'Gone' is null") as info:
        call(kind, fmt, answering(fmt, body), "query_entity_payloads", "T")
    assert info.value.status_code == 200 and info.value.request_id == "rid-9"


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_null_in_a_point_read_is_refused(fmt: str, kind: str) -> None:
    body = entity_body(fmt, {"PartitionKey": "p", "RowKey": "r", "Gone": None}, feed=False)
    with pytest.raises(ResponseDecodeError, match="'Gone' is null"):
        call(kind, fmt, answering(fmt, body), "get_entity", "T", "p", "r")


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_null_for_a_selected_property_is_what_the_service_answers(fmt: str, kind: str) -> None:
    # The service answers null for a property a $select named and the entity does not have.
    body = entity_body(fmt, {"PartitionKey": "p", "RowKey": "r", "Gone": None}, feed=True)
    payloads, _ = call(kind, fmt, answering(fmt, body), "query_entity_payloads", "T", select=["Gone"])
    assert payloads[0].values["Gone"] is None
    body = entity_body(fmt, {"PartitionKey": "p", "RowKey": "r", "Gone": None}, feed=False)
    entity = call(kind, fmt, answering(fmt, body), "get_entity", "T", "p", "r", select=["Gone"])
    assert entity.PartitionKey == "p"
    with pytest.raises(ResponseDecodeError, match="'Gone' is null"):
        call(kind, fmt, answering(fmt, body), "get_entity", "T", "p", "r", select=["Other"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_text_null_in_a_string_is_data(fmt: str) -> None:
    body = entity_body(fmt, {"PartitionKey": "p", "RowKey": "r", "Text": "null"}, feed=True)
    payloads, _ = call("sync", fmt, answering(fmt, body), "query_entity_payloads", "T")
    assert payloads[0].values["Text"] == "null"


# ---------------------------------------------------------------- point reads of another entity


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("keys", [("p", "other"), ("other", "r")])
def test_a_point_read_answered_with_another_entity(fmt: str, kind: str, keys: tuple[str, str]) -> None:
    body = entity_body(fmt, {"PartitionKey": keys[0], "RowKey": keys[1], "X": 1}, feed=False)
    with pytest.raises(ResponseDecodeError, match="asked for the entity") as info:
        call(kind, fmt, answering(fmt, body), "get_entity", "T", "p", "r")
    assert info.value.status_code == 200 and info.value.request_id == "rid-9"


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_read_by_filter_answered_with_another_entity(fmt: str, kind: str) -> None:
    # A '%' in a key: the read is a $filter query, whose answer is a feed.
    body = entity_body(fmt, {"PartitionKey": "p", "RowKey": "other", "X": 1}, feed=True)
    with pytest.raises(ResponseDecodeError, match="asked for the entity") as info:
        call(kind, fmt, answering(fmt, body), "get_entity", "T", "p", "100%")
    assert info.value.status_code == 200


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_point_read_answered_with_its_entity_still_works(fmt: str, kind: str) -> None:
    body = entity_body(fmt, {"PartitionKey": "p", "RowKey": "100%", "X": 1}, feed=True)
    assert call(kind, fmt, answering(fmt, body), "get_entity", "T", "p", "100%")["X"] == 1
    body = entity_body(fmt, {"PartitionKey": "p", "RowKey": "r", "X": 1}, feed=False)
    assert call(kind, fmt, answering(fmt, body), "get_entity", "T", "p", "r")["X"] == 1


# ---------------------------------------------------------------- members named twice

REPEATED_JSON = [
    b'{"PartitionKey":"p","RowKey":"r","PartitionKey":"q"}',
    b'{"PartitionKey":"q","RowKey":"r","PartitionKey":"p"}',  # the last is the one asked for
    b'{"PartitionKey":"p","RowKey":"r","X":1,"X":2}',
    b'{"PartitionKey":"p","RowKey":"r","X":1, "X" :2}',  # whitespace before the colon
    # A repeat and a name with whitespace before its colon: as many '":' as members read.
    b'{"PartitionKey":"p","RowKey":"r","X":1,"X":2,"Y" :3}',
    b'{"PartitionKey":"p","RowKey":"r","X":1,"X":2,"Y"\t:3}',
    b'{"PartitionKey":"p","RowKey":"r","X":1,"X":2,"Y"\r\n:3}',
    b'{"PartitionKey":"p","RowKey":"r","X":1,"X@odata.type":"Edm.Int64","X@odata.type":"Edm.Int32"}',
]


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("body", REPEATED_JSON)
def test_a_json_entity_naming_a_member_twice(kind: str, body: bytes) -> None:
    with pytest.raises(ResponseDecodeError, match="twice"):
        call(kind, "json", answering("json", body), "get_entity", "T", "p", "r")
    feed = b'{"value":[{"PartitionKey":"p","RowKey":"a"},' + body + b"]}"
    with pytest.raises(ResponseDecodeError, match="twice"):
        call(kind, "json", answering("json", feed), "query_entity_payloads", "T")


@pytest.mark.parametrize("kind", CLIENTS)
def test_an_atom_entry_holding_a_property_twice(kind: str) -> None:
    body = (f'<entry xmlns="{A}" xmlns:d="{D}" xmlns:m="{M}"><content type="application/xml"><m:properties>'
            "<d:PartitionKey>p</d:PartitionKey><d:RowKey>r</d:RowKey><d:RowKey>r</d:RowKey>"
            "</m:properties></content></entry>").encode()
    with pytest.raises(ResponseDecodeError, match="twice"):
        call(kind, "atom", answering("atom", body), "get_entity", "T", "p", "r")


def test_escaped_quotes_and_colons_in_strings_are_data() -> None:
    codec = get_format("json")
    value = 'a\\":b \\" : c'
    body = ('{"value":[{"PartitionKey":"p","RowKey":"r","X":"' + value + '"}, {"PartitionKey":"p","RowKey":"s"}]}')
    page = codec.parse_entity_page(body.encode())
    assert page.values[0]["X"] == 'a":b " : c'


# ---------------------------------------------------------------- batch Content-IDs

OUTER, INNER = "batchresponse_1", "changesetresponse_1"
BATCH_TYPE = f"multipart/mixed; boundary={OUTER}"


def batch_answer(content_ids: list[str | None]) -> bytes:
    text = f"--{OUTER}\r\nContent-Type: multipart/mixed; boundary={INNER}\r\n\r\n"
    for number, content_id in enumerate(content_ids, 1):
        header = f"Content-ID: {content_id}\r\n" if content_id is not None else ""
        text += (f"--{INNER}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
                 f"HTTP/1.1 204 No Content\r\n{header}ETag: W/{number}\r\n\r\n\r\n")
    return (text + f"--{INNER}--\r\n--{OUTER}--\r\n").encode()


def inserts(count: int) -> list[BatchOperation]:
    return [
        BatchOperation(BatchOperationKind.INSERT, "T", "p", str(n), entity_to_payload(DynamicEntity("p", str(n))), None)
        for n in range(count)
    ]


BAD_CONTENT_IDS = [["1", "1", "3"], ["1", "2", "7"], ["0", "1", "2"], ["1", "x", "3"], ["1", "2", "\u0663"]]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("ids", BAD_CONTENT_IDS, ids=["repeated", "beyond", "zero", "text", "arabic-digit"])
def test_a_batch_answer_whose_content_ids_do_not_name_the_operations(fmt: str, ids: list[str]) -> None:
    with pytest.raises(ResponseDecodeError, match="Content-ID"):
        parse_batch_response(batch_answer(ids), BATCH_TYPE, inserts(3), get_format(fmt))


@pytest.mark.parametrize("ids", [["1", "2", "3"], ["3", "1", "2"], [None, None, None], [None, "2", None]])
def test_content_ids_the_service_gives(ids: list[str | None]) -> None:
    results = parse_batch_response(batch_answer(ids), BATCH_TYPE, inserts(3), get_format("json"))
    assert len(results) == 3


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_execute_batch_with_a_repeated_content_id(fmt: str, kind: str) -> None:
    def handler(request: HttpRequest) -> HttpResponse:
        return MockSender.response(202, batch_answer(["1", "1"]), {"Content-Type": BATCH_TYPE, "x-ms-request-id": "b"})

    with pytest.raises(ResponseDecodeError, match="Content-ID") as info:
        call(kind, fmt, handler, "execute_batch", inserts(2))
    assert info.value.status_code == 202 and info.value.request_id == "b"


def test_a_content_id_error_is_not_retried_nor_ambiguous_and_the_save_is_applied() -> None:
    """docs/retries.md: the 202 committed the change set; only its answer is unreadable."""
    from tablesdk import DataServiceRequestError, EntityStates, LinearRetry, SaveChangesOptions

    def handler(request: HttpRequest) -> HttpResponse:
        return MockSender.response(202, batch_answer(["1", "1"]), {"Content-Type": BATCH_TYPE})

    sender = MockSender(handler)
    client = CloudStorageAccount.parse(CONN).create_cloud_table_client(
        sender=sender, retry_policy=LinearRetry(count=3, interval_seconds=0))
    ctx = client.get_table_service_context()
    entities = [DynamicEntity("p", "a"), DynamicEntity("p", "b")]
    for entity in entities:
        ctx.add_object("Tasks", entity)
    with pytest.raises(DataServiceRequestError) as info:
        ctx.save_changes_with_retries(SaveChangesOptions.BATCH)
    assert len(sender.requests) == 1  # not retried
    cause = info.value.__cause__
    assert isinstance(cause, ResponseDecodeError) and "Content-ID" in cause.reason
    assert not cause.ambiguous_retry
    states = [getattr(ctx.get_entity_descriptor(e), "state", None) for e in entities]
    assert states == [EntityStates.UNCHANGED] * 2  # applied, not left pending
