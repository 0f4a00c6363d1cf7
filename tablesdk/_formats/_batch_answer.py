"""Entity group transactions: reading the service's answer to a ``$batch`` request.

The service answers ``202 Accepted`` with a multipart body holding one HTTP
response per operation or, when the change set failed, a single response whose
error message starts with the zero-based index of the operation that failed
(``"1:The specified entity already exists."``).

Answers in the service's own shape (every part framed alike) are read column by
column (:func:`_standard_results`); anything else goes through a hand-written,
single-pass multipart reader that is deliberately tolerant: LF-only line endings,
missing ``Content-ID`` headers, stray lines before an inner status line (Azurite's
101-operation answer), a missing blank line between inner headers and body, and
leftover chunked-transfer size lines are all accepted. :class:`BatchAnswer` is the
check the clients send a batch with, so that a refused change set is an error the
retry loop classifies.

It never does I/O: it reads the bytes the client received for the request
:func:`~tablesdk._formats._batch.build_batch_request` wrote.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import getitem, itemgetter

from ._batch import MAX_BATCH_OPERATIONS, BatchOperation, BatchOperationKind, BatchOperationResult
from .._entities._edm import EntityPayload
from .._core._errors import BatchError, ResponseDecodeError, error_for_status
from . import PayloadFormat, decoded, parse_error_body, require_keys
from .._pipeline._http import HttpResponse

__all__ = ["parse_batch_response", "BatchAnswer"]


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
    otherwise by order; a ``Content-ID`` repeated or naming no operation raises
    :class:`~tablesdk._core._errors.ResponseDecodeError`.

    A refused change set (an inner response with a status outside 2xx) raises
    :class:`~tablesdk._core._errors.BatchError`: ``failed_index`` from the message's
    ``"N:"`` prefix (None when it has none), ``error_code``, ``status_code``
    and ``message`` (without the prefix and the RequestId trailer) of the inner
    response, and ``cause`` the matching per-status
    :class:`~tablesdk._core._errors.TableServiceError` subclass. A body that is not a
    batch response, or whose responses do not match the operations, raises
    :class:`~tablesdk._core._errors.BatchError` with ``failed_index`` None and
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

    Raises the :class:`~tablesdk._core._errors.BatchError` of a refused change set, or an
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
    """``responses`` in operation order: by ``Content-ID`` where present, else by order.

    A ``Content-ID`` that names no operation of the request (``0``, ``7`` of 3, ``abc``) or
    one named twice raises :class:`~tablesdk._core._errors.ResponseDecodeError`: the request
    numbered its operations 1..count, the service echoes those numbers, and an answer that
    does not cannot say which result is which operation's.
    """
    slots: list[_InnerResponse | None] = [None] * count
    unplaced: list[_InnerResponse] = []
    for response in responses:
        content_id = response.lower.get("content-id", "").strip()
        if not content_id:
            unplaced.append(response)
        elif not (content_id.isascii() and content_id.isdigit() and 1 <= int(content_id) <= count):
            raise ResponseDecodeError(
                f"an operation response has Content-ID {content_id[:20]!r}, and the request numbered its "
                f"{count} operations 1 to {count}"
            )
        elif slots[int(content_id) - 1] is not None:
            raise ResponseDecodeError(f"two operation responses have Content-ID {content_id}")
        else:
            slots[int(content_id) - 1] = response
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
    :attr:`results`, or raises the :class:`~tablesdk._core._errors.BatchError` of a refused
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
