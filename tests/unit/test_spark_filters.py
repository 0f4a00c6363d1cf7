"""Which of Spark's pushed filters tablesdk.spark sends as $filter, and as what (no Spark session needed)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import datasource as sds  # noqa: E402
from pyspark.sql.types import StructType  # noqa: E402

from tablesdk import EdmType  # noqa: E402
from tablesdk.spark import AzureTablesDataSource, service_filter  # noqa: E402

SPARK = {"PartitionKey": "string", "Name": "string", "N": "integer", "Big": "long", "Score": "double",
         "Ok": "boolean", "When": "timestamp", "Id": "string", "Data": "binary", "Created": "string"}
EDM = {"PartitionKey": EdmType.STRING, "Name": EdmType.STRING, "N": EdmType.INT32, "Big": EdmType.INT64,
       "Score": EdmType.DOUBLE, "Ok": EdmType.BOOLEAN, "When": EdmType.DATETIME, "Id": EdmType.GUID,
       "Data": EdmType.BINARY, "Created": EdmType.DATETIME}
NOON = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def sent(spark_filter: Any) -> tuple[str, bool] | None:
    found = service_filter(spark_filter, SPARK, EDM)
    return None if found is None else (found[0].render(), found[1])


@pytest.mark.parametrize(("spark_filter", "expected"), [
    (sds.EqualTo(("Name",), "it's"), ("Name eq 'it''s'", True)),
    (sds.EqualNullSafe(("N",), 5), ("N eq 5", True)),
    (sds.GreaterThan(("Big",), 2**60), ("Big gt 1152921504606846976L", True)),
    (sds.LessThanOrEqual(("Score",), 2.5), ("Score le 2.5", True)),
    (sds.In(("N",), (1, None, 3)), ("N eq 1 or N eq 3", True)),
    (sds.StringStartsWith(("Name",), "ab"), ("(Name ge 'ab' and Name lt 'ac')", True)),
    (sds.EqualTo(("Ok",), True), ("Ok eq true", True)),
    (sds.GreaterThanOrEqual(("When",), NOON), ("When ge datetime'2026-01-01T12:00:00.0000000Z'", True)),
    (sds.LessThan(("When",), NOON), ("When lt datetime'2026-01-01T12:00:00.0000000Z'", True)),
    # Sent and checked by Spark again.
    # Spark floors each DateTime to its microsecond, Azurite compares milliseconds: widened.
    (sds.GreaterThan(("When",), NOON), ("When ge datetime'2026-01-01T12:00:00.0000000Z'", False)),
    (sds.LessThanOrEqual(("When",), NOON), ("When lt datetime'2026-01-01T12:00:00.0010000Z'", False)),
    (sds.EqualTo(("When",), NOON),
     ("When ge datetime'2026-01-01T12:00:00.0000000Z' and When lt datetime'2026-01-01T12:00:00.0010000Z'", False)),
    # Sent and checked by Spark again.
    (sds.Not(sds.EqualTo(("N",), 5)), ("not (N eq 5)", False)),
    (sds.EqualTo(("Id",), "00000000-0000-0000-0000-00000000000c"),
     ("Id eq guid'00000000-0000-0000-0000-00000000000c'", False)),
])
def test_filters_the_service_answers_as_spark_does_are_sent(spark_filter: Any, expected: tuple[str, bool]) -> None:
    assert sent(spark_filter) == expected


@pytest.mark.parametrize("spark_filter", [
    sds.GreaterThan(("Name",), "\ue000"),  # UTF-16 and code-point orders differ above U+E000
    sds.GreaterThan(("Score",), 1.0),  # Spark sorts NaN above every number
    sds.EqualTo(("Score",), float("nan")),
    sds.GreaterThan(("Ok",), False),
    sds.EqualTo(("Id",), "00000000-0000-0000-0000-00000000000C"),  # Spark compares the text
    sds.EqualTo(("Data",), b"\x00"),
    sds.EqualTo(("Created",), "2026-01-01T00:00:00.0000000Z"),  # DateTime read as its text
    sds.EqualTo(("N",), 2**40),  # beyond Int32: Spark compares
    sds.EqualTo(("Missing",), 1),
    sds.EqualTo(("a", "b"), 1),
    sds.In(("N",), ()),
    sds.IsNull(("N",)),
    sds.IsNotNull(("N",)),
    sds.StringEndsWith(("Name",), "x"),
    sds.StringContains(("Name",), "x"),
    sds.Not(sds.GreaterThan(("Score",), 1.0)),
])
def test_filters_the_service_cannot_answer_stay_with_spark(spark_filter: Any) -> None:
    assert sent(spark_filter) is None


def test_the_pushed_filters_stay_within_the_services_15_comparisons() -> None:
    options = {"connectionString": "UseDevelopmentStorage=true", "table": "Things", "filter": "N ge 0 and N lt 100",
               "pushFilters": "true"}
    source = AzureTablesDataSource(options)
    reader = source.reader(StructType.fromJson({"type": "struct", "fields": [
        {"name": name, "type": kind, "nullable": True, "metadata": {}} for name, kind in
        (("PartitionKey", "string"), ("RowKey", "string"), ("N", "integer"))]}))
    plain = AzureTablesDataSource({**options, "pushFilters": "false"}).reader(reader.schema)
    assert type(plain).pushFilters is sds.DataSourceReader.pushFilters  # Spark then keeps every filter
    filters: list[sds.Filter] = [sds.EqualTo(("N",), n) for n in range(20)]
    kept = list(reader.pushFilters(filters))
    assert len(reader.pushed) == 15 - 2 - 2  # two for a range's PartitionKey bounds, two in the filter option
    assert kept == filters[len(reader.pushed):]
