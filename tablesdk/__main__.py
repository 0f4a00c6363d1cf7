"""``python -m tablesdk``: the command line (see docs/cli.md; needs ``pip install 'tablesdk[cli]'``)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
