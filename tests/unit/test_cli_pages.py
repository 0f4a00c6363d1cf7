"""The command line's paging (``cli._transfer.pages``): the next page is requested before this one is decoded.

The export and query commands read every page through it; issue 25.5 asks the
export to keep up with ``create_query``, which sends the next request while it
decodes a page. A fake client stands for the service: ``fetch_query_segment``
is the HTTP stage (it answers with the page's token), ``_decode_page`` the
decode stage.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tablesdk import ContinuationToken
from tablesdk._entities._edm import EdmType, EntityPage, EntityPayload
from tablesdk._core._errors import ContinuationCycleError
from tablesdk._queries._query import FetchedPage
from tablesdk.cli._transfer import build_query, pages


def _payload(n: int) -> EntityPayload:
    return EntityPayload({"PartitionKey": "p", "RowKey": f"{n:04d}"}, {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING})


class PagedClient:
    """``pages`` pages of ``size`` entities; records the requests and what was decoded when each went out."""

    def __init__(self, count: int, size: int, *, tokens: list[str] | None = None) -> None:
        self.count, self.size = count, size
        self.tokens = tokens if tokens is not None else [f"{n:04d}" for n in range(size, count, size)]
        self.requests: list[tuple[str | None, int | None, int]] = []  # (token row key, top, pages decoded by then)
        self.decoded = 0
        self.second_requested = threading.Event()

    def fetch_query_segment(self, query: Any, token: ContinuationToken | None, top: int | None) -> FetchedPage:
        key = token.next_row_key if token is not None else None
        self.requests.append((key, top, self.decoded))
        if len(self.requests) == 2:
            self.second_requested.set()
        index = 0 if key is None else self.tokens.index(key) + 1
        first = index * self.size
        page = [_payload(n) for n in range(first, min(first + self.size, self.count))]
        nxt = self.tokens[index] if index < len(self.tokens) else None
        return FetchedPage(ContinuationToken(next_partition_key="p", next_row_key=nxt) if nxt else None,
                           page=EntityPage.of(page))

    def _decode_page(self, fetched: FetchedPage) -> EntityPage:
        if self.decoded == 0:
            # The read-ahead sends page 2's request on the helper thread before this decode ends.
            assert self.second_requested.wait(10), "the next page was not requested before this one was decoded"
        self.decoded += 1
        assert fetched.page is not None
        return fetched.page


def _query(top: int | None = None) -> Any:
    """The export's query, reading ahead from the first page (its default, "auto", reads ahead
    only once it has measured a slow service: see tests/unit/test_page_stream.py)."""
    from tablesdk import CloudStorageAccount

    client = CloudStorageAccount.development_storage_account().create_cloud_table_client()
    return build_query(client, "pages", None, None, top).read_ahead(True)


def test_every_page_is_read_with_the_next_one_requested_before_it_is_decoded() -> None:
    client = PagedClient(count=5, size=2)
    got = list(pages(client, _query()))  # type: ignore[arg-type]
    assert [[p.values["RowKey"] for p in payloads] for payloads, _ in got] == [["0000", "0001"], ["0002", "0003"], ["0004"]]
    assert [token.next_row_key if token else None for _, token in got] == ["0002", "0004", None]
    assert [key for key, _, _ in client.requests] == [None, "0002", "0004"]
    assert client.requests[1][2] == 0  # page 2 was asked for before page 1 was decoded


def test_a_take_cap_stops_at_the_cap_and_asks_only_for_what_is_wanted() -> None:
    client = PagedClient(count=10, size=2)
    client.second_requested.set()  # the cap may hold the next request until the count is known
    got = list(pages(client, _query(top=3)))  # type: ignore[arg-type]
    assert sum(len(payloads) for payloads, _ in got) == 3 and got[-1][1] is None
    assert len(client.requests) == 2 and client.requests[-1][1] == 1  # the second page asks for the one left


def test_a_token_seen_before_is_a_cycle() -> None:
    client = PagedClient(count=8, size=2, tokens=["0002", "0002"])
    client.second_requested.set()
    with pytest.raises(ContinuationCycleError):
        list(pages(client, _query()))  # type: ignore[arg-type]


def test_read_only_pages_share_the_decoder_s_types_and_others_get_their_own() -> None:
    shared = {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING}
    page = EntityPage([{"PartitionKey": "p", "RowKey": str(n)} for n in range(3)], [shared] * 3, [None] * 3)
    assert all(p.types is shared for p in page.read_only_payloads())  # the export only reads them: no copies
    assert all(p.types == shared and p.types is not shared for p in page.payloads())
    assert page.read_only_payloads() is page.payloads()  # once made, the page's own payloads serve both


def test_the_export_reads_its_pages_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from tablesdk import CloudStorageAccount
    import tablesdk.cli._export as export_module

    seen: list[bool] = []

    def recording_pages(client: Any, query: Any, token: Any = None, *, read_only: bool = False) -> Any:
        seen.append(read_only)
        return iter(())

    class Quiet:
        def update(self, count: int) -> None:
            pass

    monkeypatch.setattr(export_module, "pages", recording_pages)
    client = CloudStorageAccount.development_storage_account().create_cloud_table_client()
    spec = export_module.ExportSpec("pages", None, (), "jsonl")
    assert export_module.export_table(client, spec, "-", resume=False, progress=Quiet()) == 0  # type: ignore[arg-type]
    assert seen == [True]
