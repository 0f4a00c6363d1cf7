"""The table object's actions refuse what is not an action, before anything is sent.

``CloudTable.execute`` takes a :class:`TableOperation` and ``execute_batch`` a
:class:`TableBatchOperation` (sync and async); given anything else they raise a
TypeError that names what was given and what is expected. A retrieve refuses an
entity type it cannot make when it is built; an insert of something that is not an
entity names its type; ``TableBatchOperation.extend`` adds all or nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from tablesdk import (
    CloudStorageAccount,
    DynamicEntity,
    MergeOption,
    NoRetry,
    TableBatchOperation,
    TableEntity,
    TableOperation,
    TableValidationError,
)
from tablesdk._formats._batch import BatchOperation, BatchOperationKind
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender, Timeout

CONNECTION = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;TableEndpoint=http://127.0.0.1:1/devstoreaccount1"


class Note(TableEntity):
    Text: str


def _entity(pk: str = "p", rk: str = "r") -> DynamicEntity:
    return DynamicEntity(PartitionKey=pk, RowKey=rk, N=1)


def _refusing_sender(sent: list[HttpRequest]) -> MockSender:
    def handler(request: HttpRequest) -> HttpResponse:
        sent.append(request)
        return MockSender.response(403)

    return MockSender(handler)


#: (what is given to execute, a word the message must hold besides the given type's name)
NOT_AN_OPERATION: list[tuple[Any, str]] = [
    ({"PartitionKey": "p", "RowKey": "r"}, "TableOperation.insert"),
    (_entity(), "TableOperation.insert"),
    (Note(PartitionKey="p", RowKey="r", Text="t"), "TableOperation.insert"),
    (None, "TableOperation"),
    ([TableOperation.insert(_entity())], "execute_batch"),
    (TableBatchOperation([TableOperation.insert(_entity())]), "execute_batch"),
    (BatchOperation(BatchOperationKind.INSERT, "Notes", "p", "r", None, None), "execute_operation"),
    ("insert", "TableOperation"),
]

#: (what is given to execute_batch, a word the message must hold besides the given type's name)
NOT_A_BATCH: list[tuple[Any, str]] = [
    ([TableOperation.insert(_entity())], "TableBatchOperation(operations)"),
    ((TableOperation.insert(_entity()),), "TableBatchOperation(operations)"),
    (TableOperation.insert(_entity()), "execute("),
    ({"PartitionKey": "p", "RowKey": "r"}, "TableBatchOperation"),
    (_entity(), "TableBatchOperation"),
    (None, "TableBatchOperation"),
    ([BatchOperation(BatchOperationKind.INSERT, "Notes", "p", "r", None, None)], "client.execute_batch"),
]


def _type_name(value: Any) -> str:
    return "None" if value is None else type(value).__name__


#: (method, the action class it takes, what is given, a word the message must hold besides the given type's name)
REFUSED = [("execute", "TableOperation", given, hint) for given, hint in NOT_AN_OPERATION] + [
    ("execute_batch", "TableBatchOperation", given, hint) for given, hint in NOT_A_BATCH
]


@pytest.mark.parametrize(("method", "expected", "given", "hint"), REFUSED,
                         ids=lambda v: _type_name(v) if not isinstance(v, str) else v)
def test_execute_and_execute_batch_refuse_what_is_not_their_action(
    method: str, expected: str, given: Any, hint: str
) -> None:
    sent: list[HttpRequest] = []
    table = CloudStorageAccount.parse(CONNECTION).create_cloud_table_client(
        sender=_refusing_sender(sent), retry_policy=NoRetry()).get_table_reference("Notes")
    with pytest.raises(TypeError) as info:
        getattr(table, method)(given)
    text = str(info.value)
    assert f"CloudTable.{method} takes a {expected}" in text and _type_name(given) in text, text
    assert hint in text, text
    assert not sent


class _AsyncSender:
    def __init__(self) -> None:
        self.sent: list[HttpRequest] = []

    async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        self.sent.append(request)
        return MockSender.response(403)

    async def close(self) -> None:
        pass


@pytest.mark.parametrize("method", ["execute", "execute_batch"])
def test_the_async_table_refuses_them_too(method: str) -> None:
    pytest.importorskip("aiohttp")
    cases = NOT_AN_OPERATION if method == "execute" else NOT_A_BATCH

    async def run() -> list[str]:
        sender = _AsyncSender()
        client = CloudStorageAccount.parse(CONNECTION).create_async_cloud_table_client(sender=sender, retry_policy=NoRetry())
        table = client.get_table_reference("Notes")
        texts = []
        try:
            for given, hint in cases:
                with pytest.raises(TypeError) as info:
                    await getattr(table, method)(given)
                texts.append(str(info.value))
                assert hint in texts[-1] and _type_name(given) in texts[-1], texts[-1]
        finally:
            await client.close()
        assert not sender.sent
        return texts

    texts = asyncio.run(run())
    assert all(f"AsyncCloudTable.{method}" in text for text in texts), texts


# ------------------------------------------------------------------------------ retrieve's entity type


@dataclass
class NotAnEntity:
    name: str


@pytest.mark.parametrize("entity_type", [int, str, 42, "DynamicEntity", None, NotAnEntity, _entity()],
                         ids=repr)
def test_a_retrieve_refuses_an_entity_type_it_cannot_make_when_built(entity_type: Any) -> None:
    with pytest.raises(TypeError, match="TableOperation.retrieve"):
        TableOperation.retrieve("p", "r", entity_type)
    batch: TableBatchOperation[Any] = TableBatchOperation()
    with pytest.raises(TypeError, match="TableOperation.retrieve"):
        batch.retrieve("p", "r", entity_type)
    assert len(batch) == 0


def test_a_retrieve_of_an_unmakeable_type_sends_nothing() -> None:
    sent: list[HttpRequest] = []
    table = CloudStorageAccount.parse(CONNECTION).create_cloud_table_client(
        sender=_refusing_sender(sent), retry_policy=NoRetry()).get_table_reference("Notes")
    with pytest.raises(TypeError):
        table.execute(TableOperation.retrieve("p", "r", int))
    assert not sent


@pytest.mark.parametrize("entity_type", [DynamicEntity, Note, dict])
def test_a_retrieve_takes_every_entity_class(entity_type: type) -> None:
    assert TableOperation.retrieve("p", "r", entity_type).entity_type is entity_type


# ------------------------------------------------------------------------------ what an insert is given


@pytest.mark.parametrize("given", ["text", 42, [1, 2], b"bytes", None])
@pytest.mark.parametrize("factory", ["insert", "replace", "merge", "delete", "insert_or_replace", "insert_or_merge"])
def test_an_action_on_something_that_is_not_an_entity_names_its_type(given: Any, factory: str) -> None:
    with pytest.raises(TypeError) as info:
        getattr(TableOperation, factory)(given)
    text = str(info.value)
    assert f"TableOperation.{factory}" in text and type(given).__name__ in text, text
    if given is not None:
        assert "NoneType" not in text, text


# ------------------------------------------------------------------------------ extend is all or nothing


def test_extend_adds_nothing_when_one_operation_is_refused() -> None:
    batch: TableBatchOperation[DynamicEntity] = TableBatchOperation([TableOperation.insert(_entity(rk="a"))])
    cases: list[list[Any]] = [
        [TableOperation.insert(_entity(rk="b")), TableOperation.insert(_entity(pk="other", rk="c"))],
        [TableOperation.insert(_entity(rk="b")), TableOperation.insert(_entity(rk="a"))],
        [TableOperation.insert(_entity(rk="b")), TableOperation.insert(_entity(rk="b"))],
        [TableOperation.insert(_entity(rk="b")), TableOperation.retrieve("p", "z")],
        [TableOperation.insert(_entity(rk="b")), "not an operation"],
        [TableOperation.insert(_entity(rk=f"k{n:03d}")) for n in range(100)],
    ]
    for operations in cases:
        with pytest.raises((TableValidationError, TypeError)):
            batch.extend(operations)
        assert [op.row_key for op in batch] == ["a"], operations
    batch.extend([TableOperation.insert(_entity(rk="b")), TableOperation.insert(_entity(rk="c"))])
    assert [op.row_key for op in batch] == ["a", "b", "c"]
    batch.insert(_entity(rk="d"))  # the batch's own rules still hold what extend added
    with pytest.raises(TableValidationError, match="once"):
        batch.insert(_entity(rk="b"))


def test_extend_and_the_constructor_name_a_single_operation_given_for_many() -> None:
    operation = TableOperation.insert(_entity())
    with pytest.raises(TypeError, match=r"iterable of TableOperations.*add\(operation\)"):
        TableBatchOperation().extend(operation)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"iterable of TableOperations"):
        TableBatchOperation(operation)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ MergeOption's promise


def test_merge_option_does_not_call_preserve_changes_a_recovery_after_a_412() -> None:
    doc = " ".join((MergeOption.__doc__ or "").split())
    assert "recovery path after a 412" not in doc
    assert "No change is lost" not in doc
    assert "client wins" in doc and "OVERWRITE_CHANGES" in doc and "concurrency.md" in doc, doc
