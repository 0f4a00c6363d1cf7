"""Concurrency against a service that costs a round trip and nothing else: what the client can overlap.

    python benchmarks/concurrency.py [--latency 0.02] [--repeats 5] [--workers 8]

Against the real service a request costs a network round trip (tens of ms) and
the service scales out, so ``bulk_insert`` workers and parallel range scans
should scale with workers until the client's own CPU is the limit. On a 2-vCPU
machine Azurite (single-threaded) is the limit long before that, so this script
also measures the client alone: a synthetic service inside the client process
(a ``sender=`` for ``CloudTableClient``) that sleeps ``--latency`` seconds per
request (the GIL is released, as on a real socket) and answers from
pre-rendered bytes: Query Entities over 100 partitions x 100 entities (the
``$filter`` PartitionKey ranges, a ``RowKey gt`` within one partition, ``$top``
and continuation tokens that the SDK sends are honoured) and ``$batch``
inserts (one ``204`` per operation). Its own CPU per request is small and
counts as the client's.

Contenders, interleaved: ``bulk_insert`` of 10,000 entities with 1 and
``--workers`` workers; one scan of the table (10,000 entities, or
``--scan-partitions`` x 100: 1,000 partitions make the 100,000 entities a
parallel scan is more often used for, where finding boundaries and the last
wave of pages weigh less) and ``iter_parallel`` with ``--workers`` workers
(boundaries found by probing, as by default, and given: 25 ranges of equal
size); 100 contexts of 100 updates each saved as batches one after another
and begun all at once (``begin_save_changes``, on the client's executor).
"""

from __future__ import annotations

import argparse
import bisect
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import DEVSTORE_KEY, Series, interleave, machine, report  # noqa: E402
from bulk import tablesdk_entities  # noqa: E402
from query import PARTITIONS, PER_PARTITION, entity_body, known_boundaries  # noqa: E402

from tablesdk import CloudStorageAccount, SaveChangesOptions  # noqa: E402
from tablesdk._pipeline._http import HttpRequest, HttpResponse, MockSender, Timeout  # noqa: E402

_COMPARISON = re.compile(r"PartitionKey (ge|lt|eq|gt|le) '((?:[^']|'')*)'")
_ROW_AFTER = re.compile(r"RowKey gt '((?:[^']|'')*)'")
_ETAG = "W/\"datetime'2026-11-23T15%3A30%3A00.94687Z'\""


class SyntheticService:
    """Answers Query Entities and $batch inserts from memory after sleeping ``latency`` seconds."""

    def __init__(self, latency: float, partitions: int = PARTITIONS) -> None:
        self.latency = latency
        self.keys: list[tuple[str, str]] = []
        self.items: list[bytes] = []
        for p in range(partitions):
            for r in range(PER_PARTITION):
                entity = json.loads(entity_body(p, r))
                entity = {"odata.etag": _ETAG, "Timestamp": "2026-11-23T15:30:00.94687Z", **entity}
                self.keys.append((entity["PartitionKey"], entity["RowKey"]))
                self.items.append(json.dumps(entity, separators=(",", ":")).encode())
        self.batch_answers: dict[int, tuple[bytes, str]] = {}

    def send(self, request: HttpRequest, timeout: Timeout) -> HttpResponse:
        time.sleep(self.latency)
        if request.method == "POST" and request.url.endswith("$batch"):
            return self._batch(request.body or b"")
        return self._query(request.url)

    def _query(self, url: str) -> HttpResponse:
        params = {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}
        low, high = ("", ""), None
        for op, literal in _COMPARISON.findall(params.get("$filter", "")):
            key = literal.replace("''", "'")
            if op in ("ge", "eq"):
                low = max(low, (key, ""))
            if op == "gt":
                low = max(low, (key + "\0", ""))
            if op in ("lt", "eq", "le"):
                bound = key if op == "lt" else key + "\0"
                high = bound if high is None else min(high, bound)
        after = _ROW_AFTER.search(params.get("$filter", ""))
        if after is not None:  # the rest of one partition (PartitionKey eq): rows after this one
            low = (low[0], after.group(1).replace("''", "'") + "\0")
        if "NextPartitionKey" in params:
            low = max(low, (unquote(params["NextPartitionKey"]), unquote(params.get("NextRowKey", ""))))
        start = bisect.bisect_left(self.keys, low)
        end = len(self.keys) if high is None else bisect.bisect_left(self.keys, (high, ""))
        top = min(int(params.get("$top", 1000)), 1000)
        stop = min(end, start + top)
        body = b'{"odata.metadata":"http://x/$metadata#t","value":[' + b",".join(self.items[start:stop]) + b"]}"
        headers = {"Content-Type": "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"}
        if stop < end:
            headers["x-ms-continuation-NextPartitionKey"] = self.keys[stop][0]
            headers["x-ms-continuation-NextRowKey"] = self.keys[stop][1]
        return MockSender.response(200, body, headers)

    def _batch(self, body: bytes) -> HttpResponse:
        count = body.count(b"\r\nContent-ID: ")
        if count not in self.batch_answers:
            parts = [
                "--changesetresponse_c\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
                f"HTTP/1.1 204 No Content\r\nContent-ID: {n}\r\nX-Content-Type-Options: nosniff\r\n"
                "Cache-Control: no-cache\r\nPreference-Applied: return-no-content\r\nDataServiceVersion: 3.0;\r\n"
                f"ETag: {_ETAG}\r\n\r\n\r\n"
                for n in range(1, count + 1)
            ]
            text = ("--batchresponse_b\r\nContent-Type: multipart/mixed; boundary=changesetresponse_c\r\n\r\n"
                    + "".join(parts) + "--changesetresponse_c--\r\n--batchresponse_b--\r\n")
            self.batch_answers[count] = (text.encode(), "multipart/mixed; boundary=batchresponse_b")
        data, content_type = self.batch_answers[count]
        return MockSender.response(202, data, {"Content-Type": content_type})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--scan-partitions", type=int, default=PARTITIONS,
                        help=f"partitions of {PER_PARTITION} entities the scan reads (at most 1000)")
    parser.add_argument("--only", choices=("bulk", "save", "scan"), action="append",
                        help="run only these workloads (repeatable; default: all three)")
    args = parser.parse_args()
    only = set(args.only or ("bulk", "save", "scan"))
    service = SyntheticService(args.latency, args.scan_partitions)
    scanned = args.scan_partitions * PER_PARTITION
    given = known_boundaries(args.scan_partitions)
    conn = ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            f"AccountKey={DEVSTORE_KEY};TableEndpoint=http://127.0.0.1:9/devstoreaccount1;")
    client = CloudStorageAccount.parse(conn).create_cloud_table_client(sender=service, pool_size=max(16, args.workers))
    entities = tablesdk_entities(PARTITIONS * PER_PARTITION, PER_PARTITION)
    query = client.create_query("synthetic")
    total = PARTITIONS * PER_PARTITION

    def bulk(workers: int) -> Any:
        def run() -> int:
            result = client.bulk_insert("synthetic", entities, max_workers=workers)
            assert not result.failed, result.failed[0].error
            return total
        return run

    bulk_runs = [(Series("bulk_insert, 1 worker"), bulk(1)), (Series(f"bulk_insert, {args.workers} workers"), bulk(args.workers))]
    scan_runs = [(Series("one scan"), lambda: sum(1 for _ in query)),
                 (Series("one scan, read_ahead(False)"), lambda: sum(1 for _ in query.read_ahead(False))),
                 (Series(f"iter_parallel({args.workers}), boundaries by probing"),
                  lambda: sum(1 for _ in query.iter_parallel(args.workers))),
                 (Series(f"iter_parallel({args.workers}), boundaries given ({len(given) + 1} equal ranges)"),
                  lambda: sum(1 for _ in query.iter_parallel(args.workers, boundaries=given)))]
    def saves(begun: bool) -> Any:
        def run() -> int:
            contexts = []
            for start in range(0, total, PER_PARTITION):
                ctx = client.get_table_service_context()
                for entity in entities[start:start + PER_PARTITION]:
                    ctx.attach_to("synthetic", entity, etag="*")
                    ctx.update_object(entity)
                contexts.append(ctx)
            if begun:
                futures = [ctx.begin_save_changes(SaveChangesOptions.BATCH) for ctx in contexts]
                for future in futures:
                    future.result()
            else:
                for ctx in contexts:
                    ctx.save_changes(SaveChangesOptions.BATCH)
            return total
        return run

    save_runs = [(Series("100 contexts, save_changes(BATCH) one after another"), saves(False)),
                 (Series("100 contexts, begin_save_changes(BATCH) all at once"), saves(True))]
    workloads = [(name, title, runs) for name, title, runs in (
        ("bulk", "bulk_insert of 10,000 entities (100 partitions x 100)", bulk_runs),
        ("save", "save_changes of 100 contexts x 100 updates", save_runs),
        ("scan", f"scan of {scanned:,} entities ({args.scan_partitions} partitions x 100, 1,000 per page)", scan_runs),
    ) if name in only]
    chosen = [one for _, _, runs in workloads for one in runs]
    for name, _, runs in workloads:
        for _, run in runs:
            assert run() == (scanned if name == "scan" else total)  # warm-up and check
    interleave(chosen, args.repeats)
    for _, title, runs in workloads:
        series = [one for one, _ in runs]
        print(report(f"{title}, synthetic service, {args.latency * 1000:.0f} ms per request; {machine()}; "
                     f"{args.repeats} interleaved repetitions", series, None, None))
        print()
        for one in series[1:]:
            print(f"{one.label} / {series[0].label}: {statistics.median(one.rates) / statistics.median(series[0].rates):.2f}x")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
