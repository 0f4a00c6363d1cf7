"""Parallel scans from asyncio: :meth:`AsyncTableQuery.iter_parallel`.

The rules are the threaded scan's (:mod:`tablesdk._queries._parallel`): the query is cut into
PartitionKey ranges at given boundaries, or at the boundaries the same probe search
finds (:func:`~tablesdk._queries._parallel.boundary_search`, its probes sent ``workers`` at a
time as tasks); ``workers`` tasks read the ranges, each range's pages as a query
reads them (:func:`~tablesdk._queries._page_stream.stream_pages_async`, without reading
ahead: the other tasks keep the service busy), and hand them to the consumer through
a queue of at most ``2 * workers`` pages. Unlike the threaded scan, no task reads the
table from its start while the boundaries are probed: the probes of a few rounds
are all the wait there is.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from .._entities._entity import E
from .._queries._parallel import boundary_search, partition_key_of, probe_at, probe_query
from .._queries._query import TableQuery

if TYPE_CHECKING:
    from ._query import AsyncQuerySource

__all__ = ["find_partition_boundaries_async", "scan_entities_async"]

_DONE = object()


async def find_partition_boundaries_async(
    source: AsyncQuerySource[Any], query: TableQuery[Any], count: int, *, workers: int = 8
) -> list[str]:
    """:func:`tablesdk.find_partition_boundaries` with an async client: the same probes, ``workers`` at a time."""
    from ._query import AsyncTableQuery

    probes = probe_query(query)

    async def first_key_at(start: str) -> str | None:
        found = await AsyncTableQuery._wrap(source, probe_at(probes, start)).first_or_default()
        return partition_key_of(found)

    search = boundary_search(count, max(1, workers))
    try:
        starts = next(search)
        while True:
            starts = search.send(list(await asyncio.gather(*map(first_key_at, starts))))
    except StopIteration as done:
        boundaries: list[str] = done.value
        return boundaries


async def scan_entities_async(
    source: AsyncQuerySource[E],
    whole: TableQuery[E],
    take: int | None,
    workers: int,
    boundaries: Sequence[str] | None,
    ranges_per_worker: int,
) -> AsyncIterator[E]:
    """:meth:`AsyncTableQuery.iter_parallel` of ``whole`` (the query without its cap) capped at ``take``."""
    from ._query import AsyncTableQuery

    if boundaries is None:
        count = workers * max(1, ranges_per_worker)
        boundaries = await find_partition_boundaries_async(source, whole, count, workers=workers)
    ranges: deque[TableQuery[E]] = deque(whole.partition_ranges(boundaries))
    pages: asyncio.Queue[Any] = asyncio.Queue(maxsize=2 * workers)

    async def work() -> None:
        try:
            while ranges:
                part = AsyncTableQuery._wrap(source, ranges.popleft())
                async for results, _ in part._pages(read_ahead=False):
                    await pages.put(results)
        except asyncio.CancelledError:
            raise  # the consumer left: nobody waits for this task's pages
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            await pages.put(exc)
        await pages.put(_DONE)

    tasks = [asyncio.ensure_future(work()) for _ in range(max(1, min(workers, len(ranges))))]
    running, remaining = len(tasks), take
    try:
        while running:
            item = await pages.get()
            if item is _DONE:
                running -= 1
                continue
            if isinstance(item, BaseException):
                raise item
            for entity in item if remaining is None else item[:remaining]:
                yield entity
            if remaining is not None:
                remaining -= min(remaining, len(item))
                if remaining == 0:
                    return
            item = None  # release the page before waiting for the next one
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
