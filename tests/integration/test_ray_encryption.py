"""Client-side encryption in tablesdk.ray, on Ray worker processes (the policy travels pickled):
a read equals the client's decrypted read, a write is read back decrypted by the client, and a read
without a policy refuses an encrypted entity."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
import ray.data

from engine_crypto_data import POLICY, decrypted_rows, fill_encrypted, stored_is_ciphertext
from test_ray import local_ray  # noqa: F401 - the module's Ray, on loopback
from tablesdk import CloudStorageAccount, CloudTableClient
from tablesdk.ray import read_table, write_table

pytestmark = pytest.mark.integration


@pytest.fixture(params=["devstore", "azurite"])
def conn(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_connection_string"))


@pytest.fixture
def client(conn: str) -> Iterator[CloudTableClient]:
    with CloudStorageAccount.parse(conn).create_cloud_table_client() as made:
        yield made


def test_ray_reads_and_writes_encrypted(conn: str, client: CloudTableClient, unique_table_name: str) -> None:
    fill_encrypted(client, unique_table_name)
    copy = unique_table_name + "w"
    client.create_table(copy)
    try:
        dataset = read_table(conn, unique_table_name, boundaries=["p4"], encryption_policy=POLICY)
        rows = sorted(({k: r[k] for k in ("PartitionKey", "RowKey", "N", "Name", "Secret")} for r in dataset.take_all()),
                      key=lambda row: (row["PartitionKey"], row["RowKey"]))
        assert rows == decrypted_rows(client, unique_table_name)
        write_table(ray.data.from_arrow(pa.Table.from_pylist(rows)), conn, copy, encryption_policy=POLICY,
                    encrypt_columns=["Secret"])
        assert stored_is_ciphertext(client, copy)
        assert decrypted_rows(client, copy) == rows
        with pytest.raises(Exception, match="encryption_policy="):  # Ray wraps a task's error in its own
            read_table(conn, unique_table_name, boundaries=["p4"], schema=pa.schema([("Secret", pa.binary())])
                       ).take_all()
    finally:
        client.delete_table_if_exists(unique_table_name)
        client.delete_table_if_exists(copy)
