"""``tablesdk export``: stream a table (or a query of it) into a JSON-lines or CSV file, resumably.

Memory stays flat: each page of the query is written as it arrives. The output
is written beside ``FILE`` (``FILE.XXXXXXXX.tablesdk-rows``, a new file of its
own; :mod:`tablesdk.cli._output` has the rules) and renamed onto it only when
the query is done, so a failed export leaves what was at ``FILE`` as it was.
After each page the rows are flushed and a small state file next to ``FILE``
(``FILE.tablesdk-resume``) records the rows file, the continuation token, the
rows' length at that point and, for CSV, the columns so far. ``--resume`` cuts
the rows back to that length and carries on from the token, so a page is never
written twice. A CSV file's header, which names every column, is only known at
the end: it is written first into the file that replaces ``FILE``, followed by
the rows. The state and rows files are removed once the export is complete.
A device, a FIFO or ``-`` is written as a stream (no resume).
"""

from __future__ import annotations

import io
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import IO, TYPE_CHECKING

from .._clients._client import CloudTableClient
from .._entities._edm import EdmType, EntityPayload
from .._entities._entity import DynamicEntity, entity_to_payload
from .._queries._continuation import ContinuationToken
from .._queries._parallel import find_partition_boundaries
from .._queries._query import TableQuery
from .._queries._watermark import ChangeTracker, since_filter
from ._files import CsvColumns, csv_header, csv_row, first_row_width, json_codec, pad_csv_rows, payload_json
from ._output import OutputFileError, OutputPath, output_path, replace_small_file
from ._progress import Progress
from ._since import kept_changes, kept_entities
from ._transfer import build_query, pages

if TYPE_CHECKING:
    from ._filter_check import NumberFilterCheck

__all__ = ["RESUME_SUFFIX", "ROWS_SUFFIX", "ExportError", "ExportSpec", "ExportOutput", "KeyRange", "export_table"]

RESUME_SUFFIX = ".tablesdk-resume"
ROWS_SUFFIX = ".tablesdk-rows"
_STATE_VERSION = 2
#: PartitionKey ranges per reader of ``--parallel``: ranges of unequal size even out.
RANGES_PER_READER = 4


class ExportError(ValueError):
    """An export that cannot start as asked (an unfinished one in the way, a state of another query)."""


@dataclass(frozen=True)
class ExportSpec:
    """What is exported: table, raw ``$filter``, projected properties and file format."""

    table: str
    filter: str | None
    select: tuple[str, ...]
    file_format: str


@dataclass
class KeyRange:
    """A PartitionKey range being read (``low`` inclusive, ``high`` exclusive; None is open) and its progress."""

    low: str | None = None
    high: str | None = None
    token: str | None = None
    done: bool = False

    def continuation(self) -> ContinuationToken | None:
        """Where reading this range resumes (None: at its start)."""
        return ContinuationToken.from_string(self.token) if self.token else None


@dataclass
class ExportOutput:
    """The file being written, its resume state and the CSV columns seen so far."""

    spec: ExportSpec
    output: OutputPath
    data: IO[bytes]
    ranges: list[KeyRange]
    count: int = 0
    columns: CsvColumns = field(default_factory=CsvColumns)
    state_path: str | None = None
    #: The rows written beside the output (None: written to a stream, or spooled to an anonymous file).
    rows_path: str | None = None
    timestamp: bool = False
    #: Pages written since the state file was last saved, and whether the output and ranges agree now.
    unsaved: bool = False
    consistent: bool = True
    #: The ``--filter`` warning's look at the pages (:mod:`tablesdk.cli._filter_check`).
    check: NumberFilterCheck | None = None
    #: An incremental export's rows seen so far and its next watermark (None: every row is written).
    changes: ChangeTracker | None = None

    @classmethod
    def open(cls, spec: ExportSpec, target: str, resume: bool, ranges: list[KeyRange], *,
             overwrite: bool = False) -> ExportOutput:
        """Start (or, with ``resume`` and a state file present, continue) writing ``target``."""
        output = output_path(target, overwrite=overwrite)
        if output.stream:
            if resume:
                what = "'-'" if target == "-" else f"{target} (not a regular file)"
                raise ExportError(f"--resume needs an output file (its state is kept next to it), not {what}")
            if spec.file_format == "jsonl":
                data = output.open_stream()
            else:
                import tempfile  # shutil and tempfile (bz2, lzma, random) load when exporting, not for --help

                data = tempfile.TemporaryFile()
            return cls(spec, output, data, ranges)
        state_path = output.path + RESUME_SUFFIX
        if os.path.exists(state_path):
            if not resume:
                raise ExportError(
                    f"an unfinished export to {target} exists: pass --resume to continue it, "
                    f"or delete {state_path} to start over"
                )
            return cls._resume(spec, output, state_path)
        if resume:  # said, not silent: a typo in FILE would otherwise export the whole table again
            sys.stderr.write(f"tablesdk: no unfinished export to {target} ({state_path} is missing): "
                             "starting a new one\n")
        data, rows_path = output.beside(ROWS_SUFFIX)
        return cls(spec, output, data, ranges, state_path=state_path, rows_path=rows_path)

    @classmethod
    def _resume(cls, spec: ExportSpec, output: OutputPath, state_path: str) -> ExportOutput:
        with open(state_path, encoding="utf-8") as handle:
            state = json.load(handle)
        if state.get("version") != _STATE_VERSION:
            raise ExportError(f"{state_path} was written by another version of tablesdk: delete it (and the "
                              f"{ROWS_SUFFIX} file next to it) and export again")
        saved = state.get("spec", {})
        if ExportSpec(**{**saved, "select": tuple(saved.get("select", ()))}) != spec:
            raise ExportError(
                f"{state_path} is the state of another export ({saved}); run the same export "
                "again with --resume, or delete the state file to start over"
            )
        rows_name = os.path.basename(str(state.get("rows", "")))
        if not (rows_name.startswith(os.path.basename(output.path) + ".") and rows_name.endswith(ROWS_SUFFIX)):
            raise ExportError(f"{state_path} names no rows file of this export ({rows_name!r}): "
                              "delete it to start over")
        rows_path = os.path.join(os.path.dirname(state_path), rows_name)
        # The export's own file: never a link (truncating through it would cut another file).
        data = os.fdopen(os.open(rows_path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)),
                         "r+b")
        data.truncate(state["offset"])  # drop what was written after the last checkpoint
        data.seek(state["offset"])
        columns = CsvColumns((name, EdmType(edm)) for name, edm in state["columns"][2:])
        ranges = [KeyRange(**item) for item in state["ranges"]]
        return cls(spec, output, data, ranges, state["count"], columns, state_path, rows_path)

    def write_page(self, payloads: list[EntityPayload]) -> None:
        """Append one page of entities in the file format."""
        if not payloads:
            return
        if self.spec.file_format == "jsonl":
            if self.timestamp:
                lines = [payload_json(p, timestamp=True) for p in payloads]
                lines.append(b"")
                self.data.write(b"\n".join(lines))
            else:  # the codec's own bytes, the export's hot path
                self.data.write(json_codec().serialize_entity_lines(payloads))
        else:
            columns, stamp = self.columns, self.timestamp
            self.data.write("".join([csv_row(p, columns, timestamp=stamp) for p in payloads]).encode("utf-8"))
        self.count += len(payloads)

    def checkpoint(self) -> None:
        """Flush the output, and save how far each range got.

        Called after every page, so the state file never lags the rows by more than the
        page being written: a killed export re-reads at most one page per range. The
        state file is replaced atomically (a temporary file renamed onto it): about
        0.15 ms of CPU and 1 ms of wall time on a busy disk, under 1% of a page of
        1,000 entities.
        """
        self.data.flush()
        if self.state_path is None:
            return
        state = {
            "version": _STATE_VERSION,
            "spec": asdict(self.spec),
            "rows": os.path.basename(self.rows_path or ""),
            "offset": self.data.tell(),
            "count": self.count,
            "columns": [[name, edm.value] for name, edm in self.columns.columns],
            "ranges": [asdict(item) for item in self.ranges],
        }
        replace_small_file(self.state_path, json.dumps(state).encode("utf-8"))
        self.unsaved = False

    def finish(self) -> None:
        """Complete the output (CSV: header, then the rows), put it in place and remove the resume state.

        Until the output is in place the rows and the state stay, so an export refused at
        the end (a file appeared at the path) can still be finished with ``--resume``.
        """
        self.data.flush()
        try:
            if self.spec.file_format == "csv":
                self._assemble_csv()
            elif self.rows_path is not None:
                self.data.close()
                self.output.install(self.rows_path)
        except OutputFileError:
            raise OutputFileError(f"{self.output.given} appeared while the export ran; it was left as it is: "
                                  "run the same command with --resume --overwrite to replace it") from None
        if self.state_path is not None:
            os.remove(self.state_path)

    def _assemble_csv(self) -> None:
        header = csv_header(self.columns).encode("utf-8")
        self.data.seek(0)
        if self.output.stream:
            out = self.output.open_stream()
            try:
                out.write(header)
                self._copy_rows(out)
            finally:
                self.output.close_stream(out)
            self.data.close()
            return
        out, assembled = self.output.beside(".tablesdk-tmp")
        try:
            with out:
                out.write(header)
                self._copy_rows(out)
            self.output.install(assembled)
        finally:
            if os.path.exists(assembled):
                os.remove(assembled)
        self.data.close()
        if self.rows_path is not None:
            os.remove(self.rows_path)

    def _copy_rows(self, out: IO[bytes]) -> None:
        """The spooled rows into ``out``; padded with empty cells when columns came after them.

        Columns are only ever added, so when the first row has every column all
        rows do, and the rows are copied as they are (the usual case, at disk speed).
        """
        width = len(self.columns.columns)
        first = self.data.read(1 << 16).decode("utf-8", "replace")
        self.data.seek(0)
        if first_row_width(first) >= width or not first:
            import shutil

            shutil.copyfileobj(self.data, out, 1 << 20)
            return
        rows = io.TextIOWrapper(self.data, encoding="utf-8", newline="")
        for row in pad_csv_rows(rows, width):
            out.write(row.encode("utf-8"))
        rows.detach()

    def close(self) -> None:
        """Release the output; unfinished rows stay for ``--resume`` if a page was saved, else go.

        Only the export's own files (rows, state) are ever removed: never the output path.
        """
        if self.data.closed or self.data is sys.stdout.buffer:  # stdout: flushed by finish, or its reader is gone
            return
        if self.output.stream:
            if self.spec.file_format == "jsonl":
                self.output.close_stream(self.data)
            else:
                self.data.close()
            return
        if self.unsaved and self.consistent:  # stopped between pages: keep everything written so far
            self.checkpoint()
        self.data.close()
        if self.state_path is not None and not os.path.exists(self.state_path) and self.rows_path is not None:
            os.remove(self.rows_path)  # failed before its first page: nothing to resume


def export_table(
    client: CloudTableClient, spec: ExportSpec, target: str, *, resume: bool, progress: Progress, parallel: int = 1,
    overwrite: bool = False, check: NumberFilterCheck | None = None,
    changes: ChangeTracker | None = None,
) -> int:
    """Write every entity of the export's query to ``target`` (a path or '-'); returns how many.

    With ``parallel`` > 1 the table is cut into PartitionKey ranges (several
    per reader) that ``parallel`` readers read at once; a resumed export keeps
    the ranges it started with. With ``changes`` only the rows changed after its
    watermark are written, and it holds the next watermark after the export.
    """
    output = ExportOutput.open(spec, target, resume, [], overwrite=overwrite)
    output.check = check
    output.changes = changes
    try:
        query = build_query(client, spec.table, spec.filter, spec.select)
        condition = None if changes is None else since_filter(changes.since)
        if condition is not None:
            query = query.where(condition)
        if not output.ranges:
            output.ranges = _key_ranges(query, parallel)
        progress.update(output.count)
        if len(output.ranges) > 1:
            _read_ranges(query, output, progress, parallel)
        elif not output.ranges[0].done:
            key_range = output.ranges[0]
            # The pages are written and dropped, never changed: no copy of each entity's types.
            for payloads, token in pages(client, query, key_range.continuation(), read_only=True):
                if changes is not None:
                    payloads = kept_changes(changes, payloads)
                _written(output, key_range, payloads, token, progress)
        output.finish()
    finally:
        output.close()
    return output.count


def _key_ranges(query: TableQuery[DynamicEntity], parallel: int) -> list[KeyRange]:
    if parallel <= 1:
        return [KeyRange()]
    boundaries = find_partition_boundaries(query, parallel * RANGES_PER_READER, workers=parallel)
    bounds: list[str | None] = [None, *boundaries, None]
    return [KeyRange(low, high) for low, high in zip(bounds[:-1], bounds[1:])]


def _read_ranges(query: TableQuery[DynamicEntity], output: ExportOutput, progress: Progress, parallel: int) -> None:
    """Read the unfinished ranges ``parallel`` at a time, writing each page as it arrives."""
    boundaries = [key_range.low for key_range in output.ranges[1:] if key_range.low is not None]
    unfinished = {index: key_range.continuation() for index, key_range in enumerate(output.ranges) if not key_range.done}
    if not unfinished:
        return
    segments = query.iter_parallel_segments(max(1, parallel), boundaries=boundaries, resume=unfinished)
    for index, segment in segments:
        entities = segment.results if output.changes is None else kept_entities(output.changes, segment.results)
        payloads = [entity_to_payload(entity, validate=False) for entity in entities]
        _written(output, output.ranges[index], payloads, segment.continuation_token, progress)


def _written(
    output: ExportOutput, key_range: KeyRange, payloads: list[EntityPayload],
    token: ContinuationToken | None, progress: Progress,
) -> None:
    """Write one page of ``key_range`` and record where the range goes on (or that it is done)."""
    if output.check is not None:
        output.check.page(payloads)
    output.consistent = False
    output.write_page(payloads)
    key_range.token = token.to_string() if token is not None else None
    key_range.done = token is None
    output.consistent = output.unsaved = True
    output.checkpoint()
    progress.update(output.count)
