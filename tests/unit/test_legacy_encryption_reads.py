"""The legacy surface's reads under ``require_encryption``: every failure is the old
``AzureException("Decryption failed")``, and each says why through its cause."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("cryptography")

from tablesdk import EncryptionKeyError, EncryptionRequiredError, MockSender  # noqa: E402
from tablesdk.legacy import AzureException, TableService  # noqa: E402

KEY = "a2V5"


def answering(entity: dict[str, object]) -> MockSender:
    return MockSender(lambda request: MockSender.response(
        200, json.dumps(entity), {"Content-Type": "application/json;odata=minimalmetadata", "ETag": 'W/"1"'}))


@pytest.mark.parametrize(("entity", "cause"), [
    ({"PartitionKey": "p", "RowKey": "r", "V": "x"}, EncryptionRequiredError),
    ({"PartitionKey": "p", "RowKey": "r", "_ClientEncryptionMetadata1": "{}",
      "_ClientEncryptionMetadata2": "AA==", "_ClientEncryptionMetadata2@odata.type": "Edm.Binary"}, EncryptionKeyError),
])
def test_require_encryption_without_a_key_says_why(entity: dict[str, object], cause: type[Exception]) -> None:
    svc = TableService(account_name="acct", account_key=KEY, sender=answering(entity))
    svc.require_encryption = True
    with pytest.raises(AzureException) as exc:
        svc.get_entity("tbl", "p", "r")
    assert str(exc.value) == "Decryption failed"          # the old package's error, as it was
    assert isinstance(exc.value.__cause__, cause)
    assert exc.value.__cause__.row_key == "r"  # type: ignore[attr-defined]
