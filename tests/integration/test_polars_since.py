"""tablesdk.polars reads a ChangeWindow (``since=``) on the bundled emulator and on Azurite: the scenarios
of since_engines.py, with ``scan_table`` collected (twice: a LazyFrame reads again) and ``read_table``."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl
import pytest
from faults import FaultProxy
from since_engines import Row, on_azurite, on_the_emulator, upsert

from tablesdk import ChangeWindow, CloudTableClient, Watermark
from tablesdk.polars import read_table, scan_table

pytestmark = pytest.mark.integration


def rows(frame: pl.DataFrame) -> list[Row]:
    assert "odata.etag" in frame.columns  # each row's version comes with it, as with Dask
    return sorted(frame.select("PartitionKey", "RowKey", "V").iter_rows())


def polars_engine(connection_string: str, table: str, window: ChangeWindow, boundaries: list[str]) -> Callable[[], list[Row]]:
    frame = scan_table(connection_string, table, boundaries=boundaries, since=window, max_workers=2)
    return lambda: rows(frame.collect())


def test_the_scenarios_on_the_emulator() -> None:
    on_the_emulator(polars_engine)


def test_the_scenarios_on_azurite(
    proxy: FaultProxy, azurite_connection_string: str, direct: CloudTableClient, fault_table_name: str,
) -> None:
    on_azurite(polars_engine, proxy, azurite_connection_string, direct, fault_table_name)


def test_read_table_columns_and_a_pushed_filter_keep_the_window(
    direct: CloudTableClient, fault_table_name: str, azurite_connection_string: str,
) -> None:
    for n, pk in enumerate("abcd"):
        upsert(direct, fault_table_name, pk, "1", n)
    window = ChangeWindow(Watermark.start(), until=max(e.Timestamp for e in direct.create_query(fault_table_name)))
    frame = read_table(azurite_connection_string, fault_table_name, since=window, columns=["V"], partitions=2)
    assert sorted(frame["V"].to_list()) == [0, 1, 2, 3]
    narrowed = (scan_table(azurite_connection_string, fault_table_name, since=window, boundaries=["c"])
                .filter(pl.col("V") >= 2).select("V").collect())
    assert sorted(narrowed["V"].to_list()) == [2, 3]


def test_a_bare_watermark_is_refused_with_the_way_to_a_window(azurite_connection_string: str) -> None:
    with pytest.raises(TypeError, match="ChangeWindow"):
        scan_table(azurite_connection_string, "any", since=Watermark.start())  # type: ignore[arg-type]
