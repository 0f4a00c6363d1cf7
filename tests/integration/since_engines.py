"""Incremental reads through the engines that read elsewhere and may read again (Spark, Ray, Polars),
one set of scenarios for all three: each engine gives a :data:`Engine`, which plans a read of a
:class:`~tablesdk.ChangeWindow` and returns what runs it (called twice: the read runs again).

On the bundled emulator the Timestamps come from a :class:`TickClock` the test sets, so rows can
differ in the seventh digit only, and the writers run inside the read: the emulator's query
handler runs them when the request of a later PartitionKey range arrives, before answering it
(:func:`writes_during_the_range_read`). On Azurite the writers run when a proxy holds that
request (:func:`writes_while_the_proxy_holds`), and the expectations follow the Timestamps the
service gave. Rows are ``(PartitionKey, RowKey, V)``: every version written has its own V.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import unquote

from faults import Fault, FaultProxy
from test_incremental_reads import TICK, TickClock

from tablesdk import ChangeWindow, CloudStorageAccount, CloudTableClient, DynamicEntity, Watermark
from tablesdk._queries._watermark import datetime_of_ticks, ticks_of
from tablesdk.devstore import DevStore

Row = tuple[str, str, int]
#: ``engine(connection_string, table, window, boundaries)``: the planned read, as a function that runs it.
Engine = Callable[[str, str, ChangeWindow, list[str]], Callable[[], list[Row]]]
#: The ranges every scenario reads: a, b and c-d (the writers write behind the first and ahead of the last).
BOUNDARIES = ["b", "c"]
#: What a request of the last range has in its ``$filter``.
LAST_RANGE = "PartitionKey ge 'c'"


def rows_of(table: Any) -> list[Row]:
    """``(PartitionKey, RowKey, V)`` of a ``pyarrow.Table``, sorted."""
    return sorted(zip(table.column("PartitionKey").to_pylist(), table.column("RowKey").to_pylist(),
                      table.column("V").to_pylist()))


@contextmanager
def ticking_store() -> Iterator[tuple[DevStore, TickClock, CloudTableClient]]:
    """A bundled emulator whose Timestamps the test sets, with a client and the table ``ticks``."""
    clock = TickClock()
    with DevStore(port=0, clock_ns=clock) as store:
        with CloudStorageAccount.parse(store.connection_string).create_cloud_table_client() as client:
            client.create_table("ticks")
            yield store, clock, client


@contextmanager
def writes_during_the_range_read(store: DevStore, marker: str, step: Callable[[], None]) -> Iterator[threading.Event]:
    """Run ``step`` once, in the emulator, when the first query whose ``$filter`` holds ``marker``
    arrives, before it is answered; the event is set once the step ran."""
    service = store.service
    original = service.handle
    ran = threading.Event()
    lock = threading.Lock()
    errors: list[BaseException] = []

    def handle(request: Any) -> Any:
        if request.method == "GET" and marker in unquote(request.raw_query):
            with lock:
                if not ran.is_set():
                    try:
                        step()
                    except BaseException as exc:  # noqa: BLE001 - raised in the test
                        errors.append(exc)
                    ran.set()
        return original(request)

    service.handle = handle  # type: ignore[method-assign]
    try:
        yield ran
    finally:
        service.handle = original  # type: ignore[method-assign]
    if errors:
        raise errors[0]


@contextmanager
def writes_while_the_proxy_holds(proxy: FaultProxy, step: Callable[[], None]) -> Iterator[threading.Event]:
    """Run ``step`` in a thread once ``proxy`` holds the first query of the last range (the step
    writes to the service directly); the event is set once it ran. The read waits for the rule's
    delay, so the step runs while the read does."""
    rule = proxy.inject(Fault.DELAY_BEFORE_FORWARD, method="GET", path=r"PartitionKey(%20|\+| )ge(%20|\+| )(%27|')c",
                        delay=1.0)
    ran = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        if rule.received.wait(120):
            try:
                step()
            except BaseException as exc:  # noqa: BLE001 - raised in the test
                errors.append(exc)
        ran.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield ran
    finally:
        thread.join(150)
    if errors:
        raise errors[0]


def upsert(client: CloudTableClient, table: str, pk: str, rk: str, v: int) -> None:
    client.upsert_entity(table, DynamicEntity(pk, rk, V=v), mode="replace")


# ---------------------------------------------------------------- scenarios on the emulator


def seventh_digit(engine: Engine) -> None:
    """Rows a tick apart: the one at the floor is out, the one at ``until`` in, the one a tick above
    it comes with the next window; a six-digit floor would have let the row at it in again."""
    with ticking_store() as (store, clock, client):
        for offset, rk in enumerate(["at", "after", "edge", "beyond"]):
            clock.ticks = TICK + offset
            upsert(client, "ticks", "p", rk, offset)
        assert {e.RowKey: ticks_of(e.Timestamp) for e in client.create_query("ticks")}["beyond"] == TICK + 3
        window = ChangeWindow(Watermark.at(datetime_of_ticks(TICK)), until=datetime_of_ticks(TICK + 2))
        assert engine(store.connection_string, "ticks", window, BOUNDARIES)() == [("p", "after", 1), ("p", "edge", 2)]
        following = ChangeWindow(window.next_watermark, until=datetime_of_ticks(TICK + 9))
        assert window.next_watermark.floor_ticks == TICK + 2
        assert engine(store.connection_string, "ticks", following, BOUNDARIES)() == [("p", "beyond", 3)]
        one_below = ChangeWindow(Watermark.at(datetime_of_ticks(TICK - 1)), until=datetime_of_ticks(TICK))
        assert engine(store.connection_string, "ticks", one_below, BOUNDARIES)() == [("p", "at", 0)]


def writers_during_the_read(engine: Engine) -> None:
    """Writes that commit while the ranges are read (behind the read, and ahead of it in a range read
    later) are not in this window, whatever order the ranges run in; the next window has each once.
    The read run again returns the same rows, but for the one updated meanwhile, and none written."""
    with ticking_store() as (store, clock, client):
        for offset, pk in enumerate("abcd"):
            clock.ticks = TICK + 10 + offset
            upsert(client, "ticks", pk, "1", 0)

        def write() -> None:
            clock.ticks = TICK + 30
            upsert(client, "ticks", "a", "1", 1)  # an update of a row the read may have delivered
            upsert(client, "ticks", "d", "2", 2)  # a new row in the range being read
            upsert(client, "ticks", "b", "2", 3)  # a new row behind

        window = ChangeWindow(Watermark.start(), until=datetime_of_ticks(TICK + 20))
        run = engine(store.connection_string, "ticks", window, BOUNDARIES)
        with writes_during_the_range_read(store, LAST_RANGE, write) as ran:
            first = run()
        assert ran.is_set()
        unchanged = [("b", "1", 0), ("c", "1", 0), ("d", "1", 0)]
        # a/1 is in it as it was if its range was read before the write, else not at all (its new version is later).
        assert first in (unchanged, [("a", "1", 0), *unchanged])
        # The same window again: a/1's version in it is gone (or, from an engine that keeps a result, as before).
        assert run() in (unchanged, first)
        following = ChangeWindow(window.next_watermark, until=datetime_of_ticks(TICK + 40))
        assert engine(store.connection_string, "ticks", following, BOUNDARIES)() == [
            ("a", "1", 1), ("b", "2", 3), ("d", "2", 2)]
        last = ChangeWindow(following.next_watermark, until=datetime_of_ticks(TICK + 50))
        assert engine(store.connection_string, "ticks", last, BOUNDARIES)() == []


def overlap_and_seen_rows(engine: Engine) -> None:
    """A window that starts at a serial read's watermark: the rows that read delivered inside its
    overlap come again from the service and are dropped by keys + ETag; a new version of one is not."""
    with ticking_store() as (store, clock, client):
        for ticks, pk, rk in ((TICK, "a", "old"), (TICK + 50, "b", "1"), (TICK + 55, "c", "1")):
            clock.ticks = ticks
            upsert(client, "ticks", pk, rk, 0)
        serial = client.create_query("ticks").to_arrow(since=Watermark.start(overlap=timedelta(microseconds=1)))
        mark = Watermark.of(serial)
        assert mark.floor_ticks == TICK + 45 and {(pk, rk) for pk, rk, _ in mark.seen} == {("b", "1"), ("c", "1")}
        clock.ticks = TICK + 56
        upsert(client, "ticks", "c", "1", 1)
        window = ChangeWindow(mark, until=datetime_of_ticks(TICK + 60))
        assert engine(store.connection_string, "ticks", window, BOUNDARIES)() == [("c", "1", 1)]
        assert window.next_watermark.floor_ticks == TICK + 60 and window.next_watermark.seen == frozenset()


def on_the_emulator(engine: Engine) -> None:
    """Every scenario of the emulator."""
    seventh_digit(engine)
    writers_during_the_read(engine)
    overlap_and_seen_rows(engine)


# ---------------------------------------------------------------- Azurite


def on_azurite(engine: Engine, proxy: FaultProxy, connection_string: str, client: CloudTableClient, table: str) -> None:
    """Azurite's Timestamps (milliseconds, its own clock): a window ending at the newest row read
    before it, writes while a range is held by the proxy, then the next window; each version of
    each row is delivered once, in the window its Timestamp falls in."""
    for pk in "abcd":
        upsert(client, table, pk, "1", 0)
    newest = max(ticks_of(e.Timestamp) for e in client.create_query(table))
    window = ChangeWindow(Watermark.start(), until=datetime_of_ticks(newest))

    def write() -> None:
        upsert(client, table, "a", "1", 1)
        upsert(client, table, "d", "2", 2)

    run = engine(proxy.connection_string(connection_string), table, window, BOUNDARIES)
    with writes_while_the_proxy_holds(proxy, write) as ran:
        first = run()
    assert ran.is_set()
    stamps = {(e.PartitionKey, e.RowKey): ticks_of(e.Timestamp) for e in client.create_query(table)}
    assert stamps[("a", "1")] > newest and stamps[("d", "2")] > newest
    unchanged = [("b", "1", 0), ("c", "1", 0), ("d", "1", 0)]
    assert first in (unchanged, [("a", "1", 0), *unchanged])
    following = ChangeWindow(window.next_watermark, until=datetime_of_ticks(max(stamps.values())))
    assert engine(connection_string, table, following, BOUNDARIES)() == [("a", "1", 1), ("d", "2", 2)]
    assert engine(connection_string, table, ChangeWindow(following.next_watermark,
                                                         until=datetime_of_ticks(max(stamps.values()) + 1)),
                  BOUNDARIES)() == []
