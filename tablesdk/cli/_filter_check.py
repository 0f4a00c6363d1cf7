"""A warning for a ``--filter`` that compares a property holding text with a number.

The service compares a property only with a literal of its own type: ``Age gt 55``
never matches an entity whose Age is a String (a CSV imported without types), and
the query quietly returns nothing. The commands taking ``--filter`` (count, query,
export, delete-entities) check, cheaply and only where the answer is certain:

* the first page with entities: a property compared with a number that arrived as
  a String in it (another part of the filter matched that entity);
* when nothing matched: the first :data:`SAMPLE_SIZE` entities of the table (one
  request, those properties only); a compared property that is a String in one of them.

Either gives one warning on stderr, naming the property and an entity holding text in
it; never an error, and no warning when the filter cannot be read (the service
answers that) or the property holds no text where looked.
"""

from __future__ import annotations

from typing import Any

import click

from .._clients._client import CloudTableClient
from .._entities._edm import EdmType, EntityPayload
from .._entities._entity import DynamicEntity

__all__ = ["SAMPLE_SIZE", "NumberFilterCheck", "numeric_comparisons"]

#: Entities read (compared properties only) when no entity matched.
SAMPLE_SIZE = 100
_NUMBERS = (EdmType.INT32, EdmType.INT64, EdmType.DOUBLE)
_KEYS = ("PartitionKey", "RowKey", "Timestamp")  # of fixed types: a number with them is refused before sending


def numeric_comparisons(filter_text: str | None) -> list[str]:
    """The properties ``filter_text`` compares with a numeric literal (none when it cannot be read)."""
    if not filter_text:
        return []
    from .._entities._filter_text import _FilterSyntaxError, _Parser

    parser = _Parser(filter_text)
    try:
        parser.parse()
    except _FilterSyntaxError:
        return []
    names: list[str] = []
    for name, edm_type, _ in parser.compared:
        if edm_type in _NUMBERS and name not in _KEYS and name not in names:
            names.append(name)
    return names


class NumberFilterCheck:
    """The checks of one command: :meth:`page` on each page that arrives, :meth:`finish` with the count."""

    def __init__(self, client: CloudTableClient, table: str, filter_text: str | None) -> None:
        self.client = client
        self.table = table
        self.names = numeric_comparisons(filter_text)
        self.looked = not self.names  # nothing to look for
        self.warned = False

    def page(self, payloads: list[EntityPayload]) -> None:
        """Look at the first page with entities."""
        if self.looked or not payloads:
            return
        self.looked = True
        self._warn_for(payloads, "the entities that matched")

    def finish(self, matched: int) -> None:
        """No entity matched: look at a sample of the table."""
        if matched or self.warned or not self.names:
            return
        from ._transfer import pages

        query = self.client.create_query(self.table, DynamicEntity).select(*self.names).take(SAMPLE_SIZE)
        try:
            sample = next(pages(self.client, query, read_only=True), ([], None))[0]
        except Exception:  # noqa: BLE001 - a warning's look-up never fails the command
            return
        self._warn_for(sample, f"the first {len(sample)} entities of {self.table}")

    def _warn_for(self, payloads: list[EntityPayload], where: str) -> None:
        for name in self.names:
            example = next((p for p in payloads if p.types.get(name) is EdmType.STRING
                            and p.values.get(name) is not None), None)
            if example is not None:
                self._warn(name, example, where)
                return

    def _warn(self, name: str, example: EntityPayload, where: str) -> None:
        self.warned = True
        values: dict[str, Any] = example.values
        click.echo(
            f"tablesdk: warning: --filter compares {name} with a number, but {name} is text (Edm.String) in "
            f"{where} (PartitionKey {values.get('PartitionKey')!r}, RowKey {values.get('RowKey')!r}: "
            f"{name} = {values.get(name)!r}); the service never matches text with a number. Compare with "
            f"text ({name} gt '55' compares character by character) or store numbers "
            "(`tablesdk import FILE.csv TABLE --infer-types`)", err=True)
