"""One client per process for each account and settings, shared by every range a worker reads
and every block it writes (:mod:`tablesdk.dask`, :mod:`tablesdk.ray`, :mod:`tablesdk.spark`,
:mod:`tablesdk.polars`).

A client is never pickled into a task: each task carries the connection string (wrapped in
:class:`~tablesdk._columns._engines.ConnectionSecret`) and asks this process's cache for the
client. The first task of a process makes it; the following ones reuse it, and with it the
connection pool (the connections stay open between ranges) and what the client's last scan
measured about reading ahead. A worker reading eight ranges makes one client, not eight.

Lifetimes:

- **Threads**: the client's session is thread-safe (one pooled session; queries run pages on
  several threads at once), so the threads of one worker (Dask's threaded workers, Polars'
  reading threads) share it; the cache itself is guarded by a lock.
- **Fork**: a child forked from a process that has clients (Spark's Python daemon forks its
  workers; ``multiprocessing`` forks) must not use them: their connections are shared with the
  parent. The cache belongs to the process id that filled it; a child finds another id and
  starts empty, leaving the parent's clients untouched (neither used nor closed: closing them
  would shut connections the parent still reads from). ``os.register_at_fork`` also gives the
  child a fresh lock, since a fork may happen while another thread holds it.
- **Exit and eviction**: the clients are closed when the process exits (``atexit``). At most
  :data:`MAX_CLIENTS` are kept (a worker serving many accounts, or rotated SAS tokens): the least
  recently used is closed once no task is using it.
- **The secret**: entries are keyed by a SHA-256 digest of the connection string, never the
  string itself, and the cache's ``repr`` shows only counts.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._clients._client import CloudTableClient

__all__ = ["MAX_CLIENTS", "WorkerClients", "WORKER_CLIENTS"]

#: Clients one process keeps (one per account and settings); the least recently used beyond this is closed.
MAX_CLIENTS = 8

#: How a client is made: (connection string, payload format, operation deadline) -> client.
ClientFactory = Callable[[str, str, "float | None"], "CloudTableClient"]
_Key = tuple[bytes, str, "float | None"]


class _Entry:
    __slots__ = ("client", "leases", "retired")

    def __init__(self, client: CloudTableClient) -> None:
        self.client = client
        self.leases = 0  # tasks using the client now
        self.retired = False  # evicted: closed when the last lease ends


class WorkerClients:
    """The clients of this process, by account and settings (see the module's documentation)."""

    def __init__(self, factory: ClientFactory, max_clients: int = MAX_CLIENTS) -> None:
        self._factory = factory
        self._max_clients = max_clients
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        #: Clients this process has made (a process that reuses them makes one per account and settings).
        self.made = 0
        self._exit_hooked = False

    def __repr__(self) -> str:
        return f"WorkerClients(pid={self._pid}, clients={len(self._entries)}, made={self.made})"

    @contextmanager
    def lease(self, connection_string: str, payload_format: str = "json",
              operation_deadline: float | None = None) -> Iterator[CloudTableClient]:
        """This process's client for the account and settings, made on first use; the caller must not
        close it (it stays open for the next task, and closes at exit)."""
        key: _Key = (hashlib.sha256(connection_string.encode()).digest(), payload_format, operation_deadline)
        retired: list[_Entry] = []
        with self._lock:
            self._adopt_process()
            entry = self._entries.get(key)
            if entry is None:
                entry = _Entry(self._factory(connection_string, payload_format, operation_deadline))
                self.made += 1
                self._entries[key] = entry
                retired = self._evict()
            else:
                self._entries.move_to_end(key)
            entry.leases += 1
        self._close(retired)
        try:
            yield entry.client
        finally:
            with self._lock:
                entry.leases -= 1
                done = entry.retired and entry.leases == 0 and self._pid == os.getpid()
            if done:
                entry.client.close()

    def close_all(self) -> None:
        """Close every client of this process (at exit; those in use close when their task ends)."""
        with self._lock:
            if self._pid != os.getpid():
                return  # a forked child's inherited clients are its parent's to close
            entries = list(self._entries.values())
            self._entries.clear()
            for entry in entries:
                entry.retired = True
        self._close([entry for entry in entries if entry.leases == 0])

    def after_fork_in_child(self) -> None:
        """Start empty in a forked child: a fresh lock (the parent's may have been held at the fork)
        and no clients (the parent's are left as they are, for the parent)."""
        self._lock = threading.Lock()
        self._adopt_process()

    def _adopt_process(self) -> None:
        pid = os.getpid()
        if pid != self._pid:
            # Kept referenced, untouched: collecting them could close sockets the parent still uses.
            _INHERITED.extend(self._entries.values())
            self._entries = OrderedDict()
            self._pid = pid
            self.made = 0
        if not self._exit_hooked:
            atexit.register(self.close_all)
            self._exit_hooked = True

    def _evict(self) -> list[_Entry]:
        """Retire the least recently used clients beyond the limit; returns those to close now."""
        closing = []
        while len(self._entries) > self._max_clients:
            _, oldest = self._entries.popitem(last=False)
            oldest.retired = True
            if oldest.leases == 0:
                closing.append(oldest)
        return closing

    @staticmethod
    def _close(entries: list[_Entry]) -> None:
        for entry in entries:
            entry.client.close()


#: Clients a forked child inherited from its parent: never used, never closed there.
_INHERITED: list[_Entry] = []


def _make_client(connection_string: str, payload_format: str, operation_deadline: float | None) -> CloudTableClient:
    from .._core._account import CloudStorageAccount

    return CloudStorageAccount.parse(connection_string).create_cloud_table_client(
        payload_format=payload_format, operation_deadline=operation_deadline
    )


#: This process's clients for the data engines' tasks.
WORKER_CLIENTS = WorkerClients(_make_client)
os.register_at_fork(after_in_child=WORKER_CLIENTS.after_fork_in_child)
