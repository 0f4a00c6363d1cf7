"""A query's options: ``$filter``, ``$select``, ``$top``, the continuation tokens, and the
key ranges a filter and a SAS grant narrow a scan to."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from ._auth import SasGrant
from ._errors import INVALID_QUERY, error
from ._filter import Filter, FilterError, compile_filter
from ._storage import EntityRow
from ._values import DATETIME, STRING

__all__ = ["encode_token", "decode_token", "parse_select", "parse_top", "parse_filter", "filterable_entity",
           "key_range_conditions"]

_IDENT_RE = re.compile(r"[^\W\d]\w*\Z")
_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]*\Z")


def encode_token(value: str) -> str:
    """An opaque continuation token for a key (production-like ``1!<n>!<base64url>``)."""
    data = base64.urlsafe_b64encode(value.encode("utf-8")).decode("ascii").rstrip("=")
    return f"1!{len(data)}!{data}"


def decode_token(token: str) -> str:
    """The key a token of :func:`encode_token` stands for (400 InvalidInput for any other text)."""
    parts = token.split("!")
    # isdigit() alone takes '²' and '١', which int() then refuses or reads: ASCII digits only.
    if (len(parts) != 3 or parts[0] != "1" or not (parts[1].isascii() and parts[1].isdigit())
            or len(parts[1]) > 9 or int(parts[1]) != len(parts[2])):
        raise error("InvalidInput")
    data = parts[2]
    if not _TOKEN_RE.match(data):
        raise error("InvalidInput")
    try:
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise error("InvalidInput") from None


def parse_select(query: dict[str, str]) -> list[str] | None:
    """The names ``$select`` asks for; None for all of them."""
    text = query.get("$select")
    if text is None:
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names or "*" in names:
        return None
    for name in names:
        if not _IDENT_RE.match(name):
            raise error("InvalidInput", message=INVALID_QUERY)
    return names


def parse_top(query: dict[str, str]) -> int | None:
    """``$top``, when given."""
    text = query.get("$top")
    if text is None:
        return None
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 9:  # '²'.isdigit() is True
        raise error("InvalidQueryParameterValue")
    return int(text)


def parse_filter(query: dict[str, str]) -> Filter | None:
    """The compiled ``$filter``, when there is one."""
    text = query.get("$filter")
    if text is None or not text.strip():
        return None
    try:
        return compile_filter(text)
    except FilterError:
        raise error("InvalidInput", message=INVALID_QUERY) from None


def filterable_entity(row: EntityRow) -> dict[str, tuple[str, Any]]:
    """A stored row as a filter sees it: its properties and the keys and Timestamp."""
    entity = dict(row.props)
    entity["PartitionKey"] = (STRING, row.pk)
    entity["RowKey"] = (STRING, row.rk)
    entity["Timestamp"] = (DATETIME, row.timestamp)
    return entity


def key_range_conditions(flt: Filter | None, grant: SasGrant | None) -> list[tuple[str, str, str]]:
    """The storage scan's key conditions from the filter's key ranges and the grant's key range."""
    conditions: list[tuple[str, str, str]] = []
    if flt is not None:
        for prop, column in (("PartitionKey", "pk"), ("RowKey", "rk")):
            rng = flt.ranges.get(prop)
            if rng is None:
                continue
            if rng.eq is not None:
                conditions.append((column, "=", rng.eq))
            if rng.lower is not None:
                conditions.append((column, ">=" if rng.lower[1] else ">", rng.lower[0]))
            if rng.upper is not None:
                conditions.append((column, "<=" if rng.upper[1] else "<", rng.upper[0]))
    if grant is not None:
        if grant.start_key is not None:
            conditions.append(("pk", ">=", grant.start_key[0]))
        if grant.end_key is not None:
            conditions.append(("pk", "<=", grant.end_key[0]))
    return conditions

