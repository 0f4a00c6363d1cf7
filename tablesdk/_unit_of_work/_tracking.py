"""What a unit of work knows of each entity, with no I/O.

:class:`EntityDescriptor` holds one entity's table, ETag, state and what was last read of
it, and its methods are the only code that moves it from one state to another (added,
modified, upserted, deleted, saved, refreshed by a query, detached). :class:`IdentityMap`
finds the descriptor of an object or of an identity and keeps both lookups in step.

The lowest of the context modules: it imports none of the others (``_merge``,
``_save_plan``, ``_tracking_context``, ``_context``), which all build on it.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable
from enum import Enum
from itertools import chain, repeat
from operator import attrgetter
from typing import Any

from .._entities._edm import EdmType, EntityPage, EntityPayload
from .._entities._entity import (
    DynamicEntity,
    EntityObject,
    TableEntity,
    _plain_attributes,
    validate_key,
    validate_table_name,
)
from .._entities._entity_access import check_entity, declared_names, entity_keys, set_entity_etag, set_entity_timestamp

__all__ = [
    "Entity",
    "Identity",
    "ReadingEntity",
    "WritingEntity",
    "EntityStates",
    "PENDING_STATES",
    "EntityDescriptor",
    "IdentityMap",
    "untyped_names",
]

#: A tracked entity: a TableEntity, DynamicEntity, model object or mapping (``_entity.EntityObject``).
Entity = EntityObject
#: (table, PartitionKey, RowKey): what the service identifies an entity by.
Identity = tuple[str, str, str]
#: A ``reading_entity`` hook: called with each entity a query materialised and the payload it came from.
ReadingEntity = Callable[[Entity, EntityPayload], None]
#: A ``writing_entity`` hook: called with each entity a save serialises and its payload (which it may change).
WritingEntity = Callable[[Entity, EntityPayload], None]

_NEW_OBJECT = object.__new__
_PARTITION_KEY = attrgetter("PartitionKey")
_ROW_KEY = attrgetter("RowKey")
_ORDER = attrgetter("_order")
#: One empty set for every descriptor with no untyped property: ``frozenset()`` makes a new
#: 216-byte object on each call (CPython keeps no empty-frozenset singleton since 3.10).
_NONE_UNTYPED: frozenset[str] = frozenset()


class EntityStates(Enum):
    """The state of a tracked entity."""

    DETACHED = "Detached"
    UNCHANGED = "Unchanged"
    ADDED = "Added"
    MODIFIED = "Modified"
    DELETED = "Deleted"


#: The states of the entities the next save sends.
PENDING_STATES = frozenset({EntityStates.ADDED, EntityStates.MODIFIED, EntityStates.DELETED})


class EntityDescriptor:
    """What a context knows of one entity: its table, ETag and state.

    ``upsert`` is None, ``"merge"`` or ``"replace"`` for entities registered with
    ``upsert_object``. ``identity`` is (table, PartitionKey, RowKey).
    """

    __slots__ = (
        "entity", "table", "etag", "_state", "upsert", "_snapshot_keys", "_snapshot_values", "partial", "untyped",
        "_identity", "_order", "_pending",
    )

    def __init__(self, entity: Entity, table: str, etag: str | None, state: EntityStates) -> None:
        self.entity = entity
        self.table = table
        self.etag = etag
        self._state = state
        self.upsert: str | None = None
        # What :attr:`snapshot` gives, kept compact: the names (one tuple shared by the
        # descriptors of a shape) and the values (a tuple, the very objects the entity holds).
        self._snapshot_keys: tuple[str, ...] | None = None
        self._snapshot_values: tuple[Any, ...] = ()
        #: True while the entity is known only through a projection ($select): replacing it would
        #: delete the properties that were not selected.
        self.partial = False
        #: Properties read without a type (JSON nometadata): writing them back would store strings.
        self.untyped: frozenset[str] = _NONE_UNTYPED
        self._identity: Identity = (table, *entity_keys(entity))
        #: The place of its pending change in the save (a later change is sent later); 0 while UNCHANGED.
        self._order = 0
        #: The pending changes of the IdentityMap that tracks it (None: no map; IdentityMap.track
        #: sets it): the state methods below keep this descriptor in it exactly while its state
        #: is pending, so a save looks at its changes only, not at every tracked entity.
        self._pending: dict[EntityDescriptor, None] | None = None

    @property
    def state(self) -> EntityStates:
        """Where the entity stands (added, modified, deleted, unchanged, detached): read-only, changed
        only by this class's ``mark_*`` methods, as the save and merge rules rely on."""
        return self._state

    @property
    def identity(self) -> Identity:
        """(table, PartitionKey, RowKey) as the entity was registered."""
        return self._identity

    @property
    def snapshot(self) -> dict[str, Any] | None:
        """Property values when the entity was last in sync with the service (None: never).

        A new dict on each read: change it freely, it changes nothing tracked.
        """
        keys = self._snapshot_keys
        return None if keys is None else dict(zip(keys, self._snapshot_values))

    def _keep(self, values: dict[str, Any]) -> None:
        """Make ``values`` the snapshot (copied into the compact form: later changes to the dict
        change nothing here)."""
        self._snapshot_keys = _shared_keys(tuple(values))
        self._snapshot_values = tuple(values.values())

    @classmethod
    def _read_unchanged(
        cls, entities: list[Any], table: str, etags: list[str | None], identities: list[Identity],
        snapshots: list[dict[str, Any]], partial: bool, untyped: Iterable[frozenset[str]],
        pending: dict[EntityDescriptor, None],
    ) -> list[EntityDescriptor]:
        """What ``__init__`` (state UNCHANGED) and then :meth:`mark_read` make, for a page of
        queried entities: each slot set for the whole page in one C pass (``__init__`` is a
        Python call per entity)."""
        descriptors = list(map(_NEW_OBJECT, repeat(cls, len(entities))))
        keys = _page_keys(snapshots)
        snapshot_values = list(map(tuple, map(dict.values, snapshots)))
        columns: tuple[Iterable[Any], ...] = (  # in the order of __slots__, one for each (zip checks the count)
            entities, repeat(table), etags, repeat(EntityStates.UNCHANGED), repeat(None), keys, snapshot_values,
            repeat(partial), untyped, identities, repeat(0), repeat(pending),
        )
        for name, column in zip(cls.__slots__, columns, strict=True):
            deque(map(setattr, descriptors, repeat(name), column), 0)
        return descriptors

    # ------------------------------------------------------------ changes marked by the application

    def mark_added(self, order: int) -> None:
        """``add_object``: the next save inserts the entity (the ``order``-th change queued)."""
        self._state = EntityStates.ADDED
        self._order = order
        self._now_pending()

    def mark_modified(self, order: int) -> None:
        """``update_object``: an UNCHANGED entity becomes MODIFIED, queued at ``order``; an ADDED
        or MODIFIED one already has its change queued and keeps it (and its place)."""
        if self._state is EntityStates.DELETED:
            raise ValueError("cannot update an entity marked for deletion")
        if self._state is EntityStates.UNCHANGED:
            self._state = EntityStates.MODIFIED
            self._order = order
            self._now_pending()

    def mark_upsert(self, replace: bool, order: int) -> None:
        """``upsert_object``: the next save inserts or merges (``replace``: inserts or replaces)
        the entity, with no condition, whatever change was queued before."""
        self._state = EntityStates.MODIFIED
        self.upsert = "replace" if replace else "merge"
        self._order = order
        self._now_pending()

    def mark_deleted(self, order: int) -> None:
        """``delete_object`` of an entity the service has: the next save deletes it (a queued
        upsert is dropped). An ADDED entity is detached instead: the service never had it."""
        self._state = EntityStates.DELETED
        self.upsert = None
        self._order = order
        self._now_pending()

    def mark_detached(self) -> None:
        """The context no longer tracks the entity (:meth:`IdentityMap.forget` calls it)."""
        self._state = EntityStates.DETACHED
        self._no_longer_pending()
        self._pending = None  # no map tracks it now

    # ------------------------------------------------------------ what the service said

    def mark_read(self, values: dict[str, Any], *, partial: bool, untyped: frozenset[str]) -> None:
        """First read from the service: ``values`` is what the service holds, ``partial`` says
        they came through a projection, ``untyped`` names the properties read without a type."""
        self._keep(values)
        self.partial = partial
        self.untyped = untyped

    def mark_saved(self, sent: dict[str, Any] | None, *, merged: bool, etag: str | None, timestamp: Any) -> None:
        """A save applied the entity's insert, update or upsert: it is UNCHANGED.

        ``sent`` is the values the request carried (None: none), now known to be the
        service's; after a merge (``merged``) the service may hold more than was sent, so they
        go on top of what was known. ``etag`` and ``timestamp`` are the service's, when its
        answer gave them. (A saved delete detaches the entity instead.)
        """
        if sent is not None:
            if merged and self._snapshot_keys is not None:
                known = dict(zip(self._snapshot_keys, self._snapshot_values))
                known.update(sent)
                self._keep(known)
            else:
                self._keep(sent)
        self._state = EntityStates.UNCHANGED
        self.upsert = None
        self._no_longer_pending()
        if etag:
            self.take_etag(etag)
        if timestamp is not None:
            set_entity_timestamp(self.entity, timestamp)

    def take_etag(self, etag: str | None) -> None:
        """The entity is now the service's version ``etag``; the entity object carries it too."""
        self.etag = etag
        set_entity_etag(self.entity, etag)

    def discard_changes(self) -> None:
        """The service's values replaced the local ones (OVERWRITE_CHANGES): nothing is pending."""
        self._state = EntityStates.UNCHANGED
        self.upsert = None
        self._no_longer_pending()

    def _now_pending(self) -> None:
        if self._pending is not None:
            self._pending[self] = None

    def _no_longer_pending(self) -> None:
        if self._pending is not None:
            self._pending.pop(self, None)

    def read_in_full(self, values: dict[str, Any]) -> None:
        """The whole entity was read again: ``values`` is the new snapshot, and it is no longer
        known only through a projection (an entity marked DELETED keeps its flag: it is not
        written again)."""
        if self._state is not EntityStates.DELETED:
            self.partial = False
        self._keep(values)

    def read_in_part(self, values: dict[str, Any]) -> None:
        """A projection was read again: the selected ``values`` join the snapshot; it says
        nothing of the other properties."""
        self._keep({**(self.snapshot or {}), **values})

    def found_untyped(self, names: frozenset[str]) -> None:
        """``names`` were read without a type: writing them back unchanged is refused."""
        if names:
            self.untyped = self.untyped | names

    def __repr__(self) -> str:
        return (
            f"EntityDescriptor(table={self.table!r}, PartitionKey={self._identity[1]!r}, "
            f"RowKey={self._identity[2]!r}, state={self._state.name}, etag={self.etag!r})"
        )


#: Snapshot key tuples by themselves, so that the descriptors of one shape share one tuple.
_SHARED_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {}
_MAX_SHARED_KEYS = 4096


def _shared_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    """``keys``, or the equal tuple kept already (a bounded cache: past it, tuples are not shared)."""
    shared = _SHARED_KEYS.get(keys)
    if shared is not None:
        return shared
    if len(_SHARED_KEYS) < _MAX_SHARED_KEYS:
        _SHARED_KEYS[keys] = keys
    return keys


def _page_keys(snapshots: list[dict[str, Any]]) -> Iterable[tuple[str, ...]]:
    """The shared key tuple of each of ``snapshots``: one for the whole page when all have the
    same keys in the same order (one flat C comparison), as a page of one shape does."""
    if not snapshots:
        return []
    first = _shared_keys(tuple(snapshots[0]))
    if list(chain.from_iterable(snapshots)) == list(first) * len(snapshots):
        return repeat(first)
    return list(map(_shared_keys, map(tuple, snapshots)))


def untyped_names(entity: Entity, values: dict[str, Any], types: dict[str, EdmType]) -> frozenset[str]:
    """Properties the wire gave no type for and the entity class does not declare either."""
    if len(types) >= len(values):  # every property typed: nothing to look for
        return _NONE_UNTYPED
    declared = declared_names(entity)
    found = frozenset(
        name for name in values
        if name not in types and name not in declared and name not in ("PartitionKey", "RowKey", "Timestamp")
    )
    return found or _NONE_UNTYPED


class IdentityMap:
    """The tracked entities: one descriptor per object and per identity, found by either.

    ``by_object`` (keyed by ``id(entity)``) keeps the order entities became tracked;
    ``by_identity`` is what a query's results are matched against. Only :meth:`track`,
    :meth:`track_page` and :meth:`forget` change them, so the two stay in step.
    """

    def __init__(self, *, cosmos: bool = False) -> None:
        self.cosmos = cosmos  # table names follow Cosmos DB's rule (the context's client is Cosmos DB's)
        self.by_object: dict[int, EntityDescriptor] = {}
        self.by_identity: dict[Identity, EntityDescriptor] = {}
        #: The descriptors whose state is pending (ADDED, MODIFIED, DELETED), kept by their own
        #: state methods: what a save sends, found without looking at the unchanged ones.
        self._pending: dict[EntityDescriptor, None] = {}
        self._order = itertools.count(1)

    def __len__(self) -> int:
        return len(self.by_object)

    def next_order(self) -> int:
        """The place of the next change queued: changes are sent in the order they were marked."""
        return next(self._order)

    def get(self, entity: Entity) -> EntityDescriptor | None:
        """The descriptor of ``entity`` (this very object), or None if untracked."""
        return self.by_object.get(id(entity))

    def require(self, entity: Entity, action: str) -> EntityDescriptor:
        """The descriptor of ``entity``; ValueError naming ``action`` when it is not tracked."""
        descriptor = self.by_object.get(id(entity))
        if descriptor is None or descriptor.entity is not entity:
            pk, rk = entity_keys(entity)
            raise ValueError(
                f"cannot {action}: the context is not tracking this entity "
                f"(PartitionKey={pk!r}, RowKey={rk!r}); "
                "add_object, attach_to or query it first"
            )
        return descriptor

    def pending(self) -> list[EntityDescriptor]:
        """The descriptors whose change the next save sends, in the order the changes were marked."""
        return sorted(self._pending, key=_ORDER)

    def pending_count(self) -> int:
        """How many changes the next save sends."""
        return len(self._pending)

    def track(self, table: str, entity: Entity, etag: str | None, *, from_service: bool = False) -> EntityDescriptor:
        """Register ``entity`` of ``table`` as UNCHANGED with ``etag`` (the caller then marks
        what it is: added, upserted, read). ``from_service``: the service returned it, so its
        type, table and keys need no checking."""
        pk, rk = entity_keys(entity)
        if not from_service:
            check_entity(entity)
            validate_table_name(table, cosmos=self.cosmos)
            validate_key("PartitionKey", pk)
            validate_key("RowKey", rk)
        if id(entity) in self.by_object:
            raise ValueError(
                f"the context is already tracking this entity (PartitionKey={pk!r}, "
                f"RowKey={rk!r}); detach it first"
            )
        identity = (table, pk, rk)
        if identity in self.by_identity:
            raise ValueError(
                "the context is already tracking a different entity with the same identity "
                f"(table={table!r}, PartitionKey={pk!r}, RowKey={rk!r})"
            )
        descriptor = EntityDescriptor(entity, table, etag, EntityStates.UNCHANGED)
        descriptor._pending = self._pending
        self.by_object[id(entity)] = descriptor
        self.by_identity[identity] = descriptor
        return descriptor

    def forget(self, descriptor: EntityDescriptor) -> None:
        """Stop tracking ``descriptor``'s entity: it becomes DETACHED."""
        descriptor.mark_detached()
        self.by_object.pop(id(descriptor.entity), None)
        if self.by_identity.get(descriptor._identity) is descriptor:
            del self.by_identity[descriptor._identity]

    def track_page(self, table: str, entities: list[Any], page: EntityPage, projected: bool) -> bool:
        """Track the entities read from ``page`` as :meth:`track` then
        :meth:`EntityDescriptor.mark_read` would, one by one, when none of their identities is
        tracked yet and no two are alike: the descriptors made and registered a page at a time.
        False, with nothing changed, for any other page (or an entity class that may read its
        keys other than as the page holds them)."""
        if not entities:
            return True
        values = page.values
        pks = list(map(dict.get, values, repeat("PartitionKey")))
        rks = list(map(dict.get, values, repeat("RowKey")))
        entity_type = type(entities[0])
        if issubclass(entity_type, DynamicEntity):
            if list(map(_PARTITION_KEY, entities)) != pks or list(map(_ROW_KEY, entities)) != rks:
                return False  # a subclass that changes its keys as they are set: entity by entity
        elif not issubclass(entity_type, TableEntity) or not _plain_attributes(entity_type):
            return False  # a model class or mapping: entity by entity
        keys: list[Any] = list(zip(repeat(table), pks, rks))  # the identities track would register
        try:
            if len(set(keys)) != len(keys) or not self.by_identity.keys().isdisjoint(keys):
                return False
        except TypeError:  # a key JSON gave as an array or object: entity by entity reports it in order
            return False
        ids = list(map(id, entities))
        if not self.by_object.keys().isdisjoint(ids):
            return False
        types = page.types
        if all(map(int.__ge__, map(len, types), map(len, values))):
            untyped: Iterable[frozenset[str]] = repeat(_NONE_UNTYPED)  # every property typed, as untyped_names finds
        else:
            untyped = list(map(untyped_names, entities, values, types))
        descriptors = EntityDescriptor._read_unchanged(
            entities, table, page.etags, keys, values, projected, untyped, self._pending
        )
        self.by_object.update(zip(ids, descriptors))
        self.by_identity.update(zip(keys, descriptors))
        return True
