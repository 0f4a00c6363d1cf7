"""Unit tests for tablesdk._queries._query: TableQuery paging against a fake QuerySource,
continuation tokens, and the white paper's key helpers."""

from __future__ import annotations

import gc
import re
import tracemalloc
import urllib.parse
import weakref
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tablesdk._entities._edm import EdmDateTime, Int64
from tablesdk._entities._entity import DynamicEntity, TableEntity
from tablesdk._core._errors import TableServiceError, TableValidationError
from tablesdk._entities._filter import RawFilter, prop
from tablesdk._queries._continuation import ContinuationToken, ResultSegment
from tablesdk._queries._keys import DATETIME_MAX_TICKS, datetime_from_reverse_ticks, fixed_width_key, reverse_ticks
from tablesdk._queries._query import EmptyResultError, TableQuery


class Blog(TableEntity):
    Text: str
    Rating: int
    Views: Int64


# ---------------------------------------------------------------- fake sources


class Page(list):  # type: ignore[type-arg]
    """A list that can be weakly referenced, so tests can see which pages are alive."""

    __hash__ = object.__hash__  # type: ignore[assignment]


class SimulatedTable:
    """A QuerySource over ``count`` entities made on demand, paged like the service.

    A response holds ``min($top or 1000, 1000, server_page)`` entities; the token
    is the index of the next entity. ``calls`` records (token, top) per request.
    """

    def __init__(self, count: int, server_page: int = 1000) -> None:
        self.count = count
        self.server_page = server_page
        self.calls: list[tuple[ContinuationToken | None, int | None]] = []
        self.page_refs: list[weakref.ref[Page]] = []
        self.max_live_pages_at_call = 0

    def execute_query_segment(
        self, query: TableQuery[DynamicEntity], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[DynamicEntity]:
        gc.collect() if self.count <= 10_000 else None
        self.page_refs = [ref for ref in self.page_refs if ref() is not None]
        self.max_live_pages_at_call = max(self.max_live_pages_at_call, len(self.page_refs))
        self.calls.append((continuation_token, top))
        start = 0 if continuation_token is None else int(continuation_token.next_row_key or "0")
        size = min(top or 1000, 1000, self.server_page)
        end = min(start + size, self.count)
        page = Page(DynamicEntity(PartitionKey="pk", RowKey=f"{i:07d}") for i in range(start, end))
        self.page_refs.append(weakref.ref(page))
        token = ContinuationToken("pk", f"{end:07d}") if end < self.count else None
        return ResultSegment(page, token)

    @property
    def tops(self) -> list[int | None]:
        return [top for _, top in self.calls]


class ScriptedSource:
    """A QuerySource that answers with the given pages in order, tokens "t1", "t2", ..."""

    def __init__(self, *pages: list[Any]) -> None:
        self.pages = pages
        self.calls: list[tuple[ContinuationToken | None, int | None]] = []

    def execute_query_segment(
        self, query: TableQuery[Any], continuation_token: ContinuationToken | None, top: int | None
    ) -> ResultSegment[Any]:
        index = 0 if continuation_token is None else int((continuation_token.next_row_key or "t0")[1:])
        self.calls.append((continuation_token, top))
        last = index == len(self.pages) - 1
        token = None if last else ContinuationToken("p", f"t{index + 1}")
        return ResultSegment(list(self.pages[index]), token)


def entities(*keys: str) -> list[DynamicEntity]:
    return [DynamicEntity(PartitionKey="p", RowKey=k) for k in keys]


def query(source: Any, **kwargs: Any) -> TableQuery[DynamicEntity]:
    return TableQuery(source, "Blogs", DynamicEntity, **kwargs)


# ---------------------------------------------------------------- take and $top


def test_take_5_over_three_pages_returns_5() -> None:
    source = ScriptedSource(entities("a", "b"), entities("c", "d"), entities("e", "f"))
    got = [e.RowKey for e in query(source).take(5)]
    assert got == ["a", "b", "c", "d", "e"]
    assert [top for _, top in source.calls] == [5, 3, 1]


def test_take_2500_requests_1000_1000_500() -> None:
    source = SimulatedTable(10_000)
    got = list(query(source).take(2500))
    assert len(got) == 2500
    assert source.tops == [1000, 1000, 500]
    assert [e.RowKey for e in got[:2]] == ["0000000", "0000001"]
    assert got[-1].RowKey == "0002499"


def test_take_is_never_capped_at_100() -> None:
    source = SimulatedTable(1000)
    assert len(list(query(source).take(250))) == 250
    assert source.tops == [250]


def test_take_more_than_available() -> None:
    source = SimulatedTable(2500)
    assert len(list(query(source).take(5000))) == 2500
    assert source.tops == [1000, 1000, 1000]


def test_without_take_top_is_omitted() -> None:
    source = SimulatedTable(2500)
    assert len(list(query(source))) == 2500
    assert source.tops == [None, None, None]


def test_without_take_top_is_the_page_size() -> None:
    source = SimulatedTable(2500)
    assert len(list(query(source).page_size(700))) == 2500
    assert source.tops == [700, 700, 700, 700]


def test_take_with_page_size() -> None:
    source = SimulatedTable(10_000)
    assert len(list(query(source).take(250).page_size(100))) == 250
    assert source.tops == [100, 100, 50]


def test_short_server_pages_reduce_the_next_top() -> None:
    source = SimulatedTable(10_000, server_page=300)
    assert len(list(query(source).take(1000))) == 1000
    assert source.tops == [1000, 700, 400, 100]


def test_take_stops_without_fetching_another_page() -> None:
    source = SimulatedTable(10_000)
    assert len(list(query(source).take(1000))) == 1000
    assert source.tops == [1000]


def test_tokens_are_passed_back() -> None:
    source = SimulatedTable(2500)
    list(query(source))
    assert [token for token, _ in source.calls] == [
        None, ContinuationToken("pk", "0001000"), ContinuationToken("pk", "0002000"),
    ]


@pytest.mark.parametrize(
    ("take", "page_size", "remaining", "top"),
    [
        (None, None, None, None),
        (None, 50, None, 50),
        (10, None, 10, 10),
        (2500, None, 2500, 1000),
        (2500, None, 500, 500),
        (2500, 300, 2500, 300),
        (2500, 300, 7, 7),
    ],
)
def test_request_top(take: int | None, page_size: int | None, remaining: int | None, top: int | None) -> None:
    assert query(SimulatedTable(0), take=take, page_size=page_size).request_top(remaining) == top


def test_request_top_refuses_nothing_remaining() -> None:
    with pytest.raises(ValueError):
        query(SimulatedTable(0)).request_top(0)


# ---------------------------------------------------------------- empty pages, laziness


def test_empty_pages_with_tokens_are_followed() -> None:
    source = ScriptedSource([], [], entities("a"), [], entities("b", "c"))
    assert [e.RowKey for e in query(source)] == ["a", "b", "c"]
    assert len(source.calls) == 5


def test_only_empty_pages() -> None:
    source = ScriptedSource([], [], [])
    assert list(query(source)) == []
    assert len(source.calls) == 3


def test_iteration_is_lazy() -> None:
    source = ScriptedSource(entities("a", "b"), entities("c"))
    it = iter(query(source))
    assert source.calls == []  # nothing is sent before the first item is wanted
    assert next(it).RowKey == "a"
    assert len(source.calls) == 1
    assert next(it).RowKey == "b"
    assert len(source.calls) == 1  # the first page is not used up until "c" is asked for
    assert next(it).RowKey == "c"
    assert len(source.calls) == 2
    with pytest.raises(StopIteration):
        next(it)
    assert len(source.calls) == 2


def test_each_iteration_starts_over() -> None:
    source = ScriptedSource(entities("a"), entities("b"))
    q = query(source)
    assert [e.RowKey for e in q] == ["a", "b"]
    assert [e.RowKey for e in q] == ["a", "b"]
    assert [token for token, _ in source.calls] == [None, ContinuationToken("p", "t1")] * 2


def test_a_token_echoed_back_stops_the_loop() -> None:
    class Stuck:
        def execute_query_segment(self, query: Any, token: Any, top: Any) -> ResultSegment[Any]:
            return ResultSegment([], ContinuationToken("p", "same"))

    with pytest.raises(TableServiceError, match="continuation token"):
        list(query(Stuck()))


# ---------------------------------------------------------------- execute_segmented


def test_execute_segmented_is_one_request() -> None:
    source = SimulatedTable(2500)
    seg = query(source).execute_segmented()
    assert len(seg.results) == 1000 and seg.has_more
    assert seg.continuation_token == ContinuationToken("pk", "0001000")
    seg2 = query(source).execute_segmented(seg.continuation_token)
    assert seg2.results[0].RowKey == "0001000"
    assert source.tops == [None, None]


def test_execute_segmented_pages_by_take_and_resumes_from_a_string() -> None:
    source = SimulatedTable(12)
    q = query(source).take(5)
    seen: list[str] = []
    text: str | None = None
    while True:
        token = None if text is None else ContinuationToken.from_string(text)
        seg = q.execute_segmented(token)
        seen.extend(str(e.RowKey) for e in seg.results)
        if seg.continuation_token is None:
            break
        text = seg.continuation_token.to_string()  # e.g. through a web page link
    assert seen == [f"{i:07d}" for i in range(12)]
    assert source.tops == [5, 5, 5]


def test_execute_segmented_with_page_size() -> None:
    source = SimulatedTable(5000)
    query(source).take(2500).page_size(600).execute_segmented()
    query(source).take(2500).execute_segmented()
    query(source).page_size(10).execute_segmented()
    assert source.tops == [600, 1000, 10]


def test_execute_segmented_refuses_a_token_string() -> None:
    with pytest.raises(TypeError, match="from_string"):
        query(SimulatedTable(1)).execute_segmented("1.abc")  # type: ignore[arg-type]


# ---------------------------------------------------------------- first


def test_first() -> None:
    source = ScriptedSource([], entities("a", "b"))
    assert query(source).first().RowKey == "a"
    assert [top for _, top in source.calls] == [1, 1]  # empty page followed, $top=1 each time


def test_first_on_empty_raises_lookup_error() -> None:
    source = ScriptedSource([], [])
    with pytest.raises(EmptyResultError) as info:
        query(source).first()
    assert isinstance(info.value, LookupError)
    assert "Blogs" in str(info.value)


def test_first_or_default() -> None:
    assert query(ScriptedSource([])).first_or_default() is None
    assert query(ScriptedSource(entities("x"))).first_or_default().RowKey == "x"  # type: ignore[union-attr]


def test_first_overrides_take() -> None:
    source = ScriptedSource(entities("a", "b"))
    assert query(source).take(50).first().RowKey == "a"
    assert source.calls[0][1] == 1


# ---------------------------------------------------------------- builder


def test_builders_are_immutable() -> None:
    base = query(SimulatedTable(0))
    filtered = base.where(prop("Rating") > 2)
    taken = filtered.take(5)
    selected = taken.select("Text", "Rating")
    paged = selected.page_size(50)
    assert (base.filter, base.take_count, base.select_columns, base.page_size_value) == (None, None, None, None)
    assert str(filtered.filter) == "Rating gt 2" and filtered.take_count is None
    assert taken.take_count == 5 and taken.select_columns is None
    assert selected.select_columns == ("Text", "Rating") and selected.page_size_value is None
    assert paged.page_size_value == 50
    assert (paged.table, paged.entity_type) == ("Blogs", DynamicEntity)
    assert str(paged.filter) == "Rating gt 2" and paged.take_count == 5
    for q in (base, filtered, taken, selected, paged):
        assert q.source is base.source
    with pytest.raises(AttributeError):
        base.take_count = 3  # type: ignore[misc]


def test_where_ands_with_the_existing_filter() -> None:
    q = query(SimulatedTable(0)).where(prop("PartitionKey") == "p").where(prop("Rating") > 2)
    assert q.filter_string() == "PartitionKey eq 'p' and Rating gt 2"
    q2 = q.where((prop("A") == 1) | (prop("B") == 2))
    assert q2.filter_string() == "PartitionKey eq 'p' and Rating gt 2 and (A eq 1 or B eq 2)"
    assert q.filter_string() == "PartitionKey eq 'p' and Rating gt 2"


def test_where_accepts_raw_strings() -> None:
    q = query(SimulatedTable(0)).where("Rating gt 2 or Rating lt 0")
    assert isinstance(q.filter, RawFilter)
    assert q.filter_string() == "Rating gt 2 or Rating lt 0"
    q2 = q.where(prop("PartitionKey") == "p")
    assert q2.filter_string() == "(Rating gt 2 or Rating lt 0) and PartitionKey eq 'p'"
    assert query(SimulatedTable(0), filter="A eq 1").filter_string() == "A eq 1"


def test_where_refuses_a_bool() -> None:
    with pytest.raises(TypeError, match="bool"):
        query(SimulatedTable(0)).where(3 == 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        query(SimulatedTable(0)).where(None)  # type: ignore[arg-type]


def test_no_filter() -> None:
    q = query(SimulatedTable(0))
    assert q.filter_string() is None
    assert q.point_keys() is None


def test_filter_string_checks_the_comparison_limit() -> None:
    q = query(SimulatedTable(0))
    for i in range(16):
        q = q.where(prop(f"P{i}") == i)
    with pytest.raises(TableValidationError, match="15"):
        q.filter_string()


def test_declared_types_render_through_the_query() -> None:
    source: Any = SimulatedTable(0)
    q = TableQuery(source, "Blogs", Blog).where((Blog.Views == 5) & (Blog.Rating > 2))
    assert q.filter_string() == "Views eq 5L and Rating gt 2"


def test_point_keys_of_a_query() -> None:
    q = query(SimulatedTable(0)).where(prop("RowKey") == "r").where(prop("PartitionKey") == "100%")
    assert q.point_keys() == ("100%", "r")
    assert q.where(prop("X") == 1).point_keys() is None


@pytest.mark.parametrize("n", [0, -1, 1.5, "3", True, None])
def test_take_must_be_a_positive_int(n: Any) -> None:
    q = query(SimulatedTable(0))
    with pytest.raises((TableValidationError, TypeError)):
        q.take(n)
    if n is not None:
        with pytest.raises(TableValidationError):
            q.take(n)


@pytest.mark.parametrize("m", [0, 1001, -5, 2.0, False])
def test_page_size_is_1_to_1000(m: Any) -> None:
    with pytest.raises(TableValidationError):
        query(SimulatedTable(0)).page_size(m)
    assert query(SimulatedTable(0)).page_size(1).page_size_value == 1
    assert query(SimulatedTable(0)).page_size(1000).page_size_value == 1000


def test_select() -> None:
    q = query(SimulatedTable(0)).select("Text", "Rating", "Text")
    assert q.select_columns == ("Text", "Rating")
    assert q.select().select_columns is None
    with pytest.raises(TableValidationError):
        q.select("bad name")
    with pytest.raises(TableValidationError):
        q.select("Text", 5)  # type: ignore[arg-type]


def test_constructor_validates() -> None:
    with pytest.raises(TableValidationError):
        TableQuery(SimulatedTable(0), "no", DynamicEntity)
    with pytest.raises(TableValidationError):
        query(SimulatedTable(0), take=0)
    with pytest.raises(TableValidationError):
        query(SimulatedTable(0), page_size=5000)


def test_repr() -> None:
    q = query(SimulatedTable(0)).where(prop("A") == 1).take(3).select("A").page_size(2)
    assert repr(q) == "TableQuery('Blogs', DynamicEntity, filter='A eq 1', take=3, select=['A'], page_size=2)"


# ---------------------------------------------------------------- memory


def test_iteration_keeps_one_page_alive() -> None:
    source = SimulatedTable(10_000)
    count = sum(1 for _ in query(source))
    assert count == 10_000
    assert len(source.calls) == 10
    assert source.max_live_pages_at_call == 0  # the previous page is released before each request


def test_memory_is_flat_over_a_million_entities() -> None:
    source = SimulatedTable(1_000_000)
    tracemalloc.start()
    try:
        count = 0
        for entity in query(source):
            count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 1_000_000
    assert len(source.calls) == 1000
    assert source.max_live_pages_at_call <= 1
    # One page of 1000 small entities is a few hundred KiB; a million would be hundreds of MiB.
    assert peak < 8 * 1024 * 1024, peak


# ---------------------------------------------------------------- continuation tokens


@pytest.mark.parametrize(
    "token",
    [
        ContinuationToken("pk", "rk"),
        ContinuationToken("Metric%25", "100%"),
        ContinuationToken("O'Brien", "a''b\"c"),
        ContinuationToken("héllo ☃", "𝄞日本"),
        ContinuationToken("", ""),
        ContinuationToken("pk", None),
        ContinuationToken(None, "rk"),
        ContinuationToken(next_table_name="mytable"),
        ContinuationToken("1!8!cGs-", "1!12!MDAxMDAw"),  # production's own opaque style
        ContinuationToken("a/b?c=d&e#f+g h", "\x00\x7f"),
        ContinuationToken("\ud800", "x"),  # even a lone surrogate survives
        ContinuationToken("k" * 1024, "r" * 1024),
    ],
)
def test_token_round_trips_through_a_url_safe_string(token: ContinuationToken) -> None:
    text = token.to_string()
    assert re.fullmatch(r"[A-Za-z0-9._-]+", text), text
    assert urllib.parse.quote(text, safe="") == text
    assert text.startswith("1.")
    assert ContinuationToken.from_string(text) == token
    assert ContinuationToken.from_string(urllib.parse.unquote(urllib.parse.quote(text))) == token
    assert str(token) == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1.",
        "1",
        "abc",
        "2.WyJwayIsInJrIixudWxsXQ",  # unknown version
        "1.!!!!",
        "1.WyJwayIsInJrIixudWxsXQ=x",
        "1.a",
        "1." + "bm90IGpzb24",  # "not json"
        "1.eyJhIjoxfQ",  # {"a":1}
        "1.WyJwayJd",  # ["pk"]
        "1.W251bGwsbnVsbCxudWxsXQ",  # [null,null,null]
        "1.WzEsMiwzXQ",  # [1,2,3]
        "1./w",  # not ASCII after decoding
        "1.WyJwayIsICJyayIsIG51bGxd\n",
    ],
)
def test_garbage_tokens_are_refused(text: str) -> None:
    try:
        token = ContinuationToken.from_string(text)
    except ValueError:
        return
    pytest.fail(f"{text!r} was read as {token!r}")


def test_token_from_string_refuses_non_strings() -> None:
    with pytest.raises(ValueError):
        ContinuationToken.from_string(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ContinuationToken.from_string(b"1.abc")  # type: ignore[arg-type]


def test_token_needs_a_part() -> None:
    with pytest.raises(ValueError):
        ContinuationToken()
    with pytest.raises(TypeError):
        ContinuationToken(5, "x")  # type: ignore[arg-type]


def test_token_is_frozen_and_comparable() -> None:
    token = ContinuationToken("a", "b")
    assert token == ContinuationToken("a", "b") and hash(token) == hash(ContinuationToken("a", "b"))
    with pytest.raises(AttributeError):
        token.next_row_key = "c"  # type: ignore[misc]


# ---------------------------------------------------------------- reverse ticks


def _days_before_year(year: int) -> int:
    y = year - 1
    return y * 365 + y // 4 - y // 100 + y // 400


def _days_before_month(year: int, month: int) -> int:
    lengths = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
        lengths[1] = 29
    return sum(lengths[: month - 1])


def _net_ticks(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    """.NET DateTime ticks computed from the Gregorian calendar, independently of datetime."""
    days = _days_before_year(year) + _days_before_month(year, month) + day - 1
    return ((days * 24 + hour) * 60 + minute) * 60 * 10_000_000 + second * 10_000_000


def test_hand_computed_ticks_match_known_constants() -> None:
    assert _net_ticks(1970, 1, 1) == 621355968000000000  # .NET's Unix epoch ticks
    assert _net_ticks(9999, 12, 31, 23, 59, 59) + 9_999_999 == DATETIME_MAX_TICKS


def test_reverse_ticks_golden_2009_05_01() -> None:
    ticks = _net_ticks(2009, 5, 1)
    assert ticks == 633767328000000000
    expected = str(3155378975999999999 - ticks).zfill(19)
    assert reverse_ticks(datetime(2009, 5, 1, tzinfo=timezone.utc)) == expected == "2521611647999999999"
    assert reverse_ticks(datetime(2009, 5, 1)) == expected  # naive is UTC
    assert reverse_ticks(datetime(2009, 5, 1, 2, tzinfo=timezone(timedelta(hours=2)))) == expected


def test_reverse_ticks_white_paper_examples() -> None:
    # "a blog b1 dated 10/1/2008 10:00:00 AM will have 2521794455999999999 as the RowKey,
    #  and b2 dated 10/2/2008 10:00:00 AM will have 2521793591999999999"
    b1 = reverse_ticks(datetime(2008, 10, 1, 10))
    b2 = reverse_ticks(datetime(2008, 10, 2, 10))
    assert b1 == "2521794455999999999"
    assert b2 == "2521793591999999999"
    assert b2 < b1


def test_reverse_ticks_sub_microsecond_and_edges() -> None:
    base = datetime(2009, 5, 1, 0, 0, 0, 123456, tzinfo=timezone.utc)
    seven = EdmDateTime(2009, 5, 1, 0, 0, 0, 123456, timezone.utc, ticks_remainder=7)
    assert int(reverse_ticks(base)) - int(reverse_ticks(seven)) == 7
    assert reverse_ticks(datetime.min) == "3155378975999999999"
    assert reverse_ticks(datetime.max) == "0000000000000000009"
    assert reverse_ticks(EdmDateTime(9999, 12, 31, 23, 59, 59, 999999, timezone.utc, ticks_remainder=9)) == "0" * 19
    late = reverse_ticks(datetime(6831, 2, 15, 14, 13, 20))  # the paper's 18-digit boundary
    assert len(late) == 19 and late.startswith("0")


def test_reverse_ticks_order_is_newest_first() -> None:
    times = [
        datetime(1, 1, 1), datetime(1601, 1, 1), datetime(2008, 10, 1, 10), datetime(2008, 10, 1, 10, 0, 0, 1),
        datetime(6831, 2, 15, 14, 13, 19), datetime(6831, 2, 15, 14, 13, 21), datetime(9999, 12, 31),
    ]
    keys = [reverse_ticks(t) for t in times]
    assert keys == sorted(keys, reverse=True)
    assert all(len(k) == 19 for k in keys)


def test_reverse_ticks_round_trip() -> None:
    for value in (
        datetime(2009, 5, 1, tzinfo=timezone.utc),
        datetime(1, 1, 1, tzinfo=timezone.utc),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
        EdmDateTime(2024, 2, 29, 12, 34, 56, 789012, timezone.utc, ticks_remainder=3),
    ):
        back = datetime_from_reverse_ticks(reverse_ticks(value))
        assert back == value and back.tzinfo is not None
        assert isinstance(back, EdmDateTime)
        assert back.ticks_remainder == getattr(value, "ticks_remainder", 0)
    assert datetime_from_reverse_ticks("2521794455999999999") == datetime(2008, 10, 1, 10, tzinfo=timezone.utc)


@pytest.mark.parametrize("text", ["", "123", "2521794455999999999 ", "252179445599999999x", "9" * 19, "٣" * 19, "0" * 20])
def test_datetime_from_reverse_ticks_refuses_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        datetime_from_reverse_ticks(text)


def test_reverse_ticks_refuses_out_of_range_and_non_datetimes() -> None:
    with pytest.raises(ValueError):
        reverse_ticks(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))))  # before 0001-01-01 UTC
    with pytest.raises(TypeError):
        reverse_ticks("2009-05-01")  # type: ignore[arg-type]


# ---------------------------------------------------------------- fixed width keys


def test_fixed_width_key_sorts_numerically() -> None:
    assert fixed_width_key(92) == "0000000000000000092"
    assert fixed_width_key(92) < fixed_width_key(10000)
    assert fixed_width_key(0) == "0" * 19
    assert fixed_width_key(2**63 - 1) == "9223372036854775807"
    assert fixed_width_key(10**19 - 1) == "9" * 19
    assert fixed_width_key(92, 5) == "00092"
    numbers = [0, 5, 9, 10, 92, 100, 10000, 99999]
    assert sorted(numbers, key=lambda n: fixed_width_key(n, 5)) == sorted(numbers)


def test_fixed_width_key_limits() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        fixed_width_key(-1)
    with pytest.raises(ValueError, match="9999999999999999999"):
        fixed_width_key(10**19)
    with pytest.raises(ValueError, match="99999"):
        fixed_width_key(100000, 5)
    with pytest.raises(ValueError):
        fixed_width_key(1, 0)
    with pytest.raises(TypeError):
        fixed_width_key(1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        fixed_width_key(True)


def test_reverse_ticks_in_a_row_key_range() -> None:
    # a reverse-ticks RowKey range for one day, as in the white paper's partitioning example
    start = reverse_ticks(datetime(2008, 7, 4))
    end = reverse_ticks(datetime(2008, 7, 3))
    expr = (prop("PartitionKey") == "Football_7991_06") & (prop("RowKey") > start) & (prop("RowKey") <= end)
    assert str(expr) == (
        f"PartitionKey eq 'Football_7991_06' and RowKey gt '{start}' and RowKey le '{end}'"
    )
