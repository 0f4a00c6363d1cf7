"""JSON bodies out: the general writer and the per-shape templates of entity bodies.

Split from :mod:`tablesdk._formats.json` (the codec), which writes every body through
these; the values are written as the EDM type table says (``_edm_specs``).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from itertools import chain, compress
from math import isfinite as _isfinite
from typing import Any

from .._entities._edm import (
    EdmType,
    EntityPayload,
    ShapeMemo,
    ValueShape,
    infer_edm_type,
    to_json_value,
    value_shape,
)
from .._entities._edm_specs import EDM_SPECS
from .._core._errors import TableValidationError

_ANNOTATION = "@odata.type"
_STRING, _DOUBLE = EdmType.STRING, EdmType.DOUBLE

#: The JSON value of each type that travels with an ``@odata.type`` annotation (the general
#: body looks its writer up once per property instead of testing type by type), and the
#: types written bare (each is its own value: an equal str is not an EdmType).
_WRITERS: dict[EdmType, Callable[[Any], Any]] = {t: spec.to_json for t, spec in EDM_SPECS.items() if spec.json_annotated}
_BARE: dict[EdmType, EdmType] = {t: t for t, spec in EDM_SPECS.items() if not spec.json_annotated}

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_ASCII_ENCODER = json.JSONEncoder(ensure_ascii=True, allow_nan=False, separators=(",", ":"))

_C_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
if _C_MAKE_ENCODER is not None:
    # One C encoder for every body, configured as _ENCODER (JSONEncoder.encode builds a new
    # one per call): no circular-reference markers, since a body is a flat object of scalars.
    _C_ENCODE = _C_MAKE_ENCODER(
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )

    def _encode_text(body: dict[str, Any]) -> str:
        return "".join(_C_ENCODE(body, 0))

else:  # pragma: no cover - CPython always has the C encoder

    def _encode_text(body: dict[str, Any]) -> str:
        return _ENCODER.encode(body)
#: Bodies larger than this are sent ASCII-only (``\\uXXXX`` escapes): Azurite decodes a
#: request body in 64 KiB chunks, and a multi-byte character split between two chunks
#: is stored as replacement characters (observed with 16,383 emoji: 65,532 bytes).
MAX_RAW_UTF8_BODY = 64 * 1024


#: Property name -> (its JSON key text, its annotation's key text); bounded, names repeat across a table.
_KEY_TEXTS: dict[str, tuple[str, str]] = {}
_MAX_KEY_TEXTS = 4096
_QUOTE = json.encoder.encode_basestring  # the C encoder's own string writer (ensure_ascii=False)
_CALL: Callable[[Callable[[Any], str], Any], str] = getattr(operator, "call", lambda write, value: write(value))


def _key_texts(name: str) -> tuple[str, str] | None:
    """The key texts of ``name``; None for Timestamp (never written) and names holding '@' (left to the encoder)."""
    if name == "Timestamp" or "@" in name:
        return None
    texts = (_QUOTE(name) + ":", _QUOTE(name + _ANNOTATION) + ":")
    if len(_KEY_TEXTS) < _MAX_KEY_TEXTS:
        _KEY_TEXTS[name] = texts
    return texts


class _Template:
    """How the body of every payload of one shape is written: ``text % (one text per value)``.

    ``writers`` turn each value into what the C encoder writes for it in :func:`_body`;
    ``doubles`` marks the Double values, which must be finite (``NaN`` and the infinities
    are written as strings: the general path does that).
    """

    __slots__ = ("doubles", "text", "writers")

    def __init__(self, text: str, writers: tuple[Callable[[Any], str], ...], doubles: list[bool] | None) -> None:
        self.text = text
        self.writers = writers
        self.doubles = doubles


_NULL_TEXT: Callable[[Any], str] = {None: "null"}.__getitem__
_NO_TEXT: Callable[[Any], str] = "".format  # str.format ignores the arguments its text has no field for




def _writer(name: str, kind: type, edm_type: EdmType | None) -> tuple[str, Callable[[Any], str]] | None:
    """The template text and writer of one property (the text has one ``%s`` for the value), or
    None when its value is not written by a template."""
    texts = _KEY_TEXTS.get(name) or _key_texts(name) if type(name) is str else None
    if texts is None:
        return None
    key = texts[0].replace("%", "%%")
    if kind is type(None):
        return key + "%s", _NULL_TEXT
    if type(edm_type) is not EdmType:  # None (inferred by the general path) or a foreign text
        return None
    assert isinstance(edm_type, EdmType)
    spec = EDM_SPECS[edm_type]
    found = spec.json_template(kind)
    if found is None:
        return None
    value_text, write = found
    if not spec.json_annotated:
        return key + value_text, write
    annotation = texts[1].replace("%", "%%") + _QUOTE(edm_type.value)
    return f"{key}{value_text},{annotation}", write


def _make_template(shape: ValueShape) -> _Template | None:
    parts: list[str] = []
    writers: list[Callable[[Any], str]] = []
    skipped = ""  # a "%s" for each Timestamp (never written) met since the last part: no text, no comma
    for name, kind, edm_type in zip(*shape):
        if name == "Timestamp":
            skipped += "%s"
            writers.append(_NO_TEXT)
            continue
        written = _writer(name, kind, edm_type)
        if written is None:
            return None
        parts.append(skipped + written[0])
        skipped = ""
        writers.append(written[1])
    if skipped:
        parts.append(parts.pop() + skipped if parts else skipped)
    doubles = [edm_type is _DOUBLE and kind is float for kind, edm_type in zip(shape[1], shape[2])]
    return _Template("{" + ",".join(parts) + "}", tuple(writers), doubles if any(doubles) else None)


#: The body template of each payload shape met (None: the general encoder writes it).
_TEMPLATES: ShapeMemo[ValueShape, _Template | None] = ShapeMemo(_make_template, 1024)


def _template_text(payload: EntityPayload) -> str | None:
    """:func:`_encode_text` of :func:`_body`, written through the template of the payload's shape;
    None when there is none or a value needs the general path (a NaN or infinite double)."""
    values = payload.values
    template = _TEMPLATES[value_shape(values, payload.types)]
    if template is None:
        return None
    if template.doubles is not None and not all(map(_isfinite, compress(values.values(), template.doubles))):
        return None
    return template.text % tuple(map(_CALL, template.writers, values.values()))


def _page_text(payloads: list[EntityPayload]) -> str | None:
    """The bodies of a page whose entities all have one shape, one per line (no last newline),
    written column by column; None when they do not, or a value needs the general path.

    A query page usually has one shape throughout: checked as in the JSON codec's column
    reader (one flat comparison of every key, and of every value's class, with the first
    entity's), each property is then written for the whole page in one ``map`` and each line
    is one ``%`` of the shape's template: the same text as :func:`_template_text` per entity,
    without a shape and a writer call's Python frame per entity.
    """
    count = len(payloads)
    first = payloads[0]
    values = [payload.values for payload in payloads]
    names, kinds = tuple(first.values), tuple(map(type, first.values.values()))
    if (
        list(chain.from_iterable(values)) != list(names) * count
        or list(map(type, chain.from_iterable(map(dict.values, values)))) != list(kinds) * count
    ):
        return None
    types = first.types
    if [payload.types for payload in payloads].count(types) != count:  # the decoder shares one dict
        return None
    template = _TEMPLATES[(names, kinds, tuple(map(types.get, names)))]
    if template is None:
        return None
    columns = [list(map(operator.itemgetter(name), values)) for name in names]
    if template.doubles is not None and not all(
        all(map(_isfinite, column)) for column in compress(columns, template.doubles)
    ):
        return None
    written = [list(map(write, column)) for write, column in zip(template.writers, columns)]
    text = template.text
    return "\n".join([text % row for row in zip(*written)])


def _body(payload: EntityPayload) -> dict[str, Any]:
    """The JSON object of an entity (every property but Timestamp), before encoding.

    Nulls are ``null`` without an annotation (the service drops them).
    """
    types = payload.types
    body: dict[str, Any] = {}
    for name, value in payload.values.items():
        if name == "Timestamp":
            continue
        if value is None:
            body[name] = None
            continue
        edm_type = types.get(name)
        if edm_type is None:
            edm_type = infer_edm_type(value, name)
        if edm_type is _STRING:
            if not isinstance(value, str):
                raise TableValidationError(name, "Edm.String needs a str", f"got {type(value).__name__}")
            body[name] = value
            continue
        if _BARE.get(edm_type) is edm_type:  # Int32, Boolean: bare, as to_json_value gives them
            body[name] = value
            continue
        writer = _WRITERS.get(edm_type)
        if writer is None:
            wire, annotate = to_json_value(value, edm_type)  # raises for an unknown type
        else:
            wire, annotate = writer(value), True
        body[name] = wire
        if annotate:
            body[name + _ANNOTATION] = edm_type  # a str: the encoder writes its text
    return body


def _encode(body: dict[str, Any]) -> bytes:
    text = _encode_text(body)
    # U+2028/U+2029 are valid raw in JSON but are line terminators to JavaScript, and a
    # JavaScript-based service (Azurite) splits batch bodies on them: always escape them,
    # as Microsoft's own clients do. isascii() answers in constant time for most bodies.
    if not text.isascii():
        text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        for name, value in body.items():
            if isinstance(value, str):
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise TableValidationError(
                        name, "strings must be valid Unicode (a lone surrogate cannot be sent)",
                        f"found {value[exc.start]!r} at index {exc.start}",
                    ) from None
        raise  # pragma: no cover - a property name with a lone surrogate
    if len(data) > MAX_RAW_UTF8_BODY and not text.isascii():
        return _ASCII_ENCODER.encode(body).encode("ascii")
    return data
