"""Loopback tests: DevStore lifecycle, HTTP details, persistence, concurrency and the command line."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from devstore_helpers import MINIMAL, Client, key_path, sign_headers
from tablesdk.devstore import DEVSTORE_KEY, DevStore

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_url_and_connection_string() -> None:
    with DevStore(port=0, page_size=50) as store:
        assert store.port > 0
        assert store.url == f"http://127.0.0.1:{store.port}/devstoreaccount1"
        assert store.connection_string == (
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            f"AccountKey={DEVSTORE_KEY};TableEndpoint={store.url};"
        )
        assert "running" in repr(store)
        with socket.create_connection(("127.0.0.1", store.port), timeout=2):
            pass
        port = store.port
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_connection_string_parses_with_the_sdk() -> None:
    account_module = pytest.importorskip("tablesdk._core._account")
    with DevStore(port=0) as store:
        account = account_module.CloudStorageAccount.parse(store.connection_string)
        assert account.table_endpoint.rstrip("/") == store.url
        assert account.account_name == "devstoreaccount1"


def test_start_stop_restart_keeps_data() -> None:
    store = DevStore(port=0)
    try:
        store.start()
        client = Client(store)
        assert client.create_table("keepme").status_code == 201
        store.stop()
        store.start()  # a new port, same data
        assert Client(store).request("GET", "Tables").json()["value"] == [{"TableName": "keepme"}]
    finally:
        store.close()


def test_reset_clears_everything(store: DevStore, client: Client) -> None:
    with DevStore(port=0) as own:
        c = Client(own)
        c.create_table("one1")
        c.insert("one1", {"PartitionKey": "p", "RowKey": "r"})
        assert own.table_names() == ["one1"]
        own.reset()
        assert own.table_names() == []
        assert c.request("GET", "Tables").json()["value"] == []
        assert c.create_table("one1").status_code == 201
        assert c.query("one1").json()["value"] == []


def test_invalid_options() -> None:
    with pytest.raises(ValueError):
        DevStore(page_size=0)
    with pytest.raises(ValueError):
        DevStore(page_size=1001)
    with pytest.raises(ValueError):
        DevStore(max_scan=0)


def test_file_database_persists(tmp_path: Path) -> None:
    db = str(tmp_path / "devstore.sqlite")
    with DevStore(port=0, db=db) as store:
        client = Client(store)
        client.create_table("persisted")
        client.insert("persisted", {"PartitionKey": "p", "RowKey": "r", "When": "2024-01-02T03:04:05.1234567Z",
                                    "When@odata.type": "Edm.DateTime"})
    with DevStore(port=0, db=db) as store:
        got = Client(store).get("persisted", "p", "r").json()
        assert got["When"] == "2024-01-02T03:04:05.1234567Z"


def test_chunked_request_body(client: Client, table: str) -> None:
    payload = json.dumps({"PartitionKey": "p", "RowKey": "chunked", "S": "x" * 10000}).encode()

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(payload), 1000):
            yield payload[i:i + 1000]

    resp = client.request("POST", table, data=chunks(), headers={"Content-Type": "application/json"})  # type: ignore[arg-type]
    assert resp.request.headers.get("Transfer-Encoding") == "chunked"
    assert resp.status_code == 201, resp.text
    assert client.get(table, "p", "chunked").json()["S"] == "x" * 10000


def test_keep_alive_and_http11(store: DevStore, table: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", store.port, timeout=10)
    sockets = set()
    for i in range(5):
        path = f"/devstoreaccount1/{table}"
        headers = {"x-ms-version": "2019-02-02", "Accept": MINIMAL, "Content-Type": "application/json"}
        sign_headers("POST", store.url + f"/{table}", headers)
        conn.request("POST", path, body=json.dumps({"PartitionKey": "k", "RowKey": str(i)}), headers=headers)
        resp = conn.getresponse()
        assert resp.status == 201 and resp.version == 11
        resp.read()
        sockets.add(id(conn.sock))
    conn.close()
    assert len(sockets) == 1


def test_expect_100_continue(store: DevStore, table: str) -> None:
    body = json.dumps({"PartitionKey": "p", "RowKey": "expect"}).encode()
    headers = {"x-ms-version": "2019-02-02", "Accept": MINIMAL, "Content-Type": "application/json",
               "Content-Length": str(len(body)), "Expect": "100-continue", "Host": f"127.0.0.1:{store.port}"}
    sign_headers("POST", f"{store.url}/{table}", headers)
    with socket.create_connection(("127.0.0.1", store.port), timeout=10) as sock:
        head = f"POST /devstoreaccount1/{table} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        sock.sendall(head.encode() + b"\r\n")
        interim = sock.recv(4096)
        assert interim.startswith(b"HTTP/1.1 100")
        sock.sendall(body)
        final = b""
        while b"\r\n\r\n" not in final:
            final += sock.recv(4096)
        assert final.startswith(b"HTTP/1.1 201")


def _exchange(store: DevStore, raw: bytes) -> bytes:
    """Send raw bytes, read one answer (head and Content-Length body)."""
    with socket.create_connection(("127.0.0.1", store.port), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body


def test_request_header_lines(store: DevStore, table: str) -> None:
    # Header lines are read without the email parser; what that parser accepted still holds.
    body = json.dumps({"PartitionKey": "p", "RowKey": "folded"}).encode()
    headers = {"x-ms-version": "2019-02-02", "Accept": MINIMAL, "Content-Type": "application/json",
               "Content-Length": str(len(body)), "Host": f"127.0.0.1:{store.port}"}
    sign_headers("POST", f"{store.url}/{table}", headers)
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k != "Accept")
    # a folded (obsolete line folding) header and a repeated one: the first occurrence counts
    raw = (f"POST /devstoreaccount1/{table} HTTP/1.1\r\n{lines}Accept: application/json;\r\n"
           " odata=minimalmetadata\r\nx-ms-client-request-id: first\r\nx-ms-client-request-id: second\r\n\r\n")
    answer = _exchange(store, raw.encode() + body)
    assert answer.startswith(b"HTTP/1.1 201"), answer[:300]
    assert b"x-ms-client-request-id: first\r\n" in answer
    # more than 100 header lines, or one over 64 KiB: 431, as http.server answers
    many = "".join(f"X-Extra-{n}: v\r\n" for n in range(101))
    answer = _exchange(store, f"GET /devstoreaccount1/Tables HTTP/1.1\r\n{many}\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 431")
    long_line = "X-Long: " + "a" * 70_000 + "\r\n"
    answer = _exchange(store, f"GET /devstoreaccount1/Tables HTTP/1.1\r\n{long_line}\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 431")
    # two X-HTTP-Method headers are both seen (the service refuses the pair)
    post = headers | {"X-HTTP-Method": "MERGE"}
    path = f"/devstoreaccount1/{table}(PartitionKey='p',RowKey='folded')"
    sign_headers("POST", f"{store.url}/{table}(PartitionKey='p',RowKey='folded')", post)
    lines = "".join(f"{k}: {v}\r\n" for k, v in post.items())
    answer = _exchange(store, f"POST {path} HTTP/1.1\r\n{lines}X-HTTP-Method: MERGE\r\n\r\n".encode() + body)
    assert answer.startswith(b"HTTP/1.1 400") and b"XMethodIncorrectCount" in answer, answer[:400]


def test_head_and_options_not_allowed(client: Client) -> None:
    assert client.request("OPTIONS", "Tables").status_code == 405
    assert client.request("HEAD", "Tables").status_code == 405


def test_concurrent_inserts(client: Client, table: str) -> None:
    errors: list[str] = []

    def worker(n: int) -> None:
        own = Client(client.store)
        for i in range(40):
            resp = own.insert(table, {"PartitionKey": f"w{n}", "RowKey": f"{i:03d}"},
                              headers={"Prefer": "return-no-content"})
            if resp.status_code != 204:
                errors.append(resp.text)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(client.query_all(table)[0]) == 320


def test_concurrent_conditional_updates_one_wins(client: Client, table: str) -> None:
    etag = client.insert(table, {"PartitionKey": "p", "RowKey": "r", "V": 0}).headers["ETag"]
    statuses: list[int] = []
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        own = Client(client.store)
        barrier.wait()
        resp = own.request("PUT", key_path(table, "p", "r"), json_body={"V": n}, headers={"If-Match": etag})
        statuses.append(resp.status_code)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [204] + [412] * 7


def test_command_line(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tablesdk.devstore", "--port", "0", "--page-size", "5",
         "--db", str(tmp_path / "cli.sqlite")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("devstore: serving http://127.0.0.1:"), line + (proc.stderr.read() if proc.poll() else "")
        url = line.split("serving ", 1)[1].strip()
        assert "AccountKey=" in proc.stdout.readline()

        class _Store:
            pass

        fake = _Store()
        fake.url = url  # type: ignore[attr-defined]
        client = Client(fake)  # type: ignore[arg-type]
        assert client.create_table("clitable").status_code == 201
        for i in range(7):
            client.insert("clitable", {"PartitionKey": "p", "RowKey": str(i)})
        assert client.query_all("clitable")[1] == 2  # page size 5
    finally:
        proc.terminate()
        try:
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()


def test_command_line_port_in_use() -> None:
    with DevStore(port=0) as store:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        done = subprocess.run([sys.executable, "-m", "tablesdk.devstore", "--port", str(store.port)],
                              capture_output=True, text=True, env=env, timeout=30)
        assert done.returncode == 1 and "cannot listen" in done.stderr


def test_startup_is_fast() -> None:
    started = time.perf_counter()
    with DevStore(port=0) as store:
        with socket.create_connection(("127.0.0.1", store.port), timeout=2):
            pass
    assert time.perf_counter() - started < 2.0
