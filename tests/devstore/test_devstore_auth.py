"""Loopback tests: Shared Key, Shared Key Lite and SAS verification (and agreement with tablesdk._core._auth)."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime, formatdate
from typing import Any
from urllib.parse import quote

import pytest
import requests
from lxml import etree

from devstore_helpers import MINIMAL, Client, build_batch, key_path, parse_batch_response, shared_key_signature
from tablesdk._core._auth import SharedKeyCredential, SharedKeyLiteCredential, generate_table_sas
from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY, DevStore
from tablesdk.devstore._auth import (
    account_sas_string_to_sign, canonicalized_resource, shared_key_lite_string_to_sign,
    shared_key_string_to_sign, sign, table_sas_string_to_sign,
)

pytestmark = pytest.mark.integration

WRONG_KEY = base64.b64encode(b"not the key" * 4).decode()


def assert_auth_failed(resp: requests.Response, code: str = "AuthenticationFailed") -> None:
    assert resp.status_code == 403, resp.text
    assert resp.headers["x-ms-error-code"] == code
    assert resp.headers["Content-Type"] == "application/xml"  # XML even though JSON was accepted
    root = etree.fromstring(resp.content)
    assert root.tag == "Error" and root.findtext("Code") == code
    assert "RequestId:" in root.findtext("Message")


def raw(client: Client, method: str, path: str, headers: dict[str, str], data: bytes | None = None) -> Any:
    url = client.store.url + "/" + path
    return client.session.request(method, url, headers=headers, data=data, timeout=30)


def base_headers() -> dict[str, str]:
    return {"x-ms-version": "2019-02-02", "Accept": MINIMAL, "x-ms-date": formatdate(usegmt=True)}


# ----------------------------------------------------------------- Shared Key / Shared Key Lite

def test_shared_key_lite(client: Client, table: str) -> None:
    resp = client.request("GET", f"{table}()", scheme="SharedKeyLite")
    assert resp.status_code == 200
    resp = client.insert(table, {"PartitionKey": "p", "RowKey": "lite"}, scheme="SharedKeyLite")
    assert resp.status_code == 201


def test_wrong_key(client: Client, table: str) -> None:
    headers = base_headers()
    resource = f"/{DEVSTORE_ACCOUNT}/{DEVSTORE_ACCOUNT}/{table}()"
    sig = shared_key_signature(WRONG_KEY, f"GET\n\n\n{headers['x-ms-date']}\n{resource}")
    headers["Authorization"] = f"SharedKey {DEVSTORE_ACCOUNT}:{sig}"
    resp = raw(client, "GET", f"{table}()", headers)
    assert_auth_failed(resp)
    detail = etree.fromstring(resp.content).findtext("AuthenticationErrorDetail")
    assert "string to sign" in detail and WRONG_KEY not in resp.text


def test_account_appears_twice_in_the_resource(client: Client, table: str) -> None:
    headers = base_headers()
    once = f"/{DEVSTORE_ACCOUNT}/{table}()"  # the hostname-style resource: wrong for path-style URLs
    sig = shared_key_signature(DEVSTORE_KEY, f"GET\n\n\n{headers['x-ms-date']}\n{once}")
    headers["Authorization"] = f"SharedKey {DEVSTORE_ACCOUNT}:{sig}"
    assert_auth_failed(raw(client, "GET", f"{table}()", headers))
    twice = f"/{DEVSTORE_ACCOUNT}{once}"
    sig = shared_key_signature(DEVSTORE_KEY, f"GET\n\n\n{headers['x-ms-date']}\n{twice}")
    headers["Authorization"] = f"SharedKey {DEVSTORE_ACCOUNT}:{sig}"
    assert raw(client, "GET", f"{table}()", headers).status_code == 200


def test_signature_covers_content_type_and_verb(client: Client, table: str) -> None:
    headers = base_headers()
    headers["Content-Type"] = "application/json"
    resource = f"/{DEVSTORE_ACCOUNT}/{DEVSTORE_ACCOUNT}/{table}"
    sig = shared_key_signature(DEVSTORE_KEY, f"POST\n\ntext/plain\n{headers['x-ms-date']}\n{resource}")
    headers["Authorization"] = f"SharedKey {DEVSTORE_ACCOUNT}:{sig}"
    body = json.dumps({"PartitionKey": "p", "RowKey": "r"}).encode()
    assert_auth_failed(raw(client, "POST", table, headers, body))
    sig = shared_key_signature(DEVSTORE_KEY, f"PUT\n\napplication/json\n{headers['x-ms-date']}\n{resource}")
    headers["Authorization"] = f"SharedKey {DEVSTORE_ACCOUNT}:{sig}"
    assert_auth_failed(raw(client, "POST", table, headers, body))


def test_comp_is_part_of_the_resource(client: Client) -> None:
    resp = client.request("GET", "?restype=service&comp=properties", accept=None)
    assert resp.status_code == 200


def test_date_header_instead_of_x_ms_date(client: Client, table: str) -> None:
    date = formatdate(usegmt=True)
    headers = {"x-ms-version": "2019-02-02", "Accept": MINIMAL, "Date": date}
    resource = f"/{DEVSTORE_ACCOUNT}/{DEVSTORE_ACCOUNT}/{table}()"
    headers["Authorization"] = f"SharedKeyLite {DEVSTORE_ACCOUNT}:" + shared_key_signature(
        DEVSTORE_KEY, f"{date}\n{resource}")
    assert raw(client, "GET", f"{table}()", headers).status_code == 200


@pytest.mark.parametrize("skew", [timedelta(minutes=-20), timedelta(minutes=20)])
def test_clock_skew_refused(client: Client, table: str, skew: timedelta) -> None:
    date = format_datetime(datetime.now(timezone.utc) + skew, usegmt=True)
    resp = client.request("GET", f"{table}()", headers={"x-ms-date": date})
    assert_auth_failed(resp)
    assert "too old" in etree.fromstring(resp.content).findtext("AuthenticationErrorDetail")


def test_small_skew_accepted(client: Client, table: str) -> None:
    date = format_datetime(datetime.now(timezone.utc) - timedelta(minutes=10), usegmt=True)
    assert client.request("GET", f"{table}()", headers={"x-ms-date": date}).status_code == 200


@pytest.mark.parametrize(
    "authorization",
    ["", "Bearer abc", "SharedKey otheraccount:abc=", "SharedKey devstoreaccount1", "Basic dXNlcjpwdw=="],
)
def test_bad_authorization_headers(client: Client, table: str, authorization: str) -> None:
    headers = base_headers()
    if authorization:
        headers["Authorization"] = authorization
    assert_auth_failed(raw(client, "GET", f"{table}()", headers))


def test_missing_date(client: Client, table: str) -> None:
    headers = {"x-ms-version": "2019-02-02", "Accept": MINIMAL,
               "Authorization": f"SharedKey {DEVSTORE_ACCOUNT}:abc="}
    assert_auth_failed(raw(client, "GET", f"{table}()", headers))


def test_unknown_account(client: Client) -> None:
    url = client.store.url.replace(DEVSTORE_ACCOUNT, "otheraccount") + "/Tables"
    resp = client.session.get(url, headers=base_headers(), timeout=30)
    assert resp.status_code == 404 and resp.headers["x-ms-error-code"] == "ResourceNotFound"
    assert etree.fromstring(resp.content).tag == "Error"


def test_anonymous_mode() -> None:
    with DevStore(port=0, allow_anonymous=True) as store:
        session = requests.Session()
        resp = session.post(store.url + "/Tables", json={"TableName": "anon"},
                            headers={"x-ms-version": "2019-02-02", "Accept": MINIMAL})
        assert resp.status_code == 201
        bad = Client(store).request("GET", "Tables", headers={"x-ms-date": "Mon, 01 Jan 2001 00:00:00 GMT"})
        assert bad.status_code == 403  # a signed request is still verified


# ----------------------------------------------------------------- agreement with tablesdk._core._auth

@pytest.mark.parametrize("credential_type", [SharedKeyCredential, SharedKeyLiteCredential])
def test_requests_signed_by_tablesdk_auth_are_accepted(
    client: Client, table: str, credential_type: type[SharedKeyCredential]
) -> None:
    credential = credential_type(DEVSTORE_ACCOUNT, DEVSTORE_KEY)
    pk, rk = "o'neil 100%", "a+b (c)"
    url = f"{client.store.url}/{table}"
    headers = {"x-ms-version": "2019-02-02", "Accept": MINIMAL, "Content-Type": "application/json"}
    url = credential.apply("POST", url, headers)
    resp = client.session.post(url, headers=headers, data=json.dumps({"PartitionKey": pk, "RowKey": rk}))
    assert resp.status_code == 201, resp.text
    url = f"{client.store.url}/{key_path(table, pk, rk)}"
    headers = {"x-ms-version": "2019-02-02", "Accept": MINIMAL}
    url = credential.apply("GET", url, headers)
    assert client.session.get(url, headers=headers).status_code == 200


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:10002/devstoreaccount1/Tables",
        "http://127.0.0.1:10002/devstoreaccount1/t(PartitionKey='a%20b',RowKey='o''n')",
        "http://127.0.0.1:10002/devstoreaccount1/t()?$filter=A%20eq%201&$top=5",
        "http://127.0.0.1:10002/devstoreaccount1/?restype=service&comp=properties",
        "http://127.0.0.1:10002/devstoreaccount1/$batch",
    ],
)
def test_string_to_sign_matches_tablesdk_auth(url: str) -> None:
    from urllib.parse import parse_qsl, urlsplit

    headers = {"x-ms-date": "Tue, 02 Jan 2024 03:04:05 GMT", "Content-Type": "application/json",
               "Content-MD5": "abc"}
    parts = urlsplit(url)
    resource = canonicalized_resource(DEVSTORE_ACCOUNT, parts.path, dict(parse_qsl(parts.query)))
    mine = shared_key_string_to_sign("PUT", "abc", "application/json", headers["x-ms-date"], resource)
    theirs = SharedKeyCredential(DEVSTORE_ACCOUNT, DEVSTORE_KEY).string_to_sign("PUT", url, headers)
    assert mine == theirs
    mine_lite = shared_key_lite_string_to_sign(headers["x-ms-date"], resource)
    assert mine_lite == SharedKeyLiteCredential(DEVSTORE_ACCOUNT, DEVSTORE_KEY).string_to_sign("PUT", url, headers)


def test_table_sas_string_to_sign_matches_generate_table_sas() -> None:
    from urllib.parse import parse_qsl

    expiry = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    token = generate_table_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, "MyTable", "raud", expiry=expiry,
                               start_partition_key="a", end_partition_key="m", end_row_key="z")
    fields = dict(parse_qsl(token))
    assert sign(base64.b64decode(DEVSTORE_KEY), table_sas_string_to_sign(DEVSTORE_ACCOUNT, fields)) == fields["sig"]


# ----------------------------------------------------------------- SAS

def sas_request(client: Client, method: str, path: str, token: str, **kw: Any) -> requests.Response:
    return client.request(method, path, scheme=None, query=token, **kw)


def table_sas(table: str, permission: str = "raud", **kw: Any) -> str:
    kw.setdefault("expiry", datetime.now(timezone.utc) + timedelta(hours=1))
    return generate_table_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, table, permission, **kw)


def test_table_sas_full_permissions(client: Client, table: str) -> None:
    token = table_sas(table)
    assert sas_request(client, "POST", table, token, json_body={"PartitionKey": "p", "RowKey": "r"}).status_code == 201
    assert sas_request(client, "GET", key_path(table, "p", "r"), token).status_code == 200
    assert sas_request(client, "GET", f"{table}()", token).status_code == 200
    assert sas_request(client, "MERGE", key_path(table, "p", "r"), token, json_body={"A": 1},
                       headers={"If-Match": "*"}).status_code == 204
    assert sas_request(client, "PUT", key_path(table, "p", "u"), token, json_body={"A": 1}).status_code == 204
    assert sas_request(client, "DELETE", key_path(table, "p", "r"), token,
                       headers={"If-Match": "*"}).status_code == 204


def test_table_sas_sv_sets_the_version(client: Client, table: str) -> None:
    resp = sas_request(client, "GET", f"{table}()", table_sas(table), version="2011-08-18")
    assert resp.status_code == 200 and resp.headers["x-ms-version"] == "2019-02-02"  # sv wins


def test_read_only_sas(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "r"})
    token = table_sas(table, "r")
    assert sas_request(client, "GET", f"{table}()", token).status_code == 200
    resp = sas_request(client, "POST", table, token, json_body={"PartitionKey": "p", "RowKey": "x"})
    assert_auth_failed(resp, "AuthorizationPermissionMismatch")
    resp = sas_request(client, "DELETE", key_path(table, "p", "r"), token, headers={"If-Match": "*"})
    assert_auth_failed(resp, "AuthorizationPermissionMismatch")
    # insert-or-replace needs both add and update
    resp = sas_request(client, "PUT", key_path(table, "p", "r"), table_sas(table, "ra"), json_body={})
    assert_auth_failed(resp, "AuthorizationPermissionMismatch")


def test_expired_and_future_sas(client: Client, table: str) -> None:
    expired = table_sas(table, expiry=datetime.now(timezone.utc) - timedelta(minutes=1))
    assert_auth_failed(sas_request(client, "GET", f"{table}()", expired))
    future = table_sas(table, start=datetime.now(timezone.utc) + timedelta(hours=1),
                       expiry=datetime.now(timezone.utc) + timedelta(hours=2))
    assert_auth_failed(sas_request(client, "GET", f"{table}()", future))


def test_tampered_sas(client: Client, table: str) -> None:
    token = table_sas(table, "r").replace("sp=r", "sp=raud")
    assert_auth_failed(sas_request(client, "POST", table, token, json_body={"PartitionKey": "p", "RowKey": "x"}))


def test_sas_for_another_table(client: Client, table: str) -> None:
    other = table + "z"
    client.create_table(other)
    resp = sas_request(client, "GET", f"{other}()", table_sas(table))
    assert_auth_failed(resp, "AuthorizationFailure")
    resp = sas_request(client, "POST", "Tables", table_sas(table), json_body={"TableName": "sasmade"})
    assert resp.status_code == 403


def test_sas_key_ranges(client: Client, table: str) -> None:
    for pk in ("a", "b", "c", "d"):
        client.insert(table, {"PartitionKey": pk, "RowKey": "1"})
        client.insert(table, {"PartitionKey": pk, "RowKey": "9"})
    token = table_sas(table, start_partition_key="b", start_row_key="5", end_partition_key="c", end_row_key="5")
    got = sas_request(client, "GET", f"{table}()", token).json()["value"]
    assert [(e["PartitionKey"], e["RowKey"]) for e in got] == [("b", "9"), ("c", "1")]
    assert sas_request(client, "GET", key_path(table, "b", "9"), token).status_code == 200
    assert_auth_failed(sas_request(client, "GET", key_path(table, "a", "1"), token), "AuthorizationFailure")
    assert_auth_failed(sas_request(client, "GET", key_path(table, "c", "9"), token), "AuthorizationFailure")
    resp = sas_request(client, "POST", table, token, json_body={"PartitionKey": "d", "RowKey": "0"})
    assert_auth_failed(resp, "AuthorizationFailure")
    resp = sas_request(client, "POST", table, token, json_body={"PartitionKey": "b", "RowKey": "6"})
    assert resp.status_code == 201


def test_table_sas_with_batch(client: Client, table: str) -> None:
    token = table_sas(table)
    ops = [("POST", table, {"PartitionKey": "p", "RowKey": f"r{i}"}, {}) for i in range(3)]
    ctype, body = build_batch(client.store.url, ops)
    resp = sas_request(client, "POST", "$batch", token, data=body, headers={"Content-Type": ctype})
    assert [p[0] for p in parse_batch_response(resp)] == [201, 201, 201]
    read_only = table_sas(table, "r")
    resp = sas_request(client, "POST", "$batch", read_only, data=body, headers={"Content-Type": ctype})
    (status, headers, part), = parse_batch_response(resp)
    assert status == 403  # refused as a whole: no operation index
    assert etree.fromstring(part).findtext("Code") == "AuthorizationPermissionMismatch"


def test_https_only_sas_on_http(client: Client, table: str) -> None:
    token = table_sas(table, protocol="https")
    assert_auth_failed(sas_request(client, "GET", f"{table}()", token), "AuthorizationProtocolMismatch")


def test_sas_ip_range(client: Client, table: str) -> None:
    assert sas_request(client, "GET", f"{table}()", table_sas(table, ip="127.0.0.1")).status_code == 200
    resp = sas_request(client, "GET", f"{table}()", table_sas(table, ip="10.0.0.1-10.0.0.9"))
    assert_auth_failed(resp, "AuthorizationSourceIPMismatch")


def account_sas(permissions: str, resource_types: str = "sco", services: str = "t",
                version: str = "2019-02-02") -> str:
    fields = {"sv": version, "ss": services, "srt": resource_types, "sp": permissions,
              "se": (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}
    fields["sig"] = sign(base64.b64decode(DEVSTORE_KEY), account_sas_string_to_sign(DEVSTORE_ACCOUNT, fields))
    return "&".join(f"{k}={quote(v, safe='')}" for k, v in fields.items())


def test_account_sas(client: Client) -> None:
    token = account_sas("rwdlacu")
    name = "acctsas" + str(abs(hash(token)) % 10**6)
    assert sas_request(client, "POST", "Tables", token, json_body={"TableName": name}).status_code == 201
    assert sas_request(client, "GET", "Tables", token).status_code == 200
    assert sas_request(client, "POST", name, token, json_body={"PartitionKey": "p", "RowKey": "r"}).status_code == 201
    assert sas_request(client, "DELETE", f"Tables('{name}')", token).status_code == 204
    objects_only = account_sas("rwdlacu", "o")
    resp = sas_request(client, "POST", "Tables", objects_only, json_body={"TableName": name})
    assert_auth_failed(resp, "AuthorizationResourceTypeMismatch")
    blob_only = account_sas("rwdlacu", services="b")
    assert_auth_failed(sas_request(client, "GET", "Tables", blob_only), "AuthorizationServiceMismatch")
    read_only = account_sas("rl")
    resp = sas_request(client, "POST", "Tables", read_only, json_body={"TableName": name})
    assert_auth_failed(resp, "AuthorizationPermissionMismatch")


def test_account_sas_2020_12_06_layout(client: Client) -> None:
    assert sas_request(client, "GET", "Tables", account_sas("l", version="2020-12-06")).status_code == 200


def test_old_sas_versions_refused(client: Client, table: str) -> None:
    token = table_sas(table) .replace("sv=2019-02-02", "sv=2013-08-15")
    assert_auth_failed(sas_request(client, "GET", f"{table}()", token))
