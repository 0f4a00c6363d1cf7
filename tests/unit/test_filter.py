"""Unit tests for tablesdk._entities._filter: literals, typing, precedence, helpers, limits, point keys."""

from __future__ import annotations

import itertools
import random
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tablesdk._entities._edm import EdmDateTime, EdmType, EntityProperty, Int64
from tablesdk._entities._entity import TableEntity
from tablesdk._core._errors import TableValidationError
from tablesdk._entities._filter import (
    MAX_FILTER_COMPARISONS,
    And,
    Comparison,
    Filter,
    Not,
    Or,
    PropertyRef,
    RawFilter,
    count_comparisons,
    point_keys,
    prefix_upper_bound,
    prop,
    render_filter,
)


class Blog(TableEntity):
    Text: str
    Rating: int
    Views: Int64
    Score: float
    Posted: datetime
    Id: uuid.UUID
    Blob: bytes
    Featured: bool


A, B, C, D = prop("A"), prop("B"), prop("C"), prop("D")


# ---------------------------------------------------------------- PropertyRef basics


def test_property_ref_keeps_its_contract() -> None:
    ref = prop("Rating", EdmType.INT64)
    assert isinstance(ref, PropertyRef)
    assert (ref.name, ref.edm_type) == ("Rating", EdmType.INT64)
    assert prop("X").edm_type is None
    assert hash(ref) == object.__hash__(ref)
    assert {ref: 1}[ref] == 1  # hashable by identity despite __eq__ building filters
    with pytest.raises(AttributeError):
        ref.other = 1  # type: ignore[attr-defined]


def test_declared_property_is_a_property_ref() -> None:
    assert isinstance(Blog.Rating, PropertyRef)
    assert str(Blog.Rating > 3) == "Rating gt 3"


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        (A == 1, "A eq 1"),
        (A != 1, "A ne 1"),
        (A < 1, "A lt 1"),
        (A <= 1, "A le 1"),
        (A > 1, "A gt 1"),
        (A >= 1, "A ge 1"),
        (1 < A, "A gt 1"),  # reflected
        (1 == A, "A eq 1"),
    ],
)
def test_operators(expr: Filter, text: str) -> None:
    assert isinstance(expr, Comparison)
    assert expr.render() == text
    assert str(expr) == text


# ---------------------------------------------------------------- literals by inferred type


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("O'Brien", "'O''Brien'"),
        ("''", "''''''"),
        ("", "''"),
        ("héllo ☃ 𝄞 日本", "'héllo ☃ 𝄞 日本'"),
        ("100%", "'100%'"),  # percent-encoding is the transport's job, not the literal's
        ("Metric%25", "'Metric%25'"),
        ("a#b", "'a#b'"),
        ("a and b eq 'c'", "'a and b eq ''c'''"),
        (0, "0"),
        (5, "5"),
        (-5, "-5"),
        (2**31 - 1, "2147483647"),
        (-(2**31), "-2147483648"),
        (2**31, "2147483648L"),  # does not fit Int32: inferred Int64
        (2**63 - 1, "9223372036854775807L"),
        (3.0, "3.0"),
        (2.5, "2.5"),
        (-0.5, "-0.5"),
        (True, "true"),
        (False, "false"),
        (uuid.UUID("12345678-1234-5678-1234-567812345678"), "guid'12345678-1234-5678-1234-567812345678'"),
        (b"\x00\x01\xfe\xff", "X'0001feff'"),
        (bytearray(b"\x05"), "X'05'"),
        (b"", "X''"),
    ],
)
def test_inferred_literals(value: Any, literal: str) -> None:
    assert (prop("P") == value).render() == f"P eq {literal}"


def _double_literal(expr: Filter) -> float:
    """The double a rendered comparison carries, checking it reads as an Edm.Double.

    The exact text of large and tiny doubles (exponent or positional form) is
    edm.to_filter_literal's choice; what matters is that it is a double literal
    (a '.' or an exponent, never an integer form) that reads back exactly.
    """
    assert isinstance(expr, Comparison)
    text = expr.literal
    assert any(ch in text for ch in ".eE"), text
    assert not text.endswith(("L", "l")), text
    return float(text)


@pytest.mark.parametrize(
    "value", [1e300, -1e300, 5e-324, -5e-324, 1e16, 1e-5, 1.7976931348623157e308, 2.2250738585072014e-308, 0.1]
)
def test_double_literals_with_exponents_read_back_exactly(value: float) -> None:
    assert _double_literal(prop("D") == value) == value
    assert _double_literal(Blog.Score == value) == value
    assert _double_literal(prop("D") == EntityProperty(value, EdmType.DOUBLE)) == value


def test_datetime_literals() -> None:
    naive = datetime(2009, 5, 1, 12, 30, 15, 123456)
    assert str(prop("T") == naive) == "T eq datetime'2009-05-01T12:30:15.1234560Z'"
    aware = datetime(2009, 5, 1, 14, 30, 15, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert str(prop("T") == aware) == "T eq datetime'2009-05-01T12:30:15.1234560Z'"
    utc = datetime(2009, 5, 1, tzinfo=timezone.utc)
    assert str(prop("T") == utc) == "T eq datetime'2009-05-01T00:00:00.0000000Z'"
    seven = EdmDateTime(2009, 5, 1, 0, 0, 0, 123456, timezone.utc, ticks_remainder=7)
    assert str(prop("T") == seven) == "T eq datetime'2009-05-01T00:00:00.1234567Z'"


def test_entity_property_literal_uses_its_type() -> None:
    assert str(prop("N") == EntityProperty(5, EdmType.INT64)) == "N eq 5L"
    assert str(prop("N") == EntityProperty(5, EdmType.DOUBLE)) == "N eq 5.0"
    assert str(prop("N") == EntityProperty(-1, EdmType.INT32)) == "N eq -1"
    # An explicit EntityProperty wins over the declared type.
    assert str(Blog.Rating == EntityProperty(5, EdmType.INT64)) == "Rating eq 5L"  # type: ignore[comparison-overlap]
    with pytest.raises(TableValidationError):
        prop("N") == EntityProperty(None, EdmType.INT64)


def test_non_finite_doubles_cannot_be_expressed() -> None:
    for value in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(TableValidationError):
            prop("D") == value
        with pytest.raises(TableValidationError):
            Blog.Score == value


def test_uninferable_values_raise_naming_the_property() -> None:
    with pytest.raises(TableValidationError) as info:
        prop("Day") == [datetime(2009, 1, 1).date()]
    assert info.value.field == "Day"
    with pytest.raises(TableValidationError):
        prop("Huge") == 2**63
    with pytest.raises(TableValidationError) as info:
        prop("Opt") == None  # noqa: E711 - the point of the test
    assert info.value.field == "Opt"
    assert "null" in str(info.value)


def test_property_names_must_be_identifiers() -> None:
    with pytest.raises(TableValidationError):
        prop("bad name") == 1
    with pytest.raises(TableValidationError):
        prop("") == 1
    with pytest.raises(TableValidationError):
        prop("x') or (1") == 1


# ---------------------------------------------------------------- declared types (white paper 8.4)


def test_declared_int64_renders_L() -> None:
    assert str(Blog.Views == 5) == "Views eq 5L"
    assert str(Blog.Views > -3) == "Views gt -3L"
    assert str(prop("Views", EdmType.INT64) == 5) == "Views eq 5L"


def test_declared_double_renders_a_double() -> None:
    assert str(Blog.Score > 3) == "Score gt 3.0"
    assert str(Blog.Score == 0) == "Score eq 0.0"
    assert str(Blog.Score < 2.5) == "Score lt 2.5"
    assert _double_literal(Blog.Score < 1e300) == 1e300
    assert _double_literal(Blog.Score > 5e-324) == 5e-324
    assert _double_literal(Blog.Score == 10**20) == 1e20


def test_declared_int32_and_range() -> None:
    assert str(Blog.Rating == 3) == "Rating eq 3"
    with pytest.raises(TableValidationError) as info:
        Blog.Rating == 2**40
    assert info.value.field == "Rating"


def test_declared_datetime_treats_naive_as_utc() -> None:
    assert str(Blog.Posted >= datetime(2009, 5, 1)) == "Posted ge datetime'2009-05-01T00:00:00.0000000Z'"
    assert str(Blog.Timestamp < datetime(2009, 5, 1, 1)) == "Timestamp lt datetime'2009-05-01T01:00:00.0000000Z'"
    assert str(prop("Timestamp") < datetime(2009, 5, 1, 1)) == "Timestamp lt datetime'2009-05-01T01:00:00.0000000Z'"


def test_declared_guid_binary_bool() -> None:
    text = "12345678-1234-5678-1234-567812345678"
    assert str(Blog.Id == text) == f"Id eq guid'{text}'"  # a GUID string converts
    assert str(Blog.Id == uuid.UUID(text)) == f"Id eq guid'{text}'"
    assert str(Blog.Blob == bytearray(b"\x0a")) == "Blob eq X'0a'"
    assert str(Blog.Featured == True) == "Featured eq true"  # noqa: E712
    with pytest.raises(TableValidationError):
        Blog.Id == "not-a-guid"


@pytest.mark.parametrize(
    ("ref", "value"),
    [
        (Blog.Rating, "5"),        # 'n eq '5'' on an Int32 property silently matches nothing
        (Blog.Rating, 5.0),
        (Blog.Rating, True),
        (Blog.Views, "5"),
        (Blog.Views, 5.5),
        (Blog.Score, "3"),
        (Blog.Score, True),
        (Blog.Score, 2**53 + 1),   # not exactly representable as a double
        (Blog.Score, 10**400),     # too large for a double
        (Blog.Text, 5),
        (Blog.Text, b"x"),
        (Blog.Posted, "2009-05-01"),
        (Blog.Posted, datetime(2009, 1, 1).date()),
        (Blog.Featured, 1),
        (Blog.Blob, "x"),
        (Blog.PartitionKey, 5),
        (prop("PartitionKey"), 5),  # system properties have known types
        (prop("RowKey"), uuid.UUID(int=1)),
        (prop("Timestamp"), "2009"),
    ],
)
def test_literal_not_convertible_to_declared_type_raises(ref: PropertyRef, value: Any) -> None:
    with pytest.raises(TableValidationError) as info:
        ref == value
    assert info.value.field == ref.name
    with pytest.raises(TableValidationError):
        ref > value


def test_comparing_two_properties_is_refused() -> None:
    with pytest.raises(TypeError, match="literal"):
        Blog.Rating == Blog.Views
    with pytest.raises(TypeError):
        A < B


# ---------------------------------------------------------------- precedence and parentheses


def test_and_chain_has_no_parentheses() -> None:
    expr = (A == 1) & (B == 2) & (C == 3)
    assert str(expr) == "A eq 1 and B eq 2 and C eq 3"
    assert isinstance(expr, And) and len(expr.operands) == 3


def test_or_chain_has_no_parentheses() -> None:
    expr = (A == 1) | (B == 2) | (C == 3)
    assert str(expr) == "A eq 1 or B eq 2 or C eq 3"
    assert isinstance(expr, Or) and len(expr.operands) == 3


def test_or_inside_and_keeps_parentheses() -> None:
    assert str(((A == 1) | (B == 2)) & (C == 3)) == "(A eq 1 or B eq 2) and C eq 3"
    assert str((C == 3) & ((A == 1) | (B == 2))) == "C eq 3 and (A eq 1 or B eq 2)"
    assert str(((A == 1) | (B == 2)) & ((C == 3) | (D == 4))) == "(A eq 1 or B eq 2) and (C eq 3 or D eq 4)"


def test_and_inside_or_needs_no_parentheses() -> None:
    assert str((A == 1) | (B == 2) & (C == 3)) == "A eq 1 or B eq 2 and C eq 3"
    assert str(((A == 1) & (B == 2)) | ((C == 3) & (D == 4))) == "A eq 1 and B eq 2 or C eq 3 and D eq 4"


def test_grouping_of_same_operator_is_flattened() -> None:
    assert str((A == 1) & ((B == 2) & (C == 3))) == "A eq 1 and B eq 2 and C eq 3"
    assert str((A == 1) | ((B == 2) | (C == 3))) == "A eq 1 or B eq 2 or C eq 3"


def test_not() -> None:
    assert str(~(A == 1)) == "not (A eq 1)"
    assert str(~((A == 1) & (B == 2))) == "not (A eq 1 and B eq 2)"
    assert str(~((A == 1) | (B == 2))) == "not (A eq 1 or B eq 2)"
    assert str(~~(A == 1)) == "not (not (A eq 1))"
    assert str(~(A == 1) & (B == 2)) == "not (A eq 1) and B eq 2"
    assert str(~(A == 1) | ~(B == 2)) == "not (A eq 1) or not (B eq 2)"
    assert str(~prop("P").startswith("ab")) == "not (P ge 'ab' and P lt 'ac')"
    assert isinstance(~(A == 1), Not)


def test_expressions_are_immutable_when_combined() -> None:
    left = (A == 1) & (B == 2)
    combined = left & (C == 3)
    assert str(left) == "A eq 1 and B eq 2"
    assert str(combined) == "A eq 1 and B eq 2 and C eq 3"


# ---------------------------------------------------------------- raw strings


def test_raw_strings_combine_with_expressions() -> None:
    assert str((A == 1) & "X eq 2 or Y eq 3") == "A eq 1 and (X eq 2 or Y eq 3)"
    assert str("X eq 2" & (A == 1)) == "(X eq 2) and A eq 1"
    assert str((A == 1) | "X eq 2") == "A eq 1 or (X eq 2)"
    assert str("X eq 2" | (A == 1)) == "(X eq 2) or A eq 1"
    assert str(~Filter.raw("X eq 2")) == "not (X eq 2)"
    raw = Filter.raw("  PartitionKey eq 'a'  ")
    assert isinstance(raw, RawFilter) and str(raw) == "PartitionKey eq 'a'"
    assert str(raw & (A == 1)) == "(PartitionKey eq 'a') and A eq 1"


def test_raw_string_must_not_be_empty() -> None:
    with pytest.raises(TableValidationError):
        Filter.raw("   ")
    with pytest.raises(TableValidationError):
        (A == 1) & ""


def test_combining_with_non_filters_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        (A == 1) & 5  # type: ignore[operator]
    with pytest.raises(TypeError):
        (A == 1) | None  # type: ignore[operator]
    with pytest.raises(TypeError):
        (A == 1) & True  # type: ignore[operator]


# ---------------------------------------------------------------- truthiness guard


def test_bool_of_an_expression_raises_with_help() -> None:
    with pytest.raises(TypeError, match="&"):
        bool(A == 1)
    with pytest.raises(TypeError):
        if (A == 1) | (B == 2):
            pass
    with pytest.raises(TypeError, match="truth value"):
        (A == 1) and (B == 2)  # the mistake the guard exists for
    with pytest.raises(TypeError):
        (A == 1) or (B == 2)
    with pytest.raises(TypeError):
        not (A == 1)
    with pytest.raises(TypeError):
        1 < A < 5  # chained comparison is "1 < A and A < 5"
    with pytest.raises(TypeError):
        bool(A)


def test_missing_parentheses_give_a_helpful_error() -> None:
    with pytest.raises(TypeError, match="parenthes"):
        A == 1 & B == 2  # type: ignore[comparison-overlap]  # parsed as A == (1 & B) == 2
    with pytest.raises(TypeError, match="parenthes"):
        (A == 1) & B
    with pytest.raises(TypeError):
        ~A


# ---------------------------------------------------------------- startswith / between


def test_startswith_renders_the_white_paper_range() -> None:
    assert str(prop("PartitionKey").startswith("PDC")) == "(PartitionKey ge 'PDC' and PartitionKey lt 'PDD')"
    assert str(Blog.RowKey.startswith("Sh")) == "(RowKey ge 'Sh' and RowKey lt 'Si')"
    assert str(prop("P").startswith("O'B")) == "(P ge 'O''B' and P lt 'O''C')"
    assert str(prop("P").startswith("a%")) == "(P ge 'a%' and P lt 'a&')"
    assert str(prop("P").startswith("az")) == "(P ge 'az' and P lt 'a{')"
    assert str((A == 1) & prop("P").startswith("x")) == "A eq 1 and (P ge 'x' and P lt 'y')"
    assert count_comparisons(prop("P").startswith("x")) == 2


def test_startswith_empty_prefix_is_one_comparison() -> None:
    expr = prop("P").startswith("")
    assert str(expr) == "P ge ''"
    assert count_comparisons(expr) == 1


def test_startswith_carries_past_u_ffff() -> None:
    assert str(prop("P").startswith("a\uffff")) == "(P ge 'a\uffff' and P lt 'b')"
    assert str(prop("P").startswith("ab\uffff\uffff")) == "(P ge 'ab\uffff\uffff' and P lt 'ac')"
    assert str(prop("P").startswith("\uffff")) == "P ge '\uffff'"
    assert str(prop("P").startswith("\uffff\uffff")) == "P ge '\uffff\uffff'"


def test_prefix_upper_bound_follows_utf16_order() -> None:
    assert prefix_upper_bound("") is None
    assert prefix_upper_bound("abc") == "abd"
    assert prefix_upper_bound("a\uffff") == "b"
    assert prefix_upper_bound("\uffff") is None
    assert prefix_upper_bound("a\ud7ff") == "a\U00010000"  # pairs sort between U+D7FF and U+E000
    assert prefix_upper_bound("a\U0001f600") == "a\U0001f601"
    assert prefix_upper_bound("a\U0010ffff") == "a\ue000"
    assert prefix_upper_bound("a\ue000") == "a\ue001"


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def test_prefix_range_is_exact_in_utf16_order() -> None:
    alphabet = ["a", "b", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0001f600", "\U0010ffff", "\x00"]
    rng = random.Random(1234)
    strings = {"".join(p) for n in range(0, 4) for p in itertools.product(alphabet[:5], repeat=n)}
    strings |= {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5))) for _ in range(3000)}
    prefixes = [s for s in strings if len(s) <= 3]
    for prefix in prefixes:
        upper = prefix_upper_bound(prefix)
        for candidate in strings:
            in_range = _utf16(candidate) >= _utf16(prefix) and (upper is None or _utf16(candidate) < _utf16(upper))
            assert in_range == candidate.startswith(prefix), (prefix, candidate, upper)


def test_startswith_needs_a_string_property() -> None:
    with pytest.raises(TableValidationError) as info:
        Blog.Rating.startswith("1")
    assert info.value.field == "Rating"
    with pytest.raises(TableValidationError):
        prop("P").startswith(5)  # type: ignore[arg-type]


def test_between_is_inclusive_and_typed() -> None:
    assert str(Blog.Rating.between(1, 5)) == "(Rating ge 1 and Rating le 5)"
    assert str(Blog.Views.between(1, 5)) == "(Views ge 1L and Views le 5L)"
    assert str(Blog.Score.between(1, 2)) == "(Score ge 1.0 and Score le 2.0)"
    assert str(prop("RowKey").between("a", "b")) == "(RowKey ge 'a' and RowKey le 'b')"
    assert str(prop("N").between(3, 3)) == "(N ge 3 and N le 3)"
    day = Blog.Posted.between(datetime(2008, 7, 3), datetime(2008, 7, 4, tzinfo=timezone.utc))
    assert str(day) == (
        "(Posted ge datetime'2008-07-03T00:00:00.0000000Z' and Posted le datetime'2008-07-04T00:00:00.0000000Z')"
    )
    assert str((prop("PartitionKey") == "p") & prop("RowKey").between("a", "b")) == (
        "PartitionKey eq 'p' and (RowKey ge 'a' and RowKey le 'b')"
    )


def test_between_refuses_an_empty_range() -> None:
    with pytest.raises(TableValidationError):
        Blog.Rating.between(5, 1)
    with pytest.raises(TableValidationError):
        prop("RowKey").between("b", "a")
    with pytest.raises(TableValidationError):
        Blog.Posted.between(datetime(2009, 1, 2), datetime(2009, 1, 1))
    with pytest.raises(TableValidationError):
        Blog.Rating.between(1, "5")


# ---------------------------------------------------------------- comparison limit


def _conjunction(n: int) -> Filter:
    expr: Filter = prop("P0") == 0
    for i in range(1, n):
        expr = expr & (prop(f"P{i}") == i)
    return expr


def test_comparison_limit_is_the_services_15() -> None:
    assert MAX_FILTER_COMPARISONS == 15
    ok = _conjunction(15)
    assert count_comparisons(ok) == 15
    assert render_filter(ok) == str(ok)
    too_many = _conjunction(16)
    assert count_comparisons(too_many) == 16
    str(too_many)  # rendering for display does not check
    with pytest.raises(TableValidationError) as info:
        render_filter(too_many)
    assert "15" in str(info.value) and "16" in str(info.value)


def test_comparison_count_covers_every_node_kind() -> None:
    expr = ~((A == 1) | (B == 2)) & prop("P").startswith("x") & "X eq 1 and Y lt 2"
    assert count_comparisons(expr) == 6
    assert render_filter(None) is None


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("A eq 1", 1),
        ("A eq 'x eq y' and B ne 'it''s gt'", 2),
        ("(A lt 5L) or not (B ge datetime'2009-01-01T00:00:00Z')", 2),
        ("A EQ 1 AND B Gt 2", 2),  # Azurite accepts upper case
        ("Featured", 0),
        ("Featured and not Archived", 0),
        ("G eq guid'00000000-0000-0000-0000-000000000000' and X le X'0a'", 2),
    ],
)
def test_raw_strings_are_counted(text: str, count: int) -> None:
    assert count_comparisons(text) == count


def test_raw_string_over_the_limit_is_refused() -> None:
    text = " and ".join(f"P{i} eq {i}" for i in range(16))
    with pytest.raises(TableValidationError):
        render_filter(text)
    assert render_filter(" and ".join(f"P{i} eq {i}" for i in range(15))) is not None


# ---------------------------------------------------------------- point keys


def test_point_keys_either_order() -> None:
    pk, rk = prop("PartitionKey"), prop("RowKey")
    assert point_keys((pk == "p") & (rk == "r")) == ("p", "r")
    assert point_keys((rk == "r") & (pk == "p")) == ("p", "r")
    assert point_keys((Blog.PartitionKey == "Metric%25") & (Blog.RowKey == "")) == ("Metric%25", "")
    assert point_keys((pk == "O'Brien") & (rk == "x" * 300)) == ("O'Brien", "x" * 300)


@pytest.mark.parametrize(
    "expr",
    [
        None,
        prop("PartitionKey") == "p",
        (prop("PartitionKey") == "p") & (prop("RowKey") >= "r"),
        (prop("PartitionKey") == "p") & (prop("PartitionKey") == "q"),
        (prop("PartitionKey") == "p") & (prop("RowKey") == "r") & (prop("Rating") == 3),
        (prop("PartitionKey") == "p") | (prop("RowKey") == "r"),
        ~((prop("PartitionKey") == "p") & (prop("RowKey") == "r")),
        (prop("PartitionKey") == "p") & "RowKey eq 'r'",
        "PartitionKey eq 'p' and RowKey eq 'r'",
        (prop("PartitionKey") == "p") & (prop("RowKey") == EntityProperty(5, EdmType.INT32)),
        (prop("PartitionKey") == "p") & (prop("Other") == "r"),
    ],
)
def test_not_point_keys(expr: Any) -> None:
    assert point_keys(expr) is None


def test_repr_shows_the_filter() -> None:
    assert repr(A == 1) == "Comparison('A eq 1')"
    assert repr(prop("X")) == "prop('X')"
    assert "Int64" in repr(prop("X", EdmType.INT64))
