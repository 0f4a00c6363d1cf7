"""Watermarks of incremental reads: the filter keeps the seventh digit, the text form round-trips,
and the next watermark's floor and seen rows follow the documented rules."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tablesdk import EdmDateTime, TableValidationError, Watermark, since_filter
from tablesdk._queries._watermark import ChangeTracker, datetime_of_ticks, ticks_of

T = ticks_of(EdmDateTime(2026, 1, 2, 3, 4, 5, 123456, timezone.utc, ticks_remainder=7))


def test_filter_literal_carries_the_seventh_digit() -> None:
    since = Watermark.at("2026-01-02T03:04:05.1234567Z")
    condition = since_filter(since)
    assert condition is not None
    assert condition.render() == "Timestamp gt datetime'2026-01-02T03:04:05.1234567Z'"
    assert since_filter(Watermark.start()) is None
    assert since_filter(None) is None


def test_ticks_round_trip_at_100_ns() -> None:
    value = datetime_of_ticks(T)
    assert value.ticks_remainder == 7 and value.microsecond == 123456
    assert ticks_of(value) == T
    assert ticks_of(datetime_of_ticks(T + 1)) == T + 1
    assert datetime_of_ticks(T + 3).ticks_remainder == 0  # carries into the microseconds
    assert ticks_of(datetime(1601, 1, 1, tzinfo=timezone.utc)) < 0


def test_text_form_round_trips_seen_rows_and_overlap() -> None:
    mark = Watermark(datetime_of_ticks(T), overlap=timedelta(seconds=2.5),
                     seen=[("ünï 'pk'", "r\"1\"", 'W/"datetime\'x\'"'), ("p", "", "e")])
    again = Watermark.from_string(mark.to_string())
    assert again == mark
    assert again.floor_ticks == T and again.overlap == timedelta(seconds=2.5)
    assert Watermark.from_string(Watermark.start().to_string()) == Watermark.start()


def test_bare_timestamp_text_is_a_watermark_with_nothing_seen() -> None:
    mark = Watermark.from_string(" 2026-01-02T03:04:05.1234567Z ")
    assert mark.floor_ticks == T and mark.seen == frozenset()


@pytest.mark.parametrize("text", ["yesterday", '{"version": 1}', '{"version": 9, "floor": null}', "{"])
def test_bad_text_names_the_field(text: str) -> None:
    with pytest.raises(TableValidationError) as caught:
        Watermark.from_string(text)
    assert caught.value.field == "since"


def test_negative_overlap_is_refused() -> None:
    with pytest.raises(TableValidationError) as caught:
        Watermark.start(overlap=timedelta(seconds=-1))
    assert caught.value.field == "overlap"


def test_seen_rows_are_skipped_and_a_new_etag_is_not() -> None:
    since = Watermark(datetime_of_ticks(T), overlap=timedelta(0), seen=[("p", "r", "e1")])
    tracker = ChangeTracker(since, started_ticks=T + 1_000)
    assert tracker.keep("p", "r", "e1", T + 5) is False
    assert tracker.keep("p", "r", "e2", T + 6) is True
    assert tracker.keep("p", "s", "e1", T + 7) is True


def test_next_floor_is_overlap_below_the_newest_row_and_never_past_the_start() -> None:
    overlap = timedelta(microseconds=1)  # 10 ticks
    tracker = ChangeTracker(Watermark.start(overlap=overlap), started_ticks=T + 1_000)
    for index, ticks in enumerate((T + 100, T + 95, T + 80)):
        tracker.keep("p", f"r{index}", f"e{index}", ticks)
    mark = tracker.watermark()
    assert mark.floor_ticks == T + 90
    assert mark.seen == {("p", "r0", "e0"), ("p", "r1", "e1")}  # above the floor only
    assert mark.overlap == overlap

    # A read that began before its newest row was written (a long scan): the floor stays below its start.
    late = ChangeTracker(Watermark.start(overlap=overlap), started_ticks=T + 50)
    late.keep("p", "r", "e", T + 100)
    late.keep("q", "r", "e", T + 45)
    assert late.watermark().floor_ticks == T + 40
    assert late.watermark().seen == {("p", "r", "e"), ("q", "r", "e")}


def test_floor_never_moves_back_and_stays_when_nothing_is_read() -> None:
    since = Watermark(datetime_of_ticks(T), overlap=timedelta(seconds=1))
    assert ChangeTracker(since).watermark() == since
    tracker = ChangeTracker(since, started_ticks=T + 5)
    tracker.keep("p", "r", "e", T + 3)
    assert tracker.watermark().floor_ticks == T
    assert tracker.watermark().seen == {("p", "r", "e")}


def test_since_must_be_a_watermark() -> None:
    with pytest.raises(TypeError, match="Watermark"):
        since_filter(datetime.now(timezone.utc))  # type: ignore[arg-type]


def test_a_long_read_keeps_only_the_rows_near_its_newest(monkeypatch: pytest.MonkeyPatch) -> None:
    import tablesdk._queries._watermark as watermark_module

    monkeypatch.setattr(watermark_module, "_PRUNE_AT", 8)
    tracker = ChangeTracker(Watermark.start(overlap=timedelta(microseconds=1)), started_ticks=T + 10_000)
    for row in range(100):
        tracker.keep("p", f"{row:03d}", "e", T + 10 * row)
        assert len(tracker._recent) <= 16
    mark = tracker.watermark()
    assert mark.floor_ticks == T + 980 and mark.seen == {("p", "099", "e")}


def test_a_change_window_is_bounded_at_both_ends_with_seven_digits() -> None:
    from tablesdk import ChangeWindow

    window = ChangeWindow(Watermark.at(datetime_of_ticks(T)), until=datetime_of_ticks(T + 5))
    assert window.filter().render() == (
        "Timestamp gt datetime'2026-01-02T03:04:05.1234567Z' and Timestamp le datetime'2026-01-02T03:04:05.1234572Z'"
    )
    assert ChangeWindow(Watermark.start(), until=datetime_of_ticks(T)).filter().render() == (
        "Timestamp le datetime'2026-01-02T03:04:05.1234567Z'"
    )
    # At the floor: out; a tick above: in; at until: in; a tick above until: out (the next window's).
    assert [window.keep("p", "r", "e", ticks) for ticks in (T, T + 1, T + 5, T + 6)] == [False, True, True, False]
    assert window.until_ticks == T + 5 and window.until.ticks_remainder == 2


def test_a_change_window_knows_its_next_watermark_before_the_read() -> None:
    from tablesdk import ChangeWindow

    since = Watermark(datetime_of_ticks(T), overlap=timedelta(seconds=1),
                      seen={("p", "old", "e1"): T + 2, ("p", "late", "e2"): T + 9, ("p", "unknown", "e3"): None})
    window = ChangeWindow(since, until=datetime_of_ticks(T + 4))
    assert not window.keep("p", "old", "e1", T + 2)  # seen: same keys and ETag
    assert window.keep("p", "old", "e9", T + 3)  # a new version of it
    after = window.next_watermark
    assert after.floor_ticks == T + 4 and after.overlap == timedelta(seconds=1)
    assert after.seen == {("p", "late", "e2"), ("p", "unknown", "e3")}  # those below the new floor are dropped
    assert ChangeWindow.from_string(window.to_string()) == window
    # An upper end below the floor is the floor: an empty window, the watermark unchanged.
    empty = ChangeWindow(since, until=datetime_of_ticks(T - 100))
    assert empty.until_ticks == T and empty.next_watermark.floor_ticks == T


def test_a_change_window_ends_the_overlap_before_now_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from tablesdk import ChangeWindow

    monkeypatch.setattr(time, "time_ns", lambda: (T + 50_000_000) * 100)  # five seconds after T
    assert ChangeWindow(Watermark.start(overlap=timedelta(seconds=2))).until_ticks == T + 30_000_000
    assert ChangeWindow(Watermark.start()).until_ticks == T  # the default overlap: five seconds


@pytest.mark.parametrize("text", ['{"floor":null}', "2026-01-02T03:04:05Z", '{"since":{},"until":"x"}', "[]"])
def test_the_text_of_a_change_window_is_checked(text: str) -> None:
    from tablesdk import ChangeWindow

    with pytest.raises(TableValidationError, match="ChangeWindow") as caught:
        ChangeWindow.from_string(text)
    assert caught.value.field == "since"
    with pytest.raises(TypeError, match="Watermark"):
        ChangeWindow("2026-01-02T03:04:05Z")  # type: ignore[arg-type]
