"""``tablesdk import --resume``: which records of the input an import has written, in a state file.

An import keeps a small JSON file beside its input (``FILE.tablesdk-import``, or where
``--state-file`` says) recording the records of the input it has written, by number
(the line a record starts on for JSON lines and CSV, the row for Parquet), as
intervals. Numbers, not keys: the input need not be in key order, and ``bulk_insert``
writes partitions in any order. A resumed import skips the recorded records without
asking the service. The file also records ``read_through``: no record after it was
handed to the service, so a record before it that is not recorded may have been
written by a batch in flight when the import stopped (or since the last save): those
few are looked up (``--mode insert``) or written again (the other modes overwrite).

Which entities a batch wrote is seen from their ETags: ``bulk_insert`` gives each
written entity its new ETag on the calling thread, before its progress call. The
state is saved atomically (a file renamed onto it) at most every
:data:`SAVE_SECONDS`, when the reading passes ``read_through``, after each chunk and
when the import stops; a kill loses at most the records written since the last save,
and those are among the ones looked up again.
"""

from __future__ import annotations

import json
import os
import time
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ._output import replace_small_file

__all__ = ["READ_AHEAD", "SAVE_SECONDS", "STATE_SUFFIX", "ImportSpec", "ImportState", "ImportStateError", "RecordSet"]

STATE_SUFFIX = ".tablesdk-import"
_VERSION = 1
#: Seconds between saves while batches are answered (a save: ~0.15 ms of CPU, ~1 ms on a busy disk).
SAVE_SECONDS = 0.2
#: Records read past ``read_through`` before it is moved on (and the state saved).
READ_AHEAD = 5000


class ImportStateError(ValueError):
    """An import that cannot start as asked (an unfinished one in the way, a state of another import)."""


@dataclass(frozen=True)
class ImportSpec:
    """What an import writes where: a resumed import must be the same one."""

    table: str
    endpoint: str
    mode: str
    file_format: str
    infer_types: bool = False


class RecordSet:
    """A set of record numbers as sorted, disjoint, inclusive intervals (an input in order is one interval)."""

    def __init__(self, flat: Iterable[int] = ()) -> None:
        values = list(flat)
        self.starts: list[int] = values[0::2]
        self.ends: list[int] = values[1::2]

    def __contains__(self, number: object) -> bool:
        if not isinstance(number, int):
            return False
        index = bisect_right(self.starts, number) - 1
        return index >= 0 and number <= self.ends[index]

    def __len__(self) -> int:
        return sum(end - start + 1 for start, end in zip(self.starts, self.ends))

    def add(self, numbers: Iterable[int]) -> None:
        """Add ``numbers`` (any order), merging touching intervals."""
        merged: list[list[int]] = []
        new = sorted(set(numbers))
        spans = sorted([*zip(self.starts, self.ends), *((n, n) for n in new)])
        for start, end in spans:
            if merged and start <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.starts = [span[0] for span in merged]
        self.ends = [span[1] for span in merged]

    def flat(self) -> list[int]:
        """``[start, end, start, end, ...]``: the form kept in the state file."""
        return [value for span in zip(self.starts, self.ends) for value in span]


def input_identity(path: str) -> Any:
    """What tells a changed input apart: size and modification time (of each file of a directory)."""
    if os.path.isdir(path):
        return sorted([name, *_stat(os.path.join(path, name))] for name in os.listdir(path)
                      if os.path.isfile(os.path.join(path, name)))
    return _stat(path)


def _stat(path: str) -> list[int]:
    status = os.stat(path)
    return [status.st_size, status.st_mtime_ns]


class ImportState:
    """The records written so far and the bound of those handed to the service, saved at ``path``."""

    def __init__(self, path: str, spec: ImportSpec, identity: Any) -> None:
        self.path = path
        self.spec = spec
        self.identity = identity
        self.written = RecordSet()
        #: No record after this one was handed to the service (by this run or a stopped one).
        self.read_through = 0
        #: ``read_through`` of the stopped run: records up to it that are not in ``written`` are uncertain.
        self.uncertain_through = 0
        #: Records the stopped runs wrote (skipped by this one).
        self.resumed = 0
        self.broken: str | None = None
        #: The last record this run handed to the service.
        self.handed = 0
        self._saved_at = 0.0

    @classmethod
    def open(cls, path: str, spec: ImportSpec, input_path: str, resume: bool, command: str) -> ImportState | None:
        """The state of this import: continued with ``resume`` from ``path``, else new (``command``: the
        command line that resumes it, for the message refusing to start over).

        Without ``resume`` an existing state file is refused (the import it records has not
        finished); with ``resume`` and none, a new import starts and says so.
        """
        identity = None if input_path == "-" else input_identity(input_path)
        if os.path.exists(path):
            if not resume:
                raise ImportStateError(
                    f"an unfinished import of {input_path} exists ({path}): to continue it (the entities it "
                    f"wrote are skipped) run: {command}; or delete {path} to start over")
            return cls._load(path, spec, identity, input_path)
        if resume:
            import sys

            sys.stderr.write(f"tablesdk: no unfinished import of {input_path} ({path} is missing): "
                             "importing every entity\n")
        return cls(path, spec, identity)

    @classmethod
    def _load(cls, path: str, spec: ImportSpec, identity: Any, input_path: str) -> ImportState:
        with open(path, encoding="utf-8") as handle:
            try:
                saved = json.load(handle)
            except ValueError:
                raise ImportStateError(f"{path} is no import state: delete it to start over") from None
        if not isinstance(saved, dict) or saved.get("version") != _VERSION:
            raise ImportStateError(f"{path} was written by another version of tablesdk: delete it to start over "
                                   "(--skip-existing then skips the entities in the table already)")
        recorded = ImportSpec(**saved["spec"])
        if recorded != spec:
            raise ImportStateError(
                f"{path} is the state of another import ({_spec_text(recorded)}; this one: {_spec_text(spec)}): "
                "run that import again with --resume, or delete the state file to start over")
        if identity is not None and saved.get("input") != identity:
            raise ImportStateError(
                f"{input_path} changed since the import stopped (its size or modification time): the recorded "
                f"line numbers may be other entities now; delete {path} and import with --skip-existing")
        state = cls(path, spec, identity)
        state.written = RecordSet(saved["written"])
        state.read_through = state.uncertain_through = int(saved["read_through"])
        state.resumed = len(state.written)
        return state

    def uncertain(self, number: int) -> bool:
        """Whether a record not recorded as written may have been written by the stopped run."""
        return number <= self.uncertain_through

    def handing_out(self, number: int) -> None:
        """Record ``number`` is about to go to the service: first move ``read_through`` past it (saved)."""
        self.handed = max(self.handed, number)
        if number > self.read_through:
            self.read_through = number + READ_AHEAD
            self.save()

    def stopped(self) -> None:
        """The writing stopped (every batch sent has been answered): ``read_through`` comes back to the last
        record handed out, so a resumed import looks up only those that may have been written."""
        self.read_through = max(self.handed, self.uncertain_through)

    def due(self) -> bool:
        """Whether :data:`SAVE_SECONDS` have passed since the last save."""
        return time.monotonic() - self._saved_at >= SAVE_SECONDS

    def save(self) -> None:
        """Replace the state file (atomically). A directory that takes no file: said once, then the import
        goes on without a state (it cannot be resumed, ``--skip-existing`` still can)."""
        if self.broken is not None:
            return
        state = {"version": _VERSION, "spec": asdict(self.spec), "input": self.identity,
                 "read_through": self.read_through, "written": self.written.flat()}
        try:
            replace_small_file(self.path, json.dumps(state, separators=(",", ":")).encode("utf-8"))
        except (OSError, ValueError) as exc:  # ValueError: _output's OutputFileError (a directory not writable)
            self.broken = str(getattr(exc, "strerror", None) or exc)
            import sys

            sys.stderr.write(f"tablesdk: warning: cannot keep the import's state in {self.path} ({self.broken}): "
                             "an interrupted import then cannot be resumed (pass --state-file PATH elsewhere)\n")
            return
        self._saved_at = time.monotonic()

    def exists(self) -> bool:
        """Whether a state file is there to resume from."""
        return self.broken is None and os.path.exists(self.path)

    def remove(self) -> None:
        """The import is complete: its state goes."""
        if os.path.exists(self.path):
            os.remove(self.path)


def _spec_text(spec: ImportSpec) -> str:
    infer = ", --infer-types" if spec.infer_types else ""
    return f"table {spec.table} at {spec.endpoint}, --mode {spec.mode}, {spec.file_format}{infer}"
