"""Codec throughput: serialize and parse 1,000 entities in the Atom and JSON formats.

Each entity has PartitionKey, RowKey and 10 properties of mixed types (str, Int32, Int64, Double, bool, DateTime, Guid, 16-byte
Binary, a 51-character str and Int32); response feeds also carry Timestamp and
an ETag per entity, as the service sends them. Baselines measured in the same
process: ``json.loads`` of the JSON feed and ``lxml.etree.fromstring`` of the
Atom feed, i.e. the cost of merely decoding the bytes.

The "When" DateTime comes in the forms the service returns for values Python
clients wrote (6 digits, trimmed ``.94687Z``/``.1Z``, whole seconds) and the
Timestamps with trailing zeros trimmed, as the service writes them.

"lxml reads" adds to the safe parse what any walk of the Atom tree has to ask
lxml for (each entry's m:etag; each property element's tag, attributes and
text, fetched in C loops): the floor of an lxml-based decoder before it
converts a single value.

Run: ``python benchmarks/codec_speed.py [--entities N] [--repeat R]``. Each figure is
the least process CPU time of R runs (the least disturbed by the machine).
"""

from __future__ import annotations

import argparse
import json
import operator
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lxml import etree  # noqa: E402

from tablesdk._entities._edm import EdmType, EntityPayload, format_datetime  # noqa: E402
from tablesdk._formats.atom import ATOM_NS, DATASERVICES_NS, METADATA_NS, SAFE_XML_PARSER, AtomFormat  # noqa: E402
from tablesdk._formats.json import JsonFormat  # noqa: E402

T = EdmType
TYPES = {
    "PartitionKey": T.STRING, "RowKey": T.STRING, "Name": T.STRING, "Count": T.INT32, "Big": T.INT64,
    "Score": T.DOUBLE, "Active": T.BOOLEAN, "When": T.DATETIME, "Id": T.GUID, "Blob": T.BINARY,
    "Text": T.STRING, "Small": T.INT32,
}
FIXED_CLOCK = datetime(2026, 11, 22, 22, 50, 9, tzinfo=timezone.utc)


def make_payloads(count: int) -> list[EntityPayload]:
    """``count`` payloads with the section-6 property mix."""
    base = datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)
    payloads = []
    for i in range(count):
        values: dict[str, Any] = {
            "PartitionKey": f"pk{i // 100:03d}", "RowKey": f"{i:06d}", "Name": f"name-{i}", "Count": i,
            "Big": 2**40 + i, "Score": i * 1.5, "Active": i % 2 == 0, "When": base + timedelta(seconds=i),
            "Id": uuid.UUID(int=i), "Blob": bytes(range(16)), "Text": "x" * 40 + f"{i:011d}", "Small": i % 7,
        }
        payloads.append(EntityPayload(values, dict(TYPES)))
    return payloads


def stamp_text(i: int) -> str:
    """Timestamp text as the service writes it: 7 digits with trailing zeros trimmed (none when whole)."""
    digits = f"{(i * 7919) % 10_000_000:07d}".rstrip("0") if i % 10 else ""
    return f"2026-11-22T22:50:{i % 60:02d}" + (f".{digits}Z" if digits else "Z")


def when_text(i: int) -> str:
    """The "When" DateTime as a Python client wrote it and the service returns it: 6 digits, trimmed, whole."""
    stamp = f"2024-01-02T03:{(i // 60) % 60:02d}:{i % 60:02d}"
    return (f"{stamp}.{i % 1_000_000:06d}Z", f"{stamp}.94687Z", f"{stamp}.1Z", f"{stamp}Z")[i % 4]


def json_feed(payloads: list[EntityPayload], fmt: JsonFormat) -> bytes:
    """A minimalmetadata Query Entities response as the service writes it."""
    items = []
    for i, payload in enumerate(payloads):
        body = json.loads(fmt.serialize_entity(payload))
        body["When"] = when_text(i)
        stamp = stamp_text(i)
        items.append({"odata.etag": f"W/\"datetime'{stamp.replace(':', '%3A')}'\"", "Timestamp": stamp, **body})
    doc = {"odata.metadata": "http://127.0.0.1:10002/devstoreaccount1/$metadata#bench", "value": items}
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def atom_feed(payloads: list[EntityPayload], fmt: AtomFormat) -> bytes:
    """A Query Entities Atom feed as the service writes it (entries with m:etag, id, link, category)."""
    entries = []
    for i, payload in enumerate(payloads):
        entry = fmt.serialize_entity(payload).decode("utf-8")
        props = entry[entry.index("<m:properties>") + len("<m:properties>") : entry.index("</m:properties>")]
        when = props.index('<d:When m:type="Edm.DateTime">') + len('<d:When m:type="Edm.DateTime">')
        props = props[:when] + when_text(i) + props[props.index("</d:When>"):]
        stamp = stamp_text(i)
        pk, rk = payload.values["PartitionKey"], payload.values["RowKey"]
        key = f"bench(PartitionKey='{pk}',RowKey='{rk}')"
        etag = f"W/&quot;datetime'{stamp.replace(':', '%3A')}'&quot;"
        entries.append(
            f'<entry m:etag="{etag}"><id>http://127.0.0.1:10002/devstoreaccount1/{key}</id>'
            f'<title type="text" /><updated>{stamp}</updated><author><name /></author>'
            f'<link rel="edit" title="bench" href="{key}" />'
            f'<category term="devstoreaccount1.bench" scheme="{METADATA_NS.rsplit("/", 1)[0]}/scheme" />'
            f'<content type="application/xml"><m:properties>{props}'
            f'<d:Timestamp m:type="Edm.DateTime">{stamp}</d:Timestamp></m:properties></content></entry>'
        )
    return (
        '<?xml version="1.0" encoding="utf-8" standalone="yes"?>'
        f'<feed xml:base="http://127.0.0.1:10002/devstoreaccount1/" xmlns:d="{DATASERVICES_NS}" '
        f'xmlns:m="{METADATA_NS}" xmlns="{ATOM_NS}"><title type="text">bench</title>'
        f"<id>http://127.0.0.1:10002/devstoreaccount1/bench</id><updated>{format_datetime(FIXED_CLOCK)}</updated>"
        f'<link rel="self" title="bench" href="bench" />{"".join(entries)}</feed>'
    ).encode("utf-8")


_TAG, _TEXT = operator.attrgetter("tag"), operator.attrgetter("text")
_ENTRY, _PROPERTIES, _M_ETAG = f"{{{ATOM_NS}}}entry", f"{{{METADATA_NS}}}properties", f"{{{METADATA_NS}}}etag"


def lxml_reads(body: bytes) -> None:
    """Safe parse, then read each entry's m:etag and each property's tag, attributes and text."""
    root = etree.fromstring(body, SAFE_XML_PARSER)
    for container in root.iter(_ENTRY, _PROPERTIES):
        if container.tag == _ENTRY:
            container.get(_M_ETAG)
            continue
        children = list(container)
        list(map(_TAG, children))
        list(map(etree._Element.items, children))
        list(map(_TEXT, children))


def best_of(repeat: int, func: Callable[[], object]) -> float:
    """Least process CPU time of ``repeat`` calls of ``func``, in seconds (the least disturbed run)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        func()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    n, repeat = args.entities, args.repeat

    payloads = make_payloads(n)
    atom = AtomFormat(clock=lambda: FIXED_CLOCK)
    jsonf = JsonFormat()
    nometa = JsonFormat("nometadata")
    jbody = json_feed(payloads, jsonf)
    abody = atom_feed(payloads, atom)
    assert len(jsonf.parse_entities(jbody)) == n and len(atom.parse_entities(abody)) == n

    rows: list[tuple[str, float, float | None]] = []

    def measure(label: str, func: Callable[[], object], baseline: float | None = None) -> float:
        seconds = best_of(repeat, func)
        rows.append((label, seconds, baseline))
        return seconds

    json_base = measure("baseline json.loads(feed)", lambda: json.loads(jbody))
    atom_base = measure("baseline etree.fromstring(feed)", lambda: etree.fromstring(abody))
    measure("baseline etree.fromstring(feed, safe parser)", lambda: etree.fromstring(abody, SAFE_XML_PARSER))
    reads = measure("baseline safe parser + lxml reads", lambda: lxml_reads(abody))
    measure("json  serialize_entity x N", lambda: [jsonf.serialize_entity(p) for p in payloads])
    measure("json  parse_entities (minimalmetadata)", lambda: jsonf.parse_entities(jbody), json_base)
    measure("json  parse_entities (nometadata codec)", lambda: nometa.parse_entities(jbody), json_base)
    measure("atom  serialize_entity x N", lambda: [atom.serialize_entity(p) for p in payloads])
    atom_parse = measure("atom  parse_entities", lambda: atom.parse_entities(abody), atom_base)
    json_parse = next(seconds for label, seconds, _ in rows if label.startswith("json  parse_entities (minimal"))

    print(f"{n} entities, 12 properties each (+Timestamp, ETag in feeds); best of {repeat} runs")
    print(f"JSON feed {len(jbody):,} bytes, Atom feed {len(abody):,} bytes")
    print(f"{'operation':46} {'ms':>8} {'entities/s':>12} {'us/entity':>10} {'x baseline':>10} {'beyond':>10}")
    for label, seconds, baseline in rows:
        ratio = f"{seconds / baseline:10.2f}" if baseline else " " * 10
        extra = f"{(seconds - baseline) / n * 1e6:8.2f}us" if baseline else " " * 10
        print(f"{label:46} {seconds * 1e3:8.2f} {n / seconds:12,.0f} {seconds / n * 1e6:10.2f} {ratio} {extra}")
    print(f"Atom decode / JSON decode per entity: {atom_parse / json_parse:.2f}x")
    print(f"Safe parse + lxml reads (the floor of a tree walk) / JSON decode: {reads / json_parse:.2f}x")


if __name__ == "__main__":
    main()
