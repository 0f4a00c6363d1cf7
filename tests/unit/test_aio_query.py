"""AsyncTableQuery against a scripted async source: paging, take, cycles, builders."""

from __future__ import annotations

from typing import Any

import pytest

from tablesdk import ContinuationCycleError, ContinuationToken, DynamicEntity, EmptyResultError, ResultSegment, prop
from tablesdk.aio import AsyncTableQuery
from tablesdk._queries._query import TableQuery

pytestmark = pytest.mark.asyncio


class Pages:
    """An async query source answering from a script of pages; records each request's (token, top)."""

    def __init__(self, pages: list[tuple[list[int], ContinuationToken | None]]) -> None:
        self.pages = pages
        self.requests: list[tuple[ContinuationToken | None, int | None]] = []

    async def execute_query_segment(
        self, query: TableQuery[DynamicEntity], token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[DynamicEntity]:
        self.requests.append((token, top))
        numbers, following = self.pages[len(self.requests) - 1]
        return ResultSegment([DynamicEntity(PartitionKey="p", RowKey=f"{n:03d}", N=n) for n in numbers], following)


def token(n: int) -> ContinuationToken:
    return ContinuationToken(next_partition_key="p", next_row_key=f"{n:03d}")


async def test_pages_are_followed_lazily_including_empty_ones() -> None:
    source = Pages([([0, 1], token(2)), ([], token(3)), ([3], None)])
    query = AsyncTableQuery(source, "tbl", DynamicEntity).page_size(2)
    seen = [e["N"] async for e in query]
    assert seen == [0, 1, 3]
    assert source.requests == [(None, 2), (token(2), 2), (token(3), 2)]


async def test_take_stops_without_asking_for_another_page() -> None:
    source = Pages([([0, 1, 2], token(3)), ([3, 4, 5], token(6))])
    first_four = [e["N"] async for e in AsyncTableQuery(source, "tbl", DynamicEntity).take(4)]
    assert first_four == [0, 1, 2, 3]
    assert [top for _, top in source.requests] == [4, 1]


async def test_a_repeated_token_is_a_cycle() -> None:
    source = Pages([([0], token(1)), ([1], token(2)), ([2], token(1)), ([9], None)])
    with pytest.raises(ContinuationCycleError):
        [e async for e in AsyncTableQuery(source, "tbl", DynamicEntity)]
    assert len(source.requests) == 3


async def test_first_segmented_and_builders() -> None:
    base = AsyncTableQuery(Pages([([], token(1)), ([], None)]), "tbl", DynamicEntity)
    with pytest.raises(EmptyResultError):
        await base.first()
    narrowed = base.where(prop("N") > 1).select("N")
    assert base.filter is None and narrowed.filter_string() == "N gt 1" and narrowed.select_columns == ("N",)
    source = Pages([([5], token(6))])
    segment = await AsyncTableQuery(source, "tbl", DynamicEntity).take(3).execute_segmented()
    assert [e["N"] for e in segment.results] == [5] and segment.continuation_token == token(6)
    assert source.requests == [(None, 3)]
    with pytest.raises(TypeError, match="ContinuationToken"):
        await base.execute_segmented("1.abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="async"):
        list(base.description)


@pytest.mark.parametrize("name", ["to_arrow", "to_pandas", "iter_arrow_batches", "iter_parallel", "read_ahead"])
async def test_the_async_query_reads_as_the_sync_query_does(name: str) -> None:
    """The async query's page readers take the sync query's parameters, with the same defaults."""
    import inspect

    from tablesdk import TableQuery
    from tablesdk.aio import AsyncTableQuery

    def parameters(method: Any) -> list[tuple[str, Any, Any]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(method).parameters.values()]

    assert parameters(getattr(AsyncTableQuery, name)) == parameters(getattr(TableQuery, name))
    assert inspect.signature(AsyncTableQuery.__init__).parameters["read_ahead"].default == "auto"
