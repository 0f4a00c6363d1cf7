"""The process's client cache of the data engines' tasks: one client per account and settings,
shared by threads, never by a forked child, closed at exit or when evicted, the secret kept out."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from tablesdk._columns._engines import ConnectionSecret
from tablesdk._columns._worker_clients import WORKER_CLIENTS, WorkerClients

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
CONN = f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};TableEndpoint=http://127.0.0.1:1/devstoreaccount1;"
OTHER = CONN.replace("AccountName=devstoreaccount1", "AccountName=other")


class FakeClient:
    def __init__(self, text: str, payload_format: str, deadline: float | None) -> None:
        self.settings = (text, payload_format, deadline)
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def fakes(max_clients: int = 2) -> tuple[WorkerClients, list[FakeClient]]:
    made: list[FakeClient] = []

    def factory(text: str, payload_format: str, deadline: float | None) -> Any:
        made.append(FakeClient(text, payload_format, deadline))
        return made[-1]

    return WorkerClients(factory, max_clients=max_clients), made


def test_the_ranges_of_one_account_and_settings_share_one_client() -> None:
    cache, made = fakes(max_clients=8)
    for _ in range(8):
        with cache.lease(CONN, "json", None) as client:
            assert client is made[0]
    assert len(made) == 1 and cache.made == 1 and made[0].closed == 0
    with cache.lease(CONN, "json", 5.0), cache.lease(CONN, "atom", None), cache.lease(CONN, "json", None):
        pass
    assert [client.settings[1:] for client in made] == [("json", None), ("json", 5.0), ("atom", None)]


def test_threads_starting_together_make_one_client() -> None:
    cache, made = fakes()
    start = threading.Barrier(8)
    got: list[object] = []

    def task() -> None:
        start.wait()
        with cache.lease(CONN) as client:
            got.append(client)

    threads = [threading.Thread(target=task) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and len(got) == 8 and all(client is made[0] for client in got)


def test_another_process_id_makes_its_own_client_and_leaves_the_parents_open(monkeypatch: pytest.MonkeyPatch) -> None:
    cache, made = fakes()
    with cache.lease(CONN):
        pass
    monkeypatch.setattr(os, "getpid", lambda: -12345)
    with cache.lease(CONN) as client:
        assert client is made[1]
    cache.close_all()
    assert made[0].closed == 0  # the parent's: neither used nor closed here
    assert made[1].closed == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_reuse_its_parents_client() -> None:
    # The real cache, a real fork: the child asks for the same account and settings.
    with ConnectionSecret(CONN).shared_client() as parent_client:
        pass
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running the parent's exit handlers
        try:
            with ConnectionSecret(CONN).shared_client() as child_client:
                report = b"new" if child_client is not parent_client and WORKER_CLIENTS.made == 1 else b"reused"
        except BaseException:  # noqa: BLE001
            report = b"error"
        os.write(write_end, report)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        report = reader.read()
    os.waitpid(pid, 0)
    assert report == b"new"
    with ConnectionSecret(CONN).shared_client() as again:
        assert again is parent_client  # the parent's stays its own, open


def test_the_least_recently_used_client_closes_once_its_task_ends() -> None:
    cache, made = fakes()  # two clients kept
    with cache.lease(CONN, "json", 1.0):
        with cache.lease(CONN, "json", 2.0), cache.lease(CONN, "json", 3.0):
            pass
        assert made[0].closed == 0  # evicted while in use: open until its task ends
    assert made[0].closed == 1 and made[1].closed == 0 and made[2].closed == 0
    with cache.lease(CONN, "json", 4.0):
        pass
    assert made[1].closed == 1  # idle when evicted: closed at once
    cache.close_all()
    assert [client.closed for client in made] == [1, 1, 1, 1]


def test_the_cache_never_shows_the_connection_string() -> None:
    cache, _ = fakes()
    with cache.lease(CONN), cache.lease(OTHER):
        pass
    assert KEY not in repr(cache) and "AccountKey" not in repr(cache)
    assert all(CONN not in repr(key) and KEY not in repr(key) for key in cache._entries)
    assert KEY not in repr(ConnectionSecret(CONN)) and KEY not in repr(WORKER_CLIENTS)
