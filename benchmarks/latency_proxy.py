"""A TCP relay that adds a fixed latency to every request, in its own process.

    python benchmarks/latency_proxy.py UPSTREAM_ENDPOINT LATENCY_SECONDS

Prints the proxied endpoint (same path, the relay's port) on one line, then
relays until stdin closes. Each client connection gets its own upstream
connection; the first bytes of each request (client bytes after an answer, or
at the start) are held ``LATENCY_SECONDS`` before they go upstream: a network
round trip, without parsing HTTP. asyncio keeps the relay's own CPU per request
far below that of an HTTP-parsing proxy (tests/faults.py's FaultProxy, whose
``latency=`` option does the same for tests), so the concurrency figures
measure the client and the server, not the relay. The benchmarks start it
through ``_common.latency_proxy``.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from urllib.parse import urlsplit


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, before: object) -> None:
    try:
        while True:
            data = await reader.read(256 * 1024)
            if not data:
                break
            await before(data)  # type: ignore[operator]
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def serve(host: str, port: int, latency: float, path: str) -> None:
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            client_writer.close()
            return
        fresh = [True]  # the next client bytes start a request

        async def to_server(_: bytes) -> None:
            if fresh[0]:
                fresh[0] = False
                await asyncio.sleep(latency)

        async def to_client(_: bytes) -> None:
            fresh[0] = True

        await asyncio.gather(_pipe(client_reader, up_writer, to_server), _pipe(up_reader, client_writer, to_client))

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=256)
    print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}{path}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    upstream, latency = sys.argv[1], float(sys.argv[2])
    parts = urlsplit(upstream)
    assert parts.hostname and parts.port
    loop = asyncio.new_event_loop()
    # stdin closing (the benchmark ending) stops the relay.
    threading.Thread(target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(loop.stop)), daemon=True).start()
    loop.create_task(serve(parts.hostname, parts.port, latency, parts.path.rstrip("/")))
    try:
        loop.run_forever()
    finally:
        loop.close()


if __name__ == "__main__":
    main()
