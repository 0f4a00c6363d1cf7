"""tablesdk._bulk_loading._bulk: grouping, exact 4 MiB cutting, culprit isolation, retries, progress, bookkeeping.

HTTP goes to a small stateful fake of the ``$batch`` endpoint (tests/unit/bulk_fakes.py) served
through ``responses``: it parses each multipart request, applies the change set
atomically (insert refuses existing entities, merge and replace upsert), and
answers like Azurite (one inner ``204`` with an ETag per operation, or one inner
error whose message starts with the failing operation's index). Tests can make
it answer ServerBusy, refuse particular RowKeys, or fail a whole table.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import responses
from bulk_fakes import FakeBatchService
from bulk_fakes import batch_reply as _batch_reply
from bulk_fakes import inner_part as _inner
from fake_service import CONNECTION_STRING

import tablesdk._bulk_loading._bulk as bulk_module
import tablesdk._bulk_loading._bulk_plan as plan_module
from tablesdk import (
    AuthenticationError,
    CloudStorageAccount,
    CloudTableClient,
    ConflictError,
    DynamicEntity,
    EdmType,
    LinearRetry,
    NoRetry,
    ResourceNotFoundError,
    ServerBusyError,
    TableEntity,
    TableServiceError,
    TableValidationError,
)
from tablesdk._formats._batch import (
    MAX_BATCH_BYTES,
    BatchOperation,
    BatchOperationKind,
    build_batch_request,
)
from tablesdk._bulk_loading._bulk import (
    BULK_MODES,
    BulkInsertError,
    BulkMode,
    BulkResult,
    EntityOutcome,

)
from tablesdk._bulk_loading._bulk_plan import BatchSizer as _BatchSizer
from tablesdk._entities._edm import EntityPayload
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender

T = "Bulk"
FAST = LinearRetry(3, 0)  # retries without sleeping


# --------------------------------------------------------------------------- the fake $batch service (tests/unit/bulk_fakes.py)


@pytest.fixture
def service() -> Iterator[FakeBatchService]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield FakeBatchService(mock)


@pytest.fixture
def client() -> Iterator[CloudTableClient]:
    with CloudStorageAccount.parse(CONNECTION_STRING).create_cloud_table_client(retry_policy=FAST) as table_client:
        yield table_client


def entities(count: int, partitions: int = 1, **props: Any) -> list[DynamicEntity]:
    return [DynamicEntity(PartitionKey=f"p{i % partitions}", RowKey=f"r{i:05d}", N=i, **props) for i in range(count)]


def check_bookkeeping(result: BulkResult, count: int) -> None:
    assert len(result.succeeded) + len(result.failed) == count == result.total
    indexes = [o.index for o in result.succeeded] + [o.index for o in result.failed]
    assert sorted(indexes) == list(range(count))
    assert all(o.error is None and o.ok for o in result.succeeded)
    assert all(o.error is not None and not o.ok for o in result.failed)
    assert [o.index for o in result.succeeded] == sorted(o.index for o in result.succeeded)


def check_batches(service: FakeBatchService) -> None:
    for sent in service.sent:
        assert 1 <= len(sent.keys) <= 100
        assert len({pk for pk, _ in sent.keys}) == 1
        assert len(set(sent.keys)) == len(sent.keys)
        assert sent.size <= MAX_BATCH_BYTES


# --------------------------------------------------------------------------- grouping and cutting


def test_250_entities_over_3_partitions(service: FakeBatchService, client: CloudTableClient) -> None:
    data = [DynamicEntity(PartitionKey=pk, RowKey=f"{i:03d}", N=i) for pk, n in (("a", 120), ("b", 100), ("c", 30))
            for i in range(n)]
    random.Random(7).shuffle(data)
    result = client.bulk_insert(T, data)
    check_bookkeeping(result, 250)
    assert not result.failed
    check_batches(service)
    per_partition = sorted((keys[0][0], len(keys)) for keys in (s.keys for s in service.sent))
    assert per_partition == [("a", 20), ("a", 100), ("b", 100), ("c", 30)]
    assert result.batches == result.requests == 4
    assert service.keys() == {(e.PartitionKey, e.RowKey) for e in data}
    assert all(o.etag and o.entity.etag == o.etag for o in result.succeeded)


def test_large_entities_are_cut_by_real_body_size(service: FakeBatchService, client: CloudTableClient) -> None:
    # 100 entities of ~61 KB of JSON each (~6 MB) in one partition: two or more batches, none over 4 MiB.
    data = [DynamicEntity(PartitionKey="big", RowKey=f"{i:03d}", A="a" * 30_000, B="b" * 30_000) for i in range(100)]
    result = client.bulk_insert(T, data, max_workers=1)
    assert not result.failed and result.total == 100
    check_batches(service)
    sizes = [s.size for s in service.sent]
    assert len(sizes) == 2
    # Cut exactly: the first batch is full to within one entity of the limit.
    entity_part = max(sizes) // max(len(s.keys) for s in service.sent)
    assert MAX_BATCH_BYTES - entity_part < sizes[0] <= MAX_BATCH_BYTES
    assert len(service.keys()) == 100


def test_batches_close_to_the_limit_never_trip_the_builder(
    service: FakeBatchService, client: CloudTableClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Random sizes, random special-character keys: every cut batch must be accepted by build_batch_request
    # (the split-on-overflow fallback is disabled to prove it never fires).
    monkeypatch.setattr(bulk_module._Job, "run", _run_without_fallback(bulk_module._Job.run))
    rng = random.Random(3)
    data = [
        DynamicEntity(PartitionKey="p é'%", RowKey=f"{i:04d}-{'x' * rng.randrange(0, 300)}o'k%",
                      S="s" * rng.randrange(1_000, 32_000), B=bytes(rng.randrange(0, 40_000)))
        for i in range(300)
    ]
    for mode in ("insert", "merge", "replace"):
        service.sent.clear()
        service.entities.clear()
        result = client.bulk_insert(T, data, mode=mode, max_workers=4)
        assert not result.failed, result.failed[0].error
        check_batches(service)
        assert max(s.size for s in service.sent) > MAX_BATCH_BYTES - 120_000


def _run_without_fallback(run: Any) -> Any:
    def checked(self: Any, items: Any) -> Any:
        report = run(self, items)
        assert report.transactions == 1  # no split: build_batch_request accepted the cut as it was
        return report
    return checked


@pytest.mark.parametrize("payload_format", ["json", "atom"])
@pytest.mark.parametrize("mode", sorted(BULK_MODES))
def test_sizer_predicts_the_body_byte_for_byte(payload_format: str, mode: str) -> None:
    client = CloudStorageAccount.parse(CONNECTION_STRING).create_cloud_table_client(payload_format=payload_format)
    kind = BULK_MODES[mode]
    fmt = client.format
    sizer = _BatchSizer(client.table_endpoint, T, kind, fmt, client.api_version)
    rng = random.Random(11)
    alphabet = "abcXYZ09 '%&+é中😀()=,:*"
    for count in (1, 2, 9, 10, 11, 57, 99, 100):
        pk = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 20)))
        ops, predicted = [], sizer.framing
        for position in range(1, count + 1):
            rk = f"{position}-" + "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
            payload = EntityPayload({"PartitionKey": pk, "RowKey": rk, "S": "v" * rng.randrange(0, 500)},
                                    {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "S": EdmType.STRING})
            body = fmt.serialize_entity(payload)
            ops.append(BatchOperation(kind, T, pk, rk, payload, None, body=body))
            predicted += sizer.cost(pk, rk, len(body), position)
        actual, _ = build_batch_request(client.table_endpoint, ops, fmt, api_version=client.api_version)
        assert predicted == len(actual), (mode, count)
        reencoded = [BatchOperation(op.kind, op.table, op.partition_key, op.row_key, op.payload, None) for op in ops]
        plain, _ = build_batch_request(client.table_endpoint, reencoded, fmt, api_version=client.api_version)
        if payload_format == "json":  # Atom bodies carry a clock; JSON ones are deterministic
            assert len(plain) == len(actual)


def test_underestimated_size_falls_back_to_splitting(
    service: FakeBatchService, client: CloudTableClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # If the sizing were ever wrong, a batch refused by the builder is split, not failed.
    real_cost = plan_module.BatchSizer.cost
    monkeypatch.setattr(plan_module.BatchSizer, "cost", lambda self, *a: real_cost(self, *a) // 2)
    data = [DynamicEntity(PartitionKey="big", RowKey=f"{i:03d}", A="a" * 30_000, B="b" * 30_000) for i in range(100)]
    result = client.bulk_insert(T, data, max_workers=1)
    assert not result.failed and len(service.keys()) == 100
    check_batches(service)
    assert result.batches > len(service.sent) >= 2  # the refused attempt counts as a transaction, sent nothing


def test_entity_alone_over_the_limit_is_reported(
    service: FakeBatchService, client: CloudTableClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan_module, "MAX_BATCH_BYTES", 50_000)
    data = [
        DynamicEntity(PartitionKey="p", RowKey="small", S="x"),
        DynamicEntity(PartitionKey="p", RowKey="huge", S1="y" * 30_000, S2="z" * 30_000),
        DynamicEntity(PartitionKey="p", RowKey="medium", S="y" * 30_000),
    ]
    result = client.bulk_insert(T, data)
    check_bookkeeping(result, 3)
    assert [o.entity.RowKey for o in result.succeeded] == ["small", "medium"]
    assert [o.entity.RowKey for o in result.failed] == ["huge"]
    [failure] = result.failed
    assert isinstance(failure.error, TableValidationError) and "4 MiB" in str(failure.error)


# --------------------------------------------------------------------------- modes and wire


@pytest.mark.parametrize(("mode", "method"), [("insert", "POST"), ("merge", "MERGE"), ("replace", "PUT")])
def test_modes_send_the_right_operation(
    service: FakeBatchService, client: CloudTableClient, mode: BulkMode, method: str
) -> None:
    client.bulk_insert(T, entities(5), mode=mode).raise_on_error()
    [sent] = service.sent
    assert sent.methods == [method] * 5
    assert all("If-Match" not in headers for headers in sent.inner_headers)
    prefers = {headers.get("Prefer") for headers in sent.inner_headers}
    assert prefers == ({"return-no-content"} if mode == "insert" else {None})


def test_merge_and_replace_over_existing_entities(service: FakeBatchService, client: CloudTableClient) -> None:
    for row_key in ("r00000", "r00001"):
        service.entities[(T, "p0", row_key)] = {"Old": 1, "N": -1}
    client.bulk_insert(T, entities(2), mode="merge").raise_on_error()
    assert service.entities[(T, "p0", "r00000")] == {"Old": 1, "N": 0}
    client.bulk_insert(T, entities(2), mode="replace").raise_on_error()
    assert service.entities[(T, "p0", "r00001")] == {"N": 1}


def test_requests_carry_the_same_headers_as_execute_batch(service: FakeBatchService, client: CloudTableClient) -> None:
    client.bulk_insert(T, entities(1)).raise_on_error()
    payload = EntityPayload({"PartitionKey": "q", "RowKey": "1"}, {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING})
    client.execute_batch([BatchOperation(BatchOperationKind.INSERT, T, "q", "1", payload, None)])
    bulk_headers, batch_headers = (
        {k: v for k, v in s.headers.items() if k not in ("Content-Type", "Authorization", "x-ms-date",
                                                        "x-ms-client-request-id", "Content-Length")}
        for s in service.sent
    )
    assert bulk_headers == batch_headers
    assert "x-ms-version" in bulk_headers and "Accept" in bulk_headers
    assert service.sent[0].headers["Content-Type"].startswith("multipart/mixed; boundary=batch_")


def test_table_entities_and_generators(service: FakeBatchService, client: CloudTableClient) -> None:
    class Row(TableEntity):
        Text: str
        Count: int

    generated = (Row(PartitionKey=f"g{i % 3}", RowKey=str(i), Text="t", Count=i) for i in range(30))
    totals: list[int | None] = []
    result = client.bulk_insert(T, generated, progress=lambda done, total: totals.append(total))
    assert len(result.succeeded) == 30 and set(totals) == {None}
    assert service.entities[(T, "g1", "4")] == {"Text": "t", "Count": 4}


# --------------------------------------------------------------------------- failures inside a batch


def test_failing_entity_is_isolated_and_the_rest_resent(service: FakeBatchService, client: CloudTableClient) -> None:
    service.entities[(T, "p0", "r00042")] = {"N": "already there"}
    data = entities(100)
    result = client.bulk_insert(T, data)
    check_bookkeeping(result, 100)
    [culprit] = result.failed
    assert culprit.index == 42 and culprit.entity is data[42]
    assert isinstance(culprit.error, ConflictError)
    assert culprit.error.error_code == "EntityAlreadyExists" and culprit.error.status_code == 409
    assert len(result.succeeded) == 99
    assert [len(s.keys) for s in service.sent] == [100, 99]
    assert ("p0", "r00042") not in service.sent[1].keys
    assert service.entities[(T, "p0", "r00042")] == {"N": "already there"}
    assert result.batches == 2 and result.requests == 2


def test_several_culprits_cost_one_round_trip_each(service: FakeBatchService, client: CloudTableClient) -> None:
    service.poison = {
        "r00003": (400, "PropertyValueTooLarge", "The property value exceeds the maximum allowed size (64KB)."),
        "r00050": (400, "InvalidInput", "An error occurred while processing this request."),
        "r00099": (400, "InvalidInput", "An error occurred while processing this request."),
    }
    result = client.bulk_insert(T, entities(100), mode="merge")
    check_bookkeeping(result, 100)
    assert [o.entity.RowKey for o in result.failed] == ["r00003", "r00050", "r00099"]
    assert [o.error.error_code for o in result.failed] == ["PropertyValueTooLarge", "InvalidInput", "InvalidInput"]  # type: ignore[union-attr]
    assert [len(s.keys) for s in service.sent] == [100, 99, 98, 97]
    assert len(service.keys()) == 97


def test_request_wide_error_fails_the_batch_without_isolating(service: FakeBatchService, client: CloudTableClient) -> None:
    service.missing_tables = {T}
    result = client.bulk_insert(T, entities(250, partitions=3))
    check_bookkeeping(result, 250)
    assert not result.succeeded
    assert all(isinstance(o.error, ResourceNotFoundError) and o.error.error_code == "TableNotFound" for o in result.failed)
    assert len(service.sent) == 1  # the first answer ends the call: every batch would get it


def test_a_missing_table_stops_the_call_after_the_first_answer(service: FakeBatchService, client: CloudTableClient) -> None:
    service.missing_tables = {T}
    result = client.bulk_insert(T, entities(5000, partitions=50), max_workers=8)
    check_bookkeeping(result, 5000)
    assert len(result.failed) == 5000 and len(service.sent) == 1 and result.batches == 1
    assert {o.error.error_code for o in result.failed if isinstance(o.error, TableServiceError)} == {"TableNotFound"}
    with pytest.raises(BulkInsertError) as info:
        result.raise_on_error()
    assert info.value.error_code == "TableNotFound"


def test_outer_error_after_retries_fails_only_that_batch(service: FakeBatchService, client: CloudTableClient) -> None:
    service.busy = [(503, "outer")] * 4  # first attempt + 3 retries of the first batch
    result = client.bulk_insert(T, entities(200, partitions=2), max_workers=1)
    check_bookkeeping(result, 200)
    assert len(result.failed) == 100 and len(result.succeeded) == 100
    assert {o.entity.PartitionKey for o in result.failed} == {"p0"}
    assert all(isinstance(o.error, ServerBusyError) for o in result.failed)
    assert result.requests == 5 and result.batches == 2


def test_server_busy_then_success_is_retried(service: FakeBatchService, client: CloudTableClient) -> None:
    service.busy = [(503, "outer"), (503, "outer")]
    result = client.bulk_insert(T, entities(100))
    assert not result.failed and len(service.keys()) == 100
    assert result.requests == 3 and result.batches == 1


def test_busy_inside_a_202_is_retried_with_the_policy(service: FakeBatchService, client: CloudTableClient) -> None:
    service.busy = [(503, "inner"), (500, "inner")]
    result = client.bulk_insert(T, entities(100))
    assert not result.failed and len(service.keys()) == 100
    assert result.requests == 3 and result.batches == 1


def test_retry_policy_argument_wins(service: FakeBatchService, client: CloudTableClient) -> None:
    service.busy = [(503, "inner")]
    result = client.bulk_insert(T, entities(10), retry_policy=NoRetry())
    assert len(result.failed) == 10 and all(isinstance(o.error, ServerBusyError) for o in result.failed)
    assert result.requests == 1


def test_default_policy_backs_off(service: FakeBatchService, client: CloudTableClient, monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(client.transport, "_sleep", slept.append)
    service.busy = [(503, "inner"), (503, "inner")]
    from tablesdk import ExponentialRetry

    result = client.bulk_insert(T, entities(10), retry_policy=ExponentialRetry(3, 30, 3, 90))
    assert not result.failed
    assert len(slept) == 2 and slept[0] == 3.0 and 3.0 < slept[1] <= 90.0


def test_conflict_after_an_unknown_attempt_is_ambiguous(service: FakeBatchService, client: CloudTableClient) -> None:
    # The first attempt commits but its answer is lost (500): the retry conflicts with itself.
    service.ambiguous_once = True
    result = client.bulk_insert(T, entities(100))
    check_bookkeeping(result, 100)
    assert len(result.failed) == 100 and len(service.keys()) == 100
    assert all(isinstance(o.error, ConflictError) and o.error.ambiguous_retry for o in result.failed)
    assert result.requests == 2  # no one-by-one isolation of a self-conflict


def test_conflict_after_a_refused_connection_is_a_plain_conflict(
    service: FakeBatchService, client: CloudTableClient
) -> None:
    # A refused connection never reached the service: the 409 of the retry is genuine, so only
    # the entity that exists fails, unflagged, and the rest of the batch is written.
    service.entities[(T, "p0", "r00003")] = {"N": -1}
    service.refuse_once = True
    result = client.bulk_insert(T, entities(10))
    check_bookkeeping(result, 10)
    assert [o.index for o in result.failed] == [3]
    error = result.failed[0].error
    assert isinstance(error, ConflictError) and not error.ambiguous_retry
    assert len(result.succeeded) == 9 and len(service.keys()) == 10


def test_authentication_failure_reports_every_entity(service: FakeBatchService, client: CloudTableClient) -> None:
    service.busy = [(403, "outer")]
    result = client.bulk_insert(T, entities(3))
    assert len(result.failed) == 3 and all(isinstance(o.error, AuthenticationError) for o in result.failed)


# --------------------------------------------------------------------------- input problems


def test_duplicates_are_refused_after_the_first(service: FakeBatchService, client: CloudTableClient) -> None:
    data = entities(5) + [DynamicEntity(PartitionKey="p0", RowKey="r00002", N=99), DynamicEntity(PartitionKey="p0", RowKey="r00002")]
    result = client.bulk_insert(T, data, mode="replace")
    check_bookkeeping(result, 7)
    assert [o.index for o in result.failed] == [5, 6]
    for outcome in result.failed:
        assert isinstance(outcome.error, TableValidationError) and outcome.error.field == "entity"
        assert "input entity 2" in str(outcome.error)
    assert service.entities[(T, "p0", "r00002")] == {"N": 2}
    assert all(len(set(s.keys)) == len(s.keys) for s in service.sent)


def test_invalid_entities_are_reported_not_raised(service: FakeBatchService, client: CloudTableClient) -> None:
    data: list[Any] = [
        DynamicEntity(PartitionKey="p", RowKey="ok1"),
        DynamicEntity(PartitionKey="p", RowKey="bad/key"),
        DynamicEntity(PartitionKey="p", RowKey="toolong", S="x" * 40_000),
        DynamicEntity(PartitionKey=None, RowKey="nopk"),
        ["p", "a list is no entity"],
        DynamicEntity(PartitionKey="p", RowKey="badname", **{"1abc": 1}),  # type: ignore[arg-type]
        DynamicEntity(PartitionKey="p", RowKey="ok2"),
    ]
    result = client.bulk_insert(T, data)
    check_bookkeeping(result, 7)
    assert [o.entity.RowKey for o in result.succeeded] == ["ok1", "ok2"]
    errors = {o.index: o.error for o in result.failed}
    assert set(errors) == {1, 2, 3, 4, 5}
    assert isinstance(errors[1], TableValidationError) and errors[1].field == "RowKey"
    assert isinstance(errors[2], TableValidationError)
    assert isinstance(errors[3], TableValidationError) and errors[3].field == "PartitionKey"
    assert isinstance(errors[4], TypeError)
    assert isinstance(errors[5], TableValidationError) and errors[5].field == "1abc"
    assert [keys for s in service.sent for keys in s.keys] == [("p", "ok1"), ("p", "ok2")]


def test_only_invalid_input_sends_nothing(service: FakeBatchService, client: CloudTableClient) -> None:
    calls: list[tuple[int, int | None]] = []
    result = client.bulk_insert(T, [DynamicEntity(PartitionKey="a#", RowKey="x")] * 3,
                                progress=lambda done, total: calls.append((done, total)))
    assert len(result.failed) == 3 and not service.sent and result.batches == result.requests == 0
    assert calls == [(3, 3)]


def test_bad_arguments_raise_before_sending(service: FakeBatchService, client: CloudTableClient) -> None:
    with pytest.raises(ValueError, match="mode"):
        client.bulk_insert(T, entities(1), mode="upsert")  # type: ignore[arg-type]
    with pytest.raises(TableValidationError, match="table"):
        client.bulk_insert("no_such-name", entities(1))
    with pytest.raises(ValueError, match="max_workers"):
        client.bulk_insert(T, entities(1), max_workers=0)
    with pytest.raises(TypeError, match="progress"):
        client.bulk_insert(T, entities(1), progress=3)  # type: ignore[arg-type]
    assert not service.sent


def test_workers_are_capped_at_the_pool_size(service: FakeBatchService) -> None:
    small = CloudStorageAccount.parse(CONNECTION_STRING).create_cloud_table_client(pool_size=2)
    seen: set[str] = set()
    original = bulk_module._Job.send

    def spy(self: Any, items: Any, context: Any) -> Any:
        seen.add(threading.current_thread().name)
        return original(self, items, context)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bulk_module._Job, "send", spy)
        with pytest.warns(RuntimeWarning, match="pool_size=2"):
            result = small.bulk_insert(T, entities(2000, partitions=20), max_workers=8)
    assert not result.failed and 1 <= len(seen) <= 2


# --------------------------------------------------------------------------- progress and results


def test_progress_totals_on_the_calling_thread(service: FakeBatchService, client: CloudTableClient) -> None:
    calls: list[tuple[int, int | None, int]] = []
    data: list[Any] = entities(1000, partitions=7) + [DynamicEntity(PartitionKey="x", RowKey="a?b")]
    result = client.bulk_insert(
        T, data, max_workers=4, progress=lambda done, total: calls.append((done, total, threading.get_ident()))
    )
    check_bookkeeping(result, 1001)
    assert {thread for _, _, thread in calls} == {threading.get_ident()}
    assert {total for _, total, _ in calls} == {1001}
    dones = [done for done, _, _ in calls]
    assert dones == sorted(dones) and dones[-1] == 1001
    assert len(calls) == result.batches  # once per batch; the last batch's call already reports 1001


class Stop(Exception):
    pass


def test_progress_exception_propagates(service: FakeBatchService, client: CloudTableClient) -> None:
    def stop(done: int, total: int | None) -> None:
        raise Stop

    with pytest.raises(Stop):
        client.bulk_insert(T, entities(500, partitions=5), max_workers=2, progress=stop)
    assert 1 <= len(service.sent) <= 5  # in-flight batches finished; no new one was started after the error


def test_buffer_limit_sends_oldest_groups_early(
    service: FakeBatchService, client: CloudTableClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan_module, "MAX_BUFFERED_ENTITIES", 50)
    data = entities(600, partitions=20)  # round-robin over 20 partitions: groups fill slowly
    result = client.bulk_insert(T, data, max_workers=3)
    check_bookkeeping(result, 600)
    assert not result.failed and len(service.keys()) == 600
    check_batches(service)
    assert len(service.sent) > 100  # partial groups went out early (20 batches of 30 without the limit)


def test_raise_on_error(service: FakeBatchService, client: CloudTableClient) -> None:
    ok = client.bulk_insert(T, entities(3))
    assert ok.raise_on_error() is ok
    again = client.bulk_insert(T, entities(3))
    with pytest.raises(BulkInsertError) as info:
        again.raise_on_error()
    error = info.value
    assert isinstance(error, TableServiceError) and error.result is again
    assert error.status_code == 409 and error.error_code == "EntityAlreadyExists"
    assert "3 of 3 entities failed" in str(error) and "RowKey='r00000'" in str(error)
    assert "succeeded=0, failed=3" in repr(again)


def test_outcome_is_small_and_frozen() -> None:
    outcome = EntityOutcome(0, object(), "etag")
    assert outcome.ok
    with pytest.raises(AttributeError):
        outcome.etag = "x"  # type: ignore[misc]


def test_many_batches_many_workers_land_exactly_once(service: FakeBatchService, client: CloudTableClient) -> None:
    data = entities(5000, partitions=50)
    random.Random(5).shuffle(data)
    result = client.bulk_insert(T, data, max_workers=8)
    check_bookkeeping(result, 5000)
    assert not result.failed
    check_batches(service)
    sent_keys = [key for s in service.sent for key in s.keys]
    assert len(sent_keys) == len(set(sent_keys)) == 5000
    assert result.batches == len(service.sent) == 50


# --------------------------------------------------------------------------- one batch-retry decision for every caller


def test_save_changes_with_retries_retries_a_change_set_refused_busy_inside_a_202(
    service: FakeBatchService, client: CloudTableClient
) -> None:
    from tablesdk import SaveChangesOptions

    ctx = client.get_table_service_context()
    for entity in entities(3):
        ctx.add_object(T, entity)
    service.busy = [(503, "inner")]
    ctx.save_changes_with_retries(SaveChangesOptions.BATCH, FAST)
    assert len(service.sent) == 2 and len(service.keys()) == 3
    assert all(d.etag for d in ctx.entities)


def test_save_changes_does_not_retry_a_busy_change_set(service: FakeBatchService, client: CloudTableClient) -> None:
    from tablesdk import DataServiceRequestError, SaveChangesOptions

    ctx = client.get_table_service_context()
    ctx.add_object(T, entities(1)[0])
    service.busy = [(503, "inner")]
    with pytest.raises(DataServiceRequestError) as info:
        ctx.save_changes(SaveChangesOptions.BATCH)
    assert info.value.status_code == 503 and len(service.sent) == 1


def test_a_lost_batch_answer_makes_every_operation_of_the_save_ambiguous(
    service: FakeBatchService, client: CloudTableClient
) -> None:
    from tablesdk import DataServiceRequestError, SaveChangesOptions

    ctx = client.get_table_service_context()
    for entity in entities(3):
        ctx.add_object(T, entity)
    service.ambiguous_once = True  # committed, answered 500; the retry conflicts at operation 0
    with pytest.raises(DataServiceRequestError) as info:
        ctx.save_changes_with_retries(SaveChangesOptions.BATCH, FAST)
    responses_ = list(info.value.response)
    assert len(responses_) == 3
    assert all(r.error is not None and r.error.ambiguous_retry for r in responses_)


def test_bulk_error_names_the_request_id_once() -> None:
    error = ConflictError("The specified entity already exists.", status_code=409,
                          error_code="EntityAlreadyExists", request_id="req-9")
    result = BulkResult([], [EntityOutcome(0, DynamicEntity(PartitionKey="p", RowKey="r"), None, error)], 1, 1, 0.1)
    assert str(BulkInsertError(result)).count("req-9") == 1


# --------------------------------------------------------------------------- scheduling: what runs at once


class ConcurrencyProbe:
    """A MockSender handler answering every ``$batch`` with one 204 per operation; it counts
    the requests in flight at once, and :meth:`hold` lets a test keep a request waiting."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0
        self.started = 0
        self.answered = 0

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with self.lock:
            self.in_flight += 1
            self.started += 1
            number, alone_now = self.started, self.in_flight == 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            self.hold(number, alone_now)
            count = (request.body or b"").count(b"\r\nContent-ID: ")
            status, headers, body = _batch_reply(
                [_inner("204 No Content", {"Content-ID": str(n), "ETag": 'W/"1"'}) for n in range(1, count + 1)]
            )
            return MockSender.response(status, body, headers)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.answered += 1

    def hold(self, number: int, alone: bool) -> None:
        """Called inside the ``number``-th request (1-based); ``alone``: no other was in flight."""


def _mock_client(handler: ConcurrencyProbe) -> CloudTableClient:
    account = CloudStorageAccount.parse(CONNECTION_STRING)
    return account.create_cloud_table_client(sender=MockSender(handler), retry_policy=NoRetry())


def test_planning_goes_on_while_the_first_answer_is_awaited() -> None:
    planned = threading.Event()
    pulled = [0]
    first_was_alone: list[bool] = []
    read_meanwhile: list[bool] = []

    class HoldFirst(ConcurrencyProbe):
        def hold(self, number: int, alone: bool) -> None:
            if number == 1:  # the first request waits until later batches were planned
                read_meanwhile.append(planned.wait(timeout=10))
                first_was_alone.append(alone and self.started == 1)

    def source() -> Iterator[DynamicEntity]:
        for i in range(1000):  # ten partitions one after another: a batch is planned every 100 entities
            entity = DynamicEntity(PartitionKey=f"p{i // 100}", RowKey=f"r{i:05d}", N=i)
            pulled[0] += 1
            if pulled[0] == 500:  # read while the first batch is out
                planned.set()
            yield entity

    result = _mock_client(HoldFirst()).bulk_insert(T, source(), max_workers=8)
    assert read_meanwhile == first_was_alone == [True]  # entities were read meanwhile, nothing else sent
    assert not result.failed and result.batches == 10


def test_as_many_batches_are_in_flight_as_workers() -> None:
    workers = 8
    together = threading.Barrier(workers, timeout=10)

    class Gather(ConcurrencyProbe):
        def hold(self, number: int, alone: bool) -> None:
            if 2 <= number <= workers + 1:  # after the first answer: passes only with `workers` waiting at once
                with contextlib.suppress(threading.BrokenBarrierError):
                    together.wait()

    probe = Gather()
    result = _mock_client(probe).bulk_insert(T, entities(5000, partitions=50), max_workers=workers)
    assert not result.failed and result.batches == 50
    assert probe.most_in_flight == workers and not together.broken
