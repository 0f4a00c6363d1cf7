"""Flat memory: peak RSS of lazily iterating 100,000 and 1,000,000 entities, each in a child process.

    python benchmarks/memory.py [--small 100000] [--large 1000000]

The entities come from a synthetic paged service: requests' HTTP adapter is
replaced, in the child only, by one that answers every Query Entities request
with the same 1,000-entity JSON page (ten mixed properties, DateTimes in trimmed
forms) and a continuation token until the count is reached. Everything above
the adapter (requests, urllib3's body reading, the transport, the codec, the
entities) runs as it does against the service, and no server shares the
process. Each child iterates one query lazily, counting entities, and reports
its peak resident set size (``ru_maxrss``); the goal is the large count peaking
within 20% of the small one.
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE = 1000
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def page_body() -> bytes:
    items = []
    for n in range(PAGE):
        stamp = f"2024-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}"
        items.append({
            "odata.etag": f"W/\"datetime'{stamp}.1234567Z'\"", "PartitionKey": f"p{n // 100:03d}",
            "RowKey": f"{n:06d}", "Timestamp": f"{stamp}.94687Z", "Name": f"entity-{n}", "Count": n,
            "Big": str(2**40 + n), "Big@odata.type": "Edm.Int64", "Ratio": n / 7, "Ratio@odata.type": "Edm.Double",
            "Active": n % 2 == 0, "When": f"{stamp}.{n:06d}Z", "When@odata.type": "Edm.DateTime",
            "Id": str(uuid.UUID(int=n)), "Id@odata.type": "Edm.Guid", "Blob": "AAECAwQFBgcICQoLDA0ODw==",
            "Blob@odata.type": "Edm.Binary", "Note": "x" * 51, "Small": n % 7,
        })
    return json.dumps({"odata.metadata": "http://127.0.0.1/devstoreaccount1/$metadata#t", "value": items}).encode()


def install_paged_service(total: int) -> None:
    """Make every request through requests' HTTPAdapter answer the next page of ``total`` entities."""
    import urllib3
    from requests.adapters import HTTPAdapter

    body = page_body()
    pages = -(-total // PAGE)
    served = [0]

    def send(self: HTTPAdapter, request: Any, **kwargs: Any) -> Any:
        served[0] += 1
        headers = {"Content-Type": "application/json;odata=minimalmetadata;streaming=true;charset=utf-8",
                   "Content-Length": str(len(body)), "x-ms-request-id": str(served[0])}
        if served[0] < pages:
            headers["x-ms-continuation-NextPartitionKey"] = f"1!8!{served[0]:06d}"
            headers["x-ms-continuation-NextRowKey"] = "1!8!MDAwMDAw"
        raw = urllib3.HTTPResponse(body=io.BytesIO(body), headers=headers, status=200, preload_content=False,
                                   decode_content=False)
        return self.build_response(request, raw)

    HTTPAdapter.send = send  # type: ignore[method-assign, assignment]


def child(total: int, how: str) -> None:
    sys.path.insert(0, str(ROOT))
    from tablesdk import CloudStorageAccount, MergeOption

    install_paged_service(total)
    conn = ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            f"AccountKey={KEY};TableEndpoint=http://127.0.0.1:9/devstoreaccount1;")
    client = CloudStorageAccount.parse(conn).create_cloud_table_client()
    if how == "client":
        query = client.create_query("memtable")
    else:
        query = client.get_table_service_context(merge_option=MergeOption.NO_TRACKING).create_query("memtable")
    count = 0
    for _ in query:
        count += 1
    assert count == -(-total // PAGE) * PAGE, count
    print(json.dumps({"count": count, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))


def measure(total: int, how: str) -> dict[str, int]:
    out = subprocess.run([sys.executable, __file__, "--child", str(total), how], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--child", type=int)
    parser.add_argument("how", nargs="?", default="client", choices=("client", "context"))
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.how)
        return
    print("| query | entities | peak RSS MiB | large / small |")
    print("|---|---|---|---|")
    for how, label in (("client", "client.create_query"), ("context", "context, NO_TRACKING")):
        small, large = measure(args.small, how), measure(args.large, how)
        ratio = large["peak_kib"] / small["peak_kib"]
        print(f"| {label} | {small['count']:,} | {small['peak_kib'] / 1024:.1f} | |")
        print(f"| {label} | {large['count']:,} | {large['peak_kib'] / 1024:.1f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
