"""Queries: :class:`TableQuery`, its sources and its iteration.

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
  empty page, and keeps only the current page in memory (and, while it
  reads ahead, the next page's undecoded answer: see :meth:`TableQuery.read_ahead`).

Which token is followed next, the cycle check and the ``take`` count are
decided by a :class:`~tablesdk._queries._pager.Pager`, driven by
:func:`~tablesdk._queries._page_stream.stream_pages` (which also decides when to read
ahead); this module gives it the requests and the decoding
(:func:`query_pages`). A query's ``$filter``, ``$select`` and page reader are
made once (:meth:`TableQuery.compiled`). Tokens and pages are in
:mod:`tablesdk._queries._continuation`, parallel scans in :mod:`tablesdk._queries._parallel`, the
key helpers in :mod:`tablesdk._queries._keys`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, cast, overload, runtime_checkable

from ._continuation import ContinuationToken, FetchedPage, ResultSegment
from .._entities._edm import EdmType, EntityPage
from .._entities._entity import (
    E, ResolvedType, page_reader, refuse_chunked_filter, refuse_encrypted_filter, validate_table_name, with_chunked_parts,
)
from .._core._cosmos import cosmos_since_refused
from .._core._errors import TableValidationError, require_positive_int
from .._entities._filter import Filter, FilterLike, as_filter, point_keys, prop, render_filter
from .._entities._filter_params import bind_parameters
from .._pipeline._http import workers_within_pool
from .._pipeline._options import TableRequestOptions, check_options
from ._page_stream import ReadAhead, check_read_ahead, segment_results, stream_pages
from ._pager import PageRequest, Pager, Sliceable
from ._watermark import WATERMARK_METADATA_KEY, Changes, Watermark

from .._core._tracing import trace_public_methods
__all__ = [
    "ContinuationToken",
    "ResultSegment",
    "FetchedPage",
    "QuerySource",
    "PagedQuerySource",
    "TableQuery",
    "CompiledQuery",
    "EmptyResultError",
    "MAX_PAGE_SIZE",
]

#: The most entities the service returns in one response (and the largest ``$top``).
MAX_PAGE_SIZE = 1000

class EmptyResultError(LookupError):
    """:meth:`TableQuery.first` found no entity (a ``LookupError``, like ``next()`` on nothing)."""




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


# ---------------------------------------------------------------- the query


def _check_take(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TableValidationError("take", "take(n) needs an int", f"got {type(n).__name__}")
    if n < 1:
        raise TableValidationError("take", "take(n) needs n >= 1", f"got {n}")
    return n


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


#: Properties every projection brings back, so that results stay addressable.
_ALWAYS_SELECTED = ("PartitionKey", "RowKey", "Timestamp")


def with_keys(select: Sequence[str]) -> tuple[str, ...]:
    """``select`` with the keys and Timestamp added (a projection always brings them back)."""
    return (*select, *(name for name in _ALWAYS_SELECTED if name not in select))


class CompiledQuery(Generic[E]):
    """What every page of a query sends and how it is read, fixed when the query first runs
    (:meth:`TableQuery.compiled`): each page, and each range of a parallel scan, reuses it.

    ``filter_text``: the ``$filter`` (rendered, its comparisons counted and type-checked once), or
    None; ``point_keys``: ``(PartitionKey, RowKey)`` of a point query, read by its address;
    ``select_text``: the ``$select`` (the keys and Timestamp included), or None for every property;
    ``read``: a page's entities of the query's class, untracked (a client's pages).
    """

    __slots__ = ("filter_text", "point_keys", "select_text", "read")

    def __init__(
        self,
        filter_text: str | None,
        point_keys: tuple[str, str] | None,
        select_text: str | None,
        read: Callable[[EntityPage], list[E]],
    ) -> None:
        self.filter_text = filter_text
        self.point_keys = point_keys
        self.select_text = select_text
        self.read = read


R = TypeVar("R")


def source_is_cosmos(source: object) -> bool:
    """Whether a query's source (a client, or a context through its client) is of a Cosmos DB
    account, whose table names follow Cosmos DB's rule."""
    cosmos = getattr(source, "is_cosmos", None)
    if cosmos is None:
        cosmos = getattr(getattr(source, "client", None), "is_cosmos", None)
    return cosmos is True


def refuse_cosmos_since(source: object) -> None:
    """Refuse an incremental read of a Cosmos DB account's table before anything is sent: its
    filter on Timestamp would answer no entities (:func:`~tablesdk._core._cosmos.cosmos_since_refused`)."""
    if source_is_cosmos(source):
        raise cosmos_since_refused()


class TableQuery(Generic[E]):
    """An immutable query over one table, materialising ``entity_type``.

    Every builder method (:meth:`where`, :meth:`take`, :meth:`select`,
    :meth:`page_size`) returns a new query and leaves this one unchanged, so a
    base query can be shared and refined. Nothing is sent until the query is
    iterated or :meth:`execute_segmented`, :meth:`first` or
    :meth:`first_or_default` is called.
    """

    __slots__ = (
        "_source", "_table", "_entity_type", "_filter", "_take", "_select", "_page_size", "_read_ahead", "_options",
        "_compiled",
    )

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
        read_ahead: ReadAhead = "auto",
        options: TableRequestOptions | None = None,
    ) -> None:
        validate_table_name(table, cosmos=source_is_cosmos(source))
        self._source: QuerySource[E] = source
        self._table: str = table
        self._entity_type: type[E] = entity_type
        self._filter: Filter | None = None if filter is None else as_filter(filter)
        self._take = None if take is None else _check_take(take)
        self._select = _check_select(select)
        self._page_size = None if page_size is None else _check_page_size(page_size)
        self._read_ahead = check_read_ahead(read_ahead)
        self._options = check_options(options)
        self._compiled: CompiledQuery[E] | None = None

    def _replace(self, **changes: Any) -> TableQuery[E]:
        values: dict[str, Any] = {
            "filter": self._filter,
            "take": self._take,
            "select": self._select,
            "page_size": self._page_size,
            "read_ahead": self._read_ahead,
            "options": self._options,
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
        """The filter expression (raw strings appear as :class:`~tablesdk._entities._filter.RawFilter`), or None."""
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
    def reads_ahead(self) -> ReadAhead:
        """Whether iteration reads the next page ahead: ``"auto"``, True or False (see :meth:`read_ahead`)."""
        return self._read_ahead

    @property
    def request_options(self) -> TableRequestOptions | None:
        """The request options every page of this query is sent with (:meth:`with_options`), or None."""
        return self._options

    # -- builders

    def with_options(self, options: TableRequestOptions | None) -> TableQuery[E]:
        """A new query whose requests are sent with ``options`` (None: the source's defaults).

        They override the client's timeouts, deadline, retry policy and location mode for
        every page of this query, and of the ranges of its parallel scans.
        """
        return self._replace(options=check_options(options))

    def where(self, expr: FilterLike | bool, *, parameters: Mapping[str, object] | None = None) -> TableQuery[E]:
        """A new query whose filter is this one's AND ``expr`` (an expression or raw text).

        ``parameters`` go with raw text: each ``@name`` outside its quoted literals is replaced
        by the literal of ``parameters["name"]``, typed and escaped as ``prop(...) == value``
        renders it (converted to the declared type of the property it is compared with); a
        parameter without a value, or a value no ``@name`` uses, raises
        :class:`~tablesdk.TableValidationError` naming it. See docs/queries.md.

        ``bool`` is accepted for the type checker only, as SQLModel's ``where()`` does: with a
        plain annotation (``Rating: int``) ``Blog.Rating > 2`` is a ``bool`` to mypy, but a
        filter at run time. A real ``bool`` (a comparison of plain values) raises ``TypeError``.
        """
        if expr is None:
            raise TypeError("where() needs a filter expression or a raw $filter string, not None")
        if parameters is not None:
            if not isinstance(expr, str):
                raise TypeError(f"parameters go with raw $filter text (a str), not {type(expr).__name__}")
            expr = bind_parameters(expr, parameters, getattr(self._entity_type, "__declared__", None))
        node = as_filter(expr)
        refuse_chunked_filter(self._entity_type, node)
        refuse_encrypted_filter(self._entity_type, node)
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

        ``select()`` with no names returns every property again. Naming a ``Chunked`` property
        of the query's class selects each of its parts.
        """
        return self._replace(select=_check_select(with_chunked_parts(self._entity_type, names)))

    def page_size(self, m: int) -> TableQuery[E]:
        """A new query asking for pages of at most ``m`` (1..1000) entities."""
        return self._replace(page_size=_check_page_size(m))

    def resolve(
        self, resolver: Callable[[str, str, datetime | None, dict[str, Any], str | None], R]
    ) -> TableQuery[R]:
        """A new query whose results are ``resolver(partition_key, row_key, timestamp, properties,
        etag)`` for each row (``properties``: the others, by name), made a page at a time as the
        query is iterated. A context does not track them."""
        if not callable(resolver):
            raise TypeError(f"resolve takes a callable, not {type(resolver).__name__}")
        current = self._entity_type
        typing_fn = current.property_resolver if isinstance(current, ResolvedType) else None
        resolved: Any = ResolvedType(current, resolver, typing_fn)
        query = TableQuery(cast(Any, self._source), self._table, resolved)
        return cast(TableQuery[R], query._copy_limits(self))

    def with_property_resolver(self, resolver: Callable[[str, str, str, Any], EdmType | None]) -> TableQuery[E]:
        """A new query that types the values arriving without a type (``json_metadata='nometadata'``):
        ``resolver(partition_key, row_key, name, value)`` names the EDM type of each, or None to keep
        it as it came."""
        if not callable(resolver):
            raise TypeError(f"with_property_resolver takes a callable, not {type(resolver).__name__}")
        current = self._entity_type
        entity_resolver = current.resolver if isinstance(current, ResolvedType) else None
        typed: Any = ResolvedType(current, entity_resolver, resolver)
        return TableQuery(self._source, self._table, typed)._copy_limits(self)

    def _copy_limits(self, other: TableQuery[Any]) -> TableQuery[E]:
        return self._replace(
            filter=other._filter, take=other._take, select=other._select, page_size=other._page_size,
            read_ahead=other._read_ahead,
        )

    def read_ahead(self, enabled: ReadAhead) -> TableQuery[E]:
        """A new query whose iteration reads the next page ahead when it pays (``"auto"``, the
        default), always (True) or never (False).

        The next page's continuation token comes in the headers of this page's
        response, so while this page is decoded and handed out, the request of
        the next one can be on its way, on a thread of its own: a scan then takes
        about the longer of the client's time and the service's (or network's)
        per page instead of their sum. That costs client CPU (a thread per page,
        and receiving the next page competes with decoding this one), so
        ``"auto"`` reads ahead only while what it measures says the wait for the
        service is a significant share of a page's time: behind network latency,
        not against a fast local server (the rule: :mod:`tablesdk._queries._page_stream`).
        At most one page is read ahead (memory stays flat), and with ``take(n)``
        only when the page in hand cannot hold the rest (a page read ahead counts
        the page before it as full, so no request asks for more than ``take``
        still wants). An error of the page read ahead is raised where iteration
        reaches that page, as it would be without reading ahead.

        The price: when iteration stops early (``break``, ``take`` satisfied
        by short pages, an exception in the loop), one request may have been
        sent whose page is never used (a billed transaction), and that
        request's hooks (a context's ``sending_request``) and transport
        records run on the other thread. :meth:`execute_segmented` is always
        exactly one request; a source that cannot split a page (a
        :class:`QuerySource` with only ``execute_query_segment``) is iterated
        one request at a time either way. Arrow batches (:meth:`iter_arrow_batches`)
        and the scans of ``count_entities`` / ``delete_entities`` follow the same setting.
        """
        return self._replace(read_ahead=check_read_ahead(enabled))

    # -- what is sent

    def compiled(self) -> CompiledQuery[E]:
        """The ``$filter`` and ``$select`` text and the page reader of this query, made on the first
        call and kept (the query is immutable): raises what :meth:`filter_string` raises."""
        compiled = self._compiled
        if compiled is None:
            entity_type, select = self._entity_type, self._select
            compiled = self._compiled = CompiledQuery(
                render_filter(self._filter, getattr(entity_type, "__declared__", None)),
                point_keys(self._filter),
                ",".join(with_keys(select)) if select else None,
                page_reader(entity_type),
            )
        return compiled

    def filter_string(self) -> str | None:
        """The ``$filter`` text to send, or None; checks the service's comparison limit."""
        return self.compiled().filter_text

    def point_keys(self) -> tuple[str, str] | None:
        """``(PartitionKey, RowKey)`` when the filter is exactly a point query, else None.

        Sources use this to read the entity directly; the keys the URL path
        cannot carry (a ``%``, a URI segment over 260 characters) are then
        fetched through the workarounds of the Azure Storage team's blog by the client.
        """
        return self.compiled().point_keys

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
        next page may go out while this page is decoded and handed out (see
        :meth:`read_ahead`; one page at most); only this page's entities and
        the next page's undecoded answer are held in memory.
        """
        for page, _ in query_pages(self):
            yield from page
            del page  # release this page before the next request

    def changes(self, since: Watermark) -> Changes[E]:
        """Iterate the entities changed after ``since`` (a :class:`~tablesdk.Watermark`): the rows above
        its floor that an earlier read did not deliver; the iterator's ``watermark`` is the next one
        once it is exhausted. The entities need their keys, ETag and Timestamp (not a ``resolve()`` query)."""
        from ._watermark import entity_changes, refuse_partial_read, refuse_resolved_changes

        refuse_cosmos_since(self.source)
        refuse_partial_read(self.take_count)
        refuse_resolved_changes(self.entity_type)
        condition, tracker, deliver = entity_changes(since)
        query = self if condition is None else self.where(condition)
        return Changes(iter(query), tracker, deliver)

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
        from ._parallel import scan_entities  # imported here: _parallel builds on TableQuery

        return scan_entities(self._replace(take=None), self._take, workers, boundaries, ranges_per_worker)

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
        from ._parallel import scan_segments  # imported here: _parallel builds on TableQuery

        return scan_segments(self._replace(take=None), workers, boundaries, resume)

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
        if self._read_ahead != "auto":
            parts.append(f"read_ahead={self._read_ahead!r}")
        return f"TableQuery({', '.join(parts)})"

    # -- columns: pyarrow / pandas (tablesdk._columns._arrow; imported only when called)

    def to_arrow(
        self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise",
        since: Watermark | None = None,
    ) -> Any:
        """Every matching entity as one ``pyarrow.Table``, built from the pages' values (no entity objects).

        Columns: PartitionKey, RowKey, Timestamp, then each property as it first appears; a
        column's Arrow type follows its EDM type (DateTime: ``timestamp[ns, UTC]``, Guid: string);
        a missing value is null. ``with_etag`` adds an ``odata.etag`` column. A property with two
        EDM types raises :class:`~tablesdk.SchemaConflictError` unless ``on_type_conflict="string"``
        (a column of wire text). ``schema`` (a ``pyarrow.Schema``) fixes the columns and checks
        each value fits. ``since`` (a :class:`~tablesdk.Watermark`) reads only the rows changed after
        it, and puts the next watermark in the table's schema metadata (:meth:`Watermark.of`).
        See docs/data.md.
        """
        if since is not None:
            from .._columns._arrow_since import changes_to_arrow

            return changes_to_arrow(self, since, schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict)  # type: ignore[arg-type]
        from .._columns._arrow import query_to_arrow

        return query_to_arrow(self, schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict)  # type: ignore[arg-type]

    @overload
    def iter_arrow_batches(
        self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise", since: None = None,
    ) -> Iterator[Any]: ...

    @overload
    def iter_arrow_batches(
        self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise", since: Watermark,
    ) -> Changes[Any]: ...

    def iter_arrow_batches(
        self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise",
        since: Watermark | None = None,
    ) -> Iterator[Any]:
        """One ``pyarrow.RecordBatch`` per page (bounded memory); options as :meth:`to_arrow`.

        A batch has every column seen so far in the scan (without ``schema``, later batches may add columns).
        With ``since``, the iterator's ``watermark`` attribute is the next watermark once it is exhausted.
        """
        if since is not None:
            from .._columns._arrow_since import iter_change_batches

            return iter_change_batches(self, since, schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict)  # type: ignore[arg-type]
        from .._columns._arrow import iter_query_batches

        return iter_query_batches(self, schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict)  # type: ignore[arg-type]

    def to_pandas(
        self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise",
        since: Watermark | None = None,
    ) -> Any:
        """:meth:`to_arrow` as a pandas DataFrame: nullable Int32/Int64/boolean/string dtypes, UTC timestamps
        (with the 100 ns digit), Guids as ``uuid.UUID`` (so that ``write_pandas`` writes them as Guid).
        With ``since``, the next watermark is in the frame's ``attrs`` (:meth:`Watermark.of`)."""
        if since is not None:
            from .._columns._arrow import table_to_pandas
            from .._columns._arrow_since import changes_to_arrow

            table = changes_to_arrow(self, since, schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict)  # type: ignore[arg-type]
            frame = table_to_pandas(table)
            frame.attrs[WATERMARK_METADATA_KEY] = Watermark.of(table).to_string()
            return frame
        from .._columns._arrow import query_to_pandas

        return query_to_pandas(self, schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict)

P = TypeVar("P", bound=Sliceable)


def query_pages(
    query: TableQuery[E],
    start: ContinuationToken | None = None,
    *,
    read_ahead: ReadAhead | None = None,
    decode: Callable[[FetchedPage], P] | None = None,
) -> Iterator[tuple[Any, ContinuationToken | None]]:
    """The pages of ``query`` from ``start`` on, each with the token of the next (None on the last):
    the entities of its source's pages, or ``decode`` of each fetched page (the source must then be a
    :class:`PagedQuerySource`, a client: ``count_entities``, the command line). ``read_ahead``: the
    query's own setting when None (:mod:`tablesdk._queries._page_stream` drives the pager)."""
    source = query.source
    pager = Pager(query.take_count, query.request_top, start=start)
    setting = query.reads_ahead if read_ahead is None else read_ahead
    if isinstance(source, PagedQuerySource):
        return stream_pages(
            pager, partial(_fetch_page, source, query), decode or partial(_decoded_results, source, query), setting,
            source,
        )
    if decode is not None:
        raise TypeError(f"{type(source).__name__} makes entities, not pages: a query from a client is needed")
    return stream_pages(pager, partial(_segment, source, query), segment_results)


def _fetch_page(source: PagedQuerySource[E], query: TableQuery[E], request: PageRequest) -> FetchedPage:
    return source.fetch_query_segment(query, request.token, request.top)


def _decoded_results(source: PagedQuerySource[E], query: TableQuery[E], fetched: FetchedPage) -> list[E]:
    return source.decode_query_segment(query, fetched).results


def _segment(source: QuerySource[E], query: TableQuery[E], request: PageRequest) -> ResultSegment[E]:
    return source.execute_query_segment(query, request.token, request.top)


# One span per call that sends, when the application configured OpenTelemetry; iteration is
# traced page by page where its source fetches them.
trace_public_methods(TableQuery, only=frozenset({"execute_segmented", "first", "first_or_default"}))
