"""A shared counter under contention: the recovery path after a 412 Precondition Failed.

Several workers increment one entity at the same time, each through its own
``TableServiceContext``. Every update is conditional on the ETag the worker read, so
when another worker saved first the service answers 412 and nothing is written. The
worker then re-reads the entity with ``MergeOption.OVERWRITE_CHANGES`` (its stale
values and ETag are replaced by the service's), applies its change again to the fresh
values, and saves again. No increment is lost.

``MergeOption.PRESERVE_CHANGES`` is not this recovery path: it refreshes the ETag but
keeps the values changed locally, so the next save writes the worker's stale count
over the other worker's (the client wins, as in .NET's DataServiceContext).

Runs against the account in ``AZURE_STORAGE_CONNECTION_STRING``, or else the bundled
emulator started in-process:

    python samples/counter.py [--format json|atom] [--workers 4] [--increments 25]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from collections.abc import Iterator

from tablesdk import (
    CloudStorageAccount,
    CloudTableClient,
    DataServiceRequestError,
    MergeOption,
    TableEntity,
)

class Counter(TableEntity):
    """One counter: PartitionKey names the group, RowKey the counter."""

    Value: int


def increment(client: CloudTableClient, table: str, partition_key: str, row_key: str, by: int = 1) -> int:
    """Add ``by`` to the counter without losing a concurrent increment; returns the attempts it took.

    Read, change, save conditionally on the ETag read; on 412 re-read with
    OVERWRITE_CHANGES and apply the change again to what the service holds now.
    """
    ctx = client.get_table_service_context()
    ctx.merge_option = MergeOption.OVERWRITE_CHANGES
    attempts = 0
    while True:
        attempts += 1
        counter = ctx.get(table, partition_key, row_key, Counter)
        assert counter is not None  # get raises ResourceNotFoundError when it does not exist
        counter.Value += by
        ctx.update_object(counter)
        try:
            ctx.save_changes()
        except DataServiceRequestError as exc:
            if exc.status_code != 412:
                raise
            continue  # another writer saved first: the next get refreshes values and ETag
        return attempts


def run_workers(client: CloudTableClient, table: str, workers: int, increments: int) -> tuple[int, int]:
    """Start ``workers`` threads together, each adding 1 ``increments`` times; (final value, 412s met)."""
    client.create_table_if_not_exists(table)
    client.upsert_entity(table, Counter(PartitionKey="demo", RowKey="hits", Value=0))
    start = threading.Barrier(workers)
    retries = [0] * workers

    def work(slot: int) -> None:
        start.wait()
        for _ in range(increments):
            retries[slot] += increment(client, table, "demo", "hits") - 1

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    final = client.get_entity(table, "demo", "hits", Counter).Value
    return final, sum(retries)


@contextlib.contextmanager
def open_client(payload_format: str) -> Iterator[CloudTableClient]:
    """A client on $AZURE_STORAGE_CONNECTION_STRING, or on the bundled emulator started here."""
    conn_str = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if conn_str:
        yield CloudStorageAccount.parse(conn_str).create_cloud_table_client(payload_format=payload_format)
        return
    from tablesdk.devstore import DevStore

    with DevStore(port=0) as store:
        account = CloudStorageAccount.parse(store.connection_string)
        yield account.create_cloud_table_client(payload_format=payload_format)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--format", choices=["json", "atom"], default="json")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--increments", type=int, default=25)
    parser.add_argument("--table", default="Counters")
    args = parser.parse_args(argv)
    with open_client(args.format) as client:
        final, conflicts = run_workers(client, args.table, args.workers, args.increments)
        client.delete_table(args.table)
    expected = args.workers * args.increments
    print(f"{args.workers} workers x {args.increments} increments: counter is {final} "
          f"(expected {expected}); {conflicts} saves met a 412 and were re-applied")
    if final != expected:
        print("FAILED: an increment was lost")
        return 1
    print("all steps passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
