"""Property-based round trips of model objects through the bundled emulator: every annotation kind
docs/models.md lists (the EDM types, enums by name and by value, Flags, Decimal, date, a Converter,
Json[...], StoredAs, nested dataclasses, pydantic models, attrs classes and TypedDicts, Flatten,
pydantic ``extra="allow"`` fields and a TypedDict's undeclared keys, declared TableEntity classes).

Each generated object goes through the client (insert, get), a context (add_object, save_changes,
a query of a fresh context), a batch (SaveChangesOptions.BATCH) and bulk_insert. It either comes
back exactly (type and value, recursively) or is refused before anything is sent with a
TableValidationError naming a field that was given a value of the wrong type.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import math
import uuid
from collections.abc import Callable, Iterator
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Annotated, Any, TypedDict

import attrs
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tablesdk._entities._filter_text import filter_name_problem
from tablesdk import (
    ByValue,
    CloudStorageAccount,
    CloudTableClient,
    Converter,
    EdmType,
    Flatten,
    Int64,
    Json,
    ResourceNotFoundError,
    SaveChangesOptions,
    StoredAs,
    TableEntity,
    TableValidationError,
)

pytestmark = pytest.mark.integration


class Shade(enum.Enum):
    RED = "r"
    BLUE = "b"


class Size(enum.Enum):
    SMALL = 1
    HUGE = 2**40  # by value: Edm.Int64


class Perm(enum.Flag):
    R = 1
    W = 2
    X = 4


class Money:
    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __eq__(self, other: object) -> bool:
        return type(other) is Money and other.cents == self.cents

    def __repr__(self) -> str:
        return f"Money({self.cents})"


MONEY = Converter(lambda m: f"{m.cents}c", lambda s: Money(int(s[:-1])), EdmType.STRING)


@dataclasses.dataclass
class Point:
    X: int | None = None
    Y: float | None = None


class Dims(TypedDict):
    W: int
    H: int


class Label(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    Name: str | None = None


@attrs.define
class Span:
    Start: date | None = None
    Stop: date | None = None


@dataclasses.dataclass
class Everything:
    PartitionKey: str
    RowKey: str
    Text: str | None = None
    Count: int | None = None
    Big: Int64 | None = None
    Ratio: float | None = None
    Yes: bool | None = None
    When: datetime | None = None
    Id: uuid.UUID | None = None
    Blob: bytes | None = None
    Tint: Shade | None = None
    Scale: Annotated[Size, ByValue] | None = None
    Perms: Perm | None = None
    PermBits: Annotated[Perm, ByValue] | None = None
    Price: Decimal | None = None
    Day: date | None = None
    Cost: Annotated[Money, MONEY] | None = None
    Lines: Json[list[str]] | None = None
    Pair: Json[tuple[int, str]] | None = None
    Seen: Json[set[int]] | None = None
    Map: Json[dict[int, list[str]]] | None = None
    Renamed: Annotated[Json[list[int]] | None, StoredAs("rn")] = None
    At: Point = dataclasses.field(default_factory=Point)
    Maybe: Annotated[Point | None, Flatten("__")] = None
    Box: Dims = dataclasses.field(default_factory=lambda: Dims(W=0, H=0))
    Tag: Label | None = None
    During: Span = dataclasses.field(default_factory=Span)


class Open(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    PartitionKey: str
    RowKey: str
    Count: int | None = None
    Inner: Label | None = None


class Declared(TableEntity):
    Tint: Shade | None = None
    Perms: Perm | None = None
    Price: Decimal | None = None
    Day: date | None = None
    Lines: Json[list[str]] | None = None
    Renamed: Annotated[Annotated[Size, ByValue] | None, StoredAs("sz")] = None


# ---------------------------------------------------------------- values

_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=8)
_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)
_floats = st.floats(allow_nan=False, allow_infinity=False)
_moments = st.datetimes(datetime(1601, 1, 2), datetime(9999, 12, 30), timezones=st.just(timezone.utc))
_days = st.dates(date(1601, 1, 1), date(9999, 12, 31))
_decimals = st.decimals(allow_nan=False, allow_infinity=False)
_perms = st.sampled_from([Perm(0), Perm.R, Perm.W, Perm.X, Perm.R | Perm.W, Perm.R | Perm.X, Perm.R | Perm.W | Perm.X])
_names = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,5}", fullmatch=True)
#: What an undeclared field holds: values that keep their type through a DynamicEntity.
_dynamic = st.one_of(_texts, _int64, st.booleans(), _floats, _moments)


def _maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | values


#: The values of the wrong type tried on each field (by path), and the right ones.
_WRONG: dict[str, st.SearchStrategy[Any]] = {
    "Tint": st.sampled_from([1, "RED", Size.SMALL]),
    "Scale": st.sampled_from([1, "SMALL"]),
    "Perms": st.sampled_from([3, "R"]),
    "PermBits": st.just(1),
    "Price": st.sampled_from(["1.5", 1.5, 2]),
    "Day": _moments,
    "Cost": st.just(5),
    "Lines": _texts,
    "Seen": st.sampled_from(["ab", [1, 2]]),
    "Map": st.just({"a": []}),
    "Pair": st.just([1, "a", 2]),
    "At": st.none(),
    "Box": st.just(["W"]),
}


@st.composite
def everything(draw: st.DrawFn) -> tuple[Everything, set[str]]:
    """An Everything, and the paths of the fields given a value of the wrong type (mostly none)."""
    extra_keys = st.dictionaries(_names.filter(lambda k: k not in ("W", "H")), _dynamic, max_size=2)
    right: dict[str, st.SearchStrategy[Any]] = {
        "Text": _maybe(_texts), "Count": _maybe(_int32), "Big": _maybe(_int64), "Ratio": _maybe(_floats),
        "Yes": _maybe(st.booleans()), "When": _maybe(_moments), "Id": _maybe(st.uuids()),
        "Blob": _maybe(st.binary(max_size=8)), "Tint": _maybe(st.sampled_from(Shade)),
        "Scale": _maybe(st.sampled_from(Size)), "Perms": _maybe(_perms), "PermBits": _maybe(_perms),
        "Price": _maybe(_decimals), "Day": _maybe(_days), "Cost": _maybe(st.builds(Money, _int32)),
        "Lines": _maybe(st.lists(_texts, max_size=3)), "Pair": _maybe(st.tuples(_int32, _texts)),
        "Seen": _maybe(st.sets(_int64, max_size=3)),
        "Map": _maybe(st.dictionaries(_int32, st.lists(_texts, max_size=2), max_size=2)),
        "Renamed": _maybe(st.lists(_int64, max_size=3)),
        "At": st.builds(Point, _maybe(_int32), _maybe(_floats)),
        "Maybe": _maybe(st.builds(Point, _maybe(_int32), _maybe(_floats))),
        "Box": st.builds(lambda w, h, more: {"W": w, "H": h, **more}, _int32, _int32, extra_keys),
        "Tag": _maybe(st.builds(lambda name, more: Label(Name=name, **more), _maybe(_texts), extra_keys)),
        "During": st.builds(Span, _maybe(_days), _maybe(_days)),
    }
    values: dict[str, Any] = {}
    wrong: set[str] = set()
    for name, strategy in right.items():
        if name in _WRONG and draw(st.integers(0, 19)) == 0:
            values[name] = draw(_WRONG[name])
            wrong.add(name)
        else:
            values[name] = draw(strategy)
    return Everything(PartitionKey="p", RowKey="", **values), wrong


@st.composite
def open_models(draw: st.DrawFn) -> tuple[Open, set[str]]:
    """An Open model with undeclared fields, and those of them that must be refused: a name the
    nested model's undeclared fields read back (``Inner_x``), a system property's, or one no
    filter can name."""
    tricky = st.sampled_from(["Inner_x", "Timestamp", "and", "true"])
    extras = draw(st.dictionaries(_names | tricky, _dynamic, max_size=3).filter(
        lambda d: not {"PartitionKey", "RowKey", "Count", "Inner"} & set(d)))
    inner = draw(_maybe(st.builds(lambda n, more: Label(Name=n, **more), _maybe(_texts),
                                  st.dictionaries(_names, _dynamic, max_size=2))))
    model = Open(PartitionKey="p", RowKey="", Count=draw(_maybe(_int32)), Inner=inner, **extras)
    refused = {k for k in extras if k in ("Inner_x", "Timestamp") or filter_name_problem(k) is not None}
    if inner is not None:
        refused |= {f"Inner.{k}" for k in inner.__pydantic_extra__ or {} if filter_name_problem(f"Inner_{k}")}
    return model, refused


@st.composite
def declared(draw: st.DrawFn) -> tuple[Declared, set[str]]:
    entity = Declared(
        PartitionKey="p", RowKey="", Tint=draw(_maybe(st.sampled_from(Shade))), Perms=draw(_maybe(_perms)),
        Price=draw(_maybe(_decimals)), Day=draw(_maybe(_days)), Lines=draw(_maybe(st.lists(_texts, max_size=3))),
        Renamed=draw(_maybe(st.sampled_from(Size))),
    )
    wrong: set[str] = set()
    for name in ("Tint", "Perms", "Price", "Day", "Lines"):
        if draw(st.integers(0, 9)) == 0:
            setattr(entity, name, draw(_WRONG[name]))
            wrong.add(name)
    return entity, wrong


# ---------------------------------------------------------------- the same, exactly


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same types, all the way down (a datetime is read as an EdmDateTime, a
    datetime that keeps the service's seventh digit of a second)."""
    if isinstance(a, datetime) and isinstance(b, datetime):
        return a == b and a.utcoffset() == b.utcoffset()
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, Decimal):
        return str(a) == str(b)
    if dataclasses.is_dataclass(a):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if attrs.has(type(a)):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in attrs.fields(type(a)))
    if isinstance(a, pydantic.BaseModel):
        return all(_same(getattr(a, n), getattr(b, n)) for n in type(a).model_fields) and _same(
            a.__pydantic_extra__ or {}, b.__pydantic_extra__ or {}
        )
    if isinstance(a, TableEntity):
        names = ("PartitionKey", "RowKey", *type(a).__declared__, "extra_properties")
        return all(_same(getattr(a, type(a).__renamed__.get(n, n)), getattr(b, type(b).__renamed__.get(n, n)))
                   for n in names)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, (set, frozenset)):
        return a == b and sorted(map(repr, a)) == sorted(map(repr, b))
    return bool(a == b)


def _without_none_extras(obj: Any) -> Any:
    """``obj`` as read back: an undeclared field holding None is not stored (as a DynamicEntity's None)."""
    if isinstance(obj, pydantic.BaseModel) and obj.__pydantic_extra__:
        obj.__pydantic_extra__ = {k: v for k, v in obj.__pydantic_extra__.items() if v is not None}
    return obj


# ---------------------------------------------------------------- the round trips


@pytest.fixture(scope="module", params=["json", "atom"])
def client(request: pytest.FixtureRequest, devstore_connection_string: str) -> Iterator[CloudTableClient]:
    account = CloudStorageAccount.parse(devstore_connection_string)
    with account.create_cloud_table_client(payload_format=request.param) as table_client:
        yield table_client


@pytest.fixture(scope="module")
def table(client: CloudTableClient) -> Iterator[str]:
    name = "models" + uuid.uuid4().hex[:12]
    client.create_table(name)
    yield name
    client.delete_table_if_exists(name)


def _write_through_client(client: CloudTableClient, table: str, obj: Any) -> None:
    client.insert_entity(table, obj)


def _write_through_context(client: CloudTableClient, table: str, obj: Any) -> None:
    ctx = client.get_table_service_context()
    ctx.add_object(table, obj)
    ctx.save_changes()


def _write_in_a_batch(client: CloudTableClient, table: str, obj: Any) -> None:
    ctx = client.get_table_service_context()
    ctx.add_object(table, obj)
    ctx.save_changes(SaveChangesOptions.BATCH)


def _write_in_bulk(client: CloudTableClient, table: str, obj: Any) -> None:
    result = client.bulk_insert(table, [obj])
    if result.failed:
        error = result.failed[0].error
        assert result.batches == 0, "refused after sending"
        assert error is not None
        raise error


WRITES: tuple[Callable[[CloudTableClient, str, Any], None], ...] = (
    _write_through_client, _write_through_context, _write_in_a_batch, _write_in_bulk,
)


def _check(client: CloudTableClient, table: str, drawn: tuple[Any, set[str]]) -> None:
    template, wrong = drawn
    cls = type(template)
    for write in WRITES:
        obj = copy.deepcopy(template)
        obj.RowKey = uuid.uuid4().hex
        expected = _without_none_extras(copy.deepcopy(obj))
        try:
            write(client, table, obj)
        except TableValidationError as refused:
            assert refused.field in wrong, f"{write.__name__}: {refused} does not name a wrong field ({wrong})"
            with pytest.raises(ResourceNotFoundError):
                client.get_entity(table, "p", obj.RowKey)
            continue
        assert not wrong, f"{write.__name__}: {wrong} given values of the wrong type, and written"
        read = client.get_entity(table, "p", obj.RowKey, cls)
        assert _same(read, expected), f"{write.__name__}, get_entity:\n{read!r}\n!=\n{expected!r}"
        [queried] = client.get_table_service_context().create_query(table, cls).where(f"RowKey eq '{obj.RowKey}'")
        assert _same(queried, expected), f"{write.__name__}, context query:\n{queried!r}\n!=\n{expected!r}"
        assert _same(obj, expected) or isinstance(obj, TableEntity), f"{write.__name__} changed the object written"


_settings = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_settings
@given(drawn=everything())
def test_every_annotation_kind_round_trips_or_is_refused_by_name(
    client: CloudTableClient, table: str, drawn: tuple[Everything, set[str]]
) -> None:
    _check(client, table, drawn)


@_settings
@given(drawn=open_models())
def test_undeclared_pydantic_fields_round_trip_or_are_refused_by_name(
    client: CloudTableClient, table: str, drawn: tuple[Open, set[str]]
) -> None:
    _check(client, table, drawn)


@_settings
@given(drawn=declared())
def test_declared_entities_round_trip_or_are_refused_by_name(
    client: CloudTableClient, table: str, drawn: tuple[Declared, set[str]]
) -> None:
    _check(client, table, drawn)
