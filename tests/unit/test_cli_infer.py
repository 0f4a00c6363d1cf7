"""--infer-types' rules (tablesdk.cli._infer) and the properties a --filter compares with numbers."""

from __future__ import annotations

import pytest

from tablesdk import EdmType
from tablesdk.cli._filter_check import numeric_comparisons
from tablesdk.cli._infer import infer_csv_types


def infer(*rows: str, header: str = "PartitionKey,RowKey,C") -> dict[str, EdmType]:
    return infer_csv_types([header + "\r\n", *(f"p,{n},{row}\r\n" for n, row in enumerate(rows))])


@pytest.mark.parametrize(("values", "expected"), [
    (("true", "FALSE", "True"), EdmType.BOOLEAN),
    (("1", "-2147483648", "2147483647"), EdmType.INT32),
    (("1", "2147483648"), EdmType.INT64),
    (("9223372036854775807", "-9223372036854775808"), EdmType.INT64),
    (("1", "2.5", "-1e10", "NaN", "INF", "-INF"), EdmType.DOUBLE),
    (("0.5", "0"), EdmType.DOUBLE),
    (("2024-01-02T03:04:05Z", "2024-01-02T03:04+02:00", "2024-01-02T03:04:05.1234567Z"), EdmType.DATETIME),
    (("12345678-1234-5678-1234-567812345678", "ABCDEF12-1234-5678-1234-567812345678"), EdmType.GUID),
])
def test_a_column_takes_the_first_type_every_value_fits(values: tuple[str, ...], expected: EdmType) -> None:
    assert infer(*values) == {"C": expected}


@pytest.mark.parametrize("values", [
    ("007", "1"),  # a leading zero: a code, not a number
    ("+5",), (" 5",), ("1_000",), ("1,5".replace(",", ";"),),
    ("1", "x"),  # mixed
    ("1", "true"), ("1", "2024-01-02T03:04:05Z"),
    ("9223372036854775808",),  # past Int64, and a double would round it
    ("9007199254740993", "1.5"),  # an integer a double cannot hold exactly, among doubles
    ("2024-01-02",), ("2024-01-02T03:04:05",),  # no time, no zone: no instant
    ("2024-13-02T03:04:05Z",),  # no such month
    ('""',),  # an empty string is a value, and text
])
def test_a_column_with_any_other_value_stays_a_string(values: tuple[str, ...]) -> None:
    assert infer(*values) == {}


def test_keys_typed_columns_and_missing_cells() -> None:
    header = "PartitionKey,RowKey,N@Edm.String,Absent,Sparse"
    rows = ["p,1,1,,5\r\n", "p,2,2,,\r\n"]
    assert infer_csv_types([header + "\r\n", *rows]) == {"Sparse": EdmType.INT32}  # keys, typed, empty: left


def test_numeric_comparisons_of_a_filter() -> None:
    assert numeric_comparisons("Age gt 55 and (Score le 1.5 or 10L lt Big) and Name eq '5'") == ["Age", "Score", "Big"]
    assert numeric_comparisons("Name eq 'x' and Flag eq true") == []
    assert numeric_comparisons("Age gt") == []  # unreadable: the service says what is wrong
    assert numeric_comparisons(None) == []
