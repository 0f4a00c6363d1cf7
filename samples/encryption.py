"""Client-side encryption: a patient register whose names and dates of birth the service never sees.

The application holds a key-encryption key (here a local AES key; in production one from a
secret store or Azure Key Vault) and gives the client a ``TableEncryptionPolicy``. Fields marked
``Encrypted[...]`` are encrypted before each write and decrypted after each read, on every path:
single writes, queries (a projection brings the metadata it needs), a context's saves and bulk
loading. A client without the policy sees only ciphertext; a merge of an encrypted entity is
refused (the whole entity is replaced instead); old data written by the legacy clients (protocol
1.0) is read as well, and rewritten under the authenticated protocol.

Runs against the account in ``AZURE_STORAGE_CONNECTION_STRING``, or else the bundled emulator
started in-process (needs the ``encryption`` extra: ``pip install '.[encryption]'``):

    python samples/encryption.py [--format json|atom]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import uuid
from collections.abc import Iterator
from datetime import date

from tablesdk import (
    PROTOCOL_LEGACY,
    CloudStorageAccount,
    CloudTableClient,
    Encrypted,
    LocalKeyWrapper,
    SaveChangesOptions,
    TableEncryptionError,
    TableEncryptionPolicy,
    TableEntity,
    TableRequestOptions,
)


class Patient(TableEntity):
    """PartitionKey: the ward; RowKey: the patient's number. The keys are never encrypted."""

    Name: Encrypted[str]
    Born: Encrypted[date]
    Allergies: Encrypted[str]
    Ward: str
    Visits: int


def register(client: CloudTableClient, table: str) -> None:
    """Admit three patients in one bulk load; every Encrypted field is encrypted on the way."""
    patients = [
        Patient(PartitionKey="north", RowKey="0001", Name="Ada Lovelace", Born=date(1815, 12, 10),
                Allergies="none", Ward="north", Visits=1),
        Patient(PartitionKey="north", RowKey="0002", Name="Alan Turing", Born=date(1912, 6, 23),
                Allergies="penicillin", Ward="north", Visits=3),
        Patient(PartitionKey="south", RowKey="0003", Name="Grace Hopper", Born=date(1906, 12, 9),
                Allergies="none", Ward="south", Visits=2),
    ]
    result = client.bulk_insert(table, patients)
    assert not result.failed, result.failed


def what_the_service_sees(plain: CloudTableClient, table: str) -> None:
    stored = plain.get_entity(table, "north", "0002")
    assert isinstance(stored["Name"], bytes) and stored["Ward"] == "north"
    print("stored:", {name: type(value).__name__ for name, value in stored.items()})


def visit(client: CloudTableClient, table: str) -> None:
    """A context reads plaintext, tracks it with its ETag, and saves it encrypted again (whole)."""
    context = client.get_table_service_context()
    turing = context.get(table, "north", "0002", Patient)
    assert turing is not None and turing.Allergies == "penicillin"
    turing.Visits += 1
    turing.Allergies = "penicillin, latex"
    context.update_object(turing)
    try:
        context.save_changes()  # a merge: refused, it would leave the encryption metadata stale
    except TableEncryptionError as error:
        print("refused:", str(error).split(":")[0])
    context.save_changes(SaveChangesOptions.REPLACE_ON_UPDATE)


def report(client: CloudTableClient, table: str) -> None:
    north = client.create_query(table, Patient).where(Patient.Ward == "north").select("Name", "Visits")
    for patient in north:  # the projection also asked for the metadata: the names come back decrypted
        print(f"{patient.RowKey} {patient.Name}: {patient.Visits} visits")


def legacy_data(client: CloudTableClient, table: str) -> None:
    """An entity written in the legacy clients' format (protocol 1.0, strings only) reads the same."""
    key = client.encryption_policy.key if client.encryption_policy is not None else None
    legacy = TableRequestOptions(encryption_policy=TableEncryptionPolicy(key=key, protocol=PROTOCOL_LEGACY))
    old = Patient(PartitionKey="south", RowKey="0004", Name="Edsger Dijkstra", Born=date(1930, 5, 11),
                  Allergies="none", Ward="south", Visits=1)
    try:
        client.insert_entity(table, old, options=legacy)
    except TableEncryptionError as error:  # 1.0 encrypts strings only: Born is a date
        print("1.0 refuses:", error.property_name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--format", choices=("json", "atom"), default="json")
    args = parser.parse_args(argv)
    # In production: the key comes from a secret store or Key Vault, never from the code.
    policy = TableEncryptionPolicy(key=LocalKeyWrapper(os.urandom(32), kid="patients-2026"))
    table = "patients" + uuid.uuid4().hex[:8]
    with open_account(args.format) as (account, payload_format):
        with account.create_cloud_table_client(payload_format=payload_format, encryption_policy=policy) as client, \
                account.create_cloud_table_client(payload_format=payload_format) as plain:
            client.create_table(table)
            try:
                register(client, table)
                what_the_service_sees(plain, table)
                visit(client, table)
                report(client, table)
                legacy_data(client, table)
                print("all steps passed")
            finally:
                client.delete_table_if_exists(table)
    return 0


@contextlib.contextmanager
def open_account(payload_format: str) -> Iterator[tuple[CloudStorageAccount, str]]:
    """The account of $AZURE_STORAGE_CONNECTION_STRING, or the bundled emulator started here."""
    conn_str = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if conn_str:
        yield CloudStorageAccount.parse(conn_str), payload_format
        return
    from tablesdk.devstore import DevStore

    with DevStore(port=0) as store:
        yield CloudStorageAccount.parse(store.connection_string), payload_format


if __name__ == "__main__":
    raise SystemExit(main())
