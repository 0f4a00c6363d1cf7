"""``_ClientEncryptionMetadata1``: the JSON that says how an entity's content key is wrapped.

The layout is the legacy clients' (the key order is Java's, which needs it)::

    {"WrappedContentKey": {"KeyId": ..., "EncryptedKey": <base64>, "Algorithm": "A256KW"},
     "EncryptionAgent": {"Protocol": "1.0", "EncryptionAlgorithm": "AES_CBC_256"},
     "ContentEncryptionIV": <base64, 16 bytes>,
     "KeyWrappingMetadata": {"EncryptionLibrary": "Python 1.4.2"}}

The authenticated protocol writes the same fields without ``ContentEncryptionIV`` (each property
has its own nonce), its own ``Protocol`` and ``EncryptionAlgorithm`` ``AES_GCM_256``.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, NamedTuple

from .._version import __version__

__all__ = ["KeyMetadata", "build_key_metadata", "parse_key_metadata", "MalformedMetadata", "ENCRYPTION_LIBRARY"]

#: What tablesdk writes as ``KeyWrappingMetadata.EncryptionLibrary`` (readers test it for "Java" only).
ENCRYPTION_LIBRARY = f"Python tablesdk {__version__}"


class MalformedMetadata(ValueError):
    """The metadata is not in the format (the engine turns it into an EncryptedDataError).

    ``protocol`` is the protocol it names, when it got that far (an unknown protocol whose other
    fields differ is reported as unknown, not as damaged).
    """

    protocol: str | None = None


class KeyMetadata(NamedTuple):
    """The fields of ``_ClientEncryptionMetadata1`` the readers use."""

    key_id: str
    wrapped_key: bytes
    wrap_algorithm: str
    protocol: str
    encryption_algorithm: str
    content_iv: bytes | None
    #: ``KeyWrappingMetadata.EncryptionLibrary``; None when the field (or the object) is missing.
    library: str | None
    #: Whether ``KeyWrappingMetadata`` is there at all (the Java V1 writers left it out).
    has_wrapping_metadata: bool


def build_key_metadata(
    *, key_id: str, wrapped_key: bytes, wrap_algorithm: str, protocol: str, encryption_algorithm: str,
    content_iv: bytes | None,
) -> str:
    """The JSON text of ``_ClientEncryptionMetadata1``."""
    document: dict[str, Any] = {
        "WrappedContentKey": {
            "KeyId": key_id,
            "EncryptedKey": base64.b64encode(wrapped_key).decode("ascii"),
            "Algorithm": wrap_algorithm,
        },
        "EncryptionAgent": {"Protocol": protocol, "EncryptionAlgorithm": encryption_algorithm},
    }
    if content_iv is not None:
        document["ContentEncryptionIV"] = base64.b64encode(content_iv).decode("ascii")
    document["KeyWrappingMetadata"] = {"EncryptionLibrary": ENCRYPTION_LIBRARY}
    return json.dumps(document)


def _field(document: Any, name: str, kind: type) -> Any:
    if not isinstance(document, dict) or name not in document:
        raise MalformedMetadata(f"{name} is missing")
    value = document[name]
    if not isinstance(value, kind):
        raise MalformedMetadata(f"{name} is not a {kind.__name__}")
    return value


def _base64(text: str, name: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise MalformedMetadata(f"{name} is not base64") from None


def parse_key_metadata(text: Any) -> KeyMetadata:
    """The fields of ``_ClientEncryptionMetadata1``; :class:`MalformedMetadata` when it is not in the format.

    The protocol is read before anything else is required, so an unknown protocol with other
    fields is reported as such by the caller.
    """
    if not isinstance(text, str):
        raise MalformedMetadata("it is not a string")
    try:
        document = json.loads(text)
    except ValueError:
        raise MalformedMetadata("it is not JSON") from None
    agent = _field(document, "EncryptionAgent", dict)
    protocol = _field(agent, "Protocol", str)
    algorithm = _field(agent, "EncryptionAlgorithm", str)
    try:
        return _rest(document, protocol, algorithm)
    except MalformedMetadata as error:
        error.protocol = protocol
        raise


def _rest(document: dict[str, Any], protocol: str, algorithm: str) -> KeyMetadata:
    wrapped = _field(document, "WrappedContentKey", dict)
    content_iv = document.get("ContentEncryptionIV")
    if content_iv is not None and not isinstance(content_iv, str):
        raise MalformedMetadata("ContentEncryptionIV is not a string")
    wrapping = document.get("KeyWrappingMetadata")
    library = wrapping.get("EncryptionLibrary") if isinstance(wrapping, dict) else None
    return KeyMetadata(
        key_id=_field(wrapped, "KeyId", str),
        wrapped_key=_base64(_field(wrapped, "EncryptedKey", str), "EncryptedKey"),
        wrap_algorithm=_field(wrapped, "Algorithm", str),
        protocol=protocol,
        encryption_algorithm=algorithm,
        content_iv=None if content_iv is None else _base64(content_iv, "ContentEncryptionIV"),
        library=library if isinstance(library, str) else None,
        has_wrapping_metadata=wrapping is not None,
    )
