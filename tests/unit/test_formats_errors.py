"""parse_error_body: JSON, OData XML and storage XML error bodies, empty and garbage bodies."""

from __future__ import annotations

from pathlib import Path

import pytest

from tablesdk._formats import parse_error_body as parse_via_package
from tablesdk._formats.errors import MAX_TEXT_EXCERPT, parse_error_body, strip_trailer

DATA = Path(__file__).resolve().parent.parent / "wire" / "data"


def test_seed_batch_error_keeps_the_operation_index() -> None:
    body = (DATA / "seed_batch_error_body.xml").read_bytes()
    assert parse_error_body(body, "application/xml") == ("InvalidInput", "1:One of the request inputs is not valid.")


def test_azurite_json_error() -> None:
    body = (DATA / "azurite_error_json.json").read_bytes()
    assert parse_error_body(body, "application/json;odata=minimalmetadata;streaming=true;charset=utf-8") == (
        "EntityAlreadyExists", "The specified entity already exists.",
    )


def test_azurite_json_batch_error_keeps_index_and_strips_trailer() -> None:
    body = (DATA / "azurite_batch_error_json.json").read_bytes()
    assert parse_error_body(body, None) == ("EntityAlreadyExists", "1:The specified entity already exists.")


def test_azurite_storage_xml_error() -> None:
    body = (DATA / "azurite_error_xml.xml").read_bytes()
    code, message = parse_error_body(body, "application/xml")
    assert code == "AuthorizationFailure"
    assert message == (
        "Server failed to authenticate the request. Make sure the value of the Authorization header "
        "is formed correctly including the signature."
    )


def test_azurite_atom_not_supported() -> None:
    body = (DATA / "azurite_atom_not_supported.xml").read_bytes()
    assert parse_error_body(body, "application/xml") == ("AtomFormatNotSupported", "Atom format is not supported.")


def test_sniffs_content_not_content_type() -> None:
    xml = (DATA / "azurite_error_xml.xml").read_bytes()
    js = (DATA / "azurite_error_json.json").read_bytes()
    assert parse_error_body(xml, "application/json")[0] == "AuthorizationFailure"
    assert parse_error_body(js, "application/xml")[0] == "EntityAlreadyExists"
    assert parse_error_body(js, "text/plain")[0] == "EntityAlreadyExists"


def test_package_function_delegates() -> None:
    body = (DATA / "seed_batch_error_body.xml").read_bytes()
    assert parse_via_package(body, "application/xml") == parse_error_body(body, "application/xml")
    assert parse_via_package(b"") == (None, "")


def test_empty_code_is_none() -> None:
    body = b'{"odata.error":{"code":"","message":{"lang":"en-US","value":"The specified resource name contains invalid characters.\\nRequestId:x\\nTime:y"}}}'
    assert parse_error_body(body) == (None, "The specified resource name contains invalid characters.")


def test_odata_v4_and_plain_string_message() -> None:
    assert parse_error_body(b'{"error":{"code":"X","message":"Plain.\\nRequestId:1\\nTime:2"}}') == ("X", "Plain.")


def test_storage_xml_ignores_authentication_detail() -> None:
    body = (
        b"<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>AuthenticationFailed</Code>"
        b"<Message>Server failed to authenticate the request.\nRequestId:abc\nTime:2026-01-01T00:00:00Z</Message>"
        b"<AuthenticationErrorDetail>The MAC signature found in the HTTP request 'c2VjcmV0' is not the same"
        b"</AuthenticationErrorDetail></Error>"
    )
    code, message = parse_error_body(body)
    assert code == "AuthenticationFailed" and message == "Server failed to authenticate the request."
    assert "c2VjcmV0" not in message


def test_odata_xml_with_inner_error() -> None:
    body = (
        b'<error xmlns="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"><code>OutOfRangeInput</code>'
        b'<message xml:lang="en-US">0:The request input is out of range.\r\nRequestId:1\r\nTime:2</message>'
        b"<innererror><message>detail</message></innererror></error>"
    )
    assert parse_error_body(body) == ("OutOfRangeInput", "0:The request input is out of range.")


@pytest.mark.parametrize("body", [b"", b"   \r\n", b"\xef\xbb\xbf", None])
def test_empty_bodies(body: bytes) -> None:
    assert parse_error_body(body, "application/xml") == (None, "")


def test_html_garbage_gives_a_short_text() -> None:
    body = (
        b"<!DOCTYPE html><html><head><title>Error</title></head><body><pre>Error: *Internal Azurite Error*: "
        b"accept value of 'atom+xml' is currently not supported by Azurite<br> &nbsp;at RequestPayLoadParser.parse "
        + b"x" * 5000
        + b"</pre></body></html>"
    )
    code, message = parse_error_body(body, "text/html")
    assert code is None
    assert message.startswith("Error Error: *Internal Azurite Error*: accept value of 'atom+xml'")
    assert len(message) <= MAX_TEXT_EXCERPT and message.endswith("...")
    assert "<" not in message


@pytest.mark.parametrize(
    "body, content_type",
    [
        (b"Service Unavailable", "text/plain"),
        (b"{not json", "application/json"),
        (b"[1, 2]", "application/json"),
        (b'{"message": "no error member"}', "application/json"),
        (b"<Error><Code>Broken", "application/xml"),
        (b"<unrelated><x/></unrelated>", "application/xml"),
        (b"\x00\xff\xfe garbage", None),
        (b"{" * 100000, "application/json"),
    ],
)
def test_garbage_never_raises(body: bytes, content_type: str | None) -> None:
    code, message = parse_error_body(body, content_type)
    assert code is None
    assert isinstance(message, str) and len(message) <= MAX_TEXT_EXCERPT


def test_plain_text_is_kept() -> None:
    assert parse_error_body(b"Service Unavailable", "text/plain") == (None, "Service Unavailable")


def test_xml_error_bodies_with_doctype_are_not_expanded() -> None:
    xxe = (
        b'<?xml version="1.0"?><!DOCTYPE Error [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b"<Error><Code>C</Code><Message>&x;</Message></Error>"
    )
    code, message = parse_error_body(xxe, "application/xml")
    assert code is None and "root:" not in message
    bomb_decls = '<!ENTITY a0 "xxxxxxxxxx">' + "".join(
        f'<!ENTITY a{i} "{("&a%d;" % (i - 1)) * 10}">' for i in range(1, 12)
    )
    bomb = f'<?xml version="1.0"?><!DOCTYPE Error [{bomb_decls}]><Error><Code>C</Code><Message>&a11;</Message></Error>'
    code, message = parse_error_body(bomb.encode(), "application/xml")
    assert code is None and len(message) <= MAX_TEXT_EXCERPT


def test_accepts_str_bodies() -> None:
    assert parse_error_body('{"odata.error":{"code":"A","message":{"value":"m"}}}') == ("A", "m")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text, want",
    [
        ("Msg.\nRequestId:1\nTime:2", "Msg."),
        ("Msg.\r\nRequestId:1\r\nTime:2", "Msg."),
        ("Two\nlines.\nRequestId:1\nTime:2", "Two\nlines."),
        ("No trailer", "No trailer"),
        ("1:Indexed. \nRequestId:1", "1:Indexed."),
        ("RequestId:1 in the middle is kept", "RequestId:1 in the middle is kept"),
    ],
)
def test_strip_trailer(text: str, want: str) -> None:
    assert strip_trailer(text) == want
