"""What test_fault_tolerance.py (sync) and test_async_faults.py (aio) share: the client
timeout and the delay bound their clock-free design rests on, the fast retry policy, and
the helpers that write entities and read them back through the referee (a direct client).

Their fixtures (``direct``, ``fault_table_name``, ``proxy``) are in this folder's conftest.py.
"""

from __future__ import annotations

import uuid

from faults import Fault, FaultProxy, FaultRule

from tablesdk import BatchOperation, BatchOperationKind, CloudTableClient, DynamicEntity, ExponentialRetry
from tablesdk._entities._entity import entity_to_payload

TIMEOUT = (10.0, 30.0)  # never reached by a clean attempt: a failure detector, not a clock
DELAY = 30.0  # a delay fault holds its request until the client gives up; this only bounds it
IMPATIENCE = 0.3  # the read timeout of the attempts a delay fault holds (FaultSender, AsyncFaultSender)
ALL_FAULTS = list(Fault)


def fast_policy() -> ExponentialRetry:
    return ExponentialRetry(count=3, delta_seconds=0.05, min_backoff=0.01, max_backoff=0.2)


def entity(pk: str, rk: str, n: int = 0) -> DynamicEntity:
    """An entity with a per-write transaction id, the Azure Storage team's way to recognise one's own write."""
    return DynamicEntity(PartitionKey=pk, RowKey=rk, N=n, Tx=uuid.uuid4().hex)


def stored(direct: CloudTableClient, table: str) -> dict[tuple[str, str], DynamicEntity]:
    return {(e.PartitionKey, e.RowKey): e for e in direct.create_query(table)}


def insert_op(table: str, e: DynamicEntity) -> BatchOperation:
    return BatchOperation(BatchOperationKind.INSERT, table, e.PartitionKey, e.RowKey, entity_to_payload(e), None)


def inject(proxy: FaultProxy, fault: Fault, times: int, **match: str) -> FaultRule:
    return proxy.inject(fault, times=times, delay=DELAY, **match)
