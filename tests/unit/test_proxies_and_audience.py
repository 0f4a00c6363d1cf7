"""Explicit proxies on both clients (through a tiny loopback HTTP proxy that records its use),
proxy credentials kept out of reprs, logs and errors, and the token audience of Entra ID
credentials (a fake credential records the scope it is asked for)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from loopback import unused_port
from tablesdk import (
    BearerTokenCredential,
    CloudStorageAccount,
    ConnectionFailedError,
    MockSender,
    NoRetry,
    RequestsSender,
    SharedKeyCredential,
)
from tablesdk._pipeline._http import HttpRequest, HttpResponse, Timeout
from tablesdk.aio import AiohttpSender

PASSWORD = "pr0xyPassw0rd"
NOT_FOUND = json.dumps({"odata.error": {"code": "ResourceNotFound", "message": {"value": "nope"}}}).encode()


class _ProxyHandler(socketserver.StreamRequestHandler):
    """Answers every request itself (a 404, so ``table_exists`` is False) and records it."""

    server: _ProxyServer

    def handle(self) -> None:
        while True:
            line = self.rfile.readline(65536)
            if not line:
                return
            headers: dict[str, str] = {}
            while True:
                header = self.rfile.readline(65536)
                if header in (b"\r\n", b"\n", b""):
                    break
                name, _, value = header.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            self.server.seen.append((line.decode("latin-1").strip(), headers))
            self.wfile.write(
                b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                b"x-ms-error-code: ResourceNotFound\r\nContent-Length: %d\r\n\r\n%s" % (len(NOT_FOUND), NOT_FOUND)
            )
            self.wfile.flush()


class _ProxyServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    seen: list[tuple[str, dict[str, str]]]


@pytest.fixture
def http_proxy() -> Iterator[_ProxyServer]:
    server = _ProxyServer(("127.0.0.1", 0), _ProxyHandler)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def proxy_url(server: _ProxyServer, credentials: bool = False) -> str:
    port = server.server_address[1]
    return f"http://proxyuser:{PASSWORD}@127.0.0.1:{port}" if credentials else f"http://127.0.0.1:{port}"


def account() -> CloudStorageAccount:
    # Nothing listens at the endpoint: only a request that went through the proxy is answered.
    endpoint = f"http://127.0.0.1:{unused_port()}/acct"
    return CloudStorageAccount("acct", endpoint, SharedKeyCredential("acct", base64.b64encode(b"key").decode()))


def check_proxied(server: _ProxyServer, credentials: bool) -> None:
    (request_line, headers), *_ = server.seen
    assert request_line.startswith("GET http://127.0.0.1:") and "/acct/Tables('Nowhere')" in request_line
    assert headers["authorization"].startswith("SharedKey acct:")  # the signed request, unchanged
    if credentials:
        expected = "Basic " + base64.b64encode(f"proxyuser:{PASSWORD}".encode()).decode()
        assert headers["proxy-authorization"] == expected
    else:
        assert "proxy-authorization" not in headers


@pytest.mark.parametrize("credentials", [False, True], ids=["plain", "with-credentials"])
def test_sync_client_sends_through_the_explicit_proxy(http_proxy: _ProxyServer, credentials: bool) -> None:
    proxies = {"http": proxy_url(http_proxy, credentials)}
    with account().create_cloud_table_client(proxies=proxies, retry_policy=NoRetry()) as client:
        assert client.table_exists("Nowhere") is False
        assert PASSWORD not in repr(client.transport.sender) and PASSWORD not in repr(client.transport)
    check_proxied(http_proxy, credentials)


@pytest.mark.parametrize("credentials", [False, True], ids=["plain", "with-credentials"])
def test_async_client_sends_through_the_explicit_proxy(http_proxy: _ProxyServer, credentials: bool) -> None:
    proxies = {"all": proxy_url(http_proxy, credentials)}

    async def run() -> bool:
        async with account().create_async_cloud_table_client(proxies=proxies, retry_policy=NoRetry()) as client:
            found = await client.table_exists("Nowhere")
            assert PASSWORD not in repr(client.transport.sender)
            return found

    assert asyncio.run(run()) is False
    check_proxied(http_proxy, credentials)


def test_the_proxy_is_picked_by_the_requests_scheme(http_proxy: _ProxyServer) -> None:
    # Only an https proxy is given: an http request goes direct (and finds nothing listening).
    proxies = {"https": proxy_url(http_proxy)}
    with account().create_cloud_table_client(proxies=proxies, retry_policy=NoRetry()) as client:
        with pytest.raises(ConnectionFailedError):
            client.table_exists("Nowhere")
    assert http_proxy.seen == []


def test_explicit_proxies_win_over_the_environment(
    http_proxy: _ProxyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{unused_port()}")  # nothing there
    monkeypatch.setenv("NO_PROXY", "")
    proxies = {"http": proxy_url(http_proxy)}
    with account().create_cloud_table_client(proxies=proxies, trust_env=True, retry_policy=NoRetry()) as client:
        assert client.table_exists("Nowhere") is False
    assert len(http_proxy.seen) == 1


def test_proxy_credentials_never_reach_errors_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    dead_proxy = {"http": f"http://proxyuser:{PASSWORD}@127.0.0.1:{unused_port()}"}
    with account().create_cloud_table_client(proxies=dead_proxy, retry_policy=NoRetry()) as client:
        with pytest.raises(ConnectionFailedError) as info:
            client.table_exists("Nowhere")
        shown = [str(info.value), repr(info.value), repr(client.transport.sender)]

    async def run() -> list[str]:
        async with account().create_async_cloud_table_client(proxies=dead_proxy, retry_policy=NoRetry()) as client:
            with pytest.raises(ConnectionFailedError) as async_info:
                await client.table_exists("Nowhere")
            return [str(async_info.value), repr(async_info.value), repr(client.transport.sender)]

    shown += asyncio.run(run())
    shown += [record.getMessage() for record in caplog.records]
    assert all(PASSWORD not in text for text in shown), [text for text in shown if PASSWORD in text]
    assert "REDACTED@127.0.0.1" in repr(RequestsSender(proxies=dead_proxy))
    assert "REDACTED@127.0.0.1" in repr(AiohttpSender(proxies=dead_proxy))


def test_bad_proxies_are_refused_without_showing_credentials() -> None:
    with pytest.raises(ValueError, match="'http', 'https' or 'all'"):
        RequestsSender(proxies={"ftp": "http://127.0.0.1:3128"})
    with pytest.raises(ValueError, match="http:// or https:// proxy URL") as info:
        AiohttpSender(proxies={"https": f"socks5://user:{PASSWORD}@127.0.0.1:1080"})
    assert PASSWORD not in str(info.value)
    with pytest.raises(ValueError, match="custom sender"):
        account().create_cloud_table_client(proxies={"http": "http://127.0.0.1:3128"}, sender=MockSender(lambda r: MockSender.response(204)))


# ------------------------------------------------------------------ token audience


@dataclass
class Token:
    token: str
    expires_on: int


class ScopeRecorder:
    """A fake Entra ID credential: records the scopes it is asked for."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> Token:
        self.scopes.append(scopes)
        return Token("the-token", 4_000_000_000)


def answer_404(request: HttpRequest) -> HttpResponse:
    assert request.header("Authorization") == "Bearer the-token"
    return MockSender.response(404, NOT_FOUND, {"Content-Type": "application/json"})


ENDPOINT = "https://acct.table.core.windows.net"


def test_the_default_scope_is_azure_storages() -> None:
    recorder = ScopeRecorder()
    client = CloudStorageAccount("acct", ENDPOINT, recorder).create_cloud_table_client(sender=MockSender(answer_404))
    assert client.table_exists("Nowhere") is False
    assert recorder.scopes == [("https://storage.azure.com/.default",)]


@pytest.mark.parametrize(
    ("audience", "scope"),
    [
        ("https://cosmos.azure.com", "https://cosmos.azure.com/.default"),
        ("https://storage.azure.com/", "https://storage.azure.com/.default"),
        ("https://cosmos.azure.com/.default", "https://cosmos.azure.com/.default"),  # a scope as is
    ],
)
def test_the_accounts_token_audience(audience: str, scope: str) -> None:
    recorder = ScopeRecorder()
    account_ = CloudStorageAccount("acct", ENDPOINT, recorder, token_audience=audience)
    assert isinstance(account_.credential, BearerTokenCredential) and account_.credential.scope == scope
    assert account_.create_cloud_table_client(sender=MockSender(answer_404)).table_exists("Nowhere") is False
    assert recorder.scopes == [(scope,)]


def test_the_sync_clients_token_audience_overrides_the_accounts() -> None:
    recorder = ScopeRecorder()
    account_ = CloudStorageAccount("acct", ENDPOINT, recorder)
    client = account_.create_cloud_table_client(sender=MockSender(answer_404), token_audience="https://cosmos.azure.com")
    assert client.table_exists("Nowhere") is False
    assert recorder.scopes == [("https://cosmos.azure.com/.default",)]
    assert account_.credential.scope == "https://storage.azure.com/.default"  # type: ignore[union-attr]


def test_the_async_clients_token_audience() -> None:
    recorder = ScopeRecorder()
    inner = MockSender(answer_404)

    class AsyncMock:
        async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
            return inner.send(request, timeout)

        async def close(self) -> None:
            pass

    async def run() -> bool:
        account_ = CloudStorageAccount("acct", ENDPOINT, recorder)
        async with account_.create_async_cloud_table_client(
            sender=AsyncMock(), token_audience="https://storage.azure.us"
        ) as client:
            return await client.table_exists("Nowhere")

    assert asyncio.run(run()) is False
    assert recorder.scopes == [("https://storage.azure.us/.default",)]


def test_bearer_token_credential_takes_an_audience_or_a_scope() -> None:
    recorder = ScopeRecorder()
    assert BearerTokenCredential(recorder, scope="api://my-app/.default").scope == "api://my-app/.default"
    assert BearerTokenCredential(recorder, audience="https://cosmos.azure.com").scope == "https://cosmos.azure.com/.default"
    with pytest.raises(ValueError, match="not both"):
        BearerTokenCredential(recorder, audience="https://a", scope="https://a/.default")
    with pytest.raises(ValueError, match="audience"):
        BearerTokenCredential(recorder, audience="")


def test_a_token_audience_with_another_credential_is_refused() -> None:
    shared_key = SharedKeyCredential("acct", base64.b64encode(b"key").decode())
    with pytest.raises(ValueError, match="Entra ID token credentials"):
        CloudStorageAccount("acct", ENDPOINT, shared_key, token_audience="https://cosmos.azure.com")
    with pytest.raises(ValueError, match="Entra ID token credentials"):
        CloudStorageAccount("acct", ENDPOINT, shared_key).create_cloud_table_client(
            token_audience="https://cosmos.azure.com"
        )




def test_free_text_loses_the_user_information_of_urls() -> None:
    from tablesdk._core._redaction import redact_text

    text = f"ProxyError('Unable to connect to proxy', 'http://proxyuser:{PASSWORD}@10.0.0.1:3128/')"
    assert redact_text(text) == "ProxyError('Unable to connect to proxy', 'http://REDACTED@10.0.0.1:3128/')"
    assert redact_text("mail me at someone@example.org") == "mail me at someone@example.org"
