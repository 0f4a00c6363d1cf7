"""``python -m tablesdk``: the command line (see docs/cli.md; needs the ``cli`` extra: ``pip install '.[cli]'`` in a checkout)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
