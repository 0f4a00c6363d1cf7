"""Query pages recorded from a real service, served again from memory on loopback (own process).

    python benchmarks/_replay.py PAGES.pickle      # prints its table endpoint, serves until stdin closes

A scan against Azurite on a 2-core machine measures Azurite as much as the client:
it spends 35-43 ms of CPU on each 1,000-entity page on one Node thread. Replayed,
a page costs the server about a millisecond (one dict look-up, one write of the
recorded bytes), so the entities/s of a scan are the client's. :func:`record`
wraps a client's sender and keeps every query answer (status, headers, body)
under the continuation it was asked for; the server answers a GET by its
``NextPartitionKey``/``NextRowKey`` parameters (the first page: none) and
ignores everything else (the signature included), so the client does all
its usual work on the request.
"""

from __future__ import annotations

import pickle
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: Recorded answers: (NextPartitionKey, NextRowKey) of the request -> (status, headers, body).
Pages = dict[tuple[str | None, str | None], tuple[int, dict[str, str], bytes]]

#: Headers not replayed: they describe the original connection, not the answer.
_HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive", "date", "content-encoding"}


def page_key(url: str) -> tuple[str | None, str | None]:
    """Which page a query URL asks for: its continuation parameters."""
    query = parse_qs(urlsplit(url).query)
    return (query.get("NextPartitionKey", [None])[0], query.get("NextRowKey", [None])[0])


class Recorder:
    """A sender that passes requests to ``inner`` and keeps the answer of every GET."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.pages: Pages = {}

    def send(self, request: Any, timeout: Any) -> Any:
        response = self.inner.send(request, timeout)
        if request.method == "GET":
            headers = {k: v for k, v in response.headers.items() if k.lower() not in _HOP_HEADERS}
            self.pages[page_key(request.url)] = (response.status, headers, bytes(response.body))
        return response

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def serve(pages: Pages) -> tuple[ThreadingHTTPServer, str]:
    """A loopback server answering from ``pages`` (started on its own thread) and its table endpoint."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the client's pooled connection is reused, as with a service

        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            found = pages.get(page_key(self.path))
            status, headers, body = found if found else (404, {"Content-Type": "text/plain"}, b"no such page")
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/devstoreaccount1"


def main() -> None:
    with open(sys.argv[1], "rb") as handle:
        pages: Pages = pickle.load(handle)
    server, endpoint = serve(pages)
    print(endpoint, flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
    server.shutdown()


if __name__ == "__main__":
    main()
