"""tablesdk.dask on the bundled emulator: a read split in ranges equals the serial scan, writes
report every failed key, and both run on dask.distributed worker processes."""

from __future__ import annotations

from collections.abc import Iterator

import dask
import pandas as pd
import pytest

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EntityProperty, EdmType, prop
from tablesdk.dask import KEY_CEILING, TableWriteError, read_table, write_table

pytestmark = pytest.mark.integration

DEVSTORE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@pytest.fixture
def dev_client(devstore_connection_string: str) -> Iterator[CloudTableClient]:
    with CloudStorageAccount.parse(devstore_connection_string).create_cloud_table_client() as client:
        yield client


@pytest.fixture
def source(dev_client: CloudTableClient, unique_table_name: str) -> Iterator[str]:
    dev_client.create_table(unique_table_name)
    entities = []
    for n in range(240):
        entity = DynamicEntity(f"k{n % 24:02d}", f"{n:04d}", N=n, Name=f"n{n}")
        if n % 3 == 0:
            entity["Big"] = EntityProperty(n * 2**33, EdmType.INT64)  # sparse, and Int64 with nulls
        if n % 4 == 0:
            entity["Ok"] = n % 8 == 0
        if n % 5 == 0:
            entity["Blob"] = bytes([n % 256, 0xFF, 0xFE])  # sparse, and not UTF-8
        entities.append(entity)
    dev_client.bulk_insert(unique_table_name, entities).raise_on_error()
    yield unique_table_name
    dev_client.delete_table_if_exists(unique_table_name)


def serial(client: CloudTableClient, table: str) -> pd.DataFrame:
    """The serial scan as read_table makes it: to_pandas by PartitionKey, Binary as Arrow binary."""
    import pyarrow as pa

    frame = client.create_query(table).to_pandas().set_index("PartitionKey")
    return frame.astype({"Blob": pd.ArrowDtype(pa.binary())}) if "Blob" in frame else frame


@pytest.mark.parametrize("boundaries", [None, ["k05", "k10", "k11", "k20"], ["k05x", "zz"]])
def test_a_read_in_ranges_equals_the_serial_scan(
    devstore_connection_string: str, dev_client: CloudTableClient, source: str, boundaries: list[str] | None
) -> None:
    ddf = read_table(devstore_connection_string, source, npartitions=5, boundaries=boundaries)
    assert ddf.known_divisions and ddf.divisions[0] == "" and ddf.divisions[-1] == KEY_CEILING
    if boundaries is not None:  # boundaries on existing keys: no duplicates or gaps at the edges
        assert list(ddf.divisions[1:-1]) == boundaries
    with dask.config.set(scheduler="sync"):
        frame = ddf.compute()
    expected = serial(dev_client, source)
    pd.testing.assert_frame_equal(frame, expected)
    assert frame["RowKey"].is_unique and len(frame) == 240
    assert str(frame["Big"].dtype) == "Int64" and str(frame["Ok"].dtype) == "boolean"


def test_filter_columns_and_loc_by_partition(devstore_connection_string: str, dev_client: CloudTableClient, source: str) -> None:
    ddf = read_table(devstore_connection_string, source, filter=prop("N") >= 100, columns=["N"], boundaries=["k10"])
    assert list(ddf.columns) == ["RowKey", "Timestamp", "N"]
    with dask.config.set(scheduler="sync"):
        frame = ddf.compute()
        one = ddf.loc["k12"].compute()
    assert sorted(frame["N"]) == list(range(100, 240))
    assert set(one.index) == {"k12"} and len(one) == len(frame.loc["k12"])


def test_a_partition_with_a_property_the_sample_lacked_raises(
    devstore_connection_string: str, dev_client: CloudTableClient, source: str
) -> None:
    from tablesdk import SchemaConflictError

    dev_client.insert_entity(source, DynamicEntity("k23", "late", Surprise=1))
    ddf = read_table(devstore_connection_string, source, boundaries=["k12"], sample_size=50)
    with dask.config.set(scheduler="sync"), pytest.raises(SchemaConflictError, match="Surprise"):
        ddf.compute()


def test_no_account_key_in_task_names_or_reprs(devstore_connection_string: str, source: str) -> None:
    assert DEVSTORE_KEY in devstore_connection_string
    ddf = read_table(devstore_connection_string, source, npartitions=3)
    graph = ddf.__dask_graph__()
    assert DEVSTORE_KEY not in repr(list(graph.keys())) and DEVSTORE_KEY not in repr(ddf)
    assert all(DEVSTORE_KEY not in repr(task) for task in graph.values())


def test_write_table_writes_every_partition(
    devstore_connection_string: str, dev_client: CloudTableClient, source: str, unique_table_name: str
) -> None:
    copy = unique_table_name + "w"
    dev_client.create_table(copy)
    try:
        ddf = read_table(devstore_connection_string, source, boundaries=["k08", "k16"])
        with dask.config.set(scheduler="sync"):
            counts = write_table(ddf, devstore_connection_string, copy)
        assert counts == [80, 80, 80]
        pd.testing.assert_frame_equal(
            serial(dev_client, copy).drop(columns="Timestamp"), serial(dev_client, source).drop(columns="Timestamp")
        )
    finally:
        dev_client.delete_table(copy)


def test_a_failed_entity_raises_with_its_partition_and_keys(
    devstore_connection_string: str, dev_client: CloudTableClient, source: str
) -> None:
    import dask.dataframe as dd

    frame = pd.DataFrame({"PartitionKey": ["a", "a", "b", "b"], "RowKey": ["1", "2", "0000", "3"], "V": [1, 2, 3, 4]})
    ddf = dd.from_pandas(frame, npartitions=2, sort=False)
    dev_client.insert_entity(source, DynamicEntity("b", "0000"))  # already there: the insert of it fails
    with dask.config.set(scheduler="sync"), pytest.raises(TableWriteError) as caught:
        write_table(ddf, devstore_connection_string, source, mode="insert")
    error = caught.value
    assert error.written == [2, 1]
    assert {index: [(pk, rk) for pk, rk, _ in items] for index, items in error.failures.items()} == {1: [("b", "0000")]}
    assert "partition 1" in str(error) and "RowKey='0000'" in str(error) and "EntityAlreadyExists" in str(error)
    assert DEVSTORE_KEY not in str(error)


def test_read_and_write_on_two_worker_processes(
    devstore_connection_string: str, dev_client: CloudTableClient, source: str, unique_table_name: str
) -> None:
    from distributed import Client, LocalCluster

    copy = unique_table_name + "d"
    dev_client.create_table(copy)
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as dask_client:
            ddf = read_table(devstore_connection_string, source, boundaries=["k12"])
            frame = ddf.compute()
            counts = write_table(ddf, devstore_connection_string, copy, mode="replace")
            workers = dask_client.run(lambda: __import__("os").getpid())
        assert len(set(workers.values())) == 2
        pd.testing.assert_frame_equal(frame, serial(dev_client, source))
        assert sum(counts) == 240 and len(list(dev_client.create_query(copy))) == 240
    finally:
        dev_client.delete_table(copy)


def test_a_binary_property_reads_under_dask_string_conversion(
    devstore_connection_string: str, dev_client: CloudTableClient, unique_table_name: str
) -> None:
    # Dask turns object columns into strings by default: bytes must not go that way.
    dev_client.create_table(unique_table_name)
    try:
        blobs = [bytes([n, 0xFF, 0xFE, n]) for n in range(20)]
        dev_client.bulk_insert(unique_table_name, [
            DynamicEntity(f"p{n % 4}", f"{n:03d}", Blob=blob) for n, blob in enumerate(blobs)
        ]).raise_on_error()
        with dask.config.set({"dataframe.convert-string": True, "scheduler": "sync"}):
            frame = read_table(devstore_connection_string, unique_table_name, npartitions=2).compute()
        assert sorted(frame["Blob"].tolist()) == sorted(blobs)
    finally:
        dev_client.delete_table_if_exists(unique_table_name)


def test_every_edm_type_round_trips_under_the_default_dask_config(
    client: CloudTableClient, connection_string: str, target: str, table: str
) -> None:
    # Dask's default config turns object (and python-string) columns into pyarrow strings
    # (dataframe.convert-string); every EDM type must come back as written, Binary as its exact bytes.
    import uuid

    import pyarrow as pa
    from dask.dataframe.utils import pyarrow_strings_enabled

    from tablesdk._entities._edm_base import parse_datetime

    assert pyarrow_strings_enabled(), "the test needs Dask's default string conversion on"
    when = "2024-02-29T23:59:59.1234567Z"  # the 100 ns digit must survive
    full = DynamicEntity(
        "a", "1", S="text é", I32=EntityProperty(-7, EdmType.INT32), I64=EntityProperty(2**40 + 1, EdmType.INT64),
        D=1.25, B=True, T=parse_datetime(when), G=uuid.UUID("12345678-1234-5678-1234-567812345678"),
        Y=b"\x00\xff\xfe\x80binary",
    )
    sparse = DynamicEntity("b", "2", S="only this")  # every other property missing: nulls
    client.bulk_insert(table, [full, sparse]).raise_on_error()
    payload_format = target.rsplit("-", 1)[1]
    with dask.config.set(scheduler="sync"):
        frame = read_table(connection_string, table, boundaries=["b"], payload_format=payload_format).compute()
    frame = frame.drop(columns="Timestamp")
    expected = pd.DataFrame(
        {
            "RowKey": pd.array(["1", "2"], dtype="string"),
            "S": pd.array(["text é", "only this"], dtype="string"),
            "I32": pd.array([-7, None], dtype="Int32"),
            "I64": pd.array([2**40 + 1, None], dtype="Int64"),
            "D": [1.25, float("nan")],
            "B": pd.array([True, None], dtype="boolean"),
            "T": pd.to_datetime([when, None], utc=True).as_unit("ns"),
            # a Guid stays a Guid (arrow.uuid: uuid.UUID values), so that write_table writes it as one
            "G": pd.array([uuid.UUID("12345678-1234-5678-1234-567812345678"), None], dtype=pd.ArrowDtype(pa.uuid())),
            "Y": pd.array([b"\x00\xff\xfe\x80binary", None], dtype=pd.ArrowDtype(pa.binary())),
        },
        index=pd.Index(["a", "b"], dtype="string", name="PartitionKey"),
    )
    pd.testing.assert_frame_equal(frame, expected, check_like=True)
    assert frame.loc["a", "T"].nanosecond == 700 and frame.loc["a", "Y"] == full["Y"]


@pytest.mark.parametrize("binary_type", ["binary", "large_binary", "fixed_size_binary"])
def test_a_binary_column_of_any_arrow_binary_type_in_the_schema_keeps_its_bytes(
    devstore_connection_string: str, dev_client: CloudTableClient, unique_table_name: str, binary_type: str
) -> None:
    import pyarrow as pa

    arrow_type = pa.binary(4) if binary_type == "fixed_size_binary" else getattr(pa, binary_type)()
    dev_client.create_table(unique_table_name)
    try:
        dev_client.bulk_insert(unique_table_name, [
            DynamicEntity("a", "1", Y=b"\xff\x00\xfe\x01"), DynamicEntity("b", "2")
        ]).raise_on_error()
        ddf = read_table(devstore_connection_string, unique_table_name, schema=pa.schema([("Y", arrow_type)]),
                         boundaries=["b"])
        with dask.config.set(scheduler="sync"):
            frame = ddf.compute()
        assert frame["Y"].dtype == pd.ArrowDtype(arrow_type) == ddf["Y"].dtype
        assert frame["Y"].iloc[0] == b"\xff\x00\xfe\x01" and frame["Y"].isna().tolist() == [False, True]
    finally:
        dev_client.delete_table_if_exists(unique_table_name)


def test_a_read_keeps_nothing_per_partition(
    devstore_connection_string: str, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker's memory is bounded by the partition: reading the table again leaves nothing more
    # allocated under tablesdk (no page or frame kept per partition). What a worker keeps is one
    # client for the account (made by its first task, shared by the rest): it does not grow with
    # the partitions read.
    import gc
    import tracemalloc
    import weakref

    import pyarrow as pa

    from tablesdk._columns._worker_clients import WORKER_CLIENTS
    from tablesdk.dask import ConnectionSecret

    made: list[weakref.ref[CloudTableClient]] = []
    closed: list[int] = []
    make_client, close_client = ConnectionSecret.client, CloudTableClient.close

    def recording_client(
        self: ConnectionSecret, payload_format: str = "json", operation_deadline: float | None = None
    ) -> CloudTableClient:
        client = make_client(self, payload_format, operation_deadline)
        made.append(weakref.ref(client))
        return client

    def recording_close(self: CloudTableClient) -> None:
        closed.append(id(self))
        close_client(self)

    monkeypatch.setattr(ConnectionSecret, "client", recording_client)
    monkeypatch.setattr(CloudTableClient, "close", recording_close)
    boundaries = [f"k{n:02d}" for n in range(2, 24, 2)]  # 12 partitions
    ddf = read_table(devstore_connection_string, source, boundaries=boundaries, schema=None)

    def read_all() -> int:
        with dask.config.set(scheduler="sync"):
            return int(ddf.map_partitions(len).compute().sum())

    assert read_all() == 240  # the first read pays what is paid once (imports, lazy tables, the worker's client)
    shared = WORKER_CLIENTS.made
    tracemalloc.start(25)
    try:
        gc.collect()
        before = tracemalloc.take_snapshot()
        arrow_before = pa.total_allocated_bytes()
        for _ in range(3):
            assert read_all() == 240
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    # allocated under tablesdk's code, but not the bundled emulator's (it serves in this process)
    ours = [tracemalloc.Filter(True, "*/tablesdk/*", all_frames=True),
            tracemalloc.Filter(False, "*/tablesdk/devstore/*", all_frames=True)]
    grown = after.filter_traces(ours).compare_to(before.filter_traces(ours), "traceback")
    kept = sum(stat.size_diff for stat in grown if stat.size_diff > 0)
    where = "\n\n".join(f"{stat}\n" + "\n".join(stat.traceback.format()[-16:]) for stat in grown[:4])
    assert kept < 16 * 1024, f"{kept} B kept:\n{where}"
    assert pa.total_allocated_bytes() <= arrow_before
    assert len(made) == 1 and len(closed) == len(made)  # read_table's own (boundaries given), closed
    assert all(ref() is None for ref in made)
    assert WORKER_CLIENTS.made == shared  # 36 partitions read again, no client made


def test_write_table_sends_with_its_options_and_retry_policy(
    devstore_connection_string: str, dev_client: CloudTableClient, source: str
) -> None:
    import dask.dataframe as dd

    from tablesdk import NoRetry, TableRequestOptions

    frame = pd.DataFrame({"PartitionKey": ["o", "o", "q"], "RowKey": ["1", "2", "3"], "V": [1, 2, 3]})
    ddf = dd.from_pandas(frame, npartitions=2, sort=False)
    hopeless = TableRequestOptions(deadline=1e-9)  # no request can be answered in time
    with dask.config.set(scheduler="sync"), pytest.raises(TableWriteError) as caught:
        write_table(ddf, devstore_connection_string, source, retry_policy=NoRetry(), options=hopeless)
    assert caught.value.written == [0, 0] and sorted(caught.value.failures) == [0, 1]
    with dask.config.set(scheduler="sync"):
        assert write_table(ddf, devstore_connection_string, source, options=TableRequestOptions(server_timeout=30)) == [2, 1]
