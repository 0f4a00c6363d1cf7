"""Paging always ends: a continuation token seen before in the same iteration is a cycle."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
import responses

from tablesdk import CloudStorageAccount, ContinuationCycleError, TableServiceError

from fake_service import CONNECTION_STRING, ENDPOINT

#: token sent -> token answered: A -> B -> A runs forever without a guard.
CYCLE = {"": "A", "A": "B", "B": "A"}
#: Past this many requests the fake service ends paging, so a broken guard fails instead of hanging.
GIVE_UP = 10


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as m:
        yield m


def client():  # type: ignore[no-untyped-def]
    return CloudStorageAccount.parse(CONNECTION_STRING).create_cloud_table_client()


def sent(request: object, name: str) -> str:
    return parse_qs(urlsplit(request.url).query).get(name, [""])[0]  # type: ignore[attr-defined]


def test_list_tables_stops_on_a_next_table_name_cycle(mock: responses.RequestsMock) -> None:
    def reply(request: object) -> tuple[int, dict[str, str], str]:
        token = sent(request, "NextTableName")
        body = json.dumps({"value": [{"TableName": f"t{token or 0}x"}]})
        if len(mock.calls) >= GIVE_UP:
            return 200, {}, body
        return 200, {"x-ms-continuation-NextTableName": CYCLE[token]}, body

    mock.add_callback("GET", re.compile(re.escape(ENDPOINT) + r"/Tables.*"), callback=reply)
    names: list[str] = []
    with pytest.raises(ContinuationCycleError) as info:
        for name in client().list_tables():
            names.append(name)
    assert isinstance(info.value, TableServiceError)
    assert info.value.token == "A" and "'A'" in str(info.value)
    assert names == ["t0x", "tAx", "tBx"]
    assert len(mock.calls) == 3


def test_entity_query_stops_on_a_continuation_cycle(mock: responses.RequestsMock) -> None:
    def reply(request: object) -> tuple[int, dict[str, str], str]:
        token = sent(request, "NextPartitionKey")
        body = json.dumps({"value": [{"PartitionKey": "p", "RowKey": token or "0"}]})
        if len(mock.calls) >= GIVE_UP:
            return 200, {}, body
        nxt = CYCLE[token]
        return 200, {"x-ms-continuation-NextPartitionKey": nxt, "x-ms-continuation-NextRowKey": "r"}, body

    mock.add_callback("GET", re.compile(re.escape(ENDPOINT) + r"/Blogs\(\).*"), callback=reply)
    rows: list[str] = []
    with pytest.raises(ContinuationCycleError) as info:
        for entity in client().create_query("Blogs"):
            rows.append(entity.RowKey)
    assert rows == ["0", "A", "B"]
    assert info.value.token.next_partition_key == "A"  # type: ignore[attr-defined]


def test_same_token_twice_in_a_row_is_a_cycle(mock: responses.RequestsMock) -> None:
    for _ in range(2):
        mock.add("GET", re.compile(re.escape(ENDPOINT) + r"/Blogs\(\).*"), json={"value": []},
                 headers={"x-ms-continuation-NextPartitionKey": "same"})
    mock.add("GET", re.compile(re.escape(ENDPOINT) + r"/Blogs\(\).*"), json={"value": []})
    with pytest.raises(ContinuationCycleError):
        list(client().create_query("Blogs"))
    assert len(mock.calls) == 2


def test_parallel_scan_stops_on_a_continuation_cycle(mock: responses.RequestsMock) -> None:
    def reply(request: object) -> tuple[int, dict[str, str], str]:
        token = sent(request, "NextPartitionKey")
        if len(mock.calls) >= 4 * GIVE_UP:
            return 200, {}, json.dumps({"value": []})
        return 200, {"x-ms-continuation-NextPartitionKey": CYCLE[token]}, json.dumps({"value": []})

    mock.add_callback("GET", re.compile(re.escape(ENDPOINT) + r"/Blogs\(\).*"), callback=reply)
    with pytest.raises(ContinuationCycleError):
        list(client().create_query("Blogs").iter_parallel(2, boundaries=["m"]))


def test_cli_export_pages_stop_on_a_continuation_cycle(mock: responses.RequestsMock) -> None:
    from tablesdk.cli._transfer import pages

    def reply(request: object) -> tuple[int, dict[str, str], str]:
        token = sent(request, "NextPartitionKey")
        body = json.dumps({"value": [{"PartitionKey": "p", "RowKey": token or "0"}]})
        if len(mock.calls) >= GIVE_UP:
            return 200, {}, body
        return 200, {"x-ms-continuation-NextPartitionKey": CYCLE[token]}, body

    mock.add_callback("GET", re.compile(re.escape(ENDPOINT) + r"/Blogs\(\).*"), callback=reply)
    c = client()
    with pytest.raises(ContinuationCycleError):
        for _ in pages(c, c.create_query("Blogs")):
            pass
