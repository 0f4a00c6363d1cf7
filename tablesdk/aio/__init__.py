"""tablesdk for asyncio: the same SDK, awaitable (the ``aio`` extra: ``pip install '.[aio]'`` in a checkout).

:class:`AsyncCloudTableClient` (from
``account.create_async_cloud_table_client()``) has every operation of
:class:`tablesdk.CloudTableClient` as a coroutine; its
:class:`AsyncTableServiceContext` records changes synchronously and saves them
with ``await``; :class:`AsyncTableQuery` is iterated with ``async for``. The
entity classes, errors, retry policies, filters and continuation tokens are
the ones of :mod:`tablesdk`. See docs/async.md.
"""

from ._sender import AiohttpSender, AsyncSender
from ._bulk import bulk_insert
from ._client import AsyncCloudTableClient
from ._context import AsyncTableServiceContext
from ._query import AsyncQuerySource, AsyncTableQuery
from ._table import AsyncCloudTable, AsyncTableContext

__all__ = [
    "AsyncCloudTableClient",
    "AsyncTableServiceContext",
    "AsyncTableQuery",
    "AsyncCloudTable",
    "AsyncTableContext",
    "AsyncQuerySource",
    "AiohttpSender",
    "AsyncSender",
    "bulk_insert",
]
