"""A small to-do list on the Table service, written the way the README suggests.

One partition per list, one entity per task; the RowKey is a fixed-width number so
tasks sort in the order they were added. The file passes ``mypy --strict`` with no
ignores (the test command checks it) and runs against the account in
``AZURE_STORAGE_CONNECTION_STRING``, or else the bundled emulator started in-process:

    python samples/todo.py [--format json|atom]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

from tablesdk import (
    CloudStorageAccount,
    CloudTableClient,
    Int64,
    SaveChangesOptions,
    TableEntity,
    TableServiceContext,
    col,
    fixed_width_key,
)

TABLE = "Todos"


class Task(TableEntity):
    """A task: PartitionKey is the list's name, RowKey its number in the list."""

    Title: str
    Done: bool
    Priority: int
    Due: datetime
    Minutes: Int64  # estimated effort, an Edm.Int64 on the wire and an int in Python


def add_tasks(ctx: TableServiceContext, todo_list: str, titles: list[str]) -> list[Task]:
    """Add one task per title, all in one entity group transaction."""
    now = datetime.now(timezone.utc)
    tasks = [
        Task(PartitionKey=todo_list, RowKey=fixed_width_key(n, width=6), Title=title, Done=False,
             Priority=n % 3, Due=now + timedelta(days=n), Minutes=15 * (n + 1))
        for n, title in enumerate(titles)
    ]
    for task in tasks:
        ctx.add_object(TABLE, task)
    ctx.save_changes(SaveChangesOptions.BATCH)
    return tasks


def open_tasks(ctx: TableServiceContext, todo_list: str, min_priority: int = 0) -> list[Task]:
    """The list's tasks not yet done, at ``min_priority`` or above, in the order they were added."""
    query = ctx.create_query(TABLE, Task).where(
        (Task.PartitionKey == todo_list) & (Task.Done == False) & (Task.Priority >= min_priority)  # noqa: E712
    )
    return list(query)


def complete(ctx: TableServiceContext, todo_list: str, number: int) -> Task:
    """Mark one task done (conditional on the ETag read with it)."""
    task = ctx.get(TABLE, todo_list, fixed_width_key(number, width=6), Task)
    if task is None:
        raise LookupError(f"no task {number} in {todo_list!r}")
    task.Done = True
    ctx.update_object(task)
    ctx.save_changes()
    return task


def total_minutes(client: CloudTableClient, todo_list: str) -> int:
    """Estimated minutes left on a list (an untracked query through the client)."""
    query = client.create_query(TABLE, Task).where(
        (Task.PartitionKey == todo_list) & col(Task.RowKey).between(fixed_width_key(0, width=6), "999999")
    )
    return sum(task.Minutes for task in query if not task.Done)


def run(client: CloudTableClient) -> None:
    client.create_table_if_not_exists(TABLE)
    ctx = client.get_table_service_context()
    add_tasks(ctx, "groceries", ["milk", "bread", "coffee", "apples"])
    print("open:", [t.Title for t in open_tasks(ctx, "groceries")])
    done = complete(ctx, "groceries", 2)
    print("done:", done.Title, "etag", done.etag)
    left = open_tasks(ctx, "groceries", min_priority=1)
    print("open with priority >= 1:", [(t.Title, t.Priority) for t in left])
    assert [t.Title for t in left] == ["bread"], left
    minutes = total_minutes(client, "groceries")
    print("minutes left:", minutes)
    assert minutes == 15 + 30 + 60, minutes
    first = client.create_query(TABLE, Task).where(Task.PartitionKey == "groceries").first()
    assert first.Title == "milk" and isinstance(first.Due, datetime)
    client.delete_table(TABLE)


@contextlib.contextmanager
def open_account() -> Iterator[CloudStorageAccount]:
    conn = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if conn:
        yield CloudStorageAccount.parse(conn)
        return
    from tablesdk.devstore import DevStore

    with DevStore() as store:
        yield CloudStorageAccount.parse(store.connection_string)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A small to-do list on the Table service.")
    parser.add_argument("--format", choices=("json", "atom"), default="json", help="wire format")
    args = parser.parse_args(argv)
    with open_account() as account, account.create_cloud_table_client(payload_format=args.format) as client:
        run(client)
    print("to-do sample: all steps passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
