"""Client-side encryption on every path of the SDK, against every target (Azurite JSON, the bundled
emulator in JSON and Atom): each write is checked raw (a client with no policy sees only
ciphertext and the metadata) and read back decrypted.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from tablesdk import (
    PROTOCOL_LEGACY,
    BatchOperation,
    BatchOperationKind,
    CloudStorageAccount,
    CloudTableClient,
    DataServiceRequestError,
    DynamicEntity,
    EdmType,
    Encrypted,
    EncryptionKeyError,
    EncryptionRequiredError,
    LocalKeyWrapper,
    MergeOption,
    SaveChangesOptions,
    TableBatchOperation,
    TableEncryptionError,
    TableEncryptionPolicy,
    TableEntity,
    TableOperation,
    TableRequestOptions,
    TableValidationError,
    prop,
)
from tablesdk._encryption import METADATA_PROPERTIES
from tablesdk._entities._entity import entity_to_payload

pytestmark = pytest.mark.integration

KEY = LocalKeyWrapper(bytes(range(32)), "local-1")
OTHER_KEY = LocalKeyWrapper(bytes(range(1, 33)), "local-2")
POLICY = TableEncryptionPolicy(key=KEY)


class Patient(TableEntity):
    Name: Encrypted[str]
    Ward: str
    Age: Encrypted[int]


@dataclasses.dataclass
class Note:
    PartitionKey: str
    RowKey: str
    Text: Encrypted[str]
    Tag: str = ""


def chosen(*names: str) -> Any:
    return lambda pk, rk, name: name in names


@pytest.fixture
def encrypted(client: CloudTableClient) -> Iterator[CloudTableClient]:
    """A client of the same target with a default encryption policy."""
    with CloudTableClient(client.account, payload_format=client.payload_format, encryption_policy=POLICY) as crypto:
        yield crypto


def assert_ciphertext(raw: CloudTableClient, table: str, pk: str, rk: str, *names: str) -> DynamicEntity:
    """The entity as stored: ``names`` are Edm.Binary, and the metadata is there."""
    stored = raw.get_entity(table, pk, rk)
    for name in names:
        assert stored.edm_type(name) is EdmType.BINARY, name
    assert set(METADATA_PROPERTIES) <= set(stored)
    return stored


def test_declared_properties_round_trip_and_are_stored_encrypted(
    client: CloudTableClient, encrypted: CloudTableClient, table: str
) -> None:
    patient = Patient(PartitionKey="w1", RowKey="p1", Name="Ada", Ward="north", Age=36)
    etag = encrypted.insert_entity(table, patient)
    assert etag and patient.etag == etag
    stored = assert_ciphertext(client, table, "w1", "p1", "Name", "Age")
    assert stored["Ward"] == "north" and b"Ada" not in bytes(stored["Name"])
    back = encrypted.get_entity(table, "w1", "p1", Patient)
    assert (back.Name, back.Ward, back.Age, back.etag) == ("Ada", "north", 36, etag)

    with pytest.raises(EncryptionKeyError) as refused:  # the class is Encrypted: no policy, no plaintext
        client.get_entity(table, "w1", "p1", Patient)
    assert refused.value.row_key == "p1" and refused.value.key_id == "local-1"
    with pytest.raises(EncryptionKeyError, match="'Age'"):  # nor a write without one (the first name)
        client.insert_entity(table, Patient(PartitionKey="w1", RowKey="p2", Name="Bob", Ward="x", Age=1))


def test_a_dataclass_and_a_resolver_per_call_and_the_legacy_protocol(
    client: CloudTableClient, encrypted: CloudTableClient, table: str
) -> None:
    encrypted.insert_entity(table, Note("n", "1", "secret", "t"))
    assert_ciphertext(client, table, "n", "1", "Text")
    assert encrypted.get_entity(table, "n", "1", Note) == Note("n", "1", "secret", "t")

    legacy = TableRequestOptions(
        encryption_policy=TableEncryptionPolicy(key=OTHER_KEY, protocol=PROTOCOL_LEGACY), encryption_resolver=chosen("A")
    )
    client.insert_entity(table, DynamicEntity(PartitionKey="n", RowKey="2", A="alpha", B="beta"), options=legacy)
    stored = assert_ciphertext(client, table, "n", "2", "A")
    assert stored["B"] == "beta" and '"1.0"' in stored["_ClientEncryptionMetadata1"]
    assert client.get_entity(table, "n", "2", options=legacy) == DynamicEntity(
        PartitionKey="n", RowKey="2", A="alpha", B="beta"
    )
    with pytest.raises(EncryptionKeyError):  # the client's key is not the one it was written with
        encrypted.get_entity(table, "n", "2")
    with pytest.raises(TableEncryptionError, match="'C'"):  # 1.0 encrypts strings only
        client.insert_entity(table, DynamicEntity(PartitionKey="n", RowKey="3", C=5),
                             options=TableRequestOptions(encryption_policy=legacy.encryption_policy,
                                                         encryption_resolver=chosen("C")))


def test_merges_of_encrypted_entities_are_refused_replaces_re_encrypt(
    client: CloudTableClient, encrypted: CloudTableClient, table: str
) -> None:
    patient = Patient(PartitionKey="w", RowKey="m", Name="Ada", Ward="n", Age=1)
    encrypted.insert_entity(table, patient)
    before = client.get_entity(table, "w", "m")
    patient.Name = "Eve"
    for call in (lambda: encrypted.update_entity(table, patient),
                 lambda: encrypted.upsert_entity(table, patient, mode="merge")):
        with pytest.raises(TableEncryptionError, match="cannot be merged"):
            call()
    assert client.get_entity(table, "w", "m") == before  # nothing was sent
    encrypted.update_entity(table, patient, mode="replace")
    assert encrypted.get_entity(table, "w", "m", Patient).Name == "Eve"
    encrypted.upsert_entity(table, Patient(PartitionKey="w", RowKey="m", Name="Joe", Ward="s", Age=2), mode="replace")
    assert encrypted.get_entity(table, "w", "m", Patient).Name == "Joe"
    # a merge that encrypts nothing is a plain merge
    encrypted.insert_entity(table, DynamicEntity(PartitionKey="w", RowKey="plain", A="1"))
    encrypted.update_entity(table, DynamicEntity(PartitionKey="w", RowKey="plain", B="2", etag="*"))
    assert encrypted.get_entity(table, "w", "plain") == DynamicEntity(PartitionKey="w", RowKey="plain", A="1", B="2")


def test_require_encryption_refuses_unencrypted_reads_and_writes(
    client: CloudTableClient, encrypted: CloudTableClient, table: str
) -> None:
    required = TableRequestOptions(require_encryption=True)
    client.insert_entity(table, DynamicEntity(PartitionKey="r", RowKey="plain", A="a"))
    encrypted.insert_entity(table, Patient(PartitionKey="r", RowKey="enc", Name="n", Ward="w", Age=1))
    with pytest.raises(EncryptionRequiredError) as read:
        encrypted.get_entity(table, "r", "plain", options=required)
    assert read.value.row_key == "plain"
    with pytest.raises(EncryptionRequiredError):
        list(encrypted.create_query(table).with_options(required))
    assert encrypted.get_entity(table, "r", "enc", Patient, options=required).Name == "n"
    with pytest.raises(EncryptionRequiredError):
        encrypted.insert_entity(table, DynamicEntity(PartitionKey="r", RowKey="x", A="a"), options=required)
    with pytest.raises(EncryptionRequiredError):  # required with no policy at all
        client.insert_entity(table, DynamicEntity(PartitionKey="r", RowKey="x", A="a"), options=required)
    assert list(client.create_query(table).where(prop("RowKey") == "x")) == []


def test_queries_select_the_metadata_and_refuse_filters_on_encrypted_properties(
    client: CloudTableClient, encrypted: CloudTableClient, table: str
) -> None:
    for n in range(3):
        encrypted.insert_entity(table, Patient(PartitionKey="q", RowKey=f"{n}", Name=f"name{n}", Ward="w", Age=n))
    client.insert_entity(table, DynamicEntity(PartitionKey="q", RowKey="plain", Ward="e"))
    projected = list(encrypted.create_query(table, Patient).select("Name").page_size(2))
    assert [p.Name for p in projected] == ["name0", "name1", "name2", None]
    assert all(p.Ward is None and p.Age is None for p in projected)
    rows = list(encrypted.create_query(table).where(prop("Ward") == "w").select("Age"))
    assert [r["Age"] for r in rows] == [0, 1, 2] and all(set(r) == {"Age"} for r in rows)
    one = encrypted.create_query(table, Patient).where((Patient.PartitionKey == "q") & (Patient.RowKey == "1"))
    assert [p.Name for p in one.select("Name")] == ["name1"]  # a point query
    with pytest.raises(TableValidationError) as refused:
        encrypted.create_query(table, Patient).where(Patient.Age > 1)
    assert refused.value.field == "Age"
    with pytest.raises(TableValidationError, match="'Name'|Name"):
        encrypted.create_query(table, Patient).where("Name eq 'name1'")
    assert encrypted.count_entities(table) == 4  # key scans need no key
    other = TableRequestOptions(encryption_policy=TableEncryptionPolicy(key=OTHER_KEY))
    assert client.count_entities(table, options=other) == 4


@pytest.mark.parametrize("merge_option", list(MergeOption))
def test_the_context_tracks_plaintext_under_every_merge_option(
    client: CloudTableClient, encrypted: CloudTableClient, table: str, merge_option: MergeOption
) -> None:
    encrypted.insert_entity(table, Patient(PartitionKey="c", RowKey="1", Name="Ada", Ward="w", Age=1))
    ctx = encrypted.get_table_service_context(merge_option=merge_option)
    first = next(iter(ctx.create_query(table, Patient)))
    assert (first.Name, first.Age) == ("Ada", 1) and first.etag
    client_side = Patient(PartitionKey="c", RowKey="1", Name="Bea", Ward="w", Age=2)
    encrypted.update_entity(table, client_side, mode="replace", etag="*")
    again = next(iter(ctx.create_query(table, Patient)))
    if merge_option is MergeOption.NO_TRACKING:
        assert again is not first and again.Name == "Bea"
        return
    assert again is first
    expected = "Ada" if merge_option is MergeOption.APPEND_ONLY else "Bea"
    assert first.Name == expected
    assert ctx.get_entity_descriptor(first).etag == first.etag  # type: ignore[union-attr]
    first.Ward = "east"
    ctx.update_object(first)
    with pytest.raises(TableEncryptionError, match="cannot be merged"):
        ctx.save_changes()
    if merge_option is MergeOption.APPEND_ONLY:  # the ETag of the version read is kept: the write is refused
        with pytest.raises(DataServiceRequestError) as stale:
            ctx.save_changes(SaveChangesOptions.REPLACE_ON_UPDATE)
        assert stale.value.status_code == 412
        return
    response = ctx.save_changes(SaveChangesOptions.REPLACE_ON_UPDATE)
    assert first.etag == next(iter(response)).etag
    descriptor = ctx.get_entity_descriptor(first)
    assert descriptor is not None and descriptor.snapshot is not None and descriptor.snapshot["Name"] == expected
    assert_ciphertext(client, table, "c", "1", "Name", "Age")
    assert encrypted.get_entity(table, "c", "1", Patient).Ward == "east"


def test_context_batches_and_continue_on_error(client: CloudTableClient, encrypted: CloudTableClient, table: str) -> None:
    ctx = encrypted.get_table_service_context()
    for n in range(3):
        ctx.add_object(table, Patient(PartitionKey="b", RowKey=str(n), Name=f"n{n}", Ward="w", Age=n))
    ctx.save_changes(SaveChangesOptions.BATCH)
    for n in range(3):
        assert_ciphertext(client, table, "b", str(n), "Name", "Age")
    ctx.add_object(table, DynamicEntity(PartitionKey="b", RowKey="d", Secret="s"))
    ctx.save_changes(SaveChangesOptions.CONTINUE_ON_ERROR,
                     request_options=TableRequestOptions(encryption_resolver=chosen("Secret")))
    assert_ciphertext(client, table, "b", "d", "Secret")
    fresh = encrypted.get_table_service_context()
    assert fresh.get(table, "b", "d")["Secret"] == "s"
    assert [p.Name for p in fresh.execute_batch(fresh.create_query(table, Patient).where(  # a point query in a batch
        (Patient.PartitionKey == "b") & (Patient.RowKey == "1")))] == ["n1"]


def test_client_batches_and_table_actions(client: CloudTableClient, encrypted: CloudTableClient, table: str) -> None:
    payloads = [entity_to_payload(DynamicEntity(PartitionKey="t", RowKey=str(n), S=f"s{n}")) for n in range(2)]
    operations = [BatchOperation(BatchOperationKind.INSERT, table, "t", str(n), p, None) for n, p in enumerate(payloads)]
    encrypted.execute_batch(operations, options=TableRequestOptions(encryption_resolver=chosen("S")))
    assert_ciphertext(client, table, "t", "0", "S")
    retrieve = BatchOperation(BatchOperationKind.RETRIEVE, table, "t", "1", None, None)
    assert encrypted.execute_batch([retrieve])[0].payload.values["S"] == "s1"  # type: ignore[union-attr]
    assert encrypted.execute_operation(retrieve).payload.values["S"] == "s1"  # type: ignore[union-attr]

    reference = encrypted.get_table_reference(table)
    batch: TableBatchOperation[Patient] = TableBatchOperation()
    batch.insert(Patient(PartitionKey="t", RowKey="a", Name="A", Ward="w", Age=1))
    batch.insert_or_replace(Patient(PartitionKey="t", RowKey="b", Name="B", Ward="w", Age=2))
    reference.execute_batch(batch)
    assert_ciphertext(client, table, "t", "b", "Name", "Age")
    found = reference.execute(TableOperation.retrieve("t", "a", Patient))
    assert found.entity is not None and found.entity.Name == "A"
    with pytest.raises(TableEncryptionError, match="cannot be merged"):
        reference.execute(TableOperation.insert_or_merge(Patient(PartitionKey="t", RowKey="a", Name="Z", Ward="", Age=0)))
    with pytest.raises(EncryptionKeyError):  # the class is Encrypted, the client has no policy
        client.get_table_reference(table).execute(
            TableOperation.insert(Patient(PartitionKey="t", RowKey="c", Name="C", Ward="w", Age=3))
        )
    with pytest.raises(EncryptionKeyError):  # nor read
        client.get_table_reference(table).execute(TableOperation.retrieve("t", "a", Patient))
    raw_read = client.get_table_reference(table).execute(TableOperation.retrieve("t", "a"))
    assert raw_read.entity is not None and isinstance(raw_read.entity["Name"], bytes)


def test_echoed_inserts_come_back_decrypted(client: CloudTableClient, table: str) -> None:
    with CloudTableClient(client.account, payload_format=client.payload_format, encryption_policy=POLICY,
                          echo_content=True) as echoing:
        result = echoing.execute_operation(BatchOperation(
            BatchOperationKind.INSERT, table, "e", "1",
            entity_to_payload(DynamicEntity(PartitionKey="e", RowKey="1", S="x")), None, echo_content=True,
        ), options=TableRequestOptions(encryption_resolver=chosen("S")))
    assert result.payload is not None and result.payload.values["S"] == "x"
    assert not set(METADATA_PROPERTIES) & set(result.payload.values)


def test_bulk_inserts_on_threads_encrypt_and_refuse_merges(
    client: CloudTableClient, encrypted: CloudTableClient, table: str
) -> None:
    patients = [Patient(PartitionKey=f"p{n % 3}", RowKey=f"{n:03}", Name=f"n{n}", Ward="w", Age=n) for n in range(60)]
    result = encrypted.bulk_insert(table, patients, max_workers=3)
    assert not result.failed and len(result.succeeded) == 60
    assert_ciphertext(client, table, "p1", "001", "Name", "Age")
    read = sorted(encrypted.create_query(table, Patient), key=lambda p: p.Age)
    assert [p.Name for p in read] == [f"n{n}" for n in range(60)]
    merged = encrypted.bulk_insert(table, patients[:2], mode="merge")
    assert not merged.succeeded and all(isinstance(o.error, TableEncryptionError) for o in merged.failed)
    plain = client.bulk_insert(table, [DynamicEntity(PartitionKey="z", RowKey="1", S="s")],
                               options=TableRequestOptions(encryption_policy=POLICY, encryption_resolver=chosen("S")))
    assert not plain.failed
    assert_ciphertext(client, table, "z", "1", "S")


def test_parallel_scans_decrypt(client: CloudTableClient, encrypted: CloudTableClient, table: str) -> None:
    patients = [Patient(PartitionKey=f"p{n:02d}", RowKey="r", Name=f"n{n}", Ward="w", Age=n) for n in range(12)]
    assert not encrypted.bulk_insert(table, patients).failed
    read = encrypted.create_query(table, Patient).iter_parallel(workers=3, boundaries=["p04", "p08"])
    assert sorted((p.Age, p.Name) for p in read) == [(n, f"n{n}") for n in range(12)]


def test_arrow_columns_are_decrypted(client: CloudTableClient, encrypted: CloudTableClient, table: str) -> None:
    pytest.importorskip("pyarrow")
    for n in range(3):
        encrypted.insert_entity(table, Patient(PartitionKey="a", RowKey=str(n), Name=f"n{n}", Ward="w", Age=n))
    columns = encrypted.create_query(table).to_arrow()
    assert columns.column("Name").to_pylist() == ["n0", "n1", "n2"]
    assert columns.column("Age").to_pylist() == [0, 1, 2]
    assert not set(METADATA_PROPERTIES) & set(columns.column_names)
    pytest.importorskip("pandas")
    assert list(encrypted.create_query(table, Patient).to_pandas()["Name"]) == ["n0", "n1", "n2"]
    raw = client.create_query(table).to_arrow()  # no policy: the ciphertext and the metadata, as stored
    assert set(METADATA_PROPERTIES) <= set(raw.column_names)
    assert encrypted.create_query(table).select("Name").to_arrow().column("Name").to_pylist() == ["n0", "n1", "n2"]


def test_the_async_client_context_and_bulk(
    target: str, connection_string: str, client: CloudTableClient, table: str
) -> None:
    pytest.importorskip("aiohttp")
    account = CloudStorageAccount.parse(connection_string)

    async def scenario() -> None:
        async with account.create_async_cloud_table_client(
            payload_format=client.payload_format, encryption_policy=POLICY
        ) as crypto:
            await crypto.insert_entity(table, Patient(PartitionKey="x", RowKey="1", Name="Ada", Ward="w", Age=1))
            assert (await crypto.get_entity(table, "x", "1", Patient)).Name == "Ada"
            patient = Patient(PartitionKey="x", RowKey="1", Name="Eve", Ward="w", Age=2, etag="*")
            with pytest.raises(TableEncryptionError, match="cannot be merged"):
                await crypto.update_entity(table, patient)
            await crypto.update_entity(table, patient, mode="replace")
            result = await crypto.bulk_insert(
                table, [Patient(PartitionKey="y", RowKey=str(n), Name=f"n{n}", Ward="w", Age=n) for n in range(20)],
                max_concurrency=4,
            )
            assert not result.failed
            ctx = crypto.get_table_service_context()
            read = [p async for p in ctx.create_query(table, Patient)]
            assert sorted(p.Name for p in read) == ["Eve", *sorted(f"n{n}" for n in range(20))]
            read[0].Ward = "east"
            ctx.update_object(read[0])
            await ctx.save_changes(SaveChangesOptions.REPLACE_ON_UPDATE)
            ctx.add_object(table, Patient(PartitionKey="x", RowKey="2", Name="Sam", Ward="w", Age=3))
            await ctx.save_changes(SaveChangesOptions.BATCH)
            reference = crypto.get_table_reference(table)
            await reference.execute(TableOperation.insert(Patient(PartitionKey="x", RowKey="3", Name="Tia", Ward="w",
                                                                  Age=4)))
            found = await reference.execute(TableOperation.retrieve("x", "3", Patient))
            assert found.entity is not None and found.entity.Name == "Tia"

    asyncio.run(scenario())
    assert_ciphertext(client, table, "x", "1", "Name", "Age")
    assert_ciphertext(client, table, "y", "7", "Name", "Age")
    assert_ciphertext(client, table, "x", "2", "Name", "Age")
    assert_ciphertext(client, table, "x", "3", "Name", "Age")
