"""Key-encryption keys: the protocol the legacy clients defined, and the keys tablesdk ships.

A key-encryption key (KEK) wraps each entity's random content key; the wrapped key, the KEK's id
and its wrapping algorithm are stored in the entity's metadata. :class:`KeyEncryptionKey` is the
protocol of the legacy clients unchanged (``wrap_key``, ``unwrap_key``, ``get_kid``,
``get_key_wrap_algorithm``), so a key object written for ``azure-cosmosdb-table`` works as it is.

- :class:`LocalKeyWrapper`: AES key wrap (RFC 3394; ``A256KW`` for a 32-byte key) with a local key.
- :class:`RsaKeyWrapper`: RSA-OAEP with a ``cryptography`` RSA key (the public key suffices to write).
- :class:`KeyVaultKeyWrapper`: any object with the ``wrap_key``/``unwrap_key`` methods of Azure Key
  Vault's ``CryptographyClient`` (duck-typed: tablesdk does not depend on the Azure SDK).

None of them shows key bytes in its repr.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional, Protocol, runtime_checkable

from .._core._errors import TableValidationError
from ._crypto import primitives

__all__ = [
    "KeyEncryptionKey",
    "KeyResolver",
    "LocalKeyWrapper",
    "RsaKeyWrapper",
    "KeyVaultKeyWrapper",
    "dict_key_resolver",
]


@runtime_checkable
class KeyEncryptionKey(Protocol):
    """The key-encryption-key protocol of the legacy table clients.

    ``wrap_key`` wraps a content key with the algorithm ``get_key_wrap_algorithm`` names;
    ``unwrap_key`` unwraps a wrapped key given the algorithm stored with it; ``get_kid`` is the id
    stored with every entity the key wraps, and looked up when reading.
    """

    # Positional-only: a key class may name the parameters as it likes (the engine passes them by position).
    def wrap_key(self, key: bytes, /) -> bytes: ...

    def unwrap_key(self, key: bytes, algorithm: str, /) -> bytes: ...

    def get_kid(self) -> str: ...

    def get_key_wrap_algorithm(self) -> str: ...


#: A key id to the key that unwraps it, or None when the resolver knows no such key.
KeyResolver = Callable[[str], Optional[KeyEncryptionKey]]


def dict_key_resolver(*keys: KeyEncryptionKey) -> KeyResolver:
    """A :data:`KeyResolver` that finds each of ``keys`` by its id (``get_kid()``)."""
    by_kid = {key.get_kid(): key for key in keys}
    return by_kid.get


_AES_KW_BY_SIZE = {16: "A128KW", 24: "A192KW", 32: "A256KW"}


class LocalKeyWrapper:
    """A key-encryption key held in memory: AES key wrap (RFC 3394) with a 16-, 24- or 32-byte key
    (``A128KW``, ``A192KW``, ``A256KW``), as the legacy clients' symmetric keys wrap.

    ``kid`` is the id stored with each entity (keep it stable: readers find the key by it).
    """

    __slots__ = ("_key", "_kid", "_algorithm")

    def __init__(self, key: bytes, kid: str) -> None:
        key = bytes(memoryview(key))  # bytes(32) would be 32 zero bytes: a size is not a key
        algorithm = _AES_KW_BY_SIZE.get(len(key))
        if algorithm is None:
            raise TableValidationError("key", "an AES key-wrap key is 16, 24 or 32 bytes", f"got {len(key)} bytes")
        if not isinstance(kid, str) or not kid:
            raise TableValidationError("kid", "a key id is a non-empty str")
        self._key = key
        self._kid = kid
        self._algorithm = algorithm

    def wrap_key(self, key: bytes) -> bytes:
        """``key`` wrapped with this key (RFC 3394)."""
        wrapped: bytes = primitives()["aes_key_wrap"](self._key, bytes(key))
        return wrapped

    def unwrap_key(self, key: bytes, algorithm: str) -> bytes:
        """The key ``key`` wraps; ValueError when ``algorithm`` is not this key's or the key fails to unwrap."""
        if algorithm != self._algorithm:
            raise ValueError(f"this key unwraps {self._algorithm}, not {algorithm!r}")
        crypto = primitives()
        try:
            unwrapped: bytes = crypto["aes_key_unwrap"](self._key, bytes(key))
        except crypto["InvalidUnwrap"]:
            raise ValueError("the wrapped key does not unwrap with this key (wrong key or damaged data)") from None
        return unwrapped

    def get_kid(self) -> str:
        """This key's id."""
        return self._kid

    def get_key_wrap_algorithm(self) -> str:
        """``A128KW``, ``A192KW`` or ``A256KW`` by the key's size."""
        return self._algorithm

    def __repr__(self) -> str:
        return f"LocalKeyWrapper(kid={self._kid!r}, algorithm={self._algorithm!r})"


_RSA_ALGORITHMS = ("RSA-OAEP", "RSA-OAEP-256")


def _oaep(algorithm: str) -> Any:
    crypto = primitives()
    digest = crypto["hashes"].SHA1() if algorithm == "RSA-OAEP" else crypto["hashes"].SHA256()
    asymmetric = crypto["asymmetric_padding"]
    return asymmetric.OAEP(mgf=asymmetric.MGF1(algorithm=digest), algorithm=digest, label=None)


class RsaKeyWrapper:
    """A key-encryption key from a ``cryptography`` RSA key: RSA-OAEP (SHA-1, the legacy clients' and
    Key Vault's ``RSA-OAEP``) or ``RSA-OAEP-256`` (SHA-256).

    ``key`` is an ``RSAPrivateKey`` (wraps and unwraps) or an ``RSAPublicKey`` (wraps only: a writer
    that must not read). ``unwrap_key`` accepts either algorithm, so data wrapped with one stays
    readable after switching to the other.
    """

    __slots__ = ("_private", "_public", "_kid", "_algorithm")

    def __init__(self, key: Any, kid: str, *, algorithm: str = "RSA-OAEP") -> None:
        if algorithm not in _RSA_ALGORITHMS:
            raise TableValidationError("algorithm", "RSA key wrapping is 'RSA-OAEP' or 'RSA-OAEP-256'", repr(algorithm))
        if not isinstance(kid, str) or not kid:
            raise TableValidationError("kid", "a key id is a non-empty str")
        rsa = primitives()["rsa"]
        if isinstance(key, rsa.RSAPrivateKey):
            self._private: Any = key
            self._public: Any = key.public_key()
        elif isinstance(key, rsa.RSAPublicKey):
            self._private = None
            self._public = key
        else:
            raise TableValidationError("key", "an RSA key is a cryptography RSAPrivateKey or RSAPublicKey",
                                       f"got {type(key).__name__}")
        self._kid = kid
        self._algorithm = algorithm

    def wrap_key(self, key: bytes) -> bytes:
        """``key`` encrypted with the public key."""
        wrapped: bytes = self._public.encrypt(bytes(key), _oaep(self._algorithm))
        return wrapped

    def unwrap_key(self, key: bytes, algorithm: str) -> bytes:
        """``key`` decrypted with the private key; ValueError when there is none, the algorithm is not
        RSA-OAEP or the data does not decrypt."""
        if algorithm not in _RSA_ALGORITHMS:
            raise ValueError(f"an RSA key unwraps RSA-OAEP or RSA-OAEP-256, not {algorithm!r}")
        if self._private is None:
            raise ValueError("this RSA key has no private key: it can wrap, not unwrap")
        try:
            unwrapped: bytes = self._private.decrypt(bytes(key), _oaep(algorithm))
        except ValueError:
            raise ValueError("the wrapped key does not decrypt with this key (wrong key or damaged data)") from None
        return unwrapped

    def get_kid(self) -> str:
        """This key's id."""
        return self._kid

    def get_key_wrap_algorithm(self) -> str:
        """``RSA-OAEP`` or ``RSA-OAEP-256``."""
        return self._algorithm

    def __repr__(self) -> str:
        kind = "private" if self._private is not None else "public"
        return f"RsaKeyWrapper(kid={self._kid!r}, algorithm={self._algorithm!r}, key={kind} {self._public.key_size}-bit)"


def _answered(result: Any) -> Any:
    """A client's result; TypeError for a coroutine (the asyncio client's), which the engine cannot await."""
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if close is not None:
            close()  # never awaited: closed, so Python does not warn about it
        raise TypeError("KeyVaultKeyWrapper needs the synchronous CryptographyClient "
                        "(azure.keyvault.keys.crypto), not the asyncio one (azure.keyvault.keys.crypto.aio)")
    return result


class KeyVaultKeyWrapper:
    """A key-encryption key kept in Azure Key Vault (or a managed HSM), used through a client object.

    ``client`` is an ``azure.keyvault.keys.crypto.CryptographyClient`` or anything with its two
    methods: ``wrap_key(algorithm, key)`` returning an object with ``encrypted_key``, and
    ``unwrap_key(algorithm, encrypted_key)`` returning an object with ``key``. The key never leaves
    the vault; each entity written costs one wrap call and each entity read one unwrap call.

    ``kid`` defaults to ``client.key_id`` (the versioned key URL, which the legacy clients stored
    too); ``algorithm`` is the wrapping algorithm's name (``RSA-OAEP``, ``RSA-OAEP-256``, or
    ``A256KW`` for a managed HSM's symmetric key), passed to the client as the plain string its
    ``KeyWrapAlgorithm`` enum equals. The client is the synchronous one: the engine runs inside
    the SDK's sync and async paths alike and never awaits a key (the asyncio client is refused).
    """

    __slots__ = ("_client", "_kid", "_algorithm")

    def __init__(self, client: Any, kid: str | None = None, *, algorithm: str = "RSA-OAEP") -> None:
        if not (callable(getattr(client, "wrap_key", None)) and callable(getattr(client, "unwrap_key", None))):
            raise TableValidationError("client", "a Key Vault client has wrap_key and unwrap_key methods",
                                       f"got {type(client).__name__}")
        kid = kid if kid is not None else getattr(client, "key_id", None)
        if not isinstance(kid, str) or not kid:
            raise TableValidationError("kid", "a key id is a non-empty str (pass kid= when the client has no key_id)")
        self._client = client
        self._kid = kid
        self._algorithm = algorithm

    def wrap_key(self, key: bytes) -> bytes:
        """``key`` wrapped by the vault."""
        return bytes(_answered(self._client.wrap_key(self._algorithm, bytes(key))).encrypted_key)

    def unwrap_key(self, key: bytes, algorithm: str) -> bytes:
        """``key`` unwrapped by the vault with ``algorithm`` (the one stored with the entity)."""
        return bytes(_answered(self._client.unwrap_key(algorithm, bytes(key))).key)

    def get_kid(self) -> str:
        """The key id stored with each entity."""
        return self._kid

    def get_key_wrap_algorithm(self) -> str:
        """The wrapping algorithm's name."""
        return self._algorithm

    def __repr__(self) -> str:
        return f"KeyVaultKeyWrapper(kid={self._kid!r}, algorithm={self._algorithm!r})"
