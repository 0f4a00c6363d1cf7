"""The long-running commands: export, import, copy, count and delete-entities.

Everything here is built on the client's public operations: queries page by
page (``query_page_payloads``), writes through ``bulk_insert``, counts and
deletes through ``count_entities`` and ``delete_entities``. Memory stays flat: one query
page at a time on the way out, ``bulk_insert``'s own bounded buffering (fed in
chunks, so the per-entity outcomes it keeps stay bounded too) on the way in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from .._clients._client import CloudTableClient
from .._entities._edm import EntityPayload
from .._entities._entity import DynamicEntity, entity_from_payload, entity_to_payload
from .._core._errors import TableServiceError
from .._queries._continuation import ContinuationToken
from .._queries._page_stream import stream_pages
from .._queries._pager import PageRequest, Pager
from .._queries._query import FetchedPage, TableQuery
from .._entities._filter import prop
from ._files import EntityLine, payload_json
from ._options import IMPORT_MODES
from ._progress import Progress

if TYPE_CHECKING:
    from ._import_state import ImportState

__all__ = [
    "IMPORT_CHUNK",
    "IMPORT_MODES",
    "EXISTING_CHECK_BLOCK",
    "EXISTING_CHECK_WINDOW",
    "ExistingKeys",
    "ImportSummary",
    "build_query",
    "copy_entities",
    "count_entities",
    "delete_entities",
    "import_entities",
    "pages",
]

#: Entities handed to one ``bulk_insert`` call: it keeps an outcome per entity, so a
#: file of any size goes through in calls of this many.
IMPORT_CHUNK = 20_000

#: ``--mode`` of import and copy -> ``bulk_insert`` mode. Imports never need the
#: entity to exist: ``upsert`` and ``merge`` are Insert Or Merge (the library's
#: ``upsert_entity`` default), ``replace`` is Insert Or Replace.
#: Error codes that, when every entity of the first chunk fails with them, stop an import: they
#: concern the table or the credential, not the entities.
_WHOLE_IMPORT_ERRORS = frozenset({
    "TableNotFound", "TableBeingDeleted", "AuthenticationFailed", "AuthorizationFailure",
    "AuthorizationPermissionMismatch", "AuthorizationResourceTypeMismatch",
})


#: Entities whose keys one ``--skip-existing`` look-up covers (one key-range query, keys only).
EXISTING_CHECK_BLOCK = 1000
#: Lines whose keys are sorted before they are looked up (what one ``bulk_insert`` chunk holds).
EXISTING_CHECK_WINDOW = IMPORT_CHUNK
#: A look-up reading more than this many keys per entity of its block (plus one page) is given up.
EXISTING_CHECK_SPAN = 4
#: Look-ups given up before ``--skip-existing`` stops trying them (the input is not in key order).
EXISTING_CHECK_GIVE_UP = 2


def build_query(
    client: CloudTableClient, table: str, filter: str | None = None, select: Iterable[str] | None = None,
    top: int | None = None,
) -> TableQuery[DynamicEntity]:
    """The query of a command: raw ``$filter`` text, projected properties and a cap."""
    query = client.create_query(table, DynamicEntity)
    if filter:
        query = query.where(filter)
    columns = tuple(select or ())
    if columns:
        query = query.select(*columns)
    if top is not None:
        query = query.take(top)
    return query


Page = tuple[list[EntityPayload], "ContinuationToken | None"]


def pages(
    client: CloudTableClient, query: TableQuery[Any], token: ContinuationToken | None = None, *,
    read_only: bool = False,
) -> Iterator[Page]:
    """Every page of ``query`` from ``token`` on, as payloads with the token of the next page.

    Follows continuation (also of empty pages); stops after the query's
    ``take`` cap; raises ContinuationCycleError when the service sends a token
already seen in this run (A, B, A would read the same pages forever).
    Pages are read as ``create_query`` reads them (:func:`tablesdk._queries._page_stream.stream_pages`,
    read-ahead included: the next page may be requested as soon as a page's
    answer arrives, before it is decoded, while the caller writes this one).
    At most two pages are held at a time: this one and the next one's undecoded answer. With
    ``read_only`` the payloads share their ``types`` dicts (:meth:`EntityPage.read_only_payloads`):
    for a caller that only reads them.
    """
    def decode(fetched: FetchedPage) -> list[EntityPayload]:
        page = client._decode_page(fetched)
        return page.read_only_payloads() if read_only else page.payloads()

    def fetch(request: PageRequest) -> FetchedPage:  # the HTTP stage only (may run on the read-ahead thread)
        return client.fetch_query_segment(query, request.token, request.top)

    pager = Pager(query.take_count, query.request_top, start=token)
    return stream_pages(pager, fetch, decode, query.reads_ahead, client)


def count_entities(client: CloudTableClient, query: TableQuery[Any], progress: Progress) -> int:
    """How many entities ``query`` matches (the library's ``count_entities``: only the keys are transferred)."""
    return client.count_entities(query.table, query.filter, progress=lambda counted, _total: progress.update(counted))


# ---------------------------------------------------------------- import


@dataclass
class ImportSummary:
    """What an import or copy did: entities read, written and failed, and the first failure."""

    read: int = 0
    written: int = 0
    failed: int = 0
    #: Entities that were in the table already (``--skip-existing``): done, not failed.
    skipped: int = 0
    #: Records a stopped import wrote already (``--resume``): skipped without asking the service.
    resumed: int = 0
    first_error: str | None = None
    rejects: IO[bytes] | None = field(default=None, repr=False)

    def reject(self, record: dict[str, Any], entity_json: bytes | None) -> None:
        """Count one failed entity and write it to the rejects file, with its error."""
        self.failed += 1
        if self.first_error is None:
            where = f"line {record['line']}" if record.get("line") else "entity"
            self.first_error = f"{where}: {record.get('code') or 'Error'}: {record['message']}"
        if self.rejects is None:
            return
        error = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if entity_json is None:
            line = b'{"tablesdk.error":' + error + b"}"
        else:
            line = entity_json[:-1] + b',"tablesdk.error":' + error + b"}"
        self.rejects.write(line + b"\n")


def error_record(error: BaseException, line: int | None = None) -> dict[str, Any]:
    """The ``tablesdk.error`` member of a rejects line: line, status, code and message."""
    record: dict[str, Any] = {}
    if line:
        record["line"] = line
    if isinstance(error, TableServiceError):
        record["status"] = error.status_code
        record["code"] = error.error_code
        record["message"] = error.message
    else:
        record["code"] = getattr(error, "error_code", None) or type(error).__name__
        record["message"] = str(error)
    return record


def _entity_json(entity: Any) -> bytes | None:
    try:
        return payload_json(entity_to_payload(entity, validate=False))
    except Exception:  # noqa: BLE001 - an entity the codec refuses is still reported, without its body
        return None


def is_existing_entity_error(error: BaseException | None) -> bool:
    """True for the 409 an insert of an entity that is in the table already gets."""
    return isinstance(error, TableServiceError) and error.status_code == 409 and (
        error.error_code in (None, "EntityAlreadyExists")
    )


class ExistingKeys:
    """``--skip-existing``: which entities of a block are in the table already, from one key-range query.

    Re-running an interrupted import would otherwise send every entity already
    written and have it refused with 409, one extra round trip each (81 s for
    20,000). The keys of a window of the input are sorted first (see
    :func:`_without_existing`), so a block of them spans a narrow key range
    whatever the input's order: one query of the keys in that range (RowKey
    only) answers for the whole block. When the table holds many more keys in
    that range than the block (a window of a large unsorted file, a sparse
    import into a full table), a look-up is given up after reading
    ``EXISTING_CHECK_SPAN`` keys per entity, and after ``EXISTING_CHECK_GIVE_UP``
    such blocks no more are tried: the entities that exist then still come back
    as 409, which the import counts as skipped too (as it does for one written meanwhile).
    """

    def __init__(self, client: CloudTableClient, table: str) -> None:
        self.client = client
        self.table = table
        self.given_up = 0

    def present(self, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
        """The keys of ``keys`` that the table holds (possibly not all of them: see the class)."""
        if not keys or self.given_up >= EXISTING_CHECK_GIVE_UP:
            return set()
        (low_pk, low_rk), (high_pk, high_rk) = min(keys), max(keys)
        pk, rk = prop("PartitionKey"), prop("RowKey")
        # Plain key bounds at the top level are what the service scans by (a filter of ORs
        # alone is evaluated over the whole table); the ORs narrow the edge partitions.
        if low_pk == high_pk:
            in_range = (pk == low_pk) & (rk >= low_rk) & (rk <= high_rk)
        else:
            in_range = (pk >= low_pk) & (pk <= high_pk) & (
                (pk > low_pk) | (rk >= low_rk)) & ((pk < high_pk) | (rk <= high_rk))
        query = self.client.create_query(self.table, DynamicEntity).where(in_range).select("RowKey")
        wanted = set(keys)
        found: set[tuple[str, str]] = set()
        budget = EXISTING_CHECK_SPAN * len(keys) + 1000
        for payloads, _ in pages(self.client, query):
            for payload in payloads:
                key = (payload.values["PartitionKey"], payload.values["RowKey"])
                if key in wanted:
                    found.add(key)
            budget -= len(payloads)
            if budget < 0:
                self.given_up += 1
                return found
        return found


def _keys(line: EntityLine) -> tuple[str, str] | None:
    entity = line[1]
    if isinstance(entity, DynamicEntity) and isinstance(entity.PartitionKey, str) and isinstance(entity.RowKey, str):
        return entity.PartitionKey, entity.RowKey
    return None  # unreadable, or keys the service will refuse: the import reports it


def _without_existing(
    lines: Iterable[EntityLine], existing: ExistingKeys, summary: ImportSummary,
    check: Callable[[EntityLine], bool] | None = None,
) -> Iterator[EntityLine]:
    """``lines`` less the entities the table holds already (counted as skipped), a window at a time.

    The keys of a window of ``EXISTING_CHECK_WINDOW`` lines (those ``check`` accepts; all
    without it) are sorted and looked up ``EXISTING_CHECK_BLOCK`` at a time: an input in
    any order costs about one key-only page per block, as a sorted one does. The window
    is what one ``bulk_insert`` chunk holds anyway; the lines come out in input order.
    """
    source = iter(lines)
    while True:
        window = [line for _, line in zip(range(EXISTING_CHECK_WINDOW), source)]
        if not window:
            return
        keys = sorted({key for line in window if check is None or check(line) if (key := _keys(line)) is not None})
        present: set[tuple[str, str]] = set()
        for start in range(0, len(keys), EXISTING_CHECK_BLOCK):
            present |= existing.present(keys[start:start + EXISTING_CHECK_BLOCK])
        for line in window:
            if present and _keys(line) in present and (check is None or check(line)):
                summary.read += 1
                summary.skipped += 1
                continue
            yield line


def _collect_written(state: ImportState, pending: list[tuple[int, Any]]) -> None:
    """Move the records of ``pending`` whose entity got its ETag (written) into the state's set."""
    if not pending:
        return
    written = [number for number, entity in pending if entity.etag is not None]
    if written:
        state.written.add(written)
        pending[:] = [(number, entity) for number, entity in pending if entity.etag is None]


def import_entities(
    client: CloudTableClient,
    table: str,
    lines: Iterable[EntityLine],
    mode: str,
    progress: Progress,
    summary: ImportSummary,
    *,
    workers: int = 8,
    chunk: int = IMPORT_CHUNK,
    skip_existing: bool = False,
    state: ImportState | None = None,
) -> ImportSummary:
    """Write the entities of ``lines`` through ``bulk_insert``, ``chunk`` entities per call.

    Lines that could not be read and entities the service refused go to the
    summary's rejects file with their error; nothing raises for one entity.
    With ``skip_existing`` (insert mode), an entity that is in the table already
    is done, not failed: it is counted in ``summary.skipped`` (looked up a window
    at a time by :class:`ExistingKeys`, or refused with 409 by its batch and
    singled out there). With ``state`` the records written are recorded in it
    (:mod:`tablesdk.cli._import_state`) and those it holds already are skipped;
    the ones a stopped run may have written are looked up (insert mode).
    """
    if state is not None:
        summary.resumed = state.resumed
        done = state.written
        lines = (line for line in lines if line[0] not in done)  # the file readers skip most before parsing
    check: Callable[[EntityLine], bool] | None = None
    if state is not None and not skip_existing and mode == "insert" and state.uncertain_through:
        uncertain = state.uncertain
        check = lambda line: uncertain(line[0])  # noqa: E731
    looked_up = skip_existing or check is not None
    source = iter(_without_existing(lines, ExistingKeys(client, table), summary, check) if looked_up else lines)
    exhausted = False
    while not exhausted:
        numbers: list[int] = []
        pending: list[tuple[int, Any]] = []  # handed to bulk_insert, not yet known to be written

        def entities() -> Iterator[DynamicEntity]:
            nonlocal exhausted
            for number, entity, raw in source:
                summary.read += 1
                if isinstance(entity, ValueError):  # unreadable: the text is kept for the user to fix
                    summary.reject({**error_record(entity, number), "code": "InvalidInput", "text": raw}, None)
                    continue
                numbers.append(number)
                if state is not None:
                    state.handing_out(number)
                    if isinstance(entity, DynamicEntity):  # its ETag will say it was written
                        entity.etag = None
                        pending.append((number, entity))
                yield entity
                if len(numbers) >= chunk:
                    return
            exhausted = True

        base = summary.resumed + summary.written + summary.failed + summary.skipped

        def answered(done: int, _total: int | None) -> None:
            progress.update(base + done)
            if state is not None and state.due():
                _collect_written(state, pending)
                state.save()

        try:
            result = client.bulk_insert(table, entities(), IMPORT_MODES[mode], workers,  # type: ignore[arg-type]
                                        progress=answered)
        except BaseException:
            if state is not None:  # interrupted: what the batches answered so far wrote is kept
                _collect_written(state, pending)
                state.stopped()
                state.save()
            raise
        if result.failed and not result.succeeded and not summary.written:
            first = result.failed[0].error
            if isinstance(first, TableServiceError) and first.error_code in _WHOLE_IMPORT_ERRORS and all(
                getattr(outcome.error, "error_code", None) == first.error_code for outcome in result.failed
            ):
                raise first  # nothing can be written: one error line, not a rejects file of every entity
        summary.written += len(result.succeeded)
        if state is not None:
            state.written.add(numbers[outcome.index] for outcome in result.succeeded)
            state.save()
        for outcome in result.failed:
            assert outcome.error is not None
            number = numbers[outcome.index]
            if is_existing_entity_error(outcome.error) and (
                    skip_existing or (check is not None and check((number, outcome.entity, "")))):
                summary.skipped += 1
                continue
            summary.reject(error_record(outcome.error, number), _entity_json(outcome.entity))
    return summary


#: The properties of client-side encryption's metadata (``tablesdk._encryption.METADATA_PROPERTIES``,
#: named here so that a copy without encryption loads nothing of the engine).
_METADATA = ("_ClientEncryptionMetadata1", "_ClientEncryptionMetadata2")


def with_encryption_metadata(select: tuple[str, ...]) -> tuple[str, ...]:
    """A copy's projection with the metadata of client-side encryption: a copy keeps an encrypted
    entity's ciphertext, which its metadata must go with to stay readable."""
    return tuple(dict.fromkeys((*select, *_METADATA))) if select else select


def without_null_metadata(payload: EntityPayload) -> EntityPayload:
    """``payload`` without the metadata a projection asked for and the entity does not have (nulls)."""
    values = payload.values
    if not any(name in values and values[name] is None for name in _METADATA):
        return payload
    return EntityPayload(
        {name: value for name, value in values.items() if not (name in _METADATA and value is None)},
        {name: edm for name, edm in payload.types.items() if not (name in _METADATA and values.get(name) is None)},
        payload.etag,
    )


def copy_entities(
    source: CloudTableClient,
    query: TableQuery[Any],
    target: CloudTableClient,
    table: str,
    mode: str,
    progress: Progress,
    summary: ImportSummary,
    *,
    workers: int = 8,
    skip_existing: bool = False,
) -> ImportSummary:
    """Stream the entities of ``query`` on ``source`` into ``table`` on ``target`` (bounded memory)."""

    def lines() -> Iterator[EntityLine]:
        for payloads, _ in pages(source, query):
            for payload in payloads:
                yield 0, entity_from_payload(DynamicEntity, without_null_metadata(payload)), ""

    return import_entities(target, table, lines(), mode, progress, summary, workers=workers,
                           skip_existing=skip_existing)


# ---------------------------------------------------------------- delete-entities


def delete_entities(
    client: CloudTableClient, query: TableQuery[Any], progress: Progress, *, workers: int = 4
) -> int:
    """Delete every entity ``query`` matches with the library's ``delete_entities`` (entity group
    transactions per partition, ``workers`` at once). Returns the number deleted; the first
    entity that could not be deleted raises its error."""
    result = client.delete_entities(
        query.table, query.filter, progress=lambda done, _total: progress.update(done), max_workers=workers
    )
    if result.failed:
        error = result.failed[0].error
        assert error is not None
        raise error
    return len(result.succeeded)
