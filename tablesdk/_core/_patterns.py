"""Regular expressions compiled on first use instead of by ``import tablesdk`` (start-up time).

About 15 patterns of the client are needed only by some calls (SAS checks, raw filter
text, error bodies, redaction); compiling them at import cost ``import tablesdk`` several
milliseconds. Each is declared once, as ``_name = pattern_on_first_use(r"...")``, and used as
``_name().match(text)``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import AnyStr

__all__ = ["pattern_on_first_use"]


def pattern_on_first_use(pattern: AnyStr, flags: int = 0) -> Callable[[], re.Pattern[AnyStr]]:
    """A function that compiles ``pattern`` (with ``flags``) on its first call and returns that same Pattern after."""

    @functools.cache
    def compiled() -> re.Pattern[AnyStr]:
        return re.compile(pattern, flags)

    return compiled
