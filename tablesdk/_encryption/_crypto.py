"""The one door to the ``cryptography`` package: imported when a key is used or an entity
encrypted or decrypted, never by ``import tablesdk``, with the extra to install when it is missing."""

from __future__ import annotations

from typing import Any

from .._core._extras import require_extra

__all__ = ["primitives"]

_LOADED: dict[str, Any] = {}


def primitives() -> dict[str, Any]:
    """The cryptography names the engine uses, imported on first call."""
    if not _LOADED:
        require_extra("encryption", ("cryptography",), "client-side encryption")
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding as asymmetric_padding
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
        from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

        _LOADED.update(
            InvalidTag=InvalidTag, hashes=hashes, asymmetric_padding=asymmetric_padding, rsa=rsa,
            Cipher=Cipher, algorithms=algorithms, modes=modes, AESGCM=AESGCM, HKDF=HKDF,
            InvalidUnwrap=InvalidUnwrap, aes_key_wrap=aes_key_wrap, aes_key_unwrap=aes_key_unwrap,
        )
    return _LOADED
