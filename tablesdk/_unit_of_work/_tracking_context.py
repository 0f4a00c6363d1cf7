"""``TrackingContext``: what the sync and async contexts share, with no I/O.

The tracked entities (an :class:`~tablesdk._unit_of_work._tracking.IdentityMap` of descriptors), the
changes the application marks on them, one save or query at a time, and the *flows* of
a save and a query (generators that yield the requests the client's flows need, see
``tablesdk._clients._flows``): the save is planned by :class:`~tablesdk._unit_of_work._save_plan.SavePlan`,
a queried entity already tracked is refreshed by the rules of ``tablesdk._unit_of_work._merge``.
:class:`~tablesdk.TableServiceContext` and :class:`~tablesdk.aio.AsyncTableServiceContext`
only add sending (their ``client``, and their save and query methods).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._formats._batch import BatchOperation, BatchOperationKind
from .._entities._edm import EntityPage, EntityPayload
from .._entities._entity import E, ResolvedType, entity_from_payload, read_page
from .._entities._entity_access import entity_etag
from .._core._errors import BatchError, ResourceNotFoundError, TableServiceError, warn_the_caller
from ._merge import MergeOption, refresh_tracked
from .._queries._query import ContinuationToken, FetchedPage, ResultSegment, TableQuery
from .._pipeline._options import TableRequestOptions
from .._pipeline._retry import RetryPolicy
from ._save_outcome import DataServiceResponse
from ._save_plan import SaveChangesOptions, SavePlan
from ._tracking import (
    Entity,
    EntityDescriptor,
    EntityStates,
    IdentityMap,
    ReadingEntity,
    WritingEntity,
    untyped_names,
)
from .._pipeline._transport import OperationContext

if TYPE_CHECKING:
    from .._clients._client import RequestHook, SendingRequest
    from .._clients._flows import Flow
    from .._clients._operations import ClientCore

__all__ = ["TrackingContext", "ResolveType", "UnsavedChangesWarning"]

#: The client a context sends through: ``CloudTableClient`` or ``AsyncCloudTableClient``.
ClientT = TypeVar("ClientT")

#: ``resolve_type``: (table, PartitionKey, RowKey, properties) -> the class of a queried entity.
ResolveType = Callable[[str, str, str, dict[str, Any]], type]


def warn_get_gave_none(where: str) -> None:
    """Warn that ``get`` returned None for a missing entity because of ``ignore_resource_not_found``:
    a form that will raise, so that ``get`` can be typed without None (``get_or_none`` is that form)."""
    warn_the_caller(
        f"{where}.get() returned None for a missing entity because ignore_resource_not_found is set; "
        "this is deprecated and get() will raise ResourceNotFoundError: call get_or_none() for None",
        DeprecationWarning,
    )


class UnsavedChangesWarning(UserWarning):
    """A context used as a ``with`` block was left, without an exception, with changes not saved."""


class TrackingContext(Generic[ClientT]):
    """What a unit of work knows, with no I/O: tracked entities, their ETags and states,
    the operation each pending change becomes, and how a queried entity is merged in.

    :class:`TableServiceContext` and :class:`tablesdk.aio.AsyncTableServiceContext`
    share it, constructor included, and differ only in sending (the type of their
    ``client``, kept here but never called here, and their save and query methods).
    """

    def __init__(
        self,
        client: ClientT,
        *,
        merge_option: MergeOption = MergeOption.APPEND_ONLY,
        ignore_missing_properties: bool = True,
        ignore_resource_not_found: bool = False,
        resolve_type: ResolveType | None = None,
        echo_content: bool = False,
    ) -> None:
        self.client = client
        self.merge_option = merge_option
        self.ignore_missing_properties = ignore_missing_properties
        self.ignore_resource_not_found = ignore_resource_not_found
        self.resolve_type = resolve_type
        self.echo_content = echo_content
        self.sending_request: list[Callable[[SendingRequest], None]] = []
        self.reading_entity: list[ReadingEntity] = []
        self.writing_entity: list[WritingEntity] = []
        # Table names follow Cosmos DB's rule for a Cosmos DB client (a test's stand-in may have no flag).
        self._identities = IdentityMap(cosmos=getattr(client, "is_cosmos", False) is True)
        self._busy = threading.Lock()
        self._busy_owner: object = None
        self._busy_what: str | None = None

    # ------------------------------------------------------------ guard

    #: Who may run one save or query at a time: a thread here, a task in the async context.
    _RUNNER = "thread"

    def _runner(self) -> object:
        return threading.get_ident()

    @contextmanager
    def _exclusive(self, what: str) -> Iterator[None]:
        me = self._runner()
        if self._busy_owner == me:  # re-entry from a hook in the same thread (task)
            yield
            return
        if not self._busy.acquire(blocking=False):
            raise RuntimeError(self._busy_message(what))
        self._busy_owner, self._busy_what = me, what
        try:
            yield
        finally:
            self._busy_owner = self._busy_what = None
            self._busy.release()

    def _refuse_if_busy(self, what: str) -> None:
        """Refuse a change to the tracked set while another thread (task) saves or queries."""
        owner = self._busy_owner
        if owner is not None and owner != self._runner():
            raise RuntimeError(self._busy_message(what))

    def _busy_message(self, what: str) -> str:
        running = self._busy_what or "an operation"
        return (
            f"{type(self).__name__} is not {self._RUNNER}-safe: another {self._RUNNER} is running "
            f"{running} on it, so {what} was refused; use one context per {self._RUNNER} "
            "(or per logical operation)"
        )

    def _request_hook(self) -> RequestHook | None:
        hooks = self.sending_request
        if not hooks:
            return None

        def run(request: SendingRequest) -> None:
            for hook in hooks:
                hook(request)

        return run

    # ------------------------------------------------------------ tracking

    @property
    def entities(self) -> list[EntityDescriptor]:
        """Descriptors of every tracked entity, in the order they became tracked."""
        return list(self._identities.by_object.values())

    def get_entity_descriptor(self, entity: Entity) -> EntityDescriptor | None:
        """The descriptor of ``entity`` (this very object), or None if untracked."""
        return self._identities.get(entity)

    def add_object(self, table: str, entity: Entity) -> None:
        """Track ``entity`` as a new entity of ``table`` (inserted by the next save)."""
        self._refuse_if_busy("add_object")
        identities = self._identities
        identities.track(table, entity, None).mark_added(identities.next_order())

    def attach_to(self, table: str, entity: Entity, etag: str | None = None) -> None:
        """Track an existing entity without reading it, with a known ETag.

        ``etag="*"`` makes later updates and deletes unconditional. With no
        ``etag``, ``entity.etag`` is used. Raises ValueError when this object or
        another object with the same identity is already tracked.
        """
        self._refuse_if_busy("attach_to")
        self._identities.track(table, entity, etag if etag is not None else entity_etag(entity))

    def upsert_object(self, table: str, entity: Entity, replace: bool = False) -> None:
        """Insert or merge (``replace=True``: insert or replace) ``entity`` on the next save.

        Upserts carry no condition. A tracked entity is switched to an upsert.
        """
        self._refuse_if_busy("upsert_object")
        identities = self._identities
        descriptor = identities.get(entity)
        if descriptor is None:
            descriptor = identities.track(table, entity, None)
        elif descriptor.table != table:
            raise ValueError(f"entity is tracked in table {descriptor.table!r}, not {table!r}")
        descriptor.mark_upsert(replace, identities.next_order())

    def update_object(self, entity: Entity) -> None:
        """Mark a tracked entity as changed (merged, or replaced with REPLACE_ON_UPDATE)."""
        self._refuse_if_busy("update_object")
        identities = self._identities
        identities.require(entity, "update_object").mark_modified(identities.next_order())

    def delete_object(self, entity: Entity) -> None:
        """Mark a tracked entity for deletion; a not-yet-inserted one is simply forgotten."""
        self._refuse_if_busy("delete_object")
        identities = self._identities
        descriptor = identities.require(entity, "delete_object")
        if descriptor.state is EntityStates.ADDED:  # the service never had it: nothing to delete
            identities.forget(descriptor)
        else:
            descriptor.mark_deleted(identities.next_order())

    def detach(self, entity: Entity) -> bool:
        """Stop tracking ``entity``; False if it was not tracked."""
        self._refuse_if_busy("detach")
        descriptor = self._identities.get(entity)
        if descriptor is None:
            return False
        self._identities.forget(descriptor)
        return True

    # ------------------------------------------------------------ saving

    def _warn_if_pending(self) -> None:
        pending = self._identities.pending_count()
        if pending:
            noun = "change that was" if pending == 1 else "changes that were"
            warnings.warn(
                f"{type(self).__name__} left with {pending} pending {noun} never saved; "
                "call save_changes() before the end of the block (or detach() what you meant to drop)",
                UnsavedChangesWarning,
                stacklevel=3,
            )

    # ------------------------------------------------------------ what saves and queries do (no I/O)
    # Flows (see tablesdk._clients._flows): they yield the requests the client's flows need and
    # get the answers back; the sync and async contexts run them with their client.

    def _f_save(
        self,
        client: ClientCore,
        options: SaveChangesOptions,
        retry_policy: RetryPolicy,
        operation_context: OperationContext | None,
        request_options: TableRequestOptions | None = None,
    ) -> Flow[DataServiceResponse]:
        """Send every pending change (one batch, or one request each) and apply the outcomes
        (encrypted by the client-side encryption of ``request_options``, over the client's)."""
        run = SavePlan.start(
            self._identities, options, echo_content=self.echo_content, writing_entity=self.writing_entity,
            encryption=client._encryption(request_options),
        )
        client._check_writes(run.operations)  # the service's own limits (Cosmos DB's), before any request
        hook = self._request_hook()
        if run.is_batch:
            if run.sent:
                try:
                    results = yield from client._f_execute_batch(run.sent, retry_policy, operation_context, hook)
                except TableServiceError as exc:
                    run.batch_failed(exc)
                else:
                    run.batch_succeeded(results)
            return run.finish()
        for index, operation in run.to_send():
            try:
                result = yield from client._f_execute_operation(operation, retry_policy, operation_context, hook)
            except TableServiceError as exc:
                run.failed(index, exc)
            else:
                run.succeeded(index, result)
        return run.finish()

    def _f_get(self, client: ClientCore, query: TableQuery[E], or_none: bool) -> Flow[E | None]:
        """The point lookup ``query`` names, tracked per the merge option: None for a missing
        entity when ``or_none`` (``get_or_none``) or :attr:`ignore_resource_not_found` is set
        (``get``'s deprecated form); a missing table is None only with the latter."""
        ignore = self.ignore_resource_not_found
        fetched = yield from client._f_fetch_page(query, None, None, ignore or or_none, ignore, self._request_hook())
        results = self._decode_segment(client, query, fetched).results
        return results[0] if results else None

    def _f_query_segment(
        self, client: ClientCore, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> Flow[ResultSegment[E]]:
        """One page of ``query``, materialised and tracked per the merge option."""
        fetched = yield from self._f_fetch_segment(client, query, continuation_token, top)
        return self._decode_segment(client, query, fetched)

    def _f_fetch_segment(
        self, client: ClientCore, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> Flow[FetchedPage]:
        """The HTTP stage of one page: touches no tracked state (it may run on another thread)."""
        ignore = self.ignore_resource_not_found
        return (yield from client._f_fetch_page(query, continuation_token, top, ignore, ignore, self._request_hook()))

    def _decode_segment(self, client: ClientCore, query: TableQuery[E], fetched: FetchedPage) -> ResultSegment[E]:
        """The decode stage of one page: its entities materialised and tracked per the merge option."""
        return ResultSegment(self._materialize_page(query, client._decode_page(fetched)), fetched.continuation_token)

    def _materialize_page(self, query: TableQuery[E], page: EntityPage) -> list[E]:
        """:meth:`_materialize` of every entity of ``page``: with no ``resolve_type`` and no
        ``reading_entity`` hooks, the entities are made a page at a time (``read_page``)."""
        if self.resolve_type is not None or self.reading_entity:
            return [self._materialize(query, payload) for payload in page.payloads()]
        ignore = self.ignore_missing_properties
        if self.merge_option is MergeOption.NO_TRACKING or _resolved(query):  # a resolver's results are not tracked
            return read_page(query.entity_type, page, ignore_missing_properties=ignore)
        # The page's value dicts stay as read: each is the snapshot of its entity.
        entities = read_page(query.entity_type, page, ignore_missing_properties=ignore, keep_values=True)
        table, projected = query.table, bool(query.select_columns)
        identities = self._identities
        if identities.track_page(table, entities, page, projected):  # none tracked yet: a page at a time
            return entities
        by_identity, track = identities.by_identity, identities.track
        results: list[E] = []
        for entity, values, types, etag in zip(entities, page.values, page.types, page.etags):
            descriptor = by_identity.get((table, values.get("PartitionKey"), values.get("RowKey")))  # type: ignore[arg-type]
            if descriptor is None:
                track(table, entity, etag, from_service=True).mark_read(
                    values, partial=projected, untyped=untyped_names(entity, values, types)
                )
                results.append(entity)
            else:  # tracked already: refreshed as _materialize does (the entity made here is not used)
                results.append(self._materialize(query, EntityPayload(values, dict(types), etag)))
        return results

    def _f_point_batch(self, client: ClientCore, query: TableQuery[E]) -> Flow[list[E]]:
        """A point query sent inside an entity group transaction."""
        keys = query.point_keys()
        if keys is None:
            raise ValueError("execute_batch takes a point query: PartitionKey eq X and RowKey eq Y")
        operation = BatchOperation(BatchOperationKind.RETRIEVE, query.table, keys[0], keys[1], None, None)
        try:
            results = yield from client._f_execute_batch([operation], None, None, self._request_hook())
        except BatchError as exc:
            if exc.status_code == 404:
                if self.ignore_resource_not_found:
                    return []
                raise (exc.cause or exc) from exc  # the same ResourceNotFoundError as get()
            raise
        payload = results[0].payload
        if results[0].status == 404 or payload is None:
            if self.ignore_resource_not_found:
                return []
            raise ResourceNotFoundError(
                "The specified resource does not exist.", status_code=404, error_code="ResourceNotFound"
            )
        return [self._materialize(query, payload)]

    def _materialize(self, query: TableQuery[E], payload: EntityPayload) -> E:
        """The entity a query returns for ``payload``, per :attr:`merge_option`: with NO_TRACKING a
        new object, untracked; an identity not tracked yet is tracked; an identity tracked already
        gives the tracked object, refreshed by the merge rules (``_merge.refresh_tracked``)."""
        entity_type: type[Any] = query.entity_type
        if self.resolve_type is not None:
            values = payload.values
            entity_type = self.resolve_type(
                query.table, values.get("PartitionKey", ""), values.get("RowKey", ""), values
            )
        if self.merge_option is MergeOption.NO_TRACKING or _resolved(query):
            return self._read(entity_type, payload)  # type: ignore[no-any-return]
        identity = (query.table, payload.values.get("PartitionKey"), payload.values.get("RowKey"))
        descriptor = self._identities.by_identity.get(identity)  # type: ignore[arg-type]
        projected = bool(query.select_columns)
        if descriptor is None:
            entity = self._read(entity_type, payload)
            self._identities.track(query.table, entity, payload.etag, from_service=True).mark_read(
                payload.values, partial=projected, untyped=untyped_names(entity, payload.values, payload.types)
            )
            return entity  # type: ignore[no-any-return]
        refresh_tracked(
            self.merge_option, descriptor, payload, projected, self.ignore_missing_properties, self.reading_entity
        )
        return descriptor.entity  # type: ignore[return-value]

    def _read(self, entity_type: type[Any], payload: EntityPayload) -> Any:
        """A new entity of ``entity_type`` from ``payload``, after the reading_entity hooks."""
        entity = entity_from_payload(entity_type, payload, ignore_missing_properties=self.ignore_missing_properties)
        for hook in self.reading_entity:
            hook(entity, payload)
        return entity


def _resolved(query: TableQuery[Any]) -> bool:
    """Whether ``query``'s results are what a resolver made (never tracked: they need not be entities)."""
    entity_type: Any = query.entity_type
    return isinstance(entity_type, ResolvedType) and entity_type.resolver is not None
