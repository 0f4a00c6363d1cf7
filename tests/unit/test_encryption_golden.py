"""A stored entity in the authenticated protocol, pinned: every later version of tablesdk must
read it (the format is data at rest), and must still write what reads the same way.

Made once by encrypt_payload with a seeded random stream and the key ``bytes(range(32))``.
"""

from __future__ import annotations

import math
import uuid

import pytest

from encryption_helpers import local_key
from tablesdk._encryption import (
    METADATA_KEY,
    METADATA_NAMES,
    PROTOCOL_AUTHENTICATED,
    EncryptedDataError,
    TableEncryptionPolicy,
    decrypt_payload_with_details,
)
from tablesdk._entities._edm import EdmType, EntityPayload, format_datetime

pytest.importorskip("cryptography")

STORED = {
    "PartitionKey": "golden-pk",
    "RowKey": "golden-rk",
    "Name": "0c5442af192dd6d3145e17f56dc35f8817fd92b3347fd3907323dca015186fdb",
    "Count": "17bd63ffea3e832838a9cbac354550a9d2d38a8c49de2b15956bf990f427fcc0f7d26dca6c8b0499dc4c7f9e0f",
    "When": "f4bb65ce671243325be1725a4a1f9b73828a4f2ef08753b6f45c21eed286dde90e65178b9b1d08995953952cf13f1537dc9151d1"
            "ca764b5f07",
    "Id": "6a6511456fedb4f2e959b6e30b8ef90ae0b1c3cc77a2cd82cc37898097ea76ccb60b1a2d9a1705dd6db81cb96ef53c9d8233edcf2216"
          "58389fbc4528ce17a9a5f2",
    "Ratio": "6055a3b48f3a88eabd446bab18e802bb634381e0a1ba3347f21273ea8dd03de7",
    "Blob": "22772ae67f0fd9f0978de7d3d674329dfe58496bbb296235e3ed8a497ada78",
    "Flag": "767f05e2e50b0b34c3ebde33132954458856d464ffb213044e09b3fe22427becab81",
    METADATA_NAMES: "102169a19cf1d70ebee6bfcf6bfc1cee94eaacefd68bd38a1debe6403aacebf926d7518d402d06b4efae3b87240575082d3b9b"
                    "bf15349997e4365d58515cf5c73eec9074082b6938479848d3fc1f9939d0ca561a",
    METADATA_KEY: '{"WrappedContentKey": {"KeyId": "golden", "EncryptedKey": '
                  '"E6QzvI38yQPQpBtpkp2BzyD3uigNW+GxghAkVvMf23sSnibPbsPaJQ==", "Algorithm": "A256KW"}, '
                  '"EncryptionAgent": {"Protocol": "tablesdk-aes-gcm-1", "EncryptionAlgorithm": "AES_GCM_256"}, '
                  '"KeyWrappingMetadata": {"EncryptionLibrary": "Python tablesdk 0.1.0"}}',
}
ENCRYPTED = ("Name", "Count", "When", "Id", "Ratio", "Blob", "Flag")


def stored() -> EntityPayload:
    values = {name: value if name in ("PartitionKey", "RowKey", METADATA_KEY) else bytes.fromhex(value)
              for name, value in STORED.items()}
    types = {name: EdmType.STRING if isinstance(value, str) else EdmType.BINARY for name, value in values.items()}
    return EntityPayload(values, types)


def test_the_pinned_entity_reads_exactly() -> None:
    decrypted, details = decrypt_payload_with_details(stored(), TableEncryptionPolicy(key=local_key("golden")))
    assert details == (PROTOCOL_AUTHENTICATED, "golden", ENCRYPTED)
    values, types = decrypted.values, decrypted.types
    assert values["Name"] == "Ada" and types["Name"] is EdmType.STRING
    assert values["Count"] == 2**53 + 1 and types["Count"] is EdmType.INT64
    assert format_datetime(values["When"]) == "2026-11-29T08:00:00.1234567Z" and types["When"] is EdmType.DATETIME
    assert values["Id"] == uuid.UUID("12345678-1234-5678-1234-567812345678") and types["Id"] is EdmType.GUID
    assert math.isnan(values["Ratio"]) and types["Ratio"] is EdmType.DOUBLE
    assert values["Blob"] == b"\x00\xff" and types["Blob"] is EdmType.BINARY
    assert values["Flag"] is False and types["Flag"] is EdmType.BOOLEAN
    assert set(values) == {"PartitionKey", "RowKey", *ENCRYPTED}


def test_the_pinned_entity_under_other_keys_fails() -> None:
    moved = stored()
    moved.values["RowKey"] = "golden-rk2"
    with pytest.raises(EncryptedDataError):
        decrypt_payload_with_details(moved, TableEncryptionPolicy(key=local_key("golden")))


@pytest.mark.parametrize("name", ["Count", "Blob", METADATA_NAMES])
def test_a_pinned_value_under_another_name_fails(name: str) -> None:
    swapped = stored()
    swapped.values["Name"], swapped.values[name] = swapped.values[name], swapped.values["Name"]
    with pytest.raises(EncryptedDataError) as caught:
        decrypt_payload_with_details(swapped, TableEncryptionPolicy(key=local_key("golden")))
    assert caught.value.property_name in ("Name", name)
