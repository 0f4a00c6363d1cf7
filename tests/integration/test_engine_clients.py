"""Each engine's tasks share one client per process: a read of eight ranges (and a write after it)
makes one client in a process that runs them all, not one per range. Counted where clients are
made (``CloudTableClient.__init__``) in this process, and by each Dask worker process's cache."""

from __future__ import annotations

from collections.abc import Iterator

import dask
import pytest

from engine_data import ROWS, fill
from tablesdk import CloudStorageAccount, CloudTableClient
from tablesdk._clients import _client
from tablesdk._columns._engines import plan_ranges
from tablesdk._columns._worker_clients import WORKER_CLIENTS

pytestmark = pytest.mark.integration

#: Eight ranges over the table's 24 PartitionKeys.
BOUNDARIES = ["k03", "k06", "k09", "k12", "k15", "k18", "k21"]


class Made:
    """Clients made in this process since the fixture started counting."""

    def __init__(self) -> None:
        self.count = 0


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Iterator[Made]:
    WORKER_CLIENTS.close_all()  # no client left by an earlier test
    counter = Made()
    original = _client.CloudTableClient.__init__

    def counting(self: CloudTableClient, *args: object, **kwargs: object) -> None:
        counter.count += 1
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_client.CloudTableClient, "__init__", counting)
    yield counter
    WORKER_CLIENTS.close_all()


@pytest.fixture
def source(devstore_connection_string: str, unique_table_name: str) -> Iterator[str]:
    with CloudStorageAccount.parse(devstore_connection_string).create_cloud_table_client() as client:
        client.create_table(unique_table_name)
        fill(client, unique_table_name)
        yield unique_table_name
        client.delete_table_if_exists(unique_table_name)
        client.delete_table_if_exists(unique_table_name + "w")


def test_a_dask_read_and_write_make_one_client(devstore_connection_string: str, source: str, made: Made) -> None:
    import tablesdk.dask

    frame = tablesdk.dask.read_table(devstore_connection_string, source, boundaries=BOUNDARIES)
    planned = made.count
    with dask.config.set(scheduler="sync"):
        assert frame.npartitions == 8 and len(frame.compute()) == ROWS
        assert made.count - planned == 1  # eight ranges, one client
        with CloudStorageAccount.parse(devstore_connection_string).create_cloud_table_client() as client:
            client.create_table(source + "w")
        before_write = made.count
        assert sum(tablesdk.dask.write_table(frame, devstore_connection_string, source + "w")) == ROWS
    assert made.count == before_write  # the write's partitions reuse the read's client


def test_dask_worker_processes_make_one_client_each(devstore_connection_string: str, source: str) -> None:
    from distributed import Client, LocalCluster

    import tablesdk.dask

    def clients_made() -> int:
        from tablesdk._columns._worker_clients import WORKER_CLIENTS

        return WORKER_CLIENTS.made

    with LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as dask_client:
        frame = tablesdk.dask.read_table(devstore_connection_string, source, boundaries=BOUNDARIES)
        assert len(frame.compute()) == ROWS
        per_worker = dask_client.run(clients_made)
    assert 1 <= sum(per_worker.values()) <= 2 and all(count <= 1 for count in per_worker.values()), per_worker


def test_the_ray_read_tasks_of_one_process_make_one_client(devstore_connection_string: str, source: str, made: Made) -> None:
    import pyarrow as pa

    import tablesdk.ray

    plan = plan_ranges(devstore_connection_string, source, boundaries=BOUNDARIES)
    tasks = tablesdk.ray._datasource(plan).get_read_tasks(8)
    planned = made.count
    rows = sum(pa.concat_tables(list(task())).num_rows for task in tasks)  # as a Ray worker runs them, in turn
    assert len(tasks) == 8 and rows == ROWS
    assert made.count - planned == 1


def test_the_spark_partitions_of_one_worker_make_one_client(devstore_connection_string: str, source: str, made: Made) -> None:
    import tablesdk.spark

    data_source = tablesdk.spark.AzureTablesDataSource(
        {"connectionString": devstore_connection_string, "table": source, "truncateDateTimes": "true", "boundaries": str(BOUNDARIES).replace("'", '"')})
    reader = data_source.reader(data_source.schema())
    partitions = reader.partitions()
    planned = made.count
    rows = sum(batch.num_rows for partition in partitions for batch in reader.read(partition))
    assert len(partitions) == 8 and rows == ROWS
    assert made.count - planned == 1


def test_a_polars_scan_reads_its_ranges_on_one_client(devstore_connection_string: str, source: str, made: Made) -> None:
    import tablesdk.polars

    before = WORKER_CLIENTS.made
    assert tablesdk.polars.scan_table(devstore_connection_string, source, boundaries=BOUNDARIES).collect().height == ROWS
    assert WORKER_CLIENTS.made - before == 1
    assert made.count <= 2  # the plan's and the ranges' (eight threads, one client)
