"""A query is compiled once: its ``$filter`` text (rendered and type-checked), its ``$select``
and its page reader are made when it first runs and reused for every page and every range."""

from __future__ import annotations

from typing import Any

import pytest

import tablesdk._queries._query as query_module
from tablesdk import CloudStorageAccount
from tablesdk._entities._entity import DynamicEntity, TableEntity
from tablesdk._core._errors import TableValidationError
from tablesdk._entities._filter import prop
from tablesdk.devstore import DevStore


class Reading(TableEntity):
    Value: int


@pytest.fixture()
def client() -> Any:
    with DevStore() as store:
        client = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()
        client.create_table("compiled")
        client.bulk_insert("compiled", [Reading(PartitionKey=f"p{i % 3}", RowKey=f"{i:03d}", Value=i) for i in range(30)])
        yield client


def _count_renders(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    render = query_module.render_filter

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return render(*args, **kwargs)

    monkeypatch.setattr(query_module, "render_filter", counting)
    return calls


def test_the_filter_is_rendered_once_for_every_page(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_renders(monkeypatch)
    query = client.create_query("compiled", Reading).where(Reading.Value >= 3).page_size(4)
    assert sorted(r.Value for r in query) == list(range(3, 30))  # 7 pages
    assert len(calls) == 1
    assert sorted(r.Value for r in query) == list(range(3, 30))  # run again: still compiled
    assert len(calls) == 1


def test_each_range_of_a_parallel_scan_is_compiled_once(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_renders(monkeypatch)
    query = client.create_query("compiled", Reading).where(Reading.Value < 29).page_size(2)
    found = sorted(r.Value for r in query.iter_parallel(2, boundaries=["p1", "p2"]))
    assert found == list(range(29))
    assert len(calls) == 3  # one per range, whatever the number of pages (15)


def test_compiled_parts_and_errors() -> None:
    query = query_module.TableQuery(object(), "tbl", DynamicEntity).where(
        (prop("PartitionKey") == "a") & (prop("RowKey") == "b")
    ).select("Name")
    compiled = query.compiled()
    assert compiled is query.compiled()
    assert compiled.filter_text == "PartitionKey eq 'a' and RowKey eq 'b'"
    assert compiled.point_keys == ("a", "b")
    assert compiled.select_text == "Name,PartitionKey,RowKey,Timestamp"
    wide = query_module.TableQuery(object(), "tbl", DynamicEntity)
    for n in range(16):
        wide = wide.where(prop("N") != n)
    with pytest.raises(TableValidationError):
        wide.compiled()
    with pytest.raises(TableValidationError):  # not cached as a success
        wide.filter_string()
