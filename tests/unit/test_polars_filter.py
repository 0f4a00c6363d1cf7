"""Which part of a Polars predicate tablesdk.polars sends as $filter: only comparisons whose answer the
service gives exactly as Polars does (for every value that is not null), the rest left to Polars."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest

from tablesdk import EdmType
from tablesdk.polars import service_filter

TYPES = {
    "PartitionKey": EdmType.STRING, "N": EdmType.INT32, "Big": EdmType.INT64, "Ratio": EdmType.DOUBLE,
    "Name": EdmType.STRING, "Id": EdmType.GUID, "Ok": EdmType.BOOLEAN, "At": EdmType.DATETIME, "Blob": EdmType.BINARY,
}
UTC = timezone.utc


def sent(predicate: object) -> str | None:
    found = service_filter(predicate, TYPES)
    return None if found is None else found.render()


@pytest.mark.parametrize(("predicate", "text"), [
    (pl.col("N") > 5, "N gt 5"),
    (5 < pl.col("N"), "N gt 5"),  # the literal on the left: the comparison turned round
    (pl.col("Big") >= 2**53 + 1, "Big ge 9007199254740993L"),  # Int64 literals carry L: the service compares types
    (pl.col("Ratio") <= 2, "Ratio le 2.0"),
    (pl.col("PartitionKey") == "a'b", "PartitionKey eq 'a''b'"),
    (pl.col("Id") == "00000000-0000-0000-0000-000000000007", "Id eq guid'00000000-0000-0000-0000-000000000007'"),
    (pl.col("Ok") == True, "Ok eq true"),  # noqa: E712
    (~pl.col("Ok"), "not (Ok eq true)"),
    (pl.col("At") > datetime(2024, 5, 6, tzinfo=UTC), "At gt datetime'2024-05-06T00:00:00.0000000Z'"),
    (pl.col("N").is_between(3, 9), "N ge 3 and N le 9"),
    (pl.col("Name").str.starts_with("ab"), "Name ge 'ab' and Name lt 'ac'"),
    ((pl.col("N") < 3) | ~(pl.col("Name") == "x"), "N lt 3 or not (Name eq 'x')"),
    (pl.col("Name").is_in(["a", "b"]), "Name eq 'a' or Name eq 'b'"),
    (pl.col("Big").is_in([1, 2**60]), "Big eq 1L or Big eq 1152921504606846976L"),
])
def test_what_the_service_can_answer_is_sent(predicate: object, text: str) -> None:
    assert sent(predicate) == text


@pytest.mark.parametrize("predicate", [
    pl.col("Ratio") > 2,  # Polars orders NaN above every number; the service does not
    pl.col("Ratio") != 2,
    pl.col("Id") > "0",  # Guids have no order both sides share
    pl.col("Id") == "00000000-0000-0000-0000-00000000000A",  # not the text Polars compares (lower case)
    pl.col("Blob") == b"x",
    pl.col("N").is_null(),
    pl.col("N") > pl.col("Big"),
    pl.col("N") > 2**40,  # no Int32 holds it
    pl.col("Name") > "\U0001f600",  # above U+D800 UTF-8 and UTF-16 order differently
    pl.col("At") > datetime(2024, 5, 6),  # a naive literal: Polars' meaning, not a UTC instant
    pl.col("Missing") == 1,
    pl.col("Ratio").is_in([1.5, float("nan")]),  # NaN equals NaN in Polars only
    pl.col("Name").is_in(["a", None], nulls_equal=True),
    pl.col("N").is_in(list(range(16))),  # more comparisons than the service takes
    (pl.col("N") < 3) | pl.col("N").is_null(),  # one side of an or that cannot be sent: none of it
    ~((pl.col("N") < 3) & pl.col("N").is_null()),
])
def test_what_it_cannot_answer_exactly_stays_with_polars(predicate: object) -> None:
    assert sent(predicate) is None


def test_the_parts_of_an_and_are_sent_each_on_its_own() -> None:
    predicate = (pl.col("N") > 5) & (pl.col("Ratio") > 1) & pl.col("Name").str.contains("x") & (pl.col("Ok") == False)  # noqa: E712
    assert sent(predicate) == "N gt 5 and Ok eq false"


def test_no_more_comparisons_are_sent_than_the_service_takes() -> None:
    predicate = pl.col("N") > 0
    for bound in range(1, 20):
        predicate = predicate & (pl.col("N") != bound)
    text = sent(predicate)
    assert text is not None and text.count(" ne ") == 14 and text.startswith("N gt 0 and N ne 1 and")
    within = service_filter(predicate, TYPES, max_comparisons=4)
    assert within is not None and within.render() == "N gt 0 and N ne 1 and N ne 2 and N ne 3"
    between = pl.col("N").is_between(1, 9) & (pl.col("Big") > 0)  # a part that does not fit is left whole
    found = service_filter(between, TYPES, max_comparisons=1)
    assert found is not None and found.render() == "Big gt 0L"
