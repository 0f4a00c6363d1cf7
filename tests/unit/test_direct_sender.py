"""RequestsSender's direct path: the bytes ``Session.request`` would send, on the adapter's pool.

A recording server on loopback keeps every request exactly as it arrived. The
same requests sent through the session (after the session has been read, which
hands every request to ``Session.request``) must arrive byte for byte the same.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from loopback import LoopbackServer, answer
from tablesdk import HttpRequest, RequestsSender

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nx-ms-request-id: rid\r\nContent-Type: text/plain\r\n\r\nok"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(answer(ANSWER, keep_alive=True)) as recording:  # keeps each request's raw bytes
        yield recording


def requests_to(base: str) -> list[HttpRequest]:
    headers = {"x-ms-version": "2019-02-02", "Accept": "application/json", "User-Agent": "tablesdk/test",
               "x-ms-client-request-id": "cid", "x-ms-date": "Tue, 01 Jan 2030 00:00:00 GMT",
               "Authorization": "SharedKey acct:sig="}
    return [
        HttpRequest("GET", f"{base}/acct/Blogs(PartitionKey='p%2F1',RowKey='r%20x')?$select=A,B", dict(headers)),
        HttpRequest("POST", f"{base}/acct/Blogs", {**headers, "Content-Type": "application/json",
                                                   "Content-Length": "9"}, b'{"a": 1}\n'),
        HttpRequest("DELETE", f"{base}/acct/Blogs(PartitionKey='p',RowKey='r')", {**headers, "If-Match": "*"}),
        HttpRequest("PUT", f"{base}/acct/Blogs?timeout=30", {**headers, "accept-encoding": "identity"}, b"{}"),
        HttpRequest("GET", f"{base}/acct/Tables?$filter=TableName%20eq%20%27a%27&x=%41%7E", dict(headers)),
        HttpRequest("GET", f"{base}/acct/Tables()?q=a b&\u00e9=1", dict(headers)),  # re-quoted by requests
    ]


def test_direct_path_sends_what_the_session_sends(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    base = server.url
    direct = RequestsSender()
    via_session = RequestsSender()
    via_session.session  # reading the session hands every request to Session.request
    for request in requests_to(base):
        direct.send(request.copy(), 5.0)
    direct_bytes = list(server.requests)
    server.requests.clear()
    for request in requests_to(base):
        via_session.send(request.copy(), 5.0)
    assert direct_bytes == server.requests
    assert b"GET /acct/Tables()?q=a%20b&%C3%A9=1 HTTP/1.1" in server.requests[-1]
    direct.close()
    via_session.close()


def test_plain_requests_do_not_go_through_session_request(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Session.request was called")

    sender = RequestsSender()
    monkeypatch.setattr(requests.Session, "request", refuse)
    response = sender.send(requests_to(server.url)[0], 5.0)
    assert (response.status, response.body, response.request_id) == (200, b"ok", "rid")
    assert response.headers["CONTENT-TYPE"] == "text/plain"
    sender._session.close()


def test_reading_the_session_sends_through_it(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    sender = RequestsSender()
    sender.session.headers["X-Configured"] = "yes"
    sender.send(requests_to(server.url)[0], 5.0)
    assert b"\r\nX-Configured: yes\r\n" in server.requests[0]
    sender.close()


def test_a_cookie_set_by_the_server_is_sent_back() -> None:
    set_cookie = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nSet-Cookie: affinity=abc; Path=/\r\n\r\n"
    with LoopbackServer(answer(set_cookie, keep_alive=True)) as server:
        sender = RequestsSender()
        request = requests_to(server.url)[0]
        sender.send(request.copy(), 5.0)
        sender.send(request.copy(), 5.0)
        assert b"Cookie" not in server.requests[0]
        assert b"\r\nCookie: affinity=abc\r\n" in server.requests[1]
        sender.close()


def test_environment_proxy_is_used_with_trust_env(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url)
    sender = RequestsSender(trust_env=True)
    request = HttpRequest("GET", "http://acct.table.example/acct/Tables", {"x-ms-version": "2019-02-02"})
    assert sender.send(request, 5.0).status == 200
    assert server.requests[0].startswith(b"GET http://acct.table.example/acct/Tables HTTP/1.1\r\n")
    sender.close()
    untrusting = RequestsSender()
    with pytest.raises(Exception):  # noqa: B017 - the name does not resolve: no proxy was used
        untrusting.send(request, 5.0)
    untrusting.close()
    assert len(server.requests) == 1


def test_a_mock_in_place_before_the_sender_module_is_imported_still_sees_every_request() -> None:
    # tablesdk imports its sender lazily: a client made inside ``responses`` must not take the
    # mocked send for requests' own and go past it to the network.
    import subprocess
    import sys
    from pathlib import Path

    script = """
import sys
import responses
assert "tablesdk._pipeline._requests_sender" not in sys.modules
from tablesdk import CloudStorageAccount
with responses.RequestsMock() as mock:
    mock.add(responses.POST, "http://127.0.0.1:1/devstoreaccount1/Tables", status=204)
    account = CloudStorageAccount.parse(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
        "TableEndpoint=http://127.0.0.1:1/devstoreaccount1")
    account.create_cloud_table_client().create_table("Mocked")
    assert len(mock.calls) == 1
"""
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
