"""The context's layers: EntityDescriptor's state changes one by one, and the imports that keep
_tracking, _merge, _save_plan, _tracking_context and _context in that order with no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tablesdk import DynamicEntity, EntityDescriptor, EntityStates
from tablesdk._unit_of_work._tracking import IdentityMap

ROOT = Path(__file__).resolve().parents[2] / "tablesdk"


def entity(rk: str = "r", **values: object) -> DynamicEntity:
    return DynamicEntity(PartitionKey="p", RowKey=rk, **values)


def tracked(state_after: str = "unchanged") -> tuple[IdentityMap, EntityDescriptor]:
    identities = IdentityMap()
    descriptor = identities.track("Tab", entity(), '"1"')
    if state_after == "added":
        descriptor.mark_added(identities.next_order())
    return identities, descriptor


# ------------------------------------------------------------------ EntityDescriptor's state changes


def test_track_registers_an_unchanged_descriptor_under_both_keys() -> None:
    identities, descriptor = tracked()
    assert descriptor.state is EntityStates.UNCHANGED and descriptor.etag == '"1"'
    assert identities.get(descriptor.entity) is descriptor
    assert identities.by_identity[("Tab", "p", "r")] is descriptor and len(identities) == 1
    assert repr(descriptor) == "EntityDescriptor(table='Tab', PartitionKey='p', RowKey='r', state=UNCHANGED, etag='\"1\"')"


def test_changes_are_pending_in_the_order_they_were_marked() -> None:
    identities = IdentityMap()
    first, second, third = (identities.track("Tab", entity(rk), '"1"') for rk in "abc")
    third.mark_modified(identities.next_order())
    first.mark_deleted(identities.next_order())
    second.mark_upsert(True, identities.next_order())
    assert identities.pending() == [third, first, second]
    third.mark_modified(identities.next_order())  # already MODIFIED: keeps its place
    assert identities.pending() == [third, first, second]


def test_an_added_entity_stays_added_when_updated() -> None:
    _, descriptor = tracked("added")
    descriptor.mark_modified(99)
    assert descriptor.state is EntityStates.ADDED and descriptor._order != 99


def test_an_entity_marked_deleted_cannot_be_updated() -> None:
    _, descriptor = tracked()
    descriptor.mark_upsert(False, 1)
    descriptor.mark_deleted(2)
    assert descriptor.state is EntityStates.DELETED and descriptor.upsert is None
    with pytest.raises(ValueError, match="marked for deletion"):
        descriptor.mark_modified(3)


def test_a_saved_merge_adds_what_was_sent_to_what_was_known_and_a_replace_does_not() -> None:
    _, descriptor = tracked()
    descriptor.mark_read({"A": 1, "B": 2}, partial=False, untyped=frozenset())
    descriptor.mark_upsert(False, 1)
    descriptor.mark_saved({"B": 3}, merged=True, etag='"2"', timestamp="ts")
    assert descriptor.snapshot == {"A": 1, "B": 3} and descriptor.upsert is None
    assert descriptor.state is EntityStates.UNCHANGED and descriptor.etag == descriptor.entity.etag == '"2"'
    assert descriptor.entity.Timestamp == "ts"
    descriptor.mark_saved({"C": 4}, merged=False, etag=None, timestamp=None)
    assert descriptor.snapshot == {"C": 4} and descriptor.etag == '"2"'  # no ETag in the answer: kept


def test_reads_after_the_first_refresh_the_snapshot() -> None:
    _, descriptor = tracked()
    descriptor.mark_read({"A": 1, "B": 2}, partial=True, untyped=frozenset({"A"}))
    descriptor.read_in_part({"B": 5})
    assert descriptor.snapshot == {"A": 1, "B": 5} and descriptor.partial is True
    descriptor.found_untyped(frozenset({"B"}))
    assert descriptor.untyped == {"A", "B"}
    descriptor.mark_deleted(1)
    descriptor.read_in_full({"A": 7})
    assert descriptor.snapshot == {"A": 7} and descriptor.partial is True  # DELETED: not written again
    descriptor.discard_changes()
    descriptor.read_in_full({"A": 8})
    assert descriptor.state is EntityStates.UNCHANGED and descriptor.partial is False


def test_forget_detaches_and_frees_the_identity() -> None:
    identities, descriptor = tracked()
    identities.forget(descriptor)
    assert descriptor.state is EntityStates.DETACHED and len(identities) == 0 and not identities.by_identity
    identities.track("Tab", entity(), None)  # the identity can be tracked again


# ------------------------------------------------------------------ layers


def relative_imports(module: str) -> dict[str, set[str]]:
    """What ``tablesdk/<module>`` imports from the package: module (as written) -> names."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    found: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            found.setdefault("." * node.level + (node.module or ""), set()).update(a.name for a in node.names)
    return found


#: Each context module, and the context modules it may import (typing-only imports count too).
LAYERS = {
    "_unit_of_work/_tracking.py": set(),
    "_unit_of_work/_merge.py": {"._tracking"},
    "_unit_of_work/_save_plan.py": {"._tracking"},
    "_unit_of_work/_tracking_context.py": {"._tracking", "._merge", "._save_plan"},
    "_unit_of_work/_context.py": {"._tracking", "._merge", "._save_plan", "._tracking_context"},
}
CONTEXT_MODULES = {"._tracking", "._merge", "._save_plan", "._tracking_context", "._context"}


@pytest.mark.parametrize("module", sorted(LAYERS))
def test_a_context_module_imports_only_the_layers_below_it(module: str) -> None:
    imported = set(relative_imports(module)) & CONTEXT_MODULES
    assert imported <= LAYERS[module], f"{module} imports {sorted(imported - LAYERS[module])}"


def test_the_save_plan_never_imports_a_client() -> None:
    # The errors name DataServiceResponse: its module must stay importable from a low layer.
    imported = {module.rpartition(".")[2] for module in relative_imports("_unit_of_work/_save_plan.py")}
    assert not imported & {"_client", "_operations", "_flows", "_client_base", "_transport"}


def test_the_async_context_imports_only_public_names_of_the_shared_modules() -> None:
    private = sorted(
        f"{module}.{name}" for module, names in relative_imports("aio/_context.py").items()
        for name in names if name.startswith("_")
    )
    assert private == []
