"""Fuzzing the engine: every EDM type and value edge round-trips exactly through the authenticated
protocol, and a flipped bit anywhere in what it writes (ciphertext, nonce, tag, the encrypted list,
the key metadata, the wrapped key) is detected. Protocol 1.0 has no integrity: the flips its format
can detect (wrapped key, ContentEncryptionIV) are, and the rest is documented, not promised."""

from __future__ import annotations

import base64
import json
import math
import struct
from datetime import datetime, timezone
from typing import Any

import pytest

from encryption_helpers import local_key, names
from tablesdk._core._errors import TableValidationError
from tablesdk._encryption import (
    METADATA_KEY,
    METADATA_NAMES,
    PROTOCOL_AUTHENTICATED,
    PROTOCOL_LEGACY,
    TableEncryptionError,
    TableEncryptionPolicy,
    decrypt_payload,
    encrypt_payload,
)
from tablesdk._entities._edm import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    EdmType,
    EntityPayload,
    check_value,
    parse_datetime,
    to_atom_text,
)

pytest.importorskip("cryptography")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

POLICY = TableEncryptionPolicy(key=local_key())
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _datetime_with_ticks(moment: datetime, seventh_digit: int) -> Any:
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + str(seventh_digit) + "Z"
    return parse_datetime(text)


_moments = st.datetimes(min_value=datetime(1601, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999))
VALUES: dict[EdmType, Any] = {
    EdmType.STRING: st.text(max_size=300),
    EdmType.INT32: st.integers(INT32_MIN, INT32_MAX) | st.sampled_from([INT32_MIN, INT32_MAX, 0, -1]),
    EdmType.INT64: st.integers(INT64_MIN, INT64_MAX)
    | st.sampled_from([INT64_MIN, INT64_MAX, 2**53 + 1, -(2**53) - 1, 0]),
    EdmType.DOUBLE: st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308, 0.1]),
    EdmType.BOOLEAN: st.booleans(),
    EdmType.DATETIME: st.builds(lambda m: m.replace(tzinfo=timezone.utc), _moments)
    | st.builds(_datetime_with_ticks, _moments, st.integers(0, 9)),
    EdmType.GUID: st.uuids(),
    EdmType.BINARY: st.binary(max_size=600),
}


def sendable(edm_type: EdmType, value: Any) -> bool:
    try:
        check_value("v", value, edm_type)
    except TableValidationError:
        return False
    return True


def same_value(edm_type: EdmType, original: Any, decrypted: Any) -> bool:
    """Exactly the same value: the same wire form (the seventh DateTime digit, -0.0) and Python value."""
    if to_atom_text(original, edm_type) != to_atom_text(decrypted, edm_type):
        return False
    if edm_type is EdmType.DOUBLE:
        if math.isnan(original):
            return math.isnan(decrypted)
        return struct.pack("<d", original) == struct.pack("<d", decrypted)  # -0.0 stays -0.0
    if edm_type is EdmType.BOOLEAN:
        return original is decrypted
    return bool(original == decrypted) and not isinstance(decrypted, bool)


properties = st.dictionaries(
    st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True).filter(lambda n: n not in ("PartitionKey", "RowKey")),
    st.sampled_from(list(VALUES)).flatmap(lambda t: st.tuples(st.just(t), VALUES[t])),
    min_size=1,
    max_size=8,
)
keys = st.text(min_size=0, max_size=40).filter(lambda k: sendable(EdmType.STRING, k))


@FUZZ
@given(properties=properties, pk=keys, rk=keys)
def test_every_type_round_trips_exactly(properties: dict[str, tuple[EdmType, Any]], pk: str, rk: str) -> None:
    assume(all(sendable(edm_type, value) for edm_type, value in properties.values()))
    values = {"PartitionKey": pk, "RowKey": rk, **{name: value for name, (_, value) in properties.items()}}
    types = {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING,
             **{name: edm_type for name, (edm_type, _) in properties.items()}}
    encrypted = encrypt_payload(EntityPayload(values, types), POLICY, names(*properties))
    assert all(encrypted.types[name] is EdmType.BINARY for name in properties)
    decrypted = decrypt_payload(encrypted, POLICY)
    assert set(decrypted.values) == set(values)
    for name, (edm_type, value) in properties.items():
        assert decrypted.types[name] is edm_type
        assert same_value(edm_type, value, decrypted.values[name]), (name, edm_type, value, decrypted.values[name])


def _entity(protocol: str) -> EntityPayload:
    values = {"PartitionKey": "pk", "RowKey": "rk", "text": "a secret longer than one block of AES",
              "number": 2**60, "blob": bytes(range(40))}
    types = {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING, "text": EdmType.STRING,
             "number": EdmType.INT64, "blob": EdmType.BINARY}
    if protocol == PROTOCOL_LEGACY:
        del values["number"], values["blob"], types["number"], types["blob"]
    chosen = [name for name in values if name not in ("PartitionKey", "RowKey")]
    return encrypt_payload(EntityPayload(values, types), POLICY.replace(protocol=protocol), names(*chosen))


def flip(data: bytes, bit: int) -> bytes:
    changed = bytearray(data)
    changed[(bit // 8) % len(changed)] ^= 1 << (bit % 8)
    return bytes(changed)


def with_metadata(encrypted: EntityPayload, change: Any) -> EntityPayload:
    metadata = json.loads(encrypted.values[METADATA_KEY])
    change(metadata)
    return EntityPayload({**encrypted.values, METADATA_KEY: json.dumps(metadata)}, dict(encrypted.types))


AUTHENTICATED = _entity(PROTOCOL_AUTHENTICATED)


@FUZZ
@given(target=st.sampled_from(["text", "number", "blob", METADATA_NAMES]), bit=st.integers(0, 10**6))
def test_a_flipped_bit_in_any_sealed_value_is_detected(target: str, bit: int) -> None:
    # nonce (the first 12 bytes), ciphertext and tag (the last 16) alike
    tampered = EntityPayload(dict(AUTHENTICATED.values), dict(AUTHENTICATED.types))
    tampered.values[target] = flip(AUTHENTICATED.values[target], bit)
    with pytest.raises(TableEncryptionError):
        decrypt_payload(tampered, POLICY)


@FUZZ
@given(bit=st.integers(0, 10**6))
def test_a_flipped_bit_in_the_key_metadata_text_is_detected(bit: int) -> None:
    text = AUTHENTICATED.values[METADATA_KEY]
    index = (bit // 7) % len(text)
    changed = text[:index] + chr(ord(text[index]) ^ (1 << (bit % 7))) + text[index + 1:]
    tampered = EntityPayload({**AUTHENTICATED.values, METADATA_KEY: changed}, dict(AUTHENTICATED.types))
    with pytest.raises(TableEncryptionError):
        decrypt_payload(tampered, POLICY)


@pytest.mark.parametrize("protocol", [PROTOCOL_AUTHENTICATED, PROTOCOL_LEGACY])
@FUZZ
@given(bit=st.integers(0, 10**6))
def test_a_flipped_bit_in_the_wrapped_key_is_detected(protocol: str, bit: int) -> None:
    encrypted = AUTHENTICATED if protocol == PROTOCOL_AUTHENTICATED else LEGACY

    def change(metadata: dict[str, Any]) -> None:
        wrapped = base64.b64decode(metadata["WrappedContentKey"]["EncryptedKey"])
        metadata["WrappedContentKey"]["EncryptedKey"] = base64.b64encode(flip(wrapped, bit)).decode()

    with pytest.raises(TableEncryptionError):
        decrypt_payload(with_metadata(encrypted, change), POLICY)


LEGACY = _entity(PROTOCOL_LEGACY)


@FUZZ
@given(bit=st.integers(0, 127))
def test_protocol_1_0_detects_a_flipped_content_iv(bit: int) -> None:
    # every IV derives from it: the list of names no longer decrypts to a list
    def change(metadata: dict[str, Any]) -> None:
        iv = base64.b64decode(metadata["ContentEncryptionIV"])
        metadata["ContentEncryptionIV"] = base64.b64encode(flip(iv, bit)).decode()

    with pytest.raises(TableEncryptionError):
        decrypt_payload(with_metadata(LEGACY, change), POLICY)


@FUZZ
@given(bit=st.integers(0, 10**6))
def test_protocol_1_0_never_returns_the_original_text_for_a_flipped_ciphertext(bit: int) -> None:
    # 1.0 has no integrity: a flip may decrypt to other text (CBC), or fail on padding or UTF-8;
    # what it cannot do is pass unnoticed as the original, or raise anything but a named error
    tampered = EntityPayload(dict(LEGACY.values), dict(LEGACY.types))
    tampered.values["text"] = flip(LEGACY.values["text"], bit)
    try:
        result = decrypt_payload(tampered, POLICY)
    except TableEncryptionError:
        return
    assert result.values["text"] != "a secret longer than one block of AES"
