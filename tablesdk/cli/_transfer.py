"""The long-running commands: export, import, copy, count and delete-entities.

Everything here is built on the client's public operations: queries page by
page (``query_page_payloads``), writes through ``bulk_insert``, counts and
deletes through ``count_entities`` and ``delete_entities``. Memory stays flat: one query
page at a time on the way out, ``bulk_insert``'s own bounded buffering (fed in
chunks, so the per-entity outcomes it keeps stay bounded too) on the way in.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any

from .._client import CloudTableClient
from .._edm import EntityPayload
from .._entity import DynamicEntity, entity_from_payload, entity_to_payload
from .._errors import TableServiceError
from .._continuation import ContinuationToken
from .._pager import Pager
from .._query import TableQuery
from ._files import EntityLine, payload_json
from ._progress import Progress

__all__ = [
    "IMPORT_CHUNK",
    "IMPORT_MODES",
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

IMPORT_MODES = {"insert": "insert", "upsert": "merge", "merge": "merge", "replace": "replace"}


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
    client: CloudTableClient, query: TableQuery[Any], token: ContinuationToken | None = None
) -> Iterator[Page]:
    """Every page of ``query`` from ``token`` on, as payloads with the token of the next page.

    Follows continuation (also of empty pages); stops after the query's
    ``take`` cap; raises ContinuationCycleError when the service sends a token
already seen in this run (A, B, A would read the same pages forever).
    The next page is requested as soon as a page arrives, on a helper thread,
    so the service prepares it while the caller handles this one: at most two
    pages are held at a time.
    """
    pager = Pager(query.take_count, query.request_top, start=token)

    def fetch(start: ContinuationToken | None, top: int | None) -> Page:
        return client.query_page_payloads(query, start, top, ignore_missing_entity=True)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tablesdk-page") as pool:
        future = pool.submit(fetch, *pager.first())
        while True:
            payloads, next_token = future.result()
            if next_token is not None:
                pager.follow(next_token)  # a token seen before in this export: a cycle
            payloads = pager.trim(payloads)
            if pager.done:
                next_token = None
            if next_token is not None:
                # The page arrived decoded, so what is still wanted is known exactly.
                future = pool.submit(fetch, *pager.request(next_token))
            yield payloads, next_token
            if next_token is None:
                return


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
) -> ImportSummary:
    """Write the entities of ``lines`` through ``bulk_insert``, ``chunk`` entities per call.

    Lines that could not be read and entities the service refused go to the
    summary's rejects file with their error; nothing raises for one entity.
    """
    source = iter(lines)
    exhausted = False
    while not exhausted:
        numbers: list[int] = []

        def entities() -> Iterator[DynamicEntity]:
            nonlocal exhausted
            for number, entity, raw in source:
                summary.read += 1
                if isinstance(entity, ValueError):  # unreadable: the text is kept for the user to fix
                    summary.reject({**error_record(entity, number), "code": "InvalidInput", "text": raw}, None)
                    continue
                numbers.append(number)
                yield entity
                if len(numbers) >= chunk:
                    return
            exhausted = True

        base = summary.written + summary.failed
        result = client.bulk_insert(
            table, entities(), IMPORT_MODES[mode], workers,  # type: ignore[arg-type]
            progress=lambda done, _total: progress.update(base + done),
        )
        if result.failed and not result.succeeded and not summary.written:
            first = result.failed[0].error
            if isinstance(first, TableServiceError) and first.error_code in _WHOLE_IMPORT_ERRORS and all(
                getattr(outcome.error, "error_code", None) == first.error_code for outcome in result.failed
            ):
                raise first  # nothing can be written: one error line, not a rejects file of every entity
        summary.written += len(result.succeeded)
        for outcome in result.failed:
            assert outcome.error is not None
            summary.reject(error_record(outcome.error, numbers[outcome.index]), _entity_json(outcome.entity))
    return summary


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
) -> ImportSummary:
    """Stream the entities of ``query`` on ``source`` into ``table`` on ``target`` (bounded memory)."""

    def lines() -> Iterator[EntityLine]:
        for payloads, _ in pages(source, query):
            for payload in payloads:
                yield 0, entity_from_payload(DynamicEntity, payload), ""

    return import_entities(target, table, lines(), mode, progress, summary, workers=workers)


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
