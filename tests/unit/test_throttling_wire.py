"""Throttling on the wire: the fault proxy answers 429, 503 and 500 with each header form in
front of the bundled emulator; the sync and async clients wait what the server asked.

The clients' sleep is replaced by a recorder (the transport's seam), so no test waits for real
seconds; the waits asked for are what is asserted.
"""

from __future__ import annotations

import asyncio
import email.utils
from collections.abc import Iterator

import pytest
from faults import Fault, FaultProxy

import tablesdk._pipeline._retry as retry_module
from tablesdk import (
    CloudStorageAccount,
    LinearRetry,
    OperationContext,
    RequestTimeoutError,
    RetryDecision,
    ServerBusyError,
    TableServiceError,
)
from tablesdk.aio import AsyncCloudTableClient

NOW = 1_900_000_000.0  # the wall clock an HTTP-date Retry-After is read against

CASES = [
    pytest.param(Fault.TOO_MANY_REQUESTS, {"x-ms-retry-after-ms": "1000"}, 1.0, id="429-x-ms-retry-after-ms"),
    pytest.param(Fault.TOO_MANY_REQUESTS, {"Retry-After": "2"}, 2.0, id="429-retry-after-seconds"),
    pytest.param(Fault.SERVER_BUSY, {"Retry-After": "2"}, 2.0, id="503-retry-after-seconds"),
    pytest.param(Fault.SERVER_BUSY, {"retry-after-ms": "1500"}, 1.5, id="503-retry-after-ms"),
    pytest.param(
        Fault.SERVER_BUSY, {"Retry-After": email.utils.formatdate(NOW + 4, usegmt=True)}, 4.0, id="503-http-date"
    ),
    pytest.param(Fault.INTERNAL_ERROR, {"x-ms-retry-after-ms": "750"}, 0.75, id="500-x-ms-retry-after-ms"),
    pytest.param(Fault.INTERNAL_ERROR, {"Retry-After": "3"}, 3.0, id="500-retry-after-seconds"),
]
POLICY_WAIT = 0.01  # far below every ask: the waits recorded are the server's


@pytest.fixture
def proxy(devstore_connection_string: str) -> Iterator[FaultProxy]:
    endpoint = CloudStorageAccount.parse(devstore_connection_string).table_endpoint
    with FaultProxy(endpoint, lifetime=120.0) as p:
        yield p


@pytest.fixture(autouse=True)
def fixed_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry_module, "_wall_clock", lambda: NOW, raising=False)


def account(proxy: FaultProxy, connection_string: str) -> CloudStorageAccount:
    return CloudStorageAccount.parse(proxy.connection_string(connection_string))


@pytest.mark.parametrize(("fault", "headers", "wait"), CASES)
def test_sync_client_waits_what_the_server_asked(
    proxy: FaultProxy, devstore_connection_string: str, fault: Fault, headers: dict[str, str], wait: float
) -> None:
    proxy.inject(fault, times=2, method="GET", headers=headers)
    with account(proxy, devstore_connection_string).create_cloud_table_client(
        retry_policy=LinearRetry(3, POLICY_WAIT)
    ) as client:
        slept: list[float] = []
        client.transport._sleep = slept.append  # type: ignore[attr-defined]
        op = OperationContext()
        seen: list[tuple[int | None, str | None]] = []
        op.response_received.append(lambda e: seen.append((e.status, e.headers.get(next(iter(headers))))))
        assert client.table_exists("nothrottle", operation_context=op) is False
    assert slept == [pytest.approx(wait)] * 2
    status = {Fault.TOO_MANY_REQUESTS: 429, Fault.SERVER_BUSY: 503, Fault.INTERNAL_ERROR: 500}[fault]
    assert seen[:2] == [(status, next(iter(headers.values())))] * 2 and seen[2][0] == 404
    assert [a.server_delay for a in op.attempts] == [pytest.approx(wait)] * 2 + [None]
    assert proxy.count(fault) == 2 and proxy.count("forward") == 1


@pytest.mark.parametrize(("fault", "headers", "wait"), CASES)
def test_async_client_waits_what_the_server_asked(
    proxy: FaultProxy, devstore_connection_string: str, fault: Fault, headers: dict[str, str], wait: float
) -> None:
    proxy.inject(fault, times=2, method="GET", headers=headers)
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    op = OperationContext()
    decisions: list[RetryDecision] = []
    op.retrying.append(decisions.append)

    async def run() -> bool:
        async with account(proxy, devstore_connection_string).create_async_cloud_table_client(
            retry_policy=LinearRetry(3, POLICY_WAIT)
        ) as client:
            assert isinstance(client, AsyncCloudTableClient)
            client.transport._sleep = record  # type: ignore[attr-defined]
            return await client.table_exists("nothrottle", operation_context=op)

    assert asyncio.run(run()) is False
    assert slept == [pytest.approx(wait)] * 2
    assert [(d.retry, d.server_delay, d.policy_delay) for d in decisions] == [
        (True, pytest.approx(wait), POLICY_WAIT)
    ] * 2 + [(False, None, None)]  # the 404 that table_exists reads as False: not retried
    assert proxy.count(fault) == 2 and proxy.count("forward") == 1


def test_throttled_past_the_deadline_ends_with_the_deadline_error(
    proxy: FaultProxy, devstore_connection_string: str
) -> None:
    proxy.inject(Fault.TOO_MANY_REQUESTS, times=1, method="GET", headers={"x-ms-retry-after-ms": "60000"})
    with account(proxy, devstore_connection_string).create_cloud_table_client(
        retry_policy=LinearRetry(3, POLICY_WAIT), operation_deadline=20
    ) as client:
        slept: list[float] = []
        client.transport._sleep = slept.append  # type: ignore[attr-defined]
        op = OperationContext()
        decisions: list[RetryDecision] = []
        op.retrying.append(decisions.append)
        with pytest.raises(RequestTimeoutError) as info:
            client.table_exists("nothrottle", operation_context=op)
    assert slept == []
    assert "the server asked to wait 60 s" in str(info.value)
    assert isinstance(info.value.__cause__, ServerBusyError) and info.value.__cause__.status_code == 429
    (decision,) = decisions
    left = 20 - op.attempts[0].elapsed  # the deadline counts from the operation's start
    assert decision.deadline_exceeded and decision.server_delay == 60.0
    assert decision.delay == pytest.approx(min(60.0, left), abs=0.05)


def test_the_final_error_carries_the_answers_headers(proxy: FaultProxy, devstore_connection_string: str) -> None:
    proxy.inject(Fault.TOO_MANY_REQUESTS, times=1, method="GET", headers={"x-ms-retry-after-ms": "5"})
    with account(proxy, devstore_connection_string).create_cloud_table_client(
        retry_policy=LinearRetry(0, 0)
    ) as client:
        with pytest.raises(TableServiceError) as info:
            client.table_exists("nothrottle")
    error = info.value
    assert isinstance(error, ServerBusyError) and error.status_code == 429 and error.error_code == "TooManyRequests"
    assert error.headers["X-MS-Retry-After-Ms"] == "5"
    assert error.headers["x-ms-request-id"] == error.request_id
