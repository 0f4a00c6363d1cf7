"""Every fast path gives exactly what its general (slow) counterpart gives.

The fast paths exist only for speed; these tests pin that they never change a
result: same value, same type, same seventh digit, same errors.
"""

from __future__ import annotations

import pickle
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tablesdk._entities._edm import EdmDateTime, _parse_datetime_slow, _read_service_form_py310, parse_datetime

UTC = timezone.utc


def _service_forms() -> list[str]:
    """DateTime text as the service writes it: 7 digits with trailing zeros trimmed, down to none."""
    texts = []
    for ticks in (0, 1, 10, 100_000, 1_000_000, 1_234_567, 9_468_700, 9_999_999, 1_000_000 - 1, 5_000_000):
        for stamp in ("2024-01-02T03:04:05", "0001-01-01T00:00:00", "1601-01-01T00:00:00", "9999-12-31T23:59:59",
                      "2024-02-29T23:59:59"):
            digits = f"{ticks:07d}".rstrip("0")
            texts.append(f"{stamp}.{digits}Z" if digits else f"{stamp}Z")
            texts.append(f"{stamp}.{ticks:07d}Z")  # the untrimmed form too
    return texts


SERVICE_FORMS = _service_forms()


def _same(got: EdmDateTime, want: EdmDateTime) -> None:
    assert type(got) is EdmDateTime and type(want) is EdmDateTime
    assert got == want and got.ticks_remainder == want.ticks_remainder
    assert got.tzinfo is UTC and got.utcoffset() == timedelta(0)
    assert repr(got) == repr(want) and got.isoformat() == want.isoformat()
    again = pickle.loads(pickle.dumps(got))
    assert again == got and again.ticks_remainder == got.ticks_remainder


@pytest.mark.parametrize("text", SERVICE_FORMS)
def test_parse_datetime_reads_every_service_form_like_the_general_parser(text: str) -> None:
    _same(parse_datetime(text), _parse_datetime_slow(text))


def test_trimmed_forms_carry_the_exact_ticks() -> None:
    assert parse_datetime("2024-01-02T03:04:05.94687Z") == datetime(2024, 1, 2, 3, 4, 5, 946870, UTC)
    assert parse_datetime("2024-01-02T03:04:05.94687Z").ticks_remainder == 0
    assert parse_datetime("2024-01-02T03:04:05.1Z") == datetime(2024, 1, 2, 3, 4, 5, 100000, UTC)
    assert parse_datetime("2024-01-02T03:04:05.0000001Z").ticks_remainder == 1
    assert parse_datetime("2024-01-02T03:04:05Z") == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize("text", SERVICE_FORMS)
def test_python310_reader_agrees_with_fromisoformat(text: str) -> None:
    # The reader used where datetime.fromisoformat cannot read 'Z' or trimmed fractions.
    want = _parse_datetime_slow(text)
    assert _read_service_form_py310(text).replace(tzinfo=UTC) == want


@pytest.mark.parametrize(
    "text",
    ["2024-01-02T03:04:05.12x4Z", "2024-01-02T03:04:05.Z", "2024-01-02T03:04:05.１Z", "2024-13-02T03:04:05.1Z",
     "2024-01-02T03:04:65Z", "2024-01-02T03:04:05.123456xZ"],
)
def test_malformed_service_forms_fail_or_match_the_general_parser(text: str) -> None:
    try:
        want = _parse_datetime_slow(text)
    except ValueError:
        with pytest.raises(ValueError):
            parse_datetime(text)
    else:
        _same(parse_datetime(text), want)
    if text[20:-1].isdigit() and text[20:-1].isascii():
        return
    with pytest.raises(ValueError):
        _read_service_form_py310(text)


def test_edm_datetime_constructor_keeps_its_keyword_and_class_default() -> None:
    assert EdmDateTime(2024, 1, 2, tzinfo=UTC).ticks_remainder == 0
    assert "ticks_remainder" not in vars(EdmDateTime(2024, 1, 2, tzinfo=UTC))
    seven = EdmDateTime(2024, 1, 2, 3, 4, 5, 123456, UTC, ticks_remainder=7)
    assert seven.ticks_remainder == 7 and (seven + timedelta(0)).ticks_remainder == 0


def test_edm_datetime_keeps_the_seventh_digit_in_a_slot_and_stays_a_datetime_subclass() -> None:
    import copy
    import weakref

    from tablesdk._entities._edm_specs import _datetime_column

    for value in (parse_datetime("2024-01-02T03:04:05.1234567Z"), _datetime_column(["2024-01-02T03:04:05.1234567Z"])[0]):
        assert type(value) is EdmDateTime and value.ticks_remainder == 7
        assert vars(value) == {}  # no instance dict made for the digit
        for twin in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
            assert type(twin) is EdmDateTime and twin == value and twin.ticks_remainder == 7
        changed = value.replace(year=2025)  # made by datetime's C code, without the digit
        assert type(changed) is EdmDateTime and changed.ticks_remainder == 0
        assert weakref.ref(value)() is value
        value.note = "kept"  # type: ignore[attr-defined]
        assert vars(value) == {"note": "kept"}
        with pytest.raises(AttributeError, match="'EdmDateTime' object has no attribute 'missing'"):
            value.missing  # type: ignore[attr-defined]  # noqa: B018
    whole = _datetime_column(["2024-01-02T03:04:05Z", "2024-01-02T03:04:05.1234560Z"])
    assert [v.ticks_remainder for v in whole] == [0, 0]


# ------------------------------------------------------------------ batch response headers

from tablesdk._formats._batch_answer import _read_headers, _read_headers_by_line  # noqa: E402

HEADER_BLOCKS = [
    b"HTTP/1.1 204 No Content\r\nContent-ID: 1\r\nETag: W/\"datetime'2024'\"\r\nX-Content-Type-Options: nosniff\r\n\r\nrest",
    b"Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n",
    b"A: 1\r\nB:2\r\n\r\n",
    b"A: caf\xc3\xa9 \r\nB-b: x:y\r\n\r\nbody\r\n\r\nmore",
    b"A: 1\nB: 2\n\nbody",  # bare LF
    b"A: 1\r\n  folded\r\nB: 2\r\n\r\n",  # obsolete line folding
    b"A: 1\r\nnot a header\r\nB: 2\r\n\r\n",
    b"A: 1\r\n \r\nB: 2\r\n\r\n",  # a whitespace-only line ends the headers
    b"\r\n\r\nA: 1\r\n\r\n",
    b"A: 1\r\nB: 2",  # no blank line
    b"A: 1\r\nB: x\ny\r\n\r\n",  # a bare LF inside a line
    b"A: x\ry\r\nB:\t2\t\r\n\r\n",  # a CR inside a value, tabs around one
    b"A :1\r\n\r\n",
    b"",
]


@pytest.mark.parametrize("data", HEADER_BLOCKS)
@pytest.mark.parametrize("start", [0, 3])
def test_batch_header_fast_path_equals_line_by_line(data: bytes, start: int) -> None:
    data = b"xx\n"[:start] + data
    assert _read_headers(data, start) == _read_headers_by_line(data, start)


# ------------------------------------------------------------------ property names

from tablesdk._entities._entity import validate_property_name  # noqa: E402
from tablesdk._entities._entity_write import _VALID_NAMES  # noqa: E402
from tablesdk._core._errors import TableValidationError  # noqa: E402


class _Name(str):
    """A str subclass: never taken from the cache of checked names."""


@pytest.mark.parametrize("name", ["Rating", "_x", "a" * 255])
def test_a_valid_name_is_remembered_and_stays_valid(name: str) -> None:
    validate_property_name(name)
    assert name in _VALID_NAMES
    validate_property_name(name)


@pytest.mark.parametrize("name", ["", "1a", "a b", "a" * 256, "PartitionKey", "Timestamp", 5, None])
def test_an_invalid_name_is_refused_every_time(name: object) -> None:
    for _ in range(2):
        with pytest.raises(TableValidationError):
            validate_property_name(name)
    assert name not in _VALID_NAMES


def test_subclasses_are_checked_not_cached() -> None:
    validate_property_name(_Name("Fine"))
    with pytest.raises(TableValidationError):
        validate_property_name(_Name("Row Key"))


# ------------------------------------------------------------------ Atom property names

import math  # noqa: E402

from tablesdk._entities._edm import EdmType, from_atom_text  # noqa: E402
from tablesdk._formats import atom as atom_module  # noqa: E402

_FEED = (
    '<feed xmlns="http://www.w3.org/2005/Atom" xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices" '
    'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:x="urn:other">'
    '<entry m:etag="W/&quot;1&quot;"><content type="application/xml"><m:properties>'
    '<d:PartitionKey>p</d:PartitionKey><d:RowKey>r</d:RowKey><x:Rating m:type="Edm.Int32">9</x:Rating>'
    '<d:Rating m:type="Edm.Int32">3</d:Rating><d:Gone m:type="Edm.Int64" m:null="true" />'
    '<d:Odd m:null="false" m:type="Edm.Int64">5</d:Odd><d:Text xml:space="preserve"> a </d:Text>'
    '</m:properties></content></entry></feed>'
).encode()


def test_atom_names_cache_keeps_results_and_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    fmt = atom_module.AtomFormat()
    monkeypatch.setattr(atom_module, "_NAMES", {})
    cold = fmt.parse_entities(_FEED)
    warm = fmt.parse_entities(_FEED)
    assert [(p.values, p.types, p.etag) for p in cold] == [(p.values, p.types, p.etag) for p in warm]
    values = warm[0].values
    assert values == {"PartitionKey": "p", "RowKey": "r", "Rating": 3, "Gone": None, "Odd": 5, "Text": " a "}
    assert "{urn:other}Rating" not in atom_module._NAMES


_ATOM_TEXTS = {
    "Edm.Int32": ["0", "-2147483648", "2147483647", " 5 ", "+7", "1_0", "2147483648", "x", "", "1" * 30],
    "Edm.Int64": ["0", "-9223372036854775808", "9223372036854775807", " 5", "9223372036854775808", "1.0", ""],
    "Edm.Double": ["1.5", "-0.0", "1e308", "1e999", " 2.5 ", "NaN", " NaN ", "-NaN", "nan", "INF", "-INF",
                   "Infinity", "-Infinity", "inf", "1_0.5", "0x10", "", "abc"],
    "Edm.Boolean": ["true", "false", "1", "0", " true", "TRUE", "False ", "yes", ""],
    "Edm.Guid": ["c9da6455-213d-42c9-9a79-3e9149a57833", " C9DA6455-213D-42C9-9A79-3E9149A57833\n",
                 "{c9da6455-213d-42c9-9a79-3e9149a57833}", "urn:uuid:c9da6455-213d-42c9-9a79-3e9149a57833",
                 "c9da6455213d42c99a793e9149a57833", "c9da6455-213d-42c9-9a79-3e9149a5783g", ""],
    "Edm.Binary": ["AAECAwQFBgcICQoLDA0ODw==", "", "QQ==", "QQ", "Q Q==", "@@@", "QQ==QQ==", "\u00e9"],
    "Edm.DateTime": ["2024-01-02T03:04:05.1234567Z", " 2024-01-02T03:04:05Z\n", "2024-01-02T03:04:05.1Z", "nope"],
}


@pytest.mark.parametrize("type_name, text", [(t, x) for t, texts in _ATOM_TEXTS.items() for x in texts])
def test_atom_converters_read_what_from_atom_text_reads(type_name: str, text: str) -> None:
    edm_type, convert = atom_module._BY_NAME[type_name]
    assert edm_type is EdmType(type_name) and convert is not None
    try:
        want = from_atom_text(text, edm_type)
    except ValueError:
        with pytest.raises(ValueError):
            convert(text)
        return
    got = convert(text)
    assert type(got) is type(want)
    if isinstance(want, float) and math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == want and repr(got) == repr(want)


# ------------------------------------------------------------------ JSON writing

import json as _json  # noqa: E402
import uuid as _uuid  # noqa: E402

from tablesdk._entities._edm import EntityPayload, to_json_value  # noqa: E402
from tablesdk._formats.json import JsonFormat  # noqa: E402


def test_json_bodies_carry_what_to_json_value_gives_for_every_type() -> None:
    T = EdmType
    values = {
        "PartitionKey": "p", "RowKey": "r", "S": "x", "I": -5, "L": 2**40, "D": 1.0, "B": True, "F": False,
        "W": EdmDateTime(2024, 1, 2, 3, 4, 5, 6, UTC, ticks_remainder=7), "G": _uuid.UUID(int=5), "Y": b"\x00\x01",
        "N": None, "Small64": 3,
    }
    types = {"PartitionKey": T.STRING, "RowKey": T.STRING, "S": T.STRING, "I": T.INT32, "L": T.INT64,
             "D": T.DOUBLE, "B": T.BOOLEAN, "F": T.BOOLEAN, "W": T.DATETIME, "G": T.GUID, "Y": T.BINARY,
             "Small64": T.INT64}
    body = _json.loads(JsonFormat().serialize_entity(EntityPayload(dict(values), types)))
    want: dict[str, object] = {}
    for name, value in values.items():
        if value is None:
            want[name] = None
            continue
        wire, annotate = to_json_value(value, types[name])
        want[name] = wire
        if annotate:
            want[name + "@odata.type"] = types[name].value
    assert body == want


# ------------------------------------------------------------------ secrets in answers

from tablesdk._core._redaction import attempt_secrets  # noqa: E402


def test_secret_pattern_is_compiled_only_for_a_text_that_may_hold_a_secret() -> None:
    secrets = attempt_secrets({"Authorization": "SharedKey acct:abcdEFGH1234+/xyzWXYZ5678=="}, "https://a/t?sig=QWERTYuiop%2B12")
    assert secrets is not None
    plain = "HTTP/1.1 204 No Content; request 8d1f0c2e-0000-0000-0000-000000000000"
    assert secrets.sub("***", plain) == plain and secrets.search(plain) is None
    assert secrets._pattern is None  # nothing could match: no pattern was compiled
    for echo in ("x abcdEFGH1234+/xyzWXYZ5678== y", "x abcdEFGH1234%2b%2FxyzWXYZ5678%3D%3d y", "QWERTYuiop+12"):
        scrubbed = secrets.sub("***", echo)
        assert "abcdEFGH1234" not in scrubbed and "QWERTYuiop" not in scrubbed and "***" in scrubbed
        assert secrets.search(echo) is not None


# ------------------------------------------------------------------ types of dynamic properties

from datetime import datetime as _datetime  # noqa: E402

from tablesdk._entities._edm import infer_edm_type  # noqa: E402
from tablesdk._entities._entity import DynamicEntity, entity_to_payload  # noqa: E402
from tablesdk._entities._entity_write import _EXACT_TYPES  # noqa: E402


@pytest.mark.parametrize(
    "value",
    ["s", True, False, 1.5, _datetime(2024, 1, 2), _datetime(2024, 1, 2, tzinfo=UTC),
     EdmDateTime(2024, 1, 2, tzinfo=UTC, ticks_remainder=3), _uuid.UUID(int=1), b"\x00"],
)
def test_exact_class_table_agrees_with_infer_edm_type(value: object) -> None:
    assert _EXACT_TYPES[type(value)] is infer_edm_type(value)


def test_dynamic_properties_are_typed_and_checked_as_before() -> None:
    entity = DynamicEntity(PartitionKey="p", RowKey="r", S="x", I=5, L=2**40, B=True, D=1.0)
    assert entity_to_payload(entity).types == {
        "PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "S": EdmType.STRING, "I": EdmType.INT32,
        "L": EdmType.INT64, "B": EdmType.BOOLEAN, "D": EdmType.DOUBLE,
    }
    for bad in ("x" * 40_000, _datetime(1500, 1, 1, tzinfo=UTC), b"\x00" * 70_000, 2**70, object()):
        with pytest.raises(TableValidationError):
            entity_to_payload(DynamicEntity(PartitionKey="p", RowKey="r", V=bad))


# ------------------------------------------------------------------ JSON shapes

from tablesdk._formats import json as json_module  # noqa: E402

_SHAPED_FEED = _json.dumps({"odata.metadata": "m", "value": [
    {"odata.etag": "W/\"1\"", "PartitionKey": "p", "RowKey": "1", "V": "5", "V@odata.type": "Edm.Int64",
     "Timestamp": "2024-01-02T03:04:05.1Z"},
    {"odata.etag": "W/\"2\"", "PartitionKey": "p", "RowKey": "2", "V": "NaN", "V@odata.type": "Edm.Double",
     "Timestamp": "2024-01-02T03:04:05Z"},  # the same keys, another annotation
    {"PartitionKey": "p", "RowKey": "3", "V": 7, "odata.type": "a.b", "odata.id": "x", "W@odata.type": "Edm.Guid"},
    {"odata.etag": "W/\"4\"", "PartitionKey": "p", "RowKey": "4", "V": None, "V@odata.type": "Edm.Int64"},
    {"odata.etag": "W/\"1\"", "PartitionKey": "p", "RowKey": "5", "V": "6", "V@odata.type": "Edm.Int64",
     "Timestamp": "2024-01-02T03:04:05.1Z"},
]}).encode()


def _as_tuples(payloads: list[EntityPayload]) -> list[tuple[object, ...]]:
    return [(repr(p.values), p.types, p.etag) for p in payloads]


@pytest.mark.parametrize("metadata", ["minimalmetadata", "nometadata", "fullmetadata"])
def test_json_shape_plans_give_what_planning_every_entity_gives(metadata: str, monkeypatch: pytest.MonkeyPatch) -> None:
    planned = JsonFormat(metadata)
    first, again = planned.parse_entities(_SHAPED_FEED), planned.parse_entities(_SHAPED_FEED)  # cold, then warm
    monkeypatch.setattr(json_module, "_MAX_PLANS", 0)  # nothing remembered: every entity planned afresh
    unplanned = JsonFormat(metadata).parse_entities(_SHAPED_FEED)
    assert _as_tuples(first) == _as_tuples(again) == _as_tuples(unplanned)
    assert [p.etag for p in first] == ['W/"1"', 'W/"2"', None, 'W/"4"', 'W/"1"']
    assert first[0].values["V"] == 5 and first[4].values["V"] == 6


from tablesdk._formats.json_write import _ENCODER, _encode_text  # noqa: E402


@pytest.mark.parametrize(
    "body",
    [{"PartitionKey": "p", "A": "é\u2028\U0001f600\"\\\n", "B": 1.5, "C": -0.0, "D": 10**30, "E": True, "F": None,
      "G@odata.type": EdmType.INT64, "H": 1e300, "I": ""}, {}],
)
def test_the_reused_c_encoder_writes_what_json_encoder_writes(body: dict[str, object]) -> None:
    assert _encode_text(body) == _ENCODER.encode(body)


def test_the_reused_c_encoder_refuses_what_json_encoder_refuses() -> None:
    for bad in ({"X": float("nan")}, {"X": object()}):
        with pytest.raises((ValueError, TypeError)) as ours:
            _encode_text(bad)
        with pytest.raises((ValueError, TypeError)) as theirs:
            _ENCODER.encode(bad)
        assert type(ours.value) is type(theirs.value)


# ---------------------------------------------------------------- JSON annotations remembered per shape

from tablesdk._core._errors import ResponseDecodeError  # noqa: E402
from tablesdk._entities._edm import guid_from_wire as _guid  # noqa: E402
from tablesdk._formats.json import _annotate  # noqa: E402

_ANNOTATED_ENTITIES = [
    {"PartitionKey": "p", "RowKey": "1", "A": "5", "A@odata.type": "Edm.Int64", "B": 3, "B@odata.type": "Edm.Int32",
     "C": "2024-01-02T03:04:05.94687Z", "C@odata.type": "Edm.DateTime", "D": "AAE=", "D@odata.type": "Edm.Binary",
     "E": "00000000-0000-0000-0000-00000000000a", "E@odata.type": "Edm.Guid", "F": "Infinity",
     "F@odata.type": "Edm.Double", "G": None, "G@odata.type": "Edm.Int64", "H@odata.type": "Edm.Guid",
     "I": "s", "I@odata.type": "Edm.String", "J": True, "J@odata.type": "Edm.Boolean", "K": 2.5},
    {"PartitionKey": "p", "RowKey": "2", "A": "9223372036854775807", "A@odata.type": "Edm.Int64", "B": -2147483648,
     "B@odata.type": "Edm.Int32", "X@odata.type": "Edm.Nope"},  # an unknown type without its property
]


def _general(entity: dict[str, object], metadata: str) -> tuple[object, ...]:
    """What the codec gives through the general annotation loop (nothing remembered)."""
    values = {k: v for k, v in entity.items() if "." not in k}
    annotated = tuple((k[: -len("@odata.type")], k) for k in entity if k.endswith("@odata.type"))
    type_names = tuple(entity[k] for _, k in annotated)
    plain = JsonFormat(metadata).parse_entity(_json.dumps(values).encode())
    types = dict(plain.types)
    values = dict(plain.values)
    _annotate(values, types, annotated, type_names)
    return repr(values), types


@pytest.mark.parametrize("metadata", ["minimalmetadata", "nometadata"])
@pytest.mark.parametrize("entity", _ANNOTATED_ENTITIES)
def test_remembered_annotations_give_what_the_general_loop_gives(entity: dict[str, object], metadata: str) -> None:
    codec = JsonFormat(metadata)
    body = _json.dumps(entity).encode()
    for _ in range(3):  # cold, then remembered
        payload = codec.parse_entity(body)
        assert (repr(payload.values), payload.types) == _general(entity, metadata)


@pytest.mark.parametrize(
    ("name", "type_name", "value", "message"),
    [
        ("A", "Edm.Int64", "9223372036854775808", "not a valid Edm.Int64 value"),
        ("A", "Edm.Int64", "-9223372036854775809", "not a valid Edm.Int64 value"),
        ("A", "Edm.Int32", 2147483648, "not a valid Edm.Int32 value"),
        ("A", "Edm.Int32", "-2147483649", "not a valid Edm.Int32 value"),
        ("A", "Edm.Int64", "1" * 25, "not a valid Edm.Int64 value"),
        ("A", "Edm.Int64", 1.5, "not a valid Edm.Int64 value"),
        ("A", "Edm.Guid", "00000000-0000-0000-0000-00000000000g", "not a valid Edm.Guid value"),
        ("A", "Edm.Nope", "1", "unknown EDM type 'Edm.Nope'"),
        ("A", ["Edm.Int64"], "1", "unknown EDM type"),
    ],
)
def test_remembered_annotations_refuse_what_the_general_loop_refuses(
    name: str, type_name: object, value: object, message: str
) -> None:
    codec = JsonFormat()
    good = _json.dumps({"PartitionKey": "p", "RowKey": "r", name: "1", f"{name}@odata.type": "Edm.Int64"})
    codec.parse_entity(good.encode())  # the shape is known before the bad value comes
    bad = _json.dumps({"PartitionKey": "p", "RowKey": "r", name: value, f"{name}@odata.type": type_name}).encode()
    for _ in range(2):
        with pytest.raises(ResponseDecodeError, match=message.replace("[", r"\[")):
            codec.parse_entity(bad)
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        _annotate({name: value}, {}, ((name, f"{name}@odata.type"),), (type_name,))


def test_errors_come_in_annotation_order_whatever_is_remembered() -> None:
    codec = JsonFormat()
    entity = {"PartitionKey": "p", "RowKey": "r", "A": "x", "A@odata.type": "Edm.Int64", "B": "1",
              "B@odata.type": "Edm.Nope"}  # A's value fails before B's type is looked at
    for _ in range(2):
        with pytest.raises(ResponseDecodeError, match="property 'A': not a valid Edm.Int64"):
            codec.parse_entity(_json.dumps(entity).encode())


@pytest.mark.parametrize(
    "text",
    ["00000000-0000-0000-0000-00000000000a", "ABCDEF01-2345-6789-abcd-ef0123456789", "{00000000-0000-0000-0000-0000000}",
     "urn:uuid:00000000-0000-0000-0000-0", "0000000000000000000000000000000a", "+0000000-0000-0000-0000-00000000000a",
     " 0000000-0000-0000-0000-00000000000a", "0_000000-0000-0000-0000-00000000000a", "0x000000-0000-0000-0000-00000000000a",
     "00000000-0000-0000-0000-00000000000g", "0000000--0000-0000-0000-00000000000a", "", "urn:uuid:" + "0" * 27],
)
def test_guid_fast_path_equals_uuid(text: str) -> None:
    try:
        want: object = _uuid.UUID(text)
    except ValueError as exc:
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            _guid(text)
        return
    got = _guid(text)
    assert type(got) is _uuid.UUID and got == want and got.is_safe == want.is_safe  # type: ignore[attr-defined]
    assert repr(got) == repr(want) and hash(got) == hash(want) and pickle.loads(pickle.dumps(got)) == want


@pytest.mark.parametrize(
    ("value", "low", "high"), [(0, True, True), (2**31 - 1, True, True), (2**31, False, True), (-(2**31) - 1, False, True),
                               (2**63 - 1, False, True), (2**63, False, False), (-(2**63), False, True),
                               (-(2**63) - 1, False, False)],
)
def test_folded_integer_readers_check_ranges(value: int, low: bool, high: bool) -> None:
    from tablesdk._entities._edm import int32_from_wire, int64_from_wire

    for reader, ok in ((int32_from_wire, low), (int64_from_wire, high)):
        for wire in (value, str(value)):
            if ok:
                assert reader(wire) == value
            else:
                with pytest.raises(ValueError, match="outside the Edm.Int"):
                    reader(wire)
    for reader in (int32_from_wire, int64_from_wire):
        for bad in (1.0, True, None, "1" * 25, "x"):
            with pytest.raises(ValueError):
                reader(bad)


# ---------------------------------------------------------------- entities read a page at a time

from tablesdk._entities._entity import TableEntity, entity_from_payload, entity_reader  # noqa: E402


class _Blog(TableEntity):
    Text: str
    Rating: int
    Views: int


class _Audited(TableEntity):
    Text: str

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        super().__setattr__("_seen", [*self.__dict__.get("_seen", []), name])


_READ_PAYLOADS = [
    EntityPayload({"PartitionKey": "p", "RowKey": "r", "Timestamp": "2024-01-02T03:04:05.1Z", "Text": "t",
                   "Rating": "7", "Views": 5, "Other": 1.5, "Gone": None},
                  {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "Text": EdmType.STRING,
                   "Rating": EdmType.INT64, "Other": EdmType.DOUBLE}, 'W/"1"'),
    EntityPayload({"PartitionKey": "p", "RowKey": "s", "Rating": 3}, {"Rating": EdmType.INT32}, None),
]


def _state(entity: object) -> object:
    state = getattr(entity, "__dict__", None)
    if state is not None:
        return repr(list(state.items()))
    return repr([(name, getattr(entity, name)) for name in type(entity).__slots__])  # type: ignore[attr-defined]


@pytest.mark.parametrize("entity_type", [_Blog, _Audited, DynamicEntity])
@pytest.mark.parametrize("ignore", [True, False])
def test_a_page_reader_builds_what_entity_from_payload_builds(entity_type: type, ignore: bool) -> None:
    read: Any = entity_reader(entity_type, ignore_missing_properties=ignore)
    for payload in _READ_PAYLOADS:
        try:
            want: Any = entity_from_payload(entity_type, payload, ignore_missing_properties=ignore)
        except TableValidationError as exc:
            with pytest.raises(TableValidationError, match=re.escape(str(exc))):
                read(payload)
            continue
        got = read(payload)
        assert type(got) is type(want) and _state(got) == _state(want)


def test_a_class_that_watches_its_attributes_is_read_through_them() -> None:
    entity = entity_reader(_Audited)(_READ_PAYLOADS[0])
    assert entity._seen[:6] == ["PartitionKey", "RowKey", "Timestamp", "etag", "extra_properties", "_wire_types"]  # type: ignore[attr-defined]
    # the plain way (straight into __dict__) only for a class that does not watch them
    assert entity_reader(_Blog).args[2] is True and entity_reader(_Audited).args[2] is False  # type: ignore[attr-defined]


# ---------------------------------------------------------------- JSON typings remembered per shape and kinds

_KINDS_ENTITIES: list[dict[str, Any]] = [
    {"PartitionKey": "p", "RowKey": "1", "I": 1, "J": 2**31, "K": -(2**31) - 1, "L": 2**63 - 1, "B": True, "F": 1.5,
     "N": None, "S": "s", "A": 7, "A@odata.type": "Edm.Int64", "M": 2**40, "M@odata.type": "Edm.Double"},
    {"PartitionKey": "p", "RowKey": "2", "I": 2**31, "J": 1, "K": 0, "L": -(2**63), "B": False, "F": 2.0,
     "N": None, "S": "t", "A": 2**35, "A@odata.type": "Edm.Int64", "M": 3, "M@odata.type": "Edm.Double"},
    {"PartitionKey": "p", "RowKey": "3", "I": 2**63, "J": 1},  # beyond Int64
    {"PartitionKey": "p", "RowKey": "4", "I": [1], "J": 1},  # not a property value
    {"PartitionKey": "p", "RowKey": "5", "I": None, "I@odata.type": "Edm.Int32", "J": 1, "J@odata.type": "Edm.Int32"},
    {"PartitionKey": "p", "RowKey": "6", "I": 2**33, "I@odata.type": "Edm.Int32", "J": 1},  # Int32 out of range
]


@pytest.mark.parametrize("metadata", ["minimalmetadata", "nometadata", "fullmetadata"])
def test_remembered_typings_give_what_the_general_typing_gives(metadata: str) -> None:
    codec = JsonFormat(metadata)
    for entity in _KINDS_ENTITIES:
        body = _json.dumps(entity).encode()
        values = {k: v for k, v in entity.items() if "." not in k}
        plan = json_module._Plan(tuple(entity))
        type_names = tuple(entity[k] for k in plan.annotation_keys)
        try:
            want: Any = (json_module.JsonFormat(metadata)._types(values, plan, type_names), repr(values))
        except ValueError as exc:
            for _ in range(3):
                with pytest.raises(ResponseDecodeError, match=re.escape(str(exc))):
                    codec.parse_entity(body)
            continue
        for _ in range(3):  # cold, then remembered
            payload = codec.parse_entity(body)
            assert (payload.types, repr(payload.values)) == want
            assert list(payload.types) == list(want[0])  # the same order too


# ------------------------------------------------------------------ writing entities of a known shape

from tablesdk._entities._edm import EntityProperty  # noqa: E402
from tablesdk._entities._entity_write import _payload_by_property  # noqa: E402

from support import EDM_LIMITS  # noqa: E402


def _outcome(write: object) -> tuple[object, ...]:
    try:
        payload = write()  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - the error is the outcome compared
        return (type(exc), str(exc))
    return (repr(payload.values), list(payload.types.items()), payload.etag)


_ODD_VALUES: list[object] = [
    None, "", "x" * 32_768, "x" * 32_769, "é", "\U0001f600" * 16_384, "\U0001f600" * 16_385, "\ud800",
    0, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1, 2**63, -(2**63) - 1, True, 1.5,
    float("nan"), _datetime(1601, 1, 1, tzinfo=UTC), _datetime(1600, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    _datetime(1601, 1, 1, 1, tzinfo=timezone(timedelta(hours=2))), _datetime(2024, 1, 2), _datetime(1500, 1, 1),
    _datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))), EdmDateTime(2024, 1, 2, tzinfo=UTC, ticks_remainder=3),
    _uuid.UUID(int=7), b"", b"\x00" * 65_536, b"\x00" * 65_537, bytearray(b"\x01"), EntityProperty(5, EdmType.INT64),
    object(), type("Sub", (str,), {})("sub"),
]
_REMEMBERED: list[EdmType | None] = [None, EdmType.INT32, EdmType.INT64, EdmType.DOUBLE, EdmType.STRING, EdmType.DATETIME]
_KEYS: list[object] = ["p", "", "é", "a/b", "a\x7fb", "x" * 512, "x" * 513, "\u00e9" * 512, None, 5]


def _dynamic(pk: object, rk: object, value: object, remembered: EdmType | None) -> DynamicEntity:
    entity = DynamicEntity(PartitionKey=pk, RowKey=rk, Name="n", V=1)  # type: ignore[arg-type]
    entity._values["V"] = value  # as set, even an EntityProperty left in the bag
    if remembered is not None:
        entity._types["V"] = remembered
    entity.etag = 'W/"1"'
    return entity


@pytest.mark.parametrize("remembered", _REMEMBERED)
@pytest.mark.parametrize("value", _ODD_VALUES, ids=lambda v: f"{type(v).__name__}:{str(v)[:20]}")
def test_planned_payloads_are_the_general_rules_payloads(value: object, remembered: EdmType | None) -> None:
    entity = _dynamic("p", "r", value, remembered)
    for _ in range(2):  # planned cold, then from the remembered plan
        assert _outcome(lambda: entity_to_payload(entity)) == _outcome(lambda: _payload_by_property(entity, True))


@pytest.mark.parametrize("pk", _KEYS, ids=repr)
@pytest.mark.parametrize("rk", _KEYS, ids=repr)
def test_planned_payloads_check_keys_as_the_general_rules_do(pk: object, rk: object) -> None:
    entity = _dynamic(pk, rk, "v", None)
    assert _outcome(lambda: entity_to_payload(entity)) == _outcome(lambda: _payload_by_property(entity, True))


def test_planned_payloads_check_names_counts_and_the_entity_size() -> None:
    cases = [
        DynamicEntity(PartitionKey="p", RowKey="r", **{f"P{i}": i for i in range(252)}),
        DynamicEntity(PartitionKey="p", RowKey="r", **{f"P{i}": i for i in range(253)}),
        DynamicEntity(PartitionKey="p", RowKey="r", **{"1bad": 1}),
        DynamicEntity(PartitionKey="p", RowKey="r", **{"x" * 256: 1}),
        DynamicEntity(PartitionKey="p", RowKey="r", **{f"S{i}": "x" * 32_000 for i in range(17)}),  # over 1 MiB
        DynamicEntity(PartitionKey="p", RowKey="r", **{f"S{i}": "x" * 32_000 for i in range(16)}),
        DynamicEntity(PartitionKey="p", RowKey="r", **{f"B{i}": b"x" * 65_000 for i in range(17)}),
        DynamicEntity(PartitionKey="p", RowKey="r"),
    ]
    cases[2]._values[5] = 1  # type: ignore[index]  # a name that is no str
    for entity in cases * 2:
        assert _outcome(lambda: entity_to_payload(entity)) == _outcome(lambda: _payload_by_property(entity, True))


@pytest.mark.parametrize("at", [0, 1, 2])
@pytest.mark.parametrize("value", _ODD_VALUES, ids=lambda v: f"{type(v).__name__}:{str(v)[:20]}")
def test_planned_payloads_check_every_value_of_a_kind(value: object, at: int) -> None:
    # Three values of each plannable kind, the odd one first, between or last.
    kinds: list[object] = ["s", 1, 2**40, b"\x00", _datetime(2024, 1, 2, tzinfo=UTC)]
    columns = {f"{name}{n}": kind for n in range(3) for name, kind in zip("SILYW", kinds)}
    for name in "SILYW":
        columns[f"{name}{at}"] = value if isinstance(value, type(columns[f"{name}{at}"])) else columns[f"{name}{at}"]
    columns["Odd"] = 0.5  # one value of another kind after them
    entity = DynamicEntity(PartitionKey="p", RowKey="r", **columns)
    entity._types.update({f"L{n}": EdmType.INT64 for n in range(3)})  # remembered, as read from a table
    for _ in range(2):
        assert _outcome(lambda: entity_to_payload(entity)) == _outcome(lambda: _payload_by_property(entity, True))


def _planned_payload(entity: DynamicEntity) -> EntityPayload | None:
    """The payload of ``entity`` through the write plan of its shape, None when it has none."""
    from tablesdk._entities._entity_write import _planned_bag_payload

    return _planned_bag_payload(entity.PartitionKey, entity.RowKey, entity._values, entity._types, entity.etag)


def test_the_benchmark_entities_take_the_planned_path() -> None:
    entity = DynamicEntity(PartitionKey="p", RowKey="r", S="s", I=1, L=EntityProperty(5, EdmType.INT64), D=1.5,
                           B=True, W=_datetime(2024, 1, 2, tzinfo=UTC), G=_uuid.UUID(int=1), Y=b"\x00", N=None)
    assert _planned_payload(entity) is not None
    assert _outcome(lambda: _planned_payload(entity)) == _outcome(lambda: _payload_by_property(entity, True))
    kinds: list[object] = ["s", 1, 2**40, b"\x00", _datetime(2024, 1, 2, tzinfo=UTC)]
    three = DynamicEntity(PartitionKey="p", RowKey="r", **{f"{name}{n}": kind for n in range(3)
                                                          for name, kind in zip("SILYW", kinds)})
    three._types.update({f"L{n}": EdmType.INT64 for n in range(3)})
    assert _planned_payload(three) is not None  # what test_planned_payloads_check_every_value_of_a_kind plans


# ------------------------------------------------------------------ JSON bodies of a known shape

from tablesdk._formats.json_write import _body, _encode, _template_text  # noqa: E402


def _general_body(payload: EntityPayload) -> object:
    try:
        return _encode(_body(payload))
    except Exception as exc:  # noqa: BLE001 - the error is the outcome compared
        return (type(exc), str(exc))


def _serialized(payload: EntityPayload) -> object:
    try:
        return JsonFormat().serialize_entity(payload)
    except Exception as exc:  # noqa: BLE001
        return (type(exc), str(exc))


_TYPED = [(name, value, edm_type) for name, (value, edm_type) in sorted(EDM_LIMITS.items())]
_ODD_TYPED: list[tuple[str, object, object]] = [
    ("S", "é\u2028\"\\\n\x01", EdmType.STRING), ("S", "\ud800", EdmType.STRING), ("S", 5, EdmType.STRING),
    ("S", type("Sub", (str,), {})("sub"), EdmType.STRING), ("I", True, EdmType.INT32), ("I", 2.5, EdmType.INT32),
    ("B", 1, EdmType.BOOLEAN), ("L", True, EdmType.INT64), ("D", 3, EdmType.DOUBLE), ("G", "x", EdmType.GUID),
    ("Y", bytearray(b"\x00\xff"), EdmType.BINARY), ("Y", memoryview(b"\x00"), EdmType.BINARY),
    ("W", "2024", EdmType.DATETIME), ("N", None, EdmType.INT64), ("N", None, None), ("U", 5, None),
    ("U", 5, "Edm.Int32"), ("U", 5, "Edm.Unknown"), ("P%s", 1, EdmType.INT32), ("P%d", 2**40, EdmType.INT64),
    ("x@odata.type", "Edm.Int64", EdmType.STRING), ("Big", "é" * 40_000, EdmType.STRING),
]


@pytest.mark.parametrize("name, value, edm_type", _TYPED + _ODD_TYPED, ids=lambda v: str(v)[:20])
def test_template_bodies_are_the_general_bodies(name: str, value: object, edm_type: EdmType | None) -> None:
    values = {"PartitionKey": "p", "RowKey": "r", name: value, "After": 1}
    types = {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "After": EdmType.INT32}
    if edm_type is not None:
        types[name] = edm_type
    payload = EntityPayload(values, types)  # type: ignore[arg-type]
    for _ in range(2):  # the template made, then remembered
        assert _serialized(payload) == _general_body(payload)


@pytest.mark.parametrize("where", [0, 1, 3, 4])
def test_template_bodies_leave_out_timestamp_wherever_it_is(where: int) -> None:
    items = [("PartitionKey", "p", EdmType.STRING), ("RowKey", "r", EdmType.STRING), ("A", 1, EdmType.INT32),
             ("B", 2**40, EdmType.INT64)]
    items.insert(where, ("Timestamp", EdmDateTime(2024, 1, 2, tzinfo=UTC), EdmType.DATETIME))
    payload = EntityPayload({n: v for n, v, _ in items}, {n: t for n, _, t in items})
    assert _template_text(payload) is not None
    assert _serialized(payload) == _general_body(payload)
    alone = EntityPayload({"Timestamp": EdmDateTime(2024, 1, 2, tzinfo=UTC)}, {"Timestamp": EdmType.DATETIME})
    assert _serialized(alone) == _general_body(alone) == b"{}"


# ------------------------------------------------------------------ batch answers in the service's shape

from pathlib import Path  # noqa: E402

from tablesdk._formats._batch import BatchOperation, BatchOperationKind  # noqa: E402
from tablesdk._formats._batch_answer import _general_results, _standard_results, parse_batch_response  # noqa: E402

_WIRE = Path(__file__).parent.parent / "wire" / "data"


def _answer(parts: list[str], outer: str = "batchresponse_b", inner: str = "changesetresponse_c", end: str = "\r\n") -> bytes:
    body = "".join(f"--{inner}\r\n{part}\r\n" for part in parts)
    return (f"--{outer}\r\nContent-Type: multipart/mixed; boundary={inner}\r\n\r\n{body}--{inner}--\r\n--{outer}--{end}").encode()


def _inner(status: str = "204 No Content", headers: str = "ETag: W/\"1\"\r\n", body: str = "") -> str:
    return f"Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 {status}\r\n{headers}\r\n{body}"


_ENTITY = '{"PartitionKey":"p","RowKey":"r","odata.etag":"W/\\"e\\""}'
_SHAPED_ANSWERS: list[tuple[bytes, int]] = [
    (_answer([_inner(headers=f"Content-ID: {n}\r\nETag: W/\"{n}\"\r\n") for n in (1, 2, 3)]), 3),
    (_answer([_inner(headers=f"Content-ID: {n}\r\n") for n in (2, 1, 3)]), 3),  # out of order
    (_answer([_inner(headers=f"Content-ID: {n}\r\n") for n in (1, 1)]), 2),
    (_answer([_inner(), _inner(headers="")]), 2),  # no headers at all in the second
    (_answer([_inner("201 Created", "Content-Type: application/json\r\n", _ENTITY), _inner("201 Created", "", _ENTITY)]), 2),
    (_answer([_inner(headers="A:  spaced \t\r\nB:\r\nC: x\x1fy\r\n")]), 1),
    (_answer([_inner(headers="A: \x1f\r\n")]), 1),  # a value str.strip would shorten
    (_answer([_inner(headers="ETag: 1\r\netag: 2\r\nETag: 3\r\n")]), 1),  # repeated names
    (_answer([_inner(headers="A: caf\u00e9\r\n")]), 1),
    (_answer([_inner(headers="A: 1\r\n folded\r\n")]), 1),
    (_answer([_inner(headers="not a header: 1\r\nETag: 2\r\n")]), 1), (_answer([_inner(headers="A: x\ny\r\n")]), 1),
    (_answer([_inner(headers="A: x\ry\r\nETag: 2\r\n")]), 1),
    (_answer([_inner("404 Not Found", "", '{"odata.error":{"code":"x","message":{"value":"0:gone"}}}')]), 1),
    (_answer([_inner("2045 Odd")]), 1), (_answer([_inner("20x Odd")]), 1),
    (_answer([_inner(), _inner()]), 1), (_answer([_inner()]), 2),
    (_answer([_inner(body="--changesetresponse_c--")]), 1),  # a boundary inside a body
    (_answer([_inner(body="x\r\n--batchresponse_b")]), 1),
    (_answer([_inner("201 Created", "", _ENTITY + "\r\n--changesetresponse_c--\r\njunk")]), 1),
    (_answer([_inner("201 Created", "", _ENTITY + "\r\n--batchresponse_b--\r\njunk")]), 1),
    (_answer([_inner()], end=""), 1), (_answer([_inner()], end="\r\nepilogue"), 1),
    (_answer([_inner()]).replace(b"\r\n", b"\n"), 1),
    (_answer([_inner()], inner='"quoted"'), 1),
    (b"preamble\r\n" + _answer([_inner()]), 1),
    (_answer([_inner(headers="A: x\nB: y\r\n")]), 1),  # a bare LF inside the block: two lines to the general reader
    (_answer([_inner(headers="ETag: 1\r\netag: 2\r\n"), _inner(headers="ETag: 3\r\netag: 4\r\n")]), 2),
    (_answer([_inner(headers="A: 1\r\nA: 2\r\n"), _inner(headers="A: 3\r\n")]), 2),
    (_answer([_inner(headers="ETag: 1\r\n"), _inner(headers="etag: 2\r\n")]), 2),
    (_answer([_inner(headers=f"Content-ID: {n}\r\n") for n in (1, 2)] + [_inner(headers="ETag: 3\r\n")]), 3),
    (_answer([_inner("201 Created", "ETag: 1\r\n", _ENTITY), _inner("204 No Content", "ETag: 2\r\n")]), 2),
    (_answer([_inner("200 OK", "ETag: 1\r\n", " \r\n"), _inner("299 Odd\r", "ETag: 2\r\n")]), 2),
    (_answer([_inner(headers=f"Content-ID: {n}\r\nETag: W/\"{n}\"\r\n") for n in range(1, 101)]), 100),
    (_answer([_inner(headers="A: 1\r\nB: 2\r\nA: 3\r\n"), _inner(headers="B: 4\r\n")]), 2),  # 3 + 1 lines
    (_answer([_inner(headers="A:  1\r\nB:\r\n"), _inner(headers="A: 2 \t\r\nB: \t\r\n")]), 2),
    (_answer([_inner(headers="A: 1\r\nB: 2\r\n"), _inner(headers="A:3\r\nB: 4\r\n")]), 2),
    (_answer([_inner(headers="A : 1\r\n"), _inner(headers="A : 2\r\n")]), 2),
    (_answer([_inner(headers=" A: 1\r\n"), _inner(headers=" A: 2\r\n")]), 2),
    (_answer([_inner(headers="A: 1\r\n"), _inner(headers="A: 2\x7f\r\n")]), 2),
    (_answer([_inner(headers="A: 1\r\n"), _inner(headers="A: 2\rx\r\n")]), 2),
    (_answer([_inner(headers="A: 1\r\n"), _inner(headers="A: 2\nB: 3\r\n")]), 2),
    (_answer([_inner(headers="A: x: y\r\n"), _inner(headers="A: z\r\n")]), 2),
    (_answer([_inner(headers="Content-ID: 2\r\n"), _inner(headers="Content-ID: 1\r\n")]), 2),
    (_answer([_inner(headers="Content-ID: 1\r\nEtag: a\r\n"), _inner(headers="Content-ID: 2\r\nEtag: b\r\n")]), 2),
]
for _name in ("batch_azurite_100_mixed_response.http", "batch_azurite_insert_201_response.http",
              "batch_azurite_409_response.http", "batch_azurite_101_response.http"):
    _type, _, _data = (_WIRE / _name).read_bytes().partition(b"\r\n\r\n")
    _SHAPED_ANSWERS.append((_data, 100 if "100" in _name else 101 if "101" in _name else 1))


def _results_or_error(read: object) -> object:
    try:
        results = read()  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - the error is the outcome compared
        return (type(exc), str(exc), getattr(exc, "failed_index", None), getattr(exc, "ambiguous_retry", None))
    return [(r.index, r.status, r.etag, r.payload, r.headers) for r in results]


@pytest.mark.parametrize("answer, count", _SHAPED_ANSWERS)
def test_batch_answers_in_the_service_shape_read_as_the_general_reader_reads_them(answer: bytes, count: int) -> None:
    content_type = "multipart/mixed; boundary=batchresponse_b"
    if not answer.startswith(b"--batchresponse_b"):
        content_type = "multipart/mixed; boundary=" + answer.split(b"\r\n", 1)[0][2:].decode()
    ops = [BatchOperation(BatchOperationKind.INSERT, "t", "p", f"r{n}", None, None) for n in range(count)]
    codec = JsonFormat()
    assert _results_or_error(lambda: parse_batch_response(answer, content_type, ops, codec)) == _results_or_error(
        lambda: _general_results(answer, content_type, count, codec)
    )


def test_the_service_shape_is_read_in_one_pass() -> None:
    answer = _answer([_inner(headers=f"Content-ID: {n}\r\nETag: W/\"{n}\"\r\n") for n in (1, 2)])
    results = _standard_results(answer, "multipart/mixed; boundary=batchresponse_b", 2, JsonFormat())
    assert results is not None and [r.etag for r in results] == ['W/"1"', 'W/"2"']
    data = (_WIRE / "batch_azurite_100_mixed_response.http").read_bytes().partition(b"\r\n\r\n")[2]
    content_type = (_WIRE / "batch_azurite_100_mixed_response.http").read_bytes().split(b"\r\n", 1)[0].decode()
    assert _standard_results(data, content_type.split(": ", 1)[1], 100, JsonFormat()) is not None


# ------------------------------------------------------------------ batches of inserts

import itertools  # noqa: E402

import tablesdk._formats._batch as batch_module  # noqa: E402
from tablesdk._formats._batch import _general_batch_request, build_batch_request  # noqa: E402
from tablesdk._formats.atom import AtomFormat  # noqa: E402

from support import FakeFormat  # noqa: E402

_K = BatchOperationKind
_BASE = "https://acct.table.core.windows.net/"


def _insert(rk: object, pk: object = "p", table: object = "Blogs", text: str = "", **options: Any) -> BatchOperation:
    payload = EntityPayload({"PartitionKey": pk, "RowKey": rk, "Text": text or f"t{rk}", "N": 5},
                            {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "Text": EdmType.STRING,
                             "N": EdmType.INT32})
    return BatchOperation(_K.INSERT, table, pk, rk, payload, None, **options)  # type: ignore[arg-type]


def _with(op: BatchOperation, **changes: Any) -> BatchOperation:
    return BatchOperation(**{**op.__dict__, **changes})


def _inserts(count: int, **options: Any) -> list[BatchOperation]:
    return [_insert(f"r{n:03d}", **options) for n in range(count)]


def _odd_insert_batches() -> list[list[BatchOperation]]:
    base = _inserts(3)
    bad_value = EntityPayload({"PartitionKey": "p", "RowKey": "r1", "X": 5}, {"X": EdmType.STRING})
    return [
        _inserts(1), _inserts(100), _inserts(101), [], _inserts(3, echo_content=True),
        [base[0], _with(base[1], echo_content=True), base[2]], [_with(op, echo_content=1) for op in base],
        [base[0], _with(base[1], echo_content=0), base[2]],
        [base[0], _with(base[1], partition_key="q"), base[2]], [base[0], _with(base[1], table="Other"), base[2]],
        [base[0], _with(base[1], row_key="r000"), base[2]], [base[0], _with(base[1], payload=None), base[2]],
        [base[0], _with(base[1], payload=base[2].payload), base[2]],
        [base[0], _with(base[1], payload=EntityPayload({"Text": "no keys"}, {})), base[2]],
        [base[0], _with(base[1], kind=_K.DELETE, etag="*"), base[2]], [_with(base[0], kind=_K.INSERT_OR_MERGE)],
        [base[0], _with(base[1], row_key=["unhashable"]), base[2]],  # type: ignore[list-item]
        [base[0], _with(base[1], body=b'{"given":1}'), base[2]], [_with(op, body=b"") for op in base],
        [base[0], _with(base[1], body="text"), base[2]],  # type: ignore[arg-type]
        [base[0], _with(base[1], body=bytearray(b"{}")), base[2]],
        [base[0], _with(base[1], payload=bad_value), base[2]],
        [_insert(5, pk=5)], [_insert("r", pk=type("Sub", (str,), {})("p"))],
        [_insert("r", table="t b/\u00e9")], [_insert("r", table="t\ud800")],
        [_insert(f"r{n}", text="z" * 1_000_000) for n in range(5)],
        [_with(_insert(f"r{n}"), payload=EntityPayload({"PartitionKey": "p", "RowKey": f"r{n}", "T": "z" * 1_100_000},
                                                       {"T": EdmType.STRING})) for n in range(5)],
        [_with(_insert(f"r{n}"), body=b"z" * 1_100_000) for n in range(4)],
        [_insert("r", text="--batch_00000000-0000-4000-8000-000000000000")],
    ]


def _built(build: Any, ops: list[BatchOperation], fmt: Any, api_version: str) -> object:
    ids = itertools.chain(["00000000-0000-4000-8000-000000000000"], (f"{n:036d}" for n in itertools.count(1)))
    original = batch_module._new_boundary_id
    batch_module._new_boundary_id = lambda: next(ids)
    try:
        return build(_BASE, ops, fmt, api_version=api_version)
    except Exception as exc:  # noqa: BLE001 - the error is the outcome compared
        return (type(exc), str(exc))
    finally:
        batch_module._new_boundary_id = original


@pytest.mark.parametrize("fmt", [JsonFormat(), AtomFormat(clock=lambda: "2024-01-02T03:04:05Z"), FakeFormat()],
                         ids=["json", "atom", "fake"])
@pytest.mark.parametrize("api_version", ["2019-02-02", "2011-08-18"])
@pytest.mark.parametrize("ops", _odd_insert_batches(), ids=lambda ops: str(len(ops)))
def test_insert_batches_are_written_as_the_general_writer_writes_them(
    ops: list[BatchOperation], fmt: Any, api_version: str
) -> None:
    general = _built(lambda *a, api_version: _general_batch_request(*a, api_version), ops, fmt, api_version)
    assert _built(build_batch_request, ops, fmt, api_version) == general


def test_a_batch_of_inserts_takes_the_insert_writer() -> None:
    ops = _inserts(100)
    assert batch_module._insert_batch_request(_BASE, ops, JsonFormat(), "2019-02-02") is not None
    assert batch_module._insert_batch_request(_BASE, [_with(op, body=b"{}") for op in ops], JsonFormat(),
                                              "2019-02-02") is not None

