"""The merge rules: what a query does to an entity the context already tracks.

A context materialises each queried entity (``TrackingContext._materialize``): with
:attr:`MergeOption.NO_TRACKING` it is only read; an identity not tracked yet is tracked; an
identity tracked already is refreshed here, by :func:`refresh_tracked`, per the option
(APPEND_ONLY: not at all; OVERWRITE_CHANGES; PRESERVE_CHANGES). No I/O; builds on
``_tracking`` only among the context modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

from .._entities._edm import EntityPayload
from .._entities._entity import entity_from_payload, entity_to_payload
from .._entities._entity_access import (
    drop_property,
    entity_timestamp,
    overwrite_entity,
    set_entity_timestamp,
    take_property,
)
from ._tracking import Entity, EntityDescriptor, EntityStates, ReadingEntity, untyped_names

__all__ = ["MergeOption", "refresh_tracked"]


class MergeOption(Enum):
    """What a query does to an entity the context already tracks.

    * ``APPEND_ONLY`` (default): the tracked object and its ETag are left as they are.
    * ``OVERWRITE_CHANGES``: properties and ETag are overwritten from the service;
      local changes are lost and the entity becomes UNCHANGED.
    * ``PRESERVE_CHANGES``: the ETag is refreshed and so are the property values
      you have not changed locally; values you changed since the entity was
      last in sync are kept (an entity marked DELETED keeps all of them). Saving
      then writes your changed values over whatever another writer stored: the
      client wins, for the changed properties, as with .NET's DataServiceContext.
      It is not a safe recovery after a 412 Precondition Failed: a read-modify-write
      (a counter) loses the other writer's update. To recover, read the entity
      again with ``OVERWRITE_CHANGES``, apply your change again to the service's
      values and save, repeating on another 412 (docs/concurrency.md).
    * ``NO_TRACKING``: results are not tracked at all (updating one needs ``attach_to``).
    """

    APPEND_ONLY = "AppendOnly"
    OVERWRITE_CHANGES = "OverwriteChanges"
    PRESERVE_CHANGES = "PreserveChanges"
    NO_TRACKING = "NoTracking"


def refresh_tracked(
    option: MergeOption,
    descriptor: EntityDescriptor,
    payload: EntityPayload,
    projected: bool,
    ignore_missing_properties: bool,
    reading_entity: Sequence[ReadingEntity],
) -> None:
    """A query read ``payload`` for the entity ``descriptor`` tracks: refresh it per ``option``.

    ``projected``: the query selected some properties only. The ``reading_entity`` hooks
    run on the tracked entity when it was refreshed. An entity not yet inserted (ADDED)
    has nothing on the service to be refreshed from.
    """
    if descriptor.state is EntityStates.ADDED:
        return
    rule = _RULES[option]
    if rule is None:
        return
    rule(descriptor, payload, projected, ignore_missing_properties)
    tracked = descriptor.entity
    descriptor.found_untyped(untyped_names(tracked, payload.values, payload.types))
    for hook in reading_entity:
        hook(tracked, payload)
    if not projected:
        # A projection shows some properties only: taking its ETag would vouch for the others,
        # stale as they may be, and a later save would overwrite another writer's change.
        descriptor.take_etag(payload.etag)


def _overwrite_changes(
    descriptor: EntityDescriptor, payload: EntityPayload, projected: bool, ignore_missing_properties: bool
) -> None:
    """OVERWRITE_CHANGES: the service's values win; local changes are dropped."""
    if projected:
        # A projection says nothing of the other properties: refresh the selected ones only.
        _merge_preserving(
            descriptor.entity, payload, None, ignore_missing_properties,
            keep_local_changes=False, remove_missing=False,
        )
        descriptor.read_in_part(payload.values)
    else:
        _overwrite(descriptor.entity, payload, ignore_missing_properties)
        descriptor.read_in_full(payload.values)
    descriptor.discard_changes()


def _preserve_changes(
    descriptor: EntityDescriptor, payload: EntityPayload, projected: bool, ignore_missing_properties: bool
) -> None:
    """PRESERVE_CHANGES: unchanged values are refreshed, values changed locally kept."""
    state = descriptor.state
    if projected:
        keep_local = state is not EntityStates.UNCHANGED
        _merge_preserving(
            descriptor.entity, payload, descriptor.snapshot if keep_local else None,
            ignore_missing_properties, keep_local_changes=keep_local, remove_missing=False,
        )
        descriptor.read_in_part(payload.values)
        return
    if state is EntityStates.UNCHANGED:
        _overwrite(descriptor.entity, payload, ignore_missing_properties)
    elif state is EntityStates.MODIFIED:
        _merge_preserving(
            descriptor.entity, payload, descriptor.snapshot, ignore_missing_properties,
            keep_local_changes=True, remove_missing=True,
        )
    descriptor.read_in_full(payload.values)


_Rule = Callable[[EntityDescriptor, EntityPayload, bool, bool], None]

#: The refresh of a tracked entity, by merge option (None: left as it is). NO_TRACKING
#: never gets here: its results are not matched against the tracked ones.
_RULES: dict[MergeOption, _Rule | None] = {
    MergeOption.APPEND_ONLY: None,
    MergeOption.OVERWRITE_CHANGES: _overwrite_changes,
    MergeOption.PRESERVE_CHANGES: _preserve_changes,
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
    set_entity_timestamp(target, entity_timestamp(fresh))
