"""The sync and async public faces compared as httpcore compares its generated sync twin.

Each async face (client, table object, table context, service context, query, the bulk
function, the protocol a query source implements) is read back into sync terms through the
one declared list of spellings (:data:`ASYNC_SPELLINGS`), and must then equal its
sync face: the same public members, and for each method the same parameters in the same
order, with the same kinds, defaults and annotations, and the same return annotation.

What may still differ is declared once, with the reason, in :data:`ALLOWED` (checked both
ways: an entry that no longer differs must go) and :data:`PENDING` (drifts other work
removes; not checked for staleness).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from tablesdk import CloudTable, CloudTableClient, TableContext, TableQuery, TableServiceContext
from tablesdk._queries._query import QuerySource
from tablesdk.aio import (
    AsyncCloudTable,
    AsyncCloudTableClient,
    AsyncQuerySource,
    AsyncTableContext,
    AsyncTableQuery,
    AsyncTableServiceContext,
)

#: The one list of what an async face may spell its own way, read back into the sync spelling
#: before comparing: ``(where, async spelling, sync spelling)``, where is "annotation" (a word
#: of an annotation), "member" (a method name) or "parameter" (a parameter name, in that
#: direction only: a sync ``max_workers`` must be ``max_concurrency`` in the async twin).
#: Awaitables against values need no entry: ``async def f() -> T`` is annotated ``T``, as
#: its sync twin is, and an async generator's ``AsyncIterator[T]`` reads as ``Iterator[T]``.
ASYNC_SPELLINGS: tuple[tuple[str, str, str], ...] = (
    ("annotation", "AsyncIterator", "Iterator"),
    ("annotation", "AsyncIterable", "Iterable"),
    ("annotation", "AsyncCloudTableClient", "CloudTableClient"),
    ("annotation", "AsyncCloudTable", "CloudTable"),
    ("annotation", "AsyncTableContext", "TableContext"),
    ("annotation", "AsyncTableServiceContext", "TableServiceContext"),
    ("annotation", "AsyncTableQuery", "TableQuery"),
    ("annotation", "AsyncQuerySource", "QuerySource"),
    ("annotation", "AsyncSender", "Sender"),
    ("annotation", "AsyncTransport", "Transport"),
    ("annotation", "AsyncChanges", "Changes"),
    ("member", "__aenter__", "__enter__"),
    ("member", "__aexit__", "__exit__"),
    ("member", "__aiter__", "__iter__"),
    ("parameter", "max_concurrency", "max_workers"),  # tasks in the async faces, threads in the sync ones
)

TWIN_TOKENS = tuple((mine, theirs) for where, mine, theirs in ASYNC_SPELLINGS if where == "annotation")
TWIN_MEMBERS = {mine: theirs for where, mine, theirs in ASYNC_SPELLINGS if where == "member"}
ASYNC_PARAMETER = {theirs: mine for where, mine, theirs in ASYNC_SPELLINGS if where == "parameter"}

#: Differences by design. Keys: ``Face.member`` (present in one flavour only, or a property's
#: type), ``Face.member(parameter)`` (one parameter), ``Face.member->`` (the return annotation).
ALLOWED: dict[str, str] = {
    "CloudTableClient.__init__(pool_size)":
        "default 16 connections per host for threads, 100 open connections for tasks (docs/async.md)",
    "CloudTableClient.executor": "threads only: the pool of the begin_* operations",
    "CloudTableClient.supports_parallel_queries": "threads only: a query's pages on several threads",
    "TableServiceContext.begin_execute": "threads only: runs on the client's executor",
    "TableServiceContext.begin_save_changes": "threads only: runs on the client's executor",
    "TableServiceContext.fetch_query_segment": "threads only: the first stage of the sync read-ahead",
    "TableServiceContext.decode_query_segment": "threads only: the second stage of the sync read-ahead",
    "TableQuery.to_list": "async only: list(query) has no async form",
    "TableQuery.description": "async only: the TableQuery an async query wraps",
    "TableQuery.point_keys": "how a source reads a query: async sources read it from the description",
    "TableQuery.request_top": "how a source reads a query: async sources read it from the description",
    "TableQuery.compiled": "how a source reads a query: async sources read it from the description",
    **{f"{face}.{member}(max_workers)": "the async faces' old spelling of max_concurrency, kept with a "
       "DeprecationWarning (tests/unit/test_bulk_faces.py)"
       for face in ("CloudTableClient", "CloudTable") for member in ("write_arrow", "write_pandas")},
}

#: Known drifts that work under way removes; listed so that nothing else can drift meanwhile.
PENDING: dict[str, str] = {
    # the async page stream brings these to AsyncTableQuery
    "TableQuery.iter_parallel_segments": "added to the async query by the page stream",
    "TableQuery.partition_ranges": "added to the async query by the page stream",
    "TableQuery.__init__(read_ahead)": "added to the async query by the page stream",
}

#: The faces compared: a sync face and its async twin.
FACES: tuple[tuple[Any, Any], ...] = (
    (CloudTableClient, AsyncCloudTableClient),
    (CloudTable, AsyncCloudTable),
    (TableContext, AsyncTableContext),
    (TableServiceContext, AsyncTableServiceContext),
    (TableQuery, AsyncTableQuery),
    (QuerySource, AsyncQuerySource),
)


def as_sync(text: str) -> str:
    """The async face's ``text`` (an annotation) in sync words."""
    for async_word, sync_word in TWIN_TOKENS:
        text = re.sub(rf"\b{async_word}\b", sync_word, text)
    return text


def members(face: type) -> dict[str, Any]:
    """The public members of ``face`` by their sync names, with ``__init__`` and the protocol methods."""
    found = {}
    for name in dir(face):
        sync_name = TWIN_MEMBERS.get(name, name)
        if name.startswith("_") and sync_name not in ("__init__", *TWIN_MEMBERS.values()):
            continue
        found[sync_name] = inspect.getattr_static(face, name)
    return found


def function_of(member: Any) -> Callable[..., Any] | None:
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    return member if inspect.isfunction(member) else None


def parameter_differences(where: str, sync_fn: Callable[..., Any], async_fn: Callable[..., Any]) -> Iterator[str]:
    """``where(parameter)`` for each parameter that differs (by name: missing, extra, kind, default,
    annotation), ``where(order)`` when the shared parameters come in another order, and
    ``where->`` for the return annotation."""
    sync_sig, async_sig = inspect.signature(sync_fn), inspect.signature(async_fn)
    expected = {ASYNC_PARAMETER.get(name, name): param for name, param in sync_sig.parameters.items()}
    twins = dict(async_sig.parameters)
    for name, sync_param in expected.items():
        async_param = twins.get(name)
        if async_param is None or (async_param.kind, as_sync(str(async_param.annotation))) != (
            sync_param.kind, str(sync_param.annotation)
        ) or not _same_default(sync_param, async_param):
            yield f"{where}({sync_param.name})"
    for name in twins.keys() - expected.keys():
        yield f"{where}({name})"
    if [name for name in expected if name in twins] != [name for name in twins if name in expected]:
        yield f"{where}(order)"
    if as_sync(str(async_sig.return_annotation)) != str(sync_sig.return_annotation):
        yield f"{where}->"


def _same_default(sync_param: inspect.Parameter, async_param: inspect.Parameter) -> bool:
    if sync_param.default is async_param.default:
        return True
    try:
        return bool(sync_param.default == async_param.default)
    except Exception:  # noqa: BLE001 - an object that cannot be compared is not the same default
        return False


def differences(sync_face: Any, async_face: Any) -> Iterator[str]:
    """Every way ``async_face``, read back into sync words, differs from ``sync_face``."""
    face = sync_face.__name__
    if inspect.isfunction(sync_face):
        yield from parameter_differences(face, sync_face, async_face)
        return
    sync_members, async_members = members(sync_face), members(async_face)
    for name in sorted(set(sync_members) ^ set(async_members)):
        yield f"{face}.{name}"
    for name in sorted(set(sync_members) & set(async_members)):
        mine, twin = sync_members[name], async_members[name]
        if isinstance(mine, property) or isinstance(twin, property):
            if not (isinstance(mine, property) and isinstance(twin, property)) or (
                as_sync(str(twin.fget.__annotations__.get("return"))) != str(mine.fget.__annotations__.get("return"))
            ) or (mine.fset is None) != (twin.fset is None):
                yield f"{face}.{name}"
            continue
        sync_fn, async_fn = function_of(mine), function_of(twin)
        if sync_fn is None or async_fn is None:
            if (sync_fn is None) != (async_fn is None) or type(mine) is not type(twin):
                yield f"{face}.{name}"
            continue
        if sync_fn is async_fn:
            continue  # written once, shared by both flavours
        if inspect.iscoroutinefunction(sync_fn) or inspect.isasyncgenfunction(sync_fn):
            yield f"{face}.{name}"  # a sync face never awaits
        yield from parameter_differences(f"{face}.{name}", sync_fn, async_fn)


def all_differences() -> set[str]:
    return {found for sync_face, async_face in FACES for found in differences(sync_face, async_face)}


def test_the_async_faces_match_the_sync_faces_but_for_the_declared_differences() -> None:
    undeclared = sorted(all_differences() - set(ALLOWED) - set(PENDING))
    assert undeclared == [], "sync and async faces differ (fix the drift, or declare it with its reason in ALLOWED)"


def test_every_allowed_difference_still_exists() -> None:
    stale = sorted(set(ALLOWED) - all_differences())
    assert stale == [], "these no longer differ: remove them from ALLOWED"


def test_the_declarations_name_faces_that_are_compared() -> None:
    faces = {sync_face.__name__ for sync_face, _ in FACES}
    assert {key.partition(".")[0].partition("(")[0] for key in (*ALLOWED, *PENDING)} <= faces


def sync_face(table: str, max_workers: int = 8, *, options: int | None = None) -> Iterator[int]:
    raise NotImplementedError


def test_the_comparison_reads_awaitables_iterators_and_the_concurrency_name_as_the_same() -> None:
    async def twin(table: str, max_concurrency: int = 8, *, options: int | None = None) -> AsyncIterator[int]:
        raise NotImplementedError
        yield 0

    assert list(parameter_differences("face", sync_face, twin)) == []


def test_the_comparison_sees_a_default_an_annotation_a_name_an_order_and_a_result() -> None:
    async def other_default(table: str, max_concurrency: int = 4, *, options: int | None = None) -> Iterator[int]:
        raise NotImplementedError

    async def other_annotation(table: str, max_concurrency: int = 8, *, options: str | None = None) -> Iterator[int]:
        raise NotImplementedError

    async def sync_concurrency_name(table: str, max_workers: int = 8, *, options: int | None = None) -> Iterator[int]:
        raise NotImplementedError

    async def other_order(max_concurrency: int = 8, table: str = "", *, options: int | None = None) -> Iterator[int]:
        raise NotImplementedError

    async def other_result(table: str, max_concurrency: int = 8, *, options: int | None = None) -> list[int]:
        raise NotImplementedError

    def found(twin: Callable[..., Any]) -> set[str]:
        return set(parameter_differences("face", sync_face, twin))

    assert found(other_default) == {"face(max_workers)"}
    assert found(other_annotation) == {"face(options)"}
    assert found(sync_concurrency_name) == {"face(max_workers)"}
    assert found(other_order) >= {"face(order)"}
    assert found(other_result) == {"face->"}
