"""``tablesdk export --since`` and ``--since-state``: an export of the rows changed after a watermark,
and the file that keeps the next watermark between runs.

The state file holds :meth:`~tablesdk.Watermark.to_string`'s text. It is read when it exists (else
``--since``, else the whole table is exported), and replaced only after the export succeeded,
atomically and under the output rules of :mod:`tablesdk.cli._output` (a symbolic link is followed,
the file's permissions are kept; it must be a regular file): a failed export leaves it as it was,
and the next run reads the same changes again.
"""

from __future__ import annotations

import os

from .._core._errors import TableValidationError
from .._entities._edm import EntityPayload
from .._entities._entity import DynamicEntity
from .._queries._watermark import ChangeTracker, Watermark, ticks_of
from ._output import OutputFileError, output_path

__all__ = ["check_since_state", "read_since", "write_since_state", "kept_changes", "kept_entities"]


def read_since(since: str | None, state_file: str | None) -> Watermark | None:
    """The watermark an export starts from: the state file's when it exists, else ``--since``'s text, else
    None (no ``--since`` options: every row)."""
    if state_file is not None and os.path.exists(state_file):
        with open(state_file, encoding="utf-8") as handle:
            text = handle.read()
        try:
            return Watermark.from_string(text)
        except TableValidationError as exc:
            raise TableValidationError("--since-state", f"{state_file} holds no watermark", str(exc)) from None
    if since is not None:
        try:
            return Watermark.from_string(since)
        except TableValidationError as exc:
            raise TableValidationError(
                "--since", "an Edm.DateTime such as 2024-01-02T03:04:05.1234567Z, or a watermark's text", str(exc)
            ) from None
    return Watermark.start() if state_file is not None else None


def check_since_state(state_file: str, output: str) -> None:
    """Refuse, before the export, a state file where the watermark cannot be kept: not a regular file
    (stdout, a device), or the export's own output (directly or through a link), which the
    watermark would replace once the export is written."""
    state = output_path(state_file, overwrite=True)
    if state.stream:
        raise OutputFileError(f"--since-state {state_file}: the watermark is kept in a regular file")
    if output == "-":
        return
    same = os.path.realpath(state_file) == os.path.realpath(output)
    if not same and os.path.exists(state_file) and os.path.exists(output):
        same = os.path.samefile(state_file, output)
    if same:
        raise OutputFileError(f"--since-state {state_file} is the export's output file {output}: the watermark "
                              "would replace the exported rows; keep it in a file of its own")


def write_since_state(state_file: str, watermark: Watermark) -> None:
    """Replace ``state_file`` with ``watermark``'s text, atomically."""
    output = output_path(state_file, overwrite=True)
    if output.stream:
        raise OutputFileError(f"--since-state {state_file}: the watermark is kept in a regular file")
    handle, temporary = output.beside(".tmp")
    try:
        with handle:
            handle.write((watermark.to_string() + "\n").encode("utf-8"))
        output.install(temporary)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def kept_changes(tracker: ChangeTracker, payloads: list[EntityPayload]) -> list[EntityPayload]:
    """The payloads of a page that an earlier export did not write (each recorded for the next watermark)."""
    kept = []
    for payload in payloads:
        values = payload.values
        stamp = values.get("Timestamp")
        if payload.etag is None or stamp is None:
            raise TableValidationError("--since", "an incremental export needs each row's ETag and Timestamp")
        if tracker.keep(values["PartitionKey"], values["RowKey"], payload.etag, ticks_of(stamp)):
            kept.append(payload)
    return kept


def kept_entities(tracker: ChangeTracker, entities: list[DynamicEntity]) -> list[DynamicEntity]:
    """:func:`kept_changes` of a page of entities (the ranges of ``--parallel``)."""
    kept = []
    for entity in entities:
        if entity.etag is None or entity.Timestamp is None:
            raise TableValidationError("--since", "an incremental export needs each row's ETag and Timestamp")
        if tracker.keep(entity.PartitionKey, entity.RowKey, entity.etag, ticks_of(entity.Timestamp)):
            kept.append(entity)
    return kept
