"""One frozen RequestSettings per client, read by both transports, with a call's options merged in one place."""

from __future__ import annotations

from typing import Any

import pytest

from tablesdk import CloudStorageAccount, ExponentialRetry, LinearRetry, NoRetry, TableRequestOptions
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender, Timeout
from tablesdk._pipeline._settings import DEFAULT_TIMEOUT, RequestSettings
from tablesdk._pipeline._transport import Transport
from tablesdk.aio import AsyncCloudTableClient
from tablesdk.aio._transport import AsyncTransport

CONN = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    "TableEndpoint=http://127.0.0.1:1/devstoreaccount1;"
)

#: The same constructor arguments for a client of either flavour.
ARGUMENTS: dict[str, Any] = {
    "retry_policy": LinearRetry(2, 0.5), "timeout": (3.0, 4.0), "server_timeout": 9, "operation_deadline": 30.0,
    "user_agent": "orders/1.0",
}


class RecordingAsyncSender:
    """An AsyncSender that answers 204 and records the timeout of each attempt."""

    def __init__(self) -> None:
        self.timeouts: list[Timeout] = []
        self.requests: list[HttpRequest] = []

    async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        self.requests.append(request)
        self.timeouts.append(timeout)
        return MockSender.response(204)

    async def close(self) -> None:
        pass


def test_both_flavours_build_the_same_settings_from_the_same_arguments() -> None:
    account = CloudStorageAccount.parse(CONN)
    sync = account.create_cloud_table_client(sender=MockSender(lambda r: MockSender.response(204)), **ARGUMENTS)
    asynchronous = AsyncCloudTableClient(account, sender=RecordingAsyncSender(), **ARGUMENTS)
    assert sync._settings == asynchronous._settings
    settings = sync._settings
    assert (settings.timeout, settings.server_timeout, settings.deadline, settings.location_mode) == (
        (3.0, 4.0), 9, 30.0, "primary_only")
    assert settings.retry_policy is ARGUMENTS["retry_policy"]
    assert settings.user_agent.startswith("orders/1.0 tablesdk/")


def test_the_async_transport_keeps_no_sync_transport_nor_settings() -> None:
    transport = AsyncTransport(None, error_parser=lambda r: Exception(), sender=RecordingAsyncSender())  # type: ignore[arg-type, return-value]
    kept = [value for value in vars(transport).values()]
    assert not any(isinstance(value, (Transport, RequestSettings)) for value in kept), kept
    sync = Transport(None, error_parser=lambda r: Exception(), sender=MockSender(lambda r: MockSender.response(204)))  # type: ignore[arg-type, return-value]
    assert not any(isinstance(value, RequestSettings) for value in vars(sync).values())


def test_settings_are_frozen_and_replace_makes_a_checked_copy() -> None:
    settings = RequestSettings()
    assert settings.timeout == DEFAULT_TIMEOUT and isinstance(settings.retry_policy, ExponentialRetry)
    with pytest.raises(AttributeError, match="frozen"):
        settings.timeout = 5.0
    changed = settings.replace(deadline=2.0)
    assert (changed.deadline, settings.deadline) == (2.0, None)
    assert changed.retry_policy is settings.retry_policy
    with pytest.raises(ValueError, match="deadline"):
        settings.replace(deadline=0)
    with pytest.raises(TypeError):
        settings.replace(proxy="http://x")


def test_merged_is_the_settings_themselves_when_nothing_overrides() -> None:
    settings = RequestSettings(retry_policy=NoRetry())
    assert settings.merged(None) is settings
    assert settings.merged(None, settings.retry_policy) is settings
    assert settings.merged(TableRequestOptions()) == settings


def test_merged_takes_the_options_fields_that_are_set_and_an_explicit_policy_over_theirs() -> None:
    base = RequestSettings(timeout=7.0, server_timeout=3, deadline=60.0, retry_policy=NoRetry())
    mine, theirs = LinearRetry(1, 0), LinearRetry(3, 0)
    merged = base.merged(TableRequestOptions(timeout=(1.0, 2.0), deadline=5.0, retry_policy=theirs,
                                             location_mode="secondary_only"), mine)
    assert (merged.timeout, merged.server_timeout, merged.deadline, merged.location_mode) == (
        (1.0, 2.0), 3, 5.0, "secondary_only")
    assert merged.retry_policy is mine
    assert base.merged(TableRequestOptions(retry_policy=theirs)).retry_policy is theirs
    assert base.merged(None, mine).retry_policy is mine and base.retry_policy is not mine


def test_the_client_setters_replace_the_settings_and_check_the_value() -> None:
    client = CloudStorageAccount.parse(CONN).create_cloud_table_client(
        sender=MockSender(lambda r: MockSender.response(204))
    )
    before = client._settings
    policy = LinearRetry(1, 0)
    client.retry_policy = policy
    client.operation_deadline = 12.5
    assert (client.retry_policy, client.operation_deadline) == (policy, 12.5)
    assert (client._settings.retry_policy, client._settings.deadline) == (policy, 12.5)
    assert before.deadline is None and before.retry_policy is not policy  # a copy: the old value is unchanged
    with pytest.raises(ValueError, match="retry_policy is required"):
        client.retry_policy = None  # type: ignore[assignment]
    with pytest.raises(TypeError, match="retry_after"):
        client.retry_policy = "three times"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="operation_deadline"):
        client.operation_deadline = 0
    with pytest.raises(ValueError, match="location_mode"):
        client.location_mode = "nearest"
    client.operation_deadline = None
    assert client._settings.deadline is None and client._settings.retry_policy is policy


def test_a_client_refuses_a_bad_operation_deadline_by_its_name() -> None:
    with pytest.raises(ValueError, match="operation_deadline"):
        CloudStorageAccount.parse(CONN).create_cloud_table_client(operation_deadline=-1)


@pytest.mark.asyncio
async def test_the_async_client_sends_with_its_settings_merged_with_the_call_options() -> None:
    sender = RecordingAsyncSender()
    async with AsyncCloudTableClient(CloudStorageAccount.parse(CONN), sender=sender, **ARGUMENTS) as client:
        await client.delete_table("tbl")
        await client.delete_table("tbl", options=TableRequestOptions(timeout=1.5, server_timeout=2))
    assert sender.timeouts == [(3.0, 4.0), 1.5]
    assert [r.url.rsplit("?", 1)[1] for r in sender.requests] == ["timeout=9", "timeout=2"]
    assert all((r.header("User-Agent") or "").startswith("orders/1.0 tablesdk/") for r in sender.requests)
