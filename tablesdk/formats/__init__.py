"""Wire formats: AtomPub and JSON behind one :class:`PayloadFormat` interface.

A codec turns :class:`~tablesdk.edm.EntityPayload` objects into request bodies
and response bodies back into payloads; it never does I/O and never sees entity
classes. Use :func:`get_format` to obtain one by name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from ..edm import EntityPayload

__all__ = ["PayloadFormat", "get_format", "parse_error_body", "FORMAT_NAMES"]

FORMAT_NAMES = ("json", "atom")


class PayloadFormat(ABC):
    """One OData wire format.

    ``name`` is ``"json"`` or ``"atom"``; ``default_api_version`` the
    ``x-ms-version`` the client sends by default with this format;
    ``content_type`` the Content-Type of entity and table bodies.
    """

    name: str
    default_api_version: str
    content_type: str

    @abstractmethod
    def request_headers(self) -> dict[str, str]:
        """Headers every request in this format carries: Accept, DataServiceVersion, MaxDataServiceVersion."""

    @abstractmethod
    def serialize_entity(self, payload: EntityPayload) -> bytes:
        """The body of an insert, update (PUT), merge or upsert request."""

    @abstractmethod
    def parse_entity(self, body: bytes, etag: str | None = None) -> EntityPayload:
        """One entity from a single-entity response (insert with content, point query).

        ``etag`` is the response's ETag header, used when the body carries none.
        """

    @abstractmethod
    def parse_entities(self, body: bytes) -> list[EntityPayload]:
        """Every entity of a query response, in order, in one pass over the body."""

    @abstractmethod
    def serialize_table(self, table_name: str) -> bytes:
        """The body of a Create Table request."""

    @abstractmethod
    def parse_tables(self, body: bytes) -> list[str]:
        """Table names from a Query Tables response (or a Create Table response)."""


def get_format(name: str, **options: Any) -> PayloadFormat:
    """The codec for ``name`` (``"json"`` or ``"atom"``).

    JSON takes ``metadata="minimalmetadata"`` (or ``"nometadata"``,
    ``"fullmetadata"``).
    """
    if name == "json":
        from .json import JsonFormat

        return JsonFormat(**options)
    if name == "atom":
        from .atom import AtomFormat

        return AtomFormat(**options)
    raise ValueError(f"payload_format must be one of {FORMAT_NAMES}, not {name!r}")


def parse_error_body(body: bytes, content_type: str | None = None) -> tuple[str | None, str]:
    """(error code, message) from an error response body in either format.

    The service answers some errors in XML whatever format was asked for (and
    some with an empty body), so the body is sniffed, not trusted to match the
    request. The ``RequestId:``/``Time:`` trailer is removed from the message.
    """
    from .errors import parse_error_body as _parse

    return _parse(body, content_type)
