"""Incremental reads (``since=``, ``Watermark``, ``ChangeWindow``) against Cosmos DB's Table API.

They filter on ``Timestamp``, which Cosmos DB answers with no entities and no error, so every path
that takes ``since=`` refuses a Cosmos DB account before anything is sent, saying why and what to
do instead. Nothing here resolves or contacts a Cosmos DB host (``no_name_resolution``); the
engines, which take a connection string, are pointed at a loopback port nothing listens on, signed
with the Cosmos DB emulator's well-known key (which makes the account Cosmos DB).
"""

from __future__ import annotations

import asyncio
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tablesdk import ChangeWindow, CloudStorageAccount, MockSender, TableValidationError, Watermark
from tablesdk._core._cosmos import COSMOS_EMULATOR_KEY
from tablesdk._pipeline._http import HttpRequest, HttpResponse, Timeout

COSMOS = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;TableEndpoint=https://acct.table.cosmos.azure.com:443/"
#: Cosmos DB by its emulator's key, at a loopback port where nothing answers (port 9, discard).
EMULATOR = f"DefaultEndpointsProtocol=http;AccountName=acct;AccountKey={COSMOS_EMULATOR_KEY};TableEndpoint=http://127.0.0.1:9/acct"
SINCE = Watermark.at("2024-01-02T03:04:05.1234567Z")
WINDOW = ChangeWindow(SINCE, until=datetime(2024, 1, 3, tzinfo=timezone.utc))


@pytest.fixture(autouse=True)
def no_name_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a host name was resolved: {args[:1]!r}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "gethostbyname", refuse)


def refused(exc: pytest.ExceptionInfo[TableValidationError], field: str = "since") -> None:
    assert exc.value.field == field
    text = str(exc.value)
    assert "Cosmos DB" in text and "Timestamp" in text      # why
    assert "property of your own" in text                   # what to do instead


def never_sent(request: HttpRequest) -> HttpResponse:
    raise AssertionError(f"sent {request.method} {request.url}")


def cosmos_client() -> Any:
    return CloudStorageAccount.parse(COSMOS).create_cloud_table_client(sender=MockSender(never_sent))


@pytest.mark.parametrize("read", [
    lambda q: list(q.changes(SINCE)),
    lambda q: q.changes(SINCE),
    lambda q: q.to_arrow(since=SINCE),
    lambda q: list(q.iter_arrow_batches(since=SINCE)),
    lambda q: q.to_pandas(since=SINCE),
])
def test_sync_since_reads_are_refused_before_sending(read: Any) -> None:
    client = cosmos_client()
    with pytest.raises(TableValidationError) as exc:
        read(client.create_query("Orders"))
    refused(exc)


def test_since_reads_of_a_context_query_are_refused() -> None:
    client = cosmos_client()
    query = client.get_table_service_context().create_query("Orders")
    with pytest.raises(TableValidationError) as exc:
        query.changes(SINCE)
    refused(exc)


def test_storage_since_reads_are_not_refused() -> None:
    def empty(request: HttpRequest) -> HttpResponse:
        return MockSender.response(200, '{"value": []}', {"Content-Type": "application/json"})

    account = CloudStorageAccount.parse("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5")
    client = account.create_cloud_table_client(sender=MockSender(empty))
    assert list(client.create_query("Orders").changes(SINCE)) == []


class AsyncNeverSent:
    async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        return never_sent(request)

    async def close(self) -> None:
        pass


async def _collect(iterable: Any) -> list[Any]:
    return [item async for item in iterable]


@pytest.mark.parametrize("read", [
    lambda q: _collect(q.changes(SINCE)),
    lambda q: q.to_arrow(since=SINCE),
    lambda q: _collect(q.iter_arrow_batches(since=SINCE)),
    lambda q: q.to_pandas(since=SINCE),
])
def test_async_since_reads_are_refused_before_sending(read: Any) -> None:
    async def main() -> None:
        account = CloudStorageAccount.parse(COSMOS)
        async with account.create_async_cloud_table_client(sender=AsyncNeverSent()) as client:
            await read(client.create_query("Orders"))

    with pytest.raises(TableValidationError) as exc:
        asyncio.run(main())
    refused(exc)


def test_dask_since_is_refused_before_the_plan_reads() -> None:
    pytest.importorskip("dask.dataframe")
    from tablesdk.dask import read_table

    for since in (SINCE, WINDOW):
        with pytest.raises(TableValidationError) as exc:
            read_table(EMULATOR, "Orders", since=since, boundaries=[])
        refused(exc)


def test_ray_and_polars_since_are_refused_before_the_plan_reads() -> None:
    pytest.importorskip("polars")
    from tablesdk.polars import read_table as polars_read, scan_table

    for call in (polars_read, scan_table):
        with pytest.raises(TableValidationError) as exc:
            call(EMULATOR, "Orders", since=WINDOW, boundaries=[])
        refused(exc)
    pytest.importorskip("ray")
    from tablesdk.ray import read_table as ray_read

    with pytest.raises(TableValidationError) as exc:
        ray_read(EMULATOR, "Orders", since=WINDOW, boundaries=[])
    refused(exc)


def test_spark_since_option_is_refused_before_reading() -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.types import StringType, StructField, StructType

    from tablesdk.spark import AzureTablesDataSource

    source = AzureTablesDataSource({"connectionString": EMULATOR, "table": "Orders", "since": WINDOW.to_string()})
    with pytest.raises(TableValidationError) as exc:
        source.reader(StructType([StructField("PartitionKey", StringType())]))
    refused(exc)


def test_cli_since_is_refused_and_the_output_untouched(tmp_path: Path) -> None:
    from tablesdk.cli._app import cli

    out = tmp_path / "out.jsonl"
    out.write_text("kept\n", encoding="utf-8")
    state = tmp_path / "state.json"
    for extra in (["--since", "2024-01-02T03:04:05Z"], ["--since-state", str(state)]):
        result = CliRunner().invoke(
            cli, ["export", "Orders", str(out), "--overwrite", *extra],
            env={"AZURE_STORAGE_CONNECTION_STRING": EMULATOR},
        )
        assert result.exit_code != 0
        assert "Cosmos DB" in result.output and "Timestamp" in result.output, result.output
        assert COSMOS_EMULATOR_KEY not in result.output
        assert out.read_text(encoding="utf-8") == "kept\n" and not state.exists()
