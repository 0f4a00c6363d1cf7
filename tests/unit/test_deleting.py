"""What a refused delete batch means (BulkBatch with the delete kind, no I/O) and what each delete sends."""

from __future__ import annotations

import pytest

from tablesdk import (
    BatchError,
    ConnectionFailedError,
    DynamicEntity,
    PreconditionFailedError,
    ResourceNotFoundError,
)
from tablesdk._bulk_loading._bulk import DELETE, BulkBatch, BulkKind
from tablesdk._bulk_loading._bulk_plan import BulkItem
from tablesdk._bulk_loading._deleting import page_deletes
from tablesdk._entities._edm import EdmType, EntityPayload
from tablesdk._pipeline._transport import OperationContext


def chunk(n: int) -> list[BulkItem]:
    payloads = [
        EntityPayload({"PartitionKey": "p", "RowKey": f"r{i}"}, {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING},
                      etag=f'W/"{i}"')
        for i in range(n)
    ]
    return list(page_deletes(payloads, 10))[0]


def refused(index: int | None, cause: Exception, ambiguous: bool = False) -> BatchError:
    error = BatchError("refused", failed_index=index, status_code=getattr(cause, "status_code", None),
                       cause=cause)  # type: ignore[arg-type]
    error.ambiguous_retry = ambiguous
    return error


def send(items: list[BulkItem], outcome: Exception | None) -> BulkBatch:
    batch = BulkBatch("tbl", BulkKind(DELETE), items)
    operations = batch.next_operations()
    assert operations is not None and len(operations) == len(items)
    batch.settle(outcome if outcome is not None else [], OperationContext())
    return batch


def test_every_entity_of_an_accepted_batch_is_deleted() -> None:
    batch = BulkBatch("tbl", BulkKind(DELETE), chunk(3))
    assert batch.next_operations() is not None
    batch.fail(batch.chunk, None)
    assert [(index, error) for index, _e, _t, error in batch.outcomes] == [(10, None), (11, None), (12, None)]


@pytest.mark.parametrize("ambiguous", [False, True])
def test_an_entity_already_gone_counts_as_deleted_and_the_rest_is_sent_again(ambiguous: bool) -> None:
    items = chunk(3)
    gone = ResourceNotFoundError("gone", status_code=404, error_code="ResourceNotFound")
    batch = send(items, refused(1, gone, ambiguous))  # gone is gone, after a retry too
    assert batch.pending == [[items[0], items[2]]]
    assert [(index, error) for index, _e, _t, error in batch.outcomes] == [(11, None)]


def test_an_entity_changed_since_the_scan_fails_alone() -> None:
    items = chunk(3)
    changed = PreconditionFailedError("changed", status_code=412, error_code="UpdateConditionNotSatisfied")
    batch = send(items, refused(2, changed))
    assert batch.pending == [items[:2]]
    assert [(index, error) for index, _e, _t, error in batch.outcomes] == [(12, changed)]


@pytest.mark.parametrize("error", [
    refused(0, ResourceNotFoundError("no table", status_code=404, error_code="TableNotFound")),
    refused(None, PreconditionFailedError("who", status_code=412)),
    ConnectionFailedError("down"),
])
def test_errors_no_entity_is_to_blame_for_fail_the_whole_batch(error: Exception) -> None:
    batch = send(chunk(2), error)
    assert batch.pending == []
    assert [index for index, *_ in batch.outcomes] == [10, 11] and all(o[3] is not None for o in batch.outcomes)


def test_deletes_are_unconditional_unless_asked() -> None:
    items = chunk(2)
    assert [op.etag for op in BulkKind(DELETE).operations("tbl", items)] == ["*", "*"]
    assert [op.etag for op in BulkKind(DELETE, conditional=True).operations("tbl", items)] == ['W/"0"', 'W/"1"']
    assert {op.kind for op in BulkKind(DELETE).operations("tbl", items)} == {DELETE}
    assert all(isinstance(item.entity, DynamicEntity) for item in items)
