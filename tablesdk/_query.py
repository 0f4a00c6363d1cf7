"""Queries: :class:`TableQuery`, paging, :class:`ContinuationToken` and :class:`ResultSegment`.

A :class:`TableQuery` is an immutable description of a query (table, entity
type, filter, take, select, page size) bound to a :class:`QuerySource` that
runs one page at a time (a ``CloudTableClient`` or a ``TableServiceContext``)::

    q = ctx.create_query("Blogs", Blog).where(Blog.PartitionKey == "Channel9").take(10)
    for blog in q: ...                       # lazily follows continuation tokens
    seg = q.execute_segmented(token)          # exactly one request: seg.results, seg.continuation_token

Paging rules (the service returns at most 1000 entities per response, and may
return fewer, or none, with a continuation token at any time):

* ``take(n)`` caps the *total* number of entities iteration yields. Each request
  asks for ``$top = min(remaining, page_size or 1000)``, so ``take(2500)``
  requests 1000, 1000 and 500, and nothing is ever capped at 100 (the bug of
  Storage Client v1.2).
* Without ``take``, ``$top`` is the page size when one is set, otherwise it is
  left out and the service's default (1000) applies.
* Iteration follows continuation tokens, including tokens that come with an
  empty page, and keeps only the current page in memory (and, while it is
  used, the next page's undecoded answer: the next request goes out as soon
  as a page's token has arrived; see :meth:`TableQuery.read_ahead`).

The module also holds the white paper's key helpers (section "Tips and
Tricks"): :func:`reverse_ticks` / :func:`datetime_from_reverse_ticks` for
newest-first RowKeys and :func:`fixed_width_key` for numbers in keys.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import queue
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from functools import partial
from itertools import islice
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from ._edm import EdmDateTime, EntityPage
from ._entity import DynamicEntity, E, validate_table_name
from ._errors import ContinuationCycleError, TableValidationError, require_positive_int
from ._filter import Filter, FilterLike, as_filter, point_keys, prop, render_filter
from ._http import HttpResponse, workers_within_pool

__all__ = [
    "ContinuationToken",
    "ResultSegment",
    "FetchedPage",
    "QuerySource",
    "PagedQuerySource",
    "TableQuery",
    "EmptyResultError",
    "MAX_PAGE_SIZE",
    "DATETIME_MAX_TICKS",
    "reverse_ticks",
    "datetime_from_reverse_ticks",
    "fixed_width_key",
    "find_partition_boundaries",
]

#: The most entities the service returns in one response (and the largest ``$top``).
MAX_PAGE_SIZE = 1000

T = TypeVar("T")


class EmptyResultError(LookupError):
    """:meth:`TableQuery.first` found no entity (a ``LookupError``, like ``next()`` on nothing)."""


# ---------------------------------------------------------------- continuation tokens


def _check_cycle(token: ContinuationToken, seen: set[ContinuationToken]) -> None:
    """Raise :class:`ContinuationCycleError` if ``token`` was seen before in this iteration, else remember it.

    Tokens only move forward through a query, so a repeat (A, B, A) is a cycle
    that would request the same pages forever.
    """
    if token in seen:
        raise ContinuationCycleError(
            f"the service sent continuation token {token.to_string()} twice in one query; "
            "stopping instead of requesting the same pages forever",
            token=token,
        )
    seen.add(token)

_TOKEN_VERSION = "1"


@dataclass(frozen=True)
class ContinuationToken:
    """Where the next page of a query starts. Treat it as opaque.

    For entity queries the service gives ``next_partition_key`` and
    ``next_row_key`` (either may be None); for table listing it gives
    ``next_table_name``. The values may point at no existing entity, and
    they are only meaningful with the *same* query (filter, select, take).

    :meth:`to_string` gives a URL-safe text that a web application can put in
    a link or a form and :meth:`from_string` reads it back; any key (empty,
    unicode, containing ``%`` or quotes) survives the round trip.

    ``target_location`` (``"primary"`` or ``"secondary"``) is set on tokens
    from a client with a ``location_mode``: the endpoint that produced the page,
    where the next page is then read too, so one query's pages come from one
    copy of the data. None (any other client) means the primary.
    """

    next_partition_key: str | None = None
    next_row_key: str | None = None
    next_table_name: str | None = None
    target_location: str | None = None

    def __post_init__(self) -> None:
        parts = (self.next_partition_key, self.next_row_key, self.next_table_name)
        for part in parts:
            if part is not None and not isinstance(part, str):
                raise TypeError(f"continuation token parts are str or None, not {type(part).__name__}")
        if all(part is None for part in parts):
            raise ValueError("a continuation token needs at least one of its parts")
        if self.target_location not in (None, "primary", "secondary"):
            raise ValueError(f"target_location is 'primary', 'secondary' or None, not {self.target_location!r}")

    def to_string(self) -> str:
        """A URL-safe, versioned text form: ``"1." + base64url(JSON)`` (no padding)."""
        fields: list[str | None] = [self.next_partition_key, self.next_row_key, self.next_table_name]
        if self.target_location is not None:  # only pinned tokens carry the fourth field
            fields.append(self.target_location)
        payload = json.dumps(fields, ensure_ascii=True, separators=(",", ":"))
        encoded = base64.urlsafe_b64encode(payload.encode("ascii")).decode("ascii").rstrip("=")
        return f"{_TOKEN_VERSION}.{encoded}"

    @classmethod
    def from_string(cls, text: str) -> ContinuationToken:
        """Read a token written by :meth:`to_string`; ``ValueError`` for anything else."""
        if not isinstance(text, str):
            raise ValueError(f"a continuation token string is a str, not {type(text).__name__}")
        version, dot, body = text.partition(".")
        if not dot or version != _TOKEN_VERSION:
            raise ValueError("not a tablesdk continuation token (unknown format or version)")
        if not body or len(body) % 4 == 1:
            raise ValueError("not a tablesdk continuation token (bad encoding)")
        try:
            standard = body.replace("-", "+").replace("_", "/") + "=" * (-len(body) % 4)
            raw = base64.b64decode(standard.encode("ascii"), validate=True)
            parts = json.loads(raw.decode("ascii"))
        except (binascii.Error, UnicodeError, ValueError) as exc:
            raise ValueError("not a tablesdk continuation token (bad encoding)") from exc
        if (
            not isinstance(parts, list)
            or len(parts) not in (3, 4)
            or not all(part is None or isinstance(part, str) for part in parts)
            or all(part is None for part in parts[:3])
            or (len(parts) == 4 and parts[3] not in ("primary", "secondary"))
        ):
            raise ValueError("not a tablesdk continuation token (bad contents)")
        return cls(parts[0], parts[1], parts[2], parts[3] if len(parts) == 4 else None)

    def __str__(self) -> str:
        return self.to_string()


@dataclass(frozen=True)
class ResultSegment(Generic[T]):
    """One page of results and the token of the next page (None on the last page).

    A page may be empty and still have a token: the service returns such pages
    (for example at partition-server boundaries); keep going.
    """

    results: list[T]
    continuation_token: ContinuationToken | None

    @property
    def has_more(self) -> bool:
        """Whether the service said more results may follow."""
        return self.continuation_token is not None


@dataclass(frozen=True)
class FetchedPage:
    """One page of a query as it arrived, before its entities are read.

    A source's HTTP stage (sending the request, with retries) gives this to
    its decode stage (reading the entities, tracking them): the next page's
    ``continuation_token`` comes from the response headers, so the request of
    the next page can be sent while this one is decoded. ``response`` holds
    the undecoded body; a page read whole in its one request (a point query)
    is in ``page`` instead, with ``response`` None.
    """

    continuation_token: ContinuationToken | None
    response: HttpResponse | None = None
    page: EntityPage | None = None


class QuerySource(Protocol[E]):
    """Runs one page of a query: implemented by ``CloudTableClient`` and ``TableServiceContext``.

    A source whose ``supports_parallel_queries`` attribute is True may run
    pages of several queries at once on different threads
    (:meth:`TableQuery.iter_parallel` requires it). A source that also splits
    a page into its request and its decoding (:class:`PagedQuerySource`) is
    iterated with the next page read ahead.
    """

    def execute_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[E]:
        """Send one request for ``query`` starting at ``continuation_token`` with ``$top=top``."""
        ...


@runtime_checkable
class PagedQuerySource(QuerySource[E], Protocol[E]):
    """A :class:`QuerySource` that runs a page in two stages, so that iteration can read ahead.

    :meth:`fetch_query_segment` is the HTTP stage: it sends the request (with
    retries) and returns the answer undecoded, with the next page's token from
    its headers. It touches nothing but the transport, and may be called on
    another thread while the iterating thread decodes the page before.
    :meth:`decode_query_segment` reads (and, in a context, tracks) the
    entities, on the iterating thread. ``execute_query_segment`` is the
    decode of the fetch. ``CloudTableClient`` and ``TableServiceContext``
    implement it; a source with only ``execute_query_segment`` is iterated one
    request at a time.
    """

    def fetch_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> FetchedPage:
        """Send one request for ``query`` starting at ``continuation_token`` with ``$top=top``; do not decode."""
        ...

    def decode_query_segment(self, query: TableQuery[E], fetched: FetchedPage) -> ResultSegment[E]:
        """The page of entities in ``fetched``, with its continuation token."""
        ...


class _PageAhead:
    """The request of the next page, sent on a thread of its own while the iterating thread
    decodes and hands out the page before it.

    A thread per page: starting one costs far less than the page's round trip,
    and the client's executor is not used, because ``begin_execute`` iterates
    queries on it (a read-ahead queued behind a full pool would wait for the
    iteration that waits for it). When iteration stops early nobody calls
    :meth:`result`: the thread ends with its request, and its page or error
    is dropped.
    """

    __slots__ = ("top", "_thread", "_fetched", "_error")

    def __init__(self, top: int | None, fetch: Callable[[], FetchedPage]) -> None:
        self.top = top
        self._fetched: FetchedPage | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fetch,), name="tablesdk-read-ahead", daemon=True)
        self._thread.start()

    def _run(self, fetch: Callable[[], FetchedPage]) -> None:
        try:
            self._fetched = fetch()
        except BaseException as exc:  # noqa: BLE001 - raised by result(), where serial paging raises it
            self._error = exc

    def result(self) -> FetchedPage:
        """The page, once its request is done; raises what the request raised."""
        self._thread.join()
        fetched, error = self._fetched, self._error
        self._fetched = self._error = None  # the caller holds the page (or the error) from here on
        if error is not None:
            raise error
        assert fetched is not None
        return fetched


def _handed_out(page: list[T], remaining: int | None) -> Generator[T, None, int | None]:
    """Yield the entities of ``page``, at most ``remaining`` of them (all when None), and
    return how many are still wanted after them (None: no cap)."""
    if remaining is None:
        yield from page  # the list's own iterator hands out the entities
        return None
    yield from islice(page, remaining)
    return max(remaining - len(page), 0)


# ---------------------------------------------------------------- the query


def _check_take(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TableValidationError("take", "take(n) needs an int", f"got {type(n).__name__}")
    if n < 1:
        raise TableValidationError("take", "take(n) needs n >= 1", f"got {n}")
    return n


def _check_read_ahead(enabled: Any) -> bool:
    if not isinstance(enabled, bool):
        raise TypeError(f"read_ahead(enabled) needs a bool, not {type(enabled).__name__}")
    return enabled


def _check_page_size(m: Any) -> int:
    if isinstance(m, bool) or not isinstance(m, int):
        raise TableValidationError("page_size", "page_size(m) needs an int", f"got {type(m).__name__}")
    if not 1 <= m <= MAX_PAGE_SIZE:
        raise TableValidationError(
            "page_size", f"the service returns 1 to {MAX_PAGE_SIZE} entities per page", f"got {m}"
        )
    return m


def _check_select(names: Any) -> tuple[str, ...] | None:
    if names is None:
        return None
    if isinstance(names, str):
        names = (names,)
    columns: list[str] = []
    for name in names:
        if not isinstance(name, str) or not name.isidentifier():
            raise TableValidationError(
                repr(name), "select() takes property names (identifiers: letters, digits, '_')"
            )
        if name not in columns:
            columns.append(name)
    return tuple(columns) or None


class TableQuery(Generic[E]):
    """An immutable query over one table, materialising ``entity_type``.

    Every builder method (:meth:`where`, :meth:`take`, :meth:`select`,
    :meth:`page_size`) returns a new query and leaves this one unchanged, so a
    base query can be shared and refined. Nothing is sent until the query is
    iterated or :meth:`execute_segmented`, :meth:`first` or
    :meth:`first_or_default` is called.
    """

    __slots__ = ("_source", "_table", "_entity_type", "_filter", "_take", "_select", "_page_size", "_read_ahead")

    def __init__(
        self,
        source: QuerySource[E],
        table: str,
        entity_type: type[E],
        *,
        filter: FilterLike | None = None,
        take: int | None = None,
        select: tuple[str, ...] | list[str] | None = None,
        page_size: int | None = None,
        read_ahead: bool = True,
    ) -> None:
        validate_table_name(table)
        self._source: QuerySource[E] = source
        self._table: str = table
        self._entity_type: type[E] = entity_type
        self._filter: Filter | None = None if filter is None else as_filter(filter)
        self._take = None if take is None else _check_take(take)
        self._select = _check_select(select)
        self._page_size = None if page_size is None else _check_page_size(page_size)
        self._read_ahead = _check_read_ahead(read_ahead)

    def _replace(self, **changes: Any) -> TableQuery[E]:
        values: dict[str, Any] = {
            "filter": self._filter,
            "take": self._take,
            "select": self._select,
            "page_size": self._page_size,
            "read_ahead": self._read_ahead,
        }
        values.update(changes)
        return TableQuery(self._source, self._table, self._entity_type, **values)

    # -- read-only properties

    @property
    def source(self) -> QuerySource[E]:
        """The client or context that runs this query."""
        return self._source

    @property
    def table(self) -> str:
        """The table name."""
        return self._table

    @property
    def entity_type(self) -> type[E]:
        """The class results are materialised as."""
        return self._entity_type

    @property
    def filter(self) -> Filter | None:
        """The filter expression (raw strings appear as :class:`~tablesdk._filter.RawFilter`), or None."""
        return self._filter

    @property
    def take_count(self) -> int | None:
        """The total cap set by :meth:`take`, or None."""
        return self._take

    @property
    def select_columns(self) -> tuple[str, ...] | None:
        """The projected property names set by :meth:`select`, or None for all."""
        return self._select

    @property
    def page_size_value(self) -> int | None:
        """The page size set by :meth:`page_size`, or None."""
        return self._page_size

    @property
    def reads_ahead(self) -> bool:
        """Whether iteration reads the next page ahead (see :meth:`read_ahead`)."""
        return self._read_ahead

    # -- builders

    def where(self, expr: FilterLike | bool) -> TableQuery[E]:
        """A new query whose filter is this one's AND ``expr`` (an expression or raw text).

        ``bool`` is accepted for the type checker only, as SQLModel's ``where()`` does: with a
        plain annotation (``Rating: int``) ``Blog.Rating > 2`` is a ``bool`` to mypy, but a
        filter at run time. A real ``bool`` (a comparison of plain values) raises ``TypeError``.
        """
        if expr is None:
            raise TypeError("where() needs a filter expression or a raw $filter string, not None")
        node = as_filter(expr)
        combined = node if self._filter is None else self._filter & node
        return self._replace(filter=combined)

    def take(self, n: int) -> TableQuery[E]:
        """A new query yielding at most ``n`` (>= 1) entities in total.

        Calling ``take`` again replaces the cap. With :meth:`execute_segmented`
        ``n`` also bounds the page (one request never asks for more than ``n``).
        """
        return self._replace(take=_check_take(n))

    def select(self, *names: str) -> TableQuery[E]:
        """A new query returning only the named properties (plus the keys, which are always sent).

        ``select()`` with no names returns every property again.
        """
        return self._replace(select=_check_select(names))

    def page_size(self, m: int) -> TableQuery[E]:
        """A new query asking for pages of at most ``m`` (1..1000) entities."""
        return self._replace(page_size=_check_page_size(m))

    def read_ahead(self, enabled: bool) -> TableQuery[E]:
        """A new query whose iteration reads the next page ahead (True, the default) or does not.

        The next page's continuation token comes in the headers of this page's
        response, so while this page is decoded and handed out, the request of
        the next one is already on its way, on a thread of its own: a scan takes
        about the longer of the client's time and the service's (or network's)
        per page instead of their sum. At most one page is read ahead (memory
        stays flat), and with ``take(n)`` only when the page in hand cannot
        hold the rest (a page read ahead counts the page before it as full, so
        no request asks for more than ``take`` still wants). An error of the
        page read ahead is raised where iteration reaches that page, as it
        would be without reading ahead.

        The price: when iteration stops early (``break``, ``take`` satisfied
        by short pages, an exception in the loop), one request may have been
        sent whose page is never used (a billed transaction), and that
        request's hooks (a context's ``sending_request``) and transport
        records run on the other thread. :meth:`execute_segmented` is always
        exactly one request; a source that cannot split a page (a
        :class:`QuerySource` with only ``execute_query_segment``) is iterated
        one request at a time either way.
        """
        return self._replace(read_ahead=_check_read_ahead(enabled))

    # -- what is sent

    def filter_string(self) -> str | None:
        """The ``$filter`` text to send, or None; checks the service's comparison limit."""
        return render_filter(self._filter)

    def point_keys(self) -> tuple[str, str] | None:
        """``(PartitionKey, RowKey)`` when the filter is exactly a point query, else None.

        Sources use this to read the entity directly; the keys the URL path
        cannot carry (a ``%``, a URI segment over 260 characters) are then
        fetched through the workarounds of the Azure Storage team's blog by the client.
        """
        return point_keys(self._filter)

    def request_top(self, remaining: int | None) -> int | None:
        """The ``$top`` for the next request when ``remaining`` entities are still wanted.

        ``min(remaining, page_size or 1000)``; the page size alone when there
        is no cap; None (no ``$top``) when neither is set.
        """
        if remaining is None:
            return self._page_size
        require_positive_int("remaining", remaining)
        return min(remaining, self._page_size or MAX_PAGE_SIZE)

    # -- execution

    def execute_segmented(self, continuation_token: ContinuationToken | None = None) -> ResultSegment[E]:
        """Send exactly one request, starting at ``continuation_token``, and return its page.

        The page holds at most ``min(take, page_size or 1000)`` entities and
        may be empty even when its ``continuation_token`` is not None. Pass the
        token back (or its :meth:`ContinuationToken.to_string` form, read with
        :meth:`ContinuationToken.from_string`) to get the next page.
        """
        if continuation_token is not None and not isinstance(continuation_token, ContinuationToken):
            raise TypeError(
                "continuation_token is a ContinuationToken; use ContinuationToken.from_string for its text form"
            )
        return self._source.execute_query_segment(self, continuation_token, self.request_top(self._take))

    def __iter__(self) -> Iterator[E]:
        """Yield every matching entity, requesting each page when the one before has arrived.

        Follows continuation tokens (also those of empty pages) and stops after
        ``take`` entities without asking for another page. The request of the
        next page goes out while this page is decoded and handed out (see
        :meth:`read_ahead`; one page at most); only this page's entities and
        the next page's undecoded answer are held in memory.
        """
        source = self._source
        if self._read_ahead and isinstance(source, PagedQuerySource):
            return self._iterate_ahead(source)
        return self._iterate()

    def _iterate(self) -> Iterator[E]:
        source = self._source
        remaining = self._take
        token: ContinuationToken | None = None
        seen: set[ContinuationToken] = set()
        while True:
            segment: ResultSegment[E] | None = source.execute_query_segment(self, token, self.request_top(remaining))
            assert segment is not None
            token = segment.continuation_token
            page: list[E] | None = segment.results
            segment = None  # keep only the page itself referenced
            assert page is not None
            remaining = yield from _handed_out(page, remaining)
            page = None  # release this page before the next request
            if remaining == 0 or token is None:
                return
            _check_cycle(token, seen)

    def _iterate_ahead(self, source: PagedQuerySource[E]) -> Iterator[E]:
        """:meth:`_iterate` with the next page's request in flight while this page is decoded and used."""
        remaining = self._take
        seen: set[ContinuationToken] = set()
        top = self.request_top(remaining)
        fetched: FetchedPage | None = source.fetch_query_segment(self, None, top)
        while fetched is not None:
            token = fetched.continuation_token
            ahead = self._ahead(source, token, top, remaining, seen)
            page: list[E] | None = source.decode_query_segment(self, fetched).results
            fetched = None  # the undecoded answer is no longer needed
            assert page is not None
            remaining = yield from _handed_out(page, remaining)
            page = None  # release this page before waiting for the next
            if remaining == 0 or token is None:
                return
            _check_cycle(token, seen)
            if ahead is None:
                top = self.request_top(remaining)
                fetched = source.fetch_query_segment(self, token, top)
            else:
                top, fetched = ahead.top, ahead.result()

    def _ahead(
        self,
        source: PagedQuerySource[E],
        token: ContinuationToken | None,
        top: int | None,
        remaining: int | None,
        seen: set[ContinuationToken],
    ) -> _PageAhead | None:
        """The next page's request, started now, when more entities are wanted than the page that
        just arrived (asked for with ``$top=top``) can hold; else None."""
        if token is None or token in seen:
            return None  # the last page; or a cycle, raised when iteration gets there
        if remaining is None:
            ahead_top = self._page_size
        elif top is not None and remaining > top:
            ahead_top = self.request_top(remaining - top)
        else:
            return None
        return _PageAhead(ahead_top, partial(source.fetch_query_segment, self, token, ahead_top))

    # -- parallel scans over PartitionKey ranges

    def partition_ranges(self, boundaries: Sequence[str]) -> list[TableQuery[E]]:
        """This query cut at ``boundaries`` into PartitionKey ranges that together cover it exactly.

        ``boundaries`` ``[b1, ..., bn]`` (sorted, distinct, non-empty strings)
        give ``n + 1`` queries: ``PartitionKey lt b1``, ``ge b1 and lt b2``,
        ..., ``ge bn``, each ANDed with this query's filter (so each adds at
        most two comparisons to it). Keys compare as the service compares them.
        """
        points: list[str] = list(boundaries)
        for index, point in enumerate(points):
            if not isinstance(point, str) or not point:
                raise TableValidationError("boundaries", "PartitionKey boundaries are non-empty strings", repr(point))
            if index and point <= points[index - 1]:
                raise TableValidationError("boundaries", "boundaries must be sorted and distinct", repr(points))
        key = prop("PartitionKey")
        bounds: list[tuple[str | None, str | None]] = list(zip([None, *points], [*points, None]))
        ranges: list[TableQuery[E]] = []
        for low, high in bounds:
            query: TableQuery[E] = self
            if low is not None:
                query = query.where(key >= low)
            if high is not None:
                query = query.where(key < high)
            ranges.append(query)
        return ranges

    def iter_parallel(
        self, workers: int = 8, *, boundaries: Sequence[str] | None = None, ranges_per_worker: int = 4
    ) -> Iterator[E]:
        """Yield every matching entity, reading PartitionKey ranges of the table at the same time.

        Against the real service each page costs a network round trip, so
        ``workers`` ranges read at once finish up to ``workers`` times sooner
        than one scan. The query is cut at ``boundaries`` (see
        :meth:`partition_ranges`) or, when None, at the boundaries
        :func:`find_partition_boundaries` finds for ``workers *
        ranges_per_worker`` ranges (several ranges per worker even out ranges
        of unequal size: a worker that finishes one takes the next); while
        they are probed, one worker already reads the table from its start,
        and the ranges begin past the point it reached.

        Entities of one range come in key order; ranges are interleaved page
        by page as they arrive. At most ``2 * workers`` pages wait to be
        consumed, so memory stays bounded whatever the table's size.
        ``take(n)`` caps the total. The query must come from a client
        (``client.create_query``): a ``TableServiceContext`` is single-threaded.
        ``workers`` above the client's ``pool_size`` is reduced to it (with a
        ``RuntimeWarning``): the workers share its pooled connections.
        Closing the iterator early (``break``) stops the workers; an error in
        any range is raised here after the others stop.
        """
        workers = self._check_parallel("iter_parallel", workers)
        whole = self._replace(take=None)
        if boundaries is None:
            count = workers * max(1, ranges_per_worker)
            # The leader holds one connection while probes run: the rest probe.
            lead = _Lead(whole, lambda: find_partition_boundaries(whole, count, workers=max(1, workers - 1)))
            return _entities(_ParallelScan([], workers, lead).segments(), self._take)
        ranges = whole.partition_ranges(boundaries)
        return _entities(_ParallelScan([(i, q, None) for i, q in enumerate(ranges)], workers).segments(), self._take)

    def iter_parallel_segments(
        self,
        workers: int = 8,
        *,
        boundaries: Sequence[str],
        resume: Mapping[int, ContinuationToken | None] | None = None,
    ) -> Iterator[tuple[int, ResultSegment[E]]]:
        """The pages of a parallel scan, each with the index of its range: for progress and resuming.

        The query is cut at ``boundaries`` into ``len(boundaries) + 1`` ranges
        (:meth:`partition_ranges`; pass the same boundaries to resume). Yields
        ``(range index, ResultSegment)`` as pages arrive, empty pages included;
        a segment whose ``continuation_token`` is None is the last of its range.
        Record the last token of each unfinished range; ``resume`` maps range
        index to the token to start at (None: the range's beginning), and only
        the ranges it names are read. ``take()`` is not applied here.
        Memory, threads, errors and early exit work as in :meth:`iter_parallel`.
        """
        workers = self._check_parallel("iter_parallel_segments", workers)
        if boundaries is None:
            raise TypeError("iter_parallel_segments needs boundaries (see find_partition_boundaries)")
        ranges = self._replace(take=None).partition_ranges(boundaries)
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

    def _check_parallel(self, caller: str, workers: int) -> int:
        """The number of workers to run: ``workers``, capped at the source's connection pool."""
        require_positive_int("workers", workers)
        if not getattr(self._source, "supports_parallel_queries", False):
            raise TypeError(
                "parallel scans need a query from CloudTableClient.create_query: "
                f"{type(self._source).__name__} cannot run queries on several threads"
            )
        pool_size = getattr(getattr(self._source, "transport", None), "pool_size", None)
        if not isinstance(pool_size, int):
            return workers
        return workers_within_pool(caller, "workers", workers, pool_size, stacklevel=3)

    def first(self) -> E:
        """The first matching entity; raises :class:`EmptyResultError` (a ``LookupError``) if none.

        Asks for one entity (``$top=1``), following continuation tokens of empty
        pages. A point query against a context that does not ignore
        ResourceNotFound raises that error from the source instead.
        """
        for entity in self.take(1):
            return entity
        raise EmptyResultError(f"the query on table {self._table!r} returned no entities")

    def first_or_default(self) -> E | None:
        """The first matching entity, or None when there is none."""
        for entity in self.take(1):
            return entity
        return None

    def __repr__(self) -> str:
        parts = [repr(self._table), self._entity_type.__name__]
        if self._filter is not None:
            parts.append(f"filter={self._filter.render()!r}")
        if self._take is not None:
            parts.append(f"take={self._take}")
        if self._select is not None:
            parts.append(f"select={list(self._select)}")
        if self._page_size is not None:
            parts.append(f"page_size={self._page_size}")
        if not self._read_ahead:
            parts.append("read_ahead=False")
        return f"TableQuery({', '.join(parts)})"

    # -- columns: pyarrow / pandas (tablesdk._arrow; imported only when called)

    def to_arrow(self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise") -> Any:
        """Every matching entity as one ``pyarrow.Table``, built from the pages' values (no entity objects).

        Columns: PartitionKey, RowKey, Timestamp, then each property as it first appears; a
        column's Arrow type follows its EDM type (DateTime: ``timestamp[ns, UTC]``, Guid: string);
        a missing value is null. ``with_etag`` adds an ``odata.etag`` column. A property with two
        EDM types raises :class:`~tablesdk.SchemaConflictError` unless ``on_type_conflict="string"``
        (a column of wire text). ``schema`` (a ``pyarrow.Schema``) fixes the columns and checks
        each value fits. See docs/data.md.
        """
        from ._arrow import query_to_arrow

        return query_to_arrow(self, schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict)  # type: ignore[arg-type]

    def iter_arrow_batches(
        self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise"
    ) -> Iterator[Any]:
        """One ``pyarrow.RecordBatch`` per page (bounded memory); options as :meth:`to_arrow`.

        A batch has every column seen so far in the scan (without ``schema``, later batches may add columns).
        """
        from ._arrow import iter_query_batches

        return iter_query_batches(self, schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict)  # type: ignore[arg-type]

    def to_pandas(self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise") -> Any:
        """:meth:`to_arrow` as a pandas DataFrame: nullable Int32/Int64/boolean/string dtypes, UTC timestamps."""
        from ._arrow import query_to_pandas

        return query_to_pandas(self, schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict)


# ---------------------------------------------------------------- key helpers

#: ``DateTime.MaxValue.Ticks`` in .NET: 9999-12-31T23:59:59.9999999, in 100 ns ticks since 0001-01-01.
DATETIME_MAX_TICKS = 3155378975999999999

_TICKS_PER_SECOND = 10_000_000
_TICKS_PER_DAY = 86_400 * _TICKS_PER_SECOND
_EPOCH = datetime(1, 1, 1)
_REVERSE_WIDTH = 19


def _ticks(value: datetime) -> int:
    """.NET ticks (100 ns since 0001-01-01 UTC) of ``value``; naive means UTC."""
    naive = value.replace(tzinfo=None)
    delta = naive - _EPOCH
    ticks = delta.days * _TICKS_PER_DAY + delta.seconds * _TICKS_PER_SECOND + delta.microseconds * 10
    if isinstance(value, EdmDateTime):
        ticks += value.ticks_remainder
    offset = value.utcoffset()
    if offset:
        ticks -= (offset.days * 86_400 + offset.seconds) * _TICKS_PER_SECOND + offset.microseconds * 10
    return ticks


def reverse_ticks(dt: datetime) -> str:
    """``DateTime.MaxValue.Ticks - dt.Ticks`` as 19 zero-padded digits: a newest-first RowKey.

    The white paper's trick for "retrieve latest items first": keys sort
    ascending, so ``reverse_ticks(later) < reverse_ticks(earlier)``. Ticks are
    .NET's 100 ns units since 0001-01-01; a naive ``dt`` is UTC, an aware one
    is converted to UTC, and an :class:`~tablesdk._edm.EdmDateTime`'s seventh
    fractional digit counts. The result is always 19 digits, so keys of dates
    after 6831 (18 significant digits) still sort correctly.
    """
    if not isinstance(dt, datetime):
        raise TypeError(f"reverse_ticks takes a datetime, not {type(dt).__name__}")
    ticks = _ticks(dt)
    if not 0 <= ticks <= DATETIME_MAX_TICKS:
        raise TableValidationError("dt", "reverse_ticks needs a UTC time in 0001-01-01..9999-12-31", repr(dt))
    return str(DATETIME_MAX_TICKS - ticks).zfill(_REVERSE_WIDTH)


def datetime_from_reverse_ticks(s: str) -> datetime:
    """The aware UTC time a :func:`reverse_ticks` key stands for (exactly, to 100 ns).

    Returns an :class:`~tablesdk._edm.EdmDateTime` (a ``datetime``) that keeps
    the seventh fractional digit; raises ``ValueError`` for anything but 19
    ASCII digits.
    """
    if not isinstance(s, str) or len(s) != _REVERSE_WIDTH or not (s.isascii() and s.isdigit()):
        raise ValueError(f"a reverse-ticks key is exactly {_REVERSE_WIDTH} ASCII digits, got {s!r}")
    ticks = DATETIME_MAX_TICKS - int(s)
    if ticks < 0:
        raise ValueError(f"{s!r} is above DateTime.MaxValue.Ticks ({DATETIME_MAX_TICKS})")
    micro_ticks, remainder = divmod(ticks, 10)
    value = _EPOCH + timedelta(microseconds=micro_ticks)
    return EdmDateTime(
        value.year, value.month, value.day, value.hour, value.minute, value.second,
        value.microsecond, timezone.utc, ticks_remainder=remainder,
    )


def fixed_width_key(n: int, width: int = 19) -> str:
    """``n`` zero-padded to ``width`` digits, so that string order is numeric order.

    Keys are strings and compare character by character ("92" > "10000"), so
    numbers in keys need a fixed width ("00092" < "10000"). The default of 19
    digits holds any non-negative Int64. Raises ``ValueError``
    (:class:`~tablesdk._errors.TableValidationError`) for a negative ``n`` or one
    wider than ``width`` digits, naming the limit.
    """
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise TableValidationError("width", "fixed_width_key width is an int >= 1", repr(width))
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"fixed_width_key takes an int, not {type(n).__name__}")
    if n < 0:
        raise TableValidationError(
            "n", "fixed_width_key takes non-negative numbers (a '-' would sort wrongly)", f"got {n}"
        )
    limit = 10**width - 1
    if n > limit:
        raise TableValidationError("n", f"fixed_width_key({width} digits) takes 0 <= n <= {limit}", f"got {n}")
    return str(n).zfill(width)


# ---------------------------------------------------------------- parallel range scans

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
    require_positive_int("count", count)
    probe_query = TableQuery(query.source, query.table, DynamicEntity, select=("PartitionKey",), take=1)

    def first_key_at(start: str) -> str | None:
        found = probe_query.where(prop("PartitionKey") >= start) if start else probe_query
        entity = found.first_or_default()
        return None if entity is None else str(entity.PartitionKey)

    width = max(1, workers)
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix="tablesdk-probe") as pool:
        lowest = first_key_at("")
        if lowest is None or count == 1:
            return []
        highest = _highest_key_prefix(lowest, lambda starts: list(pool.map(first_key_at, starts)), max(2, width))
    if highest is None:
        return []
    return _spread(lowest, highest, count)


def _highest_key_prefix(lowest: str, probe: Callable[[list[str]], list[str | None]], width: int) -> str | None:
    """The largest key's first characters: one past the prefix it shares with ``lowest``
    (None when no key is larger than ``lowest``)."""
    found = _divergence(lowest, probe, width)
    if found is None:
        return None
    position, char = found
    prefix = lowest[:position]
    return prefix + chr(_largest_next_char(prefix, char, probe, width))


def _divergence(lowest: str, probe: Callable[[list[str]], list[str | None]], width: int) -> tuple[int, int] | None:
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
        answers = probe(starts)
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


def _largest_next_char(prefix: str, known: int, probe: Callable[[list[str]], list[str | None]], width: int) -> int:
    """The largest ``c`` such that some key starts with ``prefix + chr(c)``; ``known`` is such a ``c``.

    Each probe answers with an actual key, which narrows the interval further
    than the point itself.
    """
    position = len(prefix)
    found = low = known
    high = _LAST_CHAR
    while high > low:
        points = _probe_points(low, high, width)
        answers = probe([prefix + chr(point) for point in points])
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


#: Alphabets boundaries are spread over, narrowest first: the first that holds every
#: character the smallest and largest keys have past their common prefix is used.
_ALPHABETS = (
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
    alphabet = next(
        (chars for chars in _ALPHABETS if all(ch in chars for ch in low_tail + high_tail)), _ALPHABETS[-1]
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
        seen: set[ContinuationToken] = {token} if token is not None else set()
        while not self.stop.is_set():
            segment = query.execute_segmented(token)
            if segment.continuation_token is not None:
                _check_cycle(segment.continuation_token, seen)
            if not self._put((index, segment)):
                return False
            token = segment.continuation_token
            if token is None:
                return True
        return False

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
            threading.Thread(target=self._work, args=(index == 0,), name=f"tablesdk-scan-{index}", daemon=True)
            for index in range(self.workers)
        ]
        if self.lead is not None:
            threads.append(threading.Thread(target=self._plan, name="tablesdk-scan-plan", daemon=True))
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
        token: ContinuationToken | None = None
        seen: set[ContinuationToken] = set()
        while not scan.stop.is_set():
            segment = self.query.execute_segmented(token)
            token = segment.continuation_token
            if token is not None:
                _check_cycle(token, seen)
            with self.lock:
                cut, results = self.cut, segment.results
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
        return False

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
