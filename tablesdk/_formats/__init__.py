"""Wire formats: AtomPub and JSON behind one :class:`PayloadFormat` interface.

A codec turns :class:`~tablesdk._entities._edm.EntityPayload` objects into request bodies
and response bodies back into payloads; it never does I/O and never sees entity
classes. Use :func:`get_format` to obtain one by name.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from itertools import repeat
from collections.abc import Callable, Collection
from typing import Any, Protocol, TypeVar, cast

from .._entities._edm import EntityPage, EntityPayload
from .._core._errors import ResponseDecodeError
from .._core._redaction import SecretPattern, scrub

__all__ = ["PayloadFormat", "get_format", "parse_error_body", "decodes", "decoding", "decoded", "require_keys", "require_page_keys",
           "require_entity",            "FORMAT_NAMES"]

FORMAT_NAMES = ("json", "atom")

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")

#: What a decoder may raise on a body it cannot read (RecursionError: JSON nested
#: deeper than the interpreter's stack; OverflowError: numbers too large to hold).
_DECODE_FAILURES = (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError, OverflowError)


def decodes(method: F) -> F:
    """Make a codec's ``parse_*(body, ...)`` raise only :class:`~tablesdk._core._errors.ResponseDecodeError`.

    The error carries what failed and a short excerpt of the body; the client
    adds the response's status and request id.
    """

    @functools.wraps(method)
    def wrapper(self: Any, body: bytes, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, body, *args, **kwargs)
        except ResponseDecodeError:
            raise
        except _DECODE_FAILURES as exc:
            error = _decode_error(exc, body)
        # Raised outside the handler: ``from None`` would only hide the failure, which would stay
        # in ``__context__`` (a JSONDecodeError's ``.doc`` is the whole body, secrets included).
        raise error

    return cast(F, wrapper)


def decoding(parse: Callable[[bytes], R]) -> Callable[[bytes], R]:
    """``parse`` (a body parser outside the codecs, e.g. of service-level XML) raising
    only :class:`~tablesdk._core._errors.ResponseDecodeError`."""

    def wrapper(body: bytes) -> R:
        try:
            return parse(body)
        except ResponseDecodeError:
            raise
        except _DECODE_FAILURES as exc:
            error = _decode_error(exc, body)
        raise error  # outside the handler: see decodes

    return wrapper


def _decode_error(exc: BaseException, body: bytes) -> ResponseDecodeError:
    from .errors import body_excerpt

    reason = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
    return ResponseDecodeError(reason[:200], excerpt=body_excerpt(body))


class _Answer(Protocol):
    status: int
    body: bytes
    attempt_secrets: SecretPattern | None

    @property
    def request_id(self) -> str | None: ...


T = TypeVar("T")


def decoded(response: _Answer, decode: Callable[[bytes], T]) -> T:
    """``decode(response.body)`` for a 2xx response: the one place a
    :class:`~tablesdk._core._errors.ResponseDecodeError` from a codec gets the
    response's status and request id (used by the client and batch answers)."""
    try:
        return decode(response.body)
    except ResponseDecodeError as exc:
        exc.status_code = response.status
        exc.request_id = response.request_id
        exc.etag = getattr(response, "etag", None)  # a write applied despite the unreadable body keeps its new ETag
        _unquote_secrets(exc, response)
        raise


def _unquote_secrets(error: ResponseDecodeError, response: _Answer) -> None:
    """Remove the attempt's secrets from what ``error`` quotes of ``response``'s body.

    The retry loop leaves them on the response (``HttpResponse.attempt_secrets``, set in
    ``RetryLoop.answered``); a server may echo a signature or token bare, where the
    excerpt's own ``sig=``/``Bearer`` rule cannot see it. Every excerpt quotes the body
    that was decoded, so it is made again from that body with the secrets removed
    before it is cut (a secret split by the cut would leave its start behind)."""
    secrets = response.attempt_secrets
    if secrets is None:
        return
    from .errors import body_excerpt

    reason = scrub(error.reason, secrets)
    excerpt = body_excerpt(response.body, secrets) if error.excerpt else ""
    if (reason, excerpt) != (error.reason, error.excerpt):
        fresh = ResponseDecodeError(reason, excerpt=excerpt)
        error.reason, error.excerpt, error.message, error.args = reason, excerpt, fresh.message, fresh.args


def require_keys(
    payloads: list[EntityPayload], body: bytes, selected: Collection[str] | None = None
) -> list[EntityPayload]:
    """``payloads``, after checking each has string PartitionKey and RowKey values
    and no null property the request did not select.

    Every entity the service returns carries its keys (the client always
    selects them), so one without is not an entity: it raises
    :class:`~tablesdk._core._errors.ResponseDecodeError` instead of becoming a phantom
    entity with ``PartitionKey=None``. The service stores no nulls: it answers
    ``null`` (JSON) or ``m:null="true"`` (Atom) only for a property a ``$select``
    named and the entity does not have, so a null for any other property (or
    with no ``selected`` names) raises too.
    """
    _require_keys([payload.values for payload in payloads], body)
    _refuse_unselected_nulls([payload.values for payload in payloads], body, selected)
    return payloads


def require_page_keys(page: EntityPage, body: bytes, selected: Collection[str] | None = None) -> EntityPage:
    """:func:`require_keys` for a page: both key columns checked in C calls first."""
    values = page.values
    if any(set(map(type, map(dict.get, values, repeat(key)))) - {str} for key in ("PartitionKey", "RowKey")):
        _require_keys(values, body)
    _refuse_unselected_nulls(values, body, selected)
    return page


def _require_keys(entities: list[dict[str, Any]], body: bytes) -> None:
    for index, values in enumerate(entities):
        if type(values.get("PartitionKey")) is not str or type(values.get("RowKey")) is not str:
            from .errors import body_excerpt

            missing = " or ".join(k for k in ("PartitionKey", "RowKey") if type(values.get(k)) is not str)
            raise ResponseDecodeError(f"entity {index} has no string {missing}", excerpt=body_excerpt(body))


def _refuse_unselected_nulls(entities: list[dict[str, Any]], body: bytes, selected: Collection[str] | None) -> None:
    """Raise for a null value of a property ``selected`` does not name (see :func:`require_keys`).

    A body without the text ``null`` holds no null in either format (JSON's literal, Atom's
    ``m:null``): one C search, so that pages without nulls cost nothing more.
    """
    if b"null" not in body:
        return
    allowed = frozenset(selected or ())
    for index, values in enumerate(entities):
        if None in values.values():
            for name, value in values.items():
                if value is None and name not in allowed:
                    from .errors import body_excerpt

                    raise ResponseDecodeError(
                        f"entity {index}: property {name!r} is null, and the service stores no nulls "
                        "(it answers one only for a property a $select named and the entity does not have)",
                        excerpt=body_excerpt(body),
                    )


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

    def parse_entity_page(self, body: bytes) -> EntityPage:
        """:meth:`parse_entities` as one :class:`~tablesdk._entities._edm.EntityPage` (a codec may read it faster so)."""
        return EntityPage.of(self.parse_entities(body))

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


def parse_error_body(
    body: bytes, content_type: str | None = None, secrets: SecretPattern | None = None
) -> tuple[str | None, str]:
    """(error code, message) from an error response body in either format.

    The service answers some errors in XML whatever format was asked for (and
    some with an empty body), so the body is sniffed, not trusted to match the
    request. The ``RequestId:``/``Time:`` trailer is removed from the message, and
    ``secrets`` (the attempt's) from the excerpt of a body in neither format.
    """
    from .errors import parse_error_body as _parse

    return _parse(body, content_type, secrets)


def require_entity(payload: EntityPayload, partition_key: str, row_key: str, body: bytes = b"") -> EntityPayload:
    """``payload`` if it has the keys a point read asked for: the service answers a read of one
    entity with that entity or 404, so any other entity is an answer it never gives."""
    values = payload.values
    if values["PartitionKey"] != partition_key or values["RowKey"] != row_key:
        raise ResponseDecodeError(
            f"asked for the entity ({partition_key!r}, {row_key!r}), the answer holds "
            f"({values['PartitionKey']!r}, {values['RowKey']!r})",
            excerpt=_excerpt(body) if body else "",
        )
    return payload


def _excerpt(body: bytes) -> str:
    from .errors import body_excerpt

    return body_excerpt(body)
