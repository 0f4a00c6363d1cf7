"""Memory of tracked entities: bytes per entity a context's tracking adds, each count in a child process.

    python benchmarks/tracked_memory.py [--counts 100000 1000000] [--detail N]

Scenario ``queried`` (the default): the entities come from a synthetic paged service (requests' HTTP adapter
replaced in the child, as in benchmarks/memory.py), but every page holds
different keys (its number is in each PartitionKey), so a context tracks every
entity it reads. Each child reads ``count`` entities into a list, either with
``MergeOption.NO_TRACKING`` (the entities alone) or ``APPEND_ONLY`` (the same
entities, tracked: identity map, descriptors, what change tracking keeps), and
reports its peak resident set size (``ru_maxrss``). Tracking's cost per entity
is (tracked peak - untracked peak) / count.

Scenario ``saved`` (``--scenario saved``): benchmarks/bulk.py's entities, made in
the child, either kept in a list (untracked) or also added to a context and
saved 100 per ``save_changes(BATCH)`` (answered from memory, as in
benchmarks/instructions.py): what a context keeps of the entities it wrote.

``--detail N`` runs both in one process under tracemalloc with N entities and
prints the largest allocations tracking adds (what the bytes are).
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from memory import KEY, PAGE, page_body  # noqa: E402

MARK = b'"p0'  # every PartitionKey of memory.py's page starts so: p000 .. p009


def install_distinct_pages(total: int) -> None:
    """Answer Query Entities with ``total`` entities in pages of 1,000, each page's keys its own."""
    import urllib3
    from requests.adapters import HTTPAdapter

    body = page_body()
    assert body.count(MARK) == PAGE
    pages = -(-total // PAGE)
    served = [0]

    def send(self: HTTPAdapter, request: Any, **kwargs: Any) -> Any:
        served[0] += 1
        page = body.replace(MARK, b'"%06d-p0' % served[0])
        headers = {"Content-Type": "application/json;odata=minimalmetadata;streaming=true;charset=utf-8",
                   "Content-Length": str(len(page)), "x-ms-request-id": str(served[0])}
        if served[0] < pages:
            headers["x-ms-continuation-NextPartitionKey"] = f"1!8!{served[0]:06d}"
            headers["x-ms-continuation-NextRowKey"] = "1!8!MDAwMDAw"
        raw = urllib3.HTTPResponse(body=io.BytesIO(page), headers=headers, status=200, preload_content=False,
                                   decode_content=False)
        return self.build_response(request, raw)

    HTTPAdapter.send = send  # type: ignore[method-assign, assignment]


def context(how: str) -> Any:
    sys.path.insert(0, str(ROOT))
    from tablesdk import CloudStorageAccount, MergeOption

    conn = ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            f"AccountKey={KEY};TableEndpoint=http://127.0.0.1:9/devstoreaccount1;")
    client = CloudStorageAccount.parse(conn).create_cloud_table_client()
    option = MergeOption.APPEND_ONLY if how.endswith("tracked") and not how.endswith("untracked") else MergeOption.NO_TRACKING
    return client.get_table_service_context(merge_option=option)


def saved(ctx: Any, total: int) -> list[Any]:
    """``total`` new entities (benchmarks/bulk.py's) added to ``ctx`` and saved 100 per batch."""
    from bulk import tablesdk_entities
    from instructions import install_service

    from tablesdk import SaveChangesOptions

    install_service(b"", 0)  # answers batches with one 204 (and an ETag) per operation
    entities = tablesdk_entities(total, 100)
    if ctx is not None:
        for start in range(0, total, 100):
            for entity in entities[start:start + 100]:
                ctx.add_object("memtable", entity)
            ctx.save_changes(SaveChangesOptions.BATCH)
    return entities


def child(total: int, how: str) -> None:
    ctx = context(how)
    if how.startswith("saved"):
        kept = saved(ctx if how == "saved-tracked" else None, total)
        print(json.dumps({"count": len(kept), "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
        return
    install_distinct_pages(total)
    kept = list(ctx.create_query("memtable"))
    assert len(kept) == -(-total // PAGE) * PAGE, len(kept)
    assert len(ctx.entities) == (len(kept) if how == "tracked" else 0)
    print(json.dumps({"count": len(kept), "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


def measure(total: int, how: str) -> dict[str, int]:
    out = subprocess.run([sys.executable, __file__, "--child", str(total), how], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def detail(total: int, scenario: str) -> None:
    import gc
    import tracemalloc

    results = {}
    for how in ("untracked", "tracked"):
        ctx = context(how)
        install_distinct_pages(total)
        gc.collect()
        tracemalloc.start(8)
        before = tracemalloc.take_snapshot()
        if scenario == "saved":
            kept = saved(ctx if how == "tracked" else None, total)
        else:
            kept = list(ctx.create_query("memtable").read_ahead(False))
        gc.collect()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        results[how] = (kept, ctx, after.compare_to(before, "traceback"))
        print(f"{how}: {sum(s.size_diff for s in results[how][2]) / len(kept):,.0f} bytes per entity (tracemalloc)")
    for stat in results["tracked"][2][:15]:
        print(f"{stat.size_diff / total:8.1f} B/entity {stat.count_diff / total:5.2f} blocks/entity")
        for line in stat.traceback.format()[-4:]:
            print("    ", line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--child", nargs=2)
    parser.add_argument("--detail", type=int)
    parser.add_argument("--scenario", choices=("queried", "saved"), default="queried",
                        help="queried: entities a query read; saved: new entities added and saved in batches")
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1])
        return
    if args.detail:
        detail(args.detail, args.scenario)
        return
    print("| entities | untracked peak RSS MiB | tracked peak RSS MiB | tracking bytes per entity |")
    print("|---|---|---|---|")
    prefix = "saved-" if args.scenario == "saved" else ""
    for count in args.counts:
        plain, tracked = measure(count, prefix + "untracked"), measure(count, prefix + "tracked")
        per = (tracked["peak_kib"] - plain["peak_kib"]) * 1024 / plain["count"]
        print(f"| {plain['count']:,} | {plain['peak_kib'] / 1024:,.1f} | {tracked['peak_kib'] / 1024:,.1f} | {per:,.0f} |")


if __name__ == "__main__":
    main()
