"""A small stateful fake of the Table service's ``$batch`` endpoint, for the bulk tests.

It parses each multipart request, applies the change set atomically (insert
refuses existing entities, merge and replace upsert), and answers like Azurite
(one inner ``204`` with an ETag per operation, or one inner error whose message
starts with the failing operation's index). Tests can make it answer ServerBusy,
refuse particular RowKeys, or fail a whole table. It serves the sync client
through ``responses`` (pass the mock) and any client through :meth:`FakeBatchService.answer`
(a :class:`~tablesdk._http.MockSender` handler, also awaited by the async tests' sender).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import requests
import responses
import urllib3.exceptions
from fake_service import ENDPOINT

from tablesdk._http import HttpRequest, HttpResponse, MockSender

T = "Bulk"

@dataclass
class SentBatch:
    """One ``$batch`` request as the fake saw it."""

    size: int  # bytes of the request body, as sent
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


_REASONS = {400: "Bad Request", 404: "Not Found", 409: "Conflict", 500: "Internal Server Error", 503: "Service Unavailable"}


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
        self.missing_tables: set[str] = set()
        self.ambiguous_once = False  # commit the next batch but answer 500, as a lost response would
        self.refuse_once = False  # refuse the next connection: the request never reaches the service
        self._etags = itertools.count(1)
        if mock is not None:
            mock.add_callback("POST", f"{ENDPOINT}/$batch", callback=self._handle)

    def answer(self, request: HttpRequest) -> HttpResponse:
        """The answer to ``request`` as an :class:`HttpResponse` (a MockSender handler)."""
        status, headers, body = self._handle(request)
        return MockSender.response(status, body, headers)

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
                methods=[method for method, _url, _headers, _entity in operations],
                keys=[(e["PartitionKey"], e["RowKey"]) for _m, _u, _h, e in operations if e is not None],
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
        etags = []
        for index, (method, url, _headers, entity) in enumerate(operations):
            assert entity is not None
            table = unquote(urlsplit(url).path).rsplit("/", 1)[-1].split("(", 1)[0]
            key = (table, entity["PartitionKey"], entity["RowKey"])
            failure: tuple[int, str, str] | None = None
            if table in self.missing_tables:
                failure = (404, "TableNotFound", "The table specified does not exist.")
            elif entity["RowKey"] in self.poison:
                failure = self.poison[entity["RowKey"]]
            elif method == "POST" and key in staged:
                failure = (409, "EntityAlreadyExists", "The specified entity already exists.")
            if failure is not None:
                status, code, message = failure
                return batch_reply([inner_part(
                    f"{status} {_REASONS[status]}",
                    {"Content-ID": str(index + 1), "Content-Type": "application/json;odata=minimalmetadata"},
                    _error_json(code, f"{index}:{message}"),
                )])
            props = {k: v for k, v in entity.items() if k not in ("PartitionKey", "RowKey")}
            if method == "MERGE" and key in staged:
                props = {**staged[key], **props}
            staged[key] = props
            etags.append(f"W/\"datetime'2026-01-01T00%3A00%3A{next(self._etags)}Z'\"")
        self.entities = staged
        if self.ambiguous_once:
            self.ambiguous_once = False
            return 500, {"Content-Type": "application/json", "x-ms-error-code": "InternalError"}, _error_json(
                "InternalError", "The server encountered an internal error."
            )
        return batch_reply([
            inner_part("204 No Content", {"Content-ID": str(number), "ETag": etag}) for number, etag in enumerate(etags, 1)
        ])

    def keys(self, table: str = T) -> set[tuple[str, str]]:
        return {(pk, rk) for (t, pk, rk) in self.entities if t == table}
