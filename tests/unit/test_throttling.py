"""Throttling: server-given waits (Retry-After, x-ms-retry-after-ms), 429, the error's headers
and the OperationContext hooks, on the retry loop with a fake clock (no real waits)."""

from __future__ import annotations

import asyncio
import email.utils
from collections.abc import Callable
from typing import Any

import pytest

import tablesdk._pipeline._retry as retry_module
from tablesdk import (
    CloudStorageAccount,
    ExponentialRetry,
    LinearRetry,
    MockSender,
    NoRetry,
    OperationContext,
    RequestTimeoutError,
    ServerBusyError,
    TableServiceError,
    is_retryable,
    server_delay,
)
from tablesdk._core._errors import error_for_status
from tablesdk._pipeline._http import HttpRequest, HttpResponse
from tablesdk._pipeline._settings import RequestSettings
from tablesdk._pipeline._transport import ResponseReceived, RetryDecision, Transport
from tablesdk.aio._transport import AsyncTransport

URL = "http://acct.table.example/Blogs"
BUSY = '{"odata.error": {"code": "ServerBusy", "message": {"value": "busy"}}}'


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


def parse_error(response: HttpResponse) -> TableServiceError:
    return error_for_status(response.status, response.headers.get("x-ms-error-code"), "error")


def answers(*replies: tuple[int, dict[str, str]]) -> MockSender:
    """A sender answering each request with the next (status, headers); 200 after them."""
    queue = list(replies)

    def handler(request: HttpRequest) -> HttpResponse:
        if not queue:
            return MockSender.response(200, "{}", {"Content-Type": "application/json"})
        status, headers = queue.pop(0)
        return MockSender.response(status, BUSY, {"x-ms-error-code": "ServerBusy", **headers})

    return MockSender(handler)


def transport(fake: FakeTime, sender: MockSender) -> Transport:
    return Transport(None, error_parser=parse_error, sender=sender, sleep=fake.sleep, clock=fake.clock)


def settings(policy: Any = None, deadline: float | None = None) -> RequestSettings:
    return RequestSettings(retry_policy=policy or LinearRetry(3, 0.5), deadline=deadline)


# ------------------------------------------------------------------ reading the server's ask


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (503, {"Retry-After": "2"}, 2.0),
        (429, {"x-ms-retry-after-ms": "1000"}, 1.0),
        (500, {"retry-after-ms": "250"}, 0.25),
        (429, {"Retry-After": "1.5"}, 1.5),
        (503, {"x-ms-retry-after-ms": "1500", "Retry-After": "9"}, 1.5),  # milliseconds first
        (429, {"RETRY-AFTER": "3"}, 3.0),  # any case
        (503, {"Retry-After": "soon"}, None),
        (503, {"Retry-After": "-4"}, None),
        (503, {"x-ms-retry-after-ms": "nan", "Retry-After": "2"}, 2.0),  # an invalid one is skipped
        (503, {"Retry-After": "86400"}, retry_module.MAX_SERVER_DELAY_SECONDS),
        (404, {"Retry-After": "2"}, None),  # only 429, 500 and 503 are read
        (502, {"Retry-After": "2"}, None),
        (503, {}, None),
    ],
)
def test_server_delay_reads_each_header_form(status: int, headers: dict[str, str], expected: float | None) -> None:
    fake = FakeTime()
    t = transport(fake, answers((status, headers)))
    with pytest.raises(TableServiceError) as info:
        t.send("GET", URL, settings=settings(NoRetry()))
    assert server_delay(info.value) == expected


def test_retry_after_as_an_http_date(monkeypatch: pytest.MonkeyPatch) -> None:
    now = 1_800_000_000.0
    monkeypatch.setattr(retry_module, "_wall_clock", lambda: now)
    fake = FakeTime()
    date = email.utils.formatdate(now + 7, usegmt=True)
    t = transport(fake, answers((503, {"Retry-After": date})))
    t.send("GET", URL, settings=settings(LinearRetry(3, 0.5)))
    assert fake.sleeps == [7.0]
    past = email.utils.formatdate(now - 60, usegmt=True)
    error = ServerBusyError("busy", status_code=503)
    error.headers = {"Retry-After": past}
    assert server_delay(error) == 0.0


def test_429_is_retried_and_is_a_server_busy_error() -> None:
    assert is_retryable(ServerBusyError("throttled", status_code=429))
    fake = FakeTime()
    sender = answers((429, {}), (429, {}))
    response = transport(fake, sender).send("GET", URL, settings=settings(LinearRetry(3, 0.5)))
    assert response.status == 200 and len(sender.requests) == 3
    assert fake.sleeps == [0.5, 0.5]
    with pytest.raises(ServerBusyError) as info:
        transport(FakeTime(), answers((429, {}))).send("GET", URL, settings=settings(NoRetry()))
    assert info.value.status_code == 429


@pytest.mark.parametrize(
    ("status", "headers", "wait"),
    [(503, {"Retry-After": "2"}, 2.0), (429, {"x-ms-retry-after-ms": "1000"}, 1.0), (500, {"Retry-After": "3"}, 3.0)],
)
def test_the_wait_is_the_servers_ask_when_longer(status: int, headers: dict[str, str], wait: float) -> None:
    # As azure-data-tables: 2.0 s for Retry-After: 2, 1.0 s for x-ms-retry-after-ms: 1000.
    fake = FakeTime()
    transport(fake, answers((status, headers))).send("GET", URL, settings=settings(LinearRetry(3, 0.5)))
    assert fake.sleeps == [wait]


def test_the_policys_wait_wins_when_longer() -> None:
    fake = FakeTime()
    transport(fake, answers((503, {"Retry-After": "1"}))).send("GET", URL, settings=settings(LinearRetry(3, 4.0)))
    assert fake.sleeps == [4.0]


def test_the_exponential_default_is_lengthened_too() -> None:
    fake = FakeTime()
    policy = ExponentialRetry(3, 30, 3, 90)
    transport(fake, answers((429, {"Retry-After": "20"}))).send("GET", URL, settings=settings(policy))
    assert fake.sleeps == [20.0]  # the first retry's own wait is min_backoff, 3 s


def test_a_policy_opts_out_of_the_servers_ask() -> None:
    fake = FakeTime()
    policy = LinearRetry(3, 0.5, honour_server_delay=False)
    transport(fake, answers((503, {"Retry-After": "30"}))).send("GET", URL, settings=settings(policy))
    assert fake.sleeps == [0.5]
    assert "honour_server_delay=False" in repr(policy) and policy != LinearRetry(3, 0.5)
    with pytest.raises(ValueError, match="honour_server_delay"):
        ExponentialRetry(honour_server_delay="yes")  # type: ignore[arg-type]


def test_the_servers_ask_never_adds_attempts() -> None:
    fake = FakeTime()
    sender = answers(*[(429, {"Retry-After": "2"})] * 5)
    with pytest.raises(ServerBusyError):
        transport(fake, sender).send("GET", URL, settings=settings(LinearRetry(2, 0.5)))
    assert len(sender.requests) == 3 and fake.sleeps == [2.0, 2.0]
    fake = FakeTime()
    sender = answers((429, {"Retry-After": "2"}))
    with pytest.raises(ServerBusyError):
        transport(fake, sender).send("GET", URL, settings=settings(NoRetry()))
    assert len(sender.requests) == 1 and fake.sleeps == []


def test_a_wait_past_the_deadline_ends_at_once_with_the_deadline_error() -> None:
    fake = FakeTime()
    op = OperationContext()
    decisions: list[RetryDecision] = []
    op.retrying.append(decisions.append)
    sender = answers((429, {"Retry-After": "30"}))
    original_send = sender.send

    def slow_send(request: HttpRequest, timeout: Any) -> HttpResponse:
        fake.now += 1.5  # the attempt takes 1.5 s of the 10 s deadline
        return original_send(request, timeout)

    sender.send = slow_send  # type: ignore[method-assign]
    with pytest.raises(RequestTimeoutError) as info:
        transport(fake, sender).send(
            "GET", URL, settings=settings(LinearRetry(3, 0.5), deadline=10), operation_context=op
        )
    assert fake.sleeps == []  # no wait at all: the retry could not run before the deadline
    text = str(info.value)
    assert "deadline of 10 s exceeded after 1 attempt" in text
    assert "the server asked to wait 30 s, 8.5 s were left" in text
    assert isinstance(info.value.__cause__, ServerBusyError)
    assert info.value.headers["Retry-After"] == "30"  # the last answer's headers, for the caller
    (decision,) = decisions
    assert decision.retry is False and decision.deadline_exceeded
    assert decision.server_delay == 30.0 and decision.policy_delay == 0.5
    assert decision.delay == pytest.approx(8.5)  # the server's ask capped by what was left
    assert op.attempts[-1].server_delay == 30.0 and op.attempts[-1].retry_delay is None


def test_a_wait_inside_the_deadline_counts_against_it() -> None:
    fake = FakeTime()
    sender = answers((503, {"Retry-After": "4"}), (503, {"Retry-After": "4"}), (503, {"Retry-After": "4"}))
    with pytest.raises(RequestTimeoutError) as info:
        transport(fake, sender).send("GET", URL, settings=settings(LinearRetry(5, 0.5), deadline=10))
    # t=0 wait 4, t=4 wait 4, t=8: a third wait of 4 s would pass the deadline (2 s left).
    assert fake.sleeps == [4.0, 4.0]
    assert "the server asked to wait 4 s, 2 s were left" in str(info.value)


def test_a_policy_wait_past_the_deadline_says_so() -> None:
    fake = FakeTime()
    with pytest.raises(RequestTimeoutError) as info:
        transport(fake, answers((503, {}))).send("GET", URL, settings=settings(LinearRetry(3, 20.0), deadline=10))
    assert "the next retry was due in 20 s, 10 s were left" in str(info.value)


# ------------------------------------------------------------------ the error's headers


def test_every_answered_error_carries_its_headers_read_only_and_scrubbed() -> None:
    secret = "SIGNATURE0123456789abcdef"

    class Sas:
        def apply(self, method: str, url: str, headers: dict[str, str]) -> str:
            return url + f"?sv=2019-02-02&sig={secret}"

    sender = answers((503, {"Retry-After": "2", "x-ms-request-id": "rid-1", "x-echo": f"sig={secret}"}))
    fake = FakeTime()
    t = Transport(Sas(), error_parser=parse_error, sender=sender, sleep=fake.sleep, clock=fake.clock)
    with pytest.raises(ServerBusyError) as info:
        t.send("GET", URL, settings=settings(NoRetry()))
    headers = info.value.headers
    assert headers["retry-after"] == "2" and headers["X-MS-REQUEST-ID"] == "rid-1"
    assert secret not in str(dict(headers)) and "Authorization" not in headers
    with pytest.raises(TypeError):
        headers["Retry-After"] = "0"  # type: ignore[index]
    assert "Retry-After" not in repr(info.value)  # the headers stay out of the message


def test_an_error_without_an_answer_has_empty_headers() -> None:
    assert dict(TableServiceError("x").headers) == {}


def test_a_custom_policy_reads_the_headers() -> None:
    class ThrottleAware:
        honour_server_delay = False

        def retry_after(self, attempt: int, error: BaseException) -> float | None:
            if attempt > 2 or not isinstance(error, TableServiceError):
                return None
            throttled = error.headers.get("x-ms-retry-after-ms")
            return int(throttled) / 1000 * 2 if throttled else None

    fake = FakeTime()
    transport(fake, answers((429, {"x-ms-retry-after-ms": "300"}))).send(
        "GET", URL, settings=settings(ThrottleAware())
    )
    assert fake.sleeps == [0.6]


# ------------------------------------------------------------------ the hooks


def record_hooks(op: OperationContext) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    op.response_received.append(lambda event: events.append(("response", event)))
    op.retrying.append(lambda decision: events.append(("retrying", decision)))
    return events


def check_hook_events(events: list[tuple[str, Any]], sleeps: list[float]) -> None:
    kinds = [kind for kind, _ in events]
    assert kinds == ["response", "retrying", "response", "retrying", "response"]
    first: ResponseReceived = events[0][1]
    assert first.attempt == 1 and first.status == 429 and first.headers["x-ms-retry-after-ms"] == "1000"
    assert isinstance(first.error, ServerBusyError) and first.request_id is None
    decision: RetryDecision = events[1][1]
    assert decision.retry and decision.delay == 1.0 and decision.server_delay == 1.0
    assert decision.policy_delay == 0.5 and decision.attempt == 1
    second: RetryDecision = events[3][1]
    assert second.retry and second.delay == 0.5 and second.server_delay is None
    last: ResponseReceived = events[4][1]
    assert last.status == 200 and last.error is None and last.attempt == 3
    assert sleeps == [1.0, 0.5]


def test_hooks_see_each_response_and_decision_sync() -> None:
    fake = FakeTime()
    op = OperationContext()
    events = record_hooks(op)
    sender = answers((429, {"x-ms-retry-after-ms": "1000"}), (500, {}))
    transport(fake, sender).send("GET", URL, settings=settings(LinearRetry(3, 0.5)), operation_context=op)
    check_hook_events(events, fake.sleeps)


def test_hooks_see_each_response_and_decision_async() -> None:
    fake = FakeTime()
    op = OperationContext()
    events = record_hooks(op)
    inner = answers((429, {"x-ms-retry-after-ms": "1000"}), (500, {}))

    class AsyncMock:
        async def send(self, request: HttpRequest, timeout: Any) -> HttpResponse:
            return inner.send(request, timeout)

        async def close(self) -> None:
            pass

    t = AsyncTransport(None, error_parser=parse_error, sender=AsyncMock(), sleep=fake.asleep, clock=fake.clock)
    asyncio.run(t.send("GET", URL, settings=settings(LinearRetry(3, 0.5)), operation_context=op))
    check_hook_events(events, fake.sleeps)


def test_a_hook_sees_an_attempt_without_answer() -> None:
    from tablesdk._pipeline._http import SendError

    def handler(request: HttpRequest) -> HttpResponse:
        raise SendError("connection reset")

    fake = FakeTime()
    op = OperationContext()
    events = record_hooks(op)
    with pytest.raises(TableServiceError):
        transport(fake, MockSender(handler)).send("GET", URL, settings=settings(NoRetry()), operation_context=op)
    (_, received), (_, decision) = events
    assert received.status is None and dict(received.headers) == {} and received.error is not None
    assert decision.retry is False and decision.delay is None


def test_client_level_hooks_and_waits() -> None:
    """Through a client: the operation_context hooks and the transport's sleep seam."""
    sender = answers((429, {"Retry-After": "2"}))
    account = CloudStorageAccount.parse(
        "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=a2V5;TableEndpoint=http://acct.table.example/"
    )
    client = account.create_cloud_table_client(sender=sender, retry_policy=LinearRetry(3, 0.5))
    slept: list[float] = []
    client.transport._sleep = slept.append  # type: ignore[attr-defined]
    op = OperationContext()
    statuses: list[int | None] = []
    op.response_received.append(lambda event: statuses.append(event.status))
    assert client.table_exists("Blogs", operation_context=op) is True
    assert slept == [2.0] and statuses == [429, 200]


def hook_types_check(op: OperationContext) -> None:
    """What mypy --strict sees of the hooks' types."""
    on_response: Callable[[ResponseReceived], None] = lambda event: None  # noqa: E731
    op.response_received.append(on_response)
