"""Watermarks and change windows given edge inputs: pandas Timestamps (nanoseconds), texts that
are not a watermark's, the ends of the calendar."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tablesdk import ChangeWindow, TableValidationError, Watermark, since_filter


def test_a_pandas_timestamp_keeps_its_seventh_digit() -> None:
    pd = pytest.importorskip("pandas")
    # The newest Timestamp of a frame read with to_pandas(): nanoseconds, the service's 100 ns digit in them.
    newest = pd.Timestamp("2026-01-02T03:04:05.1234567Z")
    assert str(since_filter(Watermark.at(newest))) == "Timestamp gt datetime'2026-01-02T03:04:05.1234567Z'"
    assert Watermark.at(newest) == Watermark.at("2026-01-02T03:04:05.1234567Z")
    window = ChangeWindow(Watermark.start(), until=pd.Timestamp("2026-01-03T00:00:00.0000003"))  # naive: UTC
    assert window.until_ticks == ChangeWindow(Watermark.start(), until=datetime(2026, 1, 3, tzinfo=timezone.utc)).until_ticks + 3


@pytest.mark.parametrize("overlap", ["1e300", "-1e300", "Infinity"])
def test_a_watermark_text_with_an_impossible_overlap_is_a_validation_error(overlap: str) -> None:
    text = f'{{"version":1,"floor":null,"overlap_seconds":{overlap},"seen":[]}}'
    with pytest.raises(TableValidationError) as exc:
        Watermark.from_string(text)
    assert exc.value.field in ("since", "overlap")
    with pytest.raises(TableValidationError):
        ChangeWindow.from_string(f'{{"since":{text},"until":"2026-01-01T00:00:00Z"}}')


def test_a_default_window_never_ends_before_the_calendar() -> None:
    window = ChangeWindow(Watermark.start(overlap=timedelta(days=999_999)))
    assert window.until.year == 1
    assert ChangeWindow.from_string(window.to_string()) == window


def test_next_watermark_refuses_a_naive_start() -> None:
    # datetime.now() is this machine's local time; read as UTC it moves the start by the zone's
    # offset, and a start later than the read's lets the next floor pass rows committed meanwhile.
    pa = pytest.importorskip("pyarrow")
    from tablesdk import next_watermark

    rows = pa.table({"PartitionKey": pa.array([], pa.string()), "RowKey": pa.array([], pa.string()),
                     "Timestamp": pa.array([], pa.timestamp("ns", "UTC")), "odata.etag": pa.array([], pa.string())})
    with pytest.raises(TableValidationError) as exc:
        next_watermark(Watermark.start(), rows, started=datetime.now())
    assert exc.value.field == "started" and "timezone.utc" in str(exc.value)
    assert next_watermark(Watermark.start(), rows, started=datetime.now(timezone.utc)) == Watermark.start()


def test_a_window_cannot_end_in_the_future() -> None:
    # A row written after the read with a Timestamp at or below until is missed by the read, and its
    # next watermark's floor (until) skips it for good. datetime.now() (naive: read as UTC) is the
    # usual way to get there east of Greenwich.
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    with pytest.raises(TableValidationError) as exc:
        ChangeWindow(Watermark.start(), until=later)
    assert exc.value.field == "until" and "timezone.utc" in str(exc.value)
    now = ChangeWindow(Watermark.start(), until=datetime.now(timezone.utc))
    assert ChangeWindow.from_string(now.to_string()) == now


def test_a_stored_window_is_read_back_on_a_clock_that_is_behind() -> None:
    # A Spark worker's clock may be behind the driver's: the text of a window is taken as it is.
    ahead = ChangeWindow(Watermark.start(), until=datetime(2026, 1, 1, tzinfo=timezone.utc))
    text = ahead.to_string().replace("2026-01-01T00:00:00.0000000Z", "2999-01-01T00:00:00.0000000Z")
    assert ChangeWindow.from_string(text).until.year == 2999


def test_a_text_that_is_not_a_watermark_is_not_echoed_whole() -> None:
    # A connection string given where a watermark goes (an argument mixed up) must not carry its key
    # into the error.
    secret = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0LWtleS1ieXRlcw=="
    for read in (Watermark.at, Watermark.from_string):
        with pytest.raises(TableValidationError) as exc:
            read(secret)
        assert "c2VjcmV0" not in str(exc.value) and exc.value.field == "since"
    with pytest.raises(TableValidationError) as exc:
        ChangeWindow.from_string(f'{{"since":"{secret}","until":"2026-01-01T00:00:00Z"}}')
    assert "c2VjcmV0" not in str(exc.value)


@pytest.mark.parametrize("text", ["AccountKey=c2VjcmV0LWtleS1ieXRlcw==", "sv=2021&sig=c2VjcmV0"])
def test_short_secrets_are_not_echoed_either(text: str) -> None:
    with pytest.raises(TableValidationError) as exc:
        Watermark.at(text)
    assert "c2VjcmV0" not in str(exc.value)
    with pytest.raises(TableValidationError) as typo:
        Watermark.at("2024-13-01T00:00:00Z")
    assert "2024-13-01T00:00:00Z" in str(typo.value)   # a mistyped date is shown, to be fixed


def test_a_validation_error_crosses_a_process_boundary() -> None:
    # Dask, Ray and Spark hand a task's error back to the driver by pickle.
    import pickle

    error = TableValidationError("since", "a limit", "a detail")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is TableValidationError and str(copy) == str(error)
    assert (copy.field, copy.limit) == ("since", "a limit")


def test_a_schema_conflict_crosses_a_process_boundary() -> None:
    # Raised inside a range read, which runs in a Dask, Ray or Spark task.
    import pickle

    from tablesdk import SchemaConflictError

    error = SchemaConflictError("V holds Int32 and String", property_name="V", types=("Edm.Int32", "Edm.String"),
                                keys=("a", "1"))
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is SchemaConflictError and str(copy) == str(error)
    assert (copy.property_name, copy.types, copy.keys) == ("V", ("Edm.Int32", "Edm.String"), ("a", "1"))


def test_changes_of_a_resolve_query_are_refused_before_sending() -> None:
    # A resolver's results keep no ETag or Timestamp, which telling versions apart needs.
    import asyncio

    from tablesdk import CloudStorageAccount, MockSender

    def never(request: object) -> object:
        raise AssertionError("sent")

    account = CloudStorageAccount.parse("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5")
    client = account.create_cloud_table_client(sender=MockSender(never))  # type: ignore[arg-type]
    query = client.create_query("Orders").resolve(lambda pk, rk, ts, props, etag: rk)
    with pytest.raises(TypeError, match="resolve"):
        query.changes(Watermark.start())

    class Never:
        async def send(self, request: object, timeout: object) -> object:
            raise AssertionError("sent")

        async def close(self) -> None:
            pass

    async def main() -> None:
        async with account.create_async_cloud_table_client(sender=Never()) as aclient:  # type: ignore[arg-type]
            aclient.create_query("Orders").resolve(lambda pk, rk, ts, props, etag: rk).changes(Watermark.start())

    with pytest.raises(TypeError, match="resolve"):
        asyncio.run(main())
