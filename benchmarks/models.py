"""Model classes against the entity classes: CPU of reading a scan and of writing entities.

* Scan: a 10,000-entity JSON page (minimal metadata, as the service sends it) decoded and
  materialised as a TableEntity subclass, a dataclass, a pydantic model and an attrs class
  with the same fields (Text, N Int32, Views Int64, Score Double, Flag bool, When DateTime).
* Insert: 10,000 entities turned into payloads and serialized as the client sends them,
  from DynamicEntity objects and from plain dicts with the same items.

Issue 24's budgets: a dataclass scan at most 1.2x the TableEntity scan; dicts at most 1.1x
DynamicEntity. Run: ``python benchmarks/models.py [--entities N] [--repeat R]``; each figure is
the least process CPU time of R rounds, the runs alternating within each round.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import attrs  # noqa: E402
import pydantic  # noqa: E402

from tablesdk import DynamicEntity, Int64, TableEntity  # noqa: E402
from tablesdk._entities._entity import entity_to_payload, read_page  # noqa: E402
from tablesdk._formats.json import JsonFormat  # noqa: E402


class Row(TableEntity):
    Text: str
    N: int
    Views: Int64
    Score: float
    Flag: bool
    When: datetime


@dataclasses.dataclass
class DataRow:
    PartitionKey: str
    RowKey: str
    Text: str
    N: int
    Views: Int64
    Score: float
    Flag: bool
    When: datetime
    Timestamp: datetime | None = None
    etag: str | None = None


class PydanticRow(pydantic.BaseModel):
    PartitionKey: str
    RowKey: str
    Text: str
    N: int
    Views: Int64
    Score: float
    Flag: bool
    When: datetime


@attrs.define
class AttrsRow:
    PartitionKey: str
    RowKey: str
    Text: str
    N: int
    Views: Int64
    Score: float
    Flag: bool
    When: datetime


def feed(count: int) -> bytes:
    rows = [
        {
            "odata.etag": f"W/\"datetime'2024-01-01T00%3A00%3A{i % 60:02}.1234567Z'\"",
            "PartitionKey": f"p{i // 1000}", "RowKey": f"{i:08}",
            "Timestamp@odata.type": "Edm.DateTime", "Timestamp": "2024-01-01T00:00:00.1234567Z",
            "Text": f"text {i}", "N": i, "Views@odata.type": "Edm.Int64", "Views": str(i * 1000),
            "Score": i / 3, "Flag": bool(i & 1),
            "When@odata.type": "Edm.DateTime", "When": "2023-05-06T07:08:09.123456Z",
        }
        for i in range(count)
    ]
    return json.dumps({"value": rows}).encode()


def scan(cls: type[Any], fmt: JsonFormat = JsonFormat(), body: bytes = b"") -> None:
    read_page(cls, fmt.parse_entity_page(body or FEED[0]))


#: The feed every scan reads (set by main).
FEED: list[bytes] = []


def least_cpu(runs: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """The least process CPU time of each run over ``repeat`` rounds; the runs alternate within a
    round, so a machine that slows down or speeds up meanwhile weighs on all of them alike."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    fmt = JsonFormat()
    FEED.append(feed(args.entities))

    classes: list[type[Any]] = [Row, DataRow, PydanticRow, AttrsRow]
    scans = least_cpu({cls.__name__: partial(scan, cls) for cls in classes}, args.repeat)
    base = scans["Row"]
    print(f"scan of {args.entities} entities (decode + materialise), least CPU of {args.repeat}:")
    for name, took in scans.items():
        print(f"  {name:12} {took * 1000:8.1f} ms  {took / base:5.2f}x TableEntity")

    when = datetime(2023, 5, 6, tzinfo=timezone.utc)
    items = [
        {"PartitionKey": "p", "RowKey": f"{i:08}", "Text": f"text {i}", "N": i, "Score": i / 3, "Flag": True, "When": when}
        for i in range(args.entities)
    ]
    dynamics = [DynamicEntity(**item) for item in items]  # type: ignore[arg-type]

    def write(entities: list[Any]) -> None:
        for entity in entities:
            fmt.serialize_entity(entity_to_payload(entity))

    writes = least_cpu({"dynamic": partial(write, dynamics), "plain": partial(write, items)}, args.repeat)
    dynamic, plain = writes["dynamic"], writes["plain"]
    print(f"insert payloads of {args.entities} entities (validate + serialize):")
    print(f"  DynamicEntity {dynamic * 1000:8.1f} ms")
    print(f"  dict          {plain * 1000:8.1f} ms  {plain / dynamic:5.2f}x DynamicEntity")


if __name__ == "__main__":
    main()
