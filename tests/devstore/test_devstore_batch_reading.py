"""Unit tests: a change set's operations read by their shape, and entities read by their plan,
give what the general readers give (the same request, the same properties, the same refusals)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablesdk.devstore._errors import ServiceError
from tablesdk.devstore._multipart import MultipartError, body_within, operation_shape, parse_http_request
from tablesdk.devstore._values import _read_json_entity, parse_json_entity

# ----------------------------------------------------------------- operations by shape

_LINES = st.sampled_from([
    b"Content-ID: 1", b"Content-ID: 2", b"content-id:7", b"CONTENT-ID :  9 ", b"Content-ID:", b"Content-ID: \x85x",
    b"Content-Length: 2", b"content-length:0", b"Content-Length: 99", b"Content-Length: \xb2", b"Content-Length: x",
    b"Content-ID\x0c: 3", b"Content-IDX: 4", b"X-Content-ID: 5", b"Content-Type: application/json",
    b"Accept: application/json;odata=nometadata", b"Prefer: return-no-content", b"If-Match: *",
    b"DataServiceVersion: 3.0;", b"no colon here", b" folded", b"\tfolded", b"Empty:", b"Content-ID: 1\r",
])
_REQUEST_LINES = st.sampled_from([b"POST http://h/devstoreaccount1/t HTTP/1.1", b"MERGE /t(PartitionKey='p',RowKey='r') HTTP/1.1",
                                  b"Content-ID: 1", b"BAD", b"\r\nPUT t HTTP/1.1"])


def _read(data: bytes) -> Any:
    try:
        return parse_http_request(data)
    except MultipartError:
        return "refused"


@settings(max_examples=600, deadline=None)
@given(_REQUEST_LINES, st.lists(_LINES, max_size=6), st.sampled_from([b"\r\n", b"\n"]),
       st.sampled_from([b"{}", b"{}trailing", b"", b"\r\n{}\r\n"]))
def test_an_operation_reads_as_its_shape_says(request_line: bytes, lines: list[bytes], newline: bytes,
                                              body: bytes) -> None:
    """What parse_http_request makes of a part depends only on its shape, its Content-ID and its
    Content-Length: so the operations of one shape may share the reading of the first."""
    data = request_line + newline + b"".join(line + newline for line in lines) + newline + body
    shape = operation_shape(data)
    if shape is None:
        return
    key, content_id, content_length, rest = shape
    whole = _read(data)
    of_shape = _read(key + b"\r\n\r\n")
    assert (whole == "refused") == (of_shape == "refused")
    if whole == "refused":
        return
    method, url, headers, read_body = whole
    assert (method, url) == of_shape[:2]
    varying = {name: value for name, value in (("content-id", content_id), ("content-length", content_length))
               if value is not None}
    assert headers == {**of_shape[2], **varying}
    assert read_body == body_within(rest, content_length)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([b"\r", b"\n", b"a", b"\r\n"]), max_size=12))
def test_the_first_blank_line_is_the_patterns(pieces: list[bytes]) -> None:
    import re

    from tablesdk.devstore._multipart import _blank_line

    data = b"".join(pieces)
    found = re.search(rb"\r?\n\r?\n", data)
    assert _blank_line(data) == (None if found is None else found.span())


def test_a_content_length_of_other_digits_is_no_length() -> None:
    """``str.isdigit`` takes a superscript two, which ``int`` does not read: not a length."""
    assert parse_http_request(b"POST /t HTTP/1.1\r\nContent-Length: \xb2\r\n\r\n{}")[3] == b"{}"


def test_shapes_of_numbered_operations_are_equal() -> None:
    first = operation_shape(b"POST /t HTTP/1.1\r\nContent-ID: 1\r\nContent-Type: application/json\r\n"
                            b"Content-Length: 2\r\n\r\n{}")
    second = operation_shape(b"POST /t HTTP/1.1\r\nContent-ID: 12\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 13\r\n\r\n{\"A\": \"text\"}")
    assert first is not None and second is not None
    assert first[0] == second[0]
    assert first[1:] == ("1", "2", b"{}") and second[1:] == ("12", "13", b"{\"A\": \"text\"}")


@pytest.mark.parametrize("data", [
    b"POST /t HTTP/1.1\r\nContent-ID: 1\r\nContent-ID: 2\r\n\r\n{}",  # given twice: the last counts
    b"POST /t HTTP/1.1\r\nContent-Length: 1\r\ncontent-length: 2\r\n\r\n{}",
    b"POST /t HTTP/1.1\r\nX: a\r\n b\r\n\r\n{}",  # a folded line
    b"POST /t HTTP/1.1\r\nContent-ID\x0b: 1\r\n\r\n{}",  # a name the general reader strips
    b"POST /t HTTP/1.1\r\nContent-Type: application/json",  # no blank line
])
def test_parts_left_to_the_general_reader(data: bytes) -> None:
    assert operation_shape(data) is None


# ----------------------------------------------------------------- entities by plan

_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**33, max_value=2**33), st.floats(allow_nan=True),
    st.sampled_from(["text", "", "2024-01-02T03:04:05.1234567Z", "2024-01-02T03:04:05Z", "not a date",
                     "0a1b2c3d-0000-1111-2222-333344445555", "AQID", "AQI", "12", "+12", "1e5", "NaN", "Infinity",
                     "true", "False", "x" * 20_000, "y" * 40_000]),
    st.lists(st.integers(), max_size=1), st.dictionaries(st.just("a"), st.integers(), max_size=1),
)
_TYPES = st.one_of(st.sampled_from(["Edm.String", "Edm.Int32", "Edm.Int64", "Edm.Double", "Edm.Boolean",
                                    "Edm.DateTime", "Edm.Guid", "Edm.Binary", "Edm.Byte", "edm.string"]),
                   st.integers(), st.lists(st.just("Edm.String"), max_size=1))
_NAMES = st.sampled_from(["A", "B", "Long", "odata.etag", "Timestamp", "PartitionKey", "RowKey", "1bad", "a-b",
                          "x" * 256, "_ok"])


def _outcome(read: Any, obj: dict[str, Any]) -> Any:
    try:
        return read(obj)
    except ServiceError as exc:
        return exc.code, exc.status


@settings(max_examples=800, deadline=None)
@given(st.lists(st.tuples(_NAMES, _VALUES, st.one_of(st.none(), _TYPES)), max_size=6),
       st.sampled_from(["@odata.type", "@odata.other", "@x"]))
def test_an_entity_reads_by_its_plan_as_member_by_member(members: list[tuple[str, Any, Any]], suffix: str) -> None:
    obj: dict[str, Any] = {"PartitionKey": "p", "RowKey": "r"}
    for name, value, edm in members:
        obj[name] = value
        if edm is not None:
            obj[name + suffix] = edm
    expected = _outcome(lambda o: _read_json_entity(o, False), obj)
    assert _outcome(parse_json_entity, obj) == expected
    again = json.loads(json.dumps(obj, allow_nan=True))  # the plan made above, used by an equal entity
    assert _outcome(parse_json_entity, again) == _outcome(lambda o: _read_json_entity(o, False), again)


def test_a_plan_reads_each_entity_with_its_own_types() -> None:
    shape = {"PartitionKey": "p", "RowKey": "r", "V": "5", "V@odata.type": "Edm.Int64"}
    assert parse_json_entity(shape)[2] == {"V": ("Edm.Int64", 5)}
    assert parse_json_entity({**shape, "V@odata.type": "Edm.String"})[2] == {"V": ("Edm.String", "5")}
    with pytest.raises(ServiceError) as info:
        parse_json_entity({**shape, "V@odata.type": "Edm.Int32", "V": "x"})
    assert info.value.code == "InvalidInput"


def test_stored_members_are_the_general_writers_for_either_spelling_of_a_type() -> None:
    """json_fragment writes the module's type constants itself and hands other text equal to
    them to json_property_items: both give the members the general writer gives."""
    from tablesdk.devstore._values import COMPACT_JSON, json_fragment, json_property_items

    entity = {"S": "s", "I": 5, "D": 2.0, "B": True, "N": "NaN", "N@odata.type": "Edm.Double",
              "L": "7", "L@odata.type": "Edm.Int64", "T": "2024-01-02T03:04:05.1000000Z",
              "T@odata.type": "Edm.DateTime", "G": "1B4E28BA-2FA1-11D2-883F-0016D3CCA427",
              "G@odata.type": "Edm.Guid", "X": "AP8=", "X@odata.type": "Edm.Binary"}
    props = parse_json_entity({"PartitionKey": "p", "RowKey": "r", **entity})[2]
    spelled = {name: ("".join(edm), value) for name, (edm, value) in props.items()}  # equal text, other objects
    expected = COMPACT_JSON(dict(json_property_items(props, True)))[1:-1]
    assert json_fragment(props) == expected
    assert json_fragment(spelled) == expected
    assert json.loads("{" + expected + "}")["T"] == "2024-01-02T03:04:05.1Z"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([
    ("S", "Edm.String", "t\u00e9\"x"), ("I", "Edm.Int32", -3), ("B", "Edm.Boolean", False), ("D", "Edm.Double", 0.5),
    ("N", "Edm.Double", float("nan")), ("F", "Edm.Double", float("-inf")), ("L", "Edm.Int64", 2**60),
    ("T", "Edm.DateTime", "2024-01-02T03:04:05.0000000Z"), ("G", "Edm.Guid", "1b4e28ba-2fa1-11d2-883f-0016d3cca427"),
    ("X", "Edm.Binary", b"\x00\xff"),
]), min_size=1, max_size=8, unique_by=lambda item: item[0]))
def test_stored_members_by_plan_are_the_general_writers(items: list[tuple[str, str, Any]]) -> None:
    from tablesdk.devstore import _values
    from tablesdk.devstore._values import COMPACT_JSON, json_fragment, json_property_items

    constants = {name: name for name in _values.EDM_TYPES}
    props = {name: (constants[edm], value) for name, edm, value in items}
    expected = COMPACT_JSON(dict(json_property_items(props, True)))[1:-1]
    assert json_fragment(props) == expected
    assert json_fragment(props) == expected  # the plan made by the first call
