"""tablesdk.ray on the bundled emulator and Azurite: a read in ranges equals the serial scan, pushed
columns and filters read the same rows, a write keeps every EDM type and names each key it did not
write. Ray runs on this machine only (loopback, no dashboard), started once for the module."""

from __future__ import annotations

import os

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import ray
import ray.data

from engine_data import PROPERTY_TYPES, ROWS, fill, sorted_rows, stored
from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType, prop
from tablesdk.ray import TableWriteError, read_table, write_table

pytestmark = pytest.mark.integration

#: Ray's switch between a single machine and a cluster: "0" keeps its node address (and so every
#: server it starts) on loopback.
LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

DEVSTORE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[Path]:
    """A Ray of two CPUs on loopback (no dashboard), shut down after the module; gives its session directory.

    On Linux Ray replaces a node address of 127.0.0.1 with the machine's network address (and its
    servers listen there) unless it is told this is no cluster (:data:`LOOPBACK_ONLY`, read when
    Ray is imported): the node address checked here is what every Ray server listens on."""
    assert os.environ.get(LOOPBACK_ONLY) == "0"  # set by tests/conftest.py before Ray is imported
    context = ray.init(
        address="local", include_dashboard=False, num_cpus=2, _node_ip_address="127.0.0.1",
        log_to_driver=False, configure_logging=False,
    )
    try:
        assert context.address_info["node_ip_address"] == "127.0.0.1", context.address_info
        yield Path(context.address_info["session_dir"])
    finally:
        ray.shutdown()


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


def collect(dataset: Any) -> Any:
    """The Dataset's rows as one ``pyarrow.Table`` (the blocks as Ray holds them), sorted by keys."""
    return sorted_rows(pa.concat_tables(ray.get(dataset.to_arrow_refs())))


@pytest.mark.parametrize("boundaries", [None, ["k05", "k10", "k11", "k20"], ["k05x", "zz"]])
def test_a_read_in_ranges_equals_the_serial_scan(
    conn: str, client: CloudTableClient, source: str, boundaries: list[str] | None
) -> None:
    assert read_table(conn, source, parallelism=5, boundaries=boundaries).count() == ROWS  # Ray reads no column
    dataset = read_table(conn, source, parallelism=5, boundaries=boundaries)
    found = collect(dataset)
    expected = sorted_rows(client.create_query(source).to_arrow())
    assert found.schema.equals(expected.schema, check_metadata=True)  # every column's EDM type kept
    assert found.equals(expected)
    keys = list(zip(found.column("PartitionKey").to_pylist(), found.column("RowKey").to_pylist()))
    assert len(keys) == len(set(keys)) == ROWS  # no duplicates or gaps at the range edges


def test_filter_and_columns_read_what_the_serial_query_reads(conn: str, client: CloudTableClient, source: str) -> None:
    dataset = read_table(conn, source, filter=prop("N") >= 100, columns=["N", "Id"], boundaries=["k10"])
    expected = client.create_query(source).where(prop("N") >= 100).select("N", "Id").to_arrow()
    assert collect(dataset).equals(sorted_rows(expected))
    projected = read_table(conn, source, parallelism=3).select_columns(["PartitionKey", "RowKey", "Big", "Ok"])
    full = sorted_rows(client.create_query(source).to_arrow())
    assert collect(projected).equals(full.select(["PartitionKey", "RowKey", "Big", "Ok"]))


def test_a_round_trip_keeps_every_edm_type(conn: str, client: CloudTableClient, source: str, target: str) -> None:
    counts = write_table(read_table(conn, source, parallelism=4), conn, target)
    assert sum(counts) == ROWS
    written, original = stored(client, target), stored(client, source)
    assert written == original
    types = {name: edm for _, _, properties in written for name, (_, edm) in properties.items()}
    assert types == PROPERTY_TYPES  # Guid stays Guid, Int64 stays Int64, ...


def test_edm_types_restore_what_a_pandas_step_drops(conn: str, client: CloudTableClient, source: str, target: str) -> None:
    through_pandas = read_table(conn, source, boundaries=["k12"]).map_batches(lambda frame: frame, batch_format="pandas")
    write_table(through_pandas, conn, target, edm_types={"Id": EdmType.GUID}, mode="replace")
    assert stored(client, target) == stored(client, source)
    write_table(through_pandas, conn, target, mode="replace")  # without it, the Guids are text
    assert {properties["Id"][1] for _, _, properties in stored(client, target)} == {EdmType.STRING}
    from tablesdk import TableValidationError

    with pytest.raises(TableValidationError, match="Nope"):  # refused before any task runs
        write_table(through_pandas, conn, target, edm_types={"Nope": EdmType.GUID})


def test_a_failed_entity_fails_the_write_naming_its_keys(conn: str, client: CloudTableClient, target: str) -> None:
    rows = pa.table({"PartitionKey": ["a", "a", "b", "b"], "RowKey": ["1", "2", "0000", "3"], "V": [1, 2, 3, 4]})
    client.insert_entity(target, DynamicEntity("b", "0000"))  # already there: the insert of it fails
    with pytest.raises(TableWriteError) as caught:
        write_table(ray.data.from_arrow(rows), conn, target, mode="insert")
    error = caught.value
    assert sum(error.written) == 3
    assert [(pk, rk) for items in error.failures.values() for pk, rk, _ in items] == [("b", "0000")]
    assert "RowKey='0000'" in str(error) and "EntityAlreadyExists" in str(error)
    assert DEVSTORE_KEY not in str(error)


def test_no_account_key_in_the_dataset_its_stats_or_rays_logs(
    conn: str, source: str, target: str, local_ray: Path
) -> None:
    assert DEVSTORE_KEY in conn
    dataset = read_table(conn, source, parallelism=3)
    assert DEVSTORE_KEY not in repr(dataset)
    write_table(dataset, conn, target)
    assert DEVSTORE_KEY not in dataset.stats()
    logs = [path for path in (local_ray / "logs").rglob("*") if path.is_file()]
    assert logs and not [path.name for path in logs if DEVSTORE_KEY.encode() in path.read_bytes()]


def test_a_write_tasks_blocks_go_as_one_table_when_their_columns_agree() -> None:
    from tablesdk.ray import _one_table

    first = pa.table({"PartitionKey": ["a"], "RowKey": ["1"], "V": [1]})
    sparse = pa.table({"PartitionKey": ["a"], "RowKey": ["2"]})
    (merged,) = _one_table(iter([first, sparse]))
    assert merged.num_rows == 2 and merged.column("V").to_pylist() == [1, None]
    clashing = pa.table({"PartitionKey": ["a"], "RowKey": ["3"], "V": ["text"]})
    assert _one_table(iter([first, clashing])) == [first, clashing]  # each written with its own types


def test_two_read_tasks_run_at_once_on_two_cpus() -> None:
    # Each task of the read waits, in a shared barrier, for the other to start: with the read's
    # settings capped at one task at a time, the first would wait for the second in vain. (Ray
    # Data's own CPU budget for a new read lets a second task start only after about 10 s, which
    # this test does not tell from a slow start: the settings are asserted as well.)
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    from tablesdk.ray import _read_task_resources

    @ray.remote
    class Barrier:
        def __init__(self) -> None:
            self.arrived = 0

        def arrive(self) -> None:
            self.arrived += 1

        def count(self) -> int:
            return self.arrived

    barrier = Barrier.remote()  # type: ignore[attr-defined]

    def task(index: int) -> Iterator[Any]:
        import time

        ray.get(barrier.arrive.remote())
        deadline = time.monotonic() + 600  # only a failure waits this long: a loaded machine never fails it
        while ray.get(barrier.count.remote()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        yield pa.table({"task": [index], "together": [ray.get(barrier.count.remote()) >= 2]})

    class Pair(Datasource):  # type: ignore[misc]
        def estimate_inmemory_data_size(self) -> None:
            return None

        def get_read_tasks(self, parallelism: int, **_: Any) -> list[Any]:
            metadata = BlockMetadata(num_rows=None, size_bytes=None, exec_stats=None, input_files=None)
            return [ReadTask(lambda index=index: task(index), metadata) for index in range(2)]

    assert _read_task_resources(8) == {"num_cpus": 0, "concurrency": 2}
    rows = ray.data.read_datasource(Pair(), override_num_blocks=2, **_read_task_resources(2)).take_all()
    assert sorted(row["task"] for row in rows) == [0, 1] and all(row["together"] for row in rows)
