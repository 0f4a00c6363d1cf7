"""Dataclasses, pydantic models, attrs classes and plain dicts as entities on every target (issue 24.2,
24.3, 24.5, 24.6): client operations, the context (tracking, ETags, every MergeOption, batches), the
table object's batches and bulk_insert, written and read back."""

from __future__ import annotations

import dataclasses
import decimal
import enum
import uuid
from datetime import date, datetime, timezone
from typing import Annotated, Any, TypedDict

import attrs
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tablesdk import (
    ByValue,
    CloudTableClient,
    DataServiceRequestError,
    Flatten,
    Json,
    MergeOption,
    SaveChangesOptions,
    StoredAs,
    TableBatchOperation,
)

pytestmark = pytest.mark.integration


class Size(enum.Enum):
    SMALL = "s"
    LARGE = "l"


@dataclasses.dataclass
class Order:
    PartitionKey: str
    RowKey: str
    Total: Annotated[int, StoredAs("cpor")]
    Note: str | None = None
    Bulk: Annotated[Size, ByValue] = Size.SMALL
    Price: decimal.Decimal = decimal.Decimal("0")
    Due: date | None = None


@dataclasses.dataclass
class TaggedOrder:
    PartitionKey: str
    RowKey: str
    Total: Annotated[int, StoredAs("cpor")] = 0
    etag: str | None = None


class PItem(pydantic.BaseModel):
    PartitionKey: str
    RowKey: str
    Count: int
    Label: str | None = None
    etag: str | None = None


@attrs.define
class AItem:
    PartitionKey: str
    RowKey: str
    Count: int
    Label: str | None = None


def _order(row: str, total: int = 5) -> Order:
    return Order("p", row, total, "n", Size.LARGE, decimal.Decimal("12.340"), date(2024, 2, 29))


def test_client_operations_round_trip_every_kind_of_object(client: CloudTableClient, table: str) -> None:
    order = _order("1")
    etag = client.insert_entity(table, order)
    assert etag
    assert client.get_entity(table, "p", "1", Order) == order
    assert client.get_entity(table, "p", "1")["cpor"] == 5  # stored under its stored name
    client.insert_entity(table, PItem(PartitionKey="p", RowKey="2", Count=2))
    client.insert_entity(table, AItem("p", "3", 3, "a"))
    client.insert_entity(table, {"PartitionKey": "p", "RowKey": "4", "Count": 4})
    assert [i.Count for i in client.create_query(table, AItem).where("RowKey ge '2'")] == [2, 3, 4]
    items = list(client.create_query(table, PItem).where("RowKey ge '2'"))
    assert [(i.Count, bool(i.etag)) for i in items] == [(2, True), (3, True), (4, True)]
    rows = list(client.create_query(table, dict).where("RowKey eq '4'"))
    assert rows[0]["Count"] == 4 and rows[0]["etag"]
    order.Total = 6
    client.update_entity(table, order, etag=etag)
    assert client.get_entity(table, "p", "1", Order).Total == 6
    client.upsert_entity(table, {"PartitionKey": "p", "RowKey": "4", "Count": 40}, mode="replace")
    assert client.get_entity(table, "p", "4", AItem).Count == 40
    tagged = client.get_entity(table, "p", "1", TaggedOrder)
    assert tagged.etag and tagged.Total == 6
    client.delete_entity(table, tagged)
    client.delete_entity(table, items[0])
    assert [i.RowKey for i in client.create_query(table, AItem)] == ["3", "4"]


def test_the_context_tracks_objects_without_an_etag_field(client: CloudTableClient, table: str) -> None:
    ctx = client.get_table_service_context()
    order, row = _order("1"), {"PartitionKey": "p", "RowKey": "2", "Count": 1}
    ctx.add_object(table, order)
    ctx.add_object(table, row)
    ctx.save_changes(SaveChangesOptions.BATCH)
    descriptor = ctx.get_entity_descriptor(order)
    assert descriptor is not None and descriptor.etag and "etag" not in row
    order.Total = 9
    row["Count"] = 2
    ctx.update_object(order)
    ctx.update_object(row)
    ctx.save_changes()
    assert client.get_entity(table, "p", "1", Order).Total == 9
    assert client.get_entity(table, "p", "2", AItem).Count == 2
    other = client.get_table_service_context()
    stale = other.get(table, "p", "1", Order)
    assert stale is not None
    order.Total = 10
    ctx.update_object(order)
    ctx.save_changes()
    stale.Total = 11
    other.update_object(stale)
    with pytest.raises(DataServiceRequestError) as refused:
        other.save_changes()
    assert refused.value.status_code == 412
    ctx.delete_object(order)
    ctx.delete_object(row)
    ctx.save_changes()
    assert list(client.create_query(table, dict)) == []


@pytest.mark.parametrize("option", list(MergeOption))
def test_every_merge_option_with_a_model(client: CloudTableClient, table: str, option: MergeOption) -> None:
    client.insert_entity(table, AItem("p", "1", 1, "old"))
    ctx = client.get_table_service_context()
    ctx.merge_option = option
    [mine] = ctx.create_query(table, AItem)
    mine.Label = "mine"
    if option is not MergeOption.NO_TRACKING:
        ctx.update_object(mine)
    client.update_entity(table, AItem("p", "1", 2, "theirs"), etag="*")
    [again] = ctx.create_query(table, AItem)
    expected = {
        MergeOption.APPEND_ONLY: (1, "mine"), MergeOption.OVERWRITE_CHANGES: (2, "theirs"),
        MergeOption.PRESERVE_CHANGES: (2, "mine"), MergeOption.NO_TRACKING: (2, "theirs"),
    }[option]
    assert (again.Count, again.Label) == expected
    assert (again is mine) is (option is not MergeOption.NO_TRACKING)
    if option in (MergeOption.OVERWRITE_CHANGES, MergeOption.PRESERVE_CHANGES):
        ctx.update_object(again)
        ctx.save_changes()  # the ETag taken from the refresh is current
        assert client.get_entity(table, "p", "1", AItem).Label == expected[1]


def test_table_batches_and_bulk_insert_take_models_and_dicts(client: CloudTableClient, table: str) -> None:
    orders = client.get_table_reference(table)
    tagged = TaggedOrder("p", "1", 1)
    batch: TableBatchOperation[Any] = TableBatchOperation()
    batch.insert(tagged)
    batch.insert({"PartitionKey": "p", "RowKey": "2", "Count": 2})
    batch.insert(PItem(PartitionKey="p", RowKey="3", Count=3))
    results = orders.execute_batch(batch)
    assert all(r.status in (201, 204) for r in results) and tagged.etag == results[0].etag
    loaded = client.bulk_insert(table, [{"PartitionKey": "b", "RowKey": f"{i:03}", "Count": i} for i in range(150)])
    assert loaded.succeeded == 150 if isinstance(loaded.succeeded, int) else len(loaded.succeeded) == 150
    assert sum(i.Count for i in client.create_query(table, AItem).where("PartitionKey eq 'b'")) == sum(range(150))


def test_a_resolved_query_gives_what_the_resolver_makes(client: CloudTableClient, table: str) -> None:
    client.bulk_insert(table, [{"PartitionKey": "p", "RowKey": f"{i:02}", "Count": i, "Label": "x"} for i in range(5)])
    calls: list[str] = []

    def summary(pk: str, rk: str, timestamp: Any, properties: dict[str, Any], etag: str | None) -> tuple[str, int]:
        calls.append(rk)
        assert timestamp is not None and etag and "Count" in properties and "RowKey" not in properties
        return (f"{pk}/{rk}", properties["Count"])

    query = client.create_query(table, AItem).where("Count ge 1").page_size(2).resolve(summary)
    rows = iter(query)
    assert next(rows) == ("p/01", 1) and calls == ["01", "02"]  # the first page only, so far
    assert list(rows) == [("p/02", 2), ("p/03", 3), ("p/04", 4)]
    ctx = client.get_table_service_context()
    assert ctx.create_query(table).resolve(summary).first() == ("p/00", 0)
    assert ctx.entities == []  # a resolver's results are not tracked


def test_a_property_resolver_types_values_read_without_metadata(target: str, connection_string: str, table: str) -> None:
    # Only JSON reads without metadata: the table is read over JSON whatever the target's format.
    from tablesdk import CloudStorageAccount, DynamicEntity, EdmType, EntityProperty

    account = CloudStorageAccount.parse(connection_string)
    with account.create_cloud_table_client(payload_format="json", json_metadata="nometadata") as bare:
        bare.insert_entity(table, DynamicEntity(PartitionKey="p", RowKey="r", Big=EntityProperty(2**40, EdmType.INT64),
                                                When=datetime(2024, 1, 2, tzinfo=timezone.utc), Text="7"))
        plain = bare.get_entity(table, "p", "r")
        assert plain["Big"] == str(2**40)  # no metadata: Int64 arrives as text

        def types(pk: str, rk: str, name: str, value: Any) -> EdmType | None:
            return {"Big": EdmType.INT64, "When": EdmType.DATETIME}.get(name)

        [typed] = bare.create_query(table).with_property_resolver(types)
        assert typed["Big"] == 2**40 and typed.edm_type("Big") is EdmType.INT64
        assert typed["When"] == datetime(2024, 1, 2, tzinfo=timezone.utc) and typed["Text"] == "7"


@dataclasses.dataclass
class Address:
    Street: str
    City: str | None = None


class Box(TypedDict):
    W: int
    H: int


class Shipping(pydantic.BaseModel):
    Address: Address
    Note: str | None = None


@dataclasses.dataclass
class Parcel:
    PartitionKey: str
    RowKey: str
    Shipping: Shipping | None
    Box: Box
    Billing: Annotated[Address, Flatten("__")] | None = None
    Tags: Json[list[str]] = dataclasses.field(default_factory=list)
    Seen: Json[set[int]] = dataclasses.field(default_factory=set)
    Map: Json[dict[int, tuple[int, str]]] = dataclasses.field(default_factory=dict)


_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=12)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    street=_texts, city=st.none() | _texts, has_shipping=st.booleans(), billing=st.none() | _texts,
    w=st.integers(-(2**31), 2**31 - 1), tags=st.lists(_texts, max_size=4), seen=st.sets(st.integers(), max_size=4),
    mapping=st.dictionaries(st.integers(-1000, 1000), st.tuples(st.integers(), _texts), max_size=3),
)
def test_nested_objects_and_json_fields_round_trip(
    client: CloudTableClient, table: str, street: str, city: str | None, has_shipping: bool,
    billing: str | None, w: int, tags: list[str], seen: set[int], mapping: dict[int, tuple[int, str]],
) -> None:
    shipping = Shipping(Address=Address(street, city)) if has_shipping else None
    parcel = Parcel("p", uuid.uuid4().hex, shipping, {"W": w, "H": 1},
                    Address(billing) if billing is not None else None, tags, seen, mapping)
    client.insert_entity(table, parcel)
    assert client.get_entity(table, "p", parcel.RowKey, Parcel) == parcel


class OpenItem(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    PartitionKey: str
    RowKey: str
    Count: int = 0


@dataclasses.dataclass
class Shipment:
    PartitionKey: str
    RowKey: str
    To: Address | None = None
    Count: int = 0


@pytest.mark.parametrize("option", [MergeOption.OVERWRITE_CHANGES, MergeOption.PRESERVE_CHANGES])
def test_a_refresh_takes_nested_fields_and_undeclared_ones(
    client: CloudTableClient, table: str, option: MergeOption
) -> None:
    client.insert_entity(table, Shipment("p", "s", Address("1 Main St", "Springfield")))
    client.insert_entity(table, OpenItem(PartitionKey="p", RowKey="o", Tag="old"))
    ctx = client.get_table_service_context()
    ctx.merge_option = option
    [shipment] = ctx.create_query(table, Shipment).where("RowKey eq 's'")
    [item] = ctx.create_query(table, OpenItem).where("RowKey eq 'o'")
    shipment.Count = item.Count = 5
    ctx.update_object(shipment)
    ctx.update_object(item)
    client.update_entity(table, Shipment("p", "s", Address("2 Elm St", None), 1), mode="replace", etag="*")
    client.update_entity(table, OpenItem(PartitionKey="p", RowKey="o", Count=1, Tag="new", More=2), mode="replace", etag="*")
    [again] = ctx.create_query(table, Shipment).where("RowKey eq 's'")
    [open_again] = ctx.create_query(table, OpenItem).where("RowKey eq 'o'")
    local = 5 if option is MergeOption.PRESERVE_CHANGES else 1
    assert again is shipment and open_again is item
    assert shipment == Shipment("p", "s", Address("2 Elm St", None), local)
    assert (item.Count, item.__pydantic_extra__) == (local, {"Tag": "new", "More": 2})
