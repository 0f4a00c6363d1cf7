"""Client-side encryption in tablesdk.dask and tablesdk.polars on the bundled emulator and Azurite:
an engine reads what the client wrote encrypted as the client decrypts it, writes what the client
decrypts, and refuses an encrypted entity rather than hand out its ciphertext without a policy."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import dask
import pandas as pd
import polars as pl
import pytest

from engine_crypto_data import POLICY, decrypted_rows, fill_encrypted, is_secret, stored_is_ciphertext
from tablesdk import CloudStorageAccount, CloudTableClient, EncryptionKeyError, TableValidationError
from tablesdk import dask as tdask
from tablesdk import polars as tpolars
from tablesdk._columns._engine_encryption import EngineEncryption

pytestmark = pytest.mark.integration


@pytest.fixture(params=["devstore", "azurite"])
def conn(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_connection_string"))


@pytest.fixture
def client(conn: str) -> Iterator[CloudTableClient]:
    with CloudStorageAccount.parse(conn).create_cloud_table_client() as made:
        yield made


@pytest.fixture
def encrypted(client: CloudTableClient, unique_table_name: str) -> Iterator[str]:
    fill_encrypted(client, unique_table_name)
    yield unique_table_name
    client.delete_table_if_exists(unique_table_name)


@pytest.fixture
def target(client: CloudTableClient, unique_table_name: str) -> Iterator[str]:
    name = unique_table_name + "w"
    client.create_table(name)
    yield name
    client.delete_table_if_exists(name)


def rows_of(frame: pd.DataFrame | pl.DataFrame) -> list[dict[str, object]]:
    records = frame.to_dicts() if isinstance(frame, pl.DataFrame) else frame.to_dict("records")
    rows = [{k: r[k] for k in ("PartitionKey", "RowKey", "N", "Name", "Secret")} for r in records]
    return sorted(rows, key=lambda row: (row["PartitionKey"], row["RowKey"]))


def test_the_carrier_pickles_and_shows_no_key() -> None:
    carrier = EngineEncryption(POLICY, is_secret)
    again = pickle.loads(pickle.dumps(carrier))
    assert again.policy.key is not None and again.policy.key.get_kid() == "engine-kek" and again.resolver is is_secret
    assert again.policy.protocol == POLICY.protocol
    assert "engine-kek" in repr(carrier) and bytes(range(32)).hex() not in repr(carrier)


def test_dask_reads_what_the_client_wrote_encrypted(conn: str, client: CloudTableClient, encrypted: str) -> None:
    ddf = tdask.read_table(conn, encrypted, npartitions=3, boundaries=["p3", "p6"], encryption_policy=POLICY)
    assert "_ClientEncryptionMetadata1" not in ddf.columns
    with dask.config.set(scheduler="sync"):
        frame = ddf.compute().reset_index()
    assert rows_of(frame) == decrypted_rows(client, encrypted)
    with dask.config.set(scheduler="sync"):
        narrow = tdask.read_table(conn, encrypted, columns=["Secret"], boundaries=["p4"],
                                  encryption_policy=POLICY).compute()
    assert sorted(narrow["Secret"]) == sorted(f"s{n}" for n in range(40))


def test_dask_without_a_policy_refuses_the_encrypted_table(conn: str, encrypted: str) -> None:
    with pytest.raises(EncryptionKeyError, match=f"{encrypted}.*encryption_policy="):
        tdask.read_table(conn, encrypted, boundaries=["p4"])  # the sample meets the metadata
    import pyarrow as pa

    schema = pa.schema([("N", pa.int32()), ("Secret", pa.binary())])  # no sample: a partition refuses
    ddf = tdask.read_table(conn, encrypted, boundaries=["p4"], schema=schema)
    with dask.config.set(scheduler="sync"), pytest.raises(EncryptionKeyError, match="encryption_policy=") as caught:
        ddf.compute()
    assert caught.value.partition_key is not None and caught.value.row_key is not None
    only = tdask.read_table(conn, encrypted, boundaries=["p4"], columns=["Secret"], schema=schema)
    with dask.config.set(scheduler="sync"), pytest.raises(EncryptionKeyError):
        only.compute()


def test_dask_writes_encrypted_for_the_client(conn: str, client: CloudTableClient, target: str) -> None:
    frame = pd.DataFrame({"PartitionKey": [f"p{n % 4}" for n in range(20)], "RowKey": [f"{n:03d}" for n in range(20)],
                          "N": list(range(20)), "Name": [f"n{n}" for n in range(20)],
                          "Secret": [f"s{n}" for n in range(20)]})
    import dask.dataframe as dd

    with dask.config.set(scheduler="sync"):
        tdask.write_table(dd.from_pandas(frame, npartitions=2), conn, target,
                          encryption_policy=POLICY, encrypt_columns=["Secret"])
    assert stored_is_ciphertext(client, target)
    assert decrypted_rows(client, target) == rows_of(frame)


def test_engine_write_choices_are_checked(conn: str, target: str) -> None:
    frame = pl.DataFrame({"PartitionKey": ["p"], "RowKey": ["r"], "Secret": ["s"]})
    with pytest.raises(TableValidationError, match="encrypt_columns"):
        tpolars.write_table(frame, conn, target, encryption_policy=POLICY)  # nothing chosen
    with pytest.raises(TableValidationError, match="encryption_policy"):
        tpolars.write_table(frame, conn, target, encrypt_columns=["Secret"])  # no key
    with pytest.raises(TableValidationError, match="never encrypted"):
        tpolars.write_table(frame, conn, target, encryption_policy=POLICY, encrypt_columns=["RowKey"])


def test_polars_reads_and_writes_encrypted(conn: str, client: CloudTableClient, encrypted: str, target: str) -> None:
    frame = tpolars.read_table(conn, encrypted, boundaries=["p2", "p5"], encryption_policy=POLICY)
    assert rows_of(frame) == decrypted_rows(client, encrypted)
    picked = tpolars.scan_table(conn, encrypted, encryption_policy=POLICY).select("Secret").collect()
    assert sorted(picked["Secret"]) == sorted(f"s{n}" for n in range(40))
    tpolars.write_table(frame, conn, target, encryption_policy=POLICY, encryption_resolver=is_secret).raise_on_error()
    assert stored_is_ciphertext(client, target)
    assert decrypted_rows(client, target) == rows_of(frame)


def test_polars_without_a_policy_refuses(conn: str, encrypted: str) -> None:
    with pytest.raises(EncryptionKeyError, match="encryption_policy="):
        tpolars.read_table(conn, encrypted)
    import pyarrow as pa

    lazy = tpolars.scan_table(conn, encrypted, schema=pa.schema([("Secret", pa.binary())]))
    with pytest.raises(Exception, match="encryption_policy="):  # Polars wraps a source's error in its own
        lazy.select("Secret").collect()


def test_dask_incremental_reads_decrypt_or_refuse(conn: str, client: CloudTableClient, encrypted: str) -> None:
    import pyarrow as pa

    from tablesdk import Watermark

    with dask.config.set(scheduler="sync"):
        changed = tdask.read_table(conn, encrypted, boundaries=["p4"], since=Watermark.start(),
                                   encryption_policy=POLICY).compute().reset_index()
        assert rows_of(changed) == decrypted_rows(client, encrypted)
        assert "_ClientEncryptionMetadata1" not in changed.columns
        stored = client.create_query(encrypted).to_arrow().schema  # as stored: Secret Binary, and the metadata
        given = pa.schema([field for field in stored if not field.name.startswith("_ClientEncryption")])
        blind = tdask.read_table(conn, encrypted, boundaries=["p4"], since=Watermark.start(), schema=given)
        with pytest.raises(EncryptionKeyError, match="encryption_policy="):
            blind.compute()
