"""The command line's entity files: typed CSV and JSON lines, written and read back exactly."""

from __future__ import annotations

import io
import math
import uuid
from datetime import timezone

import pytest

from tablesdk import DynamicEntity, EdmDateTime, EdmType, EntityProperty
from tablesdk.cli._files import CsvColumns, csv_header, csv_row, payload_json, read_csv, read_jsonl
from tablesdk._entities._entity import entity_to_payload


def entity() -> DynamicEntity:
    return DynamicEntity(
        PartitionKey="p,1", RowKey='r"1', S='a "quoted",\r\nmulti-line, cell', Empty="",
        I64=EntityProperty(7, EdmType.INT64), D=EntityProperty(1.0, EdmType.DOUBLE), Nan=math.nan,
        Inf=-math.inf, T=EdmDateTime(2020, 1, 2, 3, 4, 5, 678901, timezone.utc, ticks_remainder=2),
        G=uuid.UUID(int=5), Bin=b"\x00\x01", Yes=True,
    )


def comparable(item: DynamicEntity) -> tuple[object, ...]:
    payload = entity_to_payload(item, validate=False)
    return tuple((k, payload.types[k], repr(v)) for k, v in sorted(payload.values.items()))


def test_csv_round_trip_is_exact() -> None:
    columns = CsvColumns()
    rows = [csv_row(entity_to_payload(e), columns) for e in (entity(), DynamicEntity(PartitionKey="q", RowKey="2"))]
    text = csv_header(columns) + "".join(rows)
    read = list(read_csv(io.StringIO(text, newline="")))
    assert [number for number, _, _ in read] == [2, 4]  # the first entity's cell spans two lines
    first, second = (item for _, item, _ in read)
    assert isinstance(first, DynamicEntity) and isinstance(second, DynamicEntity)
    assert comparable(first) == comparable(entity())
    assert first["Empty"] == "" and "Empty" not in second  # an empty string is not a missing property


def test_csv_header_names_types_and_new_columns_go_last() -> None:
    columns = CsvColumns()
    csv_row(entity_to_payload(DynamicEntity(PartitionKey="p", RowKey="1", A=1)), columns)
    row = csv_row(entity_to_payload(DynamicEntity(PartitionKey="p", RowKey="2", A="x", B=2**40)), columns)
    assert csv_header(columns) == '"PartitionKey","RowKey","A@Edm.Int32","A","B@Edm.Int64"\r\n'
    assert row == '"p","2",,"x","1099511627776"\r\n'


@pytest.mark.parametrize("text, problem", [
    ("PartitionKey,RowKey,X@Edm.Nope\n", "unknown type"),
    ("PartitionKey,X\n", "needs PartitionKey and RowKey"),
    ("PartitionKey,RowKey,X,X\n", "appears twice"),
    ("", "empty"),
])
def test_csv_bad_headers(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        list(read_csv(io.StringIO(text)))


def test_csv_bad_rows_are_reported_per_row() -> None:
    text = 'PartitionKey,RowKey,N@Edm.Int32\np,1,x\np,2,1,9\n"p"x,3,1\np,4,5\n'
    read = list(read_csv(io.StringIO(text)))
    assert [type(item).__name__ for _, item, _ in read] == ["ValueError", "ValueError", "ValueError", "DynamicEntity"]
    assert "not a valid value" in str(read[0][1]) and "header has 3" in str(read[1][1])


def test_jsonl_round_trip_and_control_keys() -> None:
    line = payload_json(entity_to_payload(entity()))
    stamped = payload_json(entity_to_payload(entity()) , timestamp=False, etag=False)
    assert line == stamped
    rejected = line[:-1] + b',"tablesdk.error":{"code":"X"}}'
    read = list(read_jsonl([line + b"\n", b"\n", b"[1]\n", b"{bad\n", rejected + b"\n"]))
    assert [number for number, _, _ in read] == [1, 3, 4, 5]
    assert comparable(read[0][1]) == comparable(entity()) == comparable(read[3][1])  # type: ignore[arg-type]
    assert isinstance(read[1][1], ValueError) and isinstance(read[2][1], ValueError) and read[2][2] == "{bad"


def test_unreadable_input_is_described_as_input_not_as_a_response() -> None:
    read = list(read_jsonl([b'{"PartitionKey":"a",\n', b"[1]\n"]))
    for _, error, _ in read:
        assert isinstance(error, ValueError) and "response" not in str(error)
    assert "Expecting property name" in str(read[0][1]) and "list" in str(read[1][1])
