"""``python -m tablesdk.devstore``: run the emulator in the foreground."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from types import FrameType

from ._server import DevStore


def build_parser(prog: str = "python -m tablesdk.devstore") -> argparse.ArgumentParser:
    """The command line's options (``prog`` names the command in usage and error lines)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Local emulator of the Azure Table service (account devstoreaccount1).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=10002, help="port (default 10002; 0 picks a free one)")
    parser.add_argument("--db", default=":memory:", help="sqlite file to keep data in, or :memory: (default)")
    parser.add_argument("--page-size", type=int, default=1000, help="largest query page, 1..1000 (default 1000)")
    parser.add_argument("--max-scan", type=int, default=None,
                        help="entities a query examines per request before answering with a continuation")
    parser.add_argument("--allow-anonymous", action="store_true", help="accept unsigned requests")
    parser.add_argument("--no-url-segment-limit", action="store_true",
                        help="accept URL path segments over 260 characters (HTTP.sys refuses them)")
    parser.add_argument("--double-decode-keys", action="store_true",
                        help="reproduce the service's double decoding of keys in URL paths ('%%' bug)")
    parser.add_argument("--bearer-token", action="append", default=[], metavar="TOKEN",
                        help="accept this Entra ID token in 'Authorization: Bearer' (repeatable)")
    parser.add_argument("--read-only", action="store_true",
                        help="the explorer page only reads: its write controls are hidden and its writes refused "
                             "(clients with the account key still write)")
    parser.add_argument("--no-explorer", action="store_true", help="do not serve the explorer page at the root address")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request")
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m tablesdk.devstore") -> int:
    """Run the emulator in the foreground until SIGINT/SIGTERM; returns the exit status."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    try:
        store = DevStore(args.port, args.page_size, host=args.host, db=args.db, max_scan=args.max_scan,
                         allow_anonymous=args.allow_anonymous, verbose=args.verbose,
                         max_url_segment=None if args.no_url_segment_limit else 260,
                         double_decode_keys=args.double_decode_keys, bearer_tokens=args.bearer_token,
                         explorer=not args.no_explorer, explorer_read_only=args.read_only)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        from ._server import DevStoreServer

        store._server = DevStoreServer((store.host, store.requested_port), store.service, store.verbose,
                                       store.explorer)
    except OSError as exc:
        print(f"devstore: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1

    def stop(signum: int, frame: FrameType | None) -> None:
        store.request_shutdown()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"devstore: serving {store.url}", flush=True)
    print(f"devstore: connection string {store.connection_string}", flush=True)
    if store.explorer is not None:
        mode = " (read-only)" if store.explorer.read_only else ""
        print(f"devstore: explorer {store.explorer_url}{mode}", flush=True)
    store.serve_forever()
    store.storage.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
