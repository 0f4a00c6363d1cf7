"""tablesdk.devstore: the bundled local emulator of the Azure Table service.

Serves the Table REST API (JSON and AtomPub payloads, Shared Key, Shared Key
Lite, SAS and Bearer-token authentication, queries with continuation, entity
group transactions, table ACLs, service properties with CORS, a read-only
secondary with stats) for the development account ``devstoreaccount1`` from
sqlite, on loopback, for tests and local development::

    from tablesdk.devstore import DevStore

    with DevStore(port=0, page_size=1000) as store:
        store.url                # http://127.0.0.1:<port>/devstoreaccount1
        store.connection_string  # ready for CloudStorageAccount.parse
        store.reset()            # drop every table between tests

Command line: ``python -m tablesdk.devstore [--host 127.0.0.1] [--port 10002]
[--db PATH|:memory:] [--page-size N] [--bearer-token TOKEN] [--read-only]``; it also
serves a page to look at the tables at its root address. See docs/devstore.md.

This package never imports the SDK client; it shares only the EDM helpers.
"""

from __future__ import annotations

from ._server import DevStore, DevStoreServer
from ._request import KNOWN_VERSIONS, Request, Response
from ._service import DEVSTORE_ACCOUNT, DEVSTORE_KEY, TableService
from ._storage import Storage

__all__ = [
    "DevStore",
    "DevStoreServer",
    "TableService",
    "Storage",
    "Request",
    "Response",
    "DEVSTORE_ACCOUNT",
    "DEVSTORE_KEY",
    "KNOWN_VERSIONS",
]
