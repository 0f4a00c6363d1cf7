"""Payloads and keys shared by the encryption tests."""

from __future__ import annotations

from typing import Any

from tablesdk._encryption import LocalKeyWrapper, TableEncryptionPolicy
from tablesdk._entities._edm import EdmType, EntityPayload

KEY_BYTES = bytes(range(32))
OTHER_KEY_BYTES = bytes(range(1, 33))


def local_key(kid: str = "local-1", key: bytes = KEY_BYTES) -> LocalKeyWrapper:
    return LocalKeyWrapper(key, kid)


def payload(pk: str = "pk", rk: str = "rk", **values: Any) -> EntityPayload:
    """A payload typed as a write types it (strings Edm.String, the rest given as (value, type) pairs)."""
    all_values: dict[str, Any] = {"PartitionKey": pk, "RowKey": rk}
    types: dict[str, EdmType] = {"PartitionKey": EdmType.STRING, "RowKey": EdmType.STRING}
    for name, value in values.items():
        if isinstance(value, tuple):
            all_values[name], types[name] = value
        else:
            all_values[name] = value
            types[name] = EdmType.STRING
    return EntityPayload(all_values, types)


def names(*chosen: str) -> Any:
    """An encryption resolver that chooses ``chosen``."""
    return lambda pk, rk, name: name in chosen


def policy(protocol: str | None = None, **kwargs: Any) -> TableEncryptionPolicy:
    kwargs.setdefault("key", local_key())
    if protocol is not None:
        kwargs["protocol"] = protocol
    return TableEncryptionPolicy(**kwargs)
