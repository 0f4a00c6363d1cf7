"""Client CPU per entity as instruction counts (valgrind callgrind): repeatable on a loaded machine.

    python benchmarks/instructions.py [--entities 2000] [--workloads scan insert bulk decode-json decode-atom lxml-reads]

(the first three by default)

Wall-clock and even CPU-time figures move with the load of a shared machine;
the number of instructions the client executes does not. Each workload runs in
a child process under ``valgrind --tool=callgrind`` twice, with 0 and with N
entities, and the difference divided by N is the client's instructions per
entity. No server is involved: requests' HTTP adapter is replaced (in the child)
by one that answers from memory, so everything above it (requests, the
transport, codecs, entities) runs as against the service.

Workloads: ``scan`` iterates a client query over pages of 1,000 entities (the
ten-property mix of benchmarks/query.py with DateTimes in 6-digit and trimmed
forms, Timestamps trimmed); ``insert`` sends 100-entity batches through
``execute_batch`` (the entities of benchmarks/bulk.py, built in both runs so
that making them does not count) and parses 204 answers; ``bulk`` writes the
same entities with ``bulk_insert`` and one worker (grouping, sizing and the
worker thread included). ``decode-json`` and ``decode-atom`` parse the
1,000-entity feeds of benchmarks/codec_speed.py with ``parse_entities`` (one
warm-up parse in both runs); ``lxml-reads`` is codec_speed's floor of an Atom
tree walk (safe parse, then each property's tag, attributes and text).
``scan-floor`` is benchmarks/query.py's raw floor on the scan's pages (requests,
a hand-signed GET, ``json.loads``); ``scan-context`` and ``scan-tracked`` iterate
the scan through a context (NO_TRACKING; APPEND_ONLY, every page with keys of its
own, so every entity is tracked); ``save`` adds the insert entities to one context
and saves them 100 per ``save_changes(BATCH)``. ``to-arrow`` reads the scan's pages with
``TableQuery.to_arrow()`` (one pyarrow.Table; pyarrow imported and one page converted in both runs).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(1, str(ROOT))


WORKLOADS = (
    "scan", "insert", "bulk", "decode-json", "decode-atom", "lxml-reads", "scan-floor", "scan-context", "scan-tracked",
    "save", "to-arrow",
)


def install_service(page: bytes, total: int, distinct: bool = False) -> None:
    """Answer queries with ``page`` (continuation until ``total``; ``distinct``: each page's
    PartitionKeys prefixed with its number) and batches with one 204 per operation."""
    import urllib3
    from requests.adapters import HTTPAdapter

    served = [0]
    per_page = page.count(b'"PartitionKey"')
    assert not distinct or page.count(b'"PartitionKey": "p0') == per_page

    def send(self: HTTPAdapter, request: Any, **kwargs: Any) -> Any:
        if request.method == "POST":
            count = (request.body or b"").count(b"\r\nContent-ID: ")
            parts = "".join(
                "--changesetresponse_c\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
                f"HTTP/1.1 204 No Content\r\nContent-ID: {n}\r\nX-Content-Type-Options: nosniff\r\n"
                "Cache-Control: no-cache\r\nPreference-Applied: return-no-content\r\nDataServiceVersion: 3.0;\r\n"
                "ETag: W/\"datetime'2026-11-23T15%3A30%3A00.94687Z'\"\r\n\r\n\r\n"
                for n in range(1, count + 1)
            )
            body = ("--batchresponse_b\r\nContent-Type: multipart/mixed; boundary=changesetresponse_c\r\n\r\n"
                    + parts + "--changesetresponse_c--\r\n--batchresponse_b--\r\n").encode()
            headers = {"Content-Type": "multipart/mixed; boundary=batchresponse_b", "Content-Length": str(len(body))}
            status = 202
        else:
            served[0] += 1
            body = page.replace(b'"PartitionKey": "p0', b'"PartitionKey": "%06d-p0' % served[0]) if distinct else page
            headers = {"Content-Type": "application/json;odata=minimalmetadata;streaming=true;charset=utf-8",
                       "Content-Length": str(len(body))}
            if served[0] * per_page < total:
                headers["x-ms-continuation-NextPartitionKey"] = f"1!8!{served[0]:06d}"
                headers["x-ms-continuation-NextRowKey"] = "1!8!MDAwMDAw"
            status = 200
        raw = urllib3.HTTPResponse(body=io.BytesIO(body), headers=headers, status=status, preload_content=False,
                                   decode_content=False)
        return self.build_response(request, raw)

    HTTPAdapter.send = send  # type: ignore[method-assign, assignment]


def decode(workload: str, count: int) -> None:
    """Parse codec_speed's 1,000-entity feed count / 1,000 times (after one warm-up parse)."""
    import codec_speed as cs

    from tablesdk._formats.atom import AtomFormat
    from tablesdk._formats.json import JsonFormat

    payloads = cs.make_payloads(1000)
    atom, jsonf = AtomFormat(clock=lambda: cs.FIXED_CLOCK), JsonFormat()
    if workload == "decode-json":
        body = cs.json_feed(payloads, jsonf)
        parse: Any = jsonf.parse_entities
    else:
        body = cs.atom_feed(payloads, atom)
        parse = atom.parse_entities if workload == "decode-atom" else cs.lxml_reads
    parse(body)
    for _ in range(count // 1000):
        parse(body)


def child(workload: str, count: int, built: int) -> None:
    if workload in ("decode-json", "decode-atom", "lxml-reads"):
        decode(workload, count)
        return
    from query import PARTITIONS, PER_PARTITION, entity_body

    from tablesdk import CloudStorageAccount

    items = []
    for p in range(10):
        for r in range(PER_PARTITION):
            entity = json.loads(entity_body(p, r))
            stamp = f"2026-11-23T15:30:{r % 60:02d}" + ("Z" if r % 10 == 0 else f".{r * 7919 % 10_000_000:07d}".rstrip("0") + "Z")
            items.append({"odata.etag": f"W/\"datetime'{stamp.replace(':', '%3A')}'\"", "Timestamp": stamp, **entity})
    page = json.dumps({"odata.metadata": "http://x/$metadata#t", "value": items}).encode()
    warm_up = 1000 if workload == "to-arrow" else 0  # its warm-up page is served before the counted ones
    install_service(page, count + warm_up, distinct=workload == "scan-tracked")
    conn = ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey="
            "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
            "TableEndpoint=http://127.0.0.1:9/devstoreaccount1;")
    client = CloudStorageAccount.parse(conn).create_cloud_table_client()
    assert PARTITIONS >= 10
    if workload == "scan-floor":  # benchmarks/query.py's raw floor: one session, a signed GET, json.loads
        if count:
            seen = floor_scan("http://127.0.0.1:9/devstoreaccount1", "cputable")
            assert seen >= count, seen
    elif workload == "to-arrow":
        import pyarrow  # noqa: F401 - imported in both runs: the import is not a per-entity cost

        client.create_query("cputable").take(1000).to_arrow()  # warm-up: first-use costs of pyarrow compute
        if count:
            table = client.create_query("cputable").to_arrow()
            assert table.num_rows >= count, table.num_rows
    elif workload.startswith("scan"):
        from tablesdk import MergeOption

        if workload == "scan":
            query: Any = client.create_query("cputable")
        else:
            option = MergeOption.NO_TRACKING if workload == "scan-context" else MergeOption.APPEND_ONLY
            query = client.get_table_service_context(merge_option=option).create_query("cputable")
        if count:
            seen = sum(1 for _ in query)
            assert seen >= count, seen
    elif workload == "save":
        from bulk import tablesdk_entities

        from tablesdk import SaveChangesOptions

        entities = tablesdk_entities(built, 100)
        ctx = client.get_table_service_context()
        for start in range(0, count, 100):
            for entity in entities[start:start + 100]:
                ctx.add_object("cputable", entity)
            ctx.save_changes(SaveChangesOptions.BATCH)
    else:
        from bulk import tablesdk_bulk, tablesdk_entities, tablesdk_sequential

        entities = tablesdk_entities(built, 100)  # built in both runs: their making is not the client's cost
        if count and workload == "insert":
            tablesdk_sequential(client, entities[:count])("cputable")
        elif count:
            tablesdk_bulk(client, entities[:count], 1)("cputable")


def floor_scan(endpoint: str, table: str) -> int:
    from query import raw_scan

    return raw_scan(endpoint, table)


def instructions(workload: str, count: int, built: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
                        "--child", workload, str(count), str(built)], check=True, capture_output=True)
        match = re.search(r"^summary:\s*(\d+)", out.read_text(), re.M)
        assert match, "no callgrind summary"
        return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=2000)
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS[:3]))
    parser.add_argument("--child", nargs=3)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return
    n = args.entities
    print("| workload | instructions per entity |")
    print("|---|---|")
    for workload in args.workloads:
        per = (instructions(workload, n, n) - instructions(workload, 0, n)) / n
        print(f"| {workload} ({n:,} entities) | {per:,.0f} |")


if __name__ == "__main__":
    main()
