"""The white paper's MicroBlogging walk-through, with tablesdk.

Runs against the account in ``AZURE_STORAGE_CONNECTION_STRING`` when it is set,
otherwise against the bundled emulator (tablesdk.devstore) started in-process.

    python samples/microblog.py [--format json|atom] [--table Blogs]

Every step checks what the service answered, so the script exits non-zero if
the SDK or the service misbehaves.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import uuid
from collections.abc import Iterator

from tablesdk import (
    CloudStorageAccount,
    CloudTableClient,
    DataServiceRequestError,
    MergeOption,
    SaveChangesOptions,
    TableEntity,
)


class Blog(TableEntity):
    """A blog post: PartitionKey is the channel, RowKey the posted date."""

    Text: str
    Rating: int


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SystemExit(f"FAILED: {message}")
    print(f"  ok: {message}")


@contextlib.contextmanager
def open_account() -> Iterator[tuple[CloudStorageAccount, str]]:
    conn = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if conn:
        yield CloudStorageAccount.parse(conn), "the account in AZURE_STORAGE_CONNECTION_STRING"
        return
    from tablesdk.devstore import DevStore

    with DevStore() as store:
        yield CloudStorageAccount.parse(store.connection_string), f"the bundled emulator at {store.url}"


def run(client: CloudTableClient, table: str) -> None:
    print(f"1. create table {table!r}")
    check(client.create_table_if_not_exists(table), "the table was created")
    check(not client.create_table_if_not_exists(table), "creating it again reports that it exists")

    print("2. insert a blog")
    ctx = client.get_table_service_context()
    blog = Blog(PartitionKey="Channel9", RowKey="Oct-29", Text="Hello", Rating=3)
    ctx.add_object(table, blog)
    ctx.save_changes()
    check(blog.etag is not None, f"the insert returned an ETag ({blog.etag})")

    print("3. query blogs whose rating is 3")
    ctx.add_object(table, Blog(PartitionKey="Channel9", RowKey="Oct-30", Text="Second", Rating=5))
    ctx.save_changes()
    query = client.get_table_service_context().create_query(table, Blog).where(Blog.Rating == 3)
    found = [(b.PartitionKey, b.RowKey, b.Text) for b in query]
    check(found == [("Channel9", "Oct-29", "Hello")], f"found {found}")

    print("4. update a blog read by a point query")
    ctx = client.get_table_service_context()
    stored = ctx.get(table, "Channel9", "Oct-29", Blog)
    assert stored is not None
    stored.Text = "Hi there"
    ctx.update_object(stored)
    ctx.save_changes()
    check(client.get_entity(table, "Channel9", "Oct-29", Blog).Text == "Hi there", "the new text is stored")

    print("5. two writers: optimistic concurrency and recovery")
    first = client.get_table_service_context()
    second = client.get_table_service_context()
    mine = first.get(table, "Channel9", "Oct-29", Blog)
    theirs = second.get(table, "Channel9", "Oct-29", Blog)
    assert mine is not None and theirs is not None
    mine.Rating = 4
    first.update_object(mine)
    first.save_changes()
    theirs.Text = "Edited concurrently"
    second.update_object(theirs)
    try:
        second.save_changes()
    except DataServiceRequestError as exc:
        check(exc.status_code == 412, f"the stale update was refused with {exc.status_code} {exc.error_code}")
    else:
        raise SystemExit("FAILED: a stale update was accepted")
    second.merge_option = MergeOption.PRESERVE_CHANGES
    second.get(table, "Channel9", "Oct-29", Blog)  # refreshes the ETag, keeps the local edit
    second.save_changes()
    stored = client.get_entity(table, "Channel9", "Oct-29", Blog)
    check((stored.Text, stored.Rating) == ("Edited concurrently", 4), "the retried merge kept both edits")

    print("6. delete a blog")
    ctx = client.get_table_service_context()
    doomed = ctx.get(table, "Channel9", "Oct-30", Blog)
    ctx.delete_object(doomed)
    ctx.save_changes()
    check(ctx.get_or_none(table, "Channel9", "Oct-30", Blog) is None, "the blog is gone")

    print("7. insert, update and delete several blogs in one entity group transaction")
    ctx = client.get_table_service_context()
    for day in range(1, 6):
        ctx.add_object(table, Blog(PartitionKey="Channel_19", RowKey=f"Nov-{day:02d}", Text=f"Post {day}", Rating=day))
    response = ctx.save_changes(SaveChangesOptions.BATCH)
    check(response.is_batch and len(response) == 5, "five inserts went as one transaction")
    posts = list(ctx.create_query(table, Blog).where(Blog.PartitionKey == "Channel_19"))
    for post in posts[:2]:
        post.Rating += 10
        ctx.update_object(post)
    ctx.delete_object(posts[4])
    ctx.add_object(table, Blog(PartitionKey="Channel_19", RowKey="Nov-06", Text="Post 6", Rating=6))
    ctx.save_changes(SaveChangesOptions.BATCH)
    ratings = [b.Rating for b in client.create_query(table, Blog).where(Blog.PartitionKey == "Channel_19")]
    check(ratings == [11, 12, 3, 4, 6], f"ratings after the batch are {ratings}")

    print("8. an unconditional update with attach_to(..., etag='*')")
    ctx = client.get_table_service_context()
    blind = Blog(PartitionKey="Channel_19", RowKey="Nov-03", Text="Overwritten blindly", Rating=0)
    ctx.attach_to(table, blind, etag="*")
    ctx.update_object(blind)
    ctx.save_changes(SaveChangesOptions.REPLACE_ON_UPDATE)
    check(client.get_entity(table, "Channel_19", "Nov-03", Blog).Text == "Overwritten blindly", "replaced")

    print("9. clean up")
    check(client.delete_table_if_exists(table), f"table {table!r} deleted")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--format", choices=("json", "atom"), default="json", help="wire format")
    parser.add_argument("--table", default=None, help="table name (default: a fresh Blogs<hex>)")
    args = parser.parse_args(argv)
    table = args.table or f"Blogs{uuid.uuid4().hex[:8]}"
    with open_account() as (account, where):
        print(f"MicroBlogging sample against {where}, {args.format} format")
        with account.create_cloud_table_client(payload_format=args.format) as client:
            run(client, table)
    print("MicroBlogging sample: all steps passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
