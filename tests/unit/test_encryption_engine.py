"""The encryption engine: both protocols round-trip, refuse what they cannot do, and fail with
named errors that carry the entity's keys and the key id and never the plaintext."""

from __future__ import annotations

import base64
import json
import traceback
from typing import Any

import pytest

from encryption_helpers import KEY_BYTES, OTHER_KEY_BYTES, local_key, names, payload, policy
from tablesdk._core._errors import TableServiceError
from tablesdk._encryption import (
    METADATA_KEY,
    METADATA_NAMES,
    METADATA_PROPERTIES,
    PROTOCOL_AUTHENTICATED,
    PROTOCOL_LEGACY,
    EncryptedDataError,
    EncryptionKeyError,
    EncryptionRequiredError,
    LocalKeyWrapper,
    TableEncryptionError,
    TableEncryptionPolicy,
    UnknownEncryptionProtocolError,
    decrypt_payload,
    decrypt_payload_with_details,
    dict_key_resolver,
    protocol_of,
    encrypt_payload,
    is_encrypted,
)
from tablesdk._entities._edm import EdmType, EntityPayload

pytest.importorskip("cryptography")

BOTH = pytest.mark.parametrize("protocol", [PROTOCOL_AUTHENTICATED, PROTOCOL_LEGACY])
SECRET = "the secret text 0123456789abcdef"


@BOTH
def test_chosen_strings_round_trip_and_the_rest_stays_plain(protocol: str) -> None:
    original = payload(secret=SECRET, plain="visible", number=(7, EdmType.INT32))
    before = (dict(original.values), dict(original.types))
    chosen = policy(protocol)
    encrypted = encrypt_payload(original, chosen, names("secret"))
    assert (original.values, original.types) == before  # the input is untouched
    assert isinstance(encrypted.values["secret"], bytes) and encrypted.types["secret"] is EdmType.BINARY
    assert SECRET.encode() not in encrypted.values["secret"]
    assert encrypted.values["plain"] == "visible" and encrypted.values["number"] == 7
    assert encrypted.types[METADATA_NAMES] is EdmType.BINARY and encrypted.types[METADATA_KEY] is EdmType.STRING
    metadata = json.loads(encrypted.values[METADATA_KEY])
    assert metadata["EncryptionAgent"]["Protocol"] == protocol
    assert metadata["WrappedContentKey"]["KeyId"] == "local-1"
    assert metadata["WrappedContentKey"]["Algorithm"] == "A256KW"
    assert ("ContentEncryptionIV" in metadata) is (protocol == PROTOCOL_LEGACY)
    assert is_encrypted(encrypted) and not is_encrypted(original)
    decrypted = decrypt_payload(encrypted, chosen)
    assert decrypted.values == original.values
    assert decrypted.types == original.types
    assert not set(METADATA_PROPERTIES) & set(decrypted.values)


@BOTH
def test_each_write_uses_a_fresh_content_key_and_iv(protocol: str) -> None:
    chosen = policy(protocol)
    first = encrypt_payload(payload(secret=SECRET), chosen, names("secret"))
    second = encrypt_payload(payload(secret=SECRET), chosen, names("secret"))
    assert first.values["secret"] != second.values["secret"]
    assert first.values[METADATA_KEY] != second.values[METADATA_KEY]


def test_the_default_protocol_is_the_authenticated_one() -> None:
    assert TableEncryptionPolicy().protocol == PROTOCOL_AUTHENTICATED
    assert PROTOCOL_AUTHENTICATED != PROTOCOL_LEGACY
    # a number is Microsoft's kind of protocol id; ours can never be one
    with pytest.raises(ValueError):
        float(PROTOCOL_AUTHENTICATED)


@BOTH
def test_nothing_chosen_returns_the_payload_without_metadata(protocol: str) -> None:
    original = payload(a="x")
    assert encrypt_payload(original, policy(protocol), names()) is original
    assert decrypt_payload(original, policy(protocol)) is original


@BOTH
def test_write_empty_writes_metadata_with_an_empty_list(protocol: str) -> None:
    encrypted = encrypt_payload(payload(a="x"), policy(protocol), names(), write_empty=True)
    assert is_encrypted(encrypted)
    assert decrypt_payload(encrypted, policy(protocol)).values == payload(a="x").values


def test_require_encryption_refuses_to_write_or_read_unencrypted() -> None:
    required = policy(require_encryption=True)
    with pytest.raises(EncryptionRequiredError) as caught:
        encrypt_payload(payload("p1", "r1", a="x"), required, names())
    assert (caught.value.partition_key, caught.value.row_key) == ("p1", "r1")
    with pytest.raises(EncryptionRequiredError):
        decrypt_payload(payload(a="x"), required)
    with pytest.raises(EncryptionRequiredError):
        decrypt_payload(payload(a="x"), None, require_encryption=True)
    with pytest.raises(EncryptionRequiredError):
        decrypt_payload(payload(a="x"), policy(), require_encryption=True)


@pytest.mark.parametrize("name", ["PartitionKey", "RowKey"])
def test_the_keys_cannot_be_encrypted(name: str) -> None:
    with pytest.raises(TableEncryptionError) as caught:
        encrypt_payload(payload(a="x"), policy(), names(name))
    assert caught.value.property_name == name


@pytest.mark.parametrize("name", METADATA_PROPERTIES)
def test_a_payload_holding_a_metadata_name_is_refused(name: str) -> None:
    with pytest.raises(TableEncryptionError) as caught:
        encrypt_payload(payload(**{name: "x", "a": "y"}), policy(), names("a"))
    assert caught.value.property_name == name


@pytest.mark.parametrize(
    "value", [(5, EdmType.INT32), (b"x", EdmType.BINARY), (None, EdmType.STRING), ("5", EdmType.INT64)]
)
def test_protocol_1_0_encrypts_only_non_null_strings(value: Any) -> None:
    with pytest.raises(TableEncryptionError, match="only non-null strings") as caught:
        encrypt_payload(payload(a=value), policy(PROTOCOL_LEGACY), names("a"))
    assert caught.value.property_name == "a"


def test_the_authenticated_protocol_leaves_a_null_alone() -> None:
    encrypted = encrypt_payload(payload(a=(None, EdmType.STRING), b="x"), policy(), names("a", "b"))
    assert encrypted.values["a"] is None
    assert decrypt_payload(encrypted, policy()).values["a"] is None


@BOTH
def test_more_than_253_user_properties_are_refused(protocol: str) -> None:
    many = {f"p{i}": "x" for i in range(253)}
    encrypt_payload(payload(**many), policy(protocol), names("p0"))  # 253 fit beside the metadata
    with pytest.raises(TableEncryptionError, match="253"):
        encrypt_payload(payload(**many, extra="x"), policy(protocol), names("p0"))
    plain = payload(**many, extra="x", more="y")  # nothing chosen: written plain, the service's 255 apply
    assert encrypt_payload(plain, policy(protocol), names()) is plain


def test_an_encrypted_value_beyond_the_property_limit_is_refused() -> None:
    big = (b"\x00" * (64 * 1024), EdmType.BINARY)  # fits plain, not with its nonce, tag and type byte
    with pytest.raises(TableEncryptionError, match="65536") as caught:
        encrypt_payload(payload(blob=big), policy(), names("blob"))
    assert caught.value.property_name == "blob"


def test_an_entity_that_encryption_pushes_past_1_mib_is_refused() -> None:
    # 16 values, 1,047,500 bytes by the service's formula: each encrypted grows 29 bytes (nonce, tag,
    # type byte) and the metadata adds about 800, so one encrypted fits and sixteen do not
    blobs = {f"b{i}": (b"\x00" * 65500, EdmType.BINARY) for i in range(15)}
    blobs["b15"] = (b"\x00" * 64732, EdmType.BINARY)
    plain = payload(**blobs)
    encrypted = encrypt_payload(plain, policy(), names("b0"))  # one value grows: still fits
    assert is_encrypted(encrypted)
    with pytest.raises(TableEncryptionError, match="1048576") as caught:
        encrypt_payload(plain, policy(), names(*blobs))
    assert caught.value.property_name in blobs


def test_writing_needs_a_key() -> None:
    with pytest.raises(EncryptionKeyError):
        encrypt_payload(payload(a="x"), TableEncryptionPolicy(), names("a"))


@BOTH
def test_reading_without_a_policy_or_with_the_wrong_key_fails_with_the_key_id(protocol: str) -> None:
    encrypted = encrypt_payload(payload("p1", "r1", a=SECRET), policy(protocol), names("a"))
    with pytest.raises(EncryptionKeyError) as caught:
        decrypt_payload(encrypted, None)
    assert (caught.value.partition_key, caught.value.row_key, caught.value.key_id) == ("p1", "r1", "local-1")
    impostor = LocalKeyWrapper(OTHER_KEY_BYTES, "local-1")  # same id, other bytes: unwrap fails
    with pytest.raises(EncryptionKeyError, match="unwrap"):
        decrypt_payload(encrypted, TableEncryptionPolicy(key=impostor))
    other_id = LocalKeyWrapper(KEY_BYTES, "local-2")
    with pytest.raises(EncryptionKeyError, match="local-2"):
        decrypt_payload(encrypted, TableEncryptionPolicy(key=other_id))
    with pytest.raises(EncryptionKeyError):
        decrypt_payload(encrypted, TableEncryptionPolicy(key_resolver=lambda kid: None))


def test_the_resolver_finds_old_keys_and_is_asked_first() -> None:
    old, new = local_key("old"), local_key("new", OTHER_KEY_BYTES)
    written = encrypt_payload(payload(a=SECRET), policy(key=old), names("a"))
    reader = TableEncryptionPolicy(key=new, key_resolver=dict_key_resolver(old, new))
    assert decrypt_payload(written, reader).values["a"] == SECRET
    asked: list[str] = []

    def resolver(kid: str) -> Any:
        asked.append(kid)
        return None

    assert decrypt_payload(written, TableEncryptionPolicy(key=old, key_resolver=resolver)).values["a"] == SECRET
    assert asked == ["old"]  # then the policy's key, whose id matches


def test_a_failing_resolver_or_key_is_a_named_error() -> None:
    written = encrypt_payload(payload(a=SECRET), policy(), names("a"))

    def resolver(kid: str) -> Any:
        raise RuntimeError("vault down")

    with pytest.raises(EncryptionKeyError, match="RuntimeError"):
        decrypt_payload(written, TableEncryptionPolicy(key_resolver=resolver))

    class Broken(LocalKeyWrapper):
        def wrap_key(self, key: bytes) -> bytes:
            raise RuntimeError("no")

    with pytest.raises(EncryptionKeyError, match="wrap"):
        encrypt_payload(payload(a="x"), TableEncryptionPolicy(key=Broken(KEY_BYTES, "b")), names("a"))


@BOTH
def test_a_projection_without_an_encrypted_property_decrypts_the_rest(protocol: str) -> None:
    encrypted = encrypt_payload(payload(a=SECRET, b="second"), policy(protocol), names("a", "b"))
    del encrypted.values["b"], encrypted.types["b"]
    assert decrypt_payload(encrypted, policy(protocol)).values == payload(a=SECRET).values


@BOTH
def test_a_null_for_an_encrypted_name_reads_as_a_null(protocol: str) -> None:
    # a projection that names a property the entity lacks gets a null for it from the service
    encrypted = encrypt_payload(payload(a=SECRET, b="second"), policy(protocol), names("a", "b"))
    encrypted.values["b"] = None
    decrypted = decrypt_payload(encrypted, policy(protocol))
    assert decrypted.values["a"] == SECRET and decrypted.values["b"] is None


def test_a_long_protocol_name_is_cut_in_the_message() -> None:
    encrypted = encrypt_payload(payload(a=SECRET), policy(), names("a"))
    metadata = json.loads(encrypted.values[METADATA_KEY])
    metadata["EncryptionAgent"]["Protocol"] = "x" * 5000
    encrypted.values[METADATA_KEY] = json.dumps(metadata)
    with pytest.raises(UnknownEncryptionProtocolError) as caught:
        decrypt_payload(encrypted, policy())
    assert len(str(caught.value)) < 400


@BOTH
def test_untyped_base64_values_of_a_nometadata_read_decrypt(protocol: str) -> None:
    encrypted = encrypt_payload(payload(a=SECRET), policy(protocol), names("a"))
    values = {
        name: base64.b64encode(value).decode() if isinstance(value, bytes) else value
        for name, value in encrypted.values.items()
    }
    decrypted = decrypt_payload(EntityPayload(values, {}), policy(protocol))
    assert decrypted.values["a"] == SECRET and decrypted.types["a"] is EdmType.STRING


@BOTH
def test_one_metadata_property_alone_is_damaged_data(protocol: str) -> None:
    encrypted = encrypt_payload(payload(a=SECRET), policy(protocol), names("a"))
    for missing in METADATA_PROPERTIES:
        values = dict(encrypted.values)
        del values[missing]
        with pytest.raises(EncryptedDataError) as caught:
            decrypt_payload(EntityPayload(values, dict(encrypted.types)), policy(protocol))
        assert caught.value.property_name == missing


def test_an_unknown_protocol_is_named() -> None:
    encrypted = encrypt_payload(payload(a=SECRET), policy(), names("a"))
    for protocol in ("2.0", "tablesdk-aes-gcm-9"):
        metadata = json.loads(encrypted.values[METADATA_KEY])
        metadata["EncryptionAgent"]["Protocol"] = protocol
        encrypted.values[METADATA_KEY] = json.dumps(metadata)
        with pytest.raises(UnknownEncryptionProtocolError, match=protocol):
            decrypt_payload(encrypted, policy())
    bare = json.dumps({"EncryptionAgent": {"Protocol": "3.0", "EncryptionAlgorithm": "X"}})
    encrypted.values[METADATA_KEY] = bare
    with pytest.raises(UnknownEncryptionProtocolError):
        decrypt_payload(encrypted, policy())


@BOTH
def test_an_algorithm_that_is_not_the_protocols_is_refused(protocol: str) -> None:
    encrypted = encrypt_payload(payload(a=SECRET), policy(protocol), names("a"))
    metadata = json.loads(encrypted.values[METADATA_KEY])
    metadata["EncryptionAgent"]["EncryptionAlgorithm"] = "AES_CTR_256"
    encrypted.values[METADATA_KEY] = json.dumps(metadata)
    with pytest.raises(UnknownEncryptionProtocolError, match="AES_CTR_256"):
        decrypt_payload(encrypted, policy(protocol))


@pytest.mark.parametrize("metadata", ["not json", "[]", json.dumps({"EncryptionAgent": {"Protocol": "1.0"}}), "{}"])
def test_malformed_metadata_is_damaged_data(metadata: str) -> None:
    encrypted = encrypt_payload(payload(a=SECRET), policy(PROTOCOL_LEGACY), names("a"))
    encrypted.values[METADATA_KEY] = metadata
    with pytest.raises(EncryptedDataError, match="malformed"):
        decrypt_payload(encrypted, policy())


@BOTH
def test_a_value_moved_to_another_property_or_entity_fails_under_the_authenticated_protocol(protocol: str) -> None:
    chosen = policy(protocol)
    encrypted = encrypt_payload(payload("p1", "r1", a=SECRET, b="other"), chosen, names("a", "b"))
    swapped = EntityPayload(dict(encrypted.values), dict(encrypted.types))
    swapped.values["a"], swapped.values["b"] = encrypted.values["b"], encrypted.values["a"]
    moved = EntityPayload({**encrypted.values, "RowKey": "r2"}, dict(encrypted.types))
    if protocol == PROTOCOL_AUTHENTICATED:
        for tampered in (swapped, moved):
            with pytest.raises(EncryptedDataError):
                decrypt_payload(tampered, chosen)
    else:  # 1.0 binds nothing: the IV changes, so what decrypts is garbage or a padding error
        for tampered in (swapped, moved):
            try:
                result = decrypt_payload(tampered, chosen)
            except EncryptedDataError:
                continue
            assert result.values["a"] != SECRET


@BOTH
def test_errors_hold_no_plaintext_no_key_and_chain_nothing_that_does(protocol: str) -> None:
    chosen = policy(protocol)
    encrypted = encrypt_payload(payload(a=SECRET), chosen, names("a"))
    data = bytearray(encrypted.values["a"])
    data[-1] ^= 0x01
    encrypted.values["a"] = bytes(data)
    with pytest.raises(TableEncryptionError) as caught:
        decrypt_payload(encrypted, chosen)
    error = caught.value
    assert isinstance(error, TableServiceError)
    shown = "".join(traceback.format_exception(type(error), error, error.__traceback__)) + repr(error)
    for secret in (SECRET, KEY_BYTES.hex(), repr(KEY_BYTES), SECRET[:16]):
        assert secret not in shown
    context = error.__context__
    while context is not None:
        assert not isinstance(context, UnicodeDecodeError)
        context = context.__context__


def test_a_damaged_string_never_leaks_partial_text_through_a_decode_error() -> None:
    # a legacy ciphertext whose plaintext is not UTF-8 (bytes that no writer encrypts as text)
    from tablesdk._encryption import _legacy_v1

    encrypted = encrypt_payload(payload(a=SECRET), policy(PROTOCOL_LEGACY), names("a"))
    metadata = json.loads(encrypted.values[METADATA_KEY])
    content_key = local_key().unwrap_key(base64.b64decode(metadata["WrappedContentKey"]["EncryptedKey"]), "A256KW")
    iv = _legacy_v1.property_iv(base64.b64decode(metadata["ContentEncryptionIV"]), "pk", "rk", "a", java_v1=False)
    encrypted.values["a"] = _legacy_v1.encrypt_value(content_key, iv, b"SECRETPREFIX\xff\xfe")
    with pytest.raises(EncryptedDataError) as caught:
        decrypt_payload(encrypted, policy())
    assert caught.value.__context__ is None and "SECRETPREFIX" not in str(caught.value)


def test_the_policy_is_immutable_and_its_repr_shows_no_key_bytes() -> None:
    chosen = policy(require_encryption=True, encryption_resolver=names("a"))
    with pytest.raises(AttributeError):
        chosen.protocol = PROTOCOL_LEGACY  # type: ignore[misc]
    text = repr(chosen)
    assert "local-1" in text and PROTOCOL_AUTHENTICATED in text
    assert KEY_BYTES.hex() not in text and repr(KEY_BYTES) not in text and "\\x00\\x01" not in text
    changed = chosen.replace(protocol=PROTOCOL_LEGACY)
    assert changed.protocol == PROTOCOL_LEGACY and changed.key is chosen.key and chosen.protocol == PROTOCOL_AUTHENTICATED
    assert chosen == chosen.replace() and hash(chosen) == hash(chosen.replace())


@pytest.mark.parametrize(
    "kwargs, field",
    [({"protocol": "2.0"}, "protocol"), ({"key": object()}, "key"), ({"key_resolver": 5}, "key_resolver"),
     ({"encryption_resolver": "a"}, "encryption_resolver")],
)
def test_a_policy_refuses_bad_fields_naming_them(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError) as caught:
        TableEncryptionPolicy(**kwargs)
    assert getattr(caught.value, "field") == field


def test_an_error_pickles_with_its_fields() -> None:
    import pickle

    error = EncryptedDataError("the property fails authentication", partition_key="p", row_key="r", key_id="k",
                               property_name="a")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is EncryptedDataError and str(copy) == str(error)
    assert (copy.partition_key, copy.row_key, copy.key_id, copy.property_name) == ("p", "r", "k", "a")


@BOTH
def test_the_details_say_how_an_entity_was_encrypted_for_a_re_encryption(protocol: str) -> None:
    written = encrypt_payload(payload(a=SECRET, b="x", c="plain"), policy(protocol), names("b", "a"))
    assert protocol_of(written) == protocol and protocol_of(payload(a="x")) is None
    decrypted, details = decrypt_payload_with_details(written, policy(protocol))
    assert details is not None and details == (protocol, "local-1", ("a", "b"))
    again = encrypt_payload(decrypted, policy(PROTOCOL_AUTHENTICATED), names(*details.names))
    assert protocol_of(again) == PROTOCOL_AUTHENTICATED
    assert decrypt_payload(again, policy()).values == decrypted.values
    assert decrypt_payload_with_details(payload(a="x"), policy()) == (payload(a="x"), None)


def test_protocol_of_names_an_unknown_protocol_and_refuses_malformed_metadata() -> None:
    written = encrypt_payload(payload(a=SECRET), policy(), names("a"))
    written.values[METADATA_KEY] = json.dumps({"EncryptionAgent": {"Protocol": "9.9", "EncryptionAlgorithm": "X"}})
    assert protocol_of(written) == "9.9"
    written.values[METADATA_KEY] = "{"
    with pytest.raises(EncryptedDataError):
        protocol_of(written)


def test_a_policy_can_refuse_to_read_protocol_1_0() -> None:
    strict = policy(allow_legacy_reads=False)
    legacy = encrypt_payload(payload(a=SECRET), policy(PROTOCOL_LEGACY), names("a"))
    with pytest.raises(UnknownEncryptionProtocolError, match="allow_legacy_reads") as caught:
        decrypt_payload(legacy, strict)
    assert caught.value.key_id == "local-1"
    authenticated = encrypt_payload(payload(a=SECRET), strict, names("a"))
    assert decrypt_payload(authenticated, strict).values["a"] == SECRET
    assert "allow_legacy_reads=False" in repr(strict)
    with pytest.raises(ValueError):
        strict.replace(protocol=PROTOCOL_LEGACY)
