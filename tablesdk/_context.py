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
"""

from __future__ import annotations

import itertools
import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from enum import Enum, Flag
from itertools import repeat
from operator import attrgetter
from types import TracebackType
from typing import TYPE_CHECKING, Any, Union, overload

from ._batch import BatchOperation, BatchOperationKind, BatchOperationResult
from ._edm import EdmType, EntityPage, EntityPayload, EntityProperty
from ._entity import (
    DynamicEntity,
    E,
    TableEntity,
    drop_property,
    entity_from_payload,
    read_page,
    entity_to_payload,
    loose_properties,
    overwrite_entity,
    _plain_attributes,
    take_property,
    validate_key,
    validate_table_name,
)
from ._errors import BatchError, ResourceNotFoundError, ResponseDecodeError, TableServiceError
from ._filter import prop
from ._query import ContinuationToken, FetchedPage, ResultSegment, TableQuery
from ._retry import NoRetry, RetryPolicy
from ._save_outcome import DataServiceRequestError, DataServiceResponse, OperationResponse
from ._transport import OperationContext

if TYPE_CHECKING:
    from ._operations import ClientCore, Flow
    from ._client import CloudTableClient, RequestHook, SendingRequest

__all__ = [
    "TableServiceContext",
    "EntityDescriptor",
    "EntityStates",
    "MergeOption",
    "SaveChangesOptions",
    "OperationResponse",
    "DataServiceResponse",
    "UnsavedChangesWarning",
]

Entity = Union[TableEntity, DynamicEntity]
Identity = tuple[str, str, str]
_NEW_OBJECT = object.__new__
_PARTITION_KEY = attrgetter("PartitionKey")
_ROW_KEY = attrgetter("RowKey")


class UnsavedChangesWarning(UserWarning):
    """A context used as a ``with`` block was left, without an exception, with changes not saved."""


class MergeOption(Enum):
    """What a query does to an entity the context already tracks.

    * ``APPEND_ONLY`` (default): the tracked object and its ETag are left as they are.
    * ``OVERWRITE_CHANGES``: properties and ETag are overwritten from the service;
      local changes are lost and the entity becomes UNCHANGED.
    * ``PRESERVE_CHANGES``: the ETag is refreshed and so are the property values
      you have not changed locally; values you changed since the entity was
      last in sync are kept (an entity marked DELETED keeps all of them). No
      change is lost, on either side: this is the recovery path after a 412
      Precondition Failed.
    * ``NO_TRACKING``: results are not tracked at all (updating one needs ``attach_to``).
    """

    APPEND_ONLY = "AppendOnly"
    OVERWRITE_CHANGES = "OverwriteChanges"
    PRESERVE_CHANGES = "PreserveChanges"
    NO_TRACKING = "NoTracking"


class SaveChangesOptions(Flag):
    """How ``save_changes`` sends pending changes.

    * ``NONE``: one request per change, in order; stop at the first failure.
    * ``BATCH``: all changes in one entity group transaction (all or nothing).
    * ``CONTINUE_ON_ERROR``: one request per change; send all, report every failure.
    * ``REPLACE_ON_UPDATE``: updates replace the entity (PUT) instead of merging.

    ``BATCH | CONTINUE_ON_ERROR`` is invalid.
    """

    NONE = 0
    BATCH = 1
    CONTINUE_ON_ERROR = 2
    REPLACE_ON_UPDATE = 4


class EntityStates(Enum):
    """The state of a tracked entity."""

    DETACHED = "Detached"
    UNCHANGED = "Unchanged"
    ADDED = "Added"
    MODIFIED = "Modified"
    DELETED = "Deleted"


class EntityDescriptor:
    """What a context knows of one entity: its table, ETag and state.

    ``upsert`` is None, ``"merge"`` or ``"replace"`` for entities registered with
    ``upsert_object``. ``identity`` is (table, PartitionKey, RowKey).
    """

    __slots__ = ("entity", "table", "etag", "state", "upsert", "snapshot", "partial", "untyped", "_identity", "_order")

    def __init__(self, entity: Entity, table: str, etag: str | None, state: EntityStates) -> None:
        self.entity = entity
        self.table = table
        self.etag = etag
        self.state = state
        self.upsert: str | None = None
        #: Property values when the entity was last in sync with the service (None: never).
        self.snapshot: dict[str, Any] | None = None
        #: True while the entity is known only through a projection ($select): replacing it would
        #: delete the properties that were not selected.
        self.partial = False
        #: Properties read without a type (JSON nometadata): writing them back would store strings.
        self.untyped: frozenset[str] = frozenset()
        self._identity: Identity = (table, entity.PartitionKey, entity.RowKey)
        self._order = 0

    @property
    def identity(self) -> Identity:
        """(table, PartitionKey, RowKey) as the entity was registered."""
        return self._identity

    @classmethod
    def _read_unchanged(
        cls, entities: list[Any], table: str, etags: list[str | None], identities: list[Identity],
        snapshots: list[dict[str, Any]], partial: bool, untyped: Iterable[frozenset[str]],
    ) -> list[EntityDescriptor]:
        """What ``__init__`` (state UNCHANGED) and then setting ``snapshot``, ``partial`` and
        ``untyped`` make, for a page of queried entities: each slot set for the whole page in
        one C pass (``__init__`` is a Python call per entity)."""
        descriptors = list(map(_NEW_OBJECT, repeat(cls, len(entities))))
        columns: tuple[Iterable[Any], ...] = (  # in the order of __slots__, one for each (zip checks the count)
            entities, repeat(table), etags, repeat(EntityStates.UNCHANGED), repeat(None), snapshots, repeat(partial),
            untyped, identities, repeat(0),
        )
        for name, column in zip(cls.__slots__, columns, strict=True):
            deque(map(setattr, descriptors, repeat(name), column), 0)
        return descriptors

    def __repr__(self) -> str:
        return (
            f"EntityDescriptor(table={self.table!r}, PartitionKey={self._identity[1]!r}, "
            f"RowKey={self._identity[2]!r}, state={self.state.name}, etag={self.etag!r})"
        )


ResolveType = Callable[[str, str, str, dict[str, Any]], type]
ReadingEntity = Callable[[Entity, EntityPayload], None]
WritingEntity = Callable[[Entity, EntityPayload], None]


class _TrackingContext:
    """What a unit of work knows, with no I/O: tracked entities, their ETags and states,
    the operation each pending change becomes, and how a queried entity is merged in.

    :class:`TableServiceContext` and :class:`tablesdk.aio.AsyncTableServiceContext`
    share it and differ only in sending (their ``client`` and their save and
    query methods).
    """

    def __init__(
        self,
        *,
        merge_option: MergeOption = MergeOption.APPEND_ONLY,
        ignore_missing_properties: bool = True,
        ignore_resource_not_found: bool = False,
        resolve_type: ResolveType | None = None,
        echo_content: bool = False,
    ) -> None:
        self.merge_option = merge_option
        self.ignore_missing_properties = ignore_missing_properties
        self.ignore_resource_not_found = ignore_resource_not_found
        self.resolve_type = resolve_type
        self.echo_content = echo_content
        self.sending_request: list[Callable[[SendingRequest], None]] = []
        self.reading_entity: list[ReadingEntity] = []
        self.writing_entity: list[WritingEntity] = []
        self._by_object: dict[int, EntityDescriptor] = {}
        self._by_identity: dict[Identity, EntityDescriptor] = {}
        self._order = itertools.count(1)
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
        return list(self._by_object.values())

    def get_entity_descriptor(self, entity: Entity) -> EntityDescriptor | None:
        """The descriptor of ``entity`` (this very object), or None if untracked."""
        return self._by_object.get(id(entity))

    def _descriptor_or_raise(self, entity: Entity, action: str) -> EntityDescriptor:
        descriptor = self._by_object.get(id(entity))
        if descriptor is None or descriptor.entity is not entity:
            raise ValueError(
                f"cannot {action}: the context is not tracking this entity "
                f"(PartitionKey={entity.PartitionKey!r}, RowKey={entity.RowKey!r}); "
                "add_object, attach_to or query it first"
            )
        return descriptor

    def _track(
        self, table: str, entity: Entity, etag: str | None, state: EntityStates, *, from_service: bool = False
    ) -> EntityDescriptor:
        if not from_service:  # what the service returned needs no checking
            if not isinstance(entity, (TableEntity, DynamicEntity)):
                raise TypeError(f"expected a TableEntity or DynamicEntity, not {type(entity).__name__}")
            validate_table_name(table)
            validate_key("PartitionKey", entity.PartitionKey)
            validate_key("RowKey", entity.RowKey)
        if id(entity) in self._by_object:
            raise ValueError(
                f"the context is already tracking this entity (PartitionKey={entity.PartitionKey!r}, "
                f"RowKey={entity.RowKey!r}); detach it first"
            )
        identity = (table, entity.PartitionKey, entity.RowKey)
        if identity in self._by_identity:
            raise ValueError(
                "the context is already tracking a different entity with the same identity "
                f"(table={table!r}, PartitionKey={entity.PartitionKey!r}, RowKey={entity.RowKey!r})"
            )
        descriptor = EntityDescriptor(entity, table, etag, state)
        if state is not EntityStates.UNCHANGED:
            descriptor._order = next(self._order)
        self._by_object[id(entity)] = descriptor
        self._by_identity[identity] = descriptor
        return descriptor

    def _forget(self, descriptor: EntityDescriptor) -> None:
        descriptor.state = EntityStates.DETACHED
        self._by_object.pop(id(descriptor.entity), None)
        if self._by_identity.get(descriptor._identity) is descriptor:
            del self._by_identity[descriptor._identity]

    def add_object(self, table: str, entity: Entity) -> None:
        """Track ``entity`` as a new entity of ``table`` (inserted by the next save)."""
        self._refuse_if_busy("add_object")
        self._track(table, entity, None, EntityStates.ADDED)

    def attach_to(self, table: str, entity: Entity, etag: str | None = None) -> None:
        """Track an existing entity without reading it, with a known ETag.

        ``etag="*"`` makes later updates and deletes unconditional. With no
        ``etag``, ``entity.etag`` is used. Raises ValueError when this object or
        another object with the same identity is already tracked.
        """
        self._refuse_if_busy("attach_to")
        self._track(table, entity, etag if etag is not None else entity.etag, EntityStates.UNCHANGED)

    def upsert_object(self, table: str, entity: Entity, replace: bool = False) -> None:
        """Insert or merge (``replace=True``: insert or replace) ``entity`` on the next save.

        Upserts carry no condition. A tracked entity is switched to an upsert.
        """
        self._refuse_if_busy("upsert_object")
        descriptor = self._by_object.get(id(entity))
        if descriptor is None:
            descriptor = self._track(table, entity, None, EntityStates.MODIFIED)
        elif descriptor.table != table:
            raise ValueError(f"entity is tracked in table {descriptor.table!r}, not {table!r}")
        else:
            descriptor.state = EntityStates.MODIFIED
            descriptor._order = next(self._order)
        descriptor.upsert = "replace" if replace else "merge"

    def update_object(self, entity: Entity) -> None:
        """Mark a tracked entity as changed (merged, or replaced with REPLACE_ON_UPDATE)."""
        self._refuse_if_busy("update_object")
        descriptor = self._descriptor_or_raise(entity, "update_object")
        if descriptor.state is EntityStates.DELETED:
            raise ValueError("cannot update an entity marked for deletion")
        if descriptor.state is EntityStates.UNCHANGED:
            descriptor.state = EntityStates.MODIFIED
            descriptor._order = next(self._order)

    def delete_object(self, entity: Entity) -> None:
        """Mark a tracked entity for deletion; a not-yet-inserted one is simply forgotten."""
        self._refuse_if_busy("delete_object")
        descriptor = self._descriptor_or_raise(entity, "delete_object")
        if descriptor.state is EntityStates.ADDED:
            self._forget(descriptor)
            return
        descriptor.state = EntityStates.DELETED
        descriptor.upsert = None
        descriptor._order = next(self._order)

    def detach(self, entity: Entity) -> bool:
        """Stop tracking ``entity``; False if it was not tracked."""
        self._refuse_if_busy("detach")
        descriptor = self._by_object.get(id(entity))
        if descriptor is None:
            return False
        self._forget(descriptor)
        return True

    # ------------------------------------------------------------ saving

    def _warn_if_pending(self) -> None:
        pending = len(self._pending())
        if pending:
            noun = "change" if pending == 1 else "changes"
            warnings.warn(
                f"{type(self).__name__} left with {pending} pending {noun} that were never saved; "
                "call save_changes() before the end of the block (or detach() what you meant to drop)",
                UnsavedChangesWarning,
                stacklevel=3,
            )

    def _pending(self) -> list[EntityDescriptor]:
        pending = [d for d in self._by_object.values() if d.state in _PENDING_STATES]
        pending.sort(key=lambda d: d._order)
        return pending

    def _operation_for(self, descriptor: EntityDescriptor, replace_on_update: bool) -> BatchOperation:
        entity = descriptor.entity
        state = descriptor.state
        table, pk, rk = descriptor.table, entity.PartitionKey, entity.RowKey
        if (table, pk, rk) != descriptor._identity:
            raise ValueError(
                f"the keys of a tracked entity changed from {descriptor._identity[1:]!r} to {(pk, rk)!r}; "
                "keys identify an entity: detach it and add a new one instead"
            )
        if state is EntityStates.DELETED:
            if not descriptor.etag:
                raise ValueError(_NO_ETAG.format(action="delete", pk=pk, rk=rk))
            return BatchOperation(BatchOperationKind.DELETE, table, pk, rk, None, descriptor.etag)
        payload = entity_to_payload(entity)
        unknown = _still_untyped(descriptor, entity)
        if unknown:
            raise ValueError(
                f"cannot write (PartitionKey={pk!r}, RowKey={rk!r}): properties {sorted(unknown)} were read "
                "with json_metadata='nometadata', which does not carry types, so they would be stored as "
                "Edm.String. Read with minimalmetadata, declare them on a TableEntity, or set them as "
                "EntityProperty values"
            )
        for hook in self.writing_entity:
            hook(entity, payload)
        if state is EntityStates.ADDED:
            kind = BatchOperationKind.INSERT
            etag = None
        elif descriptor.upsert is not None:
            replace = descriptor.upsert == "replace" or replace_on_update
            if replace and descriptor.partial:
                raise ValueError(_PARTIAL.format(pk=pk, rk=rk))
            kind = BatchOperationKind.INSERT_OR_REPLACE if replace else BatchOperationKind.INSERT_OR_MERGE
            etag = None
        else:
            if not descriptor.etag:
                raise ValueError(_NO_ETAG.format(action="update", pk=pk, rk=rk))
            if replace_on_update and descriptor.partial:
                raise ValueError(_PARTIAL.format(pk=pk, rk=rk))
            kind = BatchOperationKind.UPDATE if replace_on_update else BatchOperationKind.MERGE
            etag = descriptor.etag
        return BatchOperation(kind, table, pk, rk, payload, etag, echo_content=self.echo_content)

    def _apply_success(
        self, descriptor: EntityDescriptor, operation: BatchOperation, result: BatchOperationResult
    ) -> None:
        if descriptor.state is EntityStates.DELETED:
            self._forget(descriptor)
            return
        if operation.payload is not None:
            # After a merge the service may hold more than we sent: only what we sent is known.
            known = dict(descriptor.snapshot or {}) if operation.kind in _MERGING_KINDS else {}
            known.update(operation.payload.values)
            descriptor.snapshot = known
        descriptor.state = EntityStates.UNCHANGED
        descriptor.upsert = None
        if result.etag:
            descriptor.etag = result.etag
            descriptor.entity.etag = result.etag
        if result.payload is not None:
            timestamp = result.payload.values.get("Timestamp")
            if timestamp is not None:
                descriptor.entity.Timestamp = timestamp

    def _start_save(self, options: SaveChangesOptions) -> _SaveRun:
        """Check ``options`` and build (so validate) the operation of every pending change."""
        if SaveChangesOptions.BATCH in options and SaveChangesOptions.CONTINUE_ON_ERROR in options:
            raise ValueError("SaveChangesOptions.BATCH cannot be combined with CONTINUE_ON_ERROR")
        replace = SaveChangesOptions.REPLACE_ON_UPDATE in options
        pending = self._pending()
        # Build (and so validate) every operation before sending anything.
        operations = [self._operation_for(d, replace) for d in pending]
        return _SaveRun(self, pending, operations, options)

    # ------------------------------------------------------------ what saves and queries do (no I/O)
    # Flows (see tablesdk._operations): they yield the requests the client's flows need and
    # get the answers back; the sync and async contexts run them with their client.

    def _f_save(
        self,
        client: ClientCore,
        options: SaveChangesOptions,
        retry_policy: RetryPolicy,
        operation_context: OperationContext | None,
    ) -> Flow[DataServiceResponse]:
        """Send every pending change (one batch, or one request each) and apply the outcomes."""
        run = self._start_save(options)
        hook = self._request_hook()
        if run.is_batch:
            if run.operations:
                try:
                    results = yield from client._f_execute_batch(run.operations, retry_policy, operation_context, hook)
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
        if self.merge_option is MergeOption.NO_TRACKING:
            return read_page(query.entity_type, page, ignore_missing_properties=ignore)
        # The page's value dicts stay as read: each is the snapshot of its entity.
        entities = read_page(query.entity_type, page, ignore_missing_properties=ignore, keep_values=True)
        table, projected = query.table, bool(query.select_columns)
        if self._track_new_page(table, entities, page, projected):
            return entities
        by_identity, unchanged = self._by_identity, EntityStates.UNCHANGED
        results: list[E] = []
        for entity, values, types, etag in zip(entities, page.values, page.types, page.etags):
            descriptor = by_identity.get((table, values.get("PartitionKey"), values.get("RowKey")))  # type: ignore[arg-type]
            if descriptor is None:
                descriptor = self._track(table, entity, etag, unchanged, from_service=True)
                descriptor.snapshot = values
                descriptor.partial = projected
                descriptor.untyped = _untyped_names(entity, values, types)
                results.append(entity)
            else:  # tracked already: refreshed as _materialize does (the entity made here is not used)
                results.append(self._materialize(query, EntityPayload(values, dict(types), etag)))
        return results

    def _track_new_page(self, table: str, entities: list[Any], page: EntityPage, projected: bool) -> bool:
        """Track the entities read from ``page`` as the loop of :meth:`_materialize_page` would,
        when none of their identities is tracked yet and no two are alike (each then takes the
        ``_track`` branch): the descriptors made and registered a page at a time. False, with
        nothing changed, for any other page (or an entity class that may read its keys other
        than as the page holds them)."""
        if not entities:
            return True
        values = page.values
        pks = list(map(dict.get, values, repeat("PartitionKey")))
        rks = list(map(dict.get, values, repeat("RowKey")))
        entity_type = type(entities[0])
        if issubclass(entity_type, DynamicEntity):
            if list(map(_PARTITION_KEY, entities)) != pks or list(map(_ROW_KEY, entities)) != rks:
                return False  # a subclass that changes its keys as they are set: entity by entity
        elif not _plain_attributes(entity_type):
            return False
        keys: list[Any] = list(zip(repeat(table), pks, rks))  # the identities the loop looks up (and _track registers)
        try:
            if len(set(keys)) != len(keys) or not self._by_identity.keys().isdisjoint(keys):
                return False
        except TypeError:  # a key JSON gave as an array or object: the loop reports it in order
            return False
        ids = list(map(id, entities))
        if not self._by_object.keys().isdisjoint(ids):
            return False
        types = page.types
        if all(map(int.__ge__, map(len, types), map(len, values))):
            untyped: Iterable[frozenset[str]] = repeat(frozenset())  # every property typed, as _untyped_names finds
        else:
            untyped = list(map(_untyped_names, entities, values, types))
        descriptors = EntityDescriptor._read_unchanged(entities, table, page.etags, keys, values, projected, untyped)
        self._by_object.update(zip(ids, descriptors))
        self._by_identity.update(zip(keys, descriptors))
        return True

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
        """The entity a query returns for ``payload``: a dispatch on :attr:`merge_option`."""
        entity_type: type[Any] = query.entity_type
        if self.resolve_type is not None:
            values = payload.values
            entity_type = self.resolve_type(
                query.table, values.get("PartitionKey", ""), values.get("RowKey", ""), values
            )
        if self.merge_option is MergeOption.NO_TRACKING:
            return self._read(entity_type, payload)  # type: ignore[no-any-return]
        identity = (query.table, payload.values.get("PartitionKey"), payload.values.get("RowKey"))
        descriptor = self._by_identity.get(identity)  # type: ignore[arg-type]
        projected = bool(query.select_columns)
        if descriptor is None:
            entity = self._read(entity_type, payload)
            descriptor = self._track(query.table, entity, payload.etag, EntityStates.UNCHANGED, from_service=True)
            descriptor.snapshot = payload.values
            descriptor.partial = projected
            descriptor.untyped = _untyped_names(entity, payload.values, payload.types)
            return entity  # type: ignore[no-any-return]
        if descriptor.state is not EntityStates.ADDED:  # an entity not yet inserted has nothing to refresh
            refresh = _REFRESH[self.merge_option]
            if refresh is not None:
                refresh(self, descriptor, payload, projected)
                self._refreshed(descriptor, payload, projected)
        return descriptor.entity  # type: ignore[return-value]

    def _read(self, entity_type: type[Any], payload: EntityPayload) -> Any:
        """A new entity of ``entity_type`` from ``payload``, after the reading_entity hooks."""
        entity = entity_from_payload(entity_type, payload, ignore_missing_properties=self.ignore_missing_properties)
        for hook in self.reading_entity:
            hook(entity, payload)
        return entity

    def _overwrite_changes(self, descriptor: EntityDescriptor, payload: EntityPayload, projected: bool) -> None:
        """OVERWRITE_CHANGES: the service's values win; local changes are dropped."""
        if projected:
            # A projection says nothing of the other properties: refresh the selected ones only.
            _merge_preserving(
                descriptor.entity, payload, None, self.ignore_missing_properties,
                keep_local_changes=False, remove_missing=False,
            )
            descriptor.snapshot = {**(descriptor.snapshot or {}), **payload.values}
        else:
            _overwrite(descriptor.entity, payload, self.ignore_missing_properties)
            self._in_full(descriptor, payload)
        descriptor.state = EntityStates.UNCHANGED
        descriptor.upsert = None

    def _preserve_changes(self, descriptor: EntityDescriptor, payload: EntityPayload, projected: bool) -> None:
        """PRESERVE_CHANGES: unchanged values are refreshed, values changed locally kept."""
        state = descriptor.state
        if projected:
            keep_local = state is not EntityStates.UNCHANGED
            _merge_preserving(
                descriptor.entity, payload, descriptor.snapshot if keep_local else None,
                self.ignore_missing_properties, keep_local_changes=keep_local, remove_missing=False,
            )
            descriptor.snapshot = {**(descriptor.snapshot or {}), **payload.values}
            return
        if state is EntityStates.UNCHANGED:
            _overwrite(descriptor.entity, payload, self.ignore_missing_properties)
        elif state is EntityStates.MODIFIED:
            _merge_preserving(
                descriptor.entity, payload, descriptor.snapshot, self.ignore_missing_properties,
                keep_local_changes=True, remove_missing=True,
            )
        self._in_full(descriptor, payload)

    @staticmethod
    def _in_full(descriptor: EntityDescriptor, payload: EntityPayload) -> None:
        """The entity was read whole: it is no longer known only through a projection."""
        if descriptor.state is not EntityStates.DELETED:
            descriptor.partial = False
        descriptor.snapshot = payload.values

    def _refreshed(self, descriptor: EntityDescriptor, payload: EntityPayload, projected: bool) -> None:
        tracked = descriptor.entity
        descriptor.untyped = descriptor.untyped | _untyped_names(tracked, payload.values, payload.types)
        for hook in self.reading_entity:
            hook(tracked, payload)
        if not projected:
            # A projection shows some properties only: taking its ETag would vouch for the others,
            # stale as they may be, and a later save would overwrite another writer's change.
            descriptor.etag = payload.etag
            tracked.etag = payload.etag


_Refresh = Callable[[_TrackingContext, EntityDescriptor, EntityPayload, bool], None]

#: What a query does to an entity the context already tracks, by merge option (None: nothing).
_REFRESH: dict[MergeOption, _Refresh | None] = {
    MergeOption.APPEND_ONLY: None,
    MergeOption.OVERWRITE_CHANGES: _TrackingContext._overwrite_changes,
    MergeOption.PRESERVE_CHANGES: _TrackingContext._preserve_changes,
}


class TableServiceContext(_TrackingContext):
    """A unit of work over one :class:`~tablesdk._client.CloudTableClient`.

    Options (all settable attributes): ``merge_option`` (default
    :attr:`MergeOption.APPEND_ONLY`), ``ignore_missing_properties`` (default
    True: properties a declared entity class lacks are kept in
    ``extra_properties``, never an error), ``ignore_resource_not_found``
    (default False: a point query for a missing entity raises
    :class:`~tablesdk._errors.ResourceNotFoundError`; True returns nothing),
    ``resolve_type`` (``(table, pk, rk, properties) -> type`` choosing the class
    of each queried entity), ``echo_content`` (ask for inserted entities back).

    Events, as lists of callables: ``sending_request`` (each gets a
    :class:`~tablesdk._client.SendingRequest` whose headers it may change),
    ``reading_entity`` (entity, payload) after an entity is materialised,
    ``writing_entity`` (entity, payload) before an entity is serialised (the
    payload may be changed).
    """

    def __init__(
        self,
        client: CloudTableClient,
        *,
        merge_option: MergeOption = MergeOption.APPEND_ONLY,
        ignore_missing_properties: bool = True,
        ignore_resource_not_found: bool = False,
        resolve_type: ResolveType | None = None,
        echo_content: bool = False,
    ) -> None:
        super().__init__(
            merge_option=merge_option, ignore_missing_properties=ignore_missing_properties,
            ignore_resource_not_found=ignore_resource_not_found, resolve_type=resolve_type,
            echo_content=echo_content,
        )
        self.client = client

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
    ) -> DataServiceResponse:
        """Send every pending change and return the outcome of each.

        Raises :class:`~tablesdk._errors.DataServiceRequestError` (its
        ``.response`` lists what succeeded, what failed and what was not sent)
        when any change failed. Failed and unsent changes stay pending and are
        sent again by the next ``save_changes``; applied ones become UNCHANGED
        (deleted ones DETACHED) with the new ETag. No retries: see
        :meth:`save_changes_with_retries`. ``operation_context`` records every
        request attempt the save makes.
        """
        return self._save(options, NoRetry(), operation_context)

    def save_changes_with_retries(
        self,
        options: SaveChangesOptions = SaveChangesOptions.NONE,
        retry_policy: RetryPolicy | None = None,
        *,
        operation_context: OperationContext | None = None,
    ) -> DataServiceResponse:
        """``save_changes`` with each request retried by ``retry_policy`` (default: the client's).

        A retried insert answered 409, or a retried delete answered 404, after an
        attempt whose outcome was unknown has ``error.ambiguous_retry`` set: the
        first attempt may have been applied (see docs/retries.md).
        """
        policy = retry_policy if retry_policy is not None else self.client.retry_policy
        return self._save(options, policy, operation_context)

    def begin_save_changes(self, options: SaveChangesOptions = SaveChangesOptions.NONE) -> Future[DataServiceResponse]:
        """Run :meth:`save_changes` on the client's executor; returns a Future."""
        return self.client.executor().submit(self.save_changes, options)

    def _save(
        self, options: SaveChangesOptions, retry_policy: RetryPolicy, operation_context: OperationContext | None
    ) -> DataServiceResponse:
        with self._exclusive("save_changes"):
            return self.client._run(self._f_save(self.client, options, retry_policy, operation_context))

    # ------------------------------------------------------------ queries

    @overload
    def create_query(self, table: str) -> TableQuery[DynamicEntity]: ...

    @overload
    def create_query(self, table: str, entity_type: type[E]) -> TableQuery[E]: ...

    def create_query(self, table: str, entity_type: type[Any] = DynamicEntity) -> TableQuery[Any]:
        """A query over ``table`` whose results this context tracks per :attr:`merge_option`.

        Typed by the entity class: ``create_query("Blogs", Blog)`` is a ``TableQuery[Blog]``.
        """
        validate_table_name(table)
        return TableQuery(self, table, entity_type)

    @overload
    def get(self, table: str, partition_key: str, row_key: str) -> DynamicEntity | None: ...

    @overload
    def get(self, table: str, partition_key: str, row_key: str, entity_type: type[E]) -> E | None: ...

    def get(
        self, table: str, partition_key: str, row_key: str, entity_type: type[Any] = DynamicEntity
    ) -> Entity | None:
        """Point lookup of one entity (tracked per :attr:`merge_option`).

        Raises :class:`~tablesdk._errors.ResourceNotFoundError` when it does not
        exist, unless :attr:`ignore_resource_not_found` is set (then None).
        """
        query = self.create_query(table, entity_type).where(
            (prop("PartitionKey") == partition_key) & (prop("RowKey") == row_key)
        )
        results = self.execute_query_segment(query, None, None).results
        return results[0] if results else None

    def begin_execute(self, query: TableQuery[E]) -> Future[list[E]]:
        """Run ``query`` to completion on the client's executor; returns a Future of the list."""
        return self.client.executor().submit(list, query)

    def execute_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[E]:
        """One page of ``query`` with tracking applied (the QuerySource protocol)."""
        with self._exclusive("a query"):
            return self.client._run(self._f_query_segment(self.client, query, continuation_token, top))

    def fetch_query_segment(
        self, query: TableQuery[E], continuation_token: ContinuationToken | None, top: int | None
    ) -> FetchedPage:
        """The HTTP stage of :meth:`execute_query_segment` (:class:`~tablesdk._query.PagedQuerySource`).

        It reads no tracked state, so iteration runs it on another thread for
        the next page while this one is decoded: the ``sending_request`` hooks
        of that request run there.
        """
        return self.client._run(self._f_fetch_segment(self.client, query, continuation_token, top))

    def decode_query_segment(self, query: TableQuery[E], fetched: FetchedPage) -> ResultSegment[E]:
        """The decode stage: ``fetched``'s entities materialised and tracked, one thread at a time."""
        with self._exclusive("a query"):
            return self._decode_segment(self.client, query, fetched)

    def execute_batch(self, query: TableQuery[E]) -> list[E]:
        """Run a point query inside an entity group transaction (the Azure Storage team's workaround
        for keys the URL path cannot carry). The query's filter must be exactly
        ``PartitionKey eq X and RowKey eq Y``."""
        with self._exclusive("execute_batch"):
            return self.client._run(self._f_point_batch(self.client, query))


class _SaveRun:
    """One ``save_changes`` in progress, with no I/O: which change to send next, and what each
    outcome does to its descriptor.

    The sync and async contexts drive it the same way: send :attr:`operations` as one
    batch (then :meth:`batch_succeeded` or :meth:`batch_failed`) or one by one from
    :meth:`to_send` (then :meth:`succeeded` or :meth:`failed` for each), and finally
    :meth:`finish`. A change is applied to its descriptor only when its success is
    reported, so a save interrupted mid-way (an exception, a cancelled task) leaves every
    change whose outcome is unknown pending.
    """

    def __init__(
        self,
        context: _TrackingContext,
        pending: list[EntityDescriptor],
        operations: list[BatchOperation],
        options: SaveChangesOptions,
    ) -> None:
        self.context = context
        self.pending = pending
        self.operations = operations
        self.is_batch = SaveChangesOptions.BATCH in options
        self.continue_on_error = SaveChangesOptions.CONTINUE_ON_ERROR in options
        self.responses = [OperationResponse(d.entity, d.table, op.kind.name) for d, op in zip(pending, operations)]
        self._stopped = False
        self._outcome: DataServiceResponse | None = None

    def to_send(self) -> Iterator[tuple[int, BatchOperation]]:
        """The changes to send one by one, in order; stops after a failure unless continuing on errors."""
        for index, operation in enumerate(self.operations):
            if self._stopped:
                return
            self.responses[index].sent = True
            yield index, operation

    def succeeded(self, index: int, result: BatchOperationResult) -> None:
        """Change ``index`` was applied by the service."""
        response = self.responses[index]
        response.sent = True
        response.status_code = result.status
        response.etag = result.etag
        self.context._apply_success(self.pending[index], self.operations[index], result)

    def failed(self, index: int, error: TableServiceError) -> None:
        """Change ``index`` was refused (it stays pending), or applied with an unreadable answer.

        A 2xx answer whose body cannot be decoded still means the service applied the
        change: it is not left pending (sending it again would meet its own result, a
        409 or 412), its response carries the decode error, and the save goes on.
        """
        response = self.responses[index]
        response.sent = True
        response.error = error
        response.status_code = error.status_code
        if isinstance(error, ResponseDecodeError) and _applied_unreadable(error):
            etag = error.etag
            result = BatchOperationResult(index, error.status_code or 200, etag, None)
            response.etag = etag
            self.context._apply_success(self.pending[index], self.operations[index], result)
            return
        if not self.continue_on_error:
            self._stopped = True

    def batch_succeeded(self, results: Sequence[BatchOperationResult]) -> None:
        """The entity group transaction was applied: every change succeeded."""
        for index, result in enumerate(results):
            self.succeeded(index, result)
        self._outcome = DataServiceResponse(self.responses, is_batch=True, batch_status_code=202)

    def batch_failed(self, error: TableServiceError) -> None:
        """The transaction was refused (nothing applied); the blamed change, if any, carries the error.

        An ambiguous refusal may mean the whole transaction was applied by an earlier
        attempt, so every change carries it, not only the blamed one.
        """
        blamed = error.failed_index if isinstance(error, BatchError) else None
        cause = (error.cause or error) if isinstance(error, BatchError) else error
        everyone = blamed is None or error.ambiguous_retry
        applied = _applied_unreadable(error)  # a 202 that committed but could not be read
        for index, response in enumerate(self.responses):
            response.sent = True
            if everyone or index == blamed:
                response.error = cause
                response.status_code = error.status_code
            if applied:
                result = BatchOperationResult(index, error.status_code or 202, None, None)
                self.context._apply_success(self.pending[index], self.operations[index], result)
        self._outcome = DataServiceResponse(
            self.responses, is_batch=True, batch_status_code=error.status_code, failed_index=blamed
        )
        raise _batch_save_error(self._outcome, error) from error

    def finish(self) -> DataServiceResponse:
        """The outcome of the save; raises :class:`DataServiceRequestError` when a change failed."""
        if self.is_batch:
            return self._outcome or DataServiceResponse(self.responses, is_batch=True)
        outcome = DataServiceResponse(self.responses)
        _raise_if_failed(outcome)
        return outcome


def _applied_unreadable(error: TableServiceError) -> bool:
    """Whether ``error`` is a success answer whose body could not be read: the change was applied."""
    status = error.status_code
    return isinstance(error, ResponseDecodeError) and status is not None and 200 <= status < 300


def _untyped_names(entity: Entity, values: dict[str, Any], types: dict[str, EdmType]) -> frozenset[str]:
    """Properties the wire gave no type for and the entity class does not declare either."""
    if len(types) >= len(values):  # every property typed: nothing to look for
        return frozenset()
    declared = entity.__declared__ if isinstance(entity, TableEntity) else {}
    return frozenset(
        name for name in values
        if name not in types and name not in declared and name not in ("PartitionKey", "RowKey", "Timestamp")
    )


_MERGING_KINDS = frozenset({BatchOperationKind.MERGE, BatchOperationKind.INSERT_OR_MERGE})
_PENDING_STATES = frozenset({EntityStates.ADDED, EntityStates.MODIFIED, EntityStates.DELETED})

_NO_ETAG = (
    "cannot {action} (PartitionKey={pk!r}, RowKey={rk!r}) without an ETag: the entity was never read "
    "(or was read with json_metadata='nometadata', which carries no ETags in query results). "
    "Query it first, or attach_to(table, entity, etag='*') for an unconditional {action}"
)

_PARTIAL = (
    "cannot replace (PartitionKey={pk!r}, RowKey={rk!r}): it was read through a projection (select), so "
    "replacing it would delete every property that was not selected. Save without REPLACE_ON_UPDATE "
    "(a merge), or read it in full first"
)


def _still_untyped(descriptor: EntityDescriptor, entity: Entity) -> set[str]:
    """Properties read without a type that still hold the value read, with no type given since."""
    if not descriptor.untyped:
        return set()
    read = descriptor.snapshot or {}
    current, typed = loose_properties(entity)
    return {
        name for name in descriptor.untyped
        if name in current and name not in typed and not isinstance(current[name], EntityProperty)
        and current[name] == read.get(name, _MISSING)
    }


def _overwrite(target: Entity, payload: EntityPayload, ignore_missing_properties: bool) -> None:
    entity_type: Any = type(target)
    fresh: Any = entity_from_payload(entity_type, payload, ignore_missing_properties=ignore_missing_properties)
    overwrite_entity(target, fresh)


_MISSING = object()


def _merge_preserving(
    target: Entity,
    payload: EntityPayload,
    snapshot: dict[str, Any] | None,
    ignore_missing_properties: bool,
    *,
    keep_local_changes: bool,
    remove_missing: bool,
) -> None:
    """Refresh the properties of ``target`` from ``payload``.

    With ``keep_local_changes``, a property changed locally since ``snapshot``
    (its value differs from the snapshot's; with no snapshot, every local
    property) keeps its local value. Properties the service has and the entity
    lacks are added. With ``remove_missing``, properties absent from the payload
    that were in the snapshot and are unchanged locally are removed (deleted on
    the service); never for a projection, which does not show them.
    """
    entity_type: Any = type(target)
    fresh: Any = entity_from_payload(entity_type, payload, ignore_missing_properties=ignore_missing_properties)
    local = entity_to_payload(target, validate=False).values
    server = entity_to_payload(fresh, validate=False)

    def changed(name: str) -> bool:
        if not keep_local_changes:
            return False
        if snapshot is None:
            return name in local
        return bool(local.get(name, _MISSING) != snapshot.get(name, _MISSING))

    for name in server.values:
        if name in ("PartitionKey", "RowKey") or changed(name):
            continue
        if not remove_missing and name not in payload.values:  # not selected: says nothing of it
            continue
        take_property(target, fresh, name, server)
    for name in list(local) if remove_missing else ():
        if name in server.values or name in ("PartitionKey", "RowKey") or changed(name):
            continue
        if snapshot is not None and name in snapshot:  # deleted on the service, untouched here
            drop_property(target, name)
    target.Timestamp = fresh.Timestamp


def _save_error(outcome: DataServiceResponse, message: str) -> DataServiceRequestError:
    """The error of a failed save: ``message``, with the status, code and request id of the first failure."""
    first = outcome.errors[0].error
    assert first is not None
    return DataServiceRequestError(
        message,
        response=outcome,
        status_code=first.status_code,
        error_code=first.error_code,
        request_id=first.request_id,
    )


def _batch_save_error(outcome: DataServiceResponse, cause: TableServiceError) -> DataServiceRequestError:
    where = f" (operation {outcome.failed_index})" if outcome.failed_index is not None else ""
    return _save_error(outcome, f"entity group transaction failed{where}: {cause.message}")


def _raise_if_failed(outcome: DataServiceResponse) -> None:
    errors = outcome.errors
    if not errors:
        return
    not_sent = sum(1 for r in outcome if not r.sent)
    summary = f"{len(errors)} of {len(outcome)} changes failed"
    if not_sent:
        summary += f", {not_sent} not sent"
    first = errors[0].error
    assert first is not None
    raise _save_error(outcome, f"{summary}; first: {first.describe(request_id=False)}")
