"""``tablesdk import --infer-types``: EDM types for the CSV columns whose header gives none.

A CSV column without ``@Edm.Type`` in its header is Edm.String. With
``--infer-types`` the file is read once first, and such a column (other than
PartitionKey and RowKey, which are always strings) takes the first type of
:data:`INFERRED_TYPES` that *every* value of it is written in:

- Edm.Boolean: ``true`` or ``false`` (any case);
- Edm.Int32: an integer (``-?(0|[1-9][0-9]*)``) within -2**31 .. 2**31-1;
- Edm.Int64: such an integer within -2**63 .. 2**63-1;
- Edm.Double: a decimal number (``-1.5``, ``2e10``, ``NaN``, ``INF``, ``-INF``), an integer
  among them within +-2**53 (a double holds it exactly);
- Edm.DateTime: ``YYYY-MM-DDThh:mm[:ss[.fffffff]]`` with ``Z`` or an offset (``+02:00``):
  the service keeps an instant, and a time without a zone names none;
- Edm.Guid: ``xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` (hexadecimal digits).

A value is only taken as a number when the number gives its text back: leading
zeros (``007``, a code, not seven), a ``+`` sign, spaces or ``1_000`` keep the
column a String. A column with any other value (an empty string among them),
a mix (numbers and words, integers and dates) or no value at all stays a String:
nothing is guessed from part of a column. An empty unquoted cell is a missing
property, as always, and takes no part.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .._entities._edm import EdmType
from ._files import CsvColumns, _records, _split_record

__all__ = ["INFERRED_TYPES", "infer_csv_types", "inferred_text"]

#: The types tried, in this order: a column takes the first one every value fits.
INFERRED_TYPES = (EdmType.BOOLEAN, EdmType.INT32, EdmType.INT64, EdmType.DOUBLE, EdmType.DATETIME, EdmType.GUID)

_BOOLEAN = re.compile(r"(?i:true|false)\Z")
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)\Z")
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\Z|NaN\Z|-?INF\Z")
_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,7})?)?(?:Z|[+-][0-9]{2}:[0-9]{2})\Z")
_GUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\Z")
_EXACT_IN_DOUBLE = 2**53


def _fits(value: str) -> set[EdmType]:
    """The types of :data:`INFERRED_TYPES` whose text form ``value`` is."""
    fits: set[EdmType] = set()
    if _BOOLEAN.match(value):
        fits.add(EdmType.BOOLEAN)
    elif _INTEGER.match(value):
        number = int(value)
        if -(2**31) <= number < 2**31:
            fits.add(EdmType.INT32)
        if -(2**63) <= number < 2**63:
            fits.add(EdmType.INT64)
        if abs(number) <= _EXACT_IN_DOUBLE:
            fits.add(EdmType.DOUBLE)
    elif _DECIMAL.match(value):
        fits.add(EdmType.DOUBLE)
    elif _DATETIME.match(value):
        fits.add(EdmType.DATETIME)
    elif _GUID.match(value):
        fits.add(EdmType.GUID)
    return fits


def _check_date(value: str) -> bool:
    from .._entities._edm import from_atom_text

    try:
        from_atom_text(value, EdmType.DATETIME)
    except (ValueError, TypeError, OverflowError):
        return False
    return True


def infer_csv_types(lines: Iterable[str]) -> dict[str, EdmType]:
    """The inferred type of each column of a CSV input (text lines) that has none and is not a String."""
    records = _records(lines)
    first = next(records, None)
    if first is None:
        return {}
    header = _split_record(first[1].lstrip("\ufeff"))
    columns = CsvColumns.from_header(header)  # refuses a header that is no entity file's
    open_columns = [index for index, cell in enumerate(header)
                    if cell and "@" not in cell and cell not in ("PartitionKey", "RowKey")]
    possible: dict[int, set[EdmType]] = {index: set(INFERRED_TYPES) for index in open_columns}
    seen: set[int] = set()
    for _, record in records:
        if not record or not possible:
            continue
        try:
            cells = _split_record(record)
        except ValueError:
            continue  # the import reports the record
        for index in list(possible):
            cell = cells[index] if index < len(cells) else None
            if cell is None:
                continue
            seen.add(index)
            fits = possible[index] & _fits(cell)
            if EdmType.DATETIME in fits and not _check_date(cell):
                fits.discard(EdmType.DATETIME)
            if fits:
                possible[index] = fits
            else:
                del possible[index]  # a String: not looked at again
    inferred: dict[str, EdmType] = {}
    for index, fits in possible.items():
        if index in seen:
            inferred[columns.columns[index][0]] = next(edm for edm in INFERRED_TYPES if edm in fits)
    return inferred


def inferred_text(inferred: dict[str, EdmType]) -> str:
    """What ``--infer-types`` found, for stderr."""
    if not inferred:
        return "tablesdk: --infer-types: every column without a type stays Edm.String"
    found = ", ".join(f"{name} {edm.value}" for name, edm in inferred.items())
    return f"tablesdk: --infer-types: {found} (the other columns without a type stay Edm.String)"
