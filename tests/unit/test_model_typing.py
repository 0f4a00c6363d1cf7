"""Static typing of entity classes and model classes (issue 24.1): the files of tests/typing/ are
run through ``mypy --strict``. ``models_ok.py`` (correct user code) must pass with no ignores;
each ``# E: <code>`` comment of ``models_mistakes.py`` must be reported, at its line with that
error code, and nothing else."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TYPING = ROOT / "tests" / "typing"
_REPORTED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")


def _mypy(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--show-error-codes", *map(str, files)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )


def _expected(path: Path) -> set[tuple[int, str]]:
    found = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = re.search(r"# E: ([a-z-]+)", line)
        if match:
            found.add((number, match.group(1)))
    return found


def reported(output: str, path: Path) -> set[tuple[int, str]]:
    """(line, error code) of each error mypy reported in ``path``."""
    found = set()
    for line in output.splitlines():
        match = _REPORTED.match(line.strip())
        if match and Path(match["file"]).name == path.name:
            found.add((int(match["line"]), match["code"]))
    return found


def test_correct_user_code_passes_and_every_mistake_is_reported_where_expected() -> None:
    ok, mistakes = TYPING / "models_ok.py", TYPING / "models_mistakes.py"
    assert "type: ignore" not in ok.read_text(encoding="utf-8")
    done = _mypy(ok, mistakes)
    assert reported(done.stdout, ok) == set(), done.stdout + done.stderr
    expected = _expected(mistakes)
    assert expected, "the mistakes file names no expected error"
    assert reported(done.stdout, mistakes) == expected, done.stdout + done.stderr


def test_the_comparison_notices_a_missing_or_extra_error() -> None:
    output = "tests/typing/models_mistakes.py:3: error: Bad  [arg-type]\n"
    assert reported(output, TYPING / "models_mistakes.py") == {(3, "arg-type")}
    assert reported(output, TYPING / "models_ok.py") == set()
