"""Golden batch requests and responses (tests/wire/data/batch_*).

* ``batch_whitepaper_request.http``: the white paper's entity group transaction
  example (insert, delete and update of blogs in partition Channel_19) as this
  SDK writes it, byte for byte, with fixed boundaries and a fake codec.
* ``batch_whitepaper_error_response.txt``: the white paper's batch error
  response, copied as printed (with the chunk size line ``6E7`` and the final
  ``0``).
* ``batch_azurite_*.http``: answers recorded from Azurite 3.37.0 to requests
  built by tablesdk._formats._batch (first line: the outer Content-Type header, then a
  blank line, then the body as received).
"""

from __future__ import annotations

import email
import email.policy
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

import tablesdk._formats._batch as batch_module
from tablesdk._formats._batch import (
    BatchOperation,
    BatchOperationKind,
    build_batch_request,
)
from tablesdk._formats._batch_answer import parse_batch_response
from tablesdk._entities._edm import EdmType, EntityPayload
from tablesdk._core._errors import (
    BatchError,
    ConflictError,
    PreconditionFailedError,
    ResourceNotFoundError,
    TableServiceError,
)
from tablesdk._formats import PayloadFormat

from support import FakeFormat

DATA = Path(__file__).parent / "data"
K = BatchOperationKind
BASE = "https://myaccount.table.core.windows.net"


FAKE = FakeFormat()


def _real_formats() -> list[Any]:
    formats: list[Any] = []
    for name in ("json", "atom"):
        try:
            from tablesdk._formats import get_format

            formats.append(pytest.param(get_format(name), id=name))
        except ImportError:  # pragma: no cover - codec not written yet
            pass
    return formats


ALL_FORMATS = [pytest.param(FAKE, id="fake"), *_real_formats()]


# ---------------------------------------------------------------- the white paper's example

ETAG_DELETE = "W/\"datetime'2009-04-30T20%3A44%3A09.5789464Z'\""
ETAG_UPDATE = "W/\"datetime'2009-04-30T20%3A44%3A10.1234567Z'\""


def _blog(row_key: str, text: str, rating: int) -> EntityPayload:
    values: dict[str, Any] = {"PartitionKey": "Channel_19", "RowKey": row_key, "Text": text, "Rating": rating}
    types = {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "Text": EdmType.STRING,
             "Rating": EdmType.INT32}
    return EntityPayload(values, types)


def whitepaper_operations() -> list[BatchOperation]:
    """AddObject(new blog), DeleteObject(old blog), UpdateObject(Rating++): one change set."""
    return [
        BatchOperation(K.INSERT, "Blogs", "Channel_19", "Nov-01", _blog("Nov-01", "A new post", 0), None),
        BatchOperation(K.DELETE, "Blogs", "Channel_19", "Oct-01", None, ETAG_DELETE),
        BatchOperation(K.MERGE, "Blogs", "Channel_19", "Oct-29", _blog("Oct-29", "Hi there", 4), ETAG_UPDATE),
    ]


GOLDEN_BATCH_ID = "batch_a1e3ef3c-5e0b-4a3c-9d7c-6c1c2f0d8e01"
GOLDEN_CHANGESET_ID = "changeset_4c3b2a19-7d6e-4f5a-8b9c-0d1e2f3a4b5c"


def whitepaper_request(fmt: PayloadFormat) -> tuple[bytes, str]:
    ids = iter([GOLDEN_BATCH_ID[6:], GOLDEN_CHANGESET_ID[10:]])
    original = batch_module._new_boundary_id
    batch_module._new_boundary_id = lambda: next(ids)
    try:
        return build_batch_request(BASE, whitepaper_operations(), fmt, api_version="2019-02-02")
    finally:
        batch_module._new_boundary_id = original


def _read_with_stdlib(body: bytes, content_type: str) -> list[tuple[str, str, dict[str, str], bytes]]:
    """(method, url, headers, body) of each inner request, read with the stdlib email parser."""
    message: Any = email.message_from_bytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body, policy=email.policy.compat32
    )
    assert message.is_multipart()
    changeset: Any
    (changeset,) = message.get_payload()
    assert changeset.get_content_type() == "multipart/mixed"
    assert changeset.get_boundary().startswith("changeset_")
    requests = []
    part: Any
    for part in changeset.get_payload():
        assert part.get_content_type() == "application/http"
        assert part["Content-Transfer-Encoding"] == "binary"
        raw: bytes = part.get_payload(decode=True)
        head, _, request_body = raw.partition(b"\r\n\r\n")
        request_line, *header_lines = head.decode().split("\r\n")
        method, url, version = request_line.split(" ")
        assert version == "HTTP/1.1"
        headers = dict(line.split(": ", 1) for line in header_lines)
        requests.append((method, url, headers, request_body))
    return requests


def test_whitepaper_request_matches_golden_bytes() -> None:
    body, content_type = whitepaper_request(FAKE)
    assert content_type == f"multipart/mixed; boundary={GOLDEN_BATCH_ID}"
    assert body == (DATA / "batch_whitepaper_request.http").read_bytes()


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_whitepaper_request_parses_back(fmt: PayloadFormat) -> None:
    body, content_type = whitepaper_request(fmt)
    requests = _read_with_stdlib(body, content_type)
    entity = f"{BASE}/Blogs(PartitionKey='Channel_19',RowKey='{{}}')"
    assert [(m, u) for m, u, _, _ in requests] == [
        ("POST", f"{BASE}/Blogs"),
        ("DELETE", entity.format("Oct-01")),
        ("MERGE", entity.format("Oct-29")),
    ]
    insert, delete, merge = (r[2] for r in requests)
    assert [h["Content-ID"] for h in (insert, delete, merge)] == ["1", "2", "3"]
    for headers in (insert, delete, merge):
        for name, value in fmt.request_headers().items():
            assert headers[name] == value
    assert insert["Content-Type"] == merge["Content-Type"] == fmt.content_type
    assert "Content-Type" not in delete
    assert insert["Prefer"] == "return-no-content"
    assert "If-Match" not in insert
    assert delete["If-Match"] == ETAG_DELETE and merge["If-Match"] == ETAG_UPDATE
    # Bodies are exactly what the codec writes (the Atom codec stamps <updated>,
    # so compare what it parses back to).
    ops = whitepaper_operations()
    assert requests[1][3] == b""
    for (_, _, _, request_body), operation in zip((requests[0], requests[2]), (ops[0], ops[2])):
        assert operation.payload is not None
        if fmt.name == "atom":
            parsed = fmt.parse_entity(request_body)
            assert parsed.values["RowKey"] == operation.payload.values["RowKey"]
            assert parsed.values["Rating"] == operation.payload.values["Rating"]
        else:
            assert request_body == fmt.serialize_entity(operation.payload)


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_whitepaper_request_line_endings(fmt: PayloadFormat) -> None:
    body, _ = whitepaper_request(fmt)
    ops = whitepaper_operations()
    # Outside the entity bodies (which a codec may write with bare LFs inside
    # values) every line ends in CRLF.
    framing = body
    for operation in (ops[0], ops[2]):
        assert operation.payload is not None
        if fmt.name != "atom":
            framing = framing.replace(fmt.serialize_entity(operation.payload), b"")
    if fmt.name == "atom":
        framing = re.sub(rb"<\?xml.*?</entry>", b"", framing, flags=re.DOTALL)
    assert framing.count(b"\n") == framing.count(b"\r\n") > 0
    assert body.startswith(f"--{GOLDEN_BATCH_ID}\r\n".encode())
    assert body.endswith(f"\r\n--{GOLDEN_CHANGESET_ID}--\r\n--{GOLDEN_BATCH_ID}--\r\n".encode())
    assert b"\r\n\r\n\r\n--" + GOLDEN_CHANGESET_ID.encode() in body  # the DELETE's empty body


def test_whitepaper_keys_survive_url_decoding() -> None:
    body, content_type = whitepaper_request(FAKE)
    for _, url, _, _ in _read_with_stdlib(body, content_type)[1:]:
        assert unquote(url) == url  # nothing here needed escaping


# ---------------------------------------------------------------- responses


def _load_http(name: str) -> tuple[str, bytes]:
    """(Content-Type, body) of a recorded response file."""
    return _load_http_bytes((DATA / name).read_bytes())


def _whitepaper_error(crlf: bool) -> tuple[str, bytes]:
    raw = (DATA / "batch_whitepaper_error_response.txt").read_bytes()
    if crlf:
        raw = raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    return _load_http_bytes(raw)


def _load_http_bytes(raw: bytes) -> tuple[str, bytes]:
    """Split a stored response at its first blank line: (Content-Type, body)."""
    match = re.search(rb"\r?\n\r?\n", raw)
    assert match is not None
    head, body = raw[: match.start()], raw[match.end():]
    content_type = ""
    for line in head.decode().splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-type":
            content_type = value.strip()
    return content_type, body


def test_whitepaper_trace_is_stored_as_printed() -> None:
    raw = (DATA / "batch_whitepaper_error_response.txt").read_text()
    assert raw.startswith("HTTP/1.1 202 Accepted\n")
    assert "\n6E7\n--batchresponse_7ab1553a-7dd6-44e7-8107-bf1ea1ab1876\n" in raw
    assert raw.endswith("--batchresponse_7ab1553a-7dd6-44e7-8107-bf1ea1ab1876--\n\n0\n")


@pytest.mark.parametrize("crlf", [False, True], ids=["lf-as-printed", "crlf"])
def test_whitepaper_error_response(crlf: bool) -> None:
    content_type, body = _whitepaper_error(crlf)
    assert content_type == "multipart/mixed; boundary=batchresponse_7ab1553a-7dd6-44e7-8107-bf1ea1ab1876"
    assert body.startswith(b"6E7")
    with pytest.raises(BatchError) as info:
        parse_batch_response(body, content_type, whitepaper_operations(), FAKE)
    error = info.value
    assert error.failed_index == 1
    assert error.error_code == "InvalidInput"
    assert error.status_code == 400
    assert error.message == "One of the request inputs is not valid."
    assert type(error.cause) is TableServiceError
    assert error.cause.status_code == 400 and error.cause.error_code == "InvalidInput"


def test_whitepaper_error_index_does_not_come_from_content_id() -> None:
    # The inner part says Content-ID: 4 (1-based), the message says 1 (0-based):
    # the message is the one that names the failed operation.
    _, body = _whitepaper_error(True)
    assert b"Content-ID: 4" in body
    with pytest.raises(BatchError) as info:
        parse_batch_response(body, "multipart/mixed", [*whitepaper_operations()] * 2, FAKE)
    assert info.value.failed_index == 1


def test_azurite_409_conflict() -> None:
    content_type, body = _load_http("batch_azurite_409_response.http")
    ops = [BatchOperation(K.INSERT, "t", "pk", rk, EntityPayload({"PartitionKey": "pk", "RowKey": rk}, {}), None)
           for rk in ("f1", "n000", "f2")]
    with pytest.raises(BatchError) as info:
        parse_batch_response(body, content_type, ops, FAKE)
    error = info.value
    assert (error.failed_index, error.error_code, error.status_code) == (1, "EntityAlreadyExists", 409)
    assert error.message == "The specified entity already exists."
    assert error.request_id == "ceafa21d-94df-4840-82df-afb58f8ab5c6"
    assert isinstance(error.cause, ConflictError)
    assert error.cause.error_code == "EntityAlreadyExists"


def test_azurite_malformed_101_operation_response() -> None:
    content_type, body = _load_http("batch_azurite_101_response.http")
    # The stray line that breaks http.client is really there.
    assert re.search(rb"binary\r\n\r\nchangesetresponse_[0-9a-f-]+\r\nHTTP/1.1 400", body)
    ops = [BatchOperation(K.INSERT, "t", "pk", f"x{i:03d}", EntityPayload({}, {}), None) for i in range(101)]
    with pytest.raises(BatchError) as info:
        parse_batch_response(body, content_type, ops, FAKE)
    error = info.value
    assert (error.failed_index, error.error_code, error.status_code) == (0, "InvalidInput", 400)
    assert error.message == "The batch request operation exceeds the maximum 100 changes per change set."


def _azurite_100_operations() -> list[BatchOperation]:
    """The mix that produced batch_azurite_100_mixed_response.http (keys as sent)."""
    def p(rk: str) -> EntityPayload:
        return EntityPayload({"PartitionKey": "pk", "RowKey": rk}, {})

    ops = [BatchOperation(K.INSERT, "t", "pk", f"n{i:03d}", p(f"n{i:03d}"), None) for i in range(40)]
    ops += [BatchOperation(K.UPDATE, "t", "pk", f"s{i:03d}", p(f"s{i:03d}"), "*") for i in range(10)]
    ops += [BatchOperation(K.MERGE, "t", "pk", f"s{i:03d}", p(f"s{i:03d}"), "*") for i in range(10, 20)]
    ops += [BatchOperation(K.DELETE, "t", "pk", f"s{i:03d}", None, "*") for i in range(20, 30)]
    ops += [BatchOperation(K.INSERT_OR_REPLACE, "t", "pk", f"u{i:03d}", p(f"u{i:03d}"), None) for i in range(20)]
    ops += [BatchOperation(K.INSERT_OR_MERGE, "t", "pk", f"v{i:03d}", p(f"v{i:03d}"), None) for i in range(10)]
    return ops


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_azurite_100_operation_success(fmt: PayloadFormat) -> None:
    content_type, body = _load_http("batch_azurite_100_mixed_response.http")
    ops = _azurite_100_operations()
    results = parse_batch_response(body, content_type, ops, fmt)
    assert len(results) == 100
    assert [r.index for r in results] == list(range(100))
    assert all(r.status == 204 and r.payload is None for r in results)
    # ETags in the order they appear in the body, read independently.
    etags = [m.decode() for m in re.findall(rb"\r\nETag: ([^\r\n]+)", body)]
    written = [r for r, o in zip(results, ops) if o.kind is not K.DELETE]
    assert [r.etag for r in written] == etags and len(etags) == 90
    assert all(r.etag is None for r, o in zip(results, ops) if o.kind is K.DELETE)
    # Azurite sends no Content-ID here, so order alone maps them; the 40
    # inserts' responses carry a Location naming the entity of their operation.
    for result, operation in zip(results, ops):
        assert "Content-ID" not in result.headers
        location = result.headers.get("Location")
        if operation.kind is K.INSERT:
            assert location is not None and location.endswith(f"(PartitionKey='pk',RowKey='{operation.row_key}')")
        else:
            assert location is None


def test_azurite_insert_201_without_body() -> None:
    content_type, body = _load_http("batch_azurite_insert_201_response.http")
    op = BatchOperation(K.INSERT, "t", "e", "e1", EntityPayload({"PartitionKey": "e", "RowKey": "e1"}, {}), None,
                        echo_content=True)
    (result,) = parse_batch_response(body, content_type, [op], FAKE)
    assert result.status == 201 and result.payload is None
    assert result.etag == "W/\"datetime'2026-11-23T09%3A18%3A32.2989808Z'\""


@pytest.mark.parametrize("fmt", [p for p in ALL_FORMATS if p.id != "atom"])
def test_azurite_point_query(fmt: PayloadFormat) -> None:
    content_type, body = _load_http("batch_azurite_query_response.http")
    op = BatchOperation(K.RETRIEVE, "t", "pk", "n001", None, None)
    (result,) = parse_batch_response(body, content_type, [op], fmt)
    assert result.status == 200
    assert result.etag == "W/\"datetime'2026-11-23T09%3A18%3A32.2329159Z'\""
    assert result.payload is not None
    assert result.payload.values["RowKey"] == "n001" and result.payload.values["n"] == 1


@pytest.mark.parametrize(
    "name, status, code, cause",
    [
        ("batch_azurite_query_404_response.http", 404, "ResourceNotFound", ResourceNotFoundError),
        ("batch_azurite_412_response.http", 412, "UpdateConditionNotSatisfied", PreconditionFailedError),
    ],
)
def test_azurite_single_operation_failures(name: str, status: int, code: str, cause: type[Exception]) -> None:
    content_type, body = _load_http(name)
    op = BatchOperation(K.MERGE, "t", "pk", "n000", EntityPayload({}, {}), "*")
    with pytest.raises(BatchError) as info:
        parse_batch_response(body, content_type, [op], FAKE)
    assert (info.value.failed_index, info.value.status_code, info.value.error_code) == (0, status, code)
    assert isinstance(info.value.cause, cause)
