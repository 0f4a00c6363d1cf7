"""A raw HTTP/1.1 server on loopback for tests that need answers no real server gives.

:class:`LoopbackServer` listens on 127.0.0.1 (never another interface) on a port the
system picks, and runs a *script* on each connection it accepts, in a thread of its
own: a function that reads requests (:meth:`Connection.read_request`) and sends raw
bytes (:meth:`Connection.send`) as the test needs. One script serves every
connection, or a list gives one script to each connection in the order they are
accepted (connections past its end are closed at once). :func:`answer` and
:func:`hold` are the common scripts::

    with LoopbackServer([answer(None), answer(CONFLICT)]) as server:  # cut the first, answer the second
        client = server.account.create_cloud_table_client()
        ...
        assert len(server.requests) == 2

Ordering without clocks: :attr:`LoopbackServer.requests` keeps every request as it
arrived (head and body), and :meth:`LoopbackServer.wait_for_requests` waits until so
many have arrived; :attr:`LoopbackServer.stopping` is set when the server closes, so
a script that holds a connection waits on it and never outlives the test.
:meth:`LoopbackServer.close` (or leaving the ``with`` block) wakes every thread
blocked in accept or recv and joins them.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tablesdk import CloudStorageAccount

__all__ = ["Connection", "LoopbackServer", "Script", "answer", "hold", "unused_port"]


class Connection:
    """One accepted connection, as a script sees it."""

    def __init__(self, sock: socket.socket, server: LoopbackServer) -> None:
        self.sock = sock
        self.server = server
        self._pending = b""

    def read_request(self) -> bytes | None:
        """The next request on this connection (head and the ``Content-Length`` body), recorded
        in :attr:`LoopbackServer.requests`; None when the client closed (or reset) first."""
        try:
            while b"\r\n\r\n" not in self._pending:
                data = self.sock.recv(65536)
                if not data:
                    return None
                self._pending += data
            head, _, rest = self._pending.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(rest) < length:
                data = self.sock.recv(65536)
                if not data:
                    return None
                rest += data
        except OSError:
            return None
        request = head + b"\r\n\r\n" + rest[:length]
        self._pending = rest[length:]
        self.server._record(request)
        return request

    def send(self, data: bytes) -> bool:
        """Send raw bytes; False when the client has gone (what a test of giving up wants)."""
        try:
            self.sock.sendall(data)
        except OSError:
            return False
        return True


#: What the server does with one connection; the connection is closed when it returns.
Script = Callable[[Connection], None]


def answer(response: bytes | None, *, keep_alive: bool = False) -> Script:
    """A script that reads a request and sends ``response`` (None: closes without answering);
    with ``keep_alive`` it answers every request on the connection the same way."""

    def script(connection: Connection) -> None:
        while connection.read_request() is not None:
            if response is None or not connection.send(response) or not keep_alive:
                return

    return script


def hold(connection: Connection) -> None:
    """A script that reads a request and never answers (until the server closes)."""
    if connection.read_request() is not None:
        connection.server.stopping.wait()


class LoopbackServer:
    """Runs ``scripts`` on the connections it accepts on 127.0.0.1 (see the module docstring)."""

    def __init__(self, scripts: Script | Sequence[Script]) -> None:
        self._scripts = scripts
        self.requests: list[bytes] = []
        self.connections = 0
        self.stopping = threading.Event()
        self._arrived = threading.Condition()
        self._open: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def account(self) -> CloudStorageAccount:
        """The development storage account with its table endpoint here."""
        # Imported here: tests/conftest.py takes unused_port from this module without the package.
        from tablesdk import CloudStorageAccount
        from tablesdk.devstore import DEVSTORE_ACCOUNT, DEVSTORE_KEY

        return CloudStorageAccount.parse(
            f"DefaultEndpointsProtocol=http;AccountName={DEVSTORE_ACCOUNT};AccountKey={DEVSTORE_KEY};"
            f"TableEndpoint={self.url}/{DEVSTORE_ACCOUNT}"
        )

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> bool:
        """Wait until ``count`` requests have arrived; False if ``timeout`` ran out first."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self.requests) >= count, timeout)

    def _record(self, request: bytes) -> None:
        with self._arrived:
            self.requests.append(request)
            self._arrived.notify_all()

    def _script_for(self, number: int) -> Script | None:
        if callable(self._scripts):
            return self._scripts
        return self._scripts[number] if number < len(self._scripts) else None

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:  # closed
                return
            with self._arrived:
                if self.stopping.is_set():
                    sock.close()
                    return
                self._open.append(sock)
                script = self._script_for(self.connections)
                self.connections += 1
            thread = threading.Thread(target=self._serve, args=(sock, script), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket, script: Script | None) -> None:
        with sock:
            if script is not None:
                script(Connection(sock, self))

    def close(self) -> None:
        """Stop accepting, wake every thread blocked in accept or recv, and join them."""
        self.stopping.set()
        with self._arrived:
            sockets = [self.listener, *self._open]
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept or recv
            except OSError:
                pass
        self.listener.close()
        self._threads[0].join(timeout=10)  # the accept thread: no connection thread starts after it
        for thread in self._threads[1:]:
            thread.join(timeout=10)

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released: a connection to it is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
