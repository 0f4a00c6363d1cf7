"""The page stream (tablesdk._queries._page_stream): one driver of the Pager per flavour, and the read-ahead
rule of ``"auto"``: read ahead only when the wait for the service is a significant share of a
page's time. Time is a fake clock here: the fetches and the consumer advance it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import tablesdk._queries._page_stream as page_stream
from tablesdk import ContinuationCycleError, ContinuationToken
from tablesdk._queries._page_stream import ReadAheadGauge, check_read_ahead, stream_pages, stream_pages_async
from tablesdk._queries._pager import PageRequest, Pager


# ---------------------------------------------------------------- the rule


def test_nothing_measured_is_no_read_ahead() -> None:
    gauge = ReadAheadGauge("auto")
    assert not gauge.wanted()
    gauge.fetched_in_turn(0.030, 0.001)
    assert not gauge.wanted()  # no page used yet: no time in turn to compare with


def test_a_fast_server_is_read_in_turn() -> None:
    gauge = ReadAheadGauge("auto")
    gauge.fetched_in_turn(0.010, 0.009)  # loopback: the client's own CPU is nearly all of the wait
    gauge.used(False, 0.035, 0.025, 1000)
    assert not gauge.wanted()


def test_latency_is_read_ahead() -> None:
    gauge = ReadAheadGauge("auto")
    gauge.fetched_in_turn(0.030, 0.008)  # 20 ms of network latency in the wait
    gauge.used(False, 0.055, 0.025, 1000)
    assert gauge.wanted()


def test_a_consumer_with_nothing_to_do_is_not_worth_a_thread() -> None:
    gauge = ReadAheadGauge("auto")
    gauge.fetched_in_turn(0.030, 0.001)
    gauge.used(False, 0.031, 0.001, 1000)  # nothing to overlap the wait with
    assert not gauge.wanted()


def _gauge_reading_ahead() -> ReadAheadGauge:
    gauge = ReadAheadGauge("auto")
    gauge.fetched_in_turn(0.030, 0.008)  # 20 ms of network latency in the wait
    gauge.used(False, 0.055, 0.025, 1000)  # the first page, read in turn: 55 ms
    return gauge


def test_reading_ahead_is_tried_and_kept_when_it_pays() -> None:
    gauge = _gauge_reading_ahead()
    for _ in range(ReadAheadGauge.TRIAL):
        assert gauge.wanted()  # trying it
        gauge.used(True, 0.030, 0.025, 1000)  # the wait overlapped: 30 ms a page
    every = ReadAheadGauge.REMEASURE_EVERY
    decisions = []
    for _ in range(2 * (every + 2)):
        decisions.append(gauge.wanted())
        gauge.used(decisions[-1], 0.030 if decisions[-1] else 0.055, 0.025, 1000)
    # after every REMEASURE_EVERY pages read ahead, two are read in turn, to measure again; it still pays
    assert decisions == 2 * ([True] * every + [False, False])


def test_reading_ahead_that_costs_more_client_cpu_is_not_kept() -> None:
    gauge = ReadAheadGauge("auto")
    gauge.fetched_in_turn(0.030, 0.008)
    gauge.used(False, 0.055, 0.025, 1000, cpu=0.030)
    for _ in range(ReadAheadGauge.TRIAL):
        assert gauge.wanted()
        gauge.used(True, 0.040, 0.035, 1000, cpu=0.040)  # faster, but a third more CPU (threads contending)
    assert not gauge.wanted()


def test_reading_ahead_that_does_not_pay_is_left_for_a_while() -> None:
    gauge = _gauge_reading_ahead()
    for _ in range(ReadAheadGauge.TRIAL):
        assert gauge.wanted()
        gauge.used(True, 0.052, 0.050, 1000)  # a loaded machine: the wait did not overlap
    decisions = []
    for _ in range(ReadAheadGauge.BACK_OFF + 1):
        decisions.append(gauge.wanted())
        gauge.used(False, 0.055, 0.025, 1000)
    assert decisions == [False] * ReadAheadGauge.BACK_OFF + [False]  # judged at the first, then left
    assert gauge.wanted()  # and tried again


def test_true_and_false_do_not_measure() -> None:
    assert ReadAheadGauge(True).wanted() and not ReadAheadGauge(False).wanted()


@pytest.mark.parametrize("setting", [None, 1, "yes", "Auto"])
def test_the_setting_is_true_false_or_auto(setting: Any) -> None:
    with pytest.raises(TypeError, match="read_ahead is True, False or 'auto'"):
        check_read_ahead(setting)
    assert [check_read_ahead(s) for s in (True, False, "auto")] == [True, False, "auto"]


# ---------------------------------------------------------------- the sync driver on a fake clock


@dataclass
class Clock:
    """``perf_counter`` and ``thread_time`` of the driver: wall time moves with both, CPU only with work."""

    wall: float = 0.0
    cpu: float = 0.0

    def perf_counter(self) -> float:
        return self.wall

    def thread_time(self) -> float:
        return self.cpu


@dataclass
class Page:
    continuation_token: ContinuationToken | None
    items: list[int]


@dataclass
class Service:
    """``pages`` pages of 2 items; each request takes ``latency`` seconds of waiting and ``receive`` of CPU."""

    clock: Clock
    pages: int
    latency: float
    receive: float = 0.002
    requests: list[tuple[int, int]] = field(default_factory=list)  # (page, pages the consumer finished by then)
    consumed: int = 0

    def fetch(self, request: PageRequest, overlapped: bool = False) -> Page:
        index = 0 if request.token is None else int(request.token.next_row_key or "0")
        self.requests.append((index, self.consumed))
        self.clock.wall += self.receive if overlapped else self.latency + self.receive
        self.clock.cpu += self.receive
        token = ContinuationToken("p", str(index + 1)) if index + 1 < self.pages else None
        return Page(token, [2 * index, 2 * index + 1])


class OverlappedFlight:
    """A page read ahead, requested at once on the reader's thread (the order of events does not
    depend on a thread's timing) and answered with its wait hidden behind the consumer's work."""

    overlapped = True
    cpu = 0.0  # its CPU runs on the fake clock's one thread

    def __init__(self, fetch: Any, request: PageRequest) -> None:
        self._fetched = fetch.__self__.fetch(request, overlapped=self.overlapped)

    def result(self) -> Any:
        return self._fetched


class SerialFlight(OverlappedFlight):
    """A page read ahead whose wait does not overlap (a loaded machine: the server waits for the
    core the consumer holds): the consumer's clock runs through it."""

    overlapped = False


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    fake = Clock()
    monkeypatch.setattr(page_stream, "time", fake)
    monkeypatch.setattr(page_stream, "_InFlight", OverlappedFlight)
    yield fake


def _consume(service: Service, clock: Clock, work: float, setting: Any, source: object = None) -> list[int]:
    items: list[int] = []
    for page, _ in stream_pages(Pager(), service.fetch, lambda p: p.items, setting, source):
        items += page
        clock.wall += work
        clock.cpu += work
        service.consumed += 1
    return items


def test_auto_reads_in_turn_against_a_fast_server(clock: Clock) -> None:
    service = Service(clock, pages=8, latency=0.0005)
    assert _consume(service, clock, 0.025, "auto") == list(range(16))
    # every request went out after the page before it was used up: no read-ahead thread
    assert [done for _, done in service.requests] == list(range(8))


def test_auto_reads_ahead_behind_latency(clock: Clock) -> None:
    service = Service(clock, pages=8, latency=0.020)
    assert _consume(service, clock, 0.025, "auto") == list(range(16))
    # pages 1 and 2 are read in turn (measured), the rest while the page before is in hand
    assert [done for _, done in service.requests] == [0, 1, 1, 2, 3, 4, 5, 6]
    assert [index for index, _ in service.requests] == list(range(8))


def test_auto_stops_reading_ahead_when_the_wait_does_not_overlap(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(page_stream, "_InFlight", SerialFlight)
    service = Service(clock, pages=8, latency=0.020)
    assert _consume(service, clock, 0.025, "auto") == list(range(16))
    # pages 3 to 5 are read ahead (the trial), then the rest in turn: the trial did not pay
    assert [done for _, done in service.requests] == [0, 1, 1, 2, 3, 5, 6, 7]


def test_a_scan_starts_from_what_the_last_scan_of_its_source_measured(clock: Clock) -> None:
    source = Clock  # any object that can be weakly referenced: a client
    _consume(Service(clock, pages=8, latency=0.020), clock, 0.025, "auto", source)
    again = Service(clock, pages=8, latency=0.020)
    assert _consume(again, clock, 0.025, "auto", source) == list(range(16))
    # reading ahead paid in the first scan: the second reads ahead from its first page on
    assert [done for _, done in again.requests] == [0, 0, 1, 2, 3, 4, 5, 6]
    other = Service(clock, pages=3, latency=0.020)
    _consume(other, clock, 0.025, "auto", object())  # another source measures afresh
    assert [done for _, done in other.requests] == [0, 1, 1]  # two pages in turn, then the trial


def test_false_never_reads_ahead(clock: Clock) -> None:
    service = Service(clock, pages=5, latency=0.020)
    _consume(service, clock, 0.025, False)
    assert [done for _, done in service.requests] == list(range(5))


def test_the_stream_gives_each_page_the_token_after_it_and_none_when_take_is_reached() -> None:
    service = Service(Clock(), pages=5, latency=0)
    got = list(stream_pages(Pager(3, lambda remaining: remaining), service.fetch, lambda p: p.items))
    assert [(page, token.next_row_key if token else None) for page, token in got] == [([0, 1], "1"), ([2], None)]


def test_the_stream_raises_a_cycle_after_the_page_that_repeats() -> None:
    def fetch(request: PageRequest) -> Page:
        return Page(ContinuationToken("p", "same"), [1])

    pages = stream_pages(Pager(), fetch, lambda p: p.items, True)
    assert next(pages)[0] == [1] and next(pages)[0] == [1]
    with pytest.raises(ContinuationCycleError):
        next(pages)


# ---------------------------------------------------------------- the async driver


def test_async_reads_ahead_before_decoding_and_cancels_on_leaving() -> None:
    async def main() -> None:
        requested: list[int] = []
        release = asyncio.Event()

        async def fetch(request: PageRequest) -> Page:
            index = 0 if request.token is None else int(request.token.next_row_key or "0")
            requested.append(index)
            if index == 2:
                await release.wait()  # never set: this request is still in flight when the loop leaves
            return Page(ContinuationToken("p", str(index + 1)), [index])

        def decode(page: Page) -> list[int]:
            # the next page's request went out before this page is decoded
            assert requested[-1] == page.items[0] + 1
            return page.items

        stream = stream_pages_async(Pager(), fetch, decode, True)
        seen = [page async for page, _ in _first(stream, 2)]
        assert seen == [[0], [1]] and requested == [0, 1, 2]
        await stream.aclose()  # type: ignore[attr-defined]
        pending = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        await asyncio.sleep(0)
        assert all(task.done() for task in pending)

    asyncio.run(main())


async def _first(stream: Any, n: int) -> Any:
    for _ in range(n):
        yield await stream.__anext__()


def test_async_auto_reads_in_turn_against_a_fast_server(clock: Clock) -> None:
    service = Service(clock, pages=6, latency=0.0005)

    async def fetch(request: PageRequest) -> Page:
        return service.fetch(request)

    async def main() -> list[int]:
        items: list[int] = []
        async for page, _ in stream_pages_async(Pager(), fetch, lambda p: p.items, "auto"):
            items += page
            clock.wall += 0.025
            clock.cpu += 0.025
            service.consumed += 1
        return items

    assert asyncio.run(main()) == list(range(12))
    assert [done for _, done in service.requests] == list(range(6))
