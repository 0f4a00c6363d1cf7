"""Key-range scans: the store seeks to the range start and to the continuation point, stops at
the range end, and a filter the key range decides is not evaluated per entity."""

from __future__ import annotations

import itertools
import json
import urllib.parse
from typing import Any, Iterator

import pytest

from tablesdk.devstore import _filter
from tablesdk.devstore._request import Request
from tablesdk.devstore._service import TableService
from tablesdk.devstore._storage import Storage
from tablesdk.devstore._values import utf16_key

# keys whose UTF-16 order differs from code-point order (U+10000 sorts before U+E000), and ''
_KEYS = ["", "a", "a\ue000", "a\U00010000", "b", "b\x00", "c", "\ue000", "\U00010000", "zz"]
_OPS = {"=": lambda a, b: a == b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
        "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}


@pytest.fixture()
def storage() -> Iterator[Storage]:
    store = Storage()
    with store.transaction():
        store.create_table("t")
        for pk, rk in itertools.product(_KEYS, _KEYS):
            store.put_entity("t", pk, rk, {}, exists=False)
    yield store
    store.close()


def _expected(conditions: list[tuple[str, str, str]], start: tuple[str, str] | None) -> list[tuple[str, str]]:
    rows = sorted(itertools.product(_KEYS, _KEYS), key=lambda k: (utf16_key(k[0]), utf16_key(k[1])))
    out = []
    for pk, rk in rows:
        key = (utf16_key(pk), utf16_key(rk))
        if start is not None and key < (utf16_key(start[0]), utf16_key(start[1])):
            continue
        if all(_OPS[op](utf16_key(pk if column == "pk" else rk), utf16_key(value))
               for column, op, value in conditions):
            out.append((pk, rk))
    return out


_CONDITION_SETS: list[list[tuple[str, str, str]]] = [
    [],
    [("pk", ">=", "a"), ("pk", "<", "c")],
    [("pk", ">", "a"), ("pk", "<=", "c")],
    [("pk", "=", "b"), ("rk", ">", "a"), ("rk", "<", "\U00010000")],
    [("pk", "=", "a\U00010000"), ("rk", ">=", "")],
    [("pk", "=", "a"), ("pk", "=", "b")],
    [("pk", ">=", "\ue000"), ("rk", "<=", "b")],
    [("rk", "=", "c")],
    [("pk", ">=", "a"), ("pk", ">=", "b\x00"), ("pk", "<", "zz"), ("pk", "<=", "\ue000")],
]


@pytest.mark.parametrize("conditions", _CONDITION_SETS)
@pytest.mark.parametrize("chunk", [1, 3, 512])
def test_scan_returns_exactly_the_range_from_any_position(
    storage: Storage, conditions: list[tuple[str, str, str]], chunk: int,
) -> None:
    for start in [None, ("a", "b"), ("b", ""), ("b", "zz"), ("\U00010000", "a\ue000"), ("zz", "zz")]:
        got = [(row.pk, row.rk) for row in storage.scan("t", start=start, conditions=conditions, chunk=chunk)]
        assert got == _expected(conditions, start), (conditions, start, chunk)


def _vm_steps(storage: Storage, conditions: list[tuple[str, str, str]], start: tuple[str, str] | None) -> int:
    """sqlite virtual-machine steps (in units of 10) to read one 20-row chunk from ``start``:
    proportional to the index entries the statement visits."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    storage._conn.set_progress_handler(count, 10)
    try:
        rows = list(itertools.islice(storage.scan("t2", start=start, conditions=conditions, chunk=20), 20))
    finally:
        storage._conn.set_progress_handler(None, 10)
    assert len(rows) == 20
    return steps[0]


@pytest.mark.parametrize("conditions", [
    [("pk", ">=", "p00"), ("pk", "<", "p09")],
    [("pk", ">", "p00"), ("pk", "<=", "p09")],
    [("pk", "=", "p05"), ("rk", ">=", "r0000"), ("rk", "<", "r1999")],
])
def test_a_chunk_deep_in_a_range_visits_what_the_first_chunk_does(conditions: list[tuple[str, str, str]]) -> None:
    storage = Storage()
    with storage.transaction():
        storage.create_table("t2")
        for p in range(10):
            for r in range(2000):
                storage.put_entity("t2", f"p{p:02d}", f"r{r:04d}", {}, exists=False)
    first = _vm_steps(storage, conditions, None)
    deep = _vm_steps(storage, conditions, ("p05", "r1500"))
    # a scan from the start of the range to the continuation point visits thousands of entries
    assert deep <= 2 * first + 5, (first, deep)
    storage.close()


# ----------------------------------------------------------------- through the service

_HEADERS = {"x-ms-version": "2019-02-02", "accept": "application/json;odata=minimalmetadata",
            "dataserviceversion": "3.0;", "host": "127.0.0.1:10002"}


def _service() -> TableService:
    service = TableService(Storage(), allow_anonymous=True)
    created = service.handle(Request("POST", "/devstoreaccount1/Tables", "", {**_HEADERS, "content-type":
                                     "application/json"}, json.dumps({"TableName": "rtab"}).encode()))
    assert created.status == 201
    for pk in ["a", "ab", "b", "b\U00010000", "b\ue000", "c", "d"]:
        for r in range(7):
            body = json.dumps({"PartitionKey": pk, "RowKey": f"r{r}", "N": r}).encode()
            answer = service.handle(Request("POST", "/devstoreaccount1/rtab", "", {
                **_HEADERS, "content-type": "application/json", "prefer": "return-no-content"}, body))
            assert answer.status == 204
    return service


def _query_all(service: TableService, flt: str, top: int) -> tuple[list[tuple[str, str]], int]:
    query: dict[str, str] = {"$filter": flt, "$top": str(top)}
    out: list[tuple[str, str]] = []
    pages = 0
    while True:
        answer = service.handle(Request("GET", "/devstoreaccount1/rtab()", urllib.parse.urlencode(query), _HEADERS, b""))
        assert answer.status == 200
        pages += 1
        out += [(e["PartitionKey"], e["RowKey"]) for e in json.loads(answer.body)["value"]]
        headers = dict(answer.headers)
        if "x-ms-continuation-NextPartitionKey" not in headers:
            return out, pages
        query["NextPartitionKey"] = headers["x-ms-continuation-NextPartitionKey"]
        query["NextRowKey"] = headers["x-ms-continuation-NextRowKey"]


def _counting_matches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    original = _filter.Filter.matches

    def matches(self: _filter.Filter, entity: Any) -> bool:
        calls[0] += 1
        return original(self, entity)

    monkeypatch.setattr(_filter.Filter, "matches", matches)
    return calls


@pytest.mark.parametrize("flt, expected_pks", [
    ("PartitionKey ge 'a' and PartitionKey lt 'c'", ["a", "ab", "b", "b\U00010000", "b\ue000"]),
    ("PartitionKey gt 'ab' and PartitionKey le 'b\ue000'", ["b", "b\U00010000", "b\ue000"]),
    ("'c' gt PartitionKey and PartitionKey gt 'b'", ["b\U00010000", "b\ue000"]),
    ("PartitionKey eq 'b' and RowKey ge 'r2' and RowKey lt 'r5'", ["b"]),
])
def test_a_filter_the_key_range_decides_is_not_evaluated_per_entity(
    monkeypatch: pytest.MonkeyPatch, flt: str, expected_pks: list[str],
) -> None:
    service = _service()
    calls = _counting_matches(monkeypatch)
    got, pages = _query_all(service, flt, 2)
    assert calls[0] == 0
    assert pages > 1
    assert sorted({pk for pk, _ in got}, key=utf16_key) == expected_pks
    assert got == sorted(got, key=lambda k: (utf16_key(k[0]), utf16_key(k[1])))
    if "RowKey" in flt:
        assert [rk for _, rk in got] == ["r2", "r3", "r4"]
    else:
        assert len(got) == 7 * len(expected_pks)


@pytest.mark.parametrize("flt", [
    "PartitionKey ge 'a' and PartitionKey lt 'c' and N ge 3",
    "PartitionKey ge 'a' and PartitionKey lt 'c' or N eq 1",
    "PartitionKey ge 'a' and PartitionKey ne 'b'",
    "PartitionKey ge 'a' and not (PartitionKey ge 'b')",
])
def test_a_filter_the_key_range_does_not_decide_is_still_evaluated(monkeypatch: pytest.MonkeyPatch, flt: str) -> None:
    service = _service()
    calls = _counting_matches(monkeypatch)
    got, _ = _query_all(service, flt, 4)
    assert calls[0] > 0
    compiled = _filter.compile_filter(flt)
    every = sorted(((pk, f"r{r}", r) for pk in ["a", "ab", "b", "b\U00010000", "b\ue000", "c", "d"] for r in range(7)),
                   key=lambda k: (utf16_key(k[0]), utf16_key(k[1])))
    expected = [(pk, rk) for pk, rk, n in every if compiled.evaluate(
        {"PartitionKey": ("Edm.String", pk), "RowKey": ("Edm.String", rk), "N": ("Edm.Int32", n)}) is True]
    assert got == expected
