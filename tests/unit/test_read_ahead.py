"""Read-ahead paging: iterating a query sends the next page's request on another thread while
the page in hand is decoded and handed out, and behaves otherwise exactly as serial iteration.

The queries here read ahead always (``read_ahead(True)``): the mechanism. When the default,
``"auto"``, reads ahead is tests/unit/test_page_stream.py's subject."""

from __future__ import annotations

import json
import threading
import urllib.parse
import warnings
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

from tablesdk import (
    CloudStorageAccount,
    CloudTableClient,
    ContinuationCycleError,
    DynamicEntity,
    MergeOption,
    NoRetry,
    TableQuery,
    TableServiceError,
)
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender, SendError
from tablesdk._queries._query import ContinuationToken, PagedQuerySource, ResultSegment

CONNECTION = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    "TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
)
READ_AHEAD_THREAD = "tablesdk-read-ahead"
WAIT = 10.0  # seconds a test waits for a thread before it fails (never reached when the code is right)


class PagedTable:
    """A Query Entities handler over ``count`` entities, ``per_page`` per response (fewer when ``$top``
    asks for fewer), the next row as the continuation token. Records every request's page number,
    ``$top`` and thread; ``arrived[n]`` is set when page n's request comes in, ``hold[n]`` (when set
    by a test) is waited for before page n is answered, ``answer[n]`` replaces page n's answer."""

    def __init__(self, count: int, per_page: int) -> None:
        self.count, self.per_page = count, per_page
        self.requests: list[tuple[int, int | None, str]] = []
        self.arrived: dict[int, threading.Event] = {}
        self.hold: dict[int, threading.Event] = {}
        self.answer: dict[int, Callable[[], HttpResponse]] = {}
        self.lock = threading.Lock()

    def event(self, page: int) -> threading.Event:
        with self.lock:
            return self.arrived.setdefault(page, threading.Event())

    def __call__(self, request: HttpRequest) -> HttpResponse:
        params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(request.url).query))
        start = int(params.get("NextRowKey", "0"))
        top = int(params["$top"]) if "$top" in params else None
        page = len(self.requests)
        with self.lock:
            self.requests.append((page, top, threading.current_thread().name))
        self.event(page).set()
        if page in self.hold:
            assert self.hold[page].wait(WAIT)
        if page in self.answer:
            return self.answer[page]()
        end = min(start + min(self.per_page, top or 1000), self.count)
        items = [{"odata.etag": f"W/\"datetime'2026-01-01T00%3A00%3A{n % 60:02d}Z'\"", "PartitionKey": "p",
                  "RowKey": f"{n:04d}", "N": n} for n in range(start, end)]
        headers = {"Content-Type": "application/json;odata=minimalmetadata"}
        if end < self.count:
            headers.update({"x-ms-continuation-NextPartitionKey": "p", "x-ms-continuation-NextRowKey": f"{end:04d}"})
        return MockSender.response(200, json.dumps({"value": items}), headers)

    @property
    def tops(self) -> list[int | None]:
        return [top for _, top, _ in self.requests]

    @property
    def threads(self) -> list[str]:
        return [name for _, _, name in self.requests]


def client_for(table: PagedTable) -> CloudTableClient:
    return CloudStorageAccount.parse(CONNECTION).create_cloud_table_client(
        sender=MockSender(table), retry_policy=NoRetry()
    )


def read_ahead_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == READ_AHEAD_THREAD]


def rows(query: TableQuery[Any]) -> list[str]:
    return [entity.RowKey for entity in query]


@pytest.fixture(autouse=True)
def no_read_ahead_thread_outlives_a_test() -> Iterator[None]:
    yield
    for thread in read_ahead_threads():
        thread.join(WAIT)
        assert not thread.is_alive()


def test_the_next_page_is_requested_before_this_page_is_handed_out() -> None:
    table = PagedTable(count=15, per_page=5)
    entities = iter(client_for(table).create_query("Paged").read_ahead(True))
    assert next(entities).RowKey == "0000"
    # Page 1 is in hand and not used up: page 2's request was sent all the same, on another thread.
    assert table.event(1).wait(WAIT)
    assert table.requests[1][2] == READ_AHEAD_THREAD
    assert [e.RowKey for e in entities] == [f"{n:04d}" for n in range(1, 15)]
    assert table.tops == [None, None, None] and len(table.requests) == 3
    assert table.threads[0] == threading.current_thread().name


def test_at_most_one_page_is_read_ahead() -> None:
    table = PagedTable(count=20, per_page=5)
    entities = iter(client_for(table).create_query("Paged").read_ahead(True))
    first = next(entities).RowKey
    assert table.event(1).wait(WAIT)
    for thread in read_ahead_threads():
        thread.join(WAIT)
    # Page 2 has arrived with the token of page 3, but page 1 is still in hand: page 3 waits.
    assert len(table.requests) == 2
    assert [first] + [e.RowKey for e in entities] == [f"{n:04d}" for n in range(20)]
    assert len(table.requests) == 4


def test_read_ahead_false_is_strictly_serial() -> None:
    table = PagedTable(count=15, per_page=5)
    query = client_for(table).create_query("Paged").read_ahead(False)
    entities = iter(query)
    for _ in range(5):
        next(entities)
        assert not read_ahead_threads()
    assert len(table.requests) == 1  # page 1 used up, page 2 not asked for yet
    assert [e.RowKey for e in entities] == [f"{n:04d}" for n in range(5, 15)]
    assert set(table.threads) == {threading.current_thread().name}
    assert "read_ahead=False" in repr(query) and "read_ahead" not in repr(query.read_ahead("auto"))


def test_read_ahead_needs_a_bool() -> None:
    with pytest.raises(TypeError):
        client_for(PagedTable(1, 1)).create_query("Paged").read_ahead(1)  # type: ignore[arg-type]


def test_take_asks_for_no_page_it_does_not_need() -> None:
    table = PagedTable(count=3000, per_page=1000)
    client = client_for(table)
    assert len(list(client.create_query("Paged").read_ahead(True).take(1000))) == 1000
    assert table.tops == [1000]  # the first page can hold them all: nothing read ahead
    table.requests.clear()
    assert len(list(client.create_query("Paged").read_ahead(True).take(2500))) == 2500
    assert table.tops == [1000, 1000, 500]
    assert table.threads[1:] == [READ_AHEAD_THREAD, READ_AHEAD_THREAD]
    table.requests.clear()
    assert client.create_query("Paged").read_ahead(True).first().RowKey == "0000"
    assert table.tops == [1]


def test_take_after_short_pages_still_yields_exactly_n() -> None:
    table = PagedTable(count=100, per_page=7)  # the service may answer fewer than $top
    assert rows(client_for(table).create_query("Paged").read_ahead(True).take(20)) == [f"{n:04d}" for n in range(20)]
    assert table.tops == [20, 13, 6]  # each page could have held the rest: none read ahead
    table = PagedTable(count=3000, per_page=700)
    assert rows(client_for(table).create_query("Paged").read_ahead(True).take(2500)) == [f"{n:04d}" for n in range(2500)]
    # A page read ahead counts the page before it as full (so take never asks for more than it
    # wants); after short pages the rest may take one request more than serial paging.
    assert table.tops == [1000, 1000, 800, 300, 100]


def refused() -> HttpResponse:
    body = json.dumps({"odata.error": {"code": "AuthorizationFailure", "message": {"value": "no"}}})
    return MockSender.response(403, body, {"Content-Type": "application/json", "x-ms-error-code": "AuthorizationFailure"})


def lost() -> HttpResponse:
    raise SendError("connection reset")


@pytest.mark.parametrize("answer", [refused, lost], ids=["refused", "connection lost"])
def test_an_error_of_the_next_page_is_raised_when_iteration_reaches_it(answer: Callable[[], HttpResponse]) -> None:
    raised: dict[bool, tuple[type[BaseException], str]] = {}
    for ahead in (False, True):
        table = PagedTable(count=15, per_page=5)
        table.answer[1] = answer
        got: list[str] = []
        with pytest.raises(TableServiceError) as info:
            for entity in client_for(table).create_query("Paged").read_ahead(ahead):
                got.append(entity.RowKey)
                if ahead and len(got) == 1:
                    assert table.event(1).wait(WAIT)  # the error has come in already
        assert got == ["0000", "0001", "0002", "0003", "0004"]
        raised[ahead] = (type(info.value), str(info.value))
    assert raised[True] == raised[False]


def test_leaving_early_abandons_the_request_in_flight_quietly() -> None:
    table = PagedTable(count=15, per_page=5)
    table.hold[1] = threading.Event()
    table.answer[1] = lost  # after the consumer has left
    thread_errors: list[Any] = []
    previous_hook = threading.excepthook
    threading.excepthook = thread_errors.append
    try:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            entities = iter(client_for(table).create_query("Paged").read_ahead(True))
            assert isinstance(entities, Generator)
            assert next(entities).RowKey == "0000"
            assert table.event(1).wait(WAIT)
            assert len(read_ahead_threads()) == 1
            entities.close()  # returns at once: page 2's request is still held by the service
            table.hold[1].set()
            for thread in read_ahead_threads():
                thread.join(WAIT)
            assert not read_ahead_threads()
    finally:
        threading.excepthook = previous_hook
    assert thread_errors == [] and warned == [] and len(table.requests) == 2


def test_break_in_a_for_loop_leaves_no_thread() -> None:
    table = PagedTable(count=50, per_page=5)
    for entity in client_for(table).create_query("Paged").read_ahead(True):
        if entity.RowKey == "0007":
            break
    for thread in read_ahead_threads():
        thread.join(WAIT)
    assert not read_ahead_threads()
    assert len(table.requests) <= 3


def test_a_continuation_cycle_is_reported_where_serial_iteration_reports_it() -> None:
    cycle = {"": "A", "A": "B", "B": "A"}

    def answer(request: HttpRequest) -> HttpResponse:
        params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(request.url).query))
        token = params.get("NextPartitionKey", "")
        headers = {"Content-Type": "application/json", "x-ms-continuation-NextPartitionKey": cycle[token]}
        return MockSender.response(200, json.dumps({"value": [{"PartitionKey": "p", "RowKey": token or "0"}]}), headers)

    for ahead in (False, True):
        sender = MockSender(answer)
        client = CloudStorageAccount.parse(CONNECTION).create_cloud_table_client(sender=sender)
        got: list[str] = []
        with pytest.raises(ContinuationCycleError):
            for entity in client.create_query("Paged").read_ahead(ahead):
                got.append(entity.RowKey)
        for thread in read_ahead_threads():
            thread.join(WAIT)
        assert got == ["0", "A", "B"] and len(sender.requests) == 3  # token A is not asked for again


def snapshot(ctx: Any) -> list[tuple[Any, ...]]:
    return sorted((d.identity, d.state, d.etag, dict(d.entity.items())) for d in ctx.entities)


@pytest.mark.parametrize("merge_option", [MergeOption.APPEND_ONLY, MergeOption.OVERWRITE_CHANGES,
                                          MergeOption.PRESERVE_CHANGES, MergeOption.NO_TRACKING])
def test_a_context_tracks_the_same_entities_as_serial_iteration(merge_option: MergeOption) -> None:
    results = {}
    for ahead in (False, True):
        table = PagedTable(count=23, per_page=5)
        ctx = client_for(table).get_table_service_context(merge_option=merge_option)
        first = [dict(e.items()) for e in ctx.create_query("Paged").read_ahead(ahead)]
        again = [dict(e.items()) for e in ctx.create_query("Paged").read_ahead(ahead)]  # refreshes what is tracked
        results[ahead] = (first, again, snapshot(ctx), len(table.requests))
        assert (READ_AHEAD_THREAD in table.threads) is ahead
    assert results[True] == results[False]


def test_a_context_refuses_a_second_thread_while_it_decodes() -> None:
    table = PagedTable(count=15, per_page=5)
    ctx = client_for(table).get_table_service_context()
    entered, release = threading.Event(), threading.Event()
    def slow_reading(entity: object, payload: object) -> None:
        entered.set()
        release.wait(WAIT)

    ctx.reading_entity.append(slow_reading)
    worker = threading.Thread(target=lambda: list(ctx.create_query("Paged").read_ahead(True)))
    worker.start()
    try:
        assert entered.wait(WAIT)
        with pytest.raises(RuntimeError, match="not thread-safe"):
            ctx.save_changes()
    finally:
        release.set()
        worker.join(WAIT)


class OnlyExecute:
    """A user's own source from before read-ahead: one method, one request per page."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def execute_query_segment(
        self, query: TableQuery[Any], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[Any]:
        self.threads.append(threading.current_thread().name)
        index = 0 if continuation_token is None else int(continuation_token.next_row_key or "0")
        token = ContinuationToken("p", str(index + 1)) if index < 2 else None
        return ResultSegment([DynamicEntity(PartitionKey="p", RowKey=str(index))], token)


def test_a_source_with_only_execute_query_segment_is_iterated_serially() -> None:
    source = OnlyExecute()
    assert not isinstance(source, PagedQuerySource)
    assert rows(TableQuery(source, "Paged", DynamicEntity)) == ["0", "1", "2"]
    assert set(source.threads) == {threading.current_thread().name}


def test_client_and_context_are_paged_sources() -> None:
    client = client_for(PagedTable(1, 1))
    assert isinstance(client, PagedQuerySource)
    assert isinstance(client.get_table_service_context(), PagedQuerySource)


def test_execute_segmented_is_exactly_one_request() -> None:
    table = PagedTable(count=15, per_page=5)
    segment = client_for(table).create_query("Paged").execute_segmented()
    assert len(segment.results) == 5 and segment.continuation_token is not None
    assert len(table.requests) == 1 and not read_ahead_threads()
