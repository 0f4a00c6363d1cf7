"""``tablesdk import``: the input read (JSON lines, CSV with or without inferred types, Parquet), the
resume state (:mod:`tablesdk.cli._import_state`) and what is said when the import stops."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Container, Iterator
from typing import Any

import click

from ._files import PARQUET, read_csv, read_jsonl
from ._import_state import STATE_SUFFIX, ImportSpec, ImportState
from ._options import Settings

__all__ = ["entity_lines", "open_state", "record_estimate", "resume_command", "stopped"]


def entity_lines(path: str, file_format: str, skip: Container[int] = (), types: Any = None) -> Iterator[Any]:
    """The import lines of a JSON-lines or CSV input (``-``: stdin), less the records in ``skip``."""
    if file_format == "csv":
        if path == "-":
            handle: Any = open(sys.stdin.fileno(), encoding="utf-8-sig", newline="", closefd=False)
        else:
            handle = open(path, encoding="utf-8-sig", newline="")
        with handle:
            yield from read_csv(handle, skip, types)
    else:
        with (open(sys.stdin.fileno(), "rb", closefd=False) if path == "-" else open(path, "rb")) as binary:
            yield from read_jsonl(binary, skip)


def record_estimate(path: str, file_format: str) -> int | None:
    """Entities in an input file, for the progress display's ETA: its lines (less the CSV header).

    Exact for JSON lines without blank lines; CSV cells spanning lines make it an overestimate.
    """
    if path == "-" or not os.path.isfile(path):
        return None
    if file_format == PARQUET:
        from ._parquet import parquet_rows

        return parquet_rows(path)
    lines, last = 0, b"\n"
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            lines += block.count(b"\n")
            last = block[-1:]
    lines += last != b"\n"
    return max(0, lines - 1) if file_format == "csv" else lines


def infer_types(path: str) -> dict[str, Any]:
    """``--infer-types``: the CSV file read once for the types of its columns (said on stderr)."""
    from ._infer import infer_csv_types, inferred_text

    with open(path, encoding="utf-8-sig", newline="") as handle:
        inferred = infer_csv_types(handle)
    click.echo(inferred_text(inferred), err=True)
    return inferred


def open_state(path: str, state_file: str | None, spec: ImportSpec, resume: bool, command: str) -> ImportState | None:
    """The import's state: beside FILE (``FILE.tablesdk-import``) or at ``--state-file``; none for stdin
    without ``--state-file``."""
    if state_file is None and path == "-":
        if resume:
            raise click.UsageError("--resume of an import from '-' needs the --state-file it was started with")
        return None
    if state_file is None:
        target = os.path.realpath(path) if os.path.islink(path) else path
        state_file = target + STATE_SUFFIX
    return ImportState.open(state_file, spec, path, resume, command)


def resume_command(argv: list[str], settings: Settings) -> str:
    """The command line that continues this import: the one given, with ``--resume`` (and ``--overwrite``
    for a rejects file: the resumed run retries the failed entities, so its rejects replace the stopped
    run's). Secrets in it are shown as REDACTED, with a word on where they go."""
    words = list(argv)
    if "--resume" not in words:
        words.append("--resume")
    if any(word == "--rejects" or word.startswith("--rejects=") for word in words) and "--overwrite" not in words:
        words.append("--overwrite")
    shown = [settings.redact(word) for word in words]
    line = "tablesdk " + shlex.join(shown)
    if shown != words:
        line += " (with your secret in place of REDACTED, or the connection string in AZURE_STORAGE_CONNECTION_STRING)"
    return line


def stopped(state: ImportState | None, argv: list[str], settings: Settings, written: int) -> None:
    """Say on stderr how to go on after an import stopped (interrupted, or an error)."""
    if state is not None and state.exists():
        if not len(state.written):  # nothing written: nothing to resume
            state.remove()
            return
        click.echo(f"tablesdk: the import stopped after writing {written} entities ({len(state.written)} in all, "
                   f"recorded in {state.path}); to continue it: {resume_command(argv, settings)}", err=True)
    elif written:
        click.echo(f"tablesdk: the import stopped after writing {written} entities; run it again with "
                   "--skip-existing to go on (the entities in the table already are skipped)", err=True)
