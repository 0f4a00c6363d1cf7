"""Following continuation tokens, with no I/O: :class:`Pager`.

Every reader of pages keeps its place in a Pager, driven by the one loop of each
flavour (:mod:`tablesdk._queries._page_stream`): the iteration of a query and its Arrow
batches (sync and async, in turn and reading ahead), each range of a parallel
scan, a table listing, the scans of ``count_entities`` / ``delete_entities``, the
command line's export. The pager sends nothing; the driver sends the request it
names and tells it what came back. So the paging rules live here once:

* a token the loop followed before is a cycle (A, B, A would request the same
  pages forever): :meth:`Pager.follow` raises :class:`ContinuationCycleError`;
* ``take(n)`` caps the entities handed out (:meth:`Pager.trim`) and the
  ``$top`` of each request (the query's ``request_top`` of what is still wanted);
* reading ahead: when a page arrives, before it is decoded, :meth:`Pager.ahead`
  says whether the next page is to be requested at once (only when more
  entities are wanted than this page can hold, which then counts as full, so
  no request asks for more than ``take`` still wants) and with which ``$top``;
  after the page is handed out, :meth:`Pager.next` hands the loop that request
  back, already in flight, instead of a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeVar

from ._continuation import ContinuationToken
from .._core._errors import ContinuationCycleError

__all__ = ["Pager", "PageRequest", "Sliceable"]


class Sliceable(Protocol):
    """A page: a list of entities or payloads, a ``pyarrow.RecordBatch`` (anything with ``len`` and slices)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: slice, /) -> Any: ...


S = TypeVar("S", bound=Sliceable)


class PageRequest(NamedTuple):
    """A page to request: from ``token`` (None: the start) with ``$top=top`` (None: the service's default)."""

    token: ContinuationToken | None
    top: int | None


def _no_top(remaining: int | None) -> int | None:
    """The ``$top`` of a loop that leaves it to its requests (a listing, a range of a parallel scan)."""
    return None


class Pager:
    """Where one loop over pages stands: the tokens it followed, how many entities it still
    wants (``remaining``; None: no cap) and the request read ahead, if any.

    ``take`` is the query's cap, ``request_top`` its ``$top`` for a number of
    entities still wanted (:meth:`tablesdk.TableQuery.request_top`). ``start``
    is a token the loop resumes at: it counts as followed. A ``listing`` pager
    follows NextTableName tokens, which repeat when their table name does.
    """

    __slots__ = ("remaining", "_request_top", "_start", "_listing", "_followed", "_top", "_ahead")

    def __init__(
        self,
        take: int | None = None,
        request_top: Callable[[int | None], int | None] = _no_top,
        *,
        start: ContinuationToken | None = None,
        listing: bool = False,
    ) -> None:
        self.remaining = take
        self._request_top = request_top
        self._start = start
        self._listing = listing
        self._followed: set[object] = set()
        self._top: int | None = None  # the $top of the request whose page arrives next
        self._ahead: PageRequest | None = None  # the request read ahead, until next() hands it back
        if start is not None:
            self._followed.add(self._key(start))

    def _key(self, token: ContinuationToken) -> object:
        # A listing moves by table name alone; an entity query by the whole token.
        return (token.next_table_name or "") if self._listing else token

    def follow(self, token: ContinuationToken) -> None:
        """Note that the loop follows ``token``; :class:`ContinuationCycleError` when it followed
        it before (tokens only move forward: a repeat would read the same pages forever)."""
        key = self._key(token)
        if key in self._followed:
            if self._listing:
                raise ContinuationCycleError(
                    f"the service sent NextTableName {key!r} twice in one listing; "
                    "stopping instead of listing the same tables forever",
                    token=key,
                )
            raise ContinuationCycleError(
                f"the service sent continuation token {token.to_string()} twice in one query; "
                "stopping instead of requesting the same pages forever",
                token=token,
            )
        self._followed.add(key)

    def first(self) -> PageRequest:
        """The first request: from ``start`` (None: the beginning)."""
        return self.request(self._start)

    def request(self, token: ContinuationToken | None) -> PageRequest:
        """The request of the page at ``token``, sent now, for what is still wanted."""
        self._top = self._request_top(self.remaining)
        return PageRequest(token, self._top)

    def trim(self, page: S) -> S:
        """The entities of ``page`` to hand out (all of them, or as many as are still wanted), counted.

        The page itself when it is all wanted: a slice is made only of the last page of a ``take``.
        """
        remaining = self.remaining
        if remaining is None:
            return page
        if len(page) > remaining:
            page = page[:remaining]  # a slice of a page is a page of its kind
        self.remaining = remaining - len(page)
        return page

    @property
    def done(self) -> bool:
        """Whether the ``take`` cap is reached (never without one)."""
        return self.remaining == 0

    def ahead(self, token: ContinuationToken | None) -> PageRequest | None:
        """The next page's request to send now, while the page that just arrived (with ``token``,
        not yet decoded) is read; None to request it after that page, or not at all.

        Read ahead only when more entities are wanted than the arriving page
        can hold; that page then counts as full. Never for the last page, nor
        for a token followed before (:meth:`next` raises the cycle where serial
        paging does).
        """
        if token is None or self._key(token) in self._followed:
            return None
        remaining, top = self.remaining, self._top
        if remaining is None:
            ahead_top = self._request_top(None)
        elif top is not None and remaining > top:
            ahead_top = self._request_top(remaining - top)
        else:
            return None
        self._top = ahead_top
        self._ahead = PageRequest(token, ahead_top)
        return self._ahead

    def next(self, token: ContinuationToken | None) -> PageRequest | None:
        """After a page is handed out: the next request, or None when ``token`` is None (the last
        page) or the cap is reached. Follows ``token`` (:meth:`follow`). The request is the one
        :meth:`ahead` gave, when it gave one (the loop then waits for its answer), else a new one.
        """
        if self.remaining == 0 or token is None:
            return None
        self.follow(token)
        ahead, self._ahead = self._ahead, None
        return ahead if ahead is not None else self.request(token)
