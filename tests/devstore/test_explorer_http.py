"""The explorer's HTTP side: the page's headers, its token, the origins and hosts it answers, --read-only.

Most tests hand :class:`Request` objects to the :class:`Explorer` in front of a
:class:`TableService` (no socket); the last ones go through a running emulator and its
command line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import requests

from devstore_helpers import Client
from tablesdk.devstore import DEVSTORE_KEY, DevStore, Request, Storage, TableService
from tablesdk.devstore.__main__ import build_parser
from tablesdk.devstore._explorer import TOKEN_HEADER, Explorer

REPO = Path(__file__).resolve().parents[2]
ACCOUNT = "devstoreaccount1"
HOST = "127.0.0.1:10002"
PAGE_ORIGIN = "http://" + HOST
REST = {"accept": "application/json;odata=minimalmetadata", "content-type": "application/json",
        "x-ms-version": "2019-02-02"}


@pytest.fixture
def service() -> Iterator[TableService]:
    storage = Storage(":memory:")
    yield TableService(storage)
    storage.close()


@pytest.fixture
def explorer(service: TableService) -> Explorer:
    return Explorer(service, DEVSTORE_KEY)


def _request(method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"", query: str = "",
             host: str = HOST) -> Request:
    return Request(method=method, raw_path=path, raw_query=query, headers={"host": host, **(headers or {})},
                   body=body, host=host)


def _from_page(explorer: Explorer, method: str, path: str, body: object = None, **extra: str) -> Request:
    headers = {**REST, TOKEN_HEADER: explorer.token, "origin": PAGE_ORIGIN, "sec-fetch-site": "same-origin", **extra}
    return _request(method, path, headers, json.dumps(body).encode() if body is not None else b"")


def _error(response_body: bytes) -> tuple[str, str]:
    error = json.loads(response_body)["odata.error"]
    return error["code"], error["message"]["value"]


# ------------------------------------------------------------------ the page and its files

def test_the_page_carries_the_token_and_a_strict_policy(explorer: Explorer) -> None:
    response = explorer.handle(_request("GET", "/"))
    assert response.status == 200
    assert response.header("Content-Type") == "text/html; charset=utf-8"
    assert response.header("Cache-Control") == "no-store"
    policy = response.header("Content-Security-Policy") or ""
    for directive in ("default-src 'self'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'",
                      "object-src 'none'", "base-uri 'none'", "form-action 'none'"):
        assert directive in policy
    assert "unsafe" not in policy
    assert response.header("X-Content-Type-Options") == "nosniff"
    assert response.header("X-Frame-Options") == "DENY"
    page = response.body.decode()
    assert f'<meta name="tablesdk-explorer-token" content="{explorer.token}">' in page
    assert '<meta name="tablesdk-explorer-mode" content="read-write">' in page
    assert "{{" not in page
    assert DEVSTORE_KEY not in page


def test_the_files_have_no_inline_script_or_style_and_no_markup_from_data(explorer: Explorer) -> None:
    page = explorer.handle(_request("GET", "/")).body.decode()
    assert re.findall(r"<script\b[^>]*>", page) == ['<script src="/_explorer/app.js" defer>']
    assert not re.search(r"\son[a-z]+\s*=", page) and " style=" not in page
    assert not re.search(r"(src|href)=\"(?!/_explorer/)", page)  # nothing from another origin
    script = explorer.handle(_request("GET", "/_explorer/app.js")).body.decode()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink
    assert DEVSTORE_KEY not in script


@pytest.mark.parametrize("name, content_type", [
    ("app.js", "text/javascript; charset=utf-8"), ("app.css", "text/css; charset=utf-8"),
    ("icon.svg", "image/svg+xml"),
])
def test_static_files(explorer: Explorer, name: str, content_type: str) -> None:
    response = explorer.handle(_request("GET", "/_explorer/" + name))
    assert response.status == 200 and response.header("Content-Type") == content_type
    assert response.header("X-Content-Type-Options") == "nosniff"
    assert response.body


@pytest.mark.parametrize("path", ["/_explorer/index.html", "/_explorer/../setup.cfg", "/_explorer/",
                                  "/_explorer/connection-string", "/_explorer/%2e%2e/_explorer.py"])
def test_no_other_file_is_served(explorer: Explorer, path: str) -> None:
    response = explorer.handle(_request("GET", path))
    assert response.status == 404


def test_the_page_is_read_with_get(explorer: Explorer) -> None:
    assert explorer.handle(_request("POST", "/_explorer/app.js")).status == 405


@pytest.mark.parametrize("host", ["evil.example:10002", "evil.example", "127.0.0.1.evil.example:10002",
                                  "192.168.1.20:10002"])
def test_the_page_and_the_token_answer_only_at_a_loopback_host(explorer: Explorer, host: str) -> None:
    """A site whose name was pointed at 127.0.0.1 (DNS rebinding) must not read the token or use it."""
    page = explorer.handle(_request("GET", "/", host=host))
    assert page.status == 403 and explorer.token.encode() not in page.body
    headers = {**REST, TOKEN_HEADER: explorer.token}
    assert explorer.handle(_request("GET", f"/{ACCOUNT}/Tables", headers, host=host)).status == 403


@pytest.mark.parametrize("host", ["localhost:10002", "127.0.0.1", "[::1]:10002", "LOCALHOST:1"])
def test_loopback_hosts_are_served(explorer: Explorer, host: str) -> None:
    assert explorer.handle(_request("GET", "/", host=host)).status == 200


def test_the_address_listened_on_is_served_too(service: TableService) -> None:
    explorer = Explorer(service, DEVSTORE_KEY, bind_host="10.1.2.3")
    assert explorer.handle(_request("GET", "/", host="10.1.2.3:10002")).status == 200
    assert explorer.handle(_request("GET", "/", host="10.1.2.4:10002")).status == 403
    wildcard = Explorer(service, DEVSTORE_KEY, bind_host="0.0.0.0")
    assert wildcard.handle(_request("GET", "/", host="0.0.0.0:10002")).status == 403


# ------------------------------------------------------------------ the token

def test_the_pages_request_is_signed_for_it_and_served(explorer: Explorer, service: TableService) -> None:
    response = explorer.handle(_from_page(explorer, "POST", f"/{ACCOUNT}/Tables", {"TableName": "fromthepage"}))
    assert response.status == 201, response.body
    assert service.table_names() == ["fromthepage"]
    assert response.header("X-Content-Type-Options") == "nosniff"


def test_a_wrong_token_is_refused(explorer: Explorer, service: TableService) -> None:
    request = _from_page(explorer, "POST", f"/{ACCOUNT}/Tables", {"TableName": "wrongtoken"})
    request.headers[TOKEN_HEADER] = explorer.token[:-1] + ("A" if explorer.token[-1] != "A" else "B")
    response = explorer.handle(request)
    assert response.status == 403 and _error(response.body)[0] == "AuthenticationFailed"
    request.headers[TOKEN_HEADER] = "é"  # not ASCII: still just a wrong token
    assert explorer.handle(request).status == 403
    assert service.table_names() == []


def test_tokens_differ_between_emulators(service: TableService) -> None:
    assert Explorer(service, DEVSTORE_KEY).token != Explorer(service, DEVSTORE_KEY).token


@pytest.mark.parametrize("headers", [
    {"origin": "http://evil.example"}, {"origin": "null"}, {"origin": "http://localhost:10002"},
    {"origin": "https://127.0.0.1:10002"}, {"sec-fetch-site": "cross-site"}, {"sec-fetch-site": "same-site"},
])
def test_the_token_from_another_origin_is_refused(explorer: Explorer, service: TableService,
                                                   headers: dict[str, str]) -> None:
    response = explorer.handle(_from_page(explorer, "POST", f"/{ACCOUNT}/Tables", {"TableName": "othersite"},
                                          **headers))
    assert response.status == 403
    assert "origin" in _error(response.body)[1]
    assert service.table_names() == []


def test_a_client_may_send_the_token_without_browser_headers(explorer: Explorer) -> None:
    headers = {**REST, TOKEN_HEADER: explorer.token}
    assert explorer.handle(_request("GET", f"/{ACCOUNT}/Tables", headers)).status == 200


@pytest.mark.parametrize("headers", [{"origin": PAGE_ORIGIN}, {"sec-fetch-site": "same-origin"}])
def test_a_write_from_the_pages_origin_without_the_token_is_refused(headers: dict[str, str]) -> None:
    storage = Storage(":memory:")
    try:
        service = TableService(storage, allow_anonymous=True)  # so only the explorer's rule can refuse it
        explorer = Explorer(service, DEVSTORE_KEY)
        body = json.dumps({"TableName": "notoken"}).encode()
        response = explorer.handle(_request("POST", f"/{ACCOUNT}/Tables", {**REST, **headers}, body))
        assert response.status == 403 and "token" in _error(response.body)[1]
        assert service.table_names() == []
        # a read needs no token (it changes nothing); another origin is left to the CORS rules
        assert explorer.handle(_request("GET", f"/{ACCOUNT}/Tables", {**REST, **headers})).status == 200
        preflight = explorer.handle(_request("OPTIONS", f"/{ACCOUNT}/Tables", {
            "origin": PAGE_ORIGIN, "access-control-request-method": "POST"}))
        assert preflight.status == 403 and b"CorsPreflightFailure" in preflight.body  # the service's answer
        other = {**REST, "origin": "http://app.example"}
        assert explorer.handle(_request("POST", f"/{ACCOUNT}/Tables", other, body)).status == 201
    finally:
        storage.close()


def test_the_connection_string_needs_the_token(explorer: Explorer) -> None:
    response = explorer.handle(_from_page(explorer, "GET", "/_explorer/connection-string"))
    assert response.status == 200 and response.header("Cache-Control") == "no-store"
    assert json.loads(response.body) == {"connectionString": (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={DEVSTORE_KEY};"
        f"TableEndpoint=http://{HOST}/{ACCOUNT};")}
    refused = _from_page(explorer, "GET", "/_explorer/connection-string", origin="http://evil.example")
    assert explorer.handle(refused).status == 403


# ------------------------------------------------------------------ read-only

@pytest.mark.parametrize("method, path, extra", [
    ("POST", f"/{ACCOUNT}/Tables", {}),
    ("DELETE", f"/{ACCOUNT}/Tables('keep')", {}),
    ("PUT", f"/{ACCOUNT}/keep(PartitionKey='p',RowKey='r')", {}),
    ("MERGE", f"/{ACCOUNT}/keep(PartitionKey='p',RowKey='r')", {}),
    ("PATCH", f"/{ACCOUNT}/keep(PartitionKey='p',RowKey='r')", {}),
    ("POST", f"/{ACCOUNT}/$batch", {}),
    ("POST", f"/{ACCOUNT}/keep(PartitionKey='p',RowKey='r')", {"x-http-method": "DELETE"}),
    ("PUT", f"/{ACCOUNT}/", {}),
])
def test_read_only_refuses_every_write_of_the_page(service: TableService, method: str, path: str,
                                                   extra: dict[str, str]) -> None:
    explorer = Explorer(service, DEVSTORE_KEY, read_only=True)
    explorer.read_only = False
    assert explorer.handle(_from_page(explorer, "POST", f"/{ACCOUNT}/Tables", {"TableName": "keep"})).status == 201
    explorer.read_only = True
    request = _from_page(explorer, method, path, {"PartitionKey": "p", "RowKey": "r"}, **extra)
    request.x_http_methods = [extra["x-http-method"]] if extra else []
    response = explorer.handle(request)
    assert response.status == 403 and "read-only" in _error(response.body)[1]
    assert service.table_names() == ["keep"]
    assert explorer.handle(_from_page(explorer, "GET", f"/{ACCOUNT}/keep()")).status == 200


def test_read_only_page_says_so(service: TableService) -> None:
    explorer = Explorer(service, DEVSTORE_KEY, read_only=True)
    page = explorer.handle(_request("GET", "/")).body.decode()
    assert '<meta name="tablesdk-explorer-mode" content="read-only">' in page


# ------------------------------------------------------------------ a running emulator

def test_a_running_emulator_serves_the_page_and_clients_as_before() -> None:
    with DevStore(port=0, explorer_read_only=True) as store:
        assert store.explorer_url == f"http://127.0.0.1:{store.port}/"
        page = requests.get(store.explorer_url, timeout=30)
        assert page.status_code == 200 and "read-only" in page.text
        client = Client(store)  # a client with the key writes whatever the explorer's mode
        assert client.create_table("stillwrites").status_code == 201
        assert store.table_names() == ["stillwrites"]


def test_cors_rules_do_not_open_the_token_to_another_origin() -> None:
    with DevStore(port=0) as store:
        rules = (b'<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties><Cors><CorsRule>'
                 b"<AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET,POST,PUT,DELETE</AllowedMethods>"
                 b"<MaxAgeInSeconds>60</MaxAgeInSeconds><ExposedHeaders>*</ExposedHeaders>"
                 b"<AllowedHeaders>*</AllowedHeaders></CorsRule></Cors></StorageServiceProperties>")
        client = Client(store)
        resp = client.request("PUT", "?restype=service&comp=properties", data=rules,
                              headers={"Content-Type": "application/xml"}, accept=None)
        assert resp.status_code == 202
        token = re.search(r'explorer-token" content="([^"]+)"', requests.get(store.explorer_url, timeout=30).text)
        assert token is not None
        headers = {**REST, TOKEN_HEADER: token.group(1), "Origin": "http://app.example"}
        answer = requests.post(store.url + "/Tables", json={"TableName": "corsopen"}, headers=headers, timeout=30)
        assert answer.status_code == 403
        assert store.table_names() == []


def test_without_the_explorer_the_root_address_is_the_services() -> None:
    with DevStore(port=0, explorer=False) as store:
        page = requests.get(store.explorer_url, timeout=30)
        assert page.status_code != 200 and "tablesdk-explorer" not in page.text
        assert requests.get(store.explorer_url + "_explorer/app.js", timeout=30).status_code != 200
        refused = requests.post(store.url + "/Tables", json={"TableName": "nope"},
                                headers={**REST, TOKEN_HEADER: "anything"}, timeout=30)
        assert refused.status_code == 403  # no explorer: an unsigned request, as any other
        assert store.table_names() == []


def test_command_line_options() -> None:
    args = build_parser().parse_args(["--read-only"])
    assert args.read_only and not args.no_explorer
    args = build_parser().parse_args(["--no-explorer"])
    assert args.no_explorer and not args.read_only


def test_command_line_prints_the_explorer_address() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "tablesdk.devstore", "--port", "0", "--read-only"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        assert lines[2].startswith("devstore: explorer http://127.0.0.1:") and lines[2].endswith(" (read-only)\n")
        url = lines[2].split()[2]
        page = requests.get(url, timeout=30)
        assert page.status_code == 200 and 'content="read-only"' in page.text
    finally:
        proc.terminate()
        try:
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()


def test_tablesdk_serve_passes_the_explorer_options_on(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("click")
    from tablesdk.cli._app import run

    with pytest.raises(SystemExit) as exited:
        run(["serve", "--help"])
    assert exited.value.code == 0
    usage = capsys.readouterr().out
    assert "tablesdk serve" in usage and "--read-only" in usage and "--no-explorer" in usage
