"""tablesdk.ray reads a ChangeWindow (``since=``) on the bundled emulator and on Azurite: the scenarios
of since_engines.py, the Dataset consumed twice (Ray reads again). Ray runs on this machine only
(loopback, no dashboard), started once for the module."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest
import ray
from faults import FaultProxy
from since_engines import Row, on_azurite, on_the_emulator, rows_of

from tablesdk import ChangeWindow, CloudTableClient, Watermark
from tablesdk.ray import read_table

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    assert os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == "0"  # set by tests/conftest.py before Ray is imported
    context = ray.init(address="local", include_dashboard=False, num_cpus=2, _node_ip_address="127.0.0.1",
                       log_to_driver=False, configure_logging=False)
    try:
        assert context.address_info["node_ip_address"] == "127.0.0.1"
        yield
    finally:
        ray.shutdown()


def ray_engine(connection_string: str, table: str, window: ChangeWindow, boundaries: list[str]) -> Callable[[], list[Row]]:
    dataset = read_table(connection_string, table, boundaries=boundaries, since=window)

    def run() -> list[Row]:
        table = pa.concat_tables(ray.get(dataset.to_arrow_refs()))
        assert "odata.etag" in table.schema.names
        return rows_of(table)

    return run


def test_the_scenarios_on_the_emulator() -> None:
    on_the_emulator(ray_engine)


def test_the_scenarios_on_azurite(
    proxy: FaultProxy, azurite_connection_string: str, direct: CloudTableClient, fault_table_name: str,
) -> None:
    on_azurite(ray_engine, proxy, azurite_connection_string, direct, fault_table_name)


def test_a_bare_watermark_is_refused_with_the_way_to_a_window(azurite_connection_string: str) -> None:
    with pytest.raises(TypeError, match="ChangeWindow"):
        read_table(azurite_connection_string, "any", since=Watermark.start())  # type: ignore[arg-type]
