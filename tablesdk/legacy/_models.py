"""The value classes of the ``azure-cosmosdb-table`` surface: entities, EDM type names, permissions.

They keep the old package's constructors, attributes and string forms, so code written for it
builds the same objects; the service calls of :mod:`tablesdk.legacy` translate them to
tablesdk's own types.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar


class Entity(dict):  # type: ignore[type-arg]
    """An entity as a dict whose keys are also attributes: ``e.PartitionKey``, ``e.Rating = 3``.

    Read entities hold ``PartitionKey``, ``RowKey``, ``Timestamp``, ``etag`` and the properties.
    A missing attribute raises AttributeError.
    """

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"'Entity' object has no attribute '{name}'") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(f"'Entity' object has no attribute '{name}'") from None

    def __dir__(self) -> list[str]:
        return dir({}) + list(self.keys())


class EntityProperty:
    """A value with an explicit EDM type: ``EntityProperty(EdmType.INT32, 7)``.

    Note the order, type first, as in the old package. ``encrypt`` marks a String property for
    client-side encryption (used only when the service has a ``key_encryption_key``).
    """

    def __init__(self, type: str | None = None, value: Any = None, encrypt: bool = False) -> None:
        self.type = type
        self.value = value
        self.encrypt = encrypt

    def __repr__(self) -> str:
        return f"EntityProperty(type={self.type!r}, value={self.value!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EntityProperty):
            return NotImplemented
        return (self.type, self.value) == (other.type, other.value)

    __hash__ = None  # type: ignore[assignment]


class Table:
    """A table of :meth:`TableService.list_tables`: its ``name``."""

    name: str

    def __init__(self, name: str = "") -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Table(name={self.name!r})"


class TablePayloadFormat:
    """The ``accept`` values of reads: how much type information the service sends."""

    JSON_NO_METADATA = "application/json;odata=nometadata"
    JSON_MINIMAL_METADATA = "application/json;odata=minimalmetadata"
    JSON_FULL_METADATA = "application/json;odata=fullmetadata"


class EdmType:
    """The EDM type names, as plain strings (``EdmType.INT64 == "Edm.Int64"``)."""

    BINARY = "Edm.Binary"
    INT64 = "Edm.Int64"
    GUID = "Edm.Guid"
    DATETIME = "Edm.DateTime"
    STRING = "Edm.String"
    INT32 = "Edm.Int32"
    DOUBLE = "Edm.Double"
    BOOLEAN = "Edm.Boolean"


class _Flags:
    """Permission-like letters: each flag is a letter, ``|`` and ``+`` combine, ``str`` lists them."""

    _LETTERS: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, _str: str | None = None, **flags: bool) -> None:
        text = _str or ""
        for attribute, letter in self._LETTERS:
            setattr(self, attribute, bool(flags.get(attribute)) or letter in text)

    def __or__(self, other: object) -> Any:
        return type(self)(_str=str(self) + str(other))

    __add__ = __or__

    def __str__(self) -> str:
        return "".join(letter for attribute, letter in self._LETTERS if getattr(self, attribute))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(_str={str(self)!r})"


class TablePermissions(_Flags):
    """What a table SAS or stored access policy allows: ``query`` (r), ``add`` (a), ``update`` (u),
    ``delete`` (d). ``TablePermissions.QUERY | TablePermissions.ADD`` is ``"ra"``."""

    _LETTERS = (("query", "r"), ("add", "a"), ("update", "u"), ("delete", "d"))
    QUERY: ClassVar[TablePermissions]
    ADD: ClassVar[TablePermissions]
    UPDATE: ClassVar[TablePermissions]
    DELETE: ClassVar[TablePermissions]

    def __init__(
        self, query: bool = False, add: bool = False, update: bool = False, delete: bool = False,
        _str: str | None = None,
    ) -> None:
        super().__init__(_str, query=query, add=add, update=update, delete=delete)


TablePermissions.QUERY = TablePermissions(query=True)
TablePermissions.ADD = TablePermissions(add=True)
TablePermissions.UPDATE = TablePermissions(update=True)
TablePermissions.DELETE = TablePermissions(delete=True)


class ResourceTypes(_Flags):
    """What an account SAS reaches: ``service`` (s), ``container`` (c, a table), ``object`` (o, an entity)."""

    _LETTERS = (("service", "s"), ("container", "c"), ("object", "o"))
    SERVICE: ClassVar[ResourceTypes]
    CONTAINER: ClassVar[ResourceTypes]
    OBJECT: ClassVar[ResourceTypes]

    def __init__(
        self, service: bool = False, container: bool = False, object: bool = False, _str: str | None = None
    ) -> None:
        super().__init__(_str, service=service, container=container, object=object)


ResourceTypes.SERVICE = ResourceTypes(service=True)
ResourceTypes.CONTAINER = ResourceTypes(container=True)
ResourceTypes.OBJECT = ResourceTypes(object=True)


class AccountPermissions(_Flags):
    """What an account SAS allows: read (r), write (w), delete (d), list (l), add (a), create (c),
    update (u), process (p)."""

    _LETTERS = (
        ("read", "r"), ("write", "w"), ("delete", "d"), ("list", "l"), ("add", "a"), ("create", "c"),
        ("update", "u"), ("process", "p"),
    )
    READ: ClassVar[AccountPermissions]
    WRITE: ClassVar[AccountPermissions]
    DELETE: ClassVar[AccountPermissions]
    LIST: ClassVar[AccountPermissions]
    ADD: ClassVar[AccountPermissions]
    CREATE: ClassVar[AccountPermissions]
    UPDATE: ClassVar[AccountPermissions]
    PROCESS: ClassVar[AccountPermissions]

    def __init__(
        self, read: bool = False, write: bool = False, delete: bool = False, list: bool = False,
        add: bool = False, create: bool = False, update: bool = False, process: bool = False,
        _str: str | None = None,
    ) -> None:
        super().__init__(
            _str, read=read, write=write, delete=delete, list=list, add=add, create=create, update=update,
            process=process,
        )


for _name, _letter in AccountPermissions._LETTERS:
    setattr(AccountPermissions, _name.upper(), AccountPermissions(_str=_letter))


class AccessPolicy:
    """A stored access policy (:meth:`TableService.set_table_acl`): ``permission`` (a
    :class:`TablePermissions` or its letters), ``expiry`` and ``start`` (datetimes, naive ones
    taken as UTC, or ISO text)."""

    def __init__(
        self, permission: TablePermissions | str | None = None, expiry: datetime | str | None = None,
        start: datetime | str | None = None,
    ) -> None:
        self.start = start
        self.expiry = expiry
        self.permission = permission

    def __repr__(self) -> str:
        return f"AccessPolicy(permission={self.permission!r}, expiry={self.expiry!r}, start={self.start!r})"


class Protocol:
    """The ``protocol`` of a SAS: HTTPS only, or HTTPS and HTTP."""

    HTTPS = "https"
    HTTPS_HTTP = "https,http"


class LocationMode:
    """Where reads go: the primary endpoint or the read-only secondary."""

    PRIMARY = "primary"
    SECONDARY = "secondary"
