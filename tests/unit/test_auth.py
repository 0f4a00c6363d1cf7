"""Unit tests for tablesdk._core._auth: Shared Key, Shared Key Lite, SAS.

Every expected signature is computed here from a string-to-sign written out by
hand as a literal, never by calling the code under test.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, quote

import pytest

from tablesdk._core._auth import (
    SasCredential,
    SharedKeyCredential,
    SharedKeyLiteCredential,
    TableCredential,
    generate_table_sas,
)
from tablesdk._core._errors import TableValidationError

# A recognisable key: if it ever leaks into a repr or message, the tests see it.
KEY_BYTES = b"NEVER-LEAK-THIS-ACCOUNT-KEY-0123456789-abcdef"
KEY = base64.b64encode(KEY_BYTES).decode("ascii")
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
DATE = "Tue, 02 Jan 2024 03:04:05 GMT"


def expected_sig(key_b64: str, string_to_sign: str) -> str:
    digest = hmac.new(base64.b64decode(key_b64), string_to_sign.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def secrets_absent(text: str, *secrets: str) -> bool:
    return all(secret not in text for secret in secrets)


# ----------------------------------------------------------------- Shared Key


def test_shared_key_get_tables_host_style() -> None:
    cred = SharedKeyCredential("myaccount", KEY)
    headers = {"x-ms-date": DATE, "x-ms-version": "2019-02-02", "Accept": "application/json"}
    url = "https://myaccount.table.core.windows.net/Tables"
    assert cred.apply("GET", url, headers) == url
    sig = expected_sig(KEY, "GET\n\n\nTue, 02 Jan 2024 03:04:05 GMT\n/myaccount/Tables")
    assert headers["Authorization"] == f"SharedKey myaccount:{sig}"
    assert headers["x-ms-date"] == DATE


def test_shared_key_post_insert_with_content_type() -> None:
    cred = SharedKeyCredential("myaccount", KEY)
    headers = {
        "x-ms-date": DATE,
        "Content-Type": "application/json;odata=nometadata",
        "Prefer": "return-no-content",
    }
    url = "https://myaccount.table.core.windows.net/mytable"
    cred.apply("POST", url, headers)
    sig = expected_sig(
        KEY,
        "POST\n\napplication/json;odata=nometadata\nTue, 02 Jan 2024 03:04:05 GMT\n/myaccount/mytable",
    )
    assert headers["Authorization"] == f"SharedKey myaccount:{sig}"


def test_shared_key_content_md5_and_header_case_insensitive() -> None:
    cred = SharedKeyCredential("myaccount", KEY)
    headers = {
        "X-MS-DATE": DATE,
        "content-type": "application/atom+xml",
        "content-md5": "Q2hlY2sgSW50ZWdyaXR5IQ==",
    }
    cred.apply("merge", "https://myaccount.table.core.windows.net/t(PartitionKey='p',RowKey='r')", headers)
    sig = expected_sig(
        KEY,
        "MERGE\nQ2hlY2sgSW50ZWdyaXR5IQ==\napplication/atom+xml\nTue, 02 Jan 2024 03:04:05 GMT\n"
        "/myaccount/t(PartitionKey='p',RowKey='r')",
    )
    assert headers["Authorization"] == f"SharedKey myaccount:{sig}"
    assert "x-ms-date" not in headers  # the existing X-MS-DATE was used, not duplicated


def test_shared_key_path_style_emulator_url_has_account_twice() -> None:
    cred = SharedKeyCredential("devstoreaccount1", DEV_KEY)
    headers = {"x-ms-date": DATE}
    url = "http://127.0.0.1:10002/devstoreaccount1/Tables"
    assert cred.apply("GET", url, headers) == url
    sig = expected_sig(DEV_KEY, "GET\n\n\nTue, 02 Jan 2024 03:04:05 GMT\n/devstoreaccount1/devstoreaccount1/Tables")
    assert headers["Authorization"] == f"SharedKey devstoreaccount1:{sig}"


def test_shared_key_keeps_only_comp_from_query() -> None:
    cred = SharedKeyCredential("myaccount", KEY)
    headers = {"x-ms-date": DATE}
    url = "https://myaccount.table.core.windows.net/mytable?timeout=30&comp=acl&$top=5"
    cred.apply("GET", url, headers)
    sig = expected_sig(KEY, "GET\n\n\nTue, 02 Jan 2024 03:04:05 GMT\n/myaccount/mytable?comp=acl")
    assert headers["Authorization"] == f"SharedKey myaccount:{sig}"


def test_shared_key_query_without_comp_is_dropped_and_path_kept_encoded() -> None:
    cred = SharedKeyCredential("myaccount", KEY)
    headers = {"x-ms-date": DATE}
    url = (
        "https://myaccount.table.core.windows.net/mytable(PartitionKey='a%20b',RowKey='100%25')"
        "?$filter=Rating%20gt%203&$select=Text"
    )
    cred.apply("GET", url, headers)
    sig = expected_sig(
        KEY,
        "GET\n\n\nTue, 02 Jan 2024 03:04:05 GMT\n/myaccount/mytable(PartitionKey='a%20b',RowKey='100%25')",
    )
    assert headers["Authorization"] == f"SharedKey myaccount:{sig}"


def test_shared_key_service_properties_on_root_path() -> None:
    cred = SharedKeyCredential("myaccount", KEY)
    headers = {"x-ms-date": DATE}
    cred.apply("PUT", "https://myaccount.table.core.windows.net/?restype=service&comp=properties", headers)
    sig = expected_sig(KEY, "PUT\n\n\nTue, 02 Jan 2024 03:04:05 GMT\n/myaccount/?comp=properties")
    assert headers["Authorization"] == f"SharedKey myaccount:{sig}"


def test_shared_key_lite() -> None:
    cred = SharedKeyLiteCredential("myaccount", KEY)
    headers = {"x-ms-date": DATE, "Content-Type": "application/json", "Content-MD5": "abc="}
    url = "https://myaccount.table.core.windows.net/mytable?comp=acl&timeout=5"
    assert cred.apply("PUT", url, headers) == url
    sig = expected_sig(KEY, "Tue, 02 Jan 2024 03:04:05 GMT\n/myaccount/mytable?comp=acl")
    assert headers["Authorization"] == f"SharedKeyLite myaccount:{sig}"


def test_shared_key_lite_path_style() -> None:
    cred = SharedKeyLiteCredential("devstoreaccount1", DEV_KEY)
    headers = {"x-ms-date": DATE}
    cred.apply("DELETE", "http://127.0.0.1:10002/devstoreaccount1/Tables('mytable')", headers)
    sig = expected_sig(DEV_KEY, "Tue, 02 Jan 2024 03:04:05 GMT\n/devstoreaccount1/devstoreaccount1/Tables('mytable')")
    assert headers["Authorization"] == f"SharedKeyLite devstoreaccount1:{sig}"


def test_apply_sets_rfc1123_date_when_absent_and_signs_it() -> None:
    cred = SharedKeyCredential("myaccount", KEY)
    headers: dict[str, str] = {}
    cred.apply("GET", "https://myaccount.table.core.windows.net/Tables", headers)
    date = headers["x-ms-date"]
    assert re.fullmatch(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT", date)
    assert "Date" not in headers
    sig = expected_sig(KEY, f"GET\n\n\n{date}\n/myaccount/Tables")
    assert headers["Authorization"] == f"SharedKey myaccount:{sig}"


def test_apply_replaces_previous_authorization_in_any_case() -> None:
    cred = SharedKeyCredential("myaccount", KEY)
    headers = {"x-ms-date": DATE, "authorization": "SharedKey myaccount:stale"}
    cred.apply("GET", "https://myaccount.table.core.windows.net/Tables", headers)
    assert "authorization" not in headers
    assert headers["Authorization"].startswith("SharedKey myaccount:")
    assert "stale" not in headers["Authorization"]


def test_credentials_are_table_credentials() -> None:
    assert isinstance(SharedKeyCredential("a", KEY), TableCredential)
    assert isinstance(SharedKeyLiteCredential("a", KEY), TableCredential)
    assert isinstance(SasCredential("sv=2019-02-02&sig=abc"), TableCredential)


def test_key_credential_repr_str_redact_key() -> None:
    for cls in (SharedKeyCredential, SharedKeyLiteCredential):
        cred = cls("myaccount", KEY)
        text = repr(cred)
        assert text == f"{cls.__name__}(account_name='myaccount', account_key=<redacted>)"
        assert secrets_absent(text + str(cred) + f"{cred!s} {cred!r}", KEY, KEY_BYTES.decode())


def test_key_credential_equality() -> None:
    assert SharedKeyCredential("a", KEY) == SharedKeyCredential("a", KEY)
    assert hash(SharedKeyCredential("a", KEY)) == hash(SharedKeyCredential("a", KEY))
    assert SharedKeyCredential("a", KEY) != SharedKeyCredential("b", KEY)
    assert SharedKeyCredential("a", KEY) != SharedKeyCredential("a", DEV_KEY)
    assert SharedKeyCredential("a", KEY) != SharedKeyLiteCredential("a", KEY)
    assert SharedKeyCredential("a", KEY).account_key == KEY


@pytest.mark.parametrize(
    "bad_key",
    ["", "   ", "NEVER-LEAK-not-base64!!", "NEVER-LEAK-THIS=", base64.b64encode(b"").decode()],
)
def test_bad_account_key_rejected_without_quoting_it(bad_key: str) -> None:
    with pytest.raises(ValueError) as info:
        SharedKeyCredential("myaccount", bad_key)
    assert "account_key" in str(info.value)
    if bad_key.strip():
        assert bad_key not in str(info.value)
        assert bad_key not in repr(info.value)


def test_empty_account_name_rejected() -> None:
    with pytest.raises(ValueError, match="account_name"):
        SharedKeyCredential("", KEY)


def test_nothing_logged_with_secrets(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    headers = {"x-ms-date": DATE}
    SharedKeyCredential("myaccount", KEY).apply("GET", "https://myaccount.table.core.windows.net/Tables", headers)
    signature = headers["Authorization"].split(":", 1)[1]
    assert secrets_absent(caplog.text, KEY, signature)


# ----------------------------------------------------------------- SAS credential


def test_sas_credential_appends_token_with_or_without_question_mark() -> None:
    for token in ("?sv=2019-02-02&tn=t&sp=r&sig=SECRETSIG%3D", "sv=2019-02-02&tn=t&sp=r&sig=SECRETSIG%3D"):
        cred = SasCredential(token)
        headers: dict[str, str] = {}
        assert cred.apply("GET", "https://a.table.core.windows.net/t()", headers) == (
            "https://a.table.core.windows.net/t()?sv=2019-02-02&tn=t&sp=r&sig=SECRETSIG%3D"
        )
        assert "Authorization" not in headers
        assert "x-ms-date" in headers
        assert cred.apply("GET", "https://a.table.core.windows.net/t()?$top=5", {}) == (
            "https://a.table.core.windows.net/t()?$top=5&sv=2019-02-02&tn=t&sp=r&sig=SECRETSIG%3D"
        )
        assert cred.sas_token == "sv=2019-02-02&tn=t&sp=r&sig=SECRETSIG%3D"


def test_sas_credential_keeps_existing_date() -> None:
    headers = {"x-ms-date": DATE}
    SasCredential("sv=2019-02-02&sig=abc").apply("GET", "https://a/t", headers)
    assert headers == {"x-ms-date": DATE}


def test_sas_credential_repr_hides_signature() -> None:
    cred = SasCredential("?sv=2019-02-02&tn=mytable&sp=raud&se=2030-01-01T00%3A00%3A00Z&sig=SECRETSIG%2Babc%3D")
    text = repr(cred) + str(cred)
    assert secrets_absent(text, "SECRETSIG", "%2Babc")
    assert "sig=<redacted>" in text
    assert "mytable" in text
    assert cred.fields["se"] == "2030-01-01T00:00:00Z"
    assert "sig" not in cred.fields


@pytest.mark.parametrize("token", ["", "?", "sv=2019-02-02&sp=r&se=SECRETISH"])
def test_sas_credential_requires_signature(token: str) -> None:
    with pytest.raises(ValueError, match="sas_token") as info:
        SasCredential(token)
    assert "SECRETISH" not in str(info.value)


def test_sas_credential_equality() -> None:
    assert SasCredential("?sv=1&sig=a") == SasCredential("sv=1&sig=a")
    assert SasCredential("sv=1&sig=a") != SasCredential("sv=1&sig=b")
    assert hash(SasCredential("sv=1&sig=a")) == hash(SasCredential("sv=1&sig=a"))


# ----------------------------------------------------------------- generate_table_sas

EXPIRY = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
START = datetime(2030, 1, 1, 0, 0, 0, tzinfo=timezone.utc)


def fields_of(token: str) -> dict[str, str]:
    parsed = parse_qs(token, keep_blank_values=True, strict_parsing=True)
    assert all(len(v) == 1 for v in parsed.values()), parsed
    return {k: v[0] for k, v in parsed.items()}


def test_sas_minimal_token_and_signature() -> None:
    token = generate_table_sas("myaccount", KEY, "MyTable", "r", expiry=EXPIRY)
    assert not token.startswith("?")
    f = fields_of(token)
    assert f == {
        "sv": "2019-02-02",
        "tn": "MyTable",
        "sp": "r",
        "se": "2030-01-02T03:04:05Z",
        "sig": f["sig"],
    }
    string_to_sign = "r\n\n2030-01-02T03:04:05Z\n/table/myaccount/mytable\n\n\n\n2019-02-02\n\n\n\n"
    assert f["sig"] == expected_sig(KEY, string_to_sign)


def test_sas_all_fields_signed_in_order() -> None:
    token = generate_table_sas(
        "myaccount",
        KEY,
        "Orders2024",
        "daur",
        expiry=EXPIRY,
        start=START,
        start_partition_key="p1",
        start_row_key="a b",
        end_partition_key="p9",
        end_row_key="z&z",
        policy_id="readers",
        protocol="https",
        ip="168.1.5.60-168.1.5.70",
    )
    f = fields_of(token)
    assert f["sp"] == "raud"  # canonical order
    assert f["st"] == "2030-01-01T00:00:00Z"
    assert (f["spk"], f["srk"], f["epk"], f["erk"]) == ("p1", "a b", "p9", "z&z")
    assert (f["si"], f["spr"], f["sip"], f["tn"]) == ("readers", "https", "168.1.5.60-168.1.5.70", "Orders2024")
    string_to_sign = (
        "raud\n"
        "2030-01-01T00:00:00Z\n"
        "2030-01-02T03:04:05Z\n"
        "/table/myaccount/orders2024\n"
        "readers\n"
        "168.1.5.60-168.1.5.70\n"
        "https\n"
        "2019-02-02\n"
        "p1\n"
        "a b\n"
        "p9\n"
        "z&z"
    )
    assert f["sig"] == expected_sig(KEY, string_to_sign)


def test_sas_values_are_url_encoded() -> None:
    token = generate_table_sas("myaccount", KEY, "mytable", "r", expiry=EXPIRY, end_partition_key="x&y=z", end_row_key="+/")
    raw = dict(part.split("=", 1) for part in token.split("&"))
    f = fields_of(token)
    assert raw["sig"] == quote(f["sig"], safe="")
    assert not re.search(r"[+/=]", raw["sig"])
    assert raw["epk"] == "x%26y%3Dz"
    assert raw["erk"] == "%2B%2F"
    assert raw["se"] == "2030-01-02T03%3A04%3A05Z"


def test_sas_datetimes_naive_is_utc_and_aware_is_converted() -> None:
    naive = generate_table_sas("a", KEY, "tbl", expiry=datetime(2030, 1, 2, 3, 4, 5, 999999))
    plus2 = timezone(timedelta(hours=2))
    aware = generate_table_sas("a", KEY, "tbl", expiry=datetime(2030, 1, 2, 5, 4, 5, tzinfo=plus2))
    assert fields_of(naive)["se"] == "2030-01-02T03:04:05Z"
    assert fields_of(aware)["se"] == "2030-01-02T03:04:05Z"
    assert naive == aware


def test_sas_version_is_signed() -> None:
    f = fields_of(generate_table_sas("a", KEY, "tbl", "a", expiry=EXPIRY, version="2015-04-05"))
    assert f["sv"] == "2015-04-05"
    assert f["sig"] == expected_sig(KEY, "a\n\n2030-01-02T03:04:05Z\n/table/a/tbl\n\n\n\n2015-04-05\n\n\n\n")


def test_sas_policy_only_allows_empty_permission() -> None:
    f = fields_of(generate_table_sas("a", KEY, "tbl", "", expiry=EXPIRY, policy_id="pol"))
    assert "sp" not in f
    assert f["sig"] == expected_sig(KEY, "\n\n2030-01-02T03:04:05Z\n/table/a/tbl\npol\n\n\n2019-02-02\n\n\n\n")
    with pytest.raises(TableValidationError) as info:
        generate_table_sas("a", KEY, "tbl", "", expiry=EXPIRY)
    assert info.value.field == "permission"


@pytest.mark.parametrize("perm, bad", [("rw", "'w'"), ("raudx", "'x'"), ("R", "'R'"), ("rl", "'l'")])
def test_sas_permission_letters_validated(perm: str, bad: str) -> None:
    with pytest.raises(TableValidationError) as info:
        generate_table_sas("a", KEY, "tbl", perm, expiry=EXPIRY)
    assert info.value.field == "permission"
    assert bad in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("name", ["ab", "1abc", "a-bc", "a_bc", "abcé", "a" * 64, "", "my table"])
def test_sas_table_name_validated(name: str) -> None:
    with pytest.raises(TableValidationError) as info:
        generate_table_sas("a", KEY, name, expiry=EXPIRY)
    assert info.value.field == "table_name"
    assert KEY not in str(info.value)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"start_row_key": "r"}, "start_row_key"),
        ({"end_row_key": "r"}, "end_row_key"),
        ({"protocol": "http"}, "protocol"),
        ({"ip": "999.1.1.1"}, "ip"),
        ({"ip": "1.1.1.1-2.2.2.2-3.3.3.3"}, "ip"),
        ({"version": "2013-08-15"}, "version"),
        ({"version": "latest"}, "version"),
        ({"policy_id": "p" * 65}, "policy_id"),
    ],
)
def test_sas_other_fields_validated(kwargs: dict[str, str], field: str) -> None:
    with pytest.raises(TableValidationError) as info:
        generate_table_sas("a", KEY, "tbl", expiry=EXPIRY, **kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_sas_expiry_must_be_datetime() -> None:
    with pytest.raises(TableValidationError) as info:
        generate_table_sas("a", KEY, "tbl", expiry="2030-01-01")  # type: ignore[arg-type]
    assert info.value.field == "expiry"


def test_sas_bad_key_never_quoted() -> None:
    with pytest.raises(ValueError) as info:
        generate_table_sas("a", "NEVER-LEAK-bad-key!", "tbl", expiry=EXPIRY)
    assert "NEVER-LEAK" not in str(info.value)
    assert "account_key" in str(info.value)


def test_sas_token_round_trips_through_credential() -> None:
    token = generate_table_sas("myaccount", KEY, "mytable", "ra", expiry=EXPIRY)
    cred = SasCredential("?" + token)
    sig = fields_of(token)["sig"]
    text = repr(cred) + str(cred)
    assert secrets_absent(text, sig, quote(sig, safe=""), KEY)
    url = cred.apply("POST", "https://myaccount.table.core.windows.net/mytable", {})
    assert url == "https://myaccount.table.core.windows.net/mytable?" + token
