"""Unit tests for devstore's value handling, limits, negotiation, tokens and multipart code."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from tablesdk.devstore._errors import ServiceError
from tablesdk.devstore._multipart import boundary_of, parse_http_request, split_parts, write_batch_response, SubResponse
from tablesdk.devstore._negotiation import negotiate
from tablesdk.devstore._query_options import decode_token, encode_token
from tablesdk.devstore._url_parts import check_table_name, entity_keys, parse_literal_list
from tablesdk.devstore._wire import ATOM
from tablesdk.devstore._storage import Storage, etag_for
from tablesdk.devstore._values import (
    atom_property_xml, canonical_datetime, check_entity, check_key, parse_atom_entity, parse_json_body,
    json_fragment, parse_json_entity, props_from_json_members, props_from_storage, props_to_storage,
)


def code_of(fn: Any, *args: Any) -> str:
    with pytest.raises(ServiceError) as info:
        fn(*args)
    return info.value.code


# ----------------------------------------------------------------- JSON entity bodies

def test_json_types_with_and_without_annotations() -> None:
    pk, rk, props = parse_json_entity({
        "PartitionKey": "p", "RowKey": "r", "Timestamp": "ignored", "odata.etag": "ignored",
        "S": "text", "I": 5, "D": 2.5, "B": False,
        "L": "9223372036854775807", "L@odata.type": "Edm.Int64",
        "W": 3, "W@odata.type": "Edm.Double",
        "N": "NaN", "N@odata.type": "Edm.Double",
        "T": "2024-01-02T03:04:05.1234567Z", "T@odata.type": "Edm.DateTime",
        "T6": "2024-01-02T03:04:05.123456Z", "T6@odata.type": "Edm.DateTime",
        "G": "1B4E28BA-2FA1-11D2-883F-0016D3CCA427", "G@odata.type": "Edm.Guid",
        "X": "AQI=", "X@odata.type": "Edm.Binary",
        "Nothing": None,
    })
    assert (pk, rk) == ("p", "r")
    assert props["S"] == ("Edm.String", "text")
    assert props["I"] == ("Edm.Int32", 5)
    assert props["D"] == ("Edm.Double", 2.5)
    assert props["B"] == ("Edm.Boolean", False)
    assert props["L"] == ("Edm.Int64", 2**63 - 1)
    assert props["W"] == ("Edm.Double", 3.0)
    assert props["N"][0] == "Edm.Double" and math.isnan(props["N"][1])
    assert props["T"] == ("Edm.DateTime", "2024-01-02T03:04:05.1234567Z")
    assert props["T6"] == ("Edm.DateTime", "2024-01-02T03:04:05.1234560Z")
    assert props["G"] == ("Edm.Guid", "1b4e28ba-2fa1-11d2-883f-0016d3cca427")
    assert props["X"] == ("Edm.Binary", b"\x01\x02")
    assert "Nothing" not in props and "Timestamp" not in props


@pytest.mark.parametrize(
    "entity",
    [
        {"L": 5, "L@odata.type": "Edm.Int64"},  # Int64 must travel as a string
        {"L": "9223372036854775808", "L@odata.type": "Edm.Int64"},
        {"L": "12a", "L@odata.type": "Edm.Int64"},
        {"I": 2147483648},  # no annotation: Int32, out of range
        {"I": 2147483648, "I@odata.type": "Edm.Int32"},
        {"I": "5.0", "I@odata.type": "Edm.Int32"},  # "5" is an Int32 (test_devstore_service_answers)
        {"I": True, "I@odata.type": "Edm.Int32"},
        {"G": "xyz", "G@odata.type": "Edm.Guid"},
        {"X": "@@@", "X@odata.type": "Edm.Binary"},
        {"T": "not-a-date", "T@odata.type": "Edm.DateTime"},
        {"T": "1600-12-31T23:59:59Z", "T@odata.type": "Edm.DateTime"},
        {"D": "abc", "D@odata.type": "Edm.Double"},
        {"B": "yes", "B@odata.type": "Edm.Boolean"},
        {"S": 5, "S@odata.type": "Edm.String"},
        {"F": 1, "F@odata.type": "Edm.Foo"},
        {"O": {"a": 1}},
        {"A": [1, 2]},
        {"PartitionKey@odata.type": "Edm.Int32"},
    ],
)
def test_json_invalid_values(entity: dict[str, Any]) -> None:
    body = {"PartitionKey": "p", "RowKey": "r", **entity}
    assert code_of(parse_json_entity, body) == "InvalidInput"


@pytest.mark.parametrize(
    "name, code",
    [("1abc", "PropertyNameInvalid"), ("a-b", "PropertyNameInvalid"), ("a b", "PropertyNameInvalid"),
     ("x" * 256, "PropertyNameTooLong")],
)
def test_json_property_names(name: str, code: str) -> None:
    assert code_of(parse_json_entity, {name: 1}) == code


def test_json_duplicate_members() -> None:
    assert code_of(parse_json_body, b'{"A": 1, "A": 2}') == "DuplicatePropertiesSpecified"
    assert code_of(parse_json_body, b"not json") == "InvalidInput"
    assert code_of(parse_json_body, b"[1]") == "InvalidInput"


def test_value_size_limits() -> None:
    assert parse_json_entity({"S": "x" * 32768})[2]["S"][1] == "x" * 32768
    assert code_of(parse_json_entity, {"S": "x" * 32769}) == "PropertyValueTooLarge"
    assert code_of(parse_json_entity, {"S": "😀" * 16385}) == "PropertyValueTooLarge"  # 2 UTF-16 units each
    ok = "QUJD" * (65536 // 3)
    assert parse_json_entity({"X": ok, "X@odata.type": "Edm.Binary"})
    big = "A" * (((65537 + 2) // 3) * 4)
    assert code_of(parse_json_entity, {"X": big, "X@odata.type": "Edm.Binary"}) == "PropertyValueTooLarge"


def test_entity_limits() -> None:
    props = {f"P{i}": ("Edm.Int32", i) for i in range(252)}
    check_entity("p", "r", props)
    props["P252"] = ("Edm.Int32", 1)
    assert code_of(check_entity, "p", "r", props) == "TooManyProperties"
    big = {f"S{i}": ("Edm.String", "x" * 32000) for i in range(17)}  # ~1.09 MB
    assert code_of(check_entity, "p", "r", big) == "EntityTooLarge"
    fits = {f"S{i}": ("Edm.String", "x" * 32000) for i in range(16)}
    check_entity("p", "r", fits)


@pytest.mark.parametrize("bad", ["a/b", "a\\b", "a#b", "a?b", "a\tb", "a\x7fb", "a\x85b"])
def test_key_forbidden_characters(bad: str) -> None:
    assert code_of(check_key, "RowKey", bad) == "OutOfRangeInput"


def test_key_length() -> None:
    assert check_key("PartitionKey", "k" * 512) == "k" * 512
    assert code_of(check_key, "PartitionKey", "k" * 513) == "KeyValueTooLarge"
    assert check_key("RowKey", "") == ""
    assert code_of(check_key, "RowKey", 5) == "InvalidInput"


# ----------------------------------------------------------------- Atom entity bodies

def test_atom_entry_parsing() -> None:
    body = (
        '<entry xmlns="http://www.w3.org/2005/Atom" '
        'xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices" '
        'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">'
        '<content type="application/xml"><m:properties>'
        "<d:PartitionKey>p</d:PartitionKey><d:RowKey>r</d:RowKey>"
        '<d:Timestamp m:type="Edm.DateTime">0001-01-01T00:00:00</d:Timestamp>'
        "<d:S>  spaced  </d:S>"
        '<d:I m:type="Edm.Int32">-5</d:I><d:L m:type="Edm.Int64">123</d:L>'
        '<d:D m:type="Edm.Double">0</d:D><d:Inf m:type="Edm.Double">INF</d:Inf>'
        '<d:B m:type="Edm.Boolean">true</d:B>'
        '<d:N m:null="true" />'
        '<d:X m:type="Edm.Binary">AQI=</d:X>'
        "</m:properties></content></entry>"
    ).encode()
    pk, rk, props = parse_atom_entity(body)
    assert (pk, rk) == ("p", "r")
    assert props == {
        "S": ("Edm.String", "  spaced  "), "I": ("Edm.Int32", -5), "L": ("Edm.Int64", 123),
        "D": ("Edm.Double", 0.0), "Inf": ("Edm.Double", math.inf), "B": ("Edm.Boolean", True),
        "X": ("Edm.Binary", b"\x01\x02"),
    }


@pytest.mark.parametrize(
    "inner",
    [
        '<d:I m:type="Edm.Int32">2147483648</d:I>',
        '<d:I m:type="Edm.Int32">1_0</d:I>',
        '<d:G m:type="Edm.Guid">nope</d:G>',
        '<d:T m:type="Edm.DateTime">yesterday</d:T>',
        '<d:F m:type="Edm.Foo">1</d:F>',
        "<d:C><d:Nested>1</d:Nested></d:C>",
    ],
)
def test_atom_invalid_values(inner: str) -> None:
    body = (
        '<entry xmlns="http://www.w3.org/2005/Atom" '
        'xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices" '
        'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">'
        f'<content type="application/xml"><m:properties>{inner}</m:properties></content></entry>'
    ).encode()
    assert code_of(parse_atom_entity, body) == "InvalidInput"


def test_atom_rejects_dtds_and_entities() -> None:
    evil = (
        b'<?xml version="1.0"?><!DOCTYPE e [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b'<entry xmlns="http://www.w3.org/2005/Atom" '
        b'xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices" '
        b'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">'
        b"<content><m:properties><d:S>&x;</d:S></m:properties></content></entry>"
    )
    try:
        _, _, props = parse_atom_entity(evil)
    except ServiceError:
        return
    assert "root:" not in str(props.get("S", ("", ""))[1])


def test_atom_property_writer() -> None:
    assert atom_property_xml("S", "Edm.String", "a<b&c\rd") == "<d:S>a&lt;b&amp;c&#13;d</d:S>"
    assert atom_property_xml("S", "Edm.String", " x") == '<d:S xml:space="preserve"> x</d:S>'
    assert atom_property_xml("D", "Edm.Double", math.inf) == '<d:D m:type="Edm.Double">INF</d:D>'
    assert atom_property_xml("D", "Edm.Double", 1.0) == '<d:D m:type="Edm.Double">1.0</d:D>'
    assert atom_property_xml("B", "Edm.Boolean", False) == '<d:B m:type="Edm.Boolean">false</d:B>'


# ----------------------------------------------------------------- storage round trip and ETags

def test_storage_round_trip_is_lossless() -> None:
    props = {
        "S": ("Edm.String", "é中😀\x00"), "I": ("Edm.Int32", -(2**31)), "L": ("Edm.Int64", -(2**63)),
        "D": ("Edm.Double", -0.0), "Inf": ("Edm.Double", -math.inf), "B": ("Edm.Boolean", True),
        "T": ("Edm.DateTime", "9999-12-31T23:59:59.9999999Z"),
        "G": ("Edm.Guid", "00000000-0000-0000-0000-000000000000"), "X": ("Edm.Binary", bytes(range(256))),
    }
    back = props_from_storage(props_to_storage(props))
    assert back == props
    assert math.copysign(1, back["D"][1]) == -1


def test_json_members_round_trip_is_lossless() -> None:
    # What the storage keeps of an entity's properties now: their minimal-metadata JSON members.
    props = {
        "S": ("Edm.String", "é中😀\x00\u2028"), "I": ("Edm.Int32", -(2**31)), "L": ("Edm.Int64", -(2**63)),
        "D": ("Edm.Double", -0.0), "Whole": ("Edm.Double", 3.0), "Big": ("Edm.Double", 1e300),
        "Inf": ("Edm.Double", -math.inf), "PInf": ("Edm.Double", math.inf), "B": ("Edm.Boolean", True),
        "T": ("Edm.DateTime", "9999-12-31T23:59:59.9999999Z"), "T0": ("Edm.DateTime", "2024-01-01T00:00:00.0000000Z"),
        "T1": ("Edm.DateTime", "2024-01-01T00:00:00.1200000Z"), "NumStr": ("Edm.String", "12"),
        "G": ("Edm.Guid", "00000000-0000-0000-0000-000000000000"), "X": ("Edm.Binary", bytes(range(256))),
        "Empty": ("Edm.Binary", b""), "F": ("Edm.Boolean", False), "Zero": ("Edm.Int32", 0),
    }
    back = props_from_json_members(json_fragment(props))
    assert back == props
    assert all(type(back[name][1]) is type(value) for name, (_, value) in props.items())
    assert math.copysign(1, back["D"][1]) == -1
    nan = props_from_json_members(json_fragment({"N": ("Edm.Double", math.nan)}))["N"]
    assert nan[0] == "Edm.Double" and math.isnan(nan[1])
    assert props_from_json_members("") == {}


def test_timestamps_unique_and_increasing() -> None:
    storage = Storage()
    stamps = [storage.next_timestamp() for _ in range(2000)]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert all(len(s) == 28 and s.endswith("Z") for s in stamps)
    etag = etag_for(stamps[0])
    assert etag.startswith("W/\"datetime'") and "%3A" in etag and ":" not in etag.split("'")[1]


def test_canonical_datetime() -> None:
    assert canonical_datetime("2024-01-02T03:04:05Z") == "2024-01-02T03:04:05.0000000Z"
    assert canonical_datetime("2024-01-02T03:04:05.12345678Z") == "2024-01-02T03:04:05.1234567Z"
    assert canonical_datetime("2024-01-02T05:04:05+02:00") == "2024-01-02T03:04:05.0000000Z"
    assert canonical_datetime("1601-01-01T00:00:00Z") == "1601-01-01T00:00:00.0000000Z"
    for bad in ("1600-12-31T23:59:59Z", "x", ""):
        with pytest.raises(ValueError):
            canonical_datetime(bad)


# ----------------------------------------------------------------- URL pieces

def test_entity_keys_from_url_segment() -> None:
    assert entity_keys("PartitionKey='a',RowKey='b'") == ("a", "b")
    assert entity_keys("RowKey='b', PartitionKey='a'") == ("a", "b")
    assert entity_keys("PartitionKey='o''neil',RowKey=''") == ("o'neil", "")
    assert entity_keys("PartitionKey='a(b)',RowKey='x,y=z'") == ("a(b)", "x,y=z")
    for bad in ("PartitionKey='a'", "PartitionKey='a',RowKey='b',X='c'", "PartitionKey=a,RowKey='b'",
                "PartitionKey='a' RowKey='b'", "PartitionKey='a',RowKey='b"):
        with pytest.raises(ServiceError):
            entity_keys(bad)
    assert parse_literal_list("'tbl'") == [(None, "tbl")]


@pytest.mark.parametrize("name", ["abc", "A" * 63, "Table1"])
def test_table_names_ok(name: str) -> None:
    assert check_table_name(name) == name


@pytest.mark.parametrize(
    "name, code",
    [("ab", "OutOfRangeInput"), ("a" * 64, "OutOfRangeInput"), ("1abc", "InvalidResourceName"),
     ("a-bc", "InvalidResourceName"), ("a_bc", "InvalidResourceName"), ("tables", "InvalidResourceName"),
     ("Tables", "InvalidResourceName"), ("abcé", "InvalidResourceName")],
)
def test_table_names_refused(name: str, code: str) -> None:
    assert code_of(check_table_name, name) == code


def test_continuation_tokens_are_opaque_and_round_trip() -> None:
    for value in ("", "pk", "é中😀", "a b+c/d=e", "x" * 600):
        token = encode_token(value)
        assert token.startswith("1!") and value not in token[4:] or value == ""
        assert all(ch.isalnum() or ch in "!-_" for ch in token)
        assert decode_token(token) == value
    for bad in ("cGs=", "1!3!abc==", "2!2!cGs", "1!x!cGs", "1!3!***"):
        with pytest.raises(ServiceError):
            decode_token(bad)


# ----------------------------------------------------------------- format negotiation

@pytest.mark.parametrize(
    "accept, query, version, kind, level",
    [
        ("application/json;odata=nometadata", {}, "2019-02-02", "json", "nometadata"),
        ("application/json;odata=fullmetadata", {}, "2019-02-02", "json", "fullmetadata"),
        ("application/json", {}, "2013-08-15", "json", "minimalmetadata"),
        ("application/atom+xml,application/xml", {}, "2011-08-18", "atom", ""),
        ("", {}, "2015-04-05", "atom", ""),
        ("*/*", {}, "2009-09-19", "atom", ""),
        ("application/atom+xml;q=0.5, application/json;q=0.9", {}, "2015-04-05", "json", "minimalmetadata"),
        ("application/atom+xml", {"$format": "application/json;odata=nometadata"}, "2019-02-02", "json",
         "nometadata"),
        ("application/json", {"$format": "atom"}, "2015-04-05", "atom", ""),
    ],
)
def test_negotiate(accept: str, query: dict[str, str], version: str, kind: str, level: str) -> None:
    fmt = negotiate({"accept": accept} if accept else {}, query, version)
    assert fmt.kind == kind
    if kind == "json":
        assert fmt.metadata == level
    else:
        assert fmt == ATOM


@pytest.mark.parametrize(
    "accept, version, code",
    [("application/json", "2012-02-12", "JsonFormatNotSupported"),
     ("application/atom+xml", "2015-12-11", "AtomFormatNotSupported"),
     ("", "2019-02-02", "AtomFormatNotSupported"),
     ("*/*", "2019-02-02", "AtomFormatNotSupported"),
     ("application/json;odata=verbose", "2019-02-02", "JsonFormatNotSupported")],
)
def test_negotiate_refusals(accept: str, version: str, code: str) -> None:
    assert code_of(negotiate, {"accept": accept}, {}, version) == code


# ----------------------------------------------------------------- multipart

def test_multipart_split_crlf_and_lf() -> None:
    for nl in ("\r\n", "\n"):
        body = (f"preamble{nl}--b{nl}Content-Type: text/plain{nl}{nl}one{nl}--b{nl}X: y{nl}{nl}two{nl}--b--{nl}"
                ).encode()
        parts = split_parts(body, "b")
        assert [(p.headers, p.body) for p in parts] == [
            ({"content-type": "text/plain"}, b"one"), ({"x": "y"}, b"two")
        ]


def test_multipart_errors() -> None:
    from tablesdk.devstore._multipart import MultipartError

    with pytest.raises(MultipartError):
        split_parts(b"--b\r\n\r\nno end", "b")
    with pytest.raises(MultipartError):
        split_parts(b"nothing here", "b")
    with pytest.raises(MultipartError):
        parse_http_request(b"garbage")


def test_boundary_of() -> None:
    assert boundary_of("multipart/mixed; boundary=batch_1") == "batch_1"
    assert boundary_of('multipart/mixed; boundary="batch 2"') == "batch 2"
    assert boundary_of("application/json") is None


def test_parse_http_request() -> None:
    raw = (b"POST http://h/devstoreaccount1/t HTTP/1.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: 2\r\n\r\n{}trailing")
    assert parse_http_request(raw) == ("POST", "http://h/devstoreaccount1/t",
                                       {"content-type": "application/json", "content-length": "2"}, b"{}")
    assert parse_http_request(b"DELETE /x HTTP/1.1\n\n") == ("DELETE", "/x", {}, b"")


def test_batch_response_writer_is_parseable() -> None:
    import email.parser

    ctype, body = write_batch_response(
        [SubResponse(201, [("Content-ID", "1")], json.dumps({"a": 1}).encode()), SubResponse(204, [("Content-ID", "2")])],
        changeset=True,
    )
    msg = email.parser.BytesParser().parsebytes(b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
    inner = msg.get_payload()[0].get_payload()
    assert len(inner) == 2
    assert inner[0].get_payload().startswith("HTTP/1.1 201 Created\r\nContent-ID: 1\r\n\r\n")


# ----------------------------------------------------------------- fast JSON scan path

def test_pre_rendered_members_equal_the_generic_writer() -> None:
    from tablesdk.devstore._values import json_fragment
    from tablesdk.devstore._wire import JSON_MINIMAL, json_entities, json_entities_minimal

    props = {
        "S": ("Edm.String", 'quote " backslash \\ tab \t nl \n ctl \x01 é 中 😀 \u2028'),
        "I": ("Edm.Int32", -5), "L": ("Edm.Int64", 2**62), "D": ("Edm.Double", 1.0),
        "Inf": ("Edm.Double", math.inf), "Nan": ("Edm.Double", math.nan), "B": ("Edm.Boolean", False),
        "T": ("Edm.DateTime", "2024-01-02T03:04:05.1234567Z"),
        "G": ("Edm.Guid", "1b4e28ba-2fa1-11d2-883f-0016d3cca427"), "X": ("Edm.Binary", b"\x00\xff"),
    }
    rows = [("p\"k", "r\\k\x02", "2026-01-01T00:00:00.0000000Z", "W/\"datetime'x'\"", props),
            ("p", "", "2026-01-01T00:00:00.0000001Z", "W/\"datetime'y'\"", {})]
    generic = json_entities(JSON_MINIMAL, "http://h/a/", "tbl", rows)
    fast = json_entities_minimal("http://h/a/", "tbl",
                                 [(pk, rk, ts, etag, json_fragment(p)) for pk, rk, ts, etag, p in rows])
    assert fast == generic
    assert json.loads(fast)["value"][0]["S"] == props["S"][1]


def test_json_body_refuses_lone_surrogates_and_bad_utf8() -> None:
    assert code_of(parse_json_body, b'{"S": "\\ud800"}') == "InvalidInput"
    assert code_of(parse_json_body, b'{"S": "\xff"}') == "InvalidInput"
    assert parse_json_body(b'{"S": "\\ud83d\\ude00"}') == {"S": "😀"}


def test_multipart_part_without_headers_and_boundary_lookalikes() -> None:
    body = b"--b\r\n\r\nno headers\r\n--bx not a delimiter\r\n--b \r\nA: 1\r\n\r\n--b inside\r\n--b--"
    parts = split_parts(body, "b")
    assert [(p.headers, p.body) for p in parts] == [
        ({}, b"no headers\r\n--bx not a delimiter"), ({"a": "1"}, b"--b inside"),
    ]


# ----------------------------------------------------------------- key order (UTF-16 code units)

#: In UTF-16 a character above U+FFFF is a surrogate pair (0xD800..0xDFFF), so it sorts
#: before U+E000..U+FFFF, unlike code point order (Python's str order).
UTF16_ORDER = ["", "a", "\ud7ff", "\U00010000", "\U0001F600", "\U0010FFFF", "\ue000", "\uff21", "\uffff"]


def test_utf16_key_orders_by_code_units() -> None:
    from tablesdk.devstore._values import utf16_key

    assert sorted(UTF16_ORDER, key=utf16_key) == UTF16_ORDER
    assert sorted(UTF16_ORDER) != UTF16_ORDER  # code point order differs
    assert utf16_key("\ud800") == b"\xd8\x00"  # a lone surrogate is kept


def test_storage_scans_in_utf16_order_and_narrows_by_it() -> None:
    storage = Storage()
    storage.create_table("t")
    with storage.transaction():
        for pk in reversed(UTF16_ORDER):
            for rk in UTF16_ORDER:
                storage.put_entity("t", pk, rk, {}, exists=False)
    scanned = [(row.pk, row.rk) for row in storage.scan("t", chunk=5)]
    assert scanned == [(pk, rk) for pk in UTF16_ORDER for rk in UTF16_ORDER]
    resumed = [(row.pk, row.rk) for row in storage.scan("t", start=("\U0001F600", "\ue000"), chunk=3)]
    assert resumed[:3] == [("\U0001F600", "\ue000"), ("\U0001F600", "\uff21"), ("\U0001F600", "\uffff")]
    assert len(resumed) == 4 * len(UTF16_ORDER) + 3
    above = [row.rk for row in storage.scan("t", conditions=[("pk", "=", "a"), ("rk", ">", "\U0001F600")])]
    assert above == ["\U0010FFFF", "\ue000", "\uff21", "\uffff"]
    row = storage.get_entity("t", "\U0001F600", "\ue000")
    assert row is not None and (row.pk, row.rk) == ("\U0001F600", "\ue000")
    storage.delete_entity("t", "\U0001F600", "\ue000")
    assert storage.get_entity("t", "\U0001F600", "\ue000") is None


def test_a_database_with_text_keys_is_converted_when_opened(tmp_path: Any) -> None:
    import sqlite3

    path = str(tmp_path / "old.db")
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE tables (lname TEXT PRIMARY KEY, name TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE entities (tbl TEXT NOT NULL, pk TEXT NOT NULL, rk TEXT NOT NULL, ts TEXT NOT NULL,
                               props TEXT NOT NULL, jmin TEXT NOT NULL, PRIMARY KEY (tbl, pk, rk)) WITHOUT ROWID;
        INSERT INTO tables VALUES ('t', 'T');
    """)
    for rk in ("\ue000", "\U0001F600", "a"):
        old.execute("INSERT INTO entities VALUES ('t', 'p', ?, '2024-01-01T00:00:00.0000001Z', '{}', '')", (rk,))
    old.commit()
    old.close()

    storage = Storage(path)
    try:
        assert [row.rk for row in storage.scan("t")] == ["a", "\U0001F600", "\ue000"]
        assert storage.get_entity("t", "p", "\U0001F600") is not None
        assert storage.get_table("t") == "T"
    finally:
        storage.close()
    storage = Storage(path)  # opening again changes nothing
    try:
        assert [row.rk for row in storage.scan("t")] == ["a", "\U0001F600", "\ue000"]
    finally:
        storage.close()
