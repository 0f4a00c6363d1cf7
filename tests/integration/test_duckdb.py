"""DuckDB reads a query's Arrow batches as a stream (the example of docs/data.md), on the bundled
emulator and Azurite: its answers equal those computed from the serial scan, to the DateTime's
seventh digit and beyond 2**53."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine_data import ROWS, fill
from tablesdk import CloudStorageAccount, CloudTableClient

pytestmark = pytest.mark.integration


@pytest.fixture(params=["devstore", "azurite"])
def client(request: pytest.FixtureRequest) -> Iterator[CloudTableClient]:
    conn = str(request.getfixturevalue(f"{request.param}_connection_string"))
    with CloudStorageAccount.parse(conn).create_cloud_table_client() as table_client:
        yield table_client


@pytest.fixture
def source(client: CloudTableClient, unique_table_name: str) -> Iterator[str]:
    client.create_table(unique_table_name)
    fill(client, unique_table_name)
    yield unique_table_name
    client.delete_table_if_exists(unique_table_name)


def stream(client: CloudTableClient, table: str) -> pa.RecordBatchReader:
    """The query's pages as a reader of one schema (a sample's), read a page at a time as DuckDB pulls."""
    query = client.create_query(table).page_size(50)
    schema = query.take(50).to_arrow().schema
    return pa.RecordBatchReader.from_batches(schema, query.iter_arrow_batches(schema=schema))


def test_duckdb_answers_from_the_stream_as_from_the_serial_scan(client: CloudTableClient, source: str) -> None:
    serial = client.create_query(source).to_arrow()
    reader = stream(client, source)  # noqa: F841  (DuckDB finds it by its name)
    answers = duckdb.sql(
        'select PartitionKey, count(*), sum(Big), count(Ok), max(epoch_ns("At")), min(Id), max(Blob)'
        " from reader group by PartitionKey order by PartitionKey"
    ).fetchall()
    assert len(answers) == 24 and sum(row[1] for row in answers) == ROWS
    for key, count, big, oks, last_at, first_id, blob in answers:
        rows = serial.filter(pc.equal(serial.column("PartitionKey"), key))
        assert count == rows.num_rows
        assert big == sum(rows.column("Big").to_pylist())  # exact: no detour through doubles
        assert oks == rows.num_rows - rows.column("Ok").null_count
        assert last_at == pc.max(rows.column("At").cast(pa.int64())).as_py()  # the 100 ns digit kept
        assert first_id == min(rows.column("Id").to_pylist())
        assert blob == max(value for value in rows.column("Blob").to_pylist() if value is not None)


def test_the_rows_duckdb_returns_are_the_rows_read(client: CloudTableClient, source: str) -> None:
    serial = client.create_query(source).to_arrow()
    reader = stream(client, source)  # noqa: F841
    found = duckdb.sql("select * from reader order by PartitionKey, RowKey").arrow()
    found = found.read_all() if isinstance(found, pa.RecordBatchReader) else found
    expected = serial.sort_by([("PartitionKey", "ascending"), ("RowKey", "ascending")])
    assert found.column_names == expected.column_names
    for name in expected.column_names:
        column = found.column(name)
        if pa.types.is_timestamp(column.type):  # DuckDB names the zone Etc/UTC
            column = column.cast(pa.int64())
            assert expected.column(name).cast(pa.int64()).equals(column)
        else:
            assert expected.column(name).equals(column), name
