"""Unit tests for the devstore $filter tokenizer, parser and evaluator."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tablesdk.devstore._filter import FilterError, compile_filter, tokenize

S, I32, I64, DBL = "Edm.String", "Edm.Int32", "Edm.Int64", "Edm.Double"
BOOL, DT, GUID, BIN = "Edm.Boolean", "Edm.DateTime", "Edm.Guid", "Edm.Binary"

G1 = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
G2 = "9b4e28ba-2fa1-11d2-883f-0016d3cca427"

ENTITY: dict[str, tuple[str, Any]] = {
    "PartitionKey": (S, "pk1"),
    "RowKey": (S, "rk'1"),
    "Name": (S, "O'Neil"),
    "Empty": (S, ""),
    "Age": (I32, 42),
    "Neg": (I32, -7),
    "Big": (I64, 2**40 + 1),
    "Small64": (I64, 5),
    "Score": (DBL, 4.5),
    "Whole": (DBL, 3.0),
    "Nan": (DBL, math.nan),
    "Flag": (BOOL, True),
    "Off": (BOOL, False),
    "When": (DT, "2024-01-02T03:04:05.1234567Z"),
    "Id": (GUID, G1),
    "Data": (BIN, b"\x0a\xff"),
    "Rating": (I32, 3),
}


def match(text: str, entity: dict[str, tuple[str, Any]] | None = None) -> bool:
    return compile_filter(text).matches(ENTITY if entity is None else entity)


# ----------------------------------------------------------------- literals of every type

@pytest.mark.parametrize(
    "text, expected",
    [
        # strings, with the '' escape
        ("Name eq 'O''Neil'", True),
        ("Name eq 'O'Neil'", None),  # malformed: tested below, listed for completeness
        ("Empty eq ''", True),
        ("PartitionKey eq 'pk1'", True),
        ("RowKey eq 'rk''1'", True),
        ("Name gt 'N'", True),
        ("Name lt 'N'", False),
        ("Name ne 'x'", True),
        # Int32
        ("Age eq 42", True),
        ("Age ge 42", True),
        ("Age gt 42", False),
        ("Age lt 43", True),
        ("Age le 41", False),
        ("Age ne 41", True),
        ("Neg eq -7", True),
        ("Neg lt 0", True),
        ("Age eq 2147483647", False),
        # Int64 needs the L suffix
        ("Big eq 1099511627777L", True),
        ("Big gt 1099511627776L", True),
        ("Small64 eq 5L", True),
        ("Small64 eq 5l", True),
        ("Big lt -9223372036854775808L", False),
        # Double
        ("Score eq 4.5", True),
        ("Score gt 4.4", True),
        ("Score lt 4.5", False),
        ("Score eq 4.5d", True),
        ("Score eq 45e-1", True),
        ("Score eq 0.45E1", True),
        ("Whole eq 3.0", True),
        ("Whole eq 3d", True),
        ("Nan eq 1.0", False),
        ("Nan ne 1.0", True),
        # Boolean
        ("Flag eq true", True),
        ("Flag eq false", False),
        ("Off eq false", True),
        ("Flag ne false", True),
        ("Flag gt false", True),
        # DateTime (7 digits, fewer digits, no fraction)
        ("When eq datetime'2024-01-02T03:04:05.1234567Z'", True),
        ("When eq datetime'2024-01-02T03:04:05.123456Z'", False),
        ("When gt datetime'2024-01-02T03:04:05.123456Z'", True),
        ("When lt datetime'2024-01-02T03:04:06Z'", True),
        ("When ge datetime'2024-01-02T03:04:05Z'", True),
        ("When eq datetime'2024-01-02T04:04:05.1234567+01:00'", True),
        # Guid (case-insensitive text)
        (f"Id eq guid'{G1}'", True),
        (f"Id eq guid'{G1.upper()}'", True),
        (f"Id lt guid'{G2}'", True),
        (f"Id ne guid'{G2}'", True),
        # Binary, both spellings
        ("Data eq X'0aff'", True),
        ("Data eq binary'0AFF'", True),
        ("Data gt X'0a'", True),
        ("Data lt X'0b'", True),
        ("Data eq X''", False),
    ],
)
def test_literal_types(text: str, expected: bool | None) -> None:
    if expected is None:
        with pytest.raises(FilterError):
            compile_filter(text)
        return
    assert match(text) is expected


def test_timestamp_is_a_datetime() -> None:
    entity = dict(ENTITY, Timestamp=(DT, "2026-01-01T00:00:00.0000000Z"))
    assert match("Timestamp gt datetime'2025-12-31T00:00:00Z'", entity)
    assert not match("Timestamp gt '2025'", entity)  # a string literal is another type


# ----------------------------------------------------------------- the typing rule (white paper 8.4)

@pytest.mark.parametrize(
    "text",
    [
        "Age eq 42L",  # Int32 property, Int64 literal
        "Age eq 42.0",  # Int32 property, Double literal
        "Age eq '42'",  # Int32 property, String literal
        "Big eq 1099511627777.0",
        "Whole eq 3L",  # Double property, Int64 literal
        "Small64 eq 5.0",  # Int64 property, Double literal
        "Flag eq 'true'",
        "Name eq 1",
        f"Name eq guid'{G1}'",
        f"Id eq '{G1}'",  # Guid property, String literal
        "When eq '2024-01-02T03:04:05.1234567Z'",
        "Data eq '0aff'",
    ],
)
def test_type_mismatch_never_matches(text: str) -> None:
    flt = compile_filter(text)
    assert flt.matches(ENTITY) is False
    assert flt.evaluate(ENTITY) is None  # unknown, not false


@pytest.mark.parametrize("text, expected", [
    # the one exception to the typing rule: an Int32 literal compares by value with Int64 and
    # Double properties (the service's answers: AzureStorageExplorer issues 5346 and 6866)
    ("Small64 eq 5", True), ("Small64 gt 5", False), ("Big gt 5", True), ("Whole eq 3", True),
    ("Score gt 1", True), ("Score lt 4", False), ("5 eq Small64", True), ("Nan eq 1", False),
])
def test_an_int32_literal_compares_by_value_with_int64_and_double(text: str, expected: bool) -> None:
    assert match(text) is expected


def test_type_mismatch_is_not_turned_into_a_match_by_not() -> None:
    assert not match("not (Age eq 42L)")
    assert not match("not (Age ne 42L)")
    assert not match("Age ne 42L")


def test_same_property_different_types_across_entities() -> None:
    # entity A has Rating Int32, entity B has Rating Double (the white paper's example)
    a = {"Rating": (I32, 3)}
    b = {"Rating": (DBL, 3.5)}
    flt = compile_filter("Rating gt 1.2")
    assert [flt.matches(a), flt.matches(b)] == [False, True]
    flt = compile_filter("Rating gt 1")  # but an Int32 literal compares with a Double by value
    assert [flt.matches(a), flt.matches(b)] == [True, True]


# ----------------------------------------------------------------- missing properties

@pytest.mark.parametrize("text", ["Missing eq 'x'", "Missing ne 'x'", "Missing gt 0", "Missing le 0",
                                  "Missing", "Missing eq Age", "Age ne Missing"])
def test_a_comparison_with_a_missing_property_is_false(text: str) -> None:
    assert not match(text)
    assert compile_filter(text).evaluate(ENTITY) is False


@pytest.mark.parametrize("text", ["not (Missing eq 'x')", "not (Missing ne 'x')", "not (Missing gt 0)",
                                  "not Missing", "not (Missing eq 'x' or Missing eq 'y')"])
def test_not_turns_a_missing_property_into_a_match(text: str) -> None:
    # As Azurite and (by users' reports) the service: false, not unknown (differential test)
    assert match(text)


def test_missing_property_in_or_and() -> None:
    assert match("Missing eq 'x' or Age eq 42")
    assert not match("Missing eq 'x' and Age eq 42")
    assert not match("Missing eq 'x' or Age eq 1")
    assert not match("Age eq 1 and Missing eq 'x'")
    assert compile_filter("Age eq 1 and Missing eq 'x'").evaluate(ENTITY) is False
    assert compile_filter("Age eq 42 and Missing eq 'x'").evaluate(ENTITY) is False
    assert compile_filter("Age eq 42 and Age eq 42L").evaluate(ENTITY) is None  # a type mismatch is unknown


def test_strings_compare_by_utf16_code_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00, below U+E000 in UTF-16 (above it by code point)
    astral = {"S": (S, "\U0001F600")}
    private = {"S": (S, "\ue000")}
    flt = compile_filter("S lt '\ue000'")
    assert [flt.matches(astral), flt.matches(private)] == [True, False]
    flt = compile_filter("S gt '\U0001F600'")
    assert [flt.matches(astral), flt.matches(private)] == [False, True]
    assert compile_filter("S ge '\ud7ff' and S le '\U0010ffff'").matches(astral)


# ----------------------------------------------------------------- boolean properties and literals

def test_bare_boolean_property() -> None:
    assert match("Flag")
    assert not match("Off")
    assert match("not Off")
    assert not match("not Flag")
    assert match("Flag and Age eq 42")
    assert match("(Flag)")


def test_bare_non_boolean_property_does_not_match() -> None:
    assert not match("Name")
    assert not match("not Name")
    assert not match("Age")


def test_boolean_literals_and_comparison_results() -> None:
    assert match("true")
    assert not match("false")
    assert match("(Age eq 42) eq true")
    assert match("(Age eq 1) eq false")
    assert match("Flag eq (Age eq 42)")


# ----------------------------------------------------------------- precedence and grouping

@pytest.mark.parametrize(
    "text, expected",
    [
        ("Age eq 1 and Age eq 2 or Age eq 42", True),  # (F and F) or T
        ("Age eq 42 or Age eq 1 and Age eq 2", True),  # T or (F and F)
        ("(Age eq 42 or Age eq 1) and Age eq 2", False),
        ("Age eq 42 or (Age eq 1 and Age eq 2)", True),
        ("not Age eq 1 and Age eq 42", True),  # (not F) and T
        ("not (Age eq 42 and Flag)", False),
        ("not not Flag", True),
        ("not Off or Off", True),
        ("not (Off or Off)", True),
        ("((((Age eq 42))))", True),
        ("Age eq 42 and (Name eq 'x' or (Flag and not Off))", True),
        ("true or Missing eq 1", True),
        ("false and Missing eq 1", False),
        ("Age eq 1 or Age eq 2 or Age eq 3 or Age eq 42", True),
        ("Age gt 1 and Age lt 100 and Score ge 4.5 and Flag", True),
    ],
)
def test_precedence(text: str, expected: bool) -> None:
    assert match(text) is expected


def test_whitespace_is_flexible() -> None:
    assert match("  Age   eq\t42  ")
    assert match("(Age eq 42)and(Flag)")


def test_literal_on_the_left() -> None:
    assert match("42 eq Age")
    assert match("40 lt Age")
    assert not match("50 lt Age")
    assert match("'pk1' eq PartitionKey")


def test_property_against_property() -> None:
    entity = {"A": (I32, 1), "B": (I32, 2), "C": (S, "x")}
    assert compile_filter("A lt B").matches(entity)
    assert not compile_filter("A eq C").matches(entity)


# ----------------------------------------------------------------- malformed filters

@pytest.mark.parametrize(
    "text",
    [
        "Age eq",
        "eq 5",
        "Age 42",
        "Age eq 42 and",
        "and Age eq 42",
        "(Age eq 42",
        "Age eq 42)",
        "()",
        "Name eq 'unterminated",
        "Name eq 'O'Neil'",
        "Age eq 42 Age eq 42",
        "Age == 42",
        "Age = 42",
        "Age EQ 42",  # keywords are lower case
        "Age eq 42 AND Flag",
        "Age eq 4 2",
        "startswith(Name, 'O')",
        "substringof('x', Name)",
        "Age add 1 eq 43",
        "Age eq null",
        "Name eq datetime'not-a-date'",
        "Name eq datetime'1600-12-31T00:00:00Z'",
        "Id eq guid'xyz'",
        "Data eq X'0'",
        "Data eq X'zz'",
        "Age eq 2147483648",  # does not fit Int32 without L
        "Big eq 9223372036854775808L",
        "Age eq 1.5L",
        "Age eq 5M",
        "Age eq 5f",
        "Age eq 5x",
        "Name eq time'12:00'",
        "Name/Length eq 3",
        "Age eq 42 or",
        "not",
        "Age eq 'a' eq 'b'",
        "'a' and Flag",  # a string is not a condition
        "5",
        "'text'",
        "Age eq 42 and 7",
        "not 'x'",
        "1 eq 'a'",  # two literals of different types
        "Name eq @x",
        "Name eq \"x\"",
        "Name eq 'x' ; Age eq 1",
        "Age eq -",
    ],
)
def test_malformed(text: str) -> None:
    with pytest.raises(FilterError):
        compile_filter(text)


def test_literal_only_conditions_are_allowed() -> None:
    assert compile_filter("1 eq 1").matches({})
    assert not compile_filter("1 eq 2").matches({})
    assert compile_filter("'a' lt 'b'").matches({})


# ----------------------------------------------------------------- tokenizer details

def test_tokenizer_kinds() -> None:
    kinds = [(t.kind, t.value) for t in tokenize("(A eq 'it''s') or B ge 5L")]
    assert kinds == [
        ("(", "("), ("ident", "A"), ("ident", "eq"), ("lit", (S, "it's")), (")", ")"),
        ("ident", "or"), ("ident", "B"), ("ident", "ge"), ("lit", (I64, 5)), ("end", None),
    ]


def test_tokenizer_typed_literals() -> None:
    toks = tokenize(f"datetime'2024-01-02T03:04:05Z' guid'{G1.upper()}' X'00ff' binary'0A' -1.5 7")
    values = [t.value for t in toks if t.kind == "lit"]
    assert values == [
        (DT, "2024-01-02T03:04:05.0000000Z"), (GUID, G1), (BIN, b"\x00\xff"), (BIN, b"\x0a"),
        (DBL, -1.5), (I32, 7),
    ]


def test_property_named_like_a_literal_prefix() -> None:
    entity = {"datetime": (I32, 1), "X": (S, "y"), "guid": (BOOL, True)}
    assert compile_filter("datetime eq 1 and X eq 'y' and guid").matches(entity)


def test_unicode_strings_and_names() -> None:
    entity = {"Städte": (S, "München 😀")}
    assert compile_filter("Städte eq 'München 😀'").matches(entity)


# ----------------------------------------------------------------- key ranges used to narrow scans

def test_key_ranges() -> None:
    flt = compile_filter("PartitionKey eq 'p' and RowKey ge 'a' and RowKey lt 'm' and Age gt 1")
    assert flt.ranges["PartitionKey"].eq == "p"
    assert flt.ranges["RowKey"].lower == ("a", True)
    assert flt.ranges["RowKey"].upper == ("m", False)
    flipped = compile_filter("'p' le PartitionKey")
    assert flipped.ranges["PartitionKey"].lower == ("p", True)


def test_key_ranges_ignore_disjunctions_and_negations() -> None:
    assert compile_filter("PartitionKey eq 'a' or PartitionKey eq 'b'").ranges == {}
    assert compile_filter("not (PartitionKey eq 'a')").ranges == {}
    assert compile_filter("PartitionKey ne 'a'").ranges == {}
    assert compile_filter("PartitionKey eq 5").ranges == {}
