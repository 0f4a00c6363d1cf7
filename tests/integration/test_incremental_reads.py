"""Incremental reads (``since=``): the watermark's 100 ns tick is exact, and writers that commit
while a read runs (on partitions read already and partitions still to come) are delivered by
this read or the next, each version once. The writers are driven by events between pages."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, Watermark
from tablesdk._queries._watermark import DEFAULT_OVERLAP, datetime_of_ticks, ticks_of
from tablesdk.devstore import DevStore

pytestmark = pytest.mark.integration

TICK = 17_672_435_051_234_567  # 2026-01-01T04:58:25.1234567Z in 100 ns ticks since the Unix epoch


class TickClock:
    """The emulator's Timestamp source, set by the test (nanoseconds since the Unix epoch)."""

    def __init__(self) -> None:
        self.ticks = TICK

    def __call__(self) -> int:
        return self.ticks * 100


@pytest.fixture
def ticking() -> Iterator[tuple[TickClock, CloudTableClient]]:
    clock = TickClock()
    with DevStore(port=0, clock_ns=clock) as store:
        account = CloudStorageAccount.parse(store.connection_string)
        with account.create_cloud_table_client() as client:
            client.create_table("ticks")
            yield clock, client


def _keys(table: Any) -> list[tuple[str, str]]:
    return list(zip(table.column("PartitionKey").to_pylist(), table.column("RowKey").to_pylist()))


def test_a_row_at_the_watermark_tick_is_excluded_and_one_tick_later_included(
    ticking: tuple[TickClock, CloudTableClient],
) -> None:
    clock, client = ticking
    clock.ticks = TICK
    client.insert_entity("ticks", DynamicEntity("p", "at"))
    clock.ticks = TICK + 1
    client.insert_entity("ticks", DynamicEntity("p", "after"))
    query = client.create_query("ticks")
    stamps = {e.RowKey: ticks_of(e.Timestamp) for e in query}
    assert stamps == {"at": TICK, "after": TICK + 1}  # the seventh digit differs only

    for since in (Watermark.at(datetime_of_ticks(TICK)), Watermark.at("2026-01-01T04:58:25.1234567Z"),
                  Watermark.at(datetime_of_ticks(TICK), overlap=timedelta(0))):
        assert _keys(query.to_arrow(since=since)) == [("p", "after")]
        assert list(query.to_pandas(since=since)["RowKey"]) == ["after"]
        assert [e.RowKey for e in query.changes(since)] == ["after"]
        assert sum(batch.num_rows for batch in query.iter_arrow_batches(since=since)) == 1
    one_earlier = Watermark.at(datetime_of_ticks(TICK - 1))
    assert sorted(_keys(query.to_arrow(since=one_earlier))) == [("p", "after"), ("p", "at")]
    # What a six-digit datetime gives (the floor rounded down a tick): the row at the watermark again.
    assert len(query.to_arrow(since=Watermark.at(datetime_of_ticks(TICK - 7)))) == 2


def test_the_next_watermark_comes_with_each_result(ticking: tuple[TickClock, CloudTableClient]) -> None:
    clock, client = ticking
    query = client.create_query("ticks")
    for row in range(3):
        clock.ticks = TICK + 10 * row
        client.insert_entity("ticks", DynamicEntity("p", f"r{row}"))
    since = Watermark.at(datetime_of_ticks(TICK), overlap=timedelta(microseconds=1))  # 10 ticks
    table = query.to_arrow(since=since)
    mark = Watermark.of(table)
    assert mark.floor_ticks == TICK + 10 and {rk for _, rk, _ in mark.seen} == {"r2"}
    assert Watermark.of(query.to_pandas(since=since)) == mark
    batches = query.iter_arrow_batches(since=since)
    assert sum(batch.num_rows for batch in batches) == 2
    assert getattr(batches, "watermark") == mark
    changes = query.changes(since)
    assert len(list(changes)) == 2 and changes.watermark == mark
    assert Watermark.from_string(mark.to_string()) == mark
    # Nothing changed since: nothing read, and the watermark stays.
    again = query.to_arrow(since=mark)
    assert again.num_rows == 0 and Watermark.of(again) == mark
    assert ETAG not in again.schema.names and ETAG in query.to_arrow(since=mark, with_etag=True).schema.names


ETAG = "odata.etag"


class Writer:
    """A writer thread that runs one step each time the reader signals, and says when it is done."""

    def __init__(self, steps: list[Callable[[], None]]) -> None:
        self._steps = steps
        self._go = threading.Event()
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for step in self._steps:
            self._go.wait()
            self._go.clear()
            try:
                step()
            except BaseException as exc:  # noqa: BLE001 - raised in the reader
                self._error = exc
            self._done.set()

    def step(self) -> None:
        self._done.clear()
        self._go.set()
        assert self._done.wait(60), "the writer did not finish its step"
        if self._error is not None:
            raise self._error

    def join(self) -> None:
        self._thread.join(60)


def _overlaps(target: str) -> list[timedelta]:
    # On the emulator the Timestamp comes from this machine's clock, so a zero overlap is exact; Azurite's
    # has milliseconds only, which the default overlap covers.
    return [timedelta(0), DEFAULT_OVERLAP] if target.startswith("devstore") else [DEFAULT_OVERLAP]


# Azurite's Timestamps have milliseconds only: a zero overlap is exact on the emulator alone (not generated
# for Azurite, rather than skipped there).
@pytest.mark.parametrize(("target", "overlap_kind"), [
    (target, kind) for target in ("azurite-json", "devstore-json", "devstore-atom") for kind in ("zero", "default")
    if kind == "default" or target.startswith("devstore")
])
def test_writes_during_a_read_are_delivered_once_by_it_or_the_next(
    client: CloudTableClient, table: str, target: str, overlap_kind: str,
) -> None:
    overlap = timedelta(0) if overlap_kind == "zero" else DEFAULT_OVERLAP
    assert overlap in _overlaps(target)
    for pk in ("a", "b", "c", "d"):
        for rk in ("1", "2"):
            client.insert_entity(table, DynamicEntity(pk, rk, V=0))
    query = client.create_query(table).page_size(1).read_ahead(False)

    def upsert(pk: str, rk: str, value: int) -> Callable[[], None]:
        return lambda: client.upsert_entity(table, DynamicEntity(pk, rk, V=value), mode="replace")

    # A page a row. After the second page (a/2): a new row and an update on partition a (read already)
    # and a new row on partition d (read later); after the fifth page (c/1): an update on b (read already).
    writer = Writer([
        lambda: (upsert("a", "3", 1)(), upsert("a", "2", 1)(), upsert("d", "9", 1)()) and None,
        upsert("b", "1", 2),
    ])
    delivered: list[tuple[str, str, int]] = []
    batches = query.iter_arrow_batches(since=Watermark.start(overlap=overlap), with_etag=True)
    for index, batch in enumerate(batches):
        delivered += zip(batch.column("PartitionKey").to_pylist(), batch.column("RowKey").to_pylist(),
                         batch.column("V").to_pylist())
        if index in (1, 4):
            writer.step()
    writer.join()
    first = batches.watermark
    assert ("d", "9", 1) in delivered  # its partition came after the write
    assert ("a", "3", 1) not in delivered and ("b", "1", 2) not in delivered

    second = query.to_arrow(since=first)
    rows = sorted(zip(second.column("PartitionKey").to_pylist(), second.column("RowKey").to_pylist(),
                      second.column("V").to_pylist()))
    assert rows == [("a", "2", 1), ("a", "3", 1), ("b", "1", 2)]  # the writes behind the scan, once: nothing else
    third = query.to_arrow(since=Watermark.of(second))
    assert third.num_rows == 0

    # Every version of every row, delivered once across the reads, is the table as it is now.
    final = {(pk, rk): v for pk, rk, v in [*delivered, *rows]}
    now = {(e.PartitionKey, e.RowKey): e["V"] for e in client.create_query(table)}
    assert final == now


def test_an_arrow_table_without_the_keys_cannot_be_read_incrementally(client: CloudTableClient, table: str) -> None:
    from tablesdk import TableValidationError

    schema = pa.schema([pa.field("V", pa.int32())])
    with pytest.raises(TableValidationError, match="Timestamp"):
        client.create_query(table).to_arrow(schema=schema, since=Watermark.start())


@pytest.mark.parametrize("target", ["azurite-json", "devstore-json"])  # the Dask reader reads JSON
def test_dask_partitions_read_the_changes_and_the_next_watermark_skips_them(
    client: CloudTableClient, table: str, connection_string: str, target: str,
) -> None:
    import dask
    from datetime import datetime, timezone

    from tablesdk import next_watermark
    from tablesdk.dask import read_table

    for pk in ("a", "b", "c", "d"):
        client.insert_entity(table, DynamicEntity(pk, "1", V=0))
    start = Watermark.start()
    with dask.config.set(scheduler="sync"):
        started = datetime.now(timezone.utc)
        first = read_table(connection_string, table, boundaries=["b", "c"], since=start).compute()
        assert sorted(first.index) == ["a", "b", "c", "d"] and ETAG in first.columns
        mark = next_watermark(start, first, started=started)
        assert len(mark.seen) == 4
        assert len(read_table(connection_string, table, boundaries=["b", "c"], since=mark).compute()) == 0
        client.upsert_entity(table, DynamicEntity("c", "1", V=1), mode="replace")
        started = datetime.now(timezone.utc)
        second = read_table(connection_string, table, boundaries=["b", "c"], since=mark, columns=["V"]).compute()
        assert list(second.index) == ["c"] and list(second["V"]) == [1]
        after = next_watermark(mark, second, started=started)
        assert len(read_table(connection_string, table, since=after).compute()) == 0
        # Every version now in the table is seen (the old version of c too, until the floor passes it).
        serial = next_watermark(start, client.create_query(table).to_arrow(since=start, with_etag=True),
                                started=started)
        assert serial.seen <= after.seen and len(after.seen - serial.seen) == 1


@pytest.mark.parametrize("target", ["azurite-json", "devstore-json"])  # the Dask reader reads JSON
def test_dask_writes_between_partitions_are_read_once(
    client: CloudTableClient, table: str, connection_string: str, target: str,
) -> None:
    import dask
    from dask.callbacks import Callback
    from datetime import datetime, timezone

    from tablesdk import next_watermark
    from tablesdk.dask import read_table

    for pk in ("a", "b", "c"):
        client.insert_entity(table, DynamicEntity(pk, "1", V=0))
    # Dask picks the order of the ranges: the writer writes behind the first range read and ahead of it.
    order: list[str] = []

    def write_behind_and_ahead() -> None:
        behind = order[0]
        ahead = next(pk for pk in ("a", "b", "c") if pk != behind)
        client.insert_entity(table, DynamicEntity(behind, "2", V=1))
        client.upsert_entity(table, DynamicEntity(ahead, "2", V=1), mode="replace")
        order.append(ahead)

    writer = Writer([write_behind_and_ahead])
    read_tasks: list[object] = []

    def after_task(key: object, result: Any, dsk: object, state: object, worker_id: object) -> None:
        if "tablesdk-read" in str(key):
            read_tasks.append(key)
            if len(read_tasks) == 1:  # the first range is read
                order.append(str(result.index[0]))
                writer.step()

    start = Watermark.start()
    with dask.config.set(scheduler="sync"), Callback(posttask=after_task):
        started = datetime.now(timezone.utc)
        first = read_table(connection_string, table, boundaries=["b", "c"], since=start).compute()
    writer.join()
    assert len(read_tasks) == 3
    behind, ahead = order
    delivered = sorted(zip(first.index, first["RowKey"], first["V"]))
    assert (ahead, "2", 1) in delivered and (behind, "2", 1) not in delivered
    mark = next_watermark(start, first, started=started)
    with dask.config.set(scheduler="sync"):
        second = read_table(connection_string, table, boundaries=["b", "c"], since=mark).compute()
    assert sorted(zip(second.index, second["RowKey"], second["V"])) == [(behind, "2", 1)]
