"""multipart/mixed reading and writing for ``$batch`` (requests in, responses out).

Reading accepts CRLF or bare LF line ends. Writing always uses CRLF and puts
exactly one blank line between a part's headers and its body, and between an
embedded HTTP response's headers and its body.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus

__all__ = ["Part", "MultipartError", "boundary_of", "split_parts", "parse_http_request", "body_within",
           "operation_shape", "SubResponse", "write_batch_response"]


class MultipartError(ValueError):
    """The body is not well-formed multipart/mixed (or the embedded request is not HTTP)."""


@dataclass
class Part:
    """One part of a multipart body; parts with equal header blocks share one ``headers``
    (read them, do not change them)."""

    headers: dict[str, str]
    body: bytes


_BOUNDARY_RE = re.compile(r'boundary\s*=\s*(?:"([^"]+)"|([^;\s]+))', re.IGNORECASE)


def boundary_of(content_type: str) -> str | None:
    """The ``boundary`` parameter of a multipart Content-Type, or None."""
    if not content_type.lower().startswith("multipart/mixed"):
        return None
    m = _BOUNDARY_RE.search(content_type)
    if not m:
        return None
    return m.group(1) or m.group(2)


def _parse_headers(block: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    text = block.decode("latin-1")
    if "\n " not in text and "\n\t" not in text and not text.startswith((" ", "\t")):  # no folded lines
        for text_line in text.split("\n"):
            name, sep, value = text_line.partition(":")
            if not sep:
                if not text_line.rstrip("\r"):
                    continue
                raise MultipartError(f"malformed header line {text_line.rstrip(chr(13)).encode('latin-1')[:60]!r}")
            headers[name.strip().lower()] = value.strip()
        return headers
    for raw_line in block.split(b"\n"):
        line = raw_line.rstrip(b"\r")
        if not line:
            continue
        if line[:1] in (b" ", b"\t") and headers:  # folded continuation
            last = next(reversed(headers))
            headers[last] += " " + line.strip().decode("latin-1")
            continue
        raw_name, colon, raw_value = line.partition(b":")
        if not colon:
            raise MultipartError(f"malformed header line {line[:60]!r}")
        headers[raw_name.strip().decode("latin-1").lower()] = raw_value.strip().decode("latin-1")
    return headers


def _blank_line(data: bytes) -> tuple[int, int] | None:
    """(start, end) of the first blank line (``\\r?\\n\\r?\\n``), found with ``bytes.find``: a regular
    expression with no literal start is tried at every byte, the most of a part's cost."""
    crlf = data.find(b"\r\n\r\n")  # the usual one: the others are looked for only before it
    limit = crlf + 4 if crlf >= 0 else len(data)
    lf_lf, lf_crlf = data.find(b"\n\n", 0, limit), data.find(b"\n\r\n", 0, limit)
    if lf_lf < 0 and lf_crlf < 0:
        return None
    if lf_crlf < 0 or 0 <= lf_lf < lf_crlf:
        at, end = lf_lf, lf_lf + 2
    else:
        at, end = lf_crlf, lf_crlf + 3
    return (at - 1 if at and data[at - 1] == 0x0D else at), end


def _split_head(data: bytes) -> tuple[bytes, bytes]:
    """Split at the first blank line: (header block, body)."""
    if data.startswith(b"\r\n"):
        return b"", data[2:]  # no headers at all
    if data.startswith(b"\n"):
        return b"", data[1:]
    blank = _blank_line(data)
    if blank is None:
        return data, b""
    return data[: blank[0]], data[blank[1]:]


def _delimiters(body: bytes, boundary: bytes) -> list[tuple[int, int, bool]]:
    """(start, end, closing) of each delimiter line; start includes the line break before it."""
    delimiter = b"--" + boundary
    found: list[tuple[int, int, bool]] = []
    position = 0
    while True:
        index = body.find(delimiter, position)
        if index == -1:
            return found
        if index == 0 or body[index - 1] == 0x0A:  # at the start of a line
            after = index + len(delimiter)
            closing = body[after:after + 2] == b"--"
            rest_start = after + 2 if closing else after
            eol = body.find(b"\n", rest_start)
            line_end = len(body) if eol == -1 else eol
            if not body[rest_start:line_end].strip(b" \t\r"):
                begin = index
                if begin > 0:
                    begin -= 1  # the LF
                    if begin > 0 and body[begin - 1] == 0x0D:
                        begin -= 1  # and its CR
                end = len(body) if eol == -1 else eol + 1
                found.append((begin, end, closing))
                if closing:
                    return found
                position = end
                continue
        position = index + 1


def split_parts(body: bytes, boundary: str) -> list[Part]:
    """The parts of a multipart body (preamble and epilogue ignored)."""
    delimiters = _delimiters(body, boundary.encode("latin-1"))
    if not delimiters:
        raise MultipartError("no multipart boundary found")
    if not delimiters[-1][2]:
        raise MultipartError("the multipart body has no closing boundary")
    parts: list[Part] = []
    read: dict[bytes, dict[str, str]] = {}  # the parts of a change set repeat one header block
    for this, nxt in zip(delimiters, delimiters[1:]):
        chunk = body[this[1]: nxt[0]]
        head, content = _split_head(chunk)
        headers = read.get(head)
        if headers is None:
            headers = read[head] = _parse_headers(head)
        parts.append(Part(headers, content))
    return parts


def parse_http_request(data: bytes) -> tuple[str, str, dict[str, str], bytes]:
    """(method, url, headers, body) of an ``application/http`` request part."""
    data = data.lstrip(b"\r\n")
    line_end = data.find(b"\n")
    if line_end == -1:
        raise MultipartError("the operation has no request line")
    request_line = data[:line_end].rstrip(b"\r").decode("latin-1")
    pieces = request_line.split(" ")
    if len(pieces) != 3 or not pieces[2].startswith("HTTP/"):
        raise MultipartError(f"malformed request line {request_line[:80]!r}")
    head, body = _split_head(data[line_end + 1:])
    headers = _parse_headers(head)
    return pieces[0].upper(), pieces[1], headers, body_within(body, headers.get("content-length"))


#: The header names that differ from one operation of a change set to the next (a client numbers
#: its operations, and each body has its own length).
_VARYING = (b"content-id", b"content-length")


def operation_shape(data: bytes) -> tuple[bytes, str | None, str | None, bytes] | None:
    """(shape, Content-ID, Content-Length, rest) of an ``application/http`` part, or None.

    The shape is the part's request line and header lines without its Content-ID and
    Content-Length lines: two parts of one shape read (:func:`parse_http_request`) as the same
    method, URL and headers but for those two values, and ``rest`` is what follows the
    blank line (before :func:`body_within`). None for a part this reading does not cover
    (no blank line, folded lines, Content-ID or Content-Length given twice or in a line of
    another form): read it whole.
    """
    data = data.lstrip(b"\r\n")
    blank = _blank_line(data)
    if blank is None:
        return None
    head, rest = data[: blank[0]], data[blank[1]:]
    line_end = head.find(b"\n") + 1
    if not line_end:
        return head, None, None, rest
    fields = head[line_end:]
    # find, not ``in``: a bytes ``in`` first tries its operand as an integer, and formats the error
    if fields.find(b"\n ") >= 0 or fields.find(b"\n\t") >= 0 or fields.startswith((b" ", b"\t")):
        return None
    lowered = fields.lower()
    values: list[str | None] = []
    cuts: list[tuple[int, int]] = []
    for name in _VARYING:
        at = lowered.find(name)
        if at < 0:
            values.append(None)
            continue
        if (at and lowered[at - 1] != 0x0A) or lowered.find(name, at + 1) >= 0:
            return None  # inside another line, or given twice
        end = lowered.find(b"\n", at) + 1 or len(lowered)
        line_name, colon, value = fields[at:end].partition(b":")
        value = value.removesuffix(b"\n").removesuffix(b"\r")
        if not colon or line_name[len(name):].strip(b" \t") or value.find(b"\r") >= 0:
            return None
        values.append(value.decode("latin-1").strip())
        cuts.append((at, end))
    if cuts:
        cuts.sort()
        kept, position = [], 0
        for at, end in cuts:
            kept.append(fields[position:at])
            position = end
        kept.append(fields[position:])
        fields = b"".join(kept)
    return head[:line_end] + fields, values[0], values[1], rest


def body_within(body: bytes, length: str | None) -> bytes:
    """An operation's body cut to its Content-Length, when it gives one that fits."""
    if length is not None and length.isascii() and length.isdigit() and int(length) <= len(body):
        return body[: int(length)]
    return body


@dataclass
class SubResponse:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


_REASONS = {status.value: status.phrase for status in HTTPStatus}


_PART_HEAD = "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 "


def _http_part(delimiter: str, response: SubResponse) -> bytes:
    """A delimiter line and the ``application/http`` part of one response, ending in CRLF."""
    head = [delimiter, _PART_HEAD, str(response.status), " ", _REASONS.get(response.status, "Unknown"), "\r\n"]
    for name, value in response.headers:
        head += name, ": ", value, "\r\n"
    head.append("\r\n")
    if response.body:
        return "".join(head).encode("latin-1") + response.body + b"\r\n"
    head.append("\r\n")
    return "".join(head).encode("latin-1")


def write_batch_response(responses: list[SubResponse], changeset: bool) -> tuple[str, bytes]:
    """(Content-Type, body) of a batch response holding ``responses``.

    With ``changeset`` the responses are wrapped in one change set response
    part; a query's response is a direct part of the batch response.
    """
    batch_boundary = f"batchresponse_{uuid.uuid4()}"
    out: list[bytes] = []
    if changeset:
        cs_boundary = f"changesetresponse_{uuid.uuid4()}"
        out.append(f"--{batch_boundary}\r\nContent-Type: multipart/mixed; boundary={cs_boundary}\r\n\r\n".encode())
        delimiter = f"--{cs_boundary}\r\n"
        out += [_http_part(delimiter, response) for response in responses]
        out.append(f"--{cs_boundary}--\r\n".encode())
    else:
        delimiter = f"--{batch_boundary}\r\n"
        out += [_http_part(delimiter, response) for response in responses]
    out.append(f"--{batch_boundary}--\r\n".encode())
    return f"multipart/mixed; boundary={batch_boundary}", b"".join(out)
