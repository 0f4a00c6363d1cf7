"""A small stateful fake of the Table service's ``$batch`` endpoint, for the bulk tests.

It parses each multipart request, applies the change set atomically (insert
refuses existing entities, merge and replace upsert), and answers like Azurite
(one inner ``204`` with an ETag per operation, or one inner error whose message
starts with the failing operation's index). Tests can make it answer ServerBusy,
refuse particular RowKeys, or fail a whole table's batches. Deletes in a batch are applied
with their If-Match (404 for an entity not there, 412 for another ETag), and a key-only
scan is answered from the entities in key order, ``page_size`` at a time with
continuation (``on_query`` is called before each page). It serves the sync client
through ``responses`` (pass the mock) and any client through :meth:`FakeBatchService.answer`
(a :class:`~tablesdk._pipeline._http.MockSender` handler, also awaited by the async tests' sender).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import uuid
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable
from urllib.parse import parse_qs, unquote, urlsplit

import requests
import responses
import urllib3.exceptions
from fake_service import ENDPOINT

from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender

T = "Bulk"

_ADDRESSED = re.compile(r"\(PartitionKey='(.*)',RowKey='(.*)'\)$")
_SCAN = re.compile(r"/(\w+)\(\)$")


def _operation_key(url: str, entity: dict[str, Any] | None) -> tuple[str, str, str]:
    """(table, PartitionKey, RowKey) of one operation: from its body, else from its URL."""
    path = unquote(urlsplit(url).path).rsplit("/", 1)[-1]
    table = path.split("(", 1)[0]
    if entity is not None:
        return table, entity["PartitionKey"], entity["RowKey"]
    match = _ADDRESSED.search(path)
    assert match is not None, f"no keys in {url}"
    return table, match.group(1).replace("''", "'"), match.group(2).replace("''", "'")

@dataclass
class SentBatch:
    """One ``$batch`` request as the fake saw it."""

    size: int  # bytes of the request body, as sent
    url: str
    methods: list[str]
    keys: list[tuple[str, str]]
    tables: set[str]
    headers: dict[str, str]
    inner_headers: list[dict[str, str]]


def _parse_batch(body: bytes) -> list[tuple[str, str, dict[str, str], dict[str, Any] | None]]:
    text = body.decode("utf-8")
    match = re.search(r"boundary=(changeset_[0-9a-f-]+)", text)
    assert match is not None, "no change set in the batch"
    operations = []
    for part in text.split("--" + match.group(1))[1:-1]:
        _part_headers, _, http = part.lstrip("\r\n").partition("\r\n\r\n")
        head, _, entity = http.partition("\r\n\r\n")
        lines = head.split("\r\n")
        method, url, _version = lines[0].split(" ")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        entity = entity.removesuffix("\r\n")
        operations.append((method, url, headers, json.loads(entity) if entity else None))
    return operations


def inner_part(status: str, headers: dict[str, str], body: str = "") -> str:
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return (
        "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        f"HTTP/1.1 {status}\r\n{head}\r\n{body}"
    )


def batch_reply(parts: list[str]) -> tuple[int, dict[str, str], str]:
    outer, inner = f"batchresponse_{uuid.uuid4()}", f"changesetresponse_{uuid.uuid4()}"
    body = (
        f"--{outer}\r\nContent-Type: multipart/mixed; boundary={inner}\r\n\r\n"
        + "".join(f"--{inner}\r\n{part}\r\n" for part in parts)
        + f"--{inner}--\r\n--{outer}--\r\n"
    )
    return 202, {"Content-Type": f"multipart/mixed; boundary={outer}"}, body


_REASONS = {
    400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 412: "Precondition Failed",
    500: "Internal Server Error", 503: "Service Unavailable",
}


def _error_json(code: str, message: str) -> str:
    return json.dumps({"odata.error": {"code": code, "message": {"lang": "en-US", "value": message}}})


class FakeBatchService:
    """Entities by (table, pk, rk) -> properties; answers ``$batch`` like Azurite does."""

    def __init__(self, mock: responses.RequestsMock | None = None) -> None:
        self.lock = threading.Lock()
        self.entities: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.sent: list[SentBatch] = []
        self.poison: dict[str, tuple[int, str, str]] = {}  # RowKey -> (status, code, message)
        self.busy: list[tuple[int, str]] = []  # next replies: ("outer"|"inner", status) as (status, where)
        self.missing_tables: set[str] = set()  # batches find no table (a scan still reads it, as before a delete)
        self.etags: dict[tuple[str, str, str], str] = {}
        self.page_size = 1000
        self.on_query: Callable[[int], None] | None = None  # called with the page's number (1-based)
        self.queries = 0
        self.ambiguous_once = False  # commit the next batch but answer 500, as a lost response would
        self.refuse_once = False  # refuse the next connection: the request never reaches the service
        self._etags = itertools.count(1)
        if mock is not None:
            mock.add_callback("POST", f"{ENDPOINT}/$batch", callback=self._handle)

    def answer(self, request: HttpRequest) -> HttpResponse:
        """The answer to ``request`` as an :class:`HttpResponse` (a MockSender handler)."""
        scan = _SCAN.search(unquote(urlsplit(request.url).path))
        if request.method == "GET" and scan is not None:
            status, headers, body = self._scan(scan.group(1), parse_qs(urlsplit(request.url).query))
        else:
            status, headers, body = self._handle(request)
        return MockSender.response(status, body, headers)

    def put(self, entities: list[Any], table: str = T) -> None:
        """Store ``entities`` (objects with PartitionKey, RowKey and properties) as they are."""
        for entity in entities:
            props = dict(entity)
            key = (table, entity.PartitionKey, entity.RowKey)
            self.entities[key] = props
            self.etags[key] = self._new_etag()

    def _new_etag(self) -> str:
        return f"W/\"datetime'2026-01-01T00%3A00%3A{next(self._etags)}Z'\""

    def _scan(self, table: str, params: dict[str, list[str]]) -> tuple[int, dict[str, str], str]:
        self.queries += 1
        if self.on_query is not None:
            self.on_query(self.queries)
        with self.lock:
            keys = sorted(key for key in self.entities if key[0] == table)
        after = (table, params.get("NextPartitionKey", [""])[0], params.get("NextRowKey", [""])[0])
        start = next((number for number, key in enumerate(keys) if key >= after), len(keys))
        page = keys[start:start + self.page_size]
        value = [{"odata.etag": self.etags[key], "PartitionKey": key[1], "RowKey": key[2],
                  "Timestamp": "2026-01-01T00:00:00Z"} for key in page]
        headers = {"Content-Type": "application/json;odata=minimalmetadata"}
        if start + self.page_size < len(keys):
            _table, headers["x-ms-continuation-NextPartitionKey"], headers["x-ms-continuation-NextRowKey"] = (
                keys[start + self.page_size]
            )
        return 200, headers, json.dumps({"value": value})

    def _handle(self, request: requests.PreparedRequest | HttpRequest) -> tuple[int, dict[str, str], str]:
        if self.refuse_once:
            self.refuse_once = False
            raise requests.ConnectionError(urllib3.exceptions.MaxRetryError(
                None, "/", urllib3.exceptions.NewConnectionError(None, "[Errno 111] Connection refused")  # type: ignore[arg-type]
            ))
        body = request.body if isinstance(request.body, bytes) else (request.body or "").encode()
        operations = _parse_batch(body)
        with self.lock:
            self.sent.append(SentBatch(
                size=len(body),
                url=str(request.url),
                methods=[method for method, _url, _headers, _entity in operations],
                keys=[_operation_key(url, e)[1:] for _m, url, _h, e in operations],
                tables={unquote(urlsplit(url).path).rsplit("/", 1)[-1].split("(", 1)[0] for _m, url, _h, _e in operations},
                headers=dict(request.headers),
                inner_headers=[headers for _m, _u, headers, _e in operations],
            ))
            if self.busy:
                status, where = self.busy.pop(0)
                error = _error_json("ServerBusy", "The server is busy.")
                if where == "outer":
                    return status, {"Content-Type": "application/json", "x-ms-error-code": "ServerBusy"}, error
                return batch_reply([inner_part(f"{status} {_REASONS[status]}", {"Content-Type": "application/json"}, error)])
            return self._apply(operations)

    def _apply(self, operations: list[tuple[str, str, dict[str, str], dict[str, Any] | None]]) -> tuple[int, dict[str, str], str]:
        staged = dict(self.entities)
        etags: list[str | None] = []
        staged_etags = dict(self.etags)
        for index, (method, url, headers, entity) in enumerate(operations):
            key = _operation_key(url, entity)
            table, _pk, row_key = key
            failure: tuple[int, str, str] | None = None
            if table in self.missing_tables:
                failure = (404, "TableNotFound", "The table specified does not exist.")
            elif row_key in self.poison:
                failure = self.poison[row_key]
            elif method == "POST" and key in staged:
                failure = (409, "EntityAlreadyExists", "The specified entity already exists.")
            elif method == "DELETE" and key not in staged:
                failure = (404, "ResourceNotFound", "The specified resource does not exist.")
            elif method == "DELETE" and headers.get("If-Match") not in ("*", staged_etags.get(key)):
                failure = (412, "UpdateConditionNotSatisfied", "The update condition specified in the request was not satisfied.")
            if failure is not None:
                status, code, message = failure
                return batch_reply([inner_part(
                    f"{status} {_REASONS[status]}",
                    {"Content-ID": str(index + 1), "Content-Type": "application/json;odata=minimalmetadata"},
                    _error_json(code, f"{index}:{message}"),
                )])
            if method == "DELETE":
                del staged[key]
                etags.append(None)
                continue
            assert entity is not None
            props = {k: v for k, v in entity.items() if k not in ("PartitionKey", "RowKey")}
            if method == "MERGE" and key in staged:
                props = {**staged[key], **props}
            staged[key] = props
            staged_etags[key] = etag = self._new_etag()
            etags.append(etag)
        self.entities = staged
        self.etags = {key: etag for key, etag in staged_etags.items() if key in staged}
        if self.ambiguous_once:
            self.ambiguous_once = False
            return 500, {"Content-Type": "application/json", "x-ms-error-code": "InternalError"}, _error_json(
                "InternalError", "The server encountered an internal error."
            )
        return batch_reply([
            inner_part("204 No Content", {"Content-ID": str(number), **({"ETag": etag} if etag else {})})
            for number, etag in enumerate(etags, 1)
        ])

    def keys(self, table: str = T) -> set[tuple[str, str]]:
        return {(pk, rk) for (t, pk, rk) in self.entities if t == table}
