"""AtomFormat: entry building, feed parsing, XML escaping and safety, round trips at the EDM limits."""

from __future__ import annotations

import math
import threading
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from lxml import etree

from tablesdk._entities._edm import (
    EdmType,
    EntityPayload,
    parse_datetime,
)
from tablesdk._core._errors import TableValidationError
from tablesdk._formats import PayloadFormat, get_format
from support import EDM_LIMITS, assert_same_value, payload
from tablesdk._formats.atom import (
    ATOM_NS,
    DATASERVICES_NS,
    METADATA_NS,
    AtomFormat,
    parse_xml,
)

UTC = timezone.utc
T = EdmType
FIXED = datetime(2010, 10, 16, 15, 48, 53, 1161, tzinfo=UTC)
D = f"{{{DATASERVICES_NS}}}"
M = f"{{{METADATA_NS}}}"
A = f"{{{ATOM_NS}}}"


@pytest.fixture
def atom() -> AtomFormat:
    return AtomFormat(clock=lambda: FIXED)


def properties(body: bytes) -> list[etree._Element]:
    root = etree.fromstring(body)
    props = root.find(f"{A}content/{M}properties")
    assert props is not None
    return list(props)


def limits_payload() -> EntityPayload:
    """Every EDM type at its limits, with the strings XML can carry."""
    return payload(
        **EDM_LIMITS,
        Empty=("", T.STRING), Unicode=("é中😀\U0010ffff\u00a0", T.STRING),
        Spaces=("  lead and trail  ", T.STRING), OnlySpace=(" ", T.STRING),
        Newlines=("a\r\nb\rc\nd\te", T.STRING), Markup=("<a href=\"x\">&amp;</a> ]]> '", T.STRING),
    )


# ------------------------------------------------------------------ the interface


def test_identity_and_headers() -> None:
    fmt = AtomFormat()
    assert isinstance(fmt, PayloadFormat)
    assert fmt.name == "atom"
    assert fmt.default_api_version == "2015-04-05"
    assert fmt.content_type == "application/atom+xml"
    headers = fmt.request_headers()
    assert headers["Accept"] == "application/atom+xml,application/xml"
    assert headers["DataServiceVersion"] == "2.0;NetFx"
    assert headers["MaxDataServiceVersion"] == "2.0;NetFx"
    headers["Accept"] = "changed"
    assert fmt.request_headers()["Accept"] == "application/atom+xml,application/xml"


def test_get_format_builds_atom() -> None:
    assert isinstance(get_format("atom"), AtomFormat)


# ------------------------------------------------------------------ writing


def test_entry_shape(atom: AtomFormat) -> None:
    body = atom.serialize_entity(payload(Rating=(4.5, T.DOUBLE)))
    assert body.startswith(b'<?xml version="1.0" encoding="utf-8" standalone="yes"?><entry ')
    root = etree.fromstring(body)
    assert root.tag == f"{A}entry"
    assert root.nsmap == {"d": DATASERVICES_NS, "m": METADATA_NS, None: ATOM_NS}
    assert [child.tag for child in root] == [f"{A}title", f"{A}author", f"{A}updated", f"{A}id", f"{A}content"]
    assert root.findtext(f"{A}updated") == "2010-10-16T15:48:53.0011610Z"
    assert root.find(f"{A}content").get("type") == "application/xml"  # type: ignore[union-attr]
    assert [(p.tag, p.attrib, p.text) for p in properties(body)] == [
        (f"{D}PartitionKey", {}, "pk"),
        (f"{D}RowKey", {}, "rk"),
        (f"{D}Rating", {f"{M}type": "Edm.Double"}, "4.5"),
    ]


def test_updated_defaults_to_now() -> None:
    before = datetime.now(UTC)
    root = etree.fromstring(AtomFormat().serialize_entity(payload()))
    updated = parse_datetime(root.findtext(f"{A}updated") or "")
    assert before - timedelta(seconds=1) <= updated <= datetime.now(UTC) + timedelta(seconds=1)


def test_timestamp_is_never_sent(atom: AtomFormat) -> None:
    p = payload(Timestamp=(datetime(2020, 1, 1, tzinfo=UTC), T.DATETIME), X=(1, T.INT32))
    names = [el.tag for el in properties(atom.serialize_entity(p))]
    assert f"{D}Timestamp" not in names and f"{D}X" in names


def test_nulls_keep_their_type_strings_have_none(atom: AtomFormat) -> None:
    p = payload(N32=(None, T.INT32), NStr=(None, T.STRING), NDate=(None, T.DATETIME))
    p.values["Untyped"] = None
    els = {el.tag[len(D):]: el for el in properties(atom.serialize_entity(p))}
    assert dict(els["N32"].attrib) == {f"{M}type": "Edm.Int32", f"{M}null": "true"}
    assert dict(els["NDate"].attrib) == {f"{M}type": "Edm.DateTime", f"{M}null": "true"}
    assert dict(els["NStr"].attrib) == {f"{M}null": "true"}
    assert dict(els["Untyped"].attrib) == {f"{M}null": "true"}
    assert all(el.text is None for el in els.values() if el.tag not in (f"{D}PartitionKey", f"{D}RowKey"))


def test_types_inferred_when_missing(atom: AtomFormat) -> None:
    p = EntityPayload({"PartitionKey": "p", "RowKey": "r", "Big": 2**40, "F": 1.5}, {})
    els = {el.tag[len(D):]: el for el in properties(atom.serialize_entity(p))}
    assert els["Big"].get(f"{M}type") == "Edm.Int64"
    assert els["F"].get(f"{M}type") == "Edm.Double"
    assert els["PartitionKey"].get(f"{M}type") is None


@pytest.mark.parametrize(
    "text, wire",
    [
        ("a<b", b"<d:S>a&lt;b</d:S>"),
        ("a&b", b"<d:S>a&amp;b</d:S>"),
        ("a>b", b"<d:S>a&gt;b</d:S>"),
        ("]]>", b"<d:S>]]&gt;</d:S>"),
        ("\"'", b"<d:S>\"'</d:S>"),
        ("a\r\nb", b"<d:S>a&#13;\nb</d:S>"),
        ("tab\there", b"<d:S>tab\there</d:S>"),
        (" x", b'<d:S xml:space="preserve"> x</d:S>'),
        ("x\n", b'<d:S xml:space="preserve">x\n</d:S>'),
        ("\rx", b'<d:S xml:space="preserve">&#13;x</d:S>'),
        ("\n", b'<d:S xml:space="preserve">\n</d:S>'),
        ("é😀", "<d:S>é😀</d:S>".encode()),
    ],
)
def test_string_escaping(atom: AtomFormat, text: str, wire: bytes) -> None:
    body = atom.serialize_entity(payload(S=(text, T.STRING)))
    assert wire in body
    assert atom.parse_entity(body).values["S"] == text


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x08", "\x0b", "\x0c", "\x1f", "\ud800", "\udfff", "\ufffe", "\uffff"])
def test_characters_xml_cannot_carry_are_refused_naming_the_property(atom: AtomFormat, char: str) -> None:
    with pytest.raises(TableValidationError) as info:
        atom.serialize_entity(payload(Comment=("ok" + char + "ok", T.STRING)))
    assert info.value.field == "Comment"
    assert "JSON" in str(info.value) and "index 2" in str(info.value)


def test_allowed_edge_characters_pass(atom: AtomFormat) -> None:
    text = "\x7f\x80\x9f\ud7ff\ue000\ufffd\U00010000\U0010ffff"
    assert atom.parse_entity(atom.serialize_entity(payload(S=(text, T.STRING)))).values["S"] == text


def test_string_property_must_be_str(atom: AtomFormat) -> None:
    with pytest.raises(TableValidationError, match="Edm.String needs a str"):
        atom.serialize_entity(payload(S=(5, T.STRING)))


def test_property_names_must_be_identifiers(atom: AtomFormat) -> None:
    p = payload()
    p.values["a<b"] = "x"
    p.types["a<b"] = T.STRING
    with pytest.raises(TableValidationError):
        atom.serialize_entity(p)


def test_serialize_table(atom: AtomFormat) -> None:
    body = atom.serialize_table("mytable")
    root = etree.fromstring(body)
    assert root.tag == f"{A}entry"
    assert [(p.tag, p.text, dict(p.attrib)) for p in properties(body)] == [(f"{D}TableName", "mytable", {})]
    assert atom.parse_tables(body) == ["mytable"]


# ------------------------------------------------------------------ round trips


def test_round_trip_every_type_at_its_limits(atom: AtomFormat) -> None:
    sent = limits_payload()
    got = atom.parse_entity(atom.serialize_entity(sent))
    assert list(got.values) == list(sent.values)
    assert got.types == sent.types
    for name, want in sent.values.items():
        assert_same_value(name, got.values[name], want, sent.types[name])
    assert got.etag is None


def test_round_trip_keeps_the_seventh_digit_bytes_exact(atom: AtomFormat) -> None:
    sent = payload(When=(parse_datetime("2024-01-02T03:04:05.1234567Z"), T.DATETIME))
    body = atom.serialize_entity(sent)
    assert b">2024-01-02T03:04:05.1234567Z<" in body
    again = atom.serialize_entity(atom.parse_entity(body))
    assert body == again


def test_round_trip_nulls(atom: AtomFormat) -> None:
    sent = payload(N=(None, T.INT64), S=(None, T.STRING))
    got = atom.parse_entity(atom.serialize_entity(sent))
    assert got.values == {"PartitionKey": "pk", "RowKey": "rk", "N": None, "S": None}
    assert got.types["N"] is T.INT64 and got.types["S"] is T.STRING


def test_binary_from_memoryview_and_bytearray(atom: AtomFormat) -> None:
    sent = payload(A=(bytearray(b"\x00\xff"), T.BINARY), B=(memoryview(b"\x01"), T.BINARY))
    got = atom.parse_entity(atom.serialize_entity(sent))
    assert got.values["A"] == b"\x00\xff" and got.values["B"] == b"\x01"


# ------------------------------------------------------------------ reading


def entry(props: str, etag: str | None = None) -> bytes:
    etag_attr = f' m:etag="{etag}"' if etag else ""
    return (
        f'<entry xmlns:d="{DATASERVICES_NS}" xmlns:m="{METADATA_NS}" xmlns="{ATOM_NS}"{etag_attr}>'
        f'<content type="application/xml"><m:properties>{props}</m:properties></content></entry>'
    ).encode()


def test_missing_type_is_string_and_empty_element_is_empty_string(atom: AtomFormat) -> None:
    got = atom.parse_entity(entry("<d:A>1</d:A><d:B /><d:C></d:C>"))
    assert got.values == {"A": "1", "B": "", "C": ""}
    assert got.types == {"A": T.STRING, "B": T.STRING, "C": T.STRING}


def test_etag_from_entry_wins_over_header(atom: AtomFormat) -> None:
    body = entry("<d:A>1</d:A>", etag="W/&quot;datetime'2015-06-01T10%3A20%3A29.1234567Z'&quot;")
    assert atom.parse_entity(body, etag='W/"other"').etag == "W/\"datetime'2015-06-01T10%3A20%3A29.1234567Z'\""
    assert atom.parse_entity(entry("<d:A>1</d:A>"), etag='W/"header"').etag == 'W/"header"'


def test_whitespace_around_typed_values_is_tolerated(atom: AtomFormat) -> None:
    body = entry(
        '<d:I m:type="Edm.Int32"> 5 </d:I><d:G m:type="Edm.Guid"> c9da6455-213d-42c9-9a79-3e9149a57833\n</d:G>'
        '<d:W m:type="Edm.DateTime">\n2024-01-02T03:04:05.1234567Z </d:W><d:B m:type="Edm.Boolean"> true</d:B>'
        '<d:D m:type="Edm.Double"> NaN </d:D>'
    )
    got = atom.parse_entity(body).values
    assert got["I"] == 5 and got["B"] is True and math.isnan(got["D"])
    assert got["G"] == uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833")
    assert got["W"].ticks_remainder == 7


def test_null_false_is_not_null(atom: AtomFormat) -> None:
    got = atom.parse_entity(entry('<d:I m:type="Edm.Int32" m:null="false">3</d:I>'))
    assert got.values == {"I": 3}


def test_other_namespaces_comments_and_pis_are_ignored(atom: AtomFormat) -> None:
    body = entry('<!-- note --><d:A>1</d:A><?pi x?><x:B xmlns:x="urn:other">2</x:B><d:C>3<!-- c --></d:C>')
    assert atom.parse_entity(body).values == {"A": "1", "C": "3"}


def test_entry_without_properties_is_an_empty_entity(atom: AtomFormat) -> None:
    body = f'<entry xmlns="{ATOM_NS}"><content type="application/xml" /></entry>'.encode()
    got = atom.parse_entity(body)
    assert got.values == {} and got.types == {}


@pytest.mark.parametrize(
    "prop, message",
    [
        ('<d:I m:type="Edm.Int32">x</d:I>', "property 'I': not a valid Edm.Int32"),
        ('<d:B m:type="Edm.Boolean">yes</d:B>', "property 'B'"),
        ('<d:G m:type="Edm.Guid">nope</d:G>', "property 'G'"),
        ('<d:W m:type="Edm.DateTime">not-a-date</d:W>', "property 'W'"),
        ('<d:X m:type="Edm.Binary">@@@</d:X>', "property 'X'"),
        ('<d:U m:type="Edm.Byte">1</d:U>', "property 'U': unknown EDM type 'Edm.Byte'"),
    ],
)
def test_bad_values_raise_value_error_naming_the_property(atom: AtomFormat, prop: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        atom.parse_entity(entry(prop))


@pytest.mark.parametrize(
    "body",
    [b"", b"   ", b"not xml", b"<entry", b"<html><body>oops</body></html>", b'{"value": []}', "<entry/>".encode("utf-16")],
)
def test_malformed_or_foreign_bodies_raise_value_error(atom: AtomFormat, body: bytes) -> None:
    with pytest.raises(ValueError):
        atom.parse_entities(body)


def test_parse_entity_needs_exactly_one(atom: AtomFormat) -> None:
    feed = f'<feed xmlns="{ATOM_NS}"></feed>'.encode()
    with pytest.raises(ValueError, match="found 0"):
        atom.parse_entity(feed)
    assert atom.parse_entities(feed) == []


def test_parse_entities_of_a_single_entry(atom: AtomFormat) -> None:
    assert [p.values for p in atom.parse_entities(entry("<d:A>1</d:A>"))] == [{"A": "1"}]


def test_parse_tables_requires_table_name(atom: AtomFormat) -> None:
    with pytest.raises(ValueError, match="TableName"):
        atom.parse_tables(entry("<d:Other>x</d:Other>"))


def test_datetime_fast_path_matches_edm(atom: AtomFormat) -> None:
    for text in [
        "2024-01-02T03:04:05.1234567Z", "0001-01-01T00:00:00.0000000Z", "9999-12-31T23:59:59.9999999Z",
        "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.12Z", "2024-01-02T03:04:05.123456789Z",
        "2024-01-02T05:04:05.1234567+02:00", "2024-01-02T03:04:05",
    ]:
        got = atom.parse_entity(entry(f'<d:W m:type="Edm.DateTime">{text}</d:W>')).values["W"]
        want = parse_datetime(text)
        assert type(got) is type(want) and got == want and got.ticks_remainder == want.ticks_remainder, text
        assert got.tzinfo is want.tzinfo


# ------------------------------------------------------------------ XML safety


def test_doctype_with_external_entity_is_refused() -> None:
    body = (
        b'<?xml version="1.0"?><!DOCTYPE entry [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        + entry("<d:A>&x;</d:A>")
    )
    with pytest.raises(ValueError, match="DOCTYPE"):
        AtomFormat().parse_entity(body)


def test_entity_bomb_is_refused_quickly() -> None:
    decls = '<!ENTITY a0 "xxxxxxxxxx">' + "".join(
        f'<!ENTITY a{i} "{("&a%d;" % (i - 1)) * 10}">' for i in range(1, 12)
    )
    body = f'<?xml version="1.0"?><!DOCTYPE entry [{decls}]>'.encode() + entry("<d:A>&a11;</d:A>")
    with pytest.raises(ValueError):
        AtomFormat().parse_entities(body)


def test_undeclared_entity_is_a_syntax_error() -> None:
    with pytest.raises(ValueError, match="malformed"):
        parse_xml(entry("<d:A>&nbsp;</d:A>"))


def test_parser_is_safe_to_share_between_threads() -> None:
    fmt = AtomFormat(clock=lambda: FIXED)
    body = b"<feed xmlns=\"%s\">" % ATOM_NS.encode() + b"".join(
        fmt.serialize_entity(payload(N=(i, T.INT32)))[len(b'<?xml version="1.0" encoding="utf-8" standalone="yes"?>'):]
        for i in range(50)
    ) + b"</feed>"
    expected = [p.values for p in fmt.parse_entities(body)]
    assert len(expected) == 50
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                assert [p.values for p in fmt.parse_entities(body)] == expected
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


# ------------------------------------------------------------------ pages read column by column


def _by_entry(atom: AtomFormat, body: bytes) -> list[EntityPayload]:
    return atom._read(parse_xml(body))


def _feed(*entries: str) -> bytes:
    return (
        f'<feed xmlns:d="{DATASERVICES_NS}" xmlns:m="{METADATA_NS}" xmlns="{ATOM_NS}">' + "".join(entries) + "</feed>"
    ).encode()


def _entry_text(props: str, etag: str = "") -> str:
    return entry(props, etag or None).decode().replace(
        f' xmlns:d="{DATASERVICES_NS}" xmlns:m="{METADATA_NS}" xmlns="{ATOM_NS}"', ""
    )


_TYPED = (
    '<d:PartitionKey>p</d:PartitionKey><d:RowKey>{row}</d:RowKey><d:I m:type="Edm.Int32">{i}</d:I>'
    '<d:L m:type="Edm.Int64">{big}</d:L><d:D m:type="Edm.Double">{i}.5</d:D><d:B m:type="Edm.Boolean">{b}</d:B>'
    '<d:W m:type="Edm.DateTime">{when}</d:W><d:G m:type="Edm.Guid">{guid}</d:G><d:X m:type="Edm.Binary">AAEC</d:X>'
    '<d:E /><d:S m:type="Edm.String">s</d:S><d:N m:type="Edm.Int32" m:null="true" />'
)
_WHENS = ("2024-01-02T03:04:05.1234567Z", "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.1230000Z", "2024-01-02T03:04:05.94687Z")


def _typed(n: int, **changes: str) -> str:
    fields = {
        "row": str(n), "i": str(n), "big": str(2**40 + n), "b": ("true", "false")[n % 2], "when": _WHENS[n % 4],
        "guid": f"{n:08x}-213d-42c9-9a79-3e9149a57833",
    }
    fields.update(changes)
    return _entry_text(_TYPED.format(**fields), etag=f"W/&quot;{n}&quot;")


#: Pages the column-by-column reading takes (one shape, several, empty entries, nulls, forms
#: only the per-value readers read) and pages it leaves to the entry-by-entry reading.
_PAGES = {
    "one shape": _feed(*(_typed(i) for i in range(8))),
    "two shapes interleaved": _feed(*(_typed(i) if i % 3 else _entry_text("<d:A>x</d:A>") for i in range(7))),
    "empty entries": _feed(_typed(1), '<entry><content type="application/xml" /></entry>', _typed(2), "<entry />"),
    "forms the column readers leave": _feed(
        _typed(1, b="1", when=" 2024-01-02T03:04:05Z ", guid=" c9da6455-213d-42c9-9a79-3e9149a57833\n", big=" 7 "),
        _typed(2, b="False", when="2024-01-02T05:04:05.1234567+02:00", guid="{c9da6455-213d-42c9-9a79-3e9149a57833}"),
        _typed(3, b="0", when="2024-01-02T03:04:05"),
    ),
    "whitespace in a guid column": _feed(_typed(1, guid=" c9da645-213d-42c9-9a79-3e9149a57833"), _typed(2)),
    "xml:space, other attributes, null false": _feed(
        _entry_text('<d:A xml:space="preserve"> a </d:A><d:I m:type="Edm.Int32" m:null="false" x="1">3</d:I>'),
        _entry_text('<d:A xml:space="preserve"> b </d:A><d:I m:type="Edm.Int32" m:null="false" x="1">4</d:I>'),
    ),
    "only nulls": _feed(_entry_text('<d:N m:null="true" /><d:M m:type="Edm.Guid" m:null="true" />')),
    "another namespace": _feed(_entry_text('<d:A>1</d:A><x:B xmlns:x="urn:other">2</x:B>'), _typed(1)),
    "a repeated property": _feed(_typed(1), _entry_text("<d:A>1</d:A><d:A>2</d:A>")),
    "an unknown type": _feed(_typed(1), _entry_text('<d:U m:type="Edm.Byte">1</d:U>')),
    "an Int32 out of range": _feed(_typed(1), _typed(2, i="2147483648")),
    "an Int64 too long": _feed(_typed(1, big="0" * 30 + "1")),
    "a bad value in the second entity, an unknown type in the third": _feed(
        _typed(1), _typed(2, b="yes"), _entry_text('<d:U m:type="Edm.Byte">1</d:U>')
    ),
    "an empty typed element": _feed(_typed(1), _entry_text('<d:I m:type="Edm.Int32" />')),
    "properties outside an entry": (
        f'<feed xmlns:d="{DATASERVICES_NS}" xmlns:m="{METADATA_NS}" xmlns="{ATOM_NS}">'
        "<m:properties><d:A>0</d:A></m:properties>" + _typed(1) + "</feed>"
    ).encode(),
    "two properties elements in an entry": _feed(
        '<entry><content type="application/xml"><m:properties><d:A>1</d:A></m:properties>'
        "<m:properties><d:A>2</d:A><d:B>3</d:B></m:properties></content></entry>"
    ),
}


def _described(payloads: list[EntityPayload]) -> list[tuple[object, ...]]:
    """Everything a payload holds, down to the class and seventh digit of each value."""
    return [
        (
            [(name, type(value), repr(value), getattr(value, "ticks_remainder", None)) for name, value in p.values.items()],
            list(p.types.items()), p.etag,
        )
        for p in payloads
    ]


@pytest.mark.parametrize("name", list(_PAGES))
def test_a_page_reads_as_entry_by_entry(atom: AtomFormat, name: str) -> None:
    body = _PAGES[name]
    try:
        want: object = _described(_by_entry(atom, body))
    except ValueError as exc:
        want = str(exc)
    for _ in range(2):  # the second time with the shapes remembered
        try:
            got: object = _described(atom.parse_entities(body))
        except ValueError as exc:
            got = getattr(exc, "reason", str(exc))
        assert got == want


def test_a_regular_page_is_read_column_by_column(atom: AtomFormat, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: AtomFormat, root: object) -> list[EntityPayload]:
        raise AssertionError("read entry by entry")

    monkeypatch.setattr(AtomFormat, "_read", refuse)
    for name in ("one shape", "two shapes interleaved", "empty entries", "forms the column readers leave", "only nulls"):
        page = atom.parse_entity_page(_PAGES[name])
        assert len(page) == len(_PAGES[name].split(b"<entry")) - 1, name
    page = atom.parse_entity_page(_PAGES["one shape"])
    assert len({id(types) for types in page.types}) == 1  # one types dict for the entities of a shape
    with pytest.raises(AssertionError, match="entry by entry"):
        atom.parse_entity_page(_PAGES["a repeated property"])
