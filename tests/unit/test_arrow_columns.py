"""Arrow columns without a service: pages to batches, rows to entities, lazy imports, the hidden key."""

from __future__ import annotations

import pickle
import subprocess
import sys
from datetime import timezone

import pyarrow as pa
import pytest

from tablesdk import EdmDateTime, EdmType, SchemaConflictError
from tablesdk._columns._arrow import BatchBuilder
from tablesdk._columns._arrow_write import arrow_rows
from tablesdk._entities._edm import EntityPage

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
CONN = f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};TableEndpoint=http://127.0.0.1:1/devstoreaccount1"


def page(*rows: dict[str, tuple[object, EdmType]]) -> EntityPage:
    values, types = [], []
    for number, row in enumerate(rows):
        values.append({"PartitionKey": "p", "RowKey": str(number), **{k: v for k, (v, _) in row.items()}})
        types.append({"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, **{k: t for k, (_, t) in row.items()}})
    return EntityPage(values, types, [f"W/\"{n}\"" for n in range(len(rows))])


def test_importing_tablesdk_loads_no_optional_dependency() -> None:
    code = (
        "import sys, tablesdk, tablesdk.aio\n"
        "q = tablesdk.CloudStorageAccount.development_storage_account().create_cloud_table_client().create_query('abc')\n"
        "loaded = [m for m in ('pyarrow', 'pandas', 'dask', 'distributed') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_page_becomes_typed_columns_with_nulls_for_missing_values() -> None:
    builder = BatchBuilder(with_etag=True)
    batch = builder.batch(page(
        {"N": (1, EdmType.INT32), "At": (EdmDateTime(2020, 1, 1, 0, 0, 0, 1, timezone.utc, ticks_remainder=3), EdmType.DATETIME)},
        {"L": (2**40, EdmType.INT64)},
    ))
    assert batch.schema.names == ["PartitionKey", "RowKey", "odata.etag", "N", "At", "L"]
    assert batch.column("N").to_pylist() == [1, None]
    assert batch.column("At").cast(pa.int64()).to_pylist() == [1577836800000001300, None]
    assert batch.column("L").type == pa.int64()
    assert batch.column("odata.etag").to_pylist() == ['W/"0"', 'W/"1"']


def test_two_types_in_one_page_raise_or_become_wire_text() -> None:
    mixed = page({"X": (1, EdmType.INT32)}, {"X": (True, EdmType.BOOLEAN)})
    with pytest.raises(SchemaConflictError) as caught:
        BatchBuilder().batch(mixed)
    assert caught.value.keys == ("p", "1") and caught.value.types == (EdmType.INT32, EdmType.BOOLEAN)
    assert BatchBuilder(on_type_conflict="string").batch(mixed).column("X").to_pylist() == ["1", "true"]
    with pytest.raises(ValueError):
        BatchBuilder(on_type_conflict="guess")  # type: ignore[arg-type]


def test_a_conflict_in_a_later_page_rewrites_earlier_batches_as_text() -> None:
    builder = BatchBuilder(on_type_conflict="string")
    first = builder.batch(page({"X": (1.5, EdmType.DOUBLE)}))
    second = builder.batch(page({"X": ("a", EdmType.STRING)}))
    final = builder.output_schema()
    assert [builder.conform(b, final).column("X").to_pylist() for b in (first, second)] == [["1.5"], ["a"]]


def test_rows_become_entities_without_their_nulls() -> None:
    data = pa.table({
        "PartitionKey": ["p", "p"], "RowKey": ["1", "2"], "N": pa.array([None, 5], pa.int64()),
        "S": ["a", None], "Timestamp": pa.array([0, 0], pa.timestamp("ns", tz="UTC")),
    })
    entities = list(arrow_rows(data))
    assert [dict(e) for e in entities] == [{"S": "a"}, {"N": 5}]
    assert entities[1].edm_type("N") is EdmType.INT64 and entities[0].Timestamp is None
    assert len(arrow_rows(data)) == 2


def test_the_connection_secret_hides_the_key() -> None:
    from dask.base import tokenize

    from tablesdk.dask import ConnectionSecret

    secret = ConnectionSecret(CONN)
    assert KEY not in repr(secret) and KEY not in str(secret) and "devstoreaccount1" in repr(secret)
    assert tokenize(secret) == tokenize(ConnectionSecret(CONN.replace(KEY, "b3RoZXI=")))  # the key is not hashed
    copy = pickle.loads(pickle.dumps(secret))
    assert copy.client().account.account_name == "devstoreaccount1"


# ---------------------------------------------------------------- JSON pages straight into columns


def json_response(items: list[dict[str, object]], content_type: str = "application/json;odata=minimalmetadata") -> object:
    import json

    from requests.structures import CaseInsensitiveDict

    from tablesdk._pipeline._http import HttpResponse

    return HttpResponse(200, CaseInsensitiveDict({"content-type": content_type}), json.dumps({"value": items}).encode())


def service_items() -> list[dict[str, object]]:
    """Entities as the service writes them: every EDM type, sparse, annotated where JSON needs it."""
    items: list[dict[str, object]] = []
    for n in range(6):
        item: dict[str, object] = {
            "odata.etag": f'W/"datetime\'2024-01-01T00%3A00%3A0{n}.1234567Z\'"', "PartitionKey": f"p{n % 2}",
            "RowKey": f"{n:03d}", "Timestamp": f"2024-01-01T00:00:0{n}.123456{n}Z", "Name": f"n{n}", "Count": n,
            "Big@odata.type": "Edm.Int64", "Big": str(-(2**63) + n), "Ratio": n / 3, "Ok": n % 2 == 0,
            "When@odata.type": "Edm.DateTime", "When": ["2020-01-01T00:00:00Z", "2020-01-01T00:00:00.1Z"][n % 2],
            "Id@odata.type": "Edm.Guid", "Id": "0000000A-0000-0000-0000-00000000000" + str(n),
            "Blob@odata.type": "Edm.Binary", "Blob": "AAE=",
        }
        if n % 3 == 0:
            del item["Count"]
        items.append(item)
    return items


def codec_batch(items: list[dict[str, object]]) -> pa.RecordBatch:
    """The batch of the page as the JSON codec decodes it."""
    from tablesdk._formats import get_format

    body = json_response(items).body  # type: ignore[attr-defined]
    return BatchBuilder(with_etag=True).batch(get_format("json").parse_entity_page(body))


def test_a_json_page_read_as_columns_equals_the_codec_read() -> None:
    from tablesdk._columns._arrow_json import JsonColumnsReader

    items = service_items()
    found = JsonColumnsReader().read(json_response(items))  # type: ignore[arg-type]
    assert found is not None
    builder = BatchBuilder(with_etag=True)
    fast = builder._from_columns(*found)
    slow = codec_batch(items)
    assert fast.equals(slow) and fast.schema.equals(slow.schema, check_metadata=True)
    assert fast.column("Id").to_pylist()[0] == "0000000a-0000-0000-0000-000000000000"


@pytest.mark.parametrize("change", [
    {"Ratio": "NaN", "Ratio@odata.type": "Edm.Double"},         # a double written as text
    {"Count": 1.5},                                             # Int32 and Double un-annotated in one column
    {"When": "1601-01-01T00:00:00.0000000Z"},                   # beyond timestamp[ns]
    {"When": "2020-01-01T00:00:00"},                            # not the service's form
    {"Big": "+5"},                                              # int() reads it, the service never writes it
    {"Id": "{0000000a-0000-0000-0000-000000000000}"},           # a Guid in another form
    {"Blob": "not base64!"},
    {"RowKey": 5},
    {"Nested": {"a": 1}},
])
def test_pages_the_columns_cannot_read_alike_go_to_the_codec(change: dict[str, object]) -> None:
    from tablesdk._columns._arrow_json import JsonColumnsReader

    items = service_items()
    items[1].update(change)
    assert JsonColumnsReader().read(json_response(items)) is None  # type: ignore[arg-type]


def test_date_like_strings_and_whole_second_datetimes_keep_their_text_across_pages() -> None:
    """Arrow's reader guesses timestamp[s] for date-like strings: the columns must still be what the codec reads."""
    from tablesdk._columns._arrow_json import JsonColumnsReader

    first, second = service_items(), service_items()
    for n, item in enumerate(first + second):
        item["Day"] = "2024-01-01"  # a String property that looks like a date
        item["When"] = f"2020-01-01T00:00:0{n % 10}Z"  # every DateTime a whole second
    for item in second:
        item["Later"] = "2024-02-02"  # first seen on the second page
    reader, builder = JsonColumnsReader(), BatchBuilder(with_etag=True)
    for items in (first, second):
        found = reader.read(json_response(items))  # type: ignore[arg-type]
        assert found is not None
        fast, slow = builder._from_columns(*found), codec_batch(items)
        assert fast is not None
        assert fast.select(slow.schema.names).equals(slow) and fast.column("Day").type == pa.string()
    assert "Day" in reader.string_fields and "Later" in reader.string_fields


@pytest.mark.parametrize("ratios, read", [
    (["1.0", "2.5", "0.0", "3e2"], True),  # whole doubles written as doubles: Double, as the codec reads them
    (["1", "2.5"], False),                # an Int32 and a Double un-annotated: the codec decides
    (["12345678901234567890123", "1.5"], False),  # beyond int64: the codec decides
])
def test_unannotated_numbers_are_doubles_only_when_each_was_written_as_one(ratios: list[str], read: bool) -> None:
    from requests.structures import CaseInsensitiveDict

    from tablesdk._columns._arrow_json import JsonColumnsReader
    from tablesdk._pipeline._http import HttpResponse

    rows = ",".join('{"PartitionKey":"p","RowKey":"%d","Ratio":%s,"Other":%s}' % (n, text, text)
                    for n, text in enumerate(ratios))
    response = HttpResponse(200, CaseInsensitiveDict({"content-type": "application/json;odata=minimalmetadata"}),
                            ('{"value":[%s]}' % rows).encode())
    found = JsonColumnsReader().read(response)
    assert (found is not None) is read
    if found is not None:
        assert found[0]["Ratio"][0] is EdmType.DOUBLE and found[0]["Ratio"][1].to_pylist() == [float(t) for t in ratios]


@pytest.mark.parametrize("body", [
    b'{"value":[{"PartitionKey":"p","RowKey":"1"}]}{"value":[]}',  # two documents: json.loads refuses
    b'{"value":[{"PartitionKey":"p","RowKey":"1"},null]}',
    b'{"value":[{"PartitionKey":"p","RowKey":"1","S":"a","S":"b"}]}',  # a key twice
    b'{"value":[]}',
    b'{"value":{"PartitionKey":"p","RowKey":"1"}}',
])
def test_bodies_json_loads_reads_otherwise_go_to_the_codec(body: bytes) -> None:
    from requests.structures import CaseInsensitiveDict

    from tablesdk._columns._arrow_json import JsonColumnsReader
    from tablesdk._pipeline._http import HttpResponse

    response = HttpResponse(200, CaseInsensitiveDict({"content-type": "application/json;odata=minimalmetadata"}), body)
    assert JsonColumnsReader().read(response) is None


def test_a_string_field_that_becomes_a_number_on_a_later_page_is_read_afresh() -> None:
    from tablesdk._columns._arrow_json import JsonColumnsReader

    first, second = service_items(), service_items()
    for item in second:
        item["Name"] = 7
    reader = JsonColumnsReader()
    assert reader.read(json_response(first)) is not None  # type: ignore[arg-type]
    found = reader.read(json_response(second))  # type: ignore[arg-type]
    assert found is not None and found[0]["Name"][0] is EdmType.INT32


def test_nometadata_pages_go_to_the_codec() -> None:
    from tablesdk._columns._arrow_json import JsonColumnsReader

    response = json_response(service_items(), "application/json;odata=nometadata")
    assert JsonColumnsReader().read(response) is None  # type: ignore[arg-type]
    assert JsonColumnsReader().read(json_response(service_items())) is not None  # type: ignore[arg-type]


def test_a_json_page_fits_an_explicit_schema_as_the_codec_read_does() -> None:
    from tablesdk._columns._arrow_json import JsonColumnsReader
    from tablesdk._formats import get_format

    schema = pa.schema([("RowKey", pa.string()), ("Count", pa.int64()), ("Ratio", pa.float64()), ("Id", pa.string()),
                        ("When", pa.timestamp("ns", tz="UTC")), ("Absent", pa.bool_())])
    items = service_items()
    found = JsonColumnsReader().read(json_response(items))  # type: ignore[arg-type]
    assert found is not None
    fast = BatchBuilder(schema=schema)._fit_columns(*found)
    body = json_response(items).body  # type: ignore[attr-defined]
    assert fast is not None and fast.equals(BatchBuilder(schema=schema).batch(get_format("json").parse_entity_page(body)))
    # a value that does not fit, or a property a strict schema lacks: the general path decides (and raises)
    assert BatchBuilder(schema=pa.schema([("Big", pa.int32())]))._fit_columns(*found) is None
    assert BatchBuilder(schema=schema, strict=True)._fit_columns(*found) is None
