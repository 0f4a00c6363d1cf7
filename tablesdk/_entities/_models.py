"""Model adapters: standard dataclasses, pydantic v2 models and attrs classes as entities.

One :class:`ModelAdapter` per model class, made the first time the class is met and kept
(:func:`adapter_for`): its fields, the name each is stored under, the EDM type each is
written as, the conversion of each value beyond the EDM types (made by
:mod:`tablesdk._entities._model_values`), nested objects flattened (with the presence marker of an
Optional one, and the undeclared fields a TypedDict or a pydantic ``extra="allow"`` model
keeps), and how an instance is made and read. :mod:`tablesdk._entities._entity` checks and converts
through it, so a model class gets every rule a :class:`~tablesdk.TableEntity` gets.

Nothing here imports pydantic or attrs: a class is recognised by what those libraries put
on it (``model_fields``, ``__attrs_attrs__``), so only an application that defines such a
class needs the library.

What a class declares and what each annotation stores are read by
:mod:`tablesdk._entities._model_annotations`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ._edm import EdmType
from .._core._errors import TableValidationError
from ._model_annotations import (
    SYSTEM_FIELDS,
    Flatten,
    StoredAs,
    _class_fields,
    _hints,
    _nested_kind,
    _required_fields,
    _unwrap,
    chunk_plan,
    encrypted_field,
    field_plan,
)
from ._model_values import (
    AsJson,
    ByValue,
    ChunkPlan,
    Chunked,
    Converter,
    Encrypted,
    EncryptedMarker,
    Json,
    value_from_wire,
    value_to_wire,
)

__all__ = [
    "Chunked",
    "ChunkPlan",
    "Converter",
    "Encrypted",
    "ByValue",
    "ModelField",
    "ModelAdapter",
    "NestedPlan",
    "Json",
    "AsJson",
    "adapter_for",
]


class ModelField:
    """One stored property of a model class (a leaf), or one nested object flattened into several.

    ``name`` is the attribute, ``stored`` the property name (for a nested object, the prefix of
    its leaves, and the name of its presence marker), ``path`` the dotted attribute path named
    in messages (``Shipping.Address.Street``), ``steps`` the attributes (or, for a TypedDict,
    keys) from the entity down to the value, ``node`` the nested object's own fields (None for
    a leaf) and ``optional`` whether its annotation admits None.
    """

    __slots__ = ("name", "stored", "edm_type", "converter", "path", "steps", "node", "optional", "chunk", "encrypted")

    def __init__(
        self, name: str, stored: str, edm_type: EdmType, converter: Converter[Any] | None,
        path: str = "", steps: tuple[tuple[str, bool], ...] = (), node: _Node | None = None,
        optional: bool = True, chunk: ChunkPlan | None = None, encrypted: bool = False,
    ) -> None:
        self.name = name
        self.stored = stored
        self.edm_type = edm_type
        self.converter = converter
        self.path = path or name
        self.steps = steps or ((name, False),)
        self.node = node
        self.optional = optional
        #: How a Chunked leaf is split into properties (None: one property).
        self.chunk = chunk
        #: Whether the leaf is ``Encrypted[...]``: encrypted on the client.
        self.encrypted = encrypted

    def __repr__(self) -> str:
        return f"ModelField({self.path!r}, stored={self.stored!r}, {self.edm_type})"


_MISSING: Any = object()
#: (stored name, value as sent, declared EDM type or None for a dynamic property) of one property.
Sent = tuple[str, Any, "EdmType | None"]


class _Node:
    """One object of a (possibly nested) class: how to take its fields' values, and make it again.

    ``prefix`` is the stored name of its fields without their own names (``Shipping_``; '' for
    the entity), ``path`` its dotted path ('' for the entity), and ``extras`` whether it keeps
    fields its class does not declare (a TypedDict's other keys, a pydantic model's
    ``extra="allow"`` fields): they are stored as dynamic properties named ``prefix + key``.
    """

    __slots__ = ("cls", "kind", "fields", "make", "required", "prefix", "path", "steps", "extras", "owner", "declared")

    def __init__(
        self, cls: type, kind: str, fields: tuple[ModelField, ...], owner: str, prefix: str, path: str,
        steps: tuple[tuple[str, bool], ...] = (),
    ) -> None:
        self.cls = cls
        #: The attributes (or keys) from the entity down to this object, as ModelField.steps.
        self.steps = steps
        self.kind = kind
        self.fields = fields
        self.owner = owner
        self.prefix = prefix
        self.path = path
        self.make: Callable[..., Any] = cls.model_construct if kind == "pydantic" else (  # type: ignore[attr-defined]
            dict if kind == "typeddict" else cls
        )
        #: Fields the constructor needs (no default): given None when the service has no value.
        self.required = _required_fields(cls, kind)
        self.extras = kind == "typeddict" or (
            kind == "pydantic" and getattr(cls, "model_config", {}).get("extra") == "allow"
        )
        self.declared = frozenset(f.name for f in fields) | frozenset(("PartitionKey", "RowKey", "Timestamp", "etag"))

    # ------------------------------------------------------------ an object into properties

    def collect(self, obj: Any, out: list[Sent], adapter: ModelAdapter, strict: bool = True) -> None:
        """Append the properties of ``obj`` (an object of this node's class, never None) to ``out``.

        Not ``strict`` (comparing, diffing): what a write refuses is taken as it is, or as None."""
        mapping = self.kind == "typeddict"
        for f in self.fields:
            if mapping:
                value = obj.get(f.name)
            else:
                value = getattr(obj, f.name, _MISSING)
                if value is _MISSING:
                    _refuse(strict, _no_value(self.owner, f.path))
                    value = None
            node = f.node
            if node is None:
                if f.converter is not None and value is not None:
                    value = _converted(f, value, strict)
                if f.chunk is not None:
                    _append_parts(f, value, out, strict)
                else:
                    out.append((f.stored, value, f.edm_type))
                continue
            if value is None:
                if not f.optional and not (mapping and f.name not in obj):
                    _refuse(strict, TableValidationError(
                        f.path, f"{self.owner}.{f.path} is declared as {node.cls.__name__}, not Optional",
                        f"got None; annotate it {node.cls.__name__} | None to store None",
                    ))
                node.collect_nones(out)
                continue
            if not isinstance(value, Mapping if node.kind == "typeddict" else node.cls):
                _refuse(strict, TableValidationError(
                    f.path, f"{self.owner}.{f.path} is declared as {node.cls.__name__}", f"got {type(value).__name__}"
                ))
                node.collect_nones(out)
                continue
            start = len(out)
            node.collect(value, out, adapter, strict)
            if f.optional and all(sent[1] is None for sent in out[start:]):
                # Present, with nothing stored below it: the marker tells it from None.
                out.append((f.stored, True, EdmType.BOOLEAN))
        if self.extras:
            self._collect_extras(obj, out, adapter, strict)

    def collect_nones(self, out: list[Sent]) -> None:
        """Append a null for every leaf below this node (the object is None)."""
        for f in self.fields:
            if f.node is None:
                out.extend((name, None, f.edm_type) for name in (f.chunk.names if f.chunk else (f.stored,)))
            else:
                f.node.collect_nones(out)

    def _collect_extras(self, obj: Any, out: list[Sent], adapter: ModelAdapter, strict: bool) -> None:
        if self.kind == "typeddict":
            extras = {k: v for k, v in obj.items() if k not in self.declared}
        else:
            extras = getattr(obj, "__pydantic_extra__", None) or {}
        for key, value in extras.items():
            where = f"{self.path}.{key}" if self.path else str(key)
            if not isinstance(key, str):
                _refuse(strict, TableValidationError(
                    where, f"{self.owner}: an undeclared key is stored as a property named by it",
                    f"keys are str, got {type(key).__name__}",
                ))
                continue
            stored = self.prefix + key
            if adapter.extras_node(stored) is not self:
                _refuse(strict, TableValidationError(
                    where, f"{self.owner}: an undeclared field is stored as a property named {stored!r}",
                    "a declared field, or another object's undeclared fields, read that name back",
                ))
                continue
            out.append((stored, value, None))

    # ------------------------------------------------------------ properties into an object

    def kwargs(
        self, values: Mapping[str, Any], extras: Mapping[_Node, dict[str, Any]]
    ) -> tuple[dict[str, Any], bool]:
        """The constructor's keywords from the stored ``values``, and whether anything of it was stored."""
        kwargs: dict[str, Any] = {}
        found = False
        for f in self.fields:
            node = f.node
            if node is not None:
                sub, sub_found = node.kwargs(values, extras)
                marked = f.optional and values.get(f.stored) is not None
                if sub_found or marked or not (f.optional or (self.kind == "typeddict" and f.name not in self.required)):
                    # A non-Optional object is made again even when nothing of it was stored.
                    kwargs[f.name] = node.make(**sub)
                    found = found or sub_found or marked
                elif f.name in self.required:
                    kwargs[f.name] = None
                continue
            value = values.get(f.stored, _MISSING)
            if f.chunk is not None and value is not _MISSING:
                value = f.chunk.join(values)
            if value is _MISSING:
                if f.name in self.required:
                    kwargs[f.name] = None
                continue
            if value is None:  # a null (the service stores none): not evidence the object was there
                kwargs[f.name] = None
                continue
            found = True
            if f.converter is not None:
                value = value_from_wire(f.converter, f.path, value, values)
            kwargs[f.name] = value
        mine = extras.get(self) if self.extras else None
        if mine:
            kwargs.update(mine)
            found = True
        return kwargs, found


def _append_parts(f: ModelField, value: Any, out: list[Sent], strict: bool) -> None:
    """Append the parts of Chunked leaf ``f`` holding ``value`` (not ``strict``: a value that
    cannot be split is taken whole, as the first part)."""
    assert f.chunk is not None
    try:
        parts = f.chunk.split(value)
    except TableValidationError as exc:
        if strict:
            raise TableValidationError(f.path, exc.limit, _detail_of(exc)) from None
        parts = [value] + [None] * (len(f.chunk.names) - 1)
    out.extend(zip(f.chunk.names, parts, [f.edm_type] * len(parts)))


def _detail_of(exc: TableValidationError) -> str:
    return str(exc)[len(f"{exc.field}: {exc.limit}"):].strip().removeprefix("(").removesuffix(")")


def _refuse(strict: bool, error: TableValidationError) -> None:
    """Raise ``error`` when writing (``strict``); comparing and diffing carry on."""
    if strict:
        raise error


def _no_value(owner: str, path: str) -> TableValidationError:
    return TableValidationError(
        path, f"{owner}.{path} has no value",
        "the object lacks the attribute: a pydantic model made by model_construct() without it?",
    )


def _converted(f: ModelField, value: Any, strict: bool) -> Any:
    """The value of leaf ``f`` as stored, through its converter (not ``strict``: as it is when that fails)."""
    assert f.converter is not None
    try:
        return value_to_wire(f.converter, f.path, value)
    except TableValidationError:
        if strict:
            raise
        return value




def _plan_fields(
    owner: str, cls: type, kind: str, prefix: str, path: str, steps: tuple[tuple[str, bool], ...],
    delimiter: str, stack: tuple[type, ...], skip: tuple[str, ...],
) -> tuple[list[ModelField], list[ModelField]]:
    """(fields of ``cls``, every leaf below them): nested classes flattened, cycles refused."""
    hints = _hints(cls)
    fields: list[ModelField] = []
    leaves: list[ModelField] = []
    mapping = kind == "typeddict"
    for name in _class_fields(cls, kind):
        if name in skip:
            continue
        hint = hints.get(name, Any)
        here = f"{path}.{name}" if path else name
        where = (*steps, (name, mapping))
        inner, optional, markers = _unwrap(hint)
        nested = _nested_kind(inner)
        if nested is not None:
            if any(marker is EncryptedMarker for marker in markers):
                raise TypeError(
                    f"{owner}.{here}: a nested object is stored as several properties; mark its fields "
                    "Encrypted[...] rather than the object"
                )
            if inner in stack:
                chain = " -> ".join(c.__name__ for c in (*stack, inner))
                raise TypeError(
                    f"{owner}.{here}: {inner.__name__} contains itself ({chain}); a reference cycle cannot be "
                    "flattened into properties (store it as Json[...] instead)"
                )
            sub_delimiter = next((m.delimiter for m in markers if isinstance(m, Flatten)), delimiter)
            stored = prefix + next((m.name for m in markers if isinstance(m, StoredAs)), name)
            sub_prefix = stored + sub_delimiter
            sub_fields, sub_leaves = _plan_fields(
                owner, inner, nested, sub_prefix, here, where, sub_delimiter, (*stack, inner), (),
            )
            node = _Node(inner, nested, tuple(sub_fields), owner, sub_prefix, here, where)
            fields.append(ModelField(name, stored, EdmType.STRING, None, here, where, node, optional))
            leaves.extend(sub_leaves)
            continue
        edm_type, stored, converter = field_plan(f"{owner}.{path}" if path else owner, name, hint)
        chunk = chunk_plan(owner, here, prefix + stored, hint, edm_type)
        encrypted = encrypted_field(owner, here, hint, chunk)
        leaf = ModelField(name, prefix + stored, edm_type, converter, here, where, chunk=chunk, encrypted=encrypted)
        fields.append(leaf)
        leaves.append(leaf)
    return fields, leaves


def _stored_names(leaf: ModelField) -> tuple[str, ...]:
    """The properties ``leaf`` is stored as: its own name, or each part of a Chunked one."""
    return leaf.chunk.names if leaf.chunk is not None else (leaf.stored,)


def _nodes(node: _Node) -> list[_Node]:
    """``node`` and every node below it."""
    found = [node]
    for f in node.fields:
        if f.node is not None:
            found.extend(_nodes(f.node))
    return found


class ModelAdapter:
    """What tablesdk knows of one model class: made once per class by :func:`adapter_for`.

    ``kind`` is ``"dataclass"``, ``"pydantic"`` or ``"attrs"``; ``fields`` the custom
    fields in declaration order (a nested one holds its own); ``leaves`` every stored
    property, nested objects flattened (``by_stored`` finds them by stored name);
    ``markers`` the stored names of the presence markers of Optional nested objects;
    ``etag_field`` / ``timestamp_field`` the attributes that hold the ETag and Timestamp
    (None: the class has none, a context keeps the ETag).
    """

    __slots__ = (
        "cls", "kind", "fields", "leaves", "by_stored", "paths", "markers", "etag_field", "timestamp_field",
        "chunked", "parts", "encrypted", "_node", "_flat", "_extras_nodes",
    )

    def __init__(self, cls: type, kind: str, hints: dict[str, Any], names: list[str]) -> None:
        self.cls = cls
        self.kind = kind
        owner = cls.__name__
        for key in ("PartitionKey", "RowKey"):
            if key not in names:
                raise TypeError(f"{owner} is used as an entity but declares no {key} field (a str)")
        self.etag_field: str | None = "etag" if "etag" in names else None
        self.timestamp_field: str | None = "Timestamp" if "Timestamp" in names else None
        system = ("PartitionKey", "RowKey", "Timestamp", "etag")
        for name in system:
            if name in names:
                field_plan(owner, name, hints.get(name, Any))  # refuses a renamed system field
        fields, leaves = _plan_fields(owner, cls, kind, "", "", (), "_", (cls,), system)
        self._node = _Node(cls, kind, tuple(fields), owner, "", "")
        nodes = _nodes(self._node)
        self.markers = frozenset(f.stored for n in nodes for f in n.fields if f.node is not None and f.optional)
        stored_names = [name for f in leaves for name in _stored_names(f)] + sorted(self.markers)
        twice = {s for s in stored_names if stored_names.count(s) > 1}
        if twice:
            raise TypeError(f"{owner}: two fields are stored as {sorted(twice)}")
        self.fields = tuple(fields)
        self.leaves = tuple(leaves)
        #: The leaf each property is read into, by stored name (every part of a Chunked leaf).
        self.by_stored = {name: f for f in leaves for name in _stored_names(f)}
        #: The dotted path of each flattened leaf or part, by stored name (what messages name).
        self.paths = {name: f.path for f in leaves for name in _stored_names(f) if f.path != name}
        #: The parts of each Chunked leaf, by the stored name of its first part.
        self.chunked = {f.stored: f.chunk.names for f in leaves if f.chunk is not None}
        #: The first part's stored name of each further part of a Chunked leaf, by the part's name.
        self.parts = {part: first for first, names in self.chunked.items() for part in names[1:]}
        #: The stored names of the ``Encrypted[...]`` leaves.
        self.encrypted = frozenset(f.stored for f in leaves if f.encrypted)
        #: The nodes that keep undeclared fields, the longest prefix first (the one that claims a name).
        self._extras_nodes = sorted((n for n in nodes if n.extras), key=lambda n: -len(n.prefix))
        self._flat = all(f.node is None and f.chunk is None for f in fields) and not self._extras_nodes

    def __repr__(self) -> str:
        return f"ModelAdapter({self.cls.__name__}, {self.kind}, {list(self.leaves)})"

    def extras_node(self, stored: str) -> _Node | None:
        """The object whose undeclared field a property named ``stored`` is read into (None: no object's)."""
        if stored in self.by_stored or stored in self.markers or stored in SYSTEM_FIELDS:
            return None
        for node in self._extras_nodes:
            if stored.startswith(node.prefix) and len(stored) > len(node.prefix):
                return node
        return None

    def is_known(self, stored: str) -> bool:
        """Whether a property named ``stored`` is read into an object of this class."""
        return stored in self.by_stored or stored in self.markers or self.extras_node(stored) is not None

    def path_of(self, stored: str) -> str | None:
        """The dotted path of the field stored as ``stored``, where it differs from that name."""
        path = self.paths.get(stored)
        if path is not None or not self._extras_nodes:
            return path
        node = self.extras_node(stored)
        return f"{node.path}.{stored[len(node.prefix):]}" if node is not None and node.path else None

    # ------------------------------------------------------------ reading an instance

    def properties(self, obj: Any, strict: bool = True) -> list[Sent]:
        """(stored name, value as sent, declared EDM type, None for an undeclared field) of every property of ``obj``.

        A value a write refuses raises TableValidationError naming its field; not ``strict``
        (comparing, diffing), it is taken as it is (a missing one as None)."""
        out: list[Sent] = []
        if self._flat:
            for f in self.fields:
                value = getattr(obj, f.name, _MISSING)
                if value is _MISSING:
                    _refuse(strict, _no_value(self.cls.__name__, f.name))
                    value = None
                if f.converter is not None and value is not None:
                    value = _converted(f, value, strict)
                out.append((f.stored, value, f.edm_type))
            return out
        self._node.collect(obj, out, self, strict)
        return out

    def etag(self, obj: Any) -> str | None:
        """The ETag ``obj`` carries (None: the class keeps none)."""
        return getattr(obj, self.etag_field, None) if self.etag_field else None

    # ------------------------------------------------------------ making and changing an instance

    def build(self, values: dict[str, Any], etag: str | None, timestamp: Any) -> Any:
        """An instance from the stored ``values`` (stored names, wire values already decoded)."""
        extras: dict[_Node, dict[str, Any]] = {}
        if self._extras_nodes:
            for name, value in values.items():
                node = self.extras_node(name)
                if node is not None and value is not None:
                    extras.setdefault(node, {})[name[len(node.prefix):]] = value
        kwargs, _ = self._node.kwargs(values, extras)
        kwargs["PartitionKey"] = values.get("PartitionKey")
        kwargs["RowKey"] = values.get("RowKey")
        if self.timestamp_field:
            kwargs["Timestamp"] = timestamp
        if self.etag_field:
            kwargs["etag"] = etag
        return self._node.make(**kwargs)

    def extra_fields(self, obj: Any) -> dict[str, Any] | None:
        """The undeclared fields of ``obj`` (a pydantic model's ``extra="allow"`` ones), or None if its class keeps none."""
        if self.kind != "pydantic" or not self._node.extras:
            return None
        return getattr(obj, "__pydantic_extra__", None)

    def take(self, target: Any, fresh: Any, stored: str) -> None:
        """Give ``target`` what ``fresh`` (read from the service) holds for the property ``stored``:
        a leaf, nested or not, an undeclared field, or a nested object only ``fresh`` has."""
        field = self.by_stored.get(stored)
        if field is not None:
            self._set(target, fresh, field.steps, lambda container: _step(container, *field.steps[-1]))
            return
        if stored in self.markers:
            steps = next(f.steps for n in _nodes(self._node) for f in n.fields if f.node is not None and f.stored == stored)
            if _walk(target, steps) is None:
                self._set(target, fresh, steps, lambda container: _step(container, *steps[-1]))
            return
        node = self.extras_node(stored)
        if node is not None:
            key = stored[len(node.prefix):]
            self._set(target, fresh, (*node.steps, (key, None)), lambda container: _extras_of(container).get(key))

    def drop(self, target: Any, stored: str) -> None:
        """Remove the property ``stored`` from ``target``: a leaf becomes None, an undeclared field goes."""
        field = self.by_stored.get(stored)
        if field is not None:
            container = _walk(target, field.steps[:-1])
            if container is not None:
                self._put(container, field.steps[-1], None)
            return
        node = self.extras_node(stored)
        container = _walk(target, node.steps) if node is not None else None
        if node is not None and container is not None:
            _extras_of(container).pop(stored[len(node.prefix):], None)

    def _set(
        self, target: Any, fresh: Any, steps: tuple[tuple[str, bool | None], ...], value_in: Callable[[Any], Any]
    ) -> None:
        """Set the value at ``steps`` in ``target`` from ``fresh``; where ``target`` has no object on
        the way, the whole object ``fresh`` has there (``value_in`` reads the value from its container)."""
        container, fresh_container = target, fresh
        for step in steps[:-1]:
            inner = _step(container, *step)
            fresh_inner = _step(fresh_container, *step) if fresh_container is not None else None
            if inner is None:
                self._put(container, step, fresh_inner)
                return
            container, fresh_container = inner, fresh_inner
        self._put(container, steps[-1], value_in(fresh_container) if fresh_container is not None else None)

    def _put(self, container: Any, step: tuple[str, bool | None], value: Any) -> None:
        name, is_key = step
        if is_key is None:  # an undeclared field
            extras = _extras_of(container)
            if value is None:
                extras.pop(name, None)
            else:
                extras[name] = value
        elif is_key:
            container[name] = value
        else:
            self.assign(container, name, value)

    def assign(self, obj: Any, name: str, value: Any) -> None:
        """Set attribute ``name`` of ``obj``, frozen classes included (a context refreshes them)."""
        try:
            setattr(obj, name, value)
        except (AttributeError, TypeError, ValueError, dataclasses.FrozenInstanceError):
            object.__setattr__(obj, name, value)
        except Exception:  # pydantic's frozen-instance ValidationError
            object.__setattr__(obj, name, value)

    def set_etag(self, obj: Any, etag: str | None) -> None:
        """Store ``etag`` on ``obj`` if the class declares a field for it."""
        if self.etag_field:
            self.assign(obj, self.etag_field, etag)

    def set_timestamp(self, obj: Any, timestamp: Any) -> None:
        """Store ``timestamp`` on ``obj`` if the class declares a field for it."""
        if self.timestamp_field:
            self.assign(obj, self.timestamp_field, timestamp)


def _step(container: Any, name: str, is_key: bool | None) -> Any:
    """The value of attribute or key ``name`` of ``container`` (None when it has none)."""
    if is_key is None:
        return _extras_of(container).get(name)
    return container.get(name) if is_key else getattr(container, name, None)


def _walk(obj: Any, steps: tuple[tuple[str, bool], ...]) -> Any:
    """The object at ``steps`` below ``obj`` (None when one on the way is None)."""
    for name, is_key in steps:
        if obj is None:
            return None
        obj = _step(obj, name, is_key)
    return obj


def _extras_of(container: Any) -> Any:
    """Where the undeclared fields of ``container`` are kept: a TypedDict itself, a pydantic model's
    ``__pydantic_extra__`` (made a dict when it is None)."""
    if isinstance(container, dict):
        return container
    extras = getattr(container, "__pydantic_extra__", None)
    if extras is None:
        extras = {}
        object.__setattr__(container, "__pydantic_extra__", extras)
    return extras




class NestedPlan:
    """A :class:`~tablesdk.TableEntity` property holding a nested object, flattened as a model
    class flattens one: through the adapter of a holder class whose one field is that property,
    so every rule (stored names, presence markers, undeclared fields, errors by path) is the
    model classes' own. ``stored`` is the property's stored name (its presence marker's),
    ``names`` every property its class stores below it."""

    __slots__ = ("name", "stored", "adapter", "names")

    def __init__(self, owner: type, name: str, hint: Any) -> None:
        holder = dataclasses.make_dataclass(owner.__name__, [("PartitionKey", str), ("RowKey", str), (name, hint)])
        holder.__module__ = owner.__module__
        self.name = name
        self.adapter = ModelAdapter(holder, "dataclass", _hints(holder), _class_fields(holder, "dataclass"))
        self.stored = self.adapter.fields[0].stored
        self.names = (*self.adapter.by_stored, *sorted(self.adapter.markers - {self.stored}))

    def __repr__(self) -> str:
        return f"NestedPlan({self.name!r}, {list(self.names)})"

    def write(self, value: Any, strict: bool) -> list[Sent]:
        """The properties of ``value`` (the object, or None), as a model class writes them."""
        return self.adapter.properties(_Holding(self.name, value), strict)

    def read(self, values: Mapping[str, Any]) -> Any:
        """The object the stored ``values`` make (None where an Optional one was None)."""
        return getattr(self.adapter.build(dict(values), None, None), self.name)

    def owns(self, stored: str) -> bool:
        """Whether a property named ``stored`` is read into this object (its marker included)."""
        return self.adapter.is_known(stored)


class _Holding:
    """What a :class:`NestedPlan`'s adapter reads a value from: an object with that one attribute."""

    def __init__(self, name: str, value: Any) -> None:
        setattr(self, name, value)


#: The adapter of every class met (None: not a model class).
_ADAPTERS: dict[type, ModelAdapter | None] = {}


def adapter_for(cls: type) -> ModelAdapter | None:
    """The adapter of model class ``cls``, made once; None when ``cls`` is no model class."""
    try:
        return _ADAPTERS[cls]
    except KeyError:
        pass
    except TypeError:
        return None
    adapter = _make_adapter(cls)
    _ADAPTERS[cls] = adapter
    return adapter


def _make_adapter(cls: type) -> ModelAdapter | None:
    kind = _nested_kind(cls)
    if kind is None or kind == "typeddict":
        return None
    return ModelAdapter(cls, kind, _hints(cls), _class_fields(cls, kind))
