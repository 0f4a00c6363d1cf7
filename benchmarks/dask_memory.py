"""Where a ``tablesdk.dask.read_table`` worker's memory goes: per partition, over repeated reads.

    PYTHONPATH=. python benchmarks/dask_memory.py --endpoint URL [--entities 100000] [--partitions 40]
        [--repeat 3] [--mode len|compute|persist] [--pool mimalloc|jemalloc|system] [--trim] [--keep]

Issue 26 asks that each worker's peak memory stay bounded by the partition
size. This loads ``--entities`` entities (the ten mixed properties of the
other benchmarks, 100 a PartitionKey) into ``--endpoint`` (no latency relay:
memory only), cuts them at fixed boundaries into ``--partitions`` equal
ranges, and on a ``LocalCluster(n_workers=2, threads_per_worker=1,
processes=True)`` reads them ``--repeat`` times:

* ``len``: ``ddf.map_partitions(probe).compute()``: each partition is read,
  measured on its worker and dropped there; only a small row per partition
  comes back, so nothing the worker holds is a result waiting to be gathered;
* ``compute``: ``ddf.compute()`` (the frame is gathered, then dropped);
* ``gather``: ``pd.concat(client.gather(client.compute(ddf.to_delayed())))``: the
  same frame, concatenated on the client instead of on one worker (Dask's
  ``compute()`` of a frame repartitions it to one partition: a worker receives
  every partition and concatenates the whole table);
* ``persist``: ``client.persist(ddf)``, waited for, then released.

After each partition (``len`` mode) and after each repetition it reads on each
worker: VmRSS and VmHWM (``/proc/self/status``), the bytes Arrow's pool holds
(``pyarrow.total_allocated_bytes``), glibc's heap (``mallinfo2``: in use and
free but kept), Python's allocated blocks, the live objects the GC tracks, the
live tablesdk clients and transports, threads and open file descriptors.
``--pool`` picks Arrow's allocator for the workers (``ARROW_DEFAULT_MEMORY_POOL``);
``--trim`` calls ``malloc_trim(0)`` on each worker after each repetition and
reports the RSS it gave back. Growth that repeats every repetition is kept
per read (a leak); growth that stops after the first is an allocator's
retention or a high-water mark.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import dataclasses
import gc
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import connection_string, sample_properties  # noqa: E402

from tablesdk import CloudStorageAccount, CloudTableClient, DynamicEntity, EdmType, EntityProperty  # noqa: E402

TABLE = "benchdaskmemory"
PER_PARTITION = 100
MIB = 2**20


def _libc() -> Any:
    return ctypes.CDLL("libc.so.6")


def _status_kib() -> dict[str, int]:
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            found[name] = int(value.split()[0])
    return found


def _heap() -> dict[str, int]:
    """glibc's heap: bytes in use (small and mmapped) and bytes free but kept by the allocator."""
    # Made here, not at module level: this script's functions travel to the workers by value
    # (cloudpickle), and a ctypes structure type does not pickle.
    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = _libc()
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    return {"malloc_used": int(info.uordblks + info.hblkhd), "malloc_free": int(info.fordblks)}


def _probe_now(full: bool) -> dict[str, Any]:
    """This process's memory (run on a worker)."""
    import pyarrow as pa

    status = _status_kib()
    row: dict[str, Any] = {
        "pid": os.getpid(), "time": time.monotonic(), "rss": status["VmRSS"] * 1024, "hwm": status["VmHWM"] * 1024,
        "anon": status["RssAnon"] * 1024, "file": status["RssFile"] * 1024,
        "arrow": pa.total_allocated_bytes(), "blocks": sys.getallocatedblocks(), **_heap(),
        "threads": threading.active_count(), "fds": len(os.listdir("/proc/self/fd")),
    }
    if full:
        from tablesdk._clients._client import CloudTableClient as Client
        from tablesdk._pipeline._transport import Transport

        gc.collect()
        objects = gc.get_objects()
        row["gc_objects"] = len(objects)
        row["clients"] = sum(1 for o in objects if isinstance(o, Client))
        row["transports"] = sum(1 for o in objects if isinstance(o, Transport))
        row["types"] = collections.Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in objects)
        del objects
    return row


def probe_partition(frame: Any) -> Any:
    """``map_partitions`` target: the partition's rows and its worker's memory once it is read."""
    import pandas as pd

    row = _probe_now(full=False)
    row["rows"] = len(frame)
    row["bytes"] = int(frame.memory_usage(deep=True).sum())
    return pd.DataFrame([row])


def probe_worker(trim: bool) -> dict[str, Any]:
    """After a repetition (run on each worker): memory, live objects; with ``trim``, the RSS malloc_trim gave back."""
    gc.collect()
    row = _probe_now(full=True)
    if trim:
        _libc().malloc_trim(0)
        row["rss_after_trim"] = _status_kib()["VmRSS"] * 1024
    return row


def warm_up(conn: str | None) -> dict[str, Any]:
    """Import what a read task imports; with ``conn``, also read one small range the way a task
    does (the code, the connection pool, the allocators' first arenas), so the baseline holds
    everything a first partition pays once and the growth after it is the data's."""
    import dask.dataframe  # noqa: F401  (a task unpickles Dask's expressions)
    import pandas  # noqa: F401
    import pyarrow as pa
    import pyarrow.compute  # noqa: F401

    import tablesdk.dask
    from tablesdk._columns import _engines

    if conn is not None:
        spec = _engines.RangeSpec(  # the first two PartitionKeys: 200 entities
            tablesdk.dask.ConnectionSecret(conn), "json", TABLE, None, None, "p00000", "p00002", None, True)
        with spec.connection.client() as client:
            schema = _engines.with_keys(client.create_query(TABLE).take(1).to_arrow().schema)
        tablesdk.dask._read_range(dataclasses.replace(spec, schema=schema))
    gc.collect()
    return {"backend": pa.default_memory_pool().backend_name, **_probe_now(full=True)}


def load(client: CloudTableClient, count: int) -> None:
    if client.table_exists(TABLE) and sum(1 for _ in client.create_query(TABLE).select("RowKey")) == count:
        return
    client.delete_table_if_exists(TABLE)
    client.create_table(TABLE)
    rows = []
    for n in range(count):
        props = sample_properties(n)
        props["Big"] = EntityProperty(props["Big"], EdmType.INT64)
        rows.append(DynamicEntity(f"p{n // PER_PARTITION:05d}", f"{n % PER_PARTITION:04d}", **props))
    client.bulk_insert(TABLE, rows).raise_on_error()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mode", choices=["len", "compute", "gather", "persist"], default="len")
    parser.add_argument("--pool", choices=["mimalloc", "jemalloc", "system"])
    parser.add_argument("--trim", action="store_true")
    parser.add_argument("--warm-read", action="store_true", help="read 200 entities on each worker before the baseline")
    parser.add_argument("--no-profile", action="store_true",
                        help="turn off Dask's statistical profiler on the workers (distributed.worker.profile.enabled)")
    parser.add_argument("--keep", action="store_true", help="leave the table for the next run")
    args = parser.parse_args()
    if args.pool:
        os.environ["ARROW_DEFAULT_MEMORY_POOL"] = args.pool  # the workers inherit it
    if args.no_profile:
        os.environ["DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED"] = "False"
    import pandas as pd
    from dask.distributed import Client, LocalCluster, wait

    import tablesdk.dask

    print(f"nproc {len(os.sched_getaffinity(0))}; load average before {os.getloadavg()}", file=sys.stderr)
    conn = connection_string(args.endpoint.rstrip("/"))
    direct = CloudStorageAccount.parse(conn).create_cloud_table_client()
    load(direct, args.entities)
    pk_partitions = args.entities // PER_PARTITION
    step = pk_partitions // args.partitions
    boundaries = [f"p{i * step:05d}" for i in range(1, args.partitions)]
    cluster = LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR
    )
    with cluster, Client(cluster) as client:  # type: ignore[no-untyped-call]
        base = client.run(warm_up, conn if args.warm_read else None)
        for worker, row in sorted(base.items()):
            print(f"warm {row['pid']}: pool {row['backend']}, rss {row['rss'] / MIB:.1f} MiB, hwm "
                  f"{row['hwm'] / MIB:.1f}, arrow {row['arrow'] / MIB:.2f} MiB, gc objects {row['gc_objects']:,}, "
                  f"clients {row['clients']}, threads {row['threads']}, fds {row['fds']}")
        previous: dict[str, dict[str, Any]] = {}
        for rep in range(args.repeat):
            ddf = tablesdk.dask.read_table(conn, TABLE, boundaries=boundaries)
            start = time.perf_counter()
            if args.mode == "len":
                meta = probe_partition(ddf._meta).iloc[:0]
                parts = ddf.map_partitions(probe_partition, meta=meta).compute().sort_values(["pid", "time"])
                for pid, rows in parts.groupby("pid"):
                    print(f"rep {rep + 1} pid {pid}: {len(rows)} partitions of {rows['rows'].iloc[0]:,} rows "
                          f"({rows['bytes'].median() / MIB:.1f} MiB in pandas); after each, MiB:")
                    for name in ("rss", "hwm", "anon", "file", "arrow", "malloc_used", "malloc_free"):
                        print(f"   {name:11s} " + " ".join(f"{v / MIB:.0f}" for v in rows[name]))
                    print(f"   {'blocks':11s} " + " ".join(f"{v // 1000}k" for v in rows["blocks"]))
                    print(f"   {'threads/fds':11s} " + " ".join(f"{t}/{f}" for t, f in zip(rows["threads"], rows["fds"])))
            elif args.mode == "compute":
                frame = ddf.compute()
                del frame
            elif args.mode == "gather":  # the partitions come to the client one by one, concatenated here
                frame = pd.concat(client.gather(client.compute(ddf.to_delayed())))
                del frame
            else:
                held = client.persist(ddf)
                wait(held)  # type: ignore[no-untyped-call]
                del held
            wall = time.perf_counter() - start
            after = client.run(probe_worker, args.trim)
            for worker, row in sorted(after.items()):
                was = base[worker]
                grown = row["types"].copy()
                grown.subtract(previous.get(worker, was)["types"])
                print(f"   objects gained since the {'previous repetition' if worker in previous else 'warm-up'}: "
                      + ", ".join(f"{name} {count:+,}" for name, count in grown.most_common(8)))
                print(f"   rss anon {row['anon'] / MIB:.1f} MiB (+{(row['anon'] - was['anon']) / MIB:.1f}), file "
                      f"{row['file'] / MIB:.1f} (+{(row['file'] - was['file']) / MIB:.1f})")
                trimmed = f", after malloc_trim {row['rss_after_trim'] / MIB:.1f}" if args.trim else ""
                print(f"rep {rep + 1} ({wall:.1f} s) worker {row['pid']}: rss {row['rss'] / MIB:.1f} MiB "
                      f"(+{(row['rss'] - was['rss']) / MIB:.1f}){trimmed}, hwm {row['hwm'] / MIB:.1f} "
                      f"(+{(row['hwm'] - was['rss']) / MIB:.1f}), arrow {row['arrow'] / MIB:.2f}, malloc used "
                      f"{row['malloc_used'] / MIB:.1f} free {row['malloc_free'] / MIB:.1f}, blocks "
                      f"{row['blocks']:,}, gc objects {row['gc_objects']:,} ({row['gc_objects'] - was['gc_objects']:+,}),"
                      f" clients {row['clients']}, transports {row['transports']}, threads {row['threads']}, "
                      f"fds {row['fds']}")
            previous = after
            sys.stdout.flush()
    if not args.keep:
        direct.delete_table_if_exists(TABLE)
    print(f"load average after {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
