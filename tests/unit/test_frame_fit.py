"""Columns fitted to their EDM type before anything is sent (tablesdk._columns._arrow_fit), Guid columns for
pandas, and pandas.Timestamp values with their 100 ns digit as entity values and filter literals."""

from __future__ import annotations

import uuid

import pandas as pd
import pyarrow as pa
import pytest

from tablesdk import EdmType, TableValidationError, prop
from tablesdk._columns._arrow import EDM_TYPE_KEY, edm_type_of_field, guids_as_uuid
from tablesdk._columns._arrow_fit import frame_to_arrow
from tablesdk._columns._arrow_write import arrow_rows
from tablesdk._entities._edm import to_atom_text


def rows(**columns: object) -> list[dict[str, object]]:
    count = len(next(iter(columns.values())))  # type: ignore[arg-type]
    table = pa.table({"PartitionKey": ["p"] * count, "RowKey": [str(n) for n in range(count)], **columns})
    return [dict(entity) for entity in arrow_rows(table)]


def test_a_pandas_timestamp_is_written_with_its_seventh_digit() -> None:
    assert to_atom_text(pd.Timestamp("2024-01-02T03:04:05.1234567Z"), EdmType.DATETIME) == "2024-01-02T03:04:05.1234567Z"
    assert to_atom_text(pd.Timestamp("2024-01-02T08:04:05.1234567+05:00"), EdmType.DATETIME) == "2024-01-02T03:04:05.1234567Z"


def test_a_pandas_timestamp_finer_than_100ns_is_refused_in_a_filter() -> None:
    assert "05.1234567Z" in (prop("At") == pd.Timestamp("2024-01-02T03:04:05.1234567Z")).render()
    with pytest.raises(TableValidationError, match="100 ns"):
        (prop("At") == pd.Timestamp("2024-01-02T03:04:05.123456789Z")).render()


def test_arrow_uuid_columns_are_guids_and_values_are_uuids() -> None:
    ident = uuid.uuid4()
    assert edm_type_of_field(pa.field("G", pa.uuid())) is EdmType.GUID
    assert rows(G=pa.array([ident.bytes, None], pa.uuid())) == [{"G": ident}, {}]


def test_guids_as_uuid_keeps_values_nulls_and_metadata() -> None:
    ids = [uuid.UUID(int=2**128 - 1), None, uuid.UUID(int=0)]
    field = pa.field("G", pa.string(), metadata={EDM_TYPE_KEY: b"Edm.Guid"})
    table = pa.table([pa.array([None if i is None else str(i) for i in ids])], schema=pa.schema([field]))
    converted = guids_as_uuid(table)
    assert converted.schema.field("G").type == pa.uuid() and converted.schema.field("G").metadata == field.metadata
    assert converted.column("G").to_pylist() == ids
    assert converted.to_pandas()["G"].tolist() == ids


def test_an_object_column_of_uuids_is_a_guid_column_and_a_mixed_one_is_refused() -> None:
    ident = uuid.uuid4()
    frame = pd.DataFrame({"PartitionKey": ["p", "p"], "RowKey": ["a", "b"], "G": [ident, None]})
    assert edm_type_of_field(frame_to_arrow(frame).schema.field("G")) is EdmType.GUID
    for mixed, kinds in ([1, 2.5], ("int", "float")), ([True, 1], ("bool", "int")), ([b"x", "x"], ("bytes", "str")):
        with pytest.raises(TableValidationError, match="one kind") as caught:
            frame_to_arrow(frame.assign(M=pd.Series(mixed, dtype=object)))
        assert caught.value.field == "M" and all(kind in str(caught.value) for kind in kinds)
        assert "RowKey='a', row 0" in str(caught.value) and "RowKey='b', row 1" in str(caught.value)
    # numpy's scalars are of the kind of their Python values; missing values (None, NaN, NA) are not a kind
    import numpy as np

    assert frame_to_arrow(frame.assign(M=pd.Series([np.int64(1), 2], dtype=object))).column("M").to_pylist() == [1, 2]
    assert frame_to_arrow(frame.assign(M=pd.Series(["x", float("nan")], dtype=object))).num_rows == 2


@pytest.mark.parametrize(("column", "edm", "expected"), [
    (pa.array(["0F8FAD5B-D9CB-469F-A165-70867728950E"]), EdmType.GUID, uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")),
    (pa.array([uuid.UUID(int=7).bytes], pa.binary()), EdmType.GUID, uuid.UUID(int=7)),
    (pa.array([2**31 - 1], pa.int64()), EdmType.INT32, 2**31 - 1),
    (pa.array([2**63 - 1], pa.uint64()), EdmType.INT64, 2**63 - 1),
    (pa.array([2**60], pa.int64()), EdmType.DOUBLE, float(2**60)),
    (pa.array([uuid.UUID(int=7).bytes], pa.uuid()), EdmType.STRING, str(uuid.UUID(int=7))),
])
def test_a_requested_type_converts_each_value_exactly(column: object, edm: EdmType, expected: object) -> None:
    table = pa.table({"PartitionKey": ["p"], "RowKey": ["r"], "V": column})
    (entity,) = list(arrow_rows(table, {"V": edm}))
    assert entity["V"] == expected and type(entity["V"]) is type(expected) and entity.edm_type("V") is edm


def test_edm_types_must_be_edm_types_and_keys_stay_strings() -> None:
    table = pa.table({"PartitionKey": ["p"], "RowKey": ["r"], "V": [1]})
    with pytest.raises(TableValidationError, match="EdmType") as caught:
        arrow_rows(table, {"V": "Int32"})  # type: ignore[dict-item]
    assert caught.value.field == "V"
    assert [dict(e) for e in arrow_rows(table, {"V": "Edm.Int64"})] == [{"V": 1}]  # type: ignore[dict-item]
    with pytest.raises(TableValidationError, match="keys are strings"):
        arrow_rows(table, {"RowKey": EdmType.GUID})
