"""Smoke test of the test harness itself: a real Azurite answers SharedKey-signed JSON calls.

Uses only requests + hmac (not the SDK), so it checks the fixtures, not tablesdk.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from email.utils import formatdate
from urllib.parse import quote, urlsplit

import pytest
import requests

pytestmark = pytest.mark.integration

X_MS_VERSION = "2019-02-02"
JSON_ACCEPT = "application/json;odata=minimalmetadata"


def _parse_connection_string(conn: str) -> dict[str, str]:
    parts = {}
    for field in conn.split(";"):
        if field:
            key, _, value = field.partition("=")
            parts[key] = value
    return parts


def _signed_headers(
    verb: str, url: str, account: str, key_b64: str, content_type: str = ""
) -> dict[str, str]:
    """SharedKey headers for the Table service.

    StringToSign = VERB \\n Content-MD5 \\n Content-Type \\n x-ms-date \\n CanonicalizedResource,
    where CanonicalizedResource is "/" + account + the URL path as sent. For a path-style
    endpoint (http://127.0.0.1:port/devstoreaccount1/...) the account therefore appears twice.
    """
    date = formatdate(usegmt=True)
    path = urlsplit(url).path
    string_to_sign = f"{verb}\n\n{content_type}\n{date}\n/{account}{path}"
    digest = hmac.new(
        base64.b64decode(key_b64), string_to_sign.encode("utf-8"), hashlib.sha256
    ).digest()
    headers = {
        "x-ms-date": date,
        "x-ms-version": X_MS_VERSION,
        "Accept": JSON_ACCEPT,
        "DataServiceVersion": "3.0;NetFx",
        "MaxDataServiceVersion": "3.0;NetFx",
        "Authorization": f"SharedKey {account}:{base64.b64encode(digest).decode('ascii')}",
    }
    if content_type:
        headers["Content-Type"] = content_type
    return headers


def _error_code(resp: requests.Response) -> str:
    code = resp.headers.get("x-ms-error-code", "")
    if code:
        return code
    try:
        return str(resp.json()["odata.error"]["code"])
    except (ValueError, KeyError, TypeError):
        return ""


def test_create_list_conflict_delete(
    azurite_endpoint: str, azurite_connection_string: str, unique_table_name: str
) -> None:
    conn = _parse_connection_string(azurite_connection_string)
    endpoint = conn["TableEndpoint"]
    assert endpoint == azurite_endpoint
    account, key = conn["AccountName"], conn["AccountKey"]
    # Path-style endpoint: the account is the first path segment.
    assert urlsplit(endpoint).path == f"/{account}"
    assert urlsplit(endpoint).hostname in ("127.0.0.1", "localhost", "::1")  # loopback only

    name = unique_table_name
    assert name == name.lower() and name.isalnum() and 3 <= len(name) <= 63
    tables_url = f"{endpoint}/Tables"
    body = json.dumps({"TableName": name})

    with requests.Session() as session:
        # 1. create
        resp = session.post(
            tables_url,
            data=body,
            headers=_signed_headers("POST", tables_url, account, key, "application/json"),
            timeout=30,
        )
        assert resp.status_code in (201, 204), resp.text
        assert resp.headers.get("Server", "").startswith("Azurite-Table/"), resp.headers
        if resp.status_code == 201:
            assert resp.json()["TableName"] == name

        try:
            # 2. list: the new table is there
            resp = session.get(
                tables_url,
                params={"$filter": f"TableName eq '{name}'"},
                headers=_signed_headers("GET", tables_url, account, key),
                timeout=30,
            )
            assert resp.status_code == 200, resp.text
            assert resp.headers["Content-Type"].startswith("application/json")
            assert [t["TableName"] for t in resp.json()["value"]] == [name]

            # 3. create again: 409 TableAlreadyExists
            resp = session.post(
                tables_url,
                data=body,
                headers=_signed_headers("POST", tables_url, account, key, "application/json"),
                timeout=30,
            )
            assert resp.status_code == 409, resp.text
            assert _error_code(resp) == "TableAlreadyExists", resp.text
        finally:
            # 4. clean up
            table_url = f"{endpoint}/Tables('{quote(name)}')"
            resp = session.delete(
                table_url,
                headers=_signed_headers("DELETE", table_url, account, key),
                timeout=30,
            )
            assert resp.status_code == 204, resp.text


def test_bad_signature_is_rejected(azurite_endpoint: str, azurite_connection_string: str) -> None:
    """Azurite really checks SharedKey: a request signed with another key is refused."""
    conn = _parse_connection_string(azurite_connection_string)
    account = conn["AccountName"]
    wrong_key = base64.b64encode(b"not the devstore key" * 3).decode("ascii")
    tables_url = f"{azurite_endpoint}/Tables"
    resp = requests.get(
        tables_url, headers=_signed_headers("GET", tables_url, account, wrong_key), timeout=30
    )
    assert resp.status_code == 403, resp.text
