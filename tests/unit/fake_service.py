"""A small stateful fake of the Table service's JSON entity API, served through ``responses``.

It keeps entities in memory with ETags and enforces If-Match, so the context's
tracking can be tested on the wire without a server. It records every request.
Batches are answered by ``batch_handler`` when a test sets one.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import requests
import responses

ENDPOINT = "http://127.0.0.1:10002/devstoreaccount1"
CONNECTION_STRING = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    f"TableEndpoint={ENDPOINT};"
)

_POINT = re.compile(r"^/devstoreaccount1/(\w+)\(PartitionKey='(.*)',RowKey='(.*)'\)$")
_QUERY = re.compile(r"^/devstoreaccount1/(\w+)\(\)$")
_INSERT = re.compile(r"^/devstoreaccount1/(\w+)$")

Reply = tuple[int, dict[str, str], str]


def error_reply(status: int, code: str, message: str) -> Reply:
    body = json.dumps({"odata.error": {"code": code, "message": {"lang": "en-US", "value": message}}})
    return status, {"Content-Type": "application/json;odata=minimalmetadata", "x-ms-error-code": code}, body


class FakeTableService:
    """Entities by (table, pk, rk) -> (properties dict as JSON values, etag)."""

    def __init__(self, mock: responses.RequestsMock) -> None:
        self.entities: dict[tuple[str, str, str], tuple[dict[str, Any], str]] = {}
        self.requests: list[requests.PreparedRequest] = []
        self.fail_next: list[Reply] = []  # replies to send before handling normally
        self.batch_handler: Callable[[requests.PreparedRequest], Reply] | None = None
        self._versions = itertools.count(1)
        for method in ("GET", "POST", "PUT", "MERGE", "DELETE"):
            mock.add_callback(method, re.compile(re.escape(ENDPOINT) + r"/.*"), callback=self._handle)

    def new_etag(self) -> str:
        return f"W/\"datetime'2026-01-01T00%3A00%3A{next(self._versions):02d}Z'\""

    def put(self, table: str, pk: str, rk: str, **props: Any) -> str:
        etag = self.new_etag()
        self.entities[(table, pk, rk)] = ({"PartitionKey": pk, "RowKey": rk, **props}, etag)
        return etag

    def props(self, table: str, pk: str, rk: str) -> dict[str, Any]:
        return {k: v for k, v in self.entities[(table, pk, rk)][0].items() if k not in ("PartitionKey", "RowKey")}

    def methods(self) -> list[str]:
        """'METHOD last-path-segment' of every request, for asserting the order of the wire."""
        return [f"{r.method} {unquote(urlsplit(r.url or '').path).rsplit('/', 1)[-1]}" for r in self.requests]

    def _handle(self, request: requests.PreparedRequest) -> Reply:
        self.requests.append(request)
        if self.fail_next:
            return self.fail_next.pop(0)
        parts = urlsplit(request.url or "")
        path = unquote(parts.path)
        method = request.method or ""
        if path.endswith("/$batch"):
            assert self.batch_handler is not None, "unexpected batch"
            return self.batch_handler(request)
        point = _POINT.match(path)
        if point:
            table, pk, rk = point.group(1), point.group(2).replace("''", "'"), point.group(3).replace("''", "'")
            return self._entity(method, table, pk, rk, request)
        query = _QUERY.match(path)
        if query and method == "GET":
            return self._query(query.group(1), parse_qs(parts.query))
        insert = _INSERT.match(path)
        if insert and method == "POST":
            body = json.loads(request.body or b"{}")
            key = (insert.group(1), body["PartitionKey"], body["RowKey"])
            if key in self.entities:
                return error_reply(409, "EntityAlreadyExists", "The specified entity already exists.")
            etag = self.put(*key, **{k: v for k, v in body.items() if k not in ("PartitionKey", "RowKey")})
            return 204, {"ETag": etag, "Preference-Applied": "return-no-content"}, ""
        return error_reply(400, "InvalidInput", f"fake service cannot handle {method} {path}")

    def _entity(self, method: str, table: str, pk: str, rk: str, request: requests.PreparedRequest) -> Reply:
        key = (table, pk, rk)
        current = self.entities.get(key)
        if method == "GET":
            if current is None:
                return error_reply(404, "ResourceNotFound", "The specified resource does not exist.")
            props, etag = current
            body = {"odata.etag": etag, "Timestamp": "2026-01-01T00:00:00.0000000Z", **props}
            return 200, {"ETag": etag, "Content-Type": "application/json"}, json.dumps(body)
        if_match = request.headers.get("If-Match")
        if current is None:
            if if_match is not None:
                return error_reply(404, "ResourceNotFound", "The specified resource does not exist.")
            if method == "DELETE":
                return error_reply(400, "InvalidInput", "DELETE needs If-Match")
        elif if_match is not None and if_match != "*" and if_match != current[1]:
            return error_reply(
                412, "UpdateConditionNotSatisfied", "The update condition specified in the request was not satisfied."
            )
        if method == "DELETE":
            del self.entities[key]
            return 204, {}, ""
        body = json.loads(request.body or b"{}")
        props = {k: v for k, v in body.items() if k not in ("PartitionKey", "RowKey")}
        if method == "MERGE" and current is not None:
            merged = {k: v for k, v in current[0].items() if k not in ("PartitionKey", "RowKey")}
            merged.update(props)
            props = merged
        return 204, {"ETag": self.put(table, pk, rk, **props)}, ""

    def _query(self, table: str, params: dict[str, list[str]]) -> Reply:
        rows = sorted((k, v) for k, v in self.entities.items() if k[0] == table)
        flt = params.get("$filter", [""])[0]
        selected = []
        for (_, pk, _rk), (props, etag) in rows:
            if "PartitionKey eq '" in flt and f"PartitionKey eq '{pk}'" not in flt:
                continue
            selected.append({"odata.etag": etag, "Timestamp": "2026-01-01T00:00:00Z", **props})
        return 200, {"Content-Type": "application/json"}, json.dumps({"value": selected})
