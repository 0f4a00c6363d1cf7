"""Property names no filter can hold, and raw $filter text checked on the client (issues 22.2, 23.5).

The bundled emulator's independent filter parser (tablesdk/devstore/_filter.py) is the oracle:
the client never imports it.
"""

from __future__ import annotations

import asyncio
import re
import unicodedata
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tablesdk
from tablesdk import CloudStorageAccount, DynamicEntity, NoRetry, TableEntity, TableValidationError, prop
from tablesdk._entities._filter import render_filter
from tablesdk._entities._filter_text import check_filter_text, filter_name_problem
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender, Timeout
from tablesdk.devstore._filter import FilterError, compile_filter

CONN = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
    "TableEndpoint=http://127.0.0.1:1/devstoreaccount1;"
)
UNFILTERABLE = ["and", "eq", "not", "true", "null", "or", "false", "K\u0300", "e\u0301t\u00e9", "a\u200db"]
FILTERABLE = ["Rating", "_x", "\u00c9mile", "\u65e5\u4ed8", "x1", "And", "NULLS", "x\u2160"]


def oracle_accepts(text: str) -> bool:
    try:
        compile_filter(text)
    except FilterError:
        return False
    return True


# ---------------------------------------------------------------- names


@pytest.mark.parametrize("name", UNFILTERABLE)
def test_the_builder_never_renders_an_unfilterable_name(name: str) -> None:
    assert not oracle_accepts(f"{name} eq 1")
    with pytest.raises(TableValidationError, match="no \\$filter can name this property") as info:
        prop(name) == 1  # noqa: B015
    assert info.value.field == name
    with pytest.raises(TableValidationError):
        prop(name).startswith("a")


@pytest.mark.parametrize("name", FILTERABLE)
def test_filterable_names(name: str) -> None:
    assert oracle_accepts(f"{name} eq 1")
    assert render_filter(prop(name) == 1) == f"{name} eq 1"


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=6).filter(str.isidentifier))
def test_names_agree_with_the_emulators_parser(name: str) -> None:
    # The emulator reads keywords and identifiers as the service does; an identifier it reads
    # as a property is one the client lets a filter name, and the other way round.
    # (OData lets a letter number (Nl, such as U+2160) start a name; the emulator does not.)
    assume(not unicodedata.category(name[0]) == "Nl")
    accepted = oracle_accepts(f"{name} eq 1")
    assert (filter_name_problem(name) is None) == accepted, name


def client(kind: str, fmt: str, sent: list[HttpRequest]) -> Any:
    def handler(request: HttpRequest) -> HttpResponse:
        sent.append(request)
        return MockSender.response(204, "", {"ETag": 'W/"1"'})

    account = CloudStorageAccount.parse(CONN)
    if kind == "sync":
        return account.create_cloud_table_client(
            sender=MockSender(handler), payload_format=fmt, retry_policy=NoRetry())  # type: ignore[arg-type]

    class Sender:
        async def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
            return handler(request)

        async def close(self) -> None:
            pass

    pytest.importorskip("aiohttp")
    return account.create_async_cloud_table_client(sender=Sender(), payload_format=fmt, retry_policy=NoRetry())


def upsert(kind: str, fmt: str, entity: DynamicEntity, sent: list[HttpRequest]) -> None:
    c = client(kind, fmt, sent)
    if kind == "sync":
        c.upsert_entity("Tasks", entity)
        return

    async def run() -> None:
        try:
            await c.upsert_entity("Tasks", entity)
        finally:
            await c.close()

    asyncio.run(run())


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("fmt", ["json", "atom"])
@pytest.mark.parametrize("name", ["and", "true", "K\u0300"])
def test_writing_an_unfilterable_name_is_refused_unless_allowed(kind: str, fmt: str, name: str) -> None:
    sent: list[HttpRequest] = []
    entity = DynamicEntity("p", "r")
    entity[name] = 1
    with pytest.raises(TableValidationError, match="allow_unfilterable_names") as info:
        upsert(kind, fmt, entity, sent)
    assert info.value.field == name and sent == []
    with tablesdk.allow_unfilterable_names():
        upsert(kind, fmt, entity, sent)
    assert len(sent) == 1
    with pytest.raises(TableValidationError):  # allowed only inside the block, even once written
        upsert(kind, fmt, entity, sent)


def test_a_context_save_refuses_an_unfilterable_name() -> None:
    sent: list[HttpRequest] = []
    ctx = client("sync", "json", sent).get_table_service_context()
    entity = DynamicEntity("p", "r")
    entity["null"] = "x"
    ctx.add_object("Tasks", entity)
    with pytest.raises(TableValidationError, match="null"):
        ctx.save_changes()
    assert sent == []


# ---------------------------------------------------------------- raw text

BAD_TEXT = [
    ("Rating gt", 9, "expected a property or a literal"),
    ("Rating gt 3 and", 15, "expected a property or a literal"),
    ("(Rating gt 3", 12, "expected ')'"),
    ("Rating gt 3)", 11, "expected 'and', 'or' or the end"),
    ("Name eq 'abc", 8, "not closed"),
    ("Rating gt 3 an Name eq 'x'", 12, "expected 'and', 'or' or the end"),
    ("Rating >= 3", 7, "unexpected character"),
    ("startswith(Name, 'a')", 0, "functions"),
    ("Rating gt 3000000000", 10, "Edm.Int32"),
    ("When gt datetime'yesterday'", 8, "Edm.DateTime"),
    ("Id eq guid'123'", 6, "Edm.Guid"),
    ("Data eq X'abc'", 8, "Edm.Binary"),
    ("Rating gt 3f", 10, "suffix"),
    ("and eq 1", 0, "keyword"),
    ("K\u0300 eq 1", 1, "unexpected character"),
    ("Rating gt 3 and Name eq 'x' or", 30, "expected a property or a literal"),
]


@pytest.mark.parametrize(("text", "position", "reason"), BAD_TEXT, ids=[t for t, _, _ in BAD_TEXT])
def test_a_raw_filter_with_an_error_points_at_it(text: str, position: int, reason: str) -> None:
    assert not oracle_accepts(text)
    with pytest.raises(TableValidationError, match=re.escape(reason)) as info:
        client("sync", "json", []).create_query("Tasks").where(text)
    message = str(info.value)
    assert f"position {position}" in message and "<HERE>" in message


GOOD_TEXT = [
    "Rating gt 3",
    "(PartitionKey eq 'a''b') and not (RowKey lt 'x' or Views ge 5L)",
    "Score le -1.5 or Score gt 2e3 or Score eq 2d",
    "Featured and not Archived",
    "Flag eq true or Flag eq false",
    "When ge datetime'2024-01-02T03:04:05.1234567Z' and When lt datetime'2025-01-01T00:00:00Z'",
    "Id eq guid'0f8fad5b-d9cb-469f-a165-70867728950e' and Data eq X'0aff' and Blob eq binary''",
    "A EQ 1 AND B Gt 2",
    "\u00c9mile eq 'x'",
]


@pytest.mark.parametrize("text", GOOD_TEXT)
def test_valid_raw_filters_pass(text: str) -> None:
    check_filter_text(text)
    assert render_filter(text) == text


class Task(TableEntity):
    Priority: int
    Title: str
    Views: tablesdk.Int64  # type: ignore[valid-type]
    Score: float


@pytest.mark.parametrize(("text", "field"), [
    ("Priority gt '2'", "Priority"),
    ("Title eq 3", "Title"),
    ("Views gt 5", "Views"),
    ("Score gt 3", "Score"),
    ("RowKey gt 5", "RowKey"),
    ("'2' lt Priority", "Priority"),
])
def test_a_raw_literal_of_the_wrong_type_is_refused_with_a_declared_class(text: str, field: str) -> None:
    with pytest.raises(TableValidationError, match="matches nothing") as info:
        client("sync", "json", []).create_query("Tasks", Task).where(text).filter_string()
    assert info.value.field == field
    if field != "RowKey":  # the keys are strings whatever the class
        # Without a declared class the types are unknown: the text is sent as it is.
        assert client("sync", "json", []).create_query("Tasks").where(text).filter_string() == text


@pytest.mark.parametrize("text", ["Priority gt 2", "Title eq '3'", "Views gt 5L", "Score gt 3.0", "Other eq 'x'"])
def test_raw_literals_of_the_declared_type_pass(text: str) -> None:
    assert client("sync", "json", []).create_query("Tasks", Task).where(text).filter_string() == text


def test_the_builder_is_checked_against_the_declared_class_too() -> None:
    query = client("sync", "json", []).create_query("Tasks", Task).where(prop("Priority") > "2")
    with pytest.raises(TableValidationError, match="matches nothing"):
        query.filter_string()
    query = client("sync", "json", []).create_query("Tasks", Task).where(Task.Priority > 2)  # type: ignore[operator]
    assert query.filter_string() == "Priority gt 2"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab'() \u00e9\u0300-.01LXdeqnotgrl", max_size=20))
def test_raw_text_agrees_with_the_emulators_parser(text: str) -> None:
    # What the client refuses the emulator refuses too (the client may accept what the emulator
    # refuses for another reason: a comparison of two literals, upper-case operators).
    try:
        check_filter_text(text)
    except TableValidationError:
        assert not oracle_accepts(text) or not text.strip(), text


# ---------------------------------------------------------------- Timestamp (issue 22.7)


@pytest.mark.parametrize("value", ["anything", 5, 1.5])
def test_a_timestamp_that_is_no_datetime_is_refused(value: Any) -> None:
    entity = DynamicEntity("p", "r")
    with pytest.raises(TableValidationError, match="set by the service and never sent"):
        entity["Timestamp"] = value
    assert entity.Timestamp is None


def test_a_datetime_timestamp_is_kept() -> None:
    from datetime import datetime, timezone

    entity = DynamicEntity("p", "r")
    when = datetime(2024, 1, 2, tzinfo=timezone.utc)
    entity["Timestamp"] = when
    entity["Timestamp"] = None
    entity["Timestamp"] = when
    assert entity["Timestamp"] == when
