"""The command line's client-side encryption options: a local key from a file, the protocol of new
writes, the properties to encrypt, and ``--require-encryption`` (see docs/encryption.md).

``--encryption-key-file PATH`` holds a 32-byte AES key wrapped with A256KW (:class:`LocalKeyWrapper`):
either JSON, ``{"kid": "...", "key": "<base64 of 32 bytes>"}``, or the key alone (32 raw bytes or
their base64 text) with ``--encryption-key-id``. The key is a secret: its text is redacted from every
line the command writes, as the account key is.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from .._encryption import TableEncryptionPolicy

__all__ = ["ENCRYPTION_OPTIONS", "PROTOCOL_NAMES", "key_file_secrets", "load_key_file", "policy_from_options"]

#: ``--encryption-protocol``: the command line's names of the engine's protocols.
PROTOCOL_NAMES = ("1.0", "authenticated")

#: The options, as :data:`tablesdk.cli._options._GLOBAL_OPTIONS` holds them (before or after the command).
ENCRYPTION_OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--encryption-key-file",), {
        "metavar": "PATH",
        "help": "Encrypt and decrypt entities on the client with this local AES key (A256KW): JSON "
                '{"kid": ..., "key": base64} or the 32 bytes alone (raw or base64) with --encryption-key-id.',
    }),
    (("--encryption-key-id",), {"metavar": "KID", "help": "The key id of --encryption-key-file (stored with each entity)."}),
    (("--encryption-protocol",), {
        "type": click.Choice(PROTOCOL_NAMES),
        "help": "The protocol of new writes: authenticated (AES-GCM, the default) or 1.0 (the legacy clients').",
    }),
    (("--encrypt-properties",), {"metavar": "A,B", "help": "The properties the command encrypts when it writes."}),
    (("--require-encryption/--no-require-encryption", "require_encryption"), {
        "default": None, "help": "Refuse to read or write an entity that is not encrypted.",
    }),
)


def _file_text(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read(4096)
    except OSError as error:
        raise click.UsageError(f"--encryption-key-file: cannot read {path!r}: {error.strerror}") from None


def _key_bytes(text: bytes) -> bytes | None:
    """The 32 key bytes ``text`` holds (raw, or base64), or None."""
    if len(text) == 32:
        return text
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return key if len(key) == 32 else None


def load_key_file(path: str, kid: str | None) -> tuple[bytes, str]:
    """(the key, its id) of a key file; ``click.UsageError`` saying what is wrong (never the key)."""
    text = _file_text(path)
    stripped = text.strip()
    if stripped.startswith(b"{"):
        try:
            document = json.loads(stripped)
        except ValueError:
            raise click.UsageError(f"--encryption-key-file {path!r}: not valid JSON") from None
        if not isinstance(document, dict) or not isinstance(document.get("key"), str):
            raise click.UsageError(f'--encryption-key-file {path!r}: JSON needs "key" (base64 of 32 bytes) and "kid"')
        key = _key_bytes(document["key"].encode("ascii", "replace"))
        kid = kid or (document.get("kid") if isinstance(document.get("kid"), str) else None)
    else:
        key = _key_bytes(text)
    if key is None:
        raise click.UsageError(f"--encryption-key-file {path!r}: the key must be 32 bytes (raw or base64)")
    if not kid:
        raise click.UsageError(f"--encryption-key-file {path!r} names no key id: give --encryption-key-id")
    return key, kid


def key_file_secrets(path: str | None) -> list[str]:
    """The texts of a key file that must never be shown (its key in base64 and as written); read
    once per path (every line a command writes is redacted with them)."""
    if not path:
        return []
    return list(_key_file_secrets(path))


@functools.lru_cache(maxsize=8)
def _key_file_secrets(path: str) -> tuple[str, ...]:
    try:
        with open(path, "rb") as file:
            text = file.read(4096)
    except OSError:
        return ()
    found = [text.decode("latin-1").strip()]
    try:
        document = json.loads(text)
        if isinstance(document, dict) and isinstance(document.get("key"), str):
            found.append(document["key"])
    except ValueError:
        pass
    key = _key_bytes(text.strip()) if not text.strip().startswith(b"{") else None
    if key is not None:
        found.append(base64.b64encode(key).decode("ascii"))
    return tuple(found)


def policy_from_options(
    key_file: str | None, kid: str | None, protocol: str | None, properties: str | None, required: bool,
) -> TableEncryptionPolicy | None:
    """The policy of the options, or None when no encryption option is given (``click.UsageError``
    for options that need the key file without it)."""
    if key_file is None:
        if kid or protocol or properties:
            raise click.UsageError("--encryption-key-id, --encryption-protocol and --encrypt-properties need "
                                   "--encryption-key-file")
        if not required:
            return None
    from .._encryption import (
        PROTOCOL_AUTHENTICATED,
        PROTOCOL_LEGACY,
        LocalKeyWrapper,
        TableEncryptionPolicy,
    )

    key = None
    if key_file is not None:
        key_bytes, key_id = load_key_file(key_file, kid)
        key = LocalKeyWrapper(key_bytes, key_id)
    names = frozenset(name.strip() for name in (properties or "").split(",") if name.strip())

    def chosen(partition_key: str, row_key: str, name: str) -> bool:
        return name in names

    return TableEncryptionPolicy(
        key=key, protocol=PROTOCOL_LEGACY if protocol == "1.0" else PROTOCOL_AUTHENTICATED,
        encryption_resolver=chosen if names else None, require_encryption=required,
    )

