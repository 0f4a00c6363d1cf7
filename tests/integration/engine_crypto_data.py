"""What the engines' encryption tests share: a key, a policy, a table written encrypted by the client."""

from __future__ import annotations

from tablesdk import CloudTableClient, DynamicEntity, TableEncryptionPolicy, TableRequestOptions
from tablesdk._encryption import LocalKeyWrapper

KEY = LocalKeyWrapper(bytes(range(32)), "engine-kek")
POLICY = TableEncryptionPolicy(key=KEY)
#: The key's bytes as they would show in a text (hex and the raw bytes' repr), never to be seen in a log or plan.
KEY_TEXTS = (bytes(range(32)).hex(), repr(bytes(range(32)))[2:-1])


def is_secret(pk: str, rk: str, name: str) -> bool:
    return name == "Secret"


def fill_encrypted(client: CloudTableClient, table: str, count: int = 40) -> None:
    """``count`` entities over 8 partitions, ``Secret`` encrypted, ``N`` and ``Name`` plain."""
    client.create_table(table)
    entities = [DynamicEntity(f"p{n % 8}", f"{n:03d}", N=n, Name=f"n{n}", Secret=f"s{n}") for n in range(count)]
    options = TableRequestOptions(encryption_policy=POLICY, encryption_resolver=is_secret)
    client.bulk_insert(table, entities, options=options).raise_on_error()


def decrypted_rows(client: CloudTableClient, table: str) -> list[dict[str, object]]:
    """The client's decrypted read, as sorted rows of the user properties and keys."""
    options = TableRequestOptions(encryption_policy=POLICY)
    rows = [
        {"PartitionKey": e.PartitionKey, "RowKey": e.RowKey, **{k: e[k] for k in ("N", "Name", "Secret") if k in e}}
        for e in client.create_query(table).with_options(options)
    ]
    return sorted(rows, key=lambda row: (row["PartitionKey"], row["RowKey"]))


def stored_is_ciphertext(client: CloudTableClient, table: str) -> bool:
    """Whether every stored entity of ``table`` has its Secret as Binary ciphertext and the metadata."""
    entities = list(client.create_query(table))
    return bool(entities) and all(
        isinstance(e["Secret"], (bytes, bytearray)) and "_ClientEncryptionMetadata1" in e for e in entities
    )
