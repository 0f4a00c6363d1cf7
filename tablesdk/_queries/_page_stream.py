"""Reading pages one after another: :func:`stream_pages` (threads) and :func:`stream_pages_async`
(asyncio), the one driver of a :class:`~tablesdk._queries._pager.Pager` per flavour.

Every reader of pages runs on them: the iteration of a query, its Arrow batches,
each range of a parallel scan, a table listing, the scans behind
``count_entities`` / ``delete_entities`` and the command line's export. A reader
gives the driver three things: ``fetch`` (the HTTP stage: one request, its answer
not yet decoded, with the next page's token in ``continuation_token``), ``decode``
(the answer's page: a list, or anything with ``len`` and slices, such as a
``pyarrow.RecordBatch``) and its read-ahead setting. The driver yields each page,
trimmed to what ``take`` still wants, with the token of the page that follows it.

Reading ahead is sending the next page's request as soon as a page's answer
(and so the next token) has arrived, before the page is decoded and used, so
that the service and the network prepare it meanwhile. At most one page is
read ahead. It has a price: a thread per page in the threaded flavour, and the
work of receiving the next page competes with decoding this one. So the setting
(:data:`ReadAhead`) is ``"auto"`` by default, and :class:`ReadAheadGauge`
decides page by page from what it measures:

* the *idle wait* of a page: the wall time of a request read in turn, less the
  CPU time the client spent on it (sending, receiving, parsing headers): the
  time spent waiting for the service and the network, which is all reading
  ahead can hide;
* the *work* of a page: the time from its answer's arrival until the reader
  asks for the next one (decoding it, and whatever the caller does with it).

Reading ahead can save at most ``min(idle wait, work)`` of a page's cycle
``(request wall time + work)``. That is the gate: pages are considered for reading
ahead only when it is at least :data:`ReadAheadGauge.SHARE` (15 %) of the cycle.
Against a fast server on an idle machine the idle wait is a few per cent of the
cycle and every page is read in turn, as cheap as without read-ahead. The first
two pages of a source's first scan are read in turn: nothing is measured before
the first is used, and the second is the time in turn that reading ahead is
compared with.

The idle wait does not say whether the wait can overlap: behind network latency it
can, but on a loaded machine a server on loopback waits for a core the decoding
holds, and reading ahead then only adds the second thread's cost. So when the gate
opens, :data:`ReadAheadGauge.TRIAL` pages are read ahead and each page's time per
entity (from being asked for to being used: the wait for it and the work on it)
is compared with that of the pages read in turn (only pages read the same way as
the page after them count: a page in hand while the next is read ahead pays for
that request), and so is the client's CPU time per entity (the reader's thread,
and the request's when it was read ahead). Reading ahead is kept when it takes at
most :data:`ReadAheadGauge.KEEP` (90 %) of the time in turn and at most
:data:`ReadAheadGauge.CPU_KEEP` (110 %) of the CPU; otherwise the next
:data:`ReadAheadGauge.BACK_OFF` (32) pages are read in turn before it is tried
again. While reading ahead, after every :data:`ReadAheadGauge.REMEASURE_EVERY`
(32) pages two are read in turn, to measure both again (a page read ahead waits
for the consumer's thread, which would count as idle). A scan starts from what
the last scan of the same source (client) measured and decided, so a short scan
does not spend its first pages measuring again. ``True`` reads ahead from the
first page on, ``False`` never.
"""

from __future__ import annotations

import contextvars
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, Union

from ._continuation import ContinuationToken, ResultSegment
from ._pager import PageRequest, Pager, Sliceable

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "ReadAhead", "ReadAheadGauge", "check_read_ahead", "segment_results", "stream_pages", "stream_pages_async",
]

#: Whether a reader of pages reads the next page ahead: ``"auto"`` (when what it measures says it
#: pays, see :class:`ReadAheadGauge`), ``True`` (always) or ``False`` (never).
ReadAhead = Union[bool, Literal["auto"]]


def check_read_ahead(setting: Any) -> ReadAhead:
    """``setting`` when it is a :data:`ReadAhead`; TypeError otherwise."""
    if isinstance(setting, bool) or setting == "auto":
        return setting  # type: ignore[no-any-return]
    raise TypeError(f"read_ahead is True, False or 'auto', not {setting!r}")


class Fetched(Protocol):
    """What the HTTP stage of a page gives: at least the next page's token."""

    @property
    def continuation_token(self) -> ContinuationToken | None: ...


F = TypeVar("F", bound=Fetched)
P = TypeVar("P", bound=Sliceable)
T = TypeVar("T")


def segment_results(segment: ResultSegment[T]) -> list[T]:
    """The page of a segment decoded already (a listing's, a source's that makes entities)."""
    return segment.results


class ReadAheadGauge:
    """Whether to read the next page ahead, decided page by page (see the module's documentation)."""

    #: The gate: read ahead only when what it can save is at least this share of a page's cycle.
    SHARE = 0.15
    #: Pages read ahead (and used) before their time per entity is compared with reading in turn.
    TRIAL = 2
    #: Reading ahead is kept when it takes at most this share of the time per entity in turn.
    KEEP = 0.9
    #: ... and at most this share of the client CPU per entity in turn.
    CPU_KEEP = 1.1
    #: Pages read in turn after reading ahead did not pay, before it is tried again.
    BACK_OFF = 32
    #: While reading ahead, after this many pages two are read in turn, to measure both again.
    REMEASURE_EVERY = 32

    __slots__ = ("setting", "idle", "wall", "work", "_turn", "_ahead", "_kept", "_in_turn_left", "_ahead_in_a_row")

    def __init__(self, setting: ReadAhead) -> None:
        self.setting = setting
        self.idle: float | None = None  # the last page read in turn: its wait less the client's CPU
        self.wall: float | None = None  # ... and its wall time
        self.work: float | None = None  # the last page's time from its arrival to the next request
        self._turn = [0.0, 0, 0.0]  # seconds, entities and client CPU seconds of pages read in turn
        self._ahead = [0.0, 0, 0.0, 0]  # ... of pages read ahead, and how many of those pages
        self._kept = False  # reading ahead was tried and paid
        self._in_turn_left = 0
        self._ahead_in_a_row = 0

    def take_over(self, earlier: ReadAheadGauge) -> None:
        """Start from what ``earlier`` (the last scan of the same source) measured and decided."""
        self.idle, self.wall, self.work, self._kept = earlier.idle, earlier.wall, earlier.work, earlier._kept
        self._turn, self._ahead = list(earlier._turn), list(earlier._ahead)
        self._in_turn_left, self._ahead_in_a_row = earlier._in_turn_left, earlier._ahead_in_a_row

    def fetched_in_turn(self, wall: float, cpu: float) -> None:
        """Record a page requested and waited for in turn: ``wall`` seconds, ``cpu`` of them the client's."""
        self.wall, self.idle = wall, max(0.0, wall - cpu)

    def used(self, steady: bool | None, cost: float, work: float, entities: int, cpu: float = 0.0) -> None:
        """Record a page used: its time from being asked for to being used (``cost``), of which
        ``work`` after it arrived, its entities and the client's CPU time for it (``cpu``: the
        reader's thread over that time, and the request's thread when it was read ahead).
        ``steady``: True when it was read ahead and the next page was read ahead while it was used,
        False when neither was, None for a page in between (its time is neither's)."""
        self.work = work
        if steady:
            ahead = self._ahead
            ahead[0] += cost
            ahead[1] += entities
            ahead[2] += cpu
            ahead[3] += 1
        elif steady is not None:  # older pages read in turn count for less: the service's answers change
            turn = self._turn
            turn[0], turn[1], turn[2] = turn[0] / 2 + cost, turn[1] // 2 + entities, turn[2] / 2 + cpu

    def _pays(self) -> bool:
        """Whether the pages read ahead took at most :data:`KEEP` of the time per entity in turn,
        and at most :data:`CPU_KEEP` of the client CPU per entity."""
        (ahead, ahead_entities, ahead_cpu, _), (turn, turn_entities, turn_cpu) = self._ahead, self._turn
        if not ahead_entities:
            return True  # pages of no entities: nothing to compare, the gate's measure stands
        per_ahead, per_turn = 1 / ahead_entities, 1 / turn_entities
        return (ahead * per_ahead <= self.KEEP * turn * per_turn
                and ahead_cpu * per_ahead <= self.CPU_KEEP * turn_cpu * per_turn)

    def wanted(self) -> bool:
        """Whether to read the next page ahead."""
        if self.setting != "auto":
            return bool(self.setting)
        if self._in_turn_left:
            self._in_turn_left -= 1
            return False
        idle, wall, work = self.idle, self.wall, self.work
        if idle is None or wall is None or work is None or not self._turn[1]:
            return False  # nothing measured yet, or no page read in turn to compare with
        if min(idle, work) < self.SHARE * (wall + work):
            return False
        if not self._kept:
            if self._ahead[3] < self.TRIAL:
                return True  # trying it
            if not self._pays():
                self._ahead = [0.0, 0, 0.0, 0]
                self._in_turn_left = self.BACK_OFF
                return False
            self._kept = True
        self._ahead_in_a_row += 1
        if self._ahead_in_a_row <= self.REMEASURE_EVERY:
            return True
        # Two pages in turn: the second is read and used with nothing read ahead meanwhile,
        # and reading ahead is judged again once it is used.
        self._ahead_in_a_row, self._in_turn_left, self._kept = 0, 1, False
        return False


class _InFlight:
    """The request of the next page, sent on a thread of its own while the reader's thread decodes
    and hands out the page before it.

    A thread per page: starting one costs far less than a round trip, and no executor is used
    (``begin_execute`` iterates queries on the client's: a read-ahead queued behind a full pool
    would wait for the iteration that waits for it). When reading stops early nobody calls
    :meth:`result`: the thread ends with its request, and its page or error is dropped.
    """

    __slots__ = ("_thread", "_fetched", "_error", "cpu")

    def __init__(self, fetch: Callable[[PageRequest], Any], request: PageRequest) -> None:
        self._fetched: Any = None
        self._error: BaseException | None = None
        self.cpu = 0.0  # the CPU time of the request, on its thread
        # The caller's context goes with the request (an OpenTelemetry span, a contextvar the
        # application set), as if the page were fetched on the reader's thread.
        self._thread = threading.Thread(
            target=contextvars.copy_context().run, args=(self._run, fetch, request), name="tablesdk-read-ahead",
            daemon=True,
        )
        self._thread.start()

    def _run(self, fetch: Callable[[PageRequest], Any], request: PageRequest) -> None:
        try:
            self._fetched = fetch(request)
        except BaseException as exc:  # noqa: BLE001 - raised by result(), where reading in turn raises it
            self._error = exc
        self.cpu = time.thread_time()

    def result(self) -> Any:
        """The page, once its request is done; raises what the request raised."""
        self._thread.join()
        fetched, error = self._fetched, self._error
        self._fetched = self._error = None  # the caller holds the page (or the error) from here on
        if error is not None:
            raise error
        return fetched


#: The gauge of each source's (a client's) last scan: the next scan starts from what it measured.
_LAST_GAUGE: weakref.WeakKeyDictionary[Any, ReadAheadGauge] = weakref.WeakKeyDictionary()


def _gauge(read_ahead: ReadAhead, source: object) -> ReadAheadGauge:
    gauge = ReadAheadGauge(read_ahead)
    if source is None:
        return gauge
    try:
        earlier = _LAST_GAUGE.get(source)
        _LAST_GAUGE[source] = gauge
    except TypeError:  # a source that cannot be weakly referenced: every scan measures afresh
        return gauge
    if earlier is not None:
        gauge.take_over(earlier)
    return gauge


class _Reading:
    """One reader's pager and read-ahead gauge, and the steps both drivers take for each page."""

    __slots__ = ("pager", "gauge", "asked", "asked_cpu", "arrived", "read_ahead", "next_ahead", "entities", "cpu")

    def __init__(self, pager: Pager, read_ahead: ReadAhead, source: object) -> None:
        self.pager = pager
        self.gauge = _gauge(read_ahead, source)
        self.asked = self.arrived = time.perf_counter()
        self.asked_cpu = time.thread_time()
        self.cpu = 0.0  # CPU time spent for the page in hand on another thread (its request read ahead)
        self.read_ahead = False  # whether the page in hand was read ahead
        self.next_ahead = False  # whether the next page is read ahead while this one is used
        self.entities = 0

    def started(self) -> tuple[float, float]:
        """The wall and CPU clocks when a request read in turn is sent."""
        return time.perf_counter(), time.thread_time()

    def arrived_in_turn(self, started: tuple[float, float]) -> None:
        """A page read in turn arrived: measure it."""
        self.arrived = time.perf_counter()
        self.read_ahead, self.cpu = False, 0.0
        self.gauge.fetched_in_turn(self.arrived - started[0], time.thread_time() - started[1])

    def arrived_ahead(self, cpu: float) -> None:
        """A page read ahead arrived; its request took ``cpu`` on another thread (0: this one's)."""
        self.arrived = time.perf_counter()
        self.read_ahead, self.cpu = True, cpu

    def ahead(self, token: ContinuationToken | None) -> PageRequest | None:
        """The request to send now, before the page that arrived with ``token`` is decoded; or None."""
        request = self.pager.ahead(token) if self.gauge.wanted() else None
        self.next_ahead = request is not None
        return request

    def hand_out(self, page: P, token: ContinuationToken | None) -> tuple[P, ContinuationToken | None]:
        """The decoded ``page`` trimmed to what ``take`` wants, with the token of the page after it."""
        pager = self.pager
        page = pager.trim(page)
        self.entities = len(page)
        return page, None if pager.done else token

    def following(self, token: ContinuationToken | None) -> PageRequest | None:
        """Once the page is used: the next request (the one read ahead, if any), or None."""
        now, cpu = time.perf_counter(), time.thread_time()
        steady = self.read_ahead if self.read_ahead == self.next_ahead else None
        self.gauge.used(steady, now - self.asked, now - self.arrived, self.entities, cpu - self.asked_cpu + self.cpu)
        self.asked, self.asked_cpu = now, cpu
        return self.pager.next(token)


def stream_pages(
    pager: Pager,
    fetch: Callable[[PageRequest], F],
    decode: Callable[[F], P],
    read_ahead: ReadAhead = False,
    source: object = None,
) -> Iterator[tuple[P, ContinuationToken | None]]:
    """Each page ``pager`` leads to, decoded and trimmed, with the token of the page after it
    (None on the last page, or when ``take`` is reached).

    ``fetch`` may run on another thread when reading ahead (it must touch nothing but the
    transport); ``decode`` runs on the reader's thread. Only the current page and the next
    page's undecoded answer are held. ``source`` (the client that answers): a scan starts from
    what the last scan of the same source measured.
    """
    reading = _Reading(pager, read_ahead, source)
    request: PageRequest | None = pager.first()
    in_flight: _InFlight | None = None
    while request is not None:
        if in_flight is None:
            started = reading.started()
            fetched: F | None = fetch(request)
            reading.arrived_in_turn(started)
        else:
            fetched = in_flight.result()
            reading.arrived_ahead(in_flight.cpu)
            in_flight = None
        assert fetched is not None
        token = fetched.continuation_token
        ahead = reading.ahead(token)
        in_flight = _InFlight(fetch, ahead) if ahead is not None else None
        page: P | None = decode(fetched)
        fetched = None  # the undecoded answer is no longer needed
        assert page is not None
        yield reading.hand_out(page, token)
        page = None  # release this page before the next request
        request = reading.following(token)  # the request read ahead, when there is one


async def stream_pages_async(
    pager: Pager,
    fetch: Callable[[PageRequest], Awaitable[F]],
    decode: Callable[[F], P],
    read_ahead: ReadAhead = False,
    source: object = None,
) -> AsyncIterator[tuple[P, ContinuationToken | None]]:
    """:func:`stream_pages` on the event loop: a page read ahead is a task, sent before this page
    is decoded; closing the iterator early cancels it."""
    import asyncio  # not at import: the threaded flavour never needs it (start-up)

    reading = _Reading(pager, read_ahead, source)
    request: PageRequest | None = pager.first()
    in_flight: asyncio.Future[F] | None = None
    try:
        while request is not None:
            if in_flight is not None:
                fetched: F | None = await in_flight
                in_flight = None
                reading.arrived_ahead(0.0)  # the task ran on this thread: its CPU is counted already
            else:
                started = reading.started()
                fetched = await fetch(request)
                reading.arrived_in_turn(started)
            assert fetched is not None
            token = fetched.continuation_token
            ahead = reading.ahead(token)
            if ahead is not None:
                in_flight = asyncio.ensure_future(fetch(ahead))
                await asyncio.sleep(0)  # let it send its request before this page is decoded
            page: P | None = decode(fetched)
            fetched = None
            assert page is not None
            yield reading.hand_out(page, token)
            page = None
            request = reading.following(token)
    finally:
        if in_flight is not None:
            in_flight.cancel()
