"""The JSON payload format (OData v3 "JSON light"), for service versions 2013-08-15 and later.

Entity bodies are flat objects: ``{"PartitionKey": "p", "RowKey": "r", "Views":
"5", "Views@odata.type": "Edm.Int64"}``. A value whose JSON form does not
identify its EDM type (Int64 and DateTime, Guid, Binary as strings; doubles,
which would read back as Int32 when whole) carries an ``Name@odata.type``
annotation; strings, booleans and Int32 travel bare.

Responses come in three metadata levels:

* ``minimalmetadata`` (the default): ``odata.metadata``, ``odata.etag`` and the
  annotations above; un-annotated values are typed by their JSON kind.
* ``fullmetadata``: adds ``odata.type``, ``odata.id``, ``odata.editLink`` and
  ``Timestamp@odata.type``; handled like minimalmetadata.
* ``nometadata``: plain values only. Types are then unknown and are left out of
  :attr:`EntityPayload.types` (the values stay as JSON gave them), so the entity
  layer reads them as the entity class declares. Annotations, if any arrive,
  still apply.

``Timestamp`` is always read as an Edm.DateTime. Request bodies are UTF-8 with
non-ASCII characters written as themselves (smaller than ``\\uXXXX`` escapes,
which matters against the 4 MiB batch limit); a lone surrogate, which UTF-8
cannot encode, raises :class:`~tablesdk.errors.TableValidationError`.
"""

from __future__ import annotations

import json
from typing import Any

from ..edm import (
    INT32_MAX,
    INT32_MIN,
    EdmType,
    EntityPayload,
    from_json_value,
    infer_edm_type,
    parse_datetime,
    to_json_value,
)
from ..errors import TableValidationError
from . import PayloadFormat

__all__ = ["JsonFormat", "METADATA_LEVELS"]

METADATA_LEVELS = ("nometadata", "minimalmetadata", "fullmetadata")

_ANNOTATION = "@odata.type"
_ANNOTATION_LEN = len(_ANNOTATION)
_TYPES_BY_NAME: dict[str, EdmType] = {t.value: t for t in EdmType}
_STRING, _INT32, _INT64 = EdmType.STRING, EdmType.INT32, EdmType.INT64
_DATETIME = EdmType.DATETIME
#: EDM type of an un-annotated JSON value, by its Python type (int is range-checked).
_PLAIN_TYPES: dict[type, EdmType] = {
    str: EdmType.STRING, bool: EdmType.BOOLEAN, int: EdmType.INT32, float: EdmType.DOUBLE,
}
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _load(body: bytes | str) -> Any:
    if not body:
        raise ValueError("empty JSON body")
    try:
        return json.loads(body)
    except UnicodeDecodeError as exc:
        raise ValueError(f"JSON body is not valid Unicode: {exc}") from None


class JsonFormat(PayloadFormat):
    """JSON bodies (``application/json``), at one OData metadata level.

    ``metadata`` is ``"minimalmetadata"`` (default), ``"nometadata"`` or
    ``"fullmetadata"``; it sets the Accept header and how un-annotated values
    are typed when read.
    """

    name = "json"
    default_api_version = "2019-02-02"
    content_type = "application/json"

    def __init__(self, metadata: str = "minimalmetadata") -> None:
        if metadata not in METADATA_LEVELS:
            raise ValueError(f"metadata must be one of {METADATA_LEVELS}, not {metadata!r}")
        self.metadata = metadata
        self._typed = metadata != "nometadata"

    def __repr__(self) -> str:
        return f"JsonFormat(metadata={self.metadata!r})"

    def request_headers(self) -> dict[str, str]:
        """Accept JSON at this metadata level; OData 3.0."""
        return {
            "Accept": f"application/json;odata={self.metadata}",
            "DataServiceVersion": "3.0;NetFx",
            "MaxDataServiceVersion": "3.0;NetFx",
        }

    # ------------------------------------------------------------ writing

    def serialize_entity(self, payload: EntityPayload) -> bytes:
        """A flat JSON object of every property except Timestamp, annotated where needed.

        Nulls are JSON ``null`` without an annotation (the service drops them).
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
                if type(value) is not str and not isinstance(value, str):
                    raise TableValidationError(name, "Edm.String needs a str", f"got {type(value).__name__}")
                body[name] = value
                continue
            wire, annotate = to_json_value(value, edm_type)
            body[name] = wire
            if annotate:
                body[name + _ANNOTATION] = edm_type.value
        return _encode(body)

    def serialize_table(self, table_name: str) -> bytes:
        """The Create Table body: ``{"TableName": "..."}``."""
        return _encode({"TableName": table_name})

    # ------------------------------------------------------------ reading

    def _payload(self, obj: Any, etag: str | None) -> EntityPayload:
        if type(obj) is not dict:
            raise ValueError(f"expected a JSON object for an entity, got {type(obj).__name__}")
        values: dict[str, Any] = {}
        types: dict[str, EdmType] = {}
        annotations: list[tuple[str, Any]] | None = None
        typed = self._typed
        plain_types = _PLAIN_TYPES
        for key, value in obj.items():
            if "." in key:  # odata.* control information or a Name@odata.type annotation
                if key == "odata.etag":
                    etag = value
                elif key.endswith(_ANNOTATION):
                    if annotations is None:
                        annotations = []
                    annotations.append((key[:-_ANNOTATION_LEN], value))
                continue
            values[key] = value
            if value is None:
                continue
            edm_type = plain_types.get(type(value))
            if edm_type is None:
                raise ValueError(f"property {key!r}: unsupported JSON value of type {type(value).__name__}")
            if typed:
                if edm_type is _INT32 and not INT32_MIN <= value <= INT32_MAX:
                    edm_type = _INT64
                types[key] = edm_type
        if annotations is not None:
            for name, type_name in annotations:
                if name not in values:
                    continue  # an annotation without its property carries nothing
                edm_type = _TYPES_BY_NAME.get(type_name) if type(type_name) is str else None
                if edm_type is None:
                    raise ValueError(f"property {name!r}: unknown EDM type {type_name!r}")
                types[name] = edm_type
                value = values[name]
                if value is not None and edm_type is not _STRING:
                    try:
                        values[name] = from_json_value(value, edm_type)
                    except (ValueError, TypeError) as exc:
                        raise ValueError(f"property {name!r}: not a valid {type_name} value: {value!r}") from exc
        if types.get("Timestamp") is not _DATETIME:
            timestamp = values.get("Timestamp")
            if type(timestamp) is str:
                try:
                    values["Timestamp"] = parse_datetime(timestamp)
                except ValueError as exc:
                    raise ValueError(f"property 'Timestamp': not a valid Edm.DateTime value: {timestamp!r}") from exc
                types["Timestamp"] = _DATETIME
        if not typed:  # nometadata: keys are strings whatever the level
            if "PartitionKey" in values:
                types["PartitionKey"] = _STRING
            if "RowKey" in values:
                types["RowKey"] = _STRING
        return EntityPayload(values, types, etag)

    def parse_entity(self, body: bytes, etag: str | None = None) -> EntityPayload:
        """The entity of a single-entity body (or of a ``value`` array of exactly one).

        ``odata.etag`` in the body wins over the ``etag`` header value passed in.
        """
        data = _load(body)
        if type(data) is dict and "value" in data and type(data["value"]) is list:
            items = data["value"]
            if len(items) != 1:
                raise ValueError(f"expected one entity in the response, found {len(items)}")
            data = items[0]
        return self._payload(data, etag)

    def parse_entities(self, body: bytes) -> list[EntityPayload]:
        """Every entity of a query response (``value`` array), or the one entity of a single object."""
        data = _load(body)
        if type(data) is not dict:
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        items = data.get("value")
        if items is None and "value" not in data:
            return [self._payload(data, None)]
        if type(items) is not list:
            raise ValueError("the 'value' member of a query response must be an array")
        payload = self._payload
        return [payload(item, None) for item in items]

    def parse_tables(self, body: bytes) -> list[str]:
        """Table names from a Query Tables ``value`` array or a Create Table object."""
        data = _load(body)
        if type(data) is not dict:
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        items = data["value"] if "value" in data else [data]
        if type(items) is not list:
            raise ValueError("the 'value' member of a Query Tables response must be an array")
        names: list[str] = []
        for item in items:
            name = item.get("TableName") if type(item) is dict else None
            if type(name) is not str:
                raise ValueError("table object without a string TableName")
            names.append(name)
        return names


def _encode(body: dict[str, Any]) -> bytes:
    text = _ENCODER.encode(body)
    try:
        return text.encode("utf-8")
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
