"""tablesdk.polars on the bundled emulator and Azurite: a scan in ranges equals the serial scan, a
predicate pushed to the service keeps the rows the same predicate keeps after a full read, and a
write keeps every EDM type (Guid through ``edm_types``: a Polars frame keeps no field metadata)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from engine_data import PROPERTY_TYPES, ROWS, fill, stored
from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType, prop
from tablesdk.polars import read_table, scan_table, write_table

pytestmark = pytest.mark.integration

UTC = timezone.utc


@pytest.fixture(params=["devstore", "azurite"])
def conn(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_connection_string"))


@pytest.fixture
def client(conn: str) -> Iterator[CloudTableClient]:
    with CloudStorageAccount.parse(conn).create_cloud_table_client() as table_client:
        yield table_client


@pytest.fixture
def source(client: CloudTableClient, unique_table_name: str) -> Iterator[str]:
    client.create_table(unique_table_name)
    fill(client, unique_table_name)
    yield unique_table_name
    client.delete_table_if_exists(unique_table_name)


@pytest.fixture
def target(client: CloudTableClient, unique_table_name: str) -> Iterator[str]:
    name = unique_table_name + "w"
    client.create_table(name)
    yield name
    client.delete_table_if_exists(name)


def by_keys(frame: Any) -> Any:
    return frame.sort("PartitionKey", "RowKey")


@pytest.mark.parametrize("boundaries", [None, ["k05", "k10", "k11", "k20"], ["k05x", "zz"]])
def test_a_read_in_ranges_equals_the_serial_scan(
    conn: str, client: CloudTableClient, source: str, boundaries: list[str] | None
) -> None:
    frame = read_table(conn, source, partitions=5, boundaries=boundaries, max_workers=2)
    expected = pl.from_arrow(client.create_query(source).to_arrow())
    assert_frame_equal(by_keys(frame), by_keys(expected))
    assert frame.select("PartitionKey", "RowKey").is_unique().all() and frame.height == ROWS
    assert dict(frame.schema) == {
        "PartitionKey": pl.String, "RowKey": pl.String, "Timestamp": pl.Datetime("ns", "UTC"), "N": pl.Int32,
        "Name": pl.String, "Ratio": pl.Float64, "Id": pl.String, "Big": pl.Int64, "At": pl.Datetime("ns", "UTC"),
        "Blob": pl.Binary, "Ok": pl.Boolean,
    }


PREDICATES = [
    pl.col("N") >= 100,
    ~(pl.col("N") < 100),  # a pushed comparison looser than Polars' would keep too much here
    ~(pl.col("PartitionKey") <= "k05") & ~(pl.col("Big") >= 2**53 + 401),
    (pl.col("PartitionKey") >= "k05") & (pl.col("PartitionKey") < "k07"),
    pl.col("Big") > 2**53 + 400,  # beyond a double's exact integers
    pl.col("Ok") == False,  # noqa: E712  (a sparse column: the rows without it are not kept)
    ~pl.col("Ok"),
    ~(pl.col("Ok") == True) | (pl.col("N") < 10),  # noqa: E712
    pl.col("Ratio") <= 3.5,
    pl.col("At") >= datetime(2024, 5, 6, 7, 8, 30, tzinfo=UTC),
    pl.col("Id") == "00000000-0000-0003-0000-000000000007",
    pl.col("Name").str.starts_with("n1"),
    pl.col("RowKey").is_in(["0001", "0100", "0239", "none"]) | pl.col("Ok").is_in([True]),
    pl.col("N").is_between(20, 30, closed="left"),
    pl.col("Blob").is_null() | (pl.col("Ratio") > 28),  # nothing the service can answer: all Polars'
    (pl.col("N") % 7 == 0) & (pl.col("RowKey") < "0100"),  # half pushed, half Polars'
    functools.reduce(operator.and_, [pl.col("N") != n for n in range(1, 40, 2)]),  # more than one $filter takes
]


@pytest.mark.parametrize("predicate", PREDICATES, ids=[str(p)[:70] for p in PREDICATES])
def test_a_pushed_predicate_keeps_what_it_keeps_after_a_full_read(conn: str, source: str, predicate: Any) -> None:
    full = read_table(conn, source, boundaries=["k12"])
    pushed = scan_table(conn, source, boundaries=["k12"]).filter(predicate).collect()
    expected = full.filter(predicate)
    assert expected.height > 0
    assert_frame_equal(by_keys(pushed), by_keys(expected))


def test_the_service_gets_the_filter_and_the_columns(
    conn: str, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tablesdk.polars

    asked: list[Any] = []
    real = tablesdk.polars.read_range

    def spy(spec: Any) -> Any:
        asked.append(spec)
        return real(spec)

    monkeypatch.setattr(tablesdk.polars, "read_range", spy)
    query = scan_table(conn, source, boundaries=["k12"]).filter((pl.col("N") >= 230) & pl.col("Blob").is_null())
    frame = query.select("RowKey").collect()
    assert sorted(frame["RowKey"]) == ["0230", "0235"]
    assert [(spec.low, spec.high, spec.filter) for spec in asked] == [(None, "k12", "N ge 230"), ("k12", None, "N ge 230")]
    assert all(spec.schema.names == ["PartitionKey", "RowKey", "N", "Blob"] for spec in asked)
    assert sum(len(spec_rows) for spec_rows in map(real, asked)) == 10  # the service sent only those
    assert "AccountKey" not in query.explain() and conn.split("AccountKey=")[1][:20] not in query.explain()


def test_a_nan_is_kept_where_polars_keeps_it(conn: str, client: CloudTableClient, source: str) -> None:
    client.insert_entity(source, DynamicEntity("k00", "nan", N=-1, Ratio=float("nan")))
    full = read_table(conn, source)
    for predicate in (pl.col("Ratio") > 29, pl.col("Ratio") != 2, ~(pl.col("Ratio") <= 29), pl.col("Ratio") < 0.2):
        pushed = scan_table(conn, source).filter(predicate).collect()
        assert_frame_equal(by_keys(pushed), by_keys(full.filter(predicate)))
    assert scan_table(conn, source).filter(pl.col("Ratio") > 30).collect()["RowKey"].to_list() == ["nan"]


def test_projection_limit_and_a_filter_of_the_read(conn: str, client: CloudTableClient, source: str) -> None:
    scan = scan_table(conn, source, filter=prop("N") < 200, partitions=3)
    projected = scan.select("PartitionKey", "RowKey", "Big", "At").collect()
    assert projected.columns == ["PartitionKey", "RowKey", "Big", "At"] and projected.height == 200
    assert scan.head(7).collect().height == 7
    counted = scan.group_by("PartitionKey").agg(pl.len()).sort("PartitionKey")
    assert counted.collect()["len"].sum() == 200


def test_a_round_trip_keeps_every_edm_type(conn: str, client: CloudTableClient, source: str, target: str) -> None:
    frame = read_table(conn, source, partitions=4)
    result = write_table(frame, conn, target, edm_types={"Id": EdmType.GUID})
    assert len(result.succeeded) == ROWS and not result.failed
    written = stored(client, target)
    assert written == stored(client, source)
    types = {name: edm for _, _, properties in written for name, (_, edm) in properties.items()}
    assert types == PROPERTY_TYPES
    write_table(frame, conn, target, "replace")  # without edm_types the Guids are text: Polars kept no type
    assert {properties["Id"][1] for _, _, properties in stored(client, target)} == {EdmType.STRING}


def test_a_failed_entity_is_named_by_its_keys(conn: str, client: CloudTableClient, target: str) -> None:
    client.insert_entity(target, DynamicEntity("b", "0000"))
    rows = pl.DataFrame({"PartitionKey": ["a", "b"], "RowKey": ["1", "0000"], "V": [1, 2]})
    result = write_table(rows.lazy(), conn, target)
    assert [(outcome.entity.PartitionKey, outcome.entity.RowKey) for outcome in result.failed] == [("b", "0000")]
    assert len(result.succeeded) == 1
