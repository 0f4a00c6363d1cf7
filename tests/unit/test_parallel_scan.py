"""TableQuery.iter_parallel, partition_ranges and find_partition_boundaries against the bundled emulator."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from tablesdk import (
    CloudStorageAccount,
    CloudTableClient,
    DynamicEntity,
    ResourceNotFoundError,
    TableValidationError,
    find_partition_boundaries,
    prop,
)
from tablesdk.devstore import DevStore


@pytest.fixture(scope="module")
def client() -> Iterator[CloudTableClient]:
    with DevStore(port=0, page_size=7) as store:  # small pages: every range spans several
        with CloudStorageAccount.parse(store.connection_string).create_cloud_table_client() as made:
            yield made


def _table(client: CloudTableClient, partition_keys: list[str], rows: int = 3) -> str:
    name = "par" + uuid.uuid4().hex[:12]
    client.create_table(name)
    entities = [DynamicEntity(PartitionKey=pk, RowKey=f"{r:02d}", N=r) for pk in partition_keys for r in range(rows)]
    client.bulk_insert(name, entities).raise_on_error()
    return name


def _keys(entities: object) -> list[tuple[str, str]]:
    return sorted((e.PartitionKey, e.RowKey) for e in entities)  # type: ignore[attr-defined]


KEY_SETS = {
    "digits": [f"p{n:03d}" for n in range(40)],
    "hex": [uuid.UUID(int=n * 7919).hex[-8:] for n in range(40)],
    "mixed": ["A", "Zeta", "a", "a b", "alpha", "é", "中文", "\ue000x", "~", "0", "00", "000"],
    "one": ["only"],
}


@pytest.mark.parametrize("kind", sorted(KEY_SETS))
def test_parallel_scan_yields_exactly_the_serial_results(client: CloudTableClient, kind: str) -> None:
    table = _table(client, KEY_SETS[kind])
    query = client.create_query(table)
    serial = _keys(query)
    for workers in (1, 3, 8):
        assert _keys(query.iter_parallel(workers)) == serial
    filtered = query.where(prop("N") >= 1)
    assert _keys(filtered.iter_parallel(4)) == _keys(filtered)


@pytest.mark.parametrize("kind", sorted(KEY_SETS))
def test_boundaries_are_sorted_distinct_and_cover_the_table(client: CloudTableClient, kind: str) -> None:
    table = _table(client, KEY_SETS[kind], rows=1)
    query = client.create_query(table)
    points = find_partition_boundaries(query, 16, workers=4)
    assert points == sorted(set(points)) and len(points) <= 15
    assert all(point > min(KEY_SETS[kind]) for point in points)
    ranges = query.partition_ranges(points)
    seen = [key for part in ranges for key in _keys(part)]
    assert sorted(seen) == _keys(query)  # each entity in exactly one range
    if kind == "digits":
        assert len(points) == 15  # keys spread widely enough to cut everywhere
        sizes = [len(list(part)) for part in ranges]
        assert max(sizes) <= 2 * 40 / 16 + 1


def test_empty_table_and_single_range(client: CloudTableClient) -> None:
    table = "par" + uuid.uuid4().hex[:12]
    client.create_table(table)
    query = client.create_query(table)
    assert find_partition_boundaries(query, 8) == []
    assert list(query.iter_parallel(4)) == []
    assert len(query.partition_ranges([])) == 1


def test_explicit_boundaries_and_take(client: CloudTableClient) -> None:
    table = _table(client, KEY_SETS["digits"])
    query = client.create_query(table)
    assert _keys(query.iter_parallel(2, boundaries=["p010", "p020"])) == _keys(query)
    assert len(list(query.take(10).iter_parallel(4))) == 10
    with pytest.raises(TableValidationError):
        query.partition_ranges(["b", "a"])
    with pytest.raises(TableValidationError):
        query.partition_ranges([""])
    with pytest.raises(ValueError):
        query.iter_parallel(0)


def test_a_tracking_context_is_refused(client: CloudTableClient) -> None:
    table = _table(client, ["a"])
    with pytest.raises(TypeError):
        client.get_table_service_context().create_query(table).iter_parallel(2)


def test_errors_of_a_range_are_raised_and_workers_stop(client: CloudTableClient) -> None:
    before = threading.active_count()
    with pytest.raises(ResourceNotFoundError):
        list(client.create_query("nosuchtable" + uuid.uuid4().hex[:8]).iter_parallel(4, boundaries=["m"]))
    assert threading.active_count() == before


def test_breaking_early_stops_the_workers(client: CloudTableClient) -> None:
    table = _table(client, KEY_SETS["digits"])
    before = threading.active_count()
    scan = client.create_query(table).page_size(1).iter_parallel(4)
    next(scan)
    scan.close()  # what a for loop's break does when the iterator is dropped
    assert threading.active_count() == before


def test_segments_report_their_range_and_resume_where_they_stopped(client: CloudTableClient) -> None:
    table = _table(client, KEY_SETS["digits"])
    query = client.create_query(table)
    points = ["p010", "p020", "p030"]
    finished: set[int] = set()
    seen: list[tuple[str, str]] = []
    last: dict[int, object] = {}
    for index, segment in query.iter_parallel_segments(3, boundaries=points):
        assert 0 <= index <= 3
        seen.extend((e.PartitionKey, e.RowKey) for e in segment.results)
        assert all(points[index - 1] <= e.PartitionKey for e in segment.results if index)
        last[index] = segment.continuation_token
        if segment.continuation_token is None:
            finished.add(index)
    assert finished == {0, 1, 2, 3} and sorted(seen) == _keys(query)

    # Stop after the first page of every range, then resume from the recorded tokens.
    tokens: dict[int, object] = {}
    first: list[tuple[str, str]] = []
    scan = query.iter_parallel_segments(2, boundaries=points)
    for index, segment in scan:
        if index in tokens:
            continue
        tokens[index] = segment.continuation_token
        first.extend((e.PartitionKey, e.RowKey) for e in segment.results)
        if len(tokens) == 4:
            break
    scan.close()  # type: ignore[attr-defined]
    unfinished = {index: token for index, token in tokens.items() if token is not None}
    rest = [(e.PartitionKey, e.RowKey)
            for _, segment in query.iter_parallel_segments(2, boundaries=points, resume=unfinished)  # type: ignore[arg-type]
            for e in segment.results]
    assert sorted(first + rest) == _keys(query)
    with pytest.raises(ValueError):
        query.iter_parallel_segments(2, boundaries=points, resume={4: None})
    assert list(query.iter_parallel_segments(2, boundaries=points, resume={})) == []


def test_begun_operations_run_as_wide_as_the_connection_pool(client: CloudTableClient) -> None:
    width = client.transport.pool_size
    barrier = threading.Barrier(width, timeout=10)
    futures = [client.executor().submit(barrier.wait) for _ in range(width)]
    assert sorted(future.result(timeout=15) for future in futures) == list(range(width))
