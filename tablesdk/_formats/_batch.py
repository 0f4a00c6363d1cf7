"""Entity group transactions: the ``$batch`` multipart request.

An entity group transaction sends up to 100 insert, update, merge, delete and
upsert operations on one partition of one table as a single atomic request (a
*change set* inside a *batch*); or, alternatively, one point query (GET of a
single entity) on its own, outside any change set.

This module holds the operations (:class:`BatchOperation`), their validation and
the request, written by a hand-written, single-pass multipart writer (the stdlib
``email`` package costs more than the rest of a batch put together). The
service's answer is read by :mod:`tablesdk._formats._batch_answer`.

It never does I/O: the client sends the bytes :func:`build_batch_request`
returns and hands the answer to :func:`~tablesdk._formats._batch_answer.parse_batch_response`.
"""

from __future__ import annotations

import typing
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import repeat
from operator import attrgetter
from urllib.parse import quote

from .._entities._edm import EntityPayload
from .._core._errors import TableValidationError
from . import PayloadFormat

__all__ = [
    "BatchOperationKind",
    "BatchOperation",
    "BatchOperationResult",
    "MAX_BATCH_OPERATIONS",
    "MAX_BATCH_BYTES",
    "entity_path",
    "supports_prefer",
    "validate_batch",
    "OperationRequest",
    "operation_request",
    "prefer_value",
    "build_batch_request",
]

#: Most operations one change set may hold (the service's limit).
MAX_BATCH_OPERATIONS = 100
#: Largest ``$batch`` request body, in bytes, as encoded on the wire (4 MiB).
MAX_BATCH_BYTES = 4 * 1024 * 1024

#: Service versions that understand ``Prefer: return-content / return-no-content``.
_PREFER_MIN_VERSION = "2013-08-15"


def supports_prefer(api_version: str) -> bool:
    """Whether service version ``api_version`` understands the ``Prefer`` header on inserts."""
    return api_version >= _PREFER_MIN_VERSION


class BatchOperationKind(Enum):
    """What one operation of a batch does, and so its HTTP method and address.

    ``INSERT`` is ``POST <table>``; the others address one entity,
    ``<table>(PartitionKey='..',RowKey='..')``: ``UPDATE`` (replace) and
    ``INSERT_OR_REPLACE`` are ``PUT``, ``MERGE`` and ``INSERT_OR_MERGE`` are
    ``MERGE``, ``DELETE`` is ``DELETE`` and ``RETRIEVE`` (a point query) is
    ``GET``. UPDATE, MERGE and DELETE carry ``If-Match``; the upserts do not.
    """

    INSERT = "insert"
    UPDATE = "update"
    MERGE = "merge"
    DELETE = "delete"
    INSERT_OR_REPLACE = "insert_or_replace"
    INSERT_OR_MERGE = "insert_or_merge"
    RETRIEVE = "retrieve"

    @property
    def method(self) -> str:
        """The HTTP method of this kind of operation."""
        return _METHODS[self]


_METHODS = {
    BatchOperationKind.INSERT: "POST",
    BatchOperationKind.UPDATE: "PUT",
    BatchOperationKind.MERGE: "MERGE",
    BatchOperationKind.DELETE: "DELETE",
    BatchOperationKind.INSERT_OR_REPLACE: "PUT",
    BatchOperationKind.INSERT_OR_MERGE: "MERGE",
    BatchOperationKind.RETRIEVE: "GET",
}

#: Kinds that carry an entity body.
_WITH_BODY = frozenset({
    BatchOperationKind.INSERT,
    BatchOperationKind.UPDATE,
    BatchOperationKind.MERGE,
    BatchOperationKind.INSERT_OR_REPLACE,
    BatchOperationKind.INSERT_OR_MERGE,
})
#: Kinds that are conditional on the entity's ETag (``If-Match``).
_CONDITIONAL = frozenset({BatchOperationKind.UPDATE, BatchOperationKind.MERGE, BatchOperationKind.DELETE})


@dataclass
class BatchOperation:
    """One operation of an entity group transaction (or of a single request).

    ``payload`` is the entity for inserts, updates, merges and upserts, None for
    deletes and point queries. ``etag`` is the ``If-Match`` value of an UPDATE,
    MERGE or DELETE: the tracked ETag, or ``"*"`` for an unconditional write; it
    is required for those kinds and not sent for the others. ``echo_content``
    asks the service to return an inserted entity (``Prefer: return-content``);
    by default inserts ask for no content. ``body`` is ``payload`` already
    serialized in the client's format, for callers that encoded it once to
    measure it (bulk loading); when None the payload is serialized on sending.
    """

    kind: BatchOperationKind
    table: str
    partition_key: str
    row_key: str
    payload: EntityPayload | None
    etag: str | None
    echo_content: bool = False
    body: bytes | None = None


@dataclass
class BatchOperationResult:
    """The service's answer to one operation of a successful batch.

    ``index`` is the operation's zero-based position in the batch, ``status``
    the inner HTTP status (201/204 for inserts, 204 for writes, 200 for a point
    query), ``etag`` the entity's new ETag (None after a delete), ``payload`` the
    entity parsed from the inner body when there is one, and ``headers`` the
    inner response's headers as sent.
    """

    index: int
    status: int
    etag: str | None
    payload: EntityPayload | None
    headers: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------- addresses


def _key_literal(value: str) -> str:
    # Single quotes double inside an OData string literal; everything but
    # unreserved characters is then percent-encoded (the quotes included), so
    # '%', spaces, '#', '?' and non-ASCII text arrive exactly as written.
    return quote(value.replace("'", "''"), safe="")


def entity_path(table: str, partition_key: str, row_key: str) -> str:
    """The URL path of one entity, relative to the table endpoint.

    ``entity_path("Blogs", "o'neil", "100%")`` is
    ``"Blogs(PartitionKey='o%27%27neil',RowKey='100%25')"``: single quotes are
    doubled inside the key literals, then the keys are percent-encoded. Keys
    containing '%' are decoded twice by the service when sent in the request
    path of a single-entity request (see docs/batch.md); inside a batch they
    are decoded once and arrive intact.
    """
    return (
        f"{quote(table, safe='')}(PartitionKey='{_key_literal(partition_key)}',"
        f"RowKey='{_key_literal(row_key)}')"
    )


# ---------------------------------------------------------------- validation


def _describe(index: int, op: BatchOperation) -> str:
    return f"operation {index} ({op.kind.name} PartitionKey={op.partition_key!r}, RowKey={op.row_key!r})"


def validate_batch(operations: Sequence[BatchOperation]) -> None:
    """Check the service's batch rules before anything is sent.

    Raises :class:`~tablesdk._core._errors.TableValidationError` (field ``"batch"``
    unless stated) naming the rule broken: an empty batch; more than
    :data:`MAX_BATCH_OPERATIONS` operations; operations on more than one table
    or more than one PartitionKey; the same entity twice; a RETRIEVE together
    with anything else (a query batch holds exactly one RETRIEVE); an UPDATE,
    MERGE or DELETE without an ETag (field ``"If-Match"``); a write without a
    payload, or whose payload keys differ from the operation's (field
    ``"payload"``). The 4 MiB body limit is checked by
    :func:`build_batch_request` on the encoded body.
    """
    count = len(operations)
    if count == 0:
        raise TableValidationError("batch", "a batch holds at least 1 operation", "got an empty batch")
    if count > MAX_BATCH_OPERATIONS:
        raise TableValidationError(
            "batch", f"a batch holds at most {MAX_BATCH_OPERATIONS} operations", f"got {count}"
        )
    first = operations[0]
    seen: dict[str, int] = {}
    for index, op in enumerate(operations):
        _check_operation(index, op, first, count, seen)


def _check_operation(index: int, op: BatchOperation, first: BatchOperation, count: int, seen: dict[str, int]) -> None:
    """The batch rules for operation ``index`` (``seen``: RowKeys met so far, with their index)."""
    kind = op.kind
    if kind is BatchOperationKind.RETRIEVE and count > 1:
        raise TableValidationError(
            "batch",
            "a query batch holds exactly one RETRIEVE operation and nothing else",
            f"{_describe(index, op)} is one of {count} operations",
        )
    if op.table != first.table:
        raise TableValidationError(
            "batch",
            "all operations in a batch must target one table",
            f"operation 0 targets {first.table!r}, operation {index} targets {op.table!r}",
        )
    if op.partition_key != first.partition_key:
        raise TableValidationError(
            "batch",
            "all operations in a batch must share one PartitionKey",
            f"operation 0 has {first.partition_key!r}, operation {index} has {op.partition_key!r}",
        )
    previous = seen.setdefault(op.row_key, index)
    if previous != index:
        raise TableValidationError(
            "batch",
            "each entity may appear only once in a batch",
            f"operations {previous} and {index} both address RowKey={op.row_key!r}",
        )
    if kind in _CONDITIONAL:
        if not op.etag:
            raise TableValidationError(
                "If-Match",
                "UPDATE, MERGE and DELETE need an ETag (the tracked one, or '*' for an unconditional write)",
                _describe(index, op),
            )
        if "\r" in op.etag or "\n" in op.etag:
            raise TableValidationError("If-Match", "an ETag cannot contain line breaks", _describe(index, op))
    if kind in _WITH_BODY:
        payload = op.payload
        if payload is None:
            raise TableValidationError("payload", f"{kind.name} needs an entity payload", _describe(index, op))
        values = payload.values
        if values.get("PartitionKey", op.partition_key) != op.partition_key or values.get(
            "RowKey", op.row_key
        ) != op.row_key:
            raise TableValidationError(
                "payload",
                "the payload's PartitionKey and RowKey must be the operation's",
                f"{_describe(index, op)} carries PartitionKey={values.get('PartitionKey')!r}, "
                f"RowKey={values.get('RowKey')!r}",
            )


# ---------------------------------------------------------------- writing

_PART_PREAMBLE = b"Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
#: Bytes of one ``CRLF--changeset_<uuid>CRLF`` delimiter between parts.
_DELIMITER_BYTES = len("\r\n--changeset_\r\n") + 36


def _new_boundary_id() -> str:
    """A fresh random boundary suffix (a function so tests can force collisions)."""
    return str(uuid.uuid4())


class OperationRequest:
    """The request of one entity operation: method, path below the table endpoint, its own
    headers (``Prefer``, ``If-Match``; the client adds the format's and ``Content-Type``) and body.

    Built once by :func:`operation_request`, sent on its own by the client or written as a
    part of a ``$batch`` by :func:`build_batch_request`.
    """

    # A plain class, not a dataclass: each dataclass costs ``import tablesdk`` about 0.5 ms (start-up).

    __slots__ = ("method", "path", "headers", "body")

    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body


def prefer_value(api_version: str, echo_content: bool) -> str | None:
    """The ``Prefer`` header of an insert under ``api_version``, or None where it is not understood."""
    if not supports_prefer(api_version):
        return None
    return "return-content" if echo_content else "return-no-content"


def operation_request(operation: BatchOperation, fmt: PayloadFormat, *, prefer: str | None) -> OperationRequest:
    """The request of ``operation``, the same whether it is sent alone or inside a batch.

    ``prefer`` is the ``Prefer`` value an insert carries (see :func:`prefer_value`). The
    body is ``operation.body`` when it was encoded already, else the payload serialized
    with ``fmt``. Raises ``ValueError`` for an UPDATE, MERGE or DELETE without an ETag.
    """
    kind = operation.kind
    headers: dict[str, str] = {}
    body: bytes | None = None
    if kind in _WITH_BODY and operation.payload is not None:
        body = operation.body if operation.body is not None else fmt.serialize_entity(operation.payload)
    if kind is BatchOperationKind.INSERT:
        path = quote(operation.table, safe="")
        if prefer is not None:
            headers["Prefer"] = prefer
    else:
        path = entity_path(operation.table, operation.partition_key, operation.row_key)
    if kind in _CONDITIONAL:
        if not operation.etag:
            raise ValueError(
                f"{kind.name} of ({operation.partition_key!r}, {operation.row_key!r}) needs an ETag: "
                "read the entity first, or attach it with etag='*' for an unconditional write"
            )
        headers["If-Match"] = operation.etag
    return OperationRequest(kind.method, path, headers, body)


def _part(request: OperationRequest, base: str, shared: str, content_type: str, number: int | None) -> bytes:
    """One ``application/http`` part: the request line, Content-ID in a change set, headers, body."""
    lines = [f"{request.method} {base}/{request.path} HTTP/1.1\r\n"]
    if number is not None:
        lines.append(f"Content-ID: {number}\r\n")
    if request.body is not None:
        lines.append(content_type)
    lines.append(shared)
    lines.extend(f"{name}: {value}\r\n" for name, value in request.headers.items())
    lines.append("\r\n")
    return _PART_PREAMBLE + "".join(lines).encode("utf-8") + (request.body or b"")


def build_batch_request(
    base_url: str,
    operations: Sequence[BatchOperation],
    fmt: PayloadFormat,
    *,
    api_version: str,
) -> tuple[bytes, str]:
    """The ``$batch`` request body and its ``Content-Type`` header value.

    ``base_url`` is the table endpoint (``https://account.table.core.windows.net``
    or a path-style emulator URL); inner requests carry absolute URLs below it.
    Write operations go in one change set, numbered by ``Content-ID`` from 1; a
    single RETRIEVE goes alone, outside any change set. Lines end in CRLF; the
    boundaries are ``batch_<uuid4>`` and ``changeset_<uuid4>`` and are checked
    not to occur in the content (new ones are drawn if they do).

    Runs :func:`validate_batch` first, and raises
    :class:`~tablesdk._core._errors.TableValidationError` if the encoded body exceeds
    :data:`MAX_BATCH_BYTES`.
    """
    fast = _insert_batch_request(base_url, operations, fmt, api_version)
    return fast if fast is not None else _general_batch_request(base_url, operations, fmt, api_version)


def _general_batch_request(
    base_url: str, operations: Sequence[BatchOperation], fmt: PayloadFormat, api_version: str
) -> tuple[bytes, str]:
    """:func:`build_batch_request` operation by operation: any batch, and every error it raises."""
    validate_batch(operations)
    base = base_url.rstrip("/")
    shared = "".join(f"{name}: {value}\r\n" for name, value in fmt.request_headers().items())
    content_type = f"Content-Type: {fmt.content_type}\r\n"
    if operations[0].kind is BatchOperationKind.RETRIEVE:
        request = operation_request(operations[0], fmt, prefer=None)
        return _assemble([_part(request, base, shared, content_type, None)], changeset=False)
    parts = []
    # Each part costs at least its own bytes plus a delimiter line; stop as
    # soon as the running total is over the limit.
    running = 0
    for number, op in enumerate(operations, 1):
        request = operation_request(op, fmt, prefer=prefer_value(api_version, op.echo_content))
        part = _part(request, base, shared, content_type, number)
        running += len(part) + _DELIMITER_BYTES
        if running > MAX_BATCH_BYTES:
            raise _over_limit(number, len(operations), running, op)
        parts.append(part)
    return _assemble(parts, changeset=True)


# ---------------------------------------------------------------- writing a batch of inserts
# A batch of inserts (a bulk load, a context's added entities) repeats one part but for its
# Content-ID and body: "POST <table>", the same headers, the same Prefer. Such a batch is
# checked with one C pass per rule and written as fixed head and tail bytes around each
# number and body. Anything else (another kind, a rule broken, an odd value, a body that
# does not serialize) is left to the general writer, which decides and reports it.

#: The Content-ID of each operation, as written.
_CONTENT_IDS = tuple(str(number).encode("ascii") for number in range(1, MAX_BATCH_OPERATIONS + 1))
#: kind, table, PartitionKey and echo_content: equal in every operation of a batch of inserts.
_INSERT_TRAITS = attrgetter("kind", "table", "partition_key", "echo_content")
_ROW_KEY = attrgetter("row_key")
_PAYLOAD = attrgetter("payload")
_BODY = attrgetter("body")
_VALUES = attrgetter("values")


def _insert_batch_request(
    base_url: str, operations: Sequence[BatchOperation], fmt: PayloadFormat, api_version: str
) -> tuple[bytes, str] | None:
    """:func:`build_batch_request` of a batch of plain inserts, or None to use the general writer."""
    count = len(operations)
    if not 1 <= count <= MAX_BATCH_OPERATIONS:
        return None
    first = operations[0]
    if not _plain_inserts(operations, first, count):
        return None
    shared = "".join(f"{name}: {value}\r\n" for name, value in fmt.request_headers().items())
    prefer = prefer_value(api_version, first.echo_content)
    try:
        head = _PART_PREAMBLE + (
            f"POST {base_url.rstrip('/')}/{quote(first.table, safe='')} HTTP/1.1\r\nContent-ID: ".encode("utf-8")
        )
        tail = "".join((
            "\r\n", f"Content-Type: {fmt.content_type}\r\n", shared,
            f"Prefer: {prefer}\r\n" if prefer is not None else "", "\r\n",
        )).encode("utf-8")
    except UnicodeError:  # text that cannot be sent: the general writer raises it where it meets it
        return None
    bodies: list[bytes] = list(map(_BODY, operations))
    if None in bodies:
        bodies = _insert_bodies(operations, fmt, len(head) + len(tail) + _DELIMITER_BYTES)
    try:
        parts = list(map(b"".join, zip(repeat(head), _CONTENT_IDS, repeat(tail), bodies)))
    except TypeError:  # a body that is no bytes-like object
        return None
    if sum(map(len, parts)) + count * _DELIMITER_BYTES > MAX_BATCH_BYTES:
        return None  # the general writer says which operation crosses the limit
    return _assemble(parts, changeset=True)


def _insert_bodies(operations: Sequence[BatchOperation], fmt: PayloadFormat, framing: int) -> list[bytes]:
    """The bodies of a batch of inserts, serialized where not given, stopping (as the general
    writer does, with its error) at the first operation that takes the batch over its limit."""
    bodies: list[bytes] = []
    running = 0
    for number, op in enumerate(operations, 1):
        body = op.body if op.body is not None else fmt.serialize_entity(typing.cast(EntityPayload, op.payload))
        running += framing + len(_CONTENT_IDS[number - 1]) + len(body)
        if running > MAX_BATCH_BYTES:
            raise _over_limit(number, len(operations), running, op)
        bodies.append(body)
    return bodies


def _over_limit(number: int, count: int, running: int, op: BatchOperation | None = None) -> TableValidationError:
    """The error of a batch body over 4 MiB, naming the operation that crosses the limit and its
    largest property (the one to move to a batch of its own, or to shorten)."""
    blame = ""
    values = op.payload.values if op is not None and op.payload is not None else {}
    sizes = {name: _rough_size(value) for name, value in values.items() if name not in ("PartitionKey", "RowKey")}
    if op is not None:
        blame = f"; operation {number} (RowKey {op.row_key!r}) crosses it"
        if sizes:
            largest = max(sizes, key=sizes.__getitem__)
            blame += f", its largest property is {largest} (about {sizes[largest]} bytes)"
    return TableValidationError(
        "batch",
        f"a batch body is at most 4 MiB ({MAX_BATCH_BYTES} bytes)",
        f"the first {number} of {count} operations already take over {running} bytes{blame}",
    )


def _rough_size(value: object) -> int:
    """About the bytes a value takes in a body (its text's UTF-16 bytes, a binary's bytes)."""
    if isinstance(value, str):
        return 2 * len(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    return 8


def _plain_inserts(operations: Sequence[BatchOperation], first: BatchOperation, count: int) -> bool:
    """Whether ``operations`` are inserts that pass :func:`validate_batch`, each carrying a payload
    whose keys are its own, checked one rule at a time over all of them (False: look closer)."""
    if (
        first.kind is not BatchOperationKind.INSERT
        or type(first.table) is not str
        or type(first.partition_key) is not str
        or type(first.echo_content) is not bool
    ):
        return False
    traits = list(map(_INSERT_TRAITS, operations))
    if traits.count(traits[0]) != count:
        return False
    row_keys = list(map(_ROW_KEY, operations))
    payloads = list(map(_PAYLOAD, operations))
    if None in payloads:
        return False
    try:
        if len(set(row_keys)) != count:
            return False
        values = list(map(_VALUES, payloads))
        partition_keys = list(map(dict.get, values, repeat("PartitionKey")))
        return partition_keys.count(first.partition_key) == count and list(
            map(dict.get, values, repeat("RowKey"))
        ) == row_keys
    except TypeError:  # an unhashable key, values that are no dict
        return False


def _assemble(parts: list[bytes], *, changeset: bool) -> tuple[bytes, str]:
    """The multipart body around ``parts`` (in one change set, or a lone query) and its Content-Type."""
    # A token without a line break occurs in a part exactly when it occurs in the parts
    # joined by line breaks: one C scan for the lot.
    joined = b"\n".join(parts)
    for _attempt in range(8):
        batch_id = "batch_" + _new_boundary_id()
        changeset_id = "changeset_" + _new_boundary_id()
        batch_token, changeset_token = batch_id.encode("ascii"), changeset_id.encode("ascii")
        # A boundary must not occur anywhere in the content it delimits.
        if b"\n" in batch_token or b"\n" in changeset_token:
            if not any(batch_token in part or changeset_token in part for part in parts):
                break
        elif batch_token not in joined and changeset_token not in joined:
            break
    else:  # pragma: no cover - eight uuid4 collisions in a row do not happen
        raise RuntimeError("could not draw a multipart boundary absent from the batch content")

    batch_delim = f"--{batch_id}".encode("ascii")
    if changeset:
        cs_delim = f"\r\n--{changeset_id}\r\n".encode("ascii")
        body_bytes = b"".join((
            batch_delim,
            f"\r\nContent-Type: multipart/mixed; boundary={changeset_id}\r\n\r\n--{changeset_id}\r\n".encode("ascii"),
            cs_delim.join(parts),
            f"\r\n--{changeset_id}--\r\n".encode("ascii"),
            batch_delim,
            b"--\r\n",
        ))
    else:
        body_bytes = b"".join((batch_delim, b"\r\n", parts[0], b"\r\n", batch_delim, b"--\r\n"))
    if len(body_bytes) > MAX_BATCH_BYTES:
        raise TableValidationError(
            "batch",
            f"a batch body is at most 4 MiB ({MAX_BATCH_BYTES} bytes)",
            f"got {len(body_bytes)} bytes",
        )
    return body_bytes, f"multipart/mixed; boundary={batch_id}"
