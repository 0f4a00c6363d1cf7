"""Async queries: :class:`AsyncTableQuery`, iterated with ``async for``.

An :class:`AsyncTableQuery` describes a query exactly as
:class:`tablesdk.TableQuery` does (it holds one: table, entity type, filter,
take, select, page size, read-ahead, and the same builders ``where``, ``take``,
``select``, ``page_size`` and ``read_ahead``, each returning a new query) and
follows the same paging rules; only running it is awaited::

    q = client.create_query("Blogs", Blog).where(Blog.Rating > 2).take(50)
    async for blog in q: ...                          # lazily, page by page
    seg = await q.execute_segmented(token)             # exactly one request
    table = await q.to_arrow()                         # as the sync query's to_arrow()

Its pages are read by :func:`~tablesdk._queries._page_stream.stream_pages_async`, the
sync query's driver on the event loop (read-ahead is a task).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any, Generic, Protocol, TypeVar, overload

from .._entities._edm import EdmType
from .._entities._entity import E
from .._entities._filter import Filter, FilterLike
from .._queries._continuation import ContinuationToken, FetchedPage, ResultSegment
from .._core._errors import require_positive_int
from .._pipeline._options import TableRequestOptions
from .._queries._page_stream import ReadAhead, segment_results, stream_pages_async
from .._queries._pager import PageRequest, Pager, Sliceable
from .._queries._query import EmptyResultError, TableQuery, refuse_cosmos_since, source_is_cosmos
from .._queries._watermark import WATERMARK_METADATA_KEY, AsyncChanges, Watermark

from .._core._tracing import trace_public_methods
__all__ = ["AsyncTableQuery", "AsyncQuerySource"]


class AsyncQuerySource(Protocol[E]):
    """Runs one page of a query: implemented by the async client and the async context."""

    async def execute_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[E]:
        """Send one request for ``query`` starting at ``continuation_token`` with ``$top=top``."""
        ...


class _AwaitOnly:
    """The sync source of the description an async query holds: iterating it is a mistake.
    ``is_cosmos``: whether the async source is of a Cosmos DB account (its table names)."""

    __slots__ = ("is_cosmos",)

    def __init__(self, is_cosmos: bool = False) -> None:
        self.is_cosmos = is_cosmos

    def execute_query_segment(
        self, query: TableQuery[Any], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[Any]:
        raise TypeError("this query belongs to an async client: use `async for` or `await q.execute_segmented()`")


_AWAIT_ONLY = _AwaitOnly()
_AWAIT_ONLY_COSMOS = _AwaitOnly(is_cosmos=True)


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
        read_ahead: ReadAhead = "auto",
        options: TableRequestOptions | None = None,
    ) -> None:
        self._source: AsyncQuerySource[E] = source
        self._query: TableQuery[E] = TableQuery(
            _AWAIT_ONLY_COSMOS if source_is_cosmos(source) else _AWAIT_ONLY, table, entity_type, filter=filter, take=take, select=select, page_size=page_size,
            read_ahead=read_ahead, options=options,
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
    def reads_ahead(self) -> ReadAhead:
        """Whether iteration reads the next page ahead: ``"auto"``, True or False (see :meth:`read_ahead`)."""
        return self._query.reads_ahead

    @property
    def request_options(self) -> TableRequestOptions | None:
        """The request options every page of this query is sent with, or None."""
        return self._query.request_options

    def filter_string(self) -> str | None:
        """The ``$filter`` text to send, or None."""
        return self._query.filter_string()

    # -- builders

    def where(self, expr: FilterLike | bool, *, parameters: Mapping[str, object] | None = None) -> AsyncTableQuery[E]:
        """A new query whose filter is this one's AND ``expr``, raw text's ``@name`` bound to ``parameters``
        (``bool`` only for the type checker; see :meth:`tablesdk.TableQuery.where`)."""
        return self._wrap(self._source, self._query.where(expr, parameters=parameters))

    def take(self, n: int) -> AsyncTableQuery[E]:
        """A new query yielding at most ``n`` (>= 1) entities in total."""
        return self._wrap(self._source, self._query.take(n))

    def select(self, *names: str) -> AsyncTableQuery[E]:
        """A new query returning only the named properties (plus the keys)."""
        return self._wrap(self._source, self._query.select(*names))

    def page_size(self, m: int) -> AsyncTableQuery[E]:
        """A new query asking for pages of at most ``m`` (1..1000) entities."""
        return self._wrap(self._source, self._query.page_size(m))

    def read_ahead(self, enabled: ReadAhead) -> AsyncTableQuery[E]:
        """A new query whose iteration reads the next page ahead when it pays (``"auto"``, the default),
        always (True) or never (False): :meth:`tablesdk.TableQuery.read_ahead`'s rule; a page read ahead
        is requested by a task while this one is decoded."""
        return self._wrap(self._source, self._query.read_ahead(enabled))

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
        """Yield every matching entity, page by page (the next page may be requested while this one
        is used: see :meth:`read_ahead`)."""
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[E]:
        async for page, _ in self._pages():
            for entity in page:
                yield entity
            del page  # release this page before the next request

    def changes(self, since: Watermark) -> AsyncChanges[E]:
        """``async for`` over the entities changed after ``since`` (:meth:`tablesdk.TableQuery.changes`):
        the iterator's ``watermark`` is the next one once it is exhausted."""
        from .._queries._watermark import entity_changes, refuse_partial_read, refuse_resolved_changes

        refuse_cosmos_since(self._query.source)
        refuse_partial_read(self._query.take_count)
        refuse_resolved_changes(self._query.entity_type)
        condition, tracker, deliver = entity_changes(since)
        query = self if condition is None else self.where(condition)
        return AsyncChanges(query.__aiter__(), tracker, deliver)

    def _pages(
        self, *, read_ahead: ReadAhead | None = None, decode: Callable[[FetchedPage], P] | None = None
    ) -> AsyncIterator[tuple[Any, ContinuationToken | None]]:
        """The pages of this query (:func:`tablesdk._queries._query.query_pages`, awaited): its source's entities,
        or ``decode`` of each page a client fetched."""
        query, source = self._query, self._source
        pager = Pager(query.take_count, query.request_top)  # the sync query's paging rules
        setting = query.reads_ahead if read_ahead is None else read_ahead
        fetch_page = getattr(source, "fetch_query_segment", None)
        if fetch_page is not None:
            decode_page = getattr(source, "decode_query_segment")
            return stream_pages_async(
                pager, partial(_fetch, fetch_page, query), decode or partial(_decoded_results, decode_page, query), setting,
                source,
            )
        if decode is not None:
            raise TypeError(f"{type(source).__name__} makes entities, not pages: a query from a client is needed")
        return stream_pages_async(pager, partial(_fetch, source.execute_query_segment, query), segment_results)

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

    # -- parallel scans over PartitionKey ranges

    def iter_parallel(
        self, workers: int = 8, *, boundaries: Sequence[str] | None = None, ranges_per_worker: int = 4
    ) -> AsyncIterator[E]:
        """Yield every matching entity, reading PartitionKey ranges of the table at the same time
        (:meth:`tablesdk.TableQuery.iter_parallel`): ``workers`` tasks, each reading a range at a
        time; without ``boundaries`` they are probed first (:func:`tablesdk.find_partition_boundaries`'s
        search). At most ``2 * workers`` pages wait to be consumed; ``take(n)`` caps the total;
        leaving the loop early cancels the tasks; an error in any range is raised here."""
        require_positive_int("workers", workers)
        if not hasattr(self._source, "fetch_query_segment"):
            raise TypeError(
                "parallel scans need a query from AsyncCloudTableClient.create_query: "
                f"{type(self._source).__name__} is single-threaded"
            )
        from ._parallel import scan_entities_async  # imported here: a parallel scan loads with its first use

        query = self._query
        return scan_entities_async(
            self._source, query._replace(take=None), query.take_count, workers, boundaries, ranges_per_worker
        )

    # -- columns: pyarrow / pandas (tablesdk._columns._arrow; imported only when called)

    @overload
    def iter_arrow_batches(
        self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise", since: None = None,
    ) -> AsyncIterator[Any]: ...

    @overload
    def iter_arrow_batches(
        self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise", since: Watermark,
    ) -> AsyncChanges[Any]: ...

    def iter_arrow_batches(
        self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise",
        since: Watermark | None = None,
    ) -> AsyncIterator[Any]:
        """One ``pyarrow.RecordBatch`` per page (:meth:`tablesdk.TableQuery.iter_arrow_batches`; with ``since``,
        the iterator's ``watermark`` is the next watermark once it is exhausted)."""
        if since is None:
            return self._arrow_batches(schema, with_etag, on_type_conflict)
        from .._columns._arrow import batch_decoder
        from .._columns._arrow_since import ChangeReader, deduplicated

        reader = ChangeReader(self._query, since, schema=schema, on_type_conflict=on_type_conflict)  # type: ignore[arg-type]
        pages = self._wrap(self._source, reader.query)._pages(decode=batch_decoder(reader.builder, self._source))
        tracker = reader.tracker
        return AsyncChanges(pages, tracker, lambda page: deduplicated(page[0], tracker, with_etag))

    async def _arrow_batches(self, schema: Any, with_etag: bool, on_type_conflict: str) -> AsyncIterator[Any]:
        from .._columns._arrow import BatchBuilder, batch_decoder, columns_query

        builder = BatchBuilder(schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict)  # type: ignore[arg-type]
        sent = self._wrap(self._source, columns_query(self._query, schema, False))
        async for batch, _ in sent._pages(decode=batch_decoder(builder, self._source)):
            yield batch
            del batch

    async def to_arrow(
        self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise",
        since: Watermark | None = None,
    ) -> Any:
        """Every matching entity as one ``pyarrow.Table``: the same table as :meth:`tablesdk.TableQuery.to_arrow`
        (``since``: only the rows changed after that watermark, the next one in the schema's metadata)."""
        from .._columns._arrow import BatchBuilder, batch_decoder, columns_query, table_of_batches

        if since is not None:
            from .._columns._arrow_since import ChangeReader

            reader = ChangeReader(self._query, since, schema=schema, on_type_conflict=on_type_conflict)  # type: ignore[arg-type]
            changed = self._wrap(self._source, reader.query)
            read = [batch async for batch, _ in changed._pages(decode=batch_decoder(reader.builder, self._source))]
            return reader.table(read, with_etag)
        builder = BatchBuilder(schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict)  # type: ignore[arg-type]
        sent = self._wrap(self._source, columns_query(self._query, schema, False))
        batches = [batch async for batch, _ in sent._pages(decode=batch_decoder(builder, self._source))]
        return table_of_batches(builder, batches, schema)

    async def to_pandas(
        self, *, schema: Any = None, with_etag: bool = False, on_type_conflict: str = "raise",
        since: Watermark | None = None,
    ) -> Any:
        """:meth:`to_arrow` as a pandas DataFrame (:meth:`tablesdk.TableQuery.to_pandas`'s dtypes; with
        ``since``, the next watermark in its ``attrs``)."""
        from .._columns._arrow import table_to_pandas

        table = await self.to_arrow(schema=schema, with_etag=with_etag, on_type_conflict=on_type_conflict, since=since)
        frame = table_to_pandas(table)
        if since is not None:
            frame.attrs[WATERMARK_METADATA_KEY] = Watermark.of(table).to_string()
        return frame


P = TypeVar("P", bound=Sliceable)


def _fetch(run: Callable[[TableQuery[Any], ContinuationToken | None, int | None], Awaitable[Any]],
           query: TableQuery[Any], request: PageRequest) -> Awaitable[Any]:
    return run(query, request.token, request.top)


def _decoded_results(decode: Callable[[TableQuery[Any], FetchedPage], ResultSegment[Any]],
                     query: TableQuery[Any], fetched: FetchedPage) -> list[Any]:
    return decode(query, fetched).results


# One span per call that sends, when the application configured OpenTelemetry.
trace_public_methods(AsyncTableQuery, only=frozenset({"execute_segmented", "to_list", "first", "first_or_default"}))
