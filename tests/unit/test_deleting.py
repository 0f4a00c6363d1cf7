"""What a refused delete batch means (settle_deletes, no I/O) and what each delete sends."""

from __future__ import annotations

import pytest

from tablesdk import (
    BatchError,
    ConnectionFailedError,
    DynamicEntity,
    PreconditionFailedError,
    ResourceNotFoundError,
)
from tablesdk._bulk import EntityOutcome
from tablesdk._deleting import DeleteJob, settle_deletes


def chunk(n: int) -> list[tuple[int, DynamicEntity]]:
    items = []
    for i in range(n):
        entity = DynamicEntity(PartitionKey="p", RowKey=f"r{i}")
        entity.etag = f'W/"{i}"'
        items.append((10 + i, entity))
    return items


def refused(index: int | None, cause: Exception) -> BatchError:
    return BatchError("refused", failed_index=index, status_code=getattr(cause, "status_code", None),
                      cause=cause)  # type: ignore[arg-type]


def test_every_entity_of_an_accepted_batch_is_deleted() -> None:
    outcomes: list[EntityOutcome] = []
    assert settle_deletes(chunk(3), None, outcomes) == []
    assert [(o.index, o.ok) for o in outcomes] == [(10, True), (11, True), (12, True)]


def test_an_entity_already_gone_counts_as_deleted_and_the_rest_is_sent_again() -> None:
    items, outcomes = chunk(3), []
    gone = ResourceNotFoundError("gone", status_code=404, error_code="ResourceNotFound")
    rest = settle_deletes(items, refused(1, gone), outcomes)
    assert rest == [items[0], items[2]]
    assert [(o.index, o.ok) for o in outcomes] == [(11, True)]


def test_an_entity_changed_since_the_scan_fails_alone() -> None:
    items, outcomes = chunk(3), []
    changed = PreconditionFailedError("changed", status_code=412, error_code="UpdateConditionNotSatisfied")
    rest = settle_deletes(items, refused(2, changed), outcomes)
    assert rest == items[:2]
    assert [(o.index, o.error) for o in outcomes] == [(12, changed)]


@pytest.mark.parametrize("error", [
    refused(0, ResourceNotFoundError("no table", status_code=404, error_code="TableNotFound")),
    refused(None, PreconditionFailedError("who", status_code=412)),
    ConnectionFailedError("down"),
])
def test_errors_no_entity_is_to_blame_for_fail_the_whole_batch(error: Exception) -> None:
    items, outcomes = chunk(2), []
    assert settle_deletes(items, error, outcomes) == []
    assert [o.index for o in outcomes] == [10, 11] and all(not o.ok for o in outcomes)


def test_deletes_are_unconditional_unless_asked() -> None:
    items = chunk(2)
    assert [op.etag for op in DeleteJob("tbl", False, None).operations(items)] == ["*", "*"]
    assert [op.etag for op in DeleteJob("tbl", True, None).operations(items)] == ['W/"0"', 'W/"1"']
