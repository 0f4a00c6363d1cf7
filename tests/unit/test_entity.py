"""Entities: declared and dynamic, conversion to and from payloads, and every service limit."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Annotated, Optional

import pytest

from tablesdk._entities._edm import EdmType, EntityPayload, EntityProperty, Int64, parse_datetime
from tablesdk._entities._entity import (
    DeclaredProperty,
    DynamicEntity,
    TableEntity,
    entity_from_payload,
    entity_to_payload,
    validate_table_name,
)
from tablesdk._core._errors import TableValidationError


class Blog(TableEntity):
    Text: str
    Rating: int
    Views: Int64
    Score: float = 0.5
    Posted: Optional[datetime] = None
    Id: uuid.UUID | None = None
    Avatar: bytes | None = None
    Published: bool = False
    Legacy: Annotated[int, EdmType.INT64] = 0


class FeaturedBlog(Blog):
    Featured: bool = True


def make_blog(**kw: object) -> Blog:
    values: dict[str, object] = dict(PartitionKey="Channel9", RowKey="Oct-29", Text="Hello", Rating=3, Views=10)
    values.update(kw)
    return Blog(**values)  # type: ignore[arg-type]


class TestDeclaredEntity:
    def test_annotations_map_to_edm_types(self) -> None:
        assert Blog.__declared__ == {
            "Text": EdmType.STRING, "Rating": EdmType.INT32, "Views": EdmType.INT64,
            "Score": EdmType.DOUBLE, "Posted": EdmType.DATETIME, "Id": EdmType.GUID,
            "Avatar": EdmType.BINARY, "Published": EdmType.BOOLEAN, "Legacy": EdmType.INT64,
        }

    def test_subclass_inherits_and_extends(self) -> None:
        assert FeaturedBlog.__declared__["Views"] is EdmType.INT64
        assert FeaturedBlog.__declared__["Featured"] is EdmType.BOOLEAN
        assert "Featured" not in Blog.__declared__

    def test_class_attributes_are_property_references(self) -> None:
        assert isinstance(Blog.Rating, DeclaredProperty)
        assert (Blog.Rating.name, Blog.Rating.edm_type) == ("Rating", EdmType.INT32)
        assert Blog.PartitionKey.name == "PartitionKey"

    def test_defaults_and_instances_are_independent(self) -> None:
        first, second = make_blog(), make_blog(Score=2.0)
        assert first.Score == 0.5 and second.Score == 2.0 and first.Posted is None

    def test_unknown_keyword_names_the_property(self) -> None:
        with pytest.raises(TypeError, match="Colour"):
            make_blog(Colour="red")

    def test_unmappable_annotation_is_refused_at_class_creation(self) -> None:
        with pytest.raises(TypeError, match="Tags"):
            class Bad(TableEntity):
                Tags: list[str]

    def test_payload_uses_declared_types(self) -> None:
        payload = entity_to_payload(make_blog(Views=5, Score=1))
        assert payload.types["Views"] is EdmType.INT64  # 5 fits Int32 but Views is declared Int64
        assert payload.types["Score"] is EdmType.DOUBLE  # an int assigned to a float property
        assert payload.values["Posted"] is None and "Timestamp" not in payload.values

    def test_wire_type_that_differs_from_the_declaration_is_kept(self) -> None:
        payload = EntityPayload(
            {"PartitionKey": "p", "RowKey": "r", "Rating": "five", "Text": "t"},
            {"Rating": EdmType.STRING, "Text": EdmType.STRING},
            'W/"1"',
        )
        blog = entity_from_payload(Blog, payload)
        assert blog.Rating == "five"
        assert entity_to_payload(blog).types["Rating"] is EdmType.STRING
        blog.Rating = 4  # a value that no longer fits the wire type goes back to the declaration
        assert entity_to_payload(blog).types["Rating"] is EdmType.INT32

    def test_extra_properties_are_kept_and_written_back(self) -> None:
        payload = EntityPayload(
            {"PartitionKey": "p", "RowKey": "r", "Text": "t", "Mood": 7},
            {"Mood": EdmType.INT64},
            None,
        )
        blog = entity_from_payload(Blog, payload)
        assert blog.extra_properties == {"Mood": 7}
        out = entity_to_payload(blog)
        assert out.values["Mood"] == 7 and out.types["Mood"] is EdmType.INT64

    def test_missing_properties_can_be_refused(self) -> None:
        payload = EntityPayload({"PartitionKey": "p", "RowKey": "r", "Mood": 7}, {}, None)
        with pytest.raises(TableValidationError, match="Mood"):
            entity_from_payload(Blog, payload, ignore_missing_properties=False)

    def test_untyped_values_are_read_as_the_declared_type(self) -> None:
        payload = EntityPayload(
            {"PartitionKey": "p", "RowKey": "r", "Views": "9007199254740993",
             "Posted": "2020-01-01T00:00:00.1234567Z", "Timestamp": "2021-01-01T00:00:00Z"},
            {},
            None,
        )
        blog = entity_from_payload(Blog, payload)
        assert blog.Views == 2**53 + 1
        assert blog.Posted == datetime(2020, 1, 1, 0, 0, 0, 123456, tzinfo=timezone.utc)
        assert blog.Timestamp == datetime(2021, 1, 1, tzinfo=timezone.utc)

    def test_round_trip_through_a_payload(self) -> None:
        blog = make_blog(Id=uuid.uuid4(), Avatar=b"\x00\x01", Posted=parse_datetime("2020-01-01T00:00:00.0000001Z"))
        back = entity_from_payload(Blog, entity_to_payload(blog))
        assert back == blog and back.Posted.ticks_remainder == 1


class TestDynamicEntity:
    def test_mapping_behaviour(self) -> None:
        entity = DynamicEntity(PartitionKey="p", RowKey="r", A=1, B="x")
        entity["C"] = 2.5
        del entity["B"]
        assert dict(entity) == {"A": 1, "C": 2.5} and len(entity) == 2 and "A" in entity and "B" not in entity
        assert entity["PartitionKey"] == "p"  # keys readable by name, but not iterated
        with pytest.raises(KeyError):
            entity["missing"]

    def test_explicit_type_is_remembered_while_values_fit(self) -> None:
        entity = DynamicEntity(PartitionKey="p", RowKey="r", Big=EntityProperty(5, EdmType.INT64))
        assert entity["Big"] == 5 and entity.edm_type("Big") is EdmType.INT64
        entity["Big"] = 7
        assert entity.edm_type("Big") is EdmType.INT64
        entity["Big"] = "seven"  # no longer fits Int64: the new value's own type
        assert entity.edm_type("Big") is EdmType.STRING

    def test_int64_read_back_stays_int64(self) -> None:
        payload = EntityPayload({"PartitionKey": "p", "RowKey": "r", "Big": 5}, {"Big": EdmType.INT64}, 'W/"x"')
        entity = entity_from_payload(DynamicEntity, payload)
        assert entity["Big"] == 5 and entity.etag == 'W/"x"'
        assert entity_to_payload(entity).types["Big"] is EdmType.INT64

    def test_equality_includes_keys_and_types(self) -> None:
        a = DynamicEntity(PartitionKey="p", RowKey="r", N=1)
        assert a == DynamicEntity(PartitionKey="p", RowKey="r", N=1)
        assert a != DynamicEntity(PartitionKey="p", RowKey="s", N=1)
        assert a != DynamicEntity(PartitionKey="p", RowKey="r", N=EntityProperty(1, EdmType.INT64))


class TestLimits:
    @pytest.mark.parametrize("bad", ["a/b", "a\\b", "a#b", "a?b", "a\tb", "a\x7fb", "a\x9fb"])
    def test_forbidden_key_characters(self, bad: str) -> None:
        with pytest.raises(TableValidationError, match="RowKey"):
            entity_to_payload(DynamicEntity(PartitionKey="p", RowKey=bad))

    @pytest.mark.parametrize("ok", ["", "o'neil", "100%", "a b", "é中😀", "*"])
    def test_allowed_keys(self, ok: str) -> None:
        entity_to_payload(DynamicEntity(PartitionKey=ok, RowKey=ok))

    def test_key_length_is_1_kib_in_utf16(self) -> None:
        entity_to_payload(DynamicEntity(PartitionKey="k" * 512, RowKey="r"))
        with pytest.raises(TableValidationError, match="PartitionKey.*1 KiB"):
            entity_to_payload(DynamicEntity(PartitionKey="k" * 513, RowKey="r"))
        with pytest.raises(TableValidationError, match="1 KiB"):
            entity_to_payload(DynamicEntity(PartitionKey="😀" * 257, RowKey="r"))

    def test_missing_keys(self) -> None:
        with pytest.raises(TableValidationError, match="PartitionKey.*required"):
            entity_to_payload(DynamicEntity(RowKey="r"))

    @pytest.mark.parametrize("name", ["1abc", "a-b", "a.b", "", "PartitionKey", "Timestamp", "x" * 256])
    def test_property_names(self, name: str) -> None:
        entity = DynamicEntity(PartitionKey="p", RowKey="r")
        entity._values[name] = 1  # bypass the mapping, which routes system names to attributes
        with pytest.raises(TableValidationError):
            entity_to_payload(entity)

    def test_252_custom_properties_and_no_more(self) -> None:
        entity = DynamicEntity(PartitionKey="p", RowKey="r", **{f"P{i}": i for i in range(252)})
        entity_to_payload(entity)
        entity["P252"] = 0
        with pytest.raises(TableValidationError, match="255 properties"):
            entity_to_payload(entity)

    def test_entity_size_limit(self) -> None:
        # 16 strings of 32,000 characters: about 1,024,000 bytes of UTF-16 plus overhead > 1 MiB
        big = {f"S{i}": "x" * 32000 for i in range(17)}
        with pytest.raises(TableValidationError, match="1 MiB"):
            entity_to_payload(DynamicEntity(PartitionKey="p", RowKey="r", **big))
        fits = {f"S{i}": "x" * 32000 for i in range(16)}
        entity_to_payload(DynamicEntity(PartitionKey="p", RowKey="r", **fits))

    def test_entity_size_uses_the_service_formula_exactly(self) -> None:
        # 4 + 2*len("p" + "r") + per property 8 + 2*len(name) + (4 + 2*len(value)) for strings
        def size(entity: DynamicEntity) -> int:
            total = 4 + 2 * (len(entity.PartitionKey) + len(entity.RowKey))
            return total + sum(8 + 2 * len(name) + 4 + 2 * len(value) for name, value in entity.items())

        names = [f"S{i:02d}" for i in range(16)]
        entity = DynamicEntity(PartitionKey="p", RowKey="r", **{n: "x" * 32768 for n in names[:15]})
        used = size(entity)
        room = (1024 * 1024 - used - (8 + 2 * 3 + 4)) // 2  # characters left for a 16th property
        entity[names[15]] = "x" * room
        assert size(entity) <= 1024 * 1024
        entity_to_payload(entity)  # exactly at the limit (to the byte parity): accepted
        entity[names[15]] = "x" * (room + 1)
        assert size(entity) > 1024 * 1024
        with pytest.raises(TableValidationError, match="1 MiB"):
            entity_to_payload(entity)

    def test_value_limits_name_the_property(self) -> None:
        with pytest.raises(TableValidationError, match="Body.*64 KiB"):
            entity_to_payload(DynamicEntity(PartitionKey="p", RowKey="r", Body="x" * 40000))


@pytest.mark.parametrize("name", ["abc", "A" * 63, "Blogs2", "$MetricsHourPrimaryTransactionsTable"])
def test_valid_table_names(name: str) -> None:
    validate_table_name(name)


@pytest.mark.parametrize("name", ["ab", "A" * 64, "1abc", "a-bc", "a_bc", "abcé", "tables", "Tables"])
def test_invalid_table_names(name: str) -> None:
    with pytest.raises(TableValidationError, match="table"):
        validate_table_name(name)


@pytest.mark.parametrize("name", ["$Metricsé", "$Metrics日本"])
def test_metrics_table_names_are_ascii_too(name: str) -> None:
    with pytest.raises(TableValidationError, match="table"):
        validate_table_name(name)
