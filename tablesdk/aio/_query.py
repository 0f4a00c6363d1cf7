"""Async queries: :class:`AsyncTableQuery`, iterated with ``async for``.

An :class:`AsyncTableQuery` describes a query exactly as
:class:`tablesdk.TableQuery` does (it holds one: table, entity type, filter,
take, select, page size, and the same builders ``where``, ``take``,
``select`` and ``page_size``, each returning a new query) and follows the same
paging rules; only running it is awaited::

    q = client.create_query("Blogs", Blog).where(Blog.Rating > 2).take(50)
    async for blog in q: ...                          # lazily, page by page
    seg = await q.execute_segmented(token)             # exactly one request
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from .._edm import EdmType
from .._entity import E
from .._filter import Filter, FilterLike
from .._continuation import ContinuationToken, ResultSegment
from .._options import TableRequestOptions
from .._pager import PageRequest, Pager
from .._query import EmptyResultError, TableQuery

from .._tracing import trace_public_methods
__all__ = ["AsyncTableQuery", "AsyncQuerySource"]


class AsyncQuerySource(Protocol[E]):
    """Runs one page of a query: implemented by the async client and the async context."""

    async def execute_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[E]:
        """Send one request for ``query`` starting at ``continuation_token`` with ``$top=top``."""
        ...


class _AwaitOnly:
    """The sync source of the description an async query holds: iterating it is a mistake."""

    def execute_query_segment(
        self, query: TableQuery[Any], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[Any]:
        raise TypeError("this query belongs to an async client: use `async for` or `await q.execute_segmented()`")


_AWAIT_ONLY = _AwaitOnly()


R = TypeVar("R")


class AsyncTableQuery(Generic[E]):
    """An immutable async query over one table, materialising ``entity_type``.

    Builders return new queries; nothing is sent until the query is iterated
    with ``async for`` or :meth:`execute_segmented`, :meth:`first` or
    :meth:`first_or_default` is awaited. :attr:`description` is the
    :class:`~tablesdk.TableQuery` that describes it (what is sent).
    """

    __slots__ = ("_source", "_query")

    def __init__(
        self,
        source: AsyncQuerySource[E],
        table: str,
        entity_type: type[E],
        *,
        filter: FilterLike | None = None,
        take: int | None = None,
        select: tuple[str, ...] | list[str] | None = None,
        page_size: int | None = None,
        options: TableRequestOptions | None = None,
    ) -> None:
        self._source: AsyncQuerySource[E] = source
        self._query: TableQuery[E] = TableQuery(
            _AWAIT_ONLY, table, entity_type, filter=filter, take=take, select=select, page_size=page_size,
            options=options,
        )

    @classmethod
    def _wrap(cls, source: AsyncQuerySource[E], query: TableQuery[E]) -> AsyncTableQuery[E]:
        wrapped: AsyncTableQuery[E] = cls.__new__(cls)
        wrapped._source = source
        wrapped._query = query
        return wrapped

    # -- description

    @property
    def description(self) -> TableQuery[E]:
        """The sync :class:`~tablesdk.TableQuery` with this query's table, type, filter and limits."""
        return self._query

    @property
    def source(self) -> AsyncQuerySource[E]:
        """The async client or context that runs this query."""
        return self._source

    @property
    def table(self) -> str:
        """The table name."""
        return self._query.table

    @property
    def entity_type(self) -> type[E]:
        """The class results are materialised as."""
        return self._query.entity_type

    @property
    def filter(self) -> Filter | None:
        """The filter expression, or None."""
        return self._query.filter

    @property
    def take_count(self) -> int | None:
        """The total cap set by :meth:`take`, or None."""
        return self._query.take_count

    @property
    def select_columns(self) -> tuple[str, ...] | None:
        """The projected property names, or None for all."""
        return self._query.select_columns

    @property
    def page_size_value(self) -> int | None:
        """The page size set by :meth:`page_size`, or None."""
        return self._query.page_size_value

    @property
    def request_options(self) -> TableRequestOptions | None:
        """The request options every page of this query is sent with, or None."""
        return self._query.request_options

    def filter_string(self) -> str | None:
        """The ``$filter`` text to send, or None."""
        return self._query.filter_string()

    # -- builders

    def where(self, expr: FilterLike | bool) -> AsyncTableQuery[E]:
        """A new query whose filter is this one's AND ``expr`` (``bool`` only for the type checker, see TableQuery.where)."""
        return self._wrap(self._source, self._query.where(expr))

    def take(self, n: int) -> AsyncTableQuery[E]:
        """A new query yielding at most ``n`` (>= 1) entities in total."""
        return self._wrap(self._source, self._query.take(n))

    def select(self, *names: str) -> AsyncTableQuery[E]:
        """A new query returning only the named properties (plus the keys)."""
        return self._wrap(self._source, self._query.select(*names))

    def page_size(self, m: int) -> AsyncTableQuery[E]:
        """A new query asking for pages of at most ``m`` (1..1000) entities."""
        return self._wrap(self._source, self._query.page_size(m))

    def with_options(self, options: TableRequestOptions | None) -> AsyncTableQuery[E]:
        """A new query whose requests are sent with ``options`` (:meth:`tablesdk.TableQuery.with_options`)."""
        return self._wrap(self._source, self._query.with_options(options))

    def resolve(
        self, resolver: Callable[[str, str, datetime | None, dict[str, Any], str | None], R]
    ) -> AsyncTableQuery[R]:
        """A new query whose results are ``resolver(partition_key, row_key, timestamp, properties, etag)``
        (see :meth:`tablesdk.TableQuery.resolve`)."""
        source: Any = self._source
        return AsyncTableQuery._wrap(source, self._query.resolve(resolver))

    def with_property_resolver(self, resolver: Callable[[str, str, str, Any], EdmType | None]) -> AsyncTableQuery[E]:
        """A new query that types the values arriving without a type (see
        :meth:`tablesdk.TableQuery.with_property_resolver`)."""
        return self._wrap(self._source, self._query.with_property_resolver(resolver))

    # -- execution

    async def execute_segmented(self, continuation_token: ContinuationToken | None = None) -> ResultSegment[E]:
        """Send exactly one request, starting at ``continuation_token``, and return its page
        (:meth:`tablesdk.TableQuery.execute_segmented`'s rules)."""
        if continuation_token is not None and not isinstance(continuation_token, ContinuationToken):
            raise TypeError(
                "continuation_token is a ContinuationToken; use ContinuationToken.from_string for its text form"
            )
        query = self._query
        return await self._source.execute_query_segment(query, continuation_token, query.request_top(query.take_count))

    def __aiter__(self) -> AsyncIterator[E]:
        """Yield every matching entity, fetching a page only when the previous one is used up."""
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[E]:
        query = self._query
        pager = Pager(query.take_count, query.request_top)  # the sync query's paging rules
        request: PageRequest | None = pager.first()
        while request is not None:
            segment = await self._source.execute_query_segment(query, request.token, request.top)
            token = segment.continuation_token
            page = segment.results
            del segment  # keep only the page itself referenced
            for entity in pager.trim(page):
                yield entity
            del page  # release this page before the next request
            request = pager.next(token)

    async def to_list(self) -> list[E]:
        """Every matching entity, in a list (all pages)."""
        return [entity async for entity in self]

    async def first(self) -> E:
        """The first matching entity; raises :class:`~tablesdk.EmptyResultError` if none."""
        async for entity in self.take(1):
            return entity
        raise EmptyResultError(f"the query on table {self.table!r} returned no entities")

    async def first_or_default(self) -> E | None:
        """The first matching entity, or None when there is none."""
        async for entity in self.take(1):
            return entity
        return None

    def __repr__(self) -> str:
        return "Async" + repr(self._query)


# One span per call that sends, when the application configured OpenTelemetry.
trace_public_methods(AsyncTableQuery, only=frozenset({"execute_segmented", "to_list", "first", "first_or_default"}))
