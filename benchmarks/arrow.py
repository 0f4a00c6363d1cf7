"""Columns vs entities: ``TableQuery.to_arrow()`` of 10,000 entities next to iterating ``create_query``.

    /work/main/.venv/bin/python benchmarks/arrow.py [--url URL] [--repeats 5] [--devstore]

Without --url it starts its own Azurite (``--devstore``: the bundled emulator). The
table holds 100 partitions x 100 entities with the ten mixed properties of
benchmarks/query.py. Contenders, interleaved in each repetition:

* ``entities``: ``list(client.create_query(table))`` (DynamicEntity objects);
* ``entities -> rows``: the same, then a list of dicts (what a caller building
  columns from entities does at the least);
* ``to_arrow``: ``client.create_query(table).to_arrow()`` (a pyarrow.Table);
* ``to_pandas``: ``to_pandas()`` (through Arrow).

The table gives the median entities/s (min-max), client CPU µs per entity
(``time.process_time``: this process only; the service runs in its own) and the
ratio to ``entities``. The goal of issue 26 is to_arrow >= 1.3x entities.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import Series, azurite, connection_string, interleave, machine, sample_properties  # noqa: E402

from tablesdk import CloudStorageAccount, DynamicEntity, EdmType, EntityProperty  # noqa: E402

PARTITIONS, PER_PARTITION = 100, 100


@contextlib.contextmanager
def service(url: str | None, devstore: bool) -> Iterator[str]:
    if devstore:
        from tablesdk.devstore import DevStore

        with DevStore(port=0) as store:
            yield store.connection_string
        return
    with azurite(url) as endpoint:
        yield connection_string(endpoint)


def load(client: object, table: str) -> None:
    entities = []
    for p in range(PARTITIONS):
        for r in range(PER_PARTITION):
            n = p * PER_PARTITION + r
            props = sample_properties(n)
            props["Big"] = EntityProperty(props["Big"], EdmType.INT64)
            entities.append(DynamicEntity(f"p{p:03d}", f"{r:04d}", **props))
    client.bulk_insert(table, entities).raise_on_error()  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="an Azurite table endpoint (default: start one)")
    parser.add_argument("--devstore", action="store_true", help="use the bundled emulator instead of Azurite")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with service(args.url, args.devstore) as conn:
        client = CloudStorageAccount.parse(conn).create_cloud_table_client()
        table = "benchcolumns"
        client.delete_table_if_exists(table)
        client.create_table(table)
        try:
            load(client, table)
            query = client.create_query(table)
            expected = PARTITIONS * PER_PARTITION

            def entities() -> int:
                return len(list(query))

            def entity_rows() -> int:
                rows = [{"PartitionKey": e.PartitionKey, "RowKey": e.RowKey, "Timestamp": e.Timestamp, **e} for e in query]
                return len(rows)

            def arrow() -> int:
                return int(query.to_arrow().num_rows)

            def pandas() -> int:
                return len(query.to_pandas())

            assert entities() == arrow() == expected  # and warm both paths up (imports, plans)
            pandas()
            series = [Series("entities"), Series("entities -> rows"), Series("to_arrow"), Series("to_pandas")]
            interleave(list(zip(series, [entities, entity_rows, arrow, pandas])), args.repeats)
        finally:
            client.delete_table_if_exists(table)
    base = series[0].median
    print(f"to_arrow vs entities, {expected:,} entities, {'devstore' if args.devstore else 'Azurite'}; {machine()}\n")
    print("| contender | entities/s median (min-max) | client CPU µs/entity | x entities |")
    print("|---|---|---|---|")
    for one in series:
        cpu = statistics.median(one.cpu_per_entity) * 1e6
        print(f"| {one.label} | {one.median:,.0f} ({min(one.rates):,.0f}-{max(one.rates):,.0f}) | {cpu:.1f} "
              f"| {one.median / base:.2f} |")
    cpu_ratio = statistics.median(series[0].cpu_per_entity) / statistics.median(series[2].cpu_per_entity)
    print(f"\nto_arrow: {series[2].median / base:.2f}x the entities/s of iterating entities, "
          f"{cpu_ratio:.2f}x less client CPU per entity (goal >= 1.3x)")


if __name__ == "__main__":
    main()
