"""Unit tests for tablesdk._formats._batch: limits, request building, response reading.

A tiny fake PayloadFormat keeps these tests independent of the real codecs
(tests/wire/test_batch_golden.py runs the real ones too).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

import pytest

import tablesdk._formats._batch as batch_module
from tablesdk._formats._batch import (
    MAX_BATCH_BYTES,
    MAX_BATCH_OPERATIONS,
    BatchOperation,
    BatchOperationKind,
    BatchOperationResult,
    build_batch_request,
    entity_path,
    validate_batch,
)
from tablesdk._formats._batch_answer import parse_batch_response
from tablesdk._entities._edm import EdmType, EntityPayload
from tablesdk._core._errors import (
    ResponseDecodeError,
    BatchError,
    ConflictError,
    PreconditionFailedError,
    ResourceNotFoundError,
    ServerBusyError,
    TableServiceError,
    TableValidationError,
)

from support import FakeFormat

BASE = "https://acct.table.core.windows.net"
K = BatchOperationKind


FMT = FakeFormat(ensure_ascii=False)


def payload(pk: str, rk: str, **props: Any) -> EntityPayload:
    values = {"PartitionKey": pk, "RowKey": rk, **props}
    return EntityPayload(values, {name: EdmType.STRING for name in values})


def op(kind: BatchOperationKind, rk: str, *, pk: str = "p", table: str = "Blogs",
       etag: str | None = None, echo: bool = False, **props: Any) -> BatchOperation:
    body = None if kind in (K.DELETE, K.RETRIEVE) else payload(pk, rk, **props)
    if etag is None and kind in (K.UPDATE, K.MERGE, K.DELETE):
        etag = "*"
    return BatchOperation(kind, table, pk, rk, body, etag, echo_content=echo)


def inserts(count: int, **kw: Any) -> list[BatchOperation]:
    return [op(K.INSERT, f"r{i:03d}", **kw) for i in range(count)]


# ---------------------------------------------------------------- a minimal independent reader


def split_request(body: bytes, content_type: str) -> tuple[list[tuple[str, dict[str, str], bytes]], bool]:
    """(method+url, headers, body) of each inner request, and whether a changeset was used."""
    boundary = content_type.split("boundary=")[1].encode()
    text = body
    assert text.startswith(b"--" + boundary + b"\r\n")
    assert text.endswith(b"\r\n--" + boundary + b"--\r\n")
    inner = text[len(boundary) + 4: -(len(boundary) + 8)]
    head, _, rest = inner.partition(b"\r\n\r\n")
    changeset = head.startswith(b"Content-Type: multipart/mixed; boundary=")
    if changeset:
        cs = head.split(b"boundary=")[1]
        assert rest.startswith(b"--" + cs + b"\r\n") and rest.endswith(b"\r\n--" + cs + b"--")
        chunks = rest[len(cs) + 4: -(len(cs) + 6)].split(b"\r\n--" + cs + b"\r\n")
    else:
        chunks = [inner]
    out = []
    for chunk in chunks:
        mime, _, http = chunk.partition(b"\r\n\r\n")
        assert mime == b"Content-Type: application/http\r\nContent-Transfer-Encoding: binary"
        request_head, _, request_body = http.partition(b"\r\n\r\n")
        lines = request_head.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        out.append((lines[0], headers, request_body))
    return out, changeset


# ---------------------------------------------------------------- validate_batch


def test_limits_are_the_services() -> None:
    assert MAX_BATCH_OPERATIONS == 100
    assert MAX_BATCH_BYTES == 4 * 1024 * 1024


def test_hundred_operations_are_fine() -> None:
    validate_batch(inserts(100))


@pytest.mark.parametrize(
    "operations, field, words",
    [
        ([], "batch", "at least 1 operation"),
        (inserts(101), "batch", "at most 100 operations"),
        ([op(K.INSERT, "a"), op(K.INSERT, "b", pk="q")], "batch", "one PartitionKey"),
        ([op(K.INSERT, "a"), op(K.INSERT, "b", table="Other")], "batch", "one table"),
        ([op(K.INSERT, "a"), op(K.MERGE, "a")], "batch", "only once"),
        ([op(K.RETRIEVE, "a"), op(K.INSERT, "b")], "batch", "exactly one RETRIEVE"),
        ([op(K.INSERT, "b"), op(K.RETRIEVE, "a")], "batch", "exactly one RETRIEVE"),
        ([op(K.RETRIEVE, "a"), op(K.RETRIEVE, "b")], "batch", "exactly one RETRIEVE"),
        ([BatchOperation(K.DELETE, "Blogs", "p", "a", None, None)], "If-Match", "need an ETag"),
        ([BatchOperation(K.UPDATE, "Blogs", "p", "a", payload("p", "a"), "")], "If-Match", "need an ETag"),
        ([BatchOperation(K.MERGE, "Blogs", "p", "a", payload("p", "a"), 'W/"x"\r\nX-Evil: 1')], "If-Match",
         "line breaks"),
        ([BatchOperation(K.INSERT, "Blogs", "p", "a", None, None)], "payload", "needs an entity payload"),
        ([BatchOperation(K.INSERT, "Blogs", "p", "a", payload("q", "a"), None)], "payload", "must be the operation's"),
    ],
)
def test_validation_names_the_limit(operations: list[BatchOperation], field: str, words: str) -> None:
    with pytest.raises(TableValidationError) as info:
        validate_batch(operations)
    assert info.value.field == field
    assert words in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "operations",
    [[], inserts(101), [op(K.INSERT, "a"), op(K.INSERT, "a")], [op(K.INSERT, "a", pk="x"), op(K.INSERT, "b")]],
)
def test_builder_refuses_what_validation_refuses(operations: list[BatchOperation]) -> None:
    serialized: list[EntityPayload] = []

    class Spy(FakeFormat):
        def serialize_entity(self, payload: EntityPayload) -> bytes:
            serialized.append(payload)
            return super().serialize_entity(payload)

    with pytest.raises(TableValidationError):
        build_batch_request(BASE, operations, Spy(), api_version="2019-02-02")
    assert serialized == []  # refused before any work, let alone a request


def test_duplicate_message_names_both_operations() -> None:
    with pytest.raises(TableValidationError, match=r"operations 0 and 2 both address RowKey='a'"):
        validate_batch([op(K.INSERT, "a"), op(K.INSERT, "b"), op(K.DELETE, "a")])


def test_upserts_and_inserts_need_no_etag() -> None:
    validate_batch([op(K.INSERT, "a"), op(K.INSERT_OR_MERGE, "b"), op(K.INSERT_OR_REPLACE, "c")])
    validate_batch([op(K.RETRIEVE, "a")])


# ---------------------------------------------------------------- the 4 MiB limit


def _sized_batch(filler: int) -> list[BatchOperation]:
    ops = [op(K.INSERT, f"r{i:02d}", Text="x" * 40_000) for i in range(99)]
    ops.append(op(K.INSERT, "r99", Text="y" * filler))
    return ops


def test_four_mib_is_measured_on_the_real_body() -> None:
    body, _ = build_batch_request(BASE, _sized_batch(0), FMT, api_version="2019-02-02")
    # One more ASCII character in the last entity is one more byte on the wire:
    # fill the body to exactly 4 MiB, then one byte over.
    exact = MAX_BATCH_BYTES - len(body)
    assert exact > 0
    body, _ = build_batch_request(BASE, _sized_batch(exact), FMT, api_version="2019-02-02")
    assert len(body) == MAX_BATCH_BYTES
    with pytest.raises(TableValidationError) as info:
        build_batch_request(BASE, _sized_batch(exact + 1), FMT, api_version="2019-02-02")
    assert info.value.field == "batch"
    assert "4 MiB (4194304 bytes)" in str(info.value)
    assert "got 4194305 bytes" in str(info.value)


def test_oversized_batch_stops_early() -> None:
    calls = 0

    class Counting(FakeFormat):
        def serialize_entity(self, payload: EntityPayload) -> bytes:
            nonlocal calls
            calls += 1
            return super().serialize_entity(payload)

    big = [op(K.INSERT, f"r{i:02d}", Text="z" * 1_000_000) for i in range(10)]
    with pytest.raises(TableValidationError, match="4 MiB"):
        build_batch_request(BASE, big, Counting(), api_version="2019-02-02")
    assert calls == 5  # the fifth megabyte-sized entity crosses the limit; the rest are never encoded


def test_multibyte_text_counts_in_encoded_bytes() -> None:
    # 1.5 M three-byte characters are 4.5 MB on the wire even though len() is 1.5 M.
    ops = [op(K.INSERT, f"r{i}", Text="中" * 500_000) for i in range(3)]
    with pytest.raises(TableValidationError, match="4 MiB"):
        build_batch_request(BASE, ops, FMT, api_version="2019-02-02")


# ---------------------------------------------------------------- building


def test_change_set_request_layout() -> None:
    ops = [
        op(K.INSERT, "1", Text="new"),
        op(K.UPDATE, "2", etag='W/"datetime\'2009-05-27T12%3A15%3A15.3321531Z\'"', Text="put"),
        op(K.MERGE, "3", etag="*", Text="merge"),
        op(K.DELETE, "4", etag='W/"d"'),
        op(K.INSERT_OR_REPLACE, "5", Text="ior"),
        op(K.INSERT_OR_MERGE, "6", Text="iom"),
        op(K.INSERT, "7", echo=True),
    ]
    body, content_type = build_batch_request(BASE + "/", ops, FMT, api_version="2019-02-02")
    assert content_type.startswith("multipart/mixed; boundary=batch_")
    requests, changeset = split_request(body, content_type)
    assert changeset
    entity = BASE + "/Blogs(PartitionKey='p',RowKey='{}')"
    assert [r[0] for r in requests] == [
        f"POST {BASE}/Blogs HTTP/1.1",
        f"PUT {entity.format(2)} HTTP/1.1",
        f"MERGE {entity.format(3)} HTTP/1.1",
        f"DELETE {entity.format(4)} HTTP/1.1",
        f"PUT {entity.format(5)} HTTP/1.1",
        f"MERGE {entity.format(6)} HTTP/1.1",
        f"POST {BASE}/Blogs HTTP/1.1",
    ]
    headers = [r[1] for r in requests]
    assert [h["Content-ID"] for h in headers] == [str(i) for i in range(1, 8)]
    assert [h.get("If-Match") for h in headers] == [
        None, 'W/"datetime\'2009-05-27T12%3A15%3A15.3321531Z\'"', "*", 'W/"d"', None, None, None,
    ]
    assert [h.get("Prefer") for h in headers] == [
        "return-no-content", None, None, None, None, None, "return-content",
    ]
    assert ["Content-Type" in h for h in headers] == [True, True, True, False, True, True, True]
    for h in headers:
        for name, value in FMT.request_headers().items():
            assert h[name] == value
        assert "x-ms-version" not in h  # that belongs to the outer request
    assert json.loads(requests[0][2]) == {"PartitionKey": "p", "RowKey": "1", "Text": "new"}
    assert requests[3][2] == b""  # DELETE has no body


def test_old_service_versions_get_no_prefer_header() -> None:
    body, content_type = build_batch_request(BASE, [op(K.INSERT, "a")], FMT, api_version="2009-09-19")
    requests, _ = split_request(body, content_type)
    assert "Prefer" not in requests[0][1]


def test_retrieve_goes_outside_any_change_set() -> None:
    body, content_type = build_batch_request(BASE, [op(K.RETRIEVE, "r 1")], FMT, api_version="2019-02-02")
    requests, changeset = split_request(body, content_type)
    assert not changeset
    assert b"changeset" not in body
    line, headers, request_body = requests[0]
    assert line == f"GET {BASE}/Blogs(PartitionKey='p',RowKey='r%201') HTTP/1.1"
    assert headers == FMT.request_headers()
    assert request_body == b""


def test_every_line_ends_in_crlf() -> None:
    body, _ = build_batch_request(BASE, [op(K.INSERT, "a"), op(K.DELETE, "b")], FMT, api_version="2019-02-02")
    assert body.count(b"\n") == body.count(b"\r\n")
    assert b"\r\r" not in body


def test_boundaries_are_uuid_based_and_distinct() -> None:
    first = build_batch_request(BASE, [op(K.INSERT, "a")], FMT, api_version="2019-02-02")
    second = build_batch_request(BASE, [op(K.INSERT, "a")], FMT, api_version="2019-02-02")
    assert first[1] != second[1]
    batch_id = first[1].split("boundary=")[1]
    assert len(batch_id) == len("batch_") + 36
    assert b"boundary=changeset_" in first[0]


def test_boundary_colliding_with_content_is_redrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = "00000000-0000-4000-8000-000000000000"
    fresh = iter([taken, "11111111-1111-4111-8111-111111111111",
                  "22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333"])
    monkeypatch.setattr(batch_module, "_new_boundary_id", lambda: next(fresh))
    # The entity's text contains the first batch boundary the builder will draw.
    ops = [op(K.INSERT, "a", Text=f"--batch_{taken}--")]
    body, content_type = build_batch_request(BASE, ops, FMT, api_version="2019-02-02")
    assert content_type == "multipart/mixed; boundary=batch_22222222-2222-4222-8222-222222222222"
    assert b"boundary=changeset_33333333-3333-4333-8333-333333333333" in body
    requests, _ = split_request(body, content_type)
    assert json.loads(requests[0][2])["Text"] == f"--batch_{taken}--"


def test_changeset_boundary_colliding_with_a_key_is_redrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = iter(["a", "b", "c", "d"])
    monkeypatch.setattr(batch_module, "_new_boundary_id", lambda: next(ids))
    body, content_type = build_batch_request(BASE, [op(K.INSERT, "x", Text="changeset_b")], FMT,
                                             api_version="2019-02-02")
    assert content_type.endswith("batch_c")
    assert b"boundary=changeset_d\r\n" in body


# ---------------------------------------------------------------- keys in URLs


@pytest.mark.parametrize(
    "key, encoded",
    [
        ("o'neil", "o%27%27neil"),
        ("a''b", "a%27%27%27%27b"),
        ("100%", "100%25"),
        ("a%20b", "a%2520b"),
        ("a b", "a%20b"),
        ("a+b&c=d", "a%2Bb%26c%3Dd"),
        ("é中😀", "%C3%A9%E4%B8%AD%F0%9F%98%80"),
        ("(x,y):*", "%28x%2Cy%29%3A%2A"),
        ("", ""),
    ],
)
def test_entity_path_escapes_keys(key: str, encoded: str) -> None:
    path = entity_path("Blogs", key, key)
    assert path == f"Blogs(PartitionKey='{encoded}',RowKey='{encoded}')"
    # Decoding once (what the service does inside a batch) gives the OData literal back.
    assert unquote(path) == "Blogs(PartitionKey='{0}',RowKey='{0}')".format(key.replace("'", "''"))


@pytest.mark.parametrize("key", ["o'neil", "100%", "a b", "é中😀", "it's 50% off"])
def test_keys_in_batch_urls(key: str) -> None:
    ops = [op(K.MERGE, key, pk=key), op(K.DELETE, key + "x", pk=key)]
    body, content_type = build_batch_request(BASE, ops, FMT, api_version="2019-02-02")
    requests, _ = split_request(body, content_type)
    for (line, _, _), rk in zip(requests, (key, key + "x")):
        url = line.split(" ")[1]
        assert " " not in url and url.isascii()
        assert unquote(url) == f"{BASE}/Blogs(PartitionKey='{key.replace(chr(39), chr(39) * 2)}'," \
                               f"RowKey='{rk.replace(chr(39), chr(39) * 2)}')"
    # The body carries the key as text, unescaped.
    assert json.loads(requests[0][2])["RowKey"] == key


def test_kind_methods() -> None:
    assert {kind: kind.method for kind in K} == {
        K.INSERT: "POST", K.UPDATE: "PUT", K.MERGE: "MERGE", K.DELETE: "DELETE",
        K.INSERT_OR_REPLACE: "PUT", K.INSERT_OR_MERGE: "MERGE", K.RETRIEVE: "GET",
    }


# ---------------------------------------------------------------- reading: helpers

OUTER = "batchresponse_0b1c"
INNER = "changesetresponse_9f8e"


def inner(status: str, headers: list[str], body: str = "", *, prefix: str = "") -> str:
    text = "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n" + prefix
    text += f"HTTP/1.1 {status}\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n" + body
    return text


def changeset_response(parts: list[str], *, outer: str = OUTER, cs: str = INNER) -> bytes:
    text = f"--{outer}\r\nContent-Type: multipart/mixed; boundary={cs}\r\n\r\n"
    for part in parts:
        text += f"--{cs}\r\n{part}\r\n"
    text += f"--{cs}--\r\n--{outer}--\r\n"
    return text.encode()


CT = f"multipart/mixed; boundary={OUTER}"


def ok(n: int, etag: str | None = None, *, content_id: bool = True, status: str = "204 No Content") -> str:
    headers = [f"Content-ID: {n}"] if content_id else []
    headers += ["X-Content-Type-Options: nosniff", "DataServiceVersion: 3.0;", f'ETag: {etag or f"W/{n}"}']
    return inner(status, headers)


def error_part(status: str, code: str, message: str, *, content_id: int | None = 2) -> str:
    value = json.dumps({"odata.error": {"code": code, "message": {"lang": "en-US", "value": message}}})
    headers = [f"Content-ID: {content_id}"] if content_id else []
    headers += ["Content-Type: application/json;odata=minimalmetadata;charset=utf-8"]
    return inner(status, headers, value)


# ---------------------------------------------------------------- reading: success


def test_success_maps_one_result_per_operation() -> None:
    ops = inserts(3)
    results = parse_batch_response(changeset_response([ok(1), ok(2), ok(3)]), CT, ops, FMT)
    assert [r.index for r in results] == [0, 1, 2]
    assert [r.status for r in results] == [204, 204, 204]
    assert [r.etag for r in results] == ["W/1", "W/2", "W/3"]
    assert all(r.payload is None for r in results)
    assert results[0].headers["X-Content-Type-Options"] == "nosniff"
    assert isinstance(results[0], BatchOperationResult)


def test_content_id_wins_over_order() -> None:
    ops = inserts(3)
    body = changeset_response([ok(3, "W/c"), ok(1, "W/a"), ok(2, "W/b")])
    assert [r.etag for r in parse_batch_response(body, CT, ops, FMT)] == ["W/a", "W/b", "W/c"]


def test_missing_content_ids_fall_back_to_order() -> None:
    ops = inserts(3)
    body = changeset_response([ok(1, "W/a", content_id=False), ok(3, "W/c"), ok(2, "W/b", content_id=False)])
    assert [r.etag for r in parse_batch_response(body, CT, ops, FMT)] == ["W/a", "W/b", "W/c"]


def test_bogus_content_ids_are_an_undecodable_answer() -> None:
    # Content-IDs that name no operation cannot say which result is whose (issue 22.4).
    ops = inserts(2)
    body = changeset_response([
        inner("204 No Content", ["Content-ID: 7", "ETag: W/a"]),
        inner("204 No Content", ["Content-ID: x", "ETag: W/b"]),
    ])
    with pytest.raises(ResponseDecodeError, match="Content-ID"):
        parse_batch_response(body, CT, ops, FMT)


def test_inserted_entity_body_is_parsed() -> None:
    ops = [op(K.INSERT, "a", echo=True), op(K.DELETE, "b")]
    entity = json.dumps({"odata.etag": 'W/"e"', "PartitionKey": "p", "RowKey": "a", "Text": "x"})
    body = changeset_response([
        inner("201 Created", ["Content-ID: 1", "Content-Type: application/json"], entity),
        inner("204 No Content", ["Content-ID: 2"]),
    ])
    first, second = parse_batch_response(body, CT, ops, FMT)
    assert first.status == 201 and first.payload is not None
    assert first.payload.values == {"PartitionKey": "p", "RowKey": "a", "Text": "x"}
    assert first.etag == 'W/"e"'  # no ETag header: taken from the body
    assert second.etag is None and second.payload is None


def test_insert_201_without_body() -> None:
    results = parse_batch_response(changeset_response([ok(1, status="201 Created")]), CT, inserts(1), FMT)
    assert results[0].status == 201 and results[0].payload is None and results[0].etag == "W/1"


def test_lf_only_line_endings() -> None:
    body = changeset_response([ok(1), ok(2)]).replace(b"\r\n", b"\n")
    assert [r.etag for r in parse_batch_response(body, CT, inserts(2), FMT)] == ["W/1", "W/2"]


def test_query_response_outside_change_set() -> None:
    entity = json.dumps({"PartitionKey": "p", "RowKey": "a", "n": 1})
    body = (f"--{OUTER}\r\n" + inner("200 OK", ["Content-Type: application/json", 'ETag: W/"q"'], entity)
            + f"\r\n--{OUTER}--\r\n").encode()
    (result,) = parse_batch_response(body, CT, [op(K.RETRIEVE, "a")], FMT)
    assert result.status == 200 and result.etag == 'W/"q"'
    assert result.payload is not None and result.payload.values["n"] == 1


def test_body_without_blank_line_after_headers() -> None:
    # Azurite's point query answer: the JSON follows the ETag line directly.
    entity = json.dumps({"PartitionKey": "p", "RowKey": "a"})
    part = ("Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nETag: W/\"q\"\r\n{entity}\r\n\r\n")
    body = f"--{OUTER}\r\n{part}\r\n--{OUTER}--\r\n".encode()
    (result,) = parse_batch_response(body, CT, [op(K.RETRIEVE, "a")], FMT)
    assert result.etag == 'W/"q"' and result.payload is not None and result.payload.values["RowKey"] == "a"


def test_real_chunked_framing_is_removed() -> None:
    raw = changeset_response([ok(1), ok(2)])
    chunked = b""
    for start in range(0, len(raw), 100):
        piece = raw[start:start + 100]
        chunked += f"{len(piece):X}\r\n".encode() + piece + b"\r\n"
    chunked += b"0\r\n\r\n"
    assert [r.etag for r in parse_batch_response(chunked, CT, inserts(2), FMT)] == ["W/1", "W/2"]


def test_chunk_size_lines_around_the_multipart_are_ignored() -> None:
    body = b"1A3\r\n" + changeset_response([ok(1)]) + b"\r\n0\r\n\r\n"
    assert parse_batch_response(body, CT, inserts(1), FMT)[0].etag == "W/1"


def test_boundary_found_when_header_lacks_it() -> None:
    body = changeset_response([ok(1)])
    assert parse_batch_response(body, "multipart/mixed", inserts(1), FMT)[0].etag == "W/1"
    assert parse_batch_response(body, "multipart/mixed; boundary=wrong", inserts(1), FMT)[0].etag == "W/1"


def test_quoted_boundary_parameter() -> None:
    body = changeset_response([ok(1)])
    ct = f'multipart/mixed; charset=utf-8; boundary="{OUTER}"'
    assert parse_batch_response(body, ct, inserts(1), FMT)[0].etag == "W/1"


def test_boundary_lookalikes_inside_content_are_not_delimiters() -> None:
    entity = json.dumps({"PartitionKey": "p", "RowKey": "a", "Text": f"x\n--{INNER}-not\n--{INNER}x"})
    body = changeset_response([inner("201 Created", ["Content-ID: 1", "Content-Type: application/json"], entity)])
    (result,) = parse_batch_response(body, CT, [op(K.INSERT, "a", echo=True)], FMT)
    assert result.payload is not None and result.payload.values["Text"].endswith(f"--{INNER}x")


def test_wrong_number_of_responses_is_an_error() -> None:
    with pytest.raises(BatchError, match="2 operation responses for 3 operations") as info:
        parse_batch_response(changeset_response([ok(1), ok(2)]), CT, inserts(3), FMT)
    assert info.value.failed_index is None
    assert info.value.ambiguous_retry  # which of the three were applied cannot be told


@pytest.mark.parametrize("status", ["100 Continue", "101 Switching Protocols", "302 Found", "304 Not Modified"])
def test_a_part_with_a_1xx_or_3xx_status_is_an_error(status: str) -> None:
    with pytest.raises(BatchError) as info:
        parse_batch_response(changeset_response([ok(1), ok(2, status=status)]), CT, inserts(2), FMT)
    assert info.value.status_code == int(status[:3])


# ---------------------------------------------------------------- reading: failures


def test_failed_change_set_raises_with_index_and_cause() -> None:
    message = "1:The specified entity already exists.\nRequestId:1768245e-0000-4000-8000-000000000001\nTime:2026-11-22T22:52:14.490Z"
    body = changeset_response([error_part("409 Conflict", "EntityAlreadyExists", message)])
    with pytest.raises(BatchError) as info:
        parse_batch_response(body, CT, inserts(3), FMT)
    error = info.value
    assert error.failed_index == 1
    assert error.status_code == 409
    assert error.error_code == "EntityAlreadyExists"
    assert error.message == "The specified entity already exists."
    assert error.request_id == "1768245e-0000-4000-8000-000000000001"
    assert isinstance(error.cause, ConflictError)
    assert error.cause.status_code == 409 and error.cause.error_code == "EntityAlreadyExists"
    assert error.cause.message == "The specified entity already exists."
    assert isinstance(error, TableServiceError)


@pytest.mark.parametrize(
    "status, cause_type",
    [("412 Precondition Failed", PreconditionFailedError), ("404 Not Found", ResourceNotFoundError),
     ("400 Bad Request", TableServiceError), ("503 Server Busy", ServerBusyError)],
)
def test_cause_type_follows_status(status: str, cause_type: type[TableServiceError]) -> None:
    body = changeset_response([error_part(status, "Code", "0:text")])
    with pytest.raises(BatchError) as info:
        parse_batch_response(body, CT, inserts(1), FMT)
    assert type(info.value.cause) is cause_type
    assert info.value.status_code == int(status.split()[0])
    assert info.value.failed_index == 0


def test_message_without_index_gives_none() -> None:
    body = changeset_response([error_part("403 Forbidden", "AuthorizationFailure", "Server failed to authenticate.")])
    with pytest.raises(BatchError) as info:
        parse_batch_response(body, CT, inserts(2), FMT)
    assert info.value.failed_index is None
    assert info.value.message == "Server failed to authenticate."


def test_index_beyond_the_batch_gives_none() -> None:
    body = changeset_response([error_part("400 Bad Request", "InvalidInput", "7:nonsense")])
    with pytest.raises(BatchError) as info:
        parse_batch_response(body, CT, inserts(2), FMT)
    assert info.value.failed_index is None and info.value.message == "nonsense"


def test_error_code_header_wins_and_empty_body_gets_a_message() -> None:
    body = changeset_response([inner("500 Internal Server Error", ["Content-ID: 1", "x-ms-error-code: InternalError"])])
    with pytest.raises(BatchError) as info:
        parse_batch_response(body, CT, inserts(1), FMT)
    assert info.value.error_code == "InternalError"
    assert info.value.message == "HTTP 500 with no error body"


def test_xml_error_body() -> None:
    xml = ('<?xml version="1.0" encoding="utf-8"?><error xmlns="http://schemas.microsoft.com/ado/2007/08/'
           'dataservices/metadata"><code>InvalidDuplicateRow</code><message xml:lang="en-US">1:A command with '
           "RowKey 'g' is already present in the batch.</message></error>")
    body = changeset_response([inner("400 Bad Request", ["Content-Type: application/xml"], xml)])
    with pytest.raises(BatchError) as info:
        parse_batch_response(body, CT, inserts(2), FMT)
    assert (info.value.failed_index, info.value.error_code) == (1, "InvalidDuplicateRow")


def test_stray_line_before_status_line() -> None:
    body = changeset_response([error_part("400 Bad Request", "InvalidInput", "0:too many", content_id=None)])
    body = body.replace(b"binary\r\n\r\nHTTP/1.1", f"binary\r\n\r\n{INNER}\r\nHTTP/1.1".encode())
    with pytest.raises(BatchError) as info:
        parse_batch_response(body, CT, inserts(2), FMT)
    assert (info.value.failed_index, info.value.error_code, info.value.message) == (0, "InvalidInput", "too many")


def test_not_a_multipart_body() -> None:
    error = json.dumps({"odata.error": {"code": "InvalidInput", "message": {"value": "0:bad batch"}}})
    with pytest.raises(BatchError) as info:
        parse_batch_response(error.encode(), "application/json", inserts(1), FMT)
    assert (info.value.failed_index, info.value.error_code, info.value.message) == (0, "InvalidInput", "bad batch")
    assert info.value.ambiguous_retry  # a 202 that is no batch answer says nothing of the outcome
    with pytest.raises(BatchError, match="not a multipart body"):
        parse_batch_response(b"", "", inserts(1), FMT)


def test_a_pre_encoded_body_is_sent_verbatim_instead_of_reserializing() -> None:
    encoded = op(K.INSERT, "a", N=1)
    encoded.body = b'{"PartitionKey":"p","RowKey":"a","Pre":"encoded"}'
    plain = op(K.INSERT, "b", N=2)
    body, content_type = build_batch_request(BASE, [encoded, plain], FMT, api_version="2019-02-02")
    parts, _ = split_request(body, content_type)
    assert parts[0][2] == encoded.body
    assert parts[1][2] == FMT.serialize_entity(plain.payload)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", [K.INSERT, K.UPDATE, K.MERGE, K.DELETE, K.INSERT_OR_MERGE, K.INSERT_OR_REPLACE])
def test_a_batch_part_is_the_operation_request_written_out(kind: BatchOperationKind) -> None:
    from tablesdk._formats._batch import operation_request, prefer_value

    operation = op(kind, "r1")
    request = operation_request(operation, FMT, prefer=prefer_value("2019-02-02", operation.echo_content))
    body, content_type = build_batch_request(BASE, [operation], FMT, api_version="2019-02-02")
    ((line, headers, part_body),), _ = split_request(body, content_type)
    assert line == f"{request.method} {BASE}/{request.path} HTTP/1.1"
    assert all(headers[name] == value for name, value in request.headers.items())
    assert part_body == (request.body or b"")
