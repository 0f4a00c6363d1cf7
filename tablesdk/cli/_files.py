"""Entity files of the command line: JSON lines and typed CSV, written and read exactly.

JSON lines (``.jsonl``) hold one entity per line in the service's own JSON form
(the body the JSON codec sends), with ``Name@odata.type`` annotations where the
JSON value alone does not say the EDM type, so every type reads back exactly:
the codec in :mod:`tablesdk._formats.json` does both directions.

CSV files have a header row naming each column ``Name`` (Edm.String) or
``Name@Edm.Type``; cells hold the AtomPub text form of the value
(:func:`tablesdk._entities._edm.to_atom_text`), which is exact for every type (7-digit
DateTime, Int64, NaN and infinite doubles, base64 Binary). Every present value
is quoted, and an empty *unquoted* cell means the entity has no such property,
so an empty string and a missing property stay apart. A property seen with two
types gets one column per type. Every row has a cell per column: a row with
fewer (a cut-off line) is refused, not read as an entity lacking the rest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Container, Iterable, Iterator, Mapping
from typing import Any

from .._entities._edm import EdmType, EntityPayload, format_datetime, from_atom_text, to_atom_text
from .._entities._entity import DynamicEntity, entity_from_payload
from .._core._errors import ResponseDecodeError
from .._formats import get_format
from .._formats.json import JsonFormat

__all__ = [
    "FILE_FORMATS",
    "PARQUET",
    "CsvColumns",
    "EntityLine",
    "csv_row",
    "first_row_width",
    "csv_header",
    "pad_csv_rows",
    "json_codec",
    "parse_entity_text",
    "payload_json",
    "read_csv",
    "read_jsonl",
]

#: The entity file formats: JSON lines and typed CSV.
FILE_FORMATS = ("jsonl", "csv")
#: The columnar format (tablesdk.cli._parquet reads and writes it; named here, where --help finds it).
PARQUET = "parquet"

#: (line number where the record starts, the entity or the reason it could not be read, raw text).
EntityLine = tuple[int, "DynamicEntity | ValueError", str]

_JSON: JsonFormat | None = None
_TIMESTAMP_ANNOTATION = b'"Timestamp@odata.type":"Edm.DateTime"'


def json_codec() -> JsonFormat:
    """The JSON codec (minimal metadata: annotated values, typed un-annotated ones)."""
    global _JSON
    if _JSON is None:
        codec = get_format("json")
        assert isinstance(codec, JsonFormat)
        _JSON = codec
    return _JSON


def payload_json(payload: EntityPayload, *, timestamp: bool = False, etag: bool = False) -> bytes:
    """One entity in the service's JSON form; with ``timestamp`` (``etag``) its Timestamp (ETag) too.

    The codec leaves Timestamp out (the service sets it on every write); a
    listing for people to read keeps it, annotated, and imports ignore it, as
    they ignore ``odata.etag``.
    """
    body = json_codec().serialize_entity(payload)
    stamp = payload.values.get("Timestamp") if timestamp else None
    if stamp is not None:
        text = format_datetime(stamp).encode("ascii")
        body = body[:-1] + b',"Timestamp":"' + text + b'",' + _TIMESTAMP_ANNOTATION + b"}"
    if etag and payload.etag:
        body = b'{"odata.etag":' + json.dumps(payload.etag).encode("ascii") + b"," + body[1:]
    return body


def _entity(payload: EntityPayload) -> DynamicEntity:
    return entity_from_payload(DynamicEntity, payload)


def parse_entity_text(raw: bytes) -> EntityPayload:
    """One entity in the service's JSON form, from text a user gave (a file's line, --entity).

    The JSON codec reads response bodies, so its errors speak of "the response
    body"; here the user's text is at fault, and the ``ValueError`` says only
    what is wrong with it.
    """
    try:
        return json_codec().parse_entity(raw)
    except ResponseDecodeError as exc:
        raise ValueError(exc.reason) from None


def read_jsonl(lines: Iterable[bytes], skip: Container[int] = ()) -> Iterator[EntityLine]:
    """Entities of a JSON-lines input, one per non-blank line, each with its line number.

    A line that is not a valid entity gives a ``ValueError`` in place of the
    entity; reading goes on. Keys holding a '.' (``odata.*``, and the
    ``tablesdk.error`` of a rejects file) are control information, not properties.
    Lines whose number is in ``skip`` are passed over unread.
    """
    for number, line in enumerate(lines, 1):
        if not line.strip() or number in skip:
            continue
        try:
            entity = _entity(parse_entity_text(line))
        except ValueError as exc:
            yield number, exc, line.decode("utf-8", "replace").rstrip("\r\n")
            continue
        except (TypeError, AttributeError) as exc:  # valid JSON that is no entity object
            yield number, ValueError(f"not an entity object: {exc}"), line.decode("utf-8", "replace").rstrip()
            continue
        yield number, entity, ""


# ---------------------------------------------------------------- CSV


class CsvColumns:
    """The columns of a CSV entity file: (property name, EDM type), in order.

    Writing adds a column the first time a (name, type) appears, at the end,
    so rows written earlier simply lack it.
    """

    def __init__(self, columns: Iterable[tuple[str, EdmType]] = ()) -> None:
        self.columns: list[tuple[str, EdmType]] = []
        self._index: dict[tuple[str, EdmType], int] = {}
        for column in (("PartitionKey", EdmType.STRING), ("RowKey", EdmType.STRING), *columns):
            self.add(column)

    def add(self, column: tuple[str, EdmType]) -> int:
        """The position of ``column``, added at the end when new."""
        position = self._index.get(column)
        if position is None:
            position = self._index[column] = len(self.columns)
            self.columns.append(column)
        return position

    def names(self) -> list[str]:
        """Header texts: ``Name`` for Edm.String, ``Name@Edm.Type`` otherwise."""
        return [name if edm is EdmType.STRING else f"{name}@{edm.value}" for name, edm in self.columns]

    @classmethod
    def from_header(cls, header: list[str | None]) -> CsvColumns:
        """Columns from header cells; ``ValueError`` for an unknown type or a repeated column."""
        columns = cls.__new__(cls)
        columns.columns, columns._index = [], {}
        for cell in header:
            name, _, type_name = (cell or "").partition("@")
            if not name:
                raise ValueError("a CSV header cell is empty: every column needs a property name")
            try:
                edm = EdmType(type_name) if type_name else EdmType.STRING
            except ValueError:
                raise ValueError(f"CSV column {cell!r}: unknown type {type_name!r} (use Edm.Int64, ...)") from None
            if (name, edm) in columns._index:
                raise ValueError(f"CSV column {cell!r} appears twice")
            columns.add((name, edm))
        if "PartitionKey" not in (n for n, _ in columns.columns) or "RowKey" not in (n for n, _ in columns.columns):
            raise ValueError("a CSV entity file needs PartitionKey and RowKey columns")
        return columns


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def csv_header(columns: CsvColumns) -> str:
    """The header line (ending in CRLF)."""
    return ",".join(_quote(name) for name in columns.names()) + "\r\n"


def csv_row(payload: EntityPayload, columns: CsvColumns, *, timestamp: bool = False) -> str:
    """One entity as a CSV line (CRLF), adding columns for properties not seen before."""
    cells: list[str] = [""] * len(columns.columns)
    types = payload.types
    for name, value in payload.values.items():
        if value is None or (name == "Timestamp" and not timestamp):
            continue
        edm = types.get(name) or (EdmType.DATETIME if name == "Timestamp" else EdmType.STRING)
        position = columns.add((name, edm))
        if position >= len(cells):
            cells.extend([""] * (position + 1 - len(cells)))
        cells[position] = _quote(value if edm is EdmType.STRING else to_atom_text(value, edm))
    return ",".join(cells) + "\r\n"


_FIELD = re.compile(r'"((?:[^"]|"")*)"|([^,"\r\n]*)')


def _split_record(text: str) -> list[str | None]:
    """Cells of one CSV record: quoted text, unquoted text, or None for an empty unquoted cell."""
    cells: list[str | None] = []
    position, end = 0, len(text)
    while True:
        match = _FIELD.match(text, position)
        assert match is not None  # the second alternative matches the empty string
        quoted, plain = match.group(1), match.group(2)
        cells.append(quoted.replace('""', '"') if quoted is not None else (plain or None))
        position = match.end()
        if position >= end:
            return cells
        if text[position] != ",":
            raise ValueError(f"malformed CSV at character {position + 1}: {text[position]!r} after a cell")
        position += 1


def _records(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """Whole CSV records (a quoted cell may span lines), with the line each starts on."""
    pending: list[str] = []
    start = 0
    quotes = 0
    for number, line in enumerate(lines, 1):
        if not pending:
            start = number
        pending.append(line)
        quotes += line.count('"')
        if quotes % 2:
            continue  # inside a quoted cell: the record goes on
        record = "".join(pending)
        pending, quotes = [], 0
        yield start, record[:-2] if record.endswith("\r\n") else record.rstrip("\n")
    if pending:
        yield start, "".join(pending)  # an unterminated quote: _split_record reports it


def pad_csv_rows(rows: Iterable[str], width: int) -> Iterator[str]:
    """Rows (text lines with their CRLF) written before the last columns were seen, with their empty cells.

    ``csv_row`` writes as many cells as there are columns so far; the header,
    written last, names ``width``. Rows lack no property they had: they get
    the empty unquoted cells that mean "no such property".
    """
    for _, record in _records(rows):
        missing = width - len(_split_record(record))
        yield record + "," * max(0, missing) + "\r\n"


def first_row_width(text: str) -> int:
    """How many cells the first record of ``text`` (rows without a header) has; 0 for none."""
    first = next(_records(text.splitlines(keepends=True)), None)
    try:
        return len(_split_record(first[1])) if first is not None else 0
    except ValueError:  # ``text`` ends inside the first record: not known
        return 0


def _csv_entity(columns: CsvColumns, cells: list[str | None]) -> DynamicEntity:
    if len(cells) != len(columns.columns):
        fewer = "" if len(cells) > len(columns.columns) else (
            " (a cut-off row? a missing property is an empty cell, with its comma)"
        )
        raise ValueError(f"{len(cells)} cells but the header has {len(columns.columns)} columns{fewer}")
    values: dict[str, Any] = {}
    types: dict[str, EdmType] = {}
    for (name, edm), cell in zip(columns.columns, cells):
        if cell is None:
            continue
        if name in values:
            raise ValueError(f"property {name!r} has values in two columns")
        try:
            values[name] = cell if edm is EdmType.STRING else from_atom_text(cell, edm)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"column {name}@{edm.value}: {cell!r} is not a valid value ({exc})") from None
        types[name] = edm
    return _entity(EntityPayload(values, types))


def read_csv(
    lines: Iterable[str], skip: Container[int] = (), types: Mapping[str, EdmType] | None = None,
) -> Iterator[EntityLine]:
    """Entities of a typed CSV input (text lines with their line endings), with line numbers.

    The first record is the header; ``ValueError`` if it is missing or invalid.
    A record that is not a valid entity gives a ``ValueError`` in place of the entity.
    Records starting on a line in ``skip`` are passed over unread. ``types`` gives
    columns without a type in the header (Edm.String) another type (``--infer-types``).
    """
    records = _records(lines)
    first = next(records, None)
    if first is None:
        raise ValueError("the CSV input is empty (it needs a header row)")
    header = _split_record(first[1].lstrip("\ufeff"))
    if types:  # only for the cells naming no type
        header = [f"{cell}@{types[cell].value}" if cell and "@" not in cell and cell in types else cell
                  for cell in header]
    columns = CsvColumns.from_header(header)
    for number, record in records:
        if not record or number in skip:
            continue
        try:
            entity: DynamicEntity | ValueError = _csv_entity(columns, _split_record(record))
        except ValueError as exc:
            entity = exc
        yield number, entity, record
