"""EDM types through tablesdk.dask on every target: a frame read by read_table and written by
write_table keeps its Guids and DateTime's 100 ns digit; edm_types= says what a frame cannot."""

from __future__ import annotations

import uuid

import dask
import dask.dataframe as dd
import pandas as pd
import pytest

from tablesdk import CloudTableClient, DynamicEntity, EdmType, TableValidationError
from tablesdk._entities._edm import to_atom_text
from tablesdk.dask import TableWriteError, read_table, write_table

pytestmark = pytest.mark.integration


def typed_rows(client: CloudTableClient, table: str, partition: str) -> dict[str, dict[str, tuple[EdmType, str]]]:
    query = client.create_query(table).where(f"PartitionKey eq '{partition}'")
    return {e.RowKey: {n: (e.edm_type(n), to_atom_text(e[n], e.edm_type(n))) for n in e} for e in query}


def test_guids_and_the_100ns_digit_survive_read_table_and_write_table(
    client: CloudTableClient, connection_string: str, target: str, table: str
) -> None:
    stamp = pd.Timestamp("2024-02-29T23:59:59.1234567Z")
    client.bulk_insert(table, [
        DynamicEntity("a", str(n), Id=uuid.UUID(int=n + 2**127), At=stamp, Note=str(n)) for n in range(4)
    ]).raise_on_error()
    payload_format = target.rsplit("-", 1)[1]
    ddf = read_table(connection_string, table, boundaries=["a0"], payload_format=payload_format)
    with dask.config.set(scheduler="sync"):  # Dask's default string conversion is on
        frame = ddf.compute()
        moved = ddf.reset_index().assign(PartitionKey="b").set_index("PartitionKey", sorted=True)
        written = write_table(moved, connection_string, table, payload_format=payload_format)
    assert sum(written) == 4
    assert frame["Id"].tolist() == [uuid.UUID(int=n + 2**127) for n in range(4)]
    assert typed_rows(client, table, "b") == typed_rows(client, table, "a")
    assert typed_rows(client, table, "b")["0"]["At"] == (EdmType.DATETIME, "2024-02-29T23:59:59.1234567Z")


def test_write_table_edm_types_fits_or_refuses_by_name(client: CloudTableClient, connection_string: str, table: str) -> None:
    ids = [str(uuid.UUID(int=n)) for n in range(4)]
    frame = pd.DataFrame({"PartitionKey": ["p"] * 4, "RowKey": list("abcd"), "Id": ids, "Small": [1, 2, 3, 4]})
    ddf = dd.from_pandas(frame, npartitions=2)  # type: ignore[no-untyped-call]
    with dask.config.set(scheduler="sync"):
        written = write_table(ddf, connection_string, table, edm_types={"Id": EdmType.GUID, "Small": EdmType.INT32})
        assert sum(written) == 4
        row = typed_rows(client, table, "p")["c"]
        assert row == {"Id": (EdmType.GUID, ids[2]), "Small": (EdmType.INT32, "3")}
        with pytest.raises(TableValidationError) as caught:  # a name the frame does not have: refused at once
            write_table(ddf, connection_string, table, edm_types={"Missing": EdmType.GUID})
        assert caught.value.field == "Missing"
        bad = dd.from_pandas(frame.assign(PartitionKey="q", Id=["not a guid", *ids[1:]]), npartitions=1)  # type: ignore[no-untyped-call]
        with pytest.raises(TableWriteError) as failed:
            write_table(bad, connection_string, table, edm_types={"Id": EdmType.GUID})
    assert "Id: Edm.Guid" in str(failed.value) and "RowKey='a'" in str(failed.value)
    assert typed_rows(client, table, "q") == {}  # the partition refused sent nothing
