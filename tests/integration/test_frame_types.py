"""EDM types through data frames on every target: a value read into Arrow or pandas and written back
(write_arrow, write_pandas, bulk_insert) comes back with its type and value, a requested EDM type is
fitted or refused by name before anything is sent, and pandas.Timestamp keeps its 100 ns digit."""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timezone
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tablesdk import CloudTableClient, DynamicEntity, EdmType, EntityProperty, TableValidationError
from tablesdk._entities._edm import to_atom_text

pytestmark = pytest.mark.integration

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NS_LOW, _NS_HIGH = -(2**63) + 1, 2**63 - 1  # timestamp[ns]: 1677-09-21 to 2262-04-11


def typed(entity: Any) -> dict[str, tuple[EdmType, str]]:
    """Each property's EDM type and wire text: equal exactly when type and value are."""
    return {name: (entity.edm_type(name), to_atom_text(entity[name], entity.edm_type(name))) for name in entity}


def rows_of(client: CloudTableClient, table: str, partition: str) -> dict[str, dict[str, tuple[EdmType, str]]]:
    query = client.create_query(table).where(f"PartitionKey eq '{partition}'")
    return {entity.RowKey: typed(entity) for entity in query}


# ---------------------------------------------------------------- one test per defect


def test_guid_columns_survive_to_pandas_and_write_pandas(client: CloudTableClient, table: str) -> None:
    ids = [uuid.UUID(int=n * 2**100 + n) for n in range(3)]
    client.bulk_insert(table, [DynamicEntity("src", str(n), Id=ids[n]) for n in range(3)]).raise_on_error()
    frame = client.create_query(table).to_pandas()
    assert frame["Id"].tolist() == ids  # uuid.UUID values, as entities give
    client.write_pandas(table, frame.assign(PartitionKey="copy")).raise_on_error()
    copied = rows_of(client, table, "copy")
    assert {rk: row["Id"][0] for rk, row in copied.items()} == {"0": EdmType.GUID, "1": EdmType.GUID, "2": EdmType.GUID}
    assert copied == rows_of(client, table, "src")


def test_a_pandas_timestamp_keeps_its_100ns_digit_through_entities_and_bulk(client: CloudTableClient, table: str) -> None:
    stamp = pd.Timestamp("2024-02-29T23:59:59.1234567Z")
    client.insert_entity(table, DynamicEntity("p", "one", At=stamp))
    client.bulk_insert(table, [DynamicEntity("p", "bulk", At=stamp)]).raise_on_error()
    written = rows_of(client, table, "p")
    assert written["one"]["At"] == written["bulk"]["At"] == (EdmType.DATETIME, "2024-02-29T23:59:59.1234567Z")
    frame = client.create_query(table).to_pandas()
    assert frame["At"].tolist() == [stamp, stamp]  # the 7th digit read back into pandas


def test_a_pandas_timestamp_finer_than_100ns_is_refused_by_name(client: CloudTableClient, table: str) -> None:
    fine = pd.Timestamp("2024-02-29T23:59:59.123456789Z")
    with pytest.raises(TableValidationError, match="100 ns") as caught:
        client.insert_entity(table, DynamicEntity("p", "one", At=fine))
    assert caught.value.field == "At"
    result = client.bulk_insert(table, [DynamicEntity("p", "bulk", At=fine), DynamicEntity("p", "ok", At=fine.floor("100ns"))])
    assert [o.entity.RowKey for o in result.succeeded] == ["ok"]
    assert isinstance(result.failed[0].error, TableValidationError) and result.failed[0].error.field == "At"
    frame = pd.DataFrame({"PartitionKey": ["p"], "RowKey": ["frame"], "At": [fine]})
    with pytest.raises(TableValidationError, match="100 ns") as caught:
        client.write_pandas(table, frame)
    assert caught.value.field == "At"
    assert set(rows_of(client, table, "p")) == {"ok"}


@pytest.mark.parametrize(("column", "edm", "message"), [
    (pa.array(["not a guid"]), EdmType.GUID, "xxxxxxxx-xxxx"),
    (pa.array([b"short"]), EdmType.GUID, "16 bytes"),
    (pa.array([2**31], pa.int64()), EdmType.INT32, "2147483647"),
    (pa.array([2**63], pa.uint64()), EdmType.INT64, "9223372036854775807"),
    (pa.array([2**53 + 1], pa.int64()), EdmType.DOUBLE, "2\\*\\*53"),
    (pa.array(["aGVsbG8="]), EdmType.BINARY, "binaries"),
    (pa.array([1.5]), EdmType.INT64, "integers"),
    (pa.array([1]), EdmType.STRING, "strings"),
    (pa.array([1]), EdmType.BOOLEAN, "booleans"),
    (pa.array(["yesterday"]), EdmType.DATETIME, "Edm.DateTime"),
    (pa.array([-(2**62)], pa.timestamp("us", tz="UTC")), EdmType.DATETIME, "1601-01-01"),
])
def test_a_requested_edm_type_is_refused_by_name_when_a_value_does_not_fit(
    client: CloudTableClient, table: str, column: Any, edm: EdmType, message: str
) -> None:
    data = pa.table({"PartitionKey": ["p", "p"], "RowKey": ["ok", "bad"],
                     "Value": pa.concat_arrays([pa.nulls(1, column.type), column])})
    with pytest.raises(TableValidationError, match=message) as caught:
        client.write_arrow(table, data, edm_types={"Value": edm})
    assert caught.value.field == "Value" and edm.value in str(caught.value)
    if message not in ("binaries", "integers", "strings", "booleans"):  # a value refused, not the column's type
        assert "RowKey='bad'" in str(caught.value) and "row 1" in str(caught.value)
    assert list(client.create_query(table)) == []  # refused before anything was sent


def test_a_requested_edm_type_is_fitted(client: CloudTableClient, table: str) -> None:
    ident = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
    data = pa.table({
        "PartitionKey": ["p"], "RowKey": ["1"],
        "FromText": [str(ident).upper()], "FromBytes": pa.array([ident.bytes], pa.binary(16)),
        "FromUuid": pa.array([ident.bytes], pa.uuid()),
        "Small": pa.array([2**31 - 1], pa.int64()), "Whole": pa.array([2**53], pa.int64()),
        "When": ["2024-01-31T12:00:00.1234567Z"],
    })
    client.write_arrow(table, data, edm_types={
        "FromText": EdmType.GUID, "FromBytes": EdmType.GUID, "Small": EdmType.INT32, "Whole": EdmType.DOUBLE,
        "When": EdmType.DATETIME,
    }).raise_on_error()
    assert rows_of(client, table, "p")["1"] == {
        "FromText": (EdmType.GUID, str(ident)), "FromBytes": (EdmType.GUID, str(ident)),
        "FromUuid": (EdmType.GUID, str(ident)), "Small": (EdmType.INT32, str(2**31 - 1)),
        "Whole": (EdmType.DOUBLE, to_atom_text(float(2**53), EdmType.DOUBLE)),
        "When": (EdmType.DATETIME, "2024-01-31T12:00:00.1234567Z"),
    }


def test_a_mixed_object_column_is_refused_by_name(client: CloudTableClient, table: str) -> None:
    frame = pd.DataFrame({"PartitionKey": ["p", "p", "p"], "RowKey": ["a", "b", "c"],
                          "Mixed": pd.Series([1, None, "two"], dtype=object)})
    with pytest.raises(TableValidationError, match="one kind") as caught:
        client.write_pandas(table, frame)
    assert caught.value.field == "Mixed"
    assert "int at PartitionKey='p', RowKey='a', row 0" in str(caught.value) and "str at" in str(caught.value)
    frame = pd.DataFrame({"PartitionKey": ["p"], "RowKey": ["a"], "Odd": pd.Series([object()], dtype=object)})
    with pytest.raises(TableValidationError) as caught:
        client.write_pandas(table, frame)
    assert caught.value.field == "Odd"
    assert list(client.create_query(table)) == []


# ---------------------------------------------------------------- every type and edge, generated


_text = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufffe\uffff"), max_size=20)
_double = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, 2.0**53 + 2, 5e-324])
_ticks = st.integers(_NS_LOW // 100 + 1, _NS_HIGH // 100).map(lambda ticks: ticks * 100)
_VALUES: dict[EdmType, Any] = {
    EdmType.STRING: _text,
    EdmType.INT32: st.integers(-(2**31), 2**31 - 1),
    EdmType.INT64: st.integers(-(2**63), 2**63 - 1) | st.sampled_from([2**53 + 1, -(2**53) - 1]),
    EdmType.DOUBLE: _double,
    EdmType.BOOLEAN: st.booleans(),
    EdmType.DATETIME: _ticks,
    EdmType.GUID: st.uuids(),
    EdmType.BINARY: st.binary(max_size=40),
}


def _entity_value(edm: EdmType, value: Any) -> Any:
    if edm is EdmType.DATETIME:
        return pd.Timestamp(value, tz="UTC")  # a pandas.Timestamp with its 100 ns digit
    return EntityProperty(value, edm)


_rows = st.lists(st.fixed_dictionaries({edm.name: st.none() | values for edm, values in _VALUES.items()}),
                 min_size=1, max_size=5)


def _same(expected: dict[str, tuple[EdmType, str]], found: dict[str, tuple[EdmType, str]], through_pandas: bool) -> None:
    if through_pandas:  # pandas has one NaN for a missing Double and a NaN Double: documented, left out
        expected = {name: item for name, item in expected.items() if item != (EdmType.DOUBLE, "NaN")}
    assert found == expected


@pytest.mark.parametrize("path", ["arrow", "pandas"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_rows, data=st.data())
def test_every_edm_value_round_trips_through_frames(
    client: CloudTableClient, target: str, table: str, path: str, rows: list[dict[str, Any]], data: st.DataObject
) -> None:
    source = f"s{uuid.uuid4().hex}"
    entities = []
    for number, row in enumerate(rows):
        entity = DynamicEntity(source, f"{number:02d}")
        for name, value in row.items():
            if value is not None:
                entity[name] = _entity_value(EdmType[name], value)
        entities.append(entity)
    client.bulk_insert(table, entities).raise_on_error()  # bulk_insert: the first path of the round trip
    expected = rows_of(client, table, source)
    assert len(expected) == len(rows)
    for row, entity in zip(expected.values(), entities):
        sent = typed(entity)
        if target.startswith("azurite") and sent.get("DOUBLE") == (EdmType.DOUBLE, "-0.0"):
            sent["DOUBLE"] = (EdmType.DOUBLE, "0.0")  # Azurite stores -0.0 as 0 (the frames then keep its 0)
        assert row == sent
    query = client.create_query(table).where(f"PartitionKey eq '{source}'")
    copy = f"c{uuid.uuid4().hex}"
    if path == "arrow":
        columns = query.to_arrow()
        columns = columns.set_column(0, "PartitionKey", pa.array([copy] * columns.num_rows))
        client.write_arrow(table, columns).raise_on_error()
    else:
        frame = query.to_pandas().assign(PartitionKey=copy)
        client.write_pandas(table, frame).raise_on_error()
    found = rows_of(client, table, copy)
    assert set(found) == set(expected)
    for key, row in expected.items():
        _same(row, found[key], path == "pandas")


_FITS: dict[EdmType, Any] = {  # (Arrow type, values) a user may write as each EDM type; some values do not fit
    EdmType.INT32: st.tuples(st.just(pa.int64()), st.lists(st.integers(-(2**31) - 2, 2**31 + 1) | st.none(), min_size=1, max_size=4)),
    EdmType.INT64: st.tuples(st.just(pa.uint64()), st.lists(st.integers(2**63 - 2, 2**63 + 1) | st.none(), min_size=1, max_size=4)),
    EdmType.DOUBLE: st.tuples(st.just(pa.int64()), st.lists(st.integers(2**53 - 1, 2**53 + 3) | st.none(), min_size=1, max_size=4)),
    EdmType.GUID: st.tuples(st.just(pa.string()), st.lists(
        st.uuids().map(str) | st.uuids().map(lambda u: str(u).upper()) | st.uuids().map(lambda u: u.hex) | st.none(),
        min_size=1, max_size=4)),
    EdmType.DATETIME: st.tuples(st.just(pa.timestamp("ns", tz="UTC")), st.lists(
        st.integers(-(10**18), 10**18).map(lambda n: n - n % 50) | st.none(), min_size=1, max_size=4)),
    EdmType.BINARY: st.tuples(st.sampled_from([pa.binary(), pa.string()]), st.lists(st.binary(max_size=8) | st.none(), min_size=1, max_size=4)),
}


def _fits(edm: EdmType, value: Any) -> bool:
    if edm is EdmType.INT32:
        return bool(-(2**31) <= value < 2**31)
    if edm is EdmType.INT64:
        return bool(value < 2**63)
    if edm is EdmType.DOUBLE:
        return bool(float(value) == value)
    if edm is EdmType.GUID:
        return len(value) == 36
    if edm is EdmType.DATETIME:
        return bool(value % 100 == 0)
    return True


def _as_entity_text(edm: EdmType, value: Any) -> str:
    if edm is EdmType.DOUBLE:
        return to_atom_text(float(value), edm)
    if edm is EdmType.GUID:
        return str(uuid.UUID(value))
    if edm is EdmType.DATETIME:
        return to_atom_text(pd.Timestamp(value, tz="UTC"), edm)
    return to_atom_text(value, edm)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edm=st.sampled_from(sorted(_FITS, key=lambda e: e.value)), data=st.data())
def test_a_requested_edm_type_is_fitted_exactly_or_refused_before_sending(
    client: CloudTableClient, table: str, edm: EdmType, data: st.DataObject
) -> None:
    arrow_type, values = data.draw(_FITS[edm])
    if pa.types.is_string(arrow_type) and edm is EdmType.BINARY:
        values = [None if value is None else value.hex() for value in values]  # text: never taken as bytes
    partition = f"f{uuid.uuid4().hex}"
    columns = pa.table({"PartitionKey": [partition] * len(values), "RowKey": [str(n) for n in range(len(values))],
                        "Value": pa.array(values, arrow_type)})
    fits = pa.types.is_binary(arrow_type) or not pa.types.is_string(arrow_type) or edm is not EdmType.BINARY
    fits = fits and all(value is None or _fits(edm, value) for value in values)
    if not fits:
        with pytest.raises(TableValidationError) as caught:
            client.write_arrow(table, columns, edm_types={"Value": edm})
        assert caught.value.field == "Value" and edm.value in str(caught.value)
        assert rows_of(client, table, partition) == {}
        return
    client.write_arrow(table, columns, edm_types={"Value": edm}).raise_on_error()
    found = rows_of(client, table, partition)
    assert found == {str(n): ({} if value is None else {"Value": (edm, _as_entity_text(edm, value))})
                     for n, value in enumerate(values)}


def test_nan_and_infinities_round_trip_through_arrow(client: CloudTableClient, target: str, table: str) -> None:
    values = [math.nan, math.inf, -math.inf, -0.0]
    client.write_arrow(table, pa.table({"PartitionKey": ["p"] * 4, "RowKey": list("abcd"), "D": values})).raise_on_error()
    back = client.create_query(table).to_arrow().column("D").to_pylist()
    assert math.isnan(back[0]) and back[1:] == [math.inf, -math.inf, 0.0]
    if not target.startswith("azurite"):  # Azurite stores -0.0 as 0
        assert math.copysign(1, back[3]) == -1


def test_a_schema_may_read_guids_as_arrow_uuid(client: CloudTableClient, table: str) -> None:
    ids = [uuid.UUID(int=n * 2**90) for n in range(3)]
    client.bulk_insert(table, [DynamicEntity("p", str(n), Id=ids[n]) for n in range(3)]).raise_on_error()
    client.insert_entity(table, DynamicEntity("p", "none"))
    data = client.create_query(table).to_arrow(schema=pa.schema([("RowKey", pa.string()), ("Id", pa.uuid())]))
    assert data.column("Id").type == pa.uuid() and data.column("Id").to_pylist() == [*ids, None]
