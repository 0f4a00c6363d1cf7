"""Progress of long commands on stderr: entities done, rate and, when the total is known, ETA.

Drawn with rich (only imported when progress is shown), and only when asked
to or when stderr is a terminal, so pipes and logs get no control characters.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

__all__ = ["Progress", "progress_wanted"]


def progress_wanted(flag: bool | None) -> bool:
    """``--progress``/``--no-progress`` when given, else whether stderr is a terminal."""
    if flag is not None:
        return flag
    return sys.stderr.isatty()


class Progress:
    """A counter of entities shown on stderr while a command runs (a no-op when disabled).

    Use as a context manager; :meth:`update` takes the number done so far and
    the total when known.
    """

    def __init__(self, description: str, enabled: bool, total: int | None = None) -> None:
        self.description = description
        self.enabled = enabled
        self.total = total
        self.done = 0
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress as RichProgress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            console = Console(file=sys.stderr, force_terminal=True)  # asked for, or stderr is a terminal
            self._bar = RichProgress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(), TimeRemainingColumn(),
                console=console, transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.description, total=self.total, rate="")
        return self

    def update(self, done: int, total: int | None = None) -> None:
        """Record ``done`` entities finished (and the total, once known)."""
        self.done = done
        if total is not None:
            self.total = total
        if self._bar is not None:
            task = self._bar.tasks[0]
            speed = task.speed
            rate = f"{speed:,.0f}/s" if speed else ""
            self._bar.update(self._task, completed=done, total=self.total, rate=rate)

    def advance(self, count: int) -> None:
        """Add ``count`` entities to the number done."""
        self.update(self.done + count)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            if kind is None and self.total is not None and self.done != self.total:
                self.update(self.done, self.done)  # the total was an estimate: end at 100%
            self._bar.stop()
            self._bar = None
