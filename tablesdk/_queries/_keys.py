"""The white paper's key helpers (section "Tips and Tricks"): :func:`reverse_ticks` /
:func:`datetime_from_reverse_ticks` for newest-first RowKeys and :func:`fixed_width_key`
for numbers in keys.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from .._entities._edm import EdmDateTime
from .._core._errors import TableValidationError

__all__ = ["DATETIME_MAX_TICKS", "reverse_ticks", "datetime_from_reverse_ticks", "fixed_width_key"]

#: ``DateTime.MaxValue.Ticks`` in .NET: 9999-12-31T23:59:59.9999999, in 100 ns ticks since 0001-01-01.
DATETIME_MAX_TICKS = 3155378975999999999

_TICKS_PER_SECOND = 10_000_000
_TICKS_PER_DAY = 86_400 * _TICKS_PER_SECOND
_EPOCH = datetime(1, 1, 1)
_REVERSE_WIDTH = 19


def _ticks(value: datetime) -> int:
    """.NET ticks (100 ns since 0001-01-01 UTC) of ``value``; naive means UTC."""
    naive = value.replace(tzinfo=None)
    delta = naive - _EPOCH
    ticks = delta.days * _TICKS_PER_DAY + delta.seconds * _TICKS_PER_SECOND + delta.microseconds * 10
    if isinstance(value, EdmDateTime):
        ticks += value.ticks_remainder
    offset = value.utcoffset()
    if offset:
        ticks -= (offset.days * 86_400 + offset.seconds) * _TICKS_PER_SECOND + offset.microseconds * 10
    return ticks


def reverse_ticks(dt: datetime) -> str:
    """``DateTime.MaxValue.Ticks - dt.Ticks`` as 19 zero-padded digits: a newest-first RowKey.

    The white paper's trick for "retrieve latest items first": keys sort
    ascending, so ``reverse_ticks(later) < reverse_ticks(earlier)``. Ticks are
    .NET's 100 ns units since 0001-01-01; a naive ``dt`` is UTC, an aware one
    is converted to UTC, and an :class:`~tablesdk._entities._edm.EdmDateTime`'s seventh
    fractional digit counts. The result is always 19 digits, so keys of dates
    after 6831 (18 significant digits) still sort correctly.
    """
    if not isinstance(dt, datetime):
        raise TypeError(f"reverse_ticks takes a datetime, not {type(dt).__name__}")
    ticks = _ticks(dt)
    if not 0 <= ticks <= DATETIME_MAX_TICKS:
        raise TableValidationError("dt", "reverse_ticks needs a UTC time in 0001-01-01..9999-12-31", repr(dt))
    return str(DATETIME_MAX_TICKS - ticks).zfill(_REVERSE_WIDTH)


def datetime_from_reverse_ticks(s: str) -> datetime:
    """The aware UTC time a :func:`reverse_ticks` key stands for (exactly, to 100 ns).

    Returns an :class:`~tablesdk._entities._edm.EdmDateTime` (a ``datetime``) that keeps
    the seventh fractional digit; raises ``ValueError`` for anything but 19
    ASCII digits.
    """
    if not isinstance(s, str) or len(s) != _REVERSE_WIDTH or not (s.isascii() and s.isdigit()):
        raise ValueError(f"a reverse-ticks key is exactly {_REVERSE_WIDTH} ASCII digits, got {s!r}")
    ticks = DATETIME_MAX_TICKS - int(s)
    if ticks < 0:
        raise ValueError(f"{s!r} is above DateTime.MaxValue.Ticks ({DATETIME_MAX_TICKS})")
    micro_ticks, remainder = divmod(ticks, 10)
    value = _EPOCH + timedelta(microseconds=micro_ticks)
    return EdmDateTime(
        value.year, value.month, value.day, value.hour, value.minute, value.second,
        value.microsecond, timezone.utc, ticks_remainder=remainder,
    )


def fixed_width_key(n: int, width: int = 19) -> str:
    """``n`` zero-padded to ``width`` digits, so that string order is numeric order.

    Keys are strings and compare character by character ("92" > "10000"), so
    numbers in keys need a fixed width ("00092" < "10000"). The default of 19
    digits holds any non-negative Int64. Raises ``ValueError``
    (:class:`~tablesdk._core._errors.TableValidationError`) for a negative ``n`` or one
    wider than ``width`` digits, naming the limit.
    """
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise TableValidationError("width", "fixed_width_key width is an int >= 1", repr(width))
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"fixed_width_key takes an int, not {type(n).__name__}")
    if n < 0:
        raise TableValidationError(
            "n", "fixed_width_key takes non-negative numbers (a '-' would sort wrongly)", f"got {n}"
        )
    limit = 10**width - 1
    if n > limit:
        raise TableValidationError("n", f"fixed_width_key({width} digits) takes 0 <= n <= {limit}", f"got {n}")
    return str(n).zfill(width)

