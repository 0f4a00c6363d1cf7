"""``TableServiceContext``: a unit of work that tracks entities with their ETags.

The model is the DataServiceContext of the Windows Azure Table white paper. Entities become
known to a context by ``add_object``, ``attach_to``, ``upsert_object`` or by
being returned from one of its queries; each has an :class:`EntityDescriptor`
(table, ETag, state). ``update_object`` and ``delete_object`` mark changes;
``save_changes`` turns pending changes into requests, one per change or one
entity group transaction, and moves each descriptor to its new state.

A context is not thread-safe by design (the white paper recommends one context per
logical operation); a second thread entering ``save_changes`` or a query while
another runs raises :class:`RuntimeError` instead of corrupting state.

This module only sends. What it sends and what the answers do is shared with the async
context, with no I/O, in layers that each import only those below: ``_tracking`` (the
descriptors, their state changes, the identity map), ``_merge`` (how a query refreshes a
tracked entity), ``_save_plan`` (a save's requests and outcomes) and ``_tracking_context``
(:class:`~tablesdk._unit_of_work._tracking_context.TrackingContext`, the flows of a save and a query).
"""

from __future__ import annotations

import contextvars
from types import TracebackType
from typing import TYPE_CHECKING, Any, overload

from .._entities._entity import DynamicEntity, E, validate_table_name
from .._entities._filter import prop
from .._clients._flows import RAISED_FROM_THE_CALL
from .._queries._query import ContinuationToken, FetchedPage, ResultSegment, TableQuery
from .._pipeline._options import TableRequestOptions, resolve_retry_policy
from .._pipeline._retry import NoRetry, RetryPolicy
from ._save_outcome import DataServiceResponse
from ._save_plan import SaveChangesOptions
from ._tracking_context import TrackingContext, warn_get_gave_none
from .._pipeline._transport import OperationContext

from .._core._tracing import trace_public_methods
if TYPE_CHECKING:
    from concurrent.futures import Future

    from .._clients._client import CloudTableClient

__all__ = ["TableServiceContext"]


class TableServiceContext(TrackingContext["CloudTableClient"]):
    """A unit of work over one :class:`~tablesdk._clients._client.CloudTableClient`.

    Options (all settable attributes): ``merge_option`` (default
    :attr:`MergeOption.APPEND_ONLY`), ``ignore_missing_properties`` (default
    True: properties a declared entity class lacks are kept in
    ``extra_properties``, never an error), ``ignore_resource_not_found``
    (default False: a point query for a missing entity raises
    :class:`~tablesdk._core._errors.ResourceNotFoundError`; True returns nothing),
    ``resolve_type`` (``(table, pk, rk, properties) -> type`` choosing the class
    of each queried entity), ``echo_content`` (ask for inserted entities back).

    Events, as lists of callables: ``sending_request`` (each gets a
    :class:`~tablesdk.SendingRequest` whose headers it may change),
    ``reading_entity`` (entity, payload) after an entity is materialised,
    ``writing_entity`` (entity, payload) before an entity is serialised (the
    payload may be changed).
    """

    #: The client this context sends through (the constructor is :class:`TrackingContext`'s:
    #: ``TableServiceContext(client, **options)``, the options above).
    client: CloudTableClient

    def __enter__(self) -> TableServiceContext:
        """``with client.get_table_service_context() as ctx:`` scopes one logical operation."""
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """Leaving the block normally with changes not saved warns (:class:`UnsavedChangesWarning`)."""
        if exc_type is None:
            self._warn_if_pending()

    def save_changes(
        self,
        options: SaveChangesOptions = SaveChangesOptions.NONE,
        *,
        operation_context: OperationContext | None = None,
        request_options: TableRequestOptions | None = None,
    ) -> DataServiceResponse:
        """Send every pending change and return the outcome of each.

        Raises :class:`~tablesdk.DataServiceRequestError` (its
        ``.response`` lists what succeeded, what failed and what was not sent)
        when any change failed. Failed and unsent changes stay pending and are
        sent again by the next ``save_changes``; applied ones become UNCHANGED
        (deleted ones DETACHED) with the new ETag. No retries: see
        :meth:`save_changes_with_retries`. ``operation_context`` records every
        request attempt the save makes.
        """
        policy = resolve_retry_policy(None, request_options, NoRetry())
        try:
            return self._save(options, policy, operation_context, request_options)
        except RAISED_FROM_THE_CALL as error:
            raise error.with_traceback(None)  # from the caller's call: _save and the flow runner are plumbing

    def save_changes_with_retries(
        self,
        options: SaveChangesOptions = SaveChangesOptions.NONE,
        retry_policy: RetryPolicy | None = None,
        *,
        operation_context: OperationContext | None = None,
        request_options: TableRequestOptions | None = None,
    ) -> DataServiceResponse:
        """``save_changes`` with each request retried by ``retry_policy`` (default: the client's).

        A retried insert answered 409, or a retried delete answered 404, after an
        attempt whose outcome was unknown has ``error.ambiguous_retry`` set: the
        first attempt may have been applied (see docs/retries.md).
        """
        policy = resolve_retry_policy(retry_policy, request_options, self.client.retry_policy)
        try:
            return self._save(options, policy, operation_context, request_options)
        except RAISED_FROM_THE_CALL as error:
            raise error.with_traceback(None)  # from the caller's call: _save and the flow runner are plumbing

    def begin_save_changes(
        self,
        options: SaveChangesOptions = SaveChangesOptions.NONE,
        *,
        request_options: TableRequestOptions | None = None,
    ) -> Future[DataServiceResponse]:
        """Run :meth:`save_changes` on the client's executor; returns a Future."""
        return self.client.executor().submit(
            contextvars.copy_context().run, self.save_changes, options, request_options=request_options
        )

    def _save(
        self,
        options: SaveChangesOptions,
        retry_policy: RetryPolicy,
        operation_context: OperationContext | None,
        request_options: TableRequestOptions | None,
    ) -> DataServiceResponse:
        with self._exclusive("save_changes"):
            return self.client._run(
                self._f_save(self.client, options, retry_policy, operation_context, request_options), request_options
            )

    # ------------------------------------------------------------ queries

    @overload
    def create_query(self, table: str) -> TableQuery[DynamicEntity]: ...

    @overload
    def create_query(self, table: str, entity_type: type[E]) -> TableQuery[E]: ...

    def create_query(self, table: str, entity_type: type[Any] = DynamicEntity) -> TableQuery[Any]:
        """A query over ``table`` whose results this context tracks per :attr:`merge_option`.

        Typed by the entity class: ``create_query("Blogs", Blog)`` is a ``TableQuery[Blog]``.
        """
        validate_table_name(table, cosmos=self.client.is_cosmos)
        return TableQuery(self, table, entity_type)

    @overload
    def get(
        self, table: str, partition_key: str, row_key: str, *, request_options: TableRequestOptions | None = None
    ) -> DynamicEntity: ...

    @overload
    def get(
        self, table: str, partition_key: str, row_key: str, entity_type: type[E],
        *, request_options: TableRequestOptions | None = None,
    ) -> E: ...

    def get(
        self, table: str, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, request_options: TableRequestOptions | None = None,
    ) -> Any:
        """Point lookup of one entity (tracked per :attr:`merge_option`).

        Raises :class:`~tablesdk._core._errors.ResourceNotFoundError` when it does not exist;
        :meth:`get_or_none` returns None instead. (With :attr:`ignore_resource_not_found`
        set it still returns None, with a ``DeprecationWarning``: that form will raise.)
        """
        found = self._get(table, partition_key, row_key, entity_type, request_options, False)
        if found is None:
            warn_get_gave_none("TableServiceContext")
        return found

    @overload
    def get_or_none(
        self, table: str, partition_key: str, row_key: str, *, request_options: TableRequestOptions | None = None
    ) -> DynamicEntity | None: ...

    @overload
    def get_or_none(
        self, table: str, partition_key: str, row_key: str, entity_type: type[E],
        *, request_options: TableRequestOptions | None = None,
    ) -> E | None: ...

    def get_or_none(
        self, table: str, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity,
        *, request_options: TableRequestOptions | None = None,
    ) -> Any:
        """Point lookup of one entity (tracked per :attr:`merge_option`), or None when it does not
        exist. A missing table raises :class:`~tablesdk._core._errors.ResourceNotFoundError` (unless
        :attr:`ignore_resource_not_found` is set)."""
        return self._get(table, partition_key, row_key, entity_type, request_options, True)

    def _get(
        self, table: str, partition_key: str, row_key: str, entity_type: type[Any],
        request_options: TableRequestOptions | None, or_none: bool,
    ) -> Any:
        query = self.create_query(table, entity_type).where(
            (prop("PartitionKey") == partition_key) & (prop("RowKey") == row_key)
        ).with_options(request_options)
        described: TableQuery[Any] = query
        with self._exclusive("a query"):
            return self.client._run(self._f_get(self.client, described, or_none), described.request_options)

    def begin_execute(self, query: TableQuery[E]) -> Future[list[E]]:
        """Run ``query`` to completion on the client's executor; returns a Future of the list."""
        return self.client.executor().submit(contextvars.copy_context().run, _to_list, query)

    def execute_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[E]:
        """One page of ``query`` with tracking applied (the QuerySource protocol)."""
        with self._exclusive("a query"):
            return self.client._run(
                self._f_query_segment(self.client, query, continuation_token, top), query.request_options
            )

    def fetch_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> FetchedPage:
        """The HTTP stage of :meth:`execute_query_segment` (:class:`~tablesdk._queries._query.PagedQuerySource`).

        It reads no tracked state, so iteration runs it on another thread for
        the next page while this one is decoded: the ``sending_request`` hooks
        of that request run there.
        """
        return self.client._run(
            self._f_fetch_segment(self.client, query, continuation_token, top), query.request_options
        )

    def decode_query_segment(self, query: TableQuery[E], fetched: FetchedPage) -> ResultSegment[E]:
        """The decode stage: ``fetched``'s entities materialised and tracked, one thread at a time."""
        with self._exclusive("a query"):
            return self._decode_segment(self.client, query, fetched)

    def execute_batch(self, query: TableQuery[E]) -> list[E]:
        """Run a point query inside an entity group transaction (the Azure Storage team's workaround
        for keys the URL path cannot carry). The query's filter must be exactly
        ``PartitionKey eq X and RowKey eq Y``. It is sent with the query's request options."""
        with self._exclusive("execute_batch"):
            return self.client._run(self._f_point_batch(self.client, query), query.request_options)


# One span per operation that sends, when the application configured OpenTelemetry.
trace_public_methods(TableServiceContext, only=frozenset({"save_changes", "save_changes_with_retries", "get", "execute_query_segment", "fetch_query_segment", "execute_batch"}))


def _to_list(query: TableQuery[E]) -> list[E]:
    return list(query)
