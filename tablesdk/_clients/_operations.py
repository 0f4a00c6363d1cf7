"""The Table service operations, written once for the thread-blocking and the asyncio client.

Each operation is a *flow* (see :mod:`tablesdk._clients._flows`: a generator that yields the
requests it needs, no I/O). :class:`ClientCore` joins the flows of each kind, written in their
own modules on :class:`~tablesdk._clients._client_base.ClientBase` (the account, the payload
format, the API version, the request headers, the location mode): the table-level flows
(``_table_flows.py``), the query page fetch and decode and point reads (``_query_flows.py``),
``$batch`` (``_batch_flows.py``) and the entity operations (``_entity_flows.py``).
"""

from __future__ import annotations

from ._entity_flows import EntityFlows
from ._table_flows import TableFlows

__all__ = ["ClientCore"]


class ClientCore(TableFlows, EntityFlows):
    """What the sync and async clients share: options, request building
    (:class:`~tablesdk._clients._client_base.ClientBase`) and the operation flows."""
