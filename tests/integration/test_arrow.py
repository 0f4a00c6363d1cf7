"""Tables as Arrow columns and pandas frames, on every target: reads equal the entity scan value by
value, conflicts and schemas, and writes from columns that read back exactly."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from tablesdk import (
    CloudStorageAccount,
    CloudTableClient,
    DynamicEntity,
    EdmDateTime,
    EdmType,
    EntityProperty,
    SchemaConflictError,
    TableValidationError,
    prop,
)
from tablesdk._columns._arrow import EDM_TYPE_KEY, ETAG_COLUMN, edm_type_of_field
from tablesdk._columns._arrow_write import _python_values
from tablesdk._entities._edm import to_atom_text

pytestmark = pytest.mark.integration


def every_type_entities() -> list[DynamicEntity]:
    """Entities holding every EDM type, sparse (each property missing somewhere), with edge values."""
    entities = []
    samples: dict[str, list[Any]] = {
        "Text": ["", "plain", "ünïcödé ☃ 𝄞", "x" * 300],
        "Small": [0, -(2**31), 2**31 - 1, 7],
        "Big": [EntityProperty(v, EdmType.INT64) for v in (0, -(2**63), 2**63 - 1, 5)],
        "Real": [0.0, -0.0, 1e300, 1 / 3],
        "Flag": [True, False, True, False],
        "When": [
            EdmDateTime(2020, 1, 2, 3, 4, 5, 678901, timezone.utc, ticks_remainder=2),
            datetime(1970, 1, 1, tzinfo=timezone.utc),
            EdmDateTime(2262, 4, 11, 0, 0, 0, 0, timezone.utc, ticks_remainder=9),
            datetime(1700, 6, 1, 12, tzinfo=timezone.utc),
        ],
        "Id": [uuid.UUID(int=0), uuid.uuid5(uuid.NAMESPACE_DNS, "a"), uuid.UUID(int=2**128 - 1), uuid.UUID(int=3)],
        "Blob": [b"", b"\x00\xff", bytes(range(256)), b"z"],
    }
    for row in range(8):
        entity = DynamicEntity(f"p{row % 3}", f"r{row:02d}")
        for column, (name, values) in enumerate(samples.items()):
            if (row + column) % 5 != 4:  # every property is missing from some rows
                entity[name] = values[row % 4]
        entities.append(entity)
    return entities


def wire_rows_of_entities(client: CloudTableClient, table: str) -> list[dict[str, str]]:
    rows = []
    for entity in client.create_query(table):
        row = {"PartitionKey": entity.PartitionKey, "RowKey": entity.RowKey}
        assert entity.Timestamp is not None
        row["Timestamp"] = to_atom_text(entity.Timestamp, EdmType.DATETIME)
        for name in entity:
            row[name] = to_atom_text(entity[name], entity.edm_type(name))
        rows.append(row)
    return rows


def wire_rows_of_table(data: pa.Table) -> list[dict[str, str]]:
    """Each row's non-null values as wire text of the EDM type in the field's metadata."""
    columns = {}
    for field in data.schema:
        if field.name == ETAG_COLUMN:
            continue
        edm = edm_type_of_field(field)
        assert edm is not None
        columns[field.name] = (edm, _python_values(data.column(field.name).combine_chunks(), edm))
    return [
        {name: to_atom_text(values[i], edm) for name, (edm, values) in columns.items() if values[i] is not None}
        for i in range(data.num_rows)
    ]


@pytest.fixture
def loaded(client: CloudTableClient, table: str) -> str:
    client.bulk_insert(table, every_type_entities()).raise_on_error()
    return table


def test_to_arrow_equals_the_entity_scan_value_by_value(client: CloudTableClient, loaded: str) -> None:
    data = client.create_query(loaded).page_size(3).to_arrow()
    assert data.schema.names[:3] == ["PartitionKey", "RowKey", "Timestamp"]
    assert wire_rows_of_table(data) == wire_rows_of_entities(client, loaded)
    types = {field.name: field.type for field in data.schema}
    assert types["Small"] == pa.int32() and types["Big"] == pa.int64() and types["Real"] == pa.float64()
    assert types["Flag"] == pa.bool_() and types["Id"] == pa.string() and types["Blob"] == pa.binary()
    assert types["When"] == pa.timestamp("ns", tz="UTC") == types["Timestamp"]
    assert data.schema.field("Id").metadata == {EDM_TYPE_KEY: b"Edm.Guid"}
    # the seventh digit is kept: 2020-01-02T03:04:05.6789012Z
    when = data.column("When").cast(pa.int64()).to_pylist()
    assert 1577934245678901200 in when
    assert data.column("Small").null_count > 0  # sparse: missing values are nulls


def test_iter_arrow_batches_gives_one_batch_per_page(client: CloudTableClient, loaded: str) -> None:
    batches = list(client.create_query(loaded).page_size(3).iter_arrow_batches())
    assert [batch.num_rows for batch in batches] == [3, 3, 2]
    assert all(isinstance(batch, pa.RecordBatch) for batch in batches)
    # each batch has every column seen so far in the scan
    for earlier, later in zip(batches, batches[1:]):
        assert later.schema.names[: len(earlier.schema.names)] == earlier.schema.names


def test_select_filter_take_and_etag(client: CloudTableClient, loaded: str) -> None:
    query = client.create_query(loaded).where(prop("PartitionKey") == "p1").select("Small", "Text")
    data = query.to_arrow(with_etag=True)
    entities = list(query)
    assert data.column("RowKey").to_pylist() == [e.RowKey for e in entities]
    assert data.column(ETAG_COLUMN).to_pylist() == [e.etag for e in entities]
    assert set(data.schema.names) <= {"PartitionKey", "RowKey", "Timestamp", "Small", "Text", ETAG_COLUMN}
    assert client.create_query(loaded).take(5).page_size(2).to_arrow().num_rows == 5


def test_a_property_with_two_edm_types_raises_naming_both(client: CloudTableClient, table: str) -> None:
    client.bulk_insert(table, [
        DynamicEntity("a", "1", Mixed=5), DynamicEntity("a", "2", Other=1), DynamicEntity("b", "1", Mixed="five"),
    ]).raise_on_error()
    for page_size in (1, 1000):  # across pages and within one page
        with pytest.raises(SchemaConflictError) as caught:
            client.create_query(table).page_size(page_size).to_arrow()
        error = caught.value
        assert error.property_name == "Mixed" and set(error.types) == {EdmType.INT32, EdmType.STRING}
        assert "Edm.Int32" in str(error) and "Edm.String" in str(error) and "RowKey='1'" in str(error)
        assert isinstance(error, ValueError)
        data = client.create_query(table).page_size(page_size).to_arrow(on_type_conflict="string")
        assert data.schema.field("Mixed").type == pa.string()
        assert data.column("Mixed").to_pylist() == ["5", None, "five"]


def test_an_explicit_schema_is_honoured_and_checked(client: CloudTableClient, loaded: str) -> None:
    schema = pa.schema([("PartitionKey", pa.string()), ("RowKey", pa.string()), ("Small", pa.int64()),
                        ("Real", pa.float64()), ("Missing", pa.string())])
    data = client.create_query(loaded).to_arrow(schema=schema)
    assert data.schema == schema
    assert data.column("Missing").null_count == data.num_rows
    entities = {(e.PartitionKey, e.RowKey): e.get("Small") for e in client.create_query(loaded)}
    assert dict(zip(zip(data.column("PartitionKey").to_pylist(), data.column("RowKey").to_pylist()),
                    data.column("Small").to_pylist())) == entities
    with pytest.raises(SchemaConflictError) as caught:
        client.create_query(loaded).to_arrow(schema=pa.schema([("Big", pa.int32())]))
    assert caught.value.property_name == "Big" and caught.value.keys is not None
    assert "PartitionKey=" in str(caught.value) and "int32" in str(caught.value)
    with pytest.raises(SchemaConflictError, match="'Text'.*Edm.String"):
        client.create_query(loaded).to_arrow(schema=pa.schema([("Text", pa.float64())]))


def test_datetimes_beyond_nanosecond_range_need_a_microsecond_schema(client: CloudTableClient, table: str) -> None:
    early = datetime(1601, 1, 1, tzinfo=timezone.utc)
    client.insert_entity(table, DynamicEntity("p", "r", At=early))
    with pytest.raises(SchemaConflictError, match="'At'.*timestamp\\('us'"):
        client.create_query(table).to_arrow()
    data = client.create_query(table).to_arrow(schema=pa.schema([("At", pa.timestamp("us", tz="UTC"))]))
    assert data.column("At").to_pylist()[0] == early


def test_to_pandas_keeps_integers_and_booleans_nullable(client: CloudTableClient, loaded: str) -> None:
    frame = client.create_query(loaded).to_pandas()
    assert str(frame["Small"].dtype) == "Int32" and str(frame["Big"].dtype) == "Int64"
    assert str(frame["Flag"].dtype) == "boolean"
    assert frame["Small"].isna().any() and frame["Flag"].isna().any()
    assert isinstance(frame["When"].dtype, pd.DatetimeTZDtype) and str(frame["When"].dt.tz) == "UTC"
    assert frame["Big"].max() == 2**63 - 1  # no detour through floats


def test_write_arrow_round_trips_every_edm_type(client: CloudTableClient, loaded: str, unique_table_name: str) -> None:
    copy = unique_table_name + "c"
    client.create_table(copy)
    try:
        data = client.create_query(loaded).to_arrow(with_etag=True)
        result = client.write_arrow(copy, data)
        assert len(result.succeeded) == data.num_rows and not result.failed

        def without_timestamp(rows: list[dict[str, str]]) -> list[dict[str, str]]:
            return [{k: v for k, v in row.items() if k != "Timestamp"} for row in rows]

        assert without_timestamp(wire_rows_of_entities(client, copy)) == without_timestamp(
            wire_rows_of_entities(client, loaded)
        )
        # nulls are left out: no entity carries a property it did not have
        for entity in client.create_query(copy):
            assert None not in entity.values()
    finally:
        client.delete_table(copy)


def test_write_arrow_types_columns_by_arrow_type_and_modes(client: CloudTableClient, table: str) -> None:
    stamp = pd.Timestamp("2021-05-06T07:08:09.1234567Z")
    data = pa.table({
        "PartitionKey": ["p", "p"], "RowKey": ["1", "2"],
        "I64": pa.array([1, None], pa.int64()), "I32": pa.array([2, 3], pa.int32()),
        "F": [1.5, None], "B": [True, None], "S": ["s", None], "Y": pa.array([b"\x01", None], pa.binary()),
        "T": pa.array([stamp.value, None], pa.timestamp("ns", tz="UTC")),
        "G": [str(uuid.UUID(int=9)), None],
    })
    result = client.write_arrow(table, data, edm_types={"G": EdmType.GUID})
    assert len(result.succeeded) == 2
    first = client.get_entity(table, "p", "1")
    assert {name: first.edm_type(name) for name in first} == {
        "I64": EdmType.INT64, "I32": EdmType.INT32, "F": EdmType.DOUBLE, "B": EdmType.BOOLEAN,
        "S": EdmType.STRING, "Y": EdmType.BINARY, "T": EdmType.DATETIME, "G": EdmType.GUID,
    }
    assert to_atom_text(first["T"], EdmType.DATETIME) == "2021-05-06T07:08:09.1234567Z"
    assert set(client.get_entity(table, "p", "2")) == {"I32"}
    # insert of an existing entity fails per entity; replace overwrites, merge keeps other properties
    again = client.write_arrow(table, data.select(["PartitionKey", "RowKey", "I32"]))
    assert len(again.failed) == 2
    client.write_arrow(table, pa.table({"PartitionKey": ["p"], "RowKey": ["1"], "New": [1]}), mode="merge")
    assert set(client.get_entity(table, "p", "1")) == set(first) | {"New"}
    client.write_arrow(table, pa.table({"PartitionKey": ["p"], "RowKey": ["1"], "New": [2]}), mode="replace")
    assert set(client.get_entity(table, "p", "1")) == {"New"}


def test_write_arrow_checks_the_columns_before_sending(client: CloudTableClient, table: str) -> None:
    with pytest.raises(TableValidationError, match="RowKey"):
        client.write_arrow(table, pa.table({"PartitionKey": ["p"]}))
    with pytest.raises(TableValidationError, match="PartitionKey.*null"):
        client.write_arrow(table, pa.table({"PartitionKey": ["p", None], "RowKey": ["1", "2"]}))
    with pytest.raises(TableValidationError, match="100 ns"):
        client.write_arrow(table, pa.table({
            "PartitionKey": ["p"], "RowKey": ["1"], "T": pa.array([1], pa.timestamp("ns", tz="UTC")),
        }))
    with pytest.raises(TableValidationError, match="Arrow type"):
        client.write_arrow(table, pa.table({"PartitionKey": ["p"], "RowKey": ["1"], "L": [[1, 2]]}))
    assert list(client.create_query(table)) == []
    # per-entity limits are bulk_insert's: the bad row fails alone
    result = client.write_arrow(table, pa.table({"PartitionKey": ["p", "p"], "RowKey": ["ok", "bad/key"]}))
    assert [o.entity.RowKey for o in result.succeeded] == ["ok"] and len(result.failed) == 1


def test_write_pandas_round_trips(client: CloudTableClient, table: str) -> None:
    frame = pd.DataFrame({
        "PartitionKey": ["a", "a", "b"], "RowKey": ["1", "2", "3"],
        "Count": pd.array([1, None, 3], dtype="Int32"), "Total": pd.array([10, 20, None], dtype="Int64"),
        "Ok": pd.array([True, None, False], dtype="boolean"), "Name": pd.array(["x", "y", None], dtype="string"),
        "At": pd.to_datetime(["2020-01-01T00:00:00.1234567Z", None, "2021-01-01T00:00:00.0000000Z"], utc=True),
        "Ratio": [0.5, 1.5, 2.5],
    })
    client.write_pandas(table, frame).raise_on_error()
    back = client.create_query(table).to_pandas().drop(columns=["Timestamp"])
    pd.testing.assert_frame_equal(back, frame.astype({"PartitionKey": "string", "RowKey": "string"}), check_like=True)
    # a frame read with the PartitionKey index writes the same way
    client.write_pandas(table, back.set_index("PartitionKey"), mode="replace").raise_on_error()


def test_nometadata_needs_a_schema(devstore_connection_string: str, unique_table_name: str) -> None:
    account = CloudStorageAccount.parse(devstore_connection_string)
    schema = pa.schema([
        ("Big", pa.int64()), ("When", pa.timestamp("ns", tz="UTC")),
        pa.field("Id", pa.string(), metadata={EDM_TYPE_KEY: b"Edm.Guid"}), ("Blob", pa.binary()),
        ("Real", pa.float64()), ("Small", pa.int32()), ("Flag", pa.bool_()), ("Text", pa.string()),
    ])
    with account.create_cloud_table_client() as typed, \
            account.create_cloud_table_client(json_metadata="nometadata") as bare:
        typed.create_table(unique_table_name)
        try:
            typed.bulk_insert(unique_table_name, every_type_entities()).raise_on_error()
            with pytest.raises(SchemaConflictError, match="schema"):
                bare.create_query(unique_table_name).to_arrow()
            data = bare.create_query(unique_table_name).to_arrow(schema=schema)
            expected = typed.create_query(unique_table_name).to_arrow(schema=schema)
        finally:
            typed.delete_table(unique_table_name)
    assert data.equals(expected) and data.num_rows == 8


@pytest.mark.asyncio
async def test_the_async_client_writes_arrow_and_pandas(devstore_connection_string: str, unique_table_name: str) -> None:
    account = CloudStorageAccount.parse(devstore_connection_string)
    async with account.create_async_cloud_table_client() as aclient:
        await aclient.create_table(unique_table_name)
        try:
            result = await aclient.write_arrow(
                unique_table_name, pa.table({"PartitionKey": ["p"], "RowKey": ["1"], "N": pa.array([5], pa.int64())})
            )
            assert len(result.succeeded) == 1
            frame = pd.DataFrame({"PartitionKey": ["p"], "RowKey": ["2"], "Ok": pd.array([None], dtype="boolean")})
            assert len((await aclient.write_pandas(unique_table_name, frame)).succeeded) == 1
            first = await aclient.get_entity(unique_table_name, "p", "1")
            assert first["N"] == 5 and first.edm_type("N") is EdmType.INT64
            assert dict(await aclient.get_entity(unique_table_name, "p", "2")) == {}
        finally:
            await aclient.delete_table(unique_table_name)


def test_the_table_object_writes_columns(client: CloudTableClient, table: str) -> None:
    cloud_table = client.get_table_reference(table)
    cloud_table.write_arrow(pa.table({"PartitionKey": ["p"], "RowKey": ["1"], "N": [1]})).raise_on_error()
    cloud_table.write_pandas(pd.DataFrame({"PartitionKey": ["p"], "RowKey": ["1"], "M": [2]}), "merge").raise_on_error()
    assert dict(client.get_entity(table, "p", "1")) == {"N": 1, "M": 2}
