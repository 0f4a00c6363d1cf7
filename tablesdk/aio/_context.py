"""``AsyncTableServiceContext``: the unit of work of :class:`tablesdk.TableServiceContext`, awaitable.

Recording changes is synchronous and identical to the sync context (the same
class provides it: ``add_object``, ``attach_to``, ``upsert_object``,
``update_object``, ``delete_object``, ``detach``, ``entities``, the merge
options and events); sending is awaited::

    ctx = client.get_table_service_context()
    ctx.add_object("Blogs", blog)
    await ctx.save_changes()
    tracked = await ctx.get("Blogs", "Channel9", "Oct-29")
    async for blog in ctx.create_query("Blogs", Blog): ...

Cancellation: a change is applied to its descriptor only once its success is
known. Cancelling a save (``asyncio.wait_for``, ``task.cancel()``) leaves
every change whose outcome is unknown (the one in flight and those not yet
sent) pending, so the next save sends them again; changes that had already
succeeded are UNCHANGED with their new ETags. The in-flight request may or may
not have been applied by the service, exactly as after a lost response.

A context is used by one task at a time: a second task starting a save or a
query while another is in progress gets a :class:`RuntimeError`.
"""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, overload

from .._clients._flows import RAISED_FROM_THE_CALL
from .._unit_of_work._save_outcome import DataServiceResponse
from .._unit_of_work._save_plan import SaveChangesOptions
from .._unit_of_work._tracking_context import TrackingContext, warn_get_gave_none
from .._entities._entity import DynamicEntity, E, validate_table_name
from .._entities._filter import prop
from .._queries._query import ContinuationToken, ResultSegment, TableQuery
from .._pipeline._options import TableRequestOptions, resolve_retry_policy
from .._pipeline._retry import NoRetry, RetryPolicy
from .._pipeline._transport import OperationContext
from ._query import AsyncTableQuery

from .._core._tracing import trace_public_methods
if TYPE_CHECKING:
    from ._client import AsyncCloudTableClient

__all__ = ["AsyncTableServiceContext"]


class AsyncTableServiceContext(TrackingContext["AsyncCloudTableClient"]):
    """A unit of work over one :class:`~tablesdk.aio.AsyncCloudTableClient`.

    Options and events are those of :class:`tablesdk.TableServiceContext`
    (``merge_option``, ``ignore_missing_properties``,
    ``ignore_resource_not_found``, ``resolve_type``, ``echo_content``;
    ``sending_request``, ``reading_entity``, ``writing_entity``, which stay
    plain callables).
    """

    #: The client this context sends through (the constructor is :class:`TrackingContext`'s:
    #: ``AsyncTableServiceContext(client, **options)``, the options above).
    client: AsyncCloudTableClient

    _RUNNER = "task"

    async def __aenter__(self) -> AsyncTableServiceContext:
        """``async with client.get_table_service_context() as ctx:`` scopes one logical operation."""
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Leaving the block normally with changes not saved warns (``UnsavedChangesWarning``)."""
        if exc_type is None:
            self._warn_if_pending()

    def _runner(self) -> object:
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no running loop: a plain call from a thread
            task = None
        return task if task is not None else threading.get_ident()

    # ------------------------------------------------------------ saving

    async def save_changes(
        self,
        options: SaveChangesOptions = SaveChangesOptions.NONE,
        *,
        operation_context: OperationContext | None = None,
        request_options: TableRequestOptions | None = None,
    ) -> DataServiceResponse:
        """Send every pending change and return the outcome of each (no retries).

        The rules of :meth:`tablesdk.TableServiceContext.save_changes`: raises
        :class:`~tablesdk.DataServiceRequestError` when a change failed;
        failed and unsent changes stay pending.
        """
        policy = resolve_retry_policy(None, request_options, NoRetry())
        try:
            return await self._save(options, policy, operation_context, request_options)
        except RAISED_FROM_THE_CALL as error:
            raise error.with_traceback(None)  # from the caller's call: _save and the flow runner are plumbing

    async def save_changes_with_retries(
        self,
        options: SaveChangesOptions = SaveChangesOptions.NONE,
        retry_policy: RetryPolicy | None = None,
        *,
        operation_context: OperationContext | None = None,
        request_options: TableRequestOptions | None = None,
    ) -> DataServiceResponse:
        """``save_changes`` with each request retried by ``retry_policy`` (default: the client's)."""
        policy = resolve_retry_policy(retry_policy, request_options, self.client.retry_policy)
        try:
            return await self._save(options, policy, operation_context, request_options)
        except RAISED_FROM_THE_CALL as error:
            raise error.with_traceback(None)  # from the caller's call: _save and the flow runner are plumbing

    async def _save(
        self,
        options: SaveChangesOptions,
        retry_policy: RetryPolicy,
        operation_context: OperationContext | None,
        request_options: TableRequestOptions | None,
    ) -> DataServiceResponse:
        with self._exclusive("save_changes"):
            return await self.client._run(
                self._f_save(self.client, options, retry_policy, operation_context, request_options), request_options
            )

    # ------------------------------------------------------------ queries

    @overload
    def create_query(self, table: str) -> AsyncTableQuery[DynamicEntity]: ...

    @overload
    def create_query(self, table: str, entity_type: type[E]) -> AsyncTableQuery[E]: ...

    def create_query(self, table: str, entity_type: type[Any] = DynamicEntity) -> AsyncTableQuery[Any]:
        """An async query over ``table`` whose results this context tracks per :attr:`merge_option`."""
        validate_table_name(table, cosmos=self.client.is_cosmos)
        return AsyncTableQuery(self, table, entity_type)

    @overload
    async def get(
        self, table: str, partition_key: str, row_key: str, *, request_options: TableRequestOptions | None = None
    ) -> DynamicEntity: ...

    @overload
    async def get(
        self, table: str, partition_key: str, row_key: str, entity_type: type[E],
        *, request_options: TableRequestOptions | None = None,
    ) -> E: ...

    async def get(
        self, table: str, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, request_options: TableRequestOptions | None = None,
    ) -> Any:
        """Point lookup of one entity (tracked per :attr:`merge_option`).

        Raises :class:`~tablesdk._core._errors.ResourceNotFoundError` when it does not exist;
        :meth:`get_or_none` returns None instead. (With :attr:`ignore_resource_not_found`
        set it still returns None, with a ``DeprecationWarning``: that form will raise.)
        """
        found = await self._get(table, partition_key, row_key, entity_type, request_options, False)
        if found is None:
            warn_get_gave_none("AsyncTableServiceContext")
        return found

    @overload
    async def get_or_none(
        self, table: str, partition_key: str, row_key: str, *, request_options: TableRequestOptions | None = None
    ) -> DynamicEntity | None: ...

    @overload
    async def get_or_none(
        self, table: str, partition_key: str, row_key: str, entity_type: type[E],
        *, request_options: TableRequestOptions | None = None,
    ) -> E | None: ...

    async def get_or_none(
        self, table: str, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, request_options: TableRequestOptions | None = None,
    ) -> Any:
        """Point lookup of one entity (tracked per :attr:`merge_option`), or None when it does not
        exist. A missing table raises :class:`~tablesdk._core._errors.ResourceNotFoundError` (unless
        :attr:`ignore_resource_not_found` is set)."""
        return await self._get(table, partition_key, row_key, entity_type, request_options, True)

    async def _get(
        self, table: str, partition_key: str, row_key: str, entity_type: type[Any],
        request_options: TableRequestOptions | None, or_none: bool,
    ) -> Any:
        query = self.create_query(table, entity_type).where(
            (prop("PartitionKey") == partition_key) & (prop("RowKey") == row_key)
        ).with_options(request_options)
        described: TableQuery[Any] = query.description
        with self._exclusive("a query"):
            return await self.client._run(self._f_get(self.client, described, or_none), described.request_options)

    async def execute_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[E]:
        """One page of ``query`` with tracking applied (the async query source protocol)."""
        with self._exclusive("a query"):
            return await self.client._run(
                self._f_query_segment(self.client, query, continuation_token, top), query.request_options
            )

    async def execute_batch(self, query: AsyncTableQuery[E]) -> list[E]:
        """Run a point query inside an entity group transaction (the workaround for keys the
        URL path cannot carry); the filter must be exactly ``PartitionKey eq X and RowKey eq Y``.
        It is sent with the query's request options (:meth:`AsyncTableQuery.with_options`)."""
        with self._exclusive("execute_batch"):
            return await self.client._run(
                self._f_point_batch(self.client, query.description), query.request_options
            )

    def __repr__(self) -> str:
        return f"AsyncTableServiceContext(tracked={len(self._identities)}, merge_option={self.merge_option.name})"


# One span per operation that sends, when the application configured OpenTelemetry.
trace_public_methods(AsyncTableServiceContext, only=frozenset({"save_changes", "save_changes_with_retries", "get", "execute_query_segment", "fetch_query_segment", "execute_batch"}))
