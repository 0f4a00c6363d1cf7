"""Where a call's client-side encryption comes from (the client's default, the call's options), the
``Encrypted[...]`` marker on each kind of entity class, and the requests it changes (no server)."""

from __future__ import annotations

import dataclasses
from typing import Annotated
from urllib.parse import parse_qs, urlsplit

import pytest

from tablesdk import (
    Chunked,
    CloudStorageAccount,
    CloudTableClient,
    DynamicEntity,
    Encrypted,
    EncryptionKeyError,
    EncryptionRequiredError,
    LocalKeyWrapper,
    MockSender,
    TableEncryptionPolicy,
    TableEntity,
    TableRequestOptions,
    TableValidationError,
    prop,
)
from tablesdk._entities._entity import encrypted_names
from tablesdk._pipeline._http import HttpRequest, HttpResponse
from tablesdk._pipeline._settings import RequestSettings

POLICY = TableEncryptionPolicy(key=LocalKeyWrapper(bytes(32), "k1"))
OTHER = TableEncryptionPolicy(key=LocalKeyWrapper(bytes(range(32)), "k2"))


def resolver(pk: str, rk: str, name: str) -> bool:
    return name == "A"


class Record(TableEntity):
    Secret: Encrypted[str]
    Plain: str


@dataclasses.dataclass
class Address:
    Street: str


@dataclasses.dataclass
class Person:
    PartitionKey: str
    RowKey: str
    Home: Encrypted[Address]


def test_options_take_a_policy_a_resolver_and_require_encryption_and_refuse_anything_else() -> None:
    options = TableRequestOptions(encryption_policy=POLICY, encryption_resolver=resolver, require_encryption=True)
    assert (options.encryption_policy, options.encryption_resolver, options.require_encryption) == (POLICY, resolver, True)
    with pytest.raises(TypeError, match="encryption_policy must be a TableEncryptionPolicy"):
        TableRequestOptions(encryption_policy="key")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="encryption_resolver must be a callable"):
        TableRequestOptions(encryption_resolver=["A"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="require_encryption must be a bool"):
        TableRequestOptions(require_encryption="yes")  # type: ignore[arg-type]


def test_a_calls_options_override_the_clients_default_field_by_field() -> None:
    client_wide = RequestSettings(encryption_policy=POLICY)
    assert client_wide.merged(None) is client_wide
    merged = client_wide.merged(TableRequestOptions(encryption_resolver=resolver))
    assert (merged.encryption_policy, merged.encryption_resolver, merged.require_encryption) == (POLICY, resolver, None)
    merged = client_wide.merged(TableRequestOptions(encryption_policy=OTHER, require_encryption=False))
    assert (merged.encryption_policy, merged.require_encryption) == (OTHER, False)
    assert client_wide.merged(TableRequestOptions(timeout=5)).encryption_policy is POLICY
    with pytest.raises(TypeError):
        RequestSettings(encryption_policy=object())  # type: ignore[arg-type]


def test_the_clients_default_is_settable_and_comes_from_the_accounts_factories() -> None:
    account = CloudStorageAccount.development_storage_account()
    client = account.create_cloud_table_client(encryption_policy=POLICY)
    assert client.encryption_policy is POLICY
    client.encryption_policy = None
    assert client.encryption_policy is None
    assert CloudTableClient(account).encryption_policy is None
    pytest.importorskip("aiohttp")
    assert account.create_async_cloud_table_client(encryption_policy=POLICY).encryption_policy is POLICY


def test_encrypted_marks_fields_of_every_kind_of_entity_class() -> None:
    assert Record.__encrypted__ == frozenset({"Secret"}) and Record.__declared__["Secret"].value == "Edm.String"

    class Child(Record):
        Secret: str  # redeclared without the marker  # type: ignore[assignment]
        Other: Annotated[Encrypted[int], "doc"]

    assert Child.__encrypted__ == frozenset({"Other"})

    @dataclasses.dataclass
    class Row:
        PartitionKey: str
        RowKey: str
        Card: Encrypted[str | None] = None
        Count: int = 0

    assert encrypted_names(Row) == frozenset({"Card"}) and encrypted_names(DynamicEntity) == frozenset()
    pydantic = pytest.importorskip("pydantic")

    class Model(pydantic.BaseModel):  # type: ignore[misc, name-defined]
        PartitionKey: str
        RowKey: str
        Token: Encrypted[bytes]

    assert encrypted_names(Model) == frozenset({"Token"})
    attrs = pytest.importorskip("attrs")

    @attrs.define
    class Card:
        PartitionKey: str
        RowKey: str
        Number: Encrypted[str]

    assert encrypted_names(Card) == frozenset({"Number"})


def test_encrypted_cannot_be_chunked_nor_mark_a_nested_object() -> None:
    with pytest.raises(TypeError, match="both Encrypted and Chunked"):
        class Both(TableEntity):
            Text: Annotated[Encrypted[str], Chunked]

    with pytest.raises(TypeError, match="nested object"):
        encrypted_names(Person)


def _recorded(client_options: dict[str, object]) -> tuple[CloudTableClient, list[HttpRequest]]:
    def answer(request: HttpRequest) -> HttpResponse:
        return MockSender.response(200, '{"value": []}', {"Content-Type": "application/json"})

    sender = MockSender(answer)
    account = CloudStorageAccount.development_storage_account()
    return CloudTableClient(account, sender=sender, **client_options), sender.requests  # type: ignore[arg-type]


def _select(request: HttpRequest) -> list[str]:
    return parse_qs(urlsplit(request.url).query).get("$select", [""])[0].split(",")


def test_a_projection_asks_for_the_metadata_only_under_encryption() -> None:
    client, requests = _recorded({"encryption_policy": POLICY})
    list(client.create_query("Items").select("A"))
    assert _select(requests[-1]) == ["A", "PartitionKey", "RowKey", "Timestamp",
                                     "_ClientEncryptionMetadata1", "_ClientEncryptionMetadata2"]
    client.count_entities("Items")  # a key scan: nothing encrypted in it
    assert "_ClientEncryptionMetadata1" not in _select(requests[-1])
    plain, plain_requests = _recorded({})
    list(plain.create_query("Items").select("A"))
    assert _select(plain_requests[-1]) == ["A", "PartitionKey", "RowKey", "Timestamp"]
    list(plain.create_query("Items").select("A").with_options(TableRequestOptions(encryption_policy=POLICY)))
    assert "_ClientEncryptionMetadata2" in _select(plain_requests[-1])
    list(plain.create_query("Items", Record).select("Secret"))  # the class is Encrypted
    assert "_ClientEncryptionMetadata2" in _select(plain_requests[-1])


def test_filters_naming_an_encrypted_property_are_refused_when_built() -> None:
    client, _ = _recorded({})
    with pytest.raises(TableValidationError) as refused:
        client.create_query("Items", Record).where(prop("Secret") == "x")
    assert refused.value.field == "Secret"
    client.create_query("Items", Record).where(Record.Plain == "x")  # the others are fine


def test_writes_refuse_before_sending() -> None:
    client, requests = _recorded({})
    with pytest.raises(EncryptionKeyError, match="'Secret'"):
        client.insert_entity("Items", Record(PartitionKey="p", RowKey="r", Secret="s", Plain="x"))
    with pytest.raises(EncryptionRequiredError):
        client.insert_entity("Items", DynamicEntity(PartitionKey="p", RowKey="r", A="a"),
                             options=TableRequestOptions(encryption_policy=POLICY, require_encryption=True))
    with pytest.raises(EncryptionKeyError, match="no encryption_policy"):  # properties chosen, no key to encrypt them
        client.insert_entity("Items", DynamicEntity(PartitionKey="p", RowKey="r", A="a"),
                             options=TableRequestOptions(encryption_resolver=resolver))
    assert requests == []
