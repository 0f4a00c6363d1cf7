"""A host name that does not resolve (a mistyped account name) fails within seconds, not minutes.

No real name is ever resolved here: the RequestsSender's session is made to raise what requests
raises for urllib3's NameResolutionError, and the client is driven through that sender.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
import requests
import urllib3.connection
import urllib3.exceptions

from tablesdk import AttemptState, CloudStorageAccount, ConnectionFailedError, OperationContext, RequestsSender, SendError
from tablesdk._pipeline._retry import REFUSED_BACKOFF_SECONDS

HOST = "myacct.table.core.windows.net"
KEY = "a2V5a2V5a2V5a2V5"


def dns_failure(host: str = HOST) -> requests.ConnectionError:
    """What requests raises when urllib3 cannot resolve ``host`` (built without any lookup)."""
    conn = urllib3.connection.HTTPSConnection(host, 443)  # constructing it does not connect
    gaierror = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    reason = urllib3.exceptions.NameResolutionError(host, conn, gaierror)
    reason.__cause__ = gaierror
    return requests.ConnectionError(urllib3.exceptions.MaxRetryError(None, f"https://{host}/Tables", reason))  # type: ignore[arg-type]


def unresolving_sender(failure: BaseException | None = None) -> RequestsSender:
    sender = RequestsSender()

    def request(*args: Any, **kwargs: Any) -> Any:
        raise failure or dns_failure()

    sender.session.request = request  # type: ignore[method-assign]
    return sender


def test_the_requests_sender_classifies_a_name_resolution_error() -> None:
    from tablesdk import HttpRequest

    with pytest.raises(SendError) as info:
        unresolving_sender().send(HttpRequest("GET", f"https://{HOST}/Tables", {}), 5.0)
    error = info.value
    assert error.unresolved and error.refused and not error.timed_out
    assert error.state is AttemptState.NOT_SENT
    assert f"the host name '{HOST}' does not resolve" in error.reason
    assert "object at 0x" not in error.reason  # says what failed, not urllib3's connection repr


def test_a_refused_connection_is_not_called_unresolved() -> None:
    from tablesdk import HttpRequest

    conn = urllib3.connection.HTTPConnection("127.0.0.1", 9)
    refused = urllib3.exceptions.NewConnectionError(conn, "[Errno 111] Connection refused")
    failure = requests.ConnectionError(urllib3.exceptions.MaxRetryError(None, "/", refused))  # type: ignore[arg-type]
    with pytest.raises(SendError) as info:
        unresolving_sender(failure).send(HttpRequest("GET", "http://127.0.0.1:9/Tables", {}), 5.0)
    assert info.value.refused and not info.value.unresolved


def test_a_mistyped_account_name_fails_on_the_short_schedule() -> None:
    account = CloudStorageAccount.parse(
        f"DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey={KEY};EndpointSuffix=core.windows.net"
    )
    client = account.create_cloud_table_client(sender=unresolving_sender())  # the default ExponentialRetry
    slept: list[float] = []
    client.transport._sleep = slept.append  # type: ignore[attr-defined]
    op = OperationContext()
    with pytest.raises(ConnectionFailedError) as info:
        client.table_exists("Blogs", operation_context=op)
    # 0.5 + 1 + 2 s, not the 3 / 33 / 80 s back-off of a transient failure (119 s in all).
    assert slept == list(REFUSED_BACKOFF_SECONDS) and sum(slept) < 5
    assert [a.state for a in op.attempts] == [AttemptState.NOT_SENT] * 4
    assert f"'{HOST}' does not resolve" in str(info.value)
    assert "devstore" not in str(info.value)  # not the loopback emulator hint
    assert info.value.unresolved and info.value.refused


def test_the_aiohttp_sender_classifies_a_dns_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    aiohttp = pytest.importorskip("aiohttp")
    import asyncio

    from tablesdk import HttpRequest
    from tablesdk.aio import AiohttpSender

    def refuse(*args: Any, **kwargs: Any) -> Any:
        key = type("Key", (), {"host": HOST, "port": 443, "ssl": True})()
        raise aiohttp.ClientConnectorDNSError(key, socket.gaierror(socket.EAI_NONAME, "Name or service not known"))

    async def run() -> SendError:
        sender = AiohttpSender()
        monkeypatch.setattr(sender._get_session(), "request", refuse)
        try:
            await sender.send(HttpRequest("GET", f"https://{HOST}/Tables", {}), 5.0)
        except SendError as error:
            return error
        finally:
            await sender.close()
        raise AssertionError("no SendError")

    error = asyncio.run(run())
    assert error.unresolved and error.refused and error.state is AttemptState.NOT_SENT
