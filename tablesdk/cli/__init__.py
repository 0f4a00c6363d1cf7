"""The ``tablesdk`` command line (the ``cli`` extra: ``pip install '.[cli]'`` in a checkout): see docs/cli.md.

:func:`main` is the console script and ``python -m tablesdk``. The commands
live in :mod:`tablesdk.cli._app` and need click and rich, the ``cli`` extra;
without them :func:`main` says how to install it.
"""

from __future__ import annotations

import sys

from .._core._extras import install_hint

__all__ = ["main", "INSTALL_HINT"]

#: What to run when the command line's dependencies are missing.
INSTALL_HINT = install_hint("cli")


def main(argv: list[str] | None = None) -> int:
    """Run the ``tablesdk`` command with ``argv`` (default: the process's arguments); returns its status."""
    from importlib.util import find_spec

    # Found, not imported: rich loads only with the first table or progress bar a command shows.
    missing = next((name for name in ("click", "rich") if find_spec(name) is None), None)
    if missing is not None:
        sys.stderr.write(
            f"tablesdk: the command line needs the 'cli' extra ({missing} is not installed): {INSTALL_HINT}\n"
        )
        return 2
    from ._app import run

    return run(argv)
