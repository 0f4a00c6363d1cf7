"""Deleting and counting what a filter matches: ``delete_entities`` and ``count_entities``.

Both scan the table with a key-only projection (``$select=RowKey``; the client adds
the other keys and Timestamp, and each entity's ETag comes with it), one page at a
time, following continuation tokens through the query's page stream.

``delete_entities`` is a bulk call (:mod:`tablesdk._bulk_loading._bulk`): each page's entities become
delete batches of one partition (:func:`plan_deletes`), written by
the same engine, with the same rules, as ``bulk_insert`` (the first batch's answer
first; an answer every batch would get ends the call; at most a window in flight). The
deletes are unconditional (``If-Match: *``) unless ``conditional`` is set: then each
carries the ETag the scan read, and an entity changed since fails with 412. An entity
the service blames with 404 was already gone, which is what was wanted: it counts as
deleted. Every scanned entity gets an :class:`~tablesdk._bulk_loading._bulk.EntityOutcome`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from .._formats._batch import MAX_BATCH_OPERATIONS
from ._bulk import DELETE, BulkCall, BulkKind, BulkOptions, BulkResult, ProgressCallback, run_on_threads
from ._bulk_plan import BulkItem, Step
from .._entities._edm import EntityPayload
from .._entities._entity import DynamicEntity, entity_from_payload, validate_table_name
from .._core._errors import TableValidationError
from .._entities._filter import FilterLike
from .._entities._filter_params import refuse_parameters_without_filter
from .._pipeline._options import TableRequestOptions
from .._queries._query import FetchedPage, TableQuery, query_pages

if TYPE_CHECKING:
    from ._bulk import BulkTarget
    from .._clients._client import CloudTableClient
    from .._clients._operations import ClientCore

__all__ = [
    "count_entities", "delete_call", "delete_entities", "key_query", "page_deletes", "page_payloads", "plan_deletes",
    "scan_pages",
]


def key_query(
    query: TableQuery[DynamicEntity], filter: FilterLike | None, parameters: Mapping[str, object] | None = None
) -> TableQuery[DynamicEntity]:
    """``query`` (a client's, over the table) narrowed by ``filter`` (its ``@name`` bound to
    ``parameters``) and reading only the keys."""
    if filter is not None:
        query = query.where(filter, parameters=parameters)
    elif parameters:
        refuse_parameters_without_filter(parameters)
    return query.select("RowKey")


def scan_pages(client: CloudTableClient, query: TableQuery[Any]) -> Iterator[list[EntityPayload]]:
    """Every page of ``query`` as payloads, following continuation (a token seen twice is a cycle),
    read as the query's entities are (:func:`~tablesdk._queries._query.query_pages`)."""
    for payloads, _ in query_pages(query, decode=partial(page_payloads, client)):
        yield payloads
        del payloads


def page_payloads(client: ClientCore, fetched: FetchedPage) -> list[EntityPayload]:
    """The payloads of a page ``client`` (sync or async) fetched."""
    return client._decode_page(fetched).payloads()


def count_entities(
    client: CloudTableClient,
    table: str,
    filter: FilterLike | None = None,
    *,
    parameters: Mapping[str, object] | None = None,
    progress: ProgressCallback | None = None,
    options: TableRequestOptions | None = None,
) -> int:
    """How many entities of ``table`` match ``filter`` (all when None); only their keys are read.

    ``progress(counted, None)`` is called after each page.
    """
    validate_table_name(table, cosmos=client.is_cosmos)
    count = 0
    for page in scan_pages(client, key_query(client.create_query(table, options=options), filter, parameters)):
        count += len(page)
        if progress is not None:
            progress(count, None)
    return count


def plan_deletes(pages: Iterable[list[EntityPayload]]) -> Iterator[Step]:
    """The entities of a key-only scan's pages, numbered in scan order, in batches of one partition
    of at most :data:`~tablesdk._formats._batch.MAX_BATCH_OPERATIONS` (a delete has no body to size)."""
    index = 0
    for page in pages:
        yield from page_deletes(page, index)
        index += len(page)


def page_deletes(page: list[EntityPayload], first_index: int) -> Iterator[list[BulkItem]]:
    """One scanned page's batches of deletes, its entities numbered from ``first_index``."""
    groups: dict[str, list[BulkItem]] = {}
    new = BulkItem.__new__
    for offset, payload in enumerate(page):
        item = new(BulkItem)
        item.index, item.payload, item.body = first_index + offset, None, b""
        item.entity = entity = entity_from_payload(DynamicEntity, payload)
        item.partition_key, item.row_key = entity.PartitionKey, entity.RowKey
        group = groups.setdefault(item.partition_key, [])
        group.append(item)
        if len(group) == MAX_BATCH_OPERATIONS:
            yield groups.pop(item.partition_key)
    yield from groups.values()


def delete_call(client: BulkTarget, table: str, conditional: bool, bulk: BulkOptions) -> BulkCall:
    """The bulk call of a delete (refusing bad arguments before any request)."""
    validate_table_name(table, cosmos=client.is_cosmos)
    if not isinstance(conditional, bool):
        raise TableValidationError("conditional", "conditional is a bool", f"got {type(conditional).__name__}")
    return BulkCall(table, BulkKind(DELETE, conditional), bulk, bulk.policy(client.retry_policy), None)


def delete_entities(
    client: CloudTableClient, table: str, filter: FilterLike | None, conditional: bool, bulk: BulkOptions,
    parameters: Mapping[str, object] | None = None,
) -> BulkResult:
    """Delete every entity of ``table`` matching ``filter`` (all when None); see the module's doc.

    ``progress(done, None)`` is called on the calling thread after each batch. Errors of
    the scan (a missing table, say) raise; each entity's own outcome is in the result.
    """
    call = delete_call(client, table, conditional, bulk)
    query = key_query(client.create_query(table, options=bulk.scan_options()), filter, parameters)
    return run_on_threads(client, call, plan_deletes(scan_pages(client, query)), "delete_entities")
