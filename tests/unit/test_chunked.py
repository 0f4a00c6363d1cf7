"""Chunked properties: a str or bytes value past 64 KiB split across Name, Name_1 ... and joined
on read; limits named by field; filters refused when built; projections select every part."""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated

import attrs
import pydantic
import pytest
from hypothesis import given, settings, strategies as st

from tablesdk import (
    BatchOperation,
    BatchOperationKind,
    Chunked,
    CloudStorageAccount,
    DynamicEntity,
    EdmType,
    Json,
    TableEntity,
    TableValidationError,
    prop,
)
from tablesdk._formats._batch import build_batch_request
from tablesdk._entities._entity import entity_from_payload, entity_to_payload
from tablesdk._formats import get_format

PART = 32 * 1024  # UTF-16 code units of one part


class Doc(TableEntity):
    Title: str = ""
    Body: Annotated[str, Chunked] = ""
    Blob: Annotated[bytes | None, Chunked(parts=3)] = None


@dataclasses.dataclass
class DataDoc:
    PartitionKey: str
    RowKey: str
    Body: Annotated[str, Chunked]
    Tags: Annotated[Json[list[str]], Chunked(parts=2)] = dataclasses.field(default_factory=list)


class PydanticDoc(pydantic.BaseModel):
    PartitionKey: str
    RowKey: str
    Blob: Annotated[bytes, Chunked]


@attrs.define
class AttrsDoc:
    PartitionKey: str
    RowKey: str
    Body: Annotated[str | None, Chunked] = None


def client_query(entity_type: type) -> object:
    return CloudStorageAccount.development_storage_account().create_cloud_table_client().create_query("Docs", entity_type)


def test_the_stored_form_is_every_part_the_unused_ones_empty() -> None:
    payload = entity_to_payload(Doc(PartitionKey="p", RowKey="r", Body="x" * (PART + 5), Blob=b"\0" * 70_000))
    names = [n for n in payload.values if n.startswith("Body")]
    assert names == ["Body"] + [f"Body_{n}" for n in range(1, 16)]
    assert [len(payload.values[n]) for n in names[:3]] == [PART, 5, 0]
    assert all(payload.values[n] == "" for n in names[2:])
    assert [len(payload.values[n]) for n in ("Blob", "Blob_1", "Blob_2")] == [65536, 70_000 - 65536, 0]
    assert payload.types["Blob_2"] is EdmType.BINARY and payload.types["Body_15"] is EdmType.STRING


def test_a_surrogate_pair_at_a_part_boundary_is_never_cut() -> None:
    text = "a" * (PART - 1) + "\U0001F600" + "b"
    payload = entity_to_payload(Doc(PartitionKey="p", RowKey="r", Body=text))
    assert payload.values["Body"] == "a" * (PART - 1)
    assert payload.values["Body_1"] == "\U0001F600b"
    assert entity_from_payload(Doc, payload).Body == text


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet=st.sampled_from(["a", "é", "\U0001F600", "\u4e2d"]), max_size=3 * PART))
def test_any_text_round_trips_through_the_parts(text: str) -> None:
    payload = entity_to_payload(DataDoc("p", "r", text))
    for name in ["Body"] + [f"Body_{n}" for n in range(1, 16)]:
        assert len(payload.values[name].encode("utf-16-le")) <= 65536
    assert entity_from_payload(DataDoc, payload).Body == text


@pytest.mark.parametrize("entity", [
    DataDoc("p", "r", "z" * 100_000, ["a" * 40_000, "b"]),
    PydanticDoc(PartitionKey="p", RowKey="r", Blob=bytes(range(256)) * 1000),
    AttrsDoc("p", "r", "y" * 200_000),
    AttrsDoc("p", "r", None),
])
def test_model_classes_round_trip(entity: object) -> None:
    assert entity_from_payload(type(entity), entity_to_payload(entity)) == entity


def test_untyped_binary_parts_are_read_as_bytes() -> None:
    import base64

    values = {"PartitionKey": "p", "RowKey": "r", "Blob": base64.b64encode(b"ab").decode(),
              "Blob_1": base64.b64encode(b"cd").decode(), "Blob_2": ""}
    from tablesdk._entities._edm import EntityPayload

    payload = EntityPayload(values, {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING}, None)
    assert entity_from_payload(Doc, payload).Blob == b"abcd"


def test_a_value_too_long_for_its_parts_names_the_field() -> None:
    with pytest.raises(TableValidationError) as info:
        entity_to_payload(Doc(PartitionKey="p", RowKey="r", Blob=b"x" * (3 * 65536 + 1)))
    assert info.value.field == "Blob" and "at most 3 parts" in str(info.value)


def test_an_entity_over_1_mib_names_the_chunked_property() -> None:
    with pytest.raises(TableValidationError) as info:
        entity_to_payload(DataDoc("p", "r", "x" * 524_200))
    assert info.value.field == "Body" and "1 MiB" in str(info.value)
    with pytest.raises(TableValidationError) as info:
        entity_to_payload(DynamicEntity(PartitionKey="p", RowKey="r", **{f"S{i}": "x" * 32_000 for i in range(17)}))
    assert info.value.field == "entity" and "largest property is S" in str(info.value)


def test_a_value_of_the_wrong_type_names_the_field() -> None:
    with pytest.raises(TableValidationError) as info:
        entity_to_payload(Doc(PartitionKey="p", RowKey="r", Body=b"bytes"))  # type: ignore[arg-type]
    assert info.value.field == "Body" and "str (Chunked)" in str(info.value)


def test_filters_on_a_chunked_property_are_refused_when_built() -> None:
    with pytest.raises(TableValidationError) as info:
        Doc.Body == "x"
    assert info.value.field == "Body"
    with pytest.raises(TableValidationError) as info:
        getattr(Doc, "Blob").startswith(b"x")
    assert info.value.field == "Blob"
    query = client_query(DataDoc)
    for expr in (prop("Body") == "x", "Body_3 eq 'x' and RowKey eq 'r'", (prop("A") == 1) | ~(prop("Tags_1") == "")):
        with pytest.raises(TableValidationError, match="Chunked") as info:
            query.where(expr)  # type: ignore[attr-defined]
        assert info.value.field in ("Body", "Tags")
    assert client_query(DataDoc).where(prop("Title") == "x").filter_string() == "Title eq 'x'"  # type: ignore[attr-defined]


def test_selecting_a_chunked_property_selects_every_part() -> None:
    columns = client_query(Doc).select("Title", "Blob").select_columns  # type: ignore[attr-defined]
    assert columns == ("Title", "Blob", "Blob_1", "Blob_2")
    assert client_query(DynamicEntity).select("Blob").select_columns == ("Blob",)  # type: ignore[attr-defined]


def test_a_part_name_taken_by_another_field_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match="Body_1"):
        class Clash(TableEntity):
            Body: Annotated[str, Chunked]
            Body_1: str

    @dataclasses.dataclass
    class ModelClash:
        PartitionKey: str
        RowKey: str
        Body: Annotated[str, Chunked(parts=2)]
        Body_1: str

    with pytest.raises(TypeError, match="Body_1"):
        entity_to_payload(ModelClash("p", "r", "", ""))


def test_only_text_and_bytes_are_chunked() -> None:
    with pytest.raises(TypeError, match="str or bytes"):
        class Counted(TableEntity):
            N: Annotated[int, Chunked]
    with pytest.raises(ValueError, match="1 to 16"):
        Chunked(parts=17)


def test_a_batch_over_4_mib_names_the_operation_and_its_largest_property() -> None:
    operations = [
        BatchOperation(BatchOperationKind.INSERT, "Docs", "p", f"{n}", entity_to_payload(
            Doc(PartitionKey="p", RowKey=f"{n}", Body="x" * 500_000)), None)
        for n in range(9)
    ]
    with pytest.raises(TableValidationError) as info:
        build_batch_request("http://127.0.0.1:1/devstoreaccount1", operations, get_format("json"), api_version="2019-02-02")
    assert info.value.field == "batch"
    assert re.search(r"operation \d \(RowKey '\d'\) crosses it, its largest property is Body", str(info.value))
