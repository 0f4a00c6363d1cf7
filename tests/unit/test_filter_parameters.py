"""Raw filter text with parameters: ``where("Age gt @age", parameters={"age": 30})``.

Each ``@name`` outside quotes becomes the literal ``prop(...) == value`` renders (the typed
builder's code), converted to the declared or system type of the property it is compared
with; a parameter without a value, or a value without a parameter, is refused by name. The
bundled emulator's own filter parser (tablesdk/devstore/_filter.py) checks what is sent.
"""

from __future__ import annotations

import asyncio
import decimal
import enum
import uuid
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tablesdk import (
    CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType, EntityProperty, Int64, TableEntity,
    TableValidationError, prop,
)
from tablesdk._entities._edm import EdmDateTime
from tablesdk._entities._filter import count_comparisons
from tablesdk._entities._filter_params import bind_parameters
from tablesdk.devstore import DevStore
from tablesdk.devstore._filter import compile_filter


class Color(enum.Enum):
    RED = 1


class Reading(TableEntity):
    Views: Int64 = 0
    Ratio: float = 0.0
    Name: str = ""


# ---------------------------------------------------------------- rendering


VALUES: list[Any] = [
    30, -(2**31), 2**31, 2**40, "O'Neil", "", "''", True, False, 1.5, 2.0, -0.25,
    datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=timezone.utc), EdmDateTime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=timezone.utc, ticks_remainder=7),
    datetime(2024, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=2))),
    uuid.UUID("12345678-1234-5678-1234-567812345678"), b"\x00\xff'", bytearray(b"ab"),
    EntityProperty(5, EdmType.INT64), EntityProperty(3.0, EdmType.DOUBLE), EntityProperty("x", EdmType.STRING),
    Color.RED, decimal.Decimal("1.10"), date(2024, 2, 29), timedelta(hours=1, microseconds=5),
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_each_value_renders_as_the_typed_builder_renders_it(value: Any) -> None:
    assert bind_parameters("X eq @v", {"v": value}) == str(prop("X") == value)
    assert bind_parameters("X gt @v", {"v": value}) == str(prop("X") > value)


def test_the_example_of_the_docs() -> None:
    text = bind_parameters("Age gt @age and Name eq @name", {"age": 30, "name": "O'Neil"})
    assert text == "Age gt 30 and Name eq 'O''Neil'"


def test_a_parameter_is_typed_by_the_system_property_it_is_compared_with() -> None:
    when = datetime(2024, 1, 2, tzinfo=timezone.utc)
    assert bind_parameters("Timestamp ge @t and PartitionKey eq @pk", {"t": when, "pk": "p"}) == (
        "Timestamp ge datetime'2024-01-02T00:00:00.0000000Z' and PartitionKey eq 'p'"
    )
    with pytest.raises(TableValidationError) as caught:
        bind_parameters("PartitionKey eq @pk", {"pk": 5})
    assert caught.value.field == "@pk" and "PartitionKey" in str(caught.value)


def test_a_parameter_is_converted_to_the_declared_type_of_the_query_class() -> None:
    client = CloudStorageAccount.parse("UseDevelopmentStorage=true").create_cloud_table_client()
    query = client.create_query("readings", Reading)
    assert query.where("Views gt @v and Ratio lt @r", parameters={"v": 5, "r": 3}).filter_string() == (
        "Views gt 5L and Ratio lt 3.0"
    )
    assert query.where("5 lt @v", parameters={"v": 5}).filter_string() == "5 lt 5"  # no property: typed by value
    with pytest.raises(TableValidationError) as caught:
        query.where("Name eq @n", parameters={"n": 3})
    assert caught.value.field == "@n" and "Name" in str(caught.value)


def test_a_parameter_used_twice_is_bound_at_each_place() -> None:
    assert bind_parameters("A eq @x or (B eq @x and not C eq @x)", {"x": "v"}) == (
        "A eq 'v' or (B eq 'v' and not C eq 'v')"
    )


@pytest.mark.parametrize("name", ["and", "true", "null", "_x", "\u00c9mile", "a1"])
def test_any_identifier_names_a_parameter(name: str) -> None:
    assert bind_parameters(f"A eq @{name}", {name: 1}) == "A eq 1"


# ---------------------------------------------------------------- text stays structure, values stay literals


@pytest.mark.parametrize("value", [
    "x' or true or Name eq 'y", "x') or (Name ne '", "@name", "' or '1' eq '1", "a'' or ''b",
])
def test_an_injection_attempt_stays_one_string_literal(value: str) -> None:
    text = bind_parameters("Name eq @name", {"name": value})
    assert count_comparisons(text) == 1
    assert compile_filter(text).matches({"Name": ("Edm.String", value)})
    assert not compile_filter(text).matches({"Name": ("Edm.String", "y")})


def test_a_parameter_name_inside_quotes_is_text() -> None:
    assert bind_parameters("Name eq '@name' or Alias eq @name", {"name": "n"}) == (
        "Name eq '@name' or Alias eq 'n'"
    )
    assert bind_parameters("Name eq 'it''s @name'", {}) == "Name eq 'it''s @name'"
    with pytest.raises(TableValidationError) as caught:
        bind_parameters("Name eq '@name'", {"name": "n"})
    assert caught.value.field == "@name" and "inside a quoted literal" in str(caught.value)


# ---------------------------------------------------------------- refusals


def test_a_missing_parameter_is_refused_by_name() -> None:
    with pytest.raises(TableValidationError) as caught:
        bind_parameters("Age gt @age and Name eq @name", {"age": 30})
    assert caught.value.field == "@name"
    assert "age" in str(caught.value)  # says what was given


def test_an_unused_parameter_is_refused_by_name() -> None:
    with pytest.raises(TableValidationError) as caught:
        bind_parameters("Age gt @age", {"age": 30, "nmae": "x"})
    assert caught.value.field == "@nmae"


def test_bad_parameter_names_and_values_are_refused() -> None:
    with pytest.raises(TableValidationError, match="without its '@'"):
        bind_parameters("A eq @a", {"@a": 1})
    with pytest.raises(TableValidationError) as caught:
        bind_parameters("A eq @a", {"a": 1, "my-name": 2})
    assert caught.value.field == "my-name"
    with pytest.raises(TableValidationError, match="null") as caught:
        bind_parameters("A eq @a", {"a": None})
    assert caught.value.field == "@a"
    with pytest.raises(TypeError):
        bind_parameters("A eq @a", [("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(TableValidationError, match="position 5"):
        bind_parameters("A eq @", {})
    with pytest.raises(TableValidationError, match="position 8"):
        bind_parameters("A eq @a eq", {"a": 1})


def test_text_with_a_parameter_and_no_parameters_says_how_to_give_one() -> None:
    client = CloudStorageAccount.parse("UseDevelopmentStorage=true").create_cloud_table_client()
    with pytest.raises(TableValidationError, match=r"parameters=\{'age': \.\.\.\}"):
        client.create_query("people").where("Age gt @age")


def test_parameters_go_with_raw_text_only() -> None:
    client = CloudStorageAccount.parse("UseDevelopmentStorage=true").create_cloud_table_client()
    with pytest.raises(TypeError, match="raw"):
        client.create_query("people").where(prop("A") == 1, parameters={"a": 1})


def test_the_bound_text_is_what_the_query_keeps_and_compiles() -> None:
    client = CloudStorageAccount.parse("UseDevelopmentStorage=true").create_cloud_table_client()
    query = client.create_query("people").where(prop("B") == 2).where("A eq @a", parameters={"a": "x"})
    assert query.filter_string() == "B eq 2 and (A eq 'x')"
    assert query.compiled().filter_text == query.filter_string()
    assert "A eq 'x'" in repr(query)


# ---------------------------------------------------------------- every entry point, on the bundled emulator


@pytest.fixture(scope="module")
def store() -> Iterator[DevStore]:
    with DevStore() as running:
        yield running


@pytest.fixture()
def people(store: DevStore) -> Iterator[CloudTableClient]:
    with CloudStorageAccount.parse(store.connection_string).create_cloud_table_client() as client:
        client.create_table("people")
        client.bulk_insert("people", [
            DynamicEntity(PartitionKey="p", RowKey=str(n), Age=20 + n, Name="O'Neil" if n % 2 else "Smith")
            for n in range(20)
        ]).raise_on_error()
        yield client
        client.delete_table_if_exists("people")


FILTER = "Age gt @age and Name eq @name"
PARAMETERS = {"age": 30, "name": "O'Neil"}
MATCHING = {str(n) for n in range(11, 20, 2)}


def test_query_count_and_delete_on_a_client_and_its_table_object(people: CloudTableClient) -> None:
    assert {e.RowKey for e in people.create_query("people").where(FILTER, parameters=PARAMETERS)} == MATCHING
    assert people.count_entities("people", FILTER, parameters=PARAMETERS) == len(MATCHING)
    table = people.get_table_reference("people")
    assert table.count_entities(FILTER, parameters=PARAMETERS) == len(MATCHING)
    result = table.delete_entities(FILTER, parameters={"age": 36, "name": "O'Neil"})
    assert {outcome.entity.RowKey for outcome in result.succeeded} == {"17", "19"}
    assert people.delete_entities("people", FILTER, parameters=PARAMETERS).total == len(MATCHING) - 2
    assert people.count_entities("people") == 20 - len(MATCHING)


def test_count_and_delete_refuse_parameters_without_a_filter(people: CloudTableClient) -> None:
    with pytest.raises(TableValidationError) as caught:
        people.count_entities("people", parameters={"age": 1})
    assert caught.value.field == "@age"
    with pytest.raises(TableValidationError):
        people.delete_entities("people", parameters={"age": 1})
    with pytest.raises(TableValidationError) as caught:
        people.delete_entities("people", FILTER, parameters={"age": 1})
    assert caught.value.field == "@name"
    assert people.count_entities("people") == 20  # nothing was deleted


def test_the_context_binds_parameters(people: CloudTableClient) -> None:
    ctx = people.get_table_service_context()
    found = list(ctx.create_query("people").where(FILTER, parameters=PARAMETERS))
    assert {e.RowKey for e in found} == MATCHING
    assert all(ctx.get_entity_descriptor(e) is not None for e in found)  # tracked as any query's results
    table_ctx = people.get_table_reference("people").get_table_service_context()
    assert {e.RowKey for e in table_ctx.create_query().where(FILTER, parameters=PARAMETERS)} == MATCHING


def test_the_async_client_binds_parameters(people: CloudTableClient, store: DevStore) -> None:
    async def run() -> tuple[set[str], int, int, int]:
        async with CloudStorageAccount.parse(store.connection_string).create_async_cloud_table_client() as client:
            query = client.create_query("people").where(FILTER, parameters=PARAMETERS)
            found = {e.RowKey async for e in query}
            counted = await client.count_entities("people", FILTER, parameters=PARAMETERS)
            table_counted = await client.get_table_reference("people").count_entities(FILTER, parameters=PARAMETERS)
            deleted = await client.delete_entities("people", FILTER, parameters=PARAMETERS)
            return found, counted, table_counted, len(deleted.succeeded)

    found, counted, table_counted, deleted = asyncio.run(run())
    assert found == MATCHING and counted == table_counted == deleted == len(MATCHING)
    assert people.count_entities("people") == 20 - len(MATCHING)


# ---------------------------------------------------------------- any string round-trips as a literal

#: Any text the service stores (no lone surrogates), with the characters of filter syntax made likely.
STRINGS = st.text(
    st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from(["'", "@", " ", "(", ")", "e", "q"])),
    max_size=24,
) | st.sampled_from(["x' or true or Name eq 'y", "@name", "'@name'", "''", "' or ''='"])


@pytest.fixture(scope="module")
def names_table(store: DevStore) -> Iterator[CloudTableClient]:
    with CloudStorageAccount.parse(store.connection_string).create_cloud_table_client() as client:
        client.create_table("names")
        yield client


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=STRINGS)
def test_any_string_value_round_trips_as_a_literal(names_table: CloudTableClient, value: str) -> None:
    stored = {"target": value, "longer": value + "'", "quoted": f"'{value}'", "other": "y"}
    for row_key, name in stored.items():
        names_table.upsert_entity("names", DynamicEntity(PartitionKey="n", RowKey=row_key, Name=name), mode="replace")
    query = names_table.create_query("names").where("PartitionKey eq @pk and Name eq @name",
                                                    parameters={"pk": "n", "name": value})
    found = {e.RowKey: e["Name"] for e in query}
    assert found == {row_key: name for row_key, name in stored.items() if name == value}


# ---------------------------------------------------------------- static typing


def test_user_code_with_parameters_passes_mypy_strict() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    path = root / "tests" / "typing" / "filter_parameters_ok.py"
    assert "type: ignore" not in path.read_text(encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--show-error-codes", str(path)],
        cwd=root, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
