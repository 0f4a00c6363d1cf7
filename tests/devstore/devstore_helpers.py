"""Helpers for the devstore tests: a small signed HTTP client and $batch builder/parser.

The client signs with its own Shared Key code (written from the service's
rules), not with tablesdk._core._auth, so the server's verifier is checked against an
independent signer; test_auth.py cross-checks against tablesdk._core._auth as well.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from email.utils import formatdate
from typing import Any
from urllib.parse import quote, urlsplit

import requests

from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY, DevStore

JSON_VERSION = "2019-02-02"
ATOM_VERSION = "2011-08-18"
MINIMAL = "application/json;odata=minimalmetadata"
NOMETA = "application/json;odata=nometadata"
FULL = "application/json;odata=fullmetadata"
ATOM = "application/atom+xml,application/xml"


def shared_key_signature(key_b64: str, string_to_sign: str) -> str:
    digest = hmac.new(base64.b64decode(key_b64), string_to_sign.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def sign_headers(method: str, url: str, headers: dict[str, str], scheme: str = "SharedKey",
                 key: str = DEVSTORE_KEY, account: str = DEVSTORE_ACCOUNT) -> None:
    """Add x-ms-date (if absent) and an Authorization header for ``url`` (already encoded)."""
    lower = {k.lower(): v for k, v in headers.items()}
    date = lower.get("x-ms-date") or formatdate(usegmt=True)
    headers.setdefault("x-ms-date", date)
    parts = urlsplit(url)
    resource = "/" + account + parts.path
    for item in parts.query.split("&"):
        if item.startswith("comp="):
            resource += "?comp=" + item[5:]
    if scheme == "SharedKey":
        to_sign = "\n".join([method, lower.get("content-md5", ""), lower.get("content-type", ""), date, resource])
    else:
        to_sign = date + "\n" + resource
    headers["Authorization"] = f"{scheme} {account}:{shared_key_signature(key, to_sign)}"


def key_path(table: str, pk: str, rk: str) -> str:
    def q(value: str) -> str:
        return quote(value.replace("'", "''"), safe="")

    return f"{table}(PartitionKey='{q(pk)}',RowKey='{q(rk)}')"


class Client:
    """A thin signed client over requests for one emulator."""

    def __init__(self, store: DevStore) -> None:
        self.store = store
        self.session = requests.Session()
        self.session.trust_env = False

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        data: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        version: str | None = JSON_VERSION,
        accept: str | None = MINIMAL,
        scheme: str | None = "SharedKey",
        query: str | None = None,
    ) -> requests.Response:
        """``path`` is relative to the endpoint and already percent-encoded."""
        url = self.store.url + "/" + path.lstrip("/")
        hdrs: dict[str, str] = {}
        if version is not None:
            hdrs["x-ms-version"] = version
        if accept is not None:
            hdrs["Accept"] = accept
        hdrs["DataServiceVersion"] = "3.0;NetFx"
        if json_body is not None:
            data = json.dumps(json_body)
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        if query:
            url += ("&" if "?" in url else "?") + query
        req = requests.Request(method, url, headers=hdrs, data=data, params=params)
        prepared = self.session.prepare_request(req)
        if scheme is not None:
            signed: dict[str, str] = dict(prepared.headers)
            sign_headers(method, prepared.url or url, signed, scheme)
            prepared.headers.update(signed)
        return self.session.send(prepared, timeout=30)

    # conveniences
    def create_table(self, name: str, **kw: Any) -> requests.Response:
        return self.request("POST", "Tables", json_body={"TableName": name}, **kw)

    def insert(self, table: str, entity: dict[str, Any], **kw: Any) -> requests.Response:
        return self.request("POST", table, json_body=entity, **kw)

    def get(self, table: str, pk: str, rk: str, **kw: Any) -> requests.Response:
        return self.request("GET", key_path(table, pk, rk), **kw)

    def query(self, table: str, params: dict[str, str] | None = None, **kw: Any) -> requests.Response:
        return self.request("GET", f"{table}()", params=params, **kw)

    def query_all(self, table: str, params: dict[str, str] | None = None) -> tuple[list[dict[str, Any]], int]:
        """Every entity, following continuation tokens; (entities, pages)."""
        params = dict(params or {})
        out: list[dict[str, Any]] = []
        pages = 0
        while True:
            resp = self.query(table, params)
            assert resp.status_code == 200, resp.text
            pages += 1
            out.extend(resp.json()["value"])
            npk = resp.headers.get("x-ms-continuation-NextPartitionKey")
            if npk is None:
                return out, pages
            params["NextPartitionKey"] = npk
            params["NextRowKey"] = resp.headers.get("x-ms-continuation-NextRowKey", "")


def build_batch(base_url: str, operations: list[tuple[str, str, Any, dict[str, str]]],
                *, newline: str = "\r\n", changeset: bool = True) -> tuple[str, bytes]:
    """(Content-Type, body) of a $batch with one change set of ``operations``.

    Each operation is (method, path relative to the endpoint, JSON body or None, extra headers).
    With ``changeset=False`` the single operation (a GET) is a direct part of the batch.
    """
    batch = f"batch_{uuid.uuid4()}"
    cs = f"changeset_{uuid.uuid4()}"
    nl = newline

    def op_text(method: str, path: str, body: Any, headers: dict[str, str]) -> str:
        lines = [f"{method} {base_url}/{path} HTTP/1.1"]
        hdrs = {"Accept": MINIMAL, "DataServiceVersion": "3.0;"}
        if body is not None:
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers)
        lines += [f"{k}: {v}" for k, v in hdrs.items()]
        payload = json.dumps(body) if body is not None and not isinstance(body, str) else (body or "")
        return (
            f"Content-Type: application/http{nl}Content-Transfer-Encoding: binary{nl}{nl}"
            + nl.join(lines) + nl + nl + payload + nl
        )

    if not changeset:
        (method, path, body, headers), = operations
        text = f"--{batch}{nl}" + op_text(method, path, body, headers) + f"--{batch}--{nl}"
        return f"multipart/mixed; boundary={batch}", text.encode("utf-8")
    parts = "".join(f"--{cs}{nl}" + op_text(*op) for op in operations)
    text = (
        f"--{batch}{nl}Content-Type: multipart/mixed; boundary={cs}{nl}{nl}"
        + parts + f"--{cs}--{nl}--{batch}--{nl}"
    )
    return f"multipart/mixed; boundary={batch}", text.encode("utf-8")


def parse_batch_response(resp: requests.Response) -> list[tuple[int, dict[str, str], bytes]]:
    """(status, headers, body) of each embedded response, checked with the stdlib HTTP parser."""
    import email.parser
    import http.client
    import io

    ctype = resp.headers["Content-Type"]
    msg = email.parser.BytesParser().parsebytes(
        b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + resp.content
    )
    out: list[tuple[int, dict[str, str], bytes]] = []

    def walk(part: Any) -> None:
        if part.is_multipart():
            for sub in part.get_payload():
                walk(sub)
            return
        raw = part.get_payload(decode=True)

        class _Sock:
            def makefile(self, *args: Any, **kwargs: Any) -> io.BytesIO:
                return io.BytesIO(raw)

        r = http.client.HTTPResponse(_Sock())  # type: ignore[arg-type]
        r.begin()  # raises BadStatusLine on a malformed part
        out.append((r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()))

    walk(msg)
    return out
