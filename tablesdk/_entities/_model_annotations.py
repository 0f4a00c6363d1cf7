"""What a model class declares: its fields and their annotations, read without the libraries.

The fields of a dataclass, pydantic v2 model, attrs class or TypedDict and their resolved
hints; which fields a constructor requires; the kind of class a nested field is
(:func:`nested_kind`); and what one annotation stores (:func:`field_plan`: EDM type, stored
name, conversion; :func:`chunk_plan`, :func:`encrypted_field`), with the markers ``StoredAs``
and ``Flatten``. This module also maps an annotation to an EDM type
(:func:`edm_type_of_annotation`), for declared entities and models alike.
:mod:`tablesdk._entities._models` builds each class's adapter from them.

Nothing here imports pydantic or attrs: a class is recognised by what those libraries put
on it (``model_fields``, ``__attrs_attrs__``).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import sys
import typing
from typing import Any

from ._edm import EdmType, Int64
from ._edm_specs import EDM_SPECS
from ._model_values import (
    AsJson,
    ByValue,
    ChunkPlan,
    Chunked,
    Converter,
    EncryptedMarker,
    date_converter,
    decimal_converter,
    enum_converter,
    json_converter,
    strip_optional as _strip_optional,
    timedelta_converter,
)

__all__ = [
    "Flatten",
    "StoredAs",
    "chunk_plan",
    "edm_type_of_annotation",
    "encrypted_field",
    "field_plan",
    "nested_kind",
]

SYSTEM_FIELDS = ("PartitionKey", "RowKey", "Timestamp")

#: The EDM type each plain class annotation declares (``Rating: int``).
_ANNOTATION_TYPES: dict[Any, EdmType] = {hint: t for t, spec in EDM_SPECS.items() for hint in spec.declared_by}


class StoredAs:
    """Store a field under another property name: ``Annotated[int, StoredAs("cpor")]``.

    PartitionKey, RowKey and Timestamp cannot be renamed, nor can a field be stored
    under those names.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StoredAs({self.name!r})"


def field_plan(owner: str, name: str, hint: Any) -> tuple[EdmType, str, Converter[Any] | None]:
    """(EDM type, stored name, converter or None) of a field annotated ``hint``; TypeError if unmappable.

    The markers of every ``Annotated`` layer count, an Optional between them too:
    ``Annotated[Json[list[int]] | None, StoredAs("x")]`` is a JSON field stored as ``x``.
    """
    stored = name
    converter: Converter[Any] | None = None
    explicit: EdmType | None = None
    by_value = False
    hint = _strip_optional(hint)  # Annotated[X, ...] | None
    while typing.get_origin(hint) is typing.Annotated:  # the outer layer wins, in a layer the last marker
        layer_stored: str | None = None
        layer_converter: Converter[Any] | None = None
        layer_type: EdmType | None = None
        for extra in hint.__metadata__:
            if isinstance(extra, EdmType):
                layer_type = extra
            elif isinstance(extra, StoredAs):
                layer_stored = extra.name
            elif isinstance(extra, Converter):
                layer_converter = extra
            elif extra is ByValue:
                by_value = True
            elif extra is AsJson:
                layer_converter = json_converter(owner, name, typing.get_args(hint)[0])
        stored = layer_stored if stored == name and layer_stored is not None else stored
        converter = converter or layer_converter
        explicit = explicit or layer_type
        hint = _strip_optional(typing.get_args(hint)[0])
    if stored != name and (name in SYSTEM_FIELDS or stored in SYSTEM_FIELDS or name == "etag"):
        raise TypeError(f"{owner}.{name}: PartitionKey, RowKey, Timestamp and etag cannot be stored under another name")
    if converter is not None:
        return converter.edm_type, stored, converter
    if explicit is not None:
        return explicit, stored, None
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            converter = enum_converter(owner, name, hint, by_value)
            return converter.edm_type, stored, converter
        # decimal is not imported by ``import tablesdk`` (start-up): a class annotated Decimal has imported it.
        decimal = sys.modules.get("decimal")
        if decimal is not None and issubclass(hint, decimal.Decimal):
            converter = decimal_converter(owner, name, decimal.Decimal)
            return converter.edm_type, stored, converter
        if hint is _dt.date:
            converter = date_converter(owner, name)
            return converter.edm_type, stored, converter
        if hint is _dt.timedelta:
            converter = timedelta_converter(owner, name)
            return converter.edm_type, stored, converter
    return edm_type_of_annotation(owner, name, hint), stored, None


def chunk_plan(owner: str, name: str, stored: str, hint: Any, edm_type: EdmType) -> ChunkPlan | None:
    """The split of a field annotated ``Annotated[str, Chunked]`` (or bytes, or a converter's text)
    stored as ``stored`` with EDM type ``edm_type``; None when no layer of ``hint`` says Chunked."""
    hint = _strip_optional(hint)
    while typing.get_origin(hint) is typing.Annotated:
        for extra in reversed(hint.__metadata__):
            if extra is Chunked:
                return ChunkPlan(owner, name, stored, edm_type, Chunked.MAX_PARTS)
            if isinstance(extra, Chunked):
                return ChunkPlan(owner, name, stored, edm_type, extra.parts)
        hint = _strip_optional(typing.get_args(hint)[0])
    return None


def encrypted_field(owner: str, name: str, hint: Any, chunk: ChunkPlan | None) -> bool:
    """Whether a field annotated ``hint`` is ``Encrypted[...]`` (in any ``Annotated`` layer); a TypeError
    when it is also ``Chunked`` (each part would be encrypted on its own and outgrow 64 KiB)."""
    hint = _strip_optional(hint)
    while typing.get_origin(hint) is typing.Annotated:
        if any(extra is EncryptedMarker for extra in hint.__metadata__):
            if chunk is not None:
                raise TypeError(f"{owner}.{name}: a field cannot be both Encrypted and Chunked")
            return True
        hint = _strip_optional(typing.get_args(hint)[0])
    return False


def edm_type_of_annotation(owner: str, name: str, hint: Any) -> EdmType:
    """The EDM type a property annotated ``hint`` declares (``Annotated[..., EdmType.X]`` wins)."""
    hint = _strip_optional(hint)
    while typing.get_origin(hint) is typing.Annotated:
        for extra in reversed(hint.__metadata__):
            if isinstance(extra, EdmType):
                return extra
        hint = _strip_optional(typing.get_args(hint)[0])
    if hint in _ANNOTATION_TYPES:
        return _ANNOTATION_TYPES[hint]
    raise TypeError(
        f"{owner}.{name}: cannot map annotation {hint!r} to an EDM type; use str, int, "
        "Int64, float, bool, datetime, uuid.UUID, bytes, date, timedelta, Decimal, an Enum, a dataclass, pydantic model, "
        "attrs class or TypedDict (flattened), Json[...] for lists, dicts and sets, or Annotated[..., EdmType.X]"
    )


class Flatten:
    """``Annotated[Address, Flatten("__")]``: the delimiter between the names of a nested
    object's field and its own fields (default ``_``: ``Shipping_Street``)."""

    __slots__ = ("delimiter",)

    def __init__(self, delimiter: str = "_") -> None:
        self.delimiter = delimiter


def _nested_kind(hint: Any) -> str | None:
    """The kind of class ``hint`` is when a field of it is flattened (None: a plain value)."""
    if not isinstance(hint, type):
        return None
    if typing.is_typeddict(hint):
        return "typeddict"
    if dataclasses.is_dataclass(hint):
        return "dataclass"
    if _is_pydantic(hint):
        return "pydantic"
    if hasattr(hint, "__attrs_attrs__"):
        return "attrs"
    return None


def _class_fields(cls: type, kind: str) -> list[str]:
    if kind == "dataclass":
        return [f.name for f in dataclasses.fields(cls)]
    if kind == "pydantic":
        return list(cls.__pydantic_fields__)  # type: ignore[attr-defined]
    if kind == "attrs":
        return [a.name for a in cls.__attrs_attrs__]  # type: ignore[attr-defined]
    return list(typing.get_type_hints(cls))


def _hints(cls: type) -> dict[str, Any]:
    module = sys.modules.get(cls.__module__)
    namespace = {"Int64": Int64, **(vars(module) if module else {})}
    try:
        # The module's names first: a field named as its type (Status: Status = Status.OPEN) must
        # not see its own default; a name only the class defines falls back to the class's namespace.
        try:
            return typing.get_type_hints(cls, globalns=namespace, localns=namespace, include_extras=True)
        except NameError:
            return typing.get_type_hints(cls, globalns=namespace, include_extras=True)
    except Exception as exc:
        raise TypeError(
            f"{cls.__name__}: cannot resolve its annotations ({exc}); define the class at module level "
            "or import the types there"
        ) from exc


def _unwrap(hint: Any) -> tuple[Any, bool, list[Any]]:
    """(the class under the ``Annotated`` and Optional layers of ``hint``, whether one admits None,
    the markers of the layers, the outer layer's first)."""
    markers: list[Any] = []
    optional = False
    while True:
        inner = _strip_optional(hint)
        optional = optional or inner is not hint
        if typing.get_origin(inner) is not typing.Annotated:
            return inner, optional, markers
        markers.extend(reversed(inner.__metadata__))  # in a layer the last marker wins
        hint = typing.get_args(inner)[0]


def _required_fields(cls: type, kind: str) -> frozenset[str]:
    if kind == "dataclass":
        return frozenset(
            f.name for f in dataclasses.fields(cls)
            if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
    if kind == "attrs":
        nothing = _attrs_nothing(cls)
        return frozenset(a.name for a in cls.__attrs_attrs__ if a.default is nothing)  # type: ignore[attr-defined]
    if kind == "typeddict":
        # A required key the service has no value for was None; a NotRequired one is left out.
        return frozenset(getattr(cls, "__required_keys__", ()))
    # pydantic: model_construct fills what is not given with the defaults, and leaves a required field unset
    return frozenset(name for name, info in cls.__pydantic_fields__.items() if info.is_required())  # type: ignore[attr-defined]


def _attrs_nothing(cls: type) -> Any:
    attrs = sys.modules.get("attr") or sys.modules.get("attrs")
    return getattr(attrs, "NOTHING", None)


def _is_pydantic(cls: type) -> bool:
    return isinstance(getattr(cls, "__pydantic_fields__", None), dict) and hasattr(cls, "model_construct")


def nested_kind(hint: Any) -> str | None:
    """The kind of the class under the Optional and ``Annotated`` layers of ``hint`` when a field
    of it is flattened ("dataclass", "pydantic", "attrs", "typeddict"; None: a plain value)."""
    return _nested_kind(_unwrap(hint)[0])
