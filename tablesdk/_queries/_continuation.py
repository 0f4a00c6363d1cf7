"""Where a page of query results ends and the next one starts: :class:`ContinuationToken`,
:class:`ResultSegment` (a page with the token of the next) and :class:`FetchedPage` (a page
as it arrived, before its entities are read).

Entity queries and table listings both page with these; :mod:`tablesdk._queries._pager` decides
which token a loop follows next.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .._entities._edm import EntityPage
from .._pipeline._http import HttpResponse

__all__ = ["ContinuationToken", "ResultSegment", "FetchedPage"]

T = TypeVar("T")

_TOKEN_VERSION = "1"


@dataclass(frozen=True)
class ContinuationToken:
    """Where the next page of a query starts. Treat it as opaque.

    For entity queries the service gives ``next_partition_key`` and
    ``next_row_key`` (either may be None); for table listing it gives
    ``next_table_name``. The values may point at no existing entity, and
    they are only meaningful with the *same* query (filter, select, take).

    :meth:`to_string` gives a URL-safe text that a web application can put in
    a link or a form and :meth:`from_string` reads it back; any key (empty,
    unicode, containing ``%`` or quotes) survives the round trip.

    ``target_location`` (``"primary"`` or ``"secondary"``) is set on tokens
    from a client with a ``location_mode``: the endpoint that produced the page,
    where the next page is then read too, so one query's pages come from one
    copy of the data. None (any other client) means the primary.
    """

    next_partition_key: str | None = None
    next_row_key: str | None = None
    next_table_name: str | None = None
    target_location: str | None = None

    def __post_init__(self) -> None:
        parts = (self.next_partition_key, self.next_row_key, self.next_table_name)
        for part in parts:
            if part is not None and not isinstance(part, str):
                raise TypeError(f"continuation token parts are str or None, not {type(part).__name__}")
        if all(part is None for part in parts):
            raise ValueError("a continuation token needs at least one of its parts")
        if self.target_location not in (None, "primary", "secondary"):
            raise ValueError(f"target_location is 'primary', 'secondary' or None, not {self.target_location!r}")

    def to_string(self) -> str:
        """A URL-safe, versioned text form: ``"1." + base64url(JSON)`` (no padding)."""
        fields: list[str | None] = [self.next_partition_key, self.next_row_key, self.next_table_name]
        if self.target_location is not None:  # only pinned tokens carry the fourth field
            fields.append(self.target_location)
        payload = json.dumps(fields, ensure_ascii=True, separators=(",", ":"))
        encoded = base64.urlsafe_b64encode(payload.encode("ascii")).decode("ascii").rstrip("=")
        return f"{_TOKEN_VERSION}.{encoded}"

    @classmethod
    def from_string(cls, text: str) -> ContinuationToken:
        """Read a token written by :meth:`to_string`; ``ValueError`` for anything else."""
        if not isinstance(text, str):
            raise ValueError(f"a continuation token string is a str, not {type(text).__name__}")
        version, dot, body = text.partition(".")
        if not dot or version != _TOKEN_VERSION:
            raise ValueError("not a tablesdk continuation token (unknown format or version)")
        if not body or len(body) % 4 == 1:
            raise ValueError("not a tablesdk continuation token (bad encoding)")
        try:
            standard = body.replace("-", "+").replace("_", "/") + "=" * (-len(body) % 4)
            raw = base64.b64decode(standard.encode("ascii"), validate=True)
            parts = json.loads(raw.decode("ascii"))
        except (binascii.Error, UnicodeError, ValueError) as exc:
            raise ValueError("not a tablesdk continuation token (bad encoding)") from exc
        if (
            not isinstance(parts, list)
            or len(parts) not in (3, 4)
            or not all(part is None or isinstance(part, str) for part in parts)
            or all(part is None for part in parts[:3])
            or (len(parts) == 4 and parts[3] not in ("primary", "secondary"))
        ):
            raise ValueError("not a tablesdk continuation token (bad contents)")
        return cls(parts[0], parts[1], parts[2], parts[3] if len(parts) == 4 else None)

    def __str__(self) -> str:
        return self.to_string()


@dataclass(frozen=True)
class ResultSegment(Generic[T]):
    """One page of results and the token of the next page (None on the last page).

    A page may be empty and still have a token: the service returns such pages
    (for example at partition-server boundaries); keep going.
    """

    results: list[T]
    continuation_token: ContinuationToken | None

    @property
    def has_more(self) -> bool:
        """Whether the service said more results may follow."""
        return self.continuation_token is not None


class FetchedPage:
    """One page of a query as it arrived, before its entities are read.

    A source's HTTP stage (sending the request, with retries) gives this to
    its decode stage (reading the entities, tracking them): the next page's
    ``continuation_token`` comes from the response headers, so the request of
    the next page can be sent while this one is decoded. ``response`` holds
    the undecoded body; a page read whole in its one request (a point query)
    is in ``page`` instead, with ``response`` None. ``selected`` is the request's
    ``$select`` (the only properties the service may answer as null). ``encryption`` is the
    client-side encryption of the call that read it (the operations layer's ``EncryptionScope``,
    None when none), which decrypts the entities of ``response`` when they are decoded (those of
    ``page`` are decrypted already).
    """

    # A plain class, not a dataclass: each dataclass costs ``import tablesdk`` about 0.5 ms (start-up).

    __slots__ = ("continuation_token", "response", "page", "selected", "encryption")

    def __init__(
        self, continuation_token: ContinuationToken | None, response: HttpResponse | None = None,
        page: EntityPage | None = None, selected: tuple[str, ...] | None = None, encryption: Any = None,
    ) -> None:
        self.continuation_token = continuation_token
        self.response = response
        self.page = page
        self.selected = selected
        self.encryption = encryption
