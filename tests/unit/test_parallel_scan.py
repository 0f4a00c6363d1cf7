"""TableQuery.iter_parallel, partition_ranges and find_partition_boundaries against the bundled emulator."""

from __future__ import annotations

import bisect
import contextlib
import random
import string
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

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
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender
from tablesdk._queries._parallel import _highest_key_prefix, _Lead, _ParallelScan, run_search


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


# ---------------------------------------------------------------- probing: rounds and results, in memory


def _probe_over(keys: list[str], rounds: list[int]) -> Callable[[list[str]], list[str | None]]:
    """What one round of probes answers for a table of ``keys``: the first key at or above each start."""
    ordered = sorted(set(keys))

    def probe(starts: list[str]) -> list[str | None]:
        rounds.append(len(starts))
        answers: list[str | None] = []
        for start in starts:
            index = bisect.bisect_left(ordered, start)
            answers.append(ordered[index] if index < len(ordered) else None)
        return answers

    return probe


def _expected_prefix(keys: list[str]) -> str | None:
    lowest, highest = min(keys), max(keys)
    if lowest == highest:
        return None
    shared = 0
    while shared < len(lowest) and lowest[shared] == highest[shared]:
        shared += 1
    return highest[:shared] + chr(min(ord(highest[shared]), 0xD7FF))


ROUND_CASES = {
    "digits": [f"p{n:03d}" for n in range(100)],
    "long shared prefix": [f"customer-{n:06d}" for n in range(0, 5000, 7)],
    "longer shared prefix": [uuid.UUID(int=n * 7919).hex for n in range(200)],  # 32 characters, 27 shared
    "hex": [uuid.UUID(int=random.Random(n).getrandbits(128)).hex for n in range(200)],
    "upper hex": [uuid.UUID(int=n * 7919).hex.upper()[-6:] for n in range(200)],
    "letters": ["".join(random.Random(n).choices(string.ascii_letters, k=6)) for n in range(200)],
}


#: Rounds of 8 probes after the smallest key: one for the position keys part at, one for the
#: character there when it ends a usual run (9, f, z); more for longer keys and other ends.
MOST_ROUNDS = {"digits": 2, "hex": 2, "letters": 2, "upper hex": 3, "long shared prefix": 4, "longer shared prefix": 4}


@pytest.mark.parametrize("kind", sorted(ROUND_CASES))
def test_usual_keys_settle_in_few_rounds_after_the_smallest(kind: str) -> None:
    keys = ROUND_CASES[kind]
    rounds: list[int] = []
    found = run_search(_highest_key_prefix(min(keys), 8), _probe_over(keys, rounds))
    assert found == _expected_prefix(keys)
    assert len(rounds) <= MOST_ROUNDS[kind] and max(rounds) <= 8


@pytest.mark.parametrize("seed", range(60))
def test_the_largest_key_prefix_is_exact_for_any_keys(seed: int) -> None:
    chance = random.Random(seed)
    alphabet = chance.choice([string.digits, string.ascii_lowercase, string.printable[:94] + " ", "aé中\ue000~ "])
    keys = ["".join(chance.choices(alphabet, k=chance.randint(1, 6))) for _ in range(chance.randint(1, 30))]
    for width in (1, 2, 3, 8):
        rounds: list[int] = []
        assert run_search(_highest_key_prefix(min(keys), max(2, width)), _probe_over(keys, rounds)) == _expected_prefix(keys)
        assert all(size <= max(2, width) for size in rounds)


# ---------------------------------------------------------------- scheduling: requests in flight, in memory


class EmptyPages:
    """A MockSender handler answering every query with an empty last page; it counts the
    requests in flight at once, and the first ``together`` of them wait until that many are."""

    def __init__(self, together: int) -> None:
        self.lock = threading.Lock()
        self.in_flight = self.most_in_flight = self.started = 0
        self.barrier = threading.Barrier(together, timeout=10)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with self.lock:
            self.in_flight += 1
            self.started += 1
            number = self.started
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if number <= self.barrier.parties:  # passes only with `together` requests here at once
                with contextlib.suppress(threading.BrokenBarrierError):
                    self.barrier.wait()
            body = '{"odata.metadata":"http://x/$metadata#t","value":[]}'
            return MockSender.response(200, body, {"Content-Type": "application/json;odata=minimalmetadata"})
        finally:
            with self.lock:
                self.in_flight -= 1


def _mock_client(handler: EmptyPages, pool_size: int = 16) -> CloudTableClient:
    account = CloudStorageAccount.parse(MOCK_CONNECTION)
    return account.create_cloud_table_client(sender=MockSender(handler), pool_size=pool_size)


MOCK_CONNECTION = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    "TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
)
SIXTEEN_RANGES = [f"p{n:02d}" for n in range(5, 80, 5)]


def test_a_parallel_scan_has_as_many_requests_in_flight_as_workers() -> None:
    pages = EmptyPages(together=8)
    scan = _mock_client(pages).create_query("Scanned").iter_parallel(8, boundaries=SIXTEEN_RANGES)
    assert list(scan) == []
    assert pages.started == 16 and pages.most_in_flight == 8 and not pages.barrier.broken


def test_workers_beyond_the_connection_pool_are_capped_with_a_warning() -> None:
    pages = EmptyPages(together=4)
    query = _mock_client(pages, pool_size=4).create_query("Scanned")
    with pytest.warns(RuntimeWarning, match="iter_parallel: workers=8 exceeds the client's pool_size=4"):
        assert list(query.iter_parallel(8, boundaries=SIXTEEN_RANGES)) == []
    assert pages.started == 16 and pages.most_in_flight == 4 and not pages.barrier.broken
    with pytest.warns(RuntimeWarning, match="iter_parallel_segments: workers=6"):
        assert len(list(query.iter_parallel_segments(6, boundaries=SIXTEEN_RANGES))) == 16


# ---------------------------------------------------------------- reading from the start while probing


def _scan_with_lead(query: Any, workers: int, ready: Callable[[_Lead], bool]) -> list[tuple[str, str]]:
    """A parallel scan whose leader reads from the start; the boundaries are handed over once
    ``ready(lead)`` holds (the leader's progress decides where the ranges begin)."""
    points = find_partition_boundaries(query, 4 * workers)
    whole = query._replace(take=None)

    def find() -> list[str]:
        for _ in range(1000):
            if ready(lead):
                break
            time.sleep(0.01)  # polling the leader's progress; no assertion on time
        return points

    lead = _Lead(whole, find)
    return _keys(entity for _, page in _ParallelScan([], workers, lead).segments() for entity in page.results)


@pytest.mark.parametrize("when", ["at once", "after two pages", "after the table"])
def test_the_leader_and_the_ranges_read_every_entity_once(client: CloudTableClient, when: str) -> None:
    table = _table(client, KEY_SETS["digits"])
    query = client.create_query(table)
    ready: dict[str, Callable[[_Lead], bool]] = {
        "at once": lambda lead: True,  # the first page is in flight: the cut is a guess, pages past it are trimmed
        "after two pages": lambda lead: lead.page_keys is not None and lead.page_keys[1] >= "p004",
        "after the table": lambda lead: lead.finished,  # no range is needed any more
    }
    for workers in (1, 4):
        assert _scan_with_lead(query, workers, ready[when]) == _keys(query)


def test_the_leader_reads_while_the_boundaries_are_probed() -> None:
    pages = EmptyPages(together=2)  # the leader's first page and the first probe, at once
    assert list(_mock_client(pages).create_query("Scanned").iter_parallel(8)) == []
    assert pages.most_in_flight == 2 and not pages.barrier.broken
