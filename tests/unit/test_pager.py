"""The Pager on its own: tokens in, decisions out, nothing sent.

Every loop that follows continuation tokens (query iteration sync and async,
serial and reading ahead, parallel ranges, table listing, the CLI) asks a
Pager what to request next; these tests pin its decisions.
"""

from __future__ import annotations

import pytest

from tablesdk import ContinuationCycleError, ContinuationToken, DynamicEntity, TableQuery
from tablesdk._queries._pager import PageRequest, Pager

A, B, C = (ContinuationToken(key, "r") for key in "ABC")


def _top_of(page_size: int | None) -> object:
    """A query's request_top (min(remaining, page_size or 1000)), as the loops pass it."""

    class NoSource:
        def execute_query_segment(self, *args: object) -> object:
            raise AssertionError("the pager sends nothing")

    query = TableQuery(NoSource(), "Pages", DynamicEntity)  # type: ignore[arg-type]
    return (query.page_size(page_size) if page_size else query).request_top


def pager(take: int | None = None, page_size: int | None = None, **kwargs: object) -> Pager:
    return Pager(take, _top_of(page_size), **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the cycle check


def test_a_token_followed_twice_is_a_cycle_with_the_query_message() -> None:
    p = Pager()
    p.follow(A)
    p.follow(B)
    with pytest.raises(ContinuationCycleError) as info:
        p.follow(A)
    assert info.value.token == A
    assert str(info.value) == (
        f"the service sent continuation token {A.to_string()} twice in one query; "
        "stopping instead of requesting the same pages forever"
    )


def test_the_start_token_counts_as_followed() -> None:
    p = Pager(start=A)
    assert p.first() == PageRequest(A, None)
    p.follow(B)
    with pytest.raises(ContinuationCycleError):
        p.follow(A)


def test_tokens_differing_only_in_location_are_different_pages() -> None:
    p = Pager()
    p.follow(ContinuationToken("A", "r", target_location="primary"))
    p.follow(ContinuationToken("A", "r", target_location="secondary"))


def test_a_listing_repeats_when_its_table_name_does() -> None:
    p = Pager(listing=True)
    p.follow(ContinuationToken(next_table_name="t1"))
    with pytest.raises(ContinuationCycleError) as info:
        p.follow(ContinuationToken(next_table_name="t1", target_location="secondary"))
    assert info.value.token == "t1"
    assert str(info.value) == (
        "the service sent NextTableName 't1' twice in one listing; stopping instead of listing the same tables forever"
    )


# ---------------------------------------------------------------- serial paging


def test_serial_paging_follows_tokens_until_the_last_page() -> None:
    p = pager()
    assert p.first() == PageRequest(None, None)
    assert p.trim([1, 2]) == [1, 2] and p.remaining is None
    assert p.next(A) == PageRequest(A, None)
    assert p.next(B) == PageRequest(B, None)
    assert p.next(None) is None
    with pytest.raises(ContinuationCycleError):
        p.next(A)


def test_take_caps_the_entities_and_each_top() -> None:
    p = pager(take=2500)
    assert p.first() == PageRequest(None, 1000)
    assert len(p.trim(list(range(1000)))) == 1000 and p.remaining == 1500
    assert p.next(A) == PageRequest(A, 1000)
    assert len(p.trim(list(range(700)))) == 700  # a short page: the service may send fewer
    assert p.next(B) == PageRequest(B, 800)
    page = list(range(900))
    assert p.trim(page) == page[:800] and p.done
    assert p.next(C) is None  # take is satisfied: C is neither requested nor followed
    assert not pager().done


def test_a_page_wanted_whole_is_handed_out_as_it_is() -> None:
    page = [1, 2, 3]
    assert pager().trim(page) is page
    assert pager(take=3).trim(page) is page


# ---------------------------------------------------------------- reading ahead


def test_without_take_every_next_page_is_read_ahead_and_handed_back() -> None:
    p = pager(page_size=100)
    assert p.first() == PageRequest(None, 100)
    ahead = p.ahead(A)
    assert ahead == PageRequest(A, 100)
    p.trim([0] * 100)
    assert p.next(A) is ahead  # the request already in flight, not a new one
    assert p.ahead(None) is None  # the last page
    assert p.next(None) is None


def test_with_take_a_page_read_ahead_counts_the_page_before_as_full() -> None:
    p = pager(take=2500)
    p.first()  # $top=1000
    first_ahead = p.ahead(A)
    assert first_ahead == PageRequest(A, 1000)  # 1500 wanted past a full first page
    p.trim([0] * 400)  # the first page was short: 2100 still wanted
    assert p.next(A) is first_ahead
    second_ahead = p.ahead(B)
    assert second_ahead == PageRequest(B, 1000)  # 2100 wanted, 1100 past a full page in flight
    p.trim([0] * 1000)
    assert p.next(B) is second_ahead
    third_ahead = p.ahead(C)
    assert third_ahead == PageRequest(C, 100)  # 1100 wanted, 100 past a full page in flight
    assert len(p.trim([0] * 1000)) == 1000 and p.remaining == 100
    assert p.next(C) is third_ahead
    assert p.ahead(ContinuationToken("D")) is None  # the page in flight can hold the last 100
    p.trim([0] * 100)
    assert p.next(ContinuationToken("D")) is None


def test_no_read_ahead_when_the_arriving_page_can_hold_the_rest() -> None:
    p = pager(take=1000)
    p.first()  # $top=1000
    assert p.ahead(A) is None
    p.trim([0] * 10)  # a short page: 990 still wanted, requested after it
    assert p.next(A) == PageRequest(A, 990)


def test_a_repeated_token_is_not_read_ahead_and_raises_where_serial_paging_raises() -> None:
    p = pager()
    p.first()
    p.ahead(A)
    p.trim([1])
    p.next(A)
    assert p.ahead(A) is None  # no request for a page already read
    p.trim([2])  # the page with the repeated token is still handed out
    with pytest.raises(ContinuationCycleError):
        p.next(A)


def test_a_request_made_after_no_read_ahead_is_fresh() -> None:
    p = pager(take=1500, page_size=500)
    p.first()  # $top=500
    ahead = p.ahead(A)
    assert ahead == PageRequest(A, 500)
    p.trim([0] * 500)
    assert p.next(A) is ahead
    assert p.ahead(B) == PageRequest(B, 500)  # 1000 wanted past the page in flight (500)
    p.trim([0] * 500)
    p.next(B)
    assert p.ahead(C) is None  # 500 wanted, the page in flight holds 500
    p.trim([0] * 200)
    assert p.next(C) == PageRequest(C, 300)
