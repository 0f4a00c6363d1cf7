"""Error response bodies, in whatever shape the service (or an emulator) chose.

Shapes understood:

* OData JSON: ``{"odata.error": {"code": "...", "message": {"lang": "en-US", "value": "..."}}}``
  (and the ``"error"`` spelling, with ``message`` an object or a plain string);
* OData Atom/XML: ``<error xmlns="...dataservices/metadata"><code/><message/></error>``;
* storage XML: ``<Error><Code/><Message/></Error>`` (authentication, SAS, version
  and other front-end errors, sent as XML whatever format was asked for);
* empty bodies and anything else (HTML stack traces, proxies' pages): no code and
  a short plain-text excerpt, never an exception.

The body is sniffed by its first character; the Content-Type is only a hint for
bodies that do not start like JSON or XML. The ``\\nRequestId:...\\nTime:...``
trailer the service appends is removed; everything before it, including a batch
error's ``"N:"`` operation-index prefix, is kept. Storage XML's
``AuthenticationErrorDetail`` is deliberately not read: it echoes the request's
signature.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .._core._redaction import SecretPattern, redact_marked, scrub, shorten
from .._core._patterns import pattern_on_first_use

__all__ = ["parse_error_body", "strip_trailer", "body_excerpt", "MAX_TEXT_EXCERPT", "MAX_DECODE_EXCERPT"]

#: Longest excerpt of an unrecognised body kept as the message.
MAX_TEXT_EXCERPT = 300

#: Longest excerpt of a success body that could not be decoded.
MAX_DECODE_EXCERPT = 120


_trailer = pattern_on_first_use(r"\s*\r?\nRequestId:.*\Z", re.DOTALL)
_tag = pattern_on_first_use(rb"<[^>]*>")
_space = pattern_on_first_use(r"\s+")


def strip_trailer(message: str) -> str:
    """``message`` without the service's ``RequestId:``/``Time:`` trailer and outer whitespace."""
    return _trailer().sub("", message).strip()


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _from_json(body: bytes) -> tuple[str | None, str] | None:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    error = data.get("odata.error", data.get("error"))
    if not isinstance(error, dict):
        return None
    message = error.get("message")
    if isinstance(message, dict):
        message = message.get("value")
    return (_text(error.get("code")) or None, strip_trailer(_text(message)))


def _from_xml(body: bytes) -> tuple[str | None, str] | None:
    from .atom import parse_xml

    try:
        root = parse_xml(body)
    except ValueError:
        return None
    if not isinstance(root.tag, str) or root.tag.rpartition("}")[2].lower() != "error":
        return None
    code: str | None = None
    message = ""
    for child in root:
        if not isinstance(child.tag, str):
            continue
        local = child.tag.rpartition("}")[2].lower()
        if local == "code" and code is None:
            code = (child.text or "").strip() or None
        elif local == "message" and not message:
            message = strip_trailer(child.text or "")
    return (code, message)


def _excerpt(body: bytes, limit: int = MAX_TEXT_EXCERPT, secrets: SecretPattern | None = None) -> str:
    text = _tag().sub(b" ", body[: limit * 20]).decode("utf-8", errors="replace")
    text = _space().sub(" ", text).strip()
    # A body may echo the request's URL or headers: never quote a SAS signature or a credential.
    # Before cutting, and the cut at a space: a secret the cut would split leaves no prefix behind.
    return shorten(scrub(text, secrets), limit)


def body_excerpt(body: bytes | str, secrets: SecretPattern | None = None) -> str:
    """A short, markup-free, single-line excerpt of ``body`` with SAS signatures and credentials removed.

    ``secrets`` (the attempt's, :func:`~tablesdk._core._redaction.attempt_secrets`) are removed
    wherever they are, not only after ``sig=`` or ``Bearer``: a server may echo them bare."""
    try:
        raw = body.encode("utf-8", errors="replace") if isinstance(body, str) else bytes(body)
        return _excerpt(raw.lstrip(), MAX_DECODE_EXCERPT, secrets)
    except Exception:  # noqa: BLE001 - describing a bad body must not fail
        return ""


def parse_error_body(
    body: bytes, content_type: str | None = None, secrets: SecretPattern | None = None
) -> tuple[str | None, str]:
    """(error code or None, message) from an error response body; never raises.

    An empty body gives ``(None, "")``; an unrecognised one ``(None, excerpt)``
    where the excerpt is the body's text without markup, at most
    :data:`MAX_TEXT_EXCERPT` characters, from which ``secrets`` (the attempt's) are
    removed before it is cut.
    """
    try:
        if isinstance(body, str):
            body = body.encode("utf-8", errors="replace")
        elif not isinstance(body, bytes):
            body = bytes(body or b"")
        stripped = body.lstrip(b" \t\r\n")
        if stripped.startswith(b"\xef\xbb\xbf"):
            stripped = stripped[3:].lstrip(b" \t\r\n")
        if not stripped:
            return (None, "")
        hint = (content_type or "").lower()
        first = stripped[:1]
        result: tuple[str | None, str] | None = None
        if first == b"{":
            result = _from_json(stripped)
        elif first == b"<":
            result = _from_xml(stripped)
        elif "json" in hint:
            result = _from_json(stripped)
        elif "xml" in hint:
            result = _from_xml(stripped)
        if result is not None:
            # The code and message are the server's words: they may echo the request's URL or headers.
            # (The attempt's secrets leave them with the rest of the error: nothing here cuts them.)
            code, message = result
            return (redact_marked(code) if code else code, redact_marked(message))
        return (None, _excerpt(stripped, secrets=secrets))
    except Exception:  # noqa: BLE001 - an error parser must not mask the error it describes
        return (None, "")
