"""The encryption engine's public objects given wrong inputs, and carried between processes."""

from __future__ import annotations

import os
import pickle

import pytest

pytest.importorskip("cryptography")

from tablesdk import LocalKeyWrapper, TableEncryptionPolicy  # noqa: E402


@pytest.mark.parametrize("key", [32, 16, [0] * 32])
def test_a_local_key_is_bytes_not_a_size(key: object) -> None:
    # bytes(32) is 32 zero bytes: a KEK everyone knows. A size or a list of ints is refused.
    with pytest.raises((TypeError, ValueError)):
        LocalKeyWrapper(key, kid="k")  # type: ignore[arg-type]


def test_a_local_key_takes_bytes_like_objects() -> None:
    secret = os.urandom(32)
    for key in (secret, bytearray(secret), memoryview(secret)):
        wrapper = LocalKeyWrapper(key, kid="k")
        assert wrapper.unwrap_key(LocalKeyWrapper(secret, kid="k").wrap_key(bytes(32)), "A256KW") == bytes(32)


def test_a_policy_pickles_like_its_keys() -> None:
    # An engine that reads on workers (Dask, Ray, Spark) ships what a read needs by pickle; the
    # keys pickle, so a policy of module-level resolvers must too.
    key = LocalKeyWrapper(os.urandom(32), kid="k")
    assert pickle.loads(pickle.dumps(key)).get_kid() == "k"
    policy = TableEncryptionPolicy(key=key, require_encryption=True, allow_legacy_reads=False)
    copy = pickle.loads(pickle.dumps(policy))
    assert copy.require_encryption and not copy.allow_legacy_reads and copy.key is not None
    assert copy.key.get_kid() == "k"
