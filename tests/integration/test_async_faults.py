"""Retries, timeouts, ambiguous writes and cancellation of ``tablesdk.aio`` against Azurite
behind the fault-injecting proxy (tests/faults.py).

As in test_fault_tolerance.py, each test talks to Azurite through a
:class:`faults.FaultProxy` and checks the outcome with a direct sync client, so
"nothing lost, nothing doubled" is read from the service itself, and nothing is
ordered by the clock: the client's timeout is a generous failure detector, the
proxy decides each attempt's fault before it is sent
(:class:`faults.AsyncFaultSender` gives only the attempts a delay fault holds a
short read timeout), and the cancellation tests cancel when the proxy signals it
holds the request.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from fault_support import ALL_FAULTS, IMPATIENCE, TIMEOUT, entity, fast_policy, inject, insert_op, stored
from faults import AMBIGUOUS_FAULTS, DELAY_FAULTS, AsyncFaultSender, Fault, FaultProxy

from tablesdk import (
    BatchError,
    CloudStorageAccount,
    CloudTableClient,
    ConflictError,
    ConnectionFailedError,
    DataServiceRequestError,
    EntityStates,
    LinearRetry,
    NoRetry,
    OperationContext,
    RequestTimeoutError,
    ResourceNotFoundError,
    SaveChangesOptions,
    ServerBusyError,
    TableServiceError,
    prop,
)
from tablesdk.aio import AiohttpSender, AsyncCloudTableClient
from tablesdk._pipeline._http import AttemptState
from tablesdk._pipeline._retry import RetryPolicy

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

SIGNAL_BOUND = 30.0  # how long a test waits for a proxy signal before calling the proxy stuck

# direct, fault_table_name and proxy are this folder's conftest.py's; the settings and helpers
# both fault modules share are in fault_support.py.


def proxied(
    proxy: FaultProxy, connection_string: str, policy: RetryPolicy, *,
    impatience: float | None = IMPATIENCE, **options: Any,
) -> AsyncCloudTableClient:
    """A client behind ``proxy`` whose sender asks the proxy first (``impatience=None``: the
    attempts a delay fault holds keep the client's own timeout)."""
    account = CloudStorageAccount.parse(proxy.connection_string(connection_string))
    options.setdefault("timeout", TIMEOUT)
    sender = AsyncFaultSender(AiohttpSender(), proxy, impatience=impatience)
    return account.create_async_cloud_table_client(retry_policy=policy, sender=sender, **options)


async def signalled(event: threading.Event) -> None:
    """Wait, off the event loop, for a signal the proxy sets."""
    assert await asyncio.to_thread(event.wait, SIGNAL_BOUND), "the proxy never signalled"


@pytest_asyncio.fixture
async def faulty(proxy: FaultProxy, azurite_connection_string: str) -> AsyncIterator[AsyncCloudTableClient]:
    async with proxied(proxy, azurite_connection_string, fast_policy()) as client:
        yield client


def actions(proxy: FaultProxy) -> list[str]:
    events = proxy.events
    # The client closed each connection it gave up on: no late answer is ever read.
    assert all(e.client_gave_up for e in events if e.action in {f.value for f in DELAY_FAULTS})
    return [e.action for e in events]


# ------------------------------------------------------------------ survival


@pytest.mark.parametrize("fault", ALL_FAULTS, ids=lambda f: f.value)
async def test_insert_survives_two_faults(
    fault: Fault, proxy: FaultProxy, faulty: AsyncCloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    inject(proxy, fault, 2, method="POST", path=rf"/{fault_table_name}$")
    row = entity("p", "r1", 1)
    if fault in AMBIGUOUS_FAULTS:
        with pytest.raises(ConflictError) as info:
            await faulty.insert_entity(fault_table_name, row)
        assert info.value.ambiguous_retry is True and info.value.error_code == "EntityAlreadyExists"
    else:
        assert await faulty.insert_entity(fault_table_name, row) == row.etag
    assert actions(proxy) == [fault.value] * 2 + ["forward"]
    assert len({e.client_request_id for e in proxy.events}) == 1  # one operation, three attempts
    assert stored(direct, fault_table_name)["p", "r1"]["Tx"] == row["Tx"]


@pytest.mark.parametrize("fault", ALL_FAULTS, ids=lambda f: f.value)
async def test_query_pages_survive_two_faults(
    fault: Fault, proxy: FaultProxy, faulty: AsyncCloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    for i in range(5):
        direct.insert_entity(fault_table_name, entity("p", f"r{i}", i))
    inject(proxy, fault, 2, method="GET", path=rf"/{fault_table_name}\(\)")
    rows = [e.RowKey async for e in faulty.create_query(fault_table_name).where(prop("N") >= 0).page_size(3)]
    assert rows == [f"r{i}" for i in range(5)]
    assert actions(proxy) == [fault.value] * 2 + ["forward", "forward"]


@pytest.mark.parametrize("fault", ALL_FAULTS, ids=lambda f: f.value)
async def test_batch_survives_two_faults(
    fault: Fault, proxy: FaultProxy, faulty: AsyncCloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    rows = [entity("p", f"r{i}", i) for i in range(3)]
    ops = [insert_op(fault_table_name, r) for r in rows]
    inject(proxy, fault, 2, method="POST", path=r"/\$batch$")
    if fault in AMBIGUOUS_FAULTS:
        with pytest.raises(BatchError) as info:
            await faulty.execute_batch(ops)
        assert info.value.status_code == 409 and info.value.ambiguous_retry is True
    else:
        assert [r.status for r in await faulty.execute_batch(ops)] == [204, 204, 204]
    assert actions(proxy) == [fault.value] * 2 + ["forward"]
    found = stored(direct, fault_table_name)
    assert sorted(found) == [("p", f"r{i}") for i in range(3)]
    assert all(found["p", r.RowKey]["Tx"] == r["Tx"] for r in rows)


@pytest.mark.parametrize("fault", ALL_FAULTS, ids=lambda f: f.value)
async def test_save_changes_with_retries_survives_two_faults(
    fault: Fault, proxy: FaultProxy, faulty: AsyncCloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    ctx = faulty.get_table_service_context()
    first, second = entity("p", "a", 1), entity("p", "b", 2)
    ctx.add_object(fault_table_name, first)
    ctx.add_object(fault_table_name, second)
    inject(proxy, fault, 2, method="POST", path=rf"/{fault_table_name}$")
    if fault in AMBIGUOUS_FAULTS:
        with pytest.raises(DataServiceRequestError) as info:
            await ctx.save_changes_with_retries(SaveChangesOptions.CONTINUE_ON_ERROR)
        error = info.value.response[0].error
        assert isinstance(error, ConflictError) and error.ambiguous_retry is True
        assert ctx.get_entity_descriptor(first).state is EntityStates.ADDED  # still pending
    else:
        outcome = await ctx.save_changes_with_retries(SaveChangesOptions.CONTINUE_ON_ERROR)
        assert [r.status_code for r in outcome] == [204, 204]
        assert ctx.get_entity_descriptor(first).state is EntityStates.UNCHANGED
    assert ctx.get_entity_descriptor(second).state is EntityStates.UNCHANGED
    assert actions(proxy) == [fault.value] * 2 + ["forward", "forward"]
    found = stored(direct, fault_table_name)
    assert (found["p", "a"]["Tx"], found["p", "b"]["Tx"]) == (first["Tx"], second["Tx"])


async def test_batch_whose_attempt_after_two_internal_errors_answers_late_is_ambiguous(
    proxy: FaultProxy, faulty: AsyncCloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    """What a busy machine did to test_batch_survives_two_faults[internal_error] when the read
    timeout was 0.5 s: the third attempt reached Azurite but answered after the read timeout.
    Two 500s and a timeout leave the outcome unknown, the policy allows a fourth attempt, and
    the 409 it meets inside the 202 is flagged as the retry's own doing. Not a flake: pinned."""
    rows = [entity("p", f"r{i}", i) for i in range(3)]
    ops = [insert_op(fault_table_name, r) for r in rows]
    inject(proxy, Fault.INTERNAL_ERROR, 2, method="POST", path=r"/\$batch$")
    inject(proxy, Fault.DELAY_BEFORE_ANSWER, 1, method="POST", path=r"/\$batch$")
    with pytest.raises(BatchError) as info:
        await faulty.execute_batch(ops)
    assert info.value.status_code == 409 and info.value.ambiguous_retry is True
    assert actions(proxy) == ["internal_error"] * 2 + ["delay_before_answer", "forward"]
    assert [e.upstream_status for e in proxy.events] == [None, None, 202, 202]
    found = stored(direct, fault_table_name)
    assert all(found["p", r.RowKey]["Tx"] == r["Tx"] for r in rows)


async def test_bulk_insert_survives_server_busy(
    proxy: FaultProxy, faulty: AsyncCloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    inject(proxy, Fault.SERVER_BUSY, 3, method="POST", path=r"/\$batch$")
    rows = [entity(f"p{i % 4}", f"{i:04d}", i) for i in range(400)]
    result = await faulty.bulk_insert(fault_table_name, rows, max_concurrency=4)
    assert not result.failed and result.requests == result.batches + 3
    assert len(stored(direct, fault_table_name)) == 400


# ------------------------------------------------------------------ errors without retries


@pytest.mark.parametrize(
    ("fault", "expected", "status"),
    [
        (Fault.SERVER_BUSY, ServerBusyError, 503),
        (Fault.INTERNAL_ERROR, TableServiceError, 500),
        (Fault.DELAY_BEFORE_FORWARD, RequestTimeoutError, None),
        (Fault.DELAY_BEFORE_ANSWER, RequestTimeoutError, None),
        (Fault.RESET, ConnectionFailedError, None),
        (Fault.FORWARD_THEN_RESET, ConnectionFailedError, None),
        (Fault.TRUNCATE, ConnectionFailedError, None),
    ],
    ids=lambda v: v.value if isinstance(v, Fault) else None,
)
async def test_no_retry_raises_the_fault(
    fault: Fault, expected: type[TableServiceError], status: int | None,
    proxy: FaultProxy, azurite_connection_string: str, direct: CloudTableClient, fault_table_name: str,
) -> None:
    async with proxied(proxy, azurite_connection_string, NoRetry()) as client:
        inject(proxy, fault, 1, method="POST")
        with pytest.raises(TableServiceError) as info:
            await client.insert_entity(fault_table_name, entity("p", "r", 1))
    error = info.value
    assert type(error) is expected
    assert (error.status_code, error.ambiguous_retry) == (status, False)
    assert error.client_request_id == proxy.events[0].client_request_id
    assert proxy.count() == 1
    assert list(stored(direct, fault_table_name)) == ([("p", "r")] if fault in AMBIGUOUS_FAULTS else [])


async def test_a_refused_connection_is_never_sent_and_says_so(unique_table_name: str, azurite_connection_string: str) -> None:
    with FaultProxy("http://127.0.0.1:9/devstoreaccount1") as dead:
        endpoint = dead.endpoint
    account = CloudStorageAccount.parse(
        azurite_connection_string.replace(azurite_connection_string.split("TableEndpoint=")[1].split(";")[0], endpoint)
    )
    op = OperationContext()
    async with account.create_async_cloud_table_client(retry_policy=LinearRetry(1, 0.01)) as client:
        with pytest.raises(ConnectionFailedError):
            await client.insert_entity(unique_table_name, entity("p", "r"), operation_context=op)
    assert [a.state for a in op.attempts] == [AttemptState.NOT_SENT] * 2


async def test_retried_delete_whose_answer_was_lost_is_ambiguous(
    proxy: FaultProxy, faulty: AsyncCloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    direct.insert_entity(fault_table_name, entity("p", "gone"))
    inject(proxy, Fault.FORWARD_THEN_RESET, 1, method="DELETE")
    with pytest.raises(ResourceNotFoundError) as info:
        await faulty.delete_entity(fault_table_name, partition_key="p", row_key="gone", etag="*")
    assert info.value.ambiguous_retry is True
    assert [(e.action, e.upstream_status) for e in proxy.events] == [("forward_then_reset", 204), ("forward", 404)]


async def test_retried_read_is_never_flagged(
    proxy: FaultProxy, faulty: AsyncCloudTableClient, fault_table_name: str
) -> None:
    inject(proxy, Fault.FORWARD_THEN_RESET, 1, method="GET")
    with pytest.raises(ResourceNotFoundError) as info:
        await faulty.get_entity(fault_table_name, "p", "missing")
    assert info.value.ambiguous_retry is False and proxy.count() == 2


# ------------------------------------------------------------------ timeouts, deadline, operation context


async def test_operation_deadline_caps_a_long_retry_sequence(
    proxy: FaultProxy, azurite_connection_string: str, fault_table_name: str
) -> None:
    op = OperationContext()
    async with proxied(proxy, azurite_connection_string, LinearRetry(1000, 0.05), operation_deadline=1.0) as client:
        inject(proxy, Fault.SERVER_BUSY, 1000, method="POST")
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError) as info:
            await client.insert_entity(fault_table_name, entity("p", "r"), operation_context=op)
        elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 5.0, elapsed  # 1000 retries would take 50 s
    attempts = len(op.attempts)
    assert f"deadline of 1.0 s exceeded after {attempts} attempt" in str(info.value)
    assert proxy.count(Fault.SERVER_BUSY) == attempts < 1000
    # The cause is the last attempt's error: its 503, unless the deadline cut that attempt short.
    last = op.attempts[-1]
    assert isinstance(info.value.__cause__, ServerBusyError if last.status == 503 else RequestTimeoutError)


async def test_client_timeout_applies_to_each_attempt(
    proxy: FaultProxy, azurite_connection_string: str, fault_table_name: str
) -> None:
    async with proxied(
        proxy, azurite_connection_string, LinearRetry(2, 0.01), impatience=None, timeout=(2.0, 0.3)
    ) as client:
        inject(proxy, Fault.DELAY_BEFORE_FORWARD, 3, method="GET")
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            await client.query_entity_payloads(fault_table_name)
        elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 10.0, elapsed  # the proxy holds each attempt for up to 30 s: the client ended them
    assert proxy.count(Fault.DELAY_BEFORE_FORWARD) == 3
    assert all(e.client_gave_up and not e.forwarded for e in proxy.events)


async def test_operation_context_records_failures_then_success(
    proxy: FaultProxy, faulty: AsyncCloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    inject(proxy, Fault.SERVER_BUSY, 1, method="POST")
    inject(proxy, Fault.RESET, 1, method="POST")
    op = OperationContext()
    row = entity("p", "r", 1)
    await faulty.insert_entity(fault_table_name, row, operation_context=op)
    attempts = op.attempts
    assert [a.status for a in attempts] == [503, None, 204]
    assert [a.state for a in attempts] == [AttemptState.UNKNOWN, AttemptState.UNKNOWN, AttemptState.ANSWERED]
    assert "ConnectionResetError" in (attempts[1].error or "") or "Disconnected" in (attempts[1].error or "")
    assert len({a.client_request_id for a in attempts}) == 1
    assert attempts[0].retry_delay == pytest.approx(0.01) and attempts[2].retry_delay is None
    assert op.request_ids == [proxy.events[0].request_id, proxy.events[2].request_id]


# ------------------------------------------------------------------ cancellation


@pytest_asyncio.fixture
async def patient(proxy: FaultProxy, azurite_connection_string: str) -> AsyncIterator[AsyncCloudTableClient]:
    """A client that waits out a held attempt (until the test cancels it)."""
    async with proxied(proxy, azurite_connection_string, fast_policy(), impatience=None) as client:
        yield client


async def test_a_cancelled_save_leaves_unknown_changes_pending(
    proxy: FaultProxy, patient: AsyncCloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    ctx = patient.get_table_service_context()
    rows = [entity("p", f"r{i}", i) for i in range(3)]
    for row in rows:
        ctx.add_object(fault_table_name, row)
    # The first insert reaches Azurite; its answer is held until we cancel.
    held = inject(proxy, Fault.DELAY_BEFORE_ANSWER, 1, method="POST", path=rf"/{fault_table_name}$")
    saving = asyncio.ensure_future(ctx.save_changes())
    await signalled(held.forwarded)
    saving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await saving
    states = [ctx.get_entity_descriptor(r).state for r in rows]
    assert states == [EntityStates.ADDED] * 3  # the first was the one held: its outcome is unknown
    # The context is usable again and a new save completes the work (the held insert
    # reached Azurite, so the retry of row 0 conflicts with itself: read it back).
    proxy.clear()
    with pytest.raises(DataServiceRequestError) as info:
        await ctx.save_changes(SaveChangesOptions.CONTINUE_ON_ERROR)
    outcome = info.value.response
    assert isinstance(outcome[0].error, ConflictError)
    assert [r.succeeded for r in outcome[1:]] == [True, True]
    assert direct.get_entity(fault_table_name, "p", "r0")["Tx"] == rows[0]["Tx"]


async def test_a_cancelled_save_keeps_the_changes_that_were_applied(
    proxy: FaultProxy, patient: AsyncCloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    ctx = patient.get_table_service_context()
    rows = [entity("p", f"r{i}", i) for i in range(3)]
    for row in rows:
        ctx.add_object(fault_table_name, row)
    await ctx.save_changes()
    assert all(ctx.get_entity_descriptor(r).state is EntityStates.UNCHANGED for r in rows)
    rows[1]["N"] = 10
    ctx.update_object(rows[1])
    rows[2]["N"] = 20
    ctx.update_object(rows[2])
    held = inject(proxy, Fault.DELAY_BEFORE_FORWARD, 1, method="MERGE", path=r"r2(%27|')\)")
    saving = asyncio.ensure_future(ctx.save_changes())
    await signalled(held.received)  # row 1's merge was answered; row 2's is held, not forwarded
    saving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await saving
    assert ctx.get_entity_descriptor(rows[1]).state is EntityStates.UNCHANGED  # applied before the cancel
    assert ctx.get_entity_descriptor(rows[2]).state is EntityStates.MODIFIED  # never forwarded: pending
    assert direct.get_entity(fault_table_name, "p", "r2")["N"] == 2
    proxy.clear()
    await ctx.save_changes()
    assert direct.get_entity(fault_table_name, "p", "r2")["N"] == 20
