"""Retries, timeouts and ambiguous writes against Azurite behind the fault-injecting proxy.

Every test talks to Azurite through :class:`faults.FaultProxy` with a client
whose TableEndpoint is the proxy, and checks the outcome through a direct
(unproxied) client, so "nothing lost, nothing doubled" is read from the
service itself. The retry policy is fast, ExponentialRetry(3, 0.05 s, 0.01 s ..
0.2 s), and nothing here is ordered by the clock: the client's timeout is a
generous (10 s, 30 s), a failure detector only; the proxy decides each attempt's
fault before it is sent (:class:`faults.FaultSender`), so the attempts a delay
fault holds, and only those, are sent with a 0.3 s read timeout, and a delay
fault holds its request until the client gives up. A clean attempt therefore
never times out however busy the machine, and a read timeout followed by one
more attempt, what a slow answer costs, is pinned by tests that ask for it.

The faults fall in two groups. Those after which the request never reached
Azurite (503, 500, a reset before forwarding, a delay before forwarding) are
simply retried away. Those after which it did (the answer was delayed past the
client timeout, reset, or cut in half: :data:`faults.AMBIGUOUS_FAULTS`) are
retried away for reads and idempotent writes; an insert retried that way
conflicts with itself, and the SDK must say so with ``ambiguous_retry`` (the
Azure Storage team's "Network errors and timeouts on successful server side operations").
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fault_support import ALL_FAULTS, IMPATIENCE, TIMEOUT, entity, fast_policy, inject, insert_op, stored
from faults import AMBIGUOUS_FAULTS, DELAY_FAULTS, Fault, FaultProxy, FaultSender

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
from tablesdk import RequestsSender
from tablesdk._pipeline._retry import RetryPolicy

pytestmark = pytest.mark.integration

SAFE_FAULTS = [f for f in Fault if f not in AMBIGUOUS_FAULTS]


# ------------------------------------------------------------------ fixtures

# direct, fault_table_name and proxy are this folder's conftest.py's; the settings and helpers
# both fault modules share are in fault_support.py.


def proxied_client(
    proxy: FaultProxy, connection_string: str, policy: RetryPolicy, *,
    impatience: float | None = IMPATIENCE, **options: object,
) -> CloudTableClient:
    """A client behind ``proxy`` whose sender asks the proxy first (``impatience=None``: the
    attempts a delay fault holds keep the client's own timeout)."""
    account = CloudStorageAccount.parse(proxy.connection_string(connection_string))
    options.setdefault("timeout", TIMEOUT)
    sender = FaultSender(RequestsSender(), proxy, impatience=impatience)
    return account.create_cloud_table_client(retry_policy=policy, sender=sender, **options)


@pytest.fixture
def faulty(proxy: FaultProxy, azurite_connection_string: str) -> Iterator[CloudTableClient]:
    """A client behind the proxy with a fast ExponentialRetry and a short client timeout."""
    with proxied_client(proxy, azurite_connection_string, fast_policy()) as client:
        yield client


# ------------------------------------------------------------------ helpers


def entity_set_path(table: str) -> str:
    return rf"/{table}$"


def assert_faults_seen(proxy: FaultProxy, fault: Fault, times: int, then: int = 1) -> None:
    """The proxy applied ``fault`` ``times`` times, and then forwarded ``then`` clean requests."""
    events = proxy.events
    actions = [e.action for e in events]
    assert actions == [fault.value] * times + ["forward"] * then, actions
    if fault in DELAY_FAULTS:  # the client closed each connection it gave up on: no late answer is read
        assert all(e.client_gave_up for e in events[:times])


# ------------------------------------------------------------------ survival: each operation, each fault


@pytest.mark.parametrize("fault", ALL_FAULTS, ids=lambda f: f.value)
def test_insert_survives_two_faults(
    fault: Fault, proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    inject(proxy, fault, 2, method="POST", path=entity_set_path(fault_table_name))
    row = entity("p", "r1", 1)
    if fault in AMBIGUOUS_FAULTS:
        # The first attempt was applied; its answer was lost; the last retry conflicts with it.
        with pytest.raises(ConflictError) as info:
            faulty.insert_entity(fault_table_name, row)
        assert info.value.ambiguous_retry is True
        assert info.value.error_code == "EntityAlreadyExists"
        assert "may have succeeded" in str(info.value)
        assert [e.upstream_status for e in proxy.events] == [204, 409, 409]
    else:
        etag = faulty.insert_entity(fault_table_name, row)
        assert etag and row.etag == etag
    assert_faults_seen(proxy, fault, 2)
    assert len({e.client_request_id for e in proxy.events}) == 1  # one operation, three attempts
    rows = stored(direct, fault_table_name)
    assert list(rows) == [("p", "r1")]
    assert rows["p", "r1"]["Tx"] == row["Tx"]  # it is our write: the ambiguity resolves to "done"


@pytest.mark.parametrize("fault", ALL_FAULTS, ids=lambda f: f.value)
def test_query_page_survives_two_faults(
    fault: Fault, proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    for i in range(5):
        direct.insert_entity(fault_table_name, entity("p", f"r{i}", i))
    inject(proxy, fault, 2, method="GET", path=rf"/{fault_table_name}\(\)")
    first, token = faulty.query_entity_payloads(fault_table_name, top=3, filter=(prop("N") >= 0).render())
    assert token is not None
    assert_faults_seen(proxy, fault, 2)
    rest, end = faulty.query_entity_payloads(
        fault_table_name, top=3, filter=(prop("N") >= 0).render(), continuation_token=token
    )
    assert end is None
    keys = [p.values["RowKey"] for p in first + rest]
    assert keys == [f"r{i}" for i in range(5)]


@pytest.mark.parametrize("fault", ALL_FAULTS, ids=lambda f: f.value)
def test_batch_survives_two_faults(
    fault: Fault, proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    rows = [entity("p", f"r{i}", i) for i in range(3)]
    inject(proxy, fault, 2, method="POST", path=r"/\$batch$")
    operations = [insert_op(fault_table_name, r) for r in rows]
    if fault in AMBIGUOUS_FAULTS:
        # The refusal arrives inside a 202: the client, not the transport, must flag it.
        with pytest.raises(BatchError) as info:
            faulty.execute_batch(operations)
        assert info.value.status_code == 409 and info.value.failed_index == 0
        assert info.value.ambiguous_retry is True
        assert info.value.cause is not None and info.value.cause.ambiguous_retry is True
    else:
        results = faulty.execute_batch(operations)
        assert [r.status for r in results] == [204, 204, 204]
    assert_faults_seen(proxy, fault, 2)
    found = stored(direct, fault_table_name)
    assert sorted(found) == [("p", f"r{i}") for i in range(3)]
    assert all(found["p", r.RowKey]["Tx"] == r["Tx"] for r in rows)


@pytest.mark.parametrize("fault", ALL_FAULTS, ids=lambda f: f.value)
def test_save_changes_with_retries_survives_two_faults(
    fault: Fault, proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    ctx = faulty.get_table_service_context()
    first, second = entity("p", "a", 1), entity("p", "b", 2)
    ctx.add_object(fault_table_name, first)
    ctx.add_object(fault_table_name, second)
    inject(proxy, fault, 2, method="POST", path=entity_set_path(fault_table_name))  # both hit the first insert
    if fault in AMBIGUOUS_FAULTS:
        with pytest.raises(DataServiceRequestError) as info:
            ctx.save_changes_with_retries(SaveChangesOptions.CONTINUE_ON_ERROR)
        outcome = info.value.response
        error = outcome[0].error
        assert isinstance(error, ConflictError) and error.ambiguous_retry is True
        assert outcome[1].error is None and outcome[1].status_code == 204
        # What the Azure Storage team advises: read the entity back and compare the transaction id.
        assert direct.get_entity(fault_table_name, "p", "a")["Tx"] == first["Tx"]
        assert ctx.get_entity_descriptor(first).state is EntityStates.ADDED  # still pending here
        ctx.detach(first)
    else:
        outcome = ctx.save_changes_with_retries(SaveChangesOptions.CONTINUE_ON_ERROR)
        assert [r.status_code for r in outcome] == [204, 204]
        assert ctx.get_entity_descriptor(first).state is EntityStates.UNCHANGED
    assert ctx.get_entity_descriptor(second).state is EntityStates.UNCHANGED
    assert_faults_seen(proxy, fault, 2, then=2)
    found = stored(direct, fault_table_name)
    assert sorted(found) == [("p", "a"), ("p", "b")]
    assert (found["p", "a"]["Tx"], found["p", "b"]["Tx"]) == (first["Tx"], second["Tx"])


@pytest.mark.parametrize("fault", ALL_FAULTS, ids=lambda f: f.value)
def test_idempotent_upsert_survives_every_fault(
    fault: Fault, proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    """Insert-or-replace repeats harmlessly: no ambiguity to report whatever happened."""
    row = entity("p", "u", 7)
    inject(proxy, fault, 2, method="PUT")
    faulty.upsert_entity(fault_table_name, row, mode="replace")
    assert_faults_seen(proxy, fault, 2)
    assert direct.get_entity(fault_table_name, "p", "u")["Tx"] == row["Tx"]


# ------------------------------------------------------------------ a slow answer: one more attempt
#
# What a busy machine did to the survival tests above when the client's read timeout was 0.5 s:
# the clean attempt after the two faults reached Azurite but answered after the read timeout.
# That is no flake of the SDK: the attempt's outcome is unknown, the policy (3 retries) allows
# one more, and a write that meets its own earlier work is reported as ambiguous. Pinned here
# by asking for it: a DELAY_BEFORE_ANSWER on the third attempt.


def test_insert_whose_attempt_after_two_resets_answers_late_is_retried_once_more(
    proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    inject(proxy, Fault.FORWARD_THEN_RESET, 2, method="POST", path=entity_set_path(fault_table_name))
    inject(proxy, Fault.DELAY_BEFORE_ANSWER, 1, method="POST", path=entity_set_path(fault_table_name))
    row = entity("p", "r1", 1)
    with pytest.raises(ConflictError) as info:
        faulty.insert_entity(fault_table_name, row)
    assert info.value.ambiguous_retry is True and info.value.error_code == "EntityAlreadyExists"
    events = proxy.events
    assert [e.action for e in events] == ["forward_then_reset"] * 2 + ["delay_before_answer", "forward"]
    assert [e.upstream_status for e in events] == [204, 409, 409, 409]
    assert events[2].client_gave_up and len({e.client_request_id for e in events}) == 1
    assert direct.get_entity(fault_table_name, "p", "r1")["Tx"] == row["Tx"]


def test_batch_whose_attempt_after_two_internal_errors_answers_late_is_ambiguous(
    proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    """Two 500s leave the outcome unknown (the service may have applied the batch before
    failing), so the 409 the fourth attempt meets is flagged as the retry's own doing; here
    the third attempt did apply it."""
    rows = [entity("p", f"r{i}", i) for i in range(3)]
    inject(proxy, Fault.INTERNAL_ERROR, 2, method="POST", path=r"/\$batch$")
    inject(proxy, Fault.DELAY_BEFORE_ANSWER, 1, method="POST", path=r"/\$batch$")
    with pytest.raises(BatchError) as info:
        faulty.execute_batch([insert_op(fault_table_name, r) for r in rows])
    assert info.value.status_code == 409 and info.value.failed_index == 0
    assert info.value.ambiguous_retry is True
    events = proxy.events
    assert [e.action for e in events] == ["internal_error"] * 2 + ["delay_before_answer", "forward"]
    assert [e.upstream_status for e in events] == [None, None, 202, 202]  # the refusal is inside the 202
    found = stored(direct, fault_table_name)
    assert all(found["p", r.RowKey]["Tx"] == r["Tx"] for r in rows)


def test_save_changes_whose_attempt_after_two_delays_answers_late_is_retried_once_more(
    proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    ctx = faulty.get_table_service_context()
    first, second = entity("p", "a", 1), entity("p", "b", 2)
    ctx.add_object(fault_table_name, first)
    ctx.add_object(fault_table_name, second)
    inject(proxy, Fault.DELAY_BEFORE_ANSWER, 3, method="POST", path=entity_set_path(fault_table_name))
    with pytest.raises(DataServiceRequestError) as info:
        ctx.save_changes_with_retries(SaveChangesOptions.CONTINUE_ON_ERROR)
    outcome = info.value.response
    assert isinstance(outcome[0].error, ConflictError) and outcome[0].error.ambiguous_retry is True
    assert outcome[1].error is None and outcome[1].status_code == 204
    assert_faults_seen(proxy, Fault.DELAY_BEFORE_ANSWER, 3, then=2)
    assert [e.upstream_status for e in proxy.events] == [204, 409, 409, 409, 204]
    assert direct.get_entity(fault_table_name, "p", "a")["Tx"] == first["Tx"]


# ------------------------------------------------------------------ without retries: the right exception


@pytest.mark.parametrize(
    ("fault", "expected", "status", "code"),
    [
        (Fault.SERVER_BUSY, ServerBusyError, 503, "ServerBusy"),
        (Fault.INTERNAL_ERROR, TableServiceError, 500, "InternalError"),
        (Fault.DELAY_BEFORE_FORWARD, RequestTimeoutError, None, None),
        (Fault.DELAY_BEFORE_ANSWER, RequestTimeoutError, None, None),
        (Fault.RESET, ConnectionFailedError, None, None),
        (Fault.FORWARD_THEN_RESET, ConnectionFailedError, None, None),
        (Fault.TRUNCATE, ConnectionFailedError, None, None),
    ],
    ids=lambda v: v.value if isinstance(v, Fault) else None,
)
def test_no_retry_raises_the_fault(
    fault: Fault, expected: type[TableServiceError], status: int | None, code: str | None,
    proxy: FaultProxy, azurite_connection_string: str, direct: CloudTableClient, fault_table_name: str,
) -> None:
    with proxied_client(proxy, azurite_connection_string, NoRetry()) as client:
        inject(proxy, fault, 1, method="POST")
        row = entity("p", "r", 1)
        with pytest.raises(TableServiceError) as info:
            client.insert_entity(fault_table_name, row)
    error = info.value
    assert type(error) is expected
    assert (error.status_code, error.error_code, error.ambiguous_retry) == (status, code, False)
    assert error.client_request_id == proxy.events[0].client_request_id
    if status is not None:
        assert error.request_id == proxy.events[0].request_id  # the proxy's ServerBusy/InternalError id
    assert proxy.count() == 1
    # The client cannot tell, but the proxy knows whether the insert reached Azurite.
    assert list(stored(direct, fault_table_name)) == ([("p", "r")] if fault in AMBIGUOUS_FAULTS else [])


# ------------------------------------------------------------------ ambiguous retries


def test_insert_whose_response_was_lost_reports_ambiguous_conflict(
    proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    inject(proxy, Fault.FORWARD_THEN_RESET, 1, method="POST")
    row = entity("p", "r", 1)
    with pytest.raises(ConflictError) as info:
        faulty.insert_entity(fault_table_name, row)
    assert info.value.ambiguous_retry is True and info.value.status_code == 409
    assert [(e.action, e.upstream_status) for e in proxy.events] == [("forward_then_reset", 204), ("forward", 409)]
    assert direct.get_entity(fault_table_name, "p", "r")["Tx"] == row["Tx"]


def test_save_changes_with_retries_reports_ambiguous_insert(
    proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    ctx = faulty.get_table_service_context()
    row = entity("p", "r", 1)
    ctx.add_object(fault_table_name, row)
    inject(proxy, Fault.FORWARD_THEN_RESET, 1, method="POST")
    with pytest.raises(DataServiceRequestError) as info:
        ctx.save_changes_with_retries()
    assert info.value.status_code == 409
    error = info.value.response[0].error
    assert isinstance(error, ConflictError) and error.ambiguous_retry is True
    assert direct.get_entity(fault_table_name, "p", "r")["Tx"] == row["Tx"]


def test_delete_whose_response_was_lost_reports_ambiguous_not_found(
    proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    direct.insert_entity(fault_table_name, entity("p", "gone"))
    inject(proxy, Fault.FORWARD_THEN_RESET, 1, method="DELETE")
    with pytest.raises(ResourceNotFoundError) as info:
        faulty.delete_entity(fault_table_name, partition_key="p", row_key="gone", etag="*")
    assert info.value.ambiguous_retry is True and info.value.status_code == 404
    assert [(e.action, e.upstream_status) for e in proxy.events] == [("forward_then_reset", 204), ("forward", 404)]
    assert stored(direct, fault_table_name) == {}


def test_save_changes_with_retries_reports_ambiguous_delete(
    proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    direct.insert_entity(fault_table_name, entity("p", "gone"))
    ctx = faulty.get_table_service_context()
    tracked = ctx.get(fault_table_name, "p", "gone")
    assert tracked is not None
    ctx.delete_object(tracked)
    inject(proxy, Fault.TRUNCATE, 1, method="DELETE")
    with pytest.raises(DataServiceRequestError) as info:
        ctx.save_changes_with_retries()
    error = info.value.response[0].error
    assert isinstance(error, ResourceNotFoundError) and error.ambiguous_retry is True
    assert stored(direct, fault_table_name) == {}


def test_genuine_conflict_is_not_ambiguous(
    proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    direct.insert_entity(fault_table_name, entity("p", "r"))
    with pytest.raises(ConflictError) as info:
        faulty.insert_entity(fault_table_name, entity("p", "r"))
    assert info.value.ambiguous_retry is False
    assert "may have succeeded" not in str(info.value)
    assert proxy.count() == 1


def test_retried_read_is_never_flagged(
    proxy: FaultProxy, faulty: CloudTableClient, fault_table_name: str
) -> None:
    inject(proxy, Fault.FORWARD_THEN_RESET, 1, method="GET")
    with pytest.raises(ResourceNotFoundError) as info:
        faulty.get_entity(fault_table_name, "p", "missing")
    assert info.value.ambiguous_retry is False
    assert proxy.count() == 2


# ------------------------------------------------------------------ timeouts and the operation deadline


def test_operation_deadline_caps_a_long_retry_sequence(
    proxy: FaultProxy, azurite_connection_string: str, fault_table_name: str
) -> None:
    policy = LinearRetry(count=1000, interval_seconds=0.05)
    op = OperationContext()
    with proxied_client(proxy, azurite_connection_string, policy, operation_deadline=1.0) as client:
        inject(proxy, Fault.SERVER_BUSY, 1000, method="POST")
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError) as info:
            client.insert_entity(fault_table_name, entity("p", "r"), operation_context=op)
        elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 5.0, elapsed  # 1000 retries would take 50 s
    attempts = len(op.attempts)
    assert f"deadline of 1.0 s exceeded after {attempts} attempt" in str(info.value)
    assert proxy.count(Fault.SERVER_BUSY) == attempts < 1000
    # The cause is the last attempt's error: its 503, unless the deadline cut that attempt short
    # (on a busy machine the proxy's answer can take longer than the time the deadline left).
    last = op.attempts[-1]
    assert isinstance(info.value.__cause__, ServerBusyError if last.status == 503 else RequestTimeoutError)
    assert all(a.status == 503 for a in op.attempts[:-1])


def test_operation_deadline_caps_a_slow_attempt(
    proxy: FaultProxy, azurite_connection_string: str, direct: CloudTableClient, fault_table_name: str
) -> None:
    # A 30 s read timeout would let one attempt hang for 30 s; the deadline cuts it to 1 s.
    with proxied_client(
        proxy, azurite_connection_string, fast_policy(), impatience=None, timeout=(2.0, 30.0),
        operation_deadline=1.0,
    ) as client:
        inject(proxy, Fault.DELAY_BEFORE_FORWARD, 5)
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            client.insert_entity(fault_table_name, entity("p", "r"))
        elapsed = time.monotonic() - started
    assert 0.8 <= elapsed < 10.0, elapsed  # uncapped, the attempt would wait for the 30 s hold
    assert proxy.count(Fault.DELAY_BEFORE_FORWARD) == 1 and proxy.events[0].client_gave_up
    assert stored(direct, fault_table_name) == {}


def test_client_timeout_applies_to_each_attempt(
    proxy: FaultProxy, azurite_connection_string: str, fault_table_name: str
) -> None:
    """Without a deadline an operation may take (retries + 1) x the timeout: the retry article's 90 * (N+1)."""
    with proxied_client(
        proxy, azurite_connection_string, LinearRetry(2, 0.01), impatience=None, timeout=(2.0, 0.3)
    ) as client:
        inject(proxy, Fault.DELAY_BEFORE_FORWARD, 3, method="GET")
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            client.query_entity_payloads(fault_table_name)
        elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 10.0, elapsed  # the proxy holds each attempt for up to 30 s: the client ended them
    assert proxy.count(Fault.DELAY_BEFORE_FORWARD) == 3
    assert all(e.client_gave_up and not e.forwarded for e in proxy.events)


# ------------------------------------------------------------------ OperationContext


def test_operation_context_records_failures_then_success(
    proxy: FaultProxy, faulty: CloudTableClient, direct: CloudTableClient, fault_table_name: str
) -> None:
    inject(proxy, Fault.SERVER_BUSY, 1, method="POST")
    inject(proxy, Fault.INTERNAL_ERROR, 1, method="POST")
    inject(proxy, Fault.RESET, 1, method="POST")
    op = OperationContext()
    row = entity("p", "r", 1)
    result = faulty.execute_operation(insert_op(fault_table_name, row), operation_context=op)
    assert result.status == 204
    events = proxy.events
    attempts = op.attempts
    assert [a.attempt for a in attempts] == [1, 2, 3, 4]
    assert [a.status for a in attempts] == [503, 500, None, 204]
    assert [a.error_code for a in attempts] == ["ServerBusy", "InternalError", None, None]
    assert [a.request_id for a in attempts] == [events[0].request_id, events[1].request_id, None, events[3].request_id]
    assert op.request_ids == [events[0].request_id, events[1].request_id, events[3].request_id]
    assert all(a.request_id for a in (attempts[0], attempts[1], attempts[3]))
    # One client request id for the whole operation, sent on every attempt.
    assert len({a.client_request_id for a in attempts}) == 1
    assert [e.client_request_id for e in events] == [attempts[0].client_request_id] * 4
    # The waits are ExponentialRetry(3, 0.05, 0.01, 0.2)'s: min, then min + (2**(n-1) - 1) * delta +/- 20 %.
    d1, d2, d3 = (a.retry_delay for a in attempts[:3])
    assert d1 == pytest.approx(0.01)
    assert d2 is not None and 0.01 + 0.04 <= d2 <= 0.01 + 0.06
    assert d3 is not None and 0.01 + 3 * 0.04 <= d3 <= 0.01 + 3 * 0.06
    assert attempts[3].retry_delay is None and attempts[3].error is None
    assert all(a.error for a in attempts[:3])
    assert "ConnectionResetError" in (attempts[2].error or "")
    for before, after in zip(attempts, attempts[1:]):
        assert before.start <= before.end
        assert before.end + (before.retry_delay or 0) <= after.start + 0.005
    assert all(a.url.endswith(f"/{fault_table_name}") and a.method == "POST" for a in attempts)
    assert op.last_attempt is attempts[3]
    assert direct.get_entity(fault_table_name, "p", "r")["Tx"] == row["Tx"]
