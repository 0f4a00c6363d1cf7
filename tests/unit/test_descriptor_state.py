"""An entity descriptor's state is read-only: only its own ``mark_*`` methods move it.

The save plan and the merge rules read ``state`` and rely on it matching the descriptor's place in
the identity map's pending changes; an assignment from outside would break that silently.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

from tablesdk import CloudStorageAccount, EntityStates, MergeOption, TableEntity, TableServiceContext
from tablesdk._unit_of_work._tracking import EntityDescriptor

from fake_service import CONNECTION_STRING, FakeTableService

T = "Blogs"


class Blog(TableEntity):
    Text: str


@pytest.fixture
def ctx() -> Iterator[TableServiceContext]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        FakeTableService(mock)
        with CloudStorageAccount.parse(CONNECTION_STRING).create_cloud_table_client() as client:
            yield client.get_table_service_context()


def test_state_cannot_be_assigned_on_a_tracked_or_queried_descriptor(ctx: TableServiceContext) -> None:
    added = Blog(PartitionKey="p", RowKey="a", Text="x")
    ctx.add_object(T, added)
    descriptor = ctx.get_entity_descriptor(added)
    assert descriptor is not None and descriptor.state is EntityStates.ADDED
    with pytest.raises(AttributeError):
        descriptor.state = EntityStates.UNCHANGED  # type: ignore[misc]
    ctx.save_changes()
    ctx.merge_option = MergeOption.OVERWRITE_CHANGES
    (queried,) = ctx.create_query(T, Blog)  # made by the page path (_read_unchanged), not __init__
    queried_descriptor = ctx.get_entity_descriptor(queried)
    assert queried_descriptor is not None and queried_descriptor.state is EntityStates.UNCHANGED
    with pytest.raises(AttributeError):
        queried_descriptor.state = EntityStates.DELETED  # type: ignore[misc]
    assert queried_descriptor.state is EntityStates.UNCHANGED


def test_the_mark_methods_move_it() -> None:
    descriptor = EntityDescriptor(Blog(PartitionKey="p", RowKey="r", Text="x"), T, None, EntityStates.DETACHED)
    with pytest.raises(AttributeError):
        descriptor.state = EntityStates.ADDED  # type: ignore[misc]
    descriptor.mark_added(1)
    assert descriptor.state is EntityStates.ADDED
    descriptor.mark_detached()
    assert descriptor.state is EntityStates.DETACHED
