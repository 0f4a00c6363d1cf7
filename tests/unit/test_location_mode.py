"""Reads under a location mode go to the secondary endpoint as the mode says; writes never do."""

from __future__ import annotations

import pytest

from tablesdk import (
    CloudStorageAccount,
    ContinuationToken,
    DynamicEntity,
    LinearRetry,
    ResourceNotFoundError,
    ServerBusyError,
    SharedKeyCredential,
)
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
PRIMARY = "https://acct.table.core.windows.net"
SECONDARY = "https://acct-secondary.table.core.windows.net"
TABLES = b'{"value":[{"TableName":"t1"}]}'


def client_with(handler: object, mode: str, server_timeout: int | None = None) -> tuple[object, MockSender]:
    sender = MockSender(handler)  # type: ignore[arg-type]
    account = CloudStorageAccount("acct", PRIMARY, SharedKeyCredential("acct", KEY))
    client = account.create_cloud_table_client(
        sender=sender, location_mode=mode, retry_policy=LinearRetry(3, 0), server_timeout=server_timeout
    )
    return client, sender


def ok(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return MockSender.response(204, headers={"ETag": 'W/"1"'})
    return MockSender.response(200, TABLES, {"Content-Type": "application/json"})


def hosts(sender: MockSender) -> list[str]:
    return [r.url.split("/")[2] for r in sender.requests]


def test_primary_only_is_the_default() -> None:
    client, sender = client_with(ok, "primary_only")
    assert list(client.list_tables()) == ["t1"]  # type: ignore[attr-defined]
    assert hosts(sender) == ["acct.table.core.windows.net"]


def test_secondary_only_reads_and_primary_writes() -> None:
    client, sender = client_with(ok, "secondary_only", server_timeout=30)
    assert list(client.list_tables()) == ["t1"]  # type: ignore[attr-defined]
    client.insert_entity("tbl1", DynamicEntity(PartitionKey="p", RowKey="r"))  # type: ignore[attr-defined]
    assert hosts(sender) == ["acct-secondary.table.core.windows.net", "acct.table.core.windows.net"]
    assert sender.requests[0].url == f"{SECONDARY}/Tables?timeout=30"
    # the secondary is signed with the primary's account name and its own path
    assert sender.requests[0].headers["Authorization"].startswith("SharedKey acct:")


def test_primary_then_secondary_alternates_on_retries() -> None:
    def primary_busy(request: HttpRequest) -> HttpResponse:
        if "-secondary" in request.url and len(sender_ref[0].requests) < 4:
            return MockSender.response(503)
        if "-secondary" not in request.url:
            return MockSender.response(503)
        return ok(request)

    client, sender = client_with(primary_busy, "primary_then_secondary")
    sender_ref = [sender]
    assert list(client.list_tables()) == ["t1"]  # type: ignore[attr-defined]
    assert hosts(sender) == ["acct.table.core.windows.net", "acct-secondary.table.core.windows.net"] * 2


def test_writes_are_never_retried_on_the_secondary() -> None:
    client, sender = client_with(lambda request: MockSender.response(503), "primary_then_secondary")
    with pytest.raises(ServerBusyError):
        client.insert_entity("tbl1", DynamicEntity(PartitionKey="p", RowKey="r"))  # type: ignore[attr-defined]
    assert set(hosts(sender)) == {"acct.table.core.windows.net"} and len(sender.requests) == 4


def test_bad_modes() -> None:
    with pytest.raises(ValueError):
        client_with(ok, "nearest")
    account = CloudStorageAccount("acct", "http://127.0.0.1:10002", SharedKeyCredential("acct", KEY))
    with pytest.raises(ValueError):  # no secondary can be derived from a bare IP endpoint
        account.create_cloud_table_client(location_mode="secondary_only")


def test_not_found_on_the_secondary_is_asked_again_on_the_primary() -> None:
    entity = b'{"PartitionKey":"p","RowKey":"r","A":1}'

    def lagging(request: HttpRequest) -> HttpResponse:
        if "-secondary" in request.url:  # the secondary has not seen the entity yet
            return MockSender.response(404, b'{"odata.error":{"code":"ResourceNotFound","message":{"value":"x"}}}',
                                       {"Content-Type": "application/json"})
        if len([r for r in sender_ref[0].requests if "-secondary" not in r.url]) == 1:
            return MockSender.response(503)
        return MockSender.response(200, entity, {"Content-Type": "application/json", "ETag": 'W/"1"'})

    client, sender = client_with(lagging, "primary_then_secondary")
    sender_ref = [sender]
    assert client.get_entity("tbl1", "p", "r")["A"] == 1  # type: ignore[attr-defined]
    assert hosts(sender) == ["acct.table.core.windows.net", "acct-secondary.table.core.windows.net",
                             "acct.table.core.windows.net"]


def test_not_found_on_the_primary_is_final() -> None:
    client, sender = client_with(
        lambda request: MockSender.response(404, b"", {"x-ms-error-code": "ResourceNotFound"}), "primary_then_secondary"
    )
    with pytest.raises(ResourceNotFoundError):
        client.get_entity("tbl1", "p", "r")  # type: ignore[attr-defined]
    assert len(sender.requests) == 1


def test_secondary_only_not_found_is_final() -> None:
    client, sender = client_with(
        lambda request: MockSender.response(404, b"", {"x-ms-error-code": "ResourceNotFound"}), "secondary_only"
    )
    with pytest.raises(ResourceNotFoundError):
        client.get_entity("tbl1", "p", "r")  # type: ignore[attr-defined]
    assert len(sender.requests) == 1


def test_tokens_are_pinned_to_the_endpoint_that_answered() -> None:
    page = b'{"value":[{"PartitionKey":"p","RowKey":"r1"}]}'
    more = {"Content-Type": "application/json", "x-ms-continuation-NextPartitionKey": "1!4!cA",
            "x-ms-continuation-NextRowKey": "1!4!cjI"}

    def primary_down(request: HttpRequest) -> HttpResponse:
        if "-secondary" not in request.url:
            return MockSender.response(503)
        return MockSender.response(200, page, more)

    client, sender = client_with(primary_down, "primary_then_secondary")
    payloads, token = client.query_entity_payloads("tbl1")  # type: ignore[attr-defined]
    assert token is not None and token.target_location == "secondary"
    restored = ContinuationToken.from_string(token.to_string())
    assert restored == token
    sender.requests.clear()
    client.query_entity_payloads("tbl1", continuation_token=restored)  # type: ignore[attr-defined]
    assert hosts(sender) == ["acct-secondary.table.core.windows.net"]  # the next page: same copy, first try


def test_tokens_without_location_mode_are_unchanged() -> None:
    more = {"Content-Type": "application/json", "x-ms-continuation-NextTableName": "1!4!dDI"}
    client, _ = client_with(lambda request: MockSender.response(200, TABLES, more), "primary_only")
    segment = client.list_tables_segmented()  # type: ignore[attr-defined]
    assert segment.continuation_token == ContinuationToken(next_table_name="1!4!dDI")
    assert segment.continuation_token.target_location is None
    # a three-field token (written before locations existed) still reads back
    assert ContinuationToken.from_string(ContinuationToken("a", "b").to_string()).target_location is None
    with pytest.raises(ValueError):
        ContinuationToken("a", target_location="tertiary")
