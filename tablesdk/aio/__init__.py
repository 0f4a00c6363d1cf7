"""tablesdk for asyncio: the same SDK, awaitable (the ``aio`` extra: ``pip install '.[aio]'`` in a checkout).

:class:`AsyncCloudTableClient` (from
``account.create_async_cloud_table_client()``) has every operation of
:class:`tablesdk.CloudTableClient` as a coroutine; its
:class:`AsyncTableServiceContext` records changes synchronously and saves them
with ``await``; :class:`AsyncTableQuery` is iterated with ``async for``. The
entity classes, errors, retry policies, filters and continuation tokens are
the ones of :mod:`tablesdk`. See docs/async.md.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._bulk import bulk_insert
from ._client import AsyncCloudTableClient
from ._context import AsyncTableServiceContext
from ._query import AsyncQuerySource, AsyncTableQuery
from ._table import AsyncCloudTable, AsyncTableContext

if _TYPE_CHECKING:
    from ._sender import AiohttpSender, AsyncSender
else:
    #: The sender's module loads when one of its names is first named, or with a client's first
    #: request (it makes the default sender), not by ``import tablesdk.aio`` (start-up): it
    #: brings requests' header map, and the sender imports aiohttp when made.
    _LAZY = {"AiohttpSender": "._sender", "AsyncSender": "._sender"}

    def __getattr__(name: str) -> object:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(module, __name__), name)
        globals()[name] = value  # found directly from now on
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_LAZY})

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
