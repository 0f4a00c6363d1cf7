"""Entity group transactions: the ``$batch`` multipart request and its response.

An entity group transaction sends up to 100 insert, update, merge, delete and
upsert operations on one partition of one table as a single atomic request (a
*change set* inside a *batch*); or, alternatively, one point query (GET of a
single entity) on its own, outside any change set. The service answers ``202
Accepted`` with a multipart body holding one HTTP response per operation or,
when the change set failed, a single response whose error message starts with
the zero-based index of the operation that failed (``"1:The specified entity
already exists."``).

This module builds that request and reads that response with a hand-written,
single-pass multipart writer and reader (the stdlib ``email`` package costs
more than the rest of a batch put together). The reader is deliberately
tolerant: LF-only line endings, missing ``Content-ID`` headers, stray lines
before an inner status line (Azurite's 101-operation answer), a missing blank
line between inner headers and body, and leftover chunked-transfer size lines
are all accepted.

It never does I/O: the client sends the bytes :func:`build_batch_request`
returns and hands the answer to :func:`parse_batch_response`.
"""

from __future__ import annotations

import re
import typing
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import repeat
from operator import attrgetter, getitem, itemgetter
from urllib.parse import quote

from ._edm import EntityPayload
from ._errors import BatchError, TableValidationError, error_for_status
from ._formats import PayloadFormat, decoded, parse_error_body, require_keys
from ._http import HttpResponse

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
    "parse_batch_response",
    "BatchAnswer",
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

    Raises :class:`~tablesdk._errors.TableValidationError` (field ``"batch"``
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


@dataclass(frozen=True)
class OperationRequest:
    """The request of one entity operation: method, path below the table endpoint, its own
    headers (``Prefer``, ``If-Match``; the client adds the format's and ``Content-Type``) and body.

    Built once by :func:`operation_request`, sent on its own by the client or written as a
    part of a ``$batch`` by :func:`build_batch_request`.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: bytes | None


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
    :class:`~tablesdk._errors.TableValidationError` if the encoded body exceeds
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
            raise _over_limit(number, len(operations), running)
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
            raise _over_limit(number, len(operations), running)
        bodies.append(body)
    return bodies


def _over_limit(number: int, count: int, running: int) -> TableValidationError:
    return TableValidationError(
        "batch",
        f"a batch body is at most 4 MiB ({MAX_BATCH_BYTES} bytes)",
        f"the first {number} of {count} operations already take over {running} bytes",
    )


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


# ---------------------------------------------------------------- reading

#: A header line: an RFC 7230 token, then a colon.
_HEADER_LINE = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+[ \t]*:")
#: Header lines as the service writes them, CRLF-terminated, one after another.
_HEADER_BLOCK = re.compile(rb"(?:[!#$%&'*+.^_`|~0-9A-Za-z-]+[ \t]*:[^\r\n]*\r\n)+")
#: A chunked-transfer size line: hex digits, optional extensions.
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]+)[ \t]*(?:;[^\r\n]*)?\r?\n")
#: The first delimiter line of a multipart body, for bodies whose header lost the boundary.
_FIRST_DELIMITER = re.compile(rb"^--([^\s]+?)(?:--)?[ \t]*\r?$", re.MULTILINE)
#: The "N:" operation-index prefix of a batch error message.
_INDEX_PREFIX = re.compile(r"\s*(\d{1,9}):(.*)\Z", re.DOTALL)
_REQUEST_ID = re.compile(rb"RequestId:\s*([0-9A-Fa-f][0-9A-Fa-f-]{7,63})")
_MAX_DEPTH = 3


@dataclass
class _InnerResponse:
    status: int
    headers: dict[str, str]
    lower: dict[str, str]
    body: bytes


def _boundary_param(content_type: str | None) -> bytes | None:
    if not content_type:
        return None
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "boundary":
            value = value.strip().strip('"')
            if value:
                return value.encode("utf-8")
    return None


def _dechunk(data: bytes) -> bytes:
    """``data`` without chunked transfer framing, if (and only if) it is exactly that."""
    if not data[:1] or data[:1] not in b"0123456789abcdefABCDEF":
        return data
    out: list[bytes] = []
    pos = 0
    size_of = _CHUNK_SIZE.match
    while True:
        match = size_of(data, pos)
        if match is None:
            return data
        size = int(match.group(1), 16)
        pos = match.end()
        if size == 0:
            return b"".join(out)
        end = pos + size
        if end > len(data):
            return data
        out.append(data[pos:end])
        if data.startswith(b"\r\n", end):
            pos = end + 2
        elif data.startswith(b"\n", end):
            pos = end + 1
        else:
            return data


def _split_multipart(data: bytes, boundary: bytes) -> list[bytes] | None:
    """The contents of each part between ``--boundary`` delimiter lines, or None if there is none.

    A delimiter must start a line; the line break before it belongs to it. Text
    before the first delimiter (a preamble, or a chunk size line) and after the
    closing one is ignored; a missing closing delimiter is tolerated.
    """
    delimiter = b"--" + boundary
    length = len(data)
    parts: list[bytes] = []
    start = -1
    pos = 0
    found = False
    while True:
        at = data.find(delimiter, pos)
        if at < 0:
            break
        pos = at + 1
        if at > 0 and data[at - 1] != 0x0A:
            continue
        after = at + len(delimiter)
        closing = data.startswith(b"--", after)
        if closing:
            after += 2
        eol = data.find(b"\n", after)
        line_end = length if eol < 0 else eol
        if data[after:line_end].strip(b" \t\r"):
            continue  # a longer token that merely starts with the boundary
        found = True
        if start >= 0:
            end = at
            if end > start and data[end - 1] == 0x0A:
                end -= 1
                if end > start and data[end - 1] == 0x0D:
                    end -= 1
            parts.append(data[start:end])
        if closing:
            return parts
        start = line_end + 1 if eol >= 0 else length
        pos = start
    if not found:
        return None
    if 0 <= start < length:
        parts.append(data[start:])
    return parts


def _read_headers(data: bytes, pos: int) -> tuple[list[tuple[str, str]], int]:
    """Header lines from ``pos``: stops after a blank line, or before a line that is no header."""
    # The service's shape, every time: CRLF lines, each a header, then an empty line. Check the
    # whole block with one regex match and split it once; anything else (bare LF, folded or
    # odd lines, a CR inside a value) goes line by line.
    end = data.find(b"\r\n\r\n", pos)
    if end > pos and _HEADER_BLOCK.fullmatch(data, pos, end + 2):
        pairs = [line.partition(b":") for line in data[pos:end].split(b"\r\n")]
        return [
            (name.strip().decode("ascii"), value.strip().decode("utf-8", "replace")) for name, _, value in pairs
        ], end + 4
    return _read_headers_by_line(data, pos)


def _read_headers_by_line(data: bytes, pos: int) -> tuple[list[tuple[str, str]], int]:
    headers: list[tuple[str, str]] = []
    length = len(data)
    is_header = _HEADER_LINE.match
    while pos < length:
        eol = data.find(b"\n", pos)
        end = length if eol < 0 else eol
        line = data[pos:end]
        if line.endswith(b"\r"):
            line = line[:-1]
        following = length if eol < 0 else eol + 1
        if not line.strip():
            return headers, following
        if line[:1] in (b" ", b"\t") and headers:
            previous_name, previous_value = headers[-1]
            headers[-1] = (previous_name, f"{previous_value} {line.strip().decode('utf-8', 'replace')}")
        elif is_header(line):
            raw_name, _, raw_value = line.partition(b":")
            headers.append((raw_name.strip().decode("ascii"), raw_value.strip().decode("utf-8", "replace")))
        else:
            return headers, pos  # e.g. a body that follows the headers without a blank line
        pos = following
    return headers, length


def _parse_http(data: bytes, pos: int) -> _InnerResponse | None:
    """The inner HTTP response of an ``application/http`` part, from ``pos``.

    Lines before the status line (blank lines, a stray boundary name, a chunk
    size) are skipped.
    """
    length = len(data)
    while pos < length:
        eol = data.find(b"\n", pos)
        end = length if eol < 0 else eol
        line = data[pos:end].strip()
        pos = length if eol < 0 else eol + 1
        if not line.startswith(b"HTTP/"):
            continue
        fields = line.split(None, 2)
        if len(fields) < 2 or not fields[1].isdigit():
            continue
        pairs, body_start = _read_headers(data, pos)
        headers = dict(pairs)
        lower = {name.lower(): value for name, value in pairs}
        return _InnerResponse(int(fields[1]), headers, lower, data[body_start:].strip(b" \t\r\n"))
    return None


def _collect(data: bytes, boundary: bytes | None, out: list[_InnerResponse], depth: int) -> bool:
    """Append the inner responses of the multipart ``data`` to ``out``; False if it is not multipart."""
    parts = _split_multipart(data, boundary) if boundary else None
    if parts is None:
        match = _FIRST_DELIMITER.search(data)
        if match is None:
            return False
        parts = _split_multipart(data, match.group(1))
        if parts is None:
            return False
    for part in parts:
        pairs, body_start = _read_headers(part, 0)
        part_type = ""
        for name, value in pairs:
            if name.lower() == "content-type":
                part_type = value
        if part_type.lower().startswith("multipart/") and depth < _MAX_DEPTH:
            _collect(part[body_start:], _boundary_param(part_type), out, depth + 1)
            continue
        response = _parse_http(part, body_start)
        if response is not None:
            out.append(response)
    return True


def _error_text(body: bytes, content_type: str | None) -> tuple[str | None, str, int | None, str | None]:
    """(code, message without index or trailer, failed index or None, request id or None)."""
    code, message = parse_error_body(body, content_type)
    index: int | None = None
    match = _INDEX_PREFIX.match(message)
    if match is not None:
        index = int(match.group(1))
        message = match.group(2).strip()
    found = _REQUEST_ID.search(body)
    request_id = found.group(1).decode("ascii") if found else None
    return code, message, index, request_id


def _failure(response: _InnerResponse, operation_count: int) -> BatchError:
    code, message, index, request_id = _error_text(response.body, response.lower.get("content-type"))
    code = response.lower.get("x-ms-error-code") or code
    request_id = response.lower.get("x-ms-request-id") or request_id
    if index is not None and index >= operation_count:
        index = None
    status = response.status
    if not message:
        message = f"HTTP {status} with no error body"
    cause = error_for_status(status, code, message, request_id=request_id)
    return BatchError(
        message, failed_index=index, status_code=status, error_code=code, request_id=request_id, cause=cause
    )


def parse_batch_response(
    body: bytes,
    content_type: str,
    operations: Sequence[BatchOperation],
    fmt: PayloadFormat,
) -> list[BatchOperationResult]:
    """One :class:`BatchOperationResult` per operation, in the operations' order.

    ``body`` and ``content_type`` are those of the ``202 Accepted`` answer to
    the request :func:`build_batch_request` made for ``operations``. Inner
    responses are matched to operations by ``Content-ID`` where present and
    otherwise by order.

    A refused change set (an inner response with a status outside 2xx) raises
    :class:`~tablesdk._errors.BatchError`: ``failed_index`` from the message's
    ``"N:"`` prefix (None when it has none), ``error_code``, ``status_code``
    and ``message`` (without the prefix and the RequestId trailer) of the inner
    response, and ``cause`` the matching per-status
    :class:`~tablesdk._errors.TableServiceError` subclass. A body that is not a
    batch response, or whose responses do not match the operations, raises
    :class:`~tablesdk._errors.BatchError` with ``failed_index`` None and
    ``ambiguous_retry`` True: every operation's outcome is unknown.
    """
    count = len(operations)
    results = _standard_results(bytes(body), content_type, count, fmt)
    return results if results is not None else _general_results(body, content_type, count, fmt)


def _general_results(body: bytes, content_type: str, count: int, fmt: PayloadFormat) -> list[BatchOperationResult]:
    """:func:`parse_batch_response` for any answer the reader accepts, and every error it raises."""
    slots = _placed(_inner_responses(body, content_type, count), count)
    return [
        _result(index, slot.status, slot.headers, slot.lower.get("etag"), slot.body, fmt)
        for index, slot in enumerate(slots)
    ]


def _inner_responses(body: bytes, content_type: str, count: int) -> list[_InnerResponse]:
    """The inner responses of a batch answer for ``count`` operations, all successes.

    Raises the :class:`~tablesdk._errors.BatchError` of a refused change set, or an
    ambiguous one for an answer that does not say what was applied.
    """
    data = _dechunk(bytes(body))
    responses: list[_InnerResponse] = []
    if not _collect(data, _boundary_param(content_type), responses, 0):
        code, message, index, request_id = _error_text(data, content_type)
        if index is not None and index >= count:
            index = None
        error = BatchError(
            message or "the batch response is not a multipart body",
            failed_index=index,
            error_code=code,
            request_id=request_id,
        )
        error.ambiguous_retry = True  # the answer does not say whether the transaction was applied
        raise error
    for response in responses:
        # 1xx and 3xx are no outcome of an operation: the service answers each with 2xx or an error.
        if not 200 <= response.status < 300:
            raise _failure(response, count)
    if len(responses) != count:
        error = BatchError(
            f"the batch response holds {len(responses)} operation responses for {count} operations",
            status_code=202,
        )
        error.ambiguous_retry = True  # which operations were applied cannot be told
        raise error
    return responses


def _placed(responses: list[_InnerResponse], count: int) -> list[_InnerResponse]:
    """``responses`` in operation order: by ``Content-ID`` where present and valid, else by order."""
    slots: list[_InnerResponse | None] = [None] * count
    unplaced: list[_InnerResponse] = []
    for response in responses:
        content_id = response.lower.get("content-id", "").strip()
        if content_id.isdigit() and 1 <= int(content_id) <= count and slots[int(content_id) - 1] is None:
            slots[int(content_id) - 1] = response
        else:
            unplaced.append(response)
    remaining = iter(unplaced)
    # Every slot gets one: there are as many responses as slots.
    return [slot if slot is not None else next(remaining) for slot in slots]


def _result(
    index: int, status: int, headers: dict[str, str], etag: str | None, body: bytes, fmt: PayloadFormat
) -> BatchOperationResult:
    """The result of one successful operation: its status, headers, ETag and any entity in ``body``."""
    payload: EntityPayload | None = None
    if body and status in (200, 201):
        payload = fmt.parse_entity(body, etag)
        if etag is None:
            etag = payload.etag
    return BatchOperationResult(index, status, etag, payload, headers)


# ---------------------------------------------------------------- reading the service's own shape
# Every answer the service (and Azurite) gives to a change set has one shape: CRLF lines, one
# change set in the batch, each part "Content-Type: application/http" and
# "Content-Transfer-Encoding: binary", an HTTP/1.1 status line, header lines of printable
# ASCII, a blank line and the body. For that shape, when every operation succeeded, the
# results are read in one pass over the text; anything else (another shape, a refusal, a
# count that does not match) goes to the general reader above, which decides and reports it.

#: A boundary as the service writes one (batchresponse_<uuid>, changesetresponse_<uuid>).
_PLAIN_BOUNDARY = re.compile(r"[0-9A-Za-z_.-]+")


def _standard_parts(data: bytes, content_type: str) -> list[str] | None:
    """The parts of the one change set of a batch answer in the service's shape, or None."""
    boundary = _boundary_param(content_type)
    if boundary is None or not data.isascii():
        return None
    text = data.decode("ascii")
    outer = boundary.decode("utf-8")
    head = f"--{outer}\r\nContent-Type: multipart/mixed; boundary="
    if not text.startswith(head):
        return None
    start = len(head)
    blank = text.find("\r\n\r\n", start)
    changeset = text[start:blank]
    if blank < 0 or not _PLAIN_BOUNDARY.fullmatch(changeset) or not text.startswith(f"--{changeset}\r\n", blank + 4):
        return None
    closing = f"\r\n--{changeset}--\r\n--{outer}--"
    end = text.find(closing)
    if end < 0 or text[end + len(closing):] not in ("", "\r\n"):
        return None
    inside = text[blank + 4 + len(changeset) + 4:end]
    parts = inside.split(f"\r\n--{changeset}\r\n")
    # Either boundary anywhere else could be a delimiter line the general reader treats otherwise.
    if inside.count(f"--{changeset}") != len(parts) - 1 or f"--{outer}" in inside:
        return None
    return parts


def _standard_results(
    data: bytes, content_type: str, count: int, fmt: PayloadFormat
) -> list[BatchOperationResult] | None:
    """The results of ``count`` successful operations from an answer in the service's shape, or None."""
    parts = _standard_parts(data, content_type)
    if parts is None or len(parts) != count:
        return None
    split = _split_parts(parts, count)
    if split is None:
        return None
    codes, blocks, rests = split
    columns = _header_columns(blocks, count)
    if columns is not None:  # every part has the same header names in the same order
        names, values = columns
        lower = tuple(map(str.lower, names))
        if len(set(lower)) == len(lower):
            etags: Sequence[str | None] = values[lower.index("etag")] if "etag" in lower else [None] * count
            ids: Sequence[str | None] = values[lower.index("content-id")] if "content-id" in lower else [None] * count
            headers = list(map(dict, map(zip, repeat(names), zip(*values))))
            return _successes(count, codes, headers, etags, ids, rests, fmt)
    pairs = _header_pairs(blocks)
    if pairs is None:
        return None  # a line that is no plain header: the general reader decides
    return _results_by_part(pairs, codes, rests, fmt)  # names (or their spacing) that differ: part by part


def _successes(
    count: int, codes: list[str], headers: list[dict[str, str]], etags: Sequence[str | None],
    content_ids: Sequence[str | None], rests: list[str], fmt: PayloadFormat,
) -> list[BatchOperationResult] | None:
    """The results of the parts read by :func:`_standard_results`, or None when their Content-IDs
    do not put them in operation order."""
    # Answers carry no Content-ID (Azurite) or 1..count in order: either way in operation order.
    if any(content_ids) and list(content_ids) != _content_id_texts(count):
        return None
    statuses = list(map(int, codes))  # int() reads "204 " as 204
    if not "".join(rests).strip(" \t\r\n"):  # no bodies (return-no-content): no payload to read
        return list(map(BatchOperationResult, range(count), statuses, etags, repeat(None), headers))
    bodies = [rest.strip(" \t\r\n").encode("ascii") for rest in rests]
    return list(map(_result, range(count), statuses, headers, etags, bodies, repeat(fmt)))


def _header_columns(blocks: list[str], count: int) -> tuple[tuple[str, ...], list[list[str]]] | None:
    """The header names and, for each, its value in every block, when every block has the same
    lines up to their values (``Name:`` and the spaces after it), all plain; else None.

    The service writes the same headers in the same order in every part: a column of values is
    then a slice of all the lines, read with a C pass, and each name is checked once.
    """
    text = "".join(blocks)
    lines = text.split("\r\n")
    size, rest = divmod(len(lines) - 1, count)
    if rest or size == 0 or text.count("\r") != len(lines) - 1 or text.count("\n") != len(lines) - 1:
        return None  # blocks of different lengths, no headers, or a CR or LF inside a line
    if list(map(str.count, blocks, repeat("\r\n"))).count(size) != count:
        return None  # blocks of different lengths
    # Each value byte a tab or printable ASCII: what deleting those (and the CRLFs) leaves is empty.
    if text.encode("ascii").translate(None, _PLAIN_LINE_BYTES):
        return None
    names: list[str] = []
    values: list[list[str]] = []
    for position, first in enumerate(lines[:size]):
        raw, colon, value = first.partition(":")
        if not colon or not _HEADER_NAME.fullmatch(raw):
            return None
        head = first[:len(first) - len(value.lstrip(" \t"))]  # "Name:" and the spaces after it
        column = lines[position:-1:size]
        if not all(map(str.startswith, column, repeat(head))):
            return None
        names.append(raw.rstrip(" \t"))
        after: Iterator[str] = map(getitem, column, repeat(slice(len(head), None)))
        values.append(list(map(str.strip, after, repeat(" \t"))))
    return tuple(names), values


#: How every part of the service's shape starts, up to its status code.
_PART_HEAD = "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 "
_STATUS_AT = len(_PART_HEAD)
#: A success status code and the space after it.
_SUCCESS_CODES = frozenset(f"{code} " for code in range(200, 300))
#: A header name (an RFC 7230 token) and the spaces or tabs before its colon.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+[ \t]*")


def _split_parts(parts: list[str], count: int) -> tuple[list[str], list[str], list[str]] | None:
    """Each part's status code, header block (its CRLF-ended lines) and the rest, or None when a
    part has another shape: the part head, a 2xx status line ending in CRLF, a blank line."""
    if not all(map(str.startswith, parts, repeat(_PART_HEAD))):
        return None
    codes = [part[_STATUS_AT:_STATUS_AT + 4] for part in parts]
    if not _SUCCESS_CODES.issuperset(codes):
        return None
    line_ends = list(map(str.find, parts, repeat("\n"), repeat(_STATUS_AT)))
    if -1 in line_ends or [part[end - 1] for part, end in zip(parts, line_ends)].count("\r") != count:
        return None
    header_ends = list(map(str.find, parts, repeat("\r\n\r\n"), [end - 1 for end in line_ends]))
    if -1 in header_ends:
        return None
    blocks = [part[end + 1:stop + 2] for part, end, stop in zip(parts, line_ends, header_ends)]
    rests = [part[stop + 4:] for part, stop in zip(parts, header_ends)]
    return codes, blocks, rests


def _header_pairs(blocks: list[str]) -> list[list[tuple[str, str]]] | None:
    """The (name, value) pairs of each block, without the spaces and tabs around names and values;
    None unless every line is a token, a colon and printable ASCII (tabs allowed).

    The lines of all blocks are read at once: one split, one partition per line, each distinct
    name checked once, every value checked in one pass.
    """
    lines = "".join(blocks).split("\r\n")
    lines.pop()  # each block ends with a CRLF (or is empty): nothing follows the last one
    fields = list(map(str.partition, lines, repeat(":")))
    if list(map(_SECOND, fields)).count(":") != len(fields):
        return None
    raw_names = list(map(_FIRST, fields))
    names = {raw: raw.rstrip(" \t") for raw in set(raw_names) if _HEADER_NAME.fullmatch(raw)}
    raw_values = list(map(_THIRD, fields))
    # Every value byte a tab or printable ASCII: what deleting those bytes leaves is empty.
    if len(names) != len(set(raw_names)) or "".join(raw_values).encode("ascii").translate(None, _PLAIN_VALUE_BYTES):
        return None
    pairs = list(zip(map(names.__getitem__, raw_names), map(str.strip, raw_values, repeat(" \t"))))
    result: list[list[tuple[str, str]]] = []
    start = 0
    for size in map(str.count, blocks, repeat("\r\n")):
        result.append(pairs[start:start + size])
        start += size
    return result


_FIRST = itemgetter(0)
_THIRD = itemgetter(2)
#: The bytes a header value may hold: a tab and printable ASCII.
_PLAIN_VALUE_BYTES = bytes([0x09, *range(0x20, 0x7F)])
#: The bytes of header lines: those, CR and LF.
_PLAIN_LINE_BYTES = _PLAIN_VALUE_BYTES + b"\r\n"
_SECOND = itemgetter(1)
_CONTENT_ID_TEXTS = [str(number) for number in range(1, MAX_BATCH_OPERATIONS + 1)]


def _content_id_texts(count: int) -> list[str]:
    return _CONTENT_ID_TEXTS[:count] if count <= MAX_BATCH_OPERATIONS else [str(n) for n in range(1, count + 1)]


def _results_by_part(
    pairs: list[list[tuple[str, str]]], codes: Sequence[str], rests: Sequence[str], fmt: PayloadFormat
) -> list[BatchOperationResult] | None:
    """:func:`_standard_results` for parts whose header lines differ (names, order or spacing), one part at a time."""
    results: list[BatchOperationResult] = []
    content_ids: list[str | None] = []
    for index, (part_pairs, code, rest) in enumerate(zip(pairs, codes, rests)):
        headers = dict(part_pairs)
        lower = dict(zip(map(str.lower, headers), headers.values()))
        if len(lower) != len(part_pairs):
            return None  # a repeated name: the general reader decides which value counts
        content_ids.append(lower.get("content-id"))
        body = rest.strip(" \t\r\n").encode("ascii")
        results.append(_result(index, int(code), headers, lower.get("etag"), body, fmt))
    if any(content_ids) and content_ids != _content_id_texts(len(results)):
        return None
    return results


class BatchAnswer:
    """The check a ``$batch`` request is sent with, shared by the sync and async clients.

    The transport calls it with each ``202``: it parses the answer into
    :attr:`results`, or raises the :class:`~tablesdk._errors.BatchError` of a refused
    change set, which the transport's retry loop then classifies like any error answer.
    That makes the client's batch execution the one place where a change set refused
    inside its ``202`` is retried (by the operation's retry policy: 503 ServerBusy and
    other 5xx yes, 409 no) and flagged ambiguous (404, 409, 412 after an attempt whose
    outcome was unknown), for ``save_changes_with_retries`` and ``bulk_insert`` alike.
    """

    def __init__(self, operations: Sequence[BatchOperation], fmt: PayloadFormat) -> None:
        self.operations = operations
        self.format = fmt
        self.results: list[BatchOperationResult] = []

    @property
    def read_only(self) -> bool:
        """True for a point-query batch: it changes nothing, so its errors are never ambiguous."""
        return all(op.kind is BatchOperationKind.RETRIEVE for op in self.operations)

    def __call__(self, response: HttpResponse) -> None:
        content_type = response.headers.get("Content-Type", "")
        self.results = decoded(response, self._parse(content_type))

    def _parse(self, content_type: str) -> Callable[[bytes], list[BatchOperationResult]]:
        def parse(body: bytes) -> list[BatchOperationResult]:
            results = parse_batch_response(body, content_type, self.operations, self.format)
            require_keys([r.payload for r in results if r.payload is not None], body)
            return results

        return parse
