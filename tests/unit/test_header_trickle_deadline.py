"""An answer whose status line and headers trickle in, or never end, is bounded by the operation
deadline and by the read timeout: every public operation, sync and async, library and CLI.

The fault proxy (tests/faults.py) answers every request with a status line and a header block
that never ends (TRICKLE_HEADERS: a byte every 50 ms; ENDLESS_HEADERS: a line every 50 ms), far
inside any per-read timeout, until the client gives up or the proxy stops: nothing ends it on its
own, so a missing bound shows as a hang. Each operation runs in a thread of its own that the test
joins with an outer bound (:data:`HANG`); the assertions are "ended with the deadline's
RequestTimeoutError" and "not after the deadline plus a generous margin" (the machine may be
loaded many times over: the margin is for that, the bug it catches is an endless wait).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from faults import Fault, FaultProxy
from loopback import unused_port

from tablesdk import (
    AccessPolicy,
    CloudStorageAccount,
    CloudTableClient,
    DynamicEntity,
    NoRetry,
    RequestTimeoutError,
    ServiceProperties,
    TableBatchOperation,
)
from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY

DEADLINE = 0.5
#: How far past the deadline an operation may end: room for a loaded machine, nothing more.
MARGIN = 8.0
#: The outer bound of the test: an operation still running then hangs (the proxy's close ends it).
HANG = 30.0
READ_TIMEOUT = 1.0
TABLE = "Trickle"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=[Fault.TRICKLE_HEADERS, Fault.ENDLESS_HEADERS], ids=["trickle", "endless"])
def fault(request: pytest.FixtureRequest) -> Fault:
    return Fault(request.param)


@pytest.fixture
def proxy(fault: Fault) -> Iterator[FaultProxy]:
    # Nothing is forwarded (both faults answer by themselves): the upstream is a port nobody listens on.
    with FaultProxy(f"http://127.0.0.1:{unused_port()}/{DEVSTORE_ACCOUNT}", lifetime=600.0) as endless:
        # Lines slow enough that no client's cap on the count of headers (http.client 100,
        # aiohttp 128) ends the endless block before the margin does.
        endless.inject(fault, times=1_000_000, pace=0.05 if fault is Fault.TRICKLE_HEADERS else 0.25)
        yield endless
    assert endless.wait_idle(timeout=10.0), "a proxy handler outlived the proxy"


def connection_string(proxy: FaultProxy) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={DEVSTORE_ACCOUNT};AccountKey={DEVSTORE_KEY};"
        f"TableEndpoint={proxy.endpoint}"
    )


def account(proxy: FaultProxy) -> CloudStorageAccount:
    return CloudStorageAccount.parse(connection_string(proxy))


def run_bounded(call: Callable[[], Any]) -> tuple[BaseException | None, Any, float]:
    """Run ``call`` in a thread: (what it raised, what it returned, seconds it took); fails the
    test when it is still running after :data:`HANG` seconds."""
    outcome: dict[str, Any] = {}

    def body() -> None:
        started = time.monotonic()
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc
        outcome["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(HANG)
    if thread.is_alive():
        pytest.fail(f"the operation still waited after {HANG} s (deadline {DEADLINE} s): it hangs")
    return outcome.get("error"), outcome.get("value"), outcome["elapsed"]


def deadline_error_in(error: BaseException | None, value: Any) -> bool:
    """True when the deadline's RequestTimeoutError is what ended the call: raised, the cause
    of what was raised, or the error of a failed entity of a returned bulk result."""
    seen: list[BaseException] = []
    pending = [error] if error is not None else []
    pending.extend(outcome.error for outcome in getattr(value, "failed", ()) if outcome.error is not None)
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.append(current)
        if isinstance(current, RequestTimeoutError) and "deadline of" in str(current):
            return True
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        result = getattr(current, "result", None)
        pending.extend(o.error for o in getattr(result, "failed", ()) if o.error is not None)
    return False


def assert_ends_at_the_deadline(name: str, call: Callable[[], Any]) -> None:
    error, value, elapsed = run_bounded(call)
    assert deadline_error_in(error, value), f"{name}: ended with {error!r} / {value!r}, not the deadline's error"
    assert elapsed < DEADLINE + MARGIN, f"{name}: took {elapsed:.1f} s with a deadline of {DEADLINE} s"


def entity(row: str = "r") -> DynamicEntity:
    return DynamicEntity(PartitionKey="p", RowKey=row, Value=1)


def batch() -> TableBatchOperation[DynamicEntity]:
    operations: TableBatchOperation[DynamicEntity] = TableBatchOperation()
    operations.insert(entity("a"))
    operations.insert(entity("b"))
    return operations


def sync_operations(client: CloudTableClient) -> dict[str, Callable[[], Any]]:
    def context_save() -> Any:
        context = client.get_table_service_context()
        context.add_object(TABLE, entity())
        return context.save_changes()

    return {
        "create_table": lambda: client.create_table(TABLE),
        "create_table_if_not_exists": lambda: client.create_table_if_not_exists(TABLE),
        "delete_table": lambda: client.delete_table(TABLE),
        "table_exists": lambda: client.table_exists(TABLE),
        "list_tables": lambda: list(client.list_tables()),
        "insert_entity": lambda: client.insert_entity(TABLE, entity()),
        "get_entity": lambda: client.get_entity(TABLE, "p", "r"),
        "update_entity": lambda: client.update_entity(TABLE, entity(), mode="replace", etag="*"),
        "merge_entity": lambda: client.update_entity(TABLE, entity(), mode="merge", etag="*"),
        "upsert_entity": lambda: client.upsert_entity(TABLE, entity()),
        "delete_entity": lambda: client.delete_entity(TABLE, partition_key="p", row_key="r", etag="*"),
        "query_pages": lambda: list(client.create_query(TABLE).where("Value eq 1")),
        "table_execute_batch": lambda: client.get_table_reference(TABLE).execute_batch(batch()),
        "bulk_insert": lambda: client.bulk_insert(TABLE, [entity(str(n)) for n in range(5)]),
        "count_entities": lambda: client.count_entities(TABLE),
        "delete_entities": lambda: client.delete_entities(TABLE, "Value eq 1"),
        "get_service_properties": lambda: client.get_service_properties(),
        "set_service_properties": lambda: client.set_service_properties(ServiceProperties(cors=[])),
        "get_table_acl": lambda: client.get_table_acl(TABLE),
        "set_table_acl": lambda: client.set_table_acl(TABLE, {"read": AccessPolicy(permission="r")}),
        "context_save_changes": context_save,
    }


SYNC_NAMES = list(sync_operations(object()))  # type: ignore[arg-type]  # the names only


#: The operations also run against the endless header block (every one against the trickle).
ENDLESS_SAMPLE = ("get_entity", "query_pages", "table_execute_batch", "bulk_insert", "context_save_changes")


def cases(names: list[str]) -> list[Any]:
    """(fault, operation): every operation with the trickle, :data:`ENDLESS_SAMPLE` with the endless block."""
    return [pytest.param(Fault.TRICKLE_HEADERS, name, id=f"trickle-{name}") for name in names] + [
        pytest.param(Fault.ENDLESS_HEADERS, name, id=f"endless-{name}") for name in names if name in ENDLESS_SAMPLE
    ]


@pytest.mark.parametrize(("fault", "name"), cases(SYNC_NAMES), indirect=["fault"])
def test_sync_operation_ends_at_the_deadline(proxy: FaultProxy, name: str) -> None:
    with account(proxy).create_cloud_table_client(operation_deadline=DEADLINE) as client:
        assert_ends_at_the_deadline(name, sync_operations(client)[name])
    assert proxy.count() >= 1  # the request did meet the endless answer


@pytest.mark.parametrize("fault", [Fault.TRICKLE_HEADERS], indirect=True)
def test_sync_requests_through_the_session_are_bounded_too(proxy: FaultProxy) -> None:
    """Reading ``sender.session`` sends every request through ``Session.request``: the same bound."""
    from tablesdk import RequestsSender

    sender = RequestsSender()
    assert sender.session is not None
    with account(proxy).create_cloud_table_client(operation_deadline=DEADLINE, sender=sender) as client:
        assert_ends_at_the_deadline("get_entity through the session", lambda: client.get_entity(TABLE, "p", "r"))


def async_operations(client: Any) -> dict[str, Callable[[], Awaitable[Any]]]:
    async def query_pages() -> Any:
        return [row async for row in client.create_query(TABLE).where("Value eq 1")]

    async def list_tables() -> Any:
        return [name async for name in client.list_tables()]

    async def context_save() -> Any:
        context = client.get_table_service_context()
        context.add_object(TABLE, entity())
        return await context.save_changes()

    return {
        "create_table": lambda: client.create_table(TABLE),
        "delete_table": lambda: client.delete_table(TABLE),
        "table_exists": lambda: client.table_exists(TABLE),
        "list_tables": list_tables,
        "insert_entity": lambda: client.insert_entity(TABLE, entity()),
        "get_entity": lambda: client.get_entity(TABLE, "p", "r"),
        "update_entity": lambda: client.update_entity(TABLE, entity(), mode="replace", etag="*"),
        "merge_entity": lambda: client.update_entity(TABLE, entity(), mode="merge", etag="*"),
        "upsert_entity": lambda: client.upsert_entity(TABLE, entity()),
        "delete_entity": lambda: client.delete_entity(TABLE, partition_key="p", row_key="r", etag="*"),
        "query_pages": query_pages,
        "table_execute_batch": lambda: client.get_table_reference(TABLE).execute_batch(batch()),
        "bulk_insert": lambda: client.bulk_insert(TABLE, [entity(str(n)) for n in range(5)]),
        "count_entities": lambda: client.count_entities(TABLE),
        "delete_entities": lambda: client.delete_entities(TABLE, "Value eq 1"),
        "get_service_properties": lambda: client.get_service_properties(),
        "set_service_properties": lambda: client.set_service_properties(ServiceProperties(cors=[])),
        "get_table_acl": lambda: client.get_table_acl(TABLE),
        "set_table_acl": lambda: client.set_table_acl(TABLE, {"read": AccessPolicy(permission="r")}),
        "context_save_changes": context_save,
    }


ASYNC_NAMES = list(async_operations(object()))


@pytest.mark.parametrize(("fault", "name"), cases(ASYNC_NAMES), indirect=["fault"])
def test_async_operation_ends_at_the_deadline(proxy: FaultProxy, name: str) -> None:
    pytest.importorskip("aiohttp")
    from tablesdk.aio import AsyncCloudTableClient

    async def call() -> Any:
        async with AsyncCloudTableClient(account(proxy), operation_deadline=DEADLINE) as client:
            return await async_operations(client)[name]()

    assert_ends_at_the_deadline(f"async {name}", lambda: asyncio.run(call()))


def test_the_read_timeout_alone_bounds_the_header_block(proxy: FaultProxy) -> None:
    """No deadline: each byte comes well inside the read timeout, the block never ends; the read
    timeout bounds the answer as a whole, so the attempt ends."""
    with account(proxy).create_cloud_table_client(timeout=(5.0, READ_TIMEOUT), retry_policy=NoRetry()) as client:
        error, _, elapsed = run_bounded(lambda: client.get_entity(TABLE, "p", "r"))
    assert isinstance(error, RequestTimeoutError), repr(error)
    assert "client timeout" in str(error)
    assert elapsed < READ_TIMEOUT + MARGIN, f"took {elapsed:.1f} s with a read timeout of {READ_TIMEOUT} s"


def test_async_the_read_timeout_alone_bounds_the_header_block(proxy: FaultProxy) -> None:
    pytest.importorskip("aiohttp")
    from tablesdk.aio import AsyncCloudTableClient

    async def call() -> Any:
        async with AsyncCloudTableClient(account(proxy), timeout=(5.0, READ_TIMEOUT), retry_policy=NoRetry()) as client:
            return await client.get_entity(TABLE, "p", "r")

    error, _, elapsed = run_bounded(lambda: asyncio.run(call()))
    assert isinstance(error, RequestTimeoutError), repr(error)
    assert elapsed < READ_TIMEOUT + MARGIN, f"took {elapsed:.1f} s with a read timeout of {READ_TIMEOUT} s"


# ---------------------------------------------------------------- the command line and Dask


def cli_commands(folder: Path) -> dict[str, list[str]]:
    source = folder / "in.jsonl"
    source.write_text('{"PartitionKey": "p", "RowKey": "r", "Value": 1}\n', encoding="utf-8")
    return {
        "tables list": ["tables", "list"],
        "count": ["count", TABLE],
        "export": ["export", TABLE, str(folder / "out.jsonl")],
        "import": ["import", str(source), TABLE],
        "get": ["get", TABLE, "p", "r"],
    }


@pytest.mark.parametrize(
    ("fault", "command"),
    [pytest.param(Fault.TRICKLE_HEADERS, c, id=f"trickle-{c}") for c in ("tables list", "count", "export", "import", "get")]
    + [pytest.param(Fault.ENDLESS_HEADERS, "export", id="endless-export")],
    indirect=["fault"],
)
def test_cli_command_ends_at_the_deadline(proxy: FaultProxy, tmp_path: Path, command: str) -> None:
    pytest.importorskip("click")
    argv = [sys.executable, "-m", "tablesdk", "--connection-string", connection_string(proxy),
            "--deadline", str(DEADLINE), *cli_commands(tmp_path)[command]]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=HANG, env=env, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"tablesdk {command} still waited after {HANG} s with --deadline {DEADLINE}: it hangs")
    elapsed = time.monotonic() - started
    assert done.returncode != 0, done.stdout
    assert "deadline of" in done.stderr, done.stderr
    # The interpreter's start-up is in the time measured: the margin covers it.
    assert elapsed < DEADLINE + MARGIN + 5, f"tablesdk {command} took {elapsed:.1f} s with --deadline {DEADLINE}"


def test_dask_read_table_ends_at_the_deadline(proxy: FaultProxy) -> None:
    pytest.importorskip("dask.dataframe")
    from tablesdk.dask import read_table

    assert_ends_at_the_deadline(
        "dask read_table", lambda: read_table(connection_string(proxy), TABLE, operation_deadline=DEADLINE)
    )


def test_dask_partitions_end_at_the_deadline(proxy: FaultProxy) -> None:
    """Nothing read while the frame is built (boundaries and schema given): each partition's
    pages are bounded when it is computed."""
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("dask.dataframe")
    from tablesdk.dask import read_table

    schema = pa.schema([("PartitionKey", pa.string()), ("RowKey", pa.string()), ("Value", pa.int32())])
    frame = read_table(
        connection_string(proxy), TABLE, boundaries=["m"], schema=schema, operation_deadline=DEADLINE
    )
    assert proxy.count() == 0
    assert_ends_at_the_deadline("dask compute", lambda: frame.compute(scheduler="sync"))


@pytest.mark.parametrize("fault", [Fault.TRICKLE_HEADERS], indirect=True)
def test_dask_read_table_refuses_a_deadline_that_is_no_number_of_seconds(proxy: FaultProxy) -> None:
    pytest.importorskip("dask.dataframe")
    from tablesdk.dask import read_table

    with pytest.raises(ValueError, match="operation_deadline must be > 0 seconds"):
        read_table(connection_string(proxy), TABLE, operation_deadline=0)
    assert proxy.count() == 0  # refused before anything was sent
