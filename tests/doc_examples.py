"""The Python blocks of README.md and docs/*.md, as tests and as modules for mypy.

Run as tests: the root ``conftest.py`` hands every ``README.md`` and ``docs/*.md`` to Sybil with
the parsers below. The blocks of one document run in order in one namespace, against a bundled
emulator (``tablesdk.devstore``) started for that document alone, with these names predefined:

* ``conn_str``: the emulator's connection string (account ``devstoreaccount1``);
* ``client``: a JSON :class:`~tablesdk.CloudTableClient` on it.

Markers, as HTML comments (invisible on GitHub):

* ``<!-- invisible-code-block: python ... -->`` runs setup code the reader does not need to see;
* ``<!-- real-account: next -->`` (or ``start`` ... ``end``) marks blocks that need a real
  storage account: they are type-checked but not run;
* ``<!-- skip: next -->`` is Sybil's own skip, for blocks that are not meant to run at all.

Type-check: ``python -m tests.doc_examples`` runs ``mypy --strict`` over one module per
document (the predefined names declared with their types, then every block in order, hidden
and real-account blocks included) and reports errors at the document's own lines;
``scripts/test.sh`` runs it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sybil import Document, Region, Sybil
from sybil.parsers.abstract.lexers import LexerCollection
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser
from sybil.evaluators.skip import Skipper
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer

ROOT = Path(__file__).resolve().parent.parent
PATTERNS = ("README.md", "docs/*.md")
REAL_ACCOUNT_REASON = "needs a real Azure storage account"

# What a document's blocks may use without defining it, as mypy sees it.
PRELUDE = "from tablesdk import CloudTableClient; conn_str: str; client: CloudTableClient  # noqa"


class RealAccountParser(SkipParser):
    """``<!-- real-account: next|start|end -->``: Sybil's skip, always on, with a fixed reason."""

    directive = "real-account"

    def __init__(self) -> None:
        super().__init__()
        self.lexers = LexerCollection([DirectiveInHTMLCommentLexer(self.directive)])

    def __call__(self, document: Document) -> Any:
        for region in super().__call__(document):
            action, _ = region.parsed
            # The skipper evaluates the reason as Python; a string literal always skips.
            reason = None if action == "end" else repr(REAL_ACCOUNT_REASON)
            yield Region(region.start, region.end, (action, reason), region.evaluator)


def parsers() -> list[Any]:
    """Sybil parsers for the documentation: Python blocks, skips and real-account markers."""
    return [PythonCodeBlockParser(), SkipParser(), RealAccountParser()]


def setup(namespace: dict[str, Any]) -> None:
    """Start an emulator for one document and predefine ``conn_str`` and ``client``."""
    from tablesdk import CloudStorageAccount
    from tablesdk.devstore import DevStore

    store = DevStore(port=0)
    store.__enter__()
    namespace["_devstore"] = store
    namespace["conn_str"] = store.connection_string
    namespace["client"] = CloudStorageAccount.parse(store.connection_string).create_cloud_table_client()


def teardown(namespace: dict[str, Any]) -> None:
    """Close the document's client and stop its emulator."""
    namespace["client"].close()
    namespace["_devstore"].__exit__(None, None, None)


def make_sybil() -> Sybil:
    """The Sybil instance the root conftest.py collects README.md and docs/*.md with."""
    return Sybil(parsers=parsers(), patterns=list(PATTERNS), path=str(ROOT), setup=setup, teardown=teardown)


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """(first line, source) of every Python block of a document, hidden ones included, in order."""
    document = Document.parse(str(path), *parsers())
    blocks = []
    for example in document:
        region = example.region
        if isinstance(region.evaluator, Skipper):
            continue
        source = region.parsed
        first = document.text.count("\n", 0, region.start + getattr(source, "offset", 0)) + 1
        blocks.append((first, str(source)))
    return blocks


def module_text(path: Path) -> str:
    """One document's blocks as a module for mypy, each block on its own lines of the document.

    The prelude is one line and blank lines pad the rest, so mypy's line numbers are the
    document's.
    """
    lines = [PRELUDE]
    for first, source in python_blocks(path):
        lines.extend([""] * (first - 1 - len(lines)))
        lines.extend(source.rstrip("\n").split("\n"))
    return "\n".join(lines) + "\n"


def run_mypy(workdir: Path) -> int:
    """mypy --strict over every document's module; errors are reported at the document's lines."""
    modules = {}
    for pattern in PATTERNS:
        for path in sorted(ROOT.glob(pattern)):
            relative = str(path.relative_to(ROOT))
            target = workdir / ("doc_" + relative.replace("/", "_").replace(".", "_").lower() + ".py")
            target.write_text(module_text(path), encoding="utf-8")
            modules[str(target)] = relative
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", *modules],
                          cwd=ROOT, capture_output=True, text=True)
    output = done.stdout + done.stderr
    for generated, relative in modules.items():
        output = output.replace(generated, relative)
    print(output, end="")
    return done.returncode


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="tablesdk-docs-") as tmp:
        sys.exit(run_mypy(Path(tmp)))
