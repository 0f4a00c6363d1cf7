"""Reading a request's URL: the account segment, the query string, the resource segment
(``Tables('name')``, ``table(PartitionKey='..',RowKey='..')``) and the names and keys in it."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl

from ._errors import NAME_LENGTH, error, pipeline_error

__all__ = [
    "query_dict", "split_account", "strip_account", "resource_segment", "parse_literal_list", "entity_keys",
    "check_table_name",
]

_TABLE_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")


def query_dict(raw_query: str) -> dict[str, str]:
    """The query string by name; a name given more than once has all its values, joined by commas.

    The service reads a repeated parameter as one multi-valued parameter (as Shared Key
    canonicalization joins its values), never as its first value alone: a SAS sent as
    ``sig=<valid>&sig=junk`` carries the signature ``<valid>,junk``, which does not verify.
    """
    result: dict[str, str] = {}
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        result[name] = result[name] + "," + value if name in result else value
    return result


def split_account(raw_path: str, account: str) -> tuple[str, bool]:
    """(path after the account, whether the read-only ``<account>-secondary`` view was addressed)."""
    secondary = "/" + account + "-secondary"
    if raw_path == secondary or raw_path.startswith(secondary + "/"):
        return raw_path[len(secondary):], True
    return strip_account(raw_path, account), False


def strip_account(raw_path: str, account: str) -> str:
    """The path after ``/<account>``; any other account is not found."""
    prefix = "/" + account
    if raw_path == prefix or raw_path.startswith(prefix + "/") or raw_path.startswith(prefix + "?"):
        return raw_path[len(prefix):]
    raise pipeline_error("ResourceNotFound")


def parse_literal_list(text: str) -> list[tuple[str | None, str]]:
    """``(name, value)`` pairs from ``PartitionKey='a',RowKey='b'`` or ``'name'`` (decoded text)."""
    items: list[tuple[str | None, str]] = []
    i, n = 0, len(text)
    while i < n:
        m = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)\s*=\s*)?'").match(text, i)
        if not m:
            raise error("InvalidInput", message="Bad Request - Error in query syntax.")
        name = m.group(1)
        j = m.end()
        chunks: list[str] = []
        while True:
            end = text.find("'", j)
            if end == -1:
                raise error("InvalidInput", message="Bad Request - Error in query syntax.")
            chunks.append(text[j:end])
            if end + 1 < n and text[end + 1] == "'":
                chunks.append("'")
                j = end + 2
                continue
            i = end + 1
            break
        items.append((name, "".join(chunks)))
        rest = text[i:].lstrip()
        if not rest:
            break
        if not rest.startswith(","):
            raise error("InvalidInput", message="Bad Request - Error in query syntax.")
        i = n - len(rest) + 1
    return items


def entity_keys(segment: str) -> tuple[str, str]:
    """(PartitionKey, RowKey) from the decoded ``(PartitionKey='..',RowKey='..')`` segment."""
    items = parse_literal_list(segment)
    named = {name: value for name, value in items if name is not None}
    if len(items) != 2 or len(named) != 2 or "PartitionKey" not in named or "RowKey" not in named:
        raise error("InvalidInput", message="Bad Request - Error in query syntax.")
    return named["PartitionKey"], named["RowKey"]


def resource_segment(rest: str) -> str:
    """The resource part of a path after the account: ``Table(...)`` from ``/Table(...)/more``.

    The service treats ``/<table>/<more>`` as an operation on that table, so only the
    first segment names the resource.
    """
    path = rest.split("?", 1)[0]
    return (path[1:] if path.startswith("/") else path).split("/", 1)[0]


def check_table_name(name: Any) -> str:
    """``name`` when a table may have it (400 InvalidInput, OutOfRangeInput or InvalidResourceName)."""
    if not isinstance(name, str):
        raise error("InvalidInput")
    if not 3 <= len(name) <= 63:
        raise error("OutOfRangeInput", message=NAME_LENGTH)
    if not (name.isascii() and _TABLE_NAME_RE.match(name)) or name.lower() == "tables":
        raise error("InvalidResourceName")
    return name

