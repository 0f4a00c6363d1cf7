"""Account SAS, policy-only table SAS, Entra ID token credentials and the secondary endpoint."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import parse_qsl

import pytest
import responses

from tablesdk import (
    BearerTokenCredential,
    CloudStorageAccount,
    NoRetry,
    TableServiceError,
    TableValidationError,
    generate_account_sas,
    generate_table_sas,
)

KEY = base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
EXPIRY = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _sig(string_to_sign: str) -> str:
    digest = hmac.new(base64.b64decode(KEY), string_to_sign.encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def test_account_sas_golden() -> None:
    token = generate_account_sas("myaccount", KEY, resource_types="os", permission="lr",
                                 expiry=EXPIRY, services="tb", ip="10.0.0.1-10.0.0.9", protocol="https")
    fields = dict(parse_qsl(token))
    assert {k: v for k, v in fields.items() if k != "sig"} == {
        "sv": "2019-02-02", "ss": "bt", "srt": "so", "sp": "rl", "se": "2030-01-02T03:04:05Z",
        "sip": "10.0.0.1-10.0.0.9", "spr": "https",
    }
    expected = "myaccount\nrl\nbt\nso\n\n2030-01-02T03:04:05Z\n10.0.0.1-10.0.0.9\nhttps\n2019-02-02\n"
    assert fields["sig"] == _sig(expected)
    assert token.startswith("sv=2019-02-02&ss=bt&srt=so&sp=rl&se=")


def test_account_sas_encryption_scope_line_from_2020_12_06() -> None:
    fields = dict(parse_qsl(generate_account_sas("myaccount", KEY, resource_types="c", permission="l",
                                                 expiry=EXPIRY, version="2020-12-06")))
    assert fields["sig"] == _sig("myaccount\nl\nt\nc\n\n2030-01-02T03:04:05Z\n\n\n2020-12-06\n\n")


@pytest.mark.parametrize("kwargs, field", [
    ({"resource_types": "x"}, "resource_types"),
    ({"resource_types": ""}, "resource_types"),
    ({"permission": "rz"}, "permission"),
    ({"services": "tz"}, "services"),
    ({"protocol": "http"}, "protocol"),
    ({"ip": "not-an-ip"}, "ip"),
    ({"version": "2014-02-14"}, "version"),
])
def test_account_sas_checks(kwargs: dict[str, str], field: str) -> None:
    args: dict[str, object] = {"resource_types": "sco", "permission": "r", "expiry": EXPIRY}
    args.update(kwargs)
    with pytest.raises(TableValidationError) as info:
        generate_account_sas("myaccount", KEY, **args)  # type: ignore[arg-type]
    assert info.value.field == field


def test_table_sas_with_policy_may_omit_permission_and_expiry() -> None:
    token = generate_table_sas("myaccount", KEY, "MyTable", "", policy_id="readers")
    fields = dict(parse_qsl(token))
    assert set(fields) == {"sv", "tn", "si", "sig"}
    assert fields["sig"] == _sig("\n\n\n/table/myaccount/mytable\nreaders\n\n\n2019-02-02\n\n\n\n")
    with pytest.raises(TableValidationError) as info:
        generate_table_sas("myaccount", KEY, "MyTable", "r")
    assert info.value.field == "expiry"


# ----------------------------------------------------------------- tokens


@dataclass
class Token:
    token: str
    expires_on: int


class FakeCredential:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: object) -> Token:
        self.calls.append(scopes)
        return Token(f"secret-token-{len(self.calls)}", 10_000)


def test_bearer_credential_caches_and_refreshes_before_expiry() -> None:
    now = [1000.0]
    fake = FakeCredential()
    cred = BearerTokenCredential(fake, clock=lambda: now[0])
    headers: dict[str, str] = {}
    cred.apply("GET", "https://a.table.core.windows.net/Tables", headers)
    assert headers["Authorization"] == "Bearer secret-token-1" and "x-ms-date" in headers
    assert fake.calls == [("https://storage.azure.com/.default",)]
    now[0] = 10_000 - 301  # more than five minutes left: the cached token is used
    cred.apply("GET", "https://a.table.core.windows.net/Tables", headers)
    assert len(fake.calls) == 1
    now[0] = 10_000 - 299  # within five minutes of expiry: refreshed
    cred.apply("GET", "https://a.table.core.windows.net/Tables", headers)
    assert headers["Authorization"] == "Bearer secret-token-2"
    assert "secret" not in repr(cred) and "secret" not in str(cred)


def test_account_accepts_a_token_credential() -> None:
    account = CloudStorageAccount("myaccount", "https://myaccount.table.core.windows.net", FakeCredential())
    assert isinstance(account.credential, BearerTokenCredential)
    assert "secret" not in repr(account)
    with pytest.raises(ValueError):
        CloudStorageAccount("myaccount", "https://myaccount.table.core.windows.net", object())  # type: ignore[arg-type]


def test_token_needs_json_and_a_recent_version() -> None:
    account = CloudStorageAccount("myaccount", "https://myaccount.table.core.windows.net", FakeCredential())
    with pytest.raises(ValueError, match="atom"):
        account.create_cloud_table_client(payload_format="atom")
    with pytest.raises(ValueError, match="2019-02-02"):
        account.create_cloud_table_client(api_version="2018-03-28")
    assert account.create_cloud_table_client().api_version >= "2019-02-02"


@responses.activate
def test_token_never_reaches_errors_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    responses.add(responses.GET, "https://myaccount.table.core.windows.net/Tables", status=403,
                  body=b"<Error><Code>AuthenticationFailed</Code><Message>Bearer secret-token-1 refused</Message></Error>",
                  content_type="application/xml")
    account = CloudStorageAccount("myaccount", "https://myaccount.table.core.windows.net", FakeCredential())
    client = account.create_cloud_table_client(retry_policy=NoRetry())
    caplog.set_level(logging.DEBUG, logger="tablesdk")
    with pytest.raises(TableServiceError) as info:
        list(client.list_tables())
    assert "secret-token" not in str(info.value) and "secret-token" not in caplog.text
    assert responses.calls[0].request.headers["Authorization"] == "Bearer secret-token-1"


@pytest.mark.parametrize("endpoint, secondary", [
    ("https://myaccount.table.core.windows.net", "https://myaccount-secondary.table.core.windows.net"),
    ("http://127.0.0.1:10002/devstoreaccount1", "http://127.0.0.1:10002/devstoreaccount1-secondary"),
])
def test_secondary_endpoint(endpoint: str, secondary: str) -> None:
    assert CloudStorageAccount("myaccount", endpoint, None).secondary_table_endpoint == secondary


def test_no_secondary_for_an_ip_endpoint_without_account_path() -> None:
    with pytest.raises(ValueError):
        CloudStorageAccount("myaccount", "http://127.0.0.1:10002", None).secondary_table_endpoint  # noqa: B018
