"""The emulator's service core per 100-insert change set, and the floor under it, in instructions;
and per entity read by a query, for a full scan and for PartitionKey ranges.

    python benchmarks/emulator_core.py [--batches 5] [--workloads core core-db floor http-floor scan range ...]

Each workload runs in a child process under ``valgrind --tool=callgrind`` twice, with 0
and with ``--batches`` change sets (the same requests built in both runs), and the
difference divided by the number of change sets is the instructions of one, repeatable
on a loaded machine. The change sets are benchmarks/emulator.py's: 100 inserts of its
ten-property entity, ``Prefer: return-no-content``.

* ``core``: ``TableService.handle`` on the ``$batch`` request (authentication off), in
  memory: everything the emulator does but the HTTP server.
* ``core-db``: the same with the data in a sqlite file (``--db``).
* ``floor``: the work no emulator of the service can skip, in Python: split the two
  multipart levels, split each operation's head from its body, ``json.loads`` the body,
  ``json.dumps`` what is stored, insert every row with one ``executemany``, write a
  100-part answer. No checks, no types, no Timestamps.
* ``http-floor``: the standard library's ``http.server`` (the emulator's server) reading
  the request and answering a fixed 100-part answer, over loopback from a client thread
  in the same process; the client's instructions are in the count too, so this is an
  upper bound of the HTTP layer's share.

The query workloads read a table of 8,000 entities (16 PartitionKeys of 500, the same
ten-property entity, written straight to the store) with ``TableService.handle``, in pages
of 1,000 (``$top=1000``) following the continuation tokens, as a data engine's scan and
range reads do; the figure is instructions per entity returned, ``-db`` with ``--db``:

* ``scan``: the whole table, no filter (8 pages).
* ``range``: ``PartitionKey ge 'p06' and PartitionKey lt 'p08'``, 1,000 entities in the
  middle of the table, one page.
* ``range-cont``: ``PartitionKey ge 'p04' and PartitionKey lt 'p12'``, 4,000 entities,
  4 pages, each continuing deep in the range.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(1, str(ROOT))

from emulator import batch_body  # noqa: E402

BATCH_WORKLOADS = ("core", "core-db", "floor", "http-floor")
QUERY_FILTERS = {
    "scan": None,
    "range": "PartitionKey ge 'p06' and PartitionKey lt 'p08'",
    "range-cont": "PartitionKey ge 'p04' and PartitionKey lt 'p12'",
}
QUERY_WORKLOADS = tuple(name + db for name in QUERY_FILTERS for db in ("", "-db"))
WORKLOADS = BATCH_WORKLOADS + QUERY_WORKLOADS
QUERY_PARTITIONS, QUERY_ROWS = 16, 500
ENDPOINT = "http://127.0.0.1:10002/devstoreaccount1"
HEADERS = {"x-ms-version": "2019-02-02", "accept": "application/json;odata=minimalmetadata",
           "dataserviceversion": "3.0;", "host": "127.0.0.1:10002"}


def bodies(count: int) -> list[tuple[str, bytes]]:
    """``count`` change sets and one more to warm up, each to its own partition."""
    return [batch_body(ENDPOINT, "bench", f"p{n:04d}", 0) for n in range(count + 1)]


def core(count: int, db: str) -> Callable[[], None]:
    from tablesdk.devstore._request import Request
    from tablesdk.devstore._service import TableService
    from tablesdk.devstore._storage import Storage

    service = TableService(Storage(db), allow_anonymous=True)
    created = service.handle(Request("POST", "/devstoreaccount1/Tables", "", {**HEADERS, "content-type":
                                     "application/json"}, json.dumps({"TableName": "bench"}).encode()))
    assert created.status in (201, 204), created
    requests = [Request("POST", "/devstoreaccount1/$batch", "", {**HEADERS, "content-type": ctype}, body)
                for ctype, body in bodies(count)]

    def one(request: Any) -> None:
        answer = service.handle(request)
        assert answer.status == 202 and b"HTTP/1.1 204" in answer.body and b"HTTP/1.1 4" not in answer.body

    one(requests[0])

    def run() -> None:
        for request in requests[1:]:
            one(request)

    return run


def query(workload: str, db: str) -> tuple[Callable[[], int], int]:
    """The pages of one query workload, and the number of entities they return."""
    import urllib.parse

    from emulator import entity_json
    from tablesdk.devstore._request import Request
    from tablesdk.devstore._service import TableService
    from tablesdk.devstore._storage import Storage
    from tablesdk.devstore._values import props_from_json_members

    storage = Storage(db)
    with storage.transaction():
        storage.create_table("bench")
        for p in range(QUERY_PARTITIONS):
            rows = []
            for n in range(QUERY_ROWS):
                entity = entity_json(f"p{p:02d}", n)
                pk, rk = entity.pop("PartitionKey"), entity.pop("RowKey")
                rows.append((pk, rk, props_from_json_members(json.dumps(entity)[1:-1])))
            assert storage.insert_entities("bench", rows) is not None
    service = TableService(storage, allow_anonymous=True)
    flt = QUERY_FILTERS[workload.removesuffix("-db")]

    def pages() -> int:
        params = {"$top": "1000"} if flt is None else {"$top": "1000", "$filter": flt}
        count = 0
        while True:
            answer = service.handle(Request("GET", "/devstoreaccount1/bench()", urllib.parse.urlencode(params),
                                            HEADERS, b""))
            assert answer.status == 200, answer
            count += answer.body.count(b'"PartitionKey"')
            headers = dict(answer.headers)
            if "x-ms-continuation-NextPartitionKey" not in headers:
                return count
            params["NextPartitionKey"] = headers["x-ms-continuation-NextPartitionKey"]
            params["NextRowKey"] = headers["x-ms-continuation-NextRowKey"]

    expected = pages()  # warm up, and the number of entities one run returns
    return pages, expected


_BOUNDARY = re.compile(rb"boundary=([^\s;]+)")


def floor(count: int) -> Callable[[], None]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE entities (tbl TEXT, pk BLOB, rk BLOB, ts TEXT, jmin TEXT, "
                 "PRIMARY KEY (tbl, pk, rk)) WITHOUT ROWID")
    built = bodies(count)
    answer_part = (b"--changesetresponse_x\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary"
                   b"\r\n\r\nHTTP/1.1 204 No Content\r\nContent-ID: 1\r\nETag: W/\"datetime'2026-01-01T00%3A00%3A00Z'\"\r\n"
                   b"Location: x\r\nDataServiceId: x\r\nDataServiceVersion: 3.0;\r\n\r\n\r\n")

    def one(ctype: str, body: bytes) -> bytes:
        outer = b"--" + ctype.split("boundary=")[1].encode()
        changeset = body.split(outer)[1]
        match = _BOUNDARY.search(changeset)
        assert match is not None
        rows = []
        for part in changeset.split(b"--" + match.group(1))[1:-1]:
            operation = part.split(b"\r\n\r\n", 2)[2]
            entity = json.loads(operation)
            pk, rk = entity.pop("PartitionKey"), entity.pop("RowKey")
            rows.append(("bench", pk.encode("utf-16-be"), rk.encode("utf-16-be"), "", json.dumps(entity)))
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO entities VALUES (?, ?, ?, ?, ?)", rows)
        conn.execute("COMMIT")
        return answer_part * len(rows)

    one(*built[0])

    def run() -> None:
        for item in built[1:]:
            one(*item)

    return run


def http_floor(count: int) -> Callable[[], None]:
    import http.client
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    answer = (b"--changesetresponse_x\r\nContent-Type: application/http\r\n\r\nHTTP/1.1 204 No Content\r\n"
              b"Content-ID: 1\r\nETag: W/\"datetime'2026-01-01T00%3A00%3A00Z'\"\r\n\r\n\r\n") * 100

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(202)
            self.send_header("Content-Type", "multipart/mixed; boundary=batchresponse_x")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1])
    built = bodies(count)

    def one(ctype: str, body: bytes) -> None:
        connection.request("POST", "/devstoreaccount1/$batch", body, {"Content-Type": ctype})
        response = connection.getresponse()
        assert response.status == 202
        response.read()

    one(*built[0])

    def run() -> None:
        for item in built[1:]:
            one(*item)

    return run


def child(workload: str, count: int, run: bool) -> None:
    with tempfile.TemporaryDirectory() as work:
        if workload in QUERY_WORKLOADS:
            pages, _ = query(workload, os.path.join(work, "store.db") if workload.endswith("-db") else ":memory:")
            if run:
                pages()
            return
        if workload in ("core", "core-db"):
            go = core(count, os.path.join(work, "store.db") if workload == "core-db" else ":memory:")
        elif workload == "floor":
            go = floor(count)
        else:
            go = http_floor(count)
        if run:
            go()


def instructions(workload: str, count: int, run: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
                               "--child", workload, "--batches", str(count)] + (["--run"] if run else []),
                              capture_output=True, text=True, check=True)
        match = re.search(r"refs:\s+([\d,]+)", done.stderr)
        assert match, "no callgrind summary"
        return int(match.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.batches, args.run)
        return
    batch = [w for w in args.workloads if w in BATCH_WORKLOADS]
    if batch:
        print(f"instructions per 100-insert change set (callgrind, {args.batches} change sets)\n")
        print("| workload | instructions |")
        print("|---|---|")
    for workload in batch:
        per = (instructions(workload, args.batches, True) - instructions(workload, args.batches, False)) / args.batches
        print(f"| {workload} | {per / 1e6:.1f} M |", flush=True)
    queries = [w for w in args.workloads if w in QUERY_WORKLOADS]
    if queries:
        print(f"\ninstructions per entity returned (callgrind; {QUERY_PARTITIONS * QUERY_ROWS:,} entities, "
              "pages of 1,000)\n")
        print("| workload | entities | instructions per entity |")
        print("|---|---|---|")
    for workload in queries:
        entities = {"scan": QUERY_PARTITIONS * QUERY_ROWS, "range": 2 * QUERY_ROWS,
                    "range-cont": 8 * QUERY_ROWS}[workload.removesuffix("-db")]
        per = (instructions(workload, 1, True) - instructions(workload, 1, False)) / entities
        print(f"| {workload} | {entities:,} | {per:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
