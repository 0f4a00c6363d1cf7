"""A 2xx body that is not what the operation expects raises ResponseDecodeError.

Never a bare JSONDecodeError, RecursionError or XMLSyntaxError, and never a
phantom entity: the error names what failed, carries the response's status and
request id and a short excerpt of the body without secrets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import responses

from tablesdk import (
    BatchOperation,
    BatchOperationKind,
    CloudStorageAccount,
    CloudTableClient,
    DynamicEntity,
    NoRetry,
    ResponseDecodeError,
    TableServiceError,
)
from tablesdk._entities._entity import entity_to_payload
from tablesdk._formats import get_format

from fake_service import CONNECTION_STRING, ENDPOINT

A = "http://www.w3.org/2005/Atom"
D = "http://schemas.microsoft.com/ado/2007/08/dataservices"
M = D + "/metadata"
HTML = b"<!DOCTYPE html><html><head><title>Proxy</title></head><body>Sign in at /login?sig=SECRETSIGNATURE123</body></html>"


def feed(props: str) -> bytes:
    return (
        f'<feed xmlns="{A}" xmlns:d="{D}" xmlns:m="{M}"><entry><content type="application/xml">'
        f"<m:properties>{props}</m:properties></content></entry></feed>"
    ).encode()


def entry(props: str) -> bytes:
    return (
        f'<entry xmlns="{A}" xmlns:d="{D}" xmlns:m="{M}"><content type="application/xml">'
        f"<m:properties>{props}</m:properties></content></entry>"
    ).encode()


KEYS = "<d:PartitionKey>p</d:PartitionKey><d:RowKey>r</d:RowKey>"
#: (format, name, body of a query response)
BAD_QUERY_BODIES: list[tuple[str, str, bytes]] = [
    ("json", "html", HTML),
    ("json", "array", b"[1, 2]"),
    ("json", "value-not-list-nor-entity", b'{"value": 5}'),
    ("json", "value-of-numbers", b'{"value": [1]}'),
    ("json", "deep-nesting", b"[" * 100_000 + b"]" * 100_000),
    ("json", "deep-object", b'{"value":[{"PartitionKey":"p","RowKey":"r","X":' + b'{"a":' * 100_000 + b"1" + b"}" * 100_001 + b"]}"),
    ("json", "int-beyond-int64", json.dumps({"value": [{"PartitionKey": "p", "RowKey": "r", "X": 2**70}]}).encode()),
    ("json", "annotated-int32-of-2**70", json.dumps(
        {"value": [{"PartitionKey": "p", "RowKey": "r", "X": 2**70, "X@odata.type": "Edm.Int32"}]}).encode()),
    ("json", "int32-annotation-on-a-double", json.dumps(
        {"value": [{"PartitionKey": "p", "RowKey": "r", "X": 1.5, "X@odata.type": "Edm.Int32"}]}).encode()),
    ("json", "int64-beyond-range", json.dumps(
        {"value": [{"PartitionKey": "p", "RowKey": "r", "X": str(2**70), "X@odata.type": "Edm.Int64"}]}).encode()),
    ("json", "boolean-as-text", json.dumps(
        {"value": [{"PartitionKey": "p", "RowKey": "r", "X": "yes", "X@odata.type": "Edm.Boolean"}]}).encode()),
    ("json", "missing-partition-key", b'{"value":[{"RowKey":"r","X":1}]}'),
    ("json", "numeric-row-key", b'{"value":[{"PartitionKey":"p","RowKey":5}]}'),
    ("json", "empty-object", b"{}"),
    ("json", "5000-digit-number", b'{"value":[{"PartitionKey":"p","RowKey":"r","X":' + b"9" * 5000 + b"}]}"),
    ("atom", "html", HTML),
    ("atom", "json", b'{"value": []}'),
    ("atom", "deep-nesting", b"<a>" * 100_000 + b"</a>" * 100_000),
    ("atom", "int32-of-2**70", feed(KEYS + f'<d:X m:type="Edm.Int32">{2**70}</d:X>')),
    ("atom", "int64-beyond-range", feed(KEYS + f'<d:X m:type="Edm.Int64">{2**70}</d:X>')),
    ("atom", "missing-partition-key", feed("<d:RowKey>r</d:RowKey>")),
    ("atom", "empty", b""),
]


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as m:
        yield m


def client(fmt: str) -> CloudTableClient:
    return CloudStorageAccount.parse(CONNECTION_STRING).create_cloud_table_client(
        payload_format=fmt, retry_policy=NoRetry()  # type: ignore[arg-type]
    )


def check(error: ResponseDecodeError, status: int) -> None:
    assert isinstance(error, TableServiceError)
    assert error.status_code == status and error.request_id == "rid-7"
    assert error.reason and len(error.excerpt) <= 120
    assert "SECRETSIGNATURE123" not in str(error) + repr(error) + error.excerpt
    assert error.__cause__ is None or not isinstance(error.__cause__, RecursionError)


@pytest.mark.parametrize(("fmt", "name", "body"), BAD_QUERY_BODIES, ids=[f"{f}-{n}" for f, n, _ in BAD_QUERY_BODIES])
def test_query_page_that_cannot_be_decoded(mock: responses.RequestsMock, fmt: str, name: str, body: bytes) -> None:
    mock.add("GET", re.compile(re.escape(ENDPOINT) + r"/Blogs\(\).*"), body=body, status=200,
             headers={"x-ms-request-id": "rid-7"})
    with pytest.raises(ResponseDecodeError) as info:
        list(client(fmt).create_query("Blogs"))
    check(info.value, 200)


POINT_BODIES = [
    ("json", HTML), ("json", b'{"RowKey":"r"}'), ("json", b'{"PartitionKey":"p","RowKey":"r","X":' + b"[" * 50_000 + b"]" * 50_000 + b"}"),
    ("atom", HTML), ("atom", entry("<d:RowKey>r</d:RowKey>")), ("atom", entry(KEYS + '<d:X m:type="Edm.Int32">99999999999</d:X>')),
]


@pytest.mark.parametrize(("fmt", "body"), POINT_BODIES)
def test_point_query_and_echoed_insert(mock: responses.RequestsMock, fmt: str, body: bytes) -> None:
    mock.add("GET", re.compile(re.escape(ENDPOINT) + r"/Blogs\(PartitionKey=.*"), body=body, status=200,
             headers={"x-ms-request-id": "rid-7"})
    mock.add("POST", re.compile(re.escape(ENDPOINT) + r"/Blogs(\?.*)?$"), body=body, status=201,
             headers={"x-ms-request-id": "rid-7"})
    c = client(fmt)
    with pytest.raises(ResponseDecodeError) as info:
        c.get_entity("Blogs", "p", "r")
    check(info.value, 200)
    operation = BatchOperation(
        BatchOperationKind.INSERT, "Blogs", "p", "r", entity_to_payload(DynamicEntity("p", "r")), None,
        echo_content=True,
    )
    with pytest.raises(ResponseDecodeError) as info:
        c.execute_operation(operation)
    check(info.value, 201)


@pytest.mark.parametrize(("fmt", "body"), [
    ("json", HTML), ("json", b'{"value":[{"Name":"x"}]}'), ("json", b"[" * 100_000),
    ("atom", HTML), ("atom", b"<a>" * 100_000),
])
def test_list_tables(mock: responses.RequestsMock, fmt: str, body: bytes) -> None:
    mock.add("GET", re.compile(re.escape(ENDPOINT) + r"/Tables.*"), body=body, status=200,
             headers={"x-ms-request-id": "rid-7"})
    with pytest.raises(ResponseDecodeError) as info:
        list(client(fmt).list_tables())
    check(info.value, 200)


@pytest.mark.parametrize("fmt", ["json", "atom"])
def test_batch_part_without_keys(mock: responses.RequestsMock, fmt: str) -> None:
    codec = get_format(fmt)
    inner = b'{"RowKey":"r"}' if fmt == "json" else entry("<d:RowKey>r</d:RowKey>")
    ctype = "application/json" if fmt == "json" else "application/atom+xml"
    body = (
        b"--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_1\r\n\r\n"
        b"--changesetresponse_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        b"HTTP/1.1 201 Created\r\nContent-ID: 1\r\nContent-Type: " + ctype.encode() + b"\r\n\r\n" + inner + b"\r\n"
        b"--changesetresponse_1--\r\n--batchresponse_1--\r\n"
    )
    mock.add("POST", re.compile(re.escape(ENDPOINT) + r"/\$batch.*"), body=body, status=202,
             headers={"x-ms-request-id": "rid-7", "Content-Type": "multipart/mixed; boundary=batchresponse_1"})
    operation = BatchOperation(
        BatchOperationKind.INSERT, "Blogs", "p", "r", entity_to_payload(DynamicEntity("p", "r")), None,
        echo_content=True,
    )
    with pytest.raises(ResponseDecodeError) as info:
        client(fmt).execute_batch([operation])
    check(info.value, 202)
    assert codec.name == fmt


@pytest.mark.parametrize("fmt", ["json", "atom"])
@pytest.mark.parametrize("method", ["parse_entity", "parse_entities", "parse_tables"])
def test_codecs_raise_only_response_decode_error(fmt: str, method: str) -> None:
    parse: Callable[[bytes], Any] = getattr(get_format(fmt), method)
    for body in (HTML, b"[" * 100_000, b"<a>" * 100_000, b"\xff\xfe\x00", b"", b"null", b'{"value":[[]]}'):
        with pytest.raises(ResponseDecodeError) as info:
            parse(body)
        assert info.value.status_code is None  # the client adds it
        assert isinstance(info.value, ValueError)  # as the codecs' errors always were


def test_excerpt_is_short_single_line_and_without_credentials() -> None:
    body = b"<html>\n<p>Authorization: SharedKey devstoreaccount1:c2VjcmV0c2lnbmF0dXJl</p>\n" + b"x" * 500 + b"</html>"
    with pytest.raises(ResponseDecodeError) as info:
        get_format("json").parse_entities(body)
    excerpt = info.value.excerpt
    assert "\n" not in excerpt and len(excerpt) <= 120 and excerpt.endswith("...")
    assert "c2VjcmV0c2lnbmF0dXJl" not in excerpt and "SharedKey REDACTED" in excerpt


@pytest.mark.parametrize("operation", ["get_table_acl", "get_service_properties", "get_service_stats"])
def test_service_level_xml_that_cannot_be_decoded(mock: responses.RequestsMock, operation: str) -> None:
    mock.add("GET", re.compile(r"http://127\.0\.0\.1:10002/devstoreaccount1.*"), body=HTML, status=200,
             headers={"x-ms-request-id": "rid-7"})
    c = client("json")
    call: Callable[..., Any] = getattr(c, operation)
    with pytest.raises(ResponseDecodeError) as info:
        call("Blogs") if operation == "get_table_acl" else call()
    check(info.value, 200)
