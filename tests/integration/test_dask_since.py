"""tablesdk.dask reads a ChangeWindow (``since=``) as the engines that read again do: the scenarios of
since_engines.py on the bundled emulator (the frame computed twice), on Dask's threads."""

from __future__ import annotations

from collections.abc import Callable

import dask
import pytest
from since_engines import Row, on_the_emulator

from tablesdk import ChangeWindow
from tablesdk.dask import read_table

pytestmark = pytest.mark.integration


def dask_engine(connection_string: str, table: str, window: ChangeWindow, boundaries: list[str]) -> Callable[[], list[Row]]:
    frame = read_table(connection_string, table, boundaries=boundaries, since=window)

    def run() -> list[Row]:
        with dask.config.set(scheduler="threads"):
            computed = frame.compute()
        assert "odata.etag" in computed.columns
        return sorted(zip(computed.index, computed["RowKey"], computed["V"]))

    return run


def test_the_scenarios_on_the_emulator() -> None:
    on_the_emulator(dask_engine)
