"""JSON query pages read column by column give what reading entity by entity gives.

``JsonFormat.parse_entity_page`` groups a page's entities by shape, value kinds and
annotations and converts each property for a whole group; ``read_page`` makes
the entities of a page a column at a time. Both are compared here with the
entity-by-entity paths they replace, on pages that change shape, kinds and
annotations mid-feed, and on malformed values, which must still raise
``ResponseDecodeError`` naming the property.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest

from tablesdk import DynamicEntity, ResponseDecodeError, TableEntity
from tablesdk._entities._edm import EdmDateTime, EntityPage
from tablesdk._entities._entity import entity_from_payload, read_page
from tablesdk._formats.json import JsonFormat


def entity(n: int, **extra: Any) -> dict[str, Any]:
    stamp = f"2024-01-02T03:04:{n % 60:02d}" + ("Z", ".1Z", ".94687Z", ".1234567Z", ".1234560Z")[n % 5]
    return {
        "odata.etag": f'W/"{n}"', "PartitionKey": "p", "RowKey": f"{n:04d}", "Timestamp": stamp,
        "Name": f"n{n}", "Count": n, "Big": str(2**40 + n), "Big@odata.type": "Edm.Int64",
        "Ratio": n / 7, "Ratio@odata.type": "Edm.Double", "When": stamp, "When@odata.type": "Edm.DateTime",
        "Id": str(uuid.UUID(int=n)), "Id@odata.type": "Edm.Guid", "Blob": "AAE=", "Blob@odata.type": "Edm.Binary",
        **extra,
    }


def mixed_feed() -> list[dict[str, Any]]:
    items = [entity(n) for n in range(6)]
    items.append({k: v for k, v in entity(6).items() if not k.startswith("Blob")})  # the shape changes mid-feed
    items.append(entity(7, Count=None))  # null here, Int32 in the others
    items.append(entity(8, Count=2**40))  # an Int64 among Int32s (un-annotated)
    items.append(entity(9, Ratio="NaN"))  # another kind for an annotated Double
    items.append(entity(10, Id="{00000000-0000-0000-0000-00000000000a}"))  # a Guid form the column reader leaves
    items.append(entity(11, Id="ABCDEF01-2345-6789-ABCD-EF0123456789", When="2024-01-02T03:04:05+01:00"))
    items.append(entity(12, Extra="x", **{"Extra@odata.type": "Edm.String"}))
    items.append(entity(13))
    return items


def as_compared(values: dict[str, Any], types: dict[str, Any], etag: str | None) -> tuple[Any, ...]:
    kinds = [(type(v).__name__, getattr(v, "ticks_remainder", None)) for v in values.values()]
    return repr(values), kinds, list(types.items()), etag


def one_by_one(items: list[dict[str, Any]], metadata: str = "minimalmetadata") -> list[tuple[Any, ...]]:
    codec = JsonFormat(metadata)
    out = []
    for item in json.loads(json.dumps(items)):
        payload = codec._payload(item, None)
        out.append(as_compared(payload.values, payload.types, payload.etag))
    return out


def paged(items: list[dict[str, Any]], metadata: str = "minimalmetadata") -> list[tuple[Any, ...]]:
    codec = JsonFormat(metadata)
    out = []
    for _ in range(2):  # cold, then with shapes remembered
        page = codec.parse_entity_page(json.dumps({"value": items}).encode())
        out = [as_compared(v, t, e) for v, t, e in zip(page.values, page.types, page.etags)]
    return out


@pytest.mark.parametrize("metadata", ["minimalmetadata", "fullmetadata", "nometadata"])
def test_a_page_read_by_columns_equals_one_read_entity_by_entity(metadata: str) -> None:
    items = mixed_feed()
    assert paged(items, metadata) == one_by_one(items, metadata)


def test_a_uniform_page_is_read_by_columns() -> None:
    items = [entity(n) for n in range(20)]
    page = JsonFormat()._read_columns(json.loads(json.dumps(items)))
    assert page is not None and len({id(t) for t in page.types}) == 1  # one types dict for the page
    assert paged(items) == one_by_one(items)
    assert type(page.values[3]["Timestamp"]) is EdmDateTime and type(page.values[3]["When"]) is EdmDateTime
    assert page.values[3]["Timestamp"].ticks_remainder == 7 and page.values[3]["Id"] == uuid.UUID(int=3)


def test_a_page_with_an_int64_among_int32s_types_each_entity_by_its_value() -> None:
    items = [entity(n, Count=2**40 if n == 2 else n) for n in range(4)]
    page = JsonFormat().parse_entity_page(json.dumps({"value": items}).encode())
    assert [str(t["Count"]) for t in page.types] == ["Edm.Int32", "Edm.Int32", "Edm.Int64", "Edm.Int32"]
    assert paged(items) == one_by_one(items)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("Id", "00000000-0000-0000-0000-00000000000g", "property 'Id': not a valid Edm.Guid value"),
        ("When", "2024-13-02T03:04:05.1Z", "property 'When': not a valid Edm.DateTime value"),
        ("Big", "9223372036854775808", "property 'Big': not a valid Edm.Int64 value"),
        ("Big", "12x", "property 'Big': not a valid Edm.Int64 value"),
        ("Blob", "AA=E", "property 'Blob': not a valid Edm.Binary value"),
        ("Timestamp", "2024-01-02T03:04:65Z", "property 'Timestamp': not a valid Edm.DateTime value"),
    ],
)
def test_a_malformed_value_in_a_column_raises_naming_the_property(name: str, value: str, message: str) -> None:
    codec = JsonFormat()
    good = json.dumps({"value": [entity(n) for n in range(5)]}).encode()
    codec.parse_entity_page(good)  # the shape is known before the bad value comes
    items = [entity(n) for n in range(5)]
    items[3][name] = value
    for _ in range(2):
        with pytest.raises(ResponseDecodeError, match=re.escape(message)):
            codec.parse_entity_page(json.dumps({"value": items}).encode())
        with pytest.raises(ResponseDecodeError, match=re.escape(message)):
            codec.parse_entities(json.dumps({"value": items}).encode())


def test_the_first_bad_entity_is_reported_whatever_the_columns() -> None:
    items = [entity(n) for n in range(5)]
    items[1]["When"] = "not a date"  # entity 1, a later column
    items[3]["Big"] = "x"  # entity 3, an earlier column
    with pytest.raises(ResponseDecodeError, match="property 'When'"):
        JsonFormat().parse_entity_page(json.dumps({"value": items}).encode())


class _Note(TableEntity):
    Name: str
    Count: int


def _state(obj: Any) -> str:
    if isinstance(obj, DynamicEntity):
        return repr([(k, getattr(obj, k)) for k in ("PartitionKey", "RowKey", "Timestamp", "etag", "_values", "_types")])
    return repr(list(vars(obj).items()))


@pytest.mark.parametrize("entity_type", [DynamicEntity, _Note])
@pytest.mark.parametrize("keep", [True, False])
def test_read_page_builds_what_entity_from_payload_builds(entity_type: type, keep: bool) -> None:
    body = json.dumps({"value": mixed_feed()}).encode()
    want = [entity_from_payload(entity_type, p) for p in JsonFormat().parse_entities(body)]
    page = JsonFormat().parse_entity_page(body)
    before = repr(page.values)
    got = read_page(entity_type, page, keep_values=keep)
    assert [type(e) for e in got] == [type(e) for e in want]
    assert [_state(e) for e in got] == [_state(e) for e in want]
    if keep or entity_type is _Note:
        assert repr(page.values) == before  # the page's values are left as read
    if entity_type is DynamicEntity:
        assert len({id(e._types) for e in got}) == len(got)  # each entity owns its types


def test_a_page_of_payloads_reads_as_they_are() -> None:
    payloads = JsonFormat().parse_entities(json.dumps({"value": mixed_feed()}).encode())
    page = EntityPage.of(payloads)
    assert page.payloads() is payloads
    got = read_page(DynamicEntity, page, keep_values=True)
    assert [_state(e) for e in got] == [_state(entity_from_payload(DynamicEntity, p)) for p in payloads]


# ---------------------------------------------------------------- pages tracked by a context

from tablesdk._unit_of_work._merge import MergeOption  # noqa: E402
from tablesdk._unit_of_work._tracking_context import TrackingContext  # noqa: E402
from tablesdk._queries._query import TableQuery  # noqa: E402


def _tracked(ctx: TrackingContext) -> list[Any]:
    """Everything the context knows, in the order it learnt it."""
    out = []
    for d in ctx.entities:
        slots = [(name, getattr(d, name)) for name in type(d).__slots__ if name != "entity"]
        out.append((type(d.entity).__name__, _state(d.entity), repr(slots)))
    by_identity, by_object = ctx._identities.by_identity, ctx._identities.by_object
    return [out, list(by_identity), [id(d.entity) for d in by_identity.values()] == list(by_object)]


def _track_both(entity_type: type, body: bytes, select: tuple[str, ...] | None, before: list[Any]) -> None:
    """The page tracked at once gives the context and the results that tracking each entity gives."""
    runs = []
    for by_page in (True, False):
        ctx = TrackingContext(None, merge_option=MergeOption.APPEND_ONLY)
        query: TableQuery[Any] = TableQuery(None, "tab", entity_type, select=select)  # type: ignore[arg-type]
        for entity in before:  # tracked already, as a previous query or attach_to left them
            ctx._identities.track("tab", entity_from_payload(entity_type, entity), None, from_service=True)
        codec = JsonFormat("nometadata" if select == ("Name",) else "minimalmetadata")
        if by_page:
            results = ctx._materialize_page(query, codec.parse_entity_page(body))
        else:
            results = [ctx._materialize(query, p) for p in codec.parse_entities(body)]
        runs.append(([_state(e) for e in results], _tracked(ctx)))
    (page_states, page_ctx), (states, tracked) = runs
    assert page_states == states and page_ctx == tracked and page_ctx[2] is True


@pytest.mark.parametrize("entity_type", [DynamicEntity, _Note])
@pytest.mark.parametrize("select", [None, ("Name",), ("Count", "Big")])
def test_a_tracked_page_is_what_tracking_each_entity_gives(entity_type: type, select: tuple[str, ...] | None) -> None:
    uniform = json.dumps({"value": [entity(n) for n in range(8)]}).encode()
    _track_both(entity_type, uniform, select, [])
    _track_both(entity_type, json.dumps({"value": mixed_feed()}).encode(), select, [])


@pytest.mark.parametrize("entity_type", [DynamicEntity, _Note])
def test_a_page_with_entities_tracked_already_or_twice_is_tracked_one_by_one(entity_type: type) -> None:
    items = [entity(n) for n in range(6)]
    known = JsonFormat().parse_entities(json.dumps({"value": items[2:3]}).encode())
    _track_both(entity_type, json.dumps({"value": items}).encode(), None, known)
    twice = items + [entity(4, Name="again")]  # one identity twice in a page: the second refreshes the first
    _track_both(entity_type, json.dumps({"value": twice}).encode(), None, [])


def test_the_entities_of_a_page_share_one_types_dict_and_copy_it_before_changing_it() -> None:
    import copy
    import pickle

    from tablesdk import EdmType, EntityProperty

    body = json.dumps({"value": [entity(n) for n in range(4)]}).encode()
    first, second, third, fourth = read_page(DynamicEntity, JsonFormat().parse_entity_page(body))
    assert first._types is second._types  # one dict for the page
    want = {name: second.edm_type(name) for name in second}
    first["Count"] = EntityProperty(5, EdmType.INT64)
    del third["Id"]
    fourth["Extra"] = "untyped"  # a plain value changes no type
    assert first.edm_type("Count") is EdmType.INT64 and "Id" not in third
    assert {name: second.edm_type(name) for name in second} == want  # the others keep theirs
    assert second._types is fourth._types and type(first._types) is dict and type(third._types) is dict
    for twin in (pickle.loads(pickle.dumps(second)), copy.deepcopy(second)):
        assert twin == second and type(twin._types) is dict
    shallow = copy.copy(second)
    shallow["Count"] = EntityProperty(6, EdmType.INT64)
    assert second.edm_type("Count") is EdmType.INT32
