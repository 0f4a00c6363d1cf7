"""Unit tests for tablesdk._core._account: connection strings, endpoints, dev storage."""

from __future__ import annotations

import base64
import hashlib
import hmac
import sys
import types
from typing import Any

import pytest

from tablesdk._core._account import (
    DEVSTORE_ACCOUNT_KEY,
    DEVSTORE_ACCOUNT_NAME,
    CloudStorageAccount,
)
from tablesdk._core._auth import SasCredential, SharedKeyCredential

KEY = base64.b64encode(b"NEVER-LEAK-THIS-ACCOUNT-KEY-0123456789-abcdef").decode("ascii")
SAS = "sv=2019-02-02&tn=mytable&sp=r&se=2030-01-01T00%3A00%3A00Z&sig=SECRETSIGNATURE%2Bx%3D"
SAS_SIG = "SECRETSIGNATURE"


def key_of(account: CloudStorageAccount) -> str:
    assert isinstance(account.credential, SharedKeyCredential)
    return account.credential.account_key


# ----------------------------------------------------------------- forms


def test_default_endpoints_https() -> None:
    acct = CloudStorageAccount.parse(
        f"DefaultEndpointsProtocol=https;AccountName=myaccount;AccountKey={KEY};EndpointSuffix=core.windows.net"
    )
    assert acct.account_name == "myaccount"
    assert acct.table_endpoint == "https://myaccount.table.core.windows.net"
    assert isinstance(acct.credential, SharedKeyCredential)
    assert acct.credential.account_name == "myaccount"
    assert key_of(acct) == KEY
    assert not acct.is_development_storage


def test_protocol_defaults_to_https_and_http_is_honoured() -> None:
    assert CloudStorageAccount.parse(f"AccountName=a;AccountKey={KEY}").table_endpoint == (
        "https://a.table.core.windows.net"
    )
    assert CloudStorageAccount.parse(f"DefaultEndpointsProtocol=HTTP;AccountName=a;AccountKey={KEY}").table_endpoint == (
        "http://a.table.core.windows.net"
    )


def test_endpoint_suffix() -> None:
    acct = CloudStorageAccount.parse(f"AccountName=a;AccountKey={KEY};EndpointSuffix=core.chinacloudapi.cn")
    assert acct.table_endpoint == "https://a.table.core.chinacloudapi.cn"
    assert acct.endpoint_suffix == "core.chinacloudapi.cn"


def test_explicit_table_endpoint_trailing_slash_dropped() -> None:
    acct = CloudStorageAccount.parse(
        f"AccountName=a;AccountKey={KEY};TableEndpoint=https://a.table.cosmos.azure.com:443/"
    )
    assert acct.table_endpoint == "https://a.table.cosmos.azure.com:443"
    assert acct.account_name == "a"


def test_azurite_style_full_connection_string() -> None:
    acct = CloudStorageAccount.parse(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        f"AccountKey={DEVSTORE_ACCOUNT_KEY};"
        "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"
        "QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;"
        "TableEndpoint=http://127.0.0.1:10102/devstoreaccount1;"
    )
    assert acct.table_endpoint == "http://127.0.0.1:10102/devstoreaccount1"
    assert acct.account_name == "devstoreaccount1"
    assert not acct.is_development_storage


def test_sas_with_account_name() -> None:
    acct = CloudStorageAccount.parse(f"AccountName=myaccount;SharedAccessSignature={SAS}")
    assert acct.table_endpoint == "https://myaccount.table.core.windows.net"
    assert isinstance(acct.credential, SasCredential)
    assert acct.credential.sas_token == SAS


def test_sas_with_leading_question_mark() -> None:
    acct = CloudStorageAccount.parse(f"AccountName=myaccount;SharedAccessSignature=?{SAS}")
    assert isinstance(acct.credential, SasCredential)
    assert acct.credential.sas_token == SAS


@pytest.mark.parametrize(
    "endpoint, name, expected_endpoint",
    [
        ("https://acct1.table.core.windows.net", "acct1", "https://acct1.table.core.windows.net"),
        ("https://acct2.table.core.windows.net/", "acct2", "https://acct2.table.core.windows.net"),
        ("http://127.0.0.1:10002/devstoreaccount1", "devstoreaccount1", "http://127.0.0.1:10002/devstoreaccount1"),
        ("http://localhost:10002/devstoreaccount1/", "devstoreaccount1", "http://localhost:10002/devstoreaccount1"),
    ],
)
def test_table_endpoint_and_sas_derives_account_name(endpoint: str, name: str, expected_endpoint: str) -> None:
    acct = CloudStorageAccount.parse(f"TableEndpoint={endpoint};SharedAccessSignature={SAS}")
    assert acct.account_name == name
    assert acct.table_endpoint == expected_endpoint
    assert isinstance(acct.credential, SasCredential)


def test_development_storage() -> None:
    for acct in (
        CloudStorageAccount.parse("UseDevelopmentStorage=true"),
        CloudStorageAccount.parse("usedevelopmentstorage=TRUE;"),
        CloudStorageAccount.development_storage_account(),
    ):
        assert acct.is_development_storage
        assert acct.account_name == DEVSTORE_ACCOUNT_NAME == "devstoreaccount1"
        assert acct.table_endpoint == "http://127.0.0.1:10002/devstoreaccount1"
        assert key_of(acct) == DEVSTORE_ACCOUNT_KEY
        assert acct.credential == SharedKeyCredential("devstoreaccount1", DEVSTORE_ACCOUNT_KEY)


def test_development_storage_with_proxy() -> None:
    acct = CloudStorageAccount.parse("UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://ipv4.fiddler")
    assert acct.table_endpoint == "http://ipv4.fiddler:10002/devstoreaccount1"
    assert acct.development_storage_proxy_uri == "http://ipv4.fiddler"
    assert acct.is_development_storage
    same = CloudStorageAccount.development_storage_account("http://ipv4.fiddler:8888/")
    assert same.table_endpoint == "http://ipv4.fiddler:10002/devstoreaccount1"


def test_dev_storage_signs_path_style_with_account_twice() -> None:
    acct = CloudStorageAccount.development_storage_account()
    assert acct.credential is not None
    headers = {"x-ms-date": "Tue, 02 Jan 2024 03:04:05 GMT"}
    acct.credential.apply("GET", acct.table_endpoint + "/Tables", headers)
    digest = hmac.new(
        base64.b64decode(DEVSTORE_ACCOUNT_KEY),
        b"GET\n\n\nTue, 02 Jan 2024 03:04:05 GMT\n/devstoreaccount1/devstoreaccount1/Tables",
        hashlib.sha256,
    ).digest()
    assert headers["Authorization"] == "SharedKey devstoreaccount1:" + base64.b64encode(digest).decode()


def test_keys_case_insensitive_whitespace_and_trailing_semicolons() -> None:
    acct = CloudStorageAccount.parse(
        f"  defaultendpointsprotocol = https ; ACCOUNTNAME=myaccount ;accountkey= {KEY} ;;  "
    )
    assert acct.account_name == "myaccount"
    assert key_of(acct) == KEY
    assert acct.table_endpoint == "https://myaccount.table.core.windows.net"


def test_constructor_strips_trailing_slash_and_anonymous_allowed() -> None:
    acct = CloudStorageAccount("a", "https://a.table.core.windows.net/", None)
    assert acct.table_endpoint == "https://a.table.core.windows.net"
    assert acct.credential is None


# ----------------------------------------------------------------- round trip

ROUND_TRIP = [
    f"DefaultEndpointsProtocol=https;AccountName=myaccount;AccountKey={KEY};EndpointSuffix=core.windows.net",
    f"AccountName=myaccount;AccountKey={KEY}",
    f"DefaultEndpointsProtocol=http;AccountName=myaccount;AccountKey={KEY}",
    f"AccountName=myaccount;AccountKey={KEY};EndpointSuffix=core.chinacloudapi.cn",
    f"AccountName=myaccount;AccountKey={KEY};TableEndpoint=https://custom.example.com/tables/",
    f"DefaultEndpointsProtocol=https;AccountName=myaccount;AccountKey={KEY};TableEndpoint=https://myaccount.table.core.windows.net",
    f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={DEVSTORE_ACCOUNT_KEY};TableEndpoint=http://127.0.0.1:10102/devstoreaccount1;",
    f"AccountName=myaccount;SharedAccessSignature={SAS}",
    f"TableEndpoint=https://acct.table.core.windows.net;SharedAccessSignature={SAS}",
    f"TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;SharedAccessSignature=?{SAS}",
    "UseDevelopmentStorage=true",
    "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://ipv4.fiddler",
    "AccountName=anon",
    "TableEndpoint=https://anon.table.core.windows.net",
]


@pytest.mark.parametrize("conn", ROUND_TRIP)
def test_round_trip(conn: str) -> None:
    acct = CloudStorageAccount.parse(conn)
    again = CloudStorageAccount.parse(str(acct))
    assert again == acct
    assert hash(again) == hash(acct)
    assert (again.account_name, again.table_endpoint, again.credential) == (
        acct.account_name,
        acct.table_endpoint,
        acct.credential,
    )
    assert again.is_development_storage == acct.is_development_storage
    assert str(again) == str(acct)


def test_round_trip_of_constructed_accounts() -> None:
    for acct in (
        CloudStorageAccount.development_storage_account(),
        CloudStorageAccount.development_storage_account("https://proxy.local"),
        CloudStorageAccount("x", "https://x.table.core.windows.net", SharedKeyCredential("x", KEY)),
        CloudStorageAccount("x", "http://10.0.0.5:9000/x", SasCredential(SAS)),
        CloudStorageAccount(
            "x", "http://x.table.example.org", SharedKeyCredential("x", KEY),
            default_endpoints_protocol="http", endpoint_suffix="example.org",
        ),
    ):
        assert CloudStorageAccount.parse(str(acct)) == acct
        assert CloudStorageAccount.parse(acct.to_connection_string(include_secrets=True)) == acct


def test_str_is_connection_string_with_secrets() -> None:
    acct = CloudStorageAccount.parse(f"DefaultEndpointsProtocol=https;AccountName=myaccount;AccountKey={KEY}")
    assert str(acct) == f"DefaultEndpointsProtocol=https;AccountName=myaccount;AccountKey={KEY}"
    assert str(CloudStorageAccount.development_storage_account()) == "UseDevelopmentStorage=true"


def test_to_connection_string_without_secrets() -> None:
    for conn, secret in ((f"AccountName=a;AccountKey={KEY}", KEY), (f"AccountName=a;SharedAccessSignature={SAS}", SAS_SIG)):
        acct = CloudStorageAccount.parse(conn)
        text = acct.to_connection_string(include_secrets=False)
        assert secret not in text
        assert "AccountName=a" in text


def test_equality() -> None:
    a = CloudStorageAccount.parse(f"AccountName=a;AccountKey={KEY}")
    assert a == CloudStorageAccount.parse(f"accountname=a;accountkey={KEY}")
    assert a != CloudStorageAccount.parse(f"AccountName=a;AccountKey={DEVSTORE_ACCOUNT_KEY}")
    assert a != CloudStorageAccount.parse(f"AccountName=b;AccountKey={KEY}")
    assert a != CloudStorageAccount.parse(f"DefaultEndpointsProtocol=http;AccountName=a;AccountKey={KEY}")
    assert a != "AccountName=a"


# ----------------------------------------------------------------- bad strings

BAD = [
    (f"AccountName=a;AccountKey={KEY};Foo=bar", "Foo"),
    (f"AccountName=a;AccountKey={KEY};AccountEndpoint=https://x", "AccountEndpoint"),
    (f"AccountKey={KEY}", "AccountName"),
    (f"DefaultEndpointsProtocol=https;AccountKey={KEY};TableEndpoint=https://a.table.core.windows.net", "AccountName"),
    (f"SharedAccessSignature={SAS}", "AccountName"),
    (f"TableEndpoint=http://127.0.0.1:10002;SharedAccessSignature={SAS}", "AccountName"),
    (f"DefaultEndpointsProtocol=ftp;AccountName=a;AccountKey={KEY}", "DefaultEndpointsProtocol"),
    (f"AccountName=;AccountKey={KEY}", "AccountName"),
    ("AccountName=a;AccountKey=", "AccountKey"),
    ("AccountName=a;AccountKey=NEVER-LEAK-not*base64", "AccountKey"),
    ("AccountName=a;AccountKey===", "AccountKey"),
    (f"AccountName=a;AccountKey={KEY};SharedAccessSignature={SAS}", "SharedAccessSignature"),
    (f"AccountName=a;accountname=b;AccountKey={KEY}", "AccountName"),
    (f"AccountName=a;AccountKey={KEY};ACCOUNTKEY={KEY}", "AccountKey"),
    ("UseDevelopmentStorage=false", "UseDevelopmentStorage"),
    ("UseDevelopmentStorage=yes", "UseDevelopmentStorage"),
    ("UseDevelopmentStorage=true;AccountName=x", "AccountName"),
    (f"UseDevelopmentStorage=true;AccountKey={KEY}", "AccountKey"),
    ("UseDevelopmentStorage=true;DevelopmentStorageProxyUri=ftp://x", "DevelopmentStorageProxyUri"),
    ("UseDevelopmentStorage=true;DevelopmentStorageProxyUri=", "DevelopmentStorageProxyUri"),
    (f"DevelopmentStorageProxyUri=http://x;AccountName=a;AccountKey={KEY}", "DevelopmentStorageProxyUri"),
    (f"AccountName=a;AccountKey={KEY};TableEndpoint=ftp://x", "TableEndpoint"),
    (f"AccountName=a;AccountKey={KEY};TableEndpoint=not a url", "TableEndpoint"),
    (f"AccountName=a;AccountKey={KEY};TableEndpoint=https://x/?a=b", "TableEndpoint"),
    (f"AccountName=a;AccountKey={KEY};TableEndpoint=https://x:99999", "TableEndpoint"),
    ("AccountName=a;SharedAccessSignature=sv=2019-02-02&sp=r", "SharedAccessSignature"),
    (f"AccountName=a;AccountKey={KEY};EndpointSuffix=", "EndpointSuffix"),
    (f"AccountName=a;AccountKey={KEY};EndpointSuffix=https://core.windows.net", "EndpointSuffix"),
    (f"AccountName;AccountKey={KEY}", "AccountName"),
]


@pytest.mark.parametrize("conn, key", BAD)
def test_bad_connection_strings_name_the_key(conn: str, key: str) -> None:
    with pytest.raises(ValueError) as info:
        CloudStorageAccount.parse(conn)
    message = str(info.value)
    assert key in message
    assert KEY not in message and SAS_SIG not in message and "NEVER-LEAK" not in message


@pytest.mark.parametrize("conn", ["", "   ", ";;", "garbage"])
def test_empty_or_garbage_string(conn: str) -> None:
    with pytest.raises(ValueError):
        CloudStorageAccount.parse(conn)


def test_stray_secret_segments_are_not_quoted() -> None:
    # A value with no key, and an unknown key whose value is the secret.
    for conn in (f"AccountName=a;{KEY}", f"AccountName=a;Bogus={KEY}", f"AccountName=a;sig=+x/{SAS_SIG}"):
        with pytest.raises(ValueError) as info:
            CloudStorageAccount.parse(conn)
        assert KEY not in str(info.value)
        assert SAS_SIG not in str(info.value)


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match="account_name"):
        CloudStorageAccount("", "https://a.table.core.windows.net", None)
    with pytest.raises(ValueError, match="table_endpoint"):
        CloudStorageAccount("a", "a.table.core.windows.net", None)
    with pytest.raises(ValueError, match="credential"):
        CloudStorageAccount("a", "https://a.table.core.windows.net", KEY)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="account_name"):
        CloudStorageAccount("a;AccountKey=x", "https://a.table.core.windows.net", None)
    with pytest.raises(ValueError, match="default_endpoints_protocol"):
        CloudStorageAccount("a", "https://a.table.core.windows.net", None, default_endpoints_protocol="ftp")


# ----------------------------------------------------------------- secrets


@pytest.mark.parametrize("conn", [c for c in ROUND_TRIP])
def test_repr_never_contains_secrets(conn: str) -> None:
    acct = CloudStorageAccount.parse(conn)
    text = repr(acct) + repr(acct.credential) + f"{acct!r}"
    assert KEY not in text
    assert DEVSTORE_ACCOUNT_KEY not in text
    assert SAS_SIG not in text
    assert text.startswith("CloudStorageAccount(account_name=")


# ----------------------------------------------------------------- client factory


def test_create_cloud_table_client_passes_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, dict[str, Any]]] = []

    class FakeClient:
        def __init__(self, account: Any, **kwargs: Any) -> None:
            calls.append((account, kwargs))

    fake = types.ModuleType("tablesdk._clients._client")
    fake.CloudTableClient = FakeClient  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tablesdk._clients._client", fake)
    acct = CloudStorageAccount.development_storage_account()
    client = acct.create_cloud_table_client()
    assert isinstance(client, FakeClient)
    client2 = acct.create_cloud_table_client("atom", retry_policy="r")
    assert isinstance(client2, FakeClient)
    assert calls == [(acct, {"payload_format": "json"}), (acct, {"payload_format": "atom", "retry_policy": "r"})]


@pytest.mark.parametrize("name", ["acctā", "my acct", "a-b", "x" * 65])
def test_account_names_must_be_ascii_letters_and_digits(name: str) -> None:
    key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
    with pytest.raises(ValueError, match="AccountName|account_name") as info:
        CloudStorageAccount.parse(f"DefaultEndpointsProtocol=https;AccountName={name};AccountKey={key}")
    assert key not in str(info.value)
