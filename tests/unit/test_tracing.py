"""OpenTelemetry spans (issue 27.1): one span per operation, one CLIENT child per HTTP attempt.

The SDK's in-memory exporter records the spans of a tracer provider made here. The global
provider is left alone (a process can set it once): the tracer is handed to tablesdk by
patching ``active_tracer``, and one subprocess test checks the real detection.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

import tablesdk._core._tracing  # noqa: E402
import tablesdk._pipeline._transport  # noqa: E402
import tablesdk.aio._transport  # noqa: E402
from tablesdk import (  # noqa: E402
    CloudStorageAccount,
    ConflictError,
    DynamicEntity,
    HttpRequest,
    HttpResponse,
    LinearRetry,
    MockSender,
    SaveChangesOptions,
    generate_table_sas,
)
from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY, DevStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tablesdk")
    for module in (tablesdk._core._tracing, tablesdk._pipeline._transport, tablesdk.aio._transport):
        monkeypatch.setattr(module, "active_tracer", lambda: tracer)
    yield memory
    provider.shutdown()


@pytest.fixture(scope="module")
def store() -> Iterator[DevStore]:
    with DevStore(port=0, page_size=2) as running:
        yield running


def _tree(spans: tuple[ReadableSpan, ...]) -> list[tuple[str, str | None]]:
    """(name, parent name) of each span, in the order they ended."""
    by_id = {span.context.span_id: span for span in spans}
    out = []
    for span in spans:
        parent = by_id.get(span.parent.span_id) if span.parent is not None else None
        out.append((span.name, parent.name if parent is not None else None))
    return out


def test_an_insert_is_one_operation_span_with_one_client_child(exporter: InMemorySpanExporter, store: DevStore) -> None:
    client = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()
    client.create_table_if_not_exists("Traced")
    exporter.clear()
    client.insert_entity("Traced", DynamicEntity(PartitionKey="p", RowKey="1", N=1))
    spans = exporter.get_finished_spans()
    assert _tree(spans) == [("POST", "CloudTableClient.insert_entity"), ("CloudTableClient.insert_entity", None)]
    attempt, operation = spans
    assert attempt.kind is SpanKind.CLIENT and operation.kind is SpanKind.INTERNAL
    attributes = dict(attempt.attributes or {})
    assert attributes["http.request.method"] == "POST"
    assert attributes["http.response.status_code"] == 204
    assert attributes["server.address"] == "127.0.0.1" and attributes["server.port"] == store.port
    assert str(attributes["url.full"]).endswith("/Traced")
    assert "http.request.resend_count" not in attributes
    assert attempt.context.trace_id == operation.context.trace_id


def test_a_query_over_three_pages_has_a_span_per_page(exporter: InMemorySpanExporter, store: DevStore) -> None:
    client = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()
    client.create_table_if_not_exists("Paged")
    for n in range(6):  # the store answers two entities a page: three pages
        client.upsert_entity("Paged", DynamicEntity(PartitionKey="p", RowKey=str(n)))
    exporter.clear()
    assert len(list(client.create_query("Paged"))) == 6
    pages = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.CLIENT]
    assert len(pages) == 3 and all(s.name == "GET" for s in pages)
    parents = {s.name for s in exporter.get_finished_spans() if s.kind is SpanKind.INTERNAL}
    assert parents == {"CloudTableClient.fetch_query_segment"}
    assert all(s.parent is not None for s in pages)  # read ahead on another thread, still a child


def test_save_changes_in_batch_mode_records_its_operation_count(exporter: InMemorySpanExporter, store: DevStore) -> None:
    client = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()
    client.create_table_if_not_exists("Saved")
    ctx = client.get_table_service_context()
    for n in range(3):
        ctx.add_object("Saved", DynamicEntity(PartitionKey="b", RowKey=f"s{n}"))
    exporter.clear()
    ctx.save_changes(SaveChangesOptions.BATCH)
    tree = _tree(exporter.get_finished_spans())
    assert tree == [("POST", "TableServiceContext.save_changes"), ("TableServiceContext.save_changes", None)]
    save = exporter.get_finished_spans()[-1]
    assert dict(save.attributes or {})["tablesdk.batch.operation_count"] == 3

    again = client.get_table_service_context()
    again.add_object("Saved", DynamicEntity(PartitionKey="b", RowKey="new"))
    again.add_object("Saved", DynamicEntity(PartitionKey="b", RowKey="s1"))  # exists
    exporter.clear()
    with pytest.raises(Exception):
        again.save_changes(SaveChangesOptions.BATCH)
    failed = exporter.get_finished_spans()[-1]
    assert dict(failed.attributes or {})["tablesdk.batch.failed_index"] == 1
    assert failed.status.status_code is StatusCode.ERROR


def _mock_client(answers: list[int], **options: Any) -> tuple[Any, list[HttpRequest]]:
    seen: list[HttpRequest] = []

    def answer(request: HttpRequest) -> HttpResponse:
        seen.append(request)
        status = answers.pop(0)
        body = "" if status < 300 else json.dumps(
            {"odata.error": {"code": "EntityAlreadyExists" if status == 409 else "ServerBusy",
                             "message": {"lang": "en-US", "value": "no"}}})
        return MockSender.response(status, body, {"Content-Type": "application/json"})

    token = generate_table_sas(DEVSTORE_ACCOUNT, DEVSTORE_KEY, "Traced", "raud",
                               expiry=__import__("datetime").datetime(2099, 1, 1))
    account = CloudStorageAccount.parse(f"TableEndpoint=http://127.0.0.1:1/{DEVSTORE_ACCOUNT};SharedAccessSignature={token}")
    client = account.create_cloud_table_client(sender=MockSender(answer), **options)
    return client, seen


def test_a_retried_request_has_one_child_per_attempt_and_no_signature(exporter: InMemorySpanExporter) -> None:
    client, seen = _mock_client([503, 503, 204], retry_policy=LinearRetry(3, 0.0))
    client.insert_entity("Traced", DynamicEntity(PartitionKey="p", RowKey="r"))
    attempts = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.CLIENT]
    assert [dict(s.attributes or {}).get("http.request.resend_count") for s in attempts] == [None, 1, 2]
    assert [dict(s.attributes or {})["http.response.status_code"] for s in attempts] == [503, 503, 204]
    assert [dict(s.attributes or {}).get("error.type") for s in attempts] == ["ServerBusy", "ServerBusy", None]
    signature = [p for p in seen[0].url.split("&") if p.startswith("sig=")][0].split("=", 1)[1]
    for span in exporter.get_finished_spans():
        text = json.dumps({k: str(v) for k, v in (span.attributes or {}).items()})
        assert signature not in text and DEVSTORE_KEY not in text
    # every attempt carried its own span's W3C trace context
    parents = [request.header("traceparent") for request in seen]
    assert all(p is not None for p in parents) and len(set(parents)) == 3
    for request, span in zip(seen, attempts):
        version, trace_id, span_id, _flags = str(request.header("traceparent")).split("-")
        assert (version, trace_id, span_id) == ("00", f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}")


def test_a_failed_request_records_the_service_error_code(exporter: InMemorySpanExporter) -> None:
    client, _ = _mock_client([409])
    with pytest.raises(ConflictError):
        client.insert_entity("Traced", DynamicEntity(PartitionKey="p", RowKey="r"))
    attempt, operation = exporter.get_finished_spans()
    assert dict(attempt.attributes or {})["error.type"] == "EntityAlreadyExists"
    assert dict(operation.attributes or {})["error.type"] == "EntityAlreadyExists"
    assert operation.status.status_code is StatusCode.ERROR


def test_an_async_bulk_load_is_one_tree(exporter: InMemorySpanExporter, store: DevStore) -> None:
    pytest.importorskip("aiohttp")
    from tablesdk.aio import AsyncCloudTableClient

    async def run() -> None:
        account = CloudStorageAccount.parse(store.connection_string)
        async with AsyncCloudTableClient(account) as client:
            await client.create_table_if_not_exists("AsyncBulk")
            exporter.clear()
            entities = [DynamicEntity(PartitionKey=f"p{n % 3}", RowKey=str(n)) for n in range(30)]
            result = await client.bulk_insert("AsyncBulk", entities)
            assert result.total == 30 and not result.failed

    asyncio.run(run())
    spans = exporter.get_finished_spans()
    root = [s for s in spans if s.name == "AsyncCloudTableClient.bulk_insert"]
    assert len(root) == 1
    by_id = {s.context.span_id: s for s in spans}

    def ancestors(span: ReadableSpan) -> list[str]:
        names = []
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            names.append(span.name)
        return names

    posts = [s for s in spans if s.kind is SpanKind.CLIENT]
    assert len(posts) == 3  # one batch per partition
    for post in posts:
        assert ancestors(post) == ["AsyncCloudTableClient.execute_batch", "AsyncCloudTableClient.bulk_insert"]


SCRIPT = """
import sys
{block}
from tablesdk import CloudStorageAccount, DynamicEntity, HttpRequest, HttpResponse, MockSender
from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY

seen = []
def answer(request):
    seen.append(request)
    return MockSender.response(204)

account = CloudStorageAccount.parse(
    f"DefaultEndpointsProtocol=http;AccountName={{DEVSTORE_ACCOUNT}};AccountKey={{DEVSTORE_KEY}};"
    f"TableEndpoint=http://127.0.0.1:1/{{DEVSTORE_ACCOUNT}}")
client = account.create_cloud_table_client(sender=MockSender(answer))
client.insert_entity("Traced", DynamicEntity(PartitionKey="p", RowKey="r"))
{check}
"""

GLOBAL_PROVIDER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
memory = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(memory))
trace.set_tracer_provider(provider)
"""


def _run(block: str, check: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(block=block, check=check)],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_configured_global_provider_is_found() -> None:
    _run(GLOBAL_PROVIDER, "names = [s.name for s in memory.get_finished_spans()]\n"
         "assert names == ['POST', 'CloudTableClient.insert_entity'], names\n"
         "assert seen[0].header('traceparent') is not None")


def test_without_a_provider_nothing_is_traced_or_sent() -> None:
    _run("import opentelemetry.trace", "assert seen[0].header('traceparent') is None")


def test_without_opentelemetry_nothing_of_it_is_imported() -> None:
    blocker = (
        "import importlib.abc\n"
        "class NoOtel(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry':\n"
        "            raise ImportError('opentelemetry is not installed')\n"
        "sys.meta_path.insert(0, NoOtel())\n"
    )
    _run(blocker, "assert not [m for m in sys.modules if m.startswith('opentelemetry')]\n"
         "assert seen[0].header('traceparent') is None")


def test_a_sync_bulk_load_keeps_its_workers_under_its_span(exporter: InMemorySpanExporter, store: DevStore) -> None:
    client = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()
    client.create_table_if_not_exists("SyncBulk")
    exporter.clear()
    entities = [DynamicEntity(PartitionKey=f"p{n % 3}", RowKey=str(n)) for n in range(30)]
    assert client.bulk_insert("SyncBulk", entities, max_workers=3).total == 30
    spans = exporter.get_finished_spans()
    [root] = [s for s in spans if s.name == "CloudTableClient.bulk_insert"]
    posts = [s for s in spans if s.kind is SpanKind.CLIENT]
    assert len(posts) == 3  # one batch per partition, sent from the worker threads
    assert all(p.context.trace_id == root.context.trace_id for p in posts)
