"""Device readings through Ray: read a table as a Ray Dataset, derive a column in Ray tasks, write it back.

1. Readings of devices are written as entities: a Guid device id, an Int64 sequence number
   beyond 2**53, a DateTime with its seventh fractional digit, a Binary payload and a Boolean
   that some readings lack.
2. ``tablesdk.ray.read_table`` reads the table as a ``ray.data.Dataset``, one read task per
   PartitionKey range; ``map_batches`` adds a Celsius column to each Arrow block.
3. ``tablesdk.ray.write_table`` writes the blocks to a second table through the bulk engine,
   and every property comes back with the value and EDM type it had (Ray keeps the EDM types
   the columns carry in their Arrow metadata).

Ray runs on this machine only (loopback, no dashboard). Needs the ``ray`` extra: ``pip install
'.[ray]'`` in a checkout (see README's Install). Runs against the account in
``AZURE_STORAGE_CONNECTION_STRING``, or else the bundled emulator started in-process:

    python samples/ray_devices.py [--rows 300]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import uuid
from collections.abc import Iterator
from datetime import timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import ray

import tablesdk.ray
from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmDateTime, EdmType, EntityProperty

DEVICES = 6


def reading(n: int) -> DynamicEntity:
    """Reading ``n``: its device is the PartitionKey, and every EDM type is among its properties."""
    entity = DynamicEntity(f"device-{n % DEVICES}", f"{n:06d}", Fahrenheit=50 + n % 40 * 1.5)
    entity["Device"] = uuid.UUID(int=(n % DEVICES) * 2**96 + 1)
    entity["Sequence"] = EntityProperty(2**60 + n, EdmType.INT64)
    entity["At"] = EdmDateTime(2024, 3, 1, n % 24, n % 60, 0, 999_999, timezone.utc, ticks_remainder=n % 10)
    entity["Payload"] = bytes([n % 256, 0xFF])
    if n % 4:
        entity["Calibrated"] = n % 3 == 0
    return entity


@contextlib.contextmanager
def open_account() -> Iterator[tuple[str, CloudTableClient]]:
    """The connection string and a client: $AZURE_STORAGE_CONNECTION_STRING, or the bundled emulator."""
    conn_str = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if conn_str:
        with CloudStorageAccount.parse(conn_str).create_cloud_table_client() as client:
            yield conn_str, client
        return
    from tablesdk.devstore import DevStore

    with DevStore(port=0) as store:
        with CloudStorageAccount.parse(store.connection_string).create_cloud_table_client() as client:
            yield store.connection_string, client


def with_celsius(block: Any) -> Any:
    """A block with a Celsius column; the columns it had keep their fields (and EDM types)."""
    celsius = pc.round(pc.divide(pc.subtract(block.column("Fahrenheit"), 32), 1.8), 2)
    return block.append_column(pa.field("Celsius", pa.float64()), celsius)


def as_stored(client: CloudTableClient, table: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Each entity's properties with their EDM types (and a DateTime's seventh digit)."""
    found = {}
    for entity in client.create_query(table):
        found[(entity.PartitionKey, entity.RowKey)] = {
            name: (entity[name], getattr(entity[name], "ticks_remainder", None), entity.edm_type(name)) for name in entity
        }
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--table", default="Readings")
    args = parser.parse_args(argv)
    converted = args.table + "Celsius"
    ray.init(address="local", include_dashboard=False, num_cpus=2, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    try:
        with open_account() as (conn_str, client):
            for name in (args.table, converted):
                client.delete_table_if_exists(name)
                client.create_table(name)
            try:
                client.bulk_insert(args.table, [reading(n) for n in range(args.rows)]).raise_on_error()
                dataset = tablesdk.ray.read_table(conn_str, args.table, parallelism=3)
                counts = tablesdk.ray.write_table(dataset.map_batches(with_celsius, batch_format="pyarrow"), conn_str, converted)
                assert sum(counts) == args.rows
                before, after = as_stored(client, args.table), as_stored(client, converted)
                assert {key: {k: v for k, v in props.items() if k != "Celsius"} for key, props in after.items()} == before
                sample = after[("device-1", "000001")]
                assert sample["Celsius"][0] == round((51.5 - 32) / 1.8, 2)
                print(f"read {len(before)} readings in Ray tasks and wrote them back with Celsius; "
                      f"types kept: {sorted({(name, str(edm)) for name, (_, _, edm) in sample.items()})}")
            finally:
                for name in (args.table, converted):
                    client.delete_table_if_exists(name)
    finally:
        ray.shutdown()
    print("all steps passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
