"""Key-encryption keys: the legacy protocol, AES key wrap, RSA-OAEP, the Key Vault adapter against a
fake client, reprs without key bytes, and cryptography loaded only when a key is used."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from encryption_helpers import KEY_BYTES, names, payload
from tablesdk._core._errors import TableValidationError
from tablesdk._encryption import (
    PROTOCOL_AUTHENTICATED,
    PROTOCOL_LEGACY,
    EncryptionKeyError,
    KeyEncryptionKey,
    KeyVaultKeyWrapper,
    LocalKeyWrapper,
    RsaKeyWrapper,
    TableEncryptionPolicy,
    decrypt_payload,
    dict_key_resolver,
    encrypt_payload,
)

pytest.importorskip("cryptography")
from cryptography.hazmat.primitives.asymmetric import padding as rsa_padding  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from cryptography.hazmat.primitives import hashes  # noqa: E402

BOTH = pytest.mark.parametrize("protocol", [PROTOCOL_AUTHENTICATED, PROTOCOL_LEGACY])


@pytest.fixture(scope="module")
def rsa_key() -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def test_local_key_wrap_matches_rfc_3394() -> None:
    # RFC 3394 section 4.6: 256 bits of key data with a 256-bit KEK
    kek = bytes.fromhex("000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F")
    data = bytes.fromhex("00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F")
    wrapped = bytes.fromhex("28C9F404C4B810F4CBCCB35CFB87F8263F5786E2D80ED326CBC7F0E71A99F43BFB988B9B7A02DD21")
    key = LocalKeyWrapper(kek, "rfc")
    assert key.get_key_wrap_algorithm() == "A256KW"
    assert key.wrap_key(data) == wrapped
    assert key.unwrap_key(wrapped, "A256KW") == data


@pytest.mark.parametrize("size, algorithm", [(16, "A128KW"), (24, "A192KW"), (32, "A256KW")])
def test_local_keys_of_each_aes_size_name_their_algorithm(size: int, algorithm: str) -> None:
    key = LocalKeyWrapper(bytes(size), "k")
    assert key.get_key_wrap_algorithm() == algorithm
    assert key.unwrap_key(key.wrap_key(bytes(32)), algorithm) == bytes(32)


def test_local_key_refusals() -> None:
    with pytest.raises(TableValidationError) as caught:
        LocalKeyWrapper(bytes(31), "k")
    assert caught.value.field == "key"
    with pytest.raises(TableValidationError):
        LocalKeyWrapper(bytes(32), "")
    key = LocalKeyWrapper(KEY_BYTES, "k")
    with pytest.raises(ValueError, match="A256KW"):
        key.unwrap_key(key.wrap_key(bytes(32)), "RSA-OAEP")
    wrapped = bytearray(key.wrap_key(bytes(32)))
    wrapped[3] ^= 1
    with pytest.raises(ValueError, match="does not unwrap"):
        key.unwrap_key(bytes(wrapped), "A256KW")


@pytest.mark.parametrize("algorithm", ["RSA-OAEP", "RSA-OAEP-256"])
def test_rsa_keys_wrap_with_oaep(rsa_key: Any, algorithm: str) -> None:
    key = RsaKeyWrapper(rsa_key, "rsa-1", algorithm=algorithm)
    wrapped = key.wrap_key(bytes(range(32)))
    assert key.get_key_wrap_algorithm() == algorithm
    assert key.unwrap_key(wrapped, algorithm) == bytes(range(32))
    digest = hashes.SHA1() if algorithm == "RSA-OAEP" else hashes.SHA256()
    oaep = rsa_padding.OAEP(mgf=rsa_padding.MGF1(algorithm=digest), algorithm=digest, label=None)
    assert rsa_key.decrypt(wrapped, oaep) == bytes(range(32))  # what the legacy clients' RSA-OAEP means


def test_a_public_rsa_key_wraps_but_cannot_unwrap(rsa_key: Any) -> None:
    writer = RsaKeyWrapper(rsa_key.public_key(), "rsa-1")
    written = encrypt_payload(payload(a="secret"), TableEncryptionPolicy(key=writer), names("a"))
    with pytest.raises(EncryptionKeyError, match="unwrap"):
        decrypt_payload(written, TableEncryptionPolicy(key=writer))
    reader = TableEncryptionPolicy(key=RsaKeyWrapper(rsa_key, "rsa-1"))
    assert decrypt_payload(written, reader).values["a"] == "secret"
    assert "public 2048-bit" in repr(writer)


def test_rsa_key_refusals(rsa_key: Any) -> None:
    with pytest.raises(TableValidationError):
        RsaKeyWrapper(b"not a key", "k")
    with pytest.raises(TableValidationError):
        RsaKeyWrapper(rsa_key, "k", algorithm="RSA1_5")
    key = RsaKeyWrapper(rsa_key, "k")
    with pytest.raises(ValueError, match="does not decrypt"):
        key.unwrap_key(bytes(256), "RSA-OAEP")


@dataclass
class WrapResult:
    key_id: str
    algorithm: str
    encrypted_key: bytes


@dataclass
class UnwrapResult:
    key_id: str
    algorithm: str
    key: bytes


class FakeCryptographyClient:
    """The two calls of azure-keyvault-keys' CryptographyClient, done locally with an RSA key."""

    def __init__(self, private_key: Any, key_id: str) -> None:
        self.key_id = key_id
        self._wrapper = RsaKeyWrapper(private_key, key_id)
        self.calls: list[tuple[str, str]] = []

    def wrap_key(self, algorithm: str, key: bytes, **kwargs: Any) -> WrapResult:
        self.calls.append(("wrap", algorithm))
        assert algorithm == "RSA-OAEP"
        return WrapResult(self.key_id, algorithm, self._wrapper.wrap_key(key))

    def unwrap_key(self, algorithm: str, encrypted_key: bytes, **kwargs: Any) -> UnwrapResult:
        self.calls.append(("unwrap", algorithm))
        return UnwrapResult(self.key_id, algorithm, self._wrapper.unwrap_key(encrypted_key, algorithm))


@BOTH
def test_a_key_vault_key_wraps_and_unwraps_through_its_client(rsa_key: Any, protocol: str) -> None:
    kid = "https://vault.example/keys/tables/0123456789abcdef"
    client = FakeCryptographyClient(rsa_key, kid)
    key = KeyVaultKeyWrapper(client)
    assert key.get_kid() == kid and key.get_key_wrap_algorithm() == "RSA-OAEP"
    chosen = TableEncryptionPolicy(key=key, protocol=protocol)
    written = encrypt_payload(payload(a="secret"), chosen, names("a"))
    assert decrypt_payload(written, chosen).values["a"] == "secret"
    assert client.calls == [("wrap", "RSA-OAEP"), ("unwrap", "RSA-OAEP")]
    # what the vault wrapped, a local copy of the same RSA key unwraps (the format is the same)
    assert decrypt_payload(written, TableEncryptionPolicy(key=RsaKeyWrapper(rsa_key, kid))).values["a"] == "secret"
    assert repr(key) == f"KeyVaultKeyWrapper(kid={kid!r}, algorithm='RSA-OAEP')"


def test_a_key_vault_failure_is_an_encryption_key_error(rsa_key: Any) -> None:
    class Failing(FakeCryptographyClient):
        def unwrap_key(self, algorithm: str, encrypted_key: bytes, **kwargs: Any) -> UnwrapResult:
            raise PermissionError("403 Forbidden")

    client = Failing(rsa_key, "kv")
    written = encrypt_payload(payload(a="secret"), TableEncryptionPolicy(key=KeyVaultKeyWrapper(client)), names("a"))
    with pytest.raises(EncryptionKeyError, match="PermissionError") as caught:
        decrypt_payload(written, TableEncryptionPolicy(key=KeyVaultKeyWrapper(client)))
    assert caught.value.key_id == "kv"


def test_an_asyncio_key_vault_client_is_refused_clearly(rsa_key: Any) -> None:
    class AsyncClient:
        key_id = "kv"

        async def wrap_key(self, algorithm: str, key: bytes) -> WrapResult:
            raise AssertionError("never awaited")

        async def unwrap_key(self, algorithm: str, encrypted_key: bytes) -> UnwrapResult:
            raise AssertionError("never awaited")

    key = KeyVaultKeyWrapper(AsyncClient())
    with pytest.raises(TypeError, match="synchronous"):
        key.wrap_key(bytes(32))
    with pytest.raises(EncryptionKeyError, match="TypeError"):
        encrypt_payload(payload(a="x"), TableEncryptionPolicy(key=key), names("a"))


def test_an_ec_key_is_not_an_rsa_key() -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    with pytest.raises(TableValidationError, match="RSAPrivateKey"):
        RsaKeyWrapper(ec.generate_private_key(ec.SECP256R1()), "k")


def test_the_key_vault_adapter_checks_its_client() -> None:
    with pytest.raises(TableValidationError):
        KeyVaultKeyWrapper(object(), "kid")
    with pytest.raises(TableValidationError, match="kid"):
        KeyVaultKeyWrapper(type("C", (), {"wrap_key": lambda s: 0, "unwrap_key": lambda s: 0})())


class LegacyStyleKey:
    """A key-encryption key as the azure-cosmosdb-table samples write it (no tablesdk base class)."""

    def __init__(self, kid: str, secret: bytes) -> None:
        self.kid, self.secret = kid, secret

    def wrap_key(self, key: bytes) -> bytes:
        from cryptography.hazmat.primitives.keywrap import aes_key_wrap

        return aes_key_wrap(self.secret, key)

    def unwrap_key(self, key: bytes, algorithm: str) -> bytes:
        from cryptography.hazmat.primitives.keywrap import aes_key_unwrap

        if algorithm != "A256KW":
            raise ValueError("unknown algorithm")
        return aes_key_unwrap(self.secret, key)

    def get_key_wrap_algorithm(self) -> str:
        return "A256KW"

    def get_kid(self) -> str:
        return self.kid


@BOTH
def test_a_key_written_for_the_old_sdk_works_unchanged(protocol: str) -> None:
    key = LegacyStyleKey("legacy", KEY_BYTES)
    assert isinstance(key, KeyEncryptionKey)
    chosen = TableEncryptionPolicy(key=key, protocol=protocol)
    written = encrypt_payload(payload(a="secret"), chosen, names("a"))
    # and the same secret as a LocalKeyWrapper reads what it wrote
    reader = TableEncryptionPolicy(key_resolver=dict_key_resolver(LocalKeyWrapper(KEY_BYTES, "legacy")))
    assert decrypt_payload(written, reader).values["a"] == "secret"


def test_no_repr_shows_key_bytes(rsa_key: Any) -> None:
    local = LocalKeyWrapper(KEY_BYTES, "k")
    texts = [repr(local), repr(RsaKeyWrapper(rsa_key, "r")), repr(TableEncryptionPolicy(key=local)), str(local)]
    for text in texts:
        assert KEY_BYTES.hex() not in text and "\\x00\\x01\\x02" not in text and "private_numbers" not in text


def test_importing_the_engine_loads_no_cryptography() -> None:
    script = (
        "import sys\nimport tablesdk\nimport tablesdk._encryption\n"
        "from tablesdk import TableEncryptionPolicy, PROTOCOL_LEGACY\n"
        "print('cryptography' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]


def test_the_public_names_are_the_engines() -> None:
    import tablesdk
    import tablesdk._encryption as engine

    for name in ("TableEncryptionPolicy", "LocalKeyWrapper", "RsaKeyWrapper", "KeyVaultKeyWrapper", "KeyEncryptionKey",
                 "EncryptedDataError", "EncryptionKeyError", "UnknownEncryptionProtocolError",
                 "EncryptionRequiredError", "TableEncryptionError", "PROTOCOL_LEGACY", "PROTOCOL_AUTHENTICATED"):
        assert getattr(tablesdk, name) is getattr(engine, name)


def test_without_cryptography_the_first_key_use_says_which_extra_to_install() -> None:
    script = (
        "import sys\nsys.modules['cryptography'] = None\n"
        "from tablesdk import LocalKeyWrapper\n"
        "key = LocalKeyWrapper(bytes(32), 'k')\n"  # making a key needs nothing yet
        "try:\n    key.wrap_key(bytes(32))\nexcept ImportError as error:\n    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "cryptography" in done.stdout and "'encryption' extra" in done.stdout
