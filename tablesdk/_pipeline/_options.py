"""``TableRequestOptions``: per-call overrides of a client's request defaults.

A client has defaults for every request it sends (``timeout``, ``server_timeout``,
``operation_deadline``, ``retry_policy``, ``location_mode``). Any operation takes
``options=TableRequestOptions(...)`` (a context's save and queries:
``request_options=``, since their ``options`` is the :class:`SaveChangesOptions`);
the fields that are set override the client's defaults (its
:class:`~tablesdk._pipeline._settings.RequestSettings`) for that call only, the ones left None keep
them; :meth:`RequestSettings.merged <tablesdk._pipeline._settings.RequestSettings.merged>` is where.
The client is never changed.

Client-side encryption is set the same way: ``encryption_policy`` (a
:class:`~tablesdk.TableEncryptionPolicy`: the key, the key resolver, the protocol of new writes),
``encryption_resolver(partition_key, row_key, name) -> bool`` (which properties are encrypted,
over the policy's own) and ``require_encryption`` (refuse to read or write an entity that is not
encrypted). None keeps the client's (its ``encryption_policy=``). This layer knows the policy only
by what it reads of it (:class:`EncryptionPolicyLike`): the engine sits above it.

The payload format is not a request option: the codec (JSON or Atom), the API
version that goes with it and the headers built from them belong to the client,
and a query's continuation or a context's ETags are only meaningful in one format.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

from .._core._errors import require_positive_int, require_positive_seconds
from ._http import Timeout
from ._retry import RetryPolicy
from ._settings import (
    LOCATION_MODES,
    EncryptionPolicyLike,
    check_encryption_policy,
    check_encryption_resolver,
    check_location_mode,
    check_retry_policy,
    check_timeout,
    resolve_retry_policy,
)

__all__ = ["TableRequestOptions", "LOCATION_MODES", "EncryptionPolicyLike", "check_options", "resolve_retry_policy"]


@dataclass(frozen=True)
class TableRequestOptions:
    """Request settings for one call, overriding the client's defaults (None: the client's).

    ``server_timeout`` (int seconds) is sent as the service's ``timeout=N``;
    ``timeout`` bounds each attempt (seconds, or a ``(connect, read)`` pair);
    ``deadline`` caps each request of the call across all its retries (the
    client's ``operation_deadline``); ``retry_policy`` retries the call's
    requests; ``location_mode`` is where its reads go (one of
    :data:`LOCATION_MODES`; writes always go to the primary). Checked when built.

    ``encryption_policy`` encrypts the call's writes and decrypts its reads (a
    :class:`~tablesdk.TableEncryptionPolicy`; see docs/encryption.md); ``encryption_resolver``
    chooses the properties to encrypt, ``(partition_key, row_key, name) -> bool``, over the policy's
    (the properties an entity class marks ``Encrypted[...]`` are encrypted either way);
    ``require_encryption`` refuses to write an entity with no encrypted property or to read one
    that is not encrypted (over the policy's own setting).

    An explicit ``retry_policy=`` argument of an operation wins over the one here.
    """

    server_timeout: int | None = None
    timeout: Timeout | None = None
    deadline: float | None = None
    retry_policy: RetryPolicy | None = None
    location_mode: str | None = None
    encryption_policy: EncryptionPolicyLike | None = None
    encryption_resolver: Callable[[str, str, str], bool] | None = None
    require_encryption: bool | None = None

    def __post_init__(self) -> None:
        if self.server_timeout is not None:
            require_positive_int("server_timeout", self.server_timeout, " (seconds)")
        if self.timeout is not None:
            check_timeout(self.timeout)
        if self.deadline is not None:
            require_positive_seconds("deadline", self.deadline)
        if self.retry_policy is not None:
            check_retry_policy(self.retry_policy)
        if self.location_mode is not None:
            check_location_mode(self.location_mode)
        if self.encryption_policy is not None:
            check_encryption_policy(self.encryption_policy)
        if self.encryption_resolver is not None:
            check_encryption_resolver(self.encryption_resolver)
        if self.require_encryption is not None and not isinstance(self.require_encryption, bool):
            raise TypeError(f"require_encryption must be a bool or None, not {type(self.require_encryption).__name__}")


def check_options(options: Any) -> TableRequestOptions | None:
    """``options`` when it is None or a :class:`TableRequestOptions`; a TypeError otherwise."""
    if options is None or isinstance(options, TableRequestOptions):
        return options
    raise TypeError(f"options must be a TableRequestOptions, not {type(options).__name__}")
