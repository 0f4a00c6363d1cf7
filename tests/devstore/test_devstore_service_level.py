"""The emulator's service-level half: table ACLs and policy SAS, service properties and CORS,
the read-only secondary and its stats, account SAS on service operations, Bearer tokens.

Requests are built by hand (devstore_helpers' independent signer), so these tests pin the wire
behaviour, not the SDK's.
"""

from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator
from urllib.parse import parse_qsl

import pytest
import requests
from lxml import etree

from devstore_helpers import JSON_VERSION, MINIMAL, Client, sign_headers
from tablesdk import generate_account_sas, generate_table_sas
from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY, DevStore
from tablesdk.devstore._auth import account_sas_string_to_sign, sign

ACL = "application/xml"


def _iso(delta: timedelta) -> str:
    return (datetime.now(timezone.utc) + delta).strftime("%Y-%m-%dT%H:%M:%SZ")


def acl_body(*policies: tuple[str, str, str, str]) -> bytes:
    parts = ['<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers>']
    for policy_id, start, expiry, permission in policies:
        parts.append(f"<SignedIdentifier><Id>{policy_id}</Id><AccessPolicy>")
        parts += [f"<Start>{start}</Start>" if start else "", f"<Expiry>{expiry}</Expiry>" if expiry else "",
                  f"<Permission>{permission}</Permission>" if permission else ""]
        parts.append("</AccessPolicy></SignedIdentifier>")
    parts.append("</SignedIdentifiers>")
    return "".join(parts).encode()


def put_acl(client: Client, table: str, body: bytes) -> requests.Response:
    return client.request("PUT", f"{table}?comp=acl", data=body, headers={"Content-Type": ACL})


def sas_get(client: Client, path: str, token: str) -> requests.Response:
    return client.request("GET", path, scheme=None, query=token)


def code_of(resp: requests.Response) -> str:
    return str(resp.headers.get("x-ms-error-code"))


# ----------------------------------------------------------------- ACLs


def test_acl_round_trip_and_removal(client: Client, table: str) -> None:
    empty = client.request("GET", f"{table}?comp=acl")
    assert empty.status_code == 200 and etree.fromstring(empty.content).tag == "SignedIdentifiers"
    assert len(etree.fromstring(empty.content)) == 0
    body = acl_body(("readers", "2030-01-01T00:00:00Z", "2030-02-01T00:00:00Z", "r"), ("writers", "", "", "au"))
    assert put_acl(client, table, body).status_code == 204
    got = etree.fromstring(client.request("GET", f"{table}?comp=acl").content)
    assert [e.findtext("Id") for e in got] == ["readers", "writers"]
    assert got[0].findtext("AccessPolicy/Expiry") == "2030-02-01T00:00:00Z"
    assert got[1].find("AccessPolicy/Start") is None and got[1].findtext("AccessPolicy/Permission") == "au"
    assert put_acl(client, table, acl_body()).status_code == 204
    assert len(etree.fromstring(client.request("GET", f"{table}?comp=acl").content)) == 0


@pytest.mark.parametrize("policies", [
    [(f"p{i}", "", "", "r") for i in range(6)],  # six policies: the service keeps five
    [("x" * 65, "", "", "r")],  # ids are at most 64 characters
    [("p", "", "", "rw")],  # 'w' is not a table permission
])
def test_acl_limits(client: Client, table: str, policies: list[tuple[str, str, str, str]]) -> None:
    resp = put_acl(client, table, acl_body(*policies))
    assert resp.status_code == 400 and code_of(resp) == "InvalidXmlDocument"


def test_acl_of_missing_table_and_not_xml(client: Client, table: str) -> None:
    assert client.request("GET", "nosuchtable?comp=acl").status_code == 404
    resp = put_acl(client, table, b"<not-closed")
    assert resp.status_code == 400 and code_of(resp) == "InvalidXmlDocument"


def test_acl_goes_with_the_table(client: Client, table: str) -> None:
    assert put_acl(client, table, acl_body(("p", "", "2030-01-01T00:00:00Z", "r"))).status_code == 204
    assert client.request("DELETE", f"Tables('{table}')").status_code == 204
    assert client.create_table(table).status_code == 201
    assert len(etree.fromstring(client.request("GET", f"{table}?comp=acl").content)) == 0


def test_policy_sas_takes_permission_and_times_from_the_policy(client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "r"})
    put_acl(client, table, acl_body(("readers", _iso(-timedelta(minutes=5)), _iso(timedelta(hours=1)), "r")))
    token = generate_table_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, table, "", policy_id="readers")
    assert "se=" not in token and "sp=" not in token
    assert sas_get(client, f"{table}()", token).status_code == 200
    insert = client.request("POST", table, scheme=None, query=token, json_body={"PartitionKey": "p", "RowKey": "x"})
    assert insert.status_code == 403 and code_of(insert) == "AuthorizationPermissionMismatch"
    # removing the policy revokes every SAS that names it
    put_acl(client, table, acl_body())
    revoked = sas_get(client, f"{table}()", token)
    assert revoked.status_code == 403 and code_of(revoked) == "AuthenticationFailed"


def test_policy_times_are_enforced(client: Client, table: str) -> None:
    put_acl(client, table, acl_body(("old", "", _iso(-timedelta(minutes=1)), "r")))
    token = generate_table_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, table, "", policy_id="old")
    assert sas_get(client, f"{table}()", token).status_code == 403


def test_field_in_both_sas_and_policy_is_refused(client: Client, table: str) -> None:
    put_acl(client, table, acl_body(("p", "", _iso(timedelta(hours=1)), "r")))
    both = generate_table_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, table, "r", policy_id="p")  # sp twice
    assert sas_get(client, f"{table}()", both).status_code == 403
    split = generate_table_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, table, "", policy_id="p")
    assert sas_get(client, f"{table}()", split).status_code == 200
    # the policy has no permission: the SAS must carry it, and does
    put_acl(client, table, acl_body(("q", "", _iso(timedelta(hours=1)), "")))
    own = generate_table_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, table, "r", policy_id="q")
    assert sas_get(client, f"{table}()", own).status_code == 200


def test_a_sas_cannot_read_or_change_policies(client: Client, table: str) -> None:
    token = generate_table_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, table, "raud",
                               expiry=datetime.now(timezone.utc) + timedelta(hours=1))
    assert sas_get(client, f"{table}?comp=acl", token).status_code == 403


# ----------------------------------------------------------------- service properties, CORS


PROPS = (
    '<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties>'
    "<HourMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>false</IncludeAPIs>"
    "<RetentionPolicy><Enabled>true</Enabled><Days>7</Days></RetentionPolicy></HourMetrics>"
    "<Cors><CorsRule><AllowedOrigins>https://app.example</AllowedOrigins><AllowedMethods>GET,PUT</AllowedMethods>"
    "<MaxAgeInSeconds>120</MaxAgeInSeconds><ExposedHeaders>x-ms-request-id</ExposedHeaders>"
    "<AllowedHeaders>x-ms-meta-*,content-type</AllowedHeaders></CorsRule></Cors></StorageServiceProperties>"
).encode()
SERVICE = "?restype=service&comp=properties"


@pytest.fixture
def clean(store: DevStore) -> Iterator[None]:
    yield
    store.reset()  # drops the stored properties with the tables


def put_props(client: Client, body: bytes) -> requests.Response:
    return client.request("PUT", SERVICE, data=body, headers={"Content-Type": ACL}, accept=None)


def test_properties_set_and_get(client: Client, clean: None) -> None:
    assert put_props(client, PROPS).status_code == 202
    root = etree.fromstring(client.request("GET", SERVICE, accept=None).content)
    assert root.findtext("HourMetrics/RetentionPolicy/Days") == "7"
    assert root.findtext("Logging/Read") == "false"  # an absent section keeps its value
    assert root.findtext("Cors/CorsRule/AllowedMethods") == "GET,PUT"
    only_logging = (b'<?xml version="1.0"?><StorageServiceProperties><Logging><Version>1.0</Version>'
                    b"<Delete>true</Delete><Read>true</Read><Write>true</Write>"
                    b"<RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></Logging></StorageServiceProperties>")
    assert put_props(client, only_logging).status_code == 202
    root = etree.fromstring(client.request("GET", SERVICE, accept=None).content)
    assert root.findtext("Logging/Read") == "true" and root.findtext("HourMetrics/Enabled") == "true"
    assert root.find("Cors/CorsRule") is not None


@pytest.mark.parametrize("change", [
    (b"<Days>7</Days>", b"<Days>366</Days>"),
    (b"GET,PUT", b"GET,FETCH"),
    (b"<Cors>", b"<Cors>" + b"<CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET</AllowedMethods>"
     b"<MaxAgeInSeconds>1</MaxAgeInSeconds><ExposedHeaders/><AllowedHeaders/></CorsRule>" * 5),
    (b"x-ms-meta-*,content-type", b"a*,b*,c*"),
])
def test_properties_limits(client: Client, clean: None, change: tuple[bytes, bytes]) -> None:
    resp = put_props(client, PROPS.replace(*change))
    assert resp.status_code == 400 and code_of(resp) in ("InvalidXmlDocument", "InvalidXmlNodeValue")


def preflight(store: DevStore, origin: str | None, method: str | None, headers: str = "") -> requests.Response:
    hdrs = {k: v for k, v in {"Origin": origin, "Access-Control-Request-Method": method,
                              "Access-Control-Request-Headers": headers}.items() if v}
    return requests.options(f"{store.url}/Tables", headers=hdrs, timeout=10)


def test_cors_preflight_from_stored_rules(store: DevStore, client: Client, clean: None) -> None:
    assert preflight(store, "https://app.example", "GET").status_code == 403  # no rules yet
    put_props(client, PROPS)
    ok = preflight(store, "https://app.example", "PUT", "x-ms-meta-color,Content-Type")
    assert ok.status_code == 200
    assert ok.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert ok.headers["Access-Control-Max-Age"] == "120"
    assert "PUT" in ok.headers["Access-Control-Allow-Methods"]
    for origin, method, headers in [("https://evil.example", "GET", ""), ("https://app.example", "DELETE", ""),
                                    ("https://app.example", "GET", "x-custom")]:
        refused = preflight(store, origin, method, headers)
        assert refused.status_code == 403 and code_of(refused) == "CorsPreflightFailure"
    assert preflight(store, "https://app.example", None).status_code == 400


def test_cors_headers_on_actual_requests(client: Client, clean: None) -> None:
    put_props(client, PROPS)
    resp = client.request("GET", "Tables", headers={"Origin": "https://app.example"})
    assert resp.status_code == 200
    assert resp.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert resp.headers["Access-Control-Expose-Headers"] == "x-ms-request-id"
    other = client.request("GET", "Tables", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in other.headers


# ----------------------------------------------------------------- secondary, stats


def secondary(store: DevStore, method: str, path: str, **kw: Any) -> requests.Response:
    url = f"{store.secondary_url}/{path}"
    headers = {"x-ms-version": JSON_VERSION, "Accept": MINIMAL, **kw.pop("headers", {})}
    sign_headers(method, url, headers)
    return requests.request(method, url, headers=headers, timeout=10, **kw)


def test_secondary_is_a_read_only_view(store: DevStore, client: Client, table: str) -> None:
    client.insert(table, {"PartitionKey": "p", "RowKey": "r", "A": 1})
    resp = secondary(store, "GET", f"{table}()")
    assert resp.status_code == 200 and resp.json()["value"][0]["A"] == 1
    refused = secondary(store, "POST", table, json={"PartitionKey": "p", "RowKey": "x"},
                        headers={"Content-Type": "application/json"})
    assert refused.status_code == 403 and code_of(refused) == "InsufficientAccountPermissions"


def test_stats_only_on_the_secondary(store: DevStore, client: Client) -> None:
    primary = client.request("GET", "?restype=service&comp=stats", accept=None)
    assert primary.status_code == 400 and code_of(primary) == "InvalidQueryParameterValue"
    resp = secondary(store, "GET", "?restype=service&comp=stats")
    root = etree.fromstring(resp.content)
    assert resp.status_code == 200 and root.findtext("GeoReplication/Status") == "live"
    assert root.findtext("GeoReplication/LastSyncTime", "").endswith("GMT")


def test_stats_status_is_configurable() -> None:
    with DevStore(geo_replication_status="bootstrap") as store:
        root = etree.fromstring(secondary(store, "GET", "?restype=service&comp=stats").content)
        assert root.findtext("GeoReplication/Status") == "bootstrap"
        assert not root.findtext("GeoReplication/LastSyncTime")


# ----------------------------------------------------------------- account SAS, service level


def test_generate_account_sas_matches_the_emulator_string_to_sign() -> None:
    for version in ("2019-02-02", "2020-12-06"):
        token = generate_account_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, resource_types="sco", permission="rwdlacu",
                                     expiry=datetime(2030, 1, 1, tzinfo=timezone.utc), ip="127.0.0.1",
                                     protocol="https,http", version=version)
        fields = dict(parse_qsl(token))
        expected = sign(base64.b64decode(DEVSTORE_KEY), account_sas_string_to_sign(DEVSTORE_ACCOUNT, fields))
        assert fields["sig"] == expected


def test_account_sas_on_service_properties(client: Client, clean: None) -> None:
    def token(permission: str, resource_types: str = "s") -> str:
        return generate_account_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, resource_types=resource_types,
                                    permission=permission, expiry=datetime.now(timezone.utc) + timedelta(hours=1))

    assert client.request("GET", SERVICE, scheme=None, query=token("r"), accept=None).status_code == 200
    write = client.request("PUT", SERVICE, scheme=None, query=token("r"), data=PROPS,
                           headers={"Content-Type": ACL}, accept=None)
    assert write.status_code == 403 and code_of(write) == "AuthorizationPermissionMismatch"
    assert client.request("PUT", SERVICE, scheme=None, query=token("w"), data=PROPS,
                          headers={"Content-Type": ACL}, accept=None).status_code == 202
    wrong_type = client.request("GET", SERVICE, scheme=None, query=token("r", "co"), accept=None)
    assert wrong_type.status_code == 403 and code_of(wrong_type) == "AuthorizationResourceTypeMismatch"


# ----------------------------------------------------------------- Bearer tokens


def bearer(store: DevStore, token: str, version: str = JSON_VERSION) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}", "x-ms-version": version, "Accept": MINIMAL,
               "x-ms-date": datetime.now(timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")}
    return requests.get(f"{store.url}/Tables", headers=headers, timeout=10)


def test_bearer_tokens() -> None:
    with DevStore(bearer_tokens=["good-token-1", "good-token-2"]) as store:
        assert bearer(store, "good-token-2").status_code == 200
        wrong = bearer(store, "bad-token")
        assert wrong.status_code == 403 and code_of(wrong) == "AuthenticationFailed"
        assert b"bad-token" not in wrong.content
        assert bearer(store, "good-token-1", version="2018-11-09").status_code == 403  # before OAuth


def test_bearer_refused_without_tokens(store: DevStore) -> None:
    resp = bearer(store, "anything")
    assert resp.status_code == 403 and code_of(resp) == "AuthenticationFailed"


def test_bearer_token_command_line_option() -> None:
    from tablesdk.devstore.__main__ import build_parser

    args = build_parser().parse_args(["--bearer-token", "one", "--bearer-token", "two"])
    assert args.bearer_token == ["one", "two"]
    assert build_parser().parse_args([]).bearer_token == []
