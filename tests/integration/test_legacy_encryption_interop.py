"""Client-side encryption (protocol 1.0) between the real ``azure-cosmosdb-table`` 1.0.6 and tablesdk,
against the bundled emulator and Azurite.

Each way: the old package writes encrypted entities (``key_encryption_key`` with
``encryption_resolver_function`` and ``EntityProperty(..., encrypt=True)``) and tablesdk reads them,
through ``tablesdk.legacy`` (``key_encryption_key`` or ``key_resolver_function``) and through the
client with a :class:`~tablesdk.TableEncryptionPolicy`; tablesdk writes protocol 1.0 (the legacy
surface by default, the client with ``protocol="1.0"``) and the old package reads it. The old
package never shows the plaintext of an entity in tablesdk's authenticated protocol, which the
legacy surface writes once ``encryption_protocol`` says so (a table then holds both, both read).
The keys wrap with A256KW (the key objects of the old package's users, and tablesdk's
``LocalKeyWrapper`` with the same bytes) and, for the writers' vectors, RSA-OAEP.

The writers of the other legacy clients (.NET's and Java's: both IV orderings, both formats of the
list of names) are covered by vectors built from the format (legacy_crypto.py): the old package
reads each, as does tablesdk by both surfaces, and each fails once its ordering is swapped.

The old package's batches go to the emulator only (Azurite answers them 500).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from legacy_crypto import WRITERS, KeyWrapper, RsaKey, legacy_vector, resolver_of
from test_legacy_differential import describe

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType, EntityProperty

pytestmark = pytest.mark.integration

TARGETS = ["devstore", "azurite"]
RSA_KEY = RsaKey()
SECRETS = {"Secret": "héllo wörld, a secret longer than one block", "Short": "s", "Empty": ""}


@dataclass
class Target:
    name: str
    connection_string: str
    table: str
    client: CloudTableClient


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, unique_table_name: str) -> Iterator[Target]:
    logging.getLogger("azure").setLevel(logging.CRITICAL + 1)
    fixture = "devstore_connection_string" if request.param == "devstore" else "azurite_connection_string"
    connection_string = str(request.getfixturevalue(fixture))
    with CloudStorageAccount.parse(connection_string).create_cloud_table_client() as client:
        client.create_table(unique_table_name)
        yield Target(str(request.param), connection_string, unique_table_name, client)
        client.delete_table_if_exists(unique_table_name)


def old_service(target: Target, kek: Any = None, resolver: Any = None, choose: Any = None) -> Any:
    from azure.cosmosdb.table import TableService
    from azure.cosmosdb.table.common.retry import no_retry

    svc = TableService(connection_string=target.connection_string)
    svc.retry = no_retry
    svc.key_encryption_key, svc.key_resolver_function, svc.encryption_resolver_function = kek, resolver, choose
    return svc


def new_service(target: Target, kek: Any = None, resolver: Any = None, choose: Any = None) -> Any:
    from tablesdk.legacy import TableService, no_retry

    svc = TableService(connection_string=target.connection_string)
    svc.retry = no_retry
    svc.key_encryption_key, svc.key_resolver_function, svc.encryption_resolver_function = kek, resolver, choose
    return svc


def old_names() -> Any:
    import azure.cosmosdb.table as old

    return old


def new_names() -> Any:
    import tablesdk.legacy as new

    return new


def policy_of(kek: KeyWrapper | RsaKey, protocol: str | None = None) -> Any:
    """The engine's policy with tablesdk's own key class holding the same key and id."""
    from tablesdk import TableEncryptionPolicy
    from tablesdk._encryption import LocalKeyWrapper, RsaKeyWrapper

    key: Any = RsaKeyWrapper(kek.private_key, kek.kid) if isinstance(kek, RsaKey) else LocalKeyWrapper(kek.key, kek.kid)
    return TableEncryptionPolicy(key=key) if protocol is None else TableEncryptionPolicy(key=key, protocol=protocol)


def _client_encrypts() -> bool:
    """Whether tablesdk's client takes a policy per call (``TableRequestOptions(encryption_policy=...)``);
    else these tests give the client's payloads to the engine themselves, as the client does."""
    import inspect

    from tablesdk import TableRequestOptions

    return "encryption_policy" in inspect.signature(TableRequestOptions).parameters


def main_read(target: Target, pk: str, rk: str, policy: Any) -> dict[str, Any]:
    """The user properties tablesdk's client reads with ``policy``."""
    from tablesdk import TableRequestOptions
    from tablesdk._encryption import decrypt_payload

    if _client_encrypts():
        options: Any = TableRequestOptions(encryption_policy=policy)  # type: ignore[call-arg,unused-ignore]
        entity = target.client.get_entity(target.table, pk, rk, options=options)
        return {name: entity[name] for name in entity}
    payload = decrypt_payload(target.client.get_entity_payload(target.table, pk, rk), policy)
    return {name: value for name, value in payload.values.items() if name not in ("PartitionKey", "RowKey", "Timestamp")}


def main_write(target: Target, entity: DynamicEntity, policy: Any, names: set[str]) -> None:
    """tablesdk's client writes ``entity`` with ``names`` encrypted under ``policy``."""
    from tablesdk import TableRequestOptions
    from tablesdk._encryption import encrypt_payload
    from tablesdk._entities._entity_write import entity_to_payload

    def choose(pk: str, rk: str, name: str) -> bool:
        return name in names

    if _client_encrypts():
        options: Any = TableRequestOptions(  # type: ignore[call-arg,unused-ignore]
            encryption_policy=policy, encryption_resolver=choose)
        target.client.upsert_entity(target.table, entity, mode="replace", options=options)
        return
    payload = encrypt_payload(entity_to_payload(entity), policy, choose)
    written = DynamicEntity(entity.PartitionKey, entity.RowKey)
    for name, value in payload.values.items():
        if name not in ("PartitionKey", "RowKey"):
            written[name] = EntityProperty(value, payload.types[name])
    target.client.upsert_entity(target.table, written, mode="replace")


def user_values(entity: dict[str, Any]) -> dict[str, Any]:
    """An entity's properties as a caller of either package compares them: values, types, no system keys."""
    return {name: describe(value) for name, value in entity.items()
            if name not in ("PartitionKey", "RowKey", "Timestamp", "etag")}


def written_by(api: Any, kek: KeyWrapper) -> list[tuple[str, dict[str, Any]]]:
    """The entities a script writes with every encrypting call of ``api`` (its names are the old package's)."""
    EP, Edm = api.EntityProperty, api.EdmType
    return [
        ("insert", {"PartitionKey": "p", "RowKey": "insert", "Secret": SECRETS["Secret"], "Plain": "in clear", "N": 7,
                    "Flagged": EP(Edm.STRING, SECRETS["Short"], encrypt=True)}),
        ("update", {"PartitionKey": "p", "RowKey": "update", "Secret": SECRETS["Empty"], "Plain": "x"}),
        ("upsert", {"PartitionKey": "p", "RowKey": "upsert", "Secret": "é" * 300}),
        ("nothing chosen", {"PartitionKey": "p", "RowKey": "nothing", "Plain": "no property chosen"}),
    ]


def write_all(svc: Any, api: Any, table: str, kek: KeyWrapper, *, batch: bool) -> None:
    for call, entity in written_by(api, kek):
        if call == "update":
            svc.insert_entity(table, {"PartitionKey": "p", "RowKey": "update", "Secret": "before"})
            svc.update_entity(table, entity)
        elif call == "upsert":
            svc.insert_or_replace_entity(table, entity)
        else:
            svc.insert_entity(table, entity)
    if batch:
        with svc.batch(table) as b:
            b.insert_entity({"PartitionKey": "p", "RowKey": "batch1", "Secret": "in a batch"})
            b.insert_or_replace_entity({"PartitionKey": "p", "RowKey": "batch2", "Secret": "also in a batch", "M": 1.5})


def choose_secret(pk: str, rk: str, name: str) -> bool:
    return name == "Secret"


def readings(svc: Any, table: str) -> Any:
    rows = sorted(svc.query_entities(table), key=lambda e: e["RowKey"])
    selected = sorted(svc.query_entities(table, select="PartitionKey,RowKey,Secret,Plain"), key=lambda e: e["RowKey"])
    got = [svc.get_entity(table, "p", row["RowKey"]) for row in rows]
    return ([user_values(row) for row in rows], [user_values(row) for row in selected], [user_values(e) for e in got])


# ---------------------------------------------------------------- the old package writes, tablesdk reads

def test_what_the_old_package_encrypts_tablesdk_reads(target: Target) -> None:
    kek = KeyWrapper()
    writer = old_service(target, kek, choose=choose_secret)
    write_all(writer, old_names(), target.table, kek, batch=target.name == "devstore")

    expected = readings(old_service(target, kek), target.table)
    assert readings(new_service(target, kek), target.table) == expected
    assert readings(new_service(target, resolver=resolver_of(KeyWrapper("other"), kek)), target.table) == expected
    # Without a key both see the same ciphertext and metadata.
    assert readings(new_service(target), target.table) == readings(old_service(target), target.table)

    plain = main_read(target, "p", "insert", policy_of(kek))
    assert plain == {"Secret": SECRETS["Secret"], "Plain": "in clear", "N": 7, "Flagged": SECRETS["Short"]}
    assert main_read(target, "p", "upsert", policy_of(kek))["Secret"] == "é" * 300
    assert main_read(target, "p", "update", policy_of(kek)) == {"Secret": "", "Plain": "x"}


def test_a_wrong_key_fails_alike(target: Target) -> None:
    kek = KeyWrapper()
    old_service(target, kek, choose=choose_secret).insert_entity(
        target.table, {"PartitionKey": "p", "RowKey": "r", "Secret": "s"})
    outcomes = []
    for make in (old_service, new_service):
        for settings in ({"kek": KeyWrapper("other")}, {"kek": KeyWrapper(kek.kid, bytes(32))},
                         {"resolver": resolver_of(KeyWrapper("other"))}):
            svc = make(target, **settings)
            for call in (lambda: svc.get_entity(target.table, "p", "r"), lambda: list(svc.query_entities(target.table))):
                with pytest.raises(Exception) as raised:
                    call()
                outcomes.append((type(raised.value).__name__, str(raised.value)))
    assert outcomes[:6] == outcomes[6:]
    assert set(outcomes) == {("AzureException", "Decryption failed")}


# ---------------------------------------------------------------- tablesdk writes protocol 1.0, the old package reads

def test_what_tablesdk_legacy_encrypts_the_old_package_reads(target: Target) -> None:
    kek = KeyWrapper()
    write_all(new_service(target, kek, choose=choose_secret), new_names(), target.table, kek, batch=True)

    expected_plain = readings(new_service(target, kek), target.table)
    assert readings(old_service(target, kek), target.table) == expected_plain
    assert readings(old_service(target, resolver=resolver_of(kek)), target.table) == expected_plain
    secrets = [row for row in expected_plain[0] if ("Secret", ("str", SECRETS["Secret"])) in row.items()]
    assert secrets, "the secret reads back as text"
    # Stored encrypted: without a key the old package sees the ciphertext and both metadata columns.
    stored = old_service(target).get_entity(target.table, "p", "insert")
    assert stored["Secret"].type == "Edm.Binary" and stored["Flagged"].type == "Edm.Binary"
    assert stored["Plain"] == "in clear" and "_ClientEncryptionMetadata1" in stored
    # The legacy surface writes the metadata even when no property is chosen, as the old package did.
    assert "_ClientEncryptionMetadata1" in old_service(target).get_entity(target.table, "p", "nothing")


def test_what_the_client_encrypts_in_protocol_1_0_the_old_package_reads(target: Target) -> None:
    kek = KeyWrapper()
    entity = DynamicEntity("p", "client")
    entity["Secret"], entity["Plain"], entity["N"] = SECRETS["Secret"], "in clear", 5
    main_write(target, entity, policy_of(kek, "1.0"), {"Secret"})
    got = old_service(target, kek).get_entity(target.table, "p", "client")
    assert (got["Secret"], got["Plain"], got["N"].value) == (SECRETS["Secret"], "in clear", 5)
    assert "_ClientEncryptionMetadata1" not in got
    assert old_service(target).get_entity(target.table, "p", "client")["Secret"].type == "Edm.Binary"


def test_the_old_package_never_shows_the_plaintext_of_the_authenticated_protocol(target: Target) -> None:
    kek = KeyWrapper()
    entity = DynamicEntity("p", "gcm")
    entity["Secret"] = SECRETS["Secret"]
    main_write(target, entity, policy_of(kek), {"Secret"})
    # It takes metadata of a protocol it does not know for no metadata: the ciphertext, as binary.
    got = old_service(target, kek).get_entity(target.table, "p", "gcm")
    assert got["Secret"].type == "Edm.Binary" and SECRETS["Secret"].encode("utf-8") not in got["Secret"].value
    assert "tablesdk-aes-gcm-1" in got["_ClientEncryptionMetadata1"]
    with pytest.raises(Exception) as raised:
        old = old_service(target, kek)
        old.require_encryption = True
        old.get_entity(target.table, "p", "gcm")
    assert (type(raised.value).__name__, str(raised.value)) == ("AzureException", "Decryption failed")
    # tablesdk reads it back by either surface.
    assert main_read(target, "p", "gcm", policy_of(kek)) == {"Secret": SECRETS["Secret"]}
    assert new_service(target, kek).get_entity(target.table, "p", "gcm")["Secret"] == SECRETS["Secret"]


# ---------------------------------------------------------------- the other writers: .NET and Java

@pytest.mark.parametrize("wrapping", ["A256KW", "RSA-OAEP"])
@pytest.mark.parametrize("writer", WRITERS)
def test_each_writers_entities_read_the_same_everywhere(target: Target, writer: str, wrapping: str) -> None:
    kek: Any = KeyWrapper() if wrapping == "A256KW" else RSA_KEY
    secrets = {"A": "secret a", "Bb": "b" * 33, "Ü": "unicode name"}
    target.client.upsert_entity(target.table, legacy_vector(writer, "p", writer, secrets, {"Plain": 1}, kek=kek))
    old = old_service(target, kek).get_entity(target.table, "p", writer)
    assert {name: old[name] for name in secrets} == secrets
    assert user_values(new_service(target, kek).get_entity(target.table, "p", writer)) == user_values(old)
    assert main_read(target, "p", writer, policy_of(kek)) == {**secrets, "Plain": 1}


@pytest.mark.parametrize("writer", WRITERS)
def test_each_writers_entities_fail_with_the_ordering_swapped(target: Target, writer: str) -> None:
    from tablesdk._encryption import TableEncryptionError

    kek = KeyWrapper()
    secrets = {"A": "secret a", "Bb": "b" * 33}
    target.client.upsert_entity(target.table, legacy_vector(writer, "p", writer, secrets, kek=kek, swap_order=True))
    for make in (old_service, new_service):
        with pytest.raises(Exception) as raised:
            make(target, kek).get_entity(target.table, "p", writer)
        assert (type(raised.value).__name__, str(raised.value)) == ("AzureException", "Decryption failed")
    with pytest.raises(TableEncryptionError) as failed:
        main_read(target, "p", writer, policy_of(kek))
    assert (failed.value.partition_key, failed.value.row_key, failed.value.key_id) == ("p", writer, kek.kid)
    assert "secret a" not in str(failed.value)


# ---------------------------------------------------------------- moving to the authenticated protocol

def test_the_legacy_surface_moves_a_table_to_the_authenticated_protocol(target: Target) -> None:
    from tablesdk import PROTOCOL_AUTHENTICATED

    kek = KeyWrapper()
    svc = new_service(target, kek, choose=choose_secret)
    svc.insert_entity(target.table, {"PartitionKey": "p", "RowKey": "old", "Secret": "written in 1.0"})
    svc.encryption_protocol = PROTOCOL_AUTHENTICATED
    svc.insert_entity(target.table, {"PartitionKey": "p", "RowKey": "new", "Secret": "written in GCM"})
    with svc.batch(target.table) as batch:
        batch.insert_entity({"PartitionKey": "p", "RowKey": "new2", "Secret": "a batch in GCM"})

    assert [(e.RowKey, e.Secret) for e in svc.query_entities(target.table)] == [
        ("new", "written in GCM"), ("new2", "a batch in GCM"), ("old", "written in 1.0")]
    assert main_read(target, "p", "new2", policy_of(kek)) == {"Secret": "a batch in GCM"}
    stored = old_service(target).get_entity(target.table, "p", "new")
    assert json.loads(stored["_ClientEncryptionMetadata1"])["EncryptionAgent"]["Protocol"] == PROTOCOL_AUTHENTICATED
    assert old_service(target, kek).get_entity(target.table, "p", "old")["Secret"] == "written in 1.0"

    # A flipped bit of an authenticated value is detected; the same in protocol 1.0 may go unseen.
    raw = target.client.get_entity(target.table, "p", "new")
    raw["Secret"] = EntityProperty(bytes([raw["Secret"][0] ^ 1]) + raw["Secret"][1:], EdmType.BINARY)
    target.client.upsert_entity(target.table, raw, mode="replace")
    with pytest.raises(Exception) as raised:
        svc.get_entity(target.table, "p", "new")
    assert (type(raised.value).__name__, str(raised.value)) == ("AzureException", "Decryption failed")
    assert "written in GCM" not in repr(raised.value.__cause__)
