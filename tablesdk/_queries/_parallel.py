"""Parallel scans over PartitionKey ranges: :func:`find_partition_boundaries` and the
machinery behind :meth:`TableQuery.iter_parallel` and :meth:`TableQuery.iter_parallel_segments`.

The service keeps no statistics of key distribution, so boundaries are found by
probing (:func:`find_partition_boundaries`). The ranges a query is cut into
(:meth:`TableQuery.partition_ranges`) are read on threads that hand their pages
to one consumer through a bounded queue (:class:`_ParallelScan`); without given
boundaries, one worker reads the table from its start while they are probed
(:class:`_Lead`). Each range reads its pages as a query does
(:func:`~tablesdk._queries._query.query_pages`), without reading ahead: the other
workers keep the service busy.
"""

from __future__ import annotations

import bisect
import functools
import queue
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
import contextvars
from typing import Any, Generic, TypeVar

from ._continuation import ContinuationToken, ResultSegment
from .._entities._entity import DynamicEntity, E
from .._core._errors import require_positive_int
from .._entities._filter import prop
from ._query import TableQuery, query_pages

__all__ = [
    "boundary_search", "find_partition_boundaries", "partition_key_of", "probe_at", "probe_query", "run_search",
    "scan_entities", "scan_segments",
]

T = TypeVar("T")


#: Code points the boundary search works in: keys hold no control characters, and
#: surrogates cannot be sent; keys above U+D7FF all fall in the last range.
_FIRST_CHAR, _LAST_CHAR = 0x20, 0xD7FF
#: Characters resolved past the common prefix of the smallest and largest keys.
_RESOLVED_CHARS = 1


def find_partition_boundaries(query: TableQuery[Any], count: int, *, workers: int = 8) -> list[str]:
    """Up to ``count - 1`` PartitionKey boundaries that cut the table into ``count`` ranges.

    The service keeps no statistics of key distribution, so the boundaries are
    found by probing: each probe is a one-entity query (``$top=1``, only the
    keys selected) for the first PartitionKey at or above a string, ``workers``
    probes at a time. Three rounds of probes usually do: the smallest key; the
    first character position at which any key is larger than it (one probe
    per position, all at once); and the largest character at that position
    (probes at the likely ends of character runs: ``9``, ``f``, ``z``, ``F``,
    ``Z``, ``~``, each with the character after it, narrowed further only when
    that does not settle it). The boundaries are spread evenly between the
    smallest key and that prefix of the largest, character by character. The
    ranges are even in key space, not in entity count; use several ranges per
    worker (:meth:`TableQuery.iter_parallel` does) when keys cluster. Returns
    ``[]`` when the table has at most one partition key. The query's filter is
    not applied to probes (it could make each one scan far).
    """
    from concurrent.futures import ThreadPoolExecutor  # not at import (start-up)

    require_positive_int("count", count)
    probes = probe_query(query)

    def first_key_at(start: str) -> str | None:
        return partition_key_of(probe_at(probes, start).first_or_default())

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="tablesdk-probe") as pool:
        return run_search(boundary_search(count, max(1, workers)), lambda starts: list(pool.map(first_key_at, starts)))


def probe_query(query: TableQuery[Any]) -> TableQuery[DynamicEntity]:
    """The query of a probe for ``query``'s table: one entity, only its PartitionKey (the filter is not
    applied: it could make each probe scan far). A description: an async client runs it as well."""
    return TableQuery(
        query.source, query.table, DynamicEntity, select=("PartitionKey",), take=1, options=query.request_options
    )


def probe_at(probes: TableQuery[DynamicEntity], start: str) -> TableQuery[DynamicEntity]:
    """The probe for the first PartitionKey at or above ``start`` ("": the smallest)."""
    return probes.where(prop("PartitionKey") >= start) if start else probes


def partition_key_of(entity: DynamicEntity | None) -> str | None:
    """The PartitionKey a probe found, or None."""
    return None if entity is None else str(entity.PartitionKey)


#: A search that yields the starts to probe (all at once) and is sent the first key at or above each.
ProbeSearch = Generator[list[str], list[str | None], T]


def run_search(search: ProbeSearch[T], probe: Callable[[list[str]], list[str | None]]) -> T:
    """What ``search`` finds, each round of its starts probed by ``probe`` (the first key at or above each)."""
    try:
        starts = next(search)
        while True:
            starts = search.send(probe(starts))
    except StopIteration as done:
        found: T = done.value
        return found


def boundary_search(count: int, width: int) -> ProbeSearch[list[str]]:
    """The boundaries of :func:`find_partition_boundaries` as a search with no I/O: it yields the
    starts to probe, at most ``width`` at a time, and is sent the keys found; the threaded and the
    asyncio flavour each run the probes their way."""
    (lowest,) = yield [""]
    if lowest is None or count == 1:
        return []
    highest = yield from _highest_key_prefix(lowest, max(2, width))
    if highest is None:
        return []
    return _spread(lowest, highest, count)


def _highest_key_prefix(lowest: str, width: int) -> ProbeSearch[str | None]:
    """The largest key's first characters: one past the prefix it shares with ``lowest``
    (None when no key is larger than ``lowest``)."""
    found = yield from _divergence(lowest, width)
    if found is None:
        return None
    position, char = found
    prefix = lowest[:position]
    return prefix + chr((yield from _largest_next_char(prefix, char, width)))


def _divergence(lowest: str, width: int) -> ProbeSearch[tuple[int, int] | None]:
    """The first position at which some key is larger than ``lowest``, and a character found there.

    Every key lies between ``lowest`` and the largest, so all share the prefix
    those two share. The probe just above ``lowest`` at position ``i``
    (``lowest[:i]`` and the next character) finds a key exactly from the
    position where the largest key leaves ``lowest`` on (the probes fall as
    ``i`` grows), so that position is searched ``width`` positions per round:
    one round for keys of up to ``width`` characters, two for keys of up to
    about ``width * width``. None when no key is larger than ``lowest``.
    """
    positions = [i for i in range(len(lowest)) if ord(lowest[i]) < _LAST_CHAR] + [len(lowest)]
    low, high = 0, len(positions)  # the first answering position is in positions[low:high], or none answers
    answer: str | None = None
    while low < high:
        chosen = sorted({low + (high - low) * k // width for k in range(width)})
        starts = [lowest[:i] + (chr(ord(lowest[i]) + 1) if i < len(lowest) else chr(_FIRST_CHAR))
                  for i in (positions[j] for j in chosen)]
        answers = yield starts
        hit = next((n for n, key in enumerate(answers) if key is not None), None)
        if hit is None:
            low = chosen[-1] + 1
        else:
            answer, high = answers[hit], chosen[hit]
            low = chosen[hit - 1] + 1 if hit else low
    if answer is None:
        return None
    position = len(_common_prefix(lowest, answer))
    return position, min(ord(answer[position]), _LAST_CHAR)


#: Where runs of key characters usually end, the most common first (digits, lower-case hex
#: as in GUIDs, lower-case letters, upper-case hex, upper-case letters, printable ASCII):
#: each is probed with the character after it.
_RUN_ENDS = tuple(ord(char) for char in "9fzFZ~")


def _probe_points(low: int, high: int, width: int) -> list[int]:
    """Up to ``width`` ascending points in (low, high]: ``low + 1`` first (a run of one
    character settles in one round), then the ends of character runs and the characters
    after them (keys of digits, hex or letters settle in one round), then points spread
    over ASCII, plus U+007F while the interval goes beyond ASCII (keys rarely do)."""
    top = min(high, 0x7E) if low < 0x7E else high
    wanted = [low + 1]
    for end in _RUN_ENDS:
        wanted += [end, end + 1]
    slots = max(1, width - 3)
    step = max(1, (top - low) // (slots + 1))
    wanted += list(range(low + step, top, step)[:slots]) + [top]
    if top < high:
        wanted.append(0x7F)
    points: list[int] = []
    for point in wanted:
        if low < point <= high and point not in points and len(points) < width:
            points.append(point)
    return sorted(points)


def _largest_next_char(prefix: str, known: int, width: int) -> ProbeSearch[int]:
    """The largest ``c`` such that some key starts with ``prefix + chr(c)``; ``known`` is such a ``c``.

    Each probe answers with an actual key, which narrows the interval further
    than the point itself.
    """
    position = len(prefix)
    found = low = known
    high = _LAST_CHAR
    while high > low:
        points = _probe_points(low, high, width)
        answers = yield [prefix + chr(point) for point in points]
        for point, key in zip(points, answers):
            if key is not None and key.startswith(prefix) and len(key) > position:
                found = low = max(low, min(ord(key[position]), _LAST_CHAR))
            else:  # no key continues prefix at or above point
                high = min(high, point - 1)
                break
    return found


def _common_prefix(a: str, b: str) -> str:
    size = 0
    for x, y in zip(a, b):
        if x != y:
            break
        size += 1
    return a[:size]


@functools.lru_cache(maxsize=None)
def _alphabets() -> tuple[str, ...]:
    """Alphabets boundaries are spread over, narrowest first: the first that holds every
    character the smallest and largest keys have past their common prefix is used.

    Built on first use: the widest has 55,000 characters, a noticeable share of ``import tablesdk``.
    """
    return (
        "0123456789",
        "0123456789abcdef",
        "0123456789ABCDEF",
        "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
        "".join(map(chr, range(0x20, 0x7F))),
        "".join(map(chr, range(_FIRST_CHAR, _LAST_CHAR + 1))),
    )


def _spread(lowest: str, highest: str, count: int) -> list[str]:
    """``count - 1`` strings spread evenly between ``lowest`` and ``highest`` past their common prefix.

    The characters after the common prefix are read as digits in the narrowest
    alphabet that holds them all (digits, hex, letters and digits, ASCII, any).
    """
    shared = _common_prefix(lowest, highest)
    width = _RESOLVED_CHARS + 1
    low_tail, high_tail = lowest[len(shared):][:width], highest[len(shared):][:width]
    alphabets = _alphabets()
    alphabet = next(
        (chars for chars in alphabets if all(ch in chars for ch in low_tail + high_tail)), alphabets[-1]
    )
    base = len(alphabet)

    def number(tail: str) -> int:
        value = 0
        for index in range(width):
            value = value * base + (max(alphabet.find(tail[index]), 0) if index < len(tail) else 0)
        return value

    def text(value: int) -> str:
        chars = []
        for _ in range(width):
            value, index = divmod(value, base)
            chars.append(alphabet[index])
        return shared + "".join(reversed(chars))

    start, end = number(low_tail), number(high_tail) + base ** (width - len(high_tail))
    points: list[str] = []
    for index in range(1, count):
        point = text(start + (end - start) * index // count)
        if point > lowest and (not points or point > points[-1]):
            points.append(point)
    return points


_DONE = object()

#: A range to read: (range index, query, continuation token to start at).
_Job = tuple[int, TableQuery[Any], ContinuationToken | None]


class _ParallelScan(Generic[T]):
    """Runs range queries on threads and hands their pages to one consumer, in bounded memory.

    ``jobs`` are the ranges to read, all known up front; or, with ``lead``, the
    first worker reads the query from its start while the boundaries are found
    on a thread of their own, and the ranges arrive when they are (see :class:`_Lead`).
    """

    def __init__(self, jobs: Sequence[_Job], workers: int, lead: _Lead | None = None) -> None:
        self.workers = max(1, workers if lead is not None else min(workers, len(jobs)))
        self.pages: queue.Queue[Any] = queue.Queue(maxsize=2 * workers)
        self.stop = threading.Event()
        self.jobs: deque[_Job] = deque(jobs)
        self.more = threading.Condition()
        self.closed = lead is None  # True once no job will be added
        self.lead = lead

    def add_jobs(self, jobs: Sequence[_Job]) -> None:
        """Queue the last ``jobs`` (none may follow) and wake the workers waiting for them."""
        with self.more:
            self.jobs.extend(jobs)
            self.closed = True
            self.more.notify_all()

    def _next_job(self) -> _Job | None:
        with self.more:
            while not self.jobs and not self.closed and not self.stop.is_set():
                self.more.wait(0.05)
            return self.jobs.popleft() if self.jobs and not self.stop.is_set() else None

    def _put(self, item: Any) -> bool:
        while not self.stop.is_set():
            try:
                self.pages.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def read(self, index: int, query: TableQuery[Any], token: ContinuationToken | None) -> bool:
        """Hand out the pages of ``query`` from ``token`` on; False when the scan stopped first."""
        if self.stop.is_set():
            return False
        for results, following in query_pages(query, token, read_ahead=False):
            if not self._put((index, ResultSegment(results, following))):
                return False
            if following is None:
                return True
            if self.stop.is_set():
                return False
        return True

    def hand_out(self, index: int, segment: ResultSegment[Any]) -> bool:
        """Hand one page to the consumer; False when the scan stopped first."""
        return self._put((index, segment))

    def _work(self, leading: bool) -> None:
        try:
            if leading and self.lead is not None and not self.lead.run(self):
                return
            while not self.stop.is_set():
                job = self._next_job()
                if job is None or not self.read(*job):
                    break
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            self._put(exc)
        finally:
            self._put(_DONE)

    def _plan(self) -> None:
        assert self.lead is not None
        try:
            self.lead.plan(self)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            self._put(exc)
            self.add_jobs([])
        finally:
            self._put(_DONE)

    def segments(self) -> Iterator[tuple[int, ResultSegment[T]]]:
        """``(range index, page)`` as pages arrive; each range's last page has no continuation token."""
        threads = [
            threading.Thread(
                target=contextvars.copy_context().run, args=(self._work, index == 0), name=f"tablesdk-scan-{index}",
                daemon=True,
            )
            for index in range(self.workers)
        ]
        if self.lead is not None:
            threads.append(threading.Thread(
                target=contextvars.copy_context().run, args=(self._plan,), name="tablesdk-scan-plan", daemon=True
            ))
        for thread in threads:
            thread.start()
        running = len(threads)
        try:
            while running:
                item = self.pages.get()
                if item is _DONE:
                    running -= 1
                    continue
                if isinstance(item, BaseException):
                    raise item
                yield item
                item = None  # release the page before waiting for the next one
        finally:
            self.stop.set()
            for thread in threads:
                thread.join()


def _partition_key(entity: Any) -> str:
    return str(entity.PartitionKey)


class _Lead:
    """Reading a table from its start while its PartitionKey boundaries are found.

    Probing takes a few round trips in which the workers would idle, so the
    first worker reads the whole ``query`` page by page meanwhile. When
    ``find()`` returns the boundaries, the ranges from a cut on go to the
    workers: the cut is the first boundary past the key the leader last handed
    out, moved past as many boundaries as its last page spanned (the page in
    flight likely covers as many). The leader stops at the cut: a page that
    crosses it is handed out without the entities at or past it (a range
    reads them), and a page that stops short of it is followed by two fresh
    queries, the rest of the partition it ended in and the partitions up to
    the cut (a continuation token is only valid with its own query, so the
    leader's query cannot be narrowed). A table read to its end before the
    boundaries arrive needs no ranges.
    """

    def __init__(self, query: TableQuery[Any], find: Callable[[], list[str]]) -> None:
        self.query = query
        self.find = find
        self.lock = threading.Lock()
        self.decided = False
        self.finished = False
        self.cut: str | None = None
        self.page_keys: tuple[str, str] | None = None  # PartitionKeys of the last page's first and last entities
        self.last: tuple[str, str] | None = None  # keys of the last entity handed out

    def plan(self, scan: _ParallelScan[Any]) -> None:
        """Find the boundaries, choose the cut and queue the ranges past it (on the planning thread)."""
        boundaries = self.find()
        ranges = self.query.partition_ranges(boundaries)
        with self.lock:
            if self.finished:
                scan.add_jobs([])
                return
            start = 0
            if self.page_keys is not None:
                first, last = self.page_keys
                start = bisect.bisect_right(boundaries, last)
                start += start - bisect.bisect_right(boundaries, first)
            self.cut = boundaries[start] if start < len(boundaries) else None
            self.decided = True
            # boundaries[start] begins range start + 1
            scan.add_jobs([(index, ranges[index], None) for index in range(start + 1, len(ranges))] if self.cut else [])

    def run(self, scan: _ParallelScan[Any]) -> bool:
        """Read from the start up to the cut (the leader's job); False when the scan stopped first."""
        if scan.stop.is_set():
            return False
        for results, token in query_pages(self.query, read_ahead=False):
            with self.lock:
                cut = self.cut
                crossed = cut is not None and bool(results) and _partition_key(results[-1]) >= cut
                if crossed:
                    results = [entity for entity in results if _partition_key(entity) < str(cut)]
                if results:
                    self.page_keys = (_partition_key(results[0]), _partition_key(results[-1]))
                    self.last = (self.page_keys[1], str(results[-1].RowKey))
                done = token is None or crossed
                if done and not self.decided:
                    self.finished = True
                decided, last = self.decided, self.last
            if not scan.hand_out(0, ResultSegment(results, None if done else token)):
                return False
            if done:
                return True
            if decided and cut is not None:
                return self._up_to(cut, last, scan)
            if scan.stop.is_set():
                return False
        return True

    def _up_to(self, cut: str, last: tuple[str, str] | None, scan: _ParallelScan[Any]) -> bool:
        """Read what lies between the last entity handed out and the cut, as fresh queries."""
        key, row = prop("PartitionKey"), prop("RowKey")
        if last is None:
            return scan.read(0, self.query.where(key < cut), None)
        partition, row_key = last
        rest_of_partition = self.query.where(key == partition).where(row > row_key)
        return scan.read(0, rest_of_partition, None) and scan.read(
            0, self.query.where(key > partition).where(key < cut), None
        )


def _entities(segments: Iterator[tuple[int, ResultSegment[T]]], take: int | None) -> Iterator[T]:
    remaining = take
    try:
        for _, segment in segments:
            if remaining is None:
                yield from segment.results  # the list's own iterator hands out the entities
                continue
            for entity in segment.results:
                yield entity
                remaining -= 1
                if remaining == 0:
                    return
    finally:
        close = getattr(segments, "close", None)
        if close is not None:
            close()  # stops the workers at once when the consumer leaves early


def scan_entities(
    whole: TableQuery[E], take: int | None, workers: int, boundaries: Sequence[str] | None, ranges_per_worker: int
) -> Iterator[E]:
    """:meth:`TableQuery.iter_parallel` of ``whole`` (the query without its cap) capped at ``take``."""
    if boundaries is None:
        count = workers * max(1, ranges_per_worker)
        # The leader holds one connection while probes run: the rest probe.
        lead = _Lead(whole, lambda: find_partition_boundaries(whole, count, workers=max(1, workers - 1)))
        return _entities(_ParallelScan([], workers, lead).segments(), take)
    ranges = whole.partition_ranges(boundaries)
    return _entities(_ParallelScan([(i, q, None) for i, q in enumerate(ranges)], workers).segments(), take)


def scan_segments(
    whole: TableQuery[E],
    workers: int,
    boundaries: Sequence[str],
    resume: Mapping[int, ContinuationToken | None] | None,
) -> Iterator[tuple[int, ResultSegment[E]]]:
    """:meth:`TableQuery.iter_parallel_segments` of ``whole`` (the query without its cap)."""
    ranges = whole.partition_ranges(boundaries)
    jobs: list[tuple[int, TableQuery[Any], ContinuationToken | None]]
    if resume is None:
        jobs = [(index, query, None) for index, query in enumerate(ranges)]
    else:
        for index in resume:
            if not 0 <= index < len(ranges):
                raise ValueError(f"resume names range {index}; the boundaries give ranges 0..{len(ranges) - 1}")
        jobs = [(index, ranges[index], token) for index, token in sorted(resume.items())]
    if not jobs:
        return iter(())
    return _ParallelScan(jobs, workers).segments()
