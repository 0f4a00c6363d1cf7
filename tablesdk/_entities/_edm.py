"""EDM property types and the conversions between Python values and wire text.

Every conversion between a Python value and its wire form goes through here, for
the AtomPub text form, the JSON form and the ``$filter`` literal form, so that the
codecs and the query builder agree on each type. What each type does is one entry
of the table in :mod:`tablesdk._entities._edm_specs`; the names it builds on (:class:`EdmType`,
the limits, :class:`EdmDateTime` and the DateTime text) live in
:mod:`tablesdk._entities._edm_base`. This module is where the rest of the SDK imports them from.

Python types by EDM type::

    Edm.String    str                 Edm.Boolean   bool
    Edm.Int32     int                 Edm.DateTime  datetime (aware, UTC)
    Edm.Int64     int                 Edm.Guid      uuid.UUID
    Edm.Double    float               Edm.Binary    bytes

Naive datetimes are taken to be UTC, everywhere (entities and filters): the
service stores UTC only, and guessing the machine's local zone would make the
same code store different instants on different machines. Values read back are
always aware ``datetime``s in UTC.

Edm.DateTime carries 100-nanosecond ticks (7 fractional digits) while Python
keeps microseconds. Values read from the service are :class:`EdmDateTime`
instances that remember the seventh digit, so writing back an unchanged value
sends exactly what was read (no drift on round trip).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from ._edm_base import (
    DATETIME_MAX as DATETIME_MAX,
    DATETIME_MIN as DATETIME_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_ENTITY_BYTES as MAX_ENTITY_BYTES,
    MAX_KEY_BYTES as MAX_KEY_BYTES,
    MAX_PROPERTY_BYTES as MAX_PROPERTY_BYTES,
    EdmDateTime as EdmDateTime,
    EdmType,
    Int64 as Int64,
    _parse_datetime_slow as _parse_datetime_slow,
    _read_service_form_py310 as _read_service_form_py310,
    _rebuild_edm_datetime as _rebuild_edm_datetime,  # pickles made before the split name it here
    b64decode_strict as b64decode_strict,
    check_text as check_text,
    format_datetime as format_datetime,
    guid_from_wire as guid_from_wire,
    int32_from_wire as int32_from_wire,
    int64_from_wire as int64_from_wire,
    parse_datetime as parse_datetime,
)
from ._edm_specs import EDM_SPECS, EdmTypeSpec
from .._core._errors import TableValidationError

__all__ = [
    "EdmType",
    "EntityPayload",
    "EntityPage",
    "EntityProperty",
    "EdmDateTime",
    "Int64",
    "INT32_MIN",
    "INT32_MAX",
    "INT64_MIN",
    "INT64_MAX",
    "MAX_PROPERTY_BYTES",
    "MAX_ENTITY_BYTES",
    "MAX_KEY_BYTES",
    "infer_edm_type",
    "check_value",
    "check_text",
    "format_datetime",
    "parse_datetime",
    "to_atom_text",
    "from_atom_text",
    "to_json_value",
    "from_json_value",
    "to_filter_literal",
]



#: What a write plan or JSON template is chosen by: the property names in order, their values'
#: classes and their remembered EDM types (None where none is remembered).
ValueShape = tuple[tuple[str, ...], tuple[type, ...], tuple["EdmType | None", ...]]


def value_shape(values: dict[str, Any], types: dict[str, EdmType]) -> ValueShape:
    """The :data:`ValueShape` of ``values`` with the remembered ``types`` (three C passes)."""
    return (tuple(values), tuple(map(type, values.values())), tuple(map(types.get, values)))


_K = TypeVar("_K")
_V = TypeVar("_V")


class ShapeMemo(dict[_K, _V]):
    """``memo[key]`` is ``make(key)``, remembered while the memo holds fewer than ``limit``.

    A hit is a plain dict lookup; ``make`` runs only on a miss. The bound keeps a
    table of ever-new shapes from growing the memo without end (those are made afresh).
    """

    __slots__ = ("_make", "_limit")

    def __init__(self, make: Callable[[_K], _V], limit: int) -> None:
        super().__init__()
        self._make = make
        self._limit = limit

    def __missing__(self, key: _K) -> _V:
        value = self._make(key)
        if len(self) < self._limit:
            self[key] = value
        return value


@dataclass(frozen=True)
class EntityProperty:
    """A value with an explicit EDM type, e.g. ``EntityProperty(5, EdmType.INT64)``.

    The value is checked against the type when the property is created.
    """

    value: Any
    edm_type: EdmType

    def __post_init__(self) -> None:
        if not isinstance(self.edm_type, EdmType):
            raise TypeError(f"EntityProperty type must be an EdmType, not {self.edm_type!r}")
        if self.value is not None:
            check_value("value", self.value, self.edm_type)


@dataclass
class EntityPayload:
    """An entity as the codecs see it: no classes, only values and their EDM types.

    ``values`` holds every property including ``PartitionKey``, ``RowKey`` and,
    when read, ``Timestamp``; a None value is a null. ``types`` holds the EDM
    type of each property whose type is known: all of them when writing; when
    reading, those the wire stated or implied (JSON ``nometadata`` states none).
    """

    values: dict[str, Any]
    types: dict[str, EdmType]
    etag: str | None = None


class EntityPage:
    """The entities of one query response, decoded together.

    Entity ``i`` is what ``EntityPayload(values[i], types[i], etags[i])`` holds.
    A codec that decodes a page column by column shares one ``types`` dict
    between the entities that have the same types: read those dicts, never
    change them (:meth:`payloads` gives each payload its own copy).
    """

    __slots__ = ("values", "types", "etags", "_payloads")

    def __init__(
        self, values: list[dict[str, Any]], types: list[dict[str, EdmType]], etags: list[str | None]
    ) -> None:
        self.values = values
        self.types = types
        self.etags = etags
        self._payloads: list[EntityPayload] | None = None

    @classmethod
    def of(cls, payloads: list[EntityPayload]) -> EntityPage:
        """The page of these payloads (which :meth:`payloads` gives back as they are)."""
        page = cls([p.values for p in payloads], [p.types for p in payloads], [p.etag for p in payloads])
        page._payloads = payloads
        return page

    def __len__(self) -> int:
        return len(self.values)

    def payloads(self) -> list[EntityPayload]:
        """The page as payloads, each with its own ``types`` dict."""
        if self._payloads is None:
            self._payloads = list(map(EntityPayload, self.values, map(dict.copy, self.types), self.etags))
        return self._payloads

    def read_only_payloads(self) -> list[EntityPayload]:
        """The page as payloads that share the decoder's ``types`` dicts: for a reader that never
        changes them (the export writes each page and drops it), without a copy per entity."""
        if self._payloads is not None:
            return self._payloads
        return list(map(EntityPayload, self.values, self.types, self.etags))


#: EDM type of a value of exactly each class no other type claims (an int: while it fits Int32).
_SENT_AS: dict[type, EdmType] = {cls: spec.edm_type for spec in EDM_SPECS.values() for cls in spec.sent_from}
#: ``(classes, type)`` in table order, for a value of a subclass (a str enum, a pandas Timestamp).
_SENT_AS_SUBCLASS = tuple((spec.sent_from, spec.edm_type) for spec in EDM_SPECS.values() if spec.sent_from)
_SENDABLE = ", ".join(dict.fromkeys(spec.python_name for spec in EDM_SPECS.values()))
_INT32, _INT64 = EdmType.INT32, EdmType.INT64


def infer_edm_type(value: Any, name: str = "value") -> EdmType:
    """The EDM type a plain Python value is sent as.

    ``int`` is Int32 when it fits and Int64 otherwise; use ``EntityProperty`` or
    the ``Int64`` annotation to send a small number as Int64.
    """
    edm_type = _SENT_AS.get(type(value))
    if edm_type is None:
        if isinstance(value, EntityProperty):
            return value.edm_type
        for classes, sent_as in _SENT_AS_SUBCLASS:
            if isinstance(value, classes):
                edm_type = sent_as
                break
        else:
            raise TableValidationError(
                name, f"property values must be {_SENDABLE} or EntityProperty", f"got {type(value).__name__}"
            )
    if edm_type is _INT32 and not INT32_MIN <= value <= INT32_MAX:
        if INT64_MIN <= value <= INT64_MAX:
            return _INT64
        raise TableValidationError(name, f"integers must fit in Edm.Int64 [{INT64_MIN}, {INT64_MAX}]", f"got {value}")
    return edm_type


_EDM_TYPE = EdmType


def _spec(edm_type: Any) -> EdmTypeSpec:
    """The spec of ``edm_type``; TypeError for anything not an :class:`EdmType` (an equal str included)."""
    spec = EDM_SPECS.get(edm_type) if type(edm_type) is _EDM_TYPE else None
    if spec is None:
        raise TypeError(f"unknown EDM type {edm_type!r}")
    return spec


def check_value(name: str, value: Any, edm_type: EdmType) -> None:
    """Raise :class:`TableValidationError` when ``value`` cannot be sent as ``edm_type``."""
    spec = EDM_SPECS.get(edm_type) if type(edm_type) is _EDM_TYPE else None
    if spec is not None:  # anything else has no limits to check (the codecs refuse it)
        spec.check(name, value)


def to_atom_text(value: Any, edm_type: EdmType) -> str:
    """The text content of a ``<d:Name m:type=...>`` element for ``value``."""
    return _spec(edm_type).to_atom(value)


def from_atom_text(text: str, edm_type: EdmType) -> Any:
    """Parse the text of an Atom property element of type ``edm_type``."""
    return _spec(edm_type).from_atom(text)


def to_json_value(value: Any, edm_type: EdmType) -> tuple[Any, bool]:
    """The JSON value for ``value`` and whether it needs an ``@odata.type`` annotation.

    Int64 travels as a string; doubles always carry the annotation, because a
    whole double such as ``1.0`` would otherwise come back as Int32, and
    non-finite doubles travel as ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.
    """
    spec = _spec(edm_type)
    return spec.to_json(value), spec.json_annotated


def from_json_value(value: Any, edm_type: EdmType) -> Any:
    """Convert a JSON value known to be of ``edm_type`` into its Python value."""
    return _spec(edm_type).from_json(value)


def to_filter_literal(value: Any, edm_type: EdmType, name: str = "value") -> str:
    """The OData ``$filter`` literal for ``value`` as ``edm_type``.

    Strings double their single quotes; Int64 carries the ``L`` suffix; doubles
    are written in positional notation (never an exponent) with a decimal point,
    so the service reads them as Edm.Double; non-finite doubles cannot be
    expressed and raise.
    """
    check_value(name, value, edm_type)
    return _spec(edm_type).filter_literal(value, name)
